"""ui/keep.py: the app's kept arrays held to a fixed number of bytes, least recently used out first, read-only."""

import threading

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ui.compute import VariantRun
from ui.keep import Keeper, NotKept, held_bytes


def test_held_bytes_counts_the_arrays_of_a_value_and_freezes_them():
    out = np.zeros((4, 8), np.float32)
    run = VariantRun(out, "emulator", None, None, 0.1)
    assert held_bytes(run) == 128 and held_bytes([out, (out, {"a": out})]) == 384 and held_bytes("text") == 0
    with pytest.raises(ValueError):
        out[0, 0] = 1.0  # kept values are shared by the sessions


def test_the_least_recently_used_leaves_first():
    keep = Keeper(300)
    for name in "abc":
        keep.put(name, np.zeros(100, np.uint8))
    keep.get("a")  # now the most recently used
    keep.put("d", np.zeros(100, np.uint8))
    assert keep.get("a") is not None and keep.held == 300
    with pytest.raises(NotKept):
        keep.get("b")


def test_a_value_larger_than_the_store_is_returned_but_not_kept():
    keep = Keeper(100)
    big = np.zeros(101, np.uint8)
    assert keep.put("big", big) is big and keep.held == 0
    with pytest.raises(NotKept):
        keep.get("big")


@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 400)), max_size=60), st.integers(0, 1000))
def test_what_is_held_never_exceeds_the_limit_and_is_counted_exactly(puts, limit):
    keep = Keeper(limit)
    for key, size in puts:
        keep.put(key, np.zeros(size, np.uint8))
        assert keep.held <= limit
    kept = []
    for key in range(10):
        try:
            kept.append(keep.get(key).nbytes)
        except NotKept:
            pass
    assert sum(kept) == keep.held


def test_sessions_putting_at_once_stay_within_the_limit():
    keep = Keeper(10_000)

    def session(i: int) -> None:
        for j in range(200):
            keep.get_or_make((i, j % 7), lambda: np.zeros(900, np.uint8))

    threads = [threading.Thread(target=session, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert keep.held <= 10_000 and keep.held % 900 == 0


def test_the_app_keeps_no_more_than_its_limit_and_redoes_what_left(monkeypatch):
    """Pages over several inputs with a store of 200 KB: the oldest runs leave, what is held stays within the
    limit, and a page whose runs have left is drawn again (run again) the same."""
    from test_app import charts, goto, make, ok

    from ui.keep import KEPT

    KEPT.clear()
    monkeypatch.setattr(KEPT, "limit", 200_000)
    at = make({"rows": "8", "cols": "500", "variants": "online_warp,fast"})
    first = charts(at)
    for seed in range(1, 4):
        at.number_input(key="seed").set_value(seed).run()
        ok(at)
        assert 0 < KEPT.held <= 200_000
    goto(at, "errors")
    ok(at)
    at.number_input(key="seed").set_value(0).run()
    goto(at, "outputs")
    ok(at)
    assert charts(at) == first and KEPT.held <= 200_000

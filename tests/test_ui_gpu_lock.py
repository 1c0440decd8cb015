"""GPU timing is serialised across sessions: two sessions press their benchmark buttons together and the
benchmarks run one after the other, the second saying it waits for the GPU. No GPU needed: the backend
info claims a GPU (as tests/test_topk_page.py does) and explorer.bench.run / bench_topk are fakes that
record when they start and end and hold the (fake) GPU until the test lets them go: the first is let go
only once the second session is seen waiting, so the order is forced, not timed."""

import threading
import time

import pytest

pytest.importorskip("streamlit")
from streamlit.delta_generator import DeltaGenerator
from test_app import charts, goto, make, ok  # the AppTest page helpers

import explorer.bench
from ui import compute, gpu_lock

HOLD_S = 1.0  # the first benchmark goes on this long after the second session is seen waiting
TIMEOUT_S = 180  # for an AppTest run, a thread, a wait: fixed and generous (a loaded 2-core box runs these)
QUERY = {"rows": "4", "cols": "100", "variants": "online_warp"}


def _row(name, kind, rows, cols, dtype, k=None) -> dict:
    r = {
        "name": name,
        "kind": kind,
        "dtype": dtype,
        "acc": "float32",
        "rows": rows,
        "cols": cols,
        "block_size": 0,
        "median_us": 10.0,
        "p10_us": 9.0,
        "p90_us": 11.0,
        "gbps": 100.0,
        "pct_copy": None,
        "bytes_moved": 1000,
        "reads_per_element": None,
        "writes_per_element": None,
        "max_rel": 1e-7,
    }
    return r if k is None else {**r, "k": k}


class FakeGPU:
    """explorer.bench.run and bench_topk that log (what, start, end) and end only once `release` is set."""

    def __init__(self):
        self.log: list[tuple[str, float, float]] = []
        self.started = threading.Event()
        self.release = threading.Event()

    def _busy(self, what: str, progress) -> None:
        start = time.perf_counter()
        self.started.set()
        progress(0.5, "timing (fake)")
        assert self.release.wait(TIMEOUT_S), "the fake benchmark was never let go"
        self.log.append((what, start, time.perf_counter()))

    def run(self, variants, shapes, dtypes, acc="float32", block_size=None, peers=True, progress=None):
        self._busy("run", progress)
        (rows, cols), dtype = shapes[0], dtypes[0]
        return {
            "schema": explorer.bench.SCHEMA,
            "meta": {"gpu": "FAKE GPU (timing run)", "date": "2025-01-01"},
            "results": [_row(v, "variant", rows, cols, dtype) for v in variants],
        }

    def bench_topk(self, shapes, ks, dtypes, peers=True, progress=None):
        self._busy("bench_topk", progress)
        (rows, cols), k, dtype = shapes[0], ks[0], dtypes[0]
        return {
            "schema": explorer.bench.SCHEMA,
            "meta": {"gpu": "FAKE GPU (top-k run)", "date": "2025-01-01"},
            "results": [
                _row(n, "peer" if n == "torch" else "variant", rows, cols, dtype, k)
                for n in ("topk_fused", "topk_unfused", "torch")
            ],
        }


@pytest.fixture
def fake_gpu(monkeypatch):
    monkeypatch.setenv("EXPLORER_BACKEND", "emulator")  # the pages' own kernels run on the emulator
    fake = FakeGPU()
    monkeypatch.setattr(
        compute, "backend_info", lambda: {"backend": "cuda", "gpu": "FAKE GPU", "cuda_runtime": "12.8", "cupy": "13.6"}
    )
    monkeypatch.setattr(explorer.bench, "run", fake.run)
    monkeypatch.setattr(explorer.bench, "bench_topk", fake.bench_topk)
    shown: list[str] = []
    info = DeltaGenerator.info

    def spy(self, body, *args, **kwargs):  # every st.info of every session, as it is drawn
        shown.append(str(body))
        return info(self, body, *args, **kwargs)

    monkeypatch.setattr(DeltaGenerator, "info", spy)
    fake.shown = shown
    assert not gpu_lock.GPU_LOCK.locked()
    yield fake
    assert not gpu_lock.GPU_LOCK.locked(), "a session kept the GPU"


def _waiting_shown(fake: FakeGPU) -> bool:
    return any(t.startswith(gpu_lock.WAITING) for t in fake.shown)


def _press_together(fake: FakeGPU, first, second) -> None:
    """Press first's button (AppTest, key); once the first benchmark holds the (fake) GPU, second's; once the
    second session says it waits for the GPU (and HOLD_S more), let the first benchmark end."""
    errors = []

    def press(at, key):
        try:
            at.button(key=key).click().run(timeout=TIMEOUT_S)
        except Exception as exc:  # reported in the main thread
            errors.append(exc)

    a = threading.Thread(target=press, args=first)
    b = threading.Thread(target=press, args=second)
    try:
        a.start()
        assert fake.started.wait(TIMEOUT_S), "the first benchmark did not start"
        assert gpu_lock.GPU_LOCK.locked()
        b.start()
        deadline = time.monotonic() + TIMEOUT_S
        while not _waiting_shown(fake):
            assert b.is_alive() and time.monotonic() < deadline, ("the second session never waited", errors)
            time.sleep(0.05)
        # the second session waits from before its notice was seen until after the release: HOLD_S at least
        time.sleep(HOLD_S)
    finally:
        fake.release.set()  # whatever happened, no benchmark is left holding the GPU
        a.join(TIMEOUT_S)
        b.join(TIMEOUT_S)
    assert not a.is_alive() and not b.is_alive(), "a session's run did not end"
    assert not errors, errors


def _check_serialised(fake: FakeGPU, waiting_at) -> None:
    assert len(fake.log) == 2, fake.log
    (_, _, first_end), (_, second_start, _) = sorted(fake.log, key=lambda r: r[1])
    assert first_end <= second_start, f"benchmarks overlapped: {fake.log}"
    assert _waiting_shown(fake), fake.shown
    waited = [c.value for c in waiting_at.caption if c.value.startswith("Waited ")]
    assert waited and "another session was benchmarking" in waited[0]
    assert float(waited[0].split()[1]) >= HOLD_S - 0.05  # the caption rounds to 0.1 s


def test_timing_and_topk_benchmarks_do_not_overlap(fake_gpu):
    timing = goto(make(QUERY), "timing")
    topk = goto(make(QUERY), "topk")
    ok(timing)
    ok(topk)
    _press_together(fake_gpu, (timing, "bench_run"), (topk, "tk_bench_run"))
    ok(timing)
    ok(topk)
    assert [w for w, _, _ in sorted(fake_gpu.log, key=lambda r: r[1])] == ["run", "bench_topk"]
    _check_serialised(fake_gpu, topk)
    assert not [c for c in timing.caption if c.value.startswith("Waited ")]  # the first had the GPU at once
    assert set(timing.dataframe[0].value["source"]) == {"FAKE GPU (timing run)"}
    assert "FAKE GPU (top-k run)" in [t.get("name") for t in charts(topk)[-1]["data"]]


def test_two_timing_sessions_take_turns(fake_gpu):
    one = goto(make(QUERY), "timing")
    two = goto(make({**QUERY, "variants": "online_block"}), "timing")
    _press_together(fake_gpu, (one, "bench_run"), (two, "bench_run"))
    ok(one)
    ok(two)
    _check_serialised(fake_gpu, two)
    # each session shows its own run
    assert set(one.dataframe[0].value["name"]) == {"online_warp"}
    assert set(two.dataframe[0].value["name"]) == {"online_block"}


def test_a_free_gpu_is_taken_without_waiting(fake_gpu):
    at = goto(make(QUERY), "topk")
    fake_gpu.release.set()  # nothing to wait for: the benchmark ends at once
    at.button(key="tk_bench_run").click().run(timeout=TIMEOUT_S)
    ok(at)
    assert len(fake_gpu.log) == 1
    assert not any(t.startswith(gpu_lock.WAITING) for t in fake_gpu.shown)
    assert not [c for c in at.caption if c.value.startswith("Waited ")]

"""Long emulated runs: rows in batches (bit-identical to one pass), progress after each batch, a stop between
batches, and the time estimate a request is held to (explorer.budget). Nothing here times anything."""

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import explorer
from explorer import budget, reserve
from explorer.backends import emulator
from explorer.numerics import dtype_name

# odd shapes on purpose (batches of unequal rows, partly filled lanes), and rows with NaN, inf and -inf
CASES = [("nonfinite", 7, 33), ("causal_mask", 5, 1000), ("normal", 12, 257)]
BATCHES = [2, 3, 100]  # 100: more batches than rows, one row each


class Stop(Exception):
    pass


def emulate(
    key: str, x: np.ndarray, acc: str = "float32", trace_row: int | None = None, batches: int = 1, progress=None
):
    v = explorer.VARIANTS[key]
    launch = v.launch(*x.shape, None, dtype_name(x.dtype))
    return emulator.run(v, launch, x, acc, trace_row, batches, progress)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("key", list(explorer.VARIANTS))
@pytest.mark.parametrize(("dist", "rows", "cols"), CASES)
def test_batched_rows_give_the_same_bits_as_one_pass(key, dist, rows, cols):
    x = explorer.make_input(dist, rows, cols, seed=3)
    whole, _ = emulate(key, x)
    for batches in BATCHES:
        out, _ = emulate(key, x, batches=batches)
        assert same_bits(out, whole), (key, dist, batches)


@pytest.mark.parametrize("key", [k for k, v in explorer.VARIANTS.items() if "float16" in v.accumulators])
def test_batched_rows_give_the_same_bits_in_half_precision(key):
    x = explorer.make_input("normal", 9, 130, dtype="float16", seed=1)
    whole, _ = emulate(key, x, acc="float16")
    assert same_bits(emulate(key, x, acc="float16", batches=4)[0], whole)


@pytest.mark.parametrize("key", [k for k, v in explorer.VARIANTS.items() if v.traceable])
def test_a_batched_trace_is_the_one_pass_trace(key):
    x = explorer.make_input("normal", 10, 300, seed=2)
    for row in (0, 4, 9):  # first batch, a middle one, the last (shorter) one
        _, whole = emulate(key, x, trace_row=row)
        _, batched = emulate(key, x, trace_row=row, batches=3)
        for field in dataclasses.fields(whole):
            assert same_bits(getattr(batched, field.name), getattr(whole, field.name)), (key, row, field.name)


def test_progress_is_heard_after_every_batch_rising_to_all_rows():
    x = explorer.make_input("normal", 10, 64)
    heard = []
    emulate("online_warp", x, batches=4, progress=lambda done, rows: heard.append((done, rows)))
    assert heard == [(3, 10), (6, 10), (9, 10), (10, 10)]


def test_progress_without_batches_is_heard_once():
    heard = []
    emulate("naive", explorer.make_input("normal", 3, 50), progress=lambda done, rows: heard.append((done, rows)))
    assert heard == [(3, 3)]


def test_a_progress_callback_that_raises_stops_the_run_after_that_batch():
    x = explorer.make_input("normal", 20, 64)
    calls = []

    def stop_after_two(done, rows):
        calls.append(done)
        if len(calls) == 2:
            raise Stop

    with pytest.raises(Stop):
        emulate("online_block", x, batches=5, progress=stop_after_two)
    assert calls == [4, 8]  # no batch ran after the stop


def test_softmax_runs_the_emulation_in_row_batches_and_reports_progress(monkeypatch):
    x = explorer.make_input("normal", 11, 200)
    monkeypatch.setattr(budget, "row_batches", lambda *args: 4)
    heard = []
    r = explorer.softmax(x, "online_warp", backend="emulator", progress=lambda d, n: heard.append(d))
    assert heard == [3, 6, 9, 11] and heard == sorted(heard)
    assert same_bits(r.out, explorer.softmax(x, "online_warp", backend="emulator").out)


def test_a_stopped_softmax_releases_its_memory(monkeypatch):
    monkeypatch.setattr(budget, "row_batches", lambda *args: 3)
    held = reserve.RUNS.held

    def stop(done, rows):
        assert reserve.RUNS.held > held  # the run's reservation is held while it runs
        raise Stop

    with pytest.raises(Stop):
        explorer.softmax(explorer.make_input("normal", 9, 100), "naive", backend="emulator", progress=stop)
    assert reserve.RUNS.held == held


def test_a_progress_that_is_not_a_function_is_refused_in_words():
    with pytest.raises(explorer.InvalidInput, match="progress must be a function"):
        explorer.softmax(explorer.make_input("normal", 2, 8), "naive", backend="emulator", progress=3)


# --- the time model -----------------------------------------------------------------------------------


def seconds(key: str, rows: int, cols: int, dtype: str = "float32", acc: str = "float32") -> float:
    return budget.emulation_seconds(explorer.VARIANTS[key], rows, cols, dtype, acc)


@pytest.mark.parametrize("key", list(explorer.VARIANTS))
def test_the_estimate_grows_with_rows_and_cols_and_narrow_types(key):
    assert 0 < seconds(key, 8, 1000) < seconds(key, 8000, 1000)
    assert seconds(key, 8, 1000) < seconds(key, 8, 100_000)
    if "float16" in explorer.VARIANTS[key].accumulators:
        assert seconds(key, 64, 1000, "float16", "float16") > seconds(key, 64, 1000)


def test_a_large_emulation_is_estimated_in_minutes_and_a_small_one_in_milliseconds():
    assert seconds("online_thread", 16384, 65536) > 60
    assert sum(seconds(k, 8, 1000) for k in explorer.VARIANTS) < 1


@pytest.mark.parametrize(("rows", "cols"), [(1, 10), (100_000, 100), (4096, 32768), (2, 10**7), (10**6, 1000)])
@pytest.mark.parametrize("key", list(explorer.VARIANTS))
def test_row_batches_are_about_a_second_and_cost_at_most_a_quarter_more(key, rows, cols):
    v = explorer.VARIANTS[key]
    launch = v.launch(rows, cols)
    n = budget.row_batches(v, launch, rows, cols, "float32", "float32")
    assert 1 <= n <= rows
    one_pass = budget.emulation_seconds(v, rows, cols, "float32") - (n - 1) * per_batch(v, launch, cols)
    if n > 1:
        assert (n - 1) * per_batch(v, launch, cols) <= budget.BATCH_OVERHEAD * one_pass + 1e-9
        assert one_pass / n >= budget.BATCH_SECONDS / 2


def per_batch(v, launch, cols: int) -> float:
    return budget.emulation_terms(v, launch, 1, cols, "float32", "float32")[1]


def test_many_rows_give_many_batches_and_few_long_rows_one():
    v = explorer.VARIANTS["online_warp"]
    assert budget.row_batches(v, v.launch(10**6, 1000), 10**6, 1000, "float32", "float32") > 10
    v = explorer.VARIANTS["online_thread"]
    assert budget.row_batches(v, v.launch(2, 10**6), 2, 10**6, "float32", "float32") == 1


def traced(key: str, cols: int, backend: str = "emulator", rows: int = 1) -> float:
    return budget.run_seconds(explorer.VARIANTS[key], rows, cols, "float32", trace=True, backend=backend)


@pytest.mark.parametrize("key", [k for k, v in explorer.VARIANTS.items() if v.traceable])
def test_a_trace_adds_its_replay_on_either_backend(key):
    v = explorer.VARIANTS[key]
    untraced = budget.run_seconds(v, 1, 4096, "float32")
    assert untraced == seconds(key, 1, 4096) and budget.run_seconds(v, 1, 4096, "float32", backend="cuda") == 0
    assert traced(key, 4096) > untraced and 0 < traced(key, 4096, "cuda") < traced(key, 4096)
    assert traced(key, 4096) < traced(key, 65536) and traced(key, 4096, "cuda") < traced(key, 65536, "cuda")


def test_long_traced_rows_are_estimated_over_the_budget():
    # the Step page's 1 × 2,000,000 online_thread row, and the lab's 2^20 points: minutes, even on a GPU (the
    # float64 replay walks the lane's steps in Python on the host)
    assert traced("online_thread", 2_000_000) > 2 * budget.DEFAULT_RUN_SECONDS
    assert traced("online_thread", 2**20, "cuda") > budget.DEFAULT_RUN_SECONDS / 6
    assert 5 < traced("online_thread", 10**5) < 30  # ~13 s measured on this machine class
    assert traced("online_block", 10**5) < 1


def test_the_time_budget_setting(monkeypatch):
    monkeypatch.delenv(budget.TIME_SETTING, raising=False)
    assert budget.time_budget() == budget.DEFAULT_RUN_SECONDS and budget.settings_problems() == []
    monkeypatch.setenv(budget.TIME_SETTING, "2.5")
    assert budget.time_budget() == 2.5 and budget.settings_problems() == []
    for bad in ("0", "-1", "soon", "inf", "nan"):
        monkeypatch.setenv(budget.TIME_SETTING, bad)
        assert budget.time_budget() == budget.DEFAULT_RUN_SECONDS
        assert [
            p for p in explorer.checks.settings_problems() if p.startswith(f"{budget.TIME_SETTING}={bad!r} is refused")
        ]


# --- the app: the estimate, a refusal to confirm, progress, and a stop that leaves the page usable ------------

RUN_TIMEOUT = 180  # AppTest's limit for one script run: generous, a busy box may be many times slower
QUERY = {"rows": "4", "cols": "100", "variants": "naive,online_warp"}


@pytest.fixture
def app(monkeypatch):
    """The Outputs page on the emulator, opened on QUERY; the test sets the environment first."""
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    from ui import run_control

    monkeypatch.setenv("EXPLORER_BACKEND", "emulator")

    def open_app(seed: int):
        """seed: each test's own input, so no run is already in the cache (shared by the process)."""
        at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app.py"), default_timeout=RUN_TIMEOUT)
        at.query_params.update({**QUERY, "seed": str(seed)})
        return at.run()

    return open_app, run_control


def texts(at, kind: str) -> str:
    return " ".join(str(e.value) for e in at.get(kind))


def settings_kept(at) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert at.number_input(key="rows").value == 4 and at.number_input(key="cols").value == 100
    assert at.multiselect(key="variants").value == ["naive", "online_warp"]
    assert at.query_params["rows"] == "4" and at.query_params["variants"] == "naive,online_warp"


def test_a_run_over_the_time_budget_is_refused_in_words_until_confirmed(app, monkeypatch):
    open_app, _ = app
    monkeypatch.setenv(budget.TIME_SETTING, "0.000001")  # every run is over it, whatever the machine
    at = open_app(101)
    words = texts(at, "warning")
    assert "Not run yet" in words and "in the CPU emulation" in words and "over this server's budget" in words
    assert not at.get("plotly_chart")
    settings_kept(at)
    at.button(key="run_anyway").click().run()
    assert at.get("plotly_chart") and "Not run yet" not in texts(at, "warning")
    settings_kept(at)
    at.number_input(key="cols").set_value(101).run()  # another configuration asks again
    assert "Not run yet" in texts(at, "warning") and not at.get("plotly_chart")


def test_a_long_run_shows_rows_done_elapsed_and_left(app, monkeypatch):
    open_app, run_control = app
    monkeypatch.setattr(run_control, "PROGRESS_SECONDS", 0.0)  # show the progress area for this small run
    monkeypatch.setattr(run_control.Progress, "close", lambda self: None)  # and keep it, to read its last words
    at = open_app(102)
    bar = at.get("progress")[0].proto
    assert "online_warp (2 of 2), rows 4 of 4" in bar.text and "so far" in bar.text and bar.value == 100
    assert at.button(key="run_stop").label == "Stop"


def test_stop_ends_the_run_and_the_page_stays_usable(app, monkeypatch):
    open_app, run_control = app
    monkeypatch.setattr(run_control, "PROGRESS_SECONDS", 0.0)
    monkeypatch.setattr(run_control.Progress, "close", lambda self: None)  # the Stop button stays to be clicked
    at = open_app(103)
    at.button(key="run_stop").click().run()
    assert "Stopped before the run finished" in texts(at, "warning") and not at.get("plotly_chart")
    settings_kept(at)
    at.button(key="run_again").click().run()
    assert at.get("plotly_chart") and "Stopped" not in texts(at, "warning")
    settings_kept(at)


def test_a_run_past_its_deadline_stops_between_batches_and_says_so(app, monkeypatch):
    open_app, run_control = app
    ticks = iter(range(0, 10**6, 100))  # each look at the clock is 100 s later: past 3 × 60 s at the third
    monkeypatch.setattr(run_control, "clock", lambda: next(ticks))
    monkeypatch.setattr(run_control, "PROGRESS_SECONDS", 0.0)
    at = open_app(104)
    words = texts(at, "warning")
    assert "Stopped after" in words and "passed 3× its time budget of 60 s" in words
    assert not at.get("plotly_chart") and not at.get("progress")
    settings_kept(at)
    monkeypatch.setattr(run_control, "clock", lambda: 0.0)  # time stands still: nothing overruns
    at.button(key="run_again").click().run()
    assert at.get("plotly_chart") and "Stopped" not in texts(at, "warning")
    settings_kept(at)

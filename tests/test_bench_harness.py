"""The benchmark harness without a GPU: device-time aggregation from made-up profiler events, % of copy
and the read-once floor from made-up rows, peers absent without torch, load() of old and new files.
The GPU paths themselves are the @pytest.mark.gpu tests at the end."""

import contextlib
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

import explorer
from explorer import bench, bench_topk, devicetime, harness, peers
from explorer.backends.cuda import POISON
from explorer.errors import InvalidInput
from explorer.numerics import DTYPES, FORMATS, reference, softmax_bound
from explorer.registry import VARIANTS

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"


def kernel(name: str, dur: float, cat: str = "kernel") -> dict:
    return {"ph": "X", "cat": cat, "name": name, "ts": 0.0, "dur": dur}


TRACE = [
    kernel("softmax_fast", 10.0),
    kernel("softmax_fast", 12.0),
    kernel("Memset (Device)", 50.0, "gpu_memset"),
    kernel("Memcpy DtoD (Device -> Device)", 30.0, "gpu_memcpy"),
    kernel("cudaLaunchKernel", 4.0, "cuda_runtime"),
    kernel("aten::softmax", 40.0, "gpu_user_annotation"),
    {"ph": "f", "cat": "ac2g", "name": "flow"},
    {"ph": "i", "cat": "kernel", "name": "instant", "dur": 99.0},
]


def test_rotation_covers_four_l2s_within_its_bounds(monkeypatch):
    monkeypatch.setattr(harness.cuda, "device_info", lambda: {"l2_bytes": 60 << 20})
    assert harness.rotation_buffers(1 << 20, 64) == 64  # 240 wanted, capped
    assert harness.rotation_buffers(16 << 20, 64) == 15  # ceil(240 / 16)
    assert harness.rotation_buffers(1 << 30, 64) == 1  # one input larger than 4x L2
    assert harness.rotation_buffers(1 << 30, 32, least=2) == 2


def test_per_call_sums_kernels_only_and_divides_by_calls():
    assert devicetime.per_call_us(TRACE, 2) == pytest.approx(11.0)  # (10 + 12) / 2: no memset, memcpy, runtime
    assert devicetime.per_call_us(TRACE, 2, devicetime.COPY) == pytest.approx(26.0)  # the copy counts its memcpy
    assert devicetime.per_call_us([kernel("Memset (Device)", 5.0, "gpu_memset")], 1) is None  # nothing recorded


def test_summarize_takes_median_and_spread_over_batches():
    got = devicetime.summarize([5.0, 1.0, 3.0, 2.0, 4.0])
    assert got == {"device_us": 3.0, "device_p10_us": pytest.approx(1.4), "device_p90_us": pytest.approx(4.6)}
    assert devicetime.summarize([1.0, None, 2.0]) is None  # a batch without records: no device time at all
    assert devicetime.summarize([]) is None


def test_calls_per_batch_aims_at_a_fixed_amount_of_work():
    assert devicetime.calls_per_batch(200.0) == devicetime.BATCH_US // 200
    assert devicetime.calls_per_batch(1.0) == devicetime.MAX_CALLS
    assert devicetime.calls_per_batch(1e6) == 1


def timeline(durations: list[list[float]], gap: float = 6000.0, spacing: float = 30.0) -> list[dict]:
    """Kernel records for batches of launches: `spacing` µs apart within a batch, `gap` µs idle between."""
    events, t = [], 0.0
    for batch in durations:
        for d in batch:
            events.append({**kernel("k", d), "ts": t})
            events.append({**kernel("Memset (Device)", 1.0, "gpu_memset"), "ts": t + d + 1})
            t += d + spacing
        t += gap
    return events


def test_split_batches_cuts_at_the_idle_gaps_between_batches():
    events = timeline([[5.0, 5.0], [6.0, 6.0], [7.0, 7.0]])
    groups = devicetime.split_batches(list(reversed(events)), 3)  # any order: sorted by time
    assert [[e["dur"] for e in g] for g in groups] == [[5.0, 5.0], [6.0, 6.0], [7.0, 7.0]]
    assert devicetime.split_batches(events, 2) is None  # three batches where two were expected: unequal groups
    assert [len(g) for g in devicetime.split_batches(timeline([[5.0, 5.0]]), 1)] == [2]  # one batch, no cut
    assert devicetime.split_batches(timeline([[5.0], [5.0]], gap=100.0), 2) is None  # gap too short to trust
    assert devicetime.split_batches([], 1) is None


def test_a_host_stall_inside_a_batch_is_not_a_cut():
    """CUPTI stalls the host inside a batch now and then (3 ms seen on the H200, over the 2.5 ms a cut needs):
    the batches - 1 longest gaps are still the sleeps between batches, and the durations are unchanged."""
    events = timeline([[5.0, 5.0, 5.0], [6.0, 6.0, 6.0], [7.0, 7.0, 7.0]])
    for stall in (3000.0, 9000.0):  # under and over the 6 ms sleeps between batches
        stalled = [{**e, "ts": e["ts"] + (stall if e["ts"] > 40.0 else 0.0)} for e in events]  # after batch 0's 2nd
        groups = devicetime.split_batches(stalled, 3)
        assert [[e["dur"] for e in g] for g in groups] == [[5.0] * 3, [6.0] * 3, [7.0] * 3]


class FakeProfiler:
    """torch.profiler's shape: profile() as a context manager whose export_chrome_trace writes the records
    of the session; each launch adds a kernel (2 µs + the batch number) and a memset of setup, and the
    harness's sleep between batches moves the fake GPU clock on instead of sleeping."""

    ProfilerActivity = type("ProfilerActivity", (), {"CUDA": "cuda"})

    def __init__(self):
        self.events: list[dict] = []
        self.clock, self.batch, self.sessions = 0.0, 0, 0

    @contextlib.contextmanager
    def profile(self, activities):
        assert activities == ["cuda"]
        self.sessions += 1
        yield self

    def launch(self, i: int) -> None:
        d = 3.0 + self.batch
        self.events += [
            {**kernel(f"k{i}", d), "ts": self.clock},
            {**kernel("Memset (Device)", 100.0, "gpu_memset"), "ts": self.clock + d},
        ]
        self.clock += d + 20.0

    def sleep(self, seconds: float) -> None:
        self.clock += seconds * 1e6
        self.batch += 1

    def export_chrome_trace(self, path: str) -> None:
        Path(path).write_text(json.dumps({"traceEvents": self.events}))


def test_measure_profiles_batches_in_one_session_and_summarizes(monkeypatch):
    fake = FakeProfiler()
    monkeypatch.setattr(devicetime, "profiler", lambda: fake)
    monkeypatch.setattr(devicetime.time, "sleep", fake.sleep)
    synced = []
    got = devicetime.measure(fake.launch, buffers=3, calls=4, sync=lambda: synced.append(1), batches=5)
    assert fake.sessions == 1 and len(synced) == 6  # before the session and after every batch
    assert got["device_us"] == pytest.approx(5.0)  # batches run 3..7 µs per kernel: median 5, memsets left out
    assert got["device_p10_us"] < got["device_us"] < got["device_p90_us"]


class StallingProfiler(FakeProfiler):
    """A session's records only; in the first `stalled` sessions the batches run together (no idle gap)."""

    def __init__(self, stalled: int):
        super().__init__()
        self.stalled = stalled

    @contextlib.contextmanager
    def profile(self, activities):
        self.events = []
        with super().profile(activities):
            yield self

    def sleep(self, seconds: float) -> None:
        if self.sessions > self.stalled:
            super().sleep(seconds)


@pytest.mark.parametrize(("stalled", "sessions", "measured"), [(1, 2, True), (2, 2, False), (0, 2, True)])
def test_a_session_whose_batches_run_together_is_measured_again(monkeypatch, stalled, sessions, measured):
    fake = StallingProfiler(stalled)
    monkeypatch.setattr(devicetime, "profiler", lambda: fake)
    monkeypatch.setattr(devicetime.time, "sleep", fake.sleep)
    got = devicetime.measure(fake.launch, buffers=3, calls=4, sync=lambda: None, batches=5, sessions=sessions)
    assert fake.sessions == min(stalled + 1, sessions)
    assert (got is not None) == measured
    if measured:
        assert got["device_us"] == pytest.approx(5.0)


def test_without_torch_there_is_no_device_time_and_no_torch_peers(monkeypatch):
    monkeypatch.setattr(devicetime, "profiler", lambda: None)
    assert devicetime.measure(lambda i: None, 1, 1, lambda: None) is None
    monkeypatch.setattr(peers, "torch_module", lambda: None)
    assert peers.softmax_peers() == [] and peers.topk_peers(8) == []
    assert peers.version("no-such-distribution-for-the-explorer") is None


def test_device_times_give_pct_of_copy_from_device_time(monkeypatch):
    """add_device_times: the first row is the copy; % of copy (device) = copy's device time / the row's."""
    device = {"copy": 100.0, "fast": 125.0, "quack": None}
    monkeypatch.setattr(
        devicetime,
        "measure",
        lambda launch, *a, **k: (
            None if launch() is None else {"device_us": launch(), "device_p10_us": launch(), "device_p90_us": launch()}
        ),
    )
    rows = [{"name": n, "median_us": 130.0, "bytes_moved": 4e8} for n in device]
    harness.add_device_times([(r, lambda i=None, n=r["name"]: device[n], ()) for r in rows], buffers=1)
    copy, fast, quack = rows
    assert copy["pct_copy_device"] == pytest.approx(100.0) and fast["pct_copy_device"] == pytest.approx(80.0)
    assert fast["gbps_device"] == pytest.approx(4e8 / 125.0 / 1e3)
    assert quack["device_us"] is None and quack["pct_copy_device"] is None and quack["gbps_device"] is None


def test_floor_is_reading_the_logits_once_at_the_copys_rate():
    copy = {"median_us": 40.0, "device_us": 30.0}
    row = {"median_us": 25.0, "device_us": 20.0}
    bench_topk.add_floor(row, copy)
    assert row["floor_us"] == 20.0 and row["pct_floor"] == pytest.approx(80.0)
    assert row["floor_device_us"] == 15.0 and row["pct_floor_device"] == pytest.approx(75.0)
    failed = {"median_us": None, "device_us": None}
    bench_topk.add_floor(failed, {"median_us": 40.0, "device_us": None})
    assert failed["pct_floor"] is None and failed["floor_device_us"] is None and failed["pct_floor_device"] is None


def test_topk_peer_bytes_count_its_passes_and_int64_indices():
    lse = peers.TopkPeer("torch_lse", "2.9", "torch.topk + torch.logsumexp", lambda tx: (tx, tx), 2)
    assert lse.bytes_moved(4, 1000, 8, "bfloat16") == 2 * 4 * 1000 * 2 + 4 * 8 * (2 + 8)


def test_sweeps_and_topk_shapes():
    assert bench.sweep_shapes("odd") == [(134217, 1000), (26843, 5000), (2670, 50257), (883, 151936)]
    assert all(r * c <= bench.SWEEP_ELEMENTS for r, c in bench.sweep_shapes("cols") + bench.sweep_shapes("odd"))
    assert {b for b, _ in bench.TOPK_SHAPES} == {1, 64, 512, 4096}
    assert (64, 128256) in bench.TOPK_SHAPES and bench.bench_topk is bench_topk.bench_topk
    with pytest.raises(InvalidInput, match="cols, odd or rows"):
        bench.sweep_shapes("wide")


@pytest.mark.parametrize("path", sorted(RESULTS.glob("*.json")), ids=lambda p: p.name)
def test_existing_results_files_still_load(path):
    """Files from before device time (no device fields) and after it both load; device fields are numbers or None."""
    doc = bench.load(path.read_bytes())
    assert doc["results"]
    for r in doc["results"]:
        assert r.get("device_us") is None or r["device_us"] > 0


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda doc: doc.update(results=[]), "holds no results"),
        (lambda doc: doc["results"][0].update(rows="many"), "rows must be a whole number, got 'many'"),
        (lambda doc: doc["results"][0].update(cols=True), "cols must be a whole number"),
        (lambda doc: doc["results"][0].update(median_us="fast"), "median_us must be a number or null"),
        (lambda doc: doc["results"][0].update(kind=0), "kind must be text"),
        (lambda doc: doc["results"][0].update(k=0), "k must be a whole number"),
        (lambda doc: doc["results"][0].update(name=["x" * 1000]), "name must be text, got ['xxx"),
    ],
)
def test_a_malformed_result_is_refused_in_words(change, words):
    doc = json.loads(next(RESULTS.glob("topk.json")).read_text())
    change(doc)
    with pytest.raises(InvalidInput, match=re.escape(words)) as refused:
        bench.load(doc)
    assert len(str(refused.value)) < 200  # a long value from the file is cut


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),  # json.loads itself would raise RecursionError
        (b"[" * 5000, "nested too deeply"),
        ('{"schema": ' + '{"a": ' * 40 + "1" + "}" * 41, "nested too deeply"),  # under json's limit, over ours
        (
            {
                "schema": bench.SCHEMA,
                "meta": {},
                "results": [],
                "x": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],
            },
            "nested too deeply",
        ),
        (b"{nope", "not valid JSON at line 1, column 2"),
        (b"\xff\xfe\xfd", "not UTF-8 text"),
        ('{"schema": 1' + "0" * 5000 + "}", "a number too long"),
        (None, "JSON text or bytes, got NoneType"),
        (5, "JSON text or bytes, got int"),
        (["x"], "JSON text or bytes, got list"),
        (Path("x.json"), "JSON text or bytes, got PosixPath"),
    ],
)
def test_load_refuses_what_is_not_a_results_file_in_words(data, words):
    with pytest.raises(InvalidInput, match=re.escape(words)) as refused:
        bench.load(data)
    assert "codec" not in str(refused.value) and "Expecting" not in str(refused.value)  # json's words, not ours


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 2.5, -1])
def test_load_refuses_a_shape_that_is_not_a_whole_number(value):
    doc = json.loads(next(RESULTS.glob("topk.json")).read_text())
    doc["results"][0]["cols"] = value
    with pytest.raises(InvalidInput, match="a result's cols must be a whole number"):
        bench.load(bench.dumps(doc))  # NaN and Infinity as JSON writes them


def test_load_takes_bytearray_and_memoryview():
    data = (RESULTS / "topk.json").read_bytes()
    assert bench.load(bytearray(data)) == bench.load(memoryview(data)) == bench.load(data)


def new_doc() -> dict:
    ok = {
        "name": "quack",
        "kind": "peer",
        "dtype": "bfloat16",
        "acc": "float32",
        "rows": 8192,
        "cols": 16384,
        "block_size": 0,
        "median_us": 140.0,
        "p10_us": 139.0,
        "p90_us": 142.0,
        "gbps": 3835.0,
        "pct_copy": 92.7,
        "bytes_moved": 536870912,
        "reads_per_element": None,
        "writes_per_element": None,
        "max_rel": 3e-3,
        "launch": "quack.softmax.softmax_fwd(x)",
        "version": "0.2.1",
        "error": None,
        "device_us": 133.0,
        "device_p10_us": 132.5,
        "device_p90_us": 133.4,
        "gbps_device": 4036.5,
        "pct_copy_device": 95.0,
    }
    failed = harness.error_row(
        "quack",
        "bfloat16",
        "float32",
        1,
        2**24,
        "0.2.1",
        "quack.softmax.softmax_fwd(x)",
        "RuntimeError: shared memory " + "x" * 400,
    )
    return {
        "schema": bench.SCHEMA,
        "meta": {"gpu": "FAKE", "device_time": "torch.profiler (CUPTI kernel records)"},
        "results": [ok, failed],
    }


def test_new_results_with_device_time_versions_and_errors_load():
    doc = bench.load(bench.dumps(new_doc()))
    ok, failed = doc["results"]
    assert ok["version"] == "0.2.1" and ok["pct_copy_device"] == 95.0
    assert failed["median_us"] is None and failed["device_us"] is None and len(failed["error"]) == 300


@pytest.mark.parametrize(
    ("field", "value"), [("device_us", "fast"), ("pct_floor", True), ("version", 2), ("error", ["x"])]
)
def test_wrongly_typed_optional_fields_are_refused(field, value):
    doc = new_doc()
    doc["results"][0][field] = value
    with pytest.raises(InvalidInput, match=field):
        bench.load(doc)


# --- on a GPU ---------------------------------------------------------------------------------------------------


# The validation before timing, with NumPy standing in for CuPy (the same calls on host arrays).


@pytest.fixture
def numpy_as_cupy(monkeypatch):
    monkeypatch.setattr(bench.cuda, "cp", np)


def _checked(x, y, dtype="float32", acc="float32"):
    launch = VARIANTS["online_warp"].launch(*x.shape, None, dtype)
    ref64 = bench.reference_device(x, dtype)
    return bench.check_output("online_warp", launch, x, y, ref64, dtype, acc, POISON)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_a_right_output_is_checked_and_its_max_rel_kept(numpy_as_cupy, dtype):
    x = np.random.default_rng(0).standard_normal((4, 300)).astype(DTYPES[dtype])
    y = reference(x).astype(DTYPES[dtype])
    max_rel, problem = _checked(x, y, dtype)
    assert problem is None and max_rel == explorer.errors(y, x).max_rel
    assert 0 < max_rel <= FORMATS[dtype].unit_roundoff


@pytest.mark.parametrize(
    ("spoil", "words"),
    [
        (lambda y: y.__setitem__((1, 7), np.inf), "max_rel nan over the 1e-05 allowed"),  # inf where float64 is finite
        (lambda y: y.__setitem__((2, 3), np.nan), "max_rel nan over the 1e-05 allowed"),
        (lambda y: y.__setitem__((3, 0), y[3, 0] * 1.001), "max_rel 0.001 over the 1e-05 allowed"),
        (lambda y: y.__setitem__((0, 5), POISON), "left 1 outputs unwritten on 4×300 float32"),
    ],
)
def test_a_wrong_output_is_refused_before_it_is_timed(numpy_as_cupy, spoil, words):
    x = np.random.default_rng(1).standard_normal((4, 300)).astype(np.float32)
    y = reference(x).astype(np.float32)
    spoil(y)
    _, problem = _checked(x, y)
    assert problem is not None and re.search(re.escape(words), problem), problem


def test_the_bound_counts_max_abs_x_where_x_may_round_entering_the_accumulator(numpy_as_cupy):
    x = np.array([[0.5, -3.0, 2.0]], np.float32)
    launch = VARIANTS["online_warp"].launch(1, 3, None, "float32")
    assert bench.bound_device(launch, x, "float32", "float32") == softmax_bound(launch, x, "float32")
    with_x = bench.bound_device(launch, x, "float32", "float16")  # these x hold in fp16: softmax_bound counts none
    assert with_x == softmax_bound(launch, x, "float16") + 2 * 3.0 * FORMATS["float16"].unit_roundoff


@pytest.mark.gpu
def test_softmax_bench_rows_carry_device_time_and_peer_versions():
    doc = bench.run(["fast"], [(4096, 1024)], ["float32", "bfloat16"])
    bench.load(bench.dumps(doc))
    for r in doc["results"]:
        assert r["error"] is None, r
        assert (r["version"] is not None) == (r["kind"] == "peer")
        if peers.torch_module() is not None:  # device time needs torch.profiler
            assert r["device_p10_us"] <= r["device_us"] <= r["device_p90_us"], r
            assert 0 < r["pct_copy_device"] < 150
    names = {r["name"] for r in doc["results"]}
    assert {"copy", "fast"} <= names and ("torch" in names) == (peers.torch_module() is not None)


@pytest.mark.gpu
def test_topk_bench_times_a_copy_and_reports_the_floor():
    doc = bench.bench_topk([(64, 32000)], [1, 8], ["float32"])
    bench.load(bench.dumps(doc))
    copy = [r for r in doc["results"] if r["name"] == "copy"]
    assert len(copy) == 1 and copy[0]["k"] is None
    rows = [r for r in doc["results"] if r["name"] != "copy"]
    expected = {"topk_fused", "topk_unfused"} | ({"torch", "torch_lse"} if peers.torch_module() else set())
    assert {r["name"] for r in rows} == expected and {r["k"] for r in rows} == {1, 8}
    for r in rows:
        assert r["error"] is None, r
        assert r["floor_us"] == pytest.approx(copy[0]["median_us"] / 2)
        assert math.isclose(r["pct_floor"], 100 * r["floor_us"] / r["median_us"])


def test_fp32_accumulation_is_allowed_what_the_gpu_tests_allow_and_16_bit_its_bound(numpy_as_cupy):
    x = np.random.default_rng(2).standard_normal((2, 300)).astype(np.float32)
    launch = VARIANTS["online_warp"].launch(2, 300, None, "float32")
    bound = bench.bound_device(launch, x, "float32", "float32")
    assert bound < explorer.MAX_REL_FP32_ACC["float32"]
    assert bench.allowed_max_rel(launch, x, "float32", "float32") == explorer.MAX_REL_FP32_ACC["float32"]
    fp16 = softmax_bound(launch, x, "float16")  # these x round entering fp16: both count max|x|
    assert bench.allowed_max_rel(launch, x, "float32", "float16") == pytest.approx(fp16) and fp16 < 0.1


def test_a_variant_that_runs_wrong_gets_an_error_row_and_is_not_timed(numpy_as_cupy, monkeypatch):
    """naive's fp16 sum overflows on a wide row: outputs 0 where float64 is not. The row says so, with no times,
    and the run goes on to the next variant."""
    shape = object.__new__(bench.ShapeBench)
    shape.rows, shape.cols, shape.dtype, shape.acc = 4, 300, "float32", "float16"
    x = np.random.default_rng(3).standard_normal((4, 300)).astype(np.float32)
    shape.xs, shape.ys = [x], [np.empty_like(x)]
    shape.ref64, shape.poison = bench.reference_device(x, "float32"), np.float32(POISON)
    monkeypatch.setattr(bench.cuda, "launch", lambda v, g, x, y, *rest: y.fill(0.0))
    monkeypatch.setattr(harness, "time_launches", lambda *a: pytest.fail("a wrong output was timed"))
    row, launch = shape.time_variant(VARIANTS["naive"], None)
    assert launch is None and row["kind"] == "variant" and row["max_rel"] == 1.0
    assert row["error"].startswith("naive differs from float64 on 4×300 float32, acc float16: max_rel 1 over")
    assert row["median_us"] is None and row["device_us"] is None
    assert bench.load({**json.loads(json.dumps({"schema": bench.SCHEMA, "meta": {}, "results": [row]}))})


# --- timing and rounding on the device, with CuPy stood in for (no GPU needed) ------------------------------------


class FakeClockGPU:
    """cp with a GPU clock that moves only when a launch runs (`ms[i]` a launch on buffer i): events record it,
    get_elapsed_time reads it in ms, as CUDA events do. No wall clock is involved."""

    def __init__(self, ms: dict[int, float]):
        self.ms, self.clock, self.buffers_run = ms, 0.0, []
        gpu = self

        class Event:
            def record(self):
                self.at = gpu.clock

            def synchronize(self):
                pass

        stream = type("Stream", (), {"synchronize": lambda self: None})()
        self.cuda = type(
            "cuda",
            (),
            {
                "Event": Event,
                "get_elapsed_time": staticmethod(lambda s, e: e.at - s.at),
                "get_current_stream": staticmethod(lambda: stream),
            },
        )

    def launch(self, i: int) -> None:
        self.buffers_run.append(i)
        self.clock += self.ms[i]


@pytest.mark.parametrize(
    ("ms", "repeats"),
    [
        (0.01, 200),  # 0.5 s of 10 µs launches is 50,000: capped at 200
        (5.0, 100),  # 0.5 s / 5 ms
        (100.0, 20),  # at least 20
        (250.0, 3),  # a slow teaching kernel on a big problem: 3 say enough
    ],
)
def test_time_launches_gives_each_launch_in_us_rotating_the_buffers(monkeypatch, ms, repeats):
    gpu = FakeClockGPU(dict.fromkeys(range(3), ms))
    monkeypatch.setattr(harness.cuda, "cp", gpu)
    times = harness.time_launches(gpu.launch, buffers=3)
    assert len(times) == repeats and times == pytest.approx([1e3 * ms] * repeats)
    assert gpu.buffers_run == [0, 1] + [i % 3 for i in range(repeats)]  # warm-up, first timing, then in turn


def test_time_launches_times_each_launch_on_its_own_buffer(monkeypatch):
    gpu = FakeClockGPU({0: 1.0, 1: 2.0})
    monkeypatch.setattr(harness.cuda, "cp", gpu)
    times = harness.time_launches(gpu.launch, buffers=2, min_repeats=4, max_repeats=4)
    assert times.tolist() == [1000.0, 2000.0, 1000.0, 2000.0]
    assert harness.median_us(gpu.launch, 2) == 1500.0


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_round_on_device_rounds_to_nearest_even_as_numpy_does(numpy_as_cupy, dtype):
    """The benchmark's inputs are drawn in fp32 on the GPU and rounded there: to the nearest value of dtype, a tie
    to the even one (ml_dtypes and NumPy round so); bfloat16 comes back as its bits."""
    from explorer.geometry import DTYPES as DT

    rng = np.random.default_rng(4)
    x32 = rng.standard_normal(20000).astype(np.float32)
    ties = (np.arange(1, 2001, dtype=np.uint32) << 16 | 0x8000).view(np.float32)  # halfway between two bf16 values
    x32 = np.concatenate([x32, ties, -ties, np.float32([0.0, -0.0, 1.0, 65504.0])])
    rounded = harness.round_on_device(x32, dtype)
    want = x32.astype(DT[dtype])
    got = rounded if dtype == "float16" else rounded.view(DT["bfloat16"])
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    assert harness.round_on_device(x32, "float32") is x32


def test_a_result_row_derives_bandwidth_and_pct_of_copy_from_its_times():
    """The floor is reading x once and writing y once: 2·rows·cols·itemsize bytes; GB/s is those bytes over the
    median time, % of copy against the copy's GB/s measured in the same run; p10 and p90 are the times' percentiles."""
    shape = object.__new__(bench.ShapeBench)
    shape.rows, shape.cols, shape.dtype, shape.acc, shape.copy_gbps = 4, 1000, "bfloat16", "float32", 4.0
    times = np.array([8.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 9.0, 10.0, 11.0])  # median 6, p10 2, p90 10
    row = shape.row("fast", "variant", 0, times, 1, 1, 1e-6, "fast_warp")
    assert row["bytes_moved"] == 2 * 4 * 1000 * 2
    assert (row["median_us"], row["p10_us"], row["p90_us"]) == (6.0, 2.0, 10.0)
    assert row["gbps"] == pytest.approx(16000 / 6.0 / 1e3)  # bytes per µs is 1e-3 GB/s
    assert row["pct_copy"] == pytest.approx(100 * row["gbps"] / 4.0)
    assert (row["max_rel"], row["launch"], row["error"], row["reads_per_element"]) == (1e-6, "fast_warp", None, 1)
    shape.copy_gbps = None  # no copy measured: no % of it
    assert shape.row("fast", "variant", 0, times, 1, 1, 1e-6, "")["pct_copy"] is None


@pytest.mark.parametrize(
    "variants, dtypes, words",
    [
        (["nope"], ["float32"], ["unknown variant 'nope'", "choose one of", "fast"]),
        ([["fast"]], ["float32"], ["unknown variant"]),  # not a name: refused, not a TypeError from the lookup
        (["fast"], ["float64"], ["unknown dtype 'float64'", "bfloat16"]),
    ],
)
def test_bench_run_refuses_an_unknown_variant_or_dtype_before_timing_anything(monkeypatch, variants, dtypes, words):
    monkeypatch.setattr(bench.cuda, "available", lambda: True)  # the checks come before any GPU work
    monkeypatch.setattr(bench, "bench_shape", lambda *a, **k: pytest.fail("timed"))
    with pytest.raises(explorer.InvalidInput) as refused:
        bench.run(variants, [(4, 128)], dtypes)
    assert all(w in str(refused.value) for w in words), str(refused.value)


def test_a_timed_row_holds_its_times_median_and_spread_and_loads_as_a_result():
    """harness.result_row, which bench's and bench_topk's timed rows come from: the median and spread of the event
    times, the byte rate at the median, and every field bench.load asks for (a top-k row's k beside them)."""
    times = np.array([3.0, 1.0, 2.0, 7.5, 4.25, 9.0, 1.5])
    shape = ("bfloat16", "float32", 4, 128, 256)
    softmax_row = harness.result_row("fast", "variant", *shape, times, 2048, 50.0, 1, 1, 1e-3, "L", None)
    topk_row = harness.result_row("topk_fused", "variant", *shape, times, 4096, None, None, None, 1e-3, "L", "v1", k=8)
    for row, moved in ((softmax_row, 2048), (topk_row, 4096)):
        assert (row["median_us"], row["p10_us"], row["p90_us"]) == pytest.approx((3.0, 1.3, 8.1))
        assert row["gbps"] == moved / 3.0 / 1e3 and row["bytes_moved"] == moved and row["error"] is None
    assert softmax_row["pct_copy"] == 50.0 and topk_row["pct_copy"] is None and topk_row["k"] == 8
    doc = bench.load(bench.dumps({"schema": bench.SCHEMA, "meta": {}, "results": [softmax_row, topk_row]}))
    assert [r["name"] for r in doc["results"]] == ["fast", "topk_fused"]


def test_a_topk_row_holds_k_an_fp32_state_no_block_size_and_a_copy_at_100_percent():
    times = np.array([2.0, 1.0, 4.0])
    fused = bench_topk.topk_row("topk_fused", "variant", "bfloat16", 4, 128, 8, times, 4096, 1e-3, "L", "v1")
    assert (fused["k"], fused["acc"], fused["block_size"], fused["pct_copy"], fused["version"]) == (
        8,
        "float32",
        0,
        None,
        "v1",
    )
    assert (fused["dtype"], fused["rows"], fused["cols"], fused["median_us"]) == ("bfloat16", 4, 128, 2.0)
    copy = bench_topk.topk_row("copy", "copy", "float32", 4, 128, None, times, 4096, 0.0, "device-to-device copy")
    assert copy["pct_copy"] == 100.0 and copy["gbps"] == 4096 / 2.0 / 1e3

"""The memory model (explorer.budget) against the emulator's real peak, measured with tracemalloc (NumPy reports
its buffers to it): for every variant, dtype, accumulator and trace setting, measured <= estimate <= 1.5 × measured.
On the GPU (gpu-marked), the device bytes a run reserves against the high-water mark of what it takes from CuPy's
pool: softmax (every variant, traced and not) and top-k (fused and unfused)."""

import functools
import tracemalloc

import pytest

import explorer
from explorer import budget, reserve
from explorer.backends import cuda
from explorer.topk import topk_launch

SHAPES = ((16, 100), (64, 1000), (2, 30000))  # short rows padded to the lanes, a batch, a long row
RUNS = [
    (key, dtype, acc, traced, rows, cols)
    for key, v in explorer.VARIANTS.items()
    for dtype in ("float32", "float16")
    for acc in ("float32", "bfloat16")
    if acc in v.accumulators
    for traced in ((False, True) if v.traceable else (False,))
    for rows, cols in SHAPES
    if v.family != "thread" or cols <= 1000
]  # one thread per row steps in Python


def peak(call, x) -> int:
    """The peak of call() in bytes, with its input x counted (the model counts it)."""
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1] + x.nbytes
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(("key", "dtype", "acc", "traced", "rows", "cols"), RUNS)
def test_run_bytes_bounds_the_measured_peak(key, dtype, acc, traced, rows, cols):
    x = explorer.make_input("normal", rows=rows, cols=cols, dtype=dtype, seed=0)
    estimate = explorer.bytes_needed(rows, cols, dtype, "emulator", explorer.VARIANTS[key], None, traced, acc)
    measured = peak(lambda: explorer.softmax(x, key, acc=acc, backend="emulator", trace_row=0 if traced else None), x)
    assert measured <= estimate <= 1.5 * measured


@pytest.mark.parametrize("dtype", ("float32", "float16"))
@pytest.mark.parametrize(("rows", "cols"), ((64, 777), (3, 12345), (2, 50257), (1, 151936)))
def test_fast_bytes_bounds_the_measured_peak_at_odd_widths(dtype, rows, cols):
    """Rows whose 16-byte boundaries fall at different offsets are emulated a group at a time."""
    x = explorer.make_input("normal", rows=rows, cols=cols, dtype=dtype, seed=0)
    estimate = explorer.bytes_needed(rows, cols, dtype, "emulator", explorer.VARIANTS["fast"], None, False, "float32")
    measured = peak(lambda: explorer.softmax(x, "fast", backend="emulator"), x)
    assert measured <= estimate <= 1.5 * measured


@pytest.mark.parametrize("variant", explorer.TOPK_VARIANTS)
@pytest.mark.parametrize(("rows", "cols"), ((64, 4096), (1, 100000), (64, 50257), (24, 12345)))
def test_topk_emulator_bytes_bounds_the_measured_peak(variant, rows, cols):
    x = explorer.make_input("normal", rows=rows, cols=cols, dtype="float16", seed=0)
    estimate = budget.topk_emulator_bytes(
        variant == "topk_fused",
        topk_launch(rows, cols, 8, "float16"),
        explorer.VARIANTS["fast"].launch(rows, cols, None, "float16"),
        rows,
        cols,
        "float16",
    )
    measured = peak(lambda: explorer.softmax_topk(x, 8, variant, backend="emulator"), x)
    assert measured <= estimate <= 1.5 * measured


def test_page_bytes_bounds_what_the_pages_keep():
    """Input, reference, every output and the error reports, as ui/compute.py keeps them for one configuration."""
    rows, cols, keys = 64, 2000, ("online_warp", "fast", "safe_block")
    x = explorer.make_input("normal", rows=rows, cols=cols, dtype="float32", seed=0)

    def page():
        ref = explorer.reference(x)
        outs = [explorer.softmax(x, k, backend="emulator").out for k in keys]
        return [explorer.errors(out, x, ref=ref) for out in outs], outs

    measured = peak(page, x)
    estimate = budget.page_bytes([(explorer.VARIANTS[k], None) for k in keys], rows, cols, "float32", "float32")
    assert measured <= estimate <= 1.5 * measured


# On the GPU: the device bytes a run reserves (explorer/budget.py's device_bytes and topk_device_bytes) against the
# high-water mark of the allocations it takes from CuPy's pool.
GPU_SHAPES = (  # fast's launches at these are test_cuda.py's (compiled once); split_row always runs two stages
    (3, 33),  # tiny: the pool's rounding and the model's fixed allowance are most of it
    (300, 2048),  # a batch: fast_row, a block a row
    (1, 262144),  # fast_row in a cluster of 16
    (1, 2**20),  # fast_row_cluster over 32 clusters: the clusters' words, kept per stream
    (1, 2**22),  # fast_row_cluster over 66 clusters (fp32) or 16 (bf16, slices in shared memory)
)
FAST_ONLY_SHAPES = ((1, 2**23),)  # fast_stream (part of each chunk in shared memory, the rest read twice)
GPU_RUNS = [
    (key, dtype, traced, rows, cols)
    for key, v in explorer.VARIANTS.items()
    for dtype in ("float32", "bfloat16")
    for rows, cols in GPU_SHAPES + (FAST_ONLY_SHAPES if key == "fast" else ())
    if v.family != "thread" or cols <= 2048  # one thread a row: a long row takes it seconds
    for traced in ((False, True) if v.traceable else (False,))
    if not traced or budget.trace_seconds(v, v.launch(rows, cols, None, dtype), cols, "cuda") < 0.5
]
GPU_TOPK_SHAPES = (  # test_topk.py's and test_cuda.py's (compiled once)
    (2, 33),  # tiny: the top-k scratch's floor (1024 chunk states of 64 keys) is most of it
    (200, 2048),  # a block a row
    (1, 262144),  # one row in many chunks; unfused: fast_row in a cluster of 16
    (1, 2**20),  # unfused: fast_row's slices exchanging through global memory
)
RATIO_FROM = 2**18  # below 256 KiB measured, the model's 16 KiB for small allocations outweighs the arrays


def device_peak(call) -> int:
    """The high-water mark of the device memory call() takes from CuPy's pool, in the pool's 512-byte units.

    A cupy.cuda.MemoryHook sees every allocation from the pool (malloc_postprocess) and every return to it
    (free_postprocess) in this thread, with its rounded size: the running sum of the blocks call() allocated
    and still holds is its device memory at each moment, and its maximum the run's peak. Blocks held from
    before (another test's scratch, arrays Python collects meanwhile) are not counted when they are freed.
    The pool's own totals would not do: used_bytes() keeps no maximum, and total_bytes() after
    free_all_blocks() counts what the pool obtained from the driver, which splitting and caching of
    blocks per stream make larger than what the run held at once (CuPy frees the cache and retries before
    a request fails, so a run needs only its peak)."""

    class Peak(cuda.cp.cuda.MemoryHook):
        name = "test_memory_model.device_peak"

        def __init__(self):
            self.held: dict[int, int] = {}
            self.now = self.peak = 0

        def malloc_postprocess(self, **kwargs):
            if kwargs["mem_ptr"]:
                self.held[kwargs["pmem_id"]] = kwargs["mem_size"]
                self.now += kwargs["mem_size"]
                self.peak = max(self.peak, self.now)

        def free_postprocess(self, **kwargs):
            self.now -= self.held.pop(kwargs["pmem_id"], 0)

    with Peak() as hook:
        call()
    return hook.peak


def reserved(monkeypatch) -> list[int]:
    """The bytes each run reserves (explorer.reserve.run_reservation's need: the model's estimate, as admitted)."""
    needs = []
    run_reservation = reserve.run_reservation

    def spy(backend, need):
        needs.append(need)
        return run_reservation(backend, need)

    monkeypatch.setattr(reserve, "run_reservation", spy)
    return needs


STREAMS: list = []  # every stream these tests made, kept alive: CUDA may hand a destroyed stream's handle out again


def first_run_on_a_fresh_stream(call, made_its_own) -> int:
    """device_peak(call()) as the first run on a new stream. fast_row's exchange (cuda.row_exchange) and the top-k
    kernel's scratch (cuda_topk._topk_scratch) are kept per stream and reused by later launches on it; the first run
    on a stream allocates them, the case the model counts (in every run: the conservative one), and a later run
    takes less. (Scratch grown for a larger launch is taken beside the smaller one it replaces, which the stream held
    from before: the run's own peak is the same.) A new stream's handle may be one a destroyed stream had, whose
    scratch the backend still keeps: where made_its_own(peak) says the run found it, the run is repeated on another
    new stream (the old one kept alive, so its handle is not given out again). made_its_own compares the peak with
    the allocations a fresh run holds at once, its scratch among them; a run that found the scratch holds less by
    far more than CuPy's small allocations."""
    for _ in range(8):
        stream = cuda.cp.cuda.Stream()
        STREAMS.append(stream)
        with stream:
            measured = device_peak(call)
        if made_its_own(measured):
            return measured
    pytest.fail("eight new streams in a row found scratch made before: is the backend's scratch still per stream?")


@functools.cache
def gpu_input(rows: int, cols: int, dtype: str):
    return explorer.make_input("normal", rows=rows, cols=cols, dtype=dtype, seed=0)


def assert_bounds(measured: int, estimate: int, context) -> None:
    """measured <= estimate everywhere; estimate <= 1.5 × measured where the arrays outweigh the model's fixed
    allowance for small allocations (budget.DEVICE_FIXED) and the pool's 512-byte rounding."""
    assert measured <= estimate, (context, measured, estimate)
    if measured >= RATIO_FROM:
        assert estimate <= 1.5 * measured, (context, measured, estimate)


@pytest.mark.gpu
@pytest.mark.parametrize(("key", "dtype", "traced", "rows", "cols"), GPU_RUNS)
def test_device_bytes_bound_the_measured_gpu_peak(monkeypatch, key, dtype, traced, rows, cols):
    needs = reserved(monkeypatch)
    x = gpu_input(rows, cols, dtype)
    v = explorer.VARIANTS[key]
    exchange = budget.exchange_bytes(v.launch(rows, cols, None, dtype), rows)
    held = 2 * budget.pooled(x.nbytes) + budget.pooled(x.size) + exchange  # x, y, the unwritten mask, the exchange
    result = None

    def run():
        nonlocal result
        result = explorer.softmax(x, key, backend="cuda", trace_row=0 if traced else None)

    measured = first_run_on_a_fresh_stream(run, lambda peak: peak >= held)
    assert result.backend == "cuda" and (result.trace is not None) == traced
    estimate = explorer.bytes_needed(rows, cols, dtype, "cuda", v, None, traced)
    assert set(needs) == {estimate}  # each run reserved what the model says
    assert_bounds(measured, estimate, (key, dtype, traced, rows, cols, result.launch.describe()))


@pytest.mark.gpu
@pytest.mark.parametrize("variant", list(explorer.TOPK_VARIANTS))
@pytest.mark.parametrize("dtype", ("float32", "bfloat16"))
@pytest.mark.parametrize(("rows", "cols"), GPU_TOPK_SHAPES)
def test_topk_device_bytes_bound_the_measured_gpu_peak(monkeypatch, variant, dtype, rows, cols):
    needs = reserved(monkeypatch)
    x, k = gpu_input(rows, cols, dtype), 8
    held = budget.pooled(x.nbytes) + 8 * budget.TOPK_MAX_LIST * budget.TOPK_SCRATCH_FLOOR  # x, the smallest lists
    if variant == "topk_unfused":  # the probabilities and fast's exchange
        held += budget.pooled(x.nbytes) + budget.exchange_bytes(
            explorer.VARIANTS["fast"].launch(rows, cols, None, dtype), rows
        )
    result = None

    def run():
        nonlocal result
        result = explorer.softmax_topk(x, k, variant, backend="cuda")

    measured = first_run_on_a_fresh_stream(run, lambda peak: peak >= held)
    assert result.backend == "cuda" and len(set(needs)) == 1
    assert_bounds(measured, needs[0], (variant, dtype, rows, cols, result.launch.describe()))

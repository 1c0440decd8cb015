"""How much memory and time a run takes, and how much one run may take on this server (explorer/reserve.py holds
the reservations against it).

The model counts the arrays explorer/backends/emulator.py (and explorer/trace.py, explorer/numerics.py) hold
at their peak; tests/test_memory_model.py measures the real peak with tracemalloc and holds the model
between it and 1.5 times it. On the GPU it counts every allocation explorer/backends/cuda.py and cuda_topk.py
take from CuPy's pool, their per-stream scratch included; tests/test_memory_model.py measures the high-water
mark of those allocations with a CuPy MemoryHook and holds the model to the same bounds. The limit is fixed
(EXPLORER_RUN_BUDGET_BYTES, else 3/16 of the machine's RAM), so the same request always gets the same answer;
the pool that concurrent runs reserve from holds four runs at the limit, and what the app keeps between reruns
is held to KEPT_BUDGET (a quarter of the RAM) beside it. Time is modelled from constants measured once, against
EXPLORER_RUN_SECONDS: the emulation, and a trace's float64 replay on either backend (a GPU run itself takes
milliseconds).
"""

from __future__ import annotations

import math
import os

from .backends.cuda import counter_elements, state_elements  # fast_row's exchange scratch
from .backends.cuda_topk import TOPK_MAX_LIST, TOPK_SCRATCH_FLOOR  # top-k's scratch: 64-bit keys a list, whatever k
from .fast_launch import across_clusters
from .geometry import Launch, cdiv
from .numerics import DTYPES
from .registry import VARIANTS, Variant
from .trace import trace_shape

SETTING = "EXPLORER_RUN_BUDGET_BYTES"
TIME_SETTING = "EXPLORER_RUN_SECONDS"
DEFAULT_RUN_SECONDS = 60.0
RUNS_AT_ONCE = 4  # the pool holds this many runs at the limit

# Bytes per element live at the emulator's peaks, beyond the input (from the code, see each use).
NORMALISE = 24  # _normalise: to_acc(x) and x - m in fp32 (4 + 4), exp's float64 argument and result (8 + 8)
FAST_GATHER = 31  # _fast: x[:, element] and its exps in fp32, x - m, its fp32 copy, exp2's float64 pair, masks
FAST_GATHER_SHARED = 36  # ... plus the second gather where the slice is normalised from what it holds (HOLD 2, 3)
INDEX = 24  # per padded slot of one row: int64 element indices, their masked copy and the valid mask
STATE = 16  # per thread state (m, d) and one online step's or merge's temporaries: this plus 10 per acc byte
RAW_SLOT = 12  # per traced step while the kernel runs: the raw fp32 m, d and int32 index
TRACE_SLOT = 60  # per traced step once built: the raw buffers, the float64 kernel and exact copies, int64 index
FIXED = 16 * 2**10  # Python objects and small arrays of any run
TRACE_NODE = 200  # per merge node: its share of a MergeLevel (six small arrays and the object)
REFERENCE = 24  # numerics.reference beyond its float64 result: x in float64 and exp's result
ERRORS = 66  # numerics.errors: float64 output, difference, relative and ulp errors, masks (measured 66.0)
CHUNKED_FAST = ("fast_split", "fast_stream")  # fast's kernels whose emulation streams the row in chunks (fast_split's)


def _row_group(launch: Launch, rows: int, cols: int) -> int:
    """The most rows fast_row's emulation takes at once: rows are grouped by where their first 16-byte boundary
    falls, which cycles with period vec / gcd(cols, vec) along the rows."""
    vec = launch.template_args[0]
    return cdiv(rows, vec // math.gcd(cols, vec))


def _gather_bytes(launch: Launch, rows: int, cols: int) -> int:
    """The slots fast's emulation gathers at once: a group of rows' padded elements, or one batch of them where
    the row streams (fast_split, fast_stream, topk)."""
    vec, per = launch.template_args[:2]
    streams = launch.kernel in (*CHUNKED_FAST, "topk", "topk_cluster")
    if launch.kernel == "fast_warp":
        slots = launch.template_args[2] * per * vec
    elif streams:
        slots = launch.chunks * launch.block * per * vec
    else:  # fast_row: each thread's packs and its loose slot, for one group of rows
        slots = max(launch.threads_per_row * (per * vec + 1), cols)
        rows = _row_group(launch, rows, cols)
    shared = not streams and launch.kernel != "fast_warp" and launch.template_args[2] in (2, 3)  # exps taken again
    return (FAST_GATHER_SHARED if shared else FAST_GATHER) * rows * slots + INDEX * slots


def _fast_bytes(launch: Launch, rows: int, cols: int) -> int:
    """_fast beyond the input: x and y in fp32, then the gathered slots (fast_split: x - m over the whole input;
    fast_row: also a group of rows' copy and output before it is placed in y)."""
    n = rows * cols
    if launch.kernel in CHUNKED_FAST:
        return 4 * n + max(_gather_bytes(launch, rows, cols), (NORMALISE + 4) * n)
    if launch.kernel == "fast_warp":
        return 8 * n + _gather_bytes(launch, rows, cols)
    return 8 * n + 8 * _row_group(launch, rows, cols) * cols + _gather_bytes(launch, rows, cols)


def emulator_bytes(variant: Variant, launch: Launch, rows: int, cols: int, dtype: str, acc: str) -> int:
    """Peak bytes of the emulation of one untraced run, its input included."""
    n, item, acc_item = rows * cols, DTYPES[dtype].itemsize, DTYPES[acc].itemsize
    lanes = launch.threads_per_row
    padded = rows * cdiv(cols, lanes) * lanes  # _strided's -inf padding
    fold = (STATE + 10 * acc_item) * rows * lanes  # the lanes' states and one step's temporaries
    if variant.method == "fast":
        own = _fast_bytes(launch, rows, cols)
    elif variant.method == "naive":  # exps in acc kept for the sum, then expf again for the output
        own = (acc_item + NORMALISE - 4) * n
    elif variant.family == "thread" and variant.method == "safe":  # to_acc(x) kept for both passes
        own = (acc_item + NORMALISE) * n
    elif variant.method == "safe":  # safe_block keeps the padded x, to_acc(x), the valid mask and the lanes' sums
        own = (item + acc_item) * padded + padded // rows + NORMALISE * (rows * lanes + n)
    else:  # online and split: the fold over padded copies, then the normalise pass beside the lanes' states
        own = max(2 * item * padded + fold, NORMALISE * n + 8 * rows * lanes)
    return FIXED + item * n + own


def trace_bytes(variant: Variant, launch: Launch, cols: int) -> int:
    """A traced row's buffers and its built Trace (float64 row, kernel and exact states, merge levels) at
    their peak."""
    threads, steps, merges = trace_shape(variant, launch, cols)
    return TRACE_SLOT * threads * steps + TRACE_NODE * merges + 24 * cols  # the row in float64, exp's pair


# The GPU's device memory, as the CUDA backend takes it from CuPy's pool (from the code, see each use).
POOL_UNIT = 512  # CuPy's pool hands out whole multiples of 512 bytes (ALLOCATION_UNIT_SIZE, cupy/cuda/memory.pyx)
DEVICE_FIXED = 16 * 2**10  # small allocations of any run: cuda._null_trace's five 1-element buffers (5 × 512, once
# a process), the unwritten counts' scalar results (3 × 512 at most: top-k's two sums and their total), and room for
# CuPy's own (a fill value, a reduction's output): about 5 KiB counted, the rest headroom
REDUCE_SLOT = (32, 2048)  # CuPy's CUB block reduction (a bool's sum): a 32-byte work slot per 2048 elements
# (512 threads × 4 items a block, cupy/_core/_cub_reduction.pyx)


def pooled(nbytes: int) -> int:
    """What one allocation of nbytes takes from CuPy's pool."""
    return cdiv(nbytes, POOL_UNIT) * POOL_UNIT


def unwritten_count_bytes(elements: int) -> int:
    """The check for outputs left unwritten (cuda.run, cuda_topk.run_topk): a bool per output compared with the
    poison, summed by CuPy's block reduction through its work area."""
    slot, per = REDUCE_SLOT
    return pooled(elements) + pooled(slot * cdiv(elements, per))


def exchange_bytes(launch: Launch, rows: int) -> int:
    """fast_row's (and fast_stream's) slice states and counters (cuda.row_exchange) where its slices exchange (m, d)
    through global memory (several blocks a row, not a cluster), or the words of a row's clusters: kept per stream
    and grown, never shrunk, so the first launch on a stream allocates them and a later one reuses them; counted in
    every run (the conservative case)."""
    if across_clusters(launch):  # the clusters' words, 8 bytes each
        return pooled(8 * state_elements(launch.grid))
    if launch.protocol != "slices" or launch.chunks == 1:
        return 0
    return pooled(4 * state_elements(launch.grid)) + pooled(4 * counter_elements(rows))


def two_stage_bytes(launch: Launch) -> int:
    """The chunk states between the two kernels of a two-stage launch (cuda._launch_two_stage's `partial`, float32
    (m, d) per block), freed when the launch returns."""
    return pooled(4 * 2 * launch.grid) if launch.protocol == "two_stage" else 0


def device_bytes(variant: Variant | None, launch: Launch | None, rows: int, cols: int, dtype: str, traced: bool) -> int:
    """A GPU run's device memory at its peak (cuda.run): input, poisoned output, the trace buffers, the launch's
    scratch, and the count of unwritten outputs (after the launch, when a two-stage launch's chunk states are
    freed). Without a variant: the largest over the variants that take this dtype, untraced."""
    if variant is None or launch is None:
        return max(
            device_bytes(v, v.launch(rows, cols, None, dtype), rows, cols, dtype, False)
            for v in VARIANTS.values()
            if dtype in v.dtypes
        )
    n = rows * cols
    total = DEVICE_FIXED + 2 * pooled(n * DTYPES[dtype].itemsize) + exchange_bytes(launch, rows)
    if traced:  # RawTrace.empty's buffers copied to the device: step m, d (float32), index (int32); merge m, d
        threads, steps, merges = trace_shape(variant, launch, cols)
        total += 3 * pooled(4 * threads * steps) + 2 * pooled(4 * max(merges, 1))
    return total + max(two_stage_bytes(launch), unwritten_count_bytes(n))


def run_bytes(
    variant: Variant,
    rows: int,
    cols: int,
    dtype: str,
    acc: str = "float32",
    trace: bool = False,
    backend: str = "emulator",
    block_size: int | None = None,
) -> int:
    """Peak bytes of one softmax run (input included): the emulator's host memory, or the GPU's device memory.
    A trace's raw buffers are filled during the run; it is built after, beside the input and output only.

    Arguments are taken as valid (explorer.bytes_needed checks them first)."""
    launch = variant.launch(rows, cols, block_size, dtype)
    if backend == "cuda":
        return device_bytes(variant, launch, rows, cols, dtype, trace)
    run = emulator_bytes(variant, launch, rows, cols, dtype, acc)
    if not trace:
        return run
    threads, steps, _ = trace_shape(variant, launch, cols)
    built = FIXED + 2 * rows * cols * DTYPES[dtype].itemsize + trace_bytes(variant, launch, cols)
    return max(run + RAW_SLOT * threads * steps, built)


def topk_emulator_bytes(fused: bool, launch: Launch, fast_launch: Launch, rows: int, cols: int, dtype: str) -> int:
    """Peak bytes of fast_emulation.run_topk (input included): x in fp32, the float64 argsort (negated copy, result),
    and fused's streamed (m, d) or unfused's fast softmax output kept beside the selection."""
    n, item = rows * cols, DTYPES[dtype].itemsize
    if fused:  # the argsort's int64 result stays alive (the indices are a view of it) while the row streams
        loose = launch.template_args[3]  # topk's (vec, per, lists, loose, ...)
        body = 4 * _row_group(launch, rows, cols) * cols if loose else 0  # a group's aligned bodies
        return FIXED + item * n + 4 * n + max(24 * n, 8 * n + body + _gather_bytes(launch, rows, cols))
    return FIXED + max(item * n + _fast_bytes(fast_launch, rows, cols), 2 * item * n + 28 * n)


def topk_device_bytes(
    fused: bool, launch: Launch, fast_launch: Launch, rows: int, cols: int, dtype: str, k: int
) -> int:
    """A GPU top-k's device memory at its peak (cuda_topk.run_topk): the input, the poisoned (rows, k) values and
    int32 indices, the kernel's per-stream scratch (counted in every run, as exchange_bytes), and the count of
    unwritten outputs; unfused, also `fast`'s probabilities (and its launch's scratch) that the selection reads."""
    item = DTYPES[dtype].itemsize
    chunk_states = max(rows * launch.chunks if launch.chunks > 1 else 0, TOPK_SCRATCH_FLOOR)
    scratch = (  # cuda_topk._topk_scratch: (m, d) float32 and 64-bit keys per chunk state, a uint32 per row
        pooled(4 * 2 * chunk_states)
        + pooled(8 * TOPK_MAX_LIST * chunk_states)
        + pooled(4 * max(rows, TOPK_SCRATCH_FLOOR))
    )
    total = DEVICE_FIXED + pooled(rows * cols * item) + pooled(rows * k * item) + pooled(rows * k * 4) + scratch
    if fused:
        return total + unwritten_count_bytes(rows * k)
    # cp.empty_like(x) for the probabilities, freed before the unwritten outputs are counted (over rows × k only)
    probabilities = pooled(rows * cols * item) + two_stage_bytes(fast_launch)
    return total + exchange_bytes(fast_launch, rows) + max(probabilities, unwritten_count_bytes(rows * k))


def reference_bytes(rows: int, cols: int) -> int:
    """numerics.reference's peak beyond its input: the float64 result and its temporaries."""
    return (8 + REFERENCE) * rows * cols


def errors_bytes(rows: int, cols: int) -> int:
    """numerics.errors' peak beyond the output, the input and the reference it is given."""
    return ERRORS * rows * cols


def page_bytes(runs: list[tuple[Variant, int | None]], rows: int, cols: int, dtype: str, acc: str) -> int:
    """What the app holds for one configuration (ui/compute.py): the input, the float64 reference and every
    variant's output stay cached; the largest of one run's, the reference's and the error report's
    temporaries comes on top."""
    n, item = rows * cols, DTYPES[dtype].itemsize
    kept = FIXED + item * n + 8 * n + item * n * len(runs)
    run = max((run_bytes(v, rows, cols, dtype, acc, False, "emulator", b) - 2 * item * n for v, b in runs), default=0)
    return kept + max(run, reference_bytes(rows, cols) - 8 * n, errors_bytes(rows, cols))


# Seconds of the emulation per (method, family), measured once on this project's CPU machine class (2 shared
# x86 cores, NumPy 2), fp32 input and accumulator, fitted to 10 shapes from 16384×16 to 1×65536: ns per padded
# element, ns per thread state (the merges), µs per Python step along a row (paid again by every batch of rows).
# The fit is within 2× of each measurement; another machine scales all three alike.
EMULATION_COST = {
    ("naive", "thread"): (35, 0, 3),
    ("safe", "thread"): (55, 0, 22),
    ("online", "thread"): (75, 0, 56),
    ("online", "warp"): (53, 430, 47),
    ("online", "block"): (40, 510, 49),
    ("safe", "block"): (55, 55, 46),
    ("online", "split"): (10, 810, 50),
    ("fast", "dispatch"): (63, 0, 73),
}
SLOWEST = tuple(max(c[i] for c in EMULATION_COST.values()) for i in range(3))  # a variant the table lacks
NARROW_TYPES = 2.0  # fp16 or bf16 input or accumulator: each rounding is a cast (measured 1.3 to 3 times fp32)
BATCH_SECONDS = 1.0  # rows per batch chosen for a progress step (and a chance to stop) about this often
BATCH_OVERHEAD = 0.25  # ... as long as repeating the row's steps per batch adds at most this share of the run


def emulation_terms(
    variant: Variant, launch: Launch, rows: int, cols: int, dtype: str, acc: str
) -> tuple[float, float]:
    """(seconds that scale with the rows, seconds every batch of rows pays again) of an emulated run."""
    per_element, per_state, per_step = EMULATION_COST.get((variant.method, variant.family), SLOWEST)
    lanes = launch.threads_per_row
    steps = cdiv(cols, lanes)
    scale = 1.0 if dtype == acc == "float32" else NARROW_TYPES
    return scale * rows * (per_element * steps * lanes + per_state * lanes) * 1e-9, scale * per_step * steps * 1e-6


def row_batches(variant: Variant, launch: Launch, rows: int, cols: int, dtype: str, acc: str) -> int:
    """How many batches of rows to emulate in: one per BATCH_SECONDS, as long as the batches' repeated steps add
    at most BATCH_OVERHEAD of the run's time (a few long rows run as one batch)."""
    scaled, per_batch = emulation_terms(variant, launch, rows, cols, dtype, acc)
    wanted = math.ceil(scaled / BATCH_SECONDS)
    affordable = 1 + int(BATCH_OVERHEAD * (scaled + per_batch) / per_batch) if per_batch else wanted
    return max(1, min(wanted, affordable, rows))


def emulation_seconds(
    variant: Variant, rows: int, cols: int, dtype: str, acc: str = "float32", block_size: int | None = None
) -> float:
    """About how long the emulation of one run takes on this machine class (EMULATION_COST), its batches of rows
    included. Arguments are taken as valid (explorer.bytes_needed checks them first)."""
    launch = variant.launch(rows, cols, block_size, dtype)
    scaled, per_batch = emulation_terms(variant, launch, rows, cols, dtype, acc)
    return scaled + per_batch * row_batches(variant, launch, rows, cols, dtype, acc)


# Seconds a trace adds, measured as EMULATION_COST was (1×4096 to 1×262144, each traceable variant, fp32).
# trace.build_trace's float64 replay runs on the host on either backend: µs per step (an online lane's replay is
# a Python loop, vectorised across lanes; a safe one is vectorised whole), ns per (lane, step) slot, µs per merge
# node. The emulator's recording of an online fold adds µs per step and per merge node (safe_thread's rides its
# own loop).
TRACE_BUILD = {"online": (25, 200, 10), "safe": (0, 60, 0)}
TRACE_RECORD = (25, 1.5)


def trace_seconds(variant: Variant, launch: Launch, cols: int, backend: str = "emulator") -> float:
    """About how long recording (in the emulation) and building one row's trace take."""
    threads, steps, merges = trace_shape(variant, launch, cols)
    per_step, per_slot, per_node = TRACE_BUILD.get(variant.method, TRACE_BUILD["online"])
    seconds = (per_step * steps + per_node * merges) * 1e-6 + per_slot * threads * steps * 1e-9
    if backend != "cuda" and variant.method != "safe":
        seconds += (TRACE_RECORD[0] * steps + TRACE_RECORD[1] * merges) * 1e-6
    return seconds


def run_seconds(
    variant: Variant,
    rows: int,
    cols: int,
    dtype: str,
    acc: str = "float32",
    block_size: int | None = None,
    trace: bool = False,
    backend: str = "emulator",
) -> float:
    """About how long one run takes on this machine class: the emulation (none on the GPU, whose kernels take
    milliseconds) and, traced, its trace. Arguments are taken as valid (explorer.bytes_needed checks them)."""
    seconds = 0.0 if backend == "cuda" else emulation_seconds(variant, rows, cols, dtype, acc, block_size)
    if trace:
        seconds += trace_seconds(variant, variant.launch(rows, cols, block_size, dtype), cols, backend)
    return seconds


def machine_bytes() -> int:
    """The machine's RAM, or 0 where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


# The machine's memory, shared out: what the app keeps between reruns (inputs, references, outputs, traces: ui/keep.py)
# may hold a quarter, and the pool that runs reserve from (RUNS) the rest, four runs at the default limit.
KEPT_SHARE = 4
_RAM = machine_bytes()
KEPT_BUDGET = _RAM // KEPT_SHARE or 2**30  # unknown RAM: 1 GiB
DEFAULT_RUN_BUDGET = (_RAM - _RAM // KEPT_SHARE) // RUNS_AT_ONCE or 2**32  # unknown RAM: 4 GiB


def _bytes_setting() -> int | None:
    """EXPLORER_RUN_BUDGET_BYTES as a whole number >= 1; None where unset or malformed."""
    raw = os.environ.get(SETTING, "").strip()
    return int(raw) if raw.isdecimal() and int(raw) >= 1 else None  # isdigit() would pass "²", which int() refuses


def _seconds_setting() -> float | None:
    """EXPLORER_RUN_SECONDS as a finite number > 0; None where unset or malformed."""
    try:
        value = float(os.environ.get(TIME_SETTING, "").strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


def settings_problems() -> list[str]:
    """What is wrong with EXPLORER_RUN_BUDGET_BYTES and EXPLORER_RUN_SECONDS (a refused value falls back to
    the default)."""
    problems = []
    raw = os.environ.get(SETTING, "").strip()
    if raw and _bytes_setting() is None:
        problems.append(
            f"{SETTING}={raw!r} is refused: it must be a whole number of bytes >= 1; "
            f"using the default of {DEFAULT_RUN_BUDGET:,} bytes (3/16 of this machine's memory: four runs at it and "
            "what the app keeps fill it)"
        )
    raw = os.environ.get(TIME_SETTING, "").strip()
    if raw and _seconds_setting() is None:
        problems.append(
            f"{TIME_SETTING}={raw!r} is refused: it must be a number of seconds > 0; "
            f"using the default of {DEFAULT_RUN_SECONDS:g} s"
        )
    return problems


def run_budget() -> int:
    """This server's limit on the memory of one run, in bytes."""
    return _bytes_setting() or DEFAULT_RUN_BUDGET


def time_budget() -> float:
    """This server's budget for the emulated runs of one request (a page's variants), in seconds."""
    return _seconds_setting() or DEFAULT_RUN_SECONDS

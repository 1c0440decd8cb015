"""The public entry point: softmax() on the GPU or in emulation, with every check in one place."""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from . import budget, numerics
from .backends import cuda, emulator
from .errors import InvalidInput, TooLarge
from .numerics import DTYPES, dtype_name
from .registry import VARIANTS, Launch, Variant
from .trace import Trace, build_trace

BACKENDS = ("auto", "cuda", "emulator")
# Operator cap on elements per run (a shared box sets it lower): EXPLORER_MAX_ELEMENTS.
DEFAULT_MAX_ELEMENTS = 2**31 - 1
MAX_DIM = 2**31 - 1  # rows and cols are 32-bit ints in the kernels
log = logging.getLogger("explorer")


@dataclass
class SoftmaxResult:
    out: np.ndarray  # same shape and dtype as x
    trace: Trace | None
    backend: str  # "cuda" or "emulator"
    variant: str
    acc: str
    block_size: int
    launch: Launch


def settings_problems() -> list[str]:
    """What is wrong with the operator's settings (each refused setting falls back to its default)."""
    raw = os.environ.get("EXPLORER_MAX_ELEMENTS", "").strip()
    try:
        ok = not raw or int(raw) >= 1
    except ValueError:
        ok = False
    problems = budget.settings_problems()
    if ok:
        return problems
    return [
        f"EXPLORER_MAX_ELEMENTS={raw!r} is refused: it must be a whole number of elements >= 1; "
        f"using the default limit of {DEFAULT_MAX_ELEMENTS:,} elements",
        *problems,
    ]


@functools.cache
def _warn_once(message: str) -> None:
    log.warning(message)


def max_elements() -> int:
    """This server's limit on the elements of one run; a malformed EXPLORER_MAX_ELEMENTS is logged and ignored."""
    problems = settings_problems()
    for problem in problems:
        _warn_once(problem)
    raw = os.environ.get("EXPLORER_MAX_ELEMENTS", "").strip()
    return DEFAULT_MAX_ELEMENTS if problems or not raw else int(raw)


max_elements()  # a malformed setting is reported when the explorer loads (the app's or the CLI's start)


def forced_backend() -> str | None:
    """The operator's choice for "auto" (EXPLORER_BACKEND=emulator keeps a shared box off its GPU)."""
    forced = os.environ.get("EXPLORER_BACKEND", "").strip()
    if forced and forced not in ("cuda", "emulator"):
        raise InvalidInput(f"EXPLORER_BACKEND must be cuda or emulator, got {forced!r}")
    return forced or None


def resolve_backend(backend: str) -> str:
    """ "auto" is EXPLORER_BACKEND if set, else CUDA where a GPU is usable, else the emulator."""
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise InvalidInput(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if backend == "auto":
        return forced_backend() or ("cuda" if cuda.available() else "emulator")
    return backend


def whole(value: object) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def check_shape(rows: object, cols: object) -> tuple[int, int]:
    """rows and cols as ints from 1 to 2^31 - 1; InvalidInput otherwise."""
    for name, value in (("rows", rows), ("cols", cols)):
        if not whole(value):
            raise InvalidInput(f"{name} must be a whole number, got {value!r}")
        if value < 1:
            raise InvalidInput(f"{name} must be at least 1, got {value}")
        if value > MAX_DIM:
            raise InvalidInput(f"{name} must be below 2^31, got {value}")
    return int(rows), int(cols)


def check_dtype(dtype: object, what: str = "dtype") -> str:
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise InvalidInput(f"unknown {what} {dtype!r}; choose one of {', '.join(DTYPES)}")
    return dtype


def check_logits(x: object, name: str = "x") -> tuple[str, int, int]:
    """dtype name, rows and cols of a non-empty 1-D or 2-D float32/float16/bfloat16 array, read from
    its shape alone (nothing is copied); InvalidInput otherwise."""
    if not isinstance(x, np.ndarray):
        raise InvalidInput(f"{name} must be a numpy array, got {type(x).__name__}")
    try:
        dtype = dtype_name(x.dtype)
    except ValueError as exc:
        raise InvalidInput(f"{name}: {exc} (convert with {name}.astype(...))") from None
    if x.ndim not in (1, 2):
        raise InvalidInput(f"{name} must be 1-D or 2-D (rows × cols), got shape {x.shape}")
    if x.size == 0:
        raise InvalidInput(f"{name} is empty (shape {x.shape}); softmax needs at least one element per row")
    rows, cols = (1, x.shape[0]) if x.ndim == 1 else x.shape
    if rows > MAX_DIM or cols > MAX_DIM:
        raise InvalidInput(f"rows and cols must each be below 2^31, got {rows}×{cols}")
    return dtype, rows, cols


def check_block(variant: Variant, block_size: object) -> int:
    """The block size the variant will use (None: its default); InvalidInput for one it cannot take."""
    try:
        return variant.check_block_size(block_size)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None


def _check_variant(variant: object, block_size: object) -> tuple[Variant | None, int | None]:
    if variant is None:
        return None, None
    if not isinstance(variant, Variant):
        raise InvalidInput(f"variant must be one of explorer.VARIANTS' values or None, got {type(variant).__name__}")
    default = block_size is None or (whole(block_size) and block_size == 0)  # 0: the default, as the app passes it
    return variant, check_block(variant, None if default else block_size)


def bytes_needed(
    rows: int,
    cols: int,
    dtype: str,
    backend: str,
    variant: Variant | None = None,
    block_size: int | None = None,
    traced: bool = False,
    acc: str = "float32",
) -> int:
    """Peak memory of a run, input included (explorer.budget.run_bytes): the emulator's host memory or the
    GPU's device memory. Without a variant, the largest over the variants that take this dtype.

    Raises InvalidInput for arguments softmax() would refuse (backend "auto" is resolved first)."""
    rows, cols = check_shape(rows, cols)
    check_dtype(dtype)
    check_dtype(acc, "accumulator")
    backend = resolve_backend(backend)
    variant, block = _check_variant(variant, block_size)
    if not isinstance(traced, bool | np.bool_):
        raise InvalidInput(f"traced must be True or False, got {traced!r}")
    if variant is None:
        if backend == "cuda":
            return budget.device_bytes(None, None, rows, cols, dtype, False)
        return max(
            budget.run_bytes(v, rows, cols, dtype, acc, False, backend) for v in VARIANTS.values() if dtype in v.dtypes
        )
    return budget.run_bytes(variant, rows, cols, dtype, acc, bool(traced) and variant.traceable, backend, block)


def free_bytes(backend: str) -> int:
    if backend == "cuda":
        return cuda.free_bytes()
    try:
        with open("/proc/meminfo") as f:
            info = dict(line.split(":", 1) for line in f)
        return int(info["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return 2**63 - 1  # unknown: let the allocation itself fail


def size(n: int) -> str:
    """Bytes in words: GiB/MiB/KiB with two decimals, or exact bytes below 1 KiB."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} bytes"


def sizes(n: int, limit: int) -> tuple[str, str]:
    """n and limit in words, exact where rounding would make them look equal."""
    a, b = size(n), size(limit)
    return (f"{n:,} bytes", f"{limit:,} bytes ({b})") if a == b else (a, b)


def check_memory(
    rows: int, cols: int, itemsize: int, need: int, backend: str, what: str, gpu_need: int | None = None
) -> None:
    """Refuse, before anything is allocated, rows × cols elements (of itemsize bytes) over this server's
    limit, `need` bytes over what the GPU has free ("cuda"), or over this server's fixed limit for one run
    (host memory: the same request always gets the same answer). gpu_need: what the work would take on a
    GPU, named in the refusal where it fits the limit. `what` names the work."""
    cap = max_elements()
    n = rows * cols
    if n > cap:
        raise TooLarge(
            f"{what}: {rows}×{cols} = {n:,} elements ({size(n * itemsize)}) is over this server's limit "
            f"of {cap:,} elements ({size(cap * itemsize)}); choose a smaller shape"
        )
    if backend == "cuda":
        have = free_bytes(backend)
        if need > have:
            shown_need, shown_have = sizes(need, have)
            raise TooLarge(
                f"{what}: {rows}×{cols} = {n:,} elements needs about {shown_need} but only {shown_have} "
                "of GPU memory is free; choose a smaller shape or fewer variants"
            )
        return
    limit = budget.run_budget()
    if need > limit:
        shown_need, shown_limit = sizes(need, limit)
        gpu = (
            f"; on a GPU it would need only about {size(gpu_need)} and fit"
            if gpu_need is not None and gpu_need <= limit
            else ""
        )
        raise TooLarge(
            f"{what}: {rows}×{cols} = {n:,} elements needs about {shown_need} in the CPU emulation, "
            f"over this server's limit of {shown_limit} for one run{gpu}; choose a smaller shape"
        )


def check_fits(
    rows: int,
    cols: int,
    dtype: str,
    backend: str,
    variant: Variant | None = None,
    block_size: int | None = None,
    traced: bool = False,
    acc: str = "float32",
) -> int:
    """Refuse, with the numbers, a run over this server's limits (elements, memory for one run) or the GPU's
    free memory; returns the bytes it needs. Raises TooLarge, or InvalidInput for arguments softmax() would refuse."""
    need = bytes_needed(rows, cols, dtype, backend, variant, block_size, traced, acc)
    used = resolve_backend(backend)
    gpu = None if used == "cuda" else bytes_needed(rows, cols, dtype, "cuda", variant, block_size, traced, acc)
    check_memory(int(rows), int(cols), DTYPES[dtype].itemsize, need, used, f"{dtype} softmax", gpu)
    return need


def get_variant(key: str) -> Variant:
    if not isinstance(key, str) or key not in VARIANTS:
        raise InvalidInput(f"unknown variant {key!r}; choose one of {', '.join(VARIANTS)}")
    return VARIANTS[key]


def softmax(
    x: np.ndarray,
    variant: str,
    acc: str = "float32",
    backend: str = "auto",
    trace_row: int | None = None,
    block_size: int | None = None,
    progress: Callable[[int, int], object] | None = None,
) -> SoftmaxResult:
    """Softmax over the last axis of x with one of the registry's kernels.

    Parameters
    ----------
    x : 1-D or 2-D array of float32, float16 or ml_dtypes.bfloat16 (rows × cols).
    variant : a key of explorer.VARIANTS.
    acc : accumulator type of the running max and denominator: "float32", "float16", "bfloat16".
    backend : "cuda" (raises GPUUnavailable without a usable GPU), "emulator", or "auto".
    trace_row : record this row's (m, d) states as the kernel computed them.
    block_size : threads per row for block variants (a multiple of 32 up to 1024).
    progress : called as progress(rows done, rows): in the emulation after each chunk of rows
        (explorer.budget.chunks picks them; the output is the same), on the GPU once at the end.
        An exception it raises ends the run there and comes out of softmax: a caller's stop.

    Raises
    ------
    InvalidInput, TooLarge, GPUUnavailable, KernelFailed (all explorer.ExplorerError).
    """
    v = get_variant(variant)
    dtype, rows, cols = check_logits(x)  # from the shape: nothing is copied before check_fits
    if dtype not in v.dtypes:
        raise InvalidInput(f"{variant} takes {', '.join(v.dtypes)} inputs, not {dtype}")
    if not isinstance(acc, str) or acc not in DTYPES:
        raise InvalidInput(f"unknown accumulator {acc!r}; choose one of {', '.join(DTYPES)}")
    if acc not in v.accumulators:
        raise InvalidInput(f"{variant} accumulates in {', '.join(v.accumulators)}, not {acc}")
    block = check_block(v, block_size)
    if progress is not None and not callable(progress):
        raise InvalidInput(f"progress must be a function of (rows done, rows) or None, got {type(progress).__name__}")
    if trace_row is not None:
        if not v.traceable:
            raise InvalidInput(
                f"{variant} records no trace; trace one of {', '.join(k for k, w in VARIANTS.items() if w.traceable)}"
            )
        if not whole(trace_row) or not 0 <= trace_row < rows:
            raise InvalidInput(f"trace_row must be a row index from 0 to {rows - 1}, got {trace_row!r}")
        trace_row = int(trace_row)
    used = resolve_backend(backend)
    need = check_fits(rows, cols, dtype, used, v, block, trace_row is not None, acc)
    launch = v.launch(rows, cols, block, dtype)
    with budget.host_run(used, need):
        x2 = np.ascontiguousarray(x.reshape(rows, cols))
        if used == "cuda":
            out, raw = cuda.run(v, launch, x2, dtype, acc, trace_row)
            if progress is not None:
                progress(rows, rows)
        else:
            chunks = 1 if progress is None else budget.chunks(v, launch, rows, cols, dtype, acc)
            out, raw = emulator.run(v, launch, x2, acc, trace_row, chunks, progress)
        trace = build_trace(v, launch, raw, x2[trace_row], trace_row, acc) if raw is not None else None
    return SoftmaxResult(
        out=out.reshape(x.shape), trace=trace, backend=used, variant=variant, acc=acc, block_size=block, launch=launch
    )


def check_numbers(x: object, name: str = "x") -> np.ndarray:
    """x as a non-empty numeric array of at least one dimension (bfloat16 included); InvalidInput otherwise."""
    try:
        a = np.asarray(x)
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        raise InvalidInput(f"{name} must be an array of numbers: {exc}") from None
    if a.dtype not in DTYPES.values() and a.dtype.kind not in "fiub":
        raise InvalidInput(f"{name} must hold real numbers, got {a.dtype} values")
    if a.ndim == 0 or a.size == 0:
        raise InvalidInput(f"{name} must have at least one element along its last axis, got shape {a.shape}")
    rows, cols = a.size // a.shape[-1], a.shape[-1]
    check_memory(rows, cols, 8, budget.errors_bytes(rows, cols), "emulator", "the float64 reference and errors")
    return a


def check_k(k: object, cols: int, k_max: int) -> int:
    """k as an int from 1 to min(k_max, cols); InvalidInput otherwise."""
    if not whole(k) or not 1 <= k <= min(k_max, cols):
        raise InvalidInput(
            f"k must be a whole number from 1 to {min(k_max, cols)} (at most {k_max} and at most cols), got {k!r}"
        )
    return int(k)


def reference(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis in float64, max subtracted (explorer.numerics.reference).

    IEEE semantics, as torch.softmax and scipy: a NaN or +inf in a row makes the whole row NaN,
    -inf entries give exactly 0, and a row of only -inf gives NaN. Raises InvalidInput for an empty,
    0-d or non-numeric x, TooLarge for one over this server's limit.
    """
    x = check_numbers(x, "x")
    with budget.RUNS.reserve(budget.reference_bytes(x.size // x.shape[-1], x.shape[-1])):
        return numerics.reference(x)


def errors(out: np.ndarray, x: np.ndarray, ref: np.ndarray | None = None) -> numerics.ErrorReport:
    """Compare a softmax output (float32, float16 or bfloat16) with the float64 reference of its input x
    (explorer.numerics.errors). Raises InvalidInput where out, x and ref differ in shape or are not arrays
    of numbers, TooLarge for arrays over this server's limit."""
    if not isinstance(out, np.ndarray):
        raise InvalidInput(f"out must be a numpy array, got {type(out).__name__}")
    try:
        dtype_name(out.dtype)
    except ValueError as exc:
        raise InvalidInput(f"out: {exc}") from None
    out, x = check_numbers(out, "out"), check_numbers(x, "x")
    ref = None if ref is None else check_numbers(ref, "ref").astype(np.float64)
    for name, other in (("x", x), ("ref", ref)):
        if other is not None and other.shape != out.shape:
            raise InvalidInput(f"out has shape {out.shape} but {name} has shape {other.shape}; they must match")
    with budget.RUNS.reserve(budget.errors_bytes(out.size // out.shape[-1], out.shape[-1])):
        return numerics.errors(out, x, ref)


def _real(value: object, name: str) -> float:
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.integer | np.floating):
        raise InvalidInput(f"{name} must be a number, got {value!r}")
    try:
        number = float(value)
    except OverflowError:
        raise InvalidInput(f"{name} is too large: {value!r}") from None
    if not number >= 0:
        raise InvalidInput(f"{name} must be a number >= 0, got {value!r}")
    return number


def error_bound(sequential_terms: int, acc: str, out: str, max_abs_x: float = 0.0) -> float:
    """The seed's bound on the relative error: 3·n·u_acc + u_out, n = terms one accumulator folded in
    sequence, plus 2·max|x|·u_acc where x is rounded on entering acc (explorer.numerics.error_bound).
    Raises InvalidInput for an unknown type or a negative or non-numeric n or max|x|."""
    return numerics.error_bound(
        _real(sequential_terms, "sequential_terms"),
        check_dtype(acc, "accumulator"),
        check_dtype(out, "output type"),
        _real(max_abs_x, "max_abs_x"),
    )


def rounds_input(dtype: str, acc: str) -> bool:
    """Whether x changes when it enters an accumulator of type acc; InvalidInput for unknown types."""
    return numerics.rounds_input(check_dtype(dtype), check_dtype(acc, "accumulator"))


def info() -> dict:
    """What "auto" runs: the GPU and its software, or why the emulator serves instead."""
    if forced_backend() == "emulator":
        return {"backend": "emulator", "reason": "EXPLORER_BACKEND=emulator"}
    if cuda.available():
        return {"backend": "cuda", **cuda.device_info()}
    return {"backend": "emulator", "reason": cuda.unavailable_reason()}


def kernel_source(variant: str) -> str:
    """The CUDA source file that holds a variant's kernel (with common.cuh inlined)."""
    return cuda.kernel_source(get_variant(variant).kernel_file)


def kernel_resources(
    variant: str,
    dtype: str = "float32",
    acc: str = "float32",
    rows: int = 1024,
    cols: int = 4096,
    block_size: int | None = None,
) -> list[dict] | None:
    """Per kernel the launch runs for this shape: registers, shared and local (spill) bytes of the
    compiled code. None where no GPU can compile it."""
    v = get_variant(variant)
    rows, cols = check_shape(rows, cols)
    if check_dtype(dtype) not in v.dtypes or check_dtype(acc, "accumulator") not in v.accumulators:
        raise InvalidInput(f"{variant} has no {dtype}/{acc} instantiation")
    block = check_block(v, block_size)
    if not cuda.available():
        return None
    return cuda.resources(v, v.launch(rows, cols, block, dtype), dtype, acc)

"""The public entry point: softmax() on the GPU or in emulation, the float64 reference and error report, the
bound, and what the GPU offers; the argument and memory checks they share are explorer/checks.py's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from . import budget, numerics, reserve
from .backends import cuda, emulator
from .checks import (
    check_accumulator_range,
    check_block,
    check_dtype,
    check_logits,
    check_memory,
    check_numbers,
    check_real,
    check_shape,
    check_variant,
    forced_backend,
    get_variant,
    resolve_backend,
    whole,
)
from .errors import InvalidInput
from .geometry import Launch
from .numerics import DTYPES, dtype_name
from .registry import VARIANTS, Variant
from .trace import RawTrace, Trace, build_trace


@dataclass
class SoftmaxResult:
    out: np.ndarray  # same shape and dtype as x
    trace: Trace | None
    backend: str  # "cuda" or "emulator"
    variant: str
    acc: str
    block_size: int
    launch: Launch


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
    variant, block = check_variant(variant, block_size)
    if variant is not None:
        check_types(variant, dtype, acc)
    if not isinstance(traced, bool | np.bool_):
        raise InvalidInput(f"traced must be True or False, got {traced!r}")
    if variant is None:
        return max(
            budget.run_bytes(v, rows, cols, dtype, acc, False, backend) for v in VARIANTS.values() if dtype in v.dtypes
        )
    return budget.run_bytes(variant, rows, cols, dtype, acc, bool(traced) and variant.traceable, backend, block)


def check_types(v: Variant, dtype: str, acc: str) -> None:
    """Refuse an input dtype or an accumulator the variant has no kernel for."""
    if dtype not in v.dtypes:
        raise InvalidInput(f"{v.key} takes {', '.join(v.dtypes)} inputs, not {dtype}")
    if check_dtype(acc, "accumulator") not in v.accumulators:
        raise InvalidInput(f"{v.key} accumulates in {', '.join(v.accumulators)}, not {acc}")


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
    progress : called as progress(rows done, rows): in the emulation after each batch of rows
        (explorer.budget.row_batches picks them; the output is the same), on the GPU once at the end.
        An exception it raises ends the run there and comes out of softmax: a caller's stop.

    Raises
    ------
    InvalidInput, TooLarge, GPUUnavailable, KernelFailed (all explorer.ExplorerError).
    """
    v = get_variant(variant)
    dtype, rows, cols = check_logits(x)  # from the shape: nothing is copied before check_fits
    check_types(v, dtype, acc)
    block = check_block(v, block_size)
    if progress is not None and not callable(progress):
        raise InvalidInput(f"progress must be a function of (rows done, rows) or None, got {type(progress).__name__}")
    trace_row = _check_trace_row(v, trace_row, rows)
    used = resolve_backend(backend)
    need = check_fits(rows, cols, dtype, used, v, block, trace_row is not None, acc)
    launch = v.launch(rows, cols, block, dtype)
    check_accumulator_range(x, acc)
    with reserve.run_reservation(used, need):
        x2 = np.ascontiguousarray(x.reshape(rows, cols))
        out, raw = _run_kernel(used, v, launch, x2, dtype, acc, trace_row, progress)
        trace = build_trace(v, launch, raw, x2[trace_row], trace_row, acc) if raw is not None else None
    return SoftmaxResult(
        out=out.reshape(x.shape), trace=trace, backend=used, variant=variant, acc=acc, block_size=block, launch=launch
    )


def _check_trace_row(v: Variant, trace_row: int | None, rows: int) -> int | None:
    """The row to trace as an int (None for none); InvalidInput for a variant that records no trace or a row
    outside the input."""
    if trace_row is None:
        return None
    if not v.traceable:
        raise InvalidInput(
            f"{v.key} records no trace; trace one of {', '.join(k for k, w in VARIANTS.items() if w.traceable)}"
        )
    if not whole(trace_row) or not 0 <= trace_row < rows:
        raise InvalidInput(f"trace_row must be a row index from 0 to {rows - 1}, got {trace_row!r}")
    return int(trace_row)


def _run_kernel(
    backend: str,
    v: Variant,
    launch: Launch,
    x2: np.ndarray,
    dtype: str,
    acc: str,
    trace_row: int | None,
    progress: Callable[[int, int], object] | None,
) -> tuple[np.ndarray, RawTrace | None]:
    """The kernel over the rows × cols x2 on the backend: its output and, for trace_row, the raw trace. The
    emulation reports progress after each batch of rows (explorer.budget.row_batches), the GPU once at the end."""
    rows, cols = x2.shape
    if backend == "cuda":
        out, raw = cuda.run(v, launch, x2, dtype, acc, trace_row)
        if progress is not None:
            progress(rows, rows)
        return out, raw
    batches = 1 if progress is None else budget.row_batches(v, launch, rows, cols, dtype, acc)
    return emulator.run(v, launch, x2, acc, trace_row, batches, progress)


def reference(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis in float64, max subtracted (explorer.numerics.reference).

    IEEE semantics, as torch.softmax and scipy: a NaN or +inf in a row makes the whole row NaN,
    -inf entries give exactly 0, and a row of only -inf gives NaN. Raises InvalidInput for an empty,
    0-d or non-numeric x, TooLarge for one over this server's limit.
    """
    x = check_numbers(x, "x", "the float64 reference", budget.reference_bytes)
    with reserve.RUNS.reserve(budget.reference_bytes(x.size // x.shape[-1], x.shape[-1])):
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

    def need(rows: int, cols: int) -> int:  # the report, and the reference where it must compute it too
        return budget.errors_bytes(rows, cols) + (budget.reference_bytes(rows, cols) if ref is None else 0)

    what = "the error report against float64"
    out, x = check_numbers(out, "out", what, need), check_numbers(x, "x", what, need)
    ref = None if ref is None else check_numbers(ref, "ref", what, need)
    for name, other in (("x", x), ("ref", ref)):
        if other is not None and other.shape != out.shape:
            raise InvalidInput(f"out has shape {out.shape} but {name} has shape {other.shape}; they must match")
    with reserve.RUNS.reserve(need(out.size // out.shape[-1], out.shape[-1])):
        return numerics.errors(out, x, None if ref is None else np.asarray(ref, np.float64))


def error_bound(sequential_terms: int, acc: str, out: str, max_abs_x: float = 0.0) -> float:
    """The bound on the relative error: 3·n·u_acc + u_out, n = terms one accumulator folded in
    sequence, plus 2·max|x|·u_acc where x is rounded on entering acc (explorer.numerics.error_bound).
    Raises InvalidInput for an unknown type or a negative or non-numeric n or max|x|."""
    return numerics.error_bound(
        check_real(sequential_terms, "sequential_terms"),
        check_dtype(acc, "accumulator"),
        check_dtype(out, "output type"),
        check_real(max_abs_x, "max_abs_x"),
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
    """The CUDA source file that holds a variant's kernel, with the headers it includes inlined."""
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
    check_types(v, check_dtype(dtype), acc)
    block = check_block(v, block_size)
    if not cuda.available():
        return None
    return cuda.resources(v, v.launch(rows, cols, block, dtype), dtype, acc)

"""The public entry point: softmax() on the GPU or in emulation, with every check in one place."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .backends import cuda, emulator
from .errors import InvalidInput, TooLarge
from .numerics import DTYPES, dtype_name
from .registry import VARIANTS, Launch, Variant
from .trace import Trace, build_trace, trace_shape

BACKENDS = ("auto", "cuda", "emulator")
# Operator cap on elements per run (a shared box sets it lower): EXPLORER_MAX_ELEMENTS.
DEFAULT_MAX_ELEMENTS = 2**31 - 1


@dataclass
class SoftmaxResult:
    out: np.ndarray  # same shape and dtype as x
    trace: Trace | None
    backend: str  # "cuda" or "emulator"
    variant: str
    acc: str
    block_size: int
    launch: Launch


def max_elements() -> int:
    raw = os.environ.get("EXPLORER_MAX_ELEMENTS", "")
    try:
        return int(raw) if raw else DEFAULT_MAX_ELEMENTS
    except ValueError:
        raise InvalidInput(f"EXPLORER_MAX_ELEMENTS must be a whole number, got {raw!r}") from None


def forced_backend() -> str | None:
    """The operator's choice for "auto" (EXPLORER_BACKEND=emulator keeps a shared box off its GPU)."""
    forced = os.environ.get("EXPLORER_BACKEND", "").strip()
    if forced and forced not in ("cuda", "emulator"):
        raise InvalidInput(f"EXPLORER_BACKEND must be cuda or emulator, got {forced!r}")
    return forced or None


def resolve_backend(backend: str) -> str:
    """"auto" is EXPLORER_BACKEND if set, else CUDA where a GPU is usable, else the emulator."""
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise InvalidInput(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if backend == "auto":
        return forced_backend() or ("cuda" if cuda.available() else "emulator")
    return backend


def bytes_needed(rows: int, cols: int, dtype: str, backend: str, variant: Variant | None = None,
                 block_size: int | None = None, traced: bool = False) -> int:
    """Memory a run takes: input and output, the trace buffers, and the emulator's fp32/fp64 temporaries."""
    itemsize = DTYPES[dtype].itemsize
    total = 2 * rows * cols * itemsize
    if backend == "emulator":
        total += rows * cols * 4 * 8  # a padded copy, the fp32 view and fp64 exp temporaries of the normalise pass
    if traced and variant is not None:
        threads, steps, merges = trace_shape(variant, variant.launch(rows, cols, block_size, dtype), cols)
        total += threads * steps * 12 + merges * 8
    return total


def free_bytes(backend: str) -> int:
    if backend == "cuda":
        return cuda.free_bytes()
    try:
        with open("/proc/meminfo") as f:
            info = dict(line.split(":", 1) for line in f)
        return int(info["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return 2**63 - 1  # unknown: let the allocation itself fail


def check_fits(rows: int, cols: int, dtype: str, backend: str, variant: Variant | None = None,
               block_size: int | None = None, traced: bool = False) -> None:
    """Refuse, with the numbers, a run larger than the operator cap or the backend's free memory."""
    cap = max_elements()
    if rows * cols > cap:
        raise TooLarge(f"{rows}×{cols} = {rows * cols:,} elements is over this server's cap of {cap:,} "
                       "(EXPLORER_MAX_ELEMENTS)")
    need = bytes_needed(rows, cols, dtype, backend, variant, block_size, traced)
    have = free_bytes(backend)
    if need > have:
        where = "GPU memory" if backend == "cuda" else "host memory"
        raise TooLarge(f"{rows}×{cols} {dtype} needs about {need / 2**30:.2f} GiB but only "
                       f"{have / 2**30:.2f} GiB of {where} is free")


def get_variant(key: str) -> Variant:
    if not isinstance(key, str) or key not in VARIANTS:
        raise InvalidInput(f"unknown variant {key!r}; choose one of {', '.join(VARIANTS)}")
    return VARIANTS[key]


def softmax(x: np.ndarray, variant: str, acc: str = "float32", backend: str = "auto",
            trace_row: int | None = None, block_size: int | None = None) -> SoftmaxResult:
    """Softmax over the last axis of x with one of the registry's kernels.

    Parameters
    ----------
    x : 1-D or 2-D array of float32, float16 or ml_dtypes.bfloat16 (rows × cols).
    variant : a key of explorer.VARIANTS.
    acc : accumulator type of the running max and denominator: "float32", "float16", "bfloat16".
    backend : "cuda" (raises GPUUnavailable without a usable GPU), "emulator", or "auto".
    trace_row : record this row's (m, d) states as the kernel computed them.
    block_size : threads per row for block variants (a multiple of 32 up to 1024).

    Raises
    ------
    InvalidInput, TooLarge, GPUUnavailable, KernelFailed (all explorer.ExplorerError).
    """
    v = get_variant(variant)
    if not isinstance(x, np.ndarray):
        raise InvalidInput(f"x must be a numpy array, got {type(x).__name__}")
    try:
        dtype = dtype_name(x.dtype)
    except ValueError as exc:
        raise InvalidInput(f"{exc} (convert with x.astype(...))") from None
    if x.ndim not in (1, 2):
        raise InvalidInput(f"x must be 1-D or 2-D (rows × cols), got shape {x.shape}")
    if x.size == 0:
        raise InvalidInput(f"x is empty (shape {x.shape}); softmax needs at least one element per row")
    x2 = np.ascontiguousarray(x.reshape(-1, x.shape[-1]))
    rows, cols = x2.shape
    if cols > 2**31 - 1 or rows > 2**31 - 1:
        raise InvalidInput(f"rows and cols must each be below 2^31, got {rows}×{cols}")
    if dtype not in v.dtypes:
        raise InvalidInput(f"{variant} takes {', '.join(v.dtypes)} inputs, not {dtype}")
    if not isinstance(acc, str) or acc not in DTYPES:
        raise InvalidInput(f"unknown accumulator {acc!r}; choose one of {', '.join(DTYPES)}")
    if acc not in v.accumulators:
        raise InvalidInput(f"{variant} accumulates in {', '.join(v.accumulators)}, not {acc}")
    try:
        block = v.check_block_size(block_size)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    if trace_row is not None:
        if not v.traceable:
            raise InvalidInput(f"{variant} records no trace; trace one of "
                               f"{', '.join(k for k, w in VARIANTS.items() if w.traceable)}")
        if isinstance(trace_row, bool) or not isinstance(trace_row, (int, np.integer)) or not 0 <= trace_row < rows:
            raise InvalidInput(f"trace_row must be a row index from 0 to {rows - 1}, got {trace_row!r}")
        trace_row = int(trace_row)
    used = resolve_backend(backend)
    check_fits(rows, cols, dtype, used, v, block, trace_row is not None)
    launch = v.launch(rows, cols, block, dtype)
    if used == "cuda":
        out, raw = cuda.run(v, launch, x2, dtype, acc, trace_row)
    else:
        out, raw = emulator.run(v, launch, x2, acc, trace_row)
    trace = build_trace(v, launch, raw, x2[trace_row], trace_row, acc) if raw is not None else None
    return SoftmaxResult(out=out.reshape(x.shape), trace=trace, backend=used, variant=variant, acc=acc,
                         block_size=block, launch=launch)


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


def kernel_resources(variant: str, dtype: str = "float32", acc: str = "float32", rows: int = 1024,
                     cols: int = 4096, block_size: int | None = None) -> list[dict] | None:
    """Per kernel the launch runs for this shape: registers, shared and local (spill) bytes of the
    compiled code. None where no GPU can compile it."""
    v = get_variant(variant)
    if dtype not in v.dtypes or acc not in v.accumulators:
        raise InvalidInput(f"{variant} has no {dtype}/{acc} instantiation")
    if not cuda.available():
        return None
    return cuda.resources(v, v.launch(rows, cols, v.check_block_size(block_size), dtype), dtype, acc)

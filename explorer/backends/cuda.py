"""The real kernels: kernels/*.cu compiled at run time by CuPy's RawModule (NVRTC).

One module per (source file, element type, accumulator type), holding every kernel of the file
with TRACE off and on, built once per process and shared by all callers (compilation is locked).
Only this module and bench.py import cupy.
"""

from __future__ import annotations

import functools
import re
import threading
from pathlib import Path

import numpy as np

from ..errors import GPUContextLost, GPUUnavailable, KernelFailed
from ..registry import VARIANTS, Variant
from ..trace import RawTrace, trace_shape

KERNEL_DIR = Path(__file__).resolve().parents[2] / "kernels"
C_TYPES = {"float32": "float", "float16": "__half", "bfloat16": "__nv_bfloat16"}
POISON = -1.0  # never a softmax output: any element still equal to it was not written
# CUDA errors after which the context is unusable until the process restarts
STICKY_ERRORS = ("cudaErrorIllegalAddress", "cudaErrorLaunchFailure", "cudaErrorIllegalInstruction",
                 "cudaErrorMisalignedAddress", "cudaErrorHardwareStackError", "cudaErrorAssert",
                 "CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED", "CUDA_ERROR_ILLEGAL_INSTRUCTION",
                 "CUDA_ERROR_MISALIGNED_ADDRESS", "CUDA_ERROR_ASSERT")

_compile_lock = threading.Lock()
_context_lost: str | None = None

try:
    import cupy as cp
except ImportError:  # no CuPy: the emulator serves
    cp = None


@functools.lru_cache(maxsize=1)
def unavailable_reason() -> str | None:
    """None when a GPU can run the kernels, else why not, in words."""
    if cp is None:
        return "CuPy is not installed"
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            return "no CUDA device is visible"
        cp.cuda.runtime.getDeviceProperties(0)
    except Exception as exc:  # CUDARuntimeError or a missing driver library
        return f"no usable CUDA device ({exc})"
    return None


def available() -> bool:
    return unavailable_reason() is None


def _require_gpu() -> None:
    reason = unavailable_reason()
    if reason:
        raise GPUUnavailable(f"backend 'cuda' needs a GPU, but {reason}; use backend 'emulator' or 'auto'")
    if _context_lost:
        raise GPUContextLost(f"the CUDA context was lost earlier ({_context_lost}); restart the server to use the GPU again")


def kernel_source(filename: str) -> str:
    """A kernel file with its #include "common.cuh" inlined, so CuPy's cache sees every change."""
    text = (KERNEL_DIR / filename).read_text()
    return re.sub(r'#include "(\w+\.cuh)"', lambda m: (KERNEL_DIR / m.group(1)).read_text(), text)


def _name(variant: Variant, dtype: str, acc: str, traced: bool) -> str:
    args = [C_TYPES[dtype], C_TYPES[acc]]
    if variant.traceable:
        args.append("true" if traced else "false")
    return f"{variant.kernel}<{', '.join(args)}>"


@functools.cache
def _module(filename: str, dtype: str, acc: str):
    names = []
    for v in VARIANTS.values():
        if v.kernel_file == filename and dtype in v.dtypes and acc in v.accumulators:
            names += [_name(v, dtype, acc, False)] + ([_name(v, dtype, acc, True)] if v.traceable else [])
    module = cp.RawModule(code=kernel_source(filename), options=("-std=c++17",), name_expressions=names)
    module.compile()
    return module


def kernel(variant: Variant, dtype: str, acc: str, traced: bool = False):
    _require_gpu()
    with _compile_lock:
        module = _module(variant.kernel_file, dtype, acc)
    return module.get_function(_name(variant, dtype, acc, traced))


def resources(variant: Variant, dtype: str, acc: str) -> dict:
    """Registers, static shared memory and spill (local) bytes of the compiled, untraced kernel."""
    k = kernel(variant, dtype, acc)
    return {"registers": k.num_regs, "shared_bytes": k.shared_size_bytes, "local_bytes": k.local_size_bytes,
            "max_threads_per_block": k.max_threads_per_block}


def to_device(x: np.ndarray):
    """bfloat16 travels as its uint16 bits: CuPy has no bfloat16 dtype."""
    return cp.asarray(x.view(np.uint16) if x.dtype.itemsize == 2 else x)


def from_device(y, dtype: np.dtype) -> np.ndarray:
    return cp.asnumpy(y).view(dtype)


def poison_value(dtype: np.dtype):
    return np.full(1, POISON, dtype).view(np.uint16 if dtype.itemsize == 2 else dtype)[0]


def launch(variant: Variant, x_dev, y_dev, rows: int, cols: int, dtype: str, acc: str, block_size: int,
           trace=None, trace_row: int = -1) -> None:
    """Launch one variant on device arrays (no checks, no sync): the path bench.py times."""
    geometry = variant.launch(rows, cols, block_size)
    args = [x_dev, y_dev, np.int32(rows), np.int32(cols)]
    if variant.traceable:
        args += [np.int64(trace_row), *trace] if trace is not None else [np.int64(-1), *_null_trace()]
    kernel(variant, dtype, acc, traced=trace is not None)((geometry.grid,), (geometry.block,), tuple(args))


@functools.lru_cache(maxsize=1)
def _null_trace():
    return (cp.empty(1, np.float32), cp.empty(1, np.float32), cp.empty(1, np.int32), cp.empty(1, np.float32),
            cp.empty(1, np.float32))


def _fail(exc: Exception, variant: Variant, shape) -> KernelFailed:
    global _context_lost
    message = f"{variant.key} on {shape[0]}×{shape[1]} failed on the GPU: {exc}"
    if any(code in str(exc) for code in STICKY_ERRORS):
        _context_lost = message
        return GPUContextLost(message + ". The CUDA context is lost; restart the server.")
    return KernelFailed(message)


def run(variant: Variant, x: np.ndarray, dtype: str, acc: str, block_size: int, trace_row: int | None):
    """Run on the GPU with a poisoned output; returns (out, RawTrace or None)."""
    _require_gpu()
    rows, cols = x.shape
    try:
        x_dev = to_device(x)
        y_dev = cp.full(x_dev.shape, poison_value(x.dtype), x_dev.dtype)
        trace = None
        if trace_row is not None:
            blank = RawTrace.empty(*trace_shape(variant, cols, block_size))
            trace = [cp.asarray(a) for a in (blank.step_m, blank.step_d, blank.step_index, blank.merge_m, blank.merge_d)]
        launch(variant, x_dev, y_dev, rows, cols, dtype, acc, block_size, trace, -1 if trace_row is None else trace_row)
        cp.cuda.get_current_stream().synchronize()
        unwritten = int((y_dev == poison_value(x.dtype)).sum())
        out = from_device(y_dev, x.dtype)
        raw = RawTrace(*[cp.asnumpy(a) for a in trace]) if trace is not None else None
    except (GPUUnavailable, KernelFailed):
        raise
    except Exception as exc:  # CUDA driver/runtime/NVRTC errors
        if cp is not None and isinstance(exc, cp.cuda.compiler.CompileException):
            raise KernelFailed(f"{variant.key} did not compile for {dtype}/{acc}: {exc}") from exc
        raise _fail(exc, variant, x.shape) from exc
    if unwritten:
        raise KernelFailed(f"{variant.key} left {unwritten} of {x.size} outputs unwritten on {rows}×{cols}")
    return out, raw


def free_bytes() -> int:
    """Device memory free for a new run: the driver's free bytes plus what CuPy's pool holds unused."""
    _require_gpu()
    free, _total = cp.cuda.runtime.memGetInfo()
    pool = cp.get_default_memory_pool()
    return int(free + pool.total_bytes() - pool.used_bytes())


def device_info() -> dict:
    _require_gpu()
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    free, total = cp.cuda.runtime.memGetInfo()
    version = cp.cuda.runtime.runtimeGetVersion()
    driver = cp.cuda.runtime.driverGetVersion()
    return {
        "gpu": props["name"].decode(),
        "compute_capability": f"{props['major']}.{props['minor']}",
        "multiprocessors": props["multiProcessorCount"],
        "l2_bytes": props["l2CacheSize"],
        "memory_total_bytes": total,
        "memory_free_bytes": free,
        "cuda_runtime": f"{version // 1000}.{version % 1000 // 10}",
        "cuda_driver": f"{driver // 1000}.{driver % 1000 // 10}",
        "cupy": cp.__version__,
    }

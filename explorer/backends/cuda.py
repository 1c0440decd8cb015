"""The real kernels: kernels/*.cu compiled at run time by CuPy's RawModule (NVRTC).

One module per (source file, element type, accumulator type), holding every kernel of the file
with TRACE off and on, built once per process and shared by all callers (compilation is locked).
Only this module and bench.py import cupy.
"""

from __future__ import annotations

import ctypes
import functools
import re
import threading
from pathlib import Path

import numpy as np

from ..errors import GPUContextLost, GPUUnavailable, KernelFailed
from ..fast_launch import across_clusters
from ..geometry import Launch
from ..registry import VARIANTS, Variant
from ..trace import RawTrace, trace_shape

KERNEL_DIR = Path(__file__).resolve().parents[2] / "kernels"
C_TYPES = {"float32": "float", "float16": "__half", "bfloat16": "__nv_bfloat16"}
POISON = -1.0  # never a softmax output: any element still equal to it was not written
# CUDA errors after which the context is unusable until the process restarts
STICKY_ERRORS = (
    "cudaErrorIllegalAddress",
    "cudaErrorLaunchFailure",
    "cudaErrorIllegalInstruction",
    "cudaErrorMisalignedAddress",
    "cudaErrorHardwareStackError",
    "cudaErrorAssert",
    "CUDA_ERROR_ILLEGAL_ADDRESS",
    "CUDA_ERROR_LAUNCH_FAILED",
    "CUDA_ERROR_ILLEGAL_INSTRUCTION",
    "CUDA_ERROR_MISALIGNED_ADDRESS",
    "CUDA_ERROR_ASSERT",
)

_compile_lock = threading.Lock()
context_lost: str | None = None

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
        text = str(exc)
        if "InsufficientDriver" in text or "NoDevice" in text or "libcuda" in text:
            return "no NVIDIA GPU or driver on this machine"
        return f"no usable CUDA device ({text})"
    return None


def available() -> bool:
    return unavailable_reason() is None


@functools.cache
def multiprocessors() -> int | None:
    """The GPU's SM count, or None without a usable GPU."""
    if not available():
        return None
    return cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["multiProcessorCount"]


def shared_per_multiprocessor() -> int | None:
    """The GPU's shared memory an SM, or None without a usable GPU."""
    if not available():
        return None
    return cp.cuda.Device().attributes["MaxSharedMemoryPerMultiprocessor"]


def require_gpu() -> None:
    reason = unavailable_reason()
    if reason:
        raise GPUUnavailable(f"backend 'cuda' needs a GPU, but {reason}; use backend 'emulator' or 'auto'")
    if context_lost:
        raise GPUContextLost(
            f"the CUDA context was lost earlier ({context_lost}); restart the server to use the GPU again"
        )


def kernel_source(filename: str, _seen: set[str] | None = None) -> str:
    """A kernel file with its local #include "*.cuh" inlined (each once), so CuPy's cache sees every change."""
    seen = set() if _seen is None else _seen

    def inline(match: re.Match) -> str:
        name = match.group(1)
        if name in seen:
            return ""
        seen.add(name)
        return kernel_source(name, seen)

    return re.sub(r'#include "(\w+\.cuh)"', inline, (KERNEL_DIR / filename).read_text())


def kernel_name(function: str, dtype: str, acc: str, traced: bool | None = None, extra: tuple[int, ...] = ()) -> str:
    """The instantiation `function<T, Acc[, TRACE], extra...>`; traced is None for kernels without the
    TRACE switch (those of variants that are not traceable), whose signature has no TRACE_ARGS."""
    args = [C_TYPES[dtype], C_TYPES[acc]] + ([] if traced is None else ["true" if traced else "false"])
    return f"{function}<{', '.join(args + [str(a) for a in extra])}>"


def fixed_kernel_names(filename: str, dtype: str, acc: str) -> tuple[str, ...]:
    """Every shape-independent instantiation of a file: compiled together, once."""
    names = []
    for v in VARIANTS.values():
        if v.kernel_file == filename and not v.templated_by_launch and dtype in v.dtypes and acc in v.accumulators:
            for function in v.functions:
                names += [kernel_name(function, dtype, acc, t) for t in ((False, True) if v.traceable else (None,))]
    return tuple(names)


@functools.cache
def _module(filename: str, names: tuple[str, ...]):
    module = cp.RawModule(code=kernel_source(filename), options=("-std=c++17",), name_expressions=list(names))
    module.compile()
    return module


def kernel_function(filename: str, dtype: str, acc: str, name: str):
    """A compiled kernel; shape-specific instantiations (fast's) get a module of their own."""
    require_gpu()
    return _compiled_function(filename, dtype, acc, name)


@functools.cache  # a dictionary lookup per launch, not a walk over the registry (small launches are CPU-bound)
def _compiled_function(filename: str, dtype: str, acc: str, name: str):
    fixed = fixed_kernel_names(filename, dtype, acc)
    with _compile_lock:
        module = _module(filename, fixed if name in fixed else (name,))
    return module.get_function(name)


def kernel_names(variant: Variant, launch: Launch, dtype: str, acc: str, traced: bool = False) -> list[str]:
    """The instantiations a launch runs, in order."""
    functions = launch.functions or (launch.kernel or variant.kernel,)
    return [kernel_name(f, dtype, acc, traced if variant.traceable else None, launch.template_args) for f in functions]


def resources(variant: Variant, launch: Launch, dtype: str, acc: str) -> list[dict]:
    """Registers, static shared memory and spill (local) bytes of each compiled, untraced kernel."""
    rows = []
    for name in kernel_names(variant, launch, dtype, acc):
        k = kernel_function(variant.kernel_file, dtype, acc, name)
        rows.append(
            {
                "kernel": name,
                "registers": k.num_regs,
                "shared_bytes": k.shared_size_bytes,
                "local_bytes": k.local_size_bytes,
                "max_threads_per_block": k.max_threads_per_block,
            }
        )
    return rows


def to_device(x: np.ndarray):
    """bfloat16 travels as its uint16 bits: CuPy has no bfloat16 dtype."""
    return cp.asarray(x.view(np.uint16) if x.dtype.itemsize == 2 else x)


def from_device(y, dtype: np.dtype) -> np.ndarray:
    return cp.asnumpy(y).view(dtype)


def poison_value(dtype: np.dtype):
    return np.full(1, POISON, dtype).view(np.uint16 if dtype.itemsize == 2 else dtype)[0]


def launch(
    variant: Variant,
    geometry: Launch,
    x_dev,
    y_dev,
    rows: int,
    cols: int,
    dtype: str,
    acc: str,
    trace=None,
    trace_row: int = -1,
) -> None:
    """Launch a variant on device arrays (no checks, no sync): the path bench.py times."""
    traced = trace is not None
    kernels = [
        kernel_function(variant.kernel_file, dtype, acc, name)
        for name in kernel_names(variant, geometry, dtype, acc, traced)
    ]
    # kernels with the TRACE switch end their signature with TRACE_ARGS
    tail = ([np.int64(trace_row), *trace] if traced else [np.int64(-1), *_null_trace()]) if variant.traceable else []
    LAUNCHERS[geometry.protocol](kernels, geometry, x_dev, y_dev, [np.int32(rows), np.int32(cols)], tail)


def _launch_rows(kernels, geometry: Launch, x_dev, y_dev, shape: list, tail: list) -> None:
    kernels[0]((geometry.grid,), (geometry.block,), (x_dev, y_dev, *shape, *tail))


def _launch_two_stage(kernels, geometry: Launch, x_dev, y_dev, shape: list, tail: list) -> None:
    """Chunk states from the first kernel; the second merges them and normalises."""
    partial = cp.empty(2 * geometry.grid, np.float32)
    grid, block, chunks = (geometry.grid,), (geometry.block,), np.int32(geometry.chunks)
    kernels[0](grid, block, (x_dev, partial, *shape, chunks, *tail))
    kernels[1](grid, block, (x_dev, y_dev, partial, *shape, chunks, *tail))


def _launch_slices(kernels, geometry: Launch, x_dev, y_dev, shape: list, tail: list) -> None:
    """fast_row and fast_stream: the slice (or held batches) in dynamic shared memory, a row's slices
    exchanging (m, d) through global memory or, in a cluster, through the leader's shared memory."""
    if x_dev.data.ptr % 16 or y_dev.data.ptr % 16:  # rows are split at 16-byte boundaries of x and y
        raise KernelFailed(f"{geometry.kernel} needs x and y to start on a 16-byte boundary")
    staging = geometry.staging_bytes
    prepare_slices_kernel(kernels[0], geometry)
    partial, sync, last = row_exchange(kernels[0], geometry, int(shape[0]), staging)  # last: resident, or the epoch
    kernels[0](
        (geometry.grid,),
        (geometry.block,),
        (x_dev, y_dev, partial, sync, *shape, np.int32(geometry.chunks), np.int32(last)),
        shared_mem=staging,
    )


LAUNCHERS = {"rows": _launch_rows, "two_stage": _launch_two_stage, "slices": _launch_slices, "cluster": _launch_slices}


PORTABLE_CLUSTER = 8  # blocks a cluster may have on any GPU with clusters
NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14  # CUfunction_attribute


def prepare_slices_kernel(kernel, geometry: Launch) -> None:
    """What fast_row and fast_stream ask of their compiled kernel before a launch: dynamic shared memory for the
    staging (over 48 KiB a kernel must opt in), and clusters of more than 8 blocks."""
    if geometry.staging_bytes > kernel.max_dynamic_shared_size_bytes:
        kernel.max_dynamic_shared_size_bytes = geometry.staging_bytes
    if geometry.protocol == "cluster" and geometry.template_args[3] > PORTABLE_CLUSTER:
        allow_large_clusters(kernel)


@functools.cache
def allow_large_clusters(kernel) -> None:
    """A kernel whose clusters have more than 8 blocks (Hopper takes 16) must opt in to the non-portable size."""
    cp.cuda.driver.funcSetAttribute(kernel.kernel.ptr, NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)


_exchanges: dict[int, tuple] = {}
EXCHANGE_FLOOR = 2**16  # elements of the slice states and counters at least: grown rarely


def state_elements(grid: int) -> int:
    """Elements of the slice states (float32 m and d a block) or of the clusters' words (two 64-bit words a block)
    that a launch of `grid` blocks is given: kept per stream, grown to this, never shrunk."""
    return max(2 * grid, EXCHANGE_FLOOR)


def counter_elements(rows: int) -> int:
    """The slices' counters (uint32: a ticket, then two a row), likewise."""
    return max(1 + 2 * rows, EXCHANGE_FLOOR)


def row_exchange(kernel, geometry: Launch, rows: int, staging: int):
    """The slice states and counters of fast_row and fast_stream (a ticket, then two per row), kept per stream and zero
    between launches (the kernel resets them), and whether the whole grid is resident at once (then
    the blocks need no tickets); for a row of several clusters, their words and the launch's epoch in the last
    place (_cluster_words). A row's slices wait for each other, so all of them must fit on the
    GPU at once: checked against the kernel's occupancy on this device."""
    if across_clusters(geometry):
        return _cluster_words(kernel, geometry, staging)
    if geometry.chunks == 1 or geometry.protocol == "cluster":  # no exchange through global memory
        return _null_trace()[0], _null_trace()[2], True
    resident = _resident_blocks(kernel, geometry.block, staging)
    if geometry.chunks > resident:
        raise KernelFailed(
            f"{geometry.kernel} needs {geometry.chunks} resident blocks per row; this GPU holds {resident}"
        )
    stream = cp.cuda.get_current_stream().ptr
    partial, sync = _exchanges.get(stream, (None, None))
    if partial is None or partial.size < state_elements(geometry.grid) or sync.size < counter_elements(rows):
        partial = cp.empty(state_elements(geometry.grid), np.float32)
        sync = cp.zeros(counter_elements(rows), np.uint32)
        _exchanges[stream] = partial, sync
    return partial, sync, geometry.grid <= resident


_words: dict[int, tuple] = {}
_words_lock = threading.Lock()  # sessions may launch at once: each launch its own epoch
EPOCHS = 0xFFFFFFFF  # epochs 1 ... EPOCHS, then 1 again (the words zeroed): 32 bits beside each float


def _cluster_words(kernel, geometry: Launch, staging: int):
    """A row's clusters exchange their states as 64-bit words tagged with the launch's epoch (fast_common.cuh's
    across_clusters): the words (kept per stream, zeroed when made and when the epoch wraps) and this launch's
    epoch, counted per stream from 1. Every block must be resident at once (they wait for each other, and clusters
    take no tickets): the launch is refused unless the GPU holds all its clusters at once, as the driver counts them
    (a cluster's blocks share one GPC, so SMs left over in a GPC hold none)."""
    clusters = geometry.grid // geometry.template_args[3]
    resident = _resident_clusters(kernel, geometry.grid, geometry.block, staging)
    if clusters > resident:
        raise KernelFailed(
            f"{geometry.kernel} needs its {clusters} clusters resident at once; this GPU holds {resident}"
        )
    stream = cp.cuda.get_current_stream().ptr
    with _words_lock:
        words, epoch = _words.get(stream, (None, 0))
        if words is None or words.size < state_elements(geometry.grid):
            words = cp.zeros(state_elements(geometry.grid), np.uint64)
        elif epoch == EPOCHS:
            words.fill(0)  # on the stream, before this launch: no word of an earlier epoch 1 is left
        epoch = epoch % EPOCHS + 1
        _words[stream] = (words, epoch)
    return words, _null_trace()[2], np.uint32(epoch).view(np.int32)


class _LaunchConfig(ctypes.Structure):
    """CUlaunchConfig: the kernel's own cluster dimensions (__cluster_dims__) apply, so no attributes."""

    _fields_ = [
        ("grid", ctypes.c_uint * 3),
        ("block", ctypes.c_uint * 3),
        ("shared_bytes", ctypes.c_uint),
        ("stream", ctypes.c_void_p),
        ("attributes", ctypes.c_void_p),
        ("attribute_count", ctypes.c_uint),
    ]


@functools.cache
def _resident_clusters(kernel, grid: int, threads: int, shared_bytes: int) -> int:
    """Clusters of a launch that the GPU holds at once (cuOccupancyMaxActiveClusters; CuPy does not wrap it)."""
    count = _max_active_clusters()
    if count is None:
        raise KernelFailed(
            "this CUDA driver cannot count resident clusters (cuOccupancyMaxActiveClusters, CUDA 12.0 on)"
        )
    config = _LaunchConfig((grid, 1, 1), (threads, 1, 1), shared_bytes, None, None, 0)
    found = ctypes.c_int()
    status = count(ctypes.byref(found), kernel.kernel.ptr, ctypes.byref(config))
    if status:
        raise KernelFailed(f"cuOccupancyMaxActiveClusters failed (CUresult {status})")
    return found.value


@functools.cache
def _max_active_clusters():
    """The driver's cuOccupancyMaxActiveClusters(int*, CUfunction, const CUlaunchConfig*), typed; None where the
    driver (loaded by CuPy already) lacks it."""
    try:
        count = ctypes.CDLL("libcuda.so.1").cuOccupancyMaxActiveClusters
    except (OSError, AttributeError):
        return None
    count.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_void_p, ctypes.POINTER(_LaunchConfig)]
    count.restype = ctypes.c_int
    return count


@functools.cache
def _resident_blocks(kernel, threads: int, shared_bytes: int) -> int:
    per_sm = cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.kernel.ptr, threads, shared_bytes)
    return per_sm * multiprocessors()


@functools.lru_cache(maxsize=1)
def _null_trace():
    return (
        cp.empty(1, np.float32),
        cp.empty(1, np.float32),
        cp.empty(1, np.int32),
        cp.empty(1, np.float32),
        cp.empty(1, np.float32),
    )


def launch_failure(exc: Exception, kernel: str, shape) -> KernelFailed:
    """A CUDA error in a launch of `kernel` (the variant's name) on `shape`, as the explorer reports it."""
    global context_lost
    message = f"{kernel} on {shape[0]}×{shape[1]} failed on the GPU: {exc}"
    if any(code in str(exc) for code in STICKY_ERRORS):
        context_lost = message
        return GPUContextLost(message + ". The CUDA context is lost; restart the server.")
    return KernelFailed(message)


def run(variant: Variant, geometry: Launch, x: np.ndarray, dtype: str, acc: str, trace_row: int | None):
    """Run on the GPU with a poisoned output; returns (out, RawTrace or None)."""
    require_gpu()
    rows, cols = x.shape
    try:
        x_dev = to_device(x)
        y_dev = cp.full(x_dev.shape, poison_value(x.dtype), x_dev.dtype)
        trace = None
        if trace_row is not None:
            blank = RawTrace.empty(*trace_shape(variant, geometry, cols))
            trace = [
                cp.asarray(a) for a in (blank.step_m, blank.step_d, blank.step_index, blank.merge_m, blank.merge_d)
            ]
        launch(variant, geometry, x_dev, y_dev, rows, cols, dtype, acc, trace, -1 if trace_row is None else trace_row)
        cp.cuda.get_current_stream().synchronize()
        unwritten = int((y_dev == poison_value(x.dtype)).sum())
        out = from_device(y_dev, x.dtype)
        raw = RawTrace(*[cp.asnumpy(a) for a in trace]) if trace is not None else None
    except (GPUUnavailable, KernelFailed):
        raise
    except Exception as exc:  # CUDA driver/runtime/NVRTC errors
        if cp is not None and isinstance(exc, cp.cuda.compiler.CompileException):
            raise KernelFailed(f"{variant.key} did not compile for {dtype}/{acc}: {exc}") from exc
        raise launch_failure(exc, variant.key, x.shape) from exc
    if unwritten:
        raise KernelFailed(f"{variant.key} left {unwritten} of {x.size} outputs unwritten on {rows}×{cols}")
    return out, raw


def free_bytes() -> int:
    """Device memory free for a new run: the driver's free bytes plus what CuPy's pool holds unused."""
    require_gpu()
    free, _total = cp.cuda.runtime.memGetInfo()
    pool = cp.get_default_memory_pool()
    return int(free + pool.total_bytes() - pool.used_bytes())


def device_info() -> dict:
    require_gpu()
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

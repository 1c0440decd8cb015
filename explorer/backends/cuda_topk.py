"""The fused softmax + top-k kernel (kernels/topk.cu) and the unfused pipeline on the GPU, through the
CUDA backend's compiled modules: poisoned outputs for validation, an allocation-free timed path, and the
per-stream scratch its chunks merge through."""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from ..errors import GPUUnavailable, KernelFailed
from ..geometry import Launch
from ..numerics import DTYPES
from ..registry import VARIANTS
from .cuda import (
    PORTABLE_CLUSTER,
    allow_large_clusters,
    cp,
    from_device,
    kernel_function,
    kernel_name,
    launch,
    launch_failure,
    poison_value,
    require_gpu,
    to_device,
)


def topk_kernel_name(geometry: Launch, dtype: str, fused: bool) -> str:
    return kernel_name(geometry.kernel, dtype, "float32", None, (*geometry.template_args, int(fused)))


def topk_registers(geometry: Launch, dtype: str, fused: bool) -> int:
    return kernel_function("topk.cu", dtype, "float32", topk_kernel_name(geometry, dtype, fused)).num_regs


def run_topk(fused: bool, launch: Launch, x: np.ndarray, dtype: str, k: int, softmax_launch: Launch):
    """softmax + top-k on the GPU with poisoned outputs; returns (values, indices)."""
    require_gpu()
    rows, cols = x.shape
    try:
        x_dev = to_device(x)
        values, indices = topk_on_device(fused, launch, x_dev, rows, cols, dtype, k, softmax_launch)
        cp.cuda.get_current_stream().synchronize()
        unwritten = int((indices < 0).sum() + (values == poison_value(DTYPES[dtype])).sum())
        out = from_device(values, x.dtype), cp.asnumpy(indices)
    except (GPUUnavailable, KernelFailed):
        raise
    except Exception as exc:
        if cp is not None and isinstance(exc, cp.cuda.compiler.CompileException):
            raise KernelFailed(f"top-k did not compile for {dtype}: {exc}") from exc
        raise launch_failure(exc, "topk_fused" if fused else "topk_unfused", x.shape) from exc
    if unwritten:
        raise KernelFailed(f"top-k left {unwritten} of {2 * rows * k} outputs unwritten on {rows}×{cols}")
    return out


def topk_on_device(
    fused: bool,
    geometry: Launch,
    x_dev,
    rows: int,
    cols: int,
    dtype: str,
    k: int,
    softmax_launch: Launch,
    poison: bool = True,
    out: tuple | None = None,
):
    """Launch the fused kernel, or `fast` softmax then the selection kernel (no sync); returns (values,
    indices). Validation poisons fresh outputs; the timed path passes poison=False and the (rows, k)
    values and int32 indices it keeps from call to call as `out` (no allocation), as a serving loop does."""
    if x_dev.data.ptr % 16:  # rows are split at 16-byte boundaries of x
        raise KernelFailed("top-k needs its input to start on a 16-byte boundary")
    if out is not None:
        values, indices = out
    elif poison:
        values = cp.full((rows, k), poison_value(DTYPES[dtype]), x_dev.dtype)
        indices = cp.full((rows, k), -1, np.int32)
    else:
        values, indices = cp.empty((rows, k), x_dev.dtype), cp.empty((rows, k), np.int32)
    source = x_dev
    if not fused:
        source = cp.empty_like(x_dev)
        launch(VARIANTS["fast"], softmax_launch, x_dev, source, rows, cols, dtype, "float32")
    stream = cp.cuda.get_current_stream().ptr
    key = (
        stream,
        geometry.kernel,
        geometry.template_args,
        geometry.block,
        geometry.chunks,
        dtype,
        fused,
        rows,
        cols,
        k,
    )
    launcher = _launchers.get(key)
    if launcher is None:  # made, and the stream's smaller ones dropped, by one session at a time
        with _launchers_lock:
            launcher = _launchers.get(key) or _new_launcher(key, geometry, dtype, fused, rows, cols, k)
    launcher(source.data.ptr, values.data.ptr, indices.data.ptr, stream)
    return values, indices


class _Launcher:
    """One topk launch on one stream with its ten arguments packed once in host memory (the stream's
    scratch among them, kept alive here): a call writes the input and output pointers and hands the packed
    block to cuLaunchKernel, which copies it at the call. CuPy's own call packs each argument by its Python
    type, most of a batch-1 call's time on the host."""

    def __init__(self, kernel, geometry: Launch, scratch: tuple, rows: int, cols: int, k: int):
        self.function, self.grid, self.block = kernel.kernel.ptr, geometry.grid, geometry.block
        self.scratch = scratch
        self.words = (ctypes.c_uint64 * 8)()  # x, values, indices, then the three scratch pointers; four int32
        base = ctypes.addressof(self.words)
        for i, array in enumerate(scratch):
            self.words[3 + i] = array.data.ptr
        for i, value in enumerate((rows, cols, geometry.chunks, k)):
            ctypes.c_int32.from_address(base + 48 + 4 * i).value = value
        self.params = (ctypes.c_void_p * 10)(*[base + 8 * i for i in range(6)], *[base + 48 + 4 * i for i in range(4)])
        self.params_address = ctypes.addressof(self.params)
        self.lock = threading.Lock()  # sessions may launch the same shape at once

    def __call__(self, x: int, values: int, indices: int, stream: int) -> None:
        with self.lock:
            words = self.words
            words[0], words[1], words[2] = x, values, indices
            cp.cuda.driver.launchKernel(
                self.function, self.grid, 1, 1, self.block, 1, 1, 0, stream, self.params_address, 0
            )


_launchers: dict[tuple, _Launcher] = {}
_launchers_lock = threading.Lock()


def _new_launcher(key: tuple, geometry: Launch, dtype: str, fused: bool, rows: int, cols: int, k: int) -> _Launcher:
    lists = geometry.template_args[2]
    kernel = kernel_function("topk.cu", dtype, "float32", topk_kernel_name(geometry, dtype, fused))
    if geometry.protocol == "cluster" and geometry.chunks > PORTABLE_CLUSTER:
        allow_large_clusters(kernel)
    scratch = _topk_scratch(rows, geometry.chunks, lists)
    _launchers[key] = launcher = _Launcher(kernel, geometry, scratch, rows, cols, k)
    return launcher


_topk_scratch_of: dict[int, tuple] = {}
TOPK_MAX_LIST = 64  # keys per chunk list at most (k <= 64)
TOPK_SCRATCH_FLOOR = 1024  # chunk states and per-row counters at least: grown rarely


def _topk_scratch(rows: int, chunks: int, lists: int):
    """The top-k kernel's chunk states (m, d), chunk lists (64-bit keys) and per-row counters of
    finished chunks, kept per stream (launches that could overlap never share them) and grown as
    needed, so a call allocates and clears nothing: the counters are zero between launches (each
    row's last block resets its own). A launcher keeps the scratch it was made with; growing it drops the
    stream's launchers (called under _launchers_lock)."""
    stream = cp.cuda.get_current_stream().ptr
    states, keys, arrivals = _topk_scratch_of.get(stream, (None, None, None))
    chunk_states = rows * chunks if chunks > 1 else 0
    grown = False
    if keys is None or states.size < 2 * chunk_states or keys.size < chunk_states * lists:
        size = max(chunk_states, TOPK_SCRATCH_FLOOR)
        states, keys, grown = cp.empty(2 * size, np.float32), cp.empty(size * TOPK_MAX_LIST, np.uint64), True
    if arrivals is None or arrivals.size < rows:
        arrivals, grown = cp.zeros(max(rows, TOPK_SCRATCH_FLOOR), np.uint32), True
    if grown:  # the stream's launchers hold the smaller scratch: dropped, so that it is freed
        for key in [key for key in _launchers if key[0] == stream]:
            _launchers.pop(key, None)
    _topk_scratch_of[stream] = states, keys, arrivals
    return states, keys, arrivals


def topk_scratch(rows: int, chunks: int):
    """The stream's top-k scratch for a launch made outside this module (scripts/timeline_topk.py's stamped build),
    under the launchers' lock; lists of the longest kind, so any k fits."""
    with _launchers_lock:
        return _topk_scratch(rows, chunks, TOPK_MAX_LIST)

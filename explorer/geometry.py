"""Launch geometry: the Launch record, the size of the GPU the launches are shaped for, and the launch
rules of the teaching kernels (fast's are in fast_launch.py). The registry's entries point here."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import ml_dtypes
import numpy as np

DTYPES: dict[str, np.dtype] = {
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
}
DTYPE_NAMES = tuple(DTYPES)
ITEMSIZE = {name: dtype.itemsize for name, dtype in DTYPES.items()}
THREADS_PER_BLOCK = 128  # for the thread- and warp-per-row kernels, which pack several rows in a block
TUNED_SMS = 132  # multiprocessors of the H200 the launch rules were tuned on
TUNED_SHARED_PER_SM = 228 * 1024  # ... and its shared memory an SM
TUNED_L2_BYTES = 60 * 2**20  # ... and its L2 cache


@functools.cache
def multiprocessors() -> int:
    """SMs of the GPU the launches are sized for: this machine's GPU where the CUDA backend has one, else
    the H200's the rules were tuned on (so the emulation mirrors the launches an H200 gets)."""
    from .backends import cuda  # here, not at the top: the backends import this module

    return cuda.multiprocessors() or TUNED_SMS


@functools.cache
def shared_per_multiprocessor() -> int:
    """Shared memory an SM has for blocks: this machine's GPU's where the CUDA backend has one, else the H200's."""
    from .backends import cuda

    return cuda.shared_per_multiprocessor() or TUNED_SHARED_PER_SM


@functools.cache
def l2_bytes() -> int:
    """The L2 cache of the GPU the launches are sized for: this machine's GPU's where the CUDA backend has one, else
    the H200's."""
    from .backends import cuda

    return cuda.device_info()["l2_bytes"] if cuda.available() else TUNED_L2_BYTES


@dataclass(frozen=True)
class Launch:
    """Launch geometry, decided in Python, visibly."""

    grid: int
    block: int
    shared_bytes: int
    threads_per_row: int  # threads that fold elements of one row (the trace has one lane each)
    kernel: str = ""  # the kernel this shape uses, where a variant chooses among several
    template_args: tuple[int, ...] = ()  # compile-time arguments after <T, Acc>: vector width, packs per thread, ...
    chunks: int = 1  # blocks per row (split kernels, fast_row's slices, fast_stream's chunks)
    staging_bytes: int = 0  # of shared_bytes, the dynamic shared memory the launch asks for (cp.async staging)
    functions: tuple[str, ...] = ()  # the __global__ functions run, in order, where not just the one kernel
    protocol: str = "rows"  # how the CUDA backend calls them: "rows" (x, y), "two_stage" (chunk states
    # between two kernels), "slices" (fast_row, fast_stream: staging in shared memory, slices exchanging (m, d) through
    # global memory) or "cluster" (the same, the slices a Hopper cluster exchanging through DSMEM)

    def describe(self) -> str:
        extra = f", {self.chunks} blocks per row" if self.chunks > 1 else ""
        name = f"{self.kernel}<{', '.join(map(str, self.template_args))}>: " if self.template_args else ""
        name = name or (f"{self.kernel}: " if self.kernel else "")  # the teaching kernels' Launch names none
        return f"{name}grid {self.grid} × block {self.block}{extra}"


def thread_per_row(rows: int, cols: int, block: int, dtype: str) -> Launch:
    return Launch(grid=cdiv(rows, THREADS_PER_BLOCK), block=THREADS_PER_BLOCK, shared_bytes=0, threads_per_row=1)


def warp_per_row(rows: int, cols: int, block: int, dtype: str) -> Launch:
    rows_per_block = THREADS_PER_BLOCK // 32
    return Launch(grid=cdiv(rows, rows_per_block), block=THREADS_PER_BLOCK, shared_bytes=0, threads_per_row=32)


def block_per_row(rows: int, cols: int, block: int, dtype: str) -> Launch:
    # 2 x 32 floats of static shared memory for the cross-warp merge
    return Launch(grid=rows, block=block, shared_bytes=256, threads_per_row=block)


def split_launch(rows: int, cols: int, block: int, dtype: str) -> Launch:
    """Enough chunks per row to give the GPU ~4 blocks per SM, each thread folding >= 4 elements."""
    chunks = max(1, min(cdiv(cols, 4 * block), cdiv(4 * multiprocessors(), rows)))
    return two_stage_launch("split", rows, chunks, block, 256)


def two_stage_launch(kernel: str, rows: int, chunks: int, block: int, shared_bytes: int, template_args=()) -> Launch:
    """`chunks` blocks a row fold their chunks into (m, d) (KERNEL_partial), then each merges its row's states
    and normalises its chunk (KERNEL_finish): the pair the CUDA backend launches one after the other."""
    return Launch(
        grid=rows * chunks,
        block=block,
        shared_bytes=shared_bytes,
        threads_per_row=chunks * block,
        kernel=kernel,
        template_args=template_args,
        chunks=chunks,
        functions=(f"{kernel}_partial", f"{kernel}_finish"),
        protocol="two_stage",
    )


def pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def cdiv(a: int, b: int) -> int:
    return -(-a // b)

"""The one registry of softmax variants: the app, the CLI, the tests and the README read it.

Adding a variant is adding one entry here, its kernel in kernels/, and its emulation.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
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
MAX_CLUSTER = 16  # Hopper's largest cluster (above 8 it is non-portable: the CUDA backend opts the kernel in)
REGISTER_ELEMENTS_PER_BLOCK = 32 * 1024  # fast_row's registers for row data: 32 a thread at 1024 threads, more
MAX_REGISTER_ELEMENTS = 128  # ... in smaller blocks, up to this (fast.cu's launch bounds follow the same rule)
MAX_STAGING_BYTES = 96 * 1024  # fast_row's shared memory for a slice: two blocks still fit on an SM
SPLIT_BLOCK = 512


@functools.cache
def multiprocessors() -> int:
    """SMs of the GPU the launches are sized for: this machine's GPU where the CUDA backend has one, else
    the H200's the rules were tuned on (so the emulation mirrors the launches an H200 gets)."""
    from .backends import cuda  # here, not at the top: the backends import this module

    return cuda.multiprocessors() or TUNED_SMS


@dataclass(frozen=True)
class Launch:
    """Launch geometry, decided in Python, visibly."""

    grid: int
    block: int
    shared_bytes: int
    threads_per_row: int  # threads that fold elements of one row (the trace has one lane each)
    kernel: str = ""  # the kernel this shape uses, where a variant chooses among several
    template_args: tuple[int, ...] = ()  # compile-time arguments after <T, Acc>: vector width, packs per thread, ...
    chunks: int = 1  # blocks per row (split kernels, fast_row's slices)
    functions: tuple[str, ...] = ()  # the __global__ functions run, in order, where not just the one kernel
    protocol: str = "rows"  # how the CUDA backend calls them: "rows" (x, y), "two_stage" (chunk states
    # between two kernels), "slices" (fast_row: staging in shared memory, slices exchanging (m, d) through
    # global memory) or "cluster" (the same, the slices a Hopper cluster exchanging through DSMEM)

    def describe(self) -> str:
        extra = f", {self.chunks} blocks per row" if self.chunks > 1 else ""
        name = f"{self.kernel}<{', '.join(map(str, self.template_args))}>" if self.template_args else self.kernel
        return f"{name}: grid {self.grid} × block {self.block}{extra}"


@dataclass(frozen=True)
class Variant:
    key: str
    title: str
    family: str  # what works on one row: "thread", "warp", "block", "split" (several blocks) or "dispatch" (by shape)
    method: str  # "naive", "safe" (max pass, then sum with the final max), "online" (running max) or "fast"
    seed: str  # where the idea comes from
    kernel: str  # CUDA template name in kernel_file
    kernel_file: str
    reads_per_element: int  # global memory reads of x per element
    writes_per_element: int
    lesson: str  # one sentence: what it teaches
    launch_rule: Callable[[int, int, int, str], Launch]
    dtypes: tuple[str, ...] = DTYPE_NAMES
    accumulators: tuple[str, ...] = DTYPE_NAMES
    traceable: bool = True
    takes_block_size: bool = False
    default_block_size: int = 0
    kernel_functions: tuple[str, ...] = ()  # the __global__ functions, where not just `kernel`
    templated_by_launch: bool = False  # template arguments come from each launch (compiled per shape, not per dtype)

    @property
    def functions(self) -> tuple[str, ...]:
        """The __global__ functions this variant may launch."""
        return self.kernel_functions or (self.kernel,)

    def launch(self, rows: int, cols: int, block_size: int | None = None, dtype: str = "float32") -> Launch:
        return self.launch_rule(rows, cols, block_size or self.default_block_size, dtype)

    def takes(self, dtype: str, acc: str) -> bool:
        return dtype in self.dtypes and acc in self.accumulators

    def check_block_size(self, block_size: int | None) -> int:
        """The block size this variant will use; raises ValueError for one it cannot take."""
        if block_size is None:
            return self.default_block_size
        if not self.takes_block_size:
            raise ValueError(f"variant {self.key!r} has a fixed launch shape and takes no block size")
        if isinstance(block_size, bool) or not isinstance(block_size, int | np.integer):
            raise ValueError(f"block size must be a whole multiple of 32 from 32 to 1024, got {block_size!r}")
        block_size = int(block_size)
        if block_size % 32 or not 32 <= block_size <= 1024:
            raise ValueError(f"block size must be a multiple of 32 from 32 to 1024, got {block_size}")
        return block_size


def _thread_per_row(rows: int, cols: int, block: int, dtype: str) -> Launch:
    return Launch(grid=cdiv(rows, THREADS_PER_BLOCK), block=THREADS_PER_BLOCK, shared_bytes=0, threads_per_row=1)


def _warp_per_row(rows: int, cols: int, block: int, dtype: str) -> Launch:
    rows_per_block = THREADS_PER_BLOCK // 32
    return Launch(grid=cdiv(rows, rows_per_block), block=THREADS_PER_BLOCK, shared_bytes=0, threads_per_row=32)


def _block_per_row(rows: int, cols: int, block: int, dtype: str) -> Launch:
    # 2 x 32 floats of static shared memory for the cross-warp merge
    return Launch(grid=rows, block=block, shared_bytes=256, threads_per_row=block)


def _split(rows: int, cols: int, block: int, dtype: str) -> Launch:
    """Enough chunks per row to give the GPU ~4 blocks per SM, each thread folding >= 4 elements."""
    chunks = max(1, min(cdiv(cols, 4 * block), cdiv(4 * multiprocessors(), rows)))
    return Launch(
        grid=rows * chunks,
        block=block,
        shared_bytes=256,
        threads_per_row=chunks * block,
        kernel="split",
        chunks=chunks,
        functions=("split_partial", "split_finish"),
        protocol="two_stage",
    )


def pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def fast_vector(cols: int, dtype: str) -> int:
    """Elements per load in fast_warp and fast_split: 16-byte packs where every row starts aligned, else
    narrower (fast_row and the top-k kernel load 16-byte packs at any width)."""
    itemsize = ITEMSIZE[dtype]
    return next(v for v in (16 // itemsize, 4, 2, 1) if v <= 16 // itemsize and cols % v == 0)


def fast_row_launch(
    rows: int, cols: int, dtype: str, threads: int, elements: int, hold: int = 1, rows_per_block: int = 1
) -> Launch | None:
    """fast_row with at most `threads` threads per row (or slice), each holding `elements` elements of its row;
    as many slices (blocks) per row as that needs, balanced, in a Hopper cluster where they fit in
    one. None if the slices could not all be resident at once (the row is too long to hold on chip).
    Loads are 16-byte packs at any width (a row's loose head and tail go to its first threads).
    `hold`: where the slice waits (fast.cu): 0 registers, 1 registers after cp.async through shared
    memory, 2 shared memory. `rows_per_block`: rows a block holds, each with its own threads, where a
    row needs one slice (None otherwise)."""
    vec = 16 // ITEMSIZE[dtype]
    per = max(1, elements // vec)
    packs = max(1, cols // vec)  # whole packs in a row at most
    slices = cdiv(packs, threads * per)
    if slices > multiprocessors() or (rows_per_block > 1 and slices > 1):  # every slice resident: one an SM
        return None
    if slices > MAX_CLUSTER:  # exchanged through global memory: few rows spread over every SM
        slices = max(slices, min(multiprocessors() // rows, cdiv(packs, 32 * per)))
    cluster = pow2_at_least(slices) if 1 < slices <= MAX_CLUSTER else 1
    slices = max(slices, cluster)
    threads = 32 * cdiv(cdiv(packs, slices), 32 * per)
    block = threads * rows_per_block
    staging = block * per * 16
    if staging > MAX_STAGING_BYTES:
        if hold == 2:
            return None
        hold = 0
    held = per * vec
    compiled_as = 4 if cluster > 1 else ITEMSIZE[dtype]  # fast_row_cluster is compiled without the 16-bit cap
    if (hold < 2 and held > MAX_REGISTER_ELEMENTS) or block > fast_row_max_threads(hold, held, compiled_as):
        return None
    loose = int(cols % vec != 0)
    return Launch(
        grid=cdiv(rows, rows_per_block) * slices,
        block=block,
        shared_bytes=272 + (staging if hold else 0),
        threads_per_row=threads * slices,
        kernel="fast_row_cluster" if cluster > 1 else "fast_row",
        template_args=(vec, per, hold, cluster, loose) if cluster > 1 else (vec, per, hold, loose, rows_per_block),
        chunks=slices,
        protocol="cluster" if cluster > 1 else "slices",
    )


def fast_row_max_threads(hold: int, held: int, itemsize: int) -> int:
    """fast.cu's fast_row_threads: the block size a fast_row instantiation is compiled for."""
    if hold < 2 and held == 64 and itemsize == 2:
        return 64  # 10 blocks an SM: 96 registers a thread, not 128
    if hold == 2:
        return 512  # 3 blocks an SM: 40 registers a thread
    return REGISTER_ELEMENTS_PER_BLOCK // held if held > 32 else 1024


# fast's choices, measured on the H200 (scripts/tune_fast.py; docs/tune-fast-h200.json, whose `kernels` field
# dates the fast.cu each shape was timed with). fast_warp up to these widths, with
# (up to width, elements per lane); then fast_row by width: (up to width, threads per block at most,
# elements per thread, hold). Threads given as several counts: the first whose slices fill their blocks
# (a row's slices, rounded up to a power-of-two cluster, can leave blocks part-empty: bf16 151936 ran at
# 82 % of copy in 16 blocks of 160 threads, 87 % in 8 of 320; 131072 at 91 % in 8 of 256, 89 % in 4 of 512).
# Rows that would need more slices than the GPU holds blocks at once stream through fast_split.
FAST_WARP_ELEMENTS = {
    "float32": ((128, 8), (512, 16)),
    "float16": ((1024, 32),),
    "bfloat16": ((1024, 32),),
}
FAST_ROW_16BIT = (
    (4096, 512, 64, 1),
    (262144, (256, 512), 64, 2),
    (2**21, 512, 32, 1),  # long rows (few): many small register-held slices, exchanged through global memory
    (2**62, 512, 64, 2),
)
FAST_ROW_SHAPES = {
    "float32": (
        (4096, 256, 16, 1),
        (8192, 256, 32, 1),
        (16384, 512, 32, 1),
        (262144, 512, 32, 2),
        (2**62, 256, 32, 1),
    ),
    "float16": FAST_ROW_16BIT,
    "bfloat16": FAST_ROW_16BIT,
}


def _fast(rows: int, cols: int, block: int, dtype: str) -> Launch:
    """Registers hold the row: lanes of a warp for short rows, a block or several (slices) for longer
    ones, in registers or shared memory; rows too long to hold on chip stream through fast_split (2 reads)."""
    vec = fast_vector(cols, dtype)
    packs = cols // vec
    per_lane = next((e for width, e in FAST_WARP_ELEMENTS[dtype] if cols <= width), None)
    if per_lane is not None and (vec > 1 or cols <= 256):
        lanes = min(32, pow2_at_least(cdiv(packs, max(1, per_lane // vec))))
        per = pow2_at_least(cdiv(packs, lanes))
        return Launch(
            grid=cdiv(rows, THREADS_PER_BLOCK // lanes),
            block=THREADS_PER_BLOCK,
            shared_bytes=0,
            threads_per_row=lanes,
            kernel="fast_warp",
            template_args=(vec, per, lanes),
        )
    threads, elements, hold = next((t, e, h) for width, t, e, h in FAST_ROW_SHAPES[dtype] if cols <= width)
    counts = threads if isinstance(threads, tuple) else (threads,)
    tried = {t: fast_row_launch(rows, cols, dtype, t, elements, hold) for t in counts}
    full = next((launch for t, launch in tried.items() if launch is not None and launch.block == t), None)
    return full or tried[counts[-1]] or fast_split_launch(rows, cols, dtype)


def fast_split_launch(rows: int, cols: int, dtype: str) -> Launch:
    """fast_split: few blocks' worth of chunks per row, streamed in batches of 16 elements per thread."""
    vec = fast_vector(cols, dtype)
    per = max(1, 16 // vec)
    chunks = max(1, min(cdiv(cols // vec, SPLIT_BLOCK * per), cdiv(4 * multiprocessors(), rows)))
    return Launch(
        grid=rows * chunks,
        block=SPLIT_BLOCK,
        shared_bytes=264,
        threads_per_row=chunks * SPLIT_BLOCK,
        kernel="fast_split",
        template_args=(vec, per),
        chunks=chunks,
        functions=("fast_split_partial", "fast_split_finish"),
        protocol="two_stage",
    )


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


VARIANTS: dict[str, Variant] = {
    v.key: v
    for v in [
        Variant(
            key="naive",
            method="naive",
            title="Naive exp / sum",
            family="thread",
            seed="textbook",
            kernel="naive",
            kernel_file="softmax.cu",
            reads_per_element=2,
            writes_per_element=1,
            lesson="e^x overflows for x > 88.7 in fp32 (11.1 in fp16): without the max subtracted, large logits give inf/inf = NaN.",
            launch_rule=_thread_per_row,
            traceable=False,
        ),
        Variant(
            key="safe_thread",
            method="safe",
            title="Safe softmax, 3 passes, thread per row",
            family="thread",
            seed="V0",
            kernel="safe_thread",
            kernel_file="softmax.cu",
            reads_per_element=3,
            writes_per_element=1,
            lesson="Subtracting the row max keeps every exponent <= 0, at the price of an extra pass over the row.",
            launch_rule=_thread_per_row,
        ),
        Variant(
            key="online_thread",
            method="online",
            title="Online softmax, thread per row",
            family="thread",
            seed="V1",
            kernel="online_thread",
            kernel_file="softmax.cu",
            reads_per_element=2,
            writes_per_element=1,
            lesson="The max and the denominator in one pass: d_j = d_{j-1} e^{m_{j-1}-m_j} + e^{x_j-m_j} rescales the sum whenever the max grows.",
            launch_rule=_thread_per_row,
        ),
        Variant(
            key="online_warp",
            method="online",
            title="Online softmax, warp per row",
            family="warp",
            seed="V2",
            kernel="online_warp",
            kernel_file="softmax.cu",
            reads_per_element=2,
            writes_per_element=1,
            lesson="(m, d) pairs merge like single elements, so 32 lanes fold strided parts of a row and a shuffle butterfly combines them.",
            launch_rule=_warp_per_row,
        ),
        Variant(
            key="online_block",
            method="online",
            title="Online softmax, block per row",
            family="block",
            seed="V2 + block merge",
            kernel="online_block",
            kernel_file="softmax.cu",
            reads_per_element=2,
            writes_per_element=1,
            lesson="For long rows a whole block works on one row: warps merge their lanes, then shared memory merges the warps.",
            launch_rule=_block_per_row,
            takes_block_size=True,
            default_block_size=256,
        ),
        Variant(
            key="safe_block",
            method="safe",
            title="Safe softmax, 3 passes, block per row",
            family="block",
            seed="V0, online_block's shape",
            kernel="safe_block",
            kernel_file="softmax.cu",
            reads_per_element=3,
            writes_per_element=1,
            lesson="online_block's parallel shape with the 3-pass method: 4 memory accesses per element against 3, the paper's online-vs-safe comparison on equal footing.",
            launch_rule=_block_per_row,
            traceable=False,
            takes_block_size=True,
            default_block_size=256,
        ),
        Variant(
            key="split_row",
            method="online",
            title="Split row: several blocks per row, merged",
            family="split",
            seed="the merge rule, across blocks",
            kernel="split",
            kernel_file="fast.cu",
            reads_per_element=2,
            writes_per_element=1,
            lesson="A row too long for one block is cut into chunks folded by separate blocks; their (m, d) states merge exactly like lanes do, so a few huge rows still fill the GPU.",
            launch_rule=_split,
            takes_block_size=True,
            default_block_size=256,
            kernel_functions=("split_partial", "split_finish"),
        ),
        Variant(
            key="fast",
            method="fast",
            title="Fast: on chip, 16-byte loads, one read",
            family="dispatch",
            seed="the fastest we could write",
            kernel="fast",
            kernel_file="fast.cu",
            reads_per_element=1,
            writes_per_element=1,
            lesson="Memory-bound: keep the row on chip (a warp's registers, or a block's shared memory filled by cp.async; wide rows split over a Hopper cluster or over blocks that exchange their (m, d)) so x is read once and y written once, 16 bytes per load; rows too long to hold on chip stream through several blocks each (then 2 reads).",
            launch_rule=_fast,
            accumulators=("float32",),
            traceable=False,
            kernel_functions=("fast_warp", "fast_row", "fast_row_cluster", "fast_split_partial", "fast_split_finish"),
            templated_by_launch=True,
        ),
    ]
}

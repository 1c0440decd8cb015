"""The one registry of softmax variants: the app, the CLI, the tests and the README read it.

Adding a variant is adding one entry here, its kernel in kernels/, its launch rule (geometry.py, or
fast_launch.py for fast) and its emulation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .fast_launch import fast_launch
from .geometry import DTYPE_NAMES, Launch, block_per_row, split_launch, thread_per_row, warp_per_row

BLOCK_SIZES = tuple(range(32, 1025, 32))  # what the variants that take a block size take: whole warps, at most 1024
BLOCK_SIZES_TEXT = f"multiple of 32 from {BLOCK_SIZES[0]} to {BLOCK_SIZES[-1]}"


@dataclass(frozen=True)
class Variant:
    key: str
    title: str
    family: str  # what works on one row: "thread", "warp", "block", "split" (several blocks) or "dispatch" (by shape)
    method: str  # "naive", "safe" (max pass, then sum with the final max), "online" (running max) or "fast"
    origin: str  # where the idea comes from
    kernel: str  # CUDA template name in kernel_file
    kernel_file: str
    reads_per_element: int  # global memory reads of x per element, as bytes_moved and the GB/s count them
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
    further_reads: tuple[tuple[str, str], ...] = ()  # (function, what it reads beyond reads_per_element), in words

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
            raise ValueError(f"block size must be a whole {BLOCK_SIZES_TEXT}, got {block_size!r}")
        if int(block_size) not in BLOCK_SIZES:
            raise ValueError(f"block size must be a {BLOCK_SIZES_TEXT}, got {block_size}")
        return int(block_size)


VARIANTS: dict[str, Variant] = {
    v.key: v
    for v in [
        Variant(
            key="naive",
            method="naive",
            title="Naive exp / sum",
            family="thread",
            origin="textbook",
            kernel="naive",
            kernel_file="softmax.cu",
            reads_per_element=2,
            writes_per_element=1,
            lesson="e^x overflows for x > 88.7 in fp32 (11.1 in fp16): without the max subtracted, large logits give inf/inf = NaN.",
            launch_rule=thread_per_row,
            traceable=False,
        ),
        Variant(
            key="safe_thread",
            method="safe",
            title="Safe softmax, 3 passes, thread per row",
            family="thread",
            origin="V0",
            kernel="safe_thread",
            kernel_file="softmax.cu",
            reads_per_element=3,
            writes_per_element=1,
            lesson="Subtracting the row max keeps every exponent <= 0, at the price of an extra pass over the row.",
            launch_rule=thread_per_row,
        ),
        Variant(
            key="online_thread",
            method="online",
            title="Online softmax, thread per row",
            family="thread",
            origin="V1",
            kernel="online_thread",
            kernel_file="softmax.cu",
            reads_per_element=2,
            writes_per_element=1,
            lesson="The max and the denominator in one pass: each element adds e^(x − m) to d, and a new max m′ first rescales d by e^(m − m′).",
            launch_rule=thread_per_row,
        ),
        Variant(
            key="online_warp",
            method="online",
            title="Online softmax, warp per row",
            family="warp",
            origin="V2",
            kernel="online_warp",
            kernel_file="softmax.cu",
            reads_per_element=2,
            writes_per_element=1,
            lesson="(m, d) pairs merge like single elements, so 32 lanes fold strided parts of a row and a shuffle butterfly combines them.",
            launch_rule=warp_per_row,
        ),
        Variant(
            key="online_block",
            method="online",
            title="Online softmax, block per row",
            family="block",
            origin="V2 + block merge",
            kernel="online_block",
            kernel_file="softmax.cu",
            reads_per_element=2,
            writes_per_element=1,
            lesson="For long rows a whole block works on one row: warps merge their lanes, then shared memory merges the warps.",
            launch_rule=block_per_row,
            takes_block_size=True,
            default_block_size=256,
        ),
        Variant(
            key="safe_block",
            method="safe",
            title="Safe softmax, 3 passes, block per row",
            family="block",
            origin="V0, online_block's shape",
            kernel="safe_block",
            kernel_file="softmax.cu",
            reads_per_element=3,
            writes_per_element=1,
            lesson="online_block's parallel shape with the 3-pass method: 4 memory accesses per element against 3, the paper's online-vs-safe comparison on equal footing.",
            launch_rule=block_per_row,
            traceable=False,
            takes_block_size=True,
            default_block_size=256,
        ),
        Variant(
            key="split_row",
            method="online",
            title="Split row: several blocks per row, merged",
            family="split",
            origin="the merge rule, across blocks",
            kernel="split",
            kernel_file="fast.cu",
            reads_per_element=2,
            writes_per_element=1,
            lesson="A row too long for one block is cut into chunks folded by separate blocks; their (m, d) states merge exactly like lanes do, so a few huge rows still fill the GPU.",
            launch_rule=split_launch,
            takes_block_size=True,
            default_block_size=256,
            kernel_functions=("split_partial", "split_finish"),
        ),
        Variant(
            key="fast",
            method="fast",
            title="Fast: on chip, 16-byte loads, one read",
            family="dispatch",
            origin="the fastest we could write",
            kernel="fast",
            kernel_file="fast.cu",
            reads_per_element=1,
            writes_per_element=1,
            lesson="Memory-bound: keep the row on chip (a warp's registers, or a block's shared memory filled by cp.async; wide rows split over a Hopper cluster, whose warps mail their (m, d) to every block, and longer ones over several clusters or blocks that exchange theirs through global memory) so x is read once and y written once, 16 bytes per load; rows too long to hold on chip stream through several blocks each, each holding the start of its chunk in shared memory and reading the rest twice (the second time mostly from L2).",
            launch_rule=fast_launch,
            accumulators=("float32",),
            traceable=False,
            kernel_functions=("fast_warp", "fast_row", "fast_row_cluster", "fast_stream"),
            templated_by_launch=True,
            further_reads=(("fast_stream", "a second read of what its chunk does not hold on chip, mostly from L2"),),
        ),
    ]
}

"""Where a `fast` launch of fast_row or fast_stream spends its time (run on a GPU machine): kernels/fast.cu built
with FAST_STAMP recording when each block passes each stage (%globaltimer, ns), over many back-to-back launches
on rotated inputs. Printed per stage: when the first, the median and the last block passed it, from the launch's
first block start (medians over the launches); then how many blocks shared their SM with another block of the
launch, and when those had their slices against the others, and when each block had its slice by its place in
its SM's start order. Beside it, the device time (CUPTI) of the kernel as the
explorer builds it and as stamped: each stamp adds a block barrier. The launch is the rule's, or the fast_row geometry
given after @ (as scripts/profile_fast.py takes it).

    PYTHONPATH=. python scripts/timeline_fast.py float32:1x1048576 float32:4x1048576 bfloat16:1x16777216
"""

import sys

import numpy as np

from explorer import harness
from explorer.backends import cuda
from explorer.numerics import DTYPES
from explorer.registry import VARIANTS
from scripts.profile_fast import parse_case
from scripts.stamps import collect, each_case, time_as_built_and_stamped

STAGES = (
    "block starts",
    "slice loaded and folded (fast_stream: its chunk)",
    "block's (m, d) (a row of clusters: its cluster's)",
    "row's (m, d)",
    "written (stores issued)",
    "every slice of the row published (global exchange)",
)
SM_SLOT = len(STAGES)  # after the stages: the block's SM, plus 1 (recorded as it starts)
STAMPS = f"""
__device__ unsigned long long* fast_stamp_out;  // [block][stage] globaltimer, then the SM; set before each launch
#define FAST_STAMP(stage) do {{ \\
    __syncthreads(); \\
    if (threadIdx.x == 0) {{ \\
        unsigned long long now; \\
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); \\
        unsigned long long* at = fast_stamp_out + (unsigned long long)blockIdx.x * {SM_SLOT + 1}; \\
        at[stage] = now; \\
        if ((stage) == 0) {{ \\
            unsigned sm; \\
            asm volatile("mov.u32 %0, %%smid;" : "=r"(sm)); \\
            at[{SM_SLOT}] = sm + 1; \\
        }} \\
    }} \\
}} while (0)
"""
LAUNCHES = 200


def timeline(case: str, torch) -> None:
    cp = cuda.cp
    dtype, rows, cols, launch = parse_case(case)
    print(f"\n{case}: {launch.describe()}", flush=True)
    if launch.protocol not in ("slices", "cluster"):
        print("  not fast_row or fast_stream: nothing stamped")
        return
    variant = VARIANTS["fast"]
    (name,) = cuda.kernel_names(variant, launch, dtype, "float32")
    module = cp.RawModule(code=STAMPS + cuda.kernel_source("fast.cu"), options=("-std=c++17",), name_expressions=[name])
    kernel = module.get_function(name)
    staging = launch.staging_bytes
    cuda.prepare_slices_kernel(kernel, launch)
    rng = np.random.default_rng(rows + cols)
    x = cuda.to_device((rng.standard_normal((rows, cols), np.float32) * 3).astype(DTYPES[dtype]))
    buffers = harness.rotation_buffers(x.nbytes, 16)
    xs = [cp.roll(x, i, axis=1) for i in range(buffers)]
    y = cp.empty_like(x)
    stamps = cp.zeros((LAUNCHES, launch.grid, SM_SLOT + 1), cp.uint64)
    targets = cp.asarray([stamps[i].data.ptr for i in range(LAUNCHES)], cp.uint64)
    symbol = module.get_global("fast_stamp_out")
    stream = cp.cuda.get_current_stream()

    def stamped(i: int) -> None:
        partial, sync, resident = cuda.row_exchange(kernel, launch, rows, staging)  # a cluster's epoch: each launch's
        tail = (partial, sync, np.int32(rows), np.int32(cols), np.int32(launch.chunks), np.int32(resident))
        cp.cuda.runtime.memcpyAsync(symbol.ptr, targets.data.ptr + 8 * (i % LAUNCHES), 8, 3, stream.ptr)
        kernel((launch.grid,), (launch.block,), (xs[i % buffers], y, *tail), shared_mem=staging)

    def plain(i: int) -> None:
        cuda.launch(variant, launch, xs[i % buffers], y, rows, cols, dtype, "float32")

    stamped(0)
    stamped_y = cuda.from_device(y, DTYPES[dtype]).copy()
    plain(0)
    if not np.array_equal(stamped_y.view(np.uint8), cuda.from_device(y, DTYPES[dtype]).view(np.uint8)):
        sys.exit(f"{case}: the stamped kernel's output differs from the explorer's")
    time_as_built_and_stamped(plain, stamped, buffers, torch)
    report(collect(stamped, LAUNCHES, stamps))


def report(ns: np.ndarray) -> None:
    """ns[launch, block, stage] (zero where a block did not pass a stage), then ns[launch, block, SM_SLOT]: the
    block's SM plus 1. Each stage's first, median and last block; then the blocks that shared their SM with
    another of the launch (a cluster's blocks go where its GPC has room), and when they had their slices."""
    passed = ns[:, :, :SM_SLOT] > 0
    start = ns[:, :, 0].min(axis=1)[:, None]
    rel = np.where(passed, ns[:, :, :SM_SLOT] - start[:, :, None], np.nan)
    print(f"  {'stage':52s} {'first':>7s} {'median':>7s} {'last':>7s}  (ns from the first start)")
    for s, title in enumerate(STAGES):
        if not passed[:, :, s].any():
            continue
        first, median, last = (np.median(f(rel[:, :, s], axis=1)) for f in (np.nanmin, np.nanmedian, np.nanmax))
        print(f"  {s} {title:50s} {first:7.0f} {median:7.0f} {last:7.0f}")
    shared = sharing_an_sm(ns[:, :, SM_SLOT])
    print(
        f"  blocks sharing their SM with another of the launch: {np.median(shared.sum(axis=1)):.0f} of {shared.shape[1]}"
    )
    if shared.any(axis=1).all() and not shared.all(axis=1).any():  # in every launch, some shared and some not

        def loaded(which: np.ndarray) -> float:
            return np.median([np.nanmedian(times[blocks]) for times, blocks in zip(rel[:, :, 1], which)])

        print(f"  slice loaded (median block): sharing an SM {loaded(shared):.0f} ns, alone {loaded(~shared):.0f} ns")
    place = place_on_sm(rel[:, :, 0], ns[:, :, SM_SLOT])
    if place.max() > 0:  # some SM ran several blocks: does the first to start there load first?
        medians = ", ".join(f"{np.nanmedian(rel[:, :, 1][place == p]):.0f}" for p in range(place.max() + 1))
        print(
            f"  slice loaded, by the block's place in its SM's start order (1st, 2nd, ...; median block): {medians} ns"
        )


def place_on_sm(start: np.ndarray, sm: np.ndarray) -> np.ndarray:
    """start[launch, block], sm[launch, block] -> each block's place among its SM's blocks by start time (0: the
    first; ties in block order)."""
    place = np.zeros(sm.shape, int)
    for launch, blocks in enumerate(sm):
        for s in np.unique(blocks):
            on_sm = np.flatnonzero(blocks == s)
            place[launch, on_sm[np.argsort(start[launch, on_sm], kind="stable")]] = np.arange(len(on_sm))
    return place


def sharing_an_sm(sm: np.ndarray) -> np.ndarray:
    """sm[launch, block] -> whether another block of the same launch ran on the block's SM."""
    shared = np.empty(sm.shape, bool)
    for launch, blocks in enumerate(sm):
        ids, counts = np.unique(blocks, return_counts=True)
        shared[launch] = np.isin(blocks, ids[counts > 1])
    return shared


if __name__ == "__main__":
    each_case(timeline)

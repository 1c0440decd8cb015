"""Where a top-k launch spends its time (run on a GPU machine): kernels/topk.cu built with TOPK_STAMP recording
when each block passes each stage (%globaltimer, ns, and clock64), over many back-to-back launches on rotated
inputs. Printed per stage: when the first, the median and the last block passed it, from the launch's first
block start (medians over the launches), and the cycles a block spent since the stage before. Beside it, the
device time (CUPTI) of the kernel as the explorer builds it and as stamped: each stamp adds a block barrier.

    PYTHONPATH=. python scripts/timeline_topk.py 1x262144:50 1x151936:8 512x32000:50 ...
(cases as scripts/profile_topk.py takes them)
"""

import sys

import numpy as np

from explorer import harness
from explorer.backends import cuda, cuda_topk
from explorer.registry import VARIANTS
from explorer.topk import reference_topk
from scripts.profile_topk import parse_case
from scripts.stamps import collect, each_case, time_as_built_and_stamped

STAGES = (
    "block starts",
    "batch loaded and folded (one-batch chunks)",
    "chunk's bound (one-batch chunks; a cluster: the row's)",
    "chunk's elements selected",
    "chunk's (m, d) and list in warp 0",
    "mailed to the cluster's leader",
    "leader: every chunk's mail landed",
    "leader: row's (m, d) and k best",
    "leader: written",
    "pool: gathered (the block's last select_pool)",
    "pool: ranked (the block's last select_pool)",
    "merge: the lists' bound",
)
STAMPS = f"""
__device__ unsigned long long* topk_stamp_out;  // [block][stage][globaltimer, clock64], set before each launch
#define TOPK_STAMP(stage) do {{ \\
    __syncthreads(); \\
    if (threadIdx.x == 0) {{ \\
        unsigned long long now; \\
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); \\
        unsigned long long* at = topk_stamp_out + 2 * ((unsigned long long)blockIdx.x * {len(STAGES)} + (stage)); \\
        at[0] = now; \\
        at[1] = clock64(); \\
    }} \\
}} while (0)
"""
LAUNCHES = 300


def timeline(case: str, torch) -> None:
    cp = cuda.cp
    rows, cols, k, launch = parse_case(case)
    print(f"\n{case}: {launch.describe()}", flush=True)
    name = cuda_topk.topk_kernel_name(launch, "float32", True)
    module = cp.RawModule(code=STAMPS + cuda.kernel_source("topk.cu"), options=("-std=c++17",), name_expressions=[name])
    kernel = module.get_function(name)
    if launch.protocol == "cluster" and launch.chunks > cuda.PORTABLE_CLUSTER:
        cuda.allow_large_clusters(kernel)
    x = cp.random.default_rng(rows + cols).standard_normal((rows, cols), dtype=cp.float32) * 3
    buffers = harness.rotation_buffers(x.nbytes, 16)
    xs = [cp.roll(x, i, axis=1) for i in range(buffers)]
    values, indices = cp.empty((rows, k), cp.float32), cp.empty((rows, k), cp.int32)
    scratch = cuda_topk.topk_scratch(rows, launch.chunks)
    blocks = launch.grid
    stamps = cp.zeros((LAUNCHES, blocks, len(STAGES), 2), cp.uint64)
    targets = cp.asarray([stamps[i].data.ptr for i in range(LAUNCHES)], cp.uint64)
    symbol = module.get_global("topk_stamp_out")
    stream = cp.cuda.get_current_stream()
    args = (*scratch, np.int32(rows), np.int32(cols), np.int32(launch.chunks), np.int32(k))

    def stamped(i: int) -> None:
        cp.cuda.runtime.memcpyAsync(symbol.ptr, targets.data.ptr + 8 * (i % LAUNCHES), 8, 3, stream.ptr)
        kernel((blocks,), (launch.block,), (xs[i % buffers], values, indices, *args))

    stamped(0)
    _, want_indices = reference_topk(cp.asnumpy(xs[0]).astype(np.float64), k)
    if not np.array_equal(cp.asnumpy(indices), want_indices):
        sys.exit(f"{case}: the stamped kernel's indices differ from float64's")
    fast = VARIANTS["fast"].launch(rows, cols, None, "float32")
    out = cp.empty((rows, k), cp.float32), cp.empty((rows, k), cp.int32)

    def plain(i: int) -> None:
        cuda_topk.topk_on_device(True, launch, xs[i], rows, cols, "float32", k, fast, poison=False, out=out)

    time_as_built_and_stamped(plain, stamped, buffers, torch)
    report(collect(stamped, LAUNCHES, stamps))


def report(stamps: np.ndarray) -> None:
    """stamps[launch, block, stage, (ns, cycles)]; zero where a block did not pass a stage."""
    ns, cycles = stamps[..., 0], stamps[..., 1]
    passed = ns > 0
    start = ns[:, :, 0].min(axis=1)[:, None]
    steps = np.diff(np.unique(ns[passed]))
    print(f"  globaltimer's smallest step between stamps: {steps[steps > 0].min() if (steps > 0).any() else 0} ns")
    span = (ns[:, 0, 8] - ns[:, 0, 0]) if passed[:, 0, 8].all() else None
    if span is not None:
        ghz = np.median((cycles[:, 0, 8] - cycles[:, 0, 0]) / np.maximum(span, 1))
        print(f"  block 0's clock: {ghz:.2f} GHz")
    print(
        f"  {'stage':44s} {'first':>7s} {'median':>7s} {'last':>7s}  (ns from the first start)  cycles since the last stage"
    )
    previous = 0
    for s, title in enumerate(STAGES):
        if not passed[:, :, s].any():
            continue
        rel = np.where(passed[:, :, s], ns[:, :, s] - start, np.nan)
        first, median, last = (np.median(f(rel, axis=1)) for f in (np.nanmin, np.nanmedian, np.nanmax))
        both = passed[:, :, s] & passed[:, :, previous]
        spent = np.median((cycles[:, :, s] - cycles[:, :, previous])[both]) if s and both.any() else 0
        print(f"  {s} {title:42s} {first:7.0f} {median:7.0f} {last:7.0f}  {spent:10.0f}")
        previous = s
    block_zero(ns[:, 0] - start, cycles[:, 0], passed[:, 0])


def block_zero(ns: np.ndarray, cycles: np.ndarray, passed: np.ndarray) -> None:
    """Block 0 (a cluster's leader) alone, its stages in the order it passed them: ns[launch, stage]."""
    stages = sorted((s for s in range(len(STAGES)) if passed[:, s].all()), key=lambda s: np.median(ns[:, s]))
    print("  block 0, in order:", end="")
    for before, s in zip([None, *stages], stages, strict=False):
        spent = np.median(cycles[:, s] - cycles[:, before]) if before is not None else 0
        print(f" | {s}: {np.median(ns[:, s]):.0f} ns (+{spent:.0f} cyc)", end="")
    print()


if __name__ == "__main__":
    each_case(timeline)

"""Time topk_fused under several launch geometries per shape (run on a GPU machine), to choose
explorer.topk.topk_launch's rule. Every geometry is validated (indices against float64) first, then
timed by device time (CUPTI, through torch.profiler; CUDA events where torch is missing).

    PYTHONPATH=. python scripts/tune_topk.py [--ks 8 50] [--blocks 128 256] [--chunks 0.5 1 2 | --counts 4 8 16]
        [--clusters 0 1] [--pers 4 8] [--shapes 512x50257]
"""

import argparse
import itertools
import time

import numpy as np

from explorer import harness, peers
from explorer.backends import cuda, cuda_topk
from explorer.numerics import DTYPES
from explorer.registry import VARIANTS
from explorer.topk import TopkResult, topk_errors, topk_launch

SHAPES = [
    (4096, 128256),
    (512, 32000),
    (512, 128256),
    (512, 262144),
    (64, 128256),
    (1, 32000),
    (1, 128256),
    (1, 262144),
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ks", type=int, nargs="+", default=[8, 50])
    parser.add_argument("--blocks", type=int, nargs="+", default=[128, 256], help="threads a block; 0: the rule's")
    parser.add_argument(
        "--chunks",
        type=float,
        nargs="+",
        default=[0.5, 1, 2],
        help="blocks per row to try, as multiples of the rule's (capped at one batch of the block per chunk)",
    )
    parser.add_argument("--counts", type=int, nargs="+", help="blocks per row to try, as numbers (instead of --chunks)")
    parser.add_argument(
        "--clusters",
        type=int,
        nargs="+",
        default=[-1],
        help="1: a row's chunks form a cluster (at most 16); 0: merged through global memory; -1: as the rule",
    )
    parser.add_argument(
        "--pers", type=int, nargs="+", default=[0], help="16-byte packs a thread a batch; 0: the rule's"
    )
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--shapes", nargs="+", help="ROWSxCOLS (default: a batch-4096/512/64/1 set)")
    args = parser.parse_args()
    cp, torch = cuda.cp, peers.torch_module()
    dtype = args.dtype
    shapes = [tuple(int(n) for n in s.split("x")) for s in args.shapes] if args.shapes else SHAPES
    for rows, cols in shapes:
        x32 = cp.random.default_rng(rows + cols).standard_normal((rows, cols), dtype=cp.float32) * 3
        buffers = harness.rotation_buffers(x32.nbytes, 16)
        xs = [harness.round_on_device(cp.roll(x32, i, axis=1), dtype) for i in range(buffers)]
        x_host = cuda.from_device(xs[0][:8], DTYPES[dtype])
        for k in args.ks:
            print(tune(rows, cols, k, dtype, xs, x_host, args, torch), flush=True)
        cp.get_default_memory_pool().free_all_blocks()


def tune(rows: int, cols: int, k: int, dtype: str, xs: list, x_host: np.ndarray, args, torch) -> str:
    cp = cuda.cp
    buffers = len(xs)
    fast = VARIANTS["fast"].launch(rows, cols, None, dtype)
    line = [f"{rows}x{cols} k={k}"]
    if torch is not None and dtype != "bfloat16":
        tx = [torch.from_dlpack(x) for x in xs]
        t = harness.median_us(lambda i: torch.topk(torch.softmax(tx[i], dim=1), k, dim=1), buffers)
        line.append(f"torch {t:.1f}")
    seen = set()
    for requested in args.blocks:  # 0: the rule's block size
        rule_launch = topk_launch(rows, cols, k, dtype, requested or None)
        block, rule = rule_launch.block, rule_launch.chunks
        counts = args.counts or [round(rule * scale) for scale in args.chunks]
        for count, cluster, per in itertools.product(counts, args.clusters, args.pers):
            launch = topk_launch(  # topk_launch caps the chunks (k = 1: a batch each at least; k > 1: at most one)
                rows,
                cols,
                k,
                dtype,
                block,
                max(1, count),
                None if cluster < 0 else bool(cluster),
                per or rule_launch.template_args[1],
            )
            if (launch.kernel, launch.block, launch.chunks, launch.template_args) in seen:
                continue
            seen.add((launch.kernel, launch.block, launch.chunks, launch.template_args))
            values, indices = cuda_topk.topk_on_device(True, launch, xs[0], rows, cols, dtype, k, fast)
            got = TopkResult(
                cuda.from_device(values[:8], DTYPES[dtype]),
                cp.asnumpy(indices[:8]),
                "cuda",
                "topk_fused",
                k,
                launch,
            )
            report = topk_errors(got, x_host)

            def run(i, launch=launch):
                cuda_topk.topk_on_device(True, launch, xs[i], rows, cols, dtype, k, fast, False)

            events = harness.median_us(run, buffers)
            device = harness.device_us(run, buffers, events)
            bad = "" if report.index_mismatch == 0 else f" WRONG({report.index_mismatch})"
            shown = f"{device:.1f}" if device else f"events {events:.1f}"
            kind = "C" if launch.protocol == "cluster" else "c"
            line.append(f"b{block}{kind}{launch.chunks}p{launch.template_args[1]} {shown}{bad}")
    launch = topk_launch(rows, cols, k, dtype)  # the API's choice: how long does Python take to launch it?
    line.append(f"rule b{launch.block}{'C' if launch.protocol == 'cluster' else 'c'}{launch.chunks}")
    out = cp.empty((rows, k), xs[0].dtype), cp.empty((rows, k), np.int32)
    cuda.cp.cuda.get_current_stream().synchronize()
    started = time.perf_counter()
    for i in range(100):
        cuda_topk.topk_on_device(True, launch, xs[i % buffers], rows, cols, dtype, k, fast, False, out)
    line.append(f"python {(time.perf_counter() - started) * 1e4:.1f}/call")
    line.append(f"{cuda_topk.topk_registers(launch, dtype, True)} regs")
    cuda.cp.cuda.get_current_stream().synchronize()
    return " | ".join(line)


if __name__ == "__main__":
    main()

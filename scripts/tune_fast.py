"""Time every geometry of `fast` that its launch rule could choose, per shape, on a GPU machine.

Each geometry is validated against float64 (poisoned output, every element written) before it is
timed with CUDA events over inputs rotated beyond 4× the L2. Prints, per shape, the copy's time,
the rule's choice and the best geometry; FAST_ROW_SHAPES in explorer/registry.py is read off this.

    PYTHONPATH=. python scripts/tune_fast.py [--dtypes float32 bfloat16] [--cols 2048 4096] [--long] [--device-time]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import itertools
import json

from explorer import bench, devicetime, harness
from explorer.backends import cuda
from explorer.fast_launch import fast_row_launch, fast_split_launch, fast_stream_launch, fast_vector, fast_warp_launch
from explorer.geometry import Launch
from explorer.numerics import DTYPES
from explorer.registry import VARIANTS

cp = cuda.cp
FAST = VARIANTS["fast"]


# fast_row's (elements a thread, hold) to try; only="registers" keeps those held in registers (HOLD 1 from 64 elements,
# HOLD 3 from 32)
FAST_ROW_HOLDS = (
    (16, 0),
    (32, 0),
    (64, 0),
    (16, 1),
    (32, 1),
    (64, 1),
    (128, 1),
    (32, 2),
    (64, 2),
    (128, 2),
    (32, 3),
    (64, 3),
    (128, 3),
)
REGISTER_HELD = ((64, 1), (128, 1), (32, 3), (64, 3), (128, 3))
LONG_ROW = 2**20  # from here on, fast_split's and fast_stream's geometries are candidates too


def candidates(rows: int, cols: int, dtype: str, only: str = "all") -> list[Launch]:
    """The rule's choice, fast_warp with other lane counts and block sizes, then fast_row at every block size, register or
    shared-memory budget and hold (registers / shared memory) that fits, then several rows a block; with
    only="registers", the rule's choice and the register-held fast_row geometries (one or several rows a
    block); with only="rule", the rule's choice alone (to time one build of fast.cu against another)."""
    found = [FAST.launch(rows, cols, None, dtype)]
    if only == "rule":
        return found
    if only == "split" or cols >= LONG_ROW:
        found += [s for s in split_candidates(rows, cols, dtype) if s not in found]
    if only == "split":
        return found
    registers_only = only == "registers"
    vec = fast_vector(cols, dtype)
    if cols <= 2048 and vec > 1 and not registers_only:
        for lanes, block in itertools.product((4, 8, 16, 32), (32, 64, 128)):
            launch = fast_warp_launch(rows, cols, dtype, lanes, block)
            if launch.template_args[1] * vec <= 64 and launch not in found:  # packs a lane, times their elements
                found.append(launch)
    for threads in (128, 256, 512, 1024):
        for elements, hold in REGISTER_HELD if registers_only else FAST_ROW_HOLDS:
            if elements < vec or (hold == 2 and elements > 8 * vec * 2):
                continue
            launch = fast_row_launch(rows, cols, dtype, threads, elements, hold)
            if launch is not None and launch not in found:
                found.append(launch)
    return found + [c for c in _several_rows(rows, cols, dtype) if c not in found]


def split_candidates(rows: int, cols: int, dtype: str) -> list[Launch]:
    """fast_split and fast_stream (as many batches held as fit, or none) with 2, 3 or 4 blocks an SM."""
    found = [fast_split_launch(rows, cols, dtype, blocks) for blocks in (2, 3, 4)]
    for blocks in (2, 3, 4):
        found += [fast_stream_launch(rows, cols, dtype, blocks), fast_stream_launch(rows, cols, dtype, blocks, held=0)]
    return found


def _several_rows(rows: int, cols: int, dtype: str) -> list[Launch]:
    """Several rows a block, a row's threads holding it in registers (cp.async through shared memory)."""
    found: list[Launch] = []
    for threads in (32, 64, 128, 256):
        for elements in (16, 32, 64):
            for rows_per_block in (2, 4, 8):
                launch = fast_row_launch(rows, cols, dtype, threads, elements, 1, rows_per_block)
                if launch is not None and launch.block <= 512 and launch not in found:
                    found.append(launch)
    return found


def tune_shape(rows: int, cols: int, dtype: str, only: str = "all", device: bool = False) -> dict:
    bytes_in = rows * cols * DTYPES[dtype].itemsize
    buffers = harness.rotation_buffers(bytes_in, 32, least=2)
    rng = cp.random.default_rng(cols)
    xs = [
        harness.round_on_device(rng.standard_normal((rows, cols), dtype=cp.float32) * 3, dtype) for _ in range(buffers)
    ]
    ys = [cp.empty_like(x) for x in xs]
    ref = bench.reference_device(xs[0], dtype)

    def copy(i):
        ys[i].data.copy_from_device_async(xs[i].data, bytes_in)  # cudaMemcpyAsync

    copy_us = harness.median_us(copy, buffers)
    copy_device_us = harness.device_us(copy, buffers, copy_us, devicetime.COPY) if device else None
    timed = []
    for launch in candidates(rows, cols, dtype, only):
        poison = cuda.poison_value(DTYPES[dtype])
        ys[0].fill(poison)
        cuda.launch(FAST, launch, xs[0], ys[0], rows, cols, dtype, "float32")
        max_rel, problem = bench.check_output(FAST.key, launch, xs[0], ys[0], ref, dtype, "float32", poison)
        if problem:
            timed.append({"launch": launch.describe(), "error": problem})
            continue

        def run(i, g=launch):
            cuda.launch(FAST, g, xs[i], ys[i], rows, cols, dtype, "float32")

        us = harness.median_us(run, buffers)
        row = {"launch": launch.describe(), "us": us, "pct_copy": 100 * copy_us / us, "max_rel": max_rel}
        if copy_device_us and (dev := harness.device_us(run, buffers, us)):
            row |= {"device_us": dev, "pct_copy_device": 100 * copy_device_us / dev}
        timed.append(row)
    found = {"dtype": dtype, "rows": rows, "cols": cols, "copy_us": copy_us, "timed": timed}
    return found | ({"copy_device_us": copy_device_us} if copy_device_us else {})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--cols", nargs="*", type=int, default=[*bench.SWEEP_COLS, 5000, 50257, 151936])
    parser.add_argument("--long", action="store_true", help="also the long-row shapes")
    parser.add_argument(
        "--only",
        choices=["all", "registers", "rule", "split"],
        default="all",
        help="registers: the rule and register-held fast_row; rule: the rule's choice alone; split: the rule "
        "and fast_split's and fast_stream's geometries",
    )
    parser.add_argument(
        "--device-time", action="store_true", help="also CUPTI device time (torch.profiler); ranks by it"
    )
    parser.add_argument("--json")
    args = parser.parse_args()
    shapes = [(max(1, bench.SWEEP_ELEMENTS // c), c) for c in args.cols]
    if args.long:
        shapes += list(bench.LONG_ROW_SHAPES)
    results = []
    for dtype in args.dtypes:
        for rows, cols in shapes:
            r = tune_shape(rows, cols, dtype, args.only, args.device_time)
            cp.get_default_memory_pool().free_all_blocks()  # the shape's buffers are gone with tune_shape
            results.append(r)
            key = "pct_copy_device" if "copy_device_us" in r else "pct_copy"
            ok = [t for t in r["timed"] if key in t]
            rule, best = r["timed"][0], max(ok, key=lambda t: t[key]) if ok else None
            print(
                f"{dtype:8} {rows:>8}x{cols:<8} copy {r['copy_us']:7.1f} us ({key}) | rule {rule.get(key, 0):5.1f}% "
                f"{rule['launch']} | best {best[key] if best else 0:5.1f}% {best['launch'] if best else '-'}",
                flush=True,
            )
            for t in r["timed"]:
                shown = f"{t[key]:5.1f}%" if key in t else f"FAILED {t.get('error', 'no device time')}"
                print(f"    {shown} {t['launch']}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()

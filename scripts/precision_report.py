"""The precision lab's figures and numbers for docs/precision.md.

    BROWSER_PATH=/usr/bin/chromium python scripts/precision_report.py --out docs            # here: the emulator
    python scripts/precision_report.py --backend cuda --prefix precision-gpu --no-png --out $OUT
    BROWSER_PATH=/usr/bin/chromium python scripts/precision_report.py --records precision-gpu.json --out docs

Runs explorer.precision.sweep over n = 2^4 .. 2^max (online_thread up to 2^thread-max: the emulator folds
a lane in a Python loop), writes <prefix>-*.png (plotly + kaleido), <prefix>.json (every record) and prints
the Markdown tables the write-up quotes. --records draws from a saved <prefix>.json instead of running
(a GPU machine without a browser for kaleido saves with --no-png; the PNGs are drawn here).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import explorer
from explorer import precision
from explorer.precision import Measurement, Trajectory
from ui import figures


def table(records: list[Measurement], acc: str, dist: str, ns: list[int]) -> str:
    """Markdown: relative error of d_n per variant (rows) and n (columns)."""
    head = "| variant | " + " | ".join(f"2^{n.bit_length() - 1}" for n in ns) + " |"
    lines = [head, "|---" * (len(ns) + 1) + "|"]
    for v in precision.ONLINE_VARIANTS:
        cells = []
        for n in ns:
            r = next((r for r in records if (r.variant, r.acc, r.dist, r.n) == (v, acc, dist, n)), None)
            cells.append("–" if r is None else "inf" if r.overflow else f"{r.d_rel_error:.1e}")
        lines.append(f"| {v} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="auto", choices=explorer.BACKENDS)
    ap.add_argument("--max", type=int, default=20, help="largest n is 2^max")
    ap.add_argument("--thread-max", type=int, default=16, help="largest n for online_thread is 2^this")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--out", default="docs")
    ap.add_argument("--prefix", default="precision")
    ap.add_argument("--records", help="draw from this saved .json instead of running (its prefix is kept)")
    ap.add_argument("--no-png", action="store_true", help="save the .json and tables only")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    n_stag = 2**13
    if args.records:
        saved = json.loads(Path(args.records).read_text())
        records = [Measurement(**r) for r in saved["records"]]
        stamp, prefix = saved["stamp"], Path(args.records).stem
        traj = [
            Trajectory(**{**t, **{k: np.asarray(t[k]) for k in ("steps", "d", "exact_d")}})
            for t in saved["trajectories"]
        ]
    else:
        prefix = args.prefix
        ns = precision.powers_of_two(4, args.max)
        start = time.perf_counter()
        records = []
        for v in precision.ONLINE_VARIANTS:
            vns = [n for n in ns if v != "online_thread" or n <= 2**args.thread_max]
            records += precision.sweep(
                [v],
                ns=vns,
                backend=args.backend,
                dtype=args.dtype,
                progress=lambda i, total, v=v: print(f"\r{v}: {i + 1}/{total}", end="", flush=True),
            )
        print(f"\n{len(records)} runs in {time.perf_counter() - start:.0f} s")
        stamp = figures.stamp_text(explorer.info(), datetime.date.today().isoformat())
        traj = [
            precision.d_trajectory("online_thread", a, "constant", n_stag, backend=args.backend, dtype=args.dtype)
            for a in precision.ACCUMULATORS
        ]
        (out / f"{prefix}.json").write_text(
            json.dumps(
                {
                    "stamp": stamp,
                    "records": [dataclasses.asdict(r) for r in records],
                    "trajectories": [
                        {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in dataclasses.asdict(t).items()}
                        for t in traj
                    ],
                }
            )
        )
    ns = sorted({r.n for r in records})
    backend = records[0].backend
    src = "GPU kernels" if backend == "cuda" else "CPU emulation"
    figs = {
        "error-vs-n": figures.error_vs_n_figure(
            records, "online_thread", "d", f"online_thread: relative error of d_n vs float64 ({src})", stamp
        ),
        "error-vs-n-block": figures.error_vs_n_figure(
            records, "online_block", "d", f"online_block (B = 256): relative error of d_n vs float64 ({src})", stamp
        ),
        "outputs": figures.error_vs_n_figure(
            records,
            "online_thread",
            "out",
            f"online_thread: max relative error of the outputs vs float64 ({src})",
            stamp,
        ),
        "stagnation": figures.stagnation_figure(
            traj, f"online_thread, constant row of {n_stag:,}: traced d_j ({src})", stamp
        ),
        "overflow": figures.overflow_figure(
            [r for r in records if r.acc == "float16" and r.dist == "constant"],
            f"final d_n in fp16 on a constant row, exact d_n = n ({src})",
            stamp,
        ),
        "variants": figures.compare_figure(
            [r for r in records if r.acc == "float16" and r.dist == "decreasing"],
            "variant",
            "d",
            f"monotone decreasing row, acc float16: error of d_n per variant ({src})",
            stamp,
        ),
    }
    if not args.no_png:
        for name, fig in figs.items():
            fig.write_image(out / f"{prefix}-{name}.png", width=1300, height=fig.layout.height or 500, scale=1)
    show = [n for n in ns if n.bit_length() % 2 == 1 or n == ns[-1]]
    for acc in precision.ACCUMULATORS:
        print(f"\n### d_n relative error, acc {acc}, monotone decreasing ({src})\n")
        print(table(records, acc, "decreasing", show))
    applies = [r for r in records if r.bound_applies]
    bad = [r for r in applies if r.d_rel_error > r.d_bound or r.out_max_rel > r.bound]
    worst = max(applies, key=lambda r: r.d_rel_error / r.d_bound)
    print(
        f"\nbound below 1 for {len(applies)} of {len(records)} runs; outside it: {len(bad)}; "
        f"largest measured/bound for d: {worst.d_rel_error / worst.d_bound:.3f} "
        f"({worst.variant}, {worst.acc}, {worst.dist}, n = {worst.n})"
    )
    for r in records:
        if r.overflow and r.dist == "constant":
            print(f"overflow: {r.variant} acc {r.acc} n = {r.n}")
            break
    for t in traj:
        print(f"stagnation {t.acc}: {t.stagnated_at}")


if __name__ == "__main__":
    main()

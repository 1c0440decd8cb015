"""Measure how closely the NumPy emulation follows the CUDA kernels (run on a GPU machine).

    python scripts/emulation_agreement.py [--json FILE]

For every variant × dtype × accumulator, on fresh normal and zipf inputs: the largest relative
difference between GPU and emulated outputs, in units of the output type's u, and the share of
outputs that are bitwise equal.
"""

import argparse
import json

import numpy as np

import explorer
from explorer.numerics import FORMATS


def bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint16 if a.itemsize == 2 else np.uint32)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = []
    rng = np.random.default_rng()
    for key, v in explorer.VARIANTS.items():
        for dtype in v.dtypes:
            for acc in v.accumulators:
                worst, equal, total = 0.0, 0, 0
                for dist in ("normal", "zipf"):
                    x = explorer.make_input(dist, 64, 2000, dtype, int(rng.integers(2**31)))
                    gpu = explorer.softmax(x, key, acc=acc, backend="cuda").out
                    emu = explorer.softmax(x, key, acc=acc, backend="emulator").out
                    g, e = gpu.astype(np.float64), emu.astype(np.float64)
                    rel = np.abs(g - e) / np.maximum(np.abs(e), FORMATS[dtype].smallest_normal)
                    worst = max(worst, float(np.nanmax(rel)) / FORMATS[dtype].unit_roundoff)
                    equal += int(np.sum(bits(gpu) == bits(emu)))
                    total += gpu.size
                rows.append(
                    {
                        "variant": key,
                        "dtype": dtype,
                        "acc": acc,
                        "max_rel_in_u_out": worst,
                        "bitwise_equal": equal / total,
                    }
                )
                print(
                    f"{key:14s} {dtype:9s} acc {acc:9s} max |gpu-emu|/|emu| = {worst:6.2f} u_out, "
                    f"bitwise equal {100 * equal / total:6.2f}%",
                    flush=True,
                )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

"""Run `fast` once per [DTYPE:]shape[@THREADS,ELEMENTS,HOLD,ROWS_PER_BLOCK] after a warm-up, for Nsight
Compute to capture (run on a GPU machine): the launch rule's geometry, or the fast_row one given after @.

    ncu --clock-control none --kernel-name regex:fast --launch-skip-before-match 0 \
        --section SpeedOfLight --section Occupancy --section WarpStateStats \
        python scripts/profile_fast.py 32768x4096 171799x781 bfloat16:65536x2048 bfloat16:65536x2048@32,64,1,4
"""

import sys

import numpy as np

import explorer
from explorer.backends import cuda
from explorer.fast_launch import fast_row_launch
from explorer.numerics import DTYPES


def parse_case(case: str):
    """[DTYPE:]ROWSxCOLS[@THREADS,ELEMENTS,HOLD,ROWS_PER_BLOCK] -> (dtype, rows, cols, launch): the rule's launch,
    or the fast_row geometry given after @."""
    case, _, given = case.partition("@")
    dtype, _, shape = case.rpartition(":")
    dtype = dtype or "float32"
    rows, cols = (int(n) for n in shape.split("x"))
    if given:
        launch = fast_row_launch(rows, cols, dtype, *(int(n) for n in given.split(",")))
    else:
        launch = explorer.VARIANTS["fast"].launch(rows, cols, None, dtype)
    return dtype, rows, cols, launch


def main() -> None:
    v = explorer.VARIANTS["fast"]
    for arg in sys.argv[1:]:
        dtype, rows, cols, geometry = parse_case(arg)
        x = cuda.to_device(np.random.default_rng(0).standard_normal((rows, cols), np.float32).astype(DTYPES[dtype]))
        y = cuda.cp.empty_like(x)
        print(dtype, f"{rows}x{cols}", geometry.describe(), flush=True)
        cuda.launch(v, geometry, x, y, rows, cols, dtype, "float32")
        cuda.cp.cuda.get_current_stream().synchronize()


if __name__ == "__main__":
    main()

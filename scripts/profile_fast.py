"""Run `fast` once per [DTYPE:]shape after a warm-up, for Nsight Compute to capture (run on a GPU machine).

    ncu --clock-control none --kernel-name regex:fast --launch-skip-before-match 0 \
        --section SpeedOfLight --section Occupancy --section WarpStateStats \
        python scripts/profile_fast.py 32768x4096 171799x781 bfloat16:65536x2048
"""

import sys

import numpy as np

import explorer
from explorer.backends import cuda
from explorer.numerics import DTYPES


def main() -> None:
    v = explorer.VARIANTS["fast"]
    for shape in sys.argv[1:]:
        dtype, _, shape = shape.rpartition(":")
        dtype = dtype or "float32"
        rows, cols = (int(n) for n in shape.split("x"))
        x = cuda.to_device(np.random.default_rng(0).standard_normal((rows, cols), np.float32).astype(DTYPES[dtype]))
        y = cuda.cp.empty_like(x)
        geometry = v.launch(rows, cols, None, dtype)
        print(dtype, shape, geometry.describe(), flush=True)
        cuda.launch(v, geometry, x, y, rows, cols, dtype, "float32")
        cuda.cp.cuda.get_current_stream().synchronize()


if __name__ == "__main__":
    main()

"""Run `fast` once per shape after a warm-up, for Nsight Compute to capture (run on a GPU machine).

    ncu --clock-control none --kernel-name regex:fast --launch-skip-before-match 0 \
        --section SpeedOfLight --section Occupancy --section WarpStateStats \
        python scripts/profile_fast.py 32768x4096 171799x781
"""

import sys

import explorer
from explorer.backends import cuda


def main() -> None:
    v = explorer.VARIANTS["fast"]
    for shape in sys.argv[1:]:
        rows, cols = (int(n) for n in shape.split("x"))
        x = cuda.cp.random.standard_normal((rows, cols), dtype=cuda.cp.float32)
        y = cuda.cp.empty_like(x)
        geometry = v.launch(rows, cols, None, "float32")
        print(shape, geometry.describe(), flush=True)
        cuda.launch(v, geometry, x, y, rows, cols, "float32", "float32")
        cuda.cp.cuda.get_current_stream().synchronize()


if __name__ == "__main__":
    main()

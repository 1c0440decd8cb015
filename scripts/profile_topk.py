"""Run the fused softmax + top-k once per case after a warm-up, for Nsight Compute to capture (run on a GPU machine).

    ncu --clock-control none --kernel-name regex:topk --launch-skip-before-match 0 \
        --section SpeedOfLight --section Occupancy --section WarpStateStats \
        python scripts/profile_topk.py 512x128256:8 4096x128256:50 1x262144:50 64x32000:1:b256:C8

A case is ROWSxCOLS:K, optionally followed by :bTHREADS (block size) and :cCHUNKS or :CCHUNKS (chunks a
row, merged through global memory or as a cluster); otherwise the launch rule's geometry.
"""

import sys

from explorer.backends import cuda, cuda_topk
from explorer.registry import VARIANTS
from explorer.topk import topk_launch


def parse_case(case: str):
    """ROWSxCOLS:K[:bTHREADS][:cCHUNKS|:CCHUNKS] as (rows, cols, k, launch)."""
    shape, k, *options = case.split(":")
    rows, cols = (int(n) for n in shape.split("x"))
    geometry = {"block": None, "chunks": None, "cluster": None}
    for option in options:
        if option[0] == "b":
            geometry["block"] = int(option[1:])
        else:
            geometry["chunks"], geometry["cluster"] = int(option[1:]), option[0] == "C"
    return rows, cols, int(k), topk_launch(rows, cols, int(k), "float32", **geometry)


def main() -> None:
    for case in sys.argv[1:]:
        rows, cols, k, launch = parse_case(case)
        x = cuda.cp.random.standard_normal((rows, cols), dtype=cuda.cp.float32) * 3
        print(case, launch.describe(), flush=True)
        fast = VARIANTS["fast"].launch(rows, cols, None, "float32")
        cuda_topk.topk_on_device(True, launch, x, rows, cols, "float32", k, fast)
        cuda.cp.cuda.get_current_stream().synchronize()


if __name__ == "__main__":
    main()

"""Where a batch-1 top-k call spends its time on the host (run on a GPU machine): µs per call of the API's
device path and of two of its steps in a loop of CALLS calls (once the launch queue fills, the loop runs at
the GPU's pace), then the CUDA-event time per call that the benchmark reports (the host's path before the
launch, plus the kernel).

    PYTHONPATH=. python scripts/topk_host_path.py [1x32000:50 1x262144:8 ...]
"""

import sys
import time

import numpy as np

from explorer import harness
from explorer.backends import cuda, cuda_topk
from explorer.registry import VARIANTS
from explorer.topk import topk_launch

CALLS = 5000


def per_call_us(call) -> float:
    call()
    cuda.cp.cuda.get_current_stream().synchronize()
    started = time.perf_counter()
    for _ in range(CALLS):
        call()
    spent = time.perf_counter() - started
    cuda.cp.cuda.get_current_stream().synchronize()
    return spent / CALLS * 1e6


def measure(case: str) -> str:
    cp = cuda.cp
    shape, k = case.split(":")
    rows, cols = (int(n) for n in shape.split("x"))
    k = int(k)
    x = cp.random.default_rng(0).standard_normal((rows, cols), dtype=cp.float32)
    launch, fast = topk_launch(rows, cols, k, "float32"), VARIANTS["fast"].launch(rows, cols, None, "float32")
    out = cp.empty((rows, k), cp.float32), cp.empty((rows, k), np.int32)

    def api_path():
        cuda_topk.topk_on_device(True, launch, x, rows, cols, "float32", k, fast, False, out)

    parts = {
        "api path": api_path,
        "current stream": lambda: cp.cuda.get_current_stream().ptr,
        "x.data.ptr": lambda: x.data.ptr,
    }
    line = [f"{case} {launch.describe()}"]
    line += [f"{name} {per_call_us(call):.2f}" for name, call in parts.items()]
    events = harness.time_launches(lambda i: api_path(), 1)
    line.append(f"event time per call: median {np.median(events):.1f}, p10 {np.percentile(events, 10):.1f}")
    return " | ".join(line)


def main() -> None:
    for case in sys.argv[1:] or ["1x32000:50", "1x262144:8"]:
        print(measure(case), flush=True)


if __name__ == "__main__":
    main()

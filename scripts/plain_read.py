"""What reading a batch of rows can take at best (run on a GPU machine): the device time of a plain row-max
kernel (four 16-byte loads in flight a thread, nothing else to do) at 128 … 1024 threads a block and 1 … 8
blocks a row (`b256x2`: 256 threads, two blocks a row), and of torch.amax. Where even the plain read is far from the read-once floor (half a copy of the
logits), no top-k kernel that reads them once gets there.

    PYTHONPATH=. python scripts/plain_read.py [--chunks 1 2 4 8] 512x32000 64x32000 64x128256 ...   (COLS a multiple of 4)
"""

import argparse
import itertools
import math
import sys

import numpy as np

from explorer import devicetime, harness, peers
from explorer.backends import cuda

ROW_MAX = r"""
extern "C" __global__ void row_max(const float4* __restrict__ x, float* __restrict__ out, int packs, int chunks) {
    const int row = blockIdx.x / chunks, c = blockIdx.x % chunks, chunk = (packs + chunks - 1) / chunks;
    const float4* start = x + (long long)row * packs;
    const int stride = blockDim.x, end = min(packs, (c + 1) * chunk);
    float m = __int_as_float(0xff800000);
    int p = c * chunk + threadIdx.x;
    for (; p + 3 * stride < end; p += 4 * stride) {  // four loads issued before any is used
        const float4 a = __ldg(start + p), b = __ldg(start + p + stride), c4 = __ldg(start + p + 2 * stride),
                     d = __ldg(start + p + 3 * stride);
        m = fmaxf(m, fmaxf(fmaxf(fmaxf(a.x, a.y), fmaxf(a.z, a.w)), fmaxf(fmaxf(b.x, b.y), fmaxf(b.z, b.w))));
        m = fmaxf(m, fmaxf(fmaxf(fmaxf(c4.x, c4.y), fmaxf(c4.z, c4.w)), fmaxf(fmaxf(d.x, d.y), fmaxf(d.z, d.w))));
    }
    for (; p < end; p += stride) {
        const float4 a = __ldg(start + p);
        m = fmaxf(m, fmaxf(fmaxf(a.x, a.y), fmaxf(a.z, a.w)));
    }
    for (int offset = 16; offset > 0; offset /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, offset));
    if (threadIdx.x % 32 == 0) atomicMax(reinterpret_cast<int*>(out) + row, __float_as_int(m));
}
"""


def measure(shape: str, chunks_per_row: list[int], row_max, torch) -> str:
    cp = cuda.cp
    rows, cols = (int(n) for n in shape.split("x"))
    if cols % 4:
        sys.exit(f"{shape}: COLS must be a multiple of 4 (16-byte loads)")
    x = cp.random.default_rng(0).standard_normal((rows, cols), dtype=cp.float32)
    buffers = max(1, min(16, math.ceil(4 * cuda.device_info()["l2_bytes"] / x.nbytes)))
    xs = [cp.roll(x, i, axis=1) for i in range(buffers)]
    out = cp.zeros(rows, cp.float32)
    runs = {}
    if torch is not None:
        txs = [torch.from_dlpack(x) for x in xs]
        runs["torch.amax"] = lambda i: torch.amax(txs[i], dim=1)
    for block, chunks in itertools.product((128, 256, 512, 1024), chunks_per_row):
        runs[f"row_max b{block}x{chunks}"] = lambda i, b=block, c=chunks: row_max(
            (rows * c,), (b,), (xs[i], out, np.int32(cols // 4), np.int32(c))
        )
    line = [shape]
    for name, run in runs.items():
        events = harness.time_launches(run, buffers)
        device = devicetime.measure(
            run, buffers, devicetime.calls_per_batch(float(np.median(events))), cp.cuda.get_current_stream().synchronize
        )
        line.append(f"{name} {device['device_us']:.1f}" if device else f"{name} events {np.median(events):.1f}")
    return " | ".join(line)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, nargs="+", default=[1], help="blocks a row")
    parser.add_argument("shapes", nargs="+", help="ROWSxCOLS")
    args = parser.parse_args()
    row_max = cuda.cp.RawModule(code=ROW_MAX).get_function("row_max")
    torch = peers.torch_module()
    for shape in args.shapes:
        print(measure(shape, args.chunks, row_max, torch), flush=True)
        cuda.cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()

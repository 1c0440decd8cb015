"""What reading a batch of rows can take at best (run on a GPU machine): the device time of a plain row-max
kernel (a block per row, four 16-byte loads in flight a thread, nothing else to do) at 128 … 1024 threads a
block, and of torch.amax. Where even the plain read is far from the read-once floor (half a copy of the
logits), no top-k kernel that reads each row in one block gets there.

    PYTHONPATH=. python scripts/plain_read.py 512x32000 64x32000 64x128256 ...   (COLS a multiple of 4)
"""

import sys

import numpy as np

from explorer import harness, peers
from explorer.backends import cuda

ROW_MAX = r"""
extern "C" __global__ void row_max(const float4* __restrict__ x, float* __restrict__ out, int packs) {
    const float4* row = x + (long long)blockIdx.x * packs;
    const int stride = blockDim.x;
    float m = __int_as_float(0xff800000);
    int p = threadIdx.x;
    for (; p + 3 * stride < packs; p += 4 * stride) {  // four loads issued before any is used
        const float4 a = __ldg(row + p), b = __ldg(row + p + stride), c = __ldg(row + p + 2 * stride), d = __ldg(row + p + 3 * stride);
        m = fmaxf(m, fmaxf(fmaxf(fmaxf(a.x, a.y), fmaxf(a.z, a.w)), fmaxf(fmaxf(b.x, b.y), fmaxf(b.z, b.w))));
        m = fmaxf(m, fmaxf(fmaxf(fmaxf(c.x, c.y), fmaxf(c.z, c.w)), fmaxf(fmaxf(d.x, d.y), fmaxf(d.z, d.w))));
    }
    for (; p < packs; p += stride) {
        const float4 a = __ldg(row + p);
        m = fmaxf(m, fmaxf(fmaxf(a.x, a.y), fmaxf(a.z, a.w)));
    }
    for (int offset = 16; offset > 0; offset /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, offset));
    if (threadIdx.x % 32 == 0) atomicMax(reinterpret_cast<int*>(out) + blockIdx.x, __float_as_int(m));
}
"""


def measure(shape: str, row_max, torch) -> str:
    cp = cuda.cp
    rows, cols = (int(n) for n in shape.split("x"))
    if cols % 4:
        sys.exit(f"{shape}: COLS must be a multiple of 4 (16-byte loads)")
    x = cp.random.default_rng(0).standard_normal((rows, cols), dtype=cp.float32)
    buffers = harness.rotation_buffers(x.nbytes, 16)
    xs = [cp.roll(x, i, axis=1) for i in range(buffers)]
    out = cp.zeros(rows, cp.float32)
    runs = {}
    if torch is not None:
        txs = [torch.from_dlpack(x) for x in xs]
        runs["torch.amax"] = lambda i: torch.amax(txs[i], dim=1)
    for block in (128, 256, 512, 1024):
        runs[f"row_max b{block}"] = lambda i, b=block: row_max((rows,), (b,), (xs[i], out, np.int32(cols // 4)))
    line = [shape]
    for name, run in runs.items():
        events = harness.median_us(run, buffers)
        device = harness.device_us(run, buffers, events)
        line.append(f"{name} {device:.1f}" if device else f"{name} events {events:.1f}")
    return " | ".join(line)


def main() -> None:
    row_max = cuda.cp.RawModule(code=ROW_MAX).get_function("row_max")
    torch = peers.torch_module()
    for shape in sys.argv[1:]:
        print(measure(shape, row_max, torch), flush=True)
        cuda.cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()

"""What reading a batch of rows can take at best (run on a GPU machine): the device time of a plain row-max
kernel (a block per row, four 16-byte loads in flight a thread, nothing else to do) at 128 … 1024 threads a
block, of torch.amax, and of a whole-GPU read (grid_max: the logits as one array, cut into as many blocks as
fill the GPU, rows ignored), each beside the read-once floor (half a copy of the logits, timed in the same
run) as a %. Where even the whole-GPU read is far from the floor, no kernel that reads the logits gets there.

    PYTHONPATH=. python scripts/plain_read.py 512x32000 64x32000 64x128256 ...   (COLS a multiple of 4)
"""

import sys

import numpy as np

from explorer import devicetime, harness, peers
from explorer.backends import cuda

KERNELS = r"""
// The largest of packs from, from + blockDim.x, ... below end (a thread's share), four 16-byte loads issued before
// any is used; then the block's largest, by its warps' atomicMax, into *out.
template <typename I> __device__ void block_max(const float4* __restrict__ x, I from, I end, float* out) {
    const int stride = blockDim.x;
    float m = __int_as_float(0xff800000);
    I p = from;
    for (; p + 3 * stride < end; p += 4 * stride) {
        const float4 a = __ldg(x + p), b = __ldg(x + p + stride), c = __ldg(x + p + 2 * stride), d = __ldg(x + p + 3 * stride);
        m = fmaxf(m, fmaxf(fmaxf(fmaxf(a.x, a.y), fmaxf(a.z, a.w)), fmaxf(fmaxf(b.x, b.y), fmaxf(b.z, b.w))));
        m = fmaxf(m, fmaxf(fmaxf(fmaxf(c.x, c.y), fmaxf(c.z, c.w)), fmaxf(fmaxf(d.x, d.y), fmaxf(d.z, d.w))));
    }
    for (; p < end; p += stride) {
        const float4 a = __ldg(x + p);
        m = fmaxf(m, fmaxf(fmaxf(a.x, a.y), fmaxf(a.z, a.w)));
    }
    for (int offset = 16; offset > 0; offset /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, offset));
    if (threadIdx.x % 32 == 0) atomicMax(reinterpret_cast<int*>(out), __float_as_int(m));
}

// A block a row.
extern "C" __global__ void row_max(const float4* __restrict__ x, float* __restrict__ out, int packs) {
    block_max<int>(x + (long long)blockIdx.x * packs, threadIdx.x, packs, out + blockIdx.x);
}

// The logits as one array, an equal span a block.
extern "C" __global__ void grid_max(const float4* __restrict__ x, float* __restrict__ out, long long packs) {
    const long long per_block = (packs + gridDim.x - 1) / gridDim.x;
    const long long begin = blockIdx.x * per_block, end = min(packs, begin + per_block);
    block_max<long long>(x, begin + threadIdx.x, end, out);
}
"""
GRID_BLOCKS_PER_SM = (1, 2, 4, 8)


def measure(shape: str, module, torch) -> str:
    cp = cuda.cp
    rows, cols = (int(n) for n in shape.split("x"))
    if cols % 4:
        sys.exit(f"{shape}: COLS must be a multiple of 4 (16-byte loads)")
    x = cp.random.default_rng(0).standard_normal((rows, cols), dtype=cp.float32)
    buffers = harness.rotation_buffers(x.nbytes, 16)
    xs = [cp.roll(x, i, axis=1) for i in range(buffers)]
    ys = [cp.empty_like(x) for _ in range(buffers)]
    out = cp.zeros(rows, cp.float32)
    row_max, grid_max = module.get_function("row_max"), module.get_function("grid_max")
    sms = cuda.device_info()["multiprocessors"]
    runs = {"copy": (lambda i: cp.copyto(ys[i], xs[i]), devicetime.COPY)}
    if torch is not None:
        txs = [torch.from_dlpack(x) for x in xs]
        runs["torch.amax"] = (lambda i: torch.amax(txs[i], dim=1), devicetime.KERNELS)
    for block in (128, 256, 512, 1024):
        runs[f"row_max b{block}"] = (
            lambda i, b=block: row_max((rows,), (b,), (xs[i], out, np.int32(cols // 4))),
            devicetime.KERNELS,
        )
    for per_sm in GRID_BLOCKS_PER_SM:
        runs[f"grid_max {per_sm}x{sms}"] = (
            lambda i, g=per_sm * sms: grid_max((g,), (512,), (xs[i], out, np.int64(x.size // 4))),
            devicetime.KERNELS,
        )
    times = {}
    for name, (run, categories) in runs.items():
        events = harness.median_us(run, buffers)
        device = harness.device_us(run, buffers, events, categories)
        times[name] = device if device else events  # device time; event time where torch is missing
    clock = "device time" if torch is not None else "event time"
    floor = times.pop("copy") / 2
    cells = [f"{shape} ({clock}): floor {floor:.2f} µs (half the copy)"]
    cells += [f"{name} {us:.1f} µs ({100 * floor / us:.0f} %)" for name, us in times.items()]
    return " | ".join(cells)


def main() -> None:
    module = cuda.cp.RawModule(code=KERNELS)
    torch = peers.torch_module()
    for shape in sys.argv[1:]:
        print(measure(shape, module, torch), flush=True)
        cuda.cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()

"""What a one-launch kernel can reach on few long rows (run on a GPU machine): the device time of copies that move
the data as `fast` does, beside `fast` and the plain copy, each as % of the copy timed in the same run.

- held copy: each block holds its slice of a row in registers (every load issued before any store, as fast_row's
  slices do), without and with a wait for the row's other slices between the loads and the stores (exchange_row's
  protocol: a release count, an acquire spin; no states read). No softmax that reads x once, holding its row on
  chip while the row's (m, d) is merged, can beat the held copy with the wait.
- streamed copy: fast_stream's data movement for rows too long to hold (three 512-thread blocks an SM, part of
  each chunk held in shared memory, the rest read again back to front after the wait).

    PYTHONPATH=. python scripts/long_row_floor.py float32:1x1048576 float32:4x1048576 bfloat16:1x1048576 ...
"""

import itertools
import sys

import numpy as np

import explorer
from explorer import devicetime, harness, peers
from explorer.backends import cuda
from explorer.fast_launch import SPLIT_BLOCK, SPLIT_BLOCKS_PER_SM
from explorer.geometry import ITEMSIZE
from explorer.numerics import DTYPES
from scripts.profile_fast import parse_case

THREADS = 256
PACKS = (4, 8, 16, 32)  # 16-byte packs a thread holds (the instantiations)
KERNELS = r"""
// After a block's loads (`any`: their sum, so they land first and are not dropped), with `wait` count the block on
// its row's counter (release) and wait until all `parts` blocks of the row in this launch (`epoch`, from 1) have
// (acquire).
__device__ void wait_for_row(unsigned* counters, long long row, int parts, unsigned epoch, float any, bool wait) {
    if (__syncthreads_or(any != any) && threadIdx.x == 0) counters[gridDim.x / parts] = 1u;  // (never: inputs are finite)
    if (wait && threadIdx.x == 0) {
        unsigned* counter = counters + row;
        asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(counter) : "memory");
        unsigned seen;
        do {
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(counter) : "memory");
        } while (seen < epoch * (unsigned)parts);
    }
    __syncthreads();
}

// Block b copies slice b % slices of row b / slices (16-byte packs [begin, end)), PER packs a thread held in
// registers; with WAIT, after its loads have landed the block counts itself on its row's counter (release) and
// waits until all `slices` of this launch (`epoch`, from 1) have (acquire) before it stores.
template <int PER, bool WAIT>
__global__ void __launch_bounds__(HELD_BLOCK) held_copy(const float4* __restrict__ x, float4* __restrict__ y,
                                                 unsigned* __restrict__ counters, long long row_packs, int slices,
                                                 unsigned epoch) {
    const long long row = blockIdx.x / slices;
    const long long chunk = (row_packs + slices - 1) / slices, begin = row * row_packs + (blockIdx.x % slices) * chunk;
    const long long end = min((row + 1) * row_packs, begin + chunk);
    float4 v[PER];
#pragma unroll
    for (int k = 0; k < PER; ++k) {
        const long long p = begin + k * blockDim.x + threadIdx.x;
        if (p < end) v[k] = x[p];
    }
    if constexpr (WAIT) {
        float any = 0.0f;
#pragma unroll
        for (int k = 0; k < PER; ++k) any += v[k].x;
        wait_for_row(counters, row, slices, epoch, any, true);
    }
#pragma unroll
    for (int k = 0; k < PER; ++k) {
        const long long p = begin + k * blockDim.x + threadIdx.x;
        if (p < end) y[p] = v[k];
    }
}

// fast_stream's data movement without its arithmetic, for rows too long to hold: block b reads chunk b % chunks of
// row b / chunks front to back, its first `held` batches (512 threads x 4 packs) by cp.async into shared memory
// (evict-first), the rest with plain loads left in L2; with WAIT it then waits for the row's other chunks as
// held_copy does; then it reads the rest again back to front and stores it (evict-first), and stores its held
// batches from shared memory.
template <bool WAIT>
__global__ void __launch_bounds__(STREAM_BLOCK, STREAM_BLOCKS_PER_SM) streamed_copy(const float4* __restrict__ x, float4* __restrict__ y,
                                                        unsigned* __restrict__ counters, long long row_packs,
                                                        int chunks, unsigned epoch, int held) {
    extern __shared__ float4 kept[];
    const long long row = blockIdx.x / chunks;
    const long long chunk = (row_packs + chunks - 1) / chunks, begin = row * row_packs + (blockIdx.x % chunks) * chunk;
    const long long end = min((row + 1) * row_packs, begin + chunk), batch = 4 * blockDim.x;
    const long long held_end = min(end, begin + held * batch);
    unsigned long long evict_first;
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(evict_first));
    for (long long p = begin + threadIdx.x; p < held_end; p += blockDim.x) {
        const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(kept + (p - begin)));
        asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n" ::"r"(to), "l"(x + p), "l"(evict_first));
    }
    asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
    float any = 0.0f;
    for (long long base = held_end + threadIdx.x; base < end; base += batch) {
        float4 v[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) if (base + k * blockDim.x < end) v[k] = x[base + k * blockDim.x];
#pragma unroll
        for (int k = 0; k < 4; ++k) if (base + k * blockDim.x < end) any += v[k].x;
    }
    wait_for_row(counters, row, chunks, epoch, any, WAIT);
    if (end > held_end) {
        for (long long first = held_end + (end - held_end - 1) / batch * batch; first >= held_end; first -= batch) {
            const long long base = first + threadIdx.x;
            float4 v[4];
#pragma unroll
            for (int k = 0; k < 4; ++k) if (base + k * blockDim.x < end) v[k] = __ldcs(x + base + k * blockDim.x);
#pragma unroll
            for (int k = 0; k < 4; ++k) if (base + k * blockDim.x < end) __stcs(y + base + k * blockDim.x, v[k]);
        }
    }
    for (long long p = begin + threadIdx.x; p < held_end; p += blockDim.x) __stcs(y + p, kept[p - begin]);
}
"""
STREAM_HELD = (0, 2)  # batches a streamed_copy block holds (fast_stream holds 64 KB: two)
STREAM_BATCH_BYTES = SPLIT_BLOCK * 4 * 16  # a batch: four 16-byte packs a thread


def measure(case: str, module, torch) -> str:
    cp = cuda.cp
    dtype, rows, cols, launch = parse_case(case)
    row_packs = cols * ITEMSIZE[dtype] // 16
    x = cuda.to_device(np.random.default_rng(0).standard_normal((rows, cols), np.float32).astype(DTYPES[dtype]))
    buffers = harness.rotation_buffers(x.nbytes, 16)
    xs = [cp.roll(x, i, axis=1) for i in range(buffers)]
    ys = [cp.empty_like(x) for _ in range(buffers)]
    sms = cuda.device_info()["multiprocessors"]
    variant = explorer.VARIANTS["fast"]
    runs = {
        "copy": (lambda i: cp.copyto(ys[i], xs[i]), devicetime.COPY),
        f"fast ({launch.describe()})": (
            lambda i: cuda.launch(variant, launch, xs[i], ys[i], rows, cols, dtype, "float32"),
            devicetime.KERNELS,
        ),
    }
    counters = []  # each geometry's: a row's count, then a flag

    def counted(kernel, grid: int, block: int, blocks_per_row: int, extra=(), shared_mem: int = 0):
        """A launch of a copy that counts its blocks on a fresh counter a row: launch n waits for n · blocks_per_row."""
        count = cp.zeros(rows + 1, cp.uint32)
        counters.append(count)
        epochs = itertools.count(1)
        return (
            lambda i: kernel(
                (grid,),
                (block,),
                (xs[i], ys[i], count, np.int64(row_packs), np.int32(blocks_per_row), np.uint32(next(epochs)), *extra),
                shared_mem=shared_mem,
            ),
            devicetime.KERNELS,
        )

    for per_sm, wait in itertools.product((1, 2, 4), (False, True)):
        slices = max(1, per_sm * sms // rows)
        per = next((p for p in PACKS if p * THREADS * slices >= row_packs), None)
        if per is None or per * per_sm > max(PACKS):  # too long to hold, or more registers than per_sm blocks leave
            continue
        kernel = module.get_function(f"held_copy<{per}, {str(wait).lower()}>")
        runs[f"held copy {slices} slices a row{', wait' if wait else ''}"] = counted(
            kernel, rows * slices, THREADS, slices
        )
    chunks = max(1, SPLIT_BLOCKS_PER_SM * sms // rows)
    for held, wait in itertools.product(STREAM_HELD, (False, True)):
        kernel = module.get_function(f"streamed_copy<{str(wait).lower()}>")
        kernel.max_dynamic_shared_size_bytes = held * STREAM_BATCH_BYTES
        runs[f"streamed copy {chunks} chunks a row, {held} batches held{', wait' if wait else ''}"] = counted(
            kernel, rows * chunks, SPLIT_BLOCK, chunks, (np.int32(held),), held * STREAM_BATCH_BYTES
        )
    times = {}
    for name, (run, categories) in runs.items():
        events = harness.median_us(run, buffers)
        device = harness.device_us(run, buffers, events, categories)
        times[name] = device if device else events
    if any(int(count[rows].get()) for count in counters):
        sys.exit("a copy saw a NaN: its loads were not all used")
    clock = "device time" if torch is not None else "event time"
    copy = times.pop("copy")
    return "\n".join(
        [f"{case} ({clock}): copy {copy:.2f} µs"]
        + [f"  {name}: {us:.2f} µs ({100 * copy / us:.1f} %)" for name, us in times.items()]
    )


def main() -> None:
    names = [f"held_copy<{p}, {str(w).lower()}>" for p in PACKS for w in (False, True)]
    names += [f"streamed_copy<{str(w).lower()}>" for w in (False, True)]
    geometry = (
        f"-DHELD_BLOCK={THREADS}",
        f"-DSTREAM_BLOCK={SPLIT_BLOCK}",
        f"-DSTREAM_BLOCKS_PER_SM={SPLIT_BLOCKS_PER_SM}",
    )
    module = cuda.cp.RawModule(code=KERNELS, options=("-std=c++17", *geometry), name_expressions=names)
    torch = peers.torch_module()
    for case in sys.argv[1:]:
        print(measure(case, module, torch), flush=True)
        cuda.cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()

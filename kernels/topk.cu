// Softmax + top-k: the k largest probabilities of each row and their indices.
//
// | kernel         | idea                                                                  | global reads / writes per element |
// |----------------|-----------------------------------------------------------------------|-----------------------------------|
// | topk_partial   | one pass: online (m, d) AND a running top-K per thread, merged        | 1 / 0 (+ k per row)               |
// | topk_finish    | several blocks per row (latency, batch 1): merge the chunks' states   | 0 / 0 (+ k per row)               |
//
// Fused (Milakov & Gimelshein 2018): SOFTMAX=true reads the logits once, keeps (m, d) with
// fast_split_partial's arithmetic and a sorted top-K of (value, index) in registers, merges both
// across lanes, warps and (for batch 1) blocks, and writes k probabilities e^{v - m} / d and indices.
// Unfused (topk_unfused in the registry): `fast` softmax (read x, write y), then this kernel with
// SOFTMAX=false selecting the top-K of y (read y again): 3 passes over the row instead of 1.
// Order: larger value first, ties to the lower index; NaN never enters a list. K is a power of
// two >= k (the API's k), fixed at compile time so the lists live in registers.
#include "fast_common.cuh"

#define NO_INDEX 0x7fffffff

__device__ __forceinline__ bool better(float v1, int i1, float v2, int i2) {
    return v1 > v2 || (v1 == v2 && i1 < i2);
}

// Insert (v, i) into a sorted list of K (descending): bubble it down, all indices static.
template <int K> __device__ __forceinline__ void insert(float (&tv)[K], int (&ti)[K], float v, int i) {
    if (!better(v, i, tv[K - 1], ti[K - 1])) return;
#pragma unroll
    for (int s = 0; s < K; ++s) {
        if (better(v, i, tv[s], ti[s])) {
            const float sv = tv[s];
            const int si = ti[s];
            tv[s] = v; ti[s] = i; v = sv; i = si;
        }
    }
}

// Butterfly over the warp. At each level a lane keeps max(own[j], partner[K-1-j]): a descending
// list against an ascending one, so the K kept are the top K of both, in a bitonic order; a bitonic
// merge network then sorts them. Reading the partner in place is safe: it only ever replaced an
// entry by the larger of that entry and ours, and max is idempotent. No list copy: K stays in registers.
template <int K> __device__ __forceinline__ void warp_merge_lists(float (&tv)[K], int (&ti)[K]) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
#pragma unroll
        for (int j = 0; j < K; ++j) {
            const float pv = __shfl_xor_sync(0xffffffffu, tv[K - 1 - j], offset);
            const int pi = __shfl_xor_sync(0xffffffffu, ti[K - 1 - j], offset);
            if (better(pv, pi, tv[j], ti[j])) { tv[j] = pv; ti[j] = pi; }
        }
#pragma unroll
        for (int h = K / 2; h > 0; h >>= 1) {
#pragma unroll
            for (int j = 0; j < K; ++j) {
                if ((j & h) == 0 && better(tv[j + h], ti[j + h], tv[j], ti[j])) {
                    const float sv = tv[j];
                    const int si = ti[j];
                    tv[j] = tv[j + h]; ti[j] = ti[j + h]; tv[j + h] = sv; ti[j + h] = si;
                }
            }
        }
    }
}

// Merge a block's lists through shared memory (each warp's list, then warp 0 merges the warps').
// Thread 0 returns with the block's list; every thread returns with the block's (m, d) if SOFTMAX.
template <int K, int SOFTMAX>
__device__ __forceinline__ State<float> block_merge_lists(float (&tv)[K], int (&ti)[K], State<float> s) {
    __shared__ float list_v[32][K];
    __shared__ int list_i[32][K];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    if (SOFTMAX) s = fast_block_merge(s);
    warp_merge_lists(tv, ti);
    if (lane == 0) {
#pragma unroll
        for (int j = 0; j < K; ++j) { list_v[warp][j] = tv[j]; list_i[warp][j] = ti[j]; }
    }
    __syncthreads();
    if (warp == 0) {
#pragma unroll
        for (int j = 0; j < K; ++j) {
            tv[j] = lane < warps ? list_v[lane][j] : NEG_INF;
            ti[j] = lane < warps ? list_i[lane][j] : NO_INDEX;
        }
        warp_merge_lists(tv, ti);
    }
    return s;
}

// Write the k entries of a row's list: probabilities (or, without SOFTMAX, the values themselves).
template <typename T, int K, int SOFTMAX>
__device__ __forceinline__ void write_topk(const float (&tv)[K], const int (&ti)[K], State<float> s, int k,
                                           T* values, int* indices) {
    const float m_log2e = __fmul_rn(s.m, LOG2E), inv_d = 1.0f / s.d;
#pragma unroll
    for (int j = 0; j < K; ++j) {
        if (j >= k) break;
        values[j] = from_float<T>(SOFTMAX ? __fmul_rn(exp_shifted(tv[j], m_log2e), inv_d) : tv[j]);
        indices[j] = ti[j];
    }
}

// Block c of a row folds chunk c exactly as fast_split_partial does, inserting every element into
// its thread's top-K on the way. With one chunk per row it writes the row's answer directly;
// otherwise it leaves the chunk's (m, d) and list for topk_finish.
template <typename T, typename Acc, int VEC, int PER, int K, int SOFTMAX>
__global__ void __launch_bounds__(K >= 32 ? 256 : 512) topk_partial(const T* __restrict__ x, T* __restrict__ values,
                                                    int* __restrict__ indices, float* __restrict__ partial,
                                                    int* __restrict__ partial_index, int rows, int cols, int chunks,
                                                    int k) {
    const long long row = blockIdx.x / chunks;
    const int c = blockIdx.x % chunks;
    const Pack<T, VEC>* xr = reinterpret_cast<const Pack<T, VEC>*>(x + row * cols);
    const int packs = cols / VEC;
    const int chunk = (packs + chunks - 1) / chunks;
    const int begin = c * chunk, end = min(packs, begin + chunk);
    float tv[K];
    int ti[K];
#pragma unroll
    for (int j = 0; j < K; ++j) { tv[j] = NEG_INF; ti[j] = NO_INDEX; }
    State<float> s = {NEG_INF, 0.0f};
    for (int base = begin; base < end; base += PER * blockDim.x) {
        float v[PER * VEC];
        bool valid[PER * VEC];
#pragma unroll
        for (int q = 0; q < PER; ++q) {
            const int p = base + q * blockDim.x + threadIdx.x;
            Pack<T, VEC> pack;
            if (p < end) pack = xr[p];
#pragma unroll
            for (int i = 0; i < VEC; ++i) {
                valid[q * VEC + i] = p < end;
                v[q * VEC + i] = p < end ? to_float(pack.v[i]) : 0.0f;
                if (p < end) insert(tv, ti, v[q * VEC + i], p * VEC + i);
            }
        }
        if (SOFTMAX) s = fast_merge(s, exps_in_place(v, valid));
    }
    s = block_merge_lists<K, SOFTMAX>(tv, ti, s);
    if (threadIdx.x != 0) return;
    if (chunks == 1) {
        write_topk<T, K, SOFTMAX>(tv, ti, s, k, values + row * k, indices + row * k);
        return;
    }
    float* state = partial + (long long)blockIdx.x * (2 + K);
    state[0] = s.m;
    state[1] = s.d;
#pragma unroll
    for (int j = 0; j < K; ++j) { state[2 + j] = tv[j]; partial_index[(long long)blockIdx.x * K + j] = ti[j]; }
}

// One warp per row merges its chunks: lane l folds chunks l, l+32, ... ((m, d) and lists), then a
// butterfly, as fast_split_finish does for (m, d).
template <typename T, typename Acc, int VEC, int PER, int K, int SOFTMAX>
__global__ void topk_finish(T* __restrict__ values, int* __restrict__ indices, const float* __restrict__ partial,
                            const int* __restrict__ partial_index, int rows, int chunks, int k) {
    const long long row = blockIdx.x;
    const int lane = threadIdx.x;
    float tv[K];
    int ti[K];
#pragma unroll
    for (int j = 0; j < K; ++j) { tv[j] = NEG_INF; ti[j] = NO_INDEX; }
    State<float> s = {NEG_INF, 0.0f};
    for (int c = lane; c < chunks; c += 32) {
        const float* state = partial + (row * chunks + c) * (2 + K);
        s = fast_merge(s, {state[0], state[1]});
#pragma unroll
        for (int j = 0; j < K; ++j) insert(tv, ti, state[2 + j], partial_index[(row * chunks + c) * K + j]);
    }
    s = group_merge<32>(s);
    warp_merge_lists(tv, ti);
    if (lane == 0) write_topk<T, K, SOFTMAX>(tv, ti, s, k, values + row * k, indices + row * k);
}

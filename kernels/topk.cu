// Softmax + top-k: the k largest probabilities of each row and their indices.
//
// | kernel | idea                                                                                | global reads / writes per element |
// |--------|-------------------------------------------------------------------------------------|-----------------------------------|
// | topk   | one pass: online (m, d) AND a running top-k per warp, merged; for few rows, several | 1 / 0 (+ k per row)               |
// |        | blocks per row, the last one to finish merging their states                         |                                   |
//
// Fused (Milakov & Gimelshein 2018): SOFTMAX=true reads the logits once, keeps (m, d) with
// fast_split_partial's arithmetic and a sorted top-k of (value, index) per warp, merges both across
// warps and (for batch 1) blocks, and writes k probabilities e^{v - m} / d and indices.
// Unfused (topk_unfused in the registry): `fast` softmax (read x, write y), then this kernel with
// SOFTMAX=false selecting the top-k of y (read y again): 3 passes over the row instead of 1.
//
// The list: K = 32·R entries (R = 1 for k <= 32, 2 for k <= 64) spread over the warp's lanes, entry
// r·32 + lane in register r of that lane, sorted descending. Its k-th value is a threshold: an element
// below it is beaten by k elements already seen, so most elements cost one compare, and a warp vote
// finds the few that may enter (about k·ln(n/k) of n for random logits); the whole warp takes them in
// (take_candidates). The per-thread register lists of the first version paid a K-step insertion,
// divergent across the warp, for almost every element.
#include "fast_common.cuh"

#define NO_VALUE __int_as_float(0x7fc00000)  // NaN, and with NO_INDEX the empty entry: worse than any element
#define NO_INDEX 0x7fffffff
#define ALL_LANES 0xffffffffu

// The order of the lists: larger value first, ties to the lower index, NaN below -inf (a row with
// a NaN has NaN probabilities, but its k indices are still the reference's).
__device__ __forceinline__ bool better(float v1, int i1, float v2, int i2) {
    const bool nan1 = v1 != v1, nan2 = v2 != v2;
    return v1 > v2 || ((v1 == v2 || (nan1 && nan2)) && i1 < i2) || (nan2 && !nan1);
}

// Insert (v, i), the same in every lane, into the warp's sorted list; the last entry falls off.
template <int R> __device__ __forceinline__ void list_insert(float (&lv)[R], int (&li)[R], float v, int i) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int r = R - 1; r >= 0; --r) {  // last register first: r reads register r - 1 unchanged
        float above_v = __shfl_up_sync(ALL_LANES, lv[r], 1);
        int above_i = __shfl_up_sync(ALL_LANES, li[r], 1);
        if (r > 0) {  // entry r·32 - 1 sits in lane 31 of register r - 1
            const float last_v = __shfl_sync(ALL_LANES, lv[r > 0 ? r - 1 : 0], 31);
            const int last_i = __shfl_sync(ALL_LANES, li[r > 0 ? r - 1 : 0], 31);
            if (lane == 0) { above_v = last_v; above_i = last_i; }
        }
        if ((r > 0 || lane > 0) && better(v, i, above_v, above_i)) { lv[r] = above_v; li[r] = above_i; }
        else if (better(v, i, lv[r], li[r])) { lv[r] = v; li[r] = i; }
    }
}

// Entry k - 1, in every lane: an element that is not better cannot enter.
template <int R> __device__ __forceinline__ void kth_entry(const float (&lv)[R], const int (&li)[R], int k, float& v, int& i) {
    v = __shfl_sync(ALL_LANES, k <= 32 ? lv[0] : lv[R - 1], (k - 1) % 32);
    i = __shfl_sync(ALL_LANES, k <= 32 ? li[0] : li[R - 1], (k - 1) % 32);
}

// One step of a bitonic network between lanes lane and lane ^ stride: the lower lane keeps the
// better entry of the pair in a descending run, the worse in an ascending one.
__device__ __forceinline__ void exchange_lanes(float& v, int& i, int stride, bool descending) {
    const float pv = __shfl_xor_sync(ALL_LANES, v, stride);
    const int pi = __shfl_xor_sync(ALL_LANES, i, stride);
    const bool lower = (threadIdx.x & stride) == 0;
    if (better(pv, pi, v, i) == (lower == descending)) { v = pv; i = pi; }
}

// The same step for entries e and e + 32 (R = 2): both sit in one lane, registers 0 and 1.
template <int R> __device__ __forceinline__ void exchange_registers(float (&lv)[R], int (&li)[R]) {
    if (better(lv[R - 1], li[R - 1], lv[0], li[0])) {
        const float v = lv[0];
        const int i = li[0];
        lv[0] = lv[R - 1]; li[0] = li[R - 1]; lv[R - 1] = v; li[R - 1] = i;
    }
}

// Sort 32 entries, one per lane, descending: a bitonic sort (runs of `size` lanes alternate direction).
__device__ __forceinline__ void sort_lanes(float& v, int& i) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int size = 2; size <= 32; size *= 2) {
#pragma unroll
        for (int stride = size / 2; stride > 0; stride /= 2) exchange_lanes(v, i, stride, (lane & size) == 0);
    }
}

// Keep the best 32·R of two sorted lists: entry e against the other's entry K-1-e leaves the top K
// in a bitonic order, then a bitonic merge sorts them.
template <int R> __device__ __forceinline__ void list_merge(float (&lv)[R], int (&li)[R], const float (&ov)[R],
                                                            const int (&oi)[R]) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int r = 0; r < R; ++r) {
        const float pv = __shfl_sync(ALL_LANES, ov[R - 1 - r], 31 - lane);
        const int pi = __shfl_sync(ALL_LANES, oi[R - 1 - r], 31 - lane);
        if (better(pv, pi, lv[r], li[r])) { lv[r] = pv; li[r] = pi; }
    }
    if (R == 2) exchange_registers(lv, li);
#pragma unroll
    for (int stride = 16; stride > 0; stride /= 2) {
#pragma unroll
        for (int r = 0; r < R; ++r) exchange_lanes(lv[r], li[r], stride, true);
    }
}

// Take into the list every element of a thread's batch that beats entry k - 1. Each lane offers its
// best remaining candidate; while many lanes offer, the 32 offers are sorted and merged into the list
// in one round (two bitonic networks, the same cost for 4 offers or 32: the first batches, where
// most elements enter); when few do (later batches, a candidate here and there), the first offer is
// inserted alone (one shuffle shift). Each entry raises entry k - 1, so candidates drop out.
template <int R, int N, int VEC>
__device__ __forceinline__ void take_candidates(const float (&v)[N], const bool (&valid)[N], int base, float (&lv)[R],
                                                int (&li)[R], int k, float& kth_v, int& kth_i) {
    constexpr int FEW = 3;  // offers up to which single insertions beat a round
    const int lane = threadIdx.x % 32;
    int index[N];
    unsigned left = 0;
#pragma unroll
    for (int q = 0; q < N; ++q) {
        index[q] = (base + (q / VEC) * blockDim.x + threadIdx.x) * VEC + q % VEC;
        if (valid[q] && better(v[q], index[q], kth_v, kth_i)) left |= 1u << q;
    }
    for (unsigned offering = __ballot_sync(ALL_LANES, left != 0); offering;
         offering = __ballot_sync(ALL_LANES, left != 0)) {
        float ov[R];
        int oi[R];
#pragma unroll
        for (int r = 0; r < R; ++r) { ov[r] = NO_VALUE; oi[r] = NO_INDEX; }
        unsigned offered = 0;
#pragma unroll
        for (int q = 0; q < N; ++q) {
            if ((left >> q & 1) && better(v[q], index[q], ov[0], oi[0])) { ov[0] = v[q]; oi[0] = index[q]; offered = 1u << q; }
        }
        if (__popc(offering) <= FEW) {
            const int from = __ffs(offering) - 1;
            if (lane == from) left &= ~offered;
            list_insert(lv, li, __shfl_sync(ALL_LANES, ov[0], from), __shfl_sync(ALL_LANES, oi[0], from));
        } else {
            left &= ~offered;
            sort_lanes(ov[0], oi[0]);
            list_merge(lv, li, ov, oi);
        }
        kth_entry(lv, li, k, kth_v, kth_i);
#pragma unroll
        for (int q = 0; q < N; ++q) {
            if (!better(v[q], index[q], kth_v, kth_i)) left &= ~(1u << q);
        }
    }
}

// Write the k entries of a row's list (warp 0): probabilities or, without SOFTMAX, the values.
template <typename T, int R, int SOFTMAX>
__device__ __forceinline__ void write_topk(const float (&lv)[R], const int (&li)[R], State<float> s, int k, T* values,
                                           int* indices) {
    const float inv_d = 1.0f / s.d;
#pragma unroll
    for (int r = 0; r < R; ++r) {
        const int e = r * 32 + threadIdx.x % 32;
        if (e < k) {
            values[e] = from_float<T>(SOFTMAX ? __fmul_rn(exp_shifted(lv[r], s.m), inv_d) : lv[r]);
            indices[e] = li[r];
        }
    }
}

// The last block of a row to finish merges the row's chunks (warp 0): lane l folds the (m, d) of
// chunks l, l+32, ..., then a butterfly, as fast_split_finish does; the chunks' sorted lists merge one
// after another. __ldcg reads them from L2, where the other blocks' writes are.
template <typename T, int K, int SOFTMAX>
__device__ __forceinline__ void merge_chunks(const float* row_partial, const int* row_index, int chunks, int k,
                                             T* values, int* indices) {
    constexpr int R = K / 32;
    const int lane = threadIdx.x % 32;
    State<float> s = {NEG_INF, 0.0f};
    for (int c = lane; c < chunks; c += 32)
        s = fast_merge(s, {__ldcg(row_partial + c * (2 + K)), __ldcg(row_partial + c * (2 + K) + 1)});
    s = group_merge<32>(s);
    float lv[R];
    int li[R];
#pragma unroll
    for (int r = 0; r < R; ++r) { lv[r] = NO_VALUE; li[r] = NO_INDEX; }
    for (int c = 0; c < chunks; ++c) {
        float ov[R];
        int oi[R];
#pragma unroll
        for (int r = 0; r < R; ++r) {
            ov[r] = __ldcg(row_partial + c * (2 + K) + 2 + r * 32 + lane);
            oi[r] = __ldcg(row_index + c * K + r * 32 + lane);
        }
        list_merge(lv, li, ov, oi);
    }
    write_topk<T, R, SOFTMAX>(lv, li, s, k, values, indices);
}

// Block c of a row folds chunk c exactly as fast_split_partial does, and each warp keeps the top-k
// of what its lanes read. The warps' lists merge in warp 0. With one chunk per row the block writes
// the row's answer; with several (few rows: latency) it leaves the chunk's (m, d) and sorted list,
// and the row's last block to arrive (a counter per row, back to 0 after) merges them: one launch.
template <typename T, typename Acc, int VEC, int PER, int K, int SOFTMAX>
__global__ void __launch_bounds__(512) topk(const T* __restrict__ x, T* __restrict__ values, int* __restrict__ indices,
                                            float* __restrict__ partial, int* __restrict__ partial_index,
                                            unsigned* __restrict__ arrivals, int rows, int cols, int chunks, int k) {
    constexpr int R = K / 32, N = PER * VEC;
    __shared__ float warp_v[16][K];
    __shared__ int warp_i[16][K];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const long long row = blockIdx.x / chunks;
    const int c = blockIdx.x % chunks;
    const Pack<T, VEC>* xr = reinterpret_cast<const Pack<T, VEC>*>(x + row * cols);
    const int packs = cols / VEC;
    const int chunk = (packs + chunks - 1) / chunks;
    const int begin = c * chunk, end = min(packs, begin + chunk);
    float lv[R];
    int li[R];
#pragma unroll
    for (int r = 0; r < R; ++r) { lv[r] = NO_VALUE; li[r] = NO_INDEX; }
    float kth_v = NO_VALUE;  // the list's entry k - 1
    int kth_i = NO_INDEX;
    State<float> s = {NEG_INF, 0.0f};
    const int step = PER * blockDim.x;
    float v[N], next[N];
    bool valid[N], next_valid[N];
    load_packs<T, VEC, PER>(xr, begin + threadIdx.x, blockDim.x, end, next, next_valid);
    for (int base = begin; base < end; base += step) {
#pragma unroll
        for (int q = 0; q < N; ++q) { v[q] = next[q]; valid[q] = next_valid[q]; }
        // the next batch's loads fly while this one is worked on
        // (measured on the H200: 16-29 % less time at k = 8, batch 512-4096)
        load_packs<T, VEC, PER>(xr, base + step + threadIdx.x, blockDim.x, end, next, next_valid);
        float most = NEG_INF;
#pragma unroll
        for (int q = 0; q < N; ++q) if (valid[q]) most = fmaxf(most, v[q]);
        if (__any_sync(ALL_LANES, !(most < kth_v)))  // rare once the list holds large values (kth_v NaN: not full)
            take_candidates<R, N, VEC>(v, valid, base, lv, li, k, kth_v, kth_i);
        if (SOFTMAX) s = fast_merge(s, exps_in_place(v, valid));
    }
    if (SOFTMAX) s = fast_block_merge(s);
#pragma unroll
    for (int r = 0; r < R; ++r) { warp_v[warp][r * 32 + lane] = lv[r]; warp_i[warp][r * 32 + lane] = li[r]; }
    __syncthreads();
    if (warp != 0) return;
    for (int w = 1; w < blockDim.x / 32; ++w) {
        float ov[R];
        int oi[R];
#pragma unroll
        for (int r = 0; r < R; ++r) { ov[r] = warp_v[w][r * 32 + lane]; oi[r] = warp_i[w][r * 32 + lane]; }
        list_merge(lv, li, ov, oi);
    }
    if (chunks == 1) {
        write_topk<T, R, SOFTMAX>(lv, li, s, k, values + row * k, indices + row * k);
        return;
    }
    float* state = partial + (long long)blockIdx.x * (2 + K);
    if (lane == 0) { state[0] = s.m; state[1] = s.d; }
#pragma unroll
    for (int r = 0; r < R; ++r) { state[2 + r * 32 + lane] = lv[r]; partial_index[(long long)blockIdx.x * K + r * 32 + lane] = li[r]; }
    __threadfence();  // this chunk's state is visible before the counter says so...
    __syncwarp();     // ...every lane's part of it, not only lane 0's
    unsigned arrived = 0;
    if (lane == 0) arrived = atomicAdd(arrivals + row, 1u);
    if (__shfl_sync(ALL_LANES, arrived, 0) != chunks - 1) return;
    __threadfence();
    merge_chunks<T, K, SOFTMAX>(partial + row * chunks * (2 + K), partial_index + row * chunks * K, chunks, k,
                                values + row * k, indices + row * k);
    if (lane == 0) arrivals[row] = 0;  // ready for the next launch
}

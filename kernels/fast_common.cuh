// Helpers of the fast kernels (fast.cu) and of the fused softmax + top-k (topk.cu): 16-byte packs,
// the cheap exp2-based exponential and (m, d) merge, and the register-cached per-thread state.
#pragma once
#include "common.cuh"

#define LOG2E 1.4426950408889634f

template <typename T, int VEC> struct alignas(sizeof(T) * VEC) Pack { T v[VEC]; };

// Packs first, first + stride, ... (PER of them, those below end) of a row as floats, 16 bytes per
// load; valid marks the elements loaded (the others read as 0 and must be skipped).
template <typename T, int VEC, int PER>
__device__ __forceinline__ void load_packs(const Pack<T, VEC>* row, int first, int stride, int end,
                                           float (&v)[PER * VEC], bool (&valid)[PER * VEC]) {
#pragma unroll
    for (int k = 0; k < PER; ++k) {
        const int p = first + k * stride;
        Pack<T, VEC> pack;
        if (p < end) pack = row[p];
#pragma unroll
        for (int i = 0; i < VEC; ++i) { valid[k * VEC + i] = p < end; v[k * VEC + i] = p < end ? to_float(pack.v[i]) : 0.0f; }
    }
}

// e^{x - m} as 2^{x·log2e - m·log2e}: one FMA and one MUFU.EX2 instead of expf's ~10 instructions.
__device__ __forceinline__ float exp_shifted(float x, float m_log2e) { return exp2f(fmaf(x, LOG2E, -m_log2e)); }

// e^{m_from - m_to} the same way; equal maxima (-inf == -inf included) give exactly 1.
__device__ __forceinline__ float fast_rescale(float m_from, float m_to) {
    return m_from == m_to ? 1.0f : exp2f(__fmul_rn(__fsub_rn(m_from, m_to), LOG2E));
}

// The (m, d) merge of common.cuh with the cheap exponential: ~15 instructions, not ~60.
__device__ __forceinline__ State<float> fast_merge(State<float> a, State<float> b) {
    const float m = acc_max(a.m, b.m);
    return {m, __fadd_rn(__fmul_rn(a.d, fast_rescale(a.m, m)), __fmul_rn(b.d, fast_rescale(b.m, m)))};
}

// Butterfly over groups of LANES consecutive lanes (a power of two <= 32); all lanes take part.
template <int LANES> __device__ __forceinline__ State<float> group_merge(State<float> s) {
#pragma unroll
    for (int offset = LANES / 2; offset > 0; offset >>= 1)
        s = fast_merge(s, {__shfl_xor_sync(0xffffffffu, s.m, offset), __shfl_xor_sync(0xffffffffu, s.d, offset)});
    return s;
}

// group_merge<32> per warp, then warp 0 merges the warps' states; every thread gets the block's.
__device__ __forceinline__ State<float> fast_block_merge(State<float> s) {
    __shared__ float shared_m[32], shared_d[32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    s = group_merge<32>(s);
    if (lane == 0) { shared_m[warp] = s.m; shared_d[warp] = s.d; }
    __syncthreads();
    if (warp == 0) {
        State<float> w = lane < warps ? State<float>{shared_m[lane], shared_d[lane]} : State<float>{NEG_INF, 0.0f};
        w = group_merge<32>(w);
        if (lane == 0) { shared_m[0] = w.m; shared_d[0] = w.d; }
    }
    __syncthreads();
    const State<float> row = {shared_m[0], shared_d[0]};
    __syncthreads();  // a persistent block reuses shared_m for its next row
    return row;
}

// A thread's state over the elements it holds in registers: max first (registers are free to
// read twice), then e_i = e^{x_i - m} in place and their sum, so each element costs ONE exp.
// As in online_step, a -inf element adds exactly 0 and a NaN makes d NaN.
template <int N> __device__ __forceinline__ State<float> exps_in_place(float (&v)[N], const bool (&valid)[N]) {
    float m = NEG_INF;
#pragma unroll
    for (int i = 0; i < N; ++i) if (valid[i]) m = fmaxf(m, v[i]);
    const float m_log2e = __fmul_rn(m, LOG2E);
    float d = 0.0f;
#pragma unroll
    for (int i = 0; i < N; ++i) {
        v[i] = valid[i] && v[i] != NEG_INF ? exp_shifted(v[i], m_log2e) : 0.0f;
        d = __fadd_rn(d, v[i]);
    }
    return {m, d};
}

// y_i = e_i · (e^{m_thread - m_row} / d_row): the thread's exps rescaled once, no second exp.
template <typename T, int VEC> __device__ __forceinline__ Pack<T, VEC> scaled(const float* e, float c) {
    Pack<T, VEC> out;
#pragma unroll
    for (int i = 0; i < VEC; ++i) out.v[i] = from_float<T>(__fmul_rn(e[i], c));
    return out;
}


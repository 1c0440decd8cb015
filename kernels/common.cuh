// Shared device helpers for every softmax kernel in this folder.
//
// The accumulator model (mirrored operation for operation by explorer/backends/emulator.py):
//   * an element x enters the running state as to_acc(x);
//   * every accumulator operation (max, *, +, exp) is done in fp32 and rounded once to Acc,
//     with __fmul_rn/__fadd_rn so the compiler cannot fuse a*b+c into one fma;
//   * exp(a - b) subtracts in fp32 and calls expf (not __expf), then rounds to Acc;
//   * the normalising pass computes expf(to_acc(x) - m) / d in fp32 and rounds once to T.
// Non-finite inputs behave like the float64 reference: a NaN or +inf in a row makes the row NaN,
// -inf entries give exactly 0, an all -inf row gives NaN.
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#define NEG_INF __int_as_float(0xff800000)

template <typename T> __device__ __forceinline__ float to_float(T v);
template <> __device__ __forceinline__ float to_float<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_float<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

// Round-to-nearest-even from fp32, as numpy's astype and ml_dtypes do.
template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

template <typename Acc> __device__ __forceinline__ Acc acc_mul(Acc a, Acc b) {
    return from_float<Acc>(__fmul_rn(to_float(a), to_float(b)));
}
template <typename Acc> __device__ __forceinline__ Acc acc_add(Acc a, Acc b) {
    return from_float<Acc>(__fadd_rn(to_float(a), to_float(b)));
}
// max that ignores a NaN candidate (NaN reaches d instead, through exp(NaN - m) = NaN) and
// prefers +0 to -0, so that acc_max(a, b) and acc_max(b, a) agree bit for bit.
template <typename Acc> __device__ __forceinline__ Acc acc_max(Acc a, Acc b) {
    const float fa = to_float(a), fb = to_float(b);
    return fb > fa || (fb == fa && signbit(fa)) ? b : a;
}
template <typename Acc> __device__ __forceinline__ Acc acc_exp_diff(Acc a, Acc b) {
    return from_float<Acc>(expf(__fsub_rn(to_float(a), to_float(b))));
}

// The running softmax state: max m and denominator d = sum exp(x_i - m), both kept in Acc.
template <typename Acc> struct State { Acc m; Acc d; };

template <typename Acc> __device__ __forceinline__ State<Acc> empty_state() {
    return {from_float<Acc>(NEG_INF), from_float<Acc>(0.0f)};
}

// e^{m_from - m_to}, with equal maxima (including -inf == -inf) giving exactly 1.
template <typename Acc> __device__ __forceinline__ Acc rescale(Acc m_from, Acc m_to) {
    return to_float(m_from) == to_float(m_to) ? from_float<Acc>(1.0f) : acc_exp_diff(m_from, m_to);
}

// One online step: m_j = max(m_{j-1}, x_j), d_j = d_{j-1} * e^{m_{j-1} - m_j} + e^{x_j - m_j}.
// A -inf element adds exactly 0 (exp(-inf - -inf) would be NaN for a row that starts masked).
template <typename Acc> __device__ __forceinline__ State<Acc> online_step(State<Acc> s, Acc x) {
    Acc m = acc_max(s.m, x);
    Acc term = to_float(x) == NEG_INF ? from_float<Acc>(0.0f) : acc_exp_diff(x, m);
    return {m, acc_add(acc_mul(s.d, rescale(s.m, m)), term)};
}

// Merge two partial states: the same rule, applied to a whole partial sum at once.
// Symmetric bit for bit (no fma), so both lanes of a butterfly hold the same result.
template <typename Acc> __device__ __forceinline__ State<Acc> merge(State<Acc> a, State<Acc> b) {
    Acc m = acc_max(a.m, b.m);
    return {m, acc_add(acc_mul(a.d, rescale(a.m, m)), acc_mul(b.d, rescale(b.m, m)))};
}

// y = e^{x - m} / d in fp32, rounded once to the output type. x is rounded to Acc first, as it
// was when it entered the state: otherwise x - m could be > 0 (even overflow) for a coarse Acc.
template <typename T, typename Acc> __device__ __forceinline__ T normalise(T x, State<Acc> s) {
    const float xa = to_float(from_float<Acc>(to_float(x)));
    return from_float<T>(__fdiv_rn(expf(__fsub_rn(xa, to_float(s.m))), to_float(s.d)));
}

// Trace buffers for one row (all null in an untraced launch, which never touches them).
//   steps:  [threads_on_row][steps_per_thread] of (m, d, element index), index -1 = no element
//   merges: [levels of 31 butterfly nodes] of (m, d); node (offset o, lane l < o) sits at
//           level_base + 32 - 2*o + l and holds merge(lane l, lane l + o).
struct Trace {
    long long row;
    float* step_m;
    float* step_d;
    int* step_index;
    float* merge_m;
    float* merge_d;
};

// The trailing parameters of every traced kernel, and the Trace they make.
#define TRACE_ARGS long long trace_row, float* step_m, float* step_d, int* step_index, float* merge_m, float* merge_d
#define MAKE_TRACE Trace trace = {trace_row, step_m, step_d, step_index, merge_m, merge_d}

template <typename Acc> __device__ __forceinline__ void record_step(
    const Trace& t, long long slot, State<Acc> s, int index) {
    t.step_m[slot] = to_float(s.m);
    t.step_d[slot] = to_float(s.d);
    t.step_index[slot] = index;
}

// Butterfly merge of the 32 lanes' states; every lane ends with the warp's state.
// States travel through the shuffle as fp32, which holds every fp16/bf16 value exactly.
template <typename Acc, bool TRACE> __device__ __forceinline__ State<Acc> warp_merge(
    State<Acc> s, int lane, bool record, const Trace& t, int level_base) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        State<Acc> other = {from_float<Acc>(__shfl_xor_sync(0xffffffffu, to_float(s.m), offset)),
                            from_float<Acc>(__shfl_xor_sync(0xffffffffu, to_float(s.d), offset))};
        s = merge(s, other);
        if (TRACE && record && lane < offset) {
            int node = level_base + 32 - 2 * offset + lane;
            t.merge_m[node] = to_float(s.m);
            t.merge_d[node] = to_float(s.d);
        }
    }
    return s;
}

// Block-wide merge: each warp merges its lanes, then warp 0 merges the warps' states through
// shared memory. Every thread returns the row's state. blockDim.x is a multiple of 32, <= 1024.
template <typename Acc, bool TRACE> __device__ __forceinline__ State<Acc> block_merge(
    State<Acc> s, bool record, const Trace& t) {
    __shared__ float shared_m[32], shared_d[32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    s = warp_merge<Acc, TRACE>(s, lane, record, t, warp * 31);
    if (lane == 0) { shared_m[warp] = to_float(s.m); shared_d[warp] = to_float(s.d); }
    __syncthreads();
    if (warp == 0) {
        State<Acc> w = lane < warps ? State<Acc>{from_float<Acc>(shared_m[lane]), from_float<Acc>(shared_d[lane])}
                                    : empty_state<Acc>();
        w = warp_merge<Acc, TRACE>(w, lane, record, t, warps * 31);
        if (lane == 0) { shared_m[0] = to_float(w.m); shared_d[0] = to_float(w.d); }
    }
    __syncthreads();
    State<Acc> row = {from_float<Acc>(shared_m[0]), from_float<Acc>(shared_d[0])};
    __syncthreads();  // shared_m may be reused by a later call in the same kernel
    return row;
}

// Block-wide reductions for the safe (non-online) block kernel, in Acc.
template <typename Acc> __device__ __forceinline__ Acc block_reduce_max(Acc v) {
    __shared__ float shared[32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = acc_max(v, from_float<Acc>(__shfl_xor_sync(0xffffffffu, to_float(v), o)));
    if (lane == 0) shared[warp] = to_float(v);
    __syncthreads();
    if (warp == 0) {
        Acc w = lane < warps ? from_float<Acc>(shared[lane]) : from_float<Acc>(NEG_INF);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) w = acc_max(w, from_float<Acc>(__shfl_xor_sync(0xffffffffu, to_float(w), o)));
        if (lane == 0) shared[0] = to_float(w);
    }
    __syncthreads();
    Acc result = from_float<Acc>(shared[0]);
    __syncthreads();
    return result;
}

// The sum of the warp's v, in every lane: a butterfly (each pair adds the same two numbers, so every lane
// gets the same sum).
template <typename Acc> __device__ __forceinline__ Acc warp_sum(Acc v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = acc_add(v, from_float<Acc>(__shfl_xor_sync(0xffffffffu, to_float(v), o)));
    return v;
}

template <typename Acc> __device__ __forceinline__ Acc block_reduce_sum(Acc v) {
    __shared__ float shared[32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    v = warp_sum(v);
    if (lane == 0) shared[warp] = to_float(v);
    __syncthreads();
    if (warp == 0) {
        const Acc w = warp_sum(lane < warps ? from_float<Acc>(shared[lane]) : from_float<Acc>(0.0f));
        if (lane == 0) shared[0] = to_float(w);
    }
    __syncthreads();
    Acc result = from_float<Acc>(shared[0]);
    __syncthreads();
    return result;
}

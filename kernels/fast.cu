// The fastest softmax kernels we could write, and the split-row kernels for very long rows.
//
// | kernel          | idea                                                            | global reads / writes per element |
// |-----------------|-----------------------------------------------------------------|-----------------------------------|
// | fast_warp       | warp per row, row cached in registers, 16-byte vector loads     | 1 / 1                             |
// | fast_block      | block (or Hopper cluster of up to 8 blocks) per row, registers  | 1 / 1                             |
// | split_partial   | several blocks per row each fold a chunk into (m, d)            | 1 / 0 (+ 2 floats per chunk)      |
// | split_finish    | merge the row's chunk states, normalise the chunk               | 1 / 1                             |
//
// `fast` (the variant) picks one of them from the shape; see explorer/registry.py.
// fast_* accumulate in fp32 only (Acc must be float). All kernels are templated like softmax.cu.
#include "common.cuh"

#define LOG2E 1.4426950408889634f

template <typename T, int VEC> struct alignas(sizeof(T) * VEC) Pack { T v[VEC]; };

// e^{x - m} as 2^{x·log2e - m·log2e}: one FMA and one MUFU.EX2 instead of expf's ~10 instructions.
__device__ __forceinline__ float exp_shifted(float x, float m_log2e) { return exp2f(fmaf(x, LOG2E, -m_log2e)); }

// A thread's state over the elements it holds in registers: max first (registers are free to
// read twice), then the sum. As in online_step, a -inf element adds exactly 0 and a NaN makes d NaN.
template <int N> __device__ __forceinline__ State<float> register_state(const float (&x)[N], const bool (&valid)[N]) {
    float m = NEG_INF;
#pragma unroll
    for (int i = 0; i < N; ++i) if (valid[i]) m = fmaxf(m, x[i]);
    const float m_log2e = m * LOG2E;
    float d = 0.0f;
#pragma unroll
    for (int i = 0; i < N; ++i) if (valid[i]) d += x[i] == NEG_INF ? 0.0f : exp_shifted(x[i], m_log2e);
    return {m, d};
}

// fast_warp: online_warp with the row held in registers, so x is read ONCE (1 read, 1 write):
// lane l loads 16-byte packs l, l+32, ... (PER of them), the (m, d) pairs merge by butterfly,
// and the output is computed from the registers. Used for rows of up to 32·PER·VEC elements.
template <typename T, typename Acc, int VEC, int PER>
__global__ void __launch_bounds__(128) fast_warp(const T* __restrict__ x, T* __restrict__ y, int rows, int cols) {
    const long long row = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= rows) return;
    const Pack<T, VEC>* xr = reinterpret_cast<const Pack<T, VEC>*>(x + row * cols);
    Pack<T, VEC>* yr = reinterpret_cast<Pack<T, VEC>*>(y + row * cols);
    const int packs = cols / VEC;
    float v[PER * VEC];
    bool valid[PER * VEC];
#pragma unroll
    for (int k = 0; k < PER; ++k) {
        const int p = k * 32 + lane;
        Pack<T, VEC> pack;
        if (p < packs) pack = xr[p];
#pragma unroll
        for (int i = 0; i < VEC; ++i) { valid[k * VEC + i] = p < packs; v[k * VEC + i] = p < packs ? to_float(pack.v[i]) : 0.0f; }
    }
    Trace none{};
    State<float> s = warp_merge<float, false>(register_state(v, valid), lane, false, none, 0);
    const float m_log2e = s.m * LOG2E, inv_d = 1.0f / s.d;
#pragma unroll
    for (int k = 0; k < PER; ++k) {
        const int p = k * 32 + lane;
        if (p >= packs) continue;
        Pack<T, VEC> out;
#pragma unroll
        for (int i = 0; i < VEC; ++i) out.v[i] = from_float<T>(exp_shifted(v[k * VEC + i], m_log2e) * inv_d);
        yr[p] = out;
    }
}

// fast_block: fast_warp's register caching for longer rows: a block of THREADS (blockDim.x) per
// row, or a cluster of CLUSTER blocks (Hopper) sharing one row, each holding a contiguous chunk.
// Block states merge in shared memory; cluster states are read from the other blocks' shared
// memory (DSMEM) and merged in rank order. Still 1 read, 1 write per element.
template <typename T, typename Acc, int VEC, int PER, int CLUSTER>
__global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(1024)
fast_block(const T* __restrict__ x, T* __restrict__ y, int rows, int cols) {
    __shared__ float cluster_state[2];
    const long long row = blockIdx.x / CLUSTER;
    const int rank = blockIdx.x % CLUSTER;
    const Pack<T, VEC>* xr = reinterpret_cast<const Pack<T, VEC>*>(x + row * cols);
    Pack<T, VEC>* yr = reinterpret_cast<Pack<T, VEC>*>(y + row * cols);
    const int packs = cols / VEC;
    const int chunk = (packs + CLUSTER - 1) / CLUSTER;
    const int begin = rank * chunk, end = min(packs, begin + chunk);
    float v[PER * VEC];
    bool valid[PER * VEC];
#pragma unroll
    for (int k = 0; k < PER; ++k) {
        const int p = begin + k * blockDim.x + threadIdx.x;
        Pack<T, VEC> pack;
        if (p < end) pack = xr[p];
#pragma unroll
        for (int i = 0; i < VEC; ++i) { valid[k * VEC + i] = p < end; v[k * VEC + i] = p < end ? to_float(pack.v[i]) : 0.0f; }
    }
    Trace none{};
    State<float> s = block_merge<float, false>(register_state(v, valid), false, none);
    if (CLUSTER > 1) {
        if (threadIdx.x == 0) { cluster_state[0] = s.m; cluster_state[1] = s.d; }
        __cluster_barrier_arrive();
        __cluster_barrier_wait();
        const float* first = static_cast<const float*>(__cluster_map_shared_rank((void*)cluster_state, 0));
        s = {first[0], first[1]};
        for (int r = 1; r < CLUSTER; ++r) {
            const float* other = static_cast<const float*>(__cluster_map_shared_rank((void*)cluster_state, r));
            s = merge(s, State<float>{other[0], other[1]});
        }
        __cluster_barrier_arrive();  // no block may leave while another still reads its shared memory
        __cluster_barrier_wait();
    }
    const float m_log2e = s.m * LOG2E, inv_d = 1.0f / s.d;
#pragma unroll
    for (int k = 0; k < PER; ++k) {
        const int p = begin + k * blockDim.x + threadIdx.x;
        if (p >= end) continue;
        Pack<T, VEC> out;
#pragma unroll
        for (int i = 0; i < VEC; ++i) out.v[i] = from_float<T>(exp_shifted(v[k * VEC + i], m_log2e) * inv_d);
        yr[p] = out;
    }
}

// split_partial: for few, very long rows that one block (or cluster) cannot hold or that leave
// most of the GPU idle. Block c of a row folds chunk c with online_block's per-thread online rule
// and block merge, and writes the chunk's (m, d): 1 read per element, 2 floats per chunk.
template <typename T, typename Acc, bool TRACE>
__global__ void split_partial(const T* __restrict__ x, float* __restrict__ partial, int rows, int cols, int chunks,
                              TRACE_ARGS) {
    MAKE_TRACE;
    const long long row = blockIdx.x / chunks;
    const int c = blockIdx.x % chunks;
    const int chunk = (cols + chunks - 1) / chunks;
    const int begin = c * chunk, end = min(cols, begin + chunk);
    const T* xr = x + row * cols;
    const bool record = TRACE && row == trace.row;
    const int steps = (chunk + blockDim.x - 1) / blockDim.x;
    const int warps = blockDim.x / 32;
    State<Acc> s = empty_state<Acc>();
    int step = 0;
    for (int j = begin + threadIdx.x; j < end; j += blockDim.x, ++step) {
        s = online_step(s, from_float<Acc>(to_float(xr[j])));
        if (TRACE && record) record_step(trace, ((long long)c * blockDim.x + threadIdx.x) * steps + step, s, j);
    }
    Trace chunk_trace = trace;  // this chunk's butterflies sit after the previous chunks'
    if (TRACE) { chunk_trace.merge_m += c * (warps + 1) * 31; chunk_trace.merge_d += c * (warps + 1) * 31; }
    s = block_merge<Acc, TRACE>(s, record, chunk_trace);
    if (threadIdx.x == 0) {
        partial[2 * blockIdx.x] = to_float(s.m);
        partial[2 * blockIdx.x + 1] = to_float(s.d);
    }
}

// split_finish: every block of a row merges the row's chunk states in chunk order (the online
// rule is exactly what makes this a merge), then normalises its own chunk: 1 read, 1 write.
// Block 0 of the traced row records the chunk merges after all chunks' butterflies.
template <typename T, typename Acc, bool TRACE>
__global__ void split_finish(const T* __restrict__ x, T* __restrict__ y, const float* __restrict__ partial, int rows,
                             int cols, int chunks, TRACE_ARGS) {
    MAKE_TRACE;
    const long long row = blockIdx.x / chunks;
    const int c = blockIdx.x % chunks;
    const int chunk = (cols + chunks - 1) / chunks;
    const int begin = c * chunk, end = min(cols, begin + chunk);
    const float* row_partial = partial + 2 * row * chunks;
    State<Acc> s = {from_float<Acc>(row_partial[0]), from_float<Acc>(row_partial[1])};
    const long long base = (long long)chunks * (blockDim.x / 32 + 1) * 31;
    for (int k = 1; k < chunks; ++k) {
        s = merge(s, State<Acc>{from_float<Acc>(row_partial[2 * k]), from_float<Acc>(row_partial[2 * k + 1])});
        if (TRACE && row == trace.row && c == 0 && threadIdx.x == 0) {
            trace.merge_m[base + k - 1] = to_float(s.m);
            trace.merge_d[base + k - 1] = to_float(s.d);
        }
    }
    const T* xr = x + row * cols;
    T* yr = y + row * cols;
    for (int j = begin + threadIdx.x; j < end; j += blockDim.x) yr[j] = normalise(xr[j], s);
}

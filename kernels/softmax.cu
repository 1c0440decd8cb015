// Softmax, from the obvious kernel to the online one, one step at a time.
//
// | variant       | idea                                                      | global reads / writes per element |
// |---------------|-----------------------------------------------------------|-----------------------------------|
// | naive         | y = e^x / sum e^x, one thread per row; overflows          | 2 / 1                             |
// | safe_thread   | subtract the row max first: 3 passes, one thread per row  | 3 / 1                             |
// | online_thread | max and denominator in ONE pass (online rule), 2 passes   | 2 / 1                             |
// | online_warp   | one warp per row, lanes merge (m, d) pairs by shuffles    | 2 / 1                             |
// | online_block  | one block per row: warp merges, then across warps         | 2 / 1                             |
// | safe_block    | online_block's parallel shape, but the 3-pass safe method | 3 / 1                             |
//
// Every kernel is templated on the element type T (float, __half, __nv_bfloat16) and the
// accumulator type Acc (same set) in which m and d live; traced kernels also on TRACE, a
// compile-time switch: an untraced instantiation contains no trace code at all.
// Signature of every traced kernel: (x, y, rows, cols, trace_row, step_m, step_d, step_index,
// merge_m, merge_d); see common.cuh for the trace layout.
#include "common.cuh"

// naive: the textbook formula. Reads x twice (sum, then normalise), writes y once.
// e^x overflows fp32 for x > 88.7 (fp16: x > 11.1), giving inf / inf = NaN: that is the lesson.
template <typename T, typename Acc>
__global__ void naive(const T* __restrict__ x, T* __restrict__ y, int rows, int cols) {
    const long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const T* xr = x + row * cols;
    T* yr = y + row * cols;
    Acc d = from_float<Acc>(0.0f);
    for (int j = 0; j < cols; ++j) d = acc_add(d, from_float<Acc>(expf(to_float(xr[j]))));
    for (int j = 0; j < cols; ++j) yr[j] = from_float<T>(__fdiv_rn(expf(to_float(xr[j])), to_float(d)));
}

// safe_thread (seed V0): same thread-per-row shape as naive, plus a first pass for the row
// max m so every exponent is <= 0 and nothing overflows. 3 reads (max, sum, normalise), 1 write.
// Trace: step j holds the running max after pass 1 and the running sum (with the final m) of pass 2.
template <typename T, typename Acc, bool TRACE>
__global__ void safe_thread(const T* __restrict__ x, T* __restrict__ y, int rows, int cols, TRACE_ARGS) {
    MAKE_TRACE;
    const long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const T* xr = x + row * cols;
    T* yr = y + row * cols;
    const bool record = TRACE && row == trace.row;
    State<Acc> s = empty_state<Acc>();
    for (int j = 0; j < cols; ++j) {
        s.m = acc_max(s.m, from_float<Acc>(to_float(xr[j])));
        if (TRACE && record) trace.step_m[j] = to_float(s.m);
    }
    for (int j = 0; j < cols; ++j) {
        s.d = acc_add(s.d, acc_exp_diff(from_float<Acc>(to_float(xr[j])), s.m));
        if (TRACE && record) { trace.step_d[j] = to_float(s.d); trace.step_index[j] = j; }
    }
    for (int j = 0; j < cols; ++j) yr[j] = normalise(xr[j], s);
}

// online_thread (seed V1): fuses safe_thread's max and sum passes into one with the online rule
// d_j = d_{j-1} e^{m_{j-1} - m_j} + e^{x_j - m_j}. 2 reads, 1 write: one pass over x saved.
template <typename T, typename Acc, bool TRACE>
__global__ void online_thread(const T* __restrict__ x, T* __restrict__ y, int rows, int cols, TRACE_ARGS) {
    MAKE_TRACE;
    const long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const T* xr = x + row * cols;
    T* yr = y + row * cols;
    const bool record = TRACE && row == trace.row;
    State<Acc> s = empty_state<Acc>();
    for (int j = 0; j < cols; ++j) {
        s = online_step(s, from_float<Acc>(to_float(xr[j])));
        if (TRACE && record) record_step(trace, j, s, j);
    }
    for (int j = 0; j < cols; ++j) yr[j] = normalise(xr[j], s);
}

// online_warp (seed V2): one warp per row instead of one thread. Lane l folds elements
// l, l+32, ... (coalesced: the warp reads 32 neighbours at once), then the 32 (m, d) pairs are
// merged by a 5-level shuffle butterfly. 2 reads, 1 write; rows run 32x wider.
template <typename T, typename Acc, bool TRACE>
__global__ void online_warp(const T* __restrict__ x, T* __restrict__ y, int rows, int cols, TRACE_ARGS) {
    MAKE_TRACE;
    const long long row = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= rows) return;  // whole warps leave together, so the shuffles stay full
    const T* xr = x + row * cols;
    T* yr = y + row * cols;
    const bool record = TRACE && row == trace.row;
    const int steps = (cols + 31) / 32;
    State<Acc> s = empty_state<Acc>();
    int step = 0;
    for (int j = lane; j < cols; j += 32, ++step) {
        s = online_step(s, from_float<Acc>(to_float(xr[j])));
        if (TRACE && record) record_step(trace, (long long)lane * steps + step, s, j);
    }
    s = warp_merge<Acc, TRACE>(s, lane, record, trace, 0);
    for (int j = lane; j < cols; j += 32) yr[j] = normalise(xr[j], s);
}

// online_block: one block of B threads per row (B a multiple of 32, <= 1024). Thread t folds
// t, t+B, ...; each warp merges its lanes, then warp 0 merges the warps through shared memory.
// 2 reads, 1 write; B times more threads on a row than online_thread, for long rows.
template <typename T, typename Acc, bool TRACE>
__global__ void online_block(const T* __restrict__ x, T* __restrict__ y, int rows, int cols, TRACE_ARGS) {
    MAKE_TRACE;
    const long long row = blockIdx.x;
    const T* xr = x + row * cols;
    T* yr = y + row * cols;
    const bool record = TRACE && row == trace.row;
    const int steps = (cols + blockDim.x - 1) / blockDim.x;
    State<Acc> s = empty_state<Acc>();
    int step = 0;
    for (int j = threadIdx.x; j < cols; j += blockDim.x, ++step) {
        s = online_step(s, from_float<Acc>(to_float(xr[j])));
        if (TRACE && record) record_step(trace, (long long)threadIdx.x * steps + step, s, j);
    }
    s = block_merge<Acc, TRACE>(s, record, trace);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = normalise(xr[j], s);
}

// safe_block: online_block's exact parallel shape with safe_thread's method (block max, then
// block sum with that max, then normalise), so online vs safe is compared on equal footing.
// 3 reads, 1 write: one more pass over x than online_block.
template <typename T, typename Acc>
__global__ void safe_block(const T* __restrict__ x, T* __restrict__ y, int rows, int cols) {
    const long long row = blockIdx.x;
    const T* xr = x + row * cols;
    T* yr = y + row * cols;
    Acc m = from_float<Acc>(NEG_INF);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) m = acc_max(m, from_float<Acc>(to_float(xr[j])));
    m = block_reduce_max(m);
    Acc d = from_float<Acc>(0.0f);
    for (int j = threadIdx.x; j < cols; j += blockDim.x)
        d = acc_add(d, acc_exp_diff(from_float<Acc>(to_float(xr[j])), m));
    State<Acc> s = {m, block_reduce_sum(d)};
    for (int j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = normalise(xr[j], s);
}

// The fastest softmax kernels we could write, and the split-row kernels for very long rows.
//
// | kernel             | idea                                                            | global reads / writes per element |
// |--------------------|-----------------------------------------------------------------|-----------------------------------|
// | fast_warp          | lanes of a warp per row, row cached in registers, 16-byte loads | 1 / 1                          |
// | fast_row           | a block per row (or several), or slices merged through global;  | 1 / 1 (+ 2 floats per slice)   |
// |                    | cp.async loads, the slice held in registers or shared memory,   |                                |
// |                    | 16-byte loads at any width (loose head and tail elements)       |                                |
// | fast_row_cluster   | fast_row whose slices form a Hopper cluster: each warp's (m, d) | 1 / 1 (ACROSS: + 2 words per   |
// |                    | mailed to every block over DSMEM, folded with no barrier; or    | block, polled by a block of    |
// |                    | (ACROSS) a row over the GPU in clusters, whose states are       | each cluster)                  |
// |                    | polled through global memory                                    |                                |
// | fast_stream        | rows too long to hold on chip: several blocks per row, each     | 1 / 1 (+ a second read of what |
// |                    | holding its chunk's first batches in shared memory; (m, d)      | is not held, mostly from L2;   |
// |                    | exchanged through global memory, then the rest read again       | 2 floats per chunk)            |
// | fast_split_partial | fast_stream's arithmetic in two launches (the reference the     | 1 / 0 (+ 2 floats per chunk)   |
// | fast_split_finish  | tests hold fast_stream to, bit for bit): states, then normalise | 1 / 1                          |
// | split_partial      | split_row, the teaching version: per-element online rule       | 1 / 0 (+ 2 floats per chunk)   |
// | split_finish       | merge the chunk states in order, normalise (traced)             | 1 / 1                          |
//
// `fast` (the variant) picks fast_warp, fast_row(_cluster) or fast_stream from the shape; see
// explorer/registry.py. fast_* accumulate in fp32 only (Acc must be float) and use exp2f (one MUFU
// instruction) instead of expf. All kernels are templated like softmax.cu.
#include "fast_common.cuh"

// fast_warp: online_warp with the row held in registers, so x is read ONCE (1 read, 1 write):
// a group of LANES lanes per row (32 / LANES rows per warp, so short rows keep every lane busy and
// merge in fewer levels); lane l loads 16-byte packs l, l+LANES, ... (PER of them). Warps stride
// over rows if the grid is smaller than the rows (it is launched with one group per row: measured
// faster on the H200 than a persistent grid).
template <typename T, typename Acc, int VEC, int PER, int LANES>
__global__ void __launch_bounds__(128) fast_warp(const T* __restrict__ x, T* __restrict__ y, int rows, int cols) {
    const long long stride = (long long)gridDim.x * blockDim.x / LANES;
    const int lane = threadIdx.x % LANES;
    const long long first = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / LANES;
    // the warp's first row decides the trip count, so whole warps iterate (and shuffle) together
    for (long long row = first; row - (threadIdx.x % 32) / LANES < rows; row += stride) {
        const bool live = row < rows;  // dead groups still take part in the shuffles
        const Pack<T, VEC>* xr = reinterpret_cast<const Pack<T, VEC>*>(x + (live ? row : 0) * cols);
        Pack<T, VEC>* yr = reinterpret_cast<Pack<T, VEC>*>(y + (live ? row : 0) * cols);
        const int packs = live ? cols / VEC : 0;
        float v[PER * VEC];
        bool valid[PER * VEC];
#pragma unroll
        for (int k = 0; k < PER; ++k) {
            const int p = k * LANES + lane;
            Pack<T, VEC> pack;
            if (p < packs) pack = xr[p];
#pragma unroll
            for (int i = 0; i < VEC; ++i) { valid[k * VEC + i] = p < packs; v[k * VEC + i] = p < packs ? to_float(pack.v[i]) : 0.0f; }
        }
        const State<float> mine = exps_in_place(v, valid);
        const State<float> s = group_merge<LANES>(mine);
        const float c = __fmul_rn(fast_rescale(mine.m, s.m), 1.0f / s.d);
#pragma unroll
        for (int k = 0; k < PER; ++k) {
            const int p = k * LANES + lane;
            if (p < packs) yr[p] = scaled<T, VEC>(v + k * VEC, c);
        }
    }
}

// The row's (m, d) from `mine`: in a cluster, each warp's (exps on the warp's max, ON_WARP), folded from the
// cluster's mailboxes (WARPS: the most a block has), then over the row's clusters (ACROSS, through global memory,
// `epoch` the launch's); else each thread's, merged over the block and then, for a row of several slices, over
// the slices through global memory.
template <int ROWS, int CLUSTER, bool ACROSS, int WARPS>
__device__ __forceinline__ State<float> row_state(State<float> mine, float* partial, unsigned* sync, long long row, int slice,
                                                  int slices, unsigned epoch) {
    if constexpr (CLUSTER > 1) {
        const State<float> s = cluster_row_state<CLUSTER, WARPS>(mine);
        if constexpr (!ACROSS) return s;
        else {
            FAST_STAMP(2);  // the cluster's (m, d)
            return across_clusters<CLUSTER>(s, reinterpret_cast<unsigned long long*>(partial), epoch, row, slice, slices);
        }
    } else {
        State<float> s = fast_block_merge<ROWS>(mine);
        FAST_STAMP(2);  // the block's (m, d)
        if (slices > 1) s = exchange_row<0>(s, partial + 2 * row * slices, sync + 1 + 2 * row, slice, slices);
        return s;
    }
}

// fast_row: fast_warp's on-chip caching for longer rows. A block holds ROWS rows (blockDim.x / ROWS
// threads each), or one of `slices` consecutive slices of a row; when the slices form a Hopper cluster
// (CLUSTER = slices), each warp takes its exps on the warp's max and mails its (m, d) to every block of the
// cluster, which fold them with no barrier (cluster_row_state); else a block merges its threads' states and
// slices exchange theirs through global memory (exchange_row). Each normalises the slice it still holds:
// x is read once, y written once (1 read, 1 write), at any width that the GPU's resident blocks can hold.
// Rows of any width load 16-byte packs: where the width is not a multiple of VEC (LOOSE), the loose elements
// before and after each row's aligned body (RowSplit) go one each to the first slice's first threads, folded
// after their packs (a separate instantiation: the per-row split costs registers). The block size is chosen
// at launch.
// Slices exchanging through global memory take start-order tickets unless the host says the whole grid
// is `resident` at once (then no block can wait for one that has not started).
// HOLD says where the slice waits: 0 registers (plain 16-byte loads), 1 registers (cp.async through
// shared memory, no registers held while the loads are in flight), 2 shared memory (cp.async; e^{x - m}
// computed again from it for the output, so few registers and more bytes in flight), 3 registers as
// loaded (plain 16-byte loads, 16-bit elements kept two to a register; the exps taken again as in HOLD 2,
// with the same bits).
template <typename T, int VEC, int PER, int HOLD, int CLUSTER, bool ACROSS, bool LOOSE, int ROWS, int WARPS>
__device__ __forceinline__ void fast_row_body(const T* __restrict__ x, T* __restrict__ y, float* __restrict__ partial,
                                              unsigned* __restrict__ sync, int rows, int cols, int slices, int resident) {
    const int threads = blockDim.x / ROWS, t = threadIdx.x % threads;  // the row's threads, this one's index
    constexpr bool ON_WARP = CLUSTER > 1;  // a cluster folds its warps' states (row_state)
    FAST_STAMP(0);  // the block starts
    // tickets where slices wait for each other and the grid may not all be resident (ACROSS: it is, the host checks)
    const long long block = !ACROSS && slices > CLUSTER && !resident ? start_ticket(sync) : blockIdx.x;
    const long long row = ROWS == 1 ? block / slices : block * ROWS + threadIdx.x / threads;
    const bool live = ROWS == 1 || row < rows;  // a last block's missing rows still take part in its barriers
    const int slice = ROWS == 1 ? block % slices : 0;
    const RowSplit<VEC> split(LOOSE ? row : 0, cols);
    const int chunk = (split.packs + slices - 1) / slices;
    const int begin = slice * chunk, end = live ? min(split.packs, begin + chunk) : begin;
    const Pack<T, VEC>* xr = reinterpret_cast<const Pack<T, VEC>*>(x + row * cols + split.head);
    Pack<T, VEC>* yr = reinterpret_cast<Pack<T, VEC>*>(y + row * cols + split.head);
    const bool holds_loose = LOOSE && live && slice == 0 && t < split.loose;
    const long long loose_at = row * cols + split.loose_col(t);
    const float loose = holds_loose ? to_float(x[loose_at]) : 0.0f;
    if constexpr (HOLD == 1 || HOLD == 2) stage_packs<T, VEC, PER>(xr, begin, end, t, threads);
    if constexpr (HOLD >= 2) {
        Pack<T, VEC> held[HOLD == 3 ? PER : 1];  // HOLD 3: the slice's packs as loaded
        if constexpr (HOLD == 3) {
#pragma unroll
            for (int k = 0; k < PER; ++k) {
                const int p = begin + k * threads + t;
                if (p < end) held[k] = xr[p];
            }
        }
        const auto pack_of = [&](int k) {
            if constexpr (HOLD == 3) return unwidened(held[k]);
            else return staged_pack<T, VEC>(k);
        };
        const State<float> mine = held_state<T, VEC, PER, ON_WARP>(pack_of, begin, end, t, threads, loose, holds_loose);
        FAST_STAMP(1);  // the slice loaded and folded
        const State<float> s = row_state<ROWS, CLUSTER, ACROSS, WARPS>(mine, partial, sync, row, slice, slices, resident);
        FAST_STAMP(3);  // the row's (m, d)
        if (prescaled<T>(s.m)) {
            const float b = fmaf(s.m, LOG2E, fast_log2(s.d));
#pragma unroll
            for (int k = 0; k < PER; ++k) {
                const int p = begin + k * threads + t;
                if (p < end) yr[p] = normalised_less<T, VEC>(pack_of(k), b);
            }
            if (holds_loose) y[loose_at] = from_float<T>(exp2_less(loose, b));
            FAST_STAMP(4);  // the slice written
            return;
        }
        const float inv_d = 1.0f / s.d;
#pragma unroll
        for (int k = 0; k < PER; ++k) {
            const int p = begin + k * threads + t;
            if (p < end) yr[p] = normalised<T, VEC>(pack_of(k), s.m, inv_d);
        }
        if (holds_loose) y[loose_at] = from_float<T>(__fmul_rn(exp_shifted(loose, s.m), inv_d));
        FAST_STAMP(4);
        return;
    }
    constexpr int N = PER * VEC;
    float v[N + 1];  // the packs' elements, then the loose one; -inf where the thread holds none
#pragma unroll
    for (int k = 0; k < PER; ++k) {
        const int p = begin + k * threads + t;
        Pack<T, VEC> pack;
        if (p < end) {
            if constexpr (HOLD == 1) pack = staged_pack<T, VEC>(k);
            else pack = xr[p];
        }
#pragma unroll
        for (int i = 0; i < VEC; ++i) v[k * VEC + i] = p < end ? to_float(pack.v[i]) : NEG_INF;
    }
    v[N] = holds_loose ? loose : NEG_INF;
    const State<float> mine = exps_in_place<ON_WARP>(v);
    FAST_STAMP(1);
    const State<float> s = row_state<ROWS, CLUSTER, ACROSS, WARPS>(mine, partial, sync, row, slice, slices, resident);
    FAST_STAMP(3);
    const float c = __fmul_rn(fast_rescale(mine.m, s.m), 1.0f / s.d);
#pragma unroll
    for (int k = 0; k < PER; ++k) {
        const int p = begin + k * threads + t;
        if (p < end) yr[p] = scaled<T, VEC>(v + k * VEC, c);
    }
    if (holds_loose) y[loose_at] = from_float<T>(__fmul_rn(v[N], c));
    FAST_STAMP(4);
}

// Threads a fast_row block may have: 1024, or fewer where each holds more than 32 elements in registers
// (32 · 1024 elements a block at most), and 64 where a 16-bit thread holds 64: those blocks are asked to
// fit 10 to an SM, so a thread gets 96 registers, not the 128 it would take (25 % occupancy); it does not
// spill, and rows of 2–4K columns run at 94–99 % of copy on the H200 instead of 86–97 %
// (scripts/tune_fast.py). A slice held in shared memory (HOLD 2) takes at most 512 threads, asked to fit
// 3 to an SM (as its 64 KB of staging does): 40 registers, no spill, where the compiler would take 44-48.
// explorer/registry.py's fast_row_launch keeps to these.
__host__ __device__ constexpr bool fast_row_capped(int hold, int held, int itemsize) { return hold < 2 && held == 64 && itemsize == 2; }
__host__ __device__ constexpr int fast_row_threads(int hold, int held, int itemsize) {
    return fast_row_capped(hold, held, itemsize) ? 64 : hold == 2 ? 512 : held > 32 ? 32 * 1024 / held : 1024;
}
__host__ __device__ constexpr int fast_row_min_blocks(int hold, int held, int itemsize) {
    return fast_row_capped(hold, held, itemsize) ? 10 : hold == 2 ? 3 : 0;
}

// ROWS > 1 only with one slice a row (short rows: several a block keep many warps on an SM).
template <typename T, typename Acc, int VEC, int PER, int HOLD, bool LOOSE, int ROWS>
__global__ void __launch_bounds__(fast_row_threads(HOLD, PER * VEC, sizeof(T)), fast_row_min_blocks(HOLD, PER * VEC, sizeof(T))) fast_row(const T* __restrict__ x, T* __restrict__ y, float* __restrict__ partial,
                                                 unsigned* __restrict__ sync, int rows, int cols, int slices, int resident) {
    fast_row_body<T, VEC, PER, HOLD, 1, false, LOOSE, ROWS, 1>(x, y, partial, sync, rows, cols, slices, resident);
}

// fast_row_cluster: fast_row whose `slices` = CLUSTER blocks of a row form a Hopper cluster (a separate
// kernel: the cluster attribute changes how every block is scheduled, so one-block rows go without it).
// ACROSS: a row of `slices` blocks in clusters of CLUSTER (few long rows over every SM), the clusters'
// states exchanged through global memory (across_clusters; `resident` carries the launch's epoch there: every
// block is resident, the host checks).
// Slices held as loaded in small blocks take at most 256 threads, asked to fit several to an SM: fp32 holding 64
// three (80 registers, not 90); 16-bit holding 32 over several clusters five (48 at most), so that four an SM leave
// room for whole clusters of 8 in every GPC (in one cluster they take up to 512 threads).
__host__ __device__ constexpr int cluster_capped(int hold, int held, int itemsize, bool across) {
    return hold != 3 ? 0 : held == 64 && itemsize == 4 ? 3 : held == 32 && itemsize == 2 && across ? 5 : 0;
}
__host__ __device__ constexpr int cluster_threads(int hold, int held, int itemsize, bool across) {
    return cluster_capped(hold, held, itemsize, across) ? 256 : fast_row_threads(hold, held, 4);
}
__host__ __device__ constexpr int cluster_min_blocks(int hold, int held, int itemsize, bool across) {
    return cluster_capped(hold, held, itemsize, across) ? cluster_capped(hold, held, itemsize, across) : fast_row_min_blocks(hold, held, 4);
}
template <typename T, typename Acc, int VEC, int PER, int HOLD, int CLUSTER, bool LOOSE, bool ACROSS>
__global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(cluster_threads(HOLD, PER * VEC, sizeof(T), ACROSS), cluster_min_blocks(HOLD, PER * VEC, sizeof(T), ACROSS))
fast_row_cluster(const T* __restrict__ x, T* __restrict__ y, float* __restrict__ partial, unsigned* __restrict__ sync,
                 int rows, int cols, int slices, int resident) {
    constexpr int WARPS = cluster_threads(HOLD, PER * VEC, sizeof(T), ACROSS) / 32;
    cluster_mailbox_open<CLUSTER, WARPS>();
    fast_row_body<T, VEC, PER, HOLD, CLUSTER, ACROSS, LOOSE, 1, WARPS>(x, y, partial, sync, rows, cols, slices, resident);
}

// Chunk c of a row of `packs` 16-byte packs cut into `chunks`: packs [begin, end).
struct ChunkBounds { int begin, end; };
__device__ __forceinline__ ChunkBounds chunk_bounds(int packs, int chunks, int c) {
    const int chunk = (packs + chunks - 1) / chunks;
    return {c * chunk, min(packs, c * chunk + chunk)};
}

// This thread's packs of the batch at `first` below end (its k-th: pack first + k·blockDim.x + threadIdx.x), each as
// load(p) gives it.
template <int PER, typename P, typename Load>
__device__ __forceinline__ void load_batch(P (&to)[PER], int first, int end, Load load) {
#pragma unroll
    for (int k = 0; k < PER; ++k) {
        const int p = first + k * blockDim.x + threadIdx.x;
        if (p < end) to[k] = load(p);
    }
}

// Normalise packs [from, end) of a row, batches of PER packs a thread, the last batch first, each batch loaded
// before any of it is written; reads and writes evict-first (ld/st .cs), so what is done leaves the L2 before
// what is still to be read. AHEAD: the batch below is loaded before this one is written (twice the bytes in
// flight, where the registers allow).
template <typename T, int VEC, int PER, bool AHEAD = false>
__device__ __forceinline__ void normalise_back_to_front(const Pack<T, VEC>* xr, Pack<T, VEC>* yr, int from, int end, float m,
                                                        float inv_d) {
    const int batch = PER * blockDim.x;
    if (end <= from) return;
    const auto load = [&](int p) { return load_streaming(xr + p); };
    int first = from + (end - from - 1) / batch * batch;
    Pack<T, VEC> next[PER];
    if constexpr (AHEAD) load_batch(next, first, end, load);
    for (; first >= from; first -= batch) {
        Pack<T, VEC> in[PER];
        if constexpr (AHEAD) {
#pragma unroll
            for (int k = 0; k < PER; ++k) in[k] = next[k];
            if (first - batch >= from) load_batch(next, first - batch, first, load);
        } else {
            load_batch(in, first, end, load);
        }
#pragma unroll
        for (int k = 0; k < PER; ++k) {
            const int p = first + k * blockDim.x + threadIdx.x;
            if (p < end) store_streaming(yr + p, normalised<T, VEC>(in[k], m, inv_d));
        }
    }
}

// One batch of fast_split_partial's fold: this thread's packs base + k·blockDim.x below end (pack_of(k, p) gives
// pack p, the thread's k-th of the batch), online at batch granularity: one rescale a batch, one exp an element.
template <typename T, int VEC, int PER, typename PackOf>
__device__ __forceinline__ State<float> fold_batch(State<float> s, int base, int end, PackOf pack_of) {
    float v[PER * VEC];
    bool valid[PER * VEC];
#pragma unroll
    for (int k = 0; k < PER; ++k) {
        const int p = base + k * blockDim.x + threadIdx.x;
        Pack<T, VEC> pack;
        if (p < end) pack = pack_of(k, p);
        widen_pack(pack, p < end, k, v, valid);
    }
    return fast_merge(s, exps_in_place(v, valid));
}

// fold_batch over packs [from, end) of a row in global memory; AHEAD: each batch's loads issued before the batch
// before it is folded (twice the bytes in flight, where the registers allow; the same fold, so the same bits).
template <typename T, int VEC, int PER, bool AHEAD>
__device__ __forceinline__ State<float> fold_streamed(State<float> s, const Pack<T, VEC>* xr, int from, int end) {
    const int batch = PER * blockDim.x;
    const auto load = [&](int p) { return xr[p]; };
    if constexpr (!AHEAD) {
        for (int base = from; base < end; base += batch) s = fold_batch<T, VEC, PER>(s, base, end, [&](int, int p) { return load(p); });
        return s;
    }
    Pack<T, VEC> next[PER];
    load_batch(next, from, end, load);
    for (int base = from; base < end; base += batch) {
        Pack<T, VEC> pack[PER];
#pragma unroll
        for (int k = 0; k < PER; ++k) pack[k] = next[k];
        load_batch(next, base + batch, end, load);
        s = fold_batch<T, VEC, PER>(s, base, end, [&](int k, int) { return pack[k]; });
    }
    return s;
}

// fast_split_partial, then fast_split_finish: fast_stream's arithmetic in two launches, which needs no
// resident grid (fast_stream's tests compare its bits with these). Block c of a row streams chunk c in
// batches of PER packs per thread, online at batch granularity (one rescale per batch, one exp per
// element), then merges the block: 1 read per element, 2 floats per chunk. The grid is BLOCKS blocks an
// SM, and the launch bounds let that many fit: one wave.
template <typename T, typename Acc, int VEC, int PER, int BLOCKS>
__global__ void __launch_bounds__(512, BLOCKS) fast_split_partial(const T* __restrict__ x, float* __restrict__ partial, int rows,
                                                                  int cols, int chunks) {
    const long long row = blockIdx.x / chunks;
    const int c = blockIdx.x % chunks;
    const Pack<T, VEC>* xr = reinterpret_cast<const Pack<T, VEC>*>(x + row * cols);
    const ChunkBounds bounds = chunk_bounds(cols / VEC, chunks, c);
    const int begin = bounds.begin, end = bounds.end;
    State<float> s = {NEG_INF, 0.0f};
    for (int base = begin; base < end; base += PER * blockDim.x) s = fold_batch<T, VEC, PER>(s, base, end, [&](int, int p) { return xr[p]; });
    s = fast_block_merge(s);
    if (threadIdx.x == 0) { partial[2 * blockIdx.x] = s.m; partial[2 * blockIdx.x + 1] = s.d; }
}

// fast_split_finish: warp 0 merges the row's chunk states (lane l folds chunks l, l+32, ..., its loads
// issued FOLD at a time, then a butterfly), and every thread normalises its chunk from a second read,
// PER packs loaded before any is written: 1 read, 1 write. fast_split_partial's blocks all stream their
// chunks front to back at once, so what the L2 still holds is the end of every chunk: the finish walks
// its chunk back to front, and reads and writes evict-first (ld/st .cs), so that what it has used goes
// before what it has not yet read.
template <typename T, typename Acc, int VEC, int PER, int BLOCKS>
__global__ void __launch_bounds__(512, BLOCKS) fast_split_finish(const T* __restrict__ x, T* __restrict__ y,
                                                                 const float* __restrict__ partial, int rows, int cols, int chunks) {
    constexpr int FOLD = 8;
    __shared__ float row_state[2];
    // blocks run in reverse order of split_partial's, so the chunks read last (still in L2) come first
    const int block = gridDim.x - 1 - blockIdx.x;
    const long long row = block / chunks;
    const int c = block % chunks;
    if (threadIdx.x < 32) {
        const float2* row_partial = reinterpret_cast<const float2*>(partial) + row * chunks;
        State<float> s = {NEG_INF, 0.0f};
        for (int first = threadIdx.x; first < chunks; first += 32 * FOLD) {
            float2 state[FOLD];
#pragma unroll
            for (int j = 0; j < FOLD; ++j) state[j] = first + 32 * j < chunks ? __ldcg(row_partial + first + 32 * j) : make_float2(NEG_INF, 0.0f);
#pragma unroll
            for (int j = 0; j < FOLD; ++j) if (first + 32 * j < chunks) s = fast_merge(s, {state[j].x, state[j].y});
        }
        s = group_merge<32>(s);
        if (threadIdx.x == 0) { row_state[0] = s.m; row_state[1] = s.d; }
    }
    __syncthreads();
    const float m = row_state[0], inv_d = 1.0f / row_state[1];
    const Pack<T, VEC>* xr = reinterpret_cast<const Pack<T, VEC>*>(x + row * cols);
    Pack<T, VEC>* yr = reinterpret_cast<Pack<T, VEC>*>(y + row * cols);
    const ChunkBounds bounds = chunk_bounds(cols / VEC, chunks, c);
    const int begin = bounds.begin, end = bounds.end;
    normalise_back_to_front<T, VEC, PER>(xr, yr, begin, end, m, inv_d);
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

// fold(j) for the held batches j = 0 ... HELD - 1 in order, each once its cp.async group has landed, the next
// group issued before the fold: one group of the thread in flight, so that an SM's blocks get their bytes in turn
// rather than the first to start first. issue(j) starts and commits group j (an empty one past the last).
template <int HELD, typename Issue, typename Fold>
__device__ __forceinline__ void fold_held(Issue issue, Fold fold) {
    if constexpr (HELD > 0) issue(0);
#pragma unroll
    for (int j = 0; j < HELD; ++j) {
        asm volatile("cp.async.wait_group 0;\n" ::: "memory");
        issue(j + 1);  // the next group loads while this one folds
        fold(j);
    }
}

// fast_stream: fast_split in one launch, for rows too long to hold on chip. Block c of a row folds chunk c as
// fast_split_partial does, but the chunk's first HELD batches arrive by cp.async into shared memory (a group a
// batch, one in flight, each folded as it lands) and stay there (loaded evict-first: L2 is not asked for
// them again), while the rest, read with plain loads, is left in L2 for its second read. The row's chunk states
// merge through global memory (exchange_row: fast_split_finish's fold, so the bits of fast_split), then the block
// writes the rest back to front (evict-first, as fast_split_finish) and its held batches from shared memory: 1 read
// of x plus a second of the part not held (from L2 where it fits there), 1 write. A row's chunks wait for each
// other, so all of them must be resident; blocks take start-order tickets unless the whole grid is. At two blocks
// an SM (64 registers a thread) the streamed batches are loaded one batch ahead, both in the fold and in the write.
template <typename T, typename Acc, int VEC, int PER, int BLOCKS, int HELD>
__global__ void __launch_bounds__(512, BLOCKS) fast_stream(const T* __restrict__ x, T* __restrict__ y, float* __restrict__ partial,
                                                           unsigned* __restrict__ sync, int rows, int cols, int chunks, int resident) {
    FAST_STAMP(0);
    const long long block = chunks > 1 && !resident ? start_ticket(sync) : blockIdx.x;
    const long long row = block / chunks;
    const int c = block % chunks;
    const Pack<T, VEC>* xr = reinterpret_cast<const Pack<T, VEC>*>(x + row * cols);
    Pack<T, VEC>* yr = reinterpret_cast<Pack<T, VEC>*>(y + row * cols);
    const ChunkBounds bounds = chunk_bounds(cols / VEC, chunks, c);
    const int begin = bounds.begin, end = bounds.end;
    const int batch = PER * blockDim.x;
    const int held_end = min(end, begin + HELD * batch);  // packs [begin, held_end) stay in shared memory, pack p at p - begin
    const auto held = [&](int p) { return *reinterpret_cast<const Pack<T, VEC>*>(staging + (p - begin)); };
    unsigned long long evict_first = 0;
    if constexpr (HELD > 0) {
        static_assert(sizeof(Pack<T, VEC>) == 16, "cp.async stages 16-byte packs");
        asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(evict_first));
    }
    const auto issue = [&](int j) {  // batch j's cp.async group (empty past the held batches)
#pragma unroll
        for (int k = 0; k < PER; ++k) {
            const int p = begin + (j * PER + k) * blockDim.x + threadIdx.x;
            if (j < HELD && p < held_end) copy_to_staging(p - begin, xr + p, evict_first);
        }
        asm volatile("cp.async.commit_group;\n" ::: "memory");
    };
    State<float> s = {NEG_INF, 0.0f};
    fold_held<HELD>(issue, [&](int j) {  // each batch as soon as its group lands: the fold overlaps the next batch's loads
        const int base = begin + j * batch;
        if (base < held_end) s = fold_batch<T, VEC, PER>(s, base, held_end, [&](int, int p) { return held(p); });
    });
    s = fold_streamed<T, VEC, PER, BLOCKS <= 2>(s, xr, held_end, end);  // two blocks an SM: registers to load ahead
    FAST_STAMP(1);
    s = fast_block_merge(s);
    FAST_STAMP(2);
    // up to 512 chunks' states loaded at once: the H200's 396 chunks a row in one L2 round trip, not two
    if (chunks > 1) s = exchange_row<512>(s, partial + 2 * row * chunks, sync + 1 + 2 * row, c, chunks);
    else s = group_merge<32>(threadIdx.x % 32 == 0 ? fast_merge({NEG_INF, 0.0f}, s) : State<float>{NEG_INF, 0.0f});  // the fold of one state
    FAST_STAMP(3);
    const float inv_d = 1.0f / s.d;
    normalise_back_to_front<T, VEC, PER, BLOCKS <= 2>(xr, yr, held_end, end, s.m, inv_d);
#pragma unroll 1
    for (int k = 0; k < HELD * PER; ++k) {
        const int p = begin + k * blockDim.x + threadIdx.x;
        if (p < held_end) store_streaming(yr + p, normalised<T, VEC>(held(p), s.m, inv_d));
    }
    FAST_STAMP(4);
}

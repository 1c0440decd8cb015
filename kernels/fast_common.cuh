// Helpers of the fast kernels (fast.cu) and of the fused softmax + top-k (topk.cu): 16-byte packs,
// the cheap exp2-based exponential and (m, d) merge, and the register-cached per-thread state.
#pragma once
#include "common.cuh"

#define LOG2E 1.4426950408889634f

// FAST_STAMP(stage): where a block of fast_row or fast_stream has got to (block-uniform code). Nothing here;
// scripts/timeline_fast.py defines it as a barrier and a record of the time, for a timeline of a launch.
#ifndef FAST_STAMP
#define FAST_STAMP(stage)
#endif

template <typename T, int VEC> struct alignas(sizeof(T) * VEC) Pack { T v[VEC]; };

// 2^t as the bare MUFU.EX2 (within 2 ulp; subnormal results flush to 0, as the emulation's -ftz
// does; 2^-inf = 0). exp2f without -ftz wraps it in 3 more instructions for subnormal results.
__device__ __forceinline__ float fast_exp2(float t) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(t));
    return r;
}

// e^{x - m} as 2^{(x - m)·log2e}: one MUFU.EX2 instead of expf's ~10 instructions. The difference is
// taken first, so x near the top of fp32 (|x|·log2e > FLT_MAX) cannot overflow into inf - inf.
__device__ __forceinline__ float exp_shifted(float x, float m) { return fast_exp2(__fmul_rn(__fsub_rn(x, m), LOG2E)); }

// 16-bit rows held in shared memory (fast_row's HOLD 2) take e^{x - m} as 2^{x·log2e - b}, one FFMA and
// MUFU.EX2, with b = m·log2e rounded once (for the output, b also carries log2 d): that rounding shifts
// every exponent by at most |m|·log2e·2^-24, 2.2e-5 while |m| <= PRESCALE_MAX, a small share of a bf16
// or fp16 unit (2^-8, 2^-11). Above it, and for fp32 rows, the difference is taken first (exp_shifted).
#define PRESCALE_MAX 256.0f
template <typename T> __device__ __forceinline__ bool prescaled(float m) { return sizeof(T) == 2 && fabsf(m) <= PRESCALE_MAX; }
__device__ __forceinline__ float exp2_less(float x, float b) { return fast_exp2(fmaf(x, LOG2E, -b)); }
__device__ __forceinline__ float fast_log2(float d) {
    float r;
    asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d));
    return r;
}

// e^{m_from - m_to} the same way; equal maxima (-inf == -inf included) give exactly 1.
__device__ __forceinline__ float fast_rescale(float m_from, float m_to) {
    return m_from == m_to ? 1.0f : exp_shifted(m_from, m_to);
}

// The shift of a thread's exps: its max, or 0 when every element it holds is -inf (each e^{x - m}
// of -inf is then 2^-inf = 0, with no per-element test; a NaN still gives NaN).
__device__ __forceinline__ float exp_shift(float m) { return m == NEG_INF ? 0.0f : m; }

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

// The largest m of the warp (fmaxf: a NaN loses to a number), in every lane.
__device__ __forceinline__ float warp_fmax(float m) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    return m;
}

// group_merge<32> per warp, then the warps of each of the block's ROWS rows (consecutive blockDim.x / ROWS
// threads each) merge their states: warp r folds row r's, lane l its warp l; every thread gets its row's.
// A row of one warp has its state after the butterfly.
template <int ROWS = 1> __device__ __forceinline__ State<float> fast_block_merge(State<float> s) {
    __shared__ float shared_m[32], shared_d[32], row_m[ROWS], row_d[ROWS];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32 / ROWS;  // warps a row
    s = group_merge<32>(s);
    if (warps == 1) return s;
    if (lane == 0) { shared_m[warp] = s.m; shared_d[warp] = s.d; }
    __syncthreads();
    if (warp < ROWS) {
        State<float> w = lane < warps ? State<float>{shared_m[warp * warps + lane], shared_d[warp * warps + lane]}
                                      : State<float>{NEG_INF, 0.0f};
        w = group_merge<32>(w);
        if (lane == 0) { row_m[warp] = w.m; row_d[warp] = w.d; }
    }
    __syncthreads();
    const State<float> row = {row_m[warp / warps], row_d[warp / warps]};
    __syncthreads();  // a persistent block reuses shared_m for its next row
    return row;
}

// Dynamic shared memory: fast_row's cp.async loads (HOLD 1 and 2), pack k of thread t at [k · blockDim.x + t]; fast_stream's held batches.
extern __shared__ uint4 staging[];

// A 16-byte cp.async copy of *from into staging slot `slot` (.cg: through L2, not L1), under an L2 cache policy
// (createpolicy) where one is given.
__device__ __forceinline__ void copy_to_staging(int slot, const void* from) {
    const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(staging + slot));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(to), "l"(from));
}
__device__ __forceinline__ void copy_to_staging(int slot, const void* from, unsigned long long policy) {
    const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(staging + slot));
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n" ::"r"(to), "l"(from), "l"(policy));
}

// Start 16-byte cp.async copies of this thread's packs begin + k·stride + t (those below end; t is the
// thread's index among the `stride` threads of its row) into staging and wait for them; each thread reads
// back only what it copied (slot k · blockDim.x + threadIdx.x), so no barrier is needed.
template <typename T, int VEC, int PER>
__device__ __forceinline__ void stage_packs(const Pack<T, VEC>* row, int begin, int end, int t, int stride) {
    static_assert(sizeof(Pack<T, VEC>) == 16, "cp.async stages 16-byte packs");
#pragma unroll
    for (int k = 0; k < PER; ++k) {
        const int p = begin + k * stride + t;
        if (p < end) copy_to_staging(k * blockDim.x + threadIdx.x, row + p);
    }
    asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
}

// A pack loaded or stored evict-first (ld.global.cs / st.global.cs), as one word of its size.
template <int BYTES> struct Word;
template <> struct Word<16> { using type = int4; };
template <> struct Word<8> { using type = int2; };
template <> struct Word<4> { using type = int; };
template <> struct Word<2> { using type = short; };
template <typename T, int VEC> __device__ __forceinline__ Pack<T, VEC> load_streaming(const Pack<T, VEC>* at) {
    using W = typename Word<sizeof(Pack<T, VEC>)>::type;
    const W word = __ldcs(reinterpret_cast<const W*>(at));
    return *reinterpret_cast<const Pack<T, VEC>*>(&word);
}
template <typename T, int VEC> __device__ __forceinline__ void store_streaming(Pack<T, VEC>* at, const Pack<T, VEC>& pack) {
    using W = typename Word<sizeof(Pack<T, VEC>)>::type;
    __stcs(reinterpret_cast<W*>(at), *reinterpret_cast<const W*>(&pack));
}

template <typename T, int VEC> __device__ __forceinline__ Pack<T, VEC> staged_pack(int k) {
    return *reinterpret_cast<const Pack<T, VEC>*>(staging + k * blockDim.x + threadIdx.x);
}

// The running max of a thread's packs. 16-bit packs are compared two at a time in their own format
// (HMNMX2: a max is exact in any format, and a NaN loses to a number as in fmaxf) and widened once at
// the end, so a pack of 8 costs 4 instructions, not 16; the bits are those of fmaxf over the floats.
template <typename T, int VEC> struct PackMax {
    float m = NEG_INF;
    __device__ __forceinline__ void add(const Pack<T, VEC>& pack) {
#pragma unroll
        for (int i = 0; i < VEC; ++i) m = fmaxf(m, to_float(pack.v[i]));
    }
    __device__ __forceinline__ float value() const { return m; }
};
template <typename T2, typename T, int VEC> struct PackMax2 {
    T2 m = {T(NEG_INF), T(NEG_INF)};
    __device__ __forceinline__ void add(const Pack<T, VEC>& pack) {
        const T2* pairs = reinterpret_cast<const T2*>(pack.v);
#pragma unroll
        for (int i = 0; i < VEC / 2; ++i) m = __hmax2(m, pairs[i]);
    }
    __device__ __forceinline__ float value() const { return fmaxf(to_float(m.x), to_float(m.y)); }
};
template <int VEC> struct PackMax<__nv_bfloat16, VEC> : PackMax2<__nv_bfloat162, __nv_bfloat16, VEC> {};
template <int VEC> struct PackMax<__half, VEC> : PackMax2<__half2, __half, VEC> {};

// The two forms of e^{x - shift}: the difference first, or prescaled (b = shift·log2e).
struct ExpShifted {
    float shift;
    __device__ __forceinline__ float operator()(float x) const { return exp_shifted(x, shift); }
};
struct ExpLess {
    float b;
    __device__ __forceinline__ float operator()(float x) const { return exp2_less(x, b); }
};

// A held pack passed through an empty asm as its 32-bit words: the compiler cannot keep its elements widened
// to float from one pass over the slice to the next (twice the registers), so each pass widens them again.
template <typename T, int VEC> __device__ __forceinline__ Pack<T, VEC> unwidened(const Pack<T, VEC>& pack) {
    static_assert(sizeof(Pack<T, VEC>) == 16, "a held pack is 16 bytes");
    uint4 words;
    memcpy(&words, &pack, 16);
    asm volatile("" : "+r"(words.x), "+r"(words.y), "+r"(words.z), "+r"(words.w));
    Pack<T, VEC> out;
    memcpy(&out, &words, 16);
    return out;
}

// The sum of a thread's held packs' exps in order (pack_of(k): its k-th pack), then its loose element's.
template <typename T, int VEC, int PER, typename Packs, typename Exp>
__device__ __forceinline__ float held_sum(Packs pack_of, int begin, int end, int t, int stride, float loose, bool holds_loose, Exp exp_of) {
    float d = 0.0f;
#pragma unroll
    for (int k = 0; k < PER; ++k) {
        if (begin + k * stride + t < end) {
            const Pack<T, VEC> pack = pack_of(k);
#pragma unroll
            for (int i = 0; i < VEC; ++i) d = __fadd_rn(d, exp_of(to_float(pack.v[i])));
        }
    }
    return holds_loose ? __fadd_rn(d, exp_of(loose)) : d;
}

// exps_in_place's (m, d) over the thread's held packs (pack_of(k), pack begin + k·stride + t: in shared
// memory or in registers), then its loose element (fast_row's head or tail, if it holds one), read twice
// (max, then the sum of e^{x - m} in the same order, prescaled where prescaled<T>), the exps not kept. A -inf
// element adds exactly 0: 2^-inf for a finite max, and a thread whose elements are all -inf shifts by 0
// instead (exp_shift). ON_WARP: the shift is the warp's max, and the sums are added over the warp (the warp's
// (m, d) in every lane, as fast_row's clusters fold them: cluster_row_state).
template <typename T, int VEC, int PER, bool ON_WARP, typename Packs>
__device__ __forceinline__ State<float> held_state(Packs pack_of, int begin, int end, int t, int stride, float loose, bool holds_loose) {
    PackMax<T, VEC> packs_max;
#pragma unroll
    for (int k = 0; k < PER; ++k) {
        if (begin + k * stride + t < end) packs_max.add(pack_of(k));
    }
    float m = holds_loose ? fmaxf(packs_max.value(), loose) : packs_max.value();
    if constexpr (ON_WARP) m = warp_fmax(m);
    const float shift = exp_shift(m);
    const float d = prescaled<T>(shift) ? held_sum<T, VEC, PER>(pack_of, begin, end, t, stride, loose, holds_loose, ExpLess{__fmul_rn(shift, LOG2E)})
                                        : held_sum<T, VEC, PER>(pack_of, begin, end, t, stride, loose, holds_loose, ExpShifted{shift});
    return {m, ON_WARP ? warp_sum(d) : d};
}

// A block's logical index in start order (a ticket), for kernels whose blocks wait for each other
// when the grid is larger than what the GPU holds at once: every block with a smaller ticket has
// started, so a block only ever waits for blocks that are resident or can become resident, never for
// one queued behind it. The last ticket resets the counter for the next launch. sync[0] is the counter.
__device__ __forceinline__ unsigned start_ticket(unsigned* sync) {
    __shared__ unsigned ticket;
    if (threadIdx.x == 0) {
        ticket = atomicAdd(sync, 1u);
        if (ticket == gridDim.x - 1) atomicExch(sync, 0u);
    }
    __syncthreads();
    return ticket;
}

// A count that makes this thread's earlier writes visible to whoever reads it with load_acquire.
__device__ __forceinline__ void add_release(unsigned* counter) {
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(counter) : "memory");
}
__device__ __forceinline__ unsigned load_acquire(const unsigned* counter) {
    unsigned value;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(value) : "l"(counter) : "memory");
    return value;
}

// The row's (m, d) from the block states of its `slices` slices: each block publishes its state
// in row_partial[2·slice], counts itself in counters[0] (a release), waits until every slice has
// (acquire), and folds the states as fast_split_finish does (lane l folds slices l, l + 32, ..., then a
// butterfly), so all slices get the same bits. With STAGED 0, warp 0's lanes load two states at a time:
// one round trip to L2 for every 64 slices; with STAGED > 0 the block's threads load up to STAGED states
// at once into shared memory, one each (one round trip for every STAGED slices: fast_stream's hundreds,
// where fast_row keeps STAGED 0, which costs its kernels no shared memory or registers). The last block to
// leave resets both counters for the next launch, after the row's state is shared, so no block's outputs
// wait for it.
template <int STAGED>
__device__ __forceinline__ State<float> exchange_row(State<float> s, float* row_partial, unsigned* counters, int slice,
                                                     int slices) {
    __shared__ float row_state[2];
    const float2* states = reinterpret_cast<const float2*>(row_partial);
    if (threadIdx.x == 0) {
        __stcg(reinterpret_cast<float2*>(row_partial) + slice, make_float2(s.m, s.d));
        add_release(counters);
        while (load_acquire(counters) < (unsigned)slices) __nanosleep(20);
    }
    __syncthreads();
    FAST_STAMP(5);  // every slice of the row has published its state
    State<float> r = {NEG_INF, 0.0f};
    if constexpr (STAGED == 0) {
        constexpr int AHEAD = 2;
        if (threadIdx.x < 32) {
            for (int round = threadIdx.x; round < slices; round += 32 * AHEAD) {
                float2 ahead[AHEAD];
#pragma unroll
                for (int j = 0; j < AHEAD; ++j) if (round + 32 * j < slices) ahead[j] = __ldcg(states + round + 32 * j);
#pragma unroll
                for (int j = 0; j < AHEAD; ++j) if (round + 32 * j < slices) r = fast_merge(r, {ahead[j].x, ahead[j].y});
            }
        }
    } else {
        static_assert(STAGED % 32 == 0, "a lane's states continue from one staging to the next");
        __shared__ float2 staged[STAGED];
        for (int first = 0; first < slices; first += STAGED) {
            const int count = min(STAGED, slices - first);
            for (int j = threadIdx.x; j < count; j += blockDim.x) staged[j] = __ldcg(states + first + j);
            __syncthreads();
            if (threadIdx.x < 32) {
                for (int j = threadIdx.x; j < count; j += 32) r = fast_merge(r, {staged[j].x, staged[j].y});
            }
            __syncthreads();  // read before the next states land
        }
    }
    if (threadIdx.x < 32) {
        r = group_merge<32>(r);
        if (threadIdx.x == 0) { row_state[0] = r.m; row_state[1] = r.d; }
    }
    __syncthreads();
    if (threadIdx.x == 0 && atomicAdd(counters + 1, 1u) == (unsigned)slices - 1) {  // every slice has read the states
        atomicExch(counters, 0u);
        atomicExch(counters + 1, 0u);
    }
    return {row_state[0], row_state[1]};
}

// The cluster's mailboxes, where fast_row's slices leave their warps' states for each other: every warp of
// every block mails its (m, d) to every block of the cluster (st.async into the receiver's mailbox, which
// counts the bytes on its mbarrier), and each warp folds all of them (fold_warp_states), so no block waits
// at a barrier and every block gets the same bits. cluster_mailbox_open at the kernel's start; WARPS: the
// most warps a block of the kernel has.
template <int CLUSTER, int WARPS> struct ClusterMailbox {
    unsigned long long arrived;        // mbarrier: complete when every warp of the cluster's state has landed
    float2 state[CLUSTER * WARPS];     // state[r · warps + w]: warp w of block r's (m, d)
};
template <int CLUSTER, int WARPS> __device__ __forceinline__ ClusterMailbox<CLUSTER, WARPS>& cluster_mailbox() {
    __shared__ ClusterMailbox<CLUSTER, WARPS> mailbox;
    return mailbox;
}

// A mailbox in this block's shared memory that blocks of its cluster fill with st.async: at the kernel's
// start, its mbarrier (`arrived`) expects BYTES, and a relaxed cluster arrive says it is open (the
// senders' barrier.cluster.wait comes before their first st.async). mailbox_wait: until they have landed.
// mailbox_expect alone (thread 0) readies one more mailbox before the block's mailbox_open. The count of
// bytes is an immediate (topk.cu's mailboxes), or a register where it depends on the block size.
#define MAILBOX_EXPECT(arrived, bytes, constraint)                                                          \
    if (threadIdx.x == 0) {                                                                                 \
        const unsigned bar = static_cast<unsigned>(__cvta_generic_to_shared(&(arrived)));                   \
        asm volatile(                                                                                       \
            "mbarrier.init.shared::cta.b64 [%0], 1;\n"                                                      \
            "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"                                      \
            "fence.mbarrier_init.release.cluster;\n" ::"r"(bar), constraint(bytes) : "memory");              \
    }
template <int BYTES> __device__ __forceinline__ void mailbox_expect(unsigned long long& arrived) { MAILBOX_EXPECT(arrived, BYTES, "n") }
__device__ __forceinline__ void mailbox_expect(unsigned long long& arrived, unsigned bytes) { MAILBOX_EXPECT(arrived, bytes, "r") }
__device__ __forceinline__ void cluster_arrive_relaxed() { asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory"); }
template <int CLUSTER, int BYTES> __device__ __forceinline__ void mailbox_open(unsigned long long& arrived) {
    static_assert(CLUSTER <= 16, "a Hopper cluster has at most 16 blocks");
    mailbox_expect<BYTES>(arrived);
    cluster_arrive_relaxed();
}

// Until every mailbox of the cluster is open (each block's mailbox_open arrived): before a block's first st.async.
__device__ __forceinline__ void cluster_mailboxes_wait() { asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory"); }

// The address in block `block`'s shared memory (of the cluster) of what sits at `local` in this block's.
__device__ __forceinline__ unsigned in_block(const void* local, unsigned block) {
    unsigned to;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
                 : "=r"(to) : "r"(static_cast<unsigned>(__cvta_generic_to_shared(local))), "r"(block));
    return to;
}

__device__ __forceinline__ void mailbox_wait(const unsigned long long& arrived) {
    const unsigned bar = static_cast<unsigned>(__cvta_generic_to_shared(&arrived));
    unsigned done = 0;
    while (!done) {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(bar) : "memory");
    }
}

template <int CLUSTER, int WARPS> __device__ __forceinline__ void cluster_mailbox_open() {
    static_assert(CLUSTER <= 16, "a Hopper cluster has at most 16 blocks");
    mailbox_expect(cluster_mailbox<CLUSTER, WARPS>().arrived, CLUSTER * (blockDim.x / 32) * 8);
    cluster_arrive_relaxed();
}

// The row's (m, d) from `entries` warp states in shared memory, folded alike by every warp that reads them:
// lane l takes entries l, l + 32, ...; the largest m of all, then each d rescaled to it, added in entry order
// and over the lanes. No merge of states: one exp an entry.
__device__ __forceinline__ State<float> fold_warp_states(const float2* states, int entries) {
    const int lane = threadIdx.x % 32;
    float m = NEG_INF;
    for (int j = lane; j < entries; j += 32) m = fmaxf(m, states[j].x);
    m = warp_fmax(m);
    float d = 0.0f;
    for (int j = lane; j < entries; j += 32) d = __fadd_rn(d, __fmul_rn(states[j].y, fast_rescale(states[j].x, m)));
    return {m, warp_sum(d)};
}

// The row's (m, d) for the blocks of one Hopper cluster: lane r of each warp mails the warp's state to block r
// (st.async), and every warp waits for its block's mailbox to fill, then folds the cluster's warps in order
// (block-major), so every warp of every block gets the same bits, with no barrier in the block.
template <int CLUSTER, int WARPS> __device__ __forceinline__ State<float> cluster_row_state(State<float> warp) {
    ClusterMailbox<CLUSTER, WARPS>& mailbox = cluster_mailbox<CLUSTER, WARPS>();
    const int warps = blockDim.x / 32, lane = threadIdx.x % 32;
    cluster_mailboxes_wait();
    if (lane < CLUSTER) {
        unsigned rank;
        asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
        const unsigned to = in_block(&mailbox.state[rank * warps + threadIdx.x / 32], lane), bar = in_block(&mailbox.arrived, lane);
        asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];" ::"r"(to),
                     "f"(warp.m), "f"(warp.d), "r"(bar) : "memory");
    }
    mailbox_wait(mailbox.arrived);
    return fold_warp_states(mailbox.state, CLUSTER * warps);
}

// The row's (m, d) for a row of several clusters (fast_row_cluster's slices over the whole GPU), from the
// cluster's state `s` (the same bits in every block of the cluster): every block posts it as two 64-bit words, m and
// d each beside the launch's epoch (so a word of an earlier launch never passes for this one's, and no word needs
// resetting; relaxed stores and loads, each word read whole), into the row's copy of the words for its rank in the
// cluster, and warp 0 of every block polls its rank's copy: a copy is polled by one block a cluster, not by every
// block of the row (an L2 line polled by 128 blocks at once slows them all). Lane l folds clusters l, l + 32, ... in
// order, then a butterfly: every block gets the same bits, one L2 round trip after the last cluster posts.
// 2 words a block.
template <int CLUSTER>
__device__ __forceinline__ State<float> across_clusters(State<float> s, unsigned long long* words, unsigned epoch, long long row,
                                                        int slice, int slices) {
    __shared__ float2 row_found;  // warp 0's fold, for the whole block
    const int clusters = slices / CLUSTER;
    unsigned long long* copy = words + 2 * (row * slices + (long long)(slice % CLUSTER) * clusters);
    if (threadIdx.x == 0) {
        const unsigned long long tag = (unsigned long long)epoch << 32;
        asm volatile("st.relaxed.gpu.global.v2.u64 [%0], {%1, %2};" ::"l"(copy + 2 * (slice / CLUSTER)),
                     "l"(tag | __float_as_uint(s.m)), "l"(tag | __float_as_uint(s.d)) : "memory");
    }
    if (threadIdx.x < 32) {
        State<float> r = {NEG_INF, 0.0f};
        for (int c = threadIdx.x; c < clusters; c += 32) {
            unsigned long long m, d;
            do asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];" : "=l"(m), "=l"(d) : "l"(copy + 2 * c) : "memory");
            while ((unsigned)(m >> 32) != epoch || (unsigned)(d >> 32) != epoch);
            r = fast_merge(r, {__uint_as_float((unsigned)m), __uint_as_float((unsigned)d)});
        }
        r = group_merge<32>(r);
        if (threadIdx.x == 0) row_found = make_float2(r.m, r.d);
    }
    __syncthreads();
    return {row_found.x, row_found.y};
}

// Pack k of a thread's batch as floats, in slots k·VEC on: valid where the pack is `in` the batch, else 0.
template <typename T, int VEC, int N>
__device__ __forceinline__ void widen_pack(const Pack<T, VEC>& pack, bool in, int k, float (&v)[N], bool (&valid)[N]) {
#pragma unroll
    for (int i = 0; i < VEC; ++i) { valid[k * VEC + i] = in; v[k * VEC + i] = in ? to_float(pack.v[i]) : 0.0f; }
}

// A thread's state over the elements it holds in registers: max first (registers are free to
// read twice), then e_i = e^{x_i - m} in place and their sum, so each element costs ONE exp.
// As in online_step, a -inf element adds exactly 0 and a NaN makes d NaN.
template <int N> __device__ __forceinline__ State<float> exps_in_place(float (&v)[N], const bool (&valid)[N]) {
    float m = NEG_INF;
#pragma unroll
    for (int i = 0; i < N; ++i) if (valid[i]) m = fmaxf(m, v[i]);
    const float shift = exp_shift(m);
    float d = 0.0f;
#pragma unroll
    for (int i = 0; i < N; ++i) {
        v[i] = valid[i] ? exp_shifted(v[i], shift) : 0.0f;
        d = __fadd_rn(d, v[i]);
    }
    return {m, d};
}

// exps_in_place for a thread whose missing elements read as -inf (each then adds exactly 0, as a masked
// one does): no mask is held, so the registers go to the elements. ON_WARP: as in held_state, the exps are
// on the warp's max and the sums added over the warp.
template <bool ON_WARP, int N> __device__ __forceinline__ State<float> exps_in_place(float (&v)[N]) {
    float m = NEG_INF;
#pragma unroll
    for (int i = 0; i < N; ++i) m = fmaxf(m, v[i]);
    if constexpr (ON_WARP) m = warp_fmax(m);
    const float shift = exp_shift(m);
    float d = 0.0f;
#pragma unroll
    for (int i = 0; i < N; ++i) {
        v[i] = exp_shifted(v[i], shift);
        d = __fadd_rn(d, v[i]);
    }
    return {m, ON_WARP ? warp_sum(d) : d};
}

// Two floats into two consecutive T, rounded to nearest: one F2FP instruction for the 16-bit types.
__device__ __forceinline__ void from_float2(float* out, float a, float b) { out[0] = a; out[1] = b; }
__device__ __forceinline__ void from_float2(__half* out, float a, float b) {
    *reinterpret_cast<__half2*>(out) = __floats2half2_rn(a, b);
}
__device__ __forceinline__ void from_float2(__nv_bfloat16* out, float a, float b) {
    *reinterpret_cast<__nv_bfloat162*>(out) = __floats2bfloat162_rn(a, b);
}

template <typename T, int VEC> __device__ __forceinline__ Pack<T, VEC> to_pack(const float* f) {
    Pack<T, VEC> out;
    if constexpr (VEC == 1) {
        out.v[0] = from_float<T>(f[0]);
    } else {
#pragma unroll
        for (int i = 0; i < VEC; i += 2) from_float2(out.v + i, f[i], f[i + 1]);
    }
    return out;
}

// y_i = e_i · (e^{m_thread - m_row} / d_row): the thread's exps rescaled once, no second exp.
template <typename T, int VEC> __device__ __forceinline__ Pack<T, VEC> scaled(const float* e, float c) {
    float f[VEC];
#pragma unroll
    for (int i = 0; i < VEC; ++i) f[i] = __fmul_rn(e[i], c);
    return to_pack<T, VEC>(f);
}

// y_i = 2^{x_i·log2e - b} with b = m_row·log2e + log2 d_row (prescaled 16-bit rows of fast_row's HOLD 2).
template <typename T, int VEC> __device__ __forceinline__ Pack<T, VEC> normalised_less(const Pack<T, VEC>& in, float b) {
    float f[VEC];
#pragma unroll
    for (int i = 0; i < VEC; ++i) f[i] = exp2_less(to_float(in.v[i]), b);
    return to_pack<T, VEC>(f);
}

// y_i = e^{x_i - m_row} / d_row from the input pack, the exp taken again (fast_row's HOLD 2, fast_split_finish).
template <typename T, int VEC> __device__ __forceinline__ Pack<T, VEC> normalised(const Pack<T, VEC>& in, float m, float inv_d) {
    float f[VEC];
#pragma unroll
    for (int i = 0; i < VEC; ++i) f[i] = __fmul_rn(exp_shifted(to_float(in.v[i]), m), inv_d);
    return to_pack<T, VEC>(f);
}

// A row of fast_row (and of topk.cu) as an aligned body of whole 16-byte packs and at most 2·(VEC - 1) loose elements:
// the head before the row's first 16-byte boundary and the tail after its last whole pack (x and y
// start 16-byte aligned, so a row of any width loads 16 bytes at a time). Aligned rows have none;
// for a width that is a multiple of VEC, RowSplit(0, cols) is every row's split.
template <int VEC> struct RowSplit {
    int head, packs, loose;
    __device__ __forceinline__ RowSplit(long long row, int cols) {
        head = min(cols, static_cast<int>((VEC - row * cols % VEC) % VEC));
        packs = (cols - head) / VEC;
        loose = cols - packs * VEC;
    }
    // the column of loose element t < loose: the head's first, then the tail's
    __device__ __forceinline__ int loose_col(int t) const { return t < head ? t : head + packs * VEC + (t - head); }
};

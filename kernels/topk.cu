// Softmax + top-k: the k largest probabilities of each row and their indices.
//
// | kernel | idea                                                                                | global reads / writes per element |
// |--------|-------------------------------------------------------------------------------------|-----------------------------------|
// | topk   | one pass: online (m, d) AND a running top-k per warp, merged; for few rows, several | 1 / 0 (+ k per row)               |
// |        | blocks per row, the last one to finish merging their states; 16-byte loads into     |                                   |
// |        | registers, one batch ahead, at any width (fast_row's RowSplit: loose head and tail  |                                   |
// |        | elements taken separately)                                                          |                                   |
// | topk_cluster | topk whose chunks of a row form a Hopper cluster: states and lists mailed to the | 1 / 0 (+ k per row)         |
// |        | leader's shared memory (st.async, an mbarrier) instead of global memory and a counter |                                   |
//
// Fused (Milakov & Gimelshein 2018): SOFTMAX=true reads the logits once, keeps (m, d) with
// fast_split_partial's arithmetic and a sorted top-k of (value, index) per warp, merges both across
// warps and (for batch 1) blocks, and writes k probabilities e^{v - m} / d and indices.
// Unfused (topk_unfused in the registry): `fast` softmax (read x, write y), then this kernel with
// SOFTMAX=false selecting the top-k of y (read y again): 3 passes over the row instead of 1.
//
// The list: K = 32·R entries (R = 1 for k <= 32, 2 for k <= 64) spread over the warp's lanes, entry
// r·32 + lane in register r of that lane, sorted descending; an entry is a 64-bit key (topk_keys.cuh)
// holding value and index, so the bitonic networks compare one number. A bound goes with the list:
// an element below it is beaten by k elements of the row, so it cannot enter. The bound starts from
// the warp's first batch (seed_keys) and rises to the list's entry k - 1; with 64-entry lists it also
// rises to the block's floor (BlockFloor), which the warps share. An element costs one
// compare; the few that reach the bound (about k·ln(n/k) of n for random logits) wait in a 32-entry
// buffer per warp in shared memory, and a full buffer is sorted and merged into the list in one go
// (flush_candidates), where inserting each candidate into the list cost ~300 instructions.
// A block's warps merge their lists pairwise (tree_merge). The pool (select_pool) replaces sorting where
// all candidates are at hand: the keys at or above a bound that k of them reach gather in shared memory, and
// each key's rank among them (how many are larger) places it. A row's chunks merge their lists that way
// (merge_lists), and so does a chunk of one batch (POOLED: the launch sizes chunks so), with no warp lists.
// A cluster of such chunks agrees on a bound for the whole row first (row_bound): each chunk hands its leader
// only the few elements that reach it, unranked, and the leader ranks them once.
// k = 1 (K = 1, greedy decoding): no list; every lane holds its warp's best key, whose value is the
// bound, so a batch costs a compare of each lane's largest and a vote, and the merges take maxima; a chunk's
// (m, d) is then its threads' d summed on its best value, as a pooled chunk's (no merges of states).
#include "fast_common.cuh"
#include "topk_keys.cuh"

#define NO_VALUE __int_as_float(0x7fc00000)  // NaN: no bound yet

// TOPK_STAMP(stage): where a block has got to (block-uniform code). Nothing here; scripts/timeline_topk.py
// defines it as a barrier and a record of the time, for a timeline of a launch. A stage passed more than once
// (the pool's, 9 and 10) keeps its last time.
#ifndef TOPK_STAMP
#define TOPK_STAMP(stage)
#endif

template <bool B> struct Flag { static constexpr bool value = B; };  // a compile-time switch for a generic lambda

// The largest of a thread's batch slots (those valid, -inf if none), as a pairwise tree: the same value
// as folding them in order (fmaxf is exact and drops a NaN), in log2(N) dependent steps instead of N.
template <bool FULL, int N> __device__ __forceinline__ float batch_max(const float (&v)[N], const bool (&valid)[N]) {
    float level[N];
#pragma unroll
    for (int q = 0; q < N; ++q) level[q] = FULL || valid[q] ? v[q] : NEG_INF;
#pragma unroll
    for (int stride = 1; stride < N; stride *= 2) {
#pragma unroll
        for (int q = 0; q + stride < N; q += 2 * stride) level[q] = fmaxf(level[q], level[q + stride]);
    }
    return fmaxf(NEG_INF, level[0]);  // all NaN: -inf, as the fold from -inf gives
}

// A thread's batch (slots `valid`, largest `most`) folded into (m, d) as exps_in_place does (the same bits:
// an all -inf thread shifts by 0, so every e^{x - m} of -inf is exp2(-inf) = 0).
template <bool FULL, int N>
__device__ __forceinline__ State<float> fold_slots(State<float> s, const float (&v)[N], const bool (&valid)[N], float most) {
    const float shift = exp_shift(most);
    float d = 0.0f;
#pragma unroll
    for (int q = 0; q < N; ++q) d = __fadd_rn(d, FULL || valid[q] ? exp_shifted(v[q], shift) : 0.0f);
    return fast_merge(s, {most, d});
}

// The first of a thread's batch slots (valid ones) that holds `value`: its lowest column of it; 0 if none does.
template <bool FULL, int N> __device__ __forceinline__ int first_slot(const float (&v)[N], const bool (&valid)[N], float value) {
    int at = 0;
#pragma unroll
    for (int q = N - 1; q >= 0; --q) if ((FULL || valid[q]) && v[q] == value) at = q;
    return at;
}

// The loose element of a thread (head or tail, where it holds one) as a batch: slot 0, the others empty.
template <int N> __device__ __forceinline__ void loose_batch(float loose, bool holds_loose, float (&v)[N], bool (&valid)[N]) {
#pragma unroll
    for (int q = 0; q < N; ++q) { v[q] = q == 0 ? loose : 0.0f; valid[q] = q == 0 && holds_loose; }
}

// v[q] for a q known only at run time, without local memory: a tree of selects, one bit of q a level.
template <int N> __device__ __forceinline__ float slot_value(const float (&v)[N], int q) {
    float level[N];
#pragma unroll
    for (int i = 0; i < N; ++i) level[i] = v[i];
#pragma unroll
    for (int stride = 1; stride < N; stride *= 2) {
#pragma unroll
        for (int i = 0; i + stride < N; i += 2 * stride) level[i] = q & stride ? level[i + stride] : level[i];
    }
    return level[0];
}

// The row's column of slot q of a thread's batch: pack k = q / VEC of the batch at pack `base` of the
// aligned body, which starts at column `head`; or one loose element's column for every slot.
template <int VEC> struct BatchColumns {
    int head, base;
    __device__ __forceinline__ int operator()(int q) const { return head + (base + (q / VEC) * blockDim.x + threadIdx.x) * VEC + q % VEC; }
};
struct LooseColumn {
    int column;
    __device__ __forceinline__ int operator()(int) const { return column; }
};

// The bound before the list is full, from a warp's first batch: each lane's R-th largest value (NaN
// if it has fewer than R numbers), sorted across the lanes (returned: lane i's key); the value of key
// ceil(t/R) - 1 has R·ceil(t/R) >= t distinct elements at or above it (ranked_key), so with t = k an
// element below it cannot be among the row's k best.
template <bool FULL, int R, int N>
__device__ __forceinline__ Key seed_keys(const float (&v)[N], const bool (&valid)[N]) {
    float first = NEG_INF, second = NEG_INF;
    int count = 0;
#pragma unroll
    for (int q = 0; q < N; ++q) {
        if ((FULL || valid[q]) && v[q] == v[q]) {
            second = fmaxf(second, fminf(first, v[q]));
            first = fmaxf(first, v[q]);
            ++count;
        }
    }
    Key key = make_key(count >= R ? (R == 1 ? first : second) : NO_VALUE, threadIdx.x % 32);
    sort_lanes(key);
    return key;
}
template <int R> __device__ __forceinline__ Key ranked_key(Key sorted, int t) {
    return __shfl_sync(ALL_LANES, sorted, (t + R - 1) / R - 1);
}

// A block's floor, shared by its warps: warp w leaves the monotone bits of a value with ceil(k/warps)
// distinct elements of the chunk at or above it (0 until it has one; it only rises), so the smallest of
// them has k at or above it and no element below it is among the chunk's k best. Each warp's own list
// bound has only its own elements behind it; the floor lets a warp drop what the others have beaten.
// Read once after the block's first batch (every warp's seed is in) and whenever a warp flushes its buffer.
// SHARED (the warps share it) only for 64-entry lists (k > 32): at k = 8 it won 2 % at 512×32000 but lost 2 %
// at 4096×128256 and 6 % at batch 1 (docs/topk-notes.md); otherwise each warp keeps its own bound.
template <bool SHARED> struct BlockFloor {
    volatile unsigned* bits;  // 16 words of shared memory, zeroed before the first batch
    unsigned mine = 0;        // what this warp has left there
    __device__ __forceinline__ int rank(int k) const { const int warps = blockDim.x / 32; return (k + warps - 1) / warps; }
    __device__ __forceinline__ void leave(Key key) {
        const unsigned value_bits = (unsigned)(key >> 32);
        if (SHARED && value_bits > mine) {
            mine = value_bits;
            if (threadIdx.x % 32 == 0) bits[threadIdx.x / 32] = value_bits;
        }
    }
    __device__ __forceinline__ float value() const {  // NaN while a warp has left nothing
        if (!SHARED) return NO_VALUE;
        unsigned low = 0xffffffffu;
        for (int w = 0; w < blockDim.x / 32; ++w) low = min(low, bits[w]);
        return key_value((Key)low << 32);
    }
};

// Whether an element may still be among the k best: at or above the bound (ties go on, to be settled
// by index when merged); with no bound yet (NaN), every element may. One unordered compare: a NaN element
// goes on too (its key sorts below every number, so it never displaces one; a row of many NaNs flushes more).
__device__ __forceinline__ bool reaches(float v, float bound) { return !(v < bound); }

// The slots of a thread's batch whose elements reach the bound, as a bit mask.
template <bool FULL, int N> __device__ __forceinline__ unsigned reaching(const float (&v)[N], const bool (&valid)[N], float bound) {
    static_assert(N <= 32, "a slot a bit");
    unsigned left = 0;
#pragma unroll
    for (int q = 0; q < N; ++q) if ((FULL || valid[q]) && reaches(v[q], bound)) left |= 1u << q;
    return left;
}

// Sort the n <= 32 keys of a warp's buffer and merge them into its list.
template <int R> __device__ __forceinline__ void merge_buffer(Key (&list)[R], const Key* buffer, int n) {
    const int lane = threadIdx.x % 32;
    __syncwarp();
    Key candidates[R];
#pragma unroll
    for (int r = 0; r < R; ++r) candidates[r] = NO_KEY;
    if (lane < n) candidates[0] = buffer[lane];
    __syncwarp();  // read before the buffer is written again
    sort_lanes(candidates[0]);
    list_merge(list, candidates);
}

// merge_buffer, then the bound rises to the value of the list's entry k - 1 once the list holds k numbers,
// and to the block's floor.
template <int R, typename Floor>
__device__ __forceinline__ void flush_candidates(Key (&list)[R], const Key* buffer, int n, int k, float& seed, float& bound,
                                                 Floor& chunk_floor) {
    merge_buffer(list, buffer, n);
    chunk_floor.leave(kth_key(list, chunk_floor.rank(k)));
    seed = fmaxf(seed, chunk_floor.value());  // NaN (a warp has left nothing yet) keeps the seed
    bound = fmaxf(key_value(kth_key(list, k)), seed);  // NaN (list not full) gives the seed
}

// Append a thread's batch elements in `left` (the slots that reach the bound) to the warp's buffer (one
// per lane per round, a ballot placing them), flushing it whenever the next round would not fit; column(q)
// is the row's column of slot q. Returns the new fill.
template <int R, int N, typename Column, typename Floor>
__device__ __forceinline__ int gather_candidates(const float (&v)[N], unsigned left, Column column, Key* buffer, int buffered,
                                                 Key (&list)[R], int k, float& seed, float& bound, Floor& chunk_floor) {
    const int lane = threadIdx.x % 32;
    for (unsigned offering = __ballot_sync(ALL_LANES, left != 0); offering;
         offering = __ballot_sync(ALL_LANES, left != 0)) {
        if (buffered + __popc(offering) > 32) {
            flush_candidates(list, buffer, buffered, k, seed, bound, chunk_floor);
            buffered = 0;
#pragma unroll
            for (int q = 0; q < N; ++q) if (!reaches(v[q], bound)) left &= ~(1u << q);
            continue;
        }
        if (left != 0) {
            const int next = __ffs(left) - 1;
            left &= left - 1;
            buffer[buffered + __popc(offering & ((1u << lane) - 1))] = make_key(slot_value(v, next), column(next));
        }
        buffered += __popc(offering);
    }
    return buffered;
}

// Write the k entries of a row's list (warp 0): probabilities or, without SOFTMAX, the values.
template <typename T, int R, int SOFTMAX>
__device__ __forceinline__ void write_topk(const Key (&list)[R], State<float> s, int k, T* values, int* indices) {
    const float inv_d = 1.0f / s.d;
#pragma unroll
    for (int r = 0; r < R; ++r) {
        const int e = r * 32 + threadIdx.x % 32;
        if (e < k) {
            const float v = key_value(list[r]);
            values[e] = from_float<T>(SOFTMAX ? __fmul_rn(exp_shifted(v, s.m), inv_d) : v);
            indices[e] = key_index(list[r]);
        }
    }
}

// Shared memory of a block: warp w's 32-entry candidate buffer at w·K, then its list of K; or the pool.
template <int K> struct Pool { Key key[16 * K]; };

// Merge the warps' lists into warp 0's, pairwise in log2(warps) rounds: in round `stride`, warp
// w + stride leaves its list in the pool and warp w (a multiple of 2·stride) merges it.
template <int K> __device__ __forceinline__ void tree_merge(Pool<K>& pool, Key (&list)[K / 32]) {
    constexpr int R = K / 32;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    for (int stride = 1; stride < warps; stride *= 2) {
        if ((warp & (2 * stride - 1)) == stride) {
#pragma unroll
            for (int r = 0; r < R; ++r) pool.key[warp * K + r * 32 + lane] = list[r];
        }
        __syncthreads();
        if ((warp & (2 * stride - 1)) == 0 && warp + stride < warps) {
            Key other[R];
#pragma unroll
            for (int r = 0; r < R; ++r) other[r] = pool.key[(warp + stride) * K + r * 32 + lane];
            list_merge(list, other);
        }
    }
    __syncthreads();  // the pool is free again
}

// A chunk's largest value from its best key: -inf where the key holds no number (NO_KEY, or a NaN element's).
__device__ __forceinline__ float best_value(Key best) { return fmaxf(NEG_INF, key_value(best)); }

// The warp's d on `most`: each lane's d rescaled once from its m to `most`, summed over the warp (in every lane).
__device__ __forceinline__ float warp_d_on(State<float> s, float most) { return warp_sum(__fmul_rn(s.d, fast_rescale(s.m, most))); }

// k = 1: the chunk's best key and (m, d), in warp 0's `best` and `s`, from each warp's best key (`key`, in every
// lane) and each thread's (m, d): the largest of the warps' keys, whose value is the chunk's largest (-inf where
// it holds no number); each thread's d rescaled to it once, summed over the warp, then over the warps (as a
// pooled chunk's): two barriers and no merges of states.
template <int K, int SOFTMAX> __device__ __forceinline__ void block_best(Pool<K>& pool, Key key, State<float>& s, Key& best) {
    __shared__ float warp_d[16];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    if (lane == 0) pool.key[warp] = key;
    __syncthreads();
    best = warp_max(lane < warps ? pool.key[lane] : NO_KEY);
    const float most = best_value(best);
    if (SOFTMAX) {
        const float d = warp_d_on(s, most);
        if (lane == 0) warp_d[warp] = d;
    }
    __syncthreads();  // the pool is free again
    if (SOFTMAX) s = {most, warp_sum(lane < warps ? warp_d[lane] : 0.0f)};
}

// The pool: a block's candidates gathered in shared memory (up to CAP of them, the last K entries of Pool
// taking the answer) and placed by rank, with no sorting network: keys are distinct (value and index), so a
// key's rank among the candidates is how many of them are larger, and those ranked below k are the answer.

// How many of keys[0, n) are larger than `key`; with a stride, of keys[from], keys[from + stride], ... below n.
__device__ __forceinline__ int rank_among(const Key* keys, int n, Key key, int from = 0, int stride = 1) {
    int above[4] = {0, 0, 0, 0};
    int j = from;
    for (; j + 3 * stride < n; j += 4 * stride) {
#pragma unroll
        for (int u = 0; u < 4; ++u) above[u] += keys[j + u * stride] > key;
    }
    for (; j < n; j += stride) above[0] += keys[j] > key;
    return above[0] + above[1] + above[2] + above[3];
}

// Append `key` where `take` (a lane offers at most one a call; the whole warp calls): one atomicAdd a warp.
// A key past the pool's end is counted, not stored.
template <int CAP> __device__ __forceinline__ void pool_append(Key* pool, unsigned* taken, bool take, Key key) {
    const unsigned offered = __ballot_sync(ALL_LANES, take);
    if (offered == 0) return;
    const int lane = threadIdx.x % 32;
    unsigned base = 0;
    if (lane == 0) base = atomicAdd(taken, __popc(offered));
    const unsigned slot = __shfl_sync(ALL_LANES, base, 0) + __popc(offered & ((1u << lane) - 1));
    if (take && slot < CAP) pool[slot] = key;
}

// The j-th largest (repeats counted) of the value bits (a key's high word: monotone, NaN 0) of the `count` first
// lanes, in every lane; 0 where j > count. A REDUX a step, from the top or from the bottom, whichever is shorter.
__device__ __forceinline__ unsigned warp_jth(unsigned bits, int j, int count) {
    if (j > count) return 0u;
    const bool from_top = 2 * j <= count + 1;
    int left = from_top ? j : count - j + 1;  // values still to pass
    bool in = (int)(threadIdx.x % 32) < count;
    for (;;) {
        const unsigned next = from_top ? __reduce_max_sync(ALL_LANES, in ? bits : 0u)
                                       : __reduce_min_sync(ALL_LANES, in ? bits : 0xffffffffu);
        const int there = __popc(__ballot_sync(ALL_LANES, in && bits == next));
        if (there >= left) return next;
        left -= there;
        in = in && bits != next;
    }
}

// The largest of every thread's `own` and of the keys[j] (j < n, in shared memory, written before the block's
// last barrier) that have `need` of keys[0, n) at or above them, in every thread. Where each keys[j] has t
// elements at or above it and need·t >= k, that is a bound k elements reach. A second call needs a barrier
// between (select_pool starts with one) before warp_top is written again.
__device__ __forceinline__ Key ranked_bound(const Key* keys, int n, int need, Key own) {
    __shared__ Key warp_top[16];
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        const Key key = keys[j];
        if (rank_among(keys, n, key) + 1 >= need) own = max(own, key);  // `need` at or above it (distinct keys)
    }
    own = warp_max(own);
    if (threadIdx.x % 32 == 0) warp_top[threadIdx.x / 32] = own;
    __syncthreads();
    Key bound = NO_KEY;
    for (int w = 0; w < blockDim.x / 32; ++w) bound = max(bound, warp_top[w]);
    return bound;
}

// The k best of the keys that `gather(append, bound)` offers (append(take, key) in every lane of a warp at
// once, taking those at or above `bound`, which k of the row's elements reach, or NO_KEY), sorted
// into warp 0's list (NO_KEY past the last). If more than fit the pool, the k-th of those that did raises the
// bound and they are offered again: each round drops CAP - k of them at least (a row of ties; random logits
// fit at once). ANY_ORDER: where at most K are offered, all of them go to the list as gathered, unranked.
template <int K, bool ANY_ORDER = false, typename Gather>
__device__ __forceinline__ void select_pool(Pool<K>& pool, Key bound, int k, Key (&list)[K / 32], Gather gather) {
    constexpr int R = K / 32, CAP = 15 * K;
    __shared__ unsigned taken;
    __shared__ Key raised;
    Key* chosen = pool.key + CAP;
    int n;
    for (;;) {
        if (threadIdx.x == 0) taken = 0;
        __syncthreads();
        gather([&](bool take, Key key) { pool_append<CAP>(pool.key, &taken, take, key); }, bound);
        __syncthreads();
        TOPK_STAMP(9);  // the pool gathered
        n = taken;
        if (n <= CAP) break;
        for (int i = threadIdx.x; i < CAP; i += blockDim.x) {
            if (rank_among(pool.key, CAP, pool.key[i]) == k - 1) raised = pool.key[i];
        }
        __syncthreads();
        bound = raised;
    }
    if (ANY_ORDER && n <= K) {
        if (threadIdx.x < 32) {
#pragma unroll
            for (int r = 0; r < R; ++r) list[r] = r * 32 + threadIdx.x < n ? pool.key[r * 32 + threadIdx.x] : NO_KEY;
        }
        __syncthreads();  // the pool is free again
        return;
    }
    // each key's rank counted by a group of G lanes (a power of two: as many as the block has for n keys), a
    // G-th of the keys each, then summed across the group
    int G = 32;
    while (G > 1 && G * n > (int)blockDim.x) G /= 2;
    const int sub = threadIdx.x % G, groups = blockDim.x / G;
    for (int first = 0; first < n; first += groups) {  // the same trip count in every thread
        const int i = first + threadIdx.x / G;
        const Key key = i < n ? pool.key[i] : NO_KEY;
        int above = i < n ? rank_among(pool.key, n, key, sub, G) : 0;
        for (int offset = G / 2; offset > 0; offset /= 2) above += __shfl_xor_sync(ALL_LANES, above, offset);
        if (sub == 0 && i < n && above < k) chosen[above] = key;
    }
    __syncthreads();
    TOPK_STAMP(10);  // the pool ranked
    if (threadIdx.x < 32) {
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const int e = r * 32 + threadIdx.x;
            list[r] = e < min(n, k) ? chosen[e] : NO_KEY;
        }
    }
    __syncthreads();  // the pool is free again
}

// A key that k elements of the block reach (NO_KEY where fewer of its threads' best keys are numbers), from every
// thread's best key (`best`):
// each warp's t-th largest value (t = ceil(k / warps)), then, in every warp, the ceil(k / t)-th largest of those,
// as the smallest key of that value. `most`: the block's largest value (-inf where it holds no number).
__device__ __forceinline__ Key chunk_bound(Key best, int k, float& most) {
    __shared__ unsigned warp_tth[16], warp_top[16];
    const int lane = threadIdx.x % 32, warps = blockDim.x / 32, t = min(32, (k + warps - 1) / warps);
    const unsigned bits = (unsigned)(best >> 32);
    const unsigned tth = warp_jth(bits, t, 32), top = __reduce_max_sync(ALL_LANES, bits);
    if (lane == 0) {
        warp_tth[threadIdx.x / 32] = tth;
        warp_top[threadIdx.x / 32] = top;
    }
    __syncthreads();
    const bool held = lane < warps;
    most = best_value(lowest_key(__reduce_max_sync(ALL_LANES, held ? warp_top[lane] : 0u)));
    return lowest_key(warp_jth(held ? warp_tth[lane] : 0u, (k + t - 1) / t, warps));
}

// Merge the sorted lists of a row's chunks (`lists` of K keys, key i read by lists_keys(i)) with the whole
// block. Only a list's first k entries can be among the row's k best, and none below a bound that k of them
// reach: the largest entry k - 1 of a list, or an entry t - 1 (t = ceil(k / lists)) that ceil(k / t) lists'
// entries t - 1 reach (up to 32 lists: by value, each warp on its own). The entries at or above it go through
// the pool. `meanwhile` runs in every thread while the bound's loads are in flight. The answer lands in warp 0's list.
template <int K, typename Load, typename Meanwhile>
__device__ __forceinline__ void merge_lists(Load lists_keys, int lists, int k, Pool<K>& pool, Key (&list)[K / 32],
                                            Meanwhile meanwhile) {
    constexpr int R = K / 32;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    const int t = (k + lists - 1) / lists;
    Key bound;
    if (lists <= 32) {  // every warp takes the bound from the lists' entries itself: no barrier
        const bool held = lane < lists;
        const unsigned entry_t = held ? (unsigned)(lists_keys(lane * K + t - 1) >> 32) : 0u;
        const unsigned entry_k = held ? (unsigned)(lists_keys(lane * K + k - 1) >> 32) : 0u;
        meanwhile();
        bound = lowest_key(max(warp_jth(entry_t, (k + t - 1) / t, lists), __reduce_max_sync(ALL_LANES, entry_k)));
    } else {
        Key* entries_t = pool.key;  // entry t - 1 of each list, before the pool fills
        Key own = NO_KEY;
        for (int l = threadIdx.x; l < lists; l += blockDim.x) {
            entries_t[l] = lists_keys(l * K + t - 1);
            own = max(own, lists_keys(l * K + k - 1));
        }
        meanwhile();
        __syncthreads();
        bound = ranked_bound(entries_t, lists, (k + t - 1) / t, own);
    }
    TOPK_STAMP(11);  // the lists' bound
    select_pool(pool, bound, k, list, [&](auto append, Key bound) {
        for (int l = warp; l < lists; l += warps) {
#pragma unroll
            for (int r = 0; r < R; ++r) {
                const Key key = r * 32 + lane < k ? lists_keys(l * K + r * 32 + lane) : NO_KEY;
                append(key != NO_KEY && key >= bound, key);
            }
        }
    });
}

// This thread's packs of the batch at pack `base` (those below end) as floats.
template <bool FULL, typename T, int VEC, int PER>
__device__ __forceinline__ void batch_floats(int base, int end, const Pack<T, VEC> (&packs)[PER], float (&v)[PER * VEC],
                                             bool (&valid)[PER * VEC]) {
#pragma unroll
    for (int k = 0; k < PER; ++k) widen_pack(packs[k], FULL || base + k * blockDim.x + threadIdx.x < end, k, v, valid);
}

// A row's (m, d) in warp 0 from its `chunks` chunks' states (state(j): chunk j's (m, d), a float2): lane l folds
// chunks l, l + 32, ..., then a butterfly, as fast_split_finish does. Where chunks <= LANES (a power of two), the
// butterfly over the first LANES lanes alone, then broadcast: the same bits, as the lanes past the chunks hold
// (-inf, 0), which a merge leaves unchanged.
template <int LANES = 32, typename LoadState> __device__ __forceinline__ void fold_states(State<float>& s, int chunks, LoadState state) {
    if (threadIdx.x >= 32) return;
    s = {NEG_INF, 0.0f};
#pragma unroll 4
    for (int j = threadIdx.x; j < chunks; j += 32) {
        const float2 chunk = state(j);
        s = fast_merge(s, {chunk.x, chunk.y});
    }
    s = group_merge<LANES>(s);
    if (LANES < 32) s = {__shfl_sync(ALL_LANES, s.m, 0), __shfl_sync(ALL_LANES, s.d, 0)};
}
// The fewest lanes, a power of two, that hold n chunk states one a lane (n <= 32).
__host__ __device__ constexpr int state_lanes(int n) { return n <= 1 ? 1 : 2 * state_lanes((n + 1) / 2); }

// A row's (m, d) and k best from its `chunks` chunks' states (state(j): chunk j's (m, d), a float2) and
// sorted lists (key(i): entry i of the lists laid end to end, K entries a list), with the whole block
// (k = 1: warp 0 alone); the answer lands in warp 0's s and list.
template <int K, int LANES = 32, typename LoadState, typename LoadKey>
__device__ __forceinline__ void merge_chunks(Pool<K>& pool, Key (&list)[K == 1 ? 1 : K / 32], State<float>& s, int chunks, int k,
                                             LoadState state, LoadKey key) {
    const auto fold = [&] { fold_states<LANES>(s, chunks, state); };
    if constexpr (K == 1) {  // warp 0 alone: lane l takes the best of chunks l, l + 32, ...
        if (threadIdx.x >= 32) return;
        Key best = NO_KEY;
        for (int j = threadIdx.x; j < chunks; j += 32) best = max(best, key(j));
        list[0] = warp_max(best);
        fold();
    } else {
        merge_lists<K>(key, chunks, k, pool, list, fold);
    }
}

// The mailbox of a cluster's leader (rank 0), where the row's CLUSTER chunks leave their (m, d) and list:
// its mbarrier completes when all their bytes have landed (st.async counts them), so no chunk waits for
// another and nothing goes through global memory.
template <int K, int CLUSTER> struct TopkMailbox {
    unsigned long long arrived;  // mbarrier
    float2 state[CLUSTER];       // chunk r's (m, d)
    Key keys[CLUSTER * K];       // chunk r's list at r·K
};
template <int K, int CLUSTER> __device__ __forceinline__ TopkMailbox<K, CLUSTER>& topk_mailbox() {
    __shared__ TopkMailbox<K, CLUSTER> mailbox;
    return mailbox;
}
__host__ __device__ constexpr int mail_bytes(int K) { return 8 + 8 * K; }  // a chunk's state and its K keys

// Every block's mailbox for the row's bound in a cluster of pooled chunks (CANDIDATES below): a word from each chunk.
template <int CLUSTER> struct BoundMailbox {
    unsigned long long arrived;  // mbarrier
    unsigned bits[CLUSTER];      // chunk r's bound (a key's high word)
};
template <int CLUSTER> __device__ __forceinline__ BoundMailbox<CLUSTER>& bound_mailbox() {
    __shared__ BoundMailbox<CLUSTER> mailbox;
    return mailbox;
}

// The row's bound from every chunk's `bits` (the value bits of a bound that t of its elements reach), in every
// thread: the `need`-th largest of them (with need·t >= k, k elements of the row reach it). Thread r mails this
// block's bits to block r; the cluster's mailboxes are open (cluster_mailboxes_wait) before.
template <int CLUSTER> __device__ __forceinline__ Key row_bound(unsigned bits, int need) {
    BoundMailbox<CLUSTER>& mailbox = bound_mailbox<CLUSTER>();
    if (threadIdx.x < CLUSTER) {
        unsigned rank;
        asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
        const unsigned to = in_block(&mailbox.bits[rank], threadIdx.x), bar = in_block(&mailbox.arrived, threadIdx.x);
        asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(to), "r"(bits), "r"(bar)
                     : "memory");
    }
    mailbox_wait(mailbox.arrived);
    const int lane = threadIdx.x % 32;
    return lowest_key(warp_jth(lane < CLUSTER ? mailbox.bits[lane] : 0u, need, CLUSTER));
}

// Warp 0 mails this chunk's (m, d) and list (every lane's K / 32 keys; k = 1: lane 0's best) to the leader, whose
// mailbox is open (cluster_mailboxes_wait) before.
template <int K, int CLUSTER> __device__ __forceinline__ void topk_mail_leader(State<float> s, const Key (&list)[K == 1 ? 1 : K / 32]) {
    constexpr int R = K == 1 ? 1 : K / 32;
    TopkMailbox<K, CLUSTER>& mailbox = topk_mailbox<K, CLUSTER>();
    if (threadIdx.x >= 32) return;
    const int lane = threadIdx.x;
    unsigned rank;
    asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    const unsigned bar = in_block(&mailbox.arrived, 0);
    if (lane == 0)
        asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];" ::"r"(
                         in_block(&mailbox.state[rank], 0)), "f"(s.m), "f"(s.d), "r"(bar) : "memory");
#pragma unroll
    for (int r = 0; r < R; ++r) {
        if (K > 1 || lane == 0)
            asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b64 [%0], %1, [%2];" ::"r"(
                             in_block(&mailbox.keys[rank * K + r * 32 + lane], 0)), "l"(list[r]), "r"(bar) : "memory");
    }
}

// Block c of a row folds chunk c of the row's aligned body (RowSplit: 16-byte packs at any width) as
// fast_split_partial does, and each warp keeps the top-k of what its lanes read; where the width is not
// a multiple of VEC (LOOSE), the first threads of chunk 0 then take the loose head and tail elements,
// one each, as a last batch. The warps' lists merge in warp 0 (POOLED, a chunk of one batch: the chunk's
// elements go through the pool instead, into warp 0's list). With one chunk per row the block writes
// the row's answer; with several (few rows: latency) it leaves the chunk's (m, d) and sorted list,
// and the row's last block to arrive (a counter per row, back to 0 after) merges them: one launch; or,
// where the chunks form a cluster (CLUSTER > 1), they mail them to the leader, which merges them alike
// (CANDIDATES: the chunks' elements that reach the row's bound, through the pool).
// Each thread loads its packs of the next batch (16-byte loads into registers) before it works on this one.
template <typename T, int VEC, int PER, int K, bool LOOSE, bool POOLED, int CLUSTER, int SOFTMAX>
__device__ __forceinline__ void topk_row_chunk(const T* __restrict__ x, T* __restrict__ values, int* __restrict__ indices,
                                               float* __restrict__ partial, Key* __restrict__ partial_keys,
                                               unsigned* __restrict__ arrivals, int cols, int chunks, int k) {
    constexpr int R = K == 1 ? 1 : K / 32, N = PER * VEC;
    // CANDIDATES: a cluster of pooled chunks agrees on a bound for the row first (row_bound), and each chunk mails
    // what reaches it, in any order (a few per chunk for random logits), or its k best where more than K do
    constexpr bool CANDIDATES = CLUSTER > 1 && POOLED && K > 1;
    const int t = (k + CLUSTER - 1) / CLUSTER;  // CANDIDATES: each chunk's share of k
    TOPK_STAMP(0);  // the block starts
    if constexpr (CANDIDATES) mailbox_expect<CLUSTER * 4>(bound_mailbox<CLUSTER>().arrived);
    if constexpr (CLUSTER > 1) mailbox_open<CLUSTER, CLUSTER * mail_bytes(K)>(topk_mailbox<K, CLUSTER>().arrived);
    __shared__ Pool<K> pool;
    __shared__ bool last;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const long long row = blockIdx.x / chunks;
    const int c = blockIdx.x % chunks;
    const RowSplit<VEC> split(LOOSE ? row : 0, cols);
    const Pack<T, VEC>* xr = reinterpret_cast<const Pack<T, VEC>*>(x + row * cols + split.head);
    const int chunk = (split.packs + chunks - 1) / chunks;
    const int begin = c * chunk, end = min(split.packs, begin + chunk);
    const bool holds_loose = LOOSE && c == 0 && threadIdx.x < split.loose;
    const int loose_col = split.loose_col(threadIdx.x);
    const float loose = holds_loose ? to_float(x[row * cols + loose_col]) : 0.0f;
    Key list[R];
#pragma unroll
    for (int r = 0; r < R; ++r) list[r] = NO_KEY;
    Key* buffer = pool.key + warp * K;
    int buffered = 0;
    float seed = NO_VALUE, bound = NO_VALUE;
    constexpr bool SHARED_FLOOR = K > 32;  // BlockFloor
    __shared__ unsigned floor_bits[16];
    BlockFloor<SHARED_FLOOR> chunk_floor = {floor_bits};
    State<float> s = {NEG_INF, 0.0f};
    const int step = PER * blockDim.x;
    float v[N];
    bool valid[N];
    // One batch, its slot q at column(q): fold and select. A full batch (every thread's packs below end,
    // Flag<true>) is compiled without the bounds checks. A batch of the body is `ordered`: its columns follow
    // every column the block has read, so an element equal to a value already held loses the tie; the loose
    // elements (head and tail) come last but are not.
    const auto work = [&](auto column, bool first, bool ordered, auto full) {
        constexpr bool FULL = decltype(full)::value;
        const float most = batch_max<FULL, N>(v, valid);
        if constexpr (K == 1) {  // k = 1: the warp's best key in every lane; the bound is its value
            // each element on its own while there is no number yet (NaN takes every element), and for the loose ones
            const bool per_element = bound != bound || !ordered;  // the same in every lane
            if (per_element || __any_sync(ALL_LANES, most > bound)) {  // else rare: a new largest in the warp
                if (per_element) {
#pragma unroll
                    for (int q = 0; q < N; ++q) {
                        if ((FULL || valid[q]) && reaches(v[q], bound)) list[0] = max(list[0], make_key(v[q], column(q)));
                    }
                } else if (most > bound) {  // the first slot holding it: the lane's lowest column of that value
                    list[0] = make_key(most, column(first_slot<FULL, N>(v, valid, most)));
                }
                list[0] = warp_max(list[0]);
                bound = key_value(list[0]);
            }
        } else {
            if (first) {
                const Key sorted = seed_keys<FULL, R, N>(v, valid);
                bound = seed = key_value(ranked_key<R>(sorted, k));
                chunk_floor.leave(ranked_key<R>(sorted, chunk_floor.rank(k)));
                if constexpr (SHARED_FLOOR) {  // the block's first batch is the same in every warp
                    __syncthreads();  // every warp's seed has left the floor
                    bound = seed = fmaxf(seed, chunk_floor.value());
                }
            }
        }
        // k > 1: the fold before the selection's branch, so that its compares fill the exponentials' latency
        if (SOFTMAX) s = fold_slots<FULL>(s, v, valid, most);
        if constexpr (K > 1) {
            const unsigned left = reaching<FULL, N>(v, valid, bound);
            if (__any_sync(ALL_LANES, left != 0))  // rare once the list holds large values
                buffered = gather_candidates<R, N>(v, left, column, buffer, buffered, list, k, seed, bound, chunk_floor);
        }
    };
    Pack<T, VEC> ahead[PER];  // this thread's packs of the next batch
    const auto load_ahead = [&](int base) {
#pragma unroll
        for (int k = 0; k < PER; ++k) {
            const int p = base + k * blockDim.x + threadIdx.x;
            if (p < end) ahead[k] = xr[p];
        }
    };
    load_ahead(begin);
    if (SHARED_FLOOR) {
        if (lane == 0) floor_bits[warp] = 0;
        __syncthreads();  // every warp's word is zero before any is read
    }
    // POOLED (k > 1), a chunk of one batch (`ahead` holds it): folded, then its k best selected through the pool
    // from a bound that k of its elements reach (chunk_bound), or, CANDIDATES, its elements that reach the row's
    // bound (unranked where at most K do), instead of the warps' lists and their merge; its (m, d) is the sum of its
    // threads' d on its largest value (no block merge of states).
    bool pooled = false;
    Key bound_of_row = NO_KEY;  // CANDIDATES
    if constexpr (POOLED && K > 1) {
        pooled = begin < end && end - begin <= step;
        if (pooled) {
            batch_floats<false, T, VEC, PER>(begin, end, ahead, v, valid);
            const float most = batch_max<false, N>(v, valid);
            State<float> mine = {NEG_INF, 0.0f};  // this thread's (m, d)
            if (SOFTMAX) mine = fold_slots<false>(mine, v, valid, most);
            const Key loose_key = make_key(loose, loose_col);
            if constexpr (LOOSE) {  // the loose elements folded as one more batch, as below (selected with the batch)
                float lv[N];
                bool lvalid[N];
                loose_batch(loose, holds_loose, lv, lvalid);
                if (SOFTMAX) mine = fold_slots<false>(mine, lv, lvalid, batch_max<false, N>(lv, lvalid));
            }
            const BatchColumns<VEC> column = {split.head, begin};
            // the thread's best key: its largest value at its lowest column (a NaN where it holds only NaN)
            const int at = first_slot<false, N>(v, valid, most);
            Key best = valid[0] ? make_key(slot_value(v, at), column(at)) : NO_KEY;  // valid slots come first
            if (LOOSE && holds_loose) best = max(best, loose_key);
            TOPK_STAMP(1);  // the batch loaded and folded
            float chunk_most;
            Key bound;
            if constexpr (CANDIDATES) {
                const unsigned bits = (unsigned)(chunk_bound(best, t, chunk_most) >> 32);
                cluster_mailboxes_wait();
                bound = bound_of_row = row_bound<CLUSTER>(bits, (k + t - 1) / t);
            } else {
                bound = chunk_bound(best, k, chunk_most);
            }
            // the chunk's d on its largest value: each thread's rescaled once, summed over the warp, then (after the
            // pool's barriers) over the warps (warp 0's sum is the one mailed); no merges of states
            __shared__ float warp_d[16];
            if (SOFTMAX) {
                const float d = warp_d_on(mine, chunk_most);
                if (lane == 0) warp_d[warp] = d;
            }
            TOPK_STAMP(2);  // the chunk's bound (CANDIDATES: the row's)
            select_pool<K, CANDIDATES>(pool, bound, k, list, [&](auto append, Key bound) {
                unsigned left = reaching<false, N>(v, valid, key_value(bound));  // by value: ties and NaN settled by key
                while (__any_sync(ALL_LANES, left != 0)) {
                    Key key = NO_KEY;
                    if (left != 0) {
                        const int q = __ffs(left) - 1;
                        left &= left - 1;
                        key = make_key(slot_value(v, q), column(q));
                    }
                    append(key != NO_KEY && key >= bound, key);
                }
                if constexpr (LOOSE) append(holds_loose && loose_key >= bound, loose_key);
            });
            if (SOFTMAX) s = {chunk_most, warp_sum(lane < blockDim.x / 32 ? warp_d[lane] : 0.0f)};
        }
    }
    for (int base = begin; !pooled && base < end; base += step) {
        Pack<T, VEC> packs[PER];
#pragma unroll
        for (int k = 0; k < PER; ++k) packs[k] = ahead[k];
        load_ahead(base + step);  // in flight while this batch is worked on
        const BatchColumns<VEC> column = {split.head, base};
        if (base + step <= end) {
            batch_floats<true, T, VEC, PER>(base, end, packs, v, valid);
            work(column, base == begin, true, Flag<true>());
        } else {
            batch_floats<false, T, VEC, PER>(base, end, packs, v, valid);
            work(column, base == begin, true, Flag<false>());
        }
    }
    if (LOOSE && !pooled) {  // the loose elements as one more batch
        loose_batch(loose, holds_loose, v, valid);
        work(LooseColumn{loose_col}, false, false, Flag<false>());
    }
    if (K > 1 && buffered > 0) flush_candidates(list, buffer, buffered, k, seed, bound, chunk_floor);
    TOPK_STAMP(3);  // the chunk's elements selected (the pool's k best, or the warps' lists)
    if constexpr (K == 1) {
        block_best<K, SOFTMAX>(pool, list[0], s, list[0]);
    } else if (!pooled) {
        // each warp's (m, d) on its best value (its list's entry 0: the largest element reaches every bound), then
        // the chunk's on the largest of those, in warp 0 once the tree merge's barriers have published them
        __shared__ float warp_m[16], warp_d[16];
        if (SOFTMAX) {
            const float most = best_value(__shfl_sync(ALL_LANES, list[0], 0));
            const float d = warp_d_on(s, most);
            if (lane == 0) { warp_m[warp] = most; warp_d[warp] = d; }
        }
        tree_merge(pool, list);  // a warp's list goes where its buffer was
        if (SOFTMAX && warp == 0) {
            const int warps = blockDim.x / 32;
            const float most = best_value(__shfl_sync(ALL_LANES, list[0], 0));
            s = {most, warp_sum(lane < warps ? __fmul_rn(warp_d[lane], fast_rescale(warp_m[lane], most)) : 0.0f)};
        }
    }
    TOPK_STAMP(4);  // the chunk's (m, d) and list in warp 0
    if constexpr (CLUSTER > 1) {  // the chunks of a row are a cluster: its leader merges them from its mailbox
        if (!CANDIDATES || !pooled) cluster_mailboxes_wait();
        if (CANDIDATES && !pooled) bound_of_row = row_bound<CLUSTER>(0u, (k + t - 1) / t);  // a chunk with no pack: no bound
        topk_mail_leader<K, CLUSTER>(s, list);
        TOPK_STAMP(5);  // mailed to the leader
        if (c != 0) return;
        const TopkMailbox<K, CLUSTER>& mailbox = topk_mailbox<K, CLUSTER>();
        mailbox_wait(mailbox.arrived);
        TOPK_STAMP(6);  // the leader: every chunk's mail has landed
        const auto state = [&](int j) { return mailbox.state[j]; };
        if constexpr (CANDIDATES) {  // the chunks' keys at or above the row's bound, through the pool
            fold_states<state_lanes(CLUSTER)>(s, CLUSTER, state);
            select_pool(pool, bound_of_row, k, list, [&](auto append, Key bound) {
                for (int i = threadIdx.x; i < CLUSTER * K; i += blockDim.x) {  // the same trip count in a warp
                    const Key key = mailbox.keys[i];
                    append(key != NO_KEY && key >= bound, key);
                }
            });
        } else {
            merge_chunks<K, state_lanes(CLUSTER)>(pool, list, s, CLUSTER, k, state, [&](int i) { return mailbox.keys[i]; });
        }
        TOPK_STAMP(7);  // the leader: the row's (m, d) and k best
        if (warp == 0) write_topk<T, R, SOFTMAX>(list, s, k, values + row * k, indices + row * k);
        TOPK_STAMP(8);  // the leader: written
        return;
    }
    if (warp == 0) {
        if (chunks == 1) {
            write_topk<T, R, SOFTMAX>(list, s, k, values + row * k, indices + row * k);
        } else {
            if (lane == 0) { partial[2 * blockIdx.x] = s.m; partial[2 * blockIdx.x + 1] = s.d; }
#pragma unroll
            for (int r = 0; r < R; ++r) if (K > 1 || lane == 0) partial_keys[(long long)blockIdx.x * K + r * 32 + lane] = list[r];
            __threadfence();  // this chunk's state is visible before the counter says so
        }
    }
    if (chunks == 1) return;
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(arrivals + row, 1u) == (unsigned)chunks - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    const float* row_partial = partial + 2 * row * chunks;
    const Key* row_keys = partial_keys + row * chunks * K;
    merge_chunks<K>(
        pool, list, s, chunks, k, [&](int j) { return make_float2(__ldcg(row_partial + 2 * j), __ldcg(row_partial + 2 * j + 1)); },
        [&](int i) { return __ldcg(row_keys + i); });
    if (warp != 0) return;
    write_topk<T, R, SOFTMAX>(list, s, k, values + row * k, indices + row * k);
    if (lane == 0) arrivals[row] = 0;  // ready for the next launch
}

// One block per chunk of a row; several chunks merge through global memory (the last block to arrive).
// Launch bounds: the lists take up to 96 registers, so one 512-thread block an SM (no cap below 128);
// k = 1 with the rule's batch of 16 elements a thread keeps to 64, two such blocks an SM (four of 256 hold
// 512 rows in one wave); a wider batch (N = 32) would spill there.
constexpr int min_blocks(int K, int N) { return K == 1 && N <= 16 ? 2 : 1; }
template <typename T, typename Acc, int VEC, int PER, int K, bool LOOSE, bool POOLED, int SOFTMAX>
__global__ void __launch_bounds__(512, min_blocks(K, PER * VEC)) topk(const T* __restrict__ x, T* __restrict__ values, int* __restrict__ indices,
                                            float* __restrict__ partial, Key* __restrict__ partial_keys,
                                            unsigned* __restrict__ arrivals, int rows, int cols, int chunks, int k) {
    topk_row_chunk<T, VEC, PER, K, LOOSE, POOLED, 1, SOFTMAX>(x, values, indices, partial, partial_keys, arrivals, cols, chunks, k);
}

// topk whose CLUSTER chunks of a row form a Hopper cluster: the chunks mail their (m, d) and list into the
// leader's shared memory (no fence, counter or L2 round trip), and the leader merges them as the last block does.
template <typename T, typename Acc, int VEC, int PER, int K, bool LOOSE, bool POOLED, int CLUSTER, int SOFTMAX>
__global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(512, min_blocks(K, PER * VEC))
topk_cluster(const T* __restrict__ x, T* __restrict__ values, int* __restrict__ indices, float* __restrict__ partial,
             Key* __restrict__ partial_keys, unsigned* __restrict__ arrivals, int rows, int cols, int chunks, int k) {
    topk_row_chunk<T, VEC, PER, K, LOOSE, POOLED, CLUSTER, SOFTMAX>(x, values, indices, partial, partial_keys, arrivals, cols,
                                                                     CLUSTER, k);
}

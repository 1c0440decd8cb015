// The sorted lists of topk.cu: an entry is one 64-bit key that orders as the reference does (larger
// value first, ties to the lower index, NaN below -inf), so a compare-exchange is one unsigned compare.
#pragma once

typedef unsigned long long Key;

#define NO_KEY 0ull  // the empty entry: below every element
#define ALL_LANES 0xffffffffu

// High word: the value's bits made monotone as unsigned (sign flipped for +, all bits for -), with
// -0 taken as +0 (they tie) and NaN as 0; low word: ~index, so that the lower index is the larger key.
__device__ __forceinline__ Key make_key(float v, int index) {
    unsigned bits = __float_as_uint(__fadd_rn(v, 0.0f));  // -0 + 0 = +0
    bits = v != v ? 0u : bits ^ (bits >> 31 ? 0xffffffffu : 0x80000000u);
    return (Key)bits << 32 | (0xffffffffu - (unsigned)index);
}

// The value back (a NaN element, and the empty entry, give NaN) and the index.
__device__ __forceinline__ float key_value(Key key) {
    const unsigned bits = (unsigned)(key >> 32);
    return __uint_as_float(bits ^ (bits >> 31 ? 0x80000000u : 0xffffffffu));
}
__device__ __forceinline__ int key_index(Key key) { return (int)(0xffffffffu - (unsigned)key); }

// The smallest key whose high word is `value_bits`: every element of that value or above is at or above it.
__device__ __forceinline__ Key lowest_key(unsigned value_bits) { return (Key)value_bits << 32; }

// Entry k - 1 of a list (entry r·32 + lane in register r of that lane), in every lane.
template <int R> __device__ __forceinline__ Key kth_key(const Key (&list)[R], int k) {
    return __shfl_sync(ALL_LANES, k <= 32 ? list[0] : list[R - 1], (k - 1) % 32);
}

// The largest key of the warp, in every lane: the largest high word, then the largest low word among the
// keys that hold it (two REDUX instructions).
__device__ __forceinline__ Key warp_max(Key key) {
    const unsigned high = __reduce_max_sync(ALL_LANES, (unsigned)(key >> 32));
    const unsigned low = __reduce_max_sync(ALL_LANES, (unsigned)(key >> 32) == high ? (unsigned)key : 0u);
    return (Key)high << 32 | low;
}

// One step of a bitonic network between lanes lane and lane ^ stride: the lower lane keeps the
// larger key of the pair in a descending run, the smaller in an ascending one.
__device__ __forceinline__ void exchange_lanes(Key& key, int stride, bool descending) {
    const Key other = __shfl_xor_sync(ALL_LANES, key, stride);
    const bool lower = (threadIdx.x & stride) == 0;
    if ((other > key) == (lower == descending)) key = other;
}

// Sort 32 keys, one per lane, descending: a bitonic sort (runs of `size` lanes alternate direction).
__device__ __forceinline__ void sort_lanes(Key& key) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int size = 2; size <= 32; size *= 2) {
#pragma unroll
        for (int stride = size / 2; stride > 0; stride /= 2) exchange_lanes(key, stride, (lane & size) == 0);
    }
}

// Keep the largest 32·R of two sorted lists: entry e against the other's entry K-1-e leaves the top K
// in a bitonic order, then a bitonic merge sorts them (entries e and e + 32 sit in one lane).
template <int R> __device__ __forceinline__ void list_merge(Key (&list)[R], const Key (&other)[R]) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int r = 0; r < R; ++r) {
        const Key mirrored = __shfl_sync(ALL_LANES, other[R - 1 - r], 31 - lane);
        if (mirrored > list[r]) list[r] = mirrored;
    }
    if (R == 2 && list[R - 1] > list[0]) {
        const Key first = list[0];
        list[0] = list[R - 1];
        list[R - 1] = first;
    }
#pragma unroll
    for (int stride = 16; stride > 0; stride /= 2) {
#pragma unroll
        for (int r = 0; r < R; ++r) exchange_lanes(list[r], stride, true);
    }
}

"""NumPy emulation of kernels/fast.cu and kernels/topk.cu (fast_warp, fast_row, fast_stream and fast_split, the
fused top-k), with the same thread-to-element map, fold order and exp2f arithmetic, in fp32 with -ftz."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..geometry import Launch, cdiv
from .fp32 import F32, div_f32, ftz

LOG2E = np.float32(1.4426950408889634)
PRESCALE_MAX = 256.0  # fast_common.cuh's: 16-bit slices in shared memory take 2^{x·log2e - b} up to this |max|


def _exp2_f32(t: np.ndarray) -> np.ndarray:
    """exp2f: in float64, rounded once to fp32, subnormals flushed."""
    with np.errstate(over="ignore", invalid="ignore"):
        return ftz(np.exp2(t.astype(np.float64)).astype(F32))


def exp_shifted(x: np.ndarray, m: np.ndarray) -> np.ndarray:
    """fast.cu's exp2f((x - m)·LOG2E): the difference and the product each rounded to fp32."""
    with np.errstate(invalid="ignore", over="ignore"):
        return _exp2_f32((x - m).astype(F32) * LOG2E)


def exp2_less(x: np.ndarray, b: np.ndarray) -> np.ndarray:
    """fast_common.cuh's exp2_less: 2^fmaf(x, LOG2E, -b), the product exact in float64 and the sum rounded to
    fp32 (through float64: a double rounding can, very rarely, move it by an ulp)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return _exp2_f32((x.astype(np.float64) * np.float64(LOG2E) - b.astype(np.float64)).astype(F32))


def _fast_rescale(m_from: np.ndarray, m_to: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):
        return np.where(m_from == m_to, np.ones((), F32), _exp2_f32((m_from - m_to) * LOG2E))


def _fast_merge(m1, d1, m2, d2):
    m = np.where((m2 > m1) | ((m2 == m1) & np.signbit(m1)), m2, m1)  # acc_max
    with np.errstate(invalid="ignore", over="ignore"):
        return m, d1 * _fast_rescale(m1, m) + d2 * _fast_rescale(m2, m)


def _group_merge(m, d, lanes: int):
    """group_merge<LANES> over the last axis, whose length is a multiple of lanes."""
    ids = np.arange(m.shape[-1])
    offset = lanes // 2
    while offset:
        m, d = _fast_merge(m, d, m[..., ids ^ offset], d[..., ids ^ offset])
        offset //= 2
    return m, d


def _fast_block_merge(m, d):
    """fast_block_merge over (rows, a row's threads): a butterfly per warp, then one over the warps (a row of
    one warp has its state after the first)."""
    rows, threads = m.shape
    warps = threads // 32
    wm, wd = _group_merge(m.reshape(rows, warps, 32), d.reshape(rows, warps, 32), 32)
    if warps == 1:
        return wm[:, 0, :1], wd[:, 0, :1]
    top_m = np.full((rows, 32), -np.inf, F32)
    top_d = np.zeros((rows, 32), F32)
    top_m[:, :warps], top_d[:, :warps] = wm[:, :, 0], wd[:, :, 0]
    top_m, top_d = _group_merge(top_m, top_d, 32)
    return top_m[:, :1], top_d[:, :1]


def _warp_max(m: np.ndarray) -> np.ndarray:
    """warp_fmax over each 32 consecutive threads (last axis), in every lane: NaN loses to a number, as fmaxf."""
    lanes = m.reshape(*m.shape[:-1], -1, 32)
    return np.repeat(np.fmax.reduce(lanes, axis=-1), 32, axis=-1).astype(F32)


def _fold_warp_states(wm: np.ndarray, wd: np.ndarray):
    """fold_warp_states over (rows, entries): lane l takes entries l, l + 32, ...; the largest m of all, then each
    d rescaled to it, added in entry order in each lane and over the lanes (warp_sum)."""
    rows, entries = wm.shape
    m = np.fmax.reduce(wm, axis=1, keepdims=True).astype(F32)
    lanes = np.zeros((rows, 32), F32)
    with np.errstate(invalid="ignore", over="ignore"):
        for first in range(0, entries, 32):
            n = min(32, entries - first)
            lanes[:, :n] = lanes[:, :n] + wd[:, first : first + n] * _fast_rescale(wm[:, first : first + n], m)
    return m, _warp_sum(lanes)[:, None]


def _exps_in_place(xg: np.ndarray, valid: np.ndarray):
    """fast.cu's exps_in_place for every thread: xg (rows, threads, slots) fp32, valid broadcastable to it.

    Returns the thread states (m, d) and the exps e (invalid slots 0)."""
    valid = np.broadcast_to(valid, xg.shape)
    m = _thread_max(xg, valid)
    e = _exps_shifted(xg, valid, m)
    return m, _sum_in_order(e), e


def _exps_shifted(xg: np.ndarray, valid: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Each slot's e^{x - m}, the difference first, 0 where the slot is invalid or -inf (it adds exactly 0)."""
    return np.where(valid & (xg != -np.inf), exp_shifted(xg, m[..., None]), np.zeros((), F32))


def _thread_max(xg: np.ndarray, valid: np.ndarray) -> np.ndarray:
    return np.fmax.reduce(np.where(valid, xg, -np.inf), axis=-1).astype(F32)  # fmaxf skips NaN, as the kernel


def _sum_in_order(e: np.ndarray) -> np.ndarray:
    """Each thread's exps (last axis) added one at a time in fp32, in the thread's order."""
    d = np.zeros(e.shape[:-1], F32)
    for slot in range(e.shape[-1]):
        d = d + e[..., slot]
    return d


def _pack_elements(pack: np.ndarray, vec: int) -> np.ndarray:
    """(threads, packs) pack indices -> (threads, packs * vec) element indices, slot = k * vec + i."""
    return (pack[:, :, None] * vec + np.arange(vec)).reshape(pack.shape[0], -1)


def emulate_fast(x: np.ndarray, launch: Launch, first_row: int = 0) -> np.ndarray:
    """The kernel `launch` names (fast_warp, fast_row, fast_row_cluster, fast_stream or fast_split) on rows first_row,
    first_row + 1, ... of the input, with the same thread-to-element map and arithmetic."""
    return KERNELS[launch.kernel](x.astype(F32), launch, first_row, x.dtype.itemsize == 2).astype(x.dtype)


def _fast_rows(x32: np.ndarray, launch: Launch, first_row: int, prescale: bool) -> np.ndarray:
    """fast_row (and its cluster form, the same arithmetic): rows grouped by where their first 16-byte
    boundary falls, since that decides each row's loose head and tail."""
    vec, per = launch.template_args[:2]
    y = np.empty_like(x32)
    for head, group in _rows_by_head(*x32.shape, vec, first_row):
        y[group] = _fast_row(x32[group], launch, vec, per, head, prescale)
    return y


def _rows_by_head(rows: int, cols: int, vec: int, first_row: int = 0):
    """(head, rows) for each non-empty group of rows whose first `head` elements come before their first 16-byte
    boundary (RowSplit's head; the input's row first_row is the kernel's row first_row)."""
    heads = (vec - np.arange(first_row, first_row + rows, dtype=np.int64) * cols % vec) % vec
    for head in range(vec):
        group = np.flatnonzero(heads == head)
        if group.size:
            yield min(head, cols), group


def _prescaled(m: np.ndarray) -> np.ndarray:
    return np.abs(m) <= PRESCALE_MAX


def _held_sums_16bit(xg: np.ndarray, valid: np.ndarray, m: np.ndarray) -> np.ndarray:
    """held_state's sums for a 16-bit slice held in shared memory or as loaded: each thread's sum of its exps on m
    (its max, or its warp's in a cluster), prescaled (2^{x·log2e - b}, b = shift·log2e rounded to fp32) where the
    shift (m, 0 if -inf) is within PRESCALE_MAX, the difference first (exps_in_place's) elsewhere. Each exp is
    taken once. valid: xg's shape."""
    shift = np.where(m == -np.inf, np.zeros((), F32), m)
    pre = _prescaled(shift)
    d = np.empty(m.shape, F32)
    bias = shift[pre] * LOG2E
    d[pre] = _sum_in_order(np.where(valid[pre], exp2_less(xg[pre], bias[:, None]), np.zeros((), F32)))
    rest = ~pre
    if rest.any():
        d[rest] = _sum_in_order(_exps_shifted(xg[rest], valid[rest], m[rest]))
    return d


def _held_output(xg: np.ndarray, row_m: np.ndarray, row_d: np.ndarray, prescale: bool) -> np.ndarray:
    """fast_row's HOLD 2 and 3 output from the held elements: e^{x - m} / d taken again, prescaled
    (normalised_less) in the 16-bit rows whose max is within PRESCALE_MAX. Each exp is taken once."""
    if not prescale:
        return fast_normalise(xg, row_m[..., None], row_d[..., None])
    pre = _prescaled(row_m[:, 0])
    out = np.empty(xg.shape, F32)
    out[pre] = normalised_less(xg[pre], row_m[pre], row_d[pre])
    rest = ~pre
    if rest.any():
        out[rest] = fast_normalise(xg[rest], row_m[rest][..., None], row_d[rest][..., None])
    return out


def normalised_less(xg: np.ndarray, row_m: np.ndarray, row_d: np.ndarray) -> np.ndarray:
    """The prescaled output: 2^{x·log2e - b}, b = fmaf(m, log2e, log2 d) (lg2.approx on the GPU: exact here)."""
    log2_d = np.log2(row_d.astype(np.float64)).astype(F32)
    b = (row_m.astype(np.float64) * np.float64(LOG2E) + log2_d.astype(np.float64)).astype(F32)
    return ftz(exp2_less(xg, b[..., None]))


def _fast_warp(x32: np.ndarray, launch: Launch, vec: int, per: int) -> np.ndarray:
    """fast_warp: lane l of a row's group holds packs l, l + lanes, ..., every row aligned alike."""
    lanes = launch.template_args[2]
    packs = x32.shape[1] // vec
    pack = np.arange(per)[None, :] * lanes + np.arange(lanes)[:, None]  # (lane, k)
    valid = pack < packs
    element = _pack_elements(np.where(valid, pack, 0), vec)
    valid = np.repeat(valid, vec, axis=1)
    m, d, e = _exps_in_place(x32[:, element], valid)
    row_m, row_d = _group_merge(m, d, lanes)
    with np.errstate(invalid="ignore", over="ignore"):
        c = ftz(_fast_rescale(m, row_m[:, :1]) * div_f32(np.ones((), F32), row_d[:, :1]))
        out = ftz(e * c[..., None])
    y = np.empty_like(x32)
    y[:, element[valid]] = out[:, valid]  # every element sits in exactly one valid slot
    return y


def _fast_row(x32: np.ndarray, launch: Launch, vec: int, per: int, head: int, prescale: bool) -> np.ndarray:
    """fast_row on rows whose first `head` elements come before their first 16-byte boundary (RowSplit):
    slice s of the aligned body is held by block s, then the loose elements (head, then tail) by the
    first slice's first threads, each in a last slot after its packs. `prescale`: a 16-bit input, whose
    slices in shared memory take their exps as 2^{x·log2e - b} (fast_common.cuh's exp2_less)."""
    rows, cols = x32.shape
    packs = (cols - head) // vec
    loose = cols - packs * vec
    slices = launch.chunks
    threads = launch.threads_per_row // slices  # a slice's threads (a block may hold several rows)
    chunk = cdiv(packs, slices)
    slice_, t = np.divmod(np.arange(slices * threads), threads)
    pack = (slice_ * chunk)[:, None] + np.arange(per)[None, :] * threads + t[:, None]
    valid = pack < np.minimum(packs, (slice_ + 1) * chunk)[:, None]
    element = head + _pack_elements(np.where(valid, pack, 0), vec)
    valid = np.repeat(valid, vec, axis=1)
    holds_loose = (slice_ == 0) & (t < loose)
    loose_col = np.where(t < head, t, head + packs * vec + (t - head))
    element = np.concatenate([element, np.where(holds_loose, loose_col, 0)[:, None]], axis=1)
    valid = np.concatenate([valid, holds_loose[:, None]], axis=1)
    held = launch.template_args[2] >= 2  # slice kept in shared memory or as loaded: the exps taken again
    xg = x32[:, element]  # (rows, threads, slots)
    valid_each_row = np.broadcast_to(valid, xg.shape)
    cluster = launch.kernel == "fast_row_cluster"  # exps on each warp's max, the cluster's warps folded at once
    m = _thread_max(xg, valid_each_row)
    if cluster:
        m = _warp_max(m)
    if held and prescale:
        d = _held_sums_16bit(xg, valid_each_row, m)
    else:
        e = _exps_shifted(xg, valid_each_row, m)
        d = _sum_in_order(e)
    if cluster:
        clusters = slices // launch.template_args[3]  # a row's clusters: their states folded as _fold_chunks
        wm, wd = m[:, ::32], _warp_sum(d.reshape(rows, -1, 32))
        cm, cd = _fold_warp_states(wm.reshape(rows * clusters, -1), wd.reshape(rows * clusters, -1))
        row_m, row_d = cm.reshape(rows, clusters), cd.reshape(rows, clusters)
        if clusters > 1:
            row_m, row_d = _fold_chunks(row_m, row_d)
    else:
        bm, bd = _fast_block_merge(m.reshape(rows * slices, threads), d.reshape(rows * slices, threads))
        row_m, row_d = bm.reshape(rows, slices), bd.reshape(rows, slices)
        if slices > 1:
            row_m, row_d = _fold_chunks(row_m, row_d)
    with np.errstate(invalid="ignore", over="ignore"):
        if held:
            out = _held_output(xg, row_m, row_d, prescale)
        else:
            c = ftz(_fast_rescale(m, row_m) * div_f32(np.ones((), F32), row_d))
            out = ftz(e * c[..., None])
    y = np.empty_like(x32)
    y[:, element[valid]] = out[:, valid]
    return y


def _fold_chunks(cm: np.ndarray, cd: np.ndarray):
    """The row's (m, d) from its chunks' states (rows, chunks), as fast_split_finish, fast_row's
    exchange and topk's last block fold them: lane l folds chunks l, l + 32, ..., then a butterfly."""
    rows, chunks = cm.shape
    lm = np.full((rows, 32), -np.inf, F32)
    ld = np.zeros((rows, 32), F32)
    for k in range(0, chunks, 32):
        n = min(32, chunks - k)
        lm[:, :n], ld[:, :n] = _fast_merge(lm[:, :n], ld[:, :n], cm[:, k : k + n], cd[:, k : k + n])
    row_m, row_d = _group_merge(lm, ld, 32)
    return row_m[:, :1], row_d[:, :1]


def _fast_split(x32: np.ndarray, launch: Launch, vec: int, per: int) -> np.ndarray:
    """fast_split_partial (batches of per packs per thread, online per batch) then fast_split_finish; fast_stream
    computes the same in one launch."""
    row_m, row_d = _fast_split_state(x32, launch, vec, per)
    return fast_normalise(x32, row_m, row_d)


def fast_normalise(x32: np.ndarray, row_m: np.ndarray, row_d: np.ndarray) -> np.ndarray:
    """e^{x - m} / d as fast_split_finish and topk write it: exp2f((x - m)·LOG2E) times 1/d, in fp32."""
    with np.errstate(invalid="ignore", over="ignore"):
        return ftz(exp_shifted(x32, row_m) * div_f32(np.ones((), F32), row_d))


def _fast_split_state(x32: np.ndarray, launch: Launch, vec: int, per: int):
    """The row's (m, d) as fast_split_partial + fast_split_finish get it."""
    m, d = _split_thread_states(x32, launch, vec, per)
    return _merge_chunks(m, d)


def _split_thread_states(x32: np.ndarray, launch: Launch, vec: int, per: int):
    """Each thread's (m, d), (rows, chunks, threads), after fast_split_partial's (and topk's) batches of
    per packs a thread, online per batch."""
    rows, cols = x32.shape
    packs, chunks, threads = cols // vec, launch.chunks, launch.block
    chunk = cdiv(packs, chunks)
    batch = per * threads
    c = np.arange(chunks)
    m = np.full((rows, chunks, threads), -np.inf, F32)
    d = np.zeros((rows, chunks, threads), F32)
    for base in range(0, chunk, batch):
        pack = (
            (c * chunk + base)[:, None, None]
            + np.arange(per)[None, None, :] * threads
            + np.arange(threads)[None, :, None]
        )
        valid = (base + np.arange(per)[None, None, :] * threads + np.arange(threads)[None, :, None] < chunk) & (
            pack < packs
        )  # (chunks, threads, per)
        element = (np.where(valid, pack, 0)[..., None] * vec + np.arange(vec)).reshape(chunks, threads, per * vec)
        slots = np.broadcast_to(np.repeat(valid, vec, axis=2)[None], (rows, chunks, threads, per * vec))
        bm, bd, _ = _exps_in_place(
            x32[:, element].reshape(rows * chunks, threads, per * vec), slots.reshape(rows * chunks, threads, per * vec)
        )
        m, d = _fast_merge(m, d, bm.reshape(rows, chunks, threads), bd.reshape(rows, chunks, threads))
    return m, d


def _merge_chunks(m: np.ndarray, d: np.ndarray):
    """Thread states (rows, chunks, threads) -> the row's (m, d): each chunk's block merge, then the fold."""
    rows, chunks, threads = m.shape
    cm, cd = _fast_block_merge(m.reshape(rows * chunks, threads), d.reshape(rows * chunks, threads))
    return _fold_chunks(cm.reshape(rows, chunks), cd.reshape(rows, chunks))


def _warp_sum(a: np.ndarray) -> np.ndarray:
    """topk.cu's warp_sum over the last axis (32 lanes): the butterfly's adds, lane i + h into lane i."""
    while a.shape[-1] > 1:
        half = a.shape[-1] // 2
        a = a[..., :half] + a[..., half:]
    return a[..., 0]


def _pooled_chunks(m: np.ndarray, d: np.ndarray):
    """Thread states (rows, chunks, threads) -> the row's (m, d) as a chunk of one batch (POOLED) gets it: each
    thread's d rescaled to the chunk's largest value, summed over each warp, then over the warps; then the fold."""
    rows, chunks, threads = m.shape
    most = m.max(axis=2, keepdims=True)
    with np.errstate(invalid="ignore", over="ignore"):
        lanes = (d * _fast_rescale(m, most)).reshape(rows, chunks, threads // 32, 32)
    return _summed_over_warps(most, _warp_sum(lanes))


def _warp_summed_chunks(m: np.ndarray, d: np.ndarray):
    """Thread states (rows, chunks, threads) -> the row's (m, d) as a chunk with warp lists (k > 1) gets it: each
    warp's d rescaled to the warp's largest value and summed over the warp, then each warp's rescaled to the chunk's
    largest and summed over the warps; then the fold."""
    rows, chunks, threads = m.shape
    lanes_m, lanes_d = m.reshape(rows, chunks, threads // 32, 32), d.reshape(rows, chunks, threads // 32, 32)
    warp_m = lanes_m.max(axis=3)
    most = warp_m.max(axis=2, keepdims=True)
    with np.errstate(invalid="ignore", over="ignore"):
        warp_d = _warp_sum(lanes_d * _fast_rescale(lanes_m, warp_m[..., None]))
        return _summed_over_warps(most, warp_d * _fast_rescale(warp_m, most))


def _summed_over_warps(most: np.ndarray, warp_d: np.ndarray):
    """The row's (m, d) from each chunk's largest value (rows, chunks, 1) and its warps' d on it (rows, chunks,
    warps): warp 0's lanes sum them (zero past the warps), then the chunks fold."""
    rows, chunks, warps = warp_d.shape
    lanes = np.zeros((rows, chunks, 32), F32)
    lanes[..., :warps] = warp_d
    return _fold_chunks(most[..., 0], _warp_sum(lanes))


def _topk_state(x32: np.ndarray, launch: Launch):
    """The row's (m, d) as topk.cu gets it: fast_split_partial's batches over the row's aligned body
    (RowSplit; rows grouped by where their first 16-byte boundary falls), then chunk 0's first threads
    fold the loose head and tail elements, one each, as a last batch; each chunk's states summed on its largest
    value (k = 1 and chunks of one batch) or warp by warp, then over the warps (k > 1)."""
    vec, per = launch.template_args[:2]
    rows, cols = x32.shape
    row_m, row_d = np.empty((rows, 1), F32), np.empty((rows, 1), F32)
    for head, group in _rows_by_head(rows, cols, vec):
        packs = (cols - head) // vec
        rows_at = slice(None) if group.size == rows else group  # aligned widths: one group, no copy
        m, d = _split_thread_states(x32[rows_at, head : head + packs * vec], launch, vec, per)
        loose = np.r_[0:head, head + packs * vec : cols]
        if loose.size:
            lm, ld, _ = _exps_in_place(x32[np.ix_(group, loose)][..., None], np.ones((1, 1, 1), bool))
            m[:, 0, : loose.size], d[:, 0, : loose.size] = _fast_merge(
                m[:, 0, : loose.size], d[:, 0, : loose.size], lm, ld
            )
        # k = 1 (one key a list) sums its chunk's states as a pooled chunk does; k > 1 warp by warp, then the warps (a
        # pooled chunk with no pack too: chunk 0's loose elements take the batch loop)
        summed = launch.template_args[2] == 1 or (launch.template_args[4] and packs > 0)
        row_m[group], row_d[group] = (_pooled_chunks if summed else _warp_summed_chunks)(m, d)
    return row_m, row_d


def top_indices(values: np.ndarray, k: int) -> np.ndarray:
    """The k best of each row as the top-k kernels order them: larger first, ties to the lower index,
    NaN below -inf (it sorts last)."""
    return np.argsort(-values.astype(np.float64), axis=1, kind="stable")[:, :k]


def run_topk(fused: bool, launch: Launch, x: np.ndarray, k: int, softmax_launch: Launch | None = None):
    """topk_fused (probabilities from the one-pass (m, d)) or topk_unfused (fast softmax, then select)."""
    x32 = x.astype(F32)
    if fused:
        keyed = ftz(x32)  # the kernel's keys take each logit through fp32 arithmetic: a subnormal ties with 0
        indices = top_indices(keyed, k)
        row_m, row_d = _topk_state(x32, launch)
        chosen = np.take_along_axis(keyed, indices, axis=1)
        return fast_normalise(chosen, row_m, row_d).astype(x.dtype), indices.astype(np.int32)
    y = emulate_fast(x, softmax_launch)
    indices = top_indices(y.astype(F32), k)
    return np.take_along_axis(y, indices, axis=1), indices.astype(np.int32)


def _fast_chunks(x32: np.ndarray, launch: Launch, first_row: int, sixteen: bool) -> np.ndarray:
    """fast_split and fast_stream (which holds part of each chunk on chip but computes the same)."""
    return _fast_split(x32, launch, *launch.template_args[:2])


# Each fast kernel's emulation, by the kernel name its Launch carries: (x in fp32, launch, index of x's first
# row in the input, whether x is 16-bit) -> y in fp32.
KERNELS: dict[str, Callable[[np.ndarray, Launch, int, bool], np.ndarray]] = {
    "fast_warp": lambda x32, launch, first, sixteen: _fast_warp(x32, launch, *launch.template_args[:2]),
    "fast_row": _fast_rows,
    "fast_row_cluster": _fast_rows,
    "fast_split": _fast_chunks,
    "fast_stream": _fast_chunks,
}

"""NumPy emulation of every kernel, following its order of operations.

Same lane striding, same merge butterflies, every accumulator operation done in fp32 and rounded
to the accumulator type, as kernels/common.cuh does, and fp32 results below 2^-126 flushed to zero
as CuPy's NVRTC build does (-ftz=true). Vectorised across rows and lanes; only the steps along a
row are a Python loop. The one known difference from the GPU: expf there is within 2 ulp of exp,
here exp is computed in float64 and rounded once (see the README for the measured agreement).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..numerics import DTYPES
from ..registry import Launch, Variant
from ..trace import NODES_PER_BUTTERFLY, OFFSETS, RawTrace, cdiv, trace_shape

F32 = np.float32
FP32_SMALLEST_NORMAL = np.float32(2.0**-126)


def _ftz(v: np.ndarray) -> np.ndarray:
    """Flush fp32 subnormal results to zero, as the GPU does under -ftz=true."""
    return np.where(np.abs(v) < FP32_SMALLEST_NORMAL, np.zeros((), F32), v)


def _exp_f32(v: np.ndarray) -> np.ndarray:
    """expf, as closely as NumPy gets: exp in float64, rounded once to fp32, subnormals flushed."""
    with np.errstate(over="ignore", invalid="ignore"):
        return _ftz(np.exp(v.astype(np.float64)).astype(F32))


def _div_f32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore", over="ignore", under="ignore"):
        return _ftz(a / b)


class Acc:
    """Accumulator arithmetic of common.cuh: compute in fp32, round once to the accumulator type."""

    def __init__(self, name: str):
        self.dtype = DTYPES[name]

    def round(self, v_f32: np.ndarray) -> np.ndarray:
        return v_f32.astype(self.dtype)

    def const(self, value: float, shape) -> np.ndarray:
        return np.full(shape, value, F32).astype(self.dtype)

    def mul(self, a, b):
        return self.round(a.astype(F32) * b.astype(F32))

    def add(self, a, b):
        return self.round(a.astype(F32) + b.astype(F32))

    def max(self, a, b):  # ignores a NaN candidate and prefers +0 to -0, as acc_max
        fa, fb = a.astype(F32), b.astype(F32)
        return np.where((fb > fa) | ((fb == fa) & np.signbit(fa)), b, a)

    def exp_diff(self, a, b):
        with np.errstate(invalid="ignore", over="ignore"):  # -max - max is -inf in fp32 too
            return self.round(_exp_f32(a.astype(F32) - b.astype(F32)))

    def rescale(self, m_from, m_to):
        return np.where(m_from.astype(F32) == m_to.astype(F32), self.const(1.0, ()), self.exp_diff(m_from, m_to))

    def online_step(self, m, d, x):
        new_m = self.max(m, x)
        term = np.where(x.astype(F32) == -np.inf, self.const(0.0, ()), self.exp_diff(x, new_m))
        return new_m, self.add(self.mul(d, self.rescale(m, new_m)), term)

    def merge(self, m1, d1, m2, d2):
        m = self.max(m1, m2)
        return m, self.add(self.mul(d1, self.rescale(m1, m)), self.mul(d2, self.rescale(m2, m)))


def _normalise(x: np.ndarray, acc: Acc, m: np.ndarray, d: np.ndarray) -> np.ndarray:
    """y = expf(to_acc(x) - m) / d in fp32, rounded once to x's type; m, d are (rows, 1)."""
    with np.errstate(invalid="ignore", over="ignore"):
        xa = acc.round(x.astype(F32)).astype(F32)
        return _div_f32(_exp_f32(xa - m.astype(F32)), d.astype(F32)).astype(x.dtype)


@dataclass
class _Recorder:
    """Where a traced row's states go: its pseudo-rows (one per chunk of a split row) in the batch,
    and for each the thread and merge-node offsets and the element range it covers."""

    raw: RawTrace
    rows: list[int]
    thread_offsets: list[int]
    node_bases: list[int]
    starts: list[int]
    lengths: list[int]

    @classmethod
    def single(cls, raw: RawTrace | None, row: int | None, cols: int) -> _Recorder | None:
        return None if raw is None else cls(raw, [row], [0], [0], [0], [cols])


def _strided(x: np.ndarray, lanes: int) -> tuple[np.ndarray, int]:
    """x as (rows, steps, lanes) with element j = step * lanes + lane (padded with -inf)."""
    rows, cols = x.shape
    steps = cdiv(cols, lanes)
    padded = np.full((rows, steps * lanes), -np.inf, F32).astype(x.dtype)
    padded[:, :cols] = x
    return padded.reshape(rows, steps, lanes), steps


def _fold(acc: Acc, x: np.ndarray, lanes: int, rec: _Recorder | None):
    """Each lane folds elements lane, lane + lanes, ... with the online rule; returns (rows, lanes) states.

    Padding is -inf, which online_step leaves the state exactly unchanged for, so no masking is needed.
    """
    rows = x.shape[0]
    xs, steps = _strided(x, lanes)
    m = acc.const(-np.inf, (rows, lanes))
    d = acc.const(0.0, (rows, lanes))
    lane_ids = np.arange(lanes)
    for s in range(steps):
        m, d = acc.online_step(m, d, acc.round(xs[:, s, :].astype(F32)))
        if rec is not None:
            for row, offset, start, length in zip(rec.rows, rec.thread_offsets, rec.starts, rec.lengths):
                valid = s * lanes + lane_ids < length
                threads = offset + lane_ids[valid]
                rec.raw.step_m[threads, s] = m[row, valid]
                rec.raw.step_d[threads, s] = d[row, valid]
                rec.raw.step_index[threads, s] = start + s * lanes + lane_ids[valid]
    return m, d


def _butterfly(acc: Acc, m, d, rec: _Recorder | None, base: int):
    """The 5-level shuffle-xor butterfly over the last axis (32 lanes); every lane ends with the total."""
    lanes = np.arange(32)
    for offset in OFFSETS:
        m, d = acc.merge(m, d, m[..., lanes ^ offset], d[..., lanes ^ offset])
        if rec is not None:
            for row, node_base in zip(rec.rows, rec.node_bases):
                nodes = node_base + base + 32 - 2 * offset + np.arange(offset)
                rec.raw.merge_m[nodes], rec.raw.merge_d[nodes] = m[row, :offset], d[row, :offset]
    return m, d


def _block_merge(acc: Acc, m, d, rec: _Recorder | None):
    """common.cuh's block_merge: a butterfly per warp, then one over the warps' states in warp 0."""
    rows, threads = m.shape
    warps = threads // 32
    wm, wd = m.reshape(rows, warps, 32), d.reshape(rows, warps, 32)
    lanes = np.arange(32)
    for offset in OFFSETS:
        wm, wd = acc.merge(wm, wd, wm[..., lanes ^ offset], wd[..., lanes ^ offset])
        if rec is not None:
            for row, node_base in zip(rec.rows, rec.node_bases):
                for w in range(warps):
                    nodes = node_base + w * NODES_PER_BUTTERFLY + 32 - 2 * offset + np.arange(offset)
                    rec.raw.merge_m[nodes], rec.raw.merge_d[nodes] = wm[row, w, :offset], wd[row, w, :offset]
    top_m = acc.const(-np.inf, (rows, 32))
    top_d = acc.const(0.0, (rows, 32))
    top_m[:, :warps], top_d[:, :warps] = wm[:, :, 0], wd[:, :, 0]
    top_m, top_d = _butterfly(acc, top_m, top_d, rec, warps * NODES_PER_BUTTERFLY)
    return top_m[:, :1], top_d[:, :1]


def _online(x, acc, lanes, family, rec):
    m, d = _fold(acc, x, lanes, rec)
    if family == "warp":
        m, d = _butterfly(acc, m, d, rec, 0)
        m, d = m[:, :1], d[:, :1]
    elif family == "block":
        m, d = _block_merge(acc, m, d, rec)
    return _normalise(x, acc, m, d)


def _chunks(x: np.ndarray, chunks: int) -> np.ndarray:
    """(rows, cols) -> (rows * chunks, ceil(cols / chunks)) pseudo-rows, padded with -inf."""
    rows, cols = x.shape
    size = cdiv(cols, chunks)
    padded = np.full((rows, chunks * size), -np.inf, F32).astype(x.dtype)
    padded[:, :cols] = x
    return padded.reshape(rows * chunks, size)


def _split_row(x, acc, launch, trace_row, raw):
    """split_partial then split_finish: a block merge per chunk, then the chunks merged in order."""
    rows, cols = x.shape
    chunks, block = launch.chunks, launch.block
    size = cdiv(cols, chunks)
    rec = None
    if raw is not None:
        per_chunk = (block // 32 + 1) * NODES_PER_BUTTERFLY
        rec = _Recorder(raw, [trace_row * chunks + c for c in range(chunks)], [c * block for c in range(chunks)],
                        [c * per_chunk for c in range(chunks)], [c * size for c in range(chunks)],
                        [max(0, min(size, cols - c * size)) for c in range(chunks)])
    m, d = _fold(acc, _chunks(x, chunks), block, rec)
    m, d = _block_merge(acc, m, d, rec)
    m, d = m.reshape(rows, chunks), d.reshape(rows, chunks)
    row_m, row_d = m[:, :1], d[:, :1]
    for k in range(1, chunks):
        row_m, row_d = acc.merge(row_m, row_d, m[:, k:k + 1], d[:, k:k + 1])
        if raw is not None:
            node = chunks * (block // 32 + 1) * NODES_PER_BUTTERFLY + k - 1
            raw.merge_m[node], raw.merge_d[node] = row_m[trace_row, 0], row_d[trace_row, 0]
    return _normalise(x, acc, row_m, row_d)


def _safe_thread(x, acc, trace_row, raw):
    rows, cols = x.shape
    xa = acc.round(x.astype(F32))
    m = acc.const(-np.inf, (rows, 1))
    for j in range(cols):  # order matters only for the trace; max is exact
        m = acc.max(m, xa[:, j:j + 1])
        if raw is not None:
            raw.step_m[0, j] = m[trace_row, 0]
    d = acc.const(0.0, (rows, 1))
    for j in range(cols):
        d = acc.add(d, acc.exp_diff(xa[:, j:j + 1], m))
        if raw is not None:
            raw.step_d[0, j], raw.step_index[0, j] = d[trace_row, 0], j
    return _normalise(x, acc, m, d)


def _safe_block(x, acc, lanes):
    rows, cols = x.shape
    xs, steps = _strided(x, lanes)
    xa = acc.round(xs.astype(F32))
    valid = (np.arange(steps)[:, None] * lanes + np.arange(lanes)[None, :]) < cols
    m = np.where(valid, xa, acc.const(-np.inf, ())).astype(F32)
    m = acc.round(np.fmax.reduce(np.where(np.isnan(m), -np.inf, m), axis=(1, 2)))[:, None]  # max is exact
    d = acc.const(0.0, (rows, lanes))
    for s in range(steps):
        term = acc.exp_diff(xa[:, s, :], m)
        d = np.where(valid[s], acc.add(d, term), d)
    lane_ids = np.arange(32)
    wd = d.reshape(rows, lanes // 32, 32)
    for offset in OFFSETS:
        wd = acc.add(wd, wd[..., lane_ids ^ offset])
    top = acc.const(0.0, (rows, 32))
    top[:, : lanes // 32] = wd[:, :, 0]
    for offset in OFFSETS:
        top = acc.add(top, top[:, lane_ids ^ offset])
    return _normalise(x, acc, m, top[:, :1])


def _naive(x, acc):
    rows, cols = x.shape
    e = acc.round(_exp_f32(x.astype(F32)))
    d = acc.const(0.0, (rows, 1))
    for j in range(cols):
        d = acc.add(d, e[:, j:j + 1])
    return _div_f32(_exp_f32(x.astype(F32)), d.astype(F32)).astype(x.dtype)


LOG2E = np.float32(1.4426950408889634)
F32_INF = np.float32(np.inf)


def _exp2_f32(t: np.ndarray) -> np.ndarray:
    """exp2f: in float64, rounded once to fp32, subnormals flushed."""
    with np.errstate(over="ignore", invalid="ignore"):
        return _ftz(np.exp2(t.astype(np.float64)).astype(F32))


def _exp_shifted(x: np.ndarray, m: np.ndarray) -> np.ndarray:
    """fast.cu's exp2f((x - m)·LOG2E): the difference and the product each rounded to fp32."""
    with np.errstate(invalid="ignore", over="ignore"):
        return _exp2_f32((x - m).astype(F32) * LOG2E)


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
    """fast_block_merge over (rows, threads): a butterfly per warp, then one over the warps."""
    rows, threads = m.shape
    warps = threads // 32
    wm, wd = _group_merge(m.reshape(rows, warps, 32), d.reshape(rows, warps, 32), 32)
    top_m = np.full((rows, 32), -np.inf, F32)
    top_d = np.zeros((rows, 32), F32)
    top_m[:, :warps], top_d[:, :warps] = wm[:, :, 0], wd[:, :, 0]
    top_m, top_d = _group_merge(top_m, top_d, 32)
    return top_m[:, :1], top_d[:, :1]


def _exps_in_place(xg: np.ndarray, valid: np.ndarray):
    """fast.cu's exps_in_place for every thread: xg (rows, threads, slots) fp32, valid broadcastable to it.

    Returns the thread states (m, d) and the exps e (invalid slots 0)."""
    valid = np.broadcast_to(valid, xg.shape)
    m = np.fmax.reduce(np.where(valid, xg, -np.inf), axis=2).astype(F32)  # fmaxf skips NaN, as the kernel
    e = np.where(valid & (xg != -np.inf), _exp_shifted(xg, m[..., None]), np.zeros((), F32))
    d = np.zeros(m.shape, F32)
    for slot in range(xg.shape[2]):  # the sum in the thread's order
        d = d + e[..., slot]
    return m, d, e


def _pack_elements(pack: np.ndarray, vec: int) -> np.ndarray:
    """(threads, packs) pack indices -> (threads, packs * vec) element indices, slot = k * vec + i."""
    return (pack[:, :, None] * vec + np.arange(vec)).reshape(pack.shape[0], -1)


def _fast(x: np.ndarray, launch: Launch) -> np.ndarray:
    """fast_warp / fast_row / fast_split, with the same thread-to-element map and arithmetic."""
    rows, cols = x.shape
    x32 = x.astype(F32)
    vec, per = launch.template_args[:2]
    packs = cols // vec
    if launch.kernel == "fast_split":
        return _fast_split(x32, launch, vec, per).astype(x.dtype)
    if launch.kernel == "fast_warp":
        lanes = launch.template_args[2]
        pack = np.arange(per)[None, :] * lanes + np.arange(lanes)[:, None]  # (lane, k)
        valid = pack < packs
    else:  # fast_row: slice s of the row is held by block s
        slices, threads = launch.chunks, launch.block
        chunk = cdiv(packs, slices)
        slice_, t = np.divmod(np.arange(slices * threads), threads)
        pack = (slice_ * chunk)[:, None] + np.arange(per)[None, :] * threads + t[:, None]
        valid = pack < np.minimum(packs, (slice_ + 1) * chunk)[:, None]
    element = _pack_elements(np.where(valid, pack, 0), vec)
    valid = np.repeat(valid, vec, axis=1)
    m, d, e = _exps_in_place(x32[:, element], valid)
    if launch.kernel == "fast_warp":
        row_m, row_d = _group_merge(m, d, launch.template_args[2])
        row_m, row_d = row_m[:, :1], row_d[:, :1]
    else:
        bm, bd = _fast_block_merge(m.reshape(rows * slices, threads), d.reshape(rows * slices, threads))
        row_m, row_d = bm.reshape(rows, slices), bd.reshape(rows, slices)
        if slices > 1:
            row_m, row_d = _fold_chunks(row_m, row_d)
    with np.errstate(invalid="ignore", over="ignore"):
        if launch.kernel != "fast_warp" and launch.template_args[2] == 2:  # slice kept in shared memory
            out = _fast_normalise(x32[:, element], row_m[..., None], row_d[..., None])
        else:
            c = _ftz(_fast_rescale(m, row_m) * _div_f32(np.ones((), F32), row_d))
            out = _ftz(e * c[..., None])
    y = np.empty_like(x32)
    y[:, element[valid]] = out[:, valid]  # every element sits in exactly one valid slot
    return y.astype(x.dtype)


def _fold_chunks(cm: np.ndarray, cd: np.ndarray):
    """The row's (m, d) from its chunks' states (rows, chunks), as fast_split_finish, fast_row's
    exchange and topk's last block fold them: lane l folds chunks l, l + 32, ..., then a butterfly."""
    rows, chunks = cm.shape
    lm = np.full((rows, 32), -np.inf, F32)
    ld = np.zeros((rows, 32), F32)
    for k in range(0, chunks, 32):
        n = min(32, chunks - k)
        lm[:, :n], ld[:, :n] = _fast_merge(lm[:, :n], ld[:, :n], cm[:, k:k + n], cd[:, k:k + n])
    row_m, row_d = _group_merge(lm, ld, 32)
    return row_m[:, :1], row_d[:, :1]


def _fast_split(x32: np.ndarray, launch: Launch, vec: int, per: int) -> np.ndarray:
    """fast_split_partial (batches of per packs per thread, online per batch) then fast_split_finish."""
    row_m, row_d = _fast_split_state(x32, launch, vec, per)
    return _fast_normalise(x32, row_m, row_d)


def _fast_normalise(x32: np.ndarray, row_m: np.ndarray, row_d: np.ndarray) -> np.ndarray:
    """e^{x - m} / d as fast_split_finish and topk write it: exp2f((x - m)·LOG2E) times 1/d, in fp32."""
    with np.errstate(invalid="ignore", over="ignore"):
        return _ftz(_exp_shifted(x32, row_m) * _div_f32(np.ones((), F32), row_d))


def _fast_split_state(x32: np.ndarray, launch: Launch, vec: int, per: int):
    """The row's (m, d) as fast_split_partial + fast_split_finish (and topk, chunks merged by a row's last block) get it."""
    rows, cols = x32.shape
    packs, chunks, threads = cols // vec, launch.chunks, launch.block
    chunk = cdiv(packs, chunks)
    batch = per * threads
    c = np.arange(chunks)
    m = np.full((rows, chunks, threads), -np.inf, F32)
    d = np.zeros((rows, chunks, threads), F32)
    for base in range(0, chunk, batch):
        pack = (c * chunk + base)[:, None, None] + np.arange(per)[None, None, :] * threads + np.arange(threads)[None, :, None]
        valid = (base + np.arange(per)[None, None, :] * threads + np.arange(threads)[None, :, None] < chunk) & (
            pack < packs)  # (chunks, threads, per)
        element = (np.where(valid, pack, 0)[..., None] * vec + np.arange(vec)).reshape(chunks, threads, per * vec)
        slots = np.broadcast_to(np.repeat(valid, vec, axis=2)[None], (rows, chunks, threads, per * vec))
        bm, bd, _ = _exps_in_place(x32[:, element].reshape(rows * chunks, threads, per * vec),
                                   slots.reshape(rows * chunks, threads, per * vec))
        m, d = _fast_merge(m, d, bm.reshape(rows, chunks, threads), bd.reshape(rows, chunks, threads))
    cm, cd = _fast_block_merge(m.reshape(rows * chunks, threads), d.reshape(rows * chunks, threads))
    return _fold_chunks(cm.reshape(rows, chunks), cd.reshape(rows, chunks))


def top_indices(values: np.ndarray, k: int) -> np.ndarray:
    """The k best of each row as the top-k kernels order them: larger first, ties to the lower index,
    NaN below -inf (it sorts last)."""
    return np.argsort(-values.astype(np.float64), axis=1, kind="stable")[:, :k]


def run_topk(fused: bool, launch: Launch, x: np.ndarray, k: int, softmax_launch: Launch | None = None):
    """topk_fused (probabilities from the one-pass (m, d)) or topk_unfused (fast softmax, then select)."""
    x32 = x.astype(F32)
    vec, per = launch.template_args[:2]
    if fused:
        indices = top_indices(x32, k)
        row_m, row_d = _fast_split_state(x32, launch, vec, per)
        chosen = np.take_along_axis(x32, indices, axis=1)
        return _fast_normalise(chosen, row_m, row_d).astype(x.dtype), indices.astype(np.int32)
    y = _fast(x, softmax_launch)
    indices = top_indices(y.astype(F32), k)
    return np.take_along_axis(y, indices, axis=1), indices.astype(np.int32)


def run(variant: Variant, launch: Launch, x: np.ndarray, acc_name: str, trace_row: int | None):
    """Emulate `variant` launched as `launch` on a 2-D array x; returns (out, RawTrace or None)."""
    acc = Acc(acc_name)
    cols = x.shape[1]
    raw = None
    if trace_row is not None:
        raw = RawTrace.empty(*trace_shape(variant, launch, cols))
    if variant.method == "naive":
        out = _naive(x, acc)
    elif variant.method == "fast":
        out = _fast(x, launch)
    elif variant.family == "split":
        out = _split_row(x, acc, launch, trace_row, raw)
    elif variant.method == "safe" and variant.family == "thread":
        out = _safe_thread(x, acc, trace_row, raw)
    elif variant.method == "safe" and variant.family == "block":
        out = _safe_block(x, acc, launch.threads_per_row)
    else:
        out = _online(x, acc, launch.threads_per_row, variant.family, _Recorder.single(raw, trace_row, cols))
    return out, raw

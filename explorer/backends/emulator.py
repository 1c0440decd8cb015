"""NumPy emulation of every kernel, following its order of operations.

Same lane striding, same merge butterflies, every accumulator operation done in fp32 and rounded
to the accumulator type, as kernels/common.cuh does. Vectorised across rows and lanes; only the
steps along a row are a Python loop. The one known difference from the GPU: expf there is within
2 ulp of exp, here exp is computed in float64 and rounded once (see the README for the measured
agreement).
"""

from __future__ import annotations

import numpy as np

from ..numerics import DTYPES
from ..registry import Variant
from ..trace import NODES_PER_BUTTERFLY, OFFSETS, RawTrace, trace_shape

F32 = np.float32


def _exp_f32(v: np.ndarray) -> np.ndarray:
    """expf, as closely as NumPy gets: exp in float64, rounded once to fp32."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.exp(v.astype(np.float64)).astype(F32)


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

    def max(self, a, b):  # ignores a NaN candidate, as acc_max
        return np.where(b.astype(F32) > a.astype(F32), b, a)

    def exp_diff(self, a, b):
        with np.errstate(invalid="ignore"):
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


def _normalise(x: np.ndarray, m: np.ndarray, d: np.ndarray) -> np.ndarray:
    """y = expf(x - m) / d in fp32 from the original x, rounded once to x's type; m, d are (rows, 1)."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return (_exp_f32(x.astype(F32) - m.astype(F32)) / d.astype(F32)).astype(x.dtype)


def _strided(x: np.ndarray, lanes: int) -> tuple[np.ndarray, int]:
    """x as (rows, steps, lanes) with element j = step * lanes + lane (padded with -inf)."""
    rows, cols = x.shape
    steps = -(-cols // lanes)
    padded = np.full((rows, steps * lanes), -np.inf, F32).astype(x.dtype)
    padded[:, :cols] = x
    return padded.reshape(rows, steps, lanes), steps


def _fold(acc: Acc, x: np.ndarray, lanes: int, trace_row: int | None, raw: RawTrace | None):
    """Each lane folds elements lane, lane + lanes, ... with the online rule; returns (rows, lanes) states."""
    rows, cols = x.shape
    xs, steps = _strided(x, lanes)
    m = acc.const(-np.inf, (rows, lanes))
    d = acc.const(0.0, (rows, lanes))
    lane_ids = np.arange(lanes)
    for s in range(steps):
        xa = acc.round(xs[:, s, :].astype(F32))
        new_m, new_d = acc.online_step(m, d, xa)
        valid = s * lanes + lane_ids < cols
        if valid.all():
            m, d = new_m, new_d
        else:
            m, d = np.where(valid, new_m, m), np.where(valid, new_d, d)
        if raw is not None:
            raw.step_m[valid, s] = m[trace_row, valid]
            raw.step_d[valid, s] = d[trace_row, valid]
            raw.step_index[valid, s] = s * lanes + lane_ids[valid]
    return m, d


def _butterfly(acc: Acc, m, d, trace_row, raw: RawTrace | None, base: int):
    """The 5-level shuffle-xor butterfly over (rows, 32) states; every lane ends with the total."""
    lanes = np.arange(32)
    for offset in OFFSETS:
        m, d = acc.merge(m, d, m[..., lanes ^ offset], d[..., lanes ^ offset])
        if raw is not None:
            nodes = base + 32 - 2 * offset + np.arange(offset)
            raw.merge_m[nodes], raw.merge_d[nodes] = m[trace_row, :offset], d[trace_row, :offset]
    return m, d


def _block_merge(acc: Acc, m, d, trace_row, raw: RawTrace | None):
    """common.cuh's block_merge: a butterfly per warp, then one over the warps' states in warp 0."""
    rows, threads = m.shape
    warps = threads // 32
    wm, wd = m.reshape(rows, warps, 32), d.reshape(rows, warps, 32)
    lanes = np.arange(32)
    for offset in OFFSETS:
        wm, wd = acc.merge(wm, wd, wm[..., lanes ^ offset], wd[..., lanes ^ offset])
        if raw is not None:
            for w in range(warps):
                nodes = w * NODES_PER_BUTTERFLY + 32 - 2 * offset + np.arange(offset)
                raw.merge_m[nodes] = wm[trace_row, w, :offset]
                raw.merge_d[nodes] = wd[trace_row, w, :offset]
    top_m = acc.const(-np.inf, (rows, 32))
    top_d = acc.const(0.0, (rows, 32))
    top_m[:, :warps], top_d[:, :warps] = wm[:, :, 0], wd[:, :, 0]
    top_m, top_d = _butterfly(acc, top_m, top_d, trace_row, raw, warps * NODES_PER_BUTTERFLY)
    return top_m[:, :1], top_d[:, :1]


def _online(x, acc, lanes, family, trace_row, raw):
    m, d = _fold(acc, x, lanes, trace_row, raw)
    if family == "warp":
        m, d = _butterfly(acc, m, d, trace_row, raw, 0)
        m, d = m[:, :1], d[:, :1]
    elif family == "block":
        m, d = _block_merge(acc, m, d, trace_row, raw)
    return _normalise(x, m, d)


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
    return _normalise(x, m, d)


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
    return _normalise(x, m, top[:, :1])


def _naive(x, acc):
    rows, cols = x.shape
    e = acc.round(_exp_f32(x.astype(F32)))
    d = acc.const(0.0, (rows, 1))
    for j in range(cols):
        d = acc.add(d, e[:, j:j + 1])
    with np.errstate(invalid="ignore", divide="ignore"):
        return (_exp_f32(x.astype(F32)) / d.astype(F32)).astype(x.dtype)


def run(variant: Variant, x: np.ndarray, acc_name: str, block_size: int, trace_row: int | None):
    """Emulate `variant` on a 2-D array x; returns (out, RawTrace or None)."""
    acc = Acc(acc_name)
    raw = None
    if trace_row is not None:
        raw = RawTrace.empty(*trace_shape(variant, x.shape[1], block_size))
    lanes = variant.launch(x.shape[0], x.shape[1], block_size).threads_per_row
    if variant.method == "naive":
        out = _naive(x, acc)
    elif variant.method == "safe" and variant.family == "thread":
        out = _safe_thread(x, acc, trace_row, raw)
    elif variant.method == "safe" and variant.family == "block":
        out = _safe_block(x, acc, lanes)
    else:
        out = _online(x, acc, lanes, variant.family, trace_row, raw)
    return out, raw

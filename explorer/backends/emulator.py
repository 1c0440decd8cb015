"""NumPy emulation of every kernel, following its order of operations.

Same lane striding, same merge butterflies, every accumulator operation done in fp32 and rounded
to the accumulator type, as kernels/common.cuh does, and fp32 results below 2^-126 flushed to zero
as CuPy's NVRTC build does (-ftz=true). Vectorised across rows and lanes; only the steps along a
row are a Python loop. The one known difference from the GPU: expf there is within 2 ulp of exp,
here exp is computed in float64 and rounded once (see the README for the measured agreement).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..geometry import Launch, cdiv
from ..numerics import DTYPES
from ..registry import Variant
from ..trace import NODES_PER_BUTTERFLY, OFFSETS, RawTrace, trace_shape
from .fast_emulation import emulate_fast
from .fp32 import F32, div_f32, exp_f32


class Acc:
    """Accumulator arithmetic of common.cuh: compute in fp32, round once to the accumulator type."""

    def __init__(self, name: str):
        self.dtype = DTYPES[name]

    def round(self, v_f32: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):  # past the format's range is inf, as on the GPU
            return v_f32.astype(self.dtype)

    def const(self, value: float, shape) -> np.ndarray:
        return np.full(shape, value, F32).astype(self.dtype)

    def mul(self, a, b):
        with np.errstate(over="ignore"):
            return self.round(a.astype(F32) * b.astype(F32))

    def add(self, a, b):
        with np.errstate(over="ignore"):
            return self.round(a.astype(F32) + b.astype(F32))

    def max(self, a, b):  # ignores a NaN candidate and prefers +0 to -0, as acc_max
        fa, fb = a.astype(F32), b.astype(F32)
        return np.where((fb > fa) | ((fb == fa) & np.signbit(fa)), b, a)

    def exp_diff(self, a, b):
        with np.errstate(invalid="ignore", over="ignore"):  # -max - max is -inf in fp32 too
            return self.round(exp_f32(a.astype(F32) - b.astype(F32)))

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
        return div_f32(exp_f32(xa - m.astype(F32)), d.astype(F32)).astype(x.dtype)


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
        rec = _Recorder(
            raw,
            [trace_row * chunks + c for c in range(chunks)],
            [c * block for c in range(chunks)],
            [c * per_chunk for c in range(chunks)],
            [c * size for c in range(chunks)],
            [max(0, min(size, cols - c * size)) for c in range(chunks)],
        )
    m, d = _fold(acc, _chunks(x, chunks), block, rec)
    m, d = _block_merge(acc, m, d, rec)
    m, d = m.reshape(rows, chunks), d.reshape(rows, chunks)
    row_m, row_d = m[:, :1], d[:, :1]
    for k in range(1, chunks):
        row_m, row_d = acc.merge(row_m, row_d, m[:, k : k + 1], d[:, k : k + 1])
        if raw is not None:
            node = chunks * (block // 32 + 1) * NODES_PER_BUTTERFLY + k - 1
            raw.merge_m[node], raw.merge_d[node] = row_m[trace_row, 0], row_d[trace_row, 0]
    return _normalise(x, acc, row_m, row_d)


def _safe_thread(x, acc, trace_row, raw):
    rows, cols = x.shape
    xa = acc.round(x.astype(F32))
    m = acc.const(-np.inf, (rows, 1))
    for j in range(cols):  # order matters only for the trace; max is exact
        m = acc.max(m, xa[:, j : j + 1])
        if raw is not None:
            raw.step_m[0, j] = m[trace_row, 0]
    d = acc.const(0.0, (rows, 1))
    for j in range(cols):
        d = acc.add(d, acc.exp_diff(xa[:, j : j + 1], m))
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
    e = acc.round(exp_f32(x.astype(F32)))
    d = acc.const(0.0, (rows, 1))
    for j in range(cols):
        d = acc.add(d, e[:, j : j + 1])
    return div_f32(exp_f32(x.astype(F32)), d.astype(F32)).astype(x.dtype)


def run(
    variant: Variant,
    launch: Launch,
    x: np.ndarray,
    acc_name: str,
    trace_row: int | None,
    row_batches: int = 1,
    progress: Callable[[int, int], object] | None = None,
):
    """Emulate `variant` launched as `launch` on a 2-D array x; returns (out, RawTrace or None).

    row_batches > 1 emulates the rows in that many batches, each under the whole input's launch: every row's result
    depends on its own elements, the launch and its index alone (fast_row splits a row at the 16-byte
    boundaries of the whole input), so the output (and trace) is bit-identical.
    progress(rows done, rows) is called after each batch; an exception it raises ends the run there."""
    rows = x.shape[0]
    size = cdiv(rows, max(1, min(row_batches, rows)))
    if size == rows and progress is None:
        return _run_rows(variant, launch, x, acc_name, trace_row)
    out, raw = np.empty_like(x), None
    for start in range(0, rows, size):
        stop = min(start + size, rows)
        traced = trace_row if trace_row is not None and start <= trace_row < stop else None
        out[start:stop], part = _run_rows(
            variant, launch, x[start:stop], acc_name, None if traced is None else traced - start, start
        )
        raw = part if traced is not None else raw
        if progress is not None:
            progress(stop, rows)
    return out, raw


def _run_rows(
    variant: Variant, launch: Launch, x: np.ndarray, acc_name: str, trace_row: int | None, first_row: int = 0
):
    """Rows first_row, first_row + 1, ... of the input, as x."""
    acc = Acc(acc_name)
    cols = x.shape[1]
    raw = None
    if trace_row is not None:
        raw = RawTrace.empty(*trace_shape(variant, launch, cols))
    out = EMULATIONS[variant.key](x, acc, launch, trace_row, raw, first_row)
    return out, raw


def _emulate_online(family: str) -> Callable:
    return lambda x, acc, launch, row, raw, first: _online(
        x, acc, launch.threads_per_row, family, _Recorder.single(raw, row, x.shape[1])
    )


# Each variant's emulation, by registry key: (x, acc, launch, trace_row, raw trace or None, index of x's
# first row in the input) -> output.
EMULATIONS: dict[str, Callable[[np.ndarray, Acc, Launch, int | None, RawTrace | None, int], np.ndarray]] = {
    "naive": lambda x, acc, launch, row, raw, first: _naive(x, acc),
    "safe_thread": lambda x, acc, launch, row, raw, first: _safe_thread(x, acc, row, raw),
    "online_thread": _emulate_online("thread"),
    "online_warp": _emulate_online("warp"),
    "online_block": _emulate_online("block"),
    "safe_block": lambda x, acc, launch, row, raw, first: _safe_block(x, acc, launch.threads_per_row),
    "split_row": lambda x, acc, launch, row, raw, first: _split_row(x, acc, launch, row, raw),
    "fast": lambda x, acc, launch, row, raw, first: emulate_fast(x, launch, first),
}

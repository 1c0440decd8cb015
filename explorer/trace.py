"""Traces: the (m, d) states a kernel recorded for one row, beside the exact float64 values.

Both backends fill the same raw buffers (RawTrace, laid out as kernels/common.cuh describes);
build_trace turns them into a Trace and computes the float64 states along the same order of
operations, so the kernel's numbers can be put beside the exact ones step by step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .geometry import Launch, cdiv
from .registry import Variant

OFFSETS = (16, 8, 4, 2, 1)
NODES_PER_BUTTERFLY = sum(OFFSETS)  # 31


@dataclass
class RawTrace:
    """The buffers a traced launch writes (float32 holds every fp16/bf16 state exactly)."""

    step_m: np.ndarray  # (threads, steps) float32
    step_d: np.ndarray
    step_index: np.ndarray  # (threads, steps) int32, -1 where the thread had no element
    merge_m: np.ndarray  # (levels * 31,) float32
    merge_d: np.ndarray

    @classmethod
    def empty(cls, threads: int, steps: int, merge_nodes: int) -> RawTrace:
        return cls(
            np.full((threads, steps), np.nan, np.float32),
            np.full((threads, steps), np.nan, np.float32),
            np.full((threads, steps), -1, np.int32),
            np.full(max(merge_nodes, 1), np.nan, np.float32),
            np.full(max(merge_nodes, 1), np.nan, np.float32),
        )


def trace_shape(variant: Variant, launch: Launch, cols: int) -> tuple[int, int, int]:
    """(threads on the row, steps per thread, merge nodes) of a traced launch."""
    threads, chunks = launch.threads_per_row, launch.chunks
    steps = cdiv(cdiv(cols, chunks), threads // chunks)
    per_chunk = {"thread": 0, "warp": 1, "block": threads // 32 + 1, "split": launch.block // 32 + 1}[variant.family]
    return threads, steps, chunks * per_chunk * NODES_PER_BUTTERFLY + chunks - 1


@dataclass
class MergeLevel:
    """One level of a butterfly: node i merged ids left[i] and right[i] into (m[i], d[i]).

    A "chunks" level is a sequential fold instead: node i merged chunks 0..i (left) with chunk i+1.
    """

    stage: str  # "lanes" (a warp's 32 lanes; ids are threads), "warps" (ids are warps) or "chunks" (split rows)
    warp: int  # which warp, for a "lanes" stage; -1 otherwise
    offset: int
    left: np.ndarray
    right: np.ndarray
    m: np.ndarray
    d: np.ndarray
    exact_m: np.ndarray
    exact_d: np.ndarray
    chunk: int = -1  # which chunk of a split row


@dataclass
class Trace:
    variant: str
    row: int
    acc: str
    kind: str  # "online" (d_j against the running max) or "safe" (d_j against the row's final max)
    x: np.ndarray  # the traced row's inputs, as float64
    index: np.ndarray  # (threads, steps): element folded at each step, -1 = none
    m: np.ndarray  # (threads, steps) the kernel's running max, in the accumulator's precision
    d: np.ndarray
    exact_m: np.ndarray  # float64 along the same order of operations
    exact_d: np.ndarray
    merges: list[MergeLevel]
    final_m: float
    final_d: float
    exact_final_m: float
    exact_final_d: float

    @property
    def threads(self) -> int:
        return self.index.shape[0]

    @property
    def d_rel_error(self) -> np.ndarray:
        """Relative error of the kernel's d_j against float64, per (thread, step)."""
        return d_relative_error(self.d, self.exact_d)

    @property
    def folded_d_rel_error(self) -> np.ndarray:
        """d_rel_error, with 0 wherever d equals float64's: a lane whose elements so far were all −∞ holds d = 0
        exactly (d_rel_error leaves 0 against 0 NaN, for a lane or subtree that got no element)."""
        with np.errstate(invalid="ignore"):
            return np.where(self.d == self.exact_d, 0.0, self.d_rel_error)


def d_relative_error(d, exact_d) -> np.ndarray:
    """|d − exact d| / |exact d|, elementwise in float64. Where exact d is 0: NaN if d is 0 too (a lane or subtree
    that got no element has no relative error), inf if it is not."""
    d, exact = np.asarray(d, np.float64), np.asarray(exact_d, np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return np.abs(d - exact) / np.where((exact == 0) & (d == 0), np.nan, np.abs(exact))


def _exact_merge(m1, d1, m2, d2):
    """The merge rule in float64, with common.cuh's guards (equal maxima rescale by exactly 1)."""
    m = np.where(m2 > m1, m2, m1)
    with np.errstate(invalid="ignore", over="ignore"):
        s1 = np.where(m1 == m, 1.0, np.exp(m1 - m))
        s2 = np.where(m2 == m, 1.0, np.exp(m2 - m))
        return m, d1 * s1 + d2 * s2


def _exact_steps(x: np.ndarray, index: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Float64 running (m, d) per thread along its own elements, vectorised across threads."""
    threads, steps = index.shape
    exact_m = np.full((threads, steps), np.nan)
    exact_d = np.full((threads, steps), np.nan)
    if kind == "safe":
        valid = index[0] >= 0
        xs = x[index[0, valid]]
        with np.errstate(invalid="ignore", over="ignore"):
            exact_m[0, valid] = np.fmax.accumulate(xs)
            exact_d[0, valid] = np.cumsum(np.exp(xs - np.max(xs)))
        return exact_m, exact_d
    m = np.full(threads, -np.inf)
    d = np.zeros(threads)
    for s in range(steps):
        valid = index[:, s] >= 0
        xs = np.where(valid, x[np.maximum(index[:, s], 0)], -np.inf)
        with np.errstate(invalid="ignore", over="ignore"):
            new_m = np.where(xs > m, xs, m)
            scale = np.where(m == new_m, 1.0, np.exp(m - new_m))
            term = np.where(xs == -np.inf, 0.0, np.exp(xs - new_m))
        m, d = np.where(valid, new_m, m), np.where(valid, d * scale + term, d)
        exact_m[:, s], exact_d[:, s] = m, d
    return exact_m, exact_d


def _butterfly(
    raw: RawTrace, base: int, state_m, state_d, stage: str, warp: int, id_offset: int, width: int, chunk: int = -1
):
    """Replay one 32-lane butterfly exactly; return its levels and the lane-0 (= every lane's) state."""
    levels = []
    m, d = state_m.copy(), state_d.copy()
    lanes = np.arange(32)
    for offset in OFFSETS:
        m, d = _exact_merge(m, d, m[lanes ^ offset], d[lanes ^ offset])
        nodes = base + 32 - 2 * offset + np.arange(offset)
        keep = np.arange(offset) + offset < width  # merges with an empty partner only pad the tree
        levels.append(
            MergeLevel(
                stage=stage,
                warp=warp,
                offset=offset,
                left=np.arange(offset)[keep] + id_offset,
                right=np.arange(offset)[keep] + offset + id_offset,
                m=raw.merge_m[nodes][keep].astype(np.float64),
                d=raw.merge_d[nodes][keep].astype(np.float64),
                exact_m=m[:offset][keep],
                exact_d=d[:offset][keep],
                chunk=chunk,
            )
        )
    return levels, m[0], d[0]


def _block(raw: RawTrace, base: int, lane_m, lane_d, threads: int, chunk: int = -1):
    """Replay common.cuh's block_merge: a butterfly per warp, then one over the warps."""
    warps = threads // 32
    merges = []
    warp_m, warp_d = np.full(32, -np.inf), np.zeros(32)
    for w in range(warps):
        levels, warp_m[w], warp_d[w] = _butterfly(
            raw,
            base + w * NODES_PER_BUTTERFLY,
            lane_m[w * 32 : (w + 1) * 32],
            lane_d[w * 32 : (w + 1) * 32],
            "lanes",
            w,
            w * 32,
            32,
            chunk,
        )
        merges += levels
    levels, em, ed = _butterfly(raw, base + warps * NODES_PER_BUTTERFLY, warp_m, warp_d, "warps", -1, 0, warps, chunk)
    top = base + NODES_PER_BUTTERFLY * warps + NODES_PER_BUTTERFLY - 1
    return merges + levels, (float(raw.merge_m[top]), float(raw.merge_d[top]), em, ed)


def build_trace(variant: Variant, launch: Launch, raw: RawTrace, x_row: np.ndarray, row: int, acc: str) -> Trace:
    """The kernel's recorded states of one row beside float64's, computed along the same order of operations:
    each thread's steps, then the merges of its family (none, a warp's butterfly, a block's, or a split row's
    blocks and the chain of chunks)."""
    x = np.asarray(x_row).astype(np.float64)
    index = raw.step_index.astype(np.int64)
    exact_m, exact_d = _exact_steps(x, index, variant.method)
    kernel_m, kernel_d = raw.step_m.astype(np.float64), raw.step_d.astype(np.float64)
    threads = index.shape[0]
    merges: list[MergeLevel] = []
    if variant.family == "thread":
        final = (kernel_m[0, -1], kernel_d[0, -1], exact_m[0, -1], exact_d[0, -1])
    elif variant.family == "warp":
        lane_m, lane_d = _last_states(exact_m, exact_d, index)
        merges, em, ed = _butterfly(raw, 0, lane_m, lane_d, "lanes", 0, 0, min(threads, 32))
        final = (merges[-1].m[0], merges[-1].d[0], em, ed)
    elif variant.family == "block":
        merges, final = _block(raw, 0, *_last_states(exact_m, exact_d, index), threads)
    else:
        merges, final = _split_row(raw, launch.chunks, *_last_states(exact_m, exact_d, index), threads)
    return Trace(
        variant=variant.key,
        row=row,
        acc=acc,
        kind=variant.method,
        x=x,
        index=index,
        m=kernel_m,
        d=kernel_d,
        exact_m=exact_m,
        exact_d=exact_d,
        merges=merges,
        final_m=float(final[0]),
        final_d=float(final[1]),
        exact_final_m=float(final[2]),
        exact_final_d=float(final[3]),
    )


def _last_states(exact_m: np.ndarray, exact_d: np.ndarray, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each thread's float64 (m, d) after its last element (the empty state, (-inf, 0), where it had none)."""
    count = (index >= 0).sum(axis=1)
    last = (np.arange(index.shape[0]), np.maximum(count - 1, 0))
    return np.where(count > 0, exact_m[last], -np.inf), np.where(count > 0, exact_d[last], 0.0)


def _split_row(raw: RawTrace, chunks: int, lane_m, lane_d, threads: int) -> tuple[list[MergeLevel], tuple]:
    """Replay a split row: a block merge per chunk, then the chunks merged in order (a "chunks" level)."""
    block = threads // chunks
    per_chunk = (block // 32 + 1) * NODES_PER_BUTTERFLY
    merges, chunk_states = [], []
    for c in range(chunks):
        levels, state = _block(
            raw, c * per_chunk, lane_m[c * block : (c + 1) * block], lane_d[c * block : (c + 1) * block], block, c
        )
        merges += levels
        chunk_states.append(state)
    final = chunk_states[0]
    seq_m, seq_d, seq_exact_m, seq_exact_d = [], [], [], []
    for k in range(1, chunks):
        em, ed = _exact_merge(final[2], final[3], chunk_states[k][2], chunk_states[k][3])
        node = chunks * per_chunk + k - 1
        final = (float(raw.merge_m[node]), float(raw.merge_d[node]), float(em), float(ed))
        for column, value in zip((seq_m, seq_d, seq_exact_m, seq_exact_d), final):
            column.append(value)
    if chunks > 1:
        merges.append(
            MergeLevel(
                stage="chunks",
                warp=-1,
                offset=0,
                left=np.zeros(chunks - 1, np.int64),
                right=np.arange(1, chunks),
                m=np.array(seq_m),
                d=np.array(seq_d),
                exact_m=np.array(seq_exact_m),
                exact_d=np.array(seq_exact_d),
            )
        )
    return merges, final

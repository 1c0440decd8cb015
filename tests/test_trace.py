"""Traces: shapes, recorded indices, the (m, d) states against float64 sums computed here, merge levels."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import explorer
from explorer import numerics
from explorer.backends.emulator import Acc

DT = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16)}
# The core's teaching kernels (softmax.cu): variants of other families are tested by their own suites.
CORE = {
    k: v
    for k, v in explorer.VARIANTS.items()
    if v.family in ("thread", "warp", "block") and v.method in ("naive", "safe", "online")
}
TRACEABLE = [k for k, v in CORE.items() if v.traceable]
UNTRACEABLE = [k for k, v in explorer.VARIANTS.items() if not v.traceable]
TRACEABLE_ANY = [k for k, v in explorer.VARIANTS.items() if v.traceable]
OFFSETS = [16, 8, 4, 2, 1]
# (variant, block size) pairs: every traceable variant, block variants at odd and even warp counts
TRACED = [(v, None) for v in TRACEABLE if not explorer.VARIANTS[v].takes_block_size] + [
    (v, b) for v in TRACEABLE if explorer.VARIANTS[v].takes_block_size for b in (32, 96, 256, 1024)
]
SHAPES = [(1, 1), (3, 33), (2, 300), (4, 1100)]


def threads_of(variant: str, block_size: int | None) -> int:
    v = explorer.VARIANTS[variant]
    return {"thread": 1, "warp": 32, "block": block_size or v.default_block_size}[v.family]


def traced(x, variant, row, acc="float32", block_size=None):
    return explorer.softmax(x, variant, acc=acc, backend="emulator", trace_row=row, block_size=block_size)


def ids(pairs):
    return [f"{v}-b{b}" for v, b in pairs]


def acc_exact_input(dtype: str, acc: str) -> bool:
    """Inputs of `dtype` are exact in `acc` (normal-range values): the kernel sees the same x as float64."""
    return acc == "float32" or acc == dtype


# ---------------------------------------------------------------- shapes and recorded indices


@pytest.mark.parametrize(("variant", "block_size"), TRACED, ids=ids(TRACED))
@pytest.mark.parametrize("shape", SHAPES)
def test_trace_shape_and_indices(variant, block_size, shape):
    rows, cols = shape
    x = explorer.make_input("normal", rows, cols, seed=cols)
    row = rows - 1
    t = traced(x, variant, row, block_size=block_size).trace
    assert isinstance(t, explorer.Trace)
    threads = threads_of(variant, block_size)
    steps = math.ceil(cols / threads)
    assert t.threads == threads
    for a in (t.index, t.m, t.d, t.exact_m, t.exact_d):
        assert a.shape == (threads, steps)
    expected = np.full((threads, steps), -1)
    for lane in range(threads):
        js = list(range(lane, cols, threads))
        expected[lane, : len(js)] = js
    np.testing.assert_array_equal(t.index, expected)
    # every element recorded exactly once
    assert sorted(t.index[t.index >= 0].tolist()) == list(range(cols))
    # states exist exactly where an element was folded
    np.testing.assert_array_equal(np.isnan(t.m), t.index < 0)
    np.testing.assert_array_equal(np.isnan(t.d), t.index < 0)
    assert t.variant == variant and t.row == row and t.acc == "float32"
    assert t.kind == explorer.VARIANTS[variant].method
    np.testing.assert_array_equal(t.x, x[row].astype(np.float64))


def test_untraced_run_has_no_trace():
    x = explorer.make_input("normal", 2, 40)
    for v in CORE:
        assert explorer.softmax(x, v, backend="emulator").trace is None


# ---------------------------------------------------------------- states against float64


@pytest.mark.parametrize(("variant", "block_size"), TRACED, ids=ids(TRACED))
@pytest.mark.parametrize("dtype", list(DT))
@pytest.mark.parametrize("acc", list(DT))
def test_final_state_reproduces_the_output(variant, block_size, dtype, acc):
    x = explorer.make_input("normal", 3, 300, dtype=dtype, seed=7)
    res = traced(x, variant, 1, acc=acc, block_size=block_size)
    t = res.trace
    assert np.isfinite(t.final_m) and np.isfinite(t.final_d) and t.final_d >= 1.0
    # final m and d are values of the accumulator type
    assert float(np.asarray(t.final_m).astype(DT[acc])) == t.final_m
    assert float(np.asarray(t.final_d).astype(DT[acc])) == t.final_d
    # common.cuh's normalise: e^(to_acc(x) - m) / d, with x rounded to the accumulator as it entered the state
    x64 = x[1].astype(np.float32).astype(DT[acc]).astype(np.float64)
    predicted = np.exp(x64 - t.final_m) / t.final_d
    got = res.out[1].astype(np.float64)
    fmt = explorer.FORMATS[dtype]
    u32 = 2.0**-24
    # fp32 subtraction, expf, division, then one rounding to the output type
    rtol = fmt.unit_roundoff + u32 * (4 + np.abs(x64 - t.final_m))
    atol = 2 * fmt.smallest_normal * fmt.unit_roundoff
    assert np.all(np.abs(got - predicted) <= rtol * np.abs(predicted) + atol)


@pytest.mark.parametrize(("variant", "block_size"), TRACED, ids=ids(TRACED))
@pytest.mark.parametrize("dist", ["normal", "increasing", "decreasing", "zipf"])
def test_exact_states_are_direct_float64_sums(variant, block_size, dist):
    x = explorer.make_input(dist, 2, 257, seed=3)
    t = traced(x, variant, 0, block_size=block_size).trace
    x64 = x[0].astype(np.float64)
    assert t.exact_final_m == x64.max()
    assert t.exact_final_d == pytest.approx(math.fsum(np.exp(x64 - x64.max())), rel=1e-12)
    for lane in range(t.threads):
        for s in range(t.index.shape[1]):
            if t.index[lane, s] < 0:
                continue  # no element at this step (the exact state is not specified there)
            seen = x64[t.index[lane, : s + 1]]
            if t.kind == "safe":  # d against the row's final max, m the running max
                assert t.exact_m[lane, s] == seen.max()
                want = math.fsum(np.exp(seen - x64.max()))
            else:
                assert t.exact_m[lane, s] == seen.max()
                want = math.fsum(np.exp(seen - seen.max()))
            assert t.exact_d[lane, s] == pytest.approx(want, rel=1e-12)


# input types the accumulator holds exactly, so the kernel folds the same x as float64 does
EXACT_PAIRS = [(dt, acc) for dt in DT for acc in DT if acc_exact_input(dt, acc)]


@pytest.mark.parametrize(("variant", "block_size"), TRACED, ids=ids(TRACED))
@pytest.mark.parametrize(("dtype", "acc"), EXACT_PAIRS)
def test_kernel_d_within_the_error_bound(variant, block_size, dtype, acc):
    x = explorer.make_input("normal", 2, 700, dtype=dtype, seed=11)
    r = traced(x, variant, 1, acc=acc, block_size=block_size)
    t = r.trace
    folded = np.cumsum(t.index >= 0, axis=1)  # elements folded so far by each thread
    bound = np.vectorize(lambda n: explorer.error_bound(int(n), acc, acc))(np.maximum(folded, 1))
    valid = t.index >= 0
    rel = t.d_rel_error
    assert np.all(rel[valid] <= bound[valid]), float(np.max(rel[valid] / bound[valid]))
    # the running max is exact: a max of values the accumulator holds
    np.testing.assert_array_equal(t.m[valid], t.exact_m[valid])
    # the final d, after the merges, within the bound of the launch's sequential terms
    rel_final = abs(t.final_d - t.exact_final_d) / t.exact_final_d
    assert rel_final <= explorer.error_bound(numerics.sequential_terms(r.launch, x.shape[-1]), acc, acc)
    assert t.final_m == t.exact_final_m


# ---------------------------------------------------------------- merge levels


@pytest.mark.parametrize(("variant", "block_size"), TRACED, ids=ids(TRACED))
@pytest.mark.parametrize("cols", [1, 33, 300, 1100])
def test_merge_level_structure(variant, block_size, cols):
    x = explorer.make_input("normal", 1, cols, seed=cols)
    t = traced(x, variant, 0, block_size=block_size).trace
    family = explorer.VARIANTS[variant].family
    if family == "thread":
        assert t.merges == []
        return
    expected = []  # (stage, warp, offset, left, right)
    if family == "warp":
        expected = [("lanes", 0, o, list(range(o)), list(range(o, 2 * o))) for o in OFFSETS]
    else:
        warps = threads_of(variant, block_size) // 32
        for w in range(warps):
            expected += [
                ("lanes", w, o, [32 * w + i for i in range(o)], [32 * w + o + i for i in range(o)]) for o in OFFSETS
            ]
        # the warps' butterfly: merges with an empty partner (warp index >= warps) are skipped
        expected += [
            ("warps", -1, o, [i for i in range(o) if i + o < warps], [i + o for i in range(o) if i + o < warps])
            for o in OFFSETS
        ]
    assert len(t.merges) == len(expected)
    for level, (stage, warp, offset, left, right) in zip(t.merges, expected, strict=True):
        assert isinstance(level, explorer.MergeLevel)
        assert (level.stage, level.warp, level.offset) == (stage, warp, offset)
        assert level.left.tolist() == left and level.right.tolist() == right
        for a in (level.m, level.d, level.exact_m, level.exact_d):
            assert a.shape == (len(left),)


def test_block_96_has_three_warps_and_two_real_warp_merges():
    x = explorer.make_input("normal", 2, 500, seed=1)
    t = traced(x, "online_block", 0, block_size=96).trace
    warp_levels = [lv for lv in t.merges if lv.stage == "warps"]
    assert sum(lv.stage == "lanes" for lv in t.merges) == 3 * 5
    assert [lv.offset for lv in warp_levels] == OFFSETS
    assert [len(lv.left) for lv in warp_levels] == [0, 0, 0, 1, 1]
    assert (warp_levels[3].left.tolist(), warp_levels[3].right.tolist()) == ([0], [2])
    assert (warp_levels[4].left.tolist(), warp_levels[4].right.tolist()) == ([0], [1])
    # the last merge is the row's state
    assert warp_levels[4].m[0] == t.final_m and warp_levels[4].d[0] == t.final_d


def lane_members(offset: int, lane: int, width: int) -> list[int]:
    """After butterfly levels 16..offset, lane `lane` (< offset) holds the lanes congruent to it mod offset."""
    return [k for k in range(lane, width, offset)]


MERGING = [p for p in TRACED if CORE[p[0]].family != "thread"]


@pytest.mark.parametrize(("variant", "block_size"), MERGING, ids=ids(MERGING))
@pytest.mark.parametrize("acc", list(DT))
def test_merge_nodes_replay_and_exact_sums(variant, block_size, acc):
    cols = 1500
    x = explorer.make_input("normal", 2, cols, dtype=acc, seed=5)
    t = traced(x, variant, 1, acc=acc, block_size=block_size).trace
    x64 = x[1].astype(np.float64)
    a = Acc(acc)
    threads = t.threads
    count = (t.index >= 0).sum(axis=1)
    last_m = np.array([t.m[i, count[i] - 1] if count[i] else -np.inf for i in range(threads)], np.float32)
    last_d = np.array([t.d[i, count[i] - 1] if count[i] else 0.0 for i in range(threads)], np.float32)
    elements = [x64[t.index[i][t.index[i] >= 0]] for i in range(threads)]
    levels = iter(t.merges)
    steps = t.index.shape[1]

    def check_butterfly(m, d, groups, width, depth0):
        m, d = m.astype(DT[acc]), d.astype(DT[acc])
        lanes = np.arange(32)
        for depth, offset in enumerate(OFFSETS, start=1):
            m, d = a.merge(m, d, m[lanes ^ offset], d[lanes ^ offset])
            level = next(levels)
            keep = [i for i in range(offset) if i + offset < width]
            # the recorded node is the merge rule applied to the recorded children, bit for bit
            np.testing.assert_array_equal(level.m, m[keep].astype(np.float64))
            np.testing.assert_array_equal(level.d, d[keep].astype(np.float64))
            for k, lane in enumerate(keep):
                vals = np.concatenate([groups[g] for g in lane_members(offset, lane, width)])
                if vals.size == 0:
                    continue
                exact = math.fsum(np.exp(vals - vals.max()))
                assert level.exact_m[k] == vals.max()
                assert level.exact_d[k] == pytest.approx(exact, rel=1e-12)
                rel = abs(level.d[k] - exact) / exact
                assert rel <= explorer.error_bound(steps + depth0 + depth, acc, acc), (offset, lane, rel)
        return m[0], d[0]

    if explorer.VARIANTS[variant].family == "warp":
        check_butterfly(last_m, last_d, elements, 32, 0)
    else:
        warps = threads // 32
        wm, wd = np.full(32, -np.inf, np.float32), np.zeros(32, np.float32)
        wgroups = []
        for w in range(warps):
            mw, dw = check_butterfly(
                last_m[32 * w : 32 * w + 32], last_d[32 * w : 32 * w + 32], elements[32 * w : 32 * w + 32], 32, 0
            )
            wm[w], wd[w] = np.float32(mw.astype(np.float32)), np.float32(dw.astype(np.float32))
            wgroups.append(np.concatenate(elements[32 * w : 32 * w + 32]))
        wgroups += [np.zeros(0)] * (32 - warps)
        m, d = check_butterfly(wm, wd, wgroups, warps, 5)
        assert float(m) == t.final_m and float(d) == t.final_d
    assert next(levels, None) is None


# ---------------------------------------------------------------- tracing changes nothing


@pytest.mark.parametrize(("variant", "block_size"), TRACED, ids=ids(TRACED))
@pytest.mark.parametrize("dtype", list(DT))
@pytest.mark.parametrize("acc", list(DT))
def test_traced_output_equals_untraced_bitwise(variant, block_size, dtype, acc):
    x = explorer.make_input("nonfinite", 5, 130, dtype=dtype, seed=2, rate=0.01)
    plain = explorer.softmax(x, variant, acc=acc, backend="emulator", block_size=block_size).out
    for row in (0, 4):
        res = traced(x, variant, row, acc=acc, block_size=block_size)
        assert res.out.view(np.uint8).tobytes() == plain.view(np.uint8).tobytes()


def test_trace_of_a_masked_row():
    x = explorer.make_input("causal_mask", 40, 70, seed=1, masked_rows=2)
    for variant, block in TRACED:
        t = traced(x, variant, 5, block_size=block).trace  # row 5 keeps elements 0..5
        assert t.exact_final_m == x[5, :6].astype(np.float64).max()
        assert t.final_m == t.exact_final_m
        assert t.exact_final_d == pytest.approx(math.fsum(np.exp(x[5, :6].astype(np.float64) - t.exact_final_m)))
        # an all -inf row: the trace records the NaN result's state without raising
        t0 = traced(x, variant, 0, block_size=block).trace
        assert t0.exact_final_m == -np.inf


def test_one_dimensional_input_traces_row_zero():
    x = explorer.make_input("normal", 1, 90, seed=4)[0]
    for variant, block in TRACED:
        res = traced(x, variant, 0, block_size=block)
        assert res.out.shape == (90,)
        np.testing.assert_array_equal(res.trace.x, x.astype(np.float64))


# ---------------------------------------------------------------- trace_row validation


@pytest.mark.parametrize("variant", TRACEABLE)
@pytest.mark.parametrize("row", [3, -1, 100, True, False, 1.0, "0", [0]])
def test_trace_row_validation(variant, row):
    x = explorer.make_input("normal", 3, 10)
    with pytest.raises(explorer.InvalidInput, match="trace_row") as info:
        traced(x, variant, row)
    assert "0 to 2" in str(info.value)


@pytest.mark.parametrize("variant", UNTRACEABLE)
def test_trace_row_on_an_untraceable_variant(variant):
    x = explorer.make_input("normal", 3, 10)
    with pytest.raises(explorer.InvalidInput) as info:
        traced(x, variant, 0)
    message = str(info.value)
    assert variant in message and "no trace" in message
    for v in TRACEABLE_ANY:
        assert v in message


@pytest.mark.parametrize("row", [np.int64(2), np.int32(0), np.uint8(1)])
def test_numpy_integer_trace_row(row):
    x = explorer.make_input("normal", 3, 10)
    assert traced(x, "online_warp", row).trace.row == int(row)


def test_the_relative_error_of_d_is_blank_for_an_empty_lane_and_infinite_for_a_d_where_none_should_be():
    from explorer.trace import d_relative_error

    rel = d_relative_error([0.0, 1.0, 3.0], [0.0, 0.0, 2.0])
    assert np.isnan(rel[0]) and rel[1] == np.inf and rel[2] == 0.5
    # a d that underflowed to 0 where float64's is not: wholly wrong (1), not blank; an exact d: 0
    assert d_relative_error([0.0, 1.0, 2.0], [2.0, 1.0, 2.0]).tolist() == [1.0, 0.0, 0.0]


# ---------------------------------------------------------------- a split row: blocks, then the chain of chunks


@pytest.mark.parametrize("acc", list(DT))
@pytest.mark.parametrize("dist", ["normal", "increasing", "decreasing"])  # the max in any chunk, the last, the first
def test_split_row_trace_replays_its_chunks_and_their_chain(dist, acc):
    """split_row's trace (the core's tests above cover the other families): each chunk's columns in its threads,
    each chunk's block merge against float64 sums computed here, and the chain that folds chunk k into chunks
    0..k-1: every recorded node the merge rule applied to the recorded states before it, bit for bit, beside
    the float64 sum of the columns folded so far."""
    cols = 5000
    x = explorer.make_input(dist, 2, cols, dtype=acc, seed=9)  # held exactly by the accumulator
    r = traced(x, "split_row", 1, acc=acc)
    t, chunks = r.trace, r.launch.chunks
    block, length = t.threads // chunks, math.ceil(cols / chunks)
    assert chunks > 2 and t.kind == "online"
    x64 = x[1].astype(np.float64)

    def exact(vals):
        return vals.max(), math.fsum(np.exp(vals - vals.max()))

    for c in range(chunks):
        idx = t.index[c * block : (c + 1) * block]
        assert sorted(idx[idx >= 0].tolist()) == list(range(c * length, min(cols, (c + 1) * length)))
    tops = {lv.chunk: lv for lv in t.merges if lv.stage == "warps" and lv.offset == 1}  # each chunk's block merge
    assert sorted(tops) == list(range(chunks))
    for c, top in tops.items():
        m, d = exact(x64[c * length : (c + 1) * length])
        assert top.exact_m[0] == m and top.exact_d[0] == pytest.approx(d, rel=1e-12)
    chain = t.merges[-1]
    assert [lv.stage for lv in t.merges].count("chunks") == 1 and chain.stage == "chunks"
    assert chain.left.tolist() == [0] * (chunks - 1) and chain.right.tolist() == list(range(1, chunks))
    a = Acc(acc)

    def held(value):
        return np.array([value]).astype(DT[acc])

    m, d = held(tops[0].m[0]), held(tops[0].d[0])
    for k in range(1, chunks):
        m, d = a.merge(m, d, held(tops[k].m[0]), held(tops[k].d[0]))
        assert (chain.m[k - 1], chain.d[k - 1]) == (float(m[0]), float(d[0])), k
        em, ed = exact(x64[: (k + 1) * length])
        assert chain.exact_m[k - 1] == em and chain.exact_d[k - 1] == pytest.approx(ed, rel=1e-12), k
    assert (t.final_m, t.final_d) == (chain.m[-1], chain.d[-1])
    em, ed = exact(x64)
    assert t.exact_final_m == em and t.exact_final_d == pytest.approx(ed, rel=1e-12)
    bound = explorer.error_bound(numerics.sequential_terms(r.launch, cols), acc, acc)
    assert abs(t.final_d - ed) / ed <= bound

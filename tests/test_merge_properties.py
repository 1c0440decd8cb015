"""The (m, d) merge rule: property tests with the emulator's accumulator arithmetic and plain float64."""

from __future__ import annotations

import itertools
import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.backends.emulator import Acc

DT = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16)}
U32 = 2.0**-24

finite32 = st.floats(-30.0, 30.0, width=32, allow_nan=False, allow_infinity=False)
rows = st.lists(finite32, min_size=1, max_size=64)


# ---------------------------------------------------------------- helpers


def state(acc: Acc, m: float, d: float):
    return np.array([m], np.float32).astype(acc.dtype), np.array([d], np.float32).astype(acc.dtype)


def empty(acc: Acc):
    return acc.const(-np.inf, (1,)), acc.const(0.0, (1,))


def fold(acc: Acc, values, start=None):
    m, d = start if start is not None else empty(acc)
    for v in values:
        m, d = acc.online_step(m, d, np.array([v], np.float32).astype(acc.dtype))
    return m, d


def bits(s) -> bytes:
    m, d = s
    return np.asarray(m).tobytes() + np.asarray(d).tobytes()


@st.composite
def chunked_tree(draw, max_size=64):
    """A row, a split of it into consecutive chunks, and a random binary tree over the chunk list."""
    row = draw(st.lists(finite32, min_size=1, max_size=max_size))
    cuts = sorted(
        draw(st.sets(st.integers(1, max(1, len(row) - 1)), max_size=min(12, len(row) - 1))) if len(row) > 1 else []
    )
    bounds = [0, *cuts, len(row)]
    chunks = [row[a:b] for a, b in itertools.pairwise(bounds) if b > a]

    def tree(lo, hi):  # leaves lo..hi-1
        if hi - lo == 1:
            return lo
        split = draw(st.integers(lo + 1, hi - 1))
        left, right = tree(lo, split), tree(split, hi)
        return (right, left) if draw(st.booleans()) else (left, right)  # either operand order

    return row, chunks, tree(0, len(chunks))


def depth(t) -> int:
    return 0 if isinstance(t, int) else 1 + max(depth(t[0]), depth(t[1]))


def reduce_tree(t, leaf, merge):
    if isinstance(t, int):
        return leaf(t)
    return merge(reduce_tree(t[0], leaf, merge), reduce_tree(t[1], leaf, merge))


# float64, written here from the definitions: m = max, d = sum of e^(x - m)
def f64_fold(values):
    m, d = -math.inf, 0.0
    for v in values:
        new_m = max(m, v)
        d = (d * math.exp(m - new_m) if m != -math.inf else 0.0) + math.exp(v - new_m)
        m = new_m
    return m, d


def f64_merge(a, b):
    m = max(a[0], b[0])
    if m == -math.inf:
        return m, 0.0
    return m, a[1] * math.exp(a[0] - m) + b[1] * math.exp(b[0] - m)


def exact(row):
    m = max(row)
    return m, math.fsum(math.exp(v - m) for v in row)


# ---------------------------------------------------------------- any split, any tree order


@settings(max_examples=150, deadline=None)
@given(chunked_tree())
def test_tree_of_chunks_equals_sequential_float32(case):
    row, chunks, t = case
    acc = Acc("float32")
    m_seq, d_seq = fold(acc, row)
    m_tree, d_tree = reduce_tree(t, lambda i: fold(acc, chunks[i]), lambda a, b: acc.merge(a[0], a[1], b[0], b[1]))
    m_ex, d_ex = exact(row)
    # the max is exact whatever the order
    assert float(m_tree[0]) == float(m_seq[0]) == m_ex
    n, k = len(row), depth(t)
    # each step and each merge costs a few roundings: one exp, one multiply, one add (+ a rescale's exp)
    bound = 4 * (n + k) * U32
    assert abs(float(d_seq[0]) - d_ex) <= bound * d_ex
    assert abs(float(d_tree[0]) - d_ex) <= bound * d_ex
    assert abs(float(d_tree[0]) - float(d_seq[0])) <= 2 * bound * d_ex


@settings(max_examples=150, deadline=None)
@given(chunked_tree())
def test_tree_of_chunks_equals_sequential_float64(case):
    row, chunks, t = case
    seq = f64_fold(row)
    tree = reduce_tree(t, lambda i: f64_fold(chunks[i]), f64_merge)
    m_ex, d_ex = exact(row)
    assert tree[0] == seq[0] == m_ex
    bound = 4 * (len(row) + depth(t)) * 2.0**-53
    assert abs(tree[1] - d_ex) <= bound * d_ex
    assert abs(seq[1] - d_ex) <= bound * d_ex


@settings(max_examples=60, deadline=None)
@given(chunked_tree(max_size=40), st.sampled_from(["float16", "bfloat16"]))
def test_tree_of_chunks_in_half_precision_keeps_the_max_and_the_bound(case, name):
    row, chunks, t = case
    acc = Acc(name)
    u = 2.0 ** -{"float16": 11, "bfloat16": 8}[name]
    held = [float(np.float32(v).astype(DT[name]).astype(np.float64)) for v in row]  # x as the accumulator holds it
    m_tree, d_tree = reduce_tree(t, lambda i: fold(acc, chunks[i]), lambda a, b: acc.merge(a[0], a[1], b[0], b[1]))
    m_ex, d_ex = exact(held)
    assert float(m_tree[0]) == m_ex
    assert abs(float(d_tree[0]) - d_ex) <= 3 * (len(row) + depth(t)) * u * d_ex + 1e-300


# ---------------------------------------------------------------- algebraic properties, bit for bit


def acc_states(name):
    """Random accumulator states, with ties, -inf maxima (d = 0) and zero sums mixed in."""
    m = st.one_of(st.floats(-60, 60, width=32), st.sampled_from([-np.inf, 0.0, -0.0, 1.0, -1.0]))
    d = st.one_of(st.floats(0.0, 5000.0, width=32), st.sampled_from([0.0, 1.0]))
    return st.tuples(m, d).map(lambda md: (md[0], 0.0) if md[0] == -np.inf else md)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(list(DT)), st.data())
def test_merge_is_commutative_bitwise(name, data):
    acc = Acc(name)
    a = state(acc, *data.draw(acc_states(name)))
    b = state(acc, *data.draw(acc_states(name)))
    if data.draw(st.booleans()):
        b = (a[0].copy(), b[1])  # equal maxima
    ab = acc.merge(a[0], a[1], b[0], b[1])
    ba = acc.merge(b[0], b[1], a[0], a[1])
    assert bits(ab) == bits(ba)
    # the merged max is the larger one, exactly
    assert float(ab[0][0]) == max(float(a[0][0]), float(b[0][0]))


@pytest.mark.parametrize("name", list(DT))
def test_merge_with_signed_zero_maxima_is_commutative(name):
    """+0 against -0 (equal values, different bits): both orders keep the same m, +0."""
    acc = Acc(name)
    a, b = state(acc, 0.0, 1.0), state(acc, -0.0, 2.0)
    ab, ba = acc.merge(a[0], a[1], b[0], b[1]), acc.merge(b[0], b[1], a[0], a[1])
    assert bits(ab) == bits(ba)
    assert not np.signbit(np.asarray(ab[0]).astype(np.float32)[0])


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(list(DT)), st.data())
def test_empty_state_is_the_identity_bitwise(name, data):
    acc = Acc(name)
    s = state(acc, *data.draw(acc_states(name)))
    e = empty(acc)
    assert bits(acc.merge(s[0], s[1], e[0], e[1])) == bits(s)
    assert bits(acc.merge(e[0], e[1], s[0], s[1])) == bits(s)
    assert bits(acc.merge(e[0], e[1], e[0], e[1])) == bits(e)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(list(DT)), st.data())
def test_minus_inf_step_is_the_identity_bitwise(name, data):
    acc = Acc(name)
    s = state(acc, *data.draw(acc_states(name)))
    neg = np.array([-np.inf], np.float32).astype(acc.dtype)
    assert bits(acc.online_step(s[0], s[1], neg)) == bits(s)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(list(DT)), rows, st.data())
def test_minus_inf_elements_add_nothing(name, row, data):
    acc = Acc(name)
    positions = data.draw(st.lists(st.integers(0, len(row)), max_size=10))
    masked = list(row)
    for p in sorted(positions, reverse=True):
        masked.insert(p, -np.inf)
    assert bits(fold(acc, masked)) == bits(fold(acc, row))
    # a row that starts masked behaves the same (no NaN from -inf - -inf)
    assert bits(fold(acc, [-np.inf, -np.inf, *row])) == bits(fold(acc, row))
    # and a fully masked row stays empty
    assert bits(fold(acc, [-np.inf] * (len(positions) + 1))) == bits(empty(acc))


@settings(max_examples=100, deadline=None)
@given(rows)
def test_single_element_chunks_merge_like_online_steps(row):
    """Merging (x, 1) into a state is the online step for x, up to one rounding of the multiply by 1."""
    acc = Acc("float32")
    s_step = fold(acc, row)
    s_merge = empty(acc)
    for v in row:
        s_merge = acc.merge(s_merge[0], s_merge[1], *state(acc, v, 1.0))
    assert float(s_merge[0][0]) == float(s_step[0][0])
    # merge multiplies the new element's 1 by its rescale instead of computing e^(x - m) directly: same value
    assert bits(s_merge) == bits(s_step)


@settings(max_examples=100, deadline=None)
@given(rows, st.floats(-20, 20, width=32))
def test_merge_is_shift_covariant_in_float64(row, shift):
    """Adding c to every x adds c to m and leaves d unchanged (the reason the max is subtracted)."""
    a = f64_fold(row)
    b = f64_fold([v + shift for v in row])
    assert b[0] == max(v + shift for v in row)
    # each x + c rounds (|x + c| <= 50, so its exp moves by <= 50 * 2^-53 relative), then the fold's own roundings
    assert math.isclose(a[1], b[1], rel_tol=len(row) * 2.0**-53 * (8 + 100), abs_tol=0)

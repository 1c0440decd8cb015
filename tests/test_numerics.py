"""The float64 reference, the error report, ulp() and the error bound, against independent math."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import explorer
from explorer import numerics
from explorer.numerics import ulp
from explorer.registry import BLOCK_SIZES

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPE_OBJECTS = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16), "bfloat16": BF16}
# significand bits with the implicit one, and exponent of the smallest normal, from each format's definition
IEEE = {"float32": (24, -126), "float16": (11, -14), "bfloat16": (8, -126)}


def softmax64(row) -> list[float]:
    """Softmax of one finite row with Python floats and math.fsum: an independent float64 computation."""
    m = max(row)
    e = [math.exp(v - m) for v in row]
    s = math.fsum(e)
    return [v / s for v in e]


# ---------------------------------------------------------------- reference()


@settings(max_examples=60, deadline=None)
@given(
    hnp.arrays(
        np.float64, hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=40), elements=st.floats(-300, 300)
    )
)
def test_reference_matches_an_independent_float64_softmax(x):
    ref = explorer.reference(x)
    assert ref.shape == x.shape and ref.dtype == np.float64
    for i in range(x.shape[0]):
        expected = softmax64(list(map(float, x[i])))
        np.testing.assert_allclose(ref[i], expected, rtol=1e-13, atol=1e-300)
        assert abs(math.fsum(ref[i]) - 1.0) < 1e-13


@pytest.mark.parametrize("dtype", list(DTYPE_OBJECTS))
def test_reference_accepts_every_input_dtype(dtype):
    x = np.random.default_rng(0).normal(0, 3, (3, 33)).astype(DTYPE_OBJECTS[dtype])
    ref = explorer.reference(x)
    x64 = x.astype(np.float64)
    for i in range(3):
        np.testing.assert_allclose(ref[i], softmax64(list(x64[i])), rtol=1e-13)


def test_reference_is_shift_invariant_and_handles_huge_values():
    x = np.array([[1e300, 1e300 - 1e285, -1e300], [3e38, 3e38, 3e38]])
    ref = explorer.reference(x)
    assert np.all(np.isfinite(ref))
    np.testing.assert_allclose(ref[1], [1 / 3] * 3, rtol=1e-15)
    assert ref[0, 2] == 0.0
    np.testing.assert_allclose(ref[0, 0] + ref[0, 1], 1.0, rtol=1e-15)


def test_reference_one_dimensional_input():
    x = np.array([0.0, math.log(3.0)])
    np.testing.assert_allclose(explorer.reference(x), [0.25, 0.75], rtol=1e-15)


def test_reference_nan_in_a_row_makes_the_row_nan():
    x = np.array([[1.0, np.nan, 2.0], [1.0, 2.0, 3.0]])
    ref = explorer.reference(x)
    assert np.isnan(ref[0]).all()
    assert np.isfinite(ref[1]).all()


def test_reference_plus_inf_in_a_row_makes_the_row_nan():
    x = np.array([[1.0, np.inf, 2.0], [np.inf, np.inf, 0.0], [np.inf, -np.inf, 0.0]])
    assert np.isnan(explorer.reference(x)).all()


def test_reference_minus_inf_entries_are_exactly_zero():
    x = np.array([[0.0, -np.inf, math.log(3.0), -np.inf]])
    ref = explorer.reference(x)
    assert ref[0, 1] == 0.0 and ref[0, 3] == 0.0
    assert not np.signbit(ref[0, 1])
    np.testing.assert_allclose(ref[0, [0, 2]], [0.25, 0.75], rtol=1e-15)


@pytest.mark.parametrize("cols", [1, 2, 33])
def test_reference_all_minus_inf_row_is_nan(cols):
    x = np.full((2, cols), -np.inf)
    x[1] = 0.0
    ref = explorer.reference(x)
    assert np.isnan(ref[0]).all()
    np.testing.assert_allclose(ref[1], 1.0 / cols, rtol=1e-15)


# ---------------------------------------------------------------- FORMATS, error_bound


@pytest.mark.parametrize("name", list(IEEE))
def test_formats_match_the_ieee_definitions(name):
    fmt = explorer.FORMATS[name]
    p, emin = IEEE[name]
    info = ml_dtypes.finfo(DTYPE_OBJECTS[name]) if name == "bfloat16" else np.finfo(DTYPE_OBJECTS[name])
    assert fmt.significand_bits == p == info.nmant + 1
    assert fmt.min_exponent == emin == info.minexp
    assert fmt.unit_roundoff == 2.0**-p == float(info.eps) / 2
    assert fmt.smallest_normal == 2.0**emin == float(info.tiny)
    assert fmt.max_value == float(info.max)


@pytest.mark.parametrize("acc", list(IEEE))
@pytest.mark.parametrize("out", list(IEEE))
@pytest.mark.parametrize("n", [1, 2, 25, 781, 4097])
def test_error_bound_formula(n, acc, out):
    u_acc, u_out = 2.0 ** -IEEE[acc][0], 2.0 ** -IEEE[out][0]
    assert explorer.error_bound(n, acc, out) == pytest.approx(3 * n * u_acc + u_out, rel=1e-15)


@pytest.mark.parametrize("acc", list(IEEE))
@pytest.mark.parametrize("max_abs_x", [0.0, 1.0, 100.25, 6e4])
def test_error_bound_input_rounding_term(acc, max_abs_x):
    """x and m each carry up to |x|·u_acc into the exponent when x is rounded on entry: + 2·max|x|·u_acc."""
    u_acc = 2.0 ** -IEEE[acc][0]
    got = explorer.error_bound(7, acc, "float16", max_abs_x)
    assert got == pytest.approx(3 * 7 * u_acc + 2.0**-11 + 2 * max_abs_x * u_acc, rel=1e-15)
    assert explorer.error_bound(7, acc, "float16") == explorer.error_bound(7, acc, "float16", 0.0)


def changes_on_entry(dtype: str, acc: str) -> bool:
    """Whether some finite value of dtype is not held exactly by acc: every 16-bit pattern, or a float32 sample."""
    if dtype == "float32":
        vals = np.random.default_rng(0).integers(0, 2**32, 200000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    else:
        vals = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(DTYPE_OBJECTS[dtype])
    v64 = vals.astype(np.float64)
    v64 = v64[np.isfinite(v64)]
    with np.errstate(over="ignore"):
        held = v64.astype(np.float32).astype(DTYPE_OBJECTS[acc]).astype(np.float64)
    return bool(np.any(held != v64))


@pytest.mark.parametrize("dtype", list(IEEE))
@pytest.mark.parametrize("acc", list(IEEE))
def test_rounds_input_matches_the_formats(dtype, acc):
    assert explorer.rounds_input(dtype, acc) == changes_on_entry(dtype, acc)


def test_error_bound_is_monotone_in_n_and_precision():
    assert explorer.error_bound(10, "float32", "float32") < explorer.error_bound(11, "float32", "float32")
    assert explorer.error_bound(10, "float32", "float16") < explorer.error_bound(10, "bfloat16", "float16")
    assert explorer.error_bound(10, "float16", "float32") < explorer.error_bound(10, "bfloat16", "float32")


def test_max_rel_fp32_acc_table_is_per_output_type():
    assert set(explorer.MAX_REL_FP32_ACC) == set(IEEE)
    for out, tol in explorer.MAX_REL_FP32_ACC.items():
        u_out = 2.0 ** -IEEE[out][0]
        # never tighter than the output's own rounding; a small fraction of a probability
        assert u_out <= tol < 1e-2
    # ordered as the output formats' precisions
    assert (
        explorer.MAX_REL_FP32_ACC["float32"]
        < explorer.MAX_REL_FP32_ACC["float16"]
        < explorer.MAX_REL_FP32_ACC["bfloat16"]
    )


# ---------------------------------------------------------------- ulp()


def exactly_representable(dtype, rng, n):
    """Random values of `dtype` across its whole range: normal, subnormal, zero, powers of two and neighbours."""
    nbits = dtype.itemsize * 8
    bits = rng.integers(0, 2**nbits, n, dtype=np.uint64).astype({16: np.uint16, 32: np.uint32}[nbits])
    vals = bits.view(dtype)
    with np.errstate(invalid="ignore"):
        vals = vals[np.isfinite(vals.astype(np.float64))]
    fi = np.finfo(dtype)
    vals = vals[np.abs(vals) < fi.max]  # np.spacing(max) is inf: checked on its own below
    specials = np.array(
        [0.0, float(fi.tiny), float(fi.smallest_subnormal), 1.0, 2.0, 0.5, float(fi.tiny) / 2], dtype=dtype
    )
    pow2 = np.exp2(np.arange(fi.minexp, fi.maxexp - 1)).astype(dtype)
    below = np.nextafter(pow2, np.zeros_like(pow2))
    return np.concatenate([vals, specials, -specials, pow2, below])


@pytest.mark.parametrize("name", ["float32", "float16"])
def test_ulp_equals_numpy_spacing(name):
    dtype = DTYPE_OBJECTS[name]
    v = exactly_representable(dtype, np.random.default_rng(1), 20000)
    expected = np.abs(np.spacing(np.abs(v))).astype(np.float64)
    got = ulp(v.astype(np.float64), explorer.FORMATS[name])
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, expected)
    # at the largest finite value: the spacing of the top binade, 2^(emax - (p - 1))
    fi = np.finfo(dtype)
    p = IEEE[name][0]
    top = ulp(np.array([float(fi.max)]), explorer.FORMATS[name])[0]
    assert top == 2.0 ** (fi.maxexp - 1 - (p - 1))


def test_ulp_bfloat16_against_bit_increment():
    """bfloat16: the spacing is the gap to the next representable magnitude (one more in the bit pattern)."""
    rng = np.random.default_rng(2)
    bits = rng.integers(0, 0x7F80, 5000).astype(np.uint16)  # finite, non-negative bfloat16 patterns
    bits = np.concatenate([bits, np.array([0, 1, 0x0080, 0x3F80, 0x7F7E], np.uint16)])
    v = bits.view(BF16).astype(np.float64)
    nxt = (bits + 1).view(BF16).astype(np.float64)
    np.testing.assert_array_equal(ulp(v, explorer.FORMATS["bfloat16"]), nxt - v)
    np.testing.assert_array_equal(ulp(-v, explorer.FORMATS["bfloat16"]), nxt - v)


# ---------------------------------------------------------------- errors()


@pytest.mark.parametrize("name", list(DTYPE_OBJECTS))
@pytest.mark.parametrize("cols", [1, 4, 32, 1024])
def test_errors_exact_output_gives_zeros(name, cols):
    # a constant row with a power-of-two length: the softmax is exactly 1/cols in every format
    x = np.zeros((3, cols), DTYPE_OBJECTS[name])
    out = np.full((3, cols), 1.0 / cols).astype(DTYPE_OBJECTS[name])
    r = explorer.errors(out, x)
    assert isinstance(r, explorer.ErrorReport)
    assert r.max_abs == r.max_rel == r.mean_rel == r.max_ulp == r.row_sum_dev == 0.0
    assert r.nan_count == r.inf_count == r.nonfinite_mismatch == 0
    assert r.argmax_agreement == 1.0
    d = r.as_dict()
    assert set(d) >= {
        "max_abs",
        "max_rel",
        "mean_rel",
        "max_ulp",
        "row_sum_dev",
        "nan_count",
        "inf_count",
        "nonfinite_mismatch",
        "argmax_agreement",
    }


def test_errors_exact_distinct_output_gives_zeros():
    # softmax([0, ln 3]) = [1/4, 3/4], both exact in every format
    x = np.array([[0.0, math.log(3.0)]])
    out = np.array([[0.25, 0.75]], np.float32)
    r = explorer.errors(out, x.astype(np.float32), ref=np.array([[0.25, 0.75]]))
    assert r.max_rel == 0.0 and r.argmax_agreement == 1.0


@pytest.mark.parametrize("name", list(DTYPE_OBJECTS))
@pytest.mark.parametrize("k", [1, 3])
def test_errors_one_perturbed_element(name, k):
    dtype = DTYPE_OBJECTS[name]
    p, _ = IEEE[name]
    cols = 8
    x = np.zeros((2, cols), dtype)
    out = np.full((2, cols), 1.0 / cols).astype(dtype)
    # k ulps up at 1/8 = 2^-3: the spacing there is 2^(-3 - (p - 1))
    spacing = 2.0 ** (-3 - (p - 1))
    out[1, 5] = np.asarray(1.0 / cols + k * spacing).astype(dtype)
    assert float(out[1, 5]) == 1.0 / cols + k * spacing  # exactly representable
    r = explorer.errors(out, x)
    assert r.max_abs == pytest.approx(k * spacing, rel=1e-12)
    assert r.max_rel == pytest.approx(k * spacing * cols, rel=1e-12)
    assert r.max_ulp == pytest.approx(k, rel=1e-12)
    assert r.mean_rel == pytest.approx(k * spacing * cols / out.size, rel=1e-12)
    assert r.row_sum_dev == pytest.approx(k * spacing, rel=1e-12)
    assert r.nan_count == r.inf_count == r.nonfinite_mismatch == 0
    # the reference's argmax (a tie, first element) is no longer out's max in row 1
    assert r.argmax_agreement == 0.5


def test_errors_perturbation_below_the_reference():
    x = np.array([[0.0, math.log(3.0)]], np.float64)
    ref = np.array([[0.25, 0.75]])
    out = np.array([[0.25, np.nextafter(np.float32(0.75), np.float32(0))]], np.float32)
    r = explorer.errors(out, x.astype(np.float32), ref=ref)
    gap = 0.75 - float(out[0, 1])
    assert gap == 2.0**-24  # the spacing below 0.75 in float32
    assert r.max_abs == gap
    assert r.max_rel == pytest.approx(gap / 0.75, rel=1e-12)
    assert r.max_ulp == pytest.approx(gap / 2.0**-24, rel=1e-12)  # ulp at 0.75 is 2^-24
    assert r.argmax_agreement == 1.0


def test_errors_relative_floor_is_smallest_normal_of_out():
    # ref 0 and out a tiny positive subnormal: relative to the smallest normal, not to 0
    x = np.array([[0.0, -np.inf]])
    out = np.array([[1.0, 2.0**-24]], np.float16)  # float16's smallest subnormal
    r = explorer.errors(out, x.astype(np.float16))
    assert r.max_rel == pytest.approx(2.0**-24 / 2.0**-14)
    assert np.isfinite(r.max_rel)


def test_errors_nan_counts_and_mismatch():
    x = np.array([[0.0, 1.0, 2.0], [0.0, np.nan, 1.0], [1.0, 1.0, 1.0]], np.float32)
    ref = explorer.reference(x)
    out = ref.astype(np.float32)
    assert np.isnan(out[1]).all()
    r = explorer.errors(out, x)
    assert r.nan_count == 3 and r.nonfinite_mismatch == 0 and r.inf_count == 0
    # a NaN where the reference is finite
    out2 = out.copy()
    out2[0, 1] = np.nan
    r2 = explorer.errors(out2, x)
    assert r2.nan_count == 4 and r2.nonfinite_mismatch == 1
    # a finite value where the reference is NaN
    out3 = out.copy()
    out3[1, 0] = 0.5
    r3 = explorer.errors(out3, x)
    assert r3.nan_count == 2 and r3.nonfinite_mismatch == 1
    # an inf where the reference is finite
    out4 = out.copy()
    out4[2, 2] = np.inf
    r4 = explorer.errors(out4, x)
    assert r4.inf_count == 1 and r4.nonfinite_mismatch == 1
    # non-finite elements do not feed the finite error measures
    for rep in (r, r2, r3, r4):
        assert np.isfinite([rep.max_abs, rep.max_rel, rep.mean_rel, rep.max_ulp, rep.row_sum_dev]).all()


def test_errors_argmax_agreement_counts_rows():
    x = np.array([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0], [0.0, 3.0, 1.0], [0.0, 0.5, 0.0]], np.float32)
    ref = explorer.reference(x)
    out = ref.astype(np.float32)
    out[0] = out[0, ::-1]  # wrong argmax in row 0
    out[3, 1] = np.nan  # a NaN at the reference's argmax: disagreement
    r = explorer.errors(out, x)
    assert r.argmax_agreement == pytest.approx(2 / 4)


def test_errors_row_sum_dev_on_finite_rows_only():
    x = np.zeros((2, 4), np.float32)
    out = np.full((2, 4), 0.25, np.float32)
    out[0, 0] = 0.5
    out[1, 0] = np.nan
    r = explorer.errors(out, x)
    assert r.row_sum_dev == pytest.approx(0.25)


def test_errors_shape_mismatch_raises():
    with pytest.raises(ValueError, match="shape"):
        explorer.errors(np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float32))


def test_errors_one_dimensional():
    x = np.array([0.0, 0.0, 0.0, 0.0], np.float32)
    r = explorer.errors(np.full(4, 0.25, np.float32), x)
    assert r.max_rel == 0.0 and r.argmax_agreement == 1.0


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 50), st.integers(1, 50), st.sampled_from(list(DTYPE_OBJECTS)), st.integers(0, 2**32 - 1))
def test_errors_of_the_rounded_reference_is_at_most_half_an_ulp(rows, cols, name, seed):
    x = np.random.default_rng(seed).normal(0, 2, (rows, cols)).astype(DTYPE_OBJECTS[name])
    ref = explorer.reference(x)
    # float64 -> bfloat16 goes through float32 in ml_dtypes: a double rounding, off by at most half an fp32 ulp more
    rounded = ref.astype(np.float32).astype(DTYPE_OBJECTS[name])
    r = explorer.errors(rounded, x)
    u = 2.0 ** -IEEE[name][0]
    # half an fp32 ulp, in units of this format's ulp (none for float32 itself: one rounding)
    slack = 0.0 if name == "float32" else 2.0 ** -(24 - IEEE[name][0] + 1)
    assert r.max_ulp <= 0.5 + slack
    assert r.max_rel <= u * (1 + 2 * slack) * (1 + 1e-12)
    assert r.nonfinite_mismatch == 0 and r.nan_count == 0


@settings(max_examples=60, deadline=None)
@given(
    key=st.sampled_from(list(explorer.VARIANTS)),
    block=st.sampled_from(BLOCK_SIZES),
    cols=st.integers(1, 1 << 20),
    n=st.integers(1, 1 << 22),
    dtype=st.sampled_from(list(explorer.DTYPES)),
)
def test_sequential_terms_text_is_the_formula_sequential_terms_computes(key, block, cols, n, dtype):
    """The precision lab's bound label, evaluated at any n, is the n of the bound for that launch (at any block
    size the variant takes)."""
    v = explorer.VARIANTS[key]
    assume(dtype in v.dtypes)
    launch = v.launch(1, cols, block if v.takes_block_size else None, dtype)
    text = numerics.sequential_terms_text(launch)
    as_python = text.replace("⌈", "math.ceil(").replace("⌉", ")").replace("·", "*").replace("n", str(n))
    assert eval(as_python, {"math": math}) == numerics.sequential_terms(launch, n), text


# fast's launch paths (warp groups, a block, a cluster, several clusters, streamed chunks) and split_row's chunks,
# every one every run: the sampled test above draws fast once in 8 and missed a wrong vector width in 2 runs of 8
LABEL_COLS = (1, 100, 1000, 5000, 70000, 300000, 2**20, 2**24)


@pytest.mark.parametrize("key", list(explorer.VARIANTS))
@pytest.mark.parametrize("dtype", list(explorer.DTYPES))
def test_sequential_terms_text_at_every_launch_path(key, dtype):
    v = explorer.VARIANTS[key]
    if dtype not in v.dtypes:
        pytest.skip(f"{key} takes no {dtype}")
    for cols in LABEL_COLS:
        launch = v.launch(1, cols, None, dtype)
        text = numerics.sequential_terms_text(launch)
        as_python = text.replace("⌈", "math.ceil(").replace("⌉", ")").replace("·", "*")
        for n in {1, 2, 31, 33, 1000, cols - 1, cols, cols + 1, 3 * cols + 7} - {0}:
            assert eval(as_python.replace("n", str(n)), {"math": math}) == numerics.sequential_terms(launch, n), (
                cols,
                text,
                n,
            )


@pytest.mark.parametrize(
    ("key", "block", "text"),
    [
        ("online_thread", None, "n"),  # no "1·⌈n/1⌉", no "+ 0"
        ("naive", None, "n"),
        ("online_warp", None, "⌈n/32⌉ + 5"),
        ("online_block", None, "⌈n/256⌉ + 8"),
        ("online_block", 96, "⌈n/96⌉ + 7"),  # 3 warps: 5 lane levels, 2 warp levels
        ("safe_block", 32, "⌈n/32⌉ + 5"),  # one warp: no level across warps
    ],
)
def test_sequential_terms_text_reads_as_the_chart_labels_it(key, block, text):
    """The label as the precision lab prints it: the simplest form of the formula, no terms that are 0 or 1·."""
    launch = explorer.VARIANTS[key].launch(1, 1000, block, "float32")
    assert numerics.sequential_terms_text(launch) == text


def test_sequential_terms_text_of_a_vectorised_and_a_split_launch():
    fast = explorer.VARIANTS["fast"].launch(1, 1000, None, "float32")
    vec, threads = fast.template_args[0], fast.threads_per_row
    assert vec > 1 and fast.chunks == 1
    levels = (threads - 1).bit_length()
    assert numerics.sequential_terms_text(fast) == f"{vec}·⌈n/{vec * threads}⌉ + {levels}"
    split = explorer.VARIANTS["split_row"].launch(1, 70000, None, "float32")
    assert split.chunks > 1 and not split.template_args
    assert numerics.sequential_terms_text(split) == f"⌈n/{split.threads_per_row}⌉ + 8 + {split.chunks - 1}"


def test_a_row_with_nan_or_inf_where_float64_has_none_is_wrong_as_a_whole():
    """naive's row after its sum overflowed: NaN where e^x overflowed, 0 elsewhere. Those zeros are not flushed
    outputs, and the row is not measured; with no row measured the errors are NaN, not a perfect 0."""
    x = np.array([[0.0, 100.0, 100.0], [0.0, 1.0, 2.0]], np.float32)
    good = explorer.reference(x).astype(np.float32)
    broken = good.copy()
    broken[1] = [0.0, np.nan, np.nan]  # as if row 1 had overflowed (its reference is finite)
    report = explorer.errors(broken, x)
    assert report.nonfinite_mismatch == 2 and report.underflow_count == 0
    alone = explorer.errors(good[:1], x[:1])  # row 0 alone is measured: every error measure is row 0's
    for measure in ("max_abs", "max_rel", "mean_rel", "max_ulp", "row_sum_dev"):
        assert getattr(report, measure) == getattr(alone, measure), measure
    assert alone.max_rel > 0  # row 0 is not exact in float32: its errors are not 0 by chance
    only_broken = explorer.errors(broken[1:], x[1:])
    assert math.isnan(only_broken.max_rel) and math.isnan(only_broken.row_sum_dev)
    assert math.isnan(only_broken.max_ulp) and math.isnan(only_broken.mean_rel)
    assert only_broken.nonfinite_mismatch == 2


def test_a_row_nan_in_both_is_not_measured_and_not_an_argmax_disagreement():
    """A NaN row (a NaN in x) is NaN in float64 too: no mismatch, no error measured; with no row finite in the
    reference there is no argmax to disagree with, and the agreement is 1 (the vacuous case), not NaN or 0."""
    x = np.array([[1.0, np.nan, 2.0]], np.float32)
    r = explorer.errors(np.full((1, 3), np.nan, np.float32), x)
    assert r.nan_count == 3 and r.nonfinite_mismatch == 0 and r.underflow_count == 0
    assert math.isnan(r.max_abs) and math.isnan(r.max_rel) and math.isnan(r.max_ulp) and math.isnan(r.mean_rel)
    assert r.argmax_agreement == 1.0
    # beside a finite row, the errors are that row's alone
    x2 = np.array([[1.0, np.nan, 2.0], [0.0, 0.0, 0.0]], np.float32)
    out2 = np.array([[np.nan] * 3, [0.25, 0.25, 0.5]], np.float32)  # row 1's middle value is 1/4 over its 1/3
    r2 = explorer.errors(out2, x2)
    assert r2.max_abs == pytest.approx(1 / 6) and r2.max_rel == pytest.approx(0.5)
    # row 1's reference argmax (a tie: column 0) is below out's max there, and the NaN row is not counted: 0, not 1/2
    assert r2.argmax_agreement == 0.0


def test_the_unflushed_errors_leave_out_only_what_the_gpus_ftz_flushed():
    # row: x = 0, -88 (e^-88 ≈ 6e-39, below fp32's smallest normal 1.2e-38: -ftz writes 0) and -1
    x = np.array([[0.0, -88.0, -1.0]], np.float32)
    ref = explorer.numerics.reference(x)
    out = ref.astype(np.float32)
    out[0, 1] = 0.0
    r = explorer.errors(out, x)
    assert r.underflow_count == 1 and r.max_rel == pytest.approx(abs(ref[0, 1]) / np.finfo(np.float32).smallest_normal)
    assert r.max_rel_unflushed < 1e-7 and r.mean_rel_unflushed < r.mean_rel  # the others are correctly rounded
    assert r.flushed_count == 1
    out[0, 2] = 0.0  # a normal-range output lost too: that one counts
    r = explorer.errors(out, x)
    assert r.max_rel_unflushed == 1.0 and r.underflow_count == 2 and r.flushed_count == 1
    # fp16 below its own range: a 0 that rounding gives (an underflow), not a flush
    x16 = np.array([[0.0, -20.0]], np.float16)
    r16 = explorer.errors(explorer.numerics.reference(x16).astype(np.float16), x16)
    assert r16.underflow_count == 1 and r16.flushed_count == 0


def test_only_an_fp32_result_below_its_smallest_normal_that_rounding_would_keep_counts_as_flushed():
    fp32, fp16, bf16 = (explorer.FORMATS[n] for n in ("float32", "float16", "bfloat16"))
    ref = np.array([6e-39, 1e-46, 1e-6, 1e-3])  # -ftz's; below fp32's smallest subnormal / 2; fp16 subnormal; normal
    zeros = np.zeros(4)
    assert list(explorer.numerics.flushed_by_ftz(zeros, ref, fp32)) == [True, False, False, False]
    assert not explorer.numerics.flushed_by_ftz(zeros, ref, fp16).any()  # fp16 keeps 1e-6 as a subnormal: a 0 is wrong
    assert list(explorer.numerics.flushed_by_ftz(zeros, ref, bf16)) == [True, False, False, False]
    assert not explorer.numerics.flushed_by_ftz(ref, ref, fp32).any()  # a nonzero output was not flushed
    # rows along the last axis: a row holding a NaN or inf has no flushed output (naive's zeros after d overflowed)
    rows = np.stack([zeros, np.where(np.arange(4) == 3, np.nan, zeros)])
    assert explorer.numerics.flushed_by_ftz(rows, np.stack([ref, ref]), fp32).tolist() == [
        [True, False, False, False],
        [False] * 4,
    ]

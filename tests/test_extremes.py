"""Finite logits at the edges of each format: every non-naive variant and both top-k variants match
float64, on the emulation (always) and on the GPU (gpu-marked), in fixed rows and in Hypothesis properties
over rows built from the edges (largest value and its neighbour, half of it, smallest normal, subnormals,
zeros of both signs, moderate values; rows of one value, one huge among -huge, mixtures); a row long enough
to stream through fast_stream and a 262,144-logit vocabulary split over many blocks, on the emulation. Values
near the top of fp32 overflow in x·log2e unless the max is subtracted first (inf - inf: NaN for finite input), so
these rows check that every variant takes the difference before scaling it."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_topk import tolerance as topk_tolerance  # a top-k probability against float64

import explorer
from explorer.backends import cuda
from explorer.numerics import softmax_bound
from explorer.topk import topk_launch

NOT_NAIVE = [k for k in explorer.VARIANTS if k != "naive"]
DTYPES = ("float32", "float16", "bfloat16")
BACKENDS = ["emulator", pytest.param("cuda", marks=pytest.mark.gpu)]


def finfo(dtype: str):
    return ml_dtypes.finfo(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.finfo(dtype)


def largest(dtype: str) -> float:
    return float(finfo(dtype).max)


def edge_rows(dtype: str, cols: int) -> np.ndarray:
    """Rows of ±max, near-max, max beside -max, tiny values and subnormals, in the dtype."""
    top, sub = largest(dtype), float(finfo(dtype).smallest_subnormal)
    rows = [
        np.full(cols, top),
        np.full(cols, -top),
        np.full(cols, 0.9 * top),
        np.where(np.arange(cols) % 2 == 0, top, -top),
        np.where(np.arange(cols) == cols // 2, top, -top),
        np.linspace(-top, top, cols),
        np.full(cols, 1e-30),
        np.full(cols, sub),
        np.where(np.arange(cols) % 3 == 0, sub, -sub),
    ]
    return np.stack(rows).astype(explorer.DTYPES[dtype])


def check(x: np.ndarray, key: str, backend: str) -> None:
    acc = "float32" if "float32" in explorer.VARIANTS[key].accumulators else explorer.VARIANTS[key].accumulators[0]
    result = explorer.softmax(x, key, acc=acc, backend=backend)
    report = explorer.errors(result.out, x)
    assert report.nonfinite_mismatch == 0, (key, report)
    assert report.max_rel <= explorer.MAX_REL_FP32_ACC[str(x.dtype) if x.dtype != ml_dtypes.bfloat16 else "bfloat16"], (
        key,
        report,
    )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("key", NOT_NAIVE)
def test_edge_values_match_float64(key, dtype, backend):
    if backend == "cuda" and not cuda.available():
        pytest.skip("no GPU")
    for cols in (64, 1000, 4096):
        check(edge_rows(dtype, cols), key, backend)


NARROW_ACCUMULATORS = [(k, acc) for k in NOT_NAIVE for acc in explorer.VARIANTS[k].accumulators if acc != "float32"]


def accumulator_loses_a_row(x: np.ndarray, acc: str) -> bool:
    """Whether a row that float64 keeps finite (no NaN, no +inf) would be NaN in an acc accumulator: a finite value
    rounds to +inf in it, or every finite value rounds to -inf."""
    for row in np.atleast_2d(x).astype(np.float64):
        if np.isnan(row).any() or np.isposinf(row).any():
            continue
        with np.errstate(over="ignore"):
            held = row.astype(explorer.DTYPES[acc]).astype(np.float64)
        finite = np.isfinite(row)
        if (np.isposinf(held) & finite).any() or (finite.any() and np.isneginf(held[finite]).all()):
            return True
    return False


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("key", "acc"), NARROW_ACCUMULATORS)
def test_a_narrow_accumulator_refuses_the_rows_it_would_make_nan(key, acc, dtype, backend):
    """A finite logit that rounds to +inf in the accumulator (fp32's 1e5 in float16), or a row whose every logit
    rounds to -inf, would give a NaN row: the run is refused, naming the accumulator. Every other edge row gives no
    NaN where float64 has none."""
    if backend == "cuda" and not cuda.available():
        pytest.skip("no GPU")
    for row in edge_rows(dtype, 64):
        x = row[None, :]
        if accumulator_loses_a_row(x, acc):
            with pytest.raises(explorer.InvalidInput, match=f"{acc} accumulator holds values"):
                explorer.softmax(x, key, acc=acc, backend=backend)
            continue
        report = explorer.errors(explorer.softmax(x, key, acc=acc, backend=backend).out, x)
        assert report.nonfinite_mismatch == 0, (key, acc, row[:4], report)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("key", "acc"), NARROW_ACCUMULATORS)
def test_a_masked_logit_below_a_narrow_accumulator_adds_zero(key, acc, backend):
    """A mask value (fp32's lowest, as attention masks use; -1e5 in float16) rounds to -inf in the accumulator
    beside ordinary logits: it adds exactly 0, as in float64, and the run is not refused."""
    if backend == "cuda" and not cuda.available():
        pytest.skip("no GPU")
    mask = float(np.finfo(np.float32).min) if acc == "bfloat16" else -1e5
    x = np.array([[0.0, mask, 1.0, mask], [mask, 2.0, mask, 2.0]], np.float32)
    out = explorer.softmax(x, key, acc=acc, backend=backend).out
    np.testing.assert_allclose(out, explorer.reference(x), rtol=2e-2, atol=0)
    assert (out[:, [1, 3]][0] == 0).all() and (out[1, [0, 2]] == 0).all()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("variant", list(explorer.TOPK_VARIANTS))
def test_topk_at_edge_values(variant, dtype, backend):
    if backend == "cuda" and not cuda.available():
        pytest.skip("no GPU")
    x = edge_rows(dtype, 300)
    result = explorer.softmax_topk(x, 5, variant, backend=backend)
    report = explorer.topk_errors(result, x)
    assert report.index_mismatch == 0, report
    assert np.isfinite(result.values.astype(np.float64)).all()
    assert report.max_rel <= explorer.MAX_REL_FP32_ACC[dtype], report


def test_edge_values_through_the_streamed_long_row_path():
    """A 1 × 6M fp32 row is too long to hold on chip: fast streams it through fast_stream (chunks of a row per
    block, their (m, d) merged after), emulated here one edge row at a time."""
    cols = 3 * 2**21
    assert explorer.VARIANTS["fast"].launch(1, cols, None, "float32").kernel == "fast_stream"
    x = edge_rows("float32", cols)
    for row in range(x.shape[0]):
        check(x[row : row + 1], "fast", "emulator")


@pytest.mark.parametrize("dtype", ("float32", "bfloat16"))
@pytest.mark.parametrize("variant", list(explorer.TOPK_VARIANTS))
def test_topk_at_edge_values_over_a_vocabulary_of_many_chunks(variant, dtype):
    """262,144 logits a row: the fused kernel's row is split over many blocks, the last merging their (m, d)."""
    x = edge_rows(dtype, 262144)
    assert topk_launch(*x.shape, 50, dtype).chunks > 1
    result = explorer.softmax_topk(x, 50, variant, backend="emulator")
    report = explorer.topk_errors(result, x)
    assert report.index_mismatch == 0, report
    assert np.isfinite(result.values.astype(np.float64)).all()
    assert report.max_rel <= explorer.MAX_REL_FP32_ACC[dtype], report


@settings(max_examples=60, deadline=None)
@given(dtype=st.sampled_from(DTYPES), scale=st.floats(0.5, 1.0), cols=st.integers(1, 300), seed=st.integers(0, 2**31))
def test_fast_matches_float64_near_the_top_of_the_range(dtype, scale, cols, seed):
    """Random finite rows spread over the whole range of the format, on the emulation."""
    top = largest(dtype) * scale
    x = np.random.default_rng(seed).uniform(-top, top, (3, cols)).astype(explorer.DTYPES[dtype])
    for key in ("fast", "online_warp", "split_row"):
        check(x, key, "emulator")


# Properties: rows built from the edges of each format, against float64 (and, for top-k, the kernels' own order).
FTZ = explorer.FORMATS["float32"].smallest_normal  # fp32 results below it are flushed to 0 (CuPy's -ftz=true; the
# emulation follows)
WIDTHS = (1, 33, 64, 128, 781, 1000, 2048, 4096, 4097, 20000)  # fast's launches at these are test_cuda.py's
# (compiled once): warp groups, a block, a cluster of 2; split_row in 1 to 5 chunks
TOPK_WIDTHS = (1, 33, 64, 128, 781, 1000, 2048)  # a block a row, as test_topk.py's launches (compiled once); wider
# rows of a few would be clusters whose launches compile per number of chunks
TOPK_GPU_WIDTHS = (*TOPK_WIDTHS, 262144)  # and a row in 64 chunks merged through global memory, as test_topk.py's
EMULATED_THREAD_WIDTH = 1000  # the emulation of a thread a row steps along the row in Python


def edges(dtype: str) -> list[float]:
    """The edges of a format, both signs: its largest value and the one below it, half of it, its smallest normal,
    its largest and smallest subnormals, zero, one."""
    dt, info = explorer.DTYPES[dtype], finfo(dtype)
    bits = np.uint16 if dt.itemsize == 2 else np.uint32

    def below(v: float) -> float:  # the next value of the dtype towards zero
        return float((np.array([v], dt).view(bits) - bits(1)).view(dt)[0])

    top, tiny, sub = float(info.max), float(info.tiny), float(info.smallest_subnormal)
    values = [top, below(top), top / 2, tiny, below(tiny), sub, 0.0, 1.0]
    return values + [-v for v in values]


@st.composite
def extreme_inputs(draw, widths=WIDTHS):
    """(dtype, x): 1 to 4 rows of one width, each one of: a mixture of a palette of 1 to 8 values (edges of the
    format and moderate numbers), one value throughout, the palette's largest once among its smallest (one huge
    among -huge), the reverse, or max once among -max."""
    dtype = draw(st.sampled_from(DTYPES))
    dt = explorer.DTYPES[dtype]
    element = st.one_of(st.sampled_from(edges(dtype)), st.floats(-30, 30))
    palette = np.array(draw(st.lists(element, min_size=1, max_size=8)), np.float64).astype(dt)
    cols = draw(st.sampled_from(widths))
    kinds = draw(
        st.lists(
            st.sampled_from(("mixed", "equal", "one_high", "one_low", "max_among_minus_max")), min_size=1, max_size=4
        )
    )
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    rows = []
    for kind in kinds:
        at = rng.integers(cols)
        if kind == "mixed":
            row = rng.choice(palette, cols)
        elif kind == "equal":
            row = np.full(cols, palette[0], dt)
        elif kind == "max_among_minus_max":
            row = np.full(cols, -largest(dtype), dt)
            row[at] = largest(dtype)
        else:
            row = np.full(cols, palette.min() if kind == "one_high" else palette.max(), dt)
            row[at] = palette.max() if kind == "one_high" else palette.min()
        rows.append(row)
    return dtype, np.stack(rows).astype(dt)


def assert_close(got: np.ndarray, want: np.ndarray, tol: float, dtype: str, context) -> None:
    """|got - want| <= tol · max(|want|, the dtype's smallest normal) (as explorer.errors measures), except where
    want is below fp32's smallest normal (within tol) and got was flushed to zero."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    rel = np.abs(got - want) / np.maximum(np.abs(want), explorer.FORMATS[dtype].smallest_normal)
    bad = ~(rel <= tol) & ~((got == 0) & (np.abs(want) < FTZ * (1 + tol)))
    assert not bad.any(), (context, float(rel[bad].max()), int(bad.sum()))


def softmax_at_the_extremes(dtype: str, x: np.ndarray, backend: str) -> None:
    """Every non-naive variant, fp32 accumulator: finite where float64 is (every input is finite), and within
    MAX_REL_FP32_ACC (or the variant's error bound for its row, where larger) of it."""
    ref = explorer.reference(x)
    for key in NOT_NAIVE:
        if backend == "emulator" and explorer.VARIANTS[key].family == "thread" and x.shape[1] > EMULATED_THREAD_WIDTH:
            continue
        result = explorer.softmax(x, key, backend=backend)
        context = (key, dtype, x.shape, result.launch.describe(), x)
        assert explorer.errors(result.out, x, ref).nonfinite_mismatch == 0, context
        tol = max(explorer.MAX_REL_FP32_ACC[dtype], softmax_bound(result.launch, x, "float32"))
        assert_close(result.out, ref, tol, dtype, context)


def top(keys: np.ndarray, k: int) -> np.ndarray:
    """The k largest of each row, larger first, ties (-0 and 0 among them) to the lower index."""
    return np.argsort(-keys.astype(np.float64), axis=1, kind="stable")[:, :k]


def topk_at_the_extremes(dtype: str, x: np.ndarray, k: int, backend: str) -> None:
    """Both top-k variants: the float64 reference's indices (up to ties within rounding, as topk_errors counts
    them) and probabilities, and exactly the order the kernel selects by, ties to the lower index: fused, the
    logits', fp32 and bf16 subnormals comparing as zero (fp32 arithmetic flushes them, -ftz=true: the emulation
    exactly so; on the GPU either order, tests/test_topk.py holds its indices to the emulation's on subnormal
    rows); unfused, that of the probabilities `fast` computes, which it returns."""
    x64 = x.astype(np.float64)
    for variant in explorer.TOPK_VARIANTS:
        result = explorer.softmax_topk(x, k, variant, backend=backend)
        context = (variant, dtype, x.shape, k, x)
        report = explorer.topk_errors(result, x)
        assert report.index_mismatch == 0, (context, report)
        got_ref = np.take_along_axis(explorer.reference(x), result.indices.astype(np.int64), axis=1)
        assert_close(result.values, got_ref, topk_tolerance(dtype), dtype, context)
        if explorer.TOPK_VARIANTS[variant].fused:
            flushed = top(np.where(np.abs(x64) < FTZ, 0.0, x64), k)  # the emulation keys logits as the kernel does
            orders = [flushed] if backend == "emulator" else [flushed, top(x64, k)]
            assert all(any(np.array_equal(got, o[r]) for o in orders) for r, got in enumerate(result.indices)), context
        else:
            probabilities = explorer.softmax(x, "fast", backend=backend).out
            assert np.array_equal(result.indices, top(probabilities, k)), context
            chosen = np.take_along_axis(probabilities, result.indices.astype(np.int64), axis=1)
            assert np.array_equal(result.values.view(np.uint8), chosen.view(np.uint8)), context


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=extreme_inputs())
def test_every_variant_matches_float64_at_the_extremes(case):
    softmax_at_the_extremes(*case, "emulator")


@pytest.mark.gpu
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=extreme_inputs())
def test_every_variant_matches_float64_at_the_extremes_cuda(case):
    softmax_at_the_extremes(*case, "cuda")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=extreme_inputs(TOPK_WIDTHS), k=st.integers(1, explorer.K_MAX))
def test_topk_matches_float64_at_the_extremes(case, k):
    dtype, x = case
    topk_at_the_extremes(dtype, x, min(k, x.shape[1]), "emulator")


@pytest.mark.gpu
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=extreme_inputs(TOPK_GPU_WIDTHS), k=st.integers(1, explorer.K_MAX))
def test_topk_matches_float64_at_the_extremes_cuda(case, k):
    dtype, x = case
    topk_at_the_extremes(dtype, x, min(k, x.shape[1]), "cuda")

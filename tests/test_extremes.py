"""Finite logits at the edges of each format: every non-naive variant and both top-k variants match
float64, on the emulation (always) and on the GPU (gpu-marked); a row long enough to stream through
fast_split and a 262,144-logit vocabulary split over many blocks, on the emulation. Values near the top of fp32 once
overflowed in x·log2e before the max was subtracted, giving NaN for finite input."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import explorer
from explorer.backends import cuda
from explorer.topk import topk_launch

NOT_NAIVE = [k for k in explorer.VARIANTS if k != "naive"]
DTYPES = ("float32", "float16", "bfloat16")
BACKENDS = ["emulator", pytest.param("cuda", marks=pytest.mark.gpu)]


def largest(dtype: str) -> float:
    info = ml_dtypes.finfo(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.finfo(dtype)
    return float(info.max)


def edge_rows(dtype: str, cols: int) -> np.ndarray:
    """Rows of ±max, near-max, max beside -max, and tiny values, in the dtype."""
    top = largest(dtype)
    rows = [
        np.full(cols, top),
        np.full(cols, -top),
        np.full(cols, 0.9 * top),
        np.where(np.arange(cols) % 2 == 0, top, -top),
        np.where(np.arange(cols) == cols // 2, top, -top),
        np.linspace(-top, top, cols),
        np.full(cols, 1e-30),
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
    """A 1 × 2^22 fp32 row is too long to hold on chip: fast streams it through fast_split (chunks of a row per
    block, their (m, d) merged after), emulated here one edge row at a time."""
    cols = 2**22
    assert explorer.VARIANTS["fast"].launch(1, cols, None, "float32").kernel == "fast_split"
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

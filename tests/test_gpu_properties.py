"""Properties on the GPU over shapes the fixed tests do not pin: the fused top-k at any width (every offset
of a row's first 16-byte boundary, so every loose head and tail) and batch, and `fast` on long rows (the
slice exchange, clusters of up to 16, the streamed split), each against float64 and the emulation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_cuda import fast_emulation_bound  # |gpu - emu| / |emu| for fast
from test_topk import tolerance as topk_tolerance  # a top-k probability against float64 or the emulation

import explorer
from explorer.numerics import FORMATS, softmax_bound
from explorer.topk import K_MAX

pytestmark = pytest.mark.gpu
DTYPES = ("float32", "float16", "bfloat16")
SCALES = (1.0, 30.0, 1e-3)  # moderate logits, a peaked softmax, a flat one


def assert_near(got: np.ndarray, want: np.ndarray, tol: float, dtype: str, context) -> None:
    """|got - want| <= tol·|want| where want is a normal number of dtype; below that the kernels flush to zero
    (-ftz) and the emulation follows, except where an approximate exp lands on the other side of the
    threshold: such a pair need only both stay below it (within tol)."""
    tiny = FORMATS[dtype].smallest_normal * (1 + tol)
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    rel = np.abs(got - want) / np.maximum(np.abs(want), tiny)
    flushed = (np.abs(got) <= tiny) & (np.abs(want) <= tiny)
    bad = ~((rel <= tol) | flushed | (np.isnan(got) & np.isnan(want)))
    assert not bad.any(), (context, float(rel[bad].max()), int(bad.sum()))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.integers(1, 600),
    cols=st.integers(1, 70_000),
    k=st.integers(1, K_MAX),
    dtype=st.sampled_from(DTYPES),
    scale=st.sampled_from(SCALES),
    seed=st.integers(0, 2**31 - 1),
)
def test_fused_topk_at_any_width_and_batch(rows, cols, k, dtype, scale, seed):
    rows = max(1, min(rows, 2_000_000 // cols))  # two million logits at most
    k = min(k, cols)
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, cols)) * scale).astype(explorer.DTYPES[dtype])
    gpu = explorer.softmax_topk(x, k, backend="cuda")
    report = explorer.topk_errors(gpu, x)
    assert report.index_mismatch == 0, (rows, cols, k, report)
    if report.tie_swaps == 0:  # values in the reference's order
        assert_near(gpu.values, explorer.reference_topk(x, k)[0], topk_tolerance(dtype), dtype, (rows, cols, k))
    emu = explorer.softmax_topk(x, k, backend="emulator")
    assert np.array_equal(gpu.indices, emu.indices), (rows, cols, k)
    assert_near(gpu.values, emu.values, topk_tolerance(dtype), dtype, (rows, cols, k))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.integers(1, 8),
    cols=st.integers(65_537, 1 << 21),
    dtype=st.sampled_from(("float32", "bfloat16")),
    scale=st.sampled_from(SCALES),
    seed=st.integers(0, 2**31 - 1),
)
def test_fast_on_long_rows(rows, cols, dtype, scale, seed):
    rows = max(1, min(rows, (1 << 22) // cols))
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, cols)) * scale).astype(explorer.DTYPES[dtype])
    gpu = explorer.softmax(x, "fast", backend="cuda")
    bound = max(1e-5, softmax_bound(gpu.launch, x, "float32"))
    assert_near(gpu.out, explorer.reference(x), bound, dtype, (rows, cols, gpu.launch.describe()))
    emu = explorer.softmax(x, "fast", backend="emulator")
    assert_near(gpu.out, emu.out, fast_emulation_bound(dtype), dtype, (rows, cols, gpu.launch.describe()))

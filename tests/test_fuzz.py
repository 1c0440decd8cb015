"""A hypothesis fuzz over explorer.softmax: every call returns a result within the documented tolerance of
float64, or raises the explorer.ExplorerError the arguments call for; never anything else."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_extremes import accumulator_loses_a_row

import explorer
from explorer import numerics

DT = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16)}
CORE = {
    k: v
    for k, v in explorer.VARIANTS.items()
    if v.family in ("thread", "warp", "block") and v.method in ("naive", "safe", "online")
}
# distributions whose default parameters give moderate, finite logits
NORMAL_ISH = {"normal", "uniform", "decreasing", "increasing", "spike", "zipf", "constant", "causal_mask"}
U32 = 2.0**-24
FP32_TINY = 2.0**-126  # results below it may be flushed to zero (the GPU builds with -ftz=true)

valid_blocks = st.sampled_from([32, 64, 96, 128, 256, 1024])
invalid_blocks = st.sampled_from([0, 16, 48, 100, 1056, 2048, -32])


def expected_invalid(variant, dtype, acc, rows, block_size, trace_row) -> bool:
    """Whether the documented checks must refuse these arguments (worked out here, not by the API)."""
    if variant not in explorer.VARIANTS or dtype not in DT or acc not in DT:
        return True
    v = explorer.VARIANTS[variant]
    if dtype not in v.dtypes or acc not in v.accumulators:
        return True
    if block_size is not None and (not v.takes_block_size or block_size % 32 or not 32 <= block_size <= 1024):
        return True
    if trace_row is not None:
        if not v.traceable or isinstance(trace_row, bool) or not isinstance(trace_row, int):
            return True
        if not 0 <= trace_row < rows:
            return True
    return False


def check_accuracy(out, x, variant, dtype, acc, dist, block):
    x2 = x.reshape(-1, x.shape[-1]).astype(np.float64)
    got = out.reshape(x2.shape).astype(np.float64)
    ref = explorer.reference(x)
    ref = ref.reshape(x2.shape)
    cols = x2.shape[1]
    # error_bound's n. (A thread's share alone is not enough: online_block, float16 in and acc, zipf 3×80 gives
    # max_rel 1.99e-3 > error_bound(1, ...) = 1.95e-3 after its 8 merge levels.)
    n = numerics.sequential_terms(explorer.VARIANTS[variant].launch(x2.shape[0], cols, block, dtype), cols)
    rep = explorer.errors(out, x)
    finite_x = x2[np.isfinite(x2)]
    in_range = finite_x.size == 0 or np.abs(finite_x).max() <= explorer.FORMATS[acc].max_value
    if variant == "naive":
        # no max subtracted: only inputs whose e^x neither overflows nor underflows fp32 and acc, and whose
        # outputs stay normal (a subnormal output is flushed to zero), are comparable
        with np.errstate(over="ignore"):
            safe = (
                np.isfinite(x2).all()
                and acc == "float32"
                and np.abs(x2).max() < 80
                and ref.min(initial=1.0) >= FP32_TINY
            )
        if safe:
            event("checked: naive within the bound")
            assert rep.nonfinite_mismatch == 0
            assert rep.max_rel <= explorer.error_bound(n, acc, dtype) + 81 * U32
        return
    if not in_range:
        event("checked: shape only (input beyond the accumulator's range)")
        return  # an input the accumulator cannot hold: no promise beyond a clean result
    # the NaN / inf pattern is the reference's
    assert rep.nonfinite_mismatch == 0, rep
    both = np.isfinite(got) & np.isfinite(ref)
    if not both.any():
        event("checked: non-finite pattern (no finite output)")
        return
    if dist in NORMAL_ISH and acc == "float32" and cols <= 4096:
        event("checked: MAX_REL_FP32_ACC")
        assert rep.max_rel <= explorer.MAX_REL_FP32_ACC[dtype], rep
        return
    event("checked: derived bound")
    # Otherwise: the 3·n·u bound, plus what it leaves out, derived here:
    #  * x enters the accumulator rounded and is normalised as rounded: softmax(x~) against softmax(x)
    #    is off by at most e^(2 delta) - 1, delta = max |x - x~| over the row;
    #  * x - m is computed in fp32: relative error <= |x - m| u32 on each exponential (|x - m| < 104 matters);
    #  * results below 2^-126 may be flushed to zero, and so may those within the bound of it.
    fmt = explorer.FORMATS[dtype]
    held = x2.astype(np.float32).astype(DT[acc]).astype(np.float64)
    for i in range(x2.shape[0]):
        row_ok = both[i]
        if not row_ok.any():
            continue
        fin = np.isfinite(x2[i])
        delta = float(np.max(np.abs(x2[i][fin] - held[i][fin]), initial=0.0))
        spread = min(float(np.max(x2[i][fin]) - np.min(x2[i][fin])), 104.0)
        tol = (explorer.error_bound(n, acc, dtype) + math.expm1(2 * delta) + (spread + 4) * U32) * 1.01
        r, g = ref[i][row_ok], got[i][row_ok]
        flushed = (r < FP32_TINY * (1 + tol)) & (g == 0)  # within the bound of 2^-126, a result may fall below it
        rel = np.abs(g - r) / np.maximum(np.abs(r), fmt.smallest_normal)
        assert np.all(rel[~flushed] <= tol), (float(rel[~flushed].max()), tol, i)


@st.composite
def calls(draw):
    """Arguments for one call: mostly valid, else one (sometimes several) kinds of invalid argument."""
    broken = set(draw(st.lists(st.sampled_from(["variant", "dtype", "acc", "trace", "block"]), min_size=1, max_size=2)))
    if draw(st.integers(0, 9)) < 5:
        broken = set()  # half the calls are valid
    variant = draw(
        st.sampled_from(["bogus", "", "Online_Warp"]) if "variant" in broken else st.sampled_from(list(CORE))
    )
    dtype = draw(st.sampled_from(["float64", "int32"]) if "dtype" in broken else st.sampled_from(list(DT)))
    acc = draw(st.sampled_from(["float64", "half", "fp32"]) if "acc" in broken else st.sampled_from(list(DT)))
    rows, cols = draw(st.integers(1, 6)), draw(st.integers(1, 96))
    one_d = draw(st.integers(0, 4)) == 0
    n_rows = 1 if one_d else rows
    v = CORE.get(variant)
    if "trace" in broken:
        trace = draw(
            st.one_of(
                st.sampled_from([-1, n_rows, n_rows + 3, True, 1.0]),
                st.just(0) if v is not None and not v.traceable else st.nothing(),
            )
        )
    elif v is not None and v.traceable and draw(st.booleans()):
        trace = draw(st.integers(0, n_rows - 1))
    else:
        trace = None
    if "block" in broken:
        block = draw(
            invalid_blocks if v is not None and v.takes_block_size else st.one_of(valid_blocks, invalid_blocks)
        )
    elif v is not None and v.takes_block_size and draw(st.booleans()):
        block = draw(valid_blocks)
    else:
        block = None
    return dict(variant=variant, dtype=dtype, acc=acc, rows=rows, cols=cols, one_d=one_d, trace=trace, block=block)


fuzz_args = dict(call=calls(), dist=st.sampled_from(sorted(explorer.DISTRIBUTIONS)), seed=st.integers(0, 2**32 - 1))


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**fuzz_args)
def test_fuzz_softmax(call, dist, seed):
    fuzz_one_call(call, dist, seed, "emulator")


@pytest.mark.gpu
@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**fuzz_args)
def test_fuzz_softmax_cuda(call, dist, seed):
    fuzz_one_call(call, dist, seed, "cuda")


def fuzz_one_call(call, dist, seed, backend):
    variant, dtype, acc, rows, cols, one_d, trace, block = (
        call[k] for k in ("variant", "dtype", "acc", "rows", "cols", "one_d", "trace", "block")
    )
    source = dtype if dtype in DT else "float32"
    x = explorer.make_input(dist, 1 if one_d else rows, cols, dtype=source, seed=seed)
    if one_d:
        x = x[0]
    if dtype not in DT:
        with np.errstate(invalid="ignore"):
            x = x.astype(np.float64) if dtype == "float64" else np.nan_to_num(x).astype(dtype)
    n_rows = 1 if one_d else rows
    must_refuse = expected_invalid(variant, dtype, acc, n_rows, block, trace)
    event("refused" if must_refuse else "computed")
    try:
        res = explorer.softmax(x, variant, acc=acc, backend=backend, trace_row=trace, block_size=block)
    except explorer.ExplorerError as exc:
        assert must_refuse, f"refused valid arguments: {exc}"
        assert isinstance(exc, explorer.InvalidInput), exc
        assert str(exc)
        return
    assert not must_refuse, "accepted invalid arguments"
    assert res.out.shape == x.shape and res.out.dtype == x.dtype
    assert res.backend == backend and res.variant == variant and res.acc == acc
    used_block = block or CORE[variant].default_block_size
    if trace is not None:
        assert res.trace is not None and res.trace.row == trace
        np.testing.assert_array_equal(res.trace.x, x.reshape(n_rows, cols)[trace].astype(np.float64))
    else:
        assert res.trace is None
    check_accuracy(res.out, x, variant, dtype, acc, dist, used_block)


bit_args = dict(
    variant=st.sampled_from(list(CORE)),
    dtype=st.sampled_from(list(DT)),
    acc=st.sampled_from(list(DT)),
    rows=st.integers(1, 4),
    cols=st.integers(1, 70),
    data=st.data(),
)


@settings(max_examples=80, deadline=None)
@given(**bit_args)
def test_fuzz_arbitrary_bit_patterns(variant, dtype, acc, rows, cols, data):
    fuzz_bit_patterns(variant, dtype, acc, rows, cols, data, "emulator")


@pytest.mark.gpu
@settings(max_examples=500, deadline=None)
@given(**bit_args)
def test_fuzz_arbitrary_bit_patterns_cuda(variant, dtype, acc, rows, cols, data):
    fuzz_bit_patterns(variant, dtype, acc, rows, cols, data, "cuda")


def fuzz_bit_patterns(variant, dtype, acc, rows, cols, data, backend):
    """Any bits at all (NaN payloads, subnormals, ±0, ±inf, the largest values): never a stray exception, a
    row the accumulator would make NaN refused, and outside naive the NaN/inf pattern is the reference's for every
    input that is run."""
    nbits = DT[dtype].itemsize * 8
    raw = data.draw(st.lists(st.integers(0, 2**nbits - 1), min_size=rows * cols, max_size=rows * cols))
    x = np.array(raw, {16: np.uint16, 32: np.uint32}[nbits]).view(DT[dtype]).reshape(rows, cols)
    if accumulator_loses_a_row(x, acc):  # a row the accumulator would make NaN: refused, not run
        with pytest.raises(explorer.InvalidInput, match=f"{acc} accumulator holds values"):
            explorer.softmax(x, variant, acc=acc, backend=backend)
        return
    res = explorer.softmax(x, variant, acc=acc, backend=backend)
    assert res.out.shape == x.shape and res.out.dtype == x.dtype
    if variant != "naive":
        assert explorer.errors(res.out, x).nonfinite_mismatch == 0

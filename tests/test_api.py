"""explorer.softmax: argument validation, backends, the element cap, and the error hierarchy."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import explorer
from explorer.backends import cuda

DT = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16)}
CORE = {k: v for k, v in explorer.VARIANTS.items()
        if v.family in ("thread", "warp", "block") and v.method in ("naive", "safe", "online")}
FIXED_SHAPE = [k for k, v in explorer.VARIANTS.items() if not v.takes_block_size]
SIZED = [k for k, v in explorer.VARIANTS.items() if v.takes_block_size]
X = np.random.default_rng(0).normal(size=(3, 40)).astype(np.float32)

no_gpu = pytest.mark.skipif(cuda.available(), reason="this machine has a usable GPU")


def raises(exc_type, *words, **call):
    """Call explorer.softmax, expect exc_type (an ExplorerError) with every word in its message."""
    kwargs = {"x": X, "variant": "online_warp", "backend": "emulator", **call}
    with pytest.raises(exc_type) as info:
        explorer.softmax(**kwargs)
    assert isinstance(info.value, explorer.ExplorerError)
    message = str(info.value)
    for word in words:
        assert word in message, (word, message)
    return message


# ---------------------------------------------------------------- the error hierarchy


def test_error_classes():
    for cls in (explorer.InvalidInput, explorer.GPUUnavailable, explorer.TooLarge, explorer.KernelFailed,
                explorer.GPUContextLost):
        assert issubclass(cls, explorer.ExplorerError)
        assert issubclass(cls, Exception)
    # compatible with the built-in kinds callers might already catch
    assert issubclass(explorer.InvalidInput, ValueError)
    assert issubclass(explorer.TooLarge, MemoryError)
    assert issubclass(explorer.GPUContextLost, explorer.KernelFailed)


# ---------------------------------------------------------------- names


@pytest.mark.parametrize("variant", ["", "Online_Warp", "online-warp", "flash", None, 3])
def test_unknown_variant(variant):
    msg = raises(explorer.InvalidInput, "unknown variant", variant=variant)
    for v in explorer.VARIANTS:
        assert v in msg


@pytest.mark.parametrize("acc", ["float64", "fp32", "", None, "FLOAT32", 32])
def test_unknown_accumulator(acc):
    msg = raises(explorer.InvalidInput, "accumulator", acc=acc)
    assert "float32" in msg and "bfloat16" in msg


# (no bare "gpu" here: conftest skips every test with a "gpu" keyword, parametrize ids included)
@pytest.mark.parametrize("backend", ["tpu", "CUDA", "GPU", "", None, "numpy"])
def test_unknown_backend(backend):
    msg = raises(explorer.InvalidInput, "unknown backend", backend=backend)
    for b in ("auto", "cuda", "emulator"):
        assert b in msg


def test_resolve_backend():
    assert explorer.resolve_backend("emulator") == "emulator"
    assert explorer.resolve_backend("cuda") == "cuda"
    assert explorer.resolve_backend("auto") == ("cuda" if cuda.available() else "emulator")
    with pytest.raises(explorer.InvalidInput):
        explorer.resolve_backend("tpu")


# ---------------------------------------------------------------- x


@pytest.mark.parametrize("x", [[[1.0, 2.0]], (1.0, 2.0), 3.0, "1,2", None])
def test_non_array(x):
    raises(explorer.InvalidInput, "numpy array", x=x)


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int64, np.uint8, np.bool_, np.complex64, np.longdouble])
def test_wrong_dtype(dtype):
    msg = raises(explorer.InvalidInput, "astype", x=np.ones((2, 3), dtype))
    assert "float32" in msg


@pytest.mark.parametrize("shape", [(2, 3, 4), (1, 1, 1), (2, 2, 2, 2)])
def test_too_many_dimensions(shape):
    raises(explorer.InvalidInput, "1-D or 2-D", str(shape), x=np.zeros(shape, np.float32))


def test_zero_dimensional():
    raises(explorer.InvalidInput, "1-D or 2-D", x=np.array(1.0, np.float32))


@pytest.mark.parametrize("shape", [(0,), (0, 5), (4, 0)])
def test_empty(shape):
    raises(explorer.InvalidInput, "empty", str(shape), x=np.zeros(shape, np.float32))


# ---------------------------------------------------------------- trace_row


@pytest.mark.parametrize("row", [3, 4, -1, -3, 10**12])
def test_trace_row_out_of_range(row):
    raises(explorer.InvalidInput, "trace_row", "0 to 2", repr(row), trace_row=row)


@pytest.mark.parametrize("row", [True, False, 0.0, 1.5, "1", [0], np.float32(1)])
def test_trace_row_wrong_type(row):
    raises(explorer.InvalidInput, "trace_row", trace_row=row)


@pytest.mark.parametrize("variant", [k for k, v in explorer.VARIANTS.items() if not v.traceable])
def test_trace_row_on_untraceable(variant):
    raises(explorer.InvalidInput, variant, "no trace", variant=variant, trace_row=0)


def test_trace_row_accepts_numpy_integers_and_the_last_row():
    for row in (np.int64(2), np.int8(0), 2):
        res = explorer.softmax(X, "online_warp", backend="emulator", trace_row=row)
        assert res.trace.row == int(row)


# ---------------------------------------------------------------- block_size


@pytest.mark.parametrize("variant", FIXED_SHAPE)
@pytest.mark.parametrize("block", [32, 256, 0])
def test_block_size_on_a_fixed_shape_variant(variant, block):
    raises(explorer.InvalidInput, variant, "block size", variant=variant, block_size=block)


@pytest.mark.parametrize("variant", SIZED)
@pytest.mark.parametrize("block", [0, 16, 33, 100, 1000, 1056, 2048, -32, True])
def test_block_size_not_a_multiple_of_32_up_to_1024(variant, block):
    raises(explorer.InvalidInput, "multiple of 32", str(block), variant=variant, block_size=block)


@pytest.mark.parametrize("variant", [k for k in SIZED if k in CORE])
@pytest.mark.parametrize("block", [32, 64, 96, 992, 1024, np.int64(128)])
def test_valid_block_sizes(variant, block):
    res = explorer.softmax(X, variant, backend="emulator", block_size=block)
    assert res.block_size == block and res.launch.block == block


@pytest.mark.parametrize("variant", [k for k in SIZED if k in CORE])
def test_default_block_size(variant):
    res = explorer.softmax(X, variant, backend="emulator")
    assert res.block_size == explorer.VARIANTS[variant].default_block_size > 0


@pytest.mark.parametrize("block", [64.0, "64", 64.5, np.float32(64), [64]])
def test_non_integer_block_size_is_invalid_input(block):
    raises(explorer.InvalidInput, "block size", repr(block), variant="online_block", block_size=block)


# ---------------------------------------------------------------- dtype / accumulator combinations


@pytest.mark.parametrize("variant", list(explorer.VARIANTS))
@pytest.mark.parametrize("dtype", list(DT))
@pytest.mark.parametrize("acc", list(DT))
def test_unsupported_combinations_are_refused_with_the_choices(variant, dtype, acc):
    v = explorer.VARIANTS[variant]
    x = X.astype(DT[dtype])
    if dtype in v.dtypes and acc in v.accumulators:
        res = explorer.softmax(x, variant, acc=acc, backend="emulator")
        assert res.out.dtype == x.dtype and res.acc == acc and res.variant == variant
        assert res.backend == "emulator"
    else:
        with pytest.raises(explorer.InvalidInput) as info:
            explorer.softmax(x, variant, acc=acc, backend="emulator")
        assert variant in str(info.value)


# ---------------------------------------------------------------- backends


@no_gpu
@pytest.mark.parametrize("variant", list(CORE))
def test_cuda_backend_without_a_gpu(variant):
    msg = raises(explorer.GPUUnavailable, "emulator", variant=variant, backend="cuda")
    assert "GPU" in msg or "CUDA" in msg or "CuPy" in msg


@no_gpu
def test_auto_uses_the_emulator_here():
    res = explorer.softmax(X, "online_warp", backend="auto")
    assert res.backend == "emulator"
    assert explorer.info()["backend"] == "emulator" and explorer.info()["reason"]
    res2 = explorer.softmax(X, "online_warp")  # default backend is auto
    assert res2.backend == "emulator" and res2.out.tobytes() == res.out.tobytes()


@no_gpu
def test_validation_comes_before_the_gpu_check():
    # a bad argument is reported as such even with backend="cuda" on a machine without a GPU
    raises(explorer.InvalidInput, "unknown variant", variant="nope", backend="cuda")
    raises(explorer.InvalidInput, "trace_row", backend="cuda", trace_row=99)


# ---------------------------------------------------------------- the element cap


@pytest.mark.parametrize("shape", [(3, 40), (1, 7), (1823, 781)])
def test_too_large_over_the_cap(monkeypatch, shape):
    rows, cols = shape
    cap = rows * cols - 1
    monkeypatch.setenv("EXPLORER_MAX_ELEMENTS", str(cap))
    x = np.zeros(shape, np.float32)
    msg = raises(explorer.TooLarge, f"{rows}×{cols}", f"{rows * cols:,}", f"{cap:,}", "EXPLORER_MAX_ELEMENTS", x=x)
    assert isinstance(msg, str)
    # exactly at the cap is allowed
    monkeypatch.setenv("EXPLORER_MAX_ELEMENTS", str(rows * cols))
    assert explorer.softmax(x, "online_warp", backend="emulator").out.shape == shape


def test_too_large_counts_a_one_dimensional_input(monkeypatch):
    monkeypatch.setenv("EXPLORER_MAX_ELEMENTS", "99")
    raises(explorer.TooLarge, "1×100", "100", "99", x=np.zeros(100, np.float32))


@pytest.mark.parametrize("raw", ["lots", "1e6", "1.5"])
def test_malformed_cap_is_invalid_input(monkeypatch, raw):
    monkeypatch.setenv("EXPLORER_MAX_ELEMENTS", raw)
    raises(explorer.InvalidInput, "EXPLORER_MAX_ELEMENTS", repr(raw))


def test_check_fits_and_bytes_needed(monkeypatch):
    v = explorer.VARIANTS["online_block"]
    base = explorer.bytes_needed(10, 100, "float32", "emulator")
    assert base >= 2 * 10 * 100 * 4  # at least input and output
    assert explorer.bytes_needed(10, 100, "float16", "emulator") < base
    assert explorer.bytes_needed(10, 100, "float32", "emulator", v, 256, traced=True) > base
    explorer.check_fits(10, 100, "float32", "emulator")
    monkeypatch.setenv("EXPLORER_MAX_ELEMENTS", str(2**62))  # past the cap: memory is what refuses it
    with pytest.raises(explorer.TooLarge, match="GiB") as info:
        explorer.check_fits(2**20, 2**20, "float32", "emulator")  # 4 TiB of input alone
    assert "host memory" in str(info.value)


# ---------------------------------------------------------------- the result


@pytest.mark.parametrize("variant", list(CORE))
def test_result_fields(variant):
    x = X[:2]
    res = explorer.softmax(x, variant, acc="float16", backend="emulator")
    assert isinstance(res, explorer.SoftmaxResult)
    assert res.out.shape == x.shape and res.out.dtype == x.dtype
    assert res.variant == variant and res.acc == "float16" and res.backend == "emulator"
    assert isinstance(res.launch, explorer.Launch)
    threads = {"thread": 1, "warp": 32, "block": res.block_size}[CORE[variant].family]
    assert res.launch.threads_per_row == threads
    # the input is untouched
    assert np.array_equal(x, X[:2])


@pytest.mark.parametrize("call", [{"variant": ["online_warp"]}, {"acc": ["float32"]}])
def test_unhashable_names_are_invalid_input(call):
    raises(explorer.InvalidInput, **call)

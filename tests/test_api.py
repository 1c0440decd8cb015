"""explorer.softmax: argument validation, backends, the element cap, and the error hierarchy."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import explorer
from explorer import checks
from explorer.backends import cuda

DT = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16)}
CORE = {
    k: v
    for k, v in explorer.VARIANTS.items()
    if v.family in ("thread", "warp", "block") and v.method in ("naive", "safe", "online")
}
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
    for cls in (
        explorer.InvalidInput,
        explorer.GPUUnavailable,
        explorer.TooLarge,
        explorer.KernelFailed,
        explorer.GPUContextLost,
    ):
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
    msg = raises(
        explorer.TooLarge,
        f"{rows}×{cols}",
        f"{rows * cols:,} elements",
        f"this server's limit of {cap:,} elements",
        "smaller shape",
        x=x,
    )
    assert "EXPLORER_MAX_ELEMENTS" not in msg  # the operator's setting is not the user's business
    assert "bytes" in msg or "KiB" in msg or "MiB" in msg  # the limit in bytes too
    # exactly at the cap is allowed
    monkeypatch.setenv("EXPLORER_MAX_ELEMENTS", str(rows * cols))
    assert explorer.softmax(x, "online_warp", backend="emulator").out.shape == shape


def test_too_large_counts_a_one_dimensional_input(monkeypatch):
    monkeypatch.setenv("EXPLORER_MAX_ELEMENTS", "99")
    raises(explorer.TooLarge, "1×100", "100", "99", x=np.zeros(100, np.float32))


@pytest.mark.parametrize("raw", ["lots", "1e6", "1.5", "-5", "0", "-1"])
def test_malformed_cap_is_refused_and_the_default_used(monkeypatch, caplog, raw):
    monkeypatch.setenv("EXPLORER_MAX_ELEMENTS", raw)
    problems = checks.settings_problems()
    assert len(problems) == 1 and repr(raw) in problems[0] and "default" in problems[0]
    with caplog.at_level("WARNING", logger="explorer"):
        assert checks.max_elements() == checks.DEFAULT_MAX_ELEMENTS
    assert explorer.softmax(X, "online_warp", backend="emulator").out.shape == X.shape


@pytest.mark.parametrize("raw", ["", " ", "1", "1000", " 4096 "])
def test_valid_cap_settings(monkeypatch, raw):
    monkeypatch.setenv("EXPLORER_MAX_ELEMENTS", raw)
    assert checks.settings_problems() == []
    assert checks.max_elements() == (int(raw) if raw.strip() else checks.DEFAULT_MAX_ELEMENTS)


def test_malformed_cap_is_reported_when_the_package_loads():
    env = {**os.environ, "EXPLORER_MAX_ELEMENTS": "-5", "EXPLORER_BACKEND": "emulator"}
    code = "import explorer; explorer.softmax(explorer.make_input('normal', 2, 3), 'online_warp')"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "EXPLORER_MAX_ELEMENTS='-5' is refused" in done.stderr and "default" in done.stderr
    assert done.stderr.count("EXPLORER_MAX_ELEMENTS") == 1  # once, not per call
    # at start: importing the package is enough
    done = subprocess.run(
        [sys.executable, "-c", "import explorer"], env=env, capture_output=True, text=True, timeout=120
    )
    assert "EXPLORER_MAX_ELEMENTS='-5' is refused" in done.stderr


def test_a_malformed_setting_leaves_the_others_in_force(monkeypatch):
    monkeypatch.setenv("EXPLORER_MAX_ELEMENTS", "1000")
    monkeypatch.setenv("EXPLORER_RUN_BUDGET_BYTES", "lots")
    monkeypatch.setenv("EXPLORER_BACKEND", "bogus")
    assert len(checks.settings_problems()) == 2
    assert checks.max_elements() == 1000
    raises(explorer.TooLarge, "this server's limit", x=np.zeros((2, 501), np.float32))


AUTO = "cuda" if cuda.available() else "emulator"


@pytest.mark.parametrize("raw", ["bogus", "gpu", "CUDA", "auto", "emulator cuda"])
def test_malformed_backend_setting_is_refused_and_auto_chooses(monkeypatch, raw):
    """An EXPLORER_BACKEND that is neither cuda nor emulator is refused (the warning: below, in a process of its
    own), and "auto" chooses as if it were unset; nothing the user asks for is refused because of it."""
    monkeypatch.setenv("EXPLORER_BACKEND", raw)
    problems = checks.settings_problems()
    assert len(problems) == 1 and repr(raw) in problems[0] and "cuda or emulator" in problems[0], problems
    assert checks.forced_backend() is None
    assert explorer.resolve_backend("auto") == AUTO
    assert explorer.info()["backend"] == AUTO
    assert explorer.resolve_backend("emulator") == "emulator"
    assert explorer.bytes_needed(3, 40, "float32", "auto") > 0
    if AUTO == "emulator":
        assert explorer.softmax(X, "online_warp").backend == "emulator"


@pytest.mark.parametrize(("raw", "forced"), [("", None), (" ", None), ("cuda", "cuda"), (" emulator ", "emulator")])
def test_valid_backend_settings(monkeypatch, raw, forced):
    monkeypatch.setenv("EXPLORER_BACKEND", raw)
    assert checks.settings_problems() == []
    assert checks.forced_backend() == forced


def test_malformed_backend_setting_is_reported_once_when_the_package_loads():
    env = {**os.environ, "EXPLORER_BACKEND": "bogus"}
    env.pop("EXPLORER_MAX_ELEMENTS", None)
    code = "import explorer; explorer.resolve_backend('auto'); explorer.info(); explorer.resolve_backend('auto')"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "EXPLORER_BACKEND='bogus' is refused" in done.stderr, done.stderr
    assert done.stderr.count("EXPLORER_BACKEND") == 1, done.stderr  # once, not per call


# ---------------------------------------------------------------- checks on the shape, before any copy


@pytest.mark.parametrize(
    ("shape", "exc", "words"),
    [
        ((1, 2**31), explorer.InvalidInput, ["below 2^31", "1×2147483648"]),
        ((2**31,), explorer.InvalidInput, ["below 2^31"]),
        ((2**20, 2**20), explorer.TooLarge, ["1048576×1048576", "this server's limit"]),
        ((2**15, 2**15), None, []),  # within the cap: the memory guard or the run decides (patched below)
    ],
)
def test_huge_broadcast_views_are_refused_from_the_shape(monkeypatch, shape, exc, words):
    """np.broadcast_to makes views of any size for free; softmax must not copy one before checking it."""
    monkeypatch.setattr(np, "ascontiguousarray", lambda *a, **k: pytest.fail("copied before the checks"))
    monkeypatch.setenv("EXPLORER_RUN_BUDGET_BYTES", str(2**20))
    x = np.broadcast_to(np.float32(0), shape)
    for call in (
        lambda: explorer.softmax(x, "online_warp", backend="emulator"),
        lambda: explorer.softmax_topk(x, 4, backend="emulator"),
    ):
        with pytest.raises(exc or explorer.TooLarge) as info:
            call()
        for word in words if exc else ["CPU emulation", "this server's limit", "smaller shape"]:
            assert word in str(info.value)


@pytest.mark.parametrize(
    "call",
    [
        lambda: explorer.check_fits("8", 8, "float32", "emulator"),
        lambda: explorer.check_fits(8, 8, "float64", "emulator"),
        lambda: explorer.check_fits(8, 8, ["float32"], "emulator"),
        lambda: explorer.check_fits(8, 8, "float32", "tpu"),
        lambda: explorer.check_fits(8, 8, "float32", "emulator", "online_warp"),
        lambda: explorer.check_fits(8, 8, "float32", "emulator", explorer.VARIANTS["online_block"], 33),
        lambda: explorer.bytes_needed(0, 8, "float32", "emulator"),
        lambda: explorer.bytes_needed(8, 2**31, "float32", "emulator"),
        lambda: explorer.bytes_needed(8, 8, "float32", "emulator", explorer.VARIANTS["fast"], 64),
        lambda: explorer.bytes_needed(8, 8, "float32", "emulator", traced=np.ones(3)),
    ],
)
def test_check_fits_and_bytes_needed_refuse_bad_arguments(call):
    with pytest.raises(explorer.InvalidInput):
        call()


def test_block_size_zero_means_the_default_in_the_estimates():
    v = explorer.VARIANTS["online_block"]
    assert explorer.bytes_needed(4, 64, "float32", "emulator", v, 0, True) == explorer.bytes_needed(
        4, 64, "float32", "emulator", v, None, True
    )


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
    assert "CPU emulation" in str(info.value)


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


# ---------------------------------------------------------------- the other public functions: our errors only


OUT = explorer.softmax(X, "online_warp", backend="emulator").out


@pytest.mark.parametrize(
    ("out", "x", "words"),
    [
        (OUT.astype(np.float64), X, ["out", "unsupported dtype"]),
        (OUT, X[:2], ["shape (3, 40)", "(2, 40)"]),
        (OUT, X.T, ["must match"]),
        (np.float32(0.5), np.float32(1.0), ["out must be a numpy array"]),
        (np.array(0.5, np.float32), np.array(1.0, np.float32), ["at least one element", "()"]),
        (OUT[:0], X[:0], ["at least one element"]),
        (OUT.tolist(), X, ["numpy array"]),
        (OUT, "x", ["real numbers"]),
    ],
)
def test_errors_refuses_mismatched_arguments(out, x, words):
    with pytest.raises(explorer.InvalidInput) as info:
        explorer.errors(out, x)
    for word in words:
        assert word in str(info.value)


def test_errors_checks_ref():
    with pytest.raises(explorer.InvalidInput, match="ref has shape"):
        explorer.errors(OUT, X, ref=np.zeros(3))
    assert explorer.errors(OUT, X, ref=explorer.reference(X)) == explorer.errors(OUT, X)


@pytest.mark.parametrize(
    "x", [np.zeros(0), np.zeros((5, 0)), np.array(1.0), np.array(["a"]), [[1, 2], [3]], None, np.array([1 + 1j])]
)
def test_reference_refuses_empty_and_non_numeric(x):
    with pytest.raises(explorer.InvalidInput):
        explorer.reference(x)


def test_reference_and_errors_are_held_to_the_limit_of_one_run(monkeypatch):
    """Like softmax, the float64 reference and the error report are refused before they allocate what one run may
    not take (errors without a ref computes the reference too)."""
    x = np.zeros((1000, 1000), np.float32)
    out = np.full_like(x, 1e-3)  # each row's softmax, rounded to float32
    need = explorer.budget.errors_bytes(1000, 1000) + explorer.budget.reference_bytes(1000, 1000)
    monkeypatch.setenv(explorer.budget.SETTING, str(need - 1))
    with pytest.raises(explorer.TooLarge, match=r"^the error report against float64: "):
        explorer.errors(out, x)
    assert explorer.errors(out, x, explorer.reference(x)).max_rel < 1e-7  # given its ref it needs less, and fits
    monkeypatch.setenv(explorer.budget.SETTING, str(explorer.budget.reference_bytes(1000, 1000) - 1))
    with pytest.raises(explorer.TooLarge, match=r"^the float64 reference: "):
        explorer.reference(x)


def test_reference_takes_array_likes_and_any_real_dtype():
    assert np.allclose(explorer.reference([[0.0, 0.0]]), 0.5)
    assert np.allclose(explorer.reference(np.zeros((2, 3, 4), np.int8)), 0.25)


@pytest.mark.parametrize(
    "call",
    [
        lambda: explorer.error_bound(-1, "float16", "float32"),
        lambda: explorer.error_bound(10**400, "float16", "float32"),
        lambda: explorer.error_bound(4, "fp16", "float32"),
        lambda: explorer.error_bound(4, "float16", ["float32"]),
        lambda: explorer.error_bound(4, "float16", "float32", float("nan")),
        lambda: explorer.error_bound(True, "float16", "float32"),
        lambda: explorer.rounds_input("float16", None),
        lambda: explorer.rounds_input(np.array(["float16"]), "float16"),
    ],
)
def test_error_bound_and_rounds_input_refuse_bad_arguments(call):
    with pytest.raises(explorer.InvalidInput):
        call()


@pytest.mark.parametrize(
    "call",
    [
        lambda: explorer.error_bound(10**400, "float16", "float32"),
        lambda: explorer.error_bound(-(10**400), "float16", "float32"),
        lambda: explorer.error_bound(10**5000, "float16", "float32"),  # past Python's 4,300 digits for text
        lambda: explorer.error_bound(4, "float16", "float32", -(10**400)),
        lambda: explorer.error_bound("9" * 1000, "float16", "float32"),
        lambda: explorer.error_bound(4, "f" * 1000, "float32"),
        lambda: explorer.make_input("normal", 4, 5, mean=10**400),
        lambda: explorer.make_input("normal", 10**400, 5),
        lambda: explorer.softmax(np.zeros(4, np.float32), "v" * 1000),
        lambda: explorer.softmax(np.zeros(4, np.float32), "naive", backend="b" * 1000),
    ],
)
def test_a_huge_value_is_quoted_cut_short(call):
    """errors.shown() quotes every user value: 10**400 is not echoed in 400 digits."""
    with pytest.raises(explorer.InvalidInput) as refused:
        call()
    message = str(refused.value)
    assert len(message) < 200 and "0" * 41 not in message and "9" * 41 not in message, message


def test_a_numpy_error_is_not_the_user_s_message():
    with pytest.raises(explorer.InvalidInput) as refused:
        explorer.reference([[1, 2], [3]])
    assert "inhomogeneous" not in str(refused.value) and "rows of equal length" in str(refused.value)


def test_error_bound_agrees_with_numerics():
    from explorer import numerics

    assert explorer.error_bound(7, "bfloat16", "float16", 3.5) == numerics.error_bound(7, "bfloat16", "float16", 3.5)
    assert explorer.rounds_input("float32", "float16") is True and explorer.rounds_input("float16", "float32") is False


def test_topk_errors_refuses_a_result_of_another_x():
    x = X[:, :16]
    result = explorer.softmax_topk(x, 8, backend="emulator")
    assert explorer.topk_errors(result, x).index_mismatch == 0
    for other, words in (
        (X[:, :5], "does not belong"),
        (X[:2, :16], "does not belong"),
        (X[:, :16].ravel(), "shape"),
        (x.astype(np.float64), "unsupported dtype"),
    ):
        with pytest.raises(explorer.InvalidInput, match=words):
            explorer.topk_errors(result, other)
    wrong = explorer.TopkResult(result.values, result.indices + 16, "emulator", "topk_fused", 8, result.launch)
    with pytest.raises(explorer.InvalidInput, match="outside x's 16 columns"):
        explorer.topk_errors(wrong, x)
    with pytest.raises(explorer.InvalidInput, match="what softmax_topk returned"):
        explorer.topk_errors((result.values, result.indices), x)


@pytest.mark.parametrize(("x", "k"), [(X, 0), (X, 41), (X, 2.0), (np.zeros((2, 2, 2)), 1), (np.zeros(0), 1), ("ab", 1)])
def test_reference_topk_refuses_bad_arguments(x, k):
    with pytest.raises(explorer.InvalidInput):
        explorer.reference_topk(x, k)


@pytest.mark.parametrize(
    "kwargs",
    [dict(dtype=["float32"]), dict(acc=None), dict(rows=0), dict(cols="8"), dict(block_size=33), dict(variant="nope")],
)
def test_kernel_resources_refuses_bad_arguments(kwargs):
    with pytest.raises(explorer.InvalidInput):
        explorer.kernel_resources(**{"variant": "online_block", **kwargs})


def test_the_app_runs_with_a_malformed_backend_setting(monkeypatch):
    """The app's first page under EXPLORER_BACKEND=bogus: no exception box, and the runs go ahead on the backend
    "auto" chooses."""
    testing = pytest.importorskip("streamlit.testing.v1")
    monkeypatch.setenv("EXPLORER_BACKEND", "bogus")
    at = testing.AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app.py"), default_timeout=180)
    at.query_params.update({"rows": "2", "cols": "40", "variants": "online_warp"})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    assert at.dataframe[0].value.loc["online_warp", "backend"] == AUTO


@pytest.mark.parametrize("call", [explorer.bytes_needed, explorer.check_fits])
def test_memory_questions_refuse_what_softmax_refuses(call):
    """bytes_needed and check_fits answer only for runs softmax would start: fast has no fp16 accumulator."""
    fast = explorer.VARIANTS["fast"]
    with pytest.raises(explorer.InvalidInput, match="fast accumulates in float32, not float16"):
        call(4, 1000, "float32", "emulator", fast, None, False, "float16")
    with pytest.raises(explorer.InvalidInput, match="fast accumulates in float32, not float16"):
        explorer.softmax(np.zeros((4, 1000), np.float32), "fast", acc="float16", backend="emulator")
    assert call(4, 1000, "float32", "emulator", fast, None, False, "float32") > 0


def test_a_launch_describes_itself_without_an_empty_kernel_name():
    """A teaching kernel's Launch names no kernel: its description starts at the grid, not at ': grid'."""
    teaching = explorer.softmax(np.zeros((4, 8), np.float32), "online_warp", backend="emulator").launch
    assert teaching.describe() == f"grid {teaching.grid} × block {teaching.block}"
    fast = explorer.softmax(np.zeros((4, 8), np.float32), "fast", backend="emulator").launch
    assert fast.describe().startswith(f"{fast.kernel}<") and ">: grid " in fast.describe()

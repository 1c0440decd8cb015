"""make_input's distributions and load_logits' parsing of uploads (CPU only)."""

from __future__ import annotations

import dataclasses
import io
import math
import re
import zlib

import ml_dtypes
import numpy as np
import pytest

import explorer

DTYPE_OBJECTS = {
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
}
ALL_DISTRIBUTIONS = sorted(explorer.DISTRIBUTIONS)
# Distributions whose output does not depend on the seed.
DETERMINISTIC = {"decreasing", "increasing", "constant"}


def as64(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).astype(np.float64)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


# ---------------------------------------------------------------- make_input: every distribution × dtype


def test_registry_lists_the_documented_distributions():
    assert set(explorer.DISTRIBUTIONS) == {
        "normal",
        "uniform",
        "large",
        "decreasing",
        "increasing",
        "spike",
        "zipf",
        "constant",
        "causal_mask",
        "nonfinite",
    }
    for key, dist in explorer.DISTRIBUTIONS.items():
        assert dist.key == key and dist.title and dist.shows
        for name, p in dist.params.items():
            assert p.low <= p.default <= p.high, (key, name)


def make_input_refusal(kwargs: dict) -> str:
    """The InvalidInput message of make_input on a 4×5 float32 normal input with kwargs changed (params: the
    distribution's)."""
    args = dict(distribution="normal", rows=4, cols=5, dtype="float32")
    params = kwargs.pop("params", {})
    args.update(kwargs)
    with pytest.raises(explorer.InvalidInput) as info:
        explorer.make_input(args.pop("distribution"), args.pop("rows"), args.pop("cols"), **args, **params)
    return str(info.value)


@pytest.mark.parametrize("dtype", list(DTYPE_OBJECTS))
@pytest.mark.parametrize("dist", ALL_DISTRIBUTIONS)
@pytest.mark.parametrize("shape", [(1, 1), (3, 33), (7, 130)])
def test_shape_dtype_and_reproducibility(dist, dtype, shape):
    a = explorer.make_input(dist, *shape, dtype=dtype, seed=11)
    assert isinstance(a, np.ndarray)
    assert a.shape == shape
    assert a.dtype == DTYPE_OBJECTS[dtype]
    b = explorer.make_input(dist, *shape, dtype=dtype, seed=11)
    assert same_bits(a, b), "same seed must give the same bits"


@pytest.mark.parametrize("dtype", list(DTYPE_OBJECTS))
@pytest.mark.parametrize("dist", sorted(set(ALL_DISTRIBUTIONS) - DETERMINISTIC))
def test_random_distributions_differ_across_seeds(dist, dtype):
    a = explorer.make_input(dist, 16, 64, dtype=dtype, seed=1)
    b = explorer.make_input(dist, 16, 64, dtype=dtype, seed=2)
    assert not same_bits(a, b)


@pytest.mark.parametrize("dist", sorted(DETERMINISTIC))
def test_deterministic_distributions_ignore_the_seed(dist):
    a = explorer.make_input(dist, 4, 50, seed=1)
    b = explorer.make_input(dist, 4, 50, seed=987)
    assert same_bits(a, b)


def test_default_dtype_is_float32():
    assert explorer.make_input("normal", 2, 3).dtype == np.float32


@pytest.mark.parametrize("dtype", list(DTYPE_OBJECTS))
def test_normal_and_uniform_statistics(dtype):
    x = as64(explorer.make_input("normal", 200, 500, dtype=dtype, seed=3, mean=2.0, std=3.0))
    assert abs(x.mean() - 2.0) < 0.05
    assert abs(x.std() - 3.0) < 0.05
    u = as64(explorer.make_input("uniform", 100, 500, dtype=dtype, seed=4, low=-5.0, high=7.0))
    assert u.min() >= -5.0 and u.max() <= 7.0
    assert u.min() < -4.9 and u.max() > 6.9
    # low > high: still the interval between them
    w = as64(explorer.make_input("uniform", 50, 50, dtype=dtype, seed=4, low=3.0, high=-3.0))
    assert w.min() >= -3.0 and w.max() <= 3.0 and w.min() < -2.5 and w.max() > 2.5


@pytest.mark.parametrize("dtype", list(DTYPE_OBJECTS))
def test_large_overflows_fp32_exp(dtype):
    x = explorer.make_input("large", 4, 100, dtype=dtype, seed=5)
    assert np.all(np.isfinite(as64(x)))
    with np.errstate(over="ignore"):
        e = np.exp(x.astype(np.float32))
    assert np.isinf(e).any(), "the 'large' distribution must overflow exp in fp32"
    assert as64(x).max() > math.log(float(np.finfo(np.float32).max))


@pytest.mark.parametrize("dtype", list(DTYPE_OBJECTS))
@pytest.mark.parametrize("cols", [1, 2, 33, 1000])
def test_monotone_distributions(dtype, cols):
    dec = as64(explorer.make_input("decreasing", 3, cols, dtype=dtype, spread=5.0))
    inc = as64(explorer.make_input("increasing", 3, cols, dtype=dtype, spread=5.0))
    assert np.all(np.diff(dec, axis=1) <= 0)
    assert np.all(np.diff(inc, axis=1) >= 0)
    # a row starts at the first endpoint (one column holds just that)
    assert np.all(dec[:, 0] == 0.0) and np.all(inc[:, 0] == -5.0)
    if cols > 1:
        assert np.all(dec[:, -1] == -5.0) and np.all(inc[:, -1] == 0.0)
        # over the whole row, the trend is strict
        assert np.all(dec[:, 0] > dec[:, -1]) and np.all(inc[:, 0] < inc[:, -1])
    if dtype == "float32" and cols > 1:
        assert np.all(np.diff(dec, axis=1) < 0) and np.all(np.diff(inc, axis=1) > 0)
    # every row is the same
    assert np.all(dec == dec[0]) and np.all(inc == inc[0])


@pytest.mark.parametrize("dtype", list(DTYPE_OBJECTS))
@pytest.mark.parametrize("shape", [(5, 8), (12, 5), (1, 1), (40, 33)])
def test_causal_mask_row_i_keeps_i_plus_one(dtype, shape):
    rows, cols = shape
    x = as64(explorer.make_input("causal_mask", rows, cols, dtype=dtype, seed=6))
    finite = np.isfinite(x)
    # every non-finite entry is -inf, never NaN or +inf
    assert np.all(x[~finite] == -np.inf)
    for i in range(rows):
        if cols > i:
            assert finite[i].sum() == i + 1, i
            assert finite[i, : i + 1].all() and not finite[i, i + 1 :].any()
        else:
            assert finite[i].sum() >= 1  # at least one element stays unmasked


@pytest.mark.parametrize("masked", [1, 3, 100])
def test_causal_mask_masked_rows_are_all_minus_inf(masked):
    x = as64(explorer.make_input("causal_mask", 6, 10, masked_rows=masked))
    k = min(masked, 6)
    assert np.all(x[:k] == -np.inf)
    if k < 6:
        assert np.isfinite(x[k:]).any(axis=1).all()


@pytest.mark.parametrize("dtype", list(DTYPE_OBJECTS))
def test_nonfinite_sprinkles_nan_and_both_infinities(dtype):
    rate = 0.1
    x = as64(explorer.make_input("nonfinite", 100, 100, dtype=dtype, seed=7, rate=rate))
    n = x.size
    for count in (np.isnan(x).sum(), np.isposinf(x).sum(), np.isneginf(x).sum()):
        # binomial(10000, 0.1): mean 1000, sd 30
        assert 0.08 * n < count < 0.12 * n
    # the default rate still shows all three kinds on a moderately large input
    y = as64(explorer.make_input("nonfinite", 100, 1000, dtype=dtype, seed=8))
    assert np.isnan(y).any() and np.isposinf(y).any() and np.isneginf(y).any()
    z = as64(explorer.make_input("nonfinite", 20, 20, dtype=dtype, rate=0.0))
    assert np.isfinite(z).all()


@pytest.mark.parametrize("dtype", list(DTYPE_OBJECTS))
@pytest.mark.parametrize("value", [1.0, -3.5, 0.0, 100.0])
def test_constant_is_constant(dtype, value):
    x = explorer.make_input("constant", 3, 17, dtype=dtype, value=value)
    x64 = as64(x)
    assert np.all(x64 == x64[0, 0])
    assert x64[0, 0] == float(np.asarray(value).astype(DTYPE_OBJECTS[dtype]).astype(np.float64))


@pytest.mark.parametrize("dtype", list(DTYPE_OBJECTS))
def test_spike_has_one_dominant_logit_per_row(dtype):
    x = as64(explorer.make_input("spike", 30, 64, dtype=dtype, seed=9, height=10.0))
    top = np.sort(x, axis=1)
    assert np.all(top[:, -1] == 10.0)
    assert np.all(top[:, -2] < 2.0)


def test_zipf_tops_out_near_top():
    x = as64(explorer.make_input("zipf", 50, 200, seed=10, top=20.0, slope=3.0, noise=0.0))
    # noise 0: rank 1 gives exactly top, and every row is a permutation of the same values
    assert np.allclose(x.max(axis=1), 20.0)
    expected = np.sort(20.0 - 3.0 * np.log(np.arange(1, 201)))
    assert np.allclose(np.sort(x, axis=1), expected[None, :], rtol=1e-6, atol=1e-5)


def test_params_change_the_output():
    a = explorer.make_input("normal", 3, 40, seed=1)
    b = explorer.make_input("normal", 3, 40, seed=1, std=2.0)
    assert np.allclose(as64(b), 2 * as64(a), rtol=1e-6, atol=1e-6)


def test_numpy_integer_shape_accepted():
    x = explorer.make_input("normal", np.int64(3), np.int32(4))
    assert x.shape == (3, 4)


# ---------------------------------------------------------------- make_input: bad arguments


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(params=dict(mean=10**400)),
        dict(params=dict(mean=10**5000)),  # past Python's 4,300 digits for text
        dict(params=dict(mean="9" * 1000)),
        dict(distribution="x" * 1000),
        dict(dtype="f" * 1000),
        dict(rows=10**400),
        dict(params={"y" * 1000: 1.0}),
    ],
)
def test_make_input_quotes_a_huge_value_cut_short(kwargs):
    message = make_input_refusal(kwargs)
    assert len(message) < 200 and not re.search(r"(.)\1{40}", message), message  # the value is cut, not echoed


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        (dict(distribution="gaussian"), ["unknown distribution", "gaussian", "normal"]),
        (dict(dtype="float64"), ["unknown dtype", "float64", "bfloat16"]),
        (dict(dtype="int8"), ["unknown dtype", "int8"]),
        (dict(rows=0), ["rows", "at least 1", "0"]),
        (dict(cols=0), ["cols", "at least 1", "0"]),
        (dict(rows=-3), ["rows", "at least 1", "-3"]),
        (dict(rows=2.5), ["rows", "whole number", "2.5"]),
        (dict(cols=4.0), ["cols", "whole number", "4.0"]),
        (dict(cols="8"), ["cols", "whole number", "'8'"]),
        (dict(rows=True), ["rows", "whole number", "True"]),
        (dict(cols=None), ["cols", "whole number", "None"]),
        (dict(rows=2**31), ["rows", "2^31"]),
        (dict(params=dict(sigma=1.0)), ["normal takes", "mean", "std", "sigma"]),
        (dict(distribution="constant", params=dict(mean=1.0)), ["constant takes", "value", "mean"]),
        (dict(params=dict(std=-1.0)), ["std=-1.0", "outside", "[0.0, 50.0]"]),
        (dict(params=dict(mean=51.0)), ["mean=51.0", "outside", "[-50.0, 50.0]"]),
        (dict(params=dict(std=float("nan"))), ["std=nan", "outside"]),
        (dict(params=dict(std=float("inf"))), ["std=inf", "outside"]),
        (dict(params=dict(std="wide")), ["std", "must be a number", "'wide'"]),
        (dict(params=dict(std=None)), ["std", "must be a number", "None"]),
        (dict(distribution="nonfinite", params=dict(rate=0.5)), ["rate=0.5", "outside", "0.3"]),
        (dict(distribution="large", params=dict(scale=0.5)), ["scale=0.5", "outside"]),
        (dict(distribution=["normal"]), ["unknown distribution", "['normal']"]),
        (dict(dtype=["float32"]), ["unknown dtype", "['float32']"]),
        (dict(dtype=np.float32), ["unknown dtype"]),
        (dict(params=dict(mean=10**400)), ["mean", "must be a number"]),
        (dict(rows=2**31 - 1, cols=2**31 - 1, params=dict(std=-1.0)), ["std=-1.0"]),  # arguments before size
    ],
)
def test_make_input_rejects_bad_arguments(kwargs, words):
    message = make_input_refusal(kwargs)
    for word in words:
        assert word in message, (word, message)


@pytest.mark.parametrize("shape", [(100000, 100000), (2**31 - 1, 2**31 - 1), (2**20, 2**20)])
def test_make_input_refuses_large_shapes_before_allocating(monkeypatch, shape):
    monkeypatch.setattr(np, "empty", lambda *a, **k: pytest.fail("allocated"))
    with pytest.raises(explorer.TooLarge, match=r"elements .* over this server's limit of 2,147,483,647 elements"):
        explorer.make_input("normal", *shape)


def test_make_input_memory_guard(monkeypatch):
    monkeypatch.setenv("EXPLORER_RUN_BUDGET_BYTES", str(10**6))
    with pytest.raises(
        explorer.TooLarge,
        match=r"this server's limit of .* for one run \(about [\d,]+ elements fit\); choose a smaller",
    ) as info:
        explorer.make_input("normal", 1000, 1000)
    assert "1000×1000 = 1,000,000 elements" in str(info.value)
    assert explorer.make_input("normal", 10, 10).shape == (10, 10)


@pytest.mark.parametrize("dist", ALL_DISTRIBUTIONS)
def test_make_input_generates_in_batches_of_rows(monkeypatch, dist):
    """Batches of 2 rows: the generator never sees more, rows keep their place (the causal mask's
    diagonal, the masked leading rows), and the result is finite where one batch's is."""
    from explorer import inputs

    whole = explorer.make_input(dist, 7, 5, "float16", seed=3)
    seen = []
    generate = inputs.DISTRIBUTIONS[dist].generate
    monkeypatch.setattr(inputs, "BATCH_ELEMENTS", 10)
    monkeypatch.setitem(
        inputs.DISTRIBUTIONS,
        dist,
        dataclasses.replace(
            inputs.DISTRIBUTIONS[dist],
            generate=lambda rng, first, rows, cols, **p: seen.append(rows) or generate(rng, first, rows, cols, **p),
        ),
    )
    params = {"masked_rows": 3.0} if dist == "causal_mask" else {}
    batched = explorer.make_input(dist, 7, 5, "float16", seed=3, **params)
    assert seen == [2, 2, 2, 1] and batched.dtype == np.float16
    if dist in DETERMINISTIC | {"normal", "uniform", "large"}:  # one stream of draws: equal to one batch
        assert same_bits(batched, whole)
    if dist == "causal_mask":
        assert np.isneginf(batched[:3]).all()
        keep = np.arange(5)[None, :] <= (np.arange(7) % 5)[:, None]
        assert np.array_equal(np.isfinite(batched[3:]), keep[3:])


@pytest.mark.parametrize("seed", [-1, -(2**40), 1.5, "a", None, True, [1, 2]])
def test_make_input_rejects_bad_seeds_with_invalid_input(seed):
    with pytest.raises(explorer.InvalidInput, match="seed") as info:
        explorer.make_input("normal", 2, 3, seed=seed)
    assert repr(seed) in str(info.value)


@pytest.mark.parametrize("seed", [0, 2**63, np.int64(5), np.uint32(7)])
def test_make_input_accepts_whole_number_seeds(seed):
    a = explorer.make_input("normal", 2, 3, seed=seed)
    assert same_bits(a, explorer.make_input("normal", 2, 3, seed=int(seed)))


# ---------------------------------------------------------------- load_logits


def npy_bytes(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=True)
    return buf.getvalue()


def csv_bytes(a: np.ndarray) -> bytes:
    buf = io.StringIO()
    np.savetxt(buf, np.atleast_2d(a), delimiter=",", fmt="%.17g")
    return buf.getvalue().encode()


@pytest.mark.parametrize("dtype", list(DTYPE_OBJECTS))
@pytest.mark.parametrize("shape", [(1, 1), (3, 33), (17, 5)])
def test_npy_round_trip(dtype, shape):
    rng = np.random.default_rng(zlib.crc32(repr((dtype, shape)).encode()))
    a = rng.normal(0, 3, shape).astype(DTYPE_OBJECTS[dtype])
    # saved in the target dtype's own bits (bfloat16 goes through float32, which holds it exactly)
    saved = a.astype(np.float32) if dtype == "bfloat16" else a
    got = explorer.load_logits(npy_bytes(saved), "logits.npy", dtype=dtype)
    assert got.dtype == DTYPE_OBJECTS[dtype] and got.shape == shape
    assert same_bits(got, a)
    assert got.flags.c_contiguous


@pytest.mark.parametrize("dtype", list(DTYPE_OBJECTS))
def test_npy_float64_rounds_once_to_target(dtype):
    a = np.random.default_rng(1).normal(0, 1, (4, 9))
    got = explorer.load_logits(npy_bytes(a), "x.NPY", dtype=dtype)
    assert same_bits(got, a.astype(DTYPE_OBJECTS[dtype]))


@pytest.mark.parametrize("src", [np.int32, np.int64, np.uint8, np.bool_])
def test_npy_integer_and_bool_arrays_become_floats(src):
    a = (np.arange(12).reshape(3, 4) % 3).astype(src)
    got = explorer.load_logits(npy_bytes(a), "x.npy")
    assert got.dtype == np.float32
    assert np.array_equal(got, a.astype(np.float64).astype(np.float32))


def test_npy_fortran_order_is_made_contiguous():
    a = np.asfortranarray(np.arange(12.0).reshape(3, 4))
    got = explorer.load_logits(npy_bytes(a), "x.npy")
    assert got.flags.c_contiguous and np.array_equal(got, a.astype(np.float32))


@pytest.mark.parametrize("dtype", list(DTYPE_OBJECTS))
@pytest.mark.parametrize("shape", [(1, 1), (2, 7), (9, 3)])
def test_csv_round_trip(dtype, shape):
    rng = np.random.default_rng(sum(shape))
    a = rng.normal(0, 2, shape).astype(DTYPE_OBJECTS[dtype])
    got = explorer.load_logits(csv_bytes(as64(a)), "logits.csv", dtype=dtype)
    assert got.shape == shape and got.dtype == DTYPE_OBJECTS[dtype]
    assert same_bits(got, a)


def test_csv_with_nonfinite_tokens():
    got = explorer.load_logits(b"1.5,nan,inf,-inf\n", "x.csv")
    assert got.shape == (1, 4)
    assert got[0, 0] == 1.5 and np.isnan(got[0, 1]) and got[0, 2] == np.inf and got[0, 3] == -np.inf


@pytest.mark.parametrize("kind", ["npy", "csv"])
@pytest.mark.parametrize("n", [1, 5, 4097])
def test_one_dimensional_becomes_one_row(kind, n):
    a = np.linspace(-2, 2, n)
    data = npy_bytes(a) if kind == "npy" else (",".join(f"{v:.17g}" for v in a) + "\n").encode()
    got = explorer.load_logits(data, f"v.{kind}")
    assert got.shape == (1, n)
    assert np.array_equal(got[0], a.astype(np.float32))


def test_csv_column_vector_is_one_row_per_line():
    got = explorer.load_logits(b"1\n2\n3\n", "x.csv")
    # a single column is read as a vector; whichever orientation, it stays 2-D and keeps the values in order
    assert got.ndim == 2 and 1 in got.shape
    assert np.array_equal(got.ravel(), np.array([1, 2, 3], np.float32))


@pytest.mark.parametrize(
    ("dtype", "data", "filename", "words"),
    [
        ("float16", npy_bytes(np.array([[1.0, 1e6, -1e6]])), "x.npy", "2 finite value(s) are beyond float16's range"),
        ("bfloat16", b"1,2\n3,3.4e38\n", "x.csv", "x[1, 1] = 3.4e+38; choose float32"),
        ("float32", npy_bytes(np.array([1e300, 0.0])), "x.npy", "x[0, 0] = 1e+300; scale the logits down"),
        ("float32", b"1,1e400,2\n", "x.csv", "x.csv: line 1, value 2 ('1e400') is beyond float64's range"),
        ("float16", b"# logits\n1,2\n\n-1E+999,inf\n", "x.csv", "line 4, value 1 ('-1E+999')"),
    ],
)
def test_finite_values_beyond_the_dtypes_range_are_refused_not_made_inf(dtype, data, filename, words):
    """The float64 reference would be of ±inf, not of the file's numbers: the upload is refused, in words."""
    with pytest.raises(explorer.InvalidInput, match="would become ±inf") as refused:
        explorer.load_logits(data, filename, dtype=dtype)
    assert words in str(refused.value)


def test_infinities_in_the_file_stay_infinities_at_the_dtypes_edge():
    top = float(np.finfo(np.float16).max)
    got = explorer.load_logits(npy_bytes(np.array([[top, -np.inf, np.inf, 1.0]])), "x.npy", dtype="float16")
    assert got[0, 0] == top and got[0, 1] == -np.inf and got[0, 2] == np.inf and got[0, 3] == 1.0


def assert_invalid(data: bytes, filename: str, *words: str, **kwargs):
    with pytest.raises(explorer.InvalidInput) as info:
        explorer.load_logits(data, filename, **kwargs)
    message = str(info.value)
    for word in words:
        assert word in message, (word, message)
    return message


PICKLE_ADVICE = ("allow_pickle", "pickle")


@pytest.mark.parametrize("a", [np.array([{"evil": 1}, [1, 2]], dtype=object), np.array([1.0, 2.0], dtype=object)])
def test_object_arrays_refused_in_our_words(a):
    msg = assert_invalid(npy_bytes(a), "x.npy", "x.npy", "not a NumPy array file", "np.save")
    assert not any(word in msg for word in PICKLE_ADVICE), msg


def test_header_shape_is_checked_before_loading(monkeypatch):
    """A 192-byte file whose header claims 100000 × 100000: refused from the header, nothing allocated."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": (100000, 100000)})
    data = header.getvalue() + bytes(192 - len(header.getvalue()))
    assert len(data) == 192
    msg = assert_invalid(data, "liar.npy", "liar.npy", "shorter than its header says", "(100000, 100000)")
    assert "allow_pickle" not in msg
    # a complete file over this server's limit is refused from its header, before np.load reads it
    monkeypatch.setenv("EXPLORER_MAX_ELEMENTS", "11")
    monkeypatch.setattr(np, "load", lambda *a, **k: pytest.fail("np.load ran"))
    with pytest.raises(explorer.TooLarge, match=r"3×4 = 12 elements .* over this server's limit of 11 elements"):
        explorer.load_logits(npy_bytes(np.zeros((3, 4))), "big.npy")


@pytest.mark.parametrize("data", [np.float64(1.0).tobytes(), b"\x93NUMPY\x03\x00" + b"\x00" * 20, b"PK\x03\x04"])
def test_not_npy_refused_in_our_words(data):
    assert_invalid(data, "x.npy", "not a NumPy array file")


@pytest.mark.parametrize(
    ("data", "filename"),
    [("1,2,3", "x.csv"), (None, "x.csv"), (b"1,2", None), (b"1,2", b"x.csv"), (np.zeros(3), "x.csv")],
)
def test_wrong_python_types_are_invalid_input(data, filename):
    with pytest.raises(explorer.InvalidInput, match=r"data must be|filename must be"):
        explorer.load_logits(data, filename)


@pytest.mark.parametrize("dtype", [[], None, np.float32, "float64"])
def test_load_logits_unknown_dtype(dtype):
    with pytest.raises(explorer.InvalidInput, match="unknown dtype"):
        explorer.load_logits(b"1,2\n", "x.csv", dtype=dtype)


def test_three_d_refused():
    msg = assert_invalid(npy_bytes(np.zeros((2, 3, 4))), "cube.npy", "cube.npy", "(2, 3, 4)")
    assert "vector" in msg or "rows" in msg


def test_zero_d_refused():
    assert_invalid(npy_bytes(np.array(3.0)), "s.npy", "s.npy", "()")


@pytest.mark.parametrize("shape", [(0,), (0, 5), (3, 0)])
def test_empty_npy_refused(shape):
    assert_invalid(
        npy_bytes(np.zeros(shape)), "e.npy", "e.npy", f"empty: it holds no numbers; its array has shape {shape}"
    )


@pytest.mark.parametrize("data", [b"", b"\n\n"])
def test_empty_csv_refused(data):
    with pytest.warns(UserWarning):  # numpy warns about an empty file; the explorer must still refuse it
        assert_invalid(data, "e.csv", "e.csv", "e.csv is empty: it holds no numbers")


@pytest.mark.parametrize("data", [b"a,b,c\n", b"1,2\n3,x\n", b"1,2\n3\n", b"1;2;3\n"])
def test_non_numeric_csv_refused(data):
    assert_invalid(data, "bad.csv", "bad.csv", "could not be read as numbers")


def test_non_utf8_csv_refused():
    assert_invalid(b"\xff\xfe1,2\n", "bad.csv", "bad.csv", "could not be read")


NUMPY_WORDS = ("usecols", "codec", "float64", "convert", "loadtxt", "0x")  # NumPy's and Python's, not ours


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"1,2,3\n4,5\n", ["rows have different numbers of values", "line 2 has 2", "the first row 3"]),
        (b"1,2\n\n# a note\n3,4,5\n", ["rows have different numbers of values", "line 4 has 3"]),
        ("1,2\nä,3\n".encode("latin-1"), ["not UTF-8 text", "byte 5", "save it as a UTF-8 CSV"]),
        (b"1,2\n3,x\n", ["line 2, value 2 is 'x', not a number", "separated by commas"]),
        (b"a,b,c\n", ["line 1, value 1 is 'a', not a number"]),
        (b"1;2;3\n", ["line 1, value 1 is '1;2;3', not a number", "separated by commas"]),
        (b"1,2,\n", ["line 1, value 3 is empty"]),
        (b"1_000,2\n", ["'1_000', not a number"]),
    ],
)
def test_a_csv_that_is_not_numbers_is_refused_in_our_words(data, words):
    msg = assert_invalid(data, "bad.csv", "bad.csv could not be read", *words)
    assert not [w for w in NUMPY_WORDS if w in msg], msg


def test_a_csv_with_a_byte_order_mark_loads():
    assert explorer.load_logits(b"\xef\xbb\xbf1,2,3\n", "bom.csv").tolist() == [[1.0, 2.0, 3.0]]


def test_a_huge_value_in_a_csv_is_quoted_cut_short():
    msg = assert_invalid(b"1," + b"z" * 5000 + b"\n", "bad.csv", "not a number", "(5002 characters)")
    assert len(msg) < 300


@pytest.mark.parametrize("a", [np.array(["a", "b"]), np.array([1 + 2j, 3j]), np.zeros(2, dtype="M8[s]")])
def test_non_number_npy_refused(a):
    msg = assert_invalid(npy_bytes(a), "w.npy", "w.npy")
    assert "numbers" in msg


@pytest.mark.parametrize("missing", [1, 7, 160])  # a byte, part of a value, every value
def test_truncated_npy_refused(missing):
    """Said to be cut off, from the header and the file's length: not NumPy's words, nor only 'could not be read'."""
    data = npy_bytes(np.ones((4, 5)))
    msg = assert_invalid(data[:-missing], "t.npy", "t.npy could not be read", "shorter than its header says")
    assert "(4, 5), float64" in msg and "cut off" in msg
    assert explorer.load_logits(data, "t.npy").shape == (4, 5)  # the whole file is not


def test_npy_format_version_2_loads():
    """np.save writes version 2.0 where a header passes 64 KiB; the header is read by its version."""
    a = np.arange(12.0).reshape(3, 4)
    buf = io.BytesIO()
    np.lib.format.write_array(buf, a, version=(2, 0))
    data = buf.getvalue()
    assert data[6:8] == bytes([2, 0])
    assert np.array_equal(explorer.load_logits(data, "v2.npy"), a.astype(np.float32))


def test_garbage_npy_refused():
    assert_invalid(b"this is not an npy file at all", "g.npy", "g.npy", "could not be read")


def test_npz_archive_named_npy_refused():
    buf = io.BytesIO()
    np.savez(buf, a=np.ones(3))
    assert_invalid(buf.getvalue(), "z.npy", "z.npy")


@pytest.mark.parametrize("max_bytes", [-1, 1.5, "64", None, True, 2.0**40])
def test_load_logits_refuses_a_max_bytes_that_is_not_a_whole_number_of_bytes(max_bytes):
    assert_invalid(b"1,2\n", "x.csv", "max_bytes must be a whole number >= 0", repr(max_bytes), max_bytes=max_bytes)


def test_max_bytes_zero_refuses_every_non_empty_file():
    assert_invalid(b"1\n", "x.csv", "x.csv is 2 bytes; the limit is 0 bytes", max_bytes=0)


@pytest.mark.parametrize(
    ("setting", "value", "words"),
    [
        ("EXPLORER_MAX_ELEMENTS", "11", r"3×4 = 12 elements .* over this server's limit of 11 elements"),
        (
            "EXPLORER_RUN_BUDGET_BYTES",
            "90",
            r"3×4 = 12 elements needs about 96 bytes .* over this server's limit of 90",
        ),
    ],
)
def test_a_csv_over_this_servers_limits_is_refused(monkeypatch, setting, value, words):
    """A CSV has no header to read its shape from: it is refused once parsed, by the same limits as an .npy."""
    monkeypatch.setenv(setting, value)
    data = b"1,2,3,4\n5,6,7,8\n9,10,11,12\n"
    with pytest.raises(explorer.TooLarge, match=words):
        explorer.load_logits(data, "big.csv")
    monkeypatch.setenv(setting, "100000")
    assert explorer.load_logits(data, "big.csv").shape == (3, 4)


def test_over_limit_refused_before_parsing():
    data = npy_bytes(np.zeros((64, 64)))
    msg = assert_invalid(data, "big.npy", "big.npy", "limit", max_bytes=len(data) - 1000)
    assert "KiB" in msg
    # exactly at the limit is fine
    assert explorer.load_logits(data, "big.npy", max_bytes=len(data)).shape == (64, 64)


def test_one_byte_over_the_limit_shows_exact_bytes():
    """Rounded, 64 MiB + 1 byte and 64 MiB look equal: the message gives both in bytes."""
    limit = 64 * 2**20
    msg = assert_invalid(b"0" * (limit + 1), "huge.csv", "huge.csv", f"{limit + 1:,} bytes", f"{limit:,} bytes")
    assert "64.00 MiB" in msg  # the limit in round figures too
    msg = assert_invalid(b"0" * (2 * limit), "huge.csv", "huge.csv", "128.00 MiB", "64.00 MiB")
    assert "bytes" not in msg  # figures that differ need no exact bytes


@pytest.mark.parametrize("name", ["x.txt", "x.json", "x", "x.npz", "x.npy.exe", "x.tsv"])
def test_wrong_extension_refused(name):
    assert_invalid(b"1,2,3\n", name, name, ".npy", ".csv")


def test_unknown_dtype_refused():
    assert_invalid(b"1,2\n", "x.csv", "unknown dtype", "float64", dtype="float64")


# ---------------------------------------------------------------- the memory each admits by


def admitted_and_peak(monkeypatch, call) -> tuple[list[int], int]:
    """The bytes `call` was admitted for (every `need` it passed to check_memory, in order) and its measured peak
    (tracemalloc: NumPy reports its buffers to it)."""
    import tracemalloc

    from explorer import inputs

    needs, check = [], inputs.check_memory
    monkeypatch.setattr(
        inputs, "check_memory", lambda r, c, i, need, *a, **k: needs.append(need) or check(r, c, i, need, *a, **k)
    )
    tracemalloc.start()
    try:
        call()
        return needs, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("dist", ALL_DISTRIBUTIONS)
@pytest.mark.parametrize("shape", [(64, 4096), (1, 2**21)])  # rows in batches; one row longer than a batch
def test_make_input_is_admitted_for_at_least_what_it_takes(monkeypatch, dist, dtype, shape):
    """make_input asks check_memory for its output and one batch's float64 draws and masks before it allocates:
    never less than its measured peak (a server would run out of memory it promised), nor a gross over-estimate
    (the limit would refuse shapes that fit)."""
    needs, peak = admitted_and_peak(monkeypatch, lambda: explorer.make_input(dist, *shape, dtype=dtype, seed=1))
    assert len(needs) == 1
    assert peak <= needs[0] <= 6 * peak, needs[0] / peak


@pytest.mark.parametrize("source", [np.float64, np.float16, np.int8, np.bool_])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_an_npy_upload_is_admitted_from_its_header_for_at_least_what_loading_it_takes(monkeypatch, source, dtype):
    buf = io.BytesIO()
    np.save(buf, np.ones((64, 4096), source))
    data = buf.getvalue()
    needs, peak = admitted_and_peak(monkeypatch, lambda: explorer.load_logits(data, "x.npy", dtype=dtype))
    assert peak <= needs[0] <= 2 * peak, needs[0] / peak  # the first: from the header, before np.load

"""Input distributions (each one chosen to show something) and parsing of uploaded logits."""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .errors import InvalidInput
from .numerics import DTYPES

MAX_UPLOAD_BYTES = 64 * 2**20


@dataclass(frozen=True)
class Param:
    default: float
    low: float
    high: float
    help: str


@dataclass(frozen=True)
class Distribution:
    key: str
    title: str
    shows: str  # what this input makes visible
    generate: Callable[..., np.ndarray]  # (rng, rows, cols, **params) -> float64 array
    params: dict[str, Param] = field(default_factory=dict)


def _normal(rng, rows, cols, mean, std):
    return rng.normal(mean, std, (rows, cols))


def _uniform(rng, rows, cols, low, high):
    return rng.uniform(min(low, high), max(low, high), (rows, cols))


def _large(rng, rows, cols, scale):
    return rng.normal(0.0, scale, (rows, cols))


def _decreasing(rng, rows, cols, spread):
    return np.broadcast_to(np.linspace(0.0, -spread, cols), (rows, cols)).copy()


def _increasing(rng, rows, cols, spread):
    return np.broadcast_to(np.linspace(-spread, 0.0, cols), (rows, cols)).copy()


def _spike(rng, rows, cols, height):
    x = rng.normal(0.0, 0.1, (rows, cols))
    x[np.arange(rows), rng.integers(0, cols, rows)] = height
    return x


def _zipf(rng, rows, cols, top, slope, noise):
    ranks = np.argsort(rng.random((rows, cols)), axis=1) + 1.0  # a random permutation of 1..cols per row
    return top - slope * np.log(ranks) + rng.normal(0.0, noise, (rows, cols))


def _constant(rng, rows, cols, value):
    return np.full((rows, cols), value)


def _causal_mask(rng, rows, cols, masked_rows):
    x = rng.normal(0.0, 1.0, (rows, cols))
    x[np.arange(cols)[None, :] > (np.arange(rows) % cols)[:, None]] = -np.inf
    x[: int(min(masked_rows, rows))] = -np.inf
    return x


def _nonfinite(rng, rows, cols, rate):
    x = rng.normal(0.0, 1.0, (rows, cols))
    kind = rng.choice(4, size=(rows, cols), p=[1 - 3 * rate, rate, rate, rate])
    x[kind == 1] = np.nan
    x[kind == 2] = np.inf
    x[kind == 3] = -np.inf
    return x


DISTRIBUTIONS: dict[str, Distribution] = {
    d.key: d
    for d in [
        Distribution("normal", "Normal", "the everyday case", _normal,
                     {"mean": Param(0.0, -50.0, 50.0, "mean"), "std": Param(1.0, 0.0, 50.0, "standard deviation")}),
        Distribution("uniform", "Uniform", "bounded logits", _uniform,
                     {"low": Param(-1.0, -100.0, 100.0, "lower end"), "high": Param(1.0, -100.0, 100.0, "upper end")}),
        Distribution("large", "Large magnitude", "e^x overflows: naive returns inf/NaN", _large,
                     {"scale": Param(100.0, 1.0, 10000.0, "standard deviation; > 88.7 overflows fp32 exp")}),
        Distribution("decreasing", "Monotone decreasing", "the max never changes: rescale factor always 1, "
                     "the seed's worst case for the error bound", _decreasing,
                     {"spread": Param(1.0, 0.0, 100.0, "x runs from 0 down to -spread")}),
        Distribution("increasing", "Monotone increasing", "a new max at every step: a rescale every time",
                     _increasing, {"spread": Param(10.0, 0.0, 100.0, "x runs from -spread up to 0")}),
        Distribution("spike", "Spike (near one-hot)", "one logit dominates", _spike,
                     {"height": Param(10.0, -100.0, 100.0, "height of the spike over N(0, 0.1) noise")}),
        Distribution("zipf", "Zipf-like LLM logits", "a few large logits, a long tail, as an LM head gives", _zipf,
                     {"top": Param(20.0, -50.0, 100.0, "largest logit"), "slope": Param(3.0, 0.0, 20.0, "decay per log rank"),
                      "noise": Param(0.5, 0.0, 10.0, "Gaussian noise")}),
        Distribution("constant", "Constant", "every term equal: fp16 d stagnates at 2048", _constant,
                     {"value": Param(1.0, -100.0, 100.0, "the value of every logit")}),
        Distribution("causal_mask", "Causal -inf mask", "row i keeps elements 0..i: -inf must give exactly 0",
                     _causal_mask, {"masked_rows": Param(0.0, 0.0, 1e9, "leading rows masked entirely (they give NaN)")}),
        Distribution("nonfinite", "Sprinkled NaN / ±inf", "non-finite inputs: NaN and +inf poison their row",
                     _nonfinite, {"rate": Param(0.001, 0.0, 0.3, "probability of each of NaN, +inf, -inf")}),
    ]
}


def _check_shape(rows, cols) -> tuple[int, int]:
    for name, value in (("rows", rows), ("cols", cols)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise InvalidInput(f"{name} must be a whole number, got {value!r}")
        if value < 1:
            raise InvalidInput(f"{name} must be at least 1, got {value}")
        if value > 2**31 - 1:
            raise InvalidInput(f"{name} must be below 2^31, got {value}")
    return int(rows), int(cols)


def make_input(distribution: str, rows: int, cols: int, dtype: str = "float32", seed: int = 0, **params) -> np.ndarray:
    """A rows × cols array of logits from a named distribution, reproducible for a given seed.

    Parameters
    ----------
    distribution : a key of DISTRIBUTIONS.
    dtype : "float32", "float16" or "bfloat16" (an ml_dtypes.bfloat16 array).
    params : the distribution's parameters (see DISTRIBUTIONS[key].params); missing ones take defaults.
    """
    if distribution not in DISTRIBUTIONS:
        raise InvalidInput(f"unknown distribution {distribution!r}; choose one of {', '.join(DISTRIBUTIONS)}")
    if dtype not in DTYPES:
        raise InvalidInput(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
    rows, cols = _check_shape(rows, cols)
    dist = DISTRIBUTIONS[distribution]
    unknown = set(params) - set(dist.params)
    if unknown:
        raise InvalidInput(f"{distribution} takes {', '.join(dist.params) or 'no parameters'}, not {', '.join(sorted(unknown))}")
    values = {}
    for name, spec in dist.params.items():
        value = params.get(name, spec.default)
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise InvalidInput(f"parameter {name} must be a number, got {value!r}") from None
        if not spec.low <= value <= spec.high:
            raise InvalidInput(f"parameter {name}={value} is outside [{spec.low}, {spec.high}]")
        values[name] = value
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise InvalidInput(f"seed must be a whole number >= 0, got {seed!r}")
    rng = np.random.default_rng(seed)
    with np.errstate(over="ignore"):
        return dist.generate(rng, rows, cols, **values).astype(DTYPES[dtype])


def load_logits(data: bytes, filename: str, dtype: str = "float32", max_bytes: int = MAX_UPLOAD_BYTES) -> np.ndarray:
    """Parse uploaded logits (.npy or .csv; 1-D is one row) as data only, never as code."""
    if len(data) > max_bytes:
        raise InvalidInput(f"{filename} is {len(data) / 2**20:.1f} MiB; the limit is {max_bytes / 2**20:.0f} MiB")
    if dtype not in DTYPES:
        raise InvalidInput(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
    name = filename.lower()
    try:
        if name.endswith(".npy"):
            array = np.load(io.BytesIO(data), allow_pickle=False)
        elif name.endswith(".csv"):
            array = np.loadtxt(io.StringIO(data.decode("utf-8")), delimiter=",", dtype=np.float64, ndmin=1)
        else:
            raise InvalidInput(f"{filename}: upload a .npy or .csv file")
    except InvalidInput:
        raise
    except (ValueError, UnicodeDecodeError, EOFError, OSError) as exc:
        raise InvalidInput(f"{filename} could not be read as numbers: {exc}") from None
    if not isinstance(array, np.ndarray):  # an .npz archive, say
        raise InvalidInput(f"{filename} holds {type(array).__name__}, not one array; save it with np.save")
    if array.dtype.kind not in "fiub":
        raise InvalidInput(f"{filename} holds {array.dtype} values; numbers are needed")
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2:
        raise InvalidInput(f"{filename} has shape {array.shape}; give a vector or a rows × cols matrix")
    if array.size == 0:
        raise InvalidInput(f"{filename} is empty (shape {array.shape})")
    with np.errstate(over="ignore"):
        return np.ascontiguousarray(array.astype(np.float64).astype(DTYPES[dtype]))

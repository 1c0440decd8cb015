"""Input distributions (each one chosen to show something) and parsing of uploaded logits."""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from .checks import check_dtype, check_memory, check_shape, sizes, whole
from .errors import ExplorerError, InvalidInput, shown
from .numerics import DTYPES, FORMATS

MAX_UPLOAD_BYTES = 64 * 2**20
BATCH_ELEMENTS = 2**20  # make_input generates in float64 this many elements (whole rows) at a time
TEMPORARY_BYTES = 48  # per element of a batch: the float64 draws and the generators' masks and indices


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
    # (rng, first, rows, cols, **params) -> float64 rows × cols: rows first, first + 1, ... of the input
    generate: Callable[..., np.ndarray]
    params: dict[str, Param] = field(default_factory=dict)


def _normal(rng, first, rows, cols, mean, std):
    return rng.normal(mean, std, (rows, cols))


def _uniform(rng, first, rows, cols, low, high):
    return rng.uniform(min(low, high), max(low, high), (rows, cols))


def _large(rng, first, rows, cols, scale):
    return rng.normal(0.0, scale, (rows, cols))


def _decreasing(rng, first, rows, cols, spread):
    return np.broadcast_to(np.linspace(0.0, -spread, cols), (rows, cols)).copy()


def _increasing(rng, first, rows, cols, spread):
    return np.broadcast_to(np.linspace(-spread, 0.0, cols), (rows, cols)).copy()


def _spike(rng, first, rows, cols, height):
    x = rng.normal(0.0, 0.1, (rows, cols))
    x[np.arange(rows), rng.integers(0, cols, rows)] = height
    return x


def _zipf(rng, first, rows, cols, top, slope, noise):
    ranks = np.argsort(rng.random((rows, cols)), axis=1) + 1.0  # a random permutation of 1..cols per row
    return top - slope * np.log(ranks) + rng.normal(0.0, noise, (rows, cols))


def _constant(rng, first, rows, cols, value):
    return np.full((rows, cols), value)


def _causal_mask(rng, first, rows, cols, masked_rows):
    x = rng.normal(0.0, 1.0, (rows, cols))
    row = np.arange(first, first + rows)
    x[np.arange(cols)[None, :] > (row % cols)[:, None]] = -np.inf
    x[row < masked_rows] = -np.inf
    return x


def _nonfinite(rng, first, rows, cols, rate):
    x = rng.normal(0.0, 1.0, (rows, cols))
    kind = rng.choice(4, size=(rows, cols), p=[1 - 3 * rate, rate, rate, rate])
    x[kind == 1] = np.nan
    x[kind == 2] = np.inf
    x[kind == 3] = -np.inf
    return x


DISTRIBUTIONS: dict[str, Distribution] = {
    d.key: d
    for d in [
        Distribution(
            "normal",
            "Normal",
            "the everyday case",
            _normal,
            {"mean": Param(0.0, -50.0, 50.0, "mean"), "std": Param(1.0, 0.0, 50.0, "standard deviation")},
        ),
        Distribution(
            "uniform",
            "Uniform",
            "bounded logits",
            _uniform,
            {"low": Param(-1.0, -100.0, 100.0, "lower end"), "high": Param(1.0, -100.0, 100.0, "upper end")},
        ),
        Distribution(
            "large",
            "Large magnitude",
            "e^x overflows: naive returns inf/NaN",
            _large,
            {"scale": Param(100.0, 1.0, 10000.0, "standard deviation; > 88.7 overflows fp32 exp")},
        ),
        Distribution(
            "decreasing",
            "Monotone decreasing",
            "the max never changes: rescale factor always 1, the worst case for the 3·n·u error bound",
            _decreasing,
            {"spread": Param(1.0, 0.0, 100.0, "x runs from 0 down to -spread")},
        ),
        Distribution(
            "increasing",
            "Monotone increasing",
            "a new max at every step: a rescale every time",
            _increasing,
            {"spread": Param(10.0, 0.0, 100.0, "x runs from -spread up to 0")},
        ),
        Distribution(
            "spike",
            "Spike (near one-hot)",
            "one logit dominates",
            _spike,
            {"height": Param(10.0, -100.0, 100.0, "height of the spike over N(0, 0.1) noise")},
        ),
        Distribution(
            "zipf",
            "Zipf-like LLM logits",
            "a few large logits, a long tail, as an LM head gives",
            _zipf,
            {
                "top": Param(20.0, -50.0, 100.0, "largest logit"),
                "slope": Param(3.0, 0.0, 20.0, "decay per log rank"),
                "noise": Param(0.5, 0.0, 10.0, "Gaussian noise"),
            },
        ),
        Distribution(
            "constant",
            "Constant",
            "every term equal: fp16 d stagnates at 2048",
            _constant,
            {"value": Param(1.0, -100.0, 100.0, "the value of every logit")},
        ),
        Distribution(
            "causal_mask",
            "Causal -inf mask",
            "row i keeps elements 0..i: -inf must give exactly 0",
            _causal_mask,
            {"masked_rows": Param(0.0, 0.0, 1e9, "leading rows masked entirely (they give NaN)")},
        ),
        Distribution(
            "nonfinite",
            "Sprinkled NaN / ±inf",
            "non-finite inputs: NaN and +inf poison their row",
            _nonfinite,
            {"rate": Param(0.001, 0.0, 0.3, "probability of each of NaN, +inf, -inf")},
        ),
    ]
}


def make_input(distribution: str, rows: int, cols: int, dtype: str = "float32", seed: int = 0, **params) -> np.ndarray:
    """A rows × cols array of logits from a named distribution, reproducible for a given seed.

    Parameters
    ----------
    distribution : a key of DISTRIBUTIONS.
    dtype : "float32", "float16" or "bfloat16" (an ml_dtypes.bfloat16 array).
    params : the distribution's parameters (see DISTRIBUTIONS[key].params); missing ones take defaults.

    Raises InvalidInput for an unknown name, a shape outside 1 … 2^31 - 1 or a parameter outside its
    range, TooLarge for a shape over this server's limit or the host's free memory (checked before
    anything is allocated).
    """
    if not isinstance(distribution, str) or distribution not in DISTRIBUTIONS:
        raise InvalidInput(f"unknown distribution {shown(distribution)}; choose one of {', '.join(DISTRIBUTIONS)}")
    check_dtype(dtype)
    rows, cols = check_shape(rows, cols)
    dist = DISTRIBUTIONS[distribution]
    unknown = set(params) - set(dist.params)
    if unknown:
        raise InvalidInput(
            f"{distribution} takes {', '.join(dist.params) or 'no parameters'}, "
            f"not {', '.join(shown(u, quoted=False) for u in sorted(unknown))}"
        )
    values = {}
    for name, spec in dist.params.items():
        given = params.get(name, spec.default)
        try:
            value = float(given)
        except (TypeError, ValueError, OverflowError):
            raise InvalidInput(
                f"parameter {name} must be a number from {spec.low} to {spec.high}, got {shown(given)}"
            ) from None
        if not spec.low <= value <= spec.high:  # quoted as given: 1e400, not the inf it became
            raise InvalidInput(f"parameter {name}={shown(given, quoted=False)} is outside [{spec.low}, {spec.high}]")
        values[name] = value
    if not whole(seed) or seed < 0:
        raise InvalidInput(f"seed must be a whole number >= 0, got {shown(seed)}")
    itemsize = DTYPES[dtype].itemsize
    batch = max(1, BATCH_ELEMENTS // cols)
    need = rows * cols * itemsize + min(rows, batch) * cols * TEMPORARY_BYTES
    check_memory(rows, cols, itemsize, need, "emulator", f"a {dtype} input")
    out = np.empty((rows, cols), DTYPES[dtype])
    rng = np.random.default_rng(seed)
    with np.errstate(over="ignore"):  # values past the dtype's range become ±inf
        for first in range(0, rows, batch):
            count = min(batch, rows - first)
            out[first : first + count] = dist.generate(rng, first, count, cols, **values)
    return out


NOT_AN_ARRAY = "it is not a NumPy array file, or it holds Python objects; save it with np.save from a numeric array"


def _npy_header(data: bytes, filename: str) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype from an .npy header, after checking that the file holds all the data it announces."""
    f = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(f)
        read = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}[version]
        shape, _fortran, dtype = read(f)
    except (ValueError, TypeError, KeyError, EOFError, OSError, SyntaxError, RecursionError):
        raise InvalidInput(f"{filename} could not be read: {NOT_AN_ARRAY}") from None
    if dtype.hasobject or dtype.fields is not None:
        raise InvalidInput(f"{filename} could not be read: {NOT_AN_ARRAY}")
    if dtype.kind not in "fiub":
        raise InvalidInput(f"{filename} holds {dtype} values; real numbers are needed")
    if len(shape) not in (1, 2):
        raise InvalidInput(f"{filename} has shape {shape}; give a vector or a rows × cols matrix")
    if len(data) - f.tell() < math.prod(shape) * dtype.itemsize:
        raise InvalidInput(
            f"{filename} could not be read: it is shorter than its header says "
            f"(shape {shape}, {dtype}); the file is cut off"
        )
    return shape, dtype


CSV_FORM = "it must hold numbers only, separated by commas, one row per line, every row with as many as the first"


def _csv(data: bytes, filename: str) -> np.ndarray:
    """A CSV file's numbers as float64 (1-D for one row), refused in our words: NumPy's own name its
    arguments (`usecols`) and codecs, which a user of the page cannot act on."""
    try:
        text = data.decode("utf-8-sig")  # the byte-order mark a spreadsheet may write is not a value
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            f"{filename} could not be read: it is not UTF-8 text (byte {exc.start + 1:,} is not valid UTF-8); "
            "save it as a UTF-8 CSV of numbers"
        ) from None
    try:
        values = np.loadtxt(io.StringIO(text), delimiter=",", dtype=np.float64, ndmin=1)
    except ValueError:
        raise InvalidInput(f"{filename} could not be read as numbers: {_csv_problem(text)}") from None
    if np.isinf(values).any() and (where := _beyond_float64(text)):  # 1e400 reads as inf, "inf" is one
        raise InvalidInput(
            f"{filename}: {where} is beyond float64's range (±{np.finfo(np.float64).max:.3g}) and would become "
            "±inf; scale the logits down"
        )
    return values


def _csv_lines(text: str) -> Iterator[tuple[int, list[str]]]:
    """(line number as an editor numbers it, its values) for each line np.loadtxt reads: after a # a line is a
    comment, and blank lines are skipped."""
    for number, line in enumerate(text.split("\n"), 1):
        line = line.split("#", 1)[0]
        if line.strip():
            yield number, line.split(",")


def _beyond_float64(text: str) -> str | None:
    """Where a CSV's first number too large for float64 is ("line 3, value 2 ('1e400')"), or None."""
    for number, values in _csv_lines(text):
        for column, value in enumerate(values, 1):
            word = value.strip()
            try:
                overflowed = math.isinf(float(word)) and word.lower().lstrip("+-") not in ("inf", "infinity")
            except ValueError:  # a form np.loadtxt reads and float() does not: not a number past float64
                continue
            if overflowed:
                return f"line {number:,}, value {column:,} ({shown(word)})"
    return None


def _csv_problem(text: str) -> str:
    """What np.loadtxt refused in a CSV, found again line by line as it reads them: the first row of another
    length, or the first value that is not a number."""
    first = None
    for number, values in _csv_lines(text):
        if first is None:
            first = len(values)
        if len(values) != first:
            return (
                f"rows have different numbers of values (line {number:,} has {len(values):,}, the first row "
                f"{first:,}); every row needs the same number of values"
            )
        for column, value in enumerate(values, 1):
            if not value.strip():
                return f"line {number:,}, value {column:,} is empty (two commas together, or one at the end)"
            try:
                float(value.replace("_", "?"))  # float() takes 1_000, loadtxt does not
            except ValueError:
                return f"line {number:,}, value {column:,} is {shown(value.strip())}, not a number; {CSV_FORM}"
    return CSV_FORM


def load_logits(data: bytes, filename: str, dtype: str = "float32", max_bytes: int = MAX_UPLOAD_BYTES) -> np.ndarray:
    """Parse uploaded logits (.npy or .csv; 1-D is one row) as data only, never as code.

    Raises InvalidInput for data that is not bytes, a filename that is not a str, a file over max_bytes,
    of another format, not holding a non-empty vector or matrix of numbers, or holding finite numbers beyond
    dtype's range (they would become ±inf); TooLarge for more elements than this server's limit or the host's
    free memory can take.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise InvalidInput(f"data must be the file's bytes, got {type(data).__name__}")
    if not isinstance(filename, str):
        raise InvalidInput(f"filename must be a str, got {type(filename).__name__}")
    check_dtype(dtype)
    if not whole(max_bytes) or max_bytes < 0:
        raise InvalidInput(f"max_bytes must be a whole number >= 0, got {max_bytes!r}")
    data = bytes(data)
    if len(data) > max_bytes:
        shown, limit = sizes(len(data), max_bytes)
        raise InvalidInput(f"{filename} is {shown}; the limit is {limit}: upload a smaller file")
    name = filename.lower()
    try:
        if name.endswith(".npy"):
            shape, source = _npy_header(data, filename)
            rows, cols = (1, *shape) if len(shape) == 1 else shape
            if rows and cols:
                check_memory(
                    rows,
                    cols,
                    DTYPES[dtype].itemsize,
                    rows * cols * (source.itemsize + 8 + 8),
                    "emulator",
                    f"{filename} as {dtype}",
                )
            array = np.load(io.BytesIO(data), allow_pickle=False)
        elif name.endswith(".csv"):
            array = _csv(data, filename)
        else:
            raise InvalidInput(f"{filename}: upload a .npy or .csv file")
    except ExplorerError:
        raise
    except (ValueError, EOFError, OSError):  # NumPy's words (allow_pickle, ...) are not for the user
        raise InvalidInput(f"{filename} could not be read: {NOT_AN_ARRAY}") from None
    if array.size == 0:
        shape = f"; its array has shape {array.shape}" if name.endswith(".npy") else ""  # a CSV's says nothing more
        raise InvalidInput(f"{filename} is empty: it holds no numbers{shape}")
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2:
        raise InvalidInput(f"{filename} has shape {array.shape}; give a vector or a rows × cols matrix")
    check_memory(*array.shape, DTYPES[dtype].itemsize, array.size * 8, "emulator", f"{filename} as {dtype}")
    wide = array.astype(np.float64)
    with np.errstate(over="ignore"):
        logits = np.ascontiguousarray(wide.astype(DTYPES[dtype]))
    overflowed = np.isfinite(wide) & ~np.isfinite(logits)
    if overflowed.any():  # the float64 reference would be of ±inf, not of the file's numbers
        row, col = (int(i) for i in np.argwhere(overflowed)[0])
        fits = np.abs(wide[np.isfinite(wide)]).max() <= FORMATS["float32"].max_value
        remedy = "choose float32 or scale the logits down" if fits and dtype != "float32" else "scale the logits down"
        raise InvalidInput(
            f"{filename}: {int(overflowed.sum()):,} finite value(s) are beyond {dtype}'s range "
            f"(±{FORMATS[dtype].max_value:g}) and would become ±inf, the first x[{row}, {col}] = {wide[row, col]:g}; "
            f"{remedy}"
        )
    return logits

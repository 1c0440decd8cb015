"""Every check the public functions share, in one place: the operator's settings, the backend, argument
types and ranges, and memory (refused before anything is allocated). Each raises InvalidInput or TooLarge."""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable

import numpy as np

from . import budget
from .backends import cuda
from .errors import InvalidInput, TooLarge, shown
from .numerics import DTYPES, FORMATS, dtype_name
from .registry import VARIANTS, Variant

BACKENDS = ("auto", "cuda", "emulator")
# Operator cap on elements per run (a shared box sets it lower): EXPLORER_MAX_ELEMENTS.
DEFAULT_MAX_ELEMENTS = 2**31 - 1
MAX_DIM = 2**31 - 1  # rows and cols are 32-bit ints in the kernels
log = logging.getLogger("explorer")


def _elements_setting() -> tuple[int, str | None]:
    """EXPLORER_MAX_ELEMENTS as a number of elements, and what is wrong with it (None: nothing; unset: the default)."""
    raw = os.environ.get("EXPLORER_MAX_ELEMENTS", "").strip()
    try:
        if not raw or int(raw) >= 1:
            return int(raw or DEFAULT_MAX_ELEMENTS), None
    except ValueError:
        pass
    return DEFAULT_MAX_ELEMENTS, (
        f"EXPLORER_MAX_ELEMENTS={raw!r} is refused: it must be a whole number of elements >= 1; "
        f"using the default limit of {DEFAULT_MAX_ELEMENTS:,} elements"
    )


def _backend_setting() -> tuple[str | None, str | None]:
    """EXPLORER_BACKEND as the backend "auto" runs (None: chosen by whether a GPU is usable), and what is wrong
    with it (None: nothing)."""
    raw = os.environ.get("EXPLORER_BACKEND", "").strip()
    if not raw or raw in ("cuda", "emulator"):
        return raw or None, None
    return None, (
        f"EXPLORER_BACKEND={raw!r} is refused: it must be cuda or emulator; "
        '"auto" uses CUDA where a GPU is usable, else the emulator'
    )


def settings_problems() -> list[str]:
    """What is wrong with the operator's settings (each refused setting falls back to its default)."""
    own = [problem for _, problem in (_elements_setting(), _backend_setting()) if problem]
    return own + budget.settings_problems()


@functools.cache
def _warn_once(message: str) -> None:
    log.warning(message)


def max_elements() -> int:
    """This server's limit on the elements of one run; every malformed operator setting is logged, once, and
    ignored."""
    for problem in settings_problems():
        _warn_once(problem)
    return _elements_setting()[0]


max_elements()  # a malformed setting is reported when the explorer loads (the app's or the CLI's start)


def forced_backend() -> str | None:
    """The operator's choice for "auto" (EXPLORER_BACKEND=emulator keeps a shared box off its GPU); a malformed
    EXPLORER_BACKEND is logged and ignored."""
    forced, problem = _backend_setting()
    if problem:
        _warn_once(problem)
    return forced


def resolve_backend(backend: str) -> str:
    """ "auto" is EXPLORER_BACKEND if set, else CUDA where a GPU is usable, else the emulator."""
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise InvalidInput(f"unknown backend {shown(backend)}; choose one of {', '.join(BACKENDS)}")
    if backend == "auto":
        return forced_backend() or ("cuda" if cuda.available() else "emulator")
    return backend


def whole(value: object) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def check_shape(rows: object, cols: object) -> tuple[int, int]:
    """rows and cols as ints from 1 to 2^31 - 1; InvalidInput otherwise."""
    for name, value in (("rows", rows), ("cols", cols)):
        if not whole(value):
            raise InvalidInput(f"{name} must be a whole number, got {shown(value)}")
        if value < 1:
            raise InvalidInput(f"{name} must be at least 1, got {value}")
        if value > MAX_DIM:
            raise InvalidInput(f"{name} must be below 2^31, got {shown(value)}")
    return int(rows), int(cols)


def check_dtype(dtype: object, what: str = "dtype") -> str:
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise InvalidInput(f"unknown {what} {shown(dtype)}; choose one of {', '.join(DTYPES)}")
    return dtype


def check_logits(x: object, name: str = "x") -> tuple[str, int, int]:
    """dtype name, rows and cols of a non-empty 1-D or 2-D float32/float16/bfloat16 array, read from
    its shape alone (nothing is copied); InvalidInput otherwise."""
    if not isinstance(x, np.ndarray):
        raise InvalidInput(f"{name} must be a numpy array, got {type(x).__name__}")
    try:
        dtype = dtype_name(x.dtype)
    except ValueError as exc:
        raise InvalidInput(f"{name}: {exc} (convert with {name}.astype(...))") from None
    if x.ndim not in (1, 2):
        raise InvalidInput(f"{name} must be 1-D or 2-D (rows × cols), got shape {x.shape}")
    if x.size == 0:
        raise InvalidInput(f"{name} is empty (shape {x.shape}); softmax needs at least one element per row")
    rows, cols = (1, x.shape[0]) if x.ndim == 1 else x.shape
    if rows > MAX_DIM or cols > MAX_DIM:
        raise InvalidInput(f"rows and cols must each be below 2^31, got {rows}×{cols}")
    return dtype, rows, cols


ELEMENTS_A_SCAN = 2**20  # elements check_accumulator_range converts at a time: its scratch stays a few MiB


def check_accumulator_range(x: np.ndarray, acc: str) -> None:
    """InvalidInput where x has a row that an accumulator of type acc would make NaN and float64 does not (a
    row with no NaN or +inf): a finite value that rounds to +inf in acc (float16 holds up to 65504; 65520 and
    above round to inf), or every finite value rounding to -inf (the running max stays -inf). A value that
    rounds to -inf beside larger ones (a mask of -1e5, or of fp32's lowest) adds exactly 0, as in float64.
    Reads x a block at a time; nothing to read where acc holds every value of x's type."""
    limit, own = FORMATS[acc].max_value, FORMATS[dtype_name(x.dtype)].max_value
    if limit >= own:
        return
    rows = x.reshape(-1, x.shape[-1])
    row_step = max(1, ELEMENTS_A_SCAN // rows.shape[1])
    for first in range(0, rows.shape[0], row_step):
        overflows, all_lost = _accumulator_losses(rows[first : first + row_step], acc)
        if overflows.any() or all_lost.any():
            r = int(np.argmax(overflows | all_lost))
            if overflows[r]:
                with np.errstate(over="ignore", invalid="ignore"):
                    c = int(np.argmax(np.isposinf(rows[first + r].astype(DTYPES[acc])) & np.isfinite(rows[first + r])))
                raise InvalidInput(
                    f"a {acc} accumulator holds values up to {limit:g}; {_element(x, first + r, c)} = "
                    f"{float(rows[first + r, c]):g} would become +inf in it, and its row NaN: accumulate in "
                    "float32, or scale the logits"
                )
            raise InvalidInput(
                f"a {acc} accumulator holds values down to -{limit:g}; every finite value of row {first + r} is "
                "below it and would become -inf, and the row NaN: accumulate in float32, or shift the logits"
            )


def _accumulator_losses(block: np.ndarray, acc: str) -> tuple[np.ndarray, np.ndarray]:
    """Per row of block, not NaN in float64: whether a finite value rounds to +inf in acc, and whether every
    finite value (there being one) rounds to -inf. Converts ELEMENTS_A_SCAN elements at a time."""
    n = block.shape[0]
    overflow, kept, finite, nan_anyway = (np.zeros(n, bool) for _ in range(4))
    step = min(block.shape[1], ELEMENTS_A_SCAN)
    for col in range(0, block.shape[1], step):
        part = block[:, col : col + step]
        with np.errstate(over="ignore", invalid="ignore"):  # the overflows and NaNs are what is looked for
            held = part.astype(DTYPES[acc])
            is_finite = np.isfinite(part)
            overflow |= (np.isposinf(held) & is_finite).any(axis=1)
            kept |= (is_finite & ~np.isneginf(held)).any(axis=1)
            finite |= is_finite.any(axis=1)
            nan_anyway |= (np.isnan(part) | np.isposinf(part)).any(axis=1)
    return overflow & ~nan_anyway, finite & ~kept & ~nan_anyway


def _element(x: np.ndarray, row: int, col: int) -> str:
    return f"x[{col}]" if x.ndim == 1 else f"x[{row}, {col}]"


def check_block(variant: Variant, block_size: object) -> int:
    """The block size the variant will use (None: its default); InvalidInput for one it cannot take."""
    try:
        return variant.check_block_size(block_size)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None


def check_variant(variant: object, block_size: object) -> tuple[Variant | None, int | None]:
    if variant is None:
        return None, None
    if not isinstance(variant, Variant):
        raise InvalidInput(f"variant must be one of explorer.VARIANTS' values or None, got {type(variant).__name__}")
    default = block_size is None or (whole(block_size) and block_size == 0)  # 0: the default, as the app passes it
    return variant, check_block(variant, None if default else block_size)


def get_variant(key: str) -> Variant:
    if not isinstance(key, str) or key not in VARIANTS:
        raise InvalidInput(f"unknown variant {shown(key)}; choose one of {', '.join(VARIANTS)}")
    return VARIANTS[key]


def check_k(k: object, cols: int, k_max: int) -> int:
    """k as an int from 1 to min(k_max, cols); InvalidInput otherwise."""
    if not whole(k) or not 1 <= k <= min(k_max, cols):
        raise InvalidInput(
            f"k must be a whole number from 1 to {min(k_max, cols)} (at most {k_max} and at most cols), got {shown(k)}"
        )
    return int(k)


def check_numbers(
    x: object,
    name: str = "x",
    what: str = "the float64 reference and errors",
    need: Callable[[int, int], int] = budget.errors_bytes,
) -> np.ndarray:
    """x as a non-empty numeric array of at least one dimension (bfloat16 included); InvalidInput otherwise;
    TooLarge where `what` (the work on it, needing need(rows, cols) bytes) is over this server's limits."""
    try:
        a = np.asarray(x)
    except (ValueError, TypeError, OverflowError, RecursionError):  # NumPy's words are not for the user
        raise InvalidInput(
            f"{name} must be an array of numbers: a NumPy array, or nested lists of numbers with rows of equal length"
        ) from None
    if a.dtype not in DTYPES.values() and a.dtype.kind not in "fiub":
        raise InvalidInput(f"{name} must hold real numbers, got {a.dtype} values")
    if a.ndim == 0 or a.size == 0:
        raise InvalidInput(f"{name} must have at least one element along its last axis, got shape {a.shape}")
    rows, cols = a.size // a.shape[-1], a.shape[-1]
    check_memory(rows, cols, 8, need(rows, cols), "emulator", what)
    return a


def check_real(value: object, name: str) -> float:
    """value as a float >= 0; InvalidInput otherwise (the value quoted through shown(), so 10**400 is cut)."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.integer | np.floating):
        raise InvalidInput(f"{name} must be a number, got {shown(value)}")
    try:
        number = float(value)
    except OverflowError:
        raise InvalidInput(f"{name} is too large: {shown(value)}") from None
    if not number >= 0:
        raise InvalidInput(f"{name} must be a number >= 0, got {shown(value)}")
    return number


def size(n: int) -> str:
    """Bytes in words: GiB/MiB/KiB with two decimals, or exact bytes below 1 KiB."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} bytes"


def sizes(n: int, limit: int) -> tuple[str, str]:
    """n and limit in words, exact where rounding would make them look equal."""
    a, b = size(n), size(limit)
    return (f"{n:,} bytes", f"{limit:,} bytes ({b})") if a == b else (a, b)


def check_elements(rows: int, cols: int, itemsize: int, what: str) -> None:
    """Refuse rows × cols elements (of itemsize bytes) over this server's limit for one run (TooLarge)."""
    cap = max_elements()
    n = rows * cols
    if n > cap:
        raise TooLarge(
            f"{what}: {rows}×{cols} = {n:,} elements ({size(n * itemsize)}) is over this server's limit "
            f"of {cap:,} elements ({size(cap * itemsize)}) for one run; choose a smaller shape"
        )


def check_memory(
    rows: int, cols: int, itemsize: int, need: int, backend: str, what: str, gpu_need: int | None = None
) -> None:
    """Refuse, before anything is allocated, rows × cols elements (of itemsize bytes) over this server's
    limit, `need` bytes over what the GPU has free ("cuda"), or over this server's fixed limit for one run
    (host memory: the same request always gets the same answer). gpu_need: what the work would take on a
    GPU, named in the refusal where it fits the limit. `what` names the work."""
    check_elements(rows, cols, itemsize, what)
    n = rows * cols
    # The same limit in elements: need grows with the elements, so about n · limit / need of them fit.
    if backend == "cuda":
        have = cuda.free_bytes()
        if need > have:
            shown_need, shown_have = sizes(need, have)
            raise TooLarge(
                f"{what}: {rows}×{cols} = {n:,} elements needs about {shown_need} but only {shown_have} "
                f"of GPU memory is free (room for about {n * have // need:,} elements); choose a smaller shape "
                "or fewer variants, or try again when other runs have finished"
            )
        return
    limit = budget.run_budget()
    if need > limit:
        shown_need, shown_limit = sizes(need, limit)
        gpu = (
            f"; on a GPU it would need only about {size(gpu_need)} and fit"
            if gpu_need is not None and gpu_need <= limit
            else ""
        )
        raise TooLarge(
            f"{what}: {rows}×{cols} = {n:,} elements needs about {shown_need} in the CPU emulation, "
            f"over this server's limit of {shown_limit} for one run (about {n * limit // need:,} elements fit); "
            f"choose a smaller shape{gpu}"
        )

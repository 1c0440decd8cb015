"""The precision lab: how far the online denominator d drifts from float64 as n grows, per accumulator.

The textbook analysis: with d kept in fp16 the relative error of d_n is bounded by about
3·n·u (u = 2^-11), worst for monotone decreasing inputs, where the rescale factor is always 1 and
every rounding error passes on undamped; with d in fp32 and only the output rounded to fp16 the
bound is 3·n·u32 + u16. These functions run the real kernels (or their emulation) over n and
input classes and put the measured errors beside that bound, and show what the bound leaves out:
stagnation (fp16 d stops at 2048 when each term is <= 1), overflow past 65504 in merge trees,
bf16's u = 2^-8, and the shorter sequential sums of warp and block variants.

Everything here goes through explorer.softmax(..., backend=...), so the same code measures the GPU
kernels or the NumPy emulation. Pure functions: no Streamlit, no plotting.

    >>> from explorer import precision
    >>> r = precision.measure("online_thread", "float16", "constant", 4096, backend="emulator")
    >>> r.d, r.exact_d, r.stagnated_at
    (2048.0, 4096.0, 2048)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from .api import SoftmaxResult, softmax
from .backends.emulator import Acc
from .geometry import cdiv
from .inputs import make_input
from .numerics import DTYPES, FORMATS, errors, input_rounding, sequential_terms, softmax_bound, ulp
from .registry import VARIANTS
from .trace import d_relative_error

# the online kernels that keep a row in one thread, warp or block (split_row spreads it over blocks)
ONLINE_VARIANTS = tuple(k for k, v in VARIANTS.items() if v.method == "online" and v.family != "split")
ACCUMULATORS = ("float16", "bfloat16", "float32")
# The input classes of that analysis, as distributions of explorer.inputs with fixed parameters.
INPUT_CLASSES: dict[str, tuple[str, dict]] = {
    "decreasing": ("decreasing", {"spread": 1.0}),  # x from 0 down to -1: the max never moves, terms in [1/e, 1]
    "increasing": ("increasing", {"spread": 10.0}),  # x from -10 up to 0: a new max, and a rescale, at every step
    "normal": ("normal", {"mean": 0.0, "std": 1.0}),
    "constant": ("constant", {"value": 0.0}),  # every term exactly e^0 = 1: d_n = n exactly in float64
}
INPUT_TITLES = {
    "decreasing": "monotone decreasing",
    "increasing": "monotone increasing",
    "normal": "random normal",
    "constant": "constant",
}
# fp32 terms <= 1 stop changing d at these values (the ulp there is 2, a term <= 1 is at most half of it)
STAGNATION = {acc: 2.0 ** FORMATS[acc].significand_bits for acc in ACCUMULATORS}


def powers_of_two(low: int, high: int) -> list[int]:
    """2^low, 2^(low+1), ..., 2^high."""
    return [2**k for k in range(low, high + 1)]


def lane_steps(variant: str, n: int, block_size: int | None = None, dtype: str = "float32") -> int:
    """Steps the busiest lane folds: what an emulated run costs (one Python loop iteration each)."""
    return cdiv(n, VARIANTS[variant].launch(1, n, block_size, dtype).threads_per_row)


def make_class_input(dist: str, n: int, dtype: str = "float32", seed: int = 0) -> np.ndarray:
    """A 1 × n row of one of INPUT_CLASSES."""
    name, params = INPUT_CLASSES[dist]
    return make_input(name, 1, n, dtype=dtype, seed=seed, **params)


def _traced_row(
    variant: str, acc: str, dist: str, n: int, backend: str, dtype: str, block_size: int | None, seed: int
) -> tuple[np.ndarray, SoftmaxResult, float]:
    """A 1 × n row of input class `dist`, `variant` run on it with its row traced, and the run's seconds."""
    x = make_class_input(dist, n, dtype, seed)
    start = time.perf_counter()
    r = softmax(x, variant, acc=acc, backend=backend, trace_row=0, block_size=block_size)
    return x, r, time.perf_counter() - start


def stagnation_step(d: np.ndarray, exact_d: np.ndarray, acc: str) -> int | None:
    """The first step from which the kernel's d never changes again although the exact d still grows
    by at least one of the accumulator's ulps: the terms after it round away entirely. None if none.

    d and exact_d are one lane's running values (float64, NaN where the lane had no element).
    """
    valid = np.isfinite(exact_d)
    d, exact_d = d[valid], exact_d[valid]
    if d.size < 2 or not np.isfinite(d[-1]):
        return None
    changed = np.flatnonzero(d[1:] != d[:-1])
    j = int(changed[-1]) + 2 if changed.size else 1  # d[j-1:] are all equal
    if j >= d.size:
        return None
    if d[j - 1] == 0:
        return None
    return j if exact_d[-1] - exact_d[j - 1] >= float(ulp(d[j - 1], FORMATS[acc])) else None


@dataclass(frozen=True)
class Measurement:
    """One point of the sweep: `variant` on a 1 × n row of input class `dist`, traced."""

    variant: str
    acc: str
    dist: str
    n: int
    dtype: str
    backend: str
    block_size: int | None
    max_abs_x: float  # max |x| of the row
    input_rounding: float  # error_bound's max_abs_x: max |x| where x changes on entering acc, else 0
    d: float  # the kernel's final denominator
    exact_d: float  # float64's
    d_rel_error: float  # inf where d overflowed
    out_max_rel: float  # outputs vs float64 (explorer.errors)
    sequential_terms: int  # error_bound's n (numerics.sequential_terms)
    d_bound: float  # 3·n·u_acc + 2·input_rounding·u_acc
    bound: float  # d_bound + u_out: numerics.softmax_bound
    bound_applies: bool  # bound < 1 (a relative bound of 1 or more says nothing) and the exact d within acc's range
    overflow: bool  # d not finite
    stagnated_at: int | None  # steps lane 0 folded before its d froze
    seconds: float


def measure(
    variant: str,
    acc: str,
    dist: str,
    n: int,
    backend: str = "auto",
    dtype: str = "float32",
    block_size: int | None = None,
    seed: int = 0,
) -> Measurement:
    """Run `variant` on a 1 × n row of input class `dist`, traced, and put its errors beside the bound.

    bound_applies is false where the rounding-error model says nothing: a bound of 1 or more, or an
    exact d beyond the accumulator's range (the model assumes nothing overflows).
    """
    x, r, seconds = _traced_row(variant, acc, dist, n, backend, dtype, block_size, seed)
    t = r.trace
    bound = softmax_bound(r.launch, x, acc)
    d_err = d_relative_error(t.final_d, t.exact_final_d)
    return Measurement(
        variant=variant,
        acc=acc,
        dist=dist,
        n=int(n),
        dtype=dtype,
        backend=r.backend,
        block_size=r.block_size,
        max_abs_x=float(np.max(np.abs(x.astype(np.float64)))),
        input_rounding=input_rounding(x, acc),
        d=float(t.final_d),
        exact_d=float(t.exact_final_d),
        d_rel_error=float(d_err) if math.isfinite(t.final_d) else math.inf,
        out_max_rel=errors(r.out, x).max_rel,
        sequential_terms=sequential_terms(r.launch, n),
        d_bound=bound - FORMATS[dtype].unit_roundoff,
        bound=bound,
        bound_applies=bound < 1.0 and abs(t.exact_final_d) <= FORMATS[acc].max_value,
        overflow=not math.isfinite(t.final_d),
        stagnated_at=stagnation_step(t.d[0], t.exact_d[0], acc),
        seconds=seconds,
    )


def sweep(
    variants: Iterable[str] = ONLINE_VARIANTS,
    accs: Iterable[str] = ACCUMULATORS,
    dists: Iterable[str] = tuple(INPUT_CLASSES),
    ns: Iterable[int] = powers_of_two(4, 12),
    backend: str = "auto",
    dtype: str = "float32",
    block_size: int | None = None,
    seed: int = 0,
    max_lane_steps: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[Measurement]:
    """measure() over every combination; points whose busiest lane would fold more than
    max_lane_steps elements are left out (the emulator folds a lane in a Python loop)."""
    points = [
        (v, a, d, n)
        for v in variants
        for a in accs
        for d in dists
        for n in ns
        if max_lane_steps is None or lane_steps(v, n, block_size, dtype) <= max_lane_steps
    ]
    out = []
    for i, (v, a, d, n) in enumerate(points):
        if progress is not None:
            progress(i, len(points))
        out.append(measure(v, a, d, n, backend, dtype, block_size if VARIANTS[v].takes_block_size else None, seed))
    return out


@dataclass(frozen=True)
class Trajectory:
    """One lane's traced d_j beside the float64 d_j, step by step (for the stagnation plot)."""

    variant: str
    acc: str
    dist: str
    n: int
    backend: str
    steps: np.ndarray  # 1, 2, ... : elements the lane has folded
    d: np.ndarray
    exact_d: np.ndarray
    stagnated_at: int | None


def d_trajectory(
    variant: str,
    acc: str,
    dist: str,
    n: int,
    backend: str = "auto",
    dtype: str = "float32",
    block_size: int | None = None,
    seed: int = 0,
    lane: int = 0,
) -> Trajectory:
    """One lane's traced d_j beside the float64 d_j."""
    _, r, _ = _traced_row(variant, acc, dist, n, backend, dtype, block_size, seed)
    t = r.trace
    valid = t.index[lane] >= 0
    return Trajectory(
        variant=variant,
        acc=acc,
        dist=dist,
        n=n,
        backend=r.backend,
        steps=np.arange(1, int(valid.sum()) + 1),
        d=t.d[lane, valid],
        exact_d=t.exact_d[lane, valid],
        stagnated_at=stagnation_step(t.d[lane], t.exact_d[lane], acc),
    )


# --- bits -----------------------------------------------------------------------------------------------

UINT = {2: np.uint16, 4: np.uint32}


class FloatBits(NamedTuple):
    """A value rounded to a format: its sign, exponent and mantissa fields as bit strings."""

    value: float  # as stored
    sign: str
    exponent: str
    mantissa: str
    exponent_value: int  # unbiased
    mantissa_bits: int
    kind: str  # normal, subnormal, zero, inf or nan


def float_bits(value: float, acc: str) -> FloatBits:
    """The fields of `value` rounded to format `acc` (through float32, as the kernels round)."""
    dt = DTYPES[acc]
    stored = np.array(value, dtype=np.float64).astype(np.float32).astype(dt)
    raw = int(stored.view(UINT[dt.itemsize]))
    width = 8 * dt.itemsize
    e_bits = FORMATS[acc].exponent_bits
    text = format(raw, f"0{width}b")
    sign, exponent, mantissa = text[0], text[1 : 1 + e_bits], text[1 + e_bits :]
    biased = int(exponent, 2)
    bias = 2 ** (e_bits - 1) - 1
    if biased == 2**e_bits - 1:
        kind = "nan" if int(mantissa, 2) else "inf"
    elif biased == 0:
        kind = "subnormal" if int(mantissa, 2) else "zero"
    else:
        kind = "normal"
    return FloatBits(
        value=float(stored.astype(np.float64)),
        sign=sign,
        exponent=exponent,
        mantissa=mantissa,
        exponent_value=(1 - bias if biased == 0 else biased - bias),
        mantissa_bits=width - 1 - e_bits,
        kind=kind,
    )


def bit_at(value: float, k: int) -> int | None:
    """The binary digit of |value| at place 2^k, exactly (None for inf or NaN)."""
    if not math.isfinite(value):
        return None
    return int(abs(Fraction(value)) / Fraction(2) ** k) % 2


class UpdateParts(NamedTuple):
    """One online step as the kernel rounds each part (update_parts)."""

    x_held: float  # x_j as the accumulator holds it (rounded to acc)
    scale: float  # e^(m_{j-1} - m_j)
    product: float  # d_{j-1}·scale
    term: float  # e^(x_j - m_j)
    sum: float  # product + term, exact
    d: float  # d_j: the sum rounded to acc


def update_parts(prev_m: float, prev_d: float, m: float, x: float, acc: str) -> UpdateParts:
    """One online step, each part as the kernel rounds it: the emulation's accumulator arithmetic (fp32
    operations, subnormals flushed, one rounding to acc each) on one element."""
    a = Acc(acc)

    def held(v: float) -> np.ndarray:
        return a.round(np.array(v, dtype=np.float32))

    x_acc, m_acc = held(x), held(m)
    scale = a.rescale(held(prev_m), m_acc)
    product = a.mul(held(prev_d), scale)
    term = a.const(0.0, ()) if x_acc == -np.inf else a.exp_diff(x_acc, m_acc)
    d = a.add(product, term)
    exact_sum = float(product) + float(term)  # both hold <= 24 significant bits: exact in float64
    return UpdateParts(
        x_held=float(x_acc), scale=float(scale), product=float(product), term=float(term), sum=exact_sum, d=float(d)
    )


def aligned_bits(values: dict[str, float], high: int, low: int) -> dict[str, list[int | None]]:
    """Each value's binary digits at places 2^high down to 2^low (None for a non-finite value)."""
    return {label: [bit_at(v, k) for k in range(high, low - 1, -1)] for label, v in values.items()}

"""Number formats, the float64 reference, and how far an output is from it."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import ml_dtypes
import numpy as np

from .geometry import DTYPES, Launch, cdiv


@dataclass(frozen=True)
class Format:
    """What rounding to a format costs, from ml_dtypes.finfo: p significand bits (with the implicit one),
    the exponent field's width and range."""

    name: str
    significand_bits: int
    exponent_bits: int
    min_exponent: int  # exponent of the smallest normal number
    max_value: float

    @property
    def unit_roundoff(self) -> float:
        """u = 2^-p: the largest relative error of one round-to-nearest."""
        return 2.0**-self.significand_bits

    @property
    def smallest_normal(self) -> float:
        return 2.0**self.min_exponent

    @property
    def smallest_subnormal(self) -> float:
        return 2.0 ** (self.min_exponent - self.significand_bits + 1)


def _format(name: str) -> Format:
    info = ml_dtypes.finfo(DTYPES[name])
    return Format(
        name,
        significand_bits=info.nmant + 1,
        exponent_bits=info.nexp,
        min_exponent=info.minexp,
        max_value=float(info.max),
    )


FORMATS: dict[str, Format] = {name: _format(name) for name in DTYPES}
SHORT_NAMES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}  # as tables and chart labels write them

# Largest max_rel vs float64 for fp32 accumulation on normal inputs with cols <= 4096, by output type.
MAX_REL_FP32_ACC = {"float32": 1e-5, "float16": 1e-3, "bfloat16": 8e-3}


def dtype_name(dtype: np.dtype) -> str:
    for name, dt in DTYPES.items():
        if np.dtype(dtype) == dt:
            return name
    raise ValueError(f"unsupported dtype {dtype}; the kernels take float32, float16 or bfloat16")


def rounds_input(dtype: str, acc: str) -> bool:
    """Whether x changes when it enters an accumulator of type acc (every value of dtype is not one of acc)."""
    return dtype != acc and not (acc == "float32")


def error_bound(sequential_terms: int, acc: str, out: str, max_abs_x: float = 0.0) -> float:
    """The bound on the relative error: 3·n·u_acc + u_out, n = terms one accumulator folded in sequence.

    Where x is rounded to a coarser accumulator on entry (rounds_input), pass max |x|: x and m then
    each carry up to |x|·u_acc of error into the exponent, adding 2·max|x|·u_acc.
    """
    u_acc = FORMATS[acc].unit_roundoff
    return 3 * sequential_terms * u_acc + FORMATS[out].unit_roundoff + 2 * max_abs_x * u_acc


def sequential_terms(launch: Launch, cols: int) -> int:
    """The n of error_bound for a row of `cols` run with `launch`: the terms one accumulator folds in sequence.

    A thread folds its share of the row (whole loads of template_args[0] elements where the kernel
    takes a vector width), its state then goes through the butterflies of its block, ceil(log2) of the
    block's threads on the row (a merge with an empty partner is exact), and the blocks of a row
    (launch.chunks) merge one after another.
    """
    width = launch.template_args[0] if launch.template_args else 1
    per_thread = width * cdiv(cdiv(cols, width), launch.threads_per_row)
    block_levels = (launch.threads_per_row // launch.chunks - 1).bit_length()
    return per_thread + block_levels + launch.chunks - 1


def sequential_terms_text(launch: Launch) -> str:
    """sequential_terms(launch, n) as a formula in n, for a chart's label: "n", "⌈n/32⌉ + 5", "⌈n/256⌉ + 8"."""
    width = launch.template_args[0] if launch.template_args else 1
    threads = launch.threads_per_row
    if threads == 1:
        share = "n" if width == 1 else f"{width}·⌈n/{width}⌉"
    else:
        share = f"⌈n/{threads}⌉" if width == 1 else f"{width}·⌈n/{width * threads}⌉"
    levels = (threads // launch.chunks - 1).bit_length()
    return " + ".join(
        [share, *([str(levels)] if levels else []), *([str(launch.chunks - 1)] if launch.chunks > 1 else [])]
    )


def input_rounding(x: np.ndarray, acc: str) -> float:
    """error_bound's max_abs_x: max |x| over finite x where some finite x changes on entering the
    accumulator (through float32, as the kernels load it), else 0."""
    x64 = np.asarray(x).astype(np.float64)
    finite = np.isfinite(x64)
    with np.errstate(over="ignore"):
        held = np.asarray(x).astype(np.float32).astype(DTYPES[acc]).astype(np.float64)
    if np.array_equal(held[finite], x64[finite]):
        return 0.0
    return float(np.abs(x64[finite]).max())


def softmax_bound(launch: Launch, x: np.ndarray, acc: str) -> float:
    """error_bound for the softmax of x (rows along the last axis) run with `launch` and accumulator acc:
    the bound the Error page shows, the precision lab plots and the tests hold the kernels to."""
    x = np.asarray(x)
    return error_bound(sequential_terms(launch, x.shape[-1]), acc, dtype_name(x.dtype), input_rounding(x, acc))


def ulp_exponent(values: np.ndarray | float, fmt: Format) -> np.ndarray:
    """k such that 2^k is the spacing of `fmt` at |values| (subnormal range included; 0 gets the
    subnormal spacing, inf and NaN give inf and NaN)."""
    magnitude = np.abs(np.asarray(values, dtype=np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        exponent = np.floor(np.log2(np.where(magnitude > 0, magnitude, fmt.smallest_normal)))
    return np.maximum(exponent, fmt.min_exponent) - (fmt.significand_bits - 1)


def ulp(values: np.ndarray | float, fmt: Format) -> np.ndarray:
    """Spacing of `fmt` at |values| (float64), subnormal range included."""
    return np.exp2(ulp_exponent(values, fmt))


def reference(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis in float64, max subtracted.

    IEEE semantics, as torch.softmax and scipy: a NaN or +inf in a row makes the whole row NaN,
    -inf entries give exactly 0, and a row of only -inf gives NaN.
    """
    x64 = np.asarray(x).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        shifted = x64 - x64.max(axis=-1, keepdims=True)
        e = np.exp(shifted)
        return e / e.sum(axis=-1, keepdims=True)


@dataclass(frozen=True)
class ErrorReport:
    """How far an output is from the float64 reference (over the rows finite in both; NaN where there is none)."""

    max_abs: float
    max_rel: float  # |out - ref| / max(|ref|, smallest normal of out's type)
    mean_rel: float
    # max_rel and mean_rel without the outputs the GPU's -ftz flushed to 0 (flushed_by_ftz): what a rounding bound
    # speaks of
    max_rel_unflushed: float
    mean_rel_unflushed: float
    max_ulp: float  # in units of the last place of out's type, at the reference value
    row_sum_dev: float  # max over finite rows of |sum(out) - 1|
    nan_count: int
    inf_count: int
    nonfinite_mismatch: int  # elements whose NaN/inf pattern differs from the reference's
    underflow_count: int  # outputs exactly 0 where the reference is not (below the type's range, or flushed)
    flushed_count: int  # of those, the ones -ftz flushed (flushed_by_ftz): what max_rel_unflushed leaves out
    argmax_agreement: float  # fraction of finite rows where the reference's argmax is also out's max

    def as_dict(self) -> dict:
        return asdict(self)


def flushed_by_ftz(out: np.ndarray, ref: np.ndarray, fmt: Format) -> np.ndarray:
    """Where an output of format fmt is 0 because the GPU flushed an fp32 result below fp32's smallest normal
    (-ftz): its float64 reference lies below 2^-126, yet not so far below that rounding to fmt would give 0 too. A loss
    of at most one fp32 smallest normal, which no rounding bound covers; none for fp16, whose outputs that small round
    to 0 anyway. Rows are along the last axis: none in a row whose output or reference holds a NaN or inf, whose zeros
    come from a wrong d (naive's, after its sum overflowed), not from -ftz."""
    out, ref = np.asarray(out, dtype=np.float64), np.abs(np.asarray(ref, dtype=np.float64))
    clean = np.isfinite(out).all(axis=-1, keepdims=True) & np.isfinite(ref).all(axis=-1, keepdims=True)
    return clean & (out == 0) & (ref >= fmt.smallest_subnormal / 2) & (ref < FORMATS["float32"].smallest_normal)


def errors(out: np.ndarray, x: np.ndarray, ref: np.ndarray | None = None) -> ErrorReport:
    """Compare a softmax output with the float64 reference of its input x.

    The errors are taken over the rows finite in both: a row with a NaN or inf where float64 has none is wrong as a
    whole (its finite outputs were divided by a wrong d: naive's zeros after its sum overflowed), and is counted
    in nonfinite_mismatch. With no such row, the errors are NaN (nothing was measured), not 0."""
    out = np.asarray(out)
    if out.shape != np.shape(x):
        raise ValueError(f"output shape {out.shape} differs from input shape {np.shape(x)}")
    fmt = FORMATS[dtype_name(out.dtype)]
    ref = reference(x) if ref is None else ref
    got = out.astype(np.float64).reshape(-1, out.shape[-1]) if out.size else np.zeros((0, 1))
    ref = ref.reshape(got.shape)
    mismatch = int(np.sum((np.isnan(got) != np.isnan(ref)) | (np.isinf(got) != np.isinf(ref))))
    finite_rows = np.isfinite(ref).all(axis=1) & np.isfinite(got).all(axis=1)
    measured = np.broadcast_to(finite_rows[:, None], got.shape)
    diff = np.abs(np.where(measured, got - ref, 0.0))
    rel = diff / np.maximum(np.abs(ref), fmt.smallest_normal, where=measured, out=np.ones_like(ref))
    rel = np.where(measured, rel, 0.0)
    flushed = measured & flushed_by_ftz(got, ref, fmt)
    ulps = np.where(measured, diff / ulp(np.where(measured, ref, 1.0), fmt), 0.0)
    nothing = math.nan if not finite_rows.any() else 0.0  # the errors of no element: none measured
    row_sum_dev = float(np.max(np.abs(got[finite_rows].sum(axis=1) - 1.0), initial=nothing))

    ref_rows = np.isfinite(ref).all(axis=1)
    if ref_rows.any():
        g, r = got[ref_rows], ref[ref_rows]
        at_ref_max = g[np.arange(len(r)), np.argmax(r, axis=1)]
        agree = float(np.mean(at_ref_max >= np.max(np.where(np.isnan(g), np.inf, g), axis=1)))
    else:
        agree = 1.0
    count = int(measured.sum())
    unflushed, kept = np.where(flushed, 0.0, rel), count - int(flushed.sum())
    return ErrorReport(
        max_abs=float(diff.max(initial=nothing)),
        max_rel=float(rel.max(initial=nothing)),
        mean_rel=float(rel.sum() / count) if count else nothing,
        max_rel_unflushed=float(unflushed.max(initial=nothing)),
        mean_rel_unflushed=float(unflushed.sum() / kept) if kept else nothing,
        max_ulp=float(ulps.max(initial=nothing)),
        row_sum_dev=row_sum_dev,
        nan_count=int(np.isnan(got).sum()),
        inf_count=int(np.isinf(got).sum()),
        nonfinite_mismatch=mismatch,
        underflow_count=int(np.sum(measured & (got == 0) & (ref != 0))),
        flushed_count=int(flushed.sum()),
        argmax_agreement=agree,
    )

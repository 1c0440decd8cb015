"""fp32 as the GPU computes it, in NumPy: results below 2^-126 flushed to zero (-ftz=true), expf and
division rounded once from float64. Shared by the emulation of every kernel."""

from __future__ import annotations

import numpy as np

F32 = np.float32
FP32_SMALLEST_NORMAL = np.finfo(F32).smallest_normal


def ftz(v: np.ndarray) -> np.ndarray:
    """Flush fp32 subnormal results to zero, as the GPU does under -ftz=true."""
    return np.where(np.abs(v) < FP32_SMALLEST_NORMAL, np.zeros((), F32), v)


def exp_f32(v: np.ndarray) -> np.ndarray:
    """expf, as closely as NumPy gets: exp in float64, rounded once to fp32, subnormals flushed."""
    with np.errstate(over="ignore", invalid="ignore"):
        return ftz(np.exp(v.astype(np.float64)).astype(F32))


def div_f32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a / b in fp32, subnormal results flushed."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore", under="ignore"):
        return ftz(a / b)

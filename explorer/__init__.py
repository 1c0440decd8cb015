"""Softmax kernel explorer: real CUDA kernels through CuPy, a faithful NumPy emulation, traces.

>>> import explorer
>>> x = explorer.make_input("normal", rows=4, cols=1000, dtype="float16")
>>> r = explorer.softmax(x, "online_warp", acc="float32", trace_row=0)
>>> explorer.errors(r.out, x).max_rel < 1e-3
True
"""

from .api import (
    SoftmaxResult,
    bytes_needed,
    check_fits,
    error_bound,
    errors,
    info,
    kernel_resources,
    kernel_source,
    reference,
    rounds_input,
    softmax,
)
from .checks import BACKENDS, resolve_backend
from .errors import ExplorerError, GPUContextLost, GPUUnavailable, InvalidInput, KernelFailed, TooLarge
from .geometry import Launch
from .inputs import DISTRIBUTIONS, load_logits, make_input
from .numerics import DTYPES, FORMATS, MAX_REL_FP32_ACC, ErrorReport
from .registry import VARIANTS, Variant
from .topk import K_MAX, TOPK_VARIANTS, TopkReport, TopkResult, reference_topk, softmax_topk, topk_errors
from .trace import MergeLevel, Trace

__all__ = [
    "BACKENDS",
    "DISTRIBUTIONS",
    "DTYPES",
    "FORMATS",
    "K_MAX",
    "MAX_REL_FP32_ACC",
    "TOPK_VARIANTS",
    "VARIANTS",
    "ErrorReport",
    "ExplorerError",
    "GPUContextLost",
    "GPUUnavailable",
    "InvalidInput",
    "KernelFailed",
    "Launch",
    "MergeLevel",
    "SoftmaxResult",
    "TooLarge",
    "TopkReport",
    "TopkResult",
    "Trace",
    "Variant",
    "bytes_needed",
    "check_fits",
    "error_bound",
    "errors",
    "info",
    "kernel_resources",
    "kernel_source",
    "load_logits",
    "make_input",
    "reference",
    "reference_topk",
    "resolve_backend",
    "rounds_input",
    "softmax",
    "softmax_topk",
    "topk_errors",
]

"""Softmax + top-k: the k largest probabilities per row and their indices, fused or not.

The fused kernel (Milakov & Gimelshein 2018) reads the logits once, keeping the online (m, d) and a
running top-k together; the unfused pair is `fast` softmax (read, write) then a top-k selection
(read again). Order: larger probability first, ties to the lower index, NaN below -inf.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import budget, reserve
from .backends import cuda_topk, fast_emulation
from .checks import (
    check_dtype,
    check_k,
    check_logits,
    check_memory,
    check_numbers,
    check_shape,
    resolve_backend,
    whole,
)
from .errors import InvalidInput, shown
from .fast_launch import MAX_CLUSTER
from .geometry import ITEMSIZE, Launch, cdiv, multiprocessors
from .numerics import DTYPES, FORMATS, dtype_name, reference, ulp
from .registry import VARIANTS

K_MAX = 64
TOPK_BLOCK = 128  # threads a block, the smallest the rule takes (topk_launch says where it takes 256 and 512)
TOPK_LATENCY_ROWS = 16  # below this many rows a call is latency: many small chunks a row
TOPK_LATENCY_CHUNK = 4096  # twice the elements of a k = 1 chunk then (128-thread blocks): 16 make a cluster
TOPK_CHUNK = 65536  # elements a chunk at least, once rows are not few
VOCABS = (32000, 50257, 128256, 151936, 262144)  # LLaMA-2, GPT-2, LLaMA-3, Qwen-2, Gemma vocabularies


@dataclass(frozen=True)
class TopkVariant:
    key: str
    title: str
    passes: str  # what it does to memory, in words
    lesson: str
    fused: bool  # one kernel reading the logits once, or `fast` softmax then a selection over the probabilities
    kernel_file: str = "topk.cu"
    kernel_functions: tuple[str, ...] = ("topk", "topk_cluster")  # the selection's __global__ functions
    # (topk_unfused runs `fast` first); the launch rule picks one, the emulation follows either

    def launch(self, rows: int, cols: int, k: int, dtype: str) -> Launch:
        return topk_launch(rows, cols, k, dtype)

    def bytes_moved(self, rows: int, cols: int, k: int, dtype: str) -> int:
        return topk_bytes(1 if self.fused else 3, rows, cols, k, dtype, index_bytes=4)


def topk_bytes(passes: int, rows: int, cols: int, k: int, dtype: str, index_bytes: int) -> int:
    """Bytes a top-k pipeline moves at least: `passes` logits-sized passes through memory (reads and writes), then
    k values and k indices of index_bytes a row."""
    item = ITEMSIZE[dtype]
    return passes * rows * cols * item + rows * k * (item + index_bytes)


# torch's top-k pipelines (explorer.peers), by the logits-sized passes through memory each formulation needs at least:
# torch.softmax writes every probability and torch.topk reads them again; torch.topk then torch.logsumexp reads the
# logits twice. Both return int64 indices.
TORCH_TOPK_PASSES = {"torch": 3, "torch_lse": 2}
TORCH_TOPK_LABELS = {"torch": "torch.softmax + torch.topk", "torch_lse": "torch.topk + logsumexp"}


def torch_topk_bytes(passes: int, rows: int, cols: int, k: int, dtype: str) -> int:
    """topk_bytes of a torch pipeline: int64 indices."""
    return topk_bytes(passes, rows, cols, k, dtype, index_bytes=8)


TOPK_VARIANTS = {
    v.key: v
    for v in [
        TopkVariant(
            "topk_fused",
            "Fused online softmax + top-k",
            "reads the logits once; writes k probabilities and indices",
            "The running top-k rides along with the running (m, d): one pass gives the k largest "
            "probabilities, which is what sampling from an LM head or routing in an MoE needs.",
            fused=True,
        ),
        TopkVariant(
            "topk_unfused",
            "Softmax, then top-k",
            "softmax reads the logits and writes all probabilities; top-k reads them again",
            "The obvious pipeline moves every probability through memory twice, only to keep k of them.",
            fused=False,
        ),
    ]
}


def topk_launch(
    rows: int,
    cols: int,
    k: int,
    dtype: str,
    block: int | None = None,
    chunks: int | None = None,
    cluster: bool | None = None,
    per: int | None = None,
) -> Launch:
    """Several blocks per row when rows are few: a handful of rows (latency) at k > 1 as one cluster of up to
    16 chunks (merged in its leader's shared memory), each chunk one batch of the block where 16 reach (its k
    best selected through the shared-memory pool, no sorting network), in the fewest threads a block that reach
    (128 or 256 at k <= 8, 512 above; then 512 of 32 elements a thread), else 16 chunks of 256 threads; at
    k = 1 (whose merges are cheap) chunks of ~2048 elements (a batch at least) in 128-thread blocks, a row of up
    to 65536 columns as one cluster of up to 16, a longer one merged by its last block through global memory.
    Up to one row per SM, k > 1: chunks of at least 65536 elements, about four blocks an SM, k = 1: SMs // rows
    chunks a row as one cluster (one wave; none from half as many rows as SMs). More rows: a block per row
    (chunks only add merges once the grid fills the GPU). At k > 1 a row has at most 16·lists chunks: the
    merge keeps one entry of each list in the pool.

    Threads a block, beyond the latency rule: 512 at k = 1 with up to a row an SM (more bytes in flight a row)
    where each chunk still gets a batch of 512 threads; 128 for more rows than SMs at k > 1; 256 elsewhere.
    Loads are 16-byte packs at any width (a row's loose head and tail elements go to its first threads), into
    registers one batch ahead; `per` packs a thread a batch (by default 16 elements; 32 for more rows than SMs at
    k > 1, twice the bytes in flight). Defaults are what scripts/tune_topk.py measured fastest on the H200."""
    vec = 16 // ITEMSIZE[dtype]
    sms = multiprocessors()
    elements = 32 if rows > sms and k > 1 else 16  # a thread's elements a batch
    tuned_per, per = per, per or max(1, elements // vec)
    lists = 1 if k == 1 else 32 if k <= 32 else 64  # k = 1: a best key per lane; else the warp's list
    latency = rows < TOPK_LATENCY_ROWS
    greedy_share = k == 1 and not latency and rows <= sms  # k = 1, up to a row an SM: rows share the SMs
    if cluster is None:
        cluster = greedy_share or (latency and (k > 1 or cols <= MAX_CLUSTER * TOPK_LATENCY_CHUNK))
    if not block and latency and k > 1:  # the fewest threads (then, k > 8, twice the batch) for <= 16 chunks
        sizes = [(TOPK_BLOCK, per), (2 * TOPK_BLOCK, per)] if k <= 8 else [(4 * TOPK_BLOCK, per)]
        sizes += [] if tuned_per else [(4 * TOPK_BLOCK, 2 * per)]
        block, per = next(((b, p) for b, p in sizes if cdiv(cols, b * p * vec) <= MAX_CLUSTER), (2 * TOPK_BLOCK, per))
    if not block and greedy_share and cols // (4 * TOPK_BLOCK * per * vec) >= sms // rows:
        block = 4 * TOPK_BLOCK  # 512 threads a chunk where each still gets a batch of them
    block = block or (TOPK_BLOCK if (rows > sms and k > 1) or (latency and k == 1) else 2 * TOPK_BLOCK)
    batch = block * per * vec  # elements a batch of the block
    if chunks is None and greedy_share:
        chunks = sms // rows  # one wave of clusters (its merge costs less than the global one's)
    elif chunks is None and cluster:
        chunks = MAX_CLUSTER
    elif chunks is None:
        latency_chunk = TOPK_LATENCY_CHUNK // 2 if k == 1 else batch
        chunks = cdiv(cols, latency_chunk) if latency else min(cdiv(cols, TOPK_CHUNK), max(1, round(4 * sms / rows)))
    chunks = max(1, min(chunks, cols // batch if k == 1 else cdiv(cols, batch)))  # k = 1: a batch a chunk at least
    if k > 1:
        chunks = min(chunks, 16 * lists)  # topk.cu's merge_lists: an entry of each chunk's list in the pool
    if cluster:
        chunks = min(chunks, MAX_CLUSTER)
    cluster = cluster and chunks > 1
    pooled = k > 1 and latency and cdiv(cols, chunks) <= batch  # a chunk of one batch: selected through the pool
    mailbox = 8 + chunks * (8 + 8 * lists) if cluster else 0  # topk.cu's TopkMailbox
    mailbox += 8 * (1 + cdiv(chunks, 2)) if cluster and pooled else 0  # and its BoundMailbox (8-byte aligned)
    return Launch(
        grid=rows * chunks,
        block=block,
        shared_bytes=8 * 16 * lists + 80 + mailbox,
        threads_per_row=chunks * block,
        kernel="topk_cluster" if cluster else "topk",
        template_args=(vec, per, lists, int(cols % vec != 0), int(pooled)) + ((chunks,) if cluster else ()),
        chunks=chunks,
        protocol="cluster" if cluster else "rows",
    )


@dataclass
class TopkResult:
    values: np.ndarray  # (rows, k) probabilities, in x's dtype, descending
    indices: np.ndarray  # (rows, k) int32
    backend: str
    variant: str
    k: int
    launch: Launch


def _check_variant(variant: object) -> None:
    if not isinstance(variant, str) or variant not in TOPK_VARIANTS:
        raise InvalidInput(f"unknown top-k variant {shown(variant)}; choose one of {', '.join(TOPK_VARIANTS)}")


def _admit(
    rows: int, cols: int, k: object, variant: str, dtype: str, backend: str
) -> tuple[int, str, Launch, Launch, int]:
    """softmax_topk's checks on the shape, before anything is allocated: k, the backend, the size cap and the
    memory guard. Returns (k, the backend used, the launch, fast's launch for the unfused pair, the bytes needed)."""
    k = check_k(k, cols, K_MAX)
    used = resolve_backend(backend)
    launch = TOPK_VARIANTS[variant].launch(rows, cols, k, dtype)
    fast_launch = VARIANTS["fast"].launch(rows, cols, None, dtype)
    fused = TOPK_VARIANTS[variant].fused
    gpu = budget.topk_device_bytes(fused, launch, fast_launch, rows, cols, dtype, k)
    need = gpu if used == "cuda" else budget.topk_emulator_bytes(fused, launch, fast_launch, rows, cols, dtype)
    check_memory(rows, cols, DTYPES[dtype].itemsize, need, used, f"{dtype} softmax + top-k", gpu)
    return k, used, launch, fast_launch, need


def check_topk_fits(rows: int, cols: int, k: int, variant: str, dtype: str, backend: str) -> int:
    """What softmax_topk would refuse of a rows × cols input before it is made (the CLI asks first): raises
    InvalidInput or TooLarge; returns the bytes the run needs."""
    _check_variant(variant)
    rows, cols = check_shape(rows, cols)
    return _admit(rows, cols, k, variant, check_dtype(dtype), backend)[4]


def softmax_topk(x: np.ndarray, k: int, variant: str = "topk_fused", backend: str = "auto") -> TopkResult:
    """The k largest softmax probabilities of each row of x and their column indices.

    Parameters
    ----------
    x : 1-D or 2-D float32, float16 or ml_dtypes.bfloat16 logits.
    k : 1 to min(64, cols).
    variant : "topk_fused" or "topk_unfused" (explorer.TOPK_VARIANTS).
    backend : "cuda", "emulator" or "auto".
    """
    _check_variant(variant)
    dtype, rows, cols = check_logits(x)  # from the shape: nothing is copied before check_memory
    k, used, launch, fast_launch, need = _admit(rows, cols, k, variant, dtype, backend)
    fused = TOPK_VARIANTS[variant].fused
    with reserve.run_reservation(used, need):
        x2 = np.ascontiguousarray(x.reshape(rows, cols))
        values, indices = (
            cuda_topk.run_topk(fused, launch, x2, dtype, k, fast_launch)
            if used == "cuda"
            else fast_emulation.run_topk(fused, launch, x2, k, fast_launch)
        )
    shape = (*x.shape[:-1], k)
    return TopkResult(values.reshape(shape), indices.reshape(shape), used, variant, k, launch)


def reference_topk(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Float64 top-k: indices by the logits (larger first, ties to the lower index), probabilities from reference().
    x: a non-empty 1-D or 2-D array of numbers; k: 1 to cols. Raises InvalidInput otherwise."""
    x = check_numbers(x)
    if x.ndim > 2:
        raise InvalidInput(f"x must be 1-D or 2-D (rows × cols), got shape {x.shape}")
    k = check_k(k, x.shape[-1], x.shape[-1])
    x2 = np.asarray(x).reshape(-1, np.shape(x)[-1])
    indices = fast_emulation.top_indices(x2, k)
    return np.take_along_axis(reference(x2), indices, axis=1), indices


@dataclass(frozen=True)
class TopkReport:
    index_mismatch: int  # positions whose index differs from the reference's beyond a tie within rounding
    tie_swaps: int  # positions that differ only between probabilities equal after rounding to the dtype
    max_rel: float  # of the returned probabilities against float64 at the returned indices
    rows_checked: int  # rows with a finite reference (NaN/+inf rows have no meaningful top-k)


TIE_SLACK_TEXT = (
    "2 ulps of the dtype + 2·(8 + 2·ln(p_max / p)) fp32 units of roundoff, p_max the row's largest probability"
)


def tie_within_rounding(got_ref: np.ndarray, ref_values: np.ndarray, dtype: str) -> np.ndarray:
    """Whether a returned index whose reference probability is got_ref may stand where the reference
    has ref_values: the two are closer than the kernels' error can separate, or both flushed.

    The unfused pipeline selects on probabilities it computed: each within 8 + 2·(m - x) fp32 units of
    roundoff (the accumulation, exp2-based; x - m and its product with log2 e are each rounded, carrying
    (m - x)·u into the exponent) plus one rounding to the dtype of float64, so two probabilities within
    twice that of each other can come out in either order. m - x is ln(p_max / p), p_max the row's largest
    (ref_values[..., 0]: the reference's first). Below fp32's smallest normal the GPU flushes probabilities
    to 0 (-ftz=true), so there every order is a tie. The fused kernel selects on the logits themselves and
    never needs this.
    """
    flushed = FORMATS["float32"].smallest_normal
    ref_values = np.asarray(ref_values, dtype=np.float64)
    below_max = np.log(np.maximum(ref_values[..., :1], flushed) / np.maximum(ref_values, flushed))  # m - x
    units = 2 * (8 + 2 * below_max)
    slack = 2 * ulp(ref_values, FORMATS[dtype]) + units * FORMATS["float32"].unit_roundoff * np.abs(ref_values)
    return (np.abs(got_ref - ref_values) <= slack) | ((got_ref < flushed) & (ref_values < flushed))


def _check_result(result: object, x: object) -> None:
    """InvalidInput unless result is a TopkResult that softmax_topk could have returned for x."""
    if not isinstance(result, TopkResult):
        raise InvalidInput(f"result must be what softmax_topk returned, got {type(result).__name__}")
    _dtype, _rows, cols = check_logits(x)
    values, indices = result.values, result.indices
    shape = (*x.shape[:-1], result.k)
    if not (
        isinstance(values, np.ndarray)
        and isinstance(indices, np.ndarray)
        and whole(result.k)
        and 1 <= result.k <= cols
        and values.shape == shape
        and indices.shape == shape
        and indices.dtype.kind in "iu"
        and values.dtype in DTYPES.values()
    ):
        raise InvalidInput(
            f"result does not belong to x: x has shape {x.shape}, so values and indices must have "
            f"shape {shape} (k = {result.k!r})"
        )
    if indices.size and not 0 <= indices.min() <= indices.max() < cols:
        raise InvalidInput(f"result's indices run outside x's {cols} columns; pass the x that gave the result")


def topk_errors(result: TopkResult, x: np.ndarray) -> TopkReport:
    """Index agreement and error of a softmax_topk result against the float64 reference of its x.
    Raises InvalidInput where result and x do not belong together."""
    _check_result(result, x)
    x2 = np.asarray(x).reshape(-1, np.shape(x)[-1])
    k = result.k
    values = result.values.reshape(-1, k).astype(np.float64)
    indices = result.indices.reshape(-1, k)
    ref = reference(x2)
    finite = np.isfinite(ref).all(axis=1)
    ref_values, ref_indices = reference_topk(x2, k)
    got_ref = np.take_along_axis(ref, indices.astype(np.int64), axis=1)  # the reference at the returned indices
    differ = (indices != ref_indices) & finite[:, None]
    tie_swaps = int(np.sum(differ & tie_within_rounding(got_ref, ref_values, dtype_name(x.dtype))))
    fmt = FORMATS[dtype_name(result.values.dtype)]
    rel = np.abs(values - got_ref) / np.maximum(np.abs(got_ref), fmt.smallest_normal)
    return TopkReport(
        index_mismatch=int(np.sum(differ)) - tie_swaps,
        tie_swaps=tie_swaps,
        max_rel=float(np.max(np.where(finite[:, None], rel, 0.0), initial=0.0)),
        rows_checked=int(finite.sum()),
    )


__all__ = [
    "K_MAX",
    "TOPK_VARIANTS",
    "VOCABS",
    "TopkReport",
    "TopkResult",
    "reference_topk",
    "softmax_topk",
    "tie_within_rounding",
    "topk_errors",
    "topk_launch",
]

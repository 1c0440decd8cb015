"""The softmax + top-k benchmark: topk_fused and topk_unfused beside torch.softmax + torch.topk and
torch_lse (torch.topk on the logits with torch.logsumexp), and a copy of the logits: reading them once
at the copy's byte rate is the floor (half the copy's time), and every row is also a % of it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from . import devicetime, harness
from . import peers as torch_peers
from .backends import cuda, cuda_topk
from .errors import GPUUnavailable, KernelFailed
from .numerics import DTYPES
from .registry import VARIANTS
from .topk import TOPK_VARIANTS, VOCABS, TopkResult, topk_errors, topk_launch

TOPK_SHAPES = [(batch, vocab) for vocab in VOCABS for batch in (512, 64, 1)] + [
    (4096, 128256)
]  # the reference point: torch.softmax + torch.topk took 7.74 ms there


def bench_topk(
    shapes, ks=(8, 50), dtypes=("float32",), peers: bool = True, progress: Callable[[float, str], None] | None = None
) -> dict:
    """topk_fused, topk_unfused and the torch peers side by side, beside a copy of the logits (the
    read-once floor is half the copy's time); each validated on the first rows of its input (indices
    exact against float64), then timed with CUDA events and in device time."""
    if not cuda.available():
        raise GPUUnavailable(f"benchmarks need a GPU: {cuda.unavailable_reason()}")
    shapes, ks = list(shapes), list(ks)
    results = []
    jobs = [(shape, dtype) for dtype in dtypes for shape in shapes]
    for n, ((rows, cols), dtype) in enumerate(jobs):
        if progress:
            progress(n / len(jobs), f"top-k {dtype} {rows}×{cols}")
        results += _bench_topk_shape(rows, cols, ks, dtype, n, peers)
        harness.free()
    if progress:
        progress(1.0, "done")
    return {
        "schema": harness.SCHEMA,
        "meta": harness.meta(),
        "config": {"topk": ks, "shapes": [list(s) for s in shapes], "dtypes": list(dtypes), "peers": peers},
        "results": results,
    }


@dataclass
class _Shape:
    """One benchmarked shape's inputs: `buffers` rotated copies of the logits (together over 4× the L2),
    and the first rows of the first copy on the host, which every kernel's answer is checked against."""

    rows: int
    cols: int
    dtype: str
    xs: list
    x_host: np.ndarray

    @property
    def buffers(self) -> int:
        return len(self.xs)

    def check(self, name: str, k: int, launch, values, indices) -> float:
        """The answer's largest relative error against float64; KernelFailed on any wrong index."""
        checked = len(self.x_host)
        got = TopkResult(
            cuda.from_device(values[:checked], DTYPES[self.dtype]),
            cuda.cp.asnumpy(indices[:checked]),
            "cuda",
            name,
            k,
            launch,
        )
        report = topk_errors(got, self.x_host)
        if report.index_mismatch:
            raise KernelFailed(
                f"{name} top-{k} on {self.rows}×{self.cols} {self.dtype}: {report.index_mismatch} wrong indices "
                f"in the first {checked} rows"
            )
        return report.max_rel


def _bench_topk_shape(rows: int, cols: int, ks: list[int], dtype: str, seed: int, peers: bool) -> list[dict]:
    shape = _inputs(rows, cols, dtype, seed)
    copy_row, copy = _copy(shape)
    results, timed = [copy_row], [(copy_row, copy, devicetime.COPY)]
    tx = [torch_peers.as_torch(x, dtype) for x in shape.xs] if peers and torch_peers.torch_module() is not None else []
    for k in ks:
        runs = _variants(shape, k) + (_peers(shape, tx, k) if tx else [])
        results += [row for row, _run in runs]
        timed += [(row, run, devicetime.KERNELS) for row, run in runs if run is not None]
    harness.add_device_times(timed, shape.buffers)
    for r in results[1:]:
        add_floor(r, copy_row)
    return results


def _inputs(rows: int, cols: int, dtype: str, seed: int) -> _Shape:
    cp = cuda.cp
    x32 = cp.random.default_rng(seed).standard_normal((rows, cols), dtype=cp.float32) * 3
    bytes_in = rows * cols * DTYPES[dtype].itemsize
    buffers = harness.rotation_buffers(bytes_in, 16)
    xs = [harness.round_on_device(cp.roll(x32, i, axis=1), dtype) for i in range(buffers)]
    return _Shape(rows, cols, dtype, xs, cuda.from_device(xs[0][: min(rows, 8)], DTYPES[dtype]))


def _copy(shape: _Shape) -> tuple[dict, Callable[[int], None]]:
    """The copy of the logits (the floor's byte rate), timed; and the launch that device time repeats."""
    ys = [cuda.cp.empty_like(x) for x in shape.xs]

    def copy(i):
        cuda.cp.copyto(ys[i], shape.xs[i])

    times = harness.time_launches(copy, shape.buffers)
    moved = 2 * shape.xs[0].nbytes
    return topk_row(
        "copy", "copy", shape.dtype, shape.rows, shape.cols, None, times, moved, 0.0, "device-to-device copy"
    ), copy


def _variants(shape: _Shape, k: int) -> list[tuple[dict, Callable[[int], None]]]:
    """Each top-k variant checked (fresh, poisoned outputs), then timed on the allocation-free path."""
    rows, cols, dtype = shape.rows, shape.cols, shape.dtype
    fast = VARIANTS["fast"].launch(rows, cols, None, dtype)
    runs = []
    for key, variant in TOPK_VARIANTS.items():
        launch = variant.launch(rows, cols, k, dtype)
        fused = variant.fused
        max_rel = shape.check(
            key, k, launch, *cuda_topk.topk_on_device(fused, launch, shape.xs[0], rows, cols, dtype, k, fast)
        )
        out = cuda.cp.empty((rows, k), shape.xs[0].dtype), cuda.cp.empty((rows, k), np.int32)

        def run_variant(i, fused=fused, launch=launch, out=out):
            cuda_topk.topk_on_device(fused, launch, shape.xs[i], rows, cols, dtype, k, fast, False, out)

        times = harness.time_launches(run_variant, shape.buffers)
        moved = variant.bytes_moved(rows, cols, k, dtype)
        runs.append(
            (topk_row(key, "variant", dtype, rows, cols, k, times, moved, max_rel, launch.describe()), run_variant)
        )
    return runs


def _peers(shape: _Shape, tx: list, k: int) -> list[tuple[dict, Callable[[int], None] | None]]:
    """The torch formulations, checked and timed as the variants are; a peer that fails on this shape gives an
    error row (and nothing for device time to repeat)."""
    rows, cols, dtype = shape.rows, shape.cols, shape.dtype
    launch = topk_launch(rows, cols, k, dtype)
    runs = []
    for peer in torch_peers.topk_peers(k):
        max_rel = None

        def run(i, run=peer.run):
            run(tx[i])

        try:
            values, indices = peer.run(tx[0])
            max_rel = shape.check(
                peer.name, k, launch, torch_peers.as_cupy(values, dtype), cuda.cp.from_dlpack(indices)
            )
            times = harness.time_launches(run, shape.buffers)
        except Exception as exc:  # a peer's failure on one shape is a result, not the end of the run
            error = f"{type(exc).__name__}: {exc}"
            row = harness.error_row(
                peer.name, dtype, "float32", rows, cols, peer.version, peer.label, error, max_rel, k=k
            )
            runs.append((row, None))
            continue
        moved = peer.bytes_moved(rows, cols, k, dtype)
        row = topk_row(peer.name, "peer", dtype, rows, cols, k, times, moved, max_rel, peer.label, peer.version)
        runs.append((row, run))
    return runs


def add_floor(row: dict, copy_row: dict) -> None:
    """The read-once floor: the logits' bytes at the copy's byte rate (read + write), i.e. half the
    copy's time; and the row's time as a percentage of it, from event time and from device time."""
    row["floor_us"] = copy_row["median_us"] / 2
    row["pct_floor"] = 100 * row["floor_us"] / row["median_us"] if row["median_us"] else None
    copy_device = copy_row.get("device_us")
    row["floor_device_us"] = copy_device / 2 if copy_device else None
    row["pct_floor_device"] = (
        100 * row["floor_device_us"] / row["device_us"] if row["floor_device_us"] and row.get("device_us") else None
    )


def topk_row(name, kind, dtype, rows, cols, k, times_us, moved, max_rel, launch, version=None) -> dict:
    """A timed row of the top-k benchmark: state in fp32, no block size, k beside the shape; a copy is 100 % of
    itself."""
    pct_copy = 100.0 if kind == "copy" else None
    shape = (dtype, "float32", rows, cols, 0)  # top-k's state is fp32, and it takes no block size
    return harness.result_row(name, kind, *shape, times_us, moved, pct_copy, None, None, max_rel, launch, version, k=k)

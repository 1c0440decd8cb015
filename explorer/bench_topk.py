"""The softmax + top-k benchmark: topk_fused and topk_unfused beside torch.softmax + torch.topk and
torch_lse (torch.topk on the logits with torch.logsumexp), and a copy of the logits: reading them once
at the copy's byte rate is the floor (half the copy's time), and every row is also a % of it."""

from __future__ import annotations

import math
from collections.abc import Callable

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


def _bench_topk_shape(rows: int, cols: int, ks: list[int], dtype: str, seed: int, peers: bool) -> list[dict]:
    cp = cuda.cp
    x32 = cp.random.default_rng(seed).standard_normal((rows, cols), dtype=cp.float32) * 3
    bytes_in = rows * cols * DTYPES[dtype].itemsize
    buffers = max(1, min(16, math.ceil(4 * cuda.device_info()["l2_bytes"] / bytes_in)))
    xs = [harness.round_on_device(cp.roll(x32, i, axis=1), dtype) for i in range(buffers)]
    ys = [cp.empty_like(x) for x in xs]
    fast = VARIANTS["fast"].launch(rows, cols, None, dtype)
    check_rows = min(rows, 8)
    x_host = cuda.from_device(xs[0][:check_rows], DTYPES[dtype])

    def copy(i):
        cp.copyto(ys[i], xs[i])

    results = [
        _topk_row(
            "copy",
            "copy",
            dtype,
            rows,
            cols,
            None,
            harness.time_launches(copy, buffers),
            2 * bytes_in,
            0.0,
            "device-to-device copy",
        )
    ]
    timed = [(results[0], copy, devicetime.COPY)]

    def check(name, k, launch, values, indices):
        got = TopkResult(
            cuda.from_device(values[:check_rows], DTYPES[dtype]),
            cp.asnumpy(indices[:check_rows]),
            "cuda",
            name,
            k,
            launch,
        )
        report = topk_errors(got, x_host)
        if report.index_mismatch:
            raise KernelFailed(
                f"{name} top-{k} on {rows}×{cols} {dtype}: {report.index_mismatch} wrong indices "
                f"in the first {check_rows} rows"
            )
        return report.max_rel

    tx = [torch_peers.as_torch(x, dtype) for x in xs] if peers and torch_peers.torch_module() is not None else []
    for k in ks:
        launch = topk_launch(rows, cols, k, dtype)
        for key, variant in TOPK_VARIANTS.items():
            fused = variant.fused
            max_rel = check(key, k, launch, *cuda_topk.topk_on_device(fused, launch, xs[0], rows, cols, dtype, k, fast))

            out = cp.empty((rows, k), xs[0].dtype), cp.empty((rows, k), np.int32)

            def run_variant(i, fused=fused, launch=launch, k=k, out=out):
                cuda_topk.topk_on_device(fused, launch, xs[i], rows, cols, dtype, k, fast, False, out)

            results.append(
                _topk_row(
                    key,
                    "variant",
                    dtype,
                    rows,
                    cols,
                    k,
                    harness.time_launches(run_variant, buffers),
                    variant.bytes_moved(rows, cols, k, dtype),
                    max_rel,
                    launch.describe(),
                )
            )
            timed.append((results[-1], run_variant, devicetime.KERNELS))
        for peer in torch_peers.topk_peers(k) if tx else []:
            max_rel = None
            try:
                values, indices = peer.run(tx[0])
                max_rel = check(peer.name, k, launch, torch_peers.as_cupy(values, dtype), cp.from_dlpack(indices))
                times = harness.time_launches(lambda i, run=peer.run: run(tx[i]), buffers)
            except Exception as exc:  # a peer's failure on one shape is a result, not the end of the run
                results.append(
                    harness.error_row(
                        peer.name,
                        dtype,
                        "float32",
                        rows,
                        cols,
                        peer.version,
                        peer.label,
                        f"{type(exc).__name__}: {exc}",
                        max_rel,
                        k=k,
                    )
                )
                continue
            results.append(
                _topk_row(
                    peer.name,
                    "peer",
                    dtype,
                    rows,
                    cols,
                    k,
                    times,
                    peer.bytes_moved(rows, cols, k, dtype),
                    max_rel,
                    peer.label,
                    peer.version,
                )
            )
            timed.append((results[-1], lambda i, run=peer.run: run(tx[i]), devicetime.KERNELS))
    harness.add_device_times(timed, buffers)
    copy_row = results[0]
    for r in results[1:]:
        add_floor(r, copy_row)
    return results


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


def _topk_row(name, kind, dtype, rows, cols, k, times_us, moved, max_rel, launch, version=None) -> dict:
    median = float(np.median(times_us))
    return {
        "name": name,
        "kind": kind,
        "dtype": dtype,
        "acc": "float32",
        "rows": rows,
        "cols": cols,
        "block_size": 0,
        "k": k,
        "median_us": median,
        "p10_us": float(np.percentile(times_us, 10)),
        "p90_us": float(np.percentile(times_us, 90)),
        "gbps": moved / median / 1e3,
        "pct_copy": 100.0 if kind == "copy" else None,
        "bytes_moved": moved,
        "reads_per_element": None,
        "writes_per_element": None,
        "max_rel": max_rel,
        "launch": launch,
        "version": version,
        "error": None,
    }

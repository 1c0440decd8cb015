"""The benchmark harness: validate, warm up, time with CUDA events, report against copy bandwidth.

Softmax is memory-bound: the floor is reading x once and writing y once, so every result is
also given as GB/s = 2·numel·itemsize / time and as a percentage of a device-to-device copy of the
same bytes, measured in the same run. Inputs are rotated among enough buffers that they never sit
in L2 between launches. Peers (cupyx.scipy.special.softmax, torch.softmax) are timed the same way.
"""

from __future__ import annotations

import datetime
import json
import math
import time
from collections.abc import Callable, Iterable

import numpy as np

from .backends import cuda
from .errors import GPUUnavailable, InvalidInput, KernelFailed
from .numerics import DTYPES, FORMATS
from .registry import VARIANTS

SCHEMA = "softmax-explorer-bench/1"
RESULT_FIELDS = ("name", "kind", "dtype", "acc", "rows", "cols", "block_size", "median_us", "p10_us", "p90_us",
                 "gbps", "pct_copy", "bytes_moved", "reads_per_element", "writes_per_element", "max_rel")
# The Triton tutorial's sweep: 2^27 elements at every width, rows shrinking as cols grow.
SWEEP_ELEMENTS = 2**27
SWEEP_COLS = (128, 256, 512, 1000, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144)
LONG_ROW_SHAPES = ((1, 2**20), (4, 2**20), (1, 2**24), (8, 2**22))


def _torch():
    try:
        import torch

        return torch if torch.cuda.is_available() else None
    except ImportError:
        return None


def meta() -> dict:
    info = cuda.device_info()
    torch = _torch()
    return {
        "gpu": info["gpu"], "compute_capability": info["compute_capability"], "l2_bytes": info["l2_bytes"],
        "cuda_runtime": info["cuda_runtime"], "cuda_driver": info["cuda_driver"], "cupy": info["cupy"],
        "torch": torch.__version__ if torch else None,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def _time_launches(launch: Callable[[int], None], buffers: int, min_repeats: int = 20, max_repeats: int = 200,
                   budget_s: float = 0.5) -> np.ndarray:
    """Per-launch GPU times in µs (CUDA events), after a warm-up, rotating over `buffers` inputs."""
    cp = cuda.cp
    launch(0)  # warm-up: module load, allocator, clocks
    cp.cuda.get_current_stream().synchronize()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    launch(1 % buffers)
    end.record()
    end.synchronize()
    first_ms = cp.cuda.get_elapsed_time(start, end)
    repeats = int(min(max_repeats, max(min_repeats, budget_s * 1e3 / max(first_ms, 1e-3))))
    if first_ms > 200:  # a slow teaching kernel on a big problem: a few launches say enough
        repeats = 3
    events = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(repeats)]
    for i, (s, e) in enumerate(events):
        s.record()
        launch(i % buffers)
        e.record()
    events[-1][1].synchronize()
    return np.array([cp.cuda.get_elapsed_time(s, e) * 1e3 for s, e in events])


def _row(name, kind, dtype, acc, rows, cols, block, times_us, copy_gbps, reads, writes, max_rel, launch="") -> dict:
    moved = 2 * rows * cols * DTYPES[dtype].itemsize  # the floor: read x once, write y once
    median = float(np.median(times_us))
    gbps = moved / median / 1e3
    return {
        "name": name, "kind": kind, "dtype": dtype, "acc": acc, "rows": rows, "cols": cols, "block_size": block,
        "median_us": median, "p10_us": float(np.percentile(times_us, 10)), "p90_us": float(np.percentile(times_us, 90)),
        "gbps": gbps, "pct_copy": 100 * gbps / copy_gbps if copy_gbps else None, "bytes_moved": moved,
        "reads_per_element": reads, "writes_per_element": writes, "max_rel": max_rel, "launch": launch,
    }


def _max_rel_device(y, ref64, dtype: str) -> float:
    """max |y - ref| / max(|ref|, smallest normal) over elements finite in both, on the GPU."""
    cp = cuda.cp
    got = (y.view(cp.uint16).astype(cp.uint32) << 16).view(cp.float32).astype(cp.float64) if dtype == "bfloat16" \
        else y.astype(cp.float64)
    finite = cp.isfinite(got) & cp.isfinite(ref64)
    rel = cp.where(finite, cp.abs(got - ref64) / cp.maximum(cp.abs(ref64), FORMATS[dtype].smallest_normal), 0)
    mismatch = int(cp.sum(cp.isnan(got) != cp.isnan(ref64)))
    return float("nan") if mismatch else float(rel.max())


def _peers(dtype: str):
    """(name, fn(x_dev, y_dev)) for the peers that take this dtype."""
    peers = []
    if dtype != "bfloat16":  # CuPy has no bfloat16
        from cupyx.scipy.special import softmax as cupyx_softmax

        peers.append(("cupyx", lambda x, y: cupyx_softmax(x, axis=1)))
    torch = _torch()
    if torch is not None:
        torch_dtype = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]

        def torch_softmax(x, y):
            tx = torch.from_dlpack(x)
            if dtype == "bfloat16":
                tx = tx.view(torch_dtype)
            ty = torch.from_dlpack(y).view(torch_dtype) if dtype == "bfloat16" else torch.from_dlpack(y)
            torch.softmax(tx, dim=1, out=ty)

        peers.append(("torch", torch_softmax))
    return peers


def bench_shape(variants: Iterable[str], rows: int, cols: int, dtype: str, acc: str = "float32",
                block_size: int | None = None, peers: bool = True, seed: int = 0) -> list[dict]:
    """Copy, then every variant and peer, on one shape: validated first, then timed."""
    cp = cuda.cp
    itemsize = DTYPES[dtype].itemsize
    bytes_in = rows * cols * itemsize
    l2 = cuda.device_info()["l2_bytes"]
    buffers = max(1, min(64, math.ceil(4 * l2 / bytes_in)))  # the rotation covers 4x L2
    rng = cp.random.default_rng(seed)
    xs = [_round_on_device(rng.standard_normal((rows, cols), dtype=cp.float32), dtype) for _ in range(buffers)]
    ys = [cp.empty_like(x) for x in xs]
    ref64 = _reference_device(xs[0], dtype)

    copy_times = _time_launches(lambda i: cp.copyto(ys[i], xs[i]), buffers)
    copy_gbps = 2 * bytes_in / float(np.median(copy_times)) / 1e3
    results = [_row("copy", "copy", dtype, acc, rows, cols, 0, copy_times, copy_gbps, 1, 1, 0.0)]
    for key in variants:
        v = VARIANTS[key]
        if dtype not in v.dtypes or acc not in v.accumulators:
            continue
        block = v.check_block_size(block_size if v.takes_block_size else None)
        geometry = v.launch(rows, cols, block, dtype)
        y = ys[0]
        y.fill(cuda.poison_value(DTYPES[dtype]))
        cuda.launch(v, geometry, xs[0], y, rows, cols, dtype, acc)
        max_rel = _max_rel_device(y, ref64, dtype)
        unwritten = int((y == cuda.poison_value(DTYPES[dtype])).sum())
        if unwritten:
            raise KernelFailed(f"{key} left {unwritten} outputs unwritten on {rows}×{cols} {dtype}")
        times = _time_launches(
            lambda i, v=v, g=geometry: cuda.launch(v, g, xs[i], ys[i], rows, cols, dtype, acc), buffers)
        results.append(_row(key, "variant", dtype, acc, rows, cols, block, times, copy_gbps,
                            v.reads_per_element, v.writes_per_element, max_rel, geometry.describe()))
    if peers:
        for name, fn in _peers(dtype):
            y = ys[0]
            y.fill(cuda.poison_value(DTYPES[dtype]))
            out = fn(xs[0], y)
            max_rel = _max_rel_device(y if out is None else out, ref64, dtype)
            times = _time_launches(lambda i, fn=fn: fn(xs[i], ys[i]), buffers)
            results.append(_row(name, "peer", dtype, acc, rows, cols, 0, times, copy_gbps, None, None, max_rel))
    return results


def _round_on_device(x32, dtype: str):
    """fp32 -> dtype on the GPU, round to nearest even; bfloat16 as its uint16 bits."""
    cp = cuda.cp
    if dtype == "float32":
        return x32
    if dtype == "float16":
        return x32.astype(cp.float16)
    bits = x32.view(cp.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(cp.uint16)


def _reference_device(x, dtype: str):
    cp = cuda.cp
    x64 = (x.view(cp.uint16).astype(cp.uint32) << 16).view(cp.float32).astype(cp.float64) if dtype == "bfloat16" \
        else x.astype(cp.float64)
    e = cp.exp(x64 - x64.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def run(variants: Iterable[str], shapes: Iterable[tuple[int, int]], dtypes: Iterable[str] = ("float32",),
        acc: str = "float32", block_size: int | None = None, peers: bool = True,
        progress: Callable[[float, str], None] | None = None) -> dict:
    """Benchmark variants (and peers) over shapes × dtypes on the GPU; returns a results document."""
    if not cuda.available():
        raise GPUUnavailable(f"benchmarks need a GPU: {cuda.unavailable_reason()}")
    variants = list(variants)
    for key in variants:
        if key not in VARIANTS:
            raise InvalidInput(f"unknown variant {key!r}; choose from {', '.join(VARIANTS)}")
    jobs = [(shape, dtype) for dtype in dtypes for shape in shapes]
    for _, dtype in jobs:
        if dtype not in DTYPES:
            raise InvalidInput(f"unknown dtype {dtype!r}")
    results = []
    started = time.time()
    for i, ((rows, cols), dtype) in enumerate(jobs):
        if progress:
            progress(i / len(jobs), f"{dtype} {rows}×{cols} ({time.time() - started:.0f} s)")
        results += bench_shape(variants, rows, cols, dtype, acc, block_size, peers)
        cuda.cp.get_default_memory_pool().free_all_blocks()  # this shape's buffers are gone
    if progress:
        progress(1.0, f"done in {time.time() - started:.0f} s")
    return {"schema": SCHEMA, "meta": meta(), "config": {"variants": variants, "shapes": [list(s) for s in shapes],
            "dtypes": list(dtypes), "acc": acc, "block_size": block_size, "peers": peers}, "results": results}


def sweep_shapes(kind: str) -> list[tuple[int, int]]:
    """Named sweeps: 'cols' (2^27 elements, Triton-tutorial style), 'rows' (long rows), 'block' (one shape)."""
    if kind == "cols":
        return [(max(1, SWEEP_ELEMENTS // c), c) for c in SWEEP_COLS]
    if kind == "rows":
        return list(LONG_ROW_SHAPES)
    raise InvalidInput(f"unknown sweep {kind!r}; choose cols or rows")


TOPK_SHAPES = [(batch, vocab) for vocab in (32000, 50257, 128256, 151936, 262144) for batch in (512, 1)] + [
    (4096, 128256)]  # the reference point: torch.softmax + torch.topk took 7.74 ms there


def bench_topk(shapes, ks=(8, 50), dtypes=("float32",), peers: bool = True,
               progress: Callable[[float, str], None] | None = None) -> dict:
    """topk_fused, topk_unfused and torch.softmax + torch.topk, side by side; validated on the first
    rows of each input (indices exact against float64), then timed with CUDA events."""
    if not cuda.available():
        raise GPUUnavailable(f"benchmarks need a GPU: {cuda.unavailable_reason()}")
    torch = _torch() if peers else None
    results = []
    jobs = [(shape, k, dtype) for dtype in dtypes for shape in shapes for k in ks]
    for n, ((rows, cols), k, dtype) in enumerate(jobs):
        if progress:
            progress(n / len(jobs), f"top-{k} {dtype} {rows}×{cols}")
        results += _bench_topk_shape(rows, cols, k, dtype, n, torch)
        cuda.cp.get_default_memory_pool().free_all_blocks()
    if progress:
        progress(1.0, "done")
    return {"schema": SCHEMA, "meta": meta(), "config": {"topk": list(ks), "shapes": [list(s) for s in shapes],
            "dtypes": list(dtypes)}, "results": results}


def _bench_topk_shape(rows: int, cols: int, k: int, dtype: str, seed: int, torch) -> list[dict]:
    from .topk import TOPK_VARIANTS, TopkResult, topk_errors, topk_launch

    cp = cuda.cp
    x32 = cp.random.default_rng(seed).standard_normal((rows, cols), dtype=cp.float32) * 3
    bytes_in = rows * cols * DTYPES[dtype].itemsize
    buffers = max(1, min(16, math.ceil(4 * cuda.device_info()["l2_bytes"] / bytes_in)))
    xs = [_round_on_device(cp.roll(x32, i, axis=1), dtype) for i in range(buffers)]
    launch = topk_launch(rows, cols, k, dtype)
    fast = VARIANTS["fast"].launch(rows, cols, None, dtype)
    check_rows = min(rows, 8)
    x_host = cuda.from_device(xs[0][:check_rows], DTYPES[dtype])
    results = []
    for key, variant in TOPK_VARIANTS.items():
        fused = key == "topk_fused"
        values, indices = cuda.topk_on_device(fused, launch, xs[0], rows, cols, dtype, k, fast)
        got = TopkResult(cuda.from_device(values[:check_rows], DTYPES[dtype]), cp.asnumpy(indices[:check_rows]),
                         "cuda", key, k, launch)
        report = topk_errors(got, x_host)
        if report.index_mismatch:
            raise KernelFailed(f"{key} top-{k} on {rows}×{cols} {dtype}: {report.index_mismatch} wrong indices")
        times = _time_launches(
            lambda i, fused=fused: cuda.topk_on_device(fused, launch, xs[i], rows, cols, dtype, k, fast, False), buffers)
        results.append(_topk_row(key, dtype, rows, cols, k, times, variant.bytes_moved(rows, cols, k, dtype),
                                 report.max_rel, launch.describe()))
    if torch is not None:
        torch_dtype = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]
        tx = [torch.from_dlpack(x).view(torch_dtype) if dtype == "bfloat16" else torch.from_dlpack(x) for x in xs]
        times = _time_launches(lambda i: torch.topk(torch.softmax(tx[i], dim=1), k, dim=1), buffers)
        moved = TOPK_VARIANTS["topk_unfused"].bytes_moved(rows, cols, k, dtype)
        results.append(_topk_row("torch", dtype, rows, cols, k, times, moved, None, "torch.softmax + torch.topk"))
    return results


def _topk_row(name, dtype, rows, cols, k, times_us, moved, max_rel, launch) -> dict:
    median = float(np.median(times_us))
    return {
        "name": name, "kind": "peer" if name == "torch" else "variant", "dtype": dtype, "acc": "float32",
        "rows": rows, "cols": cols, "block_size": 0, "k": k, "median_us": median,
        "p10_us": float(np.percentile(times_us, 10)), "p90_us": float(np.percentile(times_us, 90)),
        "gbps": moved / median / 1e3, "pct_copy": None, "bytes_moved": moved,
        "reads_per_element": None, "writes_per_element": None, "max_rel": max_rel, "launch": launch,
    }


def load(data: bytes | str | dict) -> dict:
    """Load a results document (JSON text, bytes or a dict) and check its shape."""
    try:
        doc = data if isinstance(data, dict) else json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"not a results file (JSON expected): {exc}") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise InvalidInput(f"not a softmax-explorer results file (schema {SCHEMA!r} expected)")
    results = doc.get("results")
    if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
        raise InvalidInput("results file has no list of results")
    for r in results:
        missing = [f for f in RESULT_FIELDS if f not in r]
        if missing:
            raise InvalidInput(f"a result lacks {', '.join(missing)}")
    if not isinstance(doc.get("meta"), dict):
        raise InvalidInput("results file has no meta section (GPU, versions, date)")
    return doc


def dumps(doc: dict) -> str:
    return json.dumps(doc, indent=1, allow_nan=True)

"""What the softmax and top-k benchmarks share: the run's meta, CUDA-event timing of a launch rotated
over input buffers, device time for a shape's timed rows, rows for peers that failed."""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable

import numpy as np

from . import devicetime, peers
from .backends import cuda

SCHEMA = "softmax-explorer-bench/1"
# What a result row measures: a row for a peer that could not run has these empty.
EVENT_FIELDS = ("median_us", "p10_us", "p90_us")  # CUDA-event time per launch: median and spread
MEASURED_FIELDS = (
    *EVENT_FIELDS,
    "gbps",
    "pct_copy",
    "bytes_moved",
    "reads_per_element",
    "writes_per_element",
)
DEVICE_FIELDS = ("device_us", "device_p10_us", "device_p90_us", "gbps_device", "pct_copy_device")
# A row to time in device time after the shape's event timings: (row, launch(i), trace categories counted).
Timed = tuple[dict, Callable[[int], object], tuple[str, ...]]


def meta() -> dict:
    info = cuda.device_info()
    torch = peers.torch_module()
    return {
        "gpu": info["gpu"],
        "compute_capability": info["compute_capability"],
        "l2_bytes": info["l2_bytes"],
        "cuda_runtime": info["cuda_runtime"],
        "cuda_driver": info["cuda_driver"],
        "cupy": info["cupy"],
        "torch": torch.__version__ if torch else None,
        "device_time": "torch.profiler (CUPTI kernel records)" if devicetime.profiler() else None,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def rotation_buffers(bytes_in: int, cap: int, least: int = 1) -> int:
    """How many copies of an input a timing rotates over so that together they cover 4x this GPU's L2 (each
    launch then reads DRAM, not what the launch before left in L2), from `least` to `cap` copies."""
    return max(least, min(cap, math.ceil(4 * cuda.device_info()["l2_bytes"] / bytes_in)))


def sync() -> None:
    cuda.cp.cuda.Device().synchronize()


def time_launches(
    launch: Callable[[int], None], buffers: int, min_repeats: int = 20, max_repeats: int = 200, budget_s: float = 0.5
) -> np.ndarray:
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


def round_on_device(x32, dtype: str):
    """fp32 -> dtype on the GPU, round to nearest even; bfloat16 as its uint16 bits."""
    cp = cuda.cp
    if dtype == "float32":
        return x32
    if dtype == "float16":
        return x32.astype(cp.float16)
    bits = x32.view(cp.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(cp.uint16)


def _problem_fields(name: str, kind: str, dtype: str, acc: str, rows: int, cols: int, block_size: int) -> dict:
    """A result row's first fields: the kernel and the problem it ran."""
    return {
        "name": name,
        "kind": kind,
        "dtype": dtype,
        "acc": acc,
        "rows": rows,
        "cols": cols,
        "block_size": block_size,
    }


def result_row(
    name: str,
    kind: str,
    dtype: str,
    acc: str,
    rows: int,
    cols: int,
    block_size: int,
    times_us: np.ndarray,
    moved: int,
    pct_copy: float | None,
    reads: int | None,
    writes: int | None,
    max_rel: float,
    launch: str,
    version: str | None,
    **extra,
) -> dict:
    """A timed row: its event times' median and spread, and the byte rate at the median."""
    median, p10, p90 = devicetime.spread(times_us)
    return {
        **_problem_fields(name, kind, dtype, acc, rows, cols, block_size),
        **extra,
        "median_us": median,
        "p10_us": p10,
        "p90_us": p90,
        "gbps": moved / median / 1e3,
        "pct_copy": pct_copy,
        "bytes_moved": moved,
        "reads_per_element": reads,
        "writes_per_element": writes,
        "max_rel": max_rel,
        "launch": launch,
        "version": version,
        "error": None,
    }


def error_row(
    name: str,
    dtype: str,
    acc: str,
    rows: int,
    cols: int,
    version: str | None,
    launch: str,
    error: str,
    max_rel: float | None = None,
    kind: str = "peer",
    **extra,
) -> dict:
    """A peer (or variant) that could not run, or ran wrong, on this shape: the row says why, with no times."""
    empty = dict.fromkeys((*MEASURED_FIELDS, *DEVICE_FIELDS))
    return {
        **_problem_fields(name, kind, dtype, acc, rows, cols, 0),
        **extra,
        **empty,
        "max_rel": max_rel,
        "launch": launch,
        "version": version,
        "error": error[:300],
    }


def median_us(launch: Callable[[int], None], buffers: int) -> float:
    """The median of time_launches: event time per call, in µs."""
    return float(np.median(time_launches(launch, buffers)))


def device_us(
    launch: Callable[[int], None], buffers: int, event_us: float, categories=devicetime.KERNELS
) -> float | None:
    """Device time per call of `launch` from CUPTI kernel records (torch.profiler), in batches sized by its
    event time `event_us`; None without torch. What the tuning scripts print beside event time."""
    found = devicetime.measure(launch, buffers, devicetime.calls_per_batch(event_us), sync, categories)
    return found["device_us"] if found else None


def add_device_times(timed: list[Timed], buffers: int) -> None:
    """Device time for every timed row (after all event timings of the shape, so profiling never
    overlaps them), then GB/s and % of copy from it; the copy row comes first."""
    for row, launch, categories in timed:
        stats = devicetime.measure(launch, buffers, devicetime.calls_per_batch(row["median_us"]), sync, categories)
        row.update(stats or dict.fromkeys(("device_us", "device_p10_us", "device_p90_us")))
        row["gbps_device"] = row["bytes_moved"] / row["device_us"] / 1e3 if row["device_us"] else None
    copy_device = timed[0][0]["device_us"]
    for row, _, _ in timed:
        row["pct_copy_device"] = 100 * copy_device / row["device_us"] if copy_device and row["device_us"] else None


def free() -> None:
    """Give back this shape's buffers (CuPy's pool and torch's cache share the card)."""
    cuda.cp.get_default_memory_pool().free_all_blocks()
    torch = peers.torch_module()
    if torch is not None:
        torch.cuda.empty_cache()

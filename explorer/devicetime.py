"""Device time from CUPTI activity records (torch.profiler), beside the CUDA-event time per launch.

CUDA events around each launch time what a Python loop sees: the GPU work plus any gap while the
next launch is being issued. The profiler's activity records hold only the GPU's execution: for a
batch of calls we sum the durations of the recorded kernels (for the copy, the memcpy too) and
divide by the calls; the median over several batches is the device time, p10/p90 its spread.
One profiling session holds all batches of a row, separated by an idle gap of GAP_S, which is how
the records are told apart afterwards (a row whose batches cannot be told apart gets no device time).

The aggregation (`split_batches`, `per_call_us`, `summarize`) is pure: it reads Chrome-trace events,
the format torch.profiler exports, so it is tested on the CPU with made-up events.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Sequence

import numpy as np

KERNELS = ("kernel",)  # Chrome-trace categories counted for a kernel; memset/memcpy of setup are not
COPY = ("kernel", "gpu_memcpy")  # the copy baseline is a memcpy (or a copy kernel): count either
BATCHES = 5
BATCH_US = 20_000  # GPU time aimed at per profiled batch
MAX_CALLS = 100
GAP_S = 0.005  # idle time between batches; a gap of at least half of it separates two batches


def _counted(e: dict, categories: Sequence[str]) -> bool:
    return e.get("ph") == "X" and e.get("cat") in categories


def per_call_us(events: Iterable[dict], calls: int, categories: Sequence[str] = KERNELS) -> float | None:
    """Sum of the durations (µs) of the complete events in `categories`, per call; None if there are none."""
    total, seen = 0.0, 0
    for e in events:
        if _counted(e, categories):
            total += float(e.get("dur", 0.0))
            seen += 1
    return total / calls if seen else None


def counted_records(events: Iterable[dict], categories: Sequence[str] = KERNELS) -> list[dict]:
    """The complete events in `categories`, in time order."""
    return sorted((e for e in events if _counted(e, categories)), key=lambda e: float(e["ts"]))


def split_batches(
    events: Iterable[dict], batches: int, categories: Sequence[str] = KERNELS, min_gap_us: float = GAP_S * 1e6 / 2
) -> list[list[dict]] | None:
    """The counted records of one session, in time order, cut into `batches` groups of equal size (every batch
    makes the same launches); None unless they divide evenly and each cut falls in an idle gap of at least
    min_gap_us (the sleep between batches). An idle gap inside a batch (a host stall while CUPTI handles its
    buffers: 2.4-3.8 ms seen on the H200) is no cut, and changes nothing: durations are summed."""
    records = counted_records(events, categories)
    if not records or len(records) % batches:
        return None
    size = len(records) // batches
    for cut in range(size, len(records), size):
        before, after = records[cut - 1], records[cut]
        if float(after["ts"]) - float(before["ts"]) - float(before["dur"]) < min_gap_us:
            return None
    return [records[first : first + size] for first in range(0, len(records), size)]


def summarize(per_batch: Sequence[float | None]) -> dict[str, float] | None:
    """Median and p10/p90 over batches; None unless every batch recorded something."""
    if not per_batch or any(v is None for v in per_batch):
        return None
    return dict(zip(("device_us", "device_p10_us", "device_p90_us"), spread(per_batch), strict=True))


def spread(times_us: Sequence[float]) -> tuple[float, float, float]:
    """The median, 10th and 90th percentiles of a timing's samples: how every result reports its times."""
    values = np.asarray(times_us, dtype=float)
    return float(np.median(values)), float(np.percentile(values, 10)), float(np.percentile(values, 90))


def calls_per_batch(event_median_us: float) -> int:
    """Enough calls that a batch holds about BATCH_US of work: 1 to MAX_CALLS."""
    return int(np.clip(BATCH_US / max(event_median_us, 1e-3), 1, MAX_CALLS))


def profiler():
    """torch.profiler when torch sees a GPU, else None (device time is then not reported)."""
    try:
        import torch
        import torch.profiler
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.cuda.init()  # the profiler needs torch's CUDA state even when no torch op ran yet (CuPy kernels only)
    return torch.profiler


def measure(
    launch: Callable[[int], object],
    buffers: int,
    calls: int,
    sync: Callable[[], None],
    categories: Sequence[str] = KERNELS,
    batches: int = BATCHES,
    sessions: int = 3,
) -> dict[str, float] | None:
    """Profile `batches` batches of `calls` launches (rotating over `buffers` inputs) in one session;
    summarize()'s dict, or None without torch or when no session's batches can be told apart. A session
    whose batches cannot be told apart (they ran together) is measured again, up to `sessions` in all."""
    prof_mod = profiler()
    if prof_mod is None:
        return None
    for _ in range(sessions):
        events = profiled_events(prof_mod, launch, buffers, calls, sync, batches)
        if events is None:
            return None
        groups = split_batches(events, batches, categories)
        if groups is not None:
            return summarize([per_call_us(g, calls, categories) for g in groups])
    return None


def profiled_events(prof_mod, launch, buffers: int, calls: int, sync, batches: int) -> list[dict] | None:
    """One profiling session's Chrome-trace events, or None if CUPTI refused."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        sync()
        try:
            with prof_mod.profile(activities=[prof_mod.ProfilerActivity.CUDA]) as prof:
                for _ in range(batches):
                    for i in range(calls):
                        launch(i % buffers)
                    sync()  # the batch is done before the gap starts
                    time.sleep(GAP_S)
            prof.export_chrome_trace(path)
        except RuntimeError as exc:  # CUPTI refused (e.g. no profiling permission): no device time
            warnings.warn(f"torch.profiler failed, device time not reported: {exc}", stacklevel=3)
            return None
        with open(path) as f:
            return json.load(f).get("traceEvents", [])

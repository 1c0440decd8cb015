"""What scripts/timeline_topk.py and timeline_fast.py share: a launch's device time as built beside the stamped
build's, then the stamps of many stamped launches (run on a GPU machine)."""

import sys
from collections.abc import Callable

import numpy as np

from explorer import harness, peers
from explorer.backends import cuda


def time_as_built_and_stamped(
    plain: Callable[[int], None], stamped: Callable[[int], None], buffers: int, torch
) -> None:
    """Print each build's device time (CUPTI; CUDA events where torch is missing): each stamp adds a barrier."""
    for label, run in (("as built", plain), ("stamped", stamped)):
        events = harness.median_us(run, buffers)
        device = harness.device_us(run, buffers, events) if torch is not None else None
        print(f"  {label}: device {device:.2f} µs" if device else f"  {label}: events {events:.2f} µs")


def collect(stamped: Callable[[int], None], launches: int, stamps) -> np.ndarray:
    """stamped(i) for i < launches, each writing into stamps[i] (zeroed first), as int64 on the host."""
    stamps.fill(0)
    for i in range(launches):
        stamped(i)
    harness.sync()
    return cuda.cp.asnumpy(stamps).astype(np.int64)


def each_case(timeline: Callable[[str, object], None]) -> None:
    """timeline(case, torch) for each case on the command line (torch None where it does not import)."""
    torch = peers.torch_module()
    for case in sys.argv[1:]:
        timeline(case, torch)

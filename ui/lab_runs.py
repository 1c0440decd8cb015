"""The precision lab's runs, each kept once made: a point (one traced 1 × n run, measured) and a trajectory
(lane 0's traced d_j), named by (variant, acc, dist, n, dtype, block, backend). Only what is not kept yet counts
against this server's time budget: a request whose runs are all kept shows at once."""

from __future__ import annotations

import contextlib

import streamlit as st

import explorer
from explorer import budget, precision
from explorer.precision import Measurement, Trajectory

from . import compute
from .keep import KEPT, NotKept
from .run_control import bounded, duration, held_back, stopped_notice


@st.cache_data(show_spinner=False, max_entries=8192)
def kept_point(
    variant: str, acc: str, dist: str, n: int, dtype: str, block: int | None, backend: str, _run=None
) -> Measurement:
    """The measurement kept for these arguments (a few numbers: st.cache_data's entry count bounds them); _run
    (not part of the key) is the one to keep on a miss."""
    if _run is None:
        raise NotKept
    return _run


def kept_trajectory(
    variant: str, acc: str, dist: str, n: int, dtype: str, block: int | None, backend: str, _run=None
) -> Trajectory:
    """The trajectory kept for these arguments (its arrays in ui/keep.py's store); _run is the one to keep on a
    miss."""
    key = ("trajectory", variant, acc, dist, n, dtype, block, backend)
    return KEPT.get(key) if _run is None else KEPT.put(key, _run)


def measure_point(variant: str, acc: str, dist: str, n: int, dtype: str, block: int | None, backend: str):
    return precision.measure(variant, acc, dist, n, backend=backend, dtype=dtype, block_size=block)


def trace_lane0(variant: str, acc: str, dist: str, n: int, dtype: str, block: int | None, backend: str):
    return precision.d_trajectory(variant, acc, dist, n, backend=backend, dtype=dtype, block_size=block)


def run_cost(variant: str, acc: str, dist: str, n: int, dtype: str, block: int | None, backend: str) -> float:
    """Seconds of one traced 1 × n run (explorer.budget.run_seconds). On the GPU that is the trace's float64
    replay on the host: the kernels' own milliseconds are not modelled."""
    return budget.run_seconds(explorer.VARIANTS[variant], 1, n, dtype, acc, block, True, backend)


def run_kept(
    name: str, jobs: dict[str, tuple], kept, make, backend: str, what: str, advice: str, smaller: str
) -> list | None:
    """Each job (its label: the arguments of kept and make) from the cache, else made now and kept, the jobs still
    to make held to this server's time budget: their estimate over it waits for "Run anyway" (what: the work;
    advice: what to change), and a long run shows its progress per job and stops between jobs. None, after
    saying why, where the jobs are held back or were stopped (ui.run_control: held_back, bounded)."""
    key = tuple(jobs.values())
    if stopped_notice(name, key):
        return None
    found = {}
    for label, args in jobs.items():
        with contextlib.suppress(NotKept):
            found[label] = kept(*args)
    seconds = {label: run_cost(*args) for label, args in jobs.items() if label not in found}
    total = sum(seconds.values())
    where = "on the GPU (the traces' float64 replay, on the host)" if backend == "cuda" else "in the CPU emulation"
    if held_back(
        name,
        key,
        total,
        f"{len(seconds)} {what} would take about {duration(total)} {where} (estimated from each one's n and variant)",
        advice,
    ):
        return None
    out, todo = [], list(seconds)
    with (
        bounded(name, key, seconds, f"The {what} that finished are kept", smaller) as shown,
        st.spinner(f"Running {len(todo)} {what}…") if todo else contextlib.nullcontext(),
    ):
        for label, args in jobs.items():
            if label not in found:
                if shown:
                    shown.begin(label, todo.index(label), len(todo))
                found[label] = kept(*args, _run=compute.off_thread(backend, make, *args))
                if shown:
                    shown.end(label)
            out.append(found[label])
    return None if stopped_notice(name, key) else out


def run_points(points: list[tuple], dtype: str, block: int, backend: str) -> list[Measurement] | None:
    """Every (variant, acc, dist, n) point, kept one by one (run_kept)."""
    blocks = {v: block if explorer.VARIANTS[v].takes_block_size else None for v in precision.ONLINE_VARIANTS}
    jobs = {f"{v}, acc {a}, {d}, n = {n:,}": (v, a, d, n, dtype, blocks[v], backend) for v, a, d, n in points}
    return run_kept(
        "lab_points",
        jobs,
        kept_point,
        measure_point,
        backend,
        "points",
        "Lower the largest n or the steps per lane, or select fewer variants, or run it anyway: it shows its "
        "progress and can be stopped between points.",
        "lower the largest n or the steps per lane",
    )

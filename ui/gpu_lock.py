"""One GPU benchmark at a time, across every session of this server.

Streamlit runs each session's script in its own thread of one process, so two users pressing "Run the
benchmark" together would time their kernels on a shared GPU and each distort the other's numbers. Every
explorer.bench call of the UI (the Timing page's and the top-k page's buttons) runs inside `gpu_turn`,
which holds GPU_LOCK, a module-level lock: modules are imported once per process, so all sessions share it.
A session that finds the GPU busy says so ("Waiting for the GPU: another session is benchmarking…") and
polls, so that a user who leaves the page while queued stops waiting at once instead of after the other run.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

import streamlit as st

GPU_LOCK = threading.Lock()
WAITING = "Waiting for the GPU: another session is benchmarking…"
POLL_S = 0.5


@contextlib.contextmanager
def gpu_turn(lock: threading.Lock = GPU_LOCK) -> Iterator[float]:
    """Hold the GPU for the block; yields the seconds spent waiting for it (0.0 when it was free)."""
    slot, start = None, time.perf_counter()
    if not lock.acquire(blocking=False):
        slot = st.empty()
        slot.info(WAITING, icon=":material/hourglass_top:")
        while not lock.acquire(timeout=POLL_S):
            # redrawing gives Streamlit a point to stop this script if its user has gone (or changed a widget)
            slot.info(f"{WAITING} ({time.perf_counter() - start:.0f} s)", icon=":material/hourglass_top:")
    try:  # from here the lock is held: whatever happens (a stop included) it is released
        waited = 0.0
        if slot is not None:
            waited = time.perf_counter() - start
            slot.caption(
                f"Waited {waited:.1f} s for the GPU while another session was benchmarking; this run "
                "had the GPU to itself."
            )
        yield waited
    finally:
        lock.release()


@contextlib.contextmanager
def bench_turn() -> Iterator[Callable[[float, str], object]]:
    """gpu_turn with a progress bar, removed when the block ends; yields the benchmark's progress(fraction, text)."""
    with gpu_turn():
        bar = st.progress(0.0, text="Validating, warming up and timing…")
        try:
            yield lambda f, text: bar.progress(min(max(f, 0.0), 1.0), text=text)
        finally:
            bar.empty()

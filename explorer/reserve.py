"""Reservations: runs hold their modelled bytes (explorer/budget.py) for their duration in a pool shared by every
session of the server, so concurrent runs wait for each other instead of overcommitting the memory."""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .backends import cuda
from .budget import RUNS_AT_ONCE, run_budget
from .errors import TooLarge

POLL_S = 0.5


@dataclass(frozen=True)
class Waiting:
    """A run waiting for memory: what it needs, what other runs hold, the pool, seconds waited so far."""

    need: int
    held: int
    pool: int
    seconds: float

    def message(self) -> str:
        mib = 2**20
        waited = f" ({self.seconds:.0f} s)" if self.seconds else ""
        return (
            f"Waiting for memory: this run needs {self.need / mib:,.1f} MiB and other sessions' runs hold "
            f"{self.held / mib:,.1f} MiB of this server's {self.pool / mib:,.1f} MiB{waited}"
        )


class Budget:
    """A pool of bytes that runs reserve for their duration (thread-safe; Streamlit sessions are threads)."""

    def __init__(self, pool: Callable[[], int]):
        self._pool = pool  # read at each reservation, so a changed setting applies to the next run
        self._held = 0
        self._changed = threading.Condition()

    @property
    def held(self) -> int:
        with self._changed:
            return self._held

    def busy(self, need: int) -> Waiting | None:
        """What a reservation of `need` bytes would wait for now, or None where it would not wait."""
        pool = self._pool()
        with self._changed:
            return Waiting(need, self._held, pool, 0.0) if 0 < self._held and self._held + need > pool else None

    @contextlib.contextmanager
    def reserve(self, need: int, on_wait: Callable[[Waiting], None] | None = None) -> Iterator[float]:
        """Hold `need` bytes for the block, waiting while other runs hold too much; yields the seconds waited.
        on_wait (else the thread's, see show_waits) hears every POLL_S while waiting. TooLarge if need
        exceeds the whole pool, so it could never run."""
        pool = self._pool()
        if need > pool:
            raise TooLarge(
                f"this run needs about {need / 2**20:,.1f} MiB, more than this server's limit of "
                f"{pool / 2**20:,.1f} MiB for all runs together; choose a smaller shape"
            )
        on_wait = on_wait or getattr(_local, "on_wait", None)
        start = time.perf_counter()
        while True:
            with self._changed:
                if self._held + need <= pool:
                    self._held += need
                    break
                waiting = Waiting(need, self._held, pool, time.perf_counter() - start)
            if on_wait is not None:  # outside the lock: the UI draws here, and a stopped script raises out
                on_wait(waiting)
            with self._changed:
                self._changed.wait_for(lambda: self._held + need <= pool, POLL_S)
        try:
            yield time.perf_counter() - start
        finally:
            with self._changed:
                self._held -= need
                self._changed.notify_all()


_local = threading.local()


@contextlib.contextmanager
def show_waits(on_wait: Callable[[Waiting], None]) -> Iterator[None]:
    """Reservations made by this thread inside the block report their waits to on_wait (the UI's notice)."""
    before = getattr(_local, "on_wait", None)
    _local.on_wait = on_wait
    try:
        yield
    finally:
        _local.on_wait = before


RUNS = Budget(lambda: RUNS_AT_ONCE * run_budget())


@functools.cache
def gpu_pool_bytes() -> int:
    """The GPU memory that this server's runs share: the device's whole memory (fixed, so a run's admission
    does not depend on what others hold at that moment; each run is also checked against the free memory)."""
    return int(cuda.device_info()["memory_total_bytes"])


# Runs on the GPU reserve their device bytes here, so two sessions that each fit the free memory cannot
# together overcommit it: the second waits, as in RUNS.
GPU_RUNS = Budget(lambda: gpu_pool_bytes())


def run_reservation(backend: str, need: int) -> contextlib.AbstractContextManager[float]:
    """The reservation a run holds: its bytes in RUNS in the emulation, its device bytes in GPU_RUNS on the GPU."""
    return (GPU_RUNS if backend == "cuda" else RUNS).reserve(need)

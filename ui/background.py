"""Heavy work off the session's script thread: emulated runs, references, error reports and traces run on a worker
thread at a lower CPU priority (NICE), so that on a busy machine the server's own threads (serving pages, drawing
other sessions' scripts) come first, and four sessions' emulations leave a fifth session its page at once.

The script thread waits for the worker: it draws the progress the worker reports and it is where Streamlit's stop
arrives (Stop, a rerun, a closed tab) and a deadline passes; either then tells the worker, which ends at its next
batch of rows, as a run on the script thread would."""

from __future__ import annotations

import os
import queue
import sys
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

NICE = 10  # the workers' nice value above the thread that starts them: it gets about nine tenths of a core against each
MAX_NICE = 19  # Linux's lowest priority
_DONE = object()


class Abandoned(Exception):
    """Raised in a worker at its next progress report once the script thread waiting for it has stopped."""


def lower_priority() -> bool:
    """Lower the calling thread's CPU priority by NICE (on Linux, where a thread's nice value is its own: 19 at the
    lowest); whether it did. Elsewhere, or where the system refuses, the thread keeps its priority."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        me = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, me, min(MAX_NICE, os.getpriority(os.PRIO_PROCESS, me) + NICE))
    except OSError:
        return False
    return True


def call(fn: Callable[..., T], /, *args, progress: Callable[[int, int], object] | None = None, **kwargs) -> T:
    """fn(*args, **kwargs) on a new low-priority worker thread, its result or its exception returned here. With
    progress, fn is also given progress= a function that relays its (rows done, rows) here, where progress draws
    them; whatever ends the wait here (progress raising, Streamlit's stop) ends fn at its next report."""
    updates: queue.SimpleQueue = queue.SimpleQueue()
    abandoned = threading.Event()
    outcome: dict[str, object] = {}

    def relay(done: int, rows: int) -> None:
        if abandoned.is_set():
            raise Abandoned
        updates.put((done, rows))

    def work() -> None:
        lower_priority()
        try:
            outcome["value"] = fn(*args, **kwargs, **({} if progress is None else {"progress": relay}))
        except BaseException as exc:  # handed to the waiting thread, which raises it
            outcome["error"] = exc
        finally:
            updates.put(_DONE)

    threading.Thread(target=work, name="explorer-background", daemon=True).start()
    try:
        finished = False
        while not finished:
            item = updates.get()
            finished = item is _DONE
            while not finished and not updates.empty():  # draw only the latest report
                later = updates.get()
                finished, item = later is _DONE, item if later is _DONE else later
            if item is not _DONE and progress is not None:
                progress(*item)
    except BaseException:
        abandoned.set()
        raise
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]

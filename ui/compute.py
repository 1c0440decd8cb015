"""Cached computations. Each depends only on its arguments: the input is named by a hashable InputSpec
(an upload's bytes travel in it, so the key is the data itself, never a global). Arrays (inputs, references,
outputs, traces) are kept in ui/keep.py's byte-bounded store; small results (error reports, bounds) in
st.cache_data."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import streamlit as st

import explorer
from explorer import budget, reserve
from explorer.numerics import ErrorReport, dtype_name, softmax_bound

from . import background
from .keep import KEPT, NotKept
from .state import InputSpec

T = TypeVar("T")


@dataclass(frozen=True)
class VariantRun:
    """One variant over the whole input (wall seconds: not a benchmark)."""

    out: np.ndarray
    backend: str
    block_size: int | None
    launch: explorer.Launch
    seconds: float


def get_input(spec: InputSpec) -> np.ndarray:
    return KEPT.get_or_make(("input", spec), lambda: background.call(spec.load))


def get_reference(spec: InputSpec) -> np.ndarray:
    return KEPT.get_or_make(("reference", spec), lambda: background.call(explorer.reference, get_input(spec)))


def backend() -> str:
    """The backend "auto" resolves to now: part of every cache key below."""
    return explorer.resolve_backend("auto")


def off_thread(backend: str, fn: Callable[..., T], /, *args, **kwargs) -> T:
    """fn(*args, **kwargs) on a low-priority worker (ui/background.py) where it runs in the emulation; a GPU run
    stays on the script thread (it takes milliseconds, and CuPy's device and stream settings are per thread)."""
    return fn(*args, **kwargs) if backend == "cuda" else background.call(fn, *args, **kwargs)


@contextlib.contextmanager
def memory_turn(spec: InputSpec) -> Iterator[None]:
    """Say on the page, while the block runs, that other sessions' runs hold the memory a step over this input
    reserves (the error report's, the largest); the step itself waits in explorer.reserve.RUNS, inside the cached
    call, where nothing may be drawn."""
    waiting = reserve.RUNS.busy(budget.errors_bytes(*get_input(spec).shape))
    slot = st.empty() if waiting else None
    if slot is not None:
        slot.info(waiting.message(), icon=":material/hourglass_top:")
    try:
        yield
    finally:
        if slot is not None:
            slot.empty()


def run_variant(
    spec: InputSpec,
    variant: str,
    acc: str,
    block_size: int | None,
    progress: Callable[[int, int], object] | None = None,
) -> VariantRun:
    """The variant's run over the input: the cached one, else run now (outside the cache, so progress may draw
    on the page and a stop may end the run between batches of rows) and then kept."""
    key = ("run", spec, variant, acc, block_size, backend())
    try:
        return KEPT.get(key)
    except NotKept:
        pass
    with memory_turn(spec):
        x = get_input(spec)
        start = time.perf_counter()
        r = off_thread(
            key[-1], explorer.softmax, x, variant, acc=acc, block_size=block_size, backend=key[-1], progress=progress
        )
    return KEPT.put(key, VariantRun(r.out, r.backend, r.block_size, r.launch, time.perf_counter() - start))


def error_report(spec: InputSpec, variant: str, acc: str, block_size: int | None) -> ErrorReport:
    out = run_variant(spec, variant, acc, block_size).out
    with memory_turn(spec):
        return _error_report(spec, variant, acc, block_size, backend(), _out=out)


@st.cache_data(show_spinner=False, max_entries=24)
def _error_report(
    spec: InputSpec, variant: str, acc: str, block_size: int | None, backend: str, _out: np.ndarray
) -> ErrorReport:
    """The errors of the variant's output _out (not part of the key: the other arguments decide it)."""
    return background.call(explorer.errors, _out, get_input(spec), ref=get_reference(spec))


@st.cache_data(show_spinner=False, max_entries=24)
def bound(spec: InputSpec, launch: explorer.Launch, acc: str) -> float:
    """The error bound of a run with this launch over the input (explorer.numerics.softmax_bound)."""
    return softmax_bound(launch, get_input(spec), acc)


def traced_rows(variant: str, rows: int, cols: int, block_size: int | None, dtype: str) -> int:
    """Rows a traced run covers: the traced row alone where the launch for one row treats it exactly as the full
    launch does (cheap whatever the number of rows); otherwise (split_row picks its chunks from the rows) all."""
    v = explorer.VARIANTS[variant]
    return 1 if v.launch(rows, cols, block_size, dtype).chunks == v.launch(1, cols, block_size, dtype).chunks else rows


def trace_row(spec: InputSpec, row: int, variant: str, acc: str, block_size: int | None) -> explorer.Trace:
    """The traced row: the kept one, else traced now and kept."""
    key = trace_key(spec, row, variant, acc, block_size)
    try:
        return KEPT.get(key)
    except NotKept:
        pass
    x = get_input(spec)
    if traced_rows(variant, *x.shape, block_size, dtype_name(x.dtype)) == 1:
        x, row_in_x = x[row : row + 1], 0
    else:
        row_in_x = row
    r = off_thread(
        key[-1], explorer.softmax, x, variant, acc=acc, block_size=block_size, trace_row=row_in_x, backend=key[-1]
    )
    return KEPT.put(key, r.trace)


def trace_key(spec: InputSpec, row: int, variant: str, acc: str, block_size: int | None) -> tuple:
    return ("trace", spec, row, variant, acc, block_size, backend())


def trace_cost(spec: InputSpec, row: int, variant: str, acc: str, block_size: int | None) -> float:
    """Seconds trace_row will take now (explorer.budget.run_seconds, the trace included): none where it is kept."""
    with contextlib.suppress(NotKept):
        KEPT.get(trace_key(spec, row, variant, acc, block_size))
        return 0.0
    x = get_input(spec)
    v, (rows, cols), dtype = explorer.VARIANTS[variant], x.shape, dtype_name(x.dtype)
    if not v.takes(dtype, acc):
        return 0.0  # refused at once, in words
    rows = traced_rows(variant, rows, cols, block_size, dtype)
    return budget.run_seconds(v, rows, cols, dtype, acc, block_size, True, backend())


def backend_info() -> dict:
    return _backend_info(backend())


@st.cache_data(show_spinner=False, ttl=300)
def _backend_info(backend: str) -> dict:
    return explorer.info()

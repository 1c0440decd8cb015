"""Cached computations. Each depends only on its arguments: the input is named by a hashable InputSpec
(an upload's bytes travel in it, so the cache key is the data itself, never a global)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import streamlit as st

import explorer
from explorer import budget
from explorer.numerics import ErrorReport, dtype_name, softmax_bound

from .state import InputSpec


@dataclass(frozen=True)
class VariantRun:
    """One variant over the whole input (wall seconds: not a benchmark)."""

    out: np.ndarray
    backend: str
    block_size: int | None
    launch: explorer.Launch
    seconds: float


def get_input(spec: InputSpec) -> np.ndarray:
    return _load(spec)


@st.cache_data(show_spinner=False, max_entries=4)
def _load(spec: InputSpec) -> np.ndarray:
    return spec.load()


@st.cache_data(show_spinner=False, max_entries=4)
def get_reference(spec: InputSpec) -> np.ndarray:
    return explorer.reference(get_input(spec))


def backend() -> str:
    """The backend "auto" resolves to now: part of every cache key below."""
    return explorer.resolve_backend("auto")


@contextlib.contextmanager
def memory_turn(spec: InputSpec) -> Iterator[None]:
    """Say on the page, while the block runs, that other sessions' runs hold the memory a step over this input
    reserves (the error report's, the largest); the step itself waits in explorer.budget.RUNS, inside the cached
    call, where nothing may be drawn."""
    waiting = budget.RUNS.busy(budget.errors_bytes(*get_input(spec).shape))
    slot = st.empty() if waiting else None
    if slot is not None:
        slot.info(waiting.message(), icon=":material/hourglass_top:")
    try:
        yield
    finally:
        if slot is not None:
            slot.empty()


class NotKept(Exception):
    """A run not in a keeping cache yet (nothing is cached for an exception): the pages' caches raise it too."""


def run_variant(
    spec: InputSpec,
    variant: str,
    acc: str,
    block_size: int | None,
    progress: Callable[[int, int], object] | None = None,
) -> VariantRun:
    """The variant's run over the input: the cached one, else run now (outside the cache, so progress may draw
    on the page and a stop may end the run between chunks of rows) and then kept."""
    key = (spec, variant, acc, block_size, backend())
    try:
        return _kept(*key)
    except NotKept:
        pass
    with memory_turn(spec):
        x = get_input(spec)
        start = time.perf_counter()
        r = explorer.softmax(x, variant, acc=acc, block_size=block_size, backend=key[-1], progress=progress)
    return _kept(*key, _run=VariantRun(r.out, r.backend, r.block_size, r.launch, time.perf_counter() - start))


@st.cache_data(show_spinner=False, max_entries=24)
def _kept(
    spec: InputSpec, variant: str, acc: str, block_size: int | None, backend: str, _run: VariantRun | None = None
) -> VariantRun:
    """The run kept for these arguments; _run (not part of the key) is the one to keep on a miss."""
    if _run is None:
        raise NotKept
    return _run


def error_report(spec: InputSpec, variant: str, acc: str, block_size: int | None) -> ErrorReport:
    out = run_variant(spec, variant, acc, block_size).out
    with memory_turn(spec):
        return _error_report(spec, variant, acc, block_size, backend(), _out=out)


@st.cache_data(show_spinner=False, max_entries=24)
def _error_report(
    spec: InputSpec, variant: str, acc: str, block_size: int | None, backend: str, _out: np.ndarray
) -> ErrorReport:
    """The errors of the variant's output _out (not part of the key: the other arguments decide it)."""
    return explorer.errors(_out, get_input(spec), ref=get_reference(spec))


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
    key = (spec, row, variant, acc, block_size, backend())
    try:
        return kept_trace(*key)
    except NotKept:
        pass
    x = get_input(spec)
    if traced_rows(variant, *x.shape, block_size, dtype_name(x.dtype)) == 1:
        x, row_in_x = x[row : row + 1], 0
    else:
        row_in_x = row
    r = explorer.softmax(x, variant, acc=acc, block_size=block_size, trace_row=row_in_x, backend=key[-1])
    return kept_trace(*key, _trace=r.trace)


@st.cache_data(show_spinner=False, max_entries=16)
def kept_trace(
    spec: InputSpec,
    row: int,
    variant: str,
    acc: str,
    block_size: int | None,
    backend: str,
    _trace: explorer.Trace | None = None,
) -> explorer.Trace:
    """The trace kept for these arguments; _trace (not part of the key) is the one to keep on a miss."""
    if _trace is None:
        raise NotKept
    return _trace


def trace_cost(spec: InputSpec, row: int, variant: str, acc: str, block_size: int | None) -> float:
    """Seconds trace_row will take now (explorer.budget.run_seconds, the trace included): none where it is kept."""
    try:
        kept_trace(spec, row, variant, acc, block_size, backend())
        return 0.0
    except NotKept:
        pass
    x = get_input(spec)
    v, (rows, cols), dtype = explorer.VARIANTS[variant], x.shape, dtype_name(x.dtype)
    if dtype not in v.dtypes or acc not in v.accumulators:
        return 0.0  # refused at once, in words
    rows = traced_rows(variant, rows, cols, block_size, dtype)
    return budget.run_seconds(v, rows, cols, dtype, acc, block_size, True, backend())


def backend_info() -> dict:
    return _backend_info(backend())


@st.cache_data(show_spinner=False, ttl=300)
def _backend_info(backend: str) -> dict:
    return explorer.info()

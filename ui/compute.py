"""Cached computations. Each depends only on its arguments: the input is named by a hashable spec.

spec is ("dist", name, params, rows, cols, dtype, seed) or ("upload", filename, data, dtype): the
uploaded bytes travel in the argument, so the cache key is the data itself, never a global.
"""

from __future__ import annotations

import time

import numpy as np
import streamlit as st

import explorer


@st.cache_data(show_spinner=False, max_entries=4)
def get_input(spec: tuple) -> np.ndarray:
    if spec[0] == "upload":
        _, filename, data, dtype = spec
        return explorer.load_logits(data, filename, dtype)
    _, dist, params, rows, cols, dtype, seed = spec
    return explorer.make_input(dist, rows, cols, dtype=dtype, seed=seed, **dict(params))


@st.cache_data(show_spinner=False, max_entries=4)
def get_reference(spec: tuple) -> np.ndarray:
    return explorer.reference(get_input(spec))


def backend() -> str:
    """The backend "auto" resolves to now: part of every cache key below."""
    return explorer.resolve_backend("auto")


def run_variant(spec: tuple, variant: str, acc: str, block_size: int | None) -> dict:
    """One variant over the whole input: output, backend, launch, wall seconds (not a benchmark)."""
    return _run_variant(spec, variant, acc, block_size, backend())


@st.cache_data(show_spinner=False, max_entries=24)
def _run_variant(spec: tuple, variant: str, acc: str, block_size: int | None, backend: str) -> dict:
    x = get_input(spec)
    start = time.perf_counter()
    r = explorer.softmax(x, variant, acc=acc, block_size=block_size, backend=backend)
    return {"out": r.out, "backend": r.backend, "block_size": r.block_size, "launch": r.launch,
            "seconds": time.perf_counter() - start}


def error_report(spec: tuple, variant: str, acc: str, block_size: int | None) -> dict:
    return _error_report(spec, variant, acc, block_size, backend())


@st.cache_data(show_spinner=False, max_entries=24)
def _error_report(spec: tuple, variant: str, acc: str, block_size: int | None, backend: str) -> dict:
    out = _run_variant(spec, variant, acc, block_size, backend)["out"]
    return explorer.errors(out, get_input(spec), ref=get_reference(spec)).as_dict()


def trace_row(spec: tuple, row: int, variant: str, acc: str, block_size: int | None):
    """The traced row, run alone where the launch for one row treats it exactly as the full launch
    does (cheap whatever the number of rows); otherwise (split_row picks its chunks from the rows) the
    whole input is run."""
    return _trace_row(spec, row, variant, acc, block_size, backend())


@st.cache_data(show_spinner=False, max_entries=16)
def _trace_row(spec: tuple, row: int, variant: str, acc: str, block_size: int | None, backend: str):
    x = get_input(spec)
    v = explorer.VARIANTS[variant]
    dtype = explorer.numerics.dtype_name(x.dtype)
    if v.launch(x.shape[0], x.shape[1], block_size, dtype).chunks == v.launch(1, x.shape[1], block_size, dtype).chunks:
        return explorer.softmax(x[row:row + 1], variant, acc=acc, block_size=block_size, trace_row=0,
                                backend=backend).trace
    return explorer.softmax(x, variant, acc=acc, block_size=block_size, trace_row=row, backend=backend).trace


def backend_info() -> dict:
    return _backend_info(backend())


@st.cache_data(show_spinner=False, ttl=300)
def _backend_info(backend: str) -> dict:
    return explorer.info()

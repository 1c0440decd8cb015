"""Helpers the pages share: the error guard, the backend badge, charts and downloads, running variants."""

from __future__ import annotations

import datetime
import functools
import logging

import pandas as pd
import streamlit as st

import explorer

from . import compute, figures
from .state import Config

log = logging.getLogger("softmax_explorer.ui")
BIG_RUN = 2_000_000  # elements × variants above which a run shows a progress bar, not just a spinner


def guarded(page):
    """Words, never a traceback: ExplorerError messages as they are, anything else as a short note."""

    @functools.wraps(page)
    def run() -> None:
        try:
            page()
        except explorer.ExplorerError as exc:
            st.error(str(exc))
        except Exception as exc:  # st.stop / st.rerun are BaseExceptions and pass through
            log.exception("page %s failed", page.__name__)
            st.error(f"This view hit an unexpected problem ({type(exc).__name__}: {str(exc)[:200]}). "
                     "Your settings are kept; change one, or reload the page.")

    return run


def backend_badge(container=st) -> None:
    info = compute.backend_info()
    if info.get("backend") == "cuda":
        container.badge(f"GPU: {info.get('gpu', '?')} · CUDA {info.get('cuda_runtime', '?')}",
                        icon=":material/memory:", color="green")
    else:
        container.badge("CPU emulation — no GPU timings", icon=":material/computer:", color="orange",
                        help=f"No GPU here: {info.get('reason', 'unknown reason')}. Outputs, traces and errors come "
                             "from a NumPy emulation that follows each kernel's order of operations.")


def stamp() -> str:
    return figures.stamp_text(compute.backend_info(), datetime.date.today().isoformat())


def header(title: str, cfg: Config | None) -> None:
    st.title(title)
    left, right = st.columns([3, 2], vertical_alignment="center")
    if cfg is not None:
        left.caption(cfg.describe())
    with right:
        backend_badge()


def chart(fig, cfg: Config, name: str, key: str) -> None:
    st.plotly_chart(fig, config=figures.chart_config(cfg.slug(name)), key=key, width="stretch", theme=None)


def csv_download(df: pd.DataFrame, cfg: Config, name: str, key: str, label: str = "Download table (CSV)") -> None:
    st.download_button(label, df.to_csv().encode(), file_name=f"{cfg.slug(name)}.csv", mime="text/csv", key=key,
                       icon=":material/download:", on_click="ignore")


def spec_of(cfg: Config) -> tuple | None:
    if cfg.uploaded:
        data = st.session_state.get("_upload_bytes")
        return None if data is None else ("upload", cfg.upload_name, data, cfg.dtype)
    return ("dist", cfg.dist, cfg.params, cfg.rows, cfg.cols, cfg.dtype, cfg.seed)


def run_all(cfg: Config, spec: tuple) -> tuple[dict, dict]:
    """Every selected variant over the input: (results by variant, error messages by variant)."""
    results, failed = {}, {}
    big = cfg.rows * cfg.cols * len(cfg.variants) > BIG_RUN
    gpu = compute.backend_info().get("backend") == "cuda"
    note = " (a dtype's first GPU run compiles its kernels: a few seconds)" if gpu else ""
    bar = st.progress(0.0, text="Running…") if big and len(cfg.variants) > 1 else None
    with st.spinner(f"Running {len(cfg.variants)} variant(s) on {cfg.rows}×{cfg.cols} {cfg.dtype}{note}…"):
        compute.get_input(spec)
        for i, key in enumerate(cfg.variants):
            if bar is not None:
                bar.progress(i / len(cfg.variants), text=f"Running {key} ({i + 1} of {len(cfg.variants)})…")
            try:
                results[key] = compute.run_variant(spec, key, cfg.acc, cfg.block_for(key))
            except explorer.ExplorerError as exc:
                failed[key] = str(exc)
    if bar is not None:
        bar.empty()
    return results, failed


def show_failures(failed: dict) -> None:
    for key, message in failed.items():
        st.warning(f"**{key}**: {message}", icon=":material/warning:")


def config_and_spec():
    """The sidebar's configuration and input spec, or None after telling the user why nothing runs."""
    cfg = st.session_state.get("_cfg")
    if cfg is None:
        return None, None
    problem = st.session_state.get("_fit_problem")
    if problem:
        st.error(problem, icon=":material/block:")
        return None, None
    if cfg.uploaded and st.session_state.get("_upload_bytes") is None:
        st.info("Upload a .npy or .csv file of logits in the sidebar (or pick a distribution).",
                icon=":material/upload:")
        return None, None
    if not cfg.variants:
        st.info("Select at least one variant in the sidebar.", icon=":material/checklist:")
        return None, None
    return cfg, spec_of(cfg)


def restore_widgets(defaults: dict) -> None:
    """Widget state is dropped while another page shows: take back the copy under "_"-prefixed keys
    (or the default) for every widget key not set now."""
    for key, value in defaults.items():
        if key not in st.session_state:
            st.session_state[key] = st.session_state.get("_" + key, value)


def remember_widgets(keys) -> None:
    """Keep a copy of these widgets' values under "_"-prefixed keys, for restore_widgets."""
    for key in keys:
        if key in st.session_state:
            st.session_state["_" + key] = st.session_state[key]

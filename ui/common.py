"""Helpers the pages share: the error guard, the backend badge, charts and downloads, running variants,
widget values kept in range."""

from __future__ import annotations

import datetime
import functools
import logging
from dataclasses import dataclass

import pandas as pd
import streamlit as st

import explorer

from . import compute, figures
from .compute import VariantRun
from .state import Config, InputSpec

ss = st.session_state
log = logging.getLogger("softmax_explorer.ui")
BIG_RUN = 2_000_000  # elements × variants above which a run shows a progress bar, not just a spinner


def guarded(page):
    """Words, never a traceback: ExplorerError messages as they are, anything else as a short note."""

    @functools.wraps(page)
    def run(*args, **kwargs) -> None:
        try:
            page(*args, **kwargs)
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


def chart(fig, filename: str, key: str) -> None:
    """A plotly figure whose PNG download is named `filename`."""
    st.plotly_chart(fig, config=figures.chart_config(filename), key=key, width="stretch", theme=None)


def csv_download(df: pd.DataFrame, cfg: Config, name: str, key: str, label: str = "Download table (CSV)") -> None:
    st.download_button(label, df.to_csv().encode(), file_name=f"{cfg.slug(name)}.csv", mime="text/csv", key=key,
                       icon=":material/download:", on_click="ignore")


def run_all(cfg: Config, spec: InputSpec) -> tuple[dict[str, VariantRun], dict[str, str]]:
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


def show_failures(failed: dict[str, str]) -> None:
    for key, message in failed.items():
        st.warning(f"**{key}**: {message}", icon=":material/warning:")


def config_and_spec() -> tuple[Config, InputSpec] | tuple[None, None]:
    """The sidebar's configuration and input spec, or Nones after telling the user why nothing runs."""
    cfg = ss.get("_cfg")
    if cfg is None:
        return None, None
    problem = ss.get("_fit_problem")
    if problem:
        st.error(problem, icon=":material/block:")
        return None, None
    if cfg.uploaded and ss.get("_upload_bytes") is None:
        st.info("Upload a .npy or .csv file of logits in the sidebar (or pick a distribution).",
                icon=":material/upload:")
        return None, None
    if not cfg.variants:
        st.info("Select at least one variant in the sidebar.", icon=":material/checklist:")
        return None, None
    return cfg, cfg.input(ss.get("_upload_bytes"))


@dataclass(frozen=True)
class Ran:
    """What run_page hands a page: the configuration, its input, the variants' runs and failures."""

    cfg: Config
    spec: InputSpec
    results: dict[str, VariantRun]
    failed: dict[str, str]


def run_page(title: str) -> Ran | None:
    """The start of a page over the chosen variants' results: its header, every variant run (failures
    shown); None when there is nothing to show."""
    cfg, spec = config_and_spec()
    header(title, cfg)
    if cfg is None:
        return None
    results, failed = run_all(cfg, spec)
    show_failures(failed)
    return Ran(cfg, spec, results, failed) if results else None


def ensure_choice(key: str, options: list, default=None) -> None:
    """The widget's value is one of its options: the default (or the first option) otherwise."""
    if ss.get(key) not in options:
        ss[key] = default if default in options else options[0]


def clamp(key: str, low: int, high: int) -> None:
    """The widget's value is a whole number in [low, high]."""
    try:
        ss[key] = min(max(int(ss.get(key, low)), low), high)
    except (TypeError, ValueError):
        ss[key] = low


"""Helpers the pages share: the error guard, the backend badge, charts and downloads, running variants (held to
this server's time budget by ui/run_control.py), widget values kept in range."""

from __future__ import annotations

import datetime
import functools
from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd
import streamlit as st

import explorer
from explorer import budget
from explorer.inputs import MAX_UPLOAD_BYTES
from explorer.registry import BLOCK_SIZES

from . import compute, figures
from .compute import VariantRun
from .figures.share import MISSING
from .run_control import bounded, duration, held_back, log, stopped_notice
from .state import Config, InputSpec, default_block
from .text import as_text

ss = st.session_state
# The uploaders' own limit, in Streamlit's MB: 10^6 bytes in its browser code (2^20 on Windows), 2^20 at the server
# (server.maxUploadSize in .streamlit/config.toml, which must be at least this). The least whole number of MB over
# MAX_UPLOAD_BYTES either way, so that a file just over our limit reaches our check and is refused in our words.
UPLOAD_MB = MAX_UPLOAD_BYTES // 10**6 + 1


def guarded(page):
    """Words, never a traceback: ExplorerError messages as they are, anything else as a short note; both shown as
    text (a message may quote a file's name or a value from it, which must not become markup)."""

    @functools.wraps(page)
    def run(*args, **kwargs) -> None:
        try:
            page(*args, **kwargs)
        except explorer.ExplorerError as exc:
            st.error(as_text(exc))
        except Exception as exc:  # st.stop / st.rerun are BaseExceptions and pass through
            log.exception("page %s failed", page.__name__)
            st.error(
                as_text(
                    f"This view hit an unexpected problem ({type(exc).__name__}: {str(exc)[:200]}). "
                    "Your settings are kept; change one, or reload the page."
                )
            )

    return run


def backend_badge(container=st) -> None:
    info = compute.backend_info()
    if info.get("backend") == "cuda":
        container.badge(
            f"GPU: {info.get('gpu', '?')} · CUDA {info.get('cuda_runtime', '?')}",
            icon=":material/memory:",
            color="green",
        )
    else:
        container.badge(
            "CPU emulation (no GPU here)",
            icon=":material/computer:",
            color="orange",
            help=f"No GPU here: {info.get('reason', 'unknown reason')}. Outputs, traces and errors come "
            "from a NumPy emulation that follows each kernel's order of operations.",
        )


def stamp() -> str:
    return figures.stamp_text(compute.backend_info(), datetime.date.today().isoformat())


def header(title: str, caption: str | None) -> None:
    """The page's title, what it shows (cfg.describe() where it runs the input; None: nothing), the backend's badge."""
    st.title(title)
    left, right = st.columns([3, 2], vertical_alignment="center")
    if caption:
        left.caption(caption)
    with right:
        backend_badge()


def chart(fig, filename: str, key: str) -> None:
    """A plotly figure whose PNG download is named `filename`."""
    st.plotly_chart(fig, config=figures.chart_config(filename), key=key, width="stretch", theme=None)


def show_table(data, key: str | None = None, **options) -> None:
    """st.dataframe across the page, a cell with no value shown as the share image shows it (not "None")."""
    st.dataframe(data, width="stretch", key=key, placeholder=MISSING, **options)


def csv_download(
    df: pd.DataFrame, name: str, key: str, label: str = "Download table (CSV)", index: bool = True
) -> None:
    """A download of df as `name`.csv (index: with df's index as the first column)."""
    st.download_button(
        label,
        df.to_csv(index=index).encode(),
        file_name=f"{name}.csv",
        mime="text/csv",
        key=key,
        icon=":material/download:",
        on_click="ignore",
    )


def number_columns(
    formats: Mapping[str, str | tuple[str, str | None]], widths: Mapping[str, int] | None = None
) -> dict[str, dict]:
    """Table settings for number columns from {column: printf format} or {column: (label, format)}, and widths in
    pixels where given (else as wide as their values): how a page's table shows them, and the share image's labels
    and formats (ui/share.py reads them back)."""
    out = {}
    for column, spec in formats.items():
        label, fmt = spec if isinstance(spec, tuple) else (None, spec)
        out[column] = st.column_config.NumberColumn(label, format=fmt, width=(widths or {}).get(column))
    return out


def run_key(cfg: Config, spec: InputSpec) -> tuple:
    """What the variants' runs depend on: a stop or a "Run anyway" holds for it (not for the row shown)."""
    return spec, cfg.acc, cfg.variants, cfg.block


def estimate(cfg: Config) -> dict[str, float]:
    """Seconds each variant's emulated run should take (explorer.budget.emulation_seconds); none on a GPU, and
    none for a variant that refuses the dtype or accumulator (it fails at once)."""
    if compute.backend() == "cuda":
        return {}
    return {
        k: budget.emulation_seconds(v, cfg.rows, cfg.cols, cfg.dtype, cfg.acc, cfg.block_for(k))
        for k in cfg.variants
        if (v := explorer.VARIANTS[k]).takes(cfg.dtype, cfg.acc)
    }


def run_all(cfg: Config, spec: InputSpec) -> tuple[dict[str, VariantRun], dict[str, str]] | None:
    """Every selected variant over the input: (results by variant, error messages by variant). None, after saying
    why, where the run is stopped, or estimated over this server's time budget and not confirmed."""
    key = run_key(cfg, spec)
    if stopped_notice("run", key):
        return None
    seconds = estimate(cfg)
    total = sum(seconds.values())
    if held_back(
        "run",
        key,
        total,
        f"{len(cfg.variants)} variant(s) on {cfg.rows:,}×{cfg.cols:,} {cfg.dtype} would take about "
        f"{duration(total)} in the CPU emulation (estimated from the shape and variants)",
        "Make rows or cols smaller or select fewer variants, or run it anyway: it shows its progress and can be "
        "stopped.",
    ):
        return None
    gpu = compute.backend_info().get("backend") == "cuda"
    note = " (a dtype's first GPU run compiles its kernels: a few seconds)" if gpu else ""
    results, failed = {}, {}
    kept, smaller = "The variants that finished are kept", "choose a smaller shape or fewer variants"
    with (
        bounded("run", key, seconds, kept, smaller) as shown,
        st.spinner(f"Running {len(cfg.variants)} variant(s) on {cfg.rows}×{cfg.cols} {cfg.dtype}{note}…"),
    ):
        compute.get_input(spec)
        for i, k in enumerate(cfg.variants):
            progress = shown.begin(k, i, len(cfg.variants)) if shown else None
            try:
                results[k] = compute.run_variant(spec, k, cfg.acc, cfg.block_for(k), progress)
            except explorer.ExplorerError as exc:
                failed[k] = failure_text(exc)
            if shown:
                shown.end(k)
    return None if stopped_notice("run", key) else (results, failed)


def failure_text(exc: explorer.ExplorerError) -> str:
    """Why a variant has no result: refused before it ran (its dtype, its accumulator, its size), or failed."""
    return ("not run: " if isinstance(exc, explorer.InvalidInput | explorer.TooLarge) else "failed: ") + str(exc)


def show_failures(failed: dict[str, str]) -> None:
    """A warning a variant, "**fast** not run: fast accumulates in float32, not float16" (failure_text's)."""
    for key, message in failed.items():
        st.warning(f"**{key}** {as_text(message)}", icon=":material/warning:")


def start_page(title: str) -> tuple[Config, InputSpec] | tuple[None, None]:
    """The page's header (its title, then the configuration where it names an input), then the sidebar's
    configuration and input spec, or Nones after telling the user why nothing runs."""
    cfg = ss.get("_cfg")
    spec = cfg.input(ss.get("_upload_bytes")) if cfg is not None else None
    header(title, cfg.describe() if spec is not None else None)
    if cfg is None:
        return None, None
    problem = ss.get("_fit_problem")
    if problem:
        st.error(problem, icon=":material/block:")
        return None, None
    if spec is None:
        refused = ss.get("_upload_problem")
        if refused:
            st.error(f"The upload was refused: {refused}.", icon=":material/upload_file:")
        else:
            st.info(
                "Upload a .npy or .csv file of logits in the sidebar (or pick a distribution).",
                icon=":material/upload:",
            )
        return None, None
    if not cfg.variants:
        st.info("Select at least one variant in the sidebar.", icon=":material/checklist:")
        return None, None
    return cfg, spec


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
    cfg, spec = start_page(title)
    if cfg is None:
        return None
    ran = run_all(cfg, spec)
    if ran is None:
        return None
    results, failed = ran
    show_failures(failed)
    return Ran(cfg, spec, results, failed) if results else None


def variant_label(key: str) -> str:
    """A variant as the selectors show it: its key and title."""
    return f"{key} — {explorer.VARIANTS[key].title}"


def ensure_choice(key: str, options: list, default=None, what: str = "", format_func=str) -> None:
    """The widget's value is one of its options: the default (or the first option) otherwise. Where `what` names it
    and it held a value (a shared link's, or one the view no longer offers), a toast quotes that value and the
    option shown instead, as the widget labels it (format_func)."""
    value = ss.get(key)
    if value in options:
        return
    ss[key] = default if default in options else options[0]
    if what and value not in (None, ""):
        st.toast(
            f"{what} “{value}” is not offered here: showing “{format_func(ss[key])}”.",
            icon=":material/info:",
        )


def sidebar_takes_block() -> bool:
    """Whether one of the sidebar's variants takes a block size: then the sidebar draws block_size_slider."""
    return any(explorer.VARIANTS[k].takes_block_size for k in ss.get("variants", ()))


def block_size_slider(label: str) -> None:
    """The block size (key `block`), one of those the block variants take; drawn once a run, by the sidebar or,
    where it has none, by the Kernels page."""
    ensure_choice("block", BLOCK_SIZES, default_block())
    st.select_slider(label, BLOCK_SIZES, key="block")


def clamp(key: str, low: int, high: int, what: str = "") -> None:
    """The widget's value is a whole number in [low, high]. Where `what` names it ("Row") and its value was outside
    (a shared link's, or a range that shrank under it), a toast says which value is shown instead."""
    try:
        value = int(ss.get(key, low))
    except (TypeError, ValueError):
        ss[key] = low
        return
    ss[key] = min(max(value, low), high)
    if what and ss[key] != value:
        st.toast(f"{what} {value:,} is outside {low:,}–{high:,}: showing {ss[key]:,}.", icon=":material/info:")

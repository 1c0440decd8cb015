"""The "Download share image" button: one PNG with a page's charts, its table and where the numbers came from,
drawn by ui/figures/share.py only when the button is clicked."""

from __future__ import annotations

import datetime
import functools
from collections.abc import Mapping, Sequence

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from . import compute
from .figures.common import device_line
from .figures.share import share_png
from .state import Config

LABEL = "Download share image (PNG)"


def readable(table: pd.DataFrame, columns: Mapping[str, dict]) -> tuple[pd.DataFrame, dict[str, str]]:
    """The table under the labels the page shows it with (st.column_config entries by column), and the printf
    formats of those columns by label."""
    labels = {c: columns[c].get("label") or c for c in table.columns if c in columns}
    formats = {labels[c]: columns[c].get("type_config", {}).get("format") or "" for c in labels}
    return table.rename(columns=labels), {k: f for k, f in formats.items() if "%" in f}


def share_button(
    key: str,
    file_name: str,
    title: str,
    charts: Sequence[go.Figure],
    table: pd.DataFrame | None,
    stamp: Sequence[str],
    subtitle: str = "",
    columns: Mapping[str, dict] | None = None,
    notes: Sequence[str] = (),
    captions: Sequence[str] = (),
) -> None:
    """A download button for the share image; file_name without extension ("_share.png" is added); notes: the
    page's warnings about what the charts show, written under the title; captions: what a reader of the image
    needs to read the charts (which names a legend entry stands for), written under them."""
    shown, formats = readable(table, columns or {}) if table is not None else (None, {})
    st.download_button(
        LABEL,
        functools.partial(
            share_png, title, list(charts), shown, list(stamp), subtitle, formats, list(notes), list(captions)
        ),
        file_name=f"{file_name}_share.png",
        mime="image/png",
        key=key,
        icon=":material/image:",
        on_click="ignore",
        help="The charts, their warnings and the table above in one PNG, stamped with the GPU, "
        "driver, CUDA, CuPy, shape, dtype, accumulator and date.",
    )


def run_stamp(cfg: Config, info: Mapping, date: str) -> list[str]:
    """The stamp for a share image of the sidebar's run: shape, dtype and accumulator in the Timing stamp's words
    (ui/results.share_stamp), the input (distribution and parameters, or the uploaded file) and row shown, and
    where it ran (device_line: GPU, driver, CUDA, CuPy, or CPU emulation) with the date."""
    source = f"uploaded {cfg.upload_name}" if cfg.uploaded else f"distribution {cfg.dist_text()} · seed {cfg.seed}"
    return [
        f"shape {cfg.rows}×{cfg.cols} · dtype {cfg.dtype} · accumulator {cfg.acc}",
        f"{source} · row {cfg.row}",
        device_line(info, date),
    ]


def run_share_button(
    page: str,
    title: str,
    cfg: Config,
    charts: Sequence[go.Figure],
    table: pd.DataFrame,
    columns: Mapping[str, dict] | None = None,
    notes: Sequence[str] = (),
    captions: Sequence[str] = (),
) -> None:
    """share_button for a page over the sidebar's run (Outputs, Error): named and stamped from cfg."""
    share_button(
        f"share_{page}",
        cfg.slug(page),
        title,
        charts,
        table,
        run_stamp(cfg, compute.backend_info(), datetime.date.today().isoformat()),
        cfg.describe(),
        columns,
        notes,
        captions,
    )

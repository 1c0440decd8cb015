"""The top-k page's timing: run explorer.bench.bench_topk on a GPU or load top-k results files, then the table
and the figure (fused, unfused, both torch baselines, % of the read-once floor)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from explorer import bench

from . import figures, gpu_lock
from .common import chart, csv_download, ensure_choice, number_columns, show_table
from .results import (
    TIME_COLUMNS,
    TIMES_CAPTION,
    chart_stamp,
    no_gpu_note,
    result_sources,
    share_stamp,
    time_shown,
)
from .share import share_button
from .state import file_slug

ss = st.session_state

BENCH_COMMAND = "python -m explorer bench --topk 1 8 50 --json FILE"
TOPK_EXTRA = ["version", "device_us", "floor_us", "pct_floor", "floor_device_us", "pct_floor_device", "error"]
TOPK_COLUMNS = TIME_COLUMNS | number_columns(  # the top-k timing table's
    {
        "floor_us": ("floor µs (event)", "%.2f"),
        "pct_floor": ("% of floor (event)", "%.0f"),
        "floor_device_us": ("floor µs (device)", "%.2f"),
        "pct_floor_device": ("% of floor (device)", "%.0f"),
        "MB_moved": ("MB moved", "%.2f"),
        "speedup_vs_torch": ("speed-up vs torch", "%.2f×"),
    }
)


def topk_table(part: pd.DataFrame, time: str = "event") -> pd.DataFrame:
    """figures.topk_timing_table (speed-up against torch from `time`, MB moved) plus version, device time and the
    floor."""
    table = figures.topk_timing_table(part, time)
    for c in TOPK_EXTRA:
        if c in part.columns:
            table[c] = part[c].to_numpy()
    return table


def render(gpu: bool, rows: int, cols: int, k: int, dtype: str) -> None:
    """The top-k page's timing section: a benchmark of the page's shape, or the shapes loaded files measured."""
    st.subheader("Timing: fused vs unfused vs torch, as measured")
    no_gpu = st.empty()  # filled once it is known whether files are loaded
    if gpu and st.button(
        f"Run the benchmark: top-{k} on {rows}×{cols} {dtype} (fused, unfused, torch baselines)",
        key="tk_bench_run",
        icon=":material/timer:",
        type="primary",
    ):
        with gpu_lock.bench_turn() as progress:  # one benchmark at a time across sessions: ui/gpu_lock.py
            ss["_tk_bench"] = bench.bench_topk([(rows, cols)], [k], [dtype], peers=True, progress=progress)
        ss["tk_tshape"] = f"{rows}×{cols} {dtype} top-{k}"
        st.caption("The benchmark draws its own input (normal × 3, like `explorer bench --topk`), not the one above.")

    sources, origins = result_sources(
        "Top-k results (JSON, one file per GPU)",
        "tk_bench",
        f"Written by `{BENCH_COMMAND}`; several files show side by side.",
        ss.get("_tk_bench"),
        "topk_bench",
        "tk_bundled",
        topk=True,
    )
    if not gpu:
        no_gpu_note(no_gpu, bool(sources), f"a top-k results file measured on a GPU (written by `{BENCH_COMMAND}`)")
    if not sources:
        return
    df = figures.topk_timing_frame(sources)
    if df.empty:
        st.warning(
            "No top-k results in the loaded file(s): they need rows named topk_fused, topk_unfused, torch or "
            f"torch_lse with a k, as written by `{BENCH_COMMAND}`.",
            icon=":material/warning:",
        )
        return
    shapes = list(dict.fromkeys(df["shape"]))
    ensure_choice("tk_tshape", shapes, f"{rows}×{cols} {dtype} top-{k}", "Measured shape, dtype and k")
    st.selectbox("Measured shape, dtype and k", shapes, key="tk_tshape")
    _show_timing(df[df["shape"] == ss["tk_tshape"]], sources, origins)


def _show_timing(part: pd.DataFrame, sources: dict[str, dict], origins: dict[str, str]) -> None:
    """The chosen shape's chart, its table with the download, and the share image."""
    time = time_shown(part[pd.to_numeric(part["median_us"], errors="coerce").notna()], "tk_ttime")
    table = topk_table(part, time)
    title = f"Softmax + top-k, {ss['tk_tshape']}: {time} time"
    fig = figures.topk_figure(table, title, chart_stamp(part, sources), time)
    slug = file_slug("softmax_topk_timing", *ss["tk_tshape"].split())
    chart(fig, slug, "chart_topk_time")
    st.caption(
        f"Bars: median {time} time with the p10–p90 spread (inputs rotated out of L2). Labels: "
        "bytes each pipeline moves, % of the read-once floor (reading the logits once at the rate of a "
        f"device-to-device copy timed in the same run, in {time} time) and speed-up against "
        "torch.softmax + torch.topk in the same file (the same time). `torch.topk + logsumexp` is the best a user writes "
        "without a fused kernel: `v, i = torch.topk(x, k)`; `p = torch.exp(v - torch.logsumexp(x, -1))`."
    )
    st.caption(TIMES_CAPTION)
    shown = table.drop(columns=["rows", "cols", "dtype", "k"])  # the shape is chosen above
    shown["name"] = shown["name"].map(lambda n: figures.TOPK_NAMES.get(n, n))  # as the chart and bytes table say
    show_table(shown, hide_index=True, key="table_topk_time", column_config=TOPK_COLUMNS)
    csv_download(table, slug, "csv_topk_time", "Download timing table (CSV)", index=False)
    share_button(
        "share_topk",
        slug,
        "Softmax + top-k timing",
        [fig],
        shown,
        share_stamp(part, sources, origins),
        ss["tk_tshape"],
        TOPK_COLUMNS,
    )

"""The Timing view: run explorer.bench on a GPU, or load results files (several GPUs side by side; the H200's,
shipped in docs/results, with one button); a share image of the view; and the top-k page's timing table and
figure (fused, unfused, both torch baselines, % of the read-once floor).

explorer.bench is imported lazily: without it the page still loads results files, checked by a small
local validator of the same schema ("softmax-explorer-bench/1"). Text from results files reaches plotly
only through plotly_text(): it shows as text, never as markup.
"""

from __future__ import annotations

import datetime
import hashlib
import html
import importlib
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

import explorer

from . import compute, figures, gpu_lock
from .figures.share import device_line
from .figures.timing import TOPK_NAMES
from .share import share_button
from .state import file_slug

SCHEMA = "softmax-explorer-bench/1"
RESULTS_DIR = Path(__file__).resolve().parents[1] / "docs" / "results"  # the bundled H200 results
RESULT_FIELDS = ("name", "kind", "dtype", "acc", "rows", "cols", "median_us", "p10_us", "p90_us", "gbps")
TABLE_COLUMNS = [
    "source",
    "name",
    "version",
    "kind",
    "dtype",
    "acc",
    "rows",
    "cols",
    "block_size",
    "median_us",
    "p10_us",
    "p90_us",
    "device_us",
    "device_p10_us",
    "device_p90_us",
    "gbps",
    "pct_copy",
    "pct_copy_device",
    "bytes_moved",
    "reads_per_element",
    "writes_per_element",
    "max_rel",
    "error",
]
TIMES_CAPTION = (
    "Two times per row. **Event** (median µs): CUDA events around each launch, what a Python loop sees, "
    "launch gaps included. **Device** (device µs): the kernels' own durations from CUPTI records "
    "(torch.profiler; only where torch was installed), summed per call, median over batches. "
    "On small problems a kernel lasts a few µs and issuing it from Python longer, so the two differ; "
    "on large ones they agree within a few percent."
)
ss = st.session_state


def bench_module():
    try:
        return importlib.import_module("explorer.bench")
    except ImportError:
        return None


def validate(data) -> dict:
    """The local stand-in for explorer.bench.load: the schema's shape, with words for what is wrong."""
    if isinstance(data, (bytes, str)):
        try:
            data = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise explorer.InvalidInput(f"not a JSON file: {exc}") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise explorer.InvalidInput(f'not a benchmark results file (its "schema" must be {SCHEMA!r})')
    results = data.get("results")
    if not isinstance(results, list) or not results:
        raise explorer.InvalidInput("the file holds no results")
    for i, r in enumerate(results):
        missing = [f for f in RESULT_FIELDS if not isinstance(r, dict) or f not in r]
        if missing:
            raise explorer.InvalidInput(f"result {i} lacks {', '.join(missing)}")
        for f in ("median_us", "p10_us", "p90_us", "gbps", "rows", "cols"):
            if r.get("error") and f not in ("rows", "cols") and r[f] is None:
                continue  # a peer that failed on this shape has no times
            if not isinstance(r[f], (int, float)) or isinstance(r[f], bool):
                raise explorer.InvalidInput(f"result {i}: {f} must be a number, got {r[f]!r}")
    if not isinstance(data.get("meta", {}), dict):
        raise explorer.InvalidInput('"meta" must be an object')
    return data


@st.cache_data(show_spinner=False, max_entries=16)
def load_results(data: bytes) -> dict:
    mod = bench_module()
    if mod is not None and hasattr(mod, "load"):
        return mod.load(data)
    return validate(data)


# How every timing table (this page's and the top-k page's) shows the measurements.
TIME_COLUMNS = {
    "median_us": st.column_config.NumberColumn("median µs", format="%.2f"),
    "p10_us": st.column_config.NumberColumn("p10 µs", format="%.2f"),
    "p90_us": st.column_config.NumberColumn("p90 µs", format="%.2f"),
    "gbps": st.column_config.NumberColumn("GB/s", format="%.0f"),
    "device_us": st.column_config.NumberColumn("device µs", format="%.2f"),
    "device_p10_us": st.column_config.NumberColumn("device p10 µs", format="%.2f"),
    "device_p90_us": st.column_config.NumberColumn("device p90 µs", format="%.2f"),
    "bytes_moved": st.column_config.NumberColumn("bytes moved", format="%d"),
    "max_rel": st.column_config.NumberColumn("max rel", format="%.1e"),
    "version": st.column_config.TextColumn("version"),
    "error": st.column_config.TextColumn("error"),
}


TIMING_COLUMNS = {
    **TIME_COLUMNS,  # the Timing page's table
    "pct_copy": st.column_config.NumberColumn("% of copy (event)", format="%.0f"),
    "pct_copy_device": st.column_config.NumberColumn("% of copy (device)", format="%.0f"),
    "reads_per_element": st.column_config.NumberColumn("reads/elem"),
    "writes_per_element": st.column_config.NumberColumn("writes/elem"),
}
SHARE_COLUMNS = [
    "source",
    "name",
    "version",
    "median_us",
    "p10_us",
    "p90_us",
    "device_us",
    "gbps",
    "pct_copy",
    "pct_copy_device",
    "bytes_moved",
    "max_rel",
    "error",
]  # the table in the share image


def plotly_text(text) -> str:
    """Text from a results file for a plotly label, legend or hover: `<` and `&` escaped, so shown as text."""
    return html.escape(str(text), quote=False)


def display_names(df: pd.DataFrame) -> pd.DataFrame:
    """A copy for the figures: names carry the peer's version, and every file string is escaped for plotly."""
    out = df.copy()
    if "version" in out.columns:
        out["name"] = [f"{n} {v}" if isinstance(v, str) and v else n for n, v in zip(out["name"], out["version"])]
    for c in ("name", "source", "kind"):
        out[c] = [plotly_text(v) for v in out[c]]
    return out


def failed(df: pd.DataFrame) -> pd.DataFrame:
    """Rows of peers that could not run on the shape (an error, no times)."""
    if "error" not in df.columns:
        return df.iloc[0:0]
    return df[df["error"].notna() & (df["error"].astype(str) != "")]


def result_sources(
    run: dict | None, files, download_name: str, download_key: str, bundled: dict[str, bytes] | None = None
) -> tuple[dict, dict]:
    """This session's run (offered as a JSON download), the bundled results and the uploaded files, each
    labelled by its GPU: {label: document}, {label: where it came from}. A file that is not a results file is
    refused in words; results already loaded (the same file twice) are shown once."""
    sources, origins, seen, taken = {}, {}, {}, set()

    def add(doc: dict, origin: str) -> None:
        digest = hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()
        if digest in seen:
            st.caption(f"{origin} holds the same results as {seen[digest]}: shown once.")
            return
        seen[digest] = origin
        label = _label(doc.get("meta", {}), origin, taken)
        sources[label], origins[label] = doc, origin

    if run:
        add(run, "this run")
        st.download_button(
            "Download this run's results (JSON)",
            json.dumps(run, indent=1),
            file_name=f"{download_name}_{datetime.date.today().isoformat()}.json",
            mime="application/json",
            key=download_key,
            on_click="ignore",
            icon=":material/download:",
        )
    for name, data in (bundled or {}).items():
        add(load_results(data), name)
    for f in files or []:
        try:
            add(load_results(f.getvalue()), f.name)
        except explorer.ExplorerError as exc:
            st.error(f"{f.name}: {exc}")
    return sources, origins


@st.cache_data(show_spinner=False)
def bundled_results(topk: bool) -> dict[str, bytes]:
    """The results files shipped in docs/results, by name: those with top-k rows (topk) or the others."""
    out = {}
    for path in sorted(RESULTS_DIR.glob("*.json")):
        data = path.read_bytes()
        try:
            doc = load_results(data)
        except explorer.ExplorerError:
            continue
        if any(r.get("k") is not None for r in doc["results"]) == topk:
            out[path.name] = data
    return out


def _flip(key: str) -> None:
    ss[key] = not ss.get(key)


def bundled_button(key: str, topk: bool) -> dict[str, bytes]:
    """One button that loads the bundled results (and then removes them); the files while they are loaded.
    key is the page's URL parameter for it, so a shared link shows them too."""
    files = bundled_results(topk)
    if not files:
        return {}
    gpus = ", ".join(sorted({str(load_results(d).get("meta", {}).get("gpu") or "?") for d in files.values()}))
    label = (
        f"Remove the bundled {gpus} results"
        if ss.get(key)
        else f"Load the bundled {gpus} results ({len(files)} file{'s' * (len(files) > 1)} from docs/results)"
    )
    st.button(
        label, key=f"{key}_button", on_click=_flip, args=(key,), icon=":material/folder_open:", help=", ".join(files)
    )
    return files if ss.get(key) else {}


def share_stamp(part: pd.DataFrame, sources: dict[str, dict], origins: dict[str, str]) -> list[str]:
    """The share image's stamp for results rows of one shape: the shape, dtype, k (top-k rows) and accumulator,
    then one line per results file they come from."""
    r = part.iloc[0]
    k = f" · top-{int(r['k'])}" if pd.notna(r.get("k")) else ""
    shape = f"shape {int(r['rows'])}×{int(r['cols'])} · dtype {r['dtype']}{k} · accumulator {r.get('acc') or '?'}"
    return [shape] + [device_line(sources[s].get("meta", {}), source=origins[s]) for s in dict.fromkeys(part["source"])]


def meta_stamp(meta: dict) -> str:
    return plotly_text(figures.stamp_text({"backend": "cuda", **meta}, str(meta.get("date", "?"))[:10]))


def chart_stamp(part: pd.DataFrame, sources: dict[str, dict]) -> str:
    """The charts' stamp for results rows: each file's GPU, CUDA, CuPy and date, one line each (once)."""
    return "<br>".join(dict.fromkeys(meta_stamp(sources[s].get("meta", {})) for s in part["source"]))


def stamp_below(*figs: go.Figure) -> None:
    """A stamp of several lines goes under the x axis title (figures.finish puts one line beside it, where
    several would run over the title), with the bottom margin grown to hold it."""
    for fig in figs:
        lines = max((a.text.count("<br>") + 1 for a in fig.layout.annotations if a.name == "stamp"), default=1)
        if lines > 1:
            fig.update_annotations(selector=dict(name="stamp"), yshift=-50, align="right")
            fig.update_layout(margin_b=64 + 14 * lines, height=fig.layout.height + 14 * lines)


def _label(meta: dict, filename: str, taken: set) -> str:
    label = str(meta.get("gpu") or filename)
    if label in taken:
        label = f"{label} ({filename})"
    taken.add(label)
    return label


def _run_benchmark(cfg, mod) -> None:
    peers = st.toggle(
        "Include peers (cupyx, torch, and QuACK and Liger where installed)", value=True, key="bench_peers"
    )
    if not st.button(
        f"Run the benchmark: {len(cfg.variants)} variant(s) on {cfg.rows}×{cfg.cols} {cfg.dtype}",
        key="bench_run",
        icon=":material/timer:",
        type="primary",
    ):
        return
    with gpu_lock.gpu_turn():  # one benchmark at a time across sessions: ui/gpu_lock.py
        result = _timed_run(cfg, mod, peers)
    ss["_bench_results"] = result


def _timed_run(cfg, mod, peers: bool) -> dict:
    bar = st.progress(0.0, text="Validating, warming up and timing…")
    try:
        return mod.run(
            list(cfg.variants),
            [(cfg.rows, cfg.cols)],
            [cfg.dtype],
            acc=cfg.acc,
            block_size=cfg.block if any(explorer.VARIANTS[k].takes_block_size for k in cfg.variants) else None,
            peers=peers,
            progress=lambda f, text: bar.progress(min(max(f, 0.0), 1.0), text=text),
        )
    finally:
        bar.empty()


def render(cfg) -> None:
    info = compute.backend_info()
    mod = bench_module()
    gpu = info.get("backend") == "cuda"
    if not gpu:
        st.info(
            "Timings need a GPU: this server runs the CPU emulation, whose speed says nothing about the kernels. "
            "Load results files measured on a GPU (written by `explorer.bench`) to see and compare them.",
            icon=":material/timer_off:",
        )
    elif mod is None or not hasattr(mod, "run"):
        st.warning("This version of the explorer has no benchmark module (explorer.bench); load results files below.")
    elif cfg is not None and cfg.variants and not ss.get("_fit_problem"):
        _run_benchmark(cfg, mod)

    files = st.file_uploader(
        "Benchmark results (JSON, one file per GPU)",
        type=["json"],
        accept_multiple_files=True,
        key="bench_files",
        help=f"Files with schema {SCHEMA!r}; several files show side by side.",
    )
    sources, origins = result_sources(
        ss.get("_bench_results"), files, "bench", "json_bench", bundled_button("bench_bundled", topk=False)
    )
    if not sources:
        return
    df = figures.results_frame(sources)
    df["shape"] = df.apply(figures.shape_label, axis=1)
    shapes = list(dict.fromkeys(df["shape"]))
    if ss.get("tshape") not in shapes:
        ss["tshape"] = shapes[0]
    st.selectbox("Shape and dtype", shapes, key="tshape")
    part = df[df["shape"] == ss["tshape"]]
    selected = set(cfg.variants) if cfg is not None else set()
    chosen = part[(part["kind"] != "variant") | part["name"].isin(selected)]
    if not (chosen["kind"] == "variant").any():
        st.caption("None of the sidebar's variants is in these results; showing every variant measured.")
        chosen = part
    stamp = chart_stamp(chosen, sources)
    broken = failed(chosen)
    t, g = figures.timing_figures(display_names(chosen.drop(index=broken.index)), plotly_text(ss["tshape"]), stamp)
    stamp_below(t, g)
    slug = file_slug("softmax_timing", *ss["tshape"].split())
    st.plotly_chart(t, config=figures.chart_config(slug + "_time"), key="chart_time", width="stretch", theme=None)
    st.plotly_chart(
        g, config=figures.chart_config(slug + "_bandwidth"), key="chart_bandwidth", width="stretch", theme=None
    )
    table = chosen[[c for c in TABLE_COLUMNS if c in chosen.columns]].reset_index(drop=True)
    shown = [c for c in table.columns if c not in ("dtype", "acc", "rows", "cols")]  # the shape is chosen above
    st.caption(
        "Bars: event time, p10–p90 spread. Hatched: peers (/, with their versions) and the copy baseline (.). "
        "GB/s = bytes moved / median time; % of copy: against a device-to-device copy of the same bytes "
        "measured in the same run, from event time and (table) from device time."
    )
    if len(broken):
        st.warning(
            f"{len(broken)} peer result(s) on this shape could not be timed: the table's error column says why.",
            icon=":material/error:",
        )
    st.caption(TIMES_CAPTION)
    st.dataframe(table[shown], width="stretch", hide_index=True, key="table_timing", column_config=TIMING_COLUMNS)
    st.download_button(
        "Download table (CSV)",
        table.to_csv(index=False).encode(),
        file_name=f"{slug}.csv",
        mime="text/csv",
        key="csv_timing",
        on_click="ignore",
        icon=":material/download:",
    )
    share_button(
        "share_timing",
        slug,
        "Softmax timing",
        [t, g],
        table[[c for c in SHARE_COLUMNS if c in table]],
        share_stamp(chosen, sources, origins),
        ss["tshape"],
        TIMING_COLUMNS,
    )


# --- the top-k page's timing ----------------------------------------------------------------------------------

TOPK_EXTRA = ["version", "device_us", "floor_us", "pct_floor", "floor_device_us", "pct_floor_device", "error"]
TOPK_COLUMNS = {  # beside TIME_COLUMNS
    "floor_us": st.column_config.NumberColumn("floor µs (event)", format="%.2f"),
    "pct_floor": st.column_config.NumberColumn("% of floor (event)", format="%.0f"),
    "floor_device_us": st.column_config.NumberColumn("floor µs (device)", format="%.2f"),
    "pct_floor_device": st.column_config.NumberColumn("% of floor (device)", format="%.0f"),
}


def topk_table(part: pd.DataFrame) -> pd.DataFrame:
    """figures.topk_timing_table (speed-up against torch, MB moved) plus version, device time and the floor."""
    table = figures.topk_timing_table(part)
    for c in TOPK_EXTRA:
        if c in part.columns:
            table[c] = part[c].to_numpy()
    return table


def _pct_floor_label(r) -> str:
    for field, basis in (("pct_floor_device", " (device)"), ("pct_floor", "")):
        v = r.get(field)
        if v is not None and isinstance(v, (int, float)) and np.isfinite(v):
            return f" · {v:.0f}% of floor{basis}"
    return ""


def topk_figure(table: pd.DataFrame, title: str, stamp: str) -> go.Figure:
    """Median µs per launch (event time) with p10–p90 bars, one group per source; each bar labelled with the
    bytes it moves, its % of the read-once floor and its speed-up against torch.softmax + torch.topk."""
    fig = go.Figure()
    timed = table[table["median_us"].notna()]
    colors = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e")
    for i, (source, part) in enumerate(timed.groupby("source", sort=False)):
        order = [n for n in TOPK_NAMES if n in set(part["name"])]
        part = part.set_index("name").loc[order].reset_index()
        text = []
        for _, r in part.iterrows():
            speed = r["speedup_vs_torch"]
            text.append(
                f"{r['MB_moved']:,.1f} MB"
                + _pct_floor_label(r)
                + (f" · {speed:.2f}× torch" if math.isfinite(speed) else "")
            )
        fig.add_trace(
            go.Bar(
                x=[TOPK_NAMES[n] for n in part["name"]],
                y=part["median_us"],
                name=plotly_text(source),
                marker_color=colors[i % len(colors)],
                text=text,
                textposition="outside",
                marker_pattern_shape=["/" if n.startswith("torch") else "" for n in part["name"]],
                error_y=dict(
                    type="data",
                    symmetric=False,
                    array=part["p90_us"] - part["median_us"],
                    arrayminus=part["median_us"] - part["p10_us"],
                    thickness=1.5,
                ),
                hovertemplate="%{x}<br>median %{y:.2f} µs<br>%{text}<extra>" + plotly_text(source) + "</extra>",
            )
        )
    fig.update_layout(barmode="group", showlegend=True)
    fig.update_yaxes(title_text="median time per launch (µs), bars p10–p90", rangemode="tozero")
    fig.update_xaxes(title_text="pipeline (hatched: the torch baselines)")
    fig = figures.finish(fig, plotly_text(title), stamp, height=480)
    stamp_below(fig)
    return fig

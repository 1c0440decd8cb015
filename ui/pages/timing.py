"""The Timing page: run explorer.bench on a GPU, or load results files (several GPUs side by side; the H200's,
shipped in docs/results, with one button: ui/results.py), and a share image of the view."""

from __future__ import annotations

import pandas as pd
import streamlit as st

import explorer
from explorer import bench

from .. import compute, figures, gpu_lock
from ..common import chart, csv_download, ensure_choice, guarded, header, number_columns, show_table
from ..page import KERNEL_SECTIONS, Page
from ..params import Param
from ..results import (
    TIME_COLUMNS,
    TIMES,
    TIMES_CAPTION,
    chart_stamp,
    display_names,
    failed,
    no_gpu_note,
    result_sources,
    share_stamp,
    time_shown,
)
from ..share import share_button
from ..state import file_slug
from ..text import as_text

PARAMS = (  # bench_bundled: ui/results.py
    Param("tshape", "text", ""),
    Param("bench_bundled", "flag", False, sparse=True),
    Param("twfile", "text", "", sparse=True),  # the file drawn across widths, where several measured them
    Param("ttime", "word", "device", choices=TIMES, sparse=True),  # the bars' time
)

# the kernel and its times first (a 1000 px window shows about six columns; the name stays pinned), where it came
# from after
TABLE_COLUMNS = [
    *("name", "version", "device_us", "pct_copy_device", "median_us", "pct_copy", "gbps"),
    *("gbps_device", "device_p10_us", "device_p90_us", "p10_us", "p90_us"),
    *("source", "kind", "dtype", "acc", "rows", "cols", "block_size"),
    *("bytes_moved", "reads_per_element", "writes_per_element", "max_rel", "error"),
]
ss = st.session_state
NAME_PX = 120  # online_thread in full: narrower, online_thread, _warp and _block all read "online_"

TIMING_COLUMNS = (
    TIME_COLUMNS
    | number_columns(  # the Timing page's table
        {
            "pct_copy": ("% of copy (event)", "%.0f"),
            "pct_copy_device": ("% of copy (device)", "%.0f"),
            "reads_per_element": ("reads/elem", None),
            "writes_per_element": ("writes/elem", None),
        }
    )
    | {"name": st.column_config.TextColumn("name", pinned=True, width=NAME_PX)}
)
# the table in the share image: device time (what the bars show by default) with its spread and rate, then event time;
# the source only where several files are loaded
SHARE_COLUMNS = [
    *("name", "source", "version", "device_us", "device_p10_us", "device_p90_us", "gbps_device", "pct_copy_device"),
    *("median_us", "p10_us", "p90_us", "gbps", "pct_copy", "bytes_moved", "max_rel", "error"),
]


def _run_benchmark(cfg) -> None:
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
    with gpu_lock.bench_turn() as progress:  # one benchmark at a time across sessions: ui/gpu_lock.py
        ss["_bench_results"] = bench.run(
            list(cfg.variants),
            [(cfg.rows, cfg.cols)],
            [cfg.dtype],
            acc=cfg.acc,
            block_size=cfg.block if any(explorer.VARIANTS[k].takes_block_size for k in cfg.variants) else None,
            peers=peers,
            progress=progress,
        )


def render(cfg, gpu: bool) -> None:
    no_gpu = st.empty()  # what the page says of this server's missing GPU depends on whether files are loaded
    if gpu and cfg is not None and cfg.variants and not ss.get("_fit_problem"):
        _run_benchmark(cfg)

    sources, origins = result_sources(
        "Benchmark results (JSON, one file per GPU)",
        "bench",
        f"Files with schema {bench.SCHEMA!r}; several files show side by side.",
        ss.get("_bench_results"),
        "bench",
        "bench_bundled",
        topk=False,
    )
    if not gpu:
        no_gpu_note(no_gpu, bool(sources), "results files measured on a GPU (written by `explorer.bench`)")
    if sources and not (df := _softmax_rows(figures.results_frame(sources))).empty:
        chosen = _chosen_rows(cfg, df)
        timed, time = _show_results(chosen, sources, origins)
        _across_widths(df, timed, sources, time)


def _softmax_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The loaded results without the top-k runs, which the Softmax + top-k page shows: the rows with a k (their
    times are of another pipeline, and their shapes repeat once per k) and the copies timed for them (a copy row on
    a shape no softmax row of its file has)."""
    if df.empty or "k" not in df.columns or df["k"].isna().all():
        return df
    topk = df["k"].notna()
    shape = ["source", "rows", "cols", "dtype"]
    measured = df.loc[~topk & (df["kind"] != "copy"), shape].drop_duplicates()
    kept = df[~topk].merge(measured, on=shape, how="inner")  # copies only beside what they are a baseline for
    if kept.empty:
        st.info(
            "These are top-k results (explorer bench --topk): the Softmax + top-k page shows them.",
            icon=":material/info:",
        )
    else:
        st.caption(f"{int(topk.sum())} top-k result(s) left out: the Softmax + top-k page shows them.")
    return kept


SHAPES_NAMED = 2  # the shapes named where a variant missing at the chosen one was measured, at most


def _measured_at(df: pd.DataFrame, variants: list[str]) -> str:
    """Where else these variants were measured, variants with the same shapes together: " Measured elsewhere in these
    results: naive, online_warp at 65536×1024 float32 acc float32; split_row at 9 shapes (1×1048576 …, …)."."""
    shapes_of = {v: tuple(dict.fromkeys(df.loc[df["name"] == v, "shape"])) for v in variants}
    together: dict[tuple, list[str]] = {}
    for v, shapes in shapes_of.items():
        if shapes:
            together.setdefault(shapes, []).append(v)
    where = [
        f"{', '.join(names)} at "
        + (
            " and ".join(shapes)
            if len(shapes) <= SHAPES_NAMED
            else f"{len(shapes)} shapes ({', '.join(shapes[:SHAPES_NAMED])}, …)"
        )
        for shapes, names in together.items()
    ]
    return f" Measured elsewhere in these results: {'; '.join(where)}." if where else ""


def _chosen_rows(cfg, df: pd.DataFrame) -> pd.DataFrame:
    """The results of the shape chosen here (at first, the one that measured most of the sidebar's variants): copy and
    peers, and the sidebar's variants (every variant measured where none of them is)."""
    df["shape"] = df.apply(figures.shape_label, axis=1)
    shapes = list(dict.fromkeys(df["shape"]))
    wanted = list(cfg.variants) if cfg is not None else []
    measured = df[df["name"].isin(wanted)].groupby("shape")["name"].nunique()
    most = max(shapes, key=lambda s: measured.get(s, 0))  # the first shape that measured most of them
    ensure_choice("tshape", shapes, most, what="Shape and dtype")
    st.selectbox("Shape and dtype", shapes, key="tshape")
    part = df[df["shape"] == ss["tshape"]]
    chosen = part[(part["kind"] != "variant") | part["name"].isin(wanted)]
    here = set(part["name"])
    missing = [v for v in wanted if v not in here]
    found = _measured_at(df, missing)
    if not (chosen["kind"] == "variant").any():
        st.caption(
            as_text(f"None of the sidebar's variants is measured at this shape; showing every variant measured.{found}")
        )
        return part
    if missing:
        st.caption(as_text(f"Not measured at this shape: {', '.join(missing)}.{found}"))
    return chosen


def _show_results(chosen: pd.DataFrame, sources: dict[str, dict], origins: dict[str, str]) -> tuple[pd.DataFrame, str]:
    """The chosen rows' time and bandwidth charts, their table with its downloads, and the share image; the rows
    that were timed (the failures left out), and the time they show (device or event)."""
    stamp = chart_stamp(chosen, sources)
    broken = failed(chosen)
    timed = chosen.drop(index=broken.index)
    time = time_shown(timed, "ttime")
    t, g = figures.timing_figures(display_names(timed, ticks=True), figures.plotly_text(ss["tshape"]), stamp, time)
    slug = file_slug("softmax_timing", *ss["tshape"].split())
    chart(t, slug + "_time", "chart_time")
    chart(g, slug + "_bandwidth", "chart_bandwidth")
    several = chosen["source"].nunique() > 1  # files: which one a row is from, beside its name, else not at all
    columns = [c for c in TABLE_COLUMNS if c in chosen.columns]
    if several:
        columns.insert(1, columns.pop(columns.index("source")))
    table = chosen[columns].reset_index(drop=True)
    shown = [c for c in table.columns if c not in ("dtype", "acc", "rows", "cols")]  # the shape is chosen above
    st.caption(
        f"Bars: {time} time, p10–p90 spread. Hatched: peers (/, with their versions) and the copy baseline (.). "
        "GB/s = bytes moved / median time; % of copy: against a device-to-device copy of the same bytes "
        f"measured in the same run, from the same {time} time (the table has both)."
    )
    if len(broken):
        st.warning(
            f"{len(broken)} result(s) on this shape could not be timed: the table's error column says why.",
            icon=":material/error:",
        )
    st.caption(TIMES_CAPTION)
    # block size 0: the kernel (fast, a peer, the copy) chooses its own launch; shown as no value, kept in the CSV
    shown_table = table[shown]
    if "block_size" in shown_table:
        size = pd.to_numeric(shown_table["block_size"], errors="coerce")
        shown_table = shown_table.assign(block_size=size.where(size > 0))
    show_table(shown_table, hide_index=True, key="table_timing", column_config=TIMING_COLUMNS)
    csv_download(table, slug, "csv_timing", index=False)
    share_button(
        "share_timing",
        slug,
        "Softmax timing",
        [t, g],
        table[[c for c in SHARE_COLUMNS if c in table and (c != "source" or several)]],
        share_stamp(chosen, sources, origins),
        ss["tshape"],
        TIMING_COLUMNS,
    )
    return timed, time


def _across_widths(df: pd.DataFrame, timed: pd.DataFrame, sources: dict[str, dict], time: str) -> None:
    """The chosen shape's timed kernels at every width of its dtype and element count that a file measured, as % of copy
    from the `time` the bars above show (event time where a width lacks device time): where each kernel reaches the
    copy's bandwidth, and where it falls off. One file at a time, where several did."""
    part = figures.sweep_rows(df, timed)
    if part.empty:
        return
    r = timed.iloc[0]
    elements = int(r["rows"]) * int(r["cols"])
    st.subheader("Across widths")
    files = list(dict.fromkeys(part["source"]))
    if len(files) > 1:
        ensure_choice("twfile", files)
        st.selectbox(
            "Results file", files, key="twfile", help="Files that measured this dtype at several widths, most first."
        )
    source = ss["twfile"] if len(files) > 1 else files[0]
    part = part[part["source"] == source]
    about = "" if (part["rows"] * part["cols"] == elements).all() else "≈ "
    title = f"% of copy against width: {r['dtype']} acc {r['acc']}, {about}{elements:,} elements"
    title = f"{figures.plotly_text(title)}<br><sup>{figures.plotly_text(source)}</sup>"  # the file on a line of its own
    fig = figures.sweep_figure(display_names(part), int(r["cols"]), title, chart_stamp(part, sources), time)
    chart(fig, file_slug("softmax_widths", r["dtype"], f"acc-{r['acc']}", str(elements)), "chart_widths")
    st.caption(
        f"Every width at which the file measured {elements:,} {r['dtype']} elements (within 0.1 %: rows filling them "
        "at a width that does not divide them), the kernels shown above, one line each; 100 % is a copy of the same "
        "bytes in the same run. Circled: the width chosen above."
    )


@guarded
def timing_page() -> None:
    cfg = st.session_state.get("_cfg")
    gpu = compute.backend_info().get("backend") == "cuda"  # without one nothing runs: the shapes are the files'
    header("Timing", cfg.shape_text() if cfg is not None and gpu else None)
    render(cfg, gpu)


PAGE = Page(
    timing_page,
    "Timing",
    "timing",
    ":material/timer:",
    params=PARAMS,
    sidebar=KERNEL_SECTIONS,
    sidebar_without_gpu=("kernels",),  # no benchmark runs: the results files' shapes are chosen on the page
    runs_the_shape=True,  # its benchmark, on a GPU
)

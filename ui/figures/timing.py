"""The Timing and top-k pages' figures and tables, from benchmark results documents."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

import explorer
from explorer.peers import SOFTMAX_PEER_LABELS
from explorer.topk import TOPK_VARIANTS, TORCH_TOPK_LABELS

from .common import (
    CHART_PX,
    COLORS,
    REF_COLOR,
    finish,
    label_step,
    legend_right,
    note_above,
    plotly_text,
    stamp_below,
    stamp_lines_below,
    stamp_under_tall_ticks,
    wrap_title,
)

KEY_CHARS = 80  # a line of 11 px words this long is about 450 px


def results_frame(sources: dict[str, dict]) -> pd.DataFrame:
    """All results of several loaded files in one table, with the file's GPU as 'source'."""
    frames = []
    for label, data in sources.items():
        df = pd.DataFrame(data.get("results", []))
        if df.empty:
            continue
        df.insert(0, "source", label)
        frames.append(df)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def shape_label(row) -> str:
    return f"{int(row['rows'])}×{int(row['cols'])} {row['dtype']} acc {row['acc']}"


# A results row's times in each of its two measures (explorer/harness.py), and the % of copy and (top-k rows) of the
# read-once floor from each
TIME_FIELDS = {
    "event": {"us": "median_us", "p10": "p10_us", "p90": "p90_us", "pct": "pct_copy", "floor": "pct_floor"},
    "device": {
        "us": "device_us",
        "p10": "device_p10_us",
        "p90": "device_p90_us",
        "pct": "pct_copy_device",
        "floor": "pct_floor_device",
    },
}
TIME_AXIS = {"event": "event time per launch ({}), bars p10–p90", "device": "device time per call ({}), bars p10–p90"}
LOG_TIME_RATIO = 20  # the time chart's axis is logarithmic where its longest bar is this many times its shortest


def spread(part: pd.DataFrame, time: str = "event") -> dict:
    """Error bars from the median down to p10 and up to p90 (µs), of event or device time; none where the results
    have no spread."""
    f = TIME_FIELDS[time]
    if f["p10"] not in part or f["p90"] not in part:
        return dict(visible=False)
    return dict(
        type="data",
        symmetric=False,
        array=part[f["p90"]] - part[f["us"]],
        arrayminus=part[f["us"]] - part[f["p10"]],
        thickness=1.5,
    )


def timing_figures(df: pd.DataFrame, title: str, stamp: str, time: str = "event") -> tuple[go.Figure, go.Figure]:
    """Median µs with p10–p90 bars (on a log axis where they span more than LOG_TIME_RATIO), and GB/s with % of the
    copy bandwidth, of event or device time (TIME_FIELDS), one bar group per source (several: each bar's label the
    bare percentage, so that neighbours' labels do not run into each other)."""
    f = TIME_FIELDS[time]
    t = go.Figure()
    g = go.Figure()
    groups = df.groupby("source", sort=False)
    pct_label = "{:.0f}% of copy" if groups.ngroups == 1 else "{:.0f}%"
    for i, (source, part) in enumerate(groups):
        color = COLORS[i % len(COLORS)]
        patterns = [{"peer": "/", "copy": "."}.get(k, "") for k in part["kind"]]  # the kind: hatched peers, dotted copy
        bars = dict(x=part["name"], name=source, marker_color=color, marker_pattern_shape=patterns)  # both figures'
        t.add_trace(
            go.Bar(
                **bars,
                y=part[f["us"]],
                error_y=spread(part, time),
                hovertemplate="%{x}<br>median %{y:.2f} µs<extra>" + source + "</extra>",
            )
        )
        pct = part[f["pct"]].astype(float) if f["pct"] in part else pd.Series(np.nan, index=part.index)
        g.add_trace(
            go.Bar(
                **bars,
                y=part["bytes_moved"].astype(float) / part[f["us"]].astype(float) / 1e3,  # GB/s
                text=[pct_label.format(p) if np.isfinite(p) else "" for p in pct],
                textposition="outside",
                hovertemplate="%{x}<br>%{y:.1f} GB/s<extra>" + source + "</extra>",
            )
        )
    us = pd.to_numeric(df[f["us"]], errors="coerce")
    log = bool((us > 0).any()) and us.max() > LOG_TIME_RATIO * us[us > 0].min()
    t.update_yaxes(title_text=TIME_AXIS[time].format("µs, log" if log else "µs"), type="log" if log else "linear")
    if log:
        t.update_yaxes(dtick=1, exponentformat="none")  # 1, 10, 100, ... µs
    g.update_yaxes(
        title_text=f"effective bandwidth (GB/s, {time} time)"
        if groups.ngroups == 1
        else f"GB/s ({time} time), labels % of copy"  # no longer than the plot is tall
    )
    for fig in (t, g):
        fig.update_layout(barmode="group", bargroupgap=0.12, showlegend=True)
        fig.update_xaxes(title_text="kernel (hatched: peers; dotted: the copy)")
    t, g = finish(t, f"{title}: time", stamp, height=460), finish(g, f"{title}: bandwidth", stamp, height=460)
    return stamp_under_tall_ticks(t), stamp_under_tall_ticks(g)


SWEEP_MIN_WIDTHS = 3  # a file's shapes of one dtype and element count make a line across widths from this many
SWEEP_COUNT_TOLERANCE = 1e-3  # element counts this close are one count: rows filling 2^27 at a width not dividing it
TICK_SPACING = 0.5  # decades between width ticks at least: every other power of two, level, in a narrow chart too


def sweep_rows(df: pd.DataFrame, chosen: pd.DataFrame) -> pd.DataFrame:
    """The rows to draw across widths for the chosen shape's rows: its kernels (no copy) at every width of the same
    dtype, accumulator and element count (rows × cols, within SWEEP_COUNT_TOLERANCE) that a file measured, from files
    with SWEEP_MIN_WIDTHS widths of it or more (those with the most widths first); timed rows only. None where no
    chosen row was timed."""
    if chosen.empty:
        return df.iloc[0:0]
    r = chosen.iloc[0]
    count = r["rows"] * r["cols"]
    same = (
        (df["dtype"] == r["dtype"])
        & (df["acc"] == r["acc"])
        & ((df["rows"] * df["cols"] - count).abs() <= SWEEP_COUNT_TOLERANCE * count)
        & df["name"].isin(set(chosen["name"]))
        & (df["kind"] != "copy")
        & pd.to_numeric(df["median_us"], errors="coerce").notna()
    )
    part = df[same]
    widths = part.groupby("source", sort=False)["cols"].nunique()
    kept = widths[widths >= SWEEP_MIN_WIDTHS].sort_values(ascending=False, kind="stable").index
    return pd.concat([part[part["source"] == s] for s in kept] or [part.iloc[0:0]], ignore_index=True)


def width_label(cols: int) -> str:
    return f"{cols // 1024}K" if cols >= 1024 and cols % 1024 == 0 else f"{cols:,}"


def width_ticks(widths: list[int]) -> list[int]:
    """The widths to tick on a log axis: powers of two first, then the others TICK_SPACING decades from every tick."""
    ticks: list[int] = []
    for w in sorted(widths, key=lambda w: (w & (w - 1) != 0, w)):
        if all(abs(math.log10(w / t)) >= TICK_SPACING for t in ticks):
            ticks.append(w)
    return sorted(ticks)


# a colour each, whichever are drawn: fast and the peers first (the sweeps' lines), then the story's, latest first
SWEEP_KERNELS = ("fast", *SOFTMAX_PEER_LABELS, *reversed([v for v in explorer.VARIANTS if v != "fast"]))


def sweep_color(kernel: str) -> str:
    """A kernel's line colour across widths, the same whichever others a dtype has (cupyx has no bfloat16), so that
    switching dtypes does not swap colours; a name outside SWEEP_KERNELS takes one from its letters."""
    index = SWEEP_KERNELS.index(kernel) if kernel in SWEEP_KERNELS else sum(map(ord, kernel))
    return COLORS[index % len(COLORS)]


def sweep_figure(part: pd.DataFrame, chosen_cols: int, title: str, stamp: str, time: str = "device") -> go.Figure:
    """One file's rows across widths (sweep_rows, named by display_names): % of copy against width, one line per
    kernel, from device time where asked and every point has it, else event time (the axis says which); the chosen
    width's points circled."""
    device_pct = TIME_FIELDS["device"]["pct"]
    basis = "device" if time == "device" and device_pct in part and part[device_pct].notna().all() else "event"
    field = TIME_FIELDS[basis]["pct"]
    fig = go.Figure()
    fig.add_hline(y=100, line=dict(color=REF_COLOR, width=1, dash="dot"))
    for (name, kernel), line in part.groupby(["name", "kernel"], sort=False):
        line = line.sort_values("cols")
        fig.add_trace(
            go.Scatter(
                x=line["cols"],
                y=line[field].astype(float),
                name=name,
                mode="lines+markers",
                line=dict(color=sweep_color(kernel)),
                customdata=line["rows"],
                hovertemplate=f"{name}<br>%{{customdata}}×%{{x:d}}<br>%{{y:.1f}}% of copy<extra></extra>",
            )
        )
    here = part[part["cols"] == chosen_cols]
    fig.add_trace(
        go.Scatter(
            x=here["cols"],
            y=here[field].astype(float),
            name="the shape above",
            mode="markers",
            marker=dict(symbol="circle-open", size=16, color=REF_COLOR, line=dict(width=1.5)),
            hoverinfo="skip",
        )
    )
    ticks = width_ticks(sorted(set(part["cols"])))
    labels = [width_label(w) for w in ticks]
    fig.update_xaxes(type="log", tickvals=ticks, ticktext=labels, tickangle=0, title_text="row width (cols)")
    fig.update_yaxes(title_text=f"% of copy ({basis} time)", rangemode="tozero")
    return stamp_below(legend_right(finish(fig, title, stamp, height=460)))


TOPK_NAMES = {**{key: key for key in TOPK_VARIANTS}, **TORCH_TOPK_LABELS}  # the top-k chart's bars, in order
TOPK_STATUS_PATTERN = {"same": "", "tie": ".", "wrong": "x"}


def topk_bars_figure(
    ref_values: np.ndarray,
    ref_indices: np.ndarray,
    outputs: dict[str, tuple],
    log: bool,
    title: str,
    stamp: str,
    status: dict[str, np.ndarray] | None = None,
) -> go.Figure:
    """One row's top-k: the float64 reference's bars beside each variant's, rank by rank.

    outputs: name -> (values, indices), each of length k. status: name -> per rank "same", "tie" (the index
    differs from the reference's only between probabilities equal within rounding) or "wrong"; ties are
    dotted, wrong indices crossed. The x axis names each rank with the reference's index; only bars whose index
    differs from it carry a label (their own index), so the labels are exactly the disagreements.
    """
    ref_values = np.asarray(ref_values, dtype=np.float64)
    ref_indices = np.asarray(ref_indices, dtype=np.int64)
    k = ref_values.size
    ranks = [str(r) for r in range(1, k + 1)]
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            x=ranks,
            y=ref_values,
            name="float64 reference",
            marker_color=REF_COLOR,
            customdata=ref_indices,
            hovertemplate="reference, rank %{x}<br>index %{customdata}<br>p = %{y:.10g}<extra></extra>",
        )
    )
    for n, (name, (values, indices)) in enumerate(outputs.items()):
        ranked = np.asarray(status.get(name) if status else ["same"] * k)
        _add_topk_bars(fig, ranks, name, values, indices, ranked, COLORS[n % len(COLORS)])
    _rank_axes(fig, ranks, ref_indices, log, [ref_values, *(values for values, _ in outputs.values())])
    counts = {s: sum(int(np.sum(np.asarray(v) == s)) for v in (status or {}).values()) for s in ("tie", "wrong")}
    key = wrap_title(  # in lines that a chart beside the sidebar in a 1000 px window holds
        f"dotted: tie swapped within rounding ({counts['tie']}) · crossed, red edge: index "
        f"differs beyond rounding ({counts['wrong']}) · ties go to the lower index",
        KEY_CHARS,
    )
    note_above(fig, key)
    fig = stamp_under_tall_ticks(legend_right(finish(fig, title, stamp, height=520)))  # ticks: rank, index
    # plotly centres the title in the top margin: the margin holds it twice over (20 px a line), with the key's lines
    # (14 px each) under it; the figure grows by as much, so that the plot keeps its height (a shorter log axis
    # crowds its labels)
    title_lines, key_lines = fig.layout.title.text.count("<br>") + 1, key.count("<br>") + 1
    grow = max(0, 20 * title_lines + 28 * key_lines + 16 - fig.layout.margin.t)
    fig.update_layout(margin_t=fig.layout.margin.t + grow, height=fig.layout.height + grow)
    if log and fig.layout.yaxis.range is not None:
        low, high = fig.layout.yaxis.range
        fig.update_yaxes(dtick=log_dtick(high - low, fig.layout.height - fig.layout.margin.t - fig.layout.margin.b))
    return fig


# the top-k chart's plot in a CHART_PX chart (the legend beside it takes the rest), and a rank's two-line label
# ("16", "#50256"), turned upright by plotly where they do not fit side by side, with its gap
TOPK_PLOT_PX, RANK_LABEL_PX = CHART_PX - 215, 34
TOPK_LOG_HEADROOM = 0.08  # the share of a log axis's span above its tallest bar: room for the labels over the bars


def _topk_log_range(values: list) -> list[float] | None:
    """A log axis's range (log10 units) for bars of these values: from a whole decade at least one decade below the
    smallest positive value, so that bars equal within rounding look equal (an autorange can span a billionth of a
    decade and turn a float32 rounding into a bar many times taller); None where no value is positive (zeros and
    non-finite values are not drawn on a log axis)."""
    every = np.concatenate([np.asarray(v, dtype=np.float64).ravel() for v in values])
    drawn = every[np.isfinite(every) & (every > 0)]
    if not drawn.size:
        return None
    floor = math.floor(math.log10(drawn.min())) - 1
    top = math.log10(drawn.max())
    return [floor, top + TOPK_LOG_HEADROOM * (top - floor)]


LOG_LABEL_PX = 18  # a power-of-ten tick label ("10⁻⁵") and the gap it needs above the next


def log_dtick(decades: float, plot_px: float) -> str | int:
    """plotly's dtick for a log axis spanning `decades` over `plot_px`: 1, 2 and 5 in each decade ("D2") where the
    closest two (0.3 of a decade apart) stay LOG_LABEL_PX apart, else every decade, or every n-th where even
    those would touch (a top-64 row's probabilities can span ten decades)."""
    per_decade = plot_px / max(decades, 1e-9)
    if 0.3 * per_decade >= 0.75 * LOG_LABEL_PX:  # the 2 and 5 are set smaller than the powers of ten
        return "D2"
    return max(1, math.ceil(LOG_LABEL_PX / per_decade))


def _rank_axes(fig: go.Figure, ranks: list[str], ref_indices: np.ndarray, log: bool, values: list) -> None:
    """Grouped bars over the ranks, each rank ticked with the reference's index; probability on a log axis from
    _topk_log_range's floor, or on a linear axis from 0."""
    fig.update_layout(barmode="group", bargap=0.25)
    every = label_step(len(ranks), RANK_LABEL_PX, TOPK_PLOT_PX)  # k = 16: every other rank beside the sidebar
    fig.update_xaxes(
        title_text="rank (the reference's index under it)",
        tickvals=ranks[::every],
        ticktext=[f"{r}<br>#{i}" for r, i in zip(ranks, ref_indices)][::every],
        type="category",
        ticklabelstandoff=10,  # upright, rank 1's label reached the lowest probability label at the corner
    )
    fig.update_yaxes(
        type="log" if log else "linear", exponentformat="power", title_text="probability" + (" (log)" if log else "")
    )
    if not log:
        fig.update_yaxes(rangemode="tozero")
    elif (span := _topk_log_range(values)) is not None:
        fig.update_yaxes(range=span)


def _add_topk_bars(
    fig: go.Figure, ranks: list[str], name: str, values: np.ndarray, indices: np.ndarray, status: np.ndarray, color: str
) -> None:
    """One variant's bars, rank by rank: ties dotted, wrong indices crossed with a red edge, and the index
    written over every bar whose index differs from the reference's."""
    indices = np.asarray(indices, dtype=np.int64)
    fig.add_trace(
        go.Bar(
            x=ranks,
            y=np.asarray(values, dtype=np.float64),
            name=name,
            marker_color=color,
            text=[f"#{i}" if s != "same" else "" for i, s in zip(indices, status)],
            textposition="outside",
            marker_pattern_shape=[TOPK_STATUS_PATTERN.get(str(s), "") for s in status],
            marker_line=dict(
                color=["#d62728" if s == "wrong" else color for s in status],
                width=[3 if s == "wrong" else 0.5 for s in status],
            ),
            customdata=np.column_stack([indices, np.asarray(status, dtype=object)]),
            hovertemplate=f"{name}, rank %{{x}}<br>index %{{customdata[0]}} (%{{customdata[1]}})<br>"
            "p = %{y:.7g}<extra></extra>",
        )
    )


def topk_timing_frame(sources: dict[str, dict]) -> pd.DataFrame:
    """The top-k rows (both kernels and both torch baselines, with a k) of several results documents, with 'shape'."""
    df = results_frame(sources)
    if df.empty or "k" not in df.columns:
        return pd.DataFrame()
    df = df[df["name"].isin(list(TOPK_NAMES)) & df["k"].notna()].copy()
    if df.empty:
        return df
    df["k"] = df["k"].astype(int)
    df["shape"] = [f"{int(r)}×{int(c)} {d} top-{k}" for r, c, d, k in zip(df["rows"], df["cols"], df["dtype"], df["k"])]
    return df.reset_index(drop=True)


def topk_timing_table(df: pd.DataFrame, time: str = "event") -> pd.DataFrame:
    """Per row: median and spread (event and device time, where measured), bytes moved, GB/s and the speed-up against
    torch of the same file and shape, from event or device time (TIME_FIELDS)."""
    out = df.copy()
    us = TIME_FIELDS[time]["us"]
    # a file's median may be null (a run that did not time) and may name torch twice for a shape (the first counts)
    torch = pd.to_numeric(out[out["name"] == "torch"].set_index(["source", "shape"])[us], errors="coerce")
    torch = torch[~torch.index.duplicated()]
    key = list(zip(out["source"], out["shape"]))
    medians = pd.to_numeric(out[us], errors="coerce")
    out["speedup_vs_torch"] = [torch.get(kk, math.nan) / m if m else math.nan for kk, m in zip(key, medians)]
    out["MB_moved"] = out["bytes_moved"].astype(float) / 1e6
    columns = [
        "source",
        "name",
        "rows",
        "cols",
        "dtype",
        "k",
        "median_us",
        "p10_us",
        "p90_us",
        "device_us",
        "device_p10_us",
        "device_p90_us",
        "bytes_moved",
        "MB_moved",
        "gbps",
        "speedup_vs_torch",
        "max_rel",
    ]
    return out[[c for c in columns if c in out.columns]].reset_index(drop=True)


def _pct_floor_label(r, time: str) -> str:
    v = r.get(TIME_FIELDS[time]["floor"])
    return f"<br>{v:.0f}% of floor" if isinstance(v, (int, float)) and np.isfinite(v) else ""


LABEL_LINE_SHARE = 0.07  # of a 480 px chart's y axis, a line of bar label (12 px of about 300)


def topk_figure(table: pd.DataFrame, title: str, stamp: str, time: str = "event") -> go.Figure:
    """Median µs with p10–p90 bars, of event or device time (TIME_FIELDS; the table's speed-up from the same), one
    group per source; each bar labelled, over its p90 whisker, with the bytes it moves, its % of the read-once floor
    and its speed-up against torch.softmax + torch.topk. The bars are the first traces, one a source; the labels
    follow, in traces of their own (a bar's own outside text sits under its whisker, and shrinks to the bar's width)."""
    f = TIME_FIELDS[time]
    fig = go.Figure()
    timed = table[pd.to_numeric(table[f["us"]], errors="coerce").notna()]
    colors = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e")
    labels = []
    for i, (source, part) in enumerate(timed.groupby("source", sort=False)):
        order = [n for n in TOPK_NAMES if n in set(part["name"])]
        part = part.set_index("name").loc[order].reset_index()
        text = []
        for _, r in part.iterrows():
            speed = r["speedup_vs_torch"]
            text.append(
                f"{r['MB_moved']:,.1f} MB"
                + _pct_floor_label(r, time)
                + (f"<br>{speed:.2f}× torch" if math.isfinite(speed) else "")
            )
        x = [TOPK_NAMES[n] for n in part["name"]]
        fig.add_trace(
            go.Bar(
                x=x,
                y=part[f["us"]],
                name=plotly_text(source),
                offsetgroup=str(i),
                marker_color=colors[i % len(colors)],
                text=text,
                textposition="none",
                marker_pattern_shape=["/" if n.startswith("torch") else "" for n in part["name"]],
                error_y=spread(part, time),
                hovertemplate="%{x}<br>median %{y:.2f} µs<br>%{text}<extra>" + plotly_text(source) + "</extra>",
            )
        )
        top = pd.to_numeric(part[f["p90"]], errors="coerce") if f["p90"] in part else part[f["us"]]
        labels.append(
            go.Scatter(
                x=x,
                y=top.fillna(part[f["us"]]),
                mode="text",
                text=text,
                textposition="top center",
                offsetgroup=str(i),
                showlegend=False,
                hoverinfo="skip",
            )
        )
    fig.add_traces(labels)
    fig.update_layout(barmode="group", scattermode="group", showlegend=True)
    # autorange leaves text out: room over the tallest whisker for its label, LABEL_LINE_SHARE of the axis a line
    tops = [max(t.y) for t in labels if len(t.y)]
    lines = max((str(t).count("<br>") + 1 for label in labels for t in label.text), default=0)
    fig.update_yaxes(title_text=TIME_AXIS[time].format("µs"), rangemode="tozero")
    if tops and max(tops) > 0:
        fig.update_yaxes(range=[0, max(tops) / (1 - LABEL_LINE_SHARE * lines)])
    fig.update_xaxes(title_text="pipeline (hatched: the torch baselines)")
    fig = finish(fig, plotly_text(title), stamp, height=480)
    stamp_lines_below(fig)
    return fig

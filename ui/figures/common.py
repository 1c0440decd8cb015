"""What every figure shares: colours, the stamp, the layout, and the strip that marks non-finite values.

Every figure carries a title with units, a legend, and a stamp (GPU or CPU emulation, CUDA, CuPy,
date) so a screenshot or a PNG download says where its numbers came from.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Mapping

import numpy as np
import plotly.graph_objects as go

from explorer.errors import shown

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"]
REF_COLOR = "#222222"
ERR_FLOOR = 1e-10  # an exact value (error 0) is drawn here on log axes, and the axis title says so
SYMBOLS = [
    "circle-open",
    "square-open",
    "diamond-open",
    "cross-thin-open",
    "x-thin-open",
    "triangle-up-open",
    "star-open",
    "hexagon-open",
]
GL_POINTS = 5000  # above this many points per trace, use WebGL traces
FONT = dict(size=13)


# a results file's GPU name or version is cut past this many characters in a stamp (300 ran across the chart)
META_CHARS = 40


def device_line(meta: Mapping, date: str = "", source: str = "") -> str:
    """Where numbers came from: 'GPU NVIDIA H200 · driver 13.0 · CUDA 13.2 · CuPy 14.2.0 · 2026-12-01', from a
    results file's meta or explorer.info() (with "backend"); 'CPU emulation (no GPU) · NumPy 2.4 · date' off
    the GPU. source (a file name) is added where it is not the GPU's name."""
    date = str(meta.get("date") or date)[:10]
    if meta.get("backend", "cuda") != "cuda":
        parts = ["CPU emulation (no GPU)", f"NumPy {np.__version__}"]
    else:
        fields = (("GPU", "gpu"), ("driver", "cuda_driver"), ("CUDA", "cuda_runtime"), ("CuPy", "cupy"))
        parts = [f"{label} {shown(meta.get(key) or '?', META_CHARS, quoted=False)}" for label, key in fields]
    origin = [f"from {source}"] if source and source != meta.get("gpu") else []
    return " · ".join([*parts, *([date] if date else []), *origin])


def stamp_text(info: dict, date: str) -> str:
    """A chart's stamp: device_line of explorer.info() (no backend named: the emulation)."""
    return device_line({"backend": "emulator", **info}, date)


def chart_config(filename: str) -> dict:
    """plotly config: the modebar camera downloads a PNG named after the configuration."""
    return {"displaylogo": False, "toImageButtonOptions": {"format": "png", "filename": filename, "scale": 2}}


# The narrowest a chart is drawn: beside the open sidebar in a 1000 px window, across the main column (CHART_PX) or in
# the wider of two columns [3, 2] (COLUMN_PX). Figures are laid out to be readable there; a wider window only adds room.
CHART_PX = 540
COLUMN_PX = 316
TITLE_CHARS = 64  # a title line this long is about 450 px at 16 px: it fits a CHART_PX chart


STAMP_CHAR_PX = 5.6  # a stamp character's width at the stamp's 10 px


def stamp_chars(width: int = CHART_PX) -> int:
    """The longest stamp line a chart `width` px wide holds: the stamp runs left from the plot's right edge, 30 px
    in from the chart's, to 10 px short of the chart's left edge (a GPU stamp is two lines in a COLUMN_PX chart)."""
    return int((width - 40) / STAMP_CHAR_PX)


def title_chars(width: int = CHART_PX) -> int:
    """The longest title line a chart `width` px wide holds (TITLE_CHARS in a CHART_PX chart)."""
    return TITLE_CHARS * width // CHART_PX


def label_step(count: int, label_px: float, plot_px: float) -> int:
    """Label every how many-th of `count` evenly spaced ticks, so that labels label_px wide (gap included) fit in
    plot_px: 1 where they all fit."""
    return max(1, math.ceil(count * label_px / plot_px))


def wrap_title(title: str, chars: int = TITLE_CHARS) -> str:
    """title with its first line (up to its first <br>) broken into lines of at most `chars` visible characters:
    plotly does not wrap a title, and one wider than the chart is cut off at its right edge. A line breaks at its
    last " · " (which goes), ", " or ": " in its second half, else before a " (", else at its last space."""
    head, br, rest = title.partition("<br>")
    lines = []
    while len(_visible(head)) > chars:
        spaces = [i for i, c in enumerate(head) if c == " " and len(_visible(head[:i])) <= chars]
        if not spaces:
            break
        late = [i for i in spaces if i >= spaces[-1] // 2]
        dots = [i for i in late if head.startswith(" · ", i)]
        marks = [i for i in late if head[i - 1] in ",:"]
        brackets = [i for i in late if head.startswith(" (", i)]
        i = (dots or marks or brackets or spaces)[-1]
        lines.append(head[:i])
        head = head[i + (3 if dots else 1) :]
    return "<br>".join([*lines, head]) + br + rest


def _visible(text: str) -> str:
    return re.sub(r"<[^>]+>", "", text)


def finish(fig: go.Figure, title: str, stamp: str, height: int = 480, width: int = CHART_PX) -> go.Figure:
    """The title (in lines that a chart `width` px wide holds), template, legend, margins and the stamp."""
    fig.update_layout(
        title=dict(text=wrap_title(title, title_chars(width)), x=0.0, xanchor="left", font=dict(size=16)),
        template="plotly_white",
        height=height,
        font=FONT,
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="right", x=1.0),
        margin=dict(l=70, r=30, t=110, b=60),
    )
    fig.add_annotation(
        text=wrap_title(stamp, stamp_chars(width)),
        xref="paper",
        yref="paper",
        x=1.0,
        y=-0.02,
        xanchor="right",
        yanchor="top",
        yshift=-28,
        showarrow=False,
        font=dict(size=10, color="#777"),
        name="stamp",
    )
    return fig


def scatter_type(n: int):
    return go.Scattergl if n > GL_POINTS else go.Scatter


def finite_or_nan(values: np.ndarray) -> np.ndarray:
    """values with ±inf (and NaN) as NaN: plotly leaves a gap there instead of drawing to infinity."""
    return np.where(np.isfinite(values), values, np.nan)


def format_value(v: float, digits: int = 7) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "NaN"
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    return f"{v:.{digits}g}"


def nonfinite_marks(values: np.ndarray, log: bool = False) -> dict[str, np.ndarray]:
    """Indices of NaN, +inf, -inf (and zeros, which a log axis cannot show) in a 1-D array."""
    v = np.asarray(values, dtype=np.float64)
    marks = {
        "NaN": np.flatnonzero(np.isnan(v)),
        "+inf": np.flatnonzero(v == np.inf),
        "−inf": np.flatnonzero(v == -np.inf),
    }
    if log:
        marks["0"] = np.flatnonzero(v == 0)  # off the log axis
    return {k: idx for k, idx in marks.items() if idx.size}


MARK_SYMBOLS = {"NaN": "x", "+inf": "triangle-up", "−inf": "triangle-down", "0": "circle-open"}
INK_COLOR = "#222"  # the outline of a NaN or inf mark


def strip(fig: go.Figure, series: dict[str, np.ndarray], log: bool, row: int, colors: dict[str, str]) -> int:
    """A strip under the main plot marking every non-finite (and, on log axes, zero) value per series."""
    count = 0
    names = list(series)
    n = max((np.size(v) for v in series.values()), default=1)
    # an invisible frame so the strip's axes are drawn even when nothing is marked
    fig.add_trace(
        go.Scatter(
            x=[0, max(n - 1, 1)], y=[names[0], names[-1]], mode="markers", opacity=0, hoverinfo="skip", showlegend=False
        ),
        row=row,
        col=1,
    )
    for name, values in series.items():
        marks = nonfinite_marks(values, log)
        for kind in sorted(marks, key=lambda k: k != "0"):  # zeros under the NaN and inf marks they may crowd
            idx = marks[kind]
            count += idx.size
            shown = thin_marks(idx, n)
            zero = kind == "0"  # small and faint: with many of them, a NaN or inf among them still shows
            fig.add_trace(
                scatter_type(shown.size)(
                    x=shown,
                    y=[name] * shown.size,
                    mode="markers",
                    name=f"{name}: {kind} ({idx.size})",
                    opacity=0.45 if zero else 1.0,
                    marker=dict(
                        symbol=MARK_SYMBOLS[kind],
                        size=6 if zero else 10,
                        color=colors.get(name, REF_COLOR),
                        line=dict(width=1 if zero else 1.5, color=None if zero else INK_COLOR),
                    ),
                    hovertemplate=f"{name}<br>element %{{x}}: {kind}<extra></extra>",
                ),
                row=row,
                col=1,
            )
    fig.update_yaxes(
        type="category",
        categoryorder="array",
        categoryarray=list(series),
        row=row,
        col=1,
        title_text="",
        tickfont=dict(size=12),
        dtick=1,
        showgrid=True,
    )
    return count


MAX_POINTS = 10_000  # a per-element trace draws at most about this many points (envelope_index)


def envelope_index(values: np.ndarray, max_points: int = MAX_POINTS) -> np.ndarray:
    """Sorted indices of at most ~max_points elements that keep the shape of a long series: each bucket's
    smallest and largest finite value, and the largest element overall (all of them when short)."""
    v = np.asarray(values, dtype=np.float64)
    n = v.size
    if n <= max_points:
        return np.arange(n)
    size = -(-n // (max_points // 2))
    buckets = -(-n // size)
    padded = np.full(buckets * size, np.nan)
    padded[:n] = v
    grid = padded.reshape(buckets, size)
    finite = np.isfinite(grid)
    lo = np.argmin(np.where(finite, grid, np.inf), axis=1)
    hi = np.argmax(np.where(finite, grid, -np.inf), axis=1)
    base = np.arange(buckets) * size
    keep = np.concatenate([(base + lo)[finite.any(axis=1)], (base + hi)[finite.any(axis=1)]])
    if np.isfinite(v).any():
        keep = np.append(keep, int(np.argmax(np.where(np.isfinite(v), v, -np.inf))))
    return np.unique(keep[keep < n])


def thin_marks(idx: np.ndarray, n: int, max_points: int = MAX_POINTS) -> np.ndarray:
    """At most ~max_points of the sorted element indices idx (first, then one per bucket of the row)."""
    if idx.size <= max_points:
        return idx
    size = -(-n // max_points)
    return idx[np.unique(idx // size, return_index=True)[1]]


def sampled_note(n: int, shown: int) -> str:
    """The caption's words for a series of n elements drawn with `shown` points ("" when all are drawn)."""
    if shown >= n:
        return ""
    size = -(-n // (MAX_POINTS // 2))
    return (
        f"{n:,} elements drawn as at most {shown:,} points a series: the smallest and largest value of every "
        f"{size:,} elements, the largest element, and the NaN/inf marks (one per {-(-n // MAX_POINTS):,} "
        "elements at most)"
    )


def integer_ticks(fig: go.Figure, count: int, axis: str = "x", **where) -> None:
    """Whole-number ticks on an axis over `count` positions (plotly would put 0.5 steps on a short one)."""
    update = fig.update_xaxes if axis == "x" else fig.update_yaxes
    if count == 1:  # plotly draws no tick on a one-cell axis
        update(tickmode="array", tickvals=[0], **where)
    elif count <= 12:
        update(tickmode="linear", tick0=0, dtick=1, **where)
    else:
        update(tickformat="d", **where)


def nan_row_reason(x_row: np.ndarray) -> str | None:
    """Why the softmax of a row is NaN (None when it is not): its first NaN or +inf input, or only −inf inputs; a
    clause without a colon, so that it reads after one."""
    x = np.asarray(x_row, dtype=np.float64)
    bad = np.flatnonzero(np.isnan(x) | (x == np.inf))
    if bad.size:
        i = int(bad[0])
        why = (
            "e^(x − m) is NaN, so d and every output are NaN"
            if np.isnan(x[i])
            else "m becomes ∞ and e^(x − m) = e^(∞ − ∞) is undefined, so d is NaN"
        )
        return f"x[{i}] = {format_value(float(x[i]))} ({bad.size:,} NaN/+∞ input(s) in the row), so {why}"
    if x.size and np.all(x == -np.inf):
        return "every input is −∞, so m stays −∞ and d stays 0, and every output e^(x − m) / d = e^(−∞ + ∞) / 0 is NaN"
    return None


def stamp_below(fig: go.Figure) -> go.Figure:
    """The stamp under the x axis's title rather than beside it (a long centred title on a narrow chart met it)."""
    fig.update_layout(margin=dict(b=90))
    return fig.update_annotations(selector=dict(name="stamp"), y=0.0, yshift=-62)


def subplot_titles_left(fig: go.Figure) -> go.Figure:
    """make_subplots' titles (call it before adding other annotations) at their plot's left edge, in the figure's
    font: centred, a title wider than its plot reached over the tick labels beside it and over the legend."""
    for a in fig.layout.annotations:
        axis = next(
            ax
            for name, ax in fig.layout.to_plotly_json().items()
            if name.startswith("xaxis") and ax["domain"][0] <= a.x <= ax["domain"][1]
        )
        a.update(x=axis["domain"][0], xanchor="left", font=dict(size=FONT["size"]))
    return fig


def note_above(fig: go.Figure, text: str, xref: str = "paper", yref: str = "paper", color: str = "#555") -> None:
    """Small words on the top left edge of a plot (or of the subplot whose domains are named): a key, a warning."""
    fig.add_annotation(
        text=text,
        xref=xref,
        yref=yref,
        x=0.0,
        y=1.0,
        xanchor="left",
        yanchor="bottom",
        align="left",
        showarrow=False,
        font=dict(size=11, color=color),
    )


def note_inside(fig: go.Figure, text: str, axis: str, color: str) -> None:
    """Words in the middle of the subplot on axes x{axis}, y{axis} ("" the first): why it draws nothing."""
    fig.add_annotation(
        text=text,
        xref=f"x{axis} domain",
        yref=f"y{axis} domain",
        x=0.5,
        y=0.5,
        showarrow=False,
        font=dict(color=color),
    )


def legend_right(fig: go.Figure) -> go.Figure:
    """The legend beside the plots, top-aligned (never over the title or a subplot's title); the top margin holds
    the title's lines (two in 90 px, 20 px each beyond)."""
    lines = str(fig.layout.title.text or "").count("<br>") + 1
    fig.update_layout(
        legend=dict(orientation="v", yanchor="top", y=1.0, xanchor="left", x=1.01, font=dict(size=12)),
        margin=dict(r=40, t=max(90, 50 + 20 * lines)),
    )
    return fig


def log_ticks(fig: go.Figure, values: np.ndarray, labels: int = 4, **where) -> None:
    """A log axis labelled at whole decades only, at most about `labels` of them (a short panel's "2" and "5"
    minor labels, or ten decades, collide); values within about a decade are labelled at their ends."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v) & (v > 0)]
    if v.size == 0:
        return
    low, high = math.floor(math.log10(v.min())), math.ceil(math.log10(v.max()))
    if high - low <= 1:  # within a decade there may be no decade to label: the ends instead
        ends = sorted({float(f"{v.min():.2g}"), float(f"{v.max():.2g}")})
        fig.update_yaxes(type="log", tickmode="array", tickvals=ends, ticktext=[f"{e:g}" for e in ends], **where)
        return
    step = max(1, math.ceil((high - low) / max(labels - 1, 1)))
    fig.update_yaxes(type="log", exponentformat="power", dtick=step, tick0=0, **where)


def plotly_text(text) -> str:
    """Text from a results file for a plotly label, legend or hover: `<` and `&` escaped, so shown as text."""
    return html.escape(str(text), quote=False)


def stamp_under_tall_ticks(fig: go.Figure) -> go.Figure:
    """The stamp, of one line or several, under the x axis title of a chart whose ticks are two lines tall (they push
    the title down to where figures.finish puts the stamp), with the bottom margin grown to hold it."""
    lines = max((a.text.count("<br>") + 1 for a in fig.layout.annotations if a.name == "stamp"), default=1)
    fig.update_annotations(selector=dict(name="stamp"), yshift=-88, align="right")
    return fig.update_layout(margin_b=115 + 14 * (lines - 1), height=fig.layout.height + 14 * (lines - 1))


STAMP_BESIDE_TITLE_CHARS = 60  # a one-line stamp longer than this meets a long centred x axis title beside it


def stamp_lines_below(*figs: go.Figure) -> None:
    """A stamp of several lines, or of one long line, goes under the x axis title (figures.finish puts it beside
    the title, where it would run over it), with the bottom margin grown to hold it."""
    for fig in figs:
        stamps = [a.text for a in fig.layout.annotations if a.name == "stamp"]
        lines = max((text.count("<br>") + 1 for text in stamps), default=1)
        if lines > 1 or any(len(text) > STAMP_BESIDE_TITLE_CHARS for text in stamps):
            fig.update_annotations(selector=dict(name="stamp"), yshift=-50, align="right")
            fig.update_layout(margin_b=64 + 14 * lines, height=fig.layout.height + 14 * lines)

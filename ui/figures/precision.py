"""The Precision lab's figures: measured error against n beside the 3·n·u bound, stagnation, overflow.

Records (explorer.precision.Measurement) and trajectories in, plotly Figures out.
"""

from __future__ import annotations

import math
import re

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

import explorer
from explorer import precision
from explorer.numerics import SHORT_NAMES, sequential_terms_text
from explorer.precision import Measurement, Trajectory

from .common import CHART_PX, ERR_FLOOR, finish, label_step, log_ticks, subplot_titles_left

ACC_COLORS = {"float16": "#d62728", "bfloat16": "#9467bd", "float32": "#1f77b4"}
DIST_COLORS = {"decreasing": "#d62728", "increasing": "#2ca02c", "normal": "#1f77b4", "constant": "#ff7f0e"}
VARIANT_COLORS = dict(zip(precision.ONLINE_VARIANTS, ("#d62728", "#ff7f0e", "#1f77b4"), strict=True))
OVERFLOW_Y = 100.0  # where an infinite error (d overflowed) is drawn on the error axes
QUANTITIES = {"d": "final denominator d_n", "out": "outputs (max over the row)"}
FP16_MAX = explorer.FORMATS["float16"].max_value
FP16_CEILING = int(precision.STAGNATION["float16"])  # 2048


def _y(r: Measurement, quantity: str) -> float:
    v = r.d_rel_error if quantity == "d" else r.out_max_rel
    return v if math.isfinite(v) else math.nan


def _bound(r: Measurement, quantity: str, with_input: bool) -> float:
    """The 3·n·u bound for a record: 3·n·u_acc (+ u_out for outputs), optionally with the input-rounding term."""
    u_out = explorer.FORMATS[r.dtype].unit_roundoff
    base = explorer.error_bound(r.sequential_terms, r.acc, r.dtype, r.input_rounding if with_input else 0.0)
    return base if quantity == "out" else base - u_out


POW2_LABEL_PX = 40  # a "2^16" tick label with its gap


def _pow2_axis(
    fig: go.Figure, title: str | None, ns, plot_px: float, row: int | None = None, col: int | None = None
) -> None:
    """A log x axis over the values ns ticked at powers of two, written 2^k: every 2nd, 4th, ... power, as many as
    fit side by side in plot_px."""
    low, high = (math.floor(math.log2(max(min(ns, default=1), 1))), math.ceil(math.log2(max(ns, default=2))))
    step = 2 * label_step(len(range(low, high + 1, 2)), POW2_LABEL_PX, plot_px)
    ks = list(range(low + low % 2, high + 1, step))
    fig.update_xaxes(
        type="log",
        tickvals=[2**k for k in ks],
        ticktext=[f"2<sup>{k}</sup>" for k in ks],
        title_text=title,
        row=row,
        col=col,
    )


def _level(
    fig: go.Figure, y: float, text: str, color: str, dash: str = "dot", position: str = "left", above: bool = True
) -> None:
    """A horizontal line on a log y axis with its label (add_hline's own label lands at 10^y on log axes)."""
    fig.add_hline(y=y, line=dict(color=color, width=1.2, dash=dash))
    fig.add_annotation(
        text=text,
        xref="paper",
        align="left" if position == "left" else "right",
        x=0.0 if position == "left" else 1.0,
        y=math.log10(y),
        yref="y",
        xanchor="left" if position == "left" else "right",
        yanchor="bottom" if above else "top",
        showarrow=False,
        font=dict(size=11, color=color),
    )


def _layout(fig: go.Figure, width_px: int = 450, subplot_titles: bool = False) -> go.Figure:
    """The title at the top, the legend left-aligned under it (never across the title, whatever the chart's
    width), subplot titles under the legend; the top margin sized for the rows the legend wraps into at
    about width_px of plot; the stamp under the x axis."""
    names = [t.name for t in fig.data if t.name and t.showlegend is not False]
    widths = [48 + 8 * len(re.sub(r"<[^>]+>", "", name)) for name in names]
    rows = 1 if sum(widths) <= width_px else len(names)  # plotly then stacks every entry, not just the overflow
    lines = str(fig.layout.title.text or "").count("<br>") + 1
    title_px = 14 + 24 * lines
    legend_px = 21 * rows + 6
    extra = 24 if subplot_titles else 0
    top = title_px + legend_px + extra + 12
    fig.update_layout(
        title=dict(yref="container", y=1.0, yanchor="top", pad=dict(t=14)),
        legend=dict(
            orientation="h",
            traceorder="normal",
            xanchor="left",
            x=0.0,
            yanchor="top",
            yref="container",
            y=1.0 - title_px / fig.layout.height,
        ),  # grows away from the title
        margin=dict(t=top, b=105),
    )
    fig.update_annotations(selector=dict(name="stamp"), yshift=-50)
    return fig


N_TITLE = "n (elements in the row)"


def _error_axis(
    fig: go.Figure, quantity: str, ns, plot_px: float, row: int = 1, col: int = 1, title: bool = True
) -> None:
    """Error against n on log axes; title: the axes' own titles (a row of panels shares one n title instead)."""
    _pow2_axis(fig, N_TITLE if title else None, ns, plot_px, row=row, col=col)
    fig.update_yaxes(
        type="log",
        exponentformat="power",
        range=[math.log10(ERR_FLOOR) - 0.3, math.log10(OVERFLOW_Y) + 0.4],
        row=row,
        col=col,
        title_text=_error_title(quantity) if title else None,
    )
    fig.add_hline(y=1.0, line=dict(color="#ccc", width=1), row=row, col=col)  # error 1: solid, unlike the bounds


def _error_title(quantity: str) -> str:
    return (
        f"relative error of {'d_n' if quantity == 'd' else 'the outputs'}<br>"
        f"<sup>exact: drawn at {ERR_FLOOR:g}; overflow (inf): at {OVERFLOW_Y:g}</sup>"
    )


def _measured(
    fig,
    recs: list[Measurement],
    quantity: str,
    name: str,
    color: str,
    symbol: str = "circle",
    row: int = 1,
    col: int = 1,
    legendgroup: str | None = None,
    showlegend: bool = True,
) -> None:
    recs = sorted(recs, key=lambda r: r.n)
    if not recs:
        return
    n = [r.n for r in recs]
    err = np.array([_y(r, quantity) for r in recs])
    over = np.array([r.overflow for r in recs])
    y = np.where(over, OVERFLOW_Y, np.maximum(np.nan_to_num(err, nan=ERR_FLOOR), ERR_FLOOR))
    text = ["d overflowed to inf" if o else f"{e:.3g}" for o, e in zip(over, err)]
    fig.add_trace(
        go.Scatter(
            x=n,
            y=y,
            mode="lines+markers",
            name=name,
            legendgroup=legendgroup or name,
            showlegend=showlegend,
            line=dict(color=color, width=2),
            marker=dict(color=color, size=7, symbol=np.where(over, "x", symbol).tolist()),
            customdata=np.array([[r.d, r.exact_d, _bound(r, quantity, True)] for r in recs]),
            text=text,
            hovertemplate=f"{name}<br>n = %{{x}}<br>relative error %{{text}}<br>d = %{{customdata[0]:.7g}} "
            "(exact %{customdata[1]:.9g})<br>bound %{customdata[2]:.3g}<extra></extra>",
        ),
        row=row,
        col=col,
    )


def _bound_line(
    fig,
    recs: list[Measurement],
    quantity: str,
    name: str,
    color: str,
    dash: str = "dash",
    with_input: bool = False,
    row: int = 1,
    col: int = 1,
    showlegend: bool = True,
    legendgroup: str | None = None,
) -> None:
    """The bound where it is below 1 (a relative error bound of 1 or more says nothing)."""
    pts = sorted({r.n: _bound(r, quantity, with_input) for r in recs}.items())
    pts = [(n, b) for n, b in pts if b < 1]
    if not pts:
        return
    fig.add_trace(
        go.Scatter(
            x=[p[0] for p in pts],
            y=[p[1] for p in pts],
            mode="lines",
            name=name,
            line=dict(color=color, width=1.5, dash=dash),
            showlegend=showlegend,
            legendgroup=legendgroup or name,
            hovertemplate=f"{name}<br>n = %{{x}}<br>bound %{{y:.3g}}<extra></extra>",
        ),
        row=row,
        col=col,
    )


def bound_label(quantity: str, dtype: str, terms: str) -> str:
    """The bound's legend entry: 3·(terms)·u_acc (+ u_out for outputs), terms numerics.sequential_terms_text's."""
    out = f" + u<sub>{_short(dtype)}</sub>" if quantity == "out" else ""
    factor = terms if terms == "n" else f"({terms})"
    return f"bound 3·{factor}·u<sub>acc</sub>{out}"


def _short(acc: str) -> str:
    return SHORT_NAMES[acc]


def _terms_text(records: list[Measurement], variant: str, dtype: str) -> str:
    """The variant's sequential terms as a formula in n, at the block size it was measured with."""
    block = next((r.block_size for r in records if r.variant == variant), None)
    return sequential_terms_text(explorer.VARIANTS[variant].launch(1, 1, block, dtype))


def error_vs_n_figure(records: list[Measurement], variant: str, quantity: str, title: str, stamp_: str) -> go.Figure:
    """Measured error vs n, log-log, one panel per accumulator, a line per input class; the 3·n·u bound dashed."""
    accs = [a for a in precision.ACCUMULATORS if any(r.acc == a and r.variant == variant for r in records)]
    accs = accs or list(precision.ACCUMULATORS)
    # one panel above the other, n shared: side by side, a panel beside the sidebar in a 1000 px window was ~130 px
    # wide, and the panels' titles, and their n axes' titles, ran into each other
    fig = make_subplots(
        rows=len(accs),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.09,
        subplot_titles=[f"accumulator {a} (u = 2<sup>-{explorer.FORMATS[a].significand_bits}</sup>)" for a in accs],
    )
    subplot_titles_left(fig)
    ns = [r.n for r in records]
    dtype = next((r.dtype for r in records), "float32")
    for c, acc in enumerate(accs, start=1):
        recs = [r for r in records if r.acc == acc and r.variant == variant]
        for dist in precision.INPUT_CLASSES:
            _measured(
                fig,
                [r for r in recs if r.dist == dist],
                quantity,
                precision.INPUT_TITLES[dist],
                DIST_COLORS[dist],
                row=c,
                showlegend=c == 1,
                legendgroup=dist,
            )
        _bound_line(
            fig,
            recs,
            quantity,
            bound_label(quantity, dtype, _terms_text(recs or records, variant, dtype)),
            "#222",
            row=c,
            showlegend=c == 1,
            legendgroup="bound",
        )
        if any(explorer.rounds_input(r.dtype, r.acc) for r in recs):
            worst = max(recs, key=lambda r: r.max_abs_x)
            _bound_line(
                fig,
                [r for r in recs if r.dist == worst.dist],
                quantity,
                "bound + 2·max|x|·u<sub>acc</sub> (x rounded into acc; largest |x| of the classes)",
                "#777",
                dash="dot",
                with_input=True,
                row=c,
                showlegend=c == 1 or not any(explorer.rounds_input(dtype, a) for a in accs[: c - 1]),
                legendgroup="bound_in",
            )
        _error_axis(fig, quantity, ns, _plot_px(CHART_PX), row=c, title=False)
        log_ticks(fig, [ERR_FLOOR, OVERFLOW_Y], labels=4, row=c)
    fig.update_xaxes(title_text=N_TITLE, row=len(accs))
    fig.update_yaxes(title_text=_error_title(quantity), row=(len(accs) + 1) // 2)  # one title, by the middle panel
    return _layout(finish(fig, title, stamp_, height=250 + 190 * len(accs)), width_px=600, subplot_titles=True)


def _plot_px(width: int) -> float:
    """About how wide the plot of a one-panel chart `width` px wide is (the y axis's title and labels, the margin)."""
    return width - 100


def stagnation_figure(
    trajectories: list[Trajectory], title: str, stamp_: str, max_points: int = 1500, width: int = CHART_PX
) -> go.Figure:
    """Traced d_j of one lane against the float64 d_j (log-log), per accumulator; the stagnation levels dotted.
    width: the narrowest the chart is drawn (its title's lines, its x labels)."""
    fig = go.Figure()
    for t in trajectories:
        _add_trajectory(fig, t, max_points)
    if trajectories:
        t = trajectories[0]
        exact = dict(color="#222", width=1.5, dash="dash")
        fig.add_trace(_d_line(t, t.exact_d, max_points, "exact d_j (float64)", exact))
    for acc, level in precision.STAGNATION.items():
        if acc != "float32" and any(t.acc == acc for t in trajectories):
            _level(
                fig,
                level,
                f"{level:g} = 2<sup>{int(math.log2(level))}</sup>: {acc} spacing 2 above it",
                ACC_COLORS[acc],
                above=False,
            )  # under the line at the left, clear of the curves (they pass it at the right) and of the frozen label
    top = max((float(np.nanmax(t.exact_d)) for t in trajectories), default=10.0)
    _pow2_axis(fig, "j (elements the lane has folded)", [1, top], _plot_px(width))
    fig.update_yaxes(title_text="running denominator d_j", range=[-0.2, math.log10(top) + 0.3])
    # the "1" tick clear of the x axis's "2^0", and no 0.5 tick under it; decades only (the 2 and 5 labels between
    # them crowd the frozen labels)
    log_ticks(fig, [1, top], labels=6)
    return _layout(finish(fig, title, stamp_, height=500, width=width), width_px=width - 60)


def _d_line(t: Trajectory, d: np.ndarray, max_points: int, name: str, line: dict, **hover) -> go.Scatter:
    """d against the lane's steps as a line, at most max_points of them, spaced evenly on the log axis."""
    pick = np.unique(np.geomspace(1, t.steps.size, min(max_points, t.steps.size)).astype(int) - 1)
    return go.Scatter(x=t.steps[pick], y=d[pick], mode="lines", name=name, line=line, **hover)


def _add_trajectory(fig: go.Figure, t: Trajectory, max_points: int) -> None:
    """One accumulator's traced d_j, and a diamond where it froze (stagnated) if it did."""
    kernel = dict(color=ACC_COLORS[t.acc], width=2.5)
    hover = f"acc {t.acc}<br>j = %{{x}}<br>d_j = %{{y:.7g}}<extra></extra>"
    fig.add_trace(_d_line(t, t.d, max_points, f"kernel d_j, acc {t.acc}", kernel, hovertemplate=hover))
    if t.stagnated_at is not None:
        j = t.stagnated_at
        fig.add_trace(
            go.Scatter(
                x=[j],
                y=[t.d[j - 1]],
                mode="markers+text",
                showlegend=False,
                marker=dict(color=ACC_COLORS[t.acc], size=11, symbol="diamond"),
                text=[f"frozen at {t.d[j - 1]:g}"],  # short: where it froze is the diamond's x (and the caption)
                textposition="top left",
                textfont=dict(size=11, color=ACC_COLORS[t.acc]),
                hoverinfo="skip",
            )
        )


def overflow_figure(records: list[Measurement], title: str, stamp_: str, width: int = CHART_PX) -> go.Figure:
    """Final fp16 d vs n per variant on constant input (d_n = n exactly), with fp16's largest value. width: the
    narrowest the chart is drawn."""
    fig = go.Figure()
    ns = sorted({r.n for r in records})
    top = max([FP16_MAX, *ns]) * 4  # where inf is drawn: above fp16's largest value and the exact line's end
    for variant, line_width, size in zip(
        precision.ONLINE_VARIANTS, (2, 7, 2.5), (9, 15, 8)
    ):  # coinciding lines stay visible
        recs = sorted((r for r in records if r.variant == variant), key=lambda r: r.n)
        if not recs:
            continue
        over = [r.overflow for r in recs]
        fig.add_trace(
            go.Scatter(
                x=[r.n for r in recs],
                y=[top if o else r.d for r, o in zip(recs, over)],
                mode="lines+markers",
                name=variant,
                line=dict(color=VARIANT_COLORS[variant], width=line_width),
                opacity=0.6 if line_width > 3 else 1.0,
                marker=dict(size=size, color=VARIANT_COLORS[variant], symbol=["x" if o else "circle" for o in over]),
                text=["inf (overflow)" if o else f"{r.d:g}" for r, o in zip(recs, over)],
                hovertemplate=f"{variant}<br>n = %{{x}}<br>d = %{{text}}<extra></extra>",
            )
        )
    if ns:
        fig.add_trace(go.Scatter(x=ns, y=ns, mode="lines", name="exact d_n = n", line=dict(color="#222", dash="dash")))
    _level(fig, FP16_MAX, f"{FP16_MAX:g}: largest finite fp16", "#d62728")
    _level(fig, top, "× = inf: d overflowed", "#777", dash="solid")
    # the ceiling's label at the left, where the curves are still far below it
    _level(fig, FP16_CEILING, f"{FP16_CEILING}: one lane's ceiling (stagnation)", "#555")
    _pow2_axis(fig, N_TITLE, ns, _plot_px(width))
    fig.update_yaxes(
        type="log", exponentformat="power", title_text="final d_n in fp16", range=[0.5, math.log10(top) + 0.4]
    )
    return _layout(finish(fig, title, stamp_, height=500, width=width), width_px=width - 60)


def compare_figure(
    records: list[Measurement], key: str, quantity: str, title: str, stamp_: str, width: int = CHART_PX
) -> go.Figure:
    """Error vs n with one line per value of `key` ("acc" or "variant"), each with its own bound dashed. width: the
    narrowest the chart is drawn."""
    colors = ACC_COLORS if key == "acc" else VARIANT_COLORS
    fig = make_subplots(rows=1, cols=1)
    for value, color in colors.items():
        recs = [r for r in records if getattr(r, key) == value]
        if not recs:
            continue
        _measured(fig, recs, quantity, value, color, legendgroup=value)
        _bound_line(fig, recs, quantity, f"{value}: bound", color, with_input=True, legendgroup=value)
    _error_axis(fig, quantity, [r.n for r in records], _plot_px(width))
    return _layout(finish(fig, title, stamp_, height=500, width=width), width_px=width - 60)

"""The Step-through page's lane chart: one lane's running (m, d) step by step (the numbers of one update, where m
grows, where d stops being finite and why). Every lane at once is lanes.py's heatmap."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.precision import UpdateParts, update_parts
from explorer.trace import Trace

from .common import (
    ERR_FLOOR,
    MAX_POINTS,
    envelope_index,
    finish,
    finite_or_nan,
    format_value,
    integer_ticks,
    legend_right,
    log_ticks,
    nan_row_reason,
    stamp_below,
    subplot_titles_left,
    thin_marks,
)

EXACT_COLOR = "#ff7f0e"
KERNEL_COLOR = "#1f77b4"
RESCALE_COLOR = "#2ca02c"
NAN_FILL = "rgba(214, 39, 40, 0.10)"
# A lane's chart draws at most about MAX_POINTS steps whatever the row's length: a longer lane, for each of x, m and d
# the smallest and largest of every bucket of steps (STEP_ENVELOPE points), and as many steps where m grows at most.
STEP_ENVELOPE = MAX_POINTS // 4
# The error row marks each step up to ERR_MARKERS steps drawn and is a line beyond: markers a few px apart showed
# nothing more and took a third of each redraw.
ERR_MARKERS = 200
# Margins fixed, not grown by plotly to fit the legend and the axis titles: growing them draws the chart twice, and
# the page draws it anew at every step. Wide enough for the legend ("kernel (acc bfloat16)") and the log axes' labels.
MARGIN = dict(l=100, r=180, autoexpand=False)
TITLE_LINE_PX = 20  # the title's lines, from the chart's top edge; the first subplot's title under them
HEIGHT = {"online": 580, "safe": 520}  # four rows and three: with the controls over it, whole in a 1080 px window


@dataclass(frozen=True)
class StepNumbers:
    """One update of a lane's running (m, d): the kernel's numbers and float64's, as floats."""

    step: int
    element: int  # index in the row of the element folded, -1 for none
    x: float  # the input x_j
    prev_m: float
    prev_d: float
    m: float
    d: float
    row_max: float  # safe softmax's final max (NaN for online)
    exact_m: float
    exact_d: float
    rel_err: float  # of d_j against exact_d: 0 where both are 0 (exact), NaN where either is not finite
    kind: str  # "online" or "safe"
    parts: UpdateParts  # the update as the kernel rounds it (the page's bits table)

    @property
    def x_held(self) -> float:
        """x_j rounded to the accumulator, as the kernel folds it."""
        return self.parts.x_held

    @property
    def scale(self) -> float:
        """e^(m_{j-1} - m_j); 1 where m did not grow (the kernel skips the rescale); 1 for safe softmax."""
        return self.parts.scale

    @property
    def product(self) -> float:
        """d_{j-1} · scale (d_{j-1} itself at a step that folds no element)."""
        return self.parts.product if self.element >= 0 else self.prev_d

    @property
    def term(self) -> float:
        """e^(x_j - m) (0 at a step that folds no element)."""
        return self.parts.term if self.element >= 0 else 0.0


def step_numbers(trace: Trace, lane: int, step: int) -> StepNumbers:
    """The numbers of one update of a lane's running (m, d): the traced states, and the parts between them as the
    kernel rounds them (explorer.precision.update_parts: x_j held in the accumulator, the factor, product and term)."""
    idx = int(trace.index[lane, step])
    prev_m = float(trace.m[lane, step - 1]) if step > 0 else -math.inf
    prev_d = float(trace.d[lane, step - 1]) if step > 0 else 0.0
    m, d = float(trace.m[lane, step]), float(trace.d[lane, step])
    x = float(trace.x[idx]) if idx >= 0 else math.nan
    row_max = float(np.max(trace.m[lane][trace.index[lane] >= 0])) if trace.kind == "safe" else math.nan
    with np.errstate(all="ignore"):  # the states' NaN and ±inf flow through as the kernel's would
        if trace.kind == "safe":  # pass 2: every term against the row's max, no rescale
            parts = update_parts(row_max, prev_d, row_max, x, trace.acc)
        else:
            parts = update_parts(prev_m, prev_d, m, x, trace.acc)
    exact_d = float(trace.exact_d[lane, step])
    rel = float(trace.folded_d_rel_error[lane, step]) if math.isfinite(d) and math.isfinite(exact_d) else math.nan
    return StepNumbers(
        step=step,
        element=idx,
        x=x,
        prev_m=prev_m,
        prev_d=prev_d,
        m=m,
        d=d,
        row_max=row_max,
        exact_m=float(trace.exact_m[lane, step]),
        exact_d=exact_d,
        rel_err=rel,
        kind=trace.kind,
        parts=parts,
    )


def lane_steps(trace: Trace, lane: int) -> np.ndarray:
    """The steps at which the lane folded an element."""
    return np.flatnonzero(trace.index[lane] >= 0)


def rescale_steps(trace: Trace, lane: int) -> np.ndarray:
    """Steps j ≥ 1 at which the lane's running max grew (d_{j-1} was rescaled); none for safe softmax."""
    if trace.kind != "online":
        return np.zeros(0, np.int64)
    steps = lane_steps(trace, lane)
    m = trace.m[lane, steps]
    return steps[1:][m[1:] > m[:-1]]


def first_nonfinite(trace: Trace, lane: int) -> int | None:
    """The first step at which the lane's d_j is NaN or ±inf (None if it never is)."""
    steps = lane_steps(trace, lane)
    bad = steps[~np.isfinite(trace.d[lane, steps])]
    return int(bad[0]) if bad.size else None


def nonfinite_cause(trace: Trace, lane: int, step: int) -> str:
    """Why the lane's d_j is not finite at `step`, in Markdown with LaTeX between $ signs (the page's caption)."""
    n = step_numbers(trace, lane, step)
    where = f"step {step} (element {n.element})"
    if math.isnan(n.x):
        return f"at {where} $x_j$ is NaN: the term $e^{{x_j - m_j}}$ is NaN, and NaN stays in every later $d$"
    if n.x == math.inf:
        return (
            rf"at {where} $x_j = +\infty$: $m_j = \infty$ and the term $e^{{x_j - m_j}} = e^{{\infty - \infty}}$ is "
            "undefined (NaN); every later $d$ is NaN"
        )
    if math.isinf(n.d):
        return (
            f"at {where} $d_j$ overflowed the {trace.acc} accumulator "
            r"($d_{j-1} \cdot \text{factor} + \text{term}$ is over its largest value)"
        )
    return (
        f"at {where} the update gave {format_value(n.d)} ($m_{{j-1}}$ = {format_value(n.prev_m)}, "
        f"$x_j$ = {format_value(n.x)})"
    )


def masked_lane_note(trace: Trace, lane: int) -> str:
    """Words for a lane whose every element is −∞ (its x and m charts have no point to draw); "" for any other."""
    steps = lane_steps(trace, lane)
    if steps.size == 0 or not (trace.x[trace.index[lane, steps]] == -math.inf).all():
        return ""
    return (
        f"Every element of lane {lane} is −∞ (masked): m stays −∞ and d stays 0 at every step, so x and m have no "
        "point to draw; float64's d is 0 too, so d is exact (relative error 0, drawn at "
        f"{ERR_FLOOR:g})."
    )


def _sampled(trace: Trace, lane: int, current: int) -> np.ndarray:
    """The lane's steps to draw (at most about MAX_POINTS): an envelope of x, m and d, the rescales, the first
    non-finite d and `current`. A lane of at most MAX_POINTS steps is drawn whole."""
    steps = lane_steps(trace, lane)
    if steps.size <= MAX_POINTS:
        return steps
    keep = [
        steps[envelope_index(series, STEP_ENVELOPE)]
        for series in (trace.x[trace.index[lane, steps]], trace.m[lane, steps], trace.d[lane, steps])
    ]
    bad = first_nonfinite(trace, lane)
    extra = [s for s in (current, bad) if s is not None and trace.index[lane, s] >= 0]
    return np.unique(np.concatenate([*keep, _rescale_marks(trace, lane), np.asarray(extra, np.int64)]))


def _rescale_marks(trace: Trace, lane: int) -> np.ndarray:
    """The steps where m grows that the chart marks: all of them in a lane drawn whole, else at most about
    STEP_ENVELOPE, one per bucket of steps."""
    grow, steps = rescale_steps(trace, lane), lane_steps(trace, lane).size
    return grow if steps <= MAX_POINTS else thin_marks(grow, steps, STEP_ENVELOPE)


def sampled_steps_note(steps: int) -> str:
    """The caption's words for a lane of `steps` steps drawn reduced ("" when every step is drawn)."""
    if steps <= MAX_POINTS:
        return ""
    size = -(-steps // (STEP_ENVELOPE // 2))
    return (
        f"{steps:,} steps drawn as at most {MAX_POINTS:,}: for each of x, m and d the smallest and largest of every "
        f"{size:,} steps, and the steps where m grows (one per {-(-steps // STEP_ENVELOPE):,} steps at most)"
    )


def step_figure(trace: Trace, lane: int, current: int, title: str, stamp: str) -> go.Figure:
    """A lane's x_j, running m_j and d_j (kernel and float64), the rescale factor at every step where m grew, and
    the relative error of d_j; the current step is a vertical line, where d stops being finite is shaded.

    Long lanes are drawn as an envelope (at most about MAX_POINTS steps, extremes kept: _sampled)."""
    steps = _sampled(trace, lane, current)
    if steps.size == 0:
        raise ValueError(f"lane {lane} folded no element")
    online = trace.kind == "online"
    titles = [
        "x<sub>j</sub> and the running max m<sub>j</sub>",
        "running denominator d<sub>j</sub>",
    ]
    titles += ["rescale factor e<sup>m<sub>j−1</sub>−m<sub>j</sub></sup> where m grows"] if online else []
    titles += ["relative error of d<sub>j</sub> vs float64"]
    rows = len(titles)
    fig = make_subplots(
        rows=rows,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.07,
        subplot_titles=titles,
        row_heights=[0.32, 0.26, 0.2, 0.22] if online else [0.38, 0.34, 0.28],
    )
    subplot_titles_left(fig)  # clear of the tick labels at each plot's top and of the legend beside it
    _add_states(fig, trace, lane, steps)
    if online:
        _add_rescales(fig, trace, lane)
    with np.errstate(all="ignore"):
        d, ed = trace.d[lane, steps], trace.exact_d[lane, steps]
        rel = np.maximum(trace.folded_d_rel_error[lane, steps], ERR_FLOOR)
        err = np.where(np.isfinite(d) & np.isfinite(ed), rel, np.nan)
    fig.add_trace(
        go.Scatter(
            x=steps,
            y=err,
            mode="lines+markers" if steps.size <= ERR_MARKERS else "lines",
            showlegend=False,
            marker=dict(size=3),
            line=dict(color="#d62728", width=1),
        ),
        row=rows,
        col=1,
    )
    _add_current_step(fig, trace, lane, current, rows)
    last = int(lane_steps(trace, lane)[-1])
    _shade_nonfinite(fig, trace, lane, last, rows)
    if masked_lane_note(trace, lane):
        fig.add_annotation(
            text="every x<sub>j</sub> is −∞: m<sub>j</sub> = −∞ and d<sub>j</sub> = 0, no x or m to draw",
            x=0.5,
            y=0.5,
            xref="x domain",
            yref="y domain",
            showarrow=False,
            font=dict(color="#555", size=12),
        )
    fig.update_yaxes(title_text="value", row=1, col=1)
    fig.update_yaxes(title_text="d<sub>j</sub>", row=2, col=1)
    log_ticks(fig, np.append(err, ERR_FLOOR), row=rows, col=1)
    fig.update_yaxes(title_text=f"rel. error<br><sup>exact: at {ERR_FLOOR:g}</sup>", row=rows, col=1)
    fig.update_xaxes(title_text="step j (this lane's j-th element)", row=rows, col=1)
    integer_ticks(fig, last + 1)
    fig = stamp_below(legend_right(finish(fig, title, stamp, height=HEIGHT[trace.kind])))
    lines = str(fig.layout.title.text).count("<br>") + 1
    return fig.update_layout(  # the title at the top edge, not centred in a margin: the plots start higher
        title=dict(yref="container", y=1.0, yanchor="top", pad=dict(t=8)),
        margin=dict(MARGIN, t=36 + TITLE_LINE_PX * lines),
    )


def _line(color: str, **kw) -> dict:
    return dict(mode="lines", line=dict(color=color, width=2, **kw))


def _add_states(fig: go.Figure, trace: Trace, lane: int, steps: np.ndarray) -> None:
    """Row 1: the inputs x_j and the running max m_j; row 2: d_j; kernel solid, float64 dashed."""
    fig.add_trace(
        go.Scatter(
            x=steps,
            y=finite_or_nan(trace.x[trace.index[lane, steps]]),
            mode="markers",
            name="x<sub>j</sub> (input)",
            marker=dict(color="#999", size=5),
        ),
        row=1,
        col=1,
    )
    _add_kernel_and_exact(fig, steps, trace.m[lane, steps], trace.exact_m[lane, steps], 1, trace.acc)
    _add_kernel_and_exact(fig, steps, trace.d[lane, steps], trace.exact_d[lane, steps], 2)


def _add_kernel_and_exact(
    fig: go.Figure, steps: np.ndarray, kernel: np.ndarray, exact: np.ndarray, row: int, acc: str | None = None
) -> None:
    """The kernel's values (solid) and float64's (dashed) on one row, in legend groups "k" and "e". Given acc, the
    pair is the running max m (row 1): drawn as steps and named in the legend; else d (row 2), unnamed."""
    lines = (
        (kernel, "k", f"kernel (acc {acc})", _line(KERNEL_COLOR)),
        (exact, "e", "exact (float64)", _line(EXACT_COLOR, dash="dash")),
    )
    for y, group, name, style in lines:
        named = dict(line_shape="hv", name=name) if acc else dict(showlegend=False)
        fig.add_trace(go.Scatter(x=steps, y=finite_or_nan(y), legendgroup=group, **named, **style), row=row, col=1)


def _add_rescales(fig: go.Figure, trace: Trace, lane: int) -> None:
    """The steps where m grew: marked on row 1, their factor e^{m_{j-1} - m_j} on row 3."""
    grow = _rescale_marks(trace, lane)
    with np.errstate(all="ignore"):
        factor = np.exp(trace.m[lane, grow - 1] - trace.m[lane, grow])
    fig.add_trace(
        go.Scatter(
            x=grow,
            y=finite_or_nan(trace.m[lane, grow]),
            mode="markers",
            name="m grows (rescale)",
            marker=dict(symbol="triangle-up", size=9, color=RESCALE_COLOR),
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Scatter(
            x=grow,
            y=np.where(factor > 0, factor, np.nan),
            mode="markers",
            showlegend=False,
            marker=dict(symbol="triangle-up", size=8, color=RESCALE_COLOR),
            hovertemplate="step %{x}<br>factor %{y:.4g}<extra></extra>",
        ),
        row=3,
        col=1,
    )
    log_ticks(fig, factor, labels=3, row=3, col=1)  # a short row: four labels touched in its 70 px
    fig.update_yaxes(title_text="factor", row=3, col=1)


def _add_current_step(fig: go.Figure, trace: Trace, lane: int, current: int, rows: int) -> None:
    """The current step: a dot on m_j and on d_j, and a dotted line through every row (the figure's first shapes)."""
    n = step_numbers(trace, lane, current)
    dot = dict(color="#d62728", size=11, line=dict(color="white", width=1))
    for row, y in ((1, n.m), (2, n.d)):
        fig.add_trace(
            go.Scatter(
                x=[current],
                y=[y if math.isfinite(y) else None],
                mode="markers",
                marker=dot,
                showlegend=row == 1,
                name="step j",
                hoverinfo="skip",
            ),
            row=row,
            col=1,
        )
    line = dict(type="line", x0=current, x1=current, y0=0, y1=1, line=dict(color="#d62728", width=1, dash="dot"))
    _across_rows(fig, line, rows)


def _across_rows(fig: go.Figure, shape: dict, rows: int) -> None:
    """One shape in each of the figure's rows, spanning its height: what add_vline and add_vrect do, at a tenth of
    their time (they look up every subplot's axes for each call)."""
    axes = ["", *(str(i) for i in range(2, rows + 1))]
    fig.update_layout(shapes=[*fig.layout.shapes, *({**shape, "xref": f"x{a}", "yref": f"y{a} domain"} for a in axes)])


def _shade_nonfinite(fig: go.Figure, trace: Trace, lane: int, last: int, rows: int) -> None:
    """From the first step where d_j is not finite to the lane's last: shaded and labelled."""
    bad = first_nonfinite(trace, lane)
    if bad is None:
        return
    what = "NaN" if math.isnan(trace.d[lane, bad]) else "±∞"
    _across_rows(
        fig,
        dict(type="rect", x0=bad - 0.5, x1=last + 0.5, y0=0, y1=1, fillcolor=NAN_FILL, line_width=0, layer="below"),
        rows,
    )
    fig.add_annotation(
        text=f"d<sub>j</sub> = {what} from step {bad}",
        x=bad,
        xref="x",
        yref="y2 domain",
        y=0.5,
        xanchor="left",
        showarrow=False,
        font=dict(color="#b22222", size=12),
    )


def row_nan_note(trace: Trace, row: int | None = None) -> str | None:
    """Where and why the traced row's softmax is NaN (None when it is not). row: its number in the input, where the
    trace was made from a slice of it (the page traces one row alone: its trace.row is 0)."""
    row = trace.row if row is None else row
    reason = nan_row_reason(trace.x)
    x = trace.x
    bad = np.flatnonzero(np.isnan(x) | (x == np.inf))
    if bad.size:
        lane, step = (int(v) for v in np.argwhere(trace.index == int(bad[0]))[0])
        at = f"lane {lane}, step {step}" if trace.threads > 1 else f"step {step}"
        merged = " The merges carry it into the final (m, d)." if trace.merges else ""
        return f"Row {row} is NaN from element {int(bad[0])} ({at}), as {reason}.{merged}"
    if reason:
        return f"Row {row}: {reason}."
    if not math.isfinite(trace.final_d):
        return f"Row {row}'s final d is {format_value(trace.final_d)}: the {trace.acc} accumulator overflowed."
    return None

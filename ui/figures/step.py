"""The Step-through page's figures: one lane's running (m, d) step by step, and every lane as a heatmap."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.trace import Trace

from .common import ERR_FLOOR, finish, format_value

EXACT_COLOR = "#ff7f0e"
KERNEL_COLOR = "#1f77b4"
MAX_FRAMES = 200  # a step-through window holds at most this many steps (one plotly frame each)
MAX_HEAT_STEPS = 1024  # the lanes × steps heatmap shows at most this many step columns


@dataclass(frozen=True)
class StepNumbers:
    """One update of a lane's running (m, d): the kernel's numbers and float64's, as floats."""

    step: int
    element: int  # index in the row of the element folded, -1 for none
    x: float
    prev_m: float
    prev_d: float
    m: float
    d: float
    scale: float  # e^(m_{j-1} - m_j); 1 for safe softmax
    term: float  # e^(x_j - m)
    row_max: float  # safe softmax's final max (NaN for online)
    exact_m: float
    exact_d: float
    rel_err: float  # of d_j against exact_d
    kind: str  # "online" or "safe"


def step_numbers(trace: Trace, lane: int, step: int) -> StepNumbers:
    """The numbers of one update of a lane's running (m, d)."""
    idx = int(trace.index[lane, step])
    prev_m = float(trace.m[lane, step - 1]) if step > 0 else -math.inf
    prev_d = float(trace.d[lane, step - 1]) if step > 0 else 0.0
    m, d = float(trace.m[lane, step]), float(trace.d[lane, step])
    x = float(trace.x[idx]) if idx >= 0 else math.nan
    with np.errstate(all="ignore"):
        if trace.kind == "safe":
            row_max = float(np.max(trace.m[lane][trace.index[lane] >= 0]))
            scale = 1.0
            term = float(np.exp(x - row_max)) if idx >= 0 else 0.0
        else:
            row_max = math.nan
            scale = 1.0 if prev_m == m else float(np.exp(prev_m - m))
            term = 0.0 if x == -math.inf else float(np.exp(x - m))
    exact_d = float(trace.exact_d[lane, step])
    rel = float(trace.d_rel_error[lane, step])
    return StepNumbers(step=step, element=idx, x=x, prev_m=prev_m, prev_d=prev_d, m=m, d=d, scale=scale, term=term,
                       row_max=row_max, exact_m=float(trace.exact_m[lane, step]), exact_d=exact_d, rel_err=rel,
                       kind=trace.kind)


def step_html(n: StepNumbers) -> str:
    """The update at one step, written out with its numbers (plotly's HTML subset)."""
    f = format_value
    head = f"<b>step j = {n.step}</b> (element {n.element}): x<sub>j</sub> = {f(n.x)}"
    mline = f"m<sub>j</sub> = max(m<sub>j−1</sub>, x<sub>j</sub>) = max({f(n.prev_m)}, {f(n.x)}) = {f(n.m)}"
    if n.kind == "safe":
        dline = (f"pass 2, row max m = {f(n.row_max)}: d<sub>j</sub> = d<sub>j−1</sub> + e<sup>x<sub>j</sub>−m</sup>"
                 f" = {f(n.prev_d)} + {f(n.term)} = <b>{f(n.d)}</b>")
    else:
        dline = (f"rescale e<sup>m<sub>j−1</sub>−m<sub>j</sub></sup> = {f(n.scale)} · "
                 f"d<sub>j</sub> = d<sub>j−1</sub>·{f(n.scale)} + e<sup>x<sub>j</sub>−m<sub>j</sub></sup> = "
                 f"{f(n.prev_d)}·{f(n.scale)} + {f(n.term)} = <b>{f(n.d)}</b>")
    err = f"exact d<sub>j</sub> = {f(n.exact_d)} · relative error of d<sub>j</sub> = {n.rel_err:.3g}"
    return "<br>".join([head + " · " + mline, dline, err])


def step_window(steps: int, current: int, size: int = MAX_FRAMES) -> tuple[int, int]:
    """[start, stop) of at most `size` steps around `current` (long rows are windowed, not all framed)."""
    if steps <= size:
        return 0, steps
    start = min(max(current - size // 2, 0), steps - size)
    return start, start + size


def step_figure(trace: Trace, lane: int, start: int, stop: int, current: int, title: str, stamp: str) -> go.Figure:
    """A lane's x_j, running m_j and d_j (kernel and float64) with client-side frames for steps start..stop-1.

    The slider and the Play button animate in the browser (plotly frames), without a server round trip.
    """
    idx = trace.index[lane]
    valid = np.flatnonzero(idx >= 0)
    steps = np.arange(start, stop)
    steps = steps[np.isin(steps, valid)]
    if steps.size == 0:
        raise ValueError(f"lane {lane} folded no element in steps {start}..{stop - 1}")
    current = int(np.clip(current, steps[0], steps[-1]))
    xs = trace.x[idx[steps]]
    m, d = trace.m[lane, steps], trace.d[lane, steps]
    em, ed = trace.exact_m[lane, steps], trace.exact_d[lane, steps]
    err = np.maximum(np.nan_to_num(trace.d_rel_error[lane, steps], nan=ERR_FLOOR), ERR_FLOOR)

    fig = make_subplots(rows=4, cols=1, row_heights=[0.16, 0.34, 0.28, 0.22],
                        vertical_spacing=0.045,
                        subplot_titles=("", "x<sub>j</sub> and the running max m<sub>j</sub>",
                                        "running denominator d<sub>j</sub>",
                                        "relative error of d<sub>j</sub> vs float64"))
    fin = lambda a: np.where(np.isfinite(a), a, np.nan)  # noqa: E731
    fig.add_trace(go.Scatter(x=steps, y=fin(xs), mode="markers", name="x<sub>j</sub> (input)",
                             marker=dict(color="#999", size=5)), row=2, col=1)
    fig.add_trace(go.Scatter(x=steps, y=fin(m), mode="lines", line_shape="hv", name="kernel (acc " + trace.acc + ")",
                             line=dict(color=KERNEL_COLOR, width=2), legendgroup="k"), row=2, col=1)
    fig.add_trace(go.Scatter(x=steps, y=fin(em), mode="lines", line_shape="hv", name="exact (float64)",
                             line=dict(color=EXACT_COLOR, width=2, dash="dash"), legendgroup="e"), row=2, col=1)
    fig.add_trace(go.Scatter(x=steps, y=fin(d), mode="lines", showlegend=False, legendgroup="k",
                             line=dict(color=KERNEL_COLOR, width=2)), row=3, col=1)
    fig.add_trace(go.Scatter(x=steps, y=fin(ed), mode="lines", showlegend=False, legendgroup="e",
                             line=dict(color=EXACT_COLOR, width=2, dash="dash")), row=3, col=1)
    fig.add_trace(go.Scatter(x=steps, y=err, mode="lines+markers", showlegend=False, legendgroup="k",
                             marker=dict(size=3), line=dict(color="#d62728", width=1)), row=4, col=1)

    def moving(s: int) -> list:
        n = step_numbers(trace, lane, s)
        e = max(n.rel_err, ERR_FLOOR) if math.isfinite(n.rel_err) else ERR_FLOOR
        dot = dict(color="#d62728", size=12, line=dict(color="white", width=1))
        return [go.Scatter(x=[0], y=[0], mode="text", text=[step_html(n)], textposition="middle right",
                           textfont=dict(size=13), showlegend=False, hoverinfo="skip"),
                go.Scatter(x=[s], y=[n.m if math.isfinite(n.m) else None], mode="markers", marker=dict(symbol="circle", **dot),
                           name="current step", showlegend=False),
                go.Scatter(x=[s], y=[n.d if math.isfinite(n.d) else None], mode="markers", marker=dot, showlegend=False),
                go.Scatter(x=[s], y=[e], mode="markers", marker=dot, showlegend=False)]

    first = len(fig.data)
    for trace_, row in zip(moving(current), (1, 2, 3, 4)):
        fig.add_trace(trace_, row=row, col=1)
    moving_idx = list(range(first, first + 4))
    # the text row (row 1): the update at the current step, on axes of its own; rows 2-4 share the steps
    fig.update_xaxes(visible=False, range=[0, 1], row=1, col=1)
    fig.update_yaxes(visible=False, range=[-1, 1], row=1, col=1)
    fig.update_xaxes(matches="x4", showticklabels=False, row=2, col=1)
    fig.update_xaxes(matches="x4", showticklabels=False, row=3, col=1)
    fig.frames = [go.Frame(name=str(s), data=moving(int(s)), traces=moving_idx) for s in steps]
    anim = {"mode": "immediate", "frame": {"duration": 0, "redraw": False}, "transition": {"duration": 0}}
    fig.update_layout(
        sliders=[dict(active=int(np.searchsorted(steps, current)), x=0.14, len=0.86, y=-0.05, yanchor="top",
                      currentvalue=dict(prefix="step j = ", font=dict(size=13), xanchor="left"), pad=dict(t=10),
                      ticklen=3, font=dict(size=10),
                      steps=[dict(method="animate", label=str(s), args=[[str(s)], anim]) for s in steps])],
        updatemenus=[dict(type="buttons", direction="left", x=0.0, y=-0.05, xanchor="left", yanchor="top",
                          pad=dict(t=40, r=10), showactive=False, buttons=[
                              dict(label="▶ Play", method="animate",
                                   args=[None, {"frame": {"duration": 250, "redraw": False}, "fromcurrent": True,
                                                "transition": {"duration": 0}, "mode": "immediate"}]),
                              dict(label="❚❚", method="animate", args=[[None], anim])])],
    )
    fig.update_yaxes(title_text="value", row=2, col=1)
    fig.update_yaxes(title_text="d<sub>j</sub>", row=3, col=1)
    fig.update_yaxes(type="log", exponentformat="power", title_text="rel. error", row=4, col=1)
    fig.update_xaxes(title_text="step j (this lane's j-th element)", row=4, col=1)
    finish(fig, title, stamp, height=820)
    fig.update_layout(margin=dict(b=150))
    return fig


def heat_values(trace: Trace, quantity: str) -> tuple[np.ndarray, str]:
    with np.errstate(all="ignore"):
        if quantity == "m":
            return np.where(np.isfinite(trace.m), trace.m, np.nan), "kernel's m"
        if quantity == "err":
            return np.log10(np.maximum(trace.d_rel_error, ERR_FLOOR)), "log10 rel. error of d"
        return np.log10(np.where(trace.d > 0, trace.d, np.nan)), "log10 of kernel's d"


def lanes_heatmap(trace: Trace, quantity: str, title: str, stamp: str) -> go.Figure:
    """Every lane's partial state at every step (lanes × steps); long rows are downsampled in steps."""
    z, label = heat_values(trace, quantity)
    steps = z.shape[1]
    stride = max(1, -(-steps // MAX_HEAT_STEPS))
    cols = np.arange(0, steps, stride)
    z = np.where(trace.index[:, cols] >= 0, z[:, cols], np.nan)
    hover = np.dstack([trace.index[:, cols], trace.m[:, cols], trace.d[:, cols], trace.exact_d[:, cols],
                       trace.d_rel_error[:, cols]])
    fig = go.Figure(go.Heatmap(
        z=z, x=cols, y=np.arange(z.shape[0]), colorscale="Viridis", colorbar=dict(title=dict(text=label, side="right")),
        customdata=hover, hoverongaps=False,
        hovertemplate="lane %{y}, step %{x}<br>element %{customdata[0]}<br>m = %{customdata[1]:.7g}"
                      "<br>d = %{customdata[2]:.7g} (exact %{customdata[3]:.9g})<br>rel. error of d %{customdata[4]:.2g}"
                      "<extra></extra>"))
    fig.update_yaxes(title_text="lane (thread of the row)", autorange="reversed")
    fig.update_xaxes(title_text="step j" + (f" (every {stride}th step shown)" if stride > 1 else ""))
    return finish(fig, title, stamp, height=max(360, min(900, 140 + 3 * z.shape[0])))

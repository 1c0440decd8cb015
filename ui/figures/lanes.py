"""The Step-through page's heatmap: every lane's partial state at every step, lanes × steps, downsampled to a
bounded number of cells for many lanes or long rows."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from explorer.trace import Trace

from .common import ERR_FLOOR, finish, finite_or_nan, integer_ticks, stamp_below

MAX_HEAT_STEPS = 1024  # the lanes × steps heatmap shows at most this many step columns,
MAX_HEAT_LANES = 256  # this many lane rows (every k-th lane of more),
MAX_HEAT_CELLS = 32 * MAX_HEAT_STEPS  # and this many cells: a warp's lanes at every step column, fewer columns for more


def heat_values(trace: Trace, quantity: str) -> tuple[np.ndarray, str]:
    """The values to colour by and their label; a d equal to float64's (0 = 0 included) is exact, at ERR_FLOOR."""
    with np.errstate(all="ignore"):
        if quantity == "m":
            return finite_or_nan(trace.m), "kernel's m"
        if quantity == "err":
            return np.log10(np.maximum(trace.folded_d_rel_error, ERR_FLOOR)), "log10 rel. error of d"
        return np.log10(np.where(trace.d > 0, trace.d, np.nan)), "log10 of kernel's d"


def heat_cells(lanes: int, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """The lanes and steps the heatmap shows: every lane and step where they fit, else every k-th of each, at most
    MAX_HEAT_LANES lanes, MAX_HEAT_STEPS steps and MAX_HEAT_CELLS cells whatever the row's length."""
    shown = np.arange(0, lanes, max(1, -(-lanes // MAX_HEAT_LANES)))
    columns = max(1, min(MAX_HEAT_STEPS, MAX_HEAT_CELLS // shown.size))
    return shown, np.arange(0, steps, max(1, -(-steps // columns)))


def heat_white_note(trace: Trace, quantity: str) -> str:
    """What the heatmap's white cells mean, for the reasons it has ("" where it has none): a lane with no element
    at that step, d = 0 (or m = −∞) where every element it folded so far is −∞, or a value that is not finite."""
    z, _ = heat_values(trace, quantity)
    cells = np.ix_(*heat_cells(*z.shape))
    folded = trace.index[cells] >= 0
    white = folded & ~np.isfinite(z[cells])
    parts = []
    if not folded.all():
        idle = np.flatnonzero((trace.index < 0).all(axis=1))
        some = f"lanes {idle[0]}–{idle[-1]}" if idle.size > 1 and idle[-1] - idle[0] + 1 == idle.size else None
        some = some or (f"lane {idle[0]}" if idle.size == 1 else f"{idle.size} lanes")
        none = f" ({some} get none of the row's {trace.x.size:,})" if idle.size else ""
        parts.append(f"no element at that step{none}")
    value, empty, word = (trace.m, -np.inf, "m = −∞") if quantity == "m" else (trace.d, 0, "d = 0")
    masked = white & (value[cells] == empty)
    if masked.any():
        log = " (log10 of 0 has no value)" if quantity == "d" else ""
        parts.append(f"{word}, where every element the lane folded so far is −∞{log}")
    if (white & ~masked).any():
        parts.append("m is NaN or +∞" if quantity == "m" else "d is NaN or ±∞")
    return f"White cells: {'; '.join(parts)}." if parts else ""


def _nth(k: int) -> str:
    """2nd, 3rd, 4th, 11th, 21st, ..."""
    last = "th" if k % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{last}"


def lanes_heatmap(trace: Trace, quantity: str, title: str, stamp: str) -> go.Figure:
    """Every lane's partial state at every step (lanes × steps); many lanes or long rows are downsampled in lanes
    and steps (heat_cells)."""
    z, label = heat_values(trace, quantity)
    lanes, steps = z.shape
    rows, cols = heat_cells(lanes, steps)
    cells = np.ix_(rows, cols)
    z = np.where(trace.index[cells] >= 0, z[cells], np.nan)
    hover = np.dstack(
        [trace.index[cells], trace.m[cells], trace.d[cells], trace.exact_d[cells], trace.d_rel_error[cells]]
    )
    finite = z[np.isfinite(z)]
    flat = finite.size > 0 and finite.min() == finite.max()  # one value: a scale centred on it, not plotly's ±0.3
    margin = max(1.0, abs(finite[0]) / 10) if flat else 0.0
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=cols,
            y=rows,
            zmin=finite[0] - margin if flat else None,
            zmax=finite[0] + margin if flat else None,
            colorscale="Viridis",
            colorbar=dict(title=dict(text=label, side="right")),
            customdata=hover,
            hoverongaps=False,
            hovertemplate="lane %{y}, step %{x}<br>element %{customdata[0]}<br>m = %{customdata[1]:.7g}"
            "<br>d = %{customdata[2]:.7g} (exact %{customdata[3]:.9g})<br>rel. error of d %{customdata[4]:.2g}"
            "<extra></extra>",
        )
    )
    lane_stride, stride = (int(a[1] - a[0]) if a.size > 1 else 1 for a in (rows, cols))
    fig.update_yaxes(
        title_text="lane (thread of the row)" + (f", every {_nth(lane_stride)} shown" if lane_stride > 1 else ""),
        autorange="reversed",
    )
    fig.update_xaxes(title_text="step j" + (f" (every {_nth(stride)} step shown)" if stride > 1 else ""))
    integer_ticks(fig, steps)
    integer_ticks(fig, lanes, "y")
    # the stamp under the x axis's title: beside it, in a narrow chart, the two met
    return stamp_below(finish(fig, title, stamp, height=max(360, min(900, 140 + 3 * z.shape[0]))))

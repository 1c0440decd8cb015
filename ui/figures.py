"""Pure figure builders: arrays, traces and results in, plotly Figures out (no Streamlit here).

Every figure carries a title with units, a legend, and a stamp (GPU or CPU emulation, CUDA, CuPy,
date) so a screenshot or a PNG download says where its numbers came from.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2",
          "#7f7f7f", "#bcbd22"]
REF_COLOR = "#222222"
EXACT_COLOR = "#ff7f0e"
KERNEL_COLOR = "#1f77b4"
ERR_FLOOR = 1e-10  # an exact value (error 0) is drawn here on log axes, and the axis title says so
MAX_FRAMES = 200  # a step-through window holds at most this many steps (one plotly frame each)
MAX_HEAT_STEPS = 1024  # the lanes × steps heatmap shows at most this many step columns
SYMBOLS = ["circle-open", "square-open", "diamond-open", "cross-thin-open", "x-thin-open", "triangle-up-open",
           "star-open", "hexagon-open"]
GL_POINTS = 5000  # above this many points per trace, use WebGL traces
FONT = dict(size=13)


# --- shared ------------------------------------------------------------------------------------------

def stamp_text(info: dict, date: str) -> str:
    """'GPU NAME · CUDA 12.4 · CuPy 13.3 · 2025-01-31' or 'CPU emulation (no GPU) · NumPy 2.1 · date'."""
    if info.get("backend") == "cuda":
        parts = [f"GPU {info.get('gpu', '?')}", f"CUDA {info.get('cuda_runtime', '?')}",
                 f"CuPy {info.get('cupy', '?')}"]
    else:
        parts = ["CPU emulation (no GPU)", f"NumPy {np.__version__}"]
    return " · ".join([*parts, date])


def chart_config(filename: str) -> dict:
    """plotly config: the modebar camera downloads a PNG named after the configuration."""
    return {"displaylogo": False,
            "toImageButtonOptions": {"format": "png", "filename": filename, "scale": 2}}


def finish(fig: go.Figure, title: str, stamp: str, height: int = 480) -> go.Figure:
    fig.update_layout(
        title=dict(text=title, x=0.0, xanchor="left", font=dict(size=16)),
        template="plotly_white", height=height, font=FONT,
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="right", x=1.0),
        margin=dict(l=70, r=30, t=110, b=60),
    )
    fig.add_annotation(text=stamp, xref="paper", yref="paper", x=1.0, y=-0.02, xanchor="right",
                       yanchor="top", yshift=-28, showarrow=False, font=dict(size=10, color="#777"),
                       name="stamp")
    return fig


def _scatter(n: int):
    return go.Scattergl if n > GL_POINTS else go.Scatter


def _fmt(v: float) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "NaN"
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    return f"{v:.7g}"


def nonfinite_marks(values: np.ndarray, log: bool = False) -> dict[str, np.ndarray]:
    """Indices of NaN, +inf, -inf (and zeros, which a log axis cannot show) in a 1-D array."""
    v = np.asarray(values, dtype=np.float64)
    marks = {"NaN": np.flatnonzero(np.isnan(v)), "+inf": np.flatnonzero(v == np.inf),
             "−inf": np.flatnonzero(v == -np.inf)}
    if log:
        marks["0 (off the log axis)"] = np.flatnonzero(v == 0)
    return {k: idx for k, idx in marks.items() if idx.size}


MARK_SYMBOLS = {"NaN": "x", "+inf": "triangle-up", "−inf": "triangle-down", "0 (off the log axis)": "circle-open"}


def _strip(fig: go.Figure, series: dict[str, np.ndarray], log: bool, row: int, colors: dict[str, str]) -> int:
    """A strip under the main plot marking every non-finite (and, on log axes, zero) value per series."""
    count = 0
    names = list(series)
    n = max((np.size(v) for v in series.values()), default=1)
    # an invisible frame so the strip's axes are drawn even when nothing is marked
    fig.add_trace(go.Scatter(x=[0, max(n - 1, 1)], y=[names[0], names[-1]], mode="markers", opacity=0,
                             hoverinfo="skip", showlegend=False), row=row, col=1)
    for name, values in series.items():
        for kind, idx in nonfinite_marks(values, log).items():
            count += idx.size
            fig.add_trace(_scatter(idx.size)(
                x=idx, y=[name] * idx.size, mode="markers", name=f"{name}: {kind} ({idx.size})",
                marker=dict(symbol=MARK_SYMBOLS[kind], size=9, color=colors.get(name, REF_COLOR)),
                hovertemplate=f"{name}<br>element %{{x}}: {kind}<extra></extra>"), row=row, col=1)
    fig.update_yaxes(type="category", categoryorder="array", categoryarray=list(series), row=row, col=1,
                     title_text="", tickfont=dict(size=11), dtick=1, showgrid=True)
    return count


# --- 1. outputs ---------------------------------------------------------------------------------------

def _strip_rows(series: int, main_px: int = 400) -> tuple[list[float], int]:
    """Row heights and figure height so the strip gives every series a readable line."""
    strip_px = 24 * series + 16
    return [main_px / (main_px + strip_px), strip_px / (main_px + strip_px)], main_px + strip_px + 200


def outputs_figure(ref_row: np.ndarray, outputs: dict[str, np.ndarray], log: bool, title: str,
                   stamp: str) -> go.Figure:
    """The chosen row's probabilities per variant beside the float64 reference.

    NaN and ±inf outputs (and zeros on a log axis) cannot be drawn as points; a strip under the plot
    marks each one by element, so nothing disappears silently.
    """
    n = ref_row.size
    heights, height = _strip_rows(len(outputs) + 1)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=heights, vertical_spacing=0.06)
    colors = {name: COLORS[i % len(COLORS)] for i, name in enumerate(outputs)}
    colors["float64 reference"] = REF_COLOR
    j = np.arange(n)
    for i, (name, y) in enumerate(outputs.items()):
        y64 = np.asarray(y, dtype=np.float64)
        fig.add_trace(_scatter(n)(x=j, y=np.where(np.isfinite(y64), y64, np.nan), mode="markers", name=name,
                                  marker=dict(size=max(11 - 1.5 * i, 4), color=colors[name], opacity=0.85,
                                              symbol=SYMBOLS[i % len(SYMBOLS)], line=dict(width=1.2, color=colors[name])),
                                  hovertemplate=f"{name}<br>element %{{x}}<br>p = %{{y:.7g}}<extra></extra>"),
                      row=1, col=1)
    fig.add_trace(_scatter(n)(x=j, y=np.where(np.isfinite(ref_row), ref_row, np.nan), mode="lines",
                              name="float64 reference", line=dict(color=REF_COLOR, width=1.5),
                              hovertemplate="reference<br>element %{x}<br>p = %{y:.10g}<extra></extra>"),
                  row=1, col=1)
    marked = _strip(fig, {"float64 reference": ref_row, **outputs}, log, 2, colors)
    fig.update_yaxes(type="log" if log else "linear", title_text="probability" + (" (log)" if log else ""),
                     exponentformat="power", row=1, col=1)
    fig.update_xaxes(title_text="element j of the row", row=2, col=1)
    if not marked:
        fig.add_annotation(text="no NaN / inf" + (" / zero" if log else "") + " outputs", xref="x2 domain",
                           yref="y2 domain", x=0.5, y=0.5, showarrow=False, font=dict(color="#777"))
    fig.add_annotation(text="marked: NaN ×, +inf ▲, −inf ▼" + (", 0 ○" if log else ""), xref="paper",
                       yref="y2 domain", x=0, y=1.25, xanchor="left", showarrow=False,
                       font=dict(size=11, color="#555"))
    return finish(fig, title, stamp, height=height)


# --- 3. error vs float64 -----------------------------------------------------------------------------

def relative_error(out_row: np.ndarray, ref_row: np.ndarray) -> np.ndarray:
    """|y − ref| / |ref| per element (NaN where either is non-finite; ref 0 uses the absolute error)."""
    y = np.asarray(out_row, dtype=np.float64)
    r = np.asarray(ref_row, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.abs(y - r) / np.where(r != 0, np.abs(r), 1.0)
    return np.where(np.isfinite(y) & np.isfinite(r), rel, np.nan)


def error_figure(ref_row: np.ndarray, outputs: dict[str, np.ndarray], title: str, stamp: str) -> go.Figure:
    """Per-element relative error of each variant on one row (log axis), non-finite mismatches marked."""
    n = ref_row.size
    heights, height = _strip_rows(len(outputs))
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=heights, vertical_spacing=0.06)
    colors = {name: COLORS[i % len(COLORS)] for i, name in enumerate(outputs)}
    j = np.arange(n)
    mismatch = {}
    for i, (name, y) in enumerate(outputs.items()):
        rel = relative_error(y, ref_row)
        fig.add_trace(_scatter(n)(x=j, y=np.maximum(rel, ERR_FLOOR), mode="markers", name=name,
                                  marker=dict(size=7, color=colors[name], opacity=0.8, symbol=SYMBOLS[i % len(SYMBOLS)],
                                              line=dict(width=1, color=colors[name])),
                                  customdata=rel,
                                  hovertemplate=f"{name}<br>element %{{x}}<br>rel. error %{{customdata:.3g}}"
                                                "<extra></extra>"),
                      row=1, col=1)
        y64 = np.asarray(y, dtype=np.float64)
        bad = (np.isnan(y64) != np.isnan(ref_row)) | (np.isinf(y64) != np.isinf(ref_row))
        mismatch[name] = np.where(bad, y64, 1.0)  # only the mismatching elements are non-finite here
    marked = _strip(fig, mismatch, False, 2, colors)
    fig.update_yaxes(type="log", exponentformat="power", row=1, col=1,
                     title_text=f"relative error |y − ref| / ref<br><sup>exact results drawn at {ERR_FLOOR:g}</sup>")
    fig.update_xaxes(title_text="element j of the row", row=2, col=1)
    if not marked:
        fig.add_annotation(text="no NaN / inf where the reference is finite (or the other way round)",
                           xref="x2 domain", yref="y2 domain", x=0.5, y=0.5, showarrow=False,
                           font=dict(color="#777"))
    return finish(fig, title, stamp, height=height)


def error_table(reports: dict[str, dict]) -> pd.DataFrame:
    """One row per variant from ErrorReport.as_dict() values."""
    columns = {"max_rel": "max rel", "mean_rel": "mean rel", "max_ulp": "max ULP", "max_abs": "max abs",
               "row_sum_dev": "max |Σ−1|", "nan_count": "NaN", "inf_count": "inf",
               "nonfinite_mismatch": "NaN/inf ≠ ref", "argmax_agreement": "argmax agree"}
    df = pd.DataFrame.from_dict(reports, orient="index")
    df = df[[c for c in columns if c in df.columns]].rename(columns=columns)
    df.index.name = "variant"
    return df


# --- 2. step through ----------------------------------------------------------------------------------

def step_numbers(trace, lane: int, step: int) -> dict:
    """The numbers of one update of a lane's running (m, d), kernel and exact, as floats."""
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
    return {"step": step, "element": idx, "x": x, "prev_m": prev_m, "prev_d": prev_d, "m": m, "d": d,
            "scale": scale, "term": term, "row_max": row_max, "exact_m": float(trace.exact_m[lane, step]),
            "exact_d": exact_d, "rel_err": rel, "kind": trace.kind}


def step_html(n: dict) -> str:
    """The update at one step, written out with its numbers (plotly's HTML subset)."""
    f = _fmt
    head = f"<b>step j = {n['step']}</b> (element {n['element']}): x<sub>j</sub> = {f(n['x'])}"
    mline = f"m<sub>j</sub> = max(m<sub>j−1</sub>, x<sub>j</sub>) = max({f(n['prev_m'])}, {f(n['x'])}) = {f(n['m'])}"
    if n["kind"] == "safe":
        dline = (f"pass 2, row max m = {f(n['row_max'])}: d<sub>j</sub> = d<sub>j−1</sub> + e<sup>x<sub>j</sub>−m</sup>"
                 f" = {f(n['prev_d'])} + {f(n['term'])} = <b>{f(n['d'])}</b>")
    else:
        dline = (f"rescale e<sup>m<sub>j−1</sub>−m<sub>j</sub></sup> = {f(n['scale'])} · "
                 f"d<sub>j</sub> = d<sub>j−1</sub>·{f(n['scale'])} + e<sup>x<sub>j</sub>−m<sub>j</sub></sup> = "
                 f"{f(n['prev_d'])}·{f(n['scale'])} + {f(n['term'])} = <b>{f(n['d'])}</b>")
    err = f"exact d<sub>j</sub> = {f(n['exact_d'])} · relative error of d<sub>j</sub> = {n['rel_err']:.3g}"
    return "<br>".join([head + " · " + mline, dline, err])


def step_window(steps: int, current: int, size: int = MAX_FRAMES) -> tuple[int, int]:
    """[start, stop) of at most `size` steps around `current` (long rows are windowed, not all framed)."""
    if steps <= size:
        return 0, steps
    start = min(max(current - size // 2, 0), steps - size)
    return start, start + size


def step_figure(trace, lane: int, start: int, stop: int, current: int, title: str, stamp: str) -> go.Figure:
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
        e = max(n["rel_err"], ERR_FLOOR) if math.isfinite(n["rel_err"]) else ERR_FLOOR
        dot = dict(color="#d62728", size=12, line=dict(color="white", width=1))
        return [go.Scatter(x=[0], y=[0], mode="text", text=[step_html(n)], textposition="middle right",
                           textfont=dict(size=13), showlegend=False, hoverinfo="skip"),
                go.Scatter(x=[s], y=[n["m"] if math.isfinite(n["m"]) else None], mode="markers", marker=dict(symbol="circle", **dot),
                           name="current step", showlegend=False),
                go.Scatter(x=[s], y=[n["d"] if math.isfinite(n["d"]) else None], mode="markers", marker=dot, showlegend=False),
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


def heat_values(trace, quantity: str) -> tuple[np.ndarray, str]:
    with np.errstate(all="ignore"):
        if quantity == "m":
            return np.where(np.isfinite(trace.m), trace.m, np.nan), "kernel's m"
        if quantity == "err":
            return np.log10(np.maximum(trace.d_rel_error, ERR_FLOOR)), "log10 rel. error of d"
        return np.log10(np.where(trace.d > 0, trace.d, np.nan)), "log10 of kernel's d"


def lanes_heatmap(trace, quantity: str, title: str, stamp: str) -> go.Figure:
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


def _bitrev(i: int, bits: int) -> int:
    return int(f"{i:0{bits}b}"[::-1], 2) if bits else 0


def _chunk(level) -> int:
    return int(getattr(level, "chunk", -1))


def tree_stages(trace) -> dict[str, tuple]:
    """Label -> (stage, chunk, warp) of every butterfly (or chain) in the trace, lanes first."""
    keys = sorted({(lv.stage, _chunk(lv), lv.warp) for lv in trace.merges},
                  key=lambda k: ({"lanes": 0, "warps": 1}.get(k[0], 2), k[1], k[2]))
    out = {}
    for stage, chunk, warp in keys:
        where = f"chunk {chunk}, " if chunk >= 0 else ""
        if stage == "lanes":
            label = f"{where}warp {warp} lanes"
        elif stage == "warps":
            label = f"{where}across warps"
        else:
            label = f"across {stage}"
        out[label] = (stage, chunk, warp)
    return out


def tree_choices(trace) -> list[str]:
    return list(tree_stages(trace))


def _levels(trace, stage: str, chunk: int, warp: int = -1) -> list:
    return [lv for lv in trace.merges if lv.stage == stage and _chunk(lv) == chunk and (stage != "lanes" or lv.warp == warp)]


def _top(levels) -> tuple | None:
    """The (m, d, exact m, exact d) a butterfly ends with (node 0 of its last non-empty level)."""
    for lv in reversed(levels):
        if lv.m.size:
            return float(lv.m[0]), float(lv.d[0]), float(lv.exact_m[0]), float(lv.exact_d[0])
    return None


def _tree_leaves(trace, stage: str, chunk: int, warp: int) -> tuple[dict, str, int]:
    """Leaf id -> (m, d, exact m, exact d), the leaves' name, and the butterfly's width."""
    chunks = sorted({_chunk(lv) for lv in trace.merges})
    if stage == "lanes":
        per_chunk = trace.threads // max(len(chunks), 1)
        count = (trace.index >= 0).sum(axis=1)
        leaves = {}
        for local in range(warp * 32, min(warp * 32 + 32, per_chunk)):
            t = max(chunk, 0) * per_chunk + local
            c = count[t]
            leaves[local] = ((float(trace.m[t, c - 1]), float(trace.d[t, c - 1]), float(trace.exact_m[t, c - 1]),
                              float(trace.exact_d[t, c - 1])) if c else (-math.inf, 0.0, -math.inf, 0.0))
        return leaves, "lane", 32
    if stage == "warps":
        warps = sorted({lv.warp for lv in trace.merges if lv.stage == "lanes" and _chunk(lv) == chunk})
        leaves = {w: top for w in warps if (top := _top(_levels(trace, "lanes", chunk, w))) is not None}
        return leaves, "warp", len(warps)
    leaves = {c: top for c in chunks if (top := _top(_levels(trace, "warps", c))) is not None}
    return leaves, stage[:-1] if stage.endswith("s") else stage, len(chunks)


def merge_tree_figure(trace, choice: str, title: str, stamp: str) -> go.Figure:
    """One butterfly (or the chain of chunk merges) as a tree: leaves are partial states, nodes merges."""
    stages = tree_stages(trace)
    if choice not in stages:
        raise ValueError(f"no merge stage {choice!r} in this trace; choose one of {', '.join(stages)}")
    stage, chunk, warp = stages[choice]
    levels = _levels(trace, stage, chunk, warp)
    leaves, leaf_label, width = _tree_leaves(trace, stage, chunk, warp)
    bits = max(1, math.ceil(math.log2(max(width, 2))))
    base = min(leaves) if leaves else 0
    order = sorted(leaves, key=lambda i: _bitrev(i - base, bits)) if stage != "chunks" else sorted(leaves)
    pos = {i: (float(k), 0.0) for k, i in enumerate(order)}
    nodes = [(i, pos[i][0], 0.0, *leaves[i], f"{leaf_label} {i}") for i in order]
    edges_x, edges_y = [], []
    for lv in levels:
        for k in range(lv.left.size):
            a, b = int(lv.left[k]), int(lv.right[k])
            if a not in pos or b not in pos:
                continue
            x = (pos[a][0] + pos[b][0]) / 2 if stage != "chunks" else pos[b][0]
            depth = max(pos[a][1], pos[b][1]) + 1
            for child in (a, b):
                edges_x += [pos[child][0], x, None]
                edges_y += [pos[child][1], depth, None]
            pos[a] = (x, depth)
            what = f"offset {lv.offset}" if stage != "chunks" else f"merge {k + 1}"
            nodes.append((a, x, depth, float(lv.m[k]), float(lv.d[k]), float(lv.exact_m[k]),
                          float(lv.exact_d[k]), f"{what}: {a} ⊕ {b}"))
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=edges_x, y=edges_y, mode="lines", line=dict(color="#bbb", width=1),
                             hoverinfo="skip", showlegend=False))
    arr = np.array([n[1:7] for n in nodes], dtype=np.float64).reshape(-1, 6)
    with np.errstate(all="ignore"):
        rel = np.abs(arr[:, 3] - arr[:, 5]) / np.abs(arr[:, 5])
    fig.add_trace(go.Scatter(
        x=arr[:, 0], y=arr[:, 1], mode="markers+text", showlegend=False,
        text=[f"d={_fmt(float(v))}" if y > 0 and (arr[:, 1] == y).sum() <= 8 else ""  # no labels on crowded levels
              for v, y in zip(arr[:, 3], arr[:, 1])],
        textposition="top center", textfont=dict(size=10),
        marker=dict(size=13, color=np.log10(np.maximum(np.nan_to_num(rel, nan=ERR_FLOOR), ERR_FLOOR)),
                    colorscale="YlOrRd", cmin=math.log10(ERR_FLOOR), cmax=-2, showscale=True,
                    colorbar=dict(title=dict(text="log10 rel. err of d", side="right")),
                    line=dict(color="#333", width=1)),
        customdata=np.column_stack([arr[:, 2:6], rel]), hovertext=[n[7] for n in nodes],
        hovertemplate="%{hovertext}<br>m = %{customdata[0]:.7g}, d = %{customdata[1]:.7g}"
                      "<br>exact m = %{customdata[2]:.9g}, d = %{customdata[3]:.9g}"
                      "<br>rel. error of d %{customdata[4]:.2g}<extra></extra>"))
    top = int(arr[:, 1].max()) if arr.size else 0
    if stage == "chunks":
        ticks = ["chunks"] + [f"merge {k}" for k in range(1, top + 1)]
    else:
        ticks = ["leaves", *[f"offset {lv.offset}" for lv in levels if lv.left.size][:top]]
    fig.update_yaxes(tickvals=list(range(len(ticks))), ticktext=ticks, title_text="merge level",
                     range=[-0.6, len(ticks) - 0.3])
    fig.update_xaxes(title_text=f"{leaf_label}s" + (", in butterfly order" if stage != "chunks" else ""),
                     showticklabels=False, showgrid=False)
    return finish(fig, title, stamp, height=520)


def merge_table(trace) -> pd.DataFrame:
    rows = []
    for lv in trace.merges:
        for k in range(lv.left.size):
            with np.errstate(all="ignore"):
                rel = abs(lv.d[k] - lv.exact_d[k]) / abs(lv.exact_d[k])
            rows.append({"stage": lv.stage, "chunk": _chunk(lv) if _chunk(lv) >= 0 else None,
                         "warp": lv.warp if lv.stage == "lanes" else None, "offset": lv.offset,
                         "left": int(lv.left[k]), "right": int(lv.right[k]), "m": float(lv.m[k]), "d": float(lv.d[k]),
                         "exact m": float(lv.exact_m[k]), "exact d": float(lv.exact_d[k]), "rel. error of d": rel})
    df = pd.DataFrame(rows)
    for column in ("chunk", "warp"):
        if column in df:
            df[column] = df[column].astype("Int64")
    if "chunk" in df and df["chunk"].isna().all():
        df = df.drop(columns="chunk")
    return df


# --- 4. timing ----------------------------------------------------------------------------------------

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


def timing_figures(df: pd.DataFrame, title: str, stamp: str) -> tuple[go.Figure, go.Figure]:
    """Median µs with p10–p90 bars, and GB/s with % of the copy bandwidth, one bar group per source."""
    t = go.Figure()
    g = go.Figure()
    for i, (source, part) in enumerate(df.groupby("source", sort=False)):
        color = COLORS[i % len(COLORS)]
        names = [f"{n} ({k})" if k not in ("variant", n) else n for n, k in zip(part["name"], part["kind"])]
        patterns = [{"peer": "/", "copy": "."}.get(k, "") for k in part["kind"]]
        t.add_trace(go.Bar(x=names, y=part["median_us"], name=source, marker_color=color,
                           marker_pattern_shape=patterns,
                           error_y=dict(type="data", symmetric=False, array=part["p90_us"] - part["median_us"],
                                        arrayminus=part["median_us"] - part["p10_us"], thickness=1.5),
                           hovertemplate="%{x}<br>median %{y:.2f} µs<extra>" + source + "</extra>"))
        pct = part["pct_copy"].astype(float)
        g.add_trace(go.Bar(x=names, y=part["gbps"], name=source, marker_color=color, marker_pattern_shape=patterns,
                           text=[f"{p:.0f}% of copy" if np.isfinite(p) else "" for p in pct], textposition="outside",
                           hovertemplate="%{x}<br>%{y:.1f} GB/s<extra>" + source + "</extra>"))
    t.update_yaxes(title_text="median time per launch (µs), bars p10–p90")
    g.update_yaxes(title_text="effective bandwidth (GB/s)")
    for f in (t, g):
        f.update_layout(barmode="group", showlegend=True)
        f.update_xaxes(title_text="kernel (variants, peers, copy)")
    return (finish(t, f"{title}: time", stamp, height=460), finish(g, f"{title}: bandwidth", stamp, height=460))


# --- 6. softmax + top-k -----------------------------------------------------------------------------------

TOPK_NAMES = {"topk_fused": "topk_fused", "topk_unfused": "topk_unfused", "torch": "torch.softmax + torch.topk"}
TOPK_STATUS_PATTERN = {"same": "", "tie": ".", "wrong": "x"}


def topk_bars_figure(ref_values: np.ndarray, ref_indices: np.ndarray, outputs: dict[str, tuple], log: bool,
                     title: str, stamp: str, status: dict[str, np.ndarray] | None = None) -> go.Figure:
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
    ticks = [f"{r}<br>#{i}" for r, i in zip(ranks, ref_indices)]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=ranks, y=ref_values, name="float64 reference", marker_color=REF_COLOR,
                         customdata=ref_indices,
                         hovertemplate="reference, rank %{x}<br>index %{customdata}<br>p = %{y:.10g}<extra></extra>"))
    for n, (name, (values, indices)) in enumerate(outputs.items()):
        values = np.asarray(values, dtype=np.float64)
        indices = np.asarray(indices, dtype=np.int64)
        st_ = np.asarray(status.get(name) if status else ["same"] * k)
        text = [f"#{i}" if s != "same" else "" for i, s in zip(indices, st_)]
        color = COLORS[n % len(COLORS)]
        fig.add_trace(go.Bar(
            x=ranks, y=values, name=name, marker_color=color, text=text, textposition="outside",
            marker_pattern_shape=[TOPK_STATUS_PATTERN.get(str(s), "") for s in st_],
            marker_line=dict(color=["#d62728" if s == "wrong" else color for s in st_],
                             width=[3 if s == "wrong" else 0.5 for s in st_]),
            customdata=np.column_stack([indices, np.asarray(st_, dtype=object)]),
            hovertemplate=f"{name}, rank %{{x}}<br>index %{{customdata[0]}} (%{{customdata[1]}})<br>"
                          "p = %{y:.7g}<extra></extra>"))
    fig.update_layout(barmode="group", bargap=0.25)
    fig.update_xaxes(title_text="rank (the reference's index under it)", tickvals=ranks, ticktext=ticks,
                     type="category")
    fig.update_yaxes(type="log" if log else "linear", exponentformat="power",
                     title_text="probability" + (" (log)" if log else ""))
    counts = {s: sum(int(np.sum(np.asarray(v) == s)) for v in (status or {}).values()) for s in ("tie", "wrong")}
    fig.add_annotation(text=f"dotted: tie swapped within rounding ({counts['tie']}) · crossed, red edge: index "
                            f"differs beyond rounding ({counts['wrong']}) · ties go to the lower index",
                       xref="paper", yref="paper", x=0, y=1.0, xanchor="left", yanchor="bottom", showarrow=False,
                       font=dict(size=11, color="#555"))
    return finish(fig, title, stamp, height=500)


def topk_timing_frame(sources: dict[str, dict]) -> pd.DataFrame:
    """The top-k rows (topk_fused, topk_unfused, torch with a k) of several results documents, with 'shape'."""
    df = results_frame(sources)
    if df.empty or "k" not in df.columns:
        return pd.DataFrame()
    df = df[df["name"].isin(list(TOPK_NAMES)) & df["k"].notna()].copy()
    if df.empty:
        return df
    df["k"] = df["k"].astype(int)
    df["shape"] = [f"{int(r)}×{int(c)} {d} top-{k}" for r, c, d, k in zip(df["rows"], df["cols"], df["dtype"], df["k"])]
    return df.reset_index(drop=True)


def topk_timing_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per row: median and spread, bytes moved, GB/s and the speed-up against torch of the same file and shape."""
    out = df.copy()
    torch = out[out["name"] == "torch"].set_index(["source", "shape"])["median_us"]
    key = list(zip(out["source"], out["shape"]))
    out["speedup_vs_torch"] = [float(torch.get(kk, math.nan)) / m if m else math.nan
                               for kk, m in zip(key, out["median_us"].astype(float))]
    out["MB_moved"] = out["bytes_moved"].astype(float) / 1e6
    columns = ["source", "name", "rows", "cols", "dtype", "k", "median_us", "p10_us", "p90_us", "bytes_moved",
               "MB_moved", "gbps", "speedup_vs_torch", "max_rel"]
    return out[[c for c in columns if c in out.columns]].reset_index(drop=True)


def topk_timing_figure(table: pd.DataFrame, title: str, stamp: str) -> go.Figure:
    """Median µs per launch with p10–p90 bars: fused, unfused and torch side by side, one group per source.

    Each bar is labelled with the bytes it moves and its speed-up against torch (same file, same shape)."""
    fig = go.Figure()
    for i, (source, part) in enumerate(table.groupby("source", sort=False)):
        order = [n for n in TOPK_NAMES if n in set(part["name"])]
        part = part.set_index("name").loc[order].reset_index()
        text = []
        for moved, speed in zip(part["MB_moved"], part["speedup_vs_torch"]):
            label = f"{moved:,.1f} MB"
            if np.isfinite(speed):
                label += f" · {speed:.2f}× torch"
            text.append(label)
        fig.add_trace(go.Bar(
            x=[TOPK_NAMES[n] for n in part["name"]], y=part["median_us"], name=source,
            marker_color=COLORS[i % len(COLORS)], marker_pattern_shape=["/" if n == "torch" else "" for n in part["name"]],
            text=text, textposition="outside",
            error_y=dict(type="data", symmetric=False, array=part["p90_us"] - part["median_us"],
                         arrayminus=part["median_us"] - part["p10_us"], thickness=1.5),
            hovertemplate="%{x}<br>median %{y:.2f} µs<br>%{text}<extra>" + str(source) + "</extra>"))
    fig.update_layout(barmode="group", showlegend=True)
    fig.update_yaxes(title_text="median time per launch (µs), bars p10–p90", rangemode="tozero")
    fig.update_xaxes(title_text="pipeline (hatched: the torch peer)")
    return finish(fig, title, stamp, height=480)

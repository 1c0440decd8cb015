"""The precision lab page: the online denominator's error against n, per accumulator, beside the seed's bound.

Pure figure builders first (records from explorer.precision in, plotly Figures out; testable without
Streamlit), then the cached computations, then the page and the bit-level view the step-through page
shows. Compute goes through explorer.precision, which calls explorer.softmax: the GPU kernels where a
GPU is usable, the emulator otherwise.
"""

from __future__ import annotations

import math
import re
import time

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

import explorer
from explorer import precision

from . import figures
from .common import guarded, header, remember_widgets, restore_widgets, stamp
from .state import (
    PREC_BLOCKS,
    PREC_CAP_GPU,
    PREC_EXPONENTS,
    PREC_STAG_DISTS,
    PREC_STAG_NS,
    PREC_STEP_CAPS,
    PRECISION_DEFAULTS,
)

ss = st.session_state
ACC_COLORS = {"float16": "#d62728", "bfloat16": "#9467bd", "float32": "#1f77b4"}
DIST_COLORS = {"decreasing": "#d62728", "increasing": "#2ca02c", "normal": "#1f77b4", "constant": "#ff7f0e"}
VARIANT_COLORS = {"online_thread": "#d62728", "online_warp": "#ff7f0e", "online_block": "#1f77b4",
                  "split_row": "#2ca02c"}
ERR_FLOOR = figures.ERR_FLOOR
OVERFLOW_Y = 100.0  # where an infinite error (d overflowed) is drawn on the error axes
QUANTITIES = {"d": "final denominator d_n", "out": "outputs (max over the row)"}
FP16_MAX = explorer.FORMATS["float16"].max_value


def _y(r: dict, quantity: str) -> float:
    v = r["d_rel_error"] if quantity == "d" else r["out_max_rel"]
    return v if math.isfinite(v) else math.nan


def _bound(r: dict, quantity: str, with_input: bool) -> float:
    """The seed's bound for a record: 3·k·u_acc (+ u_out for outputs), optionally with the input-rounding term."""
    u_out = explorer.FORMATS[r["dtype"]].unit_roundoff
    base = explorer.error_bound(r["sequential_terms"], r["acc"], r["dtype"],
                                r["max_abs_x"] if with_input and explorer.rounds_input(r["dtype"], r["acc"]) else 0.0)
    return base if quantity == "out" else base - u_out


def _pow2_axis(fig: go.Figure, title: str, row: int | None = None, col: int | None = None, high: int = 20) -> None:
    """A log x axis ticked at even powers of two, written 2^k."""
    ks = list(range(0, high + 1, 2))
    fig.update_xaxes(type="log", tickvals=[2**k for k in ks], ticktext=[f"2<sup>{k}</sup>" for k in ks],
                     title_text=title, row=row, col=col)


def _level(fig: go.Figure, y: float, text: str, color: str, dash: str = "dot", position: str = "left") -> None:
    """A horizontal line on a log y axis with its label (add_hline's own label lands at 10^y on log axes)."""
    fig.add_hline(y=y, line=dict(color=color, width=1.2, dash=dash))
    fig.add_annotation(text=text, xref="paper", x=0.0 if position == "left" else 1.0, y=math.log10(y), yref="y",
                       xanchor="left" if position == "left" else "right", yanchor="bottom", showarrow=False,
                       font=dict(size=11, color=color))


def _layout(fig: go.Figure, width_px: int = 450, subplot_titles: bool = False) -> go.Figure:
    """The title at the top, the legend left-aligned under it (never across the title, whatever the chart's
    width), subplot titles under the legend; the top margin sized for the rows the legend wraps into at
    about width_px of plot (entries flow in trace order, not stacked by group); the stamp under the x axis."""
    names = [t.name for t in fig.data if t.name and t.showlegend is not False]
    rows, used = 1, 0
    for name in names:
        w = 48 + 7 * len(re.sub(r"<[^>]+>", "", name))
        if used and used + w > width_px:
            rows, used = rows + 1, 0
        used += w
    lines = str(fig.layout.title.text or "").count("<br>") + 1
    title_px = 14 + 24 * lines
    legend_px = 21 * rows + 6
    extra = 30 if subplot_titles else 0
    top = title_px + legend_px + extra + 12
    fig.update_layout(title=dict(yref="container", y=1.0, yanchor="top", pad=dict(t=14)),
                      legend=dict(orientation="h", traceorder="normal", xanchor="left", x=0.0, yanchor="bottom",
                                  yref="container",
                                  y=1.0 - (title_px + legend_px) / fig.layout.height),
                      margin=dict(t=top, b=105))
    fig.update_annotations(selector=dict(name="stamp"), yshift=-50)
    return fig


def _error_axis(fig: go.Figure, quantity: str, row: int = 1, col: int = 1, title: bool = True) -> None:
    _pow2_axis(fig, "n (elements in the row)", row=row, col=col)
    fig.update_yaxes(type="log", exponentformat="power", range=[math.log10(ERR_FLOOR) - 0.3, math.log10(OVERFLOW_Y) + 0.4],
                     row=row, col=col, title_text=(
                         f"relative error of {'d_n' if quantity == 'd' else 'the outputs'}<br>"
                         f"<sup>exact: drawn at {ERR_FLOOR:g}; overflow (inf): at {OVERFLOW_Y:g}</sup>") if title else None)
    fig.add_hline(y=1.0, line=dict(color="#999", width=1, dash="dot"), row=row, col=col)


def _measured(fig, recs: list[dict], quantity: str, name: str, color: str, symbol: str = "circle",
              row: int = 1, col: int = 1, legendgroup: str | None = None, showlegend: bool = True) -> None:
    recs = sorted(recs, key=lambda r: r["n"])
    if not recs:
        return
    n = [r["n"] for r in recs]
    err = np.array([_y(r, quantity) for r in recs])
    over = np.array([r["overflow"] for r in recs])
    y = np.where(over, OVERFLOW_Y, np.maximum(np.nan_to_num(err, nan=ERR_FLOOR), ERR_FLOOR))
    text = ["d overflowed to inf" if o else f"{e:.3g}" for o, e in zip(over, err)]
    fig.add_trace(go.Scatter(
        x=n, y=y, mode="lines+markers", name=name, legendgroup=legendgroup or name, showlegend=showlegend,
        line=dict(color=color, width=2), marker=dict(color=color, size=7, symbol=np.where(over, "x", symbol).tolist()),
        customdata=np.array([[r["d"], r["exact_d"], _bound(r, quantity, True)] for r in recs]), text=text,
        hovertemplate=f"{name}<br>n = %{{x}}<br>relative error %{{text}}<br>d = %{{customdata[0]:.7g}} "
                      "(exact %{customdata[1]:.9g})<br>bound %{customdata[2]:.3g}<extra></extra>"),
        row=row, col=col)


def _bound_line(fig, recs: list[dict], quantity: str, name: str, color: str, dash: str = "dash",
                with_input: bool = False, row: int = 1, col: int = 1, showlegend: bool = True,
                legendgroup: str | None = None) -> None:
    """The bound where it is below 1 (a relative error bound of 1 or more says nothing)."""
    pts = sorted({r["n"]: _bound(r, quantity, with_input) for r in recs}.items())
    pts = [(n, b) for n, b in pts if b < 1]
    if not pts:
        return
    fig.add_trace(go.Scatter(x=[p[0] for p in pts], y=[p[1] for p in pts], mode="lines", name=name,
                             line=dict(color=color, width=1.5, dash=dash), showlegend=showlegend,
                             legendgroup=legendgroup or name, hovertemplate=f"{name}<br>n = %{{x}}<br>bound %{{y:.3g}}"
                                                                            "<extra></extra>"),
                  row=row, col=col)


def bound_label(quantity: str, dtype: str, variant: str) -> str:
    k = {"online_thread": "n", "online_warp": "⌈n/32⌉+5", "online_block": "⌈n/B⌉+log₂B"}.get(variant, "k")
    out = f" + u<sub>{_short(dtype)}</sub>" if quantity == "out" else ""
    return f"bound 3·({k})·u<sub>acc</sub>{out}"


def _short(acc: str) -> str:
    return {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}[acc]


def error_vs_n_figure(records: list[dict], variant: str, quantity: str, title: str, stamp_: str) -> go.Figure:
    """Measured error vs n, log-log, one panel per accumulator, a line per input class; the seed's bound dashed."""
    accs = [a for a in precision.ACCUMULATORS if any(r["acc"] == a and r["variant"] == variant for r in records)]
    accs = accs or list(precision.ACCUMULATORS)
    fig = make_subplots(rows=1, cols=len(accs), shared_yaxes=True, horizontal_spacing=0.03, subplot_titles=[
        f"accumulator {a} (u = 2<sup>-{explorer.FORMATS[a].significand_bits}</sup>)" for a in accs])
    dtype = next((r["dtype"] for r in records), "float32")
    for c, acc in enumerate(accs, start=1):
        recs = [r for r in records if r["acc"] == acc and r["variant"] == variant]
        for dist in precision.INPUT_CLASSES:
            _measured(fig, [r for r in recs if r["dist"] == dist], quantity, precision.INPUT_TITLES[dist],
                      DIST_COLORS[dist], col=c, showlegend=c == 1, legendgroup=dist)
        _bound_line(fig, recs, quantity, bound_label(quantity, dtype, variant), "#222", col=c, showlegend=c == 1,
                    legendgroup="bound")
        if any(explorer.rounds_input(r["dtype"], r["acc"]) for r in recs):
            worst = max(recs, key=lambda r: r["max_abs_x"])
            _bound_line(fig, [r for r in recs if r["dist"] == worst["dist"]], quantity,
                        "bound + 2·max|x|·u<sub>acc</sub> (x rounded into acc; largest |x| of the classes)", "#777",
                        dash="dot", with_input=True, col=c, showlegend=c == 1 or not any(
                            explorer.rounds_input(dtype, a) for a in accs[:c - 1]), legendgroup="bound_in")
        _error_axis(fig, quantity, col=c, title=c == 1)
    return _layout(figures.finish(fig, title, stamp_, height=600), width_px=820, subplot_titles=True)


def stagnation_figure(trajectories: list[dict], title: str, stamp_: str, max_points: int = 1500) -> go.Figure:
    """Traced d_j of one lane against the float64 d_j (log-log), per accumulator; the stagnation levels dotted."""
    fig = go.Figure()
    for t in trajectories:
        steps = t["steps"]
        pick = np.unique(np.geomspace(1, steps.size, min(max_points, steps.size)).astype(int) - 1)
        fig.add_trace(go.Scatter(x=steps[pick], y=t["d"][pick], mode="lines", name=f"kernel d_j, acc {t['acc']}",
                                 line=dict(color=ACC_COLORS[t["acc"]], width=2.5),
                                 hovertemplate=f"acc {t['acc']}<br>j = %{{x}}<br>d_j = %{{y:.7g}}<extra></extra>"))
        if t["stagnated_at"] is not None:
            j = t["stagnated_at"]
            fig.add_trace(go.Scatter(x=[j], y=[t["d"][j - 1]], mode="markers+text", showlegend=False,
                                     marker=dict(color=ACC_COLORS[t["acc"]], size=11, symbol="diamond"),
                                     text=[f"{t['acc']}: frozen at {t['d'][j - 1]:g} from j = {j}"],
                                     textposition="top left", hoverinfo="skip"))
    if trajectories:
        t = trajectories[0]
        pick = np.unique(np.geomspace(1, t["steps"].size, min(max_points, t["steps"].size)).astype(int) - 1)
        fig.add_trace(go.Scatter(x=t["steps"][pick], y=t["exact_d"][pick], mode="lines", name="exact d_j (float64)",
                                 line=dict(color="#222", width=1.5, dash="dash")))
    for acc, level in precision.STAGNATION.items():
        if acc != "float32" and any(t["acc"] == acc for t in trajectories):
            _level(fig, level, f"{level:g} = 2<sup>{int(math.log2(level))}</sup>: above it {acc} numbers are 2 apart",
                   ACC_COLORS[acc])
    top = max((float(np.nanmax(t["exact_d"])) for t in trajectories), default=10.0)
    _pow2_axis(fig, "j (elements the lane has folded)")
    fig.update_yaxes(type="log", exponentformat="power", title_text="running denominator d_j",
                     range=[-0.1, math.log10(top) + 0.3])
    return _layout(figures.finish(fig, title, stamp_, height=500))


def overflow_figure(records: list[dict], title: str, stamp_: str) -> go.Figure:
    """Final fp16 d vs n per variant on constant input (d_n = n exactly), with fp16's largest value."""
    fig = go.Figure()
    top = FP16_MAX * 4
    for variant, width, size in zip(precision.ONLINE_VARIANTS, (2, 7, 2.5), (9, 15, 8)):  # coinciding lines stay visible
        recs = sorted((r for r in records if r["variant"] == variant), key=lambda r: r["n"])
        if not recs:
            continue
        over = [r["overflow"] for r in recs]
        fig.add_trace(go.Scatter(
            x=[r["n"] for r in recs], y=[top if o else r["d"] for r, o in zip(recs, over)], mode="lines+markers",
            name=variant, line=dict(color=VARIANT_COLORS[variant], width=width), opacity=0.6 if width > 3 else 1.0,
            marker=dict(size=size, color=VARIANT_COLORS[variant], symbol=["x" if o else "circle" for o in over]),
            text=["inf (overflow)" if o else f"{r['d']:g}" for r, o in zip(recs, over)],
            hovertemplate=f"{variant}<br>n = %{{x}}<br>d = %{{text}}<extra></extra>"))
    ns = sorted({r["n"] for r in records})
    if ns:
        fig.add_trace(go.Scatter(x=ns, y=ns, mode="lines", name="exact d_n = n", line=dict(color="#222", dash="dash")))
    _level(fig, FP16_MAX, "65504: largest finite fp16", "#d62728")
    _level(fig, top, "× = inf: d overflowed", "#777", dash="solid")
    _level(fig, 2048, "2048: one lane's ceiling (stagnation)", "#555", position="right")
    _pow2_axis(fig, "n (elements in the row)")
    fig.update_yaxes(type="log", exponentformat="power", title_text="final d_n in fp16", range=[0.5, math.log10(top) + 0.4])
    return _layout(figures.finish(fig, title, stamp_, height=500))


def compare_figure(records: list[dict], key: str, quantity: str, title: str, stamp_: str) -> go.Figure:
    """Error vs n with one line per value of `key` ("acc" or "variant"), each with its own bound dashed."""
    colors = ACC_COLORS if key == "acc" else VARIANT_COLORS
    fig = make_subplots(rows=1, cols=1)
    for value, color in colors.items():
        recs = [r for r in records if r[key] == value]
        if not recs:
            continue
        _measured(fig, recs, quantity, value, color, legendgroup=value)
        _bound_line(fig, recs, quantity, f"{value}: bound", color, with_input=True, legendgroup=value)
    _error_axis(fig, quantity)
    return _layout(figures.finish(fig, title, stamp_, height=500))


# --- bits ------------------------------------------------------------------------------------------------

FIELD_STYLE = {"sign": ("#fbe3e3", "#d62728"), "exponent": ("#e1ecf7", "#1f77b4"),
               "mantissa": ("#e3f3df", "#2ca02c")}  # (background, colour of a 1)
MAX_ALIGN_COLUMNS = 44
_CELL = "padding:1px 3px;text-align:center;font-family:monospace;font-size:13px;"


def _fields_row(label: str, b: dict) -> str:
    cells = []
    for field in ("sign", "exponent", "mantissa"):
        bg, one = FIELD_STYLE[field]
        for i, ch in enumerate(b[field]):
            sep = "border-left:2px solid #555;" if i == 0 and field != "sign" else ""
            weight = f"color:{one};font-weight:700;" if ch == "1" else "color:#999;"
            cells.append(f'<td style="{_CELL}background:{bg};{weight}{sep}">{ch}</td>')
    if b["kind"] in ("normal", "subnormal"):
        lead = "1" if b["kind"] == "normal" else "0"
        meaning = (f"(−1)<sup>{b['sign']}</sup> · 2<sup>{b['exponent_value']}</sup> · "
                   f"{lead}.{b['mantissa']}<sub>2</sub>")
    else:
        meaning = b["kind"]
    return (f'<tr><td style="{_CELL}text-align:right;font-family:sans-serif;white-space:nowrap">{label}</td>'
            f'<td style="{_CELL}text-align:right">{b["value"]:.7g}</td>{"".join(cells)}'
            f'<td style="{_CELL}text-align:left;white-space:nowrap">{meaning}</td></tr>')


def bits_html(parts: dict, acc: str, prev_d: float, exact_d: float) -> str:
    """d_{j-1}, the rescaled d_{j-1}, the term and d_j: their sign / exponent / mantissa fields in the
    accumulator's format; then the same numbers in binary, aligned at the binary point, with the places
    below d_j's last place in the accumulator (the bits the rounding drops) greyed."""
    fields = {"d<sub>j−1</sub>": prev_d, "d<sub>j−1</sub>·rescale": parts["product"],
              "term e<sup>x<sub>j</sub>−m<sub>j</sub></sup>": parts["term"], "d<sub>j</sub> (kernel)": parts["d"]}
    bits = {label: precision.float_bits(v, acc) for label, v in fields.items()}
    e_bits = precision.EXPONENT_BITS[acc]
    m_bits = next(iter(bits.values()))["mantissa_bits"]
    head = (f'<tr><td></td><td style="{_CELL}">value</td><td colspan="1" style="{_CELL}color:#d62728">s</td>'
            f'<td colspan="{e_bits}" style="{_CELL}color:#1f77b4">exponent ({e_bits} bits)</td>'
            f'<td colspan="{m_bits}" style="{_CELL}color:#2ca02c">mantissa ({m_bits} bits)</td><td></td></tr>')
    table1 = ('<table style="border-collapse:separate;border-spacing:1px;margin-bottom:10px">' + head
              + "".join(_fields_row(label, b) for label, b in bits.items()) + "</table>")

    aligned = {"d<sub>j−1</sub>·rescale": parts["product"], "+ term": parts["term"],
               "= exact sum": parts["sum"], f"d<sub>j</sub> rounded to {acc}": parts["d"],
               "exact d<sub>j</sub> (float64)": exact_d}
    finite = [abs(v) for v in aligned.values() if math.isfinite(v) and v != 0]
    ulp_k = precision.ulp_exponent(parts["d"], acc)
    high = math.floor(math.log2(max(finite))) if finite else 0
    keep = ulp_k if ulp_k is not None else high - explorer.FORMATS[acc].significand_bits + 1
    low = max(min(keep - 8, high - 1), high - MAX_ALIGN_COLUMNS + 1)
    places = list(range(high, low - 1, -1))
    table = precision.aligned_bits(aligned, high, low)
    rows = []
    for (label, v), row in zip(aligned.items(), table.values()):
        cells = []
        for k, b in zip(places, row):
            lost = k < keep
            bg = "#e6e6e6" if lost else "#f4f9f3"
            cut = "border-left:2px solid #d62728;" if k == keep - 1 else ""
            color = ("color:#777;" if lost else "color:#2ca02c;") + ("font-weight:700;" if b == 1 else "")
            cells.append(f'<td style="{_CELL}background:{bg};{color}{cut}">{"" if b is None else b}</td>'
                         + (f'<td style="{_CELL}font-weight:700">.</td>' if k == 0 and low < 0 else ""))
        rows.append(f'<tr><td style="{_CELL}text-align:right;font-family:sans-serif;white-space:nowrap">{label}</td>'
                    f'<td style="{_CELL}text-align:right">{v:.9g}</td>{"".join(cells)}</tr>')
    hdr_dot = "".join(f'<td style="{_CELL}font-size:10px;color:#777">{k if k % 4 == 0 or k == keep else ""}</td>'
                      + (f'<td style="{_CELL}"></td>' if k == 0 and low < 0 else "") for k in places)
    table2 = ('<table style="border-collapse:separate;border-spacing:1px">'
              f'<tr><td style="{_CELL}font-size:10px;color:#777;text-align:right">place k of 2<sup>k</sup></td>'
              f'<td></td>{hdr_dot}</tr>' + "".join(rows) + "</table>")
    caption = (f'<div style="font-size:12px;color:#555;margin:4px 0 8px 0">Aligned at the binary point: '
               f'places left of the red line are kept by {acc} at this size (its last place is '
               f'2<sup>{keep}</sup>); grey places are rounded away.</div>')
    return '<div style="overflow-x:auto">' + table1 + caption + table2 + "</div>"


# --- cached computations -----------------------------------------------------------------------------------

@st.cache_data(show_spinner=False, max_entries=8192)
def _point(variant: str, acc: str, dist: str, n: int, dtype: str, block: int | None, backend: str) -> dict:
    return precision.measure(variant, acc, dist, n, backend=backend, dtype=dtype, block_size=block)


@st.cache_data(show_spinner=False, max_entries=64)
def _trajectory(variant: str, acc: str, dist: str, n: int, dtype: str, backend: str) -> dict:
    return precision.d_trajectory(variant, acc, dist, n, backend=backend, dtype=dtype)


def run_points(points: list[tuple], dtype: str, block: int, backend: str) -> list[dict]:
    """Every (variant, acc, dist, n) point, cached one by one, under a progress bar."""
    bar = st.progress(0.0, text="Measuring…")
    out, start = [], time.perf_counter()
    for i, (v, a, d, n) in enumerate(points):
        if i % 8 == 0:
            bar.progress(i / max(len(points), 1), text=f"Measuring {v}, acc {a}, {d}, n = {n:,} "
                                                       f"({i + 1} of {len(points)})…")
        out.append(_point(v, a, d, n, dtype, block if explorer.VARIANTS[v].takes_block_size else None, backend))
    bar.empty()
    ss["_prec_seconds"] = time.perf_counter() - start
    return out


# --- the page --------------------------------------------------------------------------------------------

EXPONENTS = list(PREC_EXPONENTS)  # n = 2^4 .. 2^20
EMULATOR_STEP_CAPS = list(PREC_STEP_CAPS)
GPU_STEP_CAP = PREC_CAP_GPU
DEFAULTS = PRECISION_DEFAULTS  # ui.state: the same keys are URL parameters


def _restore(backend: str) -> None:
    restore_widgets({**DEFAULTS, "prec_cap": GPU_STEP_CAP if backend == "cuda" else DEFAULTS["prec_cap"]})


def _remember() -> None:
    remember_widgets(DEFAULTS)


def _chart(fig: go.Figure, name: str, key: str) -> None:
    st.plotly_chart(fig, config=figures.chart_config(f"softmax_precision_{name}"), key=key, width="stretch",
                    theme=None)


def _pow2(k: int) -> str:
    return f"2^{k} = {2**k:,}"


def records_frame(records: list[dict]) -> pd.DataFrame:
    cols = ["variant", "acc", "dist", "n", "dtype", "backend", "d", "exact_d", "d_rel_error", "d_bound",
            "out_max_rel", "bound", "bound_applies", "overflow", "stagnated_at", "sequential_terms", "seconds"]
    return pd.DataFrame(records, columns=cols)


INTRO = r"""
The second seed's analysis of the online denominator: each step of
$d_j = d_{j-1}\,e^{m_{j-1}-m_j} + e^{x_j-m_j}$ rounds a product, a term and a sum, so after $n$ steps
$|\hat d_n - d_n| / d_n \lesssim 3\,n\,u_{acc}$ (fp16: $u = 2^{-11}$, bf16: $2^{-8}$, fp32: $2^{-24}$);
an output adds one rounding to its own type, $+\,u_{out}$. The bound is worst for **monotone decreasing** input,
where the rescale factor is always 1 and every error passes on undamped. Keeping $d$ in fp32 and rounding only the
output to fp16 gives $3\,n\,u_{32} + u_{16}$: the case for mixed precision that flash attention makes.
Below, the kernels run on rows of $n$ elements of four input classes with $m$, $d$ kept in each accumulator, and
their $d_n$ and outputs are compared with float64. For warp and block variants $n$ in the bound is the number of
terms **one accumulator folds in sequence**: $\lceil n/32\rceil + 5$ (warp), $\lceil n/B\rceil + \log_2 B$ (block).
Where $x$ itself is rounded into a narrower accumulator, $x$ and $m$ each carry $|x|\,u_{acc}$ into the exponent,
adding $2\max|x|\,u_{acc}$ (`explorer.error_bound`).
"""

TEXT_STAGNATION = """
**Stagnation: what the bound does not say.** The bound is a first-order estimate; it grows past 1 (and
says nothing) long before the worst happens. Every term $e^{{x_j-m_j}}$ is at most 1. Once fp16's $d$ reaches
$2048 = 2^{{11}}$, neighbouring fp16 numbers are 2 apart, and $2048 + 1$ is a tie that rounds back to the even
2048: every further term rounds away entirely and $d$ freezes while the exact sum keeps growing (a term below
0.5 is already lost from 1024 on, where the spacing is 1). bf16 freezes at $256 = 2^8$; fp32 only at $2^{{24}}$.
With a constant row (every term exactly 1) the traced $d_j$ is exact up to 2048 and then flat: a row of
n = {n:,} ends with $d = 2048$ instead of {n:,}, and every output is {ratio:g}× too large.
"""

TEXT_OVERFLOW = """
**Overflow past 65504.** fp16's largest finite value is 65504, so a row whose true $d$ exceeds it cannot be held.
Yet **one thread never overflows**: with terms $\\le 1$ its $d$ stagnates at 2048 first, so a thread-per-row fp16
$d$ is wrong but finite. The merge trees of the warp and block variants add *partial* sums, each below the 2048
ceiling, and those sums do reach past 65504: on a constant row the warp variant's 32 lanes each hold
min(n/32, 2048), and their butterfly overflows to inf at n = 2^16 (32 · 2048 = 65536); the block variant
overflows as soon as the true $d$ passes 65504. With $d = \\infty$ every output is $e^0/\\infty = 0$.
"""

TEXT_BF16 = """
**bf16's far coarser u.** bfloat16 keeps fp32's 8 exponent bits (so $d$ never overflows) but only 8 significand
bits: $u = 2^{-8}$, 8× fp16's $2^{-11}$ and $65536$× fp32's. Its bound reaches 1 at $n \\approx 85$ for one thread,
and its $d$ freezes at 256. bf16 is a format for storing activations, not for accumulating a sum: the kernels
that use it for $x$ and $y$ should (and flash attention does) keep $m$ and $d$ in fp32.
"""

TEXT_TREE = """
**Warp and block variants: shorter sums.** A warp variant splits the row into 32 strided partial sums of
$\\lceil n/32 \\rceil$ terms and merges them in a 5-level butterfly; a block of $B$ threads folds $\\lceil n/B\\rceil$
terms per thread and merges in $\\log_2 B$ levels. Rounding errors grow with the length of the *sequential* chain,
so the bound drops from $3nu$ to $3(\\lceil n/32 \\rceil + 5)u$ or $3(\\lceil n/B\\rceil + \\log_2 B)u$, and each
partial sum stays small enough to stay clear of stagnation for longer. The measured error follows: for the same
row and accumulator the block variant is often orders of magnitude more accurate than one thread per row. Pairwise
summation, from the parallel shape for free.
"""


@guarded
def precision_page() -> None:
    header("Precision lab", None)
    backend = explorer.resolve_backend("auto")
    on_gpu = backend == "cuda"
    _restore(backend)
    st.markdown(INTRO)

    c1, c2, c3, c4 = st.columns([3, 2, 2, 2])
    c1.select_slider("Largest n (rows of 2^4, 2^5, … elements up to this)", EXPONENTS, key="prec_max",
                     format_func=_pow2)
    c2.selectbox("Input and output type", list(explorer.DTYPES), key="prec_dtype",
                 help="float16 with the float32 accumulator is the mixed-precision case: bound 3·n·u32 + u16.")
    c3.select_slider("Block size B (online_block)", list(PREC_BLOCKS), key="prec_block")
    c4.select_slider("Steps per lane at most", EMULATOR_STEP_CAPS, key="prec_cap", format_func=lambda v: f"{v:,}",
                     help="Every run is traced, and its float64 replay walks a lane's steps in a Python loop "
                          "(about 15 µs a step; the emulator's own fold about 25 µs more), so online_thread at "
                          "n = 2^20 costs ~15 s a point even on the GPU and ~40 s on the emulator. Points above this "
                          "cap are left out here; explorer.precision.sweep has no cap.")
    cap = int(ss["prec_cap"])
    st.multiselect("Variants", list(precision.ONLINE_VARIANTS), key="prec_variants",
                   format_func=lambda k: f"{k} — {explorer.VARIANTS[k].title}")
    variants = [v for v in ss["prec_variants"] if v in precision.ONLINE_VARIANTS]
    if not variants:
        st.info("Select at least one variant.", icon=":material/checklist:")
        _remember()
        return
    ns = precision.powers_of_two(EXPONENTS[0], int(ss["prec_max"]))
    dtype, block = ss["prec_dtype"], int(ss["prec_block"])
    points = [(v, a, d, n) for v in variants for a in precision.ACCUMULATORS for d in precision.INPUT_CLASSES
              for n in ns if precision.lane_steps(v, n, block) <= cap]
    left_out = {v: max((n for n in ns if precision.lane_steps(v, n, block) <= cap), default=None) for v in variants}
    if any(m != ns[-1] for m in left_out.values()):
        st.info(("GPU" if on_gpu else "CPU emulation") + ": " + "; ".join(
            f"{v} up to n = {m:,}" if m else f"{v}: no n within the cap" for v, m in left_out.items())
                + f" (at most {cap:,} steps per lane). Raise the cap to go further, at "
                + ("~15" if on_gpu else "~40") + " µs a step per point.",
                icon=":material/speed:")
    records = run_points(points, dtype, block, backend)
    if not records:
        _remember()
        return
    src = "the GPU kernels" if on_gpu else "the CPU emulation of the kernels"
    st.caption(f"{len(records)} runs of {src} ({ss.get('_prec_seconds', 0):.1f} s, cached); each a 1 × n row, seed 0, "
               f"traced for its final d.")

    # 1. error vs n --------------------------------------------------------------------------------------------
    st.subheader("Measured error vs n, with the seed's bound")
    c1, c2 = st.columns(2)
    c1.radio("Error of", list(QUANTITIES), key="prec_quantity", format_func=QUANTITIES.get, horizontal=True)
    if ss.get("prec_variant") not in variants:
        ss["prec_variant"] = variants[0]
    c2.selectbox("Variant", variants, key="prec_variant")
    quantity, variant = ss["prec_quantity"], ss["prec_variant"]
    fig = error_vs_n_figure(records, variant, quantity,
                            f"{variant}: relative error of {QUANTITIES[quantity]} vs float64, {dtype} in and out",
                            stamp())
    _chart(fig, f"error_vs_n_{variant}_{quantity}_{dtype}", "chart_prec_main")
    applies = [r for r in records if r["bound_applies"]]
    within = sum(r["d_rel_error"] <= r["d_bound"] and r["out_max_rel"] <= r["bound"] for r in applies)
    st.caption(f"Dashed: the seed's bound, drawn while below 1. Where it is below 1, {within} of {len(applies)} "
               "measured points lie within it (d and outputs, input-rounding term included). Zero errors sit on the "
               "floor; × marks d = inf.")
    df = records_frame(records)
    with st.expander(f"Every measurement ({len(df)} runs)"):
        st.dataframe(df, width="stretch", hide_index=True, key="table_prec")
        st.download_button("Download table (CSV)", df.to_csv(index=False).encode(),
                           file_name=f"softmax_precision_{dtype}.csv", mime="text/csv", key="csv_prec",
                           icon=":material/download:", on_click="ignore")

    # 2. stagnation ------------------------------------------------------------------------------------------
    st.subheader("fp16 stagnation: the traced d_j flattens")
    left, right = st.columns([3, 2])
    with right:
        st.radio("Input", list(PREC_STAG_DISTS), key="prec_stag_dist", horizontal=True,
                 format_func=precision.INPUT_TITLES.get)
        caps = [n for n in PREC_STAG_NS if n <= max(cap, 2**13)]
        if ss.get("prec_stag_n") not in caps:
            ss["prec_stag_n"] = caps[min(2, len(caps) - 1)]
        st.select_slider("n", caps, key="prec_stag_n", format_func=lambda v: f"{v:,}")
        n_stag = int(ss["prec_stag_n"])
        st.markdown(TEXT_STAGNATION.format(n=n_stag, ratio=n_stag / 2048))
    with left:
        with st.spinner("Tracing online_thread…"):
            trajectories = [_trajectory("online_thread", a, ss["prec_stag_dist"], n_stag, dtype, backend)
                            for a in precision.ACCUMULATORS]
        _chart(stagnation_figure(trajectories, f"online_thread, {precision.INPUT_TITLES[ss['prec_stag_dist']]} row "
                                               f"of {n_stag:,}: traced d_j per accumulator", stamp()),
               "stagnation", "chart_prec_stag")
        frozen = [f"{t['acc']} at d = {t['d'][t['stagnated_at'] - 1]:g} from j = {t['stagnated_at']:,}"
                  for t in trajectories if t["stagnated_at"] is not None]
        st.caption("Frozen: " + ("; ".join(frozen) if frozen else "none at this n") + ".")

    # 3. overflow --------------------------------------------------------------------------------------------
    st.subheader("fp16 overflow of d beyond 65504")
    left, right = st.columns([3, 2])
    with right:
        st.markdown(TEXT_OVERFLOW)
    with left:
        recs = [r for r in records if r["acc"] == "float16" and r["dist"] == "constant"]
        _chart(overflow_figure(recs, "final d_n in fp16 on a constant row (exact d_n = n)", stamp()), "overflow",
               "chart_prec_overflow")
        first = {v: min((r["n"] for r in recs if r["variant"] == v and r["overflow"]), default=None) for v in variants}
        st.caption("First overflow: " + "; ".join(f"{v}: n = {m:,}" if m else f"{v}: none up to the largest n run"
                                                  for v, m in first.items()) + ".")

    # 4. bf16 ------------------------------------------------------------------------------------------------
    st.subheader("bf16's coarser unit roundoff")
    left, right = st.columns([3, 2])
    with right:
        st.markdown(TEXT_BF16)
    with left:
        recs = [r for r in records if r["variant"] == variant and r["dist"] == "decreasing"]
        _chart(compare_figure(recs, "acc", quantity, f"{variant}, monotone decreasing row:<br>error of "
                                                     f"{QUANTITIES[quantity]} per accumulator, bounds dashed", stamp()),
               "bf16", "chart_prec_bf16")

    # 5. warp / block vs thread ------------------------------------------------------------------------------
    st.subheader("Warp and block variants cut the error")
    left, right = st.columns([3, 2])
    with right:
        st.selectbox("Accumulator", list(precision.ACCUMULATORS), key="prec_cmp_acc")
        st.selectbox("Input", list(precision.INPUT_CLASSES), key="prec_cmp_dist", format_func=precision.INPUT_TITLES.get)
        st.markdown(TEXT_TREE)
    with left:
        acc, dist = ss["prec_cmp_acc"], ss["prec_cmp_dist"]
        recs = [r for r in records if r["acc"] == acc and r["dist"] == dist]
        _chart(compare_figure(recs, "variant", quantity, f"{precision.INPUT_TITLES[dist]} row, acc {acc}:<br>error of "
                                                         f"{QUANTITIES[quantity]} per variant, bounds dashed", stamp()),
               "variants", "chart_prec_tree")
    _remember()


def bits_section(trace, lane: int, step: int) -> None:
    """The bit-level view of the traced d_j at the current step, for the step-through page."""
    n = figures.step_numbers(trace, lane, step)
    if not math.isfinite(n["x"]):
        return
    if trace.kind == "safe":
        prev_m = m = n["row_max"]
    else:
        prev_m, m = n["prev_m"], n["m"]
    parts = precision.update_parts(prev_m, n["prev_d"], m, n["x"], trace.acc)
    st.subheader(f"The bits of d_j at step {step}, in {trace.acc}")
    st.markdown(bits_html(parts, trace.acc, n["prev_d"], n["exact_d"]), unsafe_allow_html=True)
    same = parts["d"] == n["d"] or (math.isnan(parts["d"]) and math.isnan(n["d"]))
    lost = parts["sum"] - parts["d"]
    note = (f"The kernel adds {parts['product']:.9g} and {parts['term']:.9g}; the exact sum {parts['sum']:.9g} needs "
            f"bits below d_j's last {trace.acc} place, and rounding to {trace.acc} gives {parts['d']:.9g} "
            f"(lost {lost:+.3g}).")
    if parts["term"] != 0 and parts["d"] == parts["product"]:
        note += " The whole term rounded away: d did not move (stagnation)."
    if not same:
        note += (f" (The product and term are recomputed in the accumulator model of kernels/common.cuh; the traced "
                 f"d_j is {n['d']:.9g}, one of expf's last-place differences on the GPU.)")
    st.caption(note)

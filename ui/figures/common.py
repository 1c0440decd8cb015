"""What every figure shares: colours, the stamp, the layout, and the strip that marks non-finite values.

Every figure carries a title with units, a legend, and a stamp (GPU or CPU emulation, CUDA, CuPy,
date) so a screenshot or a PNG download says where its numbers came from.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2",
          "#7f7f7f", "#bcbd22"]
REF_COLOR = "#222222"
EXACT_COLOR = "#ff7f0e"
KERNEL_COLOR = "#1f77b4"
ERR_FLOOR = 1e-10  # an exact value (error 0) is drawn here on log axes, and the axis title says so
SYMBOLS = ["circle-open", "square-open", "diamond-open", "cross-thin-open", "x-thin-open", "triangle-up-open",
           "star-open", "hexagon-open"]
GL_POINTS = 5000  # above this many points per trace, use WebGL traces
FONT = dict(size=13)


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


def scatter_type(n: int):
    return go.Scattergl if n > GL_POINTS else go.Scatter


def format_value(v: float) -> str:
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


def strip(fig: go.Figure, series: dict[str, np.ndarray], log: bool, row: int, colors: dict[str, str]) -> int:
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
            fig.add_trace(scatter_type(idx.size)(
                x=idx, y=[name] * idx.size, mode="markers", name=f"{name}: {kind} ({idx.size})",
                marker=dict(symbol=MARK_SYMBOLS[kind], size=9, color=colors.get(name, REF_COLOR)),
                hovertemplate=f"{name}<br>element %{{x}}: {kind}<extra></extra>"), row=row, col=1)
    fig.update_yaxes(type="category", categoryorder="array", categoryarray=list(series), row=row, col=1,
                     title_text="", tickfont=dict(size=11), dtick=1, showgrid=True)
    return count

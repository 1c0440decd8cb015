"""The Outputs and Error pages' figures: one row per variant beside the float64 reference, non-finite values
marked in a strip under the plot."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.numerics import ErrorReport

from .common import COLORS, ERR_FLOOR, REF_COLOR, SYMBOLS, finish, scatter_type, strip


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
        fig.add_trace(scatter_type(n)(x=j, y=np.where(np.isfinite(y64), y64, np.nan), mode="markers", name=name,
                                  marker=dict(size=max(11 - 1.5 * i, 4), color=colors[name], opacity=0.85,
                                              symbol=SYMBOLS[i % len(SYMBOLS)], line=dict(width=1.2, color=colors[name])),
                                  hovertemplate=f"{name}<br>element %{{x}}<br>p = %{{y:.7g}}<extra></extra>"),
                      row=1, col=1)
    fig.add_trace(scatter_type(n)(x=j, y=np.where(np.isfinite(ref_row), ref_row, np.nan), mode="lines",
                              name="float64 reference", line=dict(color=REF_COLOR, width=1.5),
                              hovertemplate="reference<br>element %{x}<br>p = %{y:.10g}<extra></extra>"),
                  row=1, col=1)
    marked = strip(fig, {"float64 reference": ref_row, **outputs}, log, 2, colors)
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
        fig.add_trace(scatter_type(n)(x=j, y=np.maximum(rel, ERR_FLOOR), mode="markers", name=name,
                                  marker=dict(size=7, color=colors[name], opacity=0.8, symbol=SYMBOLS[i % len(SYMBOLS)],
                                              line=dict(width=1, color=colors[name])),
                                  customdata=rel,
                                  hovertemplate=f"{name}<br>element %{{x}}<br>rel. error %{{customdata:.3g}}"
                                                "<extra></extra>"),
                      row=1, col=1)
        y64 = np.asarray(y, dtype=np.float64)
        bad = (np.isnan(y64) != np.isnan(ref_row)) | (np.isinf(y64) != np.isinf(ref_row))
        mismatch[name] = np.where(bad, y64, 1.0)  # only the mismatching elements are non-finite here
    marked = strip(fig, mismatch, False, 2, colors)
    fig.update_yaxes(type="log", exponentformat="power", row=1, col=1,
                     title_text=f"relative error |y − ref| / ref<br><sup>exact results drawn at {ERR_FLOOR:g}</sup>")
    fig.update_xaxes(title_text="element j of the row", row=2, col=1)
    if not marked:
        fig.add_annotation(text="no NaN / inf where the reference is finite (or the other way round)",
                           xref="x2 domain", yref="y2 domain", x=0.5, y=0.5, showarrow=False,
                           font=dict(color="#777"))
    return finish(fig, title, stamp, height=height)


def error_table(reports: dict[str, ErrorReport]) -> pd.DataFrame:
    """One row per variant from its ErrorReport."""
    columns = {"max_rel": "max rel", "mean_rel": "mean rel", "max_ulp": "max ULP", "max_abs": "max abs",
               "row_sum_dev": "max |Σ−1|", "nan_count": "NaN", "inf_count": "inf",
               "nonfinite_mismatch": "NaN/inf ≠ ref", "argmax_agreement": "argmax agree"}
    df = pd.DataFrame.from_dict({k: dataclasses.asdict(r) for k, r in reports.items()}, orient="index")
    df = df[[c for c in columns if c in df.columns]].rename(columns=columns)
    df.index.name = "variant"
    return df

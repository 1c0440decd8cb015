"""The Outputs and Error pages' figures: one row per variant beside the float64 reference, non-finite values
marked in a strip under the plot."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.numerics import FORMATS, ErrorReport, Format, dtype_name, flushed_by_ftz, ulp

from .common import (
    COLORS,
    ERR_FLOOR,
    REF_COLOR,
    SYMBOLS,
    envelope_index,
    finish,
    finite_or_nan,
    integer_ticks,
    legend_right,
    log_ticks,
    note_above,
    note_inside,
    scatter_type,
    stamp_below,
    strip,
    thin_marks,
)


def _strip_rows(series: int, main_px: int = 400) -> tuple[list[float], int]:
    """Row heights and figure height so the strip gives every series a readable line."""
    strip_px = 24 * series + 16
    return [main_px / (main_px + strip_px), strip_px / (main_px + strip_px)], main_px + strip_px + 200


def _format(y: np.ndarray) -> Format | None:
    """The output's number format (None for a type the kernels do not write, such as float64)."""
    try:
        return FORMATS[dtype_name(y.dtype)]
    except ValueError:
        return None


def relative_error(out_row: np.ndarray, ref_row: np.ndarray) -> np.ndarray:
    """|y − ref| / max(|ref|, smallest normal of y's type), as explorer.errors defines it (NaN where either is
    not finite)."""
    y = np.asarray(out_row)
    fmt = _format(y)
    tiny = fmt.smallest_normal if fmt is not None else np.finfo(np.float64).tiny
    y64, r = y.astype(np.float64), np.asarray(ref_row, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.abs(y64 - r) / np.maximum(np.abs(r), tiny)
    return np.where(np.isfinite(y64) & np.isfinite(r), rel, np.nan)


def deviation(out_row: np.ndarray, ref_row: np.ndarray) -> tuple[np.ndarray, str]:
    """(y − ref) in units in the last place of y's type at the reference value, and the unit's name; relative
    for a type without a format."""
    y = np.asarray(out_row)
    fmt = _format(y)
    y64, r = y.astype(np.float64), np.asarray(ref_row, dtype=np.float64)
    both = np.isfinite(y64) & np.isfinite(r)
    with np.errstate(invalid="ignore", divide="ignore"):
        if fmt is None:
            return np.where(both, (y64 - r) / np.abs(r), np.nan), "relative"
        return np.where(both, (y64 - r) / ulp(np.where(both, r, 1.0), fmt), np.nan), f"ulp of {fmt.name}"


def equal_groups(outputs: dict[str, np.ndarray]) -> list[list[str]]:
    """The variants, grouped where their rows are bitwise equal (in the order given)."""
    groups: dict[bytes, list[str]] = {}
    for name, y in outputs.items():
        groups.setdefault(np.asarray(y).tobytes() + str(np.asarray(y).dtype).encode(), []).append(name)
    return list(groups.values())


def _same_outputs(outputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """One row per group of equal rows, named by its first variant ("a +2" for three equal rows)."""
    return {
        names[0] + (f" +{len(names) - 1}" if len(names) > 1 else ""): outputs[names[0]]
        for names in equal_groups(outputs)
    }


def _mark_row(
    fig: go.Figure, series: dict[str, np.ndarray], log: bool, colors: dict[str, str], row: int, empty: str
) -> None:
    """The strip of non-finite marks in the figure's last row, or the words for none."""
    if not strip(fig, series, log, row, colors):
        note_inside(fig, empty, str(row), "#777")


def outputs_figure(ref_row: np.ndarray, outputs: dict[str, np.ndarray], log: bool, title: str, stamp: str) -> go.Figure:
    """The chosen row's float64 reference, and each variant's deviation from it (in ulps of its type), variants
    with equal rows drawn once ("a +2": a and two more, see equal_groups); NaN and ±inf (and zeros on a log axis) are marked in a strip under the plots.
    Long rows are drawn as an envelope (at most ~10k points a series, extremes and the argmax kept)."""
    groups = _same_outputs(outputs)
    heights, _ = _strip_rows(len(groups) + 1)
    strip_share = heights[1] * 0.8
    fig = make_subplots(
        rows=3,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.05,
        row_heights=[(1 - strip_share) * 0.55, (1 - strip_share) * 0.45, strip_share],
    )
    colors = {name: COLORS[i % len(COLORS)] for i, name in enumerate(groups)}
    colors["float64 reference"] = REF_COLOR
    ref = np.asarray(ref_row, dtype=np.float64)
    _add_reference(fig, ref)
    unit = _add_deviations(fig, ref, groups, colors)
    _mark_row(
        fig,
        {"float64 reference": ref, **groups},
        log,
        colors,
        3,
        "no NaN / inf" + (" / zero" if log else "") + " outputs",
    )
    note_above(
        fig, "marked: NaN ×, +inf ▲, −inf ▼" + (", 0 ○ (off the log axis)" if log else ""), "x3 domain", "y3 domain"
    )
    _note_empty_plots(fig)
    _outputs_axes(fig, ref, log, unit)
    return stamp_below(legend_right(finish(fig, title, stamp, height=560 + 24 * (len(groups) + 1))))


def _add_reference(fig: go.Figure, ref: np.ndarray) -> None:
    """Row 1: the float64 reference (an envelope of a long row)."""
    keep = envelope_index(ref)
    fig.add_trace(
        scatter_type(keep.size)(
            x=keep,
            y=finite_or_nan(ref)[keep],
            mode="lines+markers" if keep.size <= 200 else "lines",
            name="float64 reference",
            line=dict(color=REF_COLOR, width=1.5),
            marker=dict(size=4),
            hovertemplate="reference<br>element %{x}<br>p = %{y:.10g}<extra></extra>",
        ),
        row=1,
        col=1,
    )


def _add_deviations(fig: go.Figure, ref: np.ndarray, groups: dict[str, np.ndarray], colors: dict[str, str]) -> str:
    """Row 2: each group's deviation from the reference (an envelope of a long row); returns the unit, the last
    group's ("ulp" for none)."""
    unit = "ulp"
    for i, (name, y) in enumerate(groups.items()):
        dev, unit = deviation(y, ref)
        idx = envelope_index(dev)
        fig.add_trace(
            scatter_type(idx.size)(
                x=idx,
                y=dev[idx],
                mode="markers",
                name=name,
                marker=dict(
                    size=6, color=colors[name], symbol=SYMBOLS[i % len(SYMBOLS)], opacity=0.75, line=dict(width=1.2)
                ),
                hovertemplate=f"{name}<br>element %{{x}}<br>%{{y:.3g}} {unit}<extra></extra>",
            ),
            row=2,
            col=1,
        )
    return unit


def _note_empty_plots(fig: go.Figure) -> None:
    """Words inside rows 1 and 2 where they have no finite point to draw."""
    empty = {
        "": "no finite reference value in this row: its NaNs are marked below",
        "2": "no element where an output and the reference are both finite",
    }
    for axis, text in empty.items():
        if not any(np.isfinite(np.asarray(t.y, dtype=np.float64)).any() for t in fig.data if t.yaxis == f"y{axis}"):
            note_inside(fig, text, axis, "#b22222")


def _outputs_axes(fig: go.Figure, ref: np.ndarray, log: bool, unit: str) -> None:
    fig.update_yaxes(
        type="log" if log else "linear",
        title_text="p (float64)" + (", log" if log else ""),
        exponentformat="power",
        row=1,
        col=1,
    )
    if log:
        log_ticks(fig, ref, row=1, col=1)
    fig.update_yaxes(title_text=f"y − ref ({unit})", zeroline=True, zerolinecolor="#999", row=2, col=1)
    fig.update_xaxes(title_text="element j of the row", row=3, col=1)
    integer_ticks(fig, ref.size)  # element 0.5 of a short row means nothing


def error_figure(
    ref_row: np.ndarray, outputs: dict[str, np.ndarray], title: str, stamp: str, bounds: dict[str, float] | None = None
) -> go.Figure:
    """Per-element relative error of each variant on one row (log axis, explorer.errors' definition), each
    variant's bound as a dashed line (a bound ≥ 1 says nothing and is marked vacuous), the points above their
    bound ringed, every output the GPU's -ftz flushed to 0 crossed, and non-finite mismatches marked in a strip.
    Long rows are drawn as an envelope."""
    bounds = bounds or {}
    heights, height = _strip_rows(len(outputs))
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=heights, vertical_spacing=0.06)
    colors = {name: COLORS[i % len(COLORS)] for i, name in enumerate(outputs)}
    ref = np.asarray(ref_row, dtype=np.float64)
    mismatch, vacuous, drawn, measured = {}, [], [], False  # drawn: the extremes on the log axis
    for i, (name, y) in enumerate(outputs.items()):
        bound = bounds.get(name)
        rel = relative_error(y, ref)
        fmt = _format(np.asarray(y))
        flushed = flushed_by_ftz(y, ref, fmt) if fmt is not None else np.zeros(ref.shape, bool)
        _add_errors(fig, name, rel, bound, flushed, colors[name], SYMBOLS[i % len(SYMBOLS)])
        finite = rel[np.isfinite(rel)]
        measured = measured or finite.size > 0
        drawn += [max(finite.min(), ERR_FLOOR), max(finite.max(), ERR_FLOOR)] if finite.size else []
        drawn += [bound] if bound is not None else []
        vacuous += [name] if bound is not None and bound >= 1 else []
        y64 = np.asarray(y, dtype=np.float64)
        bad = (np.isnan(y64) != np.isnan(ref)) | (np.isinf(y64) != np.isinf(ref))
        mismatch[name] = np.where(bad, y64, 1.0)  # only the mismatching elements are non-finite here
    _mark_row(fig, mismatch, False, colors, 2, "no NaN / inf mismatch with the reference")
    if vacuous:
        note_above(fig, f"bound ≥ 1, vacuous (says nothing): {', '.join(vacuous)}", "x domain", "y domain", "#b22222")
    if not measured:
        note_inside(
            fig, "no element where an output and the reference are both finite: nothing to measure", "", "#b22222"
        )
    fig.update_yaxes(
        type="log",
        exponentformat="power",
        row=1,
        col=1,
        title_text=f"|y − ref| / max(|ref|, smallest normal)<br><sup>exact results drawn at {ERR_FLOOR:g}; "
        "dashed: each variant's bound</sup>",
    )
    # every decade labelled as plotly would, but no "2" and "5" between them, nor a row of minor labels where the
    # values lie within a decade (only the bounds, when no element is measured)
    log_ticks(fig, np.asarray(drawn), labels=12, row=1, col=1)
    fig.update_xaxes(title_text="element j of the row", row=2, col=1)
    integer_ticks(fig, ref.size)  # element 0.5 of a short row means nothing
    return stamp_below(legend_right(finish(fig, title, stamp, height=height)))


def _add_errors(
    fig: go.Figure, name: str, rel: np.ndarray, bound: float | None, flushed: np.ndarray, color: str, symbol: str
) -> None:
    """One variant on the error figure's row 1: its relative errors (an envelope, the points above the bound
    kept), its bound as a dashed line, the points above it ringed, and every output the GPU's -ftz flushed to 0
    (flushed_by_ftz: no rounding bound covers them; the Outputs page counts the same) crossed out instead."""
    over = rel > bound if bound is not None else np.zeros(rel.shape, bool)
    above, lost = np.flatnonzero(over & ~flushed), np.flatnonzero(flushed)
    idx = np.union1d(envelope_index(rel), thin_marks(np.union1d(above, lost), rel.size))
    fig.add_trace(
        scatter_type(idx.size)(
            x=idx,
            y=np.maximum(rel[idx], ERR_FLOOR),
            mode="markers",
            name=name,
            legendgroup=name,
            marker=dict(size=7, color=color, opacity=0.8, symbol=symbol, line=dict(width=1, color=color)),
            customdata=rel[idx],
            hovertemplate=f"{name}<br>element %{{x}}<br>rel. error %{{customdata:.3g}}<extra></extra>",
        ),
        row=1,
        col=1,
    )
    if bound is not None:
        fig.add_trace(
            go.Scatter(
                x=[0, max(rel.size - 1, 1)],
                y=[bound, bound],
                mode="lines",
                legendgroup=name,
                name=f"{name} bound",
                showlegend=False,
                hovertemplate=f"{name}: bound {bound:.3g}<extra></extra>",
                line=dict(color=color, width=1.5, dash="dash"),
            ),
            row=1,
            col=1,
        )
    for marked, label, marker in (
        (above, "above bound", dict(symbol="circle-open", size=14, color="#d62728", line=dict(width=2))),
        (lost, "flushed to 0 (-ftz)", dict(symbol="x-thin-open", size=12, color="#777", line=dict(width=2))),
    ):
        if marked.size:
            shown = thin_marks(marked, rel.size)
            fig.add_trace(
                go.Scatter(
                    x=shown,
                    y=rel[shown],
                    mode="markers",
                    name=f"{name}: {label} ({marked.size})",
                    legendgroup=name,
                    marker=marker,
                ),
                row=1,
                col=1,
            )


def error_table(reports: dict[str, ErrorReport]) -> pd.DataFrame:
    """One row per variant from its ErrorReport: the relative errors, the NaN / inf counts and the argmax first, the
    other magnitudes of the error last (where a narrow window's table scrolls)."""
    columns = {
        "max_rel_unflushed": "max rel",  # what a rounding bound speaks of: the outputs -ftz flushed left out
        "mean_rel_unflushed": "mean rel",
        "flushed_count": "flushed to 0",
        "nonfinite_mismatch": "NaN/inf ≠ ref",
        "nan_count": "NaN",
        "inf_count": "inf",
        "argmax_agreement": "argmax agree",
        "max_ulp": "max ULP",
        "max_abs": "max abs",
        "row_sum_dev": "max |Σ−1|",
    }
    df = pd.DataFrame.from_dict({k: dataclasses.asdict(r) for k, r in reports.items()}, orient="index")
    df = df[[c for c in columns if c in df.columns]].rename(columns=columns)
    df.index.name = "variant"
    return df

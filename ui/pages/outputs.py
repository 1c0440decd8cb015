"""The Outputs page: the chosen row's probabilities per variant beside the float64 reference."""

from __future__ import annotations

import dataclasses
import functools
import json
import math

import numpy as np
import pandas as pd
import streamlit as st

import explorer
from explorer.numerics import flushed_by_ftz

from .. import compute, figures
from ..common import Ran, chart, csv_download, guarded, number_columns, run_page, show_table, stamp
from ..page import Page
from ..params import Param
from ..share import run_share_button

ss = st.session_state
PARAMS = (Param("log", "flag", True, hint="1 (log scale) or 0 (linear) is needed"),)
COLUMNS = number_columns(
    {
        "sum of row": "%.9f",  # a float32 sum's deviation from 1 shows
        "max p": "%.6g",
        "wall ms (not a benchmark)": "%.1f",
    }
)


def row_summary(y: np.ndarray) -> dict:
    """Sum (NaN or inf where the row holds one), largest probability and where (none where the row holds a NaN or
    inf: the largest of what is left, often a 0 beside naive's NaNs, would read as an answer), and the counts of NaN,
    inf and zero outputs of one row."""
    y64 = np.asarray(y, dtype=np.float64)
    finite = bool(np.isfinite(y64).all()) and y64.size > 0
    return {
        "sum of row": float(y64.sum()),
        "max p": float(y64.max()) if finite else math.nan,
        "argmax": int(np.argmax(y64)) if finite else None,
        "NaN": int(np.isnan(y64).sum()),
        "inf": int(np.isinf(y64).sum()),
        "zeros": int((y64 == 0).sum()),
    }


@guarded
def outputs_page() -> None:
    ran = run_page("Outputs")
    if ran is None:
        return
    cfg, results = ran.cfg, ran.results
    ref = compute.get_reference(ran.spec)[cfg.row]
    st.toggle(
        "Log scale",
        key="log",
        help="Probabilities span many decades; zeros cannot sit on a log axis "
        "and are marked in the strip under the plot instead.",
    )
    outputs = {k: r.out[cfg.row] for k, r in results.items()}
    fig = figures.outputs_figure(
        ref,
        outputs,
        bool(ss["log"]),
        f"Softmax of row {cfg.row}, {cfg.describe()}<br>"
        "<sup>the float64 reference, and each variant's deviation from it (variants with "
        "equal rows drawn once)</sup>",
        stamp(),
    )
    chart(fig, cfg.slug("outputs"), "chart_outputs")
    warning = nan_row_warning(cfg.row, compute.get_input(ran.spec)[cfg.row])
    equal = equal_rows_note(outputs)
    _chart_notes(ref, outputs, warning, cfg.dtype, equal)
    df = summary_frame(ran, ref, outputs)
    st.subheader(f"Row {cfg.row} at a glance")
    show_table(df, key="table_outputs", column_config=COLUMNS)
    _downloads(ran, fig, df, [warning] if warning else [], [equal] if equal else [])


def nan_row_warning(row: int, x_row: np.ndarray) -> str | None:
    """Why row's softmax is NaN, in float64 too (None when it is not): the page's warning and the share image's."""
    reason = figures.nan_row_reason(x_row)
    if reason is None:
        return None
    return f"Row {row}'s softmax is NaN, in float64 too: {reason}. Its outputs are marked in the strip."


def _chart_notes(ref: np.ndarray, outputs: dict[str, np.ndarray], warning: str | None, dtype: str, equal: str) -> None:
    """Under the chart: what an ulp is, the outputs -ftz flushed, which rows are bitwise equal (equal: the
    equal_rows_note), how a long row is drawn, and why a row is NaN."""
    notes = [f"Deviation in ulps: units in the last place of {dtype} at the reference value (its spacing there)."]
    fmt = explorer.FORMATS[dtype]
    flushed = {k: int(flushed_by_ftz(y, ref, fmt).sum()) for k, y in outputs.items()}
    if any(flushed.values()):
        counts = ", ".join(f"{k} {n:,}" for k, n in flushed.items() if n)
        notes += [
            f"Probabilities below fp32's smallest normal ({explorer.FORMATS['float32'].smallest_normal:.2g}) that "
            "rounding would keep come out 0: the GPU "
            f"flushes them (-ftz): {counts}. Each is off by its whole value, many ulps at that size, which no "
            "rounding causes."
        ]
    notes.append(equal)
    notes += [figures.sampled_note(ref.size, figures.MAX_POINTS) + "."] if ref.size > figures.MAX_POINTS else []
    st.caption(" ".join(n for n in notes if n))
    if warning:
        st.warning(warning, icon=":material/error:")


def equal_rows_note(outputs: dict[str, np.ndarray]) -> str:
    """Which variants' rows are bitwise equal, as the chart's legend names them ("a +2": a and two more); "" if
    none are."""
    same = [" = ".join(g) for g in figures.equal_groups(outputs) if len(g) > 1]
    return f'Bitwise equal rows, drawn once under the first name ("+n": n more): {"; ".join(same)}.' if same else ""


def summary_frame(ran: Ran, ref: np.ndarray, outputs: dict[str, np.ndarray]) -> pd.DataFrame:
    """The shown row of each variant and of the reference (row_summary), with the variant's backend and wall
    time, indexed by variant."""
    rows = [
        {
            "variant": k,
            "backend": ran.results[k].backend,
            **row_summary(y),
            "wall ms (not a benchmark)": 1e3 * ran.results[k].seconds,
        }
        for k, y in outputs.items()
    ]
    rows.append(
        {"variant": "float64 reference", "backend": "numpy", **row_summary(ref), "wall ms (not a benchmark)": math.nan}
    )
    return pd.DataFrame(rows).set_index("variant").astype({"argmax": "Int64"})  # a row with no finite output has none


def _downloads(ran: Ran, fig, df: pd.DataFrame, warnings: list[str], captions: list[str]) -> None:
    """The table as CSV, the whole run as JSON, and the share image (with the page's warnings and captions)."""
    cfg = ran.cfg
    c1, c2, c3 = st.columns(3)
    with c1:
        csv_download(df, cfg.slug("outputs"), "csv_outputs")
    with c2:
        # built when clicked: a long row's JSON takes seconds, and every rerun would pay for it
        st.download_button(
            "Download this run (JSON)",
            functools.partial(run_json, ran),
            file_name=f"{cfg.slug('run')}.json",
            mime="application/json",
            key="json_run",
            icon=":material/data_object:",
            on_click="ignore",
        )
    with c3:
        run_share_button(
            "outputs",
            f"Softmax outputs against float64, row {cfg.row}",
            cfg,
            [fig],
            df.reset_index(),
            COLUMNS,
            warnings,
            captions,
        )


def _finite_or_none(values: np.ndarray) -> list[float | None]:
    return [v if math.isfinite(v) else None for v in np.asarray(values, dtype=np.float64).tolist()]


def run_json(ran: Ran) -> str:
    """A run's results: configuration, backend, and per variant its launch, errors and the shown row."""
    cfg = ran.cfg
    out = {
        "schema": "softmax-explorer-run/1",
        "config": {**dataclasses.asdict(cfg), "params": dict(cfg.params)},
        "backend": compute.backend_info(),
        "stamp": stamp(),
        "variants": {},
        "failed": ran.failed,
        "reference_row": _finite_or_none(compute.get_reference(ran.spec)[cfg.row]),
    }
    for k, r in ran.results.items():
        y = np.asarray(r.out[cfg.row], dtype=np.float64)
        out["variants"][k] = {
            "backend": r.backend,
            "block_size": r.block_size,
            "launch": dataclasses.asdict(r.launch),
            "errors": dataclasses.asdict(compute.error_report(ran.spec, k, cfg.acc, cfg.block_for(k))),
            "row": _finite_or_none(y),
            "row_nonfinite": {str(i): str(v) for i, v in enumerate(y.tolist()) if not math.isfinite(v)},
        }
    return json.dumps(out, indent=1, default=float)


PAGE = Page(
    outputs_page,
    "Outputs",
    "home",
    ":material/bar_chart:",
    params=PARAMS,
    runs_the_shape=True,
)

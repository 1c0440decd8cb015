"""The Error vs float64 page: every variant's errors over the whole input beside its bound, and one row's
relative error per element."""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

import explorer

from .. import compute, figures
from ..common import chart, csv_download, guarded, number_columns, run_page, show_table, stamp
from ..page import Page
from ..share import run_share_button

FORMAT_2E = ("max rel", "mean rel", "max abs", "max |Σ−1|", "bound")
COUNTS = ("NaN", "inf", "NaN/inf ≠ ref", "flushed to 0")
# The page's and the share image's: narrow number columns under short headers, counts compact (300000 as 300K; the
# CSV and the share image keep them whole), so that the whole table fits beside the sidebar in a 1400-pixel window.
COLUMNS = number_columns(
    dict.fromkeys(FORMAT_2E, "%.2e")
    | dict.fromkeys(COUNTS, "compact")
    | {
        "max ULP": "%.3g",
        "NaN/inf ≠ ref": ("≠ ref", "compact"),
        "flushed to 0": ("flushed", "compact"),
        "argmax agree": ("argmax", "%.3f"),
    },
    widths=dict.fromkeys(FORMAT_2E, 60)
    | {"max |Σ−1|": 64, "max ULP": 60, "argmax agree": 54}
    | {"NaN": 46, "inf": 42, "NaN/inf ≠ ref": 48, "flushed to 0": 56},
) | {"bound says": st.column_config.TextColumn(width=215)}  # "nothing to check (no finite row)" in full


def bound_verdict(max_rel: float, max_rel_unflushed: float, bound: float, mismatched: int) -> str:
    """What the error bound says of a variant's output. The errors are over the elements finite in both, so an output
    whose NaN/inf pattern differs from float64's fails whatever they are. Outputs the GPU's -ftz flushed to 0
    (max_rel_unflushed leaves them out) are not a rounding error the bound speaks of."""
    if mismatched:
        return f"fails: {mismatched:,} NaN/inf ≠ ref"
    if math.isnan(max_rel):
        return "nothing to check (no finite row)"
    if bound >= 1:
        return "vacuous (≥ 1)"
    if max_rel <= bound:
        return "holds"
    return "holds; tiny outputs flushed to 0" if max_rel_unflushed <= bound else "exceeded"


def column_notes(dtype: str) -> str:
    """The error table's columns, one line each (Markdown)."""
    u = explorer.FORMATS[dtype].significand_bits
    return "\n".join(
        f"- **{name}**: {meaning}"
        for name, meaning in (
            ("bound says", "whether max rel is within the bound; a NaN or inf where float64 has none fails outright"),
            (
                "bound",
                "3·n·u_acc + u_out, n the terms one accumulator folds in sequence (its share of the row, plus one per "
                "merge level), plus 2·max|x|·u_acc where x is rounded into the accumulator "
                "(explorer.numerics.softmax_bound); a bound ≥ 1 is vacuous: it allows any probability",
            ),
            ("max rel, mean rel", "|y − ref| / max(|ref|, smallest normal), the flushed outputs left out"),
            (
                "flushed",
                "outputs the GPU's -ftz flushed to 0: fp32 results below its smallest normal that rounding to the "
                "output type would keep (the ones max rel and mean rel leave out)",
            ),
            ("≠ ref", "elements whose NaN/inf pattern differs from float64's"),
            ("NaN, inf", "counts of outputs"),
            ("argmax", "the fraction of rows whose largest probability sits where the reference's does"),
            ("max ULP", f"|y − ref| in units in the last place of {dtype} (u = 2^-{u}), the flushed outputs included"),
            ("max abs", "the largest |y − ref|"),
            ("max |Σ−1|", "the worst row sum's distance from 1"),
        )
    ) + (
        "\n\nAll over the rows finite in both output and reference (– where there is none). Counts in K (thousands) "
        "or M (millions) are rounded; the CSV has them whole."
    )


@guarded
def errors_page() -> None:
    ran = run_page("Error vs float64")
    if ran is None:
        return
    cfg, spec, results = ran.cfg, ran.spec, ran.results
    with st.spinner("Comparing with the float64 reference…"):
        reports = {k: compute.error_report(spec, k, cfg.acc, cfg.block_for(k)) for k in results}
        bounds = {k: compute.bound(spec, r.launch, cfg.acc) for k, r in results.items()}
    df = figures.error_table(reports)
    df["bound"] = pd.Series(bounds)
    df["bound says"] = [
        bound_verdict(r.max_rel, r.max_rel_unflushed, bounds[k], r.nonfinite_mismatch) for k, r in reports.items()
    ]
    first = ["bound says", "bound", "max rel", "flushed to 0"]  # the verdict and what it compares: the table may scroll
    df = df[[*first, *df.columns.drop(first)]]
    st.subheader("Over the whole input")
    show_table(df, key="table_errors", column_config=COLUMNS)
    st.caption(
        "The verdict compares max rel with the bound. Max and mean rel leave out the outputs the GPU flushed to 0 "
        f"(-ftz: fp32 results below 2^{explorer.FORMATS['float32'].min_exponent}, a loss no rounding bound covers); "
        "the flushed column counts them."
    )
    with st.expander("What each column means"):
        st.markdown(column_notes(cfg.dtype))
    csv_download(df, cfg.slug("errors"), "csv_errors")
    ref = compute.get_reference(spec)[cfg.row]
    outputs = {k: r.out[cfg.row] for k, r in results.items()}
    fig = figures.error_figure(
        ref,
        outputs,
        f"Relative error per element, row {cfg.row}, {cfg.describe()}",
        stamp(),
        {k: bounds[k] for k in outputs},
    )
    chart(fig, cfg.slug("errors"), "chart_errors")
    if ref.size > figures.MAX_POINTS:
        st.caption(
            figures.sampled_note(ref.size, figures.MAX_POINTS)
            + "; every point above its bound is ringed, and every output -ftz flushed to 0 crossed."
        )
    run_share_button("errors", f"Softmax error against float64, row {cfg.row}", cfg, [fig], df.reset_index(), COLUMNS)


PAGE = Page(
    errors_page,
    "Error vs float64",
    "errors",
    ":material/rule:",
    runs_the_shape=True,
)

"""The Softmax + top-k page: the k largest probabilities per row, fused (one read of the logits) or not.

The page's URL parameters (PARAMS), pure helpers (options, agreement per rank, bytes moved: testable without
Streamlit), the cached computations, then the page. The bars come from ui.figures.topk_bars_figure, the
timing section from ui/topk_timing.py, which imports explorer.bench lazily: on the CPU it only loads results files.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st

import explorer
from explorer.numerics import dtype_name
from explorer.topk import (
    K_MAX,
    TIE_SLACK_TEXT,
    TOPK_VARIANTS,
    TORCH_TOPK_LABELS,
    TORCH_TOPK_PASSES,
    VOCABS,
    TopkReport,
    tie_within_rounding,
    torch_topk_bytes,
)

from .. import background, compute, figures, topk_timing
from ..common import (
    backend_badge,
    chart,
    clamp,
    csv_download,
    ensure_choice,
    failure_text,
    guarded,
    number_columns,
    show_failures,
    show_table,
    stamp,
)
from ..page import Page
from ..params import Param, ParamTable
from ..results import TIMES
from ..state import MAX_DIM, UPLOAD, GeneratedInput, InputSpec, UploadedInput, dist_text, file_slug, source_slug

ss = st.session_state

VOCAB_NAMES = {32000: "LLaMA-2", 50257: "GPT-2", 128256: "LLaMA-3", 151936: "Qwen-2", 262144: "Gemma"}
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
EMULATOR_MAX_ELEMENTS = 8 * 262144  # batch × vocab the CPU emulation runs (about a second for both variants)
PARAMS = (
    Param("tk_vocab", "int", VOCABS[0], choices=VOCABS, sparse=True),
    Param("tk_batch", "int", 8, choices=BATCHES, sparse=True),
    Param("tk_k", "int", 8, low=1, high=K_MAX, sparse=True),
    Param("tk_row", "int", 0, low=0, high=MAX_DIM, sparse=True),
    Param("tk_log", "flag", True, sparse=True, hint="1 (log scale) or 0 (linear) is needed"),
    Param("tk_tshape", "text", "", sparse=True),
    Param("tk_bundled", "flag", False, sparse=True),
    Param("tk_ttime", "word", "device", choices=TIMES, sparse=True),  # the timing bars' time: ui/results.py
)
OPTIONS = ParamTable(PARAMS).options  # what each widget offers: its row's choices
AGREEMENT_COLUMNS = number_columns({"index agreement": "%.4f", "max rel": "%.2e", "wall ms (not a benchmark)": "%.1f"})
BYTES_COLUMNS = number_columns({"bytes moved": "%d", "× fused": "%.2f"})

INTRO = f"""
Sampling from a language model's head, or routing tokens in a mixture of experts, needs only the **k largest
probabilities** of a row of logits, not all of them. The **fused** kernel (Milakov & Gimelshein 2018) keeps a
running top-k beside the online (m, d) and reads the logits **once**, writing only k probabilities and indices.
The **unfused** pipeline runs the `fast` softmax (read the logits, write every probability) and then selects
(read every probability again): three passes over the row, to keep k values. `torch.softmax` + `torch.topk` makes
the same three passes (its indices are int64, not int32).

**Order.** Larger probability first; **ties go to the lower index**; NaN ranks below −inf.

**Agreement.** The reference is float64: indices by the logits, probabilities from the float64 softmax.
Indices must agree **exactly**, with one exception: a *tie swap*, two positions whose reference probabilities
are closer than the kernels' own error can separate ({TIE_SLACK_TEXT}). The unfused pipeline selects on
probabilities it computed, so two different logits can become equal (or swapped) probabilities; the fused kernel
selects on the logits themselves. A tie swap is not an error; any other
difference is.
"""


# --- pure helpers -------------------------------------------------------------------------------------------


def vocab_label(vocab: int) -> str:
    return f"{vocab:,} ({VOCAB_NAMES[vocab]})" if vocab in VOCAB_NAMES else f"{vocab:,}"


def batch_options(vocab: int, emulated: bool) -> list[int]:
    """Batch sizes offered: on the emulator only those with batch × vocab <= EMULATOR_MAX_ELEMENTS."""
    if not emulated:
        return list(BATCHES)
    return [b for b in BATCHES if b * vocab <= EMULATOR_MAX_ELEMENTS] or [1]


def position_status(ref_row: np.ndarray, ref_indices: np.ndarray, indices: np.ndarray, dtype: str) -> np.ndarray:
    """Per rank of one row: "same", "tie" (a different index whose reference probability matches the
    reference's at that rank within rounding: explorer.topk_errors' tie_swaps) or "wrong"."""
    ref_row = np.asarray(ref_row, dtype=np.float64)
    ref_indices = np.asarray(ref_indices, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    out = np.full(indices.shape, "same", dtype=object)
    if not np.isfinite(ref_row).all():  # a NaN/inf row has no meaningful top-k: topk_errors skips it too
        return out
    ref_values = ref_row[ref_indices]
    got = ref_row[np.clip(indices, 0, ref_row.size - 1)]
    differ = indices != ref_indices
    tie = tie_within_rounding(got, ref_values, dtype)
    out[differ & tie] = "tie"
    out[differ & ~tie] = "wrong"
    return out


def bytes_table(rows: int, cols: int, k: int, dtype: str) -> pd.DataFrame:
    """Global-memory bytes each pipeline moves for this shape (TOPK_VARIANTS.bytes_moved; torch's as
    explorer.topk.torch_topk_bytes), at least: what the formulation needs, not what torch's kernels move."""
    pipelines = [(key, v.passes, v.bytes_moved(rows, cols, k, dtype)) for key, v in TOPK_VARIANTS.items()]
    passes_in_words = {
        "torch": "softmax writes every probability; topk reads them again (as unfused); int64 indices",
        "torch_lse": "topk reads the logits, logsumexp reads them again; int64 indices",
    }
    pipelines += [
        (TORCH_TOPK_LABELS[name], words, torch_topk_bytes(TORCH_TOPK_PASSES[name], rows, cols, k, dtype))
        for name, words in passes_in_words.items()
    ]
    df = pd.DataFrame(pipelines, columns=["pipeline", "what it does to memory", "bytes moved"]).set_index("pipeline")
    df["size"] = [explorer.checks.size(int(b)) for b in df["bytes moved"]]  # 1.00 KiB, not "0.00 MB"
    df["× fused"] = df["bytes moved"] / TOPK_VARIANTS["topk_fused"].bytes_moved(rows, cols, k, dtype)
    return df[["bytes moved", "size", "× fused", "what it does to memory"]]  # the numbers before the long words


@dataclass(frozen=True)
class TopkRun:
    """One top-k variant over the whole input (wall seconds: not a benchmark)."""

    values: np.ndarray  # rows × k, float64
    indices: np.ndarray  # rows × k
    backend: str
    seconds: float
    launch: str
    report: TopkReport


def agreement_table(runs: dict[str, TopkRun], k: int) -> pd.DataFrame:
    """One row per variant: index agreement, tie swaps, error, backend, wall time."""
    out = {}
    for key, r in runs.items():
        rep = r.report
        positions = rep.rows_checked * k
        out[key] = {
            "backend": r.backend,
            "rows checked": rep.rows_checked,
            "positions": positions,
            "index mismatches": rep.index_mismatch,
            "tie swaps": rep.tie_swaps,
            "index agreement": 1 - rep.index_mismatch / positions if positions else math.nan,
            "max rel": rep.max_rel if rep.rows_checked else math.nan,  # no row checked: no error measured
            "wall ms (not a benchmark)": 1e3 * r.seconds,
        }
    df = pd.DataFrame.from_dict(out, orient="index")
    df.index.name = "variant"
    return df


def row_table(ref_values, ref_indices, runs_row: dict[str, tuple], status: dict[str, np.ndarray]) -> pd.DataFrame:
    """The shown row rank by rank: the reference's index and p, then each variant's index, p and status."""
    df = pd.DataFrame(
        {
            "rank": np.arange(1, len(ref_indices) + 1),
            "ref index": np.asarray(ref_indices),
            "ref p": np.asarray(ref_values, dtype=np.float64),
        }
    )
    for key, (values, indices) in runs_row.items():
        df[f"{key} index"] = np.asarray(indices)
        df[f"{key} p"] = np.asarray(values, dtype=np.float64)
        df[f"{key} vs ref"] = status[key]
    return df.set_index("rank")


def input_slug(spec: InputSpec, k: int, row: int) -> str:
    """File names for downloads: distribution (or upload), params, shape, dtype, seed, k, row."""
    if isinstance(spec, UploadedInput):
        return file_slug("softmax_topk", source_slug(UPLOAD, (), spec.filename), spec.dtype, f"k{k}", f"row{row}")
    return file_slug(
        "softmax_topk",
        source_slug(spec.dist, spec.params),
        f"{spec.rows}x{spec.cols}",
        spec.dtype,
        f"seed{spec.seed}",
        f"k{k}",
        f"row{row}",
    )


# --- cached compute -------------------------------------------------------------------------------------------


@st.cache_data(show_spinner=False, max_entries=16)
def run_topk(spec: InputSpec, k: int, variant: str) -> TopkRun:
    """One top-k variant over the whole input, checked against float64 (explorer.topk_errors)."""
    x = compute.get_input(spec)
    start = time.perf_counter()
    r = compute.off_thread(compute.backend(), explorer.softmax_topk, x, k, variant)
    seconds = time.perf_counter() - start
    return TopkRun(
        r.values.reshape(-1, k).astype(np.float64),
        r.indices.reshape(-1, k),
        r.backend,
        seconds,
        r.launch.describe(),
        background.call(explorer.topk_errors, r, x),  # float64 on the host, on either backend
    )


@st.cache_data(show_spinner=False, max_entries=8)
def reference_row(spec: InputSpec, row: int, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The float64 softmax of one row, and its top-k (values, indices)."""
    x = compute.get_input(spec)[row : row + 1]
    values, indices = explorer.reference_topk(x, k)
    return explorer.reference(x)[0], values[0], indices[0]


# --- the page -----------------------------------------------------------------------------------------------------


def _input_spec(cfg, emulated: bool) -> InputSpec | None:
    """The input: the sidebar's distribution, parameters, seed and dtype at the shape chosen here, or the
    uploaded logits as they are. None (after saying why) when there is nothing to run."""
    c1, c2, c3 = st.columns(3)
    if cfg.uploaded:
        data = ss.get("_upload_bytes")
        if data is None:
            st.info(
                "Upload a .npy or .csv file of logits in the sidebar (or pick a distribution).",
                icon=":material/upload:",
            )
            return None
        spec = cfg.input(data)
        rows, cols = compute.get_input(spec).shape
        c1.caption(f"Your logits, {cfg.upload_name}: {rows} × {cols} (batch × vocabulary).")
        if emulated and rows * cols > EMULATOR_MAX_ELEMENTS:
            st.error(
                f"Not run: {rows} × {cols} is more than the CPU emulation's {EMULATOR_MAX_ELEMENTS:,} elements "
                "for this page. Upload fewer rows.",
                icon=":material/block:",
            )
            return None
        before = ss.get("tk_k")
        clamp("tk_k", 1, min(K_MAX, cols), "k")
        if before != ss["tk_k"]:  # the user's k comes back after the upload, unless they change it meanwhile
            first = ss.get("_k_before_upload", (before,))[0]  # a second, narrower upload keeps the first k
            ss["_k_before_upload"] = (first, ss["tk_k"])
        c2.number_input(f"k (1–{min(K_MAX, cols)})", min_value=1, max_value=min(K_MAX, cols), step=1, key="tk_k")
        return spec
    if (kept := ss.pop("_k_before_upload", None)) and ss.get("tk_k") == kept[1]:
        ss["tk_k"] = kept[0]
    return _generated_spec(cfg, emulated, c1, c2, c3)


def _cap_batch(options: list[int], vocab: int) -> None:
    """The batch is one of the offered ones: the largest offered at most the batch asked for (a shared link's, or one
    that a larger vocabulary pushed past the emulation's cap), with a toast saying so, as clamp does."""
    value = ss.get("tk_batch")
    if value in options:
        return
    ss["tk_batch"] = max([b for b in options if b <= int(value or 1)] or options[:1])
    if value not in (None, ""):
        st.toast(
            f"Batch {int(value):,} × vocabulary {vocab:,} is more than the CPU emulation's "
            f"{EMULATOR_MAX_ELEMENTS:,} elements: showing {ss['tk_batch']:,}.",
            icon=":material/info:",
        )


def _generated_spec(cfg, emulated: bool, c1, c2, c3) -> GeneratedInput:
    """The vocabulary, batch and k widgets in three columns, and the sidebar's distribution at that shape."""
    vocabs = OPTIONS("tk_vocab")
    ensure_choice("tk_vocab", vocabs)
    c1.selectbox(
        "Vocabulary (cols)",
        vocabs,
        key="tk_vocab",
        format_func=vocab_label,
        help="Row lengths of real LM heads: LLaMA-2, GPT-2, LLaMA-3, Qwen-2, Gemma.",
    )
    options = batch_options(int(ss["tk_vocab"]), emulated)
    _cap_batch(options, int(ss["tk_vocab"]))
    c2.select_slider(
        "Batch (rows)",
        options,
        key="tk_batch",
        help=f"The CPU emulation runs at most {EMULATOR_MAX_ELEMENTS:,} elements (8 × 262,144) "
        "on this page, so larger batches are offered on a GPU only."
        if emulated
        else "Rows of logits, one token each.",
    )
    clamp("tk_k", 1, K_MAX, "k")
    c3.number_input(f"k (1–{K_MAX})", min_value=1, max_value=K_MAX, step=1, key="tk_k")
    if emulated:
        st.caption(
            f"CPU emulation: batch × vocabulary is capped at {EMULATOR_MAX_ELEMENTS:,} elements "
            "(8 × 262,144) to keep the page interactive; a GPU runs every batch."
        )
    return GeneratedInput(cfg.dist, cfg.params, int(ss["tk_batch"]), int(ss["tk_vocab"]), cfg.dtype, cfg.seed)


def _describe(spec: InputSpec) -> str:
    if isinstance(spec, UploadedInput):
        return f"upload {spec.filename} · {spec.dtype}"
    return (
        dist_text(spec.dist, spec.params) + f" · {spec.rows}×{spec.cols} {spec.dtype} · "
        f"seed {spec.seed} (distribution, dtype and seed from the sidebar)"
    )


@guarded
def topk_page() -> None:
    st.title("Softmax + top-k")
    cfg = ss.get("_cfg")
    gpu = compute.backend_info().get("backend") == "cuda"
    left, right = st.columns([3, 2], vertical_alignment="center")
    with right:
        backend_badge()
    with st.expander("Fused vs unfused, ties and agreement", expanded=False):
        st.markdown(INTRO)
    if cfg is None:
        return
    spec = _input_spec(cfg, emulated=not gpu)
    if spec is None:
        return
    left.caption(_describe(spec))
    k = int(ss["tk_k"])
    x = compute.get_input(spec)
    rows, cols = x.shape
    dtype = dtype_name(x.dtype)
    runs = _run_variants(spec, k, rows, cols, dtype)
    if runs:
        _row_section(spec, runs, k, rows, cols, dtype, gpu)
    _bytes_section(rows, cols, k, dtype)
    topk_timing.render(gpu, rows, cols, k, dtype)


def _run_variants(spec: InputSpec, k: int, rows: int, cols: int, dtype: str) -> dict[str, TopkRun]:
    """Both variants on the input; a refusal is shown as a warning and the other variant still runs."""
    runs, failed = {}, {}
    with st.spinner(f"Top-{k} of {rows}×{cols} {dtype}, fused and unfused…"):
        for key in TOPK_VARIANTS:
            try:
                runs[key] = run_topk(spec, k, key)
            except explorer.ExplorerError as exc:
                failed[key] = failure_text(exc)
    show_failures(failed)
    return runs


def _row_section(spec: InputSpec, runs: dict[str, TopkRun], k: int, rows: int, cols: int, dtype: str, gpu: bool):
    """The shown row's top-k beside the reference, then the agreement over the whole input."""
    st.subheader("Top-k against the float64 reference")
    c1, c2 = st.columns([1, 2])
    clamp("tk_row", 0, rows - 1, "Row")
    if rows > 1:
        c1.number_input(f"Row (0–{rows - 1})", min_value=0, max_value=rows - 1, step=1, key="tk_row")
    c2.toggle("Log scale", key="tk_log", help="Top-k probabilities can span many decades (zeros are left off).")
    row = int(ss["tk_row"])
    ref_row, ref_values, ref_indices = reference_row(spec, row, k)
    runs_row = {key: (r.values[row], r.indices[row]) for key, r in runs.items()}
    status = {key: position_status(ref_row, ref_indices, idx, dtype) for key, (_, idx) in runs_row.items()}
    slug = input_slug(spec, k, row)
    if np.isfinite(ref_row).all():
        backend = "GPU" if gpu else "CPU emulation"
        fig = figures.topk_bars_figure(
            ref_values,
            ref_indices,
            runs_row,
            bool(ss["tk_log"]),
            f"Top-{k} of row {row}, {rows}×{cols} {dtype}: each variant ({backend}) vs float64",
            stamp(),
            status=status,
        )
        chart(fig, slug, "chart_topk")
    else:
        reason = figures.nan_row_reason(compute.get_input(spec)[row]) or "its float64 softmax is not finite"
        st.info(
            f"Row {row}'s softmax is NaN, in float64 too: {reason}. It has no meaningful top-k, so it is not drawn "
            "or checked.",
            icon=":material/info:",
        )

    st.subheader("Agreement over the whole input")
    df = agreement_table(runs, k)
    show_table(df, key="table_topk", column_config=AGREEMENT_COLUMNS)
    st.caption(
        "index mismatches: positions whose index differs from the float64 reference's beyond a tie; "
        "tie swaps: positions that differ only between probabilities the kernels cannot order "
        f"(within {TIE_SLACK_TEXT.replace('the dtype', dtype)}; not errors: see above); index agreement: "
        "1 − mismatches / positions; max rel: the returned probabilities against float64 at the returned "
        "indices; rows whose float64 softmax is NaN (a NaN or +inf logit, or every logit −∞) are not checked."
    )
    table = row_table(ref_values, ref_indices, runs_row, status)
    with st.expander(f"Row {row}, rank by rank"):
        show_table(table, key="table_topk_row")
    c1, c2 = st.columns(2)
    with c1:
        csv_download(df, f"{slug}_agreement", "csv_topk", "Download agreement (CSV)")
    with c2:
        csv_download(table, slug, "csv_topk_row", f"Download row {row} (CSV)")


def _bytes_section(rows: int, cols: int, k: int, dtype: str) -> None:
    st.subheader(f"Bytes moved at {rows}×{cols} {dtype}, top-{k}: fused vs unfused vs torch")
    show_table(bytes_table(rows, cols, k, dtype), key="table_topk_bytes", column_config=BYTES_COLUMNS)
    st.caption(
        f"For {rows}×{cols} {dtype}, top-{k}: logits read (and, unfused, probabilities written and read "
        "again), plus k probabilities and int32 indices (torch's: int64) written per row. Top-k is memory-bound, so time "
        "should follow these bytes."
    )


PAGE = Page(
    topk_page,
    "Softmax + top-k",
    "topk",
    ":material/leaderboard:",
    params=PARAMS,
    sidebar=("input", "seed", "dtype"),
)

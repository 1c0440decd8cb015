"""The Precision lab page: the online denominator's error against n, per accumulator, beside the 3·n·u bound;
stagnation, overflow, bf16, and the shorter sums of warp and block variants.

Compute goes through explorer.precision, which calls explorer.softmax: the GPU kernels where a GPU is usable,
the emulator otherwise. Figures come from ui.figures.precision.
"""

from __future__ import annotations

import dataclasses
import math
import time

import pandas as pd
import streamlit as st

import explorer
from explorer import precision
from explorer.precision import Measurement

from .. import lab_runs
from ..common import chart, csv_download, ensure_choice, guarded, header, show_table, stamp, variant_label
from ..figures.common import COLUMN_PX
from ..figures.precision import (
    FP16_CEILING,
    QUANTITIES,
    compare_figure,
    error_vs_n_figure,
    overflow_figure,
    stagnation_figure,
)
from ..page import Page
from ..params import Param, ParamTable
from ..state import file_slug

ss = st.session_state
EXPONENTS = tuple(range(4, 21))  # rows of n = 2^4 .. 2^20
BLOCKS = (64, 128, 256, 512, 1024)
STEP_CAPS = tuple(2**k for k in range(8, 21))
STAGNATION_NS = tuple(2**k for k in range(11, 21))
STAGNATION_DISTS = ("constant", "decreasing")
STAGNATION_FLOOR = 2**13  # the stagnation rows offered whatever the step cap: fp16 stagnates past FP16_CEILING
CAP_EMULATOR, CAP_GPU = 2**12, 2**16  # steps per lane by default: the GPU replays faster


def default_cap() -> int:
    return CAP_GPU if explorer.resolve_backend("auto") == "cuda" else CAP_EMULATOR


PARAMS = (
    Param("prec_max", "int", 18, choices=EXPONENTS, sparse=True),
    Param("prec_dtype", "word", "float32", choices=tuple(explorer.DTYPES), sparse=True),
    Param("prec_variants", "words", precision.ONLINE_VARIANTS, choices=precision.ONLINE_VARIANTS, sparse=True),
    Param("prec_block", "int", 256, choices=BLOCKS, sparse=True),
    Param("prec_cap", "int", default_cap, choices=STEP_CAPS, sparse=True),
    Param("prec_quantity", "word", "d", choices=tuple(QUANTITIES), sparse=True),
    Param("prec_variant", "word", "online_thread", choices=precision.ONLINE_VARIANTS, sparse=True),
    Param("prec_cmp_acc", "word", "float16", choices=precision.ACCUMULATORS, sparse=True),
    Param("prec_cmp_dist", "word", "decreasing", choices=tuple(precision.INPUT_CLASSES), sparse=True),
    Param("prec_stag_dist", "word", "constant", choices=STAGNATION_DISTS, sparse=True),
    Param("prec_stag_n", "int", 2**13, choices=STAGNATION_NS, sparse=True),
)
OPTIONS = ParamTable(PARAMS).options  # what each widget offers: its row's choices
RECORD_COLUMNS = [
    "variant",
    "acc",
    "dist",
    "n",
    "dtype",
    "backend",
    "d",
    "exact_d",
    "d_rel_error",
    "d_bound",
    "out_max_rel",
    "bound",
    "bound_applies",
    "overflow",
    "stagnated_at",
    "sequential_terms",
    "seconds",
]


def records_frame(records: list[Measurement]) -> pd.DataFrame:
    return pd.DataFrame([dataclasses.asdict(r) for r in records], columns=RECORD_COLUMNS)


def _pow2(k: int) -> str:
    return f"2^{k} = {2**k:,}"


def _chart(fig, name: str, key: str) -> None:
    chart(fig, file_slug("softmax_precision", name), key)


# --- the page ----------------------------------------------------------------------------------------------

INTRO = r"""
A textbook rounding analysis of the online denominator: each step of
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
    _controls()
    variants = [v for v in ss["prec_variants"] if v in precision.ONLINE_VARIANTS]
    dtype, block, cap = ss["prec_dtype"], int(ss["prec_block"]), int(ss["prec_cap"])
    # the runs' progress under the controls, on the first screen, then the introduction
    records = _measure(variants, dtype, block, cap, backend) if variants else []
    st.markdown(INTRO)
    if not variants:
        st.info("Select at least one variant.", icon=":material/checklist:")
    if not records:
        return
    quantity, variant = _error_vs_n(records, variants, dtype)
    _stagnation(cap, dtype, backend)
    _overflow(records, variants)
    _bf16(records, variant, quantity)
    _tree(records, quantity)


def _controls() -> None:
    c1, c2, c3, c4 = st.columns([3, 2, 2, 2])
    c1.select_slider(
        "Largest n (rows of 2^4, 2^5, … elements up to this)", OPTIONS("prec_max"), key="prec_max", format_func=_pow2
    )
    c2.selectbox(
        "Input and output type",
        OPTIONS("prec_dtype"),
        key="prec_dtype",
        help="float16 with the float32 accumulator is the mixed-precision case: bound 3·n·u32 + u16.",
    )
    c3.select_slider("Block size B (online_block)", OPTIONS("prec_block"), key="prec_block")
    c4.select_slider(
        "Steps per lane at most",
        OPTIONS("prec_cap"),
        key="prec_cap",
        format_func=lambda v: f"{v:,}",
        help="Every run is traced, and its float64 replay walks a lane's steps in a Python loop "
        "(about 15 µs a step; the emulator's own fold about 25 µs more), so online_thread at "
        "n = 2^20 costs ~15 s a point even on the GPU and ~40 s on the emulator. Points above this "
        "cap are left out of the error charts (explorer.precision.sweep has no cap); the stagnation section "
        f"offers rows up to {STAGNATION_FLOOR:,} whatever the cap, since fp16's d stops growing only past "
        f"{FP16_CEILING:,}.",
    )
    st.multiselect(
        "Variants in the lab",
        OPTIONS("prec_variants"),
        key="prec_variants",
        format_func=variant_label,
    )


def _measure(variants: list[str], dtype: str, block: int, cap: int, backend: str) -> list[Measurement]:
    """Every point within the cap, measured (cached), with a note on what the cap left out."""
    on_gpu = backend == "cuda"
    ns = precision.powers_of_two(EXPONENTS[0], int(ss["prec_max"]))
    points = [
        (v, a, d, n)
        for v in variants
        for a in precision.ACCUMULATORS
        for d in precision.INPUT_CLASSES
        for n in ns
        if precision.lane_steps(v, n, block) <= cap
    ]
    largest = {v: max((n for n in ns if precision.lane_steps(v, n, block) <= cap), default=None) for v in variants}
    if any(m != ns[-1] for m in largest.values()):
        st.info(
            ("GPU" if on_gpu else "CPU emulation")
            + ": "
            + "; ".join(f"{v} up to n = {m:,}" if m else f"{v}: no n within the cap" for v, m in largest.items())
            + f" (at most {cap:,} steps per lane). Raise the cap to go further, at "
            + ("~15" if on_gpu else "~40")
            + " µs a step per point.",
            icon=":material/speed:",
        )
    start = time.perf_counter()
    records = lab_runs.run_points(points, dtype, block, backend)
    seconds = time.perf_counter() - start
    if records is None:
        return []
    if records:
        src = "the GPU kernels" if on_gpu else "the CPU emulation of the kernels"
        st.caption(
            f"{len(records)} runs of {src} ({seconds:.1f} s; kept for later visits); each a 1 × n row, seed 0, traced for its final d."
        )
    return records


def _error_vs_n(records: list[Measurement], variants: list[str], dtype: str) -> tuple[str, str]:
    """The main figure and every measurement; returns the chosen (quantity, variant)."""
    st.subheader("Measured error vs n, with the 3·n·u bound")
    c1, c2 = st.columns(2)
    c1.radio("Error of", OPTIONS("prec_quantity"), key="prec_quantity", format_func=QUANTITIES.get, horizontal=True)
    ensure_choice("prec_variant", variants)
    c2.selectbox("Variant", variants, key="prec_variant")
    quantity, variant = ss["prec_quantity"], ss["prec_variant"]
    fig = error_vs_n_figure(
        records,
        variant,
        quantity,
        f"{variant}: relative error of {QUANTITIES[quantity]} vs float64, {dtype} in and out",
        stamp(),
    )
    _chart(fig, f"error_vs_n_{variant}_{quantity}_{dtype}", "chart_prec_main")
    applies = [r for r in records if r.bound_applies and not math.isnan(r.out_max_rel)]  # NaN: no row measured
    within = sum(r.d_rel_error <= r.d_bound and r.out_max_rel <= r.bound for r in applies)
    st.caption(
        f"Dashed: the 3·n·u bound, drawn while below 1. Where it is below 1, {within} of {len(applies)} "
        "measured points lie within it (d and outputs, input-rounding term included). Zero errors sit on the "
        "floor; × marks d = inf."
    )
    df = records_frame(records)
    with st.expander(f"Every measurement ({len(df)} runs)"):
        show_table(df, hide_index=True, key="table_prec")
        csv_download(df, file_slug("softmax_precision", dtype), "csv_prec", index=False)
    return quantity, variant


def _stagnation(cap: int, dtype: str, backend: str) -> None:
    st.subheader("fp16 stagnation: the traced d_j flattens")
    left, right = st.columns([3, 2])
    with right:
        st.radio(
            "Stagnation input",
            OPTIONS("prec_stag_dist"),
            key="prec_stag_dist",
            horizontal=True,
            format_func=precision.INPUT_TITLES.get,
        )
        caps = [n for n in STAGNATION_NS if n <= max(cap, STAGNATION_FLOOR)]
        ensure_choice("prec_stag_n", caps, caps[min(2, len(caps) - 1)])
        st.select_slider("Stagnation row length n", caps, key="prec_stag_n", format_func=lambda v: f"{v:,}")
        n = int(ss["prec_stag_n"])
        st.markdown(TEXT_STAGNATION.format(n=n, ratio=n / FP16_CEILING))
    with left:
        dist = ss["prec_stag_dist"]
        trajectories = lab_runs.run_kept(
            "lab_stagnation",
            {
                f"online_thread, acc {a}": ("online_thread", a, dist, n, dtype, None, backend)
                for a in precision.ACCUMULATORS
            },
            lab_runs.kept_trajectory,
            lab_runs.trace_lane0,
            backend,
            "traces",
            "Choose a shorter stagnation row, or run it anyway: it shows its progress and can be stopped "
            "between accumulators.",
            "choose a shorter stagnation row",
        )
        if trajectories is None:
            return
        _chart(
            stagnation_figure(
                trajectories,
                f"online_thread, {precision.INPUT_TITLES[dist]} row of {n:,}: traced d_j per accumulator",
                stamp(),
                width=COLUMN_PX,
            ),
            "stagnation",
            "chart_prec_stag",
        )
        frozen = [
            f"{t.acc} at d = {t.d[t.stagnated_at - 1]:g} from j = {t.stagnated_at:,}"
            for t in trajectories
            if t.stagnated_at is not None
        ]
        caption = "Frozen: " + ("; ".join(frozen) if frozen else "none at this n") + "."
        if dist != "constant" and trajectories:  # the text beside the chart works through the constant row
            exact = float(trajectories[0].exact_d[-1])
            caption += (
                f" This {precision.INPUT_TITLES[dist]} row's exact d_n is {exact:,.6g}; the numbers beside the chart "
                "are the constant row's."
            )
        st.caption(caption)


def _overflow(records: list[Measurement], variants: list[str]) -> None:
    st.subheader("fp16 overflow of d beyond 65504")
    left, right = st.columns([3, 2])
    with right:
        st.markdown(TEXT_OVERFLOW)
    with left:
        recs = [r for r in records if r.acc == "float16" and r.dist == "constant"]
        _chart(
            overflow_figure(recs, "final d_n in fp16 on a constant row (exact d_n = n)", stamp(), width=COLUMN_PX),
            "overflow",
            "chart_prec_overflow",
        )
        first = {v: min((r.n for r in recs if r.variant == v and r.overflow), default=None) for v in variants}
        st.caption(
            "First overflow: "
            + "; ".join(f"{v}: n = {m:,}" if m else f"{v}: none up to the largest n run" for v, m in first.items())
            + "."
        )


def _bf16(records: list[Measurement], variant: str, quantity: str) -> None:
    st.subheader("bf16's coarser unit roundoff")
    left, right = st.columns([3, 2])
    with right:
        st.markdown(TEXT_BF16)
    with left:
        recs = [r for r in records if r.variant == variant and r.dist == "decreasing"]
        _chart(
            compare_figure(
                recs,
                "acc",
                quantity,
                f"{variant}, monotone decreasing row: error of {QUANTITIES[quantity]} per accumulator, bounds dashed",
                stamp(),
                width=COLUMN_PX,
            ),
            "bf16",
            "chart_prec_bf16",
        )


def _tree(records: list[Measurement], quantity: str) -> None:
    st.subheader("Warp and block variants cut the error")
    left, right = st.columns([3, 2])
    with right:
        st.selectbox("Accumulator compared", OPTIONS("prec_cmp_acc"), key="prec_cmp_acc")
        st.selectbox(
            "Input compared", OPTIONS("prec_cmp_dist"), key="prec_cmp_dist", format_func=precision.INPUT_TITLES.get
        )
        st.markdown(TEXT_TREE)
    with left:
        acc, dist = ss["prec_cmp_acc"], ss["prec_cmp_dist"]
        recs = [r for r in records if r.acc == acc and r.dist == dist]
        _chart(
            compare_figure(
                recs,
                "variant",
                quantity,
                f"{precision.INPUT_TITLES[dist]} row, acc {acc}: error of {QUANTITIES[quantity]} per variant, "
                "bounds dashed",
                stamp(),
                width=COLUMN_PX,
            ),
            "variants",
            "chart_prec_tree",
        )


PAGE = Page(
    precision_page,
    "Precision lab",
    "precision",
    ":material/straighten:",
    params=PARAMS,
    sidebar=(),
)

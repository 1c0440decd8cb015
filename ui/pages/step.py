"""The Step-through page: one lane's running (m, d) step by step, the update written out with its numbers
and bits, every lane's partial states, and the merge tree."""

from __future__ import annotations

import math

import numpy as np
import streamlit as st

import explorer
from explorer.trace import Trace

from .. import compute, figures
from ..common import chart, clamp, ensure_choice, guarded, stamp, start_page, variant_label
from ..figures.common import format_value
from ..figures.lanes import heat_white_note
from ..figures.step import StepNumbers, masked_lane_note
from ..page import Page
from ..params import Param, ParamTable
from ..run_control import duration, held_back
from ..state import MAX_DIM, Config, InputSpec
from . import merges
from .merges import merges_section

ss = st.session_state
PLAY_SECONDS = 0.7  # a tick while playing: `speed` steps each
SPEEDS = (1, 2, 5, 10, 50)  # steps a tick: one at a time to follow the update, faster to cross a long row
HEAT_CHOICES = {"d": "kernel's d (log10)", "m": "kernel's m", "err": "relative error of d (log10)"}
PARAMS = (
    Param("tv", "word", "", choices=lambda: tuple(explorer.VARIANTS), hint="unknown variant"),
    Param("lane", "int", 0, low=0, high=MAX_DIM),  # clamped to the trace's lanes once it is run
    Param("step", "int", 0, low=0, high=MAX_DIM),
    Param("speed", "int", 1, low=1, high=SPEEDS[-1], choices=SPEEDS),
    Param("heat", "word", "d", choices=tuple(HEAT_CHOICES)),
)
OPTIONS = ParamTable(PARAMS).options  # what each widget offers: its row's choices


def latex_number(v: float) -> str:
    if math.isnan(v):
        return r"\mathrm{NaN}"
    if math.isinf(v):
        return r"\infty" if v > 0 else r"-\infty"
    s = f"{v:.7g}"
    if "e" in s:
        mant, exp = s.split("e")
        return rf"{mant}\times 10^{{{int(exp)}}}"
    return s


@guarded
def step_page() -> None:
    cfg, spec = start_page("Step through")
    if cfg is None:
        return
    traceable = [k for k in cfg.variants if explorer.VARIANTS[k].traceable]
    if not traceable:
        st.info(
            "None of the selected variants records a trace. Traceable: "
            + ", ".join(k for k, v in explorer.VARIANTS.items() if v.traceable)
            + "."
        )
        return
    online = [k for k in traceable if explorer.VARIANTS[k].method == "online"]
    ensure_choice("tv", traceable, online[0] if online else None, "Variant to trace", variant_label)
    c1, c2 = st.columns(2)
    c1.selectbox("Variant to trace", traceable, key="tv", format_func=variant_label)
    key = ss["tv"]
    if _held_back(cfg, spec, key):
        return
    with st.spinner(f"Tracing row {cfg.row} through {key}…"):
        trace = compute.trace_row(spec, cfg.row, key, cfg.acc, cfg.block_for(key))
    lane = _choose_lane(trace, c2)
    note = figures.row_nan_note(trace, cfg.row)
    if note:
        st.warning(note, icon=":material/error:")
    if figures.lane_steps(trace, lane).size == 0:
        st.info(
            f"Lane {lane} gets no element of this {cfg.cols}-element row, so it has no steps; pick a lower lane. "
            "Its state stays (−∞, 0) in the lanes and the merge tree below."
        )
    else:
        _fresh_step((cfg.describe(), cfg.row, key, lane))
        playing = bool(ss.get("_playing"))
        ss["_ticking"] = playing
        st.fragment(_step_view, run_every=PLAY_SECONDS if playing else None)(trace, lane, cfg, key)
    if trace.threads > 1:
        _lanes(trace, cfg, key)
    if trace.merges:
        merges_section(trace, cfg, key)


def _held_back(cfg: Config, spec: InputSpec, key: str) -> bool:
    """A trace not kept yet, estimated over this server's time budget (explorer.budget.run_seconds, the trace
    included) waits for "Run anyway" (ui.run_control.held_back). Once started it runs to its end: a trace is made in
    one call, with no progress to stop at."""
    block = cfg.block_for(key)
    seconds = compute.trace_cost(spec, cfg.row, key, cfg.acc, block)
    gpu = compute.backend() == "cuda"
    where = "on the GPU (the trace's float64 replay, on the host)" if gpu else "in the CPU emulation"
    rows = (
        f"every row of the {cfg.rows:,}×{cfg.cols:,} input"
        if compute.traced_rows(key, cfg.rows, cfg.cols, block, cfg.dtype) > 1
        else f"row {cfg.row:,} ({cfg.cols:,} elements)"
    )
    return held_back(
        "trace",
        (spec, cfg.row, key, cfg.acc, block, compute.backend()),
        seconds,
        f"tracing {rows} through {key} would take about {duration(seconds)} {where} (estimated from the shape "
        "and the variant's lanes)",
        "Make cols smaller or trace a variant with more lanes per row (online_warp, online_block), or run it "
        "anyway: once started, a trace runs to its end.",
    )


def _choose_lane(trace: Trace, column) -> int:
    if trace.threads == 1:
        return 0
    clamp("lane", 0, trace.threads - 1, "Lane")
    column.number_input(
        f"Lane (0–{trace.threads - 1}) to step through",
        min_value=0,
        max_value=trace.threads - 1,
        step=1,
        key="lane",
        help="Each lane folds a strided share of the row: elements lane, lane + lanes, lane + 2·lanes, …",
    )
    return int(ss["lane"])


def _fresh_step(what: tuple) -> None:
    """A new input, row, variant or lane starts at step 0 (a step kept from another input may sit anywhere,
    say in a masked tail); the first view of a session keeps the URL's step."""
    if ss.get("_step_of") not in (None, what):
        ss["step"] = 0
        ss["_playing"] = False
    ss["_step_of"] = what


def _set_playing(playing: bool) -> None:
    ss["_playing"] = playing


def _set_step(value: int) -> None:
    ss["step"] = int(value)


JUMPS = "step_jumps"  # the Jump popover's open state


def _jump_to(value: int) -> None:
    """A jump's step, and the popover closed: left open, it hid the chart's legend after the jump."""
    _set_step(value)
    ss[JUMPS] = False


def _jump(
    column, label: str, key: str, step: int, to: int | None, help: str, icon: str | None = None, closes: bool = False
) -> None:
    """A button that moves the step to `to` (and, in the Jump popover, closes it: closes); disabled where there is
    nowhere to go (to is None)."""
    column.button(
        label,
        key=key,
        icon=icon,
        width="stretch",
        on_click=_jump_to if closes else _set_step,
        args=(step if to is None else to,),
        disabled=to is None,
        help=help,
    )


@guarded
def _step_view(trace: Trace, lane: int, cfg: Config, key: str) -> None:
    """A line of the update's numbers, the step control under it (the slider, then ◀ ▶, Play and its speed, the
    jumps) and the chart, so that at 1280×720 all three are on the screen while the step moves; the update written out
    and its bits under the chart. A fragment: a step, a jump or a Play tick reruns only this part."""
    steps = figures.lane_steps(trace, lane)
    last = int(steps[-1])
    clamp("step", int(steps[0]), last, "Step")
    if ss["step"] >= last:
        ss["_playing"] = False
    if bool(ss.get("_playing")) != ss.get("_ticking"):
        st.rerun()  # the whole page again: the fragment starts or stops ticking
    if ss.get("_playing"):
        ahead = np.searchsorted(steps, ss["step"], side="right") + int(ss.get("speed", 1)) - 1
        ss["step"] = int(steps[min(ahead, steps.size - 1)])
    numbers = st.empty()  # over the slider, as its label: the numbers of the step it selects
    step = _controls(trace, lane, steps)
    n = figures.step_numbers(trace, lane, step)
    numbers.markdown(_numbers_line(n, trace.acc))
    lane_title = f", lane {lane}" if trace.threads > 1 else ""
    fig = figures.step_figure(
        trace, lane, step, f"{key}, row {cfg.row}{lane_title}: running (m, d), acc {cfg.acc}", stamp()
    )
    chart(fig, cfg.slug(f"step_{key}_lane{lane}"), "chart_step")
    if note := masked_lane_note(trace, lane):
        st.caption(note)
    if note := figures.sampled_steps_note(len(steps)):
        st.caption(f"{note}; step j is always drawn.")
    _update(n, trace, key)
    bad = figures.first_nonfinite(trace, lane)
    if bad is not None and step >= bad:
        st.caption(f"$d$ is not finite: {figures.nonfinite_cause(trace, lane, bad)}.")
    bits_section(trace, n)
    from ..url import sync_url  # here: ui.url joins the pages' parameters, this page's among them

    # a Play tick reruns only this fragment, and the URL follows the step; the URL message of a tick that a click
    # (Pause, the slider) interrupted can reach the browser after that click's run has begun, so a run that is not
    # a tick writes the URL again even where it looks unchanged
    sync_url(force=not ss.get("_playing"))


def _controls(trace: Trace, lane: int, steps: np.ndarray) -> int:
    """The slider across the page (its label the line of numbers over it), then one row: ◀ ▶, Play or Pause, the
    speed, and the two jumps (to the next rescale, to the first non-finite d) in a popover. Their labels fit a 540 px
    column (a 1000 px window)."""
    first, last = int(steps[0]), int(steps[-1])
    if last > first:
        st.slider("Step j", first, last, key="step", label_visibility="collapsed")
    step = int(ss["step"])
    grows = figures.rescale_steps(trace, lane)
    later = grows[grows > step]
    next_rescale = int(later[0]) if later.size else None
    bad = figures.first_nonfinite(trace, lane)
    playing = bool(ss.get("_playing"))
    ensure_choice("speed", OPTIONS("speed"), 1)
    b = st.columns([1, 1, 1.8, 1.4, 1.8], vertical_alignment="bottom")
    _jump(b[0], "◀", "step_prev", step, step - 1 if step > first else None, "Previous step")
    _jump(b[1], "▶", "step_next", step, step + 1 if step < last else None, "Next step")
    # Play and Pause are two buttons with their own keys, each setting its state: a click that Streamlit
    # delivers again after the redraw (a timed fragment rerun can carry it) finds no button of that key
    b[2].button(
        "❚❚ Pause" if playing else "▶ Play",
        key="step_pause" if playing else "step_play",
        disabled=step >= last and not playing,
        width="stretch",
        on_click=_set_playing,
        args=(not playing,),
        help=f"{ss['speed']} step(s) every {PLAY_SECONDS:g} s, run on the server",
    )
    b[3].selectbox(
        "Steps a tick",
        OPTIONS("speed"),
        key="speed",
        label_visibility="collapsed",
        format_func=lambda v: f"×{v}",
        help=f"Steps Play moves every {PLAY_SECONDS:g} s: ×1 to follow each update, more to cross a long row",
    )
    rescale_help = (
        f"The next step where m grows ({grows.size:,} in this lane)"
        if trace.kind == "online"
        else "Safe softmax never rescales"
    )
    nan_help = "The first step where d is NaN or ±∞" if bad is not None else "d stays finite in this lane"
    jumps = b[4].popover(
        "Jump",
        icon=":material/fast_forward:",
        width="stretch",
        help="To the next rescale, or to the first step where d is not finite",
        key=JUMPS,
        on_change="rerun",  # its open state in ss[JUMPS], which a jump sets to closed
    )
    _jump(jumps, "Next rescale", "step_rescale", step, next_rescale, rescale_help, ":material/trending_up:", True)
    _jump(jumps, "First non-finite", "step_nan", step, bad, nan_help, ":material/error:", True)
    return step


def _numbers_line(n: StepNumbers, acc: str) -> str:
    """The update's numbers in one line of Markdown, over the slider: the step and its element, x_j, the max, the
    kernel's d_j beside float64's and its relative error (the update is written out in full under the chart)."""
    rel = "**0** (exact: both 0)" if n.d == n.exact_d == 0 else f"**{format_value(n.rel_err, 3)}**"
    m = f"$m_j$ = {format_value(n.m)}" if n.kind == "online" else f"row max $m$ = {format_value(n.row_max)}"
    held = f" ({format_value(n.x_held)} in {acc})" if _rounded_on_entry(n) else ""
    return (
        f"**Step j = {n.step}** (element {n.element}) · $x_j$ = {format_value(n.x)}{held} · {m} · "
        f"$d_j$ = **{_nine(n.d)}**, float64 **{_nine(n.exact_d)}** · relative error {rel}"
    )


def _rounded_on_entry(n: StepNumbers) -> bool:
    """Whether the accumulator holds x_j as another number (a narrower accumulator than the input)."""
    return math.isfinite(n.x) and n.x_held != n.x


def _update(n: StepNumbers, trace: Trace, key: str) -> None:
    """The update at step j in LaTeX: m, then d_{j-1} → d_{j-1}·factor → + term, with the kernel's numbers (x_j as
    the accumulator holds it)."""
    f = latex_number
    st.markdown(f"##### The update at step j = {n.step} (element {n.element})")
    st.caption(explorer.VARIANTS[key].lesson)
    if _rounded_on_entry(n):
        st.caption(
            f"The kernel folds each input rounded to its {trace.acc} accumulator: $x_j$ = {_nine(n.x)} is held "
            f"as {_nine(n.x_held)}, the $x_j$ below."
        )
    if n.kind == "safe":
        st.latex(
            rf"m_j = \max(m_{{j-1}}, x_j) = {f(n.m)} \quad\text{{(pass 1; pass 2 uses the row max }}"
            rf"m = {f(n.row_max)})"
        )
        st.latex(
            rf"d_j = d_{{j-1}} + e^{{x_j - m}} = {f(n.prev_d)} + e^{{{f(n.x_held)} - ({f(n.row_max)})}}"
            rf" = {f(n.prev_d)} + {f(n.term)} = {f(n.d)}"
        )
    else:
        st.latex(rf"m_j = \max(m_{{j-1}}, x_j) = \max({f(n.prev_m)},\ {f(n.x_held)}) = {f(n.m)}")
        st.latex(_factor(n))
        st.latex(
            rf"d_{{j-1}} = {f(n.prev_d)} \;\xrightarrow{{\times\,{_factor_value(n)}}}\; {f(n.product)}"
            rf" \;\xrightarrow{{+\,e^{{x_j - m_j}} = {f(n.term)}}}\; d_j = {f(n.d)}"
        )
    if n.kind == "online" and n.prev_m == n.m and not math.isfinite(n.m):
        m = latex_number(n.m)
        st.caption(
            rf"$m_{{j-1}} = m_j = {m}$: the kernel's guard keeps d as it is when the maxima are equal; "
            rf"$e^{{m_{{j-1}} - m_j}}$ itself would be $e^{{{m} - ({m})}}$, which is undefined."
        )
    st.caption(
        f"Final state of the row: kernel (m, d) = ({_nine(trace.final_m)}, {_nine(trace.final_d)}); "
        f"float64 ({_nine(trace.exact_final_m)}, {_nine(trace.exact_final_d)})."
    )


def _nine(v: float) -> str:
    """Nine significant digits; NaN and ±∞ in words."""
    return f"{v:.9g}" if math.isfinite(v) else format_value(v)


def _factor(n: StepNumbers) -> str:
    """The rescale factor's line in LaTeX: its value where m grew, why there is none where it did not."""
    f = latex_number
    if n.m > n.prev_m:
        return rf"e^{{m_{{j-1}} - m_j}} = e^{{{f(n.prev_m)} - ({f(n.m)})}} = {f(n.scale)}"
    if math.isnan(n.m):
        return r"e^{m_{j-1} - m_j} = \mathrm{NaN}"
    return r"m_j = m_{j-1}:\ \text{no rescale (factor 1)}"


def _factor_value(n: StepNumbers) -> str:
    return r"\mathrm{NaN}" if math.isnan(n.m) else latex_number(n.scale) if n.m > n.prev_m else "1"


def bits_section(trace: Trace, n: StepNumbers) -> None:
    """The bit-level view of the traced d_j at the current step."""
    if not math.isfinite(n.x):
        return
    parts = n.parts
    st.subheader(f"The bits of $d_j$ at step {n.step}, in {trace.acc}")
    st.markdown(figures.bits_html(parts, trace.acc, n.prev_d, n.exact_d), unsafe_allow_html=True)
    same = parts.d == n.d or (math.isnan(parts.d) and math.isnan(n.d))
    added = f"The kernel adds {parts.product:.9g} and {parts.term:.9g}"
    if parts.sum == parts.d:
        note = f"{added}; the sum {parts.d:.9g} fits in {trace.acc}'s places: exact, nothing lost."
    else:
        note = (
            f"{added}; the exact sum {parts.sum:.9g} needs bits below $d_j$'s last {trace.acc} place, and rounding "
            f"to {trace.acc} gives {parts.d:.9g} (lost {parts.sum - parts.d:+.3g})."
        )
    if parts.term != 0 and parts.d == parts.product:
        note += " The whole term rounded away: d did not move (stagnation)."
    if not same:
        note += (
            f" (The product and term are recomputed in the accumulator model of kernels/common.cuh; the traced "
            f"$d_j$ is {n.d:.9g}, one of expf's last-place differences on the GPU.)"
        )
    st.caption(note)


def _lanes(trace: Trace, cfg: Config, key: str) -> None:
    st.subheader(f"All {trace.threads} lanes' partial states")
    ensure_choice("heat", list(HEAT_CHOICES), "d")
    st.radio("Colour by", OPTIONS("heat"), key="heat", format_func=HEAT_CHOICES.get, horizontal=True)
    heat = figures.lanes_heatmap(
        trace, ss["heat"], f"{key}, row {cfg.row}: {HEAT_CHOICES[ss['heat']]} per lane and step", stamp()
    )
    chart(heat, cfg.slug(f"lanes_{key}"), "chart_lanes")
    if note := heat_white_note(trace, ss["heat"]):
        st.caption(note)


PAGE = Page(
    step_page,
    "Step through",
    "step",
    ":material/step:",
    params=PARAMS + merges.PARAMS,
    runs_the_shape=True,
)

"""The Step-through page: one lane's running (m, d) step by step, the update written out with its numbers
and bits, every lane's partial states, and the merge tree."""

from __future__ import annotations

import math

import streamlit as st

import explorer
from explorer import precision
from explorer.trace import Trace

from .. import compute, figures
from ..common import chart, clamp, config_and_spec, csv_download, ensure_choice, guarded, header, stamp
from ..params import Param
from ..state import MAX_DIM, Config

ss = st.session_state
HEAT_CHOICES = {"d": "kernel's d (log10)", "m": "kernel's m", "err": "relative error of d (log10)"}
PARAMS = (
    Param("tv", "word", "", choices=lambda: tuple(explorer.VARIANTS), hint="unknown variant"),
    Param("lane", "int", 0, low=0, high=1023),
    Param("step", "int", 0, low=0, high=MAX_DIM),
    Param("heat", "word", "d", choices=tuple(HEAT_CHOICES)),
    Param("tree", "text", ""),
)


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
    cfg, spec = config_and_spec()
    header("Step through", cfg)
    if cfg is None:
        return
    traceable = [k for k in cfg.variants if explorer.VARIANTS[k].traceable]
    if not traceable:
        st.info("None of the selected variants records a trace. Traceable: "
                + ", ".join(k for k, v in explorer.VARIANTS.items() if v.traceable) + ".")
        return
    online = [k for k in traceable if explorer.VARIANTS[k].method == "online"]
    ensure_choice("tv", traceable, online[0] if online else None)
    c1, c2 = st.columns(2)
    c1.selectbox("Variant to trace", traceable, key="tv", format_func=lambda k: f"{k} — {explorer.VARIANTS[k].title}")
    key = ss["tv"]
    with st.spinner(f"Tracing row {cfg.row} through {key}…"):
        trace = compute.trace_row(spec, cfg.row, key, cfg.acc, cfg.block_for(key))
    st.caption(explorer.VARIANTS[key].lesson)
    lane = _choose_lane(trace, c2)
    count = int((trace.index[lane] >= 0).sum())
    if count == 0:
        st.info(f"Lane {lane} gets no element of this {cfg.cols}-element row; pick a lower lane.")
        return
    step = _choose_step(count)
    start, stop = figures.step_window(count, step)
    if stop - start < count:
        st.info(f"This lane has {count} steps: the animation holds steps {start}–{stop - 1} "
                f"({figures.MAX_FRAMES} frames) around step j; move the step slider to shift the window.",
                icon=":material/view_week:")
    lane_title = f", lane {lane}" if trace.threads > 1 else ""
    fig = figures.step_figure(trace, lane, start, stop, step, f"{key}, row {cfg.row}{lane_title}: running (m, d), "
                              f"acc {cfg.acc}", stamp())
    chart(fig, cfg.slug(f"step_{key}_lane{lane}"), "chart_step")
    _update(trace, lane, step)
    bits_section(trace, lane, step)
    if trace.threads > 1:
        _lanes(trace, cfg, key)
    if trace.merges:
        _merges(trace, cfg, key)


def _choose_lane(trace: Trace, column) -> int:
    if trace.threads == 1:
        return 0
    clamp("lane", 0, trace.threads - 1)
    column.number_input(f"Lane (0–{trace.threads - 1}) to step through", min_value=0, max_value=trace.threads - 1,
                        step=1, key="lane", help="Each lane folds a strided share of the row: elements lane, "
                                                 "lane + lanes, lane + 2·lanes, …")
    return int(ss["lane"])


def _choose_step(count: int) -> int:
    clamp("step", 0, count - 1)
    if count > 1:
        st.slider("Step j (server side: writes the update out below and centres the animation)", 0, count - 1,
                  key="step")
    return int(ss["step"])


def _update(trace: Trace, lane: int, step: int) -> None:
    """The update at step j in LaTeX, with the kernel's and float64's d_j."""
    n = figures.step_numbers(trace, lane, step)
    f = latex_number
    st.subheader(f"The update at step j = {step} (element {n.element})")
    st.latex(rf"m_j = \max(m_{{j-1}}, x_j) = \max({f(n.prev_m)},\ {f(n.x)}) = {f(n.m)}")
    if n.kind == "safe":
        st.latex(rf"d_j = d_{{j-1}} + e^{{x_j - m}} = {f(n.prev_d)} + e^{{{f(n.x)} - ({f(n.row_max)})}}"
                 rf" = {f(n.prev_d)} + {f(n.term)} = {f(n.d)}")
        st.caption("Safe softmax: pass 1 finds the row max m, pass 2 sums e^(x_j − m) with that final m, so no "
                   "rescale is needed.")
    else:
        st.latex(rf"e^{{m_{{j-1}} - m_j}} = e^{{{f(n.prev_m)} - ({f(n.m)})}} = {f(n.scale)}")
        st.latex(rf"d_j = d_{{j-1}}\,e^{{m_{{j-1}} - m_j}} + e^{{x_j - m_j}} = {f(n.prev_d)}\cdot{f(n.scale)}"
                 rf" + {f(n.term)} = {f(n.d)}")
    c1, c2, c3 = st.columns(3)
    c1.metric("kernel d_j", f"{n.d:.9g}")
    c2.metric("exact d_j (float64)", f"{n.exact_d:.9g}")
    c3.metric("relative error of d_j", f"{n.rel_err:.3g}")
    st.caption(f"Final state of the row: kernel (m, d) = ({trace.final_m:.9g}, {trace.final_d:.9g}); "
               f"float64 ({trace.exact_final_m:.9g}, {trace.exact_final_d:.9g}).")


def bits_section(trace: Trace, lane: int, step: int) -> None:
    """The bit-level view of the traced d_j at the current step."""
    n = figures.step_numbers(trace, lane, step)
    if not math.isfinite(n.x):
        return
    prev_m, m = (n.row_max, n.row_max) if trace.kind == "safe" else (n.prev_m, n.m)
    parts = precision.update_parts(prev_m, n.prev_d, m, n.x, trace.acc)
    st.subheader(f"The bits of d_j at step {step}, in {trace.acc}")
    st.markdown(figures.bits_html(parts, trace.acc, n.prev_d, n.exact_d), unsafe_allow_html=True)
    same = parts.d == n.d or (math.isnan(parts.d) and math.isnan(n.d))
    note = (f"The kernel adds {parts.product:.9g} and {parts.term:.9g}; the exact sum {parts.sum:.9g} needs "
            f"bits below d_j's last {trace.acc} place, and rounding to {trace.acc} gives {parts.d:.9g} "
            f"(lost {parts.sum - parts.d:+.3g}).")
    if parts.term != 0 and parts.d == parts.product:
        note += " The whole term rounded away: d did not move (stagnation)."
    if not same:
        note += (f" (The product and term are recomputed in the accumulator model of kernels/common.cuh; the traced "
                 f"d_j is {n.d:.9g}, one of expf's last-place differences on the GPU.)")
    st.caption(note)


def _lanes(trace: Trace, cfg: Config, key: str) -> None:
    st.subheader(f"All {trace.threads} lanes' partial states")
    ensure_choice("heat", list(HEAT_CHOICES), "d")
    st.radio("Colour by", list(HEAT_CHOICES), key="heat", format_func=HEAT_CHOICES.get, horizontal=True)
    heat = figures.lanes_heatmap(trace, ss["heat"], f"{key}, row {cfg.row}: {HEAT_CHOICES[ss['heat']]} per lane "
                                 "and step", stamp())
    chart(heat, cfg.slug(f"lanes_{key}"), "chart_lanes")


def _merges(trace: Trace, cfg: Config, key: str) -> None:
    st.subheader("Merge tree")
    st.caption("(m, d) pairs merge like single elements: m = max(m₁, m₂), d = d₁·e^(m₁−m) + d₂·e^(m₂−m). "
               "Each level of the butterfly halves the number of partial states; node colour is the relative "
               "error of its d against float64.")
    choices = figures.tree_choices(trace)
    ensure_choice("tree", choices, "across warps")
    st.selectbox("Butterfly", choices, key="tree")
    tree = figures.merge_tree_figure(trace, ss["tree"], f"{key}, row {cfg.row}: merge tree, {ss['tree']}", stamp())
    chart(tree, cfg.slug(f"merge_{key}"), "chart_tree")
    table = figures.merge_table(trace)
    with st.expander(f"Every merge, level by level ({len(table)} nodes)"):
        st.dataframe(table, width="stretch", hide_index=True, key="table_merges")
        csv_download(table, cfg, f"merges_{key}", "csv_merges")

"""The five views. Each page is a function; compute goes through ui.compute's cached functions."""

from __future__ import annotations

import dataclasses
import json
import math
import re

import numpy as np
import pandas as pd
import streamlit as st

import explorer

from . import compute, figures, timing
from .common import chart, config_and_spec, csv_download, guarded, header, run_all, show_failures, stamp
from .state import HEAT_CHOICES

ss = st.session_state


def _ensure_choice(key: str, options: list, default=None) -> None:
    if ss.get(key) not in options:
        ss[key] = default if default in options else options[0]


def _clamp(key: str, low: int, high: int) -> None:
    try:
        ss[key] = min(max(int(ss.get(key, low)), low), high)
    except (TypeError, ValueError):
        ss[key] = low


def run_page(title: str):
    """The start of a page over the chosen variants' results: its header, every variant run (failures
    shown); (cfg, spec, results, failed), or None when there is nothing to show."""
    cfg, spec = config_and_spec()
    header(title, cfg)
    if cfg is None:
        return None
    results, failed = run_all(cfg, spec)
    show_failures(failed)
    return (cfg, spec, results, failed) if results else None


# --- 1. outputs ---------------------------------------------------------------------------------------

@guarded
def outputs_page() -> None:
    ran = run_page("Outputs")
    if ran is None:
        return
    cfg, spec, results, failed = ran
    ref = compute.get_reference(spec)[cfg.row]
    st.toggle("Log scale", key="log", help="Probabilities span many decades; zeros cannot sit on a log axis "
                                          "and are marked in the strip under the plot instead.")
    outputs = {k: r["out"][cfg.row] for k, r in results.items()}
    fig = figures.outputs_figure(ref, outputs, bool(ss["log"]),
                                 f"Softmax of row {cfg.row}: each variant vs the float64 reference", stamp())
    chart(fig, cfg, "outputs", "chart_outputs")

    rows = []
    for k, y in outputs.items():
        y64 = np.asarray(y, dtype=np.float64)
        finite = np.isfinite(y64)
        rows.append({"variant": k, "backend": results[k]["backend"], "sum of row": float(y64[finite].sum()),
                     "max p": float(y64[finite].max()) if finite.any() else math.nan,
                     "argmax": int(np.nanargmax(np.where(finite, y64, -np.inf))) if finite.any() else -1,
                     "NaN": int(np.isnan(y64).sum()), "inf": int(np.isinf(y64).sum()),
                     "zeros": int((y64 == 0).sum()), "wall ms (not a benchmark)": 1e3 * results[k]["seconds"]})
    finite = np.isfinite(ref)
    rows.append({"variant": "float64 reference", "backend": "numpy", "sum of row": float(ref[finite].sum()),
                 "max p": float(ref[finite].max()) if finite.any() else math.nan,
                 "argmax": int(np.nanargmax(np.where(finite, ref, -np.inf))) if finite.any() else -1,
                 "NaN": int(np.isnan(ref).sum()), "inf": int(np.isinf(ref).sum()), "zeros": int((ref == 0).sum()),
                 "wall ms (not a benchmark)": math.nan})
    df = pd.DataFrame(rows).set_index("variant")
    st.subheader(f"Row {cfg.row} at a glance")
    st.dataframe(df, width="stretch", key="table_outputs")
    c1, c2 = st.columns(2)
    with c1:
        csv_download(df, cfg, "outputs", "csv_outputs")
    with c2:
        st.download_button("Download this run (JSON)", run_json(cfg, spec, results, failed),
                           file_name=f"{cfg.slug('run')}.json", mime="application/json", key="json_run",
                           icon=":material/data_object:", on_click="ignore")


def run_json(cfg, spec, results: dict, failed: dict) -> str:
    """A run's results: configuration, backend, and per variant its launch, errors and the shown row."""
    out = {"schema": "softmax-explorer-run/1", "config": {**dataclasses.asdict(cfg), "params": dict(cfg.params)},
           "backend": compute.backend_info(), "stamp": stamp(), "variants": {}, "failed": failed}
    ref = compute.get_reference(spec)[cfg.row]
    out["reference_row"] = [None if not math.isfinite(v) else v for v in ref.tolist()]
    for k, r in results.items():
        y = np.asarray(r["out"][cfg.row], dtype=np.float64)
        out["variants"][k] = {
            "backend": r["backend"], "block_size": r["block_size"], "launch": dataclasses.asdict(r["launch"]),
            "errors": compute.error_report(spec, k, cfg.acc, cfg.block_for(k)),
            "row": [None if not math.isfinite(v) else v for v in y.tolist()],
            "row_nonfinite": {str(i): str(v) for i, v in enumerate(y.tolist()) if not math.isfinite(v)},
        }
    return json.dumps(out, indent=1, default=float)


# --- 2. step through ------------------------------------------------------------------------------------

def _latex_num(v: float) -> str:
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
    _ensure_choice("tv", traceable, online[0] if online else None)
    c1, c2 = st.columns(2)
    c1.selectbox("Variant to trace", traceable, key="tv",
                 format_func=lambda k: f"{k} — {explorer.VARIANTS[k].title}")
    key = ss["tv"]
    v = explorer.VARIANTS[key]
    with st.spinner(f"Tracing row {cfg.row} through {key}…"):
        trace = compute.trace_row(spec, cfg.row, key, cfg.acc, cfg.block_for(key))
    st.caption(v.lesson)

    lane = 0
    if trace.threads > 1:
        _clamp("lane", 0, trace.threads - 1)
        c2.number_input(f"Lane (0–{trace.threads - 1}) to step through", min_value=0, max_value=trace.threads - 1,
                        step=1, key="lane", help="Each lane folds a strided share of the row: elements lane, "
                                                 "lane + lanes, lane + 2·lanes, …")
        lane = int(ss["lane"])
    count = int((trace.index[lane] >= 0).sum())
    if count == 0:
        st.info(f"Lane {lane} gets no element of this {cfg.cols}-element row; pick a lower lane.")
        return
    _clamp("step", 0, count - 1)
    if count > 1:
        st.slider("Step j (server side: writes the update out below and centres the animation)", 0, count - 1,
                  key="step")
    step = int(ss["step"])
    start, stop = figures.step_window(count, step)
    if stop - start < count:
        st.info(f"This lane has {count} steps: the animation holds steps {start}–{stop - 1} "
                f"({figures.MAX_FRAMES} frames) around step j; move the step slider to shift the window.",
                icon=":material/view_week:")
    title = f"{key}, row {cfg.row}" + (f", lane {lane}" if trace.threads > 1 else "") + f": running (m, d), acc {cfg.acc}"
    fig = figures.step_figure(trace, lane, start, stop, step, title, stamp())
    chart(fig, cfg, f"step_{key}_lane{lane}", "chart_step")

    n = figures.step_numbers(trace, lane, step)
    f = _latex_num
    st.subheader(f"The update at step j = {step} (element {n['element']})")
    st.latex(rf"m_j = \max(m_{{j-1}}, x_j) = \max({f(n['prev_m'])},\ {f(n['x'])}) = {f(n['m'])}")
    if n["kind"] == "safe":
        st.latex(rf"d_j = d_{{j-1}} + e^{{x_j - m}} = {f(n['prev_d'])} + e^{{{f(n['x'])} - ({f(n['row_max'])})}}"
                 rf" = {f(n['prev_d'])} + {f(n['term'])} = {f(n['d'])}")
        st.caption("Safe softmax: pass 1 finds the row max m, pass 2 sums e^(x_j − m) with that final m, so no "
                   "rescale is needed.")
    else:
        st.latex(rf"e^{{m_{{j-1}} - m_j}} = e^{{{f(n['prev_m'])} - ({f(n['m'])})}} = {f(n['scale'])}")
        st.latex(rf"d_j = d_{{j-1}}\,e^{{m_{{j-1}} - m_j}} + e^{{x_j - m_j}} = {f(n['prev_d'])}\cdot{f(n['scale'])}"
                 rf" + {f(n['term'])} = {f(n['d'])}")
    c1, c2, c3 = st.columns(3)
    c1.metric("kernel d_j", f"{n['d']:.9g}")
    c2.metric("exact d_j (float64)", f"{n['exact_d']:.9g}")
    c3.metric("relative error of d_j", f"{n['rel_err']:.3g}")
    st.caption(f"Final state of the row: kernel (m, d) = ({trace.final_m:.9g}, {trace.final_d:.9g}); "
               f"float64 ({trace.exact_final_m:.9g}, {trace.exact_final_d:.9g}).")
    from .precision import bits_section  # the precision lab's bit-level view of d_j
    bits_section(trace, lane, step)

    if trace.threads > 1:
        st.subheader(f"All {trace.threads} lanes' partial states")
        _ensure_choice("heat", list(HEAT_CHOICES), "d")
        st.radio("Colour by", list(HEAT_CHOICES), key="heat", format_func=HEAT_CHOICES.get, horizontal=True)
        heat = figures.lanes_heatmap(trace, ss["heat"], f"{key}, row {cfg.row}: {HEAT_CHOICES[ss['heat']]} per lane "
                                     "and step", stamp())
        chart(heat, cfg, f"lanes_{key}", "chart_lanes")
    if trace.merges:
        st.subheader("Merge tree")
        st.caption("(m, d) pairs merge like single elements: m = max(m₁, m₂), d = d₁·e^(m₁−m) + d₂·e^(m₂−m). "
                   "Each level of the butterfly halves the number of partial states; node colour is the relative "
                   "error of its d against float64.")
        choices = figures.tree_choices(trace)
        _ensure_choice("tree", choices, "across warps")
        st.selectbox("Butterfly", choices, key="tree")
        tree = figures.merge_tree_figure(trace, ss["tree"], f"{key}, row {cfg.row}: merge tree, {ss['tree']}", stamp())
        chart(tree, cfg, f"merge_{key}", "chart_tree")
        table = figures.merge_table(trace)
        with st.expander(f"Every merge, level by level ({len(table)} nodes)"):
            st.dataframe(table, width="stretch", hide_index=True, key="table_merges")
            csv_download(table, cfg, f"merges_{key}", "csv_merges")


# --- 3. error vs float64 ----------------------------------------------------------------------------------

@guarded
def errors_page() -> None:
    ran = run_page("Error vs float64")
    if ran is None:
        return
    cfg, spec, results, _failed = ran
    with st.spinner("Comparing with the float64 reference…"):
        reports = {k: compute.error_report(spec, k, cfg.acc, cfg.block_for(k)) for k in results}
    df = figures.error_table(reports)
    fmt = explorer.FORMATS
    bound = {}
    for k in results:
        launch = explorer.VARIANTS[k].launch(cfg.rows, cfg.cols, cfg.block_for(k))
        n = -(-cfg.cols // launch.threads_per_row) + int(math.log2(max(launch.threads_per_row, 1)))
        bound[k] = explorer.error_bound(n, cfg.acc, cfg.dtype)
    df["bound"] = pd.Series(bound)
    st.subheader("Over the whole input")
    st.dataframe(df, width="stretch", key="table_errors", column_config={
        c: st.column_config.NumberColumn(format="%.2e") for c in
        ("max rel", "mean rel", "max abs", "max |Σ−1|", "bound")} | {
        "max ULP": st.column_config.NumberColumn(format="%.1f"),
        "argmax agree": st.column_config.NumberColumn(format="%.3f")})
    st.caption(f"rel: |y − ref| / max(|ref|, smallest normal); ULP: units in the last place of {cfg.dtype} "
               f"(u = 2^-{fmt[cfg.dtype].significand_bits}); |Σ−1|: worst row sum; NaN, inf: counts of outputs; "
               "NaN/inf ≠ ref: elements whose non-finite pattern differs from float64's; argmax agree: fraction of "
               "rows whose largest probability sits where the reference's does; bound: the seed's 3·n·u_acc + u_out "
               "with n = terms one accumulator folds in sequence (its share of the row, plus one per merge level).")
    csv_download(df, cfg, "errors", "csv_errors")
    ref = compute.get_reference(spec)[cfg.row]
    outputs = {k: r["out"][cfg.row] for k, r in results.items()}
    fig = figures.error_figure(ref, outputs, f"Relative error per element, row {cfg.row}", stamp())
    chart(fig, cfg, "errors", "chart_errors")


# --- 4. timing --------------------------------------------------------------------------------------------

@guarded
def timing_page() -> None:
    cfg = ss.get("_cfg")
    header("Timing", cfg)
    timing.render(cfg)


# --- 5. kernels -------------------------------------------------------------------------------------------

GLOBAL = re.compile(r"__global__\s+void\s+(?:__\w+__\s*\([^)]*\)\s*)*(\w+)\s*\(")


def kernel_excerpt(source: str, kernel: str) -> str | None:
    """Each __global__ function named `kernel` or `kernel_*` in a .cu file, with its comment and template
    lines, or None when the file has none (then the page shows the whole file)."""
    lines = source.splitlines(keepends=True)
    offsets = np.cumsum([0] + [len(line) for line in lines])
    pieces = []
    for match in GLOBAL.finditer(source):
        name = match.group(1)
        if name != kernel and not name.startswith(kernel + "_"):
            continue
        first = int(np.searchsorted(offsets, match.start(), side="right")) - 1
        while first > 0 and lines[first - 1].lstrip().startswith(("template", "//")):
            first -= 1
        depth, opened, end = 0, False, match.end()
        for end in range(match.end(), len(source)):
            ch = source[end]
            if ch == "{":
                depth, opened = depth + 1, True
            elif ch == "}":
                depth -= 1
                if opened and depth == 0:
                    break
        pieces.append(source[offsets[first]:end + 1])
    return "\n\n".join(pieces) if pieces else None


@guarded
def kernels_page() -> None:
    cfg = ss.get("_cfg")
    header("Kernels", cfg)
    keys = list(explorer.VARIANTS)
    default = cfg.variants[0] if cfg is not None and cfg.variants else keys[0]
    _ensure_choice("kv", keys, default)
    st.selectbox("Variant", keys, key="kv", format_func=lambda k: f"{k} — {explorer.VARIANTS[k].title}")
    v = explorer.VARIANTS[ss["kv"]]
    st.markdown(f"**{v.title}**: {v.lesson}")
    entry = {f.name: getattr(v, f.name) for f in dataclasses.fields(v)
             if f.name not in ("launch_rule", "lesson", "title", "kernel_functions")}
    entry["kernel functions"] = v.functions
    entry = {k: ", ".join(val) if isinstance(val, tuple) else val for k, val in entry.items()}
    c1, c2 = st.columns(2)
    with c1:
        st.subheader("Registry entry")
        st.table(pd.DataFrame({"value": {k: str(val) for k, val in entry.items()}}))
    with c2:
        if cfg is not None:
            block = cfg.block if v.takes_block_size else None
            launch = v.launch(cfg.rows, cfg.cols, block, cfg.dtype if cfg.dtype in v.dtypes else v.dtypes[0])
            st.subheader(f"Launch for {cfg.rows}×{cfg.cols}")
            names = {"grid": "grid (blocks)", "block": "block (threads)", "shared_bytes": "shared bytes",
                     "threads_per_row": "threads per row"}
            fields = {names.get(k, k.replace("_", " ")): (", ".join(map(str, val)) or "–") if isinstance(val, tuple)
                      else val for k, val in dataclasses.asdict(launch).items()}
            kernel = launch.kernel or v.kernel
            fields["kernel"] = f"{kernel}<{', '.join(map(str, launch.template_args))}>" if launch.template_args else kernel
            fields["global reads per element"] = v.reads_per_element
            fields["global writes per element"] = v.writes_per_element
            st.table(pd.DataFrame({"value": {k: str(val) for k, val in fields.items()}}))
            dtype = cfg.dtype if cfg.dtype in v.dtypes else v.dtypes[0]
            acc = cfg.acc if cfg.acc in v.accumulators else v.accumulators[0]
            st.subheader(f"Compiled resources ({dtype} / acc {acc})")
            with st.spinner("Compiling the kernel to read its resources…"):
                res = explorer.kernel_resources(v.key, dtype, acc, cfg.rows, cfg.cols, block)
            if res is None:
                st.info("Registers, shared and spill (local) bytes come from the compiled kernel, which needs a GPU; "
                        "this server runs the CPU emulation.", icon=":material/memory:")
            else:
                st.dataframe(pd.DataFrame(res).set_index("kernel"), width="stretch")
                for kernel in res:
                    if kernel["local_bytes"]:
                        st.warning(f"{kernel['kernel']}: {kernel['local_bytes']} bytes of local memory per thread "
                                   "(registers spill).")
    source = explorer.kernel_source(v.key)
    excerpt = kernel_excerpt(source, v.kernel)
    st.subheader(f"CUDA source: {v.kernel} in kernels/{v.kernel_file}")
    st.code(excerpt or source, language="cpp", line_numbers=True)
    if excerpt:
        with st.expander(f"The whole file kernels/{v.kernel_file} (common.cuh inlined)"):
            st.code(source, language="cpp", line_numbers=True)

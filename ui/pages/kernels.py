"""The Kernels page: a variant's registry entry, its launch for the sidebar's shape, its compiled resources,
and its CUDA source."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

import pandas as pd
import streamlit as st

import explorer
from explorer.cuda_source import global_functions

from ..common import block_size_slider, ensure_choice, guarded, header, show_table, sidebar_takes_block, variant_label
from ..page import KERNEL_SECTIONS, Page
from ..params import Param
from ..state import Config

ss = st.session_state
PARAMS = (Param("kv", "word", "", choices=lambda: tuple(explorer.VARIANTS), hint="unknown variant"),)
LAUNCH_NAMES = {
    "grid": "grid (blocks)",
    "block": "block (threads)",
    "shared_bytes": "shared bytes",
    "threads_per_row": "threads per row",
}


def kernel_excerpt(source: str, functions: Collection[str]) -> str | None:
    """The __global__ functions named in `functions` (those the registry says a variant launches), each with its
    comment and template lines, in source order; None when the file defines none of them (then the page shows
    the whole file)."""
    pieces = [function.text for function in global_functions(source) if function.name in functions]
    return "\n\n".join(pieces) if pieces else None


def value_table(fields: dict) -> pd.DataFrame:
    return pd.DataFrame({"value": {k: str(val) for k, val in fields.items()}})


def registry_entry(v: explorer.Variant) -> dict:
    """The variant's registry fields named in words (takes_block_size: "takes block size"), tuples joined, as the
    page lists them."""
    entry = {
        f.name.replace("_", " "): getattr(v, f.name)
        for f in dataclasses.fields(v)
        if f.name not in ("launch_rule", "lesson", "title", "kernel_functions")
    }
    entry["kernel functions"] = v.functions
    return {k: _for_people(val) for k, val in entry.items()}


def _for_people(value):
    """A field's value for people: a tuple joined (pairs as "a: b"), a flag as yes or no."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, tuple) and all(isinstance(v, tuple) for v in value):
        return "; ".join(": ".join(pair) for pair in value) or "–"
    return ", ".join(value) if isinstance(value, tuple) else value


def launch_fields(v: explorer.Variant, launch: explorer.Launch) -> dict:
    """The launch's fields named for people, the kernel with its template arguments, the global traffic."""
    fields = {
        LAUNCH_NAMES.get(k, k.replace("_", " ")): (", ".join(map(str, val)) or "–") if isinstance(val, tuple) else val
        for k, val in dataclasses.asdict(launch).items()
    }
    kernel = launch.kernel or v.kernel
    fields["kernel"] = f"{kernel}<{', '.join(map(str, launch.template_args))}>" if launch.template_args else kernel
    fields["functions"] = ", ".join(launch.functions or (kernel,))  # this launch's, of the registry's list
    further = dict(v.further_reads).get(kernel)
    fields["global reads per element"] = f"{v.reads_per_element}, plus {further}" if further else v.reads_per_element
    fields["global writes per element"] = v.writes_per_element
    return fields


def _launch_and_resources(v: explorer.Variant, cfg: Config) -> None:
    block = cfg.block if v.takes_block_size else None
    dtype = cfg.dtype if cfg.dtype in v.dtypes else v.dtypes[0]
    acc = cfg.acc if cfg.acc in v.accumulators else v.accumulators[0]
    st.subheader(f"Launch for {cfg.rows}×{cfg.cols}")
    st.table(value_table(launch_fields(v, v.launch(cfg.rows, cfg.cols, block, dtype))))
    st.subheader(f"Compiled resources ({dtype} / acc {acc})")
    if (dtype, acc) != (cfg.dtype, cfg.acc):
        st.caption(
            f"{v.key} has no kernel for {cfg.dtype} with a {cfg.acc} accumulator (it takes "
            f"{', '.join(v.dtypes)} with {', '.join(v.accumulators)}): its {dtype} / {acc} kernel is shown."
        )
    with st.spinner("Compiling the kernel to read its resources…"):
        res = explorer.kernel_resources(v.key, dtype, acc, cfg.rows, cfg.cols, block)
    if res is None:
        st.info(
            "Registers, shared and spill (local) bytes come from the compiled kernel, which needs a GPU; "
            "this server runs the CPU emulation.",
            icon=":material/memory:",
        )
        return
    show_table(pd.DataFrame(res).set_index("kernel"))
    for kernel in res:
        if kernel["local_bytes"]:
            st.warning(
                f"{kernel['kernel']}: {kernel['local_bytes']} bytes of local memory per thread (registers spill)."
            )


def _block_size(v: explorer.Variant) -> None:
    """The block size of the launch shown, where the variant takes one: the sidebar's slider, drawn there while one
    of the sidebar's variants takes a block size, else here (the same setting, `block`)."""
    if v.takes_block_size and not sidebar_takes_block():
        block_size_slider("Block size (threads per row)")


@guarded
def kernels_page() -> None:
    cfg = ss.get("_cfg")
    header("Kernels", cfg.shape_text() if cfg is not None else None)
    keys = list(explorer.VARIANTS)
    ensure_choice("kv", keys, cfg.variants[0] if cfg is not None and cfg.variants else keys[0])
    st.selectbox("Variant", keys, key="kv", format_func=variant_label)
    v = explorer.VARIANTS[ss["kv"]]
    _block_size(v)
    st.markdown(f"**{v.title}**: {v.lesson}")
    c1, c2 = st.columns(2)
    with c1:
        st.subheader("Registry entry")
        st.table(value_table(registry_entry(v)))
    with c2:
        if cfg is not None:
            _launch_and_resources(v, cfg)
    source = explorer.kernel_source(v.key)
    excerpt = kernel_excerpt(source, v.functions)
    st.subheader(f"CUDA source: {v.kernel} in kernels/{v.kernel_file}")
    st.code(excerpt or source, language="cpp", line_numbers=True)
    if excerpt:
        with st.expander(f"The whole file kernels/{v.kernel_file} (common.cuh inlined)"):
            st.code(source, language="cpp", line_numbers=True)


PAGE = Page(
    kernels_page,
    "Kernels",
    "kernels",
    ":material/code:",
    params=PARAMS,
    sidebar=KERNEL_SECTIONS,
)

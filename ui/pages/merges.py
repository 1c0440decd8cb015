"""The merge tree of the Step-through page: one butterfly (or the chain of chunk merges) level by level."""

from __future__ import annotations

import streamlit as st

from explorer.trace import Trace

from .. import figures
from ..common import chart, csv_download, ensure_choice, show_table, stamp
from ..params import Param
from ..state import Config

ss = st.session_state
ALL_LEVELS = 1024  # the level slider's "whole tree"
MAX_TABLE_ROWS = 1000  # the table of every merge shows at most this many rows on the page (its CSV has them all)
PARAMS = (
    Param("tree", "text", ""),
    Param("mlevel", "int", ALL_LEVELS, low=0, high=ALL_LEVELS, sparse=True),
)


def merges_section(trace: Trace, cfg: Config, key: str) -> None:
    st.subheader("Merge tree")
    st.caption(
        r"(m, d) pairs merge like single elements: $m = \max(m_1, m_2)$, $d = d_1 e^{m_1 - m} + d_2 e^{m_2 - m}$. "
        "Within a warp, lanes exchange states by shuffles; a block's warps then merge through shared memory, "
        "and a split row's blocks one after another. Each butterfly level halves the partial states; node "
        "colour is the relative error of its d against float64."
    )
    choices = figures.tree_choices(trace)
    ensure_choice("tree", choices, "across warps", "Butterfly")
    c1, c2 = st.columns([2, 3])
    c1.selectbox("Butterfly", choices, key="tree")
    names = figures.level_names(trace, ss["tree"])
    options = [*range(len(names)), ALL_LEVELS]  # the last one shows the whole tree

    def level_name(level: int) -> str:
        return "leaves" if level == 0 else names[min(level, len(names)) - 1]

    ensure_choice("mlevel", options, ALL_LEVELS, "Merge level", level_name)
    c2.select_slider(
        "Merge levels shown",
        options,
        key="mlevel",
        format_func=level_name,
        help="Step through the tree: levels above this one are faded.",
    )
    level = min(int(ss["mlevel"]), len(names))
    tree = figures.merge_tree_figure(
        trace, ss["tree"], f"{key}, row {cfg.row}: merge tree, {ss['tree']}", stamp(), level
    )
    chart(tree, cfg.slug(f"merge_{key}"), "chart_tree")
    if level > 0:
        st.caption(f"Level {level}, {names[level - 1]}: each merge and the (m, d) it gives.")
        st.table(
            figures.level_table(trace, ss["tree"], level)
            .style.format({"m": "{:.7g}", "d": "{:.7g}", "exact d": "{:.9g}", "rel. error of d": "{:.2e}"})
            .hide(axis="index")
        )
    table = figures.merge_table(trace)
    with st.expander(f"Every merge, level by level ({len(table):,} nodes)"):
        shown = table.head(MAX_TABLE_ROWS)  # a split row's blocks merge up to a hundred thousand states
        show_table(shown, hide_index=True, key="table_merges")
        if len(shown) < len(table):
            st.caption(f"The first {len(shown):,} of {len(table):,} merges; the CSV below holds every one.")
        csv_download(table, cfg.slug(f"merges_{key}"), "csv_merges")

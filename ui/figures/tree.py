"""The merge tree: a butterfly (or the chain of chunk merges) as a tree of (m, d) states, and every merge as a table."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from explorer.trace import d_relative_error

from .common import CHART_PX, ERR_FLOOR, finish, format_value, label_step, stamp_below

LABEL_DIGITS = 4  # significant digits of a merge node's (m, d) label; its hover shows them all
# How much of a CHART_PX chart the tree's plot gets (_plot_px), and how wide its labels are: the level names on the y
# axis (13 px, with the axis title beside them), the colour bar with the right margin; a node's "m=2.756<br>d=23.68"
# and a leaf's number (10 px), each with a gap
LEVEL_NAME_CHAR_PX, Y_TITLE_PX, COLORBAR_PX = 6.7, 14, 106
NODE_LABEL_PX, LEAF_LABEL_PX = 52, 16


def _bitrev(i: int, bits: int) -> int:
    return int(f"{i:0{bits}b}"[::-1], 2) if bits else 0


def tree_stages(trace) -> dict[str, tuple]:
    """Label -> (stage, chunk, warp) of every butterfly (or chain) in the trace, lanes first."""
    keys = sorted(
        {(lv.stage, lv.chunk, lv.warp) for lv in trace.merges},
        key=lambda k: ({"lanes": 0, "warps": 1}.get(k[0], 2), k[1], k[2]),
    )
    out = {}
    for stage, chunk, warp in keys:
        where = f"chunk {chunk}, " if chunk >= 0 else ""
        if stage == "lanes":
            label = f"{where}warp {warp} lanes"
        elif stage == "warps":
            label = f"{where}across warps"
        else:
            label = f"across {stage}"
        out[label] = (stage, chunk, warp)
    return out


def tree_choices(trace) -> list[str]:
    return list(tree_stages(trace))


def _levels(trace, stage: str, chunk: int, warp: int = -1) -> list:
    return [
        lv for lv in trace.merges if lv.stage == stage and lv.chunk == chunk and (stage != "lanes" or lv.warp == warp)
    ]


def _top(levels) -> tuple | None:
    """The (m, d, exact m, exact d) a butterfly ends with (node 0 of its last non-empty level)."""
    for lv in reversed(levels):
        if lv.m.size:
            return float(lv.m[0]), float(lv.d[0]), float(lv.exact_m[0]), float(lv.exact_d[0])
    return None


def _tree_leaves(trace, stage: str, chunk: int, warp: int) -> tuple[dict, str, int]:
    """Leaf id -> (m, d, exact m, exact d), the leaves' name, and the butterfly's width."""
    chunks = sorted({lv.chunk for lv in trace.merges})
    if stage == "lanes":
        per_chunk = trace.threads // max(len(chunks), 1)
        count = (trace.index >= 0).sum(axis=1)
        leaves = {}
        for local in range(warp * 32, min(warp * 32 + 32, per_chunk)):
            t = max(chunk, 0) * per_chunk + local
            c = count[t]
            leaves[local] = (
                (
                    float(trace.m[t, c - 1]),
                    float(trace.d[t, c - 1]),
                    float(trace.exact_m[t, c - 1]),
                    float(trace.exact_d[t, c - 1]),
                )
                if c
                else (-math.inf, 0.0, -math.inf, 0.0)
            )
        return leaves, "lane", 32
    if stage == "warps":
        warps = sorted({lv.warp for lv in trace.merges if lv.stage == "lanes" and lv.chunk == chunk})
        leaves = {w: top for w in warps if (top := _top(_levels(trace, "lanes", chunk, w))) is not None}
        return leaves, "warp", len(warps)
    leaves = {c: top for c in chunks if (top := _top(_levels(trace, "warps", c))) is not None}
    return leaves, stage[:-1] if stage.endswith("s") else stage, len(chunks)


def level_names(trace, choice: str) -> list[str]:
    """The names of one butterfly's merge levels, bottom up: what each one exchanges, and through what."""
    stage, chunk, warp = tree_stages(trace)[choice]
    if stage == "chunks":
        return [f"across blocks, merge {k + 1}" for k in range(_levels(trace, stage, chunk)[0].left.size)]
    how = "shuffle" if stage == "lanes" else "across warps (shared memory)"
    return [f"{how}, offset {lv.offset}" for lv in _levels(trace, stage, chunk, warp) if lv.left.size]


def _tree_nodes(trace, choice: str) -> tuple[list, list, list, str, bool]:
    """(nodes as (id, x, depth, m, d, exact m, exact d, hover), edges x, edges y, leaves' name, butterfly?)."""
    stage, chunk, warp = tree_stages(trace)[choice]
    levels = _levels(trace, stage, chunk, warp)
    leaves, leaf_label, width = _tree_leaves(trace, stage, chunk, warp)
    butterfly = stage != "chunks"
    bits = max(1, math.ceil(math.log2(max(width, 2))))
    base = min(leaves) if leaves else 0
    order = sorted(leaves, key=lambda i: _bitrev(i - base, bits)) if butterfly else sorted(leaves)
    pos = {i: (float(k), 0.0) for k, i in enumerate(order)}
    nodes = [(i, pos[i][0], 0.0, *leaves[i], f"{leaf_label} {i}") for i in order]
    edges_x, edges_y = [], []
    for lv in levels:
        for k in range(lv.left.size):
            a, b = int(lv.left[k]), int(lv.right[k])
            if a not in pos or b not in pos:
                continue
            x = (pos[a][0] + pos[b][0]) / 2 if butterfly else pos[b][0]
            depth = max(pos[a][1], pos[b][1]) + 1
            for child in (a, b):
                edges_x += [pos[child][0], x, None]
                edges_y += [pos[child][1], depth, None]
            pos[a] = (x, depth)
            what = f"offset {lv.offset}" if butterfly else f"merge {k + 1}"
            nodes.append(
                (
                    a,
                    x,
                    depth,
                    float(lv.m[k]),
                    float(lv.d[k]),
                    float(lv.exact_m[k]),
                    float(lv.exact_d[k]),
                    f"{what}: {leaf_label} {a} ⊕ {leaf_label} {b}",
                )
            )
    return nodes, edges_x, edges_y, leaf_label, butterfly


def merge_tree_figure(trace, choice: str, title: str, stamp: str, level: int | None = None) -> go.Figure:
    """One butterfly (or the chain of chunk merges) as a tree: leaves (labelled by lane, warp or chunk) are
    partial states, nodes merges; levels above `level` (None: all shown) are faded, to step through them."""
    stages = tree_stages(trace)
    if choice not in stages:
        raise ValueError(f"no merge stage {choice!r} in this trace; choose one of {', '.join(stages)}")
    nodes, edges_x, edges_y, leaf_label, butterfly = _tree_nodes(trace, choice)
    arr = np.array([n[1:7] for n in nodes], dtype=np.float64).reshape(-1, 6)
    top = int(arr[:, 1].max()) if arr.size else 0
    level = top if level is None else min(max(level, 0), top)
    fig = go.Figure()
    _add_edges(fig, edges_x, edges_y, level)
    ticks = ["leaves", *level_names(trace, choice)][: top + 1]
    plot_px = _plot_px(ticks)
    fig.add_trace(_node_markers(nodes, arr, level, plot_px))
    fig.update_yaxes(
        tickvals=list(range(len(ticks))), ticktext=ticks, title_text="merge level", range=[-0.6, len(ticks) - 0.2]
    )
    leaves = [n for n in nodes if n[2] == 0]
    # labels on two staggered lines, so that each needs twice a leaf's room: a warp's 32 lanes all labelled beside
    # the sidebar (thinned, the leaf beside lane 0 read as lane 8 where it is its partner, 16)
    every = label_step(len(leaves), LEAF_LABEL_PX / 2, plot_px)
    shown = leaves[::every]
    fig.update_xaxes(
        title_text=f"{leaf_label}s" + (", in butterfly order" if butterfly else ""),
        showgrid=False,
        tickmode="array",
        tickvals=[n[1] for n in shown],
        ticktext=[("<br>" if i % 2 else "") + str(n[0]) for i, n in enumerate(shown)],
        tickfont=dict(size=11),
        tickangle=0,
    )
    return stamp_below(finish(fig, title, stamp, height=560))


def _plot_px(level_names: list[str]) -> float:
    """About how wide the tree's plot is in a CHART_PX chart: what the level names and the colour bar leave (the
    narrowest it is drawn; a wider chart only spreads the labels further apart)."""
    names_px = max(70, Y_TITLE_PX + LEVEL_NAME_CHAR_PX * max(map(len, level_names)))
    return CHART_PX - COLORBAR_PX - names_px


def _add_edges(fig: go.Figure, edges_x: list, edges_y: list, level: int) -> None:
    """The tree's edges (segments of three points, None-separated): up to `level` grey, above it faded."""
    ey = np.array([np.nan if v is None else v for v in edges_y], dtype=np.float64)
    for faded in (False, True):
        keep = [v if v is None or (ey[i - i % 3 + 1] <= level) != faded else None for i, v in enumerate(edges_x)]
        fig.add_trace(
            go.Scatter(
                x=keep,
                y=edges_y,
                mode="lines",
                hoverinfo="skip",
                showlegend=False,
                line=dict(color="#eee" if faded else "#aaa", width=1),
            )
        )


def _labelled(x: np.ndarray, depth: np.ndarray, plot_px: float) -> np.ndarray:
    """Which merge nodes carry their (m, d): on each level, every one whose labels fit in plot_px side by side, else
    every 2nd, 4th, ... (the leftmost first; a power of two, so that a butterfly's labels stay evenly spaced)."""
    keep = np.zeros(depth.size, bool)
    for y in np.unique(depth[depth > 0]):
        at = np.flatnonzero(depth == y)
        at = at[np.argsort(x[at], kind="stable")]
        every = 2 ** math.ceil(math.log2(label_step(at.size, NODE_LABEL_PX, plot_px)))
        keep[at[::every]] = True
    return keep


def _node_markers(nodes: list, arr: np.ndarray, level: int, plot_px: float) -> go.Scatter:
    """Every node coloured by its d's relative error; up to `level` (faded above it), the merges labelled with their
    (m, d), as many as fit side by side (_labelled; every node's numbers are in its hover and the level table)."""
    shown = arr[:, 1] <= level
    rel = d_relative_error(arr[:, 3], arr[:, 5])
    color = np.log10(np.maximum(np.nan_to_num(rel, nan=ERR_FLOOR), ERR_FLOOR))
    labelled = _labelled(arr[:, 0], arr[:, 1], plot_px) & shown
    return go.Scatter(
        x=arr[:, 0],
        y=arr[:, 1],
        mode="markers+text",
        showlegend=False,
        text=[
            f"m={format_value(m, LABEL_DIGITS)}<br>d={format_value(d, LABEL_DIGITS)}" if keep else ""
            for m, d, keep in zip(arr[:, 2], arr[:, 3], labelled)
        ],
        textposition="top center",
        textfont=dict(size=10),
        marker=dict(
            size=13,
            color=np.where(shown, color, np.nan),
            colorscale="YlOrRd",
            cmin=math.log10(ERR_FLOOR),
            cmax=-2,
            showscale=True,
            colorbar=dict(title=dict(text="log10 rel. err of d", side="right")),
            opacity=np.where(shown, 1.0, 0.25).tolist(),
            line=dict(color="#333", width=1),
        ),
        customdata=np.column_stack([arr[:, 2:6], rel]),
        hovertext=[n[7] for n in nodes],
        hovertemplate="%{hovertext}<br>m = %{customdata[0]:.7g}, d = %{customdata[1]:.7g}"
        "<br>exact m = %{customdata[2]:.9g}, d = %{customdata[3]:.9g}"
        "<br>rel. error of d %{customdata[4]:.2g}<extra></extra>",
    )


def level_table(trace, choice: str, level: int) -> pd.DataFrame:
    """The merges of one level (1 = the first above the leaves) of a butterfly or chain, with their (m, d)."""
    nodes = [n for n in _tree_nodes(trace, choice)[0] if n[2] == level]
    return pd.DataFrame(
        [
            {
                "merge": n[7],
                "m": n[3],
                "d": n[4],
                "exact d": n[6],
                "rel. error of d": float(d_relative_error(n[4], n[6])),
            }
            for n in nodes
        ]
    )


def merge_table(trace) -> pd.DataFrame:
    rows = []
    for lv in trace.merges:
        rel = d_relative_error(lv.d, lv.exact_d)
        for k in range(lv.left.size):
            rows.append(
                {
                    "stage": lv.stage,
                    "chunk": lv.chunk if lv.chunk >= 0 else None,
                    "warp": lv.warp if lv.stage == "lanes" else None,
                    "offset": lv.offset,
                    "left": int(lv.left[k]),
                    "right": int(lv.right[k]),
                    "m": float(lv.m[k]),
                    "d": float(lv.d[k]),
                    "exact m": float(lv.exact_m[k]),
                    "exact d": float(lv.exact_d[k]),
                    "rel. error of d": float(rel[k]),
                }
            )
    df = pd.DataFrame(rows)
    for column in ("chunk", "warp"):
        if column in df:
            df[column] = df[column].astype("Int64")
    if "chunk" in df and df["chunk"].isna().all():
        df = df.drop(columns="chunk")
    return df

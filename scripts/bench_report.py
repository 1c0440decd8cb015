"""Turn benchmark results (python -m explorer bench --json ...) into docs: tables and sweep plots.

    python scripts/bench_report.py docs/results-h200.json --out docs

Writes bench-tables.md (included by hand into docs/benchmarks.md) and one PNG per dtype:
GB/s against cols at a fixed total size (log x), our variants beside the peers and the copy line.
PNG export needs kaleido and a Chrome (BROWSER_PATH=/usr/bin/chromium on Debian).
"""

import argparse
import os
from collections import defaultdict
from pathlib import Path

import plotly.graph_objects as go

from explorer import bench

STYLE = {"fast": ("#d62728", "solid"), "torch": ("#1f77b4", "dash"), "cupyx": ("#9467bd", "dash"),
         "copy": ("#7f7f7f", "dot")}


def sweep_figure(doc: dict, dtype: str) -> go.Figure:
    meta = doc["meta"]
    rows = [r for r in doc["results"] if r["dtype"] == dtype and r["rows"] * r["cols"] == bench.SWEEP_ELEMENTS]
    series = defaultdict(list)
    for r in rows:
        series[r["name"]].append((r["cols"], r["gbps"]))
    fig = go.Figure()
    for name, points in series.items():
        points.sort()
        color, dash = STYLE.get(name, (None, "solid"))
        fig.add_scatter(x=[p[0] for p in points], y=[p[1] for p in points], name=name, mode="lines+markers",
                        line={"color": color, "dash": dash})
    fig.update_layout(
        title=f"Softmax {dtype}, {bench.SWEEP_ELEMENTS:,} elements: GB/s (read x + write y) vs row length",
        xaxis={"type": "log", "title": "cols (rows = 2^27 / cols)"}, yaxis={"title": "GB/s", "rangemode": "tozero"},
        template="plotly_white", width=1000, height=560, legend={"orientation": "h", "y": -0.18},
        margin={"b": 120},
    )
    fig.add_annotation(text=f"{meta['gpu']} · CUDA {meta['cuda_runtime']} · CuPy {meta['cupy']} · torch {meta['torch']}"
                            f" · {meta['date'][:10]}", xref="paper", yref="paper", x=1, y=-0.32, showarrow=False,
                       font={"size": 11, "color": "#555"}, xanchor="right")
    return fig


def table(doc: dict, dtype: str, names: list[str]) -> str:
    """One line per shape (and k, for top-k results): each name's median µs, % of copy where measured."""
    by_shape = defaultdict(dict)
    for r in doc["results"]:
        if r["dtype"] == dtype:
            by_shape[(r["rows"], r["cols"], r.get("k"))][r["name"]] = r
    topk = any(key[2] for key in by_shape)
    baseline = "torch"
    ours = "topk_fused" if topk else "fast"
    head = "| rows × cols " + ("| k " if topk else "") + "| " + " | ".join(
        f"{n} µs" + ("" if topk else " (% copy)") for n in names) + f" | {baseline} / {ours} |"
    lines = [head, "|" + "---|" * (len(names) + 2 + topk)]
    for (rows, cols, k), got in by_shape.items():
        cells = []
        for n in names:
            r = got.get(n)
            pct = f" ({r['pct_copy']:.0f}%)" if r and r.get("pct_copy") is not None else ""
            cells.append(f"{r['median_us']:.1f}{pct}" if r else "—")
        ratio = "—"
        if baseline in got and ours in got:
            ratio = f"{got[baseline]['median_us'] / got[ours]['median_us']:.2f}×"
        lines.append(f"| {rows}×{cols} " + (f"| {k} " if topk else "") + "| " + " | ".join(cells) + f" | {ratio} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("results", nargs="+")
    parser.add_argument("--out", default="docs")
    args = parser.parse_args()
    os.environ.setdefault("BROWSER_PATH", "/usr/bin/chromium")
    out = Path(args.out)
    parts = []
    for path in args.results:
        doc = bench.load(Path(path).read_bytes())
        names = list(dict.fromkeys(r["name"] for r in doc["results"]))
        for dtype in dict.fromkeys(r["dtype"] for r in doc["results"]):
            parts.append(f"### {dtype} ({Path(path).name})\n\n{table(doc, dtype, names)}\n")
            if any(r["dtype"] == dtype and r["rows"] * r["cols"] == bench.SWEEP_ELEMENTS for r in doc["results"]):
                sweep_figure(doc, dtype).write_image(out / f"bench-sweep-{dtype}.png", scale=1.5)
    (out / "bench-tables.md").write_text("\n".join(parts))


if __name__ == "__main__":
    main()

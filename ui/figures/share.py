"""One self-describing PNG to share: a title, the page's warnings, charts, a results table and a stamp that says
where the numbers came from (GPU, driver, CUDA, CuPy, shape, dtype, accumulator, date; or CPU emulation). Pure (no
Streamlit).

Drawn with Pillow (a Streamlit dependency: no browser or kaleido needed) from the plotly figures a page shows,
through ui/figures/raster.py. The stamp is also the PNG's "Description" text and the warnings its "Comment", so a
program can read them back.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from PIL import Image, PngImagePlugin

from .raster import FAINT, GRID, INK, PAD, PANEL_HEIGHT, SOFT, Pen, chart_image, line_height, plot_left

WIDTH = 1600  # px; wider where the table needs it
SUBPLOT_HEIGHT = 440  # px of each panel a figure of stacked subplots is drawn as
LOG_FLOOR = 1e-300  # raster's log axes end here (a subnormal such as 5e-324 breaks them): lower values drawn at it
TABLE_ROWS = 40  # rows drawn; the rest are counted under the table
CELL_CHARS = 48  # longer table text is cut with "…"
WARN = "#b22222"  # the figures' red for what went wrong


# a table cell with no value (a peer's block size, the reference's wall time), on the page and in the image
MISSING = "–"


def cell(v, fmt: str = "") -> str:
    """A table value as text: printf format fmt for a number where given, MISSING where there is none."""
    if v is None or v is pd.NA or (isinstance(v, float | np.floating) and math.isnan(v)):
        return MISSING
    if isinstance(v, bool | np.bool_):
        return "yes" if v else "no"
    if isinstance(v, int | np.integer | float | np.floating):
        if fmt:
            return fmt % v
        if isinstance(v, int | np.integer):
            return f"{int(v):,}"
        return f"{v:,.0f}" if 1e5 <= abs(v) < 1e15 else f"{v:.4g}"
    text = str(v).replace("\n", " ")
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"


def table_image(table: pd.DataFrame, formats: Mapping[str, str] | None = None) -> Image.Image:
    """The table at its natural width: a shaded header, numbers right-aligned (in their printf formats, by
    column), text left."""
    shown = table.head(TABLE_ROWS)
    size, row_h = 13, line_height(13) + 8
    pen = Pen(Image.new("RGB", (1, 1)))
    columns = [str(c) for c in shown.columns]
    cells = [[cell(v, (formats or {}).get(c, "")) for v in shown[c]] for c in shown.columns]
    numeric = [pd.api.types.is_numeric_dtype(shown[c]) for c in shown.columns]
    widths = [
        int(max([pen.width(h, size, True)] + [pen.width(v, size) for v in col])) + 18 for h, col in zip(columns, cells)
    ]
    more = len(table) - len(shown)
    height = row_h * (len(shown) + 1) + (line_height(13) + 6 if more else 0) + 4
    img = Image.new("RGB", (sum(widths) + 2, height), "white")
    pen = Pen(img)
    pen.draw.rectangle([0, 0, img.width - 1, row_h], fill="#f0f0f0")
    x = 0
    for name, col, w, num in zip(columns, cells, widths, numeric):
        align = (x + w - 9, "rm") if num else (x + 9, "lm")
        pen.text((align[0], row_h / 2), name, size, INK, align[1], bold=True)
        for r, v in enumerate(col):
            pen.text((align[0], row_h * (r + 1.5)), v, size, INK, align[1])
        x += w
    for r in range(len(shown) + 2):
        pen.draw.line([(0, r * row_h), (img.width, r * row_h)], fill=GRID)
    if more:
        pen.text(
            (4, row_h * (len(shown) + 1) + 6), f"… and {more} more row(s): download the table (CSV) for all.", 13, FAINT
        )
    return img


def _text_block(width: int, lines: Sequence[tuple[str, int, str, bool]], rule: bool = False) -> Image.Image:
    """Wrapped paragraphs (text, size, colour, bold) across the image, with a rule above where asked."""
    pen = Pen(Image.new("RGB", (1, 1)))
    wrapped = [(pen.wrap(t, s, width - 2 * PAD, b), s, c, b) for t, s, c, b in lines if t]
    height = 24 + sum(len(w) * line_height(s) + 4 for w, s, _, _ in wrapped)
    img = Image.new("RGB", (width, height), "white")
    pen = Pen(img)
    if rule:
        pen.draw.line([(PAD, 6), (width - PAD, 6)], fill=GRID, width=2)
    y = 14
    for w, size, color, bold in wrapped:
        for line in w:
            pen.text((PAD, y), line, size, color, bold=bold)
            y += line_height(size)
        y += 4
    return img


def _axis(layout: go.Layout, name: str, title: str) -> dict:
    """An axis's settings on the first axes: where it sat among the subplots dropped, title replaced."""
    settings = {
        k: v
        for k, v in layout[name].to_plotly_json().items()
        if k not in ("anchor", "domain", "matches", "showticklabels")
    }
    return {**settings, "title": {"text": title}}


def panels(fig: go.Figure) -> list[go.Figure]:
    """A figure as the single-axes panels raster draws: as it is when it has one y axis and a one-line y title;
    else one panel per stacked subplot (one column, shared x), each on the first axes with its traces and notes,
    the figure's title on the first, the x axis's title on each, a y title's later lines as a note. A category
    strip (the non-finite marks) is a panel of its own, which raster draws as rows of marks; with no marks, its
    words ("no NaN / inf outputs") are a note on the panel above."""
    ids = sorted({t.yaxis or "y" for t in fig.data} | {"y"}, key=lambda a: int(a[1:] or 1))
    if len(ids) == 1 and "<br>" not in (fig.layout.yaxis.title.text or ""):
        return [fig]
    xtitle = next(
        (fig.layout[f"xaxis{a[1:]}"].title.text for a in reversed(ids) if fig.layout[f"xaxis{a[1:]}"].title.text), ""
    )
    notes: dict[str, list[str]] = {a: [] for a in ids}
    for a in fig.layout.annotations:
        if a.name != "stamp" and a.text:
            notes["y" + re.sub(r"\D", "", a.xref or "")].append(a.text)
    out: list[go.Figure] = []
    for a in ids:
        traces = [t for t in fig.data if (t.yaxis or "y") == a]
        yaxis = fig.layout[f"yaxis{a[1:]}"]
        marked = any(t.showlegend is not False for t in traces)  # a strip's frame trace alone has no legend entry
        if yaxis.type == "category" and out and not marked:
            out[-1].add_annotation(text="; ".join(notes[a]))
            continue
        head, *rest = (yaxis.title.text or "").split("<br>")
        panel = go.Figure(
            [type(t)(t).update(xaxis="x", yaxis="y") for t in traces],
            layout=dict(
                title_text=fig.layout.title.text if not out else "",
                xaxis=_axis(fig.layout, f"xaxis{a[1:]}", xtitle),
                yaxis=_axis(fig.layout, f"yaxis{a[1:]}", head),
                barmode=fig.layout.barmode,
            ),
        )
        floored = _floor_log(panel)
        for text in rest + notes[a] + floored:
            panel.add_annotation(text=text)
        out.append(panel)
    return out


def _floor_log(panel: go.Figure) -> list[str]:
    """On a log y axis, positive values below LOG_FLOOR raised to it (in place); the note saying so where any
    were."""
    if panel.layout.yaxis.type != "log":
        return []
    low = 0
    for t in panel.data:
        y = np.asarray(t.y, dtype=np.float64)
        tiny = (y > 0) & (y < LOG_FLOOR)
        low += int(tiny.sum())
        t.y = np.where(tiny, LOG_FLOOR, y)
    return [f"{low} value(s) below {LOG_FLOOR:g} drawn at {LOG_FLOOR:g}"] if low else []


def _height(panel: go.Figure, alone: bool) -> int | None:
    """A panel's height: a strip's (None) as tall as its rows need."""
    if panel.layout.yaxis.type == "category":
        return None
    return PANEL_HEIGHT if alone else SUBPLOT_HEIGHT


def share_png(
    title: str,
    charts: Sequence[go.Figure],
    table: pd.DataFrame | None,
    stamp: Sequence[str],
    subtitle: str = "",
    formats: Mapping[str, str] | None = None,
    notes: Sequence[str] = (),
    captions: Sequence[str] = (),
) -> bytes:
    """The PNG: title and subtitle, the page's warnings (notes, in red), each chart (a figure's panels with their
    x axes lined up), the page's captions on what the charts show, the table (formats: printf formats by column),
    and the stamp (one line each, wrapped to the image's width) under a rule; the stamp again as the PNG's
    Description, the notes as its Comment."""
    grid = table_image(table, formats) if table is not None and len(table.columns) else None
    width = max(WIDTH, (grid.width if grid else 0) + 2 * PAD)
    head = [(title, 28, INK, True), (subtitle, 17, SOFT, False)] + [(n, 16, WARN, False) for n in notes]
    blocks = [_text_block(width, head)]
    for fig in charts:
        drawn = panels(fig)
        left = max(plot_left(p, width) for p in drawn)
        blocks += [chart_image(p, width, _height(p, len(drawn) == 1), left) for p in drawn]
    if captions:
        blocks.append(_text_block(width, [(c, 15, SOFT, False) for c in captions]))
    if grid is not None:
        framed = Image.new("RGB", (width, grid.height + 24), "white")
        framed.paste(grid, (PAD, 12))
        blocks.append(framed)
    blocks.append(_text_block(width, [(line, 16, SOFT, False) for line in stamp], rule=True))
    out = Image.new("RGB", (width, sum(b.height for b in blocks)), "white")
    y = 0
    for b in blocks:
        out.paste(b, (0, y))
        y += b.height
    info = PngImagePlugin.PngInfo()
    info.add_text("Title", title)
    info.add_text("Description", "\n".join(stamp))
    if notes:
        info.add_text("Comment", "\n".join(notes))
    buf = io.BytesIO()
    out.save(buf, format="PNG", pnginfo=info, optimize=True)
    return buf.getvalue()

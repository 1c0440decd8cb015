"""Plotly figures drawn with Pillow, for images made without a browser (ui/figures/share.py). Pure.

Drawn: bar traces (grouped, error bars, hatching, labels above the bars) and line or marker scatter traces on a
figure's first axes, linear or log, with the title, legend, notes and axis titles; other traces are left out and
the panel says how many. A category y axis is drawn as a strip, a row of marks per category (the NaN × and ±inf
▲ ▼ marks under the Outputs plot), as tall as its rows need. Text uses a system font with µ × – − (DejaVu,
Liberation or Arial); where none is found, Pillow's own font and the text in ASCII.
"""

from __future__ import annotations

import functools
import html
import math
import re

import numpy as np
import plotly.graph_objects as go
from PIL import Image, ImageColor, ImageDraw, ImageFont

from .common import COLORS

PAD = 40  # the image's side margins
PANEL_HEIGHT = 560
STRIP_ROW = 30  # px of each category of a strip
INK, SOFT, FAINT, GRID, AXIS = "#222222", "#444444", "#777777", "#e8e8e8", "#888888"
REGULAR = ("DejaVuSans.ttf", "LiberationSans-Regular.ttf", "Arial.ttf", "arial.ttf")
BOLD = ("DejaVuSans-Bold.ttf", "LiberationSans-Bold.ttf", "Arial Bold.ttf", "arialbd.ttf")
ASCII = str.maketrans(
    {"µ": "u", "×": "x", "–": "-", "−": "-", "≈": "~", "…": "...", "≥": ">=", "≤": "<=", "▲": "^", "▼": "v", "○": "o"}
)


def plain(text) -> str:
    """Plotly's text as it reads: <br> a new line, other tags dropped, entities (escaped file text) decoded."""
    text = re.sub(r"<br\s*/?>", "\n", "" if text is None else str(text))
    return html.unescape(re.sub(r"<[^>]+>", "", text))


@functools.cache
def load_font(size: int, bold: bool = False) -> tuple[ImageFont.FreeTypeFont, bool]:
    """(font, whether it has the non-ASCII glyphs)."""
    for name in BOLD if bold else REGULAR:
        try:
            return ImageFont.truetype(name, size), True
        except OSError:
            continue
    return ImageFont.load_default(size), False


class Pen:
    """Text on an image in a given size: measured, wrapped, drawn (rotated where asked)."""

    def __init__(self, image: Image.Image) -> None:
        self.image = image
        self.draw = ImageDraw.Draw(image)

    @staticmethod
    def font(size: int, bold: bool = False) -> ImageFont.FreeTypeFont:
        return load_font(size, bold)[0]

    @staticmethod
    def fit(text: str, size: int, bold: bool = False) -> str:
        return text if load_font(size, bold)[1] else text.translate(ASCII)

    def width(self, text: str, size: int, bold: bool = False) -> float:
        return self.font(size, bold).getlength(self.fit(text, size, bold))

    def text(self, xy, text: str, size: int, fill: str = INK, anchor: str = "la", bold: bool = False) -> None:
        self.draw.text(xy, self.fit(text, size, bold), font=self.font(size, bold), fill=fill, anchor=anchor)

    def wrap(self, text: str, size: int, width: float, bold: bool = False) -> list[str]:
        """Lines no wider than width where words allow: breaks after " · " first, then at spaces."""
        lines = []
        for para in text.split("\n"):
            words = []
            for i, part in enumerate(para.split(" · ")):
                split = part.split(" ") if self.width(part, size, bold) > width else [part]
                words += [(" · " if i and j == 0 else " ", w) for j, w in enumerate(split)]
            line = ""
            for sep, word in words:
                longer = f"{line}{sep}{word}" if line else word
                if line and self.width(longer.strip(), size, bold) > width:
                    lines.append(line.strip())
                    line = word
                else:
                    line = longer
            lines.append(line.strip())
        return lines

    def paragraph(
        self, x: float, y: float, text: str, size: int, width: float, fill: str = INK, bold: bool = False
    ) -> float:
        """Wrapped text from (x, y) down; the y under it."""
        for line in self.wrap(text, size, width, bold):
            self.text((x, y), line, size, fill, bold=bold)
            y += line_height(size)
        return y

    def vertical(self, center: tuple[float, float], text: str, size: int, fill: str = SOFT) -> None:
        """Text reading upwards, centred on center (a y axis title)."""
        w, h = int(self.width(text, size)) + 4, line_height(size)
        label = Image.new("RGBA", (w, h), (255, 255, 255, 0))
        Pen(label).text((2, 0), text, size, fill)
        label = label.rotate(90, expand=True)
        self.image.paste(label, (int(center[0] - label.width / 2), int(center[1] - label.height / 2)), label)


def line_height(size: int) -> int:
    return int(size * 1.35)


# --- one chart ----------------------------------------------------------------------------------------------


def _values(v) -> np.ndarray:
    if v is None:
        return np.array([])
    return np.asarray(v if isinstance(v, list | tuple | np.ndarray) else [v], dtype=object)


def _floats(v, n: int) -> np.ndarray:
    a = _values(v)
    out = np.full(n, np.nan)
    for i, x in enumerate(a[:n]):
        try:
            out[i] = float(x)
        except (TypeError, ValueError):
            pass
    return out


def _per_point(v, n: int, default) -> list:
    """A trace attribute that is one value or one per point, as a list of n."""
    if v is None:
        return [default] * n
    if isinstance(v, str) or not isinstance(v, list | tuple | np.ndarray):
        return [v] * n
    return [v[i] if i < len(v) and v[i] is not None else default for i in range(n)]


LOG_TICK_STEPS = (1, 2, 5, 10, 20, 25, 50, 100)  # decades between a log axis's labels


class Axis:
    """A value axis mapped onto pixels [p0, p1] (p1 may be smaller: y grows downwards)."""

    def __init__(self, lo: float, hi: float, log: bool, p0: float, p1: float) -> None:
        self.log, self.p0, self.p1 = log, p0, p1
        self.lo, self.hi = self.t(lo), self.t(hi)
        if not self.hi > self.lo:
            self.hi = self.lo + 1

    def t(self, v: float) -> float:
        return math.log10(v) if self.log else v

    def __call__(self, v: float) -> float:
        v = max(v, 1e-300) if self.log else v
        return self.p0 + (self.t(v) - self.lo) / (self.hi - self.lo) * (self.p1 - self.p0)

    def ticks(self) -> list[float]:
        if self.log:  # at most about ten decades labelled, at round multiples of a round step (1e-50, 1e-100, …)
            first, last = math.ceil(self.lo - 1e-9), math.floor(self.hi + 1e-9)
            raw = (last - first + 1) / 10
            step = next((d for d in LOG_TICK_STEPS if d >= raw), math.ceil(raw))
            return [10.0**e for e in range(math.ceil(first / step) * step, last + 1, step)]
        raw = (self.hi - self.lo) / 6
        mag = 10 ** math.floor(math.log10(raw))
        step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
        return [i * step for i in range(math.ceil(self.lo / step - 1e-9), math.floor(self.hi / step + 1e-9) + 1)]


def tick_text(v: float) -> str:
    if v == 0:
        return "0"
    return f"{v:.0e}".replace("e-0", "e-").replace("e+0", "e") if abs(v) < 1e-3 or abs(v) >= 1e6 else f"{v:,.6g}"


def _color(trace, i: int) -> str:
    for c in (getattr(trace.marker, "color", None), getattr(getattr(trace, "line", None), "color", None)):
        if isinstance(c, str):
            return c
    return COLORS[i % len(COLORS)]


def hatch(draw: ImageDraw.ImageDraw, box: tuple[int, int, int, int], shape: str) -> None:
    """Plotly's pattern shapes as white marks inside a bar: / diagonal lines, x crossed, . dots."""
    x0, y0, x1, y1 = box
    if x1 - x0 < 3 or y1 - y0 < 3:
        return
    tile = Image.new("L", (x1 - x0, y1 - y0), 0)
    d = ImageDraw.Draw(tile)
    w, h = tile.size
    if shape in ("/", "x"):
        for c in range(-h, w, 10):
            d.line([(c, h), (c + h, 0)], fill=255, width=2)
    if shape in ("\\", "x"):
        for c in range(-h, w, 10):
            d.line([(c, 0), (c + h, h)], fill=255, width=2)
    if shape == ".":
        for yy in range(3, h, 8):
            for xx in range(3 + (yy // 8 % 2) * 4, w, 8):
                d.ellipse([xx - 1.5, yy - 1.5, xx + 1.5, yy + 1.5], fill=255)
    draw.bitmap((x0, y0), tile, fill="#ffffff")


def chart_image(fig: go.Figure, width: int, height: int | None = PANEL_HEIGHT, left: float = 0) -> Image.Image:
    """One plotly figure drawn as a panel: title, legend, notes, axes, traces. height None: as tall as a strip's
    rows need (STRIP_ROW each); left: the least x the plot starts at, so that panels drawn one above another line
    up their x axes (see plot_left)."""
    inner = width - 2 * PAD
    traces = _drawn(fig)
    rows = _categories(fig, traces)
    bars = [t for t in traces if t.type == "bar"]
    cats = list(dict.fromkeys(str(x) for t in traces for x in _values(t.x))) if bars else []
    xaxis = fig.layout.xaxis
    names = dict(zip(map(str, xaxis.tickvals or ()), map(plain, xaxis.ticktext or ())))
    slot = (inner - 90) / max(len(cats), 1)
    measure = Pen(Image.new("RGB", (width, 1)))
    tick_lines = [measure.wrap(names.get(c, plain(c)), 13, slot - 6) for c in cats]
    below = line_height(13) * max((len(t) for t in tick_lines), default=1) + line_height(14) + 22
    untold = 18 if len(traces) < len(fig.data) else 0  # the line saying how many traces are not drawn
    if height is None:
        height = int(_header(measure, fig, traces, inner) + 10 + STRIP_ROW * len(rows or [""]) + below + untold)
    img = Image.new("RGB", (width, height), "white")
    pen = Pen(img)
    top, bottom = _header(pen, fig, traces, inner) + 10, height - below - untold
    yaxis = _y_axis(pen, fig, traces, rows, top, bottom, slot / max(len(bars), 1) * 0.8)
    ticks = _y_ticks(yaxis, rows)
    left, right = max(left, _left(pen, ticks)), width - PAD
    for v, label in ticks:
        pen.draw.line([(left, yaxis(v)), (right, yaxis(v))], fill=GRID)
        pen.text((left - 6, yaxis(v)), label, 13, SOFT, "rm")
    pen.vertical((PAD + line_height(14) / 2, (top + bottom) / 2), plain(fig.layout.yaxis.title.text), 14)
    if cats:
        slot = (right - left) / len(cats)
        _draw_bars(pen, bars, cats, left, slot, yaxis, fig.layout.barmode != "stack")
        for i, lines in enumerate(tick_lines):
            for j, line in enumerate(lines):
                pen.text((left + (i + 0.5) * slot, bottom + 6 + j * line_height(13)), line, 13, SOFT, "ma")
    _draw_lines(pen, [t for t in traces if t.type != "bar"], fig, cats, rows, left, right, yaxis)
    pen.draw.line([(left, top), (left, bottom), (right, bottom)], fill=AXIS, width=1)
    pen.text(
        ((left + right) / 2, height - below + line_height(13) * max((len(t) for t in tick_lines), default=1) + 12),
        plain(xaxis.title.text),
        14,
        SOFT,
        "ma",
    )
    if untold:
        pen.text(
            (right, height - 4),
            f"{len(fig.data) - len(traces)} trace(s) of this chart are not drawn here: see the app.",
            12,
            FAINT,
            "rd",
        )
    return img


def plot_left(fig: go.Figure, width: int) -> float:
    """Where chart_image starts the plot of fig by default: past the y axis's title and its widest tick label."""
    pen = Pen(Image.new("RGB", (1, 1)))
    traces = _drawn(fig)
    rows = _categories(fig, traces)
    return _left(pen, _y_ticks(_y_axis(pen, fig, traces, rows, 0, PANEL_HEIGHT, width / 10), rows))


def _drawn(fig: go.Figure) -> list:
    """The traces raster draws: bars and scatter on the figure's first axes."""
    return [
        t
        for t in fig.data
        if t.type in ("bar", "scatter", "scattergl") and t.xaxis in (None, "x") and t.yaxis in (None, "y")
    ]


def _categories(fig: go.Figure, traces: list) -> list[str] | None:
    """A category y axis's categories, bottom first as plotly stacks them; None for a value axis."""
    if fig.layout.yaxis.type != "category":
        return None
    given = fig.layout.yaxis.categoryarray
    return [str(c) for c in given] if given else list(dict.fromkeys(str(y) for t in traces for y in _values(t.y)))


def _header(pen: Pen, fig: go.Figure, traces: list, width: float) -> float:
    """The title, legend and notes from the top; the y under them."""
    y = pen.paragraph(PAD, 8, plain(fig.layout.title.text), 20, width, bold=True)
    y = _legend(pen, traces, y + 4, width)
    for a in fig.layout.annotations:
        if a.name != "stamp" and a.text:
            y = pen.paragraph(PAD, y, plain(a.text), 13, width, FAINT)
    return y


def _y_ticks(axis: Axis, rows: list[str] | None) -> list[tuple[float, str]]:
    """(value, label) of each y tick: every category of a strip, else the axis's round values."""
    if rows is not None:
        return list(enumerate(rows))
    return [(v, tick_text(v)) for v in axis.ticks()]


def _left(pen: Pen, ticks: list[tuple[float, str]]) -> float:
    return PAD + line_height(14) + 10 + max(pen.width(label, 13) for _, label in ticks)


def _legend(pen: Pen, traces: list, y: float, width: float) -> float:
    """One entry per named trace: its marker where it is drawn as markers only, else a square of its colour."""
    x = PAD
    for i, t in enumerate(traces):
        if t.showlegend is False or not t.name:
            continue
        name = plain(t.name)
        w = 22 + pen.width(name, 13) + 18
        if x + w > PAD + width and x > PAD:
            x, y = PAD, y + line_height(13) + 2
        if t.type != "bar" and t.mode == "markers":
            symbol, size, color, edge = _marker(t, i)
            _mark(pen.draw, x + 7, y + 9, symbol, min(size, 12), color, edge)
        else:
            pen.draw.rectangle([x, y + 3, x + 14, y + 15], fill=_color(t, i))
        pen.text((x + 20, y), name, 13, SOFT)
        x += w
    return y + line_height(13) + 6


def _label_lines(pen: Pen, t, n: int, width: float) -> list[list[str]]:
    return [pen.wrap(plain(s), 12, max(width, 60)) if s else [] for s in _per_point(t.text, n, "")]


def _tops(t, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values, upper ends, lower ends) of a bar trace: the error bars where it has them."""
    y = _floats(t.y, n)
    e = t.error_y
    if e is None or e.visible is False or e.array is None:
        return y, y, y
    plus = _floats(e.array, n)
    minus = _floats(e.arrayminus, n) if e.arrayminus is not None else plus
    return y, y + np.nan_to_num(plus), y - np.nan_to_num(minus)


def _y_axis(
    pen: Pen, fig: go.Figure, traces: list, rows: list[str] | None, top: float, bottom: float, bar_width: float
) -> Axis:
    """The y axis: every value (and error bar) shown, with room above each bar for its label; a strip's categories
    one row each."""
    if rows is not None:
        return Axis(-0.5, len(rows) - 0.5, False, bottom, top)
    log = fig.layout.yaxis.type == "log"
    lows, highs, labelled = [], [], []
    for t in traces:
        n = len(_values(t.x if t.x is not None else t.y))
        _, hi, lo = _tops(t, n) if t.type == "bar" else (_floats(t.y, n),) * 3
        lows.append(lo)
        highs.append(hi)
        if t.type == "bar":
            for v, lines in zip(hi, _label_lines(pen, t, n, bar_width)):
                labelled.append((v, len(lines) * line_height(12) + 6))
    values = np.concatenate(lows + highs) if lows else np.array([])
    values = values[np.isfinite(values) & ((values > 0) if log else True)]
    if not values.size:
        return Axis(1 if log else 0, 10 if log else 1, log, bottom, top)
    lo, hi = float(values.min()), float(values.max())
    if log:
        lo, hi = 10 ** math.floor(math.log10(lo)), 10 ** math.ceil(math.log10(hi) + 1e-9)
    else:
        lo = 0.0 if any(t.type == "bar" for t in traces) and lo >= 0 else lo - 0.05 * (hi - lo)
        hi = hi + 0.05 * (hi - lo) if hi > lo else lo + 1
    axis = Axis(lo, hi, log, bottom, top)
    h = bottom - top
    need = axis.hi
    for v, px in labelled:  # the label's pixels above the bar, in axis units
        if math.isfinite(v) and (v > 0 or not log) and px < h:
            need = max(need, axis.lo + (axis.t(v) - axis.lo) * h / (h - px))
    return Axis(lo, 10**need if log else need, log, bottom, top)


def _draw_bars(pen: Pen, bars: list, cats: list[str], left: float, slot: float, axis: Axis, grouped: bool) -> None:
    group = slot * 0.8
    width = group / max(len(bars), 1) if grouped else group
    base = 10**axis.lo if axis.log else max(axis.lo, 0.0)
    for b, t in enumerate(bars):
        xs = [str(x) for x in _values(t.x)]
        n = len(xs)
        y, hi, lo = _tops(t, n)
        color = _color(t, b)
        patterns = _per_point(t.marker.pattern.shape, n, "")
        for i, (c, v, lines) in enumerate(zip(xs, y, _label_lines(pen, t, n, width - 4))):
            if c not in cats or not math.isfinite(v):
                continue
            x0 = left + cats.index(c) * slot + slot * 0.1 + (b * width if grouped else 0)
            box = (int(x0 + 1), int(min(axis(v), axis(base))), int(x0 + width - 1), int(max(axis(v), axis(base))))
            pen.draw.rectangle(box, fill=color)
            hatch(pen.draw, box, str(patterns[i] or ""))
            mid, cap = x0 + width / 2, min(width * 0.25, 10)
            if hi[i] != v or lo[i] != v:
                for e in (hi[i], lo[i]):
                    pen.draw.line([(mid - cap, axis(e)), (mid + cap, axis(e))], fill=INK, width=2)
                pen.draw.line([(mid, axis(hi[i])), (mid, axis(max(lo[i], base)))], fill=INK, width=2)
            label_y = axis(max(hi[i], v)) - 4 - len(lines) * line_height(12)
            for j, line in enumerate(lines):
                pen.text((mid, label_y + j * line_height(12)), line, 12, SOFT, "ma")


def _draw_lines(
    pen: Pen,
    traces: list,
    fig: go.Figure,
    cats: list[str],
    rows: list[str] | None,
    left: float,
    right: float,
    yaxis: Axis,
) -> None:
    """Scatter traces: at the categories' centres where bars set the x axis, else on a numeric x axis; a trace of
    opacity 0 (a frame that only sets the axes' ranges) is not drawn."""
    if not traces:
        return
    if cats:
        slot = (right - left) / len(cats)
        place = {c: left + (i + 0.5) * slot for i, c in enumerate(cats)}
        xpix = [[place.get(str(x), math.nan) for x in _values(t.x)] for t in traces]
    else:
        log = fig.layout.xaxis.type == "log"
        xs = [_floats(t.x if t.x is not None else np.arange(len(_values(t.y))), len(_values(t.y))) for t in traces]
        every = np.concatenate(xs)
        every = every[np.isfinite(every) & ((every > 0) if log else True)]
        xaxis = Axis(float(every.min()), float(every.max()), log, left + 10, right - 10) if every.size else None
        xpix = [[xaxis(v) if xaxis and math.isfinite(v) else math.nan for v in x] for x in xs]
        for v in xaxis.ticks() if xaxis else []:
            pen.text((xaxis(v), yaxis.p0 + 6), tick_text(v), 13, SOFT, "ma")
    for i, (t, px) in enumerate(zip(traces, xpix)):
        if t.opacity == 0:
            continue
        ys = _y_values(t, len(px), rows)
        points = [
            (x, yaxis(v)) for x, v in zip(px, ys) if math.isfinite(x) and math.isfinite(v) and (v > 0 or not yaxis.log)
        ]
        if "lines" in (t.mode or "lines") and len(points) > 1:
            pen.draw.line(points, fill=_color(t, i), width=2)
        if "markers" in (t.mode or ""):
            symbol, size, color, edge = _marker(t, i)
            for x, y in points:
                _mark(pen.draw, x, y, symbol, size, color, edge)


def _y_values(t, n: int, rows: list[str] | None) -> np.ndarray:
    """A trace's y values as numbers: on a strip, the row of each value's category."""
    if rows is None:
        return _floats(t.y, n)
    row = {c: i for i, c in enumerate(rows)}
    out = np.full(n, np.nan)
    for i, c in enumerate(_values(t.y)[:n]):
        out[i] = row.get(str(c), np.nan)
    return out


def _marker(t, i: int) -> tuple[str, float, str, str | None]:
    """(symbol, size in px, colour faded by the trace's and marker's opacity, edge colour) of a trace's markers."""
    m = t.marker
    opacity = (1.0 if t.opacity is None else t.opacity) * (m.opacity if isinstance(m.opacity, int | float) else 1.0)
    rgb = ImageColor.getrgb(_color(t, i))[:3]
    faded = "#" + "".join(f"{round(255 - opacity * (255 - c)):02x}" for c in rgb)  # over white
    edge = m.line.color if isinstance(m.line.color, str) else None
    return (
        m.symbol if isinstance(m.symbol, str) else "circle",
        m.size if isinstance(m.size, int | float) else 6,
        faded,
        edge,
    )


def _mark(
    draw: ImageDraw.ImageDraw, x: float, y: float, symbol: str, size: float, color: str, edge: str | None
) -> None:
    """One marker as plotly draws its symbol: x, cross, triangle-up or -down, square, diamond, else a circle;
    "-open" ones as outlines, filled ones edged in edge where given."""
    shape = symbol.removesuffix("-open").removesuffix("-thin")
    r = size / 2
    if shape in ("x", "cross"):
        d = r if shape == "x" else 0
        arms = [((x - r, y - d), (x + r, y + d)), ((x - d, y + r), (x + d, y - r))]
        for a, b in arms if edge else []:
            draw.line([a, b], fill=edge, width=5)
        for a, b in arms:
            draw.line([a, b], fill=color, width=3 if edge else 2)
        return
    style = (
        dict(fill=None, outline=color, width=2)
        if symbol.endswith("-open")
        else dict(fill=color, outline=edge or color, width=1)
    )
    if shape in ("triangle-up", "triangle-down"):
        s = r if shape == "triangle-up" else -r
        draw.polygon([(x - r, y + s), (x + r, y + s), (x, y - s)], **style)
    elif shape == "diamond":
        draw.polygon([(x, y - r), (x + r, y), (x, y + r), (x - r, y)], **style)
    elif shape == "square":
        draw.rectangle([x - r, y - r, x + r, y + r], **style)
    else:
        draw.ellipse([x - r, y - r, x + r, y + r], **style)

"""The bit-level view of one online step: the fields of d_j and its parts in the accumulator's format, and
the same numbers in binary aligned at the binary point (HTML for st.markdown)."""

from __future__ import annotations

import math

import explorer
from explorer import precision
from explorer.numerics import ulp_exponent
from explorer.precision import FloatBits, UpdateParts

FIELD_STYLE = {
    "sign": ("#fbe3e3", "#d62728"),
    "exponent": ("#e1ecf7", "#1f77b4"),
    "mantissa": ("#e3f3df", "#2ca02c"),
}  # (background, colour of a 1)
MAX_ALIGN_COLUMNS = 44
_CELL = "padding:1px 1px;text-align:center;font-family:monospace;font-size:13px;"


def _fields_row(label: str, b: FloatBits) -> str:
    cells = []
    for field in ("sign", "exponent", "mantissa"):
        bg, one = FIELD_STYLE[field]
        for i, ch in enumerate(getattr(b, field)):
            sep = "border-left:2px solid #555;" if i == 0 and field != "sign" else ""
            weight = f"color:{one};font-weight:700;" if ch == "1" else "color:#999;"
            cells.append(f'<td style="{_CELL}background:{bg};{weight}{sep}">{ch}</td>')
    if b.kind in ("normal", "subnormal"):  # the significand in decimal: its bits are the cells to the left
        meaning = (
            f"(−1)<sup>{b.sign}</sup> · 2<sup>{b.exponent_value}</sup> · {abs(b.value) / 2.0**b.exponent_value:.7g}"
        )
    else:
        meaning = b.kind
    return (
        f'<tr><td style="{_CELL}text-align:right;font-family:sans-serif;white-space:nowrap">{label}</td>'
        f'<td style="{_CELL}text-align:right">{b.value:.7g}</td>{"".join(cells)}'
        f'<td style="{_CELL}text-align:left;white-space:nowrap">{meaning}</td></tr>'
    )


def bits_html(parts: UpdateParts, acc: str, prev_d: float, exact_d: float) -> str:
    """d_{j-1}, the rescaled d_{j-1}, the term and d_j: their sign / exponent / mantissa fields in the
    accumulator's format; then the same numbers in binary, aligned at the binary point, with the places
    below d_j's last place in the accumulator (the bits the rounding drops) greyed."""
    fields = _fields_table(parts, acc, prev_d)
    aligned, keep = _aligned_table(parts, acc, exact_d)
    caption = (
        f'<div style="font-size:12px;color:#555;margin:4px 0 8px 0">Aligned at the binary point: '
        f"places left of the red line are kept by {acc} at this size (its last place is "
        f"2<sup>{keep}</sup>); grey places are rounded away.</div>"
    )
    return '<div style="overflow-x:auto">' + fields + caption + aligned + "</div>"


def _fields_table(parts: UpdateParts, acc: str, prev_d: float) -> str:
    """The four numbers of the update as sign, exponent and mantissa fields of the accumulator's format."""
    fields = {
        "d<sub>j−1</sub>": prev_d,
        "d<sub>j−1</sub>·rescale": parts.product,
        "term e<sup>x<sub>j</sub>−m<sub>j</sub></sup>": parts.term,
        "d<sub>j</sub> (kernel)": parts.d,
    }
    bits = {label: precision.float_bits(v, acc) for label, v in fields.items()}
    e_bits = explorer.FORMATS[acc].exponent_bits
    m_bits = next(iter(bits.values())).mantissa_bits
    head = (
        f'<tr><td></td><td style="{_CELL}">value</td><td colspan="1" style="{_CELL}color:#d62728">s</td>'
        f'<td colspan="{e_bits}" style="{_CELL}color:#1f77b4">exponent ({e_bits} bits)</td>'
        f'<td colspan="{m_bits}" style="{_CELL}color:#2ca02c">mantissa ({m_bits} bits)</td><td></td></tr>'
    )
    return (
        '<table style="border-collapse:separate;border-spacing:1px;margin-bottom:10px">'
        + head
        + "".join(_fields_row(label, b) for label, b in bits.items())
        + "</table>"
    )


def _aligned_places(values: list[float], d: float, acc: str) -> tuple[int, int, int]:
    """(high, low, keep): the places 2^high down to 2^low the aligned table shows (at most MAX_ALIGN_COLUMNS, a
    few below d's last place), and keep, the last place the accumulator holds at d's size."""
    finite = [abs(v) for v in values if math.isfinite(v) and v != 0]
    fmt = explorer.FORMATS[acc]
    ulp_k = int(ulp_exponent(d, fmt)) if math.isfinite(d) and d != 0 else None
    high = math.floor(math.log2(max(finite))) if finite else 0
    keep = ulp_k if ulp_k is not None else high - fmt.significand_bits + 1
    return high, max(min(keep - 8, high - 1), high - MAX_ALIGN_COLUMNS + 1), keep


def _aligned_table(parts: UpdateParts, acc: str, exact_d: float) -> tuple[str, int]:
    """The sum of the update in binary, aligned at the binary point, the places the rounding drops greyed; and
    the last place kept."""
    aligned = {
        "d<sub>j−1</sub>·rescale": parts.product,
        "+ term": parts.term,
        "= exact sum": parts.sum,
        f"d<sub>j</sub> rounded to {acc}": parts.d,
        "exact d<sub>j</sub> (float64)": exact_d,
    }
    high, low, keep = _aligned_places(list(aligned.values()), parts.d, acc)
    places = list(range(high, low - 1, -1))
    rows = [
        f'<tr><td style="{_CELL}text-align:right;font-family:sans-serif;white-space:nowrap">{label}</td>'
        f'<td style="{_CELL}text-align:right">{v:.9g}</td>{_aligned_cells(places, row, keep, low)}</tr>'
        for (label, v), row in zip(aligned.items(), precision.aligned_bits(aligned, high, low).values())
    ]
    hdr_dot = "".join(
        f'<td style="{_CELL}font-size:10px;color:#777">{k if k % 4 == 0 or k == keep else ""}</td>'
        + (f'<td style="{_CELL}"></td>' if k == 0 and low < 0 else "")
        for k in places
    )
    table = (
        '<table style="border-collapse:separate;border-spacing:1px">'
        f'<tr><td style="{_CELL}font-size:10px;color:#777;text-align:right">place k of 2<sup>k</sup></td>'
        f"<td></td>{hdr_dot}</tr>" + "".join(rows) + "</table>"
    )
    return table, keep


def _aligned_cells(places: list[int], row: list, keep: int, low: int) -> str:
    """One number's binary digits at `places`: kept places green, the rounded-away ones grey, a red line after
    the last kept place and a point after 2^0."""
    cells = []
    for k, b in zip(places, row):
        lost = k < keep
        bg = "#e6e6e6" if lost else "#f4f9f3"
        cut = "border-left:2px solid #d62728;" if k == keep - 1 else ""
        color = ("color:#777;" if lost else "color:#2ca02c;") + ("font-weight:700;" if b == 1 else "")
        cells.append(
            f'<td style="{_CELL}background:{bg};{color}{cut}">{"" if b is None else b}</td>'
            + (f'<td style="{_CELL}font-weight:700">.</td>' if k == 0 and low < 0 else "")
        )
    return "".join(cells)

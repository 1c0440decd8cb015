"""The share image (ui/figures/share.py, drawn by ui/figures/raster.py), without Streamlit: a PNG whose stamp
names the GPU (or CPU emulation), wrapped inside the image, with the charts and the table between."""

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from PIL import Image

from ui import figures
from ui.figures import raster, share

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"


def _sweep() -> dict:
    return json.loads((RESULTS / "sweep-fast.json").read_text())


def _timing_figures(doc: dict, shape: str = "4096×32768 float32 acc float32") -> tuple[list, pd.DataFrame]:
    df = figures.results_frame({"NVIDIA H200": doc})
    df["shape"] = df.apply(figures.shape_label, axis=1)
    part = df[(df["shape"] == shape) & df["median_us"].notna()]
    return list(figures.timing_figures(part, shape, "stamp")), part[["source", "name", "median_us", "gbps", "error"]]


def _image(png: bytes) -> Image.Image:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    img = Image.open(io.BytesIO(png))
    img.load()
    return img


def _ink_columns(img: Image.Image, top: int, bottom: int) -> np.ndarray:
    """The x of every column with a dark pixel between rows top and bottom."""
    band = np.asarray(img.convert("L"))[top:bottom]
    return np.flatnonzero((band < 160).any(axis=0))


def test_device_line_names_the_gpu_or_cpu_emulation():
    meta = _sweep()["meta"]
    line = share.device_line(meta, source="sweep-fast.json")
    assert line == "GPU NVIDIA H200 · driver 13.0 · CUDA 13.2 · CuPy 14.2.0 · 2026-12-01 · from sweep-fast.json"
    assert share.device_line({"backend": "cuda", **meta}, source="NVIDIA H200").endswith("2026-12-01")
    cpu = share.device_line({"backend": "emulator", "reason": "no GPU"}, date="2026-01-02")
    assert cpu.startswith("CPU emulation (no GPU) · NumPy ") and cpu.endswith("2026-01-02")


def test_share_png_holds_the_charts_table_and_stamp():
    charts, table = _timing_figures(_sweep())
    stamp = ["shape 4096×32768 · dtype float32 · accumulator float32",
             share.device_line(_sweep()["meta"], source="sweep-fast.json")]
    img = _image(share.share_png("Softmax timing", charts, table, stamp, "4096×32768 float32 acc float32",
                                 {"median_us": "%.2f"}))
    assert img.format == "PNG" and img.width == share.WIDTH
    assert img.height > 2 * raster.PANEL_HEIGHT + 200  # two charts, a table and the stamp
    assert img.text["Description"] == "\n".join(stamp) and "GPU NVIDIA H200" in img.text["Description"]
    assert img.text["Title"] == "Softmax timing"
    # the stamp is drawn at the bottom, inside the margins
    ink = _ink_columns(img, img.height - 60, img.height)
    assert ink.size and ink.min() >= raster.PAD - 2 and ink.max() <= img.width - raster.PAD
    # the bars are drawn in the source's colour
    rgb = np.asarray(img.convert("RGB")).reshape(-1, 3)
    assert (np.abs(rgb.astype(int) - (0x1F, 0x77, 0xB4)).sum(axis=1) < 10).sum() > 5000


def test_a_long_multi_file_stamp_wraps_inside_the_image():
    charts, table = _timing_figures(_sweep())
    long = [share.device_line({**_sweep()["meta"], "gpu": f"GPU number {i} " + "with a very long name " * 6},
                              source=f"file-{i}.json") for i in range(3)]
    short = _image(share.share_png("t", charts, table, ["one line"]))
    img = _image(share.share_png("t", charts, table, long))
    assert img.width == short.width  # wrapped, not widened
    assert img.height - short.height > 3 * 2 * raster.line_height(16) - raster.line_height(16)
    footer = img.height - (img.height - short.height) - 60
    ink = _ink_columns(img, footer, img.height)
    assert ink.max() <= img.width - raster.PAD  # no line runs off the right edge


def test_a_wide_table_widens_the_image_and_long_text_is_cut():
    table = pd.DataFrame({f"column {i}": [1.5e-7, 123456789.0] for i in range(24)})
    table["error"] = ["RuntimeError: " + "x" * 200, None]
    img = _image(share.share_png("wide", [], table, ["CPU emulation (no GPU)"]))
    assert img.width > share.WIDTH
    assert share.cell("RuntimeError: " + "x" * 200).endswith("…") and len(share.cell("y" * 200)) == share.CELL_CHARS
    assert share.cell(None) == share.cell(float("nan")) == "–"
    assert share.cell(2.5, "%.2f×") == "2.50×" and share.cell(123456789.0) == "123,456,789"


def test_line_charts_log_axes_and_subplots_are_drawn_and_counted():
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=2, cols=1)
    x = np.arange(1, 200)
    fig.add_trace(go.Scatter(x=x, y=1.0 / x, mode="lines", name="1/x"), row=1, col=1)
    fig.add_trace(go.Scatter(x=x, y=1.0 / x**2, mode="markers", name="<b>1/x²</b> &amp; co"), row=1, col=1)
    fig.add_trace(go.Scatter(x=[3], y=["NaN"], mode="markers", name="strip"), row=2, col=1)
    fig.update_yaxes(type="log", title_text="value (log)", row=1, col=1)
    fig.update_layout(title_text="Lines<br>on a log axis")
    img = raster.chart_image(fig, 1200)
    assert img.size == (1200, raster.PANEL_HEIGHT)
    assert raster.plain("<b>1/x²</b> &amp; co") == "1/x² & co"
    assert raster.plain("a<br>b &lt;i&gt;") == "a\nb <i>"


def test_without_a_unicode_font_the_text_is_written_in_ascii(monkeypatch):
    monkeypatch.setattr(raster, "REGULAR", ("no-such-font.ttf",))
    monkeypatch.setattr(raster, "BOLD", ("no-such-font.ttf",))
    raster._font.cache_clear()
    try:
        assert raster.Pen.fit("5 µs × 2 – 1", 12) == "5 us x 2 - 1"
        charts, table = _timing_figures(_sweep())
        assert _image(share.share_png("t", charts[:1], table, ["GPU NVIDIA H200"])).width == share.WIDTH
    finally:
        raster._font.cache_clear()


@pytest.mark.parametrize("shape", ["/", "x", ".", ""])
def test_hatching_stays_inside_the_bar(shape):
    img = Image.new("RGB", (60, 60), "black")
    raster._hatch(raster.ImageDraw.Draw(img), (10, 10, 30, 50), shape)
    a = np.asarray(img.convert("L"))
    outside = a.copy()
    outside[10:50, 10:30] = 0
    assert not outside.any() and (a[10:50, 10:30].any() == bool(shape))

"""The share image (ui/figures/share.py, drawn by ui/figures/raster.py), without Streamlit: a PNG whose stamp
names the GPU (or CPU emulation), wrapped inside the image, with the charts and the table between; the Outputs
and Error pages' images (ui/share.run_stamp, their figures split into panels, the strip of NaN, ±inf and 0 marks
drawn as rows of marks, the page's NaN-row warning under the title), and their buttons (AppTest)."""

import io
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from PIL import Image, ImageColor

import explorer
from ui import figures
from ui.figures import raster, share
from ui.figures.common import COLORS, device_line
from ui.pages import errors, outputs
from ui.share import readable, run_stamp
from ui.state import UPLOAD, Config

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
    line = device_line(meta, source="sweep-fast.json")
    day = meta["date"][:10]  # the day the results file was measured
    assert line == f"GPU NVIDIA H200 · driver 13.0 · CUDA 13.2 · CuPy 14.2.0 · {day} · from sweep-fast.json"
    assert device_line({"backend": "cuda", **meta}, source="NVIDIA H200").endswith(day)
    cpu = device_line({"backend": "emulator", "reason": "no GPU"}, date="2026-01-02")
    assert cpu.startswith("CPU emulation (no GPU) · NumPy ") and cpu.endswith("2026-01-02")


def test_share_png_holds_the_charts_table_and_stamp():
    charts, table = _timing_figures(_sweep())
    stamp = [
        "shape 4096×32768 · dtype float32 · accumulator float32",
        device_line(_sweep()["meta"], source="sweep-fast.json"),
    ]
    img = _image(
        share.share_png("Softmax timing", charts, table, stamp, "4096×32768 float32 acc float32", {"median_us": "%.2f"})
    )
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
    long = [
        device_line(  # a GPU name is cut at META_CHARS: the files' names make the lines long
            {**_sweep()["meta"], "gpu": f"GPU number {i} with a long name"},
            source=f"file-{i}-" + "with-a-very-long-name-" * 6 + ".json",
        )
        for i in range(3)
    ]
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
    raster.load_font.cache_clear()
    try:
        assert raster.Pen.fit("5 µs × 2 – 1", 12) == "5 us x 2 - 1"
        charts, table = _timing_figures(_sweep())
        assert _image(share.share_png("t", charts[:1], table, ["GPU NVIDIA H200"])).width == share.WIDTH
    finally:
        raster.load_font.cache_clear()


@pytest.mark.parametrize("shape", ["/", "x", ".", ""])
def test_hatching_stays_inside_the_bar(shape):
    img = Image.new("RGB", (60, 60), "black")
    raster.hatch(raster.ImageDraw.Draw(img), (10, 10, 30, 50), shape)
    a = np.asarray(img.convert("L"))
    outside = a.copy()
    outside[10:50, 10:30] = 0
    assert not outside.any() and (a[10:50, 10:30].any() == bool(shape))


# --- the Outputs and Error pages -------------------------------------------------------------------------------

H200 = {"backend": "cuda", "gpu": "NVIDIA H200", "cuda_driver": "13.0", "cuda_runtime": "13.2", "cupy": "14.2.0"}
CPU = {"backend": "emulator", "reason": "no GPU"}
LARGE = Config("large", (("scale", 300.0),), 4, 300, 0, "float16", "float32", ("naive", "online_warp"), 256, 1)


def _row(cfg: Config) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
    """The float64 reference of cfg's row, each variant's output row (emulator), and the input."""
    x = explorer.make_input(cfg.dist, cfg.rows, cfg.cols, dtype=cfg.dtype, seed=cfg.seed, **dict(cfg.params))
    outs = {k: explorer.softmax(x, k, acc=cfg.acc, backend="emulator").out[cfg.row] for k in cfg.variants}
    return explorer.reference(x)[cfg.row], outs, x


def test_run_stamp_names_shape_dtype_accumulator_input_and_where_it_ran():
    gpu = run_stamp(LARGE, H200, "2026-12-01")
    assert gpu == [
        "shape 4×300 · dtype float16 · accumulator float32",
        "distribution Large magnitude (scale=300) · seed 0 · row 1",
        "GPU NVIDIA H200 · driver 13.0 · CUDA 13.2 · CuPy 14.2.0 · 2026-12-01",
    ]
    assert gpu[2] == device_line(H200, "2026-12-01")  # the Timing image's words
    upload = Config(UPLOAD, (), 2, 5, 0, "bfloat16", "float32", ("naive",), 256, 0, "logits.npy")
    cpu = run_stamp(upload, CPU, "2026-01-02")
    assert cpu[:2] == ["shape 2×5 · dtype bfloat16 · accumulator float32", "uploaded logits.npy · row 0"]
    assert cpu[2].startswith("CPU emulation (no GPU) · NumPy ") and cpu[2].endswith("2026-01-02")


def test_a_figure_of_stacked_subplots_is_drawn_panel_by_panel():
    ref, outs, _ = _row(LARGE)
    fig = figures.outputs_figure(ref, outs, True, "Softmax of row 1, " + LARGE.describe(), "stamp")
    top, dev, marks = share.panels(fig)  # the reference, the deviations, the strip of naive's NaN and zeros
    assert [t.name for t in top.data] == ["float64 reference"] and top.layout.title.text == fig.layout.title.text
    assert {t.name for t in dev.data} == set(outs) and not dev.layout.title.text
    assert {t.xaxis for p in (top, dev) for t in p.data} == {"x"} and {t.yaxis for p in (top, dev) for t in p.data} == {
        "y"
    }
    assert top.layout.yaxis.type == "log" and dev.layout.yaxis.title.text.startswith("y − ref (ulp of float16")
    assert top.layout.xaxis.title.text == dev.layout.xaxis.title.text == "element j of the row"
    assert marks.layout.yaxis.type == "category" and marks.layout.yaxis.categoryarray[0] == "float64 reference"
    assert {t.xaxis for t in marks.data} == {"x"} and {t.yaxis for t in marks.data} == {"y"}
    named = {t.name.split(" (")[0]: t.marker.symbol for t in marks.data if t.showlegend is not False}
    assert named["naive: NaN"] == "x" and {named[k] for k in named if k.endswith(": 0")} == {"circle-open"}
    assert "naive: 0" in named  # on the log axis, a 0 is marked too
    assert [a.text for a in marks.layout.annotations] == ["marked: NaN ×, +inf ▲, −inf ▼, 0 ○ (off the log axis)"]
    err = figures.error_figure(ref, outs, "Relative error", "stamp", {k: 1e-3 for k in outs})
    panel, mismatch = share.panels(err)  # the errors, the strip of NaN mismatches; the two-line y title split
    assert panel.layout.yaxis.title.text == "|y − ref| / max(|ref|, smallest normal)"
    assert [t.name.split(" (")[0] for t in mismatch.data if t.showlegend is not False] == ["naive: NaN"]
    assert any("dashed: each variant's bound" in a.text for a in panel.layout.annotations)
    timing = _timing_figures(_sweep())[0][0]
    assert share.panels(timing) == [timing]  # a one-axis figure is drawn as it is


def test_a_strip_with_nothing_marked_is_a_note_on_the_panel_above():
    ref = np.full(50, 0.02)
    fig = figures.outputs_figure(ref, {"naive": ref.astype(np.float32)}, True, "flat", "stamp")
    panels = share.panels(fig)
    assert [p.layout.yaxis.type for p in panels] == ["log", None]  # the reference, the deviations; no strip
    assert [a.text for a in panels[-1].layout.annotations] == [
        "no NaN / inf / zero outputs; marked: NaN ×, +inf ▲, −inf ▼, 0 ○ (off the log axis)"
    ]


N = 60  # elements of the synthetic row: naive's NaN at 5, +inf at 12, −inf at 20, zeros at 30..33; fast's +inf at 40


def _marked_figure() -> go.Figure:
    ref = np.full(N, 1.0 / N)
    naive, fast = ref.astype(np.float32), ref.astype(np.float32)
    naive[5], naive[12], naive[20], naive[30:34], fast[40] = np.nan, np.inf, -np.inf, 0, np.inf
    return figures.outputs_figure(ref, {"naive": naive, "fast": fast}, True, "Softmax of row 0", "stamp")


def _mark_pixels(img: Image.Image, color) -> np.ndarray:
    """(y, x) of every pixel of exactly the colour (a mark's fill, an axis line)."""
    rgb = np.asarray(img.convert("RGB")).astype(int)
    want = ImageColor.getrgb(color) if isinstance(color, str) else color
    return np.argwhere(np.abs(rgb - want).sum(axis=2) == 0)


def _axis_columns(img: Image.Image) -> list[int]:
    """The x of each y axis line: a column of more than 40 pixels of the axis colour."""
    axis = _mark_pixels(img, raster.AXIS)
    return [int(x) for x in np.flatnonzero(np.bincount(axis[:, 1]) > 40)]


def test_the_strip_is_drawn_as_a_row_of_marks_per_series_under_the_plots_x_axis():
    panels = share.panels(_marked_figure())
    left = max(raster.plot_left(p, share.WIDTH) for p in panels)
    img = raster.chart_image(panels[-1], share.WIDTH, None, left)
    assert _axis_columns(img) == [int(left)]  # where the plots above start
    axis = _mark_pixels(img, raster.AXIS)
    top, bottom = (f(axis[axis[:, 1] == int(left), 0]) for f in (np.min, np.max))
    assert abs(bottom - top - 3 * raster.STRIP_ROW) <= 2 and img.height < share.SUBPLOT_HEIGHT  # a row per series
    plot = img.crop((0, top, img.width, bottom))  # the legend's marks above left out
    # elements 0 and N−1 at left + 10 and right − 10, as on the plots above
    x_of = {j: left + 10 + j / (N - 1) * (share.WIDTH - raster.PAD - 10 - (left + 10)) for j in range(N)}
    blue, red = _mark_pixels(plot, COLORS[0]), _mark_pixels(plot, COLORS[1])
    near = {j: blue[np.abs(blue[:, 1] - x_of[j]) <= 6] for j in (5, 12, 20)}
    assert all(p.size for p in near.values())  # naive's NaN, +inf and −inf
    assert not blue[np.abs(blue[:, 1] - x_of[45]) <= 6].size  # nothing where the outputs are finite
    assert red.size and np.abs(red[:, 1] - x_of[40]).max() <= 6  # fast's +inf
    assert red[:, 0].mean() < near[12][:, 0].mean()  # fast's row above naive's, the reference's at the bottom
    for j, wide_at_bottom in ((12, True), (20, False)):  # ▲ (+inf) is wider at its bottom, ▼ (−inf) at its top
        ys = near[j][:, 0]
        lower = (ys > (ys.min() + ys.max()) / 2).sum() > (ys < (ys.min() + ys.max()) / 2).sum()
        assert lower == wide_at_bottom
    faded = tuple(round(255 - 0.45 * (255 - c)) for c in ImageColor.getrgb(COLORS[0]))  # opacity 0.45
    zeros = _mark_pixels(plot, faded)
    assert zeros.size and set(np.round((zeros[:, 1] - x_of[30]) / (x_of[1] - x_of[0]))) == {0, 1, 2, 3}


def test_the_share_image_draws_the_strip_with_the_plots_x_axes_lined_up():
    fig = _marked_figure()
    img = _image(share.share_png("marks", [fig], None, ["stamp"]))
    assert _axis_columns(img) == [int(max(raster.plot_left(p, img.width) for p in share.panels(fig)))]
    assert _mark_pixels(img, COLORS[1]).size  # fast's +inf ▲


def test_the_share_image_writes_the_pages_warnings_under_the_title():
    x_row = np.full(100, -np.inf)
    warning = outputs.nan_row_warning(0, x_row)
    assert (
        warning.startswith("Row 0's softmax is NaN, in float64 too: every input is −∞")
        and "e^(−∞ + ∞) / 0 is NaN" in warning
    )
    assert outputs.nan_row_warning(0, np.zeros(100)) is None
    fig = _marked_figure()
    plain, warned = (_image(share.share_png("marks", [fig], None, ["stamp"], "sub", notes=n)) for n in ([], [warning]))
    assert warned.text["Comment"] == warning and "Comment" not in plain.text
    assert warned.height > plain.height
    top = warned.crop((0, 0, warned.width, warned.height - plain.height + 100))
    assert _mark_pixels(top, share.WARN).size > 200  # written in red, above the charts


@pytest.mark.parametrize("page", ["outputs", "errors"])
def test_outputs_and_error_share_images_hold_the_chart_table_and_stamp(page, tmp_path):
    ref, outs, x = _row(LARGE)
    title = f"row 1, {LARGE.describe()}"
    if page == "outputs":
        outs["online_block"] = explorer.softmax(x, "online_block", acc=LARGE.acc, backend="emulator").out[LARGE.row]
        fig = figures.outputs_figure(ref, outs, True, "Softmax of " + title, "stamp")
        table = pd.DataFrame([{"variant": k, **outputs.row_summary(y)} for k, y in outs.items()])
        columns, panels = outputs.COLUMNS, 2
    else:
        fig = figures.error_figure(ref, outs, "Relative error per element, " + title, "stamp")
        table = figures.error_table(
            {k: explorer.errors(explorer.softmax(x, k, backend="emulator").out, x) for k in outs}
        ).reset_index()
        columns, panels = errors.COLUMNS, 1
    for words in ("Large magnitude", "4×300", "float16"):  # the chart's title names distribution, shape and dtype
        assert words in fig.layout.title.text
    stamp = run_stamp(LARGE, H200, "2026-12-01")
    shown, formats = readable(table, columns)
    captions = [outputs.equal_rows_note(outs)] if page == "outputs" else []
    png = share.share_png(f"Softmax {page}, row 1", [fig], shown, stamp, LARGE.describe(), formats, (), captions)
    (tmp_path / f"{page}_share.png").write_bytes(png)
    img = _image(png)
    if captions:  # the legend's "online_warp +1" said in words under the chart
        assert captions[0].endswith(": online_warp = online_block.")
        bare = _image(share.share_png(f"Softmax {page}, row 1", [fig], shown, stamp, LARGE.describe(), formats))
        assert img.height > bare.height
    assert img.width == share.WIDTH and img.text["Description"] == "\n".join(stamp)
    assert img.height > (2 * share.SUBPLOT_HEIGHT if panels == 2 else raster.PANEL_HEIGHT) + 200
    if page == "errors":
        assert formats["max rel"] == "%.2e" and share.cell(shown["max rel"][1], formats["max rel"]).count("e-") == 1
    ink = _ink_columns(img, img.height - 60, img.height)  # the stamp, inside the margins
    assert ink.size and ink.min() >= raster.PAD - 2 and ink.max() <= img.width - raster.PAD


def test_equal_rows_note_names_each_group_of_bitwise_equal_rows():
    a, b = np.array([0.25, 0.75], np.float32), np.array([0.5, 0.5], np.float32)
    assert outputs.equal_rows_note({"naive": a, "safe": b}) == ""
    note = outputs.equal_rows_note(
        {"naive": a, "safe": b, "online": a.copy(), "warp": b.copy(), "half": a.astype(np.float16)}
    )
    assert note.endswith(": naive = online; safe = warp.")  # the same values in another type are not equal rows


def test_outputs_and_error_pages_offer_the_share_image_and_name_the_run_in_titles():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app.py"), default_timeout=180)
    at.query_params.update({"rows": "4", "cols": "100", "variants": "naive,online_warp"})
    at.run()
    for path in ("", "errors"):
        hashes = {info.get("url_pathname"): h for h, info in at._registered_pages.items()}
        at._page_hash = hashes[path]
        at.run()
        assert not at.exception
        title = json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["title"]["text"]
        assert all(words in title for words in ("Normal", "4×100", "float32"))  # distribution, shape, dtype
        button = next(b for b in at.download_button if b.label == "Download share image (PNG)")
        assert button.proto.HasField("deferred_file_id")  # drawn when clicked, not on every rerun


def test_the_outputs_pages_share_image_is_given_its_nan_row_warning(monkeypatch):
    from streamlit.testing.v1 import AppTest

    import ui.share

    given = []
    monkeypatch.setattr(ui.share, "share_button", lambda *args: given.append(args))
    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app.py"), default_timeout=180)
    at.query_params.update(
        {"dist": "causal_mask", "p_masked_rows": "2", "rows": "4", "cols": "100", "row": "0", "variants": "naive"}
    )
    at.run()
    assert not at.exception
    (warning,) = [w.value for w in at.warning if "softmax is NaN" in w.value]
    notes, captions = given[-1][-2:]
    assert "e^(−∞ + ∞) / 0 is NaN" in warning and notes == [warning]  # the notes share_png writes under the title
    assert captions == []  # one variant: no equal rows to name


def test_the_device_line_names_where_a_file_came_from_after_its_date_on_either_backend():
    assert device_line({"backend": "emulator"}, "2026-01-02", source="x.json").endswith("2026-01-02 · from x.json")
    gpu = device_line({"gpu": "H200", "date": "2026-01-02T10:00"}, source="x.json")
    assert gpu.endswith("2026-01-02 · from x.json")


def test_a_log_axis_spanning_hundreds_of_decades_is_labelled_at_round_powers():
    """The Large magnitude row's probabilities span 1e-262 to 1e-19: labels at 1e-250, 1e-225, …, not 1e-262, 1e-237."""
    exponents = [round(math.log10(v)) for v in raster.Axis(1e-262, 1e-19, True, 0, 400).ticks()]
    assert exponents == list(range(-250, -24, 25))
    assert [round(math.log10(v)) for v in raster.Axis(1e-3, 10, True, 0, 400).ticks()] == [-3, -2, -1, 0, 1]


def test_a_row_summary_gives_no_max_or_argmax_beside_a_nan_or_inf():
    y = np.array([0.0, np.nan, 0.0, 0.0], np.float32)  # naive on a large input: NaN where e^x overflowed, 0 elsewhere
    summary = outputs.row_summary(y)
    assert np.isnan(summary["max p"]) and summary["argmax"] is None and summary["NaN"] == 1 and summary["zeros"] == 3
    ok = outputs.row_summary(np.array([0.25, 0.5, 0.25], np.float32))
    assert ok["max p"] == 0.5 and ok["argmax"] == 1 and ok["sum of row"] == 1.0

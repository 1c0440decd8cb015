"""The share image and the bundled results in a real browser (`streamlit run app.py`, Debian's chromium):
the load button, then 'Download share image (PNG)' on the Timing and top-k pages gives a PNG whose stamp
names the GPU the bundled results came from; on the Outputs and Error pages, one stamped with the run's
shape, input and device (saved to docs/screenshots/<page>_share.png). Helpers: tests/browser_helpers.py."""

import io
from pathlib import Path

import browser_helpers as bh
import pytest
from PIL import Image

pytestmark = pytest.mark.browser
sync_api = bh.require_browser()

RUN_QUERY = "?rows=4&cols=300&dist=large&dtype=float16&row=1&variants=naive,online_warp,online_block"


@pytest.fixture(scope="module")
def server():
    with bh.streamlit_server("streamlit_share.log") as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with bh.chromium(sync_api) as b:
        yield b


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 900}, accept_downloads=True)
    yield context.new_page()
    context.close()


def _share(page, name_start: str, save: str = "") -> Image.Image:
    """Click the share button; the downloaded PNG, after checking its name (its bytes saved to
    docs/screenshots/<save>.png where asked)."""
    button = page.get_by_role("button", name="Download share image (PNG)")
    assert bh.shown(button)
    button.scroll_into_view_if_needed()
    with page.expect_download(timeout=60000) as download:
        button.click()
    name = download.value.suggested_filename
    assert name.startswith(name_start) and name.endswith("_share.png"), name
    data = Path(download.value.path()).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    if save:
        (bh.SHOTS / f"{save}.png").write_bytes(data)
    img = Image.open(io.BytesIO(data))
    img.load()
    return img


@pytest.mark.parametrize(
    ("path", "variants", "key", "name_start", "panels", "charts"),
    [
        # fast: the page opens on the first shape that measured it, a sweep's (time and bandwidth; across widths)
        ("timing", "fast", "bench_bundled", "softmax_timing_", 2, 3),
        ("topk", "online_warp", "tk_bundled", "softmax_topk_timing_", 1, 2),  # time; the emulator's top-k
    ],
)
def test_bundled_results_load_with_one_click_and_share_as_one_png(
    server, page, path, variants, key, name_start, panels, charts
):
    page.goto(f"{server}/{path}?rows=4&cols=100&variants={variants}")
    bh.settle(page)
    load = page.get_by_role("button", name="Load the bundled NVIDIA H200 results")
    assert bh.shown(load)
    load.click()
    bh.settle(page)
    bh.wait_for_charts(page, charts)
    bh.no_exception(page)
    assert bh.query(page)[key] == "1"
    assert bh.chart_text_overlaps(page) == bh.crowded_bar_labels(page) == []  # timing: the first shape is in two
    # files, its bars side by side
    img = _share(page, name_start)
    assert img.width >= 1600 and img.height > panels * 560 + 200  # the charts, the table and the stamp
    stamp = img.text["Description"]
    assert stamp.startswith("shape ") and "GPU NVIDIA H200 · driver 13.0 · CUDA 13.2 · CuPy 14.2.0" in stamp


def test_outputs_and_error_share_one_stamped_png(server, page):
    """Outputs, then the Error page reached within the app (the runs kept): each page's PNG, stamped."""
    page.goto(f"{server}/{RUN_QUERY}")
    for name, title, panels in (
        ("outputs", None, 2),  # the reference and the deviations, then the strip of naive's NaNs (a shorter panel)
        ("errors", "Error vs float64", 1),
    ):
        if title:
            page.get_by_test_id("stSidebar").get_by_role("link", name=title).click()
            page.wait_for_url(f"**/{name}?*")
        bh.settle(page)
        bh.wait_for_charts(page, 1)
        bh.no_exception(page)
        img = _share(page, f"softmax_{name}_large_scale100_4x300_float16_acc-float32_seed0_row1", f"{name}_share")
        assert img.width >= 1600 and img.height > panels * 440 + 200  # the chart's panels, the table and the stamp
        shape, source, device = img.text["Description"].split("\n")
        assert shape == "shape 4×300 · dtype float16 · accumulator float32"
        assert source == "distribution Large magnitude (scale=100) · seed 0 · row 1"
        assert device.startswith(("GPU ", "CPU emulation (no GPU)"))

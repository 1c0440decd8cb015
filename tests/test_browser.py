"""The app in a real browser: `streamlit run app.py` driven by Playwright through Debian's chromium.

What AppTest cannot see: the modebar's PNG download, download buttons, URLs typed into the address bar
(the Step-through page's Play is checked in tests/test_browser_ux.py). Saves a full-page screenshot of each page to docs/screenshots/.
The server, browser and page helpers live in tests/browser_helpers.py.
"""

import json
import re
from pathlib import Path

import pytest
from browser_helpers import (
    POLL_MS,
    bench_file,
    chart_text_overlaps,
    choose,
    chromium,
    crowded_bar_labels,
    no_exception,
    query,
    require_browser,
    screenshot,
    settle,
    shown,
    streamlit_server,
    wait_for_charts,
)

import explorer

pytestmark = pytest.mark.browser
sync_api = require_browser()

PAGES = {
    "outputs": "",
    "step": "step",
    "errors": "errors",
    "precision": "precision",
    "topk": "topk",
    "timing": "timing",
    "kernels": "kernels",
}
BASE_QUERY = "?rows=8&cols=1000&variants=naive,safe_thread,online_thread,online_warp,online_block"
EVERY_VARIANT_QUERY = "?rows=8&cols=1000&variants=" + ",".join(explorer.VARIANTS)
# the precision lab up to n = 2^10 (about 4 s of emulation; 2^12 would take four times as long), its stagnation
# trace at 2^13
PAGE_QUERIES = {
    "step": "&tv=online_warp&step=12",
    "precision": "&prec_max=10",
    "topk": "&dist=zipf&dtype=float16&tk_vocab=50257&tk_k=16",
}
CHARTS = {"outputs": 2, "step": 2, "errors": 1, "precision": 5, "topk": 1, "timing": 3}
# checked again at 1000 px (charts 540 px wide beside the sidebar, 316 px in the precision lab's columns): the page
# as it is (None), or other views of it: (step) a warp's 32 lanes in the merge tree, its lanes heatmap and a lane's
# error axis, and the merge tree of a 1024-thread block
NARROW = {
    "outputs": (None,),
    "errors": (None,),
    "step": (None, f"step{EVERY_VARIANT_QUERY}&tv=online_block&mlevel=1024"),
    "precision": (None,),
    "topk": (None,),
    "timing": (None,),
}


@pytest.fixture(scope="module")
def server():
    with streamlit_server() as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with chromium(sync_api) as b:
        yield b


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 900}, accept_downloads=True)
    pg = context.new_page()
    yield pg
    context.close()


def test_controls_change_the_view_and_the_url(server, page):
    page.goto(server + "/" + BASE_QUERY)
    settle(page)
    no_exception(page)
    # the badge has no test id of its own: the page's main block (by test id) must come to hold its words
    sync_api.expect(page.get_by_test_id("stMain")).to_contain_text("CPU emulation (no GPU here)", timeout=30_000)
    choose(page, "Distribution", "Large magnitude")
    assert query(page)["dist"] == "large"
    assert shown(page.locator(".js-plotly-plot"))
    # naive overflows, and it is marked, not dropped: waited for in the legend (the chart drawn before the change,
    # still on the page while the rerun draws, has no such entry)
    naive_nan = page.locator(".js-plotly-plot .legendtext").filter(has_text=re.compile(r"^\s*naive: NaN"))
    sync_api.expect(naive_nan.first).to_be_attached()
    choose(page, "Input dtype", "float16")
    assert query(page)["dtype"] == "float16"
    # variants: remove one chip, add one from the list
    ms = page.get_by_test_id("stMultiSelect")
    ms.get_by_role("button", name=re.compile("naive", re.I)).first.click()
    settle(page)
    assert "naive" not in query(page)["variants"].split(",")
    ms.click()
    page.get_by_role("option", name="safe_block", exact=True).click()
    page.keyboard.press("Escape")
    settle(page)
    assert "safe_block" in query(page)["variants"].split(",")
    no_exception(page)


def test_shared_url_reproduces_the_configuration(server, page):
    url = (
        server + "/errors?dist=spike&p_height=20&rows=3&cols=64&seed=4&dtype=bfloat16&acc=float16"
        "&variants=online_warp,safe_thread&row=2"
    )
    page.goto(url)
    settle(page)
    no_exception(page)
    assert shown(page.get_by_role("heading", name="Error vs float64"))
    q = query(page)
    for key, value in (
        ("dist", "spike"),
        ("p_height", "20"),
        ("rows", "3"),
        ("cols", "64"),
        ("seed", "4"),
        ("dtype", "bfloat16"),
        ("acc", "float16"),
        ("variants", "online_warp,safe_thread"),
        ("row", "2"),
    ):
        assert q[key] == value, key
    sidebar = page.get_by_test_id("stSidebar")
    dist = sidebar.get_by_test_id("stSelectbox").filter(has_text="Distribution").locator("input").input_value()
    assert dist == "Spike (near one-hot)"
    sync_api.expect(sidebar.get_by_role("spinbutton", name="height")).to_have_value("20")  # waits for the rerun
    assert (
        sidebar.get_by_test_id("stSelectbox").filter(has_text="Input dtype").locator("input").input_value()
        == "bfloat16"
    )
    sync_api.expect(page.get_by_test_id("stMain")).to_contain_text("3×64 bfloat16 · acc float16 · seed 4")
    wait_for_charts(page)
    # the page draws several charts: the one titled for row 2 is waited for, not only the first to draw
    title = page.locator(".js-plotly-plot .gtitle").filter(has_text="Relative error per element, row 2")
    sync_api.expect(title.first).to_be_attached()


def test_png_and_csv_downloads(server, page, tmp_path):
    page.goto(server + "/" + BASE_QUERY)
    settle(page)
    plot = page.locator(".js-plotly-plot").first
    plot.hover()
    with page.expect_download(timeout=30000) as png:
        plot.locator('.modebar-btn[data-title="Download plot as a PNG"]').click()
    name = png.value.suggested_filename
    assert name == "softmax_outputs_normal_mean0_std1_8x1000_float32_acc-float32_seed0_row0.png"
    data = Path(png.value.path()).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    with page.expect_download(timeout=30000) as csv:
        page.get_by_role("button", name="Download table (CSV)").click()
    assert csv.value.suggested_filename.endswith(".csv")
    text = Path(csv.value.path()).read_text()
    assert text.splitlines()[0].startswith("variant,backend,sum of row")
    assert "online_warp,emulator" in text
    with page.expect_download(timeout=30000) as run:
        page.get_by_role("button", name="Download this run (JSON)").click()
    doc = json.loads(Path(run.value.path()).read_text())
    assert doc["config"]["rows"] == 8 and "online_warp" in doc["variants"]


def test_every_page_renders_without_overlapping_texts_and_is_captured(server, page, tmp_path):
    """Every page at 1400 px with all eight variants: no exception, no two texts of a chart overlapping (nor two bar
    labels touching), and a full-page screenshot in docs/screenshots/; the pages whose charts are widest or most
    crowded (Outputs and Error with all eight variants; a warp's merge tree, lanes and error axis, and the merge tree
    of a 1024-thread block; the precision lab's panels and half-width charts; top-16 ranks; Timing with the bundled
    results: peers' names and versions, two files' bars side by side) also at 1000 px."""
    overlaps = []
    for name, path in PAGES.items():
        page.goto(f"{server}/{path}{EVERY_VARIANT_QUERY}{PAGE_QUERIES.get(name, '')}")
        settle(page, timeout=120)
        no_exception(page)
        if name == "timing":  # the bundled H200 results and an uploaded file; the screenshot shows the H200's
            page.get_by_role("button", name="Load the bundled NVIDIA H200 results").click()
            settle(page)
            page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(str(bench_file(tmp_path)))
            settle(page)
            choose(page, "Shape and dtype", "4096×4096 float32 acc float32")  # the upload's shape
            assert shown(page.get_by_text("EXAMPLE (synthetic numbers)").first)
            choose(page, "Shape and dtype", "4096×32768 float32 acc float32")  # in the sweep and the wide step
            page.mouse.move(0, 0)  # no tooltip left open
            no_exception(page)
        if name == "kernels":
            assert shown(page.get_by_test_id("stCode"))
        if name in CHARTS:
            wait_for_charts(page, CHARTS[name])
        overlaps += [f"{name}: {hit}" for hit in chart_text_overlaps(page) + crowded_bar_labels(page)]
        shot = screenshot(page, name)
        assert shot.stat().st_size > 20_000
        for path in NARROW.get(name, ()):
            overlaps += [f"{name} at 1000 px: {hit}" for hit in narrow_overlaps(page, server, path)]
    assert overlaps == [], "\n".join(overlaps)


CHART_WIDTHS = "() => [...document.querySelectorAll('.js-plotly-plot')].map(c => c._fullLayout?.width)"


def narrow_overlaps(page, server: str, path: str | None) -> list[str]:
    """The overlapping texts at 1000 px of this page (once its charts are redrawn at the new width), or of the
    page at path; the viewport is 1400 px again after."""
    wide = page.evaluate(CHART_WIDTHS)
    page.set_viewport_size({"width": 1000, "height": 900})
    try:
        if path is None:
            page.wait_for_function(
                f"() => JSON.stringify(({CHART_WIDTHS})()) !== {json.dumps(json.dumps(wide))}", polling=POLL_MS
            )
        else:
            page.goto(f"{server}/{path}")
            settle(page, timeout=120)
            no_exception(page)
        wait_for_charts(page)
        return chart_text_overlaps(page)
    finally:
        page.set_viewport_size({"width": 1400, "height": 900})

"""The app in a real browser: `streamlit run app.py` driven by Playwright through Debian's chromium.

What AppTest cannot see: plotly frames and the Play button, the modebar's PNG download, download
buttons, URLs typed into the address bar. Saves a full-page screenshot of each page to docs/screenshots/.
"""

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "docs" / "screenshots"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
PAGES = {"outputs": "", "step": "step", "errors": "errors", "timing": "timing", "kernels": "kernels"}
BASE_QUERY = "?rows=8&cols=1000&variants=naive,safe_thread,online_thread,online_warp,online_block"

if not Path(CHROMIUM).exists():
    pytest.skip(f"{CHROMIUM} is missing", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    port = _free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    log = open(ROOT / ".pytest_cache" / "streamlit_browser.log", "w") if (ROOT / ".pytest_cache").is_dir() else subprocess.DEVNULL
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
                             "--server.port", str(port), "--browser.gatherUsageStats", "false"],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                pytest.fail("streamlit did not come up")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 900}, accept_downloads=True)
    pg = context.new_page()
    yield pg
    context.close()


def settle(pg, timeout: float = 60) -> None:
    """Wait until the script run is over and the page has stopped changing."""
    pg.wait_for_selector('[data-testid="stAppViewContainer"]', timeout=timeout * 1000)
    time.sleep(0.5)
    pg.wait_for_function("!document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout * 1000)
    pg.wait_for_function("!document.querySelector('[data-testid=\"stSkeleton\"]')", timeout=timeout * 1000)
    time.sleep(0.7)


def no_exception(pg) -> None:
    assert pg.locator('[data-testid="stException"]').count() == 0
    body = pg.locator('[data-testid="stMain"]').inner_text()
    assert "Traceback" not in body and "unexpected problem" not in body


def query(pg) -> dict:
    from urllib.parse import parse_qs, urlparse
    return {k: v[-1] for k, v in parse_qs(urlparse(pg.url).query).items()}


def choose(pg, label: str, option: str) -> None:
    box = pg.get_by_test_id("stSelectbox").filter(has_text=label).first
    box.click()
    pg.get_by_role("option", name=option, exact=True).click()
    settle(pg)


def screenshot(pg, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    height = pg.evaluate("document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    side = pg.evaluate("(document.querySelector('[data-testid=\"stSidebarContent\"]') || {scrollHeight: 0}).scrollHeight")
    pg.set_viewport_size({"width": 1400, "height": max(900, height, side)})
    time.sleep(1.5)
    pg.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
    pg.set_viewport_size({"width": 1400, "height": 900})


def _bench_file(tmp_path: Path) -> Path:
    """A results file in explorer.bench's schema; its meta says plainly that the numbers are made up."""
    rows = []
    for name, kind, t in (("online_warp", "variant", 41.0), ("online_block", "variant", 36.0), ("naive", "variant", 95.0),
                          ("safe_thread", "variant", 120.0), ("online_thread", "variant", 88.0), ("cupyx", "peer", 52.0),
                          ("copy", "copy", 30.0)):
        rows.append({"name": name, "kind": kind, "dtype": "float32", "acc": "float32", "rows": 4096, "cols": 4096,
                     "block_size": 256 if name == "online_block" else None, "median_us": t, "p10_us": t * 0.96,
                     "p90_us": t * 1.08, "gbps": 134.2 / t * 1e3, "pct_copy": 100 * 30.0 / t,
                     "bytes_moved": 134217728, "reads_per_element": 2, "writes_per_element": 1, "max_rel": 1e-7})
    path = tmp_path / "example_bench.json"
    path.write_text(json.dumps({"schema": "softmax-explorer-bench/1",
                                "meta": {"gpu": "EXAMPLE (synthetic numbers)", "cuda_runtime": "-", "cuda_driver": "-",
                                         "cupy": "-", "torch": None, "date": "2025-01-01", "l2_bytes": 0},
                                "results": rows}))
    return path


def test_controls_change_the_view_and_the_url(server, page):
    page.goto(server + "/" + BASE_QUERY)
    settle(page)
    no_exception(page)
    assert page.get_by_text("CPU emulation — no GPU timings").first.is_visible()
    choose(page, "Distribution", "Large magnitude")
    assert query(page)["dist"] == "large"
    assert page.locator(".js-plotly-plot").first.is_visible()
    legend = page.locator(".js-plotly-plot .legendtext").all_text_contents()
    assert any(t.startswith("naive: NaN") for t in legend)  # naive overflows, and it is marked, not dropped
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


def test_step_through_slider_and_play(server, page):
    page.goto(server + "/step" + BASE_QUERY + "&tv=online_thread")
    settle(page)
    no_exception(page)
    current = page.locator(".js-plotly-plot .slider-container .slider-group > .slider-label").first
    assert current.text_content().strip() == "step j = 0"
    page.locator(".js-plotly-plot .updatemenu-button").first.click()  # ▶ Play: frames run in the browser
    time.sleep(2.0)
    page.locator(".js-plotly-plot .updatemenu-button").nth(1).click()  # pause
    moved = int(current.text_content().split("=")[1])
    assert moved > 2
    assert "step j = " + str(moved) in page.locator(".js-plotly-plot .textpoint").first.text_content()
    # the server-side slider writes the update out and goes into the URL
    handle = page.get_by_test_id("stMain").get_by_test_id("stSlider").locator('input[type="range"]').first
    handle.focus()
    for _ in range(5):
        page.keyboard.press("ArrowRight")
    settle(page)
    assert query(page)["step"] == "5"
    assert page.get_by_text("The update at step j = 5").is_visible()
    choose(page, "Variant to trace", "online_block — Online softmax, block per row")
    assert query(page)["tv"] == "online_block"
    assert page.locator(".js-plotly-plot").count() == 3  # steps, lanes heatmap, merge tree
    no_exception(page)


def test_shared_url_reproduces_the_configuration(server, page):
    url = (server + "/errors?dist=spike&p_height=20&rows=3&cols=64&seed=4&dtype=bfloat16&acc=float16"
           "&variants=online_warp,safe_thread&row=2")
    page.goto(url)
    settle(page)
    no_exception(page)
    assert page.get_by_role("heading", name="Error vs float64").is_visible()
    q = query(page)
    for key, value in (("dist", "spike"), ("p_height", "20"), ("rows", "3"), ("cols", "64"), ("seed", "4"),
                       ("dtype", "bfloat16"), ("acc", "float16"), ("variants", "online_warp,safe_thread"), ("row", "2")):
        assert q[key] == value, key
    sidebar = page.get_by_test_id("stSidebar")
    dist = sidebar.get_by_test_id("stSelectbox").filter(has_text="Distribution").locator("input").input_value()
    assert dist == "Spike (near one-hot)"
    assert sidebar.get_by_role("spinbutton", name="height").input_value() == "20"
    assert sidebar.get_by_test_id("stSelectbox").filter(has_text="Input dtype").locator("input").input_value() == "bfloat16"
    assert page.get_by_text("3×64 bfloat16 · acc float16 · seed 4").first.is_visible()
    assert page.get_by_text("Relative error per element, row 2").first.is_visible()


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


def test_every_page_renders_and_is_captured(server, page, tmp_path):
    for name, path in PAGES.items():
        extra = "&tv=online_warp&step=12" if name == "step" else ""
        page.goto(f"{server}/{path}{BASE_QUERY}{extra}")
        settle(page)
        no_exception(page)
        if name == "timing":
            page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(str(_bench_file(tmp_path)))
            settle(page)
            page.wait_for_selector(".js-plotly-plot")
            no_exception(page)
        if name == "kernels":
            assert page.get_by_test_id("stCode").first.is_visible()
        screenshot(page, name)
        assert (SHOTS / f"{name}.png").stat().st_size > 20_000

"""What the browser tests share: starting `streamlit run app.py` on a free port (polling /_stcore/health),
launching Debian's chromium through Playwright, waiting for a script run to settle, choosing from a
select box, full-page screenshots, and a synthetic benchmark results file. Plain functions: each test
module wraps them in its own fixtures."""

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "docs" / "screenshots"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


# how often a wait_for_function checks its condition: Playwright's default, every animation frame, costs about a
# tenth of a core per waiting page, which a 2-core box running several pages at once pays in everything else
POLL_MS = 100

# how long an expect(...) waits for its condition unless told otherwise (Playwright's default is 5 s): fixed and
# generous, so that a loaded machine is only slower, never failed
EXPECT_TIMEOUT_MS = 30_000


def require_browser():
    """playwright.sync_api (its expect() waiting EXPECT_TIMEOUT_MS by default), or a clean module-level skip
    without chromium or playwright."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing", allow_module_level=True)
    sync_api = pytest.importorskip("playwright.sync_api")
    sync_api.expect.set_options(timeout=EXPECT_TIMEOUT_MS)
    return sync_api


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def streamlit_server(
    log_name: str = "streamlit_browser.log", env: dict[str, str] | None = None, log_path: Path | None = None
) -> Iterator[str]:
    """`streamlit run app.py` on a free port, healthy; yields its base URL and stops it afterwards. env: settings
    beside this process's environment (an operator's EXPLORER_* values). Its output goes to log_path, else to
    .pytest_cache/log_name where that folder exists."""
    port = _free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    if log_path is None and (ROOT / ".pytest_cache").is_dir():
        log_path = ROOT / ".pytest_cache" / log_name
    log = open(log_path, "w") if log_path else subprocess.DEVNULL
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            "app.py",
            "--server.headless",
            "true",
            "--server.port",
            str(port),
            "--browser.gatherUsageStats",
            "false",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
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


def log_line(path: Path, text: str, timeout: float = 60) -> str:
    """The first line of the log at path that holds text, waited for (fails after timeout seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        found = [line for line in path.read_text(errors="replace").splitlines() if text in line]
        if found:
            return found[0]
        if time.monotonic() > deadline:
            pytest.fail(f"no line with {text!r} in {path} within {timeout:.0f} s")
        time.sleep(0.5)


@contextlib.contextmanager
def chromium(sync_api) -> Iterator:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield b
        finally:
            b.close()


# the page's script run, as Streamlit's frontend marks it on the stApp element: "initial" before the first run
# starts, then "running", "rerunRequested", "notRunning", ...
SCRIPT_STATE = "(document.querySelector('[data-testid=\"stApp\"]') || {dataset: {}}).dataset.testScriptState"
_SCRIPT_IDLE = (
    f"() => {{ const s = {SCRIPT_STATE}; return !!s && !['initial', 'running', 'rerunRequested'].includes(s); }}"
)


def script_running(pg) -> bool:
    """Whether the page's script run has not started or is not over yet."""
    return not pg.evaluate(_SCRIPT_IDLE)


def settle(pg, timeout: float = 60) -> None:
    """Wait until the script run has started and is over, and the page has stopped changing."""
    pg.wait_for_selector('[data-testid="stAppViewContainer"]', timeout=timeout * 1000)
    time.sleep(0.5)
    pg.wait_for_function(_SCRIPT_IDLE, timeout=timeout * 1000, polling=POLL_MS)
    pg.wait_for_function(
        "!document.querySelector('[data-testid=\"stSkeleton\"]')", timeout=timeout * 1000, polling=POLL_MS
    )
    time.sleep(0.7)


def shown(locator, timeout: float = 30) -> bool:
    """Whether the locator's first match becomes visible within timeout seconds: a rerun that a widget
    started may still be drawing when settle() returns (seen on CI)."""
    try:
        locator.first.wait_for(state="visible", timeout=timeout * 1000)
    except Exception:  # playwright's TimeoutError
        return False
    return True


def no_exception(pg) -> None:
    assert pg.locator('[data-testid="stException"]').count() == 0
    body = pg.locator('[data-testid="stMain"]').inner_text()
    assert "Traceback" not in body and "unexpected problem" not in body


# what Streamlit's frontend says when it fails in the browser (a message it cannot take, a lost server, a crash)
BROWSER_ERRORS = ("Bad message format", "Connection error", "Something went wrong", "Page not found", "RangeError")


def watch_errors(pg) -> list[str]:
    """The page's uncaught JavaScript errors, collected from now on (a list that grows)."""
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    return errors


def no_browser_error(pg, errors: list[str]) -> None:
    """No uncaught JavaScript error (from watch_errors) and none of the frontend's error texts anywhere on the
    page (dialogs included)."""
    assert errors == []
    body = pg.locator("body").inner_text()
    found = [t for t in BROWSER_ERRORS if t in body]
    assert not found, (found, body[body.find(found[0]) :][:500])


def links_to(pg, href: str) -> int:
    """Elements anywhere in the document (HTML or SVG, so plotly's legend and titles too) that link to href,
    through href or xlink:href."""
    return pg.evaluate(
        """(href) => [...document.querySelectorAll('*')].filter(e =>
             e.getAttribute('href') === href || e.getAttributeNS('http://www.w3.org/1999/xlink', 'href') === href
           ).length""",
        href,
    )


def query(pg) -> dict:
    from urllib.parse import parse_qs, urlparse

    return {k: v[-1] for k, v in parse_qs(urlparse(pg.url).query).items()}


def choose(pg, label: str, option: str) -> None:
    """Pick `option` in the select box labelled `label` (scrolled into view first: a box at the viewport's
    edge opens no list; the option typed, so that a long list, which draws only the options in view, shows it)."""
    box = pg.get_by_test_id("stSelectbox").filter(has_text=label).first
    box.scroll_into_view_if_needed()
    box.get_by_role("combobox").click()
    pg.keyboard.type(option)
    pg.get_by_role("option", name=option, exact=True).click()
    settle(pg)


def wait_for_charts(pg, count: int = 1, timeout: float = 60) -> None:
    """Until `count` plotly charts have drawn their SVG (not only their frames)."""
    pg.wait_for_function(
        f"document.querySelectorAll('.js-plotly-plot .main-svg').length >= {count}",
        timeout=timeout * 1000,
        polling=POLL_MS,
    )
    time.sleep(1.0)


def screenshot(pg, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    height = pg.evaluate("document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    side = pg.evaluate(
        "(document.querySelector('[data-testid=\"stSidebarContent\"]') || {scrollHeight: 0}).scrollHeight"
    )
    pg.set_viewport_size({"width": 1400, "height": max(900, height, side)})
    time.sleep(1.5)
    path = SHOTS / f"{name}.png"
    pg.screenshot(path=str(path), full_page=True)
    pg.set_viewport_size({"width": 1400, "height": 900})
    return path


def bench_doc(gpu: str = "EXAMPLE (synthetic numbers)", rows: int = 4096, cols: int = 4096, scale: float = 1.0) -> dict:
    """A results document in explorer.bench's schema (explorer.bench.load accepts it); the numbers are made
    up, and its meta says so."""
    results = []
    for name, kind, t in (
        ("online_warp", "variant", 41.0),
        ("online_block", "variant", 36.0),
        ("naive", "variant", 95.0),
        ("safe_thread", "variant", 120.0),
        ("online_thread", "variant", 88.0),
        ("cupyx", "peer", 52.0),
        ("copy", "copy", 30.0),
    ):
        t *= scale
        moved = 2 * rows * cols * 4  # one read and one write of float32: 134 MB at 4096×4096, as on an H200 run
        results.append(
            {
                "name": name,
                "kind": kind,
                "dtype": "float32",
                "acc": "float32",
                "rows": rows,
                "cols": cols,
                "block_size": 256 if name == "online_block" else None,
                "median_us": t,
                "p10_us": t * 0.96,
                "p90_us": t * 1.08,
                "gbps": moved / t / 1e3,
                "pct_copy": 100 * 30.0 * scale / t,
                "bytes_moved": moved,
                "reads_per_element": 2,
                "writes_per_element": 1,
                "max_rel": 1e-7,
            }
        )
    return {
        "schema": "softmax-explorer-bench/1",
        "meta": {
            "gpu": gpu,
            "cuda_runtime": "-",
            "cuda_driver": "-",
            "cupy": "-",
            "torch": None,
            "date": "2025-01-01",
            "l2_bytes": 0,
            "note": "synthetic numbers for tests and screenshots",
        },
        "results": results,
    }


def bench_file(tmp_path: Path, name: str = "example_bench.json", **kwargs) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(bench_doc(**kwargs)))
    return path


_CLOSE_TEXTS_JS = """
([selector, gap]) => [...document.querySelectorAll('.js-plotly-plot')].map((plot, i) => {
  const boxes = [...plot.querySelectorAll(selector)]
    .filter(t => t.textContent.trim() && getComputedStyle(t).display !== 'none' && t.getAttribute('opacity') !== '0')
    .map(t => ({text: t.textContent.trim(), r: t.getBoundingClientRect()}))
    .filter(b => b.r.width > 0 && b.r.height > 0);
  const hits = [];
  for (let a = 0; a < boxes.length; a++)
    for (let b = a + 1; b < boxes.length; b++) {
      const p = boxes[a].r, q = boxes[b].r;
      const apart = Math.max(p.left, q.left) - Math.min(p.right, q.right);
      const h = Math.min(p.bottom, q.bottom) - Math.max(p.top, q.top);
      if (h > 1 && apart < gap) hits.push(`chart ${i}: "${boxes[a].text}" × "${boxes[b].text}"`);
    }
  return hits;
}).flat()
"""


def crowded_bar_labels(pg, gap: float = 3) -> list[str]:
    """Pairs of bar labels in one chart at the same height with less than `gap` pixels between them (touching labels
    read as one: "98% of copy98% of copy"), as 'chart i: "a" × "b"'."""
    return pg.evaluate(_CLOSE_TEXTS_JS, [".main-svg .bartext", gap])


def chart_text_overlaps(pg) -> list[str]:
    """Every pair of text boxes in one chart's SVG (titles, ticks, labels, legend) whose rectangles overlap by more
    than a pixel each way, as 'chart i: "a" × "b"'."""
    return pg.evaluate(_CLOSE_TEXTS_JS, [".main-svg text, .main-svg .legendtext", -1])

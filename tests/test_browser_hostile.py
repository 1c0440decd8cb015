"""The explorer driven into hostile situations in a real browser (`streamlit run app.py`, Debian's chromium through
Playwright), each checked for the outcome asked of it: an .npy whose header lies about its size, uploads over the
limit or of another kind (refused in our words, not Streamlit's), malformed and HTML-carrying results files on the
Timing page, a 1 × 2,000,000 row (drawn reduced, a click answered), a run over the time budget (refused the same way
twice), a long run stopped (by its Stop button, and by closing its tab), a server started with a malformed element
cap, a page URL opened directly and a 10,000-character URL parameter.

The run-control tests use a second server whose EXPLORER_RUN_SECONDS is 1 s, so that a modest shape is over it (its
log, which says how each long run ended, in pytest's temporary folder); a third is started with
EXPLORER_MAX_ELEMENTS=-5.
Limits are fixed and generous (a shared 2-core box runs these); outcomes are waited for, never slept for.
Helpers: tests/browser_helpers.py."""

import io
import json
import re
import time

import browser_helpers as bh
import numpy as np
import pytest

from explorer.checks import DEFAULT_MAX_ELEMENTS
from explorer.inputs import MAX_UPLOAD_BYTES

pytestmark = pytest.mark.browser
sync_api = bh.require_browser()

SETTINGS = "?rows=8&cols=1000&seed=7&dtype=float16&variants=online_warp,naive"
BUDGET_S = "1"  # the second server's EXPLORER_RUN_SECONDS
OVER_MEMORY = "?rows=8192&cols=8192"  # every variant: about 5 GiB for the page, over the second server's 4 GiB
OVER_BUDGET = "?rows=1024&cols=4096"  # every variant: about 2 s in the emulation, over 1 s
# two variants that emulate in many batches of rows: about 46 s estimated, with a chance to stop every second
LONG_RUN = "?rows=131072&cols=64&variants=online_block,split_row"
# twice the rows in float16 (each rounding a cast): about 3 min estimated in 2.5 GiB, still running long after its tab
# closed
LONGER_RUN = "?rows=262144&cols=64&dtype=float16&acc=float16&variants=online_block,split_row"
# how long the server may take to stop a run whose tab closed: a timeout, well under the run's own time
CLOSED_STOP_S = 60
LONG_ROW = "?rows=1&cols=2000000&variants=fast,online_block,split_row"
# how long a click on that row's page may take to be answered before the test gives up: a timeout, not a speed check
CLICK_TIMEOUT_S = 120
# the most the server may send one page of that row (8 MB of its float32 outputs alone): the reduced charts and tables
# take about 1-3 MiB whatever the row's length
PAGE_BYTES = 4 * 2**20
LINK = "http://x"
HTML_GPU = f'<a href="{LINK}">click</a>'
LONG_VALUE = 10_000
SIDEBAR_LABELS = ("Distribution", "Rows", "Cols", "Seed", "Input dtype", "Accumulator", "Variants")


@pytest.fixture(scope="module")
def browser():
    with bh.chromium(sync_api) as b:
        yield b


@pytest.fixture(scope="module")
def server():
    with bh.streamlit_server("streamlit_hostile.log") as url:
        yield url


@pytest.fixture(scope="module")
def budget_log(tmp_path_factory):
    """Where the budget server's output goes: its log says how each long run ended."""
    return tmp_path_factory.mktemp("budget_server") / "streamlit.log"


@pytest.fixture(scope="module")
def budget_server(budget_log):
    """A server whose time budget for one page's emulated runs is 1 s (its memory limit fixed at 4 GiB, so that
    LONG_RUN's page fits on a machine with less RAM; the run is stopped long before it uses that much)."""
    env = {"EXPLORER_RUN_SECONDS": BUDGET_S, "EXPLORER_RUN_BUDGET_BYTES": str(4 * 2**30)}
    with bh.streamlit_server(env=env, log_path=budget_log) as url:
        yield url


@pytest.fixture(scope="module")
def bad_cap_server():
    """A server started with a malformed element cap, EXPLORER_MAX_ELEMENTS=-5 (warned about, the default used)."""
    with bh.streamlit_server("streamlit_hostile_bad_cap.log", env={"EXPLORER_MAX_ELEMENTS": "-5"}) as url:
        yield url


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    yield context.new_page()
    context.close()


def _sidebar(pg):
    return pg.get_by_test_id("stSidebar")


def _number_box(pg, label: str):
    return _sidebar(pg).get_by_test_id("stNumberInput").filter(has_text=label).first.locator("input")


def _number(pg, label: str) -> str:
    return _number_box(pg, label).input_value()


def _expect_numbers(pg, values: dict[str, str]) -> None:
    """The sidebar's whole-number boxes show these values, waited for: a rerun redraws them (a box can read 0
    while it does, seen on CI)."""
    for label, value in values.items():
        sync_api.expect(_number_box(pg, label)).to_have_value(value)


def _no_hostile_text(pg) -> None:
    """No exception box, traceback, catch-all note or NumPy advice anywhere on the page (sidebar included)."""
    assert pg.locator('[data-testid="stException"]').count() == 0
    body = pg.locator("body").inner_text()
    for text in ("Traceback", "unexpected problem", "allow_pickle", "Error:"):
        assert text not in body, text


def _lying_npy(path, shape=(100_000, 100_000)):
    """An .npy whose header claims `shape` float32 (40 GB) but which holds 72 bytes of data: about 200 bytes."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": shape})
    path.write_bytes(header.getvalue() + np.arange(18, dtype="<f4").tobytes())
    return path


def _upload_refused(pg, path) -> str:
    """Upload path in the sidebar (the distribution switched to an uploaded file) and return the sidebar's refusal
    naming the file, waited for: the rerun that reads the file may still be drawing when settle() returns."""
    bh.choose(pg, "Distribution", "Your own logits (.npy / .csv)")
    dropzone = _sidebar(pg).get_by_test_id("stFileUploaderDropzoneInput")
    dropzone.wait_for(state="attached", timeout=60_000)
    dropzone.set_input_files(str(path))
    bh.settle(pg, timeout=120)
    refusal = _sidebar(pg).get_by_test_id("stAlert").filter(has_text=path.name)
    assert bh.shown(refusal, timeout=120), _sidebar(pg).inner_text()
    return refusal.first.inner_text()


def _upload_to_timing(pg, server: str, *paths) -> None:
    pg.goto(f"{server}/timing{SETTINGS}")
    bh.settle(pg)
    pg.get_by_test_id("stFileUploaderDropzoneInput").set_input_files([str(p) for p in paths])
    bh.settle(pg)


def _alerts(pg, where) -> list[str]:
    return where.get_by_test_id("stAlert").all_inner_texts()


# --- 1. uploads: an .npy whose header lies about its size, files over the limit or of another kind -------------


def test_an_npy_whose_header_claims_forty_gigabytes_is_refused_in_words(server, page, tmp_path):
    path = _lying_npy(tmp_path / "lying_header.npy")
    assert 150 <= path.stat().st_size <= 250
    page.goto(server + "/" + SETTINGS)
    bh.settle(page)
    bh.wait_for_charts(page)
    before = bh.query(page)
    error = _upload_refused(page, path)
    assert "header" in error or "could not be read" in error, error
    _no_hostile_text(page)
    # the rest of the sidebar is still there, and the settings are the ones before the upload
    for label in SIDEBAR_LABELS:
        assert bh.shown(_sidebar(page).get_by_text(label, exact=True)), label
    assert bh.shown(_sidebar(page).get_by_test_id("stFileUploader"))
    _expect_numbers(page, {"Rows": "8", "Cols": "1000", "Seed": "7"})
    after = bh.query(page)
    assert after.pop("dist") == "upload"
    assert after == {k: v for k, v in before.items() if k != "dist" and not k.startswith("p_")}
    # nothing ran on the refused file: the page says it was refused, and why
    assert bh.shown(page.get_by_test_id("stMain").get_by_text("The upload was refused:"))
    # back to the distribution: everything as before the upload, and it runs
    bh.choose(page, "Distribution", "Normal")
    bh.wait_for_charts(page)
    assert bh.query(page) == before
    _no_hostile_text(page)


# Streamlit's own uploader refusals, which name no file and say nothing of what to upload instead
STREAMLIT_REFUSALS = ("or smaller", "not allowed")


def _uint8_npy(path, size: int, ndim: int = 1) -> None:
    """A genuine .npy of uint8 zeros whose file is `size` bytes (its header is 128 bytes): 1-D, or 3-D (2 × n × 1)."""
    n = size - 128
    np.save(path, np.zeros(n if ndim == 1 else (2, n // 2, 1), np.uint8))
    assert path.stat().st_size == size


NOTES = "these are notes, not logits\n"
# under MAX_UPLOAD_BYTES (64 MiB), over 64 "MB" as Streamlit's browser code counts them (10^6 bytes each)
UNDER = 66 * 10**6
UPLOADS = {  # file name: (write it, words of our refusal)
    "one_byte_over.npy": (
        lambda path: _uint8_npy(path, MAX_UPLOAD_BYTES + 1),
        (f"is {MAX_UPLOAD_BYTES + 1:,} bytes", f"the limit is {MAX_UPLOAD_BYTES:,} bytes (64.00 MiB)", "smaller file"),
    ),
    "under_the_limit_3d.npy": (
        lambda path: _uint8_npy(path, UNDER, ndim=3),
        (f"has shape (2, {(UNDER - 128) // 2}, 1)", "give a vector or a rows × cols matrix"),
    ),
    "notes.txt": (lambda path: path.write_text(NOTES), ("upload a .npy or .csv file",)),
    "notes_renamed.npy": (lambda path: path.write_text(NOTES), ("not a NumPy array file", "np.save")),
}


@pytest.mark.parametrize("name", UPLOADS)
def test_an_upload_over_the_limit_or_of_another_kind_is_refused_in_our_words(server, page, tmp_path, name):
    """One byte over MAX_UPLOAD_BYTES, a 3-D array under it (a size Streamlit's browser code counts as over 64 MB), a
    text file, and a text file renamed .npy: each reaches the explorer and is refused with what to do, not stopped
    by Streamlit's uploader in its own words; the sidebar goes on."""
    write, words = UPLOADS[name]
    path = tmp_path / name
    write(path)
    page.goto(server + "/" + SETTINGS)
    bh.settle(page)
    error = _upload_refused(page, path)
    for word in words:
        assert word in error, (word, error)
    body = page.locator("body").inner_text()
    for text in STREAMLIT_REFUSALS:
        assert text not in body, (text, body)
    _no_hostile_text(page)
    assert bh.shown(page.get_by_test_id("stMain").get_by_text("The upload was refused:"))
    for label in SIDEBAR_LABELS:
        assert bh.shown(_sidebar(page).get_by_text(label, exact=True)), label


# --- 2. results files on the Timing page ------------------------------------------------------------------------


def _malformed(kind: str) -> str:
    doc = bh.bench_doc(gpu="MALFORMED (synthetic)")
    if kind == "empty_results":
        doc["results"] = []
    elif kind == "text_rows":
        doc["results"][0]["rows"] = "many"
    elif kind == "text_times":
        for r in doc["results"]:
            r["median_us"] = "fast"
    elif kind == "not_json":
        return "{this is not json"
    return json.dumps(doc)


MALFORMED = ("empty_results", "text_rows", "text_times", "not_json")


def test_malformed_results_files_are_each_refused_with_a_reason(server, page, tmp_path):
    """Four malformed files uploaded together: each refused in its own words, nothing drawn."""
    paths = []
    for kind in MALFORMED:
        paths.append(tmp_path / f"malformed_{kind}.json")
        paths[-1].write_text(_malformed(kind))
    _upload_to_timing(page, server, *paths)
    main = page.get_by_test_id("stMain")
    for path in paths:
        # each refusal is waited for: the rerun that reads the files may still be drawing when settle() returns
        assert bh.shown(main.get_by_test_id("stAlert").filter(has_text=path.name), timeout=120), main.inner_text()
    _no_hostile_text(page)
    for path in paths:
        refusals = [t for t in _alerts(page, main) if path.name in t]
        assert len(refusals) == 1, (path.name, refusals)
        assert len(refusals[0]) > len(path.name) + 10, refusals  # a reason, not only the name
    assert page.locator(".js-plotly-plot").count() == 0


def test_a_results_file_over_the_limit_or_of_another_kind_is_refused_in_our_words(server, page, tmp_path):
    """On the Timing page, a text file and a results file one byte over MAX_UPLOAD_BYTES reach the explorer and are
    refused with a reason, not stopped by Streamlit's uploader in its own words."""
    notes, big = tmp_path / "notes.txt", tmp_path / "one_byte_over.json"
    notes.write_text(NOTES)
    big.write_text(" " * (MAX_UPLOAD_BYTES + 1))
    _upload_to_timing(page, server, notes, big)
    main = page.get_by_test_id("stMain")
    words = {notes: "not a results file (JSON expected)", big: f"the limit is {MAX_UPLOAD_BYTES:,} bytes"}
    for path, word in words.items():
        refusal = main.get_by_test_id("stAlert").filter(has_text=path.name)
        assert bh.shown(refusal, timeout=120), main.inner_text()
        assert word in refusal.first.inner_text(), (word, refusal.first.inner_text())
    body = page.locator("body").inner_text()
    for text in STREAMLIT_REFUSALS:
        assert text not in body, (text, body)
    _no_hostile_text(page)


def test_html_in_a_results_file_shows_as_text(server, page, tmp_path):
    path = bh.bench_file(tmp_path, "html_gpu.json", gpu=HTML_GPU)
    _upload_to_timing(page, server, path)
    bh.wait_for_charts(page, 2)
    bh.no_exception(page)
    legend = " ".join(page.locator(".js-plotly-plot .legendtext").all_text_contents())
    assert HTML_GPU in legend, legend  # the markup as text, tags and all
    assert bh.links_to(page, LINK) == 0
    # nor does hovering a bar (its hover label names the source)
    page.locator(".js-plotly-plot .point path").first.hover(force=True)
    page.wait_for_selector(".hoverlayer .hovertext", state="attached", timeout=30_000)
    assert bh.links_to(page, LINK) == 0


# --- 3. a 1 × 2,000,000 row --------------------------------------------------------------------------------------


def _drawn_points(pg) -> list[int]:
    return pg.evaluate("() => document.querySelector('.js-plotly-plot')._fullData.map(t => t._length || 0)")


def _received(pg) -> list[int]:
    """The sizes of the websocket messages the page gets from the server, from now on (a list that grows)."""
    sizes: list[int] = []
    pg.on("websocket", lambda ws: ws.on("framereceived", lambda message: sizes.append(len(message))))
    return sizes


def _sent_since(sizes: list[int], mark: int, what: str) -> int:
    """The bytes the server sent the page since `mark` messages, held to PAGE_BYTES; the count now."""
    sent = sum(sizes[mark:])
    print(f"{what}: {sent / 2**20:.2f} MiB sent to the browser")
    assert sent <= PAGE_BYTES, (what, sent)
    return len(sizes)


def _open_in_app(pg, name: str, path: str) -> None:
    pg.get_by_test_id("stSidebar").get_by_role("link", name=name).click()
    pg.wait_for_url(f"**/{path}?*")
    bh.settle(pg, timeout=300)


def test_a_row_of_two_million_renders_reduced_and_answers_a_click(server, page):
    """Outputs, then (switched to within the app, the runs kept) the Error page: each drawn reduced, with no error,
    and a click answered on the Outputs chart (how long it took is printed, not checked); then the Step page (its
    lane, its 256 lanes' heatmap and merge tree), Kernels and Timing. No page is sent more than PAGE_BYTES."""
    errors, sizes = bh.watch_errors(page), _received(page)
    page.goto(f"{server}/{LONG_ROW}")
    bh.settle(page, timeout=300)
    bh.wait_for_charts(page, 1, timeout=300)
    bh.no_exception(page)
    bh.no_browser_error(page, errors)
    mark = _sent_since(sizes, 0, "Outputs")
    assert max(_drawn_points(page)) <= 10_001  # drawn reduced, not two million points
    assert "drawn as at most" in page.get_by_test_id("stMain").inner_text()
    assert page.evaluate("() => document.querySelector('.js-plotly-plot').layout.yaxis.type") != "linear"
    start = time.perf_counter()
    page.get_by_test_id("stMain").get_by_text("Log scale", exact=True).click()
    page.wait_for_function(  # redrawn with the other scale, not caught mid-draw
        "() => document.querySelector('.js-plotly-plot')?.layout?.yaxis?.type === 'linear'",
        timeout=CLICK_TIMEOUT_S * 1000,
        polling=bh.POLL_MS,
    )
    print(f"the click on a 1 × 2,000,000 row's page was answered in {time.perf_counter() - start:.2f} s")
    bh.settle(page, timeout=300)
    mark = _sent_since(sizes, mark, "Outputs, redrawn")
    _open_in_app(page, "Error vs float64", "errors")
    bh.wait_for_charts(page, 1, timeout=300)
    bh.no_exception(page)
    bh.no_browser_error(page, errors)
    assert bh.query(page)["cols"] == "2000000"
    assert max(_drawn_points(page)) <= 100_000
    mark = _sent_since(sizes, mark, "Error vs float64")
    _open_in_app(page, "Step through", "step")
    bh.wait_for_charts(page, 3, timeout=300)  # the lane, the lanes' heatmap, the merge tree
    bh.no_exception(page)
    bh.no_browser_error(page, errors)
    mark = _sent_since(sizes, mark, "Step through")
    for name, path in (("Kernels", "kernels"), ("Timing", "timing")):
        _open_in_app(page, name, path)
        bh.no_exception(page)
        mark = _sent_since(sizes, mark, name)


# --- 4. over the time budget: refused, the same way twice ----------------------------------------------------------


def _budget_refusal(pg) -> tuple[str, str]:
    main = pg.get_by_test_id("stMain")
    warning = main.get_by_test_id("stAlert").filter(has_text="Not run yet")
    assert bh.shown(warning), main.inner_text()
    button = main.get_by_role("button", name="Run anyway")
    assert bh.shown(button)
    return warning.first.inner_text(), button.first.inner_text()


def test_a_run_over_the_time_budget_is_refused_before_running_the_same_way_twice(budget_server, page):
    page.goto(f"{budget_server}/{OVER_BUDGET}")
    bh.settle(page)
    first, button = _budget_refusal(page)
    assert "over this server's budget of 1 s" in first and "1,024×4,096" in first, first
    assert "Run anyway (about " in button
    # refused before running: nothing ran, nothing is running
    assert page.locator(".js-plotly-plot").count() == 0
    assert page.get_by_test_id("stProgress").count() == 0
    _no_hostile_text(page)
    url = page.url
    page.reload()
    bh.settle(page)
    assert page.url == url
    assert _budget_refusal(page) == (first, button)
    assert page.locator(".js-plotly-plot").count() == 0
    _no_hostile_text(page)


def _memory_refusal(pg) -> str:
    main = pg.get_by_test_id("stMain")
    refusal = main.get_by_test_id("stAlert").filter(has_text="over this server's limit")
    assert bh.shown(refusal), main.inner_text()
    return refusal.first.inner_text()


def test_a_run_over_the_memory_limit_is_refused_at_once_the_same_way_twice(budget_server, page):
    """8192×8192 float32 with every variant: its page needs more than the server's fixed 4 GiB for one run, so it
    is refused from the shape alone (nothing allocated, nothing run), in words that say what to change."""
    page.goto(f"{budget_server}/{OVER_MEMORY}")
    bh.settle(page)
    first = _memory_refusal(page)
    assert "8192×8192" in first and "4.00 GiB" in first and "smaller shape or fewer variants" in first, first
    assert page.locator(".js-plotly-plot").count() == 0
    assert page.get_by_test_id("stProgress").count() == 0
    _no_hostile_text(page)
    page.reload()
    bh.settle(page)
    assert _memory_refusal(page) == first
    assert page.locator(".js-plotly-plot").count() == 0


# --- 5. a long run stopped -----------------------------------------------------------------------------------------


def test_a_long_run_stopped_says_so_and_offers_to_run_again(budget_server, page):
    page.goto(f"{budget_server}/{LONG_RUN}")
    bh.settle(page)
    _budget_refusal(page)
    url, rows, cols = page.url, _number(page, "Rows"), _number(page, "Cols")
    main = page.get_by_test_id("stMain")
    main.get_by_role("button", name="Run anyway").click()
    # running: its progress names the rows done, and a Stop button is offered
    progress = main.get_by_test_id("stProgress").filter(has_text="rows")
    assert bh.shown(progress, timeout=180), main.inner_text()
    stop = main.get_by_role("button", name="Stop")
    assert bh.shown(stop)
    stop.click()
    stopped = main.get_by_test_id("stAlert").filter(has_text="Stopped before the run finished")
    assert bh.shown(stopped, timeout=120), main.inner_text()
    bh.settle(page)
    assert bh.shown(main.get_by_role("button", name="Run again"))
    assert main.get_by_test_id("stProgress").count() == 0
    assert page.locator(".js-plotly-plot").count() == 0
    assert page.url == url
    _expect_numbers(page, {"Rows": rows, "Cols": cols})
    _no_hostile_text(page)


def test_a_long_run_whose_tab_closes_is_stopped_by_the_server(budget_server, budget_log, page):
    """A run of about 3 min, confirmed and showing its progress, then its tab closed: within CLOSED_STOP_S the
    server's log says that run stopped because its session closed, with most of it not done (the share done, not
    the time taken, so that a faster or slower machine tells the same)."""
    page.goto(f"{budget_server}/{LONGER_RUN}")
    bh.settle(page)
    _, button = _budget_refusal(page)
    estimate = button.split("(about ")[1].rstrip(")")  # as the log names the run: "run (estimated 3.1 min) ..."
    main = page.get_by_test_id("stMain")
    main.get_by_role("button", name="Run anyway").click()
    progress = main.get_by_test_id("stProgress").filter(has_text="rows")
    assert bh.shown(progress, timeout=180), main.inner_text()
    page.context.close()
    line = bh.log_line(budget_log, f"run (estimated {estimate})", timeout=CLOSED_STOP_S)
    assert "stopped after" in line and "its session closed" in line, line
    assert int(re.search(r"(\d+)% done", line)[1]) < 50, line


# --- 6. a malformed operator setting ---------------------------------------------------------------------------


OVER_THE_DEFAULT_CAP = "?rows=65536&cols=65536&variants=online_warp"  # 2^32 elements
WITHIN_IT = "?rows=4&cols=100000&variants=online_warp"  # 400,000 elements: more than a small cap would take


def test_a_server_started_with_a_malformed_element_cap_uses_the_default_and_runs(bad_cap_server, page):
    """EXPLORER_MAX_ELEMENTS=-5: the page refuses a shape over the default cap of 2^31 - 1 elements, quoting that
    cap (not -5), and a shape within it runs; the operator's setting is not the user's business."""
    page.goto(f"{bad_cap_server}/{OVER_THE_DEFAULT_CAP}")
    bh.settle(page)
    refusal = page.get_by_test_id("stMain").get_by_test_id("stAlert").filter(has_text="over this server's limit")
    assert bh.shown(refusal), page.get_by_test_id("stMain").inner_text()
    assert f"limit of {DEFAULT_MAX_ELEMENTS:,} elements" in refusal.first.inner_text()
    assert page.locator(".js-plotly-plot").count() == 0
    _no_hostile_text(page)
    page.goto(f"{bad_cap_server}/{WITHIN_IT}")
    bh.settle(page)
    bh.wait_for_charts(page)
    bh.no_exception(page)
    body = page.locator("body").inner_text()
    assert "over this server's limit" not in body and "EXPLORER_MAX_ELEMENTS" not in body
    _no_hostile_text(page)


# --- 7. page URLs and hostile URL parameters -------------------------------------------------------------------


def test_a_page_url_opened_directly_shows_that_page(server, page):
    errors = bh.watch_errors(page)
    page.goto(f"{server}/outputs{SETTINGS}")
    bh.settle(page)
    bh.no_browser_error(page, errors)  # "Page not found" among them
    assert page.get_by_role("dialog").count() == 0
    bh.wait_for_charts(page)
    bh.no_exception(page)
    assert bh.shown(page.get_by_test_id("stMain").get_by_role("heading", name="Outputs"))
    assert bh.query(page)["seed"] == "7"
    menu = page.get_by_test_id("stSidebar").get_by_role("link", name="Outputs")
    assert menu.get_attribute("href").split("?")[0].split("/")[-1] == "outputs"  # the menu's entry is this page


LONG_KEYS = ("rows", "variants", "p_std")  # a number, a list and a distribution's parameter


def test_ten_thousand_character_parameters_are_warned_about_without_echoing_them(server, page):
    value = "9" * LONG_VALUE
    page.goto(f"{server}/kernels?" + "&".join(f"{key}={value}" for key in LONG_KEYS))
    bh.settle(page)
    for key in LONG_KEYS:  # a fresh server's first run can start after settle() has returned: each is waited for
        assert bh.shown(_sidebar(page).get_by_test_id("stAlert").filter(has_text=key)), _sidebar(page).inner_text()
    bh.settle(page)
    bh.no_exception(page)
    assert len(page.url) < LONG_VALUE  # no value is kept in the URL
    _expect_numbers(page, {"Rows": "8"})  # the default is used
    for key in LONG_KEYS:
        warnings = [t for t in _alerts(page, _sidebar(page)) if key in t]
        assert warnings and all(len(t) < 1000 and value[:200] not in t for t in warnings), (key, warnings)

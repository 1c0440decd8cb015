"""The explorer as a newcomer meets it, in a real browser (Debian's chromium through Playwright): the step
formula follows Play and Pause (a long row's click and the charts' texts at 1000 px are checked in
tests/test_browser_hostile.py and tests/test_browser.py, on pages they load anyway).

Waits are fixed and generous timeouts (a shared 2-core box runs these); no outcome depends on the machine's speed."""

import re
import time

import browser_helpers as bh
import pytest

pytestmark = pytest.mark.browser
sync_api = bh.require_browser()


@pytest.fixture(scope="module")
def app():
    """(base URL, chromium) for the module: one server, one browser."""
    with bh.streamlit_server("streamlit_browser_ux.log") as url, bh.chromium(sync_api) as browser:
        yield url, browser


@pytest.fixture
def server(app):
    return app[0]


@pytest.fixture
def page(app):
    context = app[1].new_context(viewport={"width": 1400, "height": 900})
    yield context.new_page()
    context.close()


def _heading_step(pg) -> int:
    text = pg.get_by_test_id("stMain").get_by_text(re.compile(r"The update at step j = \d+")).first.inner_text()
    return int(re.search(r"step j = (\d+)", text).group(1))


def _formula(pg) -> str:
    return " ".join(pg.get_by_test_id("stMain").locator(".katex-mathml annotation").all_text_contents())


STEP_SHOWN_EVERYWHERE = """() => {
    const thumb = document.querySelector('[data-testid="stMain"] [data-testid="stSliderThumbValue"]');
    const chart = document.querySelector('.js-plotly-plot');
    const step = new URLSearchParams(location.search).get('step');
    return thumb !== null && step === thumb.innerText.trim()
        && chart !== null && chart.layout !== undefined && String(chart.layout.shapes[0].x0) === step;
}"""


STEP_SHOWN_WHERE = """() => [
    new URLSearchParams(location.search).get('step'),
    document.querySelector('[data-testid="stMain"] [data-testid="stSliderThumbValue"]')?.innerText,
    document.querySelector('.js-plotly-plot')?.layout?.shapes?.[0]?.x0,
]"""


def test_the_step_formula_follows_play(server, page):
    page.goto(server + "/step?rows=8&cols=1000&variants=online_thread,online_warp&tv=online_thread&step=3")
    bh.settle(page, timeout=120)
    bh.no_exception(page)
    main = page.get_by_test_id("stMain")
    slider = main.get_by_test_id("stSlider").get_by_role("slider").first
    thumb = main.get_by_test_id("stSliderThumbValue").first
    assert _heading_step(page) == 3 and thumb.inner_text() == "3"
    # the controls and the update they select both sit in a 900 px tall window
    for element in (slider, main.get_by_role("button", name="▶ Play"), main.locator(".katex").first):
        box = element.bounding_box()
        assert box is not None and 0 <= box["y"] and box["y"] + box["height"] <= 900, box
    before = _formula(page)
    main.get_by_role("button", name="▶ Play").click()
    page.wait_for_function(
        "() => Number(new URLSearchParams(location.search).get('step')) >= 6", timeout=120_000, polling=bh.POLL_MS
    )
    main.get_by_role("button", name="❚❚ Pause").click()
    # the server has taken the Pause once it draws the Play button again (a tick in flight when the click lands
    # may still move the step before that; no run after it does): waited for, then the run settled
    sync_api.expect(main.get_by_role("button", name="▶ Play")).to_be_visible()
    bh.settle(page)
    # the URL, the slider and the chart's marker are updated by separate messages: wait until they agree (all read
    # afresh each time), then compare
    try:
        page.wait_for_function(STEP_SHOWN_EVERYWHERE, timeout=30_000, polling=bh.POLL_MS)
    except sync_api.TimeoutError:
        pytest.fail(f"the step shown never agreed (url, slider, chart marker): {page.evaluate(STEP_SHOWN_WHERE)}")
    step = int(bh.query(page)["step"])
    assert step >= 6
    # everything for the step moved together: the slider, the heading, the formula, the chart's marker
    assert thumb.inner_text() == str(step) and _heading_step(page) == step
    assert _formula(page) != before
    marker = page.evaluate("() => document.querySelector('.js-plotly-plot').layout.shapes[0].x0")
    assert marker == step
    time.sleep(2.0)
    assert int(bh.query(page)["step"]) == step  # paused: it stays
    bh.no_exception(page)

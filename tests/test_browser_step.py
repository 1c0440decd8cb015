"""The Step-through page on a projector's screen, in a real browser (Debian's chromium through Playwright): at
1280×720 the line of the update's numbers, the step control and the chart's first row share the screen while the
step moves; the jumps sit in a popover that a jump closes; the chart, drawn with fixed margins, keeps its legend and
axis titles inside it. Play itself is checked in tests/test_browser_ux.py.

Waits are fixed and generous timeouts (a shared 2-core box runs these); no outcome depends on the machine's speed."""

import browser_helpers as bh
import pytest

pytestmark = pytest.mark.browser
sync_api = bh.require_browser()

STEP = "/step?rows=8&cols=1000&variants=online_thread,online_warp&tv=online_thread&step=3"
MARKER = "() => document.querySelector('.js-plotly-plot')?.layout?.shapes?.[0]?.x0"


@pytest.fixture(scope="module")
def app():
    """(base URL, chromium) for the module: one server, one browser."""
    with bh.streamlit_server("streamlit_browser_step.log") as url, bh.chromium(sync_api) as browser:
        yield url, browser


def _open(app, width: int, height: int, path: str = STEP):
    url, browser = app
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.goto(url + path)
    bh.settle(page, timeout=120)
    bh.wait_for_charts(page)
    bh.no_exception(page)
    return context, page


def _on_screen(page, height: int) -> dict:
    """Where the numbers, the slider, ▶, Play and the chart's first row are, and whether each is wholly on screen."""
    main = page.get_by_test_id("stMain")
    parts = {
        "numbers": main.get_by_text("Step j =").first,
        "slider": main.get_by_test_id("stSlider").first,
        "next": main.get_by_role("button", name="▶", exact=True),
        "play": main.get_by_role("button", name="▶ Play"),
        "chart's first row": main.locator(".js-plotly-plot .cartesianlayer .subplot.xy").first,
    }
    boxes = {name: part.bounding_box() for name, part in parts.items()}
    return {name: b is not None and b["y"] >= 0 and b["y"] + b["height"] <= height for name, b in boxes.items()}


def test_at_1280x720_the_step_numbers_control_and_chart_share_the_screen_as_the_step_moves(app):
    """The lecturer's report: the chart began at y = 880 even at 1920×1080, so Play moved a slider while the plot
    moved out of view."""
    context, page = _open(app, 1280, 720)
    try:
        assert all(_on_screen(page, 720).values()), _on_screen(page, 720)
        page.get_by_test_id("stMain").get_by_role("button", name="▶", exact=True).click()
        page.wait_for_function(f"() => ({MARKER})() === 4", timeout=60_000, polling=bh.POLL_MS)
        bh.settle(page)
        assert bh.query(page)["step"] == "4"
        sync_api.expect(page.get_by_test_id("stMain").get_by_text("Step j = 4").first).to_be_visible()
        assert page.evaluate("() => window.scrollY") == 0 and all(_on_screen(page, 720).values())
        bh.no_exception(page)
    finally:
        context.close()


def test_the_step_jumps_sit_in_a_popover_that_closes_on_a_jump(app):
    """Open, the popover covers the chart's legend: a jump closes it, so that the chart is seen at the new step."""
    context, page = _open(app, 1280, 720)
    try:
        jump = page.get_by_test_id("stMain").get_by_role("button", name="Jump")
        rescale = page.get_by_role("button", name="Next rescale")
        steps = []
        for _ in range(2):
            jump.click()
            sync_api.expect(rescale).to_be_visible()
            bh.settle(page)  # the rerun that opening it starts, done before the jump, as a person's pause allows
            sync_api.expect(page.get_by_role("button", name="First non-finite")).to_be_disabled()  # a finite row
            before = page.evaluate(MARKER)
            rescale.click()
            page.wait_for_function(f"() => ({MARKER})() !== {before}", timeout=60_000, polling=bh.POLL_MS)
            bh.settle(page)
            steps.append(int(bh.query(page)["step"]))
            sync_api.expect(rescale).to_be_hidden()  # closed: the chart's legend is not covered
        assert 3 < steps[0] < steps[1] and page.evaluate(MARKER) == steps[1]
        bh.no_exception(page)
    finally:
        context.close()


LEGEND_AND_TITLES_INSIDE = """() => {
    const plot = document.querySelector('.js-plotly-plot'), svg = plot.querySelector('.main-svg').getBoundingClientRect();
    const out = [...plot.querySelectorAll('.legend, .g-ytitle, .g-y2title, .g-y3title, .g-y4title, .yaxislayer-above')]
        .map(e => [e.getAttribute('class'), e.getBoundingClientRect()])
        .filter(([, r]) => r.width > 0 && (r.left < svg.left - 0.5 || r.right > svg.right + 0.5));
    return out.map(([c, r]) => `${c}: ${Math.round(r.left)}–${Math.round(r.right)} of ${svg.left}–${svg.right}`);
}"""


@pytest.mark.parametrize("width", [1000, 1920])
def test_the_step_chart_with_fixed_margins_keeps_its_legend_and_axis_titles_inside(app, width):
    """Fixed margins (the chart is drawn once a step, not twice): the longest legend (bfloat16's accumulator) and the
    log axes' labels and titles still fit, at 1000 px (a 540 px chart) and at 1920 px."""
    path = STEP.replace("variants=", "acc=bfloat16&variants=") + "&dist=large"
    context, page = _open(app, width, 900, path)
    try:
        assert page.evaluate(LEGEND_AND_TITLES_INSIDE) == []
        assert bh.chart_text_overlaps(page) == []
    finally:
        context.close()

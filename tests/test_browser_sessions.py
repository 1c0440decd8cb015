"""Four browser sessions at once against one `streamlit run app.py` server: each opens the Timing page,
loads its own results file (synthetic numbers, labelled so in the file), and sees its own data only, with
no exception on any page."""

import pytest
from browser_helpers import (
    bench_file,
    chromium,
    no_exception,
    require_browser,
    settle,
    streamlit_server,
    wait_for_charts,
)

pytestmark = pytest.mark.browser
sync_api = require_browser()

SESSIONS = 4
QUERY = "?rows=8&cols=1000&variants=online_thread,online_warp,online_block,naive,safe_thread"


def label(i: int) -> str:
    return f"SYNTHETIC GPU {'ABCD'[i]} (made-up numbers)"


def test_four_sessions_each_see_their_own_results(tmp_path):
    files = [
        bench_file(tmp_path, f"session_{i}.json", gpu=label(i), rows=1024 * (i + 1), scale=1.0 + i)
        for i in range(SESSIONS)
    ]
    with streamlit_server("streamlit_sessions.log") as url, chromium(sync_api) as browser:
        contexts = [browser.new_context(viewport={"width": 1400, "height": 900}) for _ in range(SESSIONS)]
        pages = [c.new_page() for c in contexts]
        try:
            for pg in pages:  # all four open the page before any has finished its first run
                pg.goto(f"{url}/timing{QUERY}", wait_until="commit")
            for pg in pages:
                pg.wait_for_selector('[data-testid="stFileUploaderDropzoneInput"]', state="attached", timeout=60_000)
            for pg, f in zip(pages, files):  # and load their files together
                pg.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(str(f))
            for i, pg in enumerate(pages):
                settle(pg)
                wait_for_charts(pg, 2)
                no_exception(pg)
                legend = " ".join(pg.locator(".js-plotly-plot .legendtext").all_text_contents())
                titles = " ".join(pg.locator(".js-plotly-plot .gtitle").all_text_contents())
                shape = (
                    pg.get_by_test_id("stSelectbox").filter(has_text="Shape and dtype").locator("input").input_value()
                )
                assert shape.startswith(f"{1024 * (i + 1)}×4096"), (i, shape)
                seen = legend + " " + titles + " " + pg.locator('[data-testid="stMain"]').inner_text()
                assert label(i) in seen, (i, legend)
                others = [label(j) for j in range(SESSIONS) if j != i and label(j) in seen]
                assert not others, f"session {i} sees {others}"
        finally:
            for c in contexts:
                c.close()

"""Four browser sessions at once against one `streamlit run app.py` server: each opens the Timing page,
loads its own results file (synthetic numbers, labelled so in the file), and sees its own data only, with
no exception on any page; and four large emulations at once, none killed, while the server answers and a fifth
session is served."""

import time
import urllib.request

import pytest
from browser_helpers import (
    POLL_MS,
    SCRIPT_STATE,
    bench_file,
    chromium,
    no_exception,
    require_browser,
    script_running,
    settle,
    streamlit_server,
    wait_for_charts,
)

pytestmark = pytest.mark.browser
sync_api = require_browser()

SESSIONS = 4
QUERY = "?rows=8&cols=1000&variants=online_thread,online_warp,online_block,naive,safe_thread"
# 4M elements, three variants: about 350 MiB a page and a few seconds of emulation each, several times the
# server's answer time. Each session has its own seed: with one input for all four, the app's cache (st.cache_data,
# shared by the sessions) would hand a late session the first one's outputs, and its run would end at once
LARGE = "?rows=1024&cols=4096&variants=online_warp,online_block,fast&seed={seed}"
FIFTH = "/kernels?rows=8&cols=1000&variants=naive"
LARGE_LIMIT_S = 240  # fixed and generous: what is checked is that every run ends, not how fast
ANSWER_LIMIT_S = 3.0  # the server's own answer (no browser work in it) while the four run


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


def test_four_large_emulations_at_once_all_finish_while_a_fifth_session_is_served():
    # the emulation also on a GPU machine (there the runs would end at once); no confirmation asked: the four start
    # together
    env = {"EXPLORER_BACKEND": "emulator", "EXPLORER_RUN_SECONDS": "600"}
    with streamlit_server("streamlit_sessions_large.log", env=env) as url, chromium(sync_api) as browser:
        contexts = [browser.new_context(viewport={"width": 1400, "height": 900}) for _ in range(SESSIONS + 1)]
        pages = [c.new_page() for c in contexts]
        try:
            for seed, pg in enumerate(pages[:SESSIONS], start=1):
                pg.goto(f"{url}/{LARGE.format(seed=seed)}", wait_until="commit")
            for pg in pages[:SESSIONS]:  # each is seen running its own run (a run of its own takes seconds)
                pg.wait_for_function(
                    f"() => ['running', 'rerunRequested'].includes({SCRIPT_STATE})",
                    timeout=LARGE_LIMIT_S * 1000,
                    polling=POLL_MS,
                )
            # while they run, the server answers at once: its health check and the app's page, over plain HTTP
            # (the four were seen running just before the requests: each emulation takes seconds, a request ms)
            assert sum(script_running(pg) for pg in pages[:SESSIONS]) > 0, "no large run was going"
            for path in ("/_stcore/health", "/"):
                start = time.perf_counter()
                with urllib.request.urlopen(url + path, timeout=ANSWER_LIMIT_S) as answer:
                    assert answer.status == 200
                took = time.perf_counter() - start
                print(f"{path} answered in {took:.2f} s")
                assert took <= ANSWER_LIMIT_S, (path, took)
            # and a fifth browser session gets its page. How long the browser takes to load Streamlit's frontend on
            # a busy machine depends on the machine, so only the outcome is checked: the page, no exception
            fifth = pages[SESSIONS]
            start = time.perf_counter()
            fifth.goto(f"{url}{FIFTH}", wait_until="commit")
            fifth.get_by_test_id("stCode").first.wait_for(state="visible", timeout=LARGE_LIMIT_S * 1000)
            running = sum(script_running(pg) for pg in pages[:SESSIONS])
            print(
                f"fifth session served in {time.perf_counter() - start:.1f} s with {running} of {SESSIONS} large runs going"
            )
            for pg in pages[:SESSIONS]:  # none was killed: each ends with its charts and no exception
                wait_for_charts(pg, 1, timeout=LARGE_LIMIT_S)
                settle(pg)
                no_exception(pg)
                assert pg.get_by_test_id("stProgress").count() == 0 and not script_running(pg)
            no_exception(fifth)
        finally:
            for c in contexts:
                c.close()

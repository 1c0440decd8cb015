"""Four browser sessions at once against one `streamlit run app.py` server: each opens the Timing page,
loads its own results file (synthetic numbers, labelled so in the file), and sees its own data only, with
no exception on any page; four large emulations at once, none killed, while the server answers and a fifth
session is served about as fast as on the idle server; and a run that must wait for the memory other sessions' runs
hold says so, then runs."""

import contextlib
import sys
import time
import urllib.request
from pathlib import Path

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

import explorer

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
# how much longer the fifth session's page, and the server's script run for it, may take with the four running than on
# the idle server. Measured on a 2-core box, the browser's own work on the same two cores included: the page 1.3-1.4
# times (3.2-3.4 s against 2.5 s), the script run 1.0-1.4 times (0.5-0.65 s); with the emulations at the priority of
# the threads that serve pages (ui/background.py lowers it), the page 1.8-2.7 times (4.5-6.9 s), the script run 2.1-2.7
# times. Generous, so that a machine busy with other work passes; the threads' priorities are checked exactly
FACTOR = 3.0
BUSY_RETRIES = 2  # samples of the fifth session taken again while the four still run, where the first is over FACTOR


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


def _server_pid(url: str) -> int:
    """The process of the `streamlit run` serving url (found by its port among this machine's processes)."""
    port = url.rsplit(":", 1)[1]
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            args = (entry / "cmdline").read_bytes().split(b"\0")
            if b"streamlit" in b" ".join(args) and b"--server.port" in args and port.encode() in args:
                return int(entry.name)
    pytest.fail(f"no streamlit process on port {port}")


def _nice(pid: int, tid: int) -> int:
    """A thread's nice value (the 19th field of its stat)."""
    return int((Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split())[16])


def _lowered_threads(pid: int) -> int:
    """How many of the process's threads run at a lower priority (a higher nice value) than its main thread now."""
    main, count = _nice(pid, pid), 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            count += _nice(pid, int(task.name)) > main
    return count


def _served(browser, url: str) -> tuple[float, float]:
    """Open url in a new browser session: (seconds until its page shows, seconds the server took over its script
    run: from the browser's request on the websocket to the last message the browser got before the page showed)."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = context.new_page()
    sent, received = [], []
    pg.on(
        "websocket",
        lambda ws: (
            ws.on("framesent", lambda _: sent.append(time.perf_counter())),
            ws.on("framereceived", lambda _: received.append(time.perf_counter())),
        ),
    )
    try:
        start = time.perf_counter()
        pg.goto(url, wait_until="commit")
        pg.get_by_test_id("stCode").first.wait_for(state="visible", timeout=LARGE_LIMIT_S * 1000)
        shown = time.perf_counter()
        no_exception(pg)
    finally:
        context.close()
    assert sent and received, "no script run over the websocket"
    return shown - start, max(t for t in received if t <= shown) - sent[0]


def test_four_large_emulations_at_once_all_finish_while_a_fifth_session_is_served():
    # the emulation also on a GPU machine (there the runs would end at once); no confirmation asked: the four start
    # together
    env = {"EXPLORER_BACKEND": "emulator", "EXPLORER_RUN_SECONDS": "600"}
    with streamlit_server("streamlit_sessions_large.log", env=env) as url, chromium(sync_api) as browser:
        # the fifth session's page on the idle server, twice: the second, with the server's caches warm as they are
        # for the busy one, is the one compared
        idle = [_served(browser, f"{url}{FIFTH}") for _ in range(2)][-1]
        contexts = [browser.new_context(viewport={"width": 1400, "height": 900}) for _ in range(SESSIONS)]
        pages = [c.new_page() for c in contexts]
        try:
            for seed, pg in enumerate(pages, start=1):
                pg.goto(f"{url}/{LARGE.format(seed=seed)}", wait_until="commit")
            for pg in pages:  # each is seen running its own run (a run of its own takes seconds)
                pg.wait_for_function(
                    f"() => ['running', 'rerunRequested'].includes({SCRIPT_STATE})",
                    timeout=LARGE_LIMIT_S * 1000,
                    polling=POLL_MS,
                )
            # while they run, the server answers at once: its health check and the app's page, over plain HTTP
            # (the four were seen running just before the requests: each emulation takes seconds, a request ms)
            assert sum(script_running(pg) for pg in pages) > 0, "no large run was going"
            for path in ("/_stcore/health", "/"):
                start = time.perf_counter()
                with urllib.request.urlopen(url + path, timeout=ANSWER_LIMIT_S) as answer:
                    assert answer.status == 200
                took = time.perf_counter() - start
                print(f"{path} answered in {took:.2f} s")
                assert took <= ANSWER_LIMIT_S, (path, took)
            # the emulations run below the priority of the threads that serve pages (ui/background.py), so that
            # they take only the CPU that serving leaves (a thread's own nice value is Linux's)
            if sys.platform.startswith("linux") and _nice(pid := _server_pid(url), pid) < 19:
                lowered = 0
                for _ in range(10):
                    lowered = max(lowered, _lowered_threads(pid))
                    time.sleep(0.1)
                assert lowered > 0, "no thread of the server runs at a lower priority while four emulations run"
            # and a fifth browser session gets its page as on the idle server, give or take a generous factor: on
            # a machine fast enough the server's part is within the 3 s target, and on any machine the page takes
            # no more than FACTOR times what it took on the idle server in this test (how fast that is depends on
            # the machine, so only the ratio is held)
            busy = _served(browser, f"{url}{FIFTH}")
            running = sum(script_running(pg) for pg in pages)
            for _ in range(BUSY_RETRIES):  # a burst of other work on this machine slows one sample: the best one counts
                if _within_factor(busy, idle) or not running:
                    break
                again = _served(browser, f"{url}{FIFTH}")
                if not (running := sum(script_running(pg) for pg in pages)):
                    break  # the four ended during it: that sample timed an idle server
                busy = (min(busy[0], again[0]), min(busy[1], again[1]))
            print(
                f"fifth session: page in {busy[0]:.1f} s (idle server: {idle[0]:.1f} s), the server's script run "
                f"{busy[1]:.2f} s (idle: {idle[1]:.2f} s; target {ANSWER_LIMIT_S:.0f} s), with {running} of "
                f"{SESSIONS} large runs going"
            )
            for pg in pages:  # none was killed: each ends with its charts and no exception
                wait_for_charts(pg, 1, timeout=LARGE_LIMIT_S)
                settle(pg)
                no_exception(pg)
                assert pg.get_by_test_id("stProgress").count() == 0 and not script_running(pg)
            # the idle server once more, the four done: the slower of the two idle pages is the reference, so that
            # what else this machine runs meanwhile (other tests' browsers) is not counted against the four
            after = _served(browser, f"{url}{FIFTH}")
            idle = (max(idle[0], after[0]), max(idle[1], after[1]))
            print(f"idle server after the four: page in {after[0]:.1f} s, script run {after[1]:.2f} s")
            assert busy[1] <= max(ANSWER_LIMIT_S, FACTOR * idle[1]), (busy, idle)
            assert busy[0] <= FACTOR * idle[0], (busy, idle)
        finally:
            for c in contexts:
                c.close()


def _within_factor(busy: tuple[float, float], idle: tuple[float, float]) -> bool:
    return busy[1] <= max(ANSWER_LIMIT_S, FACTOR * idle[1]) and busy[0] <= FACTOR * idle[0]


# --- a run that must wait for memory -------------------------------------------------------------------------------

# Four sessions trace one long row each on the Step page (online_thread: a trace holds its memory for seconds, with
# no progress to stop at), each holding a quarter of the pool that runs reserve from: the pool is four runs at this
# server's limit (explorer.budget.RUNS_AT_ONCE), and the limit is set to one such trace's bytes. A fifth session's
# Outputs page, opened meanwhile, must wait: it says so, and runs once the traces give their memory
# back (their tabs closed by then, as a user leaving does: a trace runs to its end and gives its memory back anyway).
# The traces must still hold when the fifth run reaches its reservation, which shares the interpreter with them: its
# run is a short row (milliseconds of emulation) and theirs last seconds each, a ratio the machine's speed leaves alone.
HOLD_COLS = 80_000  # about 4 s a trace alone on a 2-core box, four at once several times that
WAITER_COLS = 1_000  # the pool is full: a run of any size waits
HOLD = "/step?rows=1&cols={cols}&variants=online_thread&seed={seed}"
WAITER = "/?rows=1&cols={cols}&variants=online_warp&seed=99"


def test_a_run_that_must_wait_for_memory_says_so_and_then_runs():
    trace = explorer.bytes_needed(1, HOLD_COLS, "float32", "emulator", explorer.VARIANTS["online_thread"], None, True)
    env = {"EXPLORER_BACKEND": "emulator", "EXPLORER_RUN_BUDGET_BYTES": str(trace)}
    with streamlit_server("streamlit_sessions_wait.log", env=env) as url, chromium(sync_api) as browser:
        contexts = [browser.new_context(viewport={"width": 1400, "height": 900}) for _ in range(SESSIONS + 1)]
        holders, waiter = [c.new_page() for c in contexts[:SESSIONS]], contexts[SESSIONS].new_page()
        try:
            # the fifth session first, on a page that runs nothing, with the shape it will run
            waiter.goto(f"{url}/kernels{WAITER.format(cols=WAITER_COLS)[1:]}")
            settle(waiter)
            for seed, pg in enumerate(holders, start=1):
                pg.goto(f"{url}{HOLD.format(cols=HOLD_COLS, seed=seed)}", wait_until="commit")
            for pg in holders:  # each is tracing: its spinner is drawn as its trace starts, and holds its memory
                pg.get_by_test_id("stSpinner").first.wait_for(state="visible", timeout=LARGE_LIMIT_S * 1000)
            # then to its Outputs page (within the app, at once): its run must wait for the traces' memory, and
            # says so
            waiter.get_by_test_id("stSidebar").get_by_role("link", name="Outputs").click()
            main = waiter.get_by_test_id("stMain")
            waiting = main.get_by_test_id("stAlert").filter(has_text="Waiting for memory")
            waiting.first.wait_for(state="visible", timeout=LARGE_LIMIT_S * 1000)
            text = waiting.first.inner_text()
            mib = f"{4 * trace / 2**20:,.1f} MiB"
            assert "this run needs" in text and f"other sessions' runs hold {mib} of this server's {mib}" in text, text
            for c in contexts[:SESSIONS]:
                c.close()
            # and runs once they are given back: the notice gone, its chart drawn
            waiting.first.wait_for(state="detached", timeout=LARGE_LIMIT_S * 1000)
            wait_for_charts(waiter, 1, timeout=LARGE_LIMIT_S)
            assert waiting.count() == 0 and "Softmax of row 0" in (
                waiter.locator(".js-plotly-plot .gtitle").first.text_content() or ""
            )
            no_exception(waiter)
        finally:
            for c in contexts:
                c.close()

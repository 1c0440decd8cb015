"""The Step-through page through AppTest (no browser): one step control drives the update, the chart and the
bits; Play steps the server state; jumps to the next rescale and the first non-finite step; a new input starts
at step 0; the merge tree level by level."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

import explorer

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "app.py")
RUN_TIMEOUT = 180  # generous: a busy box may take many times what a fast one does


pytestmark = pytest.mark.usefixtures("emulator_backend")  # tests/conftest.py


def step_page(query: dict) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=RUN_TIMEOUT)
    at.query_params.update({"rows": "4", "cols": "100", "variants": "online_thread,online_warp,online_block", **query})
    at.run()
    hashes = {info.get("url_pathname"): h for h, info in at._registered_pages.items()}
    at._page_hash = hashes["step"]
    return ok(at.run())


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    assert "unexpected problem" not in " ".join(str(e.value) for e in at.error)
    return at


def latex(at: AppTest) -> str:
    return " ".join(x.value for x in at.latex)


def step_chart(at: AppTest) -> dict:
    return json.loads(at.get("plotly_chart")[0].proto.spec)


def test_the_step_control_drives_the_update_the_chart_and_the_url():
    at = step_page({"tv": "online_thread", "step": "42"})
    x = explorer.make_input("normal", 4, 100)[0].astype(np.float64)
    assert f"{x[42]:.7g}" in latex(at) and r"\xrightarrow" in latex(at)
    assert any(m.value.startswith("##### The update at step j = 42 ") for m in at.markdown)
    assert step_chart(at)["layout"]["shapes"][0]["x0"] == 42
    assert "frames" not in step_chart(at) or not step_chart(at)["frames"]  # no second, client-side control
    ok(at.button(key="step_next").click().run())
    assert at.slider(key="step").value == 43 and at.query_params["step"] == "43"
    assert f"{x[43]:.7g}" in latex(at)
    ok(at.button(key="step_prev").click().run())
    assert at.slider(key="step").value == 42


def test_a_refusal_comes_after_the_title_and_the_configuration_line():
    at = step_page({"rows": "100000", "cols": "100000"})

    def walk(node):
        for child in node.children.values():
            yield from walk(child) if hasattr(child, "children") else [child]

    shown = [(e.type, e.value) for e in walk(at.main) if e.type in ("title", "caption", "error")]
    assert shown[:2] == [
        ("title", "Step through"),
        ("caption", "Normal (mean=0, std=1) · 100000×100000 float32 · acc float32 · seed 0"),
    ]
    assert [kind for kind, _ in shown[2:]] == ["error"] and shown[2][1].startswith("Not run (all 3 variants): ")


def test_play_steps_the_server_state_and_pause_stops_it():
    at = step_page({"tv": "online_thread", "step": "10"})
    ok(at.button(key="step_play").click().run())
    assert at.slider(key="step").value == 11  # the run that starts playing moves one step
    assert at.button(key="step_pause").label == "❚❚ Pause"
    ok(at.button(key="step_pause").click().run())
    assert at.button(key="step_play").label == "▶ Play"
    assert at.slider(key="step").value == 11


def test_play_moves_as_many_steps_a_tick_as_its_speed_says_and_stops_at_the_last():
    """One step every 0.7 s took twelve minutes over a 1000-element row, with no way to go faster."""
    at = step_page({"tv": "online_thread", "step": "10", "speed": "50"})
    assert at.selectbox(key="speed").value == 50
    ok(at.button(key="step_play").click().run())
    assert at.slider(key="step").value == 60
    at.slider(key="step").set_value(95)
    at.selectbox(key="speed").set_value(10).run()
    assert at.slider(key="step").value == at.slider(key="step").max == 99  # the last step, not past it


def test_next_rescale_and_first_nonfinite_jump():
    at = step_page({"tv": "online_thread", "dist": "nonfinite", "p_rate": "0.05", "row": "1"})
    trace = explorer.softmax(
        explorer.make_input("nonfinite", 4, 100, rate=0.05)[1:2], "online_thread", backend="emulator", trace_row=0
    ).trace
    at.session_state["step_jumps"] = True  # the Jump popover open, as a click on it leaves it
    ok(at.button(key="step_rescale").click().run())
    step = at.slider(key="step").value
    assert step > 0 and trace.m[0, step] > trace.m[0, step - 1]
    assert at.session_state["step_jumps"] is False  # a jump closes it: open, it hid the chart's legend
    ok(at.button(key="step_nan").click().run())
    bad = at.slider(key="step").value
    assert not np.isfinite(trace.d[0, bad]) and np.isfinite(trace.d[0, :bad]).all()
    assert any("is NaN from element" in w.value for w in at.warning)
    assert r"e^{\infty - \infty} = 1" not in latex(at).replace("(", "").replace(")", "")
    assert any("not finite" in c.value for c in at.caption)


def test_a_new_input_starts_at_step_zero():
    at = step_page({"tv": "online_thread", "step": "80"})
    assert at.slider(key="step").value == 80  # the URL's step is kept on arrival
    ok(at.selectbox(key="dist").set_value("causal_mask").run())
    assert at.query_params["step"] == "0"  # row 0 of the mask keeps one element: step 0 is the only one


def test_merge_levels_step_through_the_tree():
    at = step_page({"tv": "online_warp"})
    assert at.select_slider(key="mlevel").value == 1024  # the whole tree
    ok(at.select_slider(key="mlevel").set_value(1).run())
    assert at.query_params["mlevel"] == "1"
    table = at.table[0].value
    assert len(table) == 16 and "offset 16: lane 0 ⊕ lane 16" in set(table["merge"])
    tree = json.loads(at.get("plotly_chart")[2].proto.spec)
    assert tree["layout"]["yaxis"]["ticktext"][1] == "shuffle, offset 16"


def test_the_table_of_every_merge_shows_at_most_a_thousand_rows():
    """A split row of 1 × 4096 runs 4 blocks of 256 lanes: 1,023 merges, more than the page's table shows."""
    from ui.pages.merges import MAX_TABLE_ROWS

    at = step_page({"rows": "1", "cols": "4096", "variants": "split_row", "tv": "split_row"})
    table = next(df for df in at.dataframe if "offset" in df.value.columns).value
    assert len(table) == MAX_TABLE_ROWS
    assert any(f"The first {MAX_TABLE_ROWS:,} of 1,023 merges" in c.value for c in at.caption)


def test_a_trace_over_the_time_budget_is_refused_the_same_way_twice_and_runs_once_confirmed(monkeypatch):
    from explorer import budget
    from ui import keep

    keep.KEPT.clear()  # only a trace not kept yet counts against the budget
    monkeypatch.setenv(budget.TIME_SETTING, "0.000001")  # every trace is over it, whatever the machine
    at = step_page({"tv": "online_thread"})
    first = " ".join(w.value for w in at.warning)
    assert "Not run yet: tracing row 0 (100 elements) through online_thread would take about" in first
    assert "in the CPU emulation" in first and "over this server's budget" in first and "Make cols smaller" in first
    assert not at.get("plotly_chart") and at.selectbox(key="tv").value == "online_thread"
    ok(at.run())
    assert " ".join(w.value for w in at.warning) == first and not at.get("plotly_chart")  # the same answer twice
    ok(at.button(key="trace_anyway").click().run())
    assert at.get("plotly_chart") and not at.warning
    assert at.slider(key="step").value == 0
    ok(at.selectbox(key="tv").set_value("online_warp").run())  # another trace asks again
    assert "through online_warp would take about" in " ".join(w.value for w in at.warning)
    ok(at.selectbox(key="tv").set_value("online_thread").run())  # the kept one is shown at once
    assert at.get("plotly_chart") and not at.warning


def test_a_links_step_and_lane_past_the_trace_are_shown_as_its_last_with_a_toast():
    """?step and ?lane beyond what the trace has: the last step and lane are shown, and a toast says so."""
    at = step_page({"tv": "online_warp", "lane": "40", "step": "5000"})
    assert at.number_input(key="lane").value == 31 and at.query_params["lane"] == "31"
    last = at.slider(key="step").value
    assert last < 5000 and at.query_params["step"] == str(last)
    assert [t.value for t in at.toast] == [
        "Lane 40 is outside 0–31: showing 31.",
        f"Step 5,000 is outside 0–{last}: showing {last}.",
    ]


@pytest.mark.parametrize(
    "query",
    [
        {"rows": "1", "cols": "2", "variants": "online_warp", "tv": "online_warp", "mlevel": "1"},
        {"rows": "1", "cols": "100", "variants": "online_block", "tv": "online_block", "tree": "warp 5 lanes"},
        {
            "dist": "causal_mask",
            "rows": "8",
            "cols": "64",
            "variants": "online_warp",
            "tv": "online_warp",
            "row": "3",
            "mlevel": "2",
        },
    ],
)
def test_a_merge_tree_over_lanes_that_got_no_element_shows_no_relative_error_for_them(query):
    """An empty lane's d is exactly 0, as float64's: the merge table leaves its relative error blank (it divided
    by zero and the page failed)."""
    at = step_page(query)
    merges = [df.value for df in at.dataframe if "rel. error of d" in df.value.columns]
    assert merges and any(frame["rel. error of d"].isna().any() for frame in merges)


def test_the_bits_caption_says_exact_where_the_sum_fits_and_what_was_lost_where_it_did_not():
    at = step_page({"tv": "online_thread", "step": "0"})
    captions = " ".join(c.value for c in at.caption)
    assert "The kernel adds 0 and 1; the sum 1 fits in float32's places: exact, nothing lost." in captions
    rounded = step_page({"tv": "online_thread", "step": "42"})
    captions = " ".join(c.value for c in rounded.caption)
    assert "needs bits below $d_j$'s last float32 place" in captions and "(lost " in captions


def test_leaving_the_step_page_pauses_play_and_keeps_its_view():
    at = step_page({"tv": "online_warp", "lane": "3"})
    ok(at.button(key="step_play").click().run())
    assert at.session_state["_playing"]
    hashes = {info.get("url_pathname"): h for h, info in at._registered_pages.items()}
    at._page_hash = hashes["kernels"]
    ok(at.run())
    assert at.query_params["tv"] == "online_warp" and at.query_params["lane"] == "3"
    assert not at.session_state["_playing"]
    at._page_hash = hashes["step"]
    ok(at.run())
    assert at.selectbox(key="tv").value == "online_warp" and at.number_input(key="lane").value == 3
    assert at.button(key="step_play")  # not "Pause": Play stopped when the page was left


def test_url_values_a_late_play_tick_dropped_come_back_on_the_next_run(monkeypatch):
    """streamlit#10805: a timed fragment's tick that fires after the user left its page drops the widget keys it
    did not draw (the Step page came back as online_thread, lane 0); keep_widget_state brings them back. This
    checks that mechanism on a plain dict; the tick itself needs a browser (it was checked in Chromium)."""
    from ui import sidebar

    state = {"tv": "online_warp", "lane": 3, "p_mean": 2.0, "_private": 1}
    monkeypatch.setattr(sidebar, "ss", state)
    sidebar.keep_widget_state()
    del state["tv"], state["lane"], state["p_mean"]
    sidebar.keep_widget_state()
    assert (state["tv"], state["lane"], state["p_mean"]) == ("online_warp", 3, 2.0)
    assert "_private" not in state["_kept"]


def test_a_links_variant_butterfly_or_merge_level_this_view_does_not_offer_is_replaced_with_a_toast():
    at = step_page({"tv": "safe_thread", "tree": "nonsense", "mlevel": "7", "variants": "online_block"})
    toasts = [t.value for t in at.toast]
    title = explorer.VARIANTS["online_block"].title
    assert f"Variant to trace “safe_thread” is not offered here: showing “online_block — {title}”." in toasts
    assert "Butterfly “nonsense” is not offered here: showing “across warps”." in toasts
    assert any(t.startswith("Merge level “7” is not offered here: showing “across warps") for t in toasts)
    ok(at.run())
    assert not at.toast  # said once


def test_a_lane_without_elements_still_shows_the_lanes_and_the_merge_tree():
    at = step_page({"rows": "1", "cols": "2", "variants": "online_warp", "tv": "online_warp", "lane": "10"})
    assert any("Lane 10 gets no element of this 2-element row" in i.value for i in at.info)
    keys = {c.key for c in at.get("plotly_chart")}
    assert "chart_lanes" in keys and not any("step" in (k or "") for k in keys)
    assert any("rel. error of d" in df.value.columns for df in at.dataframe)  # the merge tree's table


MASKED_LANE = {
    "rows": "8",
    "cols": "64",
    "dist": "causal_mask",
    "row": "1",
    "variants": "online_block",
    "tv": "online_block",
    "lane": "5",
}


def test_a_lane_of_only_minus_inf_says_its_d_is_exact_and_why_its_charts_are_empty():
    """Row 1 of the causal mask keeps 2 of 64 elements: lane 5 folds one −∞. Its d is 0 and float64's is 0: exact,
    not NaN; the x/m chart has no point to draw, and a caption says so."""
    at = step_page(MASKED_LANE)
    update = " ".join(m.value for m in at.markdown)
    assert "relative error **0** (exact: both 0)" in update and "NaN" not in update
    captions = " ".join(c.value for c in at.caption)
    assert "Every element of lane 5 is −∞ (masked): m stays −∞ and d stays 0" in captions
    chart = step_chart(at)
    assert any("no x or m to draw" in a["text"] for a in chart["layout"]["annotations"])


def test_the_minus_inf_guard_caption_writes_the_previous_m_and_its_exponent_unambiguously():
    at = step_page(MASKED_LANE)
    captions = " ".join(c.value for c in at.caption)
    assert r"$m_{j-1} = m_j = -\infty$" in captions and r"$e^{-\infty - (-\infty)}$" in captions
    assert "m_j−1" not in captions and "∞ − ∞" not in captions


def test_the_lanes_heatmap_says_what_its_white_cells_are():
    at = step_page(MASKED_LANE)
    captions = " ".join(c.value for c in at.caption)
    assert "White cells: no element at that step (lanes 64–255 get none of the row's 64)" in captions
    assert "d = 0, where every element the lane folded so far is −∞" in captions
    full = step_page({"rows": "1", "cols": "96", "variants": "online_warp", "tv": "online_warp"})
    assert not any("White cells" in c.value for c in full.caption)  # every lane folds 3 finite elements


def leaves(node, blocks=()):
    """The page's elements in order, each with the types of the blocks it sits in."""
    for child in node.children.values():
        if hasattr(child, "children"):
            yield from leaves(child, (*blocks, child.type))
        else:
            yield child, blocks


def test_the_numbers_the_step_control_and_the_chart_come_before_the_update_written_out():
    """At 1280×720 the chart began under the screen's bottom edge, below the slider, two rows of buttons and the
    equations, so Play moved a slider while the plot moved out of view. Now: a line of the update's numbers, the
    slider, one row of buttons (the two jumps in a popover), the chart; the equations and the bits under it."""
    at = step_page({"tv": "online_thread", "step": "42"})
    shown = list(leaves(at.main))

    def first(test) -> int:
        return next(i for i, (e, _) in enumerate(shown) if test(e))

    numbers = first(lambda e: e.type == "markdown" and e.value.startswith("**Step j = 42** (element 42)"))
    order = [
        numbers,
        first(lambda e: e.key == "step"),
        first(lambda e: e.key == "step_next"),
        first(lambda e: e.key == "step_play"),
        first(lambda e: e.key == "chart_step"),
        first(lambda e: e.type == "markdown" and e.value.startswith("##### The update at step j = 42")),
        first(lambda e: e.type == "latex"),
        first(lambda e: e.type == "subheader" and "The bits of" in e.value),
    ]
    assert order == sorted(order) and order[4] - order[0] <= 10, [shown[i][0].type for i in order]
    assert all("popover" in shown[first(lambda e, k=k: e.key == k)][1] for k in ("step_rescale", "step_nan"))
    x = explorer.make_input("normal", 4, 100)[0].astype(np.float64)
    line = shown[numbers][0].value
    assert f"$x_j$ = {x[42]:.7g}" in line and "$m_j$ = " in line and "$d_j$ = **" in line
    assert ", float64 **" in line and "relative error **" in line
    ok(at.button(key="step_next").click().run())
    assert any(m.value.startswith("**Step j = 43** (element 43)") for m in at.markdown)  # it follows the step


RAW_TEX = re.compile(r"[_^]\{|\\[A-Za-z]+|\b[A-Za-z]_[A-Za-z0-9]\b")


def raw_tex(text: str) -> list[str]:
    """TeX outside $…$ (which st.markdown and st.caption render): d_{j-1}, e^{…}, \\infty, d_j."""
    return RAW_TEX.findall(re.sub(r"\$[^$]*\$", "", text))


@pytest.mark.parametrize(
    "query, click",
    [
        ({"tv": "online_thread", "step": "42"}, None),
        ({"tv": "online_thread", "dist": "nonfinite", "p_rate": "0.05", "row": "1"}, "step_nan"),
        ({"tv": "safe_thread", "step": "7"}, None),
        ({"tv": "online_warp", "lane": "3", "mlevel": "1"}, None),
        (MASKED_LANE, None),
    ],
)
def test_no_raw_tex_reaches_the_page(query, click):
    """The lecturer's students read "d_j = d_{j-1} e^{m_{j-1}-m_j} + …" as typed: every text of the page (its
    Markdown, captions, headers, notes and the buttons' help) writes mathematics between $ signs, or in words."""
    at = step_page(query)
    if click:
        ok(at.button(key=click).click().run())
    texts = [
        e.value
        for e, _ in leaves(at.main)
        if e.type in ("markdown", "caption", "subheader", "header", "warning", "info", "error")
        and not e.value.startswith("<")  # the bits' HTML table
    ]
    texts += [b.help or "" for b in at.main.button] + [s.help or "" for s in at.main.slider]
    assert any("not finite" in t for t in texts) or click is None
    assert [(t, raw_tex(t)) for t in texts if raw_tex(t)] == []


def test_a_narrower_accumulator_shows_x_as_the_kernel_holds_it():
    at = ok(
        step_page(
            {"dist": "large", "p_scale": "100", "rows": "3", "cols": "500", "dtype": "float16", "acc": "bfloat16"}
            | {"tv": "online_thread", "step": "0"}
        )
    )
    x = float(explorer.make_input("large", 3, 500, dtype="float16", scale=100.0)[0, 0])
    held = float(np.float32(x).astype(explorer.DTYPES["bfloat16"]))
    assert held != x  # this input's first element is not a bfloat16 number
    assert rf"\max(-\infty,\ {held:.7g}) = {held:.7g}" in latex(at)  # the max of x_j as held, which is m_j
    assert any(f"is held as {held:.9g}" in c.value for c in at.caption)
    line = next(m.value for m in at.markdown if "Step j = 0" in m.value)
    assert f"({held:.7g} in bfloat16)" in line

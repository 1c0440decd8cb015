"""The sidebar through AppTest: each page shows the controls it reads and folds the rest away (values and URL
kept); typed whole numbers are used as shown or refused in words; every widget label is unique."""

import re
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "app.py")
RUN_TIMEOUT = 180  # generous: a busy box may take many times what a fast one does
QUERY = {"rows": "8", "cols": "100", "variants": "online_warp,online_block", "prec_max": "6"}


pytestmark = pytest.mark.usefixtures("emulator_backend")  # tests/conftest.py


def open_page(page: str, query: dict | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=RUN_TIMEOUT)
    at.query_params.update(query or QUERY)
    at.run()
    if page:
        at._page_hash = {info.get("url_pathname"): h for h, info in at._registered_pages.items()}[page]
        at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def folded(at: AppTest) -> set[str]:
    """Labels of the sidebar widgets inside the "Not used on this page" expander."""
    boxes = [e for e in at.sidebar.expander if e.label.startswith("Not used on this page")]
    if not boxes:
        return set()
    return {
        w.label for kind in ("selectbox", "number_input", "multiselect", "select_slider") for w in boxes[0].get(kind)
    }


@pytest.mark.parametrize(
    ("page", "unused"),
    [
        ("", set()),
        ("topk", {"Rows", "Cols", "Accumulator", "Variants", "Row to show and trace"}),
        ("kernels", {"Distribution", "Seed", "Row to show and trace"}),
        (
            "precision",
            {"Distribution", "Rows", "Cols", "Seed", "Input dtype", "Accumulator", "Variants", "Row to show and trace"},
        ),
    ],
)
def test_each_page_folds_away_what_it_does_not_read(page, unused):
    at = open_page(page)
    assert unused <= folded(at)
    assert not (folded(at) & {"Input dtype"}) or page == "precision"
    assert at.query_params["rows"] == "8" and at.query_params["variants"] == "online_warp,online_block"


def test_timing_without_a_gpu_folds_away_the_shape_it_cannot_run():
    """No benchmark runs on the emulator: the results files' shapes are chosen on the page, so rows, cols, dtype and
    accumulator are folded away there, and a shape too large to run is not refused on a page that runs nothing."""
    at = open_page("timing", {**QUERY, "rows": "1048576", "cols": "1048576"})
    assert {"Rows", "Cols", "Input dtype", "Accumulator"} <= folded(at)
    assert "Variants" not in folded(at)
    assert not any("Not run" in e.value for e in at.sidebar.error)
    assert not [c.value for c in at.main.caption if "seed" in c.value or "1048576" in c.value]  # no header of a run


def test_the_kernels_page_shows_a_launch_without_refusing_a_shape_too_large_to_run():
    at = open_page("kernels", {**QUERY, "rows": "1048576", "cols": "1048576"})
    assert "Rows" not in folded(at)
    assert not any("Not run" in e.value for e in at.sidebar.error)
    captions = " ".join(c.value for c in at.sidebar.caption)
    assert "A run needs" not in captions
    assert "1048576×1048576 float32 · acc float32" in [c.value for c in at.main.caption]  # what it reads, no input


def test_widget_labels_are_unique_on_every_page():
    for page in ("", "step", "errors", "precision", "kernels"):
        at = open_page(page)
        labels = [
            w.label
            for kind in ("selectbox", "number_input", "multiselect", "select_slider", "slider", "radio", "toggle")
            for w in at.get(kind)
        ]
        assert [label for label, n in Counter(labels).items() if n > 1] == [], page


@pytest.mark.parametrize(
    ("typed", "words"),
    [
        (0, "Rows 0 not used"),
        (-5, "Rows -5 not used"),
        (3e9, "Rows 3,000,000,000 not used"),
        (2.5, "Rows 2.5 not used"),
        (2147483648, "Rows 2,147,483,648 not used"),
    ],
)
def test_a_number_out_of_range_goes_back_and_says_why(typed, words):
    at = open_page("")
    at.number_input(key="rows").set_value(typed).run()
    assert at.number_input(key="rows").value == 8  # the box shows what runs
    assert any(w.value.startswith(words) and "still 8" in w.value for w in at.sidebar.warning)
    assert at.query_params["rows"] == "8"


def test_a_large_number_is_used_as_typed_or_refused_in_words():
    at = open_page("")
    at.number_input(key="cols").set_value(1e9).run()  # the browser reads "1e9" as 10⁹ in this float-typed box
    assert at.number_input(key="cols").value == 1e9 and at.query_params["cols"] == "1000000000"
    assert any("Not run" in e.value for e in at.sidebar.error)  # shown as typed, and why it does not run


ESCAPED = r"\\[!-/:-@\[-`{-~]"  # CommonMark: a backslash before ASCII punctuation makes it plain text


def shows(markdown: str) -> str:
    """The text a Markdown element shows for markdown: each escaped character as itself, without the word
    joiner ui.text.as_text puts into bare addresses (it is invisible)."""
    return re.sub(ESCAPED, lambda m: m.group()[1], markdown).replace("\u2060", "")


def plain(markdown: str) -> bool:
    """Nothing in markdown can become markup once its escaped characters are taken out: no link, image, code,
    emphasis, HTML, entity, math or directive can start, no bare address is left for GFM to link, no icon
    shortcode or typography (--), and no block (a line break, a list marker at the start)."""
    bare = re.sub(ESCAPED, "\u2060", markdown)  # an escaped character keeps its place (so '\\[-' starts no list)
    markup = r"[\[\]<>`*\\$~&#\n]|:\w|--|(?i:https?:|www\.)|@(?!\u2060)|^(?:[+-]|\d+[.)])"
    return not re.search(markup, bare)


def test_a_file_over_the_element_limit_is_refused_in_words_and_the_sidebar_goes_on(monkeypatch):
    monkeypatch.setenv("EXPLORER_MAX_ELEMENTS", "1000")
    at = open_page("")
    at.selectbox(key="dist").set_value("upload").run()
    csv = "\n".join(",".join(["1"] * 50) for _ in range(50)).encode()
    at.file_uploader(key="upload").set_value(("big.csv", csv, "text/csv")).run()
    assert not at.exception, [e.value for e in at.exception]
    refusal = " ".join(shows(e.value) for e in at.sidebar.error)
    assert "50×50 = 2,500 elements" in refusal and "this server's limit of 1,000 elements" in refusal
    assert "KiB" in refusal and "smaller shape" in refusal and "EXPLORER_" not in refusal
    # the rest of the sidebar is drawn, with the user's settings
    assert at.multiselect(key="variants").value == ["online_warp", "online_block"]
    assert at.selectbox(key="dtype").value == "float32" and at.number_input(key="rows").value == 8
    (page,) = [e.value for e in at.main.error]  # the page says why it waits, in the sidebar's words
    assert page == f"The upload was refused: {at.sidebar.error[0].value}."


def test_an_unexpected_failure_in_the_sidebar_is_said_in_words_and_the_page_still_renders(monkeypatch):
    import ui.sidebar

    def broken():
        raise RuntimeError("boom")

    at = open_page("")
    kernels = ui.sidebar.SECTIONS["kernels"]
    monkeypatch.setitem(ui.sidebar.SECTIONS, "kernels", broken)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("unexpected problem" in e.value and "settings are kept" in e.value for e in at.error)
    assert at.title[0].value == "Outputs"  # the page below the sidebar is drawn
    assert at.query_params["variants"] == "online_warp,online_block" and at.query_params["rows"] == "8"
    monkeypatch.setitem(ui.sidebar.SECTIONS, "kernels", kernels)
    at.run()
    assert not at.exception and not [e for e in at.error if "unexpected" in e.value]
    assert at.multiselect(key="variants").value == ["online_warp", "online_block"]
    assert at.number_input(key="rows").value == 8 and at.number_input(key="cols").value == 100


def test_a_shape_over_the_element_limit_is_refused_once_with_the_limit_in_elements_and_bytes():
    at = open_page("")
    at.number_input(key="cols").set_value(1e9).run()
    (refusal,) = [shows(e.value) for e in at.sidebar.error]
    assert refusal.count("smaller") == 1, refusal  # the advice once, not "choose a smaller shape. Make ... smaller"
    assert "this server's limit of 2,147,483,647 elements (8.00 GiB)" in refusal
    assert "8,000,000,000 elements (29.80 GiB)" in refusal and "EXPLORER_" not in refusal


def test_variants_refused_for_one_reason_are_named_once_and_for_different_reasons_each(monkeypatch):
    at = open_page("", {**QUERY, "cols": "1e9"})  # over the element limit: the same words for both
    (refusal,) = [e.value for e in at.sidebar.error]
    assert refusal.startswith("Not run (all 2 variants): float32 softmax: 8×1000000000 = ")
    assert at.main.error[0].value == refusal
    monkeypatch.setenv("EXPLORER_RUN_BUDGET_BYTES", str(2**30))  # over it by what each variant needs: their own words
    at = open_page("", {**QUERY, "rows": "1000", "cols": "100000", "variants": "naive,fast"})
    (refusal,) = [e.value for e in at.sidebar.error]
    naive, fast = refusal.split("\n\n")
    assert naive.startswith("Not run (naive): float32 softmax: 1000×100000") and "2.61 GiB" in naive
    assert fast.startswith("Not run (fast): float32 softmax: 1000×100000") and "5.55 GiB" in fast


def test_a_refusal_says_what_the_variants_that_fit_would_do_without_the_refused_one(monkeypatch):
    import explorer
    from ui import sidebar

    monkeypatch.setenv("EXPLORER_RUN_BUDGET_BYTES", str(2**30))  # fast's emulation is over it, online_warp's not
    at = open_page("", {**QUERY, "rows": "1000", "cols": "20000", "variants": "online_warp,fast"})
    (refusal,) = [e.value for e in at.sidebar.error]
    refused, others = refusal.split("\n\n")
    assert refused.startswith("Not run (fast): ")
    assert others.startswith("Without fast, online_warp would still need about 1.53 GiB together, with the ")
    assert others.endswith("over the limit of 1.00 GiB: choose a smaller shape.")  # one left: not "fewer variants"
    cfg = at.session_state["_cfg"]
    warp = explorer.VARIANTS["online_warp"]
    fitting = [(warp, explorer.checks.check_block(warp, None))]
    assert sidebar.without_the_refused(cfg, "cuda", ["fast"], fitting) == (  # a GPU page keeps no float64 copies
        "\n\nThe others fit (online_warp): deselect fast in the sidebar to run them."
    )
    assert sidebar.without_the_refused(cfg, "cuda", ["fast"], []) == ""


def test_a_page_over_the_run_limit_says_the_limit_in_elements_and_bytes_and_what_to_do(monkeypatch):
    import explorer
    from explorer import budget

    warp = explorer.VARIANTS["online_warp"]
    runs = [(warp, explorer.checks.check_block(warp, None))]  # as the sidebar counts them
    run = explorer.bytes_needed(8, 100, "float32", "emulator", *runs[0], False, "float32")
    page = budget.page_bytes(runs, 8, 100, "float32", "float32")
    limit = (run + page) // 2  # one run fits, the page with its reference and errors does not
    assert run < limit < page
    monkeypatch.setenv("EXPLORER_RUN_BUDGET_BYTES", str(limit))
    at = open_page("", {**QUERY, "variants": "online_warp"})
    (refusal,) = [shows(e.value) for e in at.sidebar.error]
    assert f"{8 * 100 * limit // page:,} elements fit" in refusal and "KiB" in refusal
    assert "this server's limit of" in refusal and "smaller shape or fewer variants" in refusal
    assert "EXPLORER_" not in refusal


def test_a_file_name_with_markdown_is_shown_as_text():
    name = "[c](http://x.io) **b** <i>.csv"
    at = open_page("")
    at.selectbox(key="dist").set_value("upload").run()
    at.file_uploader(key="upload").set_value((name, b"1,2,x\n", "text/csv")).run()
    (refusal,) = [e.value for e in at.sidebar.error]
    assert shows(refusal).startswith(f"{name} could not be read as numbers: line 1, value 3 is 'x'") and plain(refusal)
    at.file_uploader(key="upload").set_value((name, b"1,2,3\n", "text/csv")).run()
    (caption,) = [c.value for c in at.sidebar.caption if c.value.endswith("1 × 3")]
    assert shows(caption) == f"{name}: 1 × 3" and plain(caption)


def _guarded_app():
    import explorer
    from ui.common import guarded, show_failures

    @guarded
    def refused():
        raise explorer.InvalidInput("[evil.npy](http://x) could not be read: <b>x</b> *a*")

    @guarded
    def broken():
        raise RuntimeError("![img](http://x/y.png)")

    refused()
    broken()
    show_failures({"fast": "`code` :red[red] http://x"})


def test_messages_under_the_pages_guard_show_as_text():
    """An ExplorerError's message, an unexpected exception's and a failed variant's may quote a file's name or a
    value from it: each is shown as the text it is."""
    at = AppTest.from_function(_guarded_app).run(timeout=60)
    assert not at.exception
    refused, broken = (e.value for e in at.error)
    (failed,) = (w.value for w in at.warning)
    assert plain(refused) and shows(refused) == "[evil.npy](http://x) could not be read: <b>x</b> *a*"
    assert plain(broken) and "(RuntimeError: ![img](http://x/y.png))" in shows(broken)
    assert failed.startswith("**fast** ") and plain(failed.removeprefix("**fast** "))
    assert shows(failed.removeprefix("**fast** ")) == "`code` :red[red] http://x"

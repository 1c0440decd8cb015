"""The sidebar through AppTest: each page shows the controls it reads and folds the rest away (values and URL
kept); typed whole numbers are used as shown or refused in words; every widget label is unique."""

from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "app.py")
RUN_TIMEOUT = 180  # generous: a busy box may take many times what a fast one does
QUERY = {"rows": "8", "cols": "100", "variants": "online_warp,online_block", "prec_max": "6"}


@pytest.fixture(autouse=True)
def emulator_backend(monkeypatch):
    monkeypatch.setenv("EXPLORER_BACKEND", "emulator")


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
    [(0, "Rows 0 not used"), (-5, "Rows -5 not used"), (3e9, "Rows 3e+09 not used"), (2.5, "Rows 2.5 not used")],
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

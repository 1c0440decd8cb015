"""The pages as ui/menu.py lists them: each names sidebar sections that exist, its URL parameters are in the one
table, and no two share a path or a parameter."""

import pytest

pytest.importorskip("streamlit")

from ui import sidebar, url
from ui.menu import PAGES
from ui.page import EVERY_SECTION


def test_every_section_a_page_may_read_is_one_the_sidebar_draws():
    assert EVERY_SECTION == tuple(sidebar.SECTIONS)
    for page in PAGES:
        for on_gpu in (True, False):
            assert set(page.sections(on_gpu)) <= set(EVERY_SECTION), page.title


def test_each_page_has_its_own_path_and_its_parameters_are_in_the_url_table():
    assert len({p.path for p in PAGES}) == len(PAGES)
    keys = [param.key for page in PAGES for param in page.params]
    assert len(keys) == len(set(keys))
    assert all(key in url.TABLE for key in keys)


def test_the_folded_sections_name_the_pages_that_read_them():
    assert sidebar.pages_reading_every_section() == "the Outputs, Step through and Error vs float64 pages"

"""Softmax kernel explorer: `streamlit run app.py`. This file only wires the sidebar and the pages."""

import streamlit as st

from ui.common import guarded
from ui.pages.errors import errors_page
from ui.pages.kernels import kernels_page
from ui.pages.outputs import outputs_page
from ui.pages.precision import precision_page
from ui.pages.step import step_page
from ui.pages.timing import timing_page
from ui.pages.topk import topk_page
from ui.sidebar import sidebar, sync_url

st.set_page_config(page_title="Softmax kernel explorer", page_icon=":material/function:", layout="wide")

MENU = [  # the pages in the sidebar's menu; Outputs is the default, served at /
    st.Page(outputs_page, title="Outputs", url_path="home", icon=":material/bar_chart:", default=True),
    st.Page(step_page, title="Step through", url_path="step", icon=":material/step:"),
    st.Page(errors_page, title="Error vs float64", url_path="errors", icon=":material/rule:"),
    st.Page(precision_page, title="Precision lab", url_path="precision", icon=":material/straighten:"),
    st.Page(topk_page, title="Softmax + top-k", url_path="topk", icon=":material/leaderboard:"),
    st.Page(timing_page, title="Timing", url_path="timing", icon=":material/timer:"),
    st.Page(kernels_page, title="Kernels", url_path="kernels", icon=":material/code:"),
]
# Outputs at /outputs too, so that a link to it opens it (Streamlit serves a default page only at /); the menu is
# drawn here, since Streamlit's own would list the page twice
OUTPUTS_BY_NAME = st.Page(outputs_page, title="Outputs", url_path="outputs", icon=":material/bar_chart:")
navigation = st.navigation([*MENU, OUTPUTS_BY_NAME], position="hidden")
by_name = navigation.url_path == OUTPUTS_BY_NAME.url_path
with st.sidebar:
    for menu_page in MENU:  # at /outputs, its entry is that page, so that it shows as the current one
        st.page_link(OUTPUTS_BY_NAME if by_name and menu_page is MENU[0] else menu_page)
    st.divider()
guarded(sidebar)("" if by_name else navigation.url_path)  # sidebar.USES: "" is Outputs; a failure is said in words
navigation.run()
sync_url()

"""Softmax kernel explorer: `streamlit run app.py`. This file only wires the sidebar and the pages (ui/menu.py)."""

import streamlit as st

from ui.common import guarded
from ui.menu import PAGES
from ui.sidebar import sidebar
from ui.url import sync_url

st.set_page_config(page_title="Softmax kernel explorer", page_icon=":material/function:", layout="wide")

MENU = {  # the sidebar's menu; the first page is the default, served at /
    st.Page(p.render, title=p.title, url_path=p.path, icon=p.icon, default=p is PAGES[0]): p for p in PAGES
}
HOME = PAGES[0]
# the first page at its name too, so that a link to it opens it (Streamlit serves a default page only at /); the
# menu is drawn here, since Streamlit's own would list the page twice
HOME_BY_NAME = st.Page(HOME.render, title=HOME.title, url_path="outputs", icon=HOME.icon)
navigation = st.navigation([*MENU, HOME_BY_NAME], position="hidden")
by_name = navigation.url_path == HOME_BY_NAME.url_path
with st.sidebar:
    for menu_page in MENU:  # at /outputs, its entry is that page, so that it shows as the current one
        st.page_link(HOME_BY_NAME if by_name and MENU[menu_page] is HOME else menu_page)
    st.divider()
current = HOME if by_name else next(p for page, p in MENU.items() if page.url_path == navigation.url_path)
guarded(sidebar)(current)  # a failure is said in words
navigation.run()
sync_url()

"""Every URL parameter in one table: the sidebar's, each page's (its PAGE's params, ui/menu.py) and the
distributions' own (p_<name>); parsing the URL into session values and writing them back."""

from __future__ import annotations

from collections.abc import Mapping

import streamlit as st

from .menu import PAGES
from .params import ParamTable
from .state import RUN_PARAMS, default_dist, dist_params_query, parse_dist_params

TABLE = ParamTable(RUN_PARAMS + tuple(param for page in PAGES for param in page.params))
ss = st.session_state


def defaults() -> dict:
    return TABLE.defaults()


def _one(value) -> str:
    """st.query_params gives str; AppTest may give a list for repeated keys: take the last."""
    if isinstance(value, list | tuple):
        return str(value[-1]) if value else ""
    return str(value)


def parse_query(query: Mapping) -> tuple[dict, list[str]]:
    """Session values from URL parameters, and a warning for each one that could not be used."""
    q = {k: _one(v) for k, v in query.items()}
    values, problems = TABLE.parse(q)
    params, more = parse_dist_params(q, values.get("dist", default_dist()))
    return {**values, **params}, problems + more


def to_query(values: Mapping) -> dict[str, str]:
    """URL parameters for session values: the table's (sparse ones only where they differ from their
    defaults) and the current distribution's parameters."""
    return {**TABLE.to_query(values), **dist_params_query(values)}


def sync_url(force: bool = False) -> None:
    """Write the URL's parameters from the session's values where they differ from the URL this run started
    with, or always (force): a message of an earlier, interrupted run may still reach the browser after it."""
    wanted = to_query({k: ss[k] for k in ss.keys() if isinstance(k, str) and not k.startswith("_")})
    if force or st.query_params.to_dict() != wanted:
        st.query_params.from_dict(wanted)

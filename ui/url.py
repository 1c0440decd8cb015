"""Every URL parameter in one table: the sidebar's, each page's (declared beside the page as PARAMS) and the
distributions' own (p_<name>); parsing the URL into session values and writing them back."""

from __future__ import annotations

from collections.abc import Mapping

from .pages import kernels, merges, outputs, precision, step, timing, topk
from .params import ParamTable
from .state import RUN_PARAMS, default_dist, dist_params_query, parse_dist_params

TABLE = ParamTable(
    RUN_PARAMS
    + outputs.PARAMS
    + step.PARAMS
    + merges.PARAMS
    + kernels.PARAMS
    + timing.PARAMS
    + topk.PARAMS
    + precision.PARAMS
)


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

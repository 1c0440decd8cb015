"""The Timing page: its header, then ui/timing.py's body (run explorer.bench on a GPU, or load results files)."""

from __future__ import annotations

import streamlit as st

from .. import timing
from ..common import guarded, header
from ..params import Param

PARAMS = (Param("tshape", "text", ""), Param("bench_bundled", "flag", False, sparse=True))  # bundled: ui/results.py


@guarded
def timing_page() -> None:
    cfg = st.session_state.get("_cfg")
    header("Timing", cfg)
    timing.render(cfg)

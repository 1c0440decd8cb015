"""Pure figure builders: arrays, traces and results in, plotly Figures out (no Streamlit here).

One module per page's figures (outputs and errors, step, tree, timing and top-k, precision, bits),
with what they share in common.py; the names below are the public ones.
"""

from .bits import bits_html
from .common import ERR_FLOOR, chart_config, finish, nonfinite_marks, stamp_text
from .outputs import error_figure, error_table, outputs_figure, relative_error
from .precision import compare_figure, error_vs_n_figure, overflow_figure, stagnation_figure
from .step import MAX_FRAMES, StepNumbers, lanes_heatmap, step_figure, step_html, step_numbers, step_window
from .timing import (
    results_frame,
    shape_label,
    timing_figures,
    topk_bars_figure,
    topk_timing_figure,
    topk_timing_frame,
    topk_timing_table,
)
from .tree import merge_table, merge_tree_figure, tree_choices

__all__ = [
    "ERR_FLOOR", "MAX_FRAMES", "StepNumbers", "bits_html", "chart_config", "compare_figure", "error_figure",
    "error_table", "error_vs_n_figure", "finish", "lanes_heatmap", "merge_table", "merge_tree_figure",
    "nonfinite_marks", "outputs_figure", "overflow_figure", "relative_error", "results_frame", "shape_label",
    "stagnation_figure", "stamp_text", "step_figure", "step_html", "step_numbers", "step_window", "timing_figures",
    "topk_bars_figure", "topk_timing_figure", "topk_timing_frame", "topk_timing_table", "tree_choices",
]

"""Pure figure builders: arrays, traces and results in, plotly Figures out (no Streamlit here).

One module per page's figures (outputs and errors, step and lanes, tree, timing and top-k, precision, bits),
with what they share in common.py; the names below are the public ones.
"""

from .bits import bits_html
from .common import (
    ERR_FLOOR,
    MAX_POINTS,
    STAMP_BESIDE_TITLE_CHARS,
    chart_config,
    finish,
    nan_row_reason,
    plotly_text,
    sampled_note,
    stamp_lines_below,
    stamp_text,
)
from .lanes import MAX_HEAT_CELLS, MAX_HEAT_LANES, heat_cells, lanes_heatmap
from .outputs import deviation, equal_groups, error_figure, error_table, outputs_figure, relative_error
from .precision import compare_figure, error_vs_n_figure, overflow_figure, stagnation_figure
from .step import (
    StepNumbers,
    first_nonfinite,
    lane_steps,
    nonfinite_cause,
    rescale_steps,
    row_nan_note,
    sampled_steps_note,
    step_figure,
    step_numbers,
)
from .timing import (
    TIME_FIELDS,
    results_frame,
    shape_label,
    sweep_figure,
    sweep_rows,
    timing_figures,
    topk_bars_figure,
    topk_figure,
    topk_timing_frame,
    topk_timing_table,
)
from .tree import level_names, level_table, merge_table, merge_tree_figure, tree_choices

__all__ = [
    "ERR_FLOOR",
    "MAX_HEAT_CELLS",
    "MAX_HEAT_LANES",
    "MAX_POINTS",
    "STAMP_BESIDE_TITLE_CHARS",
    "TIME_FIELDS",
    "StepNumbers",
    "bits_html",
    "chart_config",
    "compare_figure",
    "deviation",
    "equal_groups",
    "error_figure",
    "error_table",
    "error_vs_n_figure",
    "finish",
    "first_nonfinite",
    "heat_cells",
    "lane_steps",
    "lanes_heatmap",
    "level_names",
    "level_table",
    "merge_table",
    "merge_tree_figure",
    "nan_row_reason",
    "nonfinite_cause",
    "outputs_figure",
    "overflow_figure",
    "plotly_text",
    "relative_error",
    "rescale_steps",
    "results_frame",
    "row_nan_note",
    "sampled_note",
    "sampled_steps_note",
    "shape_label",
    "stagnation_figure",
    "stamp_lines_below",
    "stamp_text",
    "step_figure",
    "step_numbers",
    "sweep_figure",
    "sweep_rows",
    "timing_figures",
    "topk_bars_figure",
    "topk_figure",
    "topk_timing_frame",
    "topk_timing_table",
    "tree_choices",
]

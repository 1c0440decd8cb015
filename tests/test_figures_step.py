"""ui/figures/step.py and tree.py without Streamlit: the step chart (rescales, non-finite steps, long lanes as an
envelope), the words for where a row becomes NaN, and the merge tree's labels and levels."""

import math

import numpy as np
import pytest

import explorer
from ui import figures

STAMP = "CPU emulation (no GPU) · NumPy x · 2025-01-01"


def _trace(variant: str, x: np.ndarray, acc: str = "float32"):
    return explorer.softmax(x, variant, acc=acc, backend="emulator", trace_row=0).trace


def _normal(cols: int, variant: str = "online_thread"):
    return _trace(variant, explorer.make_input("normal", 1, cols, seed=3))


def test_rescale_steps_are_where_m_grows_and_the_chart_marks_them():
    x = explorer.make_input("normal", 1, 300, seed=3)
    x[0, [100, 150, 220]] = 5.0, 6.0, 7.0
    trace = _trace("online_thread", x)
    grows = figures.rescale_steps(trace, 0)
    m = trace.m[0]
    assert grows.size and all(m[j] > m[j - 1] for j in grows)
    assert set(range(1, 300)) - set(grows) == {j for j in range(1, 300) if m[j] == m[j - 1]}
    assert {100, 150, 220} <= set(grows)
    fig = figures.step_figure(trace, 0, 150, "t", STAMP)
    marks = next(t for t in fig.data if t.name == "m grows (rescale)")
    assert list(marks.x) == list(grows)
    factor = next(t for t in fig.data if t.yaxis == "y3" and t.mode == "markers")
    np.testing.assert_allclose(factor.y, np.exp(m[grows - 1] - m[grows]), rtol=1e-6)
    assert any(s.type == "line" and s.x0 == 150 for s in fig.layout.shapes)  # the current step


def test_safe_softmax_has_no_rescale_row():
    trace = _normal(50, "safe_thread")
    assert figures.rescale_steps(trace, 0).size == 0
    fig = figures.step_figure(trace, 0, 10, "t", STAMP)
    assert not any("rescale factor" in a.text for a in fig.layout.annotations)


def test_a_nan_row_says_where_and_why_and_draws_nan_as_nan():
    x = explorer.make_input("normal", 1, 64, seed=1)
    x[0, 20] = np.inf
    trace = _trace("online_thread", x)
    assert figures.first_nonfinite(trace, 0) == 20
    cause = figures.nonfinite_cause(trace, 0, 20)
    assert r"$x_j = +\infty$" in cause and r"$e^{x_j - m_j} = e^{\infty - \infty}$" in cause  # for st.caption
    note = figures.row_nan_note(trace)
    assert "element 20" in note and "step 20" in note
    n = figures.step_numbers(trace, 0, 30)
    assert math.isnan(n.d) and math.isnan(n.rel_err)
    fig = figures.step_figure(trace, 0, 30, "t", STAMP)
    err = next(t for t in fig.data if t.yaxis == "y4")
    assert np.isnan(np.asarray(err.y, dtype=float)[np.asarray(err.x) >= 20]).all()  # not drawn at the floor
    assert any("NaN from step 20" in a.text for a in fig.layout.annotations)
    assert any(s.type == "rect" for s in fig.layout.shapes)


def test_a_row_of_only_minus_inf_is_explained():
    trace = _trace("online_thread", np.full((1, 8), -np.inf, np.float32))
    assert "e^(−∞ + ∞) / 0 is NaN" in figures.row_nan_note(trace)
    n = figures.step_numbers(trace, 0, 3)
    assert n.scale == 1.0 and n.m == n.prev_m == -np.inf  # equal maxima: the kernel's guard, no e^(∞−∞)


def test_a_long_lane_is_drawn_as_an_envelope_that_keeps_the_extremes():
    x = explorer.make_input("normal", 1, 40_000, seed=2)
    x[0, 31_234] = 9.0
    trace = _trace("online_thread", x)
    fig = figures.step_figure(trace, 0, 100, "t", STAMP)
    xs = fig.data[0]
    assert max(len(t.x) for t in fig.data) <= figures.MAX_POINTS + 2  # the steps, the current one and a NaN's
    assert 31_234 in set(xs.x) and 100 in set(xs.x)
    assert max(xs.y) == pytest.approx(9.0)
    assert "40,000 steps drawn as at most 10,000" in figures.sampled_steps_note(40_000)
    assert figures.sampled_steps_note(figures.MAX_POINTS) == ""  # a lane of that many is drawn whole


def test_a_lane_that_rescales_at_every_step_is_drawn_within_the_same_points():
    trace = _trace("online_thread", np.arange(40_000, dtype=np.float32)[None, :] / 1000)  # m grows at every step
    fig = figures.step_figure(trace, 0, 0, "t", STAMP)
    assert max(len(t.x) for t in fig.data) <= figures.MAX_POINTS + 2
    marks = next(t for t in fig.data if t.name == "m grows (rescale)")
    assert 0 < len(marks.x) <= figures.MAX_POINTS


def test_the_lanes_heatmap_holds_its_cells_whatever_the_lanes_and_steps():
    """1024 lanes (online_block's largest block) of a 1 × 200,000 row: 196 steps each, 200,704 cells, drawn as at
    most MAX_HEAT_LANES lanes and MAX_HEAT_CELLS cells, every k-th of each, with the lanes' own numbers."""
    x = explorer.make_input("normal", 1, 200_000, seed=3)
    trace = explorer.softmax(x, "online_block", backend="emulator", trace_row=0, block_size=1024).trace
    fig = figures.lanes_heatmap(trace, "d", "heat", STAMP)
    heat = fig.data[0]
    z = np.asarray(heat.z)
    assert z.shape[0] <= figures.MAX_HEAT_LANES and z.size <= figures.MAX_HEAT_CELLS
    assert np.asarray(heat.customdata).shape[:2] == z.shape
    lanes, steps = np.asarray(heat.y), np.asarray(heat.x)
    assert lanes[0] == 0 and lanes[1] == 1024 // figures.MAX_HEAT_LANES and steps[0] == 0
    np.testing.assert_array_equal(np.asarray(heat.customdata)[:, :, 0], trace.index[np.ix_(lanes, steps)])
    assert "every 4th shown" in fig.layout.yaxis.title.text and "step shown" in fig.layout.xaxis.title.text
    assert figures.heat_cells(32, 100)[1].size == 100  # a warp's short row: every lane and step


def test_heatmap_of_few_steps_has_whole_number_ticks():
    trace = _normal(1000, "online_block")
    fig = figures.lanes_heatmap(trace, "d", "heat", STAMP)
    assert fig.layout.xaxis.dtick == 1 and fig.layout.xaxis.tickmode == "linear"


def test_a_heatmap_of_one_step_has_its_tick_and_a_scale_centred_on_its_one_value():
    """online_block over 100 columns: one step a lane, where every d is 1 (log10 0): the step is ticked, and the
    colour scale runs from −1 to 1 (plotly's own was −0.2 to 0.4 for a flat field)."""
    fig = figures.lanes_heatmap(_normal(100, "online_block"), "d", "heat", STAMP)
    assert fig.layout.xaxis.tickmode == "array" and list(fig.layout.xaxis.tickvals) == [0]
    assert (fig.data[0].zmin, fig.data[0].zmax) == (-1.0, 1.0)


def test_tree_leaves_carry_lane_numbers_and_levels_are_named_by_how_they_merge():
    block = _normal(1000, "online_block")
    lanes = figures.merge_tree_figure(block, "warp 1 lanes", "t", STAMP)
    # 32 lanes in butterfly order, every one labelled, on two staggered lines (32 labels on one line do not fit
    # beside the sidebar at 1000 px): each label under its own leaf, evenly spaced, the partners side by side
    leaves = lanes.data[2]
    leaf_at = {float(x): lane for x, y, lane in zip(leaves.x, leaves.y, leaves.hovertext) if y == 0}
    labels = list(zip(lanes.layout.xaxis.tickvals, lanes.layout.xaxis.ticktext))
    assert len(leaf_at) == 32 and len(labels) == 32 and np.ptp(np.diff(lanes.layout.xaxis.tickvals)) == 0
    assert all(leaf_at[float(x)] == f"lane {t.removeprefix('<br>')}" for x, t in labels)
    assert [t.startswith("<br>") for _, t in labels] == [False, True] * 16  # every other one on the second line
    assert [int(t.removeprefix("<br>")) for _, t in labels][:2] == [32, 48]  # lane 32 and its offset-16 partner
    assert sorted(int(t.removeprefix("<br>")) for _, t in labels) == list(range(32, 64))
    assert figures.level_names(block, "warp 1 lanes")[0] == "shuffle, offset 16"
    assert figures.level_names(block, "across warps")[0] == "across warps (shared memory), offset 4"
    across = figures.merge_tree_figure(block, "across warps", "t", STAMP)
    nodes = across.data[2]
    assert any("m=" in t and "d=" in t for t in nodes.text)
    faded = figures.merge_tree_figure(block, "across warps", "t", STAMP, level=1)
    assert [o for o, y in zip(faded.data[2].marker.opacity, faded.data[2].y) if y > 1] == [0.25] * 3
    table = figures.level_table(block, "across warps", 3)
    assert len(table) == 1 and table["d"][0] == pytest.approx(block.final_d)


def test_a_lane_of_only_minus_inf_is_exact_and_its_chart_says_why_x_and_m_are_empty():
    """d = 0 against float64's 0 is exact (trace.d_rel_error leaves it NaN, for lanes with no element)."""
    trace = _trace("online_thread", np.full((1, 8), -np.inf, np.float32))
    assert figures.step_numbers(trace, 0, 3).rel_err == 0.0
    fig = figures.step_figure(trace, 0, 3, "t", STAMP)
    err = next(t for t in fig.data if t.yaxis == "y4")
    np.testing.assert_array_equal(err.y, [figures.ERR_FLOOR] * 8)  # exact: drawn at the floor, not left empty
    assert any("no x or m to draw" in a.text for a in fig.layout.annotations)
    assert "Every element of lane 0 is −∞" in figures.step.masked_lane_note(trace, 0)
    assert figures.step.masked_lane_note(_normal(50), 0) == ""
    assert not any(
        "no x or m to draw" in a.text for a in figures.step_figure(_normal(50), 0, 3, "t", STAMP).layout.annotations
    )


def test_the_heatmap_note_names_each_kind_of_white_cell_it_has():
    from ui.figures.lanes import heat_values, heat_white_note

    x = explorer.make_input("causal_mask", 8, 64)[1:2]  # 2 finite elements, 62 of −∞, over 256 lanes
    trace = _trace("online_block", x)
    d = heat_white_note(trace, "d")
    assert "no element at that step (lanes 64–255 get none of the row's 64)" in d
    assert "d = 0, where every element the lane folded so far is −∞ (log10 of 0 has no value)" in d
    assert "m = −∞, where" in heat_white_note(trace, "m")
    err = heat_white_note(trace, "err")
    assert "no element" in err and "d = 0" not in err  # 0 against float64's 0 is exact: coloured, not white
    assert heat_values(trace, "err")[0][5, 0] == np.log10(figures.ERR_FLOOR)
    assert heat_white_note(_normal(96, "online_warp"), "d") == ""
    nan = explorer.make_input("normal", 1, 96, seed=1)
    nan[0, 40] = np.nan
    assert heat_white_note(_trace("online_warp", nan), "d") == "White cells: d is NaN or ±∞."


def test_the_step_chart_is_drawn_once_a_step_with_room_for_its_legend_and_axis_titles():
    """The page draws the chart anew at every step. Plotly grew the margins to fit the legend and the axis titles and
    then drew it a second time; the error row marked each of a thousand steps (markers a few px apart, a third of
    each draw). Now the margins are fixed, as wide as plotly grew them (97 and 163 px at 1460 px wide), and the error
    row is a line past ERR_MARKERS steps; a short lane keeps its markers (one step alone is a dot, not a line)."""
    from ui.figures.step import ERR_MARKERS

    fig = figures.step_figure(_normal(1000), 0, 5, "t", STAMP)
    margin = fig.layout.margin
    assert margin.autoexpand is False and margin.l >= 97 and margin.r >= 163 + 12  # the longer "acc bfloat16"
    assert next(t for t in fig.data if t.yaxis == "y4").mode == "lines"
    for cols in (1, ERR_MARKERS):
        short = figures.step_figure(_normal(cols), 0, 0, "t", STAMP)
        assert next(t for t in short.data if t.yaxis == "y4").mode == "lines+markers"
    long_title = figures.step_figure(_normal(50), 0, 0, "a title<br>of two lines", STAMP).layout
    assert long_title.margin.t == fig.layout.margin.t + 20  # a line more above the first row's title


@pytest.mark.parametrize("variant, rows", [("online_thread", 4), ("safe_thread", 3)])
def test_the_current_step_is_a_line_in_every_row_and_the_non_finite_steps_are_shaded_in_every_row(variant, rows):
    """The shapes add_vline and add_vrect made (one a row, on its own axes), drawn directly: they took a fifth of
    the chart's time, at every step."""
    x = explorer.make_input("normal", 1, 64, seed=1)
    x[0, 20] = np.inf
    fig = figures.step_figure(_trace(variant, x), 0, 30, "t", STAMP)
    axes = ["", *map(str, range(2, rows + 1))]
    shapes = [(s.type, s.xref, s.yref, s.x0, s.x1, s.y0, s.y1) for s in fig.layout.shapes]
    assert shapes[:rows] == [("line", f"x{a}", f"y{a} domain", 30, 30, 0, 1) for a in axes]
    assert shapes[rows:] == [("rect", f"x{a}", f"y{a} domain", 19.5, 63.5, 0, 1) for a in axes]


def test_the_nan_note_names_the_row_of_the_input_not_of_the_slice_traced():
    """The page traces row 1 alone (a one-row slice, trace.row 0): its note said 'Row 0 is NaN' under a chart
    titled 'row 1'."""
    x = explorer.make_input("normal", 1, 64, seed=1)
    x[0, 20] = np.nan
    trace = _trace("online_thread", x)
    assert figures.row_nan_note(trace).startswith("Row 0 is NaN from element 20")
    assert figures.row_nan_note(trace, 1).startswith("Row 1 is NaN from element 20")


@pytest.mark.parametrize(
    "variant, dtype, acc",
    [
        ("online_thread", "float16", "bfloat16"),  # the input rounded again on entry
        ("online_thread", "float32", "float16"),
        ("online_thread", "float32", "float32"),
        ("safe_thread", "float16", "bfloat16"),
    ],
)
def test_step_numbers_are_the_kernels_parts_that_make_each_traced_d(variant, dtype, acc):
    x = explorer.make_input("large", 1, 400, dtype=dtype, seed=5, scale=100.0)
    trace = _trace(variant, x, acc)
    held_type = explorer.DTYPES[acc]
    rounded_on_entry = 0
    for j in figures.lane_steps(trace, 0):
        n = figures.step_numbers(trace, 0, j)
        # x_j as the accumulator holds it; the product and the term as the kernel rounds them add up to d_j
        assert n.x_held == float(np.float32(n.x).astype(held_type)), (j, n)
        assert float((np.float32(n.product) + np.float32(n.term)).astype(held_type)) == n.d, (j, n)
        if variant == "online_thread":
            assert n.m == max(n.prev_m, n.x_held), (j, n)  # the max is of x_j as held, not as given
        rounded_on_entry += n.x_held != n.x
    assert (rounded_on_entry > 0) == (dtype != acc and acc != "float32")

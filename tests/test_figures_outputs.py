"""ui/figures/outputs.py without Streamlit: the reference and each variant's deviation, one definition of
relative error shared with explorer.errors, the bound on the chart, and long rows as an envelope."""

import re

import numpy as np
import pytest

import explorer
from ui import figures
from ui.figures import timing as timing_figures

STAMP = "CPU emulation (no GPU) · NumPy x · 2025-01-01"


def _run(variants, dist="normal", rows=2, cols=300, dtype="float32", **params):
    x = explorer.make_input(dist, rows, cols, dtype=dtype, seed=1, **params)
    return x, {k: explorer.softmax(x, k, backend="emulator").out for k in variants}


def test_equal_rows_are_drawn_once_and_no_legend_entry_repeats():
    x, outs = _run(["online_warp", "online_block", "safe_block", "naive"])
    row = {k: y[0] for k, y in outs.items()}
    groups = figures.equal_groups(row)
    assert sum(len(g) for g in groups) == 4
    fig = figures.outputs_figure(explorer.reference(x)[0], row, log=True, title="t", stamp=STAMP)
    names = [t.name for t in fig.data if t.showlegend is not False and t.name]
    assert len(names) == len(set(names))
    assert len([t for t in fig.data if t.yaxis == "y2"]) == len(groups)
    assert fig.layout.legend.orientation == "v" and fig.layout.legend.x > 1  # beside the plot, not over the title


def test_the_chart_and_the_table_share_one_relative_error():
    x, outs = _run(["online_warp"], dtype="float16", dist="large")
    ref = explorer.reference(x)
    report = explorer.errors(outs["online_warp"], x, ref=ref)
    rel = np.concatenate([figures.relative_error(outs["online_warp"][r], ref[r]) for r in range(2)])
    assert np.nanmax(rel) == pytest.approx(report.max_rel)


def test_the_bound_is_drawn_points_above_it_are_ringed_and_a_bound_of_one_is_vacuous():
    ref = np.array([0.25, 0.25, 0.5])
    out = np.array([0.25, 0.25 * (1 + 1e-3), 0.5], dtype=np.float32)
    fig = figures.error_figure(ref, {"v": out, "w": out}, "t", STAMP, {"v": 1e-4, "w": 2.0})
    line = next(t for t in fig.data if t.name == "v bound")
    assert list(line.y) == [1e-4, 1e-4]
    ring = next(t for t in fig.data if t.name == "v: above bound (1)")
    assert list(ring.x) == [1]
    assert not any(t.name and t.name.startswith("w: above") for t in fig.data)
    assert any("vacuous" in a.text and "w" in a.text for a in fig.layout.annotations)


def test_outputs_flushed_from_below_the_smallest_normal_are_crossed_not_ringed():
    # element 1's 6e-39 is below fp32's smallest normal: -ftz writes 0 (rel. error 0.5); element 2 is a real miss
    ref = np.array([0.5, 6e-39, 0.25])
    out = np.array([0.5, 0.0, 0.26], dtype=np.float32)
    fig = figures.error_figure(ref, {"v": out}, "t", STAMP, {"v": 1e-4})
    names = {t.name: list(t.x) for t in fig.data if t.name and t.name.startswith("v: ")}
    assert names == {"v: above bound (1)": [2], "v: flushed to 0 (-ftz) (1)": [1]}
    # a flushed output whose relative error is under the bound (a reference far below the smallest normal) is
    # crossed too: the legend counts what the Outputs page counts
    ref, out = np.array([0.5, 1e-44, 0.25]), np.array([0.5, 0.0, 0.25], dtype=np.float32)
    fig = figures.error_figure(ref, {"v": out}, "t", STAMP, {"v": 1e-4})
    assert {t.name: list(t.x) for t in fig.data if t.name and t.name.startswith("v: ")} == {
        "v: flushed to 0 (-ftz) (1)": [1]
    }
    # naive's zeros beside its NaN came from a wrong d, not from -ftz: not crossed (as explorer.errors counts them)
    naive = np.array([np.nan, 0.0, 0.0], dtype=np.float32)
    fig = figures.error_figure(np.array([0.5, 6e-39, 0.5]), {"naive": naive}, "t", STAMP, {"naive": 1e-4})
    assert not any(t.name and "flushed" in t.name for t in fig.data)


def test_nan_is_not_drawn_at_the_floor():
    ref = np.array([0.5, 0.5])
    fig = figures.error_figure(ref, {"v": np.array([0.5, np.nan], np.float32)}, "t", STAMP)
    main = next(t for t in fig.data if t.name == "v")
    assert np.isnan(np.asarray(main.y, dtype=float)[1])
    assert any(t.name == "v: NaN (1)" for t in fig.data)


def test_a_long_row_is_an_envelope_that_keeps_extremes_marks_and_the_argmax():
    n = 2**20
    x = explorer.make_input("normal", 1, n, seed=0)
    x[0, 777_777] = 30.0
    x[0, 5] = np.nan
    ref = explorer.reference(x)[0]
    out = explorer.softmax(x, "fast", backend="emulator").out[0]
    fig = figures.outputs_figure(ref, {"fast": out}, log=True, title="t", stamp=STAMP)
    for trace in fig.data:
        assert len(trace.x) <= 2 * figures.MAX_POINTS + 1
    nan = next(t for t in fig.data if t.name == f"fast: NaN ({n})")  # a NaN input makes the row NaN
    assert nan.x[0] == 0 and len(nan.x) <= figures.MAX_POINTS
    clean = x.copy()
    clean[0, 5] = 0.0
    ref = explorer.reference(clean)[0]
    fig = figures.outputs_figure(
        ref, {"fast": explorer.softmax(clean, "fast", backend="emulator").out[0]}, log=True, title="t", stamp=STAMP
    )
    reference = fig.data[0]
    assert 777_777 in set(reference.x) and max(reference.y) == pytest.approx(ref.max())
    assert "drawn as at most" in figures.sampled_note(n, figures.MAX_POINTS)


def test_envelope_index_keeps_every_bucket_extreme():
    rng = np.random.default_rng(0)
    v = rng.normal(size=100_000)
    idx = figures.common.envelope_index(v)
    assert idx.size <= figures.MAX_POINTS + 1 and v[idx].max() == v.max() and v[idx].min() == v.min()
    assert np.array_equal(figures.common.envelope_index(v[:50]), np.arange(50))


def test_a_short_row_is_numbered_in_whole_elements():
    """A row of 1 or 4 elements: element ticks at 0, 1, 2, ... (plotly put 0.2 or 0.5 steps there)."""
    for cols in (1, 4):
        x, outs = _run(["online_warp", "naive"], rows=1, cols=cols)
        ref, row = explorer.reference(x)[0], {k: y[0] for k, y in outs.items()}
        for fig in (
            figures.outputs_figure(ref, row, log=True, title="t", stamp=STAMP),
            figures.error_figure(ref, row, "t", STAMP, {k: 1e-6 for k in row}),
        ):
            for axis in (a for a in fig.layout if a.startswith("xaxis")):
                layout = fig.layout[axis]
                assert (layout.tickmode, layout.dtick) == ("linear", 1) or list(layout.tickvals) == [0], (cols, axis)


def test_a_row_with_nothing_to_measure_says_so_and_labels_its_bounds_at_their_ends():
    """Every output NaN where float64 is NaN too (a NaN logit): no point to draw, only the bounds, within a decade;
    the chart says why it is empty and labels the axis at the bounds' ends, not with a ladder of minor labels."""
    ref = np.full(4, np.nan)
    out = np.full(4, np.nan, dtype=np.float32)
    fig = figures.error_figure(ref, {"v": out, "w": out}, "t", STAMP, {"v": 1.3e-6, "w": 7.2e-6})
    assert any("nothing to measure" in a.text for a in fig.layout.annotations)
    assert list(fig.layout.yaxis.tickvals) == [1.3e-6, 7.2e-6]
    measured = figures.error_figure(np.array([0.5, 0.5]), {"v": np.array([0.5, 0.5], np.float32)}, "t", STAMP)
    assert not any("nothing to measure" in a.text for a in measured.layout.annotations)


def _lines(text: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", line) for line in text.split("<br>")]


def test_a_long_title_breaks_into_lines_a_chart_beside_the_sidebar_holds():
    """Plotly does not wrap a title: at 1000 px (a 540 px chart beside the sidebar) the Outputs and Error titles,
    which name the whole configuration, ran past the chart's right edge and were cut off."""
    described = "Normal (mean=0, std=1) · 8×1000 float32 · acc float32 · seed 0"
    x, outs = _run(["online_warp"], rows=1, cols=8)
    ref, row = explorer.reference(x)[0], {k: y[0] for k, y in outs.items()}
    for fig in (
        figures.outputs_figure(ref, row, True, f"Softmax of row 0, {described}<br><sup>the reference</sup>", STAMP),
        figures.error_figure(ref, row, f"Relative error per element, row 0, {described}", STAMP),
    ):
        lines = _lines(fig.layout.title.text)
        assert len(lines) >= 2 and max(map(len, lines)) <= figures.common.TITLE_CHARS, lines
        assert "seed 0" in " ".join(lines)  # nothing lost
        assert fig.layout.margin.t >= 50 + 20 * len(lines)  # the lines fit above the plot
    assert figures.common.wrap_title("short<br>sub") == "short<br>sub"


def test_the_top_k_key_breaks_into_lines_under_the_title():
    ref = np.array([0.5, 0.3, 0.2])
    fig = figures.topk_bars_figure(
        ref[:2],
        np.array([0, 1]),
        {"topk_fused": (ref[:2].astype(np.float32), np.array([0, 1]))},
        True,
        "Top-2 of row 0, 8×32000 float32: each variant (CPU emulation) vs float64",
        STAMP,
    )
    key = next(a.text for a in fig.layout.annotations if a.text.startswith("dotted"))
    assert len(_lines(key)) == 3 and max(map(len, _lines(key))) <= 80


@pytest.mark.parametrize("decades, plot_px", [(5.4, 295), (11, 295), (40, 295), (0.5, 295), (11, 1000)])
def test_log_ticks_never_closer_than_a_label(decades, plot_px):
    """log_dtick's labels: 1, 2 and 5 each decade only where the closest (0.3 of a decade) keep 3/4 of a label's
    height apart, else whole decades spaced at least a label apart, and never sparser than that needs."""
    per_decade = plot_px / decades
    dtick = timing_figures.log_dtick(decades, plot_px)
    if dtick == "D2":
        assert 0.3 * per_decade >= 0.75 * timing_figures.LOG_LABEL_PX
    else:
        assert 0.3 * per_decade < 0.75 * timing_figures.LOG_LABEL_PX
        assert dtick * per_decade >= timing_figures.LOG_LABEL_PX > (dtick - 1) * per_decade


@pytest.mark.parametrize("k, smallest, dtick", [(16, 1e-4, "D2"), (64, 1e-9, 1)])
def test_a_top_64_row_over_ten_decades_labels_whole_decades(k, smallest, dtick):
    ref = np.geomspace(0.5, smallest, k)
    fig = figures.topk_bars_figure(
        ref, np.arange(k), {"topk_fused": (ref.astype(np.float32), np.arange(k))}, True, "Top-k", STAMP
    )
    assert fig.layout.yaxis.dtick == dtick


def test_a_kernel_keeps_its_colour_across_widths_whichever_others_are_drawn():
    """cupyx has no bfloat16 run: without it, every later line took the previous one's colour (torch red, quack
    green), so switching dtypes swapped the kernels' colours."""
    import pandas as pd

    def part(names):  # as display_names gives them: the name with its version, the kernel as measured
        return pd.DataFrame(
            [
                {"name": n, "kernel": n.split(" ")[0], "cols": c, "rows": 2**27 // c, "pct_copy": 90.0}
                for n in names
                for c in (1024, 4096)
            ]
        )

    def colours(names):
        fig = timing_figures.sweep_figure(part(names), 1024, "t", STAMP, time="event")
        return {t.name: t.line.color for t in fig.data if t.name in names}

    every = ["fast", "cupyx 14.2.0", "torch 2.11.0+cu130", "quack 0.6.5", "liger 0.8.5"]  # as the page names them
    with_cupyx, without = colours(every), colours([every[0], every[2], every[3]])
    assert all(without[n] == with_cupyx[n] for n in without)
    assert len(set(with_cupyx.values())) == 5

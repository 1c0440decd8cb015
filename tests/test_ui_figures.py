"""ui/figures/, the URL table (ui/url.py, ui/state.py) and the timing validator without Streamlit running: figures from arrays and traces."""

import json
import math

import numpy as np
import pytest

import explorer
from ui import figures, results, state, url

STAMP = "CPU emulation (no GPU) · NumPy x · 2025-01-01"


def _trace(variant: str, cols: int = 300, dist: str = "normal", acc: str = "float32", **params):
    x = explorer.make_input(dist, 1, cols, seed=3, **params)
    return explorer.softmax(x, variant, acc=acc, backend="emulator", trace_row=0).trace


def _stamped(fig) -> bool:
    return any(a.text == STAMP for a in fig.layout.annotations)


def test_stamp_names_gpu_driver_cuda_cupy_and_date():
    gpu = figures.stamp_text(
        {"backend": "cuda", "gpu": "NVIDIA H200", "cuda_driver": "13.0", "cuda_runtime": "12.8", "cupy": "13.6"},
        "2025-03-01",
    )
    assert gpu == "GPU NVIDIA H200 · driver 13.0 · CUDA 12.8 · CuPy 13.6 · 2025-03-01"
    cpu = figures.stamp_text({"backend": "emulator", "reason": "none"}, "2025-03-01")
    assert cpu.startswith("CPU emulation") and cpu.endswith("2025-03-01")


def test_chart_config_names_the_png():
    cfg = figures.chart_config("softmax_outputs_normal_8x1000")
    assert cfg["toImageButtonOptions"] == {"format": "png", "filename": "softmax_outputs_normal_8x1000", "scale": 2}


def test_outputs_figure_marks_nonfinite_and_zeros_instead_of_dropping_them():
    ref = np.array([0.5, 0.5, 0.0, np.nan])
    out = np.array([0.5, np.inf, 0.0, np.nan], dtype=np.float32)
    fig = figures.outputs_figure(ref, {"naive": out}, log=True, title="t", stamp=STAMP)
    names = [t.name for t in fig.data if t.name]
    assert "naive: +inf (1)" in names
    assert "naive: NaN (1)" in names
    assert "naive: 0 (1)" in names
    assert "float64 reference: NaN (1)" in names
    assert fig.layout.yaxis.type == "log"
    assert _stamped(fig) and fig.layout.title.text == "t"
    linear = figures.outputs_figure(ref, {"naive": out}, log=False, title="t", stamp=STAMP)
    assert linear.layout.yaxis.type == "linear"
    assert not any(t.name == "naive: 0 (1)" for t in linear.data)


def test_outputs_figure_draws_every_variant_and_the_reference():
    x = explorer.make_input("normal", 2, 50)
    ref = explorer.reference(x)[0]
    outs = {k: explorer.softmax(x, k, backend="emulator").out[0] for k in ("naive", "online_warp")}
    fig = figures.outputs_figure(ref, outs, log=False, title="t", stamp=STAMP)
    by_name = {t.name: t for t in fig.data}
    np.testing.assert_allclose(by_name["float64 reference"].y, ref)
    dev = (outs["online_warp"].astype(np.float64) - ref) / explorer.numerics.ulp(ref, explorer.FORMATS["float32"])
    np.testing.assert_allclose(by_name["online_warp"].y, dev)  # the deviation in ulps, not the probabilities
    assert any("no NaN" in (a.text or "") for a in fig.layout.annotations)


def test_relative_error_and_error_figure_floor():
    ref = np.array([0.25, 0.75, 0.0, 1.0])
    out = np.array([0.25, 0.75 * (1 + 1e-3), 0.0, np.nan])
    rel = figures.relative_error(out, ref)
    assert rel[0] == 0 and rel[1] == pytest.approx(1e-3) and rel[2] == 0 and math.isnan(rel[3])
    fig = figures.error_figure(ref, {"v": out}, "errors", STAMP)
    main = next(t for t in fig.data if t.name == "v")
    assert min(main.y) == figures.ERR_FLOOR  # exact results drawn at the floor, not dropped
    assert any("NaN" in (t.name or "") for t in fig.data)  # the NaN where ref is finite is marked
    assert "1e-10" in fig.layout.yaxis.title.text


def test_error_table_renames_report_fields():
    x = explorer.make_input("normal", 4, 64)
    r = explorer.errors(explorer.softmax(x, "online_thread", backend="emulator").out, x)
    df = figures.error_table({"online_thread": r})
    assert list(df.index) == ["online_thread"]
    assert df.loc["online_thread", "max rel"] == r.max_rel
    assert df.loc["online_thread", "argmax agree"] == 1.0


@pytest.mark.parametrize("variant", ["online_thread", "safe_thread"])
def test_step_numbers_reproduce_the_update(variant):
    trace = _trace(variant, cols=40, dist="increasing", spread=10.0)
    for step in (0, 1, 17, 39):
        n = figures.step_numbers(trace, 0, step)
        assert n.x == trace.x[step]
        if n.kind == "online":
            assert n.m == max(n.prev_m, n.x)
            assert n.scale == pytest.approx(math.exp(n.prev_m - n.m))  # 0 at step 0: d_{-1} = 0 anyway
            assert n.d == pytest.approx(n.prev_d * n.scale + n.term, rel=1e-6)
        else:
            assert n.d == pytest.approx(n.prev_d + n.term, rel=1e-6)
        assert n.rel_err < 1e-5


def test_lanes_heatmap_has_a_row_per_lane():
    trace = _trace("online_block", cols=1000)
    for quantity in ("d", "m", "err"):
        fig = figures.lanes_heatmap(trace, quantity, "heat", STAMP)
        z = np.asarray(fig.data[0].z)
        assert z.shape == (256, 4)
        assert np.isnan(z[-1, -1])  # 1000 = 3·256 + 232: the last lanes have no fourth element


def test_merge_tree_warp_and_block():
    warp = _trace("online_warp", cols=500)
    assert figures.tree_choices(warp) == ["warp 0 lanes"]
    fig = figures.merge_tree_figure(warp, "warp 0 lanes", "tree", STAMP)
    nodes = fig.data[2]
    assert len(nodes.x) == 32 + 31
    assert nodes.y[-1] == 5  # the root at the fifth level
    root_d = nodes.customdata[-1][1]
    assert root_d == pytest.approx(warp.final_d)
    assert len(figures.merge_table(warp)) == 31

    block = _trace("online_block", cols=1000)
    choices = figures.tree_choices(block)
    assert choices[0] == "warp 0 lanes" and choices[-1] == "across warps" and len(choices) == 9
    across = figures.merge_tree_figure(block, "across warps", "tree", STAMP)
    assert len(across.data[2].x) == 8 + 7
    assert across.data[2].customdata[-1][1] == pytest.approx(block.final_d)
    table = figures.merge_table(block)
    assert set(table["stage"]) == {"lanes", "warps"}
    assert (table["rel. error of d"] < 1e-5).all()


def _results(gpu: str, scale: float = 1.0) -> dict:
    rows = []
    for name, kind, t in (
        ("online_warp", "variant", 10.0),
        ("online_block", "variant", 8.0),
        ("cupyx", "peer", 9.0),
        ("copy", "copy", 5.0),
    ):
        rows.append(
            {
                "name": name,
                "kind": kind,
                "dtype": "float32",
                "acc": "float32",
                "rows": 4096,
                "cols": 4096,
                "block_size": 256 if name == "online_block" else None,
                "median_us": t * scale,
                "p10_us": t * scale * 0.95,
                "p90_us": t * scale * 1.1,
                "gbps": 134.2 / (t * scale) * 1e3,
                "pct_copy": 100 * 5.0 / t,
                "bytes_moved": 134217728,
                "reads_per_element": 2,
                "writes_per_element": 1,
                "max_rel": 1e-7 if kind != "copy" else None,
            }
        )
    return {
        "schema": explorer.bench.SCHEMA,
        "meta": {
            "gpu": gpu,
            "cuda_runtime": "12.8",
            "cuda_driver": "12.8",
            "cupy": "13.6",
            "torch": None,
            "date": "2025-03-01",
            "l2_bytes": 1 << 25,
        },
        "results": rows,
    }


def test_timing_figures_side_by_side():
    df = figures.results_frame({"H200": _results("H200"), "A100": _results("A100", 2.0)})
    assert set(df["source"]) == {"H200", "A100"} and len(df) == 8
    t, g = figures.timing_figures(df, "4096×4096 float32", STAMP)
    assert [tr.name for tr in t.data] == ["H200", "A100"]
    h200 = t.data[0]
    assert list(h200.y) == [10.0, 8.0, 9.0, 5.0]
    np.testing.assert_allclose(h200.error_y.array, [1.0, 0.8, 0.9, 0.5])
    np.testing.assert_allclose(h200.error_y.arrayminus, [0.5, 0.4, 0.45, 0.25])
    assert "cupyx" in list(h200.x) and h200.marker.pattern.shape[list(h200.x).index("cupyx")] == "/"
    assert g.data[0].text[0] == "50%" and g.layout.yaxis.title.text.endswith("labels % of copy")  # two sources
    assert "µs" in t.layout.yaxis.title.text and "GB/s" in g.layout.yaxis.title.text
    _, one = figures.timing_figures(df[df["source"] == "H200"], "4096×4096 float32", STAMP)
    assert (
        one.data[0].text[0] == "50% of copy" and one.layout.yaxis.title.text == "effective bandwidth (GB/s, event time)"
    )


def test_timing_results_are_checked_by_the_harness_s_loader():
    data = _results("H200")
    assert results.load_results(json.dumps(data).encode()) == data
    with pytest.raises(explorer.InvalidInput, match="JSON expected"):
        results.load_results(b"{nope")
    with pytest.raises(explorer.InvalidInput, match="schema"):
        results.load_results(b'{"schema": "other"}')
    broken = _results("H200")
    del broken["results"][1]["median_us"]
    with pytest.raises(explorer.InvalidInput, match="a result lacks median_us"):
        results.load_results(json.dumps(broken).encode())


def test_query_round_trip():
    values = {
        **url.defaults(),
        "dist": "uniform",
        "rows": 3,
        "cols": 77,
        "seed": 5,
        "dtype": "bfloat16",
        "acc": "float16",
        "variants": ["online_warp", "naive"],
        "block": 128,
        "row": 2,
        "log": False,
        "tv": "online_warp",
        "step": 4,
        state.param_key("uniform", "low"): -3.0,
    }
    query = url.to_query(values)
    assert query["variants"] == "online_warp,naive" and query["p_low"] == "-3" and query["log"] == "0"
    parsed, problems = url.parse_query(query)
    assert problems == []
    for key in ("dist", "rows", "cols", "seed", "dtype", "acc", "variants", "block", "row", "log", "tv", "step"):
        assert parsed[key] == values[key], key
    assert parsed[state.param_key("uniform", "low")] == -3.0


def test_bad_query_values_are_reported_not_used():
    parsed, problems = url.parse_query(
        {
            "dist": "gauss",
            "rows": "-4",
            "dtype": "float8",
            "variants": "online_warp,bogus",
            "block": "100",
            "p_std": "1e9",
        }
    )
    assert "dist" not in parsed and "rows" not in parsed and "dtype" not in parsed and "block" not in parsed
    assert parsed["variants"] == ["online_warp"]
    text = " ".join(problems)
    for word in ("dist='gauss'", "rows='-4'", "float8", "bogus", "block='100'", "p_std"):
        assert word in text


def test_config_slug_names_the_configuration():
    cfg = state.Config(
        dist="normal",
        params=(("mean", 0.0), ("std", 2.0)),
        rows=8,
        cols=1000,
        seed=1,
        dtype="float16",
        acc="float32",
        variants=("online_warp",),
        block=256,
        row=3,
    )
    assert cfg.slug("outputs") == "softmax_outputs_normal_mean0_std2_8x1000_float16_acc-float32_seed1_row3"
    up = state.Config(
        dist=state.UPLOAD,
        params=(),
        rows=1,
        cols=5,
        seed=0,
        dtype="float32",
        acc="float32",
        variants=(),
        block=256,
        row=0,
        upload_name="my logits.npy",
    )
    assert up.slug("errors").startswith("softmax_errors_upload-my-logits_1x5")


def test_results_frame_of_nothing_is_empty():
    assert figures.results_frame({}).empty
    assert figures.results_frame({"x": {"results": []}}).empty
    both = figures.results_frame({"x": {"results": []}, "H200": {"results": [{"variant": "fast", "cols": 8}]}})
    assert both.to_dict("records") == [{"source": "H200", "variant": "fast", "cols": 8}]


def test_merge_tree_split_row_chunks():
    trace = _trace("split_row", cols=5000)
    choices = figures.tree_choices(trace)
    assert "across chunks" in choices and "chunk 0, warp 0 lanes" in choices and "chunk 1, across warps" in choices
    chain = figures.merge_tree_figure(trace, "across chunks", "chunks", STAMP)
    chunks = {lv.chunk for lv in trace.merges if lv.stage != "chunks"}
    assert len(chain.data[2].x) == len(chunks) + len(chunks) - 1  # the chunks, then one merge per later chunk
    assert chain.data[2].customdata[-1][1] == pytest.approx(trace.final_d)
    lanes = figures.merge_tree_figure(trace, "chunk 1, warp 3 lanes", "lanes", STAMP)
    assert len(lanes.data[2].x) == 32 + 31
    with pytest.raises(ValueError, match="no merge stage"):
        figures.merge_tree_figure(trace, "warp 99 lanes", "bad", STAMP)
    assert "chunk" in figures.merge_table(trace).columns


def test_a_long_gpu_name_from_a_results_file_is_cut_in_the_stamp():
    """A results file's 300-character GPU name ran across the chart and over its axis title."""
    line = figures.stamp_text({"backend": "cuda", "gpu": "G" * 300, "cupy": "14.2"}, "2026-12-05")
    assert line.startswith("GPU " + "G" * 40 + "… (300 characters) · driver ? · CUDA ? · CuPy 14.2")

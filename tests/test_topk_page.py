"""The Softmax + top-k page: AppTest over the page and its controls (emulator), a loaded results file, a
mocked GPU benchmark run, and the page's figure builders and helpers without Streamlit."""

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

import explorer
from explorer.topk import TOPK_VARIANTS, VOCABS, TopkReport

pytest.importorskip("streamlit")
from test_app import arr, chart_configs, charts, goto, make, ok  # the AppTest page helpers

from ui import compute, figures
from ui.pages import topk
from ui.state import GeneratedInput, UploadedInput

STAMP = "CPU emulation (no GPU) · NumPy x · 2025-01-01"
BASE = {"rows": "4", "cols": "100", "variants": "online_warp"}


def page(query: dict | None = None):
    at = make({**BASE, **(query or {})})
    return goto(at, "topk")


TABLES = ("table_topk", "table_topk_row", "table_topk_bytes", "table_topk_time")  # in page order


def table(at, key: str) -> pd.DataFrame:
    """AppTest's dataframes carry no key: find them by their place on the page."""
    return at.dataframe[TABLES.index(key)].value


def _stamped(fig) -> bool:
    return any(a.text == STAMP for a in fig.layout.annotations)


# --- the page on the emulator --------------------------------------------------------------------------------


def test_page_shows_each_variant_beside_the_reference():
    at = page()
    ok(at)
    assert at.title[0].value == "Softmax + top-k"
    fig = charts(at)[0]
    assert [t["name"] for t in fig["data"]] == ["float64 reference", "topk_fused", "topk_unfused"]
    x = explorer.make_input("normal", 8, 32000)
    ref_values, ref_indices = explorer.reference_topk(x, 8)
    np.testing.assert_allclose(arr(fig["data"][0]["y"]), ref_values[0])
    assert fig["layout"]["xaxis"]["ticktext"][0] == f"1<br>#{ref_indices[0, 0]}"
    assert not any(fig["data"][1]["text"])  # labels mark disagreements only, and there are none
    assert fig["layout"]["yaxis"]["type"] == "log"
    assert any("CPU emulation" in a.get("text", "") for a in fig["layout"]["annotations"])
    assert (
        chart_configs(at)[0]["toImageButtonOptions"]["filename"]
        == "softmax_topk_normal_mean0_std1_8x32000_float32_seed0_k8_row0"
    )
    agree = table(at, "table_topk")
    assert list(agree.index) == ["topk_fused", "topk_unfused"]
    assert (agree["index mismatches"] == 0).all() and (agree["index agreement"] == 1).all()
    assert (agree["rows checked"] == 8).all() and (agree["backend"] == "emulator").all()
    assert (agree["max rel"] < 1e-5).all()
    moved = table(at, "table_topk_bytes")
    assert moved.loc["topk_fused", "bytes moved"] == TOPK_VARIANTS["topk_fused"].bytes_moved(8, 32000, 8, "float32")
    assert moved.loc["torch.softmax + torch.topk", "× fused"] == pytest.approx(3, rel=1e-3)
    assert any("Timings need a GPU" in i.value and "--topk" in i.value for i in at.info)
    assert any("capped at 2,097,152" in c.value for c in at.caption)
    intro = " ".join(m.value for m in at.markdown)
    assert "ties go to the lower index" in intro and "tie swap" in intro.lower()
    assert {b.label for b in at.download_button} == {"Download agreement (CSV)", "Download row 0 (CSV)"}


def test_controls_k_vocab_batch_row_log():
    at = page()
    at.number_input(key="tk_k").set_value(50).run()
    at.selectbox(key="tk_vocab").set_value(262144).run()
    ok(at)
    assert at.select_slider(key="tk_batch").options == ["1", "2", "4", "8"]  # the emulator's cap
    at.select_slider(key="tk_batch").set_value(8).run()
    at.number_input(key="tk_row").set_value(7).run()
    at.toggle(key="tk_log").set_value(False).run()
    ok(at)
    fig = charts(at)[0]
    assert fig["layout"]["title"]["text"].startswith("Top-50 of row 7, 8×262144 float32")
    assert fig["layout"]["yaxis"]["type"] == "linear"
    assert arr(fig["data"][0]["y"]).size == 50
    x = explorer.make_input("normal", 8, 262144)
    np.testing.assert_allclose(arr(fig["data"][0]["y"]), explorer.reference_topk(x[7:8], 50)[0][0])
    assert (table(at, "table_topk")["index mismatches"] == 0).all()
    # a smaller vocabulary offers larger batches; the batch and row stay where they were
    at.selectbox(key="tk_vocab").set_value(32000).run()
    ok(at)
    assert at.select_slider(key="tk_batch").options[-1] == "64"
    assert at.select_slider(key="tk_batch").value == 8 and at.number_input(key="tk_row").value == 7
    # another page and back: the page's settings are kept
    goto(at, "errors")
    goto(at, "topk")
    ok(at)
    assert at.number_input(key="tk_k").value == 50 and at.toggle(key="tk_log").value is False


def test_batch_above_the_emulator_cap_is_clamped():
    at = page()
    at.select_slider(key="tk_batch").set_value(64).run()
    at.selectbox(key="tk_vocab").set_value(151936).run()
    ok(at)
    assert at.select_slider(key="tk_batch").value == 8  # 13 × 151936 would pass the cap: 8 is the largest offered
    assert "8×151936" in charts(at)[0]["layout"]["title"]["text"]
    assert [t.value for t in at.toast] == [
        "Batch 64 × vocabulary 151,936 is more than the CPU emulation's 2,097,152 elements: showing 8."
    ]


def test_a_linked_batch_above_the_emulator_cap_says_so():
    at = page({"tk_batch": "1024"})
    ok(at)
    assert at.select_slider(key="tk_batch").value == 64
    assert "64×32000" in charts(at)[0]["layout"]["title"]["text"]
    assert [t.value for t in at.toast] == [
        "Batch 1,024 × vocabulary 32,000 is more than the CPU emulation's 2,097,152 elements: showing 64."
    ]
    ok(at.number_input(key="tk_k").set_value(4).run())
    assert not at.toast  # said once, not on every rerun


def test_log_bars_equal_within_rounding_look_equal():
    """Top-1 of a GPT-2 row: float32's rounding of the float64 probability must not look like a bar many times
    shorter (an autorange spanned 0.00136598491–0.00136598499)."""
    at = page({"tk_k": "1", "tk_batch": "1", "tk_vocab": "50257"})
    ok(at)
    fig = charts(at)[0]
    bars = [float(arr(t["y"])[0]) for t in fig["data"]]
    low, high = fig["layout"]["yaxis"]["range"]
    assert low <= np.log10(min(bars)) - 1 and high - low >= 1 and high >= np.log10(max(bars))
    heights = [np.log10(b) - low for b in bars]
    assert min(heights) / max(heights) > 0.999


def test_constant_logits_tie_to_the_lower_index():
    at = page({"dist": "constant"})
    ok(at)
    fig = charts(at)[0]
    assert [int(i) for i in arr(fig["data"][0]["customdata"])] == list(range(8))
    for trace in fig["data"][1:]:
        assert [int(row[0]) for row in trace["customdata"]] == list(range(8))
    assert (table(at, "table_topk")["index mismatches"] == 0).all()


def test_tie_swaps_are_counted_and_marked():
    at = page({"dist": "spike", "dtype": "float16"})
    at.number_input(key="tk_k").set_value(64).run()
    ok(at)
    agree = table(at, "table_topk")
    assert agree.loc["topk_fused", "tie swaps"] == 0
    assert agree.loc["topk_unfused", "tie swaps"] > 0 and agree.loc["topk_unfused", "index mismatches"] == 0
    fig = charts(at)[0]
    unfused = next(t for t in fig["data"] if t["name"] == "topk_unfused")
    patterns = unfused["marker"]["pattern"]["shape"]
    assert "." in patterns and "x" not in patterns
    assert "tie swaps" in " ".join(c.value for c in at.caption)


def test_nonfinite_rows_are_not_checked():
    at = page({"dist": "nonfinite", "p_rate": "0.001"})
    ok(at)
    agree = table(at, "table_topk")
    assert (agree["rows checked"] < 8).all()


def test_a_fully_masked_row_is_said_to_be_all_minus_inf_and_is_not_drawn():
    """causal_mask's masked rows hold only −∞: the page says so (it said "a NaN or +inf logit") and draws no chart
    for the row (it drew an empty one on a meaningless axis)."""
    at = page({"dist": "causal_mask", "p_masked_rows": "3", "tk_row": "0"})
    ok(at)
    notes = " ".join(i.value for i in at.info)
    assert "Row 0's softmax is NaN, in float64 too: every input is −∞, so" in notes and "NaN or +inf logit" not in notes
    assert not any(c.key == "chart_topk" for c in at.get("plotly_chart"))
    assert (table(at, "table_topk")["rows checked"] == 5).all()
    ok(at.number_input(key="tk_row").set_value(5).run())
    assert any(c.key == "chart_topk" for c in at.get("plotly_chart"))
    assert "softmax is NaN" not in " ".join(i.value for i in at.info)


def test_uploaded_logits_run_as_they_are():
    at = page()
    at.selectbox(key="dist").set_value("upload").run()
    ok(at)
    assert any("Upload a .npy or .csv" in i.value for i in at.info)
    logits = np.linspace(-3, 3, 60).reshape(2, 30)
    at.file_uploader(key="upload").set_value(
        ("lm.csv", "\n".join(",".join(map(str, r)) for r in logits).encode(), "text/csv")
    ).run()
    ok(at)
    assert at.number_input(key="tk_k").proto.max == 30 and at.number_input(key="tk_k").label == "k (1–30)"
    fig = charts(at)[0]
    assert [int(i) for i in arr(fig["data"][0]["customdata"])] == list(range(29, 21, -1))
    assert chart_configs(at)[0]["toImageButtonOptions"]["filename"] == "softmax_topk_upload-lm_float32_k8_row0"


def test_k_narrowed_to_an_uploads_width_comes_back_after_the_upload():
    at = page({"tk_k": "8"})
    at.selectbox(key="dist").set_value("upload").run()
    at.file_uploader(key="upload").set_value(("small.csv", b"1,2,3,4,5\n5,4,3,2,1", "text/csv")).run()
    ok(at)
    assert at.number_input(key="tk_k").value == 5
    assert [t.value for t in at.toast] == ["k 8 is outside 1–5: showing 5."]
    at.file_uploader(key="upload").set_value(("smaller.csv", b"1,2,3\n3,2,1", "text/csv")).run()
    assert at.number_input(key="tk_k").value == 3
    ok(at.selectbox(key="dist").set_value("zipf").run())
    assert at.number_input(key="tk_k").value == 8  # the first k, not the first upload's 5


# --- timing: a loaded results file, a refused one, and a (mocked) GPU run -----------------------------------


def _topk_doc(gpu: str = "NVIDIA H200", scale: float = 1.0, extra_softmax_row: bool = True) -> dict:
    rows = []
    for (batch, vocab), k in (((512, 128256), 8), ((512, 128256), 50), ((1, 262144), 8)):
        for name, t in (("topk_fused", 40.0), ("topk_unfused", 110.0), ("torch", 160.0)):
            moved = TOPK_VARIANTS["topk_fused" if name == "topk_fused" else "topk_unfused"].bytes_moved(
                batch, vocab, k, "float32"
            )
            t = t * scale * (k / 8)
            rows.append(
                {
                    "name": name,
                    "kind": "peer" if name == "torch" else "variant",
                    "dtype": "float32",
                    "acc": "float32",
                    "rows": batch,
                    "cols": vocab,
                    "block_size": 0,
                    "k": k,
                    "median_us": t,
                    "p10_us": 0.9 * t,
                    "p90_us": 1.2 * t,
                    "gbps": moved / t / 1e3,
                    "pct_copy": None,
                    "bytes_moved": moved,
                    "reads_per_element": None,
                    "writes_per_element": None,
                    "max_rel": None if name == "torch" else 2e-7,
                    "launch": "",
                }
            )
    if extra_softmax_row:  # a plain softmax row (no k) in the same file is left out
        rows.append({**rows[0], "name": "torch", "k": None, "kind": "peer"})
        del rows[-1]["k"]
    return {
        "schema": "softmax-explorer-bench/1",
        "meta": {
            "gpu": gpu,
            "cuda_runtime": "12.8",
            "cuda_driver": "12.8",
            "cupy": "13.6",
            "torch": "2.6",
            "date": "2025-03-01T10:00:00",
            "l2_bytes": 50331648,
        },
        "config": {"topk": [8, 50]},
        "results": rows,
    }


def test_loaded_topk_results_are_rendered():
    at = page()
    files = [
        ("h200.json", json.dumps(_topk_doc()).encode(), "application/json"),
        ("a100.json", json.dumps(_topk_doc("NVIDIA A100", 2.0)).encode(), "application/json"),
    ]
    at.file_uploader(key="tk_bench_files").set_value(files).run()
    ok(at)
    assert not any("Timings need a GPU" in i.value for i in at.info)  # beside loaded timings: measured elsewhere
    assert any("measured on the GPUs their files name" in c.value for c in at.caption)
    assert at.selectbox(key="tk_tshape").options == [
        "512×128256 float32 top-8",
        "512×128256 float32 top-50",
        "1×262144 float32 top-8",
    ]
    fig = charts(at)[1]
    assert [t["name"] for t in fig["data"] if t["type"] == "bar"] == ["NVIDIA H200", "NVIDIA A100"]
    bars = fig["data"][0]
    assert list(bars["x"]) == ["topk_fused", "topk_unfused", "torch.softmax + torch.topk"]
    assert list(arr(bars["y"])) == [40.0, 110.0, 160.0]
    np.testing.assert_allclose(arr(bars["error_y"]["array"]), [8.0, 22.0, 32.0])
    assert bars["text"][0].endswith("<br>4.00× torch") and "MB" in bars["text"][0]
    assert (
        "GPU NVIDIA H200 · driver 12.8 · CUDA 12.8 · CuPy 13.6 · 2025-03-01" in fig["layout"]["annotations"][0]["text"]
    )
    t = table(at, "table_topk_time")
    assert len(t) == 6 and set(t["source"]) == {"NVIDIA H200", "NVIDIA A100"}
    assert set(t["name"]) == {"topk_fused", "topk_unfused", "torch.softmax + torch.topk"}  # as the chart names them
    fused = t[(t["source"] == "NVIDIA H200") & (t["name"] == "topk_fused")].iloc[0]
    assert fused["speedup_vs_torch"] == pytest.approx(4.0)
    assert fused["bytes_moved"] == TOPK_VARIANTS["topk_fused"].bytes_moved(512, 128256, 8, "float32")
    at.selectbox(key="tk_tshape").set_value("1×262144 float32 top-8").run()
    ok(at)
    assert chart_configs(at)[1]["toImageButtonOptions"]["filename"] == "softmax_topk_timing_1x262144_float32_top-8"
    assert "Download timing table (CSV)" in [b.label for b in at.download_button]


def test_results_without_topk_rows_or_schema_are_refused_in_words():
    at = page()
    plain = _topk_doc()
    plain["results"] = [{k: v for k, v in r.items() if k != "k"} for r in plain["results"]]
    at.file_uploader(key="tk_bench_files").set_value(
        [
            ("plain.json", json.dumps(plain).encode(), "application/json"),
            ("x.json", b'{"schema": "nope"}', "application/json"),
        ]
    ).run()
    ok(at)
    assert any("x.json" in e.value and "schema" in e.value for e in at.error)
    assert any("No top-k results" in w.value for w in at.warning)
    assert len(charts(at)) == 1  # the bars only


def test_on_a_gpu_the_button_runs_bench_topk(monkeypatch):
    import explorer.bench

    calls = []

    def fake_bench(shapes, ks, dtypes, peers=True, progress=None):
        calls.append((shapes, ks, dtypes, peers))
        progress(0.5, "halfway")
        doc = _topk_doc("FAKE GPU", extra_softmax_row=False)
        for r in doc["results"]:
            r["rows"], r["cols"], r["k"] = shapes[0][0], shapes[0][1], ks[0]
        doc["results"] = doc["results"][:3]
        return doc

    monkeypatch.setattr(
        compute, "backend_info", lambda: {"backend": "cuda", "gpu": "FAKE GPU", "cuda_runtime": "12.8", "cupy": "13.6"}
    )
    monkeypatch.setattr(explorer.bench, "bench_topk", fake_bench)
    at = page()
    ok(at)
    assert not any("Timings need a GPU" in i.value for i in at.info)
    assert at.select_slider(key="tk_batch").options[-1] == "1024"  # no emulator cap on a GPU
    at.number_input(key="tk_k").set_value(50).run()
    at.button(key="tk_bench_run").click().run()
    ok(at)
    assert calls == [([(8, 32000)], [50], ["float32"], True)]
    assert at.selectbox(key="tk_tshape").value == "8×32000 float32 top-50"
    fig = charts(at)[1]
    assert [t["name"] for t in fig["data"] if t["type"] == "bar"] == ["FAKE GPU"]
    assert "Download this run's results (JSON)" in [b.label for b in at.download_button]
    files = next(e for e in at.expander if e.label.startswith("Top-k results"))
    assert files.label.endswith(": this run loaded") and not files.proto.expanded  # the run counts as loaded


def test_every_distribution_and_dtype_has_no_exception():
    at = page()
    for dist in ("large", "causal_mask", "nonfinite", "constant", "zipf"):
        at.selectbox(key="dist").set_value(dist).run()
        ok(at)
    for dtype in ("float16", "bfloat16"):
        at.selectbox(key="dtype").set_value(dtype).run()
        ok(at)
        assert f"8×32000 {dtype}" in charts(at)[0]["layout"]["title"]["text"]


# --- figure builders and helpers, without Streamlit -----------------------------------------------------------


def test_topk_bars_figure_marks_ties_and_wrong_indices():
    ref_values = np.array([0.5, 0.2, 0.2, 0.1])
    ref_indices = np.array([7, 3, 4, 0])
    outputs = {
        "topk_fused": (ref_values, ref_indices),
        "topk_unfused": (np.array([0.5, 0.2, 0.2, 0.05]), np.array([7, 4, 3, 9])),
    }
    status = {"topk_fused": np.array(["same"] * 4), "topk_unfused": np.array(["same", "tie", "tie", "wrong"])}
    fig = figures.topk_bars_figure(ref_values, ref_indices, outputs, True, "Top-4", STAMP, status=status)
    assert [t.name for t in fig.data] == ["float64 reference", "topk_fused", "topk_unfused"]
    assert fig.layout.yaxis.type == "log" and _stamped(fig)
    assert list(fig.layout.xaxis.ticktext) == ["1<br>#7", "2<br>#3", "3<br>#4", "4<br>#0"]
    unfused = fig.data[2]
    assert list(unfused.marker.pattern.shape) == ["", ".", ".", "x"]
    assert list(unfused.marker.line.width) == [0.5, 0.5, 0.5, 3]
    assert list(unfused.text) == ["", "#4", "#3", "#9"]  # the bars whose index differs
    assert fig.data[0].text is None and not any(fig.data[1].text)
    assert "(2)" in fig.layout.annotations[0].text and "(1)" in fig.layout.annotations[0].text
    # so does a large k
    k = 40
    idx = np.arange(k)
    moved = idx.copy()
    moved[5] = 99
    fig = figures.topk_bars_figure(
        np.linspace(1, 0.1, k),
        idx,
        {"v": (np.linspace(1, 0.1, k), moved)},
        False,
        "t",
        STAMP,
        status={"v": np.where(idx == 5, "wrong", "same")},
    )
    assert fig.layout.yaxis.type == "linear" and fig.data[0].text is None
    assert [t for t in fig.data[1].text if t] == ["#99"]


def test_topk_bars_start_from_an_honest_floor():
    """All-equal probabilities (constant logits), one variant's rounded up and one holding a zero: on a log axis
    the bars start a decade or more below the smallest positive one (the zero is left off), on a linear axis from 0."""
    ref_values = np.full(8, 1 / 32000)
    indices = np.arange(8)
    rounded = ref_values.astype(np.float32).astype(np.float64)
    with_zero = np.where(indices == 7, 0.0, rounded)
    outputs = {"topk_fused": (rounded, indices), "topk_unfused": (with_zero, indices)}
    fig = figures.topk_bars_figure(ref_values, indices, outputs, True, "Top-8", STAMP)
    low, high = fig.layout.yaxis.range
    smallest = np.log10(min(ref_values.min(), rounded.min()))
    assert low == np.floor(smallest) - 1 and high >= np.log10(max(ref_values.max(), rounded.max()))
    assert high - low >= 1
    linear = figures.topk_bars_figure(ref_values, indices, outputs, False, "Top-8", STAMP)
    assert linear.layout.yaxis.rangemode == "tozero" and linear.layout.yaxis.range is None


def test_topk_timing_frame_table_and_figure():
    doc = _topk_doc()
    df = figures.topk_timing_frame({"H200": doc, "A100": _topk_doc("A100", 2.0)})
    assert len(df) == 18 and df["k"].dtype.kind == "i"  # the k-less softmax row is left out
    assert list(dict.fromkeys(df["shape"])) == [
        "512×128256 float32 top-8",
        "512×128256 float32 top-50",
        "1×262144 float32 top-8",
    ]
    part = df[df["shape"] == "512×128256 float32 top-50"]
    t = figures.topk_timing_table(part)
    assert list(t["speedup_vs_torch"][t["source"] == "H200"]) == pytest.approx([4.0, 160 / 110, 1.0])
    assert t["MB_moved"].iloc[0] == pytest.approx(t["bytes_moved"].iloc[0] / 1e6)
    fig = figures.topk_figure(t, "top-k", STAMP)
    assert [tr.name for tr in fig.data if tr.type == "bar"] == ["H200", "A100"] and _stamped(fig)
    assert list(fig.data[1].y) == [500.0, 1375.0, 2000.0]
    assert list(fig.data[0].marker.pattern.shape) == ["", "", "/"]
    # without torch there is no speed-up, and the labels say only the bytes
    no_torch = figures.topk_timing_table(part[part["name"] != "torch"])
    assert no_torch["speedup_vs_torch"].isna().all()
    fig = figures.topk_figure(no_torch, "top-k", STAMP)
    assert all(text.endswith("MB") for text in fig.data[0].text)
    assert figures.topk_timing_frame({"softmax only": {"results": [{"name": "online_warp", "rows": 1}]}}).empty


def test_position_status_follows_topk_errors():
    x = explorer.make_input("spike", 8, 32000, dtype="float16")
    r = explorer.softmax_topk(x, 64, "topk_unfused", backend="emulator")
    report = explorer.topk_errors(r, x)
    ref = explorer.reference(x)
    _, ref_indices = explorer.reference_topk(x, 64)
    status = np.stack([topk.position_status(ref[i], ref_indices[i], r.indices[i], "float16") for i in range(8)])
    assert int((status == "tie").sum()) == report.tie_swaps > 0
    assert int((status == "wrong").sum()) == report.index_mismatch
    nan_row = np.array([np.nan, 0.5, 0.5])
    assert list(topk.position_status(nan_row, np.array([1]), np.array([0]), "float32")) == ["same"]


def test_helpers_batches_bytes_slug_and_agreement():
    assert topk.batch_options(262144, emulated=True) == [1, 2, 4, 8]
    assert topk.batch_options(32000, emulated=True)[-1] == 64
    assert topk.batch_options(262144, emulated=False) == list(topk.BATCHES)
    assert all(topk.vocab_label(v).startswith(f"{v:,} (") for v in VOCABS)
    moved = topk.bytes_table(512, 128256, 50, "bfloat16")
    assert moved.loc["topk_fused", "bytes moved"] == 512 * 128256 * 2 + 512 * 50 * 6
    logits = 512 * 128256 * 2
    assert moved.loc["topk_unfused", "bytes moved"] == 3 * logits + 512 * 50 * (2 + 4)  # int32 indices
    assert moved.loc["torch.softmax + torch.topk", "bytes moved"] == 3 * logits + 512 * 50 * (2 + 8)  # int64
    assert moved.loc["torch.topk + logsumexp", "bytes moved"] == 2 * logits + 512 * 50 * (2 + 8)
    assert moved.loc["topk_fused", "size"] == "125.40 MiB"
    assert topk.bytes_table(1, 100, 8, "float32").loc["topk_fused", "size"] == "464 bytes"  # not "0.00 MB"
    # the numbers first: at 1000 px the long description pushed them past the table's right edge
    assert list(moved.columns) == ["bytes moved", "size", "× fused", "what it does to memory"]
    spec = GeneratedInput("zipf", (("s", 1.1),), 8, 50257, "float16", 3)
    assert topk.input_slug(spec, 50, 2) == "softmax_topk_zipf_s1.1_8x50257_float16_seed3_k50_row2"
    assert (
        topk.input_slug(UploadedInput("my logits.v2.npy", b"", "bfloat16"), 8, 0)
        == "softmax_topk_upload-my-logits.v2_bfloat16_k8_row0"
    )
    runs = {
        "topk_unfused": topk.TopkRun(
            np.zeros((4, 10)),
            np.zeros((4, 10), dtype=np.int32),
            "emulator",
            0.002,
            "",
            TopkReport(index_mismatch=2, tie_swaps=5, max_rel=1e-4, rows_checked=4),
        )
    }
    df = topk.agreement_table(runs, 10)
    assert df.loc["topk_unfused", "index agreement"] == pytest.approx(1 - 2 / 40)
    assert df.loc["topk_unfused", "wall ms (not a benchmark)"] == pytest.approx(2.0)
    assert df.loc["topk_unfused", "max rel"] == pytest.approx(1e-4)
    none = {"topk_fused": dataclasses.replace(runs["topk_unfused"], report=TopkReport(0, 0, 0.0, rows_checked=0))}
    unchecked = topk.agreement_table(none, 10).loc["topk_fused"]  # every row NaN or +inf: nothing measured, no 0
    assert np.isnan(unchecked["index agreement"]) and np.isnan(unchecked["max rel"])


def test_the_input_is_named_as_the_sidebar_names_it():
    at = page({"dist": "large", "p_large_scale": "100"})
    ok(at)
    assert any(c.value.startswith("Large magnitude (scale=100) · ") for c in at.caption), [c.value for c in at.caption]

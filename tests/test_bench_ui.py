"""The Timing and top-k pages with the new results fields: peers with versions, device time beside event
time, failed peers, torch_lse and % of the read-once floor; strings from files shown as text in plotly."""

import json

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("streamlit")
from test_app import SMALL, arr, charts, frame, goto, make, ok  # the AppTest page helpers

from explorer import bench
from ui import figures, results, topk_timing

EVIL = "<b>GPU</b> & co"


def softmax_row(name, kind, us, version=None, device_us=None, error=None):
    return {
        "name": name,
        "kind": kind,
        "dtype": "float32",
        "acc": "float32",
        "rows": 4096,
        "cols": 4096,
        "block_size": 0,
        "median_us": None if error else us,
        "p10_us": None if error else 0.9 * us,
        "p90_us": None if error else 1.1 * us,
        "gbps": None if error else 134.0 / us,
        "pct_copy": None if error else 5000 / us,
        "bytes_moved": None if error else 134217728,
        "reads_per_element": None,
        "writes_per_element": None,
        "max_rel": 1e-7,
        "launch": "",
        "version": version,
        "error": error,
        "device_us": device_us,
        "device_p10_us": device_us,
        "device_p90_us": device_us,
        "pct_copy_device": 4800 / device_us if device_us else None,
    }


def softmax_doc(gpu=EVIL) -> dict:
    return {
        "schema": "softmax-explorer-bench/1",
        "meta": {"gpu": gpu, "cuda_runtime": "13.2", "cupy": "14.2", "date": "2026-12-01"},
        "results": [
            softmax_row("copy", "copy", 50.0, device_us=48.0),
            softmax_row("online_warp", "variant", 60.0, device_us=57.0),
            softmax_row("torch", "peer", 70.0, "2.11", 66.0),
            softmax_row("quack", "peer", 55.0, "0.6.5", 52.0),
            softmax_row("liger", "peer", 0.0, "0.8.5", error="RuntimeError: <too> long"),
        ],
    }


def test_display_names_carry_versions_and_escape_file_text():
    df = pd.DataFrame(
        [
            {"source": EVIL, "name": "<i>x</i>", "kind": "peer", "version": "1 & 2"},
            {"source": "H200", "name": "fast", "kind": "variant", "version": None},
        ]
    )
    got = results.display_names(df)
    assert list(got["name"]) == ["&lt;i&gt;x&lt;/i&gt; 1 &amp; 2", "fast"]
    assert got["source"][0] == "&lt;b&gt;GPU&lt;/b&gt; &amp; co"
    assert list(df["name"]) == ["<i>x</i>", "fast"]  # the table keeps the raw text (shown as text there)


def test_a_results_file_with_failed_peers_without_times_loads():
    doc = bench.load(json.dumps(softmax_doc()))
    assert doc["results"][-1]["median_us"] is None


def test_timing_page_shows_versions_both_times_and_failed_peers():
    at = goto(make(), "timing")
    at.file_uploader(key="bench_files").set_value(
        [("new.json", json.dumps(softmax_doc()).encode(), "application/json")]
    ).run()
    ok(at)
    t, g = charts(at)
    assert "<b>GPU" not in json.dumps(g)
    assert t["data"][0]["x"] == ["copy", "online_warp", "torch<br>2.11", "quack<br>0.6.5"]  # liger failed
    assert t["data"][0]["name"] == "&lt;b&gt;GPU&lt;/b&gt; &amp; co" and "<b>GPU" not in json.dumps(t)
    table = frame(at)
    assert {"version", "device_us", "pct_copy_device", "error"} <= set(table.columns)
    quack = table[table["name"] == "quack"].iloc[0]
    assert quack["version"] == "0.6.5" and quack["device_us"] == 52.0
    assert table[table["name"] == "liger"].iloc[0]["error"] == "RuntimeError: <too> long"
    assert any("could not be timed" in w.value for w in at.warning)


def topk_row(name, k, us, device_us=None, pct_floor=None, pct_floor_device=None, version=None):
    return {
        "name": name,
        "kind": "peer" if name.startswith("torch") else "variant",
        "dtype": "float32",
        "acc": "float32",
        "rows": 512,
        "cols": 128256,
        "block_size": 0,
        "k": k,
        "median_us": us,
        "p10_us": us,
        "p90_us": us,
        "gbps": 1.0,
        "pct_copy": None,
        "bytes_moved": 2_000_000,
        "reads_per_element": None,
        "writes_per_element": None,
        "max_rel": 1e-7,
        "launch": "",
        "version": version,
        "error": None,
        "device_us": device_us,
        "floor_us": 20.0,
        "pct_floor": pct_floor,
        "floor_device_us": 18.0 if device_us else None,
        "pct_floor_device": pct_floor_device,
    }


def topk_doc() -> dict:
    rows = [
        topk_row("topk_fused", 8, 25.0, 22.0, 80.0, 81.8),
        topk_row("topk_unfused", 8, 60.0, None, 33.3),
        topk_row("torch", 8, 100.0, 95.0, 20.0, 18.9, "2.11"),
        topk_row("torch_lse", 8, 50.0, 47.0, 40.0, 38.3, "2.11"),
    ]
    return {
        "schema": "softmax-explorer-bench/1",
        "meta": {"gpu": EVIL, "date": "2026-12-01"},
        "config": {"topk": [8]},
        "results": [{**topk_row("copy", None, 40.0), "kind": "copy"}, *rows],
    }


def test_topk_frame_keeps_torch_lse_and_the_floor():
    df = figures.topk_timing_frame({"GPU": topk_doc()})
    assert list(df["name"]) == ["topk_fused", "topk_unfused", "torch", "torch_lse"]  # the copy is not a pipeline
    table = topk_timing.topk_table(df)
    assert table.set_index("name").loc["torch_lse", "pct_floor_device"] == pytest.approx(38.3)
    assert table.set_index("name").loc["torch_lse", "speedup_vs_torch"] == pytest.approx(2.0)
    fig = figures.topk_figure(table, "t <x>", "stamp")
    bars = fig.data[0]
    assert list(bars.x) == ["topk_fused", "topk_unfused", "torch.softmax + torch.topk", "torch.topk + logsumexp"]
    assert (
        bars.text[0] == "2.0 MB<br>80% of floor<br>4.00× torch"
        and bars.text[1] == "2.0 MB<br>33% of floor<br>1.67× torch"
    )
    # the labels, full size, over each bar's p90 whisker and inside the axis; the bars keep them for their hover
    labels = fig.data[1]
    assert labels.mode == "text" and list(labels.text) == list(bars.text) and labels.offsetgroup == bars.offsetgroup
    np.testing.assert_allclose(labels.y, bars.y + bars.error_y.array)
    assert fig.layout.yaxis.range[1] > max(labels.y) * 1.2 and bars.textposition == "none"
    assert bars.name == "GPU" and fig.layout.title.text == "t &lt;x&gt;" and "event time" in fig.layout.yaxis.title.text
    device = figures.topk_figure(topk_timing.topk_table(df, "device"), "t", "stamp", "device").data[0]
    assert list(device.y) == [22.0, 95.0, 47.0]  # topk_unfused has no device time: no bar
    assert device.text[0] == "2.0 MB<br>82% of floor<br>4.32× torch"  # 95 µs of torch over 22, both device time


def test_topk_page_shows_the_floor_and_torch_lse():
    at = goto(make({"rows": "4", "cols": "100", "variants": "online_warp"}), "topk")
    at.file_uploader(key="tk_bench_files").set_value(
        [("topk.json", json.dumps(topk_doc()).encode(), "application/json")]
    ).run()
    ok(at)
    fig = charts(at)[1]
    assert fig["data"][0]["x"][-1] == "torch.topk + logsumexp"
    assert fig["data"][0]["name"] == "&lt;b&gt;GPU&lt;/b&gt; &amp; co"
    table = at.dataframe[3].value
    assert {"pct_floor", "pct_floor_device", "device_us", "version"} <= set(table.columns)


def test_topk_timing_shows_device_time_by_default_and_event_time_on_request():
    """The bundled top-k file: bars, labels and speed-ups from device time, then from event time (and in a link)."""
    at = goto(make({"rows": "4", "cols": "100", "variants": "online_warp"}), "topk")
    at.button(key="tk_bundled_button").click().run()
    at.selectbox(key="tk_tshape").set_value("512×128256 float32 top-8").run()
    ok(at)
    rows = [
        r
        for r in json.loads((results.RESULTS_DIR / "topk.json").read_text())["results"]
        if (r["rows"], r["cols"], r["dtype"], r.get("k")) == (512, 128256, "float32", 8)
    ]
    by_name = {r["name"]: r for r in rows}
    order = ["topk_fused", "topk_unfused", "torch", "torch_lse"]
    assert at.radio(key="tk_ttime").value == "device"
    bars = charts(at)[1]["data"][0]
    assert list(arr(bars["y"])) == pytest.approx([by_name[n]["device_us"] for n in order])
    speed = by_name["torch"]["device_us"] / by_name["topk_fused"]["device_us"]
    assert bars["text"][0].endswith(f"{speed:.2f}× torch") and "device time" in charts(at)[1]["layout"]["title"]["text"]
    at.radio(key="tk_ttime").set_value("event").run()
    ok(at)
    bars = charts(at)[1]["data"][0]
    assert list(arr(bars["y"])) == pytest.approx([by_name[n]["median_us"] for n in order])
    assert _query(at)["tk_ttime"] == "event"


def test_topk_speedup_takes_a_null_torch_median_and_torch_twice():
    """A file whose torch row did not time (median null, no error) or names torch twice for a shape: the speed-up is
    NaN, or against the first torch row, not an exception."""
    untimed, twice = topk_doc(), topk_doc()
    untimed["results"][3]["median_us"] = None
    twice["results"].append({**twice["results"][3], "median_us": 50.0})
    speedups = [
        topk_timing.topk_table(figures.topk_timing_frame({"GPU": doc})).set_index("name")["speedup_vs_torch"]
        for doc in (untimed, twice)
    ]
    assert speedups[0].isna().all()
    assert speedups[1]["topk_fused"] == pytest.approx(4.0)  # 100 µs of the first torch row over 25 µs


def _malformed(doc: dict, kind: str) -> str:
    """doc made malformed as `kind`, as JSON text (which may hold escapes no page can show)."""
    first = doc["results"][1]  # a pipeline row on both pages: online_warp, or topk_fused
    if kind == "surrogate_name":
        return json.dumps(doc).replace(json.dumps(first["name"]), '"\\udcff"', 1)
    first.update(
        {
            "huge_median": {"median_us": 10**300},
            "huge_rows": {"rows": 10**300},
            "huge_k": {"k": 10**30},
            "negative_median": {"median_us": -5.0},
            "nan_device": {"device_us": float("nan")},
            "infinite_gbps": {"gbps": float("inf")},
        }[kind]
    )
    return json.dumps(doc)


@pytest.mark.parametrize(
    "page, key, doc", [("timing", "bench_files", softmax_doc), ("topk", "tk_bench_files", topk_doc)]
)
@pytest.mark.parametrize(
    "kind, words",
    [
        ("surrogate_name", "not valid Unicode"),
        ("huge_median", "median_us is too large to show"),
        ("huge_rows", "rows must be below 2^31"),
        ("huge_k", "k must be below 2^31"),
        ("negative_median", "median_us must be a positive time or null, got -5.0"),  # drew a bar below zero
        ("nan_device", "device_us must be a positive time or null, got nan"),  # its bar was silently missing
        ("infinite_gbps", "gbps must be a finite number ≥ 0 or null, got inf"),
    ],
)
def test_results_files_with_values_no_table_can_hold_are_refused_with_a_reason(page, key, doc, kind, words):
    """Values that pass as JSON but no page can show (a lone surrogate, integers past int64 or 2^31): refused in
    words naming the file, not the page's "unexpected problem"."""
    at = goto(make(), page)
    good = ("good.json", json.dumps(doc()).encode(), "application/json")
    bad = (f"{kind}.json", _malformed(doc(), kind).encode(), "application/json")
    at.file_uploader(key=key).set_value([good, bad]).run()
    ok(at)
    (refusal,) = [e.value for e in at.error]
    assert f"{kind}.json" in refusal and words in refusal, refusal
    (files,) = [e for e in at.expander if "results (JSON" in e.label]  # names what loaded, not what was refused
    assert files.label.endswith(": good.json loaded"), files.label


def test_the_timing_page_leaves_top_k_results_to_the_top_k_page():
    """A top-k results file on the Timing page drew each k's run stacked into one bar per kernel (topk_fused at
    123 % of copy): top-k rows are left out, and a file of nothing else says where it is shown."""
    at = goto(make(), "timing")
    upload = [("topk.json", json.dumps(topk_doc()).encode(), "application/json")]
    at.file_uploader(key="bench_files").set_value(upload).run()
    ok(at)
    assert not charts(at) and any("Softmax + top-k page shows them" in i.value for i in at.info)
    mixed = softmax_doc()
    mixed["results"] += topk_doc()["results"]
    at.file_uploader(key="bench_files").set_value([("mixed.json", json.dumps(mixed).encode(), "application/json")])
    at.run()
    ok(at)
    left_out = sum(r["k"] is not None for r in topk_doc()["results"])  # its copy row is not counted
    assert any(f"{left_out} top-k result(s) left out" in c.value for c in at.caption) and charts(at)
    (names,) = [set(d.value["name"]) for d in at.dataframe if "name" in d.value.columns]
    assert "topk_fused" not in names and "online_warp" in names


# --- the bundled H200 results, duplicates shown once, the share image's button ----------------------------------


def _labels(at) -> list[str]:
    return [b.label for b in at.button]


def _query(at) -> dict[str, str]:
    return {k: v[-1] if isinstance(v, list) else v for k, v in at.query_params.items()}


def test_timing_page_loads_the_bundled_results_with_one_button():
    at = goto(make(), "timing")
    ok(at)
    load = next(b for b in at.button if b.key == "bench_bundled_button")
    softmax_files = [  # the shipped results without top-k rows
        p
        for p in results.RESULTS_DIR.glob("*.json")
        if all(r.get("k") is None for r in json.loads(p.read_text())["results"])
    ]
    assert load.label == f"Load the bundled NVIDIA H200 results ({len(softmax_files)} files from docs/results)"
    assert not charts(at)
    files = next(e for e in at.expander if e.label.startswith("Benchmark results"))  # open, naming nothing loaded
    assert files.label == "Benchmark results (JSON, one file per GPU)" and files.proto.expanded
    load.click().run()
    ok(at)
    files = next(e for e in at.expander if e.label.startswith("Benchmark results"))  # closed, naming what is loaded
    names = sorted(p.name for p in softmax_files)
    assert files.label.replace("\\", "") == (
        f"Benchmark results (JSON, one file per GPU): {', '.join(names[:3])} +{len(names) - 3} loaded"
    )
    assert not files.proto.expanded
    shapes = at.selectbox(key="tshape").options
    assert "4096×32768 bfloat16 acc float32" in shapes and "65536×1024 float32 acc float32" in shapes
    assert not any("top-" in s for s in shapes)  # topk.json belongs to the top-k page
    assert _query(at)["bench_bundled"] == "1"
    assert "Remove the bundled NVIDIA H200 results" in _labels(at)
    # first the shape that measured most of the sidebar's variants: the story's, one width (time and bandwidth)
    assert at.selectbox(key="tshape").value == "65536×1024 float32 acc float32" and len(charts(at)) == 2
    at.selectbox(key="tshape").set_value("4096×32768 bfloat16 acc float32").run()  # a sweep's: and across widths
    assert len(charts(at)) == 3 and "Download share image (PNG)" in [b.label for b in at.download_button]
    at.button(key="bench_bundled_button").click().run()
    ok(at)
    assert not charts(at) and "bench_bundled" not in _query(at)


def test_the_sidebars_variants_not_measured_at_the_shape_are_named_with_where_they_were():
    """A shape of the bundled results that holds fast and the peers only: the chosen variants were left out of the
    charts with no word of where they were measured."""
    at = goto(make(), "timing")
    at.button(key="bench_bundled_button").click().run()
    at.selectbox(key="tshape").set_value("4096×32768 bfloat16 acc float32").run()
    ok(at)

    def note(start):
        (text,) = [c.value.replace("\\", "") for c in at.caption if c.value.startswith(start)]
        return text

    chosen = at.multiselect(key="variants").value  # none of them at this shape
    assert "at 65536×1024 float32 acc float32" in note("None of the sidebar's variants is measured at this shape")
    at.multiselect(key="variants").set_value([*chosen, "fast"]).run()
    ok(at)
    text = note("Not measured at this shape")
    assert text.startswith(f"Not measured at this shape: {', '.join(chosen)}. Measured elsewhere in these results: ")
    assert f"{', '.join(chosen)} at 65536×1024 float32 acc float32." in text  # the variants measured together, once


def test_files_of_one_gpu_are_each_labelled_with_where_they_came_from():
    """One file of a GPU goes by the GPU's name; several of one GPU each carry their file's name (none the bare name,
    which would not say which it is); two uploads of one name and GPU are told apart by a count."""
    h200, h100 = {"meta": {"gpu": "H200"}}, {"meta": {"gpu": "H100"}}
    sources, origins = results.labelled([(h200, "a.json"), (h100, "b.json"), ({"meta": {"gpu": "H200"}}, "c.json")])
    assert origins == {"H200 (a.json)": "a.json", "H100": "b.json", "H200 (c.json)": "c.json"}
    assert sources["H100"] is h100 and sources["H200 (a.json)"] is h200
    twice = results.labelled([(h200, "a.json"), ({"meta": {"gpu": "H200"}, "results": []}, "a.json")])[1]
    assert twice == {"H200 (a.json)": "a.json", "H200 (a.json) #2": "a.json"}
    assert results.labelled([({"meta": {}}, "x.json")])[1] == {"x.json": "x.json"}  # no GPU named: the file's name


def test_a_shape_in_two_bundled_files_shows_both_by_file_with_short_labels_and_no_zero_block_size():
    """The wide step re-measures the sweep's widest shapes: both runs side by side, each named by its file; with
    several sources the bandwidth bars' labels are the bare percentage (the axis says of what); a block size of 0
    (the kernel picks its launch) shows as no value."""
    at = goto(make(), "timing")
    at.button(key="bench_bundled_button").click().run()
    at.selectbox(key="tshape").set_value("4096×32768 float32 acc float32").run()
    ok(at)
    time, bandwidth, _ = charts(at)
    assert time["layout"]["yaxis"]["type"] == "linear"  # 256-2170 µs
    names = ["NVIDIA H200 (cluster-exchange.json)", "NVIDIA H200 (sweep-fast.json)"]
    assert [d["name"] for d in time["data"]] == names == [d["name"] for d in bandwidth["data"]]
    labels = [text for d in bandwidth["data"] for text in d["text"]]
    assert labels and all(text.endswith("%") and text[:-1].isdigit() for text in labels)
    assert bandwidth["layout"]["yaxis"]["title"]["text"].endswith("labels % of copy")
    shown = frame(at)
    assert shown["block_size"].isna().all() and set(shown["source"]) == set(names)
    at.selectbox(key="tshape").set_value("65536×1024 float32 acc float32").run()  # the story's shape: one file
    ok(at)
    one = charts(at)[1]["data"]
    assert len({d["name"] for d in one}) == 1 and all(t.endswith("% of copy") for d in one for t in d["text"] if t)


def test_the_chosen_shapes_kernels_are_drawn_across_every_width_a_file_measured():
    """Across widths: the sweep's 13 widths of 2^27 fp32 elements, a line per kernel at the file's device-time % of
    copy, the chosen width circled, every other power of two ticked; the wide step's and the odd widths' files (5 and 4
    of those widths) one choice away, and in a link; a shape that no file measured at several widths (the story's)
    has no such chart."""
    at = goto(make(), "timing")
    at.button(key="bench_bundled_button").click().run()
    at.selectbox(key="tshape").set_value("4096×32768 float32 acc float32").run()
    ok(at)
    files = at.selectbox(key="twfile")
    assert files.options == [  # most widths first: 13, 5, 4 (1000, 5000, 50257, 151936)
        "NVIDIA H200 (sweep-fast.json)",
        "NVIDIA H200 (cluster-exchange.json)",
        "NVIDIA H200 (odd-widths.json)",
    ]
    assert files.value == "NVIDIA H200 (sweep-fast.json)"
    widths = charts(at)[2]
    sweep = json.loads((results.RESULTS_DIR / "sweep-fast.json").read_text())["results"]
    want = {
        r["cols"]: r["pct_copy_device"]
        for r in sweep
        if r["name"] == "fast" and r["dtype"] == "float32" and abs(r["rows"] * r["cols"] - 2**27) < 2**17
    }  # 1000 columns: 134217 rows, 728 elements short of 2^27
    fast = next(d for d in widths["data"] if d["name"] == "fast")
    assert len(want) == 13 and list(arr(fast["x"])) == sorted(want)
    assert list(arr(fast["y"])) == pytest.approx([want[c] for c in sorted(want)])
    assert {d["name"] for d in widths["data"]} == {
        "fast",
        "cupyx 14.2.0",
        "torch 2.11.0+cu130",
        "quack 0.6.5",
        "liger 0.8.5",
        "the shape above",
    }
    circled = next(d for d in widths["data"] if d["name"] == "the shape above")
    assert set(arr(circled["x"])) == {32768} and widths["layout"]["yaxis"]["title"]["text"] == "% of copy (device time)"
    assert 1000 in want and widths["layout"]["xaxis"]["tickvals"] == [128, 512, 2048, 8192, 32768, 131072]
    files.set_value("NVIDIA H200 (cluster-exchange.json)").run()
    ok(at)
    fast = next(d for d in charts(at)[2]["data"] if d["name"] == "fast")
    assert list(arr(fast["x"])) == [32768, 65536, 131072, 151936, 262144]  # 883×151936: 2^27 within 0.1 %
    again = goto(make(_query(at)), "timing")  # a link to this view shows the same file
    ok(again)
    assert again.selectbox(key="twfile").value == "NVIDIA H200 (cluster-exchange.json)" and len(charts(again)) == 3
    again.selectbox(key="tshape").set_value("65536×1024 float32 acc float32").run()
    ok(again)
    assert len(charts(again)) == 2 and not any(w.key == "twfile" for w in again.selectbox)


def test_a_shape_whose_every_result_failed_shows_the_failures_and_no_chart_across_widths():
    """A file may hold a shape where nothing could be timed (a peer alone, out of shared memory): the page says so in
    the table and the warning, and draws nothing across widths from it."""
    doc = softmax_doc("H200")
    alone = softmax_row("liger", "peer", 0.0, "0.8.5", error="RuntimeError: n = 8192 too long")
    doc["results"].append(alone | {"cols": 8192})
    at = goto(make(), "timing")
    at.file_uploader(key="bench_files").set_value([("one.json", json.dumps(doc).encode(), "application/json")]).run()
    at.selectbox(key="tshape").set_value("4096×8192 float32 acc float32").run()
    ok(at)
    assert list(frame(at)["error"]) == ["RuntimeError: n = 8192 too long"]
    assert any("could not be timed" in w.value for w in at.warning)
    assert not [h for h in at.subheader if h.value == "Across widths"]


def test_the_bars_show_device_time_where_every_result_has_it_else_event_time():
    """fp32 1×1M in the long-rows file: device time (6.5 µs, the kernel alone) by default, event time (15 µs, launch
    gaps included) one click away and in a link; GB/s and the % labels follow the time shown. A file without device
    times shows event time and says why."""
    at = goto(make(), "timing")
    at.button(key="bench_bundled_button").click().run()
    at.selectbox(key="tshape").set_value("1×1048576 float32 acc float32").run()
    ok(at)
    long_rows = json.loads((results.RESULTS_DIR / "long-rows.json").read_text())["results"]
    want = next(r for r in long_rows if r["name"] == "fast" and r["dtype"] == "float32" and r["cols"] == 2**20)
    assert at.radio(key="ttime").value == "device" and not at.radio(key="ttime").disabled

    def fast_bars():
        time, bandwidth = charts(at)[:2]
        at_fast = list(time["data"][0]["x"]).index("fast")
        return (
            arr(time["data"][0]["y"])[at_fast],
            arr(bandwidth["data"][0]["y"])[at_fast],
            bandwidth["data"][0]["text"][at_fast],
            time["layout"]["yaxis"]["title"]["text"],
        )

    us, gbps, label, axis = fast_bars()
    assert us == pytest.approx(want["device_us"]) and gbps == pytest.approx(want["gbps_device"])
    assert label == f"{want['pct_copy_device']:.0f}% of copy" and "device time" in axis
    assert charts(at)[0]["layout"]["yaxis"]["type"] == "log" and "(µs, log)" in axis  # cupyx: 356 µs
    at.radio(key="ttime").set_value("event").run()
    ok(at)
    us, gbps, label, axis = fast_bars()
    assert us == pytest.approx(want["median_us"]) and gbps == pytest.approx(want["gbps"])
    assert label == f"{want['pct_copy']:.0f}% of copy" and "event time" in axis and _query(at)["ttime"] == "event"
    assert goto(make(_query(at)), "timing").radio(key="ttime").value == "event"
    at.selectbox(key="tshape").set_value("4096×32768 float32 acc float32").run()  # across widths: event time too
    assert charts(at)[2]["layout"]["yaxis"]["title"]["text"] == "% of copy (event time)"
    plain = goto(make(), "timing")
    doc = softmax_doc("H100")
    for r in doc["results"]:
        r["device_us"] = r["device_p10_us"] = r["device_p90_us"] = r["pct_copy_device"] = None
    plain.file_uploader(key="bench_files").set_value(
        [("h100.json", json.dumps(doc).encode(), "application/json")]
    ).run()
    ok(plain)
    assert plain.radio(key="ttime").disabled and "event time" in charts(plain)[0]["layout"]["yaxis"]["title"]["text"]
    assert any("Device time is not in every result of this shape" in c.value for c in plain.caption)


def test_sweep_rows_keep_files_with_several_widths_of_the_chosen_element_count():
    def row(source, name, rows, cols, kind="variant", us=1.0):
        return {
            "source": source,
            "name": name,
            "kind": kind,
            "dtype": "float32",
            "acc": "float32",
            "rows": rows,
            "cols": cols,
            "median_us": us,
            "pct_copy": 90.0,
        }

    df = pd.DataFrame(
        [row("A", n, 2**20 // c, c) for n in ("fast", "torch") for c in (256, 1024, 4096)]  # three widths: drawn
        + [row("A", "copy", 2**20 // 256, 256, kind="copy"), row("A", "fast", 1, 2**21)]  # the copy; another count
        + [row("B", "fast", 2**20 // c, c) for c in (256, 1024)]  # two widths: not a line
        + [row("C", "fast", 2**20 // c, c) for c in (128, 256, 512, 1024)]
        + [row("C", "fast", 64, 8192, us=None)]
    )
    chosen = df[(df["source"] == "A") & (df["cols"] == 1024)]
    got = figures.sweep_rows(df, chosen)
    assert list(dict.fromkeys(got["source"])) == ["C", "A"]  # most widths first; B has two, 2^21 is another count
    assert sorted(got[got["source"] == "A"]["cols"]) == [256, 256, 1024, 1024, 4096, 4096]
    assert set(got["name"]) == {"fast", "torch"} and 8192 not in set(got["cols"])  # no copy, no untimed row


def test_the_same_results_uploaded_twice_or_bundled_are_shown_once():
    at = goto(make(), "timing")
    data = json.dumps(softmax_doc()).encode()
    at.file_uploader(key="bench_files").set_value(
        [("a.json", data, "application/json"), ("a (1).json", data, "application/json")]
    ).run()
    ok(at)
    assert [t["name"] for t in charts(at)[0]["data"]] == ["&lt;b&gt;GPU&lt;/b&gt; &amp; co"]
    assert any("a (1).json holds the same results as a.json: shown once" in c.value for c in at.caption)
    assert set(frame(at)["source"]) == {EVIL}
    # a bundled file uploaded again is shown once too
    story = (results.RESULTS_DIR / "story-all.json").read_bytes()
    at.file_uploader(key="bench_files").set_value([("copy.json", story, "application/json")]).run()
    at.button(key="bench_bundled_button").click().run()
    ok(at)
    assert any("copy.json holds the same results as story-all.json" in c.value for c in at.caption)


def test_topk_page_loads_the_bundled_results_and_a_link_restores_them():
    at = goto(make({"rows": "4", "cols": "100", "variants": "online_warp"}), "topk")
    at.button(key="tk_bundled_button").click().run()
    ok(at)
    assert "512×128256 float32 top-8" in at.selectbox(key="tk_tshape").options
    at.selectbox(key="tk_tshape").set_value("512×128256 float32 top-8").run()
    ok(at)
    fig = charts(at)[1]
    assert fig["data"][0]["name"] == "NVIDIA H200" and fig["data"][0]["x"][-1] == "torch.topk + logsumexp"
    assert "Download share image (PNG)" in [b.label for b in at.download_button]
    query = _query(at)
    assert query["tk_bundled"] == "1"
    again = goto(make(query), "topk")  # the link opened in a new session shows the same results
    ok(again)
    assert again.selectbox(key="tk_tshape").value == "512×128256 float32 top-8"
    assert charts(again)[1]["data"][0]["name"] == "NVIDIA H200"


def test_share_stamp_and_readable_table():
    from ui import share as share_ui

    doc = softmax_doc("NVIDIA H200")
    part = pd.DataFrame([{**softmax_row("fast", "variant", 1.0), "source": s} for s in ("H", "F", "H")])
    lines = results.share_stamp(part, {"H": doc, "F": {"meta": {}}}, {"H": "h.json", "F": "f.json"})
    assert lines == [
        "shape 4096×4096 · dtype float32 · accumulator float32",
        "GPU NVIDIA H200 · driver ? · CUDA 13.2 · CuPy 14.2 · 2026-12-01 · from h.json",
        "GPU ? · driver ? · CUDA ? · CuPy ? · from f.json",
    ]
    topk_part = pd.DataFrame([{**topk_row("topk_fused", 8, 1.0), "source": "H"}])
    assert (
        results.share_stamp(topk_part, {"H": doc}, {"H": "h.json"})[0]
        == "shape 512×128256 · dtype float32 · top-8 · accumulator float32"
    )
    table, formats = share_ui.readable(
        pd.DataFrame({"median_us": [1.0], "name": ["x"], "error": [None]}), results.TIME_COLUMNS
    )
    assert list(table.columns) == ["median µs", "name", "error"] and formats == {"median µs": "%.2f"}


def test_a_stamp_of_several_files_or_a_long_one_goes_under_the_axis_title():
    a, b = topk_doc(), topk_doc()
    b["meta"] = {"gpu": "A100", "cuda_runtime": "12.8", "cupy": "13.6", "date": "2025-03-01"}
    df = figures.topk_timing_frame({"A": a, "B": b, "C": topk_doc()})
    stamp = results.chart_stamp(df, {"A": a, "B": b, "C": topk_doc()})
    assert stamp.count("<br>") == 1  # the same GPU, CUDA, CuPy and date once
    fig = figures.topk_figure(topk_timing.topk_table(df), "t", stamp)
    note = next(x for x in fig.layout.annotations if x.name == "stamp")
    assert note.yshift == -50 and note.align == "right" and fig.layout.margin.b == 64 + 28
    one = results.chart_stamp(df[df["source"] == "A"], {"A": a})  # GPU, driver, CUDA, CuPy, date: too long beside it
    assert "<br>" not in one and len(one) > figures.STAMP_BESIDE_TITLE_CHARS
    fig = figures.topk_figure(topk_timing.topk_table(df), "t", one)
    assert next(x for x in fig.layout.annotations if x.name == "stamp").yshift == -50
    short = figures.topk_figure(topk_timing.topk_table(df), "t", "GPU A100 · 2025-03-01")
    assert next(x for x in short.layout.annotations if x.name == "stamp").yshift == -28  # beside the title


LINK = "[c](http://x.io)"


@pytest.mark.parametrize("page, key", [("timing", "bench_files"), ("topk", "tk_bench_files")])
def test_names_and_values_from_a_results_file_are_shown_as_text_not_as_links(page, key):
    """Streamlit renders Markdown in st.error and st.caption: a file's name, and a value the refusal quotes,
    must show as typed there, with no link made of them."""
    from test_sidebar import plain, shows

    bad = softmax_doc()
    bad["results"][0]["rows"] = LINK
    good = json.dumps(softmax_doc()).encode()
    at = goto(make(), page)
    at.file_uploader(key=key).set_value(
        [
            (f"{LINK}.json", json.dumps(bad).encode(), "application/json"),
            ("www.x.io.json", good, "application/json"),
            (f"{LINK} *again*.json", good, "application/json"),
        ]
    ).run()
    ok(at)
    (refusal,) = [e.value for e in at.error]
    assert shows(refusal) == f"{LINK}.json: a result's rows must be a whole number, got '{LINK}'" and plain(refusal)
    (once,) = [c.value for c in at.caption if "holds the same results" in c.value]
    assert shows(once) == f"{LINK} *again*.json holds the same results as www.x.io.json: shown once." and plain(once)


@pytest.mark.parametrize(
    ("page", "query", "words"),
    [
        ("timing", {"bench_bundled": "1", "tshape": "bogus"}, "Shape and dtype “bogus” is not offered here"),
        ("topk", {"tk_bundled": "1", "tk_tshape": "bogus"}, "Measured shape, dtype and k “bogus” is not offered here"),
    ],
)
def test_a_shared_link_to_a_shape_the_results_lack_says_which_is_shown(page, query, words):
    at = goto(make({**SMALL, **query}), page)
    ok(at)
    assert any(words in t.value for t in at.toast), [t.value for t in at.toast]


def test_the_timing_table_leads_with_the_kernel_and_its_times():
    """At 1000 px the table shows about six columns: they were source, name, version, kind, block size and the
    median, and every device time and % of copy lay beyond the right edge."""
    at = goto(make(), "timing")
    at.button(key="bench_bundled_button").click().run()
    ok(at)
    (table,) = [d.value for d in at.dataframe if "name" in d.value.columns]
    assert list(table.columns[:6]) == ["name", "version", "device_us", "pct_copy_device", "median_us", "pct_copy"]


def test_the_timing_share_image_holds_the_device_times_its_bars_draw(monkeypatch):
    """The bars show device time by default: the image's table has device time's spread and GB/s beside event time's,
    and names the file only where several files hold the shape."""
    from ui.pages import timing

    tables = []
    monkeypatch.setattr(timing, "share_button", lambda key, slug, title, charts, table, *rest: tables.append(table))
    at = goto(make(), "timing")
    at.button(key="bench_bundled_button").click().run()
    ok(at)
    columns = list(tables[-1].columns)
    assert columns[:7] == [
        "name",
        "version",
        "device_us",
        "device_p10_us",
        "device_p90_us",
        "gbps_device",
        "pct_copy_device",
    ]
    assert "median_us" in columns and "gbps" in columns  # event time after
    at.selectbox(key="tshape").set_value("4096×32768 float32 acc float32").run()  # in the sweep and the wide step
    assert list(tables[-1].columns[:2]) == ["name", "source"]  # as the page's table

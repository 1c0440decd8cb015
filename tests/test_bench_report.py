"""scripts/bench_report.py on synthetic results documents: targets met / not met / not measured from device
time where rows have it, per-kernel tables with peer versions, the SVG plot, and text from files escaped."""

import importlib.util
import inspect
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from explorer import bench

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("bench_report", ROOT / "scripts" / "bench_report.py")
report_mod = importlib.util.module_from_spec(spec)
sys.modules["bench_report"] = report_mod  # dataclasses look their module up there
spec.loader.exec_module(report_mod)


def row(
    name,
    dtype,
    rows,
    cols,
    us,
    copy_us,
    device_us=None,
    copy_device_us=None,
    kind="variant",
    version=None,
    k=None,
    error=None,
):
    r = {
        "name": name,
        "kind": kind,
        "dtype": dtype,
        "acc": "float32",
        "rows": rows,
        "cols": cols,
        "block_size": 0,
        "median_us": us,
        "p10_us": us,
        "p90_us": us,
        "gbps": 1.0,
        "pct_copy": 100 * copy_us / us,
        "bytes_moved": 1,
        "reads_per_element": None,
        "writes_per_element": None,
        "max_rel": 1e-7,
        "launch": "",
        "version": version,
        "error": error,
        "device_us": device_us,
        "pct_copy_device": 100 * copy_device_us / device_us if device_us else None,
    }
    if k is not None:
        r.update(
            k=k,
            pct_copy=None,
            floor_us=copy_us / 2,
            pct_floor=100 * copy_us / 2 / us,
            floor_device_us=copy_device_us / 2 if copy_device_us else None,
            pct_floor_device=100 * copy_device_us / 2 / device_us if device_us else None,
        )
    return r


def softmax_doc(fast_event_pct=99.0, slow_cols=4096):
    """fast at 95 % of copy in device time (fast_event_pct in event time) except 90 % at slow_cols; QuACK
    1.02× slower; a peer with markup in its name and a failed peer."""
    results = []
    for dtype in ("float32", "bfloat16", "float16"):
        for rows, cols in bench.sweep_shapes("cols"):
            dev = 100.0 / (0.90 if cols == slow_cols else 0.95)
            results += [
                row("copy", dtype, rows, cols, 100.0, 100.0, 100.0, 100.0, kind="copy"),
                row("fast", dtype, rows, cols, 100 / fast_event_pct * 100, 100.0, dev, 100.0),
                row("quack", dtype, rows, cols, 110.0, 100.0, dev * 1.02, 100.0, "peer", "0.6.5"),
            ]
    results.append(row("<b>evil&", "float32", 1024, 131072, 200.0, 100.0, kind="peer", version="<i>1</i>"))
    results.append(
        {
            **row("liger", "float32", 1, 2**24, 1.0, 1.0, kind="peer", version="0.8.5"),
            "median_us": None,
            "error": "RuntimeError: out of <shared> memory | too long",
        }
    )
    return {
        "schema": bench.SCHEMA,
        "meta": {
            "gpu": "FAKE H200",
            "cuda_runtime": "13.2",
            "cupy": "14.2",
            "torch": "2.11",
            "date": "2026-12-01T00:00:00",
            "device_time": "torch.profiler",
        },
        "config": {"variants": ["fast"]},
        "results": results,
    }


def topk_doc():
    results = []
    for rows, cols in bench.TOPK_SHAPES:
        results.append(row("copy", "float32", rows, cols, 40.0, 40.0, 30.0, 30.0, kind="copy"))
        for k in (1, 8, 50):
            results.append(row("topk_fused", "float32", rows, cols, 30.0, 40.0, 5.0 if rows == 1 else 19.0, 30.0, k=k))
            results.append(row("torch_lse", "float32", rows, cols, 90.0, 40.0, 60.0, 30.0, "peer", "2.11", k=k))
    return {"schema": bench.SCHEMA, "meta": {"gpu": "FAKE H200"}, "config": {"topk": [1, 8, 50]}, "results": results}


def checks(docs) -> dict[str, report_mod.Check]:
    return {c.target: c for c in report_mod.targets(report_mod.collect(docs))}


def find(got: dict, start: str) -> report_mod.Check:
    return next(c for t, c in got.items() if t.startswith(start))


def test_targets_use_device_time_and_say_so():
    got = checks([("sweep.json", bench.load(softmax_doc())), ("topk.json", bench.load(topk_doc()))])
    fp32 = find(got, "`fast` ≥ 93 % of copy, cols 128 … 262144 at 2²⁷ elements, float32")
    assert fp32.status == "not met" and "12 of 13 pass (device time)" in fp32.measured and "4096 90.0%" in fp32.measured
    assert find(got, "`fast` ≥ 0.97× QuACK on each").status == "met"
    geo = find(got, "`fast` ≥ 1.0× QuACK, geometric mean")
    assert geo.status == "met" and "1.02×" in geo.measured
    assert find(got, "`fast` ≥ 85 % of copy at odd widths").status == "not measured"  # 1000 only: the others missing
    assert find(got, "`fast` ≥ 60 % of copy on 1×1M").status == "not measured"
    assert find(got, "top-k (fused, fp32), batch ≥ 512").status == "met"  # 15 / 19 = 79 % of the floor in device time
    assert find(got, "top-k, batch ≥ 512, k = 50").status == "met"
    assert find(got, "top-k 4096×128256 k=8").status == "met"
    assert find(got, "top-k batch 1").status == "met" and "(device time)" in find(got, "top-k batch 1").measured
    assert find(got, "top-k batch 64, k = 1").status == "met"


FP32_SWEEP = "`fast` ≥ 93 % of copy, cols 128 … 262144 at 2²⁷ elements, float32"


def test_event_time_is_used_and_labelled_without_device_time():
    doc = softmax_doc(fast_event_pct=99.0)
    del doc["meta"]["device_time"]  # a file made without torch: event time only
    for r in doc["results"]:
        r["device_us"] = r["pct_copy_device"] = None
    fp32 = find(checks([("old.json", doc)]), FP32_SWEEP)
    assert fp32.status == "met" and "(event time)" in fp32.measured and "worst" in fp32.measured


def test_a_profiled_file_row_without_device_time_is_not_measured_rather_than_met_on_event_time():
    doc = softmax_doc(fast_event_pct=99.0, slow_cols=0)  # every shape at 95 % of copy in device time
    missing = next(r for r in doc["results"] if r["name"] == "fast" and r["dtype"] == "float32")
    missing["device_us"] = missing["pct_copy_device"] = None  # the profiler lost this row's batches
    fp32 = find(checks([("sweep.json", doc)]), FP32_SWEEP)
    assert fp32.status == "not measured" and "1 not measured" in fp32.measured


def test_nothing_measured_is_not_measured():
    got = checks([])
    assert {c.status for c in got.values()} == {"not measured"}


def test_report_has_versions_tables_plots_and_escapes_file_text(tmp_path):
    docs = [("sweep.json", bench.load(softmax_doc())), ("topk.json", bench.load(topk_doc()))]
    markdown, plots = report_mod.report(docs)
    assert set(plots) == {"bench-pct-copy-float32.svg", "bench-pct-copy-bfloat16.svg", "bench-pct-copy-float16.svg"}
    assert "| quack 0.6.5 |" in markdown and "| torch_lse 2.11 |" in markdown
    assert "| 101.0 (99%) · dev 105.3 (95%) |" in markdown  # event µs (% of copy) · dev: device µs (%)
    assert "<b>" not in markdown and "&lt;b&gt;evil&amp; &lt;i&gt;1&lt;/i&gt;" in markdown
    assert "error: RuntimeError: out of &lt;shared&gt; memory &#124; too long" in markdown
    assert "## Targets" in markdown and "| **met** |" in markdown and "| not met |" in markdown
    svg = plots["bench-pct-copy-float32.svg"]
    tree = ET.fromstring(svg)  # well-formed even with markup in a kernel's name
    labels = [t.text for t in tree.iter("{http://www.w3.org/2000/svg}text")]
    assert "fast (device)" in labels and "quack 0.6.5 (device)" in labels and "<b>evil& <i>1</i> (event)" in labels


def test_main_writes_the_doc_and_plots_into_a_new_folder(tmp_path, monkeypatch):
    sweep = tmp_path / "sweep.json"
    sweep.write_text(bench.dumps(softmax_doc()))
    old = ROOT / "docs" / "results" / "topk.json"
    out = tmp_path / "new" / "docs"
    monkeypatch.setattr("sys.argv", ["bench_report.py", str(sweep), str(old), "--out", str(out)])
    report_mod.main()
    text = (out / "benchmarks.md").read_text()
    assert "`topk.json`" in text and "![bench-pct-copy-float32.svg](bench-pct-copy-float32.svg)" in text
    assert (out / "bench-pct-copy-bfloat16.svg").exists()


@pytest.mark.parametrize("value", ["<script>", "a|b", "x & y"])
def test_esc_never_leaves_markup_or_cell_breaks(value):
    out = report_mod.esc(value)
    assert "<" not in out and "|" not in out and ("&" not in value or "&amp;" in out)


@pytest.mark.parametrize(
    "value, unit, target, expected",
    [
        (92.96, "%", 93, "92.96%"),  # 93.0 % would read as met
        (0.9994, "×", 1.0, "0.999×"),
        (0.9649, "×", 0.97, "0.96×"),  # already below at two decimals
        (93.04, "%", 93, "93.0%"),
        (93.0, "%", 93, "93.0%"),
    ],
)
def test_a_shown_figure_is_on_the_same_side_of_its_target(value, unit, target, expected):
    text = report_mod.shown(value, unit, lambda v: v >= target)
    assert text == expected
    assert (float(text.rstrip(unit)) >= target) == (value >= target)


def test_an_event_time_whose_spread_is_wide_is_marked_and_the_mark_explained():
    """long-rows.json of 2026-12-04: the first shape's copy took 41.9 µs of event time (p10 20.8, p90 48.5) against a
    device time of 3.5, which made fast's event-time cell read 236 % of copy."""
    steady = {"median_us": 10.6, "p10_us": 10.2, "p90_us": 11.0, "pct_copy": 100.0}
    hiccup = {"median_us": 41.9, "p10_us": 20.8, "p90_us": 48.5, "pct_copy": 100.0}
    assert report_mod.cell(steady, "pct_copy") == "10.6 (100%)"
    assert report_mod.cell(hiccup, "pct_copy") == "41.9‡ (100%)"
    assert "‡: that row's event times spread over more than 1.5×" in report_mod.report([("x", softmax_doc())])[0]


def test_method_gives_the_harness_own_counts():
    """The Method's launch and batch counts are the harness's: time_launches' defaults and devicetime's batches,
    whose cap on calls makes a batch of a short kernel shorter than the time aimed at."""
    from explorer import devicetime, harness

    timing = inspect.signature(harness.time_launches).parameters
    method = " ".join(report_mod.METHOD.split())
    assert f"about {timing['budget_s'].default:g} s" in method
    assert f"from {timing['min_repeats'].default} to {timing['max_repeats'].default}" in method
    assert f"{devicetime.BATCHES} batches of calls" in method
    assert f"at most {devicetime.MAX_CALLS} calls" in method
    assert f"under {devicetime.BATCH_US / devicetime.MAX_CALLS:g} µs" in method


def test_kernel_order_puts_copy_first_and_the_peers_last_in_the_peers_order():
    names = ["liger", "fast", "copy", "torch", "online_warp", "cupyx", "quack"]
    assert report_mod.kernel_order(names) == ["copy", "fast", "online_warp", "cupyx", "torch", "quack", "liger"]
    assert report_mod.kernel_order(["torch_lse", "topk_fused", "torch"]) == ["topk_fused", "torch", "torch_lse"]

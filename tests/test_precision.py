"""The precision lab: measured errors of the online denominator against the 3·n·u bound, stagnation,
overflow, tree variants, the bit-level view, its figures and its page (emulator; one GPU test)."""

import dataclasses
import math

import numpy as np
import pytest

import explorer
from explorer import numerics, precision

ALL_NS = precision.powers_of_two(4, 11)


@pytest.fixture(scope="module")
def records() -> list[precision.Measurement]:
    """Every online variant × accumulator × input class at n = 2^4 .. 2^11 (about 3 s on the emulator)."""
    return precision.sweep(ns=ALL_NS, backend="emulator")


def outside(records: list[precision.Measurement]) -> list[precision.Measurement]:
    return [r for r in records if r.bound_applies and (r.d_rel_error > r.d_bound or r.out_max_rel > r.bound)]


# --- the bound ------------------------------------------------------------------------------------------


def terms(variant: str, rows: int, cols: int, block_size: int | None = None) -> int:
    return numerics.sequential_terms(explorer.VARIANTS[variant].launch(rows, cols, block_size), cols)


def test_sequential_terms_follow_the_launch():
    assert terms("online_thread", 1, 1000) == 1000
    assert terms("online_warp", 1, 1000) == math.ceil(1000 / 32) + 5
    assert terms("online_block", 1, 1000) == math.ceil(1000 / 256) + 8
    assert terms("online_block", 1, 1000, block_size=64) == math.ceil(1000 / 64) + 6
    assert terms("online_block", 1, 1000, block_size=96) == math.ceil(1000 / 96) + 7  # 3 warps: 5 + 2 levels
    # split_row on 8 × 100000: 66 chunks of 256 threads, 6 elements each, 8 levels per block, 65 chunk merges
    assert terms("split_row", 8, 100_000) == 6 + 8 + 65
    assert precision.lane_steps("online_thread", 2**20) == 2**20
    assert precision.lane_steps("online_warp", 2**20) == 2**15


def test_softmax_bound_adds_the_input_rounding_term():
    x = precision.make_class_input("decreasing", 1000)
    launch = explorer.VARIANTS["online_warp"].launch(1, 1000)
    assert numerics.softmax_bound(launch, x, "float32") == explorer.error_bound(32 + 5, "float32", "float32")
    assert numerics.input_rounding(x, "float16") == 1.0  # x from 0 down to -1, not all exact in fp16
    assert numerics.softmax_bound(launch, x, "float16") == explorer.error_bound(32 + 5, "float16", "float32", 1.0)
    integers = np.arange(-64, 7, dtype=np.float32).reshape(1, -1)
    assert numerics.input_rounding(integers, "bfloat16") == 0.0


def test_record_fields_and_bound(records):
    r = next(r for r in records if (r.variant, r.acc, r.dist, r.n) == ("online_warp", "float16", "normal", 256))
    assert r.backend == "emulator" and r.dtype == "float32"
    assert r.sequential_terms == 8 + 5
    assert r.bound == pytest.approx(explorer.error_bound(13, "float16", "float32", r.max_abs_x))
    assert r.d_bound == pytest.approx(r.bound - 2.0**-24)
    assert len(records) == 3 * 3 * 4 * len(ALL_NS)


def test_measured_errors_stay_within_the_bound_where_it_applies(records):
    applies = [r for r in records if r.bound_applies]
    assert len(applies) > 250  # the bound says something for most of the sweep
    assert outside(records) == []
    # and the errors are real: fp16 and bf16 accumulators do lose accuracy on these rows
    assert max(r.d_rel_error for r in applies if r.acc == "float16") > 1e-4
    assert max(r.d_rel_error for r in applies if r.acc == "bfloat16") > 1e-3


def test_fp32_accumulator_is_exact_to_fp32_on_every_class(records):
    for r in records:
        if r.acc == "float32":
            assert r.d_rel_error < 1e-5 and not r.overflow and r.stagnated_at is None


def test_mixed_precision_fp16_out_fp32_acc_keeps_the_output_bound():
    """d in fp32, x and y in fp16: 3·n·u32 + u16, even where an fp16 d is already far off."""
    recs = precision.sweep(
        ["online_warp", "online_block"],
        ["float32", "float16"],
        ["decreasing", "normal"],
        precision.powers_of_two(10, 16),
        backend="emulator",
        dtype="float16",
    )
    for r in recs:
        if r.acc == "float32":
            assert r.bound_applies and r.out_max_rel <= r.bound
            assert r.out_max_rel < 4 * 2.0**-11
    worst16 = max(r.out_max_rel for r in recs if r.acc == "float16")
    assert worst16 > 0.1  # fp16 d: the warp variant's lanes stagnate at 2^16


# --- what the bound does not say -------------------------------------------------------------------------


def test_fp16_constant_input_stagnates_at_2048():
    t = precision.d_trajectory("online_thread", "float16", "constant", 4096, backend="emulator")
    d, exact = t.d, t.exact_d
    np.testing.assert_array_equal(exact, np.arange(1, 4097))
    np.testing.assert_array_equal(d[:2048], np.arange(1, 2049))  # exact up to 2048 ...
    assert (d[2047:] == 2048).all()  # ... then every term (exactly 1) rounds away
    assert t.stagnated_at == 2048
    r = precision.measure("online_thread", "float16", "constant", 4096, backend="emulator")
    assert r.d == 2048 and r.exact_d == 4096 and r.d_rel_error == 0.5
    assert r.out_max_rel == pytest.approx(1.0)  # every output twice too large
    assert not r.bound_applies  # 3·n·u = 6: the bound says nothing here


def test_bf16_stagnates_at_256_and_fp32_does_not():
    bf = precision.d_trajectory("online_thread", "bfloat16", "constant", 1024, backend="emulator")
    assert bf.stagnated_at == 256 and (bf.d[255:] == 256).all()
    f32 = precision.d_trajectory("online_thread", "float32", "constant", 1024, backend="emulator")
    assert f32.stagnated_at is None
    np.testing.assert_array_equal(f32.d, f32.exact_d)


def test_stagnation_on_decreasing_input_starts_below_2048():
    """Terms below 0.5 are lost from d = 1024 on (spacing 1): a decreasing row freezes before 2048."""
    t = precision.d_trajectory("online_thread", "float16", "decreasing", 8192, backend="emulator")
    assert t.stagnated_at is not None
    assert 1024 <= t.d[-1] <= 2048 < t.exact_d[-1]


def test_one_fp16_thread_cannot_overflow():
    """d > 65504 needs more than 65504 terms <= 1 summed without stagnation: one thread stops at 2048."""
    r = precision.measure("online_thread", "float16", "constant", 70_000, backend="emulator")
    assert r.exact_d == 70_000 > explorer.FORMATS["float16"].max_value
    assert r.d == 2048 and not r.overflow


def test_fp16_merge_trees_overflow_past_65504():
    below = precision.measure("online_warp", "float16", "constant", 2**15, backend="emulator")
    assert below.d == 2**15 and not below.overflow
    for variant in ("online_warp", "online_block"):
        r = precision.measure(variant, "float16", "constant", 2**16, backend="emulator")
        assert r.overflow and r.d == math.inf and r.d_rel_error == math.inf
        assert r.out_max_rel == 1.0  # every output e^0 / inf = 0
        assert not r.bound_applies  # the bound assumes nothing overflows
    bf = precision.measure("online_block", "bfloat16", "constant", 2**16, backend="emulator")
    assert not bf.overflow  # bf16 has fp32's exponent range


def test_block_overflows_once_the_true_d_passes_65504():
    """Decreasing row (d_n ≈ 0.63 n): no overflow at 2^16 (d ≈ 41427), inf at 2^17 (d ≈ 82853)."""
    assert not precision.measure("online_block", "float16", "decreasing", 2**16, backend="emulator").overflow
    r = precision.measure("online_block", "float16", "decreasing", 2**17, backend="emulator")
    assert r.overflow and r.exact_d > 65504


@pytest.mark.parametrize("acc, n", [("float16", 4096), ("bfloat16", 1024)])
def test_warp_and_block_cut_the_error_on_decreasing_input(acc, n):
    err = {
        v: precision.measure(v, acc, "decreasing", n, backend="emulator").d_rel_error for v in precision.ONLINE_VARIANTS
    }
    assert err["online_thread"] > 0.1
    assert err["online_warp"] < err["online_thread"] / 10
    assert err["online_block"] < err["online_thread"] / 10


def test_bf16_error_exceeds_fp16_error_on_decreasing_input(records):
    for v in precision.ONLINE_VARIANTS:
        worst = {
            acc: max(
                r.d_rel_error for r in records if (r.variant, r.acc, r.dist) == (v, acc, "decreasing") and r.n >= 256
            )
            for acc in precision.ACCUMULATORS
        }
        assert worst["bfloat16"] > worst["float16"] > worst["float32"], v
    thread = {
        r.acc: r.d_rel_error for r in records if (r.variant, r.dist, r.n) == ("online_thread", "decreasing", 1024)
    }
    assert thread["bfloat16"] > 10 * thread["float16"]


def test_sweep_cap_leaves_out_long_lanes():
    recs = precision.sweep(
        ["online_thread", "online_block"],
        ["float32"],
        ["constant"],
        [2**10, 2**14],
        backend="emulator",
        max_lane_steps=2**12,
    )
    assert [(r.variant, r.n) for r in recs] == [
        ("online_thread", 1024),
        ("online_block", 1024),
        ("online_block", 2**14),
    ]


# --- bits -----------------------------------------------------------------------------------------------


def test_float_bits_of_each_format():
    b = precision.float_bits(2048.0, "float16")
    assert (b.sign, b.exponent, b.mantissa) == ("0", "11010", "0" * 10)  # 11 + bias 15 = 26
    assert b.exponent_value == 11 and b.kind == "normal"
    b = precision.float_bits(-1.5, "bfloat16")
    assert (b.sign, b.exponent, b.mantissa) == ("1", "01111111", "1000000")
    b = precision.float_bits(1.0 + 2**-23, "float32")
    assert b.mantissa == "0" * 22 + "1"
    assert precision.float_bits(2049.0, "float16").value == 2048.0  # ties to even
    assert precision.float_bits(70000.0, "float16").kind == "inf"
    assert precision.float_bits(2.0**-20, "float16").kind == "subnormal"
    assert precision.float_bits(0.0, "float16").kind == "zero"


def test_bit_at_and_ulp():
    assert [precision.bit_at(5.0, k) for k in (2, 1, 0)] == [1, 0, 1]
    assert precision.bit_at(0.75, -1) == 1 and precision.bit_at(0.75, -2) == 1 and precision.bit_at(0.75, -3) == 0
    assert numerics.ulp_exponent(2048.0, explorer.FORMATS["float16"]) == 1
    assert numerics.ulp_exponent(1.0, explorer.FORMATS["bfloat16"]) == -7
    assert precision.aligned_bits({"a": 6.0}, 2, 0) == {"a": [1, 1, 0]}


def test_update_parts_reproduce_the_traced_steps():
    x = precision.make_class_input("increasing", 3000)
    t = explorer.softmax(x, "online_thread", acc="float16", backend="emulator", trace_row=0).trace
    for j in (1, 7, 100, 1500, 2999):
        parts = precision.update_parts(t.m[0, j - 1], t.d[0, j - 1], t.m[0, j], t.x[t.index[0, j]], "float16")
        assert parts.d == t.d[0, j], j
    parts = precision.update_parts(0.0, 2048.0, 0.0, 0.0, "float16")  # the stagnating step
    assert (parts.product, parts.term, parts.sum, parts.d) == (2048.0, 1.0, 2049.0, 2048.0)


def test_update_parts_flush_a_subnormal_term_as_the_kernel_does():
    # e^-100 is below fp32's smallest normal: -ftz makes the kernel's term 0, and the bits table must show that
    parts = precision.update_parts(0.0, 1.0, 0.0, -100.0, "float32")
    assert (parts.term, parts.d) == (0.0, 1.0)
    assert precision.float_bits(parts.term, "float32").kind == "zero"


def test_bits_html_greys_the_lost_place():
    from ui import figures as page

    parts = precision.update_parts(0.0, 2048.0, 0.0, 0.0, "float16")
    html = page.bits_html(parts, "float16", 2048.0, 2049.0)
    assert "exponent (5 bits)" in html and "mantissa (10 bits)" in html
    assert "2<sup>1</sup>" in html  # d_j's last fp16 place
    assert "border-left:2px solid #d62728" in html and "#e6e6e6" in html


# --- figures --------------------------------------------------------------------------------------------


def test_error_vs_n_figure(records):
    from ui import figures as page

    fig = page.error_vs_n_figure(records, "online_thread", "d", "title", "stamp")
    assert [a.text for a in fig.layout.annotations][:3] == [
        "accumulator float16 (u = 2<sup>-11</sup>)",
        "accumulator bfloat16 (u = 2<sup>-8</sup>)",
        "accumulator float32 (u = 2<sup>-24</sup>)",
    ]
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    bounds = [t for t in fig.data if t.line.dash == "dash"]
    assert len(bounds) == 3 and all(max(t.y) < 1 for t in bounds)
    fp16 = next(t for t in bounds if t.xaxis == "x")
    assert fp16.y[0] == pytest.approx(3 * 16 * 2.0**-11)
    names = {t.name for t in fig.data}
    assert {"monotone decreasing", "monotone increasing", "random normal", "constant"} <= names


def test_overflow_and_stagnation_figures():
    from ui import figures as page

    recs = [
        precision.measure(v, "float16", "constant", n, backend="emulator")
        for v in ("online_warp",)
        for n in (2**15, 2**16)
    ]
    fig = page.overflow_figure(recs, "t", "s")
    warp = next(t for t in fig.data if t.name == "online_warp")
    assert list(warp.marker.symbol) == ["circle", "x"]
    longer = page.overflow_figure([*recs, dataclasses.replace(recs[-1], n=2**18)], "t", "s")
    warp = next(t for t in longer.data if t.name == "online_warp")
    exact = next(t for t in longer.data if t.name == "exact d_n = n")
    assert warp.y[-1] > 2 * max(exact.y)  # inf is drawn above the exact line's end (it was drawn where 2^18 ends)
    traj = [precision.d_trajectory("online_thread", "float16", "constant", 4096, backend="emulator")]
    fig = page.stagnation_figure(traj, "t", "s")
    assert any("frozen at 2048" in (t.text or [""])[0] for t in fig.data if t.mode == "markers+text")


# --- the page -------------------------------------------------------------------------------------------


def test_precision_page():
    from test_app import charts, goto, make, ok

    at = make({"rows": "2", "cols": "50"})
    at.session_state["prec_max"] = 7
    at.session_state["prec_stag_n"] = 4096
    goto(at, "precision")
    ok(at)
    assert at.title[0].value == "Precision lab"
    figs = charts(at)
    assert len(figs) == 5
    assert figs[0]["layout"]["title"]["text"].startswith("online_thread: relative error of final denominator")
    captions = " ".join(c.value for c in at.caption)
    assert "lie within it" in captions and "float16 at d = 2048 from j = 2,048" in captions
    texts = " ".join(m.value for m in at.markdown)
    assert "Stagnation" in texts and "Overflow past 65504" in texts and "bf16's far coarser u" in texts
    assert "Warp and block variants" in texts
    words = " ".join([texts, captions, *(h.value for h in at.subheader)])
    assert "the 3·n·u bound" in words and "seed's" not in words  # "seed" is the sidebar's random seed, nothing else
    shown = [e for e in at.main if e.type in ("caption", "markdown")]  # in page order
    ran = next(i for i, e in enumerate(shown) if "runs of the CPU emulation" in str(e.value))
    intro = next(i for i, e in enumerate(shown) if "A textbook rounding analysis" in str(e.value))
    assert ran < intro  # the runs' progress and count under the controls, above the long introduction
    within = next(c.value for c in at.caption if "lie within it" in c.value)
    got, total = (int(s) for s in within.split("below 1, ")[1].split(" measured")[0].split(" of "))
    assert got == total > 0
    at.radio(key="prec_quantity").set_value("out").run()
    at.selectbox(key="prec_variant").set_value("online_block").run()
    at.selectbox(key="prec_cmp_acc").set_value("bfloat16").run()
    assert "the numbers beside the chart are the constant row's" not in " ".join(c.value for c in at.caption)
    at.radio(key="prec_stag_dist").set_value("decreasing").run()
    ok(at)
    stagnation = next(c.value for c in at.caption if c.value.startswith("Frozen:"))
    assert "This monotone decreasing row's exact d_n is" in stagnation and "are the constant row's" in stagnation
    assert "online_block: relative error of outputs" in charts(at)[0]["layout"]["title"]["text"]
    assert "acc bfloat16" in charts(at)[4]["layout"]["title"]["text"]
    assert len(at.dataframe[0].value) == 3 * 3 * 4 * 4  # 3 variants, 3 accumulators, 4 inputs, n = 2^4 .. 2^7
    at.multiselect(key="prec_variants").set_value([]).run()
    ok(at)
    assert any("Select at least one variant" in i.value for i in at.info)
    at.multiselect(key="prec_variants").set_value(["online_warp"]).run()
    goto(at, "outputs")
    goto(at, "precision")  # settings survive a visit to another page
    ok(at)
    assert at.radio(key="prec_quantity").value == "out"
    assert at.multiselect(key="prec_variants").value == ["online_warp"]
    assert at.selectbox(key="prec_variant").value == "online_warp"


# The lab tests below start with nothing kept (only what still has to run counts against the time budget):
# 24 points (one variant, 3 accumulators, 4 inputs, n = 16 and 32) and 3 stagnation traces of 2048.
LAB = {"prec_max": 5, "prec_dtype": "bfloat16", "prec_variants": ["online_warp"], "prec_stag_n": 2048}


def lab_app():
    """The app, on the emulator, set to LAB with the lab's kept runs forgotten; not yet on the lab's page."""
    from test_app import make

    from ui import keep, lab_runs

    lab_runs.kept_point.clear()
    keep.KEPT.clear()
    at = make({"rows": "2", "cols": "50"})
    for key, value in LAB.items():
        at.session_state[key] = value
    return at


def warnings(at) -> str:
    return " ".join(str(w.value) for w in at.warning)


def test_the_lab_refuses_points_over_the_time_budget_the_same_way_twice_and_runs_them_once_confirmed(monkeypatch):
    from test_app import charts, goto, ok

    from explorer import budget

    monkeypatch.setenv("EXPLORER_BACKEND", "emulator")
    monkeypatch.setenv(budget.TIME_SETTING, "0.000001")  # every run is over it, whatever the machine
    at = goto(lab_app(), "precision")
    ok(at)
    first = warnings(at)
    assert "Not run yet: 24 points would take about" in first and "in the CPU emulation" in first
    assert "over this server's budget" in first and "Lower the largest n" in first
    assert not charts(at) and at.select_slider(key="prec_max").value == 5  # the controls stay to change it
    ok(at.run())
    assert warnings(at) == first and not charts(at)  # the same answer twice: nothing ran
    ok(at.button(key="lab_points_anyway").click().run())
    assert len(charts(at)) == 4 and len(at.dataframe[0].value) == 24  # every point; the stagnation asks apart
    assert "Not run yet: 3 traces would take about" in warnings(at) and "shorter stagnation row" in warnings(at)
    ok(at.button(key="lab_stagnation_anyway").click().run())
    assert len(charts(at)) == 5 and "Not run yet" not in warnings(at)
    at.session_state["prec_max"] = 4
    ok(at.run())  # fewer points, every one kept: nothing left to ask about
    assert len(charts(at)) == 5 and "Not run yet" not in warnings(at)


def test_the_lab_shows_progress_per_point_and_stops_between_points(monkeypatch):
    from test_app import charts, goto, ok

    from explorer import budget
    from ui import run_control

    monkeypatch.setenv("EXPLORER_BACKEND", "emulator")
    monkeypatch.setattr(run_control, "PROGRESS_SECONDS", 0.0)  # show the progress area for these small points
    at = lab_app()
    ticks = iter(range(0, 10**6, 100))  # each look at the clock is 100 s later: past 3 × 60 s at the second point
    monkeypatch.setattr(run_control, "clock", lambda: next(ticks))
    ok(goto(at, "precision"))
    words = warnings(at)
    assert "Stopped after" in words and "passed 3× its time budget of 60 s" in words
    assert "The points that finished are kept" in words and not charts(at) and not at.get("progress")
    monkeypatch.setenv(budget.TIME_SETTING, "0.000001")
    ok(at.button(key="lab_points_again").click().run())
    assert "Not run yet: 23 points" in warnings(at)  # the one point measured before the stop is kept
    monkeypatch.setattr(run_control, "clock", lambda: 0.0)  # time stands still: nothing overruns
    monkeypatch.setattr(run_control.Progress, "close", lambda self: None)  # keep the area, to read its last words
    ok(at.button(key="lab_points_anyway").click().run())
    bar = at.get("progress")[0].proto
    assert "Running online_warp, acc float32, constant, n = 32 (23 of 23)" in bar.text  # drawn as each point starts
    assert 0 < bar.value < 100 and "so far" in bar.text
    assert at.button(key="lab_points_stop").label == "Stop"
    assert len(at.dataframe[0].value) == 24


def test_step_page_shows_the_bits_of_d_j():
    from test_app import goto, make, ok

    at = make(
        {
            "rows": "1",
            "cols": "3000",
            "dist": "constant",
            "p_value": "0",
            "acc": "float16",
            "variants": "online_thread",
            "step": "2500",
        }
    )
    goto(at, "step")
    ok(at)
    html = next(m.value for m in at.markdown if "exponent (5 bits)" in m.value)
    assert html.count("<tr>") >= 9
    note = " ".join(c.value for c in at.caption)
    assert "The whole term rounded away" in note and "2049" in note


# --- GPU ------------------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_gpu_kernels_stay_within_the_bound_stagnate_and_overflow():
    recs = precision.sweep(ns=precision.powers_of_two(4, 14), backend="cuda")
    assert {r.backend for r in recs} == {"cuda"}
    assert outside(recs) == []
    assert len([r for r in recs if r.bound_applies]) > 300
    r = precision.measure("online_thread", "float16", "constant", 4096, backend="cuda")
    assert r.d == 2048 and r.stagnated_at == 2048
    t = precision.d_trajectory("online_thread", "float16", "constant", 2**17, backend="cuda")
    assert (t.d[2047:] == 2048).all() and t.d[-1] < math.inf  # one thread: stagnation, no overflow
    for variant in ("online_warp", "online_block"):
        assert precision.measure(variant, "float16", "constant", 2**16, backend="cuda").overflow
    big = precision.sweep(
        ["online_warp", "online_block"], ["float32"], ["decreasing", "normal"], [2**20], backend="cuda"
    )
    assert outside(big) == [] and all(r.bound_applies for r in big)


def test_a_gpu_stamp_breaks_into_lines_in_a_column_and_the_margin_holds_them():
    """A GPU run's stamp (about 68 characters) ran past the left edge of the lab's 316 px columns: it breaks at its
    " · " into lines that fit, and the bottom margin holds them under the x axis title."""
    from ui import figures as page
    from ui.figures.common import COLUMN_PX, device_line, stamp_chars

    gpu = device_line(
        {"gpu": "NVIDIA H200", "cuda_driver": "13.0", "cuda_runtime": "13.2", "cupy": "14.2.0"}, "2026-12-05"
    )
    recs = [precision.measure("online_warp", "float16", "constant", 2**15, backend="emulator")]
    traj = [precision.d_trajectory("online_thread", "float16", "constant", 4096, backend="emulator")]
    for fig in (
        page.overflow_figure(recs, "t", gpu, width=COLUMN_PX),
        page.stagnation_figure(traj, "t", gpu, width=COLUMN_PX),
    ):
        stamp = next(a for a in fig.layout.annotations if a.name == "stamp")
        lines = stamp.text.split("<br>")
        assert " · ".join(lines) == gpu and len(lines) == 2
        assert all(len(line) <= stamp_chars(COLUMN_PX) for line in lines)
        assert -stamp.yshift + 14 * len(lines) <= fig.layout.margin.b  # under the plot, inside the chart

"""URL state of the Softmax + top-k page and the Precision lab: parse_query / to_query without Streamlit,
then AppTest round trips (a view's URL opened in a new session reproduces the view), and bad values
explained in the sidebar and ignored."""

import json

import pytest

from ui import state, url
from ui.pages import precision as precision_page
from ui.pages import topk

pytest.importorskip("streamlit")
from test_app import charts, goto, make, ok  # the AppTest page helpers

PAGE_QUERY = {"rows": "4", "cols": "100", "variants": "online_warp"}


pytestmark = pytest.mark.usefixtures("emulator_backend")  # tests/conftest.py


# --- pure --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "used"), [("1.5", None), ("1e3", 1000), ("12.0", 12), ("0.999", None)])
def test_a_url_number_is_used_only_when_whole(raw, used):
    """?rows=1.5 is refused with a why (the box refuses 1.5 too), not read as 1."""
    values, problems = url.parse_query({"rows": raw})
    assert values.get("rows") == used
    assert bool(problems) == (used is None)


def test_a_block_size_off_the_multiples_of_32_says_so():
    values, problems = url.parse_query({"block": "33"})
    assert "block" not in values and any("a multiple of 32 from 32 to 1024" in p for p in problems)


def test_a_distribution_parameter_round_trips_through_the_url_exactly():
    view = {"dist": "normal", "p_normal_mean": 1.23456789, "p_normal_std": 0.1 + 0.2}
    values, problems = url.parse_query(url.to_query(view))
    assert not problems and (values["p_normal_mean"], values["p_normal_std"]) == (1.23456789, 0.1 + 0.2)


def test_a_shared_lane_past_the_first_block_is_kept_for_the_trace_to_clamp():
    values, problems = url.parse_query({"lane": "2000"})  # split_row over 1×65536 has 16384 lanes
    assert not problems and values["lane"] == 2000


def test_the_table_holds_both_pages_keys_in_the_url_only_when_changed():
    for p in (*topk.PARAMS, *precision_page.PARAMS):
        assert p.key in url.TABLE and p.key in url.defaults() and url.TABLE[p.key].sparse


def test_defaults_stay_out_of_the_url():
    q = url.to_query(url.defaults())
    assert not [k for k in q if k.startswith(("tk_", "prec_"))]
    assert q["log"] == "1"  # the older page keys are written always, as before


def test_non_defaults_round_trip_through_the_url():
    view = {
        **url.defaults(),
        "tk_vocab": 151936,
        "tk_batch": 2,
        "tk_k": 50,
        "tk_row": 1,
        "tk_log": False,
        "tk_tshape": "512×128256 float32 top-50",
        "prec_max": 12,
        "prec_dtype": "bfloat16",
        "prec_variants": ["online_block", "online_thread"],
        "prec_block": 128,
        "prec_cap": 2**14,
        "prec_quantity": "out",
        "prec_variant": "online_block",
        "prec_cmp_acc": "float32",
        "prec_cmp_dist": "normal",
        "prec_stag_dist": "decreasing",
        "prec_stag_n": 2**15,
    }
    q = url.to_query(view)
    assert q["tk_log"] == "0" and q["prec_variants"] == "online_block,online_thread" and q["tk_vocab"] == "151936"
    values, problems = url.parse_query(q)
    assert problems == []
    assert {k: v for k, v in {**url.defaults(), **values}.items() if not k.startswith("p_")} == view
    # a boolean comes back from 1 and 0, as log does
    assert url.parse_query({"tk_log": "1"})[0]["tk_log"] is True


@pytest.mark.parametrize(
    ("key", "raw", "words"),
    [
        ("tk_vocab", "1234", "choose one of 32000"),
        ("tk_batch", "3", "choose one of 1, 2, 4"),
        ("tk_k", "0", "from 1 to 64"),
        ("tk_k", "65", "from 1 to 64"),
        ("tk_row", "-1", "whole number"),
        ("tk_log", "maybe", "1 (log scale) or 0"),
        ("prec_max", "21", "choose one of 4"),
        ("prec_max", "x", "choose one of 4"),
        ("prec_dtype", "float8", "choose one of float32"),
        ("prec_block", "96", "choose one of 64, 128"),
        ("prec_cap", "1000", "choose one of 256"),
        ("prec_quantity", "m", "choose one of d, out"),
        ("prec_variant", "naive", "choose one of online_thread"),
        ("prec_cmp_acc", "float64", "choose one of float16"),
        ("prec_cmp_dist", "zipf", "choose one of decreasing"),
        ("prec_stag_dist", "normal", "choose one of constant, decreasing"),
        ("prec_stag_n", "1024", "choose one of 2048"),
    ],
)
def test_bad_page_values_are_explained_and_ignored(key, raw, words):
    values, problems = url.parse_query({key: raw})
    assert key not in values
    assert len(problems) == 1 and f"{key}={raw!r} ignored" in problems[0] and words in problems[0], problems


def test_unknown_precision_variants_are_dropped_with_a_warning():
    values, problems = url.parse_query({"prec_variants": "online_warp,naive,online_warp"})
    assert values["prec_variants"] == ["online_warp"]
    assert "naive" in problems[0]


# --- AppTest: a URL reproduces the top-k page --------------------------------------------------------------


def _topk_file() -> bytes:
    """Synthetic top-k timings (made-up numbers, labelled so) with two shapes to choose between."""
    rows = []
    for (batch, vocab), k in (((512, 128256), 8), ((1, 262144), 8)):
        for name, t in (("topk_fused", 40.0), ("topk_unfused", 110.0), ("torch", 160.0)):
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
                    "p90_us": 1.1 * t,
                    "gbps": 1.0,
                    "pct_copy": None,
                    "bytes_moved": 1,
                    "reads_per_element": None,
                    "writes_per_element": None,
                    "max_rel": None,
                }
            )
    return json.dumps(
        {
            "schema": "softmax-explorer-bench/1",
            "meta": {"gpu": "SYNTHETIC (made-up numbers)", "date": "2025-01-01"},
            "results": rows,
        }
    ).encode()


def test_topk_view_round_trips_through_the_url():
    at = goto(make(PAGE_QUERY), "topk")
    at.selectbox(key="tk_vocab").set_value(50257).run()
    at.select_slider(key="tk_batch").set_value(4).run()
    at.number_input(key="tk_k").set_value(20).run()
    at.number_input(key="tk_row").set_value(3).run()
    at.toggle(key="tk_log").set_value(False).run()
    at.file_uploader(key="tk_bench_files").set_value([("s.json", _topk_file(), "application/json")]).run()
    at.selectbox(key="tk_tshape").set_value("1×262144 float32 top-8").run()
    ok(at)
    q = dict(at.query_params)
    assert {k: q[k] for k in ("tk_vocab", "tk_batch", "tk_k", "tk_row", "tk_log", "tk_tshape")} == {
        "tk_vocab": "50257",
        "tk_batch": "4",
        "tk_k": "20",
        "tk_row": "3",
        "tk_log": "0",
        "tk_tshape": "1×262144 float32 top-8",
    }
    shown = charts(at)
    # the settings survive a visit to another page, in the session and in the URL
    goto(at, "errors")
    assert dict(at.query_params)["tk_k"] == "20"
    goto(at, "topk")

    again = goto(make(q), "topk")
    ok(again)
    assert again.selectbox(key="tk_vocab").value == 50257 and again.select_slider(key="tk_batch").value == 4
    assert again.number_input(key="tk_k").value == 20 and again.number_input(key="tk_row").value == 3
    assert again.toggle(key="tk_log").value is False
    assert charts(again)[0] == shown[0]  # the same bars: top-20 of row 3 of 4×50257, linear
    assert charts(again)[0]["layout"]["title"]["text"].startswith("Top-20 of row 3, 4×50257 float32")
    assert charts(again)[0]["layout"]["yaxis"]["type"] == "linear"
    # the results file is the user's (not in the URL); loaded again, the chosen shape is the one shown
    again.file_uploader(key="tk_bench_files").set_value([("s.json", _topk_file(), "application/json")]).run()
    ok(again)
    assert again.selectbox(key="tk_tshape").value == "1×262144 float32 top-8"
    assert charts(again)[1] == shown[1]
    assert dict(again.query_params) == q


# --- AppTest: a URL reproduces the precision lab ------------------------------------------------------------


def test_precision_view_round_trips_through_the_url():
    at = goto(make({**PAGE_QUERY, "prec_max": "5", "prec_cap": "256"}), "precision")
    ok(at)
    assert at.select_slider(key="prec_max").value == 5 and at.select_slider(key="prec_cap").value == 256
    # the settings that shrink the lab's work first: every later rerun redraws the page
    at.multiselect(key="prec_variants").set_value(["online_warp", "online_block"]).run()
    at.select_slider(key="prec_stag_n").set_value(2048).run()
    at.selectbox(key="prec_dtype").set_value("float16").run()
    at.select_slider(key="prec_block").set_value(128).run()
    at.radio(key="prec_quantity").set_value("out").run()
    at.selectbox(key="prec_variant").set_value("online_block").run()
    at.radio(key="prec_stag_dist").set_value("decreasing").run()
    at.selectbox(key="prec_cmp_acc").set_value("bfloat16").run()
    at.selectbox(key="prec_cmp_dist").set_value("increasing").run()
    ok(at)
    q = dict(at.query_params)
    assert {k: v for k, v in q.items() if k.startswith("prec_")} == {
        "prec_max": "5",
        "prec_cap": "256",
        "prec_dtype": "float16",
        "prec_block": "128",
        "prec_variants": "online_warp,online_block",
        "prec_quantity": "out",
        "prec_variant": "online_block",
        "prec_stag_dist": "decreasing",
        "prec_stag_n": "2048",
        "prec_cmp_acc": "bfloat16",
        "prec_cmp_dist": "increasing",
    }

    again = goto(make(q), "precision")
    ok(again)
    for kind, key in (
        ("select_slider", "prec_max"),
        ("select_slider", "prec_cap"),
        ("selectbox", "prec_dtype"),
        ("select_slider", "prec_block"),
        ("multiselect", "prec_variants"),
        ("radio", "prec_quantity"),
        ("selectbox", "prec_variant"),
        ("radio", "prec_stag_dist"),
        ("select_slider", "prec_stag_n"),
        ("selectbox", "prec_cmp_acc"),
        ("selectbox", "prec_cmp_dist"),
    ):
        assert getattr(again, kind)(key=key).value == getattr(at, kind)(key=key).value, key
    assert len(charts(again)) == 5 and charts(again) == charts(at)  # every figure the same
    assert charts(again)[0]["layout"]["title"]["text"].startswith("online_block: relative error of outputs")
    assert dict(again.query_params) == q


def test_bad_page_values_in_a_url_are_explained_in_the_sidebar():
    at = make({**PAGE_QUERY, "tk_k": "0", "tk_log": "maybe", "prec_max": "30", "prec_variants": "online_warp,bogus"})
    ok(at)
    warnings = " ".join(w.value for w in at.warning)
    assert "tk_k='0'" in warnings and "tk_log='maybe'" in warnings and "prec_max='30'" in warnings
    assert "bogus" in warnings
    goto(at, "topk")
    ok(at)
    assert at.number_input(key="tk_k").value == 8 and at.toggle(key="tk_log").value is True
    assert "tk_k" not in at.query_params and "tk_log" not in at.query_params
    assert at.query_params["prec_variants"] == "online_warp"


def test_a_distribution_parameter_is_exact_in_captions_and_file_names_too():
    from ui.state import params_text

    assert params_text((("mean", 1.23456789), ("std", 1.0))) == "_mean1.23456789_std1"
    assert params_text((("mean", 1.234561),)) != params_text((("mean", 1.234562),))


@pytest.mark.parametrize(
    "raw, words",
    [("nan", "not a number"), ("NaN", "not a number"), ("x", "not a number"), ("inf", "outside"), ("99", "outside")],
)
def test_a_distribution_parameter_that_is_not_usable_says_why(raw, words):
    values, problems = state.parse_dist_params({"p_mean": raw}, "normal")
    assert values == {} and len(problems) == 1 and f"p_mean={raw!r} ignored: {words}" in problems[0], problems

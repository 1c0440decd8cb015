"""The app through streamlit.testing.v1.AppTest (no browser), on the emulator: every page, every control."""

import base64
import json
from pathlib import Path

import numpy as np
import pytest

import explorer

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "app.py")
SMALL = {"rows": "4", "cols": "100", "variants": "naive,online_thread,online_warp,online_block"}


# AppTest's limit for one script run: generous, since a slow or busy box may take many times what a
# fast one does; a real hang is caught by pytest-timeout's per-test limit (pyproject.toml).
RUN_TIMEOUT = 180


def make(query: dict | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=RUN_TIMEOUT)
    at.query_params.update(query if query is not None else SMALL)
    return at.run()


def goto(at: AppTest, page: str) -> AppTest:
    """st.navigation pages are functions (no files for switch_page): select the page by its url path."""
    hashes = {info.get("url_pathname"): h for h, info in at._registered_pages.items()}
    at._page_hash = hashes["" if page == "outputs" else page]
    return at.run()


def ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    texts = " ".join(str(e.value) for e in at.error)
    assert "unexpected problem" not in texts and "Traceback" not in texts


def charts(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def chart_configs(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.config) for c in at.get("plotly_chart")]


def frame(at: AppTest, index: int = 0):
    return at.dataframe[index].value


def arr(value) -> np.ndarray:
    """A plotly JSON array: a list, or plotly 7's typed form {"dtype", "bdata"(, "shape")}."""
    if isinstance(value, dict) and "bdata" in value:
        data = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = value.get("shape")
        return data.reshape([int(s) for s in str(shape).split(",")]) if shape else data
    return np.asarray(value)


pytestmark = pytest.mark.usefixtures("emulator_backend")  # tests/conftest.py


@pytest.fixture
def at() -> AppTest:
    return make()


def test_a_table_cell_with_no_value_shows_the_share_images_dash(at):
    """The reference has no wall time: its cell shows what the share image draws there, not "None"."""
    from ui.figures.share import MISSING

    ok(at)
    outputs = frame(at)
    assert np.isnan(outputs.loc["float64 reference", "wall ms (not a benchmark)"])
    assert MISSING == "–" and all(t.proto.placeholder == MISSING for t in at.dataframe)


def test_outputs_page_shows_each_variant_beside_the_reference(at):
    ok(at)
    assert at.title[0].value == "Outputs"
    fig = charts(at)[0]
    names = [t.get("name") for t in fig["data"]]
    for k in ("naive", "online_thread", "online_warp", "online_block", "float64 reference"):
        assert k in names
    ref = next(t for t in fig["data"] if t.get("name") == "float64 reference")
    x = explorer.make_input("normal", 4, 100)
    np.testing.assert_allclose(arr(ref["y"]), explorer.reference(x)[0])
    df = frame(at)
    assert df.loc["online_warp", "sum of row"] == pytest.approx(1.0, abs=1e-5)
    assert df.loc["online_warp", "backend"] == "emulator"
    assert {b.label for b in at.download_button} == {
        "Download table (CSV)",
        "Download this run (JSON)",
        "Download share image (PNG)",
    }
    cfg = chart_configs(at)[0]
    assert (
        cfg["toImageButtonOptions"]["filename"]
        == "softmax_outputs_normal_mean0_std1_4x100_float32_acc-float32_seed0_row0"
    )
    assert any("CPU emulation" in a.get("text", "") for a in fig["layout"]["annotations"])


def test_backend_badge_says_cpu_emulation(at):
    texts = " ".join(m.value for m in at.markdown)
    assert "CPU emulation (no GPU here)" in texts


def test_log_toggle(at):
    assert charts(at)[0]["layout"]["yaxis"]["type"] == "log"
    at.toggle(key="log").set_value(False).run()
    ok(at)
    assert charts(at)[0]["layout"]["yaxis"]["type"] == "linear"
    assert at.query_params["log"] == "0"


def test_url_carries_the_whole_configuration(at):
    q = at.query_params
    assert q["rows"] == "4" and q["cols"] == "100" and q["dist"] == "normal" and q["p_std"] == "1"
    assert q["variants"] == "naive,online_thread,online_warp,online_block"
    # a new session opened on that URL reproduces the configuration
    again = make(dict(q))
    ok(again)
    for key in ("rows", "cols", "seed", "row"):
        assert again.number_input(key=key).value == int(q[key])
    assert again.multiselect(key="variants").value == q["variants"].split(",")
    assert again.query_params == q


def test_shared_url_sets_every_control():
    query = {
        "dist": "uniform",
        "p_low": "-5",
        "p_high": "2",
        "rows": "3",
        "cols": "64",
        "seed": "9",
        "dtype": "float16",
        "acc": "bfloat16",
        "variants": "online_block,online_warp",
        "block": "64",
        "row": "2",
        "log": "0",
    }
    at = make(query)
    ok(at)
    assert at.selectbox(key="dist").value == "uniform"
    assert at.number_input(key="p_uniform_low").value == -5.0
    assert at.number_input(key="p_uniform_high").value == 2.0
    assert at.selectbox(key="dtype").value == "float16" and at.selectbox(key="acc").value == "bfloat16"
    assert at.select_slider(key="block").value == 64
    assert at.number_input(key="row").value == 2
    assert at.toggle(key="log").value is False
    for key, value in query.items():
        assert at.query_params[key] == value, key
    assert "row 2" in charts(at)[0]["layout"]["title"]["text"]


def test_bad_url_parameters_are_explained_and_ignored():
    at = make({"dist": "gauss", "rows": "zero", "variants": "online_warp,bogus", "cols": "50"})
    ok(at)
    warnings = " ".join(w.value for w in at.warning)
    assert "dist='gauss'" in warnings and "rows='zero'" in warnings and "bogus" in warnings
    assert at.selectbox(key="dist").value == "normal"
    assert at.multiselect(key="variants").value == ["online_warp"]


def test_every_distribution_and_its_parameters(at):
    for key, dist in explorer.DISTRIBUTIONS.items():
        at.selectbox(key="dist").set_value(key).run()
        ok(at)
        for name, p in dist.params.items():
            assert at.number_input(key=f"p_{key}_{name}").value == p.default
        assert at.query_params["dist"] == key
        assert charts(at), key


def test_distribution_parameter_changes_the_input(at):
    at.number_input(key="p_normal_mean").set_value(3.0).run()
    at.number_input(key="p_normal_std").set_value(4.0).run()
    ok(at)
    assert at.query_params["p_mean"] == "3" and at.query_params["p_std"] == "4"
    x = explorer.make_input("normal", 4, 100, mean=3.0, std=4.0)
    ref = next(t for t in charts(at)[0]["data"] if t.get("name") == "float64 reference")
    np.testing.assert_allclose(arr(ref["y"]), explorer.reference(x)[0])


def test_large_logits_make_naive_nan_and_it_is_shown(at):
    at.selectbox(key="dist").set_value("large").run()
    ok(at)
    df = frame(at)
    assert df.loc["naive", "NaN"] > 0 and df.loc["online_warp", "NaN"] == 0
    names = [t.get("name", "") for t in charts(at)[0]["data"]]
    assert any(n.startswith("naive: NaN") for n in names)


def test_rows_cols_seed_dtype_acc_row(at):
    at.number_input(key="rows").set_value(6).run()
    at.number_input(key="cols").set_value(33).run()
    at.number_input(key="seed").set_value(7).run()
    at.selectbox(key="dtype").set_value("bfloat16").run()
    at.selectbox(key="acc").set_value("float16").run()
    at.number_input(key="row").set_value(5).run()
    ok(at)
    q = at.query_params
    assert (q["rows"], q["cols"], q["seed"], q["dtype"], q["acc"], q["row"]) == (
        "6",
        "33",
        "7",
        "bfloat16",
        "float16",
        "5",
    )
    fig = charts(at)[0]
    assert "row 5" in fig["layout"]["title"]["text"]
    assert arr(next(t for t in fig["data"] if t.get("name") == "float64 reference")["y"]).size == 33
    assert "6×33 bfloat16 · acc float16 · seed 7" in at.caption[0].value


def test_row_is_clamped_when_rows_shrink_and_a_toast_says_so(at):
    at.number_input(key="row").set_value(3).run()
    at.number_input(key="rows").set_value(2).run()
    ok(at)
    assert at.number_input(key="row").value == 1
    assert [t.value for t in at.toast] == ["Row 3 is outside 0–1: showing 1."]
    ok(at.run())
    assert not at.toast  # said once


def test_a_links_row_past_its_rows_is_shown_as_the_last_row_with_a_toast():
    at = make({**SMALL, "row": "50"})
    ok(at)
    assert at.number_input(key="row").value == 3 and at.query_params["row"] == "3"
    assert [t.value for t in at.toast] == ["Row 50 is outside 0–3: showing 3."]


def test_memory_estimate_and_refusal(at):
    captions = " ".join(c.value for c in at.sidebar.caption)
    assert "A run needs ≈" in captions and "KiB" in captions  # 4 × 100: in KiB, not "0.0 MiB"
    # both widgets change in one rerun: no intermediate 4 × 2^20 run (slow on a slow box)
    at.number_input(key="cols").set_value(2**20)
    at.number_input(key="rows").set_value(2**20).run()
    ok(at)
    errors = " ".join(e.value for e in at.error)
    assert "Not run" in errors and ("GiB" in errors or "limit" in errors)
    assert not at.get("plotly_chart")  # nothing ran
    at.number_input(key="cols").set_value(100)
    at.number_input(key="rows").set_value(4).run()  # back to a small shape: the app recovers
    ok(at)
    assert not at.error and at.get("plotly_chart")


def test_variants_multiselect_and_block_size(at):
    at.multiselect(key="variants").set_value([]).run()
    ok(at)
    assert any("Select at least one variant" in i.value for i in at.info)
    at.multiselect(key="variants").set_value(["online_thread"]).run()
    assert not [s for s in at.select_slider if s.key == "block"]  # no block variant: no block size
    at.multiselect(key="variants").set_value(["online_block", "safe_block"]).run()
    at.select_slider(key="block").set_value(128).run()
    ok(at)
    assert at.query_params["block"] == "128"
    goto(at, "kernels")
    at.selectbox(key="kv").set_value("online_block").run()
    launch = at.table[1].value
    assert launch.loc["block (threads)", "value"] == "128"


def test_variant_help_lists_each_lesson(at):
    help_text = at.multiselect(key="variants").help
    for v in explorer.VARIANTS.values():
        assert v.lesson in help_text


def test_upload_npy_and_csv(at):
    at.selectbox(key="dist").set_value("upload").run()
    ok(at)
    assert any("Upload a .npy or .csv" in i.value for i in at.info)
    import io

    buf = io.BytesIO()
    logits = np.linspace(-3, 3, 40).reshape(2, 20)
    np.save(buf, logits)
    at.file_uploader(key="upload").upload("logits.npy", buf.getvalue()).run()
    ok(at)
    assert at.number_input(key="rows").value == 2 and at.number_input(key="cols").value == 20
    ref = next(t for t in charts(at)[0]["data"] if t.get("name") == "float64 reference")
    np.testing.assert_allclose(arr(ref["y"]), explorer.reference(logits.astype(np.float32))[0])
    assert chart_configs(at)[0]["toImageButtonOptions"]["filename"].startswith("softmax_outputs_upload-logits_2x20")
    at.file_uploader(key="upload").set_value(("row.csv", b"1,2,3,4\n", "text/csv")).run()
    ok(at)
    assert at.number_input(key="cols").value == 4


def test_leaving_an_upload_brings_back_the_shape_and_row_it_replaced():
    at = make({"rows": "4", "cols": "100", "row": "2", "variants": "online_warp"})
    at.selectbox(key="dist").set_value("upload").run()
    at.file_uploader(key="upload").set_value(("row.csv", b"1,2,3,4,5,6,7,8,9,10\n", "text/csv")).run()
    ok(at)
    assert (at.number_input(key="rows").value, at.number_input(key="cols").value) == (1, 10)
    at.file_uploader(key="upload").set_value(("two.csv", b"1,2,3\n4,5,6\n", "text/csv")).run()  # a second file
    assert (at.number_input(key="rows").value, at.number_input(key="cols").value) == (2, 3)
    at.selectbox(key="dist").set_value("normal").run()
    ok(at)
    assert (at.number_input(key="rows").value, at.number_input(key="cols").value) == (4, 100)
    assert at.number_input(key="row").value == 2


def test_bad_upload_is_refused_in_words(at):
    at.selectbox(key="dist").set_value("upload").run()
    at.file_uploader(key="upload").set_value(("bad.csv", b"a,b,c\n", "text/csv")).run()
    ok(at)
    assert any("bad.csv could not be read as numbers" in e.value for e in at.error)


def main_elements(at: AppTest) -> list[tuple[str, str]]:
    """The main area's elements in page order, as (type, text), without the backend's badge."""

    def walk(node):
        for child in node.children.values():
            yield from walk(child) if hasattr(child, "children") else [(child.type, str(child.value))]

    return [(kind, text) for kind, text in walk(at.main) if "CPU emulation" not in text]


@pytest.mark.parametrize(
    ("query", "kind", "says"),
    [
        ({"rows": "100000", "cols": "100000"}, "error", "Not run (all 8 variants): float32 softmax: 100000×100000 = "),
        ({**SMALL, "variants": ""}, "info", "Select at least one variant"),
    ],
)
@pytest.mark.parametrize(("page", "title"), [("outputs", "Outputs"), ("errors", "Error vs float64")])
def test_a_refusal_comes_after_the_title_and_the_configuration_line(query, kind, says, page, title):
    at = goto(make(query), page)
    ok(at)
    rows, cols = query["rows"], query["cols"]
    (head, line, refusal) = main_elements(at)
    assert head == ("title", title)
    assert line == ("caption", f"Normal (mean=0, std=1) · {rows}×{cols} float32 · acc float32 · seed 0")
    assert refusal[0] == kind and refusal[1].startswith(says)


def test_a_refused_upload_is_said_on_the_page_in_the_sidebars_words(at):
    at.selectbox(key="dist").set_value("upload").run()
    at.file_uploader(key="upload").set_value(("bad.csv", b"a,b,c\n", "text/csv")).run()
    ok(at)
    (reason,) = [e.value for e in at.sidebar.error]
    assert "bad.csv could not be read as numbers" in reason
    # no configuration line: no input runs, and the shape boxes are not the file's
    assert main_elements(at) == [("title", "Outputs"), ("error", f"The upload was refused: {reason}.")]


def test_an_uploaded_inputs_caption_and_chart_title_name_no_seed(at):
    at.selectbox(key="dist").set_value("upload").run()
    at.file_uploader(key="upload").set_value(("two.csv", b"1,2,3\n4,5,6\n", "text/csv")).run()
    ok(at)
    assert at.main.caption[0].value == "upload two.csv · 2×3 float32 · acc float32"
    assert "seed" not in charts(at)[0]["layout"]["title"]["text"]


@pytest.mark.parametrize("page", ["outputs", "kernels"])  # the input section drawn before the shape boxes, and after
def test_the_shape_boxes_show_the_users_shape_while_no_upload_runs(page):
    """A refused or removed file runs nothing: the greyed boxes show the user's own shape, not the last file's; a
    late browser message with the file's shape is undone; the user's shape and row come back on leaving the upload."""
    at = goto(make({"rows": "4", "cols": "100", "row": "2", "variants": "online_warp"}), page)

    def shape():
        return at.number_input(key="rows").value, at.number_input(key="cols").value

    at.selectbox(key="dist").set_value("upload").run()
    at.file_uploader(key="upload").set_value(("two.csv", b"1,2,3\n4,5,6\n", "text/csv")).run()
    assert shape() == (2, 3)
    at.file_uploader(key="upload").set_value(("bad.csv", b"a,b,c\n", "text/csv")).run()
    ok(at)
    assert shape() == (4, 100) and at.number_input(key="row").value == 2
    at.session_state["rows"], at.session_state["cols"] = 2.0, 3.0  # the browser's message, sent before it saw 4×100
    at.run()
    assert shape() == (4, 100)
    at.file_uploader(key="upload").set_value(("row.csv", b"1,2,3,4,5,6,7,8,9,10\n", "text/csv")).run()
    assert shape() == (1, 10)
    at.file_uploader(key="upload").clear().run()
    ok(at)
    assert shape() == (4, 100)
    at.selectbox(key="dist").set_value("normal").run()
    ok(at)
    assert shape() == (4, 100) and at.number_input(key="row").value == 2


def test_an_upload_beyond_the_dtypes_range_is_refused_and_runs_once_the_dtype_holds_it(at):
    at.selectbox(key="dist").set_value("upload").run()
    at.selectbox(key="dtype").set_value("float16").run()
    at.file_uploader(key="upload").set_value(("big.csv", b"70000,1,2,3\n", "text/csv")).run()
    ok(at)
    assert any("big.csv" in e.value and "beyond float16's range" in e.value for e in at.error)
    at.selectbox(key="dtype").set_value("float32").run()
    ok(at)
    assert not at.error and at.number_input(key="cols").value == 4


def test_an_npy_whose_header_claims_a_huge_shape_is_refused_in_words(at):
    """192 bytes announcing 100000×100000: refused from the header before np.load allocates, the sidebar and
    settings kept."""
    import io

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False, "shape": (100000, 100000)})
    at.selectbox(key="dist").set_value("upload").run()
    at.file_uploader(key="upload").set_value(
        ("huge.npy", buf.getvalue() + b"\0" * 64, "application/octet-stream")
    ).run()
    ok(at)
    assert any("huge.npy could not be read" in e.value and "(100000, 100000)" in e.value for e in at.sidebar.error)
    assert at.multiselect(key="variants").value == SMALL["variants"].split(",")


def test_step_through_warp_and_block(at):
    goto(at, "step")
    at.selectbox(key="tv").set_value("online_warp").run()
    ok(at)
    figs = charts(at)
    assert len(figs) == 3  # step, lanes heatmap, merge tree
    assert arr(figs[1]["data"][0]["z"]).shape[0] == 32
    at.number_input(key="lane").set_value(5).run()
    at.radio(key="heat").set_value("err").run()
    ok(at)
    assert "lane 5" in charts(at)[0]["layout"]["title"]["text"]
    assert at.query_params["lane"] == "5" and at.query_params["heat"] == "err"
    at.selectbox(key="tv").set_value("online_block").run()
    ok(at)
    at.selectbox(key="tree").set_value("across warps").run()
    assert charts(at)[2]["layout"]["title"]["text"].endswith("across warps")
    at.selectbox(key="tree").set_value("warp 2 lanes").run()
    ok(at)
    assert "warp 2 lanes" in charts(at)[2]["layout"]["title"]["text"]
    assert at.query_params["tree"] == "warp 2 lanes"
    merges = frame(at)
    assert set(merges["stage"]) == {"lanes", "warps"}


def test_step_through_without_traceable_variant(at):
    at.multiselect(key="variants").set_value(["naive"]).run()
    goto(at, "step")
    ok(at)
    assert any("records a trace" in i.value for i in at.info)


def test_errors_page(at):
    goto(at, "errors")
    ok(at)
    df = frame(at)
    assert list(df.index) == ["naive", "online_thread", "online_warp", "online_block"]
    assert (df["max rel"] < 1e-5).all() and (df["argmax agree"] == 1).all()
    assert (df["max rel"] <= df["bound"]).all()
    assert charts(at)[0]["layout"]["yaxis"]["type"] == "log"
    assert [b.label for b in at.download_button] == ["Download table (CSV)", "Download share image (PNG)"]
    at.selectbox(key="dist").set_value("nonfinite").run()
    at.number_input(key="p_nonfinite_rate").set_value(0.05).run()
    ok(at)
    df = frame(at)
    assert (df["NaN"] > 0).all()


def test_the_error_table_fits_a_window_1400_pixels_wide(at):
    """Beside the sidebar, such a window leaves the page 938 pixels: every column has a width, and with the variant
    names' (about 110) they fit, so a screenshot holds them all; the verdict comes first."""
    goto(at, "errors")
    ok(at)
    df, columns = frame(at), json.loads(at.dataframe[0].proto.columns)
    assert list(df.columns[:4]) == ["bound says", "bound", "max rel", "flushed to 0"]
    assert set(df.columns) == set(columns)
    assert 110 + sum(c["width"] for c in columns.values()) <= 938


def test_the_error_page_fails_a_variant_whose_outputs_are_nan_where_float64_is_finite():
    """naive overflows on large logits: its NaNs are left out of max rel, so the bound must not be said to hold."""
    at = make({"dist": "large", "rows": "4", "cols": "300", "variants": "naive,online_warp"})
    goto(at, "errors")
    ok(at)
    df = frame(at)
    assert df.loc["naive", "NaN/inf ≠ ref"] > 0
    assert df.loc["naive", "bound says"] == f"fails: {df.loc['naive', 'NaN/inf ≠ ref']:,} NaN/inf ≠ ref"
    assert df.loc["online_warp", "NaN/inf ≠ ref"] == 0 and not df.loc["online_warp", "bound says"].startswith("fails")


def test_a_row_of_nan_outputs_has_a_nan_sum_and_no_argmax_on_the_outputs_page():
    at = make({"dist": "nonfinite", "rows": "4", "cols": "300", "variants": "online_warp,fast"})
    ok(at)
    df = frame(at)
    nan_rows = df[df["NaN"] == 300]
    assert set(nan_rows.index) == {"online_warp", "fast", "float64 reference"}
    assert nan_rows["sum of row"].isna().all() and nan_rows["argmax"].isna().all() and nan_rows["max p"].isna().all()


def test_variant_refusing_a_dtype_is_a_warning_not_a_crash(at, monkeypatch):
    # a registry entry that takes fewer dtypes than the one chosen: words, and the other variants still run
    import dataclasses

    v = explorer.VARIANTS["online_thread"]
    monkeypatch.setitem(explorer.VARIANTS, "online_thread", dataclasses.replace(v, dtypes=("float32",)))
    at.selectbox(key="dtype").set_value("float16").run()
    ok(at)
    assert any("online_thread" in w.value and "float16" in w.value for w in at.warning)
    assert "online_warp" in frame(at).index


def test_variant_refusing_the_accumulator_is_a_warning_not_a_crash(at):
    # fast accumulates in fp32 only: the memory line leaves it out, the page says so, online_warp still runs
    at.multiselect(key="variants").set_value(["online_warp", "fast"]).run()
    at.selectbox(key="acc").set_value("float16").run()
    ok(at)
    # it read "fast: fast accumulates in float32, not float16", as if fast had run with a float32 accumulator
    assert "**fast** not run: fast accumulates in float32, not float16" in [
        w.value.replace("\\", "") for w in at.warning
    ]
    assert "online_warp" in frame(at).index
    assert any("A run needs" in c.value for c in at.sidebar.caption)


def _bench(gpu: str, scale: float = 1.0) -> bytes:
    rows = []
    for name, kind, t in (
        ("online_warp", "variant", 10.0),
        ("online_block", "variant", 8.0),
        ("naive", "variant", 12.0),
        ("cupyx", "peer", 9.0),
        ("torch", "peer", 7.5),
        ("copy", "copy", 5.0),
    ):
        for cols in (1000, 4096):
            rows.append(
                {
                    "name": name,
                    "kind": kind,
                    "dtype": "float32",
                    "acc": "float32",
                    "rows": 4096,
                    "cols": cols,
                    "block_size": 256 if name == "online_block" else None,
                    "median_us": t * scale,
                    "p10_us": t * scale * 0.9,
                    "p90_us": t * scale * 1.2,
                    "gbps": 1e3 / (t * scale),
                    "pct_copy": 500 / t,
                    "bytes_moved": 4096 * cols * 8,
                    "reads_per_element": 2,
                    "writes_per_element": 1,
                    "max_rel": 1e-7,
                }
            )
    return json.dumps(
        {
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
            "results": rows,
        }
    ).encode()


def test_timing_page_on_cpu_loads_results_files(at):
    goto(at, "timing")
    ok(at)
    assert any("Timings need a GPU" in i.value for i in at.info)
    assert not at.get("plotly_chart")
    at.file_uploader(key="bench_files").set_value(
        [
            ("h200.json", _bench("NVIDIA H200"), "application/json"),
            ("a100.json", _bench("NVIDIA A100", 2.0), "application/json"),
        ]
    ).run()
    ok(at)
    assert not any("Timings need a GPU" in i.value for i in at.info)  # beside loaded timings: measured elsewhere
    assert any("measured on the GPUs their files name" in c.value for c in at.caption)
    t, _ = charts(at)
    assert [tr["name"] for tr in t["data"]] == ["NVIDIA H200", "NVIDIA A100"]
    bars = t["data"][0]
    # the sidebar's variants (naive, online_warp, online_block here) plus the peers and the copy
    assert bars["x"] == ["online_warp", "online_block", "naive", "cupyx", "torch", "copy"]  # peers hatched
    assert list(arr(bars["y"])) == [10.0, 8.0, 12.0, 9.0, 7.5, 5.0]
    assert "GPU NVIDIA H200 · driver 12.8 · CUDA 12.8 · CuPy 13.6 · 2025-03-01" in t["layout"]["annotations"][0]["text"]
    table = frame(at)
    assert len(table) == 12 and set(table["source"]) == {"NVIDIA H200", "NVIDIA A100"}
    assert list(table.columns[:2]) == ["name", "source"]  # two files: which a row is from, beside its name
    name_column = json.loads(at.dataframe[0].proto.columns)["name"]
    assert name_column["pinned"] and name_column["width"] >= 120  # online_thread in full
    assert at.selectbox(key="tshape").options == ["4096×1000 float32 acc float32", "4096×4096 float32 acc float32"]
    at.selectbox(key="tshape").set_value("4096×4096 float32 acc float32").run()
    ok(at)
    assert at.query_params["tshape"] == "4096×4096 float32 acc float32"
    assert (
        chart_configs(at)[0]["toImageButtonOptions"]["filename"] == "softmax_timing_4096x4096_float32_acc_float32_time"
    )
    assert [b.label for b in at.download_button] == ["Download table (CSV)", "Download share image (PNG)"]


def test_timing_page_refuses_a_bad_file_in_words(at):
    goto(at, "timing")
    at.file_uploader(key="bench_files").set_value([("x.json", b'{"schema": "nope"}', "application/json")]).run()
    ok(at)
    assert any("x.json" in e.value and "schema" in e.value for e in at.error)


def test_kernels_page_every_variant(at):
    goto(at, "kernels")
    ok(at)
    for key, v in explorer.VARIANTS.items():
        at.selectbox(key="kv").set_value(key).run()
        ok(at)
        assert at.query_params["kv"] == key
        code = at.code[0].value
        assert "__global__" in code and v.kernel in code
        assert at.code[0].language == "cpp"
        registry = at.table[0].value
        assert registry.loc["reads per element", "value"] == str(v.reads_per_element)
        launch = at.table[1].value
        expected = v.launch(4, 100, 256 if v.takes_block_size else None)
        assert launch.loc["grid (blocks)", "value"] == str(expected.grid)
        assert any("needs a GPU" in i.value for i in at.info)


def test_kernels_page_says_fast_stream_reads_the_part_it_does_not_hold_twice():
    from ui.pages import kernels

    fast = explorer.VARIANTS["fast"]
    long = kernels.launch_fields(fast, fast.launch(1, 2**24, None, "float32"))
    assert long["kernel"].startswith("fast_stream<") and "second read" in long["global reads per element"]
    assert kernels.launch_fields(fast, fast.launch(4, 1024, None, "float32"))["global reads per element"] == 1
    assert kernels.registry_entry(fast)["further reads"].startswith("fast_stream: a second read")  # the registry's
    assert kernels.registry_entry(explorer.VARIANTS["online_warp"])["further reads"] == "–"


def test_kernels_page_offers_the_block_size_of_a_kernel_the_sidebar_does_not_run():
    """The sidebar draws the block size only while one of its variants takes it: a block kernel chosen on this page
    gets the slider here, and its launch follows it."""
    at = goto(make({**SMALL, "variants": "fast", "kv": "online_block", "block": "512"}), "kernels")
    ok(at)
    slider = at.select_slider(key="block")
    assert slider.value == 512 and at.table[1].value.loc["block (threads)", "value"] == "512"
    ok(slider.set_value(128).run())
    assert at.table[1].value.loc["block (threads)", "value"] == "128" and at.query_params["block"] == "128"
    ok(at.selectbox(key="kv").set_value("online_warp").run())  # it takes no block size: no slider
    assert not [s for s in at.select_slider if s.key == "block"]


def test_kernels_page_says_when_it_shows_another_dtype_or_accumulator_than_the_sidebars():
    at = goto(make({**SMALL, "kv": "fast", "dtype": "bfloat16", "acc": "float16"}), "kernels")
    ok(at)
    captions = " ".join(c.value for c in at.caption)
    assert "fast has no kernel for bfloat16 with a float16 accumulator" in captions
    assert "its bfloat16 / float32 kernel is shown" in captions
    ok(at.selectbox(key="kv").set_value("online_warp").run())
    assert "has no kernel for" not in " ".join(c.value for c in at.caption)


def test_every_page_after_every_distribution_has_no_exception():
    at = make({"rows": "3", "cols": "40"})
    for dist in ("large", "causal_mask", "nonfinite", "constant"):
        at.selectbox(key="dist").set_value(dist).run()
        for page in ("outputs", "step", "errors", "timing", "kernels"):
            goto(at, page)
            ok(at)


def test_the_error_page_says_what_the_bound_says_of_each_case():
    from ui.pages.errors import bound_verdict

    assert bound_verdict(1e-7, 1e-7, 1e-6, 0) == "holds"
    assert bound_verdict(float("nan"), float("nan"), 1e-6, 3) == "fails: 3 NaN/inf ≠ ref"
    assert bound_verdict(float("nan"), float("nan"), 1e-6, 0) == "nothing to check (no finite row)"
    assert bound_verdict(1e-5, 1e-5, 1e-6, 0) == "exceeded"
    assert bound_verdict(0.98, 1e-7, 1e-6, 0) == "holds; tiny outputs flushed to 0"  # only -ftz's losses


def test_large_logits_overflow_naive_while_the_safe_kernels_hold_their_bound():
    """scale=100: e^x overflows in naive; the others hold their bound where the output is in fp32's range, and
    the tiny probabilities below it, flushed to 0 as the GPU does, are said apart rather than called a failure."""
    at = goto(make({**SMALL, "dist": "large", "variants": "naive,safe_thread,online_warp"}), "errors")
    ok(at)
    table = frame(at)
    verdicts = table["bound says"]
    assert verdicts["naive"].startswith("fails:")
    assert verdicts["safe_thread"] == verdicts["online_warp"] == "holds; tiny outputs flushed to 0"
    held = table.loc[["safe_thread", "online_warp"]]
    assert (held["max rel"] <= held["bound"]).all() and (held["flushed to 0"] > 0).all()  # the table says why
    goto(at, "outputs")
    ok(at)
    notes = " ".join(c.value for c in at.caption)
    assert "come out 0: the GPU flushes them (-ftz): safe_thread 3, online_warp 3." in notes


def test_kernels_page_names_the_registry_fields_in_words():
    at = goto(make({**SMALL, "kv": "online_thread"}), "kernels")
    ok(at)
    entry = at.table[0].value["value"]
    assert entry["origin"] == "V1" and entry["takes block size"] == "no" and entry["kernel file"] == "softmax.cu"
    assert at.table[1].value.loc["functions", "value"] == "online_thread"  # the one kernel it runs, not "–"
    assert not any("_" in name for name in entry.index)  # templated_by_launch read as code, and seed as the RNG's


def test_the_words_a_newcomer_meets_first_are_explained_where_they_appear():
    at = make()
    ok(at)
    assert any("Deviation in ulps: units in the last place of float32" in c.value for c in at.caption)
    from ui.results import TIMES_CAPTION

    assert "CUPTI, NVIDIA's profiling interface" in TIMES_CAPTION and "p10–p90: the 10th to 90th" in TIMES_CAPTION


def test_every_column_of_the_error_table_is_explained_under_it():
    at = goto(make(), "errors")
    ok(at)
    (notes,) = [m.value for e in at.expander if e.label == "What each column means" for m in e.markdown]
    columns = json.loads(at.dataframe[0].proto.columns)
    shown = [c.get("label") or name for name, c in columns.items() if name != "variant"]
    assert len(shown) == 12
    assert all(f"**{h}" in notes or f", {h}**" in notes for h in shown), [h for h in shown if h not in notes]

"""The app on a GPU (AppTest, CUDA backend): every page runs the real kernels, names the GPU,
shows compiled resources, and runs the benchmark buttons. Skipped without a GPU."""

import pytest

import explorer

pytest.importorskip("streamlit")
from test_app import charts, frame, goto, make, ok  # the AppTest page helpers

pytestmark = pytest.mark.gpu
QUERY = {"rows": "64", "cols": "1000", "variants": "online_thread,online_warp,online_block,fast"}


@pytest.fixture
def at():
    app = make(QUERY)
    ok(app)
    return app


def test_outputs_run_on_the_gpu_and_the_badge_names_it(at):
    gpu = explorer.info()["gpu"]
    assert gpu in " ".join(m.value for m in at.markdown)
    df = frame(at)
    assert set(df.loc[["online_warp", "fast"], "backend"]) == {"cuda"}
    assert any(gpu in a.get("text", "") for a in charts(at)[0]["layout"]["annotations"])


def test_every_page_renders_on_the_gpu(at):
    for page in ("step", "errors", "precision", "topk", "kernels", "timing"):
        goto(at, page)
        ok(at)


def test_kernels_page_reports_compiled_resources(at):
    goto(at, "kernels")
    ok(at)
    table = frame(at, -1)
    assert "registers" in table.columns and (table["registers"] > 0).all()


def test_timing_button_measures_on_the_gpu(at):
    goto(at, "timing")
    at.button(key="bench_run").click().run()
    ok(at)
    assert charts(at), "no timing chart after the benchmark ran"


def test_topk_button_measures_on_the_gpu(at):
    goto(at, "topk")
    at.button(key="tk_bench_run").click().run()
    ok(at)

"""The memory model (explorer.budget) against the emulator's real peak, measured with tracemalloc (NumPy reports
its buffers to it): for every variant, dtype, accumulator and trace setting, measured <= estimate <= 1.5 × measured."""

import tracemalloc

import pytest

import explorer
from explorer import budget
from explorer.topk import topk_launch

SHAPES = ((16, 100), (64, 1000), (2, 30000))  # short rows padded to the lanes, a batch, a long row
RUNS = [
    (key, dtype, acc, traced, rows, cols)
    for key, v in explorer.VARIANTS.items()
    for dtype in ("float32", "float16")
    for acc in ("float32", "bfloat16")
    if acc in v.accumulators
    for traced in ((False, True) if v.traceable else (False,))
    for rows, cols in SHAPES
    if v.family != "thread" or cols <= 1000
]  # one thread per row steps in Python


def peak(call, x) -> int:
    """The peak of call() in bytes, with its input x counted (the model counts it)."""
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1] + x.nbytes
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(("key", "dtype", "acc", "traced", "rows", "cols"), RUNS)
def test_run_bytes_bounds_the_measured_peak(key, dtype, acc, traced, rows, cols):
    x = explorer.make_input("normal", rows=rows, cols=cols, dtype=dtype, seed=0)
    estimate = explorer.bytes_needed(rows, cols, dtype, "emulator", explorer.VARIANTS[key], None, traced, acc)
    measured = peak(lambda: explorer.softmax(x, key, acc=acc, backend="emulator", trace_row=0 if traced else None), x)
    assert measured <= estimate <= 1.5 * measured


@pytest.mark.parametrize("dtype", ("float32", "float16"))
@pytest.mark.parametrize(("rows", "cols"), ((64, 777), (3, 12345), (2, 50257), (1, 151936)))
def test_fast_bytes_bounds_the_measured_peak_at_odd_widths(dtype, rows, cols):
    """Rows whose 16-byte boundaries fall at different offsets are emulated a group at a time."""
    x = explorer.make_input("normal", rows=rows, cols=cols, dtype=dtype, seed=0)
    estimate = explorer.bytes_needed(rows, cols, dtype, "emulator", explorer.VARIANTS["fast"], None, False, "float32")
    measured = peak(lambda: explorer.softmax(x, "fast", backend="emulator"), x)
    assert measured <= estimate <= 1.5 * measured


@pytest.mark.parametrize("variant", explorer.TOPK_VARIANTS)
@pytest.mark.parametrize(("rows", "cols"), ((64, 4096), (1, 100000), (64, 50257), (24, 12345)))
def test_topk_bytes_bounds_the_measured_peak(variant, rows, cols):
    x = explorer.make_input("normal", rows=rows, cols=cols, dtype="float16", seed=0)
    estimate = budget.topk_bytes(
        variant == "topk_fused",
        topk_launch(rows, cols, 8, "float16"),
        explorer.VARIANTS["fast"].launch(rows, cols, None, "float16"),
        rows,
        cols,
        "float16",
    )
    measured = peak(lambda: explorer.softmax_topk(x, 8, variant, backend="emulator"), x)
    assert measured <= estimate <= 1.5 * measured


def test_page_bytes_bounds_what_the_pages_keep():
    """Input, reference, every output and the error reports, as ui/compute.py keeps them for one configuration."""
    rows, cols, keys = 64, 2000, ("online_warp", "fast", "safe_block")
    x = explorer.make_input("normal", rows=rows, cols=cols, dtype="float32", seed=0)

    def page():
        ref = explorer.reference(x)
        outs = [explorer.softmax(x, k, backend="emulator").out for k in keys]
        return [explorer.errors(out, x, ref=ref) for out in outs], outs

    measured = peak(page, x)
    estimate = budget.page_bytes([(explorer.VARIANTS[k], None) for k in keys], rows, cols, "float32", "float32")
    assert measured <= estimate <= 1.5 * measured

"""Every public function of explorer, fed arbitrary Python values and small arrays, raises only
explorer.ExplorerError subclasses (InvalidInput, TooLarge, GPUUnavailable, ...) or returns.

The operator limit is set to 4096 elements here, so a fuzzed shape that would be slow to run is
refused by the limit (a TooLarge, which the fuzz accepts) instead of computed.
"""

from __future__ import annotations

import inspect
import io
import json

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import explorer

LIMIT = 4096
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

NAMES = sorted(
    {
        *explorer.VARIANTS,
        *explorer.TOPK_VARIANTS,
        *explorer.DTYPES,
        *explorer.BACKENDS,
        *explorer.DISTRIBUTIONS,
        "",
        "float64",
        "auto ",
        "FLOAT32",
    }
)
DTYPES = [np.float32, np.float16, np.float64, np.int32, np.uint8, np.bool_, np.complex64, "U3", "M8[s]"]
SPECIAL = [
    np.array([1.0, "a", None], dtype=object),
    np.broadcast_to(np.float32(0), (1, 2**31)),
    np.broadcast_to(np.float32(1), (2**20, 2**20)),
    np.broadcast_to(np.float16(1), (64, 64)),
    np.asfortranarray(np.ones((3, 4), np.float32)),
    np.ones((4, 6), np.float32)[:, ::2],
    np.zeros((2, 3), dtype=[("a", np.float32), ("b", np.int8)]),
    np.array([np.nan, np.inf, -np.inf], np.float32),
]


def with_bfloat16(strategy: st.SearchStrategy) -> st.SearchStrategy:
    """Hypothesis draws no bfloat16 itself: float32 arrays, some of them cast."""
    return st.one_of(
        strategy, strategy.filter(lambda a: a.dtype == np.float32).map(lambda a: a.astype(ml_dtypes.bfloat16))
    )


small_arrays = st.one_of(
    with_bfloat16(
        hnp.arrays(st.sampled_from(DTYPES), hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6))
    ),
    with_bfloat16(
        hnp.arrays(st.sampled_from(DTYPES[:2]), hnp.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=40))
    ),
)
arrays = st.one_of(small_arrays, st.sampled_from(SPECIAL))
plain = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(-3, 2**31 + 3),
    st.floats(),
    st.text(max_size=6),
    st.binary(max_size=16),
    st.sampled_from(NAMES),
    st.lists(st.integers(0, 8), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.just(np.float32),
    st.just(object()),
    st.sampled_from([np.int64(64), np.uint8(3), np.float32(2.0), np.bool_(True), 10**400, 2**63, -(2**63)]),
)
anything = st.one_of(plain, arrays)
names = st.one_of(st.sampled_from(NAMES), anything)
shapes = st.one_of(st.integers(0, 80), st.integers(), anything)
# drawn by key: a strategy's repr quoting every Variant would pass the 30 kB hypothesis warns about
variants = st.one_of(
    st.none(), st.sampled_from(list(explorer.VARIANTS)).map(lambda key: explorer.VARIANTS[key]), anything
)
# softmax's progress: None, a function of (rows done, rows) returning anything, or any value that is not callable
# (an exception a callable raises is the caller's stop and comes out of softmax, as documented)
progresses = st.one_of(
    st.none(),
    st.functions(like=lambda done, rows: None, returns=anything, pure=False),
    anything.filter(lambda value: not callable(value)),
)


def npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=True)
    return buf.getvalue()


uploads = st.one_of(  # files of small arrays only (np.save would write out the huge views in full)
    st.binary(max_size=300),
    small_arrays.map(npy),
    st.tuples(small_arrays.map(npy), st.integers(0, 200)).map(lambda t: t[0][: len(t[0]) - t[1]]),  # cut off
    st.lists(st.lists(st.floats(), min_size=1, max_size=5), min_size=1, max_size=4).map(
        lambda rows: "\n".join(",".join(map(repr, r)) for r in rows).encode()
    ),
    st.text(max_size=60).map(str.encode),
    anything,
)


def small_logits():
    return with_bfloat16(
        hnp.arrays(
            st.sampled_from(DTYPES[:2]),
            st.tuples(st.integers(1, 6), st.integers(1, 40)),
            elements=st.floats(-100, 100, width=16),
        )
    )


@st.composite
def topk_results(draw):
    """A genuine result for some x (then paired with another x or the same), or an arbitrary one."""
    if draw(st.booleans()):
        x = draw(small_logits())
        return explorer.softmax_topk(x, draw(st.integers(1, min(8, x.shape[1]))), backend="emulator")
    return explorer.TopkResult(draw(anything), draw(anything), "emulator", "topk_fused", draw(shapes), None)


@pytest.fixture(scope="module", autouse=True)
def _small_limit():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EXPLORER_MAX_ELEMENTS", str(LIMIT))
        mp.setenv("EXPLORER_BACKEND", "emulator")
        yield


def only_our_errors(fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except explorer.ExplorerError as exc:
        assert str(exc), f"{fn.__name__}: an empty message"
    # anything else propagates and fails the test with the arguments hypothesis found


CALLS = {
    "bytes_needed": st.tuples(shapes, shapes, names, names, variants, anything, anything, names),
    "check_fits": st.tuples(shapes, shapes, names, names, variants, anything, anything, names),
    "error_bound": st.tuples(anything, names, names, anything),
    "errors": st.tuples(
        st.one_of(arrays, small_logits()), st.one_of(arrays, small_logits()), st.one_of(st.none(), arrays)
    ),
    "info": st.tuples(),
    "kernel_resources": st.tuples(names, names, names, shapes, shapes, anything),
    "kernel_source": st.tuples(names),
    "load_logits": st.tuples(
        uploads,
        st.one_of(st.sampled_from(["x.npy", "x.csv", "x.NPY", "x"]), anything),
        names,
        st.one_of(st.integers(-1, 10**6), anything),
    ),
    "make_input": st.tuples(names, shapes, shapes, names, anything),
    "reference": st.tuples(st.one_of(arrays, anything)),
    "reference_topk": st.tuples(st.one_of(arrays, small_logits()), shapes),
    "resolve_backend": st.tuples(names),
    "rounds_input": st.tuples(names, names),
    "softmax": st.tuples(
        st.one_of(small_logits(), arrays, anything),
        names,
        names,
        names,
        st.one_of(st.none(), shapes),
        st.one_of(st.none(), st.sampled_from([32, 64, 1024]), shapes),
        progresses,
    ),
    "softmax_topk": st.tuples(st.one_of(small_logits(), arrays, anything), shapes, names, names),
    "topk_errors": st.tuples(topk_results(), st.one_of(small_logits(), arrays, anything)),
}
PUBLIC = sorted(name for name in explorer.__all__ if inspect.isfunction(getattr(explorer, name)))


def test_every_public_function_is_fuzzed():
    assert sorted(CALLS) == PUBLIC


@pytest.mark.parametrize("name", PUBLIC)
@FUZZ
@given(data=st.data())
def test_public_function_raises_only_explorer_errors(name, data):
    args = data.draw(CALLS[name], label="args")
    only_our_errors(getattr(explorer, name), *args)


@FUZZ
@given(x=small_logits(), variant=st.sampled_from(list(explorer.VARIANTS)), progress=progresses)
def test_softmax_takes_any_progress_value_on_runs_that_otherwise_go_ahead(x, variant, progress):
    """The fuzz above seldom draws a run that passes every other check; here progress is the only hostile value,
    so a function given is called and what it returns is ignored."""
    only_our_errors(explorer.softmax, x, variant, "float32", "emulator", None, None, progress)


@FUZZ
@given(
    shape=st.tuples(st.integers(1, 64), st.integers(1, 64)),
    dtype=st.sampled_from(list(explorer.DTYPES)),
    backend=st.sampled_from(explorer.BACKENDS),
    variant=variants,
    traced=st.booleans(),
    acc=names,
)
def test_bytes_needed_and_check_fits_take_any_accumulator(shape, dtype, backend, variant, traced, acc):
    """acc as the only hostile value (beside the variant): an accumulator type or a refusal in words."""
    for fn in (explorer.bytes_needed, explorer.check_fits):
        only_our_errors(fn, *shape, dtype, backend, variant, None, traced, acc)


@FUZZ
@given(
    params=st.dictionaries(
        st.sampled_from(
            [
                "mean",
                "std",
                "low",
                "high",
                "scale",
                "spread",
                "height",
                "top",
                "slope",
                "noise",
                "value",
                "masked_rows",
                "rate",
                "x",
            ]
        ),
        anything,
        max_size=3,
    ),
    distribution=st.sampled_from(sorted(explorer.DISTRIBUTIONS)),
    seed=anything,
)
def test_make_input_parameters(params, distribution, seed):
    only_our_errors(explorer.make_input, distribution, 3, 7, "float16", seed, **params)


MARKDOWN = [  # what Markdown, GFM and Streamlit act on, alone and in the sequences they look for
    *"[]()<>*_`#~$:&!|\\-+.=@/ \n\t0123456789aehmnprstw",
    "http://",
    "HTTPS://",
    "www.",
    ":material/home:",
    ":material_home:",
    ":streamlit:",
    ":red[",
    "->",
    "<->",
    "--",
    ">=",
    "\u2060",
    "&amp;",
    "1. ",
    "    ",
]


@FUZZ
@given(text=st.lists(st.one_of(st.sampled_from(MARKDOWN), st.characters()), max_size=40).map("".join))
def test_as_text_shows_any_string_as_typed_and_never_as_markup(text):
    from test_sidebar import plain, shows

    from ui.text import as_text

    markdown = as_text(text)
    assert shows(markdown) == " ".join(text.split()).replace("\u2060", "")
    assert plain(markdown), markdown


json_values = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=30,
)


@FUZZ
@given(
    data=st.one_of(
        json_values, json_values.map(json.dumps), json_values.map(lambda v: json.dumps(v).encode()), anything, uploads
    )
)
def test_bench_load_refuses_anything_else_with_invalid_input(data):
    from explorer import bench

    try:
        bench.load(data)
    except explorer.InvalidInput as exc:
        assert str(exc) and len(str(exc)) < 300

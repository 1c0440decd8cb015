"""Softmax + top-k: indices against the float64 reference (ties to the lower index), probabilities
within the dtype's tolerance, every path of the launch (one block per row, several, any k)."""

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import explorer
from explorer.backends import cuda, fast_emulation
from explorer.topk import TopkResult, tie_within_rounding, topk_launch

DTYPES = ("float32", "float16", "bfloat16")
SHAPES = [(3, 1000), (2, 33), (1, 32000), (200, 2048), (1, 50257), (140, 4097)]  # rows >= 132: one block per row


def tolerance(dtype: str) -> float:
    return explorer.MAX_REL_FP32_ACC[dtype] * 2  # fp32 (m, d), then one product and one rounding


@pytest.mark.parametrize("variant", list(explorer.TOPK_VARIANTS))
@pytest.mark.parametrize("k", (1, 5, 8, 33, 64))
@pytest.mark.parametrize("dtype", DTYPES)
def test_emulated_topk_matches_float64(variant, k, dtype):
    for rows, cols in SHAPES:
        if k > cols:
            continue
        x = explorer.make_input("zipf", rows, cols, dtype, seed=rows * cols + k)
        result = explorer.softmax_topk(x, k, variant, backend="emulator")
        report = explorer.topk_errors(result, x)
        assert report.index_mismatch == 0, (rows, cols, report)
        assert report.max_rel <= tolerance(dtype), (rows, cols, report)
        assert result.values.shape == (rows, k) and result.values.dtype == x.dtype
        assert np.all(np.diff(result.values.astype(np.float64), axis=1) <= 0)  # descending


def test_ties_go_to_the_lower_index():
    x = np.zeros((2, 100), np.float32)
    x[0, [7, 3, 90]] = 5.0
    x[1, :] = 1.0
    result = explorer.softmax_topk(x, 4, backend="emulator")
    assert result.indices[0].tolist() == [3, 7, 90, 0]
    assert result.indices[1].tolist() == [0, 1, 2, 3]
    assert np.allclose(result.values[1], 0.01)


def test_masked_and_nan_logits():
    x = np.full((1, 50), -np.inf, np.float32)
    x[0, [10, 20]] = [1.0, 2.0]
    result = explorer.softmax_topk(x, 3, backend="emulator")
    assert result.indices[0].tolist() == [20, 10, 0]  # -inf ties: the lowest index
    assert result.values[0, 2] == 0
    x[0, 5] = np.nan
    nan_row = explorer.softmax_topk(x, 2, backend="emulator")
    assert nan_row.indices[0].tolist() == [20, 10] and np.isnan(nan_row.values).all()  # NaN ranks below -inf


@pytest.mark.parametrize(
    ("k", "message"), [(0, "k must be"), (65, "k must be"), (2.0, "k must be"), (True, "k must be")]
)
def test_bad_k_is_refused(k, message):
    x = explorer.make_input("normal", 2, 100)
    with pytest.raises(explorer.InvalidInput, match=message):
        explorer.softmax_topk(x, k)


def test_k_above_cols_and_bad_variant_are_refused():
    x = explorer.make_input("normal", 2, 10)
    with pytest.raises(explorer.InvalidInput, match="at most cols"):
        explorer.softmax_topk(x, 11)
    with pytest.raises(explorer.InvalidInput, match="unknown top-k variant"):
        explorer.softmax_topk(x, 2, "topk_magic")


def test_fused_moves_a_third_of_the_bytes():
    fused, unfused = (
        explorer.TOPK_VARIANTS[k].bytes_moved(512, 32000, 8, "float32") for k in ("topk_fused", "topk_unfused")
    )
    assert 2.9 < unfused / fused < 3.0


@pytest.mark.gpu
@pytest.mark.parametrize("variant", list(explorer.TOPK_VARIANTS))
@pytest.mark.parametrize("k", (1, 8, 50, 64))
@pytest.mark.parametrize("dtype", DTYPES)
def test_gpu_topk_equals_emulation_and_float64(variant, k, dtype):
    seed = int(np.random.SeedSequence().entropy % 2**31)
    for rows, cols in [*SHAPES, (140, 32000), (1, 262144), (2, 151936)]:
        if k > cols:
            continue
        x = explorer.make_input("zipf", rows, cols, dtype, seed)
        gpu = explorer.softmax_topk(x, k, variant, backend="cuda")
        report = explorer.topk_errors(gpu, x)
        assert report.index_mismatch == 0, (seed, rows, cols, report)
        assert report.max_rel <= tolerance(dtype), (seed, rows, cols, report)
        if variant == "topk_fused":  # selects on the logits: exactly the emulation's choice
            emu = explorer.softmax_topk(x, k, variant, backend="emulator")
            assert np.array_equal(gpu.indices, emu.indices), (seed, rows, cols)
            # below the dtype's smallest normal, relative error is measured against it (as topk_errors does)
            floor = explorer.FORMATS[dtype].smallest_normal * tolerance(dtype)
            assert np.allclose(
                gpu.values.astype(np.float64), emu.values.astype(np.float64), rtol=tolerance(dtype), atol=floor
            ), (seed, rows, cols)


def special_rows(cols: int, dtype: str) -> np.ndarray:
    """Rows that walk the kernels' rare paths: all ties, ties at the k-th value, -inf masks, NaN, and numbers
    only after a run of NaN (a warp's first batches hold no number: no bound yet)."""
    rng = np.random.default_rng(cols)
    x = rng.standard_normal((9, cols)).astype(np.float32)
    x[0] = 1.0  # every element ties: the lowest indices win
    x[1] = np.round(x[1])  # a few distinct values, many ties each
    x[2] = -np.inf  # all masked
    x[3, rng.random(cols) < 0.99] = -np.inf  # mostly masked: fewer finite values than k
    x[4, ::7] = np.nan  # NaN ranks below -inf
    x[5] = np.nan
    x[6] = np.arange(cols)  # ascending: every element enters the list
    x[7] = -np.arange(cols)  # descending: none after the first
    x[8, : cols // 2] = np.nan
    x[8, cols // 2 :] = np.round(x[8, cols // 2 :] * 2)  # after the NaN, a few values, many ties each
    return x.astype(explorer.DTYPES[dtype])


@pytest.mark.gpu
@pytest.mark.parametrize("k", (1, 7, 32, 33, 64))
@pytest.mark.parametrize("dtype", DTYPES)
def test_gpu_fused_topk_on_ties_masks_and_nan(k, dtype):
    # several blocks per row (a cluster, or merged through global memory; at k = 1 36 rows are clusters of 3 on 132 SMs);
    # a block per row, with few and with many batches a thread (a tie at the top met again in later batches,
    # the warps' shared floor)
    for rows_repeat, cols in [(1, 100), (1, 40000), (1, 150000), (4, 40000), (20, 3000), (20, 40000)]:
        x = np.tile(special_rows(cols, dtype), (rows_repeat, 1))
        gpu = explorer.softmax_topk(x, k, backend="cuda")
        emu = explorer.softmax_topk(x, k, backend="emulator")
        assert np.array_equal(gpu.indices, emu.indices), (cols, k)
        got, want = gpu.values.astype(np.float64), emu.values.astype(np.float64)
        assert np.array_equal(np.isnan(got), np.isnan(want)), (cols, k)
        floor = explorer.FORMATS[dtype].smallest_normal * tolerance(dtype)
        assert np.allclose(got, want, rtol=tolerance(dtype), atol=floor, equal_nan=True), (cols, k)


@pytest.mark.gpu
@pytest.mark.parametrize("k", (7, 32, 33, 64))
@pytest.mark.parametrize("dtype", ("float32", "bfloat16"))
def test_gpu_fused_topk_through_the_pool_on_ties_masks_and_nan(k, dtype):
    """Chunks of one batch select through topk.cu's shared-memory pool, and their lists merge through it too, in
    a cluster and through global memory: the special rows (all ties overflow the pool, which raises its
    bound), odd widths (loose head and tail elements)."""
    from explorer.backends import cuda_topk

    for cols, block, chunks, clusters in [
        (3001, 128, 2, (True, False)),
        (40003, 512, 5, (True, False)),
        (131000, 512, 16, (True, False)),
        (150000, 256, 37, (False,)),
    ]:
        x = special_rows(cols, dtype)
        for cluster in clusters:
            launch = topk_launch(len(x), cols, k, dtype, block=block, chunks=chunks, cluster=cluster)
            assert launch.template_args[4] == 1 and launch.chunks == chunks, launch  # pooled
            values, indices = cuda_topk.run_topk(True, launch, x, dtype, k, None)
            emu_values, emu_indices = fast_emulation.run_topk(True, launch, x, k)
            assert np.array_equal(indices, emu_indices), (cols, cluster)
            got, want = values.astype(np.float64), emu_values.astype(np.float64)
            floor = explorer.FORMATS[dtype].smallest_normal * tolerance(dtype)
            assert np.allclose(got, want, rtol=tolerance(dtype), atol=floor, equal_nan=True), (cols, cluster)


@pytest.mark.gpu
@pytest.mark.parametrize("k", (7, 50))
def test_gpu_fused_topk_cluster_of_pooled_chunks_with_empty_chunks(k):
    """A cluster of pooled chunks agrees on the row's bound first (topk.cu's row_bound); a chunk with no pack (more
    chunks than a short row fills, a geometry the launch rule never picks) mails no bound and its loose elements'
    list, and the row is still exact: 16 chunks over rows of 100 and 103 columns (loose tails)."""
    from explorer.backends import cuda_topk

    for cols in (100, 103):
        x = special_rows(cols, "float32")
        rule = topk_launch(len(x), 3001, k, "float32", block=128, chunks=2, cluster=True)
        vec, per, lists, _, pooled, _ = rule.template_args
        launch = dataclasses.replace(
            rule,
            grid=len(x) * 16,
            chunks=16,
            threads_per_row=16 * rule.block,
            template_args=(vec, per, lists, int(cols % vec != 0), pooled, 16),
        )
        values, indices = cuda_topk.run_topk(True, launch, x, "float32", k, None)
        emu_values, emu_indices = fast_emulation.run_topk(True, launch, x, k)
        assert np.array_equal(indices, emu_indices), cols
        got, want = values.astype(np.float64), emu_values.astype(np.float64)
        assert np.allclose(got, want, rtol=tolerance("float32"), atol=0, equal_nan=True), cols


@pytest.mark.gpu
def test_gpu_topk_repeatable_bitwise():
    x = explorer.make_input("normal", 3, 128256, "bfloat16", 1)
    first = explorer.softmax_topk(x, 50, backend="cuda")
    again = explorer.softmax_topk(x, 50, backend="cuda")
    assert first.values.tobytes() == again.values.tobytes() and np.array_equal(first.indices, again.indices)
    assert cuda.available()


def test_a_tie_within_rounding_is_what_the_kernels_cannot_order():
    """float32: each unfused probability p is within 8 + 2·ln(p_max / p) fp32 units of roundoff + 1 rounding
    of float64, so pairs closer than twice that may swap; pairs farther apart may not. Flushed values all tie."""
    u = 2.0**-24
    ref = np.array([0.25, 0.25, 0.25, 1e-39])
    got = ref * np.array([1 + 10 * u, 1 + 15 * u, 1 + 100 * u, 0.5])
    assert tie_within_rounding(got, ref, "float32").tolist() == [True, True, False, True]
    deep = 0.25 * np.exp(-np.array([0.0, 12.0, 12.0]))  # 12 below the max: 2 · (8 + 24) units
    assert tie_within_rounding(deep * np.array([1, 1 + 60 * u, 1 + 70 * u]), deep, "float32").tolist() == [
        True,
        True,
        False,
    ]
    assert tie_within_rounding(ref * (1 + 2.0**-9), ref, "bfloat16")[:3].all()  # 2 ulps of bf16


@pytest.mark.gpu
def test_gpu_topk_scratch_fits_a_call_with_more_chunks_than_the_last():
    """On a fresh stream, a call that leaves few chunk states (batch 1, k = 8) then one that needs more than
    the first call's scratch holds (15 rows of 300000, k = 1: 73 chunks a row) must get scratch for all of
    them: every row's argmax exact."""
    with cuda.cp.cuda.Stream():
        explorer.softmax_topk(explorer.make_input("normal", 1, 262144, "float32", 3), 8, backend="cuda")
        x = explorer.make_input("normal", 15, 300000, "float32", 4)
        got = explorer.softmax_topk(x, 1, backend="cuda")
    assert got.launch.chunks > 1 and got.launch.grid > 1024  # more chunk states than the first scratch's 1024
    assert np.array_equal(got.indices[:, 0], np.argmax(x, axis=1))
    ref_values, _ = explorer.reference_topk(x[:4], 1)
    assert np.allclose(got.values[:4], ref_values, rtol=tolerance("float32"))


def test_fused_emulation_keys_subnormal_logits_as_the_kernel_does():
    """The kernel's keys see each logit through fp32 arithmetic with flush-to-zero: subnormals tie with
    zero, so the lower index goes first, where an exact order would put the largest subnormal first."""
    tiny = np.float32(2.0**-140)
    x = np.array([[0.0, tiny, -tiny, 2 * tiny, -1.0]], np.float32)
    got = explorer.softmax_topk(x, 4, "topk_fused", backend="emulator")
    assert got.indices[0].tolist() == [0, 1, 2, 3]
    assert np.allclose(got.values[0], 1 / (4 + np.exp(-1.0)), rtol=1e-6)
    assert explorer.topk_errors(got, x).index_mismatch == 0  # against float64: ties within rounding


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ("float32", "bfloat16"))
def test_gpu_fused_topk_keys_subnormal_logits_as_the_emulation(dtype):
    tiny = 2.0**-130  # subnormal in fp32 and in bf16
    row = np.array([0.0, tiny, -tiny, 2 * tiny, -1.0, 3 * tiny, 0.0, -2 * tiny] * 8, np.float32)
    x = np.tile(row, (3, 1)).astype(explorer.DTYPES[dtype])
    gpu = explorer.softmax_topk(x, 16, "topk_fused", backend="cuda")
    emu = explorer.softmax_topk(x, 16, "topk_fused", backend="emulator")
    assert np.array_equal(gpu.indices, emu.indices)
    assert np.allclose(gpu.values.astype(np.float64), emu.values.astype(np.float64), rtol=tolerance(dtype))


@pytest.mark.parametrize("k, lists", [(8, 32), (50, 64)])
def test_chunk_lists_fit_the_pool_that_merges_them(k, lists):
    """topk.cu's merge_lists keeps one entry of every chunk's list in the block's pool (16 lists of entries):
    a row merged through global memory gets no more chunks than that, however long."""
    launch = topk_launch(1, 50_000_000, k, "float32", cluster=False)
    assert launch.template_args[2] == lists and launch.chunks == 16 * lists


@pytest.mark.parametrize("k", (1, 8))
def test_emulation_follows_a_tuned_batch_size(k):
    """topk_launch(per=...) (scripts/tune_topk.py --pers) sets the 16-byte packs a thread takes a batch: at k = 1
    the chunks still hold a batch of the block each, at k > 1 one batch at most (the pool's chunks), and the
    emulation folds (m, d) in those batches."""
    rows, cols = 1, 32000
    rule, wide = topk_launch(rows, cols, k, "float32"), topk_launch(rows, cols, k, "float32", per=8)
    assert (rule.template_args[1], wide.template_args[1]) == (4, 8)
    vec, per = wide.template_args[:2]
    batches = cols / (wide.block * per * vec)  # batches of the block in a row
    assert (wide.chunks <= batches if k == 1 else wide.chunks >= batches) and wide.chunks < rule.chunks
    x = explorer.make_input("normal", rows, cols, "float32", seed=7)
    values, indices = fast_emulation.run_topk(True, wide, x, k)
    report = explorer.topk_errors(TopkResult(values, indices, "emulator", "topk_fused", k, wide), x)
    assert report.index_mismatch == 0 and report.max_rel <= tolerance("float32"), report


def test_emulated_pooled_launch_folds_a_row_without_packs_as_the_kernel_does():
    """A row with no 16-byte pack (1×3 fp32) leaves chunk 0's loose elements to the batch loop and the block
    merge, pooled launch or not (topk.cu pools a chunk only where it holds packs): the emulation's (m, d) is the
    same, bit for bit, whichever flag the launch carries. The row sums differently in the two orders."""
    x = np.array([[-5.1107206, 2.521646, 2.3246632]], np.float32)
    launch = topk_launch(1, 3, 2, "float32")
    assert launch.template_args[4] == 1
    unpooled = dataclasses.replace(launch, template_args=(*launch.template_args[:4], 0, *launch.template_args[5:]))
    pooled_values, pooled_indices = fast_emulation.run_topk(True, launch, x, 2)
    values, indices = fast_emulation.run_topk(True, unpooled, x, 2)
    assert pooled_values.tobytes() == values.tobytes() and np.array_equal(pooled_indices, indices)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_torch_topk_peers_count_their_passes_and_int64_indices(dtype):
    """explorer.peers' top-k pipelines and the top-k page's bytes table count bytes through one function."""
    from explorer.peers import TopkPeer
    from explorer.topk import TORCH_TOPK_PASSES, torch_topk_bytes

    item = explorer.DTYPES[dtype].itemsize
    for name, passes in TORCH_TOPK_PASSES.items():
        peer = TopkPeer(name, None, name, lambda tx: tx, passes)
        assert peer.bytes_moved(4, 1000, 8, dtype) == torch_topk_bytes(passes, 4, 1000, 8, dtype)
        assert torch_topk_bytes(passes, 4, 1000, 8, dtype) == passes * 4 * 1000 * item + 4 * 8 * (item + 8)


# ---------------------------------------------------------------- the judge: reference_topk and topk_errors
# Every top-k accuracy test (here, test_extremes, test_gpu_properties, the GPU tests) asserts index_mismatch == 0 and
# max_rel <= a tolerance: these check that the report can say otherwise, against an order computed apart from
# fast_emulation.top_indices (which the emulation and reference_topk share).


def python_top_k(row, k: int) -> list[int]:
    """The k best columns of one row in plain Python: larger first, ties to the lower index, NaN below -inf."""

    def rank(j):
        v = float(row[j])
        return (1, 0.0, j) if math.isnan(v) else (0, -v, j)

    return sorted(range(len(row)), key=rank)[:k]


SPECIAL = st.sampled_from([0.0, -0.0, 1.0, 1.0, -1.0, 2.5, 1e-40, -np.inf, np.inf, np.nan])


@settings(max_examples=80, deadline=None)
@given(
    st.integers(1, 6).flatmap(
        lambda cols: st.tuples(
            hnp.arrays(
                np.float32, st.tuples(st.integers(1, 4), st.just(cols)), elements=SPECIAL | st.floats(-20, 20, width=32)
            ),
            st.integers(1, cols),
        )
    ),
    st.sampled_from(list(DTYPES)),
)
@example((np.array([[np.nan, -np.inf, 1.0, np.nan, -0.0, 0.0]], np.float32), 6), "float32")  # NaN below -inf
@example((np.array([[2.0, 1.0, 2.0, 2.0]], np.float32), 2), "bfloat16")  # ties to the lower index
def test_reference_topk_orders_as_plain_python_does(case, dtype):
    x32, k = case
    x = x32.astype(explorer.DTYPES[dtype])
    values, indices = explorer.reference_topk(x, k)
    ref = explorer.reference(x)
    for i, row in enumerate(x.astype(np.float64)):
        assert indices[i].tolist() == python_top_k(row, k), (row, k)
        np.testing.assert_array_equal(values[i], ref[i, indices[i]])


def judged(x: np.ndarray, indices, values=None) -> explorer.TopkReport:
    """topk_errors of a made-up result: these indices, with the float64 probabilities there (rounded to x's dtype)
    unless values are given."""
    indices = np.asarray(indices, np.int32)
    k = indices.shape[1]
    if values is None:
        values = np.take_along_axis(explorer.reference(x), indices.astype(np.int64), axis=1)
    values = np.asarray(values).astype(x.dtype)
    launch = topk_launch(*x.shape, k, "float32")
    return explorer.topk_errors(TopkResult(values, indices, "emulator", "topk_fused", k, launch), x)


def test_topk_errors_counts_wrong_indices_and_not_right_ones():
    x = np.array([[0.0, 3.0, 1.0, 2.0, -4.0, 0.5], [5.0, 4.0, 3.0, 2.0, 1.0, 0.0]], np.float32)
    right = [[1, 3, 2], [0, 1, 2]]
    report = judged(x, right)
    assert (report.index_mismatch, report.tie_swaps, report.rows_checked) == (0, 0, 2)
    assert report.max_rel <= explorer.FORMATS["float32"].unit_roundoff
    assert judged(x, [[1, 3, 4], [0, 1, 2]]).index_mismatch == 1  # a small probability in third place
    assert judged(x, [[3, 1, 2], [2, 1, 0]]).index_mismatch == 4  # two out of order, then two more
    swapped = judged(x, [[1, 3, 2], [5, 4, 3]])
    assert (swapped.index_mismatch, swapped.tie_swaps) == (3, 0)


def test_topk_errors_calls_a_swap_of_equal_probabilities_a_tie():
    x = np.array([[0.0, 2.0, 1.0, 2.0, 2.0]], np.float32)  # columns 1, 3 and 4 tie
    assert judged(x, [[1, 3, 4]]).tie_swaps == 0
    report = judged(x, [[4, 1, 3]])
    assert (report.index_mismatch, report.tie_swaps) == (0, 3)
    report = judged(x, [[1, 3, 2]])  # 1.0 where the third 2.0 belongs: e^-1 apart, no tie
    assert (report.index_mismatch, report.tie_swaps) == (1, 0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rel", [2.0**-6, 2.0**-3])
def test_topk_errors_max_rel_is_the_values_error_at_the_returned_indices(dtype, rel):
    x = np.array([[0.0, 3.0, 1.0, 2.0]]).astype(explorer.DTYPES[dtype])
    ref = explorer.reference(x)
    values = ref[:, [1, 3]].copy()
    values[0, 1] *= 1 + rel
    report = judged(x, [[1, 3]], values)
    u = explorer.FORMATS[dtype].unit_roundoff
    assert report.index_mismatch == 0 and abs(report.max_rel - rel) <= 3 * u
    # the values of a wrong index are measured against the reference at that index, not at the right one
    wrong = judged(x, [[1, 0]], ref[:, [1, 0]])
    assert wrong.index_mismatch == 1 and wrong.max_rel <= u


def test_topk_errors_leaves_rows_without_a_finite_reference_unchecked():
    x = np.array([[0.0, 3.0, 1.0], [0.0, np.nan, 1.0], [np.inf, 0.0, 1.0], [1.0, 2.0, 0.0]], np.float32)
    report = judged(x, [[1, 2], [0, 2], [1, 2], [1, 0]], np.full((4, 2), 0.3))
    assert report.rows_checked == 2 and report.tie_swaps == 0
    assert report.index_mismatch == 0  # rows 1 and 2 hold no meaningful top-k, whatever was returned
    ref = explorer.reference(x)
    checked = np.array([ref[0, 1], ref[0, 2], ref[3, 1], ref[3, 0]])  # rows 0 and 3 at the returned indices
    assert report.max_rel == pytest.approx(np.max(np.abs(np.float32(0.3) - checked) / checked), rel=1e-12)

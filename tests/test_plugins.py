"""Every variant is a complete plug-in: a registry entry whose launch rule gives a Launch, whose
kernels exist in its kernel file and are called through a known protocol, and whose emulation runs."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import explorer
from explorer import cuda_source, fast_launch
from explorer.backends import cuda, emulator, fast_emulation
from explorer.topk import TOPK_VARIANTS, topk_launch

SHAPES = [(3, 100), (2, 5000), (64, 131072), (1, 300000), (1, 1 << 24)]  # every kernel fast chooses among


def global_functions(filename: str) -> set[str]:
    return {function.name for function in cuda_source.global_functions(cuda.kernel_source(filename))}


@pytest.mark.parametrize("key", list(explorer.VARIANTS))
def test_a_variant_has_a_launch_rule_kernels_and_an_emulation(key):
    v = explorer.VARIANTS[key]
    defined = global_functions(v.kernel_file)
    assert set(v.functions) <= defined, (key, set(v.functions) - defined)
    assert key in emulator.EMULATIONS
    for dtype in v.dtypes:
        for rows, cols in SHAPES:
            launch = v.launch(rows, cols, None, dtype)
            assert isinstance(launch, explorer.Launch) and launch.protocol in cuda.LAUNCHERS
            for name in cuda.kernel_names(v, launch, dtype, v.accumulators[0]):
                assert name.split("<")[0] in v.functions, (key, name)  # the Kernels page shows v.functions
            if v.method == "fast":  # the shape's kernel has its own emulation
                assert launch.kernel in fast_emulation.KERNELS, (key, launch.kernel)
    x = explorer.make_input("normal", 2, 100)
    out = explorer.softmax(x, key, backend="emulator").out
    assert np.allclose(out, explorer.reference(x), rtol=1e-4, atol=1e-7)


@pytest.mark.parametrize("key", list(TOPK_VARIANTS))
def test_a_topk_variant_has_a_launch_rule_a_kernel_and_an_emulation(key):
    variant = TOPK_VARIANTS[key]
    assert set(variant.kernel_functions) <= global_functions(variant.kernel_file)
    for rows, cols in [*SHAPES, (1, 32000)]:
        launch = variant.launch(rows, cols, 8, "float32")
        assert launch.kernel in variant.kernel_functions and launch.grid == rows * launch.chunks
    x = explorer.make_input("normal", 2, 100)
    got = explorer.softmax_topk(x, 5, key, backend="emulator")
    assert got.indices.shape == (2, 5) and explorer.topk_errors(got, x).index_mismatch == 0


@pytest.fixture
def fresh_multiprocessors():
    explorer.geometry.multiprocessors.cache_clear()
    yield
    explorer.geometry.multiprocessors.cache_clear()


def test_launch_rules_size_grids_by_the_gpus_multiprocessors(monkeypatch, fresh_multiprocessors):
    """Grids follow the SM count of the GPU in use; without one, the H200's that the rules were tuned on."""
    split = explorer.VARIANTS["split_row"]
    monkeypatch.setattr(cuda, "multiprocessors", lambda: None)
    assert explorer.geometry.multiprocessors() == explorer.geometry.TUNED_SMS
    tuned = split.launch(1, 1 << 20, None, "float32").chunks, topk_launch(64, 262144, 8, "float32").chunks
    explorer.geometry.multiprocessors.cache_clear()
    monkeypatch.setattr(cuda, "multiprocessors", lambda: explorer.geometry.TUNED_SMS // 2)
    halved = split.launch(1, 1 << 20, None, "float32").chunks, topk_launch(64, 262144, 8, "float32").chunks
    assert tuned == (4 * 132, 4) and halved == (4 * 66, 4)  # topk: 65536-element chunks cap it before the SMs do
    assert topk_launch(100, 262144, 8, "float32").block == 128  # more rows than the SMs: 128-thread blocks


@pytest.mark.parametrize(
    "rows, cols, k, kernel, block, chunks",
    [
        (1, 32000, 1, "topk_cluster", 128, 15),  # a short row at batch 1: a cluster of chunks, merged on chip
        (1, 65537, 1, "topk", 128, 32),  # k = 1, a longer row: merged by its last block, through global memory
        (1, 32000, 8, "topk_cluster", 128, 16),  # k > 1: a cluster of chunks of one batch, in the fewest threads
        (1, 32000, 50, "topk_cluster", 512, 4),  # k > 8: 512 threads
        (4, 65536, 8, "topk_cluster", 256, 16),
        (1, 128256, 50, "topk_cluster", 512, 16),
        (1, 262144, 50, "topk_cluster", 512, 16),  # longer than 16 batches of 512: 512 threads of 32 elements
        (1, 262144, 8, "topk_cluster", 512, 16),
        (1, 300000, 8, "topk_cluster", 256, 16),  # longer than 16 of those: 16 chunks of 256 threads
        (64, 32000, 1, "topk_cluster", 512, 2),  # k = 1, up to a row an SM: clusters sharing the SMs in one wave
        (32, 262144, 1, "topk_cluster", 512, 4),
        (16, 32000, 1, "topk_cluster", 256, 7),  # 512-thread chunks would be fewer than the wave holds: 256
        (100, 128256, 1, "topk", 512, 1),  # enough rows to fill the GPU in one block a row
        (100, 128256, 8, "topk", 256, 2),  # k > 1: chunks of at least 65536 elements merged through global memory
        (512, 32000, 1, "topk", 256, 1),  # more rows than SMs: a block a row, 256 threads at k = 1 ...
        (512, 32000, 8, "topk", 128, 1),  # ... and 128 at k > 1
    ],
)
def test_topk_launch_rule_forms_clusters_for_few_short_rows(rows, cols, k, kernel, block, chunks):
    launch = topk_launch(rows, cols, k, "float32")
    assert (launch.kernel, launch.block, launch.chunks, launch.grid) == (kernel, block, chunks, rows * chunks)
    assert (launch.template_args[-1] == chunks) == (kernel == "topk_cluster")  # the cluster size is compiled in
    vec, per = launch.template_args[:2]
    pooled = k > 1 and rows < 16 and cols <= chunks * block * per * vec  # latency, chunks of one batch: the pool
    assert launch.template_args[4] == pooled


@pytest.mark.parametrize(
    "rows, cols, dtype, kernel",
    [
        (1, 2**24, "float32", "fast_stream"),  # too long to hold on chip
        (8, 2**22, "float32", "fast_stream"),
        (8, 2**22, "bfloat16", "fast_stream"),  # fast_row's 1024 slices would queue behind each other
        (12, 300000, "float32", "fast_row"),  # 444 slices: every one resident, exchanging through global memory
        (4, 2**20, "float32", "fast_row_cluster"),  # four blocks an SM: clusters exchanging through global memory
        (1, 2**20, "bfloat16", "fast_row_cluster"),  # two blocks an SM
        (1, 2**20, "float32", "fast_row_cluster"),
        (16, 2**22, "bfloat16", "fast_row"),  # fast_stream would read more than the L2 holds twice (not measured)
        (64, 2**20, "float32", "fast_row"),
        (8, 2**22 + 1, "bfloat16", "fast_row"),  # odd width: fast_stream would hold nothing (narrow packs)
    ],
)
def test_fast_sends_long_rows_to_fast_stream(rows, cols, dtype, kernel):
    assert explorer.VARIANTS["fast"].launch(rows, cols, None, dtype).kernel == kernel


def test_fast_stream_holds_nothing_with_narrow_packs():
    launch = fast_launch.fast_stream_launch(3, 1_000_003, "float32", held=2)
    assert launch.template_args[0] == 1 and launch.template_args[3] == 0 and launch.staging_bytes == 0


@settings(max_examples=200, deadline=None)
@given(
    rows=st.integers(1, 600),
    log_cols=st.integers(10, 26),
    dtype=st.sampled_from(explorer.geometry.DTYPE_NAMES),
    blocks_per_sm=st.integers(1, 4),
)
def test_fast_stream_holds_what_fits_in_fast_splits_chunks(rows, log_cols, dtype, blocks_per_sm):
    """fast_stream keeps fast_split's chunks and packs (so its arithmetic), and holds whole batches of its chunk in
    the shared memory that blocks_per_sm blocks an SM leave each block, 16-byte packs only."""
    cols = (1 << log_cols) + rows % 7
    stream = fast_launch.fast_stream_launch(rows, cols, dtype, blocks_per_sm)
    split = fast_launch.fast_split_launch(rows, cols, dtype, blocks_per_sm)
    assert (stream.grid, stream.block, stream.chunks) == (split.grid, split.block, split.chunks)
    vec, per, blocks, held = stream.template_args
    assert (vec, per, blocks) == split.template_args
    batch = stream.block * per * 16
    assert stream.staging_bytes == held * batch
    per_block = explorer.geometry.shared_per_multiprocessor() // blocks_per_sm - fast_launch.BLOCK_SHARED_RESERVED
    assert stream.shared_bytes <= per_block
    if held:
        assert vec * explorer.geometry.ITEMSIZE[dtype] == 16
        assert (held - 1) * stream.block * per < -(-(cols // vec) // stream.chunks)  # the last held batch has packs


@pytest.mark.gpu
def test_the_launch_rules_read_this_gpus_multiprocessors(fresh_multiprocessors):
    assert explorer.geometry.multiprocessors() == cuda.device_info()["multiprocessors"]


@settings(max_examples=200, deadline=None)
@given(rows=st.integers(1, 600), log_cols=st.integers(10, 26), dtype=st.sampled_from(explorer.geometry.DTYPE_NAMES))
def test_fast_split_launches_one_wave_covering_every_pack(rows, log_cols, dtype):
    """fast_split's grid is at most SPLIT_BLOCKS_PER_SM blocks an SM (what fast.cu's launch bounds let fit: one
    wave) unless the rows alone outnumber that, a row's chunks cover all its packs, and none is empty."""
    cols = (1 << log_cols) + rows % 7  # odd widths too
    launch = fast_launch.fast_split_launch(rows, cols, dtype)
    sms, vec = explorer.geometry.multiprocessors(), launch.template_args[0]
    assert launch.grid == rows * launch.chunks and launch.template_args[2] == fast_launch.SPLIT_BLOCKS_PER_SM
    assert launch.grid <= max(rows, fast_launch.SPLIT_BLOCKS_PER_SM * sms)
    packs = cols // vec
    chunk = -(-packs // launch.chunks)
    assert chunk * launch.chunks >= packs and chunk * (launch.chunks - 1) < packs

"""The real kernels on a GPU: against float64, against the emulation, and against themselves.

Skipped without a GPU (tests/conftest.py); must pass on the device. Inputs are fresh random
draws each run (the seed is in every failure message); outputs are poisoned before every launch
(explorer.backends.cuda.run raises if any element is left unwritten). explorer.errors measures max_rel over the
rows finite in both only: every check of max_rel also asks for no NaN/inf where float64 has none (nonfinite_mismatch).
"""

import numpy as np
import pytest

import explorer
from explorer.backends import cuda, emulator
from explorer.fast_launch import fast_row_launch, fast_split_launch, fast_stream_launch
from explorer.geometry import ITEMSIZE
from explorer.numerics import FORMATS, softmax_bound

pytestmark = pytest.mark.gpu

DTYPES = ("float32", "float16", "bfloat16")
TRACEABLE = [k for k, v in explorer.VARIANTS.items() if v.traceable]
NOT_NAIVE = [k for k in explorer.VARIANTS if k != "naive"]
ODD_SHAPES = [(1, 1), (3, 33), (1823, 781), (2, 4097)]


@pytest.fixture
def seed():
    return int(np.random.SeedSequence().entropy % 2**31)


def combos(keys, accs=DTYPES):
    return [(k, a) for k in keys for a in accs if a in explorer.VARIANTS[k].accumulators]


def run_both(x, key, acc, **kw):
    gpu = explorer.softmax(x, key, acc=acc, backend="cuda", **kw)
    emu = explorer.softmax(x, key, acc=acc, backend="emulator", **kw)
    return gpu, emu


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("key", NOT_NAIVE)
def test_fp32_accumulation_meets_dtype_tolerance(key, dtype, seed):
    x = explorer.make_input("normal", 257, 4096, dtype, seed)
    result = explorer.softmax(x, key, backend="cuda")
    assert result.backend == "cuda"
    report = explorer.errors(result.out, x)
    assert report.max_rel <= explorer.MAX_REL_FP32_ACC[dtype], (seed, report)
    assert report.nonfinite_mismatch == 0 and report.argmax_agreement == 1.0, (seed, report)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("key", "acc"), combos(NOT_NAIVE, ("float16", "bfloat16")))
def test_low_precision_accumulation_within_seed_bound(key, dtype, acc, seed):
    cols = 8192
    x = explorer.make_input("normal", 64, cols, dtype, seed)
    report = explorer.errors(explorer.softmax(x, key, acc=acc, backend="cuda").out, x)
    bound = softmax_bound(explorer.VARIANTS[key].launch(64, cols, None, dtype), x, acc)
    assert report.max_rel <= bound and report.nonfinite_mismatch == 0, (seed, report, bound)


@pytest.mark.parametrize("shape", ODD_SHAPES)
@pytest.mark.parametrize("key", list(explorer.VARIANTS))
def test_odd_shapes(key, shape, seed):
    x = explorer.make_input("normal", *shape, "float32", seed)
    report = explorer.errors(explorer.softmax(x, key, backend="cuda").out, x)
    bound = softmax_bound(explorer.VARIANTS[key].launch(*shape, None, "float32"), x, "float32")
    assert report.max_rel <= max(1e-5, bound) and report.nonfinite_mismatch == 0, (seed, report)


FAST_SHAPES = [
    (1, 1),
    (3, 33),
    (5, 781),
    (200, 781),
    (1000, 128),
    (257, 1000),
    (300, 2048),
    (2, 4097),
    (150, 4097),
    (300, 20000),
    (200, 65536),
    (140, 262144),
    (1, 2**20),
    (3, 1_000_003),
    (8, 4 * 2**20),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", FAST_SHAPES, ids=[f"{r}x{c}" for r, c in FAST_SHAPES])
def test_fast_dispatch_at_odd_shapes(shape, dtype, seed):
    """Every path of `fast` (warp groups, block, cluster, split; aligned or not) against float64."""
    x = explorer.make_input("normal", *shape, dtype, seed)
    result = explorer.softmax(x, "fast", backend="cuda")
    report = explorer.errors(result.out, x)
    assert report.max_rel <= explorer.MAX_REL_FP32_ACC[dtype], (seed, result.launch.describe(), report)
    assert report.nonfinite_mismatch == 0


@pytest.mark.parametrize("hold", (0, 1, 2, 3))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape",
    [
        (37, 3000, 1),
        (5, 20000, 1),
        (3, 70000, 1),
        (37, 3001, 1),
        (9, 20003, 1),
        (5, 70001, 1),
        (37, 3000, 4),
        (37, 3001, 4),
    ],
    ids=["block", "cluster", "global", "block-odd", "cluster-odd", "global-odd", "4-rows", "4-rows-odd"],
)
def test_fast_row_every_hold_matches_float64_and_the_emulation(shape, dtype, hold, seed):
    """fast_row with the slice in registers (plain or cp.async loads, or packs as loaded) or in shared memory,
    one block, a cluster or slices across the GPU, or four rows a block (37 rows: the last block holds one), rows
    aligned or split into loose head, packs and tail: against float64, and against the emulation within its bound."""
    *shape, rows_per_block = shape
    launch = fast_row_launch(*shape, dtype, 256, 32 if hold < 2 else 64, hold, rows_per_block)
    assert launch.block == rows_per_block * launch.threads_per_row // launch.chunks
    x = explorer.make_input("normal", *shape, dtype, seed)
    assert_fast_matches_float64_and_the_emulation(launch, x, dtype, seed)


@pytest.mark.parametrize("blocks_per_sm", (2, 3, 4))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 2**22), (3, 1_000_003), (2, 2**21 + 2)], ids=["aligned", "odd", "pairs"])
def test_fast_split_matches_float64_and_the_emulation(shape, dtype, blocks_per_sm, seed):
    """fast_split's two kernels (the finish walking each chunk back to front) at 16-byte, 8-byte and one-element
    loads, chunks ending inside a batch: against float64, and against the emulation within its bound."""
    launch = fast_split_launch(*shape, dtype, blocks_per_sm)
    x = explorer.make_input("normal", *shape, dtype, seed)
    assert_fast_matches_float64_and_the_emulation(launch, x, dtype, seed)


@pytest.mark.parametrize("blocks_per_sm", (2, 3))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape",
    [(1, 2**22), (3, 2**21 + 8), (1, 2**20), (400, 2**14), (3, 1_000_003)],
    ids=["aligned", "rows", "chunk-shorter-than-held", "one-chunk-a-row", "odd-nothing-held"],
)
def test_fast_stream_gives_fast_splits_bits(shape, dtype, blocks_per_sm, seed):
    """fast_stream (fast_split in one launch, the first batches of each chunk held in shared memory) writes
    exactly fast_split's bits, and so meets float64 and the emulation as fast_split does."""
    stream = fast_stream_launch(*shape, dtype, blocks_per_sm)
    split = fast_split_launch(*shape, dtype, blocks_per_sm)
    assert stream.chunks == split.chunks and stream.template_args[:3] == split.template_args
    x = explorer.make_input("normal", *shape, dtype, seed)
    assert_fast_matches_float64_and_the_emulation(stream, x, dtype, seed)
    got, _ = cuda.run(explorer.VARIANTS["fast"], stream, x, dtype, "float32", None)
    want, _ = cuda.run(explorer.VARIANTS["fast"], split, x, dtype, "float32", None)
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (seed, stream.describe())


@pytest.mark.parametrize("held", (0, 1))
@pytest.mark.parametrize("blocks_per_sm", (2, 3))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 2**22), (3, 2**21 + 8)], ids=["aligned", "rows"])
def test_fast_stream_streaming_16_byte_packs_gives_fast_splits_bits(shape, dtype, blocks_per_sm, held, seed):
    """fast_stream holding none or one batch of each chunk, so that most 16-byte packs are streamed (loaded a batch
    ahead at two blocks an SM) and read again back to front: fast_split's bits, and float64's tolerance."""
    stream = fast_stream_launch(*shape, dtype, blocks_per_sm, held)
    split = fast_split_launch(*shape, dtype, blocks_per_sm)
    vec = stream.template_args[0]
    assert stream.template_args == (*split.template_args, held) and vec * ITEMSIZE[dtype] == 16
    x = explorer.make_input("normal", *shape, dtype, seed)
    got, _ = cuda.run(explorer.VARIANTS["fast"], stream, x, dtype, "float32", None)
    want, _ = cuda.run(explorer.VARIANTS["fast"], split, x, dtype, "float32", None)
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (seed, stream.describe())
    report = explorer.errors(got, x)
    assert report.max_rel <= explorer.MAX_REL_FP32_ACC[dtype] and report.nonfinite_mismatch == 0, (seed, report)


def test_rows_over_clusters_share_the_streams_words_launch_after_launch(seed):
    """fast_row_cluster over a row of several clusters (ACROSS) tags the words its clusters post with the launch's
    epoch, so launches of other geometries one after another share the stream's words (cuda.row_exchange): fp32 and
    bf16 rows of 1M, two rows of 512K, a loose width, four blocks an SM (fp32 2×2M: 128 threads holding 64; bf16
    4×1M: 256 threads holding 32), fp32 1×2M in 66 clusters, then all again; each against float64 and the emulation
    the first time, and bit for bit the same the second."""
    shapes = [(1, 2**20, "float32"), (1, 2**20, "bfloat16"), (2, 2**19, "bfloat16"), (1, 2**20 + 3, "float32")]
    shapes += [(2, 2**21, "float32"), (4, 2**20, "bfloat16"), (1, 2**21, "float32")]
    launches = {shape: explorer.VARIANTS["fast"].launch(shape[0], shape[1], None, shape[2]) for shape in shapes}
    assert all(launch.kernel == "fast_row_cluster" and launch.template_args[-1] for launch in launches.values())
    inputs = {shape: explorer.make_input("normal", *shape, seed) for shape in shapes}
    first = {}
    for shape in shapes + shapes:
        out, _ = cuda.run(explorer.VARIANTS["fast"], launches[shape], inputs[shape], shape[2], "float32", None)
        if shape in first:
            assert out.tobytes() == first[shape], (seed, launches[shape].describe())
        else:
            assert_fast_matches_float64_and_the_emulation(launches[shape], inputs[shape], shape[2], seed)
            first[shape] = out.tobytes()


def assert_fast_matches_float64_and_the_emulation(launch, x, dtype, seed):
    """`fast` in this geometry on the GPU, against float64 and against the emulation within its bound."""
    gpu, _ = cuda.run(explorer.VARIANTS["fast"], launch, x, dtype, "float32", None)
    emu, _ = emulator.run(explorer.VARIANTS["fast"], launch, x, "float32", None)
    report = explorer.errors(gpu, x)
    assert report.max_rel <= explorer.MAX_REL_FP32_ACC[dtype], (seed, launch.describe(), report)
    assert report.nonfinite_mismatch == 0, (seed, launch.describe(), report)
    got, want = gpu.astype(np.float64), emu.astype(np.float64)
    rel = np.abs(got - want) / np.maximum(np.abs(want), FORMATS[dtype].smallest_normal)
    assert rel.max() <= fast_emulation_bound(dtype), (seed, launch.describe(), rel.max())


@pytest.mark.parametrize("block_size", (32, 96, 256, 1024))
@pytest.mark.parametrize("key", [k for k, v in explorer.VARIANTS.items() if v.takes_block_size])
def test_block_sizes(key, block_size, seed):
    x = explorer.make_input("zipf", 33, 3001, "float16", seed)
    gpu = explorer.softmax(x, key, backend="cuda", block_size=block_size)
    report = explorer.errors(gpu.out, x)
    assert report.max_rel <= 1e-3 and report.nonfinite_mismatch == 0, (seed, report)
    assert gpu.launch.block == block_size


@pytest.mark.parametrize("dist", ("nonfinite", "causal_mask"))
@pytest.mark.parametrize("key", NOT_NAIVE)
def test_nonfinite_pattern_equals_reference(key, dist, seed):
    params = {"masked_rows": 3} if dist == "causal_mask" else {"rate": 0.002}
    x = explorer.make_input(dist, 40, 700, "float32", seed, **params)
    report = explorer.errors(explorer.softmax(x, key, backend="cuda").out, x)
    assert report.nonfinite_mismatch == 0, (seed, report)
    assert report.max_rel <= 1e-5, (seed, report)


def test_naive_overflows_where_safe_variants_do_not(seed):
    x = explorer.make_input("large", 16, 1024, "float32", seed)
    naive = explorer.errors(explorer.softmax(x, "naive", backend="cuda").out, x)
    online = explorer.errors(explorer.softmax(x, "online_warp", backend="cuda").out, x)
    assert naive.nan_count > 0
    # Probabilities below 2^-126 flush to 0 under CuPy's -ftz=true: tiny absolute error, no NaN.
    assert online.nan_count == 0 and online.max_abs <= 1e-6 and online.argmax_agreement == 1.0
    assert online.underflow_count > 0


# Agreement of the GPU with the emulation (measured: README "Emulation vs GPU"). They differ only
# through expf (within 2 ulp of exp), which now and then flips a rounding in d or in the output.
def emulation_bound(dtype: str, acc: str) -> float:
    """|gpu - emu| / |emu| allowed: a few ulp of the accumulator (one flipped rounding in d) plus output rounding."""
    return 8 * FORMATS[acc].unit_roundoff + 2 * FORMATS[dtype].unit_roundoff


MUFU_EX2 = 2.0**-22  # ex2.approx.ftz.f32's relative error (2 ulp); the emulation's exp2 is exact, then rounded


def fast_emulation_bound(dtype: str) -> float:
    """emulation_bound for fast_row, plus the approximate exponentials on an output's path: its own, its
    thread's rescale to the row's max and, through d, those of the row's sum and merges (measured on the H200:
    5.1 units of 2^-23 on a 5×70001 fp32 row of 9 slices, over emulation_bound's 5)."""
    return emulation_bound(dtype, "float32") + 3 * MUFU_EX2


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("key", "acc"), combos(explorer.VARIANTS))
@pytest.mark.parametrize("dist", ("normal", "large"))
def test_gpu_agrees_with_emulation(key, dtype, acc, dist, seed):
    x = explorer.make_input(dist, 48, 1500, dtype, seed, **({"scale": 30.0} if dist == "large" else {}))
    gpu, emu = run_both(x, key, acc)
    got, want = gpu.out.astype(np.float64), emu.out.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.abs(got - want) / np.maximum(np.abs(want), FORMATS[dtype].smallest_normal)
    assert np.array_equal(np.isnan(got), np.isnan(want)), seed
    bound = fast_emulation_bound(dtype) if key == "fast" else emulation_bound(dtype, acc)  # fast: ex2.approx
    assert np.nanmax(rel) <= bound, (seed, float(np.nanmax(rel)))


LONG_TRACEABLE = [k for k in TRACEABLE if explorer.VARIANTS[k].family in ("block", "split")]


@pytest.mark.parametrize(
    ("key", "acc", "cols"),
    [(k, a, 999) for k, a in combos(TRACEABLE)] + [(k, a, 50000) for k, a in combos(LONG_TRACEABLE)],
)
def test_traces_agree_with_emulation(key, acc, cols, seed):
    x = explorer.make_input("normal", 5, cols, "float32", seed)
    gpu, emu = run_both(x, key, acc, trace_row=3)
    assert np.array_equal(gpu.trace.index, emu.trace.index)
    assert np.array_equal(gpu.trace.m, emu.trace.m, equal_nan=True)  # max is exact in any precision
    tol = 8 * FORMATS[acc].unit_roundoff
    valid = gpu.trace.index >= 0
    rel = np.abs(gpu.trace.d - emu.trace.d)[valid] / np.abs(emu.trace.d)[valid]
    assert rel.max() <= tol, (seed, float(rel.max()))
    assert len(gpu.trace.merges) == len(emu.trace.merges)
    for g, e in zip(gpu.trace.merges, emu.trace.merges):
        assert np.array_equal(g.left, e.left) and np.array_equal(g.right, e.right)
        assert np.allclose(g.d, e.d, rtol=tol, atol=0), seed
    assert gpu.trace.final_d == pytest.approx(emu.trace.final_d, rel=tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("key", TRACEABLE)
def test_traced_output_equals_untraced_bitwise(key, dtype, seed):
    x = explorer.make_input("zipf", 37, 2049, dtype, seed)
    plain = explorer.softmax(x, key, backend="cuda")
    traced = explorer.softmax(x, key, backend="cuda", trace_row=36)
    assert plain.out.tobytes() == traced.out.tobytes()
    assert traced.trace.final_d == pytest.approx(traced.trace.exact_final_d, rel=1e-5)


@pytest.mark.parametrize("key", list(explorer.VARIANTS))
def test_repeated_runs_are_bitwise_identical(key, seed):
    x = explorer.make_input("normal", 300, 1025, "bfloat16", seed)
    first = explorer.softmax(x, key, backend="cuda").out.tobytes()
    for _ in range(3):
        assert explorer.softmax(x, key, backend="cuda").out.tobytes() == first


def test_every_output_written_after_poison(seed):
    """Launch directly into a poisoned buffer and count survivors (run() does this too, on every call)."""
    cp = cuda.cp
    for key, v in explorer.VARIANTS.items():
        for rows, cols in ODD_SHAPES:
            x = explorer.make_input("normal", rows, cols, "float16", seed)
            x_dev = cuda.to_device(x)
            y_dev = cp.full(x_dev.shape, cuda.poison_value(x.dtype), x_dev.dtype)
            geometry = v.launch(rows, cols, v.default_block_size, "float16")
            cuda.launch(v, geometry, x_dev, y_dev, rows, cols, "float16", "float32")
            assert int((y_dev == cuda.poison_value(x.dtype)).sum()) == 0, (key, rows, cols)


def test_kernel_resources_are_reported():
    for key in explorer.VARIANTS:
        for rows, cols in ((4096, 1024), (512, 262144), (2, 2**20)):
            for res in explorer.kernel_resources(key, "float16", "float32", rows, cols):
                assert 0 < res["registers"] <= 255 and res["local_bytes"] >= 0, (key, res)


def test_bench_validates_then_times():
    from explorer import bench

    doc = bench.run(["online_warp", "online_block"], [(4096, 1024)], ["float32", "bfloat16"])
    bench.load(bench.dumps(doc))
    by_name = {(r["name"], r["dtype"]): r for r in doc["results"]}
    for dtype in ("float32", "bfloat16"):
        assert by_name[("copy", dtype)]["gbps"] > 100
        for key in ("online_warp", "online_block"):
            r = by_name[(key, dtype)]
            assert r["p10_us"] <= r["median_us"] <= r["p90_us"]
            assert r["max_rel"] <= explorer.MAX_REL_FP32_ACC[dtype]


def test_cuda_backend_reported_by_info():
    info = explorer.info()
    assert info["backend"] == "cuda" and info["gpu"]


def test_over_memory_request_is_refused_with_the_numbers(monkeypatch):
    """More than the card holds, and a run that does not fit beside another allocation: TooLarge, no CUDA
    out-of-memory error; once the memory is back, the same run works."""
    monkeypatch.setenv("EXPLORER_MAX_ELEMENTS", str(2**40))  # past the operator cap: memory decides
    need = explorer.budget.device_bytes(None, None, 2**18, 2**18, "float32", False)  # 256 GiB in, 256 GiB out, ...
    with pytest.raises(explorer.TooLarge, match=rf"needs about {need / 2**30:.2f} GiB .* GiB of GPU memory is free"):
        explorer.check_fits(2**18, 2**18, "float32", "cuda")
    x = explorer.make_input("normal", 1024, 2**16)  # 256 MiB in, 256 MiB out
    hog = cuda.cp.empty(cuda.free_bytes() - 2**28, np.uint8)  # another user holds all but 256 MiB
    try:
        with pytest.raises(explorer.TooLarge, match="of GPU memory is free"):
            explorer.softmax(x, "fast", backend="cuda")
    finally:
        del hog
        cuda.cp.get_default_memory_pool().free_all_blocks()
    report = explorer.errors(explorer.softmax(x, "fast", backend="cuda").out, x)
    assert report.max_rel < 1e-5 and report.nonfinite_mismatch == 0, report

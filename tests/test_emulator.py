"""Every variant × dtype × accumulator on the NumPy emulator, against float64 and against a scalar model
of kernels/softmax.cu written from the CUDA source (one element, one lane, one shuffle at a time)."""

from __future__ import annotations

import zlib

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import explorer
from explorer import fast_launch, numerics
from explorer.backends import emulator, fast_emulation

BF16 = np.dtype(ml_dtypes.bfloat16)
DT = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16), "bfloat16": BF16}
# The core's teaching kernels (softmax.cu): variants of other families are tested by their own suites.
CORE = {
    k: v
    for k, v in explorer.VARIANTS.items()
    if v.family in ("thread", "warp", "block") and v.method in ("naive", "safe", "online")
}
COMBOS = [(v, dt, acc) for v, var in CORE.items() for dt in var.dtypes for acc in var.accumulators]
NON_NAIVE = [c for c in COMBOS if c[0] != "naive"]
BLOCK_VARIANTS = [k for k, v in CORE.items() if v.takes_block_size]
BLOCK_SIZES = [32, 96, 256, 1024]


def run(x, variant, acc="float32", block_size=None):
    return explorer.softmax(x, variant, acc=acc, backend="emulator", block_size=block_size).out


def stable_seed(*parts) -> int:
    """A seed fixed across runs (hash() of strings is salted per process)."""
    return zlib.crc32(repr(parts).encode())


def tolerance(variant: str, acc: str, x: np.ndarray, block_size: int | None = None) -> float:
    """max_rel allowed vs float64 for in-range inputs: MAX_REL_FP32_ACC per output type for fp32 accumulation
    of rows up to 4096, else the bound (numerics.softmax_bound)."""
    rows, cols = x.shape
    out = numerics.dtype_name(x.dtype)
    if acc == "float32" and cols <= 4096 and variant != "naive":
        return explorer.MAX_REL_FP32_ACC[out]
    return numerics.softmax_bound(explorer.VARIANTS[variant].launch(rows, cols, block_size, out), x, acc)


def same_pattern_and_bits(a: np.ndarray, b: np.ndarray) -> None:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(np.isnan(a64), np.isnan(b64))
    keep = ~np.isnan(a64)
    assert a[keep].tobytes() == b[keep].tobytes(), np.argwhere((a64 != b64) & keep)[:5]


# ---------------------------------------------------------------- accuracy against float64


SHAPES_THREAD = [(1, 1), (3, 33), (17, 1000), (2, 4097)]
SHAPES_WIDE = [(1, 1), (3, 33), (1823, 781), (2, 4097)]


def accuracy_cases():
    for v, dt, acc in COMBOS:
        shapes = SHAPES_THREAD if explorer.VARIANTS[v].family == "thread" else SHAPES_WIDE
        for shape in shapes:
            yield pytest.param(v, dt, acc, shape, id=f"{v}-{dt}-acc_{acc}-{shape[0]}x{shape[1]}")


@pytest.mark.parametrize(("variant", "dtype", "acc", "shape"), list(accuracy_cases()))
def test_accuracy_on_normal_inputs(variant, dtype, acc, shape):
    rows, cols = shape
    seed = stable_seed(variant, dtype, acc, shape)
    x = explorer.make_input("normal", rows, cols, dtype=dtype, seed=seed)
    out = run(x, variant, acc)
    assert out.shape == x.shape and out.dtype == x.dtype
    r = explorer.errors(out, x)
    tol = tolerance(variant, acc, x)
    assert r.nonfinite_mismatch == 0 and r.nan_count == 0 and r.inf_count == 0
    assert r.max_rel <= tol, (r.max_rel, tol)
    # sum |out - ref| <= tol * sum |ref| = tol (tiny outputs are measured against the smallest normal)
    assert r.row_sum_dev <= tol * (1 + 1e-9) + cols * tol * explorer.FORMATS[dtype].smallest_normal


@pytest.mark.parametrize(("variant", "dtype", "acc"), COMBOS)
def test_fp16_range_inputs_within_bound(variant, dtype, acc):
    """Inputs spread wide but exactly representable in every accumulator (integers |x| <= 64)."""
    rng = np.random.default_rng(5)
    x = (
        rng.integers(-64, 7, (9, 77)).astype(np.float64).astype(DT[dtype])
    )  # 77 e^6 < 65504: naive's fp16 sum stays finite
    out = run(x, variant, acc)
    r = explorer.errors(out, x)
    assert r.nonfinite_mismatch == 0
    assert numerics.input_rounding(x, acc) == 0.0  # small integers: exact in every format
    assert r.max_rel <= tolerance(variant, acc, x)


@pytest.mark.parametrize("variant", BLOCK_VARIANTS)
@pytest.mark.parametrize("block_size", BLOCK_SIZES)
@pytest.mark.parametrize("acc", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(1, 1), (3, 33), (5, 1000), (2, 4097)])
def test_block_sizes(variant, block_size, acc, shape):
    x = explorer.make_input("normal", *shape, dtype="float32", seed=block_size + shape[1])
    res = explorer.softmax(x, variant, acc=acc, backend="emulator", block_size=block_size)
    assert res.block_size == block_size and res.launch.threads_per_row == block_size
    r = explorer.errors(res.out, x)
    assert r.nonfinite_mismatch == 0
    assert r.max_rel <= tolerance(variant, acc, x, block_size), r.max_rel


def test_block_size_changes_the_summation_order():
    """Different block sizes are genuinely different reductions (the block size reaches the emulation)."""
    x = explorer.make_input("normal", 64, 3000, seed=3)
    outs = {b: run(x, "online_block", "bfloat16", b) for b in BLOCK_SIZES}
    assert len({o.tobytes() for o in outs.values()}) > 1


# ---------------------------------------------------------------- non-finite patterns


def edge_matrix(dtype: str, acc: str, cols: int = 70, seed: int = 0) -> np.ndarray:
    """Named edge rows; huge values stay inside both the input's and the accumulator's range, and the
    largest of them (a power of two) is exact in both."""
    rng = np.random.default_rng(seed)
    huge = 2.0 ** np.floor(np.log2(0.9 * min(explorer.FORMATS[dtype].max_value, explorer.FORMATS[acc].max_value)))
    rows = []

    def base():
        return rng.normal(0.0, 1.0, cols)

    def put(row, value, k=1):
        row[rng.choice(cols, min(k, cols), replace=False)] = value
        return row

    rows.append(base())  # plain
    rows.append(put(base(), np.inf))  # +inf -> NaN row
    rows.append(put(base(), np.inf, 3))
    rows.append(put(base(), -np.inf, 5))  # -inf -> exactly 0
    rows.append(put(base(), np.nan))  # NaN -> NaN row
    rows.append(np.full(cols, -np.inf))  # all -inf -> NaN row
    r = np.full(cols, -np.inf)
    r[cols - 1] = 0.5
    rows.append(r)  # only the last element survives (lane cols-1 % 32)
    r = np.full(cols, -np.inf)
    r[0] = -3.0
    rows.append(r)
    rows.append(np.full(cols, np.inf))  # all +inf
    rows.append(put(put(base(), np.inf), -np.inf))  # +inf and -inf
    rows.append(put(put(base(), np.nan), np.inf))
    rows.append(put(base() * huge / 4, huge))  # huge magnitudes, both signs
    rows.append(np.full(cols, -huge))  # all equal, hugely negative: uniform
    rows.append(np.full(cols, huge))
    r = base()
    r[::2] = -huge
    rows.append(r)
    rows.append(np.where(np.arange(cols) > 35, -np.inf, base()))  # a causal-style row
    return np.array(rows).astype(DT[dtype])


@pytest.mark.parametrize(("variant", "dtype", "acc"), NON_NAIVE)
@pytest.mark.parametrize("cols", [1, 33, 70])
def test_nonfinite_pattern_matches_reference(variant, dtype, acc, cols):
    x = edge_matrix(dtype, acc, cols, seed=cols)
    out = run(x, variant, acc)
    ref = explorer.reference(x)
    got = out.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(ref))
    assert explorer.errors(out, x).nonfinite_mismatch == 0
    # -inf entries of a row that is otherwise fine give exactly 0
    fine = np.isfinite(ref).all(axis=1)
    x64 = x.astype(np.float64)
    assert np.all(got[fine & (x64 == -np.inf).any(axis=1)][x64[fine & (x64 == -np.inf).any(axis=1)] == -np.inf] == 0)
    # rows that are finite: close to float64, including the huge ones
    if fine.any():
        r = explorer.errors(out[fine], x[fine])
        assert r.max_rel <= tolerance(variant, acc, x[fine]), r.max_rel


@pytest.mark.parametrize(("variant", "dtype", "acc"), NON_NAIVE)
@pytest.mark.parametrize("dist", ["causal_mask", "nonfinite", "large"])
def test_nonfinite_pattern_on_distributions(variant, dtype, acc, dist):
    params = {"causal_mask": {"masked_rows": 3}, "nonfinite": {"rate": 0.02}, "large": {}}[dist]
    shape = (40, 45) if explorer.VARIANTS[variant].family == "thread" else (70, 300)
    x = explorer.make_input(dist, *shape, dtype=dtype, seed=2, **params)
    r = explorer.errors(run(x, variant, acc), x)
    assert r.nonfinite_mismatch == 0
    if dist == "causal_mask":
        assert r.nan_count == 3 * shape[1]  # the masked rows, and only they


@pytest.mark.parametrize("variant", BLOCK_VARIANTS)
@pytest.mark.parametrize("block_size", BLOCK_SIZES)
@pytest.mark.parametrize("acc", ["float32", "float16", "bfloat16"])
def test_block_sizes_nonfinite(variant, block_size, acc):
    x = edge_matrix("float32", acc, cols=1100, seed=block_size)
    assert explorer.errors(run(x, variant, acc, block_size), x).nonfinite_mismatch == 0


@pytest.mark.parametrize("dtype", list(DT))
@pytest.mark.parametrize("acc", list(DT))
def test_naive_overflows_visibly_on_large(dtype, acc):
    x = explorer.make_input("large", 8, 64, dtype=dtype, seed=1)
    out = run(x, "naive", acc)
    assert np.isfinite(explorer.reference(x)).all()
    assert np.isnan(out.astype(np.float64)).any()
    assert explorer.errors(out, x).nonfinite_mismatch > 0
    # the safe and online variants on the same input do not
    for v in (k for k in CORE if k != "naive"):
        if acc == "float16" and dtype != "float16" and np.abs(x.astype(np.float64)).max() > 65504:
            continue
        assert explorer.errors(run(x, v, acc), x).nonfinite_mismatch == 0, v


def test_naive_overflow_threshold_in_fp16_accumulator():
    """e^x overflows fp16 (65504) above x = ln 65504 ≈ 11.09: naive's sum turns inf."""
    x = np.array([[11.0, 0.0], [11.2, 0.0]], np.float32)
    out = run(x, "naive", "float16").astype(np.float64)
    ref = explorer.reference(x)
    bound = numerics.softmax_bound(explorer.VARIANTS["naive"].launch(1, 2), x[:1], "float16")  # x[0] holds in fp16
    np.testing.assert_allclose(out[0], ref[0], rtol=bound)
    assert np.isfinite(ref[1]).all()
    assert not np.isfinite(out[1]).all() or np.abs(out[1] - ref[1]).max() > 0.5


# ---------------------------------------------------------------- shapes, dtypes, 1-D, performance


@pytest.mark.parametrize(("variant", "dtype", "acc"), COMBOS)
def test_output_shape_dtype_and_one_dimensional_input(variant, dtype, acc):
    x2 = explorer.make_input("normal", 1, 45, dtype=dtype, seed=4)
    x1 = x2[0]
    out1 = run(x1, variant, acc)
    out2 = run(x2, variant, acc)
    assert out1.shape == (45,) and out1.dtype == DT[dtype]
    assert out2.shape == (1, 45) and out2.dtype == DT[dtype]
    assert out1.tobytes() == out2[0].tobytes()


@pytest.mark.parametrize("variant", list(CORE))
def test_non_contiguous_input_same_as_contiguous(variant):
    big = explorer.make_input("normal", 6, 80, seed=5)
    view = big[::2, 1::2]
    assert not view.flags.c_contiguous
    assert run(view, variant).tobytes() == run(np.ascontiguousarray(view), variant).tobytes()
    # the input is not modified
    assert big.tobytes() == explorer.make_input("normal", 6, 80, seed=5).tobytes()


def test_rows_are_independent():
    x = explorer.make_input("nonfinite", 50, 100, seed=6, rate=0.01)
    for v in CORE:
        full = run(x, v)
        for i in (0, 17, 49):
            assert full[i].tobytes() == run(x[i : i + 1], v)[0].tobytes(), (v, i)


@pytest.mark.parametrize("dtype", list(DT))
@pytest.mark.parametrize("cols", [3000, 3001])
def test_fast_row_with_several_rows_a_block_folds_each_row_as_one_row_a_block(dtype, cols):
    """Four rows a block give each row its own threads: the same bits as one row a block with as many threads,
    at an aligned and a loose width, within the bound of float64, the last block's missing rows aside."""
    x = explorer.make_input("normal", 37, cols, dtype=dtype, seed=cols)
    one, four = (fast_launch.fast_row_launch(37, cols, dtype, 128, 32, 1, r) for r in (1, 4))
    assert four.block == 4 * one.block and four.threads_per_row == one.threads_per_row and four.grid == 10
    out_one, _ = emulator.run(explorer.VARIANTS["fast"], one, x, "float32", None)
    out_four, _ = emulator.run(explorer.VARIANTS["fast"], four, x, "float32", None)
    assert out_four.tobytes() == out_one.tobytes()
    report = explorer.errors(out_four, x)
    assert report.max_rel <= explorer.MAX_REL_FP32_ACC[dtype] and report.nonfinite_mismatch == 0, report


def cluster_model_row(x_row: np.ndarray, launch, prescale: bool) -> np.ndarray:
    """fast_row_cluster on one aligned row, thread by thread: each thread's packs, its max, its warp's max, its exps
    on that max added in order, the warp's butterfly sum; then every warp's state of a cluster folded as each warp
    folds them (lane l: entries l, l + 32, ..., rescaled to the largest m, then a butterfly); a row of several
    clusters then folds theirs (lane l: clusters l, l + 32, ... merged in order, then a butterfly of merges); and
    the output."""
    f32 = np.float32
    vec, per, hold, cluster = launch.template_args[:4]
    slices, threads = launch.chunks, launch.block
    packs = x_row.size // vec
    chunk = -(-packs // slices)
    xs = x_row.astype(f32)

    def rescale(m_from, m_to):  # fast_rescale: exactly 1 between equal maxima
        return f32(1) if m_from == m_to else fast_emulation.exp_shifted(np.array([m_from], f32), m_to)[0]

    def butterfly(lanes):
        for offset in (16, 8, 4, 2, 1):
            lanes = [f32(lanes[i] + lanes[i ^ offset]) for i in range(32)]
        return lanes[0]

    held, entries = {}, []
    for s in range(slices):
        for w in range(threads // 32):
            for t in range(w * 32, w * 32 + 32):
                ps = [s * chunk + k * threads + t for k in range(per)]
                held[s, t] = [p * vec + i for p in ps if p < min(packs, (s + 1) * chunk) for i in range(vec)]
            m = f32(np.fmax.reduce([xs[j] for t in range(w * 32, w * 32 + 32) for j in held[s, t]], initial=-np.inf))
            shift = f32(0) if m == -np.inf else m
            sums = []
            for t in range(w * 32, w * 32 + 32):
                d = f32(0)
                for j in held[s, t]:
                    if prescale and abs(shift) <= fast_emulation.PRESCALE_MAX:
                        e = fast_emulation.exp2_less(xs[j : j + 1], np.array([shift * fast_emulation.LOG2E], f32))[0]
                    else:
                        e = f32(0) if xs[j] == -np.inf else fast_emulation.exp_shifted(xs[j : j + 1], shift)[0]
                    d = f32(d + e)
                sums.append(d)
            entries.append((m, butterfly(sums)))

    def fold_entries(states):
        m_all = f32(np.fmax.reduce([m for m, _ in states], initial=-np.inf))
        lanes = [f32(0)] * 32
        for j, (m, d) in enumerate(states):
            lanes[j % 32] = f32(lanes[j % 32] + f32(d * rescale(m, m_all)))
        return m_all, butterfly(lanes)

    def merge(a, b):  # fast_merge: acc_max (a NaN m stays; +0 over -0), then each d rescaled to it
        (m1, d1), (m2, d2) = a, b
        m = m2 if m2 > m1 or (m2 == m1 and np.signbit(m1)) else m1
        with np.errstate(invalid="ignore", over="ignore"):
            return m, f32(f32(d1 * rescale(m1, m)) + f32(d2 * rescale(m2, m)))

    per_cluster = cluster * (threads // 32)
    clusters = [fold_entries(entries[c : c + per_cluster]) for c in range(0, len(entries), per_cluster)]
    if len(clusters) == 1:
        row_m, row_d = clusters[0]
    else:
        lanes = [(f32(-np.inf), f32(0))] * 32
        for c, state in enumerate(clusters):
            lanes[c % 32] = merge(lanes[c % 32], state)
        for offset in (16, 8, 4, 2, 1):
            lanes = [merge(lanes[i], lanes[i ^ offset]) for i in range(32)]
        row_m, row_d = lanes[0]
    y = np.zeros(xs.size, f32)
    for s, t in held:
        for j in held[s, t]:
            if hold >= 2 and prescale and abs(row_m) <= fast_emulation.PRESCALE_MAX:
                y[j] = fast_emulation.normalised_less(xs[j : j + 1][None], np.array([row_m]), np.array([row_d]))[0, 0]
            elif hold >= 2:
                y[j] = fast_emulation.fast_normalise(xs[j : j + 1], row_m, row_d)[0]
            else:
                w_m = entries[s * (threads // 32) + t // 32][0]
                e = (
                    f32(0)
                    if xs[j] == -np.inf
                    else fast_emulation.exp_shifted(xs[j : j + 1], 0 if w_m == -np.inf else w_m)[0]
                )
                c = f32(rescale(w_m, row_m) * f32(f32(1) / row_d))
                y[j] = fast_emulation.ftz(np.array([f32(e * c)]))[0]
    return y


@pytest.mark.parametrize(
    ("dtype", "cols", "threads", "elements", "hold"),
    [
        ("float32", 3000, 64, 16, 1),
        ("float32", 8192, 128, 4, 3),
        ("bfloat16", 16384, 128, 8, 3),
        ("float16", 3000, 64, 16, 2),
        ("float32", 4096, 32, 4, 1),  # 32 slices: four clusters of 8, their states folded across the clusters
        ("bfloat16", 8192, 32, 8, 1),
    ],
)
def test_fast_row_cluster_emulation_matches_a_thread_by_thread_model(dtype, cols, threads, elements, hold):
    """The emulation's fast_row_cluster (warps' exps on the warp's max, every warp's state folded at once, then a row's
    clusters folded) gives the bits of a thread-by-thread model of the kernel, with more warps in the cluster than a
    warp has lanes, rows over several clusters, and rows holding -inf, NaN and +inf."""
    launch = fast_launch.fast_row_launch(4, cols, dtype, threads, elements, hold)
    assert launch.kernel == "fast_row_cluster" and launch.chunks > 1
    assert launch.template_args[-1] == fast_launch.across_clusters(launch)  # the kernel's ACROSS flag
    rng = np.random.default_rng(cols + hold)
    x = rng.normal(0.0, 3.0, (4, cols))
    x[1, rng.choice(cols, cols // 3, replace=False)] = -np.inf
    x[2, 7] = np.nan
    x[3, 50] = np.inf
    x = x.astype(DT[dtype])
    got = fast_emulation.emulate_fast(x, launch)
    want = np.stack([cluster_model_row(x[i], launch, dtype != "float32") for i in range(4)]).astype(x.dtype)
    same_pattern_and_bits(got, want)


def test_fast_row_takes_several_rows_a_block_only_where_a_row_is_one_slice():
    assert fast_launch.fast_row_launch(8, 2048, "bfloat16", 64, 32, 1, 4).block == 4 * 64
    assert fast_launch.fast_row_launch(8, 70000, "float32", 256, 32, 1, 4) is None  # a row of several slices


# (rows, cols): (grid, block) of fast_across_launch, fp32 and bf16
ACROSS_SHAPES = {
    (1, 2**20): ((256, 128), (256, 128)),  # two blocks an SM: four would leave blocks of 64 threads
    (2, 2**19): ((256, 128), (256, 128)),
    (1, 2**21): ((528, 128), (528, 128)),  # four an SM
    (4, 2**20): ((512, 128), (512, 256)),  # fp32: 256 threads holding 32 fit four an SM, not five; 128 holding 64 six
    (2, 2**21): ((512, 128), (512, 256)),
}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_few_long_rows_spread_over_every_sm_in_small_blocks(dtype):
    """fast_across_launch: a few long rows in clusters of 8 over every SM, four blocks an SM where the blocks keep
    128 threads or more, else two; each row an even count of clusters, every pack held as loaded, and room for more
    blocks an SM than asked for; a row whose blocks would have 96 threads or fewer stays at one block an SM."""
    itemsize = np.dtype(DT[dtype]).itemsize
    for (rows, cols), shapes in ACROSS_SHAPES.items():
        launch = fast_launch.fast_launch(rows, cols, 1024, dtype)
        assert (launch.grid, launch.block) == shapes[dtype == "bfloat16"] and launch.template_args[2] == 3
        assert fast_launch.across_clusters(launch) and launch.chunks % (2 * fast_launch.CLUSTER_ACROSS) == 0
        held = launch.template_args[1] * 16 // itemsize
        assert launch.chunks * launch.block * held >= cols
        assert fast_launch.cluster_blocks_per_sm(3, held, itemsize, launch.block) > -(-launch.grid // 132)
    short = fast_launch.fast_launch(1, 300000, 1024, dtype)
    assert (short.grid, short.block) == (128, 96) and fast_launch.across_clusters(short)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_rows_in_one_cluster_keep_their_512_thread_blocks(dtype):
    """fast.cu caps 16-bit slices holding 32 as loaded at 256 threads only where a row spans several clusters: a row
    of 262145 columns (16 blocks of 512, loose elements) stays in one cluster, not fast_stream."""
    launch = fast_launch.fast_launch(1, 262145, 1024, dtype)
    assert (launch.kernel, launch.block, launch.chunks) == ("fast_row_cluster", 512, 16)
    assert not fast_launch.across_clusters(launch)
    assert fast_launch.cluster_max_threads(3, 32, 2, across=False) == 1024
    assert fast_launch.cluster_max_threads(3, 32, 2, across=True) == 256


def test_the_launch_bounds_say_how_many_cluster_blocks_an_sm_holds():
    """fast.cu's cluster_threads / cluster_min_blocks, as the rule reads them: an fp32 slice holding 64 as loaded is
    compiled for 256 threads, three an SM; others for the register budget's block, as many as it makes room for."""
    assert fast_launch.cluster_blocks_per_sm(3, 64, 4, 256) == 3
    assert fast_launch.cluster_blocks_per_sm(3, 64, 4, 512) == 0
    assert fast_launch.cluster_blocks_per_sm(3, 64, 2, 256) == 2  # compiled for 512 threads
    assert fast_launch.cluster_blocks_per_sm(3, 32, 4, 128) == 8
    assert fast_launch.cluster_blocks_per_sm(2, 64, 2, 512) == 3
    assert fast_launch.cluster_blocks_per_sm(3, 32, 2, 256) == 5  # 16-bit holding 32: five an SM, 48 registers
    assert fast_launch.cluster_blocks_per_sm(3, 64, 4, 160) == 4  # 80 registers: six warps a partition
    assert fast_launch.cluster_blocks_per_sm(3, 64, 4, 128) == 6


def test_rows_whose_clusters_would_not_leave_room_in_every_gpc_stay_in_fewer_blocks():
    """Four blocks an SM only where the launch bounds promise five: fp32 16×300000 would need 160-thread blocks at 80
    registers (four an SM; the H200's driver holds 62 of the 64 clusters), so it keeps fast_stream; 8×300000 takes
    160-thread blocks holding 32 (six an SM)."""
    assert fast_launch.fast_launch(16, 300000, 1024, "float32").kernel == "fast_stream"
    eight = fast_launch.fast_launch(8, 300000, 1024, "float32")
    assert (eight.grid, eight.block, eight.template_args[1] * 4) == (512, 160, 32)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_streamed_rows_take_the_fuller_grid_then_three_an_sm_where_a_sixth_to_a_half_of_the_l2_is_read_twice(
    dtype,
):
    """fast_stream's blocks an SM as timed in fast-notes item 34. The fuller grid: 96×300000 fills 192 of 264 slots at
    two, 384 of 396 at three; 80×300000 240 of 264 at two, 320 of 396 at three. Then the band: 24×1M and 12×2M read
    23 MiB twice, 64×300000 13 MiB (three); 1×16M 7 MiB, 8×4M 39, and 32×300000 is held whole (two). fp32: two."""

    def per_sm(rows, cols):
        launch = fast_launch.fast_launch(rows, cols, 1024, dtype)
        assert launch.kernel == "fast_stream"
        return launch.template_args[2]

    assert per_sm(96, 300000) == 3 and per_sm(80, 300000) == 2
    assert fast_launch.stream_blocks_per_sm(300, 2**23, dtype) == 3  # 300 one-chunk rows: one wave of 396, not 264 + 36
    for rows, cols in ((24, 2**20), (12, 2**21), (64, 300000)):
        assert per_sm(rows, cols) == 3 and fast_launch.stream_blocks_per_sm(rows, cols, "float32") == 2
    for rows, cols in ((1, 2**24), (8, 2**22), (32, 300000), (16, 2**20)):
        assert per_sm(rows, cols) == 2


def test_every_variant_runs_at_64x4096():
    """Every registry variant (the core's and any other that takes float32), one 64×4096 run each, against
    float64. How long it takes is left to the suite's per-test timeout: no test depends on the box's speed."""
    x = explorer.make_input("normal", 64, 4096, seed=7)
    todo = [k for k, v in explorer.VARIANTS.items() if "float32" in v.dtypes and "float32" in v.accumulators]
    assert set(CORE) <= set(todo)
    for v in todo:
        out = run(x, v)
        assert out.shape == x.shape
        report = explorer.errors(out, x)  # max_rel counts the rows finite in both: a NaN row needs its own check
        assert report.max_rel <= explorer.MAX_REL_FP32_ACC["float32"] and report.nonfinite_mismatch == 0, (v, report)


# ---------------------------------------------------------------- a scalar model of the CUDA source


class Model:
    """common.cuh, one scalar at a time: values held as float32 that the accumulator type holds exactly."""

    def __init__(self, acc: str):
        self.dt = DT[acc]

    def r(self, v) -> np.float32:  # from_float<Acc>, then to_float (overflow to inf is the point)
        with np.errstate(over="ignore"):
            return np.float32(np.array(np.float32(v)).astype(self.dt).astype(np.float32))

    @staticmethod
    def expf(v) -> np.float32:  # the emulator's expf: exp in float64 rounded once (documented), -ftz=true
        with np.errstate(over="ignore", invalid="ignore"):
            return ftz(np.float32(np.exp(np.float64(v))))

    @staticmethod
    def sub(a, b) -> np.float32:
        with np.errstate(invalid="ignore", over="ignore"):
            return np.float32(a) - np.float32(b)

    def mul(self, a, b):
        with np.errstate(invalid="ignore", over="ignore"):
            return self.r(np.float32(a) * np.float32(b))

    def add(self, a, b):
        with np.errstate(invalid="ignore", over="ignore"):
            return self.r(np.float32(a) + np.float32(b))

    @staticmethod
    def max(a, b):  # acc_max: a NaN candidate loses, +0 wins over -0
        return b if b > a or (b == a and np.signbit(a)) else a

    def exp_diff(self, a, b):
        return self.r(self.expf(self.sub(a, b)))

    def rescale(self, m_from, m_to):
        return self.r(1.0) if m_from == m_to else self.exp_diff(m_from, m_to)

    def online_step(self, s, x):
        m = self.max(s[0], x)
        term = self.r(0.0) if x == -np.inf else self.exp_diff(x, m)
        return (m, self.add(self.mul(s[1], self.rescale(s[0], m)), term))

    def merge(self, a, b):
        m = self.max(a[0], b[0])
        return (m, self.add(self.mul(a[1], self.rescale(a[0], m)), self.mul(b[1], self.rescale(b[0], m))))

    def empty(self):
        return (self.r(-np.inf), self.r(0.0))

    def butterfly(self, states, op):
        for offset in (16, 8, 4, 2, 1):
            states = [op(states[lane], states[lane ^ offset]) for lane in range(32)]
        return states


def ftz(v) -> np.float32:
    """-ftz=true: an fp32 result below 2^-126 in magnitude becomes 0."""
    v = np.float32(v)
    return np.float32(0.0) if abs(v) < np.float32(2.0**-126) else v


def normalise(xa, s, dtype):
    """y = expf(to_acc(x) - m) / d in fp32, rounded once to T (common.cuh's normalise)."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore", under="ignore"):
        y = ftz(Model.expf(Model.sub(xa, s[0])) / np.float32(s[1]))
    return np.array(np.float32(y)).astype(dtype)


def model_row(variant: str, row: np.ndarray, acc: str, block: int) -> np.ndarray:
    """One row through the kernel of softmax.cu, thread by thread."""
    M = Model(acc)
    xs = [np.float32(v) for v in row.astype(np.float32)]  # to_float(x[j])
    xa = [M.r(v) for v in xs]  # from_float<Acc>(to_float(x[j]))
    cols, dtype = len(xs), row.dtype
    out = np.empty(cols, dtype)
    if variant == "naive":
        d = M.r(0.0)
        for v in xs:
            d = M.add(d, M.r(M.expf(v)))
        for j, v in enumerate(xs):
            with np.errstate(invalid="ignore", divide="ignore", under="ignore"):
                out[j] = np.array(ftz(M.expf(v) / np.float32(d))).astype(dtype)
        return out
    if variant in ("safe_thread", "online_thread"):
        s = M.empty()
        if variant == "safe_thread":
            m = s[0]
            for v in xa:
                m = M.max(m, v)
            d = s[1]
            for v in xa:
                d = M.add(d, M.exp_diff(v, m))
            s = (m, d)
        else:
            for v in xa:
                s = M.online_step(s, v)
        for j, v in enumerate(xa):
            out[j] = normalise(v, s, dtype)
        return out
    threads = 32 if variant == "online_warp" else block
    if variant == "safe_block":
        ms = []
        for t in range(threads):
            m = M.r(-np.inf)
            for j in range(t, cols, threads):
                m = M.max(m, xa[j])
            ms.append(m)
        warps = threads // 32
        wm = [M.butterfly(ms[w * 32 : (w + 1) * 32], M.max)[0] for w in range(warps)]
        top = [wm[lane] if lane < warps else M.r(-np.inf) for lane in range(32)]
        m = M.butterfly(top, M.max)[0]
        ds = []
        for t in range(threads):
            d = M.r(0.0)
            for j in range(t, cols, threads):
                d = M.add(d, M.exp_diff(xa[j], m))
            ds.append(d)
        wd = [M.butterfly(ds[w * 32 : (w + 1) * 32], M.add)[0] for w in range(warps)]
        top = [wd[lane] if lane < warps else M.r(0.0) for lane in range(32)]
        s = (m, M.butterfly(top, M.add)[0])
        for j, v in enumerate(xa):
            out[j] = normalise(v, s, dtype)
        return out
    states = []
    for t in range(threads):
        s = M.empty()
        for j in range(t, cols, threads):
            s = M.online_step(s, xa[j])
        states.append(s)
    if variant == "online_warp":
        lane_states = M.butterfly(states, M.merge)
        for j, v in enumerate(xa):
            out[j] = normalise(v, lane_states[j % 32], dtype)  # each lane normalises with its own state
        return out
    warps = threads // 32
    warp_states = [M.butterfly(states[w * 32 : (w + 1) * 32], M.merge)[0] for w in range(warps)]
    top = [warp_states[lane] if lane < warps else M.empty() for lane in range(32)]
    s = M.butterfly(top, M.merge)[0]
    for j, v in enumerate(xa):
        out[j] = normalise(v, s, dtype)
    return out


def model_cases():
    for v, dt, acc in COMBOS:
        blocks = [64, 96] if explorer.VARIANTS[v].takes_block_size else [None]
        for b in blocks:
            yield pytest.param(v, dt, acc, b, id=f"{v}-{dt}-acc_{acc}-b{b}")


@pytest.mark.parametrize(("variant", "dtype", "acc", "block_size"), list(model_cases()))
def test_emulator_matches_scalar_model_of_the_cuda_source(variant, dtype, acc, block_size):
    rng = np.random.default_rng(stable_seed(variant, dtype, acc, block_size))
    cols = 101
    x = rng.normal(0.0, 2.0, (5, cols))
    x[1, rng.choice(cols, 4, replace=False)] = -np.inf
    x[2, 7] = np.nan
    x[3, 50] = np.inf
    x[4] = np.round(x[4], 1) * 3  # values that round differently in fp16 / bf16 accumulators
    x = x.astype(DT[dtype])
    got = run(x, variant, acc, block_size)
    expected = np.stack([model_row(variant, x[i], acc, block_size or 256) for i in range(x.shape[0])])
    same_pattern_and_bits(got, expected)


def test_acc_class_rounds_every_operation_to_the_accumulator():
    """Acc: the emulator's accumulator arithmetic, against the model on random pairs."""
    rng = np.random.default_rng(9)
    for name in DT:
        acc, model = emulator.Acc(name), Model(name)
        a = rng.normal(0, 4, 200).astype(np.float32).astype(DT[name])
        b = rng.normal(0, 4, 200).astype(np.float32).astype(DT[name])
        for i in range(200):
            for op in ("mul", "add", "max", "exp_diff"):
                got = np.float32(np.asarray(getattr(acc, op)(a[i : i + 1], b[i : i + 1])).astype(np.float32)[0])
                want = getattr(model, op)(np.float32(a[i].astype(np.float32)), np.float32(b[i].astype(np.float32)))
                assert got.tobytes() == np.float32(want).tobytes(), (name, op, a[i], b[i])


# ---------------------------------------------------------------- x rounded to a coarser accumulator


@pytest.mark.parametrize("variant", [v for v in CORE if v != "naive"])
@pytest.mark.parametrize(
    ("value", "acc"), [(100.25, "bfloat16"), (5.015, "bfloat16"), (100.03, "float16"), (3.0e38, "bfloat16")]
)
def test_single_element_row_is_exactly_one(variant, value, acc):
    """softmax of one element is 1; here x - m is exactly 0 (x enters both as the same rounded value)."""
    x = np.array([[value]], np.float32)
    assert float(x.astype(DT[acc]).astype(np.float64)[0, 0]) != float(x[0, 0])  # the input does round
    out = run(x, variant, acc).astype(np.float64)
    assert out[0, 0] == 1.0


@pytest.mark.parametrize("variant", [v for v in CORE if v != "naive"])
def test_large_in_range_value_with_a_coarser_accumulator(variant):
    x = np.array([[60000.0, 0.0]], np.float16)  # exact in fp16; bf16 holds 59904 and 60160, not 60000
    out = run(x, variant, "bfloat16").astype(np.float64)
    # e^(x~ - x~) / (1 + e^(0 - x~)) = 1 / 1 and e^(-x~) / 1 = 0 in fp32: the reference, [1, e^-60000]
    np.testing.assert_array_equal(out, [[1.0, 0.0]])
    assert explorer.errors(run(x, variant, "bfloat16"), x).nonfinite_mismatch == 0


def test_rounding_term_of_the_bound_is_needed_and_sufficient():
    """Row [100.25, 99]: bf16 holds 100.25 as 100 (spacing 0.5, tie to even), so the gap 1.25 becomes 1.
    The output is then off by far more than 3·n·u + u_out, but within the bound's 2·max|x|·u_acc term."""
    x = np.array([[100.25, 99.0]], np.float32)
    held = x.astype(DT["bfloat16"]).astype(np.float64)
    assert held[0, 0] != 100.25 and held[0, 1] == 99.0
    out = run(x, "online_warp", "bfloat16")
    r = explorer.errors(out, x)
    launch = explorer.VARIANTS["online_warp"].launch(1, 2)
    n = numerics.sequential_terms(launch, 2)  # a fold, 5 merge levels
    assert r.max_rel > explorer.error_bound(n, "bfloat16", "float32")
    assert numerics.input_rounding(x, "bfloat16") == 100.25
    assert r.max_rel <= numerics.softmax_bound(launch, x, "bfloat16")
    # against the softmax of the held values, only the accumulation's bound remains
    np.testing.assert_allclose(
        out.astype(np.float64), explorer.reference(held), rtol=explorer.error_bound(n, "bfloat16", "float32")
    )


@settings(max_examples=60, deadline=None)
@given(
    m=st.floats(-fast_emulation.PRESCALE_MAX, fast_emulation.PRESCALE_MAX, width=32),
    gaps=st.lists(st.floats(0, 80, width=32), min_size=1, max_size=64),
    d=st.floats(1, 2**20, width=32),
)
def test_prescaled_exponent_stays_within_its_stated_error(m, gaps, d):
    """fast_common.cuh's prescaled exps (16-bit slices in shared memory): 2^{x·log2e - b}, b rounded once,
    within |m|·log2e·2^-24 of the difference-first form's exponent (a relative 1.5e-5 at |m| = 256), beside the
    rounding of the exponent t itself that both forms have (|t|·2^-24 each), for the sums and the output."""
    m32, d32 = np.float32(m), np.float32(d)
    gap = np.asarray(gaps, np.float32)[None, :]
    x = (m32 - gap).astype(np.float32)
    exact = fast_emulation.exp_shifted(x, m32)
    less = fast_emulation.exp2_less(x, (m32 * fast_emulation.LOG2E)[None, None])
    out_exact = fast_emulation.fast_normalise(x, np.full((1, 1), m32), np.full((1, 1), d32))
    out_less = fast_emulation.normalised_less(x[None], np.full((1, 1), m32), np.full((1, 1), d32))[0]
    for got, want, t in ((less, exact, gap * 1.5), (out_less, out_exact, gap * 1.5 + np.log2(d))):
        bound = np.log(2) * (abs(m) * 1.5 * 2.0**-24 + 2 * t * 2.0**-24) + 8 * 2.0**-24
        big = want > 1e-30  # both flush alike far below the 16-bit formats' range
        assert np.all(np.abs(got - want)[big] <= (bound * want)[big]), (m, got, want)

"""fast's launch rules: which kernel of fast.cu runs a shape, in what geometry (measured on the H200 with
scripts/tune_fast.py; docs/tune-fast-h200.json)."""

from __future__ import annotations

from .geometry import (
    ITEMSIZE,
    Launch,
    cdiv,
    l2_bytes,
    multiprocessors,
    pow2_at_least,
    shared_per_multiprocessor,
    two_stage_launch,
)

CLUSTER_ACROSS = 8  # a row over several clusters: clusters of 8, each rank polling its own copy of the clusters' words
# (fp32 / bf16 1×1M, device time, % of copy: 48.1-48.9 / 42.9-43.4; 15 clusters of 8 at one block an SM 47.9-48.2 /
# 42.2-42.4; with one copy polled by every block, clusters of 8 47.6-47.7 / 42.3-42.5 against clusters of 4 46.5-46.7 /
# 42.4-42.5 and slices exchanging through global memory 41.0-41.2 / 33.2, fp32 1×1048579 78-80 against 74-75):
# docs/fast-notes.md items 27-28; how many blocks an SM, items 29-30.
ACROSS_BLOCK = 128  # a few long rows over every SM: blocks of 128 threads or more (fast_across_launch): fp32 / bf16
# 1×1M at 53.2 / 46.0 % of copy in 256 blocks, 51.2 / 44.8 in 128 of 256 threads, 51.0 / 43.8 in 264 of 128 (33
# clusters), 49.7 / 41.8 in 384 of 96; 64-thread blocks lose (bf16 1×300000 33.6 against 35.5); device time,
# docs/fast-notes.md item 29
ACROSS_BLOCKS_PER_SM = (4, 2)  # tried in turn (fast_across_launch): bf16 4×1M / 2×2M / 3×1M / 8×300000 at 67.2-67.8 /
# 65.1-65.3 / 60.5-60.8 / 93.5-97.6 % of copy in four blocks an SM against 60.1-60.3 / 59.3-59.4 / 55.0-55.5 / 85.9-89.6
# in two; fp32 4×1M / 8×512K / 2×2M / 1×4M 69.7-69.8 / 71.3-71.4 / 67.8-68.1 / 66.3-66.6 against fast_row's 65.5-66.3 /
# 66.5-66.7 and two an SM's 63.0-63.2 / 62.2-62.3 (device time, docs/fast-notes.md item 30)
SM_REGISTERS = 64 * 1024  # an SM's (and a block's) 32-bit registers on the H100 / H200
SM_THREADS = 2048
SM_PARTITIONS = 4  # an SM's schedulers, each with a quarter of its registers
MAX_THREAD_REGISTERS = 255  # allocated as 256
MAX_CLUSTER = 16  # Hopper's largest cluster (above 8 it is non-portable: the CUDA backend opts the kernel in)
REGISTER_ELEMENTS_PER_BLOCK = 32 * 1024  # fast_row's registers for row data: 32 a thread at 1024 threads, more
MAX_REGISTER_ELEMENTS = 128  # ... in smaller blocks, up to this (fast.cu's launch bounds follow the same rule)
MAX_STAGING_BYTES = 96 * 1024  # fast_row's shared memory for a slice: two blocks still fit on an SM
FAST_WARP_BLOCK = 64  # two warps a block: fp32 x256 at 98.5 % of copy against 97.6 in four, 16-bit x128 ... x1024
# at 99.2-100.1 against 98.4-99.5 (device time); one warp loses 9-22 points in fp32
SPLIT_BLOCK = 512
SPLIT_BLOCKS_PER_SM = 3  # fast_split's 512-thread blocks an SM: one wave
STREAM_BLOCKS_PER_SM = 2  # fast_stream's unless asked for: each batch's loads go out before the batch before is
# folded or written (fast.cu, registers allowing): fp32 1×16M / 8×4M at 73.4-73.5 / 65.9 % of copy against
# 70.8-70.9 / 61.0-61.2 at three (item 31) ...
STREAM_MORE_BLOCKS_PER_SM = 3  # ... or this many (no loading ahead) for the 16-bit rows stream_blocks_per_sm picks
# (23 shapes timed at both, device time: docs/fast-notes.md item 34)
STREAM_FILL_MARGIN = 0.04  # a last wave this much fuller at the other count wins (bf16 96×300000: 192 of 264 slots at
# two, 384 of 396 at three: 74.8-74.9 % against 65.0)
BLOCK_SHARED_RESERVED = 1024  # shared memory the CUDA runtime keeps for each block
STREAM_STATIC_SHARED = 4608  # fast_stream's static shared memory (block merge, 512 staged states), rounded up
STREAM_GRID_PER_SM = 4  # fast_row slices exchanging through global memory over this many blocks an SM: fast_stream


def fast_vector(cols: int, dtype: str) -> int:
    """Elements per load in fast_warp and fast_stream: 16-byte packs where every row starts aligned, else
    narrower (fast_row and the top-k kernel load 16-byte packs at any width)."""
    itemsize = ITEMSIZE[dtype]
    return next(v for v in (16 // itemsize, 4, 2, 1) if v <= 16 // itemsize and cols % v == 0)


def fast_row_launch(
    rows: int, cols: int, dtype: str, threads: int, elements: int, hold: int = 1, rows_per_block: int = 1
) -> Launch | None:
    """fast_row with at most `threads` threads per row (or slice), each holding `elements` elements of its row;
    as many slices (blocks) per row as that needs, balanced, in a Hopper cluster where they fit in
    one; longer rows spread over every SM, in clusters of CLUSTER_ACROSS where a block on each SM holds them
    (their clusters' states exchanged through global memory), else slices exchanging through global memory.
    None if the slices could not all be resident at once (the row is too long to hold on chip).
    Loads are 16-byte packs at any width (a row's loose head and tail go to its first threads).
    `hold`: where the slice waits (fast.cu): 0 registers, 1 registers after cp.async through shared
    memory, 2 shared memory, 3 registers as loaded (16-bit elements two to a register, exps taken twice).
    `rows_per_block`: rows a block holds, each with its own threads, where a row needs one slice (None
    otherwise)."""
    vec = 16 // ITEMSIZE[dtype]
    per = max(1, elements // vec)
    packs = max(1, cols // vec)  # whole packs in a row at most
    slices = cdiv(packs, threads * per)
    if slices > multiprocessors() or (rows_per_block > 1 and slices > 1):  # every slice resident: one an SM
        return None
    if slices > MAX_CLUSTER:  # exchanged through global memory: few rows spread over every SM
        slices = max(slices, min(multiprocessors() // rows, cdiv(packs, 32 * per)))
        across = CLUSTER_ACROSS * (slices // CLUSTER_ACROSS)  # in clusters, where a block on each SM holds the rows
        if across * threads * per < packs:
            across += CLUSTER_ACROSS
        cluster, slices = (CLUSTER_ACROSS, across) if rows * across <= multiprocessors() else (1, slices)
    else:
        cluster = pow2_at_least(slices) if slices > 1 else 1
        slices = max(slices, cluster)
    threads = 32 * cdiv(cdiv(packs, slices), 32 * per)
    block = threads * rows_per_block
    staging = block * per * 16 if hold in (1, 2) else 0  # registers alone (HOLD 0 and 3) stage nothing
    if staging > MAX_STAGING_BYTES:
        if hold == 2:
            return None
        hold, staging = 0, 0
    held = per * vec
    most = (
        cluster_max_threads(hold, held, ITEMSIZE[dtype], slices > cluster)
        if cluster > 1
        else fast_row_max_threads(hold, held, ITEMSIZE[dtype])
    )
    if (hold != 2 and held > MAX_REGISTER_ELEMENTS) or block > most:
        return None
    return _row_launch(rows, cols, vec, per, hold, threads, slices, cluster, rows_per_block, staging)


def _row_launch(
    rows: int,
    cols: int,
    vec: int,
    per: int,
    hold: int,
    threads: int,
    slices: int,
    cluster: int,
    rows_per_block: int = 1,
    staging: int = 0,
) -> Launch:
    """fast_row's (cluster == 1) or fast_row_cluster's launch: `slices` blocks a row of `threads` threads (a row's
    threads, times rows_per_block), PER packs of VEC a thread; the template arguments in fast.cu's order."""
    loose = int(cols % vec != 0)
    return Launch(
        grid=cdiv(rows, rows_per_block) * slices,
        block=threads * rows_per_block,
        shared_bytes=272 + staging,
        staging_bytes=staging,
        threads_per_row=threads * slices,
        kernel="fast_row_cluster" if cluster > 1 else "fast_row",
        template_args=(vec, per, hold, cluster, loose, int(slices > cluster))
        if cluster > 1
        else (vec, per, hold, loose, rows_per_block),
        chunks=slices,
        protocol="cluster" if cluster > 1 else "slices",
    )


def fast_across_launch(rows: int, cols: int, dtype: str, elements: int) -> Launch | None:
    """fast_row_cluster for a few long rows spread over every SM, each thread holding its packs as loaded (HOLD 3): the
    rows' blocks four an SM, else two, each row's clusters (of CLUSTER_ACROSS) an even count; blocks of ACROSS_BLOCK
    threads holding `elements` a thread, else up to twice ACROSS_BLOCK threads, else twice the elements, whichever
    first holds the row where fast.cu's launch bounds promise more such blocks an SM than asked for (whole clusters
    then fit in every GPC). Fewer blocks an SM where the blocks would have ACROSS_BLOCK - 32 threads' packs or
    fewer; None where no count holds the rows."""
    itemsize = ITEMSIZE[dtype]
    vec = 16 // itemsize
    packs = max(1, cols // vec)
    shapes = (
        (ACROSS_BLOCK, elements),
        (2 * ACROSS_BLOCK, elements),
        (ACROSS_BLOCK, 2 * elements),
        (2 * ACROSS_BLOCK, 2 * elements),
    )
    for per_sm in ACROSS_BLOCKS_PER_SM:
        slices = CLUSTER_ACROSS * 2 * (per_sm * multiprocessors() // rows // (2 * CLUSTER_ACROSS))
        if slices <= MAX_CLUSTER:
            continue
        for most, held in shapes:
            needed = cdiv(packs, slices * (held // vec))  # threads a block needs
            if needed > most or held > MAX_REGISTER_ELEMENTS:
                continue
            if needed <= ACROSS_BLOCK - 32:
                break
            threads = max(ACROSS_BLOCK, 32 * cdiv(needed, 32))
            if cluster_blocks_per_sm(3, held, itemsize, threads) > per_sm:
                return _row_launch(rows, cols, vec, held // vec, 3, threads, slices, CLUSTER_ACROSS)
    return None


def across_clusters(launch: Launch) -> bool:
    """Whether a launch spreads each row over several clusters (fast_row_cluster's ACROSS: the clusters' states
    exchanged through global memory)."""
    return launch.protocol == "cluster" and launch.chunks > launch.template_args[3]


def fast_row_max_threads(hold: int, held: int, itemsize: int) -> int:
    """fast.cu's fast_row_threads: the block size a fast_row instantiation is compiled for."""
    if hold < 2 and held == 64 and itemsize == 2:
        return 64  # 10 blocks an SM: 96 registers a thread, not 128
    if hold == 2:
        return 512  # 3 blocks an SM: 40 registers a thread
    return REGISTER_ELEMENTS_PER_BLOCK // held if held > 32 else 1024


def cluster_bounds(hold: int, held: int, itemsize: int, across: bool) -> tuple[int, int]:
    """fast.cu's cluster_threads and cluster_min_blocks: fast_row_cluster is compiled without the 16-bit cap, and
    slices held as loaded in small blocks for at most 256 threads, several an SM (fp32 holding 64 three; 16-bit
    holding 32 five where a row spans several clusters)."""
    capped = {(64, 4): 3, (32, 2): 5 if across else 0}.get((held, itemsize), 0) if hold == 3 else 0
    if capped:
        return 256, capped
    return fast_row_max_threads(hold, held, 4), 3 if hold == 2 else 0


def cluster_max_threads(hold: int, held: int, itemsize: int, across: bool) -> int:
    return cluster_bounds(hold, held, itemsize, across)[0]


def cluster_blocks_per_sm(hold: int, held: int, itemsize: int, threads: int) -> int:
    """Blocks of `threads` threads a fast_row_cluster instantiation over several clusters (ACROSS) fits on an SM at
    the most registers a thread its launch bounds allow: registers are allocated 8 a thread at a time, and warps to
    the SM's four partitions, each with a quarter of the registers (fp32 blocks of 160 threads at 80 registers: four
    an SM, not five; the driver holds 62 clusters of 8 of them, not 64). 0 where the block is larger than it is
    compiled for."""
    most, least = cluster_bounds(hold, held, itemsize, across=True)
    if threads > most:
        return 0
    partition = SM_REGISTERS // SM_PARTITIONS
    warps_bound = cdiv(most, 32) * max(1, least)  # the warps the bounds fit on an SM
    registers = min(MAX_THREAD_REGISTERS + 1, partition // (32 * cdiv(warps_bound, SM_PARTITIONS))) // 8 * 8
    warps = SM_PARTITIONS * (partition // (32 * registers))
    return min(warps // cdiv(threads, 32), SM_THREADS // threads)


# fast's choices, measured on the H200 (scripts/tune_fast.py; docs/tune-fast-h200.json, whose `kernels` field
# dates the fast.cu each shape was timed with). fast_warp up to these widths, with
# (up to width, elements per lane) (fp32 x512: 96.3 % of copy in fast_warp, 101.5 % in fast_row's one-warp
# blocks, device time); then fast_row by width: (up to width, threads per block at most,
# elements per thread, hold). Threads given as several counts: the first whose slices fill their blocks
# (a row's slices, rounded up to a power-of-two cluster, can leave blocks part-empty: bf16 151936 ran at
# 82 % of copy in 16 blocks of 160 threads, 87 % in 8 of 320; 131072 at 91 % in 8 of 256, 89 % in 4 of 512).
# Rows that would need more slices than the GPU holds blocks at once go to fast_stream.
FAST_WARP_ELEMENTS = {
    "float32": ((128, 8), (256, 16)),
    "float16": ((1024, 32),),
    "bfloat16": ((1024, 32),),
}
# A cluster's slices hold their packs as loaded (HOLD 3), whose warps' states the cluster folds at once: bf16
# 65536 / 131072 / 262144 at 97.0 / 95.9 / 94.4 % of copy against 90.9 / 90.2 / 85.0 for shared-memory slices with
# the same fold and 93.8 / 92.9 / 91.0 with the block merge before it; fp32 32768 ... 131072 at 98.1-98.9 % against
# 92.5-94.0 and 97.6-97.8 (device time, docs/results/cluster-hold-h200.txt).
FAST_ROW_16BIT = (
    (2048, 512, 64, 1),
    (32768, 512, 64, 3),  # one block holding its packs as loaded: bf16 4096 / 8192 at 96.4-96.6 / 95.7-96.3 % of copy
    # against 94.8-95.0 / 94.6-95.1 held in shared memory, 16384 / 32768 at 97.1 / 96.3 against 96.1 / 95.5 in a
    # cluster of two shared-memory slices; fp16 4096 95.7-96.3 against 94.8-95.3 (device time,
    # docs/results/cluster-hold-h200.txt)
    (262144, (256, 512), 64, 3),
    (2**21, 512, 32, 3),  # long rows: register-held slices over several clusters (fast_across_launch) or exchanging
    # through global memory where it does not take them (bf16 4×1M / 2×2M in fast_row's slices at 58.4 / 55.3 % of
    # copy held as loaded, 57.1 / 54.1 through shared memory; device time)
    (2**62, 512, 64, 2),
)
FAST_ROW_SHAPES = {
    "float32": (
        (4096, 256, 16, 1),
        (8192, 256, 32, 1),
        (16384, 512, 32, 1),
        (196608, 512, 32, 3),  # fp32 151936 at 95.4 % of copy in 16 blocks of 320 threads, 91.4 in 16 of 160
        (262144, 256, 64, 3),  # 262144 at 94.6 % in 16 blocks of 256 threads holding 64 (three an SM), 92.1 in 16
        # of 512 holding 32
        (2**62, 256, 32, 3),  # as above (fp32 4×1M in fast_row's slices: 65.7 % of copy held as loaded, 64.2
        # through shared memory; device time)
    ),
    "float16": FAST_ROW_16BIT,
    "bfloat16": FAST_ROW_16BIT,
}


def fast_launch(rows: int, cols: int, block: int, dtype: str) -> Launch:
    """Registers hold the row: lanes of a warp for short rows, a block or several (slices) for longer
    ones, in registers or shared memory (a few long rows: many small blocks an SM, fast_across_launch); rows too
    long to hold on chip go to fast_stream (part of each chunk held, the rest read twice), as do slices exchanging
    through global memory that would queue behind each other (over STREAM_GRID_PER_SM blocks an SM: bf16 8×4M at
    67.7 % of copy in fast_stream, 61.2 in fast_row's 1024 slices; fp32 4×1M's 512 slices, under the limit, 64.4
    against 63.2, timed on fast_row's slices since fast_across_launch takes those rows first; scripts/tune_fast.py
    --only split --long) where fast_stream reads the input about once (stream_reads_once; larger inputs were not
    measured and keep fast_row)."""
    vec = fast_vector(cols, dtype)
    packs = cols // vec
    per_lane = next((e for width, e in FAST_WARP_ELEMENTS[dtype] if cols <= width), None)
    if per_lane is not None and (vec > 1 or cols <= 256):
        return fast_warp_launch(rows, cols, dtype, min(32, pow2_at_least(cdiv(packs, max(1, per_lane // vec)))))
    threads, elements, hold = next((t, e, h) for width, t, e, h in FAST_ROW_SHAPES[dtype] if cols <= width)
    counts = threads if isinstance(threads, tuple) else (threads,)
    if hold == 3 and cdiv(cols, counts[-1] * elements) > MAX_CLUSTER:  # more slices than a cluster holds
        across = fast_across_launch(rows, cols, dtype, elements)
        if across is not None:
            return across
    tried = {t: fast_row_launch(rows, cols, dtype, t, elements, hold) for t in counts}
    full = next((launch for t, launch in tried.items() if launch is not None and launch.block == t), None)
    on_chip = full or tried[counts[-1]]
    if on_chip is None:
        return fast_stream_launch(rows, cols, dtype)
    if on_chip.protocol == "slices" and on_chip.chunks > 1 and on_chip.grid > STREAM_GRID_PER_SM * multiprocessors():
        stream = fast_stream_launch(rows, cols, dtype)
        if stream_reads_once(stream, rows, cols, dtype):
            return stream
    return on_chip


def stream_reads_once(stream: Launch, rows: int, cols: int, dtype: str) -> bool:
    """Whether fast_stream reads its input from memory about once: it holds some of it on chip (16-byte packs),
    and what it reads twice fits in the L2 (bf16 8×4M: 25 MB held, 39 MB twice)."""
    return stream.staging_bytes > 0 and stream_read_twice_bytes(stream, rows, cols, dtype) <= l2_bytes()


def stream_read_twice_bytes(stream: Launch, rows: int, cols: int, dtype: str) -> int:
    """The bytes fast_stream reads a second time: each chunk's packs past what its block holds in shared memory."""
    vec = stream.template_args[0]
    pack_bytes = vec * ITEMSIZE[dtype]
    chunk = cdiv(cols // vec, stream.chunks)  # fast.cu's chunk_bounds
    chunks = [min(chunk, cols // vec - c * chunk) for c in range(stream.chunks)]
    return rows * sum(max(0, packs * pack_bytes - stream.staging_bytes) for packs in chunks)


def fast_warp_launch(rows: int, cols: int, dtype: str, lanes: int, block: int = FAST_WARP_BLOCK) -> Launch:
    """fast_warp with `lanes` lanes a row (32 / lanes rows a warp), each holding its packs in registers, in
    blocks of `block` threads (at most fast.cu's launch bound, 128)."""
    vec = fast_vector(cols, dtype)
    return Launch(
        grid=cdiv(rows, block // lanes),
        block=block,
        shared_bytes=0,
        threads_per_row=lanes,
        kernel="fast_warp",
        template_args=(vec, pow2_at_least(cdiv(cols // vec, lanes)), lanes),
    )


def fast_split_launch(rows: int, cols: int, dtype: str, blocks_per_sm: int = SPLIT_BLOCKS_PER_SM) -> Launch:
    """fast_split (fast_stream's arithmetic in two launches, the reference its tests compare it with): chunks of
    each row in blocks_per_sm blocks an SM and no more (one wave: fast.cu's launch bounds let that many fit), each
    thread streaming batches of 16 elements."""
    vec = fast_vector(cols, dtype)
    per = max(1, 16 // vec)
    chunks = max(1, min(cdiv(cols // vec, SPLIT_BLOCK * per), blocks_per_sm * multiprocessors() // rows))
    return two_stage_launch("fast_split", rows, chunks, SPLIT_BLOCK, 264, (vec, per, blocks_per_sm))


def stream_blocks_per_sm(rows: int, cols: int, dtype: str) -> int:
    """fast_stream's blocks an SM: fp32 STREAM_BLOCKS_PER_SM. 16-bit: the count whose last wave fills more of the SM
    slots, by more than STREAM_FILL_MARGIN (empty slots are lost bandwidth); else STREAM_MORE_BLOCKS_PER_SM where the
    part read twice (about the same at either count: the held bytes are) is a sixth to a half of the L2, else
    STREAM_BLOCKS_PER_SM. The band follows the 23 shapes of item 34, where this rule is within 0.75 points of the
    better count; why those rows lose at two is open."""
    counts = (STREAM_BLOCKS_PER_SM, STREAM_MORE_BLOCKS_PER_SM)
    if ITEMSIZE[dtype] != 2:
        return STREAM_BLOCKS_PER_SM
    launch = {n: fast_stream_launch(rows, cols, dtype, n) for n in counts}
    slots = {n: n * multiprocessors() for n in counts}
    fill = {n: launch[n].grid / (cdiv(launch[n].grid, slots[n]) * slots[n]) for n in counts}
    if abs(fill[counts[0]] - fill[counts[1]]) > STREAM_FILL_MARGIN:
        return max(fill, key=fill.get)
    twice = stream_read_twice_bytes(launch[STREAM_BLOCKS_PER_SM], rows, cols, dtype)
    return STREAM_MORE_BLOCKS_PER_SM if l2_bytes() / 6 <= twice <= l2_bytes() / 2 else STREAM_BLOCKS_PER_SM


def fast_stream_launch(
    rows: int, cols: int, dtype: str, blocks_per_sm: int | None = None, held: int | None = None
) -> Launch:
    """fast_stream: fast_split's chunks (the same arithmetic) in one launch, blocks_per_sm blocks an SM (default
    stream_blocks_per_sm's), each block holding the first `held` batches of its chunk in shared memory (default: as
    many as fit; none where the loads are narrower than 16 bytes) and reading the rest twice; a row's chunks exchange
    (m, d) through global memory, so they must all be resident (cuda.row_exchange checks)."""
    if blocks_per_sm is None:
        blocks_per_sm = stream_blocks_per_sm(rows, cols, dtype)
    split = fast_split_launch(rows, cols, dtype, blocks_per_sm)
    vec, per = split.template_args[:2]
    batch_bytes = SPLIT_BLOCK * per * 16
    if held is None:
        room = shared_per_multiprocessor() // blocks_per_sm - BLOCK_SHARED_RESERVED - STREAM_STATIC_SHARED
        held = max(0, room) // batch_bytes
    if vec * ITEMSIZE[dtype] != 16:
        held = 0  # cp.async stages 16-byte packs
    held = min(held, cdiv(cdiv(cols // vec, split.chunks), SPLIT_BLOCK * per))  # no more than the chunk's batches
    staging = held * batch_bytes
    return Launch(
        grid=split.grid,
        block=SPLIT_BLOCK,
        shared_bytes=STREAM_STATIC_SHARED + staging,
        staging_bytes=staging,
        threads_per_row=split.threads_per_row,
        kernel="fast_stream",
        template_args=(vec, per, blocks_per_sm, held),
        chunks=split.chunks,
        protocol="slices",
    )

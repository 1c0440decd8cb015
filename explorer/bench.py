"""The benchmark harness: validate, warm up, time with CUDA events and in device time, report against copy.

Softmax is memory-bound: the floor is reading x once and writing y once, so every result is
also given as GB/s = 2·numel·itemsize / time and as a percentage of a device-to-device copy of the
same bytes, measured in the same run. Inputs are rotated among enough buffers that they never sit
in L2 between launches. Each row has two times: CUDA events around each launch (what a Python loop
sees, launch gaps included) and, where torch is present, device time from CUPTI activity records
(explorer.devicetime); `% of copy` is given from both, the copy itself timed both ways. Peers
(cupyx.scipy.special.softmax and explorer.peers: torch, QuACK, Liger) are validated and timed the
same way, each row labelled with the peer's version; a peer that fails on a shape gets a row with an
`error` instead of times.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable

import numpy as np

from . import devicetime, harness
from . import peers as torch_peers
from .backends import cuda
from .bench_topk import TOPK_SHAPES as TOPK_SHAPES
from .bench_topk import bench_topk as bench_topk
from .checks import MAX_DIM, check_dtype, get_variant
from .errors import GPUUnavailable, InvalidInput, KernelFailed, shown
from .geometry import Launch
from .harness import SCHEMA as SCHEMA
from .numerics import DTYPES, FORMATS, MAX_REL_FP32_ACC, error_bound, rounds_input, sequential_terms
from .registry import VARIANTS, Variant

RESULT_FIELDS = ("name", "kind", "dtype", "acc", "rows", "cols", "block_size", *harness.MEASURED_FIELDS, "max_rel")
# Optional (a results file may lack them): the peer's version, device time and what derives from it, an error
# for a peer that could not run; top-k rows also carry k and the read-once floor.
DEVICE_FIELDS = harness.DEVICE_FIELDS
EVENT_FIELDS = harness.EVENT_FIELDS
FLOOR_FIELDS = ("floor_us", "pct_floor", "floor_device_us", "pct_floor_device")
TIMES_US = (*EVENT_FIELDS, "device_us", "device_p10_us", "device_p90_us", "floor_us", "floor_device_us")  # > 0
# The Triton tutorial's sweep: 2^27 elements at every width, rows shrinking as cols grow.
SWEEP_ELEMENTS = 2**27
SWEEP_COLS = (128, 256, 512, 1000, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144)
ODD_COLS = (1000, 5000, 50257, 151936)  # widths with no power-of-two factor to vectorize on
LONG_ROW_SHAPES = ((1, 2**20), (4, 2**20), (1, 2**24), (8, 2**22))
# A peer whose output is further than this from float64 is refused before timing (the max_rel is kept).
PEER_MAX_REL = {"float32": 1e-3, "float16": 5e-2, "bfloat16": 5e-2}


def _row(
    name, kind, dtype, acc, rows, cols, block, times_us, copy_gbps, reads, writes, max_rel, launch="", version=None
) -> dict:
    moved = 2 * rows * cols * DTYPES[dtype].itemsize  # the floor: read x once, write y once
    row = harness.result_row(
        name, kind, dtype, acc, rows, cols, block, times_us, moved, None, reads, writes, max_rel, launch, version
    )
    return {**row, "pct_copy": 100 * row["gbps"] / copy_gbps if copy_gbps else None}


def as_float64_device(a, dtype: str):
    """A GPU array of `dtype` as float64 (bfloat16, which CuPy lacks, is held as its uint16 bits)."""
    cp = cuda.cp
    if dtype == "bfloat16":
        return (a.view(cp.uint16).astype(cp.uint32) << 16).view(cp.float32).astype(cp.float64)
    return a.astype(cp.float64)


def max_rel_device(y, ref64, dtype: str) -> float:
    """max |y - ref| / max(|ref|, smallest normal) over elements finite in both, on the GPU; NaN where y's NaN/inf
    pattern differs from the reference's (as numerics.errors counts nonfinite_mismatch)."""
    cp = cuda.cp
    got = as_float64_device(y, dtype)
    finite = cp.isfinite(got) & cp.isfinite(ref64)
    rel = cp.where(finite, cp.abs(got - ref64) / cp.maximum(cp.abs(ref64), FORMATS[dtype].smallest_normal), 0)
    mismatch = int(cp.sum((cp.isnan(got) != cp.isnan(ref64)) | (cp.isinf(got) != cp.isinf(ref64))))
    return float("nan") if mismatch else float(rel.max())


def bound_device(launch: Launch, x, dtype: str, acc: str) -> float:
    """numerics.error_bound for the softmax of x (on the GPU) run with `launch`: max |x| counts wherever x may
    round entering acc (numerics.softmax_bound counts it only where some x does: this bound is never tighter)."""
    cp = cuda.cp
    max_abs_x = 0.0
    if rounds_input(dtype, acc):
        x64 = as_float64_device(x, dtype)
        max_abs_x = float(cp.where(cp.isfinite(x64), cp.abs(x64), 0).max())
    return error_bound(sequential_terms(launch, x.shape[-1]), acc, dtype, max_abs_x)


def check_output(name: str, launch: Launch, x, y, ref64, dtype: str, acc: str, poison) -> tuple[float, str | None]:
    """max_rel of y, the output of `launch` on x into a poisoned y, against float64, and why the output is refused
    (None where it is not): an output left unwritten, or max_rel over what the tests accept of the kernels
    (allowed_max_rel)."""
    rows, cols = x.shape
    max_rel = max_rel_device(y, ref64, dtype)
    if unwritten := int((y == poison).sum()):
        return max_rel, f"{name} left {unwritten} outputs unwritten on {rows}×{cols} {dtype}"
    allowed = allowed_max_rel(launch, x, dtype, acc)
    if not max_rel <= allowed:  # NaN too: a NaN or inf where float64 has none, or the reverse
        return max_rel, (
            f"{name} differs from float64 on {rows}×{cols} {dtype}, acc {acc}: max_rel {max_rel:.3g} over the "
            f"{allowed:.3g} allowed"
        )
    return max_rel, None


def allowed_max_rel(launch: Launch, x, dtype: str, acc: str) -> float:
    """The largest max_rel the GPU tests accept of a kernel: its bound (bound_device), and with an fp32 accumulator
    at least MAX_REL_FP32_ACC (the 3·n·u bound assumes correctly rounded exponentials; the GPU's expf and
    ex2.approx are within a few ulps, which a bound of a few terms does not cover)."""
    bound = bound_device(launch, x, dtype, acc)
    return max(MAX_REL_FP32_ACC[dtype], bound) if acc == "float32" else bound


def _softmax_peers(dtype: str, xs: list, ys: list) -> list[tuple[str, str | None, str, Callable[[int], object]]]:
    """(name, version, label, launch(i) -> output as a CuPy array or torch tensor) for every peer here."""
    out = []
    if dtype != "bfloat16":  # CuPy has no bfloat16
        from cupyx.scipy.special import softmax as cupyx_softmax

        out.append(
            (
                "cupyx",
                cuda.cp.__version__,
                torch_peers.SOFTMAX_PEER_LABELS["cupyx"],
                lambda i: cupyx_softmax(xs[i], axis=1),
            )
        )
    found = torch_peers.softmax_peers()
    if found:
        tx = [torch_peers.as_torch(x, dtype) for x in xs]
        ty = [torch_peers.as_torch(y, dtype) for y in ys]
        for p in found:
            out.append((p.name, p.version, p.label, lambda i, run=p.run: run(tx[i], ty[i])))
    return out


def _as_cupy(out, dtype: str):
    return out if isinstance(out, cuda.cp.ndarray) else torch_peers.as_cupy(out, dtype)


def bench_shape(
    variants: Iterable[str],
    rows: int,
    cols: int,
    dtype: str,
    acc: str = "float32",
    block_size: int | None = None,
    peers: bool = True,
    seed: int = 0,
) -> list[dict]:
    """Copy, then every variant and peer, on one shape: validated first, then timed."""
    shape = ShapeBench(rows, cols, dtype, acc, seed)
    copy_row = shape.row("copy", "copy", 0, shape.copy_times, 1, 1, 0.0, "device-to-device copy")
    runs = [shape.time_variant(v, block_size) for key in variants if (v := VARIANTS[key]).takes(dtype, acc)]
    runs += [shape.time_peer(*peer) for peer in _softmax_peers(dtype, shape.xs, shape.ys)] if peers else []
    timed = [(copy_row, shape.copy, devicetime.COPY)] + [
        (row, run, devicetime.KERNELS) for row, run in runs if run is not None
    ]
    harness.add_device_times(timed, shape.buffers)
    return [copy_row] + [row for row, _ in runs]


class ShapeBench:
    """One shape's benchmark: inputs rotated among enough buffers that they never sit in L2 between launches,
    their outputs, the float64 reference of the first, and a copy of the same bytes, timed first: every row's
    % of copy is against it."""

    def __init__(self, rows: int, cols: int, dtype: str, acc: str, seed: int):
        cp = cuda.cp
        self.rows, self.cols, self.dtype, self.acc = rows, cols, dtype, acc
        bytes_in = rows * cols * DTYPES[dtype].itemsize
        self.buffers = harness.rotation_buffers(bytes_in, 64)
        rng = cp.random.default_rng(seed)
        self.xs = [
            harness.round_on_device(rng.standard_normal((rows, cols), dtype=cp.float32), dtype)
            for _ in range(self.buffers)
        ]
        self.ys = [cp.empty_like(x) for x in self.xs]
        self.ref64 = reference_device(self.xs[0], dtype)
        self.poison = cuda.poison_value(DTYPES[dtype])
        self.copy_times = harness.time_launches(self.copy, self.buffers)
        self.copy_gbps = 2 * bytes_in / float(np.median(self.copy_times)) / 1e3

    def copy(self, i: int) -> None:
        cuda.cp.copyto(self.ys[i], self.xs[i])

    def row(self, name, kind, block, times_us, reads, writes, max_rel, launch, version=None) -> dict:
        """A result row of this shape, dtype and accumulator, against this copy's bandwidth."""
        shape = (self.dtype, self.acc, self.rows, self.cols)
        return _row(name, kind, *shape, block, times_us, self.copy_gbps, reads, writes, max_rel, launch, version)

    def time_variant(self, v: Variant, block_size: int | None) -> tuple[dict, Callable[[int], None] | None]:
        """The variant checked on the first buffer (check_output), then timed: its row, and the launch that device
        time repeats; a wrong output (naive's overflow with a 16-bit accumulator) gives an error row and no times."""
        rows, cols, dtype, acc = self.rows, self.cols, self.dtype, self.acc
        block = v.check_block_size(block_size if v.takes_block_size else None)
        geometry = v.launch(rows, cols, block, dtype)
        self.ys[0].fill(self.poison)
        cuda.launch(v, geometry, self.xs[0], self.ys[0], rows, cols, dtype, acc)
        max_rel, problem = check_output(v.key, geometry, self.xs[0], self.ys[0], self.ref64, dtype, acc, self.poison)
        if problem:  # a result of this shape, not the end of the run
            args = (v.key, dtype, acc, rows, cols, None, geometry.describe(), problem, max_rel)
            return harness.error_row(*args, kind="variant", block_size=block), None

        def launch(i):
            cuda.launch(v, geometry, self.xs[i], self.ys[i], rows, cols, dtype, acc)

        times = harness.time_launches(launch, self.buffers)
        reads, writes = v.reads_per_element, v.writes_per_element
        return self.row(v.key, "variant", block, times, reads, writes, max_rel, geometry.describe()), launch

    def time_peer(
        self, name: str, version: str | None, label: str, launch: Callable[[int], object]
    ) -> tuple[dict, Callable[[int], object] | None]:
        """A peer checked against float64 (refused past PEER_MAX_REL), then timed; a peer that fails on this
        shape gives an error row, and nothing for device time to repeat."""
        max_rel = None
        try:
            self.ys[0].fill(self.poison)
            max_rel = max_rel_device(_as_cupy(launch(0), self.dtype), self.ref64, self.dtype)
            if not max_rel <= PEER_MAX_REL[self.dtype]:  # NaN (a NaN where float64 has none, or the reverse) too
                raise KernelFailed(f"output differs from float64: max_rel {max_rel:.3g}")
            times = harness.time_launches(launch, self.buffers)
        except Exception as exc:  # a peer's failure on one shape is a result, not the end of the run
            error = f"{type(exc).__name__}: {exc}"
            row = harness.error_row(name, self.dtype, self.acc, self.rows, self.cols, version, label, error, max_rel)
            return row, None
        return self.row(name, "peer", 0, times, None, None, max_rel, label, version), launch


def reference_device(x, dtype: str):
    """numerics.reference on the GPU (x finite)."""
    cp = cuda.cp
    x64 = as_float64_device(x, dtype)
    e = cp.exp(x64 - x64.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def run(
    variants: Iterable[str],
    shapes: Iterable[tuple[int, int]],
    dtypes: Iterable[str] = ("float32",),
    acc: str = "float32",
    block_size: int | None = None,
    peers: bool = True,
    progress: Callable[[float, str], None] | None = None,
) -> dict:
    """Benchmark variants (and peers) over shapes × dtypes on the GPU; returns a results document."""
    if not cuda.available():
        raise GPUUnavailable(f"benchmarks need a GPU: {cuda.unavailable_reason()}")
    variants = list(variants)
    shapes = list(shapes)
    for key in variants:
        get_variant(key)
    jobs = [(shape, check_dtype(dtype)) for dtype in dtypes for shape in shapes]
    results = []
    started = time.time()
    for i, ((rows, cols), dtype) in enumerate(jobs):
        if progress:
            progress(i / len(jobs), f"{dtype} {rows}×{cols} ({time.time() - started:.0f} s)")
        results += bench_shape(variants, rows, cols, dtype, acc, block_size, peers)
        harness.free()
    if progress:
        progress(1.0, f"done in {time.time() - started:.0f} s")
    return {
        "schema": SCHEMA,
        "meta": harness.meta(),
        "config": {
            "variants": variants,
            "shapes": [list(s) for s in shapes],
            "dtypes": list(dtypes),
            "acc": acc,
            "block_size": block_size,
            "peers": peers,
        },
        "results": results,
    }


SWEEPS = {  # sweep_shapes' names, in words
    "cols": f"widths {SWEEP_COLS[0]} to {SWEEP_COLS[-1]:,} at 2^{SWEEP_ELEMENTS.bit_length() - 1} elements each",
    "odd": f"widths {', '.join(f'{c:,}' for c in ODD_COLS)} at 2^{SWEEP_ELEMENTS.bit_length() - 1} elements each",
    "rows": "long rows: " + ", ".join(f"{r}×{c:,}" for r, c in LONG_ROW_SHAPES),
}


def sweep_shapes(kind: str) -> list[tuple[int, int]]:
    """Named sweeps: 'cols' (2^27 elements, Triton-tutorial style), 'odd' (odd widths, 2^27 elements),
    'rows' (long rows)."""
    if kind in ("cols", "odd"):
        return [(max(1, SWEEP_ELEMENTS // c), c) for c in (SWEEP_COLS if kind == "cols" else ODD_COLS)]
    if kind == "rows":
        return list(LONG_ROW_SHAPES)
    raise InvalidInput(f"unknown sweep {kind!r}; choose cols, odd or rows")


MAX_DEPTH = 32  # a results file nests 3 deep; past this it is refused before anything walks it
TOO_DEEP = f"not a results file: its JSON is nested too deeply (more than {MAX_DEPTH} levels)"


def load(data: bytes | str | dict) -> dict:
    """Load a results document (JSON text, bytes or a dict) and check its shape. Raises InvalidInput (with
    the reason) for anything else, JSON nested too deeply included."""
    doc = _parse(data)
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise InvalidInput(f"not a softmax-explorer results file (schema {SCHEMA!r} expected)")
    results = doc.get("results")
    if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
        raise InvalidInput("results file has no list of results")
    if not results:
        raise InvalidInput("results file holds no results")
    for r in results:
        _check_result(r)
    if not isinstance(doc.get("meta"), dict):
        raise InvalidInput("results file has no meta section (GPU, versions, date)")
    return doc


def _parse(data: object) -> object:
    """JSON text, bytes or an already parsed dict, as Python values; InvalidInput for what is not JSON, nests
    deeper than MAX_DEPTH or holds text that is not valid Unicode."""
    if not isinstance(data, dict | str | bytes | bytearray | memoryview):
        raise InvalidInput(f"a results file is JSON text or bytes, got {type(data).__name__}")
    try:
        doc = data if isinstance(data, dict) else json.loads(bytes(data) if isinstance(data, memoryview) else data)
    except RecursionError:
        raise InvalidInput(TOO_DEEP) from None
    except UnicodeDecodeError:
        raise InvalidInput("not a results file (JSON expected): it is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"not a results file (JSON expected): it is not valid JSON at line {exc.lineno}, column {exc.colno}"
        ) from None
    except ValueError:  # a number past Python's 4,300 digits
        raise InvalidInput("not a results file (JSON expected): it holds a number too long to read") from None
    if _depth(doc) > MAX_DEPTH:
        raise InvalidInput(TOO_DEEP)
    if not all(_encodes(text) for text in _strings(doc)):  # JSON's \udXXX escapes make lone surrogates
        raise InvalidInput("not a results file: it holds text that is not valid Unicode (a lone surrogate)")
    return doc


def _check_result(r: dict) -> None:
    """One result of a results file: its fields present, and each of the type and range the pages can show."""
    missing = [f for f in RESULT_FIELDS if f not in r]
    if missing:
        raise InvalidInput(f"a result lacks {', '.join(missing)}")
    for f in ("name", "kind", "dtype", "acc"):
        if not isinstance(r[f], str):
            raise InvalidInput(f"a result's {f} must be text, got {shown(r[f])}")
    for f in ("rows", "cols", "block_size", "k"):  # k: top-k rows only
        if r.get(f) is not None and not _whole(r[f], 0 if f == "block_size" else 1):
            raise InvalidInput(f"a result's {f} must be a whole number, got {shown(r[f])}")
        if r.get(f) is not None and r[f] > MAX_DIM:  # as the shapes and k the explorer takes
            raise InvalidInput(f"a result's {f} must be below 2^31, got {shown(r[f])}")
    for f in (*harness.MEASURED_FIELDS, "max_rel", *DEVICE_FIELDS, *FLOOR_FIELDS):  # the last two may be absent
        if not isinstance(r.get(f), int | float | None) or isinstance(r.get(f), bool):
            raise InvalidInput(f"a result's {f} must be a number or null, got {shown(r[f])}")
        if isinstance(r.get(f), int) and not -(2**63) <= r[f] < 2**63:  # past int64, no table column holds it
            raise InvalidInput(f"a result's {f} is too large to show, got {shown(r[f])}")
        value = r.get(f)
        if f == "max_rel" or value is None:  # max_rel: NaN where a peer's output was NaN (its error says so)
            continue
        if f in TIMES_US and not (np.isfinite(value) and value > 0):
            raise InvalidInput(f"result {shown(r['name'])}: {f} must be a positive time or null, got {shown(value)}")
        if not (np.isfinite(value) and value >= 0):
            raise InvalidInput(
                f"result {shown(r['name'])}: {f} must be a finite number ≥ 0 or null, got {shown(value)}"
            )
    for f in ("version", "error"):
        if not isinstance(r.get(f), str | None):
            raise InvalidInput(f"a result's {f} must be text or null, got {shown(r[f])}")


def _depth(doc: object) -> int:
    """How deep lists and dicts nest in doc, counted without recursion (a hostile file may nest thousands deep)
    and stopping once past MAX_DEPTH."""
    deepest, todo = 0, [(doc, 1)]
    while todo and deepest <= MAX_DEPTH:
        value, depth = todo.pop()
        if isinstance(value, dict | list):
            deepest = max(deepest, depth)
            todo += [(v, depth + 1) for v in (value.values() if isinstance(value, dict) else value)]
    return deepest


def _strings(doc: object) -> Iterable[str]:
    """Every string in doc, keys included, walked without recursion (doc is already known to nest at most
    MAX_DEPTH deep)."""
    todo = [doc]
    while todo:
        value = todo.pop()
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            todo += [*value.keys(), *value.values()]
        elif isinstance(value, list):
            todo += value


def _encodes(text: str) -> bool:
    """Whether text can be written as UTF-8, as every page, table and chart sends it."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _whole(value: object, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def dumps(doc: dict) -> str:
    return json.dumps(doc, indent=1, allow_nan=True)

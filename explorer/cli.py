"""python -m explorer {info, run, bench, show}: the explorer without a browser."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import NoReturn

from . import api, bench, checks
from .errors import ExplorerError, InvalidInput, shown
from .inputs import DISTRIBUTIONS, MAX_UPLOAD_BYTES, make_input
from .numerics import DTYPES
from .registry import VARIANTS
from .topk import K_MAX, TOPK_VARIANTS, check_topk_fits, softmax_topk, topk_errors


def _shape(text: str) -> tuple[int, int]:
    try:
        rows, cols = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape must look like 4096x1024, got {text!r}") from None
    return rows, cols


def _param(text: str) -> tuple[str, str]:
    """name=value with value a number; the value is kept as typed so a refusal quotes it (1e400, not inf)."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"parameter must look like name=value, got {text!r}")
    try:
        float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"parameter {name} must be a number, got {value!r}") from None
    return name.strip(), value.strip()


CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|[\x00-\x1f\x7f-\x9f]")  # terminal escapes, control characters


def _printable(text: object, limit: int = 60) -> str:
    """Text from a results file for the terminal: escape sequences and control characters out (a file cannot move
    the cursor or recolour the screen), runs of white space one space, cut with its length said when long."""
    return shown(" ".join(CONTROL.sub(" ", str(text)).split()), limit, quoted=False)


def _number(v: float) -> str:
    """A number of a table: three significant digits, whole from 1,000 up (1750, not 1.75e+03), and in
    scientific notation past 1e15, so that a number from a file cannot be hundreds of digits wide."""
    return f"{v:.0f}" if 1e3 <= abs(v) < 1e15 else f"{v:.3g}"


def _table(rows: list[dict], columns: list[str]) -> str:
    def cell(v):
        if isinstance(v, float):
            return _number(v)
        return "—" if v is None else _printable(v)

    body = [[cell(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(b[i]) for b in body)) if body else len(c) for i, c in enumerate(columns)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(columns, widths))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(b, widths)) for b in body]
    return "\n".join(lines)


def cmd_info(args) -> int:
    info = api.info()
    if info["backend"] == "cuda":
        print(
            f"GPU: {info['gpu']} (sm_{info['compute_capability'].replace('.', '')}, "
            f"{info['multiprocessors']} SMs, {info['memory_total_bytes'] / 2**30:.0f} GiB, L2 {info['l2_bytes'] / 2**20:.0f} MiB)"
        )
        print(f"driver CUDA {info['cuda_driver']}, runtime CUDA {info['cuda_runtime']}, CuPy {info['cupy']}")
    else:
        print(f"no GPU: emulation ({info['reason']})")
    return 0


def _block_sizes(variants: list[str], block_size: int | None) -> dict[str, int | None]:
    """--block-size for each variant that takes one; refused where none of them does."""
    sized = [k for k in variants if VARIANTS[k].takes_block_size]
    if block_size is not None and not sized:
        takes = "takes" if len(variants) == 1 else "take"
        raise InvalidInput(
            f"--block-size {block_size}: {', '.join(variants)} {takes} no block size (only "
            f"{', '.join(k for k, v in VARIANTS.items() if v.takes_block_size)} do)"
        )
    return {k: block_size if k in sized else None for k in variants}


def cmd_run(args) -> int:
    blocks = _block_sizes(args.variant, args.block_size)
    backend = checks.resolve_backend(args.backend)
    for key, block_size in blocks.items():  # from the shape, before the input is made
        api.check_fits(args.rows, args.cols, args.dtype, backend, VARIANTS[key], block_size, acc=args.acc)
    x = _input(args)
    rows = []
    for key, block_size in blocks.items():
        result = api.softmax(x, key, acc=args.acc, backend=backend, block_size=block_size)
        report = api.errors(result.out, x).as_dict()
        rows.append({"variant": key, "backend": result.backend, **report})
    print(f"{args.dist} {args.rows}×{args.cols} {args.dtype}, accumulator {args.acc}; error vs float64")
    print(
        _table(
            rows,
            [
                "variant",
                "backend",
                "max_rel",
                "max_rel_unflushed",
                "mean_rel",
                "max_ulp",
                "row_sum_dev",
                "nan_count",
                "inf_count",
                "nonfinite_mismatch",
                "underflow_count",
                "flushed_count",
                "argmax_agreement",
            ],
        )
    )
    return 0


def cmd_topk(args) -> int:
    check_topk_fits(args.rows, args.cols, args.k, args.variant, args.dtype, args.backend)
    x = _input(args)
    result = softmax_topk(x, args.k, args.variant, args.backend)
    report = topk_errors(result, x)
    checked = (
        f"{report.index_mismatch} wrong indices, {report.tie_swaps} swaps of ties within rounding, "
        f"max_rel {report.max_rel:.3g} over {report.rows_checked} finite rows"
        if report.rows_checked
        else "nothing to check: every row holds a NaN or +inf, so float64's probabilities are NaN"
    )
    print(
        f"{args.variant} k={args.k} on {args.dist} {args.rows}×{args.cols} {args.dtype} ({result.backend}): {checked}"
    )
    print("row 0:", ", ".join(f"{i}: {float(v):.4g}" for i, v in zip(result.indices[0], result.values[0])))
    return 0


FLOOR_NOTE = (
    "pct_floor: the read-once floor (the logits read once at the copy's byte rate, half the copy's time) "
    "over each row's time, in %; 100 is at the floor"
)


def _result_columns(results: list[dict]) -> list[str]:
    """The table's columns for these results: k where they carry it; the read-once floor in place of the copy for
    top-k rows (they write k values, not a row, so against the copy they read near 200 %); device time where the
    file has it (CUPTI, through torch)."""

    def has(field: str) -> bool:
        return any(r.get(field) is not None for r in results)

    pct = "pct_floor" if has("pct_floor") else "pct_copy"
    columns = ["name", "version", "dtype", "rows", "cols", *(["k"] if has("k") else []), "block_size"]
    columns += [*bench.EVENT_FIELDS, "gbps", pct]
    if has("device_us"):
        columns += ["device_us", f"{pct}_device"]
    return [*columns, "max_rel"]


def _print_results(doc: dict) -> None:
    """The file's GPU and versions, its results as a table (event time, then device time where the file has it),
    what the floor column means where it is shown, and a line for each result that could not be timed, with why."""
    meta = {key: _printable(doc["meta"].get(key, "?")) for key in ("gpu", "cuda_runtime", "cupy", "torch", "date")}
    print(f"{meta['gpu']}, CUDA {meta['cuda_runtime']}, CuPy {meta['cupy']}, torch {meta['torch']}, {meta['date']}")
    results = doc["results"]
    columns = _result_columns(results)
    print(_table(results, columns))
    if "pct_floor" in columns:
        print(FLOOR_NOTE)
    for r in results:
        if r.get("error"):
            name = " ".join(_printable(r[k]) for k in ("name", "version") if r.get(k))
            shape = f"{r.get('rows')}×{r.get('cols')} {r.get('dtype')}" + (f" top-{r['k']}" if r.get("k") else "")
            print(f"{name} could not run on {_printable(shape)}: {_printable(r['error'], 200)}")


def _check_writable(path: str) -> None:
    """Refuse an output file that cannot be written, before a benchmark of minutes whose results it would lose."""
    target = Path(path)
    existed = target.exists()
    try:
        with open(target, "a"):
            pass
    except OSError as exc:
        raise InvalidInput(f"--json {path}: cannot be written: {exc.strerror or exc}") from None
    if not existed:
        target.unlink()


def _bench_shapes(args) -> list[tuple[int, int]]:
    """The shapes bench would time, each checked as `run` checks one, and its other arguments checked with them:
    all before the GPU is touched, so that a bad argument is refused at once and not after minutes of timing."""
    if args.topk:
        ignored = [
            name
            for name, given in (
                ("--variants", args.variants),
                ("--sweep", args.sweep),
                ("--block-size", args.block_size is not None),
                ("--acc", args.acc != "float32"),
            )
            if given
        ]
        if ignored:
            raise InvalidInput(
                f"--topk does not take {', '.join(ignored)}: it times topk_fused, topk_unfused and torch with a "
                "float32 accumulator, on --shapes or the vocabulary sizes"
            )
        shapes = args.shapes or bench.TOPK_SHAPES
    else:
        shapes = list(args.shapes or [])
        for sweep in args.sweep or []:
            shapes += bench.sweep_shapes(sweep)
        if not shapes:
            raise InvalidInput("give --shapes or --sweep (or --topk)")
        for key, block_size in _block_sizes(args.variants or list(VARIANTS), args.block_size).items():
            if block_size is not None:
                checks.check_block(VARIANTS[key], block_size)
        for key in args.variants or []:  # named ones only: of all, bench times each where it has a kernel
            for dtype in args.dtypes:
                api.check_types(VARIANTS[key], dtype, args.acc)
    itemsize = max(DTYPES[dtype].itemsize for dtype in args.dtypes)
    for rows, cols in shapes:
        checks.check_elements(*checks.check_shape(rows, cols), itemsize, "bench")
        for k in args.topk or []:
            checks.check_k(k, cols, K_MAX)
    if args.json:
        _check_writable(args.json)
    return shapes


def cmd_bench(args) -> int:
    progress = lambda f, text: print(f"[{f:4.0%}] {text}", file=sys.stderr, flush=True)  # noqa: E731
    shapes = _bench_shapes(args)
    if args.topk:
        doc = bench.bench_topk(shapes, args.topk, args.dtypes, not args.no_peers, progress)
        if args.json:
            Path(args.json).write_text(bench.dumps(doc))
        _print_results(doc)
        return 0
    doc = bench.run(
        args.variants or list(VARIANTS),
        shapes,
        args.dtypes,
        args.acc,
        args.block_size,
        peers=not args.no_peers,
        progress=progress,
    )
    if args.json:
        Path(args.json).write_text(bench.dumps(doc))
    _print_results(doc)
    return 0


def _read_results(path: str) -> bytes:
    """A results file's bytes, read no further than MAX_UPLOAD_BYTES + 1 (as the Timing page takes them): a larger
    file, or an endless one such as /dev/zero, is refused without being read whole."""
    try:
        f = open(path, "rb")
    except OSError as exc:
        raise InvalidInput(f"cannot be read: {exc.strerror or exc}") from None
    with f:
        data = f.read(MAX_UPLOAD_BYTES + 1)
        if len(data) > MAX_UPLOAD_BYTES:
            length = os.fstat(f.fileno()).st_size  # 0 for a device or a pipe, whose length is unknown
            if length <= MAX_UPLOAD_BYTES:
                raise InvalidInput(f"it is longer than the limit of {checks.size(MAX_UPLOAD_BYTES)} for a results file")
            shown, limit = checks.sizes(length, MAX_UPLOAD_BYTES)
            raise InvalidInput(f"it is {shown}; the limit is {limit} for a results file")
    return data


def cmd_show(args) -> int:
    for path in args.files:
        try:
            doc = bench.load(_read_results(path))
        except ExplorerError as exc:
            raise InvalidInput(f"{path}: {exc}") from None
        _print_results(doc)
    return 0


class Parser(argparse.ArgumentParser):
    """argparse that reports a bad command line in one line (exit 2), like every other refusal."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Help with each option's default where it has one (lists as typed, space-separated) and the examples of the
    epilog kept line by line."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings
            or default is None
            or default is False
            or default == argparse.SUPPRESS
            or "%(default)" in text
        ):
            return text
        shown_default = " ".join(map(str, default)) if isinstance(default, list | tuple) else str(default)
        return f"{text} (default: {shown_default.replace('%', '%%')})"


def _examples(*lines: str) -> str:
    """An epilog of example command lines."""
    return "examples:\n" + "\n".join(f"  python -m explorer {line}" for line in lines)


def _subcommand(sub, name: str, help: str, examples: tuple[str, ...]) -> argparse.ArgumentParser:
    """A subcommand whose --help shows defaults and ends with examples."""
    return sub.add_parser(name, help=help, description=help, formatter_class=HelpFormatter, epilog=_examples(*examples))


def _input_arguments(p: argparse.ArgumentParser, dist: str, rows: int, cols: int) -> None:
    """The input a command makes: distribution and its parameters, shape and dtype."""
    p.add_argument("--dist", default=dist, choices=list(DISTRIBUTIONS), help="distribution of the input")
    p.add_argument(
        "--param",
        action="append",
        type=_param,
        metavar="NAME=VALUE",
        help="a parameter of the distribution, e.g. std=2 or scale=1000; repeat for more",
    )
    p.add_argument("--rows", type=int, default=rows, help="rows of the input")
    p.add_argument("--cols", type=int, default=cols, help="columns of the input: the softmax runs along each row")
    p.add_argument("--dtype", default="float32", choices=list(DTYPES), help="dtype of the input and output")
    p.add_argument("--seed", type=int, default=0, help="random seed of the input (>= 0)")


def _backend_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--backend",
        default="auto",
        choices=checks.BACKENDS,
        help="where to run: auto is the GPU where one is usable, else the CPU emulation",
    )


def _input(args: argparse.Namespace):
    """The input _input_arguments describe."""
    names = [name for name, _ in args.param or []]
    if twice := sorted({name for name in names if names.count(name) > 1}):
        raise InvalidInput(f"--param {', '.join(twice)} given more than once")
    return make_input(args.dist, args.rows, args.cols, args.dtype, args.seed, **dict(args.param or []))


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="python -m explorer", description="Softmax kernel explorer", formatter_class=HelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    _subcommand(sub, "info", "the GPU, driver, CUDA and CuPy, or why emulation is used", ("info",)).set_defaults(
        fn=cmd_info
    )

    r = _subcommand(
        sub,
        "run",
        "run variants and print the error table against float64",
        (
            "run --variant online_thread --variant online_warp --dist decreasing --rows 8 --cols 65536 "
            "--dtype float16 --acc float16",
            "run --variant naive --variant online_warp --dist large --param scale=1000",
        ),
    )
    r.add_argument(
        "--variant", action="append", required=True, choices=list(VARIANTS), help="a variant to run; repeat for more"
    )
    _input_arguments(r, "normal", 64, 4096)
    r.add_argument("--acc", default="float32", choices=list(DTYPES), help="dtype the sums and the maximum are kept in")
    r.add_argument("--block-size", type=int, help="threads per row for the variants that take one")
    _backend_argument(r)
    r.set_defaults(fn=cmd_run)

    t = _subcommand(
        sub,
        "topk",
        "softmax + top-k: print the index agreement and error against float64",
        ("topk --k 8 --rows 4 --cols 128256", "topk --variant topk_unfused --k 50 --dist normal --param std=4"),
    )
    t.add_argument(
        "--k", type=int, default=8, help=f"how many of the largest probabilities to keep: 1 to {K_MAX}, at most cols"
    )
    t.add_argument("--variant", default="topk_fused", choices=list(TOPK_VARIANTS), help="fused or softmax then top-k")
    _input_arguments(t, "zipf", 8, 32000)
    _backend_argument(t)
    t.set_defaults(fn=cmd_topk)

    b = _subcommand(
        sub,
        "bench",
        "time variants and peers, write a results JSON (needs a GPU)",
        (
            "bench --variants fast online_warp --sweep cols --dtypes float32 bfloat16 --json results.json",
            "bench --topk 8 50 --json topk.json",
            "bench --variants fast --shapes 4096x1024 32768x512",
        ),
    )
    b.add_argument("--variants", nargs="+", choices=list(VARIANTS), help="variants to time (default: all)")
    b.add_argument("--dtypes", nargs="+", default=["float32"], choices=list(DTYPES), help="dtypes to time each in")
    b.add_argument("--acc", default="float32", choices=list(DTYPES), help="dtype the sums and the maximum are kept in")
    b.add_argument(
        "--shapes",
        nargs="+",
        type=_shape,
        metavar="ROWSxCOLS",
        help="shapes to time, e.g. 4096x1024; give --shapes, --sweep or both",
    )
    b.add_argument(
        "--sweep",
        nargs="+",
        choices=bench.SWEEPS,
        help="add named shapes: " + "; ".join(f"{name}, {words}" for name, words in bench.SWEEPS.items()),
    )
    b.add_argument("--block-size", type=int, help="threads per row for the variants that take one")
    b.add_argument(
        "--no-peers", action="store_true", help="time only the variants, not the peers (cupyx, torch, QuACK, Liger)"
    )
    b.add_argument(
        "--topk",
        nargs="+",
        type=int,
        metavar="K",
        help="benchmark softmax + top-k (fused, unfused, torch) for these k; shapes default to vocab sizes",
    )
    b.add_argument("--json", metavar="FILE", help="write the results document here")
    b.set_defaults(fn=cmd_bench)

    s = _subcommand(
        sub,
        "show",
        "print results files written by bench (or downloaded from the app)",
        ("show docs/results/long-rows.json", "show docs/results/topk.json docs/results/odd-widths.json"),
    )
    s.add_argument("files", nargs="+", metavar="FILE", help="results JSON files, each printed as a table")
    s.set_defaults(fn=cmd_show)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        code = args.fn(args)
        sys.stdout.flush()  # here, where a closed pipe is caught, not at exit
        return code
    except BrokenPipeError:  # the reader went away (show … | head): stop quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell reports a command stopped by it
    except (ExplorerError, OSError, json.JSONDecodeError) as exc:
        print("error: " + " ".join(str(exc).split()), file=sys.stderr)  # one line
        return 2

"""python -m explorer: every bad input is one line on stderr and exit status 2, never a traceback."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from explorer import cli
from explorer.backends import cuda

ROOT = Path(__file__).resolve().parents[1]


def call(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = cli.main(list(argv))
    except SystemExit as exc:  # argparse's own exits
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys, *argv: str, words: tuple[str, ...] = ()) -> str:
    code, _out, err = call(capsys, *argv)
    assert code == 2, (argv, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for word in words:
        assert word in err, (word, err)
    return err


@pytest.fixture(autouse=True)
def _emulator(monkeypatch):
    monkeypatch.setenv("EXPLORER_BACKEND", "emulator")
    monkeypatch.delenv("EXPLORER_MAX_ELEMENTS", raising=False)


@pytest.mark.parametrize("command", ["run --variant online_warp", "topk"])
@pytest.mark.parametrize("shape", [(100000, 100000), (2147483647, 2147483647)])
def test_huge_shapes_are_refused_in_one_line(capsys, command, shape):
    argv = [*command.split(), "--rows", str(shape[0]), "--cols", str(shape[1])]
    refused(capsys, *argv, words=("this server's limit", "elements", "smaller shape"))


def input_made(*args, **kwargs):
    pytest.fail("the input was made before the checks that could refuse it")


def test_run_checks_memory_before_making_the_input(capsys, monkeypatch):
    monkeypatch.setenv("EXPLORER_RUN_BUDGET_BYTES", str(10**7))
    monkeypatch.setattr(cli, "make_input", input_made)  # the name cli calls
    refused(
        capsys,
        "run",
        "--variant",
        "online_warp",
        "--rows",
        "1000",
        "--cols",
        "1000",
        words=("this server's limit of", "for one run", "on a GPU it would need only about 8.61 MiB"),
    )


BIG = ("--rows", "20000", "--cols", "20000")  # 1.5 GiB of float32 to make: refused before that


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["run", "--variant", "fast", "--acc", "float16", *BIG], ("fast accumulates in float32",)),
        (["topk", "--k", "65", *BIG], ("at most 64",)),
        (["topk", "--cols", "4", "--k", "8"], ("from 1 to 4",)),
        (["topk", "--rows", "100000", "--cols", "100000"], ("float32 softmax + top-k", "limit")),
    ],
)
def test_arguments_the_run_would_refuse_are_refused_before_making_the_input(capsys, monkeypatch, argv, words):
    monkeypatch.setattr(cli, "make_input", input_made)
    refused(capsys, *argv, words=words)


class InputMade(Exception):
    """The command got past its checks to make the input."""


def input_reached(*args, **kwargs):
    raise InputMade


def test_topk_is_held_to_its_own_memory_model(capsys, monkeypatch):
    """topk's check is softmax_topk's: a shape within top-k's own need gets past it, though the largest softmax
    variant's need is about twice as much; one byte less of budget is refused."""
    from explorer import api
    from explorer.topk import check_topk_fits

    argv = ["topk", "--rows", "1000", "--cols", "100000"]
    need = check_topk_fits(1000, 100000, 8, "topk_fused", "float32", "emulator")
    assert api.bytes_needed(1000, 100000, "float32", "emulator") > 1.5 * need
    monkeypatch.setattr(cli, "make_input", input_reached)
    monkeypatch.setenv("EXPLORER_RUN_BUDGET_BYTES", str(need - 1))
    refused(capsys, *argv, words=("float32 softmax + top-k", "over this server's limit"))
    monkeypatch.setenv("EXPLORER_RUN_BUDGET_BYTES", str(need))
    with pytest.raises(InputMade):
        cli.main(argv)


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["run", "--variant", "fast", "--block-size", "-1"], ("--block-size -1", "fast takes no block size")),
        (
            ["run", "--variant", "online_warp", "--block-size", "64"],
            ("online_warp takes no block size", "online_block"),
        ),
        (
            ["run", "--variant", "fast", "--variant", "online_warp", "--block-size", "64"],
            ("fast, online_warp take no",),
        ),
        (["run", "--variant", "online_block", "--block-size", "-1"], ("multiple of 32",)),
        (["run", "--variant", "online_block", "--variant", "fast", "--block-size", "100"], ("multiple of 32",)),
        (["run", "--variant", "fast", "--acc", "float16"], ("float16",)),
        (["run", "--variant", "naive", "--rows", "0"], ("rows must be at least 1",)),
        (["run", "--variant", "naive", "--cols", "-4"], ("cols must be at least 1",)),
        (["run", "--variant", "naive", "--rows", "99999999999999999999"], ("below 2^31",)),
        (["run", "--variant", "naive", "--param", "std=-1"], ("std=-1 ", "outside")),
        (["run", "--variant", "naive", "--param", "nope=1"], ("normal takes",)),
        (["run", "--variant", "naive", "--param", "std=1e999"], ("std=1e999 is outside",)),  # as typed, not inf
        (["run", "--variant", "naive", "--param", "std=two"], ("std must be a number", "'two'")),
        (["run", "--variant", "naive", "--seed", "-1"], ("seed",)),
        (["run", "--variant", "nope"], ("invalid choice",)),
        (["run", "--variant", "naive", "--rows", "abc"], ("invalid int value",)),
        (["run", "--variant", "naive", "--param", "std"], ("name=value",)),
        (["run", "--variant", "naive", "--param", "=2"], ("name=value",)),
        (["run", "--variant", "naive", "--param", "std=1", "--param", "std=2"], ("--param std given more than once",)),
        (["run"], ("--variant",)),
        (["topk", "--k", "0"], ("k must be",)),
        (["topk", "--k", "65", "--cols", "100"], ("at most 64",)),
        (["topk", "--cols", "4", "--k", "8"], ("from 1 to 4",)),
        (["frobnicate"], ("invalid choice",)),
        ([], ("required",)),
    ],
)
def test_bad_command_lines(capsys, argv, words):
    refused(capsys, *argv, words=words)


def test_a_block_size_for_the_variants_that_take_one(capsys):
    code, out, err = call(
        capsys,
        "run",
        "--variant",
        "online_block",
        "--variant",
        "fast",
        "--block-size",
        "64",
        "--rows",
        "2",
        "--cols",
        "100",
    )
    assert code == 0, err
    assert "online_block" in out and "fast" in out


def results_file(tmp_path: Path, doc: object, name: str = "r.json") -> str:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


RESULT = {
    "name": "fast",
    "kind": "variant",
    "dtype": "float32",
    "acc": "float32",
    "rows": 4,
    "cols": 1024,
    "block_size": 0,
    "median_us": 3.0,
    "p10_us": 2.9,
    "p90_us": 3.1,
    "gbps": 10.0,
    "pct_copy": 50.0,
    "max_rel": 1e-7,
}


def valid_doc(meta: dict) -> dict:
    from explorer import bench

    result = {**RESULT, **{f: RESULT.get(f, 0) for f in bench.RESULT_FIELDS}}
    return {"schema": bench.SCHEMA, "meta": meta, "results": [result]}


def test_show_with_an_empty_meta_prints_the_table(capsys, tmp_path):
    code, out, err = call(capsys, "show", results_file(tmp_path, valid_doc({})))
    assert code == 0, err
    assert "?, CUDA ?" in out and "fast" in out


def test_show_prints_device_time_where_the_file_has_it_and_why_a_peer_failed(capsys, tmp_path):
    """Device time and its % of copy beside event time; a peer that could not run on a line of its own, its error
    with the terminal escapes and control characters of the file taken out; without device times, no such columns."""
    doc = valid_doc({"gpu": "H200\x1b[2J"})
    doc["results"][0] |= {"device_us": 2.5, "pct_copy_device": 61.0}
    failed = {**doc["results"][0], "name": "quack", "kind": "peer", "version": "0.6.5", "median_us": None}
    doc["results"].append(failed | {"error": "CUDADialectError: \n\x1b[91m\x1b[1merror\x1b[0m: launch\tfailed\x07"})
    code, out, err = call(capsys, "show", results_file(tmp_path, doc))
    assert code == 0, err
    header, fast = out.splitlines()[1:3]
    assert header.split()[-3:] == ["device_us", "pct_copy_device", "max_rel"] and fast.split()[-3:] == [
        "2.5",
        "61",
        "1e-07",
    ]
    assert "quack 0.6.5 could not run on 4×1024 float32: CUDADialectError: error : launch failed" in out
    assert "\x1b" not in out and "\x07" not in out and out.startswith("H200, CUDA ?")
    code, out, _ = call(capsys, "show", results_file(tmp_path, valid_doc({}), "plain.json"))
    assert code == 0 and "device_us" not in out and "could not run" not in out


def test_show_a_topk_file_has_k_and_the_read_once_floor(capsys):
    """Top-k rows of one shape differ by k, so k is a column; they are measured against the read-once floor (what
    the file has for them), not against the copy, and a line under the table says what that column means."""
    code, out, err = call(capsys, "show", str(ROOT / "docs/results/topk.json"))
    assert code == 0, err
    lines = out.splitlines()
    header = lines[1].split()
    assert header[header.index("cols") + 1] == "k"
    assert "pct_floor" in header and "pct_floor_device" in header
    assert "pct_copy" not in header and "pct_copy_device" not in header
    fused = next(line.split() for line in lines[2:] if line.split()[0] == "topk_fused")
    assert fused[header.index("k")] == "1" and 50 < float(fused[header.index("pct_floor_device")]) <= 100
    assert lines[-1].startswith("pct_floor: the read-once floor")


def test_show_a_softmax_file_has_no_k_and_the_copy(capsys):
    code, out, err = call(capsys, "show", str(ROOT / "docs/results/odd-widths.json"))
    assert code == 0, err
    header = out.splitlines()[1].split()
    assert "k" not in header and "pct_floor" not in header and "pct_floor" not in out
    assert header[header.index("p90_us") + 1 :][:2] == ["gbps", "pct_copy"]


@pytest.mark.parametrize(
    ("command", "defaults", "example"),
    [
        (
            "run",
            ("(default: normal)", "(default: 64)", "(default: 4096)", "(default: 0)", "(default: float32)"),
            "run --variant online_thread --variant online_warp",
        ),
        (
            "topk",
            ("(default: 8)", "(default: topk_fused)", "(default: zipf)", "(default: 32000)", "1 to 64"),
            "topk --k 8 --rows 4 --cols 128256",
        ),
        ("bench", ("(default: float32)", "(default: all)"), "bench --topk 8 50 --json topk.json"),
        ("show", (), "show docs/results/long-rows.json"),
        ("info", (), "info"),
    ],
)
def test_help_shows_defaults_and_ends_with_examples(capsys, monkeypatch, command, defaults, example):
    monkeypatch.setenv("COLUMNS", "200")  # one option's help on one line
    code, out, _ = call(capsys, command, "--help")
    assert code == 0
    for default in defaults:
        assert default in out, (default, out)
    assert "examples:" in out and f"  python -m explorer {example}" in out, out
    assert "(default: None)" not in out and "(default: False)" not in out


def test_every_option_of_every_subcommand_has_help_and_run_variant_says_it_repeats():
    subcommands = next(a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    for name in ("info", "run", "topk", "bench", "show"):
        for action in subcommands[name]._actions:
            assert action.help, (name, action.dest)
    variant = next(a for a in subcommands["run"]._actions if a.dest == "variant")
    assert "repeat" in variant.help


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("[" * 100000 + "]" * 100000, ("nested too deeply",)),
        ('{"a": ' * 50000 + "1" + "}" * 50000, ("nested too deeply",)),
        ("not json", ("not a results file",)),
        ('{"schema": "other"}', ("schema",)),
        ("\udcff", ("not a results file",)),
    ],
)
def test_show_refuses_bad_files(capsys, tmp_path, content, words):
    path = tmp_path / "bad.json"
    path.write_bytes(content.encode("utf-8", "surrogateescape"))
    refused(capsys, "show", str(path), words=(str(path), *words))


def test_show_refuses_a_file_over_the_limit_without_reading_it_whole(capsys, tmp_path):
    from explorer.inputs import MAX_UPLOAD_BYTES

    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(MAX_UPLOAD_BYTES + 1)  # sparse: nothing written
    refused(capsys, "show", str(big), words=(f"it is {MAX_UPLOAD_BYTES + 1:,} bytes", "the limit is"))
    refused(capsys, "show", "/dev/zero", words=("/dev/zero", "longer than the limit of 64.00 MiB"))  # endless


def test_show_missing_file_and_directory(capsys, tmp_path):
    missing = tmp_path / "missing.json"
    refused(capsys, "show", str(missing), words=(f"{missing}: cannot be read: No such file or directory",))
    refused(capsys, "show", str(tmp_path), words=("cannot be read", "directory"))
    assert "Errno" not in capsys.readouterr().err


def test_topk_takes_the_distributions_parameters(capsys):
    code, out, err = call(
        capsys, "topk", "--dist", "causal_mask", "--param", "masked_rows=2", "--rows", "4", "--cols", "100"
    )
    assert code == 0, err
    assert "over 2 finite rows" in out  # two of four rows fully masked


def run_module(*argv: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "explorer", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "EXPLORER_BACKEND": "emulator", **env},
        timeout=120,
    )


def test_as_a_process_a_huge_shape_is_one_line_and_exit_2():
    done = run_module("run", "--variant", "online_warp", "--rows", "100000", "--cols", "100000")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_malformed_cap_is_reported_at_start_and_the_default_used():
    done = run_module("run", "--variant", "online_warp", "--rows", "2", "--cols", "8", EXPLORER_MAX_ELEMENTS="-5")
    assert done.returncode == 0, done.stderr
    assert "EXPLORER_MAX_ELEMENTS='-5' is refused" in done.stderr and "default limit" in done.stderr
    assert done.stderr.count("EXPLORER_MAX_ELEMENTS") == 1  # once, not per run


def test_a_malformed_backend_setting_is_reported_at_start_and_auto_chooses():
    done = run_module("run", "--variant", "online_warp", "--rows", "2", "--cols", "8", EXPLORER_BACKEND="bogus")
    assert done.returncode == 0, done.stderr
    assert "EXPLORER_BACKEND='bogus' is refused" in done.stderr and "cuda or emulator" in done.stderr
    assert done.stderr.count("EXPLORER_BACKEND") == 1  # once, not per run


def _examples() -> list[list[str]]:
    subcommands = next(a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    return [
        shlex.split(line.strip())[3:]
        for sub in subcommands.values()
        for line in (sub.epilog or "").splitlines()
        if line.strip().startswith("python -m explorer")
    ]


@pytest.mark.parametrize("argv", [pytest.param(a, id=" ".join(a)) for a in _examples()])
def test_every_example_of_the_help_runs_here_or_says_it_needs_a_gpu(capsys, monkeypatch, tmp_path, argv):
    if argv[0] == "bench" and cuda.available():
        pytest.skip("a GPU is here: the example would run the whole benchmark")
    monkeypatch.chdir(tmp_path if argv[0] == "bench" else ROOT)  # bench's --json lands in tmp_path
    code, out, err = call(capsys, *argv)
    if argv[0] == "bench":
        assert code == 2 and err == "error: benchmarks need a GPU: " + cuda.unavailable_reason() + "\n", err
    else:
        assert code == 0 and out and not err, err


def not_benchmarked(*args, **kwargs):
    pytest.fail("the benchmark started before its arguments were checked")


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--shapes", "0x5"], ("rows must be at least 1",)),
        (["--shapes", "4x99999999999"], ("cols must be below 2^31",)),
        (["--shapes", "1000000000x1000000000"], ("1,000,000,000,000,000,000 elements", "limit")),
        (["--variants", "online_block", "--shapes", "4x1024", "--block-size", "33"], ("multiple of 32",)),
        (["--variants", "fast", "--shapes", "4x1024", "--block-size", "64"], ("fast takes no block size",)),
        (["--variants", "fast", "--shapes", "4x1024", "--acc", "float16"], ("fast accumulates in float32",)),
        (["--topk", "8", "--sweep", "cols"], ("--topk does not take --sweep",)),
        (["--topk", "8", "--variants", "fast", "--block-size", "64"], ("--variants, --block-size",)),
        (["--topk", "0"], ("k must be",)),
        (["--topk", "8", "--shapes", "4x5"], ("from 1 to 5",)),
        (["--variants", "fast", "--shapes", "4x1024", "--json", "{tmp}/missing/r.json"], ("cannot be written",)),
        (["--topk", "8", "--json", "{tmp}"], ("cannot be written", "directory")),
        ([], ("give --shapes or --sweep",)),
    ],
)
def test_bench_checks_its_arguments_before_the_benchmark(capsys, monkeypatch, tmp_path, argv, words):
    """A bad shape, block size, accumulator, k or output file is refused at once, in one line, on any machine: not
    after minutes of timing on a GPU (or as a traceback from inside the run), and not as "needs a GPU" here."""
    monkeypatch.setattr(cli.bench, "run", not_benchmarked)
    monkeypatch.setattr(cli.bench, "bench_topk", not_benchmarked)
    refused(capsys, "bench", *(a.format(tmp=tmp_path) for a in argv), words=words)


def test_bench_writes_its_file_and_leaves_none_when_it_cannot_run(capsys, monkeypatch, tmp_path):
    out = tmp_path / "r.json"
    refused(capsys, "bench", "--variants", "fast", "--shapes", "4x1024", "--json", str(out))  # no GPU here
    assert not out.exists()
    doc = {**valid_doc({"gpu": "H200"}), "config": {}}
    monkeypatch.setattr(cli.bench, "run", lambda *args, **kwargs: doc)
    code, printed, err = call(capsys, "bench", "--variants", "fast", "--shapes", "4x1024", "--json", str(out))
    assert code == 0, err
    assert json.loads(out.read_text()) == doc and printed.startswith("H200, CUDA ?")


def test_topk_with_no_finite_row_says_there_is_nothing_to_check(capsys):
    code, out, err = call(capsys, "topk", "--dist", "nonfinite", "--param", "rate=0.3", "--rows", "4", "--cols", "64")
    assert code == 0, err
    assert "nothing to check: every row holds a NaN or +inf" in out
    assert "wrong indices" not in out and "max_rel" not in out


def test_show_keeps_huge_numbers_of_a_file_narrow(capsys, tmp_path):
    doc = valid_doc({})
    doc["results"][0] |= {"median_us": 1e300, "gbps": 1750.4}
    code, out, err = call(capsys, "show", results_file(tmp_path, doc))
    assert code == 0, err
    row = out.splitlines()[2].split()
    assert "1e+300" in row and "1750" in row
    assert max(len(line) for line in out.splitlines()) < 200


def test_show_into_a_closed_pipe_stops_quietly():
    """show … | head: the reader goes away after a line; no error line and no traceback, and the status a shell
    gives a command stopped by SIGPIPE."""
    files = [str(ROOT / "docs/results/sweep-fast.json")] * 4  # more than a pipe holds, so a write meets the close
    process = subprocess.Popen(
        [sys.executable, "-m", "explorer", "show", *files],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "EXPLORER_BACKEND": "emulator"},
    )
    process.stdout.readline()
    process.stdout.close()
    err = process.stderr.read().decode()
    assert process.wait(timeout=120) == 141 and err == "", err

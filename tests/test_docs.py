"""The README's variant table is the registry's (scripts/variant_table.py prints it), its Layout section names the
tree as it is, its command lines run, and the figures the README and the notes quote are the bundled files'."""

import dataclasses
import importlib.util
import json
import re
import shlex
from pathlib import Path

import pytest

import explorer
from explorer import cli
from explorer.backends import cuda

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _variant_table_module():
    spec = importlib.util.spec_from_file_location("variant_table", ROOT / "scripts" / "variant_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _row(table: str, key: str) -> str:
    return next(line for line in table.splitlines() if line.startswith(f"| `{key}` |"))


def test_readme_variant_table_matches_the_registry():
    assert _variant_table_module().variant_table() in README


def test_variant_table_reads_dtypes_and_accumulators_from_the_registry(monkeypatch):
    module = _variant_table_module()
    before = _row(module.variant_table(), "naive")
    assert "| fp32, fp16, bf16 · fp32, fp16, bf16 |" in before
    narrowed = dataclasses.replace(explorer.VARIANTS["naive"], dtypes=("float32",), accumulators=("float32", "float16"))
    monkeypatch.setitem(explorer.VARIANTS, "naive", narrowed)
    assert "| fp32 only · fp32, fp16 |" in _row(module.variant_table(), "naive")


def test_readme_layout_names_every_module_and_only_files_that_exist():
    layout = README.split("## Layout\n", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"[\w.]+\.(?:py|cuh|cu)\b", layout))
    files = [
        p
        for d in ("explorer", "ui", "kernels")
        for p in (ROOT / d).rglob("*")
        if p.suffix in (".py", ".cu", ".cuh") and p.name != "__init__.py" and "__pycache__" not in p.parts
    ]
    missing = sorted({p.relative_to(ROOT).as_posix() for p in files if p.name not in named})
    assert not missing, f"the README's Layout does not name {missing}"
    every = {p.name for p in files} | {p.name for d in (ROOT, ROOT / "tests", ROOT / "scripts") for p in d.glob("*.py")}
    assert named <= every, f"the README's Layout names {sorted(named - every)}, not in the tree"


def _said(text: str) -> str:
    return " ".join(text.split())


def _command_lines() -> list[tuple[list[str], str]]:
    """The README's Command line block: each line's arguments after `python -m explorer`, and its comment."""
    block = README.split("## Command line\n", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    lines = []
    for line in block.splitlines():
        command, _, comment = line.partition("#")
        words = shlex.split(command)
        assert words[:3] == ["python", "-m", "explorer"], line
        lines.append((words[3:], comment))
    return lines


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = cli.main(argv)
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("argv", "comment"), [pytest.param(*line, id=" ".join(line[0])) for line in _command_lines()])
def test_readme_command_lines_run_here_or_say_they_need_a_gpu(monkeypatch, capsys, tmp_path, argv, comment):
    """Every command line of the README runs as written on a machine without a GPU, except those marked GPU only,
    which are refused there in one line that says so."""
    monkeypatch.setenv("EXPLORER_BACKEND", "emulator")
    monkeypatch.delenv("EXPLORER_MAX_ELEMENTS", raising=False)
    gpu_only = "GPU only" in comment
    if gpu_only and cuda.available():
        pytest.skip("a GPU is here: the command would run the whole benchmark")
    monkeypatch.chdir(tmp_path if gpu_only else ROOT)  # a --json file lands in tmp_path
    code, out, err = run_cli(argv, capsys)
    if gpu_only:
        assert code == 2 and "need a GPU" in err, err
    else:
        assert code == 0 and out and not err, err


def test_readme_long_row_figures_are_the_bundled_files():
    doc = json.loads((ROOT / "docs/results/long-rows.json").read_text())
    fast = next(
        r for r in doc["results"] if (r["name"], r["dtype"], r["rows"], r["cols"]) == ("fast", "float32", 1, 2**20)
    )
    said = f"fp32 1×1M `fast` is {fast['median_us']:.0f} µs of event time and {fast['device_us']:.1f} of device time"
    assert said in _said(README)


def test_readme_names_every_package_of_the_requirements_files():
    said = README.split("**What gets installed.**", 1)[1].split("everywhere;", 1)[0].lower()
    for name in ("requirements.txt", "requirements-dev.txt"):
        for line in (ROOT / name).read_text().splitlines():
            package = re.split(r"[<>=\[ #]", line.strip())[0]
            if package and not line.startswith(("#", "-")):
                assert package.lower() in said, f"the README's What gets installed does not name {package} ({name})"


DOCS = ("README.md", "docs/benchmarks.md", "docs/precision.md", "docs/topk-notes.md")
PATH = re.compile(r"(?<![\w/.-])\.?(?:[\w-]+/)+[\w.*-]+\.(?:py|cu|cuh|md|json|txt|log|png|svg|sh|toml)\b")


@pytest.mark.parametrize("doc", DOCS)
def test_every_path_a_doc_names_exists(doc):
    named = set(PATH.findall((ROOT / doc).read_text()))
    missing = sorted(p for p in named if not list(ROOT.glob(p)))
    assert not missing, f"{doc} names {missing}, not in the tree"


def test_topk_notes_comparison_with_torch_is_the_bundled_file():
    results = json.loads((ROOT / "docs/results/topk.json").read_text())["results"]
    by = {(r["name"], r["rows"], r["cols"], r.get("k")): r for r in results}
    fused = [key for key in by if key[0] == "topk_fused"]

    def speedups(peer):
        return [by[(peer, *key[1:])]["device_us"] / by[key]["device_us"] for key in fused]

    def ms(name):
        return by[(name, 4096, 128256, 8)]["device_us"] / 1000

    torch, lse = speedups("torch"), speedups("torch_lse")
    notes = _said((ROOT / "docs/topk-notes.md").read_text())
    assert f"topk_fused is {min(torch):.1f}–{max(torch):.0f}× faster" in notes
    assert f"`exp(v − logsumexp(x))`) {min(lse):.1f}–{max(lse):.0f}×" in notes
    assert (
        f"At 4096×128256 k=8: torch {ms('torch'):.2f} ms, the logsumexp form {ms('torch_lse'):.2f} ms, "
        f"topk_fused {ms('topk_fused'):.3f} ms"
    ) in notes

"""The README's variant table is the registry's (scripts/variant_table.py prints it), and its Layout section
names the tree as it is."""

import dataclasses
import importlib.util
import re
from pathlib import Path

import explorer

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

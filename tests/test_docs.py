"""The README's variant table is the registry's (scripts/variant_table.py prints it)."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_variant_table_matches_the_registry():
    spec = importlib.util.spec_from_file_location("variant_table", ROOT / "scripts" / "variant_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.variant_table() in (ROOT / "README.md").read_text()

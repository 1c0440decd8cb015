"""Imports point down: app.py and ui/ use the explorer API and never CuPy; only the CUDA backend and
the benchmark harness touch CuPy."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_ui_never_imports_cupy_or_the_backends():
    for path in [ROOT / "app.py", *sorted((ROOT / "ui").rglob("*.py"))]:
        for name in imported_modules(path):
            assert not name.startswith("cupy"), (path.name, name)
            assert "backends" not in name, (path.name, name)


def test_only_the_cuda_backend_imports_cupy():
    for path in sorted((ROOT / "explorer").rglob("*.py")):
        if any(name.startswith("cupy") for name in imported_modules(path)):
            assert path.relative_to(ROOT).as_posix() in {"explorer/backends/cuda.py", "explorer/bench.py"}, path


def test_explorer_never_imports_the_ui():
    for path in sorted((ROOT / "explorer").rglob("*.py")):
        for name in imported_modules(path):
            assert not name.startswith(("ui", "streamlit", "plotly")), (path, name)


def test_figures_never_import_streamlit():
    """ui/figures/ is pure: scripts and tests build the same figures without Streamlit."""
    for path in sorted((ROOT / "ui" / "figures").rglob("*.py")):
        for name in imported_modules(path):
            assert not name.startswith("streamlit"), (path.name, name)

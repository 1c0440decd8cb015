"""Imports point down: app.py and ui/ use the explorer API and never CuPy; only the CUDA backend and
the benchmark harness touch CuPy."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def imported_modules(path: Path, source: str | None = None) -> set[str]:
    """The dotted names path imports. `from a import b` records both a and a.b (b may be a module), and
    relative imports resolve against path's package, so `from explorer import backends` and
    `from . import backends` inside explorer/ both read as explorer.backends."""
    tree = ast.parse(path.read_text() if source is None else source)
    package = path.relative_to(ROOT).parent.parts
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else ()
            module = ".".join((*base, *([node.module] if node.module else [])))
            if module:
                names.add(module)
            names |= {f"{module}.{a.name}" if module else a.name for a in node.names if a.name != "*"}
    return names


def test_imported_modules_sees_names_imported_from_a_package():
    ui_page = ROOT / "ui" / "pages" / "example.py"
    assert "explorer.backends" in imported_modules(ui_page, "from explorer import backends\n")
    assert "explorer.backends.cuda" in imported_modules(ui_page, "from explorer.backends import cuda\n")
    inside = ROOT / "explorer" / "example.py"
    assert "explorer.backends" in imported_modules(inside, "from . import backends\n")
    assert "explorer.backends.cuda" in imported_modules(inside, "from .backends import cuda\n")
    assert "ui.figures.step" in imported_modules(ui_page, "from ..figures import step\n")


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


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_uses(path: Path) -> list[tuple[int, str]]:
    """The _private names of explorer/ and ui/ modules that path imports or reads as attributes."""
    tree = ast.parse(path.read_text())
    bound, found = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound |= {
                a.asname or a.name.split(".")[0] for a in node.names if a.name.split(".")[0] in ("explorer", "ui")
            }
        elif isinstance(node, ast.ImportFrom) and (
            node.level or (node.module or "").split(".")[0] in ("explorer", "ui")
        ):
            found += [(node.lineno, a.name) for a in node.names if is_private(a.name)]
            bound |= {a.asname or a.name for a in node.names}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_private(node.attr):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in bound:
                found.append((node.lineno, ast.unparse(node)))
    return found


def test_no_module_uses_another_modules_private_names():
    """Pages, scripts and tests go through public names: a page never reaches into another page's internals."""
    paths = [
        ROOT / "app.py",
        *(p for d in ("explorer", "ui", "scripts", "tests") for p in sorted((ROOT / d).rglob("*.py"))),
    ]
    for path in paths:
        assert not private_uses(path), (path.relative_to(ROOT).as_posix(), private_uses(path))

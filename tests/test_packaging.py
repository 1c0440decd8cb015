"""pyproject.toml declares what requirements*.txt install, and its console script exists."""

import importlib
import re
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def requirements(name: str) -> set[str]:
    """The requirement lines of a file, without comments, includes or spaces."""
    lines = (re.sub(r"#.*", "", line).strip() for line in (ROOT / name).read_text().splitlines())
    return {line.replace(" ", "") for line in lines if line and not line.startswith("-r")}


def test_dependencies_match_the_requirements_files():
    assert set(PROJECT["dependencies"]) == requirements("requirements.txt")
    extras = PROJECT["optional-dependencies"]
    assert set(extras["gpu"]) == requirements("requirements-gpu.txt")
    assert set(extras["peers"]) == requirements("requirements-peers.txt")
    assert set(extras["dev"]) == requirements("requirements-dev.txt")


def test_console_script_points_at_the_cli():
    module, _, function = PROJECT["scripts"]["softmax-explorer"].partition(":")
    assert callable(getattr(importlib.import_module(module), function))

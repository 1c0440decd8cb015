import pytest

from explorer.backends import cuda


def pytest_collection_modifyitems(config, items):
    if cuda.available():
        return
    skip = pytest.mark.skip(reason=f"no GPU: {cuda.unavailable_reason()}")
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)


@pytest.fixture
def emulator_backend(monkeypatch):
    """The pages' runs go to the emulation, GPU or not (tests/test_app_gpu.py drives the app on a GPU)."""
    monkeypatch.setenv("EXPLORER_BACKEND", "emulator")

import pytest

from explorer.backends import cuda


def pytest_collection_modifyitems(config, items):
    if cuda.available():
        return
    skip = pytest.mark.skip(reason=f"no GPU: {cuda.unavailable_reason()}")
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)

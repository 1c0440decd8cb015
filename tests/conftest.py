import pytest

from explorer.backends import cuda


def pytest_collection_modifyitems(config, items):
    _spread_browser_tests(config, items)
    if cuda.available():
        return
    skip = pytest.mark.skip(reason=f"no GPU: {cuda.unavailable_reason()}")
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)


def _spread_browser_tests(config, items) -> None:
    """Under pytest-xdist, each worker's first share of the run is a contiguous slice of this order: the browser
    tests (each a server, a browser and seconds of page loads) are dealt out in turn to the slices and run first
    in each, the others fill the slices after them, so the long tests neither queue on one worker nor end the run."""
    workers = getattr(config, "workerinput", {}).get("workercount", 1)
    if workers < 2:
        return
    browser = [item for item in items if item.get_closest_marker("browser")]
    rest = [item for item in items if not item.get_closest_marker("browser")]
    sizes, left = [], len(items)
    for i in range(workers):  # as xdist's schedulers split the pending tests among the workers
        sizes.append(left // (workers - i))
        left -= sizes[-1]
    slices = [browser[i::workers] for i in range(workers)]
    for piece, size in zip(slices, sizes):
        take = max(size - len(piece), 0)
        piece += rest[:take]
        del rest[:take]
    items[:] = [item for piece in slices for item in piece] + rest

"""The CUDA backend's host-side bookkeeping, with a stand-in for CuPy (no GPU needed)."""

import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

import explorer
from explorer import fast_launch
from explorer.backends import cuda


class Words:
    """A stand-in for the stream's uint64 words: their size, and how often they were zeroed. Reading the size lets
    other threads run, as CuPy's calls may."""

    def __init__(self, size: int):
        self._size, self.zeroed = size, 1

    @property
    def size(self) -> int:
        time.sleep(0)
        return self._size

    def fill(self, value: int) -> None:
        assert value == 0
        self.zeroed += 1


@pytest.fixture
def words_by_stream(monkeypatch):
    """The backend's words and epoch per stream, as the test sees them."""
    table = {}
    monkeypatch.setattr(cuda, "_words", table)
    return table


@pytest.fixture
def across_unchecked(monkeypatch, words_by_stream):
    """A launch of a row over several clusters, and row_exchange with CuPy stood in for (one stream); the driver's
    count of resident clusters as it is."""
    fake = SimpleNamespace(
        cuda=SimpleNamespace(get_current_stream=lambda: SimpleNamespace(ptr=0)),
        zeros=lambda size, dtype: Words(size),
    )
    monkeypatch.setattr(cuda, "cp", fake)
    monkeypatch.setattr(cuda, "_null_trace", lambda: (None, None, None))
    launch = explorer.VARIANTS["fast"].launch(1, 2**20, None, "float32")
    assert launch.kernel == "fast_row_cluster" and fast_launch.across_clusters(launch)
    return launch


@pytest.fixture
def across(monkeypatch, across_unchecked):
    """across_unchecked on an H200 that holds four blocks an SM of the launch."""
    monkeypatch.setattr(cuda, "_resident_clusters", lambda kernel, grid, threads, shared: 4 * 132 // 8)
    return across_unchecked


def epoch_of(launch) -> int:
    return int(np.int32(cuda.row_exchange(None, launch, 1, 0)[2]).view(np.uint32))


def test_launches_from_many_threads_each_get_their_own_epoch(across):
    """Sessions launch at once: no two launches on a stream may share an epoch, or one could fold the other's words."""
    epochs, threads = [], 8

    def launch_many():
        mine = [epoch_of(across) for _ in range(500)]
        epochs.extend(mine)

    workers = [threading.Thread(target=launch_many) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert sorted(epochs) == list(range(1, 500 * threads + 1))


def test_the_epoch_wraps_to_1_and_the_words_are_zeroed_first(across, words_by_stream):
    first = epoch_of(across)
    words = words_by_stream[0][0]
    words_by_stream[0] = (words, cuda.EPOCHS)
    assert (first, epoch_of(across), words.zeroed) == (1, 1, 2)
    assert epoch_of(across) == 2 and words.zeroed == 2


def test_a_grid_whose_clusters_might_not_all_be_resident_is_refused(across, monkeypatch):
    """A row's clusters wait for each other: one fewer cluster resident than the launch has, and the last could wait
    for SMs that the spinning others hold."""
    clusters = across.grid // across.template_args[3]
    monkeypatch.setattr(cuda, "_resident_clusters", lambda kernel, grid, threads, shared: clusters - 1)
    with pytest.raises(explorer.KernelFailed, match=f"needs its {clusters} clusters resident at once"):
        cuda.row_exchange(None, across, 1, 0)
    monkeypatch.setattr(cuda, "_resident_clusters", lambda kernel, grid, threads, shared: clusters)
    assert epoch_of(across) == 1


def test_a_row_in_one_cluster_exchanges_nothing_through_global_memory(across, words_by_stream):
    one = explorer.VARIANTS["fast"].launch(4, 65536, None, "float32")
    assert one.protocol == "cluster" and not fast_launch.across_clusters(one)
    assert cuda.row_exchange(None, one, 4, 0)[2] is True and not words_by_stream


def test_a_driver_that_cannot_count_clusters_refuses_the_launch_with_a_reason(across_unchecked, monkeypatch):
    """cuOccupancyMaxActiveClusters came with CUDA 12.0: without it no across launch can be checked, so none runs."""
    monkeypatch.setattr(cuda, "_max_active_clusters", lambda: None)
    with pytest.raises(explorer.KernelFailed, match="cannot count resident clusters"):
        cuda.row_exchange(object(), across_unchecked, 1, 0)

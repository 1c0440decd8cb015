"""What the app keeps between reruns and across sessions (inputs, float64 references, outputs, traces): one store for
the server process, held to explorer.budget.KEPT_BUDGET bytes in all, the least recently used out first.

st.cache_data bounds a cache's entries, not its bytes, so an entry count that is harmless for small runs holds
gigabytes for large ones, beside the memory that runs reserve (explorer.reserve.RUNS). Here every kept value's
arrays are counted, and made read-only: sessions share them, none may change another's."""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import TypeVar

import numpy as np

from explorer import budget

T = TypeVar("T")


class NotKept(Exception):
    """A value not kept (yet, or any longer)."""


def held_bytes(value: object) -> int:
    """The bytes of the NumPy arrays a value holds (in its dataclass fields, lists, tuples and dicts), each array
    made read-only on the way."""
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
        return value.nbytes
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(held_bytes(getattr(value, f.name)) for f in dataclasses.fields(value))
    if isinstance(value, list | tuple):
        return sum(held_bytes(v) for v in value)
    if isinstance(value, dict):
        return sum(held_bytes(v) for v in value.values())
    return 0


class Keeper:
    """A byte-bounded store, least recently used out first (thread-safe: Streamlit sessions are threads)."""

    def __init__(self, limit: int):
        self.limit = limit
        self._values: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()

    @property
    def held(self) -> int:
        with self._lock:
            return self._held

    def get(self, key: Hashable):
        """The value kept under key (now the most recently used); NotKept where there is none."""
        with self._lock:
            if key not in self._values:
                raise NotKept
            self._values.move_to_end(key)
            return self._values[key][0]

    def put(self, key: Hashable, value: T) -> T:
        """Keep value under key, the least recently used values leaving until it fits; a value larger than the
        whole store is returned without being kept."""
        size = held_bytes(value)
        with self._lock:
            if key in self._values:
                self._held -= self._values.pop(key)[1]
            if size > self.limit:
                return value
            while self._held + size > self.limit:
                self._held -= self._values.popitem(last=False)[1][1]
            self._values[key] = (value, size)
            self._held += size
        return value

    def get_or_make(self, key: Hashable, make: Callable[[], T]) -> T:
        try:
            return self.get(key)
        except NotKept:
            return self.put(key, make())

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
            self._held = 0


KEPT = Keeper(budget.KEPT_BUDGET)

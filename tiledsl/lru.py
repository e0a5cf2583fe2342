"""A bounded, thread-safe least-recently-used map (the in-process caches of compiled kernels)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable


class LRU:
    """A ``maxsize``-bounded map that forgets the least recently used key first.

    Every operation holds one lock, so threads may get, put and clear concurrently (a plain
    ``OrderedDict`` raises ``KeyError`` from ``move_to_end`` when another thread clears it between the
    lookup and the move).
    """

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError(f"LRU maxsize={maxsize} must be >= 1")
        self.maxsize = maxsize
        self._data: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, default=None):
        """The value of ``key`` (now the most recently used), or ``default``."""
        with self._lock:
            try:
                self._data.move_to_end(key)
            except KeyError:
                return default
            return self._data[key]

    def put(self, key: Hashable, value) -> None:
        """Store ``value`` under ``key``, forgetting the least recently used keys beyond ``maxsize``."""
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)

    def clear(self) -> None:
        """Forget every key."""
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._data

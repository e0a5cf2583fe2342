"""One cache policy for everything memoized on the call path: bounded, thread-safe LRU maps.

Every cache is made with :func:`lru` and listed here, so storing a tuned schedule
(``tiledsl.registry.store``) can forget everything that depended on the old choice with
:func:`invalidate_tuned`, and :func:`clear_all` empties them (tests, benchmarks).

Caches:

* ``kernels``: (family, op, schedule, target) -> (Plan, Kernel): the emitted, compiled kernel.
* ``schedules``: (family, op, target) -> the schedule ``schedule=None`` resolves to (tuned or default).
* ``launches``: a call's signature (shapes, strides, dtypes, alignment class, alpha/beta presence,
  schedule, device) -> everything a launch needs, so a repeated call is one lookup plus the launch.
* ``plans``: (family, op, schedule, target) -> Plan.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from . import lru as _lru

_MISSING = object()


class LRU(_lru.LRU):
    """A :class:`tiledsl.lru.LRU` (bounded, thread-safe) with a name, hit counts and a tuned-store flag.

    Args:
        name: for :func:`stats`.
        maxsize: entries kept (the least recently used is dropped beyond it).
        tuned: True when entries depend on the tuned-schedule store (cleared by :func:`invalidate_tuned`).
    """

    def __init__(self, name: str, maxsize: int, tuned: bool) -> None:
        super().__init__(maxsize)
        self.name, self.tuned = name, tuned
        self.hits = self.misses = 0

    def get(self, key: Hashable, default=None):
        """The value of ``key`` (marked recently used), or ``default``.

        Raises:
            TypeError: ``key`` is not hashable.
        """
        with self._lock:
            try:
                self._data.move_to_end(key)
            except KeyError:
                self.misses += 1
                return default
            self.hits += 1
            return self._data[key]

    def get_or_make(self, key: Hashable, make: Callable[[], object]):
        """The value of ``key``, made with ``make()`` (outside the lock) and stored on a miss."""
        value = self.get(key, _MISSING)
        if value is _MISSING:
            value = make()
            self.put(key, value)
        return value


_CACHES: list[LRU] = []


def lru(name: str, maxsize: int, *, tuned: bool) -> LRU:
    """A new registered :class:`LRU` (see the module docstring for the caches in use)."""
    c = LRU(name, maxsize, tuned)
    _CACHES.append(c)
    return c


def invalidate_tuned() -> None:
    """Forget every entry that may depend on a tuned schedule (called by ``registry.store``)."""
    for c in _CACHES:
        if c.tuned:
            c.clear()


def clear_all() -> None:
    """Empty every registered cache."""
    for c in _CACHES:
        c.clear()


def stats() -> dict[str, dict[str, int]]:
    """name -> {"size", "hits", "misses"} of every registered cache."""
    return {c.name: {"size": len(c), "hits": c.hits, "misses": c.misses} for c in _CACHES}


KERNELS = lru("kernels", 4096, tuned=False)
SCHEDULES = lru("schedules", 4096, tuned=True)
LAUNCHES = lru("launches", 4096, tuned=True)
PLANS = lru("plans", 8192, tuned=False)

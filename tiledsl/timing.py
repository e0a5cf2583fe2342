"""CUDA-event timer: warm-up, L2 flushed outside the timed region, many repeats, median and spread.

Method (``docs/design.md``, "Principles": honest timing): events around each
call, warm-up first, median of many repeats, caches flushed with a buffer of at least twice the L2.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

from .target import Target


@dataclass(frozen=True)
class Timing:
    """Result of :func:`time_gpu`.

    Attributes:
        median_ms: median time of one call, milliseconds.
        p10_ms, p90_ms: 10th and 90th percentile, milliseconds.
        repeats: number of timed calls.
    """

    median_ms: float
    p10_ms: float
    p90_ms: float
    repeats: int

    @property
    def spread(self) -> float:
        """(p90 − p10) / median."""
        return (self.p90_ms - self.p10_ms) / self.median_ms if self.median_ms else 0.0


_FLUSH: dict[int, object] = {}


def flush_l2() -> None:
    """Overwrite a buffer of 2 × the device's L2 size, evicting earlier data from L2."""
    import cupy

    dev = cupy.cuda.Device().id
    buf = _FLUSH.get(dev)
    if buf is None:
        buf = cupy.empty(2 * Target.current().l2_bytes // 4, dtype=cupy.float32)
        _FLUSH[dev] = buf
    buf.fill(1.0)


def time_gpu(fn: Callable[[], object], *, warmup: int = 3, repeat: int = 20, min_time_ms: float = 0.0,
             max_repeat: int = 1000, flush: bool = True) -> Timing:
    """Time ``fn`` (which enqueues GPU work on the current stream) with CUDA events.

    Each timed call is preceded by an L2 flush (when ``flush``), outside the events. Repeats continue
    past ``repeat`` until ``min_time_ms`` of timed work has accumulated or ``max_repeat`` is reached.
    """
    import cupy

    for _ in range(warmup):
        fn()
    cupy.cuda.Device().synchronize()
    times: list[float] = []
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    while len(times) < repeat or (sum(times) < min_time_ms and len(times) < max_repeat):
        if flush:
            flush_l2()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end))
    times.sort()
    n = len(times)
    return Timing(statistics.median(times), times[n // 10], times[min(n - 1, (9 * n) // 10)], n)

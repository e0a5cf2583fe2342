"""CUDA-event timer: warm-up, L2 flushed outside the timed region, many repeats, median and spread.

Method (``docs/design.md``, "Principles": honest timing): events around each
call, warm-up first, median of many repeats, caches flushed with a buffer of at least twice the L2.

Two ways to empty L2. The default writes the flush buffer (``fill``): L2 is then full of dirty lines of it, which
the timed call is expected to write back to HBM as its own data evicts them, up to the L2's size (50 MB on an H100 or
H200, about 12 µs at 4 TB/s) inside the timed region. ``gpu_only=True`` reads the buffer instead (a grid-stride sum
that stores nothing), so L2 holds clean lines that leave without a write, and holds the stream with a one-thread
sleep kernel until the call and its end event are enqueued, so the host's own launch time stays out of the figure
as well. The events still hold the start of the call's first kernel, any gap between its kernels and its tail. It
is meant for figures such as a share of the HBM bandwidth on products of a few tens of µs. The default stays the
tuner's and the benchmarks' method (their recorded ratios were measured with it).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy

from .compile import Kernel, KernelSource, compile_source
from .runtime import launch
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


class _ReadFlush(NamedTuple):
    """What :func:`flush_l2_clean` keeps per device: its kernel, the zeroed buffer, the never-written sink, the
    buffer's float4 count and the blocks launched."""

    kernel: Kernel
    buf: object
    sink: object
    n: int
    blocks: int


_FLUSH: dict[int, object] = {}
_FLUSH_READ: dict[int, _ReadFlush] = {}
_HOLD_KERNEL: dict[int, Kernel] = {}

_EVICT_BY_READING = r"""
// Empties L2 of earlier data by reading a buffer of twice its size: the lines it leaves behind are clean, so the
// next kernel's misses evict them without a write-back. The buffer holds zeros, so the store never happens; the
// compiler cannot know that, which keeps every load.
extern "C" __global__ void tiledsl_evict_l2_by_reading(const float4* __restrict__ buf, unsigned long long n,
                                                       float* __restrict__ sink)
{
    float acc = 0.0f;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        const float4 v = buf[i];
        acc += (v.x + v.y) + (v.z + v.w);
    }
    if (acc != 0.0f) *sink = acc;
}
"""

_HOLD_STREAM = r"""
// Holds the stream for at least `ns` nanoseconds of the GPU's global timer, so that the work the host enqueues
// behind it is all queued before the first timed event fires.
extern "C" __global__ void tiledsl_hold_stream(unsigned long long ns)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        __nanosleep(1000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}
"""

EVICT_BY_READING = KernelSource("tiledsl_evict_l2_by_reading", _EVICT_BY_READING, (256, 1, 1))
"""The read-only L2 flush of ``time_gpu(gpu_only=True)`` (grid-stride float4 loads, no store for a zero buffer)."""
HOLD_STREAM = KernelSource("tiledsl_hold_stream", _HOLD_STREAM, (1, 1, 1))
"""The one-thread kernel that holds the stream while ``time_gpu(gpu_only=True)`` enqueues the timed call."""

HOLD_US = 200.0
"""First hold of ``gpu_only`` timing, microseconds: several times what one call from Python takes the host
(12–55 µs per call measured, docs/plans.md); a repeat whose enqueue took more than half the hold is timed again
with twice the hold."""
HOLD_MAX_US = 50_000.0
"""The longest hold, microseconds: a call whose enqueue takes the host more than half of it (or that synchronizes)
cannot be timed ``gpu_only``."""
READ_FLUSH_BLOCKS_PER_SM = 8
"""Blocks of 256 threads per SM of the read flush: 2048 threads, a full SM (its kernel needs few registers)."""


def _flush_elements(bytes_per_element: int) -> int:
    """Elements of the flush buffers: twice the current device's L2 (``Target.l2_bytes``)."""
    return 2 * Target.current().l2_bytes // bytes_per_element


def flush_l2() -> None:
    """Overwrite a buffer of 2 × the device's L2 size, evicting earlier data from L2 (and leaving its own lines
    dirty in L2: see the module's docstring)."""
    import cupy

    dev = cupy.cuda.Device().id
    buf = _FLUSH.get(dev)
    if buf is None:
        buf = cupy.empty(_flush_elements(4), dtype=cupy.float32)
        _FLUSH[dev] = buf
    buf.fill(1.0)


def flush_l2_clean() -> None:
    """Read a zeroed buffer of 2 × the device's L2 size, evicting earlier data from L2 and leaving only clean lines
    (nothing to write back inside the next timed region).

    Raises:
        CompileError / LaunchError: its kernel (:data:`EVICT_BY_READING`) does not compile or launch.
    """
    import cupy

    dev = cupy.cuda.Device().id
    f = _FLUSH_READ.get(dev)
    if f is None:
        target = Target.current()
        n = _flush_elements(16)
        f = _FLUSH_READ[dev] = _ReadFlush(compile_source(EVICT_BY_READING, target.arch),
                                          cupy.zeros(4 * n, dtype=cupy.float32), cupy.zeros(1, dtype=cupy.float32),
                                          n, READ_FLUSH_BLOCKS_PER_SM * target.sm_count)
    launch(f.kernel, (f.blocks, 1, 1), (f.buf, numpy.uint64(f.n), f.sink))


def _hold_kernel() -> Kernel:
    """:data:`HOLD_STREAM` compiled for the current device and loaded (a zero-length hold launched once, so that
    loading its module never falls inside a timed repeat's enqueue)."""
    import cupy

    dev = cupy.cuda.Device().id
    kernel = _HOLD_KERNEL.get(dev)
    if kernel is None:
        kernel = compile_source(HOLD_STREAM, Target.current().arch)
        launch(kernel, (1, 1, 1), (numpy.uint64(0),))
        _HOLD_KERNEL[dev] = kernel
    return kernel


def time_gpu(fn: Callable[[], object], *, warmup: int = 3, repeat: int = 20, min_time_ms: float = 0.0,
             max_repeat: int = 1000, flush: bool = True, gpu_only: bool = False) -> Timing:
    """Time ``fn`` (which enqueues GPU work on the current stream) with CUDA events.

    Each timed call is preceded by an L2 flush (when ``flush``), outside the events. Repeats continue
    past ``repeat`` until ``min_time_ms`` of timed work has accumulated or ``max_repeat`` is reached.

    With ``gpu_only`` the flush reads instead of writes (:func:`flush_l2_clean`) and the stream is held
    (:data:`HOLD_STREAM`) while ``fn`` and the end event are enqueued: the figure leaves out the dirty lines of a
    written flush and the host's launch time (the module's docstring). ``fn`` must then only enqueue work on the
    current CuPy stream, never synchronize. A repeat whose enqueue took more than half the hold is discarded and
    timed again with twice the hold.

    Returns:
        :class:`Timing`, milliseconds.

    Raises:
        RuntimeError: with ``gpu_only``, ``fn`` took the host more than :data:`HOLD_MAX_US` / 2 to return (it
            synchronizes, or its launches wait for a full queue).
        CompileError / LaunchError: with ``gpu_only``, a helper kernel does not compile or launch.
    """
    import cupy

    hold = _hold_kernel() if gpu_only else None
    for _ in range(warmup):
        fn()
    cupy.cuda.Device().synchronize()
    times: list[float] = []
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    hold_us = HOLD_US
    while len(times) < repeat or (sum(times) < min_time_ms and len(times) < max_repeat):
        if flush and gpu_only:
            flush_l2_clean()
        elif flush:
            flush_l2()
        if gpu_only:
            t0 = time.perf_counter()
            launch(hold, (1, 1, 1), (numpy.uint64(int(hold_us * 1e3)),))
        start.record()
        fn()
        end.record()
        if gpu_only and (time.perf_counter() - t0) * 1e6 > hold_us / 2:
            end.synchronize()
            if hold_us >= HOLD_MAX_US:
                raise RuntimeError(f"time_gpu(gpu_only=True): the call took the host more than {HOLD_MAX_US / 2:.0f} "
                                   f"µs to return, half the longest hold ({HOLD_MAX_US:.0f} µs): does it synchronize, "
                                   "or wait for a full launch queue? gpu_only needs a call that only enqueues")
            hold_us = min(2 * hold_us, HOLD_MAX_US)
            continue
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end))
    times.sort()
    n = len(times)
    return Timing(statistics.median(times), times[n // 10], times[min(n - 1, (9 * n) // 10)], n)

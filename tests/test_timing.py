"""tiledsl.timing: the two helper kernels of ``gpu_only`` timing compile on CPU; on a GPU, the host's launch time
stays out of a ``gpu_only`` figure and shows in the default one."""

from __future__ import annotations

import time

import pytest

from tiledsl.compile import compile_source
from tiledsl.timing import EVICT_BY_READING, HOLD_STREAM, time_gpu


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("ks", [EVICT_BY_READING, HOLD_STREAM], ids=lambda ks: ks.name)
def test_gpu_only_helper_kernels_compile_without_spills(ks, arch):
    k = compile_source(ks, arch)
    assert k.spill_bytes == 0 and k.stack_bytes == 0 and k.smem_bytes == 0
    assert 0 < k.registers <= 32


def test_the_read_flush_loads_in_its_loop_and_stores_only_under_a_test_of_the_sum():
    # The flush must leave L2 clean: in NVRTC's PTX its loop keeps the 16-byte loads, and its one store sits after
    # the test of the loaded sum against zero (the sum of its zeroed buffer), so it is never executed.
    import re

    from cupy.cuda import nvrtc

    prog = nvrtc.createProgram(EVICT_BY_READING.source, "flush.cu", [], [])
    try:
        nvrtc.compileProgram(prog, ["-arch=compute_90"])
        ptx = nvrtc.getPTX(prog)
    finally:
        nvrtc.destroyProgram(prog)
    ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
    body = ptx[ptx.index(".entry"):]
    loop = re.search(r"(\$L__BB\d+_\d+):\n(.*?)@%p\d+ bra\s+\1;", body, re.S)
    assert loop and re.search(r"ld\.global(\.nc)?\.v4\.f32", loop.group(2)), body
    stores = re.findall(r"\bst\.global\S*", body)
    assert len(stores) == 1, stores
    before_store = body[:body.index(stores[0])]
    assert re.search(r"setp\.(eq|ne)\.f32\s+%p\d+, %f\d+, 0f00000000;", before_store), body


@pytest.mark.gpu
def test_gpu_only_leaves_the_hosts_launch_time_out():
    import cupy as cp

    x = cp.ones(1 << 20, cp.float32)
    y = cp.empty_like(x)

    def slow_to_enqueue():  # 2 ms of host time before a ~2 µs copy
        time.sleep(2e-3)
        y[...] = x

    eager = time_gpu(slow_to_enqueue, warmup=1, repeat=5)
    held = time_gpu(slow_to_enqueue, warmup=1, repeat=5, gpu_only=True)
    assert eager.median_ms > 1.9, eager  # the default figure includes the host's 2 ms
    assert 0 < held.median_ms < 0.1, held  # the held one is the copy alone (a launch and 8 MiB moved: ~5 µs)
    cp.testing.assert_array_equal(y, x)


def test_gpu_only_doubles_the_hold_until_the_enqueue_fits_and_then_refuses(monkeypatch):
    """The hold check with the GPU parts replaced: a call taking the host 0.3 ms is timed under holds of 100, 200,
    400 and finally 800 µs (the repeats of the shorter ones discarded); one longer than half the longest hold is
    refused with an error that says why."""
    import cupy

    import tiledsl.timing as T

    holds: list[int] = []

    class Event:
        def record(self):
            pass

        def synchronize(self):
            pass

    class Device:
        def synchronize(self):
            pass

    monkeypatch.setattr(cupy.cuda, "Event", Event)
    monkeypatch.setattr(cupy.cuda, "Device", Device)
    monkeypatch.setattr(cupy.cuda, "get_elapsed_time", lambda start, end: 0.25)
    monkeypatch.setattr(T, "_hold_kernel", lambda: "hold")
    monkeypatch.setattr(T, "flush_l2_clean", lambda: None)
    monkeypatch.setattr(T, "launch", lambda kernel, grid, args: holds.append(int(args[0])))
    monkeypatch.setattr(T, "HOLD_US", 100.0)
    monkeypatch.setattr(T, "HOLD_MAX_US", 1600.0)
    clock = [0.0]  # the host's clock, seconds: only the timed call moves it

    class FakeTime:
        @staticmethod
        def perf_counter() -> float:
            return clock[0]

    def host_takes(seconds: float):
        return lambda: clock.__setitem__(0, clock[0] + seconds)

    monkeypatch.setattr(T, "time", FakeTime)
    got = T.time_gpu(host_takes(3e-4), warmup=0, repeat=3, gpu_only=True)
    assert got.repeats == 3 and got.median_ms == 0.25
    assert holds[:4] == [100_000, 200_000, 400_000, 800_000] and set(holds[3:]) == {800_000}, holds
    holds.clear()
    with pytest.raises(RuntimeError, match="synchronize"):
        T.time_gpu(host_takes(1e-3), warmup=0, repeat=1, gpu_only=True)
    assert holds == [100_000, 200_000, 400_000, 800_000, 1_600_000]

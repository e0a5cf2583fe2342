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


def test_the_read_flush_stores_only_under_a_test_of_what_it_loaded():
    # The flush must leave L2 clean: its one store is guarded by the loaded sum, which is zero for its buffer.
    src = EVICT_BY_READING.source
    assert src.count("*sink =") == 1 and "if (acc != 0.0f) *sink = acc;" in src


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
    assert 0 < held.median_ms < 0.5, held  # the held one is the copy alone (a launch and 8 MiB moved)
    cp.testing.assert_array_equal(y, x)

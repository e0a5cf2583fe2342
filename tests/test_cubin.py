"""Resource figures from the cubin (tiledsl.cubin) agree with ptxas's -v report, and stand in for it when the
compiler returns no log (NVRTC 13.0 did so on the H200 for most compilations of a process). CPU only:
NVRTC 12.9 here writes both."""

from __future__ import annotations

import pytest

import tiledsl
from tiledsl.compile import KernelSource, compile_source, parse_ptxas_log, resource_report
from tiledsl.cubin import cubin_resources

STACK_SRC = r"""extern "C" __global__ void stacky(float* x, int n) {
  float a[256];  // indexed at run time: lives in the stack frame
  for (int i = 0; i < 256; ++i) a[i] = x[(i * n) % 1000];
  float s = 0.f;
  for (int i = 0; i < 256; ++i) s += a[(i * 7 + n) % 256];
  x[threadIdx.x] = s;
}
"""
SMEM_SRC = r"""extern "C" __global__ void staged(float* x) {
  __shared__ float tile[33 * 32];
  tile[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  x[threadIdx.x] = tile[(threadIdx.x * 33) % 1056];
}
"""


def _kernels():
    h = tiledsl.GemmOp(1000, 1024, 520, dtype="bfloat16", align_a=8, align_b=8, align_c=8, read_c=True)
    return [
        tiledsl.compile(tiledsl.GemmOp(512, 512, 512), arch="sm_90"),
        tiledsl.compile(h, tiledsl.GemmSchedule(mma="wgmma", bm=128, bn=256, bk=64, stages=4, warp_specialize=True),
                        arch="sm_90"),
        tiledsl.compile(tiledsl.ReduceOp(shape=(128, 4096), op="sum", axis=1), arch="sm_80"),
        compile_source(KernelSource("stacky", STACK_SRC, (32, 1, 1)), "sm_90"),
        tiledsl.compile(tiledsl.ReduceOp(shape=(128, 4096), op="sum", axis=1), arch="sm_90"),
        compile_source(KernelSource("staged", SMEM_SRC, (1024, 1, 1)), "sm_90"),
        compile_source(KernelSource("staged", SMEM_SRC, (1024, 1, 1)), "sm_80"),
    ]


def test_cubin_figures_equal_the_ptxas_report():
    seen_stack = seen_smem = False
    for k in _kernels():
        log = parse_ptxas_log(k.log, k.name)
        got = cubin_resources(k.cubin, k.name)
        assert log["registers"] > 0, k.log  # NVRTC 12.9 reports; the comparison below means something
        assert got == {"registers": log["registers"], "stack_bytes": log["stack_bytes"],
                       "static_smem_bytes": log["static_smem_bytes"]}, (k.name, got, log)
        seen_stack |= got["stack_bytes"] > 0
        seen_smem |= got["static_smem_bytes"] > 0
    assert seen_stack and seen_smem  # both non-zero cases were exercised


def test_the_cubin_stands_in_for_a_missing_log():
    for k in _kernels():
        report = resource_report("", k.cubin, k.name)
        assert report["registers"] == k.registers > 0
        assert report["spill_bytes"] == report["stack_bytes"]  # spills bounded by the frame
        assert report["stack_bytes"] == k.stack_bytes


@pytest.mark.parametrize("damage", [b"", b"\x7fELF" + bytes(200), b"not an elf at all"])
def test_a_cubin_without_figures_gives_none(damage):
    assert cubin_resources(damage, "stacky") is None
    assert resource_report("", damage, "stacky") is None


def test_a_kernel_name_not_in_the_cubin_gives_none():
    k = compile_source(KernelSource("staged", SMEM_SRC, (1024, 1, 1)), "sm_90")
    assert cubin_resources(k.cubin, "another_kernel") is None

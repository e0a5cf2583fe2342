"""CI: the installed CUDA extra compiles a kernel of every family for sm_90 on a machine with no GPU.

Usage: ``python .ci/compile_check.py MAJOR`` (12 for the ``cuda12`` extra, 13 for ``cuda13``): checks that
CuPy was built for that CUDA major, that NVRTC of that major loads, and compiles a GEMM, a reduction and a
transpose for sm_90, printing ptxas's registers / shared memory / spills. Exit status 0 when all compile.
"""

from __future__ import annotations

import sys
import time

import tiledsl
from tiledsl.compile import cupy_cuda_major, nvrtc_problem, nvrtc_version


def main(major: int) -> int:
    why = nvrtc_problem()
    if why is not None:
        return f"compile_check: {why}"
    got = (cupy_cuda_major(), nvrtc_version()[0])
    if got != (major, major):
        return f"compile_check: expected CuPy and NVRTC for CUDA {major}, got CuPy {got[0]}, NVRTC {nvrtc_version()}"
    ops = [(tiledsl.GemmOp(1024, 1024, 1024), tiledsl.GemmSchedule()),
           (tiledsl.ReduceOp(shape=(4096, 4096), op="sum", axis=1), tiledsl.ReduceSchedule()),
           (tiledsl.TransposeOp(shape=(4096, 4096), dtype="float32"), None)]
    for op, s in ops:
        t0 = time.perf_counter()
        k = tiledsl.compile(op, s, arch="sm_90")
        print(f"CUDA {major}, NVRTC {'.'.join(map(str, nvrtc_version()))}: {k.name} for sm_90 in "
              f"{time.perf_counter() - t0:.2f} s: {k.registers} registers, {k.smem_bytes} B shared memory, "
              f"{k.spill_bytes} B spilled, {len(k.cubin)} B cubin")
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))

"""Quick start: one GEMM schedule, its generated CUDA, its resource report, and (with a GPU) a verified run.

Run: ``python examples/gemm_quickstart.py``. With no GPU it compiles for sm_90 with NVRTC alone, prints the
report, and then stops with one line saying that running the kernel needs a GPU (exit status 1).
"""

from __future__ import annotations

import sys

import numpy as np

import tiledsl

M, N, K = 4096, 4096, 4096
schedule = tiledsl.GemmSchedule(bm=128, bn=128, bk=8, rm=8, rn=8, vec=4, double_buffer=True, unroll=8,
                                smem_pad=0)
op = tiledsl.GemmOp(M, N, K, dtype="float32")

if not tiledsl.gpu_available():
    print("no CUDA GPU here: compiling for sm_90 (H200) with NVRTC only")
    k = tiledsl.compile(op, schedule, arch="sm_90")
    print(f"kernel {k.name}\n  threads/block {k.threads}, registers/thread {k.registers}, "
          f"shared memory {k.smem_bytes} B, spills {k.spill_bytes} B")
    print("first lines of the generated CUDA C:")
    print("\n".join(k.source.splitlines()[:30]))
    sys.exit("examples/gemm_quickstart.py: no GPU: compiled for sm_90 above; running and timing the kernel needs a "
             "CUDA GPU")
else:
    import cupy as cp

    from tiledsl.timing import time_gpu

    rng = np.random.default_rng()
    a = cp.asarray(rng.uniform(-1, 1, (M, K)).astype(np.float32))
    b = cp.asarray(rng.uniform(-1, 1, (K, N)).astype(np.float32))
    c = cp.full((M, N), cp.nan, dtype=cp.float32)
    tiledsl.gemm(a, b, c, schedule=schedule)
    ref = cp.matmul(a.astype(cp.float64), b.astype(cp.float64))
    err = float(cp.linalg.norm(c - ref) / cp.linalg.norm(ref))
    t = time_gpu(lambda: tiledsl.gemm(a, b, c, schedule=schedule)).median_ms
    tb = time_gpu(lambda: cp.matmul(a, b, out=c)).median_ms
    print(f"{M}x{N}x{K} fp32: rel. error {err:.2e}; tiledsl {op.flops / t / 1e9:.1f} TFLOP/s, "
          f"cuBLAS {op.flops / tb / 1e9:.1f} TFLOP/s ({tb / t:.0%} of cuBLAS)")

"""Skinny float32 GEMMs: schedule=None and hand-picked small-tile / split-K schedules beside cuBLAS.

Run on a GPU: ``python benchmarks/gemm_skinny.py --out benchmarks/results/gemm_skinny_h200.json``.

For 35×8457×2560 (DeepBench), 128×4096×4096 (llama-3 o_proj at 128 tokens), 16×4096×4096 and 4096×32×4096
(row-major A and B) every schedule is checked against a float64 product, then timed with
tiledsl.timing.time_gpu (CUDA events, warm-up, L2 flushed, median of 30); cuBLAS (``cupy.matmul``) is timed
right before and right after each schedule and averaged. The schedules include the 200-trial tune's winner
for 35×8457×2560 (16x64x32 t4x4 cp3 p4) with and without its shared-memory padding.
"""

from __future__ import annotations

import argparse

import numpy as np
from beside import bracketed, write_results
from gpu_check import gpu_or_exit

import tiledsl
from tiledsl.timing import time_gpu

SHAPES = [(35, 8457, 2560), (128, 4096, 4096), (16, 4096, 4096), (4096, 32, 4096)]
T4 = dict(rm=4, rn=4, wm=8, wn=64)
SCHEDULES = {
    "schedule=None": None,
    "16x64x32 t4x4 w8x64 cp3 p4": dict(bm=16, bn=64, bk=32, **T4, stages=3, unroll=8, smem_pad=4, swizzle=16,
                                       min_blocks=2),
    "16x64x32 t4x4 w8x64 cp3 p0": dict(bm=16, bn=64, bk=32, **T4, stages=3, unroll=8, swizzle=16, min_blocks=2),
    "16x64x32 t4x4 w8x64 db p0": dict(bm=16, bn=64, bk=32, **T4, unroll=8, swizzle=16, min_blocks=2),
    "16x64x32 t4x4 w8x64 db p0 u32": dict(bm=16, bn=64, bk=32, **T4, unroll=32, swizzle=16, min_blocks=2),
    "32x64x32 t4x4 cp3 p4 sk2": dict(bm=32, bn=64, bk=32, **T4, stages=3, unroll=8, smem_pad=4, min_blocks=2,
                                     split_k=2),
    "32x64x32 t4x4 cp3 p0 sk2": dict(bm=32, bn=64, bk=32, **T4, stages=3, unroll=8, min_blocks=2, split_k=2),
    "32x64x32 t4x4 db p0 sk2": dict(bm=32, bn=64, bk=32, **T4, unroll=32, min_blocks=2, split_k=2),
    "64x128x32 t8x4 cp3 p4 sk2": dict(bm=64, bn=128, bk=32, rm=8, rn=4, wm=16, wn=64, stages=3, unroll=32,
                                      smem_pad=4, swizzle=16, split_k=2),
    "64x128x32 t8x4 cp3 p0 sk2": dict(bm=64, bn=128, bk=32, rm=8, rn=4, wm=16, wn=64, stages=3, unroll=32,
                                      swizzle=16, split_k=2),
    "64x128x32 t8x4 db p0 sk2": dict(bm=64, bn=128, bk=32, rm=8, rn=4, wm=16, wn=64, unroll=32, swizzle=16,
                                     split_k=2),
    "64x128x8 t8x8 db sk4": dict(bm=64, bn=128, bk=8, rm=8, rn=8, unroll=8, split_k=4),
    "64x128x16 t4x8 db sk4": dict(bm=64, bn=128, bk=16, rm=4, rn=8, unroll=16, split_k=4),
    "64x256x8 t8x16 db fp sk4": dict(bm=64, bn=256, bk=8, rm=8, rn=16, unroll=8, split_k=4, fragment_prefetch=True),
    "64x128x8 t8x8 db sk8": dict(bm=64, bn=128, bk=8, rm=8, rn=8, unroll=8, split_k=8),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="benchmarks/results/gemm_skinny_h200.json")
    args = ap.parse_args()
    target = gpu_or_exit("gemm_skinny.py")
    import cupy as cp

    rng = np.random.default_rng(0)
    rows = []
    for m, n, k in SHAPES:
        a = cp.asarray(rng.uniform(-1, 1, (m, k)).astype(np.float32))
        b = cp.asarray(rng.uniform(-1, 1, (k, n)).astype(np.float32))
        ref = cp.matmul(a.astype(cp.float64), b.astype(cp.float64))
        for name, kw in SCHEDULES.items():
            s = None if kw is None else tiledsl.GemmSchedule(**kw)
            c = cp.full((m, n), cp.nan, cp.float32)
            tiledsl.gemm(a, b, c, schedule=s)
            err = float(cp.linalg.norm(c - ref) / cp.linalg.norm(ref))
            if not err < 1e-5:
                raise SystemExit(f"{name} {m}x{n}x{k}: wrong result (rel. error {err})")
            t, vendor = bracketed(lambda a=a, b=b, c=c, s=s: tiledsl.gemm(a, b, c, schedule=s),
                                  lambda a=a, b=b: cp.matmul(a, b), lambda f: time_gpu(f, repeat=30).median_ms)
            used = s or tiledsl.plan(tiledsl.GemmOp(m, n, k), device=target).schedule
            rows.append(dict(m=m, n=n, k=k, schedule=name, used=used.to_dict(), ms=t, cublas_ms=vendor,
                             ratio=vendor / t, rel_err=err))
            print(f"{m}x{n}x{k} {name:32s} {t * 1e3:8.1f} us  cuBLAS {vendor * 1e3:8.1f} us  {vendor / t:.3f}x",
                  flush=True)
    write_results(args.out, target.name, rows, cp.__version__)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

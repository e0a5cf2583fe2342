"""FP32 FMA kernel: register-prefetch double buffering (with and without fragment prefetch) vs the cp.async
pipeline (stages 3-4), beside cuBLAS.

Run on a GPU: ``python benchmarks/gemm_fma_pipeline.py --out benchmarks/results/gemm_fma_pipeline_h200.json``.

For 4096³ and 8192³ float32 in the NN, NT and TN layouts (A/B row-major = N; T = column-major view, no
copy), each schedule is checked against a float64 product (4096³) or for NaN (8192³, C poisoned first),
then timed with tiledsl.timing.time_gpu (CUDA events, warm-up, L2 flushed, median); cuBLAS
(``cupy.matmul``) is timed right before and right after each schedule and averaged, so clock drift
falls on both alike. Prints one line per row and writes JSON.
"""

from __future__ import annotations

import argparse

import numpy as np
from beside import gemm_beside_cublas, gemm_op, gemm_operands, write_results
from gpu_check import gpu_or_exit

import tiledsl

SCHEDULES = {
    "schedule=None": None,
    "256x128x8 t16x8 db": dict(bm=256, bn=128, bk=8, rm=16, rn=8, unroll=8),
    "256x128x8 t16x8 db fp": dict(bm=256, bn=128, bk=8, rm=16, rn=8, unroll=8, fragment_prefetch=True),
    "256x128x8 t16x8 db streamk": dict(bm=256, bn=128, bk=8, rm=16, rn=8, unroll=8, stream_k=True),
    "256x128x8 t16x8 db fp streamk": dict(bm=256, bn=128, bk=8, rm=16, rn=8, unroll=8, fragment_prefetch=True,
                                          stream_k=True),
    "256x128x8 t16x8 db fp p4": dict(bm=256, bn=128, bk=8, rm=16, rn=8, unroll=8, fragment_prefetch=True,
                                     smem_pad=4),
    "128x256x8 t8x16 db": dict(bm=128, bn=256, bk=8, rm=8, rn=16, unroll=8),
    "128x256x8 t8x16 db fp": dict(bm=128, bn=256, bk=8, rm=8, rn=16, unroll=8, fragment_prefetch=True),
    "128x128x8 t8x8 db": dict(bm=128, bn=128, bk=8, rm=8, rn=8, unroll=8),
    "128x128x8 t8x8 db sk2": dict(bm=128, bn=128, bk=8, rm=8, rn=8, unroll=8, split_k=2),
    "128x128x8 t8x8 db fp": dict(bm=128, bn=128, bk=8, rm=8, rn=8, unroll=8, fragment_prefetch=True),
    "128x256x16 t16x8 w128x32 db fp": dict(bm=128, bn=256, bk=16, rm=16, rn=8, wm=128, wn=32, unroll=16,
                                           fragment_prefetch=True),
    "256x128x8 t16x8 cp3 p4": dict(bm=256, bn=128, bk=8, rm=16, rn=8, stages=3, smem_pad=4),
    "256x128x8 t16x8 cp4 p4": dict(bm=256, bn=128, bk=8, rm=16, rn=8, stages=4, smem_pad=4),
    "256x128x16 t16x8 cp3 p4": dict(bm=256, bn=128, bk=16, rm=16, rn=8, stages=3, smem_pad=4, unroll=16),
    "256x128x16 t16x8 cp4 p4": dict(bm=256, bn=128, bk=16, rm=16, rn=8, stages=4, smem_pad=4, unroll=16),
    "128x256x16 t16x8 w128x32 db": dict(bm=128, bn=256, bk=16, rm=16, rn=8, wm=128, wn=32, unroll=16),
    "128x256x16 t16x8 w128x32 cp3 p4": dict(bm=128, bn=256, bk=16, rm=16, rn=8, wm=128, wn=32, stages=3,
                                            smem_pad=4, unroll=16),
    "128x256x16 t16x8 w128x32 cp4 p4": dict(bm=128, bn=256, bk=16, rm=16, rn=8, wm=128, wn=32, stages=4,
                                            smem_pad=4, unroll=16),
    "128x128x16 t8x8 cp4 p4": dict(bm=128, bn=128, bk=16, rm=8, rn=8, stages=4, smem_pad=4, unroll=16),
    "128x128x8 t8x8 cp4 p4": dict(bm=128, bn=128, bk=8, rm=8, rn=8, stages=4, smem_pad=4),
    # the copy method apart from the padding: cp.async without smem_pad, register prefetch with it
    "256x128x8 t16x8 cp3 p0": dict(bm=256, bn=128, bk=8, rm=16, rn=8, stages=3),
    "256x128x8 t16x8 cp4 p0": dict(bm=256, bn=128, bk=8, rm=16, rn=8, stages=4),
    "256x128x8 t16x8 db p4": dict(bm=256, bn=128, bk=8, rm=16, rn=8, unroll=8, smem_pad=4),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="benchmarks/results/gemm_fma_pipeline_h200.json")
    ap.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    ap.add_argument("--only", action="append", default=[], metavar="TEXT",
                    help="time only the schedules whose name contains TEXT (repeatable)")
    args = ap.parse_args()
    target = gpu_or_exit("gemm_fma_pipeline.py")
    import cupy as cp

    rng = np.random.default_rng(0)
    rows = []
    for n in args.sizes:
        for layout in ("NN", "NT", "TN"):
            a, b = gemm_operands(rng, n, n, n, layout)
            ref = cp.matmul(a.astype(cp.float64), b.astype(cp.float64)) if n <= 4096 else None
            repeat = 30 if n <= 4096 else 10
            flop = 2.0 * n ** 3
            for name, kw in SCHEDULES.items():
                if args.only and not any(text in name for text in args.only):
                    continue
                s = None if kw is None else tiledsl.GemmSchedule(**kw)
                c = cp.full((n, n), cp.nan, dtype=cp.float32)
                tiledsl.gemm(a, b, c, schedule=s)
                if ref is not None:
                    err = float(cp.linalg.norm(c - ref) / cp.linalg.norm(ref))
                    ok = err < 1e-5
                else:
                    err, ok = None, not bool(cp.isnan(c).any())
                if not ok:
                    raise SystemExit(f"{name} {layout} {n}: wrong result (rel. error {err})")
                t, vendor = gemm_beside_cublas(a, b, c, s, repeat)
                used = s if s is not None else tiledsl.plan(gemm_op(n, n, n, layout), device=target).schedule
                row = dict(n=n, layout=layout, schedule=name, used=used.to_dict(), ms=t, cublas_ms=vendor,
                           tflops=flop / t / 1e9, cublas_tflops=flop / vendor / 1e9, ratio=vendor / t, rel_err=err)
                rows.append(row)
                print(f"{n} {layout} {name:34s} {row['tflops']:6.2f} TFLOP/s  cuBLAS {row['cublas_tflops']:6.2f}"
                      f"  {row['ratio']:.3f}x", flush=True)
    write_results(args.out, target.name, rows, cp.__version__)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""GEMM benchmark: tiledsl beside cuBLAS (cupy.matmul) in the same run; TFLOP/s and ratio; JSON out.

Run on a GPU: ``python benchmarks/gemm.py [--quick] [--out benchmarks/results/gemm_h200.json]``, or
``python benchmarks/gemm.py --workloads --out benchmarks/results/gemm_workloads_h200.json`` for ``schedule=None``
on every distinct float32 shape and layout of both data sets (no sweep), with a summary by shape class.

Shapes: 4096³ and 8192³ (with a sweep of hand-picked schedules at 4096³), rows of
``benchmarks/data/deepbench_gemm.csv`` (cuBLAS column-major convention: C(m×n) = op(A)·op(B), a_t/b_t = 1
means transposed; reproduced with column-major views, so tiledsl runs them without copies) and
``llm_gemm.csv``. Every tiledsl result is verified against cuBLAS before it is timed.
Timing: tiledsl.timing.time_gpu (CUDA events, warm-up, L2 flushed before each call, median).
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import os
import sys
from pathlib import Path

import numpy as np
from beside import DATA, gemm_op, workload_shapes
from gpu_check import gpu_or_exit

import tiledsl
from tiledsl.compile import nvrtc_version
from tiledsl.gemm.family import rows_op, runs_as_row
from tiledsl.timing import time_gpu

SWEEP = {
    "sgemm_128x128_8x8": {},
    "128x128x8 w64x32": dict(wm=64, wn=32),
    "128x128x8 no-swizzle": dict(swizzle=1),
    "128x128x16": dict(bk=16, unroll=16),
    "128x128x8 pad4": dict(smem_pad=4),
    "128x128x8 single-buffer": dict(double_buffer=False),
    "128x128x8 1 block/SM": dict(min_blocks=1),
    "128x128x8 pad0 1 block/SM": dict(smem_pad=0, min_blocks=1),
    "128x128x16 pad0": dict(bk=16, unroll=16, smem_pad=0),
    "128x128x8 pad0 w64x32": dict(smem_pad=0, wm=64, wn=32),
    "128x128x8 pad8": dict(smem_pad=8),
    "64x64x16 4x4": dict(bm=64, bn=64, bk=16, rm=4, rn=4, unroll=16),
    "128x64x16 8x4": dict(bm=128, bn=64, bk=16, rm=8, rn=4, unroll=16),
    "64x128x16 4x8": dict(bm=64, bn=128, bk=16, rm=4, rn=8, unroll=16),
    "128x256x8 8x16": dict(bm=128, bn=256, bk=8, rm=8, rn=16, unroll=8),
    "256x128x8 16x8": dict(bm=256, bn=128, bk=8, rm=16, rn=8, unroll=8),
    "tiled_32x32_naive": "preset",
}


def rand(shape, rng, order="C"):
    import cupy as cp

    return cp.asarray(np.asarray(rng.uniform(-1, 1, shape), dtype=np.float32, order=order))


def check(c, ref) -> float:
    import cupy as cp

    return float(cp.linalg.norm(c.astype(cp.float64) - ref) / cp.linalg.norm(ref))


def bench(a, b, schedule=None, repeat=20):
    """(tiledsl ms, cuBLAS ms, rel. error vs cuBLAS in float64) for C = A·B."""
    import cupy as cp

    c = cp.full((a.shape[0], b.shape[1]), cp.nan, dtype=cp.float32)
    tiledsl.gemm(a, b, c, schedule=schedule)
    ref = cp.matmul(a.astype(cp.float64), b.astype(cp.float64))
    err = check(c, ref)
    t = time_gpu(lambda: tiledsl.gemm(a, b, c, schedule=schedule), repeat=repeat)
    tb = time_gpu(lambda: cp.matmul(a, b), repeat=repeat)
    return t.median_ms, tb.median_ms, err


def _sweep_and_samples(args, rng, rows, record) -> dict:
    a, b = rand((4096, 4096), rng), rand((4096, 4096), rng)
    for name, kw in SWEEP.items():
        s = tiledsl.preset("gemm", name) if kw == "preset" else (
            tiledsl.preset("gemm", name) if name in tiledsl.presets("gemm") else tiledsl.GemmSchedule(**kw))
        t, tb, err = bench(a, b, s)
        record("sweep4096", (4096, 4096, 4096), name, t, tb, err, dict(schedule_dict=s.to_dict()))
    best = max((r for r in rows if r["kind"] == "sweep4096"), key=lambda r: r["ratio"])
    a, b = rand((8192, 8192), rng), rand((8192, 8192), rng)
    s8 = tiledsl.GemmSchedule(**best["schedule_dict"])
    t, tb, err = bench(a, b, s8, repeat=10)
    record("square", (8192, 8192, 8192), best["schedule"], t, tb, err)
    del a, b

    with open(DATA / "deepbench_gemm.csv") as f:
        deep = list(csv.DictReader(f))
    picks = deep[::12] if not args.quick else deep[::40]
    for r in picks:
        m, n, k = int(r["m"]), int(r["n"]), int(r["k"])
        # column-major convention: op(A) is (m,k); a_t=0 -> A stored column-major (m,k); a_t=1 -> stored
        # column-major (k,m) and transposed, i.e. a row-major (m,k) view. Same for B.
        A = rand((m, k), rng, "C" if r["a_t"] == "1" else "F")
        B = rand((k, n), rng, "C" if r["b_t"] == "1" else "F")
        t, tb, err = bench(A, B)
        record("deepbench", (m, n, k), f"default {r['a_t']}{r['b_t']}", t, tb, err, dict(source=r["source"]))
    with open(DATA / "llm_gemm.csv") as f:
        llm = list(csv.DictReader(f))
    for r in llm[:: (16 if not args.quick else 40)]:
        m, n, k = int(r["m"]), int(r["n"]), int(r["k"])
        t, tb, err = bench(rand((m, k), rng), rand((k, n), rng))
        record("llm", (m, n, k), f"default {r['model']}.{r['layer']}"[:26], t, tb, err)
    return best


def _workloads(rng, record, max_n: int | None, m_range: tuple[int, int] | None = None) -> None:
    """schedule=None on every distinct (M, N, K, layout) of deepbench_gemm.csv and llm_gemm.csv (N ≤ max_n, M in
    m_range)."""
    import cupy as cp

    for (m, n, k, (la, lb)), source in workload_shapes().items():
        if (max_n is not None and n > max_n) or (m_range is not None and not m_range[0] <= m <= m_range[1]):
            continue
        a = rand((m, k), rng, "C" if la == "N" else "F")
        b = rand((k, n), rng, "C" if lb == "N" else "F")
        op = gemm_op(m, n, k, la + lb)
        if runs_as_row(op, tiledsl.Target.current()):  # as tiledsl.gemm: the rows Cᵀ = Bᵀ·Aᵀ
            op = rows_op(op)
        used = tiledsl.plan(op).schedule
        t, tb, err = bench(a, b)
        record("workload", (m, n, k), f"default {la}{lb}", t, tb, err,
               dict(source=source, layout=la + lb, used=used.to_dict()))
        del a, b
        cp.get_default_memory_pool().free_all_blocks()


def _shape_class(r: dict) -> str:
    if r["m"] <= 16 or r["n"] <= 16:
        return "M or N <= 16"
    if r["m"] <= 128 or r["n"] <= 128:
        return "M or N in 17..128"
    return "both > 128"


def _summary(rows: list) -> list:
    """One row per shape class (and all): count, geometric-mean ratio, minimum, and how many are below 0.7x."""
    out = []
    work = [r for r in rows if r["kind"] == "workload"]
    for cls in ("M or N <= 16", "M or N in 17..128", "both > 128", "all"):
        sel = [r for r in work if cls == "all" or _shape_class(r) == cls]
        if not sel:
            continue
        ratios = np.array([r["ratio"] for r in sel])
        row = dict(kind="summary", shape_class=cls, shapes=len(sel), geomean_ratio=float(np.exp(np.log(ratios).mean())),
                   min_ratio=float(ratios.min()), below_0_7=int((ratios < 0.7).sum()))
        print(f"summary {cls:20s} {row['shapes']:4d} shapes  geomean {row['geomean_ratio']:.3f}  "
              f"min {row['min_ratio']:.3f}  below 0.7x: {row['below_0_7']}", flush=True)
        out.append(row)
    return out


def main() -> int:
    import cupy as cp

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer data-set rows")
    ap.add_argument("--out", default="benchmarks/results/gemm_h200.json")
    ap.add_argument("--workloads", action="store_true",
                    help="only schedule=None on every distinct data-set shape (no sweep, no 8192^3)")
    ap.add_argument("--max-n", type=int, default=None, help="with --workloads: only shapes with N <= this")
    ap.add_argument("--m-range", type=int, nargs=2, default=None, metavar=("LOW", "HIGH"),
                    help="with --workloads: only shapes with LOW <= M <= HIGH")
    args = ap.parse_args()
    gpu_or_exit("benchmarks/gemm.py")
    rng = np.random.default_rng(0)
    gpu = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    rows = []

    def record(kind, shape, name, t, tb, err, extra=None):
        m, n, k = shape
        flops = 2 * m * n * k
        row = dict(kind=kind, m=m, n=n, k=k, schedule=name, tiledsl_ms=t, cublas_ms=tb,
                   tiledsl_tflops=flops / t / 1e9, cublas_tflops=flops / tb / 1e9, ratio=tb / t,
                   rel_err=err, **(extra or {}))
        rows.append(row)
        print(f"{kind:10s} {m:6d} {n:6d} {k:6d}  {name:26s} {row['tiledsl_tflops']:7.2f} "
              f"{row['cublas_tflops']:7.2f} {row['ratio']:6.2f}  err {err:.1e}", flush=True)
        if not err < 1e-5 * max(1.0, (k / 4096) ** 0.5):  # float32 accumulation error grows ~ sqrt(K)
            raise SystemExit(f"WRONG RESULT: rel err {err} for {shape} {name}")

    print(f"{'kind':10s} {'M':>6s} {'N':>6s} {'K':>6s}  {'schedule':26s} {'tiledsl':>7s} {'cuBLAS':>7s} "
          f"{'ratio':>6s}   (TFLOP/s)")
    best = None
    if args.workloads:
        _workloads(rng, record, args.max_n, args.m_range)
        rows.extend(_summary(rows))
    else:
        best = _sweep_and_samples(args, rng, rows, record)

    meta = dict(command="python " + " ".join(sys.argv), gpu=gpu, date=dt.date.today().isoformat(),
                cupy=cp.__version__, nvrtc=".".join(map(str, nvrtc_version())),
                timing="tiledsl.timing.time_gpu: CUDA events, 3 warm-up, L2 flushed, median")
    out = dict(meta=meta, rows=rows, best_4096=best)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], Path(args.out).name).write_text(json.dumps(out, indent=1))
    if best is not None:
        print(f"\nbest hand-picked schedule at 4096^3: {best['schedule']}: {best['tiledsl_tflops']:.1f} TFLOP/s "
              f"= {best['ratio']:.0%} of cuBLAS ({best['cublas_tflops']:.1f}) — {gpu}, {meta['date']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

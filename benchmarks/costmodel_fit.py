"""Cost-model validation on a GPU: predicted vs measured time for random GEMM and reduction schedules.

Run on a GPU::

    python benchmarks/costmodel_fit.py [--gemm 110] [--reduce 60] [--seed 0] [--out benchmarks/results]

What it does:

1. ``tiledsl.calibrate(force=True)``: measure HBM, L2, shared-memory and FP32 ceilings on this GPU;
2. sample random valid ``GemmSchedule``s for 4096³ float32 (invalid ones are skipped through
   ``ScheduleError``), compile each with ``tiledsl.compile``, verify it against ``cupy.matmul`` on random
   data with C poisoned by NaN, time it with ``tiledsl.timing.time_gpu(repeat=5)``;
3. the same for ``ReduceSchedule``s of a 2^28-element float32 sum when ``tiledsl.reduce`` exists
   (verified against ``cupy.sum``);
4. print Spearman's ρ (ranks computed with numpy) between predicted and measured times and the median
   ratio measured / predicted, for the calibrated model with the compiled kernel's registers
   (``explain(..., kernel=k)``), without the kernel (``predict``: what the search uses), and with the
   known-GPU table (``device="H200"``: no calibration);
5. save JSON (command, GPU, date, every point) and a roofline PNG with every point.

A time budget (``--budget-s``) stops sampling early, keeping the whole run within a few minutes.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import sys
import time
from pathlib import Path

import numpy as np
from gpu_check import gpu_or_exit

import tiledsl
from tiledsl.costmodel import predict
from tiledsl.errors import ScheduleError, TiledslError
from tiledsl.timing import time_gpu

GEMM_SPACE = {
    "bm": (16, 32, 64, 128, 256), "bn": (16, 32, 64, 128, 256), "bk": (4, 8, 16, 32),
    "rm": (1, 2, 4, 8, 16), "rn": (1, 2, 4, 8, 16), "vec": (1, 2, 4), "double_buffer": (True, False),
    "unroll": (1, 2, 4, 8, 16, 32), "smem_pad": (0, 4, 8), "swizzle": (1, 2, 4, 8, 16),
}


def ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n with ties averaged (as scipy.stats.rankdata)."""
    order = np.argsort(x, kind="mergesort")
    r = np.empty(len(x), dtype=float)
    r[order] = np.arange(1, len(x) + 1)
    for v in np.unique(x):
        idx = x == v
        if idx.sum() > 1:
            r[idx] = r[idx].mean()
    return r


def spearman(a, b) -> float:
    """Spearman's ρ: Pearson correlation of the ranks."""
    ra, rb = ranks(np.asarray(a, float)), ranks(np.asarray(b, float))
    return float(np.corrcoef(ra, rb)[0, 1])


def summary(measured, predicted) -> dict:
    m, p = np.asarray(measured, float), np.asarray(predicted, float)
    ratio = m / p
    return {"n": len(m), "spearman": spearman(m, p), "median_ratio_measured_over_predicted": float(np.median(ratio)),
            "within_2x": float(np.mean((ratio <= 2) & (ratio >= 0.5)))}


def sample_gemm(rng: random.Random, target) -> tiledsl.GemmSchedule | None:
    kw = {k: rng.choice(v) for k, v in GEMM_SPACE.items()}
    try:
        s = tiledsl.GemmSchedule(**kw)
        s.validate(target)
        if s.smem_bytes() > 48 * 1024:
            return None  # tiledsl.compile._load cannot raise the dynamic limit on CuPy 14 (reported)
        return s
    except (ScheduleError, TypeError):
        return None


def run_gemm(args, target, cal, out: list, deadline: float) -> None:
    import cupy

    from tiledsl.gemm import grid
    from tiledsl.runtime import launch

    m = n = k = 4096
    op = tiledsl.GemmOp(m, n, k, dtype="float32")
    a = cupy.random.standard_normal((m, k), dtype=cupy.float32)
    b = cupy.random.standard_normal((k, n), dtype=cupy.float32)
    ref = cupy.matmul(a, b)
    scale = float(cupy.abs(ref).max())
    c = cupy.empty((m, n), dtype=cupy.float32)
    rng = random.Random(args.seed)
    seen = set()
    tries = 0
    while (len([r for r in out if r["family"] == "gemm" and r.get("measured_s")]) < args.gemm
           and time.time() < deadline and tries < 200_000):
        tries += 1
        s = sample_gemm(rng, target)
        if s is None or s in seen:
            continue
        seen.add(s)
        rec = {"family": "gemm", "schedule": s.to_dict()}
        rec["predicted_nokernel_s"] = predict(op, s, cal)
        if rec["predicted_nokernel_s"] > args.max_predicted_s:
            continue  # too slow to time within the budget
        try:
            kern = tiledsl.compile(op, s, arch=target.arch)
        except TiledslError as exc:
            rec["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            out.append(rec)
            continue
        rec.update(registers=kern.registers, spill_bytes=kern.spill_bytes, smem_bytes=kern.smem_bytes)
        kargs = (a, b, c, np.int32(m), np.int32(n), np.int32(k), np.int64(k), np.int64(n), np.int64(n),
                 np.float32(1.0))
        g = grid(op, kern.schedule)
        c.fill(float("nan"))
        try:
            launch(kern, g, kargs)
            err = float(cupy.abs(c - ref).max()) / scale
        except Exception as exc:  # failure is data: record it, keep measuring
            rec["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            out.append(rec)
            continue
        rec["rel_err"] = err
        if not np.isfinite(err) or err > 1e-4:
            rec["error"] = f"wrong result: max |C - cuBLAS| / max |C| = {err:.3g}"
            out.append(rec)
            print(f"  WRONG gemm {s.to_dict()}: {rec['error']}", flush=True)
            continue
        t = time_gpu(lambda kern=kern, g=g, kargs=kargs: launch(kern, g, kargs), warmup=1, repeat=args.repeat)
        rec["measured_s"] = t.median_ms * 1e-3
        r = tiledsl.explain(op, s, device=cal, kernel=kern)
        rec["predicted_s"] = r.predicted_s
        rec["bound_by"] = r.bound_by
        rec["predicted_table_s"] = predict(op, s, "H200")
        rec["l2_intensity"] = r.levels["l2"].intensity
        rec["flops"] = r.flops
        out.append(rec)
        print(f"  gemm {len(seen):4d} measured {rec['measured_s'] * 1e3:8.3f} ms predicted {r.predicted_s * 1e3:8.3f} ms "
              f"({r.bound_by}) regs {kern.registers} spill {kern.spill_bytes} "
              f"{s.bm}x{s.bn}x{s.bk} r{s.rm}x{s.rn} v{s.vec} db{int(s.double_buffer)}", flush=True)


def run_reduce(args, target, cal, out: list, deadline: float) -> None:
    import cupy

    try:
        from tiledsl.reduce import STRATEGIES, ReduceOp, ReduceSchedule
        from tiledsl.reduce.api import _launch
        from tiledsl.reduce.emit import emit_reduce
    except ImportError as exc:
        print(f"tiledsl.reduce not available ({exc}): no reduction points", flush=True)
        return
    from tiledsl.compile import compile_source

    nel = 1 << 28
    x = cupy.random.standard_normal(nel, dtype=cupy.float32)
    ref = float(cupy.sum(x, dtype=cupy.float64))
    rop = ReduceOp(shape=(nel,), op="sum", dtype="float32")
    res = cupy.empty((), dtype=cupy.float32)
    rng = random.Random(args.seed + 1)
    seen = set()
    atomics = 0
    tries = 0
    while (len([r for r in out if r["family"] == "reduce" and r.get("measured_s")]) < args.reduce
           and time.time() < deadline and tries < 50_000):
        tries += 1
        strategy = rng.choice(STRATEGIES)
        if strategy == "atomic":
            if atomics >= 2:
                continue
        kw = dict(block=rng.choice((32, 64, 128, 256, 512, 1024)), vec=rng.choice((1, 2, 4, 8)),
                  items_per_thread=rng.choice((1, 2, 4, 8, 16)), strategy=strategy,
                  combine="atomic" if strategy == "atomic" else rng.choice(("two_pass", "atomic")))
        if strategy in ("grid_stride", "warp_shuffle"):
            kw["grid"] = rng.choice((0, 0, 132, 264, 528, 1056, 2112))
        try:
            s = ReduceSchedule(**kw)
            s.validate(target)
            s.check_op(rop)
        except ScheduleError:
            continue
        if s in seen:
            continue
        seen.add(s)
        rec = {"family": "reduce", "schedule": s.to_dict()}
        rec["predicted_nokernel_s"] = predict(rop, s, cal)
        if rec["predicted_nokernel_s"] > args.max_predicted_s * 20:
            continue
        try:
            try:
                kern = tiledsl.compile(rop, s, arch=target.arch)
            except TiledslError:
                kern = compile_source(emit_reduce(rop, s), target.arch, op=rop, schedule=s)
        except Exception as exc:
            rec["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            out.append(rec)
            continue
        if strategy == "atomic":
            atomics += 1
        rec.update(registers=kern.registers, spill_bytes=kern.spill_bytes, smem_bytes=kern.smem_bytes)
        res.fill(float("nan"))
        try:
            _launch(kern, rop, x, res, target)
            got = float(res)
        except Exception as exc:
            rec["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            out.append(rec)
            continue
        err = abs(got - ref) / max(abs(ref), 1.0)
        rec["rel_err"] = err
        if not np.isfinite(got) or abs(got - ref) > 1e-3 * float(np.sqrt(nel)):
            rec["error"] = f"wrong result: {got} vs {ref}"
            out.append(rec)
            print(f"  WRONG reduce {s.to_dict()}: {rec['error']}", flush=True)
            continue
        rep = 2 if strategy == "atomic" else args.repeat
        t = time_gpu(lambda kern=kern: _launch(kern, rop, x, res, target), warmup=1, repeat=rep)
        rec["measured_s"] = t.median_ms * 1e-3
        r = tiledsl.explain(rop, s, device=cal, kernel=kern)
        rec["predicted_s"] = r.predicted_s
        rec["predicted_table_s"] = predict(rop, s, "H200")
        rec["bound_by"] = r.bound_by
        rec["hbm_intensity"] = r.levels["hbm"].intensity
        rec["flops"] = r.flops
        out.append(rec)
        print(f"  reduce {len(seen):3d} measured {rec['measured_s'] * 1e3:8.3f} ms predicted {r.predicted_s * 1e3:8.3f} ms "
              f"({r.bound_by}) {s.strategy} block {s.block} vec {s.vec} ipt {s.items_per_thread} grid {s.grid} "
              f"{s.combine}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gemm", type=int, default=110, help="GEMM schedules to measure")
    ap.add_argument("--reduce", type=int, default=60, help="reduction schedules to measure")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--budget-s", type=float, default=200.0, help="stop sampling after this many seconds")
    ap.add_argument("--max-predicted-s", type=float, default=0.08, help="skip GEMM schedules predicted slower")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    args = ap.parse_args()
    gpu_or_exit("benchmarks/costmodel_fit.py")
    import cupy

    t0 = time.time()
    target = tiledsl.Target.current()
    cal = tiledsl.calibrate(force=True)
    print("calibrated ceilings:", flush=True)
    for c in cal.ceilings().values():
        print(f"  {c.key:18s} {c.value:.4g} {c.unit:8s} {c.source}", flush=True)
    points: list[dict] = []
    gemm_deadline = t0 + args.budget_s * (0.75 if args.reduce else 1.0)
    for fn, deadline in ((run_gemm, gemm_deadline), (run_reduce, t0 + args.budget_s)):
        try:
            fn(args, target, cal, points, deadline)
        except Exception as exc:  # keep what was measured; the JSON is still written
            print(f"{fn.__name__} stopped: {type(exc).__name__}: {exc}", flush=True)
    result = {
        "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
        "gpu": target.name, "arch": target.arch, "date": dt.datetime.now().isoformat(timespec="seconds"),
        "cupy": cupy.__version__, "seed": args.seed, "repeat": args.repeat,
        "ceilings": {k: {"value": c.value, "source": c.source, "measured": c.measured}
                     for k, c in cal.ceilings().items()},
        "table_ceilings": {k: {"value": c.value, "source": c.source, "measured": c.measured}
                           for k, c in tiledsl.Target.known("H200").ceilings().items()},
        "summary": {}, "points": points, "wall_s": None,
    }
    for fam in ("gemm", "reduce"):
        ok = [p for p in points if p["family"] == fam and p.get("measured_s")]
        bad = [p for p in points if p["family"] == fam and p.get("error")]
        if len(ok) < 3:
            continue
        meas = [p["measured_s"] for p in ok]
        result["summary"][fam] = {
            "with_kernel_calibrated": summary(meas, [p["predicted_s"] for p in ok]),
            "predict_calibrated": summary(meas, [p["predicted_nokernel_s"] for p in ok]),
            "predict_table_h200": summary(meas, [p["predicted_table_s"] for p in ok]),
            "failed": len(bad), "errors": sorted({p["error"][:80] for p in bad})[:10],
        }
        for k, v in result["summary"][fam].items():
            if isinstance(v, dict):
                print(f"{fam:6s} {k:24s} n={v['n']:3d}  Spearman ρ = {v['spearman']:.3f}  "
                      f"median measured/predicted = {v['median_ratio_measured_over_predicted']:.2f}  "
                      f"within 2×: {v['within_2x']:.0%}", flush=True)
        print(f"{fam:6s} failed (compile/verify): {len(bad)}", flush=True)
    outdir = Path(args.out)
    outdir.mkdir(parents=True, exist_ok=True)
    stamp = dt.date.today().isoformat()
    result["wall_s"] = time.time() - t0
    jpath = outdir / f"costmodel_fit_{target.arch}_{stamp}_seed{args.seed}.json"
    jpath.write_text(json.dumps(result, indent=1, default=str))
    print(f"wrote {jpath}", flush=True)
    try:
        pts = []
        for p in points:
            if not p.get("measured_s"):
                continue
            lv, x = ("l2", p["l2_intensity"]) if p["family"] == "gemm" else ("hbm", p["hbm_intensity"])
            pts.append({"intensity": x, "flops_per_s": p["flops"] / p["predicted_s"], "level": lv})
            pts.append({"intensity": x, "flops_per_s": p["flops"] / p["measured_s"], "level": lv, "measured": True})
        ppath = tiledsl.roofline_plot(pts, outdir / f"costmodel_fit_{target.arch}_{stamp}_seed{args.seed}.png",
                                      device=cal, levels=("hbm", "l2", "smem"),
                                      title=f"tiledsl cost model fit: {target.name}, GEMM 4096³ fp32 (L2 intensity) "
                                            f"and float32 sums (HBM intensity)")
        print(f"wrote {ppath}", flush=True)
    except ImportError as exc:
        print(f"no plot: {exc}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

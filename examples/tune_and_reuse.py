"""Tune a GEMM with ``search.tune``, then reuse what it exported: the schedule in Python and kernel.cu as CUDA.

Run: ``python examples/tune_and_reuse.py [--trials 40] [--out tune-out/example]``.

1. ``python -m search.tune gemm ... --export DIR`` (called here through ``search.tune.main``): on a GPU it
   measures every candidate against cuBLAS; without one it ranks them with the cost model (``--model-only``).
2. ``DIR/schedule.json`` holds the winner: ``GemmSchedule.from_dict`` turns it back into a schedule, which
   ``tiledsl.compile`` builds for sm_90 (no GPU needed) and ``tiledsl.gemm`` runs (GPU).
3. ``DIR/kernel.cu`` is standalone CUDA C with a host launcher ``tiledsl_launch``: ``nvcc -arch=sm_90 -c``.

Without a GPU, steps 1-2 (up to the compile) run and the script then stops with one line saying so (exit 1).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import tiledsl
from search import tune


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=2048)
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--k", type=int, default=1024)
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--out", default="tune-out/example")
    args = ap.parse_args()
    out = Path(args.out)

    # 1. search and export (the same as the command line)
    out.parent.mkdir(parents=True, exist_ok=True)
    code = tune.main(["gemm", "--m", str(args.m), "--n", str(args.n), "--k", str(args.k), "--trials", str(args.trials),
                      "--export", str(out), "--storage", f"sqlite:///{out.parent / 'example-tune.db'}"])
    if code != 0:
        return f"examples/tune_and_reuse.py: search.tune failed (exit {code})"

    # 2. reuse the schedule from Python
    record = json.loads((out / "schedule.json").read_text())
    schedule = tiledsl.GemmSchedule.from_dict(record["schedule"])
    op = tiledsl.GemmOp(args.m, args.n, args.k, dtype="float32")
    kernel = tiledsl.compile(op, schedule, arch="sm_90")
    print(f"\nreused {out / 'schedule.json'} ({record['mode']}): {kernel.name}, {kernel.registers} registers, "
          f"{kernel.smem_bytes} B shared memory, {kernel.spill_bytes} B spilled")
    print(f"standalone CUDA: nvcc -arch=sm_90 -c {out / 'kernel.cu'}  (host entry point: tiledsl_launch)")
    try:
        tiledsl.require_gpu()
    except tiledsl.LaunchError as exc:
        return f"examples/tune_and_reuse.py: no GPU: the tuned schedule was exported and compiled; running it needs one ({exc})"

    import cupy as cp

    from tiledsl.timing import time_gpu

    a = cp.random.uniform(-1, 1, (args.m, args.k), dtype=cp.float32)
    b = cp.random.uniform(-1, 1, (args.k, args.n), dtype=cp.float32)
    c = tiledsl.gemm(a, b, schedule=schedule)
    ref = a.astype(cp.float64) @ b.astype(cp.float64)
    err = float(cp.linalg.norm(c - ref) / cp.linalg.norm(ref))
    t_tuned = time_gpu(lambda: tiledsl.gemm(a, b, c, schedule=schedule)).median_ms
    t_default = time_gpu(lambda: tiledsl.gemm(a, b, c, schedule=tiledsl.GemmSchedule())).median_ms
    t_cublas = time_gpu(lambda: cp.matmul(a, b, out=c)).median_ms
    print(f"tuned {t_tuned:.3f} ms, GemmSchedule() {t_default:.3f} ms, cuBLAS {t_cublas:.3f} ms; rel. error {err:.1e}")
    if record["mode"] == "measured":
        print("schedule=None now picks the tuned schedule for this op on this GPU (stored by the export)")
    return 0 if err < 1e-5 else f"examples/tune_and_reuse.py: rel. error {err:.1e} above 1e-5"


if __name__ == "__main__":
    sys.exit(main())

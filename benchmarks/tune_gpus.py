"""Trials per second of ``search.tune`` on one GPU and on all GPUs of the node, in one session.

Run on a machine with two or more GPUs: ``python benchmarks/tune_gpus.py --out DIR`` (about 3 minutes on two
H200s). It runs ``python -m search.tune gemm --m 4096 --n 4096 --k 4096 --trials 200`` twice, each with its
own fresh study and kernel cache (so neither run finds kernels the other compiled): ``--gpus 0``, then
``--gpus all``. For each: the search's trials per second (evaluated trials, duplicates included, as
``--trials`` counts them, over the span from the first trial's start to the last trial's end; also the
measured trials alone), and the winner of the final re-measurement with its spread. The table is printed
and written to ``DIR/tune_gpus.json``; the check is ``speed-up >= 1.7`` and the two winners' times within
max(1 %, the larger spread).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

from gpu_check import gpu_or_exit


def run(label: str, gpus: str, args: argparse.Namespace, out: Path) -> dict:
    """One ``search.tune`` process on ``gpus``; its rates and winner."""
    import optuna

    db, folder, cache = out / f"{label}.db", out / label, out / f"cache-{label}"
    cmd = [sys.executable, "-m", "search.tune", "gemm", "--m", str(args.m), "--n", str(args.n), "--k", str(args.k),
           "--trials", str(args.trials), "--gpus", gpus, "--storage", f"sqlite:///{db}", "--study-name", label,
           "--export", str(folder), "--no-progress"]
    env = {**os.environ, "TILEDSL_CACHE_DIR": str(cache)}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    (out / f"{label}.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}); see {out / f'{label}.log'}")
    report = json.loads((folder / "report.json").read_text())
    trials = optuna.load_study(study_name=label, storage=f"sqlite:///{db}").get_trials(deepcopy=False)
    evaluated = [t for t in trials if t.datetime_complete and t.user_attrs.get("rule") in (None, "duplicate")]
    measured = [t for t in evaluated if "device" in t.user_attrs]
    span = (max(t.datetime_complete for t in evaluated) - min(t.datetime_start for t in evaluated)).total_seconds()
    winner = report["winner"]
    return {"gpus": gpus, "devices": report["devices"], "command": "python -m search.tune " + " ".join(cmd[3:]),
            "evaluated": len(evaluated), "measured": len(measured), "search_span_s": span,
            "trials_per_s": len(evaluated) / span, "measured_per_s": len(measured) / span,
            "by_device": {str(d): sum(t.user_attrs["device"] == d for t in measured) for d in report["devices"]},
            "winner": winner["schedule_text"], "winner_ms": winner["measured_s"] * 1e3, "spread": winner["spread"],
            "vendor_ms": (report["vendor"]["measured_s"] or 0) * 1e3}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=4096)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--out", default="tune-gpus-out")
    args = ap.parse_args()
    target = gpu_or_exit("benchmarks/tune_gpus.py")
    import cupy

    n = cupy.cuda.runtime.getDeviceCount()
    if n < 2:
        sys.exit(f"benchmarks/tune_gpus.py: {n} GPU here; this comparison needs two or more")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    one = run("one", "0", args, out)
    many = run("all", "all", args, out)
    speedup = many["trials_per_s"] / one["trials_per_s"]
    tol = max(0.01, one["spread"] or 0.0, many["spread"] or 0.0)
    same = abs(many["winner_ms"] - one["winner_ms"]) / one["winner_ms"] <= tol
    print(f"{target.name} x{n}, {dt.date.today()}: gemm {args.m}x{args.n}x{args.k} float32, --trials {args.trials}")
    print("| run | devices | evaluated | measured | search span s | trials/s | measured/s | per device "
          "| winner | winner ms | spread |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: |")
    for r in (one, many):
        print(f"| --gpus {r['gpus']} | {r['devices']} | {r['evaluated']} | {r['measured']} | {r['search_span_s']:.1f} "
              f"| {r['trials_per_s']:.2f} | {r['measured_per_s']:.2f} | {r['by_device']} | {r['winner']} "
              f"| {r['winner_ms']:.3f} | ±{100 * (r['spread'] or 0) / 2:.1f}% |")
    print(f"speed-up (trials/s): {speedup:.2f}x (goal >= 1.7); same best within max(1%, spread) = {100 * tol:.1f}%: "
          f"{'yes' if same else 'no'}")
    (out / "tune_gpus.json").write_text(json.dumps(
        {"device": target.name, "gpus": n, "date": str(dt.date.today()), "one": one, "all": many,
         "speedup": speedup, "same_best": same, "tolerance": tol}, indent=1) + "\n")
    return 0 if speedup >= 1.7 and same else 1


if __name__ == "__main__":
    sys.exit(main())

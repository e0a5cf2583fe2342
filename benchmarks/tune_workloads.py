"""Tune real workload shapes with ``python -m search.tune`` and collect one table.

Run on a GPU: ``python benchmarks/tune_workloads.py --trials 40 --timeout 40 [--ship] --out DIR``.
Each shape is tuned by its own ``search.tune`` process (the user's command; nothing else), exported to
``DIR/<name>/``; the table (shape, tiledsl, vendor library measured in the same run, ratio, command)
is printed and written to ``DIR/tune_workloads.json``. With ``--ship`` the winners are added to
``schedules/<family>/sm90.json`` (the copies of those files are also written to DIR).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import subprocess
import sys
from pathlib import Path

from gpu_check import gpu_or_exit

# DeepBench rows (benchmarks/data/deepbench_gemm.csv; cuBLAS column-major flags mapped to tiledsl's
# row-major layout tag: a_t=1 -> A row-major "N", a_t=0 -> A column-major "T"), LLM rows
# (benchmarks/data/llm_gemm.csv), and reductions (benchmarks/data/reductions.csv).
WORKLOADS = [
    ("gemm", "deepbench_1760x7000x1760_TN", ["--m", "1760", "--n", "7000", "--k", "1760", "--layout", "NT"]),
    ("gemm", "deepbench_5124x9124x2560_NN", ["--m", "5124", "--n", "9124", "--k", "2560", "--layout", "TT"]),
    ("gemm", "deepbench_512x24000x2560_TN", ["--m", "512", "--n", "24000", "--k", "2560", "--layout", "NT"]),
    ("gemm", "deepbench_35x8457x2560_NN", ["--m", "35", "--n", "8457", "--k", "2560", "--layout", "TT"]),
    ("gemm", "llama7b_v_proj_2048x4096x4096", ["--m", "2048", "--n", "4096", "--k", "4096"]),
    ("gemm", "llama3_8b_o_proj_128x4096x4096", ["--m", "128", "--n", "4096", "--k", "4096"]),
    ("reduce", "rowsum_16384x16384", ["--shape", "16384x16384", "--axis", "1", "--op", "sum"]),
    ("reduce", "llama7b_rmsnorm_norm2_2048x4096", ["--shape", "2048x4096", "--axis", "1", "--op", "norm2"]),
    ("transpose", "transpose_16384x16384", ["--shape", "16384x16384"]),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--timeout", type=int, default=40, help="seconds per shape")
    ap.add_argument("--ship", action="store_true", help="add winners to schedules/<family>/sm90.json")
    ap.add_argument("--out", default="tune-out")
    ap.add_argument("--only", default="", help="comma-separated workload names")
    args = ap.parse_args()
    gpu_or_exit("benchmarks/tune_workloads.py")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for family, name, shape_args in WORKLOADS:
        if args.only and name not in args.only.split(","):
            continue
        cmd = [sys.executable, "-m", "search.tune", family, *shape_args, "--trials", str(args.trials),
               "--timeout", str(args.timeout), "--storage", f"sqlite:///{out / 'tune.db'}", "--no-progress",
               "--export", str(out / name)] + (["--ship"] if args.ship else [])
        t0 = dt.datetime.now()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = (dt.datetime.now() - t0).total_seconds()
        rec_path = out / name / "schedule.json"
        row = {"family": family, "name": name, "command": "python -m search.tune " + " ".join(cmd[3:]),
               "rc": proc.returncode, "wall_s": wall}
        if proc.returncode == 0 and rec_path.exists():
            rec = json.loads(rec_path.read_text())
            m = rec.get("measured") or {}
            row.update(schedule=rec.get("schedule"), tiledsl_s=m.get("median_s"), vendor_s=m.get("vendor_s"),
                       ratio=(m["vendor_s"] / m["median_s"]) if m.get("vendor_s") and m.get("median_s") else None)
        else:
            row["error"] = (proc.stderr or proc.stdout)[-800:]
        rows.append(row)
        ratio = f"{row['ratio']:.2f}" if row.get("ratio") else "-"
        print(f"{name:36s} rc={proc.returncode} {wall:6.1f}s  tiledsl/vendor {ratio}", flush=True)
        (out / "tune_workloads.json").write_text(json.dumps({"date": dt.date.today().isoformat(), "rows": rows},
                                                            indent=1))
    if args.ship:
        for fam in ("gemm", "reduce", "transpose"):
            src = Path("schedules") / fam / "sm90.json"
            if src.exists():
                shutil.copy(src, out / f"sm90_{fam}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())

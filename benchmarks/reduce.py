"""Reduction benchmark: full, row and column float32 sums, tiledsl beside cupy (CUB) and torch, one run.

Run on a GPU: ``python benchmarks/reduce.py [--no-csv] [--out benchmarks/results/reduce_h200.json]``.

Workloads: the two reduction targets (full sum of 2^29 elements; row sum of 16384×16384), the column sum of
16384×16384, and every distinct (rows, cols, axis) of ``benchmarks/data/reductions.csv`` (layernorm /
softmax rows, parameter sums; axis "all" = full reduction). A few schedules around the default are swept
for the targets ("sweep" rows) so the table shows what the knobs buy. Inputs are uniform [0.5, 1.5)
float32 (no zeros); every tiledsl result is checked against cupy.sum(x, dtype=float64) (relative error
≤ 1e-5) before it is timed. Timing: benchmarks/reduce_common.py. GB/s = (input + output bytes) / time.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from gpu_check import gpu_or_exit
from reduce_common import calls_for, environment, markdown, timed_ms, torch_or_none, write_json

import tiledsl
from tiledsl import ReduceSchedule

DEFAULT = tiledsl.preset("reduce", "default").to_dict()
FULL_SWEEP = {
    "b256 ipt2": dict(items_per_thread=2), "b256 ipt8": dict(items_per_thread=8),
    "b512 ipt4": dict(block=512), "b1024 ipt4": dict(block=1024), "b128 ipt8": dict(block=128, items_per_thread=8),
    "b256 ipt4 2 waves": dict(grid=-2),  # -k: k waves, resolved below from the SM count
    "b512 ipt8": dict(block=512, items_per_thread=8),
}
ROW_SWEEP = {
    "warp per row": dict(row_threads=32), "b512 per row": dict(block=512), "b128 per row": dict(block=128),
    "b256 ipt8": dict(items_per_thread=8), "b256 ipt2": dict(items_per_thread=2),
    "b1024 ipt2": dict(block=1024, items_per_thread=2), "b128 ipt8": dict(block=128, items_per_thread=8),
}
COL_SWEEP = {"col_rows 16": dict(col_rows=16), "col_rows 32": dict(col_rows=32), "ipt 8": dict(items_per_thread=8),
             "b512": dict(block=512)}


def _schedule(kw: dict, sm_count: int) -> ReduceSchedule:
    d = {**DEFAULT, **kw}
    if d["grid"] < 0:
        d["grid"] = -d["grid"] * sm_count * (2048 // d["block"])
    return ReduceSchedule.from_dict(d)


def _workloads(csv_path: Path) -> list[tuple[str, tuple[int, int], int | None, int]]:
    """(name, shape, axis, how many CSV rows share it), targets first, CSV rows deduplicated."""
    out = [("target: full sum 2^29", (1, 1 << 29), None, 0),
           ("target: row sum 16384x16384", (16384, 16384), 1, 0),
           ("column sum 16384x16384", (16384, 16384), 0, 0)]
    seen: dict[tuple, int] = {}
    names: dict[tuple, str] = {}
    if csv_path.exists():
        with csv_path.open() as f:
            for r in csv.DictReader(f):
                key = (int(r["rows"]), int(r["cols"]), None if r["axis"] == "all" else int(r["axis"]))
                seen[key] = seen.get(key, 0) + 1
                names.setdefault(key, r["workload"])
    out += [(names[k], (k[0], k[1]), k[2], c) for k, c in seen.items()]
    return out


def _bench_one(name: str, shape: tuple[int, int], axis: int | None, count: int, repeat: int, sm: int,
               torch, rng) -> dict:
    """Check, then time tiledsl / cupy / torch (and the sweep for the targets) on one workload."""
    import cupy as cp

    x = rng.random(shape, dtype=cp.float32) + 0.5
    if axis is None:
        x = x.reshape(-1)
    out_elems = 1 if axis is None else shape[1 - axis]
    nbytes = x.nbytes + 4 * out_elems
    calls = calls_for(nbytes)
    repeat = repeat if count == 0 else max(5, repeat // 2)
    ref = cp.sum(x, axis=axis, dtype=cp.float64)

    def gbps(ms: float) -> float:
        return nbytes / (ms * 1e-3) / 1e9

    def check(got, label: str = "default") -> float:
        err = float(cp.max(cp.abs(got.astype(cp.float64) - ref) / ref))
        if not err <= 1e-5:
            raise SystemExit(f"{name} {label}: relative error {err} > 1e-5; not timing a wrong kernel")
        return err

    err = check(tiledsl.reduce(x, "sum", axis))
    t_ms = timed_ms(lambda: tiledsl.reduce(x, "sum", axis), calls, repeat)
    c_ms = timed_ms(lambda: cp.sum(x, axis=axis), calls, repeat)
    row = {"workload": name, "csv_rows": count, "shape": list(shape), "axis": "all" if axis is None else axis,
           "bytes": nbytes, "tiledsl_ms": t_ms, "tiledsl_gbps": gbps(t_ms), "cupy_ms": c_ms,
           "cupy_gbps": gbps(c_ms), "rel_err": err}
    if torch is not None:
        tx = torch.as_tensor(x, device="cuda")
        fn = (lambda: torch.sum(tx)) if axis is None else (lambda: torch.sum(tx, dim=axis))
        row["torch_ms"] = tr_ms = timed_ms(fn, calls, repeat)
        row["torch_gbps"] = gbps(tr_ms)
    sweep = {}
    if count == 0:
        table = FULL_SWEEP if axis is None else ROW_SWEEP if axis == 1 else COL_SWEEP
        for label, kw in table.items():
            s = _schedule(kw, sm)
            check(tiledsl.reduce(x, "sum", axis, schedule=s), label=label)
            ms = timed_ms(lambda s=s: tiledsl.reduce(x, "sum", axis, schedule=s), calls, repeat)
            sweep[label] = {"schedule": s.to_dict(), "ms": ms, "gbps": gbps(ms)}
        row["sweep"] = sweep
    tr = f"{row.get('torch_gbps', float('nan')):7.0f}"
    print(f"{name:48s} {str(shape):22s} ax={row['axis']!s:4s} tiledsl {row['tiledsl_gbps']:7.0f} "
          f"cupy {row['cupy_gbps']:7.0f} torch {tr} GB/s  ratio {c_ms / t_ms:5.2f}", flush=True)
    for label, r in sweep.items():
        print(f"    sweep {label:24s} {r['gbps']:7.0f} GB/s  ({c_ms / r['ms']:.2f} x cupy)", flush=True)
    return row


def main() -> int:
    import cupy as cp

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-csv", action="store_true", help="only the targets and the column sum")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--csv", default="benchmarks/data/reductions.csv")
    ap.add_argument("--max-elems", type=int, default=1 << 31,
                    help="skip CSV workloads with more elements (the >2^31 case is in the GPU tests)")
    ap.add_argument("--out", default="benchmarks/results/reduce_h200.json")
    args = ap.parse_args()
    gpu_or_exit("benchmarks/reduce.py")
    sm = tiledsl.Target.current().sm_count
    torch = torch_or_none()
    rng = cp.random.default_rng(2)
    rows: list[dict] = []
    work = _workloads(Path(args.csv))
    if args.no_csv:
        work = work[:3]
    skipped = [w for w in work if w[1][0] * w[1][1] > args.max_elems]
    work = [w for w in work if w[1][0] * w[1][1] <= args.max_elems]
    for w in skipped:
        print(f"skipped (over --max-elems={args.max_elems}): {w[0]} {w[1]}")
    for name, shape, axis, count in work:
        rows.append(_bench_one(name, shape, axis, count, args.repeat, sm, torch, rng))
    table = []
    for r in rows:
        t = r.get("torch_gbps")
        table.append([r["workload"] + (f" (+{r['csv_rows'] - 1})" if r["csv_rows"] > 1 else ""),
                      "×".join(map(str, r["shape"])), r["axis"], f"{r['bytes'] / 1e6:.1f}",
                      f"{r['tiledsl_ms'] * 1e3:.1f}", f"{r['tiledsl_gbps']:.0f}", f"{r['cupy_gbps']:.0f}",
                      "—" if t is None else f"{t:.0f}", f"{r['cupy_ms'] / r['tiledsl_ms']:.2f}",
                      "—" if t is None else f"{r['torch_ms'] / r['tiledsl_ms']:.2f}"])
    print()
    print(markdown(["workload", "shape", "axis", "MB", "tiledsl µs", "tiledsl GB/s", "cupy GB/s", "torch GB/s",
                    "tiledsl / cupy", "tiledsl / torch"], table))
    write_json(args.out, {**environment(), "dtype": "float32", "rows": rows,
                          "skipped": [{"workload": w[0], "shape": list(w[1])} for w in skipped]})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

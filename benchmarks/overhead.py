"""Per-call cost of repeated small calls: tiledsl beside CuPy and torch, in the same run.

Each row times ``--calls`` (≥ 1000) back-to-back calls of each library after ``--warmup`` calls, wall
clock (``time.perf_counter``), in ``--rounds`` interleaved rounds (tiledsl, CuPy, torch, then the next
round in a rotated order), with a device synchronisation before and after each round; µs per call is the
median over the rounds of elapsed / calls-in-the-round, so a drift of the host's or the GPU's clocks
during the run falls on every library alike.
For small problems this is the host's launch path (Python, argument packing, the launch itself); for
large ones (the 2^29 full sum and the 16384² row sum, timed as a user calls them) it is the kernel.

Rows: GEMM 64×64×64 (CuPy arrays, and torch tensors), with a new output and with ``c=``/``out=``; the GEMV
paths of ``schedule=None`` (one decode row 1×4096 times 4096×4096, and 8 rows times a torch Linear weight, x @ W.T);
reduce sum axis=1 of 128×4096 (llama RMSNorm rows; CuPy arrays, and torch tensors); transpose 64×64
(CuPy arrays, and torch tensors); the transformer rows of
``benchmarks/data/reductions.csv`` (workloads with ``tokens``); the full sum of 2^29 and the row sum of
16384² float32 (CuPy's sums run CUB).

Usage::

    python benchmarks/overhead.py                 # writes benchmarks/results/overhead_<gpu>_<date>.json
    python benchmarks/overhead.py --calls 2000 --no-big

Without a GPU it prints one line saying so and exits 0.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _gpu() -> str | None:
    """The GPU's name, or None (and why, printed) when there is none."""
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            raise RuntimeError("no CUDA device")
        props = cupy.cuda.runtime.getDeviceProperties(0)
        name = props["name"]
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception as exc:  # cupy missing, no driver, no device
        print(f"no GPU: benchmarks/overhead.py needs a CUDA GPU ({type(exc).__name__}: {exc})")
        return None


def per_call_us(fn, calls: int, warmup: int, sync) -> float:
    """Wall-clock µs per call of ``fn`` over ``calls`` back-to-back calls, after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return (time.perf_counter() - t0) / calls * 1e6


def interleaved_us(fns: dict, calls: int, warmup: int, rounds: int, sync) -> dict:
    """Median over ``rounds`` of each function's wall-clock µs per call; every round times
    ``ceil(calls / rounds)`` calls of each function in turn (order rotated per round), after one warm-up
    of ``warmup`` calls each."""
    names = list(fns)
    per_round = -(-calls // rounds)
    for name in names:
        per_call_us(fns[name], 1, warmup, sync)
    samples: dict = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            samples[name].append(per_call_us(fns[name], per_round, 0, sync))
    return {name: statistics.median(v) for name, v in samples.items()}


def _torch():
    try:
        import torch

        return torch if torch.cuda.is_available() else None
    except Exception:
        return None


def transformer_rows() -> list[tuple[str, int, int]]:
    """(workload, rows, cols) of the reductions.csv rows with a token count (layer norms, RMS norms)."""
    out = []
    with open(ROOT / "benchmarks" / "data" / "reductions.csv") as f:
        for r in csv.DictReader(f):
            if ".tokens" in r["workload"] and r["axis"] == "1":
                out.append((r["workload"], int(r["rows"]), int(r["cols"])))
    return out


def cases(big: bool):
    """(name, tiledsl call, CuPy call, torch call or None, check) per row; built lazily on the GPU."""
    import cupy as cp

    import tiledsl

    torch = _torch()
    rows = []
    a, b = cp.random.rand(64, 64, dtype=cp.float32), cp.random.rand(64, 64, dtype=cp.float32)
    c = cp.empty((64, 64), cp.float32)
    ta = tb = tc = None
    if torch is not None:
        ta, tb = torch.rand(64, 64, device="cuda"), torch.rand(64, 64, device="cuda")
        tc = torch.empty(64, 64, device="cuda")
    rows.append(("gemm 64x64x64, CuPy arrays", lambda: tiledsl.gemm(a, b), lambda: a @ b,
                 (lambda: ta @ tb) if torch else None))
    rows.append(("gemm 64x64x64, CuPy arrays, c= given", lambda: tiledsl.gemm(a, b, c),
                 lambda: cp.matmul(a, b, out=c), (lambda: torch.matmul(ta, tb, out=tc)) if torch else None))
    if torch is not None:
        rows.append(("gemm 64x64x64, torch tensors", lambda: tiledsl.gemm(ta, tb), lambda: a @ b,
                     lambda: ta @ tb))
        rows.append(("gemm 64x64x64, torch tensors, c= given", lambda: tiledsl.gemm(ta, tb, tc),
                     lambda: cp.matmul(a, b, out=c), lambda: torch.matmul(ta, tb, out=tc)))
    # GEMV paths of schedule=None: one decode row x·W, and 8 rows times torch's Linear weight (x @ W.T)
    xv, wv = cp.random.rand(1, 4096, dtype=cp.float32), cp.random.rand(4096, 4096, dtype=cp.float32)
    rows.append(("gemv 1x4096 @ 4096x4096 (decode)", lambda: tiledsl.gemm(xv, wv), lambda: xv @ wv,
                 None))
    if torch is not None:
        tx8, tw = torch.rand(8, 4096, device="cuda"), torch.rand(4096, 4096, device="cuda")
        x8 = cp.asarray(tx8)
        rows.append(("gemv 8x4096 @ W.T, W 4096x4096, torch tensors", lambda: tiledsl.gemm(tx8, tw.T),
                     lambda: x8 @ wv.T, lambda: tx8 @ tw.T))
    x = cp.random.rand(128, 4096, dtype=cp.float32)
    r = cp.empty(128, cp.float32)
    tx = torch.rand(128, 4096, device="cuda") if torch else None
    rows.append(("reduce sum axis=1, 128x4096 (llama RMSNorm rows)", lambda: tiledsl.reduce(x, "sum", axis=1),
                 lambda: x.sum(axis=1), (lambda: tx.sum(dim=1)) if torch else None))
    rows.append(("reduce sum axis=1, 128x4096, out= given", lambda: tiledsl.reduce(x, "sum", axis=1, out=r),
                 lambda: cp.sum(x, axis=1, out=r), None))
    if torch is not None:
        rows.append(("reduce sum axis=1, 128x4096, torch tensors", lambda: tiledsl.reduce(tx, "sum", axis=1),
                     lambda: x.sum(axis=1), lambda: tx.sum(dim=1)))
    t = cp.random.rand(64, 64, dtype=cp.float32)
    tt = torch.rand(64, 64, device="cuda") if torch else None
    rows.append(("transpose 64x64", lambda: tiledsl.transpose(t), lambda: cp.ascontiguousarray(t.T),
                 (lambda: tt.t().contiguous()) if torch else None))
    if torch is not None:
        rows.append(("transpose 64x64, torch tensors", lambda: tiledsl.transpose(tt),
                     lambda: cp.ascontiguousarray(t.T), lambda: tt.t().contiguous()))
    for name, m, n in transformer_rows():
        xm = cp.random.rand(m, n, dtype=cp.float32)
        txm = torch.rand(m, n, device="cuda") if torch else None
        rows.append((f"reduce sum axis=1, {name} ({m}x{n})",
                     lambda xm=xm: tiledsl.reduce(xm, "sum", axis=1), lambda xm=xm: xm.sum(axis=1),
                     (lambda txm=txm: txm.sum(dim=1)) if torch else None))
    if big:
        full = cp.random.rand(1 << 29, dtype=cp.float32)
        rows.append(("reduce sum, 2^29 float32 (full)", lambda: tiledsl.reduce(full, "sum"), lambda: full.sum(),
                     None))
        sq = cp.random.rand(16384, 16384, dtype=cp.float32)
        rows.append(("reduce sum axis=1, 16384x16384", lambda: tiledsl.reduce(sq, "sum", axis=1),
                     lambda: sq.sum(axis=1), None))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=1000, help="timed calls per row (at least 1000; default 1000)")
    ap.add_argument("--warmup", type=int, default=100, help="untimed calls first (default 100)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds per row; the median is kept (default 5)")
    ap.add_argument("--no-big", action="store_true", help="skip the 2^29 full sum and the 16384² row sum")
    ap.add_argument("--out", type=Path, default=None, help="JSON path (default benchmarks/results/overhead_<gpu>_<date>.json)")
    args = ap.parse_args(argv)
    if args.calls < 1000:
        ap.error(f"--calls {args.calls}: at least 1000 calls per row")
    if args.rounds < 1:
        ap.error(f"--rounds {args.rounds}: at least 1")
    gpu = _gpu()
    if gpu is None:
        return 0
    import cupy as cp

    torch = _torch()

    def sync():
        cp.cuda.runtime.deviceSynchronize()

    results = []
    for name, ours, cupy_fn, torch_fn in cases(not args.no_big):
        fns = {"tiledsl_us": ours, "cupy_us": cupy_fn}
        if torch_fn is not None:
            fns["torch_us"] = torch_fn
        row = {"call": name, **interleaved_us(fns, args.calls, args.warmup, args.rounds, sync)}
        row["cupy_over_tiledsl"] = row["cupy_us"] / row["tiledsl_us"]
        results.append(row)
        print(f"{name}: tiledsl {row['tiledsl_us']:.1f} µs, CuPy {row['cupy_us']:.1f} µs"
              + (f", torch {row['torch_us']:.1f} µs" if "torch_us" in row else ""), flush=True)
    today = dt.date.today().isoformat()
    doc = {"benchmark": "overhead", "gpu": gpu, "date": today, "calls": args.calls, "warmup": args.warmup,
           "rounds": args.rounds, "timing": "median over interleaved rounds of wall-clock µs per call",
           "command": "python " + " ".join(["benchmarks/overhead.py", *(argv if argv is not None else sys.argv[1:])]),
           "cupy": cp.__version__, "torch": getattr(torch, "__version__", None), "rows": results}
    out = args.out or ROOT / "benchmarks" / "results" / f"overhead_{gpu.replace(' ', '_')}_{today}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print()
    print(f"µs per call, wall clock over {args.calls} calls after {args.warmup} warm-up calls, median of "
          f"{args.rounds} interleaved rounds ({gpu}, {today})")
    print()
    print("| call | tiledsl | CuPy | torch | CuPy / tiledsl |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for r in results:
        torch_txt = f"{r['torch_us']:.1f}" if "torch_us" in r else "—"
        print(f"| {r['call']} | {r['tiledsl_us']:.1f} | {r['cupy_us']:.1f} | {torch_txt} | "
              f"{r['cupy_over_tiledsl']:.2f}× |")
    print(f"\nwritten: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

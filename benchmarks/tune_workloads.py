"""Tune real workload shapes with ``python -m search.tune`` and collect one table.

Run on a GPU: ``python benchmarks/tune_workloads.py --trials 40 --timeout 40 [--ship] --out DIR``.
Each shape is tuned by its own ``search.tune`` process (the user's command; nothing else), exported to
``DIR/<name>/``; the table (shape, tiledsl, vendor library measured in the same run, ratio, command)
is printed and written to ``DIR/tune_workloads.json``. The tunes store their winners in ``DIR/store``, not in the
user's store that ``schedule=None`` reads; with ``--ship`` the winners are added to ``schedules/<family>/sm90.json``
(the copies of those files are also written to DIR).

``--data`` tunes every distinct float32 product of ``benchmarks/data/`` instead of the fixed list (311; the issue's
"every DeepBench and LLM shape"). A product that ``schedule=None`` runs as the single row yᵀ = xᵀ·Aᵀ
(``tiledsl.gemm.family.runs_as_row``, one column) is tuned as that row, on the GEMV kernel's space; one run as a few
rows into a column-major Cᵀ is tuned as those rows (``search.tune gemm --as-rows``, since 2026-12-04; a row skipped
before that is tuned by ``--resume``). A full pass takes hours, so ``--shard I/N`` takes every N-th product from the I-th, ``--budget SECONDS``
stops starting tunes after that long (the table is written after every shape), and ``--resume`` keeps the rows of
``DIR/tune_workloads.json`` that finished and tunes the rest: a pass can span several calls and machines.
``--recompare`` tunes nothing: it times again, as below, the finished rows of that table (``--only``, ``--shard`` and
``--budget`` apply), so that rows tuned before a change of ``schedule=None`` are measured with the code of the run
that gives the figures; each row keeps the date it was compared and the schedule ``schedule=None`` ran
(``default_schedule``), and ``--recompare --changed`` times only the rows whose ``schedule=None`` is another one now
(a later rule or shipped record) or whose last check failed. ``--retune`` (with ``--data --resume --only NAMES``)
tunes the named products again although the table has them finished, each in a study of its own (today's
``schedule=None`` its first trial), replacing the row and its export only once the new tune is checked; its row has
no ``compared`` date, so run ``--recompare --only`` on it before ``--ship-winners``. ``--ship-winners GAIN`` then tunes nothing either: it
ships into ``schedules/gemm/sm90.json`` (the device's arch) the winner of every row that a recompare of the same day
timed at least GAIN times faster than ``schedule=None`` (``--records DIR`` where the exported winners are kept as
``<name>.json``), only where the record is for the op the row's tune ran and its kernel source and NVRTC are this
process's; run it on the GPU machine right after ``--recompare``.

With ``--data``, right after each GEMM's tune, this process times three things on fresh data, each checked against
a float64 product on a NaN-poisoned C first: ``tiledsl.gemm`` with ``schedule=None`` (the built-in choice or a
shipped record: this process reads its own empty store, ``DIR/parent-store``, so neither the tunes' records in
``DIR/store`` nor the user's earlier ones stand in for the default), the tuned schedule, and cuBLAS (``cupy.matmul``, timed before and after each and averaged;
``tiledsl.timing.time_gpu``: CUDA events, warm-up, L2 flushed, median of 20). The summary gives the issue's
figures: the tuned geomean against cuBLAS, how many defaults are within 10 % of the tuned kernel, and how many are
below 0.7× cuBLAS. A product whose tune or check fails keeps the error in its row and the pass goes on (exit status
1 at the end); ``--resume`` tries it again (and keeps, untouched, the failed rows outside its ``--only`` or shard).

Faults: one pass per folder at a time (a second one is refused while the first holds the lock beside the table); a
table that does not parse, or a row without a name or with a figure that is not a finite number above 0, is refused
with the file and the row named, never rewritten; ``--out``, ``--only`` (every name must be a product) and
``--budget`` are checked before anything is tuned. ``--only`` tunes its products in the order given;
``--weakest RESULTS`` tunes them weakest first by ``schedule=None``/cuBLAS in a ``benchmarks/gemm.py --workloads``
result (with ``--resume``, the untuned weakest first: what the data pass has done since 2026-12-03). Each tune runs in a process group of its own: one that outlives
its limit is killed with its compile pool and GPU worker, and one whose pass dies ends within a second.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from beside import checked_beside_cublas, device_gemm_operands, gemm_op, workload_shapes
from gpu_check import gpu_or_exit

import tiledsl
from search.families import positive_int, positive_seconds
from search.interrupt import EXIT_WITH_PARENT_ENV
from tiledsl.filestore import atomic_write, locked, read_json
from tiledsl.gemm.api import gemm_as_rows

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
DEFAULT_WITHIN, VENDOR_FLOOR = 1.10, 0.7
"""The issue's bars: ``schedule=None`` within 10 % of the tuned kernel's time, and at least 0.7× cuBLAS."""


def gemm_tune_args(m: int, n: int, k: int, layout: str, target) -> tuple[list[str] | None, str]:
    """(``search.tune gemm`` shape arguments for the product ``schedule=None`` runs for (M, N, K, layout), or None,
    and what is tuned): the product itself, or its single row yᵀ = xᵀ·Aᵀ where ``runs_as_row`` says so (N = 1), or
    for a few columns run as rows its rows Cᵀ = Bᵀ·Aᵀ into a column-major Cᵀ (``--as-rows``). Since ``--as-rows``
    it returns None for no product; the pass keeps its path for skipped rows (tables written before it hold some).

    ``tiledsl.gemm`` sees a one-column B, or a one-row A, as row-major whatever its strides, so the layout tag says
    N for it. The single row's A (xᵀ) is one row, row-major; its B is Aᵀ, row-major where A is column-major."""
    from tiledsl.gemm.family import runs_as_row

    run_layout = (layout[0] if m > 1 else "N") + (layout[1] if n > 1 else "N")
    if not runs_as_row(gemm_op(m, n, k, run_layout), target):
        return ["--m", str(m), "--n", str(n), "--k", str(k), "--layout", run_layout], "the product"
    if n > 1:
        return (["--m", str(m), "--n", str(n), "--k", str(k), "--layout", run_layout, "--as-rows"],
                "its rows into a column-major Cᵀ (runs_as_row, --as-rows)")
    return (["--m", "1", "--n", str(m), "--k", str(k), "--layout", "N" + ("N" if run_layout[0] == "T" else "T")],
            "its single row (runs_as_row)")


def data_workloads() -> list[tuple[str, str, tuple[int, int, int, str]]]:
    """(family, name, (M, N, K, layout)) of every distinct float32 product of the data sets, in file order."""
    return [("gemm", f"{m}x{n}x{k}_{layout}", (m, n, k, layout)) for (m, n, k, layout) in workload_shapes()]


def shard(items: list, spec: str) -> list:
    """Every N-th of ``items`` from the I-th (``spec`` "I/N", 0 ≤ I < N).

    Raises:
        SystemExit: ``spec`` is not "I/N" with 0 ≤ I < N.
    """
    try:
        i, n = (int(x) for x in spec.split("/"))
    except ValueError:
        i, n = -1, 0
    if not 0 <= i < n:
        raise SystemExit(f"--shard {spec!r}: give I/N with 0 <= I < N, e.g. 0/4")
    return items[i::n]


def summary(rows: list[dict]) -> dict:
    """The issue's figures over the rows that have them: geomean tuned / cuBLAS (speed ratio), the defaults within
    :data:`DEFAULT_WITHIN` of the tuned kernel's time, those below :data:`VENDOR_FLOOR` × cuBLAS; and how many rows
    were skipped or failed (not in those figures)."""
    done = [r for r in rows if r.get("default_s") and r.get("tuned_s") and r.get("vendor_s")]
    counts = {"skipped": sum(bool(r.get("skipped")) for r in rows), "failed": sum("error" in r for r in rows)}
    if not done:
        return {"products": 0, **counts}

    def geomean(xs: list[float]) -> float:
        return math.exp(sum(map(math.log, xs)) / len(xs))

    return {"products": len(done),
            "tuned_over_vendor_geomean": geomean([r["vendor_s"] / r["tuned_s"] for r in done]),
            "default_over_vendor_geomean": geomean([r["vendor_s"] / r["default_s"] for r in done]),
            "default_within_10pct_of_tuned": sum(r["default_s"] <= DEFAULT_WITHIN * r["tuned_s"] for r in done),
            "default_below_0_7_vendor": sum(r["vendor_s"] / r["default_s"] < VENDOR_FLOOR for r in done),
            "tuned_below_1_0_vendor": sum(r["vendor_s"] / r["tuned_s"] < 1.0 for r in done), **counts}


def compare(m: int, n: int, k: int, layout: str, tuned, as_row: bool) -> dict:
    """Seconds of ``schedule=None``, of ``tuned`` (with ``as_row``, the schedule of the product's single row, called
    on the row's operands through ``tiledsl.gemm`` as ``schedule=None`` does, or of its rows, N > 1, called through
    ``tiledsl.gemm.api.gemm_as_rows``, the same path) and of cuBLAS, in this process, each result checked first (module
    docstring); CuPy's memory pool is emptied afterwards."""
    import cupy as cp

    try:
        return _compare(m, n, k, layout, tuned, as_row)
    finally:
        cp.get_default_memory_pool().free_all_blocks()


def tuned_op(m: int, n: int, k: int, layout: str, target):
    """The float32 ``GemmOp`` (operand alignment included) that the pass tunes for the product (M, N, K, layout):
    the product itself, its single row or its rows (:func:`gemm_tune_args`); None where the product is skipped."""
    from search.families import as_rows_op
    from search.families import gemm_op as aligned_op

    shape, _ = gemm_tune_args(m, n, k, layout, target)
    if shape is None:
        return None
    op = aligned_op(int(shape[1]), int(shape[3]), int(shape[5]), "float32", shape[7])
    return as_rows_op(op) if "--as-rows" in shape else op


def default_schedule(m: int, n: int, k: int, layout: str, target) -> dict | None:
    """The schedule ``schedule=None`` runs for the product (M, N, K, layout) on ``target`` in this process (the
    built-in choice or a shipped record, with the operands' alignment; the single row's where the product runs as a
    row or rows where the product runs as them, :func:`gemm_tune_args`), as a dict. Each row records
    it when compared, so ``--recompare --changed`` can tell the rows whose ``schedule=None`` has changed since."""
    op = tuned_op(m, n, k, layout, target)
    return None if op is None else tiledsl.plan(op, device=target).schedule.to_dict()


def _compare(m: int, n: int, k: int, layout: str, tuned, as_row: bool) -> dict:
    a, b, ref, c = device_gemm_operands(m, n, k, layout)

    def default() -> None:
        tiledsl.gemm(a, b, c)

    def mine() -> None:  # one column as a row: yᵀ = xᵀ·Aᵀ into the contiguous view c.T, as schedule=None runs it;
        if as_row and n > 1:  # a few columns as rows: Cᵀ = Bᵀ·Aᵀ into the column-major view c.T
            gemm_as_rows(a, b, c, tuned)
        elif as_row:
            tiledsl.gemm(b.T, a.T, c.T, schedule=tuned)
        else:
            tiledsl.gemm(a, b, c, schedule=tuned)

    what = f"{m}x{n}x{k} {layout}"
    _, default_ms, vendor_a = checked_beside_cublas(default, a, b, c, ref, k, f"{what} schedule=None", repeat=20)
    _, tuned_ms, vendor_b = checked_beside_cublas(mine, a, b, c, ref, k, f"{what} tuned", repeat=20)
    return {"default_s": default_ms / 1e3, "tuned_s": tuned_ms / 1e3, "vendor_s": (vendor_a + vendor_b) / 2e3}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=positive_int, default=40)
    ap.add_argument("--timeout", type=positive_int, default=40, help="seconds per shape")
    ap.add_argument("--ship", action="store_true", help="add winners to schedules/<family>/sm90.json")
    ap.add_argument("--out", default="tune-out")
    ap.add_argument("--only", default="", help="comma-separated workload names, tuned in the order given")
    ap.add_argument("--weakest", default=None, metavar="RESULTS",
                    help="with --data: tune the products weakest first, by schedule=None/cuBLAS in RESULTS (a "
                         "`benchmarks/gemm.py --workloads` JSON); products it lacks last, in data-set order")
    ap.add_argument("--data", action="store_true", help="every distinct float32 product of benchmarks/data/")
    ap.add_argument("--shard", default="0/1", help="I/N: every N-th workload from the I-th (default 0/1: all)")
    ap.add_argument("--budget", type=positive_seconds, default=None, help="seconds: start no tune after this long")
    ap.add_argument("--resume", action="store_true", help="keep the finished rows of OUT/tune_workloads.json")
    ap.add_argument("--retune", action="store_true",
                    help="with --data --resume and --only: tune the named products again even where the table has "
                         "them finished (a row is replaced once its new tune is checked; a failed one keeps the old)")
    ap.add_argument("--recompare", action="store_true",
                    help="tune nothing: time schedule=None, the tuned schedule and cuBLAS again on the finished rows")
    ap.add_argument("--changed", action="store_true",
                    help="with --recompare: only the rows whose schedule=None is not the one they were compared "
                         "with (rows compared before 2026-12-04 recorded none: all of those)")
    ap.add_argument("--ship-winners", type=float, default=None, metavar="GAIN",
                    help="tune nothing: ship the winner of every row that --recompare timed at least GAIN times faster "
                         "than schedule=None (e.g. 1.05) into schedules/gemm/<arch>.json")
    ap.add_argument("--records", default=None,
                    help="with --ship-winners: the folder of the exported winners as <name>.json (default: "
                         "OUT/<name>/schedule.json, where the pass exported them)")
    ap.add_argument("--ship-to", default=None, help="with --ship-winners: another JSON file to write (tests)")
    args = ap.parse_args()
    if (args.records or args.ship_to) and args.ship_winners is None:
        ap.error("--records and --ship-to go with --ship-winners")
    if args.ship_winners is not None and not args.data:
        ap.error("--ship-winners needs --data (it ships the winners of the data pass's table)")
    if args.ship_winners is not None and args.recompare:
        ap.error("--ship-winners with --recompare: run --recompare first, then --ship-winners on its table")
    if args.ship_winners is not None and not (math.isfinite(args.ship_winners) and args.ship_winners >= 1.0):
        ap.error(f"--ship-winners {args.ship_winners}: give the least speedup over schedule=None, a number ≥ 1 "
                 "(e.g. 1.05)")
    if args.changed and not args.recompare:
        ap.error("--changed goes with --recompare (it picks the rows to time again)")
    if args.retune:
        missing = [flag for flag, given in (("--data", args.data), ("--resume", args.resume),
                                            ("--only NAMES", bool(args.only))) if not given]
        if missing:
            ap.error(f"--retune tunes finished rows of the table again: it needs {' and '.join(missing)}")
        if args.recompare or args.ship_winners is not None:
            ap.error("--retune tunes; --recompare and --ship-winners tune nothing: run them after it, not with it")
    if args.data and args.ship:
        ap.error("--ship with --data: a shipped record would become the schedule=None it is compared with; "
                 "ship winners from a run without --data")
    todo = data_workloads() if args.data else [(f, name, a) for f, name, a in WORKLOADS]
    only = [x for x in args.only.split(",") if x]
    if args.weakest is not None:
        if not args.data or args.recompare or args.ship_winners is not None:
            ap.error(f"--weakest {args.weakest}: it orders the tunes of a --data pass (it needs --data and goes "
                     "with neither --recompare nor --ship-winners)")
        if only:
            ap.error(f"--weakest {args.weakest} with --only: --only tunes in the order given; give one of the two")
        ratios = weakest_first(Path(args.weakest))
        if isinstance(ratios, str):
            ap.error(f"--weakest {args.weakest}: {ratios}")
        only = sorted((w[1] for w in todo), key=lambda name: ratios.get(name, math.inf))
    unknown = sorted(set(only) - {w[1] for w in todo})
    if unknown:
        ap.error(f"--only: {', '.join(unknown)}: not {'a product of --data' if args.data else 'a workload'} "
                 f"(names look like {todo[0][1]!r})")
    todo = shard(todo, args.shard)
    out = Path(args.out)
    problem = _out_problem(out)
    if problem:
        ap.error(f"--out {out}: {problem}")
    target = gpu_or_exit("benchmarks/tune_workloads.py")
    out.mkdir(parents=True, exist_ok=True)
    table = out / "tune_workloads.json"
    if table.exists() and not (args.resume or args.recompare or args.ship_winners is not None):
        sys.exit(f"benchmarks/tune_workloads.py: {table} exists: pass --resume to add to it, or another --out")
    if args.data:  # schedule=None here must be the built-in choice or a shipped record, not a tune's stored winner
        os.environ["TILEDSL_CACHE_DIR"] = str(out / "parent-store")
    import filelock

    try:  # one pass per folder at a time: its table is read once and rewritten after every product
        with locked(table, timeout_s=0):
            if args.ship_winners is not None:
                if not table.exists():
                    sys.exit(f"benchmarks/tune_workloads.py: --ship-winners needs the table {table}")
                return _ship_winners(table, args, target, only)
            return _recompare(table, args, target, only) if args.recompare else _pass(table, todo, only, args,
                                                                                      out, target)
    except filelock.Timeout:
        sys.exit(f"benchmarks/tune_workloads.py: {out} is in use by another tune_workloads.py (it holds "
                 f"{table}.lock); give this one another --out, or run it after that one")


def weakest_first(path: Path) -> dict[str, float] | str:
    """``{product name: schedule=None / cuBLAS}`` of a ``benchmarks/gemm.py --workloads`` result file (its rows of
    kind ``workload``, named as this pass names them, ``MxNxK_LAYOUT``), or what is wrong with the file."""
    data, problem = read_json(path, "benchmarks/gemm.py --workloads result")
    if problem or data is None:
        return problem or "no such file"
    rows = data.get("rows") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        return "not a {\"rows\": [...]} result of benchmarks/gemm.py --workloads"
    ratios = {}
    for row in rows:
        if not isinstance(row, dict) or row.get("kind") != "workload":
            continue
        try:
            name, ratio = f"{int(row['m'])}x{int(row['n'])}x{int(row['k'])}_{row['layout']}", float(row["ratio"])
        except (KeyError, TypeError, ValueError):
            return f"a workload row without m, n, k, layout and a ratio: {json.dumps(row)[:120]}"
        if not (math.isfinite(ratio) and ratio > 0):
            return f"{name}: ratio {ratio} is not a finite number above 0"
        ratios[name] = ratio
    return ratios or "no workload rows (kind 'workload')"


def _out_problem(out: Path) -> str | None:
    """Why the results folder ``out`` cannot take this pass's files, checked before anything is tuned
    (``search.tune.folder_problem``: nothing in the way, the nearest existing folder writable)."""
    from search.tune import folder_problem

    return "is a file, not a folder" if out.is_file() else folder_problem(str(out), create=False)


def _pass(table: Path, todo: list, only: list[str], args, out: Path, target) -> int:
    """Tune ``todo`` (less what ``--resume`` finds finished in ``table``) and rewrite ``table`` after each product.
    With ``--resume`` every earlier row is kept until its product is tuned again (a failure outside ``--only`` or
    this shard, or past ``--budget``, keeps its error)."""
    rows = load_rows(table) if args.resume and table.exists() else []
    done = {r["name"] for r in rows if r.get("rc") == 0 and "error" not in r}  # a skipped row: asked again
    redo = set(only) & done if args.retune else set()  # --retune: the finished rows named, tuned again
    todo = [w for w in todo if (w[1] not in done or w[1] in redo) and (not only or w[1] in only)]
    if only:  # in the order given: a list ranked weakest first is tuned weakest first
        todo.sort(key=lambda w: only.index(w[1]))
    env = {**os.environ, "TILEDSL_CACHE_DIR": str(out / "store")}  # the tunes' records stay out of this process
    start = dt.datetime.now()
    failed = 0
    for i, (family, name, spec) in enumerate(todo):
        if args.budget is not None and (dt.datetime.now() - start).total_seconds() > args.budget:
            print(f"budget of {args.budget:.0f} s spent: {len(todo) - i} workloads left for --resume")
            break
        shape_args, tuned_what = (gemm_tune_args(*spec, target) if args.data else (spec, "the product"))
        row = {"family": family, "name": name, "tuned": tuned_what}
        earlier = next((r for r in rows if r["name"] == name), None)
        rows = [r for r in rows if r["name"] != name]  # its earlier failure (or, with --retune, its row) replaced
        if shape_args is None:
            rows.append({**row, "skipped": True})
            _write(table, rows, target)
            continue
        row.update(_tune(family, name, shape_args, args, out, env, retune=name in redo))
        if "error" not in row and family == "gemm" and args.data:
            try:
                tuned = tiledsl.GemmSchedule.from_dict(row["schedule"])
                row.update(m=spec[0], n=spec[1], k=spec[2], layout=spec[3],
                           **compare(*spec, tuned, tuned_what != "the product"),
                           default_schedule=default_schedule(*spec, target))
            except (Exception, SystemExit) as exc:  # a wrong result, a compile or launch error: on to the next
                row["error"] = f"after the tune: {type(exc).__name__}: {exc}"[-800:]
        failed += "error" in row
        if name in redo:
            _keep_retune(out, name, ok="error" not in row)
        if name in redo and "error" in row:  # a failed retune keeps the finished row it was to replace
            print(f"{name:36s} retune FAILED, the earlier row and its export kept: "
                  + row["error"].splitlines()[-1][:200], flush=True)
            rows.append(earlier)
            _write(table, rows, target)
            continue
        rows.append(row)
        ratio = f"{row['tune_ratio']:.2f}" if row.get("tune_ratio") else "-"
        extra = (f"  schedule=None/cuBLAS {row['vendor_s'] / row['default_s']:.2f}  schedule=None/tuned "
                 f"{row['tuned_s'] / row['default_s']:.2f}") if row.get("default_s") else ""
        print(f"{name:36s} rc={row['rc']} {row['wall_s']:6.1f}s  tiledsl/vendor {ratio}{extra}"
              + ("  FAILED: " + row["error"].splitlines()[-1][:200] if "error" in row else ""), flush=True)
        _write(table, rows, target)
    if args.ship:
        for fam in ("gemm", "reduce", "transpose"):
            src = Path("schedules") / fam / "sm90.json"
            if src.exists():
                shutil.copy(src, out / f"sm90_{fam}.json")
    print(json.dumps(summary(rows), indent=1))
    return 1 if failed else 0


def _recompare(table: Path, args, target, only: list[str]) -> int:
    """``--recompare``: :func:`compare` again on the finished GEMM rows of ``table`` (module docstring); a row whose
    check fails keeps the error (exit status 1) and loses its earlier times. The product timed is the one the row's
    name stands for (a row whose shape is not its name's is an error, not timed)."""
    if not args.data or not table.exists():
        sys.exit(f"benchmarks/tune_workloads.py: --recompare needs --data and an existing {table}")
    rows = load_rows(table)
    specs = {name: spec for _, name, spec in shard(data_workloads(), args.shard)}
    start, failed = dt.datetime.now(), 0
    for row in rows:
        if (row["name"] not in specs or not row.get("schedule") or "m" not in row
                or (only and row["name"] not in only)):
            continue
        try:
            now = default_schedule(*specs[row["name"]], target)
        except Exception as exc:  # recorded as the row's error below (the row is timed again)
            now = exc
        if (args.changed and not isinstance(now, Exception) and "default_schedule" in row
                and row["default_schedule"] == now and "error" not in row):
            continue
        if args.budget is not None and (dt.datetime.now() - start).total_seconds() > args.budget:
            print(f"budget of {args.budget:.0f} s spent: stopped before {row['name']}")
            break
        for key in ("default_s", "tuned_s", "vendor_s", "error", "default_schedule"):
            row.pop(key, None)
        spec = specs[row["name"]]
        try:
            if isinstance(now, Exception):
                raise now
            if tuple(row.get(key) for key in ("m", "n", "k", "layout")) != spec:
                raise ValueError(f"the row's shape {row.get('m')}x{row.get('n')}x{row.get('k')} {row.get('layout')} "
                                 f"is not its name's ({row['name']})")
            row.update(compare(*spec,
                               tiledsl.GemmSchedule.from_dict(row["schedule"]), row["tuned"] != "the product"),
                       compared=dt.date.today().isoformat(), default_schedule=now)
            print(f"{row['name']:36s} schedule=None/cuBLAS {row['vendor_s'] / row['default_s']:.2f}  "
                  f"schedule=None/tuned {row['tuned_s'] / row['default_s']:.2f}", flush=True)
        except (Exception, SystemExit) as exc:
            row["error"] = f"recompare: {type(exc).__name__}: {exc}"[-800:]
            failed += 1
        _write(table, rows, target)
    print(json.dumps(summary(rows), indent=1))
    return 1 if failed else 0


def _ship_winners(table: Path, args, target, only: list[str]) -> int:
    """``--ship-winners GAIN``: store in the shipped schedules (``schedules/gemm/sm90.json`` on an sm_90 device, or
    ``--ship-to``) the exported winner of every finished GEMM row of ``table`` that a ``--recompare`` of today timed at
    least GAIN times faster than ``schedule=None``; :func:`_checked_winner` says what else it must pass. The record
    keeps the tune's figures and gains ``compared`` (the recompare's date and times). Returns 1 when a row that
    qualified was not shipped (each is printed with the reason), else 0."""
    import filelock

    from tiledsl.registry import shipped_path, store

    dest = Path(args.ship_to) if args.ship_to else shipped_path("gemm", target.arch)
    records = Path(args.records) if args.records else None
    specs = {name: spec for _, name, spec in shard(data_workloads(), args.shard)}
    shipped, refused = [], []
    for row in load_rows(table):
        name = row["name"]
        if row.get("family") != "gemm" or "error" in row or name not in specs or (only and name not in only):
            continue
        if not all(row.get(k) for k in ("default_s", "tuned_s", "vendor_s")) or not row.get("schedule"):
            continue  # not finished: nothing to weigh
        gain = row["default_s"] / row["tuned_s"]
        if gain < args.ship_winners:
            continue
        path = records / f"{name}.json" if records else table.parent / name / "schedule.json"
        rec, problem = read_json(path, "exported winner")
        checked = problem or _checked_winner(row, rec, specs[name], target)
        why = checked if isinstance(checked, str) else None
        if why is None:
            figures = {k: rec[k] for k in ("mode", "measured", "predicted", "compiler", "date", "command") if k in rec}
            figures["compared"] = {k: row[k] for k in ("compared", "default_s", "tuned_s", "vendor_s")}
            try:
                op, sched = checked
                store("gemm", op, target, sched, path=dest, **figures)
            except (OSError, ValueError, filelock.Timeout) as exc:
                why = f"{dest} not written: {type(exc).__name__}: {exc}"
        if why is not None:
            refused.append(f"{name}: {path}: {why}")
            continue
        shipped.append(name)
        print(f"{name:36s} shipped: {gain:.2f}x schedule=None ({row['compared']})", flush=True)
    for line in refused:
        print(f"not shipped: {line}")
    print(f"{len(shipped)} winners shipped to {dest}; {len(refused)} refused")
    return 1 if refused else 0


def _checked_winner(row: dict, rec: object, spec: tuple, target) -> tuple | str:
    """The (op, schedule) of the exported record ``rec`` if it may be shipped for ``row`` (product ``spec``), else why
    not: it must be the row's winner for the op the row's tune ran (:func:`gemm_tune_args`: the product, its single
    row or its rows) on this arch, with today's kernel source (SHA-256) and this process's NVRTC, and the row's recompare must be
    of today."""
    from tiledsl.registry import make_record

    if row.get("compared") != dt.date.today().isoformat():
        return (f"schedule=None was last re-timed on {row.get('compared') or 'no day'} (--recompare), not today: "
                "it may have changed since")
    if not isinstance(rec, dict):
        return "the file holds no record"
    try:
        op = tiledsl.GemmOp.from_dict(rec["op"])
        sched = tiledsl.GemmSchedule.from_dict(rec["schedule"])
        winner = tiledsl.GemmSchedule.from_dict(row["schedule"])
    except (KeyError, TypeError, ValueError, tiledsl.TiledslError) as exc:
        return f"{type(exc).__name__}: {exc}"
    ran = tuned_op(*spec, target)
    if ran is None:
        return "the product was not tuned (skipped)"
    if op != ran:
        tag = "".join("N" if layout == "row" else "T" for layout in (ran.layout_a, ran.layout_b))
        c_col = ", C column-major" if ran.layout_c == "col" else ""
        return f"its op is not the one the row's tune ran ({ran.m}x{ran.n}x{ran.k} {tag}{c_col})"
    if sched != winner:
        return "its schedule is not the row's winner"
    if rec.get("arch") != target.arch:
        return f"tuned for {rec.get('arch')}, this device is {target.arch}"
    now = make_record("gemm", op, target, sched)
    if rec.get("source_sha256") != now["source_sha256"]:
        return ("it records no kernel source SHA-256" if rec.get("source_sha256") is None
                else "the emitter's source changed since the tune (SHA-256)")
    if rec.get("nvrtc") != now["nvrtc"]:
        return ("it records no NVRTC version" if rec.get("nvrtc") is None
                else f"tuned with NVRTC {rec['nvrtc']}, this process has {now['nvrtc']}")
    return op, sched


def _keep_retune(out: Path, name: str, ok: bool) -> None:
    """A retune's export (``OUT/<name>.retune``) replaces ``OUT/<name>`` when its row was checked (``ok``); else it is
    removed and the earlier export stays with the earlier row."""
    new, old = out / (name + ".retune"), out / name
    if ok and new.is_dir():
        shutil.rmtree(old, ignore_errors=True)
        new.rename(old)
    else:
        shutil.rmtree(new, ignore_errors=True)


def _tune(family: str, name: str, shape_args: list[str], args, out: Path, env: dict, retune: bool = False) -> dict:
    """One ``search.tune`` process for one workload: its command, status, wall time and exported winner (the tune's
    own final re-measurement: ``tune_median_s``, ``tune_vendor_s``, ``tune_ratio``), or ``error``. A tune that
    outlives four times its ``--timeout`` plus ten minutes (compiles, the final re-measurement) is killed.

    ``retune``: a study of its own (``retune-<date>-<name>``, so the earlier study's trials, measured before whatever
    changed, do not stand in for new ones and today's default is its first trial), exported to ``OUT/<name>.retune``;
    the caller moves that folder over ``OUT/<name>`` only once the new row is checked (:func:`_keep_retune`)."""
    folder = out / (name + ".retune" if retune else name)
    study = ["--study-name", f"retune-{dt.date.today().isoformat()}-{name}"] if retune else []
    if retune:
        shutil.rmtree(folder, ignore_errors=True)  # an earlier retune's leftovers
    cmd = [sys.executable, "-m", "search.tune", family, *shape_args, "--trials", str(args.trials),
           "--timeout", str(args.timeout), "--storage", f"sqlite:///{out / 'tune.db'}", *study, "--no-progress",
           "--export", str(folder)] + (["--ship"] if args.ship else [])
    row: dict = {"command": "python -m search.tune " + " ".join(cmd[3:])}
    t0 = dt.datetime.now()
    row["rc"], text = run_child(cmd, env, 4 * args.timeout + 600)
    row["wall_s"] = (dt.datetime.now() - t0).total_seconds()
    rec_path = folder / "schedule.json"
    rec, problem = read_json(rec_path, "exported schedule.json")
    if row["rc"] != 0 or not isinstance(rec, dict):
        row["error"] = text[-800:] or problem or f"no {rec_path}"
        return row
    m = rec.get("measured") or {}
    row.update(schedule=rec.get("schedule"), tune_median_s=m.get("median_s"), tune_vendor_s=m.get("vendor_s"),
               tune_ratio=(m["vendor_s"] / m["median_s"]) if m.get("vendor_s") and m.get("median_s") else None)
    return row


def run_child(cmd: list[str], env: dict, timeout_s: float) -> tuple[int, str]:
    """(exit status, stderr or else stdout) of ``cmd``, run in a process group of its own, which is killed whole
    (the tune, its compile pool and its GPU worker) when it outlives ``timeout_s`` (status -1) or this process is
    interrupted. ``env`` gets ``TILEDSL_EXIT_WITH_PARENT=1``: a ``search.tune`` then ends within a second of this
    process's death, and its compile workers within a second of its own (``search.interrupt.exit_with_parent``),
    so a killed pass leaves no tune running beside the next one."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**env, EXIT_WITH_PARENT_ENV: "1"}, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return -1, "killed: the tune outlived its time limit"
    except BaseException:
        _kill_group(proc)
        raise
    return proc.returncode, err or out


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.communicate()


ROW_FIGURES = ("default_s", "tuned_s", "vendor_s", "tune_median_s", "tune_vendor_s", "tune_ratio")
"""A row's figures: seconds (or a ratio), finite and above 0 where present."""


def load_rows(table: Path) -> list[dict]:
    """The rows of the pass's table, each checked (a name; figures finite and positive; a shape of positive sizes).

    Raises:
        SystemExit: the table cannot be read or a row is malformed, naming the file, the row and what is wrong
            (nothing is tuned or rewritten on a table this pass cannot trust).
    """
    data, problem = read_json(table, "tune_workloads table")
    rows = data.get("rows") if isinstance(data, dict) else None
    if problem is None and not isinstance(rows, list):
        problem = 'is not a {"rows": [...]} table'
    for i, row in enumerate(rows if problem is None else []):
        problem = row_problem(row)
        if problem:
            problem = f"row {i}: {problem}"
            break
    if problem:
        sys.exit(f"benchmarks/tune_workloads.py: {table}: {problem}; fix or move it (its rows are the pass so far)")
    return rows


def row_problem(row: object) -> str | None:
    """What is wrong with one row of the table, or None."""
    if not isinstance(row, dict):
        return f"is a {type(row).__name__}, not an object"
    if not isinstance(row.get("name"), str) or not row["name"]:
        return "has no name"
    for key in ROW_FIGURES:
        v = row.get(key)
        if v is not None and not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                                  and v > 0):
            return f"{row['name']}: {key}={v!r} is not a finite figure above 0"
    for key in ("m", "n", "k"):
        if key in row and not (isinstance(row[key], int) and row[key] > 0):
            return f"{row['name']}: {key}={row[key]!r} is not a size above 0"
    if row.get("schedule") is not None and not isinstance(row["schedule"], dict):
        return f"{row['name']}: schedule is not an object"
    return None


def _write(table: Path, rows: list[dict], target) -> None:
    """The table so far, with its summary, the GPU and this call's command (written after every shape: a killed run
    keeps what it measured)."""
    atomic_write(table, json.dumps({"date": dt.date.today().isoformat(), "gpu": target.name,
                                    "command": " ".join(["python", "benchmarks/tune_workloads.py", *sys.argv[1:]]),
                                    "summary": summary(rows), "rows": rows}, indent=1))


if __name__ == "__main__":
    sys.exit(main())

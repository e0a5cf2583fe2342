"""Does ``--model-prune`` save measurements? The same measured study with and without it, per shape.

Run on a GPU::

    python benchmarks/model_prune.py --out benchmarks/results/model_prune_h200.json

For each shape (default: 4096x4096x4096 and 35x8457x2560, float32) and each setting (off, then
``--model-prune FACTOR`` for each ``--factor``) one ``python -m search.tune gemm ... --trials N --seed S``
process runs on a fresh SQLite study (the user's command; nothing else). From the study it records, in
the order the trials completed, the MEASURED trials (COMPLETE and owning their schedule: duplicates reuse
a value, pruned points are not measured) and reports:

* ``measured``: how many schedules were measured; ``model_pruned``: how many the cost model skipped;
* ``best_s``: the best measured time of the search (seconds);
* ``to_98_own``: measured trials needed to reach 98 % of that run's own best (time <= best / 0.98);
* ``to_98_common``: the same against the best of every setting of that shape (a common bar: a setting
  that never gets there has None);
* ``wall_s``: the wall time of the command, and the winner's final re-measured time (``final_s``).

The table is printed and written as JSON to ``--out``.

Without a GPU, ``--replay`` replays the committed 200-trial studies (``benchmarks/results/studies/``, the
cost model's fitting data) instead: their measured trials in trial order, each predicted by the shipped model as the
tuner predicts before compiling (``benchmarks/costmodel_rank.py``'s ``predictions``), through the tuner's own
``search.strategy.ModelPruner`` at each ``--factor``. A trial the pruner would skip is not measured; the rest keep
their measured times. It counts the measured trials to reach 98 % of the study's best and whether the best survives:

    python benchmarks/model_prune.py --replay --factor 1.5 --factor 2 --factor 3 --out model_prune_replay.json
    # each study predicted by the constants fitted without it (a costmodel_rank.py fit's leave-one-out folds)
    python benchmarks/model_prune.py --replay --held-out benchmarks/results/costmodel_rank_sm_90_2026-12-04.json

A replay keeps the study's proposals: in a real run the sampler, told fewer results, would propose other points after
the first skip, and the trials saved would be spent on new ones. It measures what the model would have skipped of
what the sampler did propose, not a new search.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SHAPES = "4096x4096x4096,35x8457x2560"
TARGET = 0.98  # "reached": within 98 % of the best throughput, i.e. time <= best / 0.98


def parse_shape(text: str) -> tuple[int, int, int]:
    """``MxNxK`` as three positive integers.

    Raises:
        argparse.ArgumentTypeError: not three positive integers joined by ``x`` (the message names the value).
    """
    parts = text.lower().split("x")
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        dims = ()
    if len(dims) != 3 or min(dims) < 1:
        raise argparse.ArgumentTypeError(f"shape {text!r}: give MxNxK with three integers >= 1, e.g. 4096x4096x4096")
    return dims  # type: ignore[return-value]


def measured_times(trials: Iterable) -> list[float]:
    """The measured times (seconds) of a study's trials in the order they completed.

    Kept: COMPLETE trials that own their schedule (no ``duplicate_of`` user attribute: a duplicate reuses
    another trial's value without measuring). Pruned and failed trials were not measured (a failed one
    may have been, but gives no time); they are left out.

    Args:
        trials: Optuna ``FrozenTrial``-like objects (``state``, ``value``, ``user_attrs``,
            ``datetime_complete``, ``number``).
    """
    done = [t for t in trials if getattr(t.state, "name", str(t.state)) == "COMPLETE"
            and "duplicate_of" not in t.user_attrs and t.value is not None]
    done.sort(key=lambda t: (t.datetime_complete or dt.datetime.max, t.number))
    return [float(t.value) for t in done]


def trials_to_reach(times: Sequence[float], best_s: float, fraction: float = TARGET) -> int | None:
    """How many measured trials (1-based, in order) it took to get within ``fraction`` of ``best_s``: the
    first whose time is <= ``best_s / fraction``; None when none is.

    Raises:
        ValueError: ``best_s`` is not > 0 or ``fraction`` is not in (0, 1].
    """
    if not best_s > 0:
        raise ValueError(f"best_s {best_s!r} must be > 0 seconds")
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction {fraction!r} must be in (0, 1]")
    bar = best_s / fraction
    for i, t in enumerate(times, 1):
        if t <= bar:
            return i
    return None


def summarize(rows: list[dict]) -> list[dict]:
    """Add ``to_98_common`` to each row: trials to 98 % of the best ``best_s`` among the rows of its shape."""
    for shape in {r["shape"] for r in rows}:
        mine = [r for r in rows if r["shape"] == shape and r.get("best_s")]
        if not mine:
            continue
        common = min(r["best_s"] for r in mine)
        for r in mine:
            r["common_best_s"] = common
            r["to_98_common"] = trials_to_reach(r["times_s"], common)
    return rows


def run_one(shape: tuple[int, int, int], factor: float | None, args: argparse.Namespace, work: Path) -> dict:
    """One ``search.tune`` run on a fresh study; its row (without ``to_98_common``)."""
    import optuna

    m, n, k = shape
    tag = f"{m}x{n}x{k}-" + ("off" if factor is None else f"prune{factor:g}")
    db = work / f"{tag}.db"
    db.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "search.tune", "gemm", "--m", str(m), "--n", str(n), "--k", str(k),
           "--dtype", args.dtype, "--trials", str(args.trials), "--seed", str(args.seed), "--storage",
           f"sqlite:///{db}", "--study-name", tag, "--no-progress", "--export", str(work / tag)]
    if factor is not None:
        cmd += ["--model-prune", f"{factor:g}"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    (work / f"{tag}.log").write_text(proc.stdout + proc.stderr)
    row = {"shape": f"{m}x{n}x{k}", "model_prune": factor, "command": "python -m search.tune " + " ".join(cmd[3:]),
           "rc": proc.returncode, "wall_s": wall}
    if proc.returncode != 0:
        row["error"] = (proc.stderr or proc.stdout)[-800:]
        return row
    trials = optuna.load_study(study_name=tag, storage=f"sqlite:///{db}").get_trials(deepcopy=False)
    times = measured_times(trials)
    rec = json.loads((work / tag / "schedule.json").read_text()) if (work / tag / "schedule.json").exists() else {}
    row.update(times_s=times, measured=len(times), best_s=min(times) if times else None,
               model_pruned=sum(t.user_attrs.get("rule") == "model_prune" for t in trials),
               final_s=(rec.get("measured") or {}).get("median_s"))
    row["to_98_own"] = trials_to_reach(times, row["best_s"]) if times else None
    return row


def replay(study, predicted: Sequence[float], factor: float | None) -> dict:
    """One study replayed through ``ModelPruner(factor)``: the measured trials in trial order, each skipped when the
    pruner's verdict (its prediction against the best prediction among the trials kept so far) says so.

    Args:
        study: a ``costmodel_rank.Study`` (``numbers``, ``measured`` seconds, ``name``).
        predicted: the model's seconds for each of its trials, in the same order.
        factor: the ``--model-prune`` factor, or None (no pruning: every trial measured).

    Returns:
        The row: ``measured`` and ``model_pruned`` counts, ``best_s`` of the kept trials, ``to_98_own`` (measured
        trials to 98 % of the study's best), ``best_kept`` (whether the study's fastest trial was measured).
    """
    from search.strategy import ModelPruner

    pruner = ModelPruner(factor)
    kept: list[float] = []
    pruned = 0
    for number, seconds, pred in sorted(zip(study.numbers, study.measured, predicted, strict=True)):
        if pruner.verdict(pred) is not None:
            pruned += 1
            continue
        kept.append(seconds)
        pruner.observe(pred, number)
    best = min(study.measured)
    return {"shape": study.name, "model_prune": factor, "measured": len(kept), "model_pruned": pruned,
            "best_s": min(kept) if kept else None, "study_best_s": best, "best_kept": best in kept,
            "to_98_own": trials_to_reach(kept, best) if kept else None, "times_s": kept}


def held_out_params(path: Path) -> dict:
    """``{study name: FmaParams}`` of the leave-one-out folds of a ``benchmarks/costmodel_rank.py fit`` result: the
    constants fitted without that study.

    Raises:
        SystemExit: the file is missing or unreadable, or has no folds (the message names the file).
    """
    from tiledsl.costmodel.params import FmaParams
    from tiledsl.filestore import read_json

    data, problem = read_json(path, "costmodel_rank.py fit result")
    folds = data.get("folds") if isinstance(data, dict) else None
    if problem or not isinstance(folds, list) or not folds:
        why = problem or ("no such file" if data is None else "no folds in it")
        raise SystemExit(f"--held-out {path}: {why}")
    try:
        return {f["held_out"]: FmaParams(**f["params"], source=f"{path} (fold without {f['held_out']})")
                for f in folds}
    except (KeyError, TypeError) as exc:
        raise SystemExit(f"--held-out {path}: a fold is not a costmodel_rank.py fold ({exc})") from None


def main_replay(args: argparse.Namespace, factors: list[float]) -> int:
    """``--replay``: the committed studies through the pruner at each factor (CPU); prints and writes the table."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import costmodel_rank as cr

    from tiledsl.costmodel.params import fma_params

    rows = []
    folds = held_out_params(Path(args.held_out)) if args.held_out else {}
    for study in cr.load_studies():
        params = folds.get(study.name) or fma_params(study.target.arch)
        if args.held_out and study.name not in folds:
            raise SystemExit(f"--held-out {args.held_out}: no fold holds out {study.name}")
        predicted = cr.predictions(study, params)
        for factor in [None, *factors]:
            rows.append(replay(study, predicted, factor) | {"study": study.source, "params": params.source})
    print(f"{'study':>16s} {'prune':>6s} {'measured':>8s} {'pruned':>6s} {'to 98% of best':>14s} {'best kept':>9s}")
    for r in rows:
        print(f"{r['shape']:>16s} {r['model_prune']!s:>6s} {r['measured']:>8d} {r['model_pruned']:>6d} "
              f"{r['to_98_own']!s:>14s} {r['best_kept']!s:>9s}")
    doc = {"tool": "benchmarks/model_prune.py --replay", "date": dt.date.today().isoformat(),
           "command": "python benchmarks/model_prune.py --replay " + " ".join(f"--factor {f:g}" for f in factors)
           + (f" --held-out {args.held_out}" if args.held_out else "") + f" --out {args.out}", "target_fraction": TARGET, "note": "replay of the committed studies' measured trials "
           "in trial order through search.strategy.ModelPruner with the shipped model's predictions (estimate, before "
           "compiling); the sampler's proposals are the study's, not those a pruned run would make", "rows": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python benchmarks/model_prune.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default=DEFAULT_SHAPES,
                    help=f"comma-separated MxNxK GEMM shapes (default: {DEFAULT_SHAPES})")
    ap.add_argument("--dtype", default="float32", help="GEMM dtype (default: float32)")
    ap.add_argument("--trials", type=int, default=200, help="--trials of each search.tune run (default: 200)")
    ap.add_argument("--seed", type=int, default=0, help="sampler seed, the same for every run (default: 0)")
    ap.add_argument("--factor", type=float, action="append", default=None,
                    help="--model-prune factor to compare with no pruning (repeat for several; default: 3)")
    ap.add_argument("--work", default=None, help="folder for the studies, logs and exports (default: a temporary one)")
    ap.add_argument("--out", default="model_prune.json", help="JSON file written (default: model_prune.json)")
    ap.add_argument("--replay", action="store_true",
                    help="CPU: replay the committed studies through the pruner instead of running new ones")
    ap.add_argument("--held-out", default=None, metavar="FIT_JSON",
                    help="with --replay: predict each study with the constants of the fold that held it out")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    shapes = [parse_shape(s) for s in args.shapes.split(",") if s]
    factors = args.factor or [3.0]
    if any(not f > 1 for f in factors):
        build_parser().error(f"--factor {factors}: every factor must be > 1")
    if args.held_out and not args.replay:
        build_parser().error("--held-out goes with --replay")
    if args.replay:
        return main_replay(args, factors)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from gpu_check import gpu_or_exit

    target = gpu_or_exit("benchmarks/model_prune.py")
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="model_prune-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for shape in shapes:
        for factor in [None, *factors]:
            row = run_one(shape, factor, args, work)
            rows.append(row)
            print(f"{row['shape']:>16s} prune={row['model_prune']!s:>5s} rc={row['rc']} wall {row['wall_s']:7.1f} s "
                  f"measured {row.get('measured')} model-pruned {row.get('model_pruned')} "
                  f"to 98% of own best {row.get('to_98_own')}", flush=True)
    summarize(rows)
    print(f"{'shape':>16s} {'prune':>6s} {'measured':>8s} {'pruned':>6s} {'best ms':>9s} {'to 98% own':>10s} "
          f"{'to 98% common':>13s} {'wall s':>7s}")
    for r in rows:
        best = f"{r['best_s'] * 1e3:.3f}" if r.get("best_s") else "-"
        print(f"{r['shape']:>16s} {r['model_prune']!s:>6s} {r.get('measured')!s:>8s} {r.get('model_pruned')!s:>6s} "
              f"{best:>9s} {r.get('to_98_own')!s:>10s} {r.get('to_98_common')!s:>13s} {r['wall_s']:7.1f}")
    doc = {"tool": "benchmarks/model_prune.py", "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
           "device": target.name, "arch": target.arch, "trials": args.trials, "seed": args.seed, "dtype": args.dtype,
           "target_fraction": TARGET, "work": str(work), "rows": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=1, default=str) + "\n")
    print(f"wrote {args.out}")
    return 0 if all(r["rc"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

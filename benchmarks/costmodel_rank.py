"""Fit and check the FMA GEMM cost model on the tuner's measured studies (no GPU needed).

The tuner (``python -m search.tune gemm ...``) stores every measured trial in an Optuna study; this
script works on compact JSON exports of those trials (``benchmarks/results/studies/``):

    # 1. export a study (once, where the .db is): schedule, measured time, ptxas registers/spills/smem
    python benchmarks/costmodel_rank.py export g4096x4096x4096.db --date 2026-12-01 --gpu "NVIDIA H200"
    # 2. rank quality of the shipped model (tiledsl/costmodel/gemm_fma_<arch>.json) and the old one, on
    #    the studies and on the 110 random schedules of benchmarks/results/costmodel_fit_sm_90_2026-11-29_seed0.json
    python benchmarks/costmodel_rank.py eval
    # 3. fit the constants: leave-one-study-out folds (fit on the others, check on the one left out),
    #    then on all studies; --write-params writes the all-study fit for the model to use
    python benchmarks/costmodel_rank.py fit [--write-params] [--out benchmarks/results/...json]

Ranking figures (:func:`tiledsl.costmodel.ranking.rank_quality`, the tuner's report's definitions):
Spearman's ρ between predicted and measured time over the study's measured trials, whether the measured
best (the tuner's final winner) is in the model's top 10, and the median measured / predicted.

The fit: the constants of :class:`tiledsl.costmodel.params.FmaParams` are searched in log space
(a deterministic quasi-random sample of their ranges, then Nelder-Mead from the best points, scipy) to
minimise, summed over the training studies, (1 − ρ) + |ln median(measured / predicted)| +
0.1 · ln(model rank of the measured best). The register constants ``reg_*`` are not searched: a non-negative
least-squares fit of ptxas's registers to the plan's register terms (``tiledsl.gemm.schedule.fma_register_terms``)
over the training studies' kernels below their register cap; nor is ``spill_slack_registers`` (what ptxas recovers
under the cap before it spills), fitted next to ptxas's spill bytes (:func:`spill_slack_fit`). The model predicts
before compiling: registers from those fitted terms, spills from their excess over the cap beyond the slack; ``fit``
prints how close the plan's estimate and the fitted terms (in each fold held
out, and fitted on all) come to ptxas, and how the model's spills classify the kernels that spilled and did not.
Predictions use the known-GPU table of the studies' device (what the tuner used; no calibration).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import tiledsl
from tiledsl.costmodel.gemm import predict_gemm
from tiledsl.costmodel.params import NUMERIC, FmaParams, fma_params, params_path
from tiledsl.costmodel.ranking import RankQuality, rank_quality
from tiledsl.gemm.kernel_plan import plan_gemm

ROOT = Path(__file__).resolve().parent
STUDIES = ROOT / "results" / "studies"
DTYPE_TAG = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}

SEARCHED = {  # (low, high) of each searched constant; the search is in log space
    "issue_efficiency": (0.4, 1.0),
    "lds_latency_cycles": (10.0, 120.0),
    "barrier_cycles": (20.0, 500.0),
    "mem_latency_cycles": (400.0, 1500.0),
    "spill_accesses_per_step": (0.5, 16.0),
    "wavefront_issue_cycles": (0.1, 4.0),
}
"""Ranges of the fitted constants (physically plausible bounds)."""


# ---- export ----
def export_study(db: str, date: str, gpu: str, out_dir: Path) -> Path:
    """Write the measured trials of the study in ``db`` (SQLite) as compact JSON; returns the path.

    Kept per trial: number, schedule, measured seconds, ptxas registers / spill bytes / shared memory,
    the prediction the tuner stored (the model of that day). Duplicates (a schedule measured by an
    earlier trial) are left out, as in the tuner's ranking report.
    """
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url = f"sqlite:///{Path(db).resolve()}"
    (summary,) = optuna.get_all_study_summaries(url)
    study = optuna.load_study(study_name=summary.study_name, storage=url)
    meta = study.user_attrs["meta"]
    op = meta["op"]
    final = next((v for k, v in study.user_attrs.items() if k.startswith("final")), {})
    trials = []
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        ua = t.user_attrs
        if "duplicate_of" in ua or "schedule" not in ua:
            continue
        trials.append({"number": t.number, "schedule": ua["schedule"], "time_s": t.value,
                       "registers": ua.get("registers"), "spill_bytes": ua.get("spill_bytes"),
                       "smem_bytes": ua.get("smem_bytes"), "predicted_s_then": ua.get("predicted_s")})
    shape = f"{op['m']}x{op['n']}x{op['k']}"
    head = {
        "command": f"python -m search.tune {meta['family']} --m {op['m']} --n {op['n']} --k {op['k']} --trials 200",
        "gpu": gpu, "arch": meta.get("arch"), "date": date, "study": summary.study_name,
        "device_table": "H200" if "H200" in gpu else gpu,
        "note": "measured trials of the tuner's study (duplicates left out); time_s: the tuner's measurement "
                "(CUDA graph, median); registers/spill_bytes/smem_bytes: ptxas; predicted_s_then: the cost "
                "model's prediction stored by the tuner that day (known-GPU table, no calibration)",
        "op": op, "winner_trial": final.get("winner_trial"), "winner_median_s": final.get("median_s"),
        "vendor_s": final.get("vendor_s"), "n_trials": len(trials),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    tag = DTYPE_TAG.get(op["dtype"], op["dtype"])
    path = out_dir / f"{meta['family']}_{tag}_{shape}_{gpu.split()[-1].lower()}_{date}.json"
    lines = ["{", *(f"  {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()), '  "trials": [']
    lines += [f"    {json.dumps(t, separators=(',', ':'))}" + ("," if i + 1 < len(trials) else "")
              for i, t in enumerate(trials)]
    lines += ["  ]", "}"]
    path.write_text("\n".join(lines) + "\n")
    return path


# ---- studies ----
@dataclass(frozen=True)
class Study:
    """One exported study: the op, its FMA trials (schedule objects), measured times, the winner."""

    name: str
    op: tiledsl.GemmOp
    target: tiledsl.Target
    numbers: tuple[int, ...]
    schedules: tuple
    measured: tuple[float, ...]
    registers: tuple[int, ...]
    spill_bytes: tuple[int, ...]
    predicted_then: tuple[float, ...]
    winner: int | None
    source: str = ""
    smem_bytes: tuple[int, ...] = ()


def load_study(path: Path) -> Study:
    """Read an exported study (FMA trials only: the model fitted here is the FMA pipeline)."""
    d = json.loads(path.read_text())
    op = tiledsl.GemmOp(**d["op"])
    rows = [t for t in d["trials"] if t["schedule"].get("mma", "fma") == "fma" and t["time_s"]]
    name = f"{d['op']['m']}x{d['op']['n']}x{d['op']['k']}"
    return Study(name, op, tiledsl.Target.known(d["device_table"]),
                 tuple(t["number"] for t in rows), tuple(tiledsl.GemmSchedule(**t["schedule"]) for t in rows),
                 tuple(t["time_s"] for t in rows), tuple(t["registers"] for t in rows),
                 tuple(t["spill_bytes"] for t in rows), tuple(t["predicted_s_then"] or math.nan for t in rows),
                 d.get("winner_trial"), _rel(path), tuple(t["smem_bytes"] for t in rows))


def _rel(path: Path) -> str:
    """``path`` relative to the repository root when inside it."""
    try:
        return str(Path(path).resolve().relative_to(ROOT.parent))
    except ValueError:
        return str(path)


def load_studies(paths: list[str] | None = None) -> list[Study]:
    files = [Path(p) for p in paths] if paths else sorted(STUDIES.glob("gemm_*.json"))
    if not files:
        raise SystemExit(f"no exported studies in {STUDIES}: run `{Path(__file__).name} export <db>` first")
    return [load_study(f) for f in files]


REGISTERS = "estimate"
"""Where predictions take registers, spills and shared memory from: "estimate" (the plan's, before compiling: the
model's seeding and pruning) or "ptxas" (the trial's compiled kernel: what the tuner knows once a candidate has
compiled, before it is measured; ``explain(op, s, kernel=k)``)."""


@dataclass(frozen=True)
class _Compiled:
    """The ptxas figures of a trial's kernel, as ``predict_gemm(kernel=...)`` reads them."""

    registers: int
    spill_bytes: int
    smem_bytes: int


def predictions(study: Study, params: FmaParams) -> list[float]:
    """The model's predicted seconds for every trial of ``study`` under ``params`` (:data:`REGISTERS` says from
    which register figures)."""
    c = study.target.ceilings()
    if REGISTERS == "ptxas":
        return [predict_gemm(study.op, s, study.target, ceilings=c, params=params, kernel=_Compiled(r, sp, sm))
                for s, r, sp, sm in zip(study.schedules, study.registers, study.spill_bytes, study.smem_bytes,
                                        strict=True)]
    return [predict_gemm(study.op, s, study.target, ceilings=c, params=params) for s in study.schedules]


def quality(study: Study, predicted: list[float]) -> RankQuality:
    return rank_quality(predicted, study.measured, study.numbers, study.winner)


# ---- fit ----
def register_estimate_check(studies: list[Study]) -> dict:
    """How close the plan's register estimate (its cap and spills; the model's registers are
    :func:`register_error`'s) is to ptxas, per study: median ptxas / estimate over the kernels below their register
    cap, and how many kernels spilled where the estimate said none would."""
    out = {}
    for st in studies:
        ratios, surprise = [], 0
        for s, regs, spill in zip(st.schedules, st.registers, st.spill_bytes, strict=True):
            p = plan_gemm(st.op, s)
            if regs < p.max_registers - 1:
                ratios.append(regs / p.est_registers)
            if spill and not p.detail.spill_bytes:
                surprise += 1
        out[st.name] = {"median_ptxas_over_estimate": statistics.median(ratios) if ratios else None,
                        "below_cap": len(ratios), "spilled_unpredicted": surprise,
                        "spilled": sum(1 for x in st.spill_bytes if x)}
    return out


def register_error(study: Study, params: FmaParams) -> float | None:
    """Mean |model − ptxas| / ptxas of the registers the model takes for the occupancy (``estimate_registers`` with
    ``params``: the fitted terms, in allocation units of 8, capped) over ``study``'s FMA kernels below their cap."""
    from tiledsl.costmodel.gemm import estimate_registers

    errs = []
    for s, regs in zip(study.schedules, study.registers, strict=True):
        p = plan_gemm(study.op, s)
        if s.kernel == "tiled" and s.mma == "fma" and regs < p.max_registers - 1:
            errs.append(abs(estimate_registers(study.op, s, params)[0] - regs) / regs)
    return float(np.mean(errs)) if errs else None


def spill_check(study: Study, params: FmaParams) -> dict[str, int]:
    """How the model's spills (:func:`tiledsl.costmodel.gemm.estimate_registers` with ``params``: the fitted
    register terms' excess over the cap beyond ``spill_slack_registers``) classify ``study``'s tiled FMA kernels
    against ptxas: spilling kernels predicted spill-free (``missed``) and spill-free ones predicted to spill
    (``false``)."""
    from tiledsl.costmodel.gemm import estimate_registers

    missed = false = spilled = 0
    for s, spill in zip(study.schedules, study.spill_bytes, strict=True):
        if s.kernel != "tiled" or s.mma != "fma":
            continue
        predicted = estimate_registers(study.op, s, params)[1]
        spilled += bool(spill)
        missed += bool(spill) and not predicted
        false += not spill and bool(predicted)
    return {"spilled": spilled, "missed": missed, "false": false}


LOSS = "rank"


def loss(studies: list[Study], params: FmaParams) -> float:
    """Summed over ``studies``: (1 − ρ) + |ln median(measured / predicted)| + 0.1 · ln(model rank of the
    measured best) (``LOSS = "rank"``), or with ρ replaced by the Pearson correlation of ln predicted and
    ln measured (``"logcorr"``: smooth in the constants)."""
    total = 0.0
    for st in studies:
        pred = predictions(st, params)
        q = quality(st, pred)
        if LOSS == "logcorr":
            corr = float(np.corrcoef(np.log(pred), np.log(st.measured))[0, 1])
            total += (1 - corr) + abs(math.log(q.median_ratio))
        else:
            total += (1 - (q.spearman or 0.0)) + abs(math.log(q.median_ratio)) + 0.1 * math.log(q.best_model_rank)
    return total


REGISTER_TERMS = ("accumulators", "fragments", "staged", "loads")
"""The terms of ``fma_register_terms`` the register fit weighs, in ``FmaParams``' order (stream-K keeps the plan's
+10: too few stream-K kernels in the studies to fit it)."""


def register_fit(studies: list[Study]) -> dict[str, float]:
    """``FmaParams``' register constants: non-negative least squares of ptxas's registers on reg_base + the weighted
    :data:`REGISTER_TERMS` (and the plan's +10 for stream-K) over the FMA kernels below their register cap."""
    from tiledsl.gemm.schedule import fma_register_terms

    rows, target = [], []
    for st in studies:
        for s, regs in zip(st.schedules, st.registers, strict=True):
            p = plan_gemm(st.op, s)
            if s.kernel != "tiled" or s.mma != "fma" or regs >= p.max_registers - 1:
                continue
            v = dict(p.vec)
            t = fma_register_terms(s, v["A"], v["B"])
            rows.append([1.0, *(t[k] for k in REGISTER_TERMS)])
            target.append(regs - 10 * t["stream_k"])
    if len(rows) < 2 * (len(REGISTER_TERMS) + 1):
        return {}  # too few kernels: the plan's weights (FmaParams' defaults)
    from scipy.optimize import nnls

    coef, _ = nnls(np.array(rows), np.array(target, dtype=float))  # no negative register counts per term
    names = ("reg_base", "reg_per_accumulator", "reg_per_fragment", "reg_per_staged", "reg_per_load")
    return {k: float(c) for k, c in zip(names, coef, strict=True)}


def spill_slack_fit(studies: list[Study], regs: dict[str, float]) -> dict[str, float]:
    """``FmaParams.spill_slack_registers``: the slack S (0 to 64 registers, steps of 1/4) that makes the model's spills,
    8 bytes per register of max(0, wanted − cap − S) with ``regs``' register terms, closest to ptxas's spill bytes
    (least absolute error of ln(1 + bytes), ties to the smaller S) over the studies' tiled FMA kernels; ``{}`` (the
    default, 0) without ``regs``. Fitted to ptxas, not searched: the slack is a compiler fact."""
    if not regs:
        return {}
    from tiledsl.costmodel.gemm import estimate_registers

    prm = FmaParams(**regs)
    wanted = []  # (want - cap) with S = 0: estimate_registers' spill / 8
    for st in studies:
        for s, spill in zip(st.schedules, st.spill_bytes, strict=True):
            if s.kernel == "tiled" and s.mma == "fma":
                wanted.append((estimate_registers(st.op, s, prm)[1] / 8, spill or 0))
    grid = np.arange(0.0, 64.0 + 1e-9, 0.25)
    err = [sum(abs(math.log1p(8 * max(0.0, e - g)) - math.log1p(b)) for e, b in wanted) for g in grid]
    return {"spill_slack_registers": float(grid[int(np.argmin(err))])}


def _to_params(x: np.ndarray, regs: dict[str, float]) -> FmaParams:
    vals = {k: float(math.exp(v)) for k, v in zip(SEARCHED, x, strict=True)}
    for k, (lo, hi) in SEARCHED.items():
        vals[k] = min(max(vals[k], lo), hi)
    return FmaParams(source="fit candidate", **regs, **vals)


def fit(studies: list[Study], samples: int = 64, seed: int = 0, polish: int = 3) -> tuple[FmaParams, float]:
    """Constants minimising :func:`loss` on ``studies`` (deterministic for a given seed)."""
    from scipy.optimize import minimize
    from scipy.stats import qmc

    regs = register_fit(studies)
    regs.update(spill_slack_fit(studies, regs))
    lo = np.log([v[0] for v in SEARCHED.values()])
    hi = np.log([v[1] for v in SEARCHED.values()])
    pts = qmc.scale(qmc.Sobol(len(SEARCHED), seed=seed).random(samples), lo, hi)
    scored = sorted(((loss(studies, _to_params(x, regs)), i) for i, x in enumerate(pts)))
    best_x, best_f = pts[scored[0][1]], scored[0][0]
    for _, i in scored[:polish]:
        res = minimize(lambda x: loss(studies, _to_params(x, regs)), pts[i], method="Nelder-Mead",
                       options={"maxfev": 400, "xatol": 1e-3, "fatol": 1e-4})
        if res.fun < best_f:
            best_x, best_f = res.x, float(res.fun)
    return _to_params(best_x, regs), best_f


def _row(model: str, st: Study, q: RankQuality, held_out: str) -> dict:
    return {"model": model, "study": st.name, "evaluated": held_out, "n": q.n, "spearman": q.spearman,
            "best": q.best, "best_in_top10": q.best_in_top10, "best_model_rank": q.best_model_rank,
            "median_measured_over_predicted": q.median_ratio}


def _print_rows(rows: list[dict]) -> None:
    print(f"{'model':34s} {'study':16s} {'evaluated':10s} {'n':>4s} {'rho':>7s} {'best in top 10':>15s} "
          f"{'median meas/pred':>17s}")
    for r in rows:
        rho = "n/a" if r["spearman"] is None else f"{r['spearman']:.3f}"
        top = f"{'yes' if r['best_in_top10'] else 'no'} (#{r['best_model_rank']})"
        print(f"{r['model']:34s} {r['study']:16s} {r['evaluated']:10s} {r['n']:4d} {rho:>7s} {top:>15s} "
              f"{r['median_measured_over_predicted']:17.2f}", flush=True)


RANDOM_FIT = ROOT / "results" / "costmodel_fit_sm_90_2026-11-29_seed0.json"
"""110 random valid schedules of 4096³ float32 measured on the H200 on 2026-11-29
(``benchmarks/costmodel_fit.py``): never used by the fit, a check of a different kind."""


def random_schedules(path: Path = RANDOM_FIT) -> Study | None:
    """The measured GEMM points of a ``costmodel_fit.py`` result as a :class:`Study` (None: no file)."""
    if not path.exists():
        return None
    d = json.loads(path.read_text())
    pts = [p for p in d["points"] if p["family"] == "gemm" and p.get("measured_s")]
    op = tiledsl.GemmOp(4096, 4096, 4096)
    return Study("4096^3 random (11-29)", op, tiledsl.Target.known("H200"), tuple(range(len(pts))),
                 tuple(tiledsl.GemmSchedule(**p["schedule"]) for p in pts), tuple(p["measured_s"] for p in pts),
                 tuple(p["registers"] for p in pts), tuple(p["spill_bytes"] for p in pts),
                 tuple(p["predicted_table_s"] for p in pts), None, _rel(path), tuple(p["smem_bytes"] for p in pts))


def cmd_eval(args) -> int:
    studies = load_studies(args.studies)
    extra = random_schedules()
    rows = []
    for st in [*studies, *([extra] if extra else [])]:
        rows.append(_row("old (stored then)", st, quality(st, list(st.predicted_then)), "-"))
        shipped = fma_params(st.target.arch)
        fitted_on = json.loads(params_path(st.target.arch).read_text())["provenance"]["studies"]
        seen = any(f.startswith(st.source + " ") for f in fitted_on)
        rows.append(_row("shipped fit", st, quality(st, predictions(st, shipped)), "in-sample" if seen else "held-out"))
    _print_rows(rows)
    return 0


def cmd_fit(args) -> int:
    studies = load_studies(args.studies)
    if args.with_random:
        extra = random_schedules()
        if extra is None:
            raise SystemExit(f"--with-random: {RANDOM_FIT} is missing")
        studies.append(extra)
    rows, folds = [], []
    for st in studies:  # the tuner's own figures first: what the old model did
        rows.append(_row("old (stored by the tuner)", st, quality(st, list(st.predicted_then)), "-"))
    for held in studies:
        train = [s for s in studies if s is not held]
        p, f = fit(train, args.samples, args.seed)
        folds.append({"held_out": held.name, "trained_on": [s.name for s in train], "loss": f,
                      "params": {k: getattr(p, k) for k in NUMERIC}})
        rows.append(_row(f"fit without {held.name}", held, quality(held, predictions(held, p)), "held-out"))
        folds[-1]["held_out_register_error"] = register_error(held, p)
        folds[-1]["held_out_spill_check"] = spill_check(held, p)
        for st in train:
            rows.append(_row(f"fit without {held.name}", st, quality(st, predictions(st, p)), "in-sample"))
        print(f"fold without {held.name}: {folds[-1]['params']} (loss {f:.3f})", flush=True)
    p_all, f_all = fit(studies, args.samples, args.seed)
    for st in studies:
        rows.append(_row("fit on all studies", st, quality(st, predictions(st, p_all)), "in-sample"))
    _print_rows(rows)
    print(f"fit on all studies: {dict((k, round(getattr(p_all, k), 4)) for k in NUMERIC)} (loss {f_all:.3f})")
    regs = register_estimate_check(studies)
    held_err = {f["held_out"]: f["held_out_register_error"] for f in folds}
    held_spill = {f["held_out"]: f["held_out_spill_check"] for f in folds}
    for st in studies:
        r = regs[st.name]
        r["fitted_terms_error_held_out"], r["fitted_terms_error_in_sample"] = held_err[st.name], register_error(
            st, p_all)
        r["spill_check_held_out"], r["spill_check_in_sample"] = held_spill[st.name], spill_check(st, p_all)
        sh, si = r["spill_check_held_out"], r["spill_check_in_sample"]
        print(f"register estimate on {st.name}: ptxas / the plan's estimate median "
              f"{r['median_ptxas_over_estimate']:.2f} over {r['below_cap']} kernels below their cap; "
              f"{r['spilled_unpredicted']} of {r['spilled']} spilling kernels were estimated not to spill by the "
              f"plan; the fitted terms' mean error {100 * r['fitted_terms_error_held_out']:.0f} % held out, "
              f"{100 * r['fitted_terms_error_in_sample']:.0f} % fitted on all; the model's spills (fitted terms "
              f"and slack) miss {sh['missed']} of {sh['spilled']} spilling kernels and flag {sh['false']} spill-free "
              f"ones held out, {si['missed']} and {si['false']} fitted on all")
    command = " ".join(["python", "benchmarks/costmodel_rank.py", *sys.argv[1:]])
    stamp = dt.date.today().isoformat()
    result = {"command": command, "date": stamp, "studies": [s.name for s in studies],
              "searched": SEARCHED, "samples": args.samples, "seed": args.seed, "folds": folds,
              "all": {"params": {k: getattr(p_all, k) for k in NUMERIC}, "loss": f_all}, "rows": rows,
              "register_estimate": regs}
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.out}")
    if args.write_params:
        arch = studies[0].target.arch
        path = params_path(arch)
        path.write_text(json.dumps({
            "params": {k: round(getattr(p_all, k), 4) for k in NUMERIC},
            "provenance": {"command": command, "date": stamp,
                           "studies": [f"{s.source} ({s.name}, {len(s.numbers)} measured trials)" for s in studies],
                           "method": "see benchmarks/costmodel_rank.py and docs/costmodel.md",
                           "held_out_check": "leave-one-study-out folds in docs/costmodel.md"},
        }, indent=1) + "\n")
        print(f"wrote {path}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("export", help="write a study's measured trials as JSON")
    ex.add_argument("db", nargs="+", help="Optuna SQLite files of search.tune studies")
    ex.add_argument("--date", required=True, help="the day the study was measured (YYYY-MM-DD)")
    ex.add_argument("--gpu", required=True, help='the GPU it was measured on, e.g. "NVIDIA H200"')
    ex.add_argument("--out", default=str(STUDIES))
    for name in ("eval", "fit"):
        p = sub.add_parser(name)
        p.add_argument("--studies", nargs="*", help=f"exported study JSON files (default: {STUDIES}/gemm_*.json)")
        p.add_argument("--registers", choices=("estimate", "ptxas"), default="estimate",
                       help="predict with the plan's register estimate (before compiling) or each trial's ptxas "
                            "figures (once compiled)")
    fp = sub.choices["fit"]
    fp.add_argument("--samples", type=int, default=64, help="quasi-random starting points per fit")
    fp.add_argument("--seed", type=int, default=0)
    fp.add_argument("--out", help="write the folds and the table as JSON here")
    fp.add_argument("--loss", choices=("rank", "logcorr"), default="rank", help="what the fit minimises")
    fp.add_argument("--with-random", action="store_true",
                    help=f"also fit on (and hold out) the random schedules of {RANDOM_FIT.name}")
    fp.add_argument("--write-params", action="store_true", help="write the all-study fit for the model to use")
    args = ap.parse_args()
    global LOSS, REGISTERS
    if args.cmd == "fit":
        LOSS = args.loss
    if args.cmd in ("eval", "fit"):
        REGISTERS = args.registers
    if args.cmd == "export":
        for db in args.db:
            print(f"wrote {export_study(db, args.date, args.gpu, Path(args.out))}")
        return 0
    return cmd_eval(args) if args.cmd == "eval" else cmd_fit(args)


if __name__ == "__main__":
    sys.exit(main())

"""The end of a ``search.tune`` run: which trials are re-examined, and how the winner is picked.

* measured: :func:`remeasured_finalists`: the top ``--final-top`` re-measured interleaved with the vendor
  library on the first device (the winner then comes from :func:`search.report.pick_winner`);
* ``--model-only``: :func:`model_only_finalists`: the best predicted schedule of each tile structure, the
  first ``--compile-top`` compiled and re-predicted with their registers; the winner is the compiled one
  without register spills (or, failing that, the family's default schedule).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from .config import TuneConfig
from .objective import Model, trial_problem, warn_trial
from .observers import Progress
from .space import Space, describe, tie_key
from .strategy import LIBRARY_DEFAULT


@dataclass
class Finalist:
    """A candidate of the final re-measurement."""

    number: int
    schedule: object
    median_s: float
    spread: float
    predicted_s: float | None = None
    bound_by: str | None = None
    resources: dict = field(default_factory=dict)



def owned_complete(study, key=None) -> list:
    """COMPLETE trials that own their schedule (duplicates left out), best value first; equal values
    in ``key``'s order (a function of the schedule dict), else by trial number."""
    from optuna.trial import TrialState

    st = _schedule_type(study)
    trials = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        if "duplicate_of" in t.user_attrs:
            continue
        why = trial_problem(t, st)
        if why is None:
            trials.append(t)
        else:  # e.g. written by another version or by hand into a shared study
            warn_trial(study, t.number, why)
    if key is None:
        return sorted(trials, key=lambda t: (t.value, t.number))
    return sorted(trials, key=lambda t: (t.value, key(t.user_attrs["schedule"]), t.number))


def _schedule_type(study):
    """The schedule class of the study's family (from its ``meta``), or None when unknown."""
    meta = study.user_attrs.get("meta")
    try:
        from tiledsl.api import family

        return family(meta["family"]).schedule_type
    except Exception:
        return None


# --model-only: after the compiled candidates, at most this many more are compiled (by predicted rank)
# looking for one without register spills, within this many seconds.
SPILL_SEARCH_COMPILES = 12
SPILL_SEARCH_S = 90.0


def _registers(op, s) -> tuple[int, int]:
    """(estimated registers per thread, the cap ``__launch_bounds__`` sets) from the kernel's plan."""
    from tiledsl import family

    p = family.of(op).plan(op, s, None)
    return p.est_registers, p.max_registers


def model_only_finalists(study, space: Space, target, cfg: TuneConfig, model: Model, op, out, bar: Progress,
                          compile_them: bool = True) -> tuple[list, Finalist | None, dict]:
    """``--model-only``: the best predicted schedule of each structure, the first ``--compile-top``
    compiled (ptxas registers, shared memory, spills) and re-predicted with the kernel.

    The winner is the compiled candidate without register spills with the lowest re-predicted time
    (ties: :func:`search.space.tie_key`), unless the library default (its ``seeded_by`` trial) is re-predicted
    within :data:`MODEL_RESOLUTION` of it: then the default, whose speed the project's benchmarks measure, is exported. When every one of them spills, further candidates are compiled
    by predicted rank (at most ``SPILL_SEARCH_COMPILES`` / ``SPILL_SEARCH_S``; a GEMM candidate whose
    register estimate is at least that of one that spilled under no larger register cap is skipped)
    until one does not; if none does, the family's default schedule (``default_schedule(op, target)``,
    compiled and checked) is exported, with a warning.

    Returns:
        (rows of the report in predicted order, the winner, what happened for the report's header).
    """
    import tiledsl
    from tiledsl.api import family

    st = space.schedule_type()
    tie = tie_key(space, op, target)
    owned = owned_complete(study, key=lambda d: tie(st.from_dict(d)))
    seen, rows = set(), []
    for t in owned:  # one row per structure (GEMM: warp shape, swizzle, padding, unroll aside)
        struct = json.dumps({k: v for k, v in t.user_attrs["schedule"].items()
                             if k not in space.structure_ignore}, sort_keys=True)
        if struct not in seen:
            seen.add(struct)
            rows.append(t)
    rows = rows[:max(cfg.final_top, cfg.compile_top)]
    info = {"compiled": 0, "clean": 0, "extra": 0, "skipped": 0, "fallback": None, "compile_s": 0.0}
    compiled: dict[int, Finalist] = {}
    bar.grow(min(cfg.compile_top, len(rows)))

    def compile_one(s, number, predicted_s, bound_by) -> Finalist:
        t0 = time.perf_counter()
        try:
            k = tiledsl.compile(op, s, arch=target.arch)
            res = {**k.resources(), "compile_s": time.perf_counter() - t0,
                   "predicted_with_kernel_s": model.predict(op, s, target, kernel=k)}
        except tiledsl.TiledslError as exc:  # the study keeps the outcome (finished trials are read-only)
            res = {"error": f"{type(exc).__name__}: {exc}"[:4000]}
            out(f"{'trial ' + str(number) if number is not None else 'the default schedule'} does not compile: "
                f"{type(exc).__name__}")
        info["compile_s"] += time.perf_counter() - t0
        info["compiled"] += 1
        info["clean"] += "error" not in res and not res.get("spill_bytes")
        bar.update(1, f"{info['clean']} without spills")
        return Finalist(number, s, res.get("predicted_with_kernel_s") or predicted_s, 0.0, predicted_s, bound_by, res)

    def compile_trial(t) -> Finalist:
        f = compile_one(st.from_dict(t.user_attrs["schedule"]), t.number, t.value, t.user_attrs.get("bound_by"))
        study.set_user_attr(f"compiled:{t.number}", f.resources)
        compiled[t.number] = f
        return f

    def clean(f: Finalist) -> bool:
        return "registers" in f.resources and not f.resources.get("spill_bytes")

    if not compile_them:  # interrupted: the predictions as they are, nothing compiled, no winner
        return [Finalist(t.number, st.from_dict(t.user_attrs["schedule"]), t.value, 0.0, t.value,
                         t.user_attrs.get("bound_by"), {}) for t in rows], None, info
    for t in rows[:cfg.compile_top]:
        compile_trial(t)
    if not any(clean(f) for f in compiled.values()) and compiled:
        t0 = time.perf_counter()
        spilled = []  # (register estimate, register cap) of GEMM candidates that spilled
        for t in owned:
            if info["extra"] >= SPILL_SEARCH_COMPILES or time.perf_counter() - t0 > SPILL_SEARCH_S:
                break
            if t.number in compiled:
                continue
            s = st.from_dict(t.user_attrs["schedule"])
            if hasattr(s, "est_registers"):
                spilled = [_registers(op, f.schedule) for f in compiled.values() if f.resources.get("spill_bytes")]
                want, cap = _registers(op, s)
                if any(want >= e and cap <= c for e, c in spilled):
                    info["skipped"] += 1
                    continue
            info["extra"] += 1
            bar.grow()
            f = compile_trial(t)
            if clean(f):
                if t not in rows:
                    rows.append(t)
                    rows.sort(key=owned.index)
                break
    candidates = [f for f in compiled.values() if clean(f)]
    finals = [compiled.get(t.number) or Finalist(t.number, st.from_dict(t.user_attrs["schedule"]), t.value, 0.0,
                                                 t.value, t.user_attrs.get("bound_by"), {}) for t in rows]
    if candidates:
        best = min(f.median_s for f in candidates)
        winner = min((f for f in candidates if f.median_s <= best * (1 + 1e-9)), key=lambda f: tie(f.schedule))
        kept = _library_default_within_resolution(owned, compiled, compile_trial, clean, best, bar.grow)
        if kept is not None and kept is not winner:
            same = [i for i, f in enumerate(finals) if f.number == kept.number]  # its row, uncompiled, if listed
            if same:
                finals[same[0]] = kept
            else:  # its row, in predicted order
                finals.insert(sum(1 for f in finals if (f.predicted_s or 0) <= (kept.predicted_s or 0)), kept)
            info["default_kept"] = kept.number
            out(f"the library default (trial {kept.number}, {describe(kept.schedule)}) is predicted within "
                f"{MODEL_RESOLUTION:.0%} of the best prediction ({kept.median_s * 1e3:.3f} vs {best * 1e3:.3f} ms): "
                "exported instead: the cost model does not separate schedules that close, and the default is what "
                "schedule=None runs, measured on the GPU in the project's benchmarks (docs/search.md)")
            winner = kept
        return finals, winner, info
    # nothing compiled is free of spills: the library's default for this op (not with --mma dmma, whose space need not
    # hold it and whose winners are never stored)
    worst = min((f for f in compiled.values() if "registers" in f.resources),
                key=lambda f: f.resources["spill_bytes"], default=None)
    why = (f"none of the {len(compiled)} compiled candidates is free of register spills (fewest: trial "
           f"{worst.number}, {worst.resources['spill_bytes']} bytes)" if worst is not None
           else f"none of the {len(compiled)} compiled candidates compiled")
    if cfg.mma != "auto":
        info["fallback"] = why
        out(f"warning: {why}; nothing exported (--mma {cfg.mma}: its space need not hold the library default)")
        return finals, None, info
    default = family(cfg.family).default_schedule(op, target)
    ex = model.explain(op, default, target)
    bar.grow()
    winner = compile_one(default, None, ex.get("predicted_s"), ex.get("bound_by"))
    default_res = ("does not compile" if "error" in winner.resources else
                   f"{winner.resources['registers']} registers, {winner.resources['spill_bytes']} spill bytes")
    info["fallback"] = why
    out(f"warning: {why}; exporting the library default {cfg.family}.default_schedule(op, {target.name}) "
        f"instead: {describe(default)} ({default_res})")
    return finals + [winner], (winner if "error" not in winner.resources else None), info


MODEL_RESOLUTION = 0.05
"""Predictions closer than this (relative) do not rank: the FMA model predicts the three fastest measured 4096³
schedules within 1.5 % of each other (4.13-4.19 ms) while they measure 2.83-3.00 ms, 6 % apart (H200,
2026-12-01, ``benchmarks/results/tune_4096x4096x4096_h200_2026-12-01_run4.log``)."""


def _library_default_within_resolution(owned: list, compiled: dict, compile_trial, clean, best: float,
                                       grow) -> Finalist | None:
    """The study's library-default trial (``seeded_by = "library default"``), compiled, when it compiles without
    spills and its re-predicted time is within :data:`MODEL_RESOLUTION` of ``best``; else None. ``grow`` raises
    the compile bar's total when the default is compiled here."""
    t = next((t for t in owned if t.user_attrs.get("seeded_by") == LIBRARY_DEFAULT), None)
    if t is None or t.value > best * (1 + MODEL_RESOLUTION):
        return None
    if t.number not in compiled:
        grow()
    f = compiled.get(t.number) or compile_trial(t)
    return f if clean(f) and f.median_s <= best * (1 + MODEL_RESOLUTION) else None


def remeasured_finalists(study, space: Space, target, cfg: TuneConfig, worker, op, out,
               remeasure: bool = True) -> tuple[list[Finalist], float | None]:
    """Measured mode: the top ``--final-top`` re-measured interleaved with the vendor library
    (``remeasure=False``, after Ctrl-C: the search's own timings)."""
    st = space.schedule_type()
    owned = owned_complete(study)
    finals: list[Finalist] = []
    top = owned[:cfg.final_top]
    if not top:
        return [], None
    scheds = [st.from_dict(t.user_attrs["schedule"]) for t in top]
    if not remeasure:
        r = {"ok": False, "error": "interrupted: not re-measured"}
    else:
        bar = Progress(1, cfg.progress, f"re-measure the top {len(top)} and the vendor library, 7 interleaved rounds",
                        "batch")
        try:
            r = worker.call({"cmd": "remeasure", "schedules": [s.to_dict() for s in scheds], "rounds": 7,
                             "repeat": 20}, timeout_s=600)
            bar.update(1)
        finally:
            bar.close()
    if not r.get("ok"):
        out(f"final re-measurement failed ({r.get('error')}); using the search's own timings")
        return [Finalist(t.number, s, t.value, t.user_attrs.get("spread", 0.0), t.user_attrs.get("predicted_s"),
                         t.user_attrs.get("bound_by"), trial_resources(t)) for t, s in zip(top, scheds, strict=True)], None
    import statistics

    for t, s, times in zip(top, scheds, r["times_ms"], strict=True):
        med = statistics.median(times) / 1e3
        spread = (max(times) - min(times)) / 1e3 / med if med else 0.0
        finals.append(Finalist(t.number, s, med, spread, t.user_attrs.get("predicted_s"),
                               t.user_attrs.get("bound_by"), trial_resources(t)))
    return finals, (statistics.median(r["vendor_ms"]) / 1e3 if r.get("vendor_ms") else None)


def trial_resources(t) -> dict:
    return {k: t.user_attrs.get(k) for k in ("registers", "smem_bytes", "spill_bytes")}



"""What a ``search.tune`` run leaves next to the exported kernel: the JSON report and the roofline PNG.

The results folder of a run (``--export DIR``, default ``tune-out/<study name>/``) holds::

    kernel.cu       the winner's CUDA C and a host launcher (search.export)
    schedule.json   the winner's record (search.export)
    report.json     every trial of the study: schedule, prediction, measurement, failure reason (this module)
    report.txt      the printed report
    roofline.png    the report's rows on the device's roofline, each point named by its schedule (this module)
"""

from __future__ import annotations

import json
from pathlib import Path

from tiledsl.filestore import atomic_write

from .space import describe

REPORT_VERSION = 1


def _resources(ua: dict, compiled: dict | None) -> dict | None:
    """Registers / shared memory / spills of a trial: from its own compile (measured mode) or from the
    model-only finalist compile (``compiled:<n>`` study attribute)."""
    keys = ("registers", "smem_bytes", "spill_bytes", "stack_bytes")
    own = {k: ua[k] for k in keys if ua.get(k) is not None}
    if compiled:
        own.update({k: compiled[k] for k in keys if compiled.get(k) is not None})
        if compiled.get("error"):
            own["compile_error"] = compiled["error"]
    return own or None


def trial_records(study, mode: str) -> list[dict]:
    """One JSON-ready dict per trial of ``study`` (every state, trial-number order).

    Keys: ``number``, ``state`` (complete / pruned / fail / running / waiting), ``schedule`` (the schedule's
    ``to_dict``; None when the sampled point broke a rule before it became one), ``params`` (the sampled
    point), ``predicted_s`` (cost model, seconds), ``bound_by``, ``measured_s`` (median kernel time,
    seconds; None in model-only mode), ``spread``, ``max_rel_err``, ``failure`` (why it was pruned or
    failed: the rule's message, the compile/verify/launch error, or "duplicate of trial N"), ``rule``,
    ``stage``, ``duplicate_of``, ``seeded_by_model``, ``resources`` (ptxas figures when compiled),
    ``worker`` (host:pid), ``device`` (the GPU index it was measured on, among the tuner's devices: 0 in a
    single-GPU run; a simulated device's label with ``--model-only --gpus``; None when no device evaluated
    it, e.g. a pruned trial or a model-only run without ``--gpus``).
    """
    compiled = {k.split(":", 1)[1]: v for k, v in study.user_attrs.items() if k.startswith("compiled:")}
    out = []
    for t in study.get_trials(deepcopy=False):
        ua = t.user_attrs
        failure = ua.get("error") or ua.get("pruned_reason")
        if failure is None and ua.get("duplicate_of") is not None:
            failure = f"duplicate of trial {ua['duplicate_of']} (value reused, not re-measured)"
        out.append({
            "number": t.number,
            "state": t.state.name.lower(),
            "schedule": ua.get("schedule"),
            "schedule_text": describe(ua["schedule"]) if ua.get("schedule") else None,
            "params": dict(t.params),
            "predicted_s": ua.get("predicted_s"),
            "bound_by": ua.get("bound_by"),
            "measured_s": ua.get("time_s") if mode == "measured" else None,
            "spread": ua.get("spread"),
            "max_rel_err": ua.get("max_rel_err"),
            "failure": failure,
            "rule": ua.get("rule"),
            "stage": ua.get("stage"),
            "duplicate_of": ua.get("duplicate_of"),
            "seeded_by_model": bool(ua.get("seeded_by_model", False)),
            "resources": _resources(ua, compiled.get(str(t.number))),
            "worker": ua.get("worker"),
            "device": ua.get("device"),
        })
    return out


def finalist_record(f, mode: str) -> dict:
    """A report row (a ``search.finalists.Finalist``) as JSON: measured figures only in measured mode."""
    return {"trial": f.number, "schedule": f.schedule.to_dict(), "schedule_text": describe(f.schedule),
            "predicted_s": f.predicted_s, "bound_by": f.bound_by,
            "measured_s": f.median_s if mode == "measured" else None,
            "spread": f.spread if mode == "measured" else None,
            "re_predicted_s": f.resources.get("predicted_with_kernel_s") if mode != "measured" else None,
            "resources": {k: v for k, v in f.resources.items() if k != "predicted_with_kernel_s"} or None}


def write_report_json(path: str | Path, header: dict, study, mode: str, finals: list, winner) -> Path:
    """Write the machine-readable report: ``header`` (run facts), the report rows, the winner and every
    trial of the study (:func:`trial_records`). Returns the path."""
    rows = [finalist_record(f, mode) for f in finals]
    doc = {"report_version": REPORT_VERSION, **header, "mode": mode,
           "values_are": "measured kernel times" if mode == "measured" else
           "cost-model PREDICTIONS (model-only: nothing was measured)",
           "winner": None if winner is None else finalist_record(winner, mode),
           "rows": rows, "trials": trial_records(study, mode)}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(doc, indent=1, sort_keys=False, default=str) + "\n")
    return path


def roofline_points(op, target, finals, winner, mode: str) -> list[dict]:
    """Dict points for :func:`tiledsl.roofline_plot`: each report row at its HBM, L2 and shared-memory
    intensity, named by its trial and schedule at the HBM point; the predicted FLOP/s always, the
    measured FLOP/s too in measured mode. Empty when the op does no arithmetic (a transpose)."""
    import tiledsl

    pts: list[dict] = []
    for f in finals:
        rep = tiledsl.explain(op, f.schedule, device=target)
        if not rep.flops:
            continue
        star = "* " if f is winner else ""
        name = f"{star}{'default' if f.number is None else '#' + str(f.number)} {describe(f.schedule)}"
        times = [(f.predicted_s or rep.predicted_s, False)]
        if mode == "measured" and f.median_s:
            times.append((f.median_s, True))
        for t_s, measured in times:
            for lv in ("hbm", "l2", "smem"):
                level = rep.levels.get(lv)
                if level is None or not level.bytes:
                    continue
                label = ""
                if lv == "hbm":
                    label = f"{name} ({'measured' if measured else 'predicted'} {t_s * 1e3:.3f} ms)"
                pts.append({"intensity": level.intensity, "flops_per_s": rep.flops / t_s, "level": lv,
                            "label": label, "measured": measured})
    return pts


def write_roofline(path: str | Path, op, target, finals, winner, mode: str, op_text: str) -> str:
    """Draw the report's rows on ``target``'s roofline into ``path``; returns one line for the report."""
    import tiledsl

    try:
        pts = roofline_points(op, target, finals, winner, mode)
        if not pts:
            return f"{Path(path).name}: not written (this op does no floating-point arithmetic to place on a roofline)"
        what = ("measured (filled) and predicted (hollow)" if mode == "measured" else
                "PREDICTED by the cost model (model-only: nothing measured)")
        tiledsl.roofline_plot(pts, path, device=target, title=f"{op_text} on {target.name}: the report's rows, {what}")
    except Exception as exc:  # a plot is never worth failing the run for
        return f"{Path(path).name}: not written ({type(exc).__name__}: {exc})"
    return f"{path}: written ({len(finals)} schedules, {'measured' if mode == 'measured' else 'predicted'})"

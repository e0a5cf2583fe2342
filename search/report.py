"""The end-of-search report: top 5, where the time went, how well the model ranked, what mattered.

:func:`render` turns one :class:`ReportInputs` (every fact of the run the report shows) into the printed
text; :func:`json_header` gives the same facts to ``report.json`` (``search.outputs``). The helpers below
(Spearman's rho and the model's top 10 from :mod:`tiledsl.costmodel.ranking`, the winner's tie-break, tables) have
no other inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tiledsl.costmodel.ranking import model_top, spearman  # one definition for the tuner and the fit

from .families import op_text, vendor_name
from .finalists import MODEL_RESOLUTION, Finalist, owned_complete
from .objective import roofline_bound_s, roofs
from .observers import Counts, TimeSplit
from .space import describe
from .strategy import MODEL_PRUNE_RULE


def pick_winner(cands: Sequence[dict], tie_rel: float = 0.01) -> tuple[dict, list[dict]]:
    """The winner of the final re-measurement, with a deterministic tie-break.

    ``cands`` carry ``median_s``, ``spread`` (relative) and ``number`` (the trial). Every candidate
    whose median lies within max(``tie_rel``, the fastest one's spread) of the fastest is a
    statistical tie; among the tied, the lowest trial number wins, so re-measuring the same study
    picks the same winner whatever the noise among the tied.

    Returns:
        (winner, the tied candidates in ascending median order).
    """
    if not cands:
        raise ValueError("no candidates to pick a winner from")
    by_time = sorted(cands, key=lambda c: (c["median_s"], c["number"]))
    fastest = by_time[0]
    band = fastest["median_s"] * (1 + max(tie_rel, fastest.get("spread") or 0.0))
    tied = [c for c in by_time if c["median_s"] <= band]
    return min(tied, key=lambda c: c["number"]), tied


def table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    """A plain-text table with aligned columns."""
    cols = [list(map(str, col)) for col in zip(header, *rows, strict=True)]
    widths = [max(len(v) for v in col) for col in cols]
    line = lambda r: "  ".join(str(v).rjust(w) if i else str(v).ljust(w)  # noqa: E731
                               for i, (v, w) in enumerate(zip(r, widths, strict=True)))
    out = [line(header), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    return "\n".join(out)


def importances(study) -> tuple[dict[str, float] | None, str]:
    """Optuna's parameter importances (fANOVA) over the study's complete trials, or why not."""
    try:
        import optuna

        return optuna.importance.get_param_importances(study), "fANOVA (optuna.importance)"
    except Exception as exc:
        return None, f"n/a ({type(exc).__name__}: {exc})"


def fmt_ms(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1e3:.3f}"


def fmt_pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


# ---------------------------------------------------------------- the report of one run

# docs/costmodel.md: median measured / predicted time of the cost model (GEMM: the 2026-12-03 fit of the FMA
# terms, register weights and spill slack, held out one study at a time; reduce: the 2026-11-29 fit)
MODEL_BIAS = {"gemm": "median measured/predicted = 0.75-1.25 for float32 GEMM held out (three 200-trial H200 studies "
                      "and 110 random 4096^3 schedules): the fastest kernels are predicted up to 1.34x too slow, "
                      "skinny shapes about 1.25x too fast",
              "gemm gemv": "the GEMV kernel's streaming model: a row-major B's absolute bias not fitted (ranking "
                           "only), its first pick 1.1-2.8 % slower than the measured best over the four H200 sweeps it "
                           "was fitted on, 8-18 % on three others (groups of columns, K slice depth, 2-16 rows x "
                           "torch's Linear): measure rather than trust --model-only here. A column-major B (x @ W.T) "
                           "has absolute times fitted (2026-12-04, in-sample): measured/predicted 1.02 over 72 products "
                           "of 1-16 rows and >= 64 MiB (0.76-1.39), 0.88-0.96 at 1-8 rows, 1.24-1.26 at 12-16",
              "transpose": "median measured/predicted = 1.01 over 22 transposes of 16384^2 (two constants chosen "
                           "on them, in-sample), 1.00 over the same 22 at 4096^2 (held out), 0.96 over 17 shapes' "
                           "defaults",
              "reduce": "median measured/predicted = 1.1 for reductions (60 schedules of a float32 sum)"}


def _bias_key(r) -> str:
    """:data:`MODEL_BIAS`'s key for a report: the family, or "gemm gemv" for a search of the GEMV kernel's space."""
    finals = [f for f in r.finals if getattr(f, "schedule", None) is not None]
    if r.family == "gemm" and finals and all(getattr(f.schedule, "kernel", "tiled") == "gemv" for f in finals):
        return "gemm gemv"
    return r.family


@dataclass(frozen=True)
class ReportInputs:
    """Every fact of one run that the report shows.

    Attributes:
        study: the Optuna study (its trials: counts, ranking, importances, rule counts).
        family: op family name; ``op``: the op; ``target``: the device (its model for ``--model-only``).
        mode: "measured" or "model-only".
        model_label: what predicted (``search.objective.Model.label``).
        finals: the report's rows (:class:`search.finalists.Finalist`), in order; ``winner``: one of them or None.
        tied: the candidates statistically tied with the winner (``pick_winner``'s second value).
        vendor_s: the vendor library's time in this run (seconds; None: not measured).
        split: where the time went; ``search_s``: wall seconds of the search phase.
        n_before: trials the study had before this run; ``counts``: how this run's trials ended.
        work, unit, scale: throughput = work / seconds / scale, in ``unit`` (e.g. FLOP, TFLOP/s, 1e12).
        model_prune: ``--model-prune`` factor (None: off; the counts then leave model pruning out).
        interrupted: Ctrl-C stopped the run (no final re-measurement, compile or export).
        final_device: the device of the final re-measurement when several were used, else None.
        calibration: the calibration file the model-only ceilings came from, or None (datasheet figures).
        roofline: the line saying where roofline.png went (or why not).
        finalist_info: model-only finalist facts (``compiled``, ``clean``, ``extra``, ``skipped``, ``fallback``).
    """

    study: object
    family: str
    op: object
    target: object
    mode: str
    model_label: str
    finals: list
    winner: Finalist | None
    tied: list
    vendor_s: float | None
    split: TimeSplit
    search_s: float
    n_before: int
    counts: Counts
    work: float
    unit: str
    scale: float
    model_prune: float | None = None
    interrupted: bool = False
    final_device: int | None = None
    calibration: str | None = None
    roofline: str | None = None
    finalist_info: dict = field(default_factory=dict)


def resources_text(f: Finalist) -> str:
    """ptxas registers/shared memory/spill bytes of a row ("-" where unknown)."""
    return "/".join(str(f.resources.get(k, "-")) for k in ("registers", "smem_bytes", "spill_bytes"))


def _counts_line(r: ReportInputs) -> str:
    c = r.counts
    model = f", pruned by the cost model {c.model_pruned}" if r.model_prune is not None else ""
    return (f"trials this run: {c.total()} (complete {c.complete}, pruned by rules {c.pruned}{model}, failed "
            f"{c.fail}, duplicates not re-measured {c.dup}; --trials counts all but the pruned); "
            f"study total {len(r.study.trials)} (earlier {r.n_before})")


def _measured_table(r: ReportInputs, bound_s: float) -> tuple[str, list, list]:
    rows = []
    for i, f in enumerate(r.finals):
        vendor_pct = None if r.vendor_s is None else r.vendor_s / f.median_s
        rows.append([f"{i + 1}{'*' if r.winner is f else ''}", str(f.number), describe(f.schedule),
                     f"{f.median_s * 1e3:.3f}", f"±{100 * f.spread / 2:.1f}%", f"{r.work / f.median_s / r.scale:.2f}",
                     fmt_pct(vendor_pct), fmt_pct(bound_s / f.median_s), fmt_ms(f.predicted_s),
                     str(f.bound_by), resources_text(f)])
    head = ["#", "trial", "schedule", "measured ms", "spread", f"measured {r.unit}", "% vendor", "% roofline",
            "predicted ms", "bound by", "regs/smem/spill"]
    on = "" if r.final_device is None else f", all on device {r.final_device}"
    title = (f"top by final interleaved re-measurement (median of 7 rounds{on}; * = winner); predicted ms: "
             "the cost model's prediction before compiling")
    return title, rows, head


def _model_only_table(r: ReportInputs, bound_s: float) -> tuple[str, list, list]:
    info, unit = r.finalist_info, r.unit
    rows = []
    for i, f in enumerate(r.finals):
        again = f.resources.get("predicted_with_kernel_s") if "registers" in f.resources else None
        rows.append([f"{i + 1}{'*' if r.winner is f else ''}", "default" if f.number is None else str(f.number),
                     describe(f.schedule), fmt_ms(f.predicted_s),
                     "n/a" if not f.predicted_s else f"{r.work / f.predicted_s / r.scale:.2f}",
                     "n/a" if not f.predicted_s else fmt_pct(bound_s / f.predicted_s),
                     fmt_ms(again), str(f.bound_by), resources_text(f)])
    head = ["#", "trial", "schedule", "predicted ms", f"predicted {unit}", "% roofline",
            "re-predicted ms (compiled)", "bound by", "regs/smem/spill"]
    n_rows = len(r.finals) - (info.get("fallback") is not None)
    if info.get("fallback"):
        how = f"* = winner: the library default (last row), because {info['fallback']}"
    elif info.get("default_kept") is not None:
        how = (f"* = winner: the library default (trial {info['default_kept']}), predicted within "
               f"{MODEL_RESOLUTION:.0%} of the lowest re-predicted ms among the compiled ones without register spills")
    else:
        how = "* = winner: the compiled one without register spills with the lowest re-predicted ms"
    title = (f"best predicted schedule of each tile structure ({n_rows} rows, by predicted ms); "
             f"{info.get('compiled', 0)} compiled for {r.target.arch} ({info.get('clean', 0)} without register "
             "spills" + (f"; {info['extra']} of them beyond --compile-top, by predicted rank, looking for one "
                         f"without spills, {info['skipped']} skipped as bound to spill by their register "
                         "estimate" if info.get("extra") or info.get("skipped") else "") + "); " + how + "\n"
             "  predicted ms: the cost model from the schedule alone (what the search ranked by; predicted "
             f"{unit} and % roofline come from it); re-predicted ms (compiled): the same model given the "
             "compiled kernel's registers and spills (n/a: not compiled); regs/smem/spill: ptxas")
    return title, rows, head


def _ranking_lines(r: ReportInputs) -> list[str]:
    if r.mode != "measured":
        return ["cost model ranking vs measurement: n/a (model-only: nothing measured)"]
    owned = owned_complete(r.study)
    lines = []
    for key, label in (("predicted_s", "cost model ranking"),
                       ("predicted_compiled_s", "cost model ranking given the compiled kernels (ptxas registers)")):
        rated = [t for t in owned if t.user_attrs.get(key)]
        if key == "predicted_compiled_s" and not rated:  # studies run before the tuner stored it
            continue
        rho = spearman([t.user_attrs[key] for t in rated], [t.value for t in rated])
        lines.append(f"{label}: Spearman rho(predicted, measured) = {'n/a' if rho is None else f'{rho:.3f}'} "
                     f"over {len(rated)} measured trials")
        if r.winner is not None and rated:
            top10 = model_top([t.user_attrs[key] for t in rated], [t.number for t in rated])
            lines.append(f"  measured best (trial {r.winner.number}) in the model's top 10 of the measured trials: "
                         f"{'yes' if r.winner.number in top10 else 'no'} (model top 10: {top10})")
    return lines


def rule_counts(study, since: int = 0) -> dict[str, int]:
    """How many of the study's trials numbered ``since`` or later each rule pruned (``duplicate`` and
    ``model_prune`` included), most first; ``since`` = the trials the study had before a run counts that run's
    (and, in a study shared by several processes, the other processes' trials of the same time)."""
    reasons: dict[str, int] = {}
    for t in study.get_trials(deepcopy=False):
        if t.number < since:
            continue
        rule = t.user_attrs.get("rule")
        if rule:
            reasons[str(rule)] = reasons.get(str(rule), 0) + 1
    return dict(sorted(reasons.items(), key=lambda x: -x[1]))


def render(r: ReportInputs) -> str:
    """The printed report of one run (also written to report.txt)."""
    lines = ["", f"==== search.tune report: {r.family} {op_text(r.op)} on {r.target.name} ({r.target.arch}), "
                 f"{r.mode} ===="]
    if r.interrupted:
        lines.append("INTERRUPTED (Ctrl-C): the trials evaluated before it; no final re-measurement, compile or export")
    lines.append(_counts_line(r))
    bound_s, bound_level = roofline_bound_s(r.op, r.target)
    (peak, peak_name, peak_src), (hbm, hbm_src) = roofs(r.op, r.target)
    lines.append(f"roofline bound: {bound_s * 1e3:.3f} ms ({bound_level}-bound: max(FLOP / peak {peak_name} "
                 f"{peak / 1e12:.1f} TFLOP/s [{peak_src}], compulsory bytes / HBM {hbm / 1e12:.2f} TB/s "
                 f"[{hbm_src}]))")
    if r.mode == "measured":
        vtxt = "n/a" if r.vendor_s is None else f"{r.vendor_s * 1e3:.3f} ms = {r.work / r.vendor_s / r.scale:.2f} {r.unit}"
        lines.append(f"vendor library measured in this run ({vendor_name(r.family, r.op)}): {vtxt}")
        title, rows, head = _measured_table(r, bound_s)
    else:
        cal = r.calibration
        lines.append(f"NOTE: every time and {r.unit} below is the cost model's PREDICTION ({r.model_label}), not a "
                     f"measurement: ceilings " + (f"calibrated by tiledsl.calibrate ({cal})" if cal else
                                                  f"from the known-GPU table, uncalibrated ({r.target.source})")
                     + f"; the model's measured bias on the H200: {MODEL_BIAS.get(_bias_key(r), 'not fitted')} "
                       "(docs/costmodel.md)")
        title, rows, head = _model_only_table(r, bound_s)
    lines += ["", title, table(rows, head) if rows else "(no complete trial)"]
    if len(r.tied) > 1:
        lines.append(f"statistical tie among trials {[c['number'] for c in r.tied]} (within max(1%, spread)); "
                     "the lowest trial number wins, deterministically")
    lines.append("")
    s = r.split
    lines.append(f"time: search {r.search_s:.1f} s wall; compile {s.compile_s:.2f} s for {s.compiles} "
                 f"kernels ({'CPU, summed over the pool' if r.mode == 'measured' else 'the finalists and the export'}"
                 f"; a kernel already in the compile cache costs ~0 s), verify {s.verify_s:.1f} s, "
                 f"measure {s.measure_s:.1f} s, cost model {s.predict_s:.2f} s")
    lines += _ranking_lines(r)
    imp, how = importances(r.study)
    if imp:
        lines.append("knob importances (" + how + ", objective = " + ("measured" if r.mode == "measured"
                     else "predicted") + " time): " + ", ".join(f"{k} {v:.2f}" for k, v in imp.items()))
    else:
        lines.append(f"knob importances: {how}")
    reasons, in_study = rule_counts(r.study, since=r.n_before), rule_counts(r.study)
    if reasons:
        lines.append("pruned by rule, this run: " + ", ".join(f"{k} {v}" for k, v in reasons.items()))
    if r.n_before and in_study != reasons:  # earlier runs pruned some too
        lines.append(f"pruned by rule, the whole study ({len(r.study.trials)} trials over every run): "
                     + ", ".join(f"{k} {v}" for k, v in in_study.items()))
    if r.model_prune is not None:
        lines.append(f"model pruning (--model-prune {r.model_prune:g}): {r.counts.model_pruned} sampled schedules "
                     f"of this run, predicted at more than {r.model_prune:g}x the best prediction so far, were not "
                     f"compiled or measured ({in_study.get(MODEL_PRUNE_RULE, 0)} in the study)")
    if r.roofline:
        lines.append(r.roofline)
    return "\n".join(lines)


def json_header(r: ReportInputs, command: str, storage: str, study_name: str, date: str, devices: Sequence[int],
                files: Sequence[str]) -> dict:
    """The run facts at the top of ``report.json`` (``search.outputs.write_report_json``)."""
    counts = r.counts.as_dict(with_model_pruned=r.model_prune is not None)
    header = {"tool": "python -m search.tune", "command": command, "date": date, "study": study_name,
              "storage": storage, "family": r.family, "op": r.op.to_dict(), "op_text": op_text(r.op),
              "device": r.target.name, "arch": r.target.arch, "cost_model": r.model_label,
              "vendor": {"name": vendor_name(r.family, r.op), "measured_s": r.vendor_s},
              "roofline_bound_s": roofline_bound_s(r.op, r.target)[0],
              "devices": list(devices), "counts_this_run": counts,
              "time_s": {"search_wall": r.search_s, **r.split.as_dict()},
              "files": [str(p) for p in files]}
    if r.model_prune is not None:
        header["model_prune"] = r.model_prune
    return header

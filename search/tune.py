"""``python -m search.tune``: find the best schedule for one op on one GPU, and take the kernel away.

Examples::

    python -m search.tune gemm --m 4096 --n 4096 --k 4096 --dtype float32 --trials 200 --export best/
    python -m search.tune gemm --m 4096 --n 4096 --k 4096 --gpus all            # every GPU of the node
    python -m search.tune gemm --m 4096 --n 4096 --k 4096 --model-only          # no GPU: cost model only
    python -m search.tune gemm --m 4096 --n 4096 --k 4096 --lookup             # what schedule=None picks
    python -m search.tune reduce --shape 16384x16384 --axis 1 --op sum --trials 100
    python -m search.tune transpose --shape 16384x16384 --dtype float32 --export best/

How one run goes (see ``docs/search.md``):

1. an Optuna study (RDB storage, default ``sqlite:///tiledsl-tune.db``) is created or resumed; the library
   default (asked first, until it is measured) and the cost model's top predicted schedules are enqueued
   (``enqueue_trial``, skipped when already there);
2. each asked point becomes a schedule through the schedule's own rule table: a point that breaks a
   rule is told PRUNED with the rule's name and message, never compiled; with ``--model-prune FACTOR`` a
   schedule predicted more than FACTOR × the best prediction so far is told PRUNED too; a schedule that
   another trial already owns is not re-measured (its value is reused);
3. measured mode: candidates compile in a process pool while a GPU worker process verifies (fresh
   random data, NaN-poisoned output, vs. the vendor library) and times the previous one; CUDA errors
   restart the worker and fail only that trial. ``--gpus all|0,1,...``: one GPU worker process per device
   (pinned with ``CUDA_VISIBLE_DEVICES``), the oldest compiled candidate going to the first idle one; the
   trial records its ``device``. ``--model-only``: the value is the cost model's
   predicted time and only the few best are compiled (registers / shared memory / spills);
4. the top 5 are re-measured interleaved with the vendor library, on the first listed device; the winner is picked with a
   deterministic tie-break, the report is printed, and the results folder (``--export DIR``, default
   ``tune-out/<study name>/``) receives kernel.cu + schedule.json, report.json (every trial), report.txt
   and roofline.png (``search.outputs``); a measured winner is stored where ``schedule=None`` finds it.

This module is the command line and :func:`run`, which wires the parts, one role each:
:mod:`search.strategy` (sampler, seeds, model pruning), :mod:`search.trials` (asking, screening and
telling trials), :mod:`search.runner` (compile pool and device workers), :mod:`search.observers` (progress
bars, counts, time split), :mod:`search.finalists` (final re-measurement or compile, the winner),
:mod:`search.report` (the report), :mod:`search.export` and :mod:`search.outputs` (the results folder).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import socket
import sys
import time
from dataclasses import dataclass, field

from . import outputs
from . import report as R
from .config import DEFAULT_DEVICE, DEFAULT_STORAGE, TuneConfig
from .devices import SIMULATED_ENV, GpuRequest, cuda_device_names, devices_present, parse_gpus, resolve
from .export import export_winner
from .families import (
    LAYOUTS,
    SEARCH_FAMILIES,
    finite_above,
    gemm_op,
    op_text,
    positive_int,
    positive_seconds,
    rows_instead,
    rows_unused,
    vendor_name,
)
from .families import get as get_family
from .finalists import Finalist, model_only_finalists, remeasured_finalists
from .interrupt import EXIT_INTERRUPTED, EXIT_WITH_PARENT_ENV, DeferredInterrupt, exit_with_parent
from .measure import GpuWorker
from .model_worker import ModelWorker
from .objective import load_model
from .observers import Progress, SearchObserver, TimeSplit
from .runner import Budget, Runner
from .space import describe, gemv_dmma_space, searches_dmma, tune_space
from .storage import (
    DEFAULT_STALE_AFTER_S,
    Heartbeat,
    expire_stale,
    heartbeat_interval,
    make_storage,
    mask,
    mask_text,
    storage_failure,
    storage_problem,
)
from .strategy import SAMPLERS, ModelPruner, make_sampler, seed_study
from .trials import TrialBook

__all__ = ["LAYOUTS", "SAMPLERS", "Finalist", "TuneConfig", "TuneResult", "build_parser", "config_from_args",
           "default_study_name", "gemm_op", "main", "make_storage", "run", "storage_problem",
           "vendor_name"]

DEFAULT_OUT = "tune-out"  # the results folder without --export: tune-out/<study name>/


def default_study_name(family: str, op, device_tag: str, model_only: bool, mma: str = "auto") -> str:
    """``<family>-<op>-<device>[-dmma][-model]``; the op part comes from the family's table row, e.g.
    ``gemm-4096x4096x4096-float32-NN-H200``, ``reduce-16384x16384-sum-axis1-float32-H200``,
    ``transpose-16384x16384-float32-H200``; ``-dmma`` for ``--mma dmma``'s space."""
    return (f"{family}-{get_family(family).study_shape(op)}-{device_tag}" + ("" if mma == "auto" else f"-{mma}")
            + ("-model" if model_only else ""))


# ---------------------------------------------------------------- the run


@dataclass
class TuneResult:
    """What :func:`run` returns (the report is printed as well)."""

    study_name: str
    mode: str
    best_schedule: object | None
    best_time_s: float | None
    vendor_time_s: float | None
    trials_this_run: int
    report: str
    exported: list = field(default_factory=list)
    results_dir: str | None = None
    interrupted: bool = False


def _jobs(text: str) -> int:
    """An argparse type: compile processes, 1 to 4 per CPU (each holds NVRTC and a Python interpreter)."""
    value = positive_int(text)
    limit = 4 * (os.cpu_count() or 1)
    if value > limit:
        raise argparse.ArgumentTypeError(f"{value} compile processes is more than 4 per CPU ({limit} here)")
    return value


def _check_devices(cfg: TuneConfig, target) -> None:
    """Measured runs on several GPUs: every listed device is the GPU the study is named for.

    Raises:
        SystemExit: a listed device is another GPU model (one study measures one kind of GPU).
    """
    if cfg.model_only or cfg.gpus is None:
        return
    names = cuda_device_names()
    other = [(d, names[d]) for d in cfg.gpus if d < len(names) and names[d] != target.name]
    if other:
        raise SystemExit(f"--gpus {','.join(map(str, cfg.gpus))}: device {other[0][0]} is a {other[0][1]}, not a "
                         f"{target.name} like device 0; one study measures one kind of GPU (run one study per kind)")


def _check_mma(cfg: TuneConfig, op, target) -> None:
    """``--mma dmma``: the FP64 tensor-core GEMV kernel runs ``op`` on ``target`` (sm_90), checked before the search.

    Raises:
        SystemExit: it does not (``tiledsl.gemm.family.gemv_dmma_refusal``: the rows, or the rule, device included).
    """
    from tiledsl.gemm.family import gemv_dmma_refusal

    if cfg.mma == "dmma" and (why := gemv_dmma_refusal(op, target)):
        raise SystemExit(f"--mma dmma on {target.name} ({target.arch}): {why}")


def _target(cfg: TuneConfig, out) -> tuple[object, str | None]:
    """The device to tune for and the calibration file its figures came from (``--model-only``), or None.
    Without a GPU, ``cfg.model_only`` is set (and said)."""
    import tiledsl
    from tiledsl.registry import device_tag

    if not cfg.model_only and not tiledsl.gpu_available():
        out(f"no CUDA GPU available here: running as --model-only for {cfg.device or DEFAULT_DEVICE} "
            "(candidates ranked by the cost model and compiled for its arch; nothing is measured)")
        cfg.model_only = True
    if cfg.model_only:
        from tiledsl.calibrate import cached_figures, calibration_path, load_calibration

        target = tiledsl.Target.known(cfg.device or DEFAULT_DEVICE)
        if cached_figures(target) is not None:  # verified figures tiledsl.calibrate measured on this device
            return load_calibration(target), str(calibration_path(target))
        return target, None
    target = tiledsl.Target.current()
    if cfg.device and device_tag(cfg.device) not in device_tag(target.name):
        out(f"note: --device {cfg.device} ignored: measuring on the GPU present, {target.name}")
    return target, None


def _open_study(cfg: TuneConfig, name: str, storage, space, target, model, mode: str, mma: str = "auto"):
    """Create or resume the study ``name``; the study, refused when it was made for another op, device, mode or
    space (``mma``: "dmma" where it searches the FP64 tensor-core GEMV space, :func:`search.space.tune_space`).

    Raises:
        SystemExit: the study exists with a different op, device or mode.
    """
    import optuna

    try:
        study = optuna.create_study(storage=storage, study_name=name, direction="minimize",
                                    sampler=make_sampler(cfg.sampler, cfg.seed, space), load_if_exists=True)
        expire_stale(study, cfg.stale_after_s)  # trials of workers that died (no heartbeat) become FAIL
        meta = {"family": cfg.family, "op": cfg.op.to_dict(), "device": target.name, "arch": target.arch,
                "mode": mode, **({} if mma == "auto" else {"mma": mma})}  # one space per study
        old = study.user_attrs.get("meta")
        if old is None:
            study.set_user_attr("meta", meta)
            study.set_user_attr("model", model.label)
    except optuna.exceptions.StorageInternalError as exc:  # locked past its timeout, or a damaged database
        raise SystemExit(f"--storage {mask(cfg.storage)}: the study cannot be opened: {storage_failure(exc)}") from exc
    if old is not None and old != meta:
        raise SystemExit(f"study {name!r} in {mask(cfg.storage)} was made for {old}, not {meta}; "
                         "pass another --study-name")
    return study


def run(cfg: TuneConfig, out=print) -> TuneResult:
    """Run (or resume) one study and print its report.

    Ctrl-C (SIGINT) stops asking for trials: the step in hand finishes, trials not evaluated are told
    FAIL, the report of what was measured is printed (no final re-measurement, no export) and the
    result has ``interrupted=True`` (``main`` exits 130). A second Ctrl-C raises KeyboardInterrupt.
    RUNNING trials of workers that stopped sending heartbeats for ``cfg.stale_after_s`` are failed.

    Raises:
        SystemExit: the study exists with a different op, device or mode.
        ValueError: ``cfg.model_prune`` is not None and not a finite number > 1.
    """
    with DeferredInterrupt() as intr:
        return _run(cfg, out, intr)


def _run(cfg: TuneConfig, out, intr: DeferredInterrupt) -> TuneResult:
    import optuna

    from tiledsl.registry import device_tag
    from tiledsl.spec import refuse_empty

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    t_run = time.perf_counter()
    op = cfg.op
    refuse_empty(op, "tune")  # SpecError: tiledsl answers an empty op without a kernel
    pruner = ModelPruner(cfg.model_prune)
    target, calibration = _target(cfg, out)
    # the space's kind, also where a plain tune searches the FP64 space (schedule=None's kernel on this device): its
    # studies kept apart from the FMA space's
    mma = "dmma" if searches_dmma(cfg.family, op, target, cfg.mma) else cfg.mma
    space = tune_space(cfg.family, op, target, mma)
    _check_mma(cfg, op, target)
    mode = "model-only" if cfg.model_only else "measured"
    _check_devices(cfg, target)
    unused = rows_unused(cfg.family, op, target)
    if unused is not None:  # --as-rows on a product schedule=None computes as given: say it before the search
        out(f"warning: {unused}; tuning it anyway (its record will not be stored for schedule=None)")
    model = load_model()
    name = cfg.study_name or default_study_name(cfg.family, op, device_tag(target.name), cfg.model_only, mma)
    storage = make_storage(cfg.storage, cfg.stale_after_s)
    study = _open_study(cfg, name, storage, space, target, model, mode, mma)
    n_before = len(study.trials)
    out(f"study {name!r} in {mask(cfg.storage)}: {n_before} earlier trials"
        + (" (resuming)" if n_before else "") + f"; {mode} on {target.name} ({target.arch}); "
        f"sampler {cfg.sampler}; cost model: {model.label}"
        + (f"; model pruning: factor {pruner.factor:g}" if pruner.enabled else ""))
    default_trial = seed_study(study, space, model, op, target, cfg.seed_top)
    pruner.observe_study(study)

    # ---- search
    split = TimeSplit()
    work, _, unit, scale = space.work(op)
    observer = SearchObserver(Progress(cfg.trials, cfg.progress, f"search ({mode})", "trial"),
                              "measured" if mode == "measured" else "predicted", work, unit, scale)
    runner = Runner.start(cfg.family, op, target, cfg.model_only, cfg.gpus, cfg.jobs, out,
                          gpu_worker=GpuWorker, model_worker=ModelWorker)
    vendor_s = None if cfg.model_only else _vendor(runner, cfg, op, work, unit, scale, out)
    worker_id = f"{socket.gethostname()}:{os.getpid()}"
    book = TrialBook(study, space, model, op, target, worker_id, observer, pruner, split,
                     Heartbeat(storage, heartbeat_interval(cfg.stale_after_s)), cfg.stale_after_s,
                     predict_here=cfg.model_only or pruner.enabled, model_only=cfg.model_only, out=out,
                     first=default_trial)
    deadline = None if cfg.timeout_s is None else time.monotonic() + cfg.timeout_s
    runner.search(book, Budget(cfg.trials, 20 * cfg.trials, deadline), intr)
    if intr.requested:
        out("interrupted: the trials evaluated so far are in the study; re-run the same command to resume")
    search_s = time.perf_counter() - t_run

    # ---- finalists, export, report
    finals, winner, tied, info, vendor_final = _finalists(cfg, study, space, target, model, op, runner, split,
                                                          not intr.requested, out)
    vendor_s = vendor_final if vendor_final is not None else vendor_s
    final_device = runner.devices[0] if not cfg.model_only and len(runner.devices) > 1 else None
    if winner is not None:
        final = {"winner_trial": winner.number, "median_s": winner.median_s, "vendor_s": vendor_s, "date": _now()}
        if not cfg.model_only and cfg.gpus is not None:
            final["device"] = runner.devices[0]  # where the finalists were re-measured, together
        study.set_user_attr(f"final:{worker_id}", final)
    results = cfg.export or (os.path.join(DEFAULT_OUT, name) if cfg.export_default else None)
    exported, export_lines = [], []
    steps = Progress(3, cfg.progress, "export, roofline, report", "step")
    if winner is not None and results and intr.requested:
        export_lines.append(f"kernel not exported to {results}: the run was interrupted (re-run the same command "
                            "to finish it)")
    elif winner is not None and results:
        t0 = time.perf_counter()
        exported = export_winner(cfg, results, op, target, winner, vendor_s, mode, name, model.label, _now(),
                                 export_lines.append)
        split.compiled(time.perf_counter() - t0)  # the winner again (a cache hit when compiled above)
    steps.update(1)
    roofline = ("roofline.png: not written (no results folder; pass --export DIR)" if not results else
                outputs.write_roofline(os.path.join(results, "roofline.png"), op, target, finals, winner,
                                       mode, op_text(op)))
    steps.update(1)
    inputs = R.ReportInputs(
        study=study, family=cfg.family, op=op, target=target, mode=mode, model_label=model.label, finals=finals,
        winner=winner, tied=tied, vendor_s=vendor_s, split=split, search_s=search_s, n_before=n_before,
        counts=observer.counts, work=work, unit=unit, scale=scale, model_prune=pruner.factor,
        interrupted=intr.requested, final_device=final_device, calibration=calibration, roofline=roofline,
        finalist_info=info)
    text = R.render(inputs)
    steps.update(1)
    steps.close()
    out(text)
    for line in export_lines:
        out(line)
    _write_results(cfg, inputs, name, results, text, runner.devices, exported, out)
    return TuneResult(name, mode, winner.schedule if winner else None, winner.median_s if winner else None,
                      vendor_s, book.asked, text, exported, results, interrupted=intr.requested)


def _finalists(cfg: TuneConfig, study, space, target, model, op, runner: Runner, split: TimeSplit, complete: bool,
               out) -> tuple[list, Finalist | None, list, dict, float | None]:
    """The report's rows and the winner: measured, the top re-measured with the vendor library on the first
    device (then the device workers stop); model-only, the best predicted compiled. ``complete`` False
    (Ctrl-C): nothing is re-measured or compiled.

    Returns:
        (rows, winner or None, candidates tied with it, model-only finalist facts, the vendor library's time
        from the final re-measurement or None).
    """
    if cfg.model_only:
        bar = Progress(0, cfg.progress, f"compile finalists for {target.arch}", "kernel")
        try:
            finals, winner, info = model_only_finalists(study, space, target, cfg, model, op, bar.wrap(out), bar,
                                                        compile_them=complete)
        finally:
            bar.close()
        split.compiled(info["compile_s"], info["compiled"])
        return finals, winner, [], info, None
    finals, vendor_s = remeasured_finalists(study, space, target, cfg, runner.final_worker, op, out,
                                            remeasure=complete)
    runner.close()
    if not finals:
        return finals, None, [], {}, vendor_s
    w, tied = R.pick_winner([{"number": f.number, "median_s": f.median_s, "spread": f.spread, "f": f}
                             for f in finals])
    return finals, w["f"], tied, {}, vendor_s


def _vendor(runner: Runner, cfg: TuneConfig, op, work: float, unit: str, scale: float, out) -> float | None:
    """The vendor library's time on the first device (seconds; None when its timing failed, which is said)."""
    v = runner.vendor()
    vendor_s = v["median_ms"] / 1e3 if v.get("ok") else None
    if vendor_s:
        out(f"vendor library ({vendor_name(cfg.family, op)}): {vendor_s * 1e3:.3f} ms = "
            f"{work / vendor_s / scale:.2f} {unit}")
    else:
        out(f"vendor library timing failed: {v.get('error')}")
    return vendor_s


def _write_results(cfg: TuneConfig, inputs: R.ReportInputs, name: str, results: str | None, text: str,
                   devices, exported: list, out) -> None:
    """report.json (into the results folder and ``--report-json``) and report.txt; say where they went."""
    json_paths = ([os.path.join(results, "report.json")] if results else []) + ([cfg.report_json] if cfg.report_json else [])
    if json_paths:
        header = R.json_header(inputs, mask_text(cfg.command), mask(cfg.storage), name, _now(), devices, exported)
        for path in json_paths:
            outputs.write_report_json(path, header, inputs.study, inputs.mode, inputs.finals, inputs.winner)
    if results:
        os.makedirs(results, exist_ok=True)
        with open(os.path.join(results, "report.txt"), "w") as f:
            f.write(text.lstrip("\n") + "\n")
        names = sorted(os.listdir(results))
        out(f"results in {results}{os.sep}: {', '.join(names)}"
            + (f"; JSON report also at {cfg.report_json}" if cfg.report_json else ""))
    elif cfg.report_json:
        out(f"JSON report: {cfg.report_json}")


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------- command line


def build_parser() -> argparse.ArgumentParser:
    """The ``search.tune`` argument parser (sub-commands per op family present in tiledsl)."""
    p = argparse.ArgumentParser(
        prog="python -m search.tune",
        description="Find the best tiledsl schedule for one op on one GPU with Optuna: sample schedules, prune "
                    "rule violations, compile in parallel, verify and time on the GPU, report, export the kernel.",
        epilog="Examples:\n"
               + "".join(f"  {f.example}\n" for f in SEARCH_FAMILIES.values())
               + "  python -m search.tune gemm --m 4096 --n 4096 --k 4096 --model-only   # no GPU: cost model only\n"
               "Re-running the same command resumes the study (same --storage and --study-name); several "
               "processes given the same --storage and --study-name share one study.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="family", required=True, metavar="OP", help="op family to tune")
    subparsers: dict[str, argparse.ArgumentParser] = {}
    for fam in SEARCH_FAMILIES.values():
        g = sub.add_parser(fam.name, help=fam.help, formatter_class=HelpFormatter,
                           description=fam.description, epilog=f"Example: {fam.example}")
        fam.add_arguments(g)
        _common(g)
        subparsers[fam.name] = g
    p.set_defaults(_subparsers=subparsers)
    return p


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """``(default: X)`` once per flag: never on required flags, flags whose default is None or False, or
    flags whose help already states the default."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (action.required or action.default is None or action.default is False
                or action.default == argparse.SUPPRESS
                or "default" in text.lower() or not action.option_strings):
            return text
        return super()._get_help_string(action)


def _device(text: str) -> str:
    """``--device``: a name of ``tiledsl.Target.known``'s table (its error lists the known names)."""
    import tiledsl

    try:
        tiledsl.Target.known(text)
    except tiledsl.TiledslError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _nonneg_int(text: str) -> int:
    v = _int(text)
    if v < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be an integer >= 0")
    return v


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


SEED_MAX = 2**32 - 1  # numpy's RandomState, which Optuna's samplers seed, takes 0 .. 2**32 - 1


def _seed(text: str) -> int:
    v = _int(text)
    if not 0 <= v <= SEED_MAX:
        raise argparse.ArgumentTypeError(f"{text!r} must be an integer from 0 to {SEED_MAX}")
    return v


def _prune_factor(text: str) -> float:
    """``--model-prune``: a finite number > 1."""
    return finite_above(text, 1, "a number", " (a factor of the best prediction so far)")


def _common(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--trials", type=positive_int, default=200,
                    help="candidates this run evaluates (measured, or predicted with --model-only; a duplicate counts, "
                         "reusing the earlier value); points pruned by a rule are recorded in the study too but not "
                         "counted (at most 20x --trials points are sampled)")
    sp.add_argument("--timeout", type=positive_seconds, default=None, metavar="SECONDS",
                    help="stop asking for new trials after this many seconds (> 0)")
    sp.add_argument("--sampler", default="tpe", choices=SAMPLERS,
                    help="Optuna sampler (cmaes needs the cmaes package, qmc needs scipy)")
    sp.add_argument("--seed", type=_seed, default=0, help="sampler seed")
    sp.add_argument("--storage", default=DEFAULT_STORAGE,
                    help="Optuna RDB storage URL (SQLite file, or postgresql://... to share across machines); "
                         "opened before the search starts")
    sp.add_argument("--study-name", default=None,
                    help="study name (default: op, shape, dtype, layout and device, plus -model for --model-only)")
    sp.add_argument("--export", default=None, metavar="DIR",
                    help=f"results folder (default: {DEFAULT_OUT}/<study name>/, created): the best kernel as "
                         "kernel.cu and schedule.json, report.json (every trial), report.txt and roofline.png "
                         "(DIR must not be an existing file); a measured winner is also stored where schedule=None "
                         "finds it")
    sp.add_argument("--report-json", default=None, metavar="PATH",
                    help="also write the JSON report (every trial's schedule, prediction, measurement and failure "
                         "reason) to PATH (default: only DIR/report.json)")
    sp.add_argument("--model-only", action="store_true",
                    help="no GPU: rank candidates by the cost model for --device and compile the best for its arch")
    import tiledsl

    known = tiledsl.Target.known_names()
    sp.add_argument("--device", type=_device, default=None, metavar="{" + ",".join(known) + "}",
                    help=f"GPU to model with --model-only (default: {DEFAULT_DEVICE}); one of {', '.join(known)} "
                         "(also spelled 'NVIDIA H200', 'H100 SXM5', ...); measured runs use the GPU present")
    sp.add_argument("--gpus", type=parse_gpus, default=None, metavar="all|0,1,...",
                    help="measure on these GPUs, one worker process each (pinned with CUDA_VISIBLE_DEVICES), all on "
                         "one study and fed by one compile pool; the final re-measurement runs on the first listed. "
                         "Absent: the current GPU, one worker. With --model-only the devices are simulated labels "
                         f"(as many as GPUs present, at least 1; {SIMULATED_ENV}=N simulates N)")
    sp.add_argument("--jobs", type=_jobs, default=None,
                    help="compile processes, at most 4 per CPU (default: CPUs - 1, at most 8, or 4 per GPU of --gpus)")
    sp.add_argument("--model-prune", type=_prune_factor, default=None, metavar="FACTOR",
                    help="do not compile or measure a sampled schedule whose predicted time is more than FACTOR x "
                         "the best prediction among the study's evaluated trials: it is recorded as pruned "
                         "(rule model_prune, with the reason) and not counted in --trials (default: off; "
                         "docs/search.md, 'Model pruning')")
    sp.add_argument("--seed-top", type=_nonneg_int, default=8, help="cost-model predictions enqueued as first trials")
    sp.add_argument("--compile-top", type=positive_int, default=3,
                    help="--model-only: how many of the best to compile (more, by predicted rank, when all spill)")
    sp.add_argument("--final-top", type=positive_int, default=5,
                    help="how many rows the report shows; measured: how many to re-measure at the end")
    sp.add_argument("--ship", action="store_true",
                    help="also write the measured winner into the shipped schedules/<op>/<arch>.json")
    sp.add_argument("--lookup", action="store_true",
                    help="print which stored schedule schedule=None would use for this op (and every miss reason); "
                         "no search")
    sp.add_argument("--no-progress", action="store_true", help="no progress bar")
    sp.add_argument("--stale-after", type=positive_int, default=DEFAULT_STALE_AFTER_S, metavar="SECONDS",
                    help="a RUNNING trial whose worker sent no heartbeat for this long (it was killed) is marked "
                         "FAIL and its schedule evaluated again")


def config_from_args(args: argparse.Namespace, argv: list[str] | None = None) -> TuneConfig:
    """A :class:`TuneConfig` from parsed arguments."""
    op = get_family(args.family).op_from_args(args)
    if getattr(args, "mma", "auto") == "dmma" and not args.lookup:
        gemv_dmma_space(op)  # ValueError naming the rule or the rows the FP64 kernel refuses
    return TuneConfig(family=args.family, op=op, trials=args.trials, timeout_s=args.timeout, sampler=args.sampler,
                      seed=args.seed, storage=args.storage, study_name=args.study_name, export=args.export,
                      export_default=args.export is None, report_json=args.report_json,
                      model_only=args.model_only, device=args.device, jobs=args.jobs, seed_top=args.seed_top,
                      compile_top=args.compile_top, final_top=args.final_top, ship=args.ship,
                      progress=not args.no_progress, stale_after_s=args.stale_after, gpus=_gpus(args),
                      model_prune=args.model_prune, mma=getattr(args, "mma", "auto"),
                      command=mask_text("python -m search.tune " + " ".join(argv if argv is not None else sys.argv[1:])))


def _gpus(args: argparse.Namespace) -> tuple[int, ...] | None:
    """``--gpus`` as device indices (None when absent).

    Raises:
        ValueError: a device that is not present (the message names the flag, the value and the devices).
    """
    req: GpuRequest | None = getattr(args, "gpus", None)
    if req is None or args.lookup:
        return None
    return resolve(req, devices_present(args.model_only or not cuda_device_names()))


def _lookup(cfg: TuneConfig) -> int:
    import tiledsl
    from tiledsl.family import get as library_family
    from tiledsl.registry import lookup_hit

    target = tiledsl.Target.current() if tiledsl.gpu_available() else tiledsl.Target.known(cfg.device or DEFAULT_DEVICE)
    hit, reasons = lookup_hit(cfg.family, cfg.op, target)
    print(f"lookup {cfg.family} {op_text(cfg.op)} on {target.name} ({target.arch}):")
    if cfg.mma != "auto":
        print(f"  note: --mma {cfg.mma} winners are never stored for schedule=None; this is schedule=None's own lookup")
    for r in reasons:
        print(f"  miss: {r}")
    if hit is not None:
        print(f"  -> hit: {describe(hit.schedule)}, from {hit.provenance()}")
        return 0
    unused = rows_unused(cfg.family, cfg.op, target)
    if unused is not None:
        print(f"  note: {unused}")
    fam = library_family(cfg.family)
    rows = rows_instead(cfg.family, cfg.op, target)
    if rows is not None:
        stored, _ = lookup_hit(cfg.family, rows, target)
        if stored is not None:  # a record of the rows product itself (a tune of it, in the GEMV space)
            print(f"  -> no stored schedule for it; schedule=None runs it as the rows Cᵀ = Bᵀ·Aᵀ ({op_text(rows)}; "
                  f"runs_as_row: few columns), whose stored record hits: {describe(stored.schedule)}, from "
                  f"{stored.provenance()}")
            return 0
        chosen, why = fam.builtin_choice(rows, target)
        print(f"  -> no stored schedule: schedule=None runs it as the rows Cᵀ = Bᵀ·Aᵀ ({op_text(rows)}; runs_as_row: "
              f"few columns) on {describe(chosen)}, chosen by {why}")
    elif fam.builtin_choice is not None:
        chosen, why = fam.builtin_choice(cfg.op, target)
        print(f"  -> no stored schedule: schedule=None uses {describe(chosen)}, chosen by {why}")
    else:
        print(f"  -> no stored schedule: schedule=None uses {describe(fam.builtin_schedule(cfg.op, target))}, the "
              f"{cfg.family} family's built-in choice")
    return 0


def check_args(args: argparse.Namespace) -> str | None:
    """What is wrong with arguments the parser accepted, found before any search starts, or None:
    ``--export`` (or the default results folder) cannot be created or written (:func:`export_problem`),
    ``--report-json`` names a folder or a place no file can be written, ``--storage`` cannot be parsed or
    opened (URL, password masked, and reason)."""
    if args.lookup:
        return None
    if getattr(args, "mma", "auto") != "auto" and args.ship:
        return (f"--ship with --mma {args.mma}: its winner is never stored for schedule=None (its space need not hold "
                "schedule=None's own kernel; a plain tune searches it, stores and ships, where schedule=None runs it), "
                "so there is nothing to ship")
    if args.export is not None:
        why = export_problem(args.export)
        if why is not None:
            return f"--export {args.export}: {why}"
    else:
        why = folder_problem(DEFAULT_OUT, create=False)
        if why is not None:
            return f"--export not given, and the default results folder {DEFAULT_OUT}/ cannot be made here: {why}"
    report_json = getattr(args, "report_json", None)
    if report_json is not None:
        if os.path.isdir(report_json):
            return f"--report-json {report_json}: is a folder; give a file path"
        why = folder_problem(os.path.dirname(os.path.abspath(report_json)), create=False)
        if why is not None:
            return f"--report-json {report_json}: {why}"
    why = storage_problem(args.storage)
    if why is not None:
        return f"--storage {mask(args.storage)}: cannot open it: {why}"
    return None


def folder_problem(folder: str, create: bool) -> str | None:
    """Why files cannot be written into ``folder`` (created when missing), or None.

    Args:
        folder: the folder.
        create: create it now (and write and remove a temporary file in it, removing the folders made
            here again when that fails); False: only check that no file is in the way and that the
            nearest existing folder above it is writable.
    """
    import tempfile
    from pathlib import Path

    d = Path(folder)
    if d.exists() and not d.is_dir():
        return "is an existing file; give a folder (created when missing)"
    for p in d.parents:
        if p.exists() and not p.is_dir():
            return f"{p} is a file, so no folder can be created under it"
    if not create:
        base = next(p for p in [d, *d.absolute().parents] if p.exists())
        if not os.access(base, os.W_OK | os.X_OK):
            return f"{base} is not writable"
        return None
    created = [p for p in [d, *d.parents] if not p.exists()]
    try:
        d.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=d):
            pass
    except OSError as exc:
        for p in created:  # deepest first
            try:
                p.rmdir()
            except OSError:
                break
        return f"cannot create or write the folder ({exc.strerror or exc})"
    return None


def export_problem(folder: str) -> str | None:
    """Why ``--export folder`` cannot receive kernel.cu, schedule.json and the reports, or None.

    The folder is created when missing (as the export would) and checked by writing a temporary file.
    """
    why = folder_problem(folder, create=True)
    if why is not None:
        return why
    for name in ("kernel.cu", "schedule.json", "report.json", "report.txt", "roofline.png"):
        p = os.path.join(folder, name)
        if os.path.isdir(p):
            return f"{p} is a folder; the export writes a file there"
    return None


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m search.tune``.

    Raises:
        SystemExit: code 2 with an argparse-style message for bad arguments (checked before searching).
    """
    from tiledsl.errors import TiledslError
    from tiledsl.spec import empty_dims

    args = build_parser().parse_args(argv)
    if os.environ.get(EXIT_WITH_PARENT_ENV) == "1":  # started by a pass (tune_workloads): end with it
        exit_with_parent()
    sub = args._subparsers[args.family]
    try:
        cfg = config_from_args(args, argv)
    except (TiledslError, ValueError) as exc:
        sub.error(mask_text(str(exc)))
    empty = empty_dims(cfg.op)
    if empty is not None:
        flag = "--shape" if hasattr(cfg.op, "shape") else "--m/--n/--k"
        sub.error(f"{flag}: the op is empty ({empty}): there is nothing to tune (tiledsl returns numpy's result "
                  "for empty inputs without a kernel)")
    why = check_args(args)
    if why is not None:
        sub.error(why)
    if args.lookup:
        return _lookup(cfg)
    from tiledsl.compile import nvrtc_problem

    why = nvrtc_problem()  # before any search: every mode compiles its winner
    if why is not None:
        print(f"python -m search.tune: error: cannot compile kernels here: {why}", file=sys.stderr)
        return 1
    try:
        res = run(cfg)
    except KeyboardInterrupt:  # a second Ctrl-C, or one before the search started
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    if res.interrupted:
        return EXIT_INTERRUPTED
    return 0 if res.best_schedule is not None else 1


if __name__ == "__main__":
    sys.exit(main())

"""``python -m search.tune``: find the best schedule for one op on one GPU, and take the kernel away.

Examples::

    python -m search.tune gemm --m 4096 --n 4096 --k 4096 --dtype float32 --trials 200 --export best/
    python -m search.tune gemm --m 4096 --n 4096 --k 4096 --gpus all            # every GPU of the node
    python -m search.tune gemm --m 4096 --n 4096 --k 4096 --model-only          # no GPU: cost model only
    python -m search.tune gemm --m 4096 --n 4096 --k 4096 --lookup             # what schedule=None picks
    python -m search.tune reduce --shape 16384x16384 --axis 1 --op sum --trials 100
    python -m search.tune transpose --shape 16384x16384 --dtype float32 --export best/

How one run goes (see ``docs/search.md``):

1. an Optuna study (RDB storage, default ``sqlite:///tiledsl-tune.db``) is created or resumed; the cost
   model's top predicted schedules are enqueued (``enqueue_trial``, skipped when already there);
2. each asked point becomes a schedule through the schedule's own rule table: a point that breaks a
   rule is told PRUNED with the rule's name and message, never compiled; a schedule that another
   trial already owns is not re-measured (its value is reused);
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
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import socket
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from multiprocessing import Pipe
from multiprocessing.connection import wait

from . import export, outputs
from . import report as R
from .devices import SIMULATED_ENV, GpuRequest, cuda_device_names, devices_present, parse_gpus, resolve
from .families import LAYOUTS, SEARCH_FAMILIES, family_of_op, gemm_op, positive_int
from .families import get as get_family
from .interrupt import EXIT_INTERRUPTED, DeferredInterrupt, ignore_in_child
from .measure import GpuWorker, compile_job
from .model_worker import ModelWorker
from .objective import (
    Model,
    claim,
    find_duplicate,
    load_model,
    roofline_bound_s,
    roofs,
    trial_problem,
    warn_trial,
)
from .space import Rejection, Space, describe, schedule_key, space_for, tie_key
from .storage import (
    DEFAULT_STALE_AFTER_S,
    Heartbeat,
    expire_stale,
    heartbeat_interval,
    make_storage,
    mask,
    mask_text,
    storage_problem,
)

__all__ = ["LAYOUTS", "SAMPLERS", "TuneConfig", "TuneResult", "build_parser", "config_from_args",
           "default_study_name", "gemm_op", "main", "make_storage", "run", "storage_problem"]

SAMPLERS = ("tpe", "random", "grid", "cmaes", "qmc")
DEFAULT_STORAGE = "sqlite:///tiledsl-tune.db"
DEFAULT_DEVICE = "H200"
DEFAULT_OUT = "tune-out"  # the results folder without --export: tune-out/<study name>/


# ---------------------------------------------------------------- configuration


@dataclass
class TuneConfig:
    """Everything one run needs (built from the command line by :func:`config_from_args`)."""

    family: str
    op: object
    trials: int = 200
    timeout_s: float | None = None
    sampler: str = "tpe"
    seed: int = 0
    storage: str = DEFAULT_STORAGE
    study_name: str | None = None
    export: str | None = None
    export_default: bool = False  # no --export: write the results into tune-out/<study name>/
    report_json: str | None = None
    model_only: bool = False
    device: str | None = None
    jobs: int | None = None
    seed_top: int = 8
    compile_top: int = 3
    final_top: int = 5
    ship: bool = False
    progress: bool = True
    command: str = ""
    notes: list = field(default_factory=list)
    stale_after_s: int = DEFAULT_STALE_AFTER_S
    gpus: tuple[int, ...] | None = None  # --gpus resolved to device indices; None: not given (the current device)


def default_study_name(family: str, op, device_tag: str, model_only: bool) -> str:
    """``<family>-<op>-<device>[-model]``; the op part comes from the family's table row, e.g.
    ``gemm-4096x4096x4096-float32-NN-H200``, ``reduce-16384x16384-sum-axis1-float32-H200``,
    ``transpose-16384x16384-float32-H200``."""
    return f"{family}-{get_family(family).study_shape(op)}-{device_tag}" + ("-model" if model_only else "")


# ---------------------------------------------------------------- the run


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


def make_sampler(name: str, seed: int, space: Space):
    """The Optuna sampler ``name`` (tpe, random, grid, cmaes, qmc), seeded.

    Raises:
        SystemExit: the sampler needs a package that is not installed (the message names it).
    """
    import optuna

    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed, multivariate=True, constant_liar=True, n_startup_trials=12)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "grid":
        return optuna.samplers.GridSampler(space.grid(), seed=seed)
    if name == "cmaes":
        try:
            import cmaes  # noqa: F401
        except ImportError:
            raise SystemExit("--sampler cmaes needs the 'cmaes' package: pip install cmaes") from None
        return optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False)
    if name == "qmc":
        try:
            import scipy  # noqa: F401
        except ImportError:
            raise SystemExit("--sampler qmc needs scipy: pip install scipy") from None
        return optuna.samplers.QMCSampler(seed=seed, warn_independent_sampling=False)
    raise SystemExit(f"unknown sampler {name!r}; choose from {', '.join(SAMPLERS)}")


class _Progress:
    """A tqdm bar over one phase of a run (count, total, rate, ETA, a postfix); nothing when disabled."""

    def __init__(self, total: int | None, enabled: bool, desc: str, unit: str) -> None:
        self.bar = None
        self.args = {"total": total, "desc": desc, "unit": unit} if enabled else None
        if total:
            self._open()

    def _open(self) -> None:
        if self.bar is None and self.args is not None:
            from tqdm import tqdm

            self.bar = tqdm(**self.args, dynamic_ncols=True, file=sys.stderr)

    def update(self, n: int = 1, postfix: str | None = None) -> None:
        self._open()
        if self.bar is not None:
            if postfix is not None:
                self.bar.set_postfix_str(postfix, refresh=False)
            self.bar.update(n)

    def grow(self, n: int = 1) -> None:
        """Raise the total by ``n`` (a phase that finds its work on the way; the bar opens at its first work)."""
        if self.args is not None:
            self.args["total"] = (self.args["total"] or 0) + n
        if self.bar is not None:
            self.bar.total += n
            self.bar.refresh()
        elif n:
            self._open()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _attr(trial, **kv) -> None:
    for k, v in kv.items():
        if v is not None:
            trial.set_user_attr(k, v)


def _predict_seeds(space: Space, model: Model, op, target, top: int, budget_s: float = 15.0) -> list[tuple]:
    """The cost model's ``top`` schedules among the space's seed candidates, as (predicted_s, schedule);
    equal predictions in :func:`search.space.tie_key` order (the library default first)."""
    t0 = time.perf_counter()
    tie = tie_key(space, op, target)
    scored = []
    for s in space.seeds(op, target):
        if time.perf_counter() - t0 > budget_s:
            break
        p = model.predict(op, s, target)
        if p is not None:
            scored.append((p, tie(s), s))
    scored.sort(key=lambda x: (x[0], x[1]))
    return [(p, s) for p, _, s in scored[:top]]


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


def run(cfg: TuneConfig, out=print) -> TuneResult:
    """Run (or resume) one study and print its report.

    Ctrl-C (SIGINT) stops asking for trials: the step in hand finishes, trials not evaluated are told
    FAIL, the report of what was measured is printed (no final re-measurement, no export) and the
    result has ``interrupted=True`` (``main`` exits 130). A second Ctrl-C raises KeyboardInterrupt.
    RUNNING trials of workers that stopped sending heartbeats for ``cfg.stale_after_s`` are failed.

    Raises:
        SystemExit: the study exists with a different op, device or mode.
    """
    with DeferredInterrupt() as intr:
        return _run(cfg, out, intr)


def _run(cfg: TuneConfig, out, intr: DeferredInterrupt) -> TuneResult:
    import optuna
    from optuna.trial import TrialState

    import tiledsl
    from tiledsl.registry import device_tag
    from tiledsl.spec import refuse_empty

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    t_run = time.perf_counter()
    op = cfg.op
    refuse_empty(op, "tune")  # SpecError: tiledsl answers an empty op without a kernel
    space = space_for(cfg.family).for_op(op)
    if not cfg.model_only and not tiledsl.gpu_available():
        out(f"no CUDA GPU available here: running as --model-only for {cfg.device or DEFAULT_DEVICE} "
            "(candidates ranked by the cost model and compiled for its arch; nothing is measured)")
        cfg.model_only = True
    calibration = None
    if cfg.model_only:
        from tiledsl.calibrate import cached_figures, calibration_path, load_calibration

        target = tiledsl.Target.known(cfg.device or DEFAULT_DEVICE)
        if cached_figures(target) is not None:  # verified figures tiledsl.calibrate measured on this device
            calibration = str(calibration_path(target))
            target = load_calibration(target)
    else:
        target = tiledsl.Target.current()
        if cfg.device and device_tag(cfg.device) not in device_tag(target.name):
            out(f"note: --device {cfg.device} ignored: measuring on the GPU present, {target.name}")
    mode = "model-only" if cfg.model_only else "measured"
    _check_devices(cfg, target)
    model = load_model()
    name = cfg.study_name or default_study_name(cfg.family, op, device_tag(target.name), cfg.model_only)
    storage = make_storage(cfg.storage, cfg.stale_after_s)
    study = optuna.create_study(storage=storage, study_name=name, direction="minimize",
                                sampler=make_sampler(cfg.sampler, cfg.seed, space), load_if_exists=True)
    expire_stale(study, cfg.stale_after_s)  # trials of workers that died (no heartbeat for cfg.stale_after_s) become FAIL
    meta = {"family": cfg.family, "op": op.to_dict(), "device": target.name, "arch": target.arch, "mode": mode}
    old = study.user_attrs.get("meta")
    if old is None:
        study.set_user_attr("meta", meta)
        study.set_user_attr("model", model.label)
    elif old != meta:
        raise SystemExit(f"study {name!r} in {mask(cfg.storage)} was made for {old}, not {meta}; "
                         "pass another --study-name")
    n_before = len(study.trials)
    out(f"study {name!r} in {mask(cfg.storage)}: {n_before} earlier trials"
        + (" (resuming)" if n_before else "") + f"; {mode} on {target.name} ({target.arch}); "
        f"sampler {cfg.sampler}; cost model: {model.label}")

    # ---- seed the study with the cost model's best predictions (once per study and point)
    seeds = _predict_seeds(space, model, op, target, cfg.seed_top)
    for _, s in seeds:
        params = space.from_schedule(s)
        if params is not None:
            study.enqueue_trial(params, user_attrs={"seeded_by_model": True}, skip_if_exists=True)

    worker_id = f"{socket.gethostname()}:{os.getpid()}"
    stats = {"complete": 0, "pruned": 0, "fail": 0, "dup": 0}
    time_split = {"compile_s": 0.0, "compiles": 0, "verify_s": 0.0, "measure_s": 0.0, "predict_s": 0.0}
    work, _, disp_unit, disp_scale = space.work(op)
    best = {"s": None}
    bar = _Progress(cfg.trials, cfg.progress, f"search ({mode})", "trial")

    pool = None
    workers: list = []  # one per device; workers[0] times the vendor library and re-measures the finalists
    devices = cfg.gpus or (0,)
    vendor_s = None
    if cfg.model_only and len(devices) > 1:  # the cost model stands in for each device's GPU worker
        workers = [ModelWorker(cfg.family, op.to_dict(), target.name, device=d) for d in devices]
        out(f"{len(devices)} simulated devices {', '.join(map(str, devices))}: one cost-model worker process each")
    if not cfg.model_only:
        from concurrent.futures import ProcessPoolExecutor
        from multiprocessing import get_context

        jobs = cfg.jobs or max(1, min(max(8, 4 * len(devices)), (os.cpu_count() or 2) - 1))
        pool = ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn"), initializer=ignore_in_child)
        workers = [GpuWorker(cfg.family, op.to_dict(), device=None if cfg.gpus is None else d) for d in devices]
        if len(workers) > 1:
            out(f"{len(workers)} GPU workers, devices {', '.join(map(str, devices))} (one process and CUDA context "
                f"each), fed by one pool of {jobs} compile processes; the final re-measurement runs on device "
                f"{devices[0]}")
        v = workers[0].call({"cmd": "vendor"}, timeout_s=300)
        vendor_s = v["median_ms"] / 1e3 if v.get("ok") else None
        if vendor_s:
            out(f"vendor library ({vendor_name(cfg.family, op)}): {vendor_s * 1e3:.3f} ms = "
                f"{work / vendor_s / disp_scale:.2f} {disp_unit}")
        else:
            out(f"vendor library timing failed: {v.get('error')}")

    def best_text() -> str:
        what = "predicted" if cfg.model_only else "measured"
        if best["s"] is None:
            return f"best {what} -"
        return f"best {what} {best['s'] * 1e3:.3f} ms ({work / best['s'] / disp_scale:.1f} {disp_unit})"

    def finish(trial, state, value=None, kind=None) -> None:
        try:
            study.tell(trial, value if state == TrialState.COMPLETE else None, state=state)
        except ValueError as exc:  # "Cannot tell a FAIL trial.": another worker expired it meanwhile
            if study._storage.get_trial(trial._trial_id).state.is_finished():
                raise optuna.exceptions.UpdateFinishedTrialError(str(exc)) from exc
            raise
        beat.release(trial)
        kind = kind or {TrialState.COMPLETE: "complete", TrialState.PRUNED: "pruned", TrialState.FAIL: "fail"}[state]
        stats[kind] += 1
        if state == TrialState.COMPLETE and (best["s"] is None or value < best["s"]):
            best["s"] = value
        # the bar counts what --trials counts (pruned points are not evaluated)
        bar.update(0 if kind == "pruned" else 1, f"{best_text()} | pruned {stats['pruned']} dup {stats['dup']} "
                                                 f"fail {stats['fail']}")

    def prepare(trial):
        """Sample, validate, de-duplicate and predict; returns the schedule to evaluate or None."""
        params = space.suggest(trial)
        built = space.build(params, target, op)
        if isinstance(built, Rejection):
            _attr(trial, pruned_reason=built.message, rule=built.rule, worker=worker_id)
            finish(trial, TrialState.PRUNED)
            return None
        key = schedule_key(built)
        claim(trial, key)
        _attr(trial, schedule=built.to_dict(), worker=worker_id)
        dup = find_duplicate(study, trial, key)
        if dup is not None:
            trial.set_user_attr("duplicate_of", dup.number)
            if dup.state == TrialState.COMPLETE:
                finish(trial, TrialState.COMPLETE, dup.value, kind="dup")
            elif dup.state == TrialState.FAIL:
                _attr(trial, error=f"duplicate of failed trial {dup.number}: {dup.user_attrs.get('error')}")
                finish(trial, TrialState.FAIL, kind="dup")
            else:
                _attr(trial, pruned_reason=f"duplicate of trial {dup.number} ({dup.state.name.lower()})",
                      rule="duplicate")
                finish(trial, TrialState.PRUNED, kind="dup")
            return None
        if pool is not None:  # measured: the compile job predicts, off this process (see compiled)
            return built, None
        t0 = time.perf_counter()
        ex = model.explain(op, built, target)
        time_split["predict_s"] += time.perf_counter() - t0
        _attr(trial, predicted_s=ex.get("predicted_s"), bound_by=ex.get("bound_by"))
        return built, ex.get("predicted_s")

    def compiled(trial, fut) -> bool:
        """Measured mode: record the compile result of ``trial`` (``fut`` done; None: nothing compiled);
        False when it failed (the trial is told FAIL)."""
        if fut is None:
            return True
        res = fut.result()
        time_split["compile_s"] += res.get("compile_s", 0.0)
        time_split["compiles"] += 1
        time_split["predict_s"] += res.get("predict_s", 0.0)
        _attr(trial, predicted_s=res.get("predicted_s"), bound_by=res.get("bound_by"))
        if not res["ok"]:
            _attr(trial, error=res["error"][:4000], stage="compile")
            finish(trial, TrialState.FAIL)
            return False
        _attr(trial, registers=res["registers"], smem_bytes=res["smem_bytes"], spill_bytes=res["spill_bytes"])
        return True

    def still_owner(trial, sched) -> bool:
        """Claims again just before measuring: a claim of the same schedule by another host whose clock runs
        behind ours may have landed after :func:`prepare` looked; the earliest claim keeps it, the others
        are told duplicates (so a schedule is measured once unless the clocks differ by more than the
        time between a trial's claim and its measurement)."""
        dup = find_duplicate(study, trial, schedule_key(sched))
        if dup is None:
            return True
        trial.set_user_attr("duplicate_of", dup.number)
        _attr(trial, pruned_reason=f"duplicate of trial {dup.number} ({dup.state.name.lower()})", rule="duplicate")
        finish(trial, TrialState.PRUNED, kind="dup")
        return False

    def measure_request(sched) -> dict:
        return {"cmd": "measure", "schedule": sched.to_dict(), "best_ms": None if best["s"] is None else best["s"] * 1e3}

    def measured(trial, m: dict, device: int) -> None:
        """The worker's answer ``m`` for ``trial``, measured on ``device``: told COMPLETE or FAIL."""
        trial.set_user_attr("device", device)
        time_split["verify_s"] += m.get("verify_s", 0.0)
        time_split["predict_s" if cfg.model_only else "measure_s"] += m.get("measure_s", 0.0)  # a stand-in predicts
        if not m.get("ok"):
            _attr(trial, error=str(m.get("error"))[:4000], stage=m.get("stage"))
            finish(trial, TrialState.FAIL)
            return
        t = m["median_ms"] / 1e3
        _attr(trial, time_s=t, throughput=work / t / disp_scale, throughput_unit=disp_unit,
              spread=m["spread"], repeats=m["repeats"], timing=m["timing"], max_rel_err=m["max_rel_err"])
        finish(trial, TrialState.COMPLETE, t)

    def lost(trial) -> None:
        """Another worker failed ``trial`` as stale (no heartbeat) while this one held it: drop its result."""
        beat.release(trial)
        stats["fail"] += 1
        out(f"warning: trial {trial.number} was marked FAIL by another worker (no heartbeat for "
            f"{cfg.stale_after_s} s: was this process suspended?); its result is dropped")

    inline = not workers  # --model-only on one device: predicted right here, as it always was
    pending: deque = deque()  # (trial, schedule, compile future or None), asked and not yet measured, in ask order
    busy: dict[int, tuple] = {}  # worker index -> (trial, schedule) it is measuring
    depth = 1 if inline else (cfg.jobs or 4) + 2 * len(workers)
    asked = evaluated = 0
    deadline = None if cfg.timeout_s is None else time.monotonic() + cfg.timeout_s
    beat = Heartbeat(storage, heartbeat_interval(cfg.stale_after_s))
    last_expiry = time.monotonic()
    wake_r, wake_w = Pipe(duplex=False)  # a compile finished (written from the pool's callback thread)

    def wake(_fut) -> None:
        try:
            wake_w.send_bytes(b".")
        except OSError:  # closed at the end of the run
            pass

    try:
        while True:
            while (len(pending) + len(busy) < depth and not intr.requested
                   and stats["complete"] + stats["fail"] + stats["dup"] + len(pending) + len(busy) < cfg.trials
                   and asked < 20 * cfg.trials and (deadline is None or time.monotonic() < deadline)):
                if time.monotonic() - last_expiry > heartbeat_interval(cfg.stale_after_s):
                    expire_stale(study, cfg.stale_after_s)
                    last_expiry = time.monotonic()
                trial = study.ask()
                beat.hold(trial)
                asked += 1
                try:
                    got = prepare(trial)
                    if got is not None and inline:
                        if got[1] is None:
                            _attr(trial, error="the cost model could not predict this schedule")
                            finish(trial, TrialState.FAIL)
                        else:
                            _attr(trial, time_s=got[1])
                            finish(trial, TrialState.COMPLETE, got[1])
                except optuna.exceptions.UpdateFinishedTrialError:
                    lost(trial)
                    continue
                if got is None:
                    continue
                evaluated += 1
                sched, pred = got
                if inline:
                    continue
                fut = None
                if pool is not None:
                    fut = pool.submit(compile_job, cfg.family, op.to_dict(), sched.to_dict(), target.arch, target)
                    fut.add_done_callback(wake)
                pending.append((trial, sched, fut))
            if not busy and (intr.requested or not pending):
                break
            idle = [i for i in range(len(workers)) if i not in busy]
            if pending and idle and not intr.requested and (pending[0][2] is None or pending[0][2].done()):
                # the oldest candidate, compiled, goes to the first idle device (then back to asking)
                trial, sched, fut = pending.popleft()
                try:
                    if compiled(trial, fut) and still_owner(trial, sched):
                        workers[idle[0]].send(measure_request(sched))
                        busy[idle[0]] = (trial, sched)
                except optuna.exceptions.UpdateFinishedTrialError:
                    lost(trial)
                continue
            # wait for a device's answer, the oldest candidate's compile (when a device is idle), or a timeout
            waits = [workers[i].connection for i in busy] + ([wake_r] if pending and idle else [])
            wait(waits, timeout=min([1.0, *(workers[i].seconds_left() for i in busy)]))
            while wake_r.poll():
                wake_r.recv_bytes()
            for i in [i for i in busy if workers[i].ready()]:
                trial, sched = busy.pop(i)
                try:
                    measured(trial, workers[i].receive(), devices[i])
                except optuna.exceptions.UpdateFinishedTrialError:
                    lost(trial)
    except KeyboardInterrupt:  # a second Ctrl-C: stop at once
        intr.requested = True
    finally:
        for _, _, fut in pending:
            if fut is not None:
                fut.cancel()
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        for trial in beat.held():  # asked but not evaluated: FAIL without "error", so they own nothing
            try:
                study.tell(trial, state=TrialState.FAIL)
            except Exception:  # the storage refused (e.g. cut mid-commit): the heartbeat expiry will fail it
                pass
        beat.stop()
        bar.close()  # after the clean-up: its seconds stay on the search's bar
        for w in workers[1:] if not cfg.model_only else workers:  # the first GPU worker re-measures the finalists
            w.close()
        wake_w.close()
        wake_r.close()
    if intr.requested:
        out("interrupted: the trials evaluated so far are in the study; re-run the same command to resume")
    search_s = time.perf_counter() - t_run

    # ---- finalists
    winner, tied, info = None, [], {}
    if cfg.model_only:
        bar = _Progress(0, cfg.progress, f"compile finalists for {target.arch}", "kernel")
        try:
            finals, winner, info = _model_only_finalists(study, space, target, cfg, model, op, out, bar,
                                                         compile_them=not intr.requested)
        finally:
            bar.close()
        time_split["compile_s"] += info["compile_s"]
        time_split["compiles"] += info["compiled"]
    else:
        finals, vendor_final = _finalists(study, space, target, cfg, workers[0], model, op, out,
                                          remeasure=not intr.requested)
        if vendor_final is not None:
            vendor_s = vendor_final
        workers[0].close()
        info["final_device"] = devices[0] if len(devices) > 1 else None
        if finals:
            w, tied = R.pick_winner([{"number": f.number, "median_s": f.median_s, "spread": f.spread, "f": f}
                                     for f in finals])
            winner = w["f"]
    if winner is not None:
        final = {"winner_trial": winner.number, "median_s": winner.median_s, "vendor_s": vendor_s, "date": _now()}
        if not cfg.model_only and cfg.gpus is not None:
            final["device"] = devices[0]  # where the finalists were re-measured, together
        study.set_user_attr(f"final:{worker_id}", final)
    info["calibration"] = calibration
    results = cfg.export or (os.path.join(DEFAULT_OUT, name) if cfg.export_default else None)
    exported, export_lines = [], []
    steps = _Progress(3, cfg.progress, "export, roofline, report", "step")
    if winner is not None and results and intr.requested:
        export_lines.append(f"kernel not exported to {results}: the run was interrupted (re-run the same command "
                            "to finish it)")
    elif winner is not None and results:
        t0 = time.perf_counter()
        exported = _export(cfg, results, op, target, winner, vendor_s, mode, name, model, export_lines.append)
        time_split["compile_s"] += time.perf_counter() - t0  # the winner again (a cache hit when compiled above)
        time_split["compiles"] += 1
    steps.update(1)
    info["roofline"] = ("roofline.png: not written (no results folder; pass --export DIR)" if not results else
                        outputs.write_roofline(os.path.join(results, "roofline.png"), op, target, finals, winner,
                                               mode, _op_text(op)))
    steps.update(1)
    info["interrupted"] = intr.requested
    text = _report(study, cfg, space, model, op, target, finals, winner, tied, vendor_s, time_split,
                   search_s, n_before, stats, mode, work, disp_unit, disp_scale, info)
    steps.update(1)
    steps.close()
    out(text)
    for line in export_lines:
        out(line)
    json_paths = ([os.path.join(results, "report.json")] if results else []) + ([cfg.report_json] if cfg.report_json else [])
    if json_paths:
        header = {"tool": "python -m search.tune", "command": mask_text(cfg.command), "date": _now(), "study": name,
                  "storage": mask(cfg.storage), "family": cfg.family, "op": op.to_dict(), "op_text": _op_text(op),
                  "device": target.name, "arch": target.arch, "cost_model": model.label,
                  "vendor": {"name": vendor_name(cfg.family, op), "measured_s": vendor_s},
                  "roofline_bound_s": roofline_bound_s(op, target)[0],
                  "devices": list(devices), "counts_this_run": dict(stats), "time_s": {"search_wall": search_s, **time_split},
                  "files": [str(p) for p in exported]}
        for path in json_paths:
            outputs.write_report_json(path, header, study, mode, finals, winner)
    if results:
        os.makedirs(results, exist_ok=True)
        with open(os.path.join(results, "report.txt"), "w") as f:
            f.write(text.lstrip("\n") + "\n")
        names = sorted(os.listdir(results))
        out(f"results in {results}{os.sep}: {', '.join(names)}"
            + (f"; JSON report also at {cfg.report_json}" if cfg.report_json else ""))
    elif cfg.report_json:
        out(f"JSON report: {cfg.report_json}")
    return TuneResult(name, mode, winner.schedule if winner else None, winner.median_s if winner else None,
                      vendor_s, asked, text, exported, results, interrupted=intr.requested)


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _owned_complete(study, key=None) -> list:
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


def _model_only_finalists(study, space, target, cfg, model, op, out, bar,
                          compile_them: bool = True) -> tuple[list, Finalist | None, dict]:
    """``--model-only``: the best predicted schedule of each structure, the first ``--compile-top``
    compiled (ptxas registers, shared memory, spills) and re-predicted with the kernel.

    The winner is the compiled candidate without register spills with the lowest re-predicted time
    (ties: :func:`search.space.tie_key`). When every one of them spills, further candidates are compiled
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
    owned = _owned_complete(study, key=lambda d: tie(st.from_dict(d)))
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
        return finals, winner, info
    # nothing compiled is free of spills: the library's default for this op
    default = family(cfg.family).default_schedule(op, target)
    ex = model.explain(op, default, target)
    bar.grow()
    winner = compile_one(default, None, ex.get("predicted_s"), ex.get("bound_by"))
    worst = min((f for f in compiled.values() if "registers" in f.resources),
                key=lambda f: f.resources["spill_bytes"], default=None)
    why = (f"none of the {len(compiled)} compiled candidates is free of register spills (fewest: trial "
           f"{worst.number}, {worst.resources['spill_bytes']} bytes)" if worst is not None
           else f"none of the {len(compiled)} compiled candidates compiled")
    default_res = ("does not compile" if "error" in winner.resources else
                   f"{winner.resources['registers']} registers, {winner.resources['spill_bytes']} spill bytes")
    info["fallback"] = why
    out(f"warning: {why}; exporting the library default {cfg.family}.default_schedule(op, {target.name}) "
        f"instead: {describe(default)} ({default_res})")
    return finals + [winner], (winner if "error" not in winner.resources else None), info


def _finalists(study, space, target, cfg, worker, model, op, out,
               remeasure: bool = True) -> tuple[list[Finalist], float | None]:
    """Measured mode: the top ``--final-top`` re-measured interleaved with the vendor library
    (``remeasure=False``, after Ctrl-C: the search's own timings)."""
    st = space.schedule_type()
    owned = _owned_complete(study)
    finals: list[Finalist] = []
    top = owned[:cfg.final_top]
    if not top:
        return [], None
    scheds = [st.from_dict(t.user_attrs["schedule"]) for t in top]
    if not remeasure:
        r = {"ok": False, "error": "interrupted: not re-measured"}
    else:
        bar = _Progress(1, cfg.progress, f"re-measure the top {len(top)} and the vendor library, 7 interleaved rounds",
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
                         t.user_attrs.get("bound_by"), _res(t)) for t, s in zip(top, scheds, strict=True)], None
    import statistics

    for t, s, times in zip(top, scheds, r["times_ms"], strict=True):
        med = statistics.median(times) / 1e3
        spread = (max(times) - min(times)) / 1e3 / med if med else 0.0
        finals.append(Finalist(t.number, s, med, spread, t.user_attrs.get("predicted_s"),
                               t.user_attrs.get("bound_by"), _res(t)))
    return finals, (statistics.median(r["vendor_ms"]) / 1e3 if r.get("vendor_ms") else None)


def _res(t) -> dict:
    return {k: t.user_attrs.get(k) for k in ("registers", "smem_bytes", "spill_bytes")}


def _res_text(f: Finalist) -> str:
    return "/".join(str(f.resources.get(k, "-")) for k in ("registers", "smem_bytes", "spill_bytes"))


# docs/costmodel.md, "Fit on the H200": median measured / predicted time of the cost model
MODEL_BIAS = {"gemm": "median measured/predicted = 2.0 for GEMM (110 schedules of 4096^3 float32): expect about "
                      "half the predicted TFLOP/s",
              "reduce": "median measured/predicted = 1.1 for reductions (60 schedules of a float32 sum)",
              "transpose": "not fitted for transposes yet"}


def _report(study, cfg, space, model, op, target, finals, winner, tied, vendor_s, split, search_s,
            n_before, stats, mode, work, unit, scale, info=None) -> str:
    info = info or {}
    lines = ["", f"==== search.tune report: {cfg.family} {_op_text(op)} on {target.name} ({target.arch}), {mode} ===="]
    if info.get("interrupted"):
        lines.append("INTERRUPTED (Ctrl-C): the trials evaluated before it; no final re-measurement, compile or export")
    lines.append(f"trials this run: {sum(stats.values())} (complete {stats['complete']}, pruned by rules "
                 f"{stats['pruned']}, failed {stats['fail']}, duplicates not re-measured {stats['dup']}); "
                 f"study total {len(study.trials)} (earlier {n_before})")
    bound_s, bound_level = roofline_bound_s(op, target)
    (peak, peak_name, peak_src), (hbm, hbm_src) = roofs(op, target)
    lines.append(f"roofline bound: {bound_s * 1e3:.3f} ms ({bound_level}-bound: max(FLOP / peak {peak_name} "
                 f"{peak / 1e12:.1f} TFLOP/s [{peak_src}], compulsory bytes / HBM {hbm / 1e12:.2f} TB/s "
                 f"[{hbm_src}]))")
    if mode == "measured":
        vtxt = "n/a" if vendor_s is None else f"{vendor_s * 1e3:.3f} ms = {work / vendor_s / scale:.2f} {unit}"
        lines.append(f"vendor library measured in this run ({vendor_name(cfg.family, op)}): {vtxt}")
        rows = []
        for i, f in enumerate(finals):
            vendor_pct = None if vendor_s is None else vendor_s / f.median_s
            rows.append([f"{i + 1}{'*' if winner is f else ''}", str(f.number), describe(f.schedule),
                         f"{f.median_s * 1e3:.3f}", f"±{100 * f.spread / 2:.1f}%", f"{work / f.median_s / scale:.2f}",
                         R.fmt_pct(vendor_pct), R.fmt_pct(bound_s / f.median_s), R.fmt_ms(f.predicted_s),
                         str(f.bound_by), _res_text(f)])
        head = ["#", "trial", "schedule", "measured ms", "spread", f"measured {unit}", "% vendor", "% roofline",
                "predicted ms", "bound by", "regs/smem/spill"]
        on = "" if info.get("final_device") is None else f", all on device {info['final_device']}"
        title = (f"top by final interleaved re-measurement (median of 7 rounds{on}; * = winner); predicted ms: "
                 "the cost model's prediction before compiling")
    else:
        cal = info.get("calibration")
        lines.append(f"NOTE: every time and {unit} below is the cost model's PREDICTION ({model.label}), not a "
                     f"measurement: ceilings " + (f"calibrated by tiledsl.calibrate ({cal})" if cal else
                                                  f"from the known-GPU table, uncalibrated ({target.source})")
                     + f"; the model's measured bias on the H200: {MODEL_BIAS.get(cfg.family, 'not fitted')} "
                       "(docs/costmodel.md)")
        rows = []
        for i, f in enumerate(finals):
            again = f.resources.get("predicted_with_kernel_s") if "registers" in f.resources else None
            rows.append([f"{i + 1}{'*' if winner is f else ''}", "default" if f.number is None else str(f.number),
                         describe(f.schedule), R.fmt_ms(f.predicted_s),
                         "n/a" if not f.predicted_s else f"{work / f.predicted_s / scale:.2f}",
                         "n/a" if not f.predicted_s else R.fmt_pct(bound_s / f.predicted_s),
                         R.fmt_ms(again), str(f.bound_by), _res_text(f)])
        head = ["#", "trial", "schedule", "predicted ms", f"predicted {unit}", "% roofline",
                "re-predicted ms (compiled)", "bound by", "regs/smem/spill"]
        n_rows = len(finals) - (info.get("fallback") is not None)
        how = ("* = winner: the compiled one without register spills with the lowest re-predicted ms"
               if not info.get("fallback") else
               f"* = winner: the library default (last row), because {info['fallback']}")
        title = (f"best predicted schedule of each tile structure ({n_rows} rows, by predicted ms); "
                 f"{info.get('compiled', 0)} compiled for {target.arch} ({info.get('clean', 0)} without register "
                 "spills" + (f"; {info['extra']} of them beyond --compile-top, by predicted rank, looking for one "
                             f"without spills, {info['skipped']} skipped as bound to spill by their register "
                             "estimate" if info.get("extra") or info.get("skipped") else "") + "); " + how + "\n"
                 "  predicted ms: the cost model from the schedule alone (what the search ranked by; predicted "
                 f"{unit} and % roofline come from it); re-predicted ms (compiled): the same model given the "
                 "compiled kernel's registers and spills (n/a: not compiled); regs/smem/spill: ptxas")
    lines += ["", title, R.table(rows, head) if rows else "(no complete trial)"]
    if len(tied) > 1:
        lines.append(f"statistical tie among trials {[c['number'] for c in tied]} (within max(1%, spread)); "
                     "the lowest trial number wins, deterministically")
    lines.append("")
    lines.append(f"time: search {search_s:.1f} s wall; compile {split['compile_s']:.2f} s for {split['compiles']} "
                 f"kernels ({'CPU, summed over the pool' if mode == 'measured' else 'the finalists and the export'}"
                 f"; a kernel already in the compile cache costs ~0 s), verify {split['verify_s']:.1f} s, "
                 f"measure {split['measure_s']:.1f} s, cost model {split['predict_s']:.2f} s")
    owned = _owned_complete(study)
    if mode == "measured":
        pairs = [(t.user_attrs["predicted_s"], t.value) for t in owned if t.user_attrs.get("predicted_s")]
        rho = R.spearman([p for p, _ in pairs], [v for _, v in pairs])
        lines.append(f"cost model ranking: Spearman rho(predicted, measured) = "
                     f"{'n/a' if rho is None else f'{rho:.3f}'} over {len(pairs)} measured trials")
        if winner is not None and pairs:
            by_pred = sorted((t for t in owned if t.user_attrs.get("predicted_s")),
                             key=lambda t: (t.user_attrs["predicted_s"], t.number))
            top10 = [t.number for t in by_pred[:10]]
            lines.append(f"measured best (trial {winner.number}) in the model's top 10 of the measured trials: "
                         f"{'yes' if winner.number in top10 else 'no'} (model top 10: {top10})")
    else:
        lines.append("cost model ranking vs measurement: n/a (model-only: nothing measured)")
    imp, how = R.importances(study)
    if imp:
        lines.append("knob importances (" + how + ", objective = " + ("measured" if mode == "measured"
                     else "predicted") + " time): " + ", ".join(f"{k} {v:.2f}" for k, v in imp.items()))
    else:
        lines.append(f"knob importances: {how}")
    reasons: dict[str, int] = {}
    for t in study.get_trials(deepcopy=False):
        rule = t.user_attrs.get("rule")
        if rule:
            reasons[str(rule)] = reasons.get(str(rule), 0) + 1
    if reasons:
        lines.append("pruned by rule: " + ", ".join(f"{k} {v}" for k, v in sorted(reasons.items(), key=lambda x: -x[1])))
    if info.get("roofline"):
        lines.append(info["roofline"])
    return "\n".join(lines)


def _op_text(op) -> str:
    try:
        return family_of_op(op).op_text(op)
    except (KeyError, TypeError, ValueError):
        return json.dumps(op.to_dict())


def vendor_name(family: str, op) -> str:
    """The vendor call the worker times next to the candidates (``Bench.vendor_name``)."""
    return get_family(family).bench(op).vendor_name


def _export(cfg, folder: str, op, target, winner: Finalist, vendor_s, mode, study_name, model, out) -> list:
    import cupy

    import tiledsl
    from tiledsl.compile import nvrtc_version
    from tiledsl.registry import make_record, shipped_path, store


    k = tiledsl.compile(op, winner.schedule, arch=target.arch)
    measured = None
    if mode == "measured":
        measured = {"median_s": winner.median_s, "spread": winner.spread, "vendor_s": vendor_s,
                    "percent_of_vendor": None if not vendor_s else 100 * vendor_s / winner.median_s}
    rec = make_record(cfg.family, op, target, winner.schedule,
                      mode=mode, measured=measured,
                      predicted={"predicted_s": winner.predicted_s, "bound_by": winner.bound_by, "model": model.label},
                      compiler={"nvrtc": list(nvrtc_version()), "cupy": cupy.__version__, "options": list(k.options)},
                      kernel={"name": k.name, "block": list(k.block), "dynamic_smem_bytes": k.dynamic_smem_bytes,
                              **k.resources()},
                      study=study_name, storage=mask(cfg.storage), trial=winner.number, date=_now(),
                      command=mask_text(cfg.command))
    files = export.write(folder, cfg.family, op, winner.schedule, k, rec, target=target)
    out(f"exported: {', '.join(map(str, files))}")
    if mode == "measured":
        figs = {kk: rec[kk] for kk in ("mode", "measured", "predicted", "compiler", "date", "command")}
        try:
            path = store(cfg.family, op, target, winner.schedule, **figs)
            out(f"stored for schedule=None: {path}")
            if cfg.ship:
                ship = store(cfg.family, op, target, winner.schedule, path=shipped_path(cfg.family, target.arch),
                             **figs)
                out(f"shipped: {ship}")
        except Exception as exc:  # OSError, filelock.Timeout, a record failing its schema: the export stands
            out(f"warning: the winner was exported but not stored for schedule=None: {type(exc).__name__}: {exc}")
    else:
        out("not stored for schedule=None: a model-only winner is a prediction, never measured")
    return files


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


def _positive_seconds(text: str) -> float:
    import math

    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (math.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"{text!r} must be a number of seconds > 0")
    return v


def _common(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--trials", type=positive_int, default=200,
                    help="candidates this run evaluates (measured, or predicted with --model-only; a duplicate counts, "
                         "reusing the earlier value); points pruned by a rule are recorded in the study too but not "
                         "counted (at most 20x --trials points are sampled)")
    sp.add_argument("--timeout", type=_positive_seconds, default=None, metavar="SECONDS",
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
    sp.add_argument("--jobs", type=positive_int, default=None, help="compile processes (default: CPUs - 1, at most 8, or 4 per GPU of --gpus)")
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
    return TuneConfig(family=args.family, op=op, trials=args.trials, timeout_s=args.timeout, sampler=args.sampler,
                      seed=args.seed, storage=args.storage, study_name=args.study_name, export=args.export,
                      export_default=args.export is None, report_json=args.report_json,
                      model_only=args.model_only, device=args.device, jobs=args.jobs, seed_top=args.seed_top,
                      compile_top=args.compile_top, final_top=args.final_top, ship=args.ship,
                      progress=not args.no_progress, stale_after_s=args.stale_after, gpus=_gpus(args),
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
    from tiledsl.registry import lookup_explain

    target = tiledsl.Target.current() if tiledsl.gpu_available() else tiledsl.Target.known(cfg.device or DEFAULT_DEVICE)
    sched, reasons = lookup_explain(cfg.family, cfg.op, target)
    print(f"lookup {cfg.family} {_op_text(cfg.op)} on {target.name} ({target.arch}):")
    for r in reasons:
        print(f"  miss: {r}")
    print(f"  -> {'hit: ' + describe(sched) if sched is not None else 'no stored schedule (schedule=None uses the default)'}")
    return 0


def check_args(args: argparse.Namespace) -> str | None:
    """What is wrong with arguments the parser accepted, found before any search starts, or None:
    ``--export`` (or the default results folder) cannot be created or written (:func:`export_problem`),
    ``--report-json`` names a folder or a place no file can be written, ``--storage`` cannot be parsed or
    opened (URL, password masked, and reason)."""
    if args.lookup:
        return None
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

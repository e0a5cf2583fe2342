"""One trial's way through the study: asked, screened, told.

:class:`TrialBook` is the only part of a ``search.tune`` run that writes trials: it asks the study for a
point, screens it (the schedule's rule table, ``--model-prune``, a schedule another trial owns), records
what the compile pool and the device workers answer, and tells the study the outcome, counting each one
on the :class:`search.observers.SearchObserver`. A trial that another worker expired meanwhile (no
heartbeat) is dropped with a warning, whatever step it was in.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from .objective import Model, claim, find_duplicate
from .observers import SearchObserver, TimeSplit
from .space import Rejection, Space, schedule_key
from .storage import Heartbeat, expire_stale, heartbeat_interval
from .strategy import LIBRARY_DEFAULT, MODEL_PRUNE_RULE, ModelPruner, ask_waiting


def _attr(trial, **kv) -> None:
    for k, v in kv.items():
        if v is not None:
            trial.set_user_attr(k, v)


@dataclass(frozen=True)
class Candidate:
    """A screened trial to evaluate: its schedule and, when already known, its predicted seconds."""

    trial: object
    schedule: object
    predicted_s: float | None


class TrialBook:
    """Asks, screens and tells the trials of one run.

    Args:
        study: the Optuna study.
        space: the family's search space (bound to the op).
        model: the cost model.
        op: the op tuned; ``target``: the device (its model for ``--model-only``).
        worker_id: ``host:pid``, recorded on every trial.
        observer: counts the outcomes and drives the search's bar.
        pruner: ``--model-prune`` (disabled: prunes nothing).
        split: the run's time accounting.
        beat: the heartbeat of the trials this process holds.
        stale_after_s: ``--stale-after`` (seconds).
        predict_here: predict each screened schedule in this process (``--model-only``, or ``--model-prune``
            which needs the prediction before compiling); False: the compile pool predicts it.
        model_only: the device workers are cost-model stand-ins (their "measure" seconds are predictions).
        out: where warnings are printed.
        first: the storage id of the library default's WAITING trial (:func:`search.strategy.seed_study`),
            asked before any other waiting trial; None: the study's order (oldest waiting first).

    A measured trial's throughput is the observer's ``work / seconds / scale``, in its ``unit``.
    """

    def __init__(self, study, space: Space, model: Model, op, target, worker_id: str, observer: SearchObserver,
                 pruner: ModelPruner, split: TimeSplit, beat: Heartbeat, stale_after_s: float,
                 predict_here: bool, model_only: bool, out=print, first: int | None = None) -> None:
        self.study, self.space, self.model, self.op, self.target = study, space, model, op, target
        self.worker_id, self.observer, self.pruner, self.split, self.beat = worker_id, observer, pruner, split, beat
        self.stale_after_s, self.predict_here, self.model_only = stale_after_s, predict_here, model_only
        self.out, self.first = out, first
        self.predicted: dict[int, float | None] = {}  # trial number -> predicted seconds, until it is told
        self.asked = 0
        self._last_expiry = time.monotonic()

    # ---------------------------------------------------------------- telling

    def finish(self, trial, state, value=None, kind=None) -> None:
        """Tell the study ``trial`` ended in ``state`` (``value``: seconds, COMPLETE only) and count it as
        ``kind`` (default: the state's name; "dup" for duplicates, "model_pruned" for ``--model-prune``).

        Raises:
            optuna.exceptions.UpdateFinishedTrialError: another worker expired the trial meanwhile.
        """
        import optuna
        from optuna.trial import TrialState

        try:
            self.study.tell(trial, value if state == TrialState.COMPLETE else None, state=state)
        except ValueError as exc:  # "Cannot tell a FAIL trial.": another worker expired it meanwhile
            if self.study._storage.get_trial(trial._trial_id).state.is_finished():
                raise optuna.exceptions.UpdateFinishedTrialError(str(exc)) from exc
            raise
        self.beat.release(trial)
        predicted = self.predicted.pop(trial.number, None)
        kind = kind or {TrialState.COMPLETE: "complete", TrialState.PRUNED: "pruned", TrialState.FAIL: "fail"}[state]
        if kind == "complete":
            self.pruner.observe(predicted, trial.number)
        self.observer.told(kind, value if state == TrialState.COMPLETE else None)

    def lost(self, trial) -> None:
        """Another worker failed ``trial`` as stale (no heartbeat) while this one held it: drop its result."""
        self.beat.release(trial)
        self.predicted.pop(trial.number, None)
        self.observer.lost()
        self.out(f"warning: trial {trial.number} was marked FAIL by another worker (no heartbeat for "
                 f"{self.stale_after_s} s: was this process suspended?); its result is dropped")

    def _guard(self, trial, step, *args):
        """``step(trial, *args)``, or None after :meth:`lost` when another worker expired the trial."""
        import optuna

        try:
            return step(trial, *args)
        except optuna.exceptions.UpdateFinishedTrialError:
            self.lost(trial)
            return None

    # ---------------------------------------------------------------- asking and screening

    def next(self) -> Candidate | None:
        """Ask the study for a point and screen it; the candidate to evaluate, or None (told already)."""
        if time.monotonic() - self._last_expiry > heartbeat_interval(self.stale_after_s):
            expire_stale(self.study, self.stale_after_s)
            self._last_expiry = time.monotonic()
        trial = self._ask()
        self.beat.hold(trial)
        self.asked += 1
        return self._guard(trial, self._screen)

    def _ask(self):
        """The library default's waiting trial the first time (unless another worker took it), then
        ``study.ask()``: Optuna has no way to reorder its queue, so the default is taken out of it."""
        first, self.first = self.first, None
        trial = None if first is None else ask_waiting(self.study, first)
        if trial is None:
            return self.study.ask()
        if trial.user_attrs.get("seeded_by") != LIBRARY_DEFAULT:  # enqueued as a model seed: exempt all the same
            trial.set_user_attr("seeded_by", LIBRARY_DEFAULT)
        return trial

    def _predict(self, trial, built) -> float | None:
        t0 = time.perf_counter()
        ex = self.model.explain(self.op, built, self.target)
        self.split.predict_s += time.perf_counter() - t0
        _attr(trial, predicted_s=ex.get("predicted_s"), bound_by=ex.get("bound_by"))
        self.predicted[trial.number] = ex.get("predicted_s")
        return ex.get("predicted_s")

    def _screen(self, trial) -> Candidate | None:
        """Sample, validate, model-prune, de-duplicate and predict; the candidate or None (told)."""
        from optuna.trial import TrialState

        params = self.space.suggest(trial)
        built = self.space.build(params, self.target, self.op)
        if isinstance(built, Rejection):
            _attr(trial, pruned_reason=built.message, rule=built.rule, worker=self.worker_id)
            self.finish(trial, TrialState.PRUNED)
            return None
        predicted = None
        # before the claim (a pruned point owns nothing, like a rule-pruned one); never the library default,
        # which is measured whatever the model says (strategy.seed_study)
        if self.pruner.enabled and trial.user_attrs.get("seeded_by") != LIBRARY_DEFAULT:
            predicted = self._predict(trial, built)
            why = self.pruner.verdict(predicted)
            if why is not None:
                _attr(trial, schedule=built.to_dict(), pruned_reason=why, rule=MODEL_PRUNE_RULE, worker=self.worker_id)
                self.finish(trial, TrialState.PRUNED, kind="model_pruned")
                return None
        key = schedule_key(built)
        claim(trial, key)
        _attr(trial, schedule=built.to_dict(), worker=self.worker_id)
        dup = find_duplicate(self.study, trial, key)
        if dup is not None:
            trial.set_user_attr("duplicate_of", dup.number)
            if dup.state == TrialState.COMPLETE:
                self.finish(trial, TrialState.COMPLETE, dup.value, kind="dup")
            elif dup.state == TrialState.FAIL:
                _attr(trial, error=f"duplicate of failed trial {dup.number}: {dup.user_attrs.get('error')}")
                self.finish(trial, TrialState.FAIL, kind="dup")
            else:
                _attr(trial, pruned_reason=f"duplicate of trial {dup.number} ({dup.state.name.lower()})",
                      rule="duplicate")
                self.finish(trial, TrialState.PRUNED, kind="dup")
            return None
        if predicted is None and self.predict_here:
            predicted = self._predict(trial, built)
        return Candidate(trial, built, predicted)

    # ---------------------------------------------------------------- outcomes

    def predicted_outcome(self, c: Candidate) -> None:
        """``--model-only`` in this process: the prediction is the trial's value."""
        self._guard(c.trial, self._predicted_outcome, c.predicted_s)

    def _predicted_outcome(self, trial, predicted_s: float | None) -> None:
        from optuna.trial import TrialState

        if predicted_s is None:
            _attr(trial, error="the cost model could not predict this schedule")
            self.finish(trial, TrialState.FAIL)
        else:
            _attr(trial, time_s=predicted_s)
            self.finish(trial, TrialState.COMPLETE, predicted_s)

    def ready_to_measure(self, c: Candidate, res: dict | None) -> bool:
        """Measured mode: record ``c``'s compile result ``res`` (None: nothing compiled) and claim it again;
        True when it goes to a device (False: told FAIL, told a duplicate, or lost)."""
        return bool(self._guard(c.trial, self._ready, c.schedule, res))

    def _ready(self, trial, sched, res: dict | None) -> bool:
        return self._compiled(trial, res) and self._still_owner(trial, sched)

    def _compiled(self, trial, res: dict | None) -> bool:
        from optuna.trial import TrialState

        if res is None:
            return True
        self.split.compiled(res.get("compile_s", 0.0))
        self.split.predict_s += res.get("predict_s", 0.0)
        _attr(trial, predicted_s=res.get("predicted_s"), bound_by=res.get("bound_by"))
        if res.get("predicted_s") is not None:
            self.predicted[trial.number] = res["predicted_s"]
        if not res["ok"]:
            _attr(trial, error=res["error"][:4000], stage="compile")
            self.finish(trial, TrialState.FAIL)
            return False
        _attr(trial, registers=res["registers"], smem_bytes=res["smem_bytes"], spill_bytes=res["spill_bytes"],
              predicted_compiled_s=res.get("predicted_compiled_s"))
        return True

    def _still_owner(self, trial, sched) -> bool:
        """Claims again just before measuring: a claim of the same schedule by another host whose clock runs
        behind ours may have landed after :meth:`_screen` looked; the earliest claim keeps it, the others
        are told duplicates (so a schedule is measured once unless the clocks differ by more than the
        time between a trial's claim and its measurement)."""
        from optuna.trial import TrialState

        dup = find_duplicate(self.study, trial, schedule_key(sched))
        if dup is None:
            return True
        trial.set_user_attr("duplicate_of", dup.number)
        _attr(trial, pruned_reason=f"duplicate of trial {dup.number} ({dup.state.name.lower()})", rule="duplicate")
        self.finish(trial, TrialState.PRUNED, kind="dup")
        return False

    def measure_request(self, sched) -> dict:
        """The device worker's request for ``sched`` (with the best time so far, to cut a slow one short)."""
        best = self.observer.best_s
        return {"cmd": "measure", "schedule": sched.to_dict(), "best_ms": None if best is None else best * 1e3}

    def measured(self, c: Candidate, m: dict, device: int) -> None:
        """The worker's answer ``m`` for ``c``, measured on ``device``: told COMPLETE or FAIL."""
        self._guard(c.trial, self._measured, m, device)

    def _measured(self, trial, m: dict, device: int) -> None:
        from optuna.trial import TrialState

        trial.set_user_attr("device", device)
        self.split.verify_s += m.get("verify_s", 0.0)
        if self.model_only:  # a stand-in predicts
            self.split.predict_s += m.get("measure_s", 0.0)
        else:
            self.split.measure_s += m.get("measure_s", 0.0)
        if not m.get("ok"):
            _attr(trial, error=str(m.get("error"))[:4000], stage=m.get("stage"))
            self.finish(trial, TrialState.FAIL)
            return
        t = m["median_ms"] / 1e3
        o = self.observer
        _attr(trial, time_s=t, throughput=o.work / t / o.scale, throughput_unit=o.unit,
              spread=m["spread"], repeats=m["repeats"], timing=m["timing"], max_rel_err=m["max_rel_err"])
        self.finish(trial, TrialState.COMPLETE, t)

    def close(self) -> None:
        """Trials asked but not evaluated are told FAIL without ``error`` (they own nothing); the heartbeat stops."""
        from optuna.trial import TrialState

        for trial in self.beat.held():
            try:
                self.study.tell(trial, state=TrialState.FAIL)
            except Exception:  # the storage refused (e.g. cut mid-commit): the heartbeat expiry will fail it
                pass
        self.beat.stop()

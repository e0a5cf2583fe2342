"""Which schedules a ``search.tune`` run evaluates: the Optuna sampler, the cost model's seeds, model pruning.

* :func:`make_sampler`: the sampler that proposes points (tpe, random, grid, cmaes, qmc), seeded.
* :func:`predict_seeds` / :func:`seed_study`: the library default, then the cost model's best predictions
  among the space's seed candidates, are enqueued; the default is asked first in every run until it is
  measured, even ahead of seeds an earlier run left waiting (:func:`ask_waiting`).
* :class:`ModelPruner` (``--model-prune FACTOR``): a sampled schedule whose predicted time is more than
  FACTOR × the best prediction among the study's evaluated trials is not worth compiling or measuring; it
  is told PRUNED (``rule = "model_prune"``, ``pruned_reason`` saying by how much), like the cost-model
  pruning of Triton's autotuner (``prune_configs_by={"perf_model": ..., "top_k": ...}``), but as a ratio
  to the best rather than a count, because the points arrive one at a time.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from .objective import Model, claimed_key, trial_problem
from .space import Rejection, Space, schedule_key, tie_key

SAMPLERS = ("tpe", "random", "grid", "cmaes", "qmc")
MODEL_PRUNE_RULE = "model_prune"  # the ``rule`` user attribute of a trial pruned by the cost model
LIBRARY_DEFAULT = "library default"  # the ``seeded_by`` user attribute of the library default's trial


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


def predict_seeds(space: Space, model: Model, op, target, top: int, budget_s: float = 15.0) -> list[tuple]:
    """The cost model's ``top`` schedules among the space's seed candidates, as (predicted_s, schedule);
    equal predictions in :func:`search.space.tie_key` order (the library default first). Candidates are
    scored for at most ``budget_s`` seconds."""
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


def library_default(space: Space, op, target):
    """The schedule ``schedule=None`` picks for ``op`` where no tuned record applies (the family's
    ``builtin_schedule``), made canonical for the op; None where the family has none, the schedule is refused
    on ``target`` or the space cannot express it (e.g. the GEMV kernel outside the tiled GEMM space)."""
    from tiledsl.api import family as get_family
    from tiledsl.errors import TiledslError

    fam = get_family(space.family)
    if fam.builtin_schedule is None:
        return None
    try:
        s = fam.builtin_schedule(op, target)
        s = space.canonicalize(s, op)
    except TiledslError:
        return None
    return s if space.from_schedule(s) is not None else None


def seed_study(study, space: Space, model: Model, op, target, top: int) -> int | None:
    """Enqueue the library's default for the op (``seeded_by = "library default"``: a tune measures what
    ``schedule=None`` would run, so the record it stores is never slower), then the cost model's ``top``
    predictions (once per study and point: ``skip_if_exists``; they carry ``seeded_by_model``).

    The default is enqueued unless a trial of the study settles it (:func:`settles_default`); one already
    WAITING is not enqueued again. Optuna pops WAITING trials first in, first out, so in a resumed study
    the default would wait behind the seeds an earlier run left waiting: the run asks it first instead
    (:class:`search.trials.TrialBook` ``first``, :func:`ask_waiting`).

    Returns:
        The storage id of the default's WAITING trial, to ask before any other; None when the default is
        settled or the space cannot express it.
    """
    default = library_default(space, op, target)
    first = None
    if default is not None:
        params = space.from_schedule(default)
        built = space.build(params, target, op)
        key = None if isinstance(built, Rejection) else schedule_key(built)
        settled, waiting = _default_trials(study, params, key)
        if not settled and waiting is None:
            # not skip_if_exists: a trial of this point that was never evaluated (FAIL without error) would skip it
            study.enqueue_trial(params, user_attrs={"seeded_by": LIBRARY_DEFAULT})
            settled, waiting = _default_trials(study, params, key)
        first = None if settled or waiting is None else waiting._trial_id
    for _, s in predict_seeds(space, model, op, target, top):
        params = space.from_schedule(s)
        if params is not None:
            study.enqueue_trial(params, user_attrs={"seeded_by_model": True}, skip_if_exists=True)
    return first


def settles_default(t) -> bool:
    """Whether trial ``t`` of the library default's point means it needs no trial of its own: COMPLETE or
    RUNNING (measured, or being measured), FAIL with an ``error`` (it would fail again), PRUNED by a rule or as a
    duplicate (it would be again). A FAIL without ``error`` (never evaluated: its worker died or the run was
    interrupted), a model-pruned trial (a sampled copy of the point, in a run before the default was seeded)
    and a WAITING one do not."""
    from optuna.trial import TrialState

    if t.state in (TrialState.COMPLETE, TrialState.RUNNING):
        return True
    if t.state == TrialState.FAIL:
        return "error" in t.user_attrs
    if t.state == TrialState.PRUNED:
        return t.user_attrs.get("rule") != MODEL_PRUNE_RULE
    return False


def _default_trials(study, params: dict, key: str | None) -> tuple[bool, object | None]:
    """(whether a trial of the default's point settles it, the first WAITING one or None). A trial is of the
    point when its enqueued or sampled parameters are ``params`` or it claimed the schedule ``key``."""
    from optuna.trial import TrialState

    waiting = None
    for t in study.get_trials(deepcopy=False):
        if t.system_attrs.get("fixed_params", t.params) != params and (key is None or claimed_key(study, t) != key):
            continue
        if t.state == TrialState.WAITING:
            waiting = waiting or t
        elif settles_default(t):
            return True, None
    return False, waiting


def ask_waiting(study, trial_id: int):
    """The WAITING trial ``trial_id`` taken to RUNNING, as ``study.ask()`` takes the oldest one (the same
    storage transaction, so one worker takes it), or None when another worker took or finished it first."""
    import optuna
    from optuna.trial import TrialState

    try:
        if not study._storage.set_trial_state_values(trial_id, state=TrialState.RUNNING):
            return None
    except optuna.exceptions.UpdateFinishedTrialError:
        return None
    return optuna.Trial(study, trial_id)


def check_factor(factor: float | None) -> float | None:
    """``factor`` when it is a valid ``--model-prune`` factor (a finite number > 1) or None (off).

    Raises:
        ValueError: not a finite number > 1 (the message names the flag and the value).
    """
    if factor is None:
        return None
    if not (isinstance(factor, (int, float)) and math.isfinite(factor) and factor > 1):
        raise ValueError(f"--model-prune {factor!r}: must be a finite number > 1 (a factor of the best prediction)")
    return float(factor)


@dataclass(frozen=True)
class Reference:
    """The best prediction so far: ``predicted_s`` (seconds) of trial ``number``."""

    predicted_s: float
    number: int


class ModelPruner:
    """``--model-prune FACTOR``: skip schedules predicted far slower than the best prediction so far.

    The reference is the lowest ``predicted_s`` among the study's evaluated trials (COMPLETE and owning
    their schedule: those already in the study when the run starts, then each one this run completes).
    Predictions are compared with predictions, never with measured times: the model's bias (measured /
    predicted ≈ 1.5–2.3 for GEMM, ``docs/costmodel.md``) cancels in the ratio. Until a trial with a
    prediction has completed nothing is pruned, and a schedule the model cannot predict is never pruned.

    Args:
        factor: FACTOR (> 1), or None: prune nothing.

    Raises:
        ValueError: ``factor`` is not None and not a finite number > 1.
    """

    def __init__(self, factor: float | None) -> None:
        self.factor = check_factor(factor)
        self.best: Reference | None = None

    @property
    def enabled(self) -> bool:
        return self.factor is not None

    def observe(self, predicted_s: float | None, number: int) -> None:
        """Trial ``number``, predicted at ``predicted_s`` seconds (None: no prediction), was evaluated."""
        if predicted_s is None or not math.isfinite(predicted_s) or predicted_s <= 0:
            return
        if self.best is None or predicted_s < self.best.predicted_s:
            self.best = Reference(predicted_s, number)

    def observe_study(self, study) -> None:
        """Take the reference from the study's evaluated trials (a resumed or shared study)."""
        from optuna.trial import TrialState

        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            if "duplicate_of" not in t.user_attrs and trial_problem(t) is None:
                self.observe(t.user_attrs.get("predicted_s"), t.number)

    def verdict(self, predicted_s: float | None) -> str | None:
        """Why a schedule predicted at ``predicted_s`` seconds is pruned, or None when it is evaluated."""
        if self.factor is None or self.best is None or predicted_s is None:
            return None
        if predicted_s <= self.factor * self.best.predicted_s:
            return None
        return (f"predicted {predicted_s * 1e3:.4g} ms = {predicted_s / self.best.predicted_s:.1f}x the best "
                f"prediction so far ({self.best.predicted_s * 1e3:.4g} ms, trial {self.best.number}), more than "
                f"--model-prune {self.factor:g}")

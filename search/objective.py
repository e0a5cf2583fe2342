"""What a trial is worth: the cost model, the roofline bound, duplicates.

The cost model is ``tiledsl.costmodel``: ``predict(op, schedule, device, kernel=None) -> seconds`` and
``tiledsl.explain(op, schedule, device=...).to_dict()`` with ``predicted_s`` and ``bound_by``.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass

from tiledsl.gemm.op import GemmOp


@dataclass(frozen=True)
class Model:
    """``tiledsl.costmodel`` as the search uses it.

    Attributes:
        label: what is predicting (printed in every report).
    """

    label: str = "tiledsl.costmodel"

    def predict(self, op, schedule, target, kernel=None) -> float | None:
        """Predicted seconds of one call (``kernel``: a compiled :class:`tiledsl.Kernel` whose ptxas
        registers and spills replace the estimates), or None when the prediction is not a positive
        finite number. Exceptions of the model propagate (a bug, not a property of the point)."""
        from tiledsl import costmodel

        value = float(costmodel.predict(op, schedule, target, kernel=kernel))
        return value if math.isfinite(value) and value > 0 else None

    def explain(self, op, schedule, target) -> dict:
        """``{"predicted_s": ..., "bound_by": ...}`` from ``tiledsl.explain``."""
        import tiledsl

        d = tiledsl.explain(op, schedule, device=target).to_dict()
        p = d.get("predicted_s")
        ok = p is not None and math.isfinite(p) and p > 0
        return {"predicted_s": float(p) if ok else None, "bound_by": d.get("bound_by")}


def load_model() -> Model:
    """tiledsl's cost model."""
    return Model()


# ---------------------------------------------------------------- roofline bound


def compulsory_bytes(op) -> int:
    """Bytes every kernel must move at least once, inputs read and output written: the op's own figure
    (``GemmOp.compulsory_bytes``; ``bytes`` or ``bytes_moved`` of the other families), 0 where it has none."""
    for name in ("compulsory_bytes", "bytes", "bytes_moved"):
        v = getattr(op, name, None)
        if v is not None:
            return int(v() if callable(v) else v)
    return 0


def roofs(op, target) -> tuple[tuple[float, str, str], tuple[float, str]]:
    """((compute FLOP/s, unit name, source), (HBM bytes/s, source)) for ``op`` on ``target``: the same
    ceilings ``explain()`` uses (:meth:`tiledsl.Target.ceilings`: the calibrated figure when ``calibrate()``
    has run, the datasheet otherwise), with the tensor-core rate for 16-bit and tf32 GEMMs
    (:meth:`tiledsl.Target.tensor_core_ceiling`)."""
    c = target.ceilings()
    hbm = c["hbm_bytes_per_s"]
    if isinstance(op, GemmOp) and op.tensor_core_inputs:
        rate, src = target.tensor_core_ceiling(op.precision)
        return (rate, f"{'tf32' if op.precision == 'tf32' else '16-bit'} tensor cores", src), (hbm.value, hbm.source)
    fp32 = c["fp32_flops_per_s"]
    return (fp32.value, "FP32", fp32.source), (hbm.value, hbm.source)


def roofline_bound_s(op, target) -> tuple[float, str]:
    """Lower bound on the time of one call: max(FLOP / compute roof, compulsory bytes / HBM roof), with the
    roofs of :func:`roofs`."""
    (peak, _, _), (hbm, _) = roofs(op, target)
    flops = float(getattr(op, "flops", 0) or 0)
    t_c = flops / peak if flops else 0.0
    t_m = compulsory_bytes(op) / hbm
    return (t_c, "compute") if t_c >= t_m else (t_m, "memory")


# ---------------------------------------------------------------- duplicates across workers


def warn_trial(study, number: int, problem: str) -> None:
    """One RuntimeWarning per process for a malformed trial of a (possibly shared) study; it is skipped."""
    key = (study.study_name, number, problem)
    if key in _WARNED:
        return
    _WARNED.add(key)
    warnings.warn(f"study {study.study_name!r}: trial {number} is malformed ({problem}); skipped",
                  RuntimeWarning, stacklevel=2)


_WARNED: set = set()


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def trial_problem(t, schedule_type=None) -> str | None:
    """What makes a COMPLETE trial unusable by the report and the finalists, or None.

    Checked: a finite value; ``schedule`` an object that ``schedule_type.from_dict`` accepts;
    ``predicted_s`` / ``spread`` absent, None or finite numbers.
    """
    if not _finite(t.value):
        return f"value {t.value!r} is not a finite number"
    sched = t.user_attrs.get("schedule")
    if not isinstance(sched, dict):
        return f"user attribute 'schedule' is {type(sched).__name__}, not an object"
    for k in ("predicted_s", "spread"):
        v = t.user_attrs.get(k)
        if v is not None and not _finite(v):
            return f"user attribute {k!r} is {v!r}, not a number"
    if schedule_type is not None:
        try:
            schedule_type.from_dict(sched)
        except Exception as exc:  # ScheduleError, TypeError, KeyError, ...: whatever a bad dict raises
            return f"its schedule does not load: {type(exc).__name__}: {exc}"
    return None


def _claim_of(study, t):
    """``(key, time, number)`` of ``t``'s claim, or None (none, or malformed: warned)."""
    c = t.user_attrs.get("claim")
    if c is None:
        return None
    if not (isinstance(c, list) and len(c) == 3 and isinstance(c[0], str) and _finite(c[1]) and _finite(c[2])):
        warn_trial(study, t.number, f"claim {c!r} is not [schedule key, time, trial number]")
        return None
    return c


def claimed_key(study, t) -> str | None:
    """The schedule key ``t`` claimed, or None (no claim, or a malformed one: warned)."""
    c = _claim_of(study, t)
    return c[0] if c else None


def claim(trial, key: str) -> None:
    """Mark ``trial`` as evaluating ``key`` (a user attribute, visible to every worker of the study)."""
    trial.set_user_attr("claim", [key, time.time(), trial.number])


def find_duplicate(study, trial, key: str):
    """The earlier trial that owns ``key``, or None when ``trial`` is the first to claim it.

    Claims are ordered by (claim time, trial number); the earliest claim owns the point, so two
    workers that sample the same schedule at the same moment evaluate it once. A FAIL trial without an
    ``error`` attribute owns nothing: it was never evaluated (its worker was killed and the heartbeat
    expired it, or the run was interrupted), so the point is evaluated again. A malformed claim is
    skipped with a warning.
    """
    from optuna.trial import TrialState

    mine = None
    best = None
    for t in study.get_trials(deepcopy=False):
        c = _claim_of(study, t)
        if not c or c[0] != key:
            continue
        if t.number == trial.number:
            mine = (c[1], c[2])
            continue
        if t.state == TrialState.WAITING:
            continue
        if t.state == TrialState.FAIL and "error" not in t.user_attrs:
            continue  # never evaluated (its worker died or was interrupted): it owns nothing
        order = (c[1], c[2])
        if best is None or order < best[0]:
            best = (order, t)
    if best is None:
        return None
    if mine is None or best[0] < mine:
        return best[1]
    return None

"""What a trial is worth: the cost model, the roofline bound, duplicates.

The cost model is ``tiledsl.costmodel``: ``predict(op, schedule, device, kernel=None) -> seconds`` and
``tiledsl.explain(op, schedule, device=...).to_dict()`` with ``predicted_s`` and ``bound_by``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass


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
    """Bytes every kernel must move at least once: inputs read and output written."""
    item = {"float16": 2, "bfloat16": 2, "float64": 8, "int64": 8}.get(getattr(op, "dtype", "float32"), 4)
    if hasattr(op, "flops") and hasattr(op, "k"):
        return item * (op.m * op.k + op.k * op.n + op.m * op.n * (2 if op.read_c else 1))
    for name in ("bytes", "bytes_moved", "compulsory_bytes"):
        v = getattr(op, name, None)
        if v is not None:
            return int(v() if callable(v) else v)
    return 0


def roofline_bound_s(op, target) -> tuple[float, str]:
    """Lower bound on the time of one call: max(FLOP / peak FP32, compulsory bytes / HBM bandwidth).

    Peak FP32 and HBM bandwidth come from :class:`tiledsl.Target` (datasheet or device).
    """
    flops = float(getattr(op, "flops", 0) or 0)
    t_c = flops / target.peak_fp32_flops if flops else 0.0
    t_m = compulsory_bytes(op) / target.hbm_bytes_per_s
    return (t_c, "compute") if t_c >= t_m else (t_m, "memory")


# ---------------------------------------------------------------- duplicates across workers


def claim(trial, key: str) -> None:
    """Mark ``trial`` as evaluating ``key`` (a user attribute, visible to every worker of the study)."""
    trial.set_user_attr("claim", [key, time.time(), trial.number])


def find_duplicate(study, trial, key: str):
    """The earlier trial that owns ``key``, or None when ``trial`` is the first to claim it.

    Claims are ordered by (claim time, trial number); the earliest claim owns the point, so two
    workers that sample the same schedule at the same moment evaluate it once.
    """
    from optuna.trial import TrialState

    mine = None
    best = None
    for t in study.get_trials(deepcopy=False):
        c = t.user_attrs.get("claim")
        if not c or c[0] != key:
            continue
        if t.number == trial.number:
            mine = (c[1], c[2])
            continue
        if t.state == TrialState.WAITING:
            continue
        order = (c[1], c[2])
        if best is None or order < best[0]:
            best = (order, t)
    if best is None:
        return None
    if mine is None or best[0] < mine:
        return best[1]
    return None

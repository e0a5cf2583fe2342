"""What a trial is worth: the cost model (or its labelled fallback), the roofline bound, duplicates.

The cost model is ``tiledsl.costmodel`` (``predict(op, schedule, device) -> seconds`` and
``tiledsl.explain(op, schedule, device=...).to_dict()`` with ``predicted_s`` and ``bound_by``). It is
imported lazily; where it is missing, :class:`Model` falls back to a small roofline heuristic defined
here and says so in its ``label`` (``fallback: ...``), which every report prints.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass


@dataclass
class Model:
    """A cost model as the search uses it.

    Attributes:
        label: what is predicting ("tiledsl.costmodel" or "fallback: ...").
        fallback: True when tiledsl's cost model was not available.
    """

    label: str
    fallback: bool
    _predict: object = None
    _explain: object = None

    def predict(self, op, schedule, target, kernel=None) -> float | None:
        """Predicted seconds of one call, or None when the model cannot predict this point.

        With ``kernel`` (a compiled :class:`tiledsl.Kernel`) the model may use its registers and spills.
        """
        try:
            if kernel is not None and not self.fallback:
                try:
                    return self._positive(self._predict(op, schedule, target, kernel=kernel))
                except TypeError:
                    pass
            value = float(_call_device(self._predict, op, schedule, target))
        except Exception:
            return None
        return value if math.isfinite(value) and value > 0 else None

    @staticmethod
    def _positive(value) -> float | None:
        value = float(value)
        return value if math.isfinite(value) and value > 0 else None

    def explain(self, op, schedule, target) -> dict:
        """``{"predicted_s": ..., "bound_by": ...}`` (values None where the model cannot say)."""
        try:
            rep = _call_device(self._explain, op, schedule, target)
            d = rep.to_dict() if hasattr(rep, "to_dict") else dict(rep)
            return {"predicted_s": d.get("predicted_s"), "bound_by": d.get("bound_by")}
        except Exception as exc:
            return {"predicted_s": self.predict(op, schedule, target), "bound_by": None,
                    "explain_error": f"{type(exc).__name__}: {exc}"}


def _call_device(fn, op, schedule, target):
    """Call ``fn(op, schedule, device)`` with the Target, or its name if the Target is refused."""
    try:
        return fn(op, schedule, target)
    except TypeError:
        return fn(op, schedule, target.name)


def load_model() -> Model:
    """tiledsl's cost model when importable, else the labelled fallback heuristic."""
    try:
        import tiledsl
        from tiledsl import costmodel  # noqa: F401  (the module the cost-model issue adds)

        predict = getattr(costmodel, "predict", None)
        explain = getattr(tiledsl, "explain", None) or getattr(costmodel, "explain", None)
        if predict is None and explain is None:
            raise ImportError("tiledsl.costmodel has neither predict nor explain")
        if predict is None:
            def predict(op, s, device):
                return explain(op, s, device=device).to_dict()["predicted_s"]
        if explain is None:
            def explain(op, s, device):
                return {"predicted_s": predict(op, s, device), "bound_by": None}
        else:
            ex = explain

            def explain(op, s, device):
                return ex(op, s, device=device)
        return Model("tiledsl.costmodel", False, predict, explain)
    except ImportError as exc:
        return Model(f"fallback: search.objective roofline heuristic (tiledsl.costmodel unavailable: {exc})",
                     True, fallback_predict, fallback_explain)


# ---------------------------------------------------------------- fallback heuristic


def _gemm_fallback(op, s, target) -> tuple[float, str]:
    """A coarse GEMM estimate: padded FLOP at a thread-tile efficiency vs. tile traffic from L2/HBM.

    * blocks = ceil(M/bm)·ceil(N/bn); resident blocks per SM limited by threads, shared memory and
      registers (≈ rm·rn + rm + rn + 32 per thread); waves = ceil(blocks / (SMs·resident)).
    * compute: waves · (2·bm·bn·K FLOP per block · resident) at peak FP32 × FMA share
      rm·rn / (rm·rn + (rm + rn)/vec4) × occupancy factor (≥ 8 warps per SM hide latency).
    * memory: A and B are re-read per tile: itemsize·M·N·K·(1/bm + 1/bn) bytes at 3× HBM (L2 reuse),
      plus C once at HBM bandwidth.
    """
    item = 2 if op.dtype in ("float16", "bfloat16") else 4
    tiles_m, tiles_n = -(-op.m // s.bm), -(-op.n // s.bn)
    blocks = max(tiles_m * tiles_n, 1)
    regs = s.rm * s.rn + s.rm + s.rn + 32
    smem = max(s.smem_bytes(), 1)
    resident = max(1, min(target.max_threads_per_sm // s.threads, target.smem_per_sm_bytes // smem,
                          target.regs_per_sm // (regs * s.threads), target.max_blocks_per_sm))
    waves = math.ceil(blocks / (target.sm_count * resident))
    warps = resident * s.threads / 32
    fma_share = (s.rm * s.rn) / (s.rm * s.rn + (s.rm + s.rn) / min(4, max(s.rm, s.rn)))
    occupancy = min(1.0, warps / 8.0)
    stall = 1.0 if s.double_buffer else 1.25
    per_sm_flops = target.peak_fp32_flops / target.sm_count
    t_compute = waves * resident * 2.0 * s.bm * s.bn * op.k / (per_sm_flops * fma_share * occupancy) * stall
    bytes_ab = item * op.m * op.n * op.k * (1.0 / s.bm + 1.0 / s.bn)
    t_memory = bytes_ab / (3.0 * target.hbm_bytes_per_s) + item * op.m * op.n / target.hbm_bytes_per_s
    if t_compute >= t_memory:
        return t_compute, "compute (fallback)"
    return t_memory, "memory (fallback)"


def fallback_predict(op, schedule, target) -> float:
    """Seconds predicted by the fallback heuristic (GEMM only; others use the roofline bound)."""
    return fallback_explain(op, schedule, target)["predicted_s"]


def fallback_explain(op, schedule, target) -> dict:
    """The fallback heuristic's prediction and the level it thinks binds."""
    if hasattr(op, "flops") and hasattr(schedule, "rm"):
        t, bound = _gemm_fallback(op, schedule, target)
        return {"predicted_s": t, "bound_by": bound}
    return {"predicted_s": roofline_bound_s(op, target)[0], "bound_by": "roofline bound (fallback)"}


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

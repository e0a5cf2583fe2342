"""The cost model: traffic per memory level (sympy), occupancy, wave quantization, Little's law, and a
roofline prediction that explains every kernel before it runs.

Public entry points::

    tiledsl.explain(op, schedule, device=None, kernel=None) -> Report   # print(r), r.to_dict(), r.expr
    tiledsl.costmodel.predict(op, schedule, device=None) -> float        # seconds; cheap, for the search

Sources: the kernel and multi-level roofline with instruction ceilings, Little's law (bytes in flight),
the traffic of a bm×bn block tile and an rm×rn thread tile and bank conflicts (``docs/design.md``,
"Background"); CUDA C++ Programming Guide (occupancy limits, shared-memory banks).
Formulas and a worked example: ``docs/costmodel.md``.
"""

from __future__ import annotations

import functools

from .. import family as families
from ..calibrate import load_calibration
from ..compile import Kernel
from ..errors import SpecTypeError
from ..occupancy import Occupancy, Waves, occupancy, waves
from ..spec import refuse_empty
from ..target import Target, check_device_type, resolve
from .gemm import estimate_registers, explain_gemm, predict_gemm
from .gemm_tc import explain_gemm_tc, predict_gemm_tc
from .report import LEVELS, Level, Report
from .stream import (
    StreamOp,
    StreamSchedule,
    array_sum,
    explain_reduce,
    explain_stream,
    explain_transpose,
    vector_add,
)

__all__ = [
    "LEVELS", "Level", "Occupancy", "Report", "StreamOp", "StreamSchedule", "Waves", "array_sum",
    "estimate_registers", "explain", "occupancy", "predict", "target_for", "vector_add", "waves",
]


@functools.cache
def _known_with_cache(name: str) -> Target:
    return Target.known(name)


def target_for(device: str | Target | None = None) -> Target:
    """The Target whose ceilings the model uses.

    ``None``: the current GPU, with the figures :func:`tiledsl.calibrate` cached for it (if any).
    A name ("H200"): the known-GPU table (no GPU needed). A :class:`Target`: itself.

    Raises:
        LaunchError: ``device`` is None and no GPU is present.
        SpecError: the name is not in the table.
        SpecTypeError: ``device`` is neither None, a name nor a Target.
    """
    if isinstance(device, Target):
        return device
    if isinstance(device, str):
        return _known_with_cache(device)
    check_device_type(device)  # not silently the GPU present
    return load_calibration(resolve(None))


def _kind(op) -> str:
    """"stream" for a :class:`StreamOp`, else the name of the op's registered family."""
    if isinstance(op, StreamOp):
        return "stream"
    try:
        return families.of(op).name
    except SpecTypeError:
        raise SpecTypeError(f"the cost model knows GemmOp, ReduceOp, TransposeOp and StreamOp, got "
                            f"{type(op).__name__}") from None


def explain(op, schedule=None, device: str | Target | None = None, kernel=None) -> Report:
    """Explain ``op`` under ``schedule`` on ``device``: bytes per level, intensity, ceilings, occupancy,
    waves, predicted time and what bounds it.

    Args:
        op: a GemmOp, ReduceOp or TransposeOp (its family's plan gives threads, vector widths, grid and
            register cap), or a :class:`StreamOp`
            (``vector_add(n)``, ``array_sum(n)``).
        schedule: its schedule (GemmSchedule, ReduceSchedule, TransposeSchedule, StreamSchedule);
            None picks the family's default (GEMM: :func:`tiledsl.gemm.default_schedule`).
        device: None = the current GPU (calibrated figures when cached), a known name ("H200", "H100",
            "A100", "sm_90") with no GPU needed, or a :class:`~tiledsl.Target`.
        kernel: a compiled :class:`~tiledsl.Kernel`: its ptxas registers, shared memory and spills
            replace the estimates in the occupancy.

    Returns:
        A :class:`Report`: ``print(r)`` for the table, ``r.to_dict()``, ``r.expr`` (sympy).

    Raises:
        SpecTypeError: the op is of no family the model knows.
        LaunchError: ``device`` is None and no GPU is present.

    Example:
        >>> import tiledsl
        >>> r = tiledsl.explain(tiledsl.GemmOp(4096, 4096, 4096), tiledsl.GemmSchedule(), device="H200")
        >>> r.levels["l2"].bytes
        4362076160
    """
    _check_args(op, schedule, kernel)
    t = target_for(device)
    _check_rules(op, schedule, t)
    kind = _kind(op)
    if kind == "stream":
        return explain_stream(op, schedule if isinstance(schedule, StreamSchedule) else StreamSchedule(), t,
                              kernel=kernel)
    fam = families.of(op)
    if schedule is None:
        schedule = fam.default_schedule(op, t)
    if kind == "gemm":
        if schedule.mma != "fma" and schedule.kernel != "gemv":  # the tensor-core GEMV streams: the GEMV model
            return explain_gemm_tc(op, schedule, t, kernel)
        return explain_gemm(op, schedule, t, kernel)
    plan = fam.plan(op, schedule, t)
    if kind == "transpose":
        return explain_transpose(op, schedule, t, kernel, plan)
    return explain_reduce(op, schedule, t, kernel, plan)


def predict(op, schedule, device: str | Target | None = None, kernel=None) -> float:
    """Predicted kernel time in seconds (the search's ranking function).

    GEMM takes a fast path (lambdified expressions, cached per-step counts: tens of µs per call);
    other families build the full report.

    Example:
        >>> import tiledsl
        >>> t = predict(tiledsl.GemmOp(4096, 4096, 4096), tiledsl.GemmSchedule(), "H200")
        >>> 1e-3 < t < 1e-2
        True
    """
    _check_args(op, schedule, kernel, need_schedule=True)
    t = target_for(device)
    _check_rules(op, schedule, t)
    if _kind(op) == "gemm":
        if schedule.mma != "fma" and schedule.kernel != "gemv":
            return predict_gemm_tc(op, schedule, t, kernel=kernel)
        return predict_gemm(op, schedule, t, ceilings=_ceilings(t), kernel=kernel)
    return explain(op, schedule, t, kernel).predicted_s


def _check_args(op, schedule, kernel, need_schedule: bool = False) -> None:
    """Refuse a schedule of another family, a non-Kernel ``kernel`` and an empty GEMM, by name."""
    for fam in families.registered():
        if isinstance(op, fam.op_type):
            if schedule is None and need_schedule:
                raise SpecTypeError(f"schedule=None: pass a {fam.schedule_type.__name__}")
            if schedule is not None and not isinstance(schedule, fam.schedule_type):
                raise SpecTypeError(f"schedule for {type(op).__name__} must be a {fam.schedule_type.__name__}, "
                                    f"got {type(schedule).__name__}")
            refuse_empty(op, "model")
    if kernel is not None and not isinstance(kernel, Kernel):
        raise SpecTypeError(f"kernel must be a tiledsl.Kernel (from tiledsl.compile), got {type(kernel).__name__}")


def _check_rules(op, schedule, target: Target) -> None:
    """The rules ``tiledsl.compile`` checks before emitting: the device's (``validate``) and the op's
    (``check_op``), so a schedule compile refuses is refused here with the same error.

    Raises:
        ScheduleError / ResourceError: as ``tiledsl.compile`` raises them.
    """
    if schedule is None or not hasattr(schedule, "validate"):  # a StreamSchedule: no rule table
        return
    schedule.validate(target)
    if hasattr(schedule, "check_op"):
        schedule.check_op(op)


@functools.lru_cache(maxsize=64)
def _ceilings(t: Target) -> dict:
    return t.ceilings()

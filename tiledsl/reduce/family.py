"""The reduction family record: op, schedule, rule table, plan, emitter and the default schedule."""

from __future__ import annotations

from .. import registry
from ..family import Family
from ..spec import refuse_empty
from ..target import Target
from .emit import emit_reduce
from .kernel_plan import plan_reduce
from .op import ReduceOp
from .schedule import REDUCE_RULES, ReduceSchedule


def default_schedule(op: ReduceOp, target: Target) -> ReduceSchedule:
    """The schedule for ``schedule=None``: the shipped preset ``"default"`` (warp shuffle, 16-byte
    loads, 4 loads in flight, one wave of blocks, deterministic two-pass combine); the row/column
    mapping inside it is chosen from the shape by the emitter (``row_threads=0``, ``col_rows=0``).

    A schedule tuned for exactly this op on this device (``python -m search.tune reduce … --export``,
    stored in the user store or shipped under ``schedules/reduce/``) is used first, after it validates;
    see :func:`tiledsl.registry.lookup_explain` for why a stored record was not used.
    """
    refuse_empty(op, "choose a schedule for")
    tuned = registry.lookup(REDUCE, op, target)
    if tuned is not None:
        return tuned
    return registry.preset(REDUCE, "default")


REDUCE = Family("reduce", ReduceOp, ReduceSchedule, REDUCE_RULES, plan_reduce, emit_reduce, default_schedule)

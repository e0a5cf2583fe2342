"""The reduction family record: op, schedule, rule table, plan, emitter and the default schedule."""

from __future__ import annotations

import dataclasses

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
    A reduction to one value of at least 2^20 elements keeps 8 loads in flight per thread instead: on
    the H200 the 2^29 float32 sum took 0.494 ms with 4 and 0.478 ms with 8 (CUB 0.477 ms;
    ``benchmarks/results/reduce_targets_h200_run2.json``), while rows gain nothing from it.

    A schedule tuned for exactly this op on this device (``python -m search.tune reduce … --export``,
    stored in the user store or shipped under ``schedules/reduce/``) is used first, after it validates;
    see :func:`tiledsl.registry.lookup_explain` for why a stored record was not used.
    """
    refuse_empty(op, "choose a schedule for")
    tuned = registry.lookup(REDUCE, op, target)
    return tuned if tuned is not None else builtin_schedule(op, target)


def builtin_schedule(op: ReduceOp, target: Target) -> ReduceSchedule:
    """:func:`default_schedule` without the tuned records: the shipped preset, 8 loads in flight for a long
    reduction to one value."""
    preset = registry.preset(REDUCE, "default")
    if op.out_size == 1 and op.length >= FULL_DEEP_MIN:
        return dataclasses.replace(preset, items_per_thread=8)
    return preset


FULL_DEEP_MIN = 1 << 20  # elements from which a reduction to one value keeps 8 loads in flight per thread


REDUCE = Family("reduce", ReduceOp, ReduceSchedule, REDUCE_RULES, plan_reduce, emit_reduce, default_schedule,
                builtin_schedule=builtin_schedule)

"""The transpose family record: op, schedule, rule table, plan, emitter and the default schedule."""

from __future__ import annotations

from dataclasses import replace

from .. import registry
from ..family import Family
from ..spec import refuse_empty
from ..target import Target
from .emit import emit_transpose
from .kernel_plan import plan_transpose
from .op import MAX_ACCESS_BYTES, TransposeOp
from .schedule import TRANSPOSE_RULES, TransposeSchedule

DEFAULT_PRESET = "padded_rows_vec_swizzle"


def default_schedule(op: TransposeOp, target: Target) -> TransposeSchedule:
    """The shipped schedule ``padded_rows_vec_swizzle``, its chunk widened to 16 bytes for the op's dtype.

    vec = 16 / itemsize (4 for 32-bit, 2 for 64-bit, 8 for 16-bit elements) and rows_per_thread
    chosen to keep the preset's thread count, so every dtype gets 16-byte loads and stores where the
    layout allows.

    A schedule tuned for exactly this op on this device (``python -m search.tune transpose … --export``,
    stored in the user store or shipped under ``schedules/transpose/``) is used first, after it
    validates; see
    :func:`tiledsl.registry.lookup_explain` for why a stored record was not used.
    """
    refuse_empty(op, "choose a schedule for")
    tuned = registry.lookup(TRANSPOSE, op, target)
    return tuned if tuned is not None else builtin_schedule(op, target)


def builtin_schedule(op: TransposeOp, target: Target) -> TransposeSchedule:
    """:func:`default_schedule` without the tuned records: the shipped preset with 16-byte chunks."""
    base: TransposeSchedule = registry.preset(TRANSPOSE, DEFAULT_PRESET)
    vec = MAX_ACCESS_BYTES // op.itemsize
    if vec == base.vec:
        return base
    # keep threads = (tile/vec)·(tile/rows_per_thread) fixed: rows_per_thread scales with 1/vec
    rows = max(1, min(base.tile, base.rows_per_thread * base.vec // vec))
    return replace(base, vec=vec, rows_per_thread=rows)


TRANSPOSE = Family("transpose", TransposeOp, TransposeSchedule, TRANSPOSE_RULES, plan_transpose, emit_transpose,
                   default_schedule, builtin_schedule=builtin_schedule)

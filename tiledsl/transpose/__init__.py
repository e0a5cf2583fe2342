"""Transpose: op, schedule and rule table, emitter, user entry point (``docs/transpose.md``)."""

from .api import default_schedule, transpose
from .emit import emit_transpose, grid
from .op import TRANSPOSE_DTYPES, TransposeOp
from .schedule import TRANSPOSE_RULES, TransposeSchedule

__all__ = ["TRANSPOSE_DTYPES", "TRANSPOSE_RULES", "TransposeOp", "TransposeSchedule", "default_schedule",
           "emit_transpose", "grid", "transpose"]

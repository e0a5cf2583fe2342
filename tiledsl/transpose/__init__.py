"""Transpose: op, schedule and rule table, plan, emitter, family record, user entry point (``docs/transpose.md``)."""

from .api import transpose
from .emit import emit_transpose
from .family import TRANSPOSE, default_schedule
from .kernel_plan import grid, plan_transpose
from .op import TRANSPOSE_DTYPES, TransposeOp
from .schedule import TRANSPOSE_RULES, TransposeSchedule

__all__ = ["TRANSPOSE", "TRANSPOSE_DTYPES", "TRANSPOSE_RULES", "TransposeOp", "TransposeSchedule",
           "default_schedule", "emit_transpose", "grid", "plan_transpose", "transpose"]

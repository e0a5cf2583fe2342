"""Reductions: op, schedule and rule table, emitter and launch plan, user entry point."""

from .api import default_schedule, reduce
from .emit import emit_reduce, plan
from .op import OPS, REDUCE_DTYPES, ReduceOp
from .schedule import COMBINES, REDUCE_RULES, STRATEGIES, ReduceSchedule

__all__ = ["COMBINES", "OPS", "REDUCE_DTYPES", "REDUCE_RULES", "STRATEGIES", "ReduceOp", "ReduceSchedule",
           "default_schedule", "emit_reduce", "plan", "reduce"]

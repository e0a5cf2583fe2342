"""Reductions: op, schedule and rule table, plan, emitter, family record, user entry point."""

from .api import reduce
from .emit import emit_reduce, plan
from .family import REDUCE, default_schedule
from .kernel_plan import launch_plan, plan_reduce
from .op import OPS, REDUCE_DTYPES, ReduceOp
from .schedule import COMBINES, REDUCE_RULES, STRATEGIES, ReduceSchedule

__all__ = ["COMBINES", "OPS", "REDUCE", "REDUCE_DTYPES", "REDUCE_RULES", "STRATEGIES", "ReduceOp", "ReduceSchedule",
           "default_schedule", "emit_reduce", "launch_plan", "plan", "plan_reduce", "reduce"]

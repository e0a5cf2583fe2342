"""GEMM: op, schedule and rule table, plan, emitter, family record, user entry point."""

from .api import gemm
from .emit import emit_gemm
from .family import GEMM, default_schedule
from .kernel_plan import grid, plan_gemm
from .op import GemmOp
from .schedule import GEMM_RULES, GemmSchedule

__all__ = ["GEMM", "GEMM_RULES", "GemmOp", "GemmSchedule", "default_schedule", "emit_gemm", "gemm", "grid",
           "plan_gemm"]

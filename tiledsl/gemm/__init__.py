"""GEMM: op, schedule and rule table, emitter, user entry point."""

from .api import default_schedule, gemm
from .emit import emit_gemm, grid
from .op import GemmOp
from .schedule import GEMM_RULES, GemmSchedule

__all__ = ["GEMM_RULES", "GemmOp", "GemmSchedule", "default_schedule", "emit_gemm", "gemm", "grid"]

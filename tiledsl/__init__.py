"""tiledsl: describe an operation and a schedule in Python; get a fast, verified, explained GPU kernel.

Public API::

    tiledsl.GemmOp, tiledsl.GemmSchedule, tiledsl.gemm(a, b, c=None, alpha=1.0, beta=0.0, schedule=None)
    tiledsl.compile(op, schedule=None, arch=None)      # arch="sm_90" compiles with no GPU present
    tiledsl.plan(op, schedule=None, arch=None)         # every derived fact of the kernel; print() it
    tiledsl.Target, tiledsl.presets(family), tiledsl.preset(family, name)
"""

from .api import compile, plan, source  # noqa: A004
from .calibrate import calibrate
from .compile import Kernel, KernelSource
from .costmodel import Report, explain, predict
from .errors import (
    CompileError,
    LaunchError,
    ResourceError,
    ScheduleError,
    SpecError,
    SpecTypeError,
    TiledslError,
    ToolchainError,
)
from .gemm import GEMM_RULES, GemmOp, GemmSchedule, gemm
from .planning import Param, Plan
from .reduce import REDUCE_RULES, ReduceOp, ReduceSchedule, reduce  # noqa: A004
from .registry import preset, presets
from .roofline import roofline_plot
from .target import Target, gpu_available, require_gpu
from .transpose import TRANSPOSE_RULES, TransposeOp, TransposeSchedule, transpose

__version__ = "0.1.0"

__all__ = [
    "GEMM_RULES", "CompileError", "GemmOp", "GemmSchedule", "Kernel", "KernelSource", "LaunchError",
    "Param", "Plan", "Report", "ResourceError", "ScheduleError", "SpecError", "SpecTypeError", "Target",
    "TiledslError", "ToolchainError", "require_gpu",
    "calibrate", "compile", "explain", "plan", "predict", "roofline_plot",
    "gemm", "gpu_available", "preset", "presets", "source",
    "REDUCE_RULES", "ReduceOp", "ReduceSchedule", "reduce",
    "TRANSPOSE_RULES", "TransposeOp", "TransposeSchedule", "transpose",
]

"""Transpose plan: the facts of one (TransposeOp, TransposeSchedule, target) kernel, computed once.

The emitter (``tiledsl.transpose.emit``), the launcher (``tiledsl.transpose.api``), the cost model and
the search read the effective load/store widths, block, grid and parameter list from
:func:`plan_transpose`.
"""

from __future__ import annotations

from .. import dtypes
from ..planning import Param, Plan, register_cap
from ..target import Target
from .op import TransposeOp
from .schedule import TransposeSchedule

WORD = {2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}
"""C type moving one element as raw bits, by element size."""


def effective_widths(op: TransposeOp, s: TransposeSchedule) -> tuple[int, int]:
    """(VI, VO): elements per load of X and per store of Y = min(vec, op.align_in / op.align_out)."""
    return min(s.vec, op.align_in), min(s.vec, op.align_out)


def grid(op: TransposeOp, s: TransposeSchedule) -> tuple[int, int, int]:
    """(tiles of one matrix, min(batch, 65535), 1); the kernel strides over a larger batch."""
    tiles = -(-op.rows // s.tile) * -(-op.cols // s.tile)
    return (max(tiles, 1), max(min(op.batch, 65535), 1), 1)


def kernel_name(op: TransposeOp, s: TransposeSchedule) -> str:
    """Deterministic name: dtype, variant, tile, effective load/store widths, schedule hash."""
    vi, vo = effective_widths(op, s)
    return (f"tiledsl_transpose_{dtypes.get(op.dtype).short}_{s.variant}_t{s.tile}_v{vi}{vo}"
            f"_{s.short_hash()}")


def plan_transpose(op: TransposeOp, s: TransposeSchedule, target: Target | None = None) -> Plan:
    """The :class:`~tiledsl.planning.Plan` of ``op`` under ``s``.

    Sizes and element strides are fixed by the op ("const" parameters; a 2-D op is a batch of one whose
    batch strides are 0); the grid does not depend on the device.

    Raises:
        ScheduleError: ``s`` breaks a rule that needs the op (rule ``registers_fit_thread``).
    """
    s.check_op(op)
    vi, vo = effective_widths(op, s)
    word = WORD[op.itemsize]
    pad = (0,) * (3 - len(op.shape))
    xs, ys = pad + tuple(op.in_strides), pad + tuple(op.out_strides)
    params = (Param("x", "const word* __restrict__", "x"), Param("y", "word* __restrict__", "y"),
              Param("rows", "int", "const", op.rows), Param("cols", "int", "const", op.cols),
              Param("batch", "int", "const", op.batch),
              *(Param(f"x_{n}", "long long", "const", v) for n, v in zip(("batch", "row", "col"), xs, strict=True)),
              *(Param(f"y_{n}", "long long", "const", v) for n, v in zip(("batch", "row", "col"), ys, strict=True)))
    vec = (("x", vi if s.shared else 1), ("y", vo if s.shared else 1))
    return Plan(
        family="transpose", op=op, schedule=s, canonical=s, arch=target and target.arch,
        device=target and target.name, kernel_name=kernel_name(op, s), block=s.block, grid=grid(op, s),
        grid_rule=f"(ceil(rows/{s.tile})·ceil(cols/{s.tile}), min(batch, 65535), 1)",
        dynamic_smem_bytes=0, static_smem_bytes=s.tile * (s.tile + s.smem_pad) * op.itemsize if s.shared else 0,
        vec=vec, min_blocks=1, max_registers=register_cap(s.threads, 1),
        est_registers=s.env(op=op)["REG_ESTIMATE"], params=params, detail=word)

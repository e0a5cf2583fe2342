"""Reduction plan: the facts of one (ReduceOp, ReduceSchedule, target) kernel and launch, computed once.

The mapping (threads per row, column tiles, effective vector width, resident blocks) and the launch
(grid, blocks per output, partials and tickets) are pure functions of the op, the schedule and the
device's SM count; the emitter (``tiledsl.reduce.emit``), the launcher (``tiledsl.reduce.api``), the cost
model and the search read them from :func:`plan_reduce`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes
from ..planning import Param, Plan, Workspace, register_cap
from ..target import Target
from .op import ReduceOp
from .schedule import GRID_STRIDE, ReduceSchedule, vec_width

_ACC_NUMPY = {"float": "float32", "double": "float64", "long long": "int64"}


# ---- resolved mapping (pure functions of op and schedule; shared by emitter and launcher) ----
def _pow2_ceil(x: int) -> int:
    p = 1
    while p < x:
        p *= 2
    return p


def group_threads(op: ReduceOp, s: ReduceSchedule) -> int:
    """Threads reducing one contiguous segment: ``s.row_threads`` or, when 0, chosen by row length.

    A full reduction (one segment) or a non-shuffle strategy uses the whole block; rows of ≥ 4096
    elements a block each; shorter rows a warp (or fewer lanes for rows under 2 vectors per lane).
    """
    if op.outer <= 1 or s.strategy != "warp_shuffle":
        return s.block
    if s.row_threads:
        return s.row_threads
    if op.length >= 4096:
        return s.block
    v = vec_width(op, s)
    return min(32, s.block, _pow2_ceil(max(1, -(-op.length // (2 * v)))))


def column_threads(op: ReduceOp, s: ReduceSchedule) -> tuple[int, int]:
    """(TX, TY) of a strided reduction: TX threads across columns, TY along the reduced axis."""
    if s.col_rows:
        return s.block // s.col_rows, s.col_rows
    v = vec_width(op, s)
    tx = min(32, _pow2_ceil(max(1, -(-op.inner // v))), s.block // v)
    tx = max(tx, s.block // 32)
    return tx, s.block // tx


def min_blocks(op: ReduceOp, s: ReduceSchedule) -> int:
    """``__launch_bounds__``'s minimum resident blocks per SM, which caps registers at 65536 / (blocks · block).

    1024 resident threads (64 registers each) while a thread keeps at most 128 bytes of loads in flight
    (``items_per_thread · V · itemsize``, 32 registers); above that 512 threads (128 registers), so the
    loads, one accumulator per load (8 bytes each for float64/int64) and the indices fit without spilling
    (a 16 × 16-byte thread needs ~100 registers; at 64 it spilled up to 1 KiB). A block of 1024 threads
    can never have more than 64 registers a thread: rule ``loads_fit_registers`` refuses it there.
    """
    threads = 1024 if s.items_per_thread * vec_width(op, s) * dtypes.get(op.dtype).itemsize <= 128 else 512
    return max(1, threads // s.block)


@dataclass(frozen=True)
class LaunchPlan:
    """How one call is launched.

    Attributes:
        grid: blocks (1-D).
        split: blocks sharing one output group (1 = no cross-block combine).
        partials: accumulator slots needed (partials for two_pass, per-output accumulators for atomic).
        tickets: ticket counters needed (zero before the launch; the last block of each output resets its
            counter, so they are zeroed once, when the buffer is allocated), 0 when none.
        fill_identity: the partials must start at the op's identity (atomic combine).
        col_tiles: column tiles per outer index (strided only; 0 otherwise).
    """

    grid: int
    split: int
    partials: int
    tickets: int
    fill_identity: bool
    col_tiles: int = 0


def launch_plan(op: ReduceOp, s: ReduceSchedule, sm_count: int, max_threads_per_sm: int = 2048) -> LaunchPlan:
    """The launch of ``op`` under ``s`` on a device with ``sm_count`` SMs.

    grid = 0 (auto) is one wave: ``sm_count · (max_threads_per_sm // block)`` blocks, a multiple of the
    SM count. v1–v4 launch one block per tile (``block·vec·items_per_thread`` elements).
    """
    v, ipt = vec_width(op, s), s.items_per_thread
    wave = s.grid or sm_count * max(1, max_threads_per_sm // s.block)
    atomic = s.combine == "atomic"
    if op.kind == "contiguous":
        segs, length = op.outer, op.length
        gt = group_threads(op, s)
        if gt < s.block:
            return LaunchPlan(-(-segs // (s.block // gt)), 1, 0, 0, False)
        tiles = max(1, -(-length // (s.block * v * ipt)))
        if s.strategy_index < GRID_STRIDE:
            split = tiles
        elif segs == 1 and s.grid:
            split = s.grid
        else:
            split = max(1, min(-(-wave // segs), tiles))
        needs = split > 1 or s.strategy == "atomic"
        slots = (segs if atomic else segs * split) if needs else 0
        return LaunchPlan(segs * split, split, slots, segs if needs else 0, needs and atomic)
    tx, ty = column_threads(op, s)
    col_tiles = -(-op.inner // (tx * v))
    groups = op.outer * col_tiles
    split = max(1, min(-(-wave // groups), -(-op.length // (ty * ipt * 4))))
    needs = split > 1
    slots = (op.out_size if atomic else groups * split * tx * v) if needs else 0
    return LaunchPlan(groups * split, split, slots, groups if needs else 0, needs and atomic, col_tiles)


def kernel_name(op: ReduceOp, s: ReduceSchedule) -> str:
    """Deterministic name: op, dtypes (in, out), kind, vector width, strategy, schedule hash."""
    din, dout = dtypes.get(op.dtype).short, dtypes.get(op.out_dtype).short
    return f"tiledsl_reduce_{op.op}_{din}{dout}_{op.kind}_v{vec_width(op, s)}_{s.strategy}_{s.short_hash()}"


def acc_numpy_dtype(op: ReduceOp) -> str:
    """numpy name of the accumulator type (the type of partials)."""
    return _ACC_NUMPY[dtypes.get(op.acc_dtype).acc_c_type]


def identity_value(op: ReduceOp) -> float | int:
    """The identity of ``op.op`` in the accumulator type (for atomic accumulators)."""
    acc = acc_numpy_dtype(op)
    if op.op in ("sum", "mean", "norm2"):
        return 0
    if op.op == "prod":
        return 1
    if acc == "int64":
        return -(2**63) if op.op == "max" else 2**63 - 1
    return float("-inf") if op.op == "max" else float("inf")


def plan_reduce(op: ReduceOp, s: ReduceSchedule, target: Target | None = None) -> Plan:
    """The :class:`~tiledsl.planning.Plan` of ``op`` mapped by ``s`` on ``target``.

    The kernel's sizes (segments, length, inner, column tiles, split) are fixed by the op and the device,
    so they are "const" parameters; the grid and the scratch buffers depend on the SM count (None and
    () when ``target`` is None).

    Raises:
        ScheduleError: ``s`` breaks a rule that needs the op (e.g. ``strided_needs_loop``).
    """
    s.check_op(op)
    din, dout = dtypes.get(op.dtype), dtypes.get(op.out_dtype)
    v = vec_width(op, s)
    mb = min_blocks(op, s)
    lp = launch_plan(op, s, target.sm_count, target.max_threads_per_sm) if target is not None else None
    acc = acc_numpy_dtype(op)
    if lp is None:
        sizes = {"segments": None, "col_tiles": None, "split": None}
    else:
        sizes = {"segments": op.outer if op.kind == "contiguous" else op.outer * lp.col_tiles,
                 "col_tiles": lp.col_tiles, "split": lp.split}

    def const(name: str, c_type: str, value) -> Param:
        return Param(name, c_type, "const" if value is not None else "device", value)

    params = (Param("x", f"const {din.c_type}* __restrict__", "x"), Param("out", f"{dout.c_type}* __restrict__", "out"),
              Param("partials", "acc_t* __restrict__", "partials"),
              Param("tickets", "unsigned int* __restrict__", "tickets"),
              const("segments", "long long", sizes["segments"]), const("length", "long long", op.length),
              const("inner", "long long", op.inner), const("col_tiles", "long long", sizes["col_tiles"]),
              const("split", "int", sizes["split"]))
    workspace: list[Workspace] = []
    if lp is not None and lp.partials:
        workspace.append(Workspace("partials", acc, lp.partials, "identity" if lp.fill_identity else "none",
                                   identity_value(op)))
    if lp is not None and lp.tickets:
        workspace.append(Workspace("tickets", "uint32", lp.tickets, "counters"))
    if op.kind == "contiguous":
        rule = "(segments · split, 1, 1), split blocks per segment (one wave of blocks when grid=0)"
        vec = (("x", v),)
    else:
        rule = "(outer · column tiles · split, 1, 1), split blocks per column tile (one wave when grid=0)"
        vec = (("x", v),)
    return Plan(
        family="reduce", op=op, schedule=s, canonical=s, arch=target and target.arch, device=target and target.name,
        kernel_name=kernel_name(op, s), block=(s.block, 1, 1), grid=None if lp is None else (lp.grid, 1, 1),
        grid_rule=rule, dynamic_smem_bytes=0, static_smem_bytes=_static_smem(op, s, v, acc),
        vec=vec, min_blocks=mb, max_registers=register_cap(s.block, mb),
        est_registers=32 + v * s.items_per_thread, params=params, workspace=tuple(workspace), detail=lp)


def _static_smem(op: ReduceOp, s: ReduceSchedule, v: int, acc: str) -> int:
    """Shared memory the kernel declares: the block combine's (warp values or a BLOCK tree) or the
    strided kernel's TY×TX·V rows, plus a flag."""
    size = 8 if acc in ("float64", "int64") else 4
    if op.kind == "strided":
        tx, ty = column_threads(op, s)
        return ty * tx * v * size + 1
    if group_threads(op, s) < s.block:
        return 0
    return (s.block // 32 if s.strategy == "warp_shuffle" else s.block) * size + 1

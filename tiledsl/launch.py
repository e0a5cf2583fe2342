"""From (op, schedule, target) to a compiled kernel, its plan and a prepared launch, each memoized once.

* :func:`resolve_schedule`: ``schedule=None`` -> the family's default (a tuned record first), cached in
  ``tiledsl.cache.SCHEDULES`` (cleared when a tuned schedule is stored).
* :func:`plan_for`: the :class:`~tiledsl.planning.Plan`, cached in ``tiledsl.cache.PLANS``.
* :func:`build`: validated, emitted and compiled kernel(s) with the plan, cached in ``tiledsl.cache.KERNELS``.
* :class:`Launcher`: a kernel loaded on one device with its arguments pre-packed from the plan's
  parameter list; a call fills the few run-time slots (pointers, alpha/beta) and launches.
* :func:`workspace`: scratch buffers kept per (device, stream), so a launch allocates nothing and can
  be captured in a CUDA graph.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import cache
from .compile import Kernel, compile_source
from .errors import LaunchError
from .family import Family
from .planning import SCALAR_PACK, Param, Plan, Workspace
from .target import Target


def resolve_schedule(fam: Family, op, schedule, target: Target):
    """``schedule``, or for None the family's default for ``op`` on ``target`` (memoized)."""
    if schedule is not None:
        return schedule
    return cache.SCHEDULES.get_or_make((fam.name, op, target), lambda: fam.default_schedule(op, target))


def plan_for(fam: Family, op, schedule, target: Target | None) -> Plan:
    """The plan of ``op`` under ``schedule`` (not None) on ``target`` (memoized)."""
    return cache.PLANS.get_or_make((fam.name, op, schedule, target), lambda: fam.plan(op, schedule, target))


@dataclass(frozen=True)
class Built:
    """A compiled kernel with its plan, and the followup kernel (GEMM split-K's reduction) if any."""

    plan: Plan
    kernel: Kernel
    followup: Kernel | None = None


def build(fam: Family, op, schedule, target: Target) -> Built:
    """Validate ``schedule`` (not None) on ``target``, plan, emit and compile for ``target.arch`` (memoized).

    Raises:
        ScheduleError / ResourceError: the schedule breaks a rule or exceeds the device.
        CompileError: NVRTC rejected the source.
    """
    def make() -> Built:
        schedule.validate(target)
        p = plan_for(fam, op, schedule, target)
        kernel = compile_source(fam.emit(op, schedule), target.arch, op=op, schedule=schedule)
        followup = None
        if p.followup is not None and fam.emit_followup is not None:
            followup = compile_source(fam.emit_followup(op, schedule), target.arch, op=op, schedule=schedule)
        return Built(p, kernel, followup)

    return cache.KERNELS.get_or_make((fam.name, op, schedule, target), make)


class Launcher:
    """One kernel, loaded on the current device, with its arguments packed from a plan's parameter list.

    Parameters whose value is known when the launcher is made (the plan's "const" parameters and the
    ``fixed`` bindings, e.g. sizes and leading dimensions of a cached call signature) are packed once;
    :attr:`slots` names the bindings a call still passes, in order.

    Raises:
        LaunchError: no CUDA device is available to load the kernel.
    """

    __slots__ = ("block", "fn", "grid", "name", "slots", "smem", "_fill", "_template")

    def __init__(self, kernel: Kernel, plan: Plan, fixed: dict | None = None) -> None:
        fixed = fixed or {}
        template, positions, slots = [], [], []
        for i, p in enumerate(plan.params):
            if p.source == "const":
                template.append(p.pack(p.value))
            elif p.source in fixed:
                template.append(p.pack(fixed[p.source]))
            else:
                template.append(None)
                positions.append(i)
                slots.append(p)
        grid = plan.grid
        if grid is None:
            raise LaunchError(f"plan of {plan.kernel_name} has no grid (planned without a device)")
        if grid[1] > 65535 or grid[2] > 65535 or grid[0] > 2**31 - 1:
            raise LaunchError(f"grid={grid} exceeds CUDA's limits (x < 2^31, y and z ≤ 65535)")
        self.name, self.grid, self.block, self.smem = kernel.name, grid, kernel.block, kernel.dynamic_smem_bytes
        self.fn = kernel.function()
        self._template = template
        self.slots = tuple(slots)
        self._fill = tuple((i, p.source, _packer(p)) for i, p in zip(positions, slots, strict=True))

    def __call__(self, values: dict) -> None:
        """Launch on the current stream, filling each slot from ``values[slot.source]`` (an array, a device
        pointer as an int, or a scalar; a missing pointer is passed as nullptr).

        Raises:
            LaunchError: CUDA refuses the launch.
            TypeError: ``values`` lacks a scalar slot's binding.
        """
        args = self._template.copy()
        for i, source, pack in self._fill:
            args[i] = pack(values.get(source))
        try:
            self.fn(self.grid, self.block, tuple(args), shared_mem=self.smem)
        except Exception as exc:
            raise LaunchError(f"launch of {self.name} grid={self.grid} block={self.block} failed: {exc}") from exc


def _pointer(value):
    if type(value) is int:
        return np.uint64(value)
    return np.uint64(0) if value is None else value


def _packer(p: Param):
    """A fast ``p.pack``: the pointer rule, the bytes as given (a tensor map), or the scalar's NumPy type."""
    if p.is_by_value:
        return p.pack
    return _pointer if p.is_pointer else SCALAR_PACK[p.c_type]


# ---------------------------------------------------------------- scratch buffers per (device, stream)

_WORKSPACES: dict[tuple[int, int, str], object] = {}
_RETIRED: list = []  # buffers replaced by larger ones: a captured graph may still write to them


def workspace(ws: Workspace):
    """A CuPy array of ``ws.count`` elements of ``ws.dtype`` for the current device and stream,
    initialised as ``ws.init`` says (zeroed or filled on the stream, so a graph capture records it).

    The buffer is kept and reused by later launches on the same stream (stream order makes that safe);
    it grows when a larger one is needed. Growing allocates, which a CUDA graph capture cannot record:
    run the call once before capturing it. A replaced buffer is kept alive (a captured graph may still
    use its address) until :func:`free_workspaces`.

    Raises:
        LaunchError: the buffer must grow while the stream is capturing a graph.
    """
    import cupy

    stream = cupy.cuda.get_current_stream()
    key = (cupy.cuda.runtime.getDevice(), stream.ptr, ws.name)
    dtype = np.dtype(ws.dtype)
    buf = _WORKSPACES.get(key)
    if buf is None or buf.nbytes < ws.nbytes:
        if stream.ptr and stream.is_capturing():
            raise LaunchError(f"the {ws.name} scratch buffer ({ws.nbytes} bytes) must be allocated while a CUDA "
                              f"graph is being captured: run the same call once before capturing it")
        if buf is not None:
            _RETIRED.append(buf)
        buf = cupy.empty(max(ws.nbytes, 256), dtype=np.uint8)
        _WORKSPACES[key] = buf
    arr = buf[:ws.nbytes].view(dtype)
    if ws.init == "zero":
        arr.fill(0)
    elif ws.init == "identity":
        arr.fill(ws.fill)
    return arr


def free_workspaces() -> None:
    """Drop every cached scratch buffer (their memory returns to CuPy's pool). Captured graphs that used
    them must not be replayed afterwards."""
    _WORKSPACES.clear()
    _RETIRED.clear()

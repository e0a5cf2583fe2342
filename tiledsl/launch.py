"""From (op, schedule, target) to a compiled kernel, its plan and a prepared launch, each memoized once.

* :func:`resolve_schedule`: ``schedule=None`` -> the family's default (a tuned record first), cached in
  ``tiledsl.cache.SCHEDULES`` (cleared when a tuned schedule is stored).
* :func:`plan_for`: the :class:`~tiledsl.planning.Plan`, cached in ``tiledsl.cache.PLANS``.
* :func:`build`: validated, emitted and compiled kernel(s) with the plan, cached in ``tiledsl.cache.KERNELS``.
* :class:`Launcher`: a kernel loaded on one device with its arguments pre-packed from the plan's
  parameter list; a call fills the few run-time slots (pointers, alpha/beta) and launches.
* :func:`workspace_ptr`: scratch buffers kept per (device, stream), so a launch allocates nothing and can
  be captured in a CUDA graph.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass

import numpy as np

from . import cache, runtime
from . import dependent as dep
from .compile import Kernel, compile_source
from .errors import LaunchError
from .family import Family
from .planning import SCALAR_PACK, Plan, Workspace
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
    ``fixed`` bindings, e.g. sizes and leading dimensions of a cached call signature; a pointer fixed to
    None is a nullptr) are packed once, as the C values CuPy hands to the driver
    (:func:`tiledsl.runtime.c_packers`); a launch passes the others positionally, in the order ``order``
    names their bindings, and :attr:`slots` lists them in parameter order.

    ``dependent=True`` (a kernel that waits in ``griddepcontrol.wait`` before reading what the kernel before it
    wrote: GEMM split-K's sum) makes :attr:`dependent` a :class:`tiledsl.dependent.DependentLaunch` where dependent
    launches are on (:func:`tiledsl.dependent.enabled`) when the launcher is made, the plan's architecture and the
    device allow them (:func:`tiledsl.dependent.usable`) and every parameter is a pointer or a scalar of
    :data:`tiledsl.dependent.C_TYPES` (a by-value TMA tensor map is not); launches then go through it while
    :func:`tiledsl.dependent.enabled`, else through CuPy.

    Raises:
        LaunchError: no CUDA device is available to load the kernel, or the plan's grid is out of range.
        ValueError: a run-time parameter's binding is not in ``order``.
    """

    __slots__ = ("block", "dependent", "fn", "grid", "name", "slots", "smem", "_pointers", "_scalars", "_template")

    def __init__(self, kernel: Kernel, plan: Plan, fixed: dict | None = None, order: tuple[str, ...] = (),
                 dependent: bool = False) -> None:
        fixed = fixed or {}
        scalar, pointer = runtime.c_packers()
        template, pointers, scalars, slots = [], [], [], []
        known: dict[int, int | float] = {}  # the values of the parameters known now, for a dependent launch
        for i, p in enumerate(plan.params):
            if p.source == "const":
                template.append(scalar(p.pack(p.value)))
                known[i] = p.value
            elif p.source in fixed:
                v = fixed[p.source]
                template.append(pointer(v or 0) if p.is_pointer else scalar(p.pack(v)))
                known[i] = 0 if v is None else v
            else:
                if p.source not in order:
                    raise ValueError(f"kernel parameter {p.name} <- {p.source} is neither fixed nor in {order}")
                template.append(None)
                slots.append(p)
                if p.is_pointer:
                    pointers.append((i, order.index(p.source)))
                else:
                    scalars.append((i, order.index(p.source), _as_is if p.is_by_value else SCALAR_PACK[p.c_type]))
        grid = plan.grid
        if grid is None:
            raise LaunchError(f"plan of {plan.kernel_name} has no grid (planned without a device)")
        if grid[1] > 65535 or grid[2] > 65535 or grid[0] > 2**31 - 1:
            raise LaunchError(f"grid={grid} exceeds CUDA's limits (x < 2^31, y and z ≤ 65535)")
        self.name, self.grid, self.block, self.smem = kernel.name, grid, kernel.block, kernel.dynamic_smem_bytes
        self.fn = kernel.function()
        self._template = template
        self.slots = tuple(slots)
        self._pointers = tuple((i, j, pointer) for i, j in pointers)
        self._scalars = tuple(scalars)
        self.dependent = None
        if (dependent and dep.enabled() and all(p.is_pointer or p.c_type in dep.C_TYPES for p in plan.params)
                and dep.usable(plan.arch)):
            self.dependent = dep.DependentLaunch(
                self.fn.ptr, self.name, grid, self.block, self.smem,
                tuple(ctypes.c_void_p if p.is_pointer else dep.C_TYPES[p.c_type] for p in plan.params), known,
                tuple((i, j, None) for i, j in pointers) + tuple(scalars))

    def __call__(self, values: tuple, stream=None) -> None:
        """Launch on ``stream`` (an object with the stream's address as ``.ptr``; None: CuPy's current
        stream), filling the run-time parameters from ``values``, in the order the launcher was made with:
        device pointers as ints (0 for nullptr), scalars as Python or NumPy numbers.

        Raises:
            LaunchError: CUDA refuses the launch.
        """
        if self.dependent is not None and dep.enabled():
            self.dependent(values, (runtime.cupy_module().cuda.get_current_stream() if stream is None else stream).ptr)
            return
        args = self._template.copy()
        for i, j, pointer in self._pointers:
            args[i] = pointer(values[j])
        for i, j, scalar in self._scalars:
            args[i] = scalar(values[j])
        try:
            self.fn(self.grid, self.block, tuple(args), shared_mem=self.smem, stream=stream)
        except Exception as exc:
            raise LaunchError(f"launch of {self.name} grid={self.grid} block={self.block} failed: {exc}") from exc


def _as_is(value):
    """A by-value argument (a TMA tensor map, a 128-byte NumPy scalar), passed as given."""
    return value


# ---------------------------------------------------------------- scratch buffers per (device, stream)

_WORKSPACES: dict[tuple[int, int, str], tuple] = {}  # (device, stream, name) -> (buffer, address, bytes)
_RETIRED: list = []  # buffers replaced by larger ones: a captured graph may still write to them
_GENERATION = [0]  # bumped when a buffer is replaced or freed: remembered addresses are stale then


def workspace_ptr(ws: Workspace, stream=None) -> int:
    """The device address of a scratch buffer of ``ws.nbytes`` bytes for the current device and ``stream``
    (an object whose ``.ptr`` is the stream's address; None: CuPy's current stream), initialised on that
    stream as ``ws.init`` says: zeroed by a memset, or filled with ``ws.fill`` (a memset when that is 0),
    so a graph capture records it; "counters" (reduction tickets) are zeroed once, when the buffer is
    allocated, because every kernel leaves the counters it used at zero.

    The buffer is kept and reused by later launches on the same stream (stream order makes that safe);
    it grows when a larger one is needed. Growing allocates, which a CUDA graph capture cannot record:
    run the call once before capturing it. A replaced buffer is kept alive (a captured graph may still
    use its address) until :func:`free_workspaces`.

    Raises:
        LaunchError: the buffer must grow while the stream is capturing a graph.
    """
    return workspace_ptrs((ws,), stream)[0]


def workspace_ptrs(wss: tuple[Workspace | None, ...], stream=None) -> tuple[int, ...]:
    """:func:`workspace_ptr` of each of ``wss`` on one stream (0 for None), the stream and device read once."""
    cupy = runtime.cupy_module()
    sp = cupy.cuda.get_current_stream().ptr if stream is None else stream.ptr
    dev = runtime.device_id()
    return tuple([0 if ws is None else _ptr(cupy, ws, sp, dev) for ws in wss])


class WorkspaceSet:
    """The scratch buffers of one cached launch (None where a slot is unused), with their addresses
    remembered per stream while no buffer is replaced or freed, when none needs filling before a launch
    (init "none" or "counters"): a repeated launch then costs one comparison instead of a lookup per
    buffer. Otherwise each call goes through :func:`workspace_ptrs`."""

    __slots__ = ("_memo", "_static", "wss")

    def __init__(self, wss: tuple[Workspace | None, ...]) -> None:
        self.wss = wss
        self._static = all(ws is None or ws.init in ("none", "counters") for ws in wss)
        self._memo: tuple = (None, -1, ())  # (stream address, generation, addresses)

    def ptrs(self, stream=None) -> tuple[int, ...]:
        """The buffers' device addresses for ``stream`` (None: CuPy's current stream); see :func:`workspace_ptr`."""
        if not self._static:
            return workspace_ptrs(self.wss, stream)
        sp = runtime.cupy_module().cuda.get_current_stream().ptr if stream is None else stream.ptr
        memo = self._memo
        if memo[0] == sp and memo[1] == _GENERATION[0]:
            return memo[2]
        got = workspace_ptrs(self.wss, stream)
        self._memo = (sp, _GENERATION[0], got)
        return got


def _ptr(cupy, ws: Workspace, sp: int, dev: int) -> int:
    key = (dev, sp, ws.name)
    held = _WORKSPACES.get(key)
    if held is None or held[2] < ws.nbytes:
        held = _grow(cupy, ws, sp, key, held)
    buf, ptr, _ = held
    init = ws.init
    if init == "none" or init == "counters":
        return ptr
    if init == "zero" or (ws.fill == 0 and math.copysign(1.0, ws.fill) > 0):  # all-zero bits
        cupy.cuda.runtime.memsetAsync(ptr, 0, ws.nbytes, sp)
    else:
        with runtime.external_stream(sp):
            buf[:ws.nbytes].view(np.dtype(ws.dtype)).fill(ws.fill)
    return ptr


def _grow(cupy, ws: Workspace, sp: int, key: tuple, held: tuple | None) -> tuple:
    if sp and cupy.cuda.runtime.streamIsCapturing(sp):
        raise LaunchError(f"the {ws.name} scratch buffer ({ws.nbytes} bytes) must be allocated while a CUDA "
                          f"graph is being captured: run the same call once before capturing it")
    if held is not None:
        _RETIRED.append(held[0])
    with runtime.external_stream(sp):  # the pool hands the memory back to this stream when it is freed
        buf = cupy.empty(max(ws.nbytes, 256), dtype=np.uint8)
    if ws.init == "counters":  # zero once; the kernels keep them zero (tiledsl.planning.Workspace)
        cupy.cuda.runtime.memsetAsync(buf.data.ptr, 0, buf.nbytes, sp)
    held = _WORKSPACES[key] = (buf, buf.data.ptr, buf.nbytes)
    _GENERATION[0] += 1
    return held


def free_workspaces() -> None:
    """Drop every cached scratch buffer (their memory returns to CuPy's pool). Captured graphs that used
    them must not be replayed afterwards."""
    _WORKSPACES.clear()
    _RETIRED.clear()
    _GENERATION[0] += 1

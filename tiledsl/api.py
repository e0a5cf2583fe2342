"""``tiledsl.compile``, ``tiledsl.plan`` and ``tiledsl.source``: one entry point for every op family,
dispatching on the op's type through the family records (``tiledsl.families``)."""

from __future__ import annotations

from . import cache
from . import family as _family
from .compile import Kernel
from .errors import SpecError, SpecTypeError
from .families import FAMILIES
from .family import Family
from .launch import build, plan_for, resolve_schedule
from .planning import Plan
from .spec import refuse_empty
from .target import Target, check_device_type, resolve

OpFamily = Family  # the former name of the record
__all__ = ["FAMILIES", "OpFamily", "clear_kernel_cache", "compile", "family", "family_of", "plan", "source"]


def family_of(op) -> Family:
    """The :class:`~tiledsl.family.Family` of an op instance, or SpecTypeError."""
    return _family.of(op)


def family(name: str) -> Family:
    """The :class:`~tiledsl.family.Family` called ``name`` ("gemm", "reduce", "transpose"), or SpecTypeError."""
    return _family.get(name)


def _check(op, schedule, arch, device) -> Family:
    fam = _family.of(op)
    if schedule is not None and not isinstance(schedule, fam.schedule_type):
        raise SpecTypeError(f"schedule for {type(op).__name__} must be a {fam.schedule_type.__name__}, "
                            f"got {type(schedule).__name__}")
    if arch is not None and not isinstance(arch, str):
        raise SpecTypeError(f"arch must be a string such as 'sm_90', got {arch!r}")
    check_device_type(device)
    return fam


def _target(arch, device) -> Target:
    target = resolve(device, arch)
    if arch is not None and device is not None and target.arch != arch.lower():
        raise SpecError(f"device={target.name!r} is {target.arch}, but arch={arch!r} was asked for; "
                        f"give one of them, or a matching pair")
    return target


def compile(op, schedule=None, *, arch: str | None = None, device: str | Target | None = None) -> Kernel:  # noqa: A001
    """Generate and compile the kernel of ``op`` under ``schedule``.

    Args:
        op: a GemmOp (or another family's op).
        schedule: its schedule; None picks the default for the shape and device.
        arch: "sm_90", "sm_80", ...: compile with NVRTC alone (no GPU needed). None: the current GPU's.
        device: a known GPU name ("H200") or Target, for the device-dependent checks and default.

    Returns:
        A :class:`Kernel` with ``source``, ``registers``, ``smem_bytes``, ``spill_bytes``.

    Raises:
        SpecTypeError: ``op`` or ``schedule`` is of the wrong type.
        ScheduleError / ResourceError: the schedule breaks a rule or exceeds the device.
        CompileError: NVRTC rejected the source (holds source, options and log).
        LaunchError: ``arch`` and ``device`` are None and no GPU is present.
    """
    fam = _check(op, schedule, arch, device)
    refuse_empty(op, "compile")
    target = _target(arch, device)
    return build(fam, op, resolve_schedule(fam, op, schedule, target), target).kernel


def plan(op, schedule=None, arch: str | None = None, *, device: str | Target | None = None) -> Plan:
    """The :class:`~tiledsl.planning.Plan` of ``op`` under ``schedule``: every derived fact of its kernel
    (vector widths, block, grid, shared memory, register cap, parameter list); ``print()`` it.

    Args:
        op: a GemmOp, ReduceOp or TransposeOp.
        schedule: its schedule; None picks the default for the shape and device.
        arch: "sm_90", ...: plan for the known GPU of that arch (no GPU needed). None: the current GPU.
        device: a known GPU name ("H200") or Target.

    Raises:
        SpecTypeError: ``op`` or ``schedule`` is of the wrong type.
        ScheduleError / ResourceError: the schedule breaks a rule or exceeds the device.
        LaunchError: ``arch`` and ``device`` are None and no GPU is present.

    Example:
        >>> print(tiledsl.plan(tiledsl.GemmOp(4096, 4096, 4096), arch="sm_90"))  # doctest: +SKIP
    """
    fam = _check(op, schedule, arch, device)
    refuse_empty(op, "plan")
    target = _target(arch, device)
    s = resolve_schedule(fam, op, schedule, target)
    s.validate(target)
    s.check_op(op)  # the rules that need the op, as compile() checks them
    return plan_for(fam, op, s, target)


def clear_kernel_cache() -> None:
    """Forget memoized schedules, kernels and launches (``tiledsl.cache``)."""
    cache.clear_all()


def source(op, schedule) -> str:
    """The CUDA C text of ``op`` under ``schedule`` (no compilation, no device needed).

    Raises:
        SpecTypeError: ``op`` is not an op, or ``schedule`` is not that op's schedule type.
    """
    fam = _family.of(op)
    if not isinstance(schedule, fam.schedule_type):
        raise SpecTypeError(f"schedule for {type(op).__name__} must be a {fam.schedule_type.__name__}, "
                            f"got {type(schedule).__name__} (tiledsl.compile(op).source uses the default)")
    return fam.emit(op, schedule).source

"""``tiledsl.compile``: one entry point for every op family, dispatching on the op's type."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .compile import Kernel, KernelSource, compile_source
from .errors import SpecError, SpecTypeError
from .gemm import GemmOp, GemmSchedule, emit_gemm
from .gemm import default_schedule as gemm_default
from .lru import LRU
from .reduce import ReduceOp, ReduceSchedule, emit_reduce
from .reduce import default_schedule as reduce_default
from .spec import refuse_empty
from .target import Target, resolve
from .transpose import TransposeOp, TransposeSchedule, emit_transpose
from .transpose import default_schedule as transpose_default


@dataclass(frozen=True)
class OpFamily:
    """How one kind of op is scheduled and emitted.

    Attributes:
        name: "gemm", "reduce", "transpose" (also the folder under ``schedules/``).
        op_type, schedule_type: the frozen dataclasses.
        emit: pure function (op, schedule) -> KernelSource.
        default_schedule: (op, target) -> schedule for ``schedule=None``.
    """

    name: str
    op_type: type
    schedule_type: type
    emit: Callable[[object, object], KernelSource]
    default_schedule: Callable[[object, Target], object]


FAMILIES: tuple[OpFamily, ...] = (
    OpFamily("gemm", GemmOp, GemmSchedule, emit_gemm, gemm_default),
    OpFamily("reduce", ReduceOp, ReduceSchedule, emit_reduce, reduce_default),
    OpFamily("transpose", TransposeOp, TransposeSchedule, emit_transpose, transpose_default),
)


def family_of(op) -> OpFamily:
    """The :class:`OpFamily` of an op instance, or SpecTypeError."""
    for fam in FAMILIES:
        if isinstance(op, fam.op_type):
            return fam
    raise SpecTypeError(f"op must be one of {[f.op_type.__name__ for f in FAMILIES]}, got {type(op).__name__}")


def family(name: str) -> OpFamily:
    """The :class:`OpFamily` called ``name`` ("gemm", "reduce", "transpose"), or SpecTypeError."""
    for fam in FAMILIES:
        if fam.name == name:
            return fam
    raise SpecTypeError(f"unknown op family {name!r}; known: {[f.name for f in FAMILIES]}")


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
    fam = family_of(op)
    if schedule is not None and not isinstance(schedule, fam.schedule_type):
        raise SpecTypeError(f"schedule for {type(op).__name__} must be a {fam.schedule_type.__name__}, "
                            f"got {type(schedule).__name__}")
    if arch is not None and not isinstance(arch, str):
        raise SpecTypeError(f"arch must be a string such as 'sm_90', got {arch!r}")
    if device is not None and not isinstance(device, (str, Target)):
        raise SpecTypeError(f"device must be a GPU name such as 'H200' or a tiledsl.Target, got {device!r}")
    key = (op, schedule, arch, device)  # schedule=None: the default chosen the first time
    hit = _KERNELS.get(key)
    if hit is not None:
        return hit
    refuse_empty(op, "compile")
    target = resolve(device, arch)
    if arch is not None and device is not None and target.arch != arch.lower():
        raise SpecError(f"device={target.name!r} is {target.arch}, but arch={arch!r} was asked for; "
                        f"give one of them, or a matching pair")
    requested = schedule
    if schedule is None:
        schedule = fam.default_schedule(op, target)
    schedule.validate(target)
    kernel = compile_source(fam.emit(op, schedule), target.arch, op=op, schedule=schedule)
    if arch is not None or device is not None:  # only keys that pin the binary (None follows the GPU)
        _KERNELS.put((op, requested, arch, device), kernel)
    return kernel


def clear_kernel_cache() -> None:
    """Forget memoized (op, schedule) -> Kernel choices (called when a tuned schedule is stored)."""
    _KERNELS.clear()


# Explicit LRU cache: (op, schedule, arch, device) -> Kernel, so a repeated call costs a dict lookup
# instead of emitting and hashing the source again (host overhead matters for small GEMMs).
# Thread-safe: tiledsl.lru.LRU holds a lock around every operation.
_KERNELS: LRU = LRU(maxsize=4096)


def source(op, schedule) -> str:
    """The CUDA C text of ``op`` under ``schedule`` (no compilation, no device needed).

    Raises:
        SpecTypeError: ``op`` is not an op, or ``schedule`` is not that op's schedule type.
    """
    fam = family_of(op)
    if not isinstance(schedule, fam.schedule_type):
        raise SpecTypeError(f"schedule for {type(op).__name__} must be a {fam.schedule_type.__name__}, "
                            f"got {type(schedule).__name__} (tiledsl.compile(op).source uses the default)")
    return fam.emit(op, schedule).source

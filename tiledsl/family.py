"""The op-family record: everything tiledsl (and the search) needs to handle one kind of op.

Each family defines its record in its own folder (``tiledsl/gemm/family.py`` ...) and is registered once,
in ``tiledsl/families.py``. The search attaches its space and bench to the same record
(:meth:`Family.attach`), so there is one table of families.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .compile import KernelSource
from .errors import SpecTypeError
from .planning import Plan
from .target import Target


@dataclass(frozen=True)
class Family:
    """How one kind of op is checked, planned, emitted and given a default schedule.

    Attributes:
        name: "gemm", "reduce", "transpose" (also the folder under ``schedules/``).
        op_type, schedule_type: the frozen dataclasses.
        rules: the schedule's rule table.
        plan: pure function (op, schedule, target or None) -> :class:`~tiledsl.plan.Plan`.
        emit: pure function (op, schedule) -> KernelSource (renders the plan).
        default_schedule: (op, target) -> schedule for ``schedule=None`` (a tuned record first).
        builtin_schedule: (op, target) -> the library's own choice, what ``default_schedule`` returns where no
            tuned record applies (the search measures it first, so a tune never ships a slower record).
        builtin_choice: (op, target) -> (that choice, which rule made it and why), where the family says so.
        emit_followup: (op, schedule) -> KernelSource of the plan's followup kernel (GEMM split-K's
            reduction), or None for families without one.
        extensions: what other layers attach (the search: ``"search"``); not part of equality.
    """

    name: str
    op_type: type
    schedule_type: type
    rules: tuple
    plan: Callable[[object, object, Target | None], Plan]
    emit: Callable[[object, object], KernelSource]
    default_schedule: Callable[[object, Target], object]
    emit_followup: Callable[[object, object], KernelSource] | None = None
    builtin_schedule: Callable[[object, Target], object] | None = None
    builtin_choice: Callable[[object, Target], tuple[object, str]] | None = None
    extensions: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    def attach(self, key: str, value) -> None:
        """Attach ``value`` (e.g. the search's space and bench) to this record under ``key``."""
        self.extensions[key] = value


# ---------------------------------------------------------------- the table (filled by tiledsl/families.py)

_TABLE: dict[str, Family] = {}


def register(fam: Family) -> Family:
    """Add ``fam`` to the table (once per name).

    Raises:
        ValueError: another record already has this name or op type.
    """
    for other in _TABLE.values():
        if other is not fam and (other.name == fam.name or other.op_type is fam.op_type):
            raise ValueError(f"op family {fam.name!r} ({fam.op_type.__name__}) is already registered")
    _TABLE[fam.name] = fam
    return fam


def registered() -> tuple[Family, ...]:
    """Every registered family, in registration order."""
    return tuple(_TABLE.values())


def get(name: str | Family) -> Family:
    """The family called ``name`` ("gemm", "reduce", "transpose"); a :class:`Family` is returned as is.

    Raises:
        SpecTypeError: no such family (the message lists the known ones).
    """
    if isinstance(name, Family):
        return name
    fam = _TABLE.get(name)
    if fam is None:
        raise SpecTypeError(f"unknown op family {name!r}; known: {list(_TABLE)}")
    return fam


def of(op) -> Family:
    """The family of an op instance.

    Raises:
        SpecTypeError: ``op`` is of no registered family.
    """
    t = type(op)
    for fam in _TABLE.values():
        if t is fam.op_type:
            return fam
    for fam in _TABLE.values():
        if isinstance(op, fam.op_type):
            return fam
    raise SpecTypeError(f"op must be one of {[f.op_type.__name__ for f in _TABLE.values()]}, got {t.__name__}")

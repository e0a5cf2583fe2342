"""Shared plumbing of the frozen op and schedule dataclasses: integer checks, dict round-trips and vector widths.

Every op family's op and schedule uses these, so the error texts are the same everywhere:
``GemmSchedule has no field(s) ['bogus']; fields: [...]``, ``ReduceOp.axis=1.0 must be an integer``.
"""

from __future__ import annotations

import hashlib
import json
import operator
from collections.abc import Callable, Iterable
from dataclasses import fields

import numpy as np

from .errors import ScheduleError, SpecError


def as_int(value, what: str, error: Callable[[str], Exception] = SpecError) -> int:
    """``value`` as a plain int: ints and numpy integers (``operator.index``); bools, floats and strings
    raise ``error`` naming ``what`` and the value."""
    if not isinstance(value, (bool, np.bool_)):
        try:
            return operator.index(value)
        except TypeError:
            pass
    raise error(f"{what}={value!r} must be an integer")


def check_fields(cls: type, d, required: Iterable[str] = (),
                 error: Callable[[str], Exception] = SpecError) -> None:
    """Refuse a non-dict, keys that are not fields of ``cls`` and missing ``required`` keys, by name."""
    name = cls.__name__
    if not isinstance(d, dict):
        raise error(f"{name}.from_dict needs a dict, got {type(d).__name__}")
    known = {f.name for f in fields(cls)}
    extra, missing = sorted(set(d) - known), sorted(set(required) - set(d))
    if extra:
        raise error(f"{name} has no field(s) {extra}; fields: {sorted(known)}")
    if missing:
        raise error(f"{name}.from_dict: missing field(s) {missing}; fields: {sorted(known)}")


def schedule_error(rule: str) -> Callable[[str], ScheduleError]:
    """An ``error`` factory for :func:`as_int` / :func:`check_fields` raising ScheduleError(rule)."""
    return lambda message: ScheduleError(message, rule)


class ScheduleRecord:
    """Mixin for frozen schedule dataclasses: ``to_dict``, ``from_dict`` (missing keys take the
    defaults, unknown keys raise ScheduleError) and ``short_hash`` (8 hex digits used in kernel names)."""

    def to_dict(self) -> dict:
        """All fields as a JSON-ready dict. A schedule's fields are ints, bools and strings, so a shallow copy is
        what ``dataclasses.asdict`` returns, at a tenth of its cost (the tuner builds thousands per run)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, d: dict):
        """Build from a dict.

        Raises:
            ScheduleError: ``d`` is not a dict or has keys that are not fields (rule "fields").
        """
        check_fields(cls, d, (), schedule_error("fields"))
        return cls(**d)

    def header_dict(self) -> dict:
        """The fields the emitted source names (its ``// schedule:`` comment): all of them, unless a schedule
        type leaves out later-added fields at their defaults."""
        return self.to_dict()

    def short_hash(self) -> str:
        """8 hex digits identifying the schedule (SHA-256 of the sorted JSON of :meth:`header_dict`)."""
        return hashlib.sha256(json.dumps(self.header_dict(), sort_keys=True).encode()).hexdigest()[:8]


def empty_dims(op) -> str | None:
    """The empty dimension(s) of ``op`` as text ("m=0"; "shape (0, 64)"), or None when it has work.

    An empty op has no kernel: the public calls return numpy's result without launching one, and
    ``compile``, ``explain``, ``predict`` and the default schedule refuse it with :func:`refuse_empty`.
    """
    if all(hasattr(op, d) for d in ("m", "n", "k")):
        zero = [f"{d}=0" for d in ("m", "n", "k") if getattr(op, d) == 0]
        return ", ".join(zero) or None
    shape = getattr(op, "shape", None)
    if shape is not None and 0 in tuple(shape):
        return f"shape {tuple(shape)}"
    return None


def refuse_empty(op, action: str) -> None:
    """Raise SpecError when ``op`` is empty: there is nothing to ``action`` ("compile", "model", ...).

    Raises:
        SpecError: names the op, its empty dimension and what the public call returns instead.
    """
    why = empty_dims(op)
    if why is not None:
        raise SpecError(f"{type(op).__name__} with {why} is empty: there is no kernel to {action} "
                        "(tiledsl's array calls return numpy's result for empty inputs without a kernel)")


def widest_dividing(widest: int, *extents: int) -> int:
    """The widest power-of-two vector width, in elements, at most ``widest`` (a power of two) that divides every one of
    ``extents`` (leading dimensions, strides, contiguous extents); 1 where none wider does. Every vector width an op's
    alignment or a kernel's loads are derived from goes through here (``GemmOp``'s default alignments,
    ``tiledsl.gemm``'s and ``tiledsl.transpose``'s operands, the reduce kernels' strided loads, the search's ops)."""
    vec = widest
    while vec > 1 and any(e % vec for e in extents):
        vec //= 2
    return vec

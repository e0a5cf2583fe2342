"""numpy's ``axis=`` (None, one axis or a tuple of axes) mapped onto the one-axis :class:`ReduceOp`.

A reduction over several axes is one reduction over their product, so every op (mean and norm2
included) is computed in a single pass with the same accumulation as a one-axis reduction — never as
a reduction of partial results:

* the reduced axes form one contiguous run ``a..b`` of the (C-ordered) shape: the input is viewed, with
  no copy, as ``(outer, length, inner)`` = (∏ shape[:a], ∏ shape[a:b+1], ∏ shape[b+1:]) and its middle
  axis reduced (row reduction when inner = 1, strided column reduction otherwise);
* otherwise the kept axes are moved in front of the reduced ones by one transposing copy to
  ``(∏ kept, ∏ reduced)``, and its last axis reduced.

``axis=()`` reduces nothing (numpy: every element is its own result, converted to the result dtype):
it is the length-1 reduction of ``(n, 1, 1)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import SpecError


@dataclass(frozen=True)
class AxesPlan:
    """How ``tiledsl.reduce`` computes a reduction over ``axes`` of an input of ``shape``.

    Attributes:
        axes: the reduced axes, normalized (non-negative, ascending).
        out_shape: numpy's result shape (``keepdims`` applied).
        perm: the transposition copied before the reshape, or None when a view suffices.
        op_shape: the shape the :class:`ReduceOp` sees (after ``perm`` and the reshape).
        op_axis: the axis the :class:`ReduceOp` reduces.
    """

    axes: tuple[int, ...]
    out_shape: tuple[int, ...]
    perm: tuple[int, ...] | None
    op_shape: tuple[int, ...]
    op_axis: int


def normalize_axes(axis, ndim: int) -> tuple[int, ...] | None:
    """``axis`` (None, an integer or a tuple/list of integers; negative counts from the end) as sorted
    non-negative axes, or None for "all axes" (``axis=None``).

    Raises:
        SpecError: an axis is not an integer, is out of range for ``ndim``, or is repeated (numpy:
            "duplicate value in 'axis'").
    """
    if axis is None:
        return None
    items = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    out = []
    for a in items:
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
            raise SpecError(f"axis={axis!r}: every axis must be an integer, got {a!r} ({type(a).__name__})")
        if not -ndim <= int(a) < ndim:
            raise SpecError(f"axis={axis!r}: axis {int(a)} is out of range for a {ndim}-D input "
                            f"(limit: -{ndim} ≤ axis < {ndim})")
        out.append(int(a) % ndim)
    if len(set(out)) != len(out):
        raise SpecError(f"axis={axis!r} names an axis twice (numpy: duplicate value in 'axis')")
    return tuple(sorted(out))


def plan_axes(shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool) -> AxesPlan:
    """The :class:`AxesPlan` for reducing normalized ``axes`` (see :func:`normalize_axes`) of ``shape``.

    Example:
        >>> plan_axes((4, 5, 6), (1, 2), False).op_shape, plan_axes((4, 5, 6), (0, 2), False).perm
        ((4, 30, 1), (1, 0, 2))
    """
    nd = len(shape)
    if keepdims:
        out_shape = tuple(1 if d in axes else shape[d] for d in range(nd))
    else:
        out_shape = tuple(shape[d] for d in range(nd) if d not in axes)
    if not axes:  # nothing reduced: a length-1 reduction of every element
        return AxesPlan(axes, out_shape, None, (math.prod(shape), 1, 1), 1)
    a, b = axes[0], axes[-1]
    if b - a + 1 == len(axes):  # one contiguous run: a view
        op_shape = (math.prod(shape[:a]), math.prod(shape[a:b + 1]), math.prod(shape[b + 1:]))
        return AxesPlan(axes, out_shape, None, op_shape, 1)
    kept = tuple(d for d in range(nd) if d not in axes)
    return AxesPlan(axes, out_shape, kept + axes,
                    (math.prod(shape[d] for d in kept), math.prod(shape[d] for d in axes)), 1)

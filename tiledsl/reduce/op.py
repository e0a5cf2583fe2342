"""The reduction operation: ``out = op(x, axis)`` over one axis (or all) of a contiguous N-D array.

Any single-axis reduction of a contiguous array is a reduction of the middle axis of the
``(outer, length, inner)`` view: ``outer`` = product of the dimensions before the axis, ``length`` = the
reduced dimension, ``inner`` = product of the dimensions after it. ``axis=None`` is ``(1, n, 1)``.
``inner == 1`` means every output reduces a contiguous segment (a row); ``inner > 1`` means a strided
(column) reduction, read coalesced across ``inner``.

Result dtypes follow numpy (``numpy.sum``/``prod``/``max``/``min``/``mean``, ``numpy.linalg.norm``):
sum and prod of int32/int64 give int64, mean and norm2 of integers give float64, everything else keeps
the input dtype unless ``out_dtype`` says otherwise (numpy's ``dtype=`` argument).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from .. import dtypes
from ..errors import SpecError
from ..spec import as_int, check_fields

OPS = ("sum", "mean", "max", "min", "prod", "norm2")
REDUCE_DTYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64")
_FLOATS = ("float32", "float64", "float16", "bfloat16")
_NUMPY_NAME = {"max": "maximum", "min": "minimum"}


def _as_bool(value, what: str) -> bool:
    """``value`` as a bool: True/False or a numpy bool; anything else (1, "no", None) is refused."""
    if isinstance(value, bool) or isinstance(value, np.bool_):
        return bool(value)
    raise SpecError(f"{what}={value!r} must be True or False, got {type(value).__name__}")


def result_dtype(op: str, in_dtype: str, dtype: str | None = None) -> str:
    """numpy's result dtype of reduction ``op`` over ``in_dtype`` (``dtype`` = numpy's ``dtype=``).

    Raises:
        SpecError: ``dtype`` is given for max/min (numpy takes none), or is an integer type for
            mean/norm2, or is not supported.
    """
    if dtype is not None:
        name = dtypes.dtype_name(dtype)
        if op in ("max", "min"):
            raise SpecError(f"dtype={name!r} is not accepted by op={op!r} (numpy's {op} has no dtype argument)")
        if op in ("mean", "norm2") and name not in _FLOATS:
            raise SpecError(f"dtype={name!r} for op={op!r} must be a float type: {', '.join(_FLOATS)}")
        if name not in REDUCE_DTYPES:
            raise SpecError(f"dtype={name!r} is not supported; supported: {', '.join(REDUCE_DTYPES)}")
        return name
    if in_dtype in _FLOATS:
        return in_dtype
    if op in ("sum", "prod"):
        return "int64"
    if op in ("mean", "norm2"):
        return "float64"
    return in_dtype


@dataclass(frozen=True)
class ReduceOp:
    """A reduction problem.

    Attributes:
        shape: shape of the (C-contiguous) input; any number of dimensions, sizes ≥ 0.
        op: "sum", "mean", "max", "min", "prod" or "norm2" (sqrt of the sum of squares).
        axis: the reduced axis (negative counts from the end; normalised), or None for all elements.
        dtype: input element type: float32, float64, float16, bfloat16, int32, int64.
        out_dtype: result element type; None = numpy's rule (:func:`result_dtype`).
        keepdims: keep the reduced axis as size 1 in :attr:`out_shape` (numpy's ``keepdims``).
        align: widest vector (elements: 1, 2, 4, 8) the input's base address allows; a fresh CuPy
            allocation is 256-byte aligned, so the default 8 holds for it.

    Raises:
        SpecError: unknown op/dtype (or dtype=None), a field of the wrong type (sizes, axis and align
            must be ints or numpy integers, keepdims a bool), axis out of range, a negative size, or
            max/min over an empty axis with a non-empty result (numpy: "zero-size array to reduction operation maximum which
            has no identity").

    Example:
        >>> ReduceOp(shape=(16384, 16384), op="sum", axis=1, dtype="float32").view
        (16384, 16384, 1)
    """

    shape: tuple[int, ...]
    op: str = "sum"
    axis: int | None = None
    dtype: str = "float32"
    out_dtype: str | None = None
    keepdims: bool = False
    align: int = 8

    def __post_init__(self) -> None:
        if isinstance(self.shape, (tuple, list)):
            shape = tuple(self.shape)
        else:
            shape = (self.shape,)  # a bare size: a 1-D input
        sizes = []
        for d in shape:
            try:
                size = as_int(d, "size")
            except SpecError:
                size = -1
            if size < 0:
                raise SpecError(f"ReduceOp.shape={shape!r}: every size must be an integer ≥ 0, got {d!r}")
            sizes.append(size)
        shape = tuple(sizes)  # numpy integers become plain ints
        object.__setattr__(self, "shape", shape)
        if not isinstance(self.op, str) or self.op not in OPS:
            raise SpecError(f"ReduceOp.op={self.op!r} is not supported; supported: {', '.join(OPS)}")
        if self.dtype is None:
            raise SpecError(f"ReduceOp.dtype=None is not a dtype; supported: {', '.join(REDUCE_DTYPES)}")
        name = dtypes.dtype_name(self.dtype)
        if name not in REDUCE_DTYPES:
            raise SpecError(f"ReduceOp.dtype={name!r} is not supported; supported: {', '.join(REDUCE_DTYPES)}")
        object.__setattr__(self, "dtype", name)
        object.__setattr__(self, "out_dtype", result_dtype(self.op, name, self.out_dtype))
        object.__setattr__(self, "keepdims", _as_bool(self.keepdims, "ReduceOp.keepdims"))
        if self.axis is not None:
            axis = as_int(self.axis, "ReduceOp.axis")
            nd = len(shape)
            if not -nd <= axis < nd:
                raise SpecError(f"ReduceOp.axis={axis} is out of range for a {nd}-D input "
                                f"(limit: -{nd} ≤ axis < {nd})")
            object.__setattr__(self, "axis", axis % nd)
        align = as_int(self.align, "ReduceOp.align")
        if align not in (1, 2, 4, 8):
            raise SpecError(f"ReduceOp.align={self.align!r} must be 1, 2, 4 or 8 elements")
        object.__setattr__(self, "align", align)
        if self.op in ("max", "min") and self.length == 0 and self.out_size > 0:
            raise SpecError(f"zero-size array to reduction operation {_NUMPY_NAME[self.op]} (op={self.op!r}) "
                            f"which has no identity: shape={shape}, axis={self.axis}")

    # ---- the (outer, length, inner) view ----
    @property
    def view(self) -> tuple[int, int, int]:
        """(outer, length, inner): elements before, along and after the reduced axis."""
        if self.axis is None:
            return (1, math.prod(self.shape), 1)
        return (math.prod(self.shape[:self.axis]), self.shape[self.axis], math.prod(self.shape[self.axis + 1:]))

    @property
    def outer(self) -> int:
        return self.view[0]

    @property
    def length(self) -> int:
        """Elements combined into each output."""
        return self.view[1]

    @property
    def inner(self) -> int:
        return self.view[2]

    @property
    def n(self) -> int:
        """Input elements."""
        return math.prod(self.shape)

    @property
    def out_size(self) -> int:
        """Output elements = outer · inner."""
        return self.outer * self.inner

    @property
    def out_shape(self) -> tuple[int, ...]:
        """numpy's result shape (with ``keepdims``)."""
        if self.axis is None:
            return (1,) * len(self.shape) if self.keepdims else ()
        if self.keepdims:
            return self.shape[:self.axis] + (1,) + self.shape[self.axis + 1:]
        return self.shape[:self.axis] + self.shape[self.axis + 1:]

    @property
    def kind(self) -> str:
        """"contiguous" (each output reduces a contiguous segment) or "strided" (inner > 1)."""
        return "contiguous" if self.inner == 1 else "strided"

    @property
    def bytes_moved(self) -> int:
        """Bytes read plus bytes written (the roofline traffic), bytes."""
        return (self.n * dtypes.get(self.dtype).itemsize
                + self.out_size * dtypes.get(self.out_dtype).itemsize)

    @property
    def acc_dtype(self) -> str:
        """Accumulator: that of the input for max/min, of the result otherwise (float32 for 16-bit)."""
        return self.dtype if self.op in ("max", "min") else self.out_dtype

    def to_dict(self) -> dict:
        d = asdict(self)
        d["shape"] = list(self.shape)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> ReduceOp:
        """Build from :meth:`to_dict` output.

        Raises:
            SpecError: ``d`` is not a dict, has keys that are not fields, or lacks ``shape``.
        """
        check_fields(cls, d, ("shape",))
        d = dict(d)
        if d.get("op") in ("max", "min") and d.get("out_dtype") is not None and d.get("out_dtype") == d.get("dtype"):
            d["out_dtype"] = None  # to_dict records the resolved result dtype; max/min take no dtype argument
        shape = d["shape"]
        return cls(**{**d, "shape": tuple(shape) if isinstance(shape, (list, tuple)) else shape})

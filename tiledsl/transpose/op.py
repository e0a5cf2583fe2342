"""The transpose operation: Y[b, j, i] = X[b, i, j] for a 2-D (R×C) or batched 3-D (B×R×C) array.

The kernel moves bits, never values: float32 and int32 share one 32-bit word path, float16 and
bfloat16 one 16-bit path, float64 and int64 one 64-bit path.

Strides are in elements, as numpy/CuPy report them divided by the itemsize; any strides are allowed
(sliced views, ``.T`` views, negative or zero strides). ``align_in``/``align_out`` are the widest vector
(elements) an access may use on the input / output: the column stride must be 1, and the vector must
divide the row and batch strides, the contiguous extent (C for X, R for Y) and the base address, and be
at most 16 bytes. The emitter uses ``min(schedule.vec, align)`` on each side.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .. import dtypes
from ..errors import SpecError
from ..spec import as_int, check_fields, widest_dividing

TRANSPOSE_DTYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64")
MAX_ACCESS_BYTES = 16  # widest global access: 128-bit LDG/STG


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """C-order strides (elements) of ``shape``."""
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))


def widest_vector(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int, base_align: int = 0) -> int:
    """Widest power-of-two vector (elements, ≤ 16 bytes) every row of a strided array can be read with.

    Args:
        shape: (R, C) or (B, R, C) of the array as stored (C is the vector direction).
        strides: element strides of ``shape``.
        itemsize: bytes per element.
        base_align: largest power of two (elements) dividing the base address; 0 = assume aligned
            to 16 bytes (a fresh CuPy/torch allocation is 256-byte aligned).

    Returns:
        1, 2, 4 or 8 (never more than ``16 // itemsize``).
    """
    vec = MAX_ACCESS_BYTES // itemsize
    if base_align:
        vec = min(vec, base_align)
    cols = shape[-1]
    if cols > 1 and strides[-1] != 1:
        return 1
    # a stride only matters when its axis has more than one index
    return widest_dividing(vec, cols, *(s for n, s in zip(shape[:-1], strides[:-1], strict=True) if n > 1))


@dataclass(frozen=True)
class TransposeOp:
    """A transpose of the last two axes.

    Attributes:
        shape: (R, C) or (B, R, C) of the input X; the output Y is (C, R) or (B, C, R).
        dtype: float32, float64, float16, bfloat16, int32 or int64 (in and out alike).
        in_strides: element strides of X (None = C-contiguous).
        out_strides: element strides of Y (None = C-contiguous).
        align_in: widest vector (elements) a load of X may use; 0 = derive from shape and strides
            (base assumed 16-byte aligned). A value wider than the strides allow raises SpecError.
        align_out: the same for stores to Y.

    Raises:
        SpecError: the shape is not 2-D or 3-D or has a negative size, the dtype is not supported (or
            None), strides do not match the shape, a field has the wrong type (sizes, strides and
            alignments must be ints or numpy integers; bools and floats are refused), or an alignment is
            wider than the layout allows.

    Example:
        >>> op = TransposeOp(shape=(16384, 16384), dtype="float32")
        >>> op.out_shape, op.bytes_moved, op.align_in
        ((16384, 16384), 2147483648, 4)
    """

    shape: tuple[int, ...]
    dtype: str = "float32"
    in_strides: tuple[int, ...] | None = None
    out_strides: tuple[int, ...] | None = None
    align_in: int = 0
    align_out: int = 0

    def __post_init__(self) -> None:
        shape = tuple(self.shape) if isinstance(self.shape, (tuple, list)) else None
        if shape is None or len(shape) not in (2, 3):
            raise SpecError(f"TransposeOp.shape={self.shape!r} must be (R, C) or (B, R, C)")
        sizes = []
        for n in shape:
            try:
                size = as_int(n, "size")
            except SpecError:
                size = -1
            if size < 0:
                raise SpecError(f"TransposeOp.shape={shape!r}: every size must be an integer ≥ 0, got {n!r}")
            if size > 2**31 - 1:
                raise SpecError(f"TransposeOp.shape={shape!r}: size {n} exceeds 2^31 - 1 (sizes are 32-bit "
                                f"kernel arguments)")
            sizes.append(size)
        shape = tuple(sizes)  # numpy integers become plain ints
        object.__setattr__(self, "shape", shape)
        if self.dtype is None:
            raise SpecError(f"TransposeOp.dtype=None is not a dtype; supported: {', '.join(TRANSPOSE_DTYPES)}")
        try:
            name = dtypes.dtype_name(self.dtype)
        except SpecError:
            name = str(self.dtype)
        if name not in TRANSPOSE_DTYPES:
            raise SpecError(f"TransposeOp.dtype={name!r} is not supported for transpose; supported: "
                            f"{', '.join(TRANSPOSE_DTYPES)}")
        object.__setattr__(self, "dtype", name)
        for field, default in (("in_strides", shape), ("out_strides", self.out_shape)):
            given = getattr(self, field)
            value = contiguous_strides(default) if given is None else given
            bad = not isinstance(value, (tuple, list)) or len(value) != len(shape)
            if not bad:
                try:
                    value = tuple(as_int(v, "stride") for v in value)
                except SpecError:
                    bad = True
            if bad:
                raise SpecError(f"TransposeOp.{field}={given!r} must be {len(shape)} integers (element strides) "
                                f"or None")
            object.__setattr__(self, field, value)
        limit = MAX_ACCESS_BYTES // self.itemsize
        for field, layout_shape, strides in (("align_in", shape, self.in_strides),
                                             ("align_out", self.out_shape, self.out_strides)):
            value = as_int(getattr(self, field), f"TransposeOp.{field}")
            allowed = widest_vector(layout_shape, strides, self.itemsize)
            if value == 0:
                value = allowed
            if value not in (1, 2, 4, 8) or value > limit:
                raise SpecError(f"TransposeOp.{field}={value!r} must be 1, 2, 4 or 8 elements and at most "
                                f"{limit} for {self.dtype} (16-byte accesses)")
            if value > allowed:
                raise SpecError(f"TransposeOp.{field}={value} is wider than shape {layout_shape} with strides "
                                f"{strides} allows (at most {allowed}: unit column stride, vector dividing "
                                f"the row/batch strides and the row length)")
            object.__setattr__(self, field, value)

    # ---- sizes ----
    @property
    def batch(self) -> int:
        """B (1 for a 2-D op)."""
        return self.shape[0] if len(self.shape) == 3 else 1

    @property
    def rows(self) -> int:
        """R: rows of X = columns of Y."""
        return self.shape[-2]

    @property
    def cols(self) -> int:
        """C: columns of X = rows of Y."""
        return self.shape[-1]

    @property
    def out_shape(self) -> tuple[int, ...]:
        """Shape of Y: the last two axes of ``shape`` swapped."""
        return (*self.shape[:-2], self.shape[-1], self.shape[-2])

    @property
    def size(self) -> int:
        """Elements of X (= elements of Y)."""
        return self.batch * self.rows * self.cols

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return dtypes.get(self.dtype).itemsize

    @property
    def bytes_moved(self) -> int:
        """Compulsory HBM traffic in bytes: 2 · size · itemsize (every element read once, written once).

        A transpose does no arithmetic, so its roofline bound is this traffic over the memory bandwidth
        (``docs/design.md``, "Background").
        """
        return 2 * self.size * self.itemsize

    def to_dict(self) -> dict:
        d = asdict(self)
        for k in ("shape", "in_strides", "out_strides"):
            d[k] = list(d[k])
        return d

    @classmethod
    def from_dict(cls, d: dict) -> TransposeOp:
        """Build from :meth:`to_dict` output.

        Raises:
            SpecError: ``d`` is not a dict, has keys that are not fields, or lacks ``shape``.
        """
        check_fields(cls, d, ("shape",))
        d = dict(d)
        for k in ("shape", "in_strides", "out_strides"):
            if isinstance(d.get(k), list):
                d[k] = tuple(d[k])
        return cls(**d)

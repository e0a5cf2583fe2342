"""The GEMM operation: C (M×N) = alpha · A (M×K) · B (K×N) + beta · C.

Layouts follow numpy/CuPy (row-major is C order). ``layout_a="row"`` means A's K index has unit stride
(lda = A.strides[0]); ``"col"`` means A's M index has unit stride (lda = A.strides[1]); likewise B
with K and N. C has unit stride along N (``layout_c="row"``; :func:`tiledsl.gemm` computes a column-major C as
Cᵀ = Bᵀ·Aᵀ, no copy) except for the GEMV-style kernel, which also writes a column-major C (``layout_c="col"``,
ldc between columns): the few-column products :func:`tiledsl.gemm` runs as a few rows Cᵀ = Bᵀ·Aᵀ.

``align_a``/``align_b``/``align_c`` are the widest vector (1, 2, 4 or, for 16-bit types, 8 elements) that the arrays' base
address, leading dimension and contiguous extent allow; the emitter uses min(schedule.vec, align).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .. import dtypes
from ..errors import SpecError
from ..spec import as_int, check_fields, widest_dividing

LAYOUTS = ("row", "col")
MMA_DTYPES = ("float16", "bfloat16")
"""Input dtypes the tensor-core kernels take as they are (float32 accumulation)."""
PRECISIONS = ("ieee", "tf32", "3xtf32")
"""float32 products: "ieee" (exact FMA, the default), "tf32" (tensor cores on TF32-rounded inputs: a 10-bit
mantissa, like torch's ``allow_tf32`` and Triton's ``input_precision="tf32"``) or "3xtf32" (tensor cores on each
input split into two TF32 parts, x ≈ big + small, and three products big·big + big·small + small·big per term, as
CUTLASS's "3xTF32" fast-accurate float32: about 21 bits of each product kept where IEEE float32 keeps 24; a few-row
x @ W or x @ W.T runs on it, other products exactly on the FMA units)."""
GEMM_DTYPES = ("float32", "float16", "bfloat16")
INDEX_HEADROOM = 1 << 16
"""A bound on how far past M, N or K a block's 32-bit row, column or K index runs before its bounds check: the GEMV
kernel's block spans up to 1024 threads × 4-wide vectors × 8 column groups = 32768 columns from a first column below N
(the rules ``threads_at_most_1024``, ``vec_width``, ``col_groups_on_gemv``); the tiled, mma.sync and wgmma tiles, at
most 1024, and the K loops run less far. Twice the widest block, so a wider rule has room. An extent within this of
2^31 could wrap those ``int`` indices negative and pass the check; ``GemmOp`` refuses it."""
MAX_EXTENT = 2**31 - 1 - INDEX_HEADROOM
"""The largest M, N or K a GemmOp takes (sizes are 32-bit kernel arguments; :data:`INDEX_HEADROOM`)."""


def max_align(dtype: str) -> int:
    """Widest vector, in elements, an operand's alignment may record: 16 bytes (8 for 16-bit types, 4
    for float32), the width of one ``cp.async`` / ``ld.global.v4`` transaction."""
    return 16 // dtypes.get(dtype).itemsize


@dataclass(frozen=True)
class GemmOp:
    """A GEMM problem.

    Attributes:
        m, n, k: sizes (≥ 0; an empty product is handled by :func:`tiledsl.gemm` as numpy does).
        dtype: element type of A, B and C: float32, float16 or bfloat16 (accumulation is float32).
        layout_a, layout_b: "row" (row-major, C order) or "col" (column-major, e.g. a ``.T`` view).
        layout_c: "row" (every kernel) or "col" (``kernel="gemv"`` only; rule ``column_major_c_on_gemv``).
        align_a, align_b, align_c: widest vector width (1, 2, 4; 8 for 16-bit dtypes) the operands allow:
            it divides the base address (in elements), the leading dimension and the contiguous extent
            (:meth:`contiguous_extent`: a vector must not straddle a row's end). None (the default): the
            widest of 4, 2, 1 dividing that extent (:func:`tiledsl.gemm` works out all three from the arrays it
            is given, up to 8 for 16-bit dtypes: give 8 to plan what it runs for such arrays).
        read_c: True when beta ≠ 0 (C is read); False never reads C, so NaN in C cannot leak.
        precision: "ieee", "tf32" or "3xtf32" (the last two float32 only): see :data:`PRECISIONS`.

    Raises:
        SpecError: a size is negative, or dtype/layout/alignment is not supported, or an alignment does not
            divide its operand's contiguous extent.

    Example:
        >>> GemmOp(4096, 4096, 4096, dtype="float32").flops
        137438953472
    """

    m: int
    n: int
    k: int
    dtype: str = "float32"
    layout_a: str = "row"
    layout_b: str = "row"
    align_a: int | None = None
    align_b: int | None = None
    align_c: int | None = None
    read_c: bool = False
    precision: str = "ieee"
    layout_c: str = "row"

    def __post_init__(self) -> None:
        for name in ("m", "n", "k"):
            v = getattr(self, name)
            v = as_int(v, f"GemmOp.{name}")
            if v < 0:
                raise SpecError(f"GemmOp.{name}={v!r} must be an integer ≥ 0")
            object.__setattr__(self, name, v)
            if v > MAX_EXTENT:
                raise SpecError(f"GemmOp.{name}={v} exceeds {MAX_EXTENT} = 2^31 - 1 - {INDEX_HEADROOM}: sizes are "
                                f"32-bit kernel arguments, and a block's row and column indices run up to "
                                f"{INDEX_HEADROOM} past them")
        try:
            name = dtypes.dtype_name(self.dtype)
        except SpecError:
            name = self.dtype
        if name not in GEMM_DTYPES:
            raise SpecError(f"GemmOp.dtype={name!r} is not supported for GEMM; supported: "
                            f"{', '.join(GEMM_DTYPES)}")
        object.__setattr__(self, "dtype", name)
        for name in ("layout_a", "layout_b", "layout_c"):
            if getattr(self, name) not in LAYOUTS:
                raise SpecError(f"GemmOp.{name}={getattr(self, name)!r} must be one of {LAYOUTS}")
        widest = max_align(self.dtype)
        allowed = tuple(v for v in (1, 2, 4, 8) if v <= widest)
        for name in ("align_a", "align_b", "align_c"):
            v, extent = getattr(self, name), self.contiguous_extent(name[-1])
            if v is None:  # contiguous, 16-byte aligned base: the widest of 4, 2, 1 dividing the extent
                v = widest_dividing(4, extent)
            if as_int(v, f"GemmOp.{name}") not in allowed:
                raise SpecError(f"GemmOp.{name}={v!r} must be one of {allowed} for {self.dtype} "
                                f"(at most 16 bytes)")
            if extent % int(v):
                raise SpecError(f"GemmOp.{name}={v} does not divide {self._extent_name(name[-1])}={extent}, the "
                                f"contiguous extent of {name[-1].upper()} ({self._layout(name[-1])}-major): a "
                                f"{v}-wide vector would straddle a row's end; the widest that divides it is "
                                f"{widest_dividing(int(v), extent)}")
            object.__setattr__(self, name, int(v))
        if not isinstance(self.read_c, bool):
            raise SpecError(f"GemmOp.read_c={self.read_c!r} must be True or False")
        if self.precision not in PRECISIONS:
            raise SpecError(f"GemmOp.precision={self.precision!r} must be one of {PRECISIONS}")
        if self.precision != "ieee" and self.dtype != "float32":
            raise SpecError(f"GemmOp.precision={self.precision!r} applies to float32 inputs, not {self.dtype} "
                            "(float16/bfloat16 always run on the tensor cores)")

    def _layout(self, which: str) -> str:
        return {"a": self.layout_a, "b": self.layout_b, "c": self.layout_c}[which]

    def _extent_name(self, which: str) -> str:
        row = self._layout(which) == "row"
        return {"a": "K" if row else "M", "b": "N" if row else "K", "c": "N" if row else "M"}[which]

    def contiguous_extent(self, which: str) -> int:
        """Elements along operand ``which``'s ("a", "b" or "c") unit-stride dimension: K or M for A (row- or
        column-major), N or K for B, N or M for C."""
        return {"M": self.m, "N": self.n, "K": self.k}[self._extent_name(which)]

    @property
    def flops(self) -> int:
        """2·M·N·K floating-point operations (one multiply and one add per term)."""
        return 2 * self.m * self.n * self.k

    @property
    def compulsory_bytes(self) -> int:
        """Bytes any kernel must move: A (M×K) and B (K×N) read once, C (M×N) written once and, with ``read_c``, read
        once, at the dtype's item size (float32 4, 16-bit 2)."""
        return dtypes.get(self.dtype).itemsize * (self.m * self.k + self.k * self.n
                                                  + self.m * self.n * (2 if self.read_c else 1))

    @property
    def tensor_core_inputs(self) -> bool:
        """True when the inputs may run on the tensor cores: float16/bfloat16, or float32 with
        ``precision="tf32"`` (IEEE float32 stays on the FMA units)."""
        return self.dtype in MMA_DTYPES or self.precision == "tf32"

    @property
    def layout(self) -> str:
        """BLAS-style tag seen from row-major: "NN", "NT", "TN" or "TT" (T = column-major operand)."""
        return ("N" if self.layout_a == "row" else "T") + ("N" if self.layout_b == "row" else "T")

    def to_dict(self) -> dict:
        """All fields as a JSON-ready dict; ``layout_c`` (added later) only where it is "col", so ops of the tuned
        records and studies written before it compare equal."""
        d = asdict(self)
        if self.layout_c == "row":
            del d["layout_c"]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> GemmOp:
        """Build from :meth:`to_dict` output.

        Raises:
            SpecError: ``d`` is not a dict, has unknown keys or misses m, n or k.
        """
        check_fields(cls, d, ("m", "n", "k"))
        return cls(**d)

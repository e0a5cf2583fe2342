"""``tiledsl.gemm``: arrays in, verified layout/alignment analysis, kernel launched, CuPy array out."""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..compile import Kernel
from ..errors import SpecError
from ..runtime import alignment_elems, as_cupy, element_strides, launch
from ..target import Target
from .emit import grid
from .op import GEMM_DTYPES, GemmOp
from .schedule import GemmSchedule


def gemm(a, b, c=None, *, alpha: float = 1.0, beta: float = 0.0,
         schedule: GemmSchedule | None = None):
    """C = alpha · A @ B + beta · C on the GPU.

    Args:
        a: (M, K) GPU array (CuPy, ``__cuda_array_interface__`` or DLPack, e.g. a torch CUDA tensor),
            float32, float16 or bfloat16; row- or column-major with any leading dimension (``a.T``
            and slices like ``a[:, 1:]`` run without a copy). An operand with no unit stride is copied.
        b: (K, N) GPU array, same dtype.
        c: optional (M, N) output of the same dtype, updated in place; required when beta ≠ 0.
        alpha, beta: scalars (float32 in the kernel). beta = 0 never reads ``c``.
        schedule: a :class:`GemmSchedule`; None picks one for the shape (:func:`default_schedule`).

    Returns:
        The (M, N) CuPy array holding C (``c`` itself when given).

    Raises:
        SpecTypeError: an operand is a NumPy (host) array or not a GPU array.
        SpecError: an operand is not 2-D, inner dimensions differ, dtypes are unsupported or mixed,
            ``c`` has the wrong shape or dtype, or beta ≠ 0 without ``c``.
        ScheduleError / ResourceError: the schedule breaks a rule or exceeds the device.

    Example:
        >>> c = tiledsl.gemm(cupy.random.rand(512, 256, dtype="float32"),
        ...                  cupy.random.rand(256, 128, dtype="float32"))  # doctest: +SKIP
    """
    import cupy

    a, b = as_cupy(a, "a"), as_cupy(b, "b")
    for name, x in (("a", a), ("b", b)):
        if x.ndim != 2:
            raise SpecError(f"{name} must be 2-D, got {x.ndim}-D with shape {x.shape}")
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2:
        raise SpecError(f"inner dimensions differ: a.shape={a.shape} (K={k}) but b.shape={b.shape} (K={k2})")
    dt_a, dt_b = _dtype(a, "a"), _dtype(b, "b")
    if dt_a != dt_b:
        raise SpecError(f"a.dtype={dt_a} and b.dtype={dt_b} differ; cast one (mixed dtypes are not supported)")
    if c is not None:
        c = as_cupy(c, "c")
        if c.shape != (m, n):
            raise SpecError(f"c.shape={c.shape} must be (M, N)=({m}, {n})")
        if _dtype(c, "c") != dt_a:
            raise SpecError(f"c.dtype={c.dtype} must equal a.dtype={dt_a}")
    elif beta != 0:
        raise SpecError(f"beta={beta} needs an output c to read; pass c= or set beta=0")
    out = c if c is not None else cupy.empty((m, n), dtype=a.dtype)
    if m == 0 or n == 0:
        return out
    if k == 0:  # numpy: an empty sum is 0
        if c is not None and beta != 0:
            out *= out.dtype.type(beta)
        else:
            out.fill(0)
        return out
    _gemm_into(a, b, out, float(alpha), float(beta), schedule)
    return out


def _dtype(x, name: str) -> str:
    d = dtypes.dtype_name(x.dtype)
    if d not in GEMM_DTYPES:
        raise SpecError(f"{name}.dtype={d} is not supported for GEMM; supported: {', '.join(GEMM_DTYPES)}")
    return d


def _operand(x, name: str):
    """(array, layout, ld, contiguous extent): row = unit stride along axis 1, col = along axis 0."""
    import cupy

    rows, cols = x.shape
    sr, sc = element_strides(x, name)
    if sc == 1 or cols == 1:
        return x, "row", (sr if rows > 1 else cols), cols
    if sr == 1 or rows == 1:
        return x, "col", (sc if cols > 1 else rows), rows
    x = cupy.ascontiguousarray(x)  # no unit stride at all: one copy, then row-major
    return x, "row", cols, cols


def _align(x, ld: int, extent: int) -> int:
    vec = alignment_elems(x, 4)
    while vec > 1 and (ld % vec or extent % vec):
        vec //= 2
    return vec


def _gemm_into(a, b, c, alpha: float, beta: float, schedule: GemmSchedule | None) -> None:
    import cupy

    m, n = c.shape
    sr, sc = element_strides(c, "c")
    if not (sc == 1 or n == 1) and (sr == 1 or m == 1):
        # column-major C: compute Cᵀ = Bᵀ·Aᵀ into the row-major view c.T, no copy
        _gemm_into(b.T, a.T, c.T, alpha, beta, schedule)
        return
    if not (sc == 1 or n == 1):  # C has no unit stride: work in a contiguous copy
        tmp = cupy.ascontiguousarray(c)
        _gemm_into(a, b, tmp, alpha, beta, schedule)
        c[...] = tmp
        return
    ldc = sr if m > 1 else n
    a, layout_a, lda, ext_a = _operand(a, "a")
    b, layout_b, ldb, ext_b = _operand(b, "b")
    op = GemmOp(m, n, a.shape[1], dtype=dtypes.dtype_name(a.dtype), layout_a=layout_a, layout_b=layout_b,
                align_a=_align(a, lda, ext_a), align_b=_align(b, ldb, ext_b), align_c=_align(c, ldc, n),
                read_c=beta != 0)
    target = Target.current()
    from ..api import compile as compile_op

    kernel: Kernel = compile_op(op, schedule or default_schedule(op, target), arch=target.arch)
    args = [a, b, c, np.int32(m), np.int32(n), np.int32(op.k), np.int64(lda), np.int64(ldb),
            np.int64(ldc), np.float32(alpha)]
    if op.read_c:
        args.append(np.float32(beta))
    launch(kernel, grid(op, kernel.schedule), tuple(args))


def default_schedule(op: GemmOp, target: Target) -> GemmSchedule:
    """A sensible schedule for the shape: the largest shipped preset whose tiles still fill the SMs.

    Candidates are the presets in ``schedules/gemm/presets.json`` marked ``"default_candidate"``,
    ordered by block-tile area; the first with ≥ one block per SM (ceil(M/bm)·ceil(N/bn) ≥ SMs) wins,
    else the smallest tile.
    """
    from ..registry import presets

    cands = [s for name, s in presets("gemm").items() if name in _DEFAULT_ORDER]
    cands.sort(key=lambda s: -(s.bm * s.bn))
    for s in cands:
        tiles = -(-op.m // s.bm) * -(-op.n // s.bn)
        if tiles >= target.sm_count:
            return s
    return cands[-1]


_DEFAULT_ORDER = ("sgemm_128x128_8x8", "sgemm_128x64_8x4", "sgemm_64x64_4x4", "sgemm_32x64_2x4")

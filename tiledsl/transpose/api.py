"""``tiledsl.transpose``: arrays in, layout and alignment analysed, kernel launched, transposed array out."""

from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np

from ..compile import Kernel
from ..errors import SpecError
from ..runtime import alignment_elems, as_gpu, check_no_overlap, element_strides, launch, returns_like_inputs
from ..target import Target
from .emit import grid
from .op import MAX_ACCESS_BYTES, TRANSPOSE_DTYPES, TransposeOp, widest_vector
from .schedule import TransposeSchedule

DEFAULT_PRESET = "padded_rows_vec_swizzle"


@returns_like_inputs
def transpose(x, *, out=None, schedule: TransposeSchedule | None = None):
    """Y = Xᵀ (the last two axes swapped) on the GPU, written to a new contiguous array or to ``out``.

    Args:
        x: (R, C) or (B, R, C) GPU array (CuPy, ``__cuda_array_interface__`` or DLPack, e.g. a torch
            CUDA tensor) of float32, float64, float16, bfloat16, int32 or int64. Any strides: sliced,
            transposed or reversed views are read in place, never copied. bfloat16 is taken from torch
            tensors (CuPy has no bfloat16 dtype); the result is then a torch tensor.
        out: optional (C, R) or (B, C, R) GPU array of the same dtype, any strides; written in place.
        schedule: a :class:`TransposeSchedule`; None picks :func:`default_schedule`.

    Returns:
        The transposed array: ``out`` when given, else a new C-contiguous array of the input's library
        (a torch tensor on the same device for a torch input, every dtype; a CuPy array otherwise).

    Raises:
        SpecTypeError: ``x`` or ``out`` is a NumPy (host) array or not a GPU array.
        SpecError: ``x`` is not 2-D or 3-D, its dtype is unsupported, or ``out`` has the wrong shape or
            dtype.
        ScheduleError / ResourceError: the schedule breaks a rule or exceeds the device.

    Example:
        >>> y = tiledsl.transpose(cupy.random.rand(1000, 3000, dtype="float32"))  # doctest: +SKIP
        >>> y.shape                                                                # doctest: +SKIP
        (3000, 1000)
    """
    import cupy

    x, x_name, torch_like = _as_gpu(x, "x")
    if x.ndim not in (2, 3):
        raise SpecError(f"x must be 2-D (R, C) or 3-D (B, R, C), got {x.ndim}-D with shape {x.shape}")
    out_shape = (*x.shape[:-2], x.shape[-1], x.shape[-2])
    if out is None:
        if torch_like is not None:
            import torch

            result = torch.empty(out_shape, dtype=torch_like.dtype, device=torch_like.device)
            y, _, _ = _as_gpu(result, "out")
        else:
            y = result = cupy.empty(out_shape, dtype=x.dtype)
    else:
        result = out
        y, y_name, _ = _as_gpu(out, "out")
        if tuple(y.shape) != out_shape:
            raise SpecError(f"out.shape={tuple(y.shape)} must be x's last two axes swapped: {out_shape}")
        if y_name != x_name:
            raise SpecError(f"out.dtype={y_name} must equal x.dtype={x_name}")
        check_no_overlap(y, "out", x=x)
    if 0 in x.shape:
        return result
    op = TransposeOp(
        shape=tuple(x.shape), dtype=x_name,
        in_strides=element_strides(x, "x"), out_strides=element_strides(y, "out"),
        align_in=_align(x), align_out=_align(y))
    target = Target.current()
    kernel = _kernel(op, schedule or default_schedule(op, target), target)
    pad = (0,) * (3 - x.ndim)  # a 2-D op is a batch of one: its batch stride is never used
    args = (x, y, np.int32(op.rows), np.int32(op.cols), np.int32(op.batch),
            *(np.int64(s) for s in pad + op.in_strides), *(np.int64(s) for s in pad + op.out_strides))
    launch(kernel, grid(op, kernel.schedule), args)
    return result


@functools.lru_cache(maxsize=512)
def _kernel(op: TransposeOp, schedule: TransposeSchedule, target: Target) -> Kernel:
    """The compiled kernel of (op, schedule) for ``target``, memoized: a repeated call costs a dict lookup."""
    from ..api import compile as compile_op

    return compile_op(op, schedule, device=target, arch=target.arch)


def _as_gpu(x, name: str):
    """(CuPy view, dtype name, torch tensor or None). torch bfloat16 travels as int16 bits."""
    return as_gpu(x, name, TRANSPOSE_DTYPES, "transpose")


def _align(a) -> int:
    """Widest vector (elements) the array's base address, strides and row length allow."""
    shape, strides = tuple(a.shape), element_strides(a, "array")
    base = alignment_elems(a, MAX_ACCESS_BYTES // a.itemsize)
    return widest_vector(shape, strides, a.itemsize, base_align=base)


@functools.lru_cache(maxsize=512)
def default_schedule(op: TransposeOp, target: Target) -> TransposeSchedule:
    """The shipped schedule ``padded_rows_vec_swizzle``, its chunk widened to 16 bytes for the op's dtype.

    vec = 16 / itemsize (4 for 32-bit, 2 for 64-bit, 8 for 16-bit elements) and rows_per_thread
    chosen to keep the preset's thread count, so every dtype gets 16-byte loads and stores where the
    layout allows.

    A schedule tuned for exactly this op on this device (``python -m search.tune transpose … --export``,
    stored in the user store or shipped under ``schedules/transpose/``) is used first, after it
    validates (looked up once per op and device in a process); see
    :func:`tiledsl.registry.lookup_explain` for why a stored record was not used.
    """
    from ..registry import lookup, preset
    from ..spec import refuse_empty

    refuse_empty(op, "choose a schedule for")

    tuned = lookup("transpose", op, target)
    if tuned is not None:
        return tuned

    base: TransposeSchedule = preset("transpose", DEFAULT_PRESET)
    vec = MAX_ACCESS_BYTES // op.itemsize
    if vec == base.vec:
        return base
    # keep threads = (tile/vec)·(tile/rows_per_thread) fixed: rows_per_thread scales with 1/vec
    rows = max(1, min(base.tile, base.rows_per_thread * base.vec // vec))
    return replace(base, vec=vec, rows_per_thread=rows)

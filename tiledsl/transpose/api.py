"""``tiledsl.transpose``: arrays in, layout and alignment analysed, kernel launched, transposed array out."""

from __future__ import annotations

from .. import cache, runtime
from ..errors import SpecError
from ..launch import Built, Launcher, build, resolve_schedule
from ..runtime import (
    alignment_elems,
    as_gpu,
    byte_extent,
    check_no_overlap,
    element_strides,
    may_overlap,
    returns_like_inputs,
)
from ..target import Target
from .family import DEFAULT_PRESET, TRANSPOSE, default_schedule
from .op import MAX_ACCESS_BYTES, TRANSPOSE_DTYPES, TransposeOp, widest_vector
from .schedule import TransposeSchedule

__all__ = ["DEFAULT_PRESET", "default_schedule", "transpose"]


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

    Streams: CuPy operands run on CuPy's current stream; with a torch CUDA tensor among the arrays the call
    runs on torch's current stream of that tensor's device (``with torch.cuda.stream(s):`` and
    ``torch.cuda.graph`` apply), and a new result is allocated with ``torch.empty``.

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
    key = _call_key(x, out, schedule)
    if key is not None:
        try:
            call = cache.LAUNCHES.get(key[0])
        except TypeError:  # an unhashable schedule: the checked path says what is wrong
            call = key = None
        if call is not None:
            y = call.run(key[1], key[2], out)
            if y is not None:
                return y
    return _transpose_slow(x, out, schedule, None if key is None else key[0])


def _call_key(x, out, schedule) -> tuple | None:
    """(launch-cache key, pointer of x, pointer of out or None) of a call on CuPy arrays or torch CUDA
    tensors (shapes, strides, dtypes, 16-byte alignment classes, schedule, device); None for other inputs."""
    sx = runtime.array_sig(x)
    if sx is None:
        return None
    so, po = None, None
    if out is not None:
        got = runtime.array_sig(out)
        if got is None:
            return None
        so, po = (got[0], got[1] & 15), got[1]
    return ("transpose", sx[0], sx[1] & 15, so, schedule, runtime.device_id()), sx[1], po


_ORDER = ("x", "y")  # the run-time bindings of a transpose launch


class _TransposeCall:
    """A cached transpose: the launcher packed for one call signature."""

    __slots__ = ("extents", "launcher", "output")

    def __init__(self, built: Built, output: runtime.Output, extents) -> None:
        self.launcher = Launcher(built.kernel, built.plan, None, _ORDER)
        self.output, self.extents = output, extents

    def run(self, px: int, py: int | None, out):
        """Launch and return Y (``out``, or a new array); None, with nothing launched, when ``out`` may
        overlap ``x``."""
        if out is None:
            out, py, stream = self.output.new()
        elif may_overlap(py, self.extents[1], px, self.extents[0]):
            return None
        else:
            stream = self.output.stream()
        self.launcher((px, py), stream)
        return out


@returns_like_inputs
def _transpose_slow(x, out, schedule, key):
    """Validate, convert and launch; store the launch in the cache under ``key`` when it can be replayed."""
    import cupy

    torch_index = runtime.torch_device((x, out))
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
    s = resolve_schedule(TRANSPOSE, op, schedule, target)
    call = _TransposeCall(build(TRANSPOSE, op, s, target), runtime.Output(out_shape, y.dtype, torch_index, x_name),
                          (byte_extent(x), byte_extent(y)))
    call.launcher((x.data.ptr, y.data.ptr))
    if key is not None:  # x and out (if given) are CuPy arrays or torch CUDA tensors (runtime.array_sig)
        cache.LAUNCHES.put(key, call)
    return result


def _as_gpu(x, name: str):
    """(CuPy view, dtype name, torch tensor or None). torch bfloat16 travels as int16 bits."""
    return as_gpu(x, name, TRANSPOSE_DTYPES, "transpose")


def _align(a) -> int:
    """Widest vector (elements) the array's base address, strides and row length allow."""
    shape, strides = tuple(a.shape), element_strides(a, "array")
    base = alignment_elems(a, MAX_ACCESS_BYTES // a.itemsize)
    return widest_vector(shape, strides, a.itemsize, base_align=base)

"""``tiledsl.reduce``: a GPU array in, numpy-semantics reduction out (torch in, torch out; CuPy in, CuPy out)."""

from __future__ import annotations

import warnings

from .. import cache, dtypes, runtime
from ..errors import SpecError
from ..launch import Built, Launcher, WorkspaceSet, build, resolve_schedule
from ..runtime import alignment_elems, as_cupy, returns_like_inputs
from ..target import Target
from .axes import normalize_axes, plan_axes
from .family import REDUCE, default_schedule
from .op import ReduceOp
from .schedule import ReduceSchedule

__all__ = ["default_schedule", "reduce"]


def reduce(x, op: str = "sum", axis: int | tuple[int, ...] | None = None, *,  # noqa: A001
           schedule: ReduceSchedule | None = None, out=None, dtype=None, keepdims: bool = False):
    """Reduce ``x`` along ``axis`` (one axis, several, or all of it) with numpy's semantics.

    Args:
        x: GPU array (CuPy, ``__cuda_array_interface__`` or DLPack, e.g. a torch CUDA tensor) of float32,
            float64, float16, int32 or int64; a torch CUDA tensor for bfloat16 (CuPy has no bfloat16).
            Any shape; a non-contiguous array is first copied to C order.
        op: "sum", "mean", "max", "min", "prod" or "norm2" (sqrt of the sum of squares, as
            ``numpy.linalg.norm`` of the flattened axis).
        axis: one axis, a tuple of axes (negative counts from the end; ``()`` reduces nothing) or None
            for all elements. Several axes are reduced in one pass over their product
            (:mod:`tiledsl.reduce.axes`: a view when they are adjacent, else one transposing copy first).
        schedule: a :class:`ReduceSchedule` (e.g. ``tiledsl.preset("reduce", "v7_warp_shuffle_float4")``);
            None picks :func:`default_schedule`.
        out: optional GPU array of the result's shape and dtype, written in place.
        dtype: numpy's ``dtype=`` (accumulate and return in it) for sum, prod, mean, norm2.
        keepdims: keep the reduced axes with size 1.

    Returns:
        An array of numpy's result shape and dtype (0-d for ``axis=None``): sum/prod of int32/int64
        give int64, mean/norm2 of integers give float64. A torch tensor on ``x``'s device when ``x`` is
        a torch tensor (every dtype), a CuPy array otherwise; ``out`` itself when given.

    Streams: CuPy operands run on CuPy's current stream; with a torch CUDA tensor among the arrays the call
    runs on torch's current stream of that tensor's device (``with torch.cuda.stream(s):`` and
    ``torch.cuda.graph`` apply), and a new result is allocated with ``torch.empty``.

    Raises:
        SpecTypeError: ``x`` is a NumPy (host) array or not a GPU array.
        SpecError: unsupported op or dtype, an axis out of range or repeated, max/min of an empty axis (numpy's
            "zero-size array to reduction operation maximum which has no identity"), ``out`` of the
            wrong shape or dtype.
        ScheduleError / ResourceError: the schedule breaks a rule (e.g. a v1–v4 strategy for a strided
            axis) or exceeds the device.

    Warns:
        RuntimeWarning: mean of an empty axis (the result is NaN, as numpy).

    Example:
        >>> tiledsl.reduce(cupy.arange(10, dtype="float32"), "sum")  # doctest: +SKIP
        array(45., dtype=float32)
    """
    key = _call_key(x, op, axis, schedule, out, dtype, keepdims)
    if key is not None:
        try:
            call = cache.LAUNCHES.get(key[0])
        except TypeError:  # e.g. an unhashable dtype= or axis=: the checked path says what is wrong
            call = key = None
        if call is not None:
            return call.run(key[1], key[2], out)
    return _reduce_slow(x, op, axis, schedule, out, dtype, keepdims, None if key is None else key[0])


def _call_key(x, op, axis, schedule, out, dtype, keepdims) -> tuple | None:
    """(launch-cache key, pointer of x, pointer of out or None) of a call on a CuPy array or torch CUDA
    tensor (shape, strides, dtype, 64-byte alignment class, op, axis, dtype, keepdims, ``out``'s layout,
    schedule, device); None for other inputs (they take the checked, converting path)."""
    sx = runtime.array_sig(x)
    if sx is None:
        return None
    so, po = None, None
    if out is not None:
        got = runtime.array_sig(out)
        if got is None:
            return None
        so, po = got
    return ("reduce", sx[0], sx[1] & 63, op, axis, dtype, keepdims, so, schedule, runtime.device_id()), sx[1], po


_ORDER = ("x", "out", "partials", "tickets")  # the run-time bindings of a reduction launch


class _ReduceCall:
    """A cached reduction: the launcher packed for one call signature, and its scratch buffers (per stream)."""

    __slots__ = ("launcher", "output", "ws")

    def __init__(self, built: Built, output: runtime.Output) -> None:
        ws = built.plan.workspace
        unused = {name: None for name in ("partials", "tickets") if name not in {w.name for w in ws}}
        self.launcher = Launcher(built.kernel, built.plan, unused, _ORDER)
        named = {w.name: w for w in ws}
        self.ws = WorkspaceSet((named.get("partials"), named.get("tickets"))) if ws else None  # in _ORDER
        self.output = output

    def run(self, px: int, out_ptr: int | None, out):
        """Launch on ``x`` (device pointer ``px``) into ``out`` (pointer ``out_ptr``; a new array when None)
        on the stream :class:`~tiledsl.runtime.Output` names, and return the result."""
        if out is None:
            out, out_ptr, stream = self.output.new()
        else:
            stream = self.output.stream()
        if self.ws is not None:
            self.launcher((px, out_ptr, *self.ws.ptrs(stream)), stream)
        else:
            self.launcher((px, out_ptr, 0, 0), stream)
        return out


@returns_like_inputs
def _reduce_slow(x, op, axis, schedule, out, dtype, keepdims, key):
    """Validate, convert and launch; store the launch in the cache under ``key`` when it can be replayed."""
    import cupy

    torch_index = runtime.torch_device((x, out))
    xc, in_dtype, torch_like = _input(x)
    if torch_like is not None and not torch_like.is_contiguous():
        key = None  # a bfloat16 copy: nothing to replay
    axes = normalize_axes(axis, xc.ndim)
    out_dtype = None if dtype is None else dtypes.dtype_name(dtype)
    if axes is None or len(axes) == xc.ndim or len(axes) == 1:  # all axes, or one: the op sees x itself
        if not xc.flags.c_contiguous:
            xc = cupy.ascontiguousarray(xc)
            key = None  # a copy: nothing to replay
        rop = ReduceOp(shape=tuple(int(d) for d in xc.shape), op=op, axis=axes[0] if axes and len(axes) == 1 else None,
                       dtype=in_dtype, out_dtype=out_dtype, keepdims=keepdims, align=alignment_elems(xc, 8))
        out_shape = rop.out_shape
    else:  # several axes (or none): one reduction over their product, of a view or a transposed copy
        ap = plan_axes(tuple(int(d) for d in xc.shape), axes, keepdims)
        if ap.perm is not None or not xc.flags.c_contiguous:
            key = None  # a copy: nothing to replay
        if ap.perm is not None:
            xc = cupy.ascontiguousarray(xc.transpose(ap.perm))
        elif not xc.flags.c_contiguous:
            xc = cupy.ascontiguousarray(xc)
        xc = xc.reshape(ap.op_shape)
        rop = ReduceOp(shape=ap.op_shape, op=op, axis=ap.op_axis, dtype=in_dtype, out_dtype=out_dtype,
                       align=alignment_elems(xc, 8))
        out_shape = ap.out_shape
    out_c, result = _output(out, rop, torch_like, out_shape, axis, keepdims)
    if rop.out_size == 0:
        return result
    out_c = out_c.reshape(rop.out_shape)  # a view: out_c is C-contiguous
    if rop.length == 0:  # numpy: empty sum 0, empty prod 1, empty mean NaN (with a warning)
        _fill(out_c, rop)
        return result
    target = Target.current()
    s = resolve_schedule(REDUCE, rop, schedule, target)
    call = _ReduceCall(build(REDUCE, rop, s, target), runtime.Output(out_shape, out_c.dtype, torch_index,
                                                                               rop.out_dtype))
    call.run(xc.data.ptr, out_c.data.ptr, out_c)
    if key is not None:  # x and out (if given) are CuPy arrays or torch CUDA tensors (runtime.array_sig)
        cache.LAUNCHES.put(key, call)
    return result


def _input(x):
    """(CuPy array, dtype name, torch tensor or None). torch bfloat16 travels as raw int16 bits."""
    mod = type(x).__module__
    if mod.startswith("torch") and str(getattr(x, "dtype", "")) == "torch.bfloat16":
        import torch

        if not x.is_cuda:
            raise SpecError("x is a bfloat16 torch tensor on the CPU; move it to the GPU first (x.cuda())")
        return as_cupy(x.contiguous().view(torch.int16), "x"), "bfloat16", x
    xc = as_cupy(x, "x")
    return xc, dtypes.dtype_name(xc.dtype), None


def _output(out, op: ReduceOp, torch_like, shape: tuple[int, ...], axis, keepdims: bool):
    """(CuPy array written by the kernel, object returned to the caller) of numpy's result ``shape``;
    ``torch_like`` is the torch bfloat16 input tensor or None; ``axis`` and ``keepdims`` as the caller
    gave them (for messages)."""
    import cupy

    if op.out_dtype == "bfloat16":
        if torch_like is None:
            raise SpecError("a bfloat16 result needs torch (CuPy has no bfloat16): pass a torch CUDA tensor")
        import torch

        if out is None:  # on the input's device, not torch's current one
            out = torch.empty(shape, dtype=torch.bfloat16, device=torch_like.device)
        elif str(getattr(out, "dtype", "")) != "torch.bfloat16" or tuple(out.shape) != shape:
            raise SpecError(f"out must be a bfloat16 torch tensor of shape {shape}, got "
                            f"{getattr(out, 'dtype', type(out).__name__)} {tuple(getattr(out, 'shape', ()))}")
        if not out.is_contiguous():
            raise SpecError("out must be contiguous")
        return as_cupy(out.view(torch.int16), "out"), out
    if out is None:
        res = cupy.empty(shape, dtype=op.out_dtype)
        return res, res
    oc = as_cupy(out, "out")
    if tuple(oc.shape) != shape:
        raise SpecError(f"out.shape={tuple(oc.shape)} must be {shape} (the result of op={op.op!r}, axis={axis}, "
                        f"keepdims={keepdims})")
    if dtypes.dtype_name(oc.dtype) != op.out_dtype:
        raise SpecError(f"out.dtype={oc.dtype} must be {op.out_dtype} (numpy's result dtype; pass dtype= to change it)")
    if not oc.flags.c_contiguous:
        raise SpecError("out must be C-contiguous")
    return oc, out  # the caller's ``out`` itself (a torch tensor stays a torch tensor)


def _fill(out_c, op: ReduceOp) -> None:
    if op.op == "mean":
        warnings.warn("Mean of empty slice.", RuntimeWarning, stacklevel=3)
        value = float("nan")
    else:
        value = 1 if op.op == "prod" else 0
    if op.out_dtype == "bfloat16":  # raw bits: 1.0 = 0x3F80, NaN = 0x7FC0, 0.0 = 0
        out_c.fill({0: 0, 1: 0x3F80}.get(value, 0x7FC0))
    else:
        out_c.fill(value)

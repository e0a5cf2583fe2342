"""Arguments in, kernels launched: GPU-array conversion with clear errors, and the launch itself."""

from __future__ import annotations

import functools
import sys
import warnings

import numpy as np

from . import dtypes
from .compile import Kernel
from .errors import LaunchError, SpecError, SpecTypeError


def as_cupy(x, name: str):
    """Return ``x`` as a CuPy array without copying.

    Accepts CuPy arrays, objects with ``__cuda_array_interface__`` (Numba, PyTorch CUDA tensors) and
    DLPack-capable GPU arrays.

    Raises:
        SpecTypeError: ``x`` is a host (NumPy) array or not an array at all.
    """
    import cupy

    if isinstance(x, cupy.ndarray):
        return x
    mod = type(x).__module__
    if mod.startswith("numpy"):
        raise SpecTypeError(f"{name} is a NumPy array on the host; move it to the GPU first, "
                            f"e.g. cupy.asarray({name})")
    if hasattr(x, "__cuda_array_interface__"):
        try:
            return cupy.asarray(x)
        except cupy.cuda.runtime.CUDARuntimeError as exc:
            raise LaunchError(f"{name} is a GPU array but CUDA is not usable here: {exc}") from exc
    if hasattr(x, "__dlpack__"):
        try:
            return cupy.from_dlpack(x)
        except Exception as exc:
            raise SpecTypeError(f"{name} ({type(x).__name__}) could not be taken as a GPU array through "
                                f"DLPack ({exc}); is it on the CPU? move it to the GPU first") from exc
    raise SpecTypeError(f"{name} must be a GPU array (CuPy, __cuda_array_interface__ or DLPack), "
                        f"got {type(x).__name__}")


def as_gpu(x, name: str, supported: tuple[str, ...], op_name: str):
    """``x`` as (CuPy view, dtype name, torch tensor or None), checking the dtype.

    CuPy has no bfloat16: a torch bfloat16 tensor travels as its int16 bits (the third item is the
    tensor, so callers can return torch results for torch bfloat16 input).

    Raises:
        SpecTypeError: ``x`` is a host array or not a GPU array.
        SpecError: the dtype is not in ``supported``.
    """
    if type(x).__module__.startswith("torch") and str(getattr(x, "dtype", "")) == "torch.bfloat16":
        import torch

        return as_cupy(x.view(torch.int16), name), "bfloat16", x
    arr = as_cupy(x, name)
    try:
        dname = dtypes.dtype_name(arr.dtype)
    except SpecError:
        dname = str(arr.dtype)
    if dname not in supported:
        raise SpecError(f"{name}.dtype={dname} is not supported for {op_name}; supported: "
                        f"{', '.join(supported)}" + (" (bfloat16 as a torch tensor)" if "bfloat16" in supported
                                                     else ""))
    return arr, dname, None


def check_no_overlap(out, out_name: str, **inputs) -> None:
    """Refuse an output that shares memory with an input: blocks would read what others already wrote.

    Raises:
        SpecError: ``out`` overlaps one of ``inputs`` (names the pair).
    """
    import cupy

    for name, x in inputs.items():
        if cupy.may_share_memory(out, x) and cupy.shares_memory(out, x):
            raise SpecError(f"{out_name} shares memory with {name}; the kernel would read elements it has "
                            f"already overwritten: pass a separate output array")


def element_strides(x, name: str) -> tuple[int, ...]:
    """Strides of a CuPy array in elements.

    Raises:
        SpecError: a stride is not a whole number of elements.
    """
    out = []
    for s in x.strides:
        if s % x.itemsize:
            raise SpecError(f"{name}.strides={x.strides} are not whole elements of {x.itemsize} bytes")
        out.append(s // x.itemsize)
    return tuple(out)


def alignment_elems(x, max_vec: int = 4) -> int:
    """Largest power of two ≤ ``max_vec`` dividing the base address in elements (1, 2, 4, ...)."""
    vec = max_vec
    while vec > 1 and x.data.ptr % (vec * x.itemsize):
        vec //= 2
    return vec


_CUPY: list = []


def _cupy():
    if not _CUPY:
        import cupy

        _CUPY.append(cupy)
    return _CUPY[0]


def cupy_module():
    """The ``cupy`` module (imported on first use: CuPy is an optional dependency)."""
    return _cupy()


def cupy_ndarray() -> type:
    """``cupy.ndarray`` (imported on first use: CuPy is an optional dependency)."""
    return _cupy().ndarray


_PACKERS: list = []


def c_packers():
    """(scalar, pointer): functions that turn a NumPy scalar, and a device address (int), into the C value
    CuPy's kernel launch passes to the driver. CuPy converts every other argument on every launch; an
    argument packed here once (a cached launch's sizes and strides) it passes as it is. Where this CuPy
    has no such classes (``cupy._core._scalar.CScalar``, ``cupy.cuda.function.CIntptr``), NumPy scalars,
    which CuPy converts itself."""
    if not _PACKERS:
        try:
            from cupy._core._scalar import CScalar
            from cupy.cuda.function import CIntptr, CPointer

            if not (issubclass(CScalar, CPointer) and issubclass(CIntptr, CPointer)):
                raise ImportError("CuPy's C argument classes changed")
            _PACKERS.append((CScalar, CIntptr))
        except ImportError:
            _PACKERS.append((lambda v: v, np.uint64))
    return _PACKERS[0]


class StreamRef:
    """A CUDA stream given by its address, as CuPy's kernel launch takes it (``stream.ptr``)."""

    __slots__ = ("ptr",)

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr


_TORCH_STREAMS: dict[int, StreamRef] = {}
_RAW_STREAM: list = []


def torch_stream(index: int) -> StreamRef:
    """torch's current stream on CUDA device ``index`` (``torch.cuda.current_stream(index)``), read
    without making a torch Stream object."""
    if not _RAW_STREAM:
        torch = sys.modules["torch"]
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        _RAW_STREAM.append(raw or (lambda i: torch.cuda.current_stream(i).cuda_stream))
    ptr = _RAW_STREAM[0](index)
    s = _TORCH_STREAMS.get(ptr)
    if s is None:
        if len(_TORCH_STREAMS) > 256:  # streams come and go: keep the map small
            _TORCH_STREAMS.clear()
        s = _TORCH_STREAMS[ptr] = StreamRef(ptr)
    return s


_NDARRAY: type | None = None  # cupy.ndarray, once array_sig has seen CuPy imported
_TENSORS: frozenset = frozenset()  # torch.Tensor and torch.nn.Parameter, once array_sig has seen torch imported


def array_sig(x) -> tuple[tuple, int] | None:
    """(signature, device pointer) of a CuPy array or a torch CUDA tensor (``torch.Tensor`` or
    ``torch.nn.Parameter``), read without converting it.

    The signature holds what a launch depends on besides the pointer: shape, strides, dtype (and the
    device of a torch tensor). None for anything else (NumPy arrays, other GPU arrays, CPU tensors, other
    tensor subclasses): those take the checked, converting path.
    """
    t = type(x)
    if t is _NDARRAY:
        return (x.shape, x.strides, x.dtype), x.data.ptr
    if t in _TENSORS:
        if not x.is_cuda:
            return None
        return (x.shape, x.stride(), x.dtype, x.get_device()), x.data_ptr()
    return _first_sig(x)


def _first_sig(x) -> tuple[tuple, int] | None:
    """:func:`array_sig` of a type it does not know yet: learn cupy.ndarray and torch's tensor types
    (when those libraries are imported), then answer."""
    global _NDARRAY, _TENSORS
    if _NDARRAY is None and "cupy" in sys.modules:
        _NDARRAY = _cupy().ndarray
    torch = sys.modules.get("torch")
    if not _TENSORS and isinstance(getattr(torch, "Tensor", None), type):
        parameter = getattr(getattr(torch, "nn", None), "Parameter", None)
        _TENSORS = frozenset(t for t in (torch.Tensor, parameter) if isinstance(t, type))
    t = type(x)
    if t is _NDARRAY or t in _TENSORS:
        return array_sig(x)
    return None


def torch_device(arrays) -> int | None:
    """The CUDA device ordinal of the first torch CUDA tensor among ``arrays``, or None (none is one)."""
    torch = sys.modules.get("torch")  # no torch imported: no argument can be a torch tensor
    if torch is None:
        return None
    for x in arrays:
        if isinstance(x, torch.Tensor) and x.is_cuda:
            return x.get_device()
    return None


class Output:
    """Where a cached call's new result comes from and which stream it launches on.

    CuPy operands: a CuPy array (``cupy.empty``) and CuPy's current stream. A call with a torch CUDA tensor
    among its arrays: a torch tensor (``torch.empty`` on that tensor's device, which allocates for torch's
    current stream there) and torch's current stream of that device, so torch users get torch's stream
    semantics (``with torch.cuda.stream(s):``, ``torch.cuda.graph``).

    Args:
        shape: the result's shape.
        dtype: its NumPy dtype (of the raw bits for bfloat16).
        torch_index: the CUDA ordinal of the call's first torch tensor, or None for CuPy operands.
        name: the result's dtype name when it differs from ``dtype``'s ("bfloat16", a torch result only).
    """

    __slots__ = ("device", "dtype", "index", "shape", "sizes", "torch_dtype")

    def __init__(self, shape: tuple[int, ...], dtype, torch_index: int | None, name: str | None = None) -> None:
        self.shape, self.dtype, self.index = tuple(shape), dtype, torch_index
        # torch.empty(*sizes): separate ints parse ~1 µs faster than one tuple (H200 host, torch 2.11)
        self.sizes = self.shape or ((),)
        self.device = self.torch_dtype = None
        if torch_index is not None:
            torch = sys.modules["torch"]
            self.device = torch.device("cuda", torch_index)
            self.torch_dtype = getattr(torch, name or np.dtype(dtype).name, None)  # "float32" -> torch.float32

    def new(self):
        """(a new result array, its device address, the stream to launch on: None for CuPy's current)."""
        if self.index is None:
            out = cupy_empty(self.shape, self.dtype)
            return out, out.data.ptr, None
        out = sys.modules["torch"].empty(*self.sizes, dtype=self.torch_dtype, device=self.device)
        return out, out.data_ptr(), torch_stream(self.index)

    def stream(self):
        """The stream to launch on (None: CuPy's current stream)."""
        return None if self.index is None else torch_stream(self.index)


def cupy_empty(shape: tuple[int, ...], dtype):
    """``cupy.empty(shape, dtype)``: a new C-contiguous array on the current device."""
    return _cupy().ndarray(shape, dtype)


_GET_DEVICE: list = []


def device_id() -> int:
    """The current CUDA device's ordinal."""
    if not _GET_DEVICE:
        _GET_DEVICE.append(_cupy().cuda.runtime.getDevice)
    return _GET_DEVICE[0]()


def byte_extent(x) -> tuple[int, int]:
    """[lo, hi) byte offsets of an array's elements from its data pointer (empty: (0, 0))."""
    lo = hi = 0
    for d, s in zip(x.shape, x.strides, strict=True):
        if d == 0:
            return 0, 0
        if s < 0:
            lo += (d - 1) * s
        else:
            hi += (d - 1) * s
    return lo, hi + x.itemsize


def may_overlap(pa: int, ea: tuple[int, int], pb: int, eb: tuple[int, int]) -> bool:
    """True when the byte ranges ``pa + ea`` and ``pb + eb`` (from :func:`byte_extent`) intersect."""
    return pa + ea[0] < pb + eb[1] and pb + eb[0] < pa + ea[1] and ea[0] != ea[1] and eb[0] != eb[1]


def launch(kernel: Kernel, grid: tuple[int, int, int], args: tuple, stream=None) -> None:
    """Launch ``kernel`` on the current CuPy stream (or ``stream``).

    Raises:
        LaunchError: the grid is out of range or CUDA refuses the launch.
    """
    if grid[1] > 65535 or grid[2] > 65535 or grid[0] > 2**31 - 1:
        raise LaunchError(f"grid={grid} exceeds CUDA's limits (x < 2^31, y and z ≤ 65535)")
    fn = kernel.function()
    try:
        fn(grid, kernel.block, args, shared_mem=kernel.dynamic_smem_bytes, stream=stream)
    except Exception as exc:
        raise LaunchError(f"launch of {kernel.name} grid={grid} block={kernel.block} failed: {exc}") from exc


def like_inputs(result, inputs: tuple):
    """``result`` in the array library of the inputs: a torch tensor when an input is one.

    A new CuPy result of a call that took a torch tensor is handed back as a torch tensor on the same
    device, without a copy (DLPack); an output the caller passed in (one of ``inputs``) and every
    result of a call without torch tensors come back unchanged (CuPy in, CuPy out).
    """
    torch = sys.modules.get("torch")  # no torch imported: no input can be a torch tensor
    if torch is None or not type(result).__module__.startswith("cupy"):
        return result
    if any(r is result for r in inputs) or not any(isinstance(x, torch.Tensor) for x in inputs):
        return result
    return torch.from_dlpack(result)


def returns_like_inputs(fn):
    """Decorator of the checked (first-call) paths of the public array functions: torch tensors in, torch
    tensors out (:func:`like_inputs`); a call with a torch CUDA tensor among its arguments runs, copies and
    fills included, on torch's current stream of that tensor's device (as its cached repeats do)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        inputs = (*args, *kwargs.values())
        index = torch_device(inputs)
        if index is None:
            return like_inputs(fn(*args, **kwargs), inputs)
        with external_stream(torch_stream(index).ptr, index):
            return like_inputs(fn(*args, **kwargs), inputs)

    return wrapper


def external_stream(ptr: int, device: int = -1):
    """CuPy's stream object for the raw CUDA stream ``ptr`` (a ``with`` makes it CuPy's current stream).

    ``cupy.cuda.ExternalStream`` is deprecated from CuPy 14 in favour of ``Stream.from_external``, which takes
    an object implementing the CUDA stream protocol and does not exist in CuPy 13 (the cuda12 extra allows
    either); the deprecation warning is silenced here, once, rather than shown to every torch user.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return _cupy().cuda.ExternalStream(ptr, device) if device >= 0 else _cupy().cuda.ExternalStream(ptr)

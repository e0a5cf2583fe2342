"""Arguments in, kernels launched: GPU-array conversion with clear errors, and the launch itself."""

from __future__ import annotations

import functools
import sys

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


def cupy_ndarray() -> type:
    """``cupy.ndarray`` (imported on first use: CuPy is an optional dependency)."""
    return _cupy().ndarray


_TORCH_TENSOR: list = []


def array_sig(x) -> tuple[tuple, int] | None:
    """(signature, device pointer) of a CuPy array or a torch CUDA tensor, read without converting it.

    The signature holds what a launch depends on besides the pointer: shape, strides, dtype (and the
    device of a torch tensor). None for anything else (NumPy arrays, other GPU arrays, torch bfloat16,
    CPU tensors): those take the checked, converting path.
    """
    t = type(x)
    if t is cupy_ndarray():
        return (x.shape, x.strides, x.dtype), x.data.ptr
    if not _TORCH_TENSOR:
        if t.__name__ != "Tensor" or t.__module__ != "torch":
            return None
        _TORCH_TENSOR.append(t)
    if t is not _TORCH_TENSOR[0] or not x.is_cuda or x.dtype is sys.modules["torch"].bfloat16:
        return None
    return (x.shape, x.stride(), x.dtype, x.device.index), x.data_ptr()


def cupy_empty(shape: tuple[int, ...], dtype):
    """``cupy.empty(shape, dtype)``."""
    return _cupy().empty(shape, dtype)


def device_id() -> int:
    """The current CUDA device's ordinal."""
    return _cupy().cuda.runtime.getDevice()


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
    """Decorator of the public array functions: torch tensors in, torch tensors out (:func:`like_inputs`)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return like_inputs(fn(*args, **kwargs), (*args, *kwargs.values()))

    return wrapper

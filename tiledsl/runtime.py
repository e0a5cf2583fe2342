"""Arguments in, kernels launched: GPU-array conversion with clear errors, and the launch itself."""

from __future__ import annotations

import functools
import sys

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
    from . import dtypes

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

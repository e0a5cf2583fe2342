"""TMA tensor maps (Hopper's bulk tensor copy engine): the 128-byte descriptor a kernel's
``cp.async.bulk.tensor`` reads, encoded by the CUDA driver (``cuTensorMapEncodeTiled``, through the CUDA
Python bindings, package ``cuda-bindings``) and passed to the kernel by value as a ``__grid_constant__``
parameter (CUDA Programming Guide, "Tensor Memory Access"; CUDA Driver API, "Tensor Map Object
Management").

A tensor map describes one 2-D matrix in global memory (its address, both extents, the row pitch in bytes)
and the box one copy moves into shared memory, here with the 128-byte swizzle that wgmma's descriptors
read. Elements of a box outside the matrix arrive as zeros, so edge tiles and K tails need no masking.
"""

from __future__ import annotations

import ctypes
import importlib.util
from dataclasses import dataclass

import numpy as np

from .errors import LaunchError, ToolchainError

__all__ = ["TENSOR_MAP_BYTES", "TENSOR_MAP_C_TYPE", "TensorMap2D", "available", "encode"]

TENSOR_MAP_BYTES = 128
"""Size of a ``CUtensorMap`` (64-byte aligned), as the driver API defines it."""

TENSOR_MAP_C_TYPE = "const __grid_constant__ tdsl_tensor_map"
"""The kernel parameter type of a tensor map (``tdsl_tensor_map`` is declared in the kernel's prelude)."""

TENSOR_MAP_DECL = ("// a CUtensorMap as the driver encodes it (cuTensorMapEncodeTiled): 128 opaque bytes, passed by value\n"
                   "struct alignas(64) tdsl_tensor_map { unsigned long long opaque[16]; };\n")


@dataclass(frozen=True)
class TensorMap2D:
    """The geometry of one operand's tensor map (no address: that comes with each call).

    Attributes:
        dtype: "float16", "bfloat16" or "float32" (tf32 products read float32 elements).
        inner, outer: extents in elements of the contiguous dimension and of the other one.
        pitch_bytes: bytes between consecutive rows along ``outer`` (leading dimension × element size);
            a multiple of 16.
        box_inner, box_outer: the box one copy moves, in elements (each ≤ 256; box_inner × itemsize ≤ 128
            with the 128-byte swizzle).
    """

    dtype: str
    inner: int
    outer: int
    pitch_bytes: int
    box_inner: int
    box_outer: int


def available() -> bool:
    """True when the CUDA Python bindings that encode tensor maps (``cuda-bindings``) are installed."""
    return importlib.util.find_spec("cuda") is not None and importlib.util.find_spec("cuda.bindings") is not None


def encode(geom: TensorMap2D, ptr: int) -> np.void:
    """The tensor map of the matrix at device address ``ptr`` as a 128-byte NumPy scalar (the value CuPy
    passes as a by-value kernel argument).

    Raises:
        ToolchainError: the CUDA Python bindings (``cuda-bindings``) are not installed.
        LaunchError: the driver refuses the map (it names the geometry and the address).
    """
    try:
        from cuda.bindings import driver as cu
    except ImportError as exc:  # an optional dependency of the cuda12 / cuda13 extras
        raise ToolchainError("TMA tensor maps (GemmSchedule.warp_specialize=True with mma='wgmma') need the CUDA "
                             "Python bindings: pip install cuda-bindings (same CUDA major version as CuPy)") from exc
    dt = {"float16": cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
          "bfloat16": cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
          "float32": cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT32}[geom.dtype]
    u64, u32 = cu.cuuint64_t, cu.cuuint32_t
    err, tmap = cu.cuTensorMapEncodeTiled(
        dt, 2, ptr, [u64(geom.inner), u64(geom.outer)], [u64(geom.pitch_bytes)],
        [u32(geom.box_inner), u32(geom.box_outer)], [u32(1), u32(1)],
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE, cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
        cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise LaunchError(f"cuTensorMapEncodeTiled refused {geom} at address {ptr:#x}: {err.name}")
    raw = ctypes.string_at(tmap.getPtr(), TENSOR_MAP_BYTES)
    return np.frombuffer(raw, dtype=np.dtype((np.void, TENSOR_MAP_BYTES)))[0]

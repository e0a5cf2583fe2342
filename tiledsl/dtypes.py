"""Supported element types: C spelling, itemsize, accumulator type and test tolerance.

16-bit types travel as raw ``unsigned short`` bits and are converted in the kernel with the helpers in
``tiledsl.codegen.prelude`` (no CUDA headers needed, so NVRTC works with no CUDA toolkit installed).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import SpecError


@dataclass(frozen=True)
class DType:
    """One element type.

    Attributes:
        name: numpy-style name ("float32").
        short: short tag used in kernel names ("f32").
        c_type: C type the kernel stores it as.
        itemsize: bytes per element.
        acc_c_type: C type of the accumulator.
        load_fn: C function turning a stored element into the accumulator type ("" = plain conversion).
        store_fn: C function turning an accumulator value into a stored element ("" = plain conversion).
        rtol: relative tolerance of a test against float64 (per element sum of K products, see tests).
    """

    name: str
    short: str
    c_type: str
    itemsize: int
    acc_c_type: str
    load_fn: str = ""
    store_fn: str = ""
    rtol: float = 1e-5

    def to_acc(self, expr: str) -> str:
        """C expression converting ``expr`` (of ``c_type``) to the accumulator type."""
        if self.load_fn:
            return f"{self.load_fn}({expr})"
        return expr if self.c_type == self.acc_c_type else f"({self.acc_c_type})({expr})"

    def from_acc(self, expr: str) -> str:
        """C expression converting ``expr`` (accumulator) to ``c_type``."""
        if self.store_fn:
            return f"{self.store_fn}({expr})"
        return expr if self.c_type == self.acc_c_type else f"({self.c_type})({expr})"


DTYPES: dict[str, DType] = {
    "float32": DType("float32", "f32", "float", 4, "float", rtol=1e-5),
    "float64": DType("float64", "f64", "double", 8, "double", rtol=1e-12),
    "float16": DType("float16", "f16", "unsigned short", 2, "float", "tdsl_h2f", "tdsl_f2h", rtol=1e-2),
    "bfloat16": DType("bfloat16", "bf16", "unsigned short", 2, "float", "tdsl_bf2f", "tdsl_f2bf", rtol=1e-2),
    "int32": DType("int32", "i32", "int", 4, "long long", rtol=0.0),
    "int64": DType("int64", "i64", "long long", 8, "long long", rtol=0.0),
}


def dtype_name(dtype) -> str:
    """Normalise a dtype given as a string, numpy dtype, CuPy/torch dtype or array to its name.

    Raises:
        SpecError: the dtype is not one tiledsl knows.
    """
    if dtype is None:
        raise SpecError(f"dtype=None is not a dtype; supported: {', '.join(DTYPES)}")
    if isinstance(dtype, str):
        name = dtype
    else:
        text = str(dtype)
        if text.startswith("torch."):
            name = text[len("torch."):]
        else:
            try:
                name = np.dtype(dtype).name
            except TypeError:
                name = text
    if name in DTYPES:
        return name
    raise SpecError(f"dtype={name!r} is not supported; supported: {', '.join(DTYPES)}")


def get(dtype) -> DType:
    """The :class:`DType` for ``dtype`` (name, numpy dtype, ...). Raises SpecError if unsupported."""
    return DTYPES[dtype_name(dtype)]

"""The registered op families: one line per family. A new family adds its folder and one line here."""

from __future__ import annotations

from .family import Family, register
from .gemm.family import GEMM
from .reduce.family import REDUCE
from .transpose.family import TRANSPOSE

FAMILIES: tuple[Family, ...] = (
    register(GEMM),
    register(REDUCE),
    register(TRANSPOSE),
)

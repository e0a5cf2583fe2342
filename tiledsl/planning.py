"""The kernel plan: every fact derived from (op, schedule, target), computed once, in one frozen object.

A :class:`Plan` is what the emitter renders (the kernel signature comes from :attr:`Plan.params`), what
the launcher packs arguments from (the same list), what the cost model reads (threads, vector widths,
register cap, shared memory, grid) and what the search compares to drop duplicate schedules
(:attr:`Plan.key`). Each op family builds its plans with one function (``tiledsl.gemm.kernel_plan.plan_gemm``,
``tiledsl.reduce.kernel_plan.plan_reduce``, ``tiledsl.transpose.kernel_plan.plan_transpose``), registered in its
:class:`~tiledsl.family.Family` record; ``tiledsl.plan(op, schedule, arch)`` returns it.

New facts slot in by adding a field with a default here, or by a family's own :attr:`Plan.detail`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

# C type of a scalar parameter -> the NumPy scalar type CuPy passes it as
SCALAR_PACK = {"int": np.int32, "long long": np.int64, "float": np.float32, "double": np.float64,
                "unsigned int": np.uint32, "unsigned long long": np.uint64}


@dataclass(frozen=True)
class Param:
    """One kernel parameter.

    Attributes:
        name: the C name in the signature ("A", "lda").
        c_type: its C type ("const float* __restrict__", "long long", "float").
        source: how a call fills it: the name of a call binding ("a", "lda", "alpha", "partials"), or
            "const" when :attr:`value` holds it (fixed by the op).
        value: the value of a "const" parameter (an int or float), else None.
    """

    name: str
    c_type: str
    source: str
    value: int | float | None = None

    @property
    def is_pointer(self) -> bool:
        """True for a device pointer (filled with an array, or 0 for an unused buffer)."""
        return "*" in self.c_type

    @property
    def is_by_value(self) -> bool:
        """True for a parameter passed as raw bytes (a TMA tensor map: a 128-byte NumPy scalar)."""
        return self.c_type.startswith("const __grid_constant__")

    @property
    def decl(self) -> str:
        """The declaration as it appears in the kernel signature: ``"long long lda"``."""
        return f"{self.c_type} {self.name}"

    def pack(self, value):
        """``value`` as the argument CuPy passes: arrays as they are, scalars as their NumPy type.

        Raises:
            TypeError: ``value`` is None for a scalar parameter.
        """
        if self.is_pointer:
            if value is None:
                return np.uint64(0)
            return np.uint64(value) if isinstance(value, int) else value
        if self.is_by_value and value is not None:
            return value
        if value is None:
            raise TypeError(f"kernel parameter {self.name} ({self.c_type}) needs a value")
        return SCALAR_PACK[self.c_type](value)


@dataclass(frozen=True)
class Workspace:
    """A scratch buffer a launch needs (split-K partial products, reduction partials and tickets).

    Attributes:
        name: the binding that fills a pointer :class:`Param` ("workspace", "partials", "tickets"; GEMM
            stream-K: "sk_partials", "gemm_tickets"; GEMM fused split-K: "workspace", "gemm_tickets").
        dtype: NumPy dtype name of its elements.
        count: elements.
        init: "none", "zero" (zeroed before each launch), "counters" (zeroed once, when the buffer is
            allocated: the kernel leaves every counter it used at zero) or "identity" (filled with
            :attr:`fill` before each launch).
        fill: the value of an "identity" buffer.
    """

    name: str
    dtype: str
    count: int
    init: str = "none"
    fill: int | float = 0

    @functools.cached_property
    def nbytes(self) -> int:
        """Bytes of the buffer (computed once: a repeated launch reads it)."""
        return self.count * np.dtype(self.dtype).itemsize


@dataclass(frozen=True)
class Plan:
    """Every derived fact of one kernel for (op, schedule, target). Frozen; ``print(plan)`` is readable.

    Attributes:
        family: "gemm", "reduce", "transpose".
        op, schedule: what it was built from (``schedule`` as given).
        canonical: the schedule emitting the same machine code for this op with every knob the op makes
            irrelevant set to one value (GEMM: ``vec`` above the operands' alignment); the search drops
            schedules whose :attr:`key` it has seen.
        arch: the architecture of the target ("sm_90"), or None when planned without a device.
        device: the target's name ("H200"), or None.
        kernel_name: the ``extern "C"`` name.
        block: threads per block (x, y, z).
        grid: blocks (x, y, z) for this op on this target; None where it depends on a device not given.
        grid_rule: how the grid follows from the run-time sizes (the kernel is shape-generic where the
            sizes are parameters).
        dynamic_smem_bytes, static_smem_bytes: shared memory per block (static: planned, before ptxas).
        vec: effective elements per global access of each operand, e.g. (("A", 4), ("B", 2), ("C", 4)).
        min_blocks: ``__launch_bounds__``'s minimum resident blocks per SM.
        max_registers: the register cap that bound implies: min(255, 65536 / (threads · min_blocks)).
        est_registers: registers per thread the kernel wants, estimated before compiling (uncapped: above
            :attr:`max_registers` the excess spills).
        params: the kernel's parameters, in order.
        workspace: scratch buffers a launch needs.
        followup: a second kernel launched after this one (GEMM split-K's reduction), or None.
        detail: family-specific resolved facts (a frozen dataclass), or None.
    """

    family: str
    op: object
    schedule: object
    canonical: object
    arch: str | None
    device: str | None
    kernel_name: str
    block: tuple[int, int, int]
    grid: tuple[int, int, int] | None
    grid_rule: str
    dynamic_smem_bytes: int
    static_smem_bytes: int
    vec: tuple[tuple[str, int], ...]
    min_blocks: int
    max_registers: int
    est_registers: int
    params: tuple[Param, ...]
    workspace: tuple[Workspace, ...] = ()
    followup: Plan | None = None
    detail: object = None

    @property
    def threads(self) -> int:
        """Threads per block."""
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def smem_bytes(self) -> int:
        """Shared memory per block, static + dynamic (planned)."""
        return self.static_smem_bytes + self.dynamic_smem_bytes

    @property
    def blocks(self) -> int | None:
        """Blocks in the grid (None when the grid is not known)."""
        return None if self.grid is None else self.grid[0] * self.grid[1] * self.grid[2]

    def width(self, operand: str) -> int:
        """Effective elements per access of ``operand`` ("A", "x", ...).

        Raises:
            KeyError: no such operand (the message lists them).
        """
        for name, v in self.vec:
            if name == operand:
                return v
        raise KeyError(f"no operand {operand!r} in the plan; operands: {[n for n, _ in self.vec]}")

    @property
    def key(self) -> tuple:
        """What identifies the machine code: family, op, canonical schedule, arch. Plans with the same
        key compile to the same kernel (only names and comments differ)."""
        return (self.family, self.op, self.canonical, self.arch)

    def signature(self) -> str:
        """``name(type a, type b, ...)``, as in the emitted source (without line breaks)."""
        return f"{self.kernel_name}({', '.join(p.decl for p in self.params)})"

    def __str__(self) -> str:
        grid = "depends on the device (plan with arch= or on a GPU)" if self.grid is None else str(self.grid)
        lines = [
            f"Plan {self.family} for {self.device or 'no device'} ({self.arch or 'no arch'})",
            f"  kernel      {self.kernel_name}",
            f"  block       {self.block} = {self.threads} threads",
            f"  grid        {grid}",
            f"  grid rule   {self.grid_rule}",
            f"  smem        {self.dynamic_smem_bytes} B dynamic + {self.static_smem_bytes} B static per block",
            "  vec         " + ", ".join(f"{n}={v}" for n, v in self.vec),
            f"  registers   cap {self.max_registers} (__launch_bounds__({self.threads}, {self.min_blocks})), "
            f"estimate {self.est_registers}",
            "  params",
        ]
        for p in self.params:
            how = f"= {p.value}" if p.source == "const" else f"<- {p.source}"
            lines.append(f"    {p.decl:<42} {how}")
        for ws in self.workspace:
            lines.append(f"  workspace   {ws.name}: {ws.count} × {ws.dtype} ({ws.init})")
        if self.followup is not None:
            lines.append("  then")
            lines.extend("  " + line for line in str(self.followup).splitlines())
        return "\n".join(lines)


def register_cap(threads: int, min_blocks: int) -> int:
    """Registers per thread ``__launch_bounds__(threads, min_blocks)`` allows: 65536 / (threads · blocks),
    at most 255 (the hardware limit)."""
    return min(255, 65536 // max(threads * min_blocks, 1))


def render_params(params: tuple[Param, ...], breaks: tuple[int, ...] = ()) -> str:
    """The parameter list of a signature, with a line break (and 4 spaces) before each index in ``breaks``."""
    out = ""
    for i, p in enumerate(params):
        if i:
            out += ",\n    " if i in breaks else ", "
        out += p.decl
    return out

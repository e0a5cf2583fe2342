"""The :class:`Report` that :func:`tiledsl.explain` returns: levels, occupancy, prediction, bound."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..occupancy import Occupancy, Waves
from ..target import Target

LEVELS = ("hbm", "l2", "smem", "registers")
"""Memory levels of the multi-level roofline (``docs/design.md``, "Background"), slowest first."""


@dataclass(frozen=True)
class Level:
    """Traffic at one memory level and the time it bounds.

    Attributes:
        name: "hbm", "l2", "smem" or "registers".
        bytes: bytes the kernel's threads request at this level (the formulas of ``002_…``).
        intensity: FLOP / byte at this level (flops / bytes; ``inf`` when no bytes move).
        ceiling_bytes_per_s: the level's bandwidth (see :meth:`tiledsl.Target.ceilings`).
        ceiling_source: where that bandwidth comes from (measured / datasheet / estimate / derived).
        time_s: time bound of this level: ``moved_bytes / ceiling_bytes_per_s``.
        moved_bytes: bytes the hardware moves for these requests; equals ``bytes`` except for shared
            memory, where a warp's broadcast reads move fewer bytes and bank conflicts more
            (128-byte wavefronts, CUDA guide "Shared Memory").
        note: one line of explanation.
    """

    name: str
    bytes: int | float
    intensity: float
    ceiling_bytes_per_s: float
    ceiling_source: str
    time_s: float
    moved_bytes: int | float
    note: str = ""

    def to_dict(self) -> dict:
        return {"bytes": self.bytes, "intensity": self.intensity, "time_s": self.time_s,
                "moved_bytes": self.moved_bytes, "ceiling_bytes_per_s": self.ceiling_bytes_per_s,
                "ceiling_source": self.ceiling_source, "note": self.note}


@dataclass(frozen=True)
class Report:
    """What the cost model says about one (op, schedule, device).

    Attributes:
        op_name: "gemm", "reduce", "transpose", "vector_add", "sum", ...
        op, schedule: what was explained.
        target: the device and its ceilings.
        flops: floating-point operations of the kernel.
        levels: level name → :class:`Level` (``LEVELS`` order).
        compute_time_s: flops / peak FP32 rate (the compute roof).
        compute_ceiling_flops_per_s, compute_ceiling_source: that roof and its source.
        occupancy: blocks per SM and the limiting resource (None for ops with no schedule).
        waves: wave quantization.
        predicted_s: predicted kernel time, seconds.
        bound_by: what bounds the prediction: a level name, "compute" (instruction issue of the FP32
            pipe), "latency" (too little in flight: Little's law) or "atomics".
        terms: the named times (seconds) the prediction is built from, and the correction factors.
        expr: sympy expressions in the op's sizes and the schedule's knobs (``flops`` and one per level).
        notes: lines of explanation printed under the table.
        compute_unit: what the compute roof is ("peak FP32 FMA rate", "dense 16-bit tensor-core rate").
    """

    op_name: str
    op: object
    schedule: object
    target: Target
    flops: int | float
    levels: dict[str, Level]
    compute_time_s: float
    compute_ceiling_flops_per_s: float
    compute_ceiling_source: str
    occupancy: Occupancy | None
    waves: Waves | None
    predicted_s: float
    bound_by: str
    terms: dict[str, float] = field(default_factory=dict)
    expr: dict = field(default_factory=dict, repr=False)
    notes: tuple[str, ...] = ()
    compute_unit: str = "peak FP32 FMA rate"

    @property
    def predicted_flops_per_s(self) -> float:
        """flops / predicted_s."""
        return self.flops / self.predicted_s if self.predicted_s > 0 else 0.0

    def to_dict(self) -> dict:
        """Plain data: ``{"flops", "levels": {"hbm": {"bytes", "intensity", "time_s", …}, "l2", "smem",
        "registers"}, "compute", "occupancy", "waves", "predicted_s", "bound_by", "terms", "device"}``."""
        return {
            "op": self.op_name,
            "flops": self.flops,
            "levels": {k: v.to_dict() for k, v in self.levels.items()},
            "compute": {"time_s": self.compute_time_s, "ceiling_flops_per_s": self.compute_ceiling_flops_per_s,
                        "ceiling_source": self.compute_ceiling_source},
            "occupancy": self.occupancy.to_dict() if self.occupancy else {},
            "waves": self.waves.to_dict() if self.waves else {},
            "predicted_s": self.predicted_s,
            "bound_by": self.bound_by,
            "terms": dict(self.terms),
            "device": self.target.name,
            "expr": {k: str(v) for k, v in self.expr.items()},
        }

    def __str__(self) -> str:
        head = f"tiledsl.explain: {self.op_name} on {self.target.name} ({self.target.arch}, {self.target.sm_count} SMs)"
        if self.schedule is not None:
            head += f"\nschedule: {_short(self.schedule)}"
        rows = [("level", "bytes", "FLOP/byte", "ceiling", "time bound", "note")]
        for lv in self.levels.values():
            rows.append((lv.name, _bytes(lv.bytes), _num(lv.intensity), _rate(lv.ceiling_bytes_per_s, "B/s"),
                         _time(lv.time_s), lv.note))
        rows.append(("compute", f"{_num(self.flops)} FLOP", "", _rate(self.compute_ceiling_flops_per_s, "FLOP/s"),
                     _time(self.compute_time_s), self.compute_unit))
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        table = ["  ".join(c.ljust(w) if j == 0 else c.rjust(w) for j, (c, w) in enumerate(zip(r[:5], widths, strict=True)))
                 + ("  " + r[5] if r[5] else "") for r in rows]
        lines = [head, "", table[0], "-" * max(len(x) for x in table), *table[1:]]
        lines.append("ceilings: " + "; ".join([*(f"{lv.name} {lv.ceiling_source}" for lv in self.levels.values()),
                                               f"compute {self.compute_ceiling_source}"]))
        lines.append("")
        if self.occupancy is not None:
            o = self.occupancy
            lines.append(f"occupancy: {o.blocks_per_sm} blocks/SM ({o.warps_per_sm} warps, {o.occupancy:.0%}), "
                         f"limited by {o.limited_by}  [threads {o.by_threads}, registers {o.by_registers} "
                         f"({o.registers_per_thread}/thread, {o.registers_source}), smem {o.by_smem} "
                         f"({o.smem_per_block_bytes} B/block), blocks {o.by_blocks}]")
        if self.waves is not None and self.waves.blocks:
            w = self.waves
            lines.append(f"waves: {w.blocks} blocks over {w.slots} slots = {w.waves} waves, "
                         f"efficiency {w.efficiency:.0%}")
        perf = ""
        if self.flops:
            perf = f" = {self.predicted_flops_per_s / 1e12:.1f} TFLOP/s"
        hbm = self.levels.get("hbm")
        if hbm is not None and self.predicted_s > 0:
            perf += f", {hbm.bytes / self.predicted_s / 1e9:.0f} GB/s of HBM traffic"
        lines.append(f"predicted: {_time(self.predicted_s)}{perf}")
        lines.append(f"bound by: {self.bound_by}")
        for n in self.notes:
            lines.append(f"  - {n}")
        return "\n".join(lines)


def _short(s: object) -> str:
    to_dict = getattr(s, "to_dict", None)
    if callable(to_dict):
        return ", ".join(f"{k}={v}" for k, v in to_dict().items())
    return repr(s)


def _num(x: float) -> str:
    if x == float("inf"):
        return "inf"
    if x == 0:
        return "0"
    if abs(x) >= 1e4 or abs(x) < 1e-2:
        return f"{x:.3g}"
    return f"{x:.3g}"


def _bytes(b: float) -> str:
    for unit, f in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if b >= f:
            return f"{b / f:.3g} {unit}"
    return f"{b:.0f} B"


def _rate(r: float, unit: str) -> str:
    for p, f in (("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if r >= f:
            return f"{r / f:.3g} {p}{unit}"
    return f"{r:.3g} {unit}"


def _time(t: float) -> str:
    if t >= 1:
        return f"{t:.3g} s"
    if t >= 1e-3:
        return f"{t * 1e3:.3g} ms"
    return f"{t * 1e6:.3g} µs"

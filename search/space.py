"""Search spaces: the schedule knobs of each op family as Optuna parameters, and the way back.

Every knob is an integer parameter (most of them the base-2 logarithm of a tile size) so that every
Optuna sampler, including CMA-ES and QMC, can use it. A sampled point becomes a schedule through the
schedule's own constructor and ``validate(target)``: the rule table (``tiledsl.gemm.GEMM_RULES``) is
the single source of the constraints, so a point that violates one is rejected with that rule's name
and message, before anything is compiled.

A space also lists *seed candidates*: a small structural enumeration that the cost model ranks so the
study can start from the predicted best (``study.enqueue_trial``).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Knob:
    """One integer parameter of a space.

    Attributes:
        name: Optuna parameter name (``bm_log2``).
        low, high: inclusive range.
        step: step of the integer range.
        doc: what it controls.
    """

    name: str
    low: int
    high: int
    step: int = 1
    doc: str = ""

    def values(self) -> list[int]:
        return list(range(self.low, self.high + 1, self.step))


@dataclass(frozen=True)
class Rejection:
    """Why a sampled point is not a schedule: the rule's name and its message."""

    rule: str
    message: str


@dataclass(frozen=True)
class Space:
    """The search space of one op family.

    Attributes:
        family: op family name ("gemm").
        knobs: the integer parameters.
        to_fields: params -> schedule constructor keyword arguments.
        from_schedule: schedule -> params (for ``enqueue_trial``), or None when not representable.
        seeds: (op, target) -> candidate schedules for the cost model to rank.
        work: (op) -> (amount, unit, display unit, scale): FLOP or bytes per call, for throughput.
    """

    family: str
    knobs: tuple[Knob, ...]
    to_fields: Callable[[dict], dict]
    from_schedule: Callable[[object], dict | None]
    seeds: Callable[[object, object], list]
    work: Callable[[object], tuple[float, str, str, float]]
    notes: dict = field(default_factory=dict)

    def suggest(self, trial) -> dict:
        """Sample one point through an Optuna trial (``trial.suggest_int`` per knob)."""
        return {k.name: trial.suggest_int(k.name, k.low, k.high, step=k.step) for k in self.knobs}

    def distributions(self) -> dict:
        """Optuna distributions of the knobs (for ``create_trial`` and grid samplers)."""
        import optuna

        return {k.name: optuna.distributions.IntDistribution(k.low, k.high, step=k.step) for k in self.knobs}

    def grid(self) -> dict[str, list[int]]:
        """Every knob's values, for ``optuna.samplers.GridSampler``."""
        return {k.name: k.values() for k in self.knobs}

    def size(self) -> int:
        """Number of points in the (unpruned) space."""
        return math.prod(len(k.values()) for k in self.knobs)

    def schedule_type(self) -> type:
        from tiledsl.api import family

        return family(self.family).schedule_type

    def build(self, params: dict, target) -> object | Rejection:
        """The schedule of ``params``, validated against ``target``; or the first rule it breaks.

        Uses the schedule's constructor (schedule-scope rules) and ``validate(target)`` (device rules),
        so the reasons are exactly the rule table's.
        """
        from tiledsl.errors import ScheduleError

        try:
            sched = self.schedule_type()(**self.to_fields(params))
            sched.validate(target)
        except ScheduleError as exc:
            return Rejection(exc.rule or type(exc).__name__, str(exc))
        return sched


def schedule_key(schedule) -> str:
    """Canonical text of a schedule (sorted JSON): equal schedules, equal keys."""
    return json.dumps(schedule.to_dict(), sort_keys=True)


def describe(schedule) -> str:
    """A compact one-line description of a schedule (non-default-looking fields only where long)."""
    d = schedule.to_dict()
    if {"bm", "bn", "bk", "rm", "rn"} <= set(d):
        text = (f"{d['bm']}x{d['bn']}x{d['bk']} t{d['rm']}x{d['rn']} w{d['wm']}x{d['wn']} v{d['vec']} "
                f"{'db' if d['double_buffer'] else 'sb'} u{d['unroll']} p{d['smem_pad']} s{d['swizzle']}")
        return text
    return " ".join(f"{k}={v}" for k, v in d.items())


# ---------------------------------------------------------------- GEMM


def _p2(x: int) -> int:
    return 1 << x


def _log2(x: int) -> int | None:
    if x < 1 or x & (x - 1):
        return None
    return x.bit_length() - 1


_GEMM_KNOBS = (
    Knob("bm_log2", 5, 8, doc="block tile rows bm = 2^x (32..256)"),
    Knob("bn_log2", 5, 8, doc="block tile columns bn = 2^x (32..256)"),
    Knob("bk_log2", 3, 5, doc="K depth of a shared-memory tile bk = 2^x (8..32)"),
    Knob("rm_log2", 0, 4, doc="thread tile rows rm = 2^x (1..16)"),
    Knob("rn_log2", 0, 4, doc="thread tile columns rn = 2^x (1..16)"),
    Knob("lanes_n_log2", 0, 5, doc="threads of a warp along N = 2^x; warp tile wn = lanes·rn, wm = (32/lanes)·rm"),
    Knob("vec_log2", 0, 2, doc="elements per global load vec = 2^x (1, 2, 4)"),
    Knob("double_buffer", 0, 1, doc="two shared-memory stages with register prefetch"),
    Knob("unroll_log2", 0, 5, doc="inner-k unroll = 2^x (must divide bk)"),
    Knob("smem_pad", 0, 4, step=4, doc="padding elements per shared-memory row (0 or 4)"),
    Knob("swizzle_log2", 0, 4, doc="block-rows per rasterization group = 2^x (1..16)"),
    Knob("min_blocks", 1, 2, doc="blocks per SM the register allocation must allow (__launch_bounds__)"),
)


def _gemm_fields(p: dict) -> dict:
    lanes_n = _p2(p["lanes_n_log2"])
    rm, rn = _p2(p["rm_log2"]), _p2(p["rn_log2"])
    return dict(bm=_p2(p["bm_log2"]), bn=_p2(p["bn_log2"]), bk=_p2(p["bk_log2"]), rm=rm, rn=rn,
                wm=(32 // lanes_n) * rm, wn=lanes_n * rn, vec=_p2(p["vec_log2"]),
                double_buffer=bool(p["double_buffer"]), unroll=_p2(p["unroll_log2"]),
                smem_pad=int(p["smem_pad"]), swizzle=_p2(p["swizzle_log2"]), split_k=1,
                min_blocks=int(p["min_blocks"]))


def _gemm_params(s) -> dict | None:
    if s.split_k != 1 or s.smem_pad not in (0, 4):
        return None
    lanes_n = s.wn // s.rn if s.rn else 0
    logs = {"bm_log2": _log2(s.bm), "bn_log2": _log2(s.bn), "bk_log2": _log2(s.bk), "rm_log2": _log2(s.rm),
            "rn_log2": _log2(s.rn), "lanes_n_log2": _log2(lanes_n), "vec_log2": _log2(s.vec),
            "unroll_log2": _log2(s.unroll), "swizzle_log2": _log2(s.swizzle)}
    if any(v is None for v in logs.values()):
        return None
    params = {**logs, "double_buffer": int(s.double_buffer), "smem_pad": s.smem_pad,
              "min_blocks": getattr(s, "min_blocks", 1)}
    for k in _GEMM_KNOBS:
        if not k.low <= params[k.name] <= k.high:
            return None
    try:
        again = type(s)(**_gemm_fields(params))
    except ValueError:
        return None
    if again.to_dict() != s.to_dict():  # e.g. a warp shape the knobs cannot express
        return None
    return params


def _gemm_seeds(op, target) -> list:
    """Structural candidates: tiles 64..256, thread tiles 4..16, the usual fast settings elsewhere."""
    from tiledsl.errors import ScheduleError
    from tiledsl.gemm import GemmSchedule
    from tiledsl.registry import presets

    out, seen = [], set()

    def add(s) -> None:
        key = schedule_key(s)
        if key not in seen and _gemm_params(s) is not None:
            seen.add(key)
            out.append(s)

    for s in presets("gemm").values():
        try:
            add(s.validate(target))
        except ScheduleError:
            pass
    for bm, bn, bk, rm, rn, lanes_n in itertools.product((64, 128, 256), (64, 128, 256), (8, 16, 32),
                                                         (4, 8, 16), (4, 8, 16), (4, 8)):
        try:
            for min_blocks in (1, 2):
                s = GemmSchedule(bm=bm, bn=bn, bk=bk, rm=rm, rn=rn, wm=(32 // lanes_n) * rm, wn=lanes_n * rn,
                                 vec=4, double_buffer=True, unroll=min(bk, 16), smem_pad=0, swizzle=8,
                                 min_blocks=min_blocks)
                add(s.validate(target))
        except ScheduleError:
            continue
    return out


def _gemm_work(op) -> tuple[float, str, str, float]:
    return float(op.flops), "FLOP", "TFLOP/s", 1e12


GEMM_SPACE = Space("gemm", _GEMM_KNOBS, _gemm_fields, _gemm_params, _gemm_seeds, _gemm_work)


def space_for(family: str) -> Space:
    """The search space of an op family.

    Raises:
        KeyError: no space is defined for ``family`` (the message lists those that are).
    """
    spaces = {"gemm": GEMM_SPACE}
    spaces.update(_optional_spaces())
    if family not in spaces:
        raise KeyError(f"no search space for op family {family!r}; spaces: {sorted(spaces)}")
    return spaces[family]


def _optional_spaces() -> dict[str, Space]:
    """Spaces of families that exist in ``tiledsl.api.FAMILIES`` besides GEMM (imported lazily)."""
    try:
        from . import space_more
    except ImportError:
        return {}
    return space_more.spaces()

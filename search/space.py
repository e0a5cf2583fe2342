"""Search spaces: the schedule knobs of each op family as Optuna parameters, and the way back.

Every knob is an integer parameter (most of them the base-2 logarithm of a tile size) so that every
Optuna sampler, including CMA-ES and QMC, can use it. A sampled point becomes a schedule through the
schedule's own constructor and ``validate(target)``: the rule table (``tiledsl.gemm.GEMM_RULES``) is
the single source of the constraints, so a point that violates one is rejected with that rule's name
and message, before anything is compiled. The same holds for ``tiledsl.reduce.REDUCE_RULES`` (whose
op-scope rules, e.g. ``strided_needs_loop``, are checked with the op) and
``tiledsl.transpose.TRANSPOSE_RULES``.

A space also lists *seed candidates*: a small structural enumeration that the cost model ranks so the
study can start from the predicted best (``study.enqueue_trial``).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace


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
        structure_ignore: schedule fields left out when ``--model-only`` picks one finalist per
            structure (knobs the cost model barely sees).
        specialize: (space, op) -> space with the knobs that cannot matter for ``op`` pinned to one
            value (e.g. ``col_rows`` of a contiguous reduction), so equal kernels are not sampled twice.
        canonical: (schedule, op) -> the schedule that emits the same kernel for ``op`` with the knobs
            the op makes irrelevant set to one value (GEMM: ``vec`` above the op's alignment), so
            duplicates are detected on kernels, not on knob values; None: schedules are canonical.
        preference: schedule -> family-specific part of the tie-break key (lower is preferred) used
            when predictions tie (see :func:`tie_key`).
    """

    family: str
    knobs: tuple[Knob, ...]
    to_fields: Callable[[dict], dict]
    from_schedule: Callable[[object], dict | None]
    seeds: Callable[[object, object], list]
    work: Callable[[object], tuple[float, str, str, float]]
    notes: dict = field(default_factory=dict)
    structure_ignore: tuple[str, ...] = ()
    specialize: Callable[[Space, object], Space] | None = None
    canonical: Callable[[object, object], object] | None = None
    preference: Callable[[object], tuple] = lambda s: ()

    def for_op(self, op) -> Space:
        """This space for ``op``: knobs that cannot change the kernel of ``op`` pinned (see ``specialize``)."""
        return self if self.specialize is None else self.specialize(self, op)

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

    def build(self, params: dict, target, op=None) -> object | Rejection:
        """The schedule of ``params``, validated against ``target`` (and ``op``); or the first rule it breaks.

        Uses the schedule's constructor (schedule-scope rules), ``validate(target)`` (device rules) and,
        when ``op`` is given and the schedule has one, ``check_op(op)`` (op-scope rules), so the reasons
        are exactly the rule table's.
        """
        from tiledsl.errors import ScheduleError

        try:
            sched = self.schedule_type()(**self.to_fields(params))
            sched.validate(target)
            if op is not None and hasattr(sched, "check_op"):
                sched.check_op(op)
        except ScheduleError as exc:
            return Rejection(exc.rule or type(exc).__name__, str(exc))
        return sched if op is None else self.canonicalize(sched, op, target)

    def canonicalize(self, schedule, op, target=None):
        """``schedule`` in canonical form for ``op`` (see ``canonical``): the form that emits the same
        kernel with the knobs ``op`` makes irrelevant set to one value. The canonical form is only
        used when it passes the same rules (``validate(target)`` when a target is given); otherwise
        ``schedule`` is returned unchanged."""
        if self.canonical is None:
            return schedule
        from tiledsl.errors import ScheduleError

        try:
            canon = self.canonical(schedule, op)
            if canon is not schedule and target is not None:
                canon.validate(target)
        except ScheduleError:
            return schedule
        return canon


def schedule_key(schedule) -> str:
    """Canonical text of a schedule (sorted JSON): equal schedules, equal keys."""
    return json.dumps(schedule.to_dict(), sort_keys=True)


def tie_key(space: Space, op, target) -> Callable[[object], tuple]:
    """Deterministic tie-break between schedules whose predictions tie (lower is preferred): the
    library's default for ``op`` on ``target`` first, then the shipped presets in file order, then the
    family's ``preference`` (reduce: ``combine="two_pass"`` before ``"atomic"``, automatic grid and
    mappings before explicit ones), then the canonical schedule text."""
    from tiledsl.api import family
    from tiledsl.registry import presets

    fam = family(space.family)
    default = fam.default_schedule(op, target)
    keys = {schedule_key(space.canonicalize(default, op)): -1}
    for i, s in enumerate(presets(space.family).values()):
        keys.setdefault(schedule_key(space.canonicalize(s, op)), i)

    def key(schedule) -> tuple:
        text = schedule_key(space.canonicalize(schedule, op))
        return (keys.get(text, len(keys) + 1), space.preference(schedule), text)

    return key


def _pipeline_text(d: dict) -> str:
    """FMA kernel pipeline: sb (1 stage), db (2, register prefetch), cpN (N cp.async stages)."""
    stages = d.get("stages") or (2 if d.get("double_buffer") else 1)
    return "sb" if stages == 1 else "db" if stages == 2 else f"cp{stages}"


def describe(schedule) -> str:
    """A compact one-line description of a schedule, or of its ``to_dict()``."""
    d = schedule if isinstance(schedule, dict) else schedule.to_dict()
    if d.get("mma") == "wgmma":
        tma = (' tma persistent' if d.get('persistent') else ' tma') if d.get('warp_specialize') else ''
        return (f"wgmma{tma} {d['bm']}x{d['bn']}x{d['bk']} s{d['stages']} "
                f"sw{d['swizzle']}")
    if d.get("mma") in ("mma_sync", "dmma") and d.get("kernel") == "gemv":
        split = f" split{d['split_k']}" if d["split_k"] > 1 else ""
        split += " fused" if d.get("split_k_fused") and d["split_k"] > 1 else ""
        math = "3xTF32 mma.sync" if d["mma"] == "mma_sync" else "FP64 dmma"
        ring = " ring" if d.get("fragment_prefetch") else ""
        return f"gemv {math} threads {d['bn']} rn{d['rn']} u{d['unroll']}{ring}{split}"
    if d.get("mma") == "mma_sync":
        return f"mma.sync {d['bm']}x{d['bn']}x{d['bk']} w{d['wm']}x{d['wn']} s{d['stages']} sw{d['swizzle']}"
    if d.get("kernel") == "gemv":
        text = f"gemv rows {d['bm']} threads {d['bn']} v{d['vec']} rn{d['rn']} u{d['unroll']}"
        text += f" g{d['col_groups']}" if d.get("col_groups", 1) > 1 else ""
        text += " smem_a" if d.get("smem_a") else ""
        from tiledsl.gemm.schedule import gemv_auto_min_blocks

        text += " spare" if d.get("spare_slot") else ""
        text += f" kl{d['k_lanes']}" if d.get("k_lanes", 32) != 32 else ""
        auto = gemv_auto_min_blocks(d["bn"], d.get("smem_a", False), d.get("split_k_fused", False))
        text += f" mb{d['min_blocks']}" if d.get("min_blocks", auto) not in (0, auto) else ""
        return text + (f" sk{d['split_k']}{' fused' if d.get('split_k_fused') else ''}" if d.get("split_k", 1) > 1
                       else "")
    if {"bm", "bn", "bk", "rm", "rn"} <= set(d):
        text = (f"{d['bm']}x{d['bn']}x{d['bk']} t{d['rm']}x{d['rn']} w{d['wm']}x{d['wn']} v{d['vec']} "
                f"{_pipeline_text(d)} u{d['unroll']} p{d['smem_pad']} s{d['swizzle']}")
        if d.get("split_k", 1) > 1:
            text += f" sk{d['split_k']}"
        if d.get("fragment_prefetch"):
            text += " fp"
        if d.get("stream_k"):
            text += " streamk"
        return text
    if {"strategy", "items_per_thread", "combine"} <= set(d):  # ReduceSchedule
        return (f"{d['strategy']} b{d['block']} v{d['vec']} i{d['items_per_thread']} g{d['grid'] or 'auto'} "
                f"{d['combine']} rt{d['row_threads'] or 'auto'} cr{d['col_rows'] or 'auto'}")
    if {"variant", "tile", "rows_per_thread"} <= set(d):  # TransposeSchedule
        return (f"{d['variant']} t{d['tile']} r{d['rows_per_thread']} v{d['vec']} p{d['smem_pad']} "
                f"s{d['swizzle']}")
    return " ".join(f"{k}={v}" for k, v in d.items())


# ---------------------------------------------------------------- GEMM


def _p2(x: int) -> int:
    return 1 << x


def _log2(x: int) -> int | None:
    if x < 1 or x & (x - 1):
        return None
    return x.bit_length() - 1


_GEMM_KNOBS = (
    Knob("bm_log2", 4, 8, doc="block tile rows bm = 2^x (16..256)"),
    Knob("bm_three_quarters", 0, 1, doc="block tile rows 3·2^(x-2) in place of 2^x (12, 24, 48, 96, 192): rows "
                                        "fitted to an M between two powers of two (48 for M = 35)"),
    Knob("bn_log2", 4, 8, doc="block tile columns bn = 2^x (16..256)"),
    Knob("bk_log2", 3, 5, doc="K depth of a shared-memory tile bk = 2^x (8..32)"),
    Knob("rm_log2", 0, 4, doc="thread tile rows rm = 2^x (1..16)"),
    Knob("rn_log2", 0, 4, doc="thread tile columns rn = 2^x (1..16)"),
    Knob("lanes_n_log2", 0, 5, doc="threads of a warp along N = 2^x; warp tile wn = lanes·rn, wm = (32/lanes)·rm"),
    Knob("vec_log2", 0, 2, doc="elements per global load vec = 2^x (1, 2, 4)"),
    Knob("stages", 1, 4, doc="K tiles in the shared-memory pipeline: 1, 2 (register prefetch), 3-4 (cp.async, "
                             "float32)"),
    Knob("unroll_log2", 0, 5, doc="inner-k unroll = 2^x (must divide bk)"),
    Knob("smem_pad", 0, 4, step=4, doc="padding elements per shared-memory row (0 or 4)"),
    Knob("swizzle_log2", 0, 4, doc="block-rows per rasterization group = 2^x (1..16)"),
    Knob("min_blocks", 1, 2, doc="blocks per SM the register allocation must allow (__launch_bounds__)"),
    Knob("split_k_log2", 0, 4, doc="slices of K computed by separate blocks split_k = 2^x (1..16; a second kernel "
                                   "sums them in a fixed order)"),
    Knob("fragment_prefetch", 0, 1, doc="two register sets of fragments, the next K tile's first loaded under the "
                                        "last k step's FMAs (stages 2, unroll = bk)"),
    Knob("stream_k", 0, 1, doc="stream-K for the last waves: every SM shares the remaining tiles' K iterations "
                               "(split_k = 1)"),
)


def _gemm_fields(p: dict) -> dict:
    lanes_n = _p2(p["lanes_n_log2"])
    rm, rn = _p2(p["rm_log2"]), _p2(p["rn_log2"])
    bm = 3 * _p2(p["bm_log2"] - 2) if p.get("bm_three_quarters", 0) else _p2(p["bm_log2"])
    return dict(bm=bm, bn=_p2(p["bn_log2"]), bk=_p2(p["bk_log2"]), rm=rm, rn=rn,
                wm=(32 // lanes_n) * rm, wn=lanes_n * rn, vec=_p2(p["vec_log2"]),
                stages=int(p["stages"]), unroll=_p2(p["unroll_log2"]),
                smem_pad=int(p["smem_pad"]), swizzle=_p2(p["swizzle_log2"]),
                split_k=_p2(p.get("split_k_log2", 0)), min_blocks=int(p["min_blocks"]),
                fragment_prefetch=bool(p.get("fragment_prefetch", 0)), stream_k=bool(p.get("stream_k", 0)))


def _gemm_params(s) -> dict | None:
    if s.smem_pad not in (0, 4) or getattr(s, "kernel", "tiled") != "tiled" or getattr(s, "mma", "fma") != "fma":
        return None
    lanes_n = s.wn // s.rn if s.rn else 0
    three_quarters = s.bm % 3 == 0 and _log2(s.bm // 3) is not None
    logs = {"bm_log2": _log2(s.bm // 3 * 4) if three_quarters else _log2(s.bm), "bn_log2": _log2(s.bn),
            "bk_log2": _log2(s.bk), "rm_log2": _log2(s.rm), "rn_log2": _log2(s.rn), "lanes_n_log2": _log2(lanes_n), "vec_log2": _log2(s.vec),
            "unroll_log2": _log2(s.unroll), "swizzle_log2": _log2(s.swizzle), "split_k_log2": _log2(s.split_k)}
    if any(v is None for v in logs.values()):
        return None
    params = {**logs, "bm_three_quarters": int(three_quarters), "stages": s.stages, "smem_pad": s.smem_pad,
              "fragment_prefetch": int(s.fragment_prefetch), "stream_k": int(s.stream_k),
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
    """Structural candidates: tiles 64..256, thread tiles 4..16, the usual fast settings elsewhere; where the
    op has fewer C tiles than the device has SMs, also small tiles (16..32 rows for a few rows of C) and each
    candidate split 2..16 ways along K (slices of at least 2·bk), so a grid smaller than one wave is seeded
    with candidates that fill the GPU."""
    from tiledsl.errors import ScheduleError
    from tiledsl.gemm import GemmSchedule
    from tiledsl.gemm.kernel_plan import tile_count
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
    sms = getattr(target, "sm_count", None) or 132
    if op is None or -(-op.m // 64) * -(-op.n // 64) >= sms:
        return out
    small = []
    for bm, bn, bk, rm, rn, lanes_n in itertools.product((16, 32), (64, 128, 256), (16, 32), (1, 2, 4), (4, 8),
                                                         (8, 16, 32)):
        try:
            small.append(GemmSchedule(bm=bm, bn=bn, bk=bk, rm=rm, rn=rn, wm=(32 // lanes_n) * rm,
                                      wn=lanes_n * rn, vec=4, double_buffer=True, unroll=min(bk, 16),
                                      smem_pad=0, swizzle=8).validate(target))
        except ScheduleError:
            continue
    for s in [*out, *small]:
        if s.split_k != 1:
            continue
        tiles = tile_count(op, s)
        for split in (1, 2, 4, 8, 16):
            if tiles * split > 4 * sms or (split > 1 and op.k < split * 2 * s.bk):
                break
            try:
                add(replace(s, split_k=split).validate(target) if split > 1 else s)
            except ScheduleError:
                continue
    return out


def _plan_canonical(s, op):
    """The schedule emitting the same kernel for ``op``: the plan's ``canonical`` (GEMM: ``vec`` clamped
    to what the operands allow, ``min_blocks`` 1 where the emitter ignores it; see
    ``tiledsl.gemm.kernel_plan.canonical``). Schedules with the same plan key are duplicates."""
    from tiledsl import family

    return family.of(op).plan(op, s, None).canonical


def _gemm_work(op) -> tuple[float, str, str, float]:
    return float(op.flops), "FLOP", "TFLOP/s", 1e12


# ---- tensor cores: float16 / bfloat16 inputs, and float32 with precision="tf32" ----
_TC_KERNELS = ("mma_sync", "wgmma", "wgmma_tma", "wgmma_tma_persistent")
_TC_KNOBS = (
    Knob("kernel", 0, 2, doc="0: mma.sync fed by ldmatrix (sm_80+); 1: wgmma, every thread copying with cp.async; "
                             "2: wgmma fed by a TMA producer warpgroup (sm_90); 3: the same, persistent (one "
                             "block per SM walking the C tiles)"),
    Knob("bm_log2", 6, 8, doc="block tile rows bm = 2^x (64..256)"),
    Knob("bn_log2", 6, 8, doc="block tile columns bn = 2^x (64..256)"),
    Knob("stages", 2, 6, doc="K tiles in the shared-memory pipeline"),
    Knob("warp_log2", 5, 6, doc="mma.sync warp tile wm = wn = 2^x (32 or 64; wgmma: a warpgroup owns 64 x bn)"),
    Knob("swizzle_log2", 0, 4, doc="block-rows per rasterization group = 2^x (1..16)"),
)


def _tc_fields_for(wgmma_bk: int) -> Callable[[dict], dict]:
    """params -> GemmSchedule fields; ``wgmma_bk``: one 128-byte row (64 16-bit or 32 float32 elements)."""

    def fields_of(p: dict) -> dict:
        bm, bn = _p2(p["bm_log2"]), _p2(p["bn_log2"])
        common = dict(bm=bm, bn=bn, stages=int(p["stages"]), swizzle=_p2(p["swizzle_log2"]), split_k=1)
        kernel = _TC_KERNELS[p["kernel"]]
        if kernel == "mma_sync":
            w = _p2(p["warp_log2"])
            return dict(mma="mma_sync", bk=32, wm=min(w, bm), wn=min(w, bn), smem_pad=8, **common)
        tma = kernel.startswith("wgmma_tma")
        return dict(mma="wgmma", bk=wgmma_bk, warp_specialize=tma, persistent=kernel == "wgmma_tma_persistent",
                    **common)

    return fields_of


def _tc_params_for(knobs: tuple[Knob, ...], fields_of: Callable[[dict], dict]) -> Callable[[object], dict | None]:
    def params_of(s) -> dict | None:
        if s.mma == "fma" or s.split_k != 1:
            return None
        kernel = ("mma_sync" if s.mma == "mma_sync" else "wgmma" if not s.warp_specialize
                  else "wgmma_tma_persistent" if s.persistent else "wgmma_tma")
        warp = _log2(s.wm) if s.mma == "mma_sync" else 6  # wgmma ignores it: one value, no duplicates
        params = {"kernel": _TC_KERNELS.index(kernel), "bm_log2": _log2(s.bm), "bn_log2": _log2(s.bn),
                  "stages": s.stages, "warp_log2": warp, "swizzle_log2": _log2(s.swizzle)}
        return _params_of(knobs, fields_of, s, params)

    return params_of


def _tc_seeds(op, target) -> list:
    """The tensor-core presets, then wgmma (TMA and cp.async) and mma.sync tiles around them."""
    space = GEMM_SPACE.for_op(op)
    cands = [dict(space.to_fields({"kernel": kernel, "bm_log2": bm, "bn_log2": bn, "stages": st, "warp_log2": w,
                                    "swizzle_log2": 3}))
             for kernel in (3, 2, 1, 0) for bm in (7, 8, 6) for bn in (8, 7, 6) for st in (3, 4, 6) for w in (6, 5)]
    return _valid_seeds("gemm", cands, op, target, space.from_schedule)


def _tc_space(wgmma_bk: int, kernels: tuple[int, ...]) -> Space:
    fields_of = _tc_fields_for(wgmma_bk)
    knobs = tuple(Knob(k.name, min(kernels), max(kernels), k.step, k.doc) if k.name == "kernel" else k
                  for k in _TC_KNOBS)
    return Space("gemm", knobs, fields_of, _tc_params_for(knobs, fields_of), _tc_seeds, _gemm_work,
                 structure_ignore=("swizzle", "wm", "wn"), canonical=_plan_canonical)


GEMM_TC16_SPACE = _tc_space(64, (0, 1, 2, 3))
"""float16 / bfloat16: mma.sync, cp.async wgmma and TMA wgmma (the device rules drop wgmma before sm_90)."""
GEMM_TF32_SPACE = _tc_space(32, (2, 3))
"""float32 with precision="tf32": TMA wgmma only (rules ``tf32_needs_tma``, ``mma_needs_16_bit_inputs``)."""
GEMM_TC16_NO_TMA_SPACE = _tc_space(64, (0, 1))
"""float16 / bfloat16 where tensor maps cannot be encoded (no ``cuda-bindings``): no TMA kernels."""


# ---- the GEMV-style kernel: few rows of C (kernel="gemv") ----
_GEMV_KNOBS = (
    Knob("rows_log2", 0, 4, doc="rows of C per block bm = 2^x (1..16; pinned to the op's rows rounded up to 2^x)"),
    Knob("rows_three_quarters", 0, 1, doc="1: bm = 3·2^(x-2) rows in place of 2^x (12 in place of 16; pinned to 0 "
                                          "but for 9-12 rows)"),
    Knob("threads_log2", 5, 8, doc="threads per block bn = 2^x (32..256): vec·col_groups·bn columns (row-major B) or "
                                   "a warp per rn columns (column-major B) per block"),
    Knob("vec_log2", 0, 2, doc="elements per load of B = 2^x (1, 2, 4; lowered to the op's alignment)"),
    Knob("unroll_log2", 0, 3, doc="K steps in flight per thread = 2^x (1..8)"),
    Knob("rn_log2", 0, 2, doc="columns per warp with a column-major B = 2^x (1..4; pinned to 1 for a row-major B)"),
    Knob("col_groups_log2", 0, 3, doc="groups of vec columns per thread with a row-major B = 2^x (1..8; bm·groups·vec "
                                      "≤ 64; pinned to 1 for a column-major B)"),
    Knob("split_k", 1, 512, doc="K slices (1..512, at most K/8; any count, as the library's pick: about four "
                                "blocks per SM)"),
    Knob("split_k_fused", 0, 1, doc="0: the split-K kernel sums the slices (a second launch); 1: the last block of "
                                    "each column group does (split_k > 1)"),
    Knob("smem_a", 0, 1, doc="1: the block's K slice of A staged in shared memory (bm ≥ 4, col_groups 1, "
                             "a slice of at most 48 KiB; pinned to 0 elsewhere)"),
    Knob("spare_slot", 0, 1, doc="1: with smem_a, a ring of unroll + 1 loads of B walked by a running pointer "
                                 "(pinned to 0 below 4 rows, and ignored without smem_a)"),
    Knob("k_lanes_log2", 2, 5, doc="lanes along K per group of rn columns = 2^x (4..32) with a column-major B, A in "
                                   "registers or its ring (smem_a and spare_slot); pinned to 5 for a row-major B, "
                                   "ignored with smem_a alone"),
    Knob("min_blocks", 0, 4, doc="blocks per SM the register allocation must allow (__launch_bounds__): 0 = the "
                                 "schedule's automatic value (1, or 512 / bn with A staged); 3 caps 128 threads at "
                                 "168 registers, 4 at 128"),
)


GEMV_SPLIT_KNOB_MAX = 512  # == _GEMV_KNOBS' split_k high; the space for an op caps it at ceil(K / 8)


def _gemv_fields(p: dict) -> dict:
    rows = 3 * _p2(p["rows_log2"] - 2) if p.get("rows_three_quarters", 0) and p["rows_log2"] >= 2 \
        else _p2(p["rows_log2"])
    smem_a = bool(p.get("smem_a", 0))
    spare_slot = smem_a and bool(p.get("spare_slot", 0))
    return dict(kernel="gemv", bm=rows, bn=_p2(p["threads_log2"]), vec=_p2(p["vec_log2"]),
                unroll=_p2(p["unroll_log2"]), rn=_p2(p["rn_log2"]), split_k=int(p["split_k"]),
                split_k_fused=bool(p["split_k_fused"]), col_groups=_p2(p.get("col_groups_log2", 0)),
                smem_a=smem_a, spare_slot=spare_slot, min_blocks=int(p.get("min_blocks", 0)),
                k_lanes=_p2(p.get("k_lanes_log2", 5)) if spare_slot or not smem_a else 32)


def _gemv_params(s) -> dict | None:
    from tiledsl.gemm.schedule import gemv_auto_min_blocks

    if getattr(s, "kernel", "tiled") != "gemv":
        return None
    three_quarters = s.bm % 3 == 0 and _log2(s.bm // 3) is not None
    params = {"rows_log2": _log2(s.bm // 3 * 4) if three_quarters else _log2(s.bm),
              "rows_three_quarters": int(three_quarters), "threads_log2": _log2(s.bn), "vec_log2": _log2(s.vec),
              "unroll_log2": _log2(s.unroll), "rn_log2": _log2(s.rn), "split_k": s.split_k,
              "split_k_fused": int(s.split_k_fused), "col_groups_log2": _log2(s.col_groups),
              "smem_a": int(s.smem_a), "spare_slot": int(s.spare_slot), "k_lanes_log2": _log2(s.k_lanes),
              "min_blocks": 0 if s.min_blocks == gemv_auto_min_blocks(s.bn, s.smem_a, s.split_k_fused)
              else s.min_blocks}
    return _params_of(_GEMV_KNOBS, _gemv_fields, s, params)


def _gemv_seeds(op, target) -> list:
    """The library's pick (``tiledsl.gemm.family.gemv_schedule``), that pick before its lanes in groups
    (``gemv_schedule_before_lanes``) and its form before the small-product and odd-N rules (``gemv_base_schedule``), then around the pick: 64, 128 and 256 threads, the K
    slices for about 1, 2, 4 and 8 blocks per SM, unroll 2 and 8, each slice count > 1 with both ways of summing;
    with a row-major B, also 2 and 4 groups of columns per thread (``col_groups``) at B's load width, and for 4–16 rows
    A staged in shared memory (``smem_a``) at 128 and 256 threads, unroll 8 and 4, slices for 4 and 8 blocks per SM
    at most 512 and 256 deep; with a column-major B and 4–16 rows, A staged at 128 and 256 threads, unroll 1,
    slices for about four blocks per SM at most 512 and 256 deep. With a row-major B every staged seed again with a
    spare slot in its ring (``spare_slot``); with a column-major B and A in registers from 8 rows, the pick with its
    registers capped at 168 (``min_blocks`` 3) and at 128 with unroll 1 (4), and the kernel with a ring and its lanes
    in groups along K (``gemv_ring_column_b``) with 2 columns per group at unroll 4 or 2, 256 or 128 threads, 8 or 32
    lanes per group, and with 4 columns per group at 128 threads, unroll 1 (four blocks per SM), 2 or 4 (three), and
    the kernel with A in registers and its lanes in groups along K (``gemv_lanes_column_b``) in the forms
    ``benchmarks/gemv_fused.py --family colb_lanes`` times; for 9–12 rows every seed of 16 rows per block again with
    12."""
    from tiledsl.gemm.family import (
        gemv_base_schedule,
        gemv_lanes_column_b,
        gemv_ring_column_b,
        gemv_schedule,
        gemv_schedule_before_lanes,
        gemv_split,
        gemv_twelve_rows_fit,
    )

    pick = gemv_schedule(op, target)
    plain = gemv_base_schedule(op, target)  # the pick before its one-launch, column-groups or staged-A form
    cands = [pick, gemv_schedule_before_lanes(op, target), replace(plain, vec=min(plain.vec, op.align_b))]
    base = replace(pick, smem_a=False, spare_slot=False, min_blocks=0) if pick.smem_a else pick  # A in registers around the pick
    for bn, unroll in itertools.product((128, 256, 64), (base.unroll, 8, 2)):
        one = replace(base, bn=bn, unroll=unroll, split_k=1, split_k_fused=False)
        for per_sm in (4, 2, 1, 8):
            split = gemv_split(op, one, target, per_sm)
            for fused in ((False, True) if split > 1 else (False,)):
                cands.append(replace(one, split_k=split, split_k_fused=fused))
    if op.layout_b == "row":
        vec = min(base.vec, op.align_b)
        for groups, unroll in itertools.product((2, 4), (base.unroll, 2)):
            if base.bm * groups * vec > 64:  # rule col_groups_fit_registers
                continue
            one = replace(base, vec=vec, col_groups=groups, unroll=unroll, split_k=1, split_k_fused=False)
            split = gemv_split(op, one, target)
            cands.append(replace(one, split_k=split, split_k_fused=base.split_k_fused and split > 1))
        if plain.bm >= 4:  # A staged in shared memory (bm a power of two): slices at most 512 or 256 deep
            for bn, unroll, per_sm, deepest in itertools.product((128, 256), (8, 4), (4, 8), (512, 256)):
                one = replace(plain, vec=min(plain.vec, op.align_b), bn=bn, unroll=unroll, smem_a=True, min_blocks=0,
                              split_k=1, split_k_fused=False)
                split = max(gemv_split(op, one, target, per_sm, min_depth=32), -(-op.k // deepest))
                cands.append(replace(one, split_k=min(split, GEMV_SPLIT_KNOB_MAX)))
    elif plain.bm >= 4:  # a column-major B with A staged: 128 or 256 threads, unroll 1 (the space's 128-register cap
        for bn, unroll, deepest in itertools.product((128, 256), (1,), (512, 256)):  # spills unroll 2), ≤ 512 or 256 deep
            one = replace(plain, bn=bn, unroll=unroll, smem_a=True, min_blocks=0, split_k=1, split_k_fused=False)
            split = max(gemv_split(op, one, target), -(-op.k // deepest))
            cands.append(replace(one, split_k=min(split, GEMV_SPLIT_KNOB_MAX)))
    if op.layout_b == "row":  # the staged seeds again with a spare slot in their ring of B
        cands += [replace(c, spare_slot=True) for c in cands if c.smem_a]
    elif pick.bm >= 8 and not pick.smem_a:  # A in registers (up to 255 of them): capped at 168 and 128 registers
        cands += [replace(pick, min_blocks=3), replace(pick, unroll=1, min_blocks=4)]
    ring = gemv_ring_column_b(op, plain, target) if op.layout_b == "col" else None
    if ring is not None:  # the ring with its lanes in groups along K, around its pick (SASS: docs/gemm.md)
        cands.append(ring)
        for bn, rn, unroll, min_blocks in ((256, 2, 2, 0), (128, 4, 1, 0), (128, 4, 2, 3), (128, 4, 4, 3)):
            cands.append(replace(ring, bn=bn, rn=rn, unroll=unroll, min_blocks=min_blocks))  # 0: 512 threads per SM
        cands += [replace(ring, k_lanes=32), replace(ring, bn=128, min_blocks=0)]
    if op.layout_b == "col":  # A in registers, lanes in groups along K: the forms --family colb_lanes times
        for form in ((), (8, 4, 2, 128, 1), (8, 2, 2, 128, 1), (8, 2, 1, 128, 3), (8, 4, 1, 128, 3), (8, 4, 1, 256, 2)):
            lanes = gemv_lanes_column_b(op, plain, target, *form)
            cands += [lanes] if lanes is not None else []
    if gemv_twelve_rows_fit(op.m):  # every seed of 16 rows per block again with 12
        cands += [replace(c, bm=12) for c in cands if c.bm == 16]
    return _valid_seeds("gemm", cands, op, target, _gemv_params)


GEMM_GEMV_SPACE = Space("gemm", _GEMV_KNOBS, _gemv_fields, _gemv_params, _gemv_seeds, _gemm_work,
                        structure_ignore=(), canonical=_plan_canonical)
"""Few rows of C where ``schedule=None`` runs the GEMV-style kernel (``tiledsl.gemm.family.GEMV_MAX_M``: one row
of any dtype and layout, up to 16 float32 rows with either layout of B): its block width, load width, unroll, columns
per warp or groups of columns per thread, K slices and how they are summed, and whether A is staged in shared memory.
``rows_log2`` is pinned to the op's rows (``rows_three_quarters`` chooses 12 in place of 16 for 9–12 rows, and is
pinned to 0 elsewhere), ``spare_slot`` to 0 below 4 rows, ``k_lanes_log2`` to 5 (32 lanes, one group per warp) for a
row-major B and below 4 rows, ``min_blocks`` free (0: the schedule's automatic value),
``rn_log2`` to 0 (rn = 1) for a row-major B (it reads one column per thread lane) and ``col_groups_log2`` to 0 for a
column-major B (a warp per column), ``split_k`` capped at ceil(K / 8)."""


# ---- the GEMV-style kernel on the tensor cores: precision="3xtf32" (kernel="gemv", mma="mma_sync") ----
_GEMV_MMA_KNOBS = (
    Knob("threads_log2", 5, 8, doc="threads per block bn = 2^x (32..256), a warp per rn columns"),
    Knob("frags_log2", 0, 3, doc="columns per warp rn = 8·2^x (8..64: 2^x n8 fragments; at least 32 with a row-major "
                                 "B, whose lanes read 4 adjacent columns for 4 fragments)"),
    Knob("unroll_log2", 0, 3, doc="k16 steps in flight per thread = 2^x (1..8)"),
    Knob("split_k", 1, 512, doc="K slices (1..512, at most K/16)"),
    Knob("split_k_fused", 0, 1, doc="0: the split-K kernel sums the slices (a second launch); 1: the last block of "
                                    "each column group does (split_k > 1)"),
    Knob("min_blocks", 1, 4, doc="blocks per SM the register allocation must allow (__launch_bounds__): 4 caps 128 "
                                 "threads at 128 registers"),
)


def _gemv_mma_fields(p: dict) -> dict:
    return dict(kernel="gemv", mma="mma_sync", bm=16, bk=16, vec=4, bn=_p2(p["threads_log2"]),
                rn=8 * _p2(p["frags_log2"]), unroll=_p2(p["unroll_log2"]), split_k=int(p["split_k"]),
                split_k_fused=bool(p["split_k_fused"]), min_blocks=int(p["min_blocks"]))


def _gemv_mma_params(s) -> dict | None:
    return _gemv_tc_params(s, "mma_sync", _GEMV_MMA_KNOBS, _gemv_mma_fields)


def _gemv_tc_params(s, mma: str, knobs: tuple, fields_of: Callable[[dict], dict]) -> dict | None:
    """The ``knobs`` of a tensor-core GEMV schedule on ``mma`` ("mma_sync" or "dmma"), None for any other
    schedule."""
    if getattr(s, "kernel", "tiled") != "gemv" or s.mma != mma:
        return None
    params = {"threads_log2": _log2(s.bn), "frags_log2": _log2(s.rn // 8) if s.rn % 8 == 0 else None,
              "unroll_log2": _log2(s.unroll), "split_k": s.split_k, "split_k_fused": int(s.split_k_fused),
              "min_blocks": s.min_blocks}
    if any(k.name == "ring" for k in knobs):
        params["ring"] = int(s.fragment_prefetch)
    return _params_of(knobs, fields_of, s, params)


def _gemv_mma_seeds(op, target) -> list:
    """The library's pick (``tiledsl.gemm.family.gemv_mma_schedule``) and the forms ``benchmarks/gemv_fused.py
    --family mma3x`` times around it (16 to 64 columns per warp, unroll 1 to 4, K slices filling whole waves)."""
    from tiledsl.gemm.family import gemv_mma_schedule

    return _tc_gemv_seeds(op, target, gemv_mma_schedule(op, target), "mma_sync", ((16, 2), (32, 1), (32, 4), (64, 2)),
                          _gemv_mma_params)


def _tc_gemv_seeds(op, target, pick, mma: str, forms, to_params, ring: bool = False) -> list:
    """Seeds of a tensor-core GEMV space: the library's ``pick`` (None: none) and the ``forms`` ((rn, unroll), 128
    threads, K slices filling whole waves: ``tiledsl.gemm.family.gemv_mma_form``) on ``mma``, each also with its slices
    summed in the kernel where it splits K (one launch); with ``ring`` each form of unroll 4 or less also through the
    ring of steps (``fragment_prefetch``)."""
    from tiledsl.gemm.family import gemv_mma_form, gemv_mma_shape

    cands = [] if pick is None else [pick]
    vec = 4 if pick is None else pick.vec  # B read as the pick reads it (x @ W's unaligned W: 4 bytes at a time)
    cands += [replace(gemv_mma_form(op, target, gemv_mma_shape(128, rn, unroll, mma, r)), vec=vec) for rn, unroll in forms
              for r in ((False, True) if ring and unroll <= 4 else (False,))]  # the ring's registers are estimated
    # to unroll 4 (GemmSchedule.est_registers): deeper rings spill
    cands += [replace(c, split_k_fused=True) for c in cands if c.split_k > 1]
    return _valid_seeds("gemm", cands, op, target, to_params)


GEMM_GEMV_MMA_SPACE = Space("gemm", _GEMV_MMA_KNOBS, _gemv_mma_fields, _gemv_mma_params, _gemv_mma_seeds, _gemm_work,
                            structure_ignore=(), canonical=_plan_canonical)
"""``precision="3xtf32"`` products ``schedule=None`` runs on the tensor-core GEMV kernel (9-16 rows, x @ W or x @ W.T,
``tiledsl.gemm.family.gemv_mma_schedule``): threads per block, columns per warp, k16 steps in flight, K slices (summed
by the split-K kernel or in the kernel) and the register cap. ``frags_log2`` starts at 2 (32 columns) for a row-major B; ``split_k`` is capped at ceil(K / 16)."""


# ---- the GEMV-style kernel on the FP64 tensor cores: IEEE float32, 1-16 rows (kernel="gemv", mma="dmma") ----
_GEMV_DMMA_KNOBS = (*_GEMV_MMA_KNOBS,
                    Knob("ring", 0, 1, doc="0: groups of unroll k16 steps, each loaded then multiplied; 1: a ring of "
                                           "unroll steps, each slot refilled unroll steps ahead once multiplied "
                                           "(fragment_prefetch)"))


def _gemv_dmma_fields(p: dict) -> dict:
    return {**_gemv_mma_fields(p), "mma": "dmma", "fragment_prefetch": bool(p["ring"])}


def _gemv_dmma_params(s) -> dict | None:
    return _gemv_tc_params(s, "dmma", _GEMV_DMMA_KNOBS, _gemv_dmma_fields)


def _gemv_dmma_narrow_fields(p: dict) -> dict:
    return {**_gemv_dmma_fields(p), "vec": 1}


def _gemv_dmma_narrow_params(s) -> dict | None:
    return _gemv_tc_params(s, "dmma", _GEMV_DMMA_KNOBS, _gemv_dmma_narrow_fields)


def _gemv_dmma_seeds(op, target) -> list:
    """``tiledsl.gemm.family.gemv_dmma_schedule``'s pick and the forms ``benchmarks/gemv_fused.py --family dmma``
    times around it (``DMMA_FORMS``' widths and depths, K slices filling whole waves), each also with its slices
    summed in the kernel where it splits K, and each with and without the ring of steps."""
    from tiledsl.gemm.family import gemv_dmma_schedule, gemv_dmma_vec

    return _tc_gemv_seeds(op, target, gemv_dmma_schedule(op, target), "dmma", ((16, 4), (32, 4), (64, 2), (32, 8)),
                          _gemv_dmma_narrow_params if gemv_dmma_vec(op) == 1 else _gemv_dmma_params, ring=True)


GEMM_GEMV_DMMA_SPACE = Space("gemm", _GEMV_DMMA_KNOBS, _gemv_dmma_fields, _gemv_dmma_params, _gemv_dmma_seeds,
                             _gemm_work, structure_ignore=(), canonical=_plan_canonical)
"""The GEMV kernel on the FP64 tensor cores (``mma="dmma"``) for IEEE float32 products of 1-16 rows, x @ W or x @ W.T:
the knobs of :data:`GEMM_GEMV_MMA_SPACE` and ``ring`` (``fragment_prefetch``). ``python -m search.tune gemm ... --mma dmma``
searches it (:func:`gemv_dmma_space`), and a plain tune does where ``schedule=None`` takes the kernel on the device
(:func:`tune_space`)."""


def _tensor_core_gemv_space(space: Space, op) -> Space:
    """``space`` (a tensor-core GEMV space) for ``op``: K slices at most ceil(K / 16), at least 32 columns per warp
    for a row-major B (rule ``gemv_mma_row_b_columns``)."""
    import dataclasses

    most = max(1, min(GEMV_SPLIT_KNOB_MAX, -(-op.k // 16)))
    low = 2 if op.layout_b == "row" else 0
    return dataclasses.replace(space, knobs=tuple(
        dataclasses.replace(k, high=most) if k.name == "split_k" else
        dataclasses.replace(k, low=low) if k.name == "frags_log2" else k for k in space.knobs))


def gemv_dmma_space(op) -> Space:
    """:data:`GEMM_GEMV_DMMA_SPACE` for ``op`` (``search.tune gemm --mma dmma``); for x @ W whose W is not 16-byte
    aligned every point reads W 4 bytes at a time (``vec=1``, as ``tiledsl.gemm.family.gemv_dmma_schedule``).

    Raises:
        ValueError: ``op`` has more than 16 rows, or a rule of the kernel refuses it
            (``tiledsl.gemm.family.gemv_dmma_refusal``: the message names the rule).
    """
    from tiledsl.gemm.family import gemv_dmma_refusal, gemv_dmma_vec

    if why := gemv_dmma_refusal(op):
        raise ValueError(f"--mma dmma: {why}")
    space = _tensor_core_gemv_space(GEMM_GEMV_DMMA_SPACE, op)
    if gemv_dmma_vec(op) == 1:  # W's rows not 16-byte aligned: every point reads it 4 bytes at a time
        space = replace(space, to_fields=_gemv_dmma_narrow_fields, from_schedule=_gemv_dmma_narrow_params)
    return space


def tune_space(family: str, op, target, mma: str = "auto") -> Space:
    """The space a tune of ``op`` on ``target`` searches: the FP64 tensor-core GEMV space (:func:`gemv_dmma_space`)
    with ``mma="dmma"``, or where ``schedule=None`` takes that kernel on ``target``
    (``tiledsl.gemm.family.gemv_dmma_default``: the library default must be a point of the space, so that a tune
    measures it first and never stores a record slower than it); else the family's space for ``op``.

    Raises:
        ValueError: ``mma="dmma"`` and the FP64 kernel refuses ``op`` (:func:`gemv_dmma_space`)."""
    return gemv_dmma_space(op) if searches_dmma(family, op, target, mma) else space_for(family).for_op(op)


def searches_dmma(family: str, op, target, mma: str = "auto") -> bool:
    """Whether :func:`tune_space` gives the FP64 tensor-core GEMV space: with ``mma="dmma"``, or a GEMM ``op`` whose
    ``schedule=None`` on ``target`` is that kernel (``tiledsl.gemm.family.gemv_dmma_default``)."""
    if mma == "dmma":
        return True
    from tiledsl.gemm.family import gemv_dmma_default

    return family == "gemm" and gemv_dmma_default(op, target) is not None


def _gemm_specialize(space: Space, op) -> Space:
    """The tensor-core GEMV space for ``precision="3xtf32"`` products of 9-16 rows; the GEMV space where
    ``schedule=None`` runs the GEMV-style kernel (few rows of C), pinned to the op's rows;
    the tensor-core space for 16-bit inputs and for tf32 (TMA kernels only where ``tiledsl.tma.available``);
    the FMA space for IEEE float32, and for tf32 without TMA (the exact kernels)."""
    import dataclasses

    from tiledsl import tma
    from tiledsl.gemm.family import effective_op, gemv_block_rows, gemv_mma_refusal, gemv_twelve_rows_fit, runs_gemv

    if op.precision == "3xtf32" and not gemv_mma_refusal(op):  # as gemv_mma_schedule (the device's rules aside)
        return _tensor_core_gemv_space(GEMM_GEMV_MMA_SPACE, op)
    op = effective_op(op)  # any other 3xtf32 product: the IEEE product's space (tiledsl.gemm computes it exactly)
    if runs_gemv(op):  # exactly where builtin_choice picks the GEMV kernel
        pins = {"rows_log2": _log2(gemv_block_rows(op.m))}
        pins["rn_log2" if op.layout_b == "row" else "col_groups_log2"] = 0
        if not gemv_twelve_rows_fit(op.m):  # 12 rows per block in place of 16: for 9-12 rows only
            pins["rows_three_quarters"] = 0
        if gemv_block_rows(op.m) < 4:  # rule smem_a_on_gemv
            pins["smem_a"] = 0
        if gemv_block_rows(op.m) < 4:  # rule spare_slot_on_staged_a (smem_a_on_gemv: bm a multiple of 4)
            pins["spare_slot"] = 0
        if gemv_block_rows(op.m) < 4 or op.layout_b == "row":  # rule k_lanes_need_column_major_b; below 4 rows the
            pins["k_lanes_log2"] = 5  # groups' bm·rn sums rarely fill k_lanes (rule k_lanes_group_sums)
        pinned = _pin(GEMM_GEMV_SPACE, pins)
        # no slice shorter than one BK step: more slices than K/8 leave blocks with nothing to do
        most = max(1, min(GEMV_SPLIT_KNOB_MAX, -(-op.k // 8)))
        return dataclasses.replace(pinned, knobs=tuple(dataclasses.replace(k, high=most) if k.name == "split_k"
                                                       else k for k in pinned.knobs))
    if op.precision == "tf32":
        return GEMM_TF32_SPACE if tma.available() else space
    if op.tensor_core_inputs:  # float16 / bfloat16 (tf32 handled above)
        return GEMM_TC16_SPACE if tma.available() else GEMM_TC16_NO_TMA_SPACE
    return space


GEMM_SPACE = Space("gemm", _GEMM_KNOBS, _gemm_fields, _gemm_params, _gemm_seeds, _gemm_work,
                   structure_ignore=("wm", "wn", "swizzle", "smem_pad", "unroll"), canonical=_plan_canonical,
                   specialize=_gemm_specialize)


def _bytes_work(op) -> tuple[float, str, str, float]:
    """Memory-bound ops: compulsory bytes (read + written) per call, shown as GB/s."""
    return float(op.bytes_moved), "bytes", "GB/s", 1e9


def _valid_seeds(family: str, candidates: list[dict], op, target, to_params) -> list:
    """The presets of ``family`` then the schedules of ``candidates`` (constructor keyword arguments)
    that pass every rule (schedule, device, op) and that the knobs can express, without duplicates,
    in that order."""
    from tiledsl.api import family as get_family
    from tiledsl.errors import ScheduleError
    from tiledsl.registry import presets

    cls = get_family(family).schedule_type
    out, seen = [], set()
    for s in [*presets(family).values(), *candidates]:
        try:
            if isinstance(s, dict):
                s = cls(**s)
            s.validate(target)
            if hasattr(s, "check_op"):
                s.check_op(op)
        except ScheduleError:
            continue
        key = schedule_key(s)
        if key not in seen and to_params(s) is not None:
            seen.add(key)
            out.append(s)
    return out


def _params_of(knobs: tuple[Knob, ...], fields_of: Callable[[dict], dict], s, params: dict | None) -> dict | None:
    """``params`` when every knob is in range and they rebuild exactly ``s``; else None."""
    if params is None or any(v is None for v in params.values()):
        return None
    for k in knobs:
        if not k.low <= params[k.name] <= k.high or (params[k.name] - k.low) % k.step:
            return None
    try:
        again = type(s)(**fields_of(params))
    except ValueError:
        return None
    return params if again.to_dict() == s.to_dict() else None


def _pin(space: Space, values: dict[str, int]) -> Space:
    """``space`` with the knobs named in ``values`` reduced to that single value."""
    import dataclasses

    knobs = tuple(dataclasses.replace(k, low=values[k.name], high=values[k.name], step=1) if k.name in values else k
                  for k in space.knobs)
    unpinned = space.from_schedule

    def from_schedule(s) -> dict | None:
        p = unpinned(s)
        return p if p is not None and all(p[k] == v for k, v in values.items()) else None

    return dataclasses.replace(space, knobs=knobs, from_schedule=from_schedule, specialize=None)


# ---------------------------------------------------------------- reduce

_REDUCE_STRATEGIES = ("atomic", "smem_interleaved", "smem_contiguous", "smem_sequential", "grid_stride",
                      "warp_shuffle")  # == tiledsl.reduce.STRATEGIES (checked by the tests)
_REDUCE_COMBINES = ("two_pass", "atomic")  # == tiledsl.reduce.COMBINES
_REDUCE_GRID_BASE_LOG2 = 7  # grid_log2 = x > 0 means grid = 2^(x + 7) = 256 .. 4096 blocks

_REDUCE_KNOBS = (
    Knob("strategy", 0, 5, doc="index into tiledsl.reduce.STRATEGIES: the reduction ladder v1 atomic .. v6/v7 warp_shuffle"),
    Knob("block_log2", 5, 10, doc="threads per block = 2^x (32..1024)"),
    Knob("vec_log2", 0, 3, doc="elements per load = 2^x (1..8; lowered to 16 bytes and the input's alignment)"),
    Knob("items_log2", 0, 4, doc="independent loads in flight per thread = 2^x (1..16)"),
    Knob("grid_log2", 0, 5, doc="0: auto (one wave of resident blocks); x > 0: grid = 2^(x+7) blocks (256..4096)"),
    Knob("combine", 0, 1, doc="blocks of one output combined by 0: two_pass (deterministic) or 1: atomics"),
    Knob("row_threads_code", 0, 7,
         doc="threads per contiguous row: 0 auto, 1..6: 2^(x-1) (1..32, sub-warp / warp per row), 7: the block"),
    Knob("col_rows_code", 0, 6, doc="threads along the reduced axis of a strided reduction: 0 auto, x > 0: 2^(x-1)"),
)


def _reduce_fields(p: dict) -> dict:
    block = _p2(p["block_log2"])
    rt = int(p["row_threads_code"])
    return dict(strategy=_REDUCE_STRATEGIES[p["strategy"]], block=block, vec=_p2(p["vec_log2"]),
                items_per_thread=_p2(p["items_log2"]),
                grid=0 if p["grid_log2"] == 0 else _p2(p["grid_log2"] + _REDUCE_GRID_BASE_LOG2),
                combine=_REDUCE_COMBINES[p["combine"]],
                row_threads=0 if rt == 0 else block if rt == 7 else _p2(rt - 1),
                col_rows=0 if p["col_rows_code"] == 0 else _p2(p["col_rows_code"] - 1))


def _reduce_params(s) -> dict | None:
    if s.strategy not in _REDUCE_STRATEGIES or s.combine not in _REDUCE_COMBINES:
        return None
    grid_log2 = 0 if s.grid == 0 else (None if _log2(s.grid) is None else _log2(s.grid) - _REDUCE_GRID_BASE_LOG2)
    if s.row_threads == 0:
        rt = 0
    elif s.row_threads == s.block:
        rt = 7
    else:
        rt = None if _log2(s.row_threads) is None else _log2(s.row_threads) + 1
    cr = 0 if s.col_rows == 0 else (None if _log2(s.col_rows) is None else _log2(s.col_rows) + 1)
    params = {"strategy": _REDUCE_STRATEGIES.index(s.strategy), "block_log2": _log2(s.block),
              "vec_log2": _log2(s.vec), "items_log2": _log2(s.items_per_thread), "grid_log2": grid_log2,
              "combine": _REDUCE_COMBINES.index(s.combine), "row_threads_code": rt, "col_rows_code": cr}
    return _params_of(_REDUCE_KNOBS, _reduce_fields, s, params)


def _reduce_seeds(op, target) -> list:
    """Presets (the reduction ladder v1-v7 and the default) and grid-stride / warp-shuffle variants."""
    cands = [dict(block=block, vec=vec, items_per_thread=ipt, strategy=strategy, combine=combine)
             for strategy in ("warp_shuffle", "grid_stride") for block in (128, 256, 512, 1024)
             for vec in (4, 8) for ipt in (1, 2, 4, 8) for combine in ("two_pass", "atomic")]
    return _valid_seeds("reduce", cands, op, target, REDUCE_SPACE.for_op(op).from_schedule)


def _reduce_specialize(space: Space, op) -> Space:
    """Pin what the op cannot use: ``col_rows`` unless the reduced axis is strided, ``row_threads``
    unless there are several contiguous rows (``tiledsl.reduce.emit.group_threads``)."""
    pins = {}
    if op.kind != "strided":
        pins["col_rows_code"] = 0
    if op.kind == "strided" or op.outer <= 1:
        pins["row_threads_code"] = 0
    return _pin(space, pins)


def _reduce_preference(s) -> tuple:
    """Among tied predictions: the deterministic two-pass combine before atomics, then the automatic
    grid / row / column mapping before explicit ones."""
    return (_REDUCE_COMBINES.index(s.combine) if s.combine in _REDUCE_COMBINES else len(_REDUCE_COMBINES),
            s.grid != 0, s.row_threads != 0, s.col_rows != 0)


REDUCE_SPACE = Space("reduce", _REDUCE_KNOBS, _reduce_fields, _reduce_params, _reduce_seeds, _bytes_work,
                     structure_ignore=("grid", "combine"), specialize=_reduce_specialize,
                     preference=_reduce_preference)


# ---------------------------------------------------------------- transpose

_TRANSPOSE_VARIANTS = ("shared", "naive_read", "naive_write")  # == tiledsl.transpose.schedule.VARIANTS

_TRANSPOSE_KNOBS = (
    Knob("variant", 0, 2, doc="0: shared-memory tile, 1: naive_read, 2: naive_write (transpose ladder 1.1-1.4)"),
    Knob("tile_log2", 5, 6, doc="side of the square tile = 2^x (32, 64)"),
    Knob("rows_per_thread_log2", 0, 6, doc="tile rows each thread moves = 2^x (1..64; must divide tile)"),
    Knob("vec_log2", 0, 3, doc="elements per thread chunk = 2^x (1..8; accesses at most 16 bytes)"),
    Knob("smem_pad", 0, 1, doc="padding element per shared-memory row ([TILE][TILE+1])"),
    Knob("swizzle_log2", 0, 4, doc="tile-rows per rasterization group = 2^x (1..16)"),
)


def _transpose_fields(p: dict) -> dict:
    return dict(variant=_TRANSPOSE_VARIANTS[p["variant"]], tile=_p2(p["tile_log2"]),
                rows_per_thread=_p2(p["rows_per_thread_log2"]), vec=_p2(p["vec_log2"]),
                smem_pad=int(p["smem_pad"]), swizzle=_p2(p["swizzle_log2"]))


def _transpose_params(s) -> dict | None:
    if s.variant not in _TRANSPOSE_VARIANTS:
        return None
    params = {"variant": _TRANSPOSE_VARIANTS.index(s.variant), "tile_log2": _log2(s.tile),
              "rows_per_thread_log2": _log2(s.rows_per_thread), "vec_log2": _log2(s.vec),
              "smem_pad": s.smem_pad, "swizzle_log2": _log2(s.swizzle)}
    return _params_of(_TRANSPOSE_KNOBS, _transpose_fields, s, params)


def _transpose_seeds(op, target) -> list:
    """Presets (the transpose ladder) and padded shared-memory tiles with rows per thread, chunks, swizzle."""
    cands = [dict(tile=tile, rows_per_thread=rpt, vec=vec, smem_pad=pad, swizzle=sw)
             for tile in (64, 32) for vec in (4, 8, 2, 1) for rpt in (4, 8, 2, 1) for sw in (8, 4, 16, 1)
             for pad in (1, 0)]
    return _valid_seeds("transpose", cands, op, target, _transpose_params)


TRANSPOSE_SPACE = Space("transpose", _TRANSPOSE_KNOBS, _transpose_fields, _transpose_params, _transpose_seeds,
                        _bytes_work, structure_ignore=("swizzle",))

SPACES: dict[str, Space] = {"gemm": GEMM_SPACE, "reduce": REDUCE_SPACE, "transpose": TRANSPOSE_SPACE}


def space_for(family: str) -> Space:
    """The search space of an op family (``SPACES``; specialize it for an op with ``for_op``).

    Raises:
        KeyError: no space is defined for ``family`` (the message lists those that are).
    """
    if family not in SPACES:
        raise KeyError(f"no search space for op family {family!r}; spaces: {sorted(SPACES)}")
    return SPACES[family]

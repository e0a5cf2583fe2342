"""Memory-bound kernels: element-wise ops, reductions and transposes.

Roofline (``docs/design.md``, "Background"): a kernel whose intensity is under the device's
I_max = π / β is bound by bandwidth: time ≥ bytes / β. The vector add ``z = x + y`` reads
8 bytes and writes 4 per FLOP: 1/12 FLOP/byte. A float32 sum reads 4 bytes per add: 1/4 FLOP/byte.

Little's law: bandwidth = bytes in flight / latency. To run at β an SM must keep
β / SMs × latency bytes in flight; fewer resident threads, narrower loads (``vec``) or fewer
independent loads per thread (``items_per_thread``) lower the achieved bandwidth in proportion.

Reductions and transposes are priced from their :class:`~tiledsl.planning.Plan` (effective vector width,
grid, threads, shared memory), which ``tiledsl.costmodel.explain`` builds through the op's family record.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import sympy as sp

from .. import dtypes
from ..occupancy import occupancy, waves
from ..planning import Plan
from ..target import Target
from .report import Level, Report

HBM_LATENCY_CYCLES = 800.0
"""Global-load latency from HBM under load, SM cycles (idle ≈ 500–600 on Hopper; queues add more)."""
ATOMIC_SAME_ADDRESS_PER_S = 0.5e9
"""Atomic adds to one address per second (serialized in one L2 slice; ~1 per 4 cycles): an estimate."""
SYNC_CYCLES = 40.0
"""One __syncthreads() round in a shared-memory tree step, SM cycles."""
LAUNCH_S = 3e-6
"""Kernel launch and drain, seconds."""
BLOCK_CYCLES = 50.0
"""SM cycles each block of a transpose costs its SM serially, whatever else runs there: launching the block, its
index arithmetic and (shared-tile variants) its barrier. An estimate: on the 22 transposes of ``MEMORY_SOFTNESS``'s check, ρ is
0.91–0.92 for any value from 25 to 150 cycles and 0.79 without it; it is what makes a 32-wide tile (four times the
blocks of a 64-wide one, measured 7–8 % slower at the same bytes in flight) rank behind the 64-wide ones. It is
never named as the bound (the report's bound is the largest of memory, L2 and shared memory)."""
MEMORY_SOFTNESS = 2.0
"""Exponent p of the soft maximum (t_hbm^p + t_little^p)^(1/p) that joins the bandwidth roof and Little's law.
The hard maximum (p → ∞) says every schedule with enough bytes in flight runs at the roof, so a search's memory-bound
candidates all tie; in practice the achieved bandwidth keeps rising as more bytes are in flight (queues near the
roof lengthen the latency). Checked on the 22 measured transposes of ``benchmarks/results/transpose_h200.json``
(H200, 16384² float32; ``benchmarks/costmodel_transpose.py``): Spearman ρ between predicted and measured time 0.68
with the hard maximum, 0.79 with p = 2 (p = 4 and 8: the same ρ; a longer latency than
:data:`HBM_LATENCY_CYCLES` ranks about as well, so it stays), 0.91 with :data:`BLOCK_CYCLES` too (0.85 with the
block cost and the hard maximum). Chosen on that set (in-sample): one shape, 22 schedules. The streaming reports
(``explain_stream``: vector add, sum) keep the hard maximum: no measured stream kernels check it."""


@dataclass(frozen=True)
class StreamOp:
    """A kernel that streams arrays once: ``elements`` items, ``flops`` per item, bytes per item.

    Attributes:
        name: label ("vector_add", "sum").
        elements: items processed (n).
        flops_per_element: FLOPs per item (1 for an add).
        read_bytes_per_element, write_bytes_per_element: compulsory HBM traffic per item.
        write_bytes: extra bytes written once (a reduction's result).
    """

    name: str
    elements: int
    flops_per_element: float
    read_bytes_per_element: float
    write_bytes_per_element: float
    write_bytes: int = 0


@dataclass(frozen=True)
class StreamSchedule:
    """How a streaming kernel is launched (mirrors the reduction schedule's knobs).

    Attributes:
        block: threads per block.
        vec: elements per load (4 = 16-byte float4).
        items_per_thread: independent loads each thread keeps in flight.
        grid: blocks (0 = one per ``block·vec·items_per_thread`` items).
        strategy: "stream" (plain), "atomic" (one global atomic per element, ladder rung v1),
            "tree" (shared-memory tree per block), "shuffle" (warp shuffles).
    """

    block: int = 256
    vec: int = 4
    items_per_thread: int = 4
    grid: int = 0
    strategy: str = "stream"


def vector_add(n: int, dtype: str = "float32") -> StreamOp:
    """z = x + y over n elements: n FLOPs, 2·n·e read, n·e written (1/12 FLOP/byte for float32)."""
    e = dtypes.get(dtype).itemsize
    return StreamOp("vector_add", n, 1.0, 2.0 * e, float(e))


def array_sum(n: int, dtype: str = "float32") -> StreamOp:
    """sum(x) over n elements: n − 1 ≈ n adds, n·e read (1/4 FLOP/byte for float32), one result written."""
    e = dtypes.get(dtype).itemsize
    return StreamOp("sum", n, 1.0, float(e), 0.0, write_bytes=e)


n_sym, f_sym, r_sym, w_sym, w0_sym = sp.symbols("n flops_per_element read_bytes write_bytes out_bytes",
                                                positive=True)


def stream_expressions() -> dict[str, sp.Expr]:
    """FLOPs and HBM bytes of a streaming kernel: n·f and n·(r + w) + out."""
    return {"flops": n_sym * f_sym, "hbm": n_sym * (r_sym + w_sym) + w0_sym}


# ---- reductions and transposes ----
def _strategy_kind(strategy: str) -> str:
    s = strategy.lower()
    if "atomic" in s and ("global" in s or s in ("atomic", "v1")):
        return "atomic"
    if "shfl" in s or "shuffle" in s or "warp" in s:
        return "shuffle"
    if any(w in s for w in ("tree", "smem", "shared", "interleav", "sequential", "contiguous", "divergent")):
        return "tree"
    return "stream"


def _sm_clock(target: Target, c: dict) -> float:
    """SM clock, Hz, implied by the FP32 ceiling in use (calibrated or datasheet): rate / (SMs × lanes × 2)."""
    return c["fp32_flops_per_s"].value / (target.sm_count * target.fp32_lanes_per_sm * 2)


def _little(target: Target, c: dict, active_blocks_per_sm: float, block: int, bytes_per_thread_in_flight: float,
            sms_used: int) -> tuple[float, float, float]:
    """(bytes/s Little's law allows, bytes in flight per SM, bytes needed per SM for the HBM roof): the first is
    bytes in flight over the latency on the SMs used, not capped at the roof (:func:`memory_time` joins the two)."""
    bw = c["hbm_bytes_per_s"].value
    clock = _sm_clock(target, c)
    latency_s = HBM_LATENCY_CYCLES / clock
    in_flight = active_blocks_per_sm * block * bytes_per_thread_in_flight
    needed = bw / target.sm_count * latency_s
    return sms_used * in_flight / latency_s, in_flight, needed


def memory_time(t_hbm: float, t_little: float) -> float:
    """Seconds to stream the bytes: the soft maximum (t_hbm^p + t_little^p)^(1/p), p = :data:`MEMORY_SOFTNESS`
    (≥ 1; ∞ is the hard maximum), of the HBM roof's time and Little's law's (bytes / (bytes in flight / latency)): at
    least the larger of the two, at most 2^(1/p) times it (√2 for the shipped p = 2)."""
    p = MEMORY_SOFTNESS
    if not p >= 1:
        raise ValueError(f"MEMORY_SOFTNESS={p!r} must be at least 1 (a soft maximum; ∞: the hard maximum)")
    if math.isinf(p) or not (0 < t_hbm < math.inf and 0 < t_little < math.inf):  # the hard maximum, no 0·∞ or ∞/∞
        return max(t_hbm, t_little)
    top = max(t_hbm, t_little)  # scaled: (1 + r^p)^(1/p) · top, r ≤ 1, never under- or overflows
    return top * (1 + (min(t_hbm, t_little) / top) ** p) ** (1 / p)


def explain_stream(sop: StreamOp, ss: StreamSchedule, target: Target, op=None, schedule=None,
                   kernel=None) -> Report:
    """Roofline + Little's law report of a streaming kernel (vector add, sum, reduction)."""
    c = target.ceilings()
    flops = sop.elements * sop.flops_per_element
    hbm_b = sop.elements * (sop.read_bytes_per_element + sop.write_bytes_per_element) + sop.write_bytes
    e_load = sop.read_bytes_per_element / (2 if sop.name == "vector_add" else 1)
    per_block = ss.block * ss.vec * ss.items_per_thread
    grid = ss.grid or max(1, -(-sop.elements // per_block))
    regs = int(kernel.registers) if kernel is not None else 32
    kind = _strategy_kind(ss.strategy)
    smem = int(kernel.smem_bytes) if kernel is not None else (ss.block * 4 if kind == "tree" else 128)
    occ = occupancy(target, ss.block, regs, smem, "ptxas" if kernel is not None else "estimate")
    bps = max(occ.blocks_per_sm, 1)
    wv = waves(grid, target.sm_count, bps)
    active = min(bps, -(-grid // target.sm_count))
    sms_used = min(target.sm_count, grid)
    loads_per_thread = ss.items_per_thread * (2 if sop.name == "vector_add" else 1)
    allowed, in_flight, needed = _little(target, c, active, ss.block, ss.vec * e_load * loads_per_thread, sms_used)
    achieved = min(c["hbm_bytes_per_s"].value, allowed)
    t_bw = hbm_b / c["hbm_bytes_per_s"].value
    t_little = hbm_b / allowed if allowed > 0 else math.inf
    clock = _sm_clock(target, c)
    terms = {"hbm_s": t_bw, "little_s": t_little, "launch_s": LAUNCH_S,
             "bytes_in_flight_per_sm": in_flight, "bytes_needed_per_sm": needed}
    # per-block combine: tree steps (one barrier each) or warp shuffles, then one store / atomic per block
    t_combine = 0.0
    if kind == "tree":
        t_combine = wv.waves * math.log2(max(ss.block, 2)) * SYNC_CYCLES / clock
    elif kind == "shuffle":
        t_combine = wv.waves * 2 * SYNC_CYCLES / clock
    terms["combine_s"] = t_combine
    t_atomic = 0.0
    if kind == "atomic":
        t_atomic = sop.elements / ATOMIC_SAME_ADDRESS_PER_S
        terms["atomics_s"] = t_atomic
    stream_t = max(t_bw, t_little) + t_combine  # the hard maximum: memory_time is checked on transposes only
    candidates = {"hbm": t_bw, "latency": stream_t, "atomics": t_atomic}
    bound = max(candidates, key=lambda k: candidates[k])
    if bound == "latency" and t_little <= t_bw * 1.0001 and t_combine == 0:
        bound = "hbm"
    predicted = max(stream_t, t_atomic) + LAUNCH_S
    hbm_bw = c["hbm_bytes_per_s"]
    levels = {"hbm": Level("hbm", hbm_b, flops / hbm_b if hbm_b else math.inf, hbm_bw.value, hbm_bw.source,
                           t_bw, hbm_b, "compulsory: every input byte read once, outputs written once")}
    l2 = c["l2_bytes_per_s"]
    levels["l2"] = Level("l2", hbm_b, flops / hbm_b if hbm_b else math.inf, l2.value, l2.source,
                         hbm_b / l2.value, hbm_b, "streamed: no reuse, L2 traffic = HBM traffic")
    notes = (f"Little's law: {in_flight / 1e3:.1f} KB in flight per SM, {needed / 1e3:.1f} KB needed "
             f"(bandwidth × {HBM_LATENCY_CYCLES:.0f}-cycle latency) → {achieved / 1e12:.2f} TB/s achievable",
             f"strategy {ss.strategy!r} modelled as {kind}")
    ex = stream_expressions()
    return Report(sop.name, op if op is not None else sop, schedule if schedule is not None else ss, target, flops, levels,
                  flops / c["fp32_flops_per_s"].value, c["fp32_flops_per_s"].value, c["fp32_flops_per_s"].source,
                  occ, wv, predicted, bound, terms, ex, notes)


def explain_transpose(op, schedule, target: Target, kernel=None, plan: Plan | None = None) -> Report:
    """A TransposeOp/TransposeSchedule with its plan (``plan``: threads, load width, shared memory,
    grid): bytes_moved over HBM joined to Little's law by :func:`memory_time`, sector waste of the naive variants
    and bank conflicts of the unpadded shared tile. Predicted = max(memory time, L2 time, shared-memory time) +
    each SM's blocks × :data:`BLOCK_CYCLES` + launch."""
    c = target.ceilings()
    e = op.itemsize
    size = op.size
    hbm_b = op.bytes_moved
    variant, tile, rows, pad = schedule.variant, schedule.tile, schedule.rows_per_thread, schedule.smem_pad
    vec = plan.width("x")
    threads = plan.threads
    smem = int(kernel.smem_bytes) if kernel is not None else plan.smem_bytes
    regs = int(kernel.registers) if kernel is not None else plan.est_registers  # the plan's estimate: one figure
    occ = occupancy(target, threads, regs, smem, "ptxas" if kernel is not None else "estimate")
    blocks = max(1, plan.blocks)
    wv = waves(blocks, target.sm_count, max(occ.blocks_per_sm, 1))
    # a strided (uncoalesced) side moves one 32-byte sector per element-chunk between L2 and the SM
    l2_b = hbm_b
    if variant != "shared":
        l2_b = hbm_b // 2 + size * 32 // max(vec, 1)
    active = min(max(occ.blocks_per_sm, 1), -(-blocks // target.sm_count))
    allowed, in_flight, needed = _little(target, c, active, threads, rows * vec * e, min(blocks, target.sm_count))
    t_bw = hbm_b / c["hbm_bytes_per_s"].value
    t_l2 = l2_b / c["l2_bytes_per_s"].value
    t_little = hbm_b / allowed if allowed else math.inf
    smem_b = 2 * size * e if variant == "shared" else 0
    conflict = 1
    if variant == "shared" and pad == 0:
        conflict = min(32, tile)  # a column of the tile sits in one bank
    smem_moved = size * e * (1 + conflict) if variant == "shared" else 0
    t_smem = smem_moved / c["smem_bytes_per_s"].value
    t_memory = memory_time(t_bw, t_little)
    parts = {"hbm" if t_bw >= t_little else "latency": t_memory, "l2": t_l2, "smem": t_smem}
    bound = max(parts, key=lambda k: parts[k])
    clock = _sm_clock(target, c)
    t_blocks = -(-blocks // target.sm_count) * BLOCK_CYCLES / clock  # each SM's blocks, one after another
    predicted = max(parts.values()) + t_blocks + LAUNCH_S
    lv = {}
    for name, b, moved, key, note in (
            ("hbm", hbm_b, hbm_b, "hbm_bytes_per_s", "bytes_moved: read X once, write Y once"),
            ("l2", l2_b, l2_b, "l2_bytes_per_s", "naive: strided side moves a 32-byte sector per chunk"
             if variant != "shared" else "coalesced both ways"),
            ("smem", smem_b, smem_moved, "smem_bytes_per_s", f"tile write + transposed read, {conflict}-way conflicts")):
        cc = c[key]
        lv[name] = Level(name, b, 0.0, cc.value, cc.source, moved / cc.value if cc.value else 0.0, moved, note)
    terms = {"hbm_s": t_bw, "l2_s": t_l2, "little_s": t_little, "memory_s": t_memory, "smem_s": t_smem,
             "blocks_s": t_blocks, "launch_s": LAUNCH_S,
             "bytes_in_flight_per_sm": in_flight, "bytes_needed_per_sm": needed}
    notes = (f"Little's law: {in_flight / 1e3:.1f} KB in flight per SM, {needed / 1e3:.1f} KB needed",)
    return Report("transpose", op, schedule, target, 0, lv, 0.0, c["fp32_flops_per_s"].value,
                  c["fp32_flops_per_s"].source, occ, wv, predicted, bound, terms,
                  {"hbm": sp.Symbol("bytes_moved")}, notes)


def explain_reduce(op, s, target: Target, kernel=None, plan: Plan | None = None) -> Report:
    """A ReduceOp / ReduceSchedule (``tiledsl.reduce``) on the reduction ladder v1–v7, with its
    plan's vector
    width and grid (``plan``: the :class:`~tiledsl.planning.Plan` for ``target``).

    Per SM (cycles), blocks run ``active`` at a time; a block's critical path is its load rounds
    (``HBM_LATENCY_CYCLES`` each: ``items_per_thread`` vector loads in flight per thread, Little's law) plus
    its combine (v2–v4: log2(block) barrier steps; v6/v7: two shuffle rounds and one barrier); the SM's
    issue slots are shared by the active blocks. v1 (``atomic``) adds one same-address atomic per element.
    Predicted = max(SM time, HBM bytes / bandwidth, atomics) + launch.
    """
    c = target.ceilings()
    e = dtypes.get(op.dtype).itemsize
    n = int(op.n)
    hbm_b = int(getattr(op, "bytes_moved", n * e))
    flops = n
    v, grid = plan.width("x"), plan.blocks
    strategy = str(s.strategy)
    tree = strategy.startswith("smem") or strategy == "grid_stride"
    regs = int(kernel.registers) if kernel is not None else plan.est_registers
    smem = int(kernel.smem_bytes) if kernel is not None else plan.smem_bytes  # the plan's: one figure
    occ = occupancy(target, s.block, regs, smem, "ptxas" if kernel is not None else "estimate")
    bps = max(occ.blocks_per_sm, 1)
    wv = waves(grid, target.sm_count, bps)
    per_sm_blocks = -(-grid // target.sm_count)
    active = min(bps, per_sm_blocks)
    rounds = -(-per_sm_blocks // active)
    clock = _sm_clock(target, c)
    warps = max(s.block // 32, 1)
    per_iter = s.block * v * s.items_per_thread          # elements a block takes per load round
    elems_per_block = -(-n // max(grid, 1))
    iters = max(1, -(-elems_per_block // per_iter))
    steps = int(math.log2(max(s.block, 2)))
    if tree:
        combine_path = steps * SYNC_CYCLES
        combine_instr = steps * 8
    else:
        combine_path = 2 * SYNC_CYCLES
        combine_instr = 2 * 5 * 3 + 8
    load_instr = s.items_per_thread * (2 + v)           # address/predicate + adds per vector load
    issue_b = warps * (iters * load_instr + combine_instr + 12) / 4
    path_b = iters * (HBM_LATENCY_CYCLES + load_instr) + combine_path
    t_sm = rounds * max(active * issue_b, path_b) / clock
    t_bw = hbm_b / c["hbm_bytes_per_s"].value
    t_atomic = n / ATOMIC_SAME_ADDRESS_PER_S if strategy == "atomic" else 0.0
    parts = {"hbm": t_bw, "latency": t_sm, "atomics": t_atomic}
    bound = max(parts, key=lambda k: parts[k])
    if bound == "latency" and active * issue_b > path_b:
        bound = "compute"
    predicted = max(parts.values()) + LAUNCH_S
    in_flight = active * s.block * s.items_per_thread * v * e
    needed = c["hbm_bytes_per_s"].value / target.sm_count * HBM_LATENCY_CYCLES / clock
    hbm = c["hbm_bytes_per_s"]
    l2 = c["l2_bytes_per_s"]
    levels = {
        "hbm": Level("hbm", hbm_b, flops / hbm_b, hbm.value, hbm.source, t_bw, hbm_b,
                     "compulsory: input read once, result written once"),
        "l2": Level("l2", hbm_b, flops / hbm_b, l2.value, l2.source, hbm_b / l2.value, hbm_b,
                    "streamed: L2 traffic = HBM traffic"),
    }
    terms = {"sm_s": t_sm, "hbm_s": t_bw, "atomics_s": t_atomic, "launch_s": LAUNCH_S, "grid": grid,
             "active_blocks_per_sm": active, "load_rounds_per_block": iters,
             "bytes_in_flight_per_sm": in_flight, "bytes_needed_per_sm": needed}
    notes = (f"Little's law: {in_flight / 1e3:.1f} KB in flight per SM "
             f"({active} blocks × {s.block} threads × {s.items_per_thread} loads × {v * e} B), "
             f"{needed / 1e3:.1f} KB needed (bandwidth × {HBM_LATENCY_CYCLES:.0f}-cycle latency)",
             f"strategy {strategy}: {grid} blocks, {iters} load round(s) per block, "
             f"{'log2(block) barrier steps' if tree else 'warp shuffles'} to combine")
    return Report("reduce", op, s, target, flops, levels, flops / c["fp32_flops_per_s"].value,
                  c["fp32_flops_per_s"].value, c["fp32_flops_per_s"].source, occ, wv, predicted, bound, terms,
                  stream_expressions(), notes)

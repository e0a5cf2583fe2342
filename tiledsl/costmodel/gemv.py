"""Time of the GEMV-style GEMM kernel (``kernel='gemv'``, ``tiledsl/gemm/emit_gemv.py``): B streamed once at the
rate its loads in flight allow (Little's law), plus the split-K workspace, the launches and the fused sum.

A thread holds at most ``unroll`` iterations in flight, and no more than its K slice has (a slice of ``k_slice``
elements is ⌈k_slice / VA⌉ iterations of a row-major B's thread, ⌈k_slice / (k_lanes·VB)⌉ of a column-major B's
group of ``k_lanes`` lanes (a warp unless ``k_lanes`` < 32), whose lanes past ⌈k_slice / VB⌉ have nothing to load).

The kernel keeps no tiles in shared memory and has no barrier in its loop: each thread walks its K slice with
``unroll`` iterations' loads of B in flight (a row-major B: ``VA·VB·col_groups`` elements per iteration and
thread; a column-major B: ``rn·VB``). With R blocks resident at once (blocks per SM from registers and threads, times the SMs,
at most the grid), the bytes in flight are R·threads·unroll·(bytes per iteration), and B arrives at

    rate = min(HBM bandwidth, bytes in flight / GEMV_EFFECTIVE_LATENCY_S)

(``GEMV_SMEM_A_EFFECTIVE_LATENCY_S`` for ``smem_a`` kernels of a row-major B, whose ring of loads of B stays full;
a column-major B's kernels, ``smem_a`` or not, take ``GEMV_COLUMN_B_EFFECTIVE_LATENCY_S``: its ``smem_a`` kernel
unrolls its loads as without it; with ``spare_slot`` it keeps a ring as a row-major B's does and takes that ring's
latency, which was not fitted on it: no such kernel has been timed.)

B is read once per group of ``bm`` rows. A grid of more blocks than fit at once runs in waves: each full wave at the
rate of its bytes in flight, the partial last wave at the (lower) rate of its own. Split-K adds its float32 workspace (written and read once, at HBM rate) and a second
launch, or with ``split_k_fused`` the last block's sum at one SM's share of L2 (``tiledsl.costmodel.gemm``).

Registers: ptxas's when the kernel is compiled, else the plan's estimate plus one per element of B in flight
(``unroll`` iterations' loads held in registers; the plan's estimate ignores ``unroll`` but for ``smem_a``, whose
ring it counts); a column-major B with A in registers: :func:`column_b_registers`, fitted to ptxas (it holds the
unrolled loads of A's rows too). The round trip is fitted per kind of kernel (a row-major B's loop, its staged ring,
a column-major B's warp), each on its own measurements. With ``smem_a`` (A staged in shared memory) an iteration is one k step, and the staged slice's shared
memory counts against the blocks per SM; with a column-major B each block's staged rows of A (bm × its slice, from
L2, before its loads of B) count with B's bytes (``benchmarks/results/gemv_colb_smem_a_h200.json``: a block of 16
columns stages as many bytes of A as it reads of B). The model has no FMA term: sixteen rows of A make the kernel FMA-bound
(8 FLOP per byte of float32 B), which it does not see.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes
from ..gemm.kernel_plan import gemv_widths, plan_gemm
from ..gemm.schedule import gemv_slice_depth, tensor_core_gemv
from ..occupancy import Occupancy, Waves, occupancy, waves
from ..target import Target

GEMV_EFFECTIVE_LATENCY_S = 3.5e-6
"""Seconds per round trip of the bytes in flight, fitted, not a hardware latency (an H200 load from HBM takes
under 1 µs): it absorbs that ptxas keeps fewer of the unrolled iterations' loads in flight than the source allows.
Fitted on the GEMV sweeps measured on the H200 (2026-12-02; ``python benchmarks/costmodel_gemv.py``,
``benchmarks/results/costmodel_gemv_h200_2026-12-02.json``): over four sweeps of 13–68 products, each timed under
3–8 distinct schedules, the schedule the model ranks first was 2.0–3.4 % slower than the measured best (geomean per
sweep, ties counted fairly) at 3–4 µs, 1.7–9.2 % at 2 µs, and 5.0–7.3 % with the tiled kernels' pipeline model it
replaced (``docs/costmodel.md``)."""


GEMV_SMEM_A_EFFECTIVE_LATENCY_S = 2.0e-6
""":data:`GEMV_EFFECTIVE_LATENCY_S` for ``smem_a`` kernels of a row-major B, whose ring keeps its ``unroll`` loads of B in flight
continuously (each refilled as it is consumed) where the unrolled loop of A in registers issues them in bursts.
Fitted on the H200 sweep ``benchmarks/results/gemv_smem_a_h200_run2.json`` (4, 8, 16 rows, A in registers against
staged; a model-only pick lost 10.4 % at 3.5 µs, 4.6 % at 2.0 µs, 5.2 % at 1.5 µs) and checked on
``gemv_smem_a_depth_h200.json``, which it was not fitted on: 16.0 % → 3.4 %, Spearman ρ 0.42 → 0.57
(``python benchmarks/costmodel_gemv.py``, docs/costmodel.md)."""


GEMV_COLUMN_B_EFFECTIVE_LATENCY_S = 1.3e-6
""":data:`GEMV_EFFECTIVE_LATENCY_S` for a column-major B (x @ W.T, torch's Linear). Chosen on absolute times, not
ranks: run 7 of ``benchmarks/gemv_hbm.py`` (H200, 2026-12-04, ``gemv_hbm_h200_run7.json``, GPU alone), the 72 x @ W.T
products of 1–16 rows and at least 64 MiB under ``schedule=None``'s picks, with ptxas's registers: measured /
predicted geomean 1.02 (0.76–1.39, 92 % within 1.3×; 1.4 µs gives 0.98 and 94 %, a tie), where the shared 3.5 µs gave
0.49 (0.29–0.84; with the old register estimate 0.57, 0.23–0.95): the model had these kernels latency-bound at a third
of the rate they reach. Its bias is not flat: 0.88 / 0.90 / 0.94 / 0.96 at 1 / 2 / 4 / 8 rows, 1.24 / 1.26 at 12 / 16
(the model has no FMA term, and the latency absorbs part of it). Run 7 holds no ``smem_a`` kernel of a column-major
B: those take this constant unfitted. The three column-major-B sweeps, printed beside the choice (so not held out),
rank better with it: mean Spearman ρ 0.40 / 0.41 / 0.28 → 0.66 / 0.45 / 0.45 and a model-only pick 4.5 / 11.0 / 23.3 %
→ 1.1 / 8.5 / 5.8 % behind the best with ptxas's registers (``fused NT``, ``colb``, ``colb smem_a``); with the
estimates, old against new, 0.43 / 0.25 / 0.24 → 0.66 / 0.37 / 0.46 and 3.4 / 11.6 / 13.4 → 1.1 / 9.2 / 7.2 %.
``python benchmarks/costmodel_gemv.py --column-b``, ``benchmarks/results/costmodel_gemv_h200_2026-12-04_column_b.json``,
docs/costmodel.md."""

COLUMN_B_REGISTERS = (14.6, 1.75, 1.28)
"""Weights of :func:`column_b_register_features`: least squares over ptxas's registers (NVRTC 12.9, sm_90) of the 194
distinct column-major-B kernels with A in registers below the 250-register cap among the NT sweeps' schedules and
``schedule=None``'s x @ W.T picks of runs 3 and 7 (median error 4.5 %, largest 33 %); fitted on the 184 sweep kernels
alone, the 10 picks they lack come within 3.6 % (median), 12 % at most. ``python benchmarks/costmodel_gemv.py
--column-b``. The plan's estimate it replaces counted the unrolled loads of B but not of A: 132 registers for sixteen
rows, four columns per warp and unroll 2, where ptxas allocates 250."""


def column_b_register_features(bm: int, rn: int, vb: int, unroll: int) -> tuple[int, int, int]:
    """(1, accumulators, elements loaded ahead) of the column-major-B GEMV kernel with A in registers: the ``bm·rn``
    accumulators, and the ``unroll`` iterations' VB-wide loads of the ``bm`` rows of A and ``rn`` columns of B that
    ptxas hoists ahead of their FMAs. :data:`COLUMN_B_REGISTERS` weighs them."""
    return 1, bm * rn, unroll * vb * (bm + rn)


def column_b_registers(bm: int, rn: int, vb: int, unroll: int) -> int:
    """Registers per thread of the column-major-B GEMV kernel with A in registers (``smem_a=False``), estimated:
    :func:`column_b_register_features` at :data:`COLUMN_B_REGISTERS`' fitted weights; at most 255."""
    return min(255, round(sum(w * f for w, f in zip(COLUMN_B_REGISTERS, column_b_register_features(bm, rn, vb, unroll),
                                                    strict=True))))


@dataclass(frozen=True)
class GemvTime:
    """The model's figures for one GEMV-style kernel.

    Attributes:
        stream_s: seconds to read B at ``rate``, waves included.
        workspace_s: seconds of the split-K workspace's write and read-back at HBM rate.
        rate_bytes_per_s: B's arrival rate with the first wave resident (the smaller of HBM and bytes in
            flight / latency).
        inflight_bytes: bytes of B in flight over the GPU then.
        resident_blocks: blocks running at once in the first wave.
        bound: "hbm" when that rate is HBM's, else "latency" (too few bytes in flight).
        latency_s: the fitted round trip the rate divides by (:data:`GEMV_SMEM_A_EFFECTIVE_LATENCY_S` for ``smem_a``
            with a row-major B, and with a column-major B's ring: ``smem_a`` and ``spare_slot``, not fitted on it;
            :data:`GEMV_COLUMN_B_EFFECTIVE_LATENCY_S` for other kernels of a column-major B, else
            :data:`GEMV_EFFECTIVE_LATENCY_S`).
        occupancy: blocks per SM (registers: ptxas's, or the estimate with the unroll's loads).
        waves: the grid over those slots.
    """

    stream_s: float
    workspace_s: float
    rate_bytes_per_s: float
    inflight_bytes: float
    resident_blocks: int
    bound: str
    latency_s: float
    occupancy: Occupancy
    waves: Waves


def gemv_time(op, s, target: Target, hbm_bytes_per_s: float, registers: int | None = None) -> GemvTime:
    """The streaming part of a GEMV-style kernel's time (module docstring); ``registers``: ptxas's, when compiled.

    Every block moves the same bytes (B once per group of rows, A and C once); a full wave of ``slots`` blocks and the
    partial last one each take their bytes at their own rate, so a short last wave costs more per byte only when its
    bytes in flight cannot keep HBM busy.
    """
    e = dtypes.get(op.dtype).itemsize
    p = plan_gemm(op, s, target)
    va, vb = gemv_widths(op, s)
    k_slice = gemv_slice_depth(op.k, s)  # the emitter's k_per_split
    if s.smem_a:  # A is read from shared memory: a thread's iterations are single k steps of one VB-wide load
        va = 1
    if tensor_core_gemv(s):  # the tensor-core kernels (mma_sync, dmma): per k16 step a lane reads one 4-wide vector
        # of each of its warp's rn / 8 fragments' columns (the streaming model's latency was fitted on the FMA kernels)
        iterations, lanes = -(-k_slice // 16), 1.0
        per_iteration = s.rn // 8 * 4 * e
    elif op.layout_b == "row":  # a thread's iterations step VA along K, over its col_groups groups of VB columns
        iterations, lanes = -(-k_slice // va), 1.0
        per_iteration = va * vb * s.col_groups * e
    else:  # a group of k_lanes lanes (a warp unless k_lanes < 32) steps k_lanes·VB along K; a slice shorter than
        # that leaves lanes idle
        iterations = -(-k_slice // (s.k_lanes * vb))
        lanes = min(s.k_lanes, -(-k_slice // vb)) / s.k_lanes
        per_iteration = s.rn * vb * e * lanes
    in_flight = min(s.unroll, iterations)  # a short slice holds fewer iterations than the unroll allows
    compiled = registers is not None
    if registers is None and tensor_core_gemv(s):
        registers = p.est_registers
    elif registers is None and op.layout_b == "col" and not s.smem_a:
        registers = column_b_registers(s.bm, s.rn, vb, s.unroll)
    elif registers is None:  # smem_a's estimate counts its ring of B (column-major B: its unrolled loads) already
        registers = min(255, p.est_registers + (0 if s.smem_a else int(s.unroll * per_iteration / lanes) // e))
    occ = occupancy(target, s.bn, registers, p.dynamic_smem_bytes, "ptxas" if compiled else "estimate")
    per_sm = occ.blocks_per_sm or 1
    blocks = p.grid[0] * p.grid[1] * p.grid[2]
    slots = per_sm * target.sm_count
    moved = op.k * op.n * e * p.grid[2] + op.m * op.k * e + op.m * op.n * dtypes.get(op.dtype).itemsize
    if s.smem_a and op.layout_b == "col":  # each block stages bm rows of its slice of A (from L2) before its loads of
        moved += blocks * s.bm * k_slice * e  # B: as many bytes as B's at 16 columns per block, through the same loads
    per_block = moved / blocks

    # a column-major B's smem_a kernel unrolls its loads, as without it, unless it keeps a ring (spare_slot: its
    # latency is the row-major ring's, not fitted on it)
    ring = s.smem_a and (op.layout_b == "row" or s.spare_slot)
    latency = (GEMV_SMEM_A_EFFECTIVE_LATENCY_S if ring else
               GEMV_COLUMN_B_EFFECTIVE_LATENCY_S if op.layout_b == "col" else GEMV_EFFECTIVE_LATENCY_S)

    def rate(running: int) -> float:
        return min(hbm_bytes_per_s, running * s.bn * in_flight * per_iteration / latency)

    full, last = divmod(blocks, slots)
    stream = full * slots * per_block / rate(slots) + (last * per_block / rate(last) if last else 0.0)
    resident = min(blocks, slots)
    ws = 2.0 * s.split_k * op.m * op.n * 4 / hbm_bytes_per_s if s.split_k > 1 else 0.0
    first = rate(resident)
    return GemvTime(stream, ws, first, float(resident * s.bn * in_flight * per_iteration), resident,
                    "hbm" if first >= hbm_bytes_per_s else "latency", latency, occ,
                    waves(blocks, target.sm_count, per_sm))

"""GEMM cost model: traffic per memory level in sympy, and a per-SM pipeline model for the time.

Traffic (GEMM tiling and the multi-level roofline: ``docs/design.md``, "Background"), for C (M×N) =
A (M×K) · B (K×N), element size e, block tile bm×bn×bk, thread tile rm×rn, T = ⌈M/bm⌉·⌈N/bn⌉ tiles and
⌈K/bk⌉ K steps:

* HBM (compulsory): (M·K + K·N)·e + M·N·e·(1 + read_c)
* L2 → SM: every block loads its bm×bk and bk×bn tiles at every K step:
  T·⌈K/bk⌉·bk·(bm + bn)·e + C, which is M·N·K·(1/bm + 1/bn)·e + M·N·e when the tiles divide;
* shared memory: writes of those tiles T·⌈K/bk⌉·bk·(bm + bn)·4 and fragment reads
  M·N·K·(1/rm + 1/rn)·4 (tiledsl's emitter stages tiles as float32 whatever the input dtype);
* registers: every FMA reads 3 four-byte registers: M·N·K·12.

The GEMV-style kernel (``kernel='gemv'``, ``tiledsl/gemm/emit_gemv.py``) has no shared-memory level: it keeps
its rows of A in registers, loads B straight into registers and sums a warp's partial dot products with
shuffles, so it issues no shared-memory load or store and no block barrier (:func:`uses_shared_memory`); with
``smem_a`` it stages A instead: each of the ⌈M/bm⌉·⌈N/(bn·vb)⌉ blocks of columns writes its rows of A over all of K
once (bm·K·4 bytes, float32) and each of its bn threads reads bm elements per k (broadcasts; vb: B's load width);
with a column-major B each of the ⌈M/bm⌉·⌈N/(bn/k_lanes·rn)⌉ blocks writes bm·K·4 bytes and each of its bn/k_lanes
groups of lanes (a warp unless ``k_lanes`` < 32) reads bm elements per k (its lanes split K), and L2 serves A once per
block as well as B.

Time: the largest of the L2 and HBM bounds and the SM pipeline time. The SM pipeline, per K step of a
block, in SM clock cycles (constants: :class:`~tiledsl.costmodel.params.FmaParams`, fitted per arch on
the tuner's measured studies, ``benchmarks/costmodel_rank.py``):

* instruction issue: warp-instructions (FFMA, LDS, LDG, STS, index math, spill accesses) per scheduler,
  divided by the fitted ``issue_efficiency`` (an FFMA warp-instruction per scheduler per clock is the
  FP32 peak, so every other instruction takes a slot from an FFMA: the roofline's instruction ceilings),
  plus ``wavefront_issue_cycles`` per L1 wavefront of the warp's own shared-memory and local accesses (a
  multi-wavefront access holds its scheduler; fitted, about one cycle per wavefront);
* latency hiding (:func:`hidden`): a warp's K step is a dependent chain of its issue time plus bk waits
  of ``lds_latency_cycles`` (fragment loads before the FMAs of each k); with W warps per scheduler the
  scheduler finds a ready warp with probability 1 − (1 − u)^W, u = issue / chain: one warp pays the whole
  chain, many warps only their issue;
* shared-memory wavefronts (one 128-byte wavefront per clock per SM; broadcasts and bank conflicts
  simulated on the emitter's real index arithmetic for warp 0, a load never fewer than the registers it returns
  per lane, :func:`load_wavefronts`; spilled registers add L1 wavefronts);
* the critical path of one block: its own K step, overlapped with the global-load latency when the next
  tile is in flight (``stages`` ≥ 2: Little's law), plus ``barrier_cycles`` (other resident blocks hide it);

b resident blocks take max(issue and hiding of b blocks' warps, b × wavefronts, path) per K step, summed
over the waves of blocks each SM runs (wave quantization) — a last, partial wave runs fewer blocks per SM
and is priced as such. Registers for the occupancy are the plan's register terms weighed by the fitted ``reg_*``
constants (what ptxas allocated on the studies' kernels), capped; spills are those registers' excess over the cap
beyond ``spill_slack_registers`` (what ptxas recovers before it spills), ``spill_accesses_per_step`` local
accesses per spilled word per K step. Split-K adds the
float32 workspace's write and read-back and a second launch (no second launch with ``split_k_fused``). Stream-K (``stream_k``) prices the partial
wave as its share of a full one (every stream-K block busy to the end) and adds its partial tiles' traffic, counted
like split-K's workspace (written and read back, at L2 and HBM).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import sympy as sp

from .. import dtypes
from ..gemm.kernel_plan import gemv_columns_per_block, gemv_widths, plan_gemm, stream_k_split, tile_count
from ..gemm.schedule import fma_register_terms, gemv_smem_a_bytes, tile_loads
from ..occupancy import Occupancy, Waves, occupancy, waves
from ..target import Target
from .gemv import gemv_time
from .params import FmaParams, fma_params
from .report import LEVELS, Level, Report
from .stream import LAUNCH_S  # one launch-and-drain figure for every kernel the model prices

# ---- model constants (cycles); documented in docs/costmodel.md ----
ISSUE_PER_CLOCK = 4
"""Warp-instructions issued per clock per SM: 4 schedulers × 1 (CUDA guide, cc 9.0 SM description)."""
ALU_PER_GLOBAL_LOAD = 4
"""Index, bounds and predicate instructions per global vector load in the emitted load loop."""
STEP_FIXED_INSTR = 12
"""Per thread per K step: loop counter, has_next, stage pointer, barrier."""

# ---- sympy symbols ----
M, N, K = sp.symbols("M N K", positive=True, integer=True)
bm, bn, bk, rm, rn = sp.symbols("bm bn bk rm rn", positive=True, integer=True)
e = sp.Symbol("e", positive=True, integer=True)           # element bytes of A, B, C
vb = sp.Symbol("vb", positive=True, integer=True)         # GEMV kernel: columns of B per thread (its load width)
kl = sp.Symbol("k_lanes", positive=True, integer=True)    # GEMV kernel, column-major B: lanes along K per group
rc = sp.Symbol("read_c", nonnegative=True, integer=True)  # 1 when beta != 0
SMEM_ITEM = 4                                               # shared tiles are float32
REG_BYTES = 4


SMEM_KEYS = ("smem_write", "smem_read", "smem")
"""The shared-memory entries of :func:`expressions` (absent for a kernel without shared memory)."""


STREAM_K_LOOP_FACTOR = 1.045
"""Cycles of a ``stream_k`` kernel over the same kernel without it, tail apart: ptxas compiles the K loop inside
the loop over tiles with more registers and a different schedule. Measured, not fitted: on the 256×128×8 t16×8
tile at 4096³ and 8192³ stream-K ran 3.4-3.7 % (NN) and 2.8-3.0 % (TN) below the plain kernel although its tail
removal alone is worth about 3 %, and NT gained 1.5-2.2 % (mean loop cost about 4.5 %;
benchmarks/results/gemm_fma_streamk_h200.json, H200, 2026-12-01)."""

def uses_shared_memory(kernel: str, smem_a: bool = False) -> bool:
    """Whether the FMA GEMM kernel kind ``kernel`` (``GemmSchedule.kernel``) goes through shared memory.

    "tiled": yes (A and B tiles staged as float32, fragments read back, a barrier per K step). "gemv": only with
    ``smem_a`` (``GemmSchedule.smem_a``: the block's K slice of A staged once, one barrier); otherwise
    (``tiledsl/gemm/emit_gemv.py``) rows of A and vectors of B go straight to registers, a column-major B's
    partial dot products are summed with warp shuffles: no ``__shared__`` array, no ``__syncthreads``.
    """
    return kernel != "gemv" or smem_a


@functools.cache
def expressions(kernel: str = "tiled", smem_a: bool = False, col_b: bool = False) -> dict[str, sp.Expr]:
    """FLOPs and bytes per level as sympy expressions of M, N, K, bm, bn, bk, rm, rn, e, read_c (and vb, k_lanes).

    ``kernel``: the schedule's kernel kind; one without shared memory (:func:`uses_shared_memory`) has no
    ``smem_write``, ``smem_read`` and ``smem`` entries; the GEMV kernel with ``smem_a`` has its staged A's (module
    docstring; ``col_b``: a column-major B, whose groups of k_lanes lanes read bm elements per k each)."""
    tiles = sp.ceiling(M / bm) * sp.ceiling(N / bn)
    ksteps = sp.ceiling(K / bk)
    c_bytes = M * N * e * (1 + rc)
    work = tiles * ksteps * bk * bm * bn            # multiply-adds actually issued (padded tiles)
    ex = {
        "flops": 2 * M * N * K,
        "hbm": (M * K + K * N) * e + c_bytes,
        "l2": tiles * ksteps * bk * (bm + bn) * e + c_bytes,
        "smem_write": tiles * ksteps * bk * (bm + bn) * SMEM_ITEM,
        "smem_read": work * (1 / rm + 1 / rn) * SMEM_ITEM,
        "smem": tiles * ksteps * bk * (bm + bn) * SMEM_ITEM + work * (1 / rm + 1 / rn) * SMEM_ITEM,
        "registers": work * 3 * REG_BYTES,
    }
    if kernel == "gemv" and smem_a and col_b:  # A staged per block of bn/k_lanes groups × rn columns; per k, each
        # group reads bm elements (its lanes split K)
        blocks = sp.ceiling(M / bm) * sp.ceiling(N / (bn / kl * rn))
        ex["smem_write"] = blocks * K * bm * SMEM_ITEM
        ex["smem_read"] = blocks * bn / kl * K * bm * SMEM_ITEM
        ex["smem"] = ex["smem_write"] + ex["smem_read"]
        # L2 -> SM: B once per group of rows, and A once per block of columns (each stages its rows over all of K)
        ex["l2"] = blocks * K * bm * e + sp.ceiling(M / bm) * K * N * e + c_bytes
    elif kernel == "gemv" and smem_a:  # A staged per block of columns; bm elements read per thread and k
        blocks = sp.ceiling(M / bm) * sp.ceiling(N / (bn * vb))
        ex["smem_write"] = blocks * K * bm * SMEM_ITEM
        ex["smem_read"] = blocks * bn * K * bm * SMEM_ITEM
        ex["smem"] = ex["smem_write"] + ex["smem_read"]
    elif not uses_shared_memory(kernel):
        ex = {k: v for k, v in ex.items() if k not in SMEM_KEYS}
    return ex


_ARGS = (M, N, K, bm, bn, bk, rm, rn, e, rc, vb, kl)


@functools.cache
def _numeric(kernel: str = "tiled", smem_a: bool = False, col_b: bool = False):
    """The expressions lambdified once per kernel kind to plain-Python functions (fast path for :func:`predict`)."""
    return {k: sp.lambdify(_ARGS, v, modules="math") for k, v in expressions(kernel, smem_a, col_b).items()}


def _values(op, s) -> tuple:
    cols = gemv_widths(op, s)[1] if s.kernel == "gemv" else s.vec  # vb: only the GEMV kernel's expressions use it
    return (op.m, op.n, op.k, s.bm, s.bn, s.bk, s.rm, s.rn, dtypes.get(op.dtype).itemsize, int(op.read_c), cols,
            s.k_lanes)


def traffic(op, s, exact: bool = False) -> dict[str, float]:
    """FLOPs and bytes per level for concrete sizes (``exact``: sympy integers, else floats); no shared-memory
    entries for a kernel without shared memory (``s.kernel == "gemv"``)."""
    vals = _values(op, s)
    if exact:
        sub = dict(zip(_ARGS, vals, strict=True))
        return {k: sp.nsimplify(v.subs(sub)) for k, v in expressions(*_kind(op, s)).items()}
    return {k: float(f(*vals)) for k, f in _numeric(*_kind(op, s)).items()}


def _kind(op, s) -> tuple[str, bool, bool]:
    """The arguments of :func:`expressions` for ``op`` under ``s``: kernel kind, smem_a, a column-major B."""
    return s.kernel, s.smem_a, s.kernel == "gemv" and s.smem_a and op.layout_b == "col"


# ---- shared-memory wavefronts (bank model) ----
def wavefronts(word_addrs: list[int], words_per_access: int) -> int:
    """Wavefronts one warp-wide shared-memory access takes.

    A wavefront moves up to 128 bytes, one 4-byte word per bank (32 banks, CUDA guide "Shared Memory",
    ``002_…`` bank conflicts). Threads reading the same word share it (broadcast). The count is the
    larger of the unique bytes over 128 and the worst bank's number of distinct words.

    Args:
        word_addrs: first 4-byte word address of each thread's access (32 entries).
        words_per_access: 1, 2 or 4 (scalar, 8-byte or 16-byte accesses).

    Example:
        >>> wavefronts([i * 32 for i in range(32)], 1)   # a column of a 32-wide float tile: 32-way
        32
    """
    words = {a + j for a in word_addrs for j in range(words_per_access)}
    per_bank: dict[int, int] = {}
    for w in words:
        per_bank[w % 32] = per_bank.get(w % 32, 0) + 1
    return max(-(-len(words) * 4 // 128), max(per_bank.values(), default=0))


def load_wavefronts(word_addrs: list[int], words_per_access: int) -> int:
    """Wavefronts one warp-wide shared-memory *load* takes: :func:`wavefronts` (bytes and bank conflicts), but never
    fewer than the return path needs.

    The L1/shared-memory return path delivers 128 bytes per wavefront, one 4-byte register to each of the 32 lanes,
    so a load of ``words_per_access`` words per lane takes at least that many wavefronts (LDS.128: 4) however few
    distinct addresses it reads; when the lanes pair up on addresses (lane t reads what lane t ^ 1 reads, or what lane
    t ^ 2 reads, for every t) the return is packed two lanes to a slot and the floor halves (LDS.128: 2), never below
    one. NVIDIA's description (developer forums, "Unexpected shared memory bank conflict", cc 7.x: "LDS.128 requires 4
    requests per instruction as it returns 4 registers. If the guidelines are met the requests/instruction should
    reduce from 4 to 2"), and this project's counters: with it the FMA GEMMs' fragment reads plus the tile stores give
    148 and 108 wavefronts per warp and K step for the 256×128×8 (16×8 thread tiles) and 128×128×8 (8×8) kernels of
    ``benchmarks/results/ncu_bytes_h200.json``, where Nsight Compute measured 148.1 and 108.1 on the H200
    (:func:`wavefronts` alone: 68 and 44).

    Example:
        >>> load_wavefronts([(lane // 8) * 4 for lane in range(32)], 4)   # 4 rows, 8 lanes each: pairs share
        2
        >>> load_wavefronts([(lane % 8) * 4 for lane in range(32)], 4)    # 8 columns, 4 lanes each: no pairs
        4
    """
    floor = words_per_access
    if len(word_addrs) == 32 and any(all(word_addrs[t] == word_addrs[t ^ d] for t in range(32)) for d in (1, 2)):
        floor = max(1, words_per_access // 2)
    return max(wavefronts(word_addrs, words_per_access), floor)


def _store_wavefronts(op, s, which: str, vec: int) -> tuple[int, int]:
    """(instructions, wavefronts) per thread-slot of the registers→shared store of tile A or B (warp 0)."""
    threads = s.threads
    if which == "A":
        transposed = op.layout_a == "row"
        contig, ld = (s.bk if transposed else s.bm), s.bm + s.smem_pad
        loads = tile_loads(s, "A", vec)
    else:
        transposed = op.layout_b == "col"
        contig, ld = (s.bk if transposed else s.bn), s.bn + s.smem_pad
        loads = tile_loads(s, "B", vec)
    instr = wf = 0
    lanes = range(min(32, threads))
    rc_ = [((t // (contig // vec)), (t % (contig // vec)) * vec) for t in lanes]
    if transposed:
        for el in range(vec):
            wf += wavefronts([(c + el) * ld + r for r, c in rc_], 1)
            instr += 1
    elif vec == 4:
        wf, instr = wavefronts([r * ld + c for r, c in rc_], 4), 1
    else:
        for el in range(vec):
            wf += wavefronts([r * ld + c + el for r, c in rc_], 1)
            instr += 1
    return instr * loads, wf * loads


@functools.cache
def _per_step(op, s) -> dict[str, float]:
    """Per thread per K step: instruction counts; per warp per K step: shared-memory wavefronts (none, and no
    LDS or STS, for a kernel without shared memory: :func:`uses_shared_memory`)."""
    p = plan_gemm(op, s)
    va, vb = p.width("A"), p.width("B")
    cm, cn = p.detail.cm, p.detail.cn
    lanes_m, lanes_n = s.wm // s.rm, s.wn // s.rn
    loop = 0 if s.unroll >= s.bk else 3 * (s.bk // s.unroll)
    if s.kernel == "gemv":
        # the GEMV pricing's step counts as fitted (rounded down: its loads go straight to registers). smem_a: per
        # k a thread's bm/4 16-byte broadcasts (one wavefront each per warp), and its share of staging bm × bk
        # elements of A: scalar stores, warp 0's lanes at rows i % bm of k group i / bm
        # a column-major B with k_lanes < 32: a block covers 32 / k_lanes times the columns, so a thread does that
        # many times the work on B of each K step (A is staged once per block whatever k_lanes is)
        groups = 32 // s.k_lanes if op.layout_b == "col" else 1
        loads_a, loads_b = s.bm * s.bk // (s.threads * va), groups * s.bk * s.bn // (s.threads * vb)
        lds, sts, wf_lds, wf_sts = 0, 0, 0, 0
        if s.smem_a and op.layout_b == "col":  # a group's lanes split K: per row one VB-wide read per k_lanes·vb k
            # (consecutive across the group: k_lanes·vb/32 wavefronts, at least one, every group of the warp served
            # by the same ones); A staged by va-wide stores, lane t at words t·va … + va - 1 (consecutive across the
            # warp: va wavefronts, no conflict)
            lds, sts = s.bm * s.bk / (s.k_lanes * vb), s.bm * s.bk / (s.threads * va)
            wf_lds, wf_sts = lds * max(1.0, s.k_lanes * vb / 32), sts * wavefronts([lane * va for lane in range(32)], va)
        elif s.smem_a:
            lds, sts = s.bk * s.bm // 4, -(-s.bm * s.bk // s.threads)
            conflicts = [wavefronts([((lane // s.bm) * va + j) * s.bm + lane % s.bm for lane in range(32)], 1)
                         for j in range(va)]
            wf_lds, wf_sts = lds, sts * sum(conflicts) / len(conflicts)
        return {"ffma": groups * s.bk * s.rm * s.rn, "lds": lds, "ldg": loads_a + loads_b,
                "alu": ALU_PER_GLOBAL_LOAD * (loads_a + loads_b) + STEP_FIXED_INSTR + loop,
                "sts": sts, "wf_lds": wf_lds, "wf_sts": wf_sts}
    loads_a, loads_b = tile_loads(s, "A", va), tile_loads(s, "B", vb)
    sts_a, wf_sts_a = _store_wavefronts(op, s, "A", va)
    sts_b, wf_sts_b = _store_wavefronts(op, s, "B", vb)
    frag_a = s.rm // cm
    frag_b = s.rn // cn
    wf_frag_a = load_wavefronts([(lane // lanes_n) * cm for lane in range(32)], cm)
    wf_frag_b = load_wavefronts([(lane % lanes_n) * cn for lane in range(32)], cn)
    del lanes_m
    return {
        "ffma": s.bk * s.rm * s.rn,
        "lds": s.bk * (frag_a + frag_b),
        "ldg": loads_a + loads_b,
        "alu": ALU_PER_GLOBAL_LOAD * (loads_a + loads_b) + STEP_FIXED_INSTR + loop,
        "sts": sts_a + sts_b,
        "wf_lds": s.bk * (frag_a * wf_frag_a + frag_b * wf_frag_b),
        "wf_sts": wf_sts_a + wf_sts_b,
    }


def estimate_registers(op, s, params: FmaParams | None = None) -> tuple[int, int]:
    """(registers per thread, spill bytes) estimated without compiling, capped by what the kernel's
    ``__launch_bounds__(threads, min_blocks)`` lets the compiler use, in whole allocation units of 8. See
    ``tiledsl.gemm.kernel_plan``.

    ``params``: the registers ptxas allocates below the cap, for the occupancy, as ``params.reg_base`` + its
    ``reg_*`` weights of :func:`tiledsl.gemm.schedule.fma_register_terms` (FMA tiled kernels), and the spills
    from the same count: 8 bytes of spill traffic (a store and a load) per register of its excess over the cap
    beyond ``params.spill_slack_registers`` (the registers ptxas recovers before it spills); FmaParams' defaults
    give the plan's own registers and spills. None, or another kernel: the plan's estimate as it is.

    Why from the fitted count: the plan's estimate (36 + 1 per accumulator, fragment and staged element + 2 per
    load) missed 6 of the 8 spilling kernels of 35×8457×2560 and 12 of 29 of 4096³ (committed studies, H200,
    2026-12-01), e.g. 32×32×32 tiles of 4×8 (one warp, 40 scalar loads of the odd-N B: 448 bytes of spills,
    predicted fastest of its study with none)."""
    p = plan_gemm(op, s)
    want = p.est_registers
    if params is not None and s.kernel == "tiled" and s.mma == "fma":
        v = dict(p.vec)
        t = fma_register_terms(s, v["A"], v["B"])
        want = math.ceil(params.reg_base + params.reg_per_accumulator * t["accumulators"]
                         + params.reg_per_fragment * t["fragments"] + params.reg_per_staged * t["staged"]
                         + params.reg_per_load * t["loads"] + 10 * t["stream_k"])
        spill = max(0, want - p.max_registers - params.spill_slack_registers) * 8
        return min(p.max_registers, -(-want // 8) * 8), int(math.ceil(spill))
    return min(p.max_registers, -(-want // 8) * 8), p.detail.spill_bytes


@dataclass(frozen=True)
class GemmTimes:
    """The pieces of the GEMM time prediction (seconds unless named otherwise).

    ``issue_cycles_per_step``, ``smem_cycles_per_step`` and ``path_cycles_per_step`` are for one block's
    K step on an SM of its own: its warps' issue time, its shared-memory wavefronts, and its critical
    path (issue or the latency chain of one warp, plus the barrier and the global-load wait).
    ``warps_per_scheduler``: resident warps per busy scheduler in a full wave.
    """

    occupancy: Occupancy
    waves: Waves
    t_sm_s: float
    t_l2_s: float
    t_hbm_s: float
    sm_bound: str
    issue_cycles_per_step: float
    smem_cycles_per_step: float
    path_cycles_per_step: float
    instr_per_ffma: float
    smem_moved_bytes: float
    clock_hz: float
    warps_per_scheduler: float = 0.0
    params: FmaParams = FmaParams()


def hidden(warps: float, issue: float, chain: float) -> float:
    """Cycles a scheduler needs for ``warps`` warps that each issue ``issue`` cycles of instructions
    within a dependent chain of ``chain`` cycles (issue plus waits).

    A warp is ready in a given cycle with probability u = issue / chain; with W warps the scheduler
    finds one ready with probability 1 − (1 − u)^W (warps stalling independently), so it needs
    W · issue / (1 − (1 − u)^W) cycles: ``chain`` for one warp, W · issue with many (latency hidden).
    """
    if chain <= issue or issue <= 0:
        return warps * issue
    u = issue / chain
    return warps * issue / (1.0 - (1.0 - u) ** warps)


def _grid_work(op, s) -> tuple[int, int]:
    """(blocks, K steps per block): split-K multiplies the blocks and divides K (``k_range`` of the
    emitter: each slice is ⌈K / (split_k·bk)⌉·bk deep)."""
    if s.kernel == "gemv":  # its blocks of columns (bn threads cover bn·vb columns, or bn/32·rn) × groups of rows
        columns, _, rows = plan_gemm(op, replace(s, split_k=1, split_k_fused=False)).grid
        tiles = columns * rows
    else:
        tiles = tile_count(op, s)
    if not op.k:
        return tiles, 0
    split = max(s.split_k, 1)
    if split == 1:
        return tiles, -(-op.k // s.bk)
    k_per = -(-op.k // (split * s.bk)) * s.bk
    return tiles * split, -(-k_per // s.bk)


def gemm_times(op, s, target: Target, regs: int | None = None, spill_bytes: int | None = None,
               smem_bytes: int | None = None, regs_source: str = "estimate",
               ceilings: dict | None = None, params: FmaParams | None = None) -> GemmTimes:
    """The per-SM pipeline model of the module docstring, for concrete (op, s, target).

    Args:
        op, s: the GEMM and its FMA schedule.
        target: the device (SM count, limits; ``ceilings`` default to ``target.ceilings()``).
        regs, spill_bytes, smem_bytes: a compiled kernel's ptxas figures (None: estimated).
        regs_source: "ptxas" or "estimate" (recorded in the occupancy).
        params: the pipeline constants (None: :func:`~tiledsl.costmodel.params.fma_params` of the arch).
    """
    c = ceilings or target.ceilings()
    prm = fma_params(target.arch) if params is None else params
    if regs is None:
        regs, spill_est = estimate_registers(op, s, prm)
        spill_bytes = spill_est if spill_bytes is None else spill_bytes
    spill_bytes = spill_bytes or 0
    if smem_bytes is None:  # the GEMV kernel's (smem_a's staged A) depends on K
        smem_bytes = gemv_smem_a_bytes(op.k, s, col_b=op.layout_b == "col") if s.kernel == "gemv" else s.smem_bytes()
    smem = smem_bytes
    occ = occupancy(target, s.threads, regs, smem, regs_source)
    blocks, ksteps = _grid_work(op, s)
    blocks_per_sm = max(occ.blocks_per_sm, 1)
    wv = waves(blocks, target.sm_count, blocks_per_sm)
    p = _per_step(op, s)
    warps = -(-s.threads // 32)
    eta = prm.issue_efficiency
    spill_instr = prm.spill_accesses_per_step * spill_bytes / 4.0   # local loads/stores per thread per K step
    instr_thread = p["ffma"] + p["lds"] + p["ldg"] + p["alu"] + p["sts"] + spill_instr
    wf_warp = p["wf_lds"] + p["wf_sts"] + spill_instr               # local memory shares the L1 wavefronts
    smem_b = warps * wf_warp
    # shared-load waits and the barrier per K step exist only where tiles go through shared memory
    lds_wait, barrier = ((prm.lds_latency_cycles, prm.barrier_cycles) if uses_shared_memory(s.kernel, s.smem_a)
                         else (0.0, 0.0))
    # a warp's issue cycles per K step: its instructions at the issue efficiency, plus the cycles its scheduler is held
    # per L1 wavefront of the warp's own shared-memory and local accesses (FmaParams.wavefront_issue_cycles)
    issue_warp = instr_thread / eta + prm.wavefront_issue_cycles * wf_warp
    chain = issue_warp + s.bk * lds_wait                           # one warp's K step, nothing hiding it

    def sched_cycles(b: int) -> tuple[float, float]:
        """(cycles of one K step of b blocks on a scheduler, warps per busy scheduler)."""
        busy = min(ISSUE_PER_CLOCK, b * warps)
        w_per = b * warps / busy
        return hidden(w_per, issue_warp, chain), w_per

    alone_b, _ = sched_cycles(1)
    stages = max(s.stages, 1)
    if stages >= 2:  # the next tile(s) in flight while this one is computed: Little's law
        path_b = max(alone_b, prm.mem_latency_cycles / (stages - 1)) + barrier
    else:
        path_b = alone_b + prm.mem_latency_cycles + barrier

    def round_cycles(b: int) -> tuple[float, str]:
        issue, _ = sched_cycles(b)
        parts = {"compute": issue, "smem": b * smem_b, "latency": path_b}
        k = max(parts, key=lambda x: parts[x])
        return parts[k], k

    slots = target.sm_count * blocks_per_sm
    full, rem = divmod(blocks, slots)
    t_full, bound = round_cycles(blocks_per_sm)
    cycles = full * ksteps * t_full
    shares = 0  # stream-K: partial tiles written, each read back once by the block finishing its tile
    if rem and s.stream_k:  # the last waves' K iterations shared evenly by the stream-K blocks (stream_k_split)
        sk = stream_k_split(blocks, ksteps, slots)
        cycles = sk.dp_tiles // slots * ksteps * t_full + -(-sk.sk_tiles * ksteps // sk.sk_blocks) * t_full
        shares = sk.sk_blocks + sk.sk_tiles
    elif rem:
        t_last, b_last = round_cycles(-(-rem // target.sm_count))
        cycles += ksteps * t_last
        if not full:
            bound = b_last
    if s.stream_k:  # the K loop inside the loop over tiles compiles slower (STREAM_K_LOOP_FACTOR)
        cycles *= STREAM_K_LOOP_FACTOR
    # prologue (first tile load) and epilogue per wave
    cycles += wv.waves * (prm.mem_latency_cycles + barrier)
    clock = c["fp32_flops_per_s"].value / (target.sm_count * target.fp32_lanes_per_sm * 2)
    tr = traffic(op, s)
    # split-K: the float32 partial sums are written and read back (by the followup kernel, or the last block)
    ws = 2.0 * s.split_k * op.m * op.n * 4 if s.split_k > 1 else 0.0
    ws += 2.0 * shares * s.bm * s.bn * 4
    t_l2 = (tr["l2"] + ws) / c["l2_bytes_per_s"].value
    t_hbm = (tr["hbm"] + ws) / c["hbm_bytes_per_s"].value
    smem_moved = blocks * ksteps * (p["wf_lds"] + p["wf_sts"]) * warps * 128.0
    _, w_full = sched_cycles(min(blocks_per_sm, -(-blocks // target.sm_count)) or 1)
    return GemmTimes(occ, wv, cycles / clock, t_l2, t_hbm, bound, warps * issue_warp / ISSUE_PER_CLOCK,
                     smem_b, path_b, instr_thread / max(p["ffma"], 1), smem_moved, clock, w_full, prm)


def predict_gemm(op, s, target: Target, ceilings: dict | None = None, kernel=None,
                 params: FmaParams | None = None) -> float:
    """Predicted seconds of the GEMM kernel: max(SM pipeline, L2, HBM) + launch (two with split-K; with
    ``split_k_fused`` one, plus the last block's sum, :func:`_after_s`).
    ``params``: pipeline constants to use instead of the arch's fitted ones (the fit script's trials)."""
    kw = _kernel_resources(kernel)
    c = ceilings if ceilings is not None else target.ceilings()
    if s.kernel == "gemv":  # a streaming kernel: its own model (tiledsl.costmodel.gemv)
        gv = gemv_time(op, s, target, c["hbm_bytes_per_s"].value, kw.get("regs"))
        return gv.stream_s + gv.workspace_s + _after_s(op, s, target, c)
    g = gemm_times(op, s, target, ceilings=c, params=params, **kw)
    return max(g.t_sm_s, g.t_l2_s, g.t_hbm_s) + _after_s(op, s, target, c)


def _after_s(op, s, target: Target, c: dict) -> float:
    """Seconds after the main loop's bound: the launches (the split-K followup is a second one), and with
    ``split_k_fused`` the last block's serial sum: split_k · rows · its columns of float32 partials read by one SM,
    at its share of the L2 bandwidth (measured: 2.1 MB summed this way made 16×4096×14336 3.8× slower than the
    split-K kernel, ``docs/gemm.md``)."""
    if not s.split_k_fused:
        return (2 if s.split_k > 1 else 1) * LAUNCH_S
    tail = s.split_k * min(s.bm, op.m) * min(gemv_columns_per_block(op, s), op.n) * 4
    return LAUNCH_S + tail / (c["l2_bytes_per_s"].value / target.sm_count)


def _kernel_resources(kernel) -> dict:
    if kernel is None:
        return {}
    return {"regs": int(kernel.registers), "spill_bytes": int(kernel.spill_bytes),
            "smem_bytes": int(kernel.smem_bytes), "regs_source": "ptxas"}


def explain_gemm(op, s, target: Target, kernel=None):
    """The :class:`~tiledsl.costmodel.report.Report` of a GEMM."""
    c = target.ceilings()
    g = gemm_times(op, s, target, ceilings=c, **_kernel_resources(kernel))
    ex = traffic(op, s, exact=True)
    flops = int(ex["flops"])
    levels = {}
    col_b_staged = _kind(op, s)[2]  # a column-major B's staged A: read per group of lanes, re-read from L2 per block
    notes = {
        "hbm": "compulsory: A, B read once, C written once",
        "l2": ("B once per group of rows + A once per block of columns (staged) + C" if col_b_staged
               else "tile re-reads M·N·K·(1/bm+1/bn)·e + C"),
        "smem": (f"staged A: bm·K·4 written per block of columns + bm·4 read per "
                 f"{'group of k_lanes lanes' if col_b_staged else 'thread'}"
                 f" and k; wavefronts move {g.smem_moved_bytes / 1e9:.3g} GB" if s.kernel == "gemv" else
                 f"tile writes + reads M·N·K·(1/rm+1/rn)·4; wavefronts move {g.smem_moved_bytes / 1e9:.3g} GB"),
        "registers": "3 source registers per FMA",
    }
    ceil_key = {"hbm": "hbm_bytes_per_s", "l2": "l2_bytes_per_s", "smem": "smem_bytes_per_s"}
    for name in (lv for lv in LEVELS if lv in ex):  # no "smem" for a kernel without shared memory
        b = int(ex[name])
        if name == "registers":
            bw = c["fp32_flops_per_s"].value / 2 * 3 * REG_BYTES
            src = f"derived: 3 × 4 B per FMA lane per clock at the FP32 rate ({c['fp32_flops_per_s'].source})"
            moved = b
        else:
            bw, src = c[ceil_key[name]].value, c[ceil_key[name]].source
            moved = g.smem_moved_bytes if name == "smem" else b
        levels[name] = Level(name, b, flops / b if b else math.inf, bw, src, moved / bw, moved, notes[name])
    compute_s = flops / c["fp32_flops_per_s"].value
    launch_s = _after_s(op, s, target, c)
    terms = {"sm_pipeline_s": g.t_sm_s, "l2_s": g.t_l2_s, "hbm_s": g.t_hbm_s, "launch_s": launch_s,
             "issue_cycles_per_step": g.issue_cycles_per_step, "smem_cycles_per_step": g.smem_cycles_per_step,
             "path_cycles_per_step": g.path_cycles_per_step, "instr_per_ffma": g.instr_per_ffma,
             "wave_efficiency": g.waves.efficiency, "clock_hz": g.clock_hz,
             "warps_per_scheduler": g.warps_per_scheduler,
             **{f"param_{k}": v for k, v in g.params.to_dict().items() if k != "source"}}
    biggest = max(("sm", g.t_sm_s), ("l2", g.t_l2_s), ("hbm", g.t_hbm_s), key=lambda x: x[1])
    bound = g.sm_bound if biggest[0] == "sm" else biggest[0]
    predicted = biggest[1] + launch_s
    gv = None
    if s.kernel == "gemv":  # the streaming model decides (tiledsl.costmodel.gemv); the levels stay as traffic
        gv = gemv_time(op, s, target, c["hbm_bytes_per_s"].value, kernel.registers if kernel is not None else None)
        predicted = gv.stream_s + gv.workspace_s + launch_s
        bound = "hbm" if gv.bound == "hbm" else "latency"
        terms.update(gemv_stream_s=gv.stream_s, gemv_workspace_s=gv.workspace_s, gemv_rate_bytes_per_s=gv.rate_bytes_per_s,
                     gemv_inflight_bytes=gv.inflight_bytes, gemv_resident_blocks=gv.resident_blocks)
    prm = g.params
    if uses_shared_memory(s.kernel, s.smem_a):
        mix = "FFMA, LDS, LDG, STS, index math"
        step = (f"smem {g.smem_cycles_per_step:.0f} cyc, critical path {g.path_cycles_per_step:.0f} cyc "
                f"({s.stages} stage{'s' if s.stages > 1 else ''}, load latency {prm.mem_latency_cycles:.0f} cyc, "
                f"barrier {prm.barrier_cycles:.0f} cyc, shared-load latency {prm.lds_latency_cycles:.0f} cyc per k)")
    else:
        mix = "FFMA, LDG, index math; no shared memory"
        step = (f"critical path {g.path_cycles_per_step:.0f} cyc ({s.stages} stage{'s' if s.stages > 1 else ''}, "
                f"load latency {prm.mem_latency_cycles:.0f} cyc; no shared memory, no barrier)")
    warps = -(-s.threads // 32)
    ffma = _per_step(op, s)["ffma"]
    ffma_cycles = ffma * warps / ISSUE_PER_CLOCK  # FFMA issue per scheduler
    # the block's L1 wavefronts per K step (shared memory and spills, the smem term) per warp-level FFMA
    held = (f" + {prm.wavefront_issue_cycles:.2g} cyc per L1 wavefront "
            f"({g.smem_cycles_per_step / (warps * ffma):.2f} per FFMA)" if prm.wavefront_issue_cycles and ffma else "")
    lines = (
        f"instruction issue: {g.instr_per_ffma:.2f} warp-instructions per FFMA "
        f"({mix}) at {prm.issue_efficiency:.0%} issue efficiency{held} → FP32 ceiling "
        f"{ffma_cycles / g.issue_cycles_per_step if g.issue_cycles_per_step else 0:.0%} of peak",
        f"per K step of one block: issue {g.issue_cycles_per_step:.0f} cyc, {step}; "
        f"{g.warps_per_scheduler:.3g} warps per scheduler",
        f"pipeline constants: {prm.source}",
    )
    if gv is not None:
        lines = (f"GEMV stream: {gv.inflight_bytes / 1e6:.3g} MB of B in flight over {gv.resident_blocks} resident "
                 f"blocks / {gv.latency_s * 1e6:.2g} µs (fitted) → {gv.rate_bytes_per_s / 1e12:.3g} TB/s "
                 f"({gv.bound}-bound); stream {gv.stream_s * 1e6:.3g} µs, split-K workspace "
                 f"{gv.workspace_s * 1e6:.3g} µs, launches{' and fused sum' if s.split_k_fused else ''} "
                 f"{launch_s * 1e6:.3g} µs",
                 ("A staged in shared memory once per block (one barrier), "
                  + ("a ring of B loads in the K loop" if op.layout_b == "row" or s.spare_slot
                     else "unrolled loads of B along K")
                  if s.smem_a else "no shared memory, no barrier in the K loop") + " (tiledsl/costmodel/gemv.py)")
        if s.mma == "mma_sync":
            lines += ("tensor cores (precision='3xtf32'): three m16n8k8 TF32 products per term, each input split into "
                      "two TF32 parts; the registers and compute rows above are the FP32 units', which this kernel "
                      "does not use; its stream's latency is the FMA kernels' fit (not fitted on it)",)
        if s.mma == "dmma":
            lines += ("FP64 tensor cores (mma='dmma'): one m16n8k16 float64 product per k16 step and fragment, each "
                      "input widened to float64 (F2F), float64 sums; the compute row above is the FP32 units' (the "
                      "FP64 tensor cores' peak is the same on H100/H200, not modelled here); its stream's latency is "
                      "the FMA kernels' fit (not fitted on it)",)
    if s.stream_k and s.kernel == "tiled" and g.waves.efficiency < 1.0:  # the waves line counts whole tiles
        blocks, ksteps = _grid_work(op, s)
        sk = stream_k_split(blocks, ksteps, target.sm_count * max(g.occupancy.blocks_per_sm, 1))
        lines += (f"stream-K: {sk.sk_blocks} blocks share the last {sk.sk_tiles} tiles' K steps ({ksteps} per tile), "
                  f"{sk.dp_tiles} tiles run whole; the time prices every block busy to the end, not the waves line's "
                  f"{g.waves.efficiency:.0%}",)
    if kernel is not None and kernel.spill_bytes:
        lines += (f"ptxas reports {kernel.spill_bytes} bytes of spills: local-memory traffic slows the K loop",)
    occ, wv = (gv.occupancy, gv.waves) if gv is not None else (g.occupancy, g.waves)
    return Report("gemm", op, s, target, flops, levels, compute_s, c["fp32_flops_per_s"].value,
                  c["fp32_flops_per_s"].source, occ, wv, predicted, bound, terms,
                  dict(expressions(*_kind(op, s))), lines)

"""The GEMV-style kernel's split-K summed in the kernel (``split_k_fused``) against the split-K kernel, beside cuBLAS.

Run on a GPU: ``python benchmarks/gemv_fused.py --out benchmarks/results/gemv_fused_h200.json``.

Products: every distinct (N, K) of ``benchmarks/data/llm_gemm.csv`` as x @ W with M = 1, 4 and 16 rows (row-major
x and W) and with one row and torch's Linear layout (W [N, K], a column-major B); DeepBench's few-column products
run as rows (Cᵀ = Bᵀ·Aᵀ; both operands column-major, "TT"), among them one-column products that
``runs_as_row`` leaves to the tiled kernels (or did, before ``row_in_one_launch``). Each runs ``schedule=None``
as shipped and these GEMV schedules:

- ``two``: ``gemv_base_schedule``'s pick (``gemv_schedule`` before its one-launch rule for small products), its K
  slices summed by the split-K kernel (a second launch);
- ``fused``: the same, summed by the last block of each column group (``split_k_fused=True``);
- ``two bn=256`` (a column-major B, since ``GEMV_FUSED_COLUMN_B``): the earlier pick of 8 warps per block;
- ``fused split/2``, ``fused split*2``: half and twice the K slices;
- ``fused bn/2``, ``fused bn/4``: half and a quarter of the threads per block (so of the columns per block), the
  K slices again for about four blocks per SM.

With ``--family two`` (``benchmarks/results/gemv_split_h200.json``): the split-K kernel only, ``two bn/D P/SM`` with
all (D = 1) or a quarter (D = 4) of the threads per block and the K slices for about P = 1, 2, 4 (the pick) or 8
blocks per SM, each slice at least 64 deep (the pick's depth when that file was measured); products with a row-major
B only. With ``--family depth`` (``benchmarks/results/gemv_depth_h200.json``): ``two bn/D depthS``, the K slices
for about four blocks per SM but each at least S = 64, 32, 16 or 8 deep, with all or a quarter of the threads per
block. When that file was measured the pick was 64 deep, so its ``two bn/1 depth64`` variant was left out (the
same schedule as ``two``); a run now names every depth, and ``two`` is 32 deep for sixteen rows. With ``--family
launch`` (``--out benchmarks/results/gemv_launch_h200.json``): the products of at most 16 MiB, where a second launch
is most of the time (512×1×512 and 128×1×1024 run 0.6–0.7× cuBLAS on the split-K kernel), as ``one launch bn/D
depthS``: the K slices (if more than one) summed in the kernel, at least S = 64, 32 or 16 deep, all or a quarter of
the threads (its finding is ``GEMV_ONE_LAUNCH_MAX_BYTES``: ``schedule=None`` takes ``one launch bn/4 depth64``
where that rule applies). With ``--family groups`` (``--out benchmarks/results/gemv_groups_h200.json``): the LLM
set's odd N (50257, GPT-2's vocabulary, where B is read one element at a time) at 1, 4, 8 and 16 rows and a few
aligned products (:data:`GROUPS_ALIGNED`), as ``groups G uU``: G groups of columns per thread (``col_groups``, at
B's load width; where bm·G·vec ≤ 64) and unroll U, the K slices again for about four blocks per SM, summed as the
pick sums them. With ``--family colb`` (``--out benchmarks/results/gemv_colb_h200.json``): torch's Linear layout
with 2, 4, 8 and 16 rows (:data:`COLUMN_B_ROWS`), where ``schedule=None`` runs the tiled kernels, on the GEMV kernel
as ``rnR bnT uU [fused]``: R columns per warp, T threads per block, unroll U, the K slices for about four blocks
per SM summed by the split-K kernel or in the kernel. ``two`` is ``gemv_base_schedule``'s pick as the run found it: 8
warps at unroll 2 (1 from eight rows) in ``gemv_colb_h200.json``, ``GEMV_COLUMN_B_ROWS`` since (``_run2``).
With ``--family smem_a`` (``--out benchmarks/results/gemv_smem_a_h200.json``): x @ W with 4, 8 and 16 rows
(:data:`SMEM_A_ROWS`) over every LLM (N, K) with N a multiple of 4, ``two`` (``gemv_base_schedule``'s pick: A in
registers) against ``smem_a bnT uU P/SM dD``: A's K slice staged in shared memory (``smem_a``), T threads per block,
U loads of B in flight per thread, the K slices for about P blocks per SM but none deeper than D (the pick since
``gemv_staged_a`` in its first form: bn128 u8 4/SM d256, sixteen rows; since, for 8 and 16 rows, slices at most 512
deep chosen to fill whole waves). ``--family smem_a_depth`` (the same products with 8 and 16
rows): ``smem_a bnT waves dD``, the staged pick with T = 128, 64 or 32 threads per block and its K slices
(``gemv_whole_waves``) when no slice may be deeper than D = 256 (the pick with 128 threads), 512 or 768 (fewer slices:
less split-K workspace, more shared memory per block). ``--family waves`` (``--out
benchmarks/results/gemv_waves_h200.json``): x @ W with 1, 2 and 4 rows (A in registers) over the LLM (N, K) where
``gemv_register_waves`` changes the slices: ``two`` (the base pick: slices for four blocks per SM, where ptxas's
180-221 registers fit two), ``schedule=None`` (whole waves), ``whole waves u16`` and ``half the slices``.

With ``--family colb_lanes``: x @ W.T with 8, 12 and 16 rows over every LLM (N, K) with K a multiple of 4 on the
kernel with A in registers and its lanes in groups along K (``gemv_lanes_column_b``), as ``lanesL rnR uU [bnT] [cap
C]`` (:data:`COLB_LANES`: L lanes per group, R columns per group, unroll U, T threads per block, registers capped at
C), each with its K slices recounted for whole waves, beside ``schedule=None``.

With ``--family few_rows``: x @ W (N a multiple of 4, where ``schedule=None`` stages A) and x @ W.T with 8, 12 and 16
rows (:data:`FEW_ROWS`), ``schedule=None``'s own pick (``default_schedule``: a shipped record where one applies,
else ``gemv_schedule``; not the base pick, through ``gemv_hbm.variant_schedule``) as ``spare slot`` (``spare_slot``: a
ring of unroll + 1 loads of B, a running pointer into B), ``12 rows`` (12 rows per block in place of 16, for 9-12
rows), ``12 rows spare slot``, and for x @ W.T with A in registers ``cap 168`` (``min_blocks`` 3: three blocks of 128
threads per SM instead of two), ``u1 cap 128`` (unroll 1, four blocks) and ``12 rows cap 168``, and for x @ W.T
from 8 rows the kernel with a ring and its lanes in groups along K (``gemv_ring_column_b``) as ``ring``, ``12 rows
ring`` (256 threads, two columns per group), at 128 threads ``ring rn4 u2 cap 168`` (four columns per group, two steps
ahead, three blocks per SM) and ``ring rn4 u1`` (one step ahead, four blocks), and ``ring bn128`` (two columns per
group: 32 per block, twice the staged A per byte of B); each schedule once (a name whose changes do not all apply is left out); no ``two``.

Each is checked against a float64 product on a NaN-poisoned C, then timed with tiledsl.timing.time_gpu (CUDA events,
warm-up, L2 flushed, median of 15), cuBLAS (``cupy.matmul``) timed right before and right after and averaged. The
choice it informs is ``tiledsl.gemm.family.gemv_schedule`` (and ``ROW_SWAP_MIN_ELEMENTS``).
"""

from __future__ import annotations

import argparse
import itertools
from dataclasses import replace

from beside import (
    checked_beside_cublas,
    device_gemm_operands,
    gemm_as_rows,
    gemm_op,
    gpu_name,
    llm_weights,
    measure_each,
    write_results,
)
from gpu_check import gpu_or_exit

import tiledsl
from tiledsl.gemm.family import GEMV_ONE_LAUNCH_MAX_BYTES

ROWS = [(512, 16, 500000), (1024, 8, 500000), (7680, 4, 2560), (3072, 1, 1024), (6144, 1, 2048), (7680, 1, 2560),
        (8448, 1, 2816), (4608, 1, 1536), (512, 1, 512), (128, 1, 1024), (128, 1, 1408), (64, 1, 1216),
        (512, 1, 500000), (1024, 1, 512), (3072, 1, 128), (4224, 1, 128)]


def shapes() -> list[tuple[int, int, int, str, bool]]:
    """(M, N, K, layout, as rows) of the sweep."""
    out = []
    for n, k in llm_weights():
        out += [(m, n, k, "NN", False) for m in (1, 4, 16)] + [(1, n, k, "NT", False)]
    return out + [(m, n, k, "TT", True) for m, n, k in ROWS]


COLUMN_B_ROWS = [(m, n, k) for m in (2, 4, 8, 16) for n, k in ((4096, 4096), (4096, 14336), (14336, 4096))]
"""``--family colb``: torch's Linear layout (W [N, K], a column-major B) with 2–16 rows, where ``schedule=None`` runs
the tiled kernels (``GEMV_MAX_M``: one row of a column-major B)."""

SMEM_A_ROWS = (4, 8, 16)
"""``--family smem_a``: rows of x @ W (every LLM (N, K) with N a multiple of 4)."""

COLB_SMEM_A_ROWS = (8, 12, 16)
"""``--family colb_smem_a``: rows of x @ W.T (every LLM (N, K) with K a multiple of 4)."""

FEW_ROWS = (8, 12, 16)
"""``--family few_rows``: rows of x @ W (every LLM (N, K) with N a multiple of 4, where schedule=None stages A) and of
x @ W.T (every LLM (N, K))."""

COLB_LANES = ((8, 4, 2, 128, 1), (8, 2, 2, 128, 1), (8, 2, 1, 128, 3), (8, 4, 1, 128, 3), (8, 4, 1, 256, 2),
              (16, 4, 2, 128, 1), (4, 4, 2, 128, 1))
"""``--family colb_lanes``: (``k_lanes``, ``rn``, ``unroll``, ``bn``, ``min_blocks``) of x @ W.T's kernel with A in
registers and its lanes in groups along K (``gemv_lanes_column_b``) over 8, 12 and 16 rows (:data:`FEW_ROWS`) of every
LLM (N, K) with K a multiple of 4; ptxas (sm_90, NVRTC 12.9) at sixteen rows: 252, 254, 168, 168, 128, 252 and 252
registers, no spills."""

MMA_3XTF32 = ((16, 2), (32, 2), (32, 4), (64, 2), (32, 1))
"""``--family mma3x``: (``rn`` columns per warp, ``unroll`` k16 steps in flight) of the tensor-core GEMV kernel
(``precision="3xtf32"``, ``kernel="gemv"``, ``mma="mma_sync"``, 128 threads, K slices filling whole waves as
``gemv_mma_schedule`` makes them) over 4, 8, 12 and 16 rows of x @ W.T and x @ W (a row-major B takes columns per warp
in groups of 32: 16 is left out there), every LLM (N, K) with K and N multiples of 4, beside ``schedule=None`` exact
(IEEE) and ``schedule=None`` with ``precision="3xtf32"`` (9-16 rows: the tensor-core kernel at 32 columns per warp,
unroll 2), and that form with its K slices summed in the kernel (``split_k_fused``: one launch) where it splits K.
ptxas (sm_90, NVRTC 12.9, 16×22016×4096 x @ W.T, ``min_blocks`` 1): 77, 118, 140, 202 and 98 registers, no spills."""
MMA_ROWS = (4, 8, 12, 16)

DMMA_FORMS = ((16, 4, False), (16, 2, True), (16, 4, True), (32, 2, False), (32, 2, True), (32, 4, False),
              (64, 1, True), (64, 2, False), (64, 2, True))
"""``--family dmma``: (``rn`` columns per warp, ``unroll`` k16 steps in flight, ``ring``: the ring of steps,
``fragment_prefetch``) of the GEMV kernel on the FP64 tensor cores (``mma="dmma"``, precision "ieee", 128 threads, K
slices filling whole waves as ``gemv_dmma_schedule`` makes them) over :data:`MMA_ROWS` rows (or ``--rows``) of x @ W.T
and x @ W (16 columns per warp left out with a row-major B), every LLM (N, K) with K and N multiples of 4, beside
``schedule=None``, the pick (``GEMV_DMMA``) with its K slices summed in the kernel (``split_k_fused``) where it
splits K, and where ``schedule=None`` is the FP64 kernel (``gemv_dmma_default``) the FMA GEMV pick it replaced
(``fma``). ptxas (sm_90, NVRTC 12.9, 16×22016×4096 x @ W.T / x @ W, ``min_blocks`` 1,
without the ring): 130, 148 / 142, 172 / 214, 225 / 214 and 188 / 224 registers for 16×4, 32×2, 32×4 and 64×2, no
spills (and 32×8)."""

GROUPS_ALIGNED = [(m, n, k) for m in (1, 4, 16) for n, k in ((768, 768), (4096, 4096), (14336, 4096))]
"""``--family groups``: products with N a multiple of 4 (B read 4 wide), beside the odd-N ones."""

LAUNCH_BOUND_BYTES = GEMV_ONE_LAUNCH_MAX_BYTES
"""``--family launch`` measures the products whose A, B and C (float32) fit in this many bytes (16 MiB; the rule it
informs reads the same constant): at HBM speed they take under 4 µs, about what a launch costs, so a second launch
(the split-K kernel) is most of their time."""


def variants(base, op, target, family: str) -> dict:
    """name -> GEMV schedule (module docstring); ``family`` "fused" (the split-K summed in the kernel), "two"
    (the split-K kernel, at 1, 2, 4 and 8 blocks per SM, with all or a quarter of the threads per block), "depth"
    (the split-K kernel with K slices at least 64, 32, 16 or 8 deep) or "launch" (one launch: the slices, if more
    than one, summed in the kernel, at least 64, 32 or 16 deep). Beside them "two" is the pick with the split-K
    kernel."""
    from tiledsl.gemm.family import gemv_split

    if family in ("mma3x", "dmma"):  # the tensor-core GEMV kernels (3xTF32, FP64) at several widths and depths
        from tiledsl.gemm.family import (
            builtin_schedule,
            gemv_dmma_schedule,
            gemv_dmma_vec,
            gemv_mma_form,
            gemv_mma_shape,
            gemv_schedule,
        )

        label, mma, forms = (("3xtf32", "mma_sync", tuple((rn, u, False) for rn, u in MMA_3XTF32)) if family == "mma3x"
                             else ("dmma", "dmma", DMMA_FORMS))
        op_tc = replace(op, precision="3xtf32") if family == "mma3x" else op
        vec = gemv_dmma_vec(op) if family == "dmma" else 4  # FP64 x @ W with an unaligned W: read 4 bytes at a time
        out = {}
        for rn, unroll, ring in forms:
            if op.layout_b == "row" and rn % 32:  # a row-major B's lanes read 4 adjacent columns for 4 fragments
                continue
            s = gemv_mma_form(op_tc, target, replace(gemv_mma_shape(128, rn, unroll, mma, ring), vec=vec))
            out[f"{label} rn{rn} u{unroll}{' ring' if ring else ''}"] = s
        pick = out.get("3xtf32 rn32 u2") if family == "mma3x" else gemv_dmma_schedule(op, target)  # the library's form
        if pick is not None and pick.split_k > 1:  # its slices summed in the kernel (one launch)
            ring = " ring" if pick.fragment_prefetch else ""
            out[f"{label} rn{pick.rn} u{pick.unroll}{ring} fused"] = replace(pick, split_k_fused=True)
        if family == "dmma" and builtin_schedule(op, target).mma == "dmma":  # schedule=None is the FP64 kernel
            out["fma"] = gemv_schedule(op, target)  # here: the FMA GEMV pick it replaced, timed beside it
        return out
    if family == "colb_lanes":  # x @ W.T's kernel with A in registers, its lanes in groups along K
        from tiledsl.gemm import default_schedule
        from tiledsl.gemm.family import gemv_lanes_column_b

        pick = default_schedule(op, target)  # 12 rows per block where schedule=None takes them (9-12 rows)
        base = replace(base, bm=pick.bm) if pick.kernel == "gemv" else base
        out = {}
        for k_lanes, rn, unroll, bn, min_blocks in COLB_LANES:
            s = gemv_lanes_column_b(op, base, target, k_lanes, rn, unroll, bn, min_blocks)
            if s is not None:
                cap = f" cap {min(255, 65536 // (bn * min_blocks)) // 8 * 8}" if min_blocks > 1 else ""
                out[f"lanes{k_lanes} rn{rn} u{unroll}{f' bn{bn}' if bn != 128 else ''}{cap}"] = s
        return out
    if family == "few_rows":  # schedule=None's pick: a spare slot in staged A's ring, 12 rows, registers capped
        from gemv_hbm import variant_schedule

        out = {name: variant_schedule(op, target, flags) for name, flags in (
            ("spare slot", ("spare",)), ("12 rows", ("twelve",)), ("12 rows spare slot", ("twelve", "spare")),
            ("cap 168", ("cap168",)), ("12 rows cap 168", ("twelve", "cap168")), ("ring", ("ring",)),
            ("12 rows ring", ("twelve", "ring")))}
        out = {name: s for name, s in out.items() if s is not None}
        if "cap 168" in out:  # and at 128 registers (four blocks of 128 threads per SM) with one step in flight
            out["u1 cap 128"] = replace(out["cap 168"], unroll=1, min_blocks=4)
        if out.get("ring") is not None and out["ring"].spare_slot:  # four columns per group of lanes
            # 128 threads (three or four blocks per SM; min_blocks 0: 512 threads per SM), half the ring's columns
            out["ring rn4 u2 cap 168"] = replace(out["ring"], bn=128, rn=4, unroll=2, min_blocks=3)
            out["ring rn4 u1"] = replace(out["ring"], bn=128, rn=4, unroll=1, min_blocks=0)
            out["ring bn128"] = replace(out["ring"], bn=128, min_blocks=0)  # 32 columns: twice A's staged bytes
        # a name whose flags do not all apply is the same schedule as a shorter one's: keep each schedule once
        return {name: s for i, (name, s) in enumerate(out.items()) if s not in list(out.values())[:i]}
    out = {"two": replace(base, split_k_fused=False)}
    if family == "waves":  # A in registers: the base pick's slices (four blocks per SM) against whole waves
        from tiledsl.gemm.family import gemv_register_waves

        whole = (gemv_register_waves(op, base, target) or base).split_k
        return {**out, "whole waves u16": replace(base, unroll=16, split_k=whole, split_k_fused=False),
                "half the slices": replace(base, split_k=max(1, base.split_k // 2), split_k_fused=False)}
    if family == "smem_a":  # A staged in shared memory: threads, unroll, blocks per SM, deepest slice
        for bn, unroll, per_sm, deepest in ((128, 8, 4, 256), (128, 4, 4, 256), (256, 8, 4, 256), (128, 8, 8, 256),
                                            (128, 8, 4, 128)):
            s = replace(base, bn=bn, unroll=unroll, smem_a=True, min_blocks=0, split_k=1, split_k_fused=False)
            split = max(gemv_split(op, s, target, per_sm, min_depth=32), -(-op.k // deepest))
            out[f"smem_a bn{bn} u{unroll} {per_sm}/SM d{deepest}"] = replace(s, split_k=split)
        return out
    if family == "smem_a_depth":  # the pick's rule (whole waves) under deeper caps on the slice of A
        from tiledsl.gemm.family import gemv_whole_waves

        for bn, deepest in itertools.product((128, 64, 32), (256, 512, 768)):
            s = replace(base, bn=bn, smem_a=True, unroll=8, min_blocks=0, split_k=1, split_k_fused=False)
            pick, lo = gemv_split(op, s, target, min_depth=32), -(-op.k // deepest)
            out[f"smem_a bn{bn} waves d{deepest}"] = replace(
                s, split_k=gemv_whole_waves(op, s, target, lo, max(lo, pick)))
        return out
    if family == "colb_smem_a":  # column-major B, A staged: columns per warp, threads, unroll, blocks per SM, depth
        for rn, bn, unroll, per_sm, deepest in ((4, 128, 1, 4, 512), (4, 128, 2, 3, 512), (4, 128, 2, 2, 512),
                                                (4, 128, 4, 2, 512), (2, 128, 2, 4, 512), (2, 128, 4, 3, 512),
                                                (4, 256, 2, 1, 512), (4, 128, 2, 3, 256), (4, 128, 2, 3, 768)):
            s = replace(base, rn=rn, bn=bn, unroll=unroll, smem_a=True, min_blocks=per_sm, split_k=1,
                        split_k_fused=False)
            split = max(gemv_split(op, s, target), -(-op.k // deepest))
            out[f"smem_a rn{rn} bn{bn} u{unroll} {per_sm}/SM d{deepest}"] = replace(s, split_k=split)
        return out
    if family == "colb":  # a warp per rn columns, 128 or 256 threads, unroll 1/2/4, K slices summed either way
        for rn, bn, unroll in itertools.product((1, 2, 4), (128, 256), (1, 2, 4)):
            if base.bm * rn > 64:
                continue
            s = replace(base, rn=rn, bn=bn, unroll=unroll, split_k=1, split_k_fused=False)
            split = gemv_split(op, s, target)
            for fused in (False, True) if split > 1 else (False,):
                out[f"rn{rn} bn{bn} u{unroll}{' fused' if fused else ''}"] = replace(s, split_k=split,
                                                                                   split_k_fused=fused)
        return out
    if family == "groups":  # groups of columns per thread at B's load width, a few unrolls
        vec = min(base.vec, op.align_b)
        for groups in (1, 2, 4, 8):
            for unroll in sorted({base.unroll, 2, 1}):
                if base.bm * groups * vec > 64 or (groups, unroll) == (1, base.unroll):
                    continue
                s = replace(base, vec=vec, col_groups=groups, unroll=unroll, split_k=1, split_k_fused=False)
                split = gemv_split(op, s, target)
                out[f"groups {groups} u{unroll}"] = replace(s, split_k=split,
                                                            split_k_fused=base.split_k_fused and split > 1)
        return out
    if family == "depth":  # every depth named, 64 included (the pick's since GEMV_MIN_DEPTH is 32 for 16 rows)
        for div in (1, 4):
            if base.bn // div < 32:
                continue
            for depth in (64, 32, 16, 8):
                s = replace(base, bn=base.bn // div)
                out[f"two bn/{div} depth{depth}"] = replace(s, split_k=gemv_split(op, s, target, min_depth=depth))
        return out
    if family == "launch":  # one launch: the slices summed in the kernel, at least 64, 32 or 16 deep
        for div in (1, 4):
            if base.bn // div < 32:
                continue
            for depth in (64, 32, 16):
                s = replace(base, bn=base.bn // div)
                split = gemv_split(op, s, target, min_depth=depth)
                out[f"one launch bn/{div} depth{depth}"] = replace(s, split_k=split, split_k_fused=split > 1)
        return out
    if family == "two":  # slices at least 64 deep, as measured before GEMV_MIN_DEPTH (gemv_split_h200.json)
        for div in (1, 4):
            if base.bn // div < 32:
                continue
            for per_sm in (1, 2, 4, 8):
                s = replace(base, bn=base.bn // div)
                out[f"two bn/{div} {per_sm}/SM"] = replace(s, split_k=gemv_split(op, s, target, per_sm, 64))
        return out
    if op.layout_b == "col" and base.bn < 256:  # the pick before GEMV_FUSED_COLUMN_B: 8 warps, the split-K kernel
        s = replace(base, bn=256, split_k=1, split_k_fused=False)
        out["two bn=256"] = replace(s, split_k=gemv_split(op, s, target))
    if base.split_k > 1:
        out["fused"] = replace(base, split_k_fused=True)
    if base.split_k > 3:
        out["fused split/2"] = replace(base, split_k=base.split_k // 2, split_k_fused=True)
    if 1 < base.split_k and 2 * base.split_k <= min(1024, op.k // 16):
        out["fused split*2"] = replace(base, split_k=2 * base.split_k, split_k_fused=True)
    for div in (2, 4):
        if base.bn // div >= 32:
            s = replace(base, bn=base.bn // div)
            split = gemv_split(op, s, target)
            out[f"fused bn/{div}"] = replace(s, split_k=split, split_k_fused=split > 1)
    return out


def measure(m: int, n: int, k: int, layout: str, as_rows: bool, target, family: str) -> list[dict]:
    """One row per variant for one product (module docstring)."""
    from tiledsl.gemm.family import gemv_base_schedule, rows_op

    a, b, ref, c = device_gemm_operands(m, n, k, layout)
    op = gemm_op(m, n, k, layout)
    run_op = rows_op(op) if as_rows else op
    base = gemv_base_schedule(run_op, target)  # the variants start from the pick before the one-launch rule
    calls = {"schedule=None": lambda: tiledsl.gemm(a, b, c)}
    precision = "3xtf32" if family == "mma3x" else "ieee"  # the variants' (schedule=None stays exact)
    if family == "mma3x":
        calls["3xtf32 schedule=None"] = lambda: tiledsl.gemm(a, b, c, precision="3xtf32")
    for name, s in variants(base, run_op, target, family).items():
        if as_rows:
            calls[name] = (lambda s=s: gemm_as_rows(a, b, c, s), s)
        else:
            calls[name] = (lambda s=s: tiledsl.gemm(a, b, c, schedule=s, precision=precision), s)
    rows = []
    for name, entry in calls.items():
        call, s = entry if isinstance(entry, tuple) else (entry, None)
        err, ms, cublas_ms = checked_beside_cublas(call, a, b, c, ref, k, f"{m}x{n}x{k} {layout} {name}")
        rows.append(dict(m=m, n=n, k=k, layout=layout, swap=as_rows, variant=name,
                         schedule=None if s is None else s.to_dict(), ms=ms, cublas_ms=cublas_ms,
                         ratio=cublas_ms / ms, gbps=op.compulsory_bytes / ms / 1e6, err=err))
    print(f"{m:5d} {n:6d} {k:6d} {layout} sk{base.split_k:<3d} bn{base.bn:<3d} cuBLAS {rows[0]['cublas_ms'] * 1e3:7.1f} us "
          + "  ".join(f"{r['variant']} {r['ratio']:.2f}" for r in rows), flush=True)
    return rows


def main() -> int:
    import cupy as cp

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/gemv_fused_h200.json")
    ap.add_argument("--quick", action="store_true", help="every fourth LLM product and the DeepBench rows")
    ap.add_argument("--layouts", nargs="+", choices=("NN", "NT", "TT"), help="only these products (default: all)")
    ap.add_argument("--rows", nargs="+", type=int, choices=MMA_ROWS,
                    help="mma3x and dmma: only these row counts (default: all of MMA_ROWS)")
    ap.add_argument("--family", choices=("fused", "two", "depth", "launch", "groups", "colb", "colb_smem_a", "smem_a",
                                                 "smem_a_depth", "waves", "few_rows", "colb_lanes", "mma3x", "dmma"),
                    default="fused",
                    help="fused: the split-K summed in the kernel against the split-K kernel; two: the split-K "
                         "kernel at several slice counts and block widths (row-major x and W only); depth: the "
                         "split-K kernel with K slices as shallow as 32, 16 or 8 (row-major x and W only); launch: "
                         f"products of at most {LAUNCH_BOUND_BYTES >> 20} MiB, one launch (the slices summed in the "
                         "kernel) at depths 64, 32, 16 against the split-K kernel; groups: groups of columns per "
                         "thread (col_groups) on the odd-N products and a few aligned ones; colb: the GEMV kernel "
                         "on 2-16 rows times a column-major B (torch's Linear), beside the tiled pick; smem_a: A "
                         "staged in shared memory (smem_a) against A in registers, 4, 8 and 16 rows of x @ W; "
                         "smem_a_depth: smem_a's pick (whole waves) at 128, 64 or 32 threads with slices of A at "
                         "most 256, 512 or 768 deep; colb_smem_a: 8, 12 and 16 rows times a column-major B (torch's "
                         "Linear) with A staged in shared memory against the pick; waves: 1, 2 and 4 rows of x @ W "
                         "where gemv_register_waves changes the K slices: the base pick (slices for four blocks per "
                         "SM), whole waves (schedule=None), the same at unroll 16, and half the slices; few_rows: "
                         "8, 12 and 16 rows of x @ W and x @ W.T, schedule=None's pick with a spare slot in staged "
                         "A's ring (spare_slot), with 12 rows per block, and (x @ W.T, A in registers) with its "
                         "registers capped at 168 or 128 (min_blocks 3, or 4 at unroll 1); colb_lanes: 8, 12 and 16 "
                         "rows of x @ W.T on the kernel with A in registers and its lanes in groups along K "
                         "(COLB_LANES); mma3x: 4, 8, 12 and 16 rows of x @ W.T and x @ W on the tensor-core GEMV kernel "
                         "(precision='3xtf32', MMA_3XTF32) beside schedule=None exact and with 3xtf32; dmma: the same "
                         "products on the FP64 tensor cores (mma='dmma', DMMA_FORMS) beside schedule=None")
    args = ap.parse_args()
    gpu_or_exit("benchmarks/gemv_fused.py")
    target = tiledsl.Target.current()
    todo = shapes()
    if args.layouts:
        todo = [t for t in todo if t[3] in args.layouts]
    if args.family in ("two", "depth"):
        todo = [t for t in todo if t[3] != "NT"]
    if args.family == "groups":
        todo = [(m, 50257, 768, "NN", False) for m in (1, 4, 8, 16)] + [(*p, "NN", False) for p in GROUPS_ALIGNED]
    if args.family == "colb":
        todo = [(*p, "NT", False) for p in COLUMN_B_ROWS]
    if args.family == "colb_smem_a":  # x @ W.T with K a multiple of 4 (B and A read 4 wide along K)
        todo = [(m, n, k, "NT", False) for m in COLB_SMEM_A_ROWS for n, k in llm_weights() if k % 4 == 0]
    if args.family in ("smem_a", "smem_a_depth"):  # x @ W with an aligned N (B read 4 wide)
        rows = SMEM_A_ROWS if args.family == "smem_a" else (8, 16)  # smem_a_depth: the rows that stage A
        todo = [(m, n, k, "NN", False) for m in rows for n, k in llm_weights() if n % 4 == 0]
    if args.family == "waves":  # where the whole-waves rule changes the base pick's slices
        from tiledsl.gemm.family import gemv_base_schedule, gemv_register_waves

        todo = [(m, n, k, "NN", False) for m in (1, 2, 4) for n, k in llm_weights()
                if gemv_register_waves(gemm_op(m, n, k, "NN"), gemv_base_schedule(gemm_op(m, n, k, "NN"), target),
                                       target) is not None]
    if args.family == "colb_lanes":  # x @ W.T with K a multiple of 4 (B and A read 4 wide along K)
        todo = [(m, n, k, "NT", False) for m in FEW_ROWS for n, k in llm_weights() if k % 4 == 0]
    if args.family in ("mma3x", "dmma"):  # K (and for x @ W N) a multiple of 4: A and B read 4 wide
        todo = [(m, n, k, layout, False) for layout in ("NT", "NN") for m in args.rows or MMA_ROWS for n, k in llm_weights()
                if k % 4 == 0 and (layout == "NT" or n % 4 == 0) and (not args.layouts or layout in args.layouts)]
    if args.family == "few_rows":  # x @ W with A staged (N a multiple of 4), and x @ W.T
        todo = [(m, n, k, layout, False) for layout in ("NN", "NT") for m in FEW_ROWS for n, k in llm_weights()
                if layout == "NT" or n % 4 == 0]
    if args.family == "launch":  # where a launch is a large share of the time: A, B and C of a few MiB
        todo = [t for t in todo if 4 * (t[0] * t[2] + t[2] * t[1] + t[0] * t[1]) <= LAUNCH_BOUND_BYTES]
    if args.quick:
        todo = [t for i, t in enumerate(todo) if t[4] or i % 4 == 0]
    rows = measure_each([(*shape, target, args.family) for shape in todo], measure)
    write_results(args.out, gpu_name(), rows, cp.__version__)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

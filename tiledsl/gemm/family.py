"""The GEMM family record: op, schedule, rule table, plan, emitter and the default schedule."""

from __future__ import annotations

from dataclasses import dataclass, replace

from .. import dtypes, registry, tma
from ..errors import ScheduleError
from ..family import Family
from ..occupancy import Waves, occupancy, waves
from ..planning import register_cap
from ..spec import refuse_empty
from ..target import Target
from .emit import emit_gemm, emit_splitk_reduce
from .kernel_plan import grid, plan_gemm, tile_count, uses_tma
from .op import GemmOp
from .schedule import GEMM_RULES, GemmSchedule, gemv_slice_depth, gemv_smem_a_bytes


def default_schedule(op: GemmOp, target: Target) -> GemmSchedule:
    """A sensible schedule for the shape, chosen among the shipped presets and split-K factors.

    float16/bfloat16 on sm_80+ choose among the tensor-core presets (:data:`TC_DEFAULT_CANDIDATES`,
    ``mma="mma_sync"``); float32 among the FMA presets (:data:`DEFAULT_CANDIDATES`, and with a column-major A and a
    row-major B :data:`COL_ROW_FP32_CANDIDATES`, with a row-major A and a column-major B
    :data:`ROW_COL_FP32_CANDIDATES`).

    Each candidate (preset in :data:`DEFAULT_CANDIDATES` × split_k in 1, 2, 4, …, 32) gets a quick
    roofline estimate: the larger of its compute time — waves of
    blocks (⌈blocks / (SMs · 2)⌉) times one block's 2·bm·bn·kc FLOP at its share of the SM's FP32 rate,
    scaled by the tile's measured efficiency — and its memory time — the A and B tiles every block
    reads, (bm + bn)·kc elements, at twice the HBM rate (L2 serves the re-reads) — plus, for
    split-K, the workspace written and read back and a second launch. The smallest estimate wins. No split-K where
    one slice per tile already fills :data:`SPLIT_K_MAX_WAVES` waves.

    A schedule tuned for exactly this op on this device (``python -m search.tune … --export``, stored
    in the user store or shipped under ``schedules/gemm/``) is used first, after it validates; see
    :func:`tiledsl.registry.lookup_explain` for why a stored record was not used. A ``precision="3xtf32"`` product the
    tensor-core GEMV kernel does not take (:func:`gemv_mma_schedule`) gets the IEEE product's schedule, its records
    included (the exact kernels compute it).
    """
    refuse_empty(op, "choose a schedule for")
    effective = effective_op(op, target)
    if effective is not op:
        return default_schedule(effective, target)
    tuned = registry.lookup(GEMM, op, target)
    return tuned if tuned is not None else builtin_schedule(op, target)


def builtin_schedule(op: GemmOp, target: Target) -> GemmSchedule:
    """:func:`default_schedule` without the tuned records: the tensor-core GEMV kernel for 9-16 rows with
    ``precision="3xtf32"`` (:func:`gemv_mma_schedule`), the GEMV kernel for a few rows, a shape-class rule
    (tall-thin, one-row, short-wide, sub-wave) where one applies, else the best preset × split-K factor by the estimate described
    there, amended by the wave-tail or the misaligned-B rule where one applies (:func:`builtin_choice` also says
    which)."""
    return builtin_choice(op, target)[0]


def builtin_choice(op: GemmOp, target: Target) -> tuple[GemmSchedule, str]:
    """(:func:`builtin_schedule`, which rule chose it and why, for ``search.tune --lookup``)."""
    refuse_empty(op, "choose a schedule for")
    if op.precision == "3xtf32":
        tc = gemv_mma_schedule(op, target)
        if tc is not None:
            return tc, (f"the GEMV-style kernel on the tensor cores (gemv_mma_schedule): precision='3xtf32', M = {op.m} "
                        f"in {GEMV_MMA_ROWS[0]}..{GEMV_MMA_ROWS[1]} rows of x @ W{'.T' if op.layout_b == 'col' else ''}, {tc.rn} columns per warp, unroll {tc.unroll}, "
                        f"{tc.split_k} K slices")
        exact, why = builtin_choice(replace(op, precision="ieee"), target)
        return exact, (f"{why}; precision='3xtf32' runs on the tensor cores only for x @ W and x @ W.T with "
                       f"{GEMV_MMA_ROWS[0]}..{GEMV_MMA_ROWS[1]} rows (x row-major), 16-byte aligned, on sm_80 or newer "
                       f"(gemv_mma_schedule: {gemv_mma_refusal(op, target)}): this product is computed exactly, on the "
                       + ("FP64 tensor cores" if exact.mma == "dmma" else "FMA units"))
    if op.layout_c == "col":
        return gemv_schedule(op, target), ("the GEMV-style kernel: the only one that writes a column-major C (a "
                                           "few-column product run as rows, runs_as_row)")
    if runs_gemv(op):
        dmma = gemv_dmma_default(op, target)
        if dmma is None:
            return gemv_choice(op, target)
        extent = GEMV_DMMA_DEFAULT[op.layout_b]
        ring = " through its ring of steps" if dmma.fragment_prefetch else ""
        return dmma, (f"the GEMV-style kernel on the FP64 tensor cores (gemv_dmma_default): IEEE float32, M = {op.m} in "
                      f"{extent.min_rows}..{extent.max_rows} rows of x @ W{'.T' if op.layout_b == 'col' else ''}"
                      + (f", B of at least {extent.min_b_bytes >> 20} MiB" if extent.min_b_bytes else "")
                      + f", on {target.name}: {dmma.rn} columns per warp, unroll {dmma.unroll}{ring}"
                      + (", B read 4 bytes at a time (its rows not 16-byte aligned)" if dmma.vec == 1 else "") + ", "
                      f"{dmma.split_k} K slices (inputs widened to float64 exactly, float64 sums)")
    tall = tall_thin_schedule(op, target)
    if tall is not None:
        return tall, (f"the tall-thin rule (tall_thin_schedule): float32, N = {op.n} in {TALL_THIN_MIN_N}..64, "
                      f"M = {op.m} ≥ {TALL_THIN_MIN_M}, K = {op.k} in {TALL_THIN_K[0]}..{TALL_THIN_K[1]}: "
                      f"{tall.bm}×{tall.bn} tiles, {tall.split_k} K slices")
    one_row = one_row_choice(op, target)
    if one_row is not None:
        return one_row
    return wide_or_generic_choice(op, target)


def gemv_choice(op: GemmOp, target: Target) -> tuple[GemmSchedule, str]:
    """(:func:`gemv_schedule`, the rules that shaped it and why, for ``search.tune --lookup``): the FMA GEMV kernel's
    pick for a few-row ``op`` (:func:`runs_gemv`), what :func:`builtin_choice` returns there unless
    :func:`gemv_dmma_default` takes the FP64 tensor cores."""
    s = gemv_schedule(op, target)
    one = (f"; one launch (gemv_one_launch): {s.split_k} K slices summed in the kernel, the product's A, B and C "
           f"within {GEMV_ONE_LAUNCH_MAX_BYTES >> 20} MiB" if s.split_k_fused and op.layout_b == "row" else "")
    if s.col_groups > 1:
        one += (f"; {s.col_groups} groups of single columns per thread at unroll {s.unroll} (gemv_column_groups): "
                f"B's rows allow only scalar loads (align_b 1)")
    if s.smem_a and op.layout_b == "row":
        one += (f"; A staged in shared memory (gemv_staged_a): {s.bm} rows per block, {s.split_k} K slices of "
                f"at most {GEMV_SMEM_A_MAX_DEPTH}, {s.unroll} loads of B in flight per thread"
                + (f", a spare slot in their ring (from {GEMV_SPARE_SLOT_MIN_ROWS} rows per block)"
                   if s.spare_slot else ""))
    elif s.smem_a:
        one += (f"; A staged in shared memory (gemv_staged_a_column_b): {s.bm} rows per block, {s.split_k} K "
                f"slices of at most {GEMV_COLUMN_B_STAGED[4]}, B of at most {GEMV_COLUMN_B_STAGED[5] >> 20} MiB "
                f"(N ≥ {GEMV_COLUMN_B_STAGED[6]}, K ≤ {GEMV_COLUMN_B_STAGED[7]}), "
                f"{s.rn} columns per warp")
    elif op.layout_b == "col" and s.bm > 1:
        one += f"; A in registers, not staged (gemv_column_b_unstaged): {gemv_column_b_unstaged(op, s)}"
        if s.k_lanes != 32:
            one += (f"; its lanes in groups of {s.k_lanes} along K, {s.rn} columns per group (gemv_lanes_split_k: "
                    f"the register pick split K), {s.split_k} K slices")
    if s.bm == 12 and gemv_twelve_rows_fit(op.m):
        one += f"; 12 rows per block for {op.m} rows (gemv_twelve_rows), not 16"
    base = gemv_base_schedule(op, target)
    if s == gemv_register_waves(op, base, target):
        one += (f"; K slices filling whole waves (gemv_register_waves): {s.split_k} instead of {base.split_k} "
                "(those were for four blocks per SM; A in registers leaves two)")
    return s, f"the GEMV-style kernel: M = {op.m} ≤ {gemv_max_rows(op)} rows (GEMV_MAX_M){one}"


def wide_or_generic_choice(op: GemmOp, target: Target) -> tuple[GemmSchedule, str]:
    """The end of :func:`builtin_choice` for a tiled float32 product outside the tall-thin and one-row rules: the
    short-wide or sub-wave rule where one applies, else the estimate over the presets × split-K, amended by the
    wave-tail or the misaligned-B rule (``benchmarks/gemm_skinny.py --set onerow`` times it as the pick the one-row
    rule replaced)."""
    wide = short_wide_choice(op, target)
    if wide is not None:
        return wide
    sub = sub_wave_schedule(op, target)
    if sub is not None:
        return sub, (f"the sub-wave rule (sub_wave_schedule): float32, M and N ≥ {SUB_WAVE_MIN_SIDE}, M ≤ "
                     f"{SUB_WAVE_TALL}·N, K ≥ {SUB_WAVE_MIN_K}, {tile_count(op, sub)} tiles of {sub.bm}×{sub.bn}: "
                     f"at least {SUB_WAVE_MIN_TILES}, fewer than the {target.sm_count} SMs: stream-K")
    chosen = _estimate_choice(op, target)
    tail = wave_tail_schedule(op, chosen, target)
    if tail is not None:
        return tail, (f"the estimate over the presets × split-K ({chosen.bm}×{chosen.bn}, {chosen.split_k} K slices), "
                      f"then the wave-tail rule (wave_tail_schedule): float32, M and N in {WAVE_TAIL_MIN_SIDE}.."
                      f"{WAVE_TAIL_MAX_SIDE}, K in {WAVE_TAIL_K[0]}..{WAVE_TAIL_K[1]}, 16-byte aligned: "
                      f"{tile_count(op, tail)} tiles of {tail.bm}×{tail.bn} with stream-K")
    odd = misaligned_row_b_schedule(op, chosen, target)
    if odd is not None:
        return odd, (f"the estimate over the presets × split-K ({chosen.bm}×{chosen.bn}, {chosen.split_k} K slices, "
                     f"{chosen.stages} stages), then the misaligned-B rule (misaligned_row_b_schedule): B's rows allow "
                     f"only scalar loads (align_b 1): {odd.split_k} K slice, {odd.stages} stages")
    return chosen, "the estimate over the presets × split-K (builtin_schedule)"


WAVE_TAIL_PRESET = "sgemm_256x128_16x8_stream_k"
"""The tile :func:`wave_tail_schedule` puts in place of the estimate's 128×128 pick."""
WAVE_TAIL_MIN_SIDE, WAVE_TAIL_MAX_SIDE, WAVE_TAIL_K = 1024, 11008, (768, 8192)
"""The class :func:`wave_tail_schedule` was measured on: M and N from 1024 to 11008 (M 1024–8448, N 1024–11008), K
from 768 (the shortest K of a 128×128 pick there; the estimate's 128×64 picks at K = 128 and 176 lost 5–7 % to the
same tile) to 8192. Larger products were not measured and keep the estimate's pick."""


def wave_tail_schedule(op: GemmOp, chosen: GemmSchedule, target: Target) -> GemmSchedule | None:
    """The 256×128×8 stream-K tile (:data:`WAVE_TAIL_PRESET`) in place of the estimate's ``chosen`` 128×128 tile
    (with or without split-K), for a float32 FMA product (IEEE) with M and N in :data:`WAVE_TAIL_MIN_SIDE` ..
    :data:`WAVE_TAIL_MAX_SIDE` and K in :data:`WAVE_TAIL_K` whose A, B and C allow 16-byte loads (``align_*`` 4:
    scalar loads were not measured with it; a row-major B of odd N has its own rule,
    :func:`misaligned_row_b_schedule`); None elsewhere.

    The estimate takes 128×128 tiles (two blocks per SM) where the 256×128 grid's last wave would leave SMs idle, and
    splits K to fill a short grid; stream-K on the 256×128 tile removes that tail instead, with no workspace pass and
    the bigger tile's reuse. Measured on the H200 beside cuBLAS, the estimate's pick against this tile in one run
    (``python benchmarks/gemm_skinny.py --set wavetail``, benchmarks/results/gemm_wavetail_h200.json, 2026-12-03):

    - the 27 data-set products where the estimate picks 128×128 (NN, NT, TT; in-sample, the rule was read off
      ``--set bigtile`` the day before): geomean 0.926 → 1.012× cuBLAS, every one ahead (1 % to 16.5 %);
    - 48 products off the data sets, 12 per layout drawn from a grid of M, N in 1024..8192 and K in 768..8192:
      NN 0.938 → 1.022×, NT 0.931 → 1.056×, TT 0.917 → 0.981× (out-of-sample), TN 0.879 → 0.937× (TN was outside
      the rule when it was drawn and was admitted on these 12; its gain was measured with the tile named, not as
      ``schedule=None``); the worst change −0.21 % (1536×8192×768 TT), the best +24 % (1024×2560×1024 NT).

    Where the estimate picks 256×128 it stays: there the stream-K tile was behind on 41 of 70 products (geomean
    0.945 → 0.938×, most of all with many waves; ``--set bigtile``, benchmarks/results/gemm_bigtile_h200.json,
    2026-12-02)."""
    if not (op.dtype == "float32" and op.precision == "ieee" and chosen.mma == "fma" and chosen.kernel == "tiled"
            and (chosen.bm, chosen.bn) == (128, 128)
            and WAVE_TAIL_MIN_SIDE <= min(op.m, op.n) and max(op.m, op.n) <= WAVE_TAIL_MAX_SIDE
            and WAVE_TAIL_K[0] <= op.k <= WAVE_TAIL_K[1] and min(op.align_a, op.align_b, op.align_c) == 4):
        return None
    base = registry.presets(GEMM).get(WAVE_TAIL_PRESET)
    if base is None or not _applies(base, op, target):  # a shipped preset that failed its check, or the op's rules
        return None
    return base


MISALIGNED_ROW_B_STAGES = 4
"""cp.async stages for a float32 FMA product whose row-major B allows only scalar loads (align_b 1) and whose A is
column-major (TN): :func:`misaligned_row_b_schedule`. Measured on the H200 (2026-12-02, beside cuBLAS in one run;
``benchmarks/results/odd_n_diag_h200_2026-12-02/``): without split-K the odd-N products gained or tied
(2048×7133×2048 TN 0.73 → 0.76×, 4096×7133×4096 TN 0.82 → 0.86×, 128×50257×768 NN 0.60 → 0.72×,
2048×7133×2048 NN 0.69 → 0.74×; 2560×7133×2560 TN 0.79 → 0.78×), and with a column-major A the four-stage cp.async
pipeline (LDGSTS.32 straight to shared memory, no register staging) gained again (0.80×, 0.91×; 1760×7133×1760 TN
0.74 → 0.86×). With a row-major A four stages lost (128×50257×768 NN: 0.72× in ``oddn.json``, 0.69× in
``stages.json``): stages stay 2 there. The scalar loads cost about 20 % beside the same kernel at N = 7136
(aligned); realigning them in registers (two aligned float4 loads and a select per element, or one and a warp
shuffle) measured 10–40 % slower still. As ``schedule=None`` (``python benchmarks/gemm_skinny.py --set
misaligned``, ``benchmarks/results/gemm_misaligned_h200.json``) the eight such products of the data sets went
0.60–0.84× → 0.71–0.91× cuBLAS, none slower."""


def misaligned_row_b_schedule(op: GemmOp, chosen: GemmSchedule, target: Target) -> GemmSchedule | None:
    """The estimate's ``chosen`` schedule with one K slice and, where A is column-major and the device has cp.async
    (sm_80+), :data:`MISALIGNED_ROW_B_STAGES` stages — for a float32 FMA product (IEEE) whose row-major B allows only
    scalar loads (``align_b`` 1: an odd N, ldb or base address) with at least two C tiles per SM unsplit. None where
    the rule does not apply or changes nothing.

    The products it changed when measured had 392 to 1290 tiles on 132 SMs; fewer tiles keep the estimate's split-K,
    which with a long K is what fills the SMs. ``align_b`` 2 (N ≡ 2 mod 4: 8-byte loads) was not measured and is
    left to the estimate.
    """
    if not (op.dtype == "float32" and op.precision == "ieee" and chosen.mma == "fma" and chosen.kernel == "tiled"
            and op.layout_b == "row" and op.align_b == 1 and tile_count(op, chosen) >= 2 * target.sm_count):
        return None
    s = replace(chosen, split_k=1)
    if op.layout_a == "col" and target.cc >= 80 and s.stages < MISALIGNED_ROW_B_STAGES:
        s = replace(s, stages=MISALIGNED_ROW_B_STAGES, fragment_prefetch=False)
    return s if s != chosen else None


def _estimate_choice(op: GemmOp, target: Target) -> GemmSchedule:
    """The preset × split-K factor with the smallest estimate (:func:`default_schedule` describes it)."""

    table = registry.presets(GEMM)
    itemsize = dtypes.get(op.dtype).itemsize
    tensor_cores = op.tensor_core_inputs and target.cc >= 80
    candidates = DEFAULT_CANDIDATES
    if tensor_cores:  # wgmma where the device and the operands allow it (its rules decide), else mma.sync
        candidates = {name: eff for name, eff in TC_DEFAULT_CANDIDATES.items()
                      if name in table and _applies(table[name], op, target)
                      and (tma.available() or not uses_tma(table[name]))}
        if not candidates:  # tf32 where no tf32 kernel applies: the exact FMA kernels
            tensor_cores, candidates = False, DEFAULT_CANDIDATES
    if not tensor_cores and op.dtype == "float32" and (op.layout_a, op.layout_b) == ("col", "row"):
        candidates = {**candidates, **COL_ROW_FP32_CANDIDATES}
    if not tensor_cores and op.dtype == "float32" and (op.layout_a, op.layout_b) == ("row", "col"):
        candidates = {**candidates, **ROW_COL_FP32_CANDIDATES}
    peak = target.tensor_core_ceiling(op.precision)[0] if tensor_cores else target.peak_fp32_flops
    sm_flops = peak / target.sm_count
    best, best_s = None, float("inf")
    for name, eff in candidates.items():
        base = table.get(name)
        if base is None:  # a shipped preset that failed its check (warned when the presets were read)
            continue
        for split in (1, 2, 4, 8, 16, 32):
            kc = _ceil_div(_ceil_div(op.k, split), base.bk) * base.bk  # K per slice, whole bk tiles
            if split > 1 and (kc * (split - 1) >= op.k or base.stream_k):
                break  # an empty K slice (or stream-K, which shares K iterations instead): no more splitting
            if split > 1 and tile_count(op, base) >= SPLIT_K_MAX_WAVES * target.sm_count * 2:
                break  # many waves already: the last one's idle SMs are a small share, the workspace is not
            cand = base if split == 1 else replace(base, split_k=split, persistent=False)  # one tile per K slice
            blocks = plan_gemm(op, cand).blocks  # tiles of C times K slices (a persistent grid is smaller)
            waves = -(-blocks // (target.sm_count * 2))
            if base.stream_k:  # no idle SMs in the last wave: measured ahead only with a partial last wave after
                sk = plan_gemm(op, cand, target).detail.stream_k  # two or more whole ones, and a long K
                if blocks < 2 * target.sm_count or not sk.sk_blocks or op.k < STREAM_K_MIN_K:
                    break
                waves = blocks / (target.sm_count * 2)
            per_block_rate = sm_flops / min(2, -(-blocks // target.sm_count)) * eff
            compute_s = waves * 2 * base.bm * base.bn * kc / per_block_rate
            memory_s = blocks * (base.bm + base.bn) * kc * itemsize / (2 * target.hbm_bytes_per_s)
            extra_s = 0.0 if split == 1 else (2 * split + 1) * op.m * op.n * 4 / target.hbm_bytes_per_s + 4e-6
            est = max(compute_s, memory_s) + extra_s
            if est < best_s:
                best, best_s = cand, est
    return best if best is not None else GemmSchedule()


TALL_THIN_PRESETS = {32: "tall_128x32_8x4", 64: "tall_128x64_8x4"}
"""Tall-thin float32 products (:func:`tall_thin_schedule`): the preset for N up to each width."""
TALL_THIN_ONE_WARP = "tall_64x16_8x4_one_warp"
"""The preset for N ≤ 16 with a column-major A (:func:`tall_thin_schedule`), always with
:data:`TALL_THIN_MAX_SPLIT` K slices."""
TALL_THIN_MIN_N, TALL_THIN_MIN_M, TALL_THIN_K = 16, 1024, (1024, 8192)
"""The class the rule was measured on (N 16-64, M 1760-8448, K 1024-4096), widened to round bounds; K = 512 is out
(1024×16×512 and 1024×32×512 lost 7-20 % to the generic pick)."""
TALL_THIN_MAX_SPLIT = 16
"""Most K slices the tall-thin rule takes (K ≥ 1024: 16 slices are still 64 deep, four bk = 16 tiles)."""


def tall_thin_schedule(op: GemmOp, target: Target) -> GemmSchedule | None:
    """The shape-class rule for tall-thin float32 products (IEEE, FMA units): N in 16..64, M ≥ 1024 and ≥ 16·N,
    K in 1024..8192 (DeepBench's 7680×32×2560 and kin); None for other ops.

    With N ≤ 16 and a column-major A (M contiguous), the one-warp 64×16×8 tile with four cp.async stages
    (:data:`TALL_THIN_ONE_WARP`) and 16 K slices. Otherwise the block tile is as narrow as N allows
    (:data:`TALL_THIN_PRESETS`: 128×32 for N ≤ 32, 128×64 up to 64), and K is split into the fewest of 1, 2, 4,
    … :data:`TALL_THIN_MAX_SPLIT` slices that give the grid two blocks per SM.

    Measured on the H200 on the data sets' 48 products of the class, in one run
    (``python benchmarks/gemm_skinny.py --set tallsplit``, benchmarks/results/gemm_tall_split_h200.json,
    2026-12-02; in-sample, the rule was read off that run): the earlier rule (at most 8 slices, no one-warp tile)
    0.947× cuBLAS geomean, lowest 0.80; this rule 1.075×, lowest 0.84. The first version (2026-12-01,
    ``--set tall``, benchmarks/results/gemm_tall_h200.json) took the generic estimate's 0.40-0.60× to 0.85-0.95×;
    docs/gemm.md has both tables.
    """
    if not (op.dtype == "float32" and op.precision == "ieee" and TALL_THIN_MIN_N <= op.n <= max(TALL_THIN_PRESETS)
            and op.m >= max(TALL_THIN_MIN_M, 16 * op.n) and TALL_THIN_K[0] <= op.k <= TALL_THIN_K[1]):
        return None
    one_warp = op.n <= 16 and op.layout_a == "col"
    name = TALL_THIN_ONE_WARP if one_warp else next(TALL_THIN_PRESETS[w] for w in sorted(TALL_THIN_PRESETS)
                                                      if op.n <= w)
    base = registry.presets(GEMM).get(name)
    if base is None:  # a shipped preset that failed its check (warned when the presets were read)
        return None
    if one_warp:
        return replace(base, split_k=TALL_THIN_MAX_SPLIT)
    tiles = tile_count(op, base)
    split = 1
    while split < TALL_THIN_MAX_SPLIT and tiles * split < 2 * target.sm_count:
        split *= 2
    return base if split == 1 else replace(base, split_k=split)


SHORT_WIDE_PRESET = "wide_64x128_4x8_stream_k"
"""Short and wide float32 products under one wave (:func:`short_wide_schedule`)."""
SHORT_WIDE_FITTED_PRESETS = ("wide_48x64_4x4_stream_k", "wide_48x128_4x8_stream_k")
"""The same for M in 33…48 (:data:`SHORT_WIDE_FITTED_M`): 48 rows in place of 64, so 35 rows use 73 % of the FMAs, not
55 %; 64 columns per tile below N = 2048, 128 from there (:data:`SHORT_WIDE_FITTED_N`)."""
SHORT_WIDE_FITTED_M, SHORT_WIDE_FITTED_N, SHORT_WIDE_FITTED_MIN_K = (33, 48), (700, 2048), 512
"""M of the fitted tiles; N from which they apply and from which the 128-column one does; the K from which the
128-column one does. Measured at M = 35 (``gemm_fit_bounds_h200_2026-12-03.json``): at N = 512 the estimate's pick
was faster at K ≥ 1024 (1.21 against 0.93× cuBLAS at K = 1024), from N = 700 the 48×64 tile at every K; 64 columns
were faster up to N = 2047, 128 from N = 2560; at K = 256 with N ≥ 2560 the estimate's pick beat the 48×128 tile by
3–12 %, at K = 1024 it ran at half its speed or less (0.49 against 1.01× at N = 4096). K = 512 was not measured: the
bound sits nearer the small loss than the large one."""
SHORT_WIDE_SPLIT_PRESETS = ("wide_16x64_4x2_split_k16", "wide_64x64_4x8_split_k16")
"""M in 33…48 with N below :data:`SHORT_WIDE_SPLIT_N`'s upper bound and K ≥ :data:`SHORT_WIDE_SPLIT_MIN_K`: 16 K slices
on 16×64 tiles (N below 1024) or 64×64 tiles (N from 1024), the data pass's winners for 35×700 and 35×1500 TT, in
place of the 48×64 stream-K tile."""
SHORT_WIDE_SPLIT_N, SHORT_WIDE_SPLIT_MIN_K = (1024, 1536), 256
"""N from which the 64×64 split-K tile takes over from the 16×64 one, and N from which the 48×64 stream-K tile runs
again; the least K (16 slices of one 16-deep step). Measured at M = 35 TT across K = 256…8192
(``python benchmarks/gemm_skinny.py --set fitsplit``, benchmarks/results/gemm_fit_split_h200_2026-12-03.json): at
N = 700 the 16×64 tile was fastest at every K (1.15–1.32× cuBLAS at K ≤ 2560 against 0.80–1.03× for stream-K); at
N = 1024 and 1500 the 64×64 tile beat stream-K at every K (0.89–1.24× against 0.67–1.05×) and the 16×64 one lost
at K ≥ 2048; at N = 2047 stream-K (0.97–0.99×) beat both split presets at every K (at most 0.92× for 16×64 and
0.70× for 64×64 with 16 slices; 64×64 with 8 slices 0.90–0.96× at K = 1024), though the 48×64 tile with 8 slices
ran 1.02× at K = 1024. The bounds sit between measured points: 700 | 1024 and 1500 | 2047."""
SHORT_WIDE_M, SHORT_WIDE_MIN_N = (17, 256), 1024
"""The class the rule was measured on (M 35 and 176, N 1500 and 8457), widened to round bounds."""


def short_wide_schedule(op: GemmOp, target: Target) -> GemmSchedule | None:
    """The shape-class rule for short and wide float32 products (IEEE, FMA units): M in 17..256 and not a multiple of
    64, N ≥ 1024, and fewer tiles than the device runs at once (two blocks per SM); None for other ops. M in 33..48
    has bounds of its own (below); its split-K branch (N below 1536, at most 48 tiles) skips the tile-count bound.
    :func:`short_wide_choice` also says which branch chose it. ``builtin_choice`` tries the one-row rule first
    (:func:`one_row_choice`: M 65…128, K ≥ 2048, from 8 tiles of 128×256), which takes that part of this class.

    These grids are smaller than one wave, so the 64×128×16 tile with stream-K (:data:`SHORT_WIDE_PRESET`) spreads
    their K iterations over every SM. Measured on the H200 against the generic estimate's picks (64×64 or 128×128
    tiles with split-K 4-32): on the 11 data-set products of the class, 0.46-0.78× → 0.83-1.01× cuBLAS
    (35×8457×2560 TT 0.54× → 0.97×, 35×8457×4096 TT 0.46× → 0.85×, 176×1500×1408 TT 0.64× → 0.83×). Left out, as
    measured in the same run: M = 128 (whole 64-row tiles; the generic pick was 11 % better to 11 % worse, shape by
    shape) and N = 700 (6 tiles; 8 % worse) (``python benchmarks/gemm_skinny.py --set wide`` and ``python
    benchmarks/gemm.py --workloads --m-range 17 256``; benchmarks/results/gemm_wide_h200.json and
    gemm_workloads_m17_256_h200.json, 2026-12-01).

    M in 33…48 (:data:`SHORT_WIDE_FITTED_M`) takes 16 K slices on 16×64 or 64×64 tiles for N from 700 to 1535 with
    K ≥ 256 (:data:`SHORT_WIDE_SPLIT_PRESETS`, :data:`SHORT_WIDE_SPLIT_N`: 35×700 and 35×1500 TT 0.80–0.89 →
    1.05–1.20× cuBLAS; geomean 0.87 → 1.10× over 20 measured points, ``python benchmarks/gemm_skinny.py --set
    fitsplit``, benchmarks/results/gemm_fit_split_h200_2026-12-03.json), otherwise tiles of 48 rows with stream-K
    (:data:`SHORT_WIDE_FITTED_PRESETS`; their B tiles split unevenly over 192 threads, the last round guarded):
    48×64×16 with 4×4 thread tiles for N from 700 to 2047 (from 1536, or with K < 256, since the split-K branch),
    48×128×16 with 4×8 from N = 2048 with K ≥ 512; elsewhere (N < 700, or N ≥ 2048 with K < 512) the generic estimate
    (:data:`SHORT_WIDE_FITTED_N`, :data:`SHORT_WIDE_FITTED_MIN_K`). Before the split-K branch, on the 12 data-set
    products with M = 35 (35×8457 TT and NT, 35×1500 and 35×700 TT): geomean 0.90 → 1.01× cuBLAS, lowest 0.73 → 0.79×;
    35×8457×2560 TT 0.98× → 1.12×, 35×8457×4096 NT 0.85× → 1.01×, 35×700×2560 TT 0.73× → 0.79×; off the data sets
    35×8457×2560 NN 0.72× → 0.86×, 33 to 48 × 8457 × 2560 TT 0.96-1.01× → 1.10-1.17× (``python
    benchmarks/gemm_skinny.py --set fitrows`` and ``--set fitbounds``, benchmarks/results/gemm_fit_rows_h200_2026-12-03
    .json, ``…_run3.json`` and gemm_fit_bounds_h200_2026-12-03.json).
    """
    choice = short_wide_choice(op, target)
    return None if choice is None else choice[0]


def short_wide_choice(op: GemmOp, target: Target) -> tuple[GemmSchedule, str] | None:
    """(:func:`short_wide_schedule`, the branch that chose it, for ``search.tune --lookup``), or None."""
    if not (op.dtype == "float32" and op.precision == "ieee" and SHORT_WIDE_M[0] <= op.m <= SHORT_WIDE_M[1]
            and op.m % 64):
        return None
    head = f"the short-wide rule (short_wide_schedule): float32, M = {op.m} in {SHORT_WIDE_M[0]}..{SHORT_WIDE_M[1]}"
    if SHORT_WIDE_FITTED_M[0] <= op.m <= SHORT_WIDE_FITTED_M[1]:
        low, wide = SHORT_WIDE_FITTED_N
        if op.n < low or (op.n >= wide and op.k < SHORT_WIDE_FITTED_MIN_K):
            return None
        why = f", rows fitted to M in {SHORT_WIDE_FITTED_M[0]}..{SHORT_WIDE_FITTED_M[1]}: N = {op.n}"
        split = op.n < SHORT_WIDE_SPLIT_N[1] and op.k >= SHORT_WIDE_SPLIT_MIN_K
        if split:
            name = SHORT_WIDE_SPLIT_PRESETS[op.n >= SHORT_WIDE_SPLIT_N[0]]
            span = ((low, SHORT_WIDE_SPLIT_N[0] - 1) if op.n < SHORT_WIDE_SPLIT_N[0]
                    else (SHORT_WIDE_SPLIT_N[0], SHORT_WIDE_SPLIT_N[1] - 1))
            why += f" in {span[0]}..{span[1]} and K = {op.k} ≥ {SHORT_WIDE_SPLIT_MIN_K}"
        elif op.n >= wide:
            name = SHORT_WIDE_FITTED_PRESETS[1]
            why += f" ≥ {wide} and K = {op.k} ≥ {SHORT_WIDE_FITTED_MIN_K}"
        else:
            name = SHORT_WIDE_FITTED_PRESETS[0]
            why += f" in {low}..{wide - 1}"
            if op.n < SHORT_WIDE_SPLIT_N[1]:
                why += f" (K = {op.k} < {SHORT_WIDE_SPLIT_MIN_K}: no split-K)"
    elif op.n >= SHORT_WIDE_MIN_N:
        name, why, split = SHORT_WIDE_PRESET, f", N = {op.n} ≥ {SHORT_WIDE_MIN_N}", False
    else:
        return None
    base = registry.presets(GEMM).get(name)
    if base is None:  # a shipped preset that failed its check (warned when the presets were read)
        return None
    if split:  # at most 48 tiles: split-K needs no bound on the grid
        return base, f"{head}{why}, {base.bm}×{base.bn} tiles with {base.split_k} K slices"
    if tile_count(op, base) >= 2 * target.sm_count:
        return None
    return base, f"{head}{why}, under one wave of {base.bm}×{base.bn} tiles with stream-K"


ONE_ROW_PRESETS = ("one_row_128x256_16x8_split_k", "one_row_128x256_16x8_stream_k")
"""The 128×256×16 tile of 16×8 thread tiles (the data pass's winner for five 128-token LLM products) with split-K (its
``split_k`` set by :func:`one_row_choice`) and with stream-K."""
ONE_ROW_M, ONE_ROW_MIN_K, ONE_ROW_MIN_TILES, ONE_ROW_MAX_SPLIT, ONE_ROW_FILL = (65, 128), 2048, 8, 16, 0.9
"""The rule's class and branches: M in 65…128 (one row of 128-row tiles), K ≥ 2048, at least 8 tiles of 128×256
(4 tiles of 128×1024×4096 with 16 slices ran 0.59× cuBLAS, the estimate's 128×128 split-K pick 0.89×). Split-K with
as many slices as fill one wave (⌊SMs / tiles⌋, 2…16) where tiles × slices reach 0.9 of the SMs (on a 132-SM H200:
8…18, 20…22, 24…26, 30…33, 40…44 and 60…66 tiles); stream-K otherwise, from :data:`ONE_ROW_MIN_STREAM_TILES`.
Measured at K = 3000…14336 (``benchmarks/gemm_skinny.py --set onerow``, H200, 2026-12-04): split-K beat stream-K at
16 tiles by 2–7 %, at 20 and 43 by 1–3 %, tied at 32 and lost at 24 by 4 %; where whole slices fill less (48 and 56
tiles: 96 and 112 blocks) stream-K ran 1.14–1.32× faster. Checked after the rule on 8 products it was not read off
(K = 2048, 2560, 3072 and 4096, M = 65, 72, 112 and 128, 9 to 64 tiles, every layout; run 2 of the same day,
gemm_one_row_h200_2026-12-04_run2.json): every one 1.08–1.22× faster than the previous rules' pick, geomean 0.93 →
1.04× cuBLAS."""
ONE_ROW_MIN_STREAM_TILES = 16
"""The fewest tiles the rule runs with stream-K. Below it, where whole slices do not fill the wave (only on devices
other than the 132-SM H200, where 8…18 tiles always fill), the later rules keep the product: on the H200 this tile
with stream-K lost to the earlier rules' picks at 8, 9 and 12 tiles (0.48, 1.21 and 0.76 against 0.77, 1.68 and
0.85× cuBLAS) and won from 16 (0.87 against 0.81×; both runs of ``--set onerow``)."""


def one_row_choice(op: GemmOp, target: Target) -> tuple[GemmSchedule, str] | None:
    """The one-row rule: a float32 product (IEEE, FMA units) of M in 65…128 rows (:data:`ONE_ROW_M`), K ≥ 2048 and
    16-byte aligned operands runs on one row of 128×256×16 tiles (16×8 thread tiles, 128×32 warp tiles, one block per
    SM, :data:`ONE_ROW_PRESETS`): with split-K where whole K slices fill one wave (:data:`ONE_ROW_FILL`), else with
    stream-K from :data:`ONE_ROW_MIN_STREAM_TILES` tiles; None elsewhere (fewer than :data:`ONE_ROW_MIN_TILES` tiles,
    or too few for stream-K: the later rules keep them). Returns the
    schedule and the reason ``search.tune --lookup`` prints.

    The 128-row products of the LLM sets (128 tokens × a 4096-wide model) left the earlier rules (the sub-wave rule's
    128×128×8 stream-K tile for M = 128, the short-wide rule's 64×128 one for M not a multiple of 64) at 0.69–0.95×
    cuBLAS; five of the data pass's 30-trial tunes of them chose this tile (three kept 128×128). Measured on the H200
    against the earlier rules' picks in one run (``python benchmarks/gemm_skinny.py --set onerow``,
    benchmarks/results/gemm_one_row_h200_2026-12-04.json, in-sample: the branches were read off that run): 19 products of M 80…128, N 2048…128256, K 3000…14336, NN, NT, TT
    and TN, geomean 0.85 → 0.96× cuBLAS, every one faster (1.04× to 1.32×): 128×4096×4096 NN 0.81 → 0.91×,
    128×22016×4096 NN 0.87 → 1.03×, 96×14336×4096 NN 0.82 → 1.00×, 120×11008×4096 NT 0.69 → 0.91×.
    """
    if not (op.dtype == "float32" and op.precision == "ieee" and ONE_ROW_M[0] <= op.m <= ONE_ROW_M[1]
            and op.k >= ONE_ROW_MIN_K and min(op.align_a, op.align_b, op.align_c) == 4):
        return None
    split_base, stream_base = (registry.presets(GEMM).get(name) for name in ONE_ROW_PRESETS)
    if split_base is None or stream_base is None:  # a shipped preset that failed its check (warned when read)
        return None
    tiles = tile_count(op, stream_base)
    if tiles < ONE_ROW_MIN_TILES:
        return None
    head = (f"the one-row rule (one_row_choice): float32, M = {op.m} in {ONE_ROW_M[0]}..{ONE_ROW_M[1]}, K = {op.k} ≥ "
            f"{ONE_ROW_MIN_K}, {tiles} tiles of 128×256")
    slices = min(ONE_ROW_MAX_SPLIT, target.sm_count // tiles)
    if slices >= 2 and tiles * slices >= ONE_ROW_FILL * target.sm_count:
        s = replace(split_base, split_k=slices)
        why = f"{head}: {slices} K slices fill one wave of the {target.sm_count} SMs ({tiles * slices} blocks)"
    elif tiles >= ONE_ROW_MIN_STREAM_TILES:
        s = stream_base
        why = (f"{head}: stream-K, " + (f"two K slices would overfill one wave of the {target.sm_count} SMs"
                                        if slices < 2 else
                                        f"{slices} K slices would fill {tiles * slices} of the {target.sm_count} SMs, "
                                        f"under {ONE_ROW_FILL:.0%}"))
    else:
        return None
    return (s, why) if _applies(s, op, target) else None


SUB_WAVE_PRESET = "sub_wave_128x128_8x8_stream_k"
"""Products whose 128×128 grid is under one wave (:func:`sub_wave_schedule`)."""
SUB_WAVE_MIN_SIDE, SUB_WAVE_MIN_TILES, SUB_WAVE_TALL, SUB_WAVE_MIN_K = 128, 16, 32, 512
"""The class :func:`sub_wave_schedule` was measured on: M and N ≥ 128; at least 16 tiles of 128×128 (12 and 14 lost
up to 8 %), fewer than one per SM (with as many tiles as SMs stream-K has nothing to share); M ≤ 32·N (4096×128 at
M = 32·N gained, 0.79 → 0.84×; 7680×128 lost: the estimate's 256×128 split-K pick ran 0.96× cuBLAS, stream-K
0.85–0.88×); K ≥ 512, the shortest K measured."""


def sub_wave_schedule(op: GemmOp, target: Target) -> GemmSchedule | None:
    """The shape-class rule for float32 products (IEEE, FMA units) whose 128×128 grid is under one wave: M and N ≥
    :data:`SUB_WAVE_MIN_SIDE`, M ≤ :data:`SUB_WAVE_TALL`·N, K ≥ :data:`SUB_WAVE_MIN_K`, and from
    :data:`SUB_WAVE_MIN_TILES` tiles of 128×128 to fewer than one per SM; None for other ops (``builtin_choice``
    tries the tall-thin, one-row and short-wide rules first).

    Stream-K on the 128×128×8 tile (:data:`SUB_WAVE_PRESET`) shares the K iterations of those few tiles among all
    SMs, where split-K's even slices either leave SMs idle or (short K) stop the estimate from splitting at all:
    1024×700×512 got 88 tiles of 128×64 and no split. Measured on the H200 against the generic estimate's picks, on
    every data-set product whose pick was under one wave (``python benchmarks/gemm_skinny.py --set subwave``,
    benchmarks/results/gemm_subwave_h200.json, 2026-12-02; the bounds come from the same run): on the 34 products of
    the class, geomean 0.85 → 0.94× cuBLAS, lowest 0.56 → 0.81 (1024×700×512 TT 0.56 → 0.88, NT 0.60 → 0.94;
    2048×768×768 0.75 → 0.92; 128×14336×4096 0.78 → 0.91; 2560×128×2560 TT 0.79 → 1.05); none lost more than 2 %.
    Since 2026-12-04 the one-row rule (:func:`one_row_choice`: M 65…128, K ≥ 2048) takes its class first.
    """
    if not (op.dtype == "float32" and op.precision == "ieee" and min(op.m, op.n) >= SUB_WAVE_MIN_SIDE
            and op.m <= SUB_WAVE_TALL * op.n and op.k >= SUB_WAVE_MIN_K):
        return None
    base = registry.presets(GEMM).get(SUB_WAVE_PRESET)
    if base is None:  # a shipped preset that failed its check (warned when the presets were read)
        return None
    return base if SUB_WAVE_MIN_TILES <= tile_count(op, base) < target.sm_count else None


def _applies(s: GemmSchedule, op: GemmOp, target: Target) -> bool:
    """True when ``s`` passes the op- and device-scope rules for ``op`` on ``target``."""
    try:
        s.check_op(op)
        s.validate(target)
    except ScheduleError:
        return False
    return True


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# Presets the default may pick, with their measured fraction of the FP32 peak (67 TFLOP/s) at 4096³
# (benchmarks/results/gemm_h200.json, H200, 2026-11-29; e.g. 128x128: 44.8 TFLOP/s = 0.67); the
# small and skinny tiles' figures are estimates, not measurements.
DEFAULT_CANDIDATES = {"sgemm_256x128_16x8": 0.69, "sgemm_128x128_8x8": 0.67, "sgemm_128x64_8x4": 0.57,
                      "sgemm_64x64_4x4": 0.47, "sgemm_32x64_2x4": 0.3, "skinny_n_64x16": 0.25,
                      "skinny_m_16x64": 0.25}
# float32 with a column-major A and a row-major B (TN) also: fragment prefetch measured 49.5 TFLOP/s at 4096³ (0.74 of
# the FP32 peak; 0.954x cuBLAS, 0.929x at 8192³) where the plain 256x128 measured 48.8 (0.941x, 0.918x). With a
# row-major A (NN, NT) the plain preset is ahead since its A tile is loaded a warp per 32 rows (NN 0.953x / 0.962x
# against 0.928x / 0.932x; NT 0.932x / 0.929x against 0.911x / 0.908x), so fragment prefetch is offered for TN only
# (benchmarks/results/gemm_fma_serpentine_h200.json, H200, 2026-12-01). The plain preset's 0.69 above stays its
# 2026-11-29 figure, which ranks it against the other presets and split-K factors as measured since.
COL_ROW_FP32_CANDIDATES = {"sgemm_256x128_16x8_fragment_prefetch": 0.74}
# float32 with a row-major A and a column-major B (NT) also: stream-K measured 48.2-48.5 TFLOP/s at 4096³ and 8192³
# (0.949x cuBLAS as the preset, 0.952x / 0.956x as schedule=None in the same run) where the plain 256x128 ran
# 0.929x / 0.935x. For NN and TN it was behind (0.92x, 0.90-0.92x): ptxas schedules the kernel with the tile loop
# differently (255 registers against 205), which costs those layouts more than the last wave gives back. At 2048³
# (one wave) it was behind in every layout (benchmarks/results/gemm_fma_streamk_h200.json, H200, 2026-12-01). Its
# efficiency is the plain preset's: the estimate counts the tail it removes with fractional waves, and offers it only
# where there is a tail, two whole waves before it, and K ≥ STREAM_K_MIN_K (the measured range).
ROW_COL_FP32_CANDIDATES = {"sgemm_256x128_16x8_stream_k": 0.69}
STREAM_K_MIN_K = 4096
SPLIT_K_MAX_WAVES = 8
"""The default estimate splits K only where one K slice per tile gives fewer than this many waves (two blocks per SM):
beyond, a split trims at most the last wave's idle SMs, about 1/8 of the time or less, on paper, while its float32
workspace, split·M·N·4 bytes, grows with C (4 GiB for split 4 at 16384², more than A, B and C together; the estimate
picked that for 16384³ float32, unmeasured). No shape of the DeepBench and LLM sets is affected: their split-K
defaults have at most 6.4 waves unsplit."""
# Tensor-core presets for float16/bfloat16 on sm_80+, with their fraction of the dense tensor-core peak
# (Target.peak_tc16_flops, 1070.5 TFLOP/s for the H200 table entry: 132 SMs × 4096 FLOP/clock at the 1.98 GHz boost
# clock; the H100 datasheet's 989.4 TFLOP/s is at 1.83 GHz): 128x128 measured 322 TFLOP/s at 4096³
# (0.30; benchmarks/results/gemm_tc_h200.json, H200, 2026-12-01); the 64x64 figure is an estimate.
# wgmma (sm_90a, 16-byte-aligned operands): 128x256 measured 509 TFLOP/s (0.475) and 128x128 s6 434 (0.405)
# at 4096³ NN fp16 (benchmarks/results/gemm_tc_sweep_wgmma_h200.json).
# TMA (producer warpgroup): 128x256 s4 about 680 TFLOP/s bf16 at 4096³ (0.635), 128x128 s6 608 (0.57); used
# only where the CUDA Python bindings that encode tensor maps are installed (tiledsl.tma.available). The
# persistent 128x256 s4 (one block per SM walking the tiles) measured 678-692 TFLOP/s fp16/bf16 at 4096³ (0.645),
# 1-3% ahead of the same tile launched one block per tile (benchmarks/results/gemm_tc_sweep_persistent_h200.json).
TC_DEFAULT_CANDIDATES = {"hgemm_tma_persistent_128x256x64_s4": 0.645, "hgemm_tma_128x128x64_s6": 0.57,
                         "tf32_tma_128x256x32_s4": 0.6, "tf32_tma_128x128x32_s6": 0.55,
                         "hgemm_wgmma_128x256x64_s4": 0.475, "hgemm_wgmma_128x128x64_s6": 0.405,
                         "hgemm_128x128x32_w64x64_s4": 0.30, "hgemm_64x64x32_w32x32_s4": 0.18}


ROW_SWAP_MIN_ELEMENTS, ROW_SWAP_MIN_K = 1 << 21, 1024
"""The fewest elements of A (M·K) for which a few-column product runs as rows, and the shortest K for which a
one-column product below that runs as a row anyway (shorter ones too where the row runs in one launch,
:func:`row_in_one_launch`). Measured on the H200 (``python benchmarks/gemm.py --workloads
--max-n 1``, 2026-12-01, DeepBench's 14 one-column products): from 3.1 M elements up the row on the GEMV-style
kernel went from 0.39–0.53× to 0.45–0.84× cuBLAS; at 0.26–0.54 M elements it lost (0.58–1.12× → 0.48–0.87×),
most where K ≤ 512 (the tiled kernels need no split-K there: one launch)
(``benchmarks/results/gemm_workloads_n1_nofloor_h200.json``; with this floor:
``benchmarks/results/gemm_workloads_n1_h200.json``). Since the GEMV kernel's unroll of 8
(:data:`GEMV_ROW_B_UNROLL`) the three smaller ones with K ≥ 1024 run faster as rows: 64×1×1216, 128×1×1024 and
128×1×1408 went from 0.67 / 0.61 / 0.65× to 1.11 / 0.68 / 0.85× cuBLAS in one run (``python
benchmarks/gemv_fused.py``, 2026-12-02, ``benchmarks/results/gemv_fused_h200.json``: ``schedule=None`` against
``two``); 512×1×512 went 0.62 → 0.65× there, but 1024×1×512 lost as a row before (1.10 → 0.87×), so K = 512 keeps
the tiled kernels unless the row runs in one launch (:func:`row_in_one_launch`: then 512×1×512 0.58 → 0.77× and
1024×1×512 1.10 → 1.35×)."""


def runs_as_row(op: GemmOp, target: Target) -> bool:
    """Whether ``tiledsl.gemm(..., schedule=None)`` computes ``op`` as the few rows Cᵀ = Bᵀ·Aᵀ (:func:`rows_op`) on the
    GEMV-style kernel: yes when A has at least :data:`ROW_SWAP_MIN_ELEMENTS` elements (one float32 column with a
    column-major A, the layout measured: or K is at least :data:`ROW_SWAP_MIN_K`, or the row runs in one launch,
    :func:`row_in_one_launch`), no tuned record exists for ``op`` itself, N < M, and either N = 1 (every dtype and
    layout: the single row yᵀ = xᵀ·Aᵀ, :data:`GEMV_MAX_M`) or float32 IEEE inputs with N ≤ :data:`FEW_COLUMNS_MAX_N` and
    a column-major A (Aᵀ is then a row-major B for the GEMV kernel, its fast layout), or N ≤ 16 and K ≥
    :data:`FEW_COLUMNS_LONG_K` (either layout of A). Run as given, the tiled kernels compute one to a few useful columns
    per block tile. For N = 1 the output must have a unit stride along M (the caller checks; its transpose is then a
    contiguous row); for N > 1 it is row-major, written as the column-major Cᵀ (``GemmOp.layout_c="col"``)."""
    float32 = op.dtype == "float32" and op.precision == "ieee"
    if not 1 <= op.n < op.m:
        return False
    if op.m * op.k < ROW_SWAP_MIN_ELEMENTS:  # a small one-column product: only as measured (planned last: costlier)
        small_row = op.n == 1 and float32 and op.layout_a == "col"
        if not (small_row and (op.k >= ROW_SWAP_MIN_K or row_in_one_launch(op, target))):
            return False
    few_columns = op.n == 1 or float32 and ((op.n <= FEW_COLUMNS_MAX_N and op.layout_a == "col")
                                            or (op.n <= GEMV_MAX_M[(True, True)] and op.k >= FEW_COLUMNS_LONG_K))
    return few_columns and registry.lookup(GEMM, op, target) is None


def row_in_one_launch(op: GemmOp, target: Target) -> bool:
    """Whether ``op`` run as its rows (:func:`rows_op`) takes the one-launch GEMV schedule (:func:`gemv_one_launch`).
    A one-column product with a column-major A and K below :data:`ROW_SWAP_MIN_K` runs as that row where it does:
    measured on the H200 (``python benchmarks/gemv_fused.py --family launch``, 2026-12-02,
    ``benchmarks/results/gemv_launch_h200_run2.json``, DeepBench's four such products, ``one launch bn/4 depth64``
    against ``schedule=None`` on the tiled kernels): 512×1×512 0.58 → 0.77×, 1024×1×512 1.10 → 1.35×, 3072×1×128
    0.89 → 0.95×, 4224×1×128 0.94 → 0.97× cuBLAS."""
    rows = rows_op(op)
    return gemv_one_launch(rows, gemv_base_schedule(rows, target), target) is not None


def rows_op(op: GemmOp) -> GemmOp:
    """The op :func:`runs_as_row` runs instead of ``op``: Cᵀ (N×M) = Bᵀ (N×K) · Aᵀ (K×M). Transposing swaps the
    operands and flips their layouts; Cᵀ is a row (N = 1) or column-major (the row-major C seen transposed)."""
    flip = {"row": "col", "col": "row"}
    return replace(op, m=op.n, n=op.m, layout_a=flip[op.layout_b], layout_b=flip[op.layout_a], align_a=op.align_b,
                   align_b=op.align_a, layout_c="row" if op.n == 1 else "col")


FEW_COLUMNS_MAX_N, FEW_COLUMNS_LONG_K = 8, 65536
"""The float32 products :func:`runs_as_row` runs as rows besides one-column ones: up to 8 columns with a column-major
A, and up to 16 with K ≥ 65536. Measured on the H200 against the tiled kernels' pick for the same product (``python
benchmarks/gemm_few_columns.py``, 2026-12-01, benchmarks/results/gemm_few_columns_h200.json; DeepBench's products):
N = 2 and 4 with a column-major A and K = 1024-2816 ran 1.24-1.69× cuBLAS as rows where the tiled pick ran
0.87-1.04× (10 of 10 ahead); N = 2-16 at K = 500000 ran 1.17-1.88× against 0.46-0.74× (12 of 12, both layouts of
A); N = 16 at K = 1024-4096 ran 0.63-1.12× as rows against 0.80-1.16× tiled (18 products, geomean 0.86 against
0.95), so those keep the tiled kernels (the tall-thin rule). The data sets hold no product with N = 5-8 at K < 65536:
those follow the GEMV kernel's showing with eight rows of a row-major B (:data:`GEMV_ROW_B_UNROLL`)."""


GEMV_MAX_M = {(True, True): 16, (True, False): 16, (False, True): 1, (False, False): 1}
"""(float32, row-major B) -> the most rows of C for which ``schedule=None`` picks the GEMV-style kernel. Measured
on the H200 (``python benchmarks/gemv.py``, 2026-12-01, ``benchmarks/results/gemv_h200.json``): one row reads B
at 2.6-4.1 TB/s (0.90-1.13x cuBLAS, every dtype and layout); float32 with a row-major B stays ahead up to 16
rows (0.84-2.77x); 16-bit inputs with more rows go to the tensor-core tiles. A column-major B (torch's Linear,
W [N, K]) fell behind with more rows in that run (0.34-0.64x at 4-16 rows) and was left to the tiled kernels, which
reach 0.36-0.70x there (``python benchmarks/gemv_fused.py --family colb``, 2026-12-02,
``benchmarks/results/gemv_colb_h200.json``, 2, 4, 8 and 16 rows × (N, K) = (4096, 4096), (4096, 14336), (14336,
4096)); the GEMV kernel as it is now, with its K slices, took 0.95-1.77x on the same products in the same run, and
:data:`GEMV_COLUMN_B_ROWS`' setting 1.03-2.05x: float32 takes it up to 16 rows with either layout of B (with a
column-major B, as measured: IEEE float32 and a row-major A, :func:`gemv_max_rows`)."""


def gemv_max_rows(op: GemmOp) -> int:
    """The most rows of C for which ``schedule=None`` picks the GEMV-style kernel for ``op``'s dtype and B layout
    (:data:`GEMV_MAX_M`; with a row-major B every precision: tf32 few-row products run exact on the GEMV kernel too).
    A column-major B takes more than one row only as measured: IEEE float32 with a row-major A (torch's Linear)."""
    rows = GEMV_MAX_M[(op.dtype == "float32", op.layout_b == "row")]
    if op.layout_b == "col" and not (op.layout_a == "row" and op.precision == "ieee"):
        return 1
    return rows


def runs_gemv(op: GemmOp) -> bool:
    """Whether the built-in choice for ``op`` is the GEMV-style kernel: a column-major C (a few-column product run
    as rows), or at most :func:`gemv_max_rows` rows. The tuner searches that kernel's space exactly there."""
    return op.layout_c == "col" or op.m <= gemv_max_rows(op)


def gemv_schedule(op: GemmOp, target: Target) -> GemmSchedule:
    """The GEMV-style schedule for ``op`` (few rows M) on ``target``: :func:`gemv_base_schedule`, or for a small
    float32 product with a row-major B its one-launch form (:func:`gemv_one_launch`), or for a larger one with an
    odd N its form with groups of columns per thread (:func:`gemv_column_groups`), or with many rows and an aligned
    row-major B its form with A staged in shared memory (:func:`gemv_staged_a`), or with many rows of a small aligned
    product with a column-major B its form with A staged (:func:`gemv_staged_a_column_b`), or with 1-4 rows of a
    larger one with a row-major B its K slices filling whole waves (:func:`gemv_register_waves`)."""
    pick = gemv_schedule_before_lanes(op, target)
    return gemv_lanes_split_k(op, pick, target) or pick


def gemv_schedule_before_lanes(op: GemmOp, target: Target) -> GemmSchedule:
    """:func:`gemv_schedule` before :func:`gemv_lanes_split_k` (``benchmarks/gemv_hbm.py --variant registers`` times
    it beside the pick)."""
    base = gemv_base_schedule(op, target)
    pick = (gemv_one_launch(op, base, target) or gemv_column_groups(op, base, target)
            or gemv_staged_a(op, base, target) or gemv_staged_a_column_b(op, base, target)
            or gemv_register_waves(op, base, target) or base)
    return gemv_twelve_rows(op, pick) or pick


GEMV_MMA_ROWS = (9, 16)
"""The rows of C for which ``schedule=None`` runs a ``precision="3xtf32"`` product on the tensor-core GEMV kernel (one
m16n8k8 fragment of rows per block): 9-16, where the FMA kernels stay below 85 % of a device copy on the large LLM
products (GPU alone, H200, 2026-12-05: x @ W.T with 8 rows reached 0.851 of it, 12 and 16 rows 0.621 and 0.552,
``benchmarks/results/few_rows_h200_2026-12-05_session31/``; x @ W 8 / 12 / 16 rows 0.817 / 0.759 / 0.714,
``benchmarks/results/few_rows_h200_2026-12-05/``); with fewer rows the exact FMA kernel keeps them."""

@dataclass(frozen=True)
class GemvMmaForm:
    """The form of a tensor-core GEMV kernel (:mod:`tiledsl.gemm.emit_gemv_mma`) a rule takes.

    Attributes:
        threads: threads per block (``bn``).
        rn: columns of C per warp.
        unroll: k16 steps in flight per thread.
        ring: the ring of k16 steps (``fragment_prefetch``).
        min_blocks: blocks per SM the register cap is set for; 0: as many as the register estimate allows, at most
            4 (:func:`gemv_mma_shape`).
    """

    threads: int
    rn: int
    unroll: int
    ring: bool = False
    min_blocks: int = 0

    def schedule(self, mma: str) -> GemmSchedule:
        """The form's schedule on ``mma`` ("mma_sync": TF32; "dmma": float64), one K slice."""
        s = gemv_mma_shape(self.threads, self.rn, self.unroll, mma=mma, ring=self.ring)
        return replace(s, min_blocks=self.min_blocks) if self.min_blocks else s


@dataclass(frozen=True)
class GemvDmmaExtent:
    """Where ``schedule=None`` takes the FP64 GEMV kernel for one layout of B (:data:`GEMV_DMMA_DEFAULT`).

    Attributes:
        min_rows, max_rows: the rows M it takes, inclusive.
        min_b_bytes: the fewest bytes of B (W) it takes.
    """

    min_rows: int
    max_rows: int
    min_b_bytes: int

    def takes(self, op: GemmOp) -> bool:
        """Whether ``op``'s rows and bytes of B lie in the extent."""
        return self.min_rows <= op.m <= self.max_rows and 4 * op.n * op.k >= self.min_b_bytes


GEMV_MMA_MIN_DEPTH = 64
"""The shallowest K slice of the tensor-core GEMV kernels' forms (:func:`gemv_mma_form`), elements of K."""

GEMV_MMA = GemvMmaForm(threads=128, rn=32, unroll=2, min_blocks=4)
"""The form of :func:`gemv_mma_schedule`. Chosen from the SASS (NVRTC 12.9, sm_90; ``docs/gemm.md``, "Few rows on the
tensor cores"; on an H100, 2026-12-05, within 1 % of the fastest of the five forms ``gemv_fused.py --family mma3x``
times at 12-16 rows, geomean): x @ W.T's pick holds 118 registers within its cap of 128 (four blocks of 128 threads per SM, 16
warps, where the FMA kernel with A in registers has 8) and issues 257 instructions per pass of 2 k16 steps, 8.0 per
element of B per lane, where the FMA kernel issues 18.7 (597 per 32 elements)."""


def gemv_mma_refusal(op: GemmOp, target: Target | None = None) -> str:
    """Why :func:`gemv_mma_schedule` gives ``op`` no schedule: its rows, or the first rule its base schedule breaks
    (the device's only with ``target``); empty where it gives one."""
    if not GEMV_MMA_ROWS[0] <= op.m <= GEMV_MMA_ROWS[1]:
        return f"M = {op.m} rows"
    return _rule_refusal(GEMV_MMA.schedule("mma_sync"), op, target)


def _rule_refusal(s: GemmSchedule, op: GemmOp, target: Target | None) -> str:
    """The first op rule (and with ``target`` device rule) ``s`` breaks for ``op``, as its message; empty where none."""
    try:
        s.check_op(op).validate(target)
    except ScheduleError as exc:
        return str(exc)
    return ""


def effective_op(op: GemmOp, target: Target | None = None) -> GemmOp:
    """The op whose schedule ``tiledsl.gemm`` looks up for ``op`` with ``schedule=None`` (before
    :func:`runs_as_row`): ``op`` itself, or for a ``precision="3xtf32"`` product the tensor-core GEMV kernel does not
    take (:func:`gemv_mma_refusal`; the device's rules only with ``target``) the IEEE product, whose schedules and tuned
    records (and few-column rows) compute it exactly. ``default_schedule``, ``tiledsl.gemm`` and ``search.tune`` read
    records under the op this returns (``search.tune`` without the device's rules: it runs on the CPU too)."""
    if op.precision != "3xtf32" or not gemv_mma_refusal(op, target):
        return op
    return replace(op, precision="ieee")


def gemv_mma_schedule(op: GemmOp, target: Target) -> GemmSchedule | None:
    """The tensor-core GEMV schedule (``kernel="gemv"``, ``mma="mma_sync"``; :mod:`tiledsl.gemm.emit_gemv_mma`) for a
    ``precision="3xtf32"`` product of :data:`GEMV_MMA_ROWS` rows, x @ W or x @ W.T (A and C row-major, B either), A and
    B 16-byte aligned, on sm_80 or newer: :data:`GEMV_MMA`'s form (:func:`gemv_mma_form`). None where the kernel does
    not apply (:func:`gemv_mma_refusal` says why)."""
    if op.precision != "3xtf32" or gemv_mma_refusal(op, target):
        return None
    return gemv_mma_form(op, target, GEMV_MMA.schedule("mma_sync"))


def gemv_mma_form(op: GemmOp, target: Target, base: GemmSchedule) -> GemmSchedule:
    """The tensor-core GEMV schedule ``base`` with the K slices that fill whole waves of the blocks its ``min_blocks``
    leaves on an SM (:func:`gemv_whole_waves`, each slice at least :data:`GEMV_MMA_MIN_DEPTH` deep): the form
    :func:`gemv_mma_schedule` takes, the search seeds (:func:`gemv_mma_shape`'s) and ``benchmarks/gemv_fused.py
    --family mma3x`` times."""
    depth = GEMV_MMA_MIN_DEPTH
    pick = gemv_split(op, base, target, blocks_per_sm=base.min_blocks, min_depth=depth)
    return replace(base, split_k=gemv_whole_waves(op, base, target, 1, pick, min_depth=depth))


def gemv_mma_shape(bn: int, rn: int, unroll: int, mma: str = "mma_sync", ring: bool = False) -> GemmSchedule:
    """The tensor-core GEMV schedule of ``bn`` threads, ``rn`` columns per warp and ``unroll``, one K slice,
    ``min_blocks`` as many blocks per SM as its register estimate allows (at most 4), on TF32 (``mma="mma_sync"``) or
    the FP64 tensor cores (``mma="dmma"``; ``ring``: its ring of k16 steps, ``fragment_prefetch``)."""
    s = GemmSchedule(kernel="gemv", mma=mma, bm=16, bn=bn, bk=16, rn=rn, unroll=unroll, vec=4, fragment_prefetch=ring)
    return replace(s, min_blocks=max(1, min(4, 65536 // (bn * s.est_registers))))


GEMV_DMMA = {"col": GemvMmaForm(threads=128, rn=16, unroll=4),
             "row": GemvMmaForm(threads=128, rn=64, unroll=2, ring=True)}
"""The forms of :func:`gemv_dmma_schedule` by the layout of B: x @ W.T ("col") and x @ W ("row"). ``python
benchmarks/gemv_fused.py --family dmma`` on an H200 (2026-12-05, commit b8f1d6b,
``benchmarks/results/tc_gemv_h200_2026-12-05/``; one run, in-sample), the LLM products of at least 64 MiB, geomean over schedule=None's FMA kernels: x @ W.T 16 columns per warp
at unroll 4 without the ring, the fastest of nine forms at 12 and 16 rows: 1.216× and 1.362× (faster on 12 of 12 each;
with the ring 1.134× and 1.271×); x @ W 64 columns at unroll 2: 1.027× at 12 rows (6 of 11), 1.055× at 16 (10 of 11).
Its ring was faster still (1.055× and 1.080×) but holds 255 registers and spills 48 bytes where K is not split
(ptxas, NVRTC 12.9: 16×128256×4096), so the pick kept the groups until session 37, when an H200 run
(:data:`GEMV_DMMA_NN_RING_MEASURED`) timed the ring against the groups at 9, 12 and 16 rows: GPU alone 0.817 / 0.805 /
0.786 of the copy against 0.768 / 0.763 / 0.756, per call 1.024 / 1.020 / 1.016× (12, 10 and 10 of 12 products of at
least 64 MiB faster, the slowest 0.995×), 16×128256×4096 with its spill 1.019-1.021 against 0.959-0.963 of the copy
at 9-16 rows: x @ W takes the ring (on an H100 level with the groups: docs/gemm.md, "Session 37"). On an H100
(``tc_gemv_h100_2026-12-05/gemv_dmma.json``): x @ W.T 1.101× at 16 rows, 1.068× at 12, 0.94× at 8; x @ W 1.068× and 1.058×. ``min_blocks`` from the register
estimate: 4 and 2."""

GEMV_DMMA_DEFAULT = {"col": GemvDmmaExtent(min_rows=9, max_rows=16, min_b_bytes=2 << 20),
                     "row": GemvDmmaExtent(min_rows=9, max_rows=16, min_b_bytes=64 << 20)}
"""Where ``schedule=None`` takes :func:`gemv_dmma_schedule` (:func:`gemv_dmma_default`), by the layout of B. x @ W.T: on
an H200 (:data:`GEMV_DMMA`'s run) at 12 and 16 rows on every LLM product, 1.14-1.62× faster than the FMA GEMV kernels per
call (the products of 2-16 MiB included; the smallest, 768 × 768, is 2.25 MiB: smaller B were not measured), 13-15 lying
between them; 9-11 rows on an H100 (:data:`GEMV_DMMA_ROWS_MEASURED`: per call 1.03 / 1.05 / 1.07× geomean over the
twelve products of at least 64 MiB, 9-10 of 12 faster, the slowest 0.98×; GPU alone 1.08-1.12×; the five under 64 MiB
1.07-1.49×), where at 12 rows the margin (1.07×) was a third of the H200's (1.216×): the FMA kernel's issue rate, not
the memory, bounds it, and the H200 streams 1.4× the bytes per FMA an H100 does. 8 rows lost on an H100 (0.94×; the FMA
kernel reaches 0.89 of the copy there): not taken. The H100 measured is the SXM part (HBM3); an H100 PCIe, with two
thirds of its bytes per FMA, was not, and may gain less at 9-11 rows. x @ W on B of at least 64 MiB: at 16 rows on an
H200 0.988-1.122× (1.055× geomean, 10 of 11 faster; smaller ones 0.84-1.03×), at 12 rows there 1.027× (5 of 11 slower);
9-15 rows since session 36 on an H100 (:data:`GEMV_DMMA_NN_ROWS_MEASURED`, the split-K sum a dependent launch in both
kernels): per call 1.04 / 1.15 / 1.05× at 9 / 12 / 15 rows (geomean of twelve products, 8, 9 and 11 of 12 faster, the
slowest 0.976×), GPU alone 0.849 / 0.832 / 0.810 of the copy for the FMA kernels against 0.867 / 0.861 / 0.842; under
64 MiB the FP64 kernel lost (per call 0.96-1.01×, GPU alone 0.90-0.98×): the 64 MiB floor stays. The H200 takes 9-15
rows on this H100 evidence and its own 12-row geomean (1.027×, 5 of 11 slower, session 34, the sum launched plainly):
not yet measured there with the dependent sum. Since session 37 x @ W's extent holds W of any alignment
(:data:`GEMV_DMMA_NARROW_B_MEASURED`: on an H100 only) and its ring (:data:`GEMV_DMMA_NN_RING_MEASURED`)."""

GEMV_DMMA_NN_RING_MEASURED = "benchmarks/results/h200_2026-12-05_s37"
"""Where x @ W's ring (:data:`GEMV_DMMA`) was measured against its groups (NVIDIA H200, 2026-12-05, session 37, commit
a43bdd7): ``nn_ring_all.json`` (``python benchmarks/gemv_hbm.py --m 5 6 … 16 --layouts NN --variant dmma ring``) and
``nn_default.json`` (``--m 5 6 7 8 9 12 16 --layouts NN``, the groups at 9-16 rows), each product checked against
float64 and timed per call and GPU alone beside cuBLAS."""

GEMV_DMMA_NN_ROWS_MEASURED = "benchmarks/results/pdl_h100_2026-12-05"
"""Where x @ W's 9-15-row extent of :data:`GEMV_DMMA_DEFAULT` was measured (NVIDIA H100 80GB HBM3, 2026-12-05, session
36, commit 69a4fef): ``nn_fma.json`` (``python benchmarks/gemv_hbm.py --m 9 12 15 --layouts NN``, the FMA kernels) and
``nn_dmma.json`` (the same with ``--variant dmma``), each product checked against float64 and timed per call and GPU
alone beside cuBLAS; the same comparison on commit 127f028 (split-K sums launched plainly): ``nn_fma_127f028.json`` /
``nn_dmma_127f028.json``, per call 1.04 / 1.05 / 1.05×."""

GEMV_DMMA_ROWS_MEASURED = "benchmarks/results/gemv_dmma_h100_2026-12-05"
"""Where the 9-11-row extent of :data:`GEMV_DMMA_DEFAULT` was measured (NVIDIA H100 80GB HBM3, 2026-12-05, session 35,
commit e0311e4): ``fma911.json`` / ``fma911b.json`` (``python benchmarks/gemv_hbm.py --m 9 10 11 --layouts NT``, the
FMA kernels, before and after) and ``dmma911.json`` (the same with ``--variant dmma``), each product checked against
float64 and timed per call and GPU alone beside cuBLAS."""

GEMV_DMMA_DEFAULT_GPUS = ("H100", "H200")
"""The GPUs :func:`gemv_dmma_default` takes the FP64 tensor cores on (by name): those measured, whose FP64 tensor-core
rate equals their FP32 rate (67 TFLOP/s, the H100 datasheet; the H200 has the same SMs). Another sm_90 part may
carry far fewer FP64 units."""


def gemv_dmma_refusal(op: GemmOp, target: Target | None = None) -> str:
    """Why :func:`gemv_dmma_schedule` gives ``op`` no schedule: its rows (at most 16), or the first rule its form breaks
    (IEEE float32, A and C row-major, A 16-byte aligned and, for x @ W.T, B; with ``target``, sm_90); empty where it
    gives one."""
    if op.m > 16:
        return f"M = {op.m} rows (at most 16: one m16 fragment of rows per block)"
    return _rule_refusal(_gemv_dmma_base(op), op, target)


def gemv_dmma_vec(op: GemmOp) -> int:
    """How the FP64 GEMV kernel reads ``op``'s B (``GemmSchedule.vec``): 16 bytes at a time (4), or 4 bytes (1) for
    x @ W whose rows of W do not start 16-byte aligned (N, ldb or the base address not a multiple of 4 floats;
    :data:`GEMV_DMMA_NARROW_B_MEASURED`). x @ W.T needs B aligned (rule ``gemv_mma_vec``)."""
    return 1 if op.layout_b == "row" and op.align_b != 4 else 4


def _gemv_dmma_base(op: GemmOp) -> GemmSchedule:
    return replace(GEMV_DMMA[op.layout_b].schedule("dmma"), vec=gemv_dmma_vec(op))


GEMV_DMMA_NARROW_B_MEASURED = "benchmarks/results/h100_2026-12-05_s37"
"""Where x @ W with W's rows not 16-byte aligned on the FP64 kernel (``vec=1``: W read 4 bytes at a time) was measured
against the FMA GEMV kernel's odd-N form (NVIDIA H100 80GB HBM3 only: the H200 takes it on this evidence, not yet
measured there; 2026-12-05, session 37, commit 9142b7f;
``oddn.json``, ``python benchmarks/gemv_oddn_proto.py --m 5 6 8 9 12 16``: the library's source with its loads of W
made 4-byte, GPT-2's 16 × 50257 × 768 and fewer rows, GPU alone): 0.703 / 0.640 / 0.563 of the copy at 9 / 12 / 16
rows against 0.531 / 0.523 / 0.504 (16-byte loads on N = 50256: 0.807 / 0.750 / 0.642); at 5-8 rows 0.730-0.779
against 0.678-0.701 (not taken: :data:`GEMV_DMMA_DEFAULT` starts at 9 rows). In the library (commit 86e74c8,
``nn_all_86e74c8.json`` against ``nn_all_2d6960f.json``, ``python benchmarks/gemv_hbm.py --m 9 … 16 --layouts NN``):
50257 × 768 at 9-16 rows 0.711-0.577 of the copy against 0.539-0.511, per call 1.17-1.35× faster."""


def gemv_dmma_schedule(op: GemmOp, target: Target) -> GemmSchedule | None:
    """The GEMV kernel on the FP64 tensor cores (``kernel="gemv"``, ``mma="dmma"``; :mod:`tiledsl.gemm.emit_gemv_mma`)
    for an IEEE float32 product of at most 16 rows, x @ W or x @ W.T (A and C row-major), A 16-byte aligned, on sm_90:
    :data:`GEMV_DMMA`'s form for the layout of B, with the K slices of :func:`gemv_mma_form`; x @ W whose B is not
    16-byte aligned (N, ldb or the base address not a multiple of 4 floats) reads it 4 bytes at a time (``vec=1``,
    :data:`GEMV_DMMA_NARROW_B_MEASURED`), x @ W.T needs it aligned. None where :func:`gemv_dmma_refusal` refuses it.

    ``schedule=None`` takes it where :func:`gemv_dmma_default` says; elsewhere pass it as ``schedule=`` to opt in."""
    if gemv_dmma_refusal(op, target):
        return None
    return gemv_mma_form(op, target, _gemv_dmma_base(op))


def gemv_dmma_default(op: GemmOp, target: Target) -> GemmSchedule | None:
    """:func:`gemv_dmma_schedule` where ``schedule=None`` takes it (:data:`GEMV_DMMA_DEFAULT`: x @ W.T of 9-16 rows with B
    of at least 2 MiB, x @ W of 9-16 rows with B of at least 64 MiB, each measured faster than the FMA GEMV kernels: on
    an H200, and 9-11 rows of x @ W.T and 9-15 of x @ W on an H100; x @ W with an unaligned W on an H100 only,
    :data:`GEMV_DMMA_NARROW_B_MEASURED`) on the GPUs of :data:`GEMV_DMMA_DEFAULT_GPUS`,
    where the kernel's rules take the op (:func:`gemv_dmma_refusal`: IEEE float32, A and C row-major, A 16-byte aligned
    and x @ W.T's B; x @ W's B of any alignment, :data:`GEMV_DMMA_NARROW_B_MEASURED`); None elsewhere
    (the FMA GEMV kernel stays). The bits of a row then depend on how many rows the call has (8 rows: FMA sums; 9:
    float64 sums rounded once per slice), as with any change of kernel."""
    if op.layout_b not in GEMV_DMMA_DEFAULT or not any(g in target.name for g in GEMV_DMMA_DEFAULT_GPUS):
        return None
    if not GEMV_DMMA_DEFAULT[op.layout_b].takes(op):
        return None
    return gemv_dmma_schedule(op, target)


GEMV_TWELVE_ROWS_MEASURED = "benchmarks/results/few_rows_h200_2026-12-05"
"""Where :func:`gemv_twelve_rows` and :data:`GEMV_SPARE_SLOT_MIN_ROWS` were measured (H200, 2026-12-05, commit f916e31,
``bash benchmarks/few_rows_decide.sh DIR``; in-sample, one run): ``gemv_few_rows.json`` (``gemv_fused.py --family
few_rows --quick``, ratios to cuBLAS) and ``gemv_hbm_none.json`` / ``gemv_hbm_variants.json`` (GPU alone, shares of
the copy)."""


def gemv_twelve_rows(op: GemmOp, s: GemmSchedule) -> GemmSchedule | None:
    """``s`` (:func:`gemv_schedule`'s pick) with 12 rows per block in place of 16 for 9-12 rows
    (:func:`gemv_twelve_rows_fit`), where it was measured to pay (:data:`GEMV_TWELVE_ROWS_MEASURED`): x @ W with A
    staged (12 rows: 0.88-1.71× cuBLAS against 0.85-1.62× with sixteen, four products; with the spare slot
    0.93-1.75×; GPU alone 0.63 → 0.78 of the copy, geomean of twelve products of at least 64 MiB, with the spare slot)
    and x @ W.T with A in registers (11008×4096 1.28 → 1.43×, 4096×14336 1.47 → 1.61×); not x @ W.T with A staged
    (768×3072 1.54 → 1.35×, 1024×4096 2.15 → 1.97×: 12·rn sums leave by per-value shuffles instead of the
    butterfly). IEEE float32 with a row-major A and C only, as measured; None elsewhere."""
    layouts = (op.layout_a, op.layout_c) == ("row", "row")
    if not (gemv_twelve_rows_fit(op.m) and s.bm == 16 and op.dtype == "float32" and op.precision == "ieee"
            and layouts and s.smem_a == (op.layout_b == "row")):
        return None
    return replace(s, bm=12)


def gemv_base_schedule(op: GemmOp, target: Target) -> GemmSchedule:
    """The GEMV-style schedule for ``op`` (few rows M) on ``target`` before the one-launch rule: bm = M rounded up to
    a power of two (≤ 16); 128 threads of 4-wide columns (row-major B), or 8 warps of ``rn`` columns each (a
    column-major B: one column for one row, else min(4, 64 / bm)), 4 warps at unroll 2 for 2–16 float32 rows into a
    row-major C (:data:`GEMV_COLUMN_B_ROWS`); the K slices that give about four blocks per SM (at most :data:`GEMV_MAX_SPLIT`), each slice at least 64
    deep, 32 for sixteen rows (:func:`gemv_min_depth`; so the split-K workspace, split·M·N float32 written and read
    once, is at most M/64 ≤ 1/4 of B's K·N elements, 16/32 = 1/2 with sixteen rows);
    ``unroll`` :data:`GEMV_ROW_B_UNROLL` for float32 with a row-major B; one float32 row times a column-major B
    takes 4 warps per block and sums its K slices in the kernel (:data:`GEMV_FUSED_COLUMN_B`)."""
    bm = gemv_block_rows(op.m)
    row_b = op.layout_b == "row"
    fused_row = GEMV_FUSED_COLUMN_B and not row_b and bm == 1 and op.dtype == "float32"
    # IEEE float32 rows times a column-major B into a row-major C (torch's Linear, a few tokens): GEMV_COLUMN_B_ROWS
    column_rows = (not row_b and bm > 1 and op.dtype == "float32" and op.precision == "ieee" and op.layout_a == "row"
                   and op.layout_c == "row")
    bn, unroll = GEMV_COLUMN_B_ROWS if column_rows else (128 if row_b or fused_row else 256, 2 if bm <= 4 else 1)
    base = GemmSchedule(kernel="gemv", bm=bm, bn=bn, vec=4,
                        unroll=GEMV_ROW_B_UNROLL if row_b and op.dtype == "float32" else unroll,
                        rn=1 if row_b or bm == 1 else min(4, 64 // bm))  # rn: columns per warp (column-major B)
    split = gemv_split(op, base, target)
    return base if split == 1 else replace(base, split_k=split, split_k_fused=fused_row)


GEMV_COLUMN_B_ROWS = (128, 2)
"""(threads per block ``bn``, ``unroll``) of :func:`gemv_base_schedule` for 2–16 float32 rows times a column-major B
into a row-major C (torch's Linear layout with a few tokens), with 4 columns per warp (``rn``) and the K slices for
about four blocks per SM summed by the split-K kernel. Measured on the H200 (``python benchmarks/gemv_fused.py --family
colb``, 2026-12-02, ``benchmarks/results/gemv_colb_h200.json``, variant ``rn4 bn128 u2``): over 2, 4, 8 and 16 rows ×
(N, K) = (4096, 4096), (4096, 14336), (14336, 4096) a geomean of 1.39× cuBLAS, at least 1.03×, against 1.30× and 0.95×
for the earlier pick (256 threads, unroll 2 up to four rows, else 1) and 1.41×, 1.01× for the best on geomean (2
columns per warp); chosen on that run (in-sample). IEEE float32 with a row-major A only, as measured; a few-column
product run as rows (a column-major C) keeps the earlier pick."""

GEMV_ONE_LAUNCH_MAX_BYTES, GEMV_ONE_LAUNCH_MAX_ROWS, GEMV_ONE_LAUNCH_MAX_SPLIT = 16 << 20, 4, 24
"""The float32 GEMV products with a row-major B that :func:`gemv_one_launch` runs in one launch: A, B and C together at
most 16 MiB (at HBM speed under 4 µs, about what a second launch costs), at most 4 rows per block, and at most 24 K
slices for the block that finishes a group of columns to add. Measured on the H200 (``python benchmarks/gemv_fused.py
--family launch``, 2026-12-02, ``benchmarks/results/gemv_launch_h200.json``, variant ``one launch bn/4 depth64`` against
``two``, the split-K kernel's second launch): the 11 such products of the LLM set (x @ W, 1 and 4 rows) and DeepBench's
one-column products run as rows went from 0.63–1.44× to 0.76–1.50× cuBLAS, none slower in either run, though several
gains (3–5 %) are within the 7 % spread of one schedule between runs (512×1×512 0.63 → 0.78, 128×1×1024 0.68 → 0.76,
1×768×768 0.84 → 0.96, 3072×1×1024 0.79 → 0.87); with 48 slices (K = 3072) it lost (1×768×3072 0.91 → 0.84, 4×768×3072
1.27 → 1.13), and with sixteen rows it lost on every product (0.85–1.31 → 0.56–0.99). The bounds were chosen on that run
(in-sample) and reach a little past the data (the largest product measured under them is 12 MiB, the most slices 22);
larger products keep the split-K kernel, whose second launch is a small share of their time. IEEE float32 only (tf32
few-row products keep their pick)."""


def gemv_one_launch(op: GemmOp, base: GemmSchedule, target: Target) -> GemmSchedule | None:
    """:func:`gemv_base_schedule`'s pick ``base`` for ``op`` as one launch, where :data:`GEMV_ONE_LAUNCH_MAX_BYTES`
    says it pays (float32 IEEE and a row-major C, as measured; a few-column product run as rows writes a column-major
    one): a quarter of its columns per block (``bn / 4``), K slices again for four blocks per SM at least 64 deep
    (:func:`gemv_split`), summed in the kernel (``split_k_fused``); None where the rule does not apply or the
    quarter-width block needs no split (nothing to save)."""
    measured = op.dtype == "float32" and op.precision == "ieee" and op.layout_b == "row" and op.layout_c == "row"
    operand_bytes = replace(op, read_c=False).compulsory_bytes  # A, B and C once, as measured (float32)
    if not (measured and base.bm <= GEMV_ONE_LAUNCH_MAX_ROWS and operand_bytes <= GEMV_ONE_LAUNCH_MAX_BYTES
            and base.split_k > 1):
        return None
    quarter = replace(base, bn=base.bn // 4, split_k=1, split_k_fused=False)
    split = gemv_split(op, quarter, target)
    return replace(quarter, split_k=split, split_k_fused=True) if 1 < split <= GEMV_ONE_LAUNCH_MAX_SPLIT else None


GEMV_ODD_N_GROUPS, GEMV_ODD_N_UNROLL = 4, 1
""":func:`gemv_column_groups`: groups of columns per thread (``col_groups``) and K steps in flight (``unroll``) where
B is read one element at a time (odd N). Measured on the H200 (``python benchmarks/gemv_fused.py --family groups``,
2026-12-02, ``benchmarks/results/gemv_groups_h200.json``; the one odd N of the LLM set, GPT-2's 50257-column
vocabulary projection, K = 768, row-major x and W): against the pick (one column per thread, unroll 8) 4 groups at
unroll 1 went 0.66 → 0.81× cuBLAS with 16 rows, 1.11 → 1.29× with 8, 0.94 → 1.14× with 4 and 0.97 → 1.02× with one,
the best geomean over the four (1.05×; 2 groups at unroll 2 1.03×, 4 groups at unroll 2 1.02×, which led with 8 rows
at 1.46× but fell to 0.95× with 4). Chosen on that run (in-sample, one N and K; run 2 repeated it within 2 %); N ≡ 2
(mod 4) (B read 2 wide), a column-major A and the 16-bit dtypes were not measured and keep the pick. With N a multiple
of 4 (1 and 4 rows of 768, 4096 and 14336 columns; sixteen rows allow no second group at 4-wide loads) groups gave
nothing over one group at the same unroll."""


def gemv_column_groups(op: GemmOp, base: GemmSchedule, target: Target) -> GemmSchedule | None:
    """:func:`gemv_base_schedule`'s pick ``base`` for ``op`` with :data:`GEMV_ODD_N_GROUPS` groups of single columns
    per thread at unroll :data:`GEMV_ODD_N_UNROLL`, the K slices again for about four blocks per SM (:func:`gemv_split`)
    summed by the split-K kernel (``base``'s way for a row-major B); where B's rows allow only scalar loads
    (``align_b`` 1: an odd N or ldb) of an IEEE float32 product of row-major A and B into a row-major C, as measured,
    with at least one block's columns (``bn`` · groups: fewer leave whole groups past N, loading and discarding); None
    elsewhere."""
    measured = (op.dtype == "float32" and op.precision == "ieee" and op.layout_a == "row" and op.layout_b == "row"
                and op.layout_c == "row")
    if not (measured and op.align_b == 1 and op.n >= base.bn * GEMV_ODD_N_GROUPS):
        return None
    grouped = replace(base, vec=1, col_groups=GEMV_ODD_N_GROUPS, unroll=GEMV_ODD_N_UNROLL, split_k=1,
                      split_k_fused=False)
    return replace(grouped, split_k=gemv_split(op, grouped, target))


GEMV_SMEM_A_ROWS, GEMV_SMEM_A_MAX_DEPTH, GEMV_SMEM_A_UNROLL = (8, 16), 512, 8
""":func:`gemv_staged_a`: the rows per block (``bm``) that stage A in shared memory (``smem_a``), the deepest K slice
(so a block's staged A is at most bm·512·4 = 32 KiB and four blocks of 128 threads fit an SM) and the loads of B a
thread keeps in flight. Measured on the H200 (``python benchmarks/gemv_fused.py --family smem_a``, 2026-12-03,
``benchmarks/results/gemv_smem_a_h200.json`` and ``_run2.json``; x @ W over the 16 LLM (N, K) with N a multiple of 4,
geomean ratio to cuBLAS): with A in registers 1.204 / 1.302 / 1.401 at 16 / 8 / 4 rows, staged (128 threads, unroll
8, slices for four blocks per SM at most 256 deep) 1.394 / 1.409 / 1.354; unroll 4, 256 threads, eight blocks per SM
and 128-deep slices were each behind. Four rows keep A in registers. With :func:`gemv_whole_waves` (run 2):
1.445 / 1.430. Slices up to 512 deep rather than 256 (``--family smem_a_depth``, ``gemv_smem_a_depth_h200.json``:
fewer slices, less split-K workspace) 1.433 → 1.445 / 1.433 → 1.460, +6–7 % on 22016–32000 columns; 768 the same
as 512; 64 or 32 threads per block behind (docs/gemm.md, "A staged in shared memory")."""


GEMV_SPARE_SLOT_MIN_ROWS = 12
""":func:`gemv_staged_a` gives its ring of B a spare slot (``spare_slot``) from this many rows per block. Measured on
the H200 (:data:`GEMV_TWELVE_ROWS_MEASURED`): x @ W with sixteen rows 1.42-2.61× cuBLAS without it, 1.57-2.60× with
it (three products; 14336×4096 1.42 → 1.57×), and GPU alone 0.634 → 0.718 of the copy (geomean of the twelve products
of at least 64 MiB; 128256×4096 0.76 → 0.89); eight rows 0.816 → 0.806 (0.94-2.18× against 0.97-2.19×): not taken
there. The SASS says why (docs/gemm.md): 22 % fewer instructions per FMA at sixteen rows, where issue slots bound the
loop; eight rows are not bound by them."""


def gemv_staged_a(op: GemmOp, base: GemmSchedule, target: Target) -> GemmSchedule | None:
    """:func:`gemv_base_schedule`'s pick ``base`` for ``op`` with A staged in shared memory (``smem_a``, unroll
    :data:`GEMV_SMEM_A_UNROLL`, four blocks of its threads per SM): K slices at most :data:`GEMV_SMEM_A_MAX_DEPTH`
    deep, as many as fill whole waves best (:func:`gemv_whole_waves`) from there to twice those for about four
    blocks per SM at least 32 deep (:func:`gemv_split`), summed by the split-K kernel; where
    ``base`` has :data:`GEMV_SMEM_A_ROWS` rows per block and B is read 4 wide (an IEEE float32 product of row-major A
    and B into a row-major C, as measured); None elsewhere."""
    measured = (op.dtype == "float32" and op.precision == "ieee" and op.layout_a == "row" and op.layout_b == "row"
                and op.layout_c == "row")
    if not (measured and base.bm in GEMV_SMEM_A_ROWS and op.align_b >= 4 and base.vec == 4):
        return None
    staged = replace(base, smem_a=True, spare_slot=base.bm >= GEMV_SPARE_SLOT_MIN_ROWS, unroll=GEMV_SMEM_A_UNROLL,
                     min_blocks=0, split_k=1, split_k_fused=False)
    return gemv_staged_slices(op, staged, target, GEMV_SMEM_A_MAX_DEPTH)


def gemv_staged_slices(op: GemmOp, staged: GemmSchedule, target: Target, deepest: int) -> GemmSchedule | None:
    """``staged`` (a GEMV schedule staging A, one slice) with the K slices :func:`gemv_staged_a` and
    :func:`gemv_ring_column_b` give it: none deeper than ``deepest``, as many as fill whole waves best
    (:func:`gemv_whole_waves`) from there to twice those for about four blocks per SM at least 32 deep
    (:func:`gemv_split`); None where no more than :data:`GEMV_MAX_SPLIT` slices are that shallow."""
    shallowest = -(-op.k // deepest)  # the fewest slices no deeper than the cap
    if shallowest > GEMV_MAX_SPLIT:
        return None
    split = max(gemv_split(op, staged, target, min_depth=32), shallowest)
    return replace(staged, split_k=gemv_whole_waves(op, staged, target, shallowest, split))


GEMV_COLUMN_B_STAGED = (128, 4, 1, 4, 512, 16 << 20, 768, 4096)
""":func:`gemv_staged_a_column_b`: (threads per block, columns per warp ``rn``, ``unroll``, blocks per SM
``min_blocks``, deepest K slice, most bytes of B, fewest columns N and deepest K measured). Measured on the H200 (``python benchmarks/gemv_fused.py --family
colb_smem_a``, 2026-12-03, ``benchmarks/results/gemv_colb_smem_a_h200.json``; x @ W.T with 8, 12 and 16 rows over the
17 LLM (N, K), ratio to cuBLAS): with A staged, 128 threads of 4 columns per warp at unroll 1, four blocks per SM and
slices at most 512 deep, against the pick with A in registers: on the five products whose B is at most 16 MiB
(N × K = 768 × 768, 768 × 3072, 1024 × 4096, 2304 × 768, 3072 × 768) 1.10–1.98× instead of 0.80–1.69× at sixteen rows
(1.12–1.72× instead of 0.94–1.57× at eight), ahead on each; on the twelve larger ones behind on eleven and tied on
50257 × 768 (geomean over all 17: 1.093 against 1.153 at sixteen rows; 1.453 against 1.642 at eight): a block stages
as many bytes of A
(bm × its slice) as it reads of B (16 columns × its slice), which pays only where the pick's grid is small. Unroll 2
at three or two blocks per SM, 256 threads, 2 columns per warp and slices 256 or 768 deep were each behind on
geomean."""


def gemv_staged_a_column_b(op: GemmOp, base: GemmSchedule, target: Target) -> GemmSchedule | None:
    """:func:`gemv_base_schedule`'s pick ``base`` for ``op`` with A staged in shared memory (``smem_a``) and a
    column-major B, as :data:`GEMV_COLUMN_B_STAGED` says: K slices for about four blocks per SM (:func:`gemv_split`)
    but none deeper than 512, summed by the split-K kernel; where ``base`` has :data:`GEMV_SMEM_A_ROWS` rows per block,
    B (K × N float32) is at most 16 MiB with N ≥ 768 and K ≤ 4096 and A and B are read 4 wide along K (an IEEE float32
    product of a row-major A, a column-major B into a row-major C: torch's Linear with a few tokens, as measured);
    None elsewhere."""
    if gemv_column_b_unstaged(op, base) is not None:
        return None
    bn, rn, unroll, per_sm, deepest = GEMV_COLUMN_B_STAGED[:5]
    staged = replace(base, bn=bn, rn=rn, vec=4, unroll=unroll, smem_a=True, min_blocks=per_sm, split_k=1,
                     split_k_fused=False)
    split = max(gemv_split(op, staged, target), -(-op.k // deepest))
    return None if split > GEMV_MAX_SPLIT else replace(staged, split_k=split)


def gemv_column_b_unstaged(op: GemmOp, base: GemmSchedule) -> str | None:
    """Why :func:`gemv_staged_a_column_b` leaves A in registers for ``op`` and :func:`gemv_base_schedule`'s pick
    ``base`` (the first condition of :data:`GEMV_COLUMN_B_STAGED` that fails, for ``--lookup``), or None where it
    stages A."""
    most_bytes, fewest_n, most_k = GEMV_COLUMN_B_STAGED[5:]
    layouts = (op.layout_a, op.layout_b, op.layout_c)
    checks = (
        (op.dtype == "float32" and op.precision == "ieee", f"{op.dtype} {op.precision}: only IEEE float32 measured"),
        (layouts == ("row", "col", "row"), f"layouts A/B/C {'/'.join(layouts)}: only row/col/row measured"),
        (base.bm in GEMV_SMEM_A_ROWS, f"{base.bm} rows per block, not one of {GEMV_SMEM_A_ROWS}"),
        (op.align_a >= 4 and op.align_b >= 4, f"align_a {op.align_a}, align_b {op.align_b}: A and B need 4"),
        (op.n >= fewest_n, f"N = {op.n} < {fewest_n} (not measured)"),
        (op.k <= most_k, f"K = {op.k} > {most_k} (not measured)"),
        (op.k * op.n * 4 <= most_bytes, f"B of {op.k * op.n * 4 / 2**20:.1f} MiB > {most_bytes >> 20} MiB: a block "
                                        f"stages {base.bm} rows of A per 16 columns of B, slice by slice"),
    )
    return next((why for ok, why in checks if not ok), None)


GEMV_COLUMN_B_RING = (256, 8, 2, 4, 512)
""":func:`gemv_ring_column_b`: (threads per block, lanes along K per group ``k_lanes``, columns per group ``rn``,
``unroll``: steps of B the ring loads ahead, deepest K slice). Chosen from the SASS and the bytes, not from a timing
(sm_90, NVRTC 12.9, ``python benchmarks/sass_mix.py --variant ring``, 16×22016×4096 x @ W.T): 117 registers (two
blocks of 256 threads per SM, sixteen warps, against the register pick's 250 and eight) and 15.1 other instructions
per 64 FFMAs in the loop (791 per 640), with 4 KiB of B in flight per warp; a block covers 64 columns, so it stages
a quarter as many bytes of A as it reads of B (128 threads: half; the staged pick of ``gemv_staged_a_column_b``,
16 columns: as many). Four columns per group would halve that again but take 128 registers with one step ahead, or
146 at three blocks per SM with two. Timed on the H200 on 2026-12-05 (:data:`GEMV_TWELVE_ROWS_MEASURED`): slower than
the register pick on every product of at least 64 MiB (16 rows 0.538 → 0.455 of the copy, 8 rows 0.818 → 0.562), so
``schedule=None`` does not take it (docs/gemm.md, "Measured on the H200 (2026-12-05)")."""


def _torch_linear_rows(op: GemmOp, base: GemmSchedule) -> bool:
    """Whether ``op`` with ``base``'s rows is what the column-major-B variants (:func:`gemv_ring_column_b`,
    :func:`gemv_lanes_column_b`) apply to: an IEEE float32 product of a row-major A and a column-major B into a
    row-major C (torch's Linear with a few tokens), 8, 12 or 16 rows per block, A and B read 4 wide along K."""
    layouts = (op.layout_a, op.layout_b, op.layout_c) == ("row", "col", "row")
    return (op.dtype == "float32" and op.precision == "ieee" and layouts and base.bm in (8, 12, 16)
            and op.align_a >= 4 and op.align_b >= 4)


def gemv_ring_column_b(op: GemmOp, base: GemmSchedule, target: Target) -> GemmSchedule | None:
    """:func:`gemv_base_schedule`'s pick ``base`` for ``op`` as the column-major-B kernel with a ring
    (``smem_a``, ``spare_slot``, ``k_lanes``: :data:`GEMV_COLUMN_B_RING`): K slices at most 512 deep, as many as fill
    whole waves best (:func:`gemv_whole_waves`) from there to twice those for about four blocks per SM at least 32
    deep (:func:`gemv_split`); where ``base`` has 8, 12 or 16 rows per block and A and B are read 4 wide along K (an
    IEEE float32 product of a row-major A and a column-major B into a row-major C: torch's Linear with a few tokens);
    None elsewhere. Offered by the search and the benchmarks (``--variant ring``); ``schedule=None`` does not take it:
    timed slower than the register kernel (:data:`GEMV_COLUMN_B_RING`)."""
    bn, k_lanes, rn, unroll, deepest = GEMV_COLUMN_B_RING
    if not _torch_linear_rows(op, base):
        return None
    ring = replace(base, bn=bn, rn=rn, vec=4, unroll=unroll, smem_a=True, spare_slot=True, k_lanes=k_lanes,
                   min_blocks=0, split_k=1, split_k_fused=False)
    return gemv_staged_slices(op, ring, target, deepest)


GEMV_COLUMN_B_LANES = (16, 4, 2, 128, 1)
""":func:`gemv_lanes_column_b`: (lanes along K per group ``k_lanes``, columns per group ``rn``, ``unroll``, threads per
block ``bn``, ``min_blocks``). The kernel with A in registers (``schedule=None``'s for x @ W.T from 8 rows) with its
lanes in groups along K: a row of A a group of 8 lanes reads is 8 × 16 = 128 bytes, one L1 wavefront, which every
group of the warp reads too, where 32 lanes side by side read 512 distinct bytes (four wavefronts) per row (16
lanes: two). SASS (sm_90, NVRTC 12.9, ``python benchmarks/sass_mix.py``, ``…_lanes16_cpu_2026-12-05.json`` and
``…_registers_cpu_2026-12-05.json`` in ``benchmarks/results``), where ``schedule=None`` takes it (K split): at sixteen
rows 255 registers with 8 bytes spilled and one local load per pass, 612 instructions per 512 FFMAs (12.5 others per
64) against the register pick's 255 registers, no spill, 607 (11.9); at 8 and 12 rows the same loop as the register
pick (319 / 256, 463 / 384). Timed (H200,
:data:`GEMV_LANES_MEASURED`): 16 lanes ahead of 8 where the register pick splits K, neither ahead where it does not;
Nsight Compute on 16×22016×4096 (``ncu_h200_2026-12-05_session31.txt`` there) read both at two warps per scheduler,
the L1 hit rate 70 → 46 %, the same DRAM throughput (48 %): what holds x @ W.T's sixteen rows is warps in flight
(250 registers), not L1 wavefronts. ``schedule=None`` takes this form where the register pick splits K
(:func:`gemv_lanes_split_k`)."""


def gemv_lanes_column_b(op: GemmOp, base: GemmSchedule, target: Target, k_lanes: int | None = None,
                        rn: int | None = None, unroll: int | None = None, bn: int | None = None,
                        min_blocks: int | None = None) -> GemmSchedule | None:
    """:func:`gemv_base_schedule`'s pick ``base`` for ``op`` with A in registers and its lanes in groups of ``k_lanes``
    along K (:data:`GEMV_COLUMN_B_LANES` for each argument left None), its K slices recounted for the 32 / k_lanes
    times as many columns per block: for about four blocks per SM (:func:`gemv_split`), then the fewest from half of
    those that fill whole waves (:func:`gemv_whole_waves`). Where ``base`` keeps A in registers (``smem_a`` False)
    with 8, 12 or 16 rows per block, bm·rn a multiple of ``k_lanes`` (the group's butterfly) and A and B read 4 wide
    along K (an IEEE float32 product of a row-major A and a column-major B into a row-major C: torch's Linear with a
    few tokens); None elsewhere. Offered by the search and the benchmarks (``--variant lanes``)."""
    given = (k_lanes, rn, unroll, bn, min_blocks)
    k_lanes, rn, unroll, bn, min_blocks = (d if v is None else v for v, d in zip(given, GEMV_COLUMN_B_LANES,
                                                                                  strict=True))
    if not (_torch_linear_rows(op, base) and not base.smem_a and base.bm * rn % k_lanes == 0):
        return None
    lanes = replace(base, bn=bn, rn=rn, vec=4, unroll=unroll, k_lanes=k_lanes, min_blocks=min_blocks, split_k=1,
                    split_k_fused=False)
    pick = gemv_split(op, lanes, target)
    split = gemv_whole_waves(op, lanes, target, max(1, pick // 2), pick, gemv_min_depth(lanes.bm))
    return replace(lanes, split_k=split)


GEMV_LANES_MEASURED = "benchmarks/results/few_rows_h200_2026-12-05_session31"
"""Where :func:`gemv_lanes_split_k` was measured (H200, 2026-12-05, session 31, commit ccadaa3, ``python
benchmarks/gemv_fused.py --family colb_lanes``: ``gemv_colb_lanes.json``; speeds are ratios of the measured times;
in-sample, one run): over
x @ W.T with 8, 12 and 16 rows of the 17 LLM (N, K), 16 lanes per group with 4 columns per group at unroll 2 against
``schedule=None`` where its pick keeps A in registers and splits K (N × K = 4096 × 4096, 4096 × 11008, 4096 × 14336,
6144 × 4096): 1.070, 1.086 and 1.070× as fast (geomean of four products at 8, 12 and 16 rows; 0.98–1.16×), confirmed
after the change in a second run (commit 6c49f47, ``python benchmarks/gemv_hbm.py --m 8 12 16 --layouts NT`` beside
``--variant registers``: ``gemv_hbm_nt_after.json``, ``gemv_hbm_nt_registers.json``): GPU alone 1.079× (12 products,
0.98–1.20×; per call 1.082×), the 24 unchanged products ≥ 64 MiB within 1.6 % between the two runs; where the
pick keeps A in registers in one slice (eight products of N ≥ 11008): 0.922, 1.026, 0.977× (0.74–1.31×); where it
stages A (five products of at most 16 MiB): 0.919, 0.951, 0.987× (0.64–1.46×). 8 lanes per group: 0.983, 1.036, 0.970×
where the pick splits K."""


GEMV_LANES_RANGE = (4096, 6144, 4096, 14336)
""":func:`gemv_lanes_split_k`: (fewest and most columns N, shallowest and deepest K) measured
(:data:`GEMV_LANES_MEASURED`)."""


def gemv_lanes_split_k(op: GemmOp, s: GemmSchedule, target: Target) -> GemmSchedule | None:
    """:func:`gemv_schedule_before_lanes`'s pick ``s`` for ``op`` as the kernel with A in registers and its lanes in
    groups of 16 along K (:func:`gemv_lanes_column_b`: 4 columns per group, unroll 2, 128 threads; K slices recounted)
    where ``s`` keeps A in registers with a column-major B and splits K, within the measured N and K
    (:data:`GEMV_LANES_RANGE`) on an sm_90 target, as measured to pay (:data:`GEMV_LANES_MEASURED`); None elsewhere
    (and where :func:`gemv_lanes_column_b` does not apply: rows, layouts, alignment)."""
    fewest_n, most_n, shallowest_k, deepest_k = GEMV_LANES_RANGE
    measured = fewest_n <= op.n <= most_n and shallowest_k <= op.k <= deepest_k and target.cc == 90
    if not measured or s.smem_a or s.split_k == 1 or op.layout_b != "col":  # (s has 32 lanes: the pick before lanes)
        return None
    return gemv_lanes_column_b(op, s, target)


def gemv_register_waves(op: GemmOp, base: GemmSchedule, target: Target) -> GemmSchedule | None:
    """:func:`gemv_base_schedule`'s pick ``base`` for ``op`` with the K slices that fill whole waves
    (:func:`gemv_whole_waves`, from half of ``base``'s slices to twice them): ``base`` splits K for about four blocks
    per SM (:func:`gemv_split`), but with A in registers ptxas allocates 180-221 registers at 1-4 rows (unroll 8;
    sm_90, NVRTC 12.9 and 13.0) so two blocks of 128 threads fit an SM, and 1×14336×4096's 19 slices make 532 blocks
    for 264 slots: three waves, the last 2 % full. Where ``base`` keeps A in registers (at most 4 rows per block) and
    splits K, for an IEEE float32 product of row-major A and B (read 4 wide: N a multiple of 4; narrower loads take
    fewer registers, 114 at 2 wide, and more blocks per SM) into a row-major C, as measured, with slices no shallower
    than :func:`gemv_min_depth` (64); None elsewhere."""
    measured = (op.dtype == "float32" and op.precision == "ieee" and op.layout_a == "row" and op.layout_b == "row"
                and op.layout_c == "row" and op.align_b >= 4 and base.vec == 4)
    if not (measured and base.bm <= 4 and not base.smem_a and base.col_groups == 1 and base.split_k > 1):
        return None
    split = gemv_whole_waves(op, base, target, max(1, base.split_k // 2), base.split_k, gemv_min_depth(base.bm))
    return replace(base, split_k=split, split_k_fused=False) if split != base.split_k else None


GEMV_WAVE_SLACK = 0.03
""":func:`gemv_whole_waves` takes the fewest K slices whose grid fills its last wave within this share of the best."""


def gemv_whole_waves(op: GemmOp, s: GemmSchedule, target: Target, lo: int, pick: int, min_depth: int = 32) -> int:
    """The K slices (``lo`` .. 2·``pick``, each at least ``min_depth`` deep, at most :data:`GEMV_MAX_SPLIT`) whose grid of
    ``s``'s blocks fills the largest share of its waves (slots: SMs × the blocks per SM at the register cap of its
    ``__launch_bounds__`` and the slice's shared memory), the fewest slices within :data:`GEMV_WAVE_SLACK` of the
    best (each slice writes and reads back M·N float32 of workspace), among the counts that leave no slice empty
    (slices are rounded up to ``bk``: 65 slices of 4096 are 64 deep, the 65th empty); ``pick`` itself where its grid
    is under one wave. 16×14336×4096 with 128-thread blocks has 28 blocks of columns: ``pick`` = 19 slices make 532
    blocks for 528 slots, a second wave of 4 blocks (a share of 0.50); 18 make 504 (0.95). Measured: ``benchmarks/results/gemv_smem_a_h200.json`` (sixteen rows, K slices for four and eight blocks
    per SM, 128 or 256 deep): the share of the waves filled tracked the ratio to cuBLAS (16×14336×4096 1.10× at 0.50,
    1.33–1.35× at 0.67; 16×22016×4096 1.22× at 0.65, 1.38× at 1.00)."""
    columns, _, rows = grid(op, s)
    col_blocks = columns * rows
    registers = min(255, register_cap(s.threads, max(1, s.min_blocks)))  # what __launch_bounds__ allows

    def at_once(split: int) -> Waves:  # the grid over its slots; deeper slices of A may leave fewer per SM
        staged = gemv_smem_a_bytes(op.k, s, split, op.layout_b == "col")
        per_sm = occupancy(target, s.threads, registers, staged).blocks_per_sm
        return waves(col_blocks * split, target.sm_count, max(1, per_sm))

    def filled(split: int) -> float:
        return at_once(split).efficiency

    if col_blocks * pick < at_once(pick).slots:  # under one wave: more blocks, not fuller waves, is what there is to
        return pick  # gain
    top = max(lo, min(GEMV_MAX_SPLIT, 2 * pick, op.k // min_depth))
    # slices are rounded up to bk: a count whose last slices start past K launches blocks that only write zeros
    whole = [split for split in range(lo, top + 1)
             if -(-op.k // gemv_slice_depth(op.k, s, split)) == split] or [pick]
    best = max(filled(split) for split in whole)
    return next(split for split in whole if filled(split) >= best - GEMV_WAVE_SLACK)


def gemv_block_rows(m: int) -> int:
    """Rows of C per block of :func:`gemv_schedule` (``bm``): M rounded up to a power of two, at most 16."""
    return min(16, 1 << max(m - 1, 0).bit_length())


def gemv_twelve_rows_fit(m: int) -> bool:
    """Whether 12 rows per block (``bm=12``) cover ``m`` rows with fewer rows of zeros than :func:`gemv_block_rows`'s
    16: 9–12 rows. The search offers it there (``rows_three_quarters``); ``schedule=None`` takes it where measured to
    pay (:func:`gemv_twelve_rows`)."""
    return 9 <= m <= 12


def gemv_split(op: GemmOp, s: GemmSchedule, target: Target, blocks_per_sm: int = 4,
               min_depth: int | None = None) -> int:
    """The K slices :func:`gemv_schedule` gives the GEMV schedule ``s`` (its block width and rows as they are):
    enough for about ``blocks_per_sm`` blocks per SM over ``s``'s blocks of columns, at most :data:`GEMV_MAX_SPLIT`,
    each slice at least ``min_depth`` deep (None: :func:`gemv_min_depth` of ``s.bm``; the search seeds and
    ``benchmarks/gemv_fused.py`` vary ``blocks_per_sm`` and ``min_depth``)."""
    depth = gemv_min_depth(s.bm) if min_depth is None else min_depth
    col_blocks = plan_gemm(op, replace(s, split_k=1, split_k_fused=False), target).grid[0]
    return max(1, min(GEMV_MAX_SPLIT, -(-blocks_per_sm * target.sm_count // col_blocks), op.k // depth))


GEMV_MIN_DEPTH = {16: 32}
"""Rows per block (``bm``) -> the shallowest K slice :func:`gemv_split` makes (64 for other ``bm``). Measured on the
H200 (``python benchmarks/gemv_fused.py --family depth``, 2026-12-02, ``benchmarks/results/gemv_depth_h200.json``,
the split-K kernel at slices at least 64, 32, 16 or 8 deep): over the LLM set's 17 (N, K) as x @ W with sixteen rows
the geomean ratio to cuBLAS went 1.09 → 1.15 at 32 (16×768×768 0.60 → 0.80, 16×2304×768 0.87 → 1.13, 16×768×3072
0.84 → 1.01; one loss over 2 %, 16×4096×4096 2.07 → 1.87); with four rows 1.37 → 1.38, with one 0.94 → 0.93
(1×1024×4096 0.94 → 0.86), and DeepBench's few-column products run as rows 0.93 → 0.95 with losses to 6 %: those
keep 64. Shallower slices help only where K / 64 capped the split, and a block of sixteen rows does sixteen times the
FMAs of one row for each element of B it loads. Only M = 16 was measured; 9–15 rows share its block of sixteen (and
tf32 few-row products run exact on this kernel), so they take 32 too."""


def gemv_min_depth(bm: int) -> int:
    """The shallowest K slice of a GEMV schedule with ``bm`` rows per block (:data:`GEMV_MIN_DEPTH`, else 64)."""
    return GEMV_MIN_DEPTH.get(bm, 64)


GEMV_ROW_B_UNROLL = 8
"""K steps in flight per thread (``unroll``) of :func:`gemv_schedule` with a row-major B. Measured on the H200 in two
runs (``python benchmarks/gemv_unroll.py``, 2026-12-01, benchmarks/results/gemv_unroll_h200.json; the other run's
figures agree within 0.01): over the LLM set's 17 (N, K) as x @ W, the geomean ratio to cuBLAS for unroll
1 / 2 / 4 / 8 was 0.82 / 0.89 / 0.93 / 0.94 with one row, 1.27 / 1.31 / 1.37 / 1.37 with four, 1.19 / 1.24 / 1.28 /
1.28 with eight and 0.99 / 1.04 / 1.07 / 1.10 with sixteen (the earlier picks were 2 up to four rows, else 1). Of six
few-column products run as rows, three gained 19-24 % on the earlier pick and three lost 0.5-2 % (7680×4×2560,
1024×8×500000, 6144×1×2048). With sixteen rows and a row-major A, ptxas spills 40-72 bytes at unroll ≥ 4 (none at
2); those kernels were the fastest measured regardless. A column-major B and 16-bit inputs keep the earlier picks
(not measured)."""

GEMV_FUSED_COLUMN_B = True
"""One float32 row times a column-major B (torch's Linear, ``x @ W.T``) runs 4 warps per block (a warp per column)
and, with split-K, sums its slices in the kernel (``split_k_fused``): the last block of each group of 4 columns adds
the slices' partial sums, a few values per lane. Measured on the H200 (``python benchmarks/gemv_fused.py``,
2026-12-02, ``benchmarks/results/gemv_fused_h200.json``, variant ``fused bn/2`` against ``two``, the earlier pick of
8 warps and the split-K kernel): over the LLM set's 17 (N, K) the ratio to cuBLAS went 0.77–1.16 → 0.86–1.35,
geomean about +7 %, none lower by more than 2 %; the gains are on the products of 6–33 µs (1×768×768 0.81 → 1.00,
1×1024×4096 0.77 → 0.86; 1×2304×768 1.01 → 1.35 is the 4 warps alone: it no longer splits K). With a row-major B
the fused sum stays behind the split-K kernel (0.97 geomean over 13 x @ W products once its loads no longer waited
on a branch, ``benchmarks/results/gemv_fused_nn_nobranch_h200.json``): one block there sums every slice of 512
columns × the rows; only small products take it (:data:`GEMV_ONE_LAUNCH_MAX_BYTES`). 16-bit inputs were not
measured and keep the earlier pick."""

GEMV_MAX_SPLIT = 512
"""The most K slices :func:`gemv_schedule` gives a GEMV-style product (rule ``gemv_split_k_range`` allows 1024). Few
columns of blocks need many slices to keep four blocks on each SM: 512×1×500000 has one block of columns."""


GEMM = Family("gemm", GemmOp, GemmSchedule, GEMM_RULES, plan_gemm, emit_gemm, default_schedule,
              emit_followup=emit_splitk_reduce, builtin_schedule=builtin_schedule, builtin_choice=builtin_choice)

"""GemmSchedule: how a GEMM is tiled onto the GPU, and its rule table.

Tiling (``docs/design.md``, "Background"): a bm×bn block tile in shared memory cuts global
traffic by ½(1/bm + 1/bn), an rm×rn thread tile in registers cuts shared-memory traffic by
½(1/rm + 1/rn). A warp tile wm×wn groups the 32 threads of a warp so their shared-memory reads broadcast.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from .. import dtypes
from .. import rules as R
from ..errors import ScheduleError
from ..spec import ScheduleRecord, as_int, schedule_error
from ..target import Target
from .op import MMA_DTYPES

GEMM_RULES: tuple[R.Rule, ...] = (
    R.Rule("positive_sizes", "BM >= 1 and BN >= 1 and BK >= 1",
           "{cls} tile sizes must be ≥ 1 (bm={BM}, bn={BN}, bk={BK})"),
    R.Rule("thread_tile_positive", "RM >= 1 and RN >= 1",
           "{cls} thread tile sizes must be ≥ 1 (rm={RM}, rn={RN})", when="MMA == 0"),
    R.Rule("tile_sizes_bounded", "BM <= 1024 and BN <= 1024 and BK <= 1024",
           "{cls} tile sizes must be ≤ 1024 (bm={BM}, bn={BN}, bk={BK})"),
    R.Rule("thread_tile_bounded", "RM <= 64 and RN <= 64",
           "{cls} thread tiles must be ≤ 64 (rm={RM}, rn={RN})", when="MMA == 0"),
    R.Rule("warp_tile_positive", "WM >= 1 and WN >= 1 and WM <= 4096 and WN <= 4096",
           "{cls} warp tile wm×wn={WM}×{WN} must be positive (give both, or 0 and 0 to choose automatically)"),
    R.Rule("vec_width", "VEC == 1 or VEC == 2 or VEC == 4",
           "{cls}.vec={VEC} must be 1, 2 or 4 elements per global load", when="MMA == 0"),
    # the fourth kind ('dmma') through `when`: the expression is every kernel's static_assert, and the shipped tuned
    # records hash their kernels' source (tiledsl.registry)
    R.Rule("mma_kind", "MMA == 0 or MMA == 1 or MMA == 2",
           "{cls}.mma must be 'fma', 'mma_sync', 'wgmma' or 'dmma'", when="MMA != 3"),
    R.Rule("kernel_kind", "KERNEL == 0 or KERNEL == 1", "{cls}.kernel must be 'tiled' or 'gemv'"),
    R.Rule("gemv_on_fma", "MMA == 0",
           "{cls}.kernel='gemv' runs on the FMA units (mma='fma'), the FP64 tensor cores (mma='dmma', float32 inputs) "
           "or, for precision='3xtf32', mma.sync on TF32 (mma='mma_sync'), not wgmma",
           when="KERNEL == 1 and MMA != 1 and MMA != 3"),
    R.Rule("dmma_gemv_only", "KERNEL == 1",
           "{cls}.mma='dmma' (the FP64 tensor cores) runs the GEMV-style kernel only: kernel='gemv'", when="MMA == 3"),
    R.Rule("gemv_rows", "BM <= 16",
           "{cls}.bm={BM} must be ≤ 16 with kernel='gemv' (the rows of A a thread keeps in registers)",
           when="KERNEL == 1"),
    R.Rule("gemv_mma_rows", "BM == 16",
           "{cls}.bm={BM} must be 16 with kernel='gemv' on the tensor cores (mma='mma_sync' or 'dmma': the rows of one "
           "m16n8k8 or m16n8k16 fragment; rows past M are read from row M − 1 and never stored)",
           when="KERNEL == 1 and (MMA == 1 or MMA == 3)"),
    R.Rule("gemv_mma_columns", "RN % 8 == 0 and RN >= 8 and RN <= 64",
           "{cls}.rn={RN} must be 8, 16, …, 64 with kernel='gemv' on the tensor cores (mma='mma_sync' or 'dmma': a "
           "warp's columns of C, whole n8 fragments, at most 8)", when="KERNEL == 1 and (MMA == 1 or MMA == 3)"),
    R.Rule("gemv_mma_unroll", "UNROLL >= 1 and UNROLL <= 8",
           "{cls}.unroll={UNROLL} must be in 1..8 with kernel='gemv' on the tensor cores (mma='mma_sync' or 'dmma': "
           "k16 steps per thread in flight)", when="KERNEL == 1 and (MMA == 1 or MMA == 3)"),
    R.Rule("gemv_mma_plain", "SMEM_A == 0 and SPARE_SLOT == 0 and K_LANES == 32 and COL_GROUPS == 1",
           "{cls}: kernel='gemv' on the tensor cores (mma='mma_sync' or 'dmma') reads A and B from global memory, a "
           "warp per rn columns: smem_a, spare_slot, k_lanes and col_groups keep their defaults (got smem_a={SMEM_A}, "
           "spare_slot={SPARE_SLOT}, k_lanes={K_LANES}, col_groups={COL_GROUPS})",
           when="KERNEL == 1 and (MMA == 1 or MMA == 3)"),
    R.Rule("gemv_block_threads", "BN % 32 == 0 and BN >= 32",
           "{cls}.bn={BN} must be a multiple of 32 with kernel='gemv' (threads per block, whole warps)",
           when="KERNEL == 1"),
    R.Rule("stages_range", "STAGES >= 1 and STAGES <= 8", "{cls}.stages={STAGES} must be in 1..8"),
    R.Rule("gemv_stages_at_most_2", "STAGES <= 2",
           "{cls}.stages={STAGES} must be 1 or 2 with kernel='gemv' (it keeps no shared-memory tiles)",
           when="KERNEL == 1"),
    R.Rule("fma_cp_async_float32", "STAGES <= 2 or ITEMSIZE == 4",
           "{cls}.stages={STAGES}: the FMA kernel's cp.async pipeline (stages ≥ 3) copies float32 tiles "
           "unconverted; {ITEMSIZE}-byte inputs take stages ≤ 2 (register prefetch) or a tensor-core mma",
           scope="op", when="MMA == 0 and KERNEL == 0"),
    R.Rule("fma_cp_async_needs_sm_80", "STAGES <= 2 or CC >= 80",
           "{cls}.stages={STAGES}: the FMA kernel's cp.async pipeline (stages ≥ 3) needs sm_80 or newer, "
           "not cc {CC}", scope="target", resource=True, when="MMA == 0 and KERNEL == 0"),
    R.Rule("mma_stages_at_least_2", "STAGES >= 2",
           "{cls}.stages={STAGES} must be ≥ 2 with mma='mma_sync' (cp.async pipeline)", when="MMA == 1 and KERNEL == 0"),
    R.Rule("wgmma_block_rows", "BM % 64 == 0 and BM <= 256",
           "{cls}.bm={BM} must be 64, 128, 192 or 256 with mma='wgmma' (one warpgroup per 64 rows)",
           when="MMA == 2"),
    R.Rule("wgmma_block_columns", "BN % 16 == 0 and BN <= 256",
           "{cls}.bn={BN} must be a multiple of 16 up to 256 with mma='wgmma' (m64nNk16, N/2 accumulators)",
           when="MMA == 2"),
    R.Rule("wgmma_bk_64", "BK == 64 or BK == 32",
           "{cls}.bk={BK} must be 64 (16-bit inputs) or 32 (tf32) with mma='wgmma' (one 128-byte swizzled row)",
           when="MMA == 2"),
    R.Rule("wgmma_stages_at_least_3", "STAGES >= 3",
           "{cls}.stages={STAGES} must be ≥ 3 with mma='wgmma' (one stage in use by the tensor cores, one "
           "being multiplied, one being filled)", when="MMA == 2"),
    R.Rule("wgmma_copies_even", "(BM * 8) % LOADERS == 0 and (BN * 8) % LOADERS == 0",
           "{cls} tiles bm×64={BM}×64 and bn×64={BN}×64 must split into 16-byte copies evenly over the "
           "{LOADERS} threads that load them with mma='wgmma'", when="MMA == 2 and WARP_SPECIALIZE == 0"),
    R.Rule("wgmma_no_padding", "SMEM_PAD == 0",
           "{cls}.smem_pad={SMEM_PAD} must be 0 with mma='wgmma' (the 128-byte swizzle keeps wgmma free of bank "
           "conflicts)", when="MMA == 2"),
    R.Rule("warp_specialize_needs_wgmma", "MMA == 2",
           "{cls}.warp_specialize=True needs mma='wgmma' (a producer warpgroup feeds wgmma consumers)",
           when="WARP_SPECIALIZE == 1"),
    R.Rule("warp_specialize_rows", "WARP_SPECIALIZE == 0 or BM == 128",
           "{cls}.bm={BM} must be 128 with warp_specialize (two consumer warpgroups of 64 rows share the "
           "registers the producer gives up: 40 + 2·232 = 3·168 per thread, the allocation ptxas makes for "
           "384 threads; one consumer warpgroup would wait forever in setmaxnreg.inc)", when="MMA == 2"),
    R.Rule("fragment_prefetch_needs_unrolled_double_buffer",
           "MMA == 0 and KERNEL == 0 and STAGES == 2 and UNROLL == BK",
           "{cls}.fragment_prefetch=True needs the FMA kernel's register-prefetch double buffer with the k loop "
           "fully unrolled (mma='fma', kernel='tiled', stages=2, unroll=bk; got mma kind {MMA} (0 = 'fma', "
           "1 = 'mma_sync', 2 = 'wgmma', 3 = 'dmma'), kernel kind {KERNEL} (0 = 'tiled', 1 = 'gemv'), stages={STAGES}, "
           "unroll={UNROLL}, bk={BK})", when="FRAGMENT_PREFETCH == 1 and MMA != 3"),
    # mma='dmma' (kernel='gemv' only, rule dmma_gemv_only): fragment_prefetch is its ring of UNROLL k16 steps
    R.Rule("persistent_needs_tma", "MMA == 2 and WARP_SPECIALIZE == 1 and SPLIT_K == 1",
           "{cls}.persistent=True needs mma='wgmma' with warp_specialize=True and split_k=1 (the TMA producer "
           "walks the block's C tiles; got mma kind {MMA}, warp_specialize={WARP_SPECIALIZE}, split_k={SPLIT_K})",
           when="PERSISTENT == 1"),
    R.Rule("stream_k_on_fma_tiles", "MMA == 0 and KERNEL == 0 and SPLIT_K == 1",
           "{cls}.stream_k=True needs the FMA tiled kernel without split-K (mma='fma', kernel='tiled', split_k=1; "
           "got mma kind {MMA}, kernel kind {KERNEL}, split_k={SPLIT_K}): its last waves share K iterations "
           "instead of K slices", when="STREAM_K == 1"),
    R.Rule("split_k_fused_on_gemv", "KERNEL == 1 and SPLIT_K > 1",
           "{cls}.split_k_fused=True needs kernel='gemv' and split_k > 1 (got kernel kind {KERNEL} (0 = 'tiled', "
           "1 = 'gemv'), split_k={SPLIT_K}): the last of a column group's K slices to finish sums them all",
           when="SPLIT_K_FUSED == 1"),
    R.Rule("warp_specialize_registers", "WARP_SPECIALIZE == 0 or (BN >= 96 and MIN_BLOCKS == 1)",
           "{cls}.bn={BN}, min_blocks={MIN_BLOCKS}: warp_specialize needs bn ≥ 96 and min_blocks = 1 (ptxas then "
           "allocates 168 registers per thread, the pool setmaxnreg redistributes; with fewer accumulators it "
           "allocates 80 and the consumers' setmaxnreg.inc could never be granted)", when="MMA == 2"),
    R.Rule("mma_warp_tile_shape", "WM % 16 == 0 and WN % 16 == 0",
           "{cls} warp tile wm×wn={WM}×{WN} must be multiples of 16 with mma='mma_sync' (m16n8k16 "
           "fragments, B loaded two n8 fragments at a time)", when="MMA == 1 and KERNEL == 0"),
    R.Rule("mma_bk_multiple_of_16", "BK % 16 == 0",
           "{cls}.bk={BK} must be a multiple of 16 with mma='mma_sync' or 'dmma' (k16 steps)",
           when="MMA == 1 or MMA == 3"),
    R.Rule("mma_accumulators_fit_registers", "WM * WN <= 4096",
           "{cls} warp tile wm·wn={WM}·{WN} gives WM·WN/32 > 128 float32 accumulators per thread with "
           "mma='mma_sync' (registers would spill)", when="MMA == 1 and KERNEL == 0"),
    R.Rule("mma_tile_copies_even", "(BM * BK) % (THREADS * 8) == 0 and (BK * BN) % (THREADS * 8) == 0",
           "{cls} tiles bm·bk={BM}·{BK} and bk·bn={BK}·{BN} must split into 16-byte copies (8 elements) "
           "evenly over {THREADS} threads with mma='mma_sync'", when="MMA == 1 and KERNEL == 0"),
    R.Rule("mma_pad_16_bytes", "SMEM_PAD % 8 == 0",
           "{cls}.smem_pad={SMEM_PAD} must be a multiple of 8 elements (16 bytes) with mma='mma_sync' "
           "(cp.async and ldmatrix rows are 16-byte aligned; 8 keeps ldmatrix free of bank conflicts)", when="MMA == 1 and KERNEL == 0"),
    R.Rule("thread_tile_divides_block_m", "BM % RM == 0", "{cls}.bm={BM} is not a multiple of rm={RM}", when="MMA == 0 and KERNEL == 0"),
    R.Rule("thread_tile_divides_block_n", "BN % RN == 0", "{cls}.bn={BN} is not a multiple of rn={RN}", when="MMA == 0 and KERNEL == 0"),
    R.Rule("fragment_width_m", "RM % 4 == 0 or RM == 1 or RM == 2",
           "{cls}.rm={RM} must be 1, 2 or a multiple of 4 (fragments are read 4 wide)", when="MMA == 0 and KERNEL == 0"),
    R.Rule("fragment_width_n", "RN % 4 == 0 or RN == 1 or RN == 2",
           "{cls}.rn={RN} must be 1, 2 or a multiple of 4 (fragments are read 4 wide)", when="MMA == 0 and KERNEL == 0"),
    R.Rule("warp_tile_divides_block", "BM % WM == 0 and BN % WN == 0",
           "{cls} warp tile wm×wn={WM}×{WN} must divide the block tile bm×bn={BM}×{BN}", when="KERNEL == 0"),
    R.Rule("thread_tile_divides_warp", "WM % RM == 0 and WN % RN == 0",
           "{cls} thread tile rm×rn={RM}×{RN} must divide the warp tile wm×wn={WM}×{WN}", when="MMA == 0 and KERNEL == 0"),
    R.Rule("warp_is_32_threads", "WARP_LANES == 32",
           "{cls} warp tile wm×wn={WM}×{WN} over thread tile rm×rn={RM}×{RN} gives {WARP_LANES} "
           "threads, not 32", when="MMA == 0 and KERNEL == 0"),
    R.Rule("threads_at_most_1024", "THREADS <= 1024",
           "{cls} threads={THREADS} exceeds 1024 per block"),
    R.Rule("vec_divides_tile", "BM % VEC == 0 and BN % VEC == 0 and BK % VEC == 0",
           "{cls}.vec={VEC} must divide bm={BM}, bn={BN} and bk={BK}", when="MMA == 0 and KERNEL == 0"),
    R.Rule("b_tile_starts_16_byte_aligned", "(STAGES * BK * (BM + SMEM_PAD)) % 4 == 0",
           "{cls} B's shared-memory tile starts after stages·bk·(bm + smem_pad) = {STAGES}·{BK}·({BM} + {SMEM_PAD}) "
           "floats of A: not a multiple of 4, so its 16-byte fragment reads and copies would be misaligned",
           when="MMA == 0 and KERNEL == 0 and ((BM * BK) % (THREADS * VEC) != 0 or (BK * BN) % (THREADS * VEC) != 0)"),
    R.Rule("unroll_divides_bk", "UNROLL >= 1 and BK % UNROLL == 0",
           "{cls}.unroll={UNROLL} must be ≥ 1 and divide bk={BK}", when="MMA == 0 and KERNEL == 0"),
    R.Rule("smem_pad_keeps_16_bytes", "SMEM_PAD >= 0 and SMEM_PAD <= 64 and SMEM_PAD % 4 == 0",
           "{cls}.smem_pad={SMEM_PAD} must be a multiple of 4 elements in 0..64 (keeps 16-byte shared "
           "accesses aligned)"),
    R.Rule("accumulators_fit_registers", "RM * RN <= 128",
           "{cls} thread tile rm·rn={RM}·{RN} accumulators exceed 128 (registers would spill)", when="MMA == 0"),
    R.Rule("swizzle_range", "SWIZZLE >= 1 and SWIZZLE <= 65535", "{cls}.swizzle={SWIZZLE} must be in 1..65535"),
    R.Rule("swizzle_group_fits_int", "SWIZZLE * (OP_N + BN - 1) <= 2147483647 * BN and "
           "SWIZZLE * (OP_M + BN - 1) <= 2147483647 * BN",
           "{cls}.swizzle={SWIZZLE} over M={OP_M}, N={OP_N} in bn={BN} columns: the rasterization's group of "
           "swizzle × ⌈N / bn⌉ tiles (⌈M / bn⌉ for Cᵀ = Bᵀ·Aᵀ) must fit a 32-bit int, 2^31 − 1", scope="op",
           when="KERNEL == 0"),
    R.Rule("split_k_range", "SPLIT_K >= 1 and SPLIT_K <= 64", "{cls}.split_k={SPLIT_K} must be in 1..64",
           when="KERNEL != 1"),
    R.Rule("gemv_split_k_range", "SPLIT_K >= 1 and SPLIT_K <= 1024",
           "{cls}.split_k={SPLIT_K} must be in 1..1024 with kernel='gemv' (its blocks are a few rows of C each: a "
           "long K on few columns needs hundreds of slices to fill the GPU)", when="KERNEL == 1"),
    R.Rule("min_blocks_range", "MIN_BLOCKS >= 1 and MIN_BLOCKS <= 32",
           "{cls}.min_blocks={MIN_BLOCKS} must be in 1..32 (or 0 for automatic)"),
    R.Rule("mma_needs_16_bit_inputs", "MMA == 0 or MMA == 3 or DTYPE_16BIT == 1 or (TF32 == 1 and MMA == 2) "
           "or (TF32X3 == 1 and MMA == 1 and KERNEL == 1)",
           "{cls}.mma selects tensor cores, which need float16 or bfloat16 inputs, or float32 with "
           "precision='tf32' and mma='wgmma', or precision='3xtf32' and kernel='gemv' with mma='mma_sync' (IEEE "
           "float32 runs on mma='fma', or on the FP64 tensor cores with kernel='gemv' and mma='dmma')", scope="op"),
    R.Rule("gemv_mma_3xtf32", "TF32X3 == 1",
           "{cls}: kernel='gemv' with mma='mma_sync' multiplies float32 inputs split into TF32 parts: the op must be "
           "float32 with precision '3xtf32' (got 16-bit inputs: {DTYPE_16BIT}, tf32: {TF32}; 16-bit inputs take the "
           "tiled tensor-core kernels, IEEE float32 mma='dmma')", scope="op",
           when="KERNEL == 1 and MMA == 1"),
    R.Rule("gemv_dmma_float32", "DTYPE_16BIT == 0 and TF32 == 0 and TF32X3 == 0",
           "{cls}: kernel='gemv' with mma='dmma' widens float32 inputs to float64 exactly: the op must be float32 with "
           "precision 'ieee' (got 16-bit inputs: {DTYPE_16BIT}, tf32: {TF32}, 3xtf32: {TF32X3}; precision='3xtf32' "
           "takes mma='mma_sync')", scope="op", when="MMA == 3"),
    R.Rule("gemv_mma_layouts", "LAYOUT_A_ROW == 1 and LAYOUT_C_COL == 0",
           "{cls}: kernel='gemv' on the tensor cores reads A row-major (x, K contiguous) into a row-major C (got A "
           "row-major: {LAYOUT_A_ROW}, C column-major: {LAYOUT_C_COL})",
           scope="op", when="KERNEL == 1 and (MMA == 1 or MMA == 3)"),
    R.Rule("gemv_mma_row_b_columns", "LAYOUT_B_COL == 1 or RN % 32 == 0",
           "{cls}.rn={RN} must be a multiple of 32 with kernel='gemv' on the tensor cores and a row-major B (x @ W: a lane "
           "reads 4 adjacent columns for 4 n8 fragments)", scope="op", when="KERNEL == 1 and (MMA == 1 or MMA == 3)"),
    R.Rule("gemv_mma_vec", "VEC == 4 or VEC == 1 and MMA == 3 and LAYOUT_B_COL == 0",
           "{cls}.vec={VEC}: kernel='gemv' on the tensor cores reads B 4 float32 wide (vec=4), or 4 bytes at a time "
           "(vec=1) on the FP64 tensor cores (mma='dmma') with a row-major B (x @ W; got mma kind {MMA}: 1 = "
           "'mma_sync', 3 = 'dmma'; B column-major: {LAYOUT_B_COL})", scope="op",
           when="KERNEL == 1 and (MMA == 1 or MMA == 3)"),
    R.Rule("gemv_mma_16_byte_operands", "ALIGN_A == 4 and (ALIGN_B == 4 or VEC == 1)",
           "{cls}: kernel='gemv' on the tensor cores reads A and B 4 float32 wide along K: base addresses, leading "
           "dimensions and K must be multiples of 4 elements (align_a={ALIGN_A}, align_b={ALIGN_B}; with "
           "mma='dmma' and a row-major B, vec=1 reads B 4 bytes at a time at any alignment)", scope="op",
           when="KERNEL == 1 and (MMA == 1 or MMA == 3)"),
    R.Rule("gemv_mma_needs_sm_80", "CC >= 80",
           "{cls}: kernel='gemv' with mma='mma_sync' (m16n8k8 TF32) needs sm_80 or newer, not cc {CC}",
           scope="target", resource=True, when="KERNEL == 1 and MMA == 1"),
    R.Rule("dmma_needs_sm_90", "CC >= 90",
           "{cls}: mma='dmma' (mma.sync m16n8k16 on float64) needs sm_90 or newer, not cc {CC}",
           scope="target", resource=True, when="MMA == 3"),
    R.Rule("wgmma_row_128_bytes", "BK * ITEMSIZE == 128",
           "{cls}.bk={BK} must make one 128-byte swizzled row of {ITEMSIZE}-byte elements with mma='wgmma' "
           "(bk=64 for 16-bit inputs, 32 for tf32)", scope="op", when="MMA == 2"),
    R.Rule("tf32_k_major_operands", "TF32 == 0 or (LAYOUT_A_ROW == 1 and LAYOUT_B_COL == 1)",
           "{cls}: tf32 wgmma reads both operands K-major (A row-major, B column-major); tiledsl.gemm makes "
           "K-major copies of other layouts first", scope="op", when="MMA == 2"),
    R.Rule("tf32_needs_tma", "TF32 == 0 or WARP_SPECIALIZE == 1",
           "{cls}.warp_specialize must be True for tf32 with mma='wgmma' (TMA copies)", scope="op", when="MMA == 2"),
    R.Rule("wgmma_mn_major_b_in_64_blocks", "LAYOUT_B_COL == 1 or BN % 64 == 0",
           "{cls}.bn={BN} must be a multiple of 64 with mma='wgmma' and a row-major B (its tile is stored in "
           "64-column swizzled blocks)", scope="op", when="MMA == 2"),
    R.Rule("wgmma_16_byte_operands", "ALIGN_A * ITEMSIZE == 16 and ALIGN_B * ITEMSIZE == 16",
           "{cls}.mma='wgmma' copies 16-byte chunks: A and B need 16-byte alignment of base address, leading "
           "dimension and K (align_a={ALIGN_A}, align_b={ALIGN_B} elements of {ITEMSIZE} bytes); use "
           "mma='mma_sync' (16-bit) or mma='fma'", scope="op", when="MMA == 2"),
    R.Rule("column_major_c_on_gemv", "LAYOUT_C_COL == 0 or KERNEL == 1",
           "{cls}.kernel must be 'gemv' for a column-major C (GemmOp.layout_c='col'); tiledsl.gemm computes "
           "other products into a column-major C as Cᵀ = Bᵀ·Aᵀ", scope="op"),
    R.Rule("gemv_column_tile_fits_registers", "LAYOUT_B_COL == 0 or BM * RN <= 64",
           "{cls} bm·rn={BM}·{RN} accumulators exceed 64 with kernel='gemv' and a column-major B (a warp keeps "
           "bm rows × rn columns of partial sums besides bm·vec elements of A)", scope="op", when="KERNEL == 1 and MMA == 0"),
    R.Rule("col_groups_on_gemv", "KERNEL == 1 and (COL_GROUPS == 2 or COL_GROUPS == 4 or COL_GROUPS == 8)",
           "{cls}.col_groups={COL_GROUPS} must be 1, or 2, 4 or 8 with kernel='gemv' (groups of vec columns per "
           "thread over a row-major B; kernel kind {KERNEL}: 0 = 'tiled', 1 = 'gemv')", when="COL_GROUPS != 1"),
    R.Rule("gemv_slices_start_on_vectors", "BK % 4 == 0",
           "{cls}.bk={BK} must be a multiple of 4 with kernel='gemv': K slices start on multiples of bk, and A and B "
           "are read up to 4 elements at a time along K from there", scope="op", when="KERNEL == 1"),
    R.Rule("col_groups_need_row_major_b", "LAYOUT_B_COL == 0",
           "{cls}.col_groups={COL_GROUPS} needs a row-major B (N contiguous); with a column-major B each warp reads "
           "rn columns along K", scope="op", when="COL_GROUPS != 1"),
    R.Rule("col_groups_fit_registers", "BM * COL_GROUPS * (VEC if VEC < ALIGN_B else ALIGN_B) <= 64",
           "{cls} bm·col_groups·min(vec, align_b)={BM}·{COL_GROUPS}·min({VEC}, {ALIGN_B}) accumulators exceed 64 (a "
           "thread keeps bm rows × col_groups groups of B's load width in columns); lower col_groups or vec",
           scope="op", when="COL_GROUPS != 1"),
    R.Rule("smem_a_on_gemv", "KERNEL == 1 and BM % 4 == 0 and COL_GROUPS == 1",
           "{cls}.smem_a=True needs kernel='gemv', bm a multiple of 4 (with a row-major B one 16-byte shared-memory "
           "read covers 4 rows of A) and col_groups=1 (got kernel kind {KERNEL} (0 = 'tiled', 1 = 'gemv'), bm={BM}, "
           "col_groups={COL_GROUPS})", when="SMEM_A == 1"),
    R.Rule("spare_slot_on_staged_a", "KERNEL == 1 and SMEM_A == 1",
           "{cls}.spare_slot=True needs kernel='gemv' and smem_a=True (it gives smem_a's loop a ring of B loads; got "
           "kernel kind {KERNEL} (0 = 'tiled', 1 = 'gemv'), smem_a={SMEM_A})", when="SPARE_SLOT == 1"),
    R.Rule("k_lanes_range", "K_LANES == 4 or K_LANES == 8 or K_LANES == 16 or K_LANES == 32",
           "{cls}.k_lanes={K_LANES} must be 4, 8, 16 or 32 (lanes of a warp along K per group of rn columns)",
           when="K_LANES != 32"),
    R.Rule("k_lanes_on_gemv", "KERNEL == 1",
           "{cls}.k_lanes={K_LANES} needs kernel='gemv' (got kernel kind {KERNEL}: 0 = 'tiled', 1 = 'gemv')",
           when="K_LANES != 32"),
    R.Rule("k_lanes_on_column_b_ring", "SPARE_SLOT == 1",
           "{cls}.k_lanes={K_LANES} with smem_a=True needs spare_slot=True (the column-major B kernel with a ring of B "
           "loads; A in registers, smem_a=False, takes any k_lanes; got spare_slot={SPARE_SLOT})",
           when="K_LANES != 32 and SMEM_A == 1"),
    R.Rule("k_lanes_need_column_major_b", "LAYOUT_B_COL == 1",
           "{cls}.k_lanes={K_LANES} needs a column-major B (K contiguous, x @ W.T): with a row-major B a thread "
           "owns vec columns and walks K alone", scope="op", when="K_LANES != 32"),
    R.Rule("k_lanes_group_sums", "(BM * RN) % K_LANES == 0",
           "{cls} bm·rn={BM}·{RN} partial sums per lane must be a multiple of k_lanes={K_LANES} with a column-major "
           "B's ring or lanes in groups (the K_LANES lanes of a group sum them by a reduce-scatter butterfly)",
           scope="op", when="LAYOUT_B_COL == 1 and (SPARE_SLOT == 1 or K_LANES != 32)"),
    R.Rule("smem_a_slice_fits", "SMEM_A_BYTES + 128 * SPLIT_K_FUSED <= 49152",
           "{cls}.smem_a=True stages bm × the K slice (K, or ⌈K / (split_k·bk)⌉·bk with split-K) float32 elements of "
           "A, bm + 1 rows' worth with spare_slot and a column-major B (padding): {SMEM_A_BYTES} bytes (bm={BM}, "
           "spare_slot={SPARE_SLOT}, K={OP_K}, split_k={SPLIT_K}, bk={BK}) over the limit: 49152 (48 KiB, what "
           "a block takes without opt-in), 49024 with split_k_fused (128 for its arrival flag); raise split_k or lower "
           "bm",
           scope="op", when="SMEM_A == 1"),
    R.Rule("wgmma_needs_sm_90", "CC == 90",
           "{cls}.mma='wgmma' needs an sm_90 GPU (Hopper; compiled for sm_90a), not cc {CC}",
           scope="target", resource=True, when="MMA == 2"),
    R.Rule("min_blocks_fit_sm", "THREADS * MIN_BLOCKS <= MAX_THREADS_PER_SM",
           "{cls}.min_blocks={MIN_BLOCKS} blocks of {THREADS} threads exceed the device's "
           "{MAX_THREADS_PER_SM} threads per SM", scope="target", resource=True),
    R.Rule("threads_within_device", "THREADS <= MAX_THREADS_PER_BLOCK",
           "{cls} threads={THREADS} exceeds the device's {MAX_THREADS_PER_BLOCK} per block",
           scope="target", resource=True),
    R.Rule("smem_within_device", "SMEM_BYTES <= SMEM_OPTIN_BYTES",
           "{cls} needs {SMEM_BYTES} bytes of shared memory, over the device's opt-in limit of "
           "{SMEM_OPTIN_BYTES} bytes per block; lower stages or bm/bn/bk, set double_buffer=False or smem_pad=0",
           scope="target", resource=True),
)


KERNELS = ("tiled", "gemv")
"""Kernel structures: the tiled GEMM (shared-memory tiles; every ``mma``), or a GEMV-style kernel for a few rows
of C (M ≤ 16: decode-time ``x @ W``): each thread streams its columns (row-major B, ``vec`` wide) or each warp
``rn`` columns (column-major B) down its K slice with the rows of A in registers (or, ``smem_a``, staged in shared
memory), split-K slices combined by the deterministic split-K kernel or in the kernel."""
MMA_KINDS = ("fma", "mma_sync", "wgmma", "dmma")
"""Instructions doing the inner product: FP32 FMA units, tensor cores through mma.sync (sm_80+),
Hopper's warpgroup MMA reading shared memory through descriptors (sm_90a), or the FP64 tensor cores through mma.sync
m16n8k16 on float64 (SASS ``DMMA``, sm_90; the GEMV-style kernel only, float32 inputs widened exactly)."""


def tensor_core_gemv(s) -> bool:
    """Whether ``s`` is the GEMV-style kernel on the tensor cores (:mod:`tiledsl.gemm.emit_gemv_mma`): ``kernel="gemv"``
    with ``mma="mma_sync"`` (TF32, ``precision="3xtf32"``) or ``mma="dmma"`` (float64, IEEE float32 products)."""
    return s.kernel == "gemv" and s.mma in ("mma_sync", "dmma")


def _auto_warp_lanes_n(bm: int, bn: int, rm: int, rn: int) -> int:
    """Threads of a warp along N for the default warp tile: prefer a 4×8 arrangement (square-ish)."""
    tm, tn = max(bm // max(rm, 1), 1), max(bn // max(rn, 1), 1)
    for lanes_n in (8, 4, 16, 2, 32, 1):
        lanes_m = 32 // lanes_n
        if tn % lanes_n == 0 and tm % lanes_m == 0:
            return lanes_n
    return min(tn, 32)


def gemv_auto_min_blocks(bn: int, smem_a: bool, split_k_fused: bool) -> int:
    """``min_blocks`` of a GEMV schedule that leaves it 0 (automatic): with ``smem_a`` 512 threads per SM (128 registers
    each), unless the slices are summed in the kernel (its loads of the slices' partial sums take more registers);
    else 1 (one block per SM: ptxas may take up to 255 registers)."""
    return max(1, 512 // bn) if smem_a and not split_k_fused else 1


def gemv_slice_depth(k: int, s: GemmSchedule, split: int | None = None) -> int:
    """Elements of K in one split-K slice of the GEMV-style kernel: ⌈K / (split_k·bk)⌉·bk (the emitter's
    ``k_per_split``), or K without split-K; ``split`` in place of ``s.split_k`` when given."""
    split = s.split_k if split is None else split
    return -(-k // (split * s.bk)) * s.bk if split > 1 else k


def gemv_smem_a_bytes(k: int, s: GemmSchedule, split: int | None = None, col_b: bool = False) -> int:
    """Shared memory of ``smem_a``'s staged slice of A, bytes: bm rows × :func:`gemv_slice_depth` float32 (0 without
    ``smem_a``), bm + 1 rows' worth with a column-major B (``col_b``) and ``spare_slot`` (one vector of padding per
    vector of K: ``As[kv][bm + 1][VB]``); ``split`` in place of ``s.split_k`` when given."""
    if not (s.smem_a and s.kernel == "gemv"):
        return 0
    return (s.bm + int(col_b and s.spare_slot)) * gemv_slice_depth(k, s, split) * 4


def estimate_registers(s: GemmSchedule, va: int, vb: int, col_b: bool = False) -> int:
    """Registers per thread before compiling (the schedule's default ``min_blocks`` and the plan's cap and spills;
    the FMA cost model weighs the same :func:`fma_register_terms` by fitted coefficients instead).

    Accumulators rm·rn + fragments rm + rn + the staged global tile (bm·bk + bk·bn)/threads + 2 per
    global load instruction (64-bit addresses; A loads ``va`` wide, B ``vb`` wide) + 36 for indices
    (fits the ptxas reports of the sweep in tests/test_gemm_cpu.py within ~15%), + 10 with ``stream_k`` (its
    iteration range and tile loop: ptxas's counts for 64×64 and 128×128 tiles rose by 1–10).
    """
    if tensor_core_gemv(s):  # the tensor-core GEMV (frags = rn / 8): 34 + 16·frags +
        # min(unroll, 4)·(4 + 2·frags), fitted to ptxas's sm_90 counts (NVRTC 12.9, 16×22016×4096, min_blocks 1; x @ W.T
        # / x @ W: 77, 98 / 93, 118 / 114, 140 / 152, 145 / 156, 202 / 180, 200 / 222 and 200 / 218 registers at
        # rn/unroll 16/2, 32/1, 32/2, 32/4, 32/8, 64/2, 64/4, 64/8; ptxas holds little more at unroll 8 than at 4):
        # within 10 below (x @ W 32/8: 146 against 156) and up to 42 above
        frags = s.rn // 8
        if s.mma == "dmma":  # float64 accumulators and widened fragments: 40 + 16·frags + min(unroll, 4)·(4 + 4·frags),
            # fitted the same way (x @ W.T / x @ W at rn/unroll 16/2, 16/4, 32/2, 32/4, 32/8, 64/2, 64/4: 108, 130,
            # 148 / 142, 172 / 214, 188 / 224, 225 / 214, 226 / 248): within 40 below (x @ W 32/8: 184 against 224)
            # and 29 above. Its ring of steps (fragment_prefetch): 3·min(unroll, 4)·(4 + 4·frags) in place of one
            # (ptxas issues a slot's refill before the slot's products, so about twice the ring is live), fitted to
            # the same (16×22016×4096, x @ W.T / x @ W at 16/2, 16/3, 16/4, 32/2, 32/4, 64/1, 64/2: 150, 196, 200,
            # 228 / 208, 254 / 246, — / 224, — / 252): within 18 below and 31 above where under 255; past unroll 4
            # every slot of the ring stays live, and the estimate falls short (8 columns at unroll 8: 152 against 168)
            ring = 3 if s.fragment_prefetch else 1
            return min(255, 40 + 16 * frags + ring * min(s.unroll, 4) * (4 + 4 * frags))
        return min(255, 34 + 16 * frags + min(s.unroll, 4) * (4 + 2 * frags))
    if s.kernel == "gemv" and col_b and s.smem_a and s.spare_slot:  # the ring: bm × rn accumulators, unroll + 1
        # slots of rn vectors of B, one row's vector of A, a 64-bit pointer per column, addresses
        return s.bm * s.rn + (s.unroll + 1) * vb * s.rn + vb + 2 * s.rn + 32
    if s.kernel == "gemv" and col_b and s.smem_a:  # a column-major B (``col_b``) with A staged: bm × rn accumulators,
        # unroll steps of rn vectors of B and one row's vector of A, addresses
        return s.bm * s.rn + s.unroll * vb * (s.rn + 1) + 32
    if s.kernel == "gemv":  # bm rows × vec columns of accumulators, a vector of B (smem_a: a ring of unroll), addresses
        return s.bm * max(vb, 1) + max(vb, 1) * (s.unroll if s.smem_a else 1) + 32
    if s.mma == "wgmma":  # 64×bn accumulators over a warpgroup's 128 threads + descriptors, addresses
        return s.bn // 2 + 40
    if s.mma != "fma":  # wm·wn/32 accumulators + A/B fragments of one k16 step + addresses
        return s.wm * s.wn // 32 + s.wm // 4 + s.wn // 4 + 40
    t = fma_register_terms(s, va, vb)
    return t["accumulators"] + t["fragments"] + t["staged"] + 2 * t["loads"] + 36 + 10 * t["stream_k"]


def tile_pieces(s: GemmSchedule, which: str, vec: int) -> int:
    """``vec``-wide pieces of one K tile of ``which`` ("A": bm × bk, "B": bk × bn); ``vec`` divides the tile's
    contiguous side (rule ``vec_divides_tile``), so each row splits into whole pieces."""
    return (s.bm * s.bk if which == "A" else s.bk * s.bn) // max(vec, 1)


def tile_loads(s: GemmSchedule, which: str, vec: int) -> int:
    """Global loads per thread of one K tile of ``which``: :func:`tile_pieces` over the block's threads, rounded up.
    Where the pieces do not divide evenly, the last round is taken by the first pieces % threads threads only
    (``gemm.emit``'s ``PIECES_A``/``PIECES_B``): e.g. the 16×128 B tile of a 48×128 tile in 4-wide pieces over
    192 threads, 512 pieces, 3 rounds, the last one taken by 128 threads."""
    return -(-tile_pieces(s, which, vec) // max(s.threads, 1))


def fma_register_terms(s: GemmSchedule, va: int, vb: int) -> dict[str, int]:
    """What the FMA tiled kernel keeps in registers, per thread, the terms of :func:`estimate_registers` (which
    weighs them 1, 1, 1, 2 per load instruction, + 36, + 10 for stream-K; the cost model weighs them by its fitted
    ``FmaParams.reg_*``): ``accumulators`` rm·rn; ``fragments`` rm + rn (twice with fragment prefetch); ``staged``
    the next global tile held in registers (stages ≤ 2; deeper pipelines copy it with cp.async); ``loads`` global
    load instructions per K tile (A ``va`` wide, B ``vb`` wide: each holds a 64-bit address); ``stream_k`` 1 or 0."""
    loads_a, loads_b = tile_loads(s, "A", va), tile_loads(s, "B", vb)
    return {"accumulators": s.rm * s.rn, "fragments": (s.rm + s.rn) * (2 if s.fragment_prefetch else 1),
            "staged": loads_a * max(va, 1) + loads_b * max(vb, 1) if s.stages <= 2 else 0,
            "loads": loads_a + loads_b, "stream_k": int(s.stream_k)}


_BOOL_FIELDS = ("double_buffer", "warp_specialize", "persistent", "fragment_prefetch", "stream_k", "split_k_fused",
                "smem_a", "spare_slot")
_LATER_KNOBS = {"persistent": False, "fragment_prefetch": False, "stream_k": False, "split_k_fused": False,
                "col_groups": 1, "smem_a": False, "spare_slot": False, "k_lanes": 32}
"""Knobs added after kernels were first tuned and shipped, with their defaults: the ``// schedule:`` comment names
them only where they differ."""


@dataclass(frozen=True)
class GemmSchedule(ScheduleRecord):
    """How to tile a GEMM. Frozen, hashable, JSON round-trips through ``to_dict``/``from_dict``.

    Attributes:
        bm, bn, bk: block tile (rows of C, columns of C, depth of one K step), elements.
        rm, rn: thread tile: accumulators per thread, rm rows × rn columns of C.
        vec: elements per global load (1, 2 or 4; 4 = 16-byte loads for float32). Lowered
            automatically to what the operands' alignment allows.
        double_buffer: two shared-memory stages; the next K tile is prefetched into registers
            while the current one is computed (one barrier per K step). Same as ``stages=2``.
        unroll: unroll factor of the inner k loop over bk.
        smem_pad: elements of padding per shared-memory row (multiple of 4) against bank conflicts.
        wm, wn: warp tile (0 = choose: threads of a warp arranged 4×8 where possible).
        swizzle: block rasterization group (Triton's GROUP_M): consecutive blocks walk ``swizzle``
            block-rows before moving along N, so they share A and B tiles in L2. 1 = row by row.
        split_k: slices of K computed by separate blocks (grid y); partial sums go to a float32
            workspace and a second kernel adds them in a fixed order (deterministic) and applies
            alpha/beta (``split_k_fused``: the last block of each group of columns does). For shapes with few C tiles and a long K (e.g. 512×16×500000). 1..64; 1..1024 with
            ``kernel="gemv"``.
        min_blocks: blocks per SM the register allocation must allow (``__launch_bounds__``'s second
            argument; caps registers at 65536 / (threads · min_blocks)). 0 = automatic: 2 when two
            blocks fit :attr:`est_registers`, else 1; with ``kernel="gemv"`` 1, or with ``smem_a`` 512 / bn
            (at least 1; 128 registers for bn ≤ 512) unless ``split_k_fused``, resolved when the schedule is
            made (``dataclasses.replace`` keeps it: pass ``min_blocks=0`` to resolve it again).
        stages: K tiles in the shared-memory pipeline (0 = what ``double_buffer`` says: 2 or 1). The FMA
            kernel keeps 1 or 2 with register prefetch; 3..8 copy tiles with ``cp.async`` (float32, sm_80+)
            so ``stages − 1`` K tiles are in flight while one is multiplied (CUTLASS's SIMT SGEMM uses 4).
            Tensor-core kernels: ``cp.async`` (mma_sync, ≥ 2) or TMA/``cp.async`` (wgmma, ≥ 3).
        fragment_prefetch: (FMA kernel, stages=2, unroll=bk) keep two register sets of A/B fragments: each k
            step loads the next step's fragments before its FMAs, and the last k step of a K tile loads the
            next tile's first fragments right after the barrier, so the FMAs of that step hide the barrier's
            shared-memory latency (CUTLASS's warp-level fragment prefetch). With ``kernel="gemv"`` and
            ``mma="dmma"``: a ring of ``unroll`` k16 steps, each slot refilled ``unroll`` steps ahead as soon as its
            step is multiplied, so loads stay in flight while the tensor cores work (the same sums, bit for bit).
        persistent: (TMA wgmma kernel only) launch one block per SM, each walking C tiles
            ``blockIdx.x, blockIdx.x + gridDim.x, …`` in rasterization order; the producer warpgroup
            loads the next tile's K tiles while the consumers store the last tile (the epilogue and
            the pipeline's fill overlap instead of following each other).
        stream_k: (FMA tiled kernel, split_k=1) stream-K for the last waves (CUTLASS's "data-parallel +
            stream-K" hybrid): the tiles of all but the last full wave run one block per tile over all of K;
            one block per slot (SMs × resident blocks) then shares the K iterations of the remaining tiles
            evenly, and a tile split between blocks is finished by the last to arrive, which sums the
            float32 partial tiles in K order (deterministic). Removes the idle SMs of a partial last wave
            (4096³ with 256×128 tiles: 512 tiles on 132 SMs, 3.88 waves run as 3.88, not 4).
        split_k_fused: (GEMV-style kernel, split_k > 1) no second kernel: each block writes its slice's float32
            partial sums to the workspace and takes a ticket of its group of columns; the last of the group's
            ``split_k`` blocks to arrive sums every slice's partials in slice order (deterministic, whichever
            arrives last) and writes C (alpha, beta, C's layout). Saves the split-K kernel's launch, which is
            a large share of a product of a few µs (a 1×4096×4096 GEMV reads B in about 16 µs).
        col_groups: (GEMV-style kernel, row-major B) groups of ``vec`` adjacent columns per thread, each 32·vec
            columns past the one before, so every load of B stays coalesced across the warp while each element
            of A read feeds col_groups·vec columns. 1..8; bm·col_groups·vec ≤ 64. For an odd N, where B is read
            one element at a time (vec lowered to 1).
        smem_a: (GEMV-style kernel, bm a multiple of 4, one group of columns) the block stages its K slice of A in shared
            memory, transposed (``At[k][m]``, float32), before its loop: per k a thread then reads bm/4 16-byte
            broadcasts of A beside its load of B instead of holding bm·VA elements of A in registers, and keeps a
            ring of ``unroll`` loads of B in flight (the first ones issued before A is staged). Sixteen rows then
            fit 128 registers rather than 255 (four blocks of 128 threads per SM rather than two). With a
            column-major B (x @ W.T) the slice is staged in A's own layout (``As[m][k]``) and a lane reads, per step
            of VB k, one VB-wide vector of it per row: one row's piece of A in registers instead of bm (sixteen rows,
            4 columns per warp, unroll 1: 128 registers, no spills). Shared memory: bm · ⌈K / (split_k·bk)⌉·bk · 4
            bytes, at most 48 KiB (rule ``smem_a_slice_fits``).
        spare_slot: (GEMV-style kernel with ``smem_a``) the ring of B loads keeps ``unroll`` + 1 slots: each step
            loads the step ``unroll`` ahead into the slot the step before emptied, through a pointer that walks B
            one step at a time, then multiplies its own slot. Row-major B: without it ``unroll`` slots, each copied
            before its refill, the row's address rebuilt from the slice's start every step; the same loads in
            flight and the same sums, bit for bit; fewer instructions per FMA (the loop's SASS, sm_90, NVRTC 12.9:
            a pass of 716 instructions for 576 FFMAs instead of 818 for 512 at sixteen rows, unroll 8; 402 for 288
            instead of 450 for 256 at eight). Column-major B: the ring is what the loop has (without it no load
            runs ahead of its step's FMAs), and the slice of A is staged by vectors of VB k, each vector's bm rows
            side by side and bm + 1 vectors apart (``As[kv][m][VB]``: a lane's reads of a row take immediate
            offsets, and the lanes of a group, on consecutive kv, hit distinct banks); shared memory
            (bm + 1) · depth · 4 bytes.
        k_lanes: (GEMV-style kernel, column-major B: A in registers, or ``smem_a`` with ``spare_slot``) lanes of
            a warp along K per group of ``rn`` columns: the warp keeps 32 / k_lanes groups, so a block covers
            bn / k_lanes · rn columns, and a row's read of A (staged: one shared-memory wavefront; in registers:
            one L1 wavefront) serves every group where k_lanes · VB · 4 ≤ 128 bytes, where 32 lanes along K take
            four. 4, 8, 16 or 32 (default: one group); bm·rn
            a multiple of k_lanes (each group's sums leave by a reduce-scatter butterfly over its lanes).

    Raises:
        ScheduleError: a rule of :data:`GEMM_RULES` does not hold; the message names the field,
            the value, the limit and the rule.

    Example:
        >>> GemmSchedule(bm=128, bn=128, bk=8, rm=8, rn=8).threads
        256
    """

    bm: int = 128
    bn: int = 128
    bk: int = 8
    rm: int = 8
    rn: int = 8
    vec: int = 4
    double_buffer: bool = True
    unroll: int = 8
    smem_pad: int = 0
    wm: int = 0
    wn: int = 0
    swizzle: int = 8
    split_k: int = 1
    min_blocks: int = 0
    mma: str = "fma"
    stages: int = 0
    warp_specialize: bool = False
    kernel: str = "tiled"
    persistent: bool = False
    fragment_prefetch: bool = False
    stream_k: bool = False
    split_k_fused: bool = False
    col_groups: int = 1
    smem_a: bool = False
    spare_slot: bool = False
    k_lanes: int = 32

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name in _BOOL_FIELDS:
                if not isinstance(v, bool):
                    raise ScheduleError(f"GemmSchedule.{f.name}={v!r} must be True or False", "type")
            elif f.name == "mma":
                if v not in MMA_KINDS:
                    raise ScheduleError(f"GemmSchedule.mma={v!r} must be one of {MMA_KINDS} (rule mma_kind)",
                                        "mma_kind")
            elif f.name == "kernel":
                if v not in KERNELS:
                    raise ScheduleError(f"GemmSchedule.kernel={v!r} must be one of {KERNELS} (rule kernel_kind)",
                                        "kernel_kind")
            else:  # numpy integers become plain ints
                object.__setattr__(self, f.name, as_int(v, f"GemmSchedule.{f.name}", schedule_error("type")))
        # stages: 0 = what double_buffer says (2 or 1); an explicit depth sets double_buffer to match
        if self.stages == 0:
            object.__setattr__(self, "stages", 2 if self.double_buffer else 1)
        elif self.stages >= 1:
            object.__setattr__(self, "double_buffer", self.stages >= 2)
        if self.kernel == "gemv":  # no warp tiles, no shared memory, one block per SM unless asked
            object.__setattr__(self, "wm", self.wm or 1)
            object.__setattr__(self, "wn", self.wn or 1)
            object.__setattr__(self, "min_blocks", self.min_blocks or gemv_auto_min_blocks(self.bn, self.smem_a,
                                                                                          self.split_k_fused))
        if self.mma == "wgmma" and self.wm == 0 and self.wn == 0:  # warpgroup tile: 64 rows × bn
            object.__setattr__(self, "wm", 64)
            object.__setattr__(self, "wn", self.bn)
        if self.mma != "fma" and self.wm == 0 and self.wn == 0:
            object.__setattr__(self, "wm", min(self.bm, 64))
            object.__setattr__(self, "wn", min(self.bn, 64))
        if self.wm == 0 and self.wn == 0 and min(self.rm, self.rn, self.bm, self.bn) > 0:
            lanes_n = _auto_warp_lanes_n(self.bm, self.bn, self.rm, self.rn)
            object.__setattr__(self, "wn", lanes_n * self.rn)
            object.__setattr__(self, "wm", (32 // lanes_n) * self.rm)
        if self.min_blocks == 0 and min(self.rm, self.rn, self.bm, self.bn) > 0:
            fits_two = 2 * self.threads * self.est_registers <= 65536
            object.__setattr__(self, "min_blocks", 2 if fits_two else 1)
        R.check(GEMM_RULES, self.env(), ("schedule",), "GemmSchedule")

    # ---- derived quantities (one place; used by validation, emitter, cost model) ----
    @property
    def threads(self) -> int:
        """Threads per block: (bm/rm)·(bn/rn) on FMA units; 32·(bm/wm)·(bn/wn) (one warp per warp tile)
        with tensor cores."""
        if self.kernel == "gemv":  # bn threads (whole warps)
            return self.bn
        if self.mma == "wgmma":  # one warpgroup per 64 rows (+ one producer warpgroup)
            return 128 * (self.bm // 64 + int(self.warp_specialize))
        if self.mma != "fma":
            return 32 * (self.bm // max(self.wm, 1)) * (self.bn // max(self.wn, 1))
        return (self.bm // max(self.rm, 1)) * (self.bn // max(self.rn, 1))

    @property
    def est_registers(self) -> int:
        """Registers per thread before compiling, with ``vec``-wide loads (:func:`estimate_registers`)."""
        return estimate_registers(self, self.vec, self.vec)

    def smem_bytes(self, smem_itemsize: int | None = None) -> int:
        """Dynamic shared memory per block, bytes. FMA: stages · bk · ((bm + pad) + (bn + pad)) · 4 (tiles
        stored K-outer, As[k][m], as float32). Tensor cores: stages · (A tile + B tile) · 2 with the padded contiguous
        dimension; the layout decides which dimension that is, so this is the larger of the two (the
        kernel allocates :func:`tiledsl.gemm.emit_mma.smem_tile_elems` for its own layout)."""
        p = self.smem_pad
        if self.kernel == "gemv":  # loads go straight to registers
            return 0
        if self.mma == "wgmma":  # rows of 128 bytes (rule wgmma_row_128_bytes) + a 1024-byte atom to align the base
            barriers = 2 * 8 * self.stages if self.warp_specialize else 0  # full/empty mbarriers per stage
            return self.stages * (self.bm + self.bn) * 128 + 1024 + barriers
        if self.mma != "fma":
            e = 2 if smem_itemsize is None else smem_itemsize
            a = max(self.bm * (self.bk + p), self.bk * (self.bm + p))
            b = max(self.bn * (self.bk + p), self.bk * (self.bn + p))
            return self.stages * (a + b) * e
        e = 4 if smem_itemsize is None else smem_itemsize
        return self.stages * self.bk * ((self.bm + p) + (self.bn + p)) * e

    def env(self, target: Target | None = None, op=None) -> dict[str, int]:
        """Names the rule expressions use (upper-case fields and derived values; with ``op``, the op's)."""
        rm, rn = max(self.rm, 1), max(self.rn, 1)
        env = {f.name.upper(): int(getattr(self, f.name)) for f in fields(self) if f.name not in ("mma", "kernel")}
        env.update(
            MMA=MMA_KINDS.index(self.mma) if self.mma in MMA_KINDS else -1,
            KERNEL=KERNELS.index(self.kernel) if self.kernel in KERNELS else -1,
            THREADS=self.threads,
            LOADERS=self.threads,  # cp.async: every thread copies (a producer warpgroup issues TMA copies)
            WARP_LANES=(self.wm // rm) * (self.wn // rn),
            SMEM_BYTES=self.smem_bytes(),
        )
        if op is not None:
            env.update(SMEM_A_BYTES=gemv_smem_a_bytes(op.k, self, col_b=op.layout_b == "col"), OP_K=op.k)
            env.update(OP_M=op.m, OP_N=op.n, DTYPE_16BIT=int(op.dtype in MMA_DTYPES), LAYOUT_A_ROW=int(op.layout_a == "row"),
                       LAYOUT_B_COL=int(op.layout_b == "col"),
                       LAYOUT_C_COL=int(op.layout_c == "col"), ALIGN_A=op.align_a, ALIGN_B=op.align_b,
                       ITEMSIZE=dtypes.get(op.dtype).itemsize, TF32=int(op.precision == "tf32"),
                       TF32X3=int(op.precision == "3xtf32"))
        if target is not None:
            env.update(CC=target.cc, SMEM_OPTIN_BYTES=target.smem_per_block_optin_bytes,
                       MAX_THREADS_PER_BLOCK=target.max_threads_per_block,
                       MAX_THREADS_PER_SM=target.max_threads_per_sm)
        return env

    def header_dict(self) -> dict:
        """:meth:`to_dict` for the emitted source's ``// schedule:`` comment: the knobs added later
        (:data:`_LATER_KNOBS`) only where they are not their defaults, so kernels they do not change keep their source byte for
        byte, and the tuned records that hash that source (``tiledsl.registry``) stay valid."""
        d = self.to_dict()
        for knob, default in _LATER_KNOBS.items():
            if d[knob] == default:
                del d[knob]
        return d

    def check_op(self, op) -> GemmSchedule:
        """Check the rules that need the op (the tensor-core kernel takes 16-bit inputs only).

        Raises:
            ScheduleError: a rule of scope "op" does not hold (rule ``mma_needs_16_bit_inputs``).
        """
        R.check(GEMM_RULES, self.env(op=op), ("op",), "GemmSchedule")
        return self

    def validate(self, target: Target | None = None) -> GemmSchedule:
        """Check the device-dependent rules (shared memory, threads) against ``target``.

        Raises:
            ResourceError: the schedule needs more than the device has.
        """
        if target is not None:
            R.check(GEMM_RULES, self.env(target), ("target",), "GemmSchedule")
        return self

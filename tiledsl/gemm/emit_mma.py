"""Tensor-core GEMM emitter (``GemmSchedule.mma == "mma_sync"``): a pure function (GemmOp, GemmSchedule)
-> KernelSource for float16 / bfloat16 inputs with float32 accumulation, on sm_80 and newer.

Structure of the kernel (PTX ISA: ``cp.async``, ``ldmatrix``, ``mma.sync.aligned.m16n8k16``):

1. block → C tile: a 1-D grid, rasterized in groups of ``swizzle`` block-rows for L2 reuse (as the FMA
   kernel);
2. warp → warp tile: ``(bm/wm)·(bn/wn)`` warps, each owning a wm×wn piece of C made of
   (wm/16)·(wn/8) m16n8 accumulator fragments (four float32 per thread each);
3. global → shared memory: A and B tiles copied in their global layout (the contiguous dimension stays
   contiguous, padded by ``smem_pad`` elements so a row pitch is an odd number of 16-byte chunks and
   ``ldmatrix`` reads are free of bank conflicts) with ``cp.async`` 16-, 8- or 4-byte copies as the
   operands' alignment allows (zero-filled outside the matrix), ``stages`` K tiles in flight;
4. shared → registers: ``ldmatrix.x4`` (``.trans`` where the contiguous dimension of the tile is not the
   one the fragment wants: M-contiguous A, N-contiguous B) loads the fragments of one k16 step;
5. ``mma.sync`` m16n8k16 accumulates in float32 registers;
6. epilogue: C = alpha·acc (+ beta·C), two adjacent columns per thread, stored 2-wide where C's
   alignment allows.

The pipeline: K tiles 0 … stages−2 are requested before the main loop; iteration kt waits until tile kt
has landed (``cp.async.wait_group stages−2``), one barrier makes it visible and frees the stage read in
iteration kt−1, tile kt+stages−1 is requested into that freed stage, then tile kt is multiplied.
"""

from __future__ import annotations

import json
from dataclasses import replace

from .. import dtypes
from .. import rules as R
from ..codegen.prelude import ASYNC_COPY_HELPERS, helpers_for
from ..codegen.writer import Writer
from ..compile import KernelSource
from .emit_common import block_to_tile, constexpr_table, k_range, kernel_name, kernel_name_reduce, store_pair
from .op import GemmOp
from .schedule import GEMM_RULES, GemmSchedule

MMA_PTX_TYPE = {"float16": "f16", "bfloat16": "bf16"}  # mma.sync operand type per input dtype

_MMA_HELPERS = r"""// ---- tensor-core helpers (PTX ISA: ldmatrix, mma.sync) ----
// four 8x8 b16 matrices; lane l gives the address of row l%8 of matrix l/8
__device__ __forceinline__ void tdsl_ldmatrix_x4(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(tdsl_smem_addr(p)));
}
__device__ __forceinline__ void tdsl_ldmatrix_x4_trans(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(tdsl_smem_addr(p)));
}
"""


def _mma_fn(ptx: str) -> str:
    return (f"// D = A·B + D on one m16n8k16 fragment: A {ptx} row-major 16x16, B {ptx} column-major 16x8, "
            "float32 accumulators\n"
            "__device__ __forceinline__ void tdsl_mma_16816(float (&d)[4], const unsigned (&a)[4], "
            "unsigned b0, unsigned b1) {\n"
            f"  asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.{ptx}.{ptx}.f32 \"\n"
            "               \"{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\\n\"\n"
            "               : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3])\n"
            "               : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b0), \"r\"(b1));\n"
            "}\n")


def _tile_geometry(op: GemmOp, which: str) -> dict:
    """Shared-memory tile of operand A or B in its global layout: rows (strided dim), contiguous dim,
    the global address of element (r, c) of the tile and its bounds test, as C expressions."""
    if which == "A":
        if op.layout_a == "row":  # A[m][k], K contiguous
            return dict(rows="BM", cols="BK", ld="LDS_A", v="VA",
                        ptr="A + (long long)(block_m + r) * lda + (k0 + c)",
                        bound="block_m + r < M && k0 + c < k_end")
        return dict(rows="BK", cols="BM", ld="LDS_A", v="VA",  # A[k][m] (col-major), M contiguous
                    ptr="A + (long long)(k0 + r) * lda + (block_m + c)",
                    bound="k0 + r < k_end && block_m + c < M")
    if op.layout_b == "row":  # B[k][n], N contiguous
        return dict(rows="BK", cols="BN", ld="LDS_B", v="VB",
                    ptr="B + (long long)(k0 + r) * ldb + (block_n + c)",
                    bound="k0 + r < k_end && block_n + c < N")
    return dict(rows="BN", cols="BK", ld="LDS_B", v="VB",  # B[n][k] (col-major), K contiguous
                ptr="B + (long long)(block_n + r) * ldb + (k0 + c)",
                bound="block_n + r < N && k0 + c < k_end")


def smem_tile_elems(op: GemmOp, s: GemmSchedule) -> tuple[int, int]:
    """Elements of one shared-memory stage of A and of B (padded contiguous dimension)."""
    p = s.smem_pad
    a = s.bm * (s.bk + p) if op.layout_a == "row" else s.bk * (s.bm + p)
    b = s.bk * (s.bn + p) if op.layout_b == "row" else s.bn * (s.bk + p)
    return a, b


def emit_gemm_mma(op: GemmOp, s: GemmSchedule) -> KernelSource:
    """Emit the tensor-core (``mma.sync``) GEMM kernel for ``op`` tiled by ``s``. Pure: same inputs, same text.

    Returns:
        KernelSource with ``block=(32·(bm/wm)·(bn/wn), 1, 1)`` and ``stages`` shared-memory stages of
        dynamic shared memory. Launch on the grid of :func:`tiledsl.gemm.emit.grid`.
    """
    dt = dtypes.get(op.dtype)
    t = dt.c_type
    ptx = MMA_PTX_TYPE[op.dtype]
    vmax = 16 // dt.itemsize  # 16-byte copies
    va, vb = min(vmax, op.align_a), min(vmax, op.align_b)
    if s.split_k > 1:  # the main kernel writes float32 partial sums; emit_splitk_reduce finishes C
        out_dt, out_op, vc = dtypes.get("float32"), replace(op, read_c=False), 2 if op.n % 2 == 0 else 1
    else:
        out_dt, out_op, vc = dt, op, min(2, op.align_c)
    a_elems, b_elems = smem_tile_elems(op, s)
    smem = s.stages * (a_elems + b_elems) * dt.itemsize
    name = kernel_name(op, s)
    w = Writer()
    w(f"// tiledsl GEMM on tensor cores: C[M,N] = alpha * A[M,K] @ B[K,N]{' + beta * C' if op.read_c else ''}",
      f"// {op.dtype} inputs, mma.sync m16n8k16 with float32 accumulation; A {op.layout_a}-major, "
      f"B {op.layout_b}-major, C row-major",
      f"// schedule: {json.dumps(s.header_dict(), sort_keys=True)}")
    w(helpers_for(op.dtype).rstrip("\n"), ASYNC_COPY_HELPERS.rstrip("\n"), _MMA_HELPERS.rstrip("\n"), _mma_fn(ptx).rstrip("\n"))
    w.blank()
    w("// ---- schedule (tiledsl.GemmSchedule) ----")
    consts = [
        ("BM", s.bm, "bm: block tile rows of C"), ("BN", s.bn, "bn: block tile columns of C"),
        ("BK", s.bk, "bk: K depth of one shared-memory stage"),
        ("WM", s.wm, "wm: warp tile rows"), ("WN", s.wn, "wn: warp tile columns"),
        ("STAGES", s.stages, "stages: K tiles in flight (cp.async)"),
        ("SMEM_PAD", s.smem_pad, "smem_pad: elements of padding per shared row"),
        ("SWIZZLE", s.swizzle, "swizzle: block-rows per rasterization group"),
        ("SPLIT_K", s.split_k, "split_k"),
        ("MIN_BLOCKS", s.min_blocks, "min_blocks: resident blocks per SM the registers must allow"),
        ("MMA", 1, "mma='mma_sync': tensor cores"), ("KERNEL", 0, "kernel='tiled'"),
    ]
    constexpr_table(w, consts)
    ga, gb = _tile_geometry(op, "A"), _tile_geometry(op, "B")
    w("// derived",
      "constexpr int WARPS_M = BM / WM, WARPS_N = BN / WN;",
      "constexpr int THREADS = 32 * WARPS_M * WARPS_N;",
      "constexpr int FRAG_M = WM / 16;               // m16 fragments per warp tile",
      "constexpr int FRAG_N = WN / 8;                // n8 fragments per warp tile",
      f"constexpr int VA = {va}, VB = {vb};  // elements per cp.async of A and B; C is stored {vc} wide "
      f"(op alignment {op.align_a}/{op.align_b}/{op.align_c})",
      f"constexpr int LDS_A = {ga['cols']} + SMEM_PAD;         // shared row pitch of A ({op.layout_a}-major tile)",
      f"constexpr int LDS_B = {gb['cols']} + SMEM_PAD;         // shared row pitch of B ({op.layout_b}-major tile)",
      f"constexpr int STAGE_A = {a_elems}, STAGE_B = {b_elems};  // elements of one stage",
      f"constexpr int COPIES_A = {ga['rows']} * {ga['cols']} / (THREADS * VA);  // copies per thread per stage",
      f"constexpr int COPIES_B = {gb['rows']} * {gb['cols']} / (THREADS * VB);")
    w('static_assert(COPIES_A * THREADS * VA == ' + f"{ga['rows']} * {ga['cols']}" + ', "A tile splits evenly");',
      'static_assert(COPIES_B * THREADS * VB == ' + f"{gb['rows']} * {gb['cols']}" + ', "B tile splits evenly");',
      'static_assert(FRAG_N % 2 == 0, "B fragments are loaded two n8 tiles at a time");')
    for line in R.static_asserts(GEMM_RULES, s.env()):
        w(line)
    w.blank()
    beta_arg = ", float beta" if out_op.read_c else ""
    if s.split_k > 1:
        w(f"// split-K: C is the float32 workspace [SPLIT_K][M][ldc]; {kernel_name_reduce(op, s)} sums it")
    w('extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)')
    with w.block(f"{name}(const {t}* __restrict__ A, const {t}* __restrict__ B, {out_dt.c_type}* __restrict__ C,\n"
                 f"    int M, int N, int K, long long lda, long long ldb, long long ldc, float alpha{beta_arg})"):
        block_to_tile(w)
        w("// ---- warp -> warp tile; lane -> fragment rows/columns (PTX mma m16n8k16 fragment layout) ----",
          "const int tid = threadIdx.x, warp_id = tid / 32, lane = tid % 32;",
          "const int warp_m = (warp_id / WARPS_N) * WM, warp_n = (warp_id % WARPS_N) * WN;",
          "const int frag_row = lane / 4, frag_col = lane % 4;   // accumulator row within 8, column pair")
        w.blank()
        w(f"// ---- shared memory: STAGES x (A tile [{ga['rows']}][LDS_A], B tile [{gb['rows']}][LDS_B]) ----",
          "extern __shared__ float4 smem_raw[];",
          f"{t}* const As = reinterpret_cast<{t}*>(smem_raw);",
          f"{t}* const Bs = As + STAGES * STAGE_A;")
        w.blank()
        k_range(w, s.split_k)
        w("const int k_tiles = max(0, (k_end - k_begin + BK - 1) / BK);")
        w.blank()
        _load_stage_fn(w, op, dt, ga, gb, va, vb)
        w.blank()
        w("float acc[FRAG_M][FRAG_N][4];          // the warp tile's accumulators, four per fragment",
          "#pragma unroll",
          "for (int i = 0; i < FRAG_M; ++i)",
          "  #pragma unroll",
          "  for (int j = 0; j < FRAG_N; ++j)",
          "    #pragma unroll",
          "    for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;")
        w.blank()
        w("// ---- prologue: request K tiles 0 .. STAGES-2 (one commit group per tile, empty past the end) ----",
          "#pragma unroll",
          "for (int st = 0; st < STAGES - 1; ++st) {",
          "  if (st < k_tiles) load_stage(st, k_begin + st * BK);",
          "  tdsl_cp_async_commit();",
          "}")
        w.blank()
        w("// ---- main loop over K tiles ----")
        with w.block("for (int kt = 0; kt < k_tiles; ++kt)"):
            w("tdsl_cp_async_wait<STAGES - 2>();   // this thread's copies of tile kt have landed",
              "__syncthreads();                    // ... everyone's; and stage (kt-1) % STAGES is free",
              "const int next = kt + STAGES - 1;",
              "if (next < k_tiles) load_stage(next % STAGES, k_begin + next * BK);",
              "tdsl_cp_async_commit();",
              "const int cur = kt % STAGES;",
              f"const {t}* const as = As + cur * STAGE_A;",
              f"const {t}* const bs = Bs + cur * STAGE_B;")
            _compute(w, op)
        w("tdsl_cp_async_wait<0>();  // no copy may be left in flight when the block exits")
        w.blank()
        _epilogue(w, out_op, out_dt, vc)
    return KernelSource(name=name, source=w.text(), block=(s.threads, 1, 1), dynamic_smem_bytes=smem)


def _load_stage_fn(w: Writer, op: GemmOp, dt: dtypes.DType, ga: dict, gb: dict, va: int, vb: int) -> None:
    """A lambda requesting one K tile of A and B into a shared stage."""
    w("// global -> shared: one K tile of A and B into stage `st`, VA/VB elements per cp.async, zero-filled",
      "// outside the matrix (a copy is wholly in or out: the contiguous extent is a multiple of its width)")
    with w.block("auto load_stage = [&](int st, int k0)", "};"):
        for which, g, v in (("A", ga, va), ("B", gb, vb)):
            base = "As" if which == "A" else "Bs"
            # narrow copies (misaligned operands) are many: a rolled loop keeps their addresses out of registers
            w(f"{dt.c_type}* const {which.lower()}_dst = {base} + st * STAGE_{which};",
              "#pragma unroll" if v * dt.itemsize == 16 else "#pragma unroll 2  // narrow copies: keep registers free")
            with w.block(f"for (int i = 0; i < COPIES_{which}; ++i)"):
                w("const int idx = tid + i * THREADS;",
                  f"const int r = idx / ({g['cols']} / {g['v']});              // row of the tile (strided dim)",
                  f"const int c = (idx % ({g['cols']} / {g['v']})) * {g['v']};  // first element along the contiguous dim",
                  f"const bool in_range = {g['bound']};")
                if v * dt.itemsize >= 4:
                    w(f"tdsl_cp_async<{v * dt.itemsize}>({which.lower()}_dst + r * {g['ld']} + c, "
                      f"in_range ? ({g['ptr']}) : {which}, in_range);")
                else:  # 2-byte elements at odd addresses: cp.async copies 4 bytes at least; plain loads
                    w(f"{which.lower()}_dst[r * {g['ld']} + c] = in_range ? {g['ptr'].replace(which + ' + ', which + '[')}] "
                      ": 0;")


def _compute(w: Writer, op: GemmOp) -> None:
    """ldmatrix fragments of one k16 step and the mma.sync products of the warp tile."""
    if op.layout_a == "row":  # tile [m][k]: matrices (m0-7,k0-7) (m8-15,k0-7) (m0-7,k8-15) (m8-15,k8-15)
        a_addr = "as + (warp_m + i * 16 + lane % 16) * LDS_A + kk + (lane / 16) * 8"
        a_ld, a_how = "tdsl_ldmatrix_x4", "row-major tile: lane l points at row l%16, column 8*(l/16)"
    else:  # tile [k][m]: the same four matrices, transposed on the way
        a_addr = "as + (kk + (lane / 16) * 8 + lane % 8) * LDS_A + warp_m + i * 16 + ((lane / 8) % 2) * 8"
        a_ld, a_how = "tdsl_ldmatrix_x4_trans", "M-contiguous tile, transposed by ldmatrix"
    if op.layout_b == "col":  # tile [n][k]: (n0-7,k0-7) (n0-7,k8-15) (n8-15,k0-7) (n8-15,k8-15)
        b_addr = "bs + (warp_n + j * 8 + (lane / 16) * 8 + lane % 8) * LDS_B + kk + ((lane / 8) % 2) * 8"
        b_ld, b_how = "tdsl_ldmatrix_x4", "K-contiguous tile"
    else:  # tile [k][n]: (k0-7,n0-7) (k8-15,n0-7) (k0-7,n8-15) (k8-15,n8-15), transposed
        b_addr = "bs + (kk + ((lane / 8) % 2) * 8 + lane % 8) * LDS_B + warp_n + j * 8 + (lane / 16) * 8"
        b_ld, b_how = "tdsl_ldmatrix_x4_trans", "N-contiguous tile, transposed by ldmatrix"
    w("// compute: BK/16 steps; each loads the warp's fragments with ldmatrix and issues FRAG_M*FRAG_N mma")
    w("#pragma unroll")
    with w.block("for (int kk = 0; kk < BK; kk += 16)"):
        w(f"unsigned a_frag[FRAG_M][4];   // A: {a_how}",
          f"unsigned b_frag[FRAG_N][2];   // B: {b_how}; one x4 load covers two n8 fragments",
          "#pragma unroll",
          f"for (int i = 0; i < FRAG_M; ++i) {a_ld}(a_frag[i], {a_addr});",
          "#pragma unroll")
        with w.block("for (int j = 0; j < FRAG_N; j += 2)"):
            w("unsigned r[4];",
              f"{b_ld}(r, {b_addr});",
              "b_frag[j][0] = r[0]; b_frag[j][1] = r[1]; b_frag[j + 1][0] = r[2]; b_frag[j + 1][1] = r[3];")
        w("#pragma unroll",
          "for (int i = 0; i < FRAG_M; ++i)",
          "  #pragma unroll",
          "  for (int j = 0; j < FRAG_N; ++j) tdsl_mma_16816(acc[i][j], a_frag[i], b_frag[j][0], b_frag[j][1]);")


def _epilogue(w: Writer, op: GemmOp, dt: dtypes.DType, vc: int) -> None:
    t = dt.c_type
    w("// ---- epilogue: C = alpha * acc" + (" + beta * C" if op.read_c else " (C is never read)")
      + "; each thread owns rows frag_row, frag_row+8 and columns 2*frag_col, 2*frag_col+1 of every fragment ----")
    w("#pragma unroll")
    with w.block("for (int i = 0; i < FRAG_M; ++i)"):
        w("#pragma unroll")
        with w.block("for (int h = 0; h < 2; ++h)"):
            w("const int gm = block_m + warp_m + i * 16 + h * 8 + frag_row;",
              "if (gm >= M) continue;",
              f"{t}* const c_row = C + (long long)gm * ldc;",
              "#pragma unroll")
            with w.block("for (int j = 0; j < FRAG_N; ++j)"):
                w("const int gn = block_n + warp_n + j * 8 + 2 * frag_col;")
                store_pair(w, op, dt, vc, "acc[i][j][2 * h + {e}]")

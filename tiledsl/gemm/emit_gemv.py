"""GEMV-style GEMM emitter (``GemmSchedule.kernel == "gemv"``): a pure function (GemmOp, GemmSchedule) ->
KernelSource for C (M×N) = A (M×K) · B (K×N) with few rows M (decode-time ``x @ W``), where the whole cost is
reading B once from device memory.

Structure of the kernel:

1. grid: x = blocks of columns of C, y = ``split_k`` slices of K, z = groups of ``bm`` rows of C; ``bn``
   threads per block;
2. row-major B (N contiguous, ``x @ W`` with W [K, N]): thread t of the block owns ``VB`` adjacent columns; it
   walks its K slice reading one ``VB``-wide vector of B per k (a warp reads 32·VB contiguous elements, fully
   coalesced) and one element of each of the ``bm`` rows of A (the same address across the warp: a broadcast),
   and keeps bm×VB accumulators. With ``col_groups`` > 1 it owns ``col_groups`` such groups of columns, each 32·VB columns past
   the one before (every load still coalesced across the warp), and keeps bm×col_groups·VB: each element of A read
   feeds col_groups·VB columns, which is what an odd N (VB = 1, scalar loads of B) needs;
3. column-major B (K contiguous, ``x @ W.T`` with W [N, K], torch's Linear): warp w of the block owns ``rn``
   columns; its lanes read ``VB``-wide vectors along K (32·VB contiguous elements per step) and the matching
   elements of A's rows, then sum the bm·rn partial dot products across the warp with shuffles (with ``k_lanes``
   < 32, each group of k_lanes lanes owns its own ``rn`` columns and sums over its lanes);
4. epilogue: C = alpha·acc (+ beta·C), into a row-major C or a column-major one (``GemmOp.layout_c="col"``: the
   few-column product C = A·B that :func:`tiledsl.gemm` runs as the few rows Cᵀ = Bᵀ·Aᵀ); with split_k > 1 the
   float32 partial sums go to the row-major workspace and the split-K kernel adds them in a fixed order
   (deterministic) into C in its layout, or (``split_k_fused``) the last block of each column group to take its
   ticket does, in the same order.

Without ``smem_a`` nothing goes through shared memory and the main loop has no block barrier: every load is
independent, and ``unroll`` K steps per thread are in flight (the fused split-K's arrival has two barriers and a
one-flag shared variable). With ``smem_a`` the block first stages its K slice of A in shared memory behind one
barrier. Row-major B: transposed (At[k][m], float32), and each thread keeps a ring of ``unroll`` loads of B in
flight: per k it reads bm/4 16-byte broadcasts of At instead of holding bm·VA elements of A in registers.
Column-major B: in A's own layout (As[m][k - k_begin], float32, row stride the slice's depth); per step a lane
reads its RN vectors of B, then row by row one VB-wide vector of As (consecutive across the warp), and the warp's
BM·RN sums leave by a reduce-scatter butterfly where BM·RN is a multiple of 32. Column-major B with ``spare_slot``
(:func:`_col_b_ring_loop`): by vectors of VB k (As[kv][m][VB], BM + 1 vectors apart), the warp's lanes in groups of
``k_lanes`` along K, each group on its own RN columns, and a ring of UNROLL + 1 slots of each lane's RN vectors of B
loaded UNROLL steps ahead; each group's BM·RN sums leave by a butterfly over its K_LANES lanes.
"""

from __future__ import annotations

import json
from dataclasses import replace

from .. import dtypes
from .. import rules as R
from ..codegen.prelude import helpers_for
from ..codegen.writer import Writer
from ..compile import KernelSource
from .emit_common import COMPONENTS, VEC_TYPES, constexpr_table, fused_arrival, gemv_k_range, gemv_kernel_head
from .kernel_plan import gemv_widths, plan_gemm
from .op import GemmOp
from .schedule import GEMM_RULES, GemmSchedule


def _load_vec(w: Writer, dt: dtypes.DType, width: int, dst: str, addr: str, streaming: bool = False) -> None:
    """``float dst[width]`` = the ``width`` elements at ``addr`` (a pointer expression), as one vector load;
    ``streaming`` (float32 only): ``__ldcs``, cached evict-first in L1 and L2 (data read once: B streaming past A in
    L1; a grid with several blocks of rows, M > BM, reads B once per block of rows and does not find it in L2:
    ``schedule=None`` never makes one, BM covering M)."""
    if width == 1:
        w(f"const float {dst}[1] = {{{dt.to_acc(f'__ldcs({addr})' if streaming else f'*({addr})')}}};")
        return
    vt = VEC_TYPES[(dt.c_type, width)]
    load = (f"__ldcs(reinterpret_cast<const {vt}*>({addr}))" if streaming
            else f"*reinterpret_cast<const {vt}*>({addr})")
    w(f"const {vt} {dst}_v = {load};")
    w(f"const float {dst}[{width}] = {{" + ", ".join(dt.to_acc(f"{dst}_v.{c}") for c in COMPONENTS[:width]) + "};")


def emit_gemm_gemv(op: GemmOp, s: GemmSchedule) -> KernelSource:
    """Emit the GEMV-style kernel of ``op`` under ``s`` (see the module docstring). Pure.

    Returns:
        KernelSource with ``block=(bn, 1, 1)``, dynamic shared memory only with ``smem_a`` (the plan's); launch on
        :func:`tiledsl.gemm.kernel_plan.grid`.
    """
    p = plan_gemm(op, s)
    dt = dtypes.get(op.dtype)
    va, vb = gemv_widths(op, s)
    fused = s.split_k_fused
    out_dt = dtypes.get("float32" if fused else p.detail.out_dtype)  # of the main store (fused: the workspace)
    # split-K: the slice's float32 partial sums go to the row-major workspace (C itself, or W when fused)
    out_op = replace(op, read_c=False, layout_c="row", align_c=None) if s.split_k > 1 else op  # C's width: the plan's
    vc = p.width("W") if fused else p.width("C")  # the width of the main store
    dst = ("P", "N", "") if fused else ("C", "ldc", "alpha * ")  # where it goes: pointer, leading dimension, scale
    row_b = op.layout_b == "row"
    a_at = _a_at(op)
    ring_b = s.smem_a and s.spare_slot and not row_b  # a column-major B's ring: lanes in groups of K_LANES
    w = Writer()
    w(f"// tiledsl GEMV-style GEMM: C[M,N] = alpha * A[M,K] @ B[K,N]{' + beta * C' if op.read_c else ''}, few rows M",
      f"// dtype {op.dtype} in/out, float32 accumulation; A {op.layout_a}-major, B {op.layout_b}-major, "
      f"C {op.layout_c}-major",
      f"// schedule: {json.dumps(s.header_dict(), sort_keys=True)}")
    prelude = helpers_for(op.dtype)
    if prelude:
        w(prelude.rstrip("\n"))
    w.blank()
    w("// ---- schedule (tiledsl.GemmSchedule, kernel='gemv') ----")
    constexpr_table(w, [
        ("BM", s.bm, "bm: rows of C per block (kept in registers)"), ("BN", s.bn, "bn: threads per block"),
        ("BK", s.bk, "bk: K slices start on multiples of it"), ("VEC", s.vec, "vec: requested elements per load"),
        ("UNROLL", s.unroll, "unroll: K steps per thread in flight"), ("SPLIT_K", s.split_k, "split_k: K slices"),
        ("MMA", 0, "mma='fma'"), ("KERNEL", 1, "kernel='gemv'"), ("THREADS", s.threads, "= bn"),
        ("MIN_BLOCKS", p.min_blocks, "min_blocks"),
        *([("COL_GROUPS", s.col_groups, "col_groups: groups of VB columns per thread")]
          if s.col_groups != 1 or s.smem_a else []),  # smem_a: rule smem_a_on_gemv's static_assert names it
        *([("SMEM_A", 1, "smem_a: the K slice of A staged in shared memory")] if s.smem_a else []),
        *([("SPARE_SLOT", 1, "spare_slot: a ring of UNROLL + 1 loads of B, a running pointer into B")]
          if s.spare_slot else []),
        *([("K_LANES", s.k_lanes, "k_lanes: lanes of a warp along K per group of RN columns")]
          if (s.spare_slot or s.k_lanes != 32) and not row_b else []),
        # fields of the tiled kernels, unused here; the rule table's static_asserts name them
        ("RM", s.rm, "rm (unused)"), ("RN", s.rn, "rn: columns per warp (column-major B)"), ("WM", s.wm, "wm (unused)"),
        ("WN", s.wn, "wn (unused)"), ("STAGES", s.stages, "stages (unused)"),
        ("SMEM_PAD", s.smem_pad, "smem_pad (unused)"), ("SWIZZLE", s.swizzle, "swizzle (unused)"),
    ])
    w(f"constexpr int VA = {va}, VB = {vb}, VC = {vc};  // elements per load of A and B, per store of C "
      f"(op alignment {op.align_a}/{op.align_b}/{op.align_c})")
    for line in R.static_asserts(GEMM_RULES, s.env()):
        w(line)
    w.blank()
    with w.block(gemv_kernel_head(w, op, s, p)):
        gemv_k_range(w, s)
        w("const int row0 = blockIdx.z * BM;                  // first row of C of this block")
        if out_op.layout_c == "col":
            w("// C is column-major: element (m, n) at C[n * ldc + m]")
        if row_b:
            grouped = s.col_groups > 1  # one group of columns: the source tuned records hash, byte for byte
            if grouped:
                w("// ---- thread -> COL_GROUPS groups of VB adjacent columns, each group 32*VB columns past the one "
                  "before (a warp",
                  "// reads 32*VB contiguous elements per group and k: coalesced), so one row of A in registers feeds",
                  "// COL_GROUPS*VB columns; walk the K slice VA steps at a time: per row of A one VA-wide load (the same",
                  "// address across the warp), per k and group one VB-wide load of B ----",
                  "const int lane = threadIdx.x % 32;",
                  "const int gn0 = ((blockIdx.x * THREADS + threadIdx.x - lane) * COL_GROUPS + lane) * VB;  // group 0's "
                  "first column",
                  "int col[COL_GROUPS];  // group g's first column; groups past N read the last VB columns (never stored)",
                  "#pragma unroll",
                  "for (int g = 0; g < COL_GROUPS; ++g) col[g] = gn0 + g * 32 * VB < N ? gn0 + g * 32 * VB : N - VB;",
                  "float acc[BM][COL_GROUPS * VB] = {};")
            elif s.smem_a:
                w("// ---- thread -> VB adjacent columns; the block's K slice of A is staged in shared memory first ----",
                  "const int gn = (blockIdx.x * THREADS + threadIdx.x) * VB;  // N is a multiple of VB (alignment)",
                  "float acc[BM][VB] = {};")
            else:
                w("// ---- thread -> VB adjacent columns; walk the K slice VA steps at a time: per row of A one VA-wide",
                  "// load (the same address across the warp), per k one VB-wide load of B ----",
                  "const int gn = (blockIdx.x * THREADS + threadIdx.x) * VB;  // N is a multiple of VB (alignment)",
                  "float acc[BM][VB] = {};")
            if s.smem_a:
                _row_b_smem_a_loop(w, op, dt, va, vb, a_at, s.spare_slot)
            else:
                with w.block("if (gn0 < N)" if grouped else "if (gn < N)"):
                    _row_b_k_loop(w, dt, va, vb, a_at, grouped)
            epilogue = _epilogue_row_b_groups if grouped else _epilogue_row_b
            epilogue(w, out_op, out_dt, vc, *dst)
            if fused:
                fused_arrival(w)
                _fused_sum_row_b(w, vb, grouped)
                vc_c = p.width("C")  # C's stores; the main store (VC) went to the workspace
                epilogue(w, op, dtypes.get(op.dtype), vc_c, vc_name="VC" if vc_c == vc else str(vc_c))
        elif ring_b:
            _col_b_ring_loop(w, op, dt, va, vb)
            _epilogue_col_b_butterfly(w, out_op, out_dt, *dst, lanes=s.k_lanes)  # rule k_lanes_group_sums
            if fused:
                fused_arrival(w)
                _fused_sum_col_b(w, op, dtypes.get(op.dtype), lanes=s.k_lanes)
        elif s.smem_a:
            _col_b_smem_a_loop(w, op, dt, va, vb, a_at)
            if s.bm * s.rn % 32 == 0:  # the warp's sums fill whole lanes: a reduce-scatter
                _epilogue_col_b_butterfly(w, out_op, out_dt, *dst)
            else:
                _epilogue_col_b(w, out_op, out_dt, *dst, flat=True)
            if fused:
                fused_arrival(w)
                _fused_sum_col_b(w, op, dtypes.get(op.dtype))
        else:
            grouped = s.k_lanes != 32  # lanes in groups along K (rule k_lanes_group_sums: a butterfly per group)
            butterfly = s.bm * s.rn % 32 == 0 or grouped  # the warp's sums fill whole lanes: a reduce-scatter epilogue
            w('static_assert(VA == 1 || VA == VB, "A is read VB-wide along K, or one element at a time");')
            if grouped:
                w("// ---- warp -> 32 / K_LANES groups of K_LANES lanes, each group on its own RN columns of C; a group's",
                  "// lanes read VB-wide vectors along K (K_LANES*VB elements per step) of its RN columns of B, then row by",
                  "// row a vector of A: the K_LANES*VB elements of a row a group reads are the ones every group of the warp",
                  "// reads (one L1 wavefront serves all groups where K_LANES*VB*sizeof(element) <= 128 bytes); the thread holds one",
                  "// row's piece of A at a time ----",
                  "const int lane = threadIdx.x % 32, kl = lane % K_LANES;  // kl: the lane's place along K in its group",
                  "const int gn0 = ((blockIdx.x * (THREADS / 32) + threadIdx.x / 32) * (32 / K_LANES) + lane / K_LANES)"
                  " * RN;")
            else:
                w("// ---- warp -> RN columns of C; its lanes read VB-wide vectors along K (32*VB elements per step) of",
                  "// the RN columns of B, then row by row a vector of A (L1 hits after the first warp), each used for the",
                  "// RN columns: the thread holds one row's piece of A at a time ----",
                  "const int lane = threadIdx.x % 32;",
                  "const int gn0 = (blockIdx.x * (THREADS / 32) + threadIdx.x / 32) * RN;")
            w("float acc[BM * RN] = {};  // entry m * RN + c: row m, column gn0 + c" if butterfly
              else "float acc[BM][RN] = {};")
            at = "acc[m * RN + c]" if butterfly else "acc[m][c]"
            with w.block("if (gn0 < N)"):
                w("// K slices start on multiples of BK and K is a multiple of VB (alignment): no partial vector")
                w("#pragma unroll UNROLL")
                with w.block("for (int k = k_begin + kl * VB; k < k_end; k += K_LANES * VB)" if grouped
                             else "for (int k = k_begin + lane * VB; k < k_end; k += 32 * VB)"):
                    w("float b[RN][VB];  // the RN columns' VB elements at k",
                      "#pragma unroll")
                    with w.block("for (int c = 0; c < RN; ++c)"):
                        w("const int gn = gn0 + c < N ? gn0 + c : N - 1;  // columns past N: any valid one, never stored")
                        _load_vec(w, dt, vb, "bc", "B + (long long)gn * ldb + k", streaming=op.dtype == "float32")
                        w("#pragma unroll", "for (int j = 0; j < VB; ++j) b[c][j] = bc[j];")
                    w("#pragma unroll")
                    with w.block("for (int m = 0; m < BM; ++m)"):
                        w("const int gm = row0 + m < M ? row0 + m : M - 1;  // rows past M: any valid row, never stored")
                        if va == vb and vb > 1:
                            _load_vec(w, dt, va, "a", "A + (long long)gm * lda + k")
                        else:
                            w("float a[VB];",
                              "#pragma unroll",
                              f"for (int j = 0; j < VB; ++j) a[j] = {dt.to_acc(a_at.format(k='k + j'))};")
                        w("#pragma unroll",
                          "for (int c = 0; c < RN; ++c)",
                          "  #pragma unroll",
                          f"  for (int j = 0; j < VB; ++j) {at} += a[j] * b[c][j];")
            if butterfly:
                _epilogue_col_b_butterfly(w, out_op, out_dt, *dst, lanes=s.k_lanes)
            else:
                _epilogue_col_b(w, out_op, out_dt, *dst)
            if fused:
                fused_arrival(w)
                _fused_sum_col_b(w, op, dtypes.get(op.dtype), lanes=s.k_lanes)
    return KernelSource(name=p.kernel_name, source=w.text(), block=(s.threads, 1, 1),
                        dynamic_smem_bytes=p.dynamic_smem_bytes)


def _row_b_k_loop(w: Writer, dt: dtypes.DType, va: int, vb: int, a_at: str, grouped: bool) -> None:
    """Emit the main loop of a row-major B: per VA steps of K, the BM rows' VA elements of A, then per k the B vector
    of the thread's one group of VB columns (``gn``) or of each of its COL_GROUPS groups (``col[g]``, ``grouped``)."""
    w("// K slices start on multiples of BK and K is a multiple of VA (alignment): whole steps")
    w("#pragma unroll UNROLL")
    with w.block("for (int k0 = k_begin; k0 < k_end; k0 += VA)"):
        w("float a[BM][VA];",
          "#pragma unroll")
        with w.block("for (int m = 0; m < BM; ++m)"):
            w("const int gm = row0 + m < M ? row0 + m : M - 1;  // rows past M: any valid row, never stored")
            if va > 1:
                _load_vec(w, dt, va, "am", "A + (long long)gm * lda + k0")
                w("#pragma unroll", "for (int kk = 0; kk < VA; ++kk) a[m][kk] = am[kk];")
            else:
                w(f"a[m][0] = {dt.to_acc(a_at.format(k='k0'))};")
        w("#pragma unroll")
        with w.block("for (int kk = 0; kk < VA; ++kk)"):
            if not grouped:
                _load_vec(w, dt, vb, "b", "B + (long long)(k0 + kk) * ldb + gn")
                w("#pragma unroll",
                  "for (int m = 0; m < BM; ++m)",
                  "  #pragma unroll",
                  "  for (int j = 0; j < VB; ++j) acc[m][j] += a[m][kk] * b[j];")
                return
            w("#pragma unroll")
            with w.block("for (int g = 0; g < COL_GROUPS; ++g)"):
                _load_vec(w, dt, vb, "b", "B + (long long)(k0 + kk) * ldb + col[g]")
                w("#pragma unroll",
                  "for (int m = 0; m < BM; ++m)",
                  "  #pragma unroll",
                  "  for (int j = 0; j < VB; ++j) acc[m][g * VB + j] += a[m][kk] * b[j];")


def _row_b_smem_a_loop(w: Writer, op: GemmOp, dt: dtypes.DType, va: int, vb: int, a_at: str,
                       spare_slot: bool) -> None:
    """Emit ``smem_a``'s main loop (row-major B): the ring's first UNROLL loads of B, the block's K slice of A staged
    transposed in shared memory (At[k][m], float32; rows past M zero), one barrier, then per k one VB-wide vector of
    B from the ring (refilled UNROLL rows ahead) times BM/4 16-byte broadcasts of At. Columns past N read the last VB
    columns of B and are never stored; a slice past K (n_k = 0) leaves acc zero. ``spare_slot``
    (``GemmSchedule.spare_slot``): a ring of UNROLL + 1 slots and a running pointer into B
    (:func:`_ring_spare_slot`)."""
    raw = VEC_TYPES[(dt.c_type, vb)] if vb > 1 else dt.c_type  # B as loaded; converted to float at its use
    w("// ---- smem_a: per k, BM/4 16-byte broadcasts of A from shared memory and one VB-wide vector of B, which a ring",
      "// keeps UNROLL rows ahead (its first UNROLL loads are issued before A is staged) ----",
      "extern __shared__ float4 at4[];                  // At[k - k_begin][BM / 4]: 4 rows of A per k and float4",
      "float* const at = reinterpret_cast<float*>(at4);",
      "const int n_k = k_end - k_begin;                // this slice's depth: 0 for a slice past K",
      f"const {dt.c_type}* const b_col = B + (long long)k_begin * ldb + (gn < N ? gn : N - VB);  // columns past N: "
      "the last VB (never stored)")
    with w.block("if (n_k > 0)"):  # the same for every thread of the block: the barrier inside is reached by all
        if spare_slot:
            w(f"{raw} ring[UNROLL + 1];  // slot s: row k0 + s at a pass's start (s < UNROLL), slot UNROLL free")
        else:
            w(f"{raw} ring[UNROLL] = {{}};  // zero: a slice shorter than UNROLL reads slots it never loads (never used)")
        w("#pragma unroll",
          f"for (int u = 0; u < UNROLL; ++u) if (u < n_k) ring[u] = *reinterpret_cast<const {raw}*>(b_col + "
          "(long long)u * ldb);")
        w("// stage A: consecutive threads take consecutive rows at the same k, VA k per load (with VA > 1 the warp's",
          "// 32 / BM groups of rows may store to the same banks: 2-way at BM = 16, 4-way at 8; once per slice)")
        _stage_a(w, dt, va, a_at, "const int m = i % BM, kv = i / BM, gm = row0 + m;", "at[(kv * VA + j) * BM + m]")
        w("__syncthreads();")
        if spare_slot:
            _ring_spare_slot(w, dt, vb, raw)
            return
        with w.block("for (int k0 = 0; k0 < n_k; k0 += UNROLL)"):
            w("#pragma unroll")
            with w.block("for (int u = 0; u < UNROLL; ++u)"):
                # the ring is read and refilled outside the FMAs' guard (the refill predicated only on rows left):
                # inside it the kernel ran 1.6-2.0x slower (docs/gemm.md "The ring of B outside the guard")
                w(f"const {raw} b_raw = ring[u];",
                  f"if (k0 + u + UNROLL < n_k) ring[u] = *reinterpret_cast<const {raw}*>(b_col + "
                  "(long long)(k0 + u + UNROLL) * ldb);  // UNROLL rows ahead")
                with w.block("if (k0 + u < n_k)"):
                    _ring_step(w, dt, vb, "b_raw")


def _ring_spare_slot(w: Writer, dt: dtypes.DType, vb: int, raw: str) -> None:
    """Emit ``spare_slot``'s loop over the slice (see :func:`_row_b_smem_a_loop`): a ring of UNROLL + 1 slots walked in
    passes of UNROLL + 1 steps, step u loading the row UNROLL steps ahead into the slot step u - 1 emptied (at u = 0
    the spare one) and then multiplying slot u: every slot index a constant, no slot copied, UNROLL loads in flight at
    each step's FMAs; ``b_next`` walks B one row per step instead of each load's address being rebuilt. Both guards
    stay: each step's FMAs under their own branch keep ptxas from moving the step's load past them (without a branch
    it moves every load of a pass to the pass's end, so the first rows of the next pass wait on memory)."""
    w("// ---- the ring has a spare slot: at a pass's start slot s holds row k0 + s (s < UNROLL) and slot UNROLL is free;",
      "// step u loads the row UNROLL steps ahead into the slot step u - 1 emptied, then multiplies slot u ----",
      f"const {dt.c_type}* b_next = b_col + (long long)UNROLL * ldb;  // the row the next step loads: k0 + u + UNROLL")
    with w.block("for (int k0 = 0; k0 < n_k; k0 += UNROLL + 1)"):
        w("#pragma unroll")
        with w.block("for (int u = 0; u <= UNROLL; ++u)"):
            w(f"if (k0 + u + UNROLL < n_k) ring[(u + UNROLL) % (UNROLL + 1)] = *reinterpret_cast<const {raw}*>(b_next);",
              "b_next += ldb;")
            with w.block("if (k0 + u < n_k)"):  # a branch per step: it keeps the load above before the FMAs
                _ring_step(w, dt, vb, "ring[u]")


def _ring_step(w: Writer, dt: dtypes.DType, vb: int, src: str) -> None:
    """Emit one step k0 + u of the staged-A loop: the VB elements of B in ``src`` (the ring's vector, as loaded)
    converted to float, times BM/4 16-byte broadcasts of At: BM·VB FMAs."""
    conv = [dt.to_acc(src)] if vb == 1 else [dt.to_acc(f"{src}.{c}") for c in COMPONENTS[:vb]]
    w(f"const float b[VB] = {{{', '.join(conv)}}};",
      "#pragma unroll")
    with w.block("for (int q = 0; q < BM / 4; ++q)"):
        w("const float4 a = at4[(k0 + u) * (BM / 4) + q];  // rows 4q..4q+3 at this k: one broadcast",
          "const float a4[4] = {a.x, a.y, a.z, a.w};",
          "#pragma unroll",
          "for (int r = 0; r < 4; ++r)",
          "  #pragma unroll",
          "  for (int j = 0; j < VB; ++j) acc[4 * q + r][j] += a4[r] * b[j];")


def _stage_a(w: Writer, dt: dtypes.DType, va: int, a_at: str, index: str, dst: str,
             piece_at: str | None = None) -> None:
    """Emit the loop staging the block's K slice of A in shared memory, float32, rows past M zero: the block's
    threads take the BM·n_k/VA VA-wide pieces in turn, ``index`` (a statement) naming the piece's row ``m``, its
    piece ``kv`` along K and ``gm``, and ``dst`` (of ``j``, ``m``, ``kv``) where element j of it goes; or, where the
    piece's elements lie next to each other and VA > 1, ``piece_at`` (of ``m``, ``kv``): the ``float*`` of its first,
    aligned to VA floats, stored as one vector (consecutive threads then write consecutive vectors: no conflicts)."""
    vector = piece_at is not None and va > 1
    vt = VEC_TYPES[("float", va)] if vector else ""
    with w.block("for (int i = threadIdx.x; i < BM * (n_k / VA); i += THREADS)"):
        w(index)
        if vector:
            w(f"{vt} piece = {{}};  // rows past M: zero")
            with w.block("if (gm < M)"):
                _load_vec(w, dt, va, "av", "A + (long long)gm * lda + k_begin + kv * VA")
                w(f"piece = make_{vt}(" + ", ".join(f"av[{j}]" for j in range(va)) + ");")
            w(f"*reinterpret_cast<{vt}*>({piece_at}) = piece;")
            return
        with w.block("if (gm < M)"):
            if va > 1:
                _load_vec(w, dt, va, "av", "A + (long long)gm * lda + k_begin + kv * VA")
            else:
                w(f"const float av[1] = {{{dt.to_acc(a_at.format(k='k_begin + kv'))}}};")
            w("#pragma unroll", f"for (int j = 0; j < VA; ++j) {dst} = av[j];")
        with w.block("else"):
            w("#pragma unroll", f"for (int j = 0; j < VA; ++j) {dst} = 0.f;  // rows past M")


def _col_b_smem_a_loop(w: Writer, op: GemmOp, dt: dtypes.DType, va: int, vb: int, a_at: str) -> None:
    """Emit ``smem_a``'s main loop for a column-major B: the block's K slice of A staged in shared memory in its own
    layout (As[m][k - k_begin], float32, row stride the slice's depth; rows past M zero) behind one barrier, then per
    step each lane's RN VB-wide vectors of B (its columns, along K) and per row of A one VB-wide read of As: the warp's
    lanes read consecutive vectors (conflict-free), one row at a time, so A costs VB registers instead of BM·VB.
    Columns past N read column N - 1 and are never stored."""
    w('static_assert(VA == 1 || VA == VB, "A is read VB-wide along K, or one element at a time");',
      "// ---- smem_a: the block's K slice of A staged in shared memory (As[m][k - k_begin], row stride n_k), then",
      "// warp -> RN columns of C, its lanes reading VB-wide vectors along K (32*VB elements per step) of B and of As ----",
      "extern __shared__ float4 as4[];                  // As[BM][n_k], float32",
      "float* const as = reinterpret_cast<float*>(as4);",
      "const int n_k = k_end - k_begin;                // this slice's depth: a multiple of VB (alignment)",
      "const int lane = threadIdx.x % 32;",
      "const int gn0 = (blockIdx.x * (THREADS / 32) + threadIdx.x / 32) * RN;",
      f"const {dt.c_type}* b_col[RN];  // column gn0 + c's K slice; columns past N read column N - 1 (never stored)",
      "#pragma unroll",
      "for (int c = 0; c < RN; ++c) b_col[c] = B + (long long)(gn0 + c < N ? gn0 + c : N - 1) * ldb + k_begin;")
    w("// stage A: consecutive threads take consecutive VA-wide pieces of a row (once per slice; n_k is a multiple of VA)")
    _stage_a(w, dt, va, a_at, "const int m = i / (n_k / VA), kv = i % (n_k / VA), gm = row0 + m;",
             "as[m * n_k + kv * VA + j]", piece_at="as + m * n_k + kv * VA")
    w("__syncthreads();",
      "float acc[BM * RN] = {};  // entry m * RN + c: row m, column gn0 + c")
    with w.block("if (gn0 < N)"):
        w("#pragma unroll UNROLL")
        with w.block("for (int k = lane * VB; k < n_k; k += 32 * VB)"):
            w("float b[RN][VB];  // the RN columns' VB elements at k",
              "#pragma unroll")
            with w.block("for (int c = 0; c < RN; ++c)"):
                _load_vec(w, dt, vb, "bc", "b_col[c] + k")
                w("#pragma unroll", "for (int j = 0; j < VB; ++j) b[c][j] = bc[j];")
            _col_b_row_products(w, vb, "as + m * n_k + k", "as[m * n_k + k]", "row m at k: consecutive across the warp")


def _col_b_ring_loop(w: Writer, op: GemmOp, dt: dtypes.DType, va: int, vb: int) -> None:
    """Emit ``smem_a`` with ``spare_slot``'s main loop for a column-major B (x @ W.T): a warp's lanes in 32 / K_LANES
    groups of K_LANES, each group on its own RN columns and each lane on every K_LANES-th vector of VB k of the
    slice; the ring's first UNROLL steps of B issued, then the slice of A staged by vectors of K (As[kv][m][VB],
    float32, BM + 1 vectors apart: rows past M zero), one barrier, then per step the ring's load UNROLL steps ahead
    into the slot the step before emptied (through a pointer per column walking B) and the step's RN vectors of B
    times one VB-wide read of As per row. Every slot index and every offset into As a constant; the per-step guard
    keeps each step's load before its FMAs (as :func:`_ring_spare_slot`). Columns past N read column N - 1 and are
    never stored; a slice past K (n_kv = 0) leaves acc zero."""
    raw = VEC_TYPES[(dt.c_type, vb)] if vb > 1 else dt.c_type  # B as loaded; converted to float at its use
    stream = op.dtype == "float32"  # B is read once: __ldcs (evict-first), as the kernel with A in registers

    def load(slot: str) -> str:
        return (f"#pragma unroll\nfor (int c = 0; c < RN; ++c) {slot} = "
                + (f"__ldcs(reinterpret_cast<const {raw}*>(b_next[c]));" if stream
                   else f"*reinterpret_cast<const {raw}*>(b_next[c]);"))

    w("// ---- smem_a with a ring of B (spare_slot), column-major B: the warp's lanes in 32 / K_LANES groups of K_LANES",
      "// along K, each group on its own RN columns; the block's K slice of A staged by vectors of VB k (As[kv][m][VB],",
      "// BM + 1 vectors apart: the K_LANES lanes of a group, on consecutive kv, read distinct banks, and one read of a",
      "// row serves every group); per step a lane multiplies the RN vectors of B its ring loaded UNROLL steps before",
      "// by one VB-wide read of As per row ----",
      "extern __shared__ float4 as4[];                  // As[n_kv][BM + 1][VB], float32",
      "float* const as = reinterpret_cast<float*>(as4);",
      "constexpr int AS_KV = (BM + 1) * VB;            // floats per vector of K in As: BM rows and one of padding",
      "const int n_k = k_end - k_begin;                // this slice's depth: a multiple of VB (alignment), 0 past K",
      "const int n_kv = n_k / VB;                      // its vectors of K",
      "const int lane = threadIdx.x % 32, kl = lane % K_LANES;  // kl: the lane's place along K in its group",
      "const int gn0 = ((blockIdx.x * (THREADS / 32) + threadIdx.x / 32) * (32 / K_LANES) + lane / K_LANES) * RN;",
      f"const {dt.c_type}* b_next[RN];  // column gn0 + c's next vector to load; columns past N read column N - 1 "
      "(never stored)",
      "#pragma unroll",
      "for (int c = 0; c < RN; ++c) b_next[c] = B + (long long)(gn0 + c < N ? gn0 + c : N - 1) * ldb + k_begin + "
      "kl * VB;",
      f"{raw} ring[UNROLL + 1][RN];  // slot s: the lane's step s of a pass (s < UNROLL) at the pass's start; "
      "slot UNROLL free",
      "// the ring's first UNROLL steps, issued before A is staged")
    w("#pragma unroll")
    with w.block("for (int u = 0; u < UNROLL; ++u)"):
        with w.block("if (kl + u * K_LANES < n_kv)"):
            w(load("ring[u][c]"))
        w("#pragma unroll", "for (int c = 0; c < RN; ++c) b_next[c] += K_LANES * VB;")
    w("// stage A: consecutive threads take consecutive vectors of K of one row (once per slice; BM + 1 vectors",
      "// apart, so consecutive threads' stores hit distinct banks)")
    index = "const int m = i / (n_k / VA), kv = i % (n_k / VA), gm = row0 + m;"
    if va == vb:  # piece kv of the row is vector kv of As
        _stage_a(w, dt, va, _a_at(op), index, "as[kv * AS_KV + m * VB + j]", piece_at="as + kv * AS_KV + m * VB")
    else:  # A read one element at a time (unaligned or column-major A): element kv of the row
        _stage_a(w, dt, va, _a_at(op), index, "as[(kv / VB) * AS_KV + m * VB + kv % VB]")
    w("__syncthreads();",
      "float acc[BM * RN] = {};  // entry m * RN + c: row m, column gn0 + c")
    with w.block("if (gn0 < N)"):  # a group past N adds nothing (its lanes still join the butterfly)
        w("const float* a_kv = as + kl * AS_KV;          // the lane's vector of K in As: K_LANES vectors on per step")
        with w.block("for (int kv0 = kl; kv0 < n_kv; kv0 += (UNROLL + 1) * K_LANES)"):
            w("#pragma unroll")
            with w.block("for (int u = 0; u <= UNROLL; ++u)"):
                with w.block("if (kv0 + (u + UNROLL) * K_LANES < n_kv)"):  # UNROLL steps ahead
                    w(load("ring[(u + UNROLL) % (UNROLL + 1)][c]") + "  // into the slot step u - 1 emptied")
                w("#pragma unroll", "for (int c = 0; c < RN; ++c) b_next[c] += K_LANES * VB;")
                with w.block("if (kv0 + u * K_LANES < n_kv)"):  # a branch per step keeps the load above before the FMAs
                    conv = ([dt.to_acc("ring[u][c]")] if vb == 1
                            else [dt.to_acc(f"ring[u][c].{c}") for c in COMPONENTS[:vb]])
                    w("float b[RN][VB];",
                      "#pragma unroll")
                    with w.block("for (int c = 0; c < RN; ++c)"):
                        w(" ".join(f"b[c][{j}] = {v};" for j, v in enumerate(conv)))
                    _col_b_row_products(w, vb, "a_kv + m * VB", "a_kv[m]", "row m: an immediate offset")
                    w("a_kv += K_LANES * AS_KV;")


def _col_b_row_products(w: Writer, vb: int, vector_at: str, scalar_at: str, comment: str) -> None:
    """Emit a column-major B's step over the block's rows: per row m one VB-wide read of staged A (``vector_at``, a
    ``float*`` of m; ``scalar_at`` the element where VB = 1) times the RN columns' ``b[c][VB]``, into
    ``acc[m * RN + c]``."""
    va_t = VEC_TYPES[("float", vb)] if vb > 1 else "float"
    w("#pragma unroll")
    with w.block("for (int m = 0; m < BM; ++m)"):
        if vb > 1:
            w(f"const {va_t} a_v = *reinterpret_cast<const {va_t}*>({vector_at});  // {comment}",
              "const float a[VB] = {" + ", ".join(f"a_v.{c}" for c in COMPONENTS[:vb]) + "};")
        else:
            w(f"const float a[1] = {{{scalar_at}}};")
        w("#pragma unroll",
          "for (int c = 0; c < RN; ++c)",
          "  #pragma unroll",
          "  for (int j = 0; j < VB; ++j) acc[m * RN + c] += a[j] * b[c][j];")


def _a_at(op: GemmOp) -> str:
    """The element (gm, {k}) of A in its layout, a format string of ``k``."""
    return "A[(long long)gm * lda + {k}]" if op.layout_a == "row" else "A[gm + (long long)({k}) * lda]"


def _store(w: Writer, op: GemmOp, dt: dtypes.DType, ptr: str, val: str) -> None:
    if op.read_c:
        val += f" + beta * {dt.to_acc(f'*({ptr})')}"
    w(f"*({ptr}) = {dt.from_acc(val)};")


def _fused_sum_row_b(w: Writer, vb: int, grouped: bool = False) -> None:
    """Emit acc = the sum of the SPLIT_K slices' partial sums of the thread's own BM×VB elements (``grouped``: BM×COL_GROUPS·VB,
    its COL_GROUPS groups of columns), in slice order."""
    vt = VEC_TYPES.get(("float", vb), "float")  # the float32 workspace, VB wide
    w("// the sum of every slice's partial sums of this thread's elements, in slice order (the same order whichever",
      "// block arrives last: deterministic); read through L2, where the other SMs wrote them")
    with w.block("if (gn0 < N)" if grouped else "if (gn < N)"):
        w("#pragma unroll",
          "for (int m = 0; m < BM; ++m)",
          "  #pragma unroll",
          f"  for (int j = 0; j < {'COL_GROUPS * VB' if grouped else 'VB'}; ++j) acc[m][j] = 0.f;",
          "#pragma unroll 4")
        with w.block("for (int z = 0; z < SPLIT_K; ++z)"):
            w("#pragma unroll")
            with w.block("for (int m = 0; m < BM; ++m)"):
                w("// rows past M read row M - 1 (never stored): no branch, so all BM loads are in flight at once",
                  "const int gm = row0 + m < M ? row0 + m : M - 1;")
                if grouped:
                    w("#pragma unroll")
                    with w.block("for (int g = 0; g < COL_GROUPS; ++g)"):
                        w(f"const {vt} v = __ldcg(reinterpret_cast<const {vt}*>(W + ((long long)z * M + gm) * N + "
                          "col[g]));")
                        _add_vector(w, vb, "acc[m][g * VB + {e}]")
                else:
                    w(f"const {vt} v = __ldcg(reinterpret_cast<const {vt}*>(W + ((long long)z * M + gm) * N + gn));")
                    _add_vector(w, vb, "acc[m][{e}]")


def _add_vector(w: Writer, vb: int, target: str) -> None:
    """Emit ``target`` (a format string of the element index ``e``) += the float32 vector ``v``, VB wide."""
    if vb == 1:
        w(f"{target.format(e=0)} += v;")
    else:
        w(" ".join(f"{target.format(e=e)} += v.{c};" for e, c in enumerate(COMPONENTS[:vb])))


def _fused_sum_col_b(w: Writer, op: GemmOp, dt: dtypes.DType, lanes: int = 32) -> None:
    """Emit the last block's sums (column-major B): each warp's BM×RN elements of C spread over its lanes (``lanes``
    < 32: each group's over its K_LANES lanes), each the sum of the SPLIT_K slices' partial sums in slice order,
    stored C = alpha * sum (+ beta * C)."""
    if lanes == 32:
        w("// the warp's BM x RN elements over its lanes: each the sum of every slice's partial sums, in slice order",
          "// (the same order whichever block arrives last: deterministic); read through L2")
    else:
        w("// the group's BM x RN elements over its K_LANES lanes: each the sum of every slice's partial sums, in slice",
          "// order (the same order whichever block arrives last: deterministic); read through L2")
    with w.block("for (int e = lane; e < BM * RN; e += 32)" if lanes == 32
                 else "for (int e = kl; e < BM * RN; e += K_LANES)"):
        w("const int gm = row0 + e / RN, gn = gn0 + e % RN;",
          "if (gm >= M || gn >= N) continue;",
          "float sum = 0.f;",
          "#pragma unroll 8",
          "for (int z = 0; z < SPLIT_K; ++z) sum += __ldcg(W + ((long long)z * M + gm) * N + gn);")
        _store(w, op, dt, "C + (long long)gn * ldc + gm" if op.layout_c == "col" else "C + (long long)gm * ldc + gn",
               "alpha * sum")


def _epilogue_what(op: GemmOp, out: str) -> str:
    """What a row-major B's epilogue stores, for its comment: the fused split-K's slice P, or C."""
    return ("partial sums of this slice: P = acc" if out == "P" else "epilogue: C = alpha * acc"
            + (" + beta * C" if op.read_c else " (C is never read)"))


def _store_columns(w: Writer, op: GemmOp, dt: dtypes.DType, vc: int, out: str, ld: str, scale: str, vc_name: str,
                   acc: str) -> None:
    """Emit the stores of row ``gm``'s VB columns from column ``gn`` into ``out``: ``acc`` is the accumulator of the
    column ``j`` past ``gn`` (a format string of ``j``); ``vc``-wide stores into a row-major C without beta, one
    element at a time otherwise (and into a column-major C, each element in its own column)."""
    if op.layout_c == "col":
        w("#pragma unroll")
        with w.block("for (int j = 0; j < VB; ++j)"):
            _store(w, op, dt, f"{out} + (long long)(gn + j) * {ld} + gm", f"{scale}{acc.format(j='j')}")
        return
    w(f"{dt.c_type}* const c_row = {out} + (long long)gm * {ld} + gn;")
    if vc > 1 and not op.read_c:
        vt = VEC_TYPES[(dt.c_type, vc)]
        w("#pragma unroll")
        with w.block(f"for (int j = 0; j < VB; j += {vc_name})"):
            w(f"{vt} out;")
            for e, comp in enumerate(COMPONENTS[:vc]):
                w(f"out.{comp} = {dt.from_acc(scale + acc.format(j=f'j + {e}'))};")
            w(f"*reinterpret_cast<{vt}*>(c_row + j) = out;")
    else:
        w("#pragma unroll")
        with w.block("for (int j = 0; j < VB; ++j)"):
            _store(w, op, dt, "c_row + j", f"{scale}{acc.format(j='j')}")


def _epilogue_row_b(w: Writer, op: GemmOp, dt: dtypes.DType, vc: int, out: str = "C", ld: str = "ldc",
                    scale: str = "alpha * ", vc_name: str = "VC") -> None:
    """Emit ``out`` = ``scale``·acc (+ beta · C) for the thread's BM×VB elements (leading dimension ``ld``), ``vc``
    wide (``vc_name``: the constant naming it, or the literal width where it is not the kernel's VC): C, the
    two-kernel split-K's workspace (C with alpha = 1), or the fused split-K's slice P (no scale)."""
    w(f"// ---- {_epilogue_what(op, out)}" + ("; VB elements per row of C, each in its own column of the column-major "
                                             "C ----" if op.layout_c == "col" else
                                             f"; VB columns per row, {vc_name}-wide stores ----"))
    with w.block("if (gn < N)"):
        w("#pragma unroll")
        with w.block("for (int m = 0; m < BM; ++m)"):
            w("const int gm = row0 + m;",
              "if (gm >= M) break;")
            _store_columns(w, op, dt, vc, out, ld, scale, vc_name, "acc[m][{j}]")


def _epilogue_row_b_groups(w: Writer, op: GemmOp, dt: dtypes.DType, vc: int, out: str = "C", ld: str = "ldc",
                           scale: str = "alpha * ", vc_name: str = "VC") -> None:
    """:func:`_epilogue_row_b` for a thread of COL_GROUPS groups of VB columns (``col_groups`` > 1): each group
    inside N stored."""
    w(f"// ---- {_epilogue_what(op, out)}; per row, the COL_GROUPS groups inside N"
      + ("; each element in its own column of the column-major C ----" if op.layout_c == "col"
         else f", {vc_name}-wide stores ----"))
    with w.block("if (gn0 < N)"):
        w("#pragma unroll")
        with w.block("for (int m = 0; m < BM; ++m)"):
            w("const int gm = row0 + m;",
              "if (gm >= M) break;",
              "#pragma unroll")
            with w.block("for (int g = 0; g < COL_GROUPS; ++g)"):
                w("const int gn = gn0 + g * 32 * VB;",
                  "if (gn >= N) break;")
                _store_columns(w, op, dt, vc, out, ld, scale, vc_name, "acc[m][g * VB + {j}]")


def _col_b_stored(op: GemmOp, out: str) -> str:
    """What a column-major B's epilogue stores, for its comment: the slice's partial sums P, or C."""
    return "P = sum (this slice's partial sums)" if out == "P" else ("C = alpha * sum"
                                                                    + (" + beta * C" if op.read_c else ""))


def _epilogue_col_b_butterfly(w: Writer, op: GemmOp, dt: dtypes.DType, out: str = "C", ld: str = "ldc",
                              scale: str = "alpha * ", lanes: int = 32) -> None:
    """Emit the warp's sums of its BM×RN dot products (BM·RN a multiple of 32; ``acc`` flat, entry m·RN + c) by a
    reduce-scatter butterfly, and each lane's stores of its BM·RN/32 sums into ``out`` (as :func:`_epilogue_col_b`):
    31/32·BM·RN shuffles per warp instead of 5·BM·RN. ``lanes`` < 32 (``k_lanes``): each group of K_LANES lanes
    sums its own BM×RN over its lanes (``kl``: the lane's place in its group), BM·RN a multiple of K_LANES."""
    stored = _col_b_stored(op, out)
    if lanes == 32:
        w("// ---- epilogue: the warp's 32 partial dot products of each (row, column) summed by a reduce-scatter butterfly:",
          "// per xor-shuffle step a lane keeps one half of its values and adds its partner's copy of that half, so after",
          "// 5 steps lane L holds the full sums of entries L * E .. L * E + E - 1 (E = BM * RN / 32) and stores "
          f"{stored} ----",
          "constexpr int E = BM * RN / 32;  // sums per lane")
    else:
        steps = lanes.bit_length() - 1
        w("// ---- epilogue: a group's K_LANES partial dot products of each (row, column) summed by a reduce-scatter",
          "// butterfly within the group (xor offsets below K_LANES stay in it): per step a lane keeps one half of its",
          f"// values and adds its partner's copy of that half, so after {steps} steps lane kl of the group holds the "
          "full sums",
          f"// of entries kl * E .. kl * E + E - 1 (E = BM * RN / K_LANES) and stores {stored} ----",
          "constexpr int E = BM * RN / K_LANES;  // sums per lane")
    lane = "lane" if lanes == 32 else "kl"
    for step, o in enumerate(o for o in (16, 8, 4, 2, 1) if o < lanes):  # one loop per step: every index a constant
        half = f"BM * RN / {2 << step}"
        w(f"// step {step + 1}: lanes {o} apart; a lane with bit {o} set keeps the upper half, moved down",
          "#pragma unroll")
        with w.block(f"for (int i = 0; i < {half}; ++i)"):
            w(f"const bool upper = {lane} & {o};",
              f"const float send = upper ? acc[i] : acc[i + {half}], keep = upper ? acc[i + {half}] : acc[i];",
              f"acc[i] = keep + __shfl_xor_sync(0xffffffffu, send, {o});")
    w("#pragma unroll")
    with w.block("for (int j = 0; j < E; ++j)"):
        w(f"const int e = {lane} * E + j, gm = row0 + e / RN, gn = gn0 + e % RN;")
        with w.block("if (gm < M && gn < N)"):
            _store(w, op, dt, f"{out} + (long long)gn * {ld} + gm" if op.layout_c == "col"
                   else f"{out} + (long long)gm * {ld} + gn", f"{scale}acc[j]")


def _epilogue_col_b(w: Writer, op: GemmOp, dt: dtypes.DType, out: str = "C", ld: str = "ldc",
                    scale: str = "alpha * ", flat: bool = False) -> None:
    """Emit the warp's sums of its BM×RN dot products and lane 0's stores into ``out`` (leading dimension ``ld``;
    ``scale`` as in :func:`_epilogue_row_b`; ``flat``: ``acc`` is one array, entry m·RN + c)."""
    stored = _col_b_stored(op, out)
    w("// ---- epilogue: the warp's 32 partial dot products of each (row, column), summed by shuffles; lane 0 "
      f"stores {stored} ----")
    w("#pragma unroll")
    with w.block("for (int m = 0; m < BM; ++m)"):
        w("#pragma unroll")
        with w.block("for (int c = 0; c < RN; ++c)"):
            w(f"float v = {'acc[m * RN + c]' if flat else 'acc[m][c]'};",
              "#pragma unroll",
              "for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);",
              "const int gm = row0 + m, gn = gn0 + c;")
            with w.block("if (lane == 0 && gm < M && gn < N)"):
                _store(w, op, dt, f"{out} + (long long)gn * {ld} + gm" if op.layout_c == "col"
                       else f"{out} + (long long)gm * {ld} + gn", f"{scale}v")

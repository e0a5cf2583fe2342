"""GEMV-style GEMM emitter (``GemmSchedule.kernel == "gemv"``): a pure function (GemmOp, GemmSchedule) ->
KernelSource for C (M×N) = A (M×K) · B (K×N) with few rows M (decode-time ``x @ W``), where the whole cost is
reading B once from device memory.

Structure of the kernel:

1. grid: x = blocks of columns of C, y = ``split_k`` slices of K, z = groups of ``bm`` rows of C; ``bn``
   threads per block;
2. row-major B (N contiguous, ``x @ W`` with W [K, N]): thread t of the block owns ``VB`` adjacent columns; it
   walks its K slice reading one ``VB``-wide vector of B per k (a warp reads 32·VB contiguous elements, fully
   coalesced) and one element of each of the ``bm`` rows of A (the same address across the warp: a broadcast),
   and keeps bm×VB accumulators;
3. column-major B (K contiguous, ``x @ W.T`` with W [N, K], torch's Linear): warp w of the block owns one
   column; its lanes read ``VB``-wide vectors along K (32·VB contiguous elements per step) and the matching
   elements of A's rows, then sum the bm partial dot products across the warp with shuffles;
4. epilogue: C = alpha·acc (+ beta·C), into a row-major C or a column-major one (``GemmOp.layout_c="col"``: the
   few-column product C = A·B that :func:`tiledsl.gemm` runs as the few rows Cᵀ = Bᵀ·Aᵀ); with split_k > 1 the
   float32 partial sums go to the row-major workspace and the split-K kernel adds them in a fixed order
   (deterministic) into C in its layout.

Nothing goes through shared memory and there is no block barrier: every load is independent, and ``unroll``
K steps per thread are in flight.
"""

from __future__ import annotations

import json
from dataclasses import replace

from .. import dtypes
from .. import rules as R
from ..codegen.prelude import helpers_for
from ..codegen.writer import Writer
from ..compile import KernelSource
from ..planning import render_params
from .emit_common import COMPONENTS, VEC_TYPES, constexpr_table, k_range, kernel_name_reduce
from .kernel_plan import gemv_widths, plan_gemm
from .op import GemmOp
from .schedule import GEMM_RULES, GemmSchedule


def _load_vec(w: Writer, dt: dtypes.DType, width: int, dst: str, addr: str) -> None:
    """``float dst[width]`` = the ``width`` elements at ``addr`` (a pointer expression), as one vector load."""
    if width == 1:
        w(f"const float {dst}[1] = {{{dt.to_acc(f'*({addr})')}}};")
        return
    vt = VEC_TYPES[(dt.c_type, width)]
    w(f"const {vt} {dst}_v = *reinterpret_cast<const {vt}*>({addr});")
    w(f"const float {dst}[{width}] = {{" + ", ".join(dt.to_acc(f"{dst}_v.{c}") for c in COMPONENTS[:width]) + "};")


def emit_gemm_gemv(op: GemmOp, s: GemmSchedule) -> KernelSource:
    """Emit the GEMV-style kernel of ``op`` under ``s`` (see the module docstring). Pure.

    Returns:
        KernelSource with ``block=(bn, 1, 1)``, no shared memory; launch on :func:`tiledsl.gemm.kernel_plan.grid`.
    """
    p = plan_gemm(op, s)
    dt = dtypes.get(op.dtype)
    va, vb = gemv_widths(op, s)
    out_dt = dtypes.get(p.detail.out_dtype)
    out_op = replace(op, read_c=False, layout_c="row") if s.split_k > 1 else op  # split-K: the workspace
    vc = p.width("C")
    row_b = op.layout_b == "row"
    a_at = "A[(long long)gm * lda + {k}]" if op.layout_a == "row" else "A[gm + (long long)({k}) * lda]"
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
    if s.split_k > 1:
        w(f"// split-K: C is the float32 workspace [SPLIT_K][M][ldc]; {kernel_name_reduce(op, s)} sums it")
    w('extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)')
    with w.block(f"{p.kernel_name}({render_params(p.params, breaks=(3,))})"):
        k_range(w, s.split_k)
        w("const int row0 = blockIdx.z * BM;                  // first row of C of this block")
        if out_op.layout_c == "col":
            w("// C is column-major: element (m, n) at C[n * ldc + m]")
        if row_b:
            w("// ---- thread -> VB adjacent columns; walk the K slice VA steps at a time: per row of A one VA-wide",
              "// load (the same address across the warp), per k one VB-wide load of B ----",
              "const int gn = (blockIdx.x * THREADS + threadIdx.x) * VB;  // N is a multiple of VB (alignment)",
              "float acc[BM][VB] = {};")
            with w.block("if (gn < N)"):
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
                        _load_vec(w, dt, vb, "b", "B + (long long)(k0 + kk) * ldb + gn")
                        w("#pragma unroll",
                          "for (int m = 0; m < BM; ++m)",
                          "  #pragma unroll",
                          "  for (int j = 0; j < VB; ++j) acc[m][j] += a[m][kk] * b[j];")
            _epilogue_row_b(w, out_op, out_dt, vb, vc)
        else:
            w('static_assert(VA == 1 || VA == VB, "A is read VB-wide along K, or one element at a time");',
              "// ---- warp -> RN columns of C; its lanes read VB-wide vectors along K (32*VB elements per step),",
              "// each piece of A once for the RN columns ----",
              "const int lane = threadIdx.x % 32;",
              "const int gn0 = (blockIdx.x * (THREADS / 32) + threadIdx.x / 32) * RN;",
              "float acc[BM][RN] = {};")
            with w.block("if (gn0 < N)"):
                w("// K slices start on multiples of BK and K is a multiple of VB (alignment): no partial vector")
                w("#pragma unroll UNROLL")
                with w.block("for (int k = k_begin + lane * VB; k < k_end; k += 32 * VB)"):
                    w("float a[BM][VB];",
                      "#pragma unroll")
                    with w.block("for (int m = 0; m < BM; ++m)"):
                        w("const int gm = row0 + m < M ? row0 + m : M - 1;  // rows past M: any valid row, never stored")
                        if va == vb and vb > 1:
                            _load_vec(w, dt, va, "am", "A + (long long)gm * lda + k")
                            w("#pragma unroll", "for (int j = 0; j < VB; ++j) a[m][j] = am[j];")
                        else:
                            w("#pragma unroll",
                              f"for (int j = 0; j < VB; ++j) a[m][j] = {dt.to_acc(a_at.format(k='k + j'))};")
                    w("#pragma unroll")
                    with w.block("for (int c = 0; c < RN; ++c)"):
                        w("const int gn = gn0 + c < N ? gn0 + c : N - 1;  // columns past N: any valid one, never stored")
                        _load_vec(w, dt, vb, "b", "B + (long long)gn * ldb + k")
                        w("#pragma unroll",
                          "for (int m = 0; m < BM; ++m)",
                          "  #pragma unroll",
                          "  for (int j = 0; j < VB; ++j) acc[m][c] += a[m][j] * b[j];")
            _epilogue_col_b(w, out_op, out_dt)
    return KernelSource(name=p.kernel_name, source=w.text(), block=(s.threads, 1, 1), dynamic_smem_bytes=0)


def _store(w: Writer, op: GemmOp, dt: dtypes.DType, ptr: str, val: str) -> None:
    if op.read_c:
        val += f" + beta * {dt.to_acc(f'*({ptr})')}"
    w(f"*({ptr}) = {dt.from_acc(val)};")


def _epilogue_row_b(w: Writer, op: GemmOp, dt: dtypes.DType, vb: int, vc: int) -> None:
    w("// ---- epilogue: C = alpha * acc" + (" + beta * C" if op.read_c else " (C is never read)")
      + ("; VB elements per row of C, each in its own column of the column-major C ----" if op.layout_c == "col"
         else "; VB columns per row, VC-wide stores ----"))
    with w.block("if (gn < N)"):
        w("#pragma unroll")
        with w.block("for (int m = 0; m < BM; ++m)"):
            w("const int gm = row0 + m;",
              "if (gm >= M) break;")
            if op.layout_c == "col":
                w("#pragma unroll")
                with w.block("for (int j = 0; j < VB; ++j)"):
                    _store(w, op, dt, "C + (long long)(gn + j) * ldc + gm", "alpha * acc[m][j]")
                return
            w(f"{dt.c_type}* const c_row = C + (long long)gm * ldc + gn;")
            if vc > 1 and not op.read_c:
                vt = VEC_TYPES[(dt.c_type, vc)]
                w("#pragma unroll")
                with w.block("for (int j = 0; j < VB; j += VC)"):
                    w(f"{vt} out;")
                    for e, c in enumerate(COMPONENTS[:vc]):
                        w(f"out.{c} = {dt.from_acc(f'alpha * acc[m][j + {e}]')};")
                    w(f"*reinterpret_cast<{vt}*>(c_row + j) = out;")
            else:
                w("#pragma unroll")
                with w.block("for (int j = 0; j < VB; ++j)"):
                    _store(w, op, dt, "c_row + j", "alpha * acc[m][j]")


def _epilogue_col_b(w: Writer, op: GemmOp, dt: dtypes.DType) -> None:
    w("// ---- epilogue: the warp's 32 partial dot products of each (row, column), summed by shuffles; lane 0 "
      "stores C = alpha * sum" + (" + beta * C" if op.read_c else "") + " ----")
    w("#pragma unroll")
    with w.block("for (int m = 0; m < BM; ++m)"):
        w("#pragma unroll")
        with w.block("for (int c = 0; c < RN; ++c)"):
            w("float v = acc[m][c];",
              "#pragma unroll",
              "for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);",
              "const int gm = row0 + m, gn = gn0 + c;")
            with w.block("if (lane == 0 && gm < M && gn < N)"):
                _store(w, op, dt, "C + (long long)gn * ldc + gm" if op.layout_c == "col"
                       else "C + (long long)gm * ldc + gn", "alpha * v")

"""GEMV-style GEMM on the tensor cores: a pure function (GemmOp, GemmSchedule) -> KernelSource for C (M×N) = A (M×K) ·
B (K×N) with few rows M and float32 inputs, on TF32 (``kernel="gemv"``, ``mma="mma_sync"``,
``GemmOp.precision="3xtf32"``: each input split into TF32 parts) or on float64 (``mma="dmma"``, precision "ieee": each
input widened to float64 exactly); A row-major, C row-major, B either column-major (x @ W.T, torch's Linear with a few
tokens: W [N, K] row-major) or row-major (x @ W, W [K, N]).

Why: with sixteen rows every element of W read feeds 16 FMAs; at the HBM rate that is about half of the FP32 units'
peak, and the FMA kernel's other instructions (loads, address arithmetic, the warp's sums) leave it short of the
bandwidth. One ``mma.sync.m16n8k8`` with TF32 inputs does 1024 multiply-adds per warp instruction; three of them per
product (below) keep float32's accuracy within a few bits and need a fraction of the FMA kernel's issue slots. One
``mma.sync.m16n8k16`` on float64 (SASS ``DMMA``, sm_90) does 2048 per instruction, exactly: the float64 tensor cores'
peak (67 TFLOP/s on H100/H200 SXM, NVIDIA's H100 datasheet) equals the FP32 units', and sixteen rows at the HBM rate
need about half of it, with one conversion per element of W (F2F.F64.F32) in place of the FMA kernel's ~19 issue slots.

Precision, ``mma="dmma"``: a float32 value is exactly a float64 value, and the product of two is exact in float64 (24 +
24 significand bits ≤ 53); the tensor cores sum in float64 with rounding to nearest (``.rn``, IEEE 754). With one K
slice the result is rounded to float32 once, alpha and beta applied in float64 first; with ``split_k`` each slice's
sum is rounded to float32 and the slices are summed in float32 (the split-K kernel, or the fused sum), alpha and beta
in float32. The error bound (half an ulp of float32 per rounding, plus float64's) is below an IEEE float32 FMA chain's
over the same K; the bits differ from one. Special values follow IEEE arithmetic in float64 (a partial sum past
float32's range stays finite until it is rounded to float32).

Precision, ``mma="mma_sync"`` (CUTLASS's "3xTF32"): each float32 x becomes big = x rounded to TF32 (10 explicit mantissa bits, to nearest,
ties away from zero: ``(bits + 0x1000) & 0xffffe000``) and small = x − big (exact) cut to TF32 (``& 0xffffe000``);
a·b ≈ big_a·big_b + big_a·small_b + small_a·big_b (the small·small term, at most 2^-22 of |a·b|, is dropped; the cut of
small loses at most 2^-21 of |x|), accumulated in float32 by the tensor cores, small terms first. Each product keeps
about 21 of float32's 24 bits. An input of magnitude at least 2^128·(1 − 2^-12) ≈ 3.40274e38, finite or infinite,
makes every output it reaches NaN, even times 0 (its big part is ∞, its small part −∞ or, for ∞ itself, NaN), where
IEEE float32 gives a finite result or ±∞; a NaN input stays NaN.

Structure of the kernel (PTX ISA: "Matrix Fragments for mma.m16n8k8", ``.tf32``, and for mma.m16n8k16, ``.f64``:
A register 2i + h holds row g + 8h at k-slot t + 4i, B register i k-slot t + 4i of column g, the accumulators as TF32's):

1. grid: x = blocks of ``(bn / 32) · rn`` columns of C, y = ``split_k`` slices of K (each a multiple of ``bk``, which
   is a multiple of 16), z = groups of 16 rows of C; ``bn`` threads per block, warp w owning ``rn`` columns (``rn / 8``
   n8 fragments);
2. a lane (group g = lane / 4, thread-in-group t = lane % 4) reads, per k16 step at k, the 4 floats of A's rows g and
   g + 8 at k + 4t. The fragment's K order is permuted: its k-slot t holds element k + 4t + 2h and slot t + 4 element
   k + 4t + 2h + 1 in half h (0, 1) of the step. A dot product does not depend on the order of its terms, and A and B
   use the same permutation, so the two m16n8k8 products of each half sum the 16 terms of the step exactly once.
   On float64 one m16n8k16 takes the whole step: k-slot t + 4i holds element k + 4t + i (i = 0…3).
   Column-major B: the lane reads the 4 floats of column n + 8j + g (a row of W) at k + 4t for each fragment j, each
   row of W 64 contiguous bytes per step from the 4 lanes of a group; fragment j's column slot g is column n + 8j + g.
   Row-major B: the warp's columns are groups of 32, four fragments each; per group q the lane reads W's rows
   k + 4t + e (e = 0…3) at columns n + 32q + 4g … + 3 (8 lanes read 128 contiguous bytes of a row), and fragment
   4q + c takes component c of each: its column slot g is column n + 32q + 4g + c. Either way a lane reads RN / 8
   16-byte vectors of B per step;
3. ``unroll`` k16 steps are loaded before any is multiplied (their loads in flight together; ptxas's registers say the
   loads in flight stop growing past unroll 4), then split and
   multiplied (TF32: into accumulators that start from zero every ``CHUNK`` steps, :data:`GEMV_MMA_CHUNK`, and are then
   added to the running float32 sums with rounding, as tensor cores have been measured to cut each sum toward zero;
   float64: into the float64 sums directly; with ``fragment_prefetch`` a ring of UNROLL slots instead, each refilled
   UNROLL steps ahead as soon as its step is multiplied, the same steps in the same order); a last partial group of
   steps (K's end) is loaded with a bounds test per
   vector (K is a multiple of 4:
   a vector is wholly in or out); B is read with ``__ldcs`` (evict-first: each element is read once, and A stays in
   the caches for the other warps); on float64 with a row-major B whose rows are not 16-byte aligned (``vec=1``: an
   N, ldb or base address not a multiple of 4 floats) each vector of B is read 4 bytes at a time, and the whole steps
   stop short of B's last row, whose step takes the bounds tests (a vector that crosses N reads on past it, into the
   next row; in B's last row it would read past B's end);
4. rows past M read row M − 1 and columns past N read column N − 1 (row-major B: the last 4, N being a multiple of
   4; with ``vec=1`` from column N − 1 on), in bounds and never stored;
5. epilogue: lane (g, t) holds rows g and g + 8 of column slots 2t and 2t + 1 of each fragment (column-major B:
   columns n + 8j + 2t + e; row-major B: columns n + 32q + 4(2t + e) + c of fragment 4q + c): C = alpha·acc (+ beta·C),
   with split-K the slice's partial sums rounded to float32 to the workspace, summed by the split-K kernel, or
   (``split_k_fused``) by the last of the column group's blocks to take its ticket, in slice order either way.
"""

from __future__ import annotations

import json

from .. import rules as R
from ..codegen.writer import Writer
from ..compile import KernelSource
from .emit_common import constexpr_table, fused_arrival, gemv_k_range, gemv_kernel_head
from .kernel_plan import plan_gemm
from .op import GemmOp
from .schedule import GEMM_RULES, MMA_KINDS, GemmSchedule

GEMV_MMA_CHUNK = 8
"""k16 steps (128 elements of K) whose tensor-core sums start from zero and are then added to the running float32 sums
with rounding to nearest (CHUNK: ⌊8 / unroll⌋ groups of ``unroll`` steps, at least one). The tensor cores' float32
accumulation was measured to cut each sum toward zero on V100, T4 and A100 (Fasi, Higham, Mikaitis and Pranesh,
"Numerical behavior of NVIDIA tensor cores", PeerJ CS 2021) and on an H100 (sm_90; ``python benchmarks/tc_accumulation.py``,
2026-12-05: 1 + 1.5·2^-24 came back 1), a bias that a chain of 3·K/8 accumulations over a whole K slice carries into the
result: on that H100 one chain per slice reached 2.5e-5 of max |C| on 16×64×4096 and 9.6e-5 on 16×32×14336, over
float32's bound, and these chunks 7.8e-7 and 1.2e-6 (``docs/gemm.md``); about 10 instructions per pass of two k16
steps."""

B_BYTES_HELPER = r"""// ---- W read 4 bytes at a time (vec=1): its rows need not start 16-byte aligned ----
// p[0..3], each read once (evict-first)
__device__ __forceinline__ float4 tdsl_ldcs4(const float* p) {
  return make_float4(__ldcs(p), __ldcs(p + 1), __ldcs(p + 2), __ldcs(p + 3));
}
// p[0..last] (last >= 0), zeros past it: a vector that ends past N in W's last row, past which lies no memory of W
__device__ __forceinline__ float4 tdsl_ldcs4_upto(const float* p, int last) {
  return make_float4(__ldcs(p), last >= 1 ? __ldcs(p + 1) : 0.f, last >= 2 ? __ldcs(p + 2) : 0.f,
                     last >= 3 ? __ldcs(p + 3) : 0.f);
}
"""
"""The 4-byte loads of W for the FP64 x @ W kernel with ``vec=1`` (:func:`emit_gemm_gemv_mma`)."""

TF32_SPLIT_HELPER = r"""// ---- 3xTF32: float32 in two TF32 parts ----
// x ~ big + small, both TF32 (sign, 8 exponent bits, 10 mantissa bits; the low 13 bits zero): big is x rounded to
// nearest (ties away from zero: half an ulp added to the magnitude's bits, then cut), small the rest cut to 10 bits.
// Integer operations: cvt.rna.tf32.f32 is no single SASS instruction on sm_80/sm_90 (ptxas emits about six)
__device__ __forceinline__ void tdsl_split_tf32(float x, unsigned& big, unsigned& small) {
  big = (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
  small = __float_as_uint(x - __uint_as_float(big)) & 0xffffe000u;
}
"""

MMA_16816_F64_HELPER = r"""// ---- FP64 tensor cores (PTX ISA: mma.sync.aligned.m16n8k16, .f64; sm_90) ----
// D = A·B + D on one m16n8k16 fragment, IEEE float64 with rounding to nearest: A row-major 16x16 (register 2i + h:
// row g + 8h, k t + 4i), B column-major 16x8 (register i: k t + 4i, column g), accumulators (d0, d1: row g, columns 2t,
// 2t+1; d2, d3: row g+8), for g = lane / 4, t = lane % 4
__device__ __forceinline__ void tdsl_mma_16816_f64(double (&d)[4], const double (&a)[8], const double (&b)[4]) {
  asm("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5, %6, %7, %8, %9, %10, %11}, "
      "{%12, %13, %14, %15}, {%0, %1, %2, %3};\n"
      : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
      : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]), "d"(a[7]),
        "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]));
}
"""

MMA_1688_TF32_HELPER = r"""// ---- tensor cores (PTX ISA: mma.sync.aligned.m16n8k8, .tf32) ----
// D = A·B + D on one m16n8k8 fragment: A TF32 row-major 16x8 (a0: row g, k t; a1: row g+8, k t; a2: row g, k t+4;
// a3: row g+8, k t+4), B TF32 column-major 8x8 (b0: k t, column g; b1: k t+4), float32 accumulators (d0, d1: row g,
// columns 2t, 2t+1; d2, d3: row g+8), for g = lane / 4, t = lane % 4
__device__ __forceinline__ void tdsl_mma_1688_tf32(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                                   unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
"""


def emit_gemm_gemv_mma(op: GemmOp, s: GemmSchedule) -> KernelSource:
    """Emit the tensor-core GEMV kernel of ``op`` under ``s`` (see the module docstring). Pure.

    Returns:
        KernelSource with ``block=(bn, 1, 1)`` and no shared memory; launch on :func:`tiledsl.gemm.kernel_plan.grid`
        (x: ⌈N / ((bn / 32)·rn)⌉ blocks of columns, y: ``split_k`` K slices, z: ⌈M / 16⌉ groups of rows).
    """
    p = plan_gemm(op, s)
    f64 = s.mma == "dmma"  # float64 tensor cores (else TF32, 3xTF32)
    acc_t = "double" if f64 else "float"
    split = s.split_k > 1
    fused = s.split_k_fused  # the slices summed by the last block of each column group (rule split_k_fused_on_gemv)
    row_b = op.layout_b == "row"
    narrow = row_b and s.vec == 1  # W read 4 bytes at a time (rule gemv_mma_vec: FP64 x @ W only)
    w = Writer()
    w(f"// tiledsl GEMV-style GEMM on the tensor cores: C[M,N] = alpha * A[M,K] @ B[K,N]"
      f"{' + beta * C' if op.read_c and (fused or not split) else ''}, few rows M",
      ("// float32 in/out, each input widened to float64 exactly, one m16n8k16 float64 product per step (exact "
       "products),\n// float64 accumulation per K slice, rounded to float32 for the split-K sum;" if split else
       "// float32 in/out, each input widened to float64 exactly, one m16n8k16 float64 product per step (exact "
       "products),\n// float64 accumulation, one rounding to float32;") if f64 else
      "// float32 in/out, each input split into two TF32 parts, three m16n8k8 products per term (3xTF32), float32 "
      "accumulation;",
      "// A row-major, B column-major (W[N][K]: x @ W.T), C row-major" if not row_b else
      "// A row-major, B row-major (W[K][N]: x @ W), C row-major",
      f"// schedule: {json.dumps(s.header_dict(), sort_keys=True)}",
      *((MMA_16816_F64_HELPER.rstrip("\n"),) if f64 else
        (TF32_SPLIT_HELPER.rstrip("\n"), MMA_1688_TF32_HELPER.rstrip("\n"))),
      *((B_BYTES_HELPER.rstrip("\n"),) if narrow else ()))
    w.blank()
    w(f"// ---- schedule (tiledsl.GemmSchedule, kernel='gemv', mma='{s.mma}') ----")
    constexpr_table(w, [
        ("BM", s.bm, "bm: rows of C per block (one m16 fragment)"), ("BN", s.bn, "bn: threads per block"),
        ("BK", s.bk, "bk: K slices start on multiples of it"), ("RN", s.rn, "rn: columns of C per warp (RN / 8 n8 "
                                                                           "fragments)"),
        ("UNROLL", s.unroll, "unroll: k16 steps per thread in flight"), ("SPLIT_K", s.split_k, "split_k: K slices"),
        ("MMA", MMA_KINDS.index(s.mma), f"mma='{s.mma}'"), ("KERNEL", 1, "kernel='gemv'"), ("THREADS", s.threads, "= bn"),
        ("MIN_BLOCKS", p.min_blocks, "min_blocks"),
        ("VEC", s.vec, "vec: B read 4 bytes at a time" if narrow else "vec: B read 16 bytes at a time"),
        # fields of the other kernels, unused here; the rule table's static_asserts name them
        ("RM", s.rm, "rm (unused)"), ("WM", s.wm, "wm (unused)"), ("WN", s.wn, "wn (unused)"),
        ("STAGES", s.stages, "stages (unused)"),
        ("SMEM_PAD", s.smem_pad, "smem_pad (unused)"), ("SWIZZLE", s.swizzle, "swizzle (unused)"),
        ("SMEM_A", int(s.smem_a), "smem_a (unused)"), ("SPARE_SLOT", int(s.spare_slot), "spare_slot (unused)"),
        ("K_LANES", s.k_lanes, "k_lanes (unused)"), ("COL_GROUPS", s.col_groups, "col_groups (unused)"),
        ("SPLIT_K_FUSED", int(s.split_k_fused), "split_k_fused (unused)"),
    ])
    w("constexpr int FRAGS = RN / 8;  // n8 fragments of C per warp")
    if not f64:
        w(f"constexpr int CHUNK = {s.unroll * max(1, GEMV_MMA_CHUNK // s.unroll)};  // k16 steps summed into fresh "
          f"accumulators: {max(1, GEMV_MMA_CHUNK // s.unroll)} groups of UNROLL")
    for line in R.static_asserts(GEMM_RULES, s.env()):
        w(line)
    w.blank()
    (_multiply_step_f64 if f64 else _multiply_step)(w, row_b)
    w.blank()
    with w.block(gemv_kernel_head(w, op, s, p)):
        gemv_k_range(w, s)
        w("// ---- lane -> fragment coordinates: g (row of A, column of B) and t (place along K) ----",
          "const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;",
          "const int row0 = blockIdx.z * BM;                                        // first row of C of this block",
          "const int n0 = (blockIdx.x * (THREADS / 32) + threadIdx.x / 32) * RN;  // the warp's first column of C",
          "// rows g and g + 8 of A read 4 wide from k + 4t; rows past M read row M - 1 (never stored)",
          "const float* const a_lo = A + (long long)min(row0 + g, M - 1) * lda + 4 * t;",
          "const float* const a_hi = A + (long long)min(row0 + g + 8, M - 1) * lda + 4 * t;")
        if narrow:
            w("// vector v of B per step: W's row k + 4t + v % 4 at columns n0 + 32 (v / 4) + 4g … + 3, read 4 bytes at a",
              "// time (columns past N: from column N - 1 on, never stored; a vector that crosses N keeps its start and",
              "// reads on into the next row); element offsets from row k",
              "long long b_at[FRAGS];",
              "#pragma unroll",
              "for (int v = 0; v < FRAGS; ++v)",
              "  b_at[v] = (4 * t + v % 4) * ldb + min(n0 + 32 * (v / 4) + 4 * g, N - 1);",
              "// whole steps stop short of W's last row, whose reads past N would leave W: its step takes the tail's",
              "// bounds tests",
              "const int k_whole = min(k_end, K - 1);",
              f"{acc_t} acc[FRAGS][4] = {{}};  // fragment 4q + c: (row g, columns n0 + 32q + 8t + c, + 4), then row g + 8")
        elif row_b:
            w("// vector v of B per step: W's row k + 4t + v % 4 at columns n0 + 32 (v / 4) + 4g … + 3 (columns past N: the",
              "// last 4, never stored); element offsets from row k",
              "long long b_at[FRAGS];",
              "#pragma unroll",
              "for (int v = 0; v < FRAGS; ++v) b_at[v] = (4 * t + v % 4) * ldb + min(n0 + 32 * (v / 4) + 4 * g, N - 4);",
              f"{acc_t} acc[FRAGS][4] = {{}};  // fragment 4q + c: (row g, columns n0 + 32q + 8t + c, + 4), then row g + 8")
        else:
            w("// vector j of B per step: column n0 + 8j + g (a row of W) at k + 4t (columns past N: the last, never stored)",
              "const float* b_col[FRAGS];",
              "#pragma unroll",
              "for (int j = 0; j < FRAGS; ++j) b_col[j] = B + (long long)min(n0 + 8 * j + g, N - 1) * ldb + 4 * t;",
              f"{acc_t} acc[FRAGS][4] = {{}};  // fragment j: (row g, columns n0 + 8j + 2t, +1), then row g + 8")
        with w.block("if (n0 < N)"):
            _steps_f64(w, row_b, s.fragment_prefetch, narrow) if f64 else _steps_tf32(w, row_b)
        _epilogue(w, op, split, row_b, fused, f64)
        if fused:
            fused_arrival(w)
            _fused_sum(w, op)
    return KernelSource(name=p.kernel_name, source=w.text(), block=(s.threads, 1, 1), dynamic_smem_bytes=0)


def _steps_tf32(w: Writer, row_b: bool) -> None:
    """Emit the slice's k16 steps on TF32: chunks of CHUNK steps into fresh float32 accumulators ``part``, each added
    to ``acc`` with rounding."""
    w("int k = k_begin;",
      "// ---- chunks of CHUNK k16 steps, each into fresh accumulators added to acc after it (tensor cores have",
      "// been measured to cut each sum toward zero: a chain of a whole slice would carry that bias, a chunk's is",
      "// added with rounding); within a chunk, whole groups of UNROLL steps without bounds tests ----")
    with w.block("while (k + 16 * UNROLL <= k_end)"):
        w("float part[FRAGS][4] = {};",
          "#pragma unroll 1")
        with w.block("for (int group = 0; group < CHUNK / UNROLL && k + 16 * UNROLL <= k_end; ++group, "
                     "k += 16 * UNROLL)"):
            _main_steps(w, row_b, "part")
        _add_part(w)
    w("// ---- the slice's last steps: a vector past k_end reads as zeros ----")
    with w.block("if (k < k_end)"):
        w("float part[FRAGS][4] = {};")
        with w.block("for (; k < k_end; k += 16)"):
            _tail_step(w, row_b, "part")
        _add_part(w)


def _steps_f64(w: Writer, row_b: bool, ring: bool, narrow: bool = False) -> None:
    """Emit the slice's k16 steps on float64: every product into ``acc`` (float64 sums, rounded to nearest). ``ring``
    (``fragment_prefetch``): the whole steps through a ring of UNROLL slots, each refilled UNROLL steps ahead as soon
    as its step is multiplied (:func:`_ring_steps`); else groups of UNROLL steps, each loaded then multiplied.
    ``narrow`` (``vec=1``, row-major B): W read 4 bytes at a time, the whole steps ending at ``k_whole`` (before W's
    last row)."""
    end = _whole_steps_end(narrow)
    w("int k = k_begin;")
    if ring:
        _ring_steps(w, row_b, narrow)
    else:
        w("// ---- whole groups of UNROLL k16 steps, without bounds tests ----",
          "#pragma unroll 1")
        with w.block(f"for (; k + 16 * UNROLL <= {end}; k += 16 * UNROLL)"):
            _main_steps(w, row_b, "acc", narrow)
    w("// ---- the slice's last steps" + (": a vector past k_end reads as zeros, and so does an element past N" if narrow
                                         else " (fewer than UNROLL): a vector past k_end reads as zeros") + " ----",
      "#pragma unroll 1")
    with w.block("for (; k < k_end; k += 16)"):
        _tail_step(w, row_b, "acc", narrow)


def _whole_steps_end(narrow: bool) -> str:
    """Where the float64 kernel's whole k16 steps (no bounds tests) end: the slice's end, or (``narrow``: B read 4
    bytes at a time) ``k_whole``, before B's last row."""
    return "k_whole" if narrow else "k_end"


def _multiply_step_f64(w: Writer, row_b: bool) -> None:
    """Emit ``multiply_step`` on float64: one k16 step's vectors widened to float64 (exact) and, per fragment, one
    m16n8k16 product."""
    w("// one k16 step from k: lo / hi are A's rows g and g + 8 at k + 4t (element i is k + 4t + i, the fragment's k-slot",
      "// t + 4i: A register 2i + h is element i of row g + 8h, B register i element i of the fragment's column)",
      "// b[j] is column n0 + 8j + g at k + 4t" if not row_b else
      "// b[v] is row k + 4t + v % 4 at columns n0 + 32 (v / 4) + 4g … + 3; fragment 4q + c takes component c of\n"
      "// b[4q], …, b[4q + 3]",
      "__device__ __forceinline__ void multiply_step(double (&acc)[FRAGS][4], const float4& lo, const float4& hi,")
    with w.block("                                              const float4 (&b)[FRAGS])"):
        w("const double a[8] = {lo.x, hi.x, lo.y, hi.y, lo.z, hi.z, lo.w, hi.w};  // float32 -> float64: exact")
        if row_b:
            w("double bd[FRAGS][4];",
              "#pragma unroll",
              "for (int v = 0; v < FRAGS; ++v) {",
              "  bd[v][0] = b[v].x; bd[v][1] = b[v].y; bd[v][2] = b[v].z; bd[v][3] = b[v].w;",
              "}",
              "#pragma unroll")
            with w.block("for (int j = 0; j < FRAGS; ++j)"):
                w("const double bj[4] = {bd[j / 4 * 4][j % 4], bd[j / 4 * 4 + 1][j % 4], bd[j / 4 * 4 + 2][j % 4],",
                  "                      bd[j / 4 * 4 + 3][j % 4]};",
                  "tdsl_mma_16816_f64(acc[j], a, bj);")
        else:
            w("#pragma unroll")
            with w.block("for (int j = 0; j < FRAGS; ++j)"):
                w("const double bj[4] = {b[j].x, b[j].y, b[j].z, b[j].w};",
                  "tdsl_mma_16816_f64(acc[j], a, bj);")


def _multiply_step(w: Writer, row_b: bool) -> None:
    """Emit ``multiply_step``: one k16 step's TF32 split of a lane's vectors and, per fragment and half, three m16n8k8
    products (small terms first)."""
    b_at = ("// b[j] is column n0 + 8j + g at k + 4t; fragment j takes its elements 2h, 2h + 1" if not row_b else
            "// b[v] is row k + 4t + v % 4 at columns n0 + 32 (v / 4) + 4g … + 3; fragment 4q + c takes component c of\n"
            "// b[4q + 2h] and b[4q + 2h + 1]")
    b0, b1 = (("[j][e]", "[j][e + 1]") if not row_b else ("[j / 4 * 4 + e][j % 4]", "[j / 4 * 4 + e + 1][j % 4]"))
    w("// one k16 step from k: lo / hi are A's rows g and g + 8 at k + 4t (element e is k + 4t + e); half h of the step",
      "// takes elements 2h (the fragment's k-slot t) and 2h + 1 (slot t + 4) of each row",
      b_at,
      "__device__ __forceinline__ void multiply_step(float (&acc)[FRAGS][4], const float4& lo, const float4& hi,")
    with w.block("                                              const float4 (&b)[FRAGS])"):
        w("unsigned lo_big[4], lo_small[4], hi_big[4], hi_small[4], b_big[FRAGS][4], b_small[FRAGS][4];",
          "tdsl_split_tf32(lo.x, lo_big[0], lo_small[0]); tdsl_split_tf32(lo.y, lo_big[1], lo_small[1]);",
          "tdsl_split_tf32(lo.z, lo_big[2], lo_small[2]); tdsl_split_tf32(lo.w, lo_big[3], lo_small[3]);",
          "tdsl_split_tf32(hi.x, hi_big[0], hi_small[0]); tdsl_split_tf32(hi.y, hi_big[1], hi_small[1]);",
          "tdsl_split_tf32(hi.z, hi_big[2], hi_small[2]); tdsl_split_tf32(hi.w, hi_big[3], hi_small[3]);",
          "#pragma unroll")
        with w.block("for (int v = 0; v < FRAGS; ++v)"):
            w("tdsl_split_tf32(b[v].x, b_big[v][0], b_small[v][0]); tdsl_split_tf32(b[v].y, b_big[v][1], b_small[v][1]);",
              "tdsl_split_tf32(b[v].z, b_big[v][2], b_small[v][2]); tdsl_split_tf32(b[v].w, b_big[v][3], b_small[v][3]);")
        w("#pragma unroll")
        with w.block("for (int j = 0; j < FRAGS; ++j)"):
            w("#pragma unroll")
            with w.block("for (int e = 0; e < 4; e += 2)"):
                w(f"tdsl_mma_1688_tf32(acc[j], lo_small[e], hi_small[e], lo_small[e + 1], hi_small[e + 1], b_big{b0}, "
                  f"b_big{b1});",
                  f"tdsl_mma_1688_tf32(acc[j], lo_big[e], hi_big[e], lo_big[e + 1], hi_big[e + 1], b_small{b0}, "
                  f"b_small{b1});",
                  f"tdsl_mma_1688_tf32(acc[j], lo_big[e], hi_big[e], lo_big[e + 1], hi_big[e + 1], b_big{b0}, "
                  f"b_big{b1});")


def _b_load(row_b: bool, k: str, narrow: bool = False) -> str:
    """The load (``__ldcs``: read once) of the lane's vector of B numbered ``v`` (row-major B) or ``j`` at K offset
    ``k``: 16 bytes, or (``narrow``) 4 bytes at a time."""
    at = f"B + (long long)({k}) * ldb + b_at[v]" if row_b else f"b_col[j] + {k}"
    return f"tdsl_ldcs4({at})" if narrow else f"__ldcs(reinterpret_cast<const float4*>({at}))"


def _step_loads(w: Writer, row_b: bool, kk: str, narrow: bool = False) -> None:
    """Emit the loads of one whole k16 step at K offset ``kk`` into slot ``u`` (``lo[u]``, ``hi[u]``, ``b[u]``)."""
    v = "v" if row_b else "j"
    w(f"lo[u] = *reinterpret_cast<const float4*>(a_lo + {kk});",
      f"hi[u] = *reinterpret_cast<const float4*>(a_hi + {kk});",
      "#pragma unroll",
      f"for (int {v} = 0; {v} < FRAGS; ++{v}) b[u][{v}] = {_b_load(row_b, kk, narrow)};  // B: read once")


def _main_steps(w: Writer, row_b: bool, into: str, narrow: bool = False) -> None:
    """Emit the body of a group of UNROLL whole k16 steps: every step's loads first (in flight together), then each
    step multiplied into the accumulators ``into``."""
    w("float4 lo[UNROLL], hi[UNROLL], b[UNROLL][FRAGS];  // step u's vectors of A's two rows and of B",
      "#pragma unroll")
    with w.block("for (int u = 0; u < UNROLL; ++u)"):
        w("const int kk = k + 16 * u;")
        _step_loads(w, row_b, "kk", narrow)
    w("#pragma unroll", f"for (int u = 0; u < UNROLL; ++u) multiply_step({into}, lo[u], hi[u], b[u]);")


def _ring_steps(w: Writer, row_b: bool, narrow: bool = False) -> None:
    """Emit the slice's whole k16 steps through a ring of UNROLL slots (``fragment_prefetch``): the first UNROLL steps
    loaded, then per step the oldest slot multiplied into ``acc`` and refilled with the step UNROLL ahead, so UNROLL
    steps of loads stay in flight while the tensor cores work (the group form has none in flight while it multiplies);
    the last UNROLL steps multiplied without refills. The steps are multiplied in K order either way: the same sums,
    bit for bit, as the group form. ``narrow``: B read 4 bytes at a time, the whole steps ending at ``k_whole``."""
    end = _whole_steps_end(narrow)
    w("// ---- a ring of UNROLL k16 steps in flight: slot u holds the slice's steps u, u + UNROLL, u + 2 UNROLL, … in",
      "// turn; multiplying a slot's step is followed at once by its refill with the step UNROLL ahead (whole steps",
      "// only, no bounds tests) ----")
    with w.block(f"if (k + 16 * UNROLL <= {end})"):
        w("float4 lo[UNROLL], hi[UNROLL], b[UNROLL][FRAGS];  // slot u: a step's vectors of A's two rows and of B",
          "#pragma unroll")
        with w.block("for (int u = 0; u < UNROLL; ++u)"):
            _step_loads(w, row_b, "k + 16 * u", narrow)
        w("#pragma unroll 1")
        with w.block(f"for (; k + 32 * UNROLL <= {end}; k += 16 * UNROLL)"):
            w("#pragma unroll")
            with w.block("for (int u = 0; u < UNROLL; ++u)"):
                w("multiply_step(acc, lo[u], hi[u], b[u]);")
                _step_loads(w, row_b, "k + 16 * (u + UNROLL)", narrow)
        w("// the ring's last UNROLL steps, no refills",
          "#pragma unroll",
          "for (int u = 0; u < UNROLL; ++u) multiply_step(acc, lo[u], hi[u], b[u]);",
          "k += 16 * UNROLL;")


def _tail_step(w: Writer, row_b: bool, into: str, narrow: bool = False) -> None:
    """Emit the body of one k16 step at the slice's end, each vector read only where it starts before k_end (``narrow``:
    and each element only where its column is below N), multiplied into the accumulators ``into``."""
    v = "v" if row_b else "j"
    w("const bool in = k + 4 * t < k_end;  // this lane's vectors: wholly in or out (K is a multiple of 4)",
      "const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);",
      "const float4 lo = in ? *reinterpret_cast<const float4*>(a_lo + k) : zero;",
      "const float4 hi = in ? *reinterpret_cast<const float4*>(a_hi + k) : zero;",
      "float4 b[FRAGS];",
      "#pragma unroll")
    if narrow:
        with w.block("for (int v = 0; v < FRAGS; ++v)"):
            w("const int last = N - 1 - min(n0 + 32 * (v / 4) + 4 * g, N - 1);  // elements 0 … last lie before N",
              "b[v] = in ? tdsl_ldcs4_upto(B + (long long)(k) * ldb + b_at[v], last) : zero;")
    else:
        w(f"for (int {v} = 0; {v} < FRAGS; ++{v}) b[{v}] = in ? {_b_load(row_b, 'k')} : zero;")
    w(f"multiply_step({into}, lo, hi, b);")


def _add_part(w: Writer) -> None:
    """Emit acc += part (a chunk's sums, float32 adds rounded to nearest)."""
    w("#pragma unroll",
      "for (int j = 0; j < FRAGS; ++j)",
      "  #pragma unroll",
      "  for (int i = 0; i < 4; ++i) acc[j][i] += part[j][i];")


def _epilogue(w: Writer, op: GemmOp, split: bool, row_b: bool, fused: bool, f64: bool) -> None:
    """Emit the stores of the warp's fragments: lane (g, t) holds rows g and g + 8 of column slots 2t + e of each
    fragment j (columns n0 + 8j + 2t + e; row-major B: n0 + 32 (j / 4) + 4 (2t + e) + j % 4); float64 sums are
    rounded to float32 once: after alpha and beta with one slice, as the slice's partial sum with split-K."""
    scale, beta = ("", False) if split else ("alpha * ", op.read_c)
    out, ld = ("P", "N") if fused else ("C", "ldc")
    w("// ---- epilogue: " + ("the slice's partial sums to P, its slice of W" if fused else
                              "the slice's partial sums to its workspace slice (the split-K kernel applies alpha, beta)"
                              if split else "C = alpha * acc" + (" + beta * C" if beta else "")) + " ----",
      "#pragma unroll")
    with w.block("for (int j = 0; j < FRAGS; ++j)"):
        w("#pragma unroll")
        with w.block("for (int i = 0; i < 4; ++i)"):
            w("const int m = row0 + g + 8 * (i / 2), n = " + ("n0 + 32 * (j / 4) + 4 * (2 * t + i % 2) + j % 4;" if row_b
                                                               else "n0 + 8 * j + 2 * t + i % 2;"))
            with w.block("if (m < M && n < N)"):
                w(f"float* const c = {out} + (long long)m * {ld} + n;")
                if f64:
                    w(f"*c = static_cast<float>({scale}acc[j][i]" + (" + beta * static_cast<double>(*c));" if beta
                                                                     else ");"))
                else:
                    w(f"*c = {scale}acc[j][i]" + (" + beta * *c;" if beta else ";"))


def _fused_sum(w: Writer, op: GemmOp) -> None:
    """Emit the last block's sums: the block's BM rows × (THREADS / 32)·RN columns over its threads, each the sum of
    the SPLIT_K slices' partial sums in slice order, stored C = alpha * sum (+ beta * C)."""
    w("// the block's BM x (THREADS / 32) * RN elements over its threads: each the sum of every slice's partial sums,",
      "// in slice order (the same order whichever block arrives last, and the split-K kernel's: deterministic); read",
      "// through L2, where the other SMs wrote them",
      "constexpr int COLUMNS = THREADS / 32 * RN;  // the block's columns of C",
      "const int nb0 = blockIdx.x * COLUMNS;")
    with w.block("for (int e = threadIdx.x; e < BM * COLUMNS; e += THREADS)"):
        w("const int m = row0 + e / COLUMNS, n = nb0 + e % COLUMNS;",
          "if (m >= M || n >= N) continue;",
          "float sum = 0.f;",
          "#pragma unroll 8",
          "for (int z = 0; z < SPLIT_K; ++z) sum += __ldcg(W + ((long long)z * M + m) * N + n);",
          "float* const c = C + (long long)m * ldc + n;",
          "*c = alpha * sum" + (" + beta * *c;" if op.read_c else ";"))

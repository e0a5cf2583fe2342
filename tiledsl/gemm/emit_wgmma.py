"""Hopper tensor-core GEMM emitter (``GemmSchedule.mma == "wgmma"``, sm_90a): a pure function
(GemmOp, GemmSchedule) -> KernelSource for float16 / bfloat16 inputs, and float32 inputs read as tf32
(``GemmOp.precision == "tf32"``: m64nNk8, bk = 32), with float32 accumulation.

Two kernels. Without ``warp_specialize`` (described below, PTX ISA: ``cp.async``, ``wgmma.mma_async``,
"Matrix Descriptor Format") every thread copies with cp.async and one block barrier per K tile hands the
stages over. With ``warp_specialize`` a producer warpgroup's one thread issues TMA tensor copies
(``cp.async.bulk.tensor``) into the same swizzled layout, and full/empty mbarriers per stage hand them to
two consumer warpgroups (``_warp_specialized_loop``; ``docs/gemm.md``, "Tensor cores").

Structure of the cp.async kernel (16-bit inputs; tf32 halves the K elements of a 128-byte row):

1. block → C tile: a 1-D grid, rasterized in groups of ``swizzle`` block-rows for L2 reuse;
2. warpgroup → rows: ``bm/64`` warpgroups of 128 threads; warpgroup g owns rows [64g, 64g + 64) of the
   block tile and all ``bn`` columns: one ``wgmma.mma_async.m64n{bn}k16`` per k16 step, accumulators in
   registers (bn/2 float32 per thread);
3. global → shared memory: A (bm×64) and B (bn×64) tiles, both K-major (A row-major, B column-major in
   memory: the layout of ``x @ W.T`` with a row-major weight W), rows of 64 elements = 128 bytes stored
   in the 128-byte swizzled layout that wgmma reads without bank conflicts: 16-byte chunk c of row r
   lands at chunk c ^ (r % 8). ``cp.async`` 16-byte copies, zero-filled outside the matrix;
   ``stages`` K tiles deep;
4. a 64-bit shared-memory descriptor per operand (start address, stride 1024 bytes between 8-row
   groups, 128-byte swizzle); the k16 steps inside a 64-wide row advance its start address by 32 bytes;
5. the pipeline: copies of tile kt+stages−2 are issued while wgmma multiplies tile kt;
   ``wgmma.wait_group 1`` keeps one group of products in flight, so the stage read two iterations ago
   is free when the next barrier passes;
6. epilogue: C = alpha·acc (+ beta·C), two adjacent columns per thread (wgmma's accumulator layout).
"""

from __future__ import annotations

import json
from dataclasses import replace

from .. import dtypes
from .. import rules as R
from ..codegen.prelude import ASYNC_COPY_HELPERS, helpers_for
from ..codegen.writer import Writer
from ..compile import KernelSource
from ..planning import render_params
from ..tma import TENSOR_MAP_DECL
from .emit_common import block_to_tile, constexpr_table, k_range, kernel_name_reduce, store_pair
from .kernel_plan import k_major, plan_gemm, tma_box, uses_tma
from .op import GemmOp
from .schedule import GEMM_RULES, GemmSchedule

WGMMA_PTX_TYPE = {"float16": "f16", "bfloat16": "bf16", "float32": "tf32"}  # float32: precision="tf32" only
SWIZZLE_BYTES = 1024  # one 128-byte-swizzle atom: 8 rows × 128 bytes; tiles start on this alignment

_HELPERS = r"""// ---- Hopper helpers (PTX ISA: fence.proxy.async, wgmma) ----
// shared memory written through the generic proxy is read next by the async proxy (wgmma, TMA)
__device__ __forceinline__ void tdsl_fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void tdsl_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void tdsl_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int PENDING>
__device__ __forceinline__ void tdsl_wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(PENDING) : "memory");
}
// matrix descriptor of a tile in the 128-byte swizzled layout: start address >> 4 (bits 0-13), leading
// byte offset >> 4 (bits 16-29), stride byte offset >> 4 (bits 32-45), swizzle mode 1 = 128 bytes (62-63)
template <unsigned LBO, unsigned SBO>
__device__ __forceinline__ unsigned long long tdsl_wgmma_desc(unsigned smem) {
  return (unsigned long long)((smem & 0x3FFFF) >> 4) | ((unsigned long long)(LBO >> 4) << 16)
       | ((unsigned long long)(SBO >> 4) << 32) | (1ull << 62);
}
"""

_TMA_HELPERS = TENSOR_MAP_DECL + r"""// ---- TMA tensor copies global -> shared, completing on mbarriers (PTX ISA: cp.async.bulk.tensor, mbarrier) ----
__device__ __forceinline__ unsigned tdsl_smem_addr(const void* p) {
  return (unsigned)__cvta_generic_to_shared(p);
}
// copy the box of `map` at element coordinates (c0 along the contiguous dimension, c1) to shared address
// `dst`; the copy adds its bytes to mbarrier `bar`'s transaction count when it lands (zeros outside the matrix)
__device__ __forceinline__ void tdsl_tma_load_2d(unsigned dst, const tdsl_tensor_map& map, int c0, int c1,
                                                 unsigned bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
               :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(&map)), "r"(c0), "r"(c1), "r"(bar) : "memory");
}
__device__ __forceinline__ void tdsl_mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void tdsl_mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(bar) : "memory");
}
// arrive on `bar` and expect `bytes` more bytes of copies before its phase completes
__device__ __forceinline__ void tdsl_mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void tdsl_mbar_wait(unsigned bar, unsigned parity) {
  unsigned done = 0;
  while (!done) {
    asm volatile("{\n.reg .pred P;\nmbarrier.try_wait.parity.shared::cta.b64 P, [%1], %2;\nselp.u32 %0, 1, 0, P;\n}\n"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  }
}
"""


# Shared-memory layouts of an operand tile (rows = its M or N extent, 64 K elements), 128-byte swizzle:
# K-major  (A row-major, B column-major): row r = 64 K elements = 128 bytes; 8-row groups 1024 bytes apart
#          (stride byte offset); the leading byte offset is unused; a k16 step moves 32 bytes along the row.
# MN-major (A column-major, B row-major): blocks of 64 M/N elements; in a block, row k = 64 M/N elements
#          = 128 bytes, 8-row (k) groups 1024 bytes apart (stride byte offset), blocks 8192 bytes apart
#          (leading byte offset); a k16 step moves 2 groups = 2048 bytes. wgmma reads it transposed
#          (imm-trans = 1).
MN_MAJOR_LBO_SBO = (8192, 1024)
K_MAJOR_LBO_SBO = (16, 1024)


def wgmma_k(ptx: str) -> int:
    """K of one wgmma: 16 for 16-bit inputs, 8 for tf32 (32 bytes of each operand row either way)."""
    return 8 if ptx == "tf32" else 16


def _wgmma_fn(ptx: str, n: int, trans_a: int, trans_b: int) -> str:
    """``tdsl_wgmma(d, desc_a, desc_b)``: d (n/2 float32 per thread) += A (64×k) · B (k×n) from shared memory
    (k = :func:`wgmma_k`). tf32 takes no transpose immediates: both operands are K-major."""
    regs = n // 2
    k = wgmma_k(ptx)
    outs = ", ".join(f"%{i}" for i in range(regs))
    binds = ",\n      ".join(", ".join(f'"+f"(d[{i + j}])' for j in range(8)) for i in range(0, regs, 8))
    trans = "" if ptx == "tf32" else f", {trans_a}, {trans_b}"
    return (f"// D[64x{n}] += A[64x{k}] * B[{k}x{n}] on the tensor cores, both operands read from shared memory\n"
            f"__device__ __forceinline__ void tdsl_wgmma(float (&d)[{regs}], unsigned long long desc_a, "
            "unsigned long long desc_b) {\n"
            "  asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %" + str(regs + 2) + ", 0;\\n\"\n"
            f"    \"wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{ptx}.{ptx} \"\n"
            f"    \"{{{outs}}}, %{regs}, %{regs + 1}, p, 1, 1{trans};\\n}}\\n\"\n"
            f"    : {binds}\n"
            "    : \"l\"(desc_a), \"l\"(desc_b), \"r\"(1));  // scale-d = 1: D += A·B\n"
            "}\n")


def emit_gemm_wgmma(op: GemmOp, s: GemmSchedule) -> KernelSource:
    """Emit the Hopper (``wgmma``) GEMM kernel for ``op`` tiled by ``s``. Pure: same inputs, same text.

    Returns:
        KernelSource with ``block=(128·bm/64, 1, 1)``, ``arch_suffix="a"`` (sm_90a) and the stages'
        dynamic shared memory. Launch on the grid of :func:`tiledsl.gemm.emit.grid`.
    """
    dt = dtypes.get(op.dtype)
    t = dt.c_type
    ptx = WGMMA_PTX_TYPE[op.dtype]
    if s.split_k > 1:
        out_dt, out_op, vc = dtypes.get("float32"), replace(op, read_c=False), 2 if op.n % 2 == 0 else 1
    else:
        out_dt, out_op, vc = dt, op, min(2, op.align_c)
    (lbo_a, sbo_a), step_a = (K_MAJOR_LBO_SBO, 32) if k_major(op, "A") else (MN_MAJOR_LBO_SBO, 2048)
    (lbo_b, sbo_b), step_b = (K_MAJOR_LBO_SBO, 32) if k_major(op, "B") else (MN_MAJOR_LBO_SBO, 2048)
    plan = plan_gemm(op, s)
    name = plan.kernel_name
    w = Writer()
    w(f"// tiledsl GEMM on Hopper tensor cores: C[M,N] = alpha * A[M,K] @ B[K,N]{' + beta * C' if op.read_c else ''}",
      f"// {'float32 inputs read as tf32' if ptx == 'tf32' else op.dtype + ' inputs'}, wgmma.mma_async "
      f"m64n{s.bn}k{wgmma_k(ptx)} with float32 accumulation; A {op.layout_a}-major, "
      f"B {op.layout_b}-major, C row-major",
      f"// schedule: {json.dumps(s.header_dict(), sort_keys=True)}")
    ka, kb = k_major(op, "A"), k_major(op, "B")
    tma = uses_tma(s)
    w(helpers_for(op.dtype).rstrip("\n"), (_TMA_HELPERS if tma else ASYNC_COPY_HELPERS).rstrip("\n"),
      _HELPERS.rstrip("\n"), _wgmma_fn(ptx, s.bn, int(not ka), int(not kb)).rstrip("\n"))
    w.blank()
    w("// ---- schedule (tiledsl.GemmSchedule) ----")
    consts = [
        ("BM", s.bm, "bm: block tile rows of C (64 per warpgroup)"), ("BN", s.bn, "bn: block tile columns of C"),
        ("BK", s.bk, f"bk: K depth of one stage ({s.bk} elements = one 128-byte swizzled row)"),
        ("WM", s.wm, "wm: warpgroup tile rows (one wgmma is 64 rows)"),
        ("WN", s.wn, "wn: warpgroup tile columns (= bn)"),
        ("STAGES", s.stages, "stages: K tiles in shared memory"),
        ("SMEM_PAD", s.smem_pad, "smem_pad: 0, the swizzle replaces padding"),
        ("MIN_BLOCKS", s.min_blocks, "min_blocks: resident blocks per SM the registers must allow"),
        ("SWIZZLE", s.swizzle, "swizzle: block-rows per rasterization group"),
        ("SPLIT_K", s.split_k, "split_k"),
        ("MMA", 2, "mma='wgmma': Hopper warpgroup MMA"), ("KERNEL", 0, "kernel='tiled'"),
        ("WARP_SPECIALIZE", int(s.warp_specialize),
         "warp_specialize: a producer warpgroup issues TMA copies" if tma else "warp_specialize: off"),
    ]
    if s.persistent:
        consts.append(("PERSISTENT", 1, "persistent: each block walks C tiles blockIdx.x + i * gridDim.x"))
    constexpr_table(w, consts)
    w("// derived",
      "constexpr int CONSUMERS = BM / 64;            // warpgroups running wgmma, 64 rows each")
    if tma:
        w("constexpr int THREADS = 128 * (CONSUMERS + 1);  // + one producer warpgroup (one thread issues the copies)")
    else:
        w("constexpr int THREADS = 128 * CONSUMERS;",
          "constexpr int LOADERS = THREADS;              // every thread copies")
    w("constexpr int ACC = BN / 2;                    // float32 accumulators per thread",
      f"constexpr int ROW_BYTES = BK * {dt.itemsize};              // one tile row: 128 bytes",
      "constexpr int STAGE_A_BYTES = BM * ROW_BYTES, STAGE_B_BYTES = BN * ROW_BYTES;")
    if tma:
        w("constexpr unsigned STAGE_BYTES = STAGE_A_BYTES + STAGE_B_BYTES;  // one stage's copies (its full barrier)")
    else:
        w("constexpr int COPIES_A = BM * BK / 8 / LOADERS;   // 16-byte copies per loading thread per stage",
          "constexpr int COPIES_B = BN * BK / 8 / LOADERS;",
          'static_assert(COPIES_A * LOADERS * 8 == BM * BK && COPIES_B * LOADERS * 8 == BN * BK, '
          '"tiles split evenly into 16-byte copies");')
    w(f'static_assert(STAGE_A_BYTES % {SWIZZLE_BYTES} == 0 && STAGE_B_BYTES % {SWIZZLE_BYTES} == 0, '
      '"stages start on a swizzle atom");')
    for line in R.static_asserts(GEMM_RULES, s.env()):
        w(line)
    w.blank()
    if s.split_k > 1:
        w(f"// split-K: C is the float32 workspace [SPLIT_K][M][ldc]; {kernel_name_reduce(op, s)} sums it")
    if tma:
        consumer_regs = min(240, (65536 // 128 - PRODUCER_REGS) // (s.bm // 64) // 8 * 8)
        w(f"constexpr int PRODUCER_REGS = {PRODUCER_REGS}, CONSUMER_REGS = {consumer_regs};  "
          "// setmaxnreg: registers move from the producer to the consumers")
    w('extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)')
    with w.block(f"{name}({render_params(plan.params, breaks=(3,))})"):
        if s.persistent:
            w("// ---- C tiles: this block takes tiles blockIdx.x, blockIdx.x + gridDim.x, ... ----",
              "const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;",
              "const int tiles = tiles_m * tiles_n;")
        else:
            block_to_tile(w)
        w("// ---- thread -> warpgroup rows; lane -> accumulator rows/columns (wgmma m64nNk16 D layout) ----",
          "const int tid = threadIdx.x;",
          "const int wg = tid / 128, warp_in_wg = (tid % 128) / 32, lane = tid % 32;",
          "const int frag_row = lane / 4, frag_col = lane % 4;")
        w.blank()
        w(f"// ---- shared memory: STAGES x (A tile [BM][BK], B tile [BN][BK]), 128-byte swizzled, base aligned "
          f"to {SWIZZLE_BYTES} bytes ----",
          "extern __shared__ float4 smem_raw[];",
          f"const unsigned smem_base = (tdsl_smem_addr(smem_raw) + {SWIZZLE_BYTES - 1}) & ~{SWIZZLE_BYTES - 1}u;",
          "const unsigned As = smem_base;                          // shared addresses (bytes)",
          "const unsigned Bs = smem_base + STAGES * STAGE_A_BYTES;")
        if tma:
            w("// full[st]: the copies of the tile in stage st have landed; empty[st]: the consumers are done with it",
              "const unsigned full = Bs + STAGES * STAGE_B_BYTES, empty = full + 8 * STAGES;",
              "if (tid == 0) {",
              "  for (int st = 0; st < STAGES; ++st) {",
              "    tdsl_mbar_init(full + 8 * st, 1);                // the producer's arrival + STAGE_BYTES of copies",
              "    tdsl_mbar_init(empty + 8 * st, 128 * CONSUMERS);  // one arrival per consumer thread",
              "  }",
              "  tdsl_fence_proxy_async();  // the initialised barriers are visible to the copy engine (async proxy)",
              "}",
              "__syncthreads();")
        w.blank()
        k_range(w, s.split_k)
        w("const int k_tiles = max(0, (k_end - k_begin + BK - 1) / BK);")
        w.blank()
        if not tma:
            _cp_async_load_stage(w, op, t)
            w.blank()
        if tma:
            _warp_specialized_loop(w, op, s, lbo_a, sbo_a, step_a, lbo_b, sbo_b, step_b,
                                   lambda: _epilogue(w, out_op, out_dt, vc, "wg - 1"))
        else:
            w("float acc[ACC];                         // this thread's part of the warpgroup's 64 x BN tile",
              "#pragma unroll",
              "for (int i = 0; i < ACC; ++i) acc[i] = 0.f;")
            w.blank()
            w("// ---- prologue: request K tiles 0 .. STAGES-3 (one commit group per tile, empty past the end) ----",
              "#pragma unroll",
              "for (int st = 0; st < STAGES - 2; ++st) {",
              "  if (st < k_tiles) load_stage(st, k_begin + st * BK);",
              "  tdsl_cp_async_commit();",
              "}")
            w.blank()
            w("// ---- main loop over K tiles ----")
            with w.block("for (int kt = 0; kt < k_tiles; ++kt)"):
                w("tdsl_cp_async_wait<STAGES - 3>();   // this thread's copies of tile kt have landed",
                  "tdsl_fence_proxy_async();            // ... and are visible to wgmma (async proxy)",
                  "__syncthreads();                     // everyone's; the products of tile kt-2 are complete",
                  "const int next = kt + STAGES - 2;    // refill the stage tile kt-2 was read from",
                  "if (next < k_tiles) load_stage(next % STAGES, k_begin + next * BK);",
                  "tdsl_cp_async_commit();",
                  "const int cur = kt % STAGES;",
                  "const unsigned a_tile = As + cur * STAGE_A_BYTES + wg * 8192;  // this warpgroup's 64 rows of A",
                  "const unsigned b_tile = Bs + cur * STAGE_B_BYTES;",
                  "tdsl_wgmma_fence();",
                  "#pragma unroll",
                  f"for (int kk = 0; kk < BK / {wgmma_k(ptx)}; ++kk)  // k{wgmma_k(ptx)} steps: {step_a} bytes into A, "
              f"{step_b} into B",
                  f"  tdsl_wgmma(acc, tdsl_wgmma_desc<{lbo_a}, {sbo_a}>(a_tile + kk * {step_a}), "
                  f"tdsl_wgmma_desc<{lbo_b}, {sbo_b}>(b_tile + kk * {step_b}));",
                  "tdsl_wgmma_commit();",
                  "tdsl_wgmma_wait<1>();                // keep one group of products in flight")
            w("tdsl_wgmma_wait<0>();",
              "tdsl_cp_async_wait<0>();  // no copy may be left in flight when the block exits")
            w.blank()
            _epilogue(w, out_op, out_dt, vc, "wg")
    demand = 128 * (PRODUCER_REGS + (s.bm // 64) * consumer_regs) if tma else 0
    return KernelSource(name=name, source=w.text(), block=(s.threads, 1, 1),
                        dynamic_smem_bytes=s.smem_bytes(), arch_suffix="a", setmaxnreg_demand=demand)


def _cp_async_load_stage(w: Writer, op: GemmOp, t: str) -> None:
    """``load_stage(st, k0)``: every thread's share of one K tile of A and B, as 16-byte cp.async copies."""
    w("// global -> shared: one K tile of A and B into stage `st`, 16-byte chunks along the contiguous dim;",
      "// chunk c of a 128-byte row r goes to chunk c ^ (r % 8) (the 128-byte swizzle); zero-filled outside",
      "// the matrix (the contiguous extent is a multiple of 8 elements)")
    with w.block("auto load_stage = [&](int st, int k0)", "};"):
        for which, rows, limit, ld, base in (("A", "BM", "M", "lda", "block_m"), ("B", "BN", "N", "ldb", "block_n")):
            w("#pragma unroll")
            with w.block(f"for (int i = 0; i < COPIES_{which}; ++i)"):
                w("const int idx = tid + i * LOADERS;")
                if k_major(op, which):
                    w(f"const int r = idx / 8, c = idx % 8;   // tile row r ({'M' if which == 'A' else 'N'}), "
                      "K chunk c",
                      f"const bool in_range = {base} + r < {limit} && k0 + c * 8 < k_end;",
                      f"const {t}* const src = in_range ? {which} + (long long)({base} + r) * {ld} + k0 + c * 8 "
                      f": {which};",
                      "const unsigned dst = r * 128 + ((c ^ (r % 8)) * 16);")
                else:
                    w(f"const int k = idx / ({rows} / 8), mn = (idx % ({rows} / 8)) * 8;  // K row, first "
                      f"{'M' if which == 'A' else 'N'} element",
                      f"const bool in_range = k0 + k < k_end && {base} + mn < {limit};",
                      f"const {t}* const src = in_range ? {which} + (long long)(k0 + k) * {ld} + {base} + mn "
                      f": {which};",
                      "const unsigned dst = (mn / 64) * 8192 + k * 128 + ((((mn % 64) / 8) ^ (k % 8)) * 16);")
                w(f"tdsl_cp_async<16>({which}s + st * STAGE_{which}_BYTES + dst, src, in_range);")


PRODUCER_REGS = 40
"""Registers the producer warpgroup keeps after ``setmaxnreg.dec`` (it only computes copy addresses)."""


def _warp_specialized_loop(w: Writer, op: GemmOp, s: GemmSchedule, lbo_a, sbo_a, step_a, lbo_b, sbo_b, step_b,
                           epilogue) -> None:
    """Producer warpgroup 0 (one thread) issues the TMA copies of K tiles into free stages; consumer warpgroups
    1.. multiply them and run ``epilogue``. ``persistent``: both walk the block's C tiles in the same order,
    counting K tiles over all of them (``it``), so stage and barrier phase carry from one C tile to the next
    and the producer fills the stages for the next tile while the consumers store the last one."""
    persistent = s.persistent
    counter = "it" if persistent else "kt"
    tile_word = "K tile" if persistent else "tile"  # K tiles, not C tiles, once a block walks several C tiles

    def tiles_loop():
        """Open the loop over this block's C tiles (persistent) and map the tile to its origin."""
        ctx = w.block("for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x)")
        ctx.__enter__()
        block_to_tile(w, "tile", counts=False)
        return ctx

    with w.block("if (wg == 0)"):
        w(f"// ---- producer: {tile_word} {counter} goes to stage {counter} % STAGES once the consumers released "
          "that stage ----",
          'asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\\n" :: "n"(PRODUCER_REGS));')
        with w.block("if (tid == 0)"):
            if persistent:
                w("int it = 0;  // K tiles issued by this block over all its C tiles")
                outer = tiles_loop()
            with w.block("for (int kt = 0; kt < k_tiles; ++kt" + (", ++it)" if persistent else ")")):
                w(f"const int st = {counter} % STAGES, k0 = k_begin + kt * BK;",
                  f"if ({counter} >= STAGES) tdsl_mbar_wait(empty + 8 * st, ({counter} / STAGES - 1) & 1);  "
                  f"// {tile_word} {counter}-STAGES done",
                  "tdsl_mbar_arrive_expect_tx(full + 8 * st, STAGE_BYTES);")
                for which, base in (("A", "block_m"), ("B", "block_n")):
                    box_inner, box_outer, copies = tma_box(op, s, which)
                    dst = f"{which}s + st * STAGE_{which}_BYTES"
                    tmap = f"tmap_{which.lower()}"
                    if k_major(op, which):
                        w(f"tdsl_tma_load_2d({dst}, {tmap}, k0, {base}, full + 8 * st);  "
                          f"// {which}: {box_outer} rows x {box_inner} K elements")
                    else:
                        w("#pragma unroll",
                          f"for (int j = 0; j < {copies}; ++j)  // {which}: {copies} boxes of {box_outer} K rows x "
                          f"{box_inner} {'M' if which == 'A' else 'N'} elements, 8192 bytes apart",
                          f"  tdsl_tma_load_2d({dst} + j * 8192, {tmap}, {base} + 64 * j, k0, full + 8 * st);")
            if persistent:
                outer.__exit__(None, None, None)
    with w.block("else"):
        w(f"// ---- consumers: wait for {tile_word} {counter}, multiply it, release the stage of {tile_word} "
          f"{counter}-1 ----",
          'asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\\n" :: "n"(CONSUMER_REGS));')
        if persistent:
            w("int it = 0;  // K tiles consumed by this block over all its C tiles (the producer's count)")
            outer = tiles_loop()
        w("float acc[ACC];                       // this thread's part of its warpgroup's 64 x BN tile",
          "#pragma unroll",
          "for (int i = 0; i < ACC; ++i) acc[i] = 0.f;")
        with w.block("for (int kt = 0; kt < k_tiles; ++kt" + (", ++it)" if persistent else ")")):
            w(f"const int cur = {counter} % STAGES;",
              f"tdsl_mbar_wait(full + 8 * cur, ({counter} / STAGES) & 1);  // the tile's copies have landed",
              "const unsigned a_tile = As + cur * STAGE_A_BYTES + (wg - 1) * 8192;  // this warpgroup's 64 rows",
              "const unsigned b_tile = Bs + cur * STAGE_B_BYTES;",
              "tdsl_wgmma_fence();",
              "#pragma unroll",
              f"for (int kk = 0; kk < BK / {wgmma_k(WGMMA_PTX_TYPE[op.dtype])}; ++kk)  // k{wgmma_k(WGMMA_PTX_TYPE[op.dtype])} steps: {step_a} bytes into A, "
              f"{step_b} into B",
              f"  tdsl_wgmma(acc, tdsl_wgmma_desc<{lbo_a}, {sbo_a}>(a_tile + kk * {step_a}), "
              f"tdsl_wgmma_desc<{lbo_b}, {sbo_b}>(b_tile + kk * {step_b}));",
              "tdsl_wgmma_commit();",
              f"tdsl_wgmma_wait<1>();                // {tile_word} {counter}-1's products are complete ...",
              f"if (kt > 0) tdsl_mbar_arrive(empty + 8 * (({counter} - 1) % STAGES));  // ... so its stage is free")
        w("tdsl_wgmma_wait<0>();")
        if persistent:
            w("// the last K tile's stage is free too: the producer refills it for the next C tile during the epilogue",
              "if (k_tiles > 0) tdsl_mbar_arrive(empty + 8 * ((it - 1) % STAGES));")
        w.blank()
        epilogue()
        if persistent:
            outer.__exit__(None, None, None)


def _epilogue(w: Writer, op: GemmOp, dt: dtypes.DType, vc: int, row_group: str) -> None:
    t = dt.c_type
    w("// ---- epilogue: C = alpha * acc" + (" + beta * C" if op.read_c else " (C is never read)")
      + "; accumulators 4j..4j+3 hold rows frag_row and frag_row+8 of warp rows 16*warp_in_wg, columns "
      "8j + 2*frag_col + {0, 1} ----")
    w(f"const int row0 = block_m + ({row_group}) * 64 + warp_in_wg * 16 + frag_row;")
    w("#pragma unroll")
    with w.block("for (int h = 0; h < 2; ++h)"):
        w("const int gm = row0 + h * 8;",
          "if (gm >= M) continue;",
          f"{t}* const c_row = C + (long long)gm * ldc;",
          "#pragma unroll")
        with w.block("for (int j = 0; j < BN / 8; ++j)"):
            w("const int gn = block_n + j * 8 + 2 * frag_col;")
            store_pair(w, op, dt, vc, "acc[4 * j + 2 * h + {e}]")

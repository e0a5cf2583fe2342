"""GEMM emitter: a pure function (GemmOp, GemmSchedule) -> KernelSource.

Structure of the kernel (GEMM tiling, ``docs/design.md``, "Background"; stage by stage in ``docs/gemm.md``):

1. block → C tile: a 1-D grid, rasterized in groups of ``swizzle`` block-rows for L2 reuse;
2. thread → fragment: each warp owns a wm×wn warp tile, each thread an rm×rn thread tile made of
   4-wide chunks strided across the warp tile, so shared-memory fragment reads are 16-byte and
   broadcast inside the warp;
3. global → registers → shared memory: A and B tiles loaded with ``vec``-wide loads, stored K-outer
   (``As[k][m]``, ``Bs[k][n]``) so fragment reads are contiguous; out-of-range elements load as 0;
4. main loop over K tiles: with double buffering the next tile is fetched into registers while the
   current one is multiplied out of shared memory (one barrier per K step); with ``stages`` ≥ 3 (float32)
   tiles go global → shared with ``cp.async`` (no registers in between; element by element where the
   tile is transposed to K-outer), ``stages − 1`` K tiles in flight, still one barrier per K step;
5. epilogue: C = alpha·acc (+ beta·C when ``op.read_c``), vector stores where C's alignment allows.
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
from .emit_common import COMPONENTS, VEC_TYPES, block_to_tile, constexpr_table, k_range
from .emit_gemv import emit_gemm_gemv
from .emit_gemv_mma import emit_gemm_gemv_mma
from .emit_mma import emit_gemm_mma
from .emit_wgmma import emit_gemm_wgmma
from .kernel_plan import canonical, grid, kernel_name, kernel_name_reduce, plan_gemm, splitk_reduce_plan
from .op import GemmOp
from .schedule import GEMM_RULES, GemmSchedule, tensor_core_gemv, tile_loads, tile_pieces

__all__ = ["emit_gemm", "emit_splitk_reduce", "grid", "kernel_name", "kernel_name_reduce"]


def emit_splitk_reduce(op: GemmOp, s: GemmSchedule, standalone: bool = True) -> KernelSource:
    """The second kernel of a split-K GEMM: C = alpha · Σ_z W[z] (+ beta · C), summed in a fixed order
    (z = 0, 1, …), so results are bitwise reproducible. One thread per element of C, 256 per block;
    launch on ceil(M·N / 256) blocks. On sm_90+ it waits in ``griddepcontrol.wait`` before reading the partial
    sums, so it may be launched as a programmatic dependent launch of the main kernel (its launch processing overlaps
    the main grid's completion; CUDA Programming Guide, "Programmatic Dependent Launch and Synchronization"). W is
    not ``__restrict__`` (its plan's parameter): under such a launch the grid may start while the main kernel still
    writes W, so its loads must not take the read-only path. ``standalone=False``: without the dtype helpers and
    the SPLIT_K constant, for a file that already holds the main kernel's source (the exported ``kernel.cu``)."""
    dt = dtypes.get(op.dtype)
    t = dt.c_type
    w = Writer()
    w(f"// tiledsl split-K epilogue: C[M,N] = alpha * sum of {s.split_k} float32 partial products"
      + (" + beta * C" if op.read_c else "") + ("; C column-major (ldc between columns)" if op.layout_c == "col"
                                                 else ""))
    prelude = helpers_for(op.dtype)
    if prelude and standalone:
        w(prelude.rstrip("\n"))
    if standalone:
        w(f"constexpr int SPLIT_K = {s.split_k};  // GemmSchedule.split_k")
    p = splitk_reduce_plan(op, s, None)
    w(f'extern "C" __global__ void __launch_bounds__({p.threads})')
    with w.block(f"{p.kernel_name}({render_params(p.params)})"):
        where = "of the row-major workspace" if op.layout_c == "col" else "of C, row-major"
        w(f"const long long idx = blockIdx.x * {p.threads}LL + threadIdx.x;   // element {where}",
          "const long long mn = (long long)M * N;",
          "if (idx >= mn) return;",
          "#if __CUDA_ARCH__ >= 900",
          "// launched as a programmatic dependent launch of the main kernel (sm_90+, tiledsl.dependent): wait until",
          "// that grid has completed and its partial sums are visible (a no-op after a plain launch)",
          'asm volatile("griddepcontrol.wait;" ::: "memory");',
          "#endif",
          "float sum = 0.f;",
          "#pragma unroll" if s.split_k <= 64 else "#pragma unroll 32  // many slices: 32 loads in flight at a time",
          "for (int z = 0; z < SPLIT_K; ++z) sum += W[z * mn + idx];   // fixed order: deterministic",
          f"{t}* const c = C + (idx % N) * ldc + idx / N;" if op.layout_c == "col" else
          f"{t}* const c = C + (idx / N) * ldc + idx % N;")
        val = "alpha * sum" + (f" + beta * {dt.to_acc('*c')}" if op.read_c else "")
        w(f"*c = {dt.from_acc(val)};")
    return KernelSource(name=p.kernel_name, source=w.text(), block=p.block)


def emit_gemm(op: GemmOp, s: GemmSchedule) -> KernelSource:
    """Emit the CUDA C of ``op`` tiled by ``s``. Pure: same inputs, same text.

    Returns:
        KernelSource with ``block=(threads, 1, 1)`` and the dynamic shared memory the stages need.
        Launch on a 1-D grid of ceil(M/bm)·ceil(N/bn) blocks (see :func:`grid`).
    """
    s.check_op(op)
    if tensor_core_gemv(s):
        return emit_gemm_gemv_mma(op, s)
    if s.kernel == "gemv":
        return emit_gemm_gemv(op, s)
    if s.mma == "mma_sync":
        return emit_gemm_mma(op, s)
    if s.mma == "wgmma":
        return emit_gemm_wgmma(op, s)
    p = plan_gemm(op, s)
    dt = dtypes.get(op.dtype)
    va, vb, vc = p.width("A"), p.width("B"), p.width("C")
    cm, cn = p.detail.cm, p.detail.cn
    out_dt = dtypes.get(p.detail.out_dtype)
    out_op = replace(op, read_c=False) if s.split_k > 1 else op  # split-K: emit_splitk_reduce finishes C
    name = p.kernel_name
    w = Writer()
    w(f"// tiledsl GEMM: C[M,N] = alpha * A[M,K] @ B[K,N]{' + beta * C' if op.read_c else ''}",
      f"// dtype {op.dtype} in/out, float32 accumulation; A {op.layout_a}-major, B {op.layout_b}-major, "
      "C row-major",
      f"// schedule: {json.dumps(s.header_dict(), sort_keys=True)}")
    prelude = helpers_for(op.dtype)
    if prelude:
        w(prelude.rstrip("\n"))
    pipelined = s.stages >= 3  # cp.async pipeline (rule fma_cp_async_float32: float32 tiles)
    effective = canonical(op, s)  # the K loop follows the min_blocks the launch bounds keep
    if pipelined:
        w(ASYNC_COPY_HELPERS.rstrip("\n"))
    if s.stream_k:
        w(STREAM_K_HELPERS.rstrip("\n"))
    w.blank()
    w("// ---- schedule (tiledsl.GemmSchedule) ----")
    consts = [
        ("BM", s.bm, "bm: block tile rows of C"), ("BN", s.bn, "bn: block tile columns of C"),
        ("BK", s.bk, "bk: K depth of one shared-memory tile"),
        ("RM", s.rm, "rm: thread tile rows"), ("RN", s.rn, "rn: thread tile columns"),
        ("WM", s.wm, "wm: warp tile rows"), ("WN", s.wn, "wn: warp tile columns"),
        ("VEC", s.vec, "vec: requested elements per global load"),
        ("UNROLL", s.unroll, "unroll: inner-k unroll"),
        ("SMEM_PAD", s.smem_pad, "smem_pad: padding elements per shared row"),
        ("SWIZZLE", s.swizzle, "swizzle: block-rows per rasterization group"),
        ("SPLIT_K", s.split_k, "split_k"),
        ("MIN_BLOCKS", s.min_blocks, "min_blocks: resident blocks per SM the registers must allow"),
        ("STAGES", s.stages, "stages: K tiles in the pipeline (cp.async when >= 3)" if pipelined
         else "stages (double_buffer -> 2)"),
        ("MMA", 0, "mma='fma': FP32 FMA units"), ("KERNEL", 0, "kernel='tiled'"),
        ("THREADS", s.threads, "(BM/RM)*(BN/RN)"),
        ("WARP_LANES", (s.wm // s.rm) * (s.wn // s.rn), "(WM/RM)*(WN/RN)"),
    ]
    constexpr_table(w, consts)
    w("// derived",
      "constexpr int WARPS_N = BN / WN;              // warps along N",
      "constexpr int LANES_N = WN / RN;              // threads of a warp along N",
      "constexpr int LANES_M = WM / RM;              // threads of a warp along M",
      f"constexpr int CM = {cm}, CN = {cn};               // fragment chunk widths (contiguous rows / cols)",
      f"constexpr int VA = {va}, VB = {vb}, VC = {vc};      // effective vector widths of A, B, C "
      f"(op alignment {op.align_a}/{op.align_b}/{op.align_c})",
      "constexpr int LDS_A = BM + SMEM_PAD;          // shared row pitch of A (As[k][m])",
      "constexpr int LDS_B = BN + SMEM_PAD;          // shared row pitch of B (Bs[k][n])",
      *_loads_per_thread(op, s, "A", va), *_loads_per_thread(op, s, "B", vb),
      'static_assert(CN % VC == 0, "a C chunk splits into VC-wide stores");')
    for line in R.static_asserts(GEMM_RULES, s.env()):
        w(line)
    w.blank()
    if s.split_k > 1:
        w(f"// split-K: C is the float32 workspace [SPLIT_K][M][ldc]; {kernel_name_reduce(op, s)} sums it")
    # narrower loads than the schedule planned for need more address registers: drop the occupancy
    # target to 1 block rather than spill
    w(f'extern "C" __global__ void __launch_bounds__(THREADS, {p.min_blocks})  '
      f'// registers capped near {p.max_registers} per thread' + ('' if p.min_blocks == s.min_blocks else
                                                                  ' (MIN_BLOCKS lowered: operands force narrower loads)'))
    breaks = (3,) + tuple(i for i, q in enumerate(p.params) if q.name == "dp_tiles")  # stream-K's own on a line
    with w.block(f"{name}({render_params(p.params, breaks=breaks)})"):
        if s.stream_k:
            _stream_k_work(w)
        else:
            block_to_tile(w)
        _thread_to_fragment(w)
        _shared_memory(w)
        w.blank()

        def c_tile(share: bool) -> None:
            """Accumulate the block's K range of its C tile in registers, then store it (``share``: a stream-K
            block's part of the tile, finished by the last block to arrive)."""
            w("float acc[RM][RN];                      // the thread tile, in registers",
              "#pragma unroll",
              "for (int i = 0; i < RM; ++i)",
              "  #pragma unroll",
              "  for (int j = 0; j < RN; ++j) acc[i][j] = 0.f;")
            w.blank()
            if pipelined:
                k_range(w, s.split_k, share)
                w("const int k_tiles = max(0, (k_end - k_begin + BK - 1) / BK);")
                _pipelined_main_loop(w, op, effective, va, vb, cm, cn)
            else:
                _register_prefetch_main_loop(w, op, dt, effective, va, vb, cm, cn, share)
            w.blank()
            if not share:
                _epilogue(w, out_op, out_dt, vc)
                return
            _stream_k_fixup(w, s)
            with w.block("if (finish)"):
                _epilogue(w, out_op, out_dt, vc)

        if not s.stream_k:
            c_tile(False)
        else:
            _stream_k_tiles(w, c_tile)
    return KernelSource(name=name, source=w.text(), block=p.block, dynamic_smem_bytes=p.dynamic_smem_bytes)


STREAM_K_HELPERS = r"""// ---- stream-K: sk_blocks blocks share sk_iters K iterations, block b taking [first(b), first(b + 1)) ----
__device__ __forceinline__ long long sk_first_iteration(long long b, long long sk_iters, int sk_blocks) {
  return b * sk_iters / sk_blocks;
}
// the block whose share holds iteration x: the last b with sk_first_iteration(b) <= x
__device__ __forceinline__ int sk_owner(long long x, long long sk_iters, int sk_blocks) {
  return (int)(((x + 1) * sk_blocks - 1) / sk_iters);
}
// block b's partial-tile slot for the C tile whose iterations start at t0 and whose first share is b_first's:
// 0 for the tile b's share starts in, 1 for the tile it ends in (only b_first's share can start before t0)
__device__ __forceinline__ long long sk_slot(int b, int b_first, long long t0, long long sk_iters, int sk_blocks) {
  return 2LL * b + (b == b_first && sk_first_iteration(b, sk_iters, sk_blocks) < t0 ? 1 : 0);
}"""


def _stream_k_tiles(w: Writer, c_tile) -> None:
    """Emit the loop over the C tiles of a block's K iterations, ``c_tile(True)`` emitting each tile's work."""
    w("// ---- the C tiles of this block's K iterations (data-parallel blocks: one tile, all of K) ----")
    with w.block("for (long long it = it_begin; it < it_end;)"):
        w("const int tile = (int)(it / k_iters);",
          "const long long tile_start = (long long)tile * k_iters;   // the tile's first K iteration",
          "const int kt_first = (int)(it - tile_start);               // this block's K tiles of it:",
          "const int kt_last = (int)min((long long)k_iters, it_end - tile_start);  // [kt_first, kt_last)",
          "it = tile_start + kt_last;")
        block_to_tile(w, "tile", counts=False)
        w.blank()
        c_tile(True)
        w("__syncthreads();   // every read of the shared stages is done before the next tile fills them")


def _stream_k_work(w: Writer) -> None:
    """Emit the block's work under stream-K: its range [it_begin, it_end) of K iterations, numbered across
    C tiles (tile t owns [t·k_iters, (t+1)·k_iters))."""
    w("// ---- block -> K iterations (stream-K; tiledsl.gemm.kernel_plan.stream_k_split) ----",
      "// blocks [0, dp_tiles) take one C tile each over all of K; the sk_blocks blocks after them share the K",
      "// iterations of the remaining tiles evenly (at least one per block), so the last wave keeps every SM",
      "// busy; a tile shared by several blocks is finished by the last of them to arrive",
      "const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;",
      "const int k_iters = (K + BK - 1) / BK;                       // K tiles per C tile",
      "const long long sk_start = (long long)dp_tiles * k_iters;     // the first stream-K iteration",
      "const long long sk_iters = (long long)(tiles_m * tiles_n - dp_tiles) * k_iters;",
      "const int sk_block = (int)blockIdx.x - dp_tiles;              // < 0: a data-parallel block",
      "const long long it_begin = sk_block < 0 ? (long long)blockIdx.x * k_iters",
      "                                        : sk_start + sk_first_iteration(sk_block, sk_iters, sk_blocks);",
      "const long long it_end = sk_block < 0 ? it_begin + k_iters",
      "                                      : sk_start + sk_first_iteration(sk_block + 1, sk_iters, sk_blocks);",
      "__shared__ int sk_last;                 // this block arrived last at a shared tile")


def _stream_k_fixup(w: Writer, s: GemmSchedule) -> None:
    """Emit the stream-K fixup: a block holding part of a shared tile stores its float32 partial tile; the last
    to arrive (a ticket per tile) sums every share's partial in K order (deterministic) into ``acc`` and
    goes on to the epilogue. Partial tiles are kept per thread, element-major, so a warp's stores and loads
    are contiguous (float4 where a row of the thread tile splits into fours: rn a multiple of 4)."""
    vec = 4 if s.rn % 4 == 0 else 1  # a float4 piece is 4 columns of one row of acc
    vt = "float4" if vec == 4 else "float"
    w("// ---- stream-K fixup: a tile shared by several blocks is finished by the last to arrive ----",
      "bool finish = true;")
    with w.block("if (kt_first > 0 || kt_last < k_iters)"):
        w("const long long t0 = tile_start - sk_start;            // the tile's first iteration, stream-K numbering",
          "const int b_first = sk_owner(t0, sk_iters, sk_blocks);",
          "const int b_last = sk_owner(t0 + k_iters - 1, sk_iters, sk_blocks);",
          f"constexpr int PIECES = RM * RN / {vec};               // {vt} pieces of a thread tile",
          f"// partial tiles: [slot][piece][thread], so a warp's {vt} accesses are contiguous",
          f"{vt}* const slots = reinterpret_cast<{vt}*>(partials) + tid;",
          f"{vt}* const mine = slots + sk_slot(sk_block, b_first, t0, sk_iters, sk_blocks) * PIECES * THREADS;",
          "#pragma unroll")
        with w.block("for (int e = 0; e < PIECES; ++e)"):
            if vec == 4:
                w("const int i = e * 4 / RN, j = e * 4 % RN;",
                  "mine[e * THREADS] = make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);")
            else:
                w("mine[e * THREADS] = acc[e / RN][e % RN];")
        w("__threadfence();                          // the partial tile is visible before the ticket",
          "__syncthreads();")
        with w.block("if (tid == 0)"):
            w("const unsigned arrived = atomicAdd(&tickets[tile - dp_tiles], 1u);",
              "sk_last = arrived == (unsigned)(b_last - b_first);",
              "if (sk_last) tickets[tile - dp_tiles] = 0u;   // every share has arrived: ready for the next launch")
        w("__syncthreads();",
          "finish = sk_last;")
        with w.block("if (finish)"):
            w("__threadfence();",
              "// the sum of every share's partial tile, in K order (the same order whoever arrives last)",
              "#pragma unroll",
              "for (int i = 0; i < RM; ++i)",
              "  #pragma unroll",
              "  for (int j = 0; j < RN; ++j) acc[i][j] = 0.f;")
            with w.block("for (int b = b_first; b <= b_last; ++b)"):
                w(f"const {vt}* const part = slots + sk_slot(b, b_first, t0, sk_iters, sk_blocks) * PIECES * THREADS;",
                  "#pragma unroll")
                with w.block("for (int e = 0; e < PIECES; ++e)"):
                    if vec == 4:
                        w("const float4 v = __ldcg(&part[e * THREADS]);   // L2: written by another SM",
                          "const int i = e * 4 / RN, j = e * 4 % RN;",
                          "acc[i][j] += v.x; acc[i][j + 1] += v.y; acc[i][j + 2] += v.z; acc[i][j + 3] += v.w;")
                    else:
                        w("acc[e / RN][e % RN] += __ldcg(&part[e * THREADS]);   // L2: written by another SM")


def _register_prefetch_main_loop(w: Writer, op: GemmOp, dt: dtypes.DType, s: GemmSchedule, va: int, vb: int,
                                 cm: int, cn: int, share: bool = False) -> None:
    """K loop of a 1- or 2-stage kernel: the next K tile goes global → registers → shared memory (converted
    to float32 on the way), prefetched into registers while the current tile is multiplied (2 stages).
    ``share``: over a stream-K block's K tiles [kt_first, kt_last) of the tile."""
    w("// registers staging one K tile on its way from global to shared memory",
      "alignas(16) float a_stage[LOADS_A * VA];",
      "alignas(16) float b_stage[LOADS_B * VB];")
    w.blank()
    k_range(w, s.split_k, share)
    w("const int k_tiles = max(0, (k_end - k_begin + BK - 1) / BK);")
    w("// ---- prologue: K tile 0 -> shared stage 0 ----")
    _tile_to_registers(w, op, dt, s, "k_begin", va, vb)
    _registers_to_stage(w, op, s, "0", va, vb)
    w("__syncthreads();")
    w.blank()
    if s.fragment_prefetch:
        _fragment_prefetch_main_loop(w, op, dt, s, va, vb, cm, cn)
        return
    w("// ---- main loop over K tiles ----")
    with w.block("for (int kt = 0; kt < k_tiles; ++kt)"):
        if s.double_buffer:
            w("const int cur = kt & 1;")
            w("const bool has_next = kt + 1 < k_tiles;")
            w("// prefetch K tile kt+1 into registers while tile kt is multiplied")
            with w.block("if (has_next)"):
                _tile_to_registers(w, op, dt, s, "k_begin + (kt + 1) * BK", va, vb)
            _compute(w, s, "cur", cm, cn)
            w("// publish the prefetched tile into the other stage")
            with w.block("if (has_next)"):
                _registers_to_stage(w, op, s, "cur ^ 1", va, vb)
            w("__syncthreads();")
        else:
            _compute(w, s, "0", cm, cn)
            with w.block("if (kt + 1 < k_tiles)"):
                w("__syncthreads();  // everyone is done reading stage 0")
                _tile_to_registers(w, op, dt, s, "k_begin + (kt + 1) * BK", va, vb)
                _registers_to_stage(w, op, s, "0", va, vb)
                w("__syncthreads();")


def _tile_to_registers(w: Writer, op: GemmOp, dt: dtypes.DType, s: GemmSchedule, k0: str, va: int,
                       vb: int) -> None:
    """The A and B tiles at K offset ``k0`` → the staging registers."""
    _load_global(w, op, dt, s, "A", k0, va)
    _load_global(w, op, dt, s, "B", k0, vb)


def _registers_to_stage(w: Writer, op: GemmOp, s: GemmSchedule, stage: str, va: int, vb: int) -> None:
    """The staging registers → shared stage ``stage`` (K-outer: ``As[k][m]``, ``Bs[k][n]``)."""
    _store_shared(w, op, s, "A", stage, va)
    _store_shared(w, op, s, "B", stage, vb)


def _fragment_prefetch_main_loop(w: Writer, op: GemmOp, dt: dtypes.DType, s: GemmSchedule, va: int, vb: int,
                                 cm: int, cn: int) -> None:
    """K loop of ``fragment_prefetch``: two register sets of fragments. K step kk loads step kk+1's fragments
    (set (kk+1)&1) before its FMAs on set kk&1; in the last step of a K tile the prefetched tile is stored
    into the other stage, one barrier publishes it, and step 0 of the next tile is loaded from it before the
    step's FMAs, which then hide that load's latency. Stage kt&1 is overwritten only after the barrier of
    tile kt−1, when every read of it (all before that barrier) is done: one barrier per K tile."""
    w("// ---- fragments: two register sets, k step kk uses set kk & 1 while set (kk + 1) & 1 is loaded ----",
      "alignas(16) float a_frag[2][RM];",
      "alignas(16) float b_frag[2][RN];")
    _load_fragments(w, "0", "0", "0", cm, cn)
    w.blank()
    w("// ---- main loop over K tiles ----")
    with w.block("for (int kt = 0; kt < k_tiles; ++kt)"):
        w("const int cur = kt & 1;",
          "const bool has_next = kt + 1 < k_tiles;",
          "// prefetch K tile kt+1 into registers while tile kt is multiplied")
        with w.block("if (has_next)"):
            _tile_to_registers(w, op, dt, s, "k_begin + (kt + 1) * BK", va, vb)
        w("#pragma unroll")
        with w.block("for (int kk = 0; kk < BK; ++kk)"):
            with w.block("if (kk == BK - 1)"):
                w("// last k step: publish the prefetched tile into the other stage; after this barrier")
                w("// every read of that stage (tile kt-1) is done and tile kt+1 is visible")
                with w.block("if (has_next)"):
                    _registers_to_stage(w, op, s, "cur ^ 1", va, vb)
                w("__syncthreads();")
            w("// fragments of the next k step: kk+1 of this tile, or k step 0 of the next tile")
            _load_fragments(w, "(kk + 1) & 1", "kk == BK - 1 ? cur ^ 1 : cur", "(kk + 1) % BK", cm, cn)
            _rank1_update(w, s, "a_frag[kk & 1]", "b_frag[kk & 1]")


def _rank1_update(w: Writer, s: GemmSchedule, a: str, b: str) -> None:
    """acc += a ⊗ b. With ``min_blocks`` = 1 the row pairs are walked in serpentine order (as CUTLASS's SIMT
    thread-level MMA): row i runs j forwards, row i+1 backwards, so the turn reuses the b value just read.
    With :func:`_rows_across_lanes` it took the plain 256x128 tile from 0.904× to 0.953× cuBLAS at 4096³
    float32 NN, and cut ptxas's allocation for its fragment-prefetch variant from 255 registers to 219
    (H200, 2026-12-01, ``benchmarks/results/gemm_fma_serpentine_h200.json``, ``docs/gemm.md``). Under a tighter register cap (``min_blocks`` ≥ 2: 128 per thread for 256 threads) it
    makes ptxas spill (112 bytes for 128x128 with 8x8 thread tiles), so there the plain order stays."""
    w("#pragma unroll")
    with w.block("for (int i = 0; i < RM; ++i)"):
        w("#pragma unroll")
        if s.min_blocks > 1:
            w(f"for (int j = 0; j < RN; ++j) acc[i][j] = fmaf({a}[i], {b}[j], acc[i][j]);")
            return
        with w.block("for (int j = 0; j < RN; ++j)"):
            w("const int jj = (i & 1) ? RN - 1 - j : j;  // serpentine",
              f"acc[i][jj] = fmaf({a}[i], {b}[jj], acc[i][jj]);")


def _load_fragments(w: Writer, buf: str, stage: str, kk: str, cm: int, cn: int) -> None:
    """Load the A and B fragments of k step ``kk`` of shared stage ``stage`` into register set ``buf``
    (16-byte reads where the chunk is 4 wide)."""
    with w.block(""):
        if stage == "0" and kk == "0":  # the prologue: k step 0 of stage 0
            w("const float* const as = As;", "const float* const bs = Bs;")
        else:
            w(f"const float* const as = As + ({stage}) * BK * LDS_A + ({kk}) * LDS_A;",
              f"const float* const bs = Bs + ({stage}) * BK * LDS_B + ({kk}) * LDS_B;")
        for frag, chunk, width, lanes, src, base, n in (("a_frag", "CM", cm, "LANES_M", "as", "frag_m", "RM"),
                                                         ("b_frag", "CN", cn, "LANES_N", "bs", "frag_n", "RN")):
            w("#pragma unroll")
            with w.block(f"for (int s = 0; s < {n} / {chunk}; ++s)"):
                src_at = f"{src}[{base} + s * {lanes} * {chunk}]"
                if width == 1:
                    w(f"{frag}[{buf}][s] = {src_at};")
                else:
                    w(f"*reinterpret_cast<float{width}*>(&{frag}[{buf}][s * {chunk}]) = "
                      f"*reinterpret_cast<const float{width}*>(&{src_at});")


def _pipelined_main_loop(w: Writer, op: GemmOp, s: GemmSchedule, va: int, vb: int, cm: int, cn: int) -> None:
    """K loop of a ``stages`` ≥ 3 float32 kernel: K tiles 0 … STAGES−2 are requested before the loop (one
    cp.async group each); iteration kt waits for tile kt (``wait_group STAGES−2``), one barrier makes it
    visible to every thread and frees the stage read in iteration kt−1, tile kt+STAGES−1 is requested into
    that stage, then tile kt is multiplied. An empty group past the last tile keeps the count uniform, so
    every real copy has been waited for when the loop ends."""
    w("// ---- prologue: K tiles 0 .. STAGES-2 requested, one cp.async group per tile ----",
      "#pragma unroll")
    with w.block("for (int st = 0; st < STAGES - 1; ++st)"):
        with w.block("if (st < k_tiles)"):
            _copy_async(w, op, s, "A", "st", "k_begin + st * BK", va)
            _copy_async(w, op, s, "B", "st", "k_begin + st * BK", vb)
        w("tdsl_cp_async_commit();")
    w.blank()
    w("// ---- main loop over K tiles ----")
    with w.block("for (int kt = 0; kt < k_tiles; ++kt)"):
        w("tdsl_cp_async_wait<STAGES - 2>();  // this thread's copies of K tile kt have landed",
          "__syncthreads();                   // everyone's have; stage (kt - 1) % STAGES is read out",
          "const int next = kt + STAGES - 1;  // request K tile kt + STAGES - 1 into the freed stage")
        with w.block("if (next < k_tiles)"):
            _copy_async(w, op, s, "A", "next % STAGES", "k_begin + next * BK", va)
            _copy_async(w, op, s, "B", "next % STAGES", "k_begin + next * BK", vb)
        w("tdsl_cp_async_commit();")
        _compute(w, s, "kt % STAGES", cm, cn)


def _copy_async(w: Writer, op: GemmOp, s: GemmSchedule, which: str, stage: str, k0: str, vec: int) -> None:
    """Request one K tile of ``which`` into shared stage ``stage`` with cp.async, zero-filled outside the
    matrix. Where the tile keeps its global layout (K-outer already): ``vec``-wide copies. Where it is
    transposed to K-outer: one 4-byte copy per element, consecutive threads taking consecutive elements of a
    row (each warp instruction then reads whole 32-byte sectors; ``smem_pad`` = 4 spreads its transposed
    shared-memory writes over the banks)."""
    g = _operand_geometry(op, which)
    base = "As" if which == "A" else "Bs"
    layout = op.layout_a if which == "A" else op.layout_b
    how = "4-byte copies transposed to K-outer" if g["transposed"] else f"{g['v']}-wide copies, K-outer as stored"
    w(f"// global -> shared (cp.async): {which} tile ({layout}-major), {how}, zeros outside the matrix")
    with w.block(""):
        w(f"const int k0 = {k0};",
          f"float* const dst = {base} + ({stage}) * BK * {g['ld']};",
          "#pragma unroll")
        if g["transposed"]:
            uneven = _uneven(s, which, vec)  # then ⌈elements / THREADS⌉ rounds, fewer than LOADS · V
            rounds = f"COPIES_{which}" if uneven else f"{g['loads']} * {g['v']}"
            with w.block(f"for (int i = 0; i < {rounds}; ++i)"):
                w("const int idx = tid + i * THREADS;",
                  f"const int r = idx / {g['contig']};  // strided index",
                  f"const int c = idx % {g['contig']};  // contiguous index (K)")
                if uneven:
                    _past_tile(w, g, f"{rounds} - 1")
                w(f"const bool in_range = {g['bound']};",
                  f"tdsl_cp_async<4>(&dst[c * {g['ld']} + r], {g['ptr']}, in_range);")
            return
        with w.block(f"for (int i = 0; i < {g['loads']}; ++i)"):
            w("const int idx = tid + i * THREADS;",
              f"const int r = idx / ({g['contig']} / {g['v']});              // strided index",
              f"const int c = (idx % ({g['contig']} / {g['v']})) * {g['v']};  // contiguous index")
            if _uneven(s, which, vec):
                _past_tile(w, g, f"{g['loads']} - 1")
            w(f"const bool in_range = {g['bound']};",
              f"tdsl_cp_async<{vec * 4}>(&dst[r * {g['ld']} + c], {g['ptr']}, in_range);")


def _uneven(s: GemmSchedule, which: str, vec: int) -> bool:
    """Whether the ``vec``-wide pieces of one K tile of ``which`` leave the last round of loads to some threads only
    (:func:`tiledsl.gemm.schedule.tile_loads`; e.g. the 16×128 B tile of a 48×128 tile in 4-wide pieces over 192
    threads)."""
    return tile_pieces(s, which, vec) % s.threads != 0


def _loads_per_thread(op: GemmOp, s: GemmSchedule, which: str, vec: int) -> tuple[str, ...]:
    """The ``LOADS_A`` / ``LOADS_B`` constants: loads per thread of one K tile, rounded up where uneven; then also
    ``COPIES_A`` / ``COPIES_B`` for a tile the cp.async pipeline transposes 4 bytes at a time."""
    x, tile, v = which, ("BM * BK" if which == "A" else "BK * BN"), f"V{which}"
    if not _uneven(s, which, vec):
        return (f"constexpr int LOADS_{x} = {tile} / (THREADS * {v});",)
    lines = (f"constexpr int PIECES_{x} = {tile} / {v};  // {v}-wide pieces of one {x} tile: uneven over the threads",
             f"constexpr int LOADS_{x} = (PIECES_{x} + THREADS - 1) / THREADS;  // rounds; the last for some threads")
    if s.stages >= 3 and _operand_geometry(op, which)["transposed"]:
        lines += (f"constexpr int COPIES_{x} = ({tile} + THREADS - 1) / THREADS;  // 4-byte cp.async copies each",)
    return lines


def _past_tile(w: Writer, g: dict, last: str) -> None:
    """Skip a piece of the last round (``i == last``) that lies past the tile (its strided index ``r`` ≥ the
    tile's extent): only that round can, so the earlier unrolled rounds carry no test."""
    w(f"if (i == {last} && r >= {g['strided']}) continue;  // past the tile: the last round is uneven")


def _thread_to_fragment(w: Writer) -> None:
    w("// ---- thread -> fragment: warp tile WMxWN, thread tile RMxRN in CMxCN chunks strided by the warp ----",
      "const int tid = threadIdx.x;",
      "const int warp_id = tid / 32, lane = tid % 32;",
      "const int frag_m = (warp_id / WARPS_N) * WM + (lane / LANES_N) * CM;  // first row of chunk 0",
      "const int frag_n = (warp_id % WARPS_N) * WN + (lane % LANES_N) * CN;  // first column of chunk 0")


def _shared_memory(w: Writer) -> None:
    w("// ---- shared memory: STAGES x (As[BK][LDS_A], Bs[BK][LDS_B]), K outer ----",
      "extern __shared__ float4 smem_raw[];",
      "float* const As = reinterpret_cast<float*>(smem_raw);",
      "float* const Bs = As + STAGES * BK * LDS_A;")


def _operand_geometry(op: GemmOp, which: str) -> dict:
    """Where the contiguous (vector) dimension of operand A or B lies, as C expressions."""
    if which == "A":
        # A is M x K. row-major: K contiguous; col-major: M contiguous.
        if op.layout_a == "row":
            return dict(v="VA", contig="BK", strided="BM", loads="LOADS_A",
                        ptr="A + (long long)(block_m + r) * lda + (k0 + c)",
                        bound="block_m + r < M && k0 + c < k_end", transposed=True, ld="LDS_A")
        return dict(v="VA", contig="BM", strided="BK", loads="LOADS_A",
                    ptr="A + (long long)(k0 + r) * lda + (block_m + c)",
                    bound="block_m + c < M && k0 + r < k_end", transposed=False, ld="LDS_A")
    if op.layout_b == "row":  # B is K x N; row-major: N contiguous
        return dict(v="VB", contig="BN", strided="BK", loads="LOADS_B",
                    ptr="B + (long long)(k0 + r) * ldb + (block_n + c)",
                    bound="k0 + r < k_end && block_n + c < N", transposed=False, ld="LDS_B")
    return dict(v="VB", contig="BK", strided="BN", loads="LOADS_B",
                ptr="B + (long long)(block_n + r) * ldb + (k0 + c)",
                bound="block_n + r < N && k0 + c < k_end", transposed=True, ld="LDS_B")


def _rows_across_lanes(op: GemmOp, s: GemmSchedule, which: str, vec: int) -> bool:
    """Whether a tile transposed on its way to shared memory is loaded with a warp's 32 lanes on 32
    consecutive rows (one ``vec``-wide piece each, the warp's next loads taking the next pieces of the same
    rows) rather than side by side along each row.

    Along the rows, the lanes of one transposing store ``dst[(c + e) * LDS + r]`` cover 32 / (bk / vec) rows
    and so 32 / (bk / vec) banks: a (bk / vec)-way conflict (2-way for bk = 8, vec = 4; Nsight Compute
    counted 16.8 M conflicted store wavefronts of 41.9 M at 4096³). Across the rows they hit 32 banks; each
    load instruction then reads part of 32 sectors, whose rest the same warp's next loads take (from L1).
    Used for 4-wide loads when the tile's rows are a multiple of 32, hold more than one vector, and each
    thread's loads cover whole rows (loads per thread a multiple of bk / vec). H200, 2026-12-01:
    ``benchmarks/results/gemm_fma_serpentine_h200.json``.
    """
    g = _operand_geometry(op, which)
    rows = s.bm if which == "A" else s.bn
    per_row = s.bk // vec
    assert s.threads % 32 == 0, "rule warp_is_32_threads: whole warps (the lane mapping assumes them)"
    loads = tile_loads(s, which, vec)
    return (g["transposed"] and vec == 4 and rows % 32 == 0 and per_row > 1 and loads % per_row == 0
            and not _uneven(s, which, vec))


def _tile_index(g: dict, across_lanes: bool, comments: bool) -> tuple[str, ...]:
    """C lines for (r, c) of load ``i`` of a tile: r along the strided dim, c (a multiple of the vector
    width) along the contiguous one. Pieces are numbered ``idx = tid + i * THREADS`` along the rows, or with
    ``across_lanes`` a warp's 32 lanes take 32 consecutive rows and its loads i, i+1, … consecutive pieces
    of them."""
    per = f"({g['contig']} / {g['v']})"
    if across_lanes:
        r = f"const int r = (warp_id + (i / {per}) * (THREADS / 32)) * 32 + lane;"
        c = f"const int c = (i % {per}) * {g['v']};"
        notes = ("  // a warp's lanes on 32 consecutive rows", "  // its loads walk along them")
        first: tuple[str, ...] = ()
    else:
        r = f"const int r = idx / {per};"
        c = f"const int c = (idx % {per}) * {g['v']};"
        notes = ("              // strided index", "  // contiguous index")
        first = ("const int idx = tid + i * THREADS;",)
    return (*first, r + notes[0], c + notes[1]) if comments else (*first, r, c)


def _load_global(w: Writer, op: GemmOp, dt: dtypes.DType, s: GemmSchedule, which: str, k0: str,
                 vec: int) -> None:
    g = _operand_geometry(op, which)
    stage = "a_stage" if which == "A" else "b_stage"
    layout = op.layout_a if which == "A" else op.layout_b
    w(f"// global -> registers: {which} tile ({layout}-major), {g['v']}-wide loads along its "
      f"contiguous dim, zero outside the matrix")
    with w.block(""):
        w(f"const int k0 = {k0};")
        w("#pragma unroll")
        with w.block(f"for (int i = 0; i < {g['loads']}; ++i)"):
            w(*_tile_index(g, _rows_across_lanes(op, s, which, vec), comments=True))
            if _uneven(s, which, vec):
                _past_tile(w, g, f"{g['loads']} - 1")
            w(f"const bool in_range = {g['bound']};")
            _emit_vector_load(w, dt, vec, g["ptr"], f"{stage}[i * {g['v']}", "in_range")


def _emit_vector_load(w: Writer, dt: dtypes.DType, vec: int, ptr: str, dst: str, cond: str) -> None:
    """Load ``vec`` elements at ``ptr`` (or zeros when not ``cond``) into dst[...] as float."""
    if vec == 1:
        w(f"{dst}] = {cond} ? {dt.to_acc(f'*({ptr})')} : 0.f;")
        return
    vt = VEC_TYPES[(dt.c_type, vec)]
    zero = f"make_{vt}({', '.join(['0'] * vec)})"
    w(f"{vt} v = {zero};",
      f"if ({cond}) v = *reinterpret_cast<const {vt}*>({ptr});")
    for e in range(vec):
        w(f"{dst} + {e}] = {dt.to_acc(f'v.{COMPONENTS[e]}')};")


def _store_shared(w: Writer, op: GemmOp, s: GemmSchedule, which: str, stage: str, vec: int) -> None:
    g = _operand_geometry(op, which)
    stage_reg = "a_stage" if which == "A" else "b_stage"
    base = "As" if which == "A" else "Bs"
    how = "transposed to K-outer" if g["transposed"] else "K-outer as loaded"
    w(f"// registers -> shared: {which} tile, {how}")
    with w.block(""):
        w(f"float* const dst = {base};" if stage == "0" else f"float* const dst = {base} + ({stage}) * BK * {g['ld']};")
        w("#pragma unroll")
        with w.block(f"for (int i = 0; i < {g['loads']}; ++i)"):
            w(*_tile_index(g, _rows_across_lanes(op, s, which, vec), comments=False))
            if _uneven(s, which, vec):
                _past_tile(w, g, f"{g['loads']} - 1")
            v = g["v"]
            if g["transposed"]:
                w("#pragma unroll",
                  f"for (int e = 0; e < {v}; ++e) dst[(c + e) * {g['ld']} + r] = {stage_reg}[i * {v} + e];")
            elif vec == 4:
                w(f"*reinterpret_cast<float4*>(&dst[r * {g['ld']} + c]) = "
                  f"*reinterpret_cast<const float4*>(&{stage_reg}[i * 4]);")
            else:
                w("#pragma unroll",
                  f"for (int e = 0; e < {v}; ++e) dst[r * {g['ld']} + c + e] = {stage_reg}[i * {v} + e];")


def _compute(w: Writer, s: GemmSchedule, stage: str, cm: int, cn: int) -> None:
    w("// compute: rank-1 updates of the RMxRN thread tile from shared-memory fragments")
    with w.block(""):
        off_a = "" if stage == "0" else f" + ({stage}) * BK * LDS_A"
        off_b = "" if stage == "0" else f" + ({stage}) * BK * LDS_B"
        w(f"const float* const as = As{off_a};",
          f"const float* const bs = Bs{off_b};",
          "#pragma unroll UNROLL")
        with w.block("for (int kk = 0; kk < BK; ++kk)"):
            w("alignas(16) float a_frag[RM];  // read 4 at a time from shared memory",
              "alignas(16) float b_frag[RN];")
            for frag, chunk, width, lanes, src, ld, base, n in (
                    ("a_frag", "CM", cm, "LANES_M", "as", "LDS_A", "frag_m", "RM"),
                    ("b_frag", "CN", cn, "LANES_N", "bs", "LDS_B", "frag_n", "RN")):
                w("#pragma unroll")
                with w.block(f"for (int s = 0; s < {n} / {chunk}; ++s)"):
                    src_at = f"{src}[kk * {ld} + {base} + s * {lanes} * {chunk}]"
                    if width == 1:
                        w(f"{frag}[s] = {src_at};")
                    else:
                        vt = f"float{width}"
                        w(f"*reinterpret_cast<{vt}*>(&{frag}[s * {chunk}]) = "
                          f"*reinterpret_cast<const {vt}*>(&{src_at});")
            _rank1_update(w, s, "a_frag", "b_frag")


def _epilogue(w: Writer, op: GemmOp, dt: dtypes.DType, vc: int) -> None:
    t = dt.c_type
    w("// ---- epilogue: C = alpha * acc" + (" + beta * C" if op.read_c else " (C is never read)")
      + f", {'VC-wide' if vc > 1 else 'scalar'} stores ----")
    w("#pragma unroll")
    with w.block("for (int i = 0; i < RM; ++i)"):
        w("const int gm = block_m + frag_m + (i / CM) * (LANES_M * CM) + i % CM;",
          "if (gm >= M) continue;",
          f"{t}* const c_row = C + (long long)gm * ldc;",
          "#pragma unroll")
        with w.block("for (int s = 0; s < RN / CN; ++s)"):
            w("const int gn = block_n + frag_n + s * (LANES_N * CN);")
            if vc > 1:
                vt = VEC_TYPES[(t, vc)]
                w("// a VC-wide piece is wholly in or out of range: N is a multiple of VC (op alignment)",
                  "#pragma unroll")
                with w.block("for (int p = 0; p < CN; p += VC)"):
                    w("if (gn + p >= N) break;",
                      f"{vt}* const dst = reinterpret_cast<{vt}*>(c_row + gn + p);")
                    if op.read_c:
                        w(f"const {vt} old = *dst;")
                    w(f"{vt} out;")
                    for e in range(vc):
                        val = f"alpha * acc[i][s * CN + p + {e}]"
                        if op.read_c:
                            val += f" + beta * {dt.to_acc(f'old.{COMPONENTS[e]}')}"
                        w(f"out.{COMPONENTS[e]} = {dt.from_acc(val)};")
                    w("*dst = out;")
            else:
                w("#pragma unroll")
                with w.block("for (int e = 0; e < CN; ++e)"):
                    w("if (gn + e >= N) break;")
                    val = "alpha * acc[i][s * CN + e]"
                    if op.read_c:
                        val += f" + beta * {dt.to_acc('c_row[gn + e]')}"
                    w(f"c_row[gn + e] = {dt.from_acc(val)};")

"""Pieces shared by the GEMM emitters (FMA and tensor-core): kernel names, vector types, block rasterization."""

from __future__ import annotations

from .. import dtypes
from ..codegen.writer import Writer
from ..planning import render_params
from .op import GemmOp
from .schedule import GemmSchedule

VEC_TYPES = {  # (storage C type, width) -> CUDA vector type
    ("float", 4): "float4", ("float", 2): "float2",
    ("unsigned short", 4): "ushort4", ("unsigned short", 2): "ushort2",
}
COMPONENTS = ("x", "y", "z", "w")


def kernel_name(op: GemmOp, s: GemmSchedule) -> str:
    """Deterministic name: op, dtypes (in, accumulate, out), layout, effective vector widths, hash."""
    dt = dtypes.get(op.dtype).short
    beta = "beta" if op.read_c else "nobeta"
    split = f"_sk{s.split_k}{'f' if s.split_k_fused else ''}" if s.split_k > 1 else ""  # f: summed in the kernel
    inputs = ("tf32" if op.precision == "tf32" and s.mma == "wgmma"  # FMA kernels stay exact
              else "tf32x3" if op.precision == "3xtf32" and s.mma == "mma_sync" else dt)
    accumulate = "f64" if s.mma == "dmma" else "f32"  # the FP64 tensor cores sum in float64
    kind = "gemv_" if s.kernel == "gemv" else ""
    c_col = "_ccol" if op.layout_c == "col" else ""
    return (f"tiledsl_{kind}gemm_{inputs}{accumulate}{dt}_{op.layout.lower()}{c_col}_v{op.align_a}{op.align_b}{op.align_c}"
            f"_{beta}_{s.bm}x{s.bn}x{s.bk}{split}_{s.short_hash()}")


def kernel_name_reduce(op: GemmOp, s: GemmSchedule) -> str:
    """Name of the split-K reduction kernel (depends on dtype, beta, split_k and C's layout only)."""
    beta = "beta" if op.read_c else "nobeta"
    c_col = "_ccol" if op.layout_c == "col" else ""
    return f"tiledsl_gemm_splitk_reduce_{dtypes.get(op.dtype).short}_{beta}{c_col}_sk{s.split_k}"


def block_to_tile(w: Writer, tile: str = "blockIdx.x", counts: bool = True) -> None:
    """Emit the C tile ``tile`` -> origin mapping: grouped rasterization of a 1-D tile index (defines
    block_m, block_n; with ``counts``, tiles_m and tiles_n first). ``tile`` is the block index, or the
    loop variable of a persistent block walking several tiles."""
    if counts:
        w("// ---- block -> C tile (grouped rasterization: SWIZZLE block-rows share B tiles in L2) ----",
          "const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;")
    w("const int group = SWIZZLE * tiles_n;",
      f"const int first_m = ({tile} / group) * SWIZZLE;",
      "const int group_rows = min(tiles_m - first_m, SWIZZLE);",
      f"const int tile_m = first_m + ({tile} % group) % group_rows;",
      f"const int tile_n = ({tile} % group) / group_rows;",
      "const int block_m = tile_m * BM, block_n = tile_n * BN;")


def constexpr_table(w: Writer, consts: list[tuple[str, int, str]]) -> None:
    """Emit ``constexpr int NAME = value;  // doc`` lines, the comments aligned."""
    width = max(len(f"constexpr int {n} = {v};") for n, v, _ in consts)
    for n, v, doc in consts:
        w(f"{f'constexpr int {n} = {v};':<{width}}  // {doc}")


def k_range(w: Writer, split_k: int, stream_k: bool = False, slice_out: str = "C += (long long)blockIdx.y * M * ldc;"
            ) -> None:
    """Emit the block's K range [k_begin, k_end) and its K tile count (split-K: one slice per blockIdx.y,
    whose partial sums go to that slice of the float32 workspace, ``slice_out`` the statement pointing at it;
    stream-K: the K tiles [kt_first, kt_last) of the C tile the block is working on)."""
    if stream_k:
        w("const int k_begin = kt_first * BK, k_end = min(K, kt_last * BK);   // this block's share of the tile")
    elif split_k > 1:
        w("// split-K: blockIdx.y owns K range [k_begin, k_end); partial sums go to its workspace slice",
          "const int k_per_split = (int)((K + SPLIT_K * (long long)BK - 1) / (SPLIT_K * BK) * BK);",
          "const int k_begin = (int)min((long long)K, (long long)blockIdx.y * k_per_split);",
          "const int k_end = (int)min((long long)K, (long long)k_begin + k_per_split);",
          slice_out)
    else:
        w("const int k_begin = 0, k_end = K;      // one block covers all of K")


def store_pair(w: Writer, op: GemmOp, dt: dtypes.DType, vc: int, acc: str) -> None:
    """Emit the store of two adjacent columns gn, gn+1 of row ``c_row``: C = alpha·acc (+ beta·C), as one
    2-wide store when ``vc`` is 2 (N even, so the pair is wholly in or out), else two bounded scalar stores.
    ``acc`` is the accumulator expression with ``{e}`` for the column (0 or 1) of the pair."""
    t = dt.c_type
    if vc == 2:
        vt = VEC_TYPES[(t, 2)]
        vals = [f"alpha * {acc.format(e=e)}" for e in range(2)]
        w("if (gn >= N) continue;   // N is even (C alignment): the pair is wholly in or out",
          f"{vt}* const dst = reinterpret_cast<{vt}*>(c_row + gn);")
        if op.read_c:
            w(f"const {vt} old = *dst;")
            vals = [v + f" + beta * {dt.to_acc(f'old.{c}')}" for v, c in zip(vals, "xy", strict=True)]
        w(f"{vt} out;", f"out.x = {dt.from_acc(vals[0])};", f"out.y = {dt.from_acc(vals[1])};", "*dst = out;")
        return
    w("#pragma unroll")
    with w.block("for (int e = 0; e < 2; ++e)"):
        w("if (gn + e >= N) break;")
        val = f"alpha * {acc.format(e='e')}"
        if op.read_c:
            val += f" + beta * {dt.to_acc('c_row[gn + e]')}"
        w(f"c_row[gn + e] = {dt.from_acc(val)};")


def fused_arrival(w: Writer) -> None:
    """Emit the fused split-K's arrival: a ticket per group of columns (grid x) and rows (grid z); every block but
    the last of the group's SPLIT_K returns, the last zeroes the ticket for the next launch."""
    w("// ---- split-K, fused: take this column group's ticket; the last of its SPLIT_K blocks finishes C ----",
      "__shared__ bool last_block;",
      "__threadfence();                     // this block's partial sums are visible device-wide before its ticket",
      "__syncthreads();")
    with w.block("if (threadIdx.x == 0)"):
        w("unsigned int* const ticket = tickets + (long long)blockIdx.z * gridDim.x + blockIdx.x;",
          "last_block = atomicAdd(ticket, 1u) == SPLIT_K - 1;",
          "if (last_block) *ticket = 0u;      // every slice has arrived: zero again for the next launch")
    w("__syncthreads();",
      "if (!last_block) return;",
      "__threadfence();                     // the other slices' partial sums are read after their tickets")


def gemv_kernel_head(w: Writer, op: GemmOp, s: GemmSchedule, p) -> str:
    """Emit a GEMV-style kernel's split-K comment and ``extern "C"`` line; return its signature (the block's head) from
    the plan ``p``'s parameters (``split_k_fused``: W, the workspace, before C)."""
    if s.split_k_fused:
        w("// split-K, fused: W is the float32 workspace [SPLIT_K][M][N]; the last of a column group's SPLIT_K blocks",
          "// to arrive (tickets[blockIdx.z][blockIdx.x]) sums it into C")
    elif s.split_k > 1:
        w(f"// split-K: C is the float32 workspace [SPLIT_K][M][ldc]; {kernel_name_reduce(op, s)} sums it")
    w('extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)')
    return f"{p.kernel_name}({render_params(p.params, breaks=(4,) if s.split_k_fused else (3,))})"


def gemv_k_range(w: Writer, s: GemmSchedule) -> None:
    """Emit a GEMV-style block's K range (:func:`k_range`); with ``split_k_fused`` its slice's partial sums go to P,
    its slice of W."""
    if s.split_k_fused:
        k_range(w, s.split_k, slice_out="float* const P = W + (long long)blockIdx.y * M * N;  // this slice's "
                                        "partial sums")
    else:
        k_range(w, s.split_k)

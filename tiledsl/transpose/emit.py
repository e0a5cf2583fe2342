"""Transpose emitter: a pure function (TransposeOp, TransposeSchedule) -> KernelSource.

Structure of the kernel (the transpose ladder of ``tiledsl.transpose.schedule``):

1. block → tile: ``blockIdx.x`` walks the TILE×TILE tiles of one matrix in groups of ``swizzle``
   tile-rows (GEMM's grouped rasterization), ``blockIdx.y`` strides over the batch;
2. ``shared`` variant, four named stages per tile:
   stage 1 X → registers (each thread: ``rows_per_thread`` rows × a chunk of ``vec`` elements,
   loads ``VI`` elements wide), stage 2 registers → shared tile as loaded, barrier,
   stage 3 shared → registers transposed (column of the tile = row of Y), stage 4 registers → Y
   (stores ``VO`` elements wide). Both global sides are coalesced; ``smem_pad`` spreads the column
   read of stage 3 over the banks;
3. ``naive_read`` / ``naive_write``: one element per access straight from X to Y, a warp walking a
   row of X (reads coalesced) or a row of Y (writes coalesced).

Elements travel as raw bits (``unsigned short`` / ``unsigned int`` / ``unsigned long long``), so
the same text serves every dtype of a width and no conversion can alter a value (NaN payloads,
-0.0 and subnormals survive).
"""

from __future__ import annotations

from .. import rules as R
from ..codegen.writer import Writer
from ..compile import KernelSource
from ..planning import render_params
from .kernel_plan import effective_widths, grid, kernel_name, plan_transpose
from .op import TransposeOp
from .schedule import TRANSPOSE_RULES, TransposeSchedule

__all__ = ["effective_widths", "emit_transpose", "grid", "kernel_name"]

_COMPONENTS = ("x", "y", "z", "w")


def _vector(itemsize: int, width: int) -> tuple[str, int]:
    """(CUDA vector type, elements per component) for a ``width``-element access of ``itemsize`` bytes."""
    nbytes = itemsize * width
    if itemsize == 2 and width == 8:
        return "uint4", 2  # no ushort8: four 32-bit components holding two elements each
    table = {(2, 2): "ushort2", (2, 4): "ushort4", (4, 2): "uint2", (4, 4): "uint4", (8, 2): "ulonglong2"}
    if (itemsize, width) not in table:
        raise ValueError(f"no {nbytes}-byte vector of {itemsize}-byte elements")
    return table[(itemsize, width)], 1


def emit_transpose(op: TransposeOp, s: TransposeSchedule) -> KernelSource:
    """Emit the CUDA C of ``op`` under ``s``. Pure: same inputs, same text.

    Raises:
        ScheduleError: ``s`` breaks a rule that needs the op (rule ``registers_fit_thread``).

    Returns:
        KernelSource with ``block=s.block`` and static shared memory only. Launch on :func:`grid`
        with arguments ``(x, y, rows, cols, batch, x_batch, x_row, x_col, y_batch, y_row, y_col)``
        (int32 sizes, int64 element strides).
    """
    p = plan_transpose(op, s)  # checks the op-scope rules
    vi, vo = effective_widths(op, s)
    word = p.detail
    name = p.kernel_name
    w = Writer()
    w(f"// tiledsl transpose: Y[b][j][i] = X[b][i][j]; X is {'B x ' if len(op.shape) == 3 else ''}R x C "
      "(any strides), Y is C x R",
      f"// dtype {op.dtype}, moved as raw {8 * op.itemsize}-bit words; variant {s.variant}",
      f"// schedule: {s.to_dict()}")
    w.blank()
    w("// ---- schedule (tiledsl.TransposeSchedule) ----")
    consts = [
        ("TILE", s.tile, "tile: side of the square tile, elements"),
        ("ROWS_PER_THREAD", s.rows_per_thread, "rows_per_thread: tile rows each thread moves"),
        ("VEC", s.vec, "vec: elements per thread chunk"),
        ("SMEM_PAD", s.smem_pad, "smem_pad: padding elements per shared-memory row"),
        ("SWIZZLE", s.swizzle, "swizzle: tile-rows per rasterization group"),
        ("SHARED", int(s.shared), f'variant == "shared" ({s.variant})'),
        ("THREADS_X", "TILE / VEC", f"= {s.block[0]} threads along a tile row (blockDim.x)"),
        ("THREADS_Y", "TILE / ROWS_PER_THREAD",
         f"= {s.block[1]} thread rows (blockDim.y); row i of a thread is ty + i*THREADS_Y"),
        ("THREADS", "THREADS_X * THREADS_Y", f"= {s.threads} threads per block"),
    ]
    if s.shared:  # the naive variants move one element per access
        consts += [("VI", vi, f"elements per load of X = min(VEC, op.align_in={op.align_in})"),
                   ("VO", vo, f"elements per store of Y = min(VEC, op.align_out={op.align_out})")]
    width = max(len(f"constexpr int {n} = {v};") for n, v, _ in consts)
    for n, v, doc in consts:
        w(f"{f'constexpr int {n} = {v};':<{width}}  // {doc}")
    for line in R.static_asserts(TRANSPOSE_RULES):
        w(line)
    w(f"typedef {word} word;  // one {op.dtype} element as raw bits")
    w.blank()
    w("// min 1 block per SM: registers are capped only by the thread count (ptxas otherwise may trade",
      "// registers for occupancy and spill)",
      'extern "C" __global__ void __launch_bounds__(THREADS, 1)')
    with w.block(f"{name}({render_params(p.params, breaks=(5, 8))})"):
        w("// ---- block -> tile: blockIdx.x walks the tiles of one matrix in groups of SWIZZLE tile-rows",
          "//      (down a group's tile-rows first, then along its tile-columns) ----",
          "const int tiles_r = (rows + TILE - 1) / TILE, tiles_c = (cols + TILE - 1) / TILE;",
          "const int swizzle = min(SWIZZLE, tiles_r);  // so group <= tiles_r * tiles_c = gridDim.x: no int overflow",
          "const int group = swizzle * tiles_c;  // blocks per group of `swizzle` tile-rows",
          "const int first_r = (blockIdx.x / group) * swizzle;",
          "const int group_rows = min(tiles_r - first_r, swizzle);",
          "const int r0 = (first_r + (blockIdx.x % group) % group_rows) * TILE;  // first row of X = first column of Y",
          "const int c0 = ((blockIdx.x % group) / group_rows) * TILE;  // first column of X = first row of Y",
          "const int tx = threadIdx.x, ty = threadIdx.y;")
        if s.shared:
            w("__shared__ word tile[TILE][TILE + SMEM_PAD];")
        w("// blockIdx.y strides over the batch (gridDim.y <= 65535)")
        with w.block("for (int b = blockIdx.y; b < batch; b += gridDim.y)"):
            w("const word* const xb = x + b * x_batch;",
              "word* const yb = y + b * y_batch;")
            if s.shared:
                _shared_body(w, op, vi, vo)
            elif s.variant == "naive_read":
                _naive_read(w)
            else:
                _naive_write(w)
    return KernelSource(name=name, source=w.text(), block=s.block, dynamic_smem_bytes=0)


def _naive_read(w: Writer) -> None:
    w("// ---- naive, read-coalesced (ladder 1.1): a warp reads along a row of X, writes a column of Y ----",
      "#pragma unroll")
    with w.block("for (int i = 0; i < ROWS_PER_THREAD; ++i)"):
        w("const int r = r0 + ty + i * THREADS_Y;  // row of X",
          "const int c = c0 + tx;                  // column of X, consecutive across the warp",
          "if (r < rows && c < cols) yb[c * y_row + r * y_col] = xb[r * x_row + c * x_col];")


def _naive_write(w: Writer) -> None:
    w("// ---- naive, write-coalesced (ladder 1.2): a warp writes along a row of Y, reads a column of X ----",
      "#pragma unroll")
    with w.block("for (int i = 0; i < ROWS_PER_THREAD; ++i)"):
        w("const int yr = c0 + ty + i * THREADS_Y;  // row of Y = column of X",
          "const int yc = r0 + tx;                  // column of Y = row of X, consecutive across the warp",
          "if (yr < cols && yc < rows) yb[yr * y_row + yc * y_col] = xb[yc * x_row + yr * x_col];")


def _shared_body(w: Writer, op: TransposeOp, vi: int, vo: int) -> None:
    w("// the thread's ROWS_PER_THREAD x VEC elements, in registers; those outside X stay unset and land in",
      "// tile cells that stage 4 never writes out",
      "word v[ROWS_PER_THREAD][VEC];")
    w("// ---- stage 1: X -> registers; thread owns rows ty + i*THREADS_Y, columns tx*VEC .. tx*VEC+VEC-1 ----")
    if vi > 1:
        w(f"// {vi * op.itemsize}-byte loads: x_col == 1, and VI divides x_row, x_batch and cols "
          "(op.align_in), so a load is wholly in or out of range")
    w("#pragma unroll")
    with w.block("for (int i = 0; i < ROWS_PER_THREAD; ++i)"):
        w("const int r = r0 + ty + i * THREADS_Y;",
          "#pragma unroll")
        with w.block("for (int j = 0; j < VEC; j += VI)"):
            w("const int c = c0 + tx * VEC + j;")
            with w.block("if (r < rows && c < cols)"):
                if vi == 1:
                    w("v[i][j] = xb[r * x_row + c * x_col];")
                else:
                    vt, per = _vector(op.itemsize, vi)
                    w(f"const {vt} q = *reinterpret_cast<const {vt}*>(xb + r * x_row + c);")
                    for e in range(vi):
                        comp = f"q.{_COMPONENTS[e // per]}"
                        if per == 2:
                            comp = f"(word)({comp} >> {16 * (e % 2)})" if e % 2 else f"(word)({comp} & 0xffffu)"
                        w(f"v[i][j + {e}] = {comp};")
    w("// ---- stage 2: registers -> shared tile, in X's orientation ----",
      "#pragma unroll",
      "for (int i = 0; i < ROWS_PER_THREAD; ++i)",
      "  #pragma unroll",
      "  for (int e = 0; e < VEC; ++e) tile[ty + i * THREADS_Y][tx * VEC + e] = v[i][e];",
      "__syncthreads();")
    w("// ---- stage 3: shared -> registers, transposed: row ty + i*THREADS_Y of the Y tile is that column",
      "//      of the X tile; consecutive rows of the tile are TILE + SMEM_PAD words apart (SMEM_PAD=1 staggers the banks) ----",
      "#pragma unroll",
      "for (int i = 0; i < ROWS_PER_THREAD; ++i)",
      "  #pragma unroll",
      "  for (int e = 0; e < VEC; ++e) v[i][e] = tile[tx * VEC + e][ty + i * THREADS_Y];")
    w("// ---- stage 4: registers -> Y; thread owns rows c0 + ty + i*THREADS_Y, columns r0 + tx*VEC .. ----")
    if vo > 1:
        w(f"// {vo * op.itemsize}-byte stores: y_col == 1, and VO divides y_row, y_batch and rows (op.align_out)")
    w("#pragma unroll")
    with w.block("for (int i = 0; i < ROWS_PER_THREAD; ++i)"):
        w("const int yr = c0 + ty + i * THREADS_Y;  // row of Y = column of X",
          "#pragma unroll")
        with w.block("for (int j = 0; j < VEC; j += VO)"):
            w("const int yc = r0 + tx * VEC + j;        // column of Y = row of X")
            with w.block("if (yr < cols && yc < rows)"):
                if vo == 1:
                    w("yb[yr * y_row + yc * y_col] = v[i][j];")
                else:
                    vt, per = _vector(op.itemsize, vo)
                    w(f"{vt} q;")
                    for k in range(vo // per):
                        if per == 2:
                            val = f"(unsigned int)v[i][j + {2 * k}] | ((unsigned int)v[i][j + {2 * k + 1}] << 16)"
                        else:
                            val = f"v[i][j + {k}]"
                        w(f"q.{_COMPONENTS[k]} = {val};")
                    w(f"*reinterpret_cast<{vt}*>(yb + yr * y_row + yc) = q;")
    w("__syncthreads();  // the next matrix of the batch reuses the tile")

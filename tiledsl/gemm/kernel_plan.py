"""GEMM plan: the facts of one (GemmOp, GemmSchedule, target) kernel, computed once.

The emitter (``tiledsl.gemm.emit``), the launcher (``tiledsl.gemm.api``), the cost model
(``tiledsl.costmodel.gemm``) and the search read them from here; nothing else computes an effective
vector width, a register cap or the kernel's parameter list.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .. import dtypes
from ..occupancy import occupancy
from ..planning import Param, Plan, Workspace, register_cap
from ..target import Target
from ..tma import TENSOR_MAP_C_TYPE, TensorMap2D
from .emit_common import kernel_name, kernel_name_reduce
from .emit_mma import smem_tile_elems
from .op import GemmOp
from .schedule import GemmSchedule, estimate_registers, gemv_smem_a_bytes, tensor_core_gemv

__all__ = ["GemmDetail", "canonical", "gemv_columns_per_block", "gemv_widths", "grid", "k_major", "kernel_name",
           "kernel_name_reduce", "plan_gemm", "splitk_reduce_plan", "stream_k_split", "tensor_map", "tma_box",
           "tile_count", "uses_tma", "workspace_align"]

SPLITK_REDUCE_THREADS = 256  # threads per block of the split-K reduction (one per element of C)
STREAM_K_MAX_SHARE = 8
"""stream-K on a grid smaller than one wave: at most this many stream-K blocks per C tile (each block's share is
then at least 1/8 of a tile's K iterations, so one tile is touched by at most 9 blocks; the block finishing a tile
sums every share's partial tile, so more shares cost it more than they save)."""


@dataclass(frozen=True)
class StreamKSplit:
    """How a ``stream_k`` GEMM launch divides its work (CUTLASS's data-parallel + stream-K hybrid).

    Attributes:
        tiles: C tiles of the op.
        slots: blocks running at once: SMs × resident blocks per SM (:func:`tiledsl.occupancy.occupancy` with the
            plan's register estimate, at most the ``__launch_bounds__`` cap, and the dynamic shared memory).
        dp_tiles: tiles run one block each over all of K (blocks ``0 .. dp_tiles − 1``).
        sk_blocks: blocks after them sharing the K iterations of the other ``tiles − dp_tiles`` tiles evenly.
    """

    tiles: int
    slots: int
    dp_tiles: int
    sk_blocks: int

    @property
    def sk_tiles(self) -> int:
        """Tiles whose K iterations the stream-K blocks share (one arrival ticket each)."""
        return self.tiles - self.dp_tiles


def stream_k_split(tiles: int, k_iters: int, slots: int) -> StreamKSplit:
    """Divide ``tiles`` C tiles of ``k_iters`` K tiles each over ``slots`` concurrent blocks.

    A whole number of waves runs data-parallel. Otherwise the last full wave and the partial one go to
    stream-K: ``slots`` blocks each take between one and two tiles' worth of K iterations, so every SM
    stays busy to the end and a tile is shared by at most two blocks. With less than one wave, there are at
    most :data:`STREAM_K_MAX_SHARE` stream-K blocks per tile (a tile touched by at most one more). There are never more stream-K blocks than
    iterations (every block's share is non-empty, which the kernel's arrival count relies on).
    """
    full, rem = divmod(tiles, max(slots, 1))
    if rem == 0:
        return StreamKSplit(tiles, slots, tiles, 0)
    dp = (full - 1) * slots if full else 0
    sk_blocks = slots if full else min(slots, tiles * STREAM_K_MAX_SHARE)
    return StreamKSplit(tiles, slots, dp, min(sk_blocks, (tiles - dp) * k_iters))


def tile_count(op: GemmOp, s: GemmSchedule) -> int:
    """Tiles of C that the block tile of ``s`` makes for ``op``: ceil(M/bm)·ceil(N/bn) (K slices not counted)."""
    return -(-op.m // s.bm) * -(-op.n // s.bn)


def _stream_k(op: GemmOp, s: GemmSchedule, target: Target | None, registers: int) -> StreamKSplit:
    """The stream-K division of ``op``'s tiles on ``target`` for a kernel of ``registers`` per thread (the
    estimate, within the ``__launch_bounds__`` cap); without a target, all tiles data-parallel (the
    device-free plan's grid, the work the cost model counts)."""
    tiles = tile_count(op, s)
    if target is None:
        return StreamKSplit(tiles, tiles, tiles, 0)
    resident = occupancy(target, s.threads, registers, _dynamic_smem(op, s)).blocks_per_sm
    return stream_k_split(tiles, -(-op.k // s.bk), target.sm_count * max(resident, 1))


@dataclass(frozen=True)
class GemmDetail:
    """GEMM-specific resolved facts.

    Attributes:
        cm, cn: fragment chunk widths (contiguous rows / columns of a thread's piece of C).
        out_dtype: dtype the main kernel writes ("float32" for split-K's workspace).
        min_blocks_lowered: the schedule's ``min_blocks`` was lowered to 1 because an operand forces
            narrower loads than ``vec`` (more address registers; 1 block rather than spills).
        spill_bytes: estimated spill traffic per thread and K step (8 bytes per register over the cap).
        stream_k: ``stream_k``'s division of the tiles on the plan's target (None without ``stream_k``).
    """

    cm: int
    cn: int
    out_dtype: str
    min_blocks_lowered: bool
    spill_bytes: int
    stream_k: StreamKSplit | None = None


def gemv_columns_per_block(op: GemmOp, s: GemmSchedule) -> int:
    """kernel='gemv': columns of C one block covers: ``col_groups`` groups of ``vec`` (B's load width) per thread
    along a row-major B (N contiguous); ``rn`` per group of ``k_lanes`` lanes along a column-major B (K contiguous:
    one group per warp unless ``k_lanes`` < 32)."""
    if tensor_core_gemv(s):  # the tensor-core kernel: rn columns per warp, either layout of B
        return s.bn // 32 * s.rn
    return s.bn * gemv_widths(op, s)[1] * s.col_groups if op.layout_b == "row" else s.bn // s.k_lanes * s.rn


def gemv_widths(op: GemmOp, s: GemmSchedule) -> tuple[int, int]:
    """kernel='gemv': (A, B) elements per load. Row-major B: ``vec`` columns of B per load; A along K, up to
    4 wide where A is row-major and aligned (one load covers 4 k steps), else scalar. Column-major B: ``vec``
    K elements of B per load, and of A when A is row-major and as aligned, else scalar A loads."""
    vb = min(s.vec, op.align_b)
    row_a = op.layout_a == "row"
    if op.layout_b == "row":
        return (min(4, op.align_a) if row_a else 1), vb
    return (vb if row_a and op.align_a >= vb else 1), vb


def grid(op: GemmOp, s: GemmSchedule, sm_count: int | None = None) -> tuple[int, int, int]:
    """One block per bm×bn tile of C (x), times split_k slices of K (y). kernel='gemv': one block per
    :func:`gemv_columns_per_block` columns (x), K slices (y), bm-row groups of C (z). ``persistent``: one
    block per SM (``sm_count``), at most one per tile; without ``sm_count`` the tile count (the work the
    cost model counts)."""
    if s.kernel == "gemv":
        return (-(-op.n // gemv_columns_per_block(op, s)), s.split_k, -(-op.m // s.bm))
    tiles = tile_count(op, s)
    if s.persistent and sm_count:
        return (max(1, min(tiles, sm_count)), 1, 1)
    return (tiles, s.split_k, 1)


def uses_tma(s: GemmSchedule) -> bool:
    """True when the kernel loads A and B with TMA tensor copies: wgmma with a producer warpgroup, one of
    whose threads issues them."""
    return s.mma == "wgmma" and s.warp_specialize


def k_major(op: GemmOp, which: str) -> bool:
    """True when operand ``which`` ("A" or "B") is contiguous along K (A row-major, B column-major)."""
    return (op.layout_a == "row") if which == "A" else (op.layout_b == "col")


def tma_box(op: GemmOp, s: GemmSchedule, which: str) -> tuple[int, int, int]:
    """(box_inner, box_outer, copies per stage) of operand ``which``'s TMA copies: one 64-element
    (128-byte) wide box of all bm (bn) rows when K-major; 64×64 boxes side by side when M/N-major, one per
    64 columns of the tile (the 128-byte swizzle spans at most 128 bytes of the contiguous dimension)."""
    rows = s.bm if which == "A" else s.bn
    return (s.bk, rows, 1) if k_major(op, which) else (64, s.bk, rows // 64)


def tensor_map(op: GemmOp, s: GemmSchedule, which: str, ld: int) -> TensorMap2D:
    """The tensor map geometry of operand ``which`` with leading dimension ``ld`` (elements)."""
    mn = op.m if which == "A" else op.n
    inner, outer = (op.k, mn) if k_major(op, which) else (mn, op.k)
    box_inner, box_outer, _ = tma_box(op, s, which)
    return TensorMap2D(op.dtype, inner, outer, ld * dtypes.get(op.dtype).itemsize, box_inner, box_outer)


def workspace_align(n: int) -> int:
    """Widest vector (1, 2, 4) of the split-K float32 workspace, whose rows are N elements long."""
    return 4 if n % 4 == 0 else 2 if n % 2 == 0 else 1


def canonical(op: GemmOp, s: GemmSchedule) -> GemmSchedule:
    """The schedule emitting the same machine code for ``op`` with ``vec`` no wider than the op allows.

    A and B are loaded ``min(vec, align_a)`` / ``min(vec, align_b)`` wide, and ``min_blocks`` is kept
    only when both equal ``vec`` (else ``__launch_bounds__(THREADS, 1)``). So every ``vec`` ≥
    max(align_a, align_b) gives the same loads: clamp it there, and set ``min_blocks`` to 1 where the
    emitter ignores it.
    """
    if s.kernel == "gemv":  # B is read min(vec, align_b) wide (gemv_widths): clamp vec there; A's width follows
        vec = min(s.vec, op.align_b)  # B's; the knobs the kernel ignores keep their values
        return s if vec == s.vec else replace(s, vec=vec)
    va, vb = min(s.vec, op.align_a), min(s.vec, op.align_b)
    vec = min(s.vec, max(op.align_a, op.align_b))
    min_blocks = s.min_blocks if (va, vb) == (s.vec, s.vec) else 1
    if (vec, min_blocks) == (s.vec, s.min_blocks):
        return s
    return replace(s, vec=vec, min_blocks=min_blocks)


def splitk_reduce_plan(op: GemmOp, s: GemmSchedule, target: Target | None) -> Plan:
    """The plan of the split-K reduction kernel (one thread per element of C)."""
    t = dtypes.get(op.dtype).c_type
    # W is not __restrict__: as a dependent launch (tiledsl.dependent) the kernel may start while the main kernel still
    # writes W, so its loads must not take the read-only path (ld.global.nc assumes data constant for the kernel's life)
    params = [Param("W", "const float*", "workspace"), Param("C", f"{t}* __restrict__", "c"),
              Param("M", "int", "m"), Param("N", "int", "n"), Param("ldc", "long long", "ldc"),
              Param("alpha", "float", "alpha")]
    if op.read_c:
        params.append(Param("beta", "float", "beta"))
    threads = SPLITK_REDUCE_THREADS
    return Plan(
        family="gemm", op=op, schedule=s, canonical=s, arch=target and target.arch,
        device=target and target.name, kernel_name=kernel_name_reduce(op, s), block=(threads, 1, 1),
        grid=(-(-(op.m * op.n) // threads), 1, 1), grid_rule=f"(ceil(M·N / {threads}), 1, 1)",
        dynamic_smem_bytes=0, static_smem_bytes=0, vec=(("W", 1), ("C", 1)), min_blocks=1,
        max_registers=register_cap(threads, 1), est_registers=16, params=tuple(params))


def _dynamic_smem(op: GemmOp, s: GemmSchedule) -> int:
    """Dynamic shared memory the emitter allocates (mma.sync: the tile layout of this op's operands; the GEMV
    kernel: ``smem_a``'s slice of A, which depends on K)."""
    if s.kernel == "gemv":  # only smem_a's staged slice of A (none on the tensor cores: rule gemv_mma_plain)
        return gemv_smem_a_bytes(op.k, s, col_b=op.layout_b == "col")
    if s.mma == "mma_sync":
        a_elems, b_elems = smem_tile_elems(op, s)
        return s.stages * (a_elems + b_elems) * dtypes.get(op.dtype).itemsize
    return s.smem_bytes()


def plan_gemm(op: GemmOp, s: GemmSchedule, target: Target | None = None) -> Plan:
    """The :class:`~tiledsl.plan.Plan` of ``op`` tiled by ``s`` (on ``target``; None: device-free).

    The kernel is shape-generic (M, N, K and the leading dimensions are parameters); the grid is that of
    ``op``'s sizes. With ``split_k`` > 1 the main kernel writes float32 partial products to a
    (split_k, M, N) workspace and :attr:`Plan.followup` sums them into C; with ``split_k_fused`` (GEMV-style
    kernel) the kernel takes that workspace as ``W`` beside C and an arrival ticket per block of columns
    (``tickets``), and no followup.
    """
    dt = dtypes.get(op.dtype)
    tensor_cores = s.mma != "fma"
    if tensor_cores:  # 16-byte copies where the operands' alignment allows (tiledsl.gemm.emit_mma)
        vmax = 16 // dt.itemsize
        va, vb = min(vmax, op.align_a), min(vmax, op.align_b)
    elif s.kernel == "gemv":
        va, vb = gemv_widths(op, s)
    else:
        va, vb = min(s.vec, op.align_a), min(s.vec, op.align_b)
    cm, cn = min(4, s.rm), min(4, s.rn)
    c_max = 2 if tensor_cores else cn  # mma.sync fragments hold 2 adjacent columns of C
    if s.kernel == "gemv":  # a thread's vb columns (row-major B), or one column per warp; a column-major C: scalar
        # (the two-kernel split-K's row-major workspace excepted)
        c_max = vb if (op.layout_b == "row" and s.mma == "fma"  # the tensor-core GEMVs store one element at a time
                       and (op.layout_c == "row" or s.split_k > 1 and not s.split_k_fused)) else 1
    fused = s.split_k_fused  # split-K finished in the kernel: C is the kernel's own output, the partials a buffer
    if s.split_k > 1 and not fused:  # the main kernel writes float32 partial sums; the followup finishes C
        out_dtype, vc, read_c = "float32", min(workspace_align(op.n), c_max), False
    else:
        out_dtype, vc, read_c = op.dtype, min(op.align_c, c_max), op.read_c
    lowered = not tensor_cores and s.kernel == "tiled" and (va, vb) != (s.vec, s.vec)
    min_blocks = 1 if lowered else s.min_blocks
    cap = register_cap(s.threads, min_blocks) // 8 * 8
    # a GEMV thread keeps col_groups groups of vb columns: as many accumulators as col_groups·vb-wide loads
    want = estimate_registers(s, va, vb * s.col_groups, col_b=op.layout_b == "col")
    spill = max(0, want - cap) * 8
    t = dt.c_type
    two_kernels = s.split_k > 1 and not fused
    c_param = Param("C", f"{dtypes.get(out_dtype).c_type}* __restrict__", "workspace" if two_kernels else "c")
    if fused:  # the slices' float32 partial sums, (split_k, M, N) row-major, before C
        c_param = (Param("W", "float* __restrict__", "workspace"), c_param)
    sizes = [Param("M", "int", "m"), Param("N", "int", "n"), Param("K", "int", "k")]
    tail = [Param("ldc", "long long", "n" if two_kernels else "ldc"),
            Param("alpha", "float", "one" if two_kernels else "alpha")]
    if uses_tma(s):  # A and B reach the kernel as tensor maps (address, extents and pitch inside)
        params = [Param("tmap_a", TENSOR_MAP_C_TYPE, "tmap_a"), Param("tmap_b", TENSOR_MAP_C_TYPE, "tmap_b"),
                  c_param, *sizes, *tail]
    else:
        params = [Param("A", f"const {t}* __restrict__", "a"), Param("B", f"const {t}* __restrict__", "b"),
                  *(c_param if fused else (c_param,)), *sizes, Param("lda", "long long", "lda"),
                  Param("ldb", "long long", "ldb"), *tail]
    if read_c:
        params.append(Param("beta", "float", "beta"))
    workspace: tuple[Workspace, ...] = ()
    followup = None
    vec_w: tuple[tuple[str, int], ...] = ()
    if s.split_k > 1:
        workspace = (Workspace("workspace", "float32", s.split_k * op.m * op.n),)
        if not fused:
            followup = splitk_reduce_plan(op, s, target)
    if fused:  # one arrival ticket per block of columns and group of rows (the grid's x·z)
        g = grid(op, s)
        params.append(Param("tickets", "unsigned int* __restrict__", "gemm_tickets"))
        workspace += (Workspace("gemm_tickets", "uint32", g[0] * g[2], "counters"),)
        vec_w = (("W", vb if op.layout_b == "row" and s.mma == "fma" else 1),)  # a thread's VB columns of a partial
        # row; one (column-major B, or the tensor-core kernel)
    sk = _stream_k(op, s, target, min(cap, want)) if s.stream_k else None
    if sk is not None:  # two partial tiles per stream-K block, one arrival ticket per shared tile
        params += [Param("dp_tiles", "int", "const", sk.dp_tiles), Param("sk_blocks", "int", "const", sk.sk_blocks),
                   Param("partials", "float* __restrict__", "sk_partials"),
                   Param("tickets", "unsigned int* __restrict__", "gemm_tickets")]
        workspace = (Workspace("sk_partials", "float32", max(1, 2 * sk.sk_blocks * s.bm * s.bn)),
                     Workspace("gemm_tickets", "uint32", max(1, sk.sk_tiles), "counters"))
    return Plan(
        family="gemm", op=op, schedule=s, canonical=canonical(op, s), arch=target and target.arch,
        device=target and target.name, kernel_name=kernel_name(op, s), block=(s.threads, 1, 1),
        grid=(sk.dp_tiles + sk.sk_blocks, 1, 1) if sk is not None else grid(
            op, s, target.sm_count if target is not None else None),
        grid_rule=(f"(ceil(N/{gemv_columns_per_block(op, s)}), split_k={s.split_k}, ceil(M/{s.bm}))"
                   if s.kernel == "gemv" else
                   f"(dp_tiles + sk_blocks, 1, 1): stream-K, dp_tiles={sk.dp_tiles} of {sk.tiles} tiles one block "
                   f"each, {sk.sk_blocks} blocks share the rest's K iterations ({sk.slots} slots)" if sk is not None
                   else
                   f"(min(ceil(M/{s.bm})·ceil(N/{s.bn}), SMs), 1, 1): persistent blocks walk the tiles" if s.persistent
                   else f"(ceil(M/{s.bm})·ceil(N/{s.bn}), split_k={s.split_k}, 1)"),
        dynamic_smem_bytes=_dynamic_smem(op, s), static_smem_bytes=0,
        vec=(("A", va), ("B", vb), ("C", vc), *vec_w), min_blocks=min_blocks, max_registers=cap, est_registers=want,
        params=tuple(params), workspace=workspace, followup=followup,
        detail=GemmDetail(cm=cm, cn=cn, out_dtype=out_dtype, min_blocks_lowered=lowered, spill_bytes=spill,
                          stream_k=sk))

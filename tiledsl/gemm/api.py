"""``tiledsl.gemm``: arrays in, verified layout/alignment analysis, kernel launched, an array of the input's library out."""

from __future__ import annotations

from dataclasses import replace

from .. import cache, runtime, tma
from ..errors import SpecError, SpecTypeError
from ..launch import Built, Launcher, WorkspaceSet, build, resolve_schedule, workspace_ptr
from ..lru import LRU
from ..planning import Workspace
from ..runtime import (
    alignment_elems,
    as_cupy,
    as_gpu,
    byte_extent,
    check_no_overlap,
    element_strides,
    may_overlap,
    returns_like_inputs,
)
from ..spec import widest_dividing
from ..target import Target
from ..tma import encode
from ..transpose.family import TRANSPOSE
from ..transpose.op import MAX_ACCESS_BYTES, TransposeOp, widest_vector
from .family import GEMM, default_schedule, effective_op, runs_as_row
from .kernel_plan import tensor_map, uses_tma
from .op import GEMM_DTYPES, PRECISIONS, GemmOp
from .schedule import GemmSchedule

__all__ = ["default_schedule", "gemm"]


def gemm(a, b, c=None, *, alpha: float = 1.0, beta: float = 0.0,
         schedule: GemmSchedule | None = None, precision: str = "ieee"):
    """C = alpha · A @ B + beta · C on the GPU.

    Args:
        a: (M, K) GPU array (CuPy, ``__cuda_array_interface__`` or DLPack, e.g. a torch CUDA tensor),
            float32, float16 or bfloat16 (bfloat16 as a torch tensor: CuPy has no bfloat16, and the
            result is then a torch tensor); row- or column-major with any leading dimension (``a.T``
            and slices like ``a[:, 1:]`` run without a copy). An operand with no unit stride is copied.
        b: (K, N) GPU array, same dtype.
        c: optional (M, N) output of the same dtype, updated in place; required when beta ≠ 0.
        alpha, beta: scalars (float32 in the kernel). beta = 0 never reads ``c``.
        schedule: a :class:`GemmSchedule`; None picks one for the shape (:func:`default_schedule`).
        precision: float32 inputs only: "ieee" (exact FMA, the default) or "tf32" (tensor cores on an sm_90
            GPU, inputs read with a 10-bit mantissa: expect a relative error near 1e-3, as with torch's
            ``allow_tf32``; ``docs/gemm.md``). tf32 reads both operands K-major: an M- or N-major operand
            (``a.T``, a row-major B) is first copied K-major (one extra read and write of it). Where no tf32
            kernel applies (another GPU, misaligned operands) the product is computed exactly. "3xtf32": each input
            split into two TF32 parts and three tensor-core products per term (CUTLASS's 3xTF32: about 21 of
            float32's 24 bits per product; an input of magnitude at least 3.40274e38 or infinite makes the outputs
            it reaches NaN) for x @ W and x @ W.T with 9 to 16 rows
            (A row-major, B either layout, e.g. ``w.T`` of a torch Linear weight, 16-byte aligned, sm_80 or newer;
            ``docs/gemm.md``); every other product is computed exactly.

    Returns:
        The (M, N) array holding C: ``c`` itself when given, else a new array of the inputs' library (a
        torch tensor on the same device when ``a`` or ``b`` is a torch tensor, for every dtype; a CuPy
        array otherwise).

    Streams: CuPy operands run on CuPy's current stream; with a torch CUDA tensor among the arrays the call
    runs on torch's current stream of that tensor's device (``with torch.cuda.stream(s):`` and
    ``torch.cuda.graph`` apply), and a new result is allocated with ``torch.empty``.

    Raises:
        SpecTypeError: an operand is a NumPy (host) array or not a GPU array.
        SpecError: an operand is not 2-D, inner dimensions differ, dtypes are unsupported or mixed,
            ``c`` has the wrong shape or dtype, or beta ≠ 0 without ``c``.
        ScheduleError / ResourceError: the schedule breaks a rule or exceeds the device.

    Example:
        >>> c = tiledsl.gemm(cupy.random.rand(512, 256, dtype="float32"),
        ...                  cupy.random.rand(256, 128, dtype="float32"))  # doctest: +SKIP
    """
    if precision not in PRECISIONS:
        raise SpecError(f"precision={precision!r} must be one of {PRECISIONS}")
    out, key = _cached_run(_call_key(a, b, c, beta, schedule, precision), c, alpha, beta)
    if out is not None:
        return out
    return _gemm_slow(a, b, c, alpha, beta, schedule, None if key is None else key[0], precision)


def gemm_as_rows(a, b, c, schedule: GemmSchedule, *, beta: float = 0.0) -> None:
    """C = A @ B + beta · C for a few-column product, computed as ``tiledsl.gemm(a, b, c)`` computes it with
    ``schedule=None`` where ``tiledsl.gemm.family.runs_as_row`` holds: the rows Cᵀ = Bᵀ·Aᵀ on the GEMV-style kernel,
    written into C's transpose (column-major for more than one column, the contiguous row yᵀ for one), here under the
    given ``schedule`` for that rows product (``tiledsl.gemm.family.rows_op``). What ``search.tune gemm --as-rows``
    and the GEMV sweeps time; ``tiledsl.gemm`` with an explicit schedule runs the product as given instead. A repeat
    with the same arrays' shapes, strides and alignment replays the cached launch, as ``tiledsl.gemm`` does.

    Args:
        a: (M, K) float32 CuPy array; b: (K, N) float32 CuPy array, 1 ≤ N < M.
        c: (M, N) float32 CuPy array with unit stride along N (N > 1) or along M (N = 1), updated in place; read only
            when beta ≠ 0.
        schedule: a ``kernel="gemv"`` :class:`GemmSchedule` for the rows product (N×M).

    Raises:
        SpecTypeError: an argument is not a CuPy array.
        SpecError: shapes or dtypes that do not form such a product, or ``c`` without that unit stride.
        ScheduleError / ResourceError: the schedule breaks a rule or exceeds the device.
    """
    for name, x in (("a", a), ("b", b), ("c", c)):
        if not hasattr(getattr(x, "data", None), "ptr"):  # a CuPy array (NumPy's data is a host buffer, torch's a tensor)
            raise SpecTypeError(f"{name} is a {type(x).__module__}.{type(x).__name__}: gemm_as_rows takes CuPy arrays")
        if x.ndim != 2:
            raise SpecError(f"{name} must be 2-D, got {x.ndim}-D with shape {x.shape}")
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2 or c.shape != (m, n):
        raise SpecError(f"a.shape={a.shape}, b.shape={b.shape}, c.shape={c.shape} do not form C (M×N) = A (M×K) · "
                        "B (K×N)")
    if not 1 <= n < m:
        raise SpecError(f"N={n} must be at least 1 and below M={m}: only a few-column product runs as rows")
    if not (a.dtype == b.dtype == c.dtype == "float32"):
        raise SpecError(f"dtypes a={a.dtype}, b={b.dtype}, c={c.dtype}: only float32 products run as rows")
    sr, sc = element_strides(c, "c")
    if (sc if n > 1 else sr) != 1:
        raise SpecError(f"c.strides={c.strides}: C needs unit stride along {'N' if n > 1 else 'M'} (its transpose "
                        "is what the rows write)")
    done, key = _cached_run(_call_key(a, b, c, beta, ("as_rows", schedule), "ieee"), c, 1.0, float(beta))
    if done is not None:  # (the key is never a tiledsl.gemm call's)
        return
    check_no_overlap(c, "c", a=a, b=b)
    _gemm_into(b.T, a.T, c.T, 1.0, float(beta), schedule, "float32", None if key is None else key[0], True, True,
               c_col=n > 1)


def _cached_run(key: tuple | None, c, alpha, beta) -> tuple:
    """(C from the launch cached under ``key`` (:func:`_call_key`), or None where none is cached or it may overlap
    its inputs; ``key``, or None where it cannot be hashed: an unhashable schedule or scalar, which the checked path
    then names)."""
    if key is None:
        return None, None
    try:
        call = cache.LAUNCHES.get(key[0])
    except TypeError:
        return None, None
    return (None if call is None else call.run(key[1], key[2], key[3], c, alpha, beta)), key


def _call_key(a, b, c, beta, schedule, precision) -> tuple | None:
    """(launch-cache key, pointer of a, of b, of c or None) of a call on CuPy arrays or torch CUDA tensors;
    None for other operands (they take the checked, converting path). The key holds the operands' shapes,
    strides and dtypes, their pointer alignment class (address mod 16), beta ≠ 0, the schedule and the
    device."""
    sa, sb = runtime.array_sig(a), runtime.array_sig(b)
    if sa is None or sb is None:
        return None
    if c is None:
        sc, pc = None, None
    else:
        got = runtime.array_sig(c)
        if got is None:
            return None
        sc, pc = (got[0], got[1] & 15), got[1]
    try:
        read_c = beta != 0
        key = ("gemm", sa[0], sa[1] & 15, sb[0], sb[1] & 15, sc, bool(read_c), schedule, precision,
               runtime.device_id())
    except (TypeError, ValueError):
        return None
    return key, sa[1], sb[1], pc


# the run-time bindings of a GEMM launch
_ORDER = ("a", "b", "c", "workspace", "alpha", "beta", "tmap_a", "tmap_b", "sk_partials", "gemm_tickets")
_WORKSPACES = ("workspace", "sk_partials", "gemm_tickets")  # the scratch buffers among them, in _ORDER's order


class _KMajorCopy:
    """The K-major copy of one MN-major float32 operand that tf32 wgmma needs (it reads both operands
    K-major): tiledsl's transpose kernel writes it into a scratch buffer kept per stream, so a repeated call
    allocates nothing and the copy's tensor map is encoded once per buffer address.

    ``x`` is the operand as the GEMM sees it, transposed to (K, MN) row-major (``a.T`` of a column-major A,
    or a row-major B itself); the copy is the (MN, K) row-major array, i.e. the operand K-major with
    leading dimension K.
    """

    __slots__ = ("launcher", "ws")

    def __init__(self, x, which: str, target: Target) -> None:
        k, mn = x.shape
        op = TransposeOp(shape=(k, mn), dtype="float32", in_strides=element_strides(x, which),
                         align_in=widest_vector((k, mn), element_strides(x, which), 4,
                                                base_align=alignment_elems(x, MAX_ACCESS_BYTES // 4)),
                         align_out=widest_vector((mn, k), (k, 1), 4, base_align=MAX_ACCESS_BYTES // 4))
        built = build(TRANSPOSE, op, resolve_schedule(TRANSPOSE, op, None, target), target)
        self.launcher = Launcher(built.kernel, built.plan, None, ("x", "y"))
        self.ws = Workspace(f"kmajor_{which}", "float32", k * mn)  # 256-byte aligned: 16-byte loads and TMA

    def __call__(self, src: int, stream) -> int:
        """Copy the operand at device address ``src`` on ``stream``; return the copy's address."""
        dst = workspace_ptr(self.ws, stream)
        self.launcher((src, dst), stream)
        return dst


class _GemmCall:
    """A cached GEMM call: launchers packed for one call signature; a repeated call fills the pointers and
    alpha/beta and launches (no allocation when ``c`` is given: split-K's workspace and tf32's K-major
    copies are per stream)."""

    __slots__ = ("copies", "extents", "followup", "main", "maps", "output", "swap", "tma", "ws")

    def __init__(self, built: Built, swap: bool, output: runtime.Output, extents, fixed: dict,
                 copies: tuple[_KMajorCopy | None, _KMajorCopy | None] = (None, None)) -> None:
        self.copies = copies if any(copies) else None
        p = built.plan
        self.main = Launcher(built.kernel, p, fixed, _ORDER)
        self.followup = (Launcher(built.followup, p.followup, fixed, _ORDER, dependent=True)  # PDL on Hopper
                         if p.followup is not None else None)
        named = {ws.name: ws for ws in p.workspace}
        self.ws = WorkspaceSet(tuple(named.get(n) for n in _WORKSPACES)) if named else None
        self.swap, self.output, self.extents = swap, output, extents
        # TMA kernels take A and B as tensor maps: their geometry is fixed by the call signature, the
        # address comes with each call (encoded maps of recent (A, B) addresses are kept)
        self.tma = ((tensor_map(p.op, p.schedule, "A", fixed["lda"]), tensor_map(p.op, p.schedule, "B", fixed["ldb"]))
                    if uses_tma(p.schedule) else None)
        self.maps: tuple[LRU, LRU] | None = (LRU(maxsize=64), LRU(maxsize=64)) if self.tma is not None else None

    def launch(self, pa: int, pb: int, pc: int, alpha, beta, stream) -> None:
        """Launch on device pointers (a and b as the caller passed them) on ``stream`` (None: CuPy's)."""
        if self.swap:
            pa, pb = pb, pa
        if self.copies is not None:  # tf32: MN-major operands copied K-major first, on the same stream
            copy_a, copy_b = self.copies
            if copy_a is not None:
                pa = copy_a(pa, stream)
            if copy_b is not None:
                pb = copy_b(pb, stream)
        pw, pp, pt = (0, 0, 0) if self.ws is None else self.ws.ptrs(stream)
        if self.tma is None:
            vals = (pa, pb, pc, pw, alpha, beta, None, None, pp, pt)
        else:
            vals = (pa, pb, pc, pw, alpha, beta, *self._tensor_maps(pa, pb), pp, pt)
        self.main(vals, stream)
        if self.followup is not None:
            self.followup(vals, stream)

    def _tensor_maps(self, a, b) -> tuple:
        """The tensor maps of A and B at their current addresses (each encoded once per address: the weights
        keep theirs while the activations move)."""
        out = []
        for x, geom, seen in zip((a, b), self.tma, self.maps, strict=True):
            ptr = x if type(x) is int else x.data.ptr
            m = seen.get(ptr)
            if m is None:
                m = encode(geom, ptr)
                seen.put(ptr, m)
            out.append(m)
        return out[0], out[1]

    def run(self, pa: int, pb: int, pc: int | None, c, alpha, beta):
        """Launch on the pointers and return C (``c``, or a new array); None, with nothing launched, when
        ``c`` may overlap ``a`` or ``b`` (the checked path then decides)."""
        if c is None:
            c, pc, stream = self.output.new()
        else:
            ea, eb, ec = self.extents
            if may_overlap(pc, ec, pa, ea) or may_overlap(pc, ec, pb, eb):
                return None
            stream = self.output.stream()
        self.launch(pa, pb, pc, alpha, beta, stream)
        return c


@returns_like_inputs
def _gemm_slow(a, b, c, alpha, beta, schedule, key, precision="ieee"):
    """Validate, convert and launch; store the launch in the cache under ``key`` when it can be replayed."""
    import cupy

    torch_index = runtime.torch_device((a, b, c))
    a, dt_a, torch_a = as_gpu(a, "a", GEMM_DTYPES, "GEMM")
    b, dt_b, _ = as_gpu(b, "b", GEMM_DTYPES, "GEMM")
    for name, x in (("a", a), ("b", b)):
        if x.ndim != 2:
            raise SpecError(f"{name} must be 2-D, got {x.ndim}-D with shape {x.shape}")
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2:
        raise SpecError(f"inner dimensions differ: a.shape={a.shape} (K={k}) but b.shape={b.shape} (K={k2})")
    if dt_a != dt_b:
        raise SpecError(f"a.dtype={dt_a} and b.dtype={dt_b} differ; cast one (mixed dtypes are not supported)")
    if precision != "ieee" and dt_a != "float32":
        raise SpecError(f"precision={precision!r} applies to float32 inputs, not a.dtype={dt_a} (float16 and bfloat16 "
                        "run on the tensor cores already)")
    result = None
    given_c = c is not None
    if c is not None:
        result = c  # returned as given (a torch tensor stays a torch tensor)
        c, dt_c, _ = as_gpu(c, "c", GEMM_DTYPES, "GEMM")
        if c.shape != (m, n):
            raise SpecError(f"c.shape={c.shape} must be (M, N)=({m}, {n})")
        if dt_c != dt_a:
            raise SpecError(f"c.dtype={dt_c} must equal a.dtype={dt_a}")
    elif beta != 0:
        raise SpecError(f"beta={beta} needs an output c to read; pass c= or set beta=0")
    elif torch_a is not None:  # torch bfloat16 in, torch bfloat16 out (CuPy has no bfloat16)
        import torch

        result = torch.empty((m, n), dtype=torch.bfloat16, device=torch_a.device)
        c = as_cupy(result.view(torch.int16), "c")
    if c is not None and result is None:
        result = c
    if c is not None:
        check_no_overlap(c, "c", a=a, b=b)
    out = c if c is not None else cupy.empty((m, n), dtype=a.dtype)
    result = out if result is None else result
    if m == 0 or n == 0:
        return result
    if k == 0:  # numpy: an empty sum is 0 (beta·C stays)
        if beta != 0:
            _gemm_into(cupy.zeros((m, 1), a.dtype), cupy.zeros((1, n), a.dtype), out, 0.0, float(beta),
                       None, dt_a, None, given_c)
        else:
            out.fill(0)
        return result
    _gemm_into(a, b, out, float(alpha), float(beta), schedule, dt_a, key, given_c, precision=precision,
               torch_index=torch_index)
    return result


def _operand(x, name: str):
    """(array, layout, ld, contiguous extent): row = unit stride along axis 1, col = along axis 0."""
    import cupy

    rows, cols = x.shape
    sr, sc = element_strides(x, name)
    if sc == 1 or cols == 1:
        return x, "row", (sr if rows > 1 else cols), cols
    if sr == 1 or rows == 1:
        return x, "col", (sc if cols > 1 else rows), rows
    x = cupy.ascontiguousarray(x)  # no unit stride at all: one copy, then row-major
    return x, "row", cols, cols


def _align(x, ld: int, extent: int) -> int:
    return widest_dividing(alignment_elems(x, 16 // x.itemsize), ld, extent)  # at most max_align(dtype): 16 bytes


def _tf32_wgmma_possible(schedule: GemmSchedule | None, target: Target) -> bool:
    """True when a tf32 call may run on wgmma: an sm_90 device, tensor maps encodable, and no schedule
    asking for another kernel."""
    return target.cc == 90 and tma.available() and (schedule is None or schedule.mma == "wgmma")


def _tf32_aligned(a, layout_a, lda, ext_a, b, layout_b, ldb, ext_b) -> bool:
    """True when A and B are 16-byte aligned K-major once copied: K a multiple of 4 (a copy's rows), and an
    operand that is already K-major (and not copied) 16-byte aligned itself."""
    if a.shape[1] % 4:
        return False
    return ((layout_a != "row" or _align(a, lda, ext_a) == 4)
            and (layout_b != "col" or _align(b, ldb, ext_b) == 4))


def _gemm_into(a, b, c, alpha: float, beta: float, schedule: GemmSchedule | None, dtype: str,
               key: tuple | None, given_c: bool, swap: bool = False, precision: str = "ieee",
               torch_index: int | None = None, c_col: bool = False) -> None:
    """Launch C = alpha·A@B + beta·C on CuPy views (on CuPy's current stream) and cache the launch under
    ``key``; ``torch_index`` is the device of the call's torch tensors (its repeats make torch results and
    launch on torch's stream), None for CuPy operands. ``c_col``: C is the column-major view Cᵀ of a row-major
    output, written as it is by the GEMV-style kernel (a few-column product run as rows, ``swap`` is True)."""
    import cupy

    m, n = c.shape
    sr, sc = element_strides(c, "c")
    if c_col:
        ldc = sc
    elif not (sc == 1 or n == 1) and (sr == 1 or m == 1):
        # column-major C: compute Cᵀ = Bᵀ·Aᵀ into the row-major view c.T, no copy
        _gemm_into(b.T, a.T, c.T, alpha, beta, schedule, dtype, key, given_c, not swap, precision, torch_index)
        return
    elif not (sc == 1 or n == 1):  # C has no unit stride: work in a contiguous copy
        tmp = cupy.ascontiguousarray(c)
        _gemm_into(a, b, tmp, alpha, beta, schedule, dtype, None, given_c, swap, precision, torch_index)
        c[...] = tmp
        return
    else:
        ldc = sr if m > 1 else n
    a0, b0 = a, b
    a, layout_a, lda, ext_a = _operand(a, "a")
    b, layout_b, ldb, ext_b = _operand(b, "b")
    if a is not a0 or b is not b0:
        key = None  # an operand was copied (no unit stride): nothing to replay
    target = Target.current()
    k = a.shape[1]
    align_a, align_b = _align(a, lda, ext_a), _align(b, ldb, ext_b)
    op = GemmOp(m, n, k, dtype=dtype, layout_a=layout_a, layout_b=layout_b, align_a=align_a, align_b=align_b,
                align_c=_align(c, ldc, m if c_col else n), read_c=beta != 0, precision=precision,
                layout_c="col" if c_col else "row")
    if schedule is None:  # a 3xtf32 product the tensor-core kernel does not take: the exact (IEEE) product
        op = effective_op(op, target)
    if schedule is None and not swap and (sr == 1 or n > 1) and runs_as_row(op, target):
        # one column: the single row yᵀ = xᵀ·Aᵀ into the view c.T (unit stride along M); a few columns: the few
        # rows Cᵀ = Bᵀ·Aᵀ into the column-major view c.T. No copy either way (family.rows_op)
        _gemm_into(b0.T, a0.T, c.T, alpha, beta, schedule, dtype, key, given_c, True, precision, torch_index,
                   c_col=n > 1)
        return
    copies: tuple[_KMajorCopy | None, _KMajorCopy | None] = (None, None)
    if precision == "tf32" and _tf32_wgmma_possible(schedule, target) and _tf32_aligned(
            a, layout_a, lda, ext_a, b, layout_b, ldb, ext_b):  # tf32 wgmma reads K-major operands
        copies = (_KMajorCopy(a.T, "a", target) if layout_a != "row" else None,
                  _KMajorCopy(b, "b", target) if layout_b != "col" else None)
        if copies[0] is not None:  # the copy is (M, K) row-major in a 256-byte aligned buffer
            layout_a, lda, align_a = "row", k, 4
        if copies[1] is not None:  # the copy is B column-major: (N, K) row-major
            layout_b, ldb, align_b = "col", k, 4
        op = replace(op, layout_a=layout_a, layout_b=layout_b, align_a=align_a, align_b=align_b)
    s = resolve_schedule(GEMM, op, schedule, target)
    built = build(GEMM, op, s, target)
    fixed = {"m": m, "n": n, "k": op.k, "lda": lda, "ldb": ldb, "ldc": ldc, "one": 1.0}
    first, second = (b0, a0) if swap else (a0, b0)
    output = runtime.Output((c.shape[1], c.shape[0]) if swap else c.shape, c.dtype, torch_index, dtype)
    call = _GemmCall(built, swap, output, (byte_extent(first), byte_extent(second), byte_extent(c)), fixed,
                     copies)
    pa, pb = a.data.ptr, b.data.ptr
    call.launch(*((pb, pa) if swap else (pa, pb)), c.data.ptr, alpha, beta, None)
    if key is not None and (given_c or not swap or m == 1 or c_col):  # a repeat allocates C as the caller's
        cache.LAUNCHES.put(key, call)  # shape: the swapped C's layout, unless it is one row or written column-major

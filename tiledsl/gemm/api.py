"""``tiledsl.gemm``: arrays in, verified layout/alignment analysis, kernel launched, an array of the input's library out."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .. import dtypes
from ..compile import Kernel, compile_source
from ..errors import ScheduleError, SpecError
from ..runtime import alignment_elems, as_cupy, as_gpu, check_no_overlap, element_strides, launch, returns_like_inputs
from ..target import Target
from .emit import emit_splitk_reduce, grid
from .op import GEMM_DTYPES, GemmOp
from .schedule import MMA_DTYPES, GemmSchedule


@returns_like_inputs
def gemm(a, b, c=None, *, alpha: float = 1.0, beta: float = 0.0,
         schedule: GemmSchedule | None = None):
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

    Returns:
        The (M, N) array holding C: ``c`` itself when given, else a new array of the inputs' library (a
        torch tensor on the same device when ``a`` or ``b`` is a torch tensor, for every dtype; a CuPy
        array otherwise).

    Raises:
        SpecTypeError: an operand is a NumPy (host) array or not a GPU array.
        SpecError: an operand is not 2-D, inner dimensions differ, dtypes are unsupported or mixed,
            ``c`` has the wrong shape or dtype, or beta ≠ 0 without ``c``.
        ScheduleError / ResourceError: the schedule breaks a rule or exceeds the device.

    Example:
        >>> c = tiledsl.gemm(cupy.random.rand(512, 256, dtype="float32"),
        ...                  cupy.random.rand(256, 128, dtype="float32"))  # doctest: +SKIP
    """
    import cupy

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
    result = None
    if c is not None:
        c, dt_c, result = as_gpu(c, "c", GEMM_DTYPES, "GEMM")
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
                       None, dt_a)
        else:
            out.fill(0)
        return result
    _gemm_into(a, b, out, float(alpha), float(beta), schedule, dt_a)
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
    vec = alignment_elems(x, 16 // x.itemsize)  # = max_align(dtype): 16-byte vectors
    while vec > 1 and (ld % vec or extent % vec):
        vec //= 2
    return vec


def _gemm_into(a, b, c, alpha: float, beta: float, schedule: GemmSchedule | None, dtype: str) -> None:
    import cupy

    m, n = c.shape
    sr, sc = element_strides(c, "c")
    if not (sc == 1 or n == 1) and (sr == 1 or m == 1):
        # column-major C: compute Cᵀ = Bᵀ·Aᵀ into the row-major view c.T, no copy
        _gemm_into(b.T, a.T, c.T, alpha, beta, schedule, dtype)
        return
    if not (sc == 1 or n == 1):  # C has no unit stride: work in a contiguous copy
        tmp = cupy.ascontiguousarray(c)
        _gemm_into(a, b, tmp, alpha, beta, schedule, dtype)
        c[...] = tmp
        return
    ldc = sr if m > 1 else n
    a, layout_a, lda, ext_a = _operand(a, "a")
    b, layout_b, ldb, ext_b = _operand(b, "b")
    op = GemmOp(m, n, a.shape[1], dtype=dtype, layout_a=layout_a, layout_b=layout_b,
                align_a=_align(a, lda, ext_a), align_b=_align(b, ldb, ext_b), align_c=_align(c, ldc, n),
                read_c=beta != 0)
    target = Target.current()
    from ..api import compile as compile_op

    kernel: Kernel = compile_op(op, schedule, arch=target.arch)
    s = kernel.schedule
    head = [a, b]
    dims = [np.int32(m), np.int32(n), np.int32(op.k), np.int64(lda), np.int64(ldb)]
    if s.split_k == 1:
        tail = [np.float32(alpha)] + ([np.float32(beta)] if op.read_c else [])
        launch(kernel, grid(op, s), tuple(head + [c] + dims + [np.int64(ldc)] + tail))
        return
    # split-K: float32 partial products per K slice, then a deterministic reduction applying alpha/beta
    work = cupy.empty((s.split_k, m, n), dtype=cupy.float32)
    launch(kernel, grid(op, s), tuple(head + [work] + dims + [np.int64(n), np.float32(1.0)]))
    red = _reduce_kernel(op, s, target.arch)
    tail = [np.float32(alpha)] + ([np.float32(beta)] if op.read_c else [])
    launch(red, (-(-(m * n) // 256), 1, 1), tuple([work, c, np.int32(m), np.int32(n), np.int64(ldc)] + tail))


def _reduce_kernel(op: GemmOp, s: GemmSchedule, arch: str) -> Kernel:
    key = (op.dtype, op.read_c, s.split_k, arch)
    k = _REDUCE_KERNELS.get(key)
    if k is None:
        k = compile_source(emit_splitk_reduce(op, s), arch)
        _REDUCE_KERNELS[key] = k
    return k


# Explicit cache of split-K reduction kernels: (dtype, read_c, split_k, arch) -> Kernel
_REDUCE_KERNELS: dict[tuple, Kernel] = {}


def default_schedule(op: GemmOp, target: Target) -> GemmSchedule:
    """A sensible schedule for the shape, chosen among the shipped presets and split-K factors.

    float16/bfloat16 on sm_80+ choose among the tensor-core presets (:data:`TC_DEFAULT_CANDIDATES`,
    ``mma="mma_sync"``); float32 among the FMA presets (:data:`DEFAULT_CANDIDATES`).

    Each candidate (preset in :data:`DEFAULT_CANDIDATES` × split_k in 1, 2, 4, …, 32) gets a quick
    roofline estimate: the larger of its compute time — waves of
    blocks (⌈blocks / (SMs · 2)⌉) times one block's 2·bm·bn·kc FLOP at its share of the SM's FP32 rate,
    scaled by the tile's measured efficiency — and its memory time — the A and B tiles every block
    reads, (bm + bn)·kc elements, at twice the HBM rate (L2 serves the re-reads) — plus, for
    split-K, the workspace written and read back and a second launch. The smallest estimate wins.

    A schedule tuned for exactly this op on this device (``python -m search.tune … --export``, stored
    in the user store or shipped under ``schedules/gemm/``) is used first, after it validates; see
    :func:`tiledsl.registry.lookup_explain` for why a stored record was not used.
    """
    from ..registry import lookup, presets
    from ..spec import refuse_empty

    refuse_empty(op, "choose a schedule for")

    tuned = lookup("gemm", op, target)
    if tuned is not None:
        return tuned

    table = presets("gemm")
    itemsize = dtypes.get(op.dtype).itemsize
    tensor_cores = op.dtype in MMA_DTYPES and target.cc >= 80
    candidates = DEFAULT_CANDIDATES
    if tensor_cores:  # wgmma where the device and the operands allow it (its rules decide), else mma.sync
        candidates = {name: eff for name, eff in TC_DEFAULT_CANDIDATES.items()
                      if name in table and _applies(table[name], op, target)}
    peak = target.peak_tc16_flops if tensor_cores else target.peak_fp32_flops
    sm_flops = peak / target.sm_count
    best, best_s = None, float("inf")
    for name, eff in candidates.items():
        base = table.get(name)
        if base is None:  # a shipped preset that failed its check (warned when the presets were read)
            continue
        for split in (1, 2, 4, 8, 16, 32):
            kc = _ceil_div(_ceil_div(op.k, split), base.bk) * base.bk  # K per slice, whole bk tiles
            if split > 1 and kc * (split - 1) >= op.k:
                break  # an empty K slice: no more splitting
            tiles = -(-op.m // base.bm) * -(-op.n // base.bn)
            blocks = tiles * split
            waves = -(-blocks // (target.sm_count * 2))
            per_block_rate = sm_flops / min(2, -(-blocks // target.sm_count)) * eff
            compute_s = waves * 2 * base.bm * base.bn * kc / per_block_rate
            memory_s = blocks * (base.bm + base.bn) * kc * itemsize / (2 * target.hbm_bytes_per_s)
            extra_s = 0.0 if split == 1 else (2 * split + 1) * op.m * op.n * 4 / target.hbm_bytes_per_s + 4e-6
            est = max(compute_s, memory_s) + extra_s
            if est < best_s:
                best, best_s = (base if split == 1 else replace(base, split_k=split)), est
    return best if best is not None else GemmSchedule()


def _applies(s: GemmSchedule, op: GemmOp, target: Target) -> bool:
    """True when ``s`` passes the op- and device-scope rules for ``op`` on ``target``."""
    try:
        s.check_op(op)
        s.validate(target)
    except ScheduleError:
        return False
    return True


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# Presets the default may pick, with their measured fraction of the FP32 peak (67 TFLOP/s) at 4096³
# (benchmarks/results/gemm_h200.json, H200, 2026-11-29; e.g. 128x128: 44.8 TFLOP/s = 0.67); the
# small and skinny tiles' figures are estimates, not measurements.
DEFAULT_CANDIDATES = {"sgemm_256x128_16x8": 0.69, "sgemm_128x128_8x8": 0.67, "sgemm_128x64_8x4": 0.57,
                      "sgemm_64x64_4x4": 0.47, "sgemm_32x64_2x4": 0.3, "skinny_n_64x16": 0.25,
                      "skinny_m_16x64": 0.25}
# Tensor-core presets for float16/bfloat16 on sm_80+, with their fraction of the dense tensor-core peak
# (Target.peak_tc16_flops, 1070 TFLOP/s for the H200 table entry): 128x128 measured 322 TFLOP/s at 4096³
# (0.30; benchmarks/results/gemm_tc_h200.json, H200, 2026-12-01); the 64x64 figure is an estimate.
# wgmma (sm_90a, 16-byte-aligned operands): 128x256 measured 509 TFLOP/s (0.475) and 128x128 s6 434 (0.405)
# at 4096³ NN fp16 (benchmarks/results/gemm_tc_sweep_wgmma_h200.json).
TC_DEFAULT_CANDIDATES = {"hgemm_wgmma_128x256x64_s4": 0.475, "hgemm_wgmma_128x128x64_s6": 0.405,
                         "hgemm_128x128x32_w64x64_s4": 0.30, "hgemm_64x64x32_w32x32_s4": 0.18}

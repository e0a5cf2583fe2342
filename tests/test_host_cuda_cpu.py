"""The emitted kernels' own CUDA source run on the CPU (tests/host_cuda.py: g++, a fiber per CUDA thread), checked
against float64 on a poisoned output: the control flow a compile check cannot see — which row of B a ring slot holds,
which K slice a block owns, which lane stores which sum, which block finishes a reduction — on shapes with every
remainder (rows past M, columns past N, slices shorter than the ring, K not a multiple of anything). GEMM (the GEMV
kernels in every dtype, the FMA tiled kernel's pipelines, cp.async's included), every reduction strategy and every
transpose variant; each in both orders of a block's threads and of the blocks. The GPU tests check the same kernels on
the device; these run in CI, where there is none."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import host_cuda
import numpy as np
import pytest
from dmma_cases import check_special_values, dmma_bound, special_operands

import tiledsl
from tiledsl.compile import nvrtc_problem
from tiledsl.gemm import default_schedule
from tiledsl.gemm.family import GEMM, gemv_schedule
from tiledsl.gemm.schedule import gemv_slice_depth

pytestmark = pytest.mark.skipif(host_cuda.compiler() is None,
                                reason="no g++ on PATH: the host runs of emitted kernels need a C++20 compiler")

H200 = tiledsl.Target.known("H200")


def _operands(rng, m, n, k, layout_b="row"):
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    return a, b, (b if layout_b == "row" else np.ascontiguousarray(b.T))


def _op(m, n, k, layout_b="row", read_c=False):
    along = n if layout_b == "row" else k  # B's contiguous extent
    al = 4 if along % 4 == 0 else 2 if along % 2 == 0 else 1
    return tiledsl.GemmOp(m, n, k, layout_b=layout_b, align_a=4 if k % 4 == 0 else 1, align_b=al,
                          align_c=4 if n % 4 == 0 else 1, read_c=read_c)


def _run(op, s, a, b_storage, alpha=1.0, beta=0.0, c0=None):
    """C by ``s``'s kernels on the host, twice: each block's threads in index order with the blocks in grid order, then
    both reversed (another thread reads a value first, another block of a split-K group arrives last); the two must
    agree bit for bit."""
    out = []
    for order, reverse_blocks in (("forward", False), ("reverse", True)):
        c = np.full((op.m, op.n), np.nan, np.float32) if c0 is None else c0.copy()
        host_cuda.gemm(op, s, a, b_storage, c, alpha=alpha, beta=beta, order=order, reverse_blocks=reverse_blocks)
        out.append(c)
    assert np.array_equal(out[0], out[1], equal_nan=True), s
    return out[0]


def _broken_run(op, s, a, b_storage, edit) -> np.ndarray | None:
    """C (NaN-poisoned first) by ``s``'s kernels with ``edit`` applied to the source, or None where the run stopped
    on a fault the host runner catches (a read outside A or B); a variant that does not compile fails the test."""
    c = np.full((op.m, op.n), np.nan, np.float32)
    try:
        host_cuda.gemm(op, s, a, b_storage, c, edit=edit)
    except host_cuda.HostRunError as exc:
        assert "failed on the host" in str(exc), exc  # a read past B's end, not a variant that does not compile
        return None
    return c


def _tol(k):
    return 1e-5 * max(1.0, (k / 4096) ** 0.5)


def _rel_err(got, ref):
    return float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))


@pytest.mark.parametrize("m,n,k,unrolls", [(16, 132, 200, (1, 2, 8)), (12, 68, 611, (1, 2, 8)), (9, 4, 37, (1, 2, 8)),
                                           (5, 260, 7, (1, 2, 8)), (4, 8, 129, (1, 2, 8)), (4, 67, 1, (4, 16)),
                                           (4, 66, 9, (4, 8)), (8, 64, 17, (16,)), (8, 64, 33, (16,))])
def test_staged_a_ring_with_a_spare_slot_sums_what_the_copied_ring_sums(m, n, k, unrolls, rng):
    """smem_a (A staged, a ring of B loads, row-major B) with spare_slot (unroll + 1 slots, a running pointer into B)
    against the ring as it was (each slot copied before its refill): unroll 1, 2, 4, 8 and 16 with slices of 1, U, U + 1
    and 2U + 1 rows and rings longer than a slice, B read 1, 2 and 4 wide (N odd, 2 mod 4, 0 mod 4), one slice and
    three (the split-K kernel; the fused sum), 4, 8, 12 and 16 rows per block (rows past M): both within the float64
    tolerance and bit for bit the same (the same products added in the same order); every load inside B (an access
    past its end stops the host run)."""
    a, b, _ = _operands(rng, m, n, k)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    op = _op(m, n, k)
    for bm, unroll, (split, fused) in itertools.product(sorted({-(-m // 4) * 4, 16}), unrolls,
                                                        ((1, False), (3, False), (3, True))):
        copied = tiledsl.GemmSchedule(kernel="gemv", bm=bm, bn=64, vec=4, unroll=unroll, split_k=split,
                                      split_k_fused=fused, smem_a=True)
        spare = replace(copied, spare_slot=True)
        got = _run(op, spare, a, b)
        assert _rel_err(got, ref) < _tol(k), spare
        assert np.array_equal(got, _run(op, copied, a, b), equal_nan=False), spare


def _launch_variant(op, s, source, a, b, c):
    """Kernel ``source`` (``s``'s main kernel, edited) on the host in ``s``'s place."""
    host_cuda.gemm(op, s, a, b, c, edit=lambda _: source)


def test_a_wrong_ring_fails_here():
    """The host run has teeth: the spare-slot ring loading one row short (``b_next - ldb``) computes a wrong product,
    and the ring without its refill guard reads past the end of B and stops the run."""
    rng = np.random.default_rng(7)
    m, n, k = 16, 64, 40
    a, b, _ = _operands(rng, m, n, k)
    op = _op(m, n, k)
    s = tiledsl.GemmSchedule(kernel="gemv", bm=16, bn=64, vec=4, unroll=4, smem_a=True, spare_slot=True)
    good = GEMM.emit(op, s).source
    load = "ring[(u + UNROLL) % (UNROLL + 1)] = *reinterpret_cast<const float4*>(b_next);"
    assert good.count(f"if (k0 + u + UNROLL < n_k) {load}") == 1
    short = good.replace(load, load.replace("(b_next)", "(b_next - ldb)"))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    for source, right in ((good, True), (short, False)):
        c = np.full((m, n), np.nan, np.float32)
        _launch_variant(op, s, source, a, b, c)
        assert (_rel_err(c, ref) < _tol(k)) == right
    with pytest.raises(host_cuda.HostRunError, match=r"exit status -11"):  # SIGSEGV at the guard past B
        _launch_variant(op, s, good.replace(f"if (k0 + u + UNROLL < n_k) {load}", load), a, b,
                        np.full((m, n), np.nan, np.float32))


@pytest.mark.parametrize("layout_b", ["row", "col"])
@pytest.mark.parametrize("m", [9, 11, 12])
def test_twelve_rows_per_block(layout_b, m, rng):
    """bm = 12 (three 16-byte broadcasts of the staged A per k; with a column-major B 12·rn sums per warp, the
    per-value shuffles where they do not fill the warp's lanes) for 9-12 rows: the FMA GEMV pick with 12 rows per
    block, staged and not, then alpha and beta on a C holding values."""
    n, k = (132, 300) if layout_b == "row" else (77, 516)
    a, b, bs = _operands(rng, m, n, k, layout_b)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    op = _op(m, n, k, layout_b)
    pick = replace(gemv_schedule(op, H200), bm=12)  # the FMA GEMV pick (9-16 rows of x @ W.T: gemv_dmma_default's)
    variants = [pick, replace(pick, smem_a=not pick.smem_a, spare_slot=False, min_blocks=0)]
    if layout_b == "col":
        variants += [replace(pick, rn=rn, split_k=3) for rn in (1, 2)]  # 12·rn sums: never a multiple of 32
    else:
        variants += [replace(pick, smem_a=True, spare_slot=True, min_blocks=0)]
    for s in variants:
        assert _rel_err(_run(op, s, a, bs), ref) < _tol(k), s
    c0 = rng.uniform(-1, 1, (m, n)).astype(np.float32)
    op_c = replace(op, read_c=True)
    got = _run(op_c, pick, a, bs, alpha=1.5, beta=-0.5, c0=c0)
    assert _rel_err(got, 1.5 * ref - 0.5 * c0) < 2 * _tol(k), pick


@pytest.mark.parametrize("m,n,k", [(16, 77, 516), (13, 5, 130), (9, 40, 611), (4, 33, 36), (8, 64, 4)])
def test_column_b_ring_with_lanes_in_groups(m, n, k, rng):
    """x @ W.T (a column-major B) with smem_a and spare_slot: the ring of B loads and A staged by vectors of K, the
    warp's lanes in groups of 4, 8, 16 or 32 along K (``k_lanes``), 1, 2 or 4 columns per group, unroll 1 to 8 (rings
    longer than a lane's steps), one slice, three and the fused sum, 4–16 rows per block (rows past M), B read 4, 2
    and 1 wide and A 4 or 1 wide (K ≡ 0, 2 mod 4, odd), N not a multiple of a block's columns (groups past N): within
    the float64 tolerance, the same bits in both orders, every load inside B and A."""
    a, b, bs = _operands(rng, m, n, k, "col")
    ref = a.astype(np.float64) @ b.astype(np.float64)
    op = _op(m, n, k, "col")
    ran = 0
    for bm, k_lanes, rn, unroll, (split, fused) in [
            (16, 8, 2, 4, (1, False)), (16, 4, 4, 1, (3, False)), (16, 32, 2, 2, (3, True)), (16, 16, 1, 8, (1, False)),
            (12, 4, 1, 8, (1, False)), (12, 8, 2, 2, (3, False)), (8, 16, 2, 2, (2, False)), (8, 8, 1, 1, (3, True)),
            (4, 4, 1, 3, (1, False)), (4, 4, 4, 2, (3, False))]:
        if bm < m:
            continue
        s = tiledsl.GemmSchedule(kernel="gemv", bm=bm, bn=64, vec=4, rn=rn, unroll=unroll, split_k=split,
                                 split_k_fused=fused, smem_a=True, spare_slot=True, k_lanes=k_lanes)
        assert _rel_err(_run(op, s, a, bs), ref) < _tol(k), s
        ran += 1
    assert ran >= 4


def test_a_wrong_column_b_ring_fails_here():
    """The column-major B's ring has teeth here too: loading one step short, a butterfly over the warp's lane
    instead of the group's, and the refill without its guard (past the end of B: the run stops)."""
    rng = np.random.default_rng(11)
    m, n, k = 16, 40, 260
    a, b, bs = _operands(rng, m, n, k, "col")
    op = _op(m, n, k, "col")
    s = tiledsl.GemmSchedule(kernel="gemv", bm=16, bn=64, vec=4, rn=2, unroll=4, smem_a=True, spare_slot=True,
                             k_lanes=8)
    good = GEMM.emit(op, s).source
    load = "ring[(u + UNROLL) % (UNROLL + 1)][c] = __ldcs(reinterpret_cast<const float4*>(b_next[c]));"
    guard = "if (kv0 + (u + UNROLL) * K_LANES < n_kv) {"
    assert good.count(load) == 1 and good.count(guard) == 1 and good.count("const bool upper = kl & 4;") == 1
    ref = a.astype(np.float64) @ b.astype(np.float64)
    for source, right in ((good, True), (good.replace(load, load.replace("(b_next[c])", "(b_next[c] - VB)")), False),
                          (good.replace("const bool upper = kl & 4;", "const bool upper = lane & 16;"), False)):
        c = np.full((m, n), np.nan, np.float32)
        _launch_variant(op, s, source, a, bs, c)
        assert (_rel_err(c, ref) < _tol(k)) == right
    with pytest.raises(host_cuda.HostRunError, match=r"exit status -11"):  # SIGSEGV at the guard past B
        _launch_variant(op, s, good.replace(guard, "{"), a, bs, np.full((m, n), np.nan, np.float32))


@pytest.mark.parametrize("m,n,k", [(16, 77, 516), (13, 5, 130), (9, 40, 611), (4, 33, 36), (8, 64, 4), (16, 3, 7)])
def test_column_b_lanes_in_groups_with_a_in_registers(m, n, k, rng):
    """x @ W.T (a column-major B) on the kernel with A in registers and the warp's lanes in groups of 4, 8 or 16 along
    K (``k_lanes``; ``gemv_lanes_column_b``'s form): 1, 2 or 4 columns per group, unroll 1 to 4, one slice, three and
    the fused sum, 4–16 rows per block (rows past M), B read 4, 2 and 1 wide and A 4 or 1 wide (K ≡ 0, 2 mod 4, odd),
    groups past N, alpha/beta: within the float64 tolerance, the same bits in both orders, every load inside B and A."""
    a, b, bs = _operands(rng, m, n, k, "col")
    ref = a.astype(np.float64) @ b.astype(np.float64)
    op = _op(m, n, k, "col")
    ran = 0
    for bm, k_lanes, rn, unroll, bn, (split, fused) in [
            (16, 8, 4, 2, 128, (1, False)), (16, 8, 2, 1, 64, (3, False)), (16, 16, 4, 2, 64, (3, True)),
            (16, 4, 1, 4, 32, (1, False)), (12, 8, 2, 2, 64, (3, False)), (12, 4, 4, 1, 128, (2, True)),
            (8, 8, 1, 2, 64, (1, False)), (8, 16, 2, 1, 64, (3, True)), (4, 4, 1, 3, 32, (1, False)),
            (4, 4, 4, 2, 64, (3, False))]:
        if bm < m:
            continue
        s = tiledsl.GemmSchedule(kernel="gemv", bm=bm, bn=bn, vec=4, rn=rn, unroll=unroll, split_k=split,
                                 split_k_fused=fused, k_lanes=k_lanes)
        assert _rel_err(_run(op, s, a, bs), ref) < _tol(k), s
        ran += 1
    assert ran >= 4
    c0 = rng.uniform(-1, 1, (m, n)).astype(np.float32)
    s = tiledsl.GemmSchedule(kernel="gemv", bm=16, bn=64, vec=4, rn=2, unroll=2, k_lanes=8)
    got = _run(replace(op, read_c=True), s, a, bs, alpha=1.5, beta=-0.5, c0=c0)
    assert _rel_err(got, 1.5 * ref - 0.5 * c0) < 2 * _tol(k), s


def test_a_wrong_column_b_lane_group_fails_here():
    """The lanes-in-groups kernel with A in registers has teeth: lanes stepping along K as if the warp were one group
    (32 · VB per step: three quarters of K skipped by 8-lane groups), a butterfly over the warp's lanes instead of the
    group's, and groups laid out as if each warp had one (groups overlapping their neighbours' columns) each compute
    a wrong product."""
    rng = np.random.default_rng(12)
    m, n, k = 16, 40, 260
    a, b, bs = _operands(rng, m, n, k, "col")
    op = _op(m, n, k, "col")
    s = tiledsl.GemmSchedule(kernel="gemv", bm=16, bn=64, vec=4, rn=2, unroll=2, k_lanes=8)
    good = GEMM.emit(op, s).source
    step = "k += K_LANES * VB)"
    layout = "* (32 / K_LANES) + lane / K_LANES)"
    assert good.count(step) == 1 and good.count(layout) == 1 and good.count("const bool upper = kl & 4;") == 1
    ref = a.astype(np.float64) @ b.astype(np.float64)
    for source, right in ((good, True), (good.replace(step, "k += 32 * VB)"), False),
                          (good.replace("const bool upper = kl & 4;", "const bool upper = lane & 16;"), False),
                          (good.replace(layout, "+ lane / K_LANES)"), False)):
        c = np.full((m, n), np.nan, np.float32)
        _launch_variant(op, s, source, a, bs, c)
        assert (_rel_err(c, ref) < _tol(k)) == right


@pytest.mark.parametrize("m,n,k", [(130, 70, 33), (7, 129, 127), (1, 1, 1)])
def test_schedule_none_on_the_host(m, n, k, rng):
    """schedule=None's kernels (tiled FMA, or the GEMV kernel for a few rows) for edge shapes: 129, 127, 7, 1."""
    a, b, _ = _operands(rng, m, n, k)
    op = _op(m, n, k)
    s = default_schedule(op, H200)
    assert _rel_err(_run(op, s, a, b), a.astype(np.float64) @ b.astype(np.float64)) < _tol(k), s


def test_lanes_that_skip_a_shuffle_end_the_run_with_an_error():
    """Half a warp at a full-mask shuffle never completes on a GPU; here the run stops and says why, instead of
    waiting for the time limit. The same kernel with every lane at the shuffle swaps neighbours' values."""
    source = ('extern "C" __global__ void swap_pairs(float* __restrict__ x, int lanes) {\n'
              "  if ((int)threadIdx.x < lanes) x[threadIdx.x] = __shfl_xor_sync(0xffffffffu, x[threadIdx.x], 1);\n"
              "}\n")
    x = np.arange(32, dtype=np.float32)
    host_cuda.launch(source, "swap_pairs", (1, 1, 1), (32, 1, 1), 0, [x, 32])
    assert np.array_equal(x, np.arange(32, dtype=np.float32).reshape(16, 2)[:, ::-1].ravel())
    with pytest.raises(host_cuda.HostRunError) as err:
        host_cuda.launch(source, "swap_pairs", (1, 1, 1), (32, 1, 1), 0, [x, 16])
    assert "deadlock" in err.value.stderr


# ---- reductions and transposes: every strategy and variant of the emitted source, on the host ----

_NUMPY_REDUCE = {"sum": np.sum, "max": np.max, "min": np.min, "prod": np.prod, "mean": np.mean,
                 "norm2": lambda x, axis: np.sqrt(np.sum(x * x, axis=axis))}


@pytest.mark.parametrize("shape,axis,dtype", [((100003,), None, "float32"), ((1000, 37), 1, "float32"),
                                              ((33, 70, 5), 1, "float32"), ((7, 129), 0, "float64"),
                                              ((1,), None, "int32"), ((300, 17), None, "int32")])
def test_reductions_on_the_host(shape, axis, dtype, rng):
    """Each of the six strategies (the reduction ladder; the strided ones where the axis is not the last) with two-pass
    and atomic combines on a sum, then max / mean / norm2 (integers: max) on schedule=None's, on shapes with remainders
    of every tile and a poisoned output, each run with the threads and blocks in both orders. The data are integers
    (as floats too), so every sum and max is exact in any order of adding: one element dropped or counted twice is
    caught; mean within 4 ulps of float64, norm2 (whose squares' sum rounds) within 64."""
    from tiledsl.reduce.family import REDUCE
    from tiledsl.reduce.schedule import STRATEGIES

    x = rng.integers(-50, 51, shape).astype(dtype)  # |sum| < 2^24: exact in float32
    cases = [("sum", dict(block=128, vec=4, items_per_thread=2, strategy=strategy, combine=combine))
             for strategy, combine in itertools.product(STRATEGIES, ("two_pass", "atomic"))]
    cases += [(name, None) for name in (("max",) if dtype == "int32" else ("max", "mean", "norm2"))]
    ran = set()
    for name, s in cases:
        op = tiledsl.ReduceOp(shape, op=name, axis=axis, dtype=dtype)
        try:
            s = tiledsl.ReduceSchedule(**s) if s else REDUCE.default_schedule(op, H200)
            s.validate(H200)
            REDUCE.plan(op, s, H200)
        except tiledsl.ScheduleError:
            continue  # a strategy the op's axis or the combine rules out
        ref = np.asarray(_NUMPY_REDUCE[name](x.astype(np.float64), axis=axis))
        outs = []
        for order, reverse_blocks in (("forward", False), ("reverse", True)):
            out = np.full(op.out_shape, np.nan if np.dtype(op.out_dtype).kind == "f" else -(2**31), op.out_dtype)
            host_cuda.run(REDUCE, op, s, {"x": x, "out": out}, order=order, reverse_blocks=reverse_blocks)
            outs.append(out.astype(np.float64))
        for out in outs:
            if name in ("sum", "max"):
                assert np.array_equal(out, ref), (name, s)
            else:
                # mean: an exact sum divided once; norm2: the squares' sum rounds (it passes 2^24 in float32)
                rtol = (4 if name == "mean" else 64) * np.finfo(dtype).eps
                assert np.allclose(out, ref, rtol=rtol, atol=0), (name, s)
        ran.add(s.strategy)
    assert {"grid_stride", "warp_shuffle"} <= ran and (axis not in (None, len(shape) - 1) or ran == set(STRATEGIES))


@pytest.mark.parametrize("shape", [(130, 77), (64, 64), (3, 129, 33), (1, 1)])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_transposes_on_the_host(shape, dtype, rng):
    """The naive variants (reads or writes coalesced) and the shared-memory one, 32 and 64 tiles, 1-4 wide chunks and rows per thread, padded and not,
    on batched and ragged shapes: every element where it belongs, none left poisoned."""
    from tiledsl.transpose.family import TRANSPOSE

    x = rng.uniform(-1e3, 1e3, shape).astype(dtype)
    want = np.swapaxes(x, -1, -2)
    op = tiledsl.TransposeOp(shape, dtype=dtype)
    schedules = [TRANSPOSE.default_schedule(op, H200), tiledsl.TransposeSchedule(variant="naive_read", tile=32, vec=1,
                                                                                 smem_pad=0, rows_per_thread=4),
                 tiledsl.TransposeSchedule(variant="naive_write", tile=32, vec=1, smem_pad=0, rows_per_thread=4)]
    schedules += [tiledsl.TransposeSchedule(variant="shared", tile=tile, vec=vec, smem_pad=pad, rows_per_thread=rows)
                  for tile, vec, pad, rows in ((32, 1, 1, 8), (32, 2, 0, 4), (64, 4, 1, 8), (64, 2, 1, 16))]
    for s in schedules:
        for order in ("forward", "reverse"):
            y = np.full(want.shape, -5000, dtype=dtype)  # outside the data's range
            host_cuda.run(TRANSPOSE, op, s, {"x": x, "y": y}, order=order, reverse_blocks=order == "reverse")
            assert np.array_equal(y, want), (s, order)


def test_a_missing_barrier_fails_here():
    """The host runs a block's threads one after another up to each barrier, so a thread reading shared memory that a
    later thread writes before the barrier reads the 0xff fill: the shared-memory transpose without its barrier
    between the tile's writes and reads leaves Y wrong (with it, right)."""
    from tiledsl.transpose.family import TRANSPOSE

    op = tiledsl.TransposeOp((130, 77))
    s = TRANSPOSE.default_schedule(op, H200)
    assert s.variant == "shared"
    x = np.random.default_rng(3).uniform(-1, 1, (130, 77)).astype(np.float32)
    for edit, right in ((None, True), (lambda source: source.replace("__syncthreads();", "", 1), False)):
        y = np.full((77, 130), -1, np.float32)
        host_cuda.run(TRANSPOSE, op, s, {"x": x, "y": y}, edit=edit)
        assert np.array_equal(y, x.T) == right


@pytest.mark.parametrize("m,n,k", [(130, 70, 36), (257, 129, 67)])
def test_fma_tiled_kernels_on_the_host(m, n, k, rng):
    """The FMA tiled kernel's pipelines and K splits: one stage, the register-prefetch double buffer (with fragment
    prefetch), cp.async rings of 3 and 4 stages (each copy's destination poisoned when issued and written at the wait
    that covers it), split-K with its reduction kernel, stream-K; tiles past M, N and K."""
    a, b, _ = _operands(rng, m, n, k)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    op = tiledsl.GemmOp(m, n, k, align_a=1, align_b=1, align_c=1)
    base = tiledsl.GemmSchedule(bm=64, bn=64, bk=16, rm=4, rn=4, vec=1, unroll=16, swizzle=2)
    ran = 0
    for kw in (dict(stages=1), dict(stages=2), dict(stages=2, fragment_prefetch=True), dict(stages=3),
               dict(stages=4, bk=8, unroll=8), dict(stages=2, split_k=3), dict(stages=2, stream_k=True),
               dict(stages=3, swizzle=1, bm=32, rm=2, wm=0, wn=0)):
        s = replace(base, **kw, min_blocks=0)
        assert _rel_err(_run(op, s, a, b), ref) < _tol(k), s
        ran += 1
    assert ran == 8


def _to_16(x: np.ndarray, dtype: str) -> np.ndarray:
    """float64 values as the 16-bit patterns of ``dtype`` (round to nearest even), uint16."""
    if dtype == "float16":
        return x.astype(np.float16).view(np.uint16)
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def _from_16(bits: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "float16":
        return bits.view(np.float16).astype(np.float64)
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("m,n,k", [(1, 76, 129), (9, 132, 300)])
def test_sixteen_bit_gemv_on_the_host(dtype, m, n, k, rng):
    """The GEMV kernel on float16 and bfloat16 inputs and output (float32 accumulation; the prelude's conversions,
    float16's as host code here): A in registers and staged, one slice and three, the spare slot bit for bit what the
    copied ring gives, and x @ W.T by the column-major B's ring (``k_lanes`` 8) and by the kernel with A in registers
    and its lanes in groups of 16 and 8 (one slice and three, the fused sum); within the output's 16-bit rounding
    of the float64 product of the rounded inputs."""
    a16, b16 = _to_16(rng.uniform(-1, 1, (m, k)), dtype), _to_16(rng.uniform(-1, 1, (k, n)), dtype)
    ref = _from_16(a16, dtype) @ _from_16(b16, dtype)
    op = tiledsl.GemmOp(m, n, k, dtype=dtype, align_a=1, align_b=4, align_c=4)
    bm = max(4, -(-m // 4) * 4)
    eps = 2.0 ** (-11 if dtype == "float16" else -8)

    def run(s, op=op, b_storage=b16):
        c = np.full((m, n), 0xFFFF, np.uint16)  # NaN in both formats
        host_cuda.gemm(op, s, a16, b_storage, c)
        got = _from_16(c, dtype)
        assert np.all(np.abs(got - ref) <= eps * np.abs(ref) + 1e-5 * k ** 0.5), s
        return c

    for smem_a, split in ((False, 1), (False, 3), (True, 1), (True, 3)):
        s = tiledsl.GemmSchedule(kernel="gemv", bm=bm, bn=64, vec=4, unroll=4, split_k=split, smem_a=smem_a)
        c = run(s)
        if smem_a:
            assert np.array_equal(run(replace(s, spare_slot=True)), c), s
    # x @ W.T (B stored as its transpose) with the column-major B's ring, lanes in groups of 8 along K
    op_t = replace(op, layout_b="col", align_b=4 if k % 4 == 0 else 2 if k % 2 == 0 else 1)
    ring = tiledsl.GemmSchedule(kernel="gemv", bm=bm, bn=64, vec=4, rn=2, unroll=2, split_k=3, smem_a=True,
                                spare_slot=True, k_lanes=8)
    run(ring, op_t, np.ascontiguousarray(b16.T))
    # ... and with A in registers, lanes in groups of 16 (schedule=None's form where the register pick splits K) and 8
    for k_lanes, split, fused in ((16, 1, False), (16, 3, False), (8, 3, True)):
        lanes = tiledsl.GemmSchedule(kernel="gemv", bm=bm, bn=64, vec=4, rn=4, unroll=2, split_k=split,
                                     split_k_fused=fused, k_lanes=k_lanes)
        run(lanes, op_t, np.ascontiguousarray(b16.T))


def test_a_broadcast_without_its_barrier_fails_in_one_order():
    """Thread 0 writes a shared value the others read, with no barrier between: in index order thread 0 runs first and
    the bug hides; in reverse order the others read the 0xff fill first. The tests run both orders."""
    source = ('extern "C" __global__ void broadcast(const float* __restrict__ x, float* __restrict__ y, int sync) {\n'
              "  __shared__ float v;\n"
              "  if (threadIdx.x == 0) v = x[0];\n"
              "  if (sync) __syncthreads();\n"
              "  y[threadIdx.x] = v;\n"
              "}\n")
    x = np.array([2.5], np.float32)
    for order, sync, right in (("forward", 0, True), ("reverse", 0, False), ("reverse", 1, True)):
        y = np.zeros(64, np.float32)
        host_cuda.launch(source, "broadcast", (1, 1, 1), (64, 1, 1), 0, [x, y, sync], order=order)
        assert bool((y == 2.5).all()) == right, (order, sync)


def test_a_missing_cp_async_wait_fails_here():
    """The FMA kernel's cp.async pipeline (3 stages): each copy's destination is poisoned when it is issued and written
    at the wait that covers its group, so the kernel without its wait, or waiting for one group fewer than it needs
    (``wait<STAGES - 1>``), multiplies NaN or ends with copies no wait covered (an error)."""
    rng = np.random.default_rng(5)
    m, n, k = 64, 64, 64
    a, b, _ = _operands(rng, m, n, k)
    op = tiledsl.GemmOp(m, n, k, align_a=1, align_b=1, align_c=1)
    s = tiledsl.GemmSchedule(bm=64, bn=64, bk=16, rm=4, rn=4, vec=1, unroll=16, stages=3)
    good = GEMM.emit(op, s).source
    wait = "tdsl_cp_async_wait<STAGES - 2>();"
    assert good.count(wait) >= 1
    ref = a.astype(np.float64) @ b.astype(np.float64)
    c = np.full((m, n), np.nan, np.float32)
    _launch_variant(op, s, good, a, b, c)
    assert _rel_err(c, ref) < _tol(k)
    for broken in (good.replace(wait, ""), good.replace(wait, "tdsl_cp_async_wait<STAGES - 1>();")):
        c = np.full((m, n), np.nan, np.float32)
        try:
            _launch_variant(op, s, broken, a, b, c)
        except host_cuda.HostRunError as exc:  # or its threads end with copies no wait covered
            assert "no wait covered" in str(exc)
        else:
            assert not _rel_err(c, ref) < _tol(k)


def test_after_a_barrier_the_next_stretch_starts_from_the_first_thread_of_the_order():
    """Thread 0 writes a shared value after a barrier and thread 1 reads it with no barrier between: in reverse order
    thread 1 runs first and reads the fill (the thread that reached the barrier last does not run on ahead of the
    others)."""
    source = ('extern "C" __global__ void after_barrier(const float* __restrict__ x, float* __restrict__ y) {\n'
              "  __shared__ float v;\n"
              "  __syncthreads();\n"
              "  if (threadIdx.x == 0) v = x[0];\n"
              "  if (threadIdx.x == 1) y[0] = v;\n"
              "}\n")
    x = np.array([2.5], np.float32)
    for order, right in (("forward", True), ("reverse", False)):
        y = np.zeros(1, np.float32)
        host_cuda.launch(source, "after_barrier", (1, 1, 1), (32, 1, 1), 0, [x, y], order=order)
        assert (y[0] == 2.5) == right, order


def test_aliased_restrict_arguments_and_out_of_range_integers_are_refused():
    """A launch the GPU would run wrongly is refused before it starts: the same array for two ``__restrict__``
    parameters one of which is written (undefined behaviour in CUDA; two read-only ones may share it), and an integer
    outside its parameter's C type (the kernel would see it wrapped)."""
    src = """extern "C" __global__ void twice(const float* __restrict__ x, float* __restrict__ y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.f * x[i];
}
extern "C" __global__ void dot(const float* __restrict__ x, const float* __restrict__ z, float* __restrict__ y) {
  y[threadIdx.x] = x[threadIdx.x] * z[threadIdx.x];
}
"""
    x, y = np.arange(8, dtype=np.float32), np.zeros(8, np.float32)
    host_cuda.launch(src, "twice", (1, 1, 1), (8, 1, 1), 0, [x, y, 8])
    assert np.array_equal(y, 2 * x)
    with pytest.raises(ValueError, match=r"same array for __restrict__ parameters 0 and 1"):
        host_cuda.launch(src, "twice", (1, 1, 1), (8, 1, 1), 0, [x, x, 8])
    for n in (2**31, -2**31 - 1):
        with pytest.raises(ValueError, match=r"int parameter given -?\d+, outside its range"):
            host_cuda.launch(src, "twice", (1, 1, 1), (8, 1, 1), 0, [x, y, n])
    host_cuda.launch(src, "dot", (1, 1, 1), (8, 1, 1), 0, [x, x, y])  # two read-only views of one array
    assert np.array_equal(y, x * x)


def test_a_write_next_to_a_buffer_ends_the_run():
    """A store one element past a 3-element array lands in the rounding to 16 bytes (no fault there): the poison
    around the buffer shows it, and the run ends with an error."""
    source = ('extern "C" __global__ void one_past(float* __restrict__ y, int n) {\n'
              "  if (threadIdx.x <= n) y[threadIdx.x] = 1.f;  // one too many\n"
              "}\n")
    with pytest.raises(host_cuda.HostRunError, match="outside it"):
        host_cuda.launch(source, "one_past", (1, 1, 1), (32, 1, 1), 0, [np.zeros(3, np.float32), 3])


# ---- the tensor-core GEMV kernel (precision="3xtf32": kernel="gemv", mma="mma_sync"), its mma.sync a warp-wide exchange
def _mma_schedule(rn=32, unroll=2, split_k=1, bk=16, bn=128, mma="mma_sync"):
    return tiledsl.GemmSchedule(kernel="gemv", mma=mma, bm=16, bn=bn, bk=bk, rn=rn, unroll=unroll, vec=4,
                                split_k=split_k)


def _mma_op(m, n, k, read_c=False, layout_b="col", mma="mma_sync"):
    """The op of the tensor-core GEMV tests: precision "3xtf32" for mma.sync on TF32, "ieee" for the FP64 tensor cores
    (mma="dmma")."""
    return tiledsl.GemmOp(m, n, k, layout_b=layout_b, align_a=4, align_b=4, align_c=4 if n % 4 == 0 else 1,
                          read_c=read_c, precision="3xtf32" if mma == "mma_sync" else "ieee")


@pytest.mark.parametrize("m,n,k,rn,unroll,split_k,bk,layout_b", [
    (16, 64, 64, 32, 2, 1, 16, "col"), (12, 72, 100, 16, 2, 1, 16, "col"), (1, 40, 36, 8, 1, 1, 16, "col"),
    (9, 129, 260, 64, 4, 1, 16, "col"), (16, 200, 1028, 32, 4, 3, 32, "col"), (13, 33, 516, 8, 3, 2, 64, "col"),
    (16, 7, 4, 8, 1, 1, 16, "col"), (5, 300, 48, 32, 1, 1, 16, "col"),
    (16, 64, 64, 32, 2, 1, 16, "row"), (12, 72, 100, 32, 2, 1, 16, "row"), (1, 4, 36, 32, 1, 1, 16, "row"),
    (9, 132, 260, 64, 4, 1, 16, "row"), (16, 200, 1028, 64, 4, 3, 32, "row"), (13, 36, 516, 32, 3, 2, 64, "row"),
    (5, 300, 48, 32, 1, 1, 16, "row")])
def test_gemv_mma_3xtf32_against_float64(m, n, k, rn, unroll, split_k, bk, layout_b, rng):
    """x @ W.T and x @ W on the tensor cores, each float32 input split into two TF32 parts (precision="3xtf32"): 8-64
    columns per warp (row-major B: groups of 32), unroll 1-4 (whole groups of steps and the guarded last steps: K ≡ 4,
    0 and 12 mod 16), one slice and 2-3 with the split-K kernel (slices 16, 32 and 64 deep at their starts) or summed in
    the kernel (split_k_fused: the same bits, whichever block arrives last), rows past M (1-16 rows), columns past N (N odd, 7, 33; with a row-major B N is a multiple of 4: 4, 36, 132): within a few
    times IEEE float32's error of float64 (each product keeps about 21 bits), the same bits in both orders, every load
    inside A and B; then alpha and beta on a given C."""
    a, b, b_storage = _operands(rng, m, n, k, layout_b)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    s = _mma_schedule(rn, unroll, split_k, bk)
    got = _run(_mma_op(m, n, k, layout_b=layout_b), s, a, b_storage)
    assert _rel_err(got, ref) < _tol(k), s  # IEEE float32's bound
    fma = _rel_err((a @ b).astype(np.float64), ref)  # what IEEE float32 gets here (NumPy's float32 product, BLAS)
    assert _rel_err(got, ref) < max(8 * fma, 1e-6), (fma, s)
    if split_k > 1:  # the slices summed in the kernel by the last block to arrive: the split-K kernel's bits
        fused = replace(s, split_k_fused=True)
        assert np.array_equal(_run(_mma_op(m, n, k, layout_b=layout_b), fused, a, b_storage), got), fused
    c0 = rng.uniform(-1, 1, (m, n)).astype(np.float32)
    got = _run(_mma_op(m, n, k, read_c=True, layout_b=layout_b), s, a, b_storage, alpha=1.5, beta=-0.5, c0=c0)
    assert _rel_err(got, 1.5 * ref - 0.5 * c0.astype(np.float64)) < 8 * _tol(k), s
    if split_k > 1:
        fused = replace(s, split_k_fused=True)
        assert np.array_equal(_run(_mma_op(m, n, k, read_c=True, layout_b=layout_b), fused, a, b_storage, alpha=1.5,
                                   beta=-0.5, c0=c0), got), fused


@pytest.mark.parametrize("layout_b,what,edit", [
    ("col", "A's fragment registers a1 and a2 swapped (the wrong PTX layout)",
     lambda src: src.replace("tdsl_mma_1688_tf32(acc[j], lo_big[e], hi_big[e], lo_big[e + 1], hi_big[e + 1], b_big",
                             "tdsl_mma_1688_tf32(acc[j], lo_big[e], lo_big[e + 1], hi_big[e], hi_big[e + 1], b_big")),
    ("col", "the small·big product left out (2xTF32)",
     lambda src: src.replace("tdsl_mma_1688_tf32(acc[j], lo_small[e], hi_small[e], lo_small[e + 1], hi_small[e + 1], "
                             "b_big[j][e], b_big[j][e + 1]);", "")),
    ("col", "B's halves read from the same two elements",
     lambda src: src.replace("b_big[j][e], b_big[j][e + 1]);\n", "b_big[j][0], b_big[j][1]);\n")),
    ("col", "the last steps read without their bounds test",
     lambda src: src.replace("const bool in = k + 4 * t < k_end;", "const bool in = true;")),
    ("row", "a fragment's column slot from the wrong component (row-major B)",
     lambda src: src.replace("[j / 4 * 4 + e][j % 4]", "[j / 4 * 4 + e][(j + 1) % 4]")),
    ("row", "the column-major B's column mapping in the epilogue (row-major B)",
     lambda src: src.replace("n0 + 32 * (j / 4) + 4 * (2 * t + i % 2) + j % 4;", "n0 + 8 * j + 2 * t + i % 2;")),
    ("row", "the last steps read without their bounds test (row-major B)",
     lambda src: src.replace("const bool in = k + 4 * t < k_end;", "const bool in = true;")),
])
def test_gemv_mma_broken_variants_fail(layout_b, what, edit, rng):
    """Each check of the tensor-core GEMV test above fails on a kernel broken on purpose: the host runner's mma.sync
    follows the PTX ISA's fragment layout, and a read past the end of B stops the run."""
    m, n, k = 16, 40, 100  # K ≡ 4 mod 16: a last step with lanes past the end
    a, b, b_col = _operands(rng, m, n, k, layout_b)
    op, s = _mma_op(m, n, k, layout_b=layout_b), _mma_schedule(rn=8 if layout_b == "col" else 32, unroll=2)
    source = GEMM.emit(op, s).source
    assert edit(source) != source, what
    if (c := _broken_run(op, s, a, b_col, edit)) is not None:
        assert not _rel_err(c, a.astype(np.float64) @ b.astype(np.float64)) < 4 * _tol(k), what


@pytest.mark.parametrize("layout_b", ["col", "row"])
def test_gemv_mma_3xtf32_special_values(layout_b, rng):
    """What precision="3xtf32" does with values near and past float32's range, as documented (docs/gemm.md): an
    input of magnitude at least 2^128·(1 − 2^-12) ≈ 3.40274e38, finite or infinite, makes every output it reaches NaN
    (its big part rounds to ∞ and its small part is −∞), even times 0; a NaN stays NaN; 1e36 and 3.40e38 (below the
    bound) multiply as IEEE float32 does."""
    m, n, k = 12, 40, 36
    a, b, b_storage = _operands(rng, m, n, k, layout_b)
    a[0, 5] = 3.4028e38  # past the bound, finite
    a[1, 7] = np.nan
    a[2, :] = 1e36  # large, below the bound: C stays finite (at most 36e36)
    a[3, 0], b[0, :] = 3.40e38, 0.0  # below the bound, times 0: 0
    b[9, 4] = np.inf
    b[10, :], a[4, 10] = 0.0, np.float32(3.4028e38)  # past the bound times 0: NaN (IEEE: 0)
    b_storage = b if layout_b == "row" else np.ascontiguousarray(b.T)
    got = _run(_mma_op(m, n, k, layout_b=layout_b), _mma_schedule(rn=32, unroll=2), a, b_storage)
    nan = np.isnan(got)
    assert nan[0].all() and nan[1].all() and nan[4].all() and nan[:, 4].all(), "rows 0, 1, 4 and column 4: NaN"
    rest = np.ones_like(nan)
    rest[[0, 1, 4], :], rest[:, 4] = False, False
    assert not nan[rest].any()
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert _rel_err(got[2:4][:, [j for j in range(n) if j != 4]], ref[2:4][:, [j for j in range(n) if j != 4]]) < 1e-6


@pytest.mark.parametrize("mma", ["mma_sync", "dmma"])
@pytest.mark.parametrize("layout_b", ["col", "row"])
def test_gemv_mma_strided_operands_and_tickets(layout_b, mma, rng):
    """The tensor-core GEMV kernels (3xTF32 and float64) with leading dimensions wider than the operands (A's rows K + 4 apart, B's rows N +
    8 or K + 4 apart, C's N + 4): a kernel reading K or N where it should read lda, ldb or ldc fails; the fused split-K
    leaves every arrival ticket at zero for the next launch."""
    m, n, k = 13, 36, 100
    a, b, _ = _operands(rng, m, n, k, layout_b)
    a_st = np.full((m, k + 4), np.nan, np.float32)
    a_st[:, :k] = a
    b_st = np.full((k, n + 8) if layout_b == "row" else (n, k + 4), np.nan, np.float32)
    if layout_b == "row":
        b_st[:, :n] = b
    else:
        b_st[:, :k] = b.T
    ref = a.astype(np.float64) @ b.astype(np.float64)
    for s in (_mma_schedule(rn=32, unroll=2, mma=mma), _mma_schedule(rn=32, unroll=2, split_k=3, bk=32, mma=mma),
              replace(_mma_schedule(rn=32, unroll=2, split_k=3, bk=32, mma=mma), split_k_fused=True)):
        c = np.full((m, n + 4), -7.0, np.float32)
        c[:, :n] = np.nan
        wss = host_cuda.gemm(_mma_op(m, n, k, layout_b=layout_b, mma=mma), s, a_st, b_st, c)
        assert _rel_err(c[:, :n], ref) < 4 * _tol(k), s
        assert (c[:, n:] == -7.0).all(), "a store past N into C's padding"
        if s.split_k_fused:
            assert not wss["gemm_tickets"].any(), "the last block zeroes its ticket for the next launch"


@pytest.mark.parametrize("layout_b", ["col", "row"])
def test_gemv_mma_3xtf32_chunks_keep_float32_accuracy(layout_b, rng):
    """The host runner's mma.sync cuts each float32 sum toward zero, as the tensor cores do (Fasi et al., PeerJ CS
    2021); the kernel restarts its tensor-core sums every CHUNK k16 steps and adds them with rounding, which keeps a
    4096-deep slice within the float32 bound of float64 (1e-5 of max |C|), where one chain over the slice carries the
    bias past it (3.9e-5 measured on the CPU)."""
    m, n, k = 16, 64, 4096
    a, b, b_storage = _operands(rng, m, n, k, layout_b)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    op, s = _mma_op(m, n, k, layout_b=layout_b), _mma_schedule(rn=32, unroll=2)
    c = np.full((m, n), np.nan, np.float32)
    host_cuda.gemm(op, s, a, b_storage, c)
    assert _rel_err(c, ref) < _tol(k)
    chain = "constexpr int CHUNK = 1 << 20;"  # one chunk per slice: every sum the tensor cores' own
    source = GEMM.emit(op, s).source
    assert "constexpr int CHUNK = 8;" in source
    host_cuda.gemm(op, s, a, b_storage, c, edit=lambda src: src.replace("constexpr int CHUNK = 8;", chain))
    assert not _rel_err(c, ref) < _tol(k)


@pytest.mark.parametrize("mma", ["mma_sync", "dmma"])
@pytest.mark.parametrize("layout_b", ["col", "row"])
def test_gemv_mma_every_unroll_sums_every_step_once(layout_b, mma, rng):
    """Unroll 1-8 (chunks of ⌊8 / unroll⌋ groups: 8, 8, 6, 8, 5, 6, 7 and 8 steps) over slices shorter than one group,
    empty slices (split 7 of K = 100: slices of 16) and K's tail, with small integer operands (every product and sum exact, in TF32
    and in float32): C equals the exact product, so no step is lost or counted twice. On the FP64 tensor cores (mma="dmma")
    the same, one loop of groups and a tail of single steps."""
    m, n = 13, 40
    for k, split, bk in ((4, 1, 16), (132, 3, 16), (100, 7, 16)):
        a = rng.integers(-3, 4, (m, k)).astype(np.float32)
        b = rng.integers(-3, 4, (k, n)).astype(np.float32)
        b_storage = b if layout_b == "row" else np.ascontiguousarray(b.T)
        for unroll in range(1, 9):
            s = _mma_schedule(rn=32, unroll=unroll, split_k=split, bk=bk, mma=mma)
            c = np.full((m, n), np.nan, np.float32)
            host_cuda.gemm(_mma_op(m, n, k, layout_b=layout_b, mma=mma), s, a, b_storage, c)
            assert np.array_equal(c, a @ b), (k, split, unroll)


# ---- the GEMV kernel on the FP64 tensor cores (mma="dmma": float32 inputs widened exactly, float64 sums); the host
# runner's m16n8k16 f64 mma.sync a warp-wide exchange, IEEE float64


@pytest.mark.parametrize("m,n,k,rn,unroll,split_k,bk,layout_b", [
    (16, 64, 64, 32, 2, 1, 16, "col"), (12, 72, 100, 16, 2, 1, 16, "col"), (1, 40, 36, 8, 1, 1, 16, "col"),
    (9, 129, 260, 64, 4, 1, 16, "col"), (16, 200, 1028, 32, 4, 3, 32, "col"), (13, 33, 516, 8, 3, 2, 64, "col"),
    (16, 7, 4, 8, 1, 1, 16, "col"), (5, 300, 48, 32, 1, 1, 16, "col"), (16, 40, 2052, 16, 8, 1, 16, "col"),
    (16, 64, 64, 32, 2, 1, 16, "row"), (12, 72, 100, 32, 2, 1, 16, "row"), (1, 4, 36, 32, 1, 1, 16, "row"),
    (9, 132, 260, 64, 4, 1, 16, "row"), (16, 200, 1028, 64, 4, 3, 32, "row"), (13, 36, 516, 32, 3, 2, 64, "row"),
    (5, 300, 48, 32, 1, 1, 16, "row"), (16, 36, 2052, 32, 8, 1, 16, "row")])
def test_gemv_dmma_against_float64(m, n, k, rn, unroll, split_k, bk, layout_b, rng):
    """x @ W.T and x @ W on the FP64 tensor cores (mma="dmma", precision "ieee"): 8-64 columns per warp (row-major B:
    groups of 32), unroll 1-8, K ≡ 4, 0 and 12 mod 16, one slice and 2-3 (the split-K kernel, and summed in the kernel:
    the same bits), rows past M (1-16 rows), columns past N: every element within its float64-sum bound
    (:func:`dmma_bound`: with one slice, half an ulp of float32 and K·2^-52 of Σ|a·b|; with slices, a float32 rounding
    per slice and per prefix sum; float32 sums within a slice exceed both), the same bits in both orders, every load
    inside A and B; the ring of steps (``fragment_prefetch``: slices of no whole group, one, and many) the same bits
    as the groups; then alpha and beta on a given C."""
    a, b, b_storage = _operands(rng, m, n, k, layout_b)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    s = _mma_schedule(rn, unroll, split_k, bk, mma="dmma")
    op = _mma_op(m, n, k, layout_b=layout_b, mma="dmma")
    depth = gemv_slice_depth(k, s)
    got = _run(op, s, a, b_storage)
    assert (np.abs(got - ref) <= dmma_bound(a, b, ref, depth)).all(), s
    ring = replace(s, fragment_prefetch=True)
    assert np.array_equal(_run(op, ring, a, b_storage), got), ring
    if split_k > 1:  # the slices summed in the kernel by the last block to arrive: the split-K kernel's bits
        fused = replace(s, split_k_fused=True)
        assert np.array_equal(_run(op, fused, a, b_storage), got), fused
    c0 = rng.uniform(-1, 1, (m, n)).astype(np.float32)
    op_c = _mma_op(m, n, k, read_c=True, layout_b=layout_b, mma="dmma")
    got = _run(op_c, s, a, b_storage, alpha=1.5, beta=-0.5, c0=c0)
    want = 1.5 * ref - 0.5 * c0.astype(np.float64)
    bound = 1.5 * dmma_bound(a, b, ref, depth) + 2.0**-24 * (np.abs(want) + 0.5 * np.abs(c0) + 1.5 * np.abs(ref))
    assert (np.abs(got - want) <= bound).all(), s
    if split_k > 1:
        fused = replace(s, split_k_fused=True)
        assert np.array_equal(_run(op_c, fused, a, b_storage, alpha=1.5, beta=-0.5, c0=c0), got), fused


@pytest.mark.parametrize("m,n,k,unroll,split_k,bk,ldb", [
    (16, 67, 64, 2, 1, 16, 67), (9, 37, 100, 2, 1, 16, 37), (12, 131, 520, 3, 2, 64, 131), (16, 1, 36, 1, 1, 16, 1),
    (5, 2, 44, 4, 1, 16, 2), (16, 3, 268, 2, 3, 32, 3), (13, 70, 1028, 4, 1, 16, 70), (16, 255, 1024, 2, 4, 16, 255),
    (11, 33, 200, 2, 2, 16, 37), (16, 65, 76, 1, 1, 16, 66)])
def test_gemv_dmma_reads_an_unaligned_w_four_bytes_at_a_time(m, n, k, unroll, split_k, bk, ldb, rng):
    """x @ W whose rows of W do not start 16-byte aligned (N ≡ 1, 2, 3 mod 4; N = 1-3; ldb wider than N, its padding
    NaN; K ≡ 0, 4, 8 and 12 mod 16; one slice and 2-4; unroll 1-4), read 4 bytes at a time (vec=1), the groups and the
    ring: C equals bit for bit the 16-byte kernel's C on the same W padded to a multiple of 4 columns (the same
    elements into the same sums), within the float64 bound of the product, every read inside W — K·ldb is a multiple
    of 4, so W ends on a 16-byte boundary against unmapped memory and a read past it stops the run (a vector that
    crosses N in W's last row); with split-K the slices summed in the kernel too (the same bits), and alpha and beta
    on a given C."""
    a, b, _ = _operands(rng, m, n, k)
    w = np.full((k, ldb), np.nan, np.float32)  # W's storage: its rows ldb apart, the padding NaN (never stored)
    w[:, :n] = b
    n4 = -(-n // 4) * 4
    b_pad = np.zeros((k, n4), np.float32)
    b_pad[:, :n] = b
    ref = a.astype(np.float64) @ b.astype(np.float64)
    op = tiledsl.GemmOp(m, n, k, layout_b="row", align_a=4, align_b=1, align_c=1)
    for ring in (False, True):
        s = replace(_mma_schedule(32 if n4 <= 32 else 64, unroll, split_k, bk, mma="dmma"), fragment_prefetch=ring)
        narrow = replace(s, vec=1)
        got = _run(op, narrow, a, w)
        assert (np.abs(got - ref) <= dmma_bound(a, b, ref, gemv_slice_depth(k, s))).all(), s
        assert np.array_equal(got, _run(_mma_op(m, n4, k, layout_b="row", mma="dmma"), s, a, b_pad)[:, :n]), s
        if split_k > 1:
            assert np.array_equal(_run(op, replace(narrow, split_k_fused=True), a, w), got), s
    c0 = rng.uniform(-1, 1, (m, n)).astype(np.float32)
    got = _run(replace(op, read_c=True), narrow, a, w, alpha=1.5, beta=-0.5, c0=c0)
    want = 1.5 * ref - 0.5 * c0.astype(np.float64)
    bound = 1.5 * dmma_bound(a, b, ref, gemv_slice_depth(k, s)) + 2.0**-24 * (np.abs(want) + 0.5 * np.abs(c0)
                                                                             + 1.5 * np.abs(ref))
    assert (np.abs(got - want) <= bound).all(), narrow


@pytest.mark.parametrize("ring", [False, True])
@pytest.mark.parametrize("what,edit", [
    ("whole steps through W's last row",
     lambda src: src.replace("const int k_whole = min(k_end, K - 1);", "const int k_whole = k_end;")),
    ("the last steps' vectors read whole past N",
     lambda src: src.replace("tdsl_ldcs4_upto(B + (long long)(k) * ldb + b_at[v], last)",
                             "tdsl_ldcs4(B + (long long)(k) * ldb + b_at[v])")),
])
def test_gemv_dmma_unaligned_w_broken_variants_fail(what, edit, ring, rng):
    """The bounds that keep the 4-byte reads of an unaligned W inside it: without either the run stops on a read past
    W's end (the host runner's buffers end against unmapped memory), in the groups and the ring."""
    m, n, k = 16, 37, 64  # K a multiple of 16: the last step is whole; K·N a multiple of 4: W ends on 16 bytes
    a, b, _ = _operands(rng, m, n, k)
    op = tiledsl.GemmOp(m, n, k, layout_b="row", align_a=4, align_b=1, align_c=1)
    s = replace(_mma_schedule(64, 2, mma="dmma"), vec=1, fragment_prefetch=ring)
    source = GEMM.emit(op, s).source
    assert edit(source) != source, what
    assert _broken_run(op, s, a, b, edit) is None, what


def test_gemv_dmma_one_slice_is_nearly_correctly_rounded(rng):
    """With one slice every product is exact and the sums are float64's: on 16×64×4096 at least 99 % of C is A·B
    rounded to float32 (correct rounding), where float32 FMA chains (NumPy's float32 product, here) get far fewer: the
    kernel's sums are float64 from its loads to its last rounding."""
    m, n, k = 16, 64, 4096
    a, b, b_storage = _operands(rng, m, n, k, "col")
    ref = a.astype(np.float64) @ b.astype(np.float64)
    c = np.full((m, n), np.nan, np.float32)
    host_cuda.gemm(_mma_op(m, n, k, mma="dmma"), _mma_schedule(rn=32, unroll=2, mma="dmma"), a, b_storage, c)
    rounded = ref.astype(np.float32)
    assert np.mean(c == rounded) >= 0.99
    assert np.mean((a @ b) == rounded) < 0.9  # float32 sums: the check above can tell them apart


@pytest.mark.parametrize("layout_b,what,edit", [
    ("col", "A's fragment registers in row order (the wrong PTX layout)",
     lambda src: src.replace("{lo.x, hi.x, lo.y, hi.y, lo.z, hi.z, lo.w, hi.w}",
                             "{lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w}")),
    ("col", "B's registers from swapped components",
     lambda src: src.replace("{b[j].x, b[j].y, b[j].z, b[j].w}", "{b[j].y, b[j].x, b[j].z, b[j].w}")),
    ("col", "the sums rounded to float32 after every step",
     lambda src: src.replace("tdsl_mma_16816_f64(acc[j], a, bj);",
                             "tdsl_mma_16816_f64(acc[j], a, bj);\n    for (double& x : acc[j]) x = static_cast<float>(x);")),
    ("col", "the last steps read without their bounds test",
     lambda src: src.replace("const bool in = k + 4 * t < k_end;", "const bool in = true;")),
    ("row", "a fragment's column slot from the wrong component (row-major B)",
     lambda src: src.replace("bd[j / 4 * 4 + 1][j % 4]", "bd[j / 4 * 4 + 1][(j + 1) % 4]")),
    ("row", "the column-major B's column mapping in the epilogue (row-major B)",
     lambda src: src.replace("n0 + 32 * (j / 4) + 4 * (2 * t + i % 2) + j % 4;", "n0 + 8 * j + 2 * t + i % 2;")),
])
def test_gemv_dmma_broken_variants_fail(layout_b, what, edit, rng):
    """Each check of the FP64 tensor-core test above fails on a kernel broken on purpose: the host runner's float64
    mma.sync follows the PTX ISA's fragment layout, a read past the end of B stops the run, and float32 sums miss the
    float64 bound."""
    m, n, k = 16, 40, 1028  # K ≡ 4 mod 16: a last step with lanes past the end
    a, b, b_col = _operands(rng, m, n, k, layout_b)
    op, s = _mma_op(m, n, k, layout_b=layout_b, mma="dmma"), _mma_schedule(rn=8 if layout_b == "col" else 32,
                                                                            unroll=2, mma="dmma")
    source = GEMM.emit(op, s).source
    assert edit(source) != source, what
    ref = a.astype(np.float64) @ b.astype(np.float64)
    if (c := _broken_run(op, s, a, b_col, edit)) is None:
        return
    assert not (np.abs(c - ref) <= dmma_bound(a, b, ref, k)).all(), what
    if "float32" in what:  # and with K split three ways: the per-slice bound still tells float32 sums apart
        split = replace(s, split_k=3, bk=32)
        c = ref.astype(np.float32)  # within the bound: only what the split kernel writes can break it
        host_cuda.gemm(op, split, a, b_col, c, edit=edit)
        assert not (np.abs(c - ref) <= dmma_bound(a, b, ref, gemv_slice_depth(k, split))).all(), what


@pytest.mark.parametrize("what,edit", [
    ("the ring's last steps never multiplied",
     lambda src: src.replace("for (int u = 0; u < UNROLL; ++u) multiply_step(acc, lo[u], hi[u], b[u]);\n", "", 1)),
    ("a slot refilled one step too far ahead",
     lambda src: src.replace("k + 16 * (u + UNROLL)", "k + 16 * (u + UNROLL + 1)")),
    ("refills while the ring's next group does not fit",
     lambda src: src.replace("k + 32 * UNROLL <= k_end", "k + 16 * UNROLL < k_end")),
])
def test_gemv_dmma_ring_broken_variants_fail(what, edit, rng):
    """The ring test above (the same bits as the groups) fails on a ring broken on purpose: steps lost, steps taken
    twice or from past the slice (a read past B's end stops the run)."""
    m, n, k = 16, 40, 1028  # 64 steps and a partial one: the ring's loop, its last group and the tail all run
    a, b, b_col = _operands(rng, m, n, k, "col")
    op, s = _mma_op(m, n, k, mma="dmma"), _mma_schedule(rn=8, unroll=4, mma="dmma")
    ring = replace(s, fragment_prefetch=True)
    source = GEMM.emit(op, ring).source
    assert edit(source) != source, what
    if (c := _broken_run(op, ring, a, b_col, edit)) is not None:
        assert not np.array_equal(c, _run(op, s, a, b_col)), what


@pytest.mark.parametrize("layout_b", ["col", "row"])
def test_gemv_dmma_special_values(layout_b, rng):
    """IEEE arithmetic in float64, rounded to float32 once (docs/gemm.md): a NaN input makes its row NaN, ∞·0 is NaN, an
    ∞ of B makes its column ±∞ (one infinite term per output), and two products past float32's range that cancel leave
    the exact 0 (3.4e38·2 − 3.4e38·2, row 0's only nonzero terms: float32 sums give ∞ − ∞ = NaN there; beside other
    terms float64 would absorb those of them below the large sum's ulp)."""
    a, b = special_operands(rng)
    (m, k), n = a.shape, b.shape[1]
    b_storage = b if layout_b == "row" else np.ascontiguousarray(b.T)
    got = _run(_mma_op(m, n, k, layout_b=layout_b, mma="dmma"), _mma_schedule(rn=32, unroll=2, mma="dmma"), a,
               b_storage)
    check_special_values(got, a, b)


def test_gemv_dmma_applies_alpha_and_beta_before_its_one_rounding():
    """With one slice the kernel rounds alpha·sum + beta·C to float32 once: a sum of 2^24 + 1 (exact in float64, a tie
    between two float32 values) times alpha = 1.5 is 25165825.5, which rounds to 25165826; rounding the sum first gives
    2^24 and then 25165824. With beta = 1 and C = 1: 2^24 + 2, where rounding the sum first gives 2^24."""
    m, n, k = 16, 40, 36
    a = np.zeros((m, k), np.float32)
    b = np.zeros((k, n), np.float32)
    a[:, 0], a[:, 1], b[0, :], b[1, :] = 4096.0, 1.0, 4096.0, 1.0  # each element of C: 4096·4096 + 1 = 2^24 + 1
    s = _mma_schedule(rn=32, unroll=2, mma="dmma")
    for layout_b in ("col", "row"):
        b_storage = b if layout_b == "row" else np.ascontiguousarray(b.T)
        got = _run(_mma_op(m, n, k, layout_b=layout_b, mma="dmma"), s, a, b_storage, alpha=1.5)
        assert (got == np.float32(25165826.0)).all(), np.unique(got)
        got = _run(_mma_op(m, n, k, read_c=True, layout_b=layout_b, mma="dmma"), s, a, b_storage, alpha=1.0, beta=1.0,
                   c0=np.ones((m, n), np.float32))
        assert (got == np.float32(2.0**24 + 2)).all(), np.unique(got)


def _gemv_dmma_proto(monkeypatch):
    """benchmarks/gemv_dmma_proto.py as a module (it imports CuPy, no GPU needed; NVRTC compiles its kernels)."""
    import importlib

    pytest.importorskip("cupy")
    if nvrtc_problem():
        pytest.skip(f"NVRTC: {nvrtc_problem()}")
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "benchmarks"))
    return importlib.import_module("gemv_dmma_proto")


def _proto_partial_sums(proto, op, s, variants, rng, kps) -> dict:
    """Each prototype variant's kernel (``proto.kernel_for``) run on the host over x @ W.T's operands: random, and with
    2^60 then -2^60 at the first two steps of every K slice of ``kps`` (where the order of the steps shows); {(variant,
    "random" | "order"): the slices' partial sums}, "kernels": {variant: (Kernel, grid)}, "ref": the float64 product."""
    m, n, k = op.m, op.n, op.k
    a = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    a_big, w_big = a.copy(), w.copy()
    for start in range(0, k, kps):
        a_big[:, start], w_big[:, start] = 2.0**30, 2.0**30
        a_big[:, start + 16], w_big[:, start + 16] = 2.0**30, -(2.0**30)
    out = {"kernels": {}, "ref": a.astype(np.float64) @ w.T.astype(np.float64)}
    for variant in variants:
        kern, grid, (kind, extra) = proto.kernel_for(op, s, variant)
        out["kernels"][variant] = kern, grid
        # the last parameter: alpha (the library's kernel), or the prototype's slice depth
        last = 1.0 if kind in ("lib", "lib_sum") else extra[0] if isinstance(extra, tuple) else extra
        for data, (x, y) in (("random", (a, w)), ("order", (a_big, w_big))):
            ws = np.full((grid[1], m, n), np.nan, np.float32)
            host_cuda.launch(kern.source, kern.name, grid, kern.block, kern.dynamic_smem_bytes,
                             [x, y, ws, m, n, k, k, k, n, last])
            out[variant, data] = ws
    return out


@pytest.mark.parametrize("m,n,k", [(12, 72, 1100), (20, 40, 516)])
def test_gemv_dmma_proto_slice_a_sums_what_the_library_kernel_sums(m, n, k, rng, monkeypatch):
    """benchmarks/gemv_dmma_proto.py's slice_a and slice_p variants (A's whole K slice staged once per block in shared
    memory, unroll 2 to 8, 4 and 5 blocks per SM; slice_p software-pipelined: two register buffers of W) against the library's FP64 GEMV kernel at the same K slices (base512): every slice's
    partial sums bit for bit, on random data (within float32's tolerance of a float64 product) and on data where the
    order of the steps shows (a product of 2^60 and its negative in a slice's first two steps: a kernel adding the
    same steps in another order rounds the rest differently); K ≡ 12 or 4 mod 16, a short last slice, rows past M, a
    second group of rows (20 rows), columns past N. A prototype measured on a GPU is only worth its timing if it
    computes what the library does."""
    proto = _gemv_dmma_proto(monkeypatch)
    op = tiledsl.GemmOp(m, n, k, layout_b="col")
    s = default_schedule(tiledsl.GemmOp(16, 22016, 4096, layout_b="col"), H200)  # the FP64 pick
    assert s.mma == "dmma"
    kps = -(-k // (proto.slice_a_split(op) * 16)) * 16
    sums = _proto_partial_sums(proto, op, s, ("base512", *(v for v in proto.SLICE_A_FORMS if v != "base512")), rng, kps)
    for variant, (kern, grid) in sums.pop("kernels").items():
        assert grid[1] == proto.slice_a_split(op), (variant, grid)
        assert kern.spill_bytes == 0 or variant in proto.SPILLING_FORMS, (variant, kern.spill_bytes)
    ref = sums.pop("ref")
    assert _rel_err(sums["base512", "random"].sum(0), ref) < _tol(k)
    for (variant, data), ws in sums.items():
        assert np.array_equal(ws, sums["base512", data]), (variant, data)


@pytest.mark.parametrize("m,n,k", [(12, 72, 1088), (20, 40, 512)])
def test_gemv_dmma_proto_bulk_sums_what_the_library_kernel_sums(m, n, k, rng, monkeypatch):
    """benchmarks/gemv_dmma_proto.py's bulk variants (W copied by cp.async.bulk into a per-warp shared-memory ring;
    on the host each copy lands when issued and a wait is the warp's barrier) at the library's K slices: every slice's
    partial sums bit for bit the library's kernel's (``base``), on random data and on data where the order of the
    steps shows (2^60 and its negative in a slice's first two steps); K a multiple of 64 as the prototype's products,
    a short last slice, rows past M, a second group of rows, columns past N. What chunk a stage holds is checked here
    (a refill of the wrong chunk fails); the copies' asynchrony is not (they land when issued on the host: a missing
    mbarrier wait passes here), the GPU run's bit comparison is."""
    proto = _gemv_dmma_proto(monkeypatch)
    op = tiledsl.GemmOp(m, n, k, layout_b="col")
    s = replace(default_schedule(tiledsl.GemmOp(16, 22016, 4096, layout_b="col"), H200), split_k=3)  # the FP64 pick
    variants = ("base", *(v for v, form in proto.BULK_FORMS.items() if not form[5]))  # the library's slices
    sums = _proto_partial_sums(proto, op, s, variants, rng, proto.bulk_k_per_split(op, s))
    for variant, (kern, grid) in sums.pop("kernels").items():
        assert grid[1] == s.split_k and kern.spill_bytes == 0, (variant, grid, kern.spill_bytes)
    ref = sums.pop("ref")
    assert _rel_err(sums["base", "random"].sum(0), ref) < _tol(k)
    for (variant, data), ws in sums.items():
        assert np.array_equal(ws, sums["base", data]), (variant, data)

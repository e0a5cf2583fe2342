"""Tensor-core GEMM (mma="mma_sync") on the GPU against a float64 reference, output poisoned with NaN first.

Inputs are float16 (CuPy) or bfloat16 (torch), products exact in float32, sums in float32; the output is
rounded to the input dtype. Tolerance on ‖C − ref‖ / ‖ref‖, with the reference computed from the *rounded*
inputs: the output rounding (2^-11 for float16, 2^-8 for bfloat16) plus float32 summation over K terms
(≈ K·2^-24, far smaller for the K here): 2e-3 for float16, 8e-3 for bfloat16.
"""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl

pytestmark = pytest.mark.gpu

TOL = {"float16": 2e-3, "bfloat16": 8e-3}
SCHEDULES = {
    "128x128x32 s4": dict(bm=128, bn=128, bk=32, stages=4),
    "64x64x32 w32 s3": dict(bm=64, bn=64, bk=32, wm=32, wn=32, stages=3),
    "128x256x64 s3": dict(bm=128, bn=256, bk=64, stages=3),
    "64x128x64 w32x64 s2": dict(bm=64, bn=128, bk=64, wm=32, wn=64, stages=2),
    "128x128x32 s4 split-K 3": dict(bm=128, bn=128, bk=32, stages=4, split_k=3),
}
SHAPES = [(1, 1, 1), (7, 13, 5), (127, 129, 65), (129, 127, 200), (16, 8, 7), (35, 845, 2560), (256, 256, 1000)]


def _mma(**kw) -> tiledsl.GemmSchedule:
    return tiledsl.GemmSchedule(mma="mma_sync", smem_pad=8, **kw)


def _layouts(layout: str) -> tuple[str, str]:
    """"NT" -> ("row", "col"): N = row-major, T = column-major, for A then B."""
    return tuple("row" if c == "N" else "col" for c in layout)


def _cupy_on_sm90(what: str):
    """CuPy, or skip the test (with ``what`` in the reason) where the GPU is not sm_90."""
    cp = pytest.importorskip("cupy")
    if cp.cuda.Device().compute_capability != "90":
        pytest.skip(f"{what} needs an sm_90 GPU")
    return cp


def _operands(dtype, m, n, k, la, lb, offset, rng):
    """A (m×k) and B (k×n) in the given layouts, sliced by ``offset`` along K (misaligned views), and
    their float64 values after rounding to ``dtype``."""
    a64 = rng.uniform(-1, 1, (m, k + offset))
    b64 = rng.uniform(-1, 1, (k + offset, n))
    if dtype == "float16":
        import cupy as cp

        def dev(x, layout):
            x = cp.asarray(x.astype(np.float16))
            return cp.asfortranarray(x) if layout == "col" else x  # genuinely column-major
        a, b = dev(a64, la)[:, offset:], dev(b64, lb)[offset:, :]
        return a, b, cp.asnumpy(a).astype(np.float64), cp.asnumpy(b).astype(np.float64)
    import torch

    def dev(x, layout):
        t = torch.tensor(x, device="cuda").to(torch.bfloat16)
        return t.t().contiguous().t() if layout == "col" else t
    a, b = dev(a64, la)[:, offset:], dev(b64, lb)[offset:, :]
    return a, b, a.double().cpu().numpy(), b.double().cpu().numpy()


def _out(dtype, m, n, rng, poison: bool):
    vals = rng.uniform(-1, 1, (m, n))
    if dtype == "float16":
        import cupy as cp

        c = cp.full((m, n), cp.nan, cp.float16) if poison else cp.asarray(vals.astype(np.float16))
        return c, (None if poison else cp.asnumpy(c).astype(np.float64))
    import torch

    c = (torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16) if poison
         else torch.tensor(vals, device="cuda").to(torch.bfloat16))
    return c, (None if poison else c.double().cpu().numpy())


def _host(c) -> np.ndarray:
    if type(c).__module__.startswith("torch"):
        return c.double().cpu().numpy()
    import cupy as cp

    return cp.asnumpy(c).astype(np.float64)


def _check(c, ref, dtype):
    got = _host(c)
    assert np.isfinite(got).all(), "output has NaN/Inf: an element was not written or NaN leaked"
    err = float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-300))
    assert err < TOL[dtype], f"relative error {err:.2e} ≥ {TOL[dtype]}"


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", list(SCHEDULES))
@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
def test_shapes_layouts(dtype, name, m, n, k, layout, rng):
    la, lb = _layouts(layout)
    a, b, ha, hb = _operands(dtype, m, n, k, la, lb, 0, rng)
    c, _ = _out(dtype, m, n, rng, poison=True)
    out = tiledsl.gemm(a, b, c, alpha=1.5, schedule=_mma(**SCHEDULES[name]))
    _check(out, 1.5 * ha @ hb, dtype)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["128x128x32 s4", "128x128x32 s4 split-K 3"])
@pytest.mark.parametrize("layout", ["NN", "TT"])
def test_alpha_beta_and_misaligned_views(dtype, name, layout, rng):
    """beta ≠ 0 reads C; K sliced by one element makes every operand address odd (2-byte copies)."""
    la, lb = _layouts(layout)
    m, n, k = 131, 97, 301
    for offset in (0, 1):
        a, b, ha, hb = _operands(dtype, m, n, k, la, lb, offset, rng)
        c, hc = _out(dtype, m, n, rng, poison=False)
        out = tiledsl.gemm(a, b, c, alpha=-0.75, beta=0.5, schedule=_mma(**SCHEDULES[name]))
        _check(out, -0.75 * ha @ hb + 0.5 * hc, dtype)


WGMMA_SCHEDULES = {
    "wgmma 128x256x64 s4": dict(bm=128, bn=256, stages=4),
    "wgmma 256x128x64 s4": dict(bm=256, bn=128, stages=4),
    "wgmma 64x64x64 s3": dict(bm=64, bn=64, stages=3),
    "wgmma 128x128x64 s6 split-K 3": dict(bm=128, bn=128, stages=6, split_k=3),
    "wgmma 128x256x64 s4 producer warpgroup": dict(bm=128, bn=256, stages=4, warp_specialize=True),
    "wgmma 128x128x64 s4 producer warpgroup split-K 2": dict(bm=128, bn=128, stages=4, warp_specialize=True,
                                                             split_k=2),
    "wgmma 128x256x64 s4 producer warpgroup persistent": dict(bm=128, bn=256, stages=4, warp_specialize=True,
                                                              persistent=True),
}
PERSISTENT_SCHEDULES = {
    "128x256x64 s4": dict(bm=128, bn=256, stages=4),
    "128x128x64 s6": dict(bm=128, bn=128, stages=6),
    "128x256x64 s3 swizzle 1": dict(bm=128, bn=256, stages=3, swizzle=1),
}
WGMMA_SHAPES = [(8, 8, 8), (8, 24, 64), (128, 136, 72), (136, 128, 200), (40, 848, 2560), (256, 304, 1000)]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", list(WGMMA_SCHEDULES))
@pytest.mark.parametrize("m,n,k", WGMMA_SHAPES)
@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
def test_wgmma_shapes_layouts(dtype, name, m, n, k, layout, rng):
    """sm_90a wgmma: every extent a multiple of 8 (16-byte copies along any contiguous dimension)."""
    _cupy_on_sm90("wgmma")
    la, lb = _layouts(layout)
    a, b, ha, hb = _operands(dtype, m, n, k, la, lb, 0, rng)
    c, hc = _out(dtype, m, n, rng, poison=False)
    s = tiledsl.GemmSchedule(mma="wgmma", bk=64, **WGMMA_SCHEDULES[name])
    out = tiledsl.gemm(a, b, c, alpha=1.5, beta=-0.5, schedule=s)
    _check(out, 1.5 * ha @ hb - 0.5 * hc, dtype)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", list(PERSISTENT_SCHEDULES))
@pytest.mark.parametrize("m,n,k", [(1544, 4104, 328), (4096, 4096, 256), (2048, 4096, 64), (1032, 8200, 1000)])
@pytest.mark.parametrize("layout", ["NN", "NT", "TN"])
def test_persistent_blocks_walk_many_tiles(dtype, name, m, n, k, layout, rng):
    """More C tiles than SMs, so each persistent block computes several (up to 8) with the pipeline's stages and
    barrier phases carried from one tile to the next: K tiles per C tile fewer than, equal to, and not a
    multiple of the stages; edge tiles in M and N."""
    _cupy_on_sm90("wgmma")
    la, lb = _layouts(layout)
    a, b, ha, hb = _operands(dtype, m, n, k, la, lb, 0, rng)
    c, hc = _out(dtype, m, n, rng, poison=False)
    s = tiledsl.GemmSchedule(mma="wgmma", bk=64, warp_specialize=True, persistent=True, **PERSISTENT_SCHEDULES[name])
    plan = tiledsl.plan(tiledsl.GemmOp(m, n, k, dtype=dtype, layout_a=la, layout_b=lb, align_a=8, align_b=8,
                                       align_c=8, read_c=True), s, device=tiledsl.Target.current())
    assert plan.grid[0] == tiledsl.Target.current().sm_count < -(-m // s.bm) * -(-n // s.bn)
    out = tiledsl.gemm(a, b, c, alpha=1.5, beta=-0.5, schedule=s)
    _check(out, 1.5 * ha @ hb - 0.5 * hc, dtype)


def test_wgmma_refuses_misaligned_operands_by_rule(rng):
    a, b, _, _ = _operands("float16", 64, 64, 64, "row", "row", 1, rng)  # K sliced by one: odd addresses
    with pytest.raises(tiledsl.ScheduleError, match="wgmma_16_byte_operands"):
        tiledsl.gemm(a, b, schedule=tiledsl.GemmSchedule(mma="wgmma", bm=128, bn=128, bk=64, stages=4))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("m,n,k", [(1, 4096, 4096), (35, 8457, 2560), (512, 512, 512), (1000, 1000, 1000)])
def test_default_schedule_uses_tensor_cores(dtype, m, n, k, rng):
    a, b, ha, hb = _operands(dtype, m, n, k, "row", "row", 0, rng)
    c, _ = _out(dtype, m, n, rng, poison=True)
    out = tiledsl.gemm(a, b, c)
    _check(out, ha @ hb, dtype)
    kernel = tiledsl.compile(tiledsl.GemmOp(m, n, k, dtype=dtype, align_a=8 if k % 8 == 0 else 1,
                                            align_b=8 if n % 8 == 0 else 1, align_c=8 if n % 8 == 0 else 1))
    if m == 1:  # decode: one row of C reads B once on the FMA units (GEMV-style kernel)
        assert kernel.schedule.kernel == "gemv"
        return
    assert kernel.schedule.mma in ("mma_sync", "wgmma")
    assert "mma.sync.aligned.m16n8k16" in kernel.source or "wgmma.mma_async" in kernel.source


# ---- precision="tf32": float32 inputs on wgmma (m64nNk8.tf32), TMA, both operands K-major -------------------
# Inputs are read with a 10-bit mantissa (relative rounding 2^-11, or 2^-10 where the tensor cores truncate), the
# products summed in float32: for uniform inputs the relative Frobenius error is about 1e-3; 5e-3 bounds it with
# room for K up to a few thousand.
TF32_TOL = 5e-3
TF32_SCHEDULES = {
    "tf32 128x256x32 s4": dict(bm=128, bn=256, bk=32, stages=4),
    "tf32 128x128x32 s6 split-K 2": dict(bm=128, bn=128, bk=32, stages=6, split_k=2),
    "tf32 128x256x32 s4 persistent": dict(bm=128, bn=256, bk=32, stages=4, persistent=True),
}


@pytest.mark.parametrize("name", list(TF32_SCHEDULES))
@pytest.mark.parametrize("m,n,k", [(4, 4, 4), (136, 128, 200), (40, 848, 2560), (256, 300, 1000), (2056, 4096, 200)])
@pytest.mark.parametrize("beta", [0.0, -0.5])
def test_tf32_wgmma_against_float64(name, m, n, k, beta, rng):
    cp = _cupy_on_sm90("tf32 wgmma")
    a64, b64 = rng.uniform(-1, 1, (m, k)), rng.uniform(-1, 1, (k, n))
    a = cp.asarray(a64.astype(np.float32))
    b = cp.asfortranarray(cp.asarray(b64.astype(np.float32)))  # K-major B: x @ W.T with a row-major W
    c0 = rng.uniform(-1, 1, (m, n)).astype(np.float32)
    c = cp.asarray(c0) if beta else cp.full((m, n), cp.nan, cp.float32)
    s = tiledsl.GemmSchedule(mma="wgmma", warp_specialize=True, **TF32_SCHEDULES[name])
    out = tiledsl.gemm(a, b, c, alpha=1.5, beta=beta, schedule=s, precision="tf32")
    ref = 1.5 * a64.astype(np.float32).astype(np.float64) @ b64.astype(np.float32).astype(np.float64)
    if beta:
        ref += beta * c0.astype(np.float64)
    got = cp.asnumpy(out).astype(np.float64)
    assert np.isfinite(got).all()
    err = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
    assert err < TF32_TOL, f"relative error {err:.2e}"
    assert err > 1e-7  # the product really ran in tf32 (an exact float32 product is ~1e-7 off)


@pytest.mark.parametrize("layout", ["NN", "TN", "TT"])
def test_tf32_default_schedule_copies_other_layouts_k_major(layout, rng):
    """schedule=None with precision="tf32": any layout (an MN-major operand is copied K-major first), torch in
    → torch out; a misaligned K falls back to the exact FMA kernel."""
    torch = pytest.importorskip("torch")
    m, n, k = 300, 520, 1024
    a = torch.tensor(rng.uniform(-1, 1, (m, k)), device="cuda", dtype=torch.float32)
    b = torch.tensor(rng.uniform(-1, 1, (k, n)), device="cuda", dtype=torch.float32)
    if layout[0] == "T":
        a = a.t().contiguous().t()
    if layout[1] == "T":
        b = b.t().contiguous().t()
    out = tiledsl.gemm(a, b, precision="tf32")
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    ref = a.double() @ b.double()
    err = float((out.double() - ref).norm() / ref.norm())
    assert 1e-7 < err < TF32_TOL, err
    odd = tiledsl.gemm(a[:, 1:], b[1:, :], precision="tf32")  # K = 1023: no 16-byte rows, exact FMA instead
    ref = a[:, 1:].double() @ b[1:, :].double()
    assert float((odd.double() - ref).norm() / ref.norm()) < 1e-5


def test_tf32_k_major_copies_are_cached_and_follow_new_data(rng):
    """MN-major operands are copied K-major by the transpose kernel into per-stream scratch buffers: repeated
    calls replay from the launch cache on fresh data; shapes of different sizes share (and grow) the buffers;
    a column-major C (computed as Cᵀ = Bᵀ·Aᵀ), a B with padded rows and a column-major A."""
    cp = _cupy_on_sm90("tf32 wgmma")
    from tiledsl import cache

    def case(m, n, k, a_col=False, c_col=False, b_pad=0):
        a = cp.asarray(rng.uniform(-1, 1, (m, k)).astype(np.float32))
        a = cp.asfortranarray(a) if a_col else a
        b = cp.asarray(rng.uniform(-1, 1, (k, n + b_pad)).astype(np.float32))[:, :n]
        c = cp.full((n, m), cp.nan, cp.float32).T if c_col else cp.full((m, n), cp.nan, cp.float32)
        return a, b, c

    cases = [case(256, 520, 1024), case(1000, 136, 200, a_col=True), case(300, 264, 512, c_col=True),
             case(512, 256, 256, b_pad=8), case(2056, 4096, 200)]
    for rnd in range(3):
        for a, b, c in cases:
            a[...] = cp.asarray(rng.uniform(-1, 1, a.shape).astype(np.float32))  # fresh data in place, both
            b[...] = cp.asarray(rng.uniform(-1, 1, b.shape).astype(np.float32))  # operands (b: padded view)
            c[...] = cp.nan
            hits = cache.LAUNCHES.hits
            out = tiledsl.gemm(a, b, c, precision="tf32")
            assert out is c
            assert rnd == 0 or cache.LAUNCHES.hits == hits + 1  # repeats replay the cached launch
            ref = cp.asnumpy(a).astype(np.float64) @ cp.asnumpy(b).astype(np.float64)
            got = cp.asnumpy(c).astype(np.float64)
            assert np.isfinite(got).all()
            err = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
            assert 1e-7 < err < TF32_TOL, (a.shape, b.shape, err)

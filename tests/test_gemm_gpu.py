"""GEMM on the GPU against a float64 reference: fresh random data, output poisoned with NaN first.

Relative error ‖C − ref‖ / ‖ref‖ < 1e-5 for float32 (float32 accumulation over K ≤ 4096 terms of
uniform data lands near 1e-7 to 1e-6).
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest
from dmma_cases import check_special_values, dmma_bound, special_operands

import tiledsl
from tiledsl import dependent
from tiledsl.gemm import default_schedule

pytestmark = pytest.mark.gpu

SHAPES = [(1, 1, 1), (7, 13, 5), (127, 129, 65), (128, 128, 8), (1000, 1000, 1000), (35, 8457, 2560),
          (4096, 4096, 4096), (1, 768, 768), (129, 1, 127)]


def _cp():
    import cupy

    return cupy


def _rand(shape, rng, dtype="float32", layout="row"):
    cp = _cp()
    host = rng.uniform(-1.0, 1.0, size=shape)
    if layout == "col":  # column-major: the transpose of a row-major (cols, rows) array (host.T.astype keeps
        x = cp.asarray(np.ascontiguousarray(host.T).astype(dtype)).T  # host.T's Fortran order: a C-order copy first)
        assert x.flags.f_contiguous, x.strides
        return x, host
    return cp.asarray(host.astype(dtype)), host


def _rel_err(c, ref) -> float:
    got = c.double().cpu().numpy() if type(c).__module__.startswith("torch") else _cp().asnumpy(c)
    got = got.astype(np.float64)
    assert np.isfinite(got).all(), "output has NaN/Inf: an element was not written or NaN leaked"
    return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-300))


def _operands(m, n, k, la, lb, rng):
    """A (M×K, layout ``la``) and B (K×N, ``lb``) on the device with their float64 host copies, and their GemmOp."""
    a, ha = _rand((m, k), rng, layout=la)
    b, hb = _rand((k, n), rng, layout=lb)
    return a, ha, b, hb, tiledsl.GemmOp(m, n, k, layout_a=la, layout_b=lb)


def _gemm_nan_out(a, b, **kw):
    cp = _cp()
    c = cp.full((a.shape[0], b.shape[1]), cp.nan, dtype=a.dtype)
    return tiledsl.gemm(a, b, c, **kw)


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_shapes_default_schedule(m, n, k, rng):
    a, ha = _rand((m, k), rng)
    b, hb = _rand((k, n), rng)
    c = _gemm_nan_out(a, b)
    assert _rel_err(c, ha @ hb) < 1e-5


@pytest.mark.parametrize("la", ["row", "col"])
@pytest.mark.parametrize("lb", ["row", "col"])
@pytest.mark.parametrize("m,n,k", [(127, 129, 65), (256, 192, 320), (1000, 1000, 1000)])
def test_layouts(la, lb, m, n, k, rng):
    a, ha = _rand((m, k), rng, layout=la)
    b, hb = _rand((k, n), rng, layout=lb)
    c = tiledsl.gemm(a, b)
    assert _rel_err(c, ha @ hb) < 1e-5


def test_transposed_view_is_not_copied(rng):
    cp = _cp()
    at = cp.asarray(rng.uniform(-1, 1, (300, 200)).astype(np.float32))
    b = cp.asarray(rng.uniform(-1, 1, (300, 100)).astype(np.float32))
    c = tiledsl.gemm(at.T, b)
    assert _rel_err(c, cp.asnumpy(at).astype(np.float64).T @ cp.asnumpy(b).astype(np.float64)) < 1e-5


@pytest.mark.parametrize("shape_a,sl", [((130, 67), (slice(None), slice(1, None))),
                                        ((131, 70), (slice(1, None), slice(3, 68))),
                                        ((260, 70), (slice(None, None, 2), slice(None)))])
def test_sliced_operands_odd_leading_dimensions(shape_a, sl, rng):
    cp = _cp()
    big = cp.asarray(rng.uniform(-1, 1, shape_a).astype(np.float32))
    a = big[sl]
    b = cp.asarray(rng.uniform(-1, 1, (a.shape[1], 97)).astype(np.float32))
    bsl = cp.asarray(rng.uniform(-1, 1, (a.shape[1], 99)).astype(np.float32))[:, 1:-1]
    for bb in (b, bsl):
        ref = cp.asnumpy(a).astype(np.float64) @ cp.asnumpy(bb).astype(np.float64)
        assert _rel_err(_gemm_nan_out(a, bb), ref) < 1e-5


def test_alpha_beta_in_place(rng):
    cp = _cp()
    a, ha = _rand((300, 200), rng)
    b, hb = _rand((200, 150), rng)
    c0 = rng.uniform(-1, 1, (300, 150))
    c = cp.asarray(c0.astype(np.float32))
    out = tiledsl.gemm(a, b, c, alpha=2.0, beta=-0.5)
    assert out is c
    assert _rel_err(c, 2.0 * (ha @ hb) - 0.5 * c0) < 1e-5


def test_beta_zero_never_reads_nan_c(rng):
    a, ha = _rand((129, 65), rng)
    b, hb = _rand((65, 131), rng)
    c = _gemm_nan_out(a, b, alpha=3.0, beta=0.0)
    assert _rel_err(c, 3.0 * (ha @ hb)) < 1e-5


def test_column_major_and_strided_c(rng):
    cp = _cp()
    a, ha = _rand((70, 50), rng)
    b, hb = _rand((50, 90), rng)
    c_col = cp.full((90, 70), cp.nan, dtype=cp.float32).T   # column-major output
    tiledsl.gemm(a, b, c_col)
    assert _rel_err(c_col, ha @ hb) < 1e-5
    c_big = cp.full((140, 180), cp.nan, dtype=cp.float32)
    c_str = c_big[::2, ::2]                                  # no unit stride
    tiledsl.gemm(a, b, c_str)
    assert _rel_err(c_str, ha @ hb) < 1e-5
    assert bool(cp.isnan(c_big[1::2]).all())                 # untouched rows stay poisoned


def test_empty_dimensions_like_numpy(rng):
    cp = _cp()
    assert tiledsl.gemm(cp.ones((0, 5), cp.float32), cp.ones((5, 3), cp.float32)).shape == (0, 3)
    z = tiledsl.gemm(cp.ones((4, 0), cp.float32), cp.ones((0, 3), cp.float32))
    assert z.shape == (4, 3) and not bool(z.any())
    c = cp.full((4, 3), 2.0, cp.float32)
    tiledsl.gemm(cp.ones((4, 0), cp.float32), cp.ones((0, 3), cp.float32), c, beta=0.5)
    assert bool((c == 1.0).all())


@pytest.mark.parametrize("name", list(tiledsl.presets("gemm")))
def test_every_preset(name, rng):
    s = tiledsl.preset("gemm", name)
    dtype, tol = ("float32", 1e-5) if s.mma == "fma" else ("float16", 2e-3)  # tensor cores take 16-bit
    if name.startswith("tf32"):  # float32 read as tf32 (10-bit mantissa); the API copies B K-major first
        a, _ = _rand((256, 512), rng, "float32")
        b, _ = _rand((512, 384), rng, "float32")
        ref = _cp().asnumpy(a).astype(np.float64) @ _cp().asnumpy(b).astype(np.float64)
        assert _rel_err(tiledsl.gemm(a, b, schedule=s, precision="tf32"), ref) < 5e-3
        return
    # wgmma copies 16 bytes along every contiguous dimension: its shapes keep K and N multiples of 8
    shapes = ((128, 136, 72), (512, 384, 256)) if s.mma == "wgmma" else ((127, 129, 65), (512, 384, 256))
    for m, n, k in shapes:
        a, _ = _rand((m, k), rng, dtype)
        b, _ = _rand((k, n), rng, dtype)
        ref = _cp().asnumpy(a).astype(np.float64) @ _cp().asnumpy(b).astype(np.float64)  # rounded inputs
        assert _rel_err(_gemm_nan_out(a, b, schedule=s), ref) < tol


@pytest.mark.parametrize("kw", [dict(double_buffer=False), dict(vec=2), dict(vec=1), dict(smem_pad=0),
                                dict(swizzle=1), dict(wm=64, wn=32), dict(bk=16, unroll=4),
                                dict(bk=32, unroll=8, smem_pad=4)])  # 2·32·264·4 = 67584 B > 48 KB opt-in
def test_schedule_knobs(kw, rng):
    s = tiledsl.GemmSchedule(**kw)
    a, ha = _rand((300, 270), rng)
    b, hb = _rand((270, 333), rng)
    assert _rel_err(_gemm_nan_out(a, b, schedule=s), ha @ hb) < 1e-5


CP_ASYNC_SCHEDULES = {  # the FMA kernel's cp.async pipeline (stages >= 3)
    "256x128x8 s4": dict(bm=256, bn=128, bk=8, rm=16, rn=8, stages=4, unroll=8),
    "128x128x16 s3 pad4": dict(bk=16, unroll=16, stages=3, smem_pad=4),
    "64x64x16 s5 4x4": dict(bm=64, bn=64, bk=16, rm=4, rn=4, stages=5, unroll=16),
    "128x64x8 s3 split2": dict(bm=128, bn=64, bk=8, rm=8, rn=4, vec=2, stages=3, split_k=2),
}


FRAGMENT_PREFETCH_SCHEDULES = {  # two register sets of fragments; the next tile's first ones after the barrier
    "256x128x8 t16x8": dict(bm=256, bn=128, bk=8, rm=16, rn=8, unroll=8, fragment_prefetch=True),
    "128x128x16 t8x8 pad4": dict(bk=16, unroll=16, smem_pad=4, fragment_prefetch=True),
    "64x64x16 t4x4 split3": dict(bm=64, bn=64, bk=16, rm=4, rn=4, unroll=16, split_k=3, fragment_prefetch=True),
}


PIPELINE_SCHEDULES = {**{f"cp.async {k}": v for k, v in CP_ASYNC_SCHEDULES.items()},
                      **{f"fragment prefetch {k}": v for k, v in FRAGMENT_PREFETCH_SCHEDULES.items()}}


@pytest.mark.parametrize("name", list(PIPELINE_SCHEDULES))
@pytest.mark.parametrize("la", ["row", "col"])
@pytest.mark.parametrize("lb", ["row", "col"])
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (7, 13, 5), (127, 129, 65), (129, 127, 300), (35, 8457, 2560),
                                   (132, 260, 300), (130, 258, 66)])
def test_fma_pipelines_shapes_layouts(name, la, lb, m, n, k, rng):
    """The cp.async pipeline and fragment prefetch: edge tiles, K tails shorter than the pipeline (k_tiles <
    stages - 1), one K tile only, every layout, against float64. Odd M and N leave the operands copied as
    stored (column-major A, row-major B) 4 bytes wide; M, N multiples of 4 (132, 260) and of 2 only (130, 258)
    give them 16- and 8-byte copies (loads) at edge tiles with a K tail."""
    s = tiledsl.GemmSchedule(**PIPELINE_SCHEDULES[name])
    a, ha = _rand((m, k), rng, layout=la)
    b, hb = _rand((k, n), rng, layout=lb)
    assert _rel_err(_gemm_nan_out(a, b, schedule=s), ha @ hb) < 1e-5


UNEVEN_SCHEDULES = {  # tiles whose vector pieces leave the last round of loads to some threads (rows fitted to M)
    "40x128x16 t4x8 stream-K": dict(bm=40, bn=128, bk=16, rm=4, rn=8, wm=8, wn=128, unroll=16, stream_k=True),
    "36x256x16 t4x8 stream-K": dict(bm=36, bn=256, bk=16, rm=4, rn=8, wm=4, wn=256, unroll=16, stream_k=True),
    "48x128x16 t4x8 cp.async": dict(bm=48, bn=128, bk=16, rm=4, rn=8, wm=16, wn=64, unroll=16, stages=3,
                                    smem_pad=4),
    "36x256x16 t4x8 cp.async (uneven A and B)": dict(bm=36, bn=256, bk=16, rm=4, rn=8, wm=4, wn=256, unroll=16,
                                                     stages=3, smem_pad=4, min_blocks=1),
    "40x64x8 t4x4 fragment prefetch": dict(bm=40, bn=64, bk=8, rm=4, rn=4, wm=8, wn=64, unroll=8,
                                           fragment_prefetch=True),
    "40x128x16 t4x8 split3": dict(bm=40, bn=128, bk=16, rm=4, rn=8, wm=8, wn=128, unroll=16, split_k=3),
}


@pytest.mark.parametrize("name", list(UNEVEN_SCHEDULES))
@pytest.mark.parametrize("la,lb", [("row", "row"), ("col", "col"), ("row", "col"), ("col", "row")])
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (7, 13, 5), (35, 1500, 700), (127, 129, 65), (36, 260, 300),
                                   (130, 258, 66)])
def test_uneven_tile_loads(name, la, lb, m, n, k, rng):
    """Tiles whose pieces do not split evenly over the threads (the last round of loads taken by some threads
    only): every layout, odd and vector-aligned extents (4-, 2- and 1-wide pieces), edge tiles and K tails,
    register prefetch, cp.async, fragment prefetch, split-K and stream-K, against float64 on NaN-poisoned C."""
    s = tiledsl.GemmSchedule(**UNEVEN_SCHEDULES[name])
    a, ha = _rand((m, k), rng, layout=la)
    b, hb = _rand((k, n), rng, layout=lb)
    assert _rel_err(_gemm_nan_out(a, b, schedule=s), ha @ hb) < 1e-5


@pytest.mark.parametrize("la", ["row", "col"])
@pytest.mark.parametrize("k", [997, 1000])
def test_misaligned_row_b_default(la, k, rng):
    """schedule=None on a row-major B with an odd N (scalar loads) and enough tiles: one K slice, four cp.async
    stages with a column-major A (misaligned_row_b_schedule), where the estimate had split K in 4; an odd K (a tail
    tile), against float64."""
    from tiledsl.gemm.family import builtin_choice

    m, n = 256, 17001
    a, ha = _rand((m, k), rng, layout=la)
    b, hb = _rand((k, n), rng)
    op = tiledsl.GemmOp(m, n, k, layout_a=la, layout_b="row")  # the alignments these contiguous operands have
    s, why = builtin_choice(op, tiledsl.require_gpu())
    assert "misaligned_row_b_schedule" in why and s.split_k == 1 and s.stages == (4 if la == "col" else 2)
    assert _rel_err(_gemm_nan_out(a, b), ha @ hb) < 1e-5


@pytest.mark.parametrize("n,ldb", [(201, 203), (202, 204)])
def test_cp_async_pipeline_narrow_copies_and_beta(n, ldb, rng):
    """Leading dimensions that narrow the copies: A (lda = 259, offset by one element) and B (ldb = 203) take
    4-byte copies, B with ldb = 204 and N = 202 8-byte ones (vec=4 asked); beta reads C."""
    cp = _cp()
    s = tiledsl.GemmSchedule(stages=4, smem_pad=4)
    big_a, hbig_a = _rand((301, 259), rng)
    big_b, hbig_b = _rand((259, ldb), rng)
    a, ha = big_a[:, 1:], hbig_a[:, 1:]          # lda = 259: 4-byte aligned rows only
    b, hb = big_b[:258, :n], hbig_b[:258, :n]
    c0 = rng.uniform(-1, 1, (301, n))
    c = cp.asarray(c0.astype(np.float32))
    tiledsl.gemm(a, b, c, alpha=-1.5, beta=0.25, schedule=s)
    assert _rel_err(c, -1.5 * (ha @ hb) + 0.25 * c0) < 1e-5


@pytest.mark.parametrize("dtype", ["float16"])
def test_half_inputs_float32_accumulation(dtype, rng):
    a, ha = _rand((257, 130), rng, dtype)
    b, hb = _rand((130, 129), rng, dtype)
    ref = ha.astype(dtype).astype(np.float64) @ hb.astype(dtype).astype(np.float64)
    assert _rel_err(tiledsl.gemm(a, b), ref) < 2e-3   # output rounded to float16


def test_torch_bfloat16(rng):
    torch = pytest.importorskip("torch")
    a = torch.rand(130, 70, device="cuda").to(torch.bfloat16)
    b = torch.rand(70, 66, device="cuda").to(torch.bfloat16)
    c = tiledsl.gemm(a, b)
    assert isinstance(c, torch.Tensor) and c.dtype == torch.bfloat16
    ref = (a.double() @ b.double()).cpu().numpy()
    assert _rel_err(c.float(), ref) < 1e-2   # output rounded to bfloat16 (8 bits of mantissa)
    c2 = torch.full((130, 66), float("nan"), device="cuda").to(torch.bfloat16)
    tiledsl.gemm(a, b, c2, alpha=0.5)
    assert _rel_err(c2.float(), 0.5 * ref) < 1e-2


def test_torch_tensors_via_dlpack(rng):
    torch = pytest.importorskip("torch")
    a = torch.rand(64, 48, device="cuda")
    b = torch.rand(48, 32, device="cuda")
    c = tiledsl.gemm(a, b)
    ref = (a.double() @ b.double()).cpu().numpy()
    assert _rel_err(c, ref) < 1e-5


def test_input_errors():
    cp = _cp()
    a = cp.ones((4, 5), cp.float32)
    with pytest.raises(ValueError, match="inner dimensions"):
        tiledsl.gemm(a, cp.ones((4, 5), cp.float32))
    with pytest.raises(ValueError, match="2-D"):
        tiledsl.gemm(cp.ones(5, cp.float32), a)
    with pytest.raises(ValueError, match="float64 is not supported"):
        tiledsl.gemm(a.astype(cp.float64), cp.ones((5, 3), cp.float64))
    with pytest.raises(ValueError, match="differ"):
        tiledsl.gemm(a, cp.ones((5, 3), cp.float16))
    with pytest.raises(ValueError, match=r"c.shape=\(3, 3\)"):
        tiledsl.gemm(a, cp.ones((5, 3), cp.float32), cp.ones((3, 3), cp.float32))
    with pytest.raises(ValueError, match="c.dtype"):
        tiledsl.gemm(a, cp.ones((5, 3), cp.float32), cp.ones((4, 3), cp.float16))
    with pytest.raises(ValueError, match="beta=1.0 needs an output c"):
        tiledsl.gemm(a, cp.ones((5, 3), cp.float32), beta=1.0)


@pytest.mark.parametrize("split", [2, 3, 8])
@pytest.mark.parametrize("m,n,k", [(512, 16, 20000), (127, 129, 65), (33, 70, 3001)])
def test_split_k_correct_and_deterministic(split, m, n, k, rng):
    from dataclasses import replace

    cp = _cp()
    s = replace(tiledsl.GemmSchedule(bm=64, bn=64, bk=16, rm=4, rn=4, unroll=16), split_k=split)
    a, ha = _rand((m, k), rng)
    b, hb = _rand((k, n), rng)
    c0 = rng.uniform(-1, 1, (m, n))
    c = cp.asarray(c0.astype(np.float32))
    tiledsl.gemm(a, b, c, alpha=0.5, beta=2.0, schedule=s)
    tol = 1e-5 * max(1.0, (k / 4096) ** 0.5)
    assert _rel_err(c, 0.5 * (ha @ hb) + 2.0 * c0) < tol
    runs = [_gemm_nan_out(a, b, schedule=s) for _ in range(3)]
    assert all(bool((r == runs[0]).all()) for r in runs)   # fixed summation order: bitwise equal


STREAM_K_SCHEDULES = {  # stream_k on each K loop: register prefetch, fragment prefetch, cp.async; scalar partials
    "256x128x8 t16x8": dict(bm=256, bn=128, bk=8, rm=16, rn=8, unroll=8, stream_k=True),
    "256x128x8 t16x8 fp": dict(bm=256, bn=128, bk=8, rm=16, rn=8, unroll=8, fragment_prefetch=True, stream_k=True),
    "128x128x8 t8x8 cp3 pad4": dict(stages=3, smem_pad=4, stream_k=True),
    "64x64x16 t4x4": dict(bm=64, bn=64, bk=16, rm=4, rn=4, unroll=16, stream_k=True),
    "16x16x16 t1x2 (scalar partials)": dict(bm=16, bn=16, bk=16, rm=1, rn=2, vec=1, unroll=16, stream_k=True),
    "64x32x16 t4x2 (scalar partials)": dict(bm=64, bn=32, bk=16, rm=4, rn=2, vec=1, unroll=16, stream_k=True),
    "256x128x16 t16x8 (48 KiB dynamic + static)": dict(bm=256, bn=128, bk=16, rm=16, rn=8, unroll=16, smem_pad=0,
                                                       stream_k=True),
}


@pytest.mark.parametrize("name", list(STREAM_K_SCHEDULES))
@pytest.mark.parametrize("la,lb", [("row", "row"), ("col", "col")])
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (7, 13, 5), (129, 127, 300), (1000, 1000, 1000),
                                   (2055, 2051, 301), (35, 8457, 2560)])
def test_stream_k_shapes_layouts(name, la, lb, m, n, k, rng):
    """stream_k: tiles shared by 2 to STREAM_K_MAX_SHARE blocks (less than a wave: 1000², 35×8457), by at most
    two (2055×2051: a wave and a part), none shared (one tile; K of one tile), edge tiles and K tails, against
    float64; alpha/beta read C once, in the block that finishes the tile; repeated calls (the tickets are back
    at zero) give bitwise the same C."""
    from tiledsl.gemm.kernel_plan import plan_gemm

    cp = _cp()
    s = tiledsl.GemmSchedule(**STREAM_K_SCHEDULES[name])
    a, ha = _rand((m, k), rng, layout=la)
    b, hb = _rand((k, n), rng, layout=lb)
    tol = 1e-5 * max(1.0, (k / 4096) ** 0.5)
    c0 = rng.uniform(-1, 1, (m, n))
    c = cp.asarray(c0.astype(np.float32))
    tiledsl.gemm(a, b, c, alpha=-0.5, beta=2.0, schedule=s)
    assert _rel_err(c, -0.5 * (ha @ hb) + 2.0 * c0) < tol
    runs = [_gemm_nan_out(a, b, schedule=s) for _ in range(3)]
    assert _rel_err(runs[0], ha @ hb) < tol
    assert all(bool((r == runs[0]).all()) for r in runs)   # fixed summation order: bitwise equal
    op = tiledsl.GemmOp(m, n, k, layout_a=la, layout_b=lb)
    split = plan_gemm(op, s, tiledsl.Target.current())
    if (m, n, k) in ((1000, 1000, 1000), (2055, 2051, 301)):
        assert dict((p.name, p.value) for p in split.params)["sk_blocks"] > 0   # stream-K did run


def test_stream_k_two_streams_and_graph(rng):
    """Two streams launching the same stream-K GEMM concurrently each have their own partial tiles and tickets;
    a CUDA graph replays it (buffers allocated by the call before capture)."""
    cp = _cp()
    s = tiledsl.GemmSchedule(bm=64, bn=64, bk=16, rm=4, rn=4, unroll=16, stream_k=True)
    a, ha = _rand((1500, 700), rng)
    b, hb = _rand((700, 1300), rng)
    ref = ha @ hb
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(2)]
    outs = [cp.full((1500, 1300), cp.nan, cp.float32) for _ in range(2)]
    for _ in range(5):
        for st, c in zip(streams, outs, strict=True):
            with st:
                tiledsl.gemm(a, b, c, schedule=s)
    for st in streams:
        st.synchronize()
    for c in outs:
        assert _rel_err(c, ref) < 1e-5
    g_out = cp.full((1500, 1300), cp.nan, cp.float32)
    st = cp.cuda.Stream(non_blocking=True)
    with st:
        tiledsl.gemm(a, b, g_out, schedule=s)
        st.begin_capture()
        tiledsl.gemm(a, b, g_out, alpha=2.0, schedule=s)
        graph = st.end_capture()
    graph.launch(st)
    graph.launch(st)
    st.synchronize()
    assert _rel_err(g_out, 2.0 * ref) < 1e-5


def test_default_schedule_on_dataset_shapes(rng):
    for m, n, k in [(512, 16, 50000), (1, 4096, 4096), (16, 11008, 4096), (7680, 1, 2560)]:
        a, ha = _rand((m, k), rng)
        b, hb = _rand((k, n), rng)
        tol = 1e-5 * max(1.0, (k / 4096) ** 0.5)
        assert _rel_err(_gemm_nan_out(a, b), ha @ hb) < tol


@pytest.mark.parametrize("m,n,k,la,lb", [(1024, 700, 512, "col", "col"), (1024, 700, 512, "row", "col"),
                                          (4096, 128, 4096, "row", "col"), (129, 2048, 515, "row", "row")])
def test_sub_wave_rule_default_is_stream_k_and_correct(m, n, k, la, lb, rng):
    """schedule=None on products whose 128×128 grid is under one wave runs the sub-wave rule's stream-K kernel
    (tiledsl.gemm.family.sub_wave_schedule) unless a tuned record for the op or the short-wide rule (stream-K on
    64×128) comes first. The rule's kernel is run either way (by name when another stands): right against float64
    on a NaN-poisoned C, twice (the tickets reset), and with alpha/beta reading C; so is the default."""
    from tiledsl.gemm.family import builtin_schedule, sub_wave_schedule
    from tiledsl.registry import lookup_hit

    cp = _cp()
    a, ha, b, hb, op = _operands(m, n, k, la, lb, rng)
    target = tiledsl.Target.current()
    want = sub_wave_schedule(op, target)
    if want is None:
        pytest.skip(f"{target.name}: {m}x{n}x{k} is not under one wave of 128×128 tiles here")
    assert want.stream_k
    default = tiledsl.plan(op, device=target).schedule
    if default != want:  # a tuned record, or the short-wide rule (stream-K too), comes before the sub-wave rule
        hit, _ = lookup_hit("gemm", op, target)
        assert (hit is not None and hit.schedule == default) or default == builtin_schedule(op, target) != want
        assert default.stream_k or hit is not None
        assert _rel_err(_gemm_nan_out(a, b), ha @ hb) < 1e-5
    for _ in range(2):
        assert _rel_err(_gemm_nan_out(a, b, schedule=want), ha @ hb) < 1e-5
    c0 = rng.uniform(-1, 1, (m, n))
    c = cp.asarray(c0.astype(np.float32))
    tiledsl.gemm(a, b, c, alpha=0.5, beta=-2.0, schedule=want)
    assert _rel_err(c, 0.5 * (ha @ hb) - 2.0 * c0) < 1e-5


@pytest.mark.parametrize("m,n,k,la,lb", [(35, 701, 1000, "row", "row"), (37, 1023, 257, "col", "row"),
                                          (48, 1100, 300, "row", "col"), (33, 1535, 4099, "col", "col"),
                                          (35, 700, 2560, "col", "col")])
def test_short_wide_split_k_rule_is_right(m, n, k, la, lb, rng):
    """M in 33…48, N in 700…1535, K ≥ 256: the short-wide rule's 16-slice split-K tiles (16×64 below N = 1024,
    64×64 from there), with K not a multiple of the slices, odd N and column-major A: right against float64 on a
    NaN-poisoned C, and with alpha/beta reading C; schedule=None runs them unless a shipped record stands."""
    from tiledsl.gemm.family import builtin_schedule
    from tiledsl.registry import lookup_hit

    cp = _cp()
    a, ha, b, hb, op = _operands(m, n, k, la, lb, rng)
    target = tiledsl.Target.current()
    want = builtin_schedule(op, target)
    assert (want.split_k, want.stream_k, want.bn) == (16, False, 64), want
    hit, _ = lookup_hit("gemm", op, target)
    assert tiledsl.plan(op, device=target).schedule == (want if hit is None else hit.schedule)
    tol = 1e-5 * max(1.0, (k / 4096) ** 0.5)
    assert _rel_err(_gemm_nan_out(a, b), ha @ hb) < tol
    assert _rel_err(_gemm_nan_out(a, b, schedule=want), ha @ hb) < tol
    c0 = rng.uniform(-1, 1, (m, n))
    c = cp.asarray(c0.astype(np.float32))
    tiledsl.gemm(a, b, c, alpha=0.5, beta=-2.0, schedule=want)
    assert _rel_err(c, 0.5 * (ha @ hb) - 2.0 * c0) < tol


@pytest.mark.parametrize("m,n,k,la,lb,split", [(100, 4100, 2052, "row", "row", 7), (128, 2048, 4100, "col", "col", 16),
                                                (68, 6000, 2052, "row", "col", 5), (127, 12292, 2048, "row", "row", 0),
                                                (96, 30000, 2064, "row", "col", 0)])
def test_one_row_rule_is_right(m, n, k, la, lb, split, rng):
    """M in 65…128, K ≥ 2048: the one-row rule's 128×256×16 tile with ``split`` K slices (K not a multiple of them)
    or, for 0, with stream-K (49 and 118 tiles; the branch checked on 132 SMs), M off 128 and N off 256: right against float64 on a NaN-poisoned C,
    twice (stream-K's tickets reset), and with alpha/beta reading C; schedule=None runs it unless a shipped record
    stands."""
    from tiledsl.gemm.family import builtin_choice
    from tiledsl.registry import lookup_hit

    cp = _cp()
    a, ha, b, hb, op = _operands(m, n, k, la, lb, rng)
    target = tiledsl.Target.current()
    want, why = builtin_choice(op, target)
    if target.sm_count == 132:  # the device the slices of this test were written for
        assert "one-row rule" in why and (want.bm, want.bn, want.split_k, want.stream_k) == (
            128, 256, max(split, 1), not split), why
    elif "one-row rule" not in why:
        pytest.skip(f"{target.name} ({target.sm_count} SMs): the one-row rule does not take {m}x{n}x{k} here ({why})")
    hit, _ = lookup_hit("gemm", op, target)
    assert tiledsl.plan(op, device=target).schedule == (want if hit is None else hit.schedule)
    tol = 1e-5 * max(1.0, (k / 4096) ** 0.5)
    assert _rel_err(_gemm_nan_out(a, b), ha @ hb) < tol
    for _ in range(2):
        assert _rel_err(_gemm_nan_out(a, b, schedule=want), ha @ hb) < tol
    c0 = rng.uniform(-1, 1, (m, n))
    c = cp.asarray(c0.astype(np.float32))
    tiledsl.gemm(a, b, c, alpha=0.5, beta=-2.0, schedule=want)
    assert _rel_err(c, 0.5 * (ha @ hb) - 2.0 * c0) < tol


@pytest.mark.parametrize("m,n,k,la,lb", [(2052, 2308, 772, "row", "row"), (3076, 3004, 1028, "col", "col"),
                                          (1028, 5124, 1764, "row", "col")])
def test_wave_tail_rule_is_right(m, n, k, la, lb, rng):
    """The wave-tail rule's 256×128×8 stream-K tile (tiledsl.gemm.family.wave_tail_schedule) on products off every
    tile in M, N and K: right against float64 on a NaN-poisoned C, twice (the tickets reset), with alpha/beta reading
    C; schedule=None runs it unless a tuned record for the op comes first."""
    from tiledsl.gemm.family import builtin_choice
    from tiledsl.registry import lookup_hit

    cp = _cp()
    a, ha, b, hb, op = _operands(m, n, k, la, lb, rng)
    target = tiledsl.Target.current()
    want, why = builtin_choice(op, target)
    if "wave_tail_schedule" not in why:
        pytest.skip(f"{target.name}: the wave-tail rule does not take {m}x{n}x{k} here ({why})")
    default = tiledsl.plan(op, device=target).schedule
    assert default == want or lookup_hit("gemm", op, target)[0] is not None
    tol = 1e-5 * max(1.0, (k / 4096) ** 0.5)
    for _ in range(2):
        assert _rel_err(_gemm_nan_out(a, b, schedule=want), ha @ hb) < tol
    assert _rel_err(_gemm_nan_out(a, b), ha @ hb) < tol
    c0 = rng.uniform(-1, 1, (m, n))
    c = cp.asarray(c0.astype(np.float32))
    tiledsl.gemm(a, b, c, alpha=0.5, beta=-2.0, schedule=want)
    assert _rel_err(c, 0.5 * (ha @ hb) - 2.0 * c0) < tol


@pytest.mark.parametrize("m,n,k,la,lb,bm", [(1760, 16, 1760, "col", "col", 64), (1031, 16, 1029, "col", "row", 64),
                                             (2049, 16, 1500, "row", "col", 128), (1100, 27, 1030, "col", "col", 128),
                                             (4099, 61, 2049, "row", "row", 128)])
def test_tall_thin_rule_default_is_right(m, n, k, la, lb, bm, rng):
    """schedule=None on tall-thin products (tiledsl.gemm.family.tall_thin_schedule): the one-warp 64×16 tile for
    N = 16 with a column-major A, the 128-row tiles otherwise, 16 K slices or fewer; M, K and N off every tile, right
    against float64 on a NaN-poisoned C, twice, and with alpha/beta reading C."""
    from tiledsl.gemm.family import tall_thin_schedule

    cp = _cp()
    a, ha, b, hb, op = _operands(m, n, k, la, lb, rng)
    target = tiledsl.Target.current()
    want = tall_thin_schedule(op, target)
    assert want is not None and want.bm == bm
    if tiledsl.plan(op, device=target).schedule != want:  # a tuned record for the op comes first
        pytest.skip(f"a tuned record stands for {m}x{n}x{k} on {target.name}")
    tol = 1e-5 * max(1.0, (k / 4096) ** 0.5)
    for _ in range(2):
        assert _rel_err(_gemm_nan_out(a, b), ha @ hb) < tol
    c0 = rng.uniform(-1, 1, (m, n))
    c = cp.asarray(c0.astype(np.float32))
    tiledsl.gemm(a, b, c, alpha=0.5, beta=-2.0)
    assert _rel_err(c, 0.5 * (ha @ hb) - 2.0 * c0) < tol


def test_shipped_sixteen_row_record_is_used_and_correct(rng):
    """The shipped GEMV record for 16×768×768 (schedules/gemm/sm90.json): schedule=None takes it on the device and
    NVRTC it was tuned with, and its result is right; elsewhere the built-in choice runs (also checked)."""
    from tiledsl import registry

    a, ha = _rand((16, 768), rng)
    b, hb = _rand((768, 768), rng)
    op = tiledsl.GemmOp(16, 768, 768)
    target = tiledsl.Target.current()
    rec = registry.lookup("gemm", op, target)
    used = tiledsl.plan(op, device=target).schedule
    if rec is not None:
        assert used == rec and (used.bn, used.split_k) == (32, 61)
    for _ in range(2):
        assert _rel_err(_gemm_nan_out(a, b), ha @ hb) < 1e-5


@pytest.mark.parametrize("la", ["row", "col"])
def test_one_column_runs_as_a_row(la, rng):
    """N = 1 with schedule=None runs yᵀ = xᵀ·Aᵀ (the GEMV-style kernel): results for both layouts of A, with
    beta reading C, a repeated (cached) call on new data, a strided output column and an explicit schedule
    (which keeps the tiled kernel)."""
    from tiledsl import cache

    cp = _cp()
    m, k = 3000, 1000
    a, ha = _rand((m, k), rng, layout=la)
    x, hx = _rand((k, 1), rng)
    cache.LAUNCHES.clear()
    assert _rel_err(tiledsl.gemm(a, x), ha @ hx) < 1e-5          # new output, then its cached repeat
    (call,) = list(cache.LAUNCHES._data.values())
    assert call.swap and "gemv" in call.main.name                  # it ran as the row xᵀ·Aᵀ
    x2, hx2 = _rand((k, 1), rng)
    assert _rel_err(tiledsl.gemm(a, x2), ha @ hx2) < 1e-5
    c2 = cp.full((m, 1), cp.nan, dtype=cp.float32)
    for _ in range(2):                                              # given c: first call, then its replay
        assert _rel_err(tiledsl.gemm(a, x2, c2), ha @ hx2) < 1e-5
    c0 = rng.uniform(-1, 1, (m, 1))
    c = cp.asarray(c0.astype(np.float32))
    tiledsl.gemm(a, x, c, alpha=0.5, beta=-2.0)
    assert _rel_err(c, 0.5 * (ha @ hx) - 2.0 * c0) < 1e-5
    big = cp.full((m, 5), cp.nan, dtype=cp.float32)
    tiledsl.gemm(a, x, big[:, 2:3])                                 # no unit stride along M: not swapped
    assert _rel_err(big[:, 2:3], ha @ hx) < 1e-5 and bool(cp.isnan(big[:, [0, 1, 3, 4]]).all())
    s = tiledsl.preset("gemm", "skinny_n_64x16")
    cache.LAUNCHES.clear()
    assert _rel_err(_gemm_nan_out(a, x, schedule=s), ha @ hx) < 1e-5
    assert all(not c.swap and "gemv" not in c.main.name for c in cache.LAUNCHES._data.values())


def test_one_column_torch(rng):
    torch = pytest.importorskip("torch")
    a = torch.tensor(rng.uniform(-1, 1, (4096, 512)), device="cuda", dtype=torch.float32)  # M·K = 2^21: a row
    x = torch.tensor(rng.uniform(-1, 1, (512, 1)), device="cuda", dtype=torch.float32)
    for _ in range(2):
        y = tiledsl.gemm(a, x)
        assert isinstance(y, torch.Tensor) and tuple(y.shape) == (4096, 1)
        assert _rel_err(y, a.double().cpu().numpy() @ x.double().cpu().numpy()) < 1e-5


@pytest.mark.parametrize("m,n,k", [(3000, 2, 1000), (2049, 3, 1025), (4097, 8, 777), (1029, 5, 4099),
                                   (1 << 19, 4, 8)])  # K = 8: one K slice, the GEMV kernel stores Cᵀ itself
def test_few_columns_run_as_rows_into_the_row_major_output(m, n, k, rng):
    """2 ≤ N ≤ FEW_COLUMNS_MAX_N with a column-major A and schedule=None runs Cᵀ = Bᵀ·Aᵀ on the GEMV kernel,
    writing the row-major C as a column-major Cᵀ (layout_c='col'): odd sizes, both layouts of B, a new output and
    its cached repeat, a given (poisoned) C and its replay, beta reading C, and a C inside a wider array (ldc > N)."""
    from tiledsl import cache

    cp = _cp()
    a, ha = _rand((m, k), rng, layout="col")
    for lb in ("row", "col"):
        b, hb = _rand((k, n), rng, layout=lb)
        cache.LAUNCHES.clear()
        assert _rel_err(tiledsl.gemm(a, b), ha @ hb) < 1e-5
        (call,) = list(cache.LAUNCHES._data.values())
        assert call.swap and "gemv" in call.main.name and "_ccol_" in call.main.name
        assert (call.followup is None) == (k < 128)  # split-K from two slices of 64
        b2, hb2 = _rand((k, n), rng, layout=lb)
        out = tiledsl.gemm(a, b2)                                     # the cached launch allocates C again
        assert out.shape == (m, n) and out.flags.c_contiguous and _rel_err(out, ha @ hb2) < 1e-5
        c = cp.full((m, n), cp.nan, dtype=cp.float32)
        for _ in range(2):
            assert _rel_err(tiledsl.gemm(a, b, c), ha @ hb) < 1e-5
        c0 = rng.uniform(-1, 1, (m, n))
        c = cp.asarray(c0.astype(np.float32))
        tiledsl.gemm(a, b, c, alpha=0.5, beta=-2.0)
        assert _rel_err(c, 0.5 * (ha @ hb) - 2.0 * c0) < 1e-5
        wide = cp.full((m, n + 3), cp.nan, dtype=cp.float32)
        tiledsl.gemm(a, b, wide[:, 1:1 + n])
        assert _rel_err(wide[:, 1:1 + n], ha @ hb) < 1e-5 and bool(cp.isnan(wide[:, [0, n + 1, n + 2]]).all())


@pytest.mark.parametrize("m,n,k,layout", [(7680, 4, 2560, "TT"), (3001, 2, 1025, "TN"), (4097, 8, 70000, "NT")])
def test_as_rows_times_the_rows_schedule_none_runs(m, n, k, layout, rng):
    """search.tune --as-rows: the bench of the rows op (a column-major C) runs the user's product through
    tiledsl.gemm.api.gemm_as_rows under a candidate schedule (schedule=None's pick for the rows, and the same with
    half the K slices), checked here against float64 on a NaN-poisoned C; cuBLAS computes the user's product into
    the same C; gemm_as_rows refuses a C without unit stride along N."""
    from search.families import as_rows_op, gemm_op
    from search.measure import GemmBench, _verify
    from tiledsl.gemm.api import gemm_as_rows

    cp = _cp()
    rows = as_rows_op(gemm_op(m, n, k, layout=layout))
    bench = GemmBench(rows)
    pick = tiledsl.plan(rows).schedule
    assert pick.kernel == "gemv" and rows.layout_c == "col"
    for s in (pick, replace(pick, split_k=max(1, pick.split_k // 2))):
        err, _ = _verify(bench, s)
        assert err <= bench.tolerance(), (s, err)
    a, b, c, _ = bench.inputs()
    bench.vendor((a, b, c, None))
    ref = cp.matmul(a.astype(cp.float64), b.astype(cp.float64))
    assert float(cp.abs(c - ref).max() / cp.abs(ref).max()) < 1e-5
    with pytest.raises(tiledsl.SpecError, match="unit stride along N"):
        gemm_as_rows(b.T, a.T, cp.empty((n, m), cp.float32).T, pick)


@pytest.mark.parametrize("la,n", [("col", 4), ("row", 16), ("row", 9)])
def test_few_columns_long_k_many_slices_and_torch(la, n, rng):
    """A long K (≥ FEW_COLUMNS_LONG_K) runs as rows for up to 16 columns and either layout of A (a row-major A gives
    the GEMV kernel a column-major B: a warp per few columns). Few blocks of columns take many K slices
    (gemv_schedule, GEMV_MAX_SPLIT), summed by the split-K kernel into the column-major Cᵀ; torch in, torch out."""
    torch = pytest.importorskip("torch")
    from tiledsl.gemm.family import gemv_schedule, rows_op, runs_as_row

    m, k = 300, 100_000
    a = torch.rand((k, m) if la == "col" else (m, k), device="cuda", dtype=torch.float32).sub_(0.5)
    a = a.t() if la == "col" else a
    b = torch.rand((k, n), device="cuda", dtype=torch.float32).sub_(0.5)
    op = tiledsl.GemmOp(m, n, k, layout_a=la)
    target = tiledsl.Target.current()
    assert runs_as_row(op, target) and gemv_schedule(rows_op(op), target).split_k > 16
    ref = a.double().cpu().numpy() @ b.double().cpu().numpy()
    for _ in range(2):
        y = tiledsl.gemm(a, b)
        assert isinstance(y, torch.Tensor) and tuple(y.shape) == (m, n) and y.is_contiguous()
        assert _rel_err(y, ref) < 1e-5 * (k / 4096) ** 0.5


def test_output_overlapping_an_input_is_refused():
    cp = _cp()
    a = cp.ones((64, 64), cp.float32)
    with pytest.raises(ValueError, match="c shares memory with a"):
        tiledsl.gemm(a, cp.ones((64, 64), cp.float32), a)
    big = cp.ones((64, 128), cp.float32)
    tiledsl.gemm(big[:, :64], cp.ones((64, 64), cp.float32), big[:, 64:])  # disjoint halves: allowed


# ---- kernel="gemv": few rows of C ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("la", ["row", "col"])
@pytest.mark.parametrize("lb", ["row", "col"])
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (1, 7, 13), (3, 127, 129), (5, 1000, 999), (16, 4096, 512),
                                   (1, 4096, 4096), (9, 64, 3000)])
def test_gemv_shapes_layouts_against_float64(dtype, la, lb, m, n, k, rng):
    """Default (GEMV for few rows) and an explicit split-K GEMV schedule, any alignment, poisoned output."""
    tol = 1e-5 if dtype == "float32" else 2e-3
    a, _ = _rand((m, k), rng, dtype, la)
    b, _ = _rand((k, n), rng, dtype, lb)
    ref = _cp().asnumpy(a).astype(np.float64) @ _cp().asnumpy(b).astype(np.float64)  # the rounded inputs
    two = tiledsl.GemmSchedule(kernel="gemv", bm=4, bn=64, vec=4, split_k=3, unroll=2)
    for s in (None, two, replace(two, split_k_fused=True)):
        assert _rel_err(_gemm_nan_out(a, b, schedule=s), ref) < tol, s


@pytest.mark.parametrize("lb", ["row", "col"])
def test_gemv_alpha_beta_and_torch_bfloat16(lb, rng):
    torch = pytest.importorskip("torch")
    m, n, k = 4, 520, 1000
    a = torch.tensor(rng.uniform(-1, 1, (m, k)), device="cuda").to(torch.bfloat16)
    b = torch.tensor(rng.uniform(-1, 1, (k, n)), device="cuda").to(torch.bfloat16)
    if lb == "col":
        b = b.t().contiguous().t()
    c = torch.tensor(rng.uniform(-1, 1, (m, n)), device="cuda").to(torch.bfloat16)
    ref = -0.5 * a.double() @ b.double() + 2.0 * c.double()
    c0 = c.clone()
    for fused in (False, True):
        c.copy_(c0)
        s = tiledsl.GemmSchedule(kernel="gemv", bm=4, bn=128, vec=4, split_k=2, split_k_fused=fused)
        out = tiledsl.gemm(a, b, c, alpha=-0.5, beta=2.0, schedule=s)
        assert out is c
        assert float((out.double() - ref).norm() / ref.norm()) < 8e-3


def test_gemv_fused_split_k_stores_c_narrower_than_its_workspace(rng):
    """The fused split-K's last block stores C as wide as C's own alignment allows, which may be narrower than the
    workspace's rows (an aligned B, N a multiple of 4, C a view with ldc = N + 2: 2 wide): every column is written
    and right (C is poisoned with NaN), with and without beta."""
    cp = _cp()
    m, n, k = 5, 4100, 1000
    a, ha = _rand((m, k), rng)
    b, hb = _rand((k, n), rng)
    s = tiledsl.GemmSchedule(kernel="gemv", bm=8, bn=64, vec=4, split_k=4, split_k_fused=True, unroll=2)
    assert dict(tiledsl.plan(tiledsl.GemmOp(m, n, k, align_c=2), s, arch="sm_90").vec)["C"] == 2
    big = cp.full((m, n + 2), cp.nan, dtype=cp.float32)
    c = big[:, 2:]  # ldc = 4102, 8 bytes in: C's rows are 8-byte aligned
    tiledsl.gemm(a, b, c, schedule=s)
    assert _rel_err(c, ha @ hb) < 1e-5
    c0 = rng.uniform(-1, 1, (m, n))
    c[...] = cp.asarray(c0.astype(np.float32))
    tiledsl.gemm(a, b, c, alpha=0.5, beta=-2.0, schedule=s)
    assert _rel_err(c, 0.5 * (ha @ hb) - 2.0 * c0) < 1e-5


@pytest.mark.parametrize("m,n,k,la", [(1, 768, 768, "row"), (4, 3072, 768, "row"), (2, 1000, 1000, "row"),
                                       (3, 7, 129, "row"), (1, 127, 1025, "row"), (128, 1, 1024, "col"),
                                       (64, 1, 1216, "col"), (512, 1, 512, "col"), (3072, 1, 128, "col")])
def test_small_gemv_products_default_to_one_launch(m, n, k, la, rng):
    """schedule=None on small float32 products with a row-major B (GEMV_ONE_LAUNCH_MAX_BYTES): one launch, the K
    slices summed in the kernel, right on a NaN-poisoned C three times over (each launch leaves its tickets at zero
    for the next), then with alpha and beta; one-column products with a column-major A run as that row."""
    from tiledsl.gemm.family import default_schedule, rows_op, runs_as_row

    cp = _cp()
    op = tiledsl.GemmOp(m, n, k, layout_a=la)
    target = tiledsl.Target.current()
    run = rows_op(op) if runs_as_row(op, target) else op
    s = default_schedule(run, target)
    assert s.kernel == "gemv" and s.split_k_fused and s.split_k > 1 and not tiledsl.plan(run, s).followup
    tol = 1e-5 * max(1.0, (k / 4096) ** 0.5)
    for _ in range(3):
        a, ha = _rand((m, k), rng, layout=la)
        b, hb = _rand((k, n), rng)
        assert _rel_err(_gemm_nan_out(a, b), ha @ hb) < tol
    c0 = rng.uniform(-1, 1, (m, n))
    c = cp.asarray(c0.astype(np.float32))
    tiledsl.gemm(a, b, c, alpha=1.5, beta=-0.5)
    assert _rel_err(c, 1.5 * (ha @ hb) - 0.5 * c0) < tol


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (1, 7, 13), (3, 127, 129), (5, 1001, 999), (16, 50257, 64),
                                   (9, 129, 3000), (4, 4100, 700)])
def test_gemv_column_groups_against_float64(dtype, m, n, k, rng):
    """col_groups (a thread's groups of vec columns, 32·vec apart): every group count the registers allow, groups
    partly or wholly past N, scalar loads (vec=1, any N) and 4-wide ones (N a multiple of 4); one slice, the split-K
    kernel and the fused split-K (the same bits as the split-K kernel), on a NaN-poisoned C; then alpha and beta."""
    cp = _cp()
    from tiledsl.gemm.family import gemv_block_rows

    tol = (1e-5 if dtype == "float32" else 2e-3) * max(1.0, (k / 4096) ** 0.5)
    a, _ = _rand((m, k), rng, dtype)
    b, _ = _rand((k, n), rng, dtype)
    ha, hb = cp.asnumpy(a).astype(np.float64), cp.asnumpy(b).astype(np.float64)  # the rounded inputs
    bm = gemv_block_rows(m)
    assert _rel_err(_gemm_nan_out(a, b), ha @ hb) < tol  # schedule=None: groups for an odd N of float32 (16 rows)
    if (m, n, dtype) == (16, 50257, "float32"):
        from tiledsl.gemm.family import default_schedule

        op = tiledsl.GemmOp(m, n, k, align_b=1, align_c=1)
        assert default_schedule(op, tiledsl.Target.current()).col_groups > 1
    for vec, groups in [(1, g) for g in (2, 4, 8)] + [(4, 2)] * (n % 4 == 0):
        if bm * groups * vec > 64:
            continue
        one = tiledsl.GemmSchedule(kernel="gemv", bm=bm, bn=64, vec=vec, col_groups=groups, unroll=2)
        split = min(3, k)
        fused, two = replace(one, split_k=split, split_k_fused=split > 1), replace(one, split_k=split)
        for s in (one, two, fused):
            assert _rel_err(_gemm_nan_out(a, b, schedule=s), ha @ hb) < tol, s
        assert bool((_gemm_nan_out(a, b, schedule=fused) == _gemm_nan_out(a, b, schedule=two)).all())
        c0 = rng.uniform(-1, 1, (m, n))
        c = cp.asarray(c0.astype(dtype))
        tiledsl.gemm(a, b, c, alpha=1.5, beta=-0.5, schedule=fused)
        assert _rel_err(c, 1.5 * (ha @ hb) - 0.5 * cp.asnumpy(cp.asarray(c0.astype(dtype))).astype(np.float64)) < \
            tol * 2, fused


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("la", ["row", "col"])
@pytest.mark.parametrize("m,n,k", [(3, 7, 13), (4, 127, 129), (5, 1000, 999), (9, 4098, 300), (16, 4096, 4096),
                                   (12, 132, 3000), (16, 1, 64)])
def test_gemv_smem_a_against_float64(dtype, la, m, n, k, rng):
    """smem_a (A's K slice staged in shared memory, a ring of loads of B): B read 1, 2 or 4 wide, rows past M and
    columns past N, the first three of 1, 3, 16 and 64 slices whose slice of A fits 48 KiB (16 leaves slices past K
    empty for the short K), unroll 1, 2 and 8 (rings longer than the slice), the split-K kernel and the fused split-K (the same bits);
    a NaN-poisoned C, then alpha and beta; the FMA GEMV pick stages A for 5-16 float32 rows of an aligned x @ W
    (schedule=None's, but for 9-16 rows of a W of 64 MiB or more: gemv_dmma_default)."""
    cp = _cp()
    from tiledsl.gemm.family import gemv_block_rows, gemv_schedule
    from tiledsl.gemm.schedule import gemv_smem_a_bytes

    tol = (1e-5 if dtype == "float32" else 2e-3) * max(1.0, (k / 4096) ** 0.5)
    a, _ = _rand((m, k), rng, dtype, la)
    b, _ = _rand((k, n), rng, dtype)
    ha, hb = cp.asnumpy(a).astype(np.float64), cp.asnumpy(b).astype(np.float64)  # the rounded inputs
    bm = max(4, gemv_block_rows(m))
    def fits(split: int) -> bool:  # rule smem_a_slice_fits: bm × the slice × 4 bytes ≤ 48 KiB
        return gemv_smem_a_bytes(k, tiledsl.GemmSchedule(kernel="gemv", bm=bm, split_k=split, smem_a=True)) <= 49152

    splits = [split for split in (1, 3, 16, 64) if fits(split)][:3]
    for split, unroll in itertools.product(splits, (1, 2, 8)):
        two = tiledsl.GemmSchedule(kernel="gemv", bm=bm, bn=64, vec=4, unroll=unroll, split_k=split, smem_a=True)
        got = _gemm_nan_out(a, b, schedule=two)
        assert _rel_err(got, ha @ hb) < tol, two
        if split > 1:
            fused = replace(two, split_k_fused=True, min_blocks=0)
            assert bool((_gemm_nan_out(a, b, schedule=fused) == got).all()), fused
    c0 = rng.uniform(-1, 1, (m, n))
    c = cp.asarray(c0.astype(dtype))
    tiledsl.gemm(a, b, c, alpha=1.5, beta=-0.5, schedule=replace(two, split_k=splits[-1]))
    ref = 1.5 * (ha @ hb) - 0.5 * cp.asnumpy(cp.asarray(c0.astype(dtype))).astype(np.float64)
    assert _rel_err(c, ref) < tol * 2
    op = tiledsl.GemmOp(m, n, k, dtype=dtype, layout_a=la, align_a=4 if la == "row" and k % 4 == 0 else 1,
                        align_b=4 if n % 4 == 0 else 2 if n % 2 == 0 else 1, align_c=4 if n % 4 == 0 else 1)
    staged = gemv_schedule(op, tiledsl.Target.current()).smem_a  # the FMA GEMV pick (schedule=None's unless
    assert staged == (dtype == "float32" and la == "row" and m > 4 and n % 4 == 0), op  # gemv_dmma_default)
    assert _rel_err(_gemm_nan_out(a, b), ha @ hb) < tol


@pytest.mark.parametrize("dtype,la,m,n,k", [("float32", "row", 12, 4096, 4096), ("float32", "col", 9, 132, 3000),
                                             ("float32", "row", 16, 4098, 300), ("float16", "row", 5, 1000, 999),
                                             ("float32", "row", 12, 8, 13), ("float16", "col", 16, 14336, 4096)])
def test_gemv_spare_slot_sums_what_the_copied_ring_sums(dtype, la, m, n, k, rng):
    """spare_slot (smem_a's ring of B with unroll + 1 slots and a running pointer into B; row-major B): unroll 1, 2
    and 8 (rings longer than a slice at K = 13), one slice, the split-K kernel and the fused sum, 12 and 16 rows per
    block for 9-12 rows: within the float64 tolerance on a NaN-poisoned C and bit for bit what the copied ring
    computes (the same products added in the same order); then alpha and beta."""
    cp = _cp()
    from tiledsl.gemm.schedule import gemv_smem_a_bytes

    tol = (1e-5 if dtype == "float32" else 2e-3) * max(1.0, (k / 4096) ** 0.5)
    a, _ = _rand((m, k), rng, dtype, la)
    b, _ = _rand((k, n), rng, dtype)
    ha, hb = cp.asnumpy(a).astype(np.float64), cp.asnumpy(b).astype(np.float64)
    for bm in sorted({-(-m // 4) * 4, 16}):
        for unroll, split, fused in itertools.product((1, 2, 8), (1, 3, 16), (False, True)):  # ≤ 30 kernels
            copied = tiledsl.GemmSchedule(kernel="gemv", bm=bm, bn=64 if n < 1000 else 128, vec=4, unroll=unroll,
                                          split_k=split, split_k_fused=fused and split > 1, smem_a=True)
            if (fused and split == 1) or gemv_smem_a_bytes(k, copied) > 49152 - 128:
                continue
            spare = replace(copied, spare_slot=True)
            got = _gemm_nan_out(a, b, schedule=spare)
            assert _rel_err(got, ha @ hb) < tol, spare
            assert bool((got == _gemm_nan_out(a, b, schedule=copied)).all()), spare
    c0 = rng.uniform(-1, 1, (m, n))
    c = cp.asarray(c0.astype(dtype))
    tiledsl.gemm(a, b, c, alpha=1.5, beta=-0.5, schedule=spare)
    ref = 1.5 * (ha @ hb) - 0.5 * cp.asnumpy(cp.asarray(c0.astype(dtype))).astype(np.float64)
    assert _rel_err(c, ref) < tol * 2


@pytest.mark.parametrize("lb", ["row", "col"])
@pytest.mark.parametrize("m,n,k", [(9, 4096, 4096), (12, 22016, 4096), (11, 133, 3000), (12, 1, 64), (10, 7, 13)])
def test_gemv_twelve_rows_per_block_against_float64(lb, m, n, k, rng):
    """bm = 12 for 9-12 rows (the search's rows_three_quarters): the FMA GEMV pick with 12 rows per block, A staged
    and in registers, the spare slot (row-major B), 1, 2 and 4 columns per warp (column-major B: 12·rn sums never fill
    the warp's 32 lanes, the per-value shuffles) and registers capped at 168 and 128 (min_blocks 3 and 4; 96 bytes
    spill at 168), on a NaN-poisoned C; then alpha and beta."""
    cp = _cp()
    from tiledsl.gemm.family import gemv_schedule

    tol = 1e-5 * max(1.0, (k / 4096) ** 0.5)
    a, ha = _rand((m, k), rng)
    b, hb = _rand((k, n), rng, layout=lb)
    along = n if lb == "row" else k
    op = tiledsl.GemmOp(m, n, k, layout_b=lb, align_a=4 if k % 4 == 0 else 1,
                        align_b=4 if along % 4 == 0 else 2 if along % 2 == 0 else 1, align_c=4 if n % 4 == 0 else 1)
    pick = replace(gemv_schedule(op, tiledsl.Target.current()), bm=12, min_blocks=0)  # the FMA GEMV pick
    variants = [pick, replace(pick, smem_a=False, spare_slot=False, split_k=min(3, k))]
    if lb == "row" and op.align_b == 4:  # staged: slices of A within 48 KiB (rule smem_a_slice_fits)
        split = max(min(3, k), -(-k // 512))
        variants += [replace(pick, smem_a=True, spare_slot=spare, unroll=8, split_k=split) for spare in (False, True)]
    if lb == "col":
        variants += [replace(pick, smem_a=False, k_lanes=32, rn=rn, unroll=2, split_k=min(3, k)) for rn in (1, 2, 4)]
        variants += [replace(pick, smem_a=False, min_blocks=3), replace(pick, smem_a=False, unroll=1, min_blocks=4)]
    for s in variants:
        assert _rel_err(_gemm_nan_out(a, b, schedule=s), ha @ hb) < tol, s
    c0 = rng.uniform(-1, 1, (m, n))
    c = cp.asarray(c0.astype(np.float32))
    tiledsl.gemm(a, b, c, alpha=1.5, beta=-0.5, schedule=pick)
    assert _rel_err(c, 1.5 * (ha @ hb) - 0.5 * c0) < tol * 2, pick


def _column_b_operands(dtype, m, n, k, rng):
    """(cupy, tolerance, A [M, K], B [K, N] column-major (x @ W.T), A and B as float64 host arrays of the rounded
    inputs, rows per block of the GEMV kernel (at least 4)) for the column-major-B GEMV tests."""
    cp = _cp()
    from tiledsl.gemm.family import gemv_block_rows

    tol = (1e-5 if dtype == "float32" else 2e-3) * max(1.0, (k / 4096) ** 0.5)
    a, _ = _rand((m, k), rng, dtype)
    b, _ = _rand((k, n), rng, dtype, "col")
    ha, hb = cp.asnumpy(a).astype(np.float64), cp.asnumpy(b).astype(np.float64)  # the rounded inputs
    return cp, tol, a, b, ha, hb, max(4, gemv_block_rows(m))


@pytest.mark.parametrize("dtype", ["float32", "float16"])  # bfloat16: tests/test_host_cuda_cpu.py (no CuPy dtype)
@pytest.mark.parametrize("m,n,k", [(16, 4096, 4096), (12, 22016, 4096), (9, 133, 3000), (5, 7, 130), (16, 33, 611),
                                   (8, 513, 1000), (4, 3, 36)])
def test_gemv_column_b_ring_against_float64(dtype, m, n, k, rng):
    """x @ W.T with smem_a and spare_slot (a ring of B loads, A staged by vectors of K, the warp's lanes in groups of
    ``k_lanes`` along K): the search's seeds around ``gemv_ring_column_b`` (2 and 4 columns per group, unroll 1-4,
    8 and 32 lanes per group, 128 and 256 threads, registers capped at 168) and 4 lanes per group; one slice, the
    split-K kernel and the fused sum (the same bits); K odd, 2 mod 4 and 0 mod 4 (B and A read 1, 2, 4 wide), rows
    past M, groups past N; a NaN-poisoned C, then alpha and beta."""
    from tiledsl.gemm.schedule import gemv_smem_a_bytes

    cp, tol, a, b, ha, hb, bm = _column_b_operands(dtype, m, n, k, rng)
    ring = tiledsl.GemmSchedule(kernel="gemv", bm=bm, bn=128, vec=4, rn=2, unroll=4, smem_a=True, spare_slot=True,
                                k_lanes=8)
    split = next(sp for sp in (1, 3, 8, 16) if gemv_smem_a_bytes(k, replace(ring, split_k=sp), col_b=True) <= 49152)
    variants = [replace(ring, rn=rn, unroll=unroll, min_blocks=min_blocks, k_lanes=k_lanes, bn=bn)
                for rn, unroll, min_blocks, k_lanes, bn in ((2, 4, 0, 8, 128), (2, 2, 0, 8, 128), (4, 1, 0, 8, 128),
                                                           (4, 2, 3, 8, 128), (2, 4, 0, 32, 128), (2, 4, 0, 8, 256),
                                                           (1, 2, 0, 4, 128))
                if bm * rn % k_lanes == 0]
    for s in variants:
        two = replace(s, split_k=max(split, 3))
        for one in (replace(s, split_k=split), two):
            assert _rel_err(_gemm_nan_out(a, b, schedule=one), ha @ hb) < tol, one
        fused = replace(two, split_k_fused=True)
        assert bool((_gemm_nan_out(a, b, schedule=fused) == _gemm_nan_out(a, b, schedule=two)).all()), fused
    c0 = rng.uniform(-1, 1, (m, n))
    c = cp.asarray(c0.astype(dtype))
    tiledsl.gemm(a, b, c, alpha=1.5, beta=-0.5, schedule=replace(variants[0], split_k=split))
    ref = 1.5 * (ha @ hb) - 0.5 * cp.asnumpy(cp.asarray(c0.astype(dtype))).astype(np.float64)
    assert _rel_err(c, ref) < tol * 2


@pytest.mark.parametrize("dtype", ["float32", "float16"])  # bfloat16: tests/test_host_cuda_cpu.py (no CuPy dtype)
@pytest.mark.parametrize("m,n,k", [(16, 4096, 4096), (12, 22016, 4096), (9, 133, 3000), (5, 7, 130), (16, 33, 611),
                                   (8, 513, 1000), (4, 3, 36)])
def test_gemv_column_b_lanes_against_float64(dtype, m, n, k, rng):
    """x @ W.T on the kernel with A in registers and the warp's lanes in groups of ``k_lanes`` along K: the
    variants ``benchmarks/gemv_fused.py --family colb_lanes`` times (``gemv_lanes_column_b``: 8, 16 and 4 lanes per
    group, 2 and 4 columns per group, unroll 1 and 2, 128 and 256 threads, registers capped at 168 and 128) and
    ``schedule=None`` for the float32 products; one slice, three with the split-K kernel and the fused sum (the same
    bits); K odd, 2 mod 4 and 0 mod 4 (B and A read 1, 2, 4 wide), rows past M, groups past N; a NaN-poisoned C, then
    alpha and beta."""
    cp, tol, a, b, ha, hb, bm = _column_b_operands(dtype, m, n, k, rng)
    variants = [tiledsl.GemmSchedule(kernel="gemv", bm=bm, bn=bn, vec=4, rn=rn, unroll=unroll, min_blocks=min_blocks,
                                     k_lanes=k_lanes)
                for k_lanes, rn, unroll, bn, min_blocks in ((8, 4, 2, 128, 1), (8, 2, 2, 128, 1), (8, 2, 1, 128, 3),
                                                            (8, 4, 1, 128, 3), (8, 4, 1, 256, 2), (16, 4, 2, 128, 1),
                                                            (4, 4, 2, 128, 1), (4, 1, 2, 128, 1))
                if bm * rn % k_lanes == 0]
    for s in variants:
        two = replace(s, split_k=3)
        assert _rel_err(_gemm_nan_out(a, b, schedule=s), ha @ hb) < tol, s
        got = _gemm_nan_out(a, b, schedule=two)
        assert _rel_err(got, ha @ hb) < tol, two
        fused = replace(two, split_k_fused=True)
        assert bool((_gemm_nan_out(a, b, schedule=fused) == got).all()), fused
    if dtype == "float32":
        assert _rel_err(_gemm_nan_out(a, b), ha @ hb) < tol, "schedule=None"
    c0 = rng.uniform(-1, 1, (m, n))
    c = cp.asarray(c0.astype(dtype))
    tiledsl.gemm(a, b, c, alpha=1.5, beta=-0.5, schedule=variants[0])
    ref = 1.5 * (ha @ hb) - 0.5 * cp.asnumpy(cp.asarray(c0.astype(dtype))).astype(np.float64)
    assert _rel_err(c, ref) < tol * 2


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("la", ["row", "col"])
@pytest.mark.parametrize("m,n,k", [(3, 7, 13), (4, 127, 129), (9, 4098, 300), (16, 4096, 4096), (12, 133, 3000),
                                   (16, 1, 64), (8, 513, 1000)])
def test_gemv_smem_a_column_major_b_against_float64(dtype, la, m, n, k, rng):
    """smem_a with a column-major B (x @ W.T, torch's Linear): A's K slice staged in its own layout, lanes along K
    reading B and the staged A VB wide (K odd, 2 mod 4 and 0 mod 4: scalar, 2- and 4-wide), 1, 2 and 4 columns per
    warp (the reduce-scatter epilogue where bm·rn fills the warp's lanes, the per-value shuffles where it does not),
    unroll 1 and 2, one slice, the split-K kernel and the fused split-K (the same bits), rows past M and columns past
    N; a NaN-poisoned C, then alpha and beta; the FMA GEMV pick stages A for 5-16 float32 rows of an aligned x @ W.T
    whose W is at most 16 MiB, N ≥ 768, K ≤ 4096 (gemv_staged_a_column_b; schedule=None's below 9 rows, from 9 the
    FP64 kernel's: gemv_dmma_default)."""
    cp = _cp()
    from tiledsl.gemm.family import gemv_block_rows, gemv_schedule
    from tiledsl.gemm.schedule import gemv_smem_a_bytes

    tol = (1e-5 if dtype == "float32" else 2e-3) * max(1.0, (k / 4096) ** 0.5)
    a, _ = _rand((m, k), rng, dtype, la)
    b, _ = _rand((k, n), rng, dtype, "col")
    ha, hb = cp.asnumpy(a).astype(np.float64), cp.asnumpy(b).astype(np.float64)  # the rounded inputs
    bm = max(4, gemv_block_rows(m))

    def fits(split: int) -> bool:  # rule smem_a_slice_fits
        return gemv_smem_a_bytes(k, tiledsl.GemmSchedule(kernel="gemv", bm=bm, split_k=split, smem_a=True)) <= 49152

    splits = [split for split in (1, 3, 16) if fits(split)][:2]
    for split, unroll, rn in itertools.product(splits, (1, 2), (1, 2, 4)):
        two = tiledsl.GemmSchedule(kernel="gemv", bm=bm, bn=128, vec=4, rn=rn, unroll=unroll, split_k=split,
                                   smem_a=True, min_blocks=2)
        got = _gemm_nan_out(a, b, schedule=two)
        assert _rel_err(got, ha @ hb) < tol, two
        if split > 1:
            fused = replace(two, split_k_fused=True)
            assert bool((_gemm_nan_out(a, b, schedule=fused) == got).all()), fused
    c0 = rng.uniform(-1, 1, (m, n))
    c = cp.asarray(c0.astype(dtype))
    tiledsl.gemm(a, b, c, alpha=1.5, beta=-0.5, schedule=replace(two, split_k=splits[-1]))
    ref = 1.5 * (ha @ hb) - 0.5 * cp.asnumpy(cp.asarray(c0.astype(dtype))).astype(np.float64)
    assert _rel_err(c, ref) < tol * 2
    al_k = 4 if k % 4 == 0 else 2 if k % 2 == 0 else 1
    op = tiledsl.GemmOp(m, n, k, dtype=dtype, layout_a=la, layout_b="col", align_a=al_k if la == "row" else 1,
                        align_b=al_k, align_c=4 if n % 4 == 0 else 2 if n % 2 == 0 else 1)
    staged = gemv_schedule(op, tiledsl.Target.current()).smem_a  # gemv_staged_a_column_b (the FMA GEMV pick)
    assert staged == (dtype == "float32" and la == "row" and m > 4 and k % 4 == 0 and k * n * 4 <= 16 << 20
                      and n >= 768 and k <= 4096), op
    assert _rel_err(_gemm_nan_out(a, b), ha @ hb) < tol


@pytest.mark.parametrize("m,n,k", [(301, 3, 1000), (129, 16, 5000), (7, 9, 64)])
def test_gemv_column_groups_into_a_column_major_c(m, n, k, rng):
    """A few-column product run as rows (Cᵀ = Bᵀ·Aᵀ, the column-major Cᵀ written element by element) with groups of
    columns: each of the row product's columns (the original M) stored once, groups past it never."""
    cp = _cp()
    from tiledsl.gemm.api import _gemm_into
    from tiledsl.gemm.family import gemv_block_rows

    a, ha = _rand((m, k), rng, layout="col")
    b, hb = _rand((k, n), rng, layout="col")
    for groups, split, fused in ((2, 1, False), (4, 3, True), (8, 3, False)):
        if gemv_block_rows(n) * groups > 64:
            continue
        s = tiledsl.GemmSchedule(kernel="gemv", bm=gemv_block_rows(n), bn=64, vec=1, col_groups=groups, unroll=2,
                                 split_k=split, split_k_fused=fused)
        c = cp.full((m, n), cp.nan, dtype=cp.float32)
        _gemm_into(b.T, a.T, c.T, 1.0, 0.0, s, "float32", None, True, True, c_col=n > 1)
        assert _rel_err(c, ha @ hb) < 1e-5 * max(1.0, (k / 4096) ** 0.5), s


@pytest.mark.parametrize("lb", ["row", "col"])
@pytest.mark.parametrize("m,n,k,split", [(3, 1000, 5000, 37), (16, 4100, 4096, 64), (1, 7, 129, 2)])
def test_gemv_fused_split_k_matches_the_split_k_kernel_bit_for_bit(lb, m, n, k, split, rng):
    """split_k_fused: the last block of each column group sums the slices in slice order, as the split-K kernel
    does: the same bits, on fresh data three times over (each launch must leave its tickets at zero for the next),
    poisoned C, alpha and beta."""
    cp = _cp()
    fused = tiledsl.GemmSchedule(kernel="gemv", bm=min(16, m), bn=64, vec=4, split_k=split, split_k_fused=True,
                                 rn=1 if lb == "row" else 2)
    two = replace(fused, split_k_fused=False)
    for _ in range(3):
        a, ha = _rand((m, k), rng)
        b, hb = _rand((k, n), rng, layout=lb)
        got = _gemm_nan_out(a, b, schedule=fused)
        assert _rel_err(got, ha @ hb) < 1e-5 * max(1.0, (k / 4096) ** 0.5)
        assert bool((got == _gemm_nan_out(a, b, schedule=two)).all())
        assert bool((got == _gemm_nan_out(a, b, schedule=fused)).all())
        c0 = rng.uniform(-1, 1, (m, n))
        c = cp.asarray(c0.astype(np.float32))
        tiledsl.gemm(a, b, c, alpha=1.5, beta=-0.5, schedule=fused)
        assert _rel_err(c, 1.5 * (ha @ hb) - 0.5 * c0) < 1e-5 * max(1.0, (k / 4096) ** 0.5)


@pytest.mark.parametrize("layout_b", ["col", "row"])
@pytest.mark.parametrize("m,n,k", [(16, 4096, 4096), (12, 22016, 4096), (9, 132, 3000), (16, 36, 612), (13, 768, 768),
                                   (16, 8, 4), (4, 1000, 516)])
def test_gemv_mma_3xtf32_against_float64(m, n, k, layout_b, rng):
    """precision="3xtf32": x @ W.T and x @ W on the tensor cores (mma.sync m16n8k8 TF32, each input in two TF32 parts)
    within the float32 bound of a float64 product on a NaN-poisoned C (each product keeps about 21 of float32's 24
    bits): ``schedule=None`` (the tensor-core GEMV for 9-16 rows, the exact kernels below), 8-64 columns per warp
    (row-major B: 32 and 64), unroll 1-4, one slice and the split-K kernel, rows past M, columns past N, K ≡ 4 mod 16
    (the guarded last step); then alpha and beta. The same check as IEEE float32's: the tensor cores must not cost
    float32's accuracy."""
    cp = _cp()
    tol = 1e-5 * max(1.0, (k / 4096) ** 0.5)
    a, _ = _rand((m, k), rng)
    b, _ = _rand((k, n), rng, layout=layout_b)
    ref = cp.asnumpy(a).astype(np.float64) @ cp.asnumpy(b).astype(np.float64)  # of the rounded inputs
    from tiledsl.gemm.family import gemv_mma_schedule

    op = tiledsl.GemmOp(m, n, k, layout_b=layout_b, align_c=4 if n % 4 == 0 else 1, precision="3xtf32")  # as the call's
    assert (gemv_mma_schedule(op, tiledsl.Target.current()) is not None) == (m >= 9), "the tensor cores from 9 rows"
    assert _rel_err(_gemm_nan_out(a, b, precision="3xtf32"), ref) < tol, "schedule=None"
    forms = ((8, 1, 1, 128), (16, 2, 1, 128), (32, 2, 3, 128), (64, 4, 1, 64), (32, 4, 2, 256))
    variants = [tiledsl.GemmSchedule(kernel="gemv", mma="mma_sync", bm=16, bn=bn, bk=16, rn=rn, unroll=unroll, vec=4,
                                     split_k=split)
                for rn, unroll, split, bn in forms if layout_b == "col" or rn % 32 == 0]
    for s in variants:
        got = _gemm_nan_out(a, b, schedule=s, precision="3xtf32")
        assert _rel_err(got, ref) < tol, s
        if s.split_k > 1:  # the slices summed in the kernel: the split-K kernel's bits
            fused = replace(s, split_k_fused=True)
            assert bool((_gemm_nan_out(a, b, schedule=fused, precision="3xtf32") == got).all()), fused
    c0 = rng.uniform(-1, 1, (m, n))
    one, two = next(v for v in variants if v.split_k == 1), next(v for v in variants if v.split_k > 1)
    for s in (one, two, replace(two, split_k_fused=True)):  # beta in the kernel, the split-K sum, the fused sum
        c = cp.asarray(c0.astype(np.float32))
        tiledsl.gemm(a, b, c, alpha=1.5, beta=-0.5, schedule=s, precision="3xtf32")
        assert _rel_err(c, 1.5 * ref - 0.5 * c0.astype(np.float32).astype(np.float64)) < tol * 2, s


@pytest.mark.parametrize("layout_b", ["col", "row"])
def test_gemv_mma_3xtf32_special_values(layout_b, rng):
    """precision="3xtf32" near and past float32's range on the GPU's tensor cores, as documented and as the host run
    shows (tests/test_host_cuda_cpu.py): an input of magnitude at least 3.40274e38 (finite) or infinite makes every
    output it reaches NaN, even times 0; a NaN stays NaN; 1e36 and 3.40e38 multiply as IEEE float32 does."""
    cp = _cp()
    m, n, k = 12, 40, 36
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    a[0, 5], a[1, 7], a[2, :], a[3, 0], b[0, :] = 3.4028e38, np.nan, 1e36, 3.40e38, 0.0
    b[9, 4], b[10, :], a[4, 10] = np.inf, 0.0, 3.4028e38
    bd = cp.asarray(b) if layout_b == "row" else cp.asarray(np.ascontiguousarray(b.T)).T
    s = tiledsl.GemmSchedule(kernel="gemv", mma="mma_sync", bm=16, bn=128, bk=16, rn=32, unroll=2, vec=4)
    got = cp.asnumpy(_gemm_nan_out(cp.asarray(a), bd, schedule=s, precision="3xtf32"))
    nan = np.isnan(got)
    assert nan[0].all() and nan[1].all() and nan[4].all() and nan[:, 4].all()
    rest = np.ones_like(nan)
    rest[[0, 1, 4], :], rest[:, 4] = False, False
    assert not nan[rest].any()
    cols = [j for j in range(n) if j != 4]
    assert _rel_err(got[2:4][:, cols], (a.astype(np.float64) @ b.astype(np.float64))[2:4][:, cols]) < 1e-6


@pytest.mark.parametrize("layout_b", ["col", "row"])
@pytest.mark.parametrize("m,n,k", [(16, 4096, 4096), (12, 22016, 4096), (9, 132, 3000), (16, 36, 612), (13, 768, 768),
                                   (16, 8, 4), (4, 1000, 516), (1, 4096, 14336)])
def test_gemv_dmma_against_float64(m, n, k, layout_b, rng):
    """mma="dmma": x @ W.T and x @ W on the FP64 tensor cores (mma.sync m16n8k16 f64; float32 inputs widened exactly,
    float64 sums) on a NaN-poisoned C, every element within its float64-sum bound (K·2^-52 of Σ|a·b| plus half an ulp
    of float32 per rounding: of the result with one slice; of each slice's sum and each prefix sum of the split-K sum
    with several; float32 sums within a slice exceed it):
    gemv_dmma_schedule's form, 8-64 columns per warp (row-major B: 32 and 64), unroll 1-8, one slice and the split-K
    kernel (the fused sum: the same bits), each through the ring of k16 steps too (``fragment_prefetch``: the same
    bits), rows past M, columns past N, K ≡ 4 mod 16 (the guarded last step); then alpha and beta. With one slice at
    least 99 % of C is A·B correctly rounded to float32."""
    cp = _cp()
    if tiledsl.Target.current().cc < 90:
        pytest.skip("mma='dmma' needs sm_90 (rule dmma_needs_sm_90)")
    a, _ = _rand((m, k), rng)
    b, _ = _rand((k, n), rng, layout=layout_b)
    ha, hb = cp.asnumpy(a).astype(np.float64), cp.asnumpy(b).astype(np.float64)
    ref = ha @ hb
    from tiledsl.gemm.schedule import gemv_slice_depth

    def bound(s):
        return dmma_bound(ha, hb, ref, gemv_slice_depth(k, s))

    from tiledsl.gemm.family import gemv_dmma_schedule

    op = tiledsl.GemmOp(m, n, k, layout_b=layout_b, align_c=4 if n % 4 == 0 else 1)  # as the call's
    pick = gemv_dmma_schedule(op, tiledsl.Target.current())
    forms = ((8, 1, 1, 128), (16, 4, 1, 128), (32, 2, 3, 128), (64, 2, 1, 64), (32, 8, 2, 256))
    variants = [pick] + [tiledsl.GemmSchedule(kernel="gemv", mma="dmma", bm=16, bn=bn, bk=16, rn=rn, unroll=unroll,
                                              vec=4, split_k=split)
                         for rn, unroll, split, bn in forms if layout_b == "col" or rn % 32 == 0]
    for s in variants:
        got = cp.asnumpy(_gemm_nan_out(a, b, schedule=s))
        assert (np.abs(got - ref) <= bound(s)).all(), s
        if s.split_k == 1 and m * n >= 4096:
            assert np.mean(got == ref.astype(np.float32)) >= 0.99, s
        if s.split_k > 1:  # the slices summed in the kernel: the split-K kernel's bits
            fused = replace(s, split_k_fused=True)
            assert bool((_gemm_nan_out(a, b, schedule=fused) == cp.asarray(got)).all()), fused
        ring = replace(s, fragment_prefetch=True)  # the ring of k16 steps: the same sums in the same order
        assert bool((_gemm_nan_out(a, b, schedule=ring) == cp.asarray(got)).all()), ring
    c0 = rng.uniform(-1, 1, (m, n)).astype(np.float32)
    want = 1.5 * ref - 0.5 * c0.astype(np.float64)
    one, two = next(v for v in variants if v.split_k == 1), next(v for v in variants if v.split_k > 1)
    for s in (one, two, replace(two, split_k_fused=True)):  # beta in the kernel, the split-K sum, the fused sum
        c = cp.asarray(c0)
        tiledsl.gemm(a, b, c, alpha=1.5, beta=-0.5, schedule=s)
        slack = 2.0**-24 * (np.abs(want) + 0.5 * np.abs(c0) + 1.5 * np.abs(ref))
        assert (np.abs(cp.asnumpy(c) - want) <= 1.5 * bound(s) + slack).all(), s


@pytest.mark.parametrize("m,n,k,offset", [(16, 50257, 768, 0), (9, 4097, 4096, 0), (12, 131, 516, 0), (16, 3, 260, 0),
                                           (13, 70, 1028, 0), (16, 4096, 1024, 1), (10, 258, 4100, 2)])
def test_gemv_dmma_reads_an_unaligned_w_four_bytes_at_a_time(m, n, k, offset, rng):
    """x @ W on the FP64 tensor cores where W's rows do not start 16-byte aligned (an odd N or N ≡ 2 mod 4; or W a
    view ``offset`` floats into a wider array: a misaligned base), read 4 bytes at a time (gemv_dmma_schedule's vec=1
    form, its groups too): C (NaN-poisoned first) within the float64-sum bound, and bit for bit the 16-byte kernel's
    on the same W copied into a 16-byte-aligned array of a multiple of 4 columns (the same elements into the same
    sums). schedule=None runs it where gemv_dmma_default takes the op (GPT-2's 16×50257×768, 9×4097×4096)."""
    cp = _cp()
    if tiledsl.Target.current().cc < 90:
        pytest.skip("mma='dmma' needs sm_90 (rule dmma_needs_sm_90)")
    from tiledsl.gemm.family import gemv_dmma_default, gemv_dmma_schedule
    from tiledsl.gemm.schedule import gemv_slice_depth

    target = tiledsl.Target.current()
    a, _ = _rand((m, k), rng)
    wide, _ = _rand((k, n + offset), rng)
    b = wide[:, offset:]
    n4 = -(-n // 4) * 4
    b_pad = cp.zeros((k, n4), dtype=cp.float32)
    b_pad[:, :n] = b
    ha, hb = cp.asnumpy(a).astype(np.float64), cp.asnumpy(b).astype(np.float64)
    ref = ha @ hb
    align_b = next(v for v in (4, 2, 1) if n % v == 0 and (n + offset) % v == 0 and offset % v == 0)  # as the call's
    op = tiledsl.GemmOp(m, n, k, layout_b="row", align_b=align_b, align_c=4 if n % 4 == 0 else 1)
    pick = gemv_dmma_schedule(op, target)
    assert pick.vec == 1 and pick.fragment_prefetch, pick
    for s in (pick, replace(pick, fragment_prefetch=False)):
        got = _gemm_nan_out(a, b, schedule=s)
        assert (np.abs(cp.asnumpy(got) - ref) <= dmma_bound(ha, hb, ref, gemv_slice_depth(k, s))).all(), s
        assert bool((got == _gemm_nan_out(a, b_pad, schedule=replace(s, vec=4))[:, :n]).all()), s
    if any(g in target.name for g in ("H100", "H200")) and gemv_dmma_default(op, target) is not None:
        assert default_schedule(op, target) == pick
        assert bool((_gemm_nan_out(a, b) == _gemm_nan_out(a, b, schedule=pick)).all())


@pytest.mark.parametrize("m,n,k,layout_b", [(9, 4096, 1000, "col"), (11, 768, 3072, "col"), (16, 1024, 4096, "col"),
                                            (8, 4096, 1000, "col"), (12, 512, 512, "col"), (16, 4096, 4096, "row"),
                                            (12, 4096, 4096, "row"), (16, 4096, 1024, "row"), (9, 4096, 4096, "row"),
                                            (8, 4096, 4096, "row"), (16, 4097, 4096, "row"), (8, 4097, 4096, "row")])
def test_schedule_none_runs_the_fp64_gemv_kernel_where_gemv_dmma_default_says(m, n, k, layout_b, rng):
    """schedule=None on an H100 or H200 runs the FP64 GEMV kernel exactly where gemv_dmma_default takes it (x @ W.T of
    9-16 rows with W of at least 2 MiB, x @ W of 9-16 rows with W of at least 64 MiB, an odd N too): the call's C
    (NaN-poisoned first)
    equals, bit for bit, the explicit call with the schedule the rule names, and is within the float64-sum bound where
    it is the FP64 kernel, within the float32 tolerance elsewhere (8 rows, W of 1 MiB, x @ W with W of 16 MiB: the FMA
    kernels). The GPUs are named here, not read from the rule's table."""
    cp = _cp()
    from tiledsl.gemm.family import gemv_dmma_default
    from tiledsl.gemm.schedule import gemv_slice_depth

    target = tiledsl.Target.current()
    if not any(g in target.name for g in ("H100", "H200")):
        pytest.skip(f"gemv_dmma_default takes the FP64 kernel on an H100 or H200 only, not on {target.name}")
    a, _ = _rand((m, k), rng)
    b, _ = _rand((k, n), rng, layout=layout_b)
    op = tiledsl.GemmOp(m, n, k, layout_b=layout_b, align_c=4 if n % 4 == 0 else 1)  # as the call's
    takes = 9 <= m <= 16 and 4 * n * k >= (2 << 20 if layout_b == "col" else 64 << 20)
    assert (gemv_dmma_default(op, target) is not None) == takes, op
    pick = default_schedule(op, target)
    assert (pick.mma == "dmma") == takes, pick
    got = _gemm_nan_out(a, b)
    assert bool((got == _gemm_nan_out(a, b, schedule=pick)).all()), pick
    ha, hb = cp.asnumpy(a).astype(np.float64), cp.asnumpy(b).astype(np.float64)
    ref = ha @ hb
    if takes:
        assert (np.abs(cp.asnumpy(got) - ref) <= dmma_bound(ha, hb, ref, gemv_slice_depth(k, pick))).all(), pick
    else:
        assert _rel_err(got, ref) < 1e-5 * max(1.0, (k / 4096) ** 0.5), pick


@pytest.mark.parametrize("layout_b", ["col", "row"])
def test_gemv_dmma_special_values(layout_b, rng):
    """mma="dmma" follows IEEE arithmetic in float64 on the GPU's tensor cores, as documented and as the host run shows
    (tests/test_host_cuda_cpu.py): a NaN input makes its row NaN, ∞·0 is NaN, an ∞ of B makes its column ±∞, and two
    products past float32's range that cancel (3.4e38·2 − 3.4e38·2, row 0's only nonzero terms) leave the exact 0."""
    cp = _cp()
    if tiledsl.Target.current().cc < 90:
        pytest.skip("mma='dmma' needs sm_90 (rule dmma_needs_sm_90)")
    a, b = special_operands(rng)
    bd = cp.asarray(b) if layout_b == "row" else cp.asarray(np.ascontiguousarray(b.T)).T
    s = tiledsl.GemmSchedule(kernel="gemv", mma="dmma", bm=16, bn=128, bk=16, rn=32, unroll=2, vec=4)
    check_special_values(cp.asnumpy(_gemm_nan_out(cp.asarray(a), bd, schedule=s)), a, b)


@pytest.mark.parametrize("m,n,k,split,layout_b", [(16, 4096, 4096, 8, "col"), (7, 130, 999, 3, "row"),
                                                  (129, 65, 1000, 4, "row")])
def test_split_k_sum_as_a_dependent_launch_gives_the_plain_launch_bits(m, n, k, split, layout_b):
    """On Hopper with the CUDA Python bindings the split-K sum is a programmatic dependent launch (it waits in
    griddepcontrol.wait for the main kernel's partial sums): checked to run that way (its launches counted), with the
    workspace filled with NaN before each call (a sum that read it before the main kernel wrote it would show NaN),
    against float64 with beta reading C (NaN at one element: there only), and bit for bit (sign of zero included)
    against the same call launched plainly (tiledsl.dependent.set_enabled(False)) — the FP64 GEMV kernel at 16 rows
    (schedule=None) and FMA tiles."""
    cp = _cp()
    target = tiledsl.Target.current()
    if not dependent.usable(target.arch):
        pytest.skip(f"dependent launches need Hopper, a 12.3+ driver and cuda-bindings: {target.name} ({target.arch})")
    rng = np.random.default_rng(m * 31 + n + k)
    a, ha, b, hb, op = _operands(m, n, k, "row", layout_b, rng)
    s = (default_schedule(op, target) if m == 16 else
         replace(tiledsl.preset("gemm", "sgemm_64x64_4x4"), split_k=split))
    assert s.split_k == split and not s.split_k_fused, s
    c0 = rng.uniform(-1, 1, (m, n))
    calls = []
    real = dependent.DependentLaunch.__call__

    def counted(self, values, stream_ptr):
        calls.append(stream_ptr)
        return real(self, values, stream_ptr)

    ws = next(w for w in tiledsl.plan(op, s, device=target).workspace if w.name == "workspace")
    out = {}
    was = dependent.enabled()
    try:
        dependent.DependentLaunch.__call__ = counted
        for on in (True, False):
            dependent.set_enabled(on)
            cp.cuda.runtime.memset(tiledsl.launch.workspace_ptr(ws), 0xFF, ws.nbytes)  # NaN partial sums
            c = cp.asarray(c0.astype(np.float32))
            if on:
                c[0, 0] = cp.nan  # poisoned where beta reads it: NaN must come out there only
            out[on] = tiledsl.gemm(a, b, c, alpha=0.5, beta=2.0, schedule=s)
            cp.cuda.Device().synchronize()
            if on:
                assert len(calls) == 1, calls
    finally:
        dependent.DependentLaunch.__call__ = real
        dependent.set_enabled(was)
    got = cp.asnumpy(out[True]).astype(np.float64)
    assert np.isnan(got[0, 0]) and np.isfinite(np.delete(got.ravel(), 0)).all()
    ref = 0.5 * ha @ hb + 2.0 * c0
    err = np.abs(np.delete((got - ref).ravel(), 0)).max() / np.abs(ref).max()
    assert err < 1e-5 * max(1.0, k / 1024), err
    bits, plain = cp.asnumpy(out[True]).view(np.uint32), cp.asnumpy(out[False]).view(np.uint32)
    assert np.array_equal(bits.ravel()[1:], plain.ravel()[1:])
    assert len(calls) == 1  # the plain call did not go through it

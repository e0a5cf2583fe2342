"""GEMM on the CPU: rule table, schedule round-trip, emitted source, NVRTC compile + resource report."""

from __future__ import annotations

import pickle
import re
from dataclasses import replace

import numpy as np
import pytest

import tiledsl
from tiledsl import rules as R
from tiledsl.compile import compile_source
from tiledsl.gemm import GEMM_RULES, GemmOp, GemmSchedule, emit_gemm
from tiledsl.gemm.emit import emit_splitk_reduce
from tiledsl.gemm.schedule import estimate_registers

# One failing schedule per schedule-scope rule: (rule name, kwargs)
FAILING = [
    ("positive_sizes", dict(bk=0)),
    ("vec_width", dict(vec=3)),
    ("thread_tile_divides_block_m", dict(bm=100, rm=8)),
    ("thread_tile_divides_block_n", dict(bn=100, rn=8)),
    ("fragment_width_m", dict(bm=96, rm=3)),
    ("fragment_width_n", dict(bn=96, rn=6)),
    ("warp_tile_divides_block", dict(wm=64, wn=32, bm=96, rm=8)),
    ("thread_tile_divides_warp", dict(bm=144, wm=36, wn=64)),
    ("warp_is_32_threads", dict(wm=64, wn=64)),
    ("threads_at_most_1024", dict(bm=128, bn=128, rm=2, rn=2, bk=8)),
    ("vec_divides_tile", dict(bk=6, unroll=6, vec=4)),
    ("unroll_divides_bk", dict(unroll=3)),
    ("smem_pad_keeps_16_bytes", dict(smem_pad=1)),
    ("accumulators_fit_registers", dict(bm=256, bn=128, rm=16, rn=16, bk=16)),
    ("swizzle_range", dict(swizzle=0)),
    ("tile_sizes_bounded", dict(bm=2048, rm=8, bk=8)),
    ("warp_tile_positive", dict(wm=-32, wn=-64)),
    ("split_k_range", dict(split_k=0)),
    ("split_k_range", dict(split_k=65)),
    ("gemv_split_k_range", dict(kernel="gemv", bm=4, bn=128, split_k=1025)),
    ("min_blocks_range", dict(min_blocks=-1)),
    ("mma_kind", dict(mma="hmma")),
    ("thread_tile_positive", dict(rm=0)),
    ("thread_tile_bounded", dict(bm=256, rm=128)),
    ("stages_range", dict(stages=9)),
    ("gemv_stages_at_most_2", dict(kernel="gemv", bm=4, bn=128, stages=3)),
    ("fragment_prefetch_needs_unrolled_double_buffer", dict(unroll=4, fragment_prefetch=True)),
    ("fragment_prefetch_needs_unrolled_double_buffer", dict(stages=3, fragment_prefetch=True)),
    ("mma_stages_at_least_2", dict(mma="mma_sync", bk=32, stages=1, smem_pad=8)),
    ("mma_warp_tile_shape", dict(mma="mma_sync", bk=32, bm=48, wm=24, wn=64)),
    ("mma_bk_multiple_of_16", dict(mma="mma_sync", bk=8)),
    ("mma_accumulators_fit_registers", dict(mma="mma_sync", bk=32, bm=128, bn=256, wm=128, wn=64, smem_pad=8)),
    ("mma_tile_copies_even", dict(mma="mma_sync", bm=32, bn=32, bk=16, wm=16, wn=16, smem_pad=8)),
    ("mma_pad_16_bytes", dict(mma="mma_sync", bk=32, smem_pad=4)),
    ("wgmma_block_rows", dict(mma="wgmma", bm=96, bn=128, bk=64, stages=4)),
    ("wgmma_block_columns", dict(mma="wgmma", bm=128, bn=320, bk=64, stages=3)),
    ("wgmma_bk_64", dict(mma="wgmma", bm=128, bn=128, bk=16, stages=4)),
    ("wgmma_stages_at_least_3", dict(mma="wgmma", bm=128, bn=128, bk=64, stages=2)),
    ("wgmma_copies_even", dict(mma="wgmma", bm=192, bn=256, bk=64, stages=3)),
    ("wgmma_no_padding", dict(mma="wgmma", bm=128, bn=128, bk=64, stages=4, smem_pad=8)),
    ("warp_specialize_needs_wgmma", dict(mma="mma_sync", bk=32, smem_pad=8, warp_specialize=True)),
    ("warp_specialize_rows", dict(mma="wgmma", bm=256, bn=128, bk=64, stages=4, warp_specialize=True)),
    ("warp_specialize_registers", dict(mma="wgmma", bm=128, bn=64, bk=64, stages=4, warp_specialize=True)),
    ("persistent_needs_tma", dict(mma="wgmma", bm=128, bn=256, bk=64, stages=4, persistent=True)),
    ("persistent_needs_tma", dict(mma="wgmma", bm=128, bn=256, bk=64, stages=4, warp_specialize=True,
                                  split_k=2, persistent=True)),
    ("b_tile_starts_16_byte_aligned", dict(bm=10, bn=128, bk=1, rm=2, rn=4, wm=2, wn=128, vec=1, unroll=1,
                                           stages=1)),  # uneven tiles: Bs at 40 bytes
    ("b_tile_starts_16_byte_aligned", dict(bm=17, bn=128, bk=5, rm=1, rn=4, wm=1, wn=128, vec=1, unroll=5)),
    ("kernel_kind", dict(kernel="gemm")),
    ("gemv_on_fma", dict(kernel="gemv", bm=4, bn=128, mma="wgmma", bk=64)),
    ("gemv_mma_rows", dict(kernel="gemv", mma="mma_sync", bm=8, bn=128, bk=16, rn=32)),
    ("gemv_mma_columns", dict(kernel="gemv", mma="mma_sync", bm=16, bn=128, bk=16, rn=12)),
    ("gemv_mma_columns", dict(kernel="gemv", mma="mma_sync", bm=16, bn=128, bk=16, rn=72)),
    ("gemv_mma_unroll", dict(kernel="gemv", mma="mma_sync", bm=16, bn=128, bk=16, rn=32, unroll=9)),
    ("gemv_mma_plain", dict(kernel="gemv", mma="mma_sync", bm=16, bn=128, bk=16, rn=32, smem_a=True)),
    ("gemv_mma_plain", dict(kernel="gemv", mma="mma_sync", bm=16, bn=128, bk=16, rn=32, k_lanes=8)),
    ("mma_bk_multiple_of_16", dict(kernel="gemv", mma="mma_sync", bm=16, bn=128, bk=8, rn=32)),
    ("mma_bk_multiple_of_16", dict(kernel="gemv", mma="dmma", bm=16, bn=128, bk=8, rn=32)),
    ("dmma_gemv_only", dict(mma="dmma", bm=64, bn=64, bk=16)),
    ("gemv_mma_rows", dict(kernel="gemv", mma="dmma", bm=8, bn=128, bk=16, rn=32)),
    ("gemv_mma_columns", dict(kernel="gemv", mma="dmma", bm=16, bn=128, bk=16, rn=12)),
    ("gemv_mma_unroll", dict(kernel="gemv", mma="dmma", bm=16, bn=128, bk=16, rn=32, unroll=9)),
    ("gemv_mma_plain", dict(kernel="gemv", mma="dmma", bm=16, bn=128, bk=16, rn=32, smem_a=True)),
    ("gemv_rows", dict(kernel="gemv", bm=32, bn=128)),
    ("gemv_block_threads", dict(kernel="gemv", bm=4, bn=100)),
    ("stream_k_on_fma_tiles", dict(split_k=2, stream_k=True)),
    ("stream_k_on_fma_tiles", dict(kernel="gemv", bm=4, bn=128, stream_k=True)),
    ("split_k_fused_on_gemv", dict(split_k=4, split_k_fused=True)),
    ("col_groups_on_gemv", dict(col_groups=2)),
    ("col_groups_on_gemv", dict(kernel="gemv", bm=1, bn=128, col_groups=16)),
    ("col_groups_on_gemv", dict(kernel="gemv", bm=1, bn=128, col_groups=0)),
    ("col_groups_on_gemv", dict(kernel="gemv", bm=1, bn=128, col_groups=3)),
    ("stream_k_on_fma_tiles", dict(mma="mma_sync", bk=32, smem_pad=8, stream_k=True)),
    ("smem_a_on_gemv", dict(smem_a=True)),
    ("smem_a_on_gemv", dict(kernel="gemv", bm=2, bn=128, smem_a=True)),
    ("smem_a_on_gemv", dict(kernel="gemv", bm=8, bn=128, vec=1, col_groups=2, smem_a=True)),
    ("spare_slot_on_staged_a", dict(kernel="gemv", bm=8, bn=128, spare_slot=True)),
    ("spare_slot_on_staged_a", dict(spare_slot=True)),
    ("k_lanes_range", dict(kernel="gemv", bm=16, bn=128, rn=2, smem_a=True, spare_slot=True, k_lanes=2)),
    ("k_lanes_range", dict(kernel="gemv", bm=16, bn=128, rn=2, smem_a=True, spare_slot=True, k_lanes=12)),
    ("k_lanes_on_column_b_ring", dict(kernel="gemv", bm=16, bn=128, rn=2, smem_a=True, k_lanes=8)),
    ("k_lanes_on_gemv", dict(k_lanes=8)),
]


@pytest.mark.parametrize("rule,kwargs", FAILING, ids=[r for r, _ in FAILING])
def test_each_rule_has_a_failing_case(rule, kwargs):
    with pytest.raises(tiledsl.ScheduleError) as ei:
        GemmSchedule(**kwargs)
    assert ei.value.rule == rule, str(ei.value)
    assert f"(rule {rule})" in str(ei.value)
    assert isinstance(ei.value, ValueError)


def test_every_schedule_rule_is_exercised():
    tested = {r for r, _ in FAILING}
    assert {r.name for r in GEMM_RULES if r.scope == "schedule"} == tested


UNEVEN = {  # tiles whose vector pieces do not split evenly over the threads (rows fitted to M = 35)
    "40x128x16 t4x8 stream-K": dict(bm=40, bn=128, bk=16, rm=4, rn=8, wm=8, wn=128, unroll=16, stream_k=True),
    "36x256x16 t4x8 cp.async": dict(bm=36, bn=256, bk=16, rm=4, rn=8, wm=4, wn=256, unroll=16, stages=3,
                                    smem_pad=4, min_blocks=1),  # 2 blocks of 288 threads: 4 bytes of spills
    "40x64x8 t4x4 fragment prefetch": dict(bm=40, bn=64, bk=8, rm=4, rn=4, wm=8, wn=64, unroll=8,
                                           fragment_prefetch=True),
}


@pytest.mark.parametrize("name", list(UNEVEN))
def test_uneven_tile_loads_guard_the_last_round(name):
    """A tile whose pieces leave the last round of loads to some threads (the 16×128 B tile of 40×128 in pieces of 4
    over 160 threads: 512 pieces, 3.2 rounds) is valid: LOADS_* rounds up, every load, store and cp.async of that
    operand skips, in its last round only, pieces past the tile; operands that split evenly keep the plain loop.
    Compiles for sm_80 and sm_90 without spills in every layout."""
    from tiledsl.gemm.kernel_plan import plan_gemm
    from tiledsl.gemm.schedule import tile_loads

    s = GemmSchedule(**UNEVEN[name])
    for la, lb in (("row", "row"), ("col", "col"), ("row", "col"), ("col", "row")):
        op = GemmOp(35, 8457, 2560, layout_a=la, layout_b=lb)  # column-major A (lda 35), row-major B: 1-wide pieces
        src = emit_gemm(op, s).source
        p = plan_gemm(op, s)
        for which in ("A", "B"):
            v = p.width(which)
            elements = s.bm * s.bk if which == "A" else s.bk * s.bn
            uneven = elements % (s.threads * v) != 0
            assert (f"constexpr int PIECES_{which}" in src) == uneven, (which, elements, s.threads)
            assert tile_loads(s, which, v) == -(-elements // (s.threads * v))
        guard = re.findall(r"if \(i == (\w+)(?: \* V[AB])? - 1 && r >= (\w+)\) continue;", src)
        assert guard and {g[1] for g in guard} <= {"BM", "BK", "BN"}, guard
        assert {g[0] for g in guard} <= {"LOADS_A", "LOADS_B", "COPIES_A", "COPIES_B"}, guard
        for arch in ("sm_80", "sm_90"):
            k = tiledsl.compile(op, s, arch=arch)
            assert k.spill_bytes == 0 and k.stack_bytes == 0, k.log


@pytest.mark.parametrize("kwargs,rule", [
    (dict(bm=4), "thread_tile_divides_block_m"), (dict(wm=64), "warp_tile_positive"),
    (dict(rm=0), "thread_tile_positive"), (dict(bm=0), "positive_sizes"), (dict(vec=0), "vec_width"),
    (dict(rm=2**31), "thread_tile_bounded"), (dict(swizzle=2**32 + 8), "swizzle_range")])
def test_first_broken_rule_is_reported_never_a_zero_division(kwargs, rule):
    with pytest.raises(tiledsl.ScheduleError) as ei:
        GemmSchedule(**kwargs)
    assert ei.value.rule == rule


def test_numpy_integers_accepted_bools_and_floats_refused():
    s = GemmSchedule(bm=np.int64(128))
    assert s.bm == 128 and type(s.bm) is int
    assert GemmOp(np.int64(4), 4, 4).m == 4
    for bad in (dict(align_a=4.0), dict(align_a=True), dict(read_c="no")):
        with pytest.raises(tiledsl.SpecError, match=list(bad)[0]):
            GemmOp(64, 64, 64, **bad)
    with pytest.raises(tiledsl.SpecError, match=r"GemmOp.dtype=None"):
        GemmOp(4, 4, 4, dtype=None)
    with pytest.raises(tiledsl.SpecError, match=r"GemmOp.dtype='int8' is not supported for GEMM"):
        GemmOp(4, 4, 4, dtype="int8")
    with pytest.raises(tiledsl.SpecError, match=r"GemmOp has no field\(s\) \['bogus'\]"):
        GemmOp.from_dict({"m": 1, "n": 1, "k": 1, "bogus": 2})
    with pytest.raises(tiledsl.ScheduleError, match="needs a dict"):
        GemmSchedule.from_dict(None)


def test_error_names_field_value_and_limit():
    with pytest.raises(ValueError, match=r"GemmSchedule.bm=96 is not a multiple of rm=7"):
        GemmSchedule(bm=96, rm=7)


def test_resource_rule_uses_device_limit():
    big = GemmSchedule(bm=256, bn=256, bk=64, rm=8, rn=8, unroll=8, smem_pad=4)  # 2·64·(260+260)·4 = 266240 B
    h200 = tiledsl.Target.known("H200")
    with pytest.raises(tiledsl.ResourceError, match=r"266240 bytes .* 232448 bytes"):
        big.validate(h200)
    GemmSchedule().validate(h200)
    with pytest.raises(tiledsl.ResourceError, match=r"min_blocks=3 blocks of 1024 threads exceed .* 2048"):
        GemmSchedule(bm=128, bn=128, rm=4, rn=4, bk=32, unroll=8, min_blocks=3).validate(h200)


def test_schedule_round_trip_and_hash():
    s = GemmSchedule(bm=64, bn=128, bk=16, rm=4, rn=8, unroll=4, swizzle=4)
    d = s.to_dict()
    assert GemmSchedule.from_dict(d) == s
    assert hash(GemmSchedule.from_dict(d)) == hash(s)
    assert s.wm * s.wn // (s.rm * s.rn) == 32
    with pytest.raises(ValueError, match="no field"):
        GemmSchedule.from_dict({**d, "bogus": 1})


def test_type_errors_name_field():
    with pytest.raises(tiledsl.ScheduleError, match=r"double_buffer='yes'"):
        GemmSchedule(double_buffer="yes")
    with pytest.raises(tiledsl.ScheduleError, match=r"bm=128.0"):
        GemmSchedule(bm=128.0)


def test_op_validation():
    with pytest.raises(ValueError, match=r"GemmOp.m=-1"):
        GemmOp(-1, 2, 3)
    with pytest.raises(ValueError, match=r"float64"):
        GemmOp(2, 2, 2, dtype="float64")
    with pytest.raises(ValueError, match=r"layout_a='diag'"):
        GemmOp(2, 2, 2, layout_a="diag")
    assert GemmOp(4096, 4096, 4096).flops == 2 * 4096**3
    assert GemmOp(2, 2, 2, dtype=np.float32).dtype == "float32"


def test_widest_dividing_is_the_one_vector_width_rule():
    """tiledsl.spec.widest_dividing: the widest power of two ≤ the cap dividing every extent; GemmOp's defaults,
    the search's ops and the benchmarks' ops all read it."""
    from search.families import gemm_op
    from tiledsl.spec import widest_dividing

    assert [widest_dividing(8, x) for x in (1, 2, 3, 4, 6, 8, 12, 16, 50257)] == [1, 2, 1, 4, 2, 8, 4, 8, 1]
    assert widest_dividing(4, 768, 50258) == 2 and widest_dividing(4) == 4 and widest_dividing(1, 7) == 1
    op = GemmOp(7, 50258, 12)
    assert (op.align_a, op.align_b, op.align_c) == (4, 2, 2)
    assert gemm_op(7, 50258, 12, "float16") == GemmOp(7, 50258, 12, dtype="float16", align_a=4, align_b=2, align_c=2)
    assert gemm_op(8, 16, 24, "float16").align_a == 8  # 16-byte vectors of a 16-bit type: 8 wide


def test_op_alignment_follows_the_contiguous_extents():
    """An alignment must divide its operand's contiguous extent (else a vector straddles a row's end and reads past
    K into the next row's values); left out, it is the widest of 4, 2, 1 that does, as for contiguous arrays."""
    lm_head = GemmOp(128, 50257, 768)
    assert (lm_head.align_a, lm_head.align_b, lm_head.align_c) == (4, 1, 1)
    assert (GemmOp(7, 6, 5).align_a, GemmOp(7, 6, 5).align_b, GemmOp(7, 6, 5).align_c) == (1, 2, 2)
    col = GemmOp(7, 6, 8, layout_a="col", layout_b="col")  # extents M = 7 and K = 8
    assert (col.align_a, col.align_b) == (1, 4) and col.contiguous_extent("a") == 7
    with pytest.raises(tiledsl.SpecError, match=r"align_b=4 does not divide N=50257, the contiguous extent of B "
                                                r"\(row-major\).*widest that divides it is 1"):
        GemmOp(128, 50257, 768, align_b=4)
    with pytest.raises(tiledsl.SpecError, match=r"align_a=4 does not divide K=1026"):
        GemmOp(16, 64, 1026, align_a=4)
    assert GemmOp(16, 64, 1026, layout_a="col", align_a=4).align_a == 4  # M = 16 is A's extent then
    assert GemmOp(0, 0, 0).align_a == 4  # empty: every width divides 0


def test_emitter_is_pure_and_readable():
    op, s = GemmOp(1000, 1000, 1000), GemmSchedule()
    a, b = emit_gemm(op, s), emit_gemm(op, s)
    assert a == b
    src = a.source
    assert 'extern "C" __global__' in src
    assert "constexpr int BM = 128;" in src and "// bm:" in src
    assert 'static_assert(BM % RM == 0, "rule thread_tile_divides_block_m");' in src
    assert "float4" in src and "beta" not in src.split("extern")[1].split(")")[0]
    assert a.name.startswith("tiledsl_gemm_f32f32f32_nn_v444_nobeta_128x128x8_")
    assert a.block == (256, 1, 1) and a.dynamic_smem_bytes == s.smem_bytes()
    # layouts, alignment and beta change the name (and so the cache key)
    names = {emit_gemm(GemmOp(64, 64, 64, layout_a=la, layout_b=lb, align_a=al, read_c=rc), s).name
             for la in ("row", "col") for lb in ("row", "col") for al in (1, 4) for rc in (False, True)}
    assert len(names) == 16


def test_beta_zero_never_reads_c():
    src = emit_gemm(GemmOp(64, 64, 64, read_c=False), GemmSchedule()).source
    body = src.split("// ---- epilogue")[1]
    assert "old" not in body and "beta" not in body
    src_b = emit_gemm(GemmOp(64, 64, 64, read_c=True), GemmSchedule()).source
    assert "beta * " in src_b.split("// ---- epilogue")[1]


def test_scalar_path_when_unaligned():
    src = emit_gemm(GemmOp(7, 13, 5, align_a=1, align_b=1, align_c=1), GemmSchedule()).source
    assert "constexpr int VA = 1, VB = 1, VC = 1;" in src
    assert "float4 v" not in src


# 24 varied schedules; each (schedule, archs where it is sensible) — there it must compile with zero
# spills for an aligned op. Not sensible: 512-thread tiles of 8x8 (register cap 128/thread) and a
# 16x8 thread tile (128 accumulators).
BOTH, NONE = ("sm_80", "sm_90"), ()
SWEEP = [
    (dict(), BOTH),
    (dict(bk=16, unroll=16), BOTH),
    (dict(bk=16, unroll=4, double_buffer=False), BOTH),
    (dict(smem_pad=4), BOTH),
    (dict(vec=2), BOTH),
    (dict(vec=1, bk=8), BOTH),
    (dict(swizzle=1), BOTH),
    (dict(wm=64, wn=32), BOTH),
    (dict(wm=16, wn=128), BOTH),
    (dict(bm=128, bn=64, bk=16, rm=8, rn=4, unroll=16), BOTH),
    (dict(bm=64, bn=128, bk=16, rm=4, rn=8, unroll=16), BOTH),
    (dict(bm=64, bn=64, bk=16, rm=4, rn=4, unroll=16), BOTH),
    (dict(bm=64, bn=64, bk=32, rm=4, rn=4, unroll=8), BOTH),
    (dict(bm=32, bn=64, bk=32, rm=2, rn=4, unroll=8), BOTH),
    (dict(bm=32, bn=32, bk=32, rm=1, rn=1, vec=1, double_buffer=False, smem_pad=0), BOTH),
    (dict(bm=64, bn=32, bk=32, rm=2, rn=2, vec=2), BOTH),
    (dict(bm=128, bn=128, bk=32, rm=8, rn=8, unroll=8), BOTH),
    (dict(bm=128, bn=256, bk=16, rm=8, rn=8, unroll=16), NONE),
    (dict(bm=256, bn=128, bk=16, rm=8, rn=8, unroll=16), NONE),
    (dict(bm=128, bn=128, bk=8, rm=16, rn=8, wm=0, wn=0), NONE),
    (dict(bm=64, bn=256, bk=16, rm=8, rn=8, unroll=16), BOTH),
    (dict(bm=256, bn=64, bk=16, rm=8, rn=8, unroll=16), BOTH),
    (dict(bm=128, bn=32, bk=16, rm=4, rn=4, vec=2, unroll=8), BOTH),
    (dict(bm=64, bn=128, bk=8, rm=8, rn=8, unroll=2), BOTH),
    (dict(bm=128, bn=128, bk=8, rm=8, rn=8, fragment_prefetch=True), BOTH),
    (dict(bm=64, bn=64, bk=16, rm=4, rn=4, unroll=16, fragment_prefetch=True, split_k=2), BOTH),
    # cp.async pipeline (stages >= 3): no registers staging the global tile
    (dict(bm=256, bn=128, bk=8, rm=16, rn=8, stages=4), BOTH),
    (dict(bm=128, bn=128, bk=16, unroll=16, stages=3, smem_pad=4), BOTH),
    (dict(bm=64, bn=64, bk=16, rm=4, rn=4, unroll=16, stages=5), BOTH),
    (dict(bm=128, bn=64, bk=8, rm=8, rn=4, stages=3, split_k=2, vec=2), BOTH),
]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("kwargs,sensible", SWEEP, ids=[str(i) for i in range(len(SWEEP))])
def test_nvrtc_compiles_sweep(arch, kwargs, sensible):
    s = GemmSchedule(**kwargs)
    for op in (GemmOp(4096, 4096, 4096), GemmOp(127, 129, 65, layout_a="col", layout_b="col",
                                                   align_a=1, align_b=1, align_c=1, read_c=True)):
        k = tiledsl.compile(op, s, arch=arch)
        assert k.arch == arch and k.cubin
        assert 0 < k.registers <= 255
        assert k.smem_bytes == s.smem_bytes()
        if arch in sensible and op.align_a == 4:
            assert k.spill_bytes == 0 and k.stack_bytes == 0, k.log


def test_compile_float16_and_bfloat16():
    for dt in ("float16", "bfloat16"):
        k = tiledsl.compile(GemmOp(256, 256, 256, dtype=dt, read_c=True), GemmSchedule(), arch="sm_90")
        assert k.spill_bytes == 0 and "tdsl_" in k.source


def test_shipped_presets_valid_and_compile():
    ps = tiledsl.presets("gemm")
    assert "sgemm_128x128_8x8" in ps and len(ps) >= 5
    for name, s in ps.items():
        tf32 = name.startswith("tf32")  # float32 with precision="tf32": both operands K-major
        dtype, align = ("float32", 4) if s.mma == "fma" or tf32 else ("float16", 8)
        op = GemmOp(512, 512, 512, dtype=dtype, align_a=align, align_b=align, align_c=align,
                    layout_b="col" if tf32 else "row", precision="tf32" if tf32 else "ieee")
        k = tiledsl.compile(op, s, arch="sm_90")
        assert k.spill_bytes == 0


def test_default_schedule_fills_the_gpu():
    from tiledsl.gemm import default_schedule

    h200 = tiledsl.Target.known("H200")
    assert default_schedule(GemmOp(4096, 4096, 4096), h200).bm >= 128
    op = GemmOp(35, 8457, 2560)
    small = default_schedule(op, h200)   # split-K or stream-K blocks: at least one per SM
    assert tiledsl.plan(op, small, device=h200).blocks >= 132


def test_compile_error_keeps_source_and_log_and_pickles():
    from tiledsl.compile import KernelSource, compile_source

    ks = KernelSource("broken", 'extern "C" __global__ void broken() { int x = ; }', (32, 1, 1))
    with pytest.raises(tiledsl.CompileError) as ei:
        compile_source(ks, "sm_90")
    err = ei.value
    assert "broken" in err.log or "error" in err.log
    assert "   1  extern" in str(err)
    again = pickle.loads(pickle.dumps(err))
    assert again.log == err.log and again.source == err.source
    se = pickle.loads(pickle.dumps(tiledsl.ScheduleError("m", "rule_x")))
    assert se.rule == "rule_x"


def test_host_array_is_rejected_with_hint():
    a = np.ones((4, 4), np.float32)
    with pytest.raises(tiledsl.SpecTypeError, match=r"a is a NumPy array on the host; move it to the GPU"):
        tiledsl.gemm(a, a)


def test_known_targets_and_unknown_name():
    t = tiledsl.Target.known("H200")
    assert t.arch == "sm_90" and t.sm_count == 132 and t.smem_per_block_optin_bytes == 227 * 1024
    assert tiledsl.Target.known("sm_80").name == "A100"
    with pytest.raises(ValueError, match="not in the known-GPU table"):
        tiledsl.Target.known("V100")


def test_rules_markdown_lists_every_rule():
    md = R.markdown(GEMM_RULES, "GEMM")
    for r in GEMM_RULES:
        assert f"`{r.name}`" in md


def test_split_k_emits_slices_and_a_deterministic_reduction():
    from dataclasses import replace

    from tiledsl.compile import compile_source
    from tiledsl.gemm.emit import emit_splitk_reduce, grid

    op = GemmOp(512, 16, 500000, read_c=True)
    s = replace(tiledsl.preset("gemm", "skinny_n_64x16"), split_k=8)
    ks = emit_gemm(op, s)
    assert "_sk8_" in ks.name and "(long long)blockIdx.y * k_per_split" in ks.source
    assert "float* __restrict__ C" in ks.source and "beta" not in ks.source.split("// ---- epilogue")[1]
    assert grid(op, s) == (8, 8, 1)
    red = emit_splitk_reduce(op, s)
    assert "for (int z = 0; z < SPLIT_K; ++z)" in red.source and "beta" in red.source
    assert compile_source(red, "sm_90").spill_bytes == 0
    assert tiledsl.compile(op, s, arch="sm_90").spill_bytes == 0


def test_default_schedule_splits_long_k_and_uses_skinny_tiles():
    from tiledsl.gemm import default_schedule

    h200 = tiledsl.Target.known("H200")
    s = default_schedule(GemmOp(512, 16, 500000), h200)
    assert s.bn <= 16 and s.split_k >= 8   # 8 C tiles, K = 500000: only splitting K fills 132 SMs
    s = default_schedule(GemmOp(1, 4096, 4096), h200)
    assert s.bm <= 16
    # many waves unsplit: no split-K (SPLIT_K_MAX_WAVES), so no workspace of split·M·N floats (4 GiB at 16384²)
    assert default_schedule(GemmOp(16384, 16384, 16384), h200).split_k == 1
    assert default_schedule(GemmOp(5124, 9124, 4096), h200).split_k > 1  # 5.7 waves unsplit: as measured


def test_docs_carry_the_current_rule_table():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "gemm.md").read_text()
    assert R.markdown(GEMM_RULES, "GemmSchedule rules") in doc


# ---- tensor cores (mma="mma_sync"): every shipped tensor-core preset and a spread of tiles compile for
# sm_80 and sm_90 with no spills, for every layout and alignment class ----
TC_SCHEDULES = [dict(bm=128, bn=128, bk=32, stages=4), dict(bm=64, bn=64, bk=32, wm=32, wn=32, stages=3),
                dict(bm=128, bn=256, bk=64, stages=3), dict(bm=64, bn=128, bk=64, wm=32, wn=64, stages=2),
                dict(bm=128, bn=128, bk=32, stages=4, split_k=4)]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("kw", TC_SCHEDULES, ids=lambda kw: "_".join(f"{k}{v}" for k, v in kw.items()))
def test_tensor_core_kernels_compile_without_spills(arch, kw):
    s = GemmSchedule(mma="mma_sync", smem_pad=8, **kw)
    for dtype in ("float16", "bfloat16"):
        for la, lb, align, read_c in (("row", "row", 8, False), ("col", "col", 8, True),
                                      ("row", "col", 2, False), ("col", "row", 1, True)):
            op = GemmOp(4096, 4096, 4096, dtype=dtype, layout_a=la, layout_b=lb, align_a=align,
                        align_b=align, align_c=align, read_c=read_c)
            k = tiledsl.compile(op, s, arch=arch)
            assert k.spill_bytes == 0, (dtype, la, lb, align, k.registers)
            assert f"mma.sync.aligned.m16n8k16.row.col.f32.{'f16' if dtype == 'float16' else 'bf16'}" in k.source
            assert ("tdsl_ldmatrix_x4_trans(a_frag" in k.source) == (la == "col")  # M-contiguous A
            assert ("tdsl_ldmatrix_x4_trans(r," in k.source) == (lb == "row")  # N-contiguous B
            assert k.block == (s.threads, 1, 1) and k.dynamic_smem_bytes <= s.smem_bytes()


def test_tensor_core_copies_follow_alignment():
    s = GemmSchedule(mma="mma_sync", smem_pad=8, bm=64, bn=64, bk=32, wm=32, wn=32)
    src = {al: tiledsl.source(GemmOp(64, 64, 64, dtype="float16", align_a=al, align_b=al, align_c=al), s)
           for al in (8, 4, 2, 1)}
    assert "tdsl_cp_async<16>(a_dst" in src[8] and "tdsl_cp_async<8>(a_dst" in src[4]
    assert "tdsl_cp_async<4>(a_dst" in src[2]
    assert "tdsl_cp_async<" not in src[1].split("auto load_stage")[1].split("};")[0]  # 2-byte: plain loads
    assert "ushort2* const dst" in src[8] and "ushort2* const dst" not in src[1]


def test_tensor_core_schedule_needs_16_bit_inputs():
    s = GemmSchedule(mma="mma_sync", smem_pad=8, bk=32)
    with pytest.raises(tiledsl.ScheduleError, match="mma_needs_16_bit_inputs"):
        tiledsl.compile(GemmOp(64, 64, 64, dtype="float32"), s, arch="sm_90")


def test_cp_async_pipeline_rules_and_source():
    with pytest.raises(tiledsl.ScheduleError, match=r"stages=3: the FMA kernel's cp.async pipeline .* 2-byte inputs"):
        GemmSchedule(stages=3).check_op(GemmOp(64, 64, 64, dtype="float16"))
    GemmSchedule(stages=2).check_op(GemmOp(64, 64, 64, dtype="float16"))  # register prefetch converts
    env = GemmSchedule(stages=4).env(tiledsl.Target.known("sm_80"))
    assert not R.violations(GEMM_RULES, env, ("target",))
    env.update(CC=75)
    assert [r.name for r in R.violations(GEMM_RULES, env, ("target",))] == ["fma_cp_async_needs_sm_80"]
    op = GemmOp(4096, 4096, 4096)  # NN: A transposed to K-outer element by element, B copied 16 bytes wide
    src = emit_gemm(op, GemmSchedule(stages=4)).source
    assert "tdsl_cp_async<4>(&dst[c * LDS_A + r]" in src and "tdsl_cp_async<16>(&dst[r * LDS_B + c]" in src
    assert "tdsl_cp_async_wait<STAGES - 2>();" in src and "a_stage" not in src
    assert "cp_async" not in emit_gemm(op, GemmSchedule(stages=2)).source
    assert (estimate_registers(GemmSchedule(stages=4), 4, 4)
            == estimate_registers(GemmSchedule(stages=2), 4, 4) - (128 * 8 * 2) // 256)


def test_fragment_prefetch_rule_names_the_offending_kernel():
    # every other condition holds (mma='fma', stages=2, unroll=bk): the message must say kernel='gemv' is why
    with pytest.raises(tiledsl.ScheduleError, match=r"kernel kind 1 \(0 = 'tiled', 1 = 'gemv'\)"):
        GemmSchedule(kernel="gemv", bm=4, bn=128, bk=8, unroll=8, fragment_prefetch=True).validate()
    with pytest.raises(tiledsl.ScheduleError, match=r"mma kind 1 \(0 = 'fma', 1 = 'mma_sync'"):
        GemmSchedule(mma="mma_sync", bk=32, unroll=32, smem_pad=8, fragment_prefetch=True).validate()
    # the tensor-core GEMV: the FP64 kernel's ring of k16 steps (mma='dmma') is one; 3xTF32's (mma_sync) has none
    tc_gemv = dict(kernel="gemv", bm=16, bn=128, bk=16, rn=16, unroll=4, vec=4, fragment_prefetch=True)
    GemmSchedule(mma="dmma", **tc_gemv).validate()
    with pytest.raises(tiledsl.ScheduleError, match=r"fragment_prefetch_needs_unrolled_double_buffer"):
        GemmSchedule(mma="mma_sync", **tc_gemv).validate()


def test_fragment_prefetch_source_and_unchanged_neighbours():
    op = GemmOp(4096, 4096, 4096)
    plain = GemmSchedule(bm=256, bn=128, bk=8, rm=16, rn=8)
    src = emit_gemm(op, GemmSchedule(bm=256, bn=128, bk=8, rm=16, rn=8, fragment_prefetch=True)).source
    assert "float a_frag[2][RM];" in src and "acc[i][jj] = fmaf(a_frag[kk & 1][i], b_frag[kk & 1][jj]" in src
    assert src.count("__syncthreads();") == 2  # the prologue's and one per K tile
    assert '"fragment_prefetch": true' in src
    assert "fragment_prefetch" not in emit_gemm(op, plain).source  # other kernels keep their source and hash
    assert "fragment_prefetch" not in plain.header_dict()
    assert plain.short_hash() == "ddd4a1f9"  # its hash before fragment_prefetch existed (47a9e22): names unchanged


def _store_index(src: str, which: str):
    """(r, c) of piece i of thread tid in the emitted 'registers -> shared' loop of ``which``, evaluated from
    the kernel's own C lines (non-negative integers: C's / is Python's //)."""
    block = src[src.index(f"// registers -> shared: {which} tile"):]
    lines = [ln.strip() for ln in block.splitlines()[1:12]]
    r = next(ln for ln in lines if ln.startswith("const int r ="))
    c = next(ln for ln in lines if ln.startswith("const int c ="))
    consts = dict(re.findall(r"\b([A-Z][A-Z_]*) = (\d+)[,;]", src))  # constexpr int BM = 256; VA = 4, ...

    def ev(line, **env):
        expr = line.split("=", 1)[1].split(";")[0].replace("/", "//")
        return eval(expr, {}, {**{k: int(v) for k, v in consts.items()}, **env})  # noqa: S307

    def at(tid, i):
        env = dict(tid=tid, i=i, idx=tid + i * int(consts["THREADS"]), warp_id=tid // 32, lane=tid % 32)
        return ev(r, **env), ev(c, **env)
    return at, r


@pytest.mark.parametrize("bk", [8, 16, 32])
@pytest.mark.parametrize("layouts,a_across,b_across", [(("row", "row"), True, False), (("row", "col"), True, False),
                                                       (("col", "row"), False, False)])
def test_transposed_tiles_load_a_warp_per_32_rows(layouts, a_across, b_across, bk):
    """A tile transposed into shared memory (A row-major, B column-major) is loaded with a warp's lanes on 32
    consecutive rows where each thread's loads cover whole rows, so the transposing stores hit 32 banks; the
    emitted (r, c) still cover every 4-wide piece of the tile exactly once, and load and store agree."""
    op = GemmOp(4096, 4096, 4096, layout_a=layouts[0], layout_b=layouts[1])
    s = GemmSchedule(bm=256, bn=128, bk=bk, rm=16, rn=8, unroll=8)
    # A (256 rows): bk/4 loads per thread, bk/4 pieces per row: whole rows at every bk; B (128 rows): bk/8 loads
    src = emit_gemm(op, s).source
    for which in ("A", "B"):  # the global -> registers loop computes the same (r, c) as the store
        load = src[src.index(f"// global -> registers: {which} tile"):].splitlines()[1:12]
        store = src[src.index(f"// registers -> shared: {which} tile"):].splitlines()[1:12]
        pick = [ln.split("//")[0].strip() for ln in load if "const int r =" in ln or "const int c =" in ln]
        assert pick == [ln.strip() for ln in store if "const int r =" in ln or "const int c =" in ln]
    for which, rows, across in (("A", s.bm, a_across), ("B", s.bn, b_across)):
        at, r_line = _store_index(src, which)
        assert ("lane" in r_line) == across, r_line
        transposed = (which == "A") == (layouts[0 if which == "A" else 1] == "row")
        loads = rows * s.bk // (s.threads * 4)
        pieces = [at(tid, i) for tid in range(s.threads) for i in range(loads)]
        shape = (rows, s.bk // 4) if transposed else (s.bk, rows // 4)
        assert sorted(pieces) == [(r, c * 4) for r in range(shape[0]) for c in range(shape[1])]
        if across:  # each store instruction of a warp: 32 rows, one column -> 32 distinct banks
            for i in range(loads):
                warp = [at(lane, i) for lane in range(32)]
                assert len({c for _, c in warp}) == 1 and len({r % 32 for r, _ in warp}) == 32


def test_float32_default_offers_fragment_prefetch_for_tn_only():
    """Measured on the H200 (2026-12-01): fragment prefetch is ahead for TN, the plain 256x128 tile for NN and NT."""
    from tiledsl.gemm.family import builtin_schedule

    h200 = tiledsl.Target.known("H200")
    for (la, lb), fp in ((("row", "row"), False), (("row", "col"), False), (("col", "row"), True)):
        s = builtin_schedule(GemmOp(4096, 4096, 4096, layout_a=la, layout_b=lb), h200)
        assert (s.bm, s.bn, s.rm, s.rn, s.fragment_prefetch) == (256, 128, 16, 8, fp), (la, lb)


def test_stages_and_double_buffer_agree():
    assert GemmSchedule().stages == 2 and GemmSchedule(double_buffer=False).stages == 1
    assert GemmSchedule(stages=1).double_buffer is False
    s = GemmSchedule(mma="mma_sync", smem_pad=8, bk=32, stages=4)
    assert s.double_buffer is True and s.threads == 128 and (s.wm, s.wn) == (64, 64)
    assert GemmSchedule.from_dict(s.to_dict()) == s


def test_default_schedule_picks_tensor_cores_for_16_bit():
    from tiledsl.gemm.api import default_schedule

    t = tiledsl.Target.known("H200")
    for dtype, mma in (("float16", "mma_sync"), ("bfloat16", "mma_sync"), ("float32", "fma")):
        for shape in ((4096, 4096, 4096), (35, 8457, 2560), (9, 4096, 4096), (9, 4096, 1024), (17, 13, 5)):
            # align 4: no wgmma; 9 rows of a 64 MiB float32 x @ W: the FP64 tensor cores (gemv_dmma_default)
            want = "dmma" if dtype == "float32" and shape == (9, 4096, 4096) else mma
            assert default_schedule(GemmOp(*shape, dtype=dtype), t).mma == want, (dtype, shape)
        assert default_schedule(GemmOp(1, 4096, 4096, dtype=dtype), t).kernel == "gemv"  # decode: GEMV
    aligned = GemmOp(4096, 4096, 4096, dtype="bfloat16", align_a=8, align_b=8, align_c=8)
    assert default_schedule(aligned, t).mma == "wgmma"  # sm_90 and 16-byte operands


@pytest.mark.parametrize("kw", [dict(bm=128, bn=256, stages=4), dict(bm=128, bn=128, stages=6, split_k=2)])
def test_tf32_kernels_compile_for_sm_90a_without_spills(kw):
    s = GemmSchedule(mma="wgmma", bk=32, warp_specialize=True, **kw)
    for read_c in (False, True):
        op = GemmOp(4096, 4096, 4096, dtype="float32", layout_b="col", read_c=read_c, precision="tf32")
        k = tiledsl.compile(op, s, arch="sm_90")
        assert k.arch == "sm_90a" and k.spill_bytes == 0 and "tf32f32f32" in k.name
        assert f"wgmma.mma_async.sync.aligned.m64n{s.bn}k8.f32.tf32.tf32" in k.source
        assert "p, 1, 1;" in k.source  # tf32 takes no transpose immediates
        assert "CU_TENSOR_MAP" not in k.source and "cp.async.bulk.tensor.2d" in k.source


def test_tf32_rules_and_precision_errors():
    s = GemmSchedule(mma="wgmma", bm=128, bn=256, bk=32, stages=4, warp_specialize=True)
    nt = dict(dtype="float32", layout_b="col", precision="tf32")
    with pytest.raises(tiledsl.ScheduleError, match="tf32_k_major_operands"):
        tiledsl.compile(GemmOp(256, 256, 256, dtype="float32", precision="tf32"), s, arch="sm_90")  # B row-major
    with pytest.raises(tiledsl.ScheduleError, match="wgmma_row_128_bytes"):
        tiledsl.compile(GemmOp(256, 256, 256, **nt), GemmSchedule(mma="wgmma", bm=128, bn=256, bk=64, stages=4,
                                                                   warp_specialize=True), arch="sm_90")
    with pytest.raises(tiledsl.ScheduleError, match="tf32_needs_tma"):
        tiledsl.compile(GemmOp(256, 256, 256, **nt), GemmSchedule(mma="wgmma", bm=128, bn=256, bk=32, stages=4),
                        arch="sm_90")
    with pytest.raises(tiledsl.ScheduleError, match="mma_needs_16_bit_inputs"):  # IEEE float32 on wgmma
        tiledsl.compile(GemmOp(256, 256, 256, dtype="float32", layout_b="col"), s, arch="sm_90")
    with pytest.raises(tiledsl.SpecError, match=r"GemmOp.precision='tf32' applies to float32 inputs, not float16"):
        GemmOp(8, 8, 8, dtype="float16", precision="tf32")
    with pytest.raises(tiledsl.SpecError, match=r"GemmOp.precision='fp8' must be one of \('ieee', 'tf32', '3xtf32'\)"):
        GemmOp(8, 8, 8, precision="fp8")


def test_default_schedule_for_tf32():
    from tiledsl.gemm.api import default_schedule

    nt = GemmOp(4096, 4096, 4096, dtype="float32", layout_b="col", precision="tf32")
    s = default_schedule(nt, tiledsl.Target.known("H200"))
    assert s.mma == "wgmma" and s.bk == 32 and s.warp_specialize
    assert default_schedule(nt, tiledsl.Target.known("sm_80")).mma == "fma"  # no tf32 kernel before Hopper
    misaligned = GemmOp(4096, 4096, 4095, dtype="float32", layout_b="col", align_a=1, align_b=1, precision="tf32")
    assert default_schedule(misaligned, tiledsl.Target.known("H200")).mma == "fma"


@pytest.mark.parametrize("layout_b", ["col", "row"])
@pytest.mark.parametrize("m,n,k", [(16, 4096, 4096), (12, 22016, 4096), (9, 768, 768), (16, 128256, 4096),
                                   (16, 4096, 14336)])
def test_3xtf32_default_runs_few_rows_on_the_tensor_core_gemv_and_compiles(m, n, k, layout_b):
    """precision="3xtf32": schedule=None takes the tensor-core GEMV kernel for 9-16 rows of an aligned x @ W.T or
    x @ W (gemv_mma_schedule), whose source compiles for sm_80, sm_90 and sm_90a within its register cap, without
    spills, with three m16n8k8 TF32 products per fragment and half of a k16 step; fewer rows, a column-major A and
    misaligned operands keep the exact FMA kernels (and say why in the choice)."""
    from tiledsl.gemm.family import builtin_choice, default_schedule

    h200 = tiledsl.Target.known("H200")
    op = GemmOp(m, n, k, layout_b=layout_b, precision="3xtf32")
    s, why = builtin_choice(op, h200)
    assert (s.kernel, s.mma, s.bm) == ("gemv", "mma_sync", 16) and "gemv_mma_schedule" in why, why
    assert default_schedule(op, h200) == s
    for arch in ("sm_80", "sm_90"):
        kern = tiledsl.compile(op, s, arch=arch)
        assert kern.spill_bytes == 0 and kern.registers <= 65536 // (s.threads * s.min_blocks), (arch, kern.registers)
        assert "tf32x3f32f32" in kern.name
    assert kern.source.count("tdsl_mma_1688_tf32(acc[j]") == 3
    assert compile_source(emit_gemm(op, s), "sm_90a").spill_bytes == 0
    for other, reason in ((replace(op, m=8), "computed exactly"), (replace(op, m=16, layout_a="col"), "computed exactly"),
                          (replace(op, k=k + 2, n=n + 2, align_a=2, align_b=2, align_c=2), "computed exactly")):
        s2, why2 = builtin_choice(other, h200)
        assert s2.mma == "fma" and reason in why2, (other, why2)
    assert builtin_choice(op, tiledsl.Target.known("sm_80"))[0].mma == "mma_sync"


def test_3xtf32_rules_name_what_the_tensor_core_gemv_needs():
    """The op- and device-scope rules of the tensor-core GEMV kernel, each with the argument that breaks it."""
    tc = GemmSchedule(kernel="gemv", mma="mma_sync", bm=16, bn=128, bk=16, rn=32)
    nt = dict(layout_b="col", precision="3xtf32")
    with pytest.raises(tiledsl.ScheduleError, match="mma_needs_16_bit_inputs"):  # IEEE float32 on the tensor cores
        tiledsl.compile(GemmOp(16, 64, 64, layout_b="col"), tc, arch="sm_90")
    with pytest.raises(tiledsl.ScheduleError, match="gemv_mma_3xtf32"):  # 16-bit inputs: the tiled mma.sync kernels
        tiledsl.compile(GemmOp(16, 64, 64, dtype="float16", layout_b="col"), tc, arch="sm_90")
    with pytest.raises(tiledsl.ScheduleError, match="gemv_mma_layouts"):
        tiledsl.compile(GemmOp(16, 64, 64, layout_a="col", precision="3xtf32"), tc, arch="sm_90")
    with pytest.raises(tiledsl.ScheduleError, match=r"rn=48 must be a multiple of 32 .*rule gemv_mma_row_b_columns"):
        tiledsl.compile(GemmOp(16, 64, 64, precision="3xtf32"), replace(tc, rn=48), arch="sm_90")
    with pytest.raises(tiledsl.ScheduleError, match=r"align_a=2, align_b=2.*rule gemv_mma_16_byte_operands"):
        tiledsl.compile(GemmOp(16, 64, 66, align_a=2, **nt), tc, arch="sm_90")
    env = tc.env(tiledsl.Target.known("sm_80"), GemmOp(16, 64, 64, **nt))
    env.update(CC=75)
    assert [r.name for r in R.violations(GEMM_RULES, env, ("target",))] == ["gemv_mma_needs_sm_80"]
    with pytest.raises(tiledsl.SpecError, match=r"GemmOp.precision='3xtf32' applies to float32 inputs, not bfloat16"):
        GemmOp(8, 8, 8, dtype="bfloat16", precision="3xtf32")
    # the FMA GEMV kernels keep their source: gemv_on_fma's static_assert is the one they always had
    assert 'static_assert(MMA == 0, "rule gemv_on_fma");' in emit_gemm(GemmOp(4, 64, 64),
                                                                      GemmSchedule(kernel="gemv", bm=4, bn=128)).source


@pytest.mark.parametrize("layout_b", ["col", "row"])
@pytest.mark.parametrize("m,n,k", [(16, 22016, 4096), (12, 4096, 4096), (1, 128256, 4096), (16, 4096, 14336),
                                   (9, 14336, 4096), (11, 768, 3072), (8, 4096, 4096), (16, 50257, 768)])
def test_dmma_gemv_compiles_without_spills_and_is_the_default_where_measured(m, n, k, layout_b):
    """mma="dmma": gemv_dmma_schedule's form compiles for sm_90 and sm_90a within its register cap, without spills
    (x @ W's ring with K unsplit: at most 48 bytes, measured harmless),
    one m16n8k16 float64 mma.sync per fragment and k16 step (SASS DMMA) and float64 accumulators named in the kernel;
    schedule=None takes it on an H200 or H100 exactly where GEMV_DMMA_DEFAULT says (x @ W.T of 9-16 rows, x @ W of
    9-16 rows with B of at least 64 MiB; these B are all larger than 2 MiB; 8 rows stay on the FMA kernels), the FMA
    kernels elsewhere and on an A100 (sm_80 is refused by name)."""
    from tiledsl.gemm.family import builtin_choice, gemv_dmma_schedule
    from tiledsl.sass import find_nvdisasm, loop_mix

    h200, h100, a100 = (tiledsl.Target.known(name) for name in ("H200", "H100", "A100"))
    op = GemmOp(m, n, k, layout_b=layout_b)
    s = gemv_dmma_schedule(op, h200)
    assert (s.kernel, s.mma, s.bm, s.rn, s.unroll, s.fragment_prefetch) == (
        ("gemv", "dmma", 16, 16, 4, False) if layout_b == "col" else ("gemv", "dmma", 16, 64, 2, True))
    assert s.vec == (1 if layout_b == "row" and n % 4 else 4)  # x @ W with an odd N: W read 4 bytes at a time
    takes = 9 <= m <= 16 if layout_b == "col" else 9 <= m <= 16 and 4 * n * k >= 64 << 20
    for target in (h200, h100):
        choice, why = builtin_choice(op, target)
        assert (choice == gemv_dmma_schedule(op, target)) == takes and (choice.mma == "dmma") == takes, (op, target)
        assert ("gemv_dmma_default" in why) == takes
    assert builtin_choice(op, a100)[0].mma == "fma"
    kern = tiledsl.compile(op, s, arch="sm_90")
    # x @ W's ring with K unsplit (alpha and beta in its epilogue) spills 48 bytes at 255 registers (NVRTC 12.9),
    # measured harmless: 16×128256×4096 at 1.016 of the copy against the groups' 1.006 (H100), 1.017 against 0.959
    # (H200; GEMV_DMMA's docstring); none elsewhere
    spill = 48 if layout_b == "row" and s.split_k == 1 else 0
    assert kern.spill_bytes <= spill and kern.registers <= 65536 // (s.threads * s.min_blocks), kern.registers
    assert "_f32f64f32_" in kern.name and kern.source.count("tdsl_mma_16816_f64(acc[j], a, bj);") == 1
    assert compile_source(emit_gemm(op, s), "sm_90a").spill_bytes <= spill
    try:
        find_nvdisasm()
    except tiledsl.ToolchainError:
        return  # no SASS to read here: the counts above stand
    loop = loop_mix(kern)
    assert loop.counts.get("DMMA", 0) > 0 and "HMMA" not in loop.counts and "FFMA" not in loop.counts, loop.counts
    assert gemv_dmma_schedule(op, tiledsl.Target.known("A100")) is None
    with pytest.raises(tiledsl.ResourceError, match="dmma_needs_sm_90"):
        s.validate(tiledsl.Target.known("A100"))


def test_the_fp64_default_falls_back_to_the_fma_kernels_where_it_does_not_apply():
    """gemv_dmma_default takes only what the FP64 kernel runs and was measured on: 16 rows of x @ W.T fall back to the
    FMA GEMV kernel with A or B misaligned, a column-major A, a column-major C (few columns run as rows), tf32, 16-bit
    inputs, W under 2 MiB, another sm_90 part's name, an A100; a 3xtf32 product keeps its TF32 tensor-core kernel;
    beta (read_c) keeps the FP64 kernel."""
    from dataclasses import replace as dc_replace

    from tiledsl.gemm.family import builtin_choice, gemv_dmma_default

    h200 = tiledsl.Target.known("H200")
    base = GemmOp(16, 4096, 4096, layout_b="col")
    assert gemv_dmma_default(base, h200) is not None and builtin_choice(base, h200)[0].mma == "dmma"
    assert builtin_choice(dc_replace(base, read_c=True), h200)[0].mma == "dmma"
    for op in (dc_replace(base, align_a=1), dc_replace(base, align_b=2), dc_replace(base, layout_a="col", align_a=1),
               dc_replace(base, layout_c="col"), dc_replace(base, precision="tf32"), GemmOp(16, 512, 1000, layout_b="col"),
               GemmOp(16, 4096, 4096, layout_b="col", dtype="float16", align_a=8, align_b=8, align_c=8)):
        assert gemv_dmma_default(op, h200) is None and builtin_choice(op, h200)[0].mma != "dmma", op
    assert builtin_choice(dc_replace(base, precision="3xtf32"), h200)[0].mma == "mma_sync"
    for target in (dc_replace(h200, name="NVIDIA H20"), tiledsl.Target.known("A100")):
        assert gemv_dmma_default(base, target) is None and builtin_choice(base, target)[0].mma == "fma", target.name


def test_dmma_rules_name_what_the_fp64_gemv_needs():
    """The op-scope rules of the GEMV kernel on the FP64 tensor cores, each with the argument that breaks it: IEEE
    float32 only (3xtf32 takes mma='mma_sync', 16-bit inputs are refused), A and C row-major, 16-byte
    operands (x @ W's B at any alignment with vec=1, which no other form takes); and mma='dmma' runs the GEMV kernel
    only."""
    d = GemmSchedule(kernel="gemv", mma="dmma", bm=16, bn=128, bk=16, rn=32)
    for op, rule in ((GemmOp(16, 64, 64, precision="3xtf32"), "gemv_dmma_float32"),
                     (GemmOp(16, 64, 64, dtype="bfloat16"), "gemv_dmma_float32"),
                     (GemmOp(16, 64, 64, layout_a="col"), "gemv_mma_layouts"),
                     (GemmOp(16, 64, 64, layout_c="col"), "gemv_mma_layouts"),
                     (GemmOp(16, 64, 66, align_a=2, align_b=2), "gemv_mma_16_byte_operands")):
        with pytest.raises(tiledsl.ScheduleError, match=rule):
            tiledsl.compile(op, d, arch="sm_90")
    # x @ W with B's rows not 16-byte aligned: vec=1 reads them 4 bytes at a time; vec=4 cannot, nor any other vec,
    # nor vec=1 on x @ W.T or on TF32
    odd = GemmOp(16, 67, 64, align_b=1)
    with pytest.raises(tiledsl.ScheduleError, match=r"align_b=1.*rule gemv_mma_16_byte_operands"):
        tiledsl.compile(odd, replace(d, vec=4), arch="sm_90")
    assert "tdsl_ldcs4(" in tiledsl.compile(odd, replace(d, vec=1), arch="sm_90").source
    for op, s in ((GemmOp(16, 64, 64, layout_b="col"), replace(d, vec=1)), (GemmOp(16, 64, 64), replace(d, vec=2)),
                  (GemmOp(16, 64, 64, precision="3xtf32"), replace(d, mma="mma_sync", vec=1))):
        with pytest.raises(tiledsl.ScheduleError, match=r"vec=\d: .*rule gemv_mma_vec"):
            tiledsl.compile(op, s, arch="sm_90")
    with pytest.raises(tiledsl.ScheduleError, match=r"mma='dmma' .*runs the GEMV-style kernel only.*rule dmma_gemv_only"):
        GemmSchedule(mma="dmma", bm=64, bn=64, bk=16)
    with pytest.raises(tiledsl.ScheduleError, match=r"must be one of \('fma', 'mma_sync', 'wgmma', 'dmma'\)"):
        GemmSchedule(mma="hmma")


def test_default_schedule_uses_tma_only_where_tensor_maps_can_be_encoded(monkeypatch):
    from tiledsl import tma
    from tiledsl.gemm.api import default_schedule

    t = tiledsl.Target.known("H200")
    aligned = GemmOp(4096, 4096, 4096, dtype="bfloat16", align_a=8, align_b=8, align_c=8)
    monkeypatch.setattr(tma, "available", lambda: True)
    assert default_schedule(aligned, t).warp_specialize  # TMA producer warpgroup
    tiledsl.api.clear_kernel_cache()
    monkeypatch.setattr(tma, "available", lambda: False)  # no cuda-bindings: cp.async wgmma instead
    s = default_schedule(aligned, t)
    assert s.mma == "wgmma" and not s.warp_specialize
    assert default_schedule(aligned, tiledsl.Target.known("sm_80")).mma == "mma_sync"  # no wgmma before Hopper


WGMMA_SCHEDULES = [dict(bm=128, bn=256, stages=4), dict(bm=256, bn=128, stages=4), dict(bm=128, bn=128, stages=6),
                   dict(bm=64, bn=64, stages=3), dict(bm=128, bn=128, stages=4, split_k=4),
                   dict(bm=128, bn=256, stages=4, warp_specialize=True),
                   dict(bm=128, bn=128, stages=6, warp_specialize=True, split_k=2),
                   dict(bm=128, bn=256, stages=4, warp_specialize=True, persistent=True)]


def test_the_persistent_knob_leaves_the_source_of_other_kernels_unchanged():
    """Tuned records hash the emitted source (tiledsl.registry): a field added later must not change it where
    it keeps its default, nor the kernel name."""
    s = GemmSchedule()
    assert "persistent" in s.to_dict() and "persistent" not in s.header_dict()
    src = tiledsl.compile(GemmOp(256, 256, 256), s, arch="sm_80").source
    assert '"persistent"' not in src and "PERSISTENT" not in src
    p = GemmSchedule(mma="wgmma", bm=128, bn=256, bk=64, stages=4, warp_specialize=True, persistent=True)
    assert p.header_dict()["persistent"] is True
    assert p.short_hash() != GemmSchedule(mma="wgmma", bm=128, bn=256, bk=64, stages=4,
                                          warp_specialize=True).short_hash()


def test_persistent_grid_is_one_block_per_sm_at_most_one_per_tile():
    from tiledsl.gemm import plan_gemm

    s = GemmSchedule(mma="wgmma", bm=128, bn=256, bk=64, stages=4, warp_specialize=True, persistent=True)
    h = tiledsl.Target.known("H200")
    big = GemmOp(4096, 4096, 4096, dtype="float16", align_a=8, align_b=8, align_c=8)
    small = GemmOp(256, 512, 4096, dtype="float16", align_a=8, align_b=8, align_c=8)
    assert tiledsl.plan(big, s, device=h).grid == (h.sm_count, 1, 1)  # 512 tiles on 132 SMs
    assert tiledsl.plan(small, s, device=h).grid == (4, 1, 1)  # 2 x 2 tiles: one block each
    assert plan_gemm(big, s).grid == (512, 1, 1)  # no device: the tiles (the cost model's work count)
    src = tiledsl.compile(big, s, arch="sm_90").source
    assert "for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x)" in src
    assert src.count("int it = 0;") == 2  # producer and consumers count K tiles across C tiles alike


@pytest.mark.parametrize("kw", WGMMA_SCHEDULES, ids=lambda kw: "_".join(f"{k}{v}" for k, v in kw.items()))
def test_wgmma_kernels_compile_for_sm_90a_without_spills(kw):
    s = GemmSchedule(mma="wgmma", bk=64, **kw)
    for dtype in ("float16", "bfloat16"):
        for la, lb, read_c in (("row", "row", False), ("row", "col", True), ("col", "row", True), ("col", "col", False)):
            op = GemmOp(4096, 4096, 4096, dtype=dtype, layout_a=la, layout_b=lb, align_a=8, align_b=8, align_c=8,
                        read_c=read_c)
            k = tiledsl.compile(op, s, arch="sm_90")
            assert k.arch == "sm_90a" and "-arch=sm_90a" in k.options
            assert k.spill_bytes == 0, (dtype, la, lb, k.registers)
            assert "serialized" not in k.log  # ptxas says so when wgmma cannot overlap
            ptx = "f16" if dtype == "float16" else "bf16"
            assert f"wgmma.mma_async.sync.aligned.m64n{s.bn}k16.f32.{ptx}.{ptx}" in k.source
            trans = f"p, 1, 1, {int(la == 'col')}, {int(lb == 'row')};"  # MN-major operands read transposed
            assert trans in k.source
            assert k.dynamic_smem_bytes == s.smem_bytes() and k.block == (s.threads, 1, 1)
            assert ("setmaxnreg.dec" in k.source) == s.warp_specialize
            # a producer warpgroup loads with TMA tensor copies; otherwise every thread issues cp.async
            assert ("cp.async.bulk.tensor.2d" in k.source) == s.warp_specialize
            assert ("cp.async.cg.shared.global" in k.source) == (not s.warp_specialize)
            # setmaxnreg.inc waits for registers the producer gave back: the targets fit ptxas's allocation
            # (else compile refuses the kernel; test_setmaxnreg_demand_above_the_allocation_is_refused)
            assert k.registers * k.threads >= (128 * (40 + 2 * 232) if s.warp_specialize else 0)


def test_setmaxnreg_demand_above_the_allocation_is_refused():
    """A kernel whose setmaxnreg targets exceed its register pool would hang in setmaxnreg.inc on the GPU
    (one consumer warpgroup asking for 240 with ptxas allocating 128 per thread did): compile refuses it."""
    from tiledsl.compile import KernelSource, compile_source

    src = 'extern "C" __global__ void small(float* x) { x[threadIdx.x] = 1.f; }'
    ok = compile_source(KernelSource("small", src, (256, 1, 1)), "sm_90")
    with pytest.raises(tiledsl.CompileError, match=r"setmaxnreg targets need 999999 registers per block"):
        compile_source(KernelSource("small", src, (256, 1, 1), setmaxnreg_demand=999999), "sm_90")
    assert ok.registers >= 1


def test_wgmma_rules_name_the_operands_and_the_device():
    s = GemmSchedule(mma="wgmma", bm=128, bn=128, bk=64, stages=4)
    with pytest.raises(tiledsl.ScheduleError, match="wgmma_16_byte_operands"):
        tiledsl.compile(GemmOp(64, 64, 64, dtype="float16", align_a=4, align_b=8), s, arch="sm_90")
    with pytest.raises(tiledsl.ScheduleError, match="wgmma_mn_major_b_in_64_blocks"):
        tiledsl.compile(GemmOp(64, 64, 64, dtype="float16", align_a=8, align_b=8),
                        GemmSchedule(mma="wgmma", bm=128, bn=96, bk=64, stages=4), arch="sm_90")
    with pytest.raises(tiledsl.ResourceError, match="wgmma_needs_sm_90"):
        tiledsl.compile(GemmOp(64, 64, 64, dtype="float16", align_a=8, align_b=8), s, arch="sm_80")


# ---- kernel="gemv": few rows of C (decode-time x @ W) -------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("la,lb", [("row", "row"), ("row", "col"), ("col", "row"), ("col", "col")])
def test_gemv_kernels_compile_without_spills_or_shared_memory(dtype, la, lb):
    al = 4 if dtype == "float32" else 8
    for read_c, split in ((False, 1), (True, 4)):
        op = GemmOp(5, 4096, 4096, dtype=dtype, layout_a=la, layout_b=lb, align_a=al if la == "row" else 1,
                    align_b=al, align_c=al,
                    read_c=read_c)
        s = GemmSchedule(kernel="gemv", bm=8, bn=128, vec=4, split_k=split, rn=2, unroll=1)
        k = tiledsl.compile(op, s, arch="sm_90")
        p = tiledsl.plan(op, s, arch="sm_90")
        assert k.spill_bytes == 0 and k.smem_bytes == 0 and "tiledsl_gemv_gemm" in k.name
        assert "__syncthreads" not in k.source  # no barriers: every load independent
        assert ("__shfl_xor_sync" in k.source) == (lb == "col")  # a warp per column sums across lanes
        cols = 128 * 4 if lb == "row" else 128 // 32 * 2  # vec columns per thread, or rn per warp
        assert p.grid == (-(-4096 // cols), split, 1) and (p.followup is not None) == (split > 1)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("la,lb", [("row", "row"), ("row", "col"), ("col", "row"), ("col", "col")])
def test_gemv_fused_split_k_compiles_as_one_kernel_with_tickets(dtype, la, lb):
    al = 4 if dtype == "float32" else 8
    for read_c, layout_c in ((False, "row"), (True, "row"), (False, "col")):
        if layout_c == "col" and dtype != "float32":
            continue  # column-major C: the few-column float32 products run as rows
        op = GemmOp(5, 4096, 4096, dtype=dtype, layout_a=la, layout_b=lb, layout_c=layout_c,  # M = 5: one wide
                    align_a=al if la == "row" else 1, align_b=al, align_c=al if layout_c == "row" else 1,
                    read_c=read_c)
        s = GemmSchedule(kernel="gemv", bm=8, bn=128, vec=4, split_k=16, split_k_fused=True, rn=2, unroll=2)
        for arch in ("sm_80", "sm_90"):
            k = tiledsl.compile(op, s, arch=arch)
            assert k.spill_bytes == 0 and k.smem_bytes <= 4 and "_sk16f_" in k.name
        p = tiledsl.plan(op, s, arch="sm_90")
        assert p.followup is None  # no split-K kernel: the last block of each column group sums the slices
        names = [q.name for q in p.params]
        assert names[:4] == ["A", "B", "W", "C"] and names[-1] == "tickets" and ("beta" in names) == read_c
        ws = {w.name: w for w in p.workspace}
        assert ws["workspace"].count == 16 * 5 * 4096 and ws["gemm_tickets"].count == p.grid[0] * p.grid[2]
        assert ws["gemm_tickets"].init == "counters"
        src = k.source
        assert src.count("atomicAdd(ticket, 1u) == SPLIT_K - 1") == 1 and "*ticket = 0u" in src
        head, tail = src.split("extern \"C\"")[1].split("if (!last_block) return;")  # the kernel's body
        assert "alpha *" not in head and "alpha *" in tail and "__ldcg" in tail  # unscaled partials; then C
        assert "* ldc +" not in head and ("* ldc + gm" if layout_c == "col" else "* ldc + gn") in tail
        assert ("beta *" in src) == read_c


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("la", ["row", "col"])
def test_gemv_column_groups_compile_without_spills(dtype, la):
    """col_groups: a thread's groups of VB columns, 32·VB apart. Odd N (scalar loads of B) and aligned N, every way of
    finishing C (one slice; the split-K kernel; the fused split-K into a row- or column-major C) compile for sm_80
    and sm_90 without spills; the grid covers col_groups times fewer blocks of columns."""
    al = 4 if dtype == "float32" else 8
    for n, align_b in ((50257, 1), (4096, al)):
        for split, fused, layout_c in ((1, False, "row"), (8, False, "row"), (8, True, "row"), (8, True, "col")):
            if layout_c == "col" and (dtype != "float32" or n % 4):
                continue  # column-major C: the few-column float32 products run as rows
            op = GemmOp(16, n, 768, dtype=dtype, layout_a=la, align_a=al if la == "row" else 1, align_b=align_b,
                        align_c=min(align_b, al) if layout_c == "row" else 1, layout_c=layout_c)
            vec = min(4, align_b)  # sixteen rows of scalar B loads, or eight of 4-wide ones: 32 accumulators
            s = GemmSchedule(kernel="gemv", bm=16 if vec == 1 else 8, bn=128, vec=vec, col_groups=2, unroll=1,
                             split_k=split, split_k_fused=fused)
            for arch in ("sm_80", "sm_90"):
                k = tiledsl.compile(op, s, arch=arch)
                assert k.spill_bytes == 0, (op, s, arch, k.spill_bytes)
            p = tiledsl.plan(op, s, arch="sm_90")
            assert p.grid[0] == -(-n // (128 * vec * 2)), p.grid  # 128 threads × 2 groups of vec columns
            assert "constexpr int COL_GROUPS = 2;" in k.source
    # the accumulators count B's load width: 4-wide loads of an aligned N leave room for no second group at 16 rows,
    # an odd N (scalar loads, whatever vec asks) for four
    wide = GemmSchedule(kernel="gemv", bm=16, bn=128, vec=4, col_groups=2)
    with pytest.raises(tiledsl.ScheduleError, match=r"16·2·min\(4, 4\).*rule col_groups_fit_registers"):
        tiledsl.compile(GemmOp(16, 4096, 768), wide, arch="sm_90")
    assert tiledsl.compile(GemmOp(16, 50257, 768), replace(wide, col_groups=4), arch="sm_90").spill_bytes == 0
    with pytest.raises(tiledsl.ScheduleError, match="col_groups_fit_registers"):
        tiledsl.compile(GemmOp(16, 50257, 768), replace(wide, col_groups=8), arch="sm_90")
    with pytest.raises(tiledsl.ScheduleError, match="col_groups_need_row_major_b"):
        tiledsl.compile(GemmOp(1, 64, 64, layout_b="col"), GemmSchedule(kernel="gemv", bm=1, bn=128, col_groups=2),
                        arch="sm_90")


@pytest.mark.parametrize("op,kw,sha256", [
    (GemmOp(4, 1024, 4096), dict(split_k=8, bm=4, bn=128),
     "5d0eddc5588e4d05cf529a1c13641b35c9a3bc0a5c54f2856fd2f1c7695e3991"),
    (GemmOp(5, 4100, 1000), dict(bm=8, bn=64, vec=4, split_k=4, split_k_fused=True, unroll=2),
     "882a43886ae1d28082a34ce835841b962c96d101027260146b9ab3111c27e4d4"),
    (GemmOp(1, 768, 768, layout_b="col"), dict(bm=1, bn=128, split_k=3, split_k_fused=True, rn=1),
     "d408a7773b3c5e25e473c69aae6507ba1c3f9b31b9ed055c0d18071ee1186116"),
    (GemmOp(16, 50257, 768), dict(bm=16, bn=128, vec=4, unroll=8, split_k=6, rn=1),
     "79c9af97550b2f809063088593f6f19a8e461e005d99a996d385129ecb708268")])
def test_gemv_column_groups_change_no_other_kernel(op, kw, sha256):
    """col_groups = 1 (the default) keeps a GEMV kernel's source byte for byte, so records that hash it stay valid:
    the SHA-256 of each source is the one emitted before the knob existed (commit 05fc345); col_groups = 2 names
    itself in the schedule comment and the kernel name."""
    import hashlib

    s = GemmSchedule(kernel="gemv", **kw)
    src = emit_gemm(op, s).source
    assert hashlib.sha256(src.encode()).hexdigest() == sha256
    if op.layout_b == "col":
        return
    grouped = tiledsl.compile(op, replace(s, vec=min(s.vec, op.align_b), col_groups=2), arch="sm_90")
    assert '"col_groups": 2' in grouped.source and grouped.name != tiledsl.compile(op, s, arch="sm_90").name


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("la", ["row", "col"])
def test_gemv_smem_a_compiles_in_128_registers_with_its_slice_of_a_in_shared_memory(dtype, la):
    """smem_a: bm rows of the block's K slice of A staged in shared memory, a ring of unroll loads of B. Every B
    load width (odd N: scalar; 2; 4), 4, 8 and 16 rows, one slice, the split-K kernel and (8 rows) the fused split-K,
    with and without beta, compiles for sm_80 and sm_90 without spills, in at most 128 registers but fused (min_blocks
    512 / bn by default, 1 fused), and the plan's dynamic shared memory is the slice: bm × ⌈K / (split·bk)⌉·bk float32."""
    al = 4 if dtype == "float32" else 8
    for n, align_b, bm, split, fused, read_c in ((4096, al, 16, 16, False, False), (4098, 2, 8, 5, True, False),
                                                 (1001, 1, 4, 1, False, True), (4096, al, 16, 32, False, True),
                                                 (4096, al, 8, 32, True, True)):
        op = GemmOp(bm - 1, n, 2000, dtype=dtype, layout_a=la, align_a=al if la == "row" else 1, align_b=align_b,
                    align_c=min(align_b, al), read_c=read_c)
        s = GemmSchedule(kernel="gemv", bm=bm, bn=128, vec=4, unroll=8, split_k=split, split_k_fused=fused,
                         smem_a=True)
        assert s.min_blocks == (1 if fused else 4)  # the fused sum's loads take more than 128 registers
        for arch in ("sm_80", "sm_90"):
            k = tiledsl.compile(op, s, arch=arch)
            assert k.spill_bytes == 0 and (fused or k.registers <= 128), (op, s, arch, k.registers, k.spill_bytes)
        depth = 2000 if split == 1 else -(-2000 // (split * 8)) * 8
        assert tiledsl.plan(op, s, arch="sm_90").dynamic_smem_bytes == bm * depth * 4
        assert emit_gemm(op, s).dynamic_smem_bytes == bm * depth * 4  # what the launch passes
        src = k.source
        assert src.count("__syncthreads();") == 1 + 2 * fused and "extern __shared__ float4 at4[];" in src
        assert '"smem_a": true' in src and "constexpr int SMEM_A = 1;" in src


def test_gemv_register_waves_fills_whole_waves_of_two_blocks_per_sm():
    """gemv_register_waves: 1-4 float32 rows of x @ W with A in registers take the K slices (half to twice the base
    pick's) whose grid fills whole waves of the blocks per SM ptxas's registers allow (two: 180-221 registers at
    unroll 8, checked here), the fewest within 3 % of the best; measured 0.99-1.20x the base pick on 33 LLM products
    (benchmarks/results/gemv_waves_h200.json). Elsewhere (a column-major B, 16-bit, staged A, odd N, one launch) it
    leaves the pick alone."""
    from tiledsl.gemm.family import gemv_base_schedule, gemv_register_waves, gemv_schedule
    from tiledsl.occupancy import occupancy, waves

    h200 = tiledsl.Target.known("H200")
    for m, n, k, base_split, split in ((1, 14336, 4096, 19, 9), (4, 14336, 4096, 19, 9), (2, 4096, 14336, 66, 33),
                                       (1, 128256, 4096, 3, 1), (4, 28672, 4096, 10, 14), (1, 4096, 4096, 64, 32)):
        op = GemmOp(m, n, k)
        base, pick = gemv_base_schedule(op, h200), gemv_schedule(op, h200)
        assert (base.split_k, pick.split_k) == (base_split, split), (op, base, pick)
        assert pick == replace(base, split_k=split) and not pick.split_k_fused
        kernel = tiledsl.compile(op, pick, arch="sm_90")
        per_sm = occupancy(h200, pick.threads, kernel.registers, kernel.dynamic_smem_bytes).blocks_per_sm
        assert per_sm == 2 and kernel.spill_bytes == 0, (op, kernel.registers)
        cols = -(-n // 512)
        assert waves(cols * split, h200.sm_count, 2).efficiency >= waves(cols * base_split, h200.sm_count, 2).efficiency
    base = gemv_base_schedule(GemmOp(4, 14336, 4096), h200)
    for op in (GemmOp(4, 14336, 4096, layout_b="col"), GemmOp(4, 14336, 4096, dtype="float16"),
               GemmOp(4, 14336, 4096, precision="tf32")):
        assert gemv_register_waves(op, base, h200) is None, op
    assert gemv_register_waves(GemmOp(8, 14336, 4096), gemv_base_schedule(GemmOp(8, 14336, 4096), h200), h200) is None
    for op in (GemmOp(1, 14338, 4096), GemmOp(1, 14337, 4096), GemmOp(1, 14336, 4096, layout_a="col"),
               GemmOp(1, 1024, 4096)):  # B 2 wide (114 registers: four blocks fit), odd N, a column-major A, one wave
        assert gemv_register_waves(op, gemv_base_schedule(op, h200), h200) is None, op
    short = GemmOp(1, 28672, 512)  # slices stay at least 64 deep (gemv_min_depth), not the staged rule's 32
    assert 512 // gemv_schedule(short, h200).split_k >= 64
    assert gemv_schedule(GemmOp(8, 14336, 4096), h200).smem_a  # 5-16 rows stage A (gemv_staged_a) instead
    assert gemv_schedule(GemmOp(1, 768, 768), h200).split_k_fused  # small products: one launch (gemv_one_launch)
    from tiledsl.gemm.family import builtin_choice

    assert "gemv_register_waves): 9 instead of 19" in builtin_choice(GemmOp(4, 14336, 4096), h200)[1]  # --lookup


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_gemv_spare_slot_copies_no_slot_within_128_registers(arch):
    """spare_slot (a ring of UNROLL + 1 loads of B, a running pointer into B): the source loads into the slot the step
    before emptied and copies no slot; ptxas keeps 128 registers or fewer without spills."""
    from tiledsl.gemm.family import gemv_schedule

    op = GemmOp(16, 22016, 4096)
    spare = gemv_schedule(op, tiledsl.Target.known("H200"))  # the FMA GEMV pick (schedule=None's below 64 MiB of B)
    assert spare.smem_a and spare.unroll == 8 and spare.spare_slot
    copied = replace(spare, spare_slot=False)
    src = emit_gemm(op, spare).source
    assert "float4 ring[UNROLL + 1];" in src and "b_raw" not in src and "constexpr int SPARE_SLOT = 1;" in src
    assert "ring[(u + UNROLL) % (UNROLL + 1)] = *reinterpret_cast<const float4*>(b_next);" in src
    assert '"spare_slot"' not in emit_gemm(op, copied).source  # a later knob: named only where set
    kernels = {s.spare_slot: tiledsl.compile(op, s, arch=arch) for s in (copied, spare)}
    assert all(k.registers <= 128 and k.spill_bytes == 0 for k in kernels.values()), kernels


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("m", [8, 12, 16])
def test_gemv_column_b_ring_fits_sixteen_warps_per_sm(arch, m):
    """x @ W.T with a ring (``gemv_ring_column_b``: smem_a, spare_slot, 8 lanes per group along K): 128 registers or
    fewer with no spills (two blocks of 256 threads per SM; the pick with A in registers takes 250 at sixteen rows),
    a block's staged A with its padding within the 48 KiB rule, the grid's columns per block bn / k_lanes · rn, and
    each step's load of B issued UNROLL steps ahead, outside the guard of its FMAs. The op rules: no k_lanes with a
    row-major B; bm·rn a multiple of k_lanes."""
    from tiledsl.gemm.family import gemv_base_schedule, gemv_ring_column_b
    from tiledsl.gemm.kernel_plan import gemv_columns_per_block, plan_gemm

    h200 = tiledsl.Target.known("H200")
    op = GemmOp(m, 22016, 4096, layout_b="col")
    s = gemv_ring_column_b(op, gemv_base_schedule(op, h200), h200)
    assert (s.k_lanes, s.rn, s.unroll, s.smem_a, s.spare_slot) == (8, 2, 4, True, True)
    assert gemv_columns_per_block(op, s) == 256 // 8 * 2 and s.min_blocks == 2
    p = plan_gemm(op, s, h200)
    assert p.dynamic_smem_bytes == (s.bm + 1) * -(-4096 // (s.split_k * 8)) * 8 * 4 <= 48 * 1024
    src = emit_gemm(op, s).source
    refill = src.index("if (kv0 + (u + UNROLL) * K_LANES < n_kv) {")
    assert refill < src.index("if (kv0 + u * K_LANES < n_kv) {", refill) and "constexpr int K_LANES = 8;" in src
    kernel = tiledsl.compile(op, s, arch=arch)
    assert kernel.registers <= 128 and kernel.spill_bytes == 0, (kernel.registers, kernel.spill_bytes)
    with pytest.raises(tiledsl.ScheduleError, match="k_lanes_need_column_major_b"):
        s.check_op(replace(op, layout_b="row"))
    with pytest.raises(tiledsl.ScheduleError, match="k_lanes_group_sums"):
        replace(s, bm=4, rn=1).check_op(op)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_gemv_spare_slot_sass_keeps_each_load_before_its_fmas(arch):
    """The SASS of the spare-slot loop (nvdisasm, the sass extra): each step's load of B precedes that step's FMAs
    (ptxas moves every load of an unguarded pass to its end) and fewer instructions per FFMA than the copied ring
    (sixteen rows, unroll 8, NVRTC 12.9: 716 per 576 FFMAs against 818 per 512)."""
    from tiledsl.gemm.family import gemv_schedule
    from tiledsl.sass import disassemble, find_nvdisasm, hottest_loop

    try:
        find_nvdisasm()
    except tiledsl.ToolchainError as exc:
        pytest.skip(f"no nvdisasm: {exc}")
    op = GemmOp(16, 22016, 4096)
    copied = replace(gemv_schedule(op, tiledsl.Target.known("H200")), spare_slot=False)  # the FMA GEMV pick
    kernels = {s.spare_slot: tiledsl.compile(op, s, arch=arch) for s in (copied, replace(copied, spare_slot=True))}
    per_ffma = {}
    for spare_slot, kernel in kernels.items():
        listing = disassemble(kernel.cubin)
        loop = hottest_loop(listing)
        body = [ins for item in listing if isinstance(item, tuple) and loop.start <= item[0] <= loop.end
                for ins in (item[1],)]
        ffma = [i for i, ins in enumerate(body) if "FFMA" in ins]
        loads = [i for i, ins in enumerate(body) if "LDG" in ins]
        per_step = len(ffma) // len(loads)  # FFMAs per step: each step one load of B
        if spare_slot:  # the i-th load precedes at least the FFMAs of steps i..: none sunk to the pass's end
            assert all(sum(f > at for f in ffma) >= len(ffma) - i * per_step for i, at in enumerate(loads)), loads
        per_ffma[spare_slot] = loop.instructions / len(ffma)
    assert per_ffma[True] < 0.9 * per_ffma[False], per_ffma


def test_gemv_column_b_ring_sass_keeps_each_load_before_its_fmas():
    """The SASS of the column-major B's ring (nvdisasm, the sass extra; sm_90, sixteen rows, ``gemv_ring_column_b``):
    a pass of UNROLL + 1 steps issues each step's RN loads of B before that step's FMAs (none sunk to the pass's end)
    and at most 20 other instructions per 64 FFMAs (NVRTC 12.9: 791 for 640, 15.1 per 64; the kernel with A in
    registers: 597 for 512 at 250 registers)."""
    from tiledsl.gemm.family import gemv_base_schedule, gemv_ring_column_b
    from tiledsl.sass import disassemble, find_nvdisasm, hottest_loop

    try:
        find_nvdisasm()
    except tiledsl.ToolchainError as exc:
        pytest.skip(f"no nvdisasm: {exc}")
    h200 = tiledsl.Target.known("H200")
    op = GemmOp(16, 22016, 4096, layout_b="col")
    s = gemv_ring_column_b(op, gemv_base_schedule(op, h200), h200)
    listing = disassemble(tiledsl.compile(op, s, arch="sm_90").cubin)
    loop = hottest_loop(listing)
    body = [item[1] for item in listing if isinstance(item, tuple) and loop.start <= item[0] <= loop.end]
    ffma = [i for i, ins in enumerate(body) if "FFMA" in ins]
    loads = [i for i, ins in enumerate(body) if "LDG" in ins]
    steps = s.unroll + 1
    assert len(loads) == steps * s.rn and len(ffma) == steps * s.bm * s.rn * 4, (len(loads), len(ffma))
    per_step = len(ffma) // steps
    assert all(sum(f > at for f in ffma) >= len(ffma) - (i // s.rn) * per_step for i, at in enumerate(loads)), loads
    assert (len(body) - len(ffma)) * 64 / len(ffma) <= 20, len(body)


@pytest.mark.parametrize("unroll", [1, 2, 8])
def test_gemv_smem_a_ring_refills_outside_the_slice_guard(unroll):
    """smem_a's ring of B (row-major B): each step reads its slot and issues the refill UNROLL rows ahead before, not
    inside, the guard ``if (k0 + u < n_k)`` that skips the FMAs past the slice, and the ring starts zeroed (a slice
    shorter than UNROLL reads slots it never loads). With the refill inside the guard (commit 0516e6d) ptxas kept the
    same registers but the kernel ran 1.6-2.0x slower on the H200 (16x14336x4096: 135 against 82 us for the GEMV kernel
    alone; benchmarks/results/gemv_ring_h200_2026-12-03.json): no timed test can catch that on CPU, so the structure
    is pinned here, and the registers ptxas gives eight rows (81 with the refill inside the guard, 118 outside)."""
    op = GemmOp(16, 4096, 2000)
    s = GemmSchedule(kernel="gemv", bm=16, bn=128, vec=4, unroll=unroll, split_k=16, smem_a=True)
    src = emit_gemm(op, s).source
    read = src.index("const float4 b_raw = ring[u];")
    refill = src.index("if (k0 + u + UNROLL < n_k) ring[u] = ", read)
    guard = src.index("if (k0 + u < n_k) {", read)
    assert read < refill < guard, (read, refill, guard)
    assert src.count("ring[u] = *") == 2 and "float4 ring[UNROLL] = {};" in src  # the first loads, the refill
    if unroll == 8:  # the registers show the loads kept in flight: 118 for eight rows (NVRTC 12.9 and 13.0), 81 when
        from tiledsl.gemm import default_schedule

        eight = GemmOp(8, 14336, 4096)  # the refill sat inside the guard
        kernel = tiledsl.compile(eight, default_schedule(eight, tiledsl.Target.known("H200")), arch="sm_90")
        assert kernel.registers >= 110 and kernel.spill_bytes == 0, (kernel.registers, kernel.spill_bytes)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("la", ["row", "col"])
def test_gemv_smem_a_column_major_b_keeps_one_row_of_a_in_registers(dtype, la):
    """smem_a with a column-major B (x @ W.T): A's K slice staged in its own layout (As[m][k], row stride the slice's
    depth), per row one VB-wide read of it, so sixteen rows × 4 columns per warp at unroll 1 compile in 128 registers
    without spills or a stack frame (A in registers: 255 and, before session 19's loop, spilling); the reduce-scatter epilogue where bm·rn is a
    multiple of 32, the per-value shuffles elsewhere; the plan's dynamic shared memory is the slice."""
    for n, k, bm, rn, unroll, split, fused, mb in ((4096, 4096, 16, 4, 1, 8, False, 4), (4099, 4098, 8, 4, 2, 8, True, 2),
                                                  (1001, 999, 4, 2, 2, 1, False, 4), (4096, 4096, 16, 4, 2, 8, False, 3)):
        al_k = 4 if k % 4 == 0 else 2 if k % 2 == 0 else 1
        op = GemmOp(bm - 1, n, k, dtype=dtype, layout_a=la, layout_b="col", align_a=al_k if la == "row" else 1,
                    align_b=al_k, align_c=1)
        s = GemmSchedule(kernel="gemv", bm=bm, bn=128, vec=4, rn=rn, unroll=unroll, split_k=split,
                         split_k_fused=fused, smem_a=True, min_blocks=mb)
        for arch in ("sm_80", "sm_90"):
            kern = tiledsl.compile(op, s, arch=arch)
            assert kern.spill_bytes == 0 and kern.stack_bytes == 0, (op, s, arch, kern.registers, kern.spill_bytes)
            assert kern.registers <= 65536 // (128 * mb), (op, s, arch, kern.registers)
        depth = k if split == 1 else -(-k // (split * 8)) * 8
        assert emit_gemm(op, s).dynamic_smem_bytes == bm * depth * 4 == tiledsl.plan(op, s, "sm_90").dynamic_smem_bytes
        src = kern.source
        assert src.count("__syncthreads();") == 1 + 2 * fused and "extern __shared__ float4 as4[];" in src
        assert ("reduce-scatter butterfly" in src) == (bm * rn % 32 == 0), (bm, rn)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_gemv_column_major_b_register_loop_reads_b_first(dtype):
    """The column-major-B kernel with A in registers (x @ W.T): per step the RN vectors of B first (float32
    evict-first, ``__ldcs``; 16-bit inputs plain loads), then one row's vector of A at a time; the reduce-scatter
    epilogue exactly where bm·rn is a multiple of 32; sixteen rows × 4 columns per warp at unroll 2 compile without
    spills or a stack frame (before session 19's loop: 255 registers and 16–32 bytes of spills)."""
    for m, bm, rn, unroll in ((16, 16, 4, 2), (8, 8, 4, 2), (3, 4, 4, 1), (1, 1, 1, 2), (12, 16, 2, 1)):
        al = 4 if dtype == "float32" else 8  # 16 bytes
        op = GemmOp(m, 4096, 4096, dtype=dtype, layout_b="col", align_a=al, align_b=al, align_c=al)
        s = GemmSchedule(kernel="gemv", bm=bm, bn=128, vec=4, rn=rn, unroll=unroll, split_k=3)
        kern = tiledsl.compile(op, s, arch="sm_90")
        assert kern.spill_bytes == 0 and kern.stack_bytes == 0, (op, s, kern.registers, kern.spill_bytes)
        loop = kern.source.split("float b[RN][VB];", 1)[1].split("epilogue", 1)[0]
        assert ("__ldcs(" in loop) == (dtype == "float32"), (dtype, m)
        assert loop.index("B + (long long)gn * ldb + k") < loop.index("A + (long long)gm * lda + k")
        assert "float a[BM]" not in kern.source  # one row of A at a time
        assert ("reduce-scatter butterfly" in kern.source) == (bm * rn % 32 == 0), (bm, rn)


def test_gemv_smem_a_rules_name_the_limit():
    """smem_a needs the GEMV kernel, bm a multiple of 4, one group of columns, and a slice of A of at most 48 KiB;
    each refusal names the rule and the values."""
    with pytest.raises(tiledsl.ScheduleError, match=r"bm=2.*rule smem_a_on_gemv"):
        GemmSchedule(kernel="gemv", bm=2, bn=128, smem_a=True)
    with pytest.raises(tiledsl.ScheduleError, match=r"col_groups=2.*rule smem_a_on_gemv"):
        GemmSchedule(kernel="gemv", bm=4, bn=128, vec=1, col_groups=2, smem_a=True)
    with pytest.raises(tiledsl.ScheduleError, match="smem_a_on_gemv"):
        GemmSchedule(smem_a=True)
    with pytest.raises(tiledsl.ScheduleError, match="col_groups_need_row_major_b"):  # not the register advice
        tiledsl.compile(GemmOp(16, 4096, 4096, layout_b="col"), GemmSchedule(kernel="gemv", bm=16, bn=128, vec=4,
                                                                             rn=4, col_groups=2), arch="sm_90")
    s = GemmSchedule(kernel="gemv", bm=16, bn=128, smem_a=True, split_k=16)
    with pytest.raises(tiledsl.ScheduleError, match=r"65536 bytes \(bm=16, spare_slot=0, K=16384, split_k=16, bk=8\) "
                                                      r"over the limit: 49152 .*49024 with split_k_fused.*rule "
                                                      r"smem_a_slice_fits"):
        tiledsl.compile(GemmOp(16, 4096, 16384), s, arch="sm_90")
    assert tiledsl.compile(GemmOp(16, 4096, 12288), s, arch="sm_90").spill_bytes == 0  # 16 × 768 × 4: 48 KiB
    with pytest.raises(tiledsl.ScheduleError, match="smem_a_slice_fits"):  # fused: its arrival flag needs room too
        tiledsl.compile(GemmOp(16, 4096, 12288), replace(s, split_k_fused=True, min_blocks=0), arch="sm_90")
    assert tiledsl.compile(GemmOp(16, 4096, 12160), replace(s, split_k_fused=True, min_blocks=0), arch="sm_90")
    # a column-major B's ring pads each vector of K by one row: 17 rows' worth of the slice
    ring = GemmSchedule(kernel="gemv", bm=16, bn=256, rn=2, vec=4, unroll=4, smem_a=True, spare_slot=True, k_lanes=8)
    ring.check_op(GemmOp(16, 4096, 720, layout_b="col"))  # 17 × 720 × 4 = 48960
    with pytest.raises(tiledsl.ScheduleError, match=r"50048 bytes \(bm=16, spare_slot=1, K=736"):
        ring.check_op(GemmOp(16, 4096, 736, layout_b="col"))
    replace(ring, spare_slot=False, k_lanes=32).check_op(GemmOp(16, 4096, 736, layout_b="col"))  # 16 × 736 × 4


def test_five_to_sixteen_rows_of_x_at_w_default_to_a_in_shared_memory():
    """schedule=None stages A in shared memory (gemv_staged_a) for 5-16 float32 rows times an aligned row-major B:
    slices at most 512 deep and none empty, unroll 8, four blocks of 128 threads per SM; and (gemv_staged_a_column_b)
    times a column-major B of at most 16 MiB: 4 columns per warp, unroll 1; odd N, a larger column-major B, a
    column-major A, 16-bit inputs and 4 rows keep A in registers. The reason (what --lookup prints) names the rule."""
    from tiledsl.gemm.family import (
        GEMV_SMEM_A_MAX_DEPTH,
        builtin_choice,
        default_schedule,
        gemv_choice,
        gemv_dmma_default,
    )
    from tiledsl.target import resolve

    target = resolve("H200")
    for m, n, k in ((16, 4096, 4096), (9, 14336, 4096), (12, 768, 3072), (16, 128256, 4096), (16, 4096, 14336),
                    (8, 4096, 4096), (5, 28672, 4096)):  # the FMA GEMV pick (9-16 rows of 64 MiB: gemv_dmma_default's)
        s, why = gemv_choice(GemmOp(m, n, k), target)
        assert (builtin_choice(GemmOp(m, n, k), target) == (s, why)) == (gemv_dmma_default(GemmOp(m, n, k), target)
                                                                          is None)
        bm = 8 if m <= 8 else 12 if m <= 12 else 16  # 12 rows per block for 9-12 rows (gemv_twelve_rows)
        assert s.smem_a and s.bm == bm and s.unroll == 8 and s.min_blocks == 4, (m, n, k, s)
        assert s.spare_slot == (bm >= 12) and (("spare slot" in why) == s.spare_slot)  # GEMV_SPARE_SLOT_MIN_ROWS
        assert ("gemv_twelve_rows" in why) == (bm == 12)
        assert s.bn == 128 and s.split_k > 1
        assert -(-k // (-(-k // (s.split_k * s.bk)) * s.bk)) == s.split_k  # no slice past K
        assert -(-k // (s.split_k * s.bk)) * s.bk <= GEMV_SMEM_A_MAX_DEPTH and "gemv_staged_a" in why
    for m, n, k in ((16, 1024, 4096), (5, 768, 768), (12, 3072, 768)):  # x @ W.T, W of at most 16 MiB
        s, why = gemv_choice(GemmOp(m, n, k, layout_b="col"), target)
        assert s.smem_a and (s.bn, s.rn, s.unroll, s.min_blocks) == (128, 4, 1, 4), (m, n, k, s)
        assert -(-k // s.split_k) <= 512 and "gemv_staged_a_column_b" in why
    for op in (GemmOp(16, 50257, 768, align_b=1, align_c=1), GemmOp(16, 4096, 4096, layout_b="col"),
               GemmOp(16, 1024, 4096, layout_b="col", layout_a="col", align_a=1), GemmOp(4, 1024, 4096, layout_b="col"),
               GemmOp(16, 64, 65536, layout_b="col"), GemmOp(16, 512, 8192, layout_b="col"),  # unmeasured N, K
               GemmOp(16, 4096, 4096, dtype="bfloat16", align_a=8, align_b=8, align_c=8), GemmOp(4, 4096, 4096),
               GemmOp(16, 4096, 4096, layout_a="col", align_a=1)):
        assert not default_schedule(op, target).smem_a, op
    # x @ W.T left in registers: --lookup says which condition of GEMV_COLUMN_B_STAGED failed, with the value
    for op, reason in ((GemmOp(16, 4096, 4096, layout_b="col"), "B of 64.0 MiB > 16 MiB"),
                       (GemmOp(16, 512, 8192, layout_b="col"), "N = 512 < 768"),
                       (GemmOp(16, 1024, 8192, layout_b="col"), "K = 8192 > 4096"),
                       (GemmOp(4, 1024, 4096, layout_b="col"), "4 rows per block, not one of (8, 16)"),
                       (GemmOp(16, 1024, 4098, layout_b="col", align_a=2, align_b=2), "align_a 2, align_b 2")):
        s, why = gemv_choice(op, target)
        assert not s.smem_a and f"not staged (gemv_column_b_unstaged): {reason}" in why, (op, why)


def test_gemv_fused_split_k_stores_c_at_its_own_width():
    """The fused split-K's last block stores C as wide as C's alignment allows, stepping by that width: a C whose
    rows are 8-byte aligned under an aligned B (workspace rows 4 wide) is stored 2 wide, two columns per step
    (stepping by the workspace's 4 would leave half the columns unwritten)."""
    s = GemmSchedule(kernel="gemv", bm=8, bn=64, vec=4, split_k=4, split_k_fused=True, unroll=2)
    op = GemmOp(5, 4100, 1000, align_c=2)
    assert dict(tiledsl.plan(op, s, arch="sm_90").vec) == {"A": 4, "B": 4, "C": 2, "W": 4}
    tail = emit_gemm(op, s).source.split("if (!last_block) return;")[1]
    assert "for (int j = 0; j < VB; j += 2)" in tail and "j += VC" not in tail and "float2 out;" in tail
    aligned = emit_gemm(GemmOp(5, 4100, 1000), s).source.split("if (!last_block) return;")[1]
    assert "for (int j = 0; j < VB; j += VC)" in aligned  # C as wide as the workspace: the named width, as before


def test_gemv_fused_split_k_changes_no_other_kernel():
    """The knob is left out of the source's schedule comment when False: other GEMV kernels keep their text and
    the records hashing it stay valid; the two-kernel split-K keeps its reduction kernel."""
    op = GemmOp(4, 1024, 4096)
    two = GemmSchedule(kernel="gemv", bm=4, bn=128, split_k=8)
    assert "split_k_fused" not in tiledsl.compile(op, two, arch="sm_90").source
    assert tiledsl.plan(op, two, arch="sm_90").followup is not None
    # one row times a column-major B (measured faster fused): one launch less, a few values summed by the last block
    linear, s = GemmOp(1, 768, 768, layout_b="col"), GemmSchedule(kernel="gemv", bm=1, bn=128, split_k=3)
    assert tiledsl.predict(linear, replace(s, split_k_fused=True), device="H200") < tiledsl.predict(
        linear, s, device="H200")
    # sixteen rows × 66 slices × 512 columns summed by one block: priced above the split-K kernel
    wide, s = GemmOp(16, 4096, 14336), GemmSchedule(kernel="gemv", bm=16, bn=128, split_k=66)
    assert tiledsl.predict(wide, replace(s, split_k_fused=True), device="H200") > tiledsl.predict(
        wide, s, device="H200")


def test_gemv_rules_and_default():
    from tiledsl.gemm.family import default_schedule, gemv_schedule

    with pytest.raises(tiledsl.ScheduleError, match="gemv_rows"):
        GemmSchedule(kernel="gemv", bm=32, bn=128)
    with pytest.raises(tiledsl.ScheduleError, match="gemv_block_threads"):
        GemmSchedule(kernel="gemv", bm=4, bn=100)
    with pytest.raises(tiledsl.ScheduleError, match="gemv_on_fma"):
        GemmSchedule(kernel="gemv", bm=4, bn=128, mma="wgmma", bk=64)
    with pytest.raises(tiledsl.ScheduleError, match=r"GemmSchedule.kernel='gemm' must be one of \('tiled', 'gemv'\)"):
        GemmSchedule(kernel="gemm")
    with pytest.raises(tiledsl.ScheduleError, match="gemv_column_tile_fits_registers"):
        tiledsl.compile(GemmOp(16, 64, 64, layout_b="col"), GemmSchedule(kernel="gemv", bm=16, bn=128, rn=8),
                        arch="sm_90")
    # K slices start on multiples of bk: one not a multiple of 4 would start A's 4-wide loads misaligned and step
    # past the slice's end (tiledsl.plan checks the op's rules too, as compile does)
    odd_slices = GemmSchedule(kernel="gemv", bm=4, bn=128, vec=1, bk=3, split_k=3)
    for call in (tiledsl.compile, tiledsl.plan):
        with pytest.raises(tiledsl.ScheduleError, match=r"bk=3 must be a multiple of 4.*gemv_slices_start_on_vectors"):
            call(GemmOp(4, 4097, 772), odd_slices, arch="sm_90")
    with pytest.raises(tiledsl.ScheduleError, match="col_groups_need_row_major_b"):
        tiledsl.plan(GemmOp(4, 4096, 4096, layout_b="col"), GemmSchedule(kernel="gemv", bm=4, bn=128, col_groups=2),
                     arch="sm_90")
    h200 = tiledsl.Target.known("H200")
    decode = default_schedule(GemmOp(1, 4096, 4096), h200)
    assert decode.kernel == "gemv" and decode.bm == 1
    # fills the GPU: one wave of the two blocks of 128 threads per SM that ptxas's 180 registers leave
    assert tiledsl.plan(GemmOp(1, 4096, 4096), decode, arch="sm_90").blocks >= 0.95 * 2 * h200.sm_count
    assert default_schedule(GemmOp(16, 4096, 4096), h200).kernel == "gemv"  # float32, row-major B: to 16 rows
    assert default_schedule(GemmOp(17, 4096, 4096), h200).kernel == "tiled"
    assert default_schedule(GemmOp(1, 4096, 4096, layout_b="col"), h200).kernel == "gemv"
    # 2-16 float32 rows times a column-major B (torch's Linear): 4 warps of 4 columns, unroll 2 (GEMV_COLUMN_B_ROWS)
    assert default_schedule(GemmOp(16, 4096, 4096, layout_b="col"), h200).mma == "dmma"  # gemv_dmma_default
    for m in (2, 5, 16):  # the FMA GEMV pick
        s = gemv_schedule(GemmOp(m, 4096, 4096, layout_b="col"), h200)
        assert (s.kernel, s.bn, s.rn, s.unroll, s.split_k_fused) == ("gemv", 128, 4, 2, False) and s.split_k > 1
    assert default_schedule(GemmOp(17, 4096, 4096, layout_b="col"), h200).kernel == "tiled"
    half = dict(dtype="float16", align_a=8, align_b=8, align_c=8)
    assert default_schedule(GemmOp(1, 4096, 4096, **half), h200).kernel == "gemv"
    assert default_schedule(GemmOp(2, 4096, 4096, **half), h200).kernel == "tiled"  # tensor cores from 2 rows
    # one float32 row times a column-major B (torch's Linear): 4 warps, its K slices summed in the kernel
    linear = GemmOp(1, 768, 768, layout_b="col")
    s = default_schedule(linear, h200)
    assert (s.kernel, s.bn, s.split_k_fused) == ("gemv", 128, True) and s.split_k > 1
    assert tiledsl.plan(linear, s, arch="sm_90").followup is None
    assert not default_schedule(GemmOp(1, 4096, 4096, layout_b="col"), h200).split_k_fused  # 1024 blocks: no split
    s = default_schedule(GemmOp(1, 768, 768, layout_b="col", **half), h200)
    assert (s.bn, s.split_k_fused) == (256, False) and s.split_k > 1  # 16-bit: not measured, the earlier pick
    s = default_schedule(GemmOp(4, 2048, 2048), h200)
    assert not s.split_k_fused and s.split_k > 1  # a row-major B beyond 16 MiB: the split-K kernel (faster)
    # an odd N (B read one element at a time), float32: four single columns per thread (gemv_column_groups); from 9
    # rows on an H100 or H200 the FP64 kernel, W read 4 bytes at a time (gemv_dmma_default), the FMA form elsewhere
    for m, target in ((1, h200), (4, h200), (16, tiledsl.Target.known("A100"))):
        s = default_schedule(GemmOp(m, 50257, 768, align_b=1, align_c=1), target)
        assert (s.col_groups, s.vec, s.unroll) == (4, 1, 1) and s.split_k > 1
        assert tiledsl.plan(GemmOp(m, 50257, 768, align_b=1, align_c=1), s, arch="sm_80").grid[0] == -(-50257 // 512)
    s = default_schedule(GemmOp(16, 50257, 768, align_b=1, align_c=1), h200)
    assert (s.mma, s.vec, s.fragment_prefetch) == ("dmma", 1, True)
    # precision="3xtf32" there: the TF32 kernel needs B aligned, so the IEEE product's kernel, named as what it is
    from tiledsl.gemm.family import builtin_choice
    for m, units in ((16, "FP64 tensor cores"), (4, "FMA units")):
        choice, why = builtin_choice(GemmOp(m, 50257, 768, precision="3xtf32"), h200)
        assert why.endswith(f"computed exactly, on the {units}") and choice.mma == ("dmma" if m == 16 else "fma"), why
    assert default_schedule(GemmOp(4, 50258, 768, align_b=2, align_c=2), h200).col_groups == 1  # 2 wide: unmeasured
    assert default_schedule(GemmOp(1, 50257, 768, align_b=1, align_c=1, dtype="float16"), h200).col_groups == 1
    assert default_schedule(GemmOp(3, 7, 129, align_b=1, align_c=1), h200).col_groups == 1  # small: one launch
    assert default_schedule(GemmOp(16, 33, 768, align_b=1, align_c=1), h200).col_groups == 1  # under a block's columns
    # a column-major B takes 2-16 rows only as measured: IEEE float32 with a row-major A (torch's Linear)
    assert default_schedule(GemmOp(4, 4096, 4096, layout_a="col", layout_b="col"), h200).kernel == "tiled"
    assert default_schedule(GemmOp(4, 4096, 4096, layout_b="col", precision="tf32"), h200).kernel != "gemv"


@pytest.mark.parametrize("m,n,k,layout,want", [
    (7680, 32, 2560, ("col", "col"), (128, 32, 8)),   # DeepBench's tall-thin rows: the 128×32 tile, split-K 8
    (4096, 16, 4096, ("row", "col"), (128, 32, 16)),  # 32 tiles: 16 slices (the most) for two blocks per SM
    (4096, 64, 4096, ("row", "col"), (128, 64, 16)),  # N up to 64: the 128×64 tile
    (8448, 32, 2816, ("col", "col"), (128, 32, 4)),   # 66 tiles · 4 slices already fill two blocks per SM
    (4096, 33, 1024, ("row", "row"), (128, 64, 16)),  # N = 33 takes the 64-wide tile
    (1760, 16, 1760, ("col", "col"), (64, 16, 16)),   # N = 16, column-major A: the one-warp 64×16 tile, 16 slices
    (8448, 16, 2816, ("col", "row"), (64, 16, 16)),   # whatever the tile count
    (1760, 16, 1760, ("row", "col"), (128, 32, 16)),  # a row-major A keeps the 128×32 tile
])
def test_tall_thin_rule_picks_the_narrow_tile_and_split(m, n, k, layout, want):
    from tiledsl.gemm.family import builtin_choice, builtin_schedule, tall_thin_schedule

    h200 = tiledsl.Target.known("H200")
    op = GemmOp(m, n, k, layout_a=layout[0], layout_b=layout[1])
    s = tall_thin_schedule(op, h200)
    assert s is not None and (s.bm, s.bn, s.split_k) == want and s.smem_pad == 0
    if s.bm == 64:  # one warp of 8×4 thread tiles, four cp.async stages, bk 8
        assert (s.threads, s.rm, s.rn, s.bk, s.stages) == (32, 8, 4, 8, 4)
    else:
        assert (s.bk, s.rm, s.rn) == (16, 8, 4)
    assert builtin_schedule(op, h200) == s
    assert f"{s.bm}×{s.bn} tiles, {s.split_k} K slices" in builtin_choice(op, h200)[1]  # --lookup says which


@pytest.mark.parametrize("op", [
    GemmOp(7680, 8, 2560), GemmOp(7680, 15, 2560), GemmOp(7680, 65, 2560), GemmOp(512, 32, 2560),
    GemmOp(1000, 64, 2560), GemmOp(1024, 32, 512),
    GemmOp(1024, 16, 500000), GemmOp(7680, 32, 2560, dtype="float16"), GemmOp(7680, 32, 2560, precision="tf32")])
def test_tall_thin_rule_stays_inside_its_class(op):
    from tiledsl.gemm.family import tall_thin_schedule

    assert tall_thin_schedule(op, tiledsl.Target.known("H200")) is None


@pytest.mark.parametrize("m,n,k,layout", [(35, 8457, 2560, ("col", "col")), (35, 8457, 4096, ("row", "col")),
                                          (176, 1500, 1408, ("col", "col")), (35, 1536, 2048, ("col", "col")),
                                          (49, 8457, 2560, ("col", "col")), (32, 8457, 2560, ("col", "col")),
                                          (33, 8457, 2560, ("row", "row")), (35, 2047, 2560, ("col", "col")),
                                          (48, 700, 255, ("row", "row")), (35, 4096, 512, ("col", "col"))])
def test_short_wide_rule_takes_stream_k(m, n, k, layout):
    """M in 33…48 takes a 48-row tile (rows fitted to M; 64 columns below N = 2048) where split-K does not apply
    (N ≥ 1536 or K < 256), other M of the class the 64×128 one; all stream-K."""
    from tiledsl.gemm.family import SHORT_WIDE_FITTED_PRESETS, SHORT_WIDE_PRESET, builtin_choice

    op = GemmOp(m, n, k, layout_a=layout[0], layout_b=layout[1])
    s, why = builtin_choice(op, tiledsl.Target.known("H200"))
    fitted = 33 <= m <= 48
    name = SHORT_WIDE_FITTED_PRESETS[n >= 2048] if fitted else SHORT_WIDE_PRESET
    assert s == tiledsl.preset("gemm", name) and s.stream_k
    assert (s.bm, s.bn) == ((48, 128 if n >= 2048 else 64) if fitted else (64, 128))
    assert ("rows fitted to M in 33..48" in why) == fitted and f"under one wave of {s.bm}×{s.bn} tiles" in why


@pytest.mark.parametrize("m,n,k,layout,bm", [(35, 700, 2560, ("col", "col"), 16), (35, 700, 2048, ("col", "col"), 16),
                                             (48, 1023, 256, ("row", "row"), 16), (33, 1024, 1024, ("col", "row"), 64),
                                             (35, 1500, 2560, ("col", "col"), 64), (40, 1535, 8192, ("row", "col"), 64)])
def test_short_wide_rule_takes_split_k_below_1536_columns(m, n, k, layout, bm):
    """M in 33…48, N in 700…1535 and K ≥ 256: 16 K slices on 16×64 tiles below N = 1024, on 64×64 tiles from there
    (benchmarks/results/gemm_fit_split_h200_2026-12-03.json); --lookup names the branch."""
    from tiledsl.gemm.family import SHORT_WIDE_SPLIT_PRESETS, builtin_choice

    op = GemmOp(m, n, k, layout_a=layout[0], layout_b=layout[1])
    s, why = builtin_choice(op, tiledsl.Target.known("H200"))
    assert s == tiledsl.preset("gemm", SHORT_WIDE_SPLIT_PRESETS[bm == 64])
    assert (s.bm, s.bn, s.split_k, s.stream_k) == (bm, 64, 16, False)
    assert f"{bm}×64 tiles with 16 K slices" in why and f"K = {k} ≥ 256" in why
    tiledsl.source(op, s)  # the schedule is valid for the op


@pytest.mark.parametrize("op", [
    GemmOp(128, 4096, 4096), GemmOp(35, 699, 2560), GemmOp(32, 700, 2560), GemmOp(35, 4096, 256),
    GemmOp(35, 50257, 768), GemmOp(300, 8457, 2560),
    GemmOp(16, 8457, 2560, layout_b="col"), GemmOp(35, 8457, 2560, dtype="float16"),
    GemmOp(35, 8457, 2560, precision="tf32")])
def test_short_wide_rule_stays_inside_its_class(op):
    from tiledsl.gemm.family import short_wide_schedule

    assert short_wide_schedule(op, tiledsl.Target.known("H200")) is None


@pytest.mark.parametrize("m,n,k,layout,split", [
    (128, 4096, 4096, "NN", 8), (128, 4096, 14336, "NT", 8), (80, 2048, 8192, "TN", 16), (128, 2304, 2048, "NN", 14),
    (128, 6144, 4096, "NN", 5), (120, 11008, 4096, "NT", 3), (128, 16384, 3072, "TT", 2),  # whole slices fill a wave
    (128, 12288, 4096, "NN", 0), (96, 14336, 4096, "NN", 0), (68, 128256, 2048, "TT", 0),  # stream-K
    (112, 7168, 2560, "TN", 0)])  # 28 tiles: 4 slices fill 112 of 132 SMs, under 0.9 of a wave: stream-K
def test_one_row_rule_takes_the_128x256_tile(m, n, k, layout, split):
    """M in 65…128, K ≥ 2048: one row of 128×256×16 tiles (16×8 thread tiles), split-K where whole slices fill 0.9 of
    a wave (``split`` slices), stream-K otherwise (0); --lookup names the branch
    (benchmarks/results/gemm_one_row_h200_2026-12-04.json)."""
    from tiledsl.gemm.family import ONE_ROW_PRESETS, builtin_choice

    op = GemmOp(m, n, k, layout_a="row" if layout[0] == "N" else "col", layout_b="row" if layout[1] == "N" else "col")
    s, why = builtin_choice(op, tiledsl.Target.known("H200"))
    assert (s.bm, s.bn, s.bk, s.rm, s.rn, s.min_blocks) == (128, 256, 16, 16, 8, 1)
    assert "the one-row rule" in why and f"M = {m} in 65..128" in why
    if split:
        assert s == replace(tiledsl.preset("gemm", ONE_ROW_PRESETS[0]), split_k=split) and not s.stream_k
        assert f"{split} K slices fill one wave of the 132 SMs" in why
    else:
        assert s == tiledsl.preset("gemm", ONE_ROW_PRESETS[1]) and s.stream_k and s.split_k == 1
        assert "stream-K" in why
    tiledsl.source(op, s)  # the schedule is valid for the op


def test_one_row_rule_reads_the_device_s_sm_count():
    """The wave the slices fill is the device's: on an A100 (108 SMs) 16 tiles of 128×4096×4096 would take 6 slices,
    96 blocks, under 0.9 of a wave, so stream-K; 8 tiles take 13 slices (104 blocks); 7 tiles stay out. On a device of
    144 SMs, 8 tiles with 16 slices fill 128 (under 0.9) and stay out: stream-K only from 16 tiles."""
    from tiledsl.gemm.family import one_row_choice

    a100 = tiledsl.Target.known("A100")
    s, why = one_row_choice(GemmOp(128, 4096, 4096), a100)
    assert s.stream_k and "6 K slices would fill 96 of the 108 SMs, under 90%" in why
    s, why = one_row_choice(GemmOp(128, 2048, 4096), a100)
    assert (s.split_k, s.stream_k) == (13, False) and "(104 blocks)" in why
    assert one_row_choice(GemmOp(128, 1792, 4096), a100) is None
    s, why = one_row_choice(GemmOp(128, 128256, 4096), tiledsl.Target.known("H200"))
    assert s.stream_k and "two K slices would overfill one wave of the 132 SMs" in why
    wide = replace(tiledsl.Target.known("H200"), sm_count=144)
    assert one_row_choice(GemmOp(128, 2048, 4096), wide) is None
    assert one_row_choice(GemmOp(128, 4096, 4096), wide)[0].split_k == 9


@pytest.mark.parametrize("op", [
    GemmOp(64, 4096, 4096), GemmOp(129, 4096, 4096), GemmOp(128, 4096, 2047, layout_a="col"),
    GemmOp(128, 4096, 1024), GemmOp(128, 1024, 4096), GemmOp(128, 1792, 4096),  # 7 tiles: under the 8-tile bound
    GemmOp(128, 4095, 4096), GemmOp(128, 4096, 4096, dtype="float16"), GemmOp(128, 4096, 4096, precision="tf32")])
def test_one_row_rule_stays_inside_its_class(op):
    """Outside M 65…128 and K ≥ 2048, with fewer than 8 tiles of 128×256, a row-major B of odd N (scalar
    loads, not measured), other dtypes and TF32: no one-row pick."""
    from tiledsl.gemm.family import one_row_choice

    assert one_row_choice(op, tiledsl.Target.known("H200")) is None


@pytest.mark.parametrize("m,n,k,layout", [(1024, 700, 512, ("col", "col")), (1024, 700, 512, ("row", "col")),
                                          (2048, 768, 768, ("row", "row")), (128, 14336, 1024, ("row", "row")),
                                          (2560, 128, 2560, ("row", "col")), (512, 1500, 1536, ("col", "col")),
                                          (4096, 128, 4096, ("row", "col")),   # M = 32·N: in (measured 0.79 → 0.84)
                                          (128, 2048, 1024, ("row", "row")),   # 16 tiles: the fewest
                                          (128, 16768, 1024, ("row", "row"))])  # 131 tiles: one fewer than SMs
def test_sub_wave_rule_takes_stream_k_on_the_128x128_tile(m, n, k, layout):
    from tiledsl.gemm.family import SUB_WAVE_PRESET, builtin_choice

    op = GemmOp(m, n, k, layout_a=layout[0], layout_b=layout[1])
    s, why = builtin_choice(op, tiledsl.Target.known("H200"))
    assert s == tiledsl.preset("gemm", SUB_WAVE_PRESET) and s.stream_k and (s.bm, s.bn, s.bk) == (128, 128, 8)
    assert "sub-wave rule" in why


@pytest.mark.parametrize("op", [
    GemmOp(7680, 128, 2560, layout_a="col", layout_b="col"),  # tall (M > 32·N): the estimate's 256×128 split-K
    GemmOp(4097, 128, 4096),                                 # M = 32·N + 1
    GemmOp(128, 1500, 1280, layout_a="col", layout_b="col"),  # 12 tiles: under SUB_WAVE_MIN_TILES
    GemmOp(128, 1920, 4096),                                 # 15 tiles
    GemmOp(128, 16896, 4096),                                # 132 tiles = SMs: nothing for stream-K to share
    GemmOp(128, 32000, 4096),                                # 250 tiles
    GemmOp(1024, 700, 511),                                  # K under the shortest measured
    GemmOp(100, 4096, 4096), GemmOp(4096, 127, 4096),        # a side under 128
    GemmOp(1024, 700, 512, dtype="float16"), GemmOp(1024, 700, 512, precision="tf32")])
def test_sub_wave_rule_stays_inside_its_class(op):
    from tiledsl.gemm.family import sub_wave_schedule

    assert sub_wave_schedule(op, tiledsl.Target.known("H200")) is None


def test_a_tuned_record_comes_before_the_sub_wave_rule(tmp_path, monkeypatch):
    from tiledsl import registry
    from tiledsl.gemm.family import default_schedule, sub_wave_schedule

    monkeypatch.setenv("TILEDSL_CACHE_DIR", str(tmp_path))
    h200 = tiledsl.Target.known("H200")
    op = GemmOp(1024, 700, 512, layout_a="col", layout_b="col")
    tuned = tiledsl.GemmSchedule(bm=64, bn=64, bk=16, rm=4, rn=8, wm=64, wn=16, unroll=8, stream_k=True)
    assert sub_wave_schedule(op, h200) is not None and default_schedule(op, h200) != tuned
    registry.store("gemm", op, h200, tuned)
    assert default_schedule(op, h200) == tuned


def test_sub_wave_rule_comes_after_the_short_wide_rule():
    from tiledsl.gemm.family import SHORT_WIDE_PRESET, builtin_schedule, sub_wave_schedule

    h200 = tiledsl.Target.known("H200")
    op = GemmOp(176, 1500, 1408, layout_a="col", layout_b="col")  # in both classes: the short-wide rule was measured
    assert sub_wave_schedule(op, h200) is not None
    assert builtin_schedule(op, h200) == tiledsl.preset("gemm", SHORT_WIDE_PRESET)


LAYOUTS = {"NN": ("row", "row"), "NT": ("row", "col"), "TT": ("col", "col"), "TN": ("col", "row")}


@pytest.mark.parametrize("m,n,k,layout", [(2048, 2304, 768, "NN"), (2048, 11008, 4096, "NN"),
                                          (1760, 7000, 1760, "NT"), (1024, 3000, 2048, "TT"),
                                          (3072, 3000, 1024, "TT"), (2052, 2308, 772, "NN"), (3076, 3004, 1028, "TT"),
                                          (3072, 4096, 1024, "TN"), (2048, 2560, 768, "TN")])
def test_wave_tail_rule_takes_stream_k_on_the_256x128_tile(m, n, k, layout):
    """The estimate's 128×128 pick (with or without split-K) on a float32 product of M, N ≥ 1024 and K ≥ 768 becomes
    the 256×128×8 stream-K preset, and --lookup's reason names the pick it replaced."""
    from tiledsl.gemm.family import WAVE_TAIL_PRESET, _estimate_choice, builtin_choice

    h200 = tiledsl.Target.known("H200")
    op = GemmOp(m, n, k, layout_a=LAYOUTS[layout][0], layout_b=LAYOUTS[layout][1])
    plain = _estimate_choice(op, h200)
    s, why = builtin_choice(op, h200)
    assert (plain.bm, plain.bn) == (128, 128)
    assert s == tiledsl.preset("gemm", WAVE_TAIL_PRESET) and s.stream_k and (s.bm, s.bn, s.bk) == (256, 128, 8)
    assert "wave-tail rule" in why and f"(128×128, {plain.split_k} K slices)" in why


@pytest.mark.parametrize("m,n,k,layout,kw", [
    (2048, 3072, 640, "NN", {}),             # K under 768
    (1020, 6144, 2048, "NN", {}),            # M under 1024
    (1020, 3000, 2048, "TT", {}),
    (2048, 2304, 769, "NN", {}),             # A's rows allow only scalar loads (align_a 1)
    (2048, 2306, 768, "TT", {}),             # C's rows allow 8-byte stores only (align_c 2)
    (2048, 11264, 2048, "NN", {}),           # N over 11008, the widest measured
    (2048, 2304, 9216, "NN", {}),            # K over 8192, the deepest measured
    (2048, 2304, 768, "NN", {"dtype": "float16"}), (2048, 2304, 768, "NN", {"precision": "tf32"})])
def test_wave_tail_rule_stays_inside_its_class(m, n, k, layout, kw):
    """Products whose estimate picks 128×128 but which the wave-tail rule must leave: K < 768 or > 8192, a side under
    1024 or over 11008, a misaligned operand, float16 and tf32."""
    from tiledsl.gemm.family import _estimate_choice, builtin_choice, wave_tail_schedule

    h200 = tiledsl.Target.known("H200")
    op = GemmOp(m, n, k, layout_a=LAYOUTS[layout][0], layout_b=LAYOUTS[layout][1], **kw)
    plain = _estimate_choice(op, h200)
    assert (plain.bm, plain.bn) == (128, 128)  # the rule would apply but for the one condition
    assert wave_tail_schedule(op, plain, h200) is None and "wave-tail" not in builtin_choice(op, h200)[1]


def test_wave_tail_rule_needs_a_float32_fma_pick():
    """The rule reads the op's dtype and the pick's units, not the tile alone: a 128×128 pick on tensor cores, or a
    float16 product on FMA units (as before sm_80), is left as it is."""
    from tiledsl.gemm.family import wave_tail_schedule

    h200 = tiledsl.Target.known("H200")
    fp32 = GemmOp(2048, 2304, 768)
    pick = tiledsl.preset("gemm", "sgemm_128x128_8x8")
    assert wave_tail_schedule(fp32, pick, h200) is not None
    assert wave_tail_schedule(GemmOp(2048, 2304, 768, dtype="float16"), pick, h200) is None
    tensor_cores = tiledsl.preset("gemm", "hgemm_128x128x32_w64x64_s4")
    assert (tensor_cores.bm, tensor_cores.bn, tensor_cores.mma) == (128, 128, "mma_sync")
    assert wave_tail_schedule(fp32, tensor_cores, h200) is None


def test_wave_tail_rule_leaves_the_estimates_256x128_pick():
    from tiledsl.gemm.family import _estimate_choice, builtin_choice

    h200 = tiledsl.Target.known("H200")
    for op in (GemmOp(4096, 4096, 4096), GemmOp(2048, 50257, 768), GemmOp(2048, 2048, 2048, layout_b="col")):
        assert (_estimate_choice(op, h200).bm, _estimate_choice(op, h200).bn) == (256, 128)
        assert builtin_choice(op, h200) == (_estimate_choice(op, h200),
                                            "the estimate over the presets × split-K (builtin_schedule)")


def test_small_gemv_products_with_a_row_major_b_run_in_one_launch():
    """GEMV_ONE_LAUNCH_MAX_BYTES: float32, a row-major B, at most 4 rows, A, B and C within 16 MiB and at most 24 K
    slices: a quarter of the columns per block, the slices summed in the kernel (no split-K kernel, no second
    launch); sixteen rows, 48 slices, a column-major B, 16-bit or tf32 inputs and larger products keep their pick."""
    from tiledsl.gemm.family import (
        GEMV_ONE_LAUNCH_MAX_BYTES,
        builtin_choice,
        gemv_base_schedule,
        gemv_schedule,
        gemv_staged_a,
        rows_op,
    )

    h200 = tiledsl.Target.known("H200")
    one_launch = [GemmOp(1, 768, 768), GemmOp(4, 3072, 768), GemmOp(2, 1000, 1000), GemmOp(3, 7, 129),
                  rows_op(GemmOp(512, 1, 512, layout_a="col", layout_b="col")),
                  rows_op(GemmOp(128, 1, 1408, layout_a="col", layout_b="col"))]
    for op in one_launch:
        s, base = gemv_schedule(op, h200), gemv_base_schedule(op, h200)
        assert (s.bn, s.split_k_fused, base.split_k_fused) == (base.bn // 4, True, False), op
        assert 1 < s.split_k <= 24 and s.split_k >= base.split_k
        assert not tiledsl.plan(op, s, arch="sm_90").followup  # one launch: no split-K reduction after it
        assert tiledsl.plan(op, base, arch="sm_90").followup
        assert "one launch (gemv_one_launch)" in builtin_choice(op, h200)[1]
    big = GemmOp(1, 2048, 2048)  # 16 MiB of B alone and more: the split-K kernel
    assert 4 * (big.k * big.n) >= GEMV_ONE_LAUNCH_MAX_BYTES
    keep = [GemmOp(16, 768, 768), GemmOp(1, 768, 3072), GemmOp(4, 768, 3072), big,
            GemmOp(1, 768, 768, layout_b="col"), GemmOp(1, 768, 768, dtype="float16"),
            GemmOp(1, 768, 768, precision="tf32")]  # tf32 runs exact on the GEMV kernel but was not measured
    for op in keep:  # sixteen rows stage A in shared memory (gemv_staged_a), still summed by the split-K kernel
        s, base = gemv_schedule(op, h200), gemv_base_schedule(op, h200)
        assert s == (gemv_staged_a(op, base, h200) if op.m > 4 else base), op
        assert "one launch" not in builtin_choice(op, h200)[1]
    assert gemv_schedule(GemmOp(1, 768, 3072), h200).split_k == 48  # 48 slices: measured slower in one launch


def test_gemv_slices_go_shallower_with_sixteen_rows_or_a_staged_in_shared_memory():
    from tiledsl.gemm.family import GEMV_MIN_DEPTH, gemv_min_depth, gemv_schedule

    h200 = tiledsl.Target.known("H200")
    assert GEMV_MIN_DEPTH == {16: 32} and gemv_min_depth(8) == 64
    # 768 columns are two blocks of 512; about four blocks per SM would need 264 slices: K / depth caps them
    assert gemv_schedule(GemmOp(16, 768, 768), h200).split_k == 768 // 32
    assert gemv_schedule(GemmOp(9, 768, 768), h200).split_k == 768 // 32  # 9 rows: a block of 16
    for m in (1, 4):
        assert gemv_schedule(GemmOp(m, 768, 768), h200).split_k == 768 // 64
    assert gemv_schedule(GemmOp(8, 768, 768), h200).smem_a  # 8 rows stage A, 32 deep (gemv_staged_a)
    assert gemv_schedule(GemmOp(8, 768, 768), h200).split_k == 768 // 32
    assert gemv_schedule(GemmOp(16, 50257, 768), h200).split_k < 768 // 32  # many column blocks: depth not binding
    assert gemv_schedule(GemmOp(16, 768, 768, precision="tf32"), h200).split_k == 768 // 32  # tf32 runs it exact


# ---- few columns run as rows: Cᵀ = Bᵀ·Aᵀ on the GEMV kernel, into a column-major Cᵀ ------------------------------


def test_few_columns_run_as_rows_where_the_gemv_kernel_has_its_fast_layout():
    from tiledsl.gemm.family import (
        FEW_COLUMNS_LONG_K,
        FEW_COLUMNS_MAX_N,
        builtin_choice,
        row_in_one_launch,
        rows_op,
        runs_as_row,
    )

    h200 = tiledsl.Target.known("H200")
    op = GemmOp(7680, 4, 2560, layout_a="col", layout_b="col")  # DeepBench inference: A column-major
    assert runs_as_row(op, h200)
    rows = rows_op(op)
    assert (rows.m, rows.n, rows.k, rows.layout_a, rows.layout_b, rows.layout_c) == (4, 7680, 2560, "row", "row", "col")
    s, why = builtin_choice(rows, h200)
    assert s.kernel == "gemv" and s.bm == 4 and "column-major C" in why
    s.check_op(rows)  # rule column_major_c_on_gemv holds
    assert rows_op(GemmOp(7680, 1, 2560)).layout_c == "row"  # one column: a contiguous row, as before
    assert runs_as_row(GemmOp(7680, 1, 2560, layout_a="row"), h200)  # N = 1: every layout
    assert not runs_as_row(GemmOp(7680, 4, 2560, layout_a="row"), h200)  # Aᵀ column-major: the tiled kernels
    assert not runs_as_row(GemmOp(7680, FEW_COLUMNS_MAX_N + 1, 2560, layout_a="col"), h200)
    assert not runs_as_row(GemmOp(7680, 4, 2560, dtype="float16", layout_a="col", align_a=8, align_b=4,
                                  align_c=4), h200)  # 16-bit: the tensor-core tiles
    assert not runs_as_row(GemmOp(7680, 4, 2560, layout_a="col", precision="tf32"), h200)
    assert not runs_as_row(GemmOp(512, 4, 512, layout_a="col"), h200)  # M·K < 2^21: a second launch costs more
    assert runs_as_row(GemmOp(128, 1, 1024, layout_a="col"), h200)  # one column with K ≥ ROW_SWAP_MIN_K: a row
    for m, k in ((1024, 512), (512, 512), (3072, 128)):  # K < ROW_SWAP_MIN_K: a row where it runs in one launch
        op = GemmOp(m, 1, k, layout_a="col")
        assert runs_as_row(op, h200) and row_in_one_launch(op, h200)
    assert not runs_as_row(GemmOp(4096, 1, 64, layout_a="col"), h200)  # one slice: no launch to save, the tiled
    assert not runs_as_row(GemmOp(128, 2, 1024, layout_a="col"), h200)  # two columns keep the M·K floor
    assert not runs_as_row(GemmOp(128, 1, 1024, layout_a="row"), h200)  # only the measured layout below the floor
    assert not runs_as_row(GemmOp(4, 8, 2 ** 20, layout_a="col"), h200)  # N ≥ M: not few columns
    long_k = GemmOp(1024, 16, 500_000, layout_a="row", layout_b="col")  # K ≥ FEW_COLUMNS_LONG_K: to 16, any A
    assert runs_as_row(long_k, h200) and not runs_as_row(GemmOp(1024, 17, 500_000, layout_b="col"), h200)
    assert not runs_as_row(GemmOp(1024, 16, FEW_COLUMNS_LONG_K - 1, layout_b="col"), h200)
    s, why = builtin_choice(rows_op(long_k), h200)  # a column-major B for the GEMV kernel: a warp per rn columns
    assert (s.kernel, s.bm, s.rn) == ("gemv", 16, 4) and "column-major C" in why
    s.check_op(rows_op(long_k))


def test_few_columns_as_rows_with_split_k_and_m_off_every_width_emit():
    """A few-column product run as rows with split-K writes its slices to a row-major workspace whose rows are the
    original M long: an M that no vector width divides (10001, 14337) must still emit (the workspace view of the op
    takes its own alignment, not the column-major C's)."""
    from tiledsl.gemm.family import gemv_schedule, rows_op

    h200 = tiledsl.Target.known("H200")
    for op in (GemmOp(10001, 4, 4096, layout_a="col"), GemmOp(14337, 8, 4096, layout_a="col"),
               GemmOp(1003, 16, 65536, layout_a="col")):
        rows = rows_op(op)
        s = gemv_schedule(rows, h200)
        assert s.split_k > 1 and rows.layout_c == "col"
        assert "tiledsl_gemv_gemm" in emit_gemm(rows, s).source and tiledsl.plan(rows, s, arch="sm_90").followup


@pytest.mark.parametrize("read_c", [False, True])
@pytest.mark.parametrize("lb", ["row", "col"])
def test_column_major_c_gemv_kernels_compile_and_index_c_by_columns(read_c, lb):
    for split in (1, 4, 512):
        op = GemmOp(4, 7680, 500_000, layout_a="row", layout_b=lb, layout_c="col", read_c=read_c)
        s = GemmSchedule(kernel="gemv", bm=4, bn=128, vec=4, rn=4, unroll=2, split_k=split)
        for arch in ("sm_80", "sm_90"):
            k = tiledsl.compile(op, s, arch=arch)
            assert k.spill_bytes == 0 and "_ccol_" in k.name
        src = k.source
        if split == 1:  # the main kernel stores C(m, n) at n·ldc + m
            assert ("(gn + j) * ldc + gm" if lb == "row" else "gn * ldc + gm") in src
        else:  # the main kernel fills the row-major workspace; the reduction writes the column-major C
            reduce = emit_splitk_reduce(op, s).source
            assert "* ldc + gm" not in src and ("c_row + j" if lb == "row" else "gm * ldc + gn") in src and "C + (idx % N) * ldc + idx / N" in reduce
            assert ("#pragma unroll 32" in reduce) == (split > 64)
            assert tiledsl.plan(op, s, arch="sm_90").followup.kernel_name.endswith(f"_ccol_sk{split}")
    row = replace(op, layout_c="row")
    assert "C + (idx / N) * ldc + idx % N" in emit_splitk_reduce(row, s).source
    assert "_ccol_" not in tiledsl.compile(row, s, arch="sm_90").name


def test_column_major_c_and_split_k_rules():
    op = GemmOp(4, 512, 4096, layout_c="col")
    with pytest.raises(tiledsl.ScheduleError, match="column_major_c_on_gemv"):
        GemmSchedule().check_op(op)
    with pytest.raises(tiledsl.SpecError, match=r"GemmOp.layout_c='diag' must be one of \('row', 'col'\)"):
        GemmOp(4, 512, 4096, layout_c="diag")
    GemmSchedule(kernel="gemv", bm=4, bn=128, split_k=1024)
    with pytest.raises(tiledsl.ScheduleError, match=r"split_k=1025 must be in 1..1024 with kernel='gemv'"):
        GemmSchedule(kernel="gemv", bm=4, bn=128, split_k=1025)
    with pytest.raises(tiledsl.ScheduleError, match="split_k_range"):
        GemmSchedule(split_k=65)


@pytest.mark.parametrize("m,n,k,la,stages", [(2048, 7133, 2048, "col", 4), (4096, 7133, 4096, "col", 4),
                                             (3072, 7435, 1024, "col", 4), (128, 50257, 768, "row", 2),
                                             (2048, 7133, 2048, "row", 2)])
def test_misaligned_row_b_takes_one_k_slice(m, n, k, la, stages):
    """A row-major B with an odd N (align_b 1) and two or more tiles per SM: the estimate's preset with one K slice,
    four cp.async stages with a column-major A (measured: split-K lost or tied on every such product, the pipeline
    gained with a column-major A only); --lookup says so. The same shapes with an aligned B are not its."""
    from dataclasses import replace as dc_replace

    from tiledsl.gemm.family import MISALIGNED_ROW_B_STAGES, _estimate_choice, builtin_choice

    h200 = tiledsl.Target.known("H200")
    op = GemmOp(m, n, k, layout_a=la, layout_b="row")
    assert op.align_b == 1
    s, why = builtin_choice(op, h200)
    plain = _estimate_choice(op, h200)
    assert s.split_k == 1 and s.stages == stages and "misaligned_row_b_schedule" in why
    assert f"{plain.split_k} K slices" in why  # what the estimate had picked
    assert (s.bm, s.bn, s.bk, s.rm, s.rn) == (plain.bm, plain.bn, plain.bk, plain.rm, plain.rn)  # the same tile
    if stages == MISALIGNED_ROW_B_STAGES:
        assert not s.fragment_prefetch  # a rule of the register-staged pipeline only
    aligned = dc_replace(op, n=n + 4 - n % 4, align_b=4, align_c=4)  # the plain estimate, or the wave-tail rule
    assert "misaligned_row_b_schedule" not in builtin_choice(aligned, h200)[1]


@pytest.mark.parametrize("op", [GemmOp(64, 33, 8192, layout_a="col", layout_b="row"),  # few tiles: split-K stays
                                GemmOp(35, 8457, 2560),  # the short-wide rule's
                                GemmOp(2048, 7133, 2048, layout_a="col", layout_b="col"),  # a column-major B
                                GemmOp(2048, 7134, 2048, layout_a="col", layout_b="row"),  # align_b 2: unmeasured
                                GemmOp(2048, 50257, 768),  # the estimate's pick has one K slice, 2 stages already
                                GemmOp(2048, 7133, 2048, dtype="float16", layout_a="col"),  # not float32
                                GemmOp(2048, 7133, 2048, layout_a="col", precision="tf32")])  # not IEEE
def test_misaligned_row_b_leaves_other_products(op):
    """Products the misaligned-B rule must not touch: few tiles, another rule's, a column-major or 8-byte-aligned B,
    a pick it would not change, float16 and tf32 (on sm_80 and sm_90 alike)."""
    from tiledsl.gemm.family import builtin_choice

    for name in ("H200", "A100"):
        assert "misaligned_row_b_schedule" not in builtin_choice(op, tiledsl.Target.known(name))[1]


def test_misaligned_row_b_before_sm_80_keeps_two_stages():
    """Before sm_80 there is no cp.async: the rule takes one K slice and keeps two stages, and the result plans."""
    from dataclasses import replace as dc_replace

    from tiledsl.gemm.family import builtin_choice

    sm75 = dc_replace(tiledsl.Target.known("A100"), arch="sm_75", name="sm_75 (A100 figures)")
    op = GemmOp(2048, 7133, 2048, layout_a="col", layout_b="row")
    s, why = builtin_choice(op, sm75)
    assert "misaligned_row_b_schedule" in why and s.split_k == 1 and s.stages == 2
    assert tiledsl.plan(op, s, device=sm75).schedule == s


@pytest.mark.parametrize("name", ["m", "n", "k"])
def test_gemm_op_extents_leave_room_for_block_indices(name):
    """Every size up to 2^31 - 1 - INDEX_HEADROOM is taken; one more is refused naming the size, the value and the
    limit: a block's 32-bit indices run up to INDEX_HEADROOM past it (the GEMV kernel's widest block) and would wrap
    negative past 2^31, passing their bounds checks."""
    from tiledsl.gemm.op import INDEX_HEADROOM, MAX_EXTENT

    sizes = dict(m=1, n=1, k=1)
    assert MAX_EXTENT == 2**31 - 1 - INDEX_HEADROOM and INDEX_HEADROOM >= 1024 * 4 * 8  # threads × vec × col_groups
    assert getattr(GemmOp(**{**sizes, name: MAX_EXTENT}), name) == MAX_EXTENT
    with pytest.raises(tiledsl.SpecError, match=rf"GemmOp\.{name}={MAX_EXTENT + 1} exceeds {MAX_EXTENT} = 2\^31 - 1 - 65536"):
        GemmOp(**{**sizes, name: MAX_EXTENT + 1})


def test_swizzle_group_must_fit_a_32_bit_int():
    """The tiled kernels' rasterization computes swizzle × ⌈N / bn⌉ in an int: a schedule whose group would wrap (it
    left half of C unwritten, emulated) is refused naming swizzle, M, N and bn; the same tile with a small swizzle
    plans, and the emitted source does not depend on the rule (an op-scope rule has no static_assert)."""
    op = GemmOp(128, 65538 * 64, 64)
    big = GemmSchedule(bm=64, bn=64, bk=16, rm=4, rn=4, unroll=16, swizzle=65535)
    with pytest.raises(tiledsl.ScheduleError, match=r"swizzle=65535 over M=128, N=4194432 in bn=64.*"
                                                    r"swizzle_group_fits_int"):
        tiledsl.plan(op, big, device="h200")
    assert tiledsl.plan(op, replace(big, swizzle=8), device="h200").schedule.swizzle == 8
    assert "swizzle_group_fits_int" not in tiledsl.source(GemmOp(64, 64, 64), replace(big, swizzle=8))
    swapped = GemmOp(65538 * 64, 128, 64)  # ⌈M / bn⌉ counts too: a column-major C runs as Cᵀ = Bᵀ·Aᵀ
    with pytest.raises(tiledsl.ScheduleError, match="swizzle_group_fits_int"):
        tiledsl.plan(swapped, big, device="h200")


def test_schedule_none_takes_lanes_in_groups_only_where_measured():
    """``gemv_lanes_split_k``: the FMA GEMV pick (schedule=None's where gemv_dmma_default does not take the FP64
    tensor cores: below 9 rows, off the H100/H200) runs x @ W.T with A in registers and its lanes in groups of 16 where the
    register pick splits K, an aligned IEEE float32 product of a row-major A into a row-major C with 5-16 rows, N and
    K within GEMV_LANES_RANGE, on sm_90; the register pick (32 lanes) elsewhere: one slice (N = 22016), N or K out of
    the measured range, K not a multiple of 4 (A and B not 4 wide), float16, a column-major C, an A100 target; A
    staged for a small W."""
    from tiledsl.gemm import default_schedule as schedule_none
    from tiledsl.gemm.family import GEMV_LANES_RANGE
    from tiledsl.gemm.family import gemv_schedule as default_schedule  # the FMA GEMV pick

    h200, a100 = tiledsl.Target.known("H200"), tiledsl.Target.known("A100")

    def op(m, n, k, **kw):
        al = 4 if k % 4 == 0 else 2 if k % 2 == 0 else 1
        return tiledsl.GemmOp(m, n, k, layout_b="col", align_a=al, align_b=al, align_c=4 if n % 4 == 0 else 1, **kw)

    for m, n, k in ((5, 4096, 4096), (8, 4096, 14336), (12, 6144, 4096), (16, 4096, 11008)):
        s = default_schedule(op(m, n, k), h200)
        assert (s.k_lanes, s.rn, s.unroll, s.smem_a) == (16, 4, 2, False) and s.split_k > 1, (m, n, k, s)
        assert (schedule_none(op(m, n, k), h200) == s) == (m < 9)  # from 9 rows the FP64 kernel (gemv_dmma_default)
        assert schedule_none(op(m, n, k), a100).k_lanes == 32  # sm_80: the register pick
    assert GEMV_LANES_RANGE == (4096, 6144, 4096, 14336)
    elsewhere = [(op(16, 22016, 4096), h200), (op(16, 2048, 4096), h200), (op(16, 4096, 16384), h200),
                 (op(16, 4096, 4098), h200), (op(16, 4096, 4096, dtype="float16"), h200),
                 (op(16, 4096, 4096, layout_c="col"), h200), (op(16, 4096, 4096), a100), (op(4, 4096, 4096), h200),
                 (op(16, 1024, 4096), h200)]
    for o, target in elsewhere:
        assert default_schedule(o, target).k_lanes == 32, (o, target.name)
    assert default_schedule(op(16, 1024, 4096), h200).smem_a

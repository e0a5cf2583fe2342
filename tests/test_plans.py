"""tiledsl.plan: one frozen Plan per (op, schedule, target) for every family, rendered by the emitters and
read by the cost model and the search (CPU only)."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import replace

import pytest

import tiledsl
from tiledsl import costmodel, family
from tiledsl.api import source
from tiledsl.costmodel.params import FmaParams

OPS = {
    "gemm": tiledsl.GemmOp(1000, 998, 333, dtype="float16", layout_a="col", align_a=4, align_b=2, align_c=2,
                           read_c=True),
    "reduce": tiledsl.ReduceOp(shape=(64, 1000, 96), op="max", axis=1, dtype="float32"),
    "transpose": tiledsl.TransposeOp(shape=(3, 100, 98), dtype="float16"),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_plan_exists_prints_and_matches_the_emitted_signature(name):
    op = OPS[name]
    p = tiledsl.plan(op, arch="sm_90")
    assert p.family == name and p.arch == "sm_90" and p.grid is not None and p.threads == p.block[0] * p.block[1]
    text = str(p)
    for part in ("kernel", "block", "grid", "vec", "registers", "params", p.kernel_name):
        assert part in text
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.grid = (1, 1, 1)
    src = source(op, p.schedule)
    m = re.search(rf"{p.kernel_name}\((.*?)\)\s*\{{", src, re.S)
    assert m is not None
    assert " ".join(m.group(1).split()) == ", ".join(q.decl for q in p.params)  # the signature is the list
    if "__launch_bounds__(THREADS, MIN_BLOCKS)" in src:  # the tensor-core emitters name the constant
        assert re.search(rf"constexpr int MIN_BLOCKS = {p.min_blocks};", src)
    else:
        assert f"__launch_bounds__({'THREADS' if name != 'reduce' else p.threads}, {p.min_blocks})" in src


@pytest.mark.parametrize("layout_a,layout_b", [("row", "row"), ("col", "col")])
def test_tma_plan_passes_tensor_maps_and_the_signature_is_the_list(layout_a, layout_b):
    """wgmma with a producer warpgroup: A and B reach the kernel as two by-value tensor maps (no pointers or
    leading dimensions), and the boxes tile the stage exactly."""
    from tiledsl.gemm.kernel_plan import tensor_map, tma_box

    op = tiledsl.GemmOp(1000, 1024, 520, dtype="bfloat16", layout_a=layout_a, layout_b=layout_b, align_a=8,
                        align_b=8, align_c=8)
    s = tiledsl.GemmSchedule(mma="wgmma", bm=128, bn=256, bk=64, stages=4, warp_specialize=True)
    p = tiledsl.plan(op, s, arch="sm_90")
    assert [q.name for q in p.params] == ["tmap_a", "tmap_b", "C", "M", "N", "K", "ldc", "alpha"]
    assert all(q.is_by_value for q in p.params[:2]) and not any(q.is_by_value for q in p.params[2:])
    src = source(op, s)
    m = re.search(rf"{p.kernel_name}\((.*?)\)\s*\{{", src, re.S)
    assert " ".join(m.group(1).split()) == ", ".join(q.decl for q in p.params)
    for which, rows, ld in (("A", 128, 600), ("B", 256, 1100)):
        inner, outer, copies = tma_box(op, s, which)
        assert inner * outer * copies == rows * 64  # one stage of the operand, exactly
        g = tensor_map(op, s, which, ld)
        assert g.pitch_bytes == 2 * ld and g.box_inner * 2 <= 128  # the 128-byte swizzle's span
        k_major = (layout_a == "row") if which == "A" else (layout_b == "col")
        assert (g.inner, g.outer) == ((520, op.m if which == "A" else op.n) if k_major
                                      else (op.m if which == "A" else op.n, 520))


def test_gemm_plan_widths_registers_and_the_cost_model_agree():
    op = OPS["gemm"]
    s = tiledsl.GemmSchedule(vec=4)
    p = tiledsl.plan(op, s, arch="sm_90")
    assert p.vec == (("A", 4), ("B", 2), ("C", 2))
    assert p.min_blocks == 1  # B forces narrower loads than vec: min_blocks lowered
    assert p.max_registers == min(255, 65536 // p.threads) // 8 * 8
    regs, spill = costmodel.estimate_registers(op, s)  # no fitted constants: the plan's estimate
    assert regs == min(p.max_registers, -(-p.est_registers // 8) * 8) and spill == p.detail.spill_bytes
    # the plan's weights as constants give the plan's estimate
    assert costmodel.estimate_registers(op, s, FmaParams()) == (regs, spill)
    aligned = replace(op, n=1000, align_a=4, align_b=4)  # N = 1000: a B that takes 4-wide loads
    assert s.est_registers == tiledsl.plan(aligned, s, arch="sm_90").est_registers


def test_plans_of_schedules_emitting_the_same_kernel_share_a_key():
    op = tiledsl.GemmOp(512, 512, 512, align_a=2, align_b=2, align_c=2)
    p4 = tiledsl.plan(op, tiledsl.GemmSchedule(vec=4), arch="sm_90")
    p2 = tiledsl.plan(op, tiledsl.GemmSchedule(vec=2, min_blocks=1), arch="sm_90")
    assert p4.schedule != p2.schedule and p4.key == p2.key
    assert tiledsl.plan(op, tiledsl.GemmSchedule(vec=1), arch="sm_90").key != p4.key


def test_split_k_plan_has_a_workspace_and_a_followup():
    op = tiledsl.GemmOp(16, 512, 40000)
    s = replace(tiledsl.preset("gemm", "sgemm_64x64_4x4"), split_k=4)
    p = tiledsl.plan(op, s, arch="sm_90")
    assert p.grid == (8, 4, 1) and p.workspace[0].count == 4 * 16 * 512
    assert p.followup.kernel_name in source(op, s) and p.followup.grid == (-(-16 * 512 // 256), 1, 1)
    assert [q.source for q in p.params][:3] == ["a", "b", "workspace"]


def test_family_records_are_registered_once_and_found_by_op():
    names = [f.name for f in family.registered()]
    assert names == ["gemm", "reduce", "transpose"]
    for name, op in OPS.items():
        assert family.of(op).name == name and family.get(name).plan is not None
    with pytest.raises(ValueError, match="already registered"):
        family.register(replace(family.get("gemm"), name="gemm2"))
    with pytest.raises(tiledsl.SpecTypeError):
        family.of(object())


def test_plan_refuses_a_schedule_of_another_family():
    with pytest.raises(tiledsl.SpecTypeError):
        tiledsl.plan(OPS["gemm"], tiledsl.ReduceSchedule(), arch="sm_90")

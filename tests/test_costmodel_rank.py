"""The FMA GEMM model's fitted pipeline terms, and its ranking of measured studies (CPU only).

The studies are the tuner's measured trials committed under ``benchmarks/results/studies/`` (H200,
2026-12-01); ``docs/costmodel.md`` ("A cost model that ranks") has the fit and its held-out check.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

import tiledsl
from tiledsl.costmodel import gemm as cg
from tiledsl.costmodel import predict
from tiledsl.costmodel.params import FmaParams, fma_params, params_path
from tiledsl.costmodel.ranking import model_top, rank_quality, spearman
from tiledsl.target import Target

H200 = Target.known("H200")
OP = tiledsl.GemmOp(4096, 4096, 4096)
STUDIES = Path(__file__).resolve().parent.parent / "benchmarks" / "results" / "studies"


def _study(shape: str) -> dict:
    (path,) = STUDIES.glob(f"gemm_fp32_{shape}_h200_*.json")
    return json.loads(path.read_text())


# ---- the pipeline terms behave as the physics says ----
def test_predictions_are_deterministic_and_use_the_shipped_constants():
    s = tiledsl.GemmSchedule(bm=128, bn=256, bk=16, rm=16, rn=8)
    a, b = predict(OP, s, "H200"), predict(OP, s, "H200")
    assert a == b
    assert a == cg.predict_gemm(OP, s, H200, params=fma_params("sm_90"))
    # the unfitted defaults are the model before the fit: a different (more optimistic) figure
    assert cg.predict_gemm(OP, s, H200, params=FmaParams()) < a


def test_big_thread_tile_beats_small_one_at_4096():
    big = tiledsl.GemmSchedule(bm=128, bn=128, bk=32, rm=8, rn=8, vec=2)  # 64 FMAs per 4 LDS.128 per k
    small = tiledsl.GemmSchedule(bm=64, bn=64, bk=32, rm=2, rn=2, vec=2)  # 4 FMAs per 2 LDS.64 per k
    assert predict(OP, big, "H200") < predict(OP, small, "H200") / 1.5


def test_wavefronts_hold_their_scheduler():
    # FmaParams.wavefront_issue_cycles: each L1 wavefront of a warp's shared-memory (and local) accesses adds that many
    # cycles to the warp's issue time; 0 is the model before it (docs/costmodel.md, "Wavefronts hold the scheduler")
    s = tiledsl.GemmSchedule(bm=64, bn=32, bk=32, rm=4, rn=4, wm=32, wn=16, unroll=16)  # 4×4: wavefront-heavy k
    held = replace(fma_params("sm_90"), wavefront_issue_cycles=1.0)
    base = replace(held, wavefront_issue_cycles=0.0)
    g0, g1 = cg.gemm_times(OP, s, H200, params=base), cg.gemm_times(OP, s, H200, params=held)
    step = cg._per_step(OP, s)
    warps = s.threads // 32
    extra = warps * (step["wf_lds"] + step["wf_sts"]) / cg.ISSUE_PER_CLOCK
    assert g1.issue_cycles_per_step == pytest.approx(g0.issue_cycles_per_step + extra)
    assert g1.smem_cycles_per_step == g0.smem_cycles_per_step  # the SM-wide wavefront bound is unchanged
    assert cg.predict_gemm(OP, s, H200, params=held) > cg.predict_gemm(OP, s, H200, params=base)
    # per FFMA it costs a small thread tile more than a big one (16×8: 16 wavefronts per 128 FFMAs per k and warp)
    big = tiledsl.GemmSchedule(bm=128, bn=256, bk=16, rm=16, rn=8, wm=128, wn=32, unroll=16)
    ratio = [cg.gemm_times(OP, x, H200, params=held).issue_cycles_per_step
             / cg.gemm_times(OP, x, H200, params=base).issue_cycles_per_step for x in (s, big)]
    assert ratio[0] > ratio[1] > 1.0


def test_spills_predict_slower():
    s = tiledsl.GemmSchedule(bm=128, bn=128, bk=16, rm=8, rn=8, min_blocks=1)
    clean = cg.gemm_times(OP, s, H200, regs=160, spill_bytes=0, regs_source="ptxas")
    spilled = cg.gemm_times(OP, s, H200, regs=160, spill_bytes=512, regs_source="ptxas")
    assert spilled.t_sm_s > clean.t_sm_s * 1.05
    # from the schedule alone: a 256×256 tile of 16×8 thread tiles wants ~212 registers under a cap of 128
    big = tiledsl.GemmSchedule(bm=256, bn=256, bk=16, rm=16, rn=8)
    assert tiledsl.plan(OP, big, arch="sm_90").detail.spill_bytes > 0
    fine = tiledsl.GemmSchedule(bm=128, bn=256, bk=16, rm=16, rn=8)
    assert predict(OP, big, "H200") > predict(OP, fine, "H200")


def test_latency_hiding_needs_warps():
    # one warp waits its whole chain; many warps hide it (issue-bound); monotone in between
    assert cg.hidden(1, 100.0, 300.0) == pytest.approx(300.0)
    assert cg.hidden(64, 100.0, 300.0) == pytest.approx(6400.0, rel=1e-6)
    per_warp = [cg.hidden(w, 100.0, 300.0) / w for w in (1, 2, 4, 8)]
    assert per_warp == sorted(per_warp, reverse=True) and per_warp[-1] > 100.0
    assert cg.hidden(4, 100.0, 100.0) == 400.0   # nothing to hide


def test_fewer_resident_warps_predict_slower_per_flop():
    # same tile; __launch_bounds__ for 2 blocks (128 registers) vs 1 block per SM: 16 vs 8 warps
    two = tiledsl.GemmSchedule(bm=128, bn=128, bk=16, rm=8, rn=8, min_blocks=2)
    g2 = cg.gemm_times(OP, two, H200, regs=128, spill_bytes=0, regs_source="ptxas")
    g1 = cg.gemm_times(OP, two, H200, regs=255, spill_bytes=0, regs_source="ptxas")
    assert g2.occupancy.blocks_per_sm == 2 and g1.occupancy.blocks_per_sm == 1
    assert g1.t_sm_s > g2.t_sm_s


def test_tail_wave_costs_a_round():
    s = tiledsl.GemmSchedule(bm=128, bn=128, bk=16, rm=8, rn=8, min_blocks=2)
    fits = tiledsl.GemmOp(128, 128 * 264, 4096)          # 264 tiles = 132 SMs × 2 blocks: one wave
    over = tiledsl.GemmOp(128, 128 * 265, 4096)          # one tile more: a second, nearly empty wave
    g = cg.gemm_times(fits, s, H200)
    assert g.occupancy.blocks_per_sm == 2
    assert predict(over, s, "H200") > 1.3 * predict(fits, s, "H200")


def test_split_k_pays_its_workspace_and_second_launch():
    op = tiledsl.GemmOp(512, 512, 65536)
    one = tiledsl.GemmSchedule(bm=64, bn=64, bk=16, rm=4, rn=4)
    four = replace(one, split_k=4)
    g1, g4 = cg.gemm_times(op, one, H200), cg.gemm_times(op, four, H200)
    ws = 2 * 4 * 512 * 512 * 4     # float32 partials written and read back
    assert g4.t_hbm_s == pytest.approx(g1.t_hbm_s + ws / H200.ceilings()["hbm_bytes_per_s"].value)
    # 64 tiles on 132 SMs: four slices fill the GPU, so split-K predicts faster on this long K
    assert g4.waves.blocks == 4 * g1.waves.blocks
    assert predict(op, four, "H200") < predict(op, one, "H200")


def test_params_file_has_provenance_and_other_archs_fall_back():
    data = json.loads(params_path("sm_90").read_text())
    assert set(data["params"]) == {f for f in FmaParams().to_dict() if f != "source"}
    assert "costmodel_rank.py" in data["provenance"]["command"]
    assert "fitted on sm_90" in fma_params("sm_90").source
    assert "used for sm_80" in fma_params("sm_80").source


def test_explain_fp32_ceiling_can_be_recomputed_from_its_line():
    # the worked example of docs/costmodel.md: ceiling = 1 / (instructions per FFMA / efficiency + cycles per
    # wavefront · wavefronts per FFMA), each figure printed on the line (to its rounding)
    import re

    s = tiledsl.GemmSchedule(bm=128, bn=128, bk=8, rm=8, rn=8, smem_pad=4, wm=32, wn=64, min_blocks=2)
    text = str(tiledsl.explain(OP, s, device="H200"))
    m = re.search(r"([\d.]+) warp-instructions per FFMA .* at (\d+)% issue efficiency \+ ([\d.]+) cyc per L1 "
                  r"wavefront \(([\d.]+) per FFMA\) → FP32 ceiling (\d+)% of peak", text)
    assert m, text
    ipf, eta, cyc, wpf, ceiling = (float(x) for x in m.groups())
    assert 1 / (ipf / (eta / 100) + cyc * wpf) == pytest.approx(ceiling / 100, abs=0.015)


def test_params_written_before_a_later_constant_read_as_the_model_without_it():
    # the sm_90 constants of 2026-12-03 (no wavefront_issue_cycles) read with it at 0, the model of that day;
    # a missing original constant or an unknown one is still refused, naming it
    from tiledsl.errors import SpecError

    old = dict(FmaParams().to_dict(), issue_efficiency=0.6763)
    del old["source"], old["wavefront_issue_cycles"]
    p = FmaParams.from_dict(old)
    assert p.wavefront_issue_cycles == 0.0 and p.issue_efficiency == 0.6763
    with pytest.raises(SpecError, match="missing field.*issue_efficiency"):
        FmaParams.from_dict({k: v for k, v in old.items() if k != "issue_efficiency"})
    with pytest.raises(SpecError, match="unknown field.*k_gap_cycles"):
        FmaParams.from_dict(dict(old, k_gap_cycles=2.0))


def test_explain_names_the_constants_and_one_ceiling_per_level():
    r = tiledsl.explain(OP, tiledsl.GemmSchedule(), device="H200")
    text = str(r)
    assert "issue efficiency" in text and "pipeline constants: fitted on sm_90" in text
    assert r.terms["param_issue_efficiency"] == fma_params("sm_90").issue_efficiency
    for name, lv in r.levels.items():
        assert lv.ceiling_source, name
    assert r.compute_ceiling_source.startswith("datasheet")


# ---- ranking figures: one definition for the tuner and the fit script ----
def test_rank_quality_reproduces_the_tuners_report():
    # the tuner's log of 2026-12-01 (search.tune report, old model): rho and its top 10 on 4096³
    expected = {"4096x4096x4096": 0.690, "1024x1024x1024": 0.445, "35x8457x2560": 0.662}
    for shape, rho in expected.items():
        d = _study(shape)
        t = d["trials"]
        q = rank_quality([x["predicted_s_then"] for x in t], [x["time_s"] for x in t], [x["number"] for x in t],
                         d["winner_trial"])
        assert q.n == d["n_trials"]
        assert q.spearman == pytest.approx(rho, abs=5e-4)
        assert not q.best_in_top10
    d = _study("4096x4096x4096")
    t = d["trials"]
    assert model_top([x["predicted_s_then"] for x in t], [x["number"] for x in t]) == [0, 1, 2, 3, 4, 5, 6, 7, 59, 60]


def test_rank_quality_definitions():
    q = rank_quality([1.0, 2.0, 3.0, 4.0], [10.0, 30.0, 20.0, 40.0], [7, 8, 9, 10])
    assert q.spearman == pytest.approx(spearman([1, 2, 3, 4], [10, 30, 20, 40])) == pytest.approx(0.8)
    assert q.best == 7 and q.best_in_top10 and q.best_model_rank == 1
    assert q.median_ratio == pytest.approx(10.0)   # ratios 10, 15, 6.67, 10
    with pytest.raises(ValueError, match="best=3"):
        rank_quality([1.0], [1.0], [1], best=3)


def test_shipped_model_ranks_the_committed_studies():
    # in-sample guard of the shipped fit (held-out figures: docs/costmodel.md); the old model had
    # rho 0.690 / 0.445 / 0.662 and the best outside its top 10 on all three
    for shape, floor in {"4096x4096x4096": 0.85, "1024x1024x1024": 0.8, "35x8457x2560": 0.8}.items():
        d = _study(shape)
        op = tiledsl.GemmOp(**d["op"])
        t = d["trials"]
        pred = [predict(op, tiledsl.GemmSchedule(**x["schedule"]), "H200") for x in t]
        q = rank_quality(pred, [x["time_s"] for x in t], [x["number"] for x in t], d["winner_trial"])
        assert q.spearman > floor, (shape, q)
        assert 0.75 < q.median_ratio < 1.3, (shape, q)


def test_rank_script_eval_runs_without_a_gpu():
    root = STUDIES.parent.parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}
    r = subprocess.run([sys.executable, str(root / "benchmarks" / "costmodel_rank.py"), "eval"], cwd=root, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = [x for x in r.stdout.splitlines() if x.startswith("shipped fit") and "4096x4096x4096" in x]
    assert len(lines) == 1 and "yes (#1)" in lines[0], r.stdout


def test_transposes_rank_by_bytes_in_flight_and_block_count():
    """The memory-bound model separates candidates (issue: its top five transposes tied): on the 22 measured
    transposes of benchmarks/results/transpose_h200.json the shipped model (soft maximum of the HBM roof and Little's
    law, BLOCK_CYCLES per block) ranks with ρ ≥ 0.9 where the hard maximum gave 0.68; the schedules it ranks first
    (a tie: rows per thread and swizzle have no term) are all 64-wide, 4-wide, padded tiles, the measured-best
    structure; memory_time lies between the larger time and √2 times it (p = 2) and refuses p < 1."""
    import math

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import costmodel_transpose as ct

    from tiledsl.costmodel import stream

    h200 = Target.known("H200")
    op, measured = ct.rows()
    assert len(measured) == 22
    shipped = ct.quality(op, measured, h200)
    before = ct.quality(op, measured, h200, softness=math.inf, block_cycles=0.0)
    assert shipped["rho"] >= 0.9 > 0.7 > before["rho"] and 0.9 < shipped["median"] < 1.1
    best = min(shipped["predicted"])
    firsts = [r["schedule"] for r, p in zip(measured, shipped["predicted"], strict=True) if p <= best * (1 + 1e-9)]
    assert {(f.variant, f.tile, f.vec, f.smem_pad) for f in firsts} == {("shared", 64, 4, 1)}
    assert min(r["gbps"] for r, p in zip(measured, shipped["predicted"], strict=True) if p <= best * (1 + 1e-9)) > 3900
    assert len({round(p, 9) for p in shipped["predicted"]}) > len({round(p, 9) for p in before["predicted"]})
    for a, b in ((1.0, 1.0), (1.0, 1e-3), (2e-300, 1e-300), (5.0, 0.0), (math.inf, 1.0)):
        t = stream.memory_time(a, b)
        assert max(a, b) <= t <= math.sqrt(2) * max(a, b) * (1 + 1e-12)
    assert stream.memory_time(math.inf, math.inf) == math.inf
    shipped_p = stream.MEMORY_SOFTNESS
    try:
        stream.MEMORY_SOFTNESS = 0.5
        with pytest.raises(ValueError, match="MEMORY_SOFTNESS=0.5 must be at least 1"):
            stream.memory_time(1.0, 1.0)
    finally:
        stream.MEMORY_SOFTNESS = shipped_p


def test_fitted_register_terms_drive_the_occupancy_estimate():
    """The model's registers are reg_base + its weights × the plan's register terms (fma_register_terms), capped and
    in allocation units of 8: FmaParams' defaults give the plan's own estimate, other weights change it; the worked
    example of docs/costmodel.md (4096³, 128×128×8, 8×8) wants ceil(130.04) = 131 under the shipped weights and is
    capped at 128 by __launch_bounds__(256, 2)."""
    from tiledsl.gemm.schedule import fma_register_terms

    op, s = tiledsl.GemmOp(4096, 4096, 4096), tiledsl.GemmSchedule(bm=128, bn=128, bk=8, rm=8, rn=8, vec=4,
                                                                   smem_pad=4, wm=32, wn=64)
    assert fma_register_terms(s, 4, 4) == {"accumulators": 64, "fragments": 16, "staged": 8, "loads": 2,
                                           "stream_k": 0}
    small = tiledsl.GemmSchedule(bm=64, bn=64, bk=16, rm=4, rn=4, vec=4, min_blocks=1)  # far below its cap
    plain = cg.estimate_registers(op, small)
    assert cg.estimate_registers(op, small, FmaParams()) == plain
    heavier = cg.estimate_registers(op, small, FmaParams(reg_per_load=10.0))
    assert heavier[0] == plain[0] + 2 * 8 and heavier[1] == plain[1]  # one 4-wide load each of A and B: +8 each
    shipped = fma_params("sm_90")
    t = fma_register_terms(s, 4, 4)
    want = (shipped.reg_base + shipped.reg_per_accumulator * t["accumulators"] + shipped.reg_per_fragment
            * t["fragments"] + shipped.reg_per_staged * t["staged"] + shipped.reg_per_load * t["loads"])
    assert 128 < want <= 136 and cg.estimate_registers(op, s, shipped)[0] == 128


def test_register_fit_recovers_known_weights_and_needs_enough_kernels():
    """benchmarks/costmodel_rank.py's register_fit: non-negative least squares of ptxas's registers on the plan's
    register terms over the kernels below their cap; fewer than two kernels per weight fits nothing (the defaults).
    Needs scipy (the ``fit`` extra: ``pip install -e ".[fit]"``), as the fit does."""
    pytest.importorskip("scipy", reason="the register fit uses scipy.optimize.nnls: pip install -e '.[fit]'")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import costmodel_rank as cr

    from tiledsl.gemm.kernel_plan import plan_gemm
    from tiledsl.gemm.schedule import fma_register_terms

    op = tiledsl.GemmOp(4096, 4096, 4096)
    scheds = []
    for bm, bn, rm, rn in ((64, 64, 4, 4), (128, 64, 8, 4), (64, 128, 4, 8), (128, 128, 8, 8), (128, 128, 8, 4)):
        for bk, v in ((8, 1), (8, 2), (16, 1), (16, 2), (16, 4), (32, 4)):
            try:
                scheds.append(tiledsl.GemmSchedule(bm=bm, bn=bn, bk=bk, rm=rm, rn=rn, vec=v, unroll=8, min_blocks=1))
            except tiledsl.ScheduleError:
                continue  # a tile that does not split evenly into this many threads' loads
    assert len(scheds) >= 15
    truth = {"reg_base": 40.0, "reg_per_accumulator": 1.0, "reg_per_fragment": 0.5, "reg_per_staged": 1.0,
             "reg_per_load": 5.0}
    regs = []
    for s in scheds:
        v = dict(plan_gemm(op, s).vec)
        t = fma_register_terms(s, v["A"], v["B"])
        regs.append(truth["reg_base"] + truth["reg_per_accumulator"] * t["accumulators"] + truth["reg_per_fragment"]
                    * t["fragments"] + truth["reg_per_staged"] * t["staged"] + truth["reg_per_load"] * t["loads"])
    study = cr.Study("synthetic", op, Target.known("H200"), tuple(range(len(scheds))), tuple(scheds),
                     tuple(1.0 for _ in scheds), tuple(regs), tuple(0 for _ in scheds), tuple(1.0 for _ in scheds),
                     None, "synthetic", tuple(0 for _ in scheds))
    got = cr.register_fit([study])
    assert got.keys() == truth.keys()
    assert all(got[k] == pytest.approx(truth[k], abs=1e-6) for k in truth), got
    few = replace(study, schedules=study.schedules[:5], registers=study.registers[:5])
    assert cr.register_fit([few]) == {}


def test_load_wavefronts_follow_the_return_path_and_match_ncu():
    """A warp-wide shared-memory load returns one 4-byte register per lane per 128-byte wavefront: LDS.128 takes 4
    wavefronts however few addresses it reads, 2 when lanes pair up on addresses (t and t^1, or t and t^2), and never
    fewer than its bank conflicts (``wavefronts``). With it the model's wavefronts per warp and K step of the FMA GEMMs
    measured by Nsight Compute (benchmarks/results/ncu_bytes_h200.json, H200, 2026-12-01) agree within 1 % (148.0 vs
    148.1, 108.0 vs 108.1 and 108.8), where the bank model alone said 68 and 44; and a warp laid 16 × 2 over its tile
    reads its fragments in 4 wavefronts per k where 4 × 8 or 8 × 4 take 6 (both operands pair up)."""
    assert cg.load_wavefronts([(lane // 8) * 4 for lane in range(32)], 4) == 2   # rows: t and t^1 share
    assert cg.load_wavefronts([(lane % 8) * 4 for lane in range(32)], 4) == 4    # 8 columns: no pairs
    assert cg.load_wavefronts([0] * 32, 4) == 2 and cg.load_wavefronts([0] * 32, 1) == 1
    assert cg.load_wavefronts([(lane % 2) * 4 for lane in range(32)], 4) == 2    # t and t^2 share
    assert cg.load_wavefronts([lane * 32 for lane in range(32)], 1) == 32        # bank conflicts still count
    assert cg.load_wavefronts([lane * 4 for lane in range(32)], 4) == cg.wavefronts([lane * 4 for lane in range(32)], 4)
    data = json.loads((STUDIES.parent / "ncu_bytes_h200.json").read_text())
    checked = 0
    for row in data["rows"]:
        if not row["case"].startswith("gemm_f32"):
            continue
        op, s = tiledsl.GemmOp(**row["op"]), tiledsl.GemmSchedule(**row["predicted"]["schedule"])
        measured = row["kernels"][0]["metrics"]["l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"]
        blocks, ksteps = cg._grid_work(op, s)
        step = cg._per_step(op, s)
        per_warp_step = measured / (blocks * ksteps * (s.threads // 32))
        assert step["wf_lds"] + step["wf_sts"] == pytest.approx(per_warp_step, rel=0.01), row["case"]
        checked += 1
    assert checked == 4
    op = tiledsl.GemmOp(35, 8457, 2560)
    tall = tiledsl.GemmSchedule(bm=64, bn=32, bk=32, rm=4, rn=4, wm=64, wn=8, unroll=16)
    for wm, wn in ((16, 32), (32, 16)):
        other = replace(tall, wm=wm, wn=wn)
        assert cg._per_step(op, other)["wf_lds"] == 6 * 32 and cg._per_step(op, tall)["wf_lds"] == 4 * 32


def test_spills_come_from_the_fitted_register_count_beyond_the_slack():
    """The model's spills: 8 bytes per register of the fitted register terms' excess over the cap beyond
    ``spill_slack_registers``; FmaParams' defaults give the plan's own spills on every kernel of the studies. The one
    warp of 32×32×32 tiles of 4×8 on 35×8457×2560 (40 scalar loads of the odd-N B) spilled 448 bytes: the plan said
    none, the shipped constants say it spills."""
    for shape in ("4096x4096x4096", "1024x1024x1024", "35x8457x2560"):
        d = _study(shape)
        op = tiledsl.GemmOp(**d["op"])
        for t in d["trials"]:
            s = tiledsl.GemmSchedule(**t["schedule"])
            if s.kernel == "tiled" and s.mma == "fma":
                assert cg.estimate_registers(op, s, FmaParams()) == cg.estimate_registers(op, s), t["number"]
    d = _study("35x8457x2560")
    op = tiledsl.GemmOp(**d["op"])
    (trial,) = [t for t in d["trials"] if t["number"] == 65]
    one_warp = tiledsl.GemmSchedule(**trial["schedule"])
    assert (one_warp.bm, one_warp.bn, one_warp.rm, one_warp.rn, one_warp.threads) == (32, 32, 4, 8, 32)
    assert trial["spill_bytes"] == 448
    assert tiledsl.plan(op, one_warp, arch="sm_90").detail.spill_bytes == 0
    shipped = fma_params("sm_90")
    assert cg.estimate_registers(op, one_warp, shipped)[1] > 0
    slack = cg.estimate_registers(op, one_warp, replace(shipped, spill_slack_registers=0.0))[1]
    assert slack == cg.estimate_registers(op, one_warp, shipped)[1] + 8 * shipped.spill_slack_registers


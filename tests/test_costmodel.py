"""Cost model on the CPU: hand-computed traffic, intensity, occupancy and waves (no GPU needed).

Every expected number is worked out in the comment above it from the formulas in docs/costmodel.md.
"""

from __future__ import annotations

import importlib
import json
from fractions import Fraction

import pytest
import sympy as sp

import tiledsl
from tiledsl.costmodel import StreamSchedule, array_sum, occupancy, predict, vector_add, waves
from tiledsl.costmodel import gemm as cg
from tiledsl.costmodel.gemm import wavefronts
from tiledsl.target import Target

H200 = Target.known("H200")


# ---- memory-bound hand cases (roofline and Little's law, docs/design.md) ----
def test_vector_add_is_one_flop_per_12_bytes():
    # z = x + y, n = 2^20 float32: n FLOPs; reads 2·4·n, writes 4·n = 12·n bytes -> 1/12 FLOP/byte
    n = 1 << 20
    r = tiledsl.explain(vector_add(n), device="H200")
    assert r.flops == n
    assert r.levels["hbm"].bytes == 12 * n
    assert Fraction(r.flops) / Fraction(r.levels["hbm"].bytes) == Fraction(1, 12)
    # far below I_max = 66.9e12 / 4.22e12 ≈ 15.9 FLOP/byte: HBM-bound, time = 12·2^20 / 4.22e12 s
    assert r.bound_by == "hbm"
    assert r.levels["hbm"].time_s == pytest.approx(12 * n / 4.22e12)


def test_float32_sum_is_a_quarter_flop_per_byte():
    # sum of n = 2^24 float32: n adds, 4·n bytes read + 4 bytes of result -> n / (4n + 4) ≈ 1/4
    n = 1 << 24
    r = tiledsl.explain(array_sum(n), StreamSchedule(block=256, vec=4, items_per_thread=4), device="H200")
    assert r.levels["hbm"].bytes == 4 * n + 4
    assert r.levels["hbm"].intensity == pytest.approx(n / (4 * n + 4), rel=1e-12)
    assert r.levels["hbm"].intensity == pytest.approx(0.25, rel=1e-6)


def test_reduce_op_duck_typed_when_present():
    reduce = importlib.import_module("tiledsl.reduce")  # the module (tiledsl.reduce is also the function)
    # 2^29 float32, full sum: bytes_moved = 4·2^29 + 4; intensity 2^29 / (2^31 + 4) ≈ 1/4
    op = reduce.ReduceOp(shape=(1 << 29,))
    r = tiledsl.explain(op, reduce.ReduceSchedule(), device="H200")
    assert r.op_name == "reduce"
    assert r.levels["hbm"].bytes == 4 * (1 << 29) + 4
    assert r.levels["hbm"].intensity == pytest.approx(0.25, rel=1e-8)
    # v1 (one same-address atomic per element) must rank far behind v7
    v1 = reduce.ReduceSchedule(block=256, vec=1, items_per_thread=1, strategy="atomic", combine="atomic")
    assert predict(op, v1, "H200") > 100 * r.predicted_s


# ---- GEMM 4096³, bm = bn = 128, bk = 8, rm = rn = 8 (GEMM tiling, docs/design.md) ----
OP = tiledsl.GemmOp(4096, 4096, 4096, dtype="float32")
S = tiledsl.GemmSchedule(bm=128, bn=128, bk=8, rm=8, rn=8)


def test_gemm_4096_exact_bytes_per_level():
    r = tiledsl.explain(OP, S, device="H200")
    # FLOPs: 2·4096³ = 2·68 719 476 736 = 137 438 953 472
    assert r.flops == 137_438_953_472
    # HBM compulsory: (M·K + K·N + M·N)·4 = 3·16 777 216·4 = 201 326 592
    assert r.levels["hbm"].bytes == 201_326_592
    # L2 -> SM: M·N·K·(1/128 + 1/128)·4 + M·N·4 = 68 719 476 736/64·4 + 67 108 864
    #         = 4 294 967 296 + 67 108 864 = 4 362 076 160
    assert r.levels["l2"].bytes == 4_362_076_160
    # shared memory: writes of the tiles 4 294 967 296 (the A/B part of the L2 line, float32 tiles)
    #   + reads M·N·K·(1/8 + 1/8)·4 = 68 719 476 736 → 73 014 444 032
    assert r.levels["smem"].bytes == 73_014_444_032
    ex = cg.traffic(OP, S, exact=True)
    assert ex["smem_read"] == 68_719_476_736
    assert ex["smem_write"] == 4_294_967_296
    # registers: 3 four-byte operands per FMA: 4096³·12 = 824 633 720 832
    assert r.levels["registers"].bytes == 824_633_720_832
    # intensities: 137 438 953 472 / 4 362 076 160 = 31.507..., / 73 014 444 032 = 1.882...
    assert r.levels["l2"].intensity == pytest.approx(137_438_953_472 / 4_362_076_160)
    assert r.levels["smem"].intensity == pytest.approx(32 / 17)  # 2 / (1/8 + 1/8 + 1/64·... ) = 32/17


def test_gemm_symbolic_expression_is_the_seed_formula():
    ex = tiledsl.explain(OP, S, device="H200").expr
    M, N, K, bm, bn, e, rc = (cg.M, cg.N, cg.K, cg.bm, cg.bn, cg.e, cg.rc)
    # when the tiles divide the sizes, the L2 line is M·N·K·(1/bm + 1/bn)·e + M·N·e·(1 + read_c)
    sub = {M: 4096, N: 2048, K: 1024, bm: 64, bn: 128, cg.bk: 16, cg.rm: 4, cg.rn: 8, e: 2, rc: 1}
    seed = (M * N * K * (1 / bm + 1 / bn) * e + M * N * e * (1 + rc)).subs(sub)
    assert sp.simplify(ex["l2"].subs(sub) - seed) == 0
    assert ex["flops"] == 2 * M * N * K


def test_gemm_partial_tiles_count_padded_loads():
    # M = N = K = 100 with 64×64×8 tiles: 2·2 tiles, ⌈100/8⌉ = 13 K steps of 8·(64+64) elements, 4 bytes:
    # 4·13·8·128·4 = 212 992 bytes of A/B tiles + C 100·100·4 = 40 000 → 252 992
    op = tiledsl.GemmOp(100, 100, 100)
    s = tiledsl.GemmSchedule(bm=64, bn=64, bk=8, rm=4, rn=4, vec=2)
    assert tiledsl.explain(op, s, device="H200").levels["l2"].bytes == 252_992


# ---- occupancy on sm_90 limits (CUDA guide cc 9.0; cuda_occupancy.h arithmetic) ----
def test_occupancy_register_limited_case():
    # 256 threads = 8 warps, 128 registers, 16 896 B shared (2 stages·8·(132+132)·4):
    #   threads: 2048 / 256 = 8 blocks
    #   registers: 128·32 = 4096 per warp (already a multiple of 256); 65536 / 4 = 16384 per
    #              sub-partition → 4 warps each → 16 warps → 16 / 8 = 2 blocks
    #   smem: 16 896 is 132·128, + 1 024 reserved = 17 920; 233 472 / 17 920 = 13.03 → 13 blocks
    #   → 2 blocks per SM, limited by registers, 16 of 64 warps = 25 %
    o = occupancy(H200, 256, 128, 16_896)
    assert (o.by_threads, o.by_registers, o.by_smem, o.by_blocks) == (8, 2, 13, 32)
    assert o.blocks_per_sm == 2 and o.limited_by == "registers"
    assert o.warps_per_sm == 16 and o.occupancy == 0.25


def test_occupancy_register_granularity_case():
    # 128 threads = 4 warps, 40 registers: 40·32 = 1280 per warp (a multiple of 256);
    # 16384 / 1280 = 12.8 → 12 warps per sub-partition → 48 warps → 12 blocks; threads allow 16 → 12
    o = occupancy(H200, 128, 40, 0)
    assert o.by_registers == 12 and o.by_threads == 16 and o.blocks_per_sm == 12
    # 41 registers: 41·32 = 1312 → rounded up to 1536; 16384 / 1536 = 10.67 → 10 → 40 warps → 10 blocks
    assert occupancy(H200, 128, 41, 0).blocks_per_sm == 10


def test_occupancy_smem_limited_case():
    # 256 threads, 32 registers (1024 per warp → 16 warps per sub-partition → 64 → 8 blocks),
    # 100 KB = 102 400 B shared + 1 024 = 103 424; 233 472 / 103 424 = 2.26 → 2 blocks, limited by smem
    o = occupancy(H200, 256, 32, 100 * 1024)
    assert o.by_registers == 8 and o.by_smem == 2 and o.limited_by == "smem" and o.blocks_per_sm == 2


def test_wave_quantization():
    # 4096² / 128² = 1024 tiles; 132 SMs × 2 = 264 slots → ⌈1024/264⌉ = 4 waves; 1024 / 1056 = 0.9697
    w = waves(1024, 132, 2)
    assert (w.slots, w.waves) == (264, 4)
    assert w.efficiency == pytest.approx(1024 / 1056)


def test_bank_wavefronts():
    assert wavefronts([i * 32 for i in range(32)], 1) == 32   # a column of an unpadded 32-wide tile
    assert wavefronts([i * 33 for i in range(32)], 1) == 1    # padded [TILE][TILE+1]: conflict-free
    assert wavefronts([i * 4 for i in range(32)], 4) == 4     # 32 distinct float4 = 512 B = 4 wavefronts
    assert wavefronts([0] * 32, 4) == 1                       # broadcast


# ---- prediction, report, ceilings ----
def test_predict_matches_explain_and_ranks_tiles():
    assert predict(OP, S, "H200") == pytest.approx(tiledsl.explain(OP, S, device="H200").predicted_s)
    small = tiledsl.GemmSchedule(bm=32, bn=32, bk=8, rm=2, rn=2, vec=1)
    scalar = tiledsl.GemmSchedule(bm=32, bn=32, bk=32, rm=1, rn=1, vec=1)
    # more smem/L2 traffic and more instructions per FFMA must predict slower
    assert predict(OP, S, "H200") < predict(OP, small, "H200") < predict(OP, scalar, "H200")
    # never faster than the FP32 roof: 137 438 953 472 / 66.9e12 = 2.05 ms
    assert predict(OP, S, "H200") > 137_438_953_472 / H200.peak_fp32_flops


def test_explain_says_stream_k_prices_past_the_waves_line():
    """A stream-K schedule's report says how the last tiles' K steps are shared (the waves line counts whole tiles,
    the time every block busy to the end); a schedule without stream-K has no such line."""
    op = tiledsl.GemmOp(128, 14336, 4096)
    s = tiledsl.preset("gemm", "one_row_128x256_16x8_stream_k")
    text = str(tiledsl.explain(op, s, device="H200"))
    assert "waves: 56 blocks over 132 slots = 1 waves, efficiency 42%" in text
    assert "stream-K: 132 blocks share the last 56 tiles' K steps (256 per tile), 0 tiles run whole" in text
    plain = str(tiledsl.explain(op, tiledsl.preset("gemm", "sgemm_128x128_8x8"), device="H200"))
    assert "stream-K:" not in plain


def test_report_dict_and_text():
    r = tiledsl.explain(OP, S, device="H200")
    d = r.to_dict()
    assert set(d["levels"]) == {"hbm", "l2", "smem", "registers"}
    for lv in d["levels"].values():
        assert {"bytes", "intensity", "time_s"} <= set(lv)
    assert {"flops", "occupancy", "predicted_s", "bound_by"} <= set(d)
    json.dumps(d)
    text = str(r)
    assert "bound by" in text and "occupancy" in text and "FLOP/byte" in text


def test_h200_ceilings_say_where_they_come_from():
    c = H200.ceilings()
    assert c["hbm_bytes_per_s"].measured and c["hbm_bytes_per_s"].value == 4.22e12
    assert not c["fp32_flops_per_s"].measured
    # shared memory: 32 banks · 4 B · 132 SMs · 1.98 GHz = 33.45 TB/s
    assert c["smem_bytes_per_s"].value == pytest.approx(32 * 4 * 132 * 1.98e9)


def test_peaks_of_the_known_gpus_and_what_they_are_called():
    """FP32: the datasheets' 19.5 TFLOP/s on the A100 (64 FP32 lanes per SM on cc 8.0, half of cc 8.6+'s 128) and 66.9
    on the H100/H200. Dense 16-bit tensor cores: SMs × FLOP/clock × boost clock, 312 on the A100 (its datasheet's) and
    1070.5 on the H100/H200, whose datasheet quotes 989.4 at 1.83 GHz, so reports call it "derived", not
    "datasheet"."""
    from tiledsl.target import fp32_lanes

    a100, h200 = Target.known("A100"), Target.known("H200")
    assert a100.peak_fp32_flops == pytest.approx(19.5e12, rel=1e-3)
    assert a100.peak_tc16_flops == pytest.approx(312e12, rel=1e-3)
    assert h200.peak_fp32_flops == pytest.approx(66.9e12, rel=1e-3)
    assert h200.peak_tc16_flops == pytest.approx(132 * 4096 * 1.98e9)
    rate, source = h200.tensor_core_ceiling()
    assert rate == h200.peak_tc16_flops and source.startswith("derived:") and "datasheet" not in source
    assert [fp32_lanes(*cc) for cc in ((7, 0), (8, 0), (8, 6), (8, 9), (9, 0))] == [64, 64, 128, 128, 128]
    r = tiledsl.explain(OP, S, device="A100")
    assert r.compute_ceiling_flops_per_s == pytest.approx(19.5e12, rel=1e-3) and "64 FP32 lanes" in r.compute_ceiling_source


@pytest.mark.parametrize("device", [90, ["H200"], 9.0])
def test_a_device_of_the_wrong_type_is_refused_not_taken_for_the_gpu_present(device):
    for call in (tiledsl.explain, tiledsl.predict):
        with pytest.raises(tiledsl.SpecTypeError, match="device must be a GPU name"):
            call(OP, S, device=device)


def test_calibration_cache_round_trip(tmp_path, monkeypatch):
    from tiledsl.calibrate import calibration_path, load_calibration

    monkeypatch.setenv("TILEDSL_CACHE_DIR", str(tmp_path))
    t = Target.known("A100")
    assert load_calibration(t) is t                      # nothing cached yet
    path = calibration_path(t)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"date": "2026-11-29", "figures": {
        "l2_bytes_per_s": {"value": 5.0e12, "unit": "bytes/s", "method": "test"}}}))
    c = load_calibration(t).ceilings()["l2_bytes_per_s"]
    assert c.measured and c.value == 5.0e12 and "2026-11-29" in c.source


def test_kernel_registers_feed_occupancy():
    k = tiledsl.compile(OP, S, arch="sm_90")  # NVRTC is a test dependency: a CompileError must fail
    r = tiledsl.explain(OP, S, device="H200", kernel=k)
    assert r.occupancy.registers_source == "ptxas"
    assert r.occupancy.registers_per_thread == k.registers
    assert r.occupancy.smem_per_block_bytes == k.smem_bytes


def test_roofline_plot_writes_png(tmp_path):
    pytest.importorskip("matplotlib")
    r = tiledsl.explain(OP, S, device="H200")
    out = tiledsl.roofline_plot([r, (r, 3e-3), {"intensity": 0.25, "flops_per_s": 1e12, "label": "sum"}],
                                tmp_path / "roof.png", device="H200")
    assert out.stat().st_size > 10_000


def test_tensor_core_traffic_and_roof():
    """wgmma 128×256×64 at 4096³ bf16: 512 tiles × 64 K steps.
    L2: copies 512·64·64·(128+256)·2 = 1 610 612 736 + C 4096²·2 = 33 554 432 → 1 644 167 168.
    smem: copies + reads 512·64·(128·256·64·2)·(1/256 + 1/64) = 2 684 354 560 → 4 294 967 296."""
    import tiledsl
    from tiledsl.costmodel.gemm_tc import traffic_tc

    op = tiledsl.GemmOp(4096, 4096, 4096, dtype="bfloat16", align_a=8, align_b=8, align_c=8)
    s = tiledsl.GemmSchedule(mma="wgmma", bm=128, bn=256, bk=64, stages=4)
    tr = traffic_tc(op, s)
    assert tr["l2"] == 1_644_167_168 and tr["smem"] == 4_294_967_296
    r = tiledsl.explain(op, s, device="H200")
    assert r.compute_unit == "dense 16-bit tensor-core rate"
    assert r.compute_ceiling_flops_per_s == tiledsl.Target.known("H200").peak_tc16_flops
    assert r.occupancy.blocks_per_sm == 1 and r.predicted_s > r.flops / r.compute_ceiling_flops_per_s
    assert tiledsl.predict(op, s, "H200") == r.predicted_s
    fma = tiledsl.explain(tiledsl.GemmOp(4096, 4096, 4096), tiledsl.GemmSchedule(), device="H200")
    assert fma.compute_unit == "peak FP32 FMA rate"


# ---- the GEMV-style kernel (kernel='gemv', tiledsl/gemm/emit_gemv.py): no shared memory ----
GEMV_OP = tiledsl.GemmOp(1, 4096, 4096)


@pytest.mark.parametrize("op", [GEMV_OP, tiledsl.GemmOp(1, 4096, 4096, layout_b="col"),
                                tiledsl.GemmOp(16, 4096, 4096), tiledsl.GemmOp(16, 4096, 4096, layout_b="col"),
                                tiledsl.GemmOp(16, 1024, 4096, layout_b="col"), tiledsl.GemmOp(4096, 4096, 4096)],
                         ids=["gemv_row_b", "gemv_col_b", "gemv_16_rows_smem_a", "gemv_16_rows_col_b",
                              "gemv_16_rows_col_b_smem_a", "tiled"])
def test_shared_memory_level_exists_exactly_when_the_emitted_kernel_has_shared_memory(op):
    """The GEMV kernel keeps rows of A and vectors of B in registers and sums a warp's partial dot products
    with shuffles: no ``__shared__`` array, no barrier, so no shared-memory level, bytes, wavefronts or
    shared-memory cycles (the model used to price its unused rm×rn knobs as tile fragment reads: 143 MB
    requested, 671 MB of wavefronts for 1×4096×4096). The tiled kernel keeps its level, and so does the GEMV kernel
    with A staged in shared memory (``smem_a``, sixteen rows of x @ W): bm·K·4 bytes written per block of columns,
    bm elements read per thread and k."""
    from tiledsl.gemm.family import gemv_schedule, runs_gemv

    s = gemv_schedule(op, H200) if runs_gemv(op) else tiledsl.api.family("gemm").default_schedule(op, H200)  # FMA
    src = tiledsl.api.family("gemm").emit(op, s).source
    has_smem = "__shared__" in src
    assert has_smem == (s.kernel == "tiled" or s.smem_a) == cg.uses_shared_memory(s.kernel, s.smem_a)
    assert has_smem == ("__syncthreads" in src)
    r = tiledsl.explain(op, s, device="H200")
    assert list(r.levels) == (["hbm", "l2", "smem", "registers"] if has_smem else ["hbm", "l2", "registers"])
    assert set(r.to_dict()["levels"]) == set(r.levels)
    assert any(k.startswith("smem") for k in r.expr) == has_smem
    assert any(k.startswith("smem") for k in cg.traffic(op, s)) == has_smem
    assert any(line.startswith("smem ") for line in str(r).splitlines()) == has_smem
    g = cg.gemm_times(op, s, H200)
    assert (g.smem_moved_bytes > 0) == has_smem and (g.smem_cycles_per_step > 0) == has_smem
    if s.smem_a and op.layout_b == "row":  # 16 × 4096 × 4096, 8 blocks of 512 columns: A written once per block,
        tr = cg.traffic(op, s, exact=True)  # 16 floats read per thread and k
        assert tr["smem_write"] == 8 * 4096 * 16 * 4 and tr["smem_read"] == 8 * 128 * 4096 * 16 * 4
    if op.layout_b == "col" and op.n == 1024:  # 16 × 1024 × 4096 stages A (gemv_staged_a_column_b): 64 blocks of 4
        tr = cg.traffic(op, s, exact=True)  # warps × 4 columns, A written once per block, 16 floats read per warp and k
        assert s.smem_a and s.bn == 128 and s.rn == 4
        assert tr["smem_write"] == 64 * 4096 * 16 * 4 and tr["smem_read"] == 64 * 4 * 4096 * 16 * 4
        assert tr["l2"] == 64 * 4096 * 16 * 4 + 4096 * 1024 * 4 + 16 * 1024 * 4  # A per block, B once, C
    if not has_smem:
        assert r.bound_by != "smem"
        step = cg._per_step(op, s)
        assert step["lds"] == step["sts"] == step["wf_lds"] == step["wf_sts"] == 0
    assert predict(op, s, "H200") == pytest.approx(r.predicted_s)


def test_gemv_1x4096x4096_is_hbm_bound_by_hand():
    """schedule=None picks the GEMV kernel, 32 K slices (gemv_split: 4·132 blocks / 8 column blocks, capped at 64;
    then gemv_register_waves: ptxas's 180 registers fit two blocks per SM, 264 slots, and 32 slices fill one wave of
    them at 0.97 as 64 filled two).
    HBM: (1·4096 + 4096·4096)·4 + 1·4096·4 = 67 141 632 B; the split-K workspace adds 2·32·1·4096·4
    = 1 048 576 B at HBM rate. L2 → SM: 32 column tiles · 512 K steps · 8 · (1 + 128) · 4 + 4096·4
    = 67 649 536 B. Before the fix the phantom shared-memory wavefronts bound it (27.5 µs, bound by smem)."""
    r = tiledsl.explain(GEMV_OP, device="H200")
    assert (r.schedule.kernel, r.schedule.split_k) == ("gemv", 32)
    assert r.levels["hbm"].bytes == 67_141_632 and r.levels["l2"].bytes == 67_649_536
    assert r.bound_by == "hbm"
    # time (tiledsl.costmodel.gemv): 168 registers (40 estimated + 8 unrolled iterations × 16 elements of B; ptxas
    # allocates 180) give 3 blocks of 128 threads per SM, 396 slots: all 256 blocks run in the first wave and keep
    # 256·128·8·64 B = 16.8 MB in flight / 3.5 µs = 4.8 TB/s > HBM, so B streams at HBM rate
    stream = 67_141_632 / 4.22e12
    assert r.predicted_s == pytest.approx(stream + 2 * 32 * 4096 * 4 / 4.22e12 + 2 * 3e-6, rel=1e-12)
    # measured 27.9 µs with these 32 slices, 28.4 µs with 64 (benchmarks/results/gemv_waves_h200.json): the model
    # is 21 % optimistic here (its launches and latency, not its bytes)
    assert r.terms["gemv_resident_blocks"] == 256 and r.terms["gemv_inflight_bytes"] == 256 * 128 * 8 * 64
    assert "no shared memory" in str(r) and "hbm-bound" in str(r)


def test_staged_a_is_priced_with_its_own_latency():
    """smem_a kernels keep their ring of loads of B full: the streaming model prices them at
    GEMV_SMEM_A_EFFECTIVE_LATENCY_S, below the register kernels' GEMV_EFFECTIVE_LATENCY_S, and so ranks the staged
    pick of 16×14336×4096 ahead of A in registers, as measured (91.7 against 129.6 µs, gemv_smem_a_h200_run2.json)."""
    from tiledsl.costmodel import gemv as gv
    from tiledsl.gemm.family import gemv_base_schedule, gemv_schedule

    assert gv.GEMV_SMEM_A_EFFECTIVE_LATENCY_S < gv.GEMV_EFFECTIVE_LATENCY_S
    op = tiledsl.GemmOp(16, 14336, 4096)
    staged, registers = gemv_schedule(op, H200), gemv_base_schedule(op, H200)  # the FMA GEMV picks
    assert staged.smem_a and not registers.smem_a
    assert predict(op, staged, "H200") < predict(op, registers, "H200")
    t_fast = gv.gemv_time(op, staged, H200, 4.2e12).stream_s
    shipped = gv.GEMV_SMEM_A_EFFECTIVE_LATENCY_S
    try:  # the same schedule at the register kernels' latency: slower
        gv.GEMV_SMEM_A_EFFECTIVE_LATENCY_S = gv.GEMV_EFFECTIVE_LATENCY_S
        assert gv.gemv_time(op, staged, H200, 4.2e12).stream_s > t_fast
    finally:
        gv.GEMV_SMEM_A_EFFECTIVE_LATENCY_S = shipped


@pytest.mark.parametrize("bm,rn,unroll", [(1, 1, 2), (2, 4, 2), (4, 4, 1), (8, 4, 2), (8, 1, 4), (16, 2, 1),
                                            (16, 4, 2)])
def test_column_b_register_estimate_tracks_ptxas(bm, rn, unroll):
    """The column-major-B kernel with A in registers: ``column_b_registers`` (fitted to ptxas, COLUMN_B_REGISTERS)
    within 20 % (8 registers for small kernels) of what NVRTC's ptxas allocates here (the old estimate, 132 at 16 rows × 4 columns × unroll 2, was
    half of ptxas's 250; these schedules are among the fit's), and the model's occupancy reads it when no kernel is
    compiled."""
    from dataclasses import replace

    from tiledsl.costmodel import gemv as gv
    from tiledsl.gemm.family import gemv_base_schedule

    op = tiledsl.GemmOp(bm, 22016, 4096, layout_b="col")
    s = replace(gemv_base_schedule(op, H200), bm=bm, rn=rn, unroll=unroll, smem_a=False, split_k=1,
                split_k_fused=False)
    ptxas = tiledsl.compile(op, s, arch="sm_90").registers
    est = gv.column_b_registers(bm, rn, s.vec, unroll)
    assert abs(est - min(ptxas, 255)) <= max(8, 0.2 * ptxas), (est, ptxas)  # small kernels: 8 registers
    blocks = gv.gemv_time(op, s, H200, 4.2e12).occupancy.blocks_per_sm
    assert blocks == occupancy(H200, s.bn, est, 0, "estimate").blocks_per_sm


def test_column_b_model_agrees_with_run_7():
    """Absolute times of x @ W.T, a regression pin (GEMV_COLUMN_B_EFFECTIVE_LATENCY_S was chosen on these very
    products, so this is no validation): over run 7's 72 products of 1–16 rows and at least 64 MiB
    (benchmarks/results/gemv_hbm_h200_run7.json, GPU alone, H200 2026-12-04), schedule=None's picks priced with the
    estimated registers are within 1.3× of the measured time on at least 75 % and on the geomean within 10 % (0.98 as
    fitted; the shared 3.5 µs and the old register estimate gave 0.57, 14 % within 1.3×)."""
    import math
    from pathlib import Path

    from search.families import gemm_op
    from tiledsl.gemm.family import gemv_schedule

    rows = json.loads((Path(__file__).resolve().parents[1] / "benchmarks/results/gemv_hbm_h200_run7.json")
                      .read_text())["rows"]
    ratios = []
    for r in rows:
        if "kind" in r or r["layout"] != "NT" or r["mib"] < 64:
            continue
        op = gemm_op(r["m"], r["n"], r["k"], "float32", "NT")
        s = gemv_schedule(op, H200)  # the FMA GEMV pick (schedule=None's then; 9-16 rows now take the FP64 kernel)
        ratios.append(r["gpu_ms"] * 1e-3 / predict(op, s, "H200"))
    assert len(ratios) == 72
    geomean = math.exp(sum(map(math.log, ratios)) / len(ratios))
    assert 0.9 <= geomean <= 1.1, geomean
    assert sum(1 / 1.3 <= x <= 1.3 for x in ratios) >= 0.75 * len(ratios)


def test_gemv_model_ranks_what_the_sweeps_measured():
    """Facts of the H200 sweeps (benchmarks/results/gemv_unroll_h200_run2.json, gemv_fused_nn_nobranch_h200.json):
    8 K steps in flight beat 1 (1×4096×4096: 0.82 against 0.77 of cuBLAS); a row-major B's 16 rows × 66 slices summed
    by one block are slower than the split-K kernel (16×4096×14336)."""
    from dataclasses import replace

    op = tiledsl.GemmOp(1, 4096, 4096)
    s = tiledsl.api.family("gemm").default_schedule(op, H200)
    assert predict(op, replace(s, unroll=8), "H200") < predict(op, replace(s, unroll=1), "H200")
    wide = tiledsl.GemmOp(16, 4096, 14336)
    two = tiledsl.GemmSchedule(kernel="gemv", bm=16, bn=128, split_k=66, unroll=8)
    assert predict(wide, replace(two, split_k_fused=True), "H200") > predict(wide, two, "H200")

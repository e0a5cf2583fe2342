"""Search space: rule pruning names the rule, round trips, seeds, report helpers (CPU only)."""

from __future__ import annotations

import dataclasses

import pytest

import tiledsl
from search.report import pick_winner, spearman
from search.space import GEMM_SPACE, Rejection, describe, schedule_key

H200 = tiledsl.Target.known("H200")


def _params(**over) -> dict:
    p = {"bm_log2": 7, "bm_three_quarters": 0,
         "bn_log2": 7, "bk_log2": 4, "rm_log2": 3, "rn_log2": 3, "lanes_n_log2": 3, "vec_log2": 2,
         "stages": 2, "unroll_log2": 3, "smem_pad": 0, "swizzle_log2": 3, "min_blocks": 1,
         "split_k_log2": 0, "fragment_prefetch": 0, "stream_k": 0}
    p.update(over)
    return p


def test_valid_point_builds_and_round_trips():
    s = GEMM_SPACE.build(_params(), H200)
    assert isinstance(s, tiledsl.GemmSchedule)
    assert (s.bm, s.bn, s.bk, s.rm, s.rn, s.wm, s.wn) == (128, 128, 16, 8, 8, 32, 64)
    assert GEMM_SPACE.from_schedule(s) == _params()


@pytest.mark.parametrize("over, rule", [
    ({"bm_log2": 8, "bn_log2": 8, "rm_log2": 0, "rn_log2": 0}, "threads_at_most_1024"),  # 65536 threads
    ({"unroll_log2": 5}, "unroll_divides_bk"),                                            # unroll 32 > bk 16
    ({"rm_log2": 4, "rn_log2": 4}, "accumulators_fit_registers"),                         # 256 accumulators
    ({"lanes_n_log2": 5, "bn_log2": 7, "rn_log2": 3}, "warp_tile_divides_block"),         # wn = 256 > bn
    ({"split_k_log2": 1, "stream_k": 1}, "stream_k_on_fma_tiles"),                        # split-K and stream-K
])
def test_rule_violation_is_rejected_with_the_rules_name(over, rule):
    got = GEMM_SPACE.build(_params(**over), H200)
    assert isinstance(got, Rejection)
    assert got.rule == rule
    assert f"(rule {rule})" in got.message
    assert rule in {r.name for r in tiledsl.GEMM_RULES}


def test_three_quarter_rows_round_trip():
    """bm = 48 (rows fitted to M = 35, the short-wide rule's preset) is a point of the space: bm_log2 6 with
    bm_three_quarters 1; so is 96; the preset seeds the search."""
    s = GEMM_SPACE.build(_params(bm_log2=6, bm_three_quarters=1, rm_log2=2, lanes_n_log2=3), H200)
    assert isinstance(s, tiledsl.GemmSchedule) and s.bm == 48 and s.threads == 192
    assert GEMM_SPACE.from_schedule(s) == _params(bm_log2=6, bm_three_quarters=1, rm_log2=2, lanes_n_log2=3)
    assert GEMM_SPACE.build(_params(bm_log2=7, bm_three_quarters=1), H200).bm == 96
    fitted = tiledsl.preset("gemm", "wide_48x128_4x8_stream_k")
    seeds = GEMM_SPACE.seeds(tiledsl.GemmOp(35, 8457, 2560, layout_a="col", layout_b="col"), H200)
    assert any(schedule_key(x) == schedule_key(fitted) for x in seeds)


def test_device_rule_uses_the_target():
    tiny = dataclasses.replace(H200, smem_per_block_optin_bytes=16 * 1024)
    got = GEMM_SPACE.build(_params(), tiny)  # 2 stages · 16 · 256 · 4 B = 32 KiB > 16 KiB
    assert isinstance(got, Rejection) and got.rule == "smem_within_device"
    assert isinstance(GEMM_SPACE.build(_params(), H200), tiledsl.GemmSchedule)


def test_seeds_are_valid_and_representable():
    seeds = GEMM_SPACE.seeds(tiledsl.GemmOp(1024, 1024, 1024), H200)
    assert len(seeds) > 20
    assert len({schedule_key(s) for s in seeds}) == len(seeds)
    for s in seeds[:50]:
        p = GEMM_SPACE.from_schedule(s)
        assert p is not None
        assert schedule_key(GEMM_SPACE.build(p, H200)) == schedule_key(s)


def test_grid_covers_every_knob():
    g = GEMM_SPACE.grid()
    assert set(g) == {k.name for k in GEMM_SPACE.knobs}
    assert GEMM_SPACE.size() == pytest.approx(eval("*".join(str(len(v)) for v in g.values())))


def test_spearman_known_values():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # ranks x = 1,2,3,4; y = 2,1,4,3: d² = 1+1+1+1 = 4; ρ = 1 − 6·4 / (4·15) = 0.6
    assert spearman([1, 2, 3, 4], [2, 1, 4, 3]) == pytest.approx(0.6)
    assert spearman([1, 2], [1, 2]) is None


def test_tie_break_is_deterministic():
    a = {"number": 7, "median_s": 1.000, "spread": 0.02}
    b = {"number": 3, "median_s": 1.005, "spread": 0.01}   # within 2 %: a tie, lower trial number wins
    c = {"number": 1, "median_s": 1.10, "spread": 0.01}    # clearly slower
    for order in ([a, b, c], [c, b, a], [b, c, a]):
        winner, tied = pick_winner(order)
        assert winner["number"] == 3
        assert {t["number"] for t in tied} == {3, 7}
    winner, _ = pick_winner([{"number": 9, "median_s": 1.0, "spread": 0.0}, {"number": 2, "median_s": 1.2, "spread": 0}])
    assert winner["number"] == 9


# ---- the GEMV-style kernel's space: few rows of C ----


@pytest.mark.parametrize("op,rows_log2,rn_pinned", [
    (tiledsl.GemmOp(1, 4096, 4096), 0, True),                     # decode x @ W
    (tiledsl.GemmOp(5, 1000, 999), 3, True),                      # five float32 rows: blocks of 8
    (tiledsl.GemmOp(16, 4096, 4096), 4, True),
    (tiledsl.GemmOp(1, 768, 768, layout_b="col"), 0, False),      # torch's Linear: rn (columns per warp) searched
    (tiledsl.GemmOp(4, 4096, 4096, layout_b="col"), 2, False),    # ... with a few tokens (GEMV_COLUMN_B_ROWS)
    (tiledsl.GemmOp(16, 1024, 4096, layout_b="col"), 4, False),   # ... A staged (gemv_staged_a_column_b)
    (tiledsl.GemmOp(16, 50257, 768, align_b=1, align_c=1), 4, True),  # odd N: groups of columns (col_groups); on
    # an H200 the FP64 kernel, W read 4 bytes at a time
    (tiledsl.GemmOp(1, 4096, 4096, dtype="float16", align_a=8, align_b=8, align_c=8), 0, True),
    (tiledsl.GemmOp(3, 4096, 4096, precision="tf32"), 2, True),    # tf32 few rows: the exact GEMV kernel too
])
def test_few_rows_search_the_gemv_kernel_the_default_runs(op, rows_log2, rn_pinned):
    """Where schedule=None runs the GEMV-style kernel, the tuner searches that kernel's knobs (block width, load
    width, unroll, columns per warp, K slices, how they are summed) with the rows pinned to the op's, and the
    library default is a point of the space (so a tune measures it first); where schedule=None takes the FP64
    tensor-core GEMV kernel on the device (gemv_dmma_default: 16 rows of these on an H200), a tune searches that
    kernel's space (tune_space), of which the default is a point, and on an A100 the FMA GEMV space."""
    from search.space import tune_space
    from search.strategy import library_default
    from tiledsl.gemm.family import builtin_schedule, gemv_dmma_default, gemv_schedule

    target = tiledsl.Target.known("H200")
    space = GEMM_SPACE.for_op(op)
    pinned = {k.name: k.low for k in space.knobs if k.low == k.high}
    assert pinned.get("rows_log2") == rows_log2 and ("rn_log2" in pinned) == rn_pinned
    assert ("col_groups_log2" in pinned) == (op.layout_b == "col")  # groups of columns: a row-major B only
    if gemv_dmma_default(op, target) is not None:
        dmma = tune_space("gemm", op, target)
        assert "ring" in {k.name for k in dmma.knobs} and builtin_schedule(op, target).mma == "dmma"
        assert library_default(dmma, op, target) == builtin_schedule(op, target)
        seeds = dmma.seeds(op, target)  # each a point; W read as the default reads it (odd N: 4 bytes at a time)
        for s in seeds:
            assert dmma.build(dmma.from_schedule(s), target, op) == s and s.vec == builtin_schedule(op, target).vec
        if op.align_b != 4:  # the forms an aligned twin of the op seeds, none dropped for its 4-byte reads of W
            twin = dataclasses.replace(op, n=op.n // 4 * 4, align_b=4, align_c=4)
            assert {(s.rn, s.unroll, s.fragment_prefetch, s.split_k_fused) for s in seeds} == {
                (s.rn, s.unroll, s.fragment_prefetch, s.split_k_fused) for s in tune_space("gemm", twin, target).seeds(
                    twin, target)}
        assert library_default(space, op, target) is None  # the FMA space cannot express it
        a100 = tiledsl.Target.known("A100")
        assert tune_space("gemm", op, a100).knobs == space.knobs and builtin_schedule(op, a100).mma == "fma"
        fma = gemv_schedule(op, target)  # the FMA GEMV pick is a point of the FMA space
        assert space.build(space.from_schedule(fma), target, op) == fma
        target = a100  # the FMA space's checks below where schedule=None runs it
    assert tune_space("gemm", op, target).knobs == space.knobs
    default = builtin_schedule(op, target)
    assert default.kernel == "gemv" and library_default(space, op, target) == default
    seeds = space.seeds(op, target)
    assert seeds[0] == default and all(s.kernel == "gemv" for s in seeds)
    assert any(s.split_k_fused for s in seeds) and any(s.split_k > 1 and not s.split_k_fused for s in seeds)
    # seeds with 2 or 4 groups at B's load width where the accumulators fit (bm·groups·vec ≤ 64)
    assert any(s.col_groups > 1 for s in seeds) == (op.layout_b == "row" and default.bm * 2 * min(4, op.align_b) <= 64)
    # A staged in shared memory seeded for 4-16 rows of either layout, A in registers beside it
    assert any(s.smem_a for s in seeds) == (default.bm >= 4), op
    assert any(not s.smem_a for s in seeds)
    for s in seeds:
        assert space.build(space.from_schedule(s), target, op) == s  # every seed round-trips through its point
    fused_alone = space.build({**space.from_schedule(default), "split_k": 1, "split_k_fused": 1}, target, op)
    assert isinstance(fused_alone, Rejection) and fused_alone.rule == "split_k_fused_on_gemv"
    (split,) = [k for k in space.knobs if k.name == "split_k"]
    assert split.high == min(512, -(-op.k // 8))  # no K slice shorter than one BK step


@pytest.mark.parametrize("op,twelve,spare", [
    (tiledsl.GemmOp(12, 14336, 4096), True, True),                 # 9-12 rows: 12 or 16 rows per block
    (tiledsl.GemmOp(9, 4096, 4096, layout_b="col"), True, True),   # ... of either layout; W.T's ring (k_lanes)
    (tiledsl.GemmOp(16, 4096, 4096), False, True),                 # 16: the spare slot of staged A's ring
    (tiledsl.GemmOp(8, 4096, 4096), False, True),
    (tiledsl.GemmOp(2, 4096, 4096), False, False),                 # < 4 rows: A never staged, no ring
])
def test_gemv_space_searches_twelve_rows_and_the_spare_slot(op, twelve, spare):
    """``rows_three_quarters`` (12 rows per block in place of 16) is free for 9-12 rows only, ``spare_slot`` (a ring
    of unroll + 1 loads of B) from 4 rows, ``k_lanes_log2`` (lanes along K per group) with a column-major B from 4
    rows; the seeds hold them, each round-tripping through its point, and a point with the spare slot but A in
    registers builds the schedule without it (one kernel), a point with k_lanes and A staged but no ring with 32 lanes;
    x @ W.T's pick with A in registers is seeded with its registers capped (``min_blocks`` 3 and 4), with the ring's
    lanes in groups of 8 and with A in registers and its lanes in groups of 8 (``gemv_lanes_column_b``), and
    ``min_blocks`` 0 is the schedule's own value."""
    target = tiledsl.Target.known("H200")
    space = GEMM_SPACE.for_op(op)
    free = {k.name for k in space.knobs if k.low < k.high}
    assert ("rows_three_quarters" in free) == twelve and ("spare_slot" in free) == spare, free
    lanes = spare and op.layout_b == "col"
    assert ("k_lanes_log2" in free) == lanes, free
    seeds = space.seeds(op, target)
    assert any(s.bm == 12 for s in seeds) == twelve and any(s.spare_slot for s in seeds) == spare
    assert any(s.k_lanes == 8 for s in seeds) == lanes
    assert any(s.k_lanes == 8 and not s.smem_a for s in seeds) == (lanes and op.m >= 8)
    if lanes:  # the ring's seeds hold at most 512 threads per SM in registers (128 each, or 168 at 3 x 128)
        assert all(s.min_blocks * s.bn <= 512 for s in seeds if s.spare_slot), [describe(s) for s in seeds]
        ring = next(s for s in seeds if s.k_lanes == 8)
        assert space.build({**space.from_schedule(ring), "spare_slot": 0}, target, op).k_lanes == 32
    for s in seeds:
        assert space.build(space.from_schedule(s), target, op) == s
    if spare:
        staged = next(s for s in seeds if s.smem_a)
        point = {**space.from_schedule(staged), "smem_a": 0, "spare_slot": 1}
        assert not space.build(point, target, op).spare_slot
    # x @ W.T with A in registers (250 of them at 16 rows, 8 warps per SM): the pick capped at 168 and 128 registers
    capped = {(s.unroll, s.min_blocks) for s in seeds if not s.smem_a and s.bm == seeds[0].bm}
    assert ({(seeds[0].unroll, 3), (1, 4)} <= capped) == (op.layout_b == "col" and not seeds[0].smem_a), capped
    auto = space.from_schedule(seeds[0])["min_blocks"]
    assert auto == 0 and space.build({**space.from_schedule(seeds[0]), "min_blocks": 3}, target, op).min_blocks == 3


def test_gemv_vec_above_the_alignment_of_b_is_one_kernel():
    """B is read min(vec, align_b) wide: for an odd N every vec is the same kernel, one key (no re-measuring)."""
    op = tiledsl.GemmOp(1, 4095, 4095, align_a=1, align_b=1, align_c=1)  # what tiledsl.gemm sees for N = 4095
    space = GEMM_SPACE.for_op(op)
    t = tiledsl.Target.known("H200")
    keys = {schedule_key(space.build({**space.from_schedule(space.seeds(op, t)[0]), "vec_log2": v}, t, op))
            for v in (0, 1, 2)}
    assert len(keys) == 1


def test_more_rows_keep_the_tiled_space():
    t = tiledsl.Target.known("H200")
    for op in (tiledsl.GemmOp(17, 4096, 4096), tiledsl.GemmOp(17, 4096, 4096, layout_b="col"),
               tiledsl.GemmOp(2, 4096, 4096, dtype="float16", align_a=8, align_b=8, align_c=8)):
        space = GEMM_SPACE.for_op(op)
        assert all(k.name != "split_k_fused" for k in space.knobs), op
        assert all(s.kernel == "tiled" for s in space.seeds(op, t)[:20]), op


def test_schedule_to_dict_is_asdict_for_every_schedule_type():
    """``ScheduleRecord.to_dict`` is a shallow copy (the tuner's hot path): right only while every field of every
    schedule type is a scalar, which this pins, and equal to ``dataclasses.asdict`` on each family's default."""
    from tiledsl.spec import ScheduleRecord

    kinds = {tiledsl.GemmSchedule, tiledsl.ReduceSchedule, tiledsl.TransposeSchedule}
    assert set(ScheduleRecord.__subclasses__()) == kinds
    for kind in kinds:
        assert {f.type for f in dataclasses.fields(kind)} <= {"int", "bool", "str", "float"}, kind
        s = kind()
        assert s.to_dict() == dataclasses.asdict(s) and s.to_dict() is not s.to_dict()

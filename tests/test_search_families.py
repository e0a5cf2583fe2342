"""search.tune for the reduce and transpose families on the CPU: spaces prune by rule, --model-only end
to end on a temporary SQLite study, resume, export (kernel.cu compiles with NVRTC), the stored-schedule
look-up of ``default_schedule``, the benches' tolerances and vendor calls."""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import pytest

import tiledsl
from search import families
from search.measure import ReduceBench, TransposeBench, make_bench
from search.space import REDUCE_SPACE, TRANSPOSE_SPACE, Rejection, schedule_key, space_for
from tiledsl import registry
from tiledsl.reduce import COMBINES, REDUCE_RULES, STRATEGIES, ReduceOp, ReduceSchedule
from tiledsl.transpose import TRANSPOSE_RULES, TransposeOp, TransposeSchedule

optuna = pytest.importorskip("optuna")
from optuna.trial import TrialState  # noqa: E402

from search import tune  # noqa: E402

H200 = tiledsl.Target.known("H200")
ROW = ReduceOp(shape=(4096, 8192), op="sum", axis=1)        # contiguous rows
COL = ReduceOp(shape=(8192, 4096), op="sum", axis=0)        # strided (column) reduction
FULL = ReduceOp(shape=(1 << 24,), op="max")                  # everything into one value
T2 = TransposeOp(shape=(4096, 2048))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("TILEDSL_CACHE_DIR", str(d))
    return d


def _reduce_params(**over) -> dict:
    p = {"strategy": 5, "block_log2": 8, "vec_log2": 2, "items_log2": 2, "grid_log2": 0, "combine": 0,
         "row_threads_code": 0, "col_rows_code": 0}
    p.update(over)
    return p


def _transpose_params(**over) -> dict:
    p = {"variant": 0, "tile_log2": 6, "rows_per_thread_log2": 2, "vec_log2": 2, "smem_pad": 1, "swizzle_log2": 3}
    p.update(over)
    return p


# ---------------------------------------------------------------- spaces


def test_knob_tables_match_tiledsl():
    from search import space
    from tiledsl.transpose.schedule import VARIANTS

    assert space._REDUCE_STRATEGIES == STRATEGIES and space._REDUCE_COMBINES == COMBINES
    assert space._TRANSPOSE_VARIANTS == VARIANTS
    assert set(families.SEARCH_FAMILIES) == {f.name for f in tiledsl.api.FAMILIES}


def test_reduce_point_builds_and_round_trips():
    s = REDUCE_SPACE.build(_reduce_params(), H200, ROW)
    assert s == ReduceSchedule(block=256, vec=4, items_per_thread=4, strategy="warp_shuffle")
    assert REDUCE_SPACE.from_schedule(s) == _reduce_params()
    s = REDUCE_SPACE.build(_reduce_params(grid_log2=3, combine=1, row_threads_code=7), H200, ROW)
    assert (s.grid, s.combine, s.row_threads) == (1024, "atomic", 256)  # grid 2^(3+7), row_threads = block


@pytest.mark.parametrize("op, over, rule", [
    (ROW, {"strategy": 0, "combine": 0}, "atomic_strategy_combines_atomically"),  # v1 needs atomics
    (ROW, {"strategy": 3, "grid_log2": 2}, "grid_needs_grid_stride"),             # v4 has no loop for a grid
    (ROW, {"strategy": 4, "row_threads_code": 5}, "sub_block_rows_use_shuffles"),  # 16 lanes per row
    (COL, {"strategy": 3}, "strided_needs_loop"),                                  # op rule: column reduction
    (COL, {"col_rows_code": 1}, "column_tile_fits_block"),                         # col_rows 1 < 4 per load
])
def test_reduce_rule_violation_is_rejected_with_the_rules_name(op, over, rule):
    got = space_for("reduce").for_op(op).build(_reduce_params(**over), H200, op)
    assert isinstance(got, Rejection), got
    assert got.rule == rule and f"(rule {rule})" in got.message
    assert rule in {r.name for r in REDUCE_RULES}


def test_reduce_op_rule_needs_the_op():
    """Without the op, the op-scope rule cannot be checked; with it, the point is rejected."""
    p = _reduce_params(strategy=3)
    assert isinstance(REDUCE_SPACE.build(p, H200), ReduceSchedule)
    assert isinstance(REDUCE_SPACE.build(p, H200, COL), Rejection)
    assert isinstance(REDUCE_SPACE.build(p, H200, ROW), ReduceSchedule)


@pytest.mark.parametrize("over, rule", [
    ({"variant": 1}, "naive_is_scalar"),                                       # naive with vec 4
    ({"variant": 2, "vec_log2": 0}, "naive_has_no_padding"),                   # naive with smem_pad 1
    ({"tile_log2": 5, "rows_per_thread_log2": 6}, "rows_per_thread_divides_tile"),  # 64 rows of a 32 tile
    ({"rows_per_thread_log2": 0, "vec_log2": 0}, "threads_at_most_1024"),      # 64·64 threads
    ({"tile_log2": 5, "vec_log2": 3, "rows_per_thread_log2": 4}, "threads_multiple_of_32"),  # 4·2 threads
])
def test_transpose_rule_violation_is_rejected_with_the_rules_name(over, rule):
    got = TRANSPOSE_SPACE.build(_transpose_params(**over), H200, T2)
    assert isinstance(got, Rejection), got
    assert got.rule == rule and f"(rule {rule})" in got.message
    assert rule in {r.name for r in TRANSPOSE_RULES}


def test_transpose_point_builds_and_round_trips():
    s = TRANSPOSE_SPACE.build(_transpose_params(), H200, T2)
    assert s == TransposeSchedule(tile=64, rows_per_thread=4, vec=4, smem_pad=1, swizzle=8)
    assert TRANSPOSE_SPACE.from_schedule(s) == _transpose_params()


def test_reduce_space_pins_knobs_the_op_cannot_use():
    knobs = lambda op: {k.name: (k.low, k.high) for k in REDUCE_SPACE.for_op(op).knobs}  # noqa: E731
    assert knobs(ROW)["col_rows_code"] == (0, 0) and knobs(ROW)["row_threads_code"] == (0, 7)
    assert knobs(COL)["row_threads_code"] == (0, 0) and knobs(COL)["col_rows_code"] == (0, 6)
    assert knobs(FULL)["row_threads_code"] == (0, 0) == knobs(FULL)["col_rows_code"]
    # a schedule using a pinned knob cannot be enqueued into that op's space
    s = ReduceSchedule(col_rows=8)
    assert REDUCE_SPACE.from_schedule(s) is not None
    assert REDUCE_SPACE.for_op(ROW).from_schedule(s) is None
    assert REDUCE_SPACE.for_op(COL).from_schedule(s) is not None


@pytest.mark.parametrize("family, op", [("reduce", ROW), ("reduce", COL), ("reduce", FULL), ("transpose", T2),
                                        ("transpose", TransposeOp(shape=(3, 1000, 3001), dtype="float16"))])
def test_seeds_are_valid_and_representable(family, op):
    space = space_for(family).for_op(op)
    seeds = space.seeds(op, H200)
    assert len(seeds) > 20
    assert len({schedule_key(s) for s in seeds}) == len(seeds)
    names = {schedule_key(s) for s in registry.presets(family).values()}
    assert names & {schedule_key(s) for s in seeds}, "the shipped presets seed the study"
    for s in seeds:
        p = space.from_schedule(s)
        assert p is not None
        assert space.build(p, H200, op) == s


def test_random_points_are_schedules_or_named_rejections():
    rng = random.Random(0)
    for family, op, rules in (("reduce", COL, REDUCE_RULES), ("transpose", T2, TRANSPOSE_RULES)):
        space = space_for(family).for_op(op)
        seen = set()
        for _ in range(300):
            got = space.build({k.name: rng.choice(k.values()) for k in space.knobs}, H200, op)
            seen.add(got.rule if isinstance(got, Rejection) else "ok")
        assert "ok" in seen and len(seen) >= 3
        assert seen - {"ok"} <= {r.name for r in rules}


# ---------------------------------------------------------------- command line


def test_cli_builds_the_ops_the_public_calls_build():
    p = tune.build_parser()
    cfg = tune.config_from_args(p.parse_args(["reduce", "--shape", "16384x16384", "--axis", "1", "--op", "sum"]), [])
    assert cfg.op == ReduceOp(shape=(16384, 16384), op="sum", axis=1, dtype="float32", align=8)
    cfg = tune.config_from_args(p.parse_args(["reduce", "--shape", "100x7x3", "--axis", "none", "--op", "mean",
                                              "--dtype", "int32"]), [])
    assert cfg.op.axis is None and cfg.op.out_dtype == "float64"
    cfg = tune.config_from_args(p.parse_args(["transpose", "--shape", "16384x16384"]), [])
    assert cfg.op == TransposeOp(shape=(16384, 16384), dtype="float32")
    assert cfg.op.align_in == cfg.op.align_out == 4
    with pytest.raises(argparse.ArgumentTypeError):
        families.parse_shape("16384xabc")
    assert families.parse_axis("-1") == -1 and families.parse_axis("all") is None


def test_study_names():
    assert tune.default_study_name("reduce", ROW, "H200", False) == "reduce-4096x8192-sum-axis1-float32-H200"
    assert tune.default_study_name("reduce", FULL, "H200", True) == "reduce-16777216-max-axisall-float32-H200-model"
    assert tune.default_study_name("transpose", T2, "H200", False) == "transpose-4096x2048-float32-H200"
    assert tune.default_study_name("gemm", tune.gemm_op(64, 32, 16), "H200", False) == "gemm-64x32x16-float32-NN-H200"


@pytest.mark.parametrize("family, opts", [("reduce", ("--shape", "--axis", "--op", "--dtype", "norm2")),
                                          ("transpose", ("--shape", "--dtype"))])
def test_help_lists_the_options(family, opts, capsys):
    with pytest.raises(SystemExit):
        tune.main([family, "--help"])
    text = capsys.readouterr().out
    for opt in (*opts, "--trials", "--timeout", "--sampler", "--seed", "--storage", "--study-name", "--export",
                "--model-only", "--device", "--lookup", "tpe", "cmaes", "qmc", "grid"):
        assert opt in text, opt


# ---------------------------------------------------------------- end to end (--model-only)


def _run(db: Path, family_args: list[str], *extra: str) -> int:
    return tune.main([*family_args, "--model-only", "--storage", f"sqlite:///{db}", "--no-progress", *extra])


def _owned_keys(trials) -> list[str]:
    return [t.user_attrs["claim"][0] for t in trials
            if t.state == TrialState.COMPLETE and "duplicate_of" not in t.user_attrs]


def _compile_exported(out: Path, rec: dict):
    """NVRTC compiles the exported kernel.cu as a whole file (the host launcher is skipped by
    ``__CUDACC_RTC__``), for sm_90."""
    from tiledsl.compile import KernelSource, compile_source

    src = (out / "kernel.cu").read_text()
    assert "tiledsl_launch" in src and "<<<grid, block, smem_bytes, stream>>>" in src
    k = compile_source(KernelSource(rec["kernel"]["name"], src, tuple(rec["kernel"]["block"])), "sm_90")
    assert k.registers > 0 and len(k.cubin) > 1000
    return src


@pytest.mark.parametrize("family_args, name, rules, kind", [
    (["reduce", "--shape", "2048x4096", "--axis", "0", "--op", "sum"], "reduce-2048x4096-sum-axis0-float32-H200-model",
     REDUCE_RULES, "reduce"),
    (["transpose", "--shape", "2048x1536", "--dtype", "float16"], "transpose-2048x1536-float16-H200-model",
     TRANSPOSE_RULES, "transpose"),
])
def test_model_only_end_to_end_then_resume(family_args, name, rules, kind, tmp_path, cache, capsys):
    db, out = tmp_path / "t.db", tmp_path / "best"
    assert _run(db, family_args, "--trials", "25", "--export", str(out), "--compile-top", "1") == 0
    text = capsys.readouterr().out
    assert f"study {name!r}" in text and "model-only on H200" in text
    assert "GB/s" in text and "not stored for schedule=None" in text
    trials = optuna.load_study(study_name=name, storage=f"sqlite:///{db}").trials
    evaluated = [t for t in trials if t.user_attrs.get("rule") in (None, "duplicate")]
    assert len(evaluated) == 25  # rule-pruned points are recorded but not counted
    complete = [t for t in trials if t.state == TrialState.COMPLETE and "duplicate_of" not in t.user_attrs]
    assert complete and all(t.value > 0 and t.user_attrs["predicted_s"] > 0 for t in complete)
    assert any(t.user_attrs.get("seeded_by_model") for t in complete)
    pruned = [t for t in trials if t.state == TrialState.PRUNED]
    names = {r.name for r in rules}
    for t in pruned:
        assert t.user_attrs["rule"] in names | {"duplicate"}, t.user_attrs
    keys = _owned_keys(trials)
    assert len(keys) == len(set(keys)), "a schedule was evaluated twice"
    rec = json.loads((out / "schedule.json").read_text())
    assert rec["mode"] == "model-only" and rec["arch"] == "sm_90" and rec["family"] == kind
    assert rec["predicted"]["predicted_s"] > 0
    op = tiledsl.api.family(kind).op_type.from_dict(rec["op"])
    assert op == tune.config_from_args(tune.build_parser().parse_args(family_args), []).op
    sched = tiledsl.api.family(kind).schedule_type.from_dict(rec["schedule"])
    src = _compile_exported(out, rec)
    grid = families.get(kind).launch_grid(op, sched, H200)
    assert f"dim3 grid({grid[0]}u, {grid[1]}u, {grid[2]}u);" in src
    assert not (cache / "tuned").exists(), "a model-only winner must not be stored"
    # resume: the same command adds trials to the same study and re-evaluates nothing
    assert _run(db, family_args, "--trials", "10", "--compile-top", "1") == 0
    assert f"{len(trials)} earlier trials (resuming)" in capsys.readouterr().out
    again = optuna.load_study(study_name=name, storage=f"sqlite:///{db}").trials
    assert len(again) > len(trials)
    keys = _owned_keys(again)
    assert len(keys) == len(set(keys)) > 0


def test_lookup_prints_the_miss_reasons(tmp_path, cache, capsys):
    assert tune.main(["reduce", "--shape", "4096x8192", "--axis", "1", "--lookup"]) == 0
    text = capsys.readouterr().out
    assert "lookup reduce sum over axis 1 of 4096x8192 float32" in text and "no records" in text
    assert "schedule=None uses" in text and "the reduce family's built-in choice" in text


@pytest.mark.parametrize("shape,rule", [(("7680", "32", "2560"), "the tall-thin rule"),
                                        (("35", "8457", "2560"), "the short-wide rule"),
                                        (("4096", "4096", "4096"), "the estimate over the presets"),
                                        (("4", "4096", "4096"), "the GEMV-style kernel")])
def test_lookup_names_the_rule_behind_the_default(shape, rule, tmp_path, cache, capsys):
    m, n, k = shape
    assert tune.main(["gemm", "--m", m, "--n", n, "--k", k, "--lookup"]) == 0
    text = capsys.readouterr().out
    assert "no stored schedule: schedule=None uses" in text and f"chosen by {rule}" in text


def test_lookup_hit_names_the_record_and_its_figures(tmp_path, cache, capsys):
    """--lookup on a stored product says which file and record hit, when and where it was tuned, what it measured,
    and that the kernel source is the one it was timed with."""
    op = families.gemm_op(4096, 4096, 4096)
    s = tiledsl.GemmSchedule(bm=128, bn=64, bk=16, rm=8, rn=4, unroll=16)
    path = registry.store("gemm", op, H200, s, measured={"median_s": 0.0025, "vendor_s": 0.0024},
                          date="2026-12-02T01:02:03Z", study="gemm-4096", trial=7)
    assert tune.main(["gemm", "--m", "4096", "--n", "4096", "--k", "4096", "--lookup"]) == 0
    text = capsys.readouterr().out
    assert (f"-> hit: 128x64x16 t8x4 w32x32 v4 db u16 p0 s8, from user store {path} record 0; tuned 2026-12-02 on "
            f"{H200.name} NVRTC {'.'.join(map(str, registry._nvrtc()))}; study 'gemm-4096' trial 7; measured 2.5 ms = "
            "0.96x the vendor library; kernel source unchanged since (SHA-256)") in text, text


def test_lookup_says_a_few_column_product_runs_as_rows(tmp_path, cache, capsys):
    from search.families import rows_instead

    assert tune.main(["gemm", "--m", "7680", "--n", "4", "--k", "2560", "--layout", "TT", "--lookup"]) == 0
    text = capsys.readouterr().out
    assert "schedule=None runs it as the rows Cᵀ = Bᵀ·Aᵀ (4x7680x2560" in text and "gemv rows 4" in text
    h200 = tiledsl.Target.known("H200")
    assert rows_instead("gemm", families.gemm_op(7680, 4, 2560, layout="TT"), h200).layout_c == "col"
    assert rows_instead("gemm", families.gemm_op(7680, 32, 2560, layout="TT"), h200) is None


def test_as_rows_tunes_the_rows_a_few_column_product_runs_as(tmp_path, cache, capsys, monkeypatch):
    """--as-rows: the op is the rows Cᵀ = Bᵀ·Aᵀ with a column-major C, exactly the op tiledsl.gemm builds for the
    product's schedule=None (transposing back gives the product, alignments included), in a study of its own; a
    product with N = 1, N ≥ M or another dtype is refused naming the flag; the search runs on the GEMV space."""
    from dataclasses import replace

    from search.families import as_rows_op, rows_unused
    from tiledsl.gemm.family import rows_op

    product = families.gemm_op(7680, 4, 2560, layout="TT")
    rows = as_rows_op(product)
    assert rows.layout_c == "col"
    assert (rows.m, rows.n, rows.k, rows.layout_a, rows.layout_b) == (4, 7680, 2560, "row", "row")
    assert replace(rows_op(rows), layout_c="row") == product
    assert families.get("gemm").study_shape(rows) == "4x7680x2560-float32-NN-ccol"  # not the row-major C op's study
    assert families.get("gemm").study_shape(replace(rows, layout_c="row")) == "4x7680x2560-float32-NN"
    assert rows_unused("gemm", rows, H200) is None
    tiled = as_rows_op(families.gemm_op(7680, 32, 2560, layout="TT"))  # 32 columns stay on the tiled kernels
    assert "does not run 7680x32x2560 float32 TT as these rows" in rows_unused("gemm", tiled, H200)
    one = as_rows_op(families.gemm_op(512, 1, 512, layout="TT"))  # N = 1: the single row, a row-major C
    assert (one.m, one.n, one.layout_c) == (1, 512, "row") and rows_unused("gemm", one, H200) is None
    for m, n, dtype, why in ((4, 4, "float32", "N=4 must be below M=4"), (7680, 4, "float16", "--dtype float16")):
        with pytest.raises(ValueError, match=f"--as-rows: .*{why}"):
            as_rows_op(families.gemm_op(m, n, 2560, dtype=dtype, layout="TT"))
    monkeypatch.chdir(tmp_path)
    assert tune.main(["gemm", "--m", "7680", "--n", "4", "--k", "2560", "--layout", "TT", "--as-rows",
                      "--model-only", "--trials", "6", "--no-progress", "--export", str(tmp_path / "x")]) == 0
    text = capsys.readouterr().out
    assert "4x7680x2560 float32 NN, C column-major" in text and "gemv rows 4" in text
    with pytest.raises(SystemExit):
        tune.main(["gemm", "--m", "4", "--n", "4", "--k", "64", "--as-rows", "--model-only"])
    assert "--as-rows: N=4 must be below M=4" in capsys.readouterr().err
    assert tune.main(["gemm", "--m", "7680", "--n", "32", "--k", "2560", "--layout", "TT", "--as-rows", "--model-only",
                      "--trials", "3", "--no-progress", "--export", str(tmp_path / "y")]) == 0
    assert "warning: schedule=None does not run 7680x32x2560 float32 TT as these rows" in capsys.readouterr().out
    assert tune.main(["gemm", "--m", "7680", "--n", "32", "--k", "2560", "--layout", "TT", "--as-rows",
                      "--lookup"]) == 0
    assert "note: schedule=None does not run 7680x32x2560" in capsys.readouterr().out


# ---------------------------------------------------------------- default_schedule uses the store


def test_reduce_default_schedule_uses_a_stored_schedule(cache):
    from tiledsl.reduce import default_schedule

    op = ReduceOp(shape=(4096, 4099), op="sum", axis=1)
    assert default_schedule(op, H200) == registry.preset("reduce", "default")
    tuned = ReduceSchedule(block=512, vec=4, items_per_thread=2, strategy="warp_shuffle", row_threads=512)
    registry.store("reduce", op, H200, tuned)
    assert default_schedule(op, H200) == tuned
    assert default_schedule(ReduceOp(shape=(4096, 4099), op="max", axis=1), H200) != tuned  # another op


def test_transpose_default_schedule_uses_a_stored_schedule(cache):
    from tiledsl.transpose import default_schedule

    op = TransposeOp(shape=(4096, 4097))
    base = default_schedule(op, H200)
    assert tiledsl.plan(op, device=H200).schedule == base  # memoized per (op, device) in a process
    tuned = TransposeSchedule(tile=32, rows_per_thread=8, vec=1, smem_pad=1, swizzle=4)
    assert base != tuned
    registry.store("transpose", op, H200, tuned)
    assert default_schedule(op, H200) == tuned
    assert tiledsl.plan(op, device=H200).schedule == tuned  # the store forgot the memoized choice


# ---------------------------------------------------------------- benches and launcher notes


def test_benches_per_family():
    assert isinstance(make_bench("reduce", ROW), ReduceBench)
    assert isinstance(make_bench("transpose", T2), TransposeBench)
    assert make_bench("reduce", ROW).vendor_name == "cupy.sum(x, axis=1) -> CUB"
    assert make_bench("transpose", T2).vendor_name == "cupy.ascontiguousarray(x.T)"
    assert tune.vendor_name("gemm", tune.gemm_op(64, 64, 64)) == "cupy.matmul -> cuBLAS"


def test_reduce_tolerances():
    eps32 = 2.0 ** -23
    # float32 sum of rows of 16384: eps32 (output) + eps32 · (4·√16384 + 16) = eps32 · 529
    assert ReduceBench(ReduceOp(shape=(2, 16384), op="sum", axis=1)).tolerance() == pytest.approx(eps32 * 529)
    # float16 in and out, float32 accumulation over 64: 2^-10 + eps32 · (4·8 + 16)
    got = ReduceBench(ReduceOp(shape=(64,), op="mean", dtype="float16")).tolerance()
    assert got == pytest.approx(2.0 ** -10 + eps32 * 48)
    assert ReduceBench(ReduceOp(shape=(8, 8), op="max", axis=0)).tolerance() == 0.0       # selects an element
    assert ReduceBench(ReduceOp(shape=(8, 8), op="sum", dtype="int32")).tolerance() == 0.0  # exact int64
    assert TransposeBench(T2).tolerance() == 0.0


def test_reduce_launch_notes_name_the_scratch_buffers():
    s = ReduceSchedule(block=256, vec=4, items_per_thread=4, strategy="warp_shuffle")
    notes = families.get("reduce").launch_notes(FULL, s, H200)
    from tiledsl.reduce.emit import plan as reduce_plan

    plan = reduce_plan(FULL, s, H200.sm_count, H200.max_threads_per_sm)
    assert plan.split > 1 and plan.tickets == 1
    assert f"split={plan.split}" in notes[0] and f"partials: {plan.partials} elements of float32" in notes[1]
    assert "tickets: 1 unsigned ints, zeroed once before the first launch" in notes[2]
    assert families.get("reduce").launch_grid(FULL, s, H200) == (plan.grid, 1, 1)

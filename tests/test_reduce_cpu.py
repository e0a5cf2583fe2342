"""Reductions on the CPU: rule table, schedule round-trip, numpy result rules, launch plan, emitted source,
and every preset / dtype / op / mapping compiled with NVRTC for sm_80 and sm_90 with zero spills."""

from __future__ import annotations

import pickle
import warnings
from pathlib import Path

import numpy as np
import pytest

import tiledsl
from tiledsl import rules as R
from tiledsl.reduce import OPS, REDUCE_DTYPES, REDUCE_RULES, STRATEGIES, ReduceOp, ReduceSchedule, emit_reduce
from tiledsl.reduce.emit import column_threads, group_threads, plan, vec_width
from tiledsl.target import Target

# One failing case per rule: (rule name, schedule kwargs, op or None)
STRIDED = ReduceOp(shape=(64, 300), op="sum", axis=0, dtype="float32")
FAILING = [
    ("block_power_of_two", dict(block=96), None),
    ("vec_width", dict(vec=3), None),
    ("items_per_thread_range", dict(items_per_thread=0), None),
    ("grid_range", dict(grid=-1), None),
    ("atomic_strategy_combines_atomically", dict(strategy="atomic", combine="two_pass"), None),
    ("grid_needs_grid_stride", dict(strategy="smem_sequential", grid=132), None),
    ("row_threads_shape", dict(row_threads=48), None),
    ("sub_block_rows_use_shuffles", dict(row_threads=32, strategy="grid_stride"), None),
    ("col_rows_divide_block", dict(col_rows=3), None),
    ("strided_needs_loop", dict(strategy="smem_sequential", combine="atomic"), STRIDED),
    ("column_tile_fits_block", dict(col_rows=2), STRIDED),
    ("loads_fit_registers", dict(block=1024, items_per_thread=16),
     ReduceOp(shape=(1000,), op="sum", dtype="float64")),
]


@pytest.mark.parametrize("rule,kwargs,op", FAILING, ids=[r for r, _, _ in FAILING])
def test_each_rule_has_a_failing_case(rule, kwargs, op):
    with pytest.raises(tiledsl.ScheduleError) as ei:
        s = ReduceSchedule(**kwargs)
        s.check_op(op)
    assert ei.value.rule == rule
    assert f"rule {rule}" in str(ei.value)
    assert isinstance(ei.value, ValueError)


def test_every_rule_has_a_failing_case():
    covered = {r for r, _, _ in FAILING} | {"block_within_device"}
    assert covered == {r.name for r in REDUCE_RULES}


def test_device_rule_is_a_resource_error():
    small = Target.known("H200").__class__(**{**Target.known("H200").to_dict(), "max_threads_per_block": 512})
    with pytest.raises(tiledsl.ResourceError) as ei:
        ReduceSchedule(block=1024).validate(small)
    assert ei.value.rule == "block_within_device" and "1024" in str(ei.value) and "512" in str(ei.value)


def test_error_names_field_value_and_limit():
    with pytest.raises(tiledsl.ScheduleError, match=r"ReduceSchedule.items_per_thread=17 must be from 1 to 16"):
        ReduceSchedule(items_per_thread=17)
    with pytest.raises(tiledsl.ScheduleError, match=r"strategy='tree'"):
        ReduceSchedule(strategy="tree")
    with pytest.raises(tiledsl.ScheduleError, match=r"combine='maybe'"):
        ReduceSchedule(combine="maybe")
    with pytest.raises(tiledsl.ScheduleError, match=r"block=1.5 must be an integer"):
        ReduceSchedule(block=1.5)


def test_schedule_round_trip_and_pickle():
    s = ReduceSchedule(block=512, vec=4, items_per_thread=8, strategy="grid_stride", grid=264, combine="atomic")
    assert ReduceSchedule.from_dict(s.to_dict()) == s
    assert hash(s) == hash(ReduceSchedule.from_dict(s.to_dict()))
    with pytest.raises(tiledsl.ScheduleError, match="no field"):
        ReduceSchedule.from_dict({**s.to_dict(), "bm": 4})
    err = tiledsl.ScheduleError("x", "rule_a")
    assert pickle.loads(pickle.dumps(err)).rule == "rule_a"


def test_rule_markdown_lists_every_rule():
    md = R.markdown(REDUCE_RULES, "ReduceSchedule rules")
    for r in REDUCE_RULES:
        assert f"`{r.name}`" in md


def test_presets_are_the_seed_ladder():
    p = tiledsl.presets("reduce")
    ladder = [n for n in p if n.startswith("v")]
    assert [n[:2] for n in ladder] == ["v1", "v2", "v3", "v4", "v5", "v6", "v7"]
    assert [p[n].strategy for n in ladder] == [*STRATEGIES, "warp_shuffle"]
    assert p["v6_warp_shuffle"].vec == 1 and p["v7_warp_shuffle_float4"].vec == 4
    assert p["default"].combine == "two_pass"


# ---- numpy semantics that need no GPU ----
NUMPY_FN = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod,
            "norm2": lambda a: np.linalg.norm(a.ravel())}


@pytest.mark.parametrize("dtype", [d for d in REDUCE_DTYPES if d != "bfloat16"])
@pytest.mark.parametrize("op", OPS)
def test_result_dtype_follows_numpy(op, dtype):
    x = np.arange(1, 5).astype(dtype)
    assert ReduceOp(shape=(4,), op=op, dtype=dtype).out_dtype == NUMPY_FN[op](x).dtype.name


def test_bfloat16_keeps_its_dtype_and_accumulates_in_float32():
    o = ReduceOp(shape=(10,), op="sum", dtype="bfloat16")
    assert o.out_dtype == "bfloat16" and "accumulate float" in emit_reduce(o, ReduceSchedule()).source


def test_dtype_argument_like_numpy():
    assert ReduceOp((4,), "sum", dtype="int32", out_dtype="float64").out_dtype == np.sum(
        np.ones(4, np.int32), dtype=np.float64).dtype.name
    with pytest.raises(tiledsl.SpecError, match="op='max'"):
        ReduceOp((4,), "max", dtype="float32", out_dtype="float64")
    with pytest.raises(tiledsl.SpecError, match="float type"):
        ReduceOp((4,), "mean", dtype="float32", out_dtype="int32")


@pytest.mark.parametrize("shape,axis", [((3, 4, 5), 1), ((3, 4, 5), -1), ((3, 4, 5), 0), ((7,), None),
                                        ((2, 3), None), ((0, 5), 1), ((6, 1), 0)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_out_shape_and_view_follow_numpy(shape, axis, keepdims):
    o = ReduceOp(shape=shape, op="sum", axis=axis, keepdims=keepdims)
    assert o.out_shape == np.sum(np.ones(shape), axis=axis, keepdims=keepdims).shape
    outer, length, inner = o.view
    assert outer * length * inner == int(np.prod(shape)) and o.out_size == outer * inner


@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min_of_empty_axis_raise_naming_the_op(op):
    with pytest.raises(ValueError) as ei:
        ReduceOp(shape=(5, 0), op=op, axis=1)
    assert f"op={op!r}" in str(ei.value) and "no identity" in str(ei.value)
    with pytest.raises(ValueError):  # numpy raises here too
        np.max(np.ones((5, 0)), axis=1)
    assert ReduceOp(shape=(0, 5), op=op, axis=1).out_size == 0  # empty result: no error (numpy too)
    assert np.max(np.ones((0, 5)), axis=1).shape == (0,)


def test_op_errors_name_argument_value_and_limit():
    with pytest.raises(tiledsl.SpecError, match=r"axis=2 is out of range for a 2-D input \(limit: -2 ≤ axis < 2\)"):
        ReduceOp(shape=(3, 4), axis=2)
    with pytest.raises(tiledsl.SpecError, match="op='median'"):
        ReduceOp(shape=(3,), op="median")
    with pytest.raises(tiledsl.SpecError, match="dtype='uint8'"):
        ReduceOp(shape=(3,), dtype="uint8")
    with pytest.raises(tiledsl.SpecError, match=r"shape=\(3, -1\)"):
        ReduceOp(shape=(3, -1))


def test_reduce_rejects_host_arrays_without_a_gpu():
    with pytest.raises((tiledsl.SpecTypeError, TypeError)):
        tiledsl.reduce(np.ones(4, np.float32), "sum")


# ---- launch plan (arithmetic in the comments; H200: 132 SMs, 2048 threads per SM) ----
def test_plan_full_reduction_is_one_wave():
    h = Target.known("H200")
    op = ReduceOp(shape=(1 << 29,), op="sum", dtype="float32")
    p = plan(op, ReduceSchedule(), h.sm_count, h.max_threads_per_sm)
    assert p.grid == 132 * (2048 // 256) == 1056 and p.split == 1056  # one wave of 256-thread blocks
    assert p.partials == 1056 and p.tickets == 1 and not p.fill_identity
    # v4: one block per tile of 256 threads x 1 element: ceil(2^28 / 256) = 2^20 blocks, atomic accumulator
    p4 = plan(ReduceOp(shape=(1 << 28,)), tiledsl.preset("reduce", "v4_smem_sequential"), 132)
    assert p4.grid == 1 << 20 and p4.partials == 1 and p4.fill_identity


def test_plan_rows_and_columns():
    s = ReduceSchedule()
    big = ReduceOp(shape=(16384, 16384), op="sum", axis=1)
    assert group_threads(big, s) == 256 and plan(big, s, 132).grid == 16384  # a block per long row
    short = ReduceOp(shape=(2048, 768), op="sum", axis=1)
    assert group_threads(short, s) == 32  # 768 / (2 * 4) = 96 -> capped at a warp
    assert plan(short, s, 132).grid == 2048 // (256 // 32)
    few = ReduceOp(shape=(1, 128256), op="sum", axis=1)  # one long row: split across the wave
    assert plan(few, s, 132).split == min(1056, -(-128256 // (256 * 4 * 4)))
    col = ReduceOp(shape=(16384, 16384), op="sum", axis=0)
    assert vec_width(col, s) == 4 and column_threads(col, s) == (32, 8)
    pc = plan(col, s, 132)
    assert pc.col_tiles == 16384 // (32 * 4) and pc.grid == pc.col_tiles * pc.split and pc.split == 9  # 1056/128


def test_strided_vector_width_respects_inner_and_alignment():
    s = ReduceSchedule()
    assert vec_width(ReduceOp((5, 129, 7), axis=1), s) == 1      # inner = 7 is odd
    assert vec_width(ReduceOp((5, 129, 6), axis=1), s) == 2      # inner = 6
    assert vec_width(ReduceOp((64, 300), axis=0, align=2), s) == 2
    assert vec_width(ReduceOp((64, 300), axis=0, dtype="float16"), s) == 4  # 300 % 8 != 0
    assert vec_width(ReduceOp((64, 304), axis=0, dtype="float16"), s) == 8  # 16 bytes


# ---- emitted source ----
def test_emitter_is_pure_and_asserts_every_schedule_rule():
    op, s = ReduceOp((1000, 33), "max", 1, "float16"), ReduceSchedule()
    a, b = emit_reduce(op, s), emit_reduce(op, s)
    assert a == b
    for r in REDUCE_RULES:
        if r.scope == "schedule":
            assert f'"rule {r.name}"' in a.source
    assert "constexpr int BLOCK = 256;" in a.source and "tdsl_h2f" in a.source


def test_strategies_emit_the_seed_kernels():
    op = ReduceOp((1 << 20,), "sum")
    src = {n: emit_reduce(op, s).source for n, s in tiledsl.presets("reduce").items()}
    assert "atomic_combine(&partials[segment], load_acc(" in src["v1_atomic"]
    assert "tid % (2 * stride) == 0" in src["v2_smem_interleaved"]
    assert "const int idx = 2 * stride * tid;" in src["v3_smem_contiguous"]
    assert "stride = BLOCK / 2" in src["v4_smem_sequential"] and "stride = BLOCK / 2" in src["v5_grid_stride"]
    assert "__shfl_xor_sync" in src["v6_warp_shuffle"] and "__shfl_xor_sync" not in src["v5_grid_stride"]
    assert "constexpr int V = 4;" in src["v7_warp_shuffle_float4"] and "constexpr int V = 1;" in src["v6_warp_shuffle"]
    assert "partials[segment * split + part] = total;" in src["default"]  # two_pass


def test_compile_dispatches_and_checks_op_rules():
    with pytest.raises(tiledsl.ScheduleError, match="strided_needs_loop"):
        tiledsl.compile(STRIDED, tiledsl.preset("reduce", "v2_smem_interleaved"), arch="sm_90")
    with pytest.raises(tiledsl.SpecTypeError):
        tiledsl.compile(STRIDED, tiledsl.GemmSchedule(), arch="sm_90")


# ---- NVRTC: every preset x dtype, every op x dtype x mapping, sm_80 and sm_90, zero spills ----
MAPPINGS = {
    "full": ((1 << 20) + 3,), "warp_rows": (1000, 33), "block_rows": (64, 5000),
    "strided": (300, 64), "middle_axis": (5, 129, 8),
}
_AXIS = {"full": None, "warp_rows": 1, "block_rows": 1, "strided": 0, "middle_axis": 1}


def _assert_clean(k):
    assert k.spill_bytes == 0, f"{k.name} spills {k.spill_bytes} bytes"
    assert k.stack_bytes == 0, f"{k.name} uses a {k.stack_bytes}-byte stack frame"
    assert 0 < k.registers <= 255


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("preset", list(tiledsl.presets("reduce")))
def test_every_preset_and_dtype_compiles_without_spills(arch, preset):
    s = tiledsl.preset("reduce", preset)
    for dtype in REDUCE_DTYPES:
        for op in ("sum", "max"):
            _assert_clean(tiledsl.compile(ReduceOp(MAPPINGS["full"], op, None, dtype), s, arch=arch))
        _assert_clean(tiledsl.compile(ReduceOp(MAPPINGS["block_rows"], "sum", 1, dtype), s, arch=arch))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("mapping", list(MAPPINGS))
def test_every_op_dtype_and_mapping_compiles_without_spills(arch, mapping):
    for dtype in REDUCE_DTYPES:
        for op in OPS:
            for combine in ("two_pass", "atomic") if op in ("sum", "max") else ("two_pass",):
                s = ReduceSchedule(combine=combine)
                k = tiledsl.compile(ReduceOp(MAPPINGS[mapping], op, _AXIS[mapping], dtype), s, arch=arch)
                _assert_clean(k)


def test_kernel_report_comes_from_ptxas():
    k = tiledsl.compile(ReduceOp((16384, 16384), "sum", 1, "float32"), arch="sm_90")
    assert k.name.startswith("tiledsl_reduce_sum_f32f32_contiguous_v4_warp_shuffle")
    assert "Used" in k.log and k.block == (256, 1, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert k.schedule == tiledsl.preset("reduce", "default")


# ---- bad input: wrong types, upper bounds, from_dict keys, spills (each failed before the fix) ----
@pytest.mark.parametrize("kwargs,match", [
    (dict(keepdims="no"), r"ReduceOp.keepdims='no' must be True or False"),
    (dict(keepdims=1), r"ReduceOp.keepdims=1 must be True or False"),
    (dict(keepdims=None), r"ReduceOp.keepdims=None must be True or False"),
    (dict(dtype=None), r"ReduceOp.dtype=None"),
    (dict(align=4.0), r"ReduceOp.align=4.0 must be an integer"),
    (dict(align=True), r"ReduceOp.align=True must be an integer"),
    (dict(axis=1.0), r"ReduceOp.axis=1.0 must be an integer"),
    (dict(axis=True), r"ReduceOp.axis=True must be an integer"),
    (dict(shape=(4, 5.0)), r"ReduceOp.shape=\(4, 5.0\): every size must be an integer ≥ 0, got 5.0"),
    (dict(shape=(4, True)), r"every size must be an integer ≥ 0, got True"),
    (dict(op=["sum"]), r"ReduceOp.op=\['sum'\] is not supported"),
])
def test_op_fields_of_the_wrong_type_name_field_and_value(kwargs, match):
    args = {"shape": (4, 5), "axis": 1, **kwargs}
    with pytest.raises(tiledsl.SpecError, match=match):
        ReduceOp(**args)


def test_op_accepts_numpy_integers_and_bools_as_plain_values():
    op = ReduceOp(shape=(np.int64(4), np.int32(5)), axis=np.int64(-1), align=np.int64(4), keepdims=np.True_)
    assert op.shape == (4, 5) and op.axis == 1 and op.align == 4 and op.keepdims is True
    assert all(type(v) is int for v in (*op.shape, op.axis, op.align))
    assert ReduceOp(shape=(4, 5), axis=1, keepdims=False).out_shape == (4,)


def test_op_from_dict_names_missing_and_extra_fields():
    with pytest.raises(tiledsl.SpecError, match=r"ReduceOp.from_dict: missing field\(s\) \['shape'\]; fields: "):
        ReduceOp.from_dict({"op": "sum"})
    with pytest.raises(tiledsl.SpecError, match=r"ReduceOp has no field\(s\) \['bogus'\]; fields: \["):
        ReduceOp.from_dict({"shape": [4], "bogus": 1})
    with pytest.raises(tiledsl.SpecError, match="needs a dict"):
        ReduceOp.from_dict([("shape", (4,))])
    op = ReduceOp(shape=(3, 4), op="max", axis=0, dtype="int32", keepdims=True)
    assert ReduceOp.from_dict(op.to_dict()) == op
    with pytest.raises(tiledsl.ScheduleError, match="needs a dict"):
        ReduceSchedule.from_dict(None)
    assert ReduceSchedule.from_dict({"block": 128}) == ReduceSchedule(block=128)  # missing: the defaults


@pytest.mark.parametrize("grid", [2**31, 2**32 + 8, 2**40])
def test_grid_is_bounded_by_cudas_grid_limit(grid):
    with pytest.raises(tiledsl.ScheduleError, match=rf"grid={grid} must be from 0 to 2\^31 - 1") as ei:
        ReduceSchedule(strategy="grid_stride", grid=grid)
    assert ei.value.rule == "grid_range"
    assert ReduceSchedule(strategy="grid_stride", grid=2**31 - 1).grid == 2**31 - 1


@pytest.mark.parametrize("field", ["block", "vec", "items_per_thread", "grid", "row_threads", "col_rows"])
@pytest.mark.parametrize("value", [2**31, 2**32 + 8, -(2**31) - 1])
def test_every_integer_field_is_bounded_to_int_range_by_a_rule(field, value):
    """Each reaches the kernel as ``constexpr int``: out of int range must be refused by a rule."""
    with pytest.raises(tiledsl.ScheduleError) as ei:
        ReduceSchedule(**{field: value})
    assert ei.value.rule in {r.name for r in REDUCE_RULES}


def test_schedule_integer_fields_accept_numpy_integers_and_refuse_bools():
    s = ReduceSchedule(block=np.int64(128), items_per_thread=np.int32(8))
    assert type(s.block) is int and type(s.items_per_thread) is int and s == ReduceSchedule(block=128,
                                                                                             items_per_thread=8)
    with pytest.raises(tiledsl.ScheduleError, match=r"ReduceSchedule.vec=True must be an integer"):
        ReduceSchedule(vec=True)
    with pytest.raises(tiledsl.ScheduleError, match=r"ReduceSchedule.grid=1e3 must be an integer|grid=1000.0"):
        ReduceSchedule(grid=1e3)


def test_reduce_api_does_not_truncate_a_float_axis():
    src = (Path(__file__).resolve().parents[1] / "tiledsl" / "reduce" / "api.py").read_text()
    assert "int(axis)" not in src


def test_docs_hold_the_current_rule_table():
    doc = (Path(__file__).resolve().parents[1] / "docs" / "reduce.md").read_text()
    assert R.markdown(REDUCE_RULES, "ReduceSchedule rules (generated from REDUCE_RULES)") in doc


# a random sweep found these: 16 loads of 16 bytes in flight per thread under a 64-register cap
SPILLED = [
    (ReduceOp((1000,), op="min", dtype="float64"),
     ReduceSchedule(block=128, vec=2, items_per_thread=16, strategy="smem_sequential", combine="atomic")),
    (ReduceOp((1000,), op="min", dtype="float64"), ReduceSchedule(block=32, vec=8, items_per_thread=16)),
    (ReduceOp(((1 << 20) + 3,), op="sum", dtype="float32"), ReduceSchedule(block=256, items_per_thread=16)),
    (ReduceOp((1000, 33), op="sum", axis=1, dtype="float64"), ReduceSchedule(block=128, items_per_thread=16)),
    (ReduceOp((300, 64), op="norm2", axis=0, dtype="float64"), ReduceSchedule(block=512, items_per_thread=16)),
    (ReduceOp((64, 5000), op="max", axis=1, dtype="int64"),
     ReduceSchedule(block=512, items_per_thread=16, strategy="atomic", combine="atomic")),
    (ReduceOp((64, 5000), op="prod", axis=1, dtype="float16"),
     ReduceSchedule(block=1024, vec=8, items_per_thread=8, strategy="grid_stride")),
    (ReduceOp((64, 5000), op="sum", axis=1, dtype="float32"),
     ReduceSchedule(block=1024, vec=2, items_per_thread=16, strategy="warp_shuffle")),
]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("case", range(len(SPILLED)))
def test_many_loads_in_flight_do_not_spill(arch, case):
    op, s = SPILLED[case]
    _assert_clean(tiledsl.compile(op, s, arch=arch))


def test_1024_thread_blocks_refuse_more_than_128_bytes_in_flight():
    op = ReduceOp((1000,), op="min", dtype="float64")
    with pytest.raises(tiledsl.ScheduleError, match=r"16·2·8=256 bytes of loads in flight per thread") as ei:
        tiledsl.compile(op, ReduceSchedule(block=1024, items_per_thread=16), arch="sm_90")
    assert ei.value.rule == "loads_fit_registers"
    ReduceSchedule(block=1024, items_per_thread=8).check_op(op)  # 128 bytes: fits 64 registers


def test_default_schedule_keeps_8_loads_in_flight_for_large_full_reductions(tmp_path, monkeypatch):
    """schedule=None: a reduction to one value of ≥ 2^20 elements issues 8 loads per thread, rows keep the
    preset's 4 (measured reason in tiledsl.reduce.family.default_schedule)."""
    from tiledsl.reduce.family import FULL_DEEP_MIN, default_schedule

    monkeypatch.setenv("TILEDSL_CACHE_DIR", str(tmp_path))  # no tuned record of the user's applies
    h = Target.known("H200")
    preset = tiledsl.preset("reduce", "default")
    assert default_schedule(ReduceOp(shape=(1 << 29,)), h).items_per_thread == 8
    assert default_schedule(ReduceOp(shape=(1, 1 << 20), axis=1), h).items_per_thread == 8
    assert default_schedule(ReduceOp(shape=(FULL_DEEP_MIN - 1,)), h) == preset
    assert default_schedule(ReduceOp(shape=(128, 1 << 20), axis=1), h) == preset
    assert default_schedule(ReduceOp(shape=(1 << 20, 2), axis=0), h) == preset  # strided: 2 outputs

"""Transpose on the CPU: rule table, op validation, schedule round-trip, emitted source, NVRTC compile."""

from __future__ import annotations

import pickle
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import tiledsl
from tiledsl import rules as R
from tiledsl.transpose import TRANSPOSE_DTYPES, TRANSPOSE_RULES, TransposeOp, TransposeSchedule, emit_transpose
from tiledsl.transpose import default_schedule as transpose_default
from tiledsl.transpose.emit import effective_widths, grid
from tiledsl.transpose.op import widest_vector

# One failing schedule per schedule-scope rule: (rule name, kwargs)
FAILING = [
    ("tile_side", dict(tile=48, vec=4, rows_per_thread=4)),
    ("vec_width", dict(vec=3)),
    ("smem_pad_0_or_1", dict(smem_pad=2)),
    ("rows_per_thread_divides_tile", dict(rows_per_thread=3)),
    ("naive_is_scalar", dict(variant="naive_read", tile=32, rows_per_thread=1, vec=2, smem_pad=0)),
    ("naive_has_no_padding", dict(variant="naive_write", tile=32, rows_per_thread=4, vec=1, smem_pad=1)),
    ("swizzle_range", dict(swizzle=0)),
    ("threads_multiple_of_32", dict(tile=32, vec=8, rows_per_thread=16)),  # 4·2 = 8 threads
    ("threads_at_most_1024", dict(tile=64, vec=1, rows_per_thread=2)),  # 64·32 = 2048 threads
]


@pytest.mark.parametrize("rule,kwargs", FAILING, ids=[r for r, _ in FAILING])
def test_each_rule_has_a_failing_case(rule, kwargs):
    with pytest.raises(tiledsl.ScheduleError) as ei:
        TransposeSchedule(**kwargs)
    assert ei.value.rule == rule, str(ei.value)
    assert f"(rule {rule})" in str(ei.value)
    assert isinstance(ei.value, ValueError)


def test_vec_divides_tile_alone():
    # unreachable through the constructor while tile ∈ {32, 64} and vec ∈ {1, 2, 4, 8}; kept as a
    # guard for the day the tile table grows, so check it on a hand-made environment
    env = TransposeSchedule().env()
    env.update(TILE=48, VEC=32)
    assert "vec_divides_tile" in [r.name for r in R.violations(TRANSPOSE_RULES, env, ("schedule",))]


def test_every_schedule_rule_is_exercised():
    tested = {r for r, _ in FAILING} | {"vec_divides_tile"}
    assert {r.name for r in TRANSPOSE_RULES if r.scope == "schedule"} == tested
    assert {r.name for r in TRANSPOSE_RULES if r.scope == "op"} == {"registers_fit_thread"}


def test_error_names_field_value_and_limit():
    with pytest.raises(ValueError, match=r"TransposeSchedule.rows_per_thread=3 must be ≥ 1 and divide tile=64"):
        TransposeSchedule(rows_per_thread=3)
    with pytest.raises(ValueError, match=r"threads=\(tile/vec\)·\(tile/rows_per_thread\)=2048 exceeds 1024"):
        TransposeSchedule(tile=64, vec=1, rows_per_thread=2)


def test_variant_and_type_errors_name_field():
    with pytest.raises(tiledsl.ScheduleError, match=r"variant='diagonal' must be one of"):
        TransposeSchedule(variant="diagonal")
    with pytest.raises(tiledsl.ScheduleError, match=r"TransposeSchedule.tile='64' must be an integer"):
        TransposeSchedule(tile="64")
    with pytest.raises(tiledsl.ScheduleError, match=r"smem_pad=True must be an integer"):
        TransposeSchedule(smem_pad=True)


def test_resource_rules_use_device_limits():
    h200 = tiledsl.Target.known("H200")
    small = replace(h200, max_threads_per_block=128, smem_per_block_optin_bytes=16 * 1024)
    s = TransposeSchedule()  # 256 threads, 64·65·8 = 33280 bytes sized for 8-byte elements
    s.validate(h200)
    with pytest.raises(tiledsl.ResourceError, match=r"threads=256 exceeds the device's 128") as ei:
        s.validate(small)
    assert ei.value.rule == "threads_within_device"
    with pytest.raises(tiledsl.ResourceError, match=r"33280 bytes .* 16384 bytes") as ei:
        TransposeSchedule(tile=64, rows_per_thread=16, vec=4).validate(replace(small, max_threads_per_block=1024))
    assert ei.value.rule == "smem_within_device"


def test_schedule_round_trip_hash_and_pickle():
    s = TransposeSchedule(tile=32, rows_per_thread=2, vec=2, smem_pad=0, swizzle=4)
    d = s.to_dict()
    assert TransposeSchedule.from_dict(d) == s
    assert hash(TransposeSchedule.from_dict(d)) == hash(s)
    assert s.block == (16, 16, 1) and s.threads == 256
    with pytest.raises(ValueError, match="no field"):
        TransposeSchedule.from_dict({**d, "bogus": 1})
    err = pickle.loads(pickle.dumps(tiledsl.ScheduleError("x", "tile_side")))
    assert err.rule == "tile_side"


def test_every_field_has_a_default_that_validates():
    s = TransposeSchedule()
    assert s.variant == "shared" and s.validate(tiledsl.Target.known("H200")) is s


def test_presets_are_the_ladder_in_order():
    names = list(tiledsl.presets("transpose"))
    assert names[:5] == ["naive_read", "naive_write", "shared_unpadded", "shared_padded", "padded_rows"]
    p = tiledsl.presets("transpose")
    assert p["naive_read"].variant == "naive_read" and p["naive_write"].variant == "naive_write"
    assert p["shared_unpadded"].smem_pad == 0 and p["shared_padded"].smem_pad == 1
    assert p["padded_rows"].block == (32, 8, 1)
    assert p["padded_rows_vec"].vec == 4
    with pytest.raises(tiledsl.ScheduleError, match="no transpose preset 'nope'"):
        tiledsl.preset("transpose", "nope")


# ---- the op ----

def test_op_sizes_and_bytes_moved():
    op = TransposeOp(shape=(3, 7, 13), dtype="float64")
    assert (op.batch, op.rows, op.cols, op.out_shape, op.size) == (3, 7, 13, (3, 13, 7), 273)
    assert op.bytes_moved == 2 * 273 * 8
    assert op.in_strides == (91, 13, 1) and op.out_strides == (91, 7, 1)
    assert TransposeOp(shape=(16384, 16384)).bytes_moved == 2 * 16384 * 16384 * 4
    assert TransposeOp.from_dict(op.to_dict()) == op


@pytest.mark.parametrize("shape,dtype,align_in,align_out", [
    ((16384, 16384), "float32", 4, 4),
    ((7, 13), "float32", 1, 1),          # 13 and 7 are odd: scalar both ways
    ((8, 12), "float32", 4, 4),
    ((6, 12), "float32", 4, 2),          # Y rows are 6 long: 2-wide stores
    ((64, 64), "float16", 8, 8),         # 16 bytes = 8 halves
    ((64, 64), "float64", 2, 2),
    ((1, 1000), "float32", 4, 1),        # Y is 1000 x 1: one element per row
    ((1000, 1), "float32", 1, 4),
])
def test_op_alignment_derived_from_layout(shape, dtype, align_in, align_out):
    op = TransposeOp(shape=shape, dtype=dtype)
    assert (op.align_in, op.align_out) == (align_in, align_out)


def test_widest_vector_needs_unit_column_stride_and_aligned_rows():
    assert widest_vector((64, 64), (1, 64), 4) == 1       # a .T view: columns are strided
    assert widest_vector((64, 13), (16, 1), 4) == 1       # x[:, :13] of a 16-wide array: ragged rows
    assert widest_vector((64, 12), (16, 1), 4) == 4
    assert widest_vector((64, 12), (-16, 1), 4) == 4      # reversed rows keep the alignment
    assert widest_vector((3, 64, 12), (1026, 16, 1), 4) == 2  # the batch stride only allows pairs
    assert widest_vector((64, 64), (64, 1), 4, base_align=2) == 2


def test_op_errors_name_argument_value_and_limit():
    with pytest.raises(tiledsl.SpecError, match=r"shape=\(5,\) must be \(R, C\) or \(B, R, C\)"):
        TransposeOp(shape=(5,))
    with pytest.raises(tiledsl.SpecError, match=r"every size must be an integer ≥ 0, got -1"):
        TransposeOp(shape=(4, -1))
    with pytest.raises(tiledsl.SpecError, match=r"dtype='uint8' is not supported for transpose"):
        TransposeOp(shape=(4, 4), dtype="uint8")
    with pytest.raises(tiledsl.SpecError, match=r"in_strides=\(4,\) must be 2 integers"):
        TransposeOp(shape=(4, 4), in_strides=(4,))
    with pytest.raises(tiledsl.SpecError, match=r"align_in=4 is wider than .* allows \(at most 1"):
        TransposeOp(shape=(7, 13), align_in=4)
    with pytest.raises(tiledsl.SpecError, match=r"align_out=8 must be 1, 2, 4 or 8 elements and at most 4"):
        TransposeOp(shape=(64, 64), dtype="float32", align_out=8)
    for exc in (tiledsl.SpecError,):
        assert issubclass(exc, ValueError)


def test_transpose_rejects_host_arrays():
    with pytest.raises(tiledsl.SpecTypeError, match="NumPy array on the host"):
        tiledsl.transpose(np.ones((4, 4), dtype=np.float32))


# ---- emitted source ----

def test_source_is_deterministic_and_carries_the_rules():
    op, s = TransposeOp(shape=(1000, 1000)), TransposeSchedule()
    a, b = emit_transpose(op, s), emit_transpose(op, s)
    assert a == b
    src = a.source
    for line in R.static_asserts(TRANSPOSE_RULES):
        assert line in src
    assert "constexpr int TILE = 64;" in src and "// tile: side of the square tile" in src
    assert "__shared__ word tile[TILE][TILE + SMEM_PAD];" in src
    for stage in ("stage 1: X -> registers", "stage 2: registers -> shared", "stage 3: shared -> registers",
                  "stage 4: registers -> Y"):
        assert stage in src
    assert "uint4 q = *reinterpret_cast<const uint4*>" in src  # 16-byte loads
    assert "*reinterpret_cast<uint4*>(yb + yr * y_row + yc) = q;" in src  # 16-byte stores
    assert a.block == (16, 16, 1)


def test_naive_variants_use_no_shared_memory():
    for name in ("naive_read", "naive_write"):
        ks = emit_transpose(TransposeOp(shape=(100, 100)), tiledsl.preset("transpose", name))
        assert "__shared__" not in ks.source and "__syncthreads" not in ks.source
        assert f"variant {name}" in ks.source


def test_effective_widths_follow_alignment():
    s = TransposeSchedule(vec=4)
    assert effective_widths(TransposeOp(shape=(7, 13)), s) == (1, 1)
    assert effective_widths(TransposeOp(shape=(6, 12)), s) == (4, 2)
    assert effective_widths(TransposeOp(shape=(64, 64), dtype="float64"), s) == (2, 2)
    src = emit_transpose(TransposeOp(shape=(7, 13)), s).source
    assert "reinterpret_cast" not in src and "x_col" in src


def test_grid_covers_tiles_and_batch():
    s = TransposeSchedule(tile=64)
    assert grid(TransposeOp(shape=(127, 129)), s) == (2 * 3, 1, 1)
    assert grid(TransposeOp(shape=(5, 1, 1)), s) == (1, 5, 1)
    assert grid(TransposeOp(shape=(70000, 2, 2)), s) == (1, 65535, 1)


def test_default_schedule_gives_16_byte_accesses_for_every_dtype():
    h200 = tiledsl.Target.known("H200")
    for dt in TRANSPOSE_DTYPES:
        op = TransposeOp(shape=(4096, 4096), dtype=dt)
        s = transpose_default(op, h200)
        vi, vo = effective_widths(op, s)
        assert vi * op.itemsize == 16 and vo * op.itemsize == 16, (dt, s)
        assert s.threads == 256


def test_compile_dispatches_through_family_table():
    from tiledsl.api import family, family_of

    assert family_of(TransposeOp(shape=(4, 4))).name == "transpose"
    assert family("transpose").schedule_type is TransposeSchedule
    with pytest.raises(tiledsl.SpecTypeError, match="schedule for TransposeOp must be a TransposeSchedule"):
        tiledsl.compile(TransposeOp(shape=(4, 4)), tiledsl.GemmSchedule(), arch="sm_90")


def test_docs_hold_the_current_rule_table():
    doc = (Path(__file__).resolve().parents[1] / "docs" / "transpose.md").read_text()
    assert R.markdown(TRANSPOSE_RULES, "TransposeSchedule rules") in doc


# ---- NVRTC: every preset × dtype compiles for sm_80 and sm_90 with zero spills ----

def _ops_for(dtype: str) -> list[TransposeOp]:
    """A vector-friendly op, a ragged (scalar) op and a batched strided op of ``dtype``."""
    return [TransposeOp(shape=(1024, 1024), dtype=dtype),
            TransposeOp(shape=(127, 129), dtype=dtype),
            TransposeOp(shape=(3, 64, 96), dtype=dtype, in_strides=(64 * 200, 200, 1))]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("dtype", TRANSPOSE_DTYPES)
@pytest.mark.parametrize("name", list(tiledsl.presets("transpose")) + ["default"])
def test_every_preset_and_dtype_compiles_without_spills(name, dtype, arch):
    target = tiledsl.Target.known(arch)
    for op in _ops_for(dtype):
        s = transpose_default(op, target) if name == "default" else tiledsl.preset("transpose", name)
        k = tiledsl.compile(op, s, arch=arch)
        assert k.arch == arch and k.registers > 0
        assert k.spill_bytes == 0 and k.stack_bytes == 0, k.log
        assert "warning" not in k.log, k.log
        assert k.smem_bytes == s.smem_bytes(op.itemsize)
        assert k.threads == s.threads


# ---- bad input: wrong types, upper bounds, from_dict keys, spills (each failed before the fix) ----
@pytest.mark.parametrize("kwargs,match", [
    (dict(align_out=True), r"TransposeOp.align_out=True must be an integer"),
    (dict(align_in=4.0), r"TransposeOp.align_in=4.0 must be an integer"),
    (dict(align_in="4"), r"TransposeOp.align_in='4' must be an integer"),
    (dict(in_strides=5), r"TransposeOp.in_strides=5 must be 2 integers"),
    (dict(out_strides=(64, 1.0)), r"TransposeOp.out_strides=\(64, 1.0\) must be 2 integers"),
    (dict(in_strides=(64, True)), r"TransposeOp.in_strides=\(64, True\) must be 2 integers"),
    (dict(dtype=None), r"TransposeOp.dtype=None"),
    (dict(shape=(64, 64.0)), r"every size must be an integer ≥ 0, got 64.0"),
    (dict(shape=(64, False)), r"every size must be an integer ≥ 0, got False"),
])
def test_op_fields_of_the_wrong_type_name_field_and_value(kwargs, match):
    with pytest.raises(tiledsl.SpecError, match=match):
        TransposeOp(**{"shape": (64, 64), **kwargs})


def test_op_accepts_numpy_integers_as_plain_ints():
    op = TransposeOp(shape=(np.int64(64), np.int32(64)), in_strides=(np.int64(64), np.int64(1)),
                     align_in=np.int64(4))
    assert op == TransposeOp(shape=(64, 64), align_in=4)
    assert all(type(v) is int for v in (*op.shape, *op.in_strides, op.align_in, op.align_out))


def test_op_from_dict_names_missing_and_extra_fields():
    with pytest.raises(tiledsl.SpecError, match=r"TransposeOp.from_dict: missing field\(s\) \['shape'\]"):
        TransposeOp.from_dict({"dtype": "float32"})
    with pytest.raises(tiledsl.SpecError, match=r"TransposeOp has no field\(s\) \['bogus'\]; fields: \["):
        TransposeOp.from_dict({"shape": [4, 4], "bogus": 1})
    with pytest.raises(tiledsl.SpecError, match="needs a dict"):
        TransposeOp.from_dict("shape")
    with pytest.raises(tiledsl.ScheduleError, match="needs a dict"):
        TransposeSchedule.from_dict(None)
    assert TransposeSchedule.from_dict({"tile": 32, "rows_per_thread": 4, "vec": 1}) == TransposeSchedule(
        tile=32, rows_per_thread=4, vec=1)  # missing: the defaults


@pytest.mark.parametrize("swizzle", [2**16, 2**31, 2**32 + 8])
def test_swizzle_is_bounded(swizzle):
    with pytest.raises(tiledsl.ScheduleError, match=rf"swizzle={swizzle} must be from 1 to 65535") as ei:
        TransposeSchedule(swizzle=swizzle)
    assert ei.value.rule == "swizzle_range"


@pytest.mark.parametrize("field", ["tile", "rows_per_thread", "vec", "smem_pad", "swizzle"])
@pytest.mark.parametrize("value", [2**31, 2**32 + 8, -(2**31) - 1])
def test_every_integer_field_is_bounded_to_int_range_by_a_rule(field, value):
    """Each reaches the kernel as ``constexpr int``: out of int range must be refused by a rule."""
    with pytest.raises(tiledsl.ScheduleError) as ei:
        TransposeSchedule(**{field: value})
    assert ei.value.rule in {r.name for r in TRANSPOSE_RULES}


def test_schedule_integer_fields_accept_numpy_integers():
    s = TransposeSchedule(tile=np.int64(32), rows_per_thread=np.int32(4), vec=np.int64(1), swizzle=np.int64(4))
    assert s == TransposeSchedule(tile=32, rows_per_thread=4, vec=1, swizzle=4)
    assert all(type(getattr(s, f)) is int for f in ("tile", "rows_per_thread", "vec", "smem_pad", "swizzle"))
    with pytest.raises(tiledsl.ScheduleError, match=r"TransposeSchedule.swizzle=8.0 must be an integer"):
        TransposeSchedule(swizzle=8.0)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_largest_swizzle_compiles(arch):
    k = tiledsl.compile(TransposeOp(shape=(1000, 3000)), TransposeSchedule(swizzle=65535), arch=arch)
    assert k.spill_bytes == 0 and "min(SWIZZLE, tiles_r)" in k.source


# (dtype, tile, rows_per_thread, vec) that spilled in an NVRTC sweep (sm_80 / sm_90)
MUST_SPILL = [("float64", 64, 32, 1), ("float64", 64, 32, 4), ("float64", 64, 16, 4), ("float64", 64, 64, 2),
              ("float32", 32, 32, 1), ("float32", 64, 16, 8), ("float32", 64, 64, 1), ("float16", 64, 32, 2)]
# the largest that did not, per width
FITS = [("float64", 64, 16, 2), ("float64", 64, 8, 8), ("float64", 32, 16, 2), ("float32", 64, 16, 4),
        ("float32", 64, 8, 8), ("int64", 64, 16, 1), ("float16", 64, 16, 4), ("bfloat16", 32, 16, 2)]


@pytest.mark.parametrize("dtype,tile,rows,vec", MUST_SPILL)
def test_schedules_that_must_spill_are_refused(dtype, tile, rows, vec):
    op, s = TransposeOp(shape=(1024, 1024), dtype=dtype), TransposeSchedule(tile=tile, rows_per_thread=rows, vec=vec)
    with pytest.raises(tiledsl.ScheduleError, match=rf"rows_per_thread={rows} rows of vec={vec}") as ei:
        tiledsl.compile(op, s, arch="sm_90")
    assert ei.value.rule == "registers_fit_thread" and "would spill" in str(ei.value)
    naive = TransposeSchedule(variant="naive_read", tile=tile, rows_per_thread=rows, vec=1, smem_pad=0)
    naive.check_op(op)  # the naive variants hold no chunk: never refused


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("dtype,tile,rows,vec", FITS)
def test_largest_accepted_chunks_do_not_spill(dtype, tile, rows, vec, arch):
    s = TransposeSchedule(tile=tile, rows_per_thread=rows, vec=vec)
    for op in (TransposeOp(shape=(1024, 1024), dtype=dtype), TransposeOp(shape=(3, 64, 96), dtype=dtype)):
        k = tiledsl.compile(op, s, arch=arch)
        assert k.spill_bytes == 0 and k.stack_bytes == 0, k.log


def test_naive_with_many_rows_does_not_spill():
    s = TransposeSchedule(variant="naive_write", tile=64, rows_per_thread=64, vec=1, smem_pad=0)
    k = tiledsl.compile(TransposeOp(shape=(1024, 1024), dtype="float64"), s, arch="sm_90")
    assert k.spill_bytes == 0 and k.stack_bytes == 0, k.log

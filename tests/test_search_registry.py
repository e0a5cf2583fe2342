"""Tuned-schedule store: hit only after validation, and a printable reason for every miss (CPU only)."""

from __future__ import annotations

import json

import pytest

import tiledsl
from tiledsl import registry

H200 = tiledsl.Target.known("H200")
OP = tiledsl.GemmOp(4096, 4096, 4096)
S = tiledsl.GemmSchedule(bm=128, bn=64, bk=16, rm=8, rn=4, unroll=16)


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEDSL_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_store_then_lookup_hits(cache):
    path = registry.store("gemm", OP, H200, S, measured={"median_s": 0.003})
    assert path == cache / "tuned" / "gemm" / "sm_90.json"
    assert registry.lookup("gemm", OP, H200) == S


def test_a_record_written_before_layout_c_is_replaced_not_shadowed(cache):
    """GemmOp.layout_c came later: ops without it in the file are the same op (to_dict leaves the row-major
    default out), so a new record replaces the old one instead of landing behind it."""
    path = registry.store("gemm", OP, H200, S)
    assert "layout_c" not in json.loads(path.read_text())["records"][0]["op"]
    assert tiledsl.GemmOp(4, 512, 64, layout_c="col").to_dict()["layout_c"] == "col"
    assert tiledsl.GemmOp.from_dict(tiledsl.GemmOp(4, 512, 64, layout_c="col").to_dict()).layout_c == "col"
    newer = tiledsl.GemmSchedule(bm=128, bn=64, bk=16, rm=8, rn=4, unroll=16, split_k=2)
    registry.store("gemm", OP, H200, newer)
    assert len(json.loads(path.read_text())["records"]) == 1 and registry.lookup("gemm", OP, H200) == newer


def test_misses_say_why(cache):
    registry.store("gemm", OP, H200, S)
    other = tiledsl.GemmOp(3000, 4096, 4096)  # a shape with no shipped record
    sched, reasons = registry.lookup_explain("gemm", other, H200)
    assert sched is None
    assert any("op differs: m 4096≠3000" in r for r in reasons), reasons
    sched, reasons = registry.lookup_explain("gemm", OP, tiledsl.Target.known("A100"))
    assert sched is None and any("no records" in r for r in reasons)
    sched, reasons = registry.lookup_explain("gemm", OP, tiledsl.Target.known("H100"))
    assert sched is None and any("tuned on H200, this device is H100" in r for r in reasons), reasons


def test_records_for_other_products_are_one_reason_naming_the_nearest(cache):
    """Shipped files hold one record per product: a miss lists the records for other products as one line per file
    (their count and the one that differs in the fewest fields), and every other miss on its own."""
    for op in (tiledsl.GemmOp(1024, 1024, 1024), tiledsl.GemmOp(4096, 4096, 2048), tiledsl.GemmOp(64, 64, 64)):
        registry.store("gemm", op, H200, S)
    path = registry.user_store_path("gemm", "sm_90")
    sched, reasons = registry.lookup_explain("gemm", OP, H200)
    assert sched is None
    mine = [r for r in reasons if r.startswith(f"user store {path}")]
    assert mine == [f"user store {path}: 3 records are for other products; the nearest, record 1: "
                    "op differs: k 2048≠4096"], reasons
    data = json.loads(path.read_text())
    data["records"][2]["device"] = "NVIDIA A100-SXM4-80GB"  # a record for another device is still named on its own
    path.write_text(json.dumps(data))
    sched, reasons = registry.lookup_explain("gemm", OP, H200)
    mine = [r for r in reasons if r.startswith(f"user store {path}")]
    assert len(mine) == 2 and "record 2: tuned on NVIDIA A100" in mine[0] and "2 records are for other" in mine[1]


@pytest.mark.parametrize("change,said", [
    ({"layout_c": "col"}, "op differs: layout_c 'col'≠'row'"),  # a key only the record has counts too
    ({"flavour": 1}, "stored op does not validate"),
    ({"m": 4096.0}, "stored op does not validate"),
    ({"m": "4096"}, "stored op does not validate"),
])
def test_a_record_whose_op_is_not_this_op_is_not_used(cache, change, said):
    path = registry.store("gemm", OP, H200, S)
    data = json.loads(path.read_text())
    data["records"][0]["op"].update(change)
    data["records"][0].pop("source_sha256")  # optional: the op check alone must refuse it
    path.write_text(json.dumps(data))
    sched, reasons = registry.lookup_explain("gemm", OP, H200)
    assert sched is None and any(said in r for r in reasons), reasons


def test_invalid_or_stale_records_are_not_used(cache):
    path = registry.store("gemm", OP, H200, S)
    data = json.loads(path.read_text())
    data["records"][0]["schedule"]["rm"] = 3  # breaks thread_tile_divides_block_m
    path.write_text(json.dumps(data))
    sched, reasons = registry.lookup_explain("gemm", OP, H200)
    assert sched is None and any("no longer validates" in r and "rule" in r for r in reasons), reasons
    path = registry.store("gemm", OP, H200, S)
    data = json.loads(path.read_text())
    data["records"][0]["source_sha256"] = "0" * 64
    path.write_text(json.dumps(data))
    sched, reasons = registry.lookup_explain("gemm", OP, H200)
    assert sched is None and any("source for this schedule changed" in r for r in reasons), reasons


def test_store_replaces_the_record_of_the_same_op(cache):
    registry.store("gemm", OP, H200, S)
    s2 = tiledsl.GemmSchedule(bm=64, bn=64, bk=16, rm=4, rn=4, unroll=16)
    path = registry.store("gemm", OP, H200, s2)
    assert len(json.loads(path.read_text())["records"]) == 1
    assert registry.lookup("gemm", OP, H200) == s2


@pytest.mark.parametrize("family", ["gemm", "reduce", "transpose"])
def test_every_shipped_record_still_applies_where_it_was_tuned(family):
    """A shipped record whose kernel source changed since tuning (SHA-256), or whose schedule no longer validates,
    would be skipped silently by ``schedule=None`` on the GPU it was measured on: fail here instead, on the CPU, by
    checking each record against its own op, device and NVRTC version."""
    fam = tiledsl.family.get(family)
    path = registry.shipped_path(family, "sm_90")
    records = json.loads(path.read_text())["records"]
    for i, rec in enumerate(records):
        op = fam.op_type.from_dict(rec["op"])
        got = registry._why_not(fam, rec, op, tiledsl.Target.known(rec["device"]), tuple(rec["nvrtc"]))
        assert not isinstance(got, str), f"{path} record {i}: {got}"
        assert got == fam.schedule_type.from_dict(rec["schedule"])


def test_the_shipped_sixteen_row_record_is_what_schedule_none_takes_with_its_nvrtc(monkeypatch):
    """The GEMV record for 16×768×768 (a 60-trial tune on the H200 with NVRTC 13.0: 1.17× cuBLAS, against 0.81× for
    the built-in pick) is found for the op tiledsl.gemm builds, and only with the NVRTC it was tuned with."""
    op = tiledsl.GemmOp(16, 768, 768)
    monkeypatch.setattr(registry, "_nvrtc", lambda: [13, 0])
    s = registry.lookup("gemm", op, H200)
    assert s is not None and (s.kernel, s.bm, s.bn, s.vec, s.unroll, s.split_k) == ("gemv", 16, 32, 2, 4, 61)
    monkeypatch.setattr(registry, "_nvrtc", lambda: [12, 9])
    sched, reasons = registry.lookup_explain("gemm", op, H200)
    assert sched is None and any("tuned with NVRTC [13, 0], this is NVRTC [12, 9]" in r for r in reasons), reasons

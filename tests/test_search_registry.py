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
    other = tiledsl.GemmOp(3000, 4096, 4096)  # a shape with no shipped record (2048x4096x4096 has one, NVRTC 13.0)
    sched, reasons = registry.lookup_explain("gemm", other, H200)
    assert sched is None
    assert any("op differs: m 4096≠3000" in r for r in reasons), reasons
    sched, reasons = registry.lookup_explain("gemm", OP, tiledsl.Target.known("A100"))
    assert sched is None and any("no records" in r for r in reasons)
    sched, reasons = registry.lookup_explain("gemm", OP, tiledsl.Target.known("H100"))
    assert sched is None and any("tuned on H200, this device is H100" in r for r in reasons), reasons


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

"""benchmarks/overhead.py without a GPU: one line saying so, exit status 0, nothing written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tiledsl import gpu_available

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(gpu_available(), reason="a GPU is present: the benchmark would run")
def test_overhead_benchmark_says_no_gpu_and_exits_cleanly(tmp_path):
    out = tmp_path / "overhead.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "overhead.py"), "--out", str(out)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("no GPU"), proc.stdout
    assert not out.exists()


def test_overhead_benchmark_refuses_fewer_than_1000_calls():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "overhead.py"), "--calls", "10"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "at least 1000" in proc.stderr

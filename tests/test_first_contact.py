"""What a new user meets first, on a CPU machine: the main command's results folder (kernel.cu,
schedule.json, roofline.png, report.json, report.txt), progress and time accounting, --help conventions,
named missing drivers (NVRTC, database), and the no-GPU error."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tiledsl

optuna = pytest.importorskip("optuna")

from search import outputs, tune  # noqa: E402

GEMM = ["gemm", "--m", "256", "--n", "256", "--k", "128"]
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEDSL_CACHE_DIR", str(tmp_path / "cache"))


def _main(tmp_path, *extra: str) -> int:
    return tune.main([*GEMM, "--model-only", "--storage", f"sqlite:///{tmp_path / 't.db'}", "--no-progress",
                      "--trials", "12", "--compile-top", "1", *extra])


# ---------------------------------------------------------------- the results folder


def test_main_command_leaves_kernel_schedule_roofline_and_json_report(tmp_path, cache, capsys):
    assert _main(tmp_path) == 0
    out = capsys.readouterr().out
    folder = tmp_path / "tune-out" / "gemm-256x256x128-float32-NN-H200-model"  # conftest: tune-out under tmp_path
    names = sorted(p.name for p in folder.iterdir())
    assert names == ["kernel.cu", "report.json", "report.txt", "roofline.png", "schedule.json"]
    assert f"results in {folder}" in out  # printed at the end, with the folder
    assert (folder / "roofline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "__global__" in (folder / "kernel.cu").read_text()
    doc = json.loads((folder / "report.json").read_text())
    assert doc["mode"] == "model-only" and "PREDICTIONS" in doc["values_are"]
    assert doc["study"] == folder.name and doc["op"]["m"] == 256
    trials = doc["trials"]
    study = optuna.load_study(study_name=folder.name, storage=f"sqlite:///{tmp_path / 't.db'}")
    assert [t["number"] for t in trials] == [t.number for t in study.trials]  # every trial, in order
    complete = [t for t in trials if t["state"] == "complete" and t["duplicate_of"] is None]
    assert complete and all(t["schedule"] and t["predicted_s"] > 0 and t["measured_s"] is None for t in complete)
    for t in trials:  # every trial that did not complete on its own says why
        if t["state"] != "complete" or t["duplicate_of"] is not None:
            assert t["failure"], t
    assert doc["winner"]["schedule"] == json.loads((folder / "schedule.json").read_text())["schedule"]
    assert doc["time_s"]["compiles"] >= 2  # the finalist and the export


def test_report_json_flag_writes_a_second_copy(tmp_path, cache):
    path = tmp_path / "elsewhere" / "r.json"
    assert _main(tmp_path, "--export", str(tmp_path / "best"), "--report-json", str(path)) == 0
    assert json.loads(path.read_text())["trials"] == json.loads((tmp_path / "best" / "report.json").read_text())["trials"]
    assert not (tmp_path / "tune-out").exists()  # --export replaces the default folder


def test_report_counts_every_compile(tmp_path, cache, capsys, monkeypatch):
    from tiledsl import api
    from tiledsl.lru import LRU

    C = importlib.import_module("tiledsl.compile")  # the module (tiledsl.compile is the function)

    monkeypatch.setattr(C, "_MEM_CACHE", LRU(maxsize=1024))  # and a fresh disk cache (fixture): real NVRTC compiles
    api.clear_kernel_cache()
    assert _main(tmp_path) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("time: "))
    m = re.search(r"compile (\d+\.\d+) s for (\d+) kernels", line)
    assert m and int(m.group(2)) >= 2 and float(m.group(1)) > 0.0, line  # fresh cache: real NVRTC compiles


def test_roofline_points_are_the_report_rows_named_by_schedule_and_predicted():
    from search.space import describe
    from search.tune import Finalist

    op = tiledsl.GemmOp(512, 512, 512)
    s1, s2 = tiledsl.GemmSchedule(), tiledsl.preset("gemm", "sgemm_64x64_4x4")
    finals = [Finalist(3, s1, 1e-3, 0.0, 1e-3, "hbm", {}), Finalist(7, s2, 2e-3, 0.0, 2e-3, "hbm", {})]
    pts = outputs.roofline_points(op, tiledsl.Target.known("H200"), finals, finals[1], "model-only")
    labels = [p["label"] for p in pts if p["label"]]
    assert labels == [f"#3 {describe(s1)} (predicted 1.000 ms)", f"* #7 {describe(s2)} (predicted 2.000 ms)"]
    assert not any(p["measured"] for p in pts)
    assert {p["flops_per_s"] for p in pts} == {op.flops / 1e-3, op.flops / 2e-3}


# ---------------------------------------------------------------- progress


def test_progress_bar_has_a_total_and_labels_best(tmp_path, cache, capsys):
    assert tune.main([*GEMM, "--model-only", "--storage", f"sqlite:///{tmp_path / 't.db'}", "--trials", "6",
                      "--compile-top", "1"]) == 0
    err = capsys.readouterr().err.replace("\r", "\n")
    assert re.search(r"search \(model-only\):.*\| 6/6 \[", err), err[-2000:]
    assert "best predicted " in err and "best measured" not in err
    assert re.search(r"compile finalists for sm_90:.*\d+/\d+ \[", err)


# ---------------------------------------------------------------- --help


def _help(capsys) -> str:
    with pytest.raises(SystemExit):
        tune.main(["gemm", "--help"])
    return capsys.readouterr().out


def test_help_has_one_default_per_flag_and_none_on_required_flags(capsys):
    text = " ".join(_help(capsys).split())
    assert "(default: None)" not in text and "(default: False)" not in text
    for flag in ("--m M", "--n N", "--k K"):
        chunk = text.split(flag, 1)[1].split(" --", 1)[0]
        assert "default" not in chunk, chunk
    for chunk in re.split(r" (?=--[a-z])", text):
        assert chunk.count("(default") <= 1, chunk
    assert "--seed SEED sampler seed (default: 0)" in text  # a zero default is still shown


def test_help_lists_device_choices(capsys):
    text = " ".join(_help(capsys).split())
    assert "--device {H200,H100,A100,sm_90,sm_80}" in text


# ---------------------------------------------------------------- missing drivers, named


def test_missing_database_driver_is_named(monkeypatch):
    from sqlalchemy.dialects.postgresql import psycopg2 as pg

    def missing():
        raise ModuleNotFoundError("No module named 'psycopg2'", name="psycopg2")

    monkeypatch.setattr(pg.PGDialect_psycopg2, "import_dbapi", classmethod(lambda cls: missing()))
    why = tune.storage_problem("postgresql+psycopg2://u:p@127.0.0.1:1/db")
    assert why is not None and "pip install 'psycopg2-binary'" in why
    with pytest.raises(SystemExit) as e:
        tune.main([*GEMM, "--storage", "postgresql+psycopg2://u:p@127.0.0.1:1/db"])
    assert e.value.code == 2


def test_missing_nvrtc_is_caught_before_the_search(tmp_path, monkeypatch, capsys):
    from cupy.cuda import nvrtc

    C = importlib.import_module("tiledsl.compile")

    def broken():
        raise RuntimeError("libnvrtc.so.12: cannot open shared object file")

    monkeypatch.setattr(nvrtc, "getVersion", broken)
    monkeypatch.setattr(C, "_NVRTC_VERSION", None)
    monkeypatch.setattr(tune, "run", lambda *a, **k: pytest.fail("the search started"))
    assert _main(tmp_path) == 1
    err = capsys.readouterr().err
    pkg = C.NVRTC_PACKAGES[C.cupy_cuda_major()]
    assert "cannot compile kernels here" in err and f"pip install '{pkg}'" in err
    with pytest.raises(tiledsl.ToolchainError, match=re.escape(pkg)):
        C.nvrtc_version()


def test_extras_name_an_nvrtc_for_each_cuda_major():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

    from tiledsl.compile import NVRTC_PACKAGES

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert NVRTC_PACKAGES[12] in extras["cuda12"] and NVRTC_PACKAGES[13] in extras["cuda13"]
    assert any(r.startswith("cupy-cuda13x") for r in extras["cuda13"])
    # the test suites install one CUDA extra each (two CuPy packages in one environment break CuPy), and nvdisasm
    own = {name: [e for r in extras[name] if r.startswith("tiledsl[") for e in r[len("tiledsl["):-1].split(",")]
           for name in ("test", "test-cuda13")}
    assert own == {"test": ["cuda12", "sass"], "test-cuda13": ["cuda13", "sass"]}, own
    assert not any(r.startswith("cupy") for r in extras["test"] + extras["test-cuda13"])


def test_the_installed_extra_compiles_every_family_for_sm_90(tmp_path):
    """What .ci/run checks for each extra (cuda13 in a second venv), for the extra installed here."""
    from tiledsl.compile import cupy_cuda_major

    env = {**os.environ, "PYTHONPATH": str(ROOT), "TILEDSL_CACHE_DIR": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, str(ROOT / ".ci" / "compile_check.py"), str(cupy_cuda_major())], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.count("for sm_90 in") == 3 and " 0 B spilled" in r.stdout


# ---------------------------------------------------------------- no GPU: one clear tiledsl error


def test_no_gpu_error_says_no_gpu_and_how_to_compile():
    if tiledsl.gpu_available():
        pytest.skip("a GPU is present")
    with pytest.raises(tiledsl.LaunchError) as e:
        tiledsl.require_gpu()
    text = str(e.value)
    assert "no CUDA GPU or NVIDIA driver is present" in text and "arch='sm_90'" in text
    assert "insufficient" in text  # CuPy's own words are kept, after the explanation


# ---------------------------------------------------------------- scripts without a GPU: one line, no traceback

SCRIPTS = [["benchmarks/gemm.py"], ["benchmarks/reduce.py"], ["benchmarks/reduce_ladder.py"],
           ["benchmarks/transpose.py"], ["benchmarks/costmodel_fit.py"], ["benchmarks/tune_workloads.py"],
           ["benchmarks/model_prune.py"],
           ["examples/reduce.py"], ["examples/transpose.py"], ["examples/torch_mlp.py"],
           ["examples/gemm_quickstart.py"]]


@pytest.mark.parametrize("script", SCRIPTS, ids=[s[0] for s in SCRIPTS])
def test_scripts_without_a_gpu_say_so_in_one_line(script, tmp_path):
    if tiledsl.gpu_available():
        pytest.skip("a GPU is present")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TILEDSL_CACHE_DIR": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, str(ROOT / script[0])], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, (r.returncode, r.stderr[-2000:])
    err = r.stderr.strip().splitlines()
    assert "Traceback" not in r.stderr and len(err) == 1, r.stderr[-2000:]
    assert err[0].startswith(f"{script[0]}: ") and ("no GPU" in err[0] or "needs torch" in err[0]), err[0]


def test_tuning_example_exports_and_reuses_without_a_gpu(tmp_path):
    if tiledsl.gpu_available():
        pytest.skip("a GPU is present: the example then runs the kernel (GPU command in the report)")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TILEDSL_CACHE_DIR": str(tmp_path / "cache")}
    out = tmp_path / "ex" / "example"
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "tune_and_reuse.py"), "--m", "256", "--n", "256",
                        "--k", "128", "--trials", "6", "--out", str(out)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert f"reused {out / 'schedule.json'} (model-only)" in r.stdout
    assert r.stderr.strip().splitlines()[-1].startswith("examples/tune_and_reuse.py: no GPU: the tuned schedule was "
                                                        "exported and compiled")
    assert {p.name for p in out.iterdir()} >= {"kernel.cu", "schedule.json", "report.json", "roofline.png"}


def test_a_cupy_and_nvrtc_of_different_cuda_majors_are_warned_about(monkeypatch):
    """Installing torch into a CuPy-for-CUDA-12 environment can bring NVRTC 13: compiles then go through NVRTC 13 and
    tuned records match against it, silently. One RuntimeWarning names both versions and what to install."""
    import warnings

    comp = importlib.import_module("tiledsl.compile")  # the package exports a function of that name
    real = comp.nvrtc_version()
    monkeypatch.setattr(comp, "_NVRTC_VERSION", None)
    monkeypatch.setattr(comp, "cupy_cuda_major", lambda: real[0] + 1)
    with pytest.warns(RuntimeWarning, match=f"CuPy is built for CUDA {real[0] + 1} but loads NVRTC {real[0]}"):
        assert comp.nvrtc_version() == real
    monkeypatch.setattr(comp, "_NVRTC_VERSION", None)
    monkeypatch.setattr(comp, "cupy_cuda_major", lambda: real[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        assert comp.nvrtc_version() == real  # matching versions: no warning

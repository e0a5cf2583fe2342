"""benchmarks/ncu_bytes.py without a GPU: ncu CSV parsing, the predicted bytes per level, the table, the
command line, and that each case's op is the one the public API builds (on a fake device)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tiledsl
from tiledsl.target import Target

ROOT = Path(__file__).resolve().parent.parent
H200 = Target.known("H200")


def _load():
    spec = importlib.util.spec_from_file_location("ncu_bytes", ROOT / "benchmarks" / "ncu_bytes.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["ncu_bytes"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


nb = _load()

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
          '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')
MAIN = "tiledsl_gemm_f32f32f32_nn_v411_nobeta_64x64x16_0f1e2d3c"
RED = "tiledsl_gemm_splitk_reduce_f32_nobeta_sk16"


def _row(kid: int, kernel: str, metric: str, unit: str, value: str) -> str:
    block, grid = ("(256, 1, 1)", "(133, 16, 1)") if kernel == MAIN else ("(256, 1, 1)", "(1157, 1, 1)")
    return (f'"{kid}","48213","python3","127.0.0.1","{kernel}","1","7","{block}","{grid}","0","9.0",'
            f'"Command line profiler metrics","{metric}","{unit}","{value}"')


# what `ncu --csv --print-units base ...` prints for one split-K GEMM call: ncu's own lines, the child's line,
# then one row per (kernel, metric); large values carry thousands separators
SAMPLE = "\n".join([
    "==PROF== Connected to process 48213 (/usr/bin/python3.11)",
    "==PROF== Profiling \"tiledsl_gemm_f32f32f32_nn_v411_nobeta_64x64x16_0f1e2d3c\": 0%....50%....100% - 1 pass",
    "==PROF== Profiling \"tiledsl_gemm_splitk_reduce_f32_nobeta_sk16\": 0%....50%....100% - 1 pass",
    nb.CHILD_MARKER + json.dumps({"case": "gemm_f32_35x8457x2560", "device": "H200"}),
    "==PROF== Disconnected from process 48213",
    HEADER,
    _row(0, MAIN, "dram__bytes_read.sum", "byte", "88,473,600"),
    _row(0, MAIN, "dram__bytes_write.sum", "byte", "18,939,904"),
    _row(0, MAIN, "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum", "", "7,512,064"),
    _row(0, MAIN, "lts__t_bytes.sum", "byte", "180,338,688"),
    _row(1, RED, "dram__bytes_read.sum", "byte", "18,944,000"),
    _row(1, RED, "dram__bytes_write.sum", "byte", "1,184,000"),
    _row(1, RED, "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum", "", "0"),
    _row(1, RED, "lts__t_bytes.sum", "byte", "20,123,456"),
])


def test_parse_ncu_csv_reads_each_kernel_in_base_units():
    kernels = nb.parse_ncu_csv(SAMPLE)
    assert [k["kernel"] for k in kernels] == [MAIN, RED] and [k["id"] for k in kernels] == [0, 1]
    assert kernels[0]["grid"] == "(133, 16, 1)"
    assert kernels[0]["metrics"]["dram__bytes_read.sum"] == 88_473_600
    assert kernels[0]["metrics"]["l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"] == 7_512_064
    assert kernels[1]["metrics"]["lts__t_bytes.sum"] == 20_123_456
    m = nb.measured_bytes(kernels)
    assert m["dram_read"] == 88_473_600 + 18_944_000 and m["dram_write"] == 18_939_904 + 1_184_000
    assert m["dram_total"] == m["dram_read"] + m["dram_write"]
    assert m["l2"] == 180_338_688 + 20_123_456
    assert m["smem_wavefronts"] == 7_512_064 and m["smem"] == 7_512_064 * 128


def test_parse_scales_units_and_refuses_what_it_cannot_read():
    text = "\n".join([HEADER, _row(0, MAIN, "dram__bytes_read.sum", "Mbyte", "1.5"),
                      _row(0, MAIN, "lts__t_bytes.sum", "Kbyte", "2"),
                      _row(0, MAIN, "dram__bytes_write.sum", "byte", "n/a")])
    k = nb.parse_ncu_csv(text)[0]
    assert k["metrics"]["dram__bytes_read.sum"] == 1.5e6 and k["metrics"]["lts__t_bytes.sum"] == 2e3
    assert k["units"]["lts__t_bytes.sum"] == "Kbyte"
    assert nb.measured_bytes([k])["dram_write"] is None  # n/a stays unknown, never 0
    with pytest.raises(ValueError, match="unit 'Pbyte'"):
        nb.parse_ncu_csv("\n".join([HEADER, _row(0, MAIN, "lts__t_bytes.sum", "Pbyte", "1")]))
    with pytest.raises(ValueError, match="decimal comma"):
        nb.parse_ncu_csv("\n".join([HEADER, _row(0, MAIN, "lts__t_bytes.sum", "byte", "9,5")]))
    with pytest.raises(ValueError, match="Metric Value"):
        nb.parse_ncu_csv('"ID","Kernel Name","Metric Name","Metric Unit"\n"0","k","m","byte"')
    assert nb.parse_ncu_csv("==PROF== Disconnected\nno table here\n") == []
    with pytest.raises(ValueError, match="no kernel was profiled"):
        nb.measured_bytes([])


def test_predicted_bytes_are_positive_for_every_case_without_a_gpu():
    for case in nb.cases().values():
        p = nb.predicted_bytes(case.op, None, H200)
        for level in ("dram_read", "dram_write", "dram_total", "l2"):
            assert p[level] > 0, (case.name, level, p[level])
        assert p["dram_total"] == p["dram_read"] + p["dram_write"]
        if case.family == "reduce" or p["schedule"].get("kernel") == "gemv":
            assert p["smem"] is None  # no shared-memory level in the reduction model and the GEMV kernel's
            assert p["smem_requested"] is None and p["smem_wavefronts"] is None
        else:
            assert p["smem"] > 0 and p["smem_wavefronts"] == p["smem"] / 128, case.name
        assert p["schedule"] == tiledsl.api.family(case.family).default_schedule(case.op, H200).to_dict()


def test_predicted_bytes_match_the_worked_example():
    """docs/costmodel.md's 4096³ float32 example (128×128×8): L2 → SM 4 362 076 160 bytes."""
    p = nb.predicted_bytes(tiledsl.GemmOp(4096, 4096, 4096), tiledsl.GemmSchedule(), "H200")
    assert p["l2"] == 4_362_076_160
    assert p["dram_write"] == 4096 * 4096 * 4 and p["dram_read"] == 2 * 4096 * 4096 * 4
    assert p["smem_requested"] == 73_014_444_032 and p["smem"] < p["smem_requested"]  # broadcasts


def test_table_shows_predicted_measured_and_ratio():
    cs = nb.cases()
    gemm = cs["gemm_f32_35x8457x2560"]
    pred = nb.predicted_bytes(gemm.op, None, H200)
    kernels = nb.parse_ncu_csv(SAMPLE)
    meas = nb.measured_bytes(kernels)
    r = nb.ratios(pred, meas)
    assert r["l2"] == pytest.approx(meas["l2"] / pred["l2"])
    red = cs["reduce_sum_2p28"]
    red_pred = nb.predicted_bytes(red.op, None, H200)
    rows = [{"case": gemm.name, "family": "gemm", "predicted": pred, "measured": meas, "ratio": r,
             "kernels": kernels},
            {"case": red.name, "family": "reduce", "predicted": red_pred, "measured": None, "ratio": None,
             "kernels": [], "error": "exit status 1"}]
    lines = nb.markdown_table(rows).splitlines()
    assert lines[0].startswith("| case | schedule | kernels | DRAM read |") and len(lines) == 4
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    assert cells[0] == gemm.name and cells[2] == "2"
    assert cells[6] == f"{pred['l2']:.3g} / {meas['l2']:.3g} ({r['l2']:.2f})"
    red_cells = [c.strip() for c in lines[3].strip("|").split("|")]
    assert red_cells[2] == "error" and red_cells[-1] == "—" and red_cells[3] == f"{red_pred['dram_read']:.3g}"


def test_ncu_command_profiles_one_call_in_base_units():
    cmd = nb.ncu_command("/opt/ncu", "gemm_f32_4096", {"bm": 128})
    joined = " ".join(cmd)
    assert cmd[0] == "/opt/ncu" and "--csv" in cmd and "--clock-control none" in joined
    assert "--print-units base" in joined and "--profile-from-start off" in joined
    assert "--target-processes all" in joined and "-k regex:tiledsl_" in joined
    assert cmd[cmd.index("--metrics") + 1].split(",") == list(nb.METRICS.values())
    assert cmd[-4:] == ["--child", "gemm_f32_4096", "--schedule", '{"bm": 128}']


def test_schedules_file_forms_and_errors(tmp_path):
    known = nb.cases()
    s = tiledsl.preset("gemm", "sgemm_64x64_4x4")
    good = tmp_path / "s.json"
    good.write_text(json.dumps({"gemm_f32_4096": s.to_dict(), "gemm_f32_1024": {"schedule": s.to_dict()}}))
    got = nb.load_schedules(str(good), known)
    assert got == {"gemm_f32_4096": s, "gemm_f32_1024": s}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"gemm_f32_999": s.to_dict()}))
    with pytest.raises(SystemExit, match="unknown case 'gemm_f32_999'"):
        nb.load_schedules(str(bad), known)
    bad.write_text(json.dumps({"gemm_f32_4096": {"bm": "wide"}}))
    with pytest.raises(SystemExit, match="case 'gemm_f32_4096'"):
        nb.load_schedules(str(bad), known)


def test_predict_only_writes_every_case_without_a_gpu(tmp_path, capsys):
    out = tmp_path / "pred.json"
    assert nb.main(["--predict-only", "--device", "H200", "--cases", "gemv_f32_1x4096x4096,reduce_rowsum_16384",
                    "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert [r["case"] for r in data["rows"]] == ["gemv_f32_1x4096x4096", "reduce_rowsum_16384"]
    assert data["rows"][0]["predicted"]["smem"] is None  # the GEMV kernel has no shared memory
    assert "| gemv_f32_1x4096x4096 | gemv " in capsys.readouterr().out


@pytest.mark.skipif(tiledsl.gpu_available(), reason="a GPU is present: the script would run ncu")
def test_script_without_a_gpu_says_so_in_one_line(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TILEDSL_CACHE_DIR": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "ncu_bytes.py"), "--cases", "gemm_f32_1024"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("benchmarks/ncu_bytes.py: no GPU"), err


# ---------------------------------------------------------------- the cases' ops are what the API builds


@pytest.fixture
def fake_gpu(monkeypatch, fake_empty):
    """Launches go nowhere (the kernel's function is a no-op); arrays are CuPy views of fake addresses;
    the device is an H200. Kernels are really emitted and compiled (NVRTC needs no GPU)."""
    import cupy

    from tiledsl import cache, dependent, launch, runtime
    from tiledsl.compile import Kernel
    from tiledsl.gemm import api as gemm_api

    def workspace_ptr(ws, stream=None):
        return fake_empty((ws.count,), ws.dtype).data.ptr

    monkeypatch.setattr(Target, "current", staticmethod(lambda: H200))
    monkeypatch.setattr(runtime, "device_id", lambda: 0)
    monkeypatch.setattr(runtime, "cupy_empty", fake_empty)
    monkeypatch.setattr(cupy, "empty", fake_empty)
    monkeypatch.setattr(Kernel, "function", lambda self: (lambda *args, **kw: None))
    monkeypatch.setattr(dependent, "_USABLE", {0: False})  # a GPU machine's Hopper: no real driver call for a fake
    monkeypatch.setattr(gemm_api, "workspace_ptr", workspace_ptr)
    monkeypatch.setattr(launch, "_ptr", lambda cupy, ws, sp, dev: workspace_ptr(ws))
    monkeypatch.setattr(launch, "_GENERATION", [0])
    monkeypatch.setattr(cupy.cuda, "get_current_stream", lambda: runtime.StreamRef(0))
    cache.clear_all()
    yield fake_empty
    cache.clear_all()


FAKE_CASES = [n for n, c in nb.cases().items() if getattr(c.op, "dtype", None) != "bfloat16"]  # bf16: torch


@pytest.mark.parametrize("name", FAKE_CASES)
def test_the_child_call_builds_the_cases_op(fake_gpu, name):
    case = nb.cases()[name]
    fam = tiledsl.api.family(case.family)
    s = fam.default_schedule(case.op, H200)
    nb._runner(case, s, make=fake_gpu)()
    nb.check_built(case, s, H200)  # raises SystemExit when the API built another op
    with pytest.raises(SystemExit, match="did not build"):
        other = nb.Case(case.name, nb.gemm_case_op(35, 8457, 2560, "float16"), "")
        nb.check_built(other, s, H200)


def _fake_ncu(tmp_path: Path, stdout: str, status: int = 0) -> Path:
    """An executable standing in for ncu: records its arguments, prints ``stdout``, exits with ``status``."""
    (tmp_path / "ncu_out.txt").write_text(stdout)
    exe = tmp_path / "ncu"
    exe.write_text(f"#!{sys.executable}\nimport json, sys\n"
                   f"open({str(tmp_path / 'argv.json')!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
                   f"sys.stdout.write(open({str(tmp_path / 'ncu_out.txt')!r}).read())\nsys.exit({status})\n")
    exe.chmod(0o755)
    return exe


def test_profile_case_runs_ncu_and_sums_the_kernels(tmp_path):
    case = nb.cases()["gemm_f32_35x8457x2560"]
    schedule = tiledsl.GemmSchedule().to_dict()
    got = nb.profile_case(case, schedule, str(_fake_ncu(tmp_path, SAMPLE)), 60)
    assert got["error"] is None and got["child"]["case"] == case.name
    assert [k["kernel"] for k in got["kernels"]] == [MAIN, RED]
    assert got["measured"] == nb.measured_bytes(nb.parse_ncu_csv(SAMPLE))
    argv = json.loads((tmp_path / "argv.json").read_text())
    assert argv[-4:-2] == ["--child", case.name] and json.loads(argv[-1]) == schedule


def test_profile_case_reports_failures(tmp_path):
    case = nb.cases()["gemm_f32_1024"]
    no_child = "\n".join(line for line in SAMPLE.splitlines() if not line.startswith(nb.CHILD_MARKER))
    got = nb.profile_case(case, {}, str(_fake_ncu(tmp_path, no_child, status=1)), 60)
    assert got["measured"] is None and got["error"].startswith("exit status 1, 2 kernel(s) profiled")
    perm = "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters"
    got = nb.profile_case(case, {}, str(_fake_ncu(tmp_path, perm)), 60)
    assert got["error"].startswith("ERR_NVGPUCTRPERM: this user may not read")

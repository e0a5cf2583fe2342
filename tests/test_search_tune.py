"""search.tune end to end on the CPU: --model-only on a temporary SQLite study, resume, export, workers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import tiledsl

optuna = pytest.importorskip("optuna")
from optuna.trial import TrialState  # noqa: E402

from search import tune  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RULES = {r.name for r in tiledsl.GEMM_RULES}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("TILEDSL_CACHE_DIR", str(d))
    return d


def _args(db: Path, *extra: str, shape=("512", "384", "256")) -> list[str]:
    m, n, k = shape
    return ["gemm", "--m", m, "--n", n, "--k", k, "--model-only", "--storage", f"sqlite:///{db}",
            "--no-progress", *extra]


def _owned_keys(trials) -> list[str]:
    return [t.user_attrs["claim"][0] for t in trials
            if t.state == TrialState.COMPLETE and "duplicate_of" not in t.user_attrs]


def test_model_only_end_to_end_then_resume(tmp_path, cache, capsys):
    db = tmp_path / "t.db"
    out = tmp_path / "best"
    assert tune.main(_args(db, "--trials", "40", "--export", str(out), "--compile-top", "1")) == 0
    text = capsys.readouterr().out
    name = "gemm-512x384x256-float32-NN-H200-model"
    assert f"study {name!r}" in text and "model-only on H200" in text
    study = optuna.load_study(study_name=name, storage=f"sqlite:///{db}")
    trials = study.trials
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len([t for t in trials if t.user_attrs.get("rule") in (None, "duplicate")]) == 40  # rule-pruned not counted
    assert all(t.value > 0 and t.user_attrs["predicted_s"] > 0 for t in complete if "duplicate_of" not in t.user_attrs)
    assert any(t.user_attrs.get("seeded_by_model") for t in complete)
    pruned = [t for t in trials if t.state == TrialState.PRUNED]
    for t in pruned:  # every pruned point names the rule it broke (or the trial it duplicates)
        assert t.user_attrs["rule"] in RULES | {"duplicate"}, t.user_attrs
        assert "rule" in t.user_attrs["pruned_reason"] or "duplicate" in t.user_attrs["pruned_reason"]
    keys = _owned_keys(trials)
    assert len(keys) == len(set(keys)), "a schedule was evaluated twice"
    # the export: schedule.json + kernel.cu that NVRTC compiles (the launcher is skipped by __CUDACC_RTC__)
    rec = json.loads((out / "schedule.json").read_text())
    assert rec["mode"] == "model-only" and rec["arch"] == "sm_90" and rec["device"] == "H200"
    assert rec["op"]["m"] == 512 and rec["predicted"]["predicted_s"] > 0
    s = tiledsl.GemmSchedule.from_dict(rec["schedule"])
    src = (out / "kernel.cu").read_text()
    assert "tiledsl_launch" in src and "<<<grid, block, smem_bytes, stream>>>" in src
    from tiledsl.compile import KernelSource, compile_source

    name_k = rec["kernel"]["name"]
    k = compile_source(KernelSource(name_k, src, (s.threads, 1, 1), s.smem_bytes()), "sm_90")
    assert k.registers > 0 and len(k.cubin) > 1000
    assert "not stored for schedule=None" in text  # a prediction is never stored as tuned
    # resume: the same command adds trials to the same study and re-evaluates nothing
    assert tune.main(_args(db, "--trials", "15", "--compile-top", "1")) == 0
    text, n_before = capsys.readouterr().out, len(trials)
    assert f"{n_before} earlier trials (resuming)" in text
    study = optuna.load_study(study_name=name, storage=f"sqlite:///{db}")
    trials = study.trials
    keys = _owned_keys(trials)
    assert len(keys) == len(set(keys)) > 0
    # the report's rule counts are this run's trials, the whole study's on a line of their own
    from search.report import rule_counts

    this_run, whole = rule_counts(study, since=n_before), rule_counts(study)
    assert sum(this_run.values()) == sum(1 for t in trials if t.number >= n_before and t.user_attrs.get("rule")) > 0
    assert sum(whole.values()) == sum(1 for t in trials if t.user_attrs.get("rule")) > sum(this_run.values())
    assert "pruned by rule, this run: " + ", ".join(f"{k} {v}" for k, v in this_run.items()) + "\n" in text
    assert f"pruned by rule, the whole study ({len(trials)} trials over every run): " in text


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed on this machine")
def test_exported_kernel_compiles_with_nvcc(tmp_path, cache):
    out = tmp_path / "best"
    assert tune.main(_args(tmp_path / "t.db", "--trials", "12", "--export", str(out), "--compile-top", "1")) == 0
    r = subprocess.run(["nvcc", "-arch=sm_90", "-c", str(out / "kernel.cu"), "-o", str(tmp_path / "k.o")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "k.o").stat().st_size > 1000


@pytest.mark.parametrize("dtype,extra", [("float16", []), ("float32", ["--precision", "tf32"])])
def test_tensor_core_search_exports_a_tma_kernel_with_its_host_launcher(tmp_path, cache, capsys, dtype, extra):
    """float16 and tf32 search the tensor-core space; the model-only winner at 4096³ is a TMA kernel whose
    exported launcher takes pointers, encodes the tensor maps and compiles with nvcc where nvcc exists."""
    out = tmp_path / "best"
    args = ["gemm", "--m", "4096", "--n", "4096", "--k", "4096", "--dtype", dtype, *extra, "--trials", "40",
            "--model-only", "--storage", f"sqlite:///{tmp_path / 't.db'}", "--no-progress", "--export", str(out),
            "--compile-top", "2"]
    assert tune.main(args) == 0
    text = capsys.readouterr().out
    rec = json.loads((out / "schedule.json").read_text())
    s = tiledsl.GemmSchedule.from_dict(rec["schedule"])
    assert s.mma == "wgmma" and s.warp_specialize, text  # TMA wins the model's ranking at 4096³
    assert ("tf32" in rec["kernel"]["name"]) == bool(extra)
    src = (out / "kernel.cu").read_text()
    assert "cuTensorMapEncodeTiled" in src and "long long lda" in src and "__grid_constant__ tdsl_tensor_map tmap_a" in src
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed on this machine: the host launcher was not compiled")
    r = subprocess.run(["nvcc", "-gencode=arch=compute_90a,code=sm_90a", "-c", str(out / "kernel.cu"), "-o",
                        str(tmp_path / "k.o")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr


@pytest.mark.skipif(tiledsl.gpu_available(), reason="a GPU is present: the no-GPU fallback does not apply")
def test_no_gpu_runs_as_model_only_and_says_so(tmp_path, cache, capsys):
    args = [a for a in _args(tmp_path / "t.db", "--trials", "5", "--compile-top", "1") if a != "--model-only"]
    assert tune.main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("no CUDA GPU available here: running as --model-only for H200")


def test_study_of_another_op_is_refused(tmp_path, cache):
    db = tmp_path / "t.db"
    assert tune.main(_args(db, "--trials", "3", "--compile-top", "1", "--study-name", "s")) == 0
    with pytest.raises(SystemExit, match="was made for"):
        tune.main(_args(db, "--trials", "3", "--study-name", "s", shape=("64", "64", "64")))


def test_help_lists_the_options(capsys):
    with pytest.raises(SystemExit):
        tune.main(["gemm", "--help"])
    text = capsys.readouterr().out
    for opt in ("--trials", "--timeout", "--sampler", "--seed", "--storage", "--study-name", "--export",
                "--model-only", "--device", "--layout", "--dtype", "tpe", "cmaes", "qmc", "grid"):
        assert opt in text


def _two_workers(storage: str, tmp_path: Path, trials: int = 20) -> list:
    study = f"shared-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "TILEDSL_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "search.tune", "gemm", "--m", "1024", "--n", "1024", "--k", "512", "--model-only",
           "--trials", str(trials), "--storage", storage, "--study-name", study, "--no-progress",
           "--compile-top", "1"]
    procs = [subprocess.Popen([*cmd, "--seed", str(i)], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for i in range(2)]
    outs = [p.communicate(timeout=240)[0] for p in procs]
    for p, o in zip(procs, outs, strict=True):
        assert p.returncode == 0, o
    trials_ = optuna.load_study(study_name=study, storage=storage).trials
    assert len(trials_) >= 2 * trials, "each worker adds its trials to the one shared study"
    assert sorted(t.number for t in trials_) == list(range(len(trials_)))
    workers = {t.user_attrs.get("worker") for t in trials_} - {None}
    assert len(workers) == 2, workers
    keys = _owned_keys(trials_)
    assert len(keys) == len(set(keys)), "a schedule was evaluated by both workers"
    for w in workers:  # each worker evaluated exactly --trials candidates (pruned / duplicates not counted)
        mine = [t for t in trials_ if t.user_attrs.get("worker") == w and t.user_attrs.get("rule") in (None, "duplicate")]
        assert len(mine) == trials, (w, len(mine))
    return trials_


def test_two_workers_share_one_sqlite_study(tmp_path):
    _two_workers(f"sqlite:///{tmp_path / 'shared.db'}", tmp_path)


def test_two_workers_share_one_postgresql_study(tmp_path):
    url = os.environ.get("TILEDSL_TEST_PG_URL")
    if not url:
        pytest.skip("TILEDSL_TEST_PG_URL is not set (.ci/run starts a local PostgreSQL and sets it)")
    pytest.importorskip("psycopg2")
    _two_workers(url, tmp_path)


@pytest.mark.parametrize("kw,read_c", [(dict(bm=64, bn=64, bk=16, rm=4, rn=4, unroll=16, split_k=4), False),
                                       (dict(bm=64, bn=64, bk=16, rm=4, rn=4, unroll=16, split_k=3, stages=3), True),
                                       (dict(kernel="gemv", bm=4, bn=128, split_k=8), False),
                                       (dict(kernel="gemv", bm=4, bn=128, split_k=8, split_k_fused=True), True)])
def test_split_k_and_gemv_exports_launch_every_kernel_they_need(tmp_path, kw, read_c):
    """A split-K winner's kernel.cu holds the main kernel and the reduction kernel, and its launcher takes a
    workspace, launches both on the stream (the grid has SPLIT_K slices in y); a GEMV launcher uses the GEMV
    grid. NVRTC compiles the file (the launcher skipped), nvcc compiles kernels and launcher where it exists."""
    from search.export import write
    from tiledsl.compile import KernelSource, compile_source
    from tiledsl.gemm.emit import kernel_name_reduce
    from tiledsl.gemm.kernel_plan import gemv_widths

    op = tiledsl.GemmOp(35, 8457, 2560, read_c=read_c)
    s = tiledsl.GemmSchedule(**kw)
    k = tiledsl.compile(op, s, arch="sm_90")
    cu, _ = write(tmp_path, "gemm", op, s, k, {"mode": "model-only", "device": "H200"})
    src = cu.read_text()
    if s.kernel == "gemv":
        assert "dim3 grid((unsigned)((N + " in src and "SPLIT_K, (unsigned)((M + BM - 1) / BM))" in src
        if s.split_k_fused:  # one kernel; the caller passes its workspace and tickets (zeroed once), sizes checked
            assert src.count("__global__") == 1 and "tickets,\n    size_t w_bytes,\n    size_t tickets_bytes" in src
            assert "(A, B, W, C, M, N, K, lda, ldb, ldc, alpha, beta, tickets)" in src and "zeroed once" in src
            assert "w_bytes < w_need || tickets_bytes < tickets_need" in src and "tiledsl_split_k_workspace(" in src
            cols = 128 * gemv_widths(op, s)[1]  # the kernel's columns per block: 128 threads of B's width each
            assert f"((N + {cols} - 1) / {cols}) * ((M + BM - 1) / BM)" in src
    else:
        red = kernel_name_reduce(op, s)
        assert src.count("__global__") == 2 and f"{red}<<<" in src and "float* workspace" in src
        assert "(A, B, workspace, M, N, K, lda, ldb, N, 1.0f)" in src  # ldc of the workspace = N
        assert ("workspace, C, M, N, ldc, alpha, beta)" in src) == read_c
        assert "SPLIT_K, 1);" in src and src.count("constexpr int SPLIT_K") == 1
        compile_source(KernelSource(red, src, (256, 1, 1), 0), "sm_90")
    compile_source(KernelSource(k.name, src, k.block, k.dynamic_smem_bytes), "sm_90")
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed on this machine: the host launcher was not compiled")
    r = subprocess.run(["nvcc", "-arch=sm_90", "-c", str(cu), "-o", str(tmp_path / "k.o")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr


def test_the_library_default_is_measured_first(tmp_path, cache):
    """The first trial of a study is what schedule=None would run (GEMM: the plain 256x128 preset for
    float32 NN at 4096³), so a tune can never store a record slower than the default it replaces."""
    from search.space import GEMM_SPACE
    from tiledsl.gemm.family import builtin_schedule

    db = tmp_path / "t.db"
    args = ["gemm", "--m", "4096", "--n", "4096", "--k", "4096", "--trials", "4", "--model-only",
            "--storage", f"sqlite:///{db}", "--no-progress", "--compile-top", "1"]
    assert tune.main(args) == 0
    study = optuna.load_study(study_name=optuna.study.get_all_study_names(f"sqlite:///{db}")[0],
                              storage=f"sqlite:///{db}")
    first = min(study.trials, key=lambda t: t.number)
    assert first.user_attrs.get("seeded_by") == "library default"
    default = builtin_schedule(tiledsl.GemmOp(4096, 4096, 4096), tiledsl.Target.known("H200"))
    assert (default.bm, default.bn, default.fragment_prefetch) == (256, 128, False)
    assert first.params == GEMM_SPACE.from_schedule(default)


def _default_and_stale_seeds(n: int):
    """(space, op, target, the library default's params, ``n`` other seed points' params) for 512x384x256."""
    from search.objective import Model
    from search.space import space_for
    from search.strategy import library_default, predict_seeds

    op, h200 = tiledsl.GemmOp(512, 384, 256), tiledsl.Target.known("H200")
    space = space_for("gemm").for_op(op)
    default = space.from_schedule(library_default(space, op, h200))
    stale = [p for p in (space.from_schedule(s) for _, s in predict_seeds(space, Model(), op, h200, n + 1))
             if p is not None and p != default][:n]
    assert default is not None and len(stale) == n
    return space, op, h200, default, stale


def _of_default(study, default: dict) -> list:
    return [t for t in study.get_trials(deepcopy=False) if t.system_attrs.get("fixed_params", t.params) == default]


@pytest.mark.parametrize("where", ["absent", "behind", "behind as a model seed"])
def test_a_resumed_study_measures_the_library_default_before_its_stale_waiting_seeds(tmp_path, cache, where):
    """An earlier run left model seeds WAITING (Optuna pops them first in, first out) and did not seed the
    default (an older study) or enqueued it behind them: a short resumed run still measures the default, and
    first; it is not enqueued twice."""
    _, _, _, default, stale = _default_and_stale_seeds(4)
    storage, name = f"sqlite:///{tmp_path / 't.db'}", "resumed"
    study = optuna.create_study(storage=storage, study_name=name, direction="minimize")
    for p in stale:
        study.enqueue_trial(p, user_attrs={"seeded_by_model": True})
    if where != "absent":
        study.enqueue_trial(default, user_attrs={"seeded_by": "library default"} if where == "behind"
                            else {"seeded_by_model": True})
    assert tune.main(_args(tmp_path / "t.db", "--study-name", name, "--trials", "2", "--seed-top", "0",
                           "--compile-top", "1")) == 0
    study = optuna.load_study(study_name=name, storage=storage)
    ours = _of_default(study, default)
    assert len(ours) == 1 and ours[0].state == TrialState.COMPLETE, [(t.number, t.state) for t in ours]
    assert ours[0].user_attrs["seeded_by"] == "library default"  # so never model-pruned, and found by finalists
    started = sorted((t for t in study.trials if t.datetime_start is not None), key=lambda t: t.datetime_start)
    assert started[0].number == ours[0].number  # the first trial this run evaluated
    assert len(started) == 2 and started[1].number == 0  # then the oldest stale seed
    assert [t.number for t in study.trials if t.state == TrialState.WAITING] == [1, 2, 3]


@pytest.mark.parametrize("state, attrs, settled", [
    (TrialState.COMPLETE, {}, True),
    (TrialState.FAIL, {"error": "compile failed"}, True),  # measured, and would fail again
    (TrialState.PRUNED, {"rule": "duplicate"}, True),
    (TrialState.FAIL, {}, False),  # never evaluated (interrupted, or its worker died): owns nothing
    (TrialState.PRUNED, {"rule": "model_prune"}, False),  # a sampled copy pruned before the default was seeded
])
def test_seed_study_enqueues_the_default_unless_a_trial_settles_it(state, attrs, settled):
    from search.objective import Model
    from search.strategy import ask_waiting, seed_study

    space, op, h200, default, stale = _default_and_stale_seeds(2)
    study = optuna.create_study(direction="minimize")
    study.enqueue_trial(default, user_attrs={"seeded_by": "library default"})
    t = study.ask()
    space.suggest(t)
    for k, v in attrs.items():
        t.set_user_attr(k, v)
    study.tell(t, 1e-3 if state == TrialState.COMPLETE else None, state=state)
    for p in stale:
        study.enqueue_trial(p)
    first = seed_study(study, space, Model(), op, h200, 0)
    assert len(_of_default(study, default)) == (1 if settled else 2)
    if settled:
        assert first is None
        return
    assert ask_waiting(study, first).number == 3  # enqueued again, behind the stale seeds, and taken first
    assert seed_study(study, space, Model(), op, h200, 0) is None  # now RUNNING: settled
    assert [study.ask().number for _ in stale] == [1, 2]


def test_seed_study_keeps_a_waiting_default_and_a_fresh_study_order():
    from search.objective import Model
    from search.strategy import seed_study

    space, op, h200, default, _ = _default_and_stale_seeds(1)
    study = optuna.create_study(direction="minimize")
    first = seed_study(study, space, Model(), op, h200, 3)
    trials = study.get_trials(deepcopy=False)
    assert trials[0].system_attrs["fixed_params"] == default and trials[0]._trial_id == first
    assert trials[0].user_attrs == {"seeded_by": "library default"} and len(trials) == 4  # then the model's 3
    assert seed_study(study, space, Model(), op, h200, 3) == first  # resumed: nothing enqueued twice
    assert len(study.get_trials(deepcopy=False)) == 4


def test_model_only_exports_the_library_default_within_the_model_resolution(tmp_path, cache, capsys):
    """At 4096³ float32 the model predicts the fastest schedules within a few percent of each other: the
    measured library default (the 256x128 preset) is exported rather than an arbitrary near-tie."""
    from search.finalists import MODEL_RESOLUTION

    out = tmp_path / "best"
    args = ["gemm", "--m", "4096", "--n", "4096", "--k", "4096", "--trials", "30", "--model-only", "--storage",
            f"sqlite:///{tmp_path / 't.db'}", "--no-progress", "--export", str(out), "--compile-top", "2"]
    assert tune.main(args) == 0
    text = capsys.readouterr().out
    s = tiledsl.GemmSchedule.from_dict(json.loads((out / "schedule.json").read_text())["schedule"])
    assert not s.fragment_prefetch and (s.bm, s.bn, s.rm, s.rn) == (256, 128, 16, 8), text
    assert f"predicted within {MODEL_RESOLUTION:.0%} of the best prediction" in text
    assert "* = winner: the library default (trial 0)" in text
    rows = [r["trial"] for r in json.loads((out / "report.json").read_text())["rows"]]
    assert len(rows) == len(set(rows)), rows  # the kept default's row replaces its uncompiled one, not beside it


def test_fused_gemv_launcher_refuses_small_or_misaligned_buffers_before_launching(tmp_path):
    """The exported launcher of a GEMV that sums its own K slices sizes W and the tickets with
    tiledsl_split_k_workspace and returns cudaErrorInvalidValue, without launching, for a W or tickets buffer smaller
    than that or a W not 16-byte aligned, and lets exact sizes through. Built with nvcc and run on the host: no kernel
    runs (the exact case has M = 0, an empty grid)."""
    from search.export import write

    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed on this machine: the host launcher was not built")
    op = tiledsl.GemmOp(4, 1000, 4096)
    s = tiledsl.GemmSchedule(kernel="gemv", bm=4, bn=128, split_k=8, split_k_fused=True)
    cu, _ = write(tmp_path, "gemm", op, s, tiledsl.compile(op, s, arch="sm_90"), {"mode": "model-only"})
    (tmp_path / "main.cu").write_text("""#include <cstdio>
#include <cuda_runtime.h>
extern "C" cudaError_t tiledsl_split_k_workspace(int M, int N, size_t* w_bytes, size_t* tickets_bytes);
extern "C" cudaError_t tiledsl_launch(const float* A, const float* B, float* W, float* C, int M, int N, int K,
    long long lda, long long ldb, long long ldc, float alpha, unsigned int* tickets, size_t w_bytes,
    size_t tickets_bytes, cudaStream_t stream);
int main() {
  size_t w = 0, t = 0;
  if (tiledsl_split_k_workspace(4, 1000, &w, &t) != cudaSuccess) return 1;
  std::printf("%zu %zu\\n", w, t);
  float* aligned = reinterpret_cast<float*>(256);
  float* odd = reinterpret_cast<float*>(260);
  unsigned int* tk = reinterpret_cast<unsigned int*>(512);
  int refused = (tiledsl_launch(0, 0, aligned, 0, 4, 1000, 4096, 4096, 1000, 1000, 1.f, tk, w - 4, t, 0)
                 == cudaErrorInvalidValue)
              + (tiledsl_launch(0, 0, aligned, 0, 4, 1000, 4096, 4096, 1000, 1000, 1.f, tk, w, t - 4, 0)
                 == cudaErrorInvalidValue)
              + (tiledsl_launch(0, 0, odd, 0, 4, 1000, 4096, 4096, 1000, 1000, 1.f, tk, w, t, 0)
                 == cudaErrorInvalidValue);
  std::printf("%d\\n", refused);
  // the exact sizes for M = 0 pass the guard and reach the launch, refused by CUDA for its empty grid (or for the
  // missing GPU), never as cudaErrorInvalidValue: nothing runs, whatever the machine
  size_t w0 = 0, t0 = 0;
  if (tiledsl_split_k_workspace(0, 1000, &w0, &t0) != cudaSuccess) return 1;
  std::printf("%d\\n", (int)(tiledsl_launch(0, 0, aligned, 0, 0, 1000, 4096, 4096, 1000, 1000, 1.f, tk, w0, t0, 0)
                             != cudaErrorInvalidValue));
  return 0;
}
""")
    exe = tmp_path / "refuse"
    r = subprocess.run(["nvcc", "-arch=sm_90", str(cu), str(tmp_path / "main.cu"), "-o", str(exe)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    sizes, refused, passed = out.stdout.split("\n")[:3]
    assert sizes == f"{8 * 4 * 1000 * 4} {2 * 1 * 4}"  # SPLIT_K·M·N floats; ceil(1000 / 512) · ceil(4 / 4) tickets
    assert refused == "3" and passed == "1"  # too small or misaligned: refused; exact: past the guard


def test_a_few_rows_tune_searches_and_exports_the_gemv_kernel(tmp_path, cache, capsys):
    """A model-only tune of a decode product (1×4096×4096) samples the GEMV-style kernel's space, measures the library
    default first, and exports a GEMV kernel with its launcher."""
    out = tmp_path / "best"
    args = ["gemm", "--m", "1", "--n", "4096", "--k", "4096", "--trials", "20", "--model-only", "--storage",
            f"sqlite:///{tmp_path / 't.db'}", "--no-progress", "--export", str(out), "--compile-top", "2"]
    assert tune.main(args) == 0
    text = capsys.readouterr().out
    s = tiledsl.GemmSchedule.from_dict(json.loads((out / "schedule.json").read_text())["schedule"])
    assert s.kernel == "gemv" and s.bm == 1, text
    report = json.loads((out / "report.json").read_text())
    first = min(report["trials"], key=lambda t: t["number"])
    from tiledsl.gemm.family import builtin_schedule
    assert first["schedule"] == builtin_schedule(tiledsl.GemmOp(1, 4096, 4096), tiledsl.Target.known("H200")).to_dict()
    assert all(t["schedule"]["kernel"] == "gemv" for t in report["trials"] if t.get("schedule"))
    assert "tiledsl_gemv_gemm" in (out / "kernel.cu").read_text()


def test_mma_dmma_searches_the_fp64_gemv_space_and_refuses_what_it_cannot_run(tmp_path, cache, capsys):
    """--mma dmma: a model-only tune of 16×4096×4096 x @ W.T samples only the GEMV kernel on the FP64 tensor cores
    (gemv_dmma_schedule's pick among the space's seeds), names its study apart (-dmma) and exports a kernel whose source holds the
    float64 mma.sync; products the kernel cannot run are refused before the search, naming the rule or the rows."""
    out = tmp_path / "best"
    args = ["gemm", "--m", "16", "--n", "4096", "--k", "4096", "--layout", "NT", "--mma", "dmma", "--trials", "12",
            "--model-only", "--storage", f"sqlite:///{tmp_path / 't.db'}", "--no-progress", "--export", str(out),
            "--compile-top", "1"]
    assert tune.main(args) == 0
    text = capsys.readouterr().out
    assert "gemm-16x4096x4096-float32-NT-H200-dmma-model" in text
    report = json.loads((out / "report.json").read_text())
    schedules = [t["schedule"] for t in report["trials"] if t.get("schedule")]
    assert schedules and all((d["kernel"], d["mma"]) == ("gemv", "dmma") for d in schedules)
    from search.space import gemv_dmma_space
    from tiledsl.gemm.family import gemv_dmma_schedule
    op, h200 = tiledsl.GemmOp(16, 4096, 4096, layout_b="col"), tiledsl.Target.known("H200")
    assert gemv_dmma_schedule(op, h200) in gemv_dmma_space(op).seeds(op, h200), "the pick is among the seeds"
    assert "mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64" in (out / "kernel.cu").read_text()
    for extra, what in ((["--m", "17", "--n", "64", "--k", "64"], "M = 17 rows"),
                        (["--m", "16", "--n", "64", "--k", "64", "--ship"], "--ship with --mma dmma"),
                        (["--m", "16", "--n", "64", "--k", "64", "--layout", "TN"], "rule gemv_mma_layouts"),
                        (["--m", "16", "--n", "64", "--k", "64", "--precision", "3xtf32"], "rule gemv_dmma_float32"),
                        (["--m", "16", "--n", "64", "--k", "66"], "rule gemv_mma_16_byte_operands")):
        with pytest.raises(SystemExit):
            tune.main(["gemm", *extra, "--mma", "dmma", "--model-only", "--storage",
                       f"sqlite:///{tmp_path / 'r.db'}", "--no-progress"])
        assert what in capsys.readouterr().err, what



def test_mma_dmma_refuses_a_device_before_sm_90_and_a_study_of_the_other_space(tmp_path, cache, capsys):
    """--mma dmma on an A100 (sm_80) stops before the search, naming the device and rule dmma_needs_sm_90; a study made
    by one space is refused to a run of the other (its meta names the space), so no FP64 trial reaches a search of the
    FMA kernels or the reverse. Where schedule=None is the FP64 kernel (16 rows of x @ W.T on an H200) a plain tune
    searches that space: named -dmma, sampling FP64 kernels only, sharing its study with --mma dmma."""
    db = f"sqlite:///{tmp_path / 't.db'}"
    common = ["--layout", "NT", "--model-only", "--storage", db, "--no-progress", "--trials", "4", "--compile-top", "1",
              "--export", str(tmp_path / "out")]
    base = ["gemm", "--m", "8", "--n", "4096", "--k", "4096", *common]  # 8 rows: schedule=None's FMA GEMV kernel
    with pytest.raises(SystemExit, match=r"--mma dmma on A100 \(sm_80\): .*rule dmma_needs_sm_90"):
        tune.main([*base, "--mma", "dmma", "--device", "A100"])
    assert tune.main([*base, "--mma", "dmma", "--study-name", "shared"]) == 0
    with pytest.raises(SystemExit, match="study 'shared' .* was made for .*'mma': 'dmma'"):
        tune.main([*base, "--study-name", "shared"])
    sixteen = ["gemm", "--m", "16", "--n", "4096", "--k", "4096", *common]
    capsys.readouterr()
    assert tune.main(sixteen) == 0  # a plain tune: the FP64 space, where schedule=None's kernel lives
    text = capsys.readouterr().out
    assert "gemm-16x4096x4096-float32-NT-H200-dmma-model" in text
    import optuna

    study = optuna.load_study(study_name="gemm-16x4096x4096-float32-NT-H200-dmma-model", storage=db)
    assert study.user_attrs["meta"]["mma"] == "dmma" and "ring" in study.trials[0].params
    assert tune.main([*sixteen, "--mma", "dmma"]) == 0  # the same study, resumed by --mma dmma
    assert len(optuna.load_study(study_name="gemm-16x4096x4096-float32-NT-H200-dmma-model", storage=db).trials) == 8


def test_a_measured_fp64_winner_is_stored_only_where_schedule_none_runs_that_kernel(tmp_path, cache):
    """export_winner (measured mode, the GPU's figures given): a plain tune's FP64 GEMV winner is stored where
    schedule=None runs that kernel on the device (16 rows of x @ W.T on an H200: its space holds the default), and
    schedule=None then reads it; the same winner of --mma dmma is never stored (whatever schedule=None runs), nor a
    plain tune's FP64 winner where schedule=None runs the FMA kernels (8 rows)."""
    from search.config import TuneConfig
    from search.export import export_winner
    from search.finalists import Finalist
    from tiledsl.gemm.family import gemv_dmma_schedule
    from tiledsl.registry import lookup

    h200 = tiledsl.Target.known("H200")
    for m, n, mma, stored in ((16, 4096, "auto", True), (16, 6144, "dmma", False), (8, 4096, "auto", False)):
        op = tiledsl.GemmOp(m, n, 4096, layout_b="col")
        winner = Finalist(number=0, schedule=gemv_dmma_schedule(op, h200), median_s=3e-5, spread=0.01)
        lines = []
        export_winner(TuneConfig(family="gemm", op=op, mma=mma), str(tmp_path / f"out{m}-{n}-{mma}"), op, h200, winner,
                      4e-5, "measured", "study", "model", "2026-12-05", out=lines.append)
        text = "\n".join(lines)
        assert ("stored for schedule=None:" in text and "not stored" not in text) == stored, (m, mma, text)
        assert (lookup("gemm", op, h200) == winner.schedule) == stored, (m, mma)

"""Faults and bad files: caches, stores and studies that never lie and never wedge (CPU only).

One section per class of fault: 1. every file tiledsl reads may be bad (kernel disk cache, tuned-schedule
store, calibration, shipped presets) and concurrent writers must not lose records (16 real processes);
2. in-process caches are thread-safe; 3. studies survive their workers (a killed worker's RUNNING trial
expires, a malformed trial is skipped, Ctrl-C of a real process reports and exits 130); 4. the CLI
validates before searching; 5. no credential from a storage URL is printed or written; 6. empty ops and
explain/predict applying compile's rules. Compiling needs NVRTC only (no GPU).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest

import tiledsl
from search import tune
from tiledsl import GemmOp, GemmSchedule, ReduceOp, ReduceSchedule, TransposeOp, registry
from tiledsl.errors import BadFileWarning

ROOT = Path(__file__).resolve().parents[1]
H200 = tiledsl.Target.known("H200")
OP = GemmOp(4096, 4096, 4096)
S = GemmSchedule(bm=128, bn=64, bk=16, rm=8, rn=4, unroll=16)
SMALL = TransposeOp(shape=(64, 96))  # a kernel NVRTC compiles in well under a second


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("TILEDSL_CACHE_DIR", str(d))
    tiledsl.api.clear_kernel_cache()
    _compile_mod()._MEM_CACHE.clear()
    return d


def _env(cache_dir: Path) -> dict:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)  # keep the caller's
    return {**os.environ, "PYTHONPATH": path, "TILEDSL_CACHE_DIR": str(cache_dir), "PYTHONWARNINGS": "default"}


def _bad_file_warnings(record) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, getattr(tiledsl.errors, "BadFileWarning", ()))]


def _compile_mod():
    import importlib

    return importlib.import_module("tiledsl.compile")


# ---------------------------------------------------------------- 1. bad files: verify, warn once, recover


def _cached_entry(cache: Path) -> tuple[Path, Path]:
    cubins = list((cache / "kernels").glob("*.cubin"))
    assert len(cubins) == 1, cubins
    return cubins[0], cubins[0].with_suffix(".log")


@pytest.mark.parametrize("damage", ["truncate", "empty", "overwrite"])
def test_a_damaged_cubin_in_the_disk_cache_is_recompiled_with_one_warning(cache, damage):
    k0 = tiledsl.compile(SMALL, arch="sm_90")
    cubin, _ = _cached_entry(cache)
    data = cubin.read_bytes()
    cubin.write_bytes({"truncate": data[:len(data) // 2], "empty": b"",
                       "overwrite": b"\x7fELF" + bytes(len(data) - 4)}[damage])
    _compile_mod()._MEM_CACHE.clear()
    tiledsl.api.clear_kernel_cache()
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        k1 = tiledsl.compile(SMALL, arch="sm_90")
    assert k1.cubin == k0.cubin and k1.registers == k0.registers > 0
    bad = _bad_file_warnings(rec)
    assert len(bad) == 1 and cubin.name in bad[0] and "recompiling" in bad[0], bad
    assert cubin.read_bytes() == k0.cubin  # the entry was repaired on disk


def test_a_damaged_ptxas_log_never_yields_zero_registers(cache):
    k0 = tiledsl.compile(SMALL, arch="sm_90")
    _, log = _cached_entry(cache)
    log.write_text("garbage")
    _compile_mod()._MEM_CACHE.clear()
    tiledsl.api.clear_kernel_cache()
    with pytest.warns(BadFileWarning, match="kernel-cache"):
        k1 = tiledsl.compile(SMALL, arch="sm_90")
    assert k1.registers == k0.registers > 0


STORE_FAULTS = {
    "null record": lambda rec: {"records": [None, rec]},
    "field of the wrong type": lambda rec: {"records": [{**rec, "op": "4096x4096"}, rec]},
    "schedule not an object": lambda rec: {"records": [{**rec, "schedule": [1, 2]}, rec]},
    "NaN figure": lambda rec: {"records": [{**rec, "measured": {"median_s": float("nan")}}, rec]},
    "records not a list": lambda rec: {"records": {"a": rec}},
    "a list": lambda rec: [rec],
    "truncated": None,
    "nested past Python's recursion limit": "deep",
}


@pytest.mark.parametrize("fault", list(STORE_FAULTS))
def test_a_bad_tuned_schedule_store_is_skipped_with_a_warning(cache, fault, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    path = registry.store("gemm", OP, H200, S)
    good = json.loads(path.read_text())["records"][0]
    damage = STORE_FAULTS[fault]
    text = (json.dumps(good)[:40] if damage is None else "[" * 100_000 if damage == "deep"
            else json.dumps(damage(good)))
    path.write_text(text)
    with pytest.warns(BadFileWarning, match=str(path).replace("\\", "\\\\")):
        got = registry.lookup("gemm", OP, H200)
    keeps_good = fault in ("null record", "field of the wrong type", "schedule not an object", "NaN figure")
    assert got == (S if keeps_good else None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BadFileWarning)
        assert isinstance(tiledsl.gemm_default_schedule(OP, H200) if hasattr(tiledsl, "gemm_default_schedule")
                          else tiledsl.api.family("gemm").default_schedule(OP, H200), GemmSchedule)
        registry.store("gemm", GemmOp(64, 64, 64), H200, S)  # the writer copes with the bad file too
        assert registry.lookup("gemm", GemmOp(64, 64, 64), H200) == S
        assert tune.main(["gemm", "--m", "4096", "--n", "4096", "--k", "4096", "--lookup"]) == 0


def test_a_store_keeps_its_permission_bits_when_rewritten(cache, tmp_path):
    """A shared store (0644) stays readable to its other users after a write (atomic_write's temporary file is
    private, 0600, until it is given the old file's bits); a new file gets 0666 less the umask, as open() gives."""
    from tiledsl.filestore import atomic_write

    path = registry.store("gemm", OP, H200, S)
    os.chmod(path, 0o644)
    registry.store("gemm", GemmOp(64, 64, 64), H200, S)
    assert (path.stat().st_mode & 0o777) == 0o644
    fresh = tmp_path / "fresh.json"
    atomic_write(fresh, "{}")
    mask = os.umask(0o22)
    os.umask(mask)
    assert (fresh.stat().st_mode & 0o777) == 0o666 & ~mask


def test_every_damaged_store_is_kept_and_killed_writers_leftovers_are_removed(cache, tmp_path):
    """Two corruptions in a row keep both damaged versions (.corrupt, .corrupt-2), and a temporary file a killed
    writer left an hour ago is removed by the next write (a young one, maybe a live writer's, is left alone)."""
    from tiledsl.filestore import STALE_TMP_S

    path = registry.store("gemm", OP, H200, S)
    old_tmp, young_tmp = path.parent / f".{path.name}.tmp-old", path.parent / f".{path.name}.tmp-young"
    old_tmp.write_text("{")
    young_tmp.write_text("{")
    os.utime(old_tmp, (time.time() - STALE_TMP_S - 60,) * 2)
    for damage in ("first damage", "second damage"):
        path.write_text(damage)
        with warnings.catch_warnings():  # one warning per process and problem: the second may stay silent
            warnings.simplefilter("ignore", BadFileWarning)
            registry.store("gemm", OP, H200, S)
    assert (path.parent / f"{path.name}.corrupt").read_text() == "first damage"
    assert (path.parent / f"{path.name}.corrupt-2").read_text() == "second damage"
    assert not old_tmp.exists() and young_tmp.exists() and registry.lookup("gemm", OP, H200) == S


def test_sixteen_concurrent_tuner_processes_lose_no_record(cache, tmp_path):
    go = tmp_path / "go"
    script = (
        "import os, sys, time, tiledsl\n"
        "from tiledsl import registry\n"
        "i = int(sys.argv[1]); t = tiledsl.Target.known('H200')\n"
        "s = tiledsl.GemmSchedule(bm=128, bn=64, bk=16, rm=8, rn=4, unroll=16)\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.01)\n"
        "for j in range(3):\n"
        "    registry.store('gemm', tiledsl.GemmOp(64 * (i + 1), 64 * (j + 1), 64), t, s, measured={'median_s': 1e-3})\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(i)], env=_env(cache), cwd=ROOT,
                              stderr=subprocess.PIPE, text=True) for i in range(16)]
    time.sleep(3)  # let every process import tiledsl and wait at the start line
    go.write_text("go")
    errs = [p.communicate(timeout=300)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), errs
    records = json.loads(registry.user_store_path("gemm", "sm_90").read_text())["records"]
    have = {(r["op"]["m"], r["op"]["n"]) for r in records}
    assert have == {(64 * (i + 1), 64 * (j + 1)) for i in range(16) for j in range(3)}, len(have)


def test_two_bad_records_give_one_warning_naming_both(cache):
    path = registry.store("gemm", OP, H200, S)
    good = json.loads(path.read_text())["records"][0]
    path.write_text(json.dumps({"records": [None, good, 7]}))
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        assert registry.lookup("gemm", OP, H200) == S
        assert registry.lookup("gemm", OP, H200) == S
    bad = _bad_file_warnings(rec)
    assert len(bad) == 1 and "record 0" in bad[0] and "record 2" in bad[0], bad


def test_processes_compiling_the_same_kernel_at_once_share_one_good_cache_entry(cache, tmp_path):
    go = tmp_path / "go"
    script = (
        "import os, time, warnings, tiledsl\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.01)\n"
        "with warnings.catch_warnings():\n"
        "    warnings.simplefilter('error', tiledsl.errors.BadFileWarning)\n"
        "    k = tiledsl.compile(tiledsl.TransposeOp(shape=(64, 96)), arch='sm_90')\n"
        "print(k.registers, len(k.cubin))\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script], env=_env(cache), cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(6)]
    time.sleep(3)
    go.write_text("go")
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    assert len({o for o, _ in outs}) == 1 and not outs[0][0].startswith("0 "), outs
    assert len(list((cache / "kernels").glob("*.cubin"))) == 1


CALIBRATION_FAULTS = {
    "NaN figure": {"figures": {"hbm_bytes_per_s": {"value": float("nan"), "method": "x"}}},
    "zero figure": {"figures": {"hbm_bytes_per_s": {"value": 0, "method": "x"}}},
    "no value": {"figures": {"hbm_bytes_per_s": {"method": "x"}}},
    "figures a list": {"figures": [1, 2]},
    "a list": [1, 2],
    "unknown figure": {"figures": {"tflops": {"value": 1.0, "method": "x"}}},
}


@pytest.mark.parametrize("fault", list(CALIBRATION_FAULTS))
def test_a_bad_calibration_file_is_skipped_and_the_search_still_works(cache, fault, tmp_path, capsys, monkeypatch):
    from tiledsl.calibrate import calibration_path, load_calibration

    monkeypatch.chdir(tmp_path)
    path = calibration_path(H200)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(CALIBRATION_FAULTS[fault]))  # json.dumps writes NaN as NaN
    with pytest.warns(BadFileWarning, match="calibration"):
        t = load_calibration(H200)
    assert t == H200  # unchanged: the table's figures
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rc = tune.main(["gemm", "--m", "256", "--n", "256", "--k", "256", "--model-only", "--trials", "6",
                        "--storage", f"sqlite:///{tmp_path / 't.db'}", "--no-progress", "--compile-top", "1"])
    out = capsys.readouterr().out
    assert rc == 0 and "complete 6" in out, out[-2000:]


def test_a_broken_shipped_presets_file_or_preset_is_skipped(tmp_path, monkeypatch):
    import types

    fam = tmp_path / "transpose"
    fam.mkdir()
    good = json.loads((ROOT / "schedules" / "transpose" / "presets.json").read_text())
    first = next(iter(good))
    fam.joinpath("presets.json").write_text(json.dumps({**good, "broken": {"schedule": {"tile": "x"}}, "null": None}))
    monkeypatch.setattr(registry, "resources", types.SimpleNamespace(files=lambda pkg: tmp_path))
    registry._raw.cache_clear()
    try:
        with pytest.warns(BadFileWarning, match="broken"):
            table = registry.presets("transpose")
        assert first in table and "broken" not in table and "null" not in table
        fam.joinpath("presets.json").write_text("{ truncated")
        registry._raw.cache_clear()
        with pytest.warns(BadFileWarning, match="presets"):
            assert registry.presets("transpose") == {}
    finally:
        registry._raw.cache_clear()


# ---------------------------------------------------------------- 2. in-process caches are thread-safe


def test_the_kernel_lru_survives_concurrent_clears():
    op = GemmOp(64, 64, 64)
    s = GemmSchedule(bm=64, bn=64, bk=16, rm=4, rn=4)
    tiledsl.compile(op, s, arch="sm_90")
    errors: list[BaseException] = []
    stop = threading.Event()

    def compiler():
        try:
            while not stop.is_set():
                tiledsl.compile(op, s, arch="sm_90")
        except BaseException as exc:
            errors.append(exc)

    def clearer():
        while not stop.is_set():
            tiledsl.api.clear_kernel_cache()

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=compiler) for _ in range(4)] + [threading.Thread(target=clearer)]
        for t in threads:
            t.start()
        time.sleep(4)
        stop.set()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert not errors, repr(errors[0])


# ---------------------------------------------------------------- 3. studies survive their workers


def _tune_cmd(db: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "search.tune", "gemm", "--m", "256", "--n", "256", "--k", "256", "--model-only",
            "--storage", f"sqlite:///{db}", "--study-name", "s", "--no-progress", *extra]


def _trials(db: Path) -> list:
    import optuna

    return optuna.load_study(study_name="s", storage=f"sqlite:///{db}").get_trials(deepcopy=False)


def _wait_for_trials(db: Path, n: int, proc, timeout_s: float = 120) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        assert proc.poll() is None, proc.communicate()
        try:
            if len(_trials(db)) >= n:
                return
        except Exception:  # the study is not created yet
            pass
        time.sleep(0.3)
    pytest.fail(f"no {n} trials after {timeout_s} s")


def test_a_killed_workers_running_trial_expires_and_its_schedule_is_evaluated_again(cache, tmp_path):
    from optuna.trial import TrialState

    db = tmp_path / "t.db"
    running = []
    for _ in range(5):  # kill -9 a real worker until it dies holding a RUNNING trial
        p = subprocess.Popen(_tune_cmd(db, "--trials", "100000", "--stale-after", "2"), cwd=tmp_path, env=_env(cache),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        _wait_for_trials(db, len(_trials(db)) + 20 if db.exists() else 20, p)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=60)
        running = [t for t in _trials(db) if t.state == TrialState.RUNNING]
        if running:
            break
    assert running, "the worker never died holding a trial"
    time.sleep(3)  # longer than --stale-after: its heartbeat is stale now
    r = subprocess.run(_tune_cmd(db, "--trials", "5", "--stale-after", "2"), cwd=tmp_path, env=_env(cache),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    after = {t.number: t for t in _trials(db)}
    assert all(after[t.number].state == TrialState.FAIL for t in running)
    assert not [t for t in after.values() if t.state == TrialState.RUNNING]
    dead = {t.number for t in running}
    assert not [t for t in after.values() if t.user_attrs.get("duplicate_of") in dead], \
        "a later trial was skipped as a duplicate of the dead worker's trial"


def _write_locked(db: Path) -> bool:
    """True when another connection holds SQLite's write lock on ``db`` (a stopped process mid-transaction)."""
    import sqlite3

    con = sqlite3.connect(db, timeout=0.2, isolation_level=None)
    try:
        con.execute("BEGIN IMMEDIATE")
        con.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError:
        return True
    finally:
        con.close()


def test_a_suspended_worker_whose_trial_expired_carries_on(cache, tmp_path):
    """SIGSTOP a worker past --stale-after, let another expire its trial, SIGCONT: it drops that trial's result
    with a warning instead of dying on Optuna's UpdateFinishedTrialError."""
    from optuna.trial import TrialState

    db = tmp_path / "t.db"
    a = subprocess.Popen(_tune_cmd(db, "--trials", "100000", "--stale-after", "2"), cwd=tmp_path, env=_env(cache),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(50):  # stop it while it holds a RUNNING trial, but not the database's write lock
            _wait_for_trials(db, len(_trials(db)) + 10 if db.exists() else 20, a)
            a.send_signal(signal.SIGSTOP)
            if [t for t in _trials(db) if t.state == TrialState.RUNNING] and not _write_locked(db):
                break
            a.send_signal(signal.SIGCONT)
        held = [t.number for t in _trials(db) if t.state == TrialState.RUNNING]
        assert held, "never stopped holding a trial"
        time.sleep(3)
        r = subprocess.run(_tune_cmd(db, "--trials", "3", "--stale-after", "2"), cwd=tmp_path, env=_env(cache),
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        assert all(t.state == TrialState.FAIL for t in _trials(db) if t.number in held)
    except BaseException:
        a.kill()  # a failed check must not leave a 100000-trial worker behind
        raise
    finally:
        a.send_signal(signal.SIGCONT)
    time.sleep(2)
    a.send_signal(signal.SIGINT)
    out, err = a.communicate(timeout=120)
    assert a.returncode == 130 and "Traceback" not in err, err[-3000:]
    assert f"trial {held[0]} was marked FAIL by another worker" in out


def test_workers_never_pop_the_same_enqueued_trial(tmp_path):
    """SQLite has no SELECT ... FOR UPDATE: without BEGIN IMMEDIATE two workers took the same WAITING trial."""
    import optuna

    from search.storage import make_storage

    url = f"sqlite:///{tmp_path / 'p.db'}"
    study = optuna.create_study(study_name="pop", storage=make_storage(url))
    for i in range(60):
        study.enqueue_trial({"x": i})
    go = tmp_path / "go"
    script = (
        "import json, os, sys, time, optuna\n"
        "from search.storage import make_storage\n"
        "study = optuna.load_study(study_name='pop', storage=make_storage(sys.argv[1]))\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.005)\n"
        "print(json.dumps([study.ask().number for _ in range(10)]))\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, url], cwd=tmp_path, env=_env(tmp_path),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(6)]
    time.sleep(4)
    go.write_text("go")
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e[-2000:] for _, e in outs]
    numbers = [n for o, _ in outs for n in json.loads(o)]
    assert len(numbers) == 60 and len(set(numbers)) == 60, sorted(numbers)


def test_a_running_trial_without_heartbeat_expires_after_the_claim_timeout(cache, tmp_path, monkeypatch):
    """A trial left RUNNING by a worker that never beat (an older tiledsl, or killed right after ask)."""
    import optuna
    from optuna.trial import TrialState

    from search import storage

    db = tmp_path / "t.db"
    monkeypatch.chdir(tmp_path)
    study = optuna.create_study(study_name="s", storage=f"sqlite:///{db}")  # no heartbeat, like an old worker
    dead = study.ask()
    dead.set_user_attr("claim", ["whatever", time.time(), dead.number])
    monkeypatch.setattr(storage, "CLAIM_TIMEOUT_S", 1.0)
    time.sleep(1.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert tune.main(_tune_cmd(db, "--trials", "3")[3:]) == 0
    states = {t.number: t.state for t in _trials(db)}
    assert states[dead.number] == TrialState.FAIL and TrialState.RUNNING not in states.values()


def test_a_malformed_trial_in_a_shared_study_is_skipped_with_a_warning(cache, tmp_path):
    import optuna

    db = tmp_path / "t.db"
    r = subprocess.run(_tune_cmd(db, "--trials", "4"), cwd=tmp_path, env=_env(cache), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    study = optuna.load_study(study_name="s", storage=f"sqlite:///{db}")
    bad = [optuna.trial.create_trial(value=1e-12, user_attrs={"schedule": {"bm": "huge"}, "claim": "junk"}),
           optuna.trial.create_trial(value=1e-12, user_attrs={"schedule": None, "predicted_s": "fast"})]
    for t in bad:
        study.add_trial(t)
    numbers = [t.number for t in study.trials[-2:]]
    r = subprocess.run(_tune_cmd(db, "--trials", "4"), cwd=tmp_path, env=_env(cache), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    for n in numbers:
        assert f"trial {n} is malformed" in r.stderr, r.stderr[-3000:]
    assert "==== search.tune report" in r.stdout


def test_ctrl_c_reports_what_was_measured_leaves_a_consistent_study_and_exits_130(cache, tmp_path):
    from optuna.trial import TrialState

    db = tmp_path / "t.db"
    p = subprocess.Popen(_tune_cmd(db, "--trials", "100000", "--export", str(tmp_path / "out")), cwd=tmp_path,
                         env=_env(cache), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for_trials(db, 30, p)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130, (out[-2000:], err[-3000:])
    assert "==== search.tune report" in out and "INTERRUPTED" in out and "Traceback" not in err, err[-3000:]
    trials = _trials(db)
    assert trials and not [t for t in trials if t.state == TrialState.RUNNING]
    assert not (tmp_path / "out" / "kernel.cu").exists()


# ---------------------------------------------------------------- 4. the CLI validates before it searches


def _main_exit(argv: list[str], monkeypatch, capsys) -> tuple[int, str]:
    monkeypatch.setattr(tune, "run", lambda *a, **k: pytest.fail("the search started"))
    with pytest.raises(SystemExit) as e:
        tune.main(argv)
    return e.value.code, capsys.readouterr().err


def _gemm(tmp_path, *extra):
    return ["gemm", "--m", "64", "--n", "64", "--k", "64", "--model-only",
            "--storage", f"sqlite:///{tmp_path / 't.db'}", *extra]


def test_export_under_a_file_in_proc_or_onto_a_folder_named_kernel_cu_exits_2(tmp_path, monkeypatch, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    taken = tmp_path / "taken"
    (taken / "kernel.cu").mkdir(parents=True)
    for where in (afile / "sub", "/proc/tiledsl-export", taken):
        code, err = _main_exit(_gemm(tmp_path, "--export", str(where)), monkeypatch, capsys)
        assert code == 2 and f"--export {where}:" in err and "Traceback" not in err, err
    assert not (afile.parent / "sub").exists()


def test_report_json_onto_a_folder_and_reports_onto_folders_exit_2(tmp_path, monkeypatch, capsys):
    (tmp_path / "rj").mkdir()
    code, err = _main_exit(_gemm(tmp_path, "--report-json", str(tmp_path / "rj")), monkeypatch, capsys)
    assert code == 2 and "--report-json" in err
    (tmp_path / "exp" / "report.json").mkdir(parents=True)
    code, err = _main_exit(_gemm(tmp_path, "--export", str(tmp_path / "exp")), monkeypatch, capsys)
    assert code == 2 and "--export" in err and "report.json" in err


@pytest.mark.parametrize("extra,said", [(["--jobs", "100000"], "more than 4 per CPU"),
                                        (["--storage", "sqlite:///t.db?timeout=-1"], "timeout='-1' must be"),
                                        (["--storage", "sqlite:///t.db?timeout=nan"], "timeout='nan' must be")])
def test_unbounded_jobs_and_a_negative_lock_timeout_exit_2_naming_them(tmp_path, monkeypatch, capsys, extra, said):
    monkeypatch.chdir(tmp_path)
    code, err = _main_exit(["gemm", "--m", "64", "--n", "64", "--k", "64", "--model-only", *extra], monkeypatch, capsys)
    assert code == 2 and said in err and not (tmp_path / "t.db").exists()


@pytest.mark.parametrize("seed", ["-1", str(2**32), "x"])
def test_a_bad_seed_exits_2_before_the_storage_is_created(tmp_path, monkeypatch, capsys, seed):
    code, err = _main_exit(_gemm(tmp_path, "--seed", seed), monkeypatch, capsys)
    assert code == 2 and "--seed" in err
    assert not (tmp_path / "t.db").exists()


def test_a_locked_or_damaged_study_database_is_named_with_the_drivers_reason(tmp_path, monkeypatch, capsys):
    """A SQLite study another process holds locked past the URL's timeout, or whose pages are damaged, stops the
    run with one line naming --storage and SQLite's own reason, not Optuna's generic commit error."""
    import sqlite3

    monkeypatch.chdir(tmp_path)
    args = ["gemm", "--m", "256", "--n", "256", "--k", "256", "--model-only", "--trials", "2", "--compile-top", "1",
            "--no-progress"]
    assert tune.main([*args, "--storage", "sqlite:///s.db"]) == 0
    holder = sqlite3.connect(tmp_path / "s.db", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(SystemExit) as e:
            tune.main([*args, "--storage", "sqlite:///s.db?timeout=1"])
    finally:
        holder.close()
    said = str(e.value.code) + capsys.readouterr().err
    assert "--storage" in said and "database is locked" in said and e.value.code != 0
    data = bytearray((tmp_path / "s.db").read_bytes())
    data[4096:40960] = b"Z" * len(data[4096:40960])
    (tmp_path / "s.db").write_bytes(bytes(data))
    code, err = _main_exit([*args, "--storage", "sqlite:///s.db"], monkeypatch, capsys)
    assert code == 2 and "--storage" in err and "malformed" in err and "StorageInternalError" not in err


def test_a_sqlite_url_query_is_honoured_not_part_of_the_file_name(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    rc = tune.main(["gemm", "--m", "256", "--n", "256", "--k", "256", "--model-only", "--trials", "3",
                    "--compile-top", "1", "--storage", "sqlite:///q.db?timeout=5", "--no-progress"])
    assert rc == 0
    assert (tmp_path / "q.db").exists() and not (tmp_path / "q.db?timeout=5").exists()
    code, err = _main_exit(_gemm(tmp_path, "--storage", "sqlite:///r.db?bogus=1"), monkeypatch, capsys)
    assert code == 2 and "--storage" in err and "bogus" in err and not (tmp_path / "r.db").exists()


def test_an_empty_reduce_shape_exits_2_naming_it(tmp_path, monkeypatch, capsys):
    code, err = _main_exit(["reduce", "--shape", "0x64", "--axis", "1", "--model-only",
                            "--storage", f"sqlite:///{tmp_path / 't.db'}"], monkeypatch, capsys)
    assert code == 2 and "--shape" in err and "empty" in err and "Traceback" not in err


# ---------------------------------------------------------------- 5. no credential is printed or written


SECRET = "s3cretPW"


def test_a_password_in_the_storage_url_is_masked_in_errors(tmp_path):
    r = subprocess.run([sys.executable, "-m", "search.tune", "gemm", "--m", "64", "--n", "64", "--k", "64",
                        "--model-only", "--storage", f"postgresql://user:{SECRET}@127.0.0.1:1/db"],
                       cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--storage" in r.stderr
    assert SECRET not in r.stderr + r.stdout and "***" in r.stderr, r.stderr


def test_a_password_is_never_written_into_any_file_or_printed(tmp_path, monkeypatch, capsys):
    """A whole model-only run with a password in --storage (served by a SQLite file underneath): no file it
    writes (kernel.cu, schedule.json, report.json, report.txt) and nothing it prints holds the password."""
    from search import storage

    real = storage.make_storage
    monkeypatch.setattr(tune, "make_storage", lambda url, *a: real(f"sqlite:///{tmp_path / 't.db'}", *a))
    monkeypatch.setattr(tune, "storage_problem", lambda url: None)
    monkeypatch.chdir(tmp_path)
    url = f"postgresql://user:{SECRET}@db.example/tune"
    rc = tune.main(["gemm", "--m", "256", "--n", "256", "--k", "256", "--model-only", "--trials", "4",
                    "--compile-top", "1", "--no-progress", "--storage", url, "--export", str(tmp_path / "x"),
                    "--report-json", str(tmp_path / "r.json")])
    assert rc == 0
    printed = capsys.readouterr()
    assert SECRET not in printed.out + printed.err and "user:***@db.example" in printed.out
    files = [f for f in tmp_path.rglob("*") if f.is_file() and not f.name.startswith("t.db")]
    assert any(f.name == "schedule.json" for f in files) and any(f.name == "r.json" for f in files)
    for f in files:
        assert SECRET.encode() not in f.read_bytes(), f


def test_storage_url_masking():
    from search.storage import mask, mask_text

    assert SECRET not in mask(f"postgresql://u:{SECRET}@h/db") and "u:***@h" in mask(f"postgresql://u:{SECRET}@h/db")
    assert mask_text(f"python -m search.tune --storage mysql://a:{SECRET}@h/d") == \
        "python -m search.tune --storage mysql://a:***@h/d"


# ---------------------------------------------------------------- 6. empty ops; explain applies compile's rules


@pytest.mark.parametrize("op", [GemmOp(0, 64, 64), GemmOp(64, 0, 64), GemmOp(64, 64, 0),
                                ReduceOp(shape=(0, 64), axis=1), ReduceOp(shape=(64, 0), axis=1),
                                TransposeOp(shape=(0, 64))])
def test_empty_ops_raise_spec_error_everywhere(op):
    fam = tiledsl.api.family_of(op)
    for call in (lambda: tiledsl.compile(op, arch="sm_90"), lambda: tiledsl.explain(op, device="H200"),
                 lambda: fam.default_schedule(op, H200)):
        with pytest.raises(tiledsl.SpecError, match="empty"):
            call()


@pytest.mark.parametrize("op, s", [
    (GemmOp(512, 512, 512), GemmSchedule(bm=128, bn=128, bk=128, rm=8, rn=8, double_buffer=True)),  # smem
    (ReduceOp(shape=(64, 64), axis=0), ReduceSchedule(strategy="smem_interleaved")),  # strided axis
])
def test_explain_and_predict_refuse_what_compile_refuses_with_the_same_error(op, s):
    with pytest.raises(tiledsl.ScheduleError) as want:
        tiledsl.compile(op, s, arch="sm_90")
    for call in (lambda: tiledsl.explain(op, s, device="H200"), lambda: tiledsl.predict(op, s, "H200")):
        with pytest.raises(type(want.value)) as got:
            call()
        assert str(got.value) == str(want.value)


# ---------------------------------------------------------------- on the GPU (run by the lead on the H200)


@pytest.mark.gpu
def test_gpu_a_damaged_cached_cubin_still_gives_the_right_answer(cache):
    import cupy as cp

    a = cp.random.rand(96, 80, dtype=cp.float32)
    b = cp.random.rand(80, 72, dtype=cp.float32)
    s = GemmSchedule(bm=64, bn=64, bk=16, rm=4, rn=4)
    ref = a.get().astype("float64") @ b.get().astype("float64")
    tiledsl.gemm(a, b, schedule=s)
    for f in (cache / "kernels").glob("*.cubin"):
        f.write_bytes(f.read_bytes()[:100])
    _compile_mod()._MEM_CACHE.clear()
    tiledsl.api.clear_kernel_cache()
    with pytest.warns(BadFileWarning):
        c = tiledsl.gemm(a, b, schedule=s)
    assert float(abs(c.get() - ref).max()) < 1e-3


@pytest.mark.gpu
def test_gpu_ctrl_c_of_a_measured_run_exits_130_with_a_consistent_study(cache, tmp_path):
    from optuna.trial import TrialState

    db = tmp_path / "t.db"
    cmd = [sys.executable, "-m", "search.tune", "gemm", "--m", "1024", "--n", "1024", "--k", "1024", "--trials", "500",
           "--storage", f"sqlite:///{db}", "--study-name", "s", "--no-progress", "--export", str(tmp_path / "out")]
    p = subprocess.Popen(cmd, cwd=tmp_path, env=_env(cache), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 300:
        assert p.poll() is None, p.communicate()
        try:
            if sum(t.state == TrialState.COMPLETE for t in _trials(db)) >= 5:
                break
        except Exception:
            pass
        time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 130, (out[-2000:], err[-3000:])
    assert "INTERRUPTED" in out and "Traceback" not in err, err[-3000:]
    trials = _trials(db)
    assert not [t for t in trials if t.state == TrialState.RUNNING]
    assert not [t for t in trials if "died" in str(t.user_attrs.get("error", ""))], "the GPU worker died of SIGINT"

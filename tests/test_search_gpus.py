"""``search.tune --gpus``: one study on several devices, on the CPU.

Two devices are simulated: ``--model-only`` with ``TILEDSL_SIMULATED_GPUS=2`` runs one cost-model worker
process per device (``search.model_worker``), and the measured path runs with the GPU stand-in in place of
the CUDA worker (``tiledsl.gpu_available`` and the device list patched), so the dispatch, the device
attribute, the claims and the final re-measurement on one device are the code a GPU run executes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tiledsl

optuna = pytest.importorskip("optuna")
from optuna.trial import TrialState  # noqa: E402

from search import devices, tune  # noqa: E402
from search import trials as trial_book  # noqa: E402
from search.devices import SIMULATED_ENV  # noqa: E402
from search.model_worker import ModelWorker  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHAPE = ("512", "384", "256")
STUDY = "gemm-512x384x256-float32-NN-H200"


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("TILEDSL_CACHE_DIR", str(d))
    monkeypatch.delenv(SIMULATED_ENV, raising=False)
    return d


def _args(db: Path, *extra: str) -> list[str]:
    m, n, k = SHAPE
    return ["gemm", "--m", m, "--n", n, "--k", k, "--storage", f"sqlite:///{db}", "--no-progress",
            "--compile-top", "1", *extra]


def _trials(db: Path, name: str) -> list:
    return optuna.load_study(study_name=name, storage=f"sqlite:///{db}").get_trials(deepcopy=False)


def _owned(trials) -> list:
    """COMPLETE trials that evaluated their schedule (not a duplicate reusing another's value)."""
    return [t for t in trials if t.state == TrialState.COMPLETE and "duplicate_of" not in t.user_attrs]


def _keys(trials) -> list[str]:
    return [t.user_attrs["claim"][0] for t in _owned(trials)]


class Recording(ModelWorker):
    """The cost-model stand-in in the GPU worker's place, logging every request the tuner sends it."""

    log: list = []

    def __init__(self, family: str, op_dict: dict, timeout_s: float = 120.0, device: int | None = None) -> None:
        super().__init__(family, op_dict, "H200", device=device, timeout_s=timeout_s)

    def send(self, req: dict, timeout_s: float | None = None) -> None:
        Recording.log.append((self.device, req["cmd"], json.dumps(req.get("schedule"), sort_keys=True)))
        super().send(req, timeout_s)


@pytest.fixture
def fake_gpus(monkeypatch):
    """Two H200s as far as search.tune can tell, each measured by the cost-model stand-in."""
    h200 = tiledsl.Target.known("H200")
    names = (h200.name, h200.name)
    monkeypatch.setattr(tiledsl, "gpu_available", lambda: True)
    monkeypatch.setattr(tiledsl.Target, "current", staticmethod(lambda: h200))
    monkeypatch.setattr(devices, "cuda_device_names", lambda: names)
    monkeypatch.setattr(tune, "cuda_device_names", lambda: names)
    monkeypatch.setattr(tune, "GpuWorker", Recording)
    Recording.log = []
    return Recording.log


# ---------------------------------------------------------------- --gpus values


@pytest.mark.parametrize("value, says", [
    ("0,0", "'0,0' lists device 0 twice"),
    ("-1", "device index -1 is negative"),
    ("0,x", "'x' is not a device index"),
    ("0,", "give 'all' or device indices"),
    ("5", "device 5 does not exist here; devices available: 0, 1 (2 simulated devices"),
])
def test_a_bad_gpus_value_exits_2_naming_the_flag_the_value_and_the_devices(tmp_path, monkeypatch, capsys,
                                                                          value, says):
    monkeypatch.setenv(SIMULATED_ENV, "2")
    monkeypatch.setattr(tune, "run", lambda *a, **k: pytest.fail("the search started"))
    with pytest.raises(SystemExit) as e:
        tune.main(_args(tmp_path / "t.db", "--model-only", "--gpus", value))
    err = capsys.readouterr().err
    assert e.value.code == 2 and "--gpus" in err and says in err, err


def test_gpus_names_the_cuda_devices_present(fake_gpus, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(tune, "run", lambda *a, **k: pytest.fail("the search started"))
    with pytest.raises(SystemExit) as e:
        tune.main(_args(tmp_path / "t.db", "--gpus", "0,2"))
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert "--gpus 0,2: device 2 does not exist here; devices available: 0, 1 (2 CUDA devices: H200, H200)" in err


def test_devices_of_another_model_are_refused(fake_gpus, tmp_path, monkeypatch):
    monkeypatch.setattr(devices, "cuda_device_names", lambda: ("H200", "NVIDIA H100 80GB HBM3"))
    monkeypatch.setattr(tune, "cuda_device_names", lambda: ("H200", "NVIDIA H100 80GB HBM3"))
    with pytest.raises(SystemExit, match="device 1 is a NVIDIA H100 80GB HBM3, not a H200 like device 0"):
        tune.main(_args(tmp_path / "t.db", "--gpus", "all"))
    assert not fake_gpus, "a worker was started"


def test_gpus_all_and_lists_resolve_in_the_order_given():
    two = devices.Devices(2, True)
    assert devices.resolve(devices.parse_gpus("all"), two) == (0, 1)
    assert devices.resolve(devices.parse_gpus("1,0"), two) == (1, 0)
    assert devices.resolve(None, two) == (0,)


def test_a_worker_is_pinned_through_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    with devices.pinned(1):
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "3"  # --gpus indexes the devices this process sees
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "2,3"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    with devices.pinned(0):
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "0"
    assert "CUDA_VISIBLE_DEVICES" not in os.environ


# ---------------------------------------------------------------- several devices, one study


def test_two_simulated_devices_share_the_trials_and_measure_no_schedule_twice(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(SIMULATED_ENV, "2")
    db = tmp_path / "t.db"
    assert tune.main(_args(db, "--model-only", "--gpus", "all", "--trials", "24")) == 0
    assert "2 simulated devices 0, 1" in capsys.readouterr().out
    trials = _trials(db, STUDY + "-model")
    owned = _owned(trials)
    by_device = {d: sum(t.user_attrs.get("device") == d for t in owned) for d in (0, 1)}
    assert by_device[0] >= 4 and by_device[1] >= 4, by_device
    assert all(t.user_attrs.get("device") in (0, 1) for t in owned)
    keys = _keys(trials)
    assert len(keys) == len(set(keys)), "a schedule was evaluated on both devices"
    # the values are the cost model's, as a single-process --model-only run records them
    for t in owned:
        assert t.value == pytest.approx(t.user_attrs["predicted_s"], rel=1e-12)
    assert not [t for t in trials if t.state == TrialState.RUNNING]


def test_one_device_runs_exactly_as_without_the_flag(tmp_path):
    def sequence(db: Path, *extra: str) -> list:
        assert tune.main(_args(db, "--model-only", "--trials", "25", *extra)) == 0
        return [(t.number, t.state, t.params, t.value, t.user_attrs.get("duplicate_of"), "device" in t.user_attrs)
                for t in _trials(db, STUDY + "-model")]

    assert sequence(tmp_path / "a.db") == sequence(tmp_path / "b.db", "--gpus", "0")


def test_measured_path_on_two_devices_remeasures_the_finalists_on_one(fake_gpus, tmp_path, capsys):
    db = tmp_path / "t.db"
    assert tune.main(_args(db, "--gpus", "all", "--trials", "14", "--jobs", "2", "--final-top", "3",
                           "--export", str(tmp_path / "out"))) == 0
    text = capsys.readouterr().out
    assert "2 GPU workers, devices 0, 1" in text and "the final re-measurement runs on device 0" in text
    assert "median of 7 rounds, all on device 0" in text
    measured = [(d, s) for d, cmd, s in fake_gpus if cmd == "measure"]
    assert {d for d, _ in measured} == {0, 1}, "both devices measured"
    assert len({s for _, s in measured}) == len(measured), "a schedule was measured twice"
    assert [d for d, cmd, _ in fake_gpus if cmd in ("remeasure", "vendor")] == [0, 0]
    study = optuna.load_study(study_name=STUDY, storage=f"sqlite:///{db}")
    owned = _owned(study.trials)
    assert {t.user_attrs["device"] for t in owned} == {0, 1}
    assert len(owned) == len(measured)
    for t in owned:  # predicted in the compile pool; the stand-in "measures" the same prediction
        assert t.value == pytest.approx(t.user_attrs["predicted_s"], rel=1e-12) and t.user_attrs["registers"] > 0
        assert t.user_attrs["predicted_compiled_s"] > 0  # predicted again from the compiled kernel's ptxas figures
    assert "cost model ranking: Spearman rho" in text
    compiled = [line for line in text.splitlines()
                if line.startswith("cost model ranking given the compiled kernels (ptxas registers): Spearman rho")]
    assert len(compiled) == 1 and compiled[0].endswith(f"over {len(owned)} measured trials"), compiled
    (final,) = [v for k, v in study.user_attrs.items() if k.startswith("final:")]
    assert final["device"] == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["devices"] == [0, 1] and {r["device"] for r in report["trials"] if r["measured_s"]} == {0, 1}


def test_measured_path_on_one_device_asks_and_measures_as_without_the_flag(fake_gpus, tmp_path):
    def sequence(db: Path, *extra: str) -> list:
        fake_gpus.clear()
        assert tune.main(_args(db, "--trials", "10", "--jobs", "2", "--final-top", "2", *extra)) == 0
        trials = [(t.number, t.state, t.params, t.value) for t in _trials(db, STUDY)]
        return trials + [cmd for _, cmd, _ in fake_gpus] + [s for _, _, s in fake_gpus]

    assert sequence(tmp_path / "a.db") == sequence(tmp_path / "b.db", "--gpus", "0")


def test_a_schedule_claimed_by_another_host_before_dispatch_is_not_measured(tmp_path, monkeypatch):
    """Host B, whose clock runs 5 s behind, claims the schedule this host has just claimed, after this host
    checked for duplicates: the earliest claim (B's) keeps it, and this host does not measure it."""
    monkeypatch.setenv(SIMULATED_ENV, "2")
    monkeypatch.setattr(tune, "ModelWorker", lambda family, op_dict, name, device: Recording(family, op_dict,
                                                                                             device=device))
    Recording.log = []
    url = f"sqlite:///{tmp_path / 't.db'}"
    real = trial_book.find_duplicate
    race: dict = {}

    def find_then_host_b_claims(study, trial, key):
        dup = real(study, trial, key)
        if not race and dup is None and trial.number >= 2:
            mine = study._storage.get_trial(trial._trial_id).user_attrs["claim"]
            other = optuna.load_study(study_name=study.study_name, storage=url).ask()
            other.set_user_attr("claim", [key, mine[1] - 5.0, other.number])  # RUNNING: B measures it
            race.update(a=trial.number, b=other.number, key=key)
        return dup

    monkeypatch.setattr(trial_book, "find_duplicate", find_then_host_b_claims)
    assert tune.main(_args(tmp_path / "t.db", "--model-only", "--gpus", "0,1", "--trials", "8")) == 0
    trials = {t.number: t for t in _trials(tmp_path / "t.db", STUDY + "-model")}
    a = trials[race["a"]]
    assert a.state == TrialState.PRUNED and a.user_attrs["duplicate_of"] == race["b"], a.user_attrs
    sent = [s for _, cmd, s in Recording.log if cmd == "measure"]
    assert json.dumps(a.user_attrs["schedule"], sort_keys=True) not in sent


def test_ctrl_c_of_a_two_device_run_reports_leaves_a_consistent_study_and_exits_130(tmp_path, cache):
    db = tmp_path / "t.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TILEDSL_CACHE_DIR": str(cache), SIMULATED_ENV: "2"}
    cmd = [sys.executable, "-m", "search.tune", *_args(db, "--model-only", "--gpus", "0,1", "--trials", "100000",
                                                         "--study-name", "s", "--export", str(tmp_path / "out"))]
    p = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 120:
            assert p.poll() is None, p.communicate()
            try:
                if sum("device" in t.user_attrs for t in _trials(db, "s")) >= 20:
                    break
            except Exception:  # the study is not created yet
                pass
            time.sleep(0.3)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, (out[-2000:], err[-3000:])
    assert "INTERRUPTED" in out and "Traceback" not in err, err[-3000:]
    trials = _trials(db, "s")
    assert not [t for t in trials if t.state == TrialState.RUNNING]
    assert {t.user_attrs.get("device") for t in _owned(trials)} == {0, 1}
    keys = _keys(trials)
    assert len(keys) == len(set(keys))
    assert not (tmp_path / "out" / "kernel.cu").exists()


def test_a_killed_two_device_run_leaves_trials_that_expire_and_are_evaluated_again(tmp_path, cache):
    db = tmp_path / "t.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TILEDSL_CACHE_DIR": str(cache), SIMULATED_ENV: "2"}
    base = [sys.executable, "-m", "search.tune", *_args(db, "--model-only", "--study-name", "s", "--stale-after", "2")]
    p = subprocess.Popen([*base, "--gpus", "0,1", "--trials", "100000"], cwd=tmp_path, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        t0 = time.monotonic()
        running: list = []
        while time.monotonic() - t0 < 120 and not running:
            assert p.poll() is None, p.communicate()
            try:
                trials = _trials(db, "s")
            except Exception:  # the study is not created yet
                trials = []
            if sum("device" in t.user_attrs for t in trials) >= 10:
                p.send_signal(signal.SIGKILL)
                p.wait(timeout=60)
                running = [t.number for t in _trials(db, "s") if t.state == TrialState.RUNNING]
                break
            time.sleep(0.2)
    finally:
        if p.poll() is None:
            p.kill()
    assert running, "the run died holding no trial (several are in flight on two devices)"
    time.sleep(3)  # longer than --stale-after: its heartbeats are stale now
    r = subprocess.run([*base, "--gpus", "0,1", "--trials", "6"], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    after = {t.number: t for t in _trials(db, "s")}
    assert all(after[n].state == TrialState.FAIL for n in running)
    assert not [t for t in after.values() if t.state == TrialState.RUNNING]
    assert not [t for t in after.values() if t.user_attrs.get("duplicate_of") in set(running)]
    keys = _keys(list(after.values()))
    assert len(keys) == len(set(keys))


# ---------------------------------------------------------------- on two real GPUs


def _two_gpus() -> None:
    import cupy

    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two CUDA devices")


@pytest.mark.gpu
def test_gpu_each_worker_sees_only_its_own_device():
    import cupy

    from search.measure import GpuWorker

    _two_gpus()
    workers = [GpuWorker("gemm", tiledsl.GemmOp(256, 256, 256).to_dict(), device=d) for d in (0, 1)]
    try:
        infos = [w.call({"cmd": "info"}, timeout_s=120) for w in workers]
    finally:
        for w in workers:
            w.close()
    for d, info in enumerate(infos):
        assert info["ok"] and info["devices_seen"] == 1, info
        assert info["pci_bus_id"] == cupy.cuda.Device(d).pci_bus_id, (d, info)


@pytest.mark.gpu
def test_gpu_a_two_device_run_measures_on_both_and_remeasures_on_one(tmp_path, cache, capsys):
    _two_gpus()
    db = tmp_path / "t.db"
    assert tune.main(["gemm", "--m", "1024", "--n", "1024", "--k", "1024", "--trials", "30", "--gpus", "0,1",
                      "--storage", f"sqlite:///{db}", "--study-name", "s", "--no-progress",
                      "--export", str(tmp_path / "out")]) == 0
    assert "all on device 0" in capsys.readouterr().out
    study = optuna.load_study(study_name="s", storage=f"sqlite:///{db}")
    owned = _owned(study.trials)
    assert {t.user_attrs["device"] for t in owned} == {0, 1}
    keys = _keys(study.trials)
    assert len(keys) == len(set(keys))
    (final,) = [v for k, v in study.user_attrs.items() if k.startswith("final:")]
    assert final["device"] == 0

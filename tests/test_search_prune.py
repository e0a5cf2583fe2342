"""``--model-prune FACTOR``: sampled schedules predicted far slower than the best prediction so far are told
PRUNED without being compiled or measured, with the reason recorded; off, nothing is pruned this way.

The cost model is replaced by a fake that predicts every schedule at 1 ms or at 10 ms (half of them, by a
hash of the schedule), so a slow one is exactly 10x the best prediction.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import types
import zlib
from pathlib import Path

import pytest

import tiledsl

optuna = pytest.importorskip("optuna")
from optuna.trial import TrialState  # noqa: E402

from search import objective, runner, tune  # noqa: E402
from search.model_worker import ModelWorker  # noqa: E402
from search.strategy import MODEL_PRUNE_RULE, ModelPruner, check_factor  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FAST, SLOW = 1e-3, 1e-2


@pytest.fixture
def cache(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("TILEDSL_CACHE_DIR", str(d))
    return d


def _slow(s) -> bool:
    """Half the schedules, by a hash of the knobs the kernel's source names (a knob added later, at its default, leaves
    the split as it was)."""
    return zlib.crc32(json.dumps(s.header_dict(), sort_keys=True).encode()) % 2 == 1


@pytest.fixture
def fake_model(monkeypatch):
    """Every schedule predicted at FAST or SLOW (10x FAST)."""
    monkeypatch.setattr(objective.Model, "predict",
                        lambda self, op, s, t, kernel=None: SLOW if _slow(s) else FAST)
    monkeypatch.setattr(objective.Model, "explain",
                        lambda self, op, s, t: {"predicted_s": SLOW if _slow(s) else FAST, "bound_by": "hbm"})


def _run(tmp_path, name: str, *extra: str) -> list:
    db = tmp_path / f"{name}.db"
    assert tune.main(["gemm", "--m", "512", "--n", "384", "--k", "256", "--no-progress", "--storage",
                      f"sqlite:///{db}", "--study-name", name, "--compile-top", "1", "--export",
                      str(tmp_path / name), *extra]) == 0
    return optuna.load_study(study_name=name, storage=f"sqlite:///{db}").get_trials(deepcopy=False)


def _owned_complete(trials) -> list:
    return [t for t in trials if t.state == TrialState.COMPLETE and "duplicate_of" not in t.user_attrs]


# ---------------------------------------------------------------- the pruner alone


def test_a_prediction_10x_the_best_is_pruned_with_its_reason():
    p = ModelPruner(3.0)
    assert p.verdict(SLOW) is None  # nothing evaluated yet: no reference, nothing pruned
    p.observe(FAST, 7)
    why = p.verdict(SLOW)
    assert why is not None and "10.0x the best prediction so far" in why and "trial 7" in why
    assert "--model-prune 3" in why
    assert p.verdict(3 * FAST) is None and p.verdict(2.9 * FAST) is None  # within the factor: evaluated
    assert p.verdict(None) is None  # the model could not predict it: never pruned on no evidence
    p.observe(SLOW, 8)  # a slower evaluated trial does not raise the bar
    assert p.best.number == 7


def test_a_disabled_pruner_prunes_nothing():
    p = ModelPruner(None)
    p.observe(FAST, 1)
    assert not p.enabled and p.verdict(1000 * FAST) is None


@pytest.mark.parametrize("factor", [1.0, 0.5, 0, -2, float("nan"), float("inf")])
def test_a_factor_must_be_a_finite_number_above_1(factor):
    with pytest.raises(ValueError, match="--model-prune"):
        check_factor(factor)


@pytest.mark.parametrize("value", ["1", "0.9", "abc", "nan", "inf"])
def test_bad_model_prune_values_exit_2_naming_the_flag(value, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(tune, "run", lambda *a, **k: pytest.fail("the search started"))
    with pytest.raises(SystemExit) as e:
        tune.main(["gemm", "--m", "64", "--n", "64", "--k", "64", "--model-only", "--model-prune", value,
                   "--storage", f"sqlite:///{tmp_path / 't.db'}"])
    assert e.value.code == 2
    assert "--model-prune" in capsys.readouterr().err


# ---------------------------------------------------------------- in a run


def test_model_only_prunes_the_10x_slower_schedules_and_records_why(tmp_path, cache, fake_model, capsys):
    trials = _run(tmp_path, "on", "--model-only", "--trials", "20", "--model-prune", "3")
    text = capsys.readouterr().out
    pruned = [t for t in trials if t.user_attrs.get("rule") == MODEL_PRUNE_RULE]
    assert pruned, "no schedule was pruned by the cost model"
    for t in pruned:
        assert t.state == TrialState.PRUNED
        assert t.user_attrs["predicted_s"] == SLOW and "schedule" in t.user_attrs
        assert "10.0x the best prediction so far" in t.user_attrs["pruned_reason"]
        assert "claim" not in t.user_attrs  # owns nothing: a later sample of it is screened again
    # the library default (trial 0) is measured whatever the model predicts; no other slow point is
    assert [t.number for t in _owned_complete(trials) if t.user_attrs["predicted_s"] == SLOW] in ([], [0])
    assert trials[0].user_attrs.get("seeded_by") == "library default" and trials[0].state == TrialState.COMPLETE
    assert f"pruned by the cost model {len(pruned)}," in text
    assert f"model pruning (--model-prune 3): {len(pruned)} sampled schedules" in text
    rep = json.loads((tmp_path / "on" / "report.json").read_text())
    assert rep["model_prune"] == 3.0 and rep["counts_this_run"]["model_pruned"] == len(pruned)
    assert sum(r["failure"] is not None and "10.0x" in r["failure"] for r in rep["trials"]) == len(pruned)


def test_the_library_default_is_never_pruned_by_the_model(tmp_path, cache, monkeypatch):
    """Resuming a study that did not seed the default: a reference exists when the default is screened and the
    model predicts it 10x slower than that; it is measured all the same (search.trials, seeded_by)."""
    from search import strategy
    from search.space import space_for

    op, h200 = tiledsl.GemmOp(512, 384, 256), tiledsl.Target.known("H200")
    default = strategy.library_default(space_for("gemm").for_op(op), op, h200)
    assert default is not None
    slow = json.dumps(default.to_dict(), sort_keys=True)

    def predict(s):
        return SLOW if json.dumps(s.to_dict(), sort_keys=True) == slow else FAST

    monkeypatch.setattr(objective.Model, "predict", lambda self, op, s, t, kernel=None: predict(s))
    monkeypatch.setattr(objective.Model, "explain", lambda self, op, s, t: {"predicted_s": predict(s), "bound_by": "hbm"})
    library_default = strategy.library_default
    monkeypatch.setattr(strategy, "library_default", lambda *a: None)  # an older study: no default seeded
    first = _run(tmp_path, "resumed", "--model-only", "--trials", "4", "--model-prune", "3", "--seed-top", "0")
    assert not [t for t in first if t.user_attrs.get("seeded_by") == "library default"]
    monkeypatch.setattr(strategy, "library_default", library_default)
    trials = _run(tmp_path, "resumed", "--model-only", "--trials", "4", "--model-prune", "3")
    seeded = [t for t in trials if t.user_attrs.get("seeded_by") == "library default"]
    assert len(seeded) == 1 and seeded[0].number == len(first)  # the first trial of the second run
    assert seeded[0].state == TrialState.COMPLETE and seeded[0].user_attrs.get("rule") != MODEL_PRUNE_RULE


def test_without_the_flag_nothing_is_pruned_by_the_model(tmp_path, cache, fake_model, capsys):
    trials = _run(tmp_path, "off", "--model-only", "--trials", "20")
    text = capsys.readouterr().out
    assert not [t for t in trials if t.user_attrs.get("rule") == MODEL_PRUNE_RULE]
    # the fake model's slow schedules are sampled and evaluated: the test above had something to prune
    assert [t for t in _owned_complete(trials) if t.user_attrs["predicted_s"] == SLOW]
    assert "pruned by the cost model" not in text and "model pruning" not in text
    assert "model_pruned" not in json.loads((tmp_path / "off" / "report.json").read_text())["counts_this_run"]


class Recording(ModelWorker):
    """The cost-model stand-in in the GPU worker's place, logging the schedules it is asked to measure."""

    measured: list = []

    def __init__(self, family: str, op_dict: dict, timeout_s: float = 120.0, device: int | None = None) -> None:
        super().__init__(family, op_dict, "H200", device=device, timeout_s=timeout_s)

    def send(self, req: dict, timeout_s: float | None = None) -> None:
        if req["cmd"] == "measure":
            Recording.measured.append(json.dumps(req["schedule"], sort_keys=True))
        super().send(req, timeout_s)


def test_measured_run_never_compiles_or_measures_a_pruned_schedule(tmp_path, cache, fake_model, monkeypatch):
    h200 = tiledsl.Target.known("H200")
    monkeypatch.setattr(tiledsl, "gpu_available", lambda: True)
    monkeypatch.setattr(tiledsl.Target, "current", staticmethod(lambda: h200))
    monkeypatch.setattr(tune, "GpuWorker", Recording)
    Recording.measured = []
    compiled: list = []
    submit = runner.Runner.submit

    def recording_submit(self, c):
        compiled.append(json.dumps(c.schedule.to_dict(), sort_keys=True))
        assert c.predicted_s is not None  # predicted here, before compiling: the pool does not predict again
        submit(self, c)

    monkeypatch.setattr(runner.Runner, "submit", recording_submit)
    trials = _run(tmp_path, "measured", "--trials", "12", "--jobs", "2", "--final-top", "2", "--model-prune", "3")
    pruned = {json.dumps(t.user_attrs["schedule"], sort_keys=True) for t in trials
              if t.user_attrs.get("rule") == MODEL_PRUNE_RULE}
    assert pruned, "no schedule was pruned by the cost model"
    assert Recording.measured and compiled
    assert not pruned & set(Recording.measured) and not pruned & set(compiled)
    assert all(t.state == TrialState.PRUNED for t in trials if t.user_attrs.get("rule") == MODEL_PRUNE_RULE)


# ---------------------------------------------------------------- benchmarks/model_prune.py, CPU parts


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("model_prune_bench", ROOT / "benchmarks" / "model_prune.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_trials_to_reach_98_percent_of_the_best(bench):
    times = [5.0, 3.0, 2.04, 2.2, 2.0]
    assert bench.trials_to_reach(times, 2.0) == 3  # 2.04 <= 2.0 / 0.98 = 2.0408
    assert bench.trials_to_reach(times, 2.0, fraction=1.0) == 5
    assert bench.trials_to_reach(times, 1.99) == 5  # 2.04 > 1.99 / 0.98 = 2.0306
    assert bench.trials_to_reach(times, 1.0) is None
    with pytest.raises(ValueError):
        bench.trials_to_reach(times, 0.0)


def test_measured_times_keep_owned_complete_trials_in_completion_order(bench):
    import datetime as dt

    def t(number, state, value, minute, **attrs):
        return types.SimpleNamespace(number=number, state=state, value=value, user_attrs=attrs,
                                     datetime_complete=dt.datetime(2026, 12, 1, 12, minute))

    trials = [t(0, TrialState.COMPLETE, 3.0, 5), t(1, TrialState.COMPLETE, 2.0, 2),
              t(2, TrialState.COMPLETE, 2.0, 3, duplicate_of=1), t(3, TrialState.PRUNED, None, 4),
              t(4, TrialState.FAIL, None, 1), t(5, TrialState.COMPLETE, 1.0, 9)]
    assert bench.measured_times(trials) == [2.0, 3.0, 1.0]


def test_summarize_uses_the_best_of_every_setting_of_a_shape(bench):
    rows = [{"shape": "a", "best_s": 2.0, "times_s": [4.0, 2.0]},
            {"shape": "a", "best_s": 1.0, "times_s": [3.0, 1.5, 1.0]},
            {"shape": "b", "best_s": None, "times_s": []}]
    bench.summarize(rows)
    assert rows[0]["to_98_common"] is None and rows[1]["to_98_common"] == 3
    assert "to_98_common" not in rows[2]


def test_benchmark_help_runs_without_a_gpu():
    import subprocess

    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "model_prune.py"), "--help"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "--factor" in r.stdout and "98 %" in r.stdout


def test_replay_skips_what_the_pruner_would_and_counts_to_98_percent(bench):
    """--replay: trials in trial order through ModelPruner; a skipped trial is not measured and does not move the
    reference; trials to 98 % count the kept ones, against the study's best (kept or not)."""
    study = types.SimpleNamespace(name="s", numbers=(2, 0, 1, 3, 4), measured=(3.0, 5.0, 4.0, 1.0, 2.0))
    predicted = (1.2, 1.0, 2.5, 1.6, 0.9)  # by trial number 0..4: 1.0, 2.5, 1.2, 1.6, 0.9
    off = bench.replay(study, predicted, None)
    assert off["measured"] == 5 and off["model_pruned"] == 0 and off["to_98_own"] == 4 and off["best_kept"]
    assert off["times_s"] == [5.0, 4.0, 3.0, 1.0, 2.0]
    two = bench.replay(study, predicted, 2.0)  # trial 1 (2.5 > 2 × 1.0) skipped
    assert two["model_pruned"] == 1 and two["times_s"] == [5.0, 3.0, 1.0, 2.0] and two["to_98_own"] == 3
    tight = bench.replay(study, predicted, 1.5)  # trial 3 (1.6 > 1.5 × 1.0) skipped too: the best is lost
    assert tight["model_pruned"] == 2 and not tight["best_kept"] and tight["to_98_own"] is None
    assert tight["best_s"] == 2.0 and tight["study_best_s"] == 1.0


def test_replay_held_out_reads_the_folds_and_names_a_bad_file(bench, tmp_path):
    fit = ROOT / "benchmarks" / "results" / "costmodel_rank_sm_90_2026-12-04.json"
    folds = bench.held_out_params(fit)
    assert {"1024x1024x1024", "35x8457x2560", "4096x4096x4096"} <= set(folds)
    assert all("fold without" in p.source for p in folds.values())
    assert folds["4096x4096x4096"].wavefront_issue_cycles != folds["1024x1024x1024"].wavefront_issue_cycles
    for text, said in (("{", "not valid"), ('{"folds": []}', "no folds"), ('{"folds": [{"x": 1}]}', "not a")):
        bad = tmp_path / "fit.json"
        bad.write_text(text)
        with pytest.raises(SystemExit, match=said) as info:
            bench.held_out_params(bad)
        assert str(bad) in str(info.value)
    with pytest.raises(SystemExit, match="no such file"):
        bench.held_out_params(tmp_path / "none.json")

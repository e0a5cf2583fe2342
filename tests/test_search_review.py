"""search.tune review fixes on the CPU: argument checks before any search, a spill-free model-only winner
(or the default, with a warning), a report that says its figures are predictions, the --layout
convention, canonical GEMM vec, deterministic tie-breaks, the GEMM bench built from the op, graph
capture keeping its allocations alive, no fallback cost model."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import tiledsl

optuna = pytest.importorskip("optuna")

from search import families, finalists, measure, objective, tune  # noqa: E402
from search.space import GEMM_SPACE, REDUCE_SPACE, TRANSPOSE_SPACE, schedule_key, tie_key  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
H200 = tiledsl.Target.known("H200")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("TILEDSL_CACHE_DIR", str(d))
    return d


# ---------------------------------------------------------------- 1. bad arguments: exit 2, no search


BAD = [
    (["--trials", "-5"], "--trials"), (["--trials", "0"], "--trials"), (["--timeout", "-1"], "--timeout"),
    (["--jobs", "0"], "--jobs"), (["--jobs", "-3"], "--jobs"), (["--seed-top", "-1"], "--seed-top"),
    (["--compile-top", "0"], "--compile-top"), (["--final-top", "-2"], "--final-top"),
    (["--device", "V100"], "known: H200"), (["--device", "garbage"], "known: H200"),
    (["--storage", "foo://bar"], "--storage foo://bar: cannot open it: "),
    (["--storage", "sqlite:////nonexistent/x.db"], "--storage sqlite:////nonexistent/x.db: cannot open it: "),
]


@pytest.mark.parametrize("extra, says", BAD + [(["--m", "0"], "--m"), (["--n", "0"], "--n"), (["--k", "0"], "--k")])
def test_bad_arguments_exit_2_before_any_search(extra, says, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(tune, "run", lambda *a, **k: pytest.fail("the search started"))
    args = ["gemm", "--m", "64", "--n", "64", "--k", "64", "--model-only",
            "--storage", f"sqlite:///{tmp_path / 't.db'}", *extra]
    with pytest.raises(SystemExit) as e:
        tune.main(args)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "python -m search.tune gemm: error:" in err and says in err and "Traceback" not in err
    assert len(err.strip().splitlines()[-1]) < 400


def test_export_into_an_existing_file_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(tune, "run", lambda *a, **k: pytest.fail("the search started"))
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(SystemExit) as e:
        tune.main(["gemm", "--m", "64", "--n", "64", "--k", "64", "--model-only", "--export", str(afile),
                   "--storage", f"sqlite:///{tmp_path / 't.db'}"])
    assert e.value.code == 2 and f"--export {afile}: is an existing file" in capsys.readouterr().err


def test_bad_arguments_from_the_command_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "search.tune", "gemm", "--m", "64", "--n", "64", "--k", "64",
                        "--storage", "foo://bar"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "error: --storage foo://bar: cannot open it:" in r.stderr


# ---------------------------------------------------------------- 2./3. model-only winner and report


def _model_only(tmp_path, *extra, shape=("4096", "4096", "4096")):
    m, n, k = shape
    return ["gemm", "--m", m, "--n", n, "--k", k, "--model-only", "--storage", f"sqlite:///{tmp_path / 't.db'}",
            "--no-progress", "--export", str(tmp_path / "best"), *extra]


def _table(text: str) -> tuple[list[str], list[list[str]]]:
    lines = text.splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.startswith("#  "))
    head = re.split(r"\s{2,}", lines[i].strip())
    rows = []
    for ln in lines[i + 2:]:
        if not ln.strip():
            break
        rows.append(re.split(r"\s{2,}", ln.strip()))
    return head, rows


def test_model_only_exports_a_winner_without_spills(tmp_path, cache, capsys):
    """4096³ float32 (the README's main job): every top prediction spills; the search compiles further
    candidates until one does not, and the report says so."""
    assert tune.main(_model_only(tmp_path, "--trials", "60", "--compile-top", "2")) == 0
    text = capsys.readouterr().out
    rec = json.loads((tmp_path / "best" / "schedule.json").read_text())
    assert rec["kernel"]["spill_bytes"] == 0
    head, rows = _table(text)
    assert head == ["#", "trial", "schedule", "predicted ms", "predicted TFLOP/s", "% roofline",
                    "re-predicted ms (compiled)", "bound by", "regs/smem/spill"]
    star = [r for r in rows if r[0].endswith("*")]
    assert len(star) == 1 and star[0][-1].endswith("/0")
    m = re.search(r"(\d+) compiled for sm_90 \((\d+) without register spills", text)
    assert m and int(m.group(1)) >= 2 and int(m.group(2)) >= 1
    if "warning:" not in text:
        assert ("the compiled one without register spills" in text or "* = winner: the library default (trial "
                in text) and star[0][1] == str(rec["trial"])
    predicted = [float(r[3]) for r in rows if r[1] != "default"]
    assert predicted == sorted(predicted), "rows are sorted by predicted ms"
    assert "PREDICTION" in text and "not a measurement" in text and "uncalibrated" in text
    assert "median measured/predicted = 0.75-1.25 for float32 GEMM held out" in text
    assert "pred ms" not in text and "% vendor" not in text


def test_model_only_falls_back_to_the_default_when_everything_spills(tmp_path, cache, capsys, monkeypatch):
    from tiledsl.gemm import default_schedule

    op = families.gemm_op(1024, 1024, 512)
    default = default_schedule(op, H200)
    real = tiledsl.compile

    def spilling(op_, s, **kw):
        k = real(op_, s, **kw)
        return k if s == default else dataclasses.replace(k, spill_bytes=64)

    monkeypatch.setattr(tiledsl, "compile", spilling)
    monkeypatch.setattr(finalists, "SPILL_SEARCH_COMPILES", 2)
    assert tune.main(_model_only(tmp_path, "--trials", "20", "--compile-top", "1",
                                 shape=("1024", "1024", "512"))) == 0
    text = capsys.readouterr().out
    warn = [ln for ln in text.splitlines() if ln.startswith("warning:")]
    assert len(warn) == 1 and "none of the 3 compiled candidates is free of register spills" in warn[0]
    assert "default_schedule" in warn[0]
    rec = json.loads((tmp_path / "best" / "schedule.json").read_text())
    assert tiledsl.GemmSchedule.from_dict(rec["schedule"]) == default and rec["kernel"]["spill_bytes"] == 0
    _, rows = _table(text)
    assert rows[-1][0].endswith("*") and rows[-1][1] == "default"
    assert "the library default (last row), because none of the 3" in text


# ---------------------------------------------------------------- 4. --layout convention


def test_layout_help_and_docs_state_the_convention(capsys):
    with pytest.raises(SystemExit):
        tune.main(["gemm", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for s in ("N = row-major operand", "T = column-major", "a_t=1 -> A row-major (N)", "a_t=0 -> A column-major (T)"):
        assert s in text
    doc = (ROOT / "docs" / "search.md").read_text()
    assert "a_t=1" in doc and "a_t=0" in doc and "column-major" in doc
    assert families.LAYOUTS["TN"] == ("col", "row")


# ---------------------------------------------------------------- 5. canonical vec


def _normalized(src: str) -> str:
    src = re.sub(r"tiledsl_gemm_\w+_[0-9a-f]{8}", "NAME", src)
    code = [ln.split("  //")[0] for ln in src.splitlines() if not ln.startswith("// schedule:")]
    return "\n".join(ln for ln in code if not re.search(r"\bVEC\b|MIN_BLOCKS", ln))


@pytest.mark.parametrize("shape", [(512, 384, 258), (512, 386, 258), (512, 386, 256), (64, 64, 64)])
def test_gemm_vec_above_the_alignment_is_canonicalized(shape):
    from tiledsl.gemm.emit import emit_gemm

    op = families.gemm_op(*shape)
    widest = max(op.align_a, op.align_b)
    keys = set()
    for vec in (1, 2, 4):
        for mb in (1, 2):
            s = tiledsl.GemmSchedule(vec=vec, min_blocks=mb)
            c = GEMM_SPACE.canonicalize(s, op, H200)
            assert c.vec == min(vec, widest)
            assert _normalized(emit_gemm(op, s).source) == _normalized(emit_gemm(op, c).source), (vec, mb)
            if vec >= widest:
                keys.add((mb if c.min_blocks == mb else "ignored", schedule_key(c)))
    # every vec >= the widest gives one kernel per effective min_blocks
    assert len({k for _, k in keys}) == len({tiledsl.GemmSchedule(vec=widest, min_blocks=mb).min_blocks
                                            for mb in (1, 2)} if (op.align_a == op.align_b) else {1})


def test_space_build_returns_the_canonical_schedule():
    op = families.gemm_op(512, 386, 258)  # align 2 / 2
    params = GEMM_SPACE.from_schedule(tiledsl.GemmSchedule())
    built = GEMM_SPACE.build(params, H200, op)
    assert built.vec == 2 and built.min_blocks == 1  # the emitter ignored min_blocks=2 with narrower loads
    assert GEMM_SPACE.build(params, H200).vec == 4  # without the op nothing is clamped


def test_model_only_never_evaluates_one_kernel_twice(tmp_path, cache):
    from optuna.trial import TrialState

    db = tmp_path / "t.db"
    assert tune.main(["gemm", "--m", "512", "--n", "386", "--k", "258", "--model-only", "--storage", f"sqlite:///{db}",
                      "--no-progress", "--trials", "40", "--compile-top", "1", "--sampler", "random"]) == 0
    study = optuna.load_study(study_name="gemm-512x386x258-float32-NN-H200-model", storage=f"sqlite:///{db}")
    owned = [t for t in study.trials if t.state == TrialState.COMPLETE and "duplicate_of" not in t.user_attrs]
    assert owned and all(t.user_attrs["schedule"]["vec"] <= 2 for t in owned)
    keys = [t.user_attrs["claim"][0] for t in owned]
    assert len(keys) == len(set(keys))


# ---------------------------------------------------------------- 6. tie-breaks


def test_reduce_ties_prefer_the_default_then_two_pass():
    from tiledsl.reduce import ReduceOp, default_schedule

    op = ReduceOp(shape=(4096, 8192), op="sum", axis=1)
    key = tie_key(REDUCE_SPACE.for_op(op), op, H200)
    d = default_schedule(op, H200)
    atomic = dataclasses.replace(d, combine="atomic")
    other = dataclasses.replace(d, block=d.block // 2)
    other_atomic = dataclasses.replace(other, combine="atomic")
    assert sorted([other_atomic, atomic, other, d], key=key) == [d, atomic, other, other_atomic][:1] + sorted(
        [other_atomic, atomic, other], key=key)
    assert key(d) < key(atomic) and key(other) < key(other_atomic)
    assert key(d) == key(dataclasses.replace(d))  # deterministic


def test_transpose_ties_prefer_the_default_then_the_presets():
    from tiledsl.registry import presets
    from tiledsl.transpose import TransposeOp, default_schedule

    op = TransposeOp(shape=(4096, 2048))
    key = tie_key(TRANSPOSE_SPACE, op, H200)
    table = list(presets("transpose").values())
    d = default_schedule(op, H200)
    plain = dataclasses.replace(table[-1], swizzle=2)
    assert min([plain, *table, d], key=key) == d
    assert key(table[0]) < key(table[1]) < key(plain)


def test_model_only_winner_among_equal_predictions_is_the_preferred_one(tmp_path, cache, capsys, monkeypatch):
    from tiledsl.reduce import ReduceOp, default_schedule

    monkeypatch.setattr(objective.Model, "predict", lambda self, op, s, t, kernel=None: 1e-3)
    monkeypatch.setattr(objective.Model, "explain", lambda self, op, s, t: {"predicted_s": 1e-3, "bound_by": "hbm"})
    assert tune.main(["reduce", "--shape", "4096x8192", "--axis", "1", "--model-only", "--no-progress",
                      "--storage", f"sqlite:///{tmp_path / 't.db'}", "--trials", "12", "--compile-top", "2",
                      "--export", str(tmp_path / "best")]) == 0
    rec = json.loads((tmp_path / "best" / "schedule.json").read_text())
    d = default_schedule(ReduceOp(shape=(4096, 8192), op="sum", axis=1), H200)
    assert rec["schedule"] == d.to_dict()  # the default is seeded, every prediction ties: the default wins


# ---------------------------------------------------------------- 7. the GEMM bench, built from the op


@pytest.fixture
def numpy_as_cupy(monkeypatch):
    fake = types.SimpleNamespace(
        random=types.SimpleNamespace(random=lambda n, dtype: np.random.default_rng(0).random(n).astype(dtype)),
        full=np.full, float64=np.float64, float32=np.float32, dtype=np.dtype, nan=np.nan, matmul=np.matmul,
        add=np.add, abs=np.abs)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    return fake


def _align_of(x: np.ndarray) -> tuple[str, int]:
    """tiledsl.gemm's analysis of one operand: (layout, alignment in elements)."""
    rows, cols = x.shape
    sr, sc = (s // x.itemsize for s in x.strides)
    layout, ld, ext = ("row", sr, cols) if sc == 1 else ("col", sc, rows)
    vec = 4
    while vec > 1 and (x.ctypes.data % (vec * x.itemsize) or ld % vec or ext % vec):
        vec //= 2
    return layout, vec


def test_gemm_bench_of_the_rows_of_a_few_column_product(numpy_as_cupy):
    """search.tune --as-rows: the bench of the rows op (a column-major C) builds operands of exactly its layouts and
    alignments, each starting at its allocation where the leading dimension already sets the alignment (N = 2, an odd
    M), as a user's fresh arrays do; the vendor call computes the user's product into the same C."""
    from search.families import as_rows_op

    rows = as_rows_op(families.gemm_op(3001, 2, 1025, layout="TN"))
    assert (rows.m, rows.n, rows.layout_c, rows.align_a, rows.align_b, rows.align_c) == (2, 3001, "col", 2, 1, 2)
    bench = measure.GemmBench(rows)
    a, b, c, _ = bench.inputs()
    assert a.shape == (2, 1025) and b.shape == (1025, 3001) and c.shape == (2, 3001)
    assert _align_of(a) == (rows.layout_a, 2) and _align_of(b) == (rows.layout_b, 1) and _align_of(c) == ("col", 2)
    assert all(x.ctypes.data % 16 == 0 for x in (a, b, c))  # no offset: ld = 2 or 3001 holds the alignment already
    bench.vendor((a, b, c, None))
    assert np.allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("layout, aligns, read_c", [("NN", (4, 4, 4), False), ("TN", (2, 4, 1), True),
                                                     ("NT", (1, 2, 2), True), ("TT", (4, 4, 4), False)])
def test_gemm_bench_inputs_are_the_op(layout, aligns, read_c, numpy_as_cupy):
    la, lb = families.LAYOUTS[layout]
    op = tiledsl.GemmOp(64, 48, 40, layout_a=la, layout_b=lb, align_a=aligns[0], align_b=aligns[1],
                        align_c=aligns[2], read_c=read_c)
    bench = measure.GemmBench(op)
    a, b, c, c0 = bench.inputs()
    assert a.shape == (64, 40) and b.shape == (40, 48) and c.shape == (64, 48)
    assert _align_of(a) == (la, aligns[0]) and _align_of(b) == (lb, aligns[1]) and _align_of(c) == ("row", aligns[2])
    assert bench.beta == (1.0 if read_c else 0.0)
    ref = bench.reference((a, b, c, c0))
    want = a.astype(np.float64) @ b.astype(np.float64)
    if read_c:
        assert c0.dtype == np.float64 and np.array_equal(c0, c.astype(np.float64)) and np.isfinite(c).all()
        want = want + c0
    else:
        assert c0 is None and np.isnan(c).all()
    assert ref.dtype == np.float64 and np.allclose(ref, want, rtol=0, atol=0)


def test_gemm_bench_tolerance_scales_with_sqrt_k():
    eps = float(np.finfo(np.float32).eps)
    t = [measure.GemmBench(tiledsl.GemmOp(64, 64, k)).tolerance() - 4 * eps for k in (1024, 4096, 16384)]
    assert t[1] == pytest.approx(16 * eps * 64) and t[0] == pytest.approx(t[1] / 2) and t[2] == pytest.approx(2 * t[1])


# ---------------------------------------------------------------- 8. graph capture keeps its allocations


def test_capture_holds_what_the_captured_call_allocates(monkeypatch):
    events = []

    class Stream:
        def __init__(self, non_blocking=False):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

        def synchronize(self):
            events.append("sync")

        def begin_capture(self):
            events.append("begin")

        def end_capture(self):
            events.append("end")
            return types.SimpleNamespace(launch=lambda stream: events.append("replay"))

    current = {"alloc": None}

    @contextlib.contextmanager
    def using_allocator(alloc):
        current["alloc"] = alloc
        yield
        current["alloc"] = None

    pool = types.SimpleNamespace(malloc=lambda size: ("block", size))
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(Stream=Stream, using_allocator=using_allocator,
                                                            Device=lambda: types.SimpleNamespace(synchronize=lambda: 0)),
                                 get_default_memory_pool=lambda: pool)
    monkeypatch.setitem(sys.modules, "cupy", fake)

    def call():  # a split-K GEMM: allocates its workspace on every call
        events.append("call")
        if current["alloc"] is not None:
            current["alloc"](4096)

    stream, captured = measure._capture(call)
    assert events == ["call", "sync", "begin", "call", "end"]  # warm-up outside the capture first
    assert isinstance(captured, measure._Captured) and captured.held == [("block", 4096)]
    captured()
    assert events[-1] == "replay"


# ---------------------------------------------------------------- 9. no fallback cost model


def test_the_cost_model_is_tiledsls_and_its_errors_propagate():
    m = objective.load_model()
    assert m.label == "tiledsl.costmodel" and not hasattr(m, "fallback")
    assert not hasattr(objective, "fallback_predict") and not hasattr(objective, "_call_device")
    op = families.gemm_op(256, 256, 256)
    s = tiledsl.GemmSchedule()
    from tiledsl import costmodel

    assert m.predict(op, s, H200) == costmodel.predict(op, s, H200)
    with pytest.raises(Exception):  # noqa: B017 - whatever the model raises is not swallowed
        m.predict(object(), s, H200)

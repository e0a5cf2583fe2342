"""benchmarks/beside.py: the vendor figures are the mean of the runs right before and right after tiledsl's."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import beside  # noqa: E402
import pytest  # noqa: E402


def test_bracketed_averages_the_vendor_runs_around_ours():
    order = []
    timings = {"ours": [3.0], "vendor": [1.0, 2.0]}

    def timer(fn):
        name = fn()
        order.append(name)
        return timings[name].pop(0)

    assert beside.bracketed(lambda: "ours", lambda: "vendor", timer) == (3.0, 1.5)
    assert order == ["vendor", "ours", "vendor"]


def test_bracketed_averages_each_figure_of_a_tuple():
    figures = iter([(1.0, 10.0), (5.0, 50.0), (3.0, 30.0)])
    assert beside.bracketed(None, None, lambda fn: next(figures)) == ((5.0, 50.0), (2.0, 20.0))


def test_gemm_op_reads_blas_layout_names():
    ops = {lay: beside.gemm_op(3, 5, 7, lay) for lay in ("NN", "NT", "TN", "TT")}
    assert {lay: (op.layout_a, op.layout_b) for lay, op in ops.items()} == {
        "NN": ("row", "row"), "NT": ("row", "col"), "TN": ("col", "row"), "TT": ("col", "col")}
    assert (ops["NT"].m, ops["NT"].n, ops["NT"].k) == (3, 5, 7)


def test_the_few_column_and_gemv_unroll_sweeps_cover_the_data_sets_products():
    """benchmarks/gemm_few_columns.py takes every DeepBench product with N ≤ 16 < M above runs_as_row's floor (47),
    and benchmarks/gemv_unroll.py the LLM set's 17 (N, K) at four row counts plus its six few-column products; the
    docs' tables are over exactly these."""
    import gemm_few_columns
    import gemv_unroll

    from tiledsl.gemm.family import ROW_SWAP_MIN_ELEMENTS

    few = gemm_few_columns.shapes()
    assert len(few) == len(set(few)) == 47
    assert all(n <= 16 < m and m * k >= ROW_SWAP_MIN_ELEMENTS for m, n, k, _ in few)
    assert {layout for *_, layout in few} == {"TT", "NT"}
    sweep = gemv_unroll.shapes()
    assert len(sweep) == 17 * 4 + len(gemv_unroll.FEW_COLUMNS) and sum(rows for *_, rows in sweep) == 6


def _numpy_as_cupy(monkeypatch):
    """A stand-in ``cupy`` module over NumPy: what beside's operand maker and result check call."""
    import types

    import numpy as np

    rng = np.random.default_rng(0)
    fake = types.SimpleNamespace(
        float32=np.float32, float64=np.float64, nan=np.nan, abs=np.abs, empty=np.empty,
        asfortranarray=np.asfortranarray,
        random=types.SimpleNamespace(uniform=lambda lo, hi, shape, dtype: rng.uniform(lo, hi, shape).astype(dtype)))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    return np


def test_device_operands_follow_the_layout_and_the_check_catches_wrong_and_unwritten_results(monkeypatch):
    import pytest

    np = _numpy_as_cupy(monkeypatch)
    a, b, ref, c = beside.device_gemm_operands(7, 5, 300, "TN")
    assert a.shape == (7, 300) and a.flags.f_contiguous and not a.flags.c_contiguous
    assert b.shape == (300, 5) and b.flags.c_contiguous and c.shape == (7, 5) and c.dtype == np.float32
    assert ref.dtype == np.float64 and np.allclose(ref, a.astype(np.float64) @ b.astype(np.float64))

    def right():
        c[...] = a @ b

    assert beside.checked_call(right, c, ref, 300, "right") < 1e-5
    with pytest.raises(SystemExit, match="WRONG RESULT: rel err .* for half"):
        beside.checked_call(lambda: c.__setitem__(Ellipsis, 0.5 * (a @ b)), c, ref, 300, "half")
    with pytest.raises(SystemExit, match="WRONG RESULT: rel err nan for unwritten"):  # c stays NaN-poisoned
        beside.checked_call(lambda: None, c, ref, 300, "unwritten")


class _DeviceArray:
    """A stand-in for a 2-D float32 CuPy array on a CPU machine: shape, strides in bytes, a device pointer."""

    ndim, itemsize, dtype = 2, 4, "float32"

    def __init__(self, shape, strides, ptr=0x10000) -> None:
        from types import SimpleNamespace

        self.shape, self.strides, self.data = tuple(shape), tuple(strides), SimpleNamespace(ptr=ptr)

    @property
    def T(self):
        return _DeviceArray(self.shape[::-1], self.strides[::-1], self.data.ptr)


def _row_major(rows, cols, ptr=0x10000):
    return _DeviceArray((rows, cols), (4 * cols, 4), ptr)


def test_gemm_as_rows_enters_tiledsl_gemm_s_rows_path(monkeypatch):
    """The transposed operands, C's transpose (column-major for more than one column) and the given schedule reach
    the entry tiledsl.gemm takes for runs_as_row products (beside.gemm_as_rows is the library's); a host array, a
    C with the wrong unit stride and N ≥ M are refused naming the argument."""
    import numpy as np

    import tiledsl
    from tiledsl.gemm import api

    seen = []
    monkeypatch.setattr(api, "_gemm_into", lambda *args, **kw: seen.append((args, kw)))
    monkeypatch.setattr(api, "check_no_overlap", lambda *args, **kw: None)  # reads device pointers
    assert beside.gemm_as_rows is api.gemm_as_rows
    a, b = _row_major(7, 3), _row_major(3, 4, 0x20000)
    for c in (_row_major(7, 4, 0x30000), _row_major(7, 1, 0x30000)):
        beside.gemm_as_rows(a, b if c.shape[1] > 1 else _row_major(3, 1, 0x20000), c, "the schedule")
    (args4, kw4), (args1, kw1) = seen
    assert args4[0].shape == (4, 3) and args4[1].shape == (3, 7) and args4[2].shape == (4, 7)
    assert args4[2].strides == (4, 16)  # the row-major C seen transposed: column-major
    assert args4[5] == "the schedule" and args4[9] is True and kw4 == {"c_col": True} and kw1 == {"c_col": False}
    with pytest.raises(tiledsl.SpecTypeError, match="c is a numpy.ndarray"):
        api.gemm_as_rows(a, b, np.empty((7, 4), np.float32), "s")
    with pytest.raises(tiledsl.SpecError, match="unit stride along N"):
        api.gemm_as_rows(a, b, _row_major(4, 7).T, "s")
    with pytest.raises(tiledsl.SpecError, match="N=7 must be at least 1 and below M=7"):
        api.gemm_as_rows(_row_major(7, 3), _row_major(3, 7), _row_major(7, 7), "s")


def test_as_rows_bench_builds_the_op_schedule_none_runs(monkeypatch):
    """What search.tune --as-rows relies on: for products that schedule=None runs as rows (every layout, N = 2…16,
    odd M and K, alignments 1/2/4, K past 65536), the op tiledsl.gemm builds for the user's contiguous arrays, the
    rows op as_rows_op names (the record's key), and the op the bench's call builds from its own inputs
    (search.measure._gemm_matrix, a column-major C) are one op. The launch is stopped at the schedule's resolution."""
    import itertools
    from types import SimpleNamespace

    import tiledsl
    from search.families import as_rows_op, gemm_op
    from search.measure import GemmBench
    from tiledsl.gemm import api
    from tiledsl.gemm.family import runs_as_row

    h200 = tiledsl.Target.known("H200")
    seen = []

    class Stop(Exception):
        pass

    def resolved(family, op, schedule, target):
        seen.append(op)
        raise Stop

    monkeypatch.setattr(api, "resolve_schedule", resolved)
    monkeypatch.setattr(api, "Target", SimpleNamespace(current=lambda: h200))
    monkeypatch.setattr(api, "check_no_overlap", lambda *args, **kw: None)

    def contiguous(rows, cols, layout, ptr):
        return _row_major(rows, cols, ptr) if layout == "row" else _row_major(cols, rows, ptr).T

    def bench_matrix(rows, cols, layout, align, ptr):  # search.measure._gemm_matrix's strides and offset
        ext, other = (cols, rows) if layout == "row" else (rows, cols)
        ld = -(-ext // align) * align
        off = 0 if align >= 4 or tiledsl.spec.widest_dividing(4, ld, ext) == align else align
        store = _DeviceArray((other, ext), (4 * ld, 4), ptr + 4 * off)
        return store if layout == "row" else store.T

    def built(call, *args):
        seen.clear()
        with pytest.raises(Stop):
            call(*args)
        return seen[-1]

    checked = 0
    for m, n, k, layout in itertools.product((7680, 3001, 4098), (2, 3, 4, 6, 8, 12, 16), (2560, 1025, 65538),
                                             ("NN", "NT", "TN", "TT")):
        product = gemm_op(m, n, k, "float32", layout)
        if not runs_as_row(product, h200):
            continue
        rows = as_rows_op(product)
        la, lb = ("row" if t == "N" else "col" for t in layout)
        user = built(api._gemm_into, contiguous(m, k, la, 0x10000), contiguous(k, n, lb, 0x20000),
                     _row_major(m, n, 0x30000), 1.0, 0.0, None, "float32", None, True)
        inputs = (bench_matrix(rows.m, rows.k, rows.layout_a, rows.align_a, 0x40000),
                  bench_matrix(rows.k, rows.n, rows.layout_b, rows.align_b, 0x50000),
                  bench_matrix(rows.m, rows.n, rows.layout_c, rows.align_c, 0x60000), None)
        bench = built(GemmBench(rows).public, inputs, "the trial's schedule")
        assert user == rows == bench, (m, n, k, layout)
        checked += 1
    assert checked > 40


def test_costmodel_gemv_quality_figures_on_a_known_ranking():
    """benchmarks/costmodel_gemv.py's figures: a predictor that orders the schedules as measured scores ρ = 1, the
    best first, no loss; the reverse order scores ρ = −1 and loses the worst/best ratio."""
    import costmodel_gemv as cgv
    import pytest

    import tiledsl

    op = tiledsl.GemmOp(1, 4096, 4096)
    scheds = [tiledsl.GemmSchedule(kernel="gemv", bm=1, bn=128, split_k=k) for k in (8, 16, 32, 64)]
    groups = [(op, [(s, ms) for s, ms in zip(scheds, (4.0, 3.0, 2.0, 1.0), strict=True)])]
    right = cgv.quality(groups, lambda o, s: 1.0 / s.split_k)
    assert right == dict(products=1, mean_rho=pytest.approx(1.0), best_first=1.0, best_in_top3=1.0,
                         pick_over_best=pytest.approx(1.0))
    wrong = cgv.quality(groups, lambda o, s: float(s.split_k))
    assert wrong["mean_rho"] == pytest.approx(-1.0) and wrong["best_first"] == 0.0 and wrong["best_in_top3"] == 0.0
    assert wrong["pick_over_best"] == pytest.approx(4.0)


def test_workload_shapes_are_the_data_sets_distinct_products():
    shapes = beside.workload_shapes()
    assert len(shapes) == 311  # the count every workloads table quotes
    assert shapes[(35, 8457, 2560, "TT")].startswith("deepbench") and shapes[(16, 768, 768, "NN")].startswith("llm")
    assert all(layout in ("NN", "NT", "TN", "TT") for (_, _, _, layout) in shapes)


def test_tune_workloads_tunes_what_schedule_none_runs_and_shards_and_summarises():
    import tune_workloads as tw

    import tiledsl

    h200 = tiledsl.Target.known("H200")
    assert tw.gemm_tune_args(1024, 700, 512, "TT", h200) == (
        ["--m", "1024", "--n", "700", "--k", "512", "--layout", "TT"], "the product")
    # one column with K ≥ 1024 and a column-major A runs as the row yᵀ = xᵀ·Aᵀ: tuned as that row, 1 × M × K
    assert tw.gemm_tune_args(128, 1, 1024, "TT", h200) == (
        ["--m", "1", "--n", "128", "--k", "1024", "--layout", "NN"], "its single row (runs_as_row)")
    # tiledsl.gemm sees a one-column B as row-major whatever its strides: the tune's op must be the same kernel's
    assert tw.gemm_tune_args(4096, 1, 64, "TT", h200) == (  # K = 64: one slice, no row in one launch (tiled)
        ["--m", "4096", "--n", "1", "--k", "64", "--layout", "TN"], "the product")
    assert tw.gemm_tune_args(512, 1, 512, "TT", h200) == (  # K < 1024 but one launch as its row (row_in_one_launch)
        ["--m", "1", "--n", "512", "--k", "512", "--layout", "NN"], "its single row (runs_as_row)")
    # a few columns into a column-major Cᵀ: tuned as those rows (search.tune --as-rows), the op tiledsl.gemm builds
    assert tw.gemm_tune_args(7680, 4, 2560, "TT", h200) == (
        ["--m", "7680", "--n", "4", "--k", "2560", "--layout", "TT", "--as-rows"],
        "its rows into a column-major Cᵀ (runs_as_row, --as-rows)")
    rows = tw.tuned_op(7680, 4, 2560, "TT", h200)
    assert (rows.m, rows.n, rows.layout_a, rows.layout_b, rows.layout_c) == (4, 7680, "row", "row", "col")
    assert tw.default_schedule(7680, 4, 2560, "TT", h200)["kernel"] == "gemv"
    work = tw.data_workloads()
    assert len(work) == 311 and len({name for _, name, _ in work}) == 311
    parts = [tw.shard(work, f"{i}/3") for i in range(3)]
    assert sorted(sum(parts, []), key=work.index) == work and all(parts)
    for bad in ("3/3", "x", "1/0", "-1/2"):
        with pytest.raises(SystemExit, match="--shard"):
            tw.shard(work, bad)
    rows = [{"default_s": 1.0, "tuned_s": 1.0, "vendor_s": 1.0},    # default = tuned = cuBLAS
            {"default_s": 2.0, "tuned_s": 1.0, "vendor_s": 1.0},    # default 2× the tuned kernel: 0.5× cuBLAS
            {"default_s": 1.05, "tuned_s": 1.0, "vendor_s": 2.0},   # within 10 %, tuned 2× cuBLAS
            {"skipped": True}, {"error": "after the tune: SystemExit: WRONG RESULT"}]
    s = tw.summary(rows)
    assert s["products"] == 3 and s["default_within_10pct_of_tuned"] == 2 and s["default_below_0_7_vendor"] == 1
    assert s["tuned_over_vendor_geomean"] == pytest.approx(2 ** (1 / 3)) and s["tuned_below_1_0_vendor"] == 0
    assert (s["skipped"], s["failed"]) == (1, 1)
    assert tw.summary([{"skipped": True}]) == {"products": 0, "skipped": 1, "failed": 0}


def test_tune_workloads_main_keeps_going_after_a_failure_and_resumes(tmp_path, monkeypatch, capsys):
    """The pass over the data sets (GPU parts replaced): a product whose check fails gets its error in its row and
    the pass goes on (exit status 1); the table is refused without --resume; --resume keeps the finished rows and
    retries the failed one; schedule=None's process reads its own tuned-record store, not the user's."""
    import tune_workloads as tw

    import tiledsl

    monkeypatch.setenv("TILEDSL_CACHE_DIR", str(tmp_path / "cache"))  # main() sets it: restored after the test
    work = tw.data_workloads()[:3]
    seen_env = []
    monkeypatch.setattr(tw, "data_workloads", lambda: work)
    monkeypatch.setattr(tw, "gpu_or_exit", lambda script: tiledsl.Target.known("H200"))
    schedule = tiledsl.GemmSchedule().to_dict()

    def fake_tune(family, name, shape_args, args, out, env, retune=False):
        seen_env.append((env["TILEDSL_CACHE_DIR"], tw.os.environ["TILEDSL_CACHE_DIR"]))
        return {"command": "x", "rc": 0, "wall_s": 0.1, "schedule": schedule, "tune_ratio": 1.0}

    fail = {work[1][1]}

    def fake_compare(m, n, k, layout, tuned, as_row):
        if f"{m}x{n}x{k}_{layout}" in fail:
            raise SystemExit("WRONG RESULT: rel err 1.0")
        return {"default_s": 2.0, "tuned_s": 1.0, "vendor_s": 1.0}

    monkeypatch.setattr(tw, "_tune", fake_tune)
    monkeypatch.setattr(tw, "compare", fake_compare)
    out = tmp_path / "tw"
    monkeypatch.setattr(sys, "argv", ["tune_workloads.py", "--data", "--out", str(out)])
    assert tw.main() == 1
    rows = json.loads((out / "tune_workloads.json").read_text())["rows"]
    assert [("error" in r) for r in rows] == [False, True, False] and "WRONG RESULT" in rows[1]["error"]
    assert all(tune == str(out / "store") and parent == str(out / "parent-store") for tune, parent in seen_env)
    with pytest.raises(SystemExit, match="exists: pass --resume"):
        tw.main()
    fail.clear()
    table = json.loads((out / "tune_workloads.json").read_text())  # a row skipped by an older pass (before
    table["rows"][2] = {"family": "gemm", "name": work[2][1], "skipped": True,  # --as-rows) is asked again
                        "tuned": "skipped: run as rows into a column-major Cᵀ, which search.tune cannot express"}
    (out / "tune_workloads.json").write_text(json.dumps(table))
    monkeypatch.setattr(sys, "argv", ["tune_workloads.py", "--data", "--out", str(out), "--resume"])
    assert tw.main() == 0
    rows = json.loads((out / "tune_workloads.json").read_text())["rows"]
    assert sorted(r["name"] for r in rows) == sorted(w[1] for w in work) and not any("error" in r for r in rows)
    assert not any(r.get("skipped") for r in rows)
    assert len(seen_env) == 5  # the failed and the skipped products tuned again, the finished one not

    def slower_default(m, n, k, layout, tuned, as_row):  # --recompare: times again, tunes nothing
        if f"{m}x{n}x{k}_{layout}" == work[2][1]:
            raise SystemExit("WRONG RESULT: rel err 2.0")
        return {"default_s": 3.0, "tuned_s": 1.0, "vendor_s": 1.5}

    monkeypatch.setattr(tw, "compare", slower_default)
    monkeypatch.setattr(sys, "argv", ["tune_workloads.py", "--data", "--out", str(out), "--recompare"])
    assert tw.main() == 1 and len(seen_env) == 5
    rows = {r["name"]: r for r in json.loads((out / "tune_workloads.json").read_text())["rows"]}
    assert [rows[w[1]].get("default_s") for w in work] == [3.0, 3.0, None]  # the failed check lost its old times
    assert "WRONG RESULT" in rows[work[2][1]]["error"] and rows[work[0][1]]["compared"]
    monkeypatch.setattr(sys, "argv", ["tune_workloads.py", "--out", str(out), "--recompare"])
    with pytest.raises(SystemExit, match="--recompare needs --data"):
        tw.main()
    monkeypatch.setattr(sys, "argv", ["tune_workloads.py", "--data", "--ship", "--out", str(tmp_path / "x")])
    with pytest.raises(SystemExit):
        tw.main()


def test_tune_workloads_only_tunes_in_the_order_given(tmp_path, monkeypatch):
    """--only NAMES tunes its products in the order given (a list ranked weakest first is tuned weakest first), not
    in the data sets' order, and nothing outside it."""
    import tune_workloads as tw

    import tiledsl

    monkeypatch.setenv("TILEDSL_CACHE_DIR", str(tmp_path / "cache"))
    work = tw.data_workloads()[:4]
    monkeypatch.setattr(tw, "data_workloads", lambda: work)
    monkeypatch.setattr(tw, "gpu_or_exit", lambda script: tiledsl.Target.known("H200"))
    schedule = tiledsl.GemmSchedule().to_dict()
    tuned = []

    def fake_tune(family, name, shape_args, args, out, env, retune=False):
        tuned.append(name)
        return {"command": "x", "rc": 0, "wall_s": 0.1, "schedule": schedule, "tune_ratio": 1.0}

    monkeypatch.setattr(tw, "_tune", fake_tune)
    monkeypatch.setattr(tw, "compare", lambda *a: {"default_s": 1.0, "tuned_s": 1.0, "vendor_s": 1.0})
    given = [work[3][1], work[0][1], work[2][1]]
    monkeypatch.setattr(sys, "argv", ["tune_workloads.py", "--data", "--out", str(tmp_path / "tw"),
                                      "--only", ",".join(given)])
    assert tw.main() == 0
    assert tuned == given
    # --weakest RESULTS: lowest schedule=None/cuBLAS first, products the file lacks last in data-set order
    res = tmp_path / "whole.json"
    ratio = {work[2][1]: 0.8, work[1][1]: 0.9, work[3][1]: 1.2}
    res.write_text(json.dumps({"rows": [{"kind": "gemm", "m": 1}] + [
        {"kind": "workload", "m": int(n.split("x")[0]), "n": int(n.split("x")[1]),
         "k": int(n.split("x")[2].split("_")[0]), "layout": n.split("_")[1], "ratio": r} for n, r in ratio.items()]}))
    tuned.clear()
    monkeypatch.setattr(sys, "argv", ["tune_workloads.py", "--data", "--out", str(tmp_path / "tw2"),
                                      "--weakest", str(res)])
    assert tw.main() == 0
    assert tuned == [work[2][1], work[1][1], work[3][1], work[0][1]]


def test_tune_workloads_weakest_refuses_bad_results_and_mixes(tmp_path, monkeypatch, capsys):
    """--weakest names the file and what is wrong with it; it goes only with a --data pass and not with --only."""
    import tune_workloads as tw

    bad = tmp_path / "bad.json"
    cases = [("{", "not valid"), ("[]", "rows"), ('{"rows": []}', "no workload rows"),
             ('{"rows": [{"kind": "workload", "m": 1}]}', "without m, n, k"),
             ('{"rows": [{"kind": "workload", "m": 1, "n": 2, "k": 3, "layout": "NN", "ratio": "nan"}]}', "finite")]
    for text, said in cases:
        bad.write_text(text)
        monkeypatch.setattr(sys, "argv", ["tune_workloads.py", "--data", "--out", str(tmp_path / "o"),
                                          "--weakest", str(bad)])
        with pytest.raises(SystemExit):
            tw.main()
        err = capsys.readouterr().err
        assert "--weakest" in err and str(bad) in err and said in err, err
    good = tmp_path / "good.json"  # a readable file: only the mix can be refused
    good.write_text('{"rows": [{"kind": "workload", "m": 1, "n": 2, "k": 3, "layout": "NN", "ratio": 0.9}]}')
    for argv, said in ((["--data", "--only", tw.data_workloads()[0][1]], "--only"), (["--data", "--recompare"], "--data pass"),
                       (["--data", "--ship-winners", "1.05"], "--data pass"), ([], "--data pass")):
        monkeypatch.setattr(sys, "argv", ["tune_workloads.py", "--out", str(tmp_path / "o"), "--weakest", str(good),
                                          *argv])
        with pytest.raises(SystemExit):
            tw.main()
        err = capsys.readouterr().err
        assert "--weakest" in err and said in err, (argv, err)
    assert not (tmp_path / "o").exists()


def test_tune_workloads_weakest_with_resume_tunes_the_untuned_weakest_first(tmp_path, monkeypatch):
    import tune_workloads as tw

    import tiledsl

    monkeypatch.setenv("TILEDSL_CACHE_DIR", str(tmp_path / "cache"))
    work = tw.data_workloads()[:4]
    monkeypatch.setattr(tw, "data_workloads", lambda: work)
    monkeypatch.setattr(tw, "gpu_or_exit", lambda script: tiledsl.Target.known("H200"))
    schedule = tiledsl.GemmSchedule().to_dict()
    tuned = []

    def fake_tune(family, name, shape_args, args, out, env, retune=False):
        tuned.append(name)
        return {"command": "x", "rc": 0, "wall_s": 0.1, "schedule": schedule, "tune_ratio": 1.0}

    monkeypatch.setattr(tw, "_tune", fake_tune)
    monkeypatch.setattr(tw, "compare", lambda *a: {"default_s": 1.0, "tuned_s": 1.0, "vendor_s": 1.0})
    out = tmp_path / "tw"
    monkeypatch.setattr(sys, "argv", ["tune_workloads.py", "--data", "--out", str(out), "--only", work[2][1]])
    assert tw.main() == 0  # one product finished before
    res = tmp_path / "whole.json"
    ratio = [0.7, 1.1, 0.5, 0.9]  # by data-set order; work[2] is the weakest but already tuned
    res.write_text(json.dumps({"rows": [
        {"kind": "workload", "m": int(n.split("x")[0]), "n": int(n.split("x")[1]),
         "k": int(n.split("x")[2].split("_")[0]), "layout": n.split("_")[1], "ratio": r}
        for (_, n, _), r in zip(work, ratio, strict=True)]}))
    tuned.clear()
    monkeypatch.setattr(sys, "argv", ["tune_workloads.py", "--data", "--out", str(out), "--resume",
                                      "--weakest", str(res)])
    assert tw.main() == 0
    assert tuned == [work[0][1], work[3][1], work[1][1]]


def test_tune_workloads_refuses_bad_tables_outs_and_names_and_keeps_rows_it_does_not_retry(tmp_path, monkeypatch,
                                                                                          capsys):
    """Faults of the pass (GPU parts replaced): a corrupt or malformed table, an --out that is a file, a misspelt
    --only, a second pass on the same folder and a non-finite --budget are refused with the file, row or argument
    named, before anything is tuned; --resume --only keeps the failed rows it does not retry; --recompare times the
    product a row's name stands for."""
    import tune_workloads as tw

    import tiledsl

    monkeypatch.setenv("TILEDSL_CACHE_DIR", str(tmp_path / "cache"))
    work = tw.data_workloads()[:3]
    tuned = []
    monkeypatch.setattr(tw, "data_workloads", lambda: work)
    monkeypatch.setattr(tw, "gpu_or_exit", lambda script: tiledsl.Target.known("H200"))
    monkeypatch.setattr(tw, "_tune", lambda family, name, *a, **kw: tuned.append(name) or {
        "command": "x", "rc": 0, "wall_s": 0.1, "schedule": tiledsl.GemmSchedule().to_dict(), "tune_ratio": 1.0})
    monkeypatch.setattr(tw, "compare", lambda *a: {"default_s": 2.0, "tuned_s": 1.0, "vendor_s": 1.0})
    out = tmp_path / "tw"
    table = out / "tune_workloads.json"

    def run(*argv):
        monkeypatch.setattr(sys, "argv", ["tune_workloads.py", "--data", "--out", str(out), *argv])
        return tw.main()

    def refused(*argv) -> str:
        with pytest.raises(SystemExit) as e:
            run(*argv)
        return str(e.value.code) + capsys.readouterr().err

    out.mkdir()
    for text, said in (("{", "not valid tune_workloads table"), ("[]", "not a {\"rows\": [...]} table"),
                       ('{"rows": [7]}', "row 0: is a int"), ('{"rows": [{"rc": 0}]}', "row 0: has no name"),
                       ('{"rows": [{"name": "a", "default_s": -1}]}', "default_s=-1 is not a finite figure"),
                       ('{"rows": [{"name": "a", "tuned_s": "1"}]}', "tuned_s='1'")):
        table.write_text(text)
        assert said in refused("--resume") and str(table) in refused("--resume") and not tuned
    table.unlink()
    (tmp_path / "afile").write_text("x")
    monkeypatch.setattr(sys, "argv", ["tune_workloads.py", "--data", "--out", str(tmp_path / "afile")])
    with pytest.raises(SystemExit):
        tw.main()
    err = capsys.readouterr().err
    assert "--out" in err and "is a file, not a folder" in err
    assert "--only: 1x1x1_NN_TYPO" in refused("--only", "1x1x1_NN_TYPO") and not tuned
    assert "--budget" in refused("--budget", "nan")
    with tw.locked(table, timeout_s=0):  # another pass holds the folder
        assert "in use by another tune_workloads.py" in refused() and not tuned
    # a failed row outside --only stays in the table, not silently dropped
    bad = {"name": work[1][1], "family": "gemm", "rc": 1, "error": "boom", "command": "x", "wall_s": 1.0}
    table.write_text(json.dumps({"rows": [bad]}))
    assert run("--resume", "--only", work[0][1]) == 0 and tuned == [work[0][1]]
    rows = {r["name"]: r for r in json.loads(table.read_text())["rows"]}
    assert rows[work[1][1]]["error"] == "boom" and json.loads(table.read_text())["summary"]["failed"] == 1
    # a failed row in scope but past --budget keeps its error until its product is tried again
    table.write_text(json.dumps({"rows": [dict(bad, name=work[2][1])]}))
    monkeypatch.setattr(tw, "_tune", lambda family, name, *a, **kw: time.sleep(0.05) or tuned.append(name) or {
        "command": "x", "rc": 0, "wall_s": 0.1, "schedule": tiledsl.GemmSchedule().to_dict(), "tune_ratio": 1.0})
    assert run("--resume", "--budget", "0.01") == 0
    rows = {r["name"]: r for r in json.loads(table.read_text())["rows"]}
    assert work[0][1] in rows and rows[work[2][1]]["error"] == "boom"
    table.write_text(json.dumps({"rows": [r for r in rows.values() if r["name"] == work[0][1]]}))
    # --recompare: a row whose shape is not its name's is an error, not timed as that other shape
    rows[work[0][1]]["m"] = 7
    table.write_text(json.dumps({"rows": list(rows.values())}))
    assert run("--recompare") == 1
    rows = {r["name"]: r for r in json.loads(table.read_text())["rows"]}
    assert "is not its name's" in rows[work[0][1]]["error"]


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, killed but not yet reaped by its new parent, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def test_tune_workloads_kills_a_tune_that_outlives_its_limit_with_its_children(tmp_path):
    """run_child: a child and the process it started are both gone after the time limit (its own process group is
    killed), and the status says it was killed."""
    import tune_workloads as tw

    pid_file = tmp_path / "grandchild.pid"
    script = ("import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; "
              f"time.sleep(60)']); open({str(pid_file)!r}, 'w').write(str(p.pid)); time.sleep(60)")
    rc, text = tw.run_child([sys.executable, "-c", script], dict(os.environ), 3)
    assert rc == -1 and "killed" in text
    grandchild = int(pid_file.read_text())

    for _ in range(50):
        if not _alive(grandchild):
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the tune's own child {grandchild} outlived the kill")


def test_a_tune_and_its_workers_end_when_the_pass_that_started_them_is_killed(tmp_path):
    """SIGKILL of the pass (nothing of it runs after): its child, started by run_child with TILEDSL_EXIT_WITH_PARENT,
    and that child's own worker (search.interrupt.exit_with_parent, as the compile pool's initializer does) are gone
    within seconds, not left running beside the next pass."""
    import signal
    import subprocess

    bench = Path(__file__).resolve().parents[1] / "benchmarks"
    pids = tmp_path / "pids"
    worker = ("import os, sys, time; from search.interrupt import exit_with_parent; exit_with_parent(0.1); "
              f"open({str(pids)!r}, 'a').write(str(os.getpid()) + ' '); time.sleep(60)")
    child = ("import os, subprocess, sys, time; from search.interrupt import EXIT_WITH_PARENT_ENV, exit_with_parent; "
             "assert os.environ[EXIT_WITH_PARENT_ENV] == '1'; exit_with_parent(0.1); "
             f"subprocess.Popen([sys.executable, '-c', {worker!r}]); "
             f"open({str(pids)!r}, 'a').write(str(os.getpid()) + ' '); time.sleep(60)")
    parent = ("import os, sys; sys.path.insert(0, " + repr(str(bench)) + "); import tune_workloads as tw; "
              f"tw.run_child([sys.executable, '-c', {child!r}], dict(os.environ), 60)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(bench.parent), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", parent], env=env)
    for _ in range(100):
        if pids.exists() and len(pids.read_text().split()) == 2:
            break
        time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("the child and its worker did not start")
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    left = [int(p) for p in pids.read_text().split()]
    for _ in range(50):
        left = [p for p in left if _alive(p)]
        if not left:
            break
        time.sleep(0.1)
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert not left, f"still running after their pass was killed: {left}"


def test_gemv_launch_family_is_one_launch_at_each_depth_on_the_small_products():
    """benchmarks/gemv_fused.py --family launch: the products of at most 16 MiB (the two one-column DeepBench
    products below 0.7x cuBLAS among them), each against the pick with one launch (the slices summed in the kernel)
    at depths 64, 32 and 16, with all and a quarter of the threads."""
    import gemv_fused
    from beside import gemm_op

    import tiledsl
    from tiledsl.gemm.family import gemv_base_schedule, rows_op

    h200 = tiledsl.Target.known("H200")
    small = [t for t in gemv_fused.shapes()
             if 4 * (t[0] * t[2] + t[2] * t[1] + t[0] * t[1]) <= gemv_fused.LAUNCH_BOUND_BYTES]
    assert (512, 1, 512, "TT", True) in small and (128, 1, 1024, "TT", True) in small
    op = rows_op(gemm_op(512, 1, 512, "TT"))  # run as its row, as schedule=None would
    got = gemv_fused.variants(gemv_base_schedule(op, h200), op, h200, "launch")
    fused = {name: s for name, s in got.items() if name != "two"}
    assert len(fused) == 6 and all(s.split_k_fused or s.split_k == 1 for s in fused.values())
    assert fused["one launch bn/1 depth16"].split_k > fused["one launch bn/1 depth64"].split_k


def test_gemv_hbm_sweeps_every_llm_product_at_1_to_16_rows_and_summarises_by_size(monkeypatch, capsys):
    """benchmarks/gemv_hbm.py: the LLM set's 17 distinct (N, K) × M = 1…16 × NN and NT; the summary counts the
    products at 85 % of the copy separately for large (≥ --min-mib) and small ones; bad --m and --min-mib are
    refused naming the value; without a GPU it exits with one line and measures nothing."""
    import gemv_hbm

    every = gemv_hbm.shapes()
    assert len(every) == len(set(every)) == 17 * 16 * 2
    assert {m for m, *_ in every} == set(range(1, 17)) and {layout for *_, layout in every} == {"NN", "NT"}
    assert (1, 50257, 768, "NN") in every and (16, 4096, 4096, "NT") in every
    assert gemv_hbm.gemm_op(1, 4096, 4096, "NT").compulsory_bytes == 4 * (4096 + 4096 * 4096 + 4096)
    rows = [dict(mib=100.0, hbm_fraction=0.9, ratio=1.2), dict(mib=80.0, hbm_fraction=0.6, ratio=0.8),
            dict(mib=2.0, hbm_fraction=0.1, ratio=0.9)]
    got = gemv_hbm.summary(rows, 64.0)
    assert (got["large"]["products"], got["large"]["at_target"], got["large"]["lowest"]) == (2, 1, 0.6)
    assert abs(got["large"]["geomean_fraction"] - (0.9 * 0.6) ** 0.5) < 1e-12
    assert got["small"]["products"] == 1 and got["small"]["at_target"] == 0
    assert gemv_hbm.summary(rows[:1], 64.0).keys() == {"large"}
    for r, gpu_fraction in zip(rows, (0.95, 0.88, 0.2), strict=True):  # the GPU-alone figures are summarised apart
        r.update(gpu_hbm_fraction=gpu_fraction, gpu_ratio=r["ratio"] * 1.1)
    alone = gemv_hbm.summary(rows, 64.0, "gpu_hbm_fraction", "gpu_ratio")
    assert (alone["large"]["at_target"], alone["large"]["lowest"]) == (2, 0.88)
    assert abs(alone["large"]["geomean_ratio"] - 1.1 * (1.2 * 0.8) ** 0.5) < 1e-12
    assert gemv_hbm.summary(rows, 64.0) == got  # the call's figures unchanged by the others
    for argv, what in ((["--m", "0", "17"], "--m [0, 17]"), (["--min-mib", "nan"], "--min-mib nan")):
        monkeypatch.setattr(sys, "argv", ["gemv_hbm.py", *argv])
        with pytest.raises(SystemExit):
            gemv_hbm.main()
        assert what in capsys.readouterr().err
    monkeypatch.setattr(sys, "argv", ["gemv_hbm.py"])
    with pytest.raises(SystemExit) as exc:  # no GPU here: one line, nothing measured
        gemv_hbm.main()
    assert "no GPU" in str(exc.value) and "nothing was measured" in str(exc.value)


def test_gemv_hbm_and_gemv_fused_time_the_few_row_candidates_where_they_apply():
    """gemv_hbm.py --variant and gemv_fused.py --family few_rows: schedule=None's own pick with a spare slot in staged
    A's ring (x @ W, where it stages A), 12 rows per block (9-12 rows, either layout) and, for x @ W.T with A in
    registers from 8 rows, its registers capped at 168 (min_blocks 3), or the ring with its lanes in groups along K
    (gemv_ring_column_b, with 12 rows for 9-12 rows); where none applies the product runs schedule=None as it is
    (gemv_hbm) or has no variant (gemv_fused)."""
    from dataclasses import replace

    import gemv_fused
    import gemv_hbm

    import tiledsl
    from tiledsl.gemm import default_schedule
    from tiledsl.gemm.family import gemv_base_schedule, gemv_schedule

    h200 = tiledsl.Target.known("H200")
    # where schedule=None takes the FP64 kernel (9-16 rows of x @ W.T), "fma" times the FMA pick it replaced
    op16 = gemv_hbm.gemm_op(16, 14336, 4096, "NT")
    assert default_schedule(op16, h200).mma == "dmma" and gemv_hbm.variant_schedule(op16, h200, ()) is None
    assert gemv_hbm.variant_schedule(op16, h200, ("fma",)) == gemv_schedule(op16, h200)
    assert gemv_hbm.variant_schedule(gemv_hbm.gemm_op(8, 14336, 4096, "NT"), h200, ("fma",)) is None  # the FMA pick
    for (m, layout), variants, want in [
            # since 2026-12-05 schedule=None has 12 rows for 9-12 (x @ W, x @ W.T with A in registers) and the
            # spare slot from 12 rows per block: those variants change nothing there
            ((12, "NN"), ("spare",), None), ((12, "NN"), ("twelve",), None), ((8, "NN"), ("spare",), (8, True, 4)),
            ((12, "NN"), ("twelve", "spare"), None), ((12, "NT"), ("twelve",), None),
            ((12, "NT"), ("spare",), None), ((16, "NN"), ("twelve",), None), ((16, "NT"), ("cap168",), (16, False, 3)),
            ((12, "NT"), ("twelve", "cap168"), (12, False, 3)), ((4, "NT"), ("cap168",), None),
            ((16, "NN"), ("twelve", "spare", "cap168"), None), ((4, "NN"), ("spare",), None),
            ((12, "NN"), (), None), ((5, "NT"), ("ring",), (8, True, 2)), ((4, "NT"), ("ring",), None),
            ((12, "NN"), ("fused",), None)]:
        op = gemv_hbm.gemm_op(m, 14336, 4096, layout)
        s = gemv_hbm.variant_schedule(op, h200, variants)
        assert (None if s is None else (s.bm, s.spare_slot, s.min_blocks)) == want, (m, layout, variants)
        if s is not None and not s.spare_slot and layout == "NT":  # the ring's variant: the pick's own rows
            ring = gemv_hbm.variant_schedule(op, h200, (*variants, "ring"))
            assert (ring.bm, ring.spare_slot, ring.k_lanes, ring.rn) == (s.bm, True, 8, 2), ring
        fused = gemv_hbm.variant_schedule(gemv_hbm.gemm_op(m, 4096, 4096, layout), h200, ("fused",))
        assert (fused is not None and fused.split_k_fused) == (m <= 4 and layout == "NN" or layout == "NT" and m > 1), m
        if s is not None and not (s.spare_slot and layout == "NT"):  # the rest of the FMA GEMV pick as it is
            pick = gemv_schedule(op, h200)  # schedule=None's unless gemv_dmma_default takes the FP64 kernel
            assert replace(s, bm=16, spare_slot=False, min_blocks=0) == replace(pick, bm=16, min_blocks=0)
        got = gemv_fused.variants(gemv_base_schedule(op, h200), op, h200, "few_rows")
        # schedule=None stages A for 5-16 rows of x @ W, with the spare slot from 12 rows per block (9-16 rows)
        names = {"spare slot"} if layout == "NN" and 5 <= m <= 8 else set()
        ring_names = {"ring", "ring rn4 u2 cap 168", "ring rn4 u1", "ring bn128"}
        if layout == "NT" and m >= 8:  # 64 MiB of W: A in registers (12 rows for 9-12 already), or the ring
            names |= {"cap 168", "u1 cap 128"} | ring_names
        elif layout == "NT" and m >= 5:  # 8 rows per block: the ring, not the caps (8 rows and more)
            names |= ring_names
        assert set(got) == names, (m, layout, set(got))


def test_dmma_sweeps_build_a_valid_fp64_schedule_for_every_product():
    """gemv_fused.py --family dmma and gemv_hbm.py --variant dmma: every product the sweep times (4, 8, 12 and 16
    rows of each LLM x @ W.T and x @ W with K a multiple of 4; x @ W with an odd N reads W 4 bytes at a time) gets its
    forms on the FP64 tensor cores (16 columns
    per warp left out for x @ W), some through the ring of steps, the pick's fused sum where it splits K, each passing
    the op's and the H200's rules; gemv_hbm's variant is gemv_dmma_schedule's pick, one of the forms, with "ring"
    the ring's form of the same shape and with "groups" the form without it (x @ W's pick being the ring, x @ W.T's
    the groups). The GPU call does not stop on a schedule the rules refuse; --layouts keeps only
    the layouts it names."""
    import gemv_fused
    import gemv_hbm
    from beside import llm_weights

    import tiledsl
    from tiledsl.gemm import default_schedule
    from tiledsl.gemm.family import gemv_base_schedule, gemv_dmma_schedule

    h200 = tiledsl.Target.known("H200")
    todo = [(m, n, k, layout) for layout in ("NT", "NN") for m in gemv_fused.MMA_ROWS for n, k in llm_weights()
            if k % 4 == 0]
    assert len(todo) > 100 and (16, 50257, 768, "NN") in todo  # x @ W with an odd N: W read 4 bytes at a time
    for m, n, k, layout in todo:
        op = gemv_hbm.gemm_op(m, n, k, layout)
        got = gemv_fused.variants(gemv_base_schedule(op, h200), op, h200, "dmma")
        pick = gemv_dmma_schedule(op, h200)
        forms = {f"dmma rn{rn} u{u}{' ring' if ring else ''}" for rn, u, ring in gemv_fused.DMMA_FORMS
                 if layout == "NT" or rn % 32 == 0}
        name = f"dmma rn{pick.rn} u{pick.unroll}{' ring' if pick.fragment_prefetch else ''}"  # x @ W's pick: the ring
        fma = {"fma"} if default_schedule(op, h200).mma == "dmma" else set()  # the FMA pick schedule=None replaced
        assert set(got) == forms | fma | ({f"{name} fused"} if pick.split_k > 1 else set()), (m, n, k, layout)
        assert not fma or (got["fma"].mma == "fma" and got["fma"].kernel == "gemv")
        assert got[name] == pick and gemv_hbm.variant_schedule(op, h200, ("dmma",)) == pick
        ring = gemv_hbm.variant_schedule(op, h200, ("dmma", "ring"))
        assert ring.fragment_prefetch and (ring.rn, ring.unroll) == (pick.rn, pick.unroll), (m, n, k, layout)
        groups = gemv_hbm.variant_schedule(op, h200, ("dmma", "groups"))
        assert not groups.fragment_prefetch and (groups.rn, groups.unroll) == (pick.rn, pick.unroll), (m, n, k, layout)
        assert (ring if layout == "NN" else groups) == pick  # x @ W's pick is the ring, x @ W.T's the groups
        for label, s in [*got.items(), ("ring variant ring", ring), ("groups variant", groups)]:
            assert s.mma == ("fma" if label == "fma" else "dmma") and s.check_op(op).validate(h200) is s
            assert s.fragment_prefetch == ("ring" in label.split()), label


def test_tune_workloads_ships_only_recompared_current_winners(tmp_path, monkeypatch, capsys):
    """--ship-winners GAIN (GPU parts replaced): a winner is shipped only where a --recompare of today timed it at least
    GAIN times faster than schedule=None, its record is for the op the row's tune ran, and its kernel source and
    NVRTC are today's; the others are named with the reason (exit status 1), and nothing is tuned or timed."""
    import datetime as dt

    import tune_workloads as tw

    import tiledsl
    from tiledsl.gemm.family import GEMM
    from tiledsl.registry import _nvrtc, _why_not, make_record

    h200 = tiledsl.Target.known("H200")
    monkeypatch.setenv("TILEDSL_CACHE_DIR", str(tmp_path / "cache"))
    work = tw.data_workloads()[:7]
    monkeypatch.setattr(tw, "data_workloads", lambda: work)
    monkeypatch.setattr(tw, "gpu_or_exit", lambda script: h200)
    monkeypatch.setattr(tw, "_tune", lambda *a, **kw: pytest.fail("--ship-winners tuned"))
    monkeypatch.setattr(tw, "compare", lambda *a: pytest.fail("--ship-winners timed"))
    sched = tiledsl.GemmSchedule(bm=64, bn=64, bk=16, rm=4, rn=4, unroll=16)
    out, records = tmp_path / "tw", tmp_path / "records"
    out.mkdir()
    records.mkdir()
    today = dt.date.today().isoformat()
    rows = []
    for i, (_, name, (m, n, k, layout)) in enumerate(work):
        op = beside.gemm_op(*work[5 if i == 4 else i][2])  # row 4's file holds row 5's product
        rec = make_record("gemm", op, h200, sched, mode="measured", measured={"median_s": 1e-3}, date="2026-12-02")
        if i == 3:
            rec["source_sha256"] = "0" * 64  # tuned with another emitter's source
        (records / f"{name}.json").write_text("{ not json" if i == 6 else json.dumps(rec))
        row = {"family": "gemm", "name": name, "tuned": "the product", "rc": 0, "m": m, "n": n, "k": k,
               "layout": layout, "schedule": sched.to_dict(), "command": "x", "wall_s": 1.0,
               "default_s": 1.01 if i == 1 else 1.2, "tuned_s": 1.0, "vendor_s": 1.0,
               "compared": "2026-11-30" if i == 5 else today}
        if i == 2:
            del row["compared"]
        rows.append(row)
    (out / "tune_workloads.json").write_text(json.dumps({"rows": rows}))
    dest = tmp_path / "shipped.json"
    monkeypatch.setattr(sys, "argv", ["tune_workloads.py", "--data", "--out", str(out), "--ship-winners", "1.05",
                                      "--records", str(records), "--ship-to", str(dest)])
    assert tw.main() == 1
    text = capsys.readouterr().out
    for i, why in ((2, "last re-timed on no day"), (3, "emitter's source changed"), (4, "not the one the row's tune"),
                   (5, "last re-timed on 2026-11-30"), (6, "is not valid exported winner")):
        assert any(work[i][1] in line and why in line for line in text.splitlines()), (i, why, text)
    assert work[1][1] not in text  # 1.01x: under the gain, not a candidate
    shipped = json.loads(dest.read_text())["records"]
    assert [r["op"] for r in shipped] == [beside.gemm_op(*work[0][2]).to_dict()]
    assert shipped[0]["compared"] == {"compared": today, "default_s": 1.2, "tuned_s": 1.0, "vendor_s": 1.0}
    assert _why_not(GEMM, shipped[0], beside.gemm_op(*work[0][2]), h200, _nvrtc()) == sched  # schedule=None takes it
    for bad in (["--ship-winners", "0.9"], ["--ship-winners", "nan"], ["--ship-winners", "1.1", "--recompare"],
                ["--records", str(records)]):
        monkeypatch.setattr(sys, "argv", ["tune_workloads.py", "--data", "--out", str(out), *bad])
        with pytest.raises(SystemExit):
            tw.main()
    monkeypatch.setattr(sys, "argv", ["tune_workloads.py", "--out", str(out), "--ship-winners", "1.1"])
    with pytest.raises(SystemExit):
        tw.main()


def _sweep(name, monkeypatch):
    """The products of ``gemm_skinny.py --set NAME`` on an H200 (``require_gpu`` stubbed to it) as (M, N, K, layout,
    op, {schedule name: GemmSchedule}), every schedule validated for the device and checked for the op."""
    import gemm_skinny

    import tiledsl

    h200 = tiledsl.Target.known("H200")
    monkeypatch.setattr(tiledsl, "require_gpu", lambda: h200)
    shapes, schedules = gemm_skinny.SETS[name]
    out = []
    for m, n, k, layout in shapes(h200):
        op = gemm_skinny.gemm_op(m, n, k, layout)
        scheds = {key: tiledsl.GemmSchedule(**kw) for key, kw in schedules(m, n, k, layout).items()}
        for sched in scheds.values():
            sched.validate(h200)
            sched.check_op(op)
        out.append((m, n, k, layout, op, scheds))
    return out


@pytest.mark.parametrize("name", ["bigtile", "tallwide"])
def test_rule_sweeps_hold_valid_schedules_and_the_shipped_winners(name, monkeypatch):
    """``gemm_skinny.py --set bigtile / tallwide`` (sweeps for shape-class rules read off the data pass's shipped
    winners): every schedule validates for every product of the set on an H200, "built-in" is the built-in choice
    (not a shipped record), and each shipped winner of the set's class is one of the set's schedules, knob for knob."""
    import tiledsl
    from tiledsl.gemm.family import builtin_schedule

    h200 = tiledsl.Target.known("H200")
    products = _sweep(name, monkeypatch)
    assert len(products) >= 20
    records = json.loads((Path(__file__).resolve().parents[1] / "schedules/gemm/sm90.json").read_text())["records"]
    shipped = {(r["op"]["m"], r["op"]["n"], r["op"]["k"], r["op"]["layout_a"], r["op"]["layout_b"]):
               tiledsl.GemmSchedule.from_dict(r["schedule"]) for r in records}
    matched = 0
    for m, n, k, _, op, scheds in products:
        assert scheds["built-in"] == builtin_schedule(op, h200)
        winner = shipped.get((m, n, k, op.layout_a, op.layout_b))
        matched += winner is not None and winner in {v for key, v in scheds.items() if key != "built-in"}
    assert matched >= 6  # the pattern the sweep checks: six or more shipped winners are one of its schedules


def test_fit_split_sweep_measured_the_short_wide_split_presets(monkeypatch):
    """``gemm_skinny.py --set fitsplit``: every schedule validates for every product of the set on an H200, and the
    short-wide rule's split-K presets are, knob for knob, the sweep's schedules it was read off (16×64 t4x2 and
    64×64 t4x8 with 16 K slices), so the committed figures are the rule's."""
    import gemm_skinny

    import tiledsl
    from tiledsl.gemm.family import SHORT_WIDE_SPLIT_PRESETS, builtin_schedule

    h200 = tiledsl.Target.known("H200")
    for m, n, k, _, op, scheds in _sweep("fitsplit", monkeypatch):
        rule = builtin_schedule(op, h200)  # the rule's pick is one of the schedules the sweep timed
        assert rule == scheds["48x64x16 t4x4 stream-K"] if n >= 1536 else rule in {
            v for key, v in scheds.items() if key.endswith("sk16") and key != "built-in"}, (m, n, k, rule)
    sweep = gemm_skinny.SETS["fitsplit"][1](35, 1500, 2560, "TT")
    assert tiledsl.preset("gemm", SHORT_WIDE_SPLIT_PRESETS[0]) == tiledsl.GemmSchedule(**sweep["16x64x16 t4x2 sk16"])
    assert tiledsl.preset("gemm", SHORT_WIDE_SPLIT_PRESETS[1]) == tiledsl.GemmSchedule(**sweep["64x64x16 t4x8 sk16"])


def test_one_row_sweep_times_the_one_row_rule_and_the_committed_run_backs_it(monkeypatch):
    """``gemm_skinny.py --set onerow``: every schedule validates for every product of the set on an H200, the one-row
    rule's pick is one of the sweep's 128×256×16 schedules knob for knob, and in the committed run (before the rule)
    that pick was faster than the earlier rules' ("built-in" then) on every product of the rule it timed."""
    import tiledsl
    from tiledsl.gemm.family import builtin_choice

    h200 = tiledsl.Target.known("H200")
    picks = {}
    for m, n, k, layout, op, scheds in _sweep("onerow", monkeypatch):
        rule, why = builtin_choice(op, h200)
        if "one-row rule" in why:
            names = [key for key, v in scheds.items() if v == rule and key.startswith("128x256")]
            assert names, (m, n, k, layout, rule)
            picks[(m, n, k, layout)] = names[0]
    assert len(picks) >= 25
    results = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
    rows = json.loads((results / "gemm_one_row_h200_2026-12-04.json").read_text())["rows"]
    timed = {(r["m"], r["n"], r["k"], r["layout"], r["schedule"]): r["ratio"] for r in rows}
    backed = [shape for shape, name in picks.items() if (*shape, name) in timed]
    assert len(backed) == 19
    for shape in backed:
        assert timed[(*shape, picks[shape])] > timed[(*shape, "built-in")], shape


def test_compare_runs_flags_products_that_lost_against_the_vendor(tmp_path, capsys):
    """benchmarks/compare_runs.py matches products by (M, N, K, layout, dtype), flags a ratio that fell below
    --drop of the old one (naming whether the schedule changed), exits 1 then and 0 otherwise."""
    import compare_runs

    used = {"bm": 16, "kernel": "gemv"}
    old = [dict(m=16, n=4096, k=4096, layout="NN", ratio=2.0, used=used),
           dict(m=8, n=4096, k=4096, layout="NN", ratio=1.5, used=used),
           dict(m=1, n=1, k=1, layout="NT", ratio=1.0, used=used), dict(kind="copy", gbps=4000.0)]
    new = [dict(m=16, n=4096, k=4096, layout="NN", ratio=1.0, used=used),
           dict(m=8, n=4096, k=4096, layout="NN", ratio=1.4, used={"bm": 8, "kernel": "gemv"}),
           dict(m=1, n=1, k=1, layout="NN", ratio=0.1)]
    (tmp_path / "old.json").write_text(json.dumps({"rows": old}))
    (tmp_path / "new.json").write_text(json.dumps({"rows": new}))
    args = [str(tmp_path / "old.json"), str(tmp_path / "new.json")]
    assert compare_runs.main(args) == 1
    out = capsys.readouterr().out
    assert out.startswith("2 products in both (3 in old.json, 3 in new.json)") and "1 below 0.9x" in out
    assert "16x4096x4096 NN float32: 2.00 -> 1.00 (0.50x; same schedule)" in out and "8x4096" not in out
    assert compare_runs.main([*args, "--drop", "0.4"]) == 0
    n, geo, lost = compare_runs.compare(compare_runs.ratios(tmp_path / "old.json"),
                                        compare_runs.ratios(tmp_path / "new.json"), 0.95)
    assert n == 2 and abs(geo - (0.5 * 1.4 / 1.5) ** 0.5) < 1e-12
    assert [x["same_schedule"] for x in lost] == [True, False]
    with pytest.raises(SystemExit):
        compare_runs.main([*args, "--drop", "1.5"])
    # a field added between runs is not a schedule change; an old product the new file lacks is listed
    grown = [dict(new[0], used={**used, "smem_a": False}), dict(m=2, n=2, k=2, layout="NN", ratio=1.0)]
    (tmp_path / "grown.json").write_text(json.dumps({"rows": grown}))
    capsys.readouterr()
    assert compare_runs.main([str(tmp_path / "old.json"), str(tmp_path / "grown.json")]) == 1
    out = capsys.readouterr().out
    assert "(0.50x; same schedule)" in out and "2 products of old.json missing from grown.json" in out
    # variants of one product are compared variant by variant; a product listed twice, an unreadable file or
    # nothing in common exit 2 with the reason
    variants = [dict(m=1, n=2, k=3, layout="NN", variant=v, ratio=r) for v, r in (("a", 1.0), ("b", 2.0))]
    (tmp_path / "v.json").write_text(json.dumps({"rows": variants}))
    assert compare_runs.main([str(tmp_path / "v.json")] * 2) == 0
    (tmp_path / "twice.json").write_text(json.dumps({"rows": [old[0], old[0]]}))
    (tmp_path / "bad.json").write_text("{not json")
    for bad, why in (("twice.json", "listed twice"), ("bad.json", "cannot read a JSON result file"),
                     ("v.json", "no product in both files"), ("absent.json", "No such file")):
        assert compare_runs.main([str(tmp_path / "old.json"), str(tmp_path / bad)]) == 2
        assert why in capsys.readouterr().err, bad


def test_tune_workloads_recompare_changed_and_retune(tmp_path, monkeypatch, capsys):
    """Rows record the schedule schedule=None ran; --recompare --changed times only the rows whose schedule=None is
    another one now (or that failed, or that recorded none); --retune tunes finished rows named by --only again and
    a failed retune keeps the row it was to replace; both refuse the wrong company."""
    import tune_workloads as tw

    import tiledsl

    monkeypatch.setenv("TILEDSL_CACHE_DIR", str(tmp_path / "cache"))
    work = tw.data_workloads()[:3]
    monkeypatch.setattr(tw, "data_workloads", lambda: work)
    monkeypatch.setattr(tw, "gpu_or_exit", lambda script: tiledsl.Target.known("H200"))
    schedule = tiledsl.GemmSchedule().to_dict()
    tuned, compared = [], []

    retuned = dict(schedule, bk=16, unroll=16)

    def fake_tune(family, name, shape_args, args, out, env, retune=False):
        tuned.append(name)
        if retune:  # exported beside the earlier winner, as search.tune --export would
            (out / (name + ".retune")).mkdir(parents=True)
            (out / (name + ".retune") / "schedule.json").write_text("{}")
        return {"command": "x", "rc": 0, "wall_s": 0.1, "schedule": retuned if retune else schedule,
                "tune_ratio": 1.0}

    def fake_compare(m, n, k, layout, s, as_row):
        compared.append(f"{m}x{n}x{k}_{layout}")
        return {"default_s": 2.0, "tuned_s": 1.0, "vendor_s": 1.0}

    monkeypatch.setattr(tw, "_tune", fake_tune)
    monkeypatch.setattr(tw, "compare", fake_compare)
    out = tmp_path / "tw"

    def run(*argv) -> int:
        monkeypatch.setattr(sys, "argv", ["tune_workloads.py", "--data", "--out", str(out), *argv])
        return tw.main()

    def table() -> dict:
        return {r["name"]: r for r in json.loads((out / "tune_workloads.json").read_text())["rows"]}

    assert run() == 0
    target = tiledsl.Target.known("H200")
    for _, name, spec in work:  # what schedule=None runs for each product, recorded with its times
        assert table()[name]["default_schedule"] == tw.default_schedule(*spec, target)
    # against references computed apart: the layout and the operands' alignment reach the chooser (an odd N with a
    # column-major A takes the misaligned-B rule's four cp.async stages; its even neighbour keeps two), and a
    # one-column product is its single row on the GEMV kernel
    from tiledsl.gemm.family import MISALIGNED_ROW_B_STAGES

    assert tw.default_schedule(2048, 7133, 2048, "TN", target)["stages"] == MISALIGNED_ROW_B_STAGES == 4
    assert tw.default_schedule(2048, 7136, 2048, "TN", target)["stages"] == 2
    row_op = tiledsl.GemmOp(1, 7680, 2560)  # 7680x1x2560 TT: y^T = x^T A^T, A^T row-major
    assert tw.default_schedule(7680, 1, 2560, "TT", target) == tiledsl.plan(row_op, device=target).schedule.to_dict()
    assert tw.default_schedule(7680, 1, 2560, "TT", target)["kernel"] == "gemv"
    compared.clear()
    assert run("--recompare", "--changed") == 0 and compared == []  # nothing changed: nothing timed
    rows = json.loads((out / "tune_workloads.json").read_text())
    rows["rows"][1]["default_schedule"] = dict(schedule, bm=64)  # as if a rule had changed its schedule=None since
    rows["rows"][2].pop("default_schedule")  # as if compared before rows recorded it
    rows["rows"][0]["error"] = "recompare: SystemExit: WRONG RESULT"  # a failed check is timed again
    for key in ("default_s", "tuned_s", "vendor_s"):
        rows["rows"][0].pop(key)
    (out / "tune_workloads.json").write_text(json.dumps(rows))
    assert run("--recompare", "--changed") == 0
    assert compared == [w[1] for w in work]
    assert table()[work[1][1]]["default_schedule"] == tw.default_schedule(*work[1][2], target)
    compared.clear()
    assert run("--recompare") == 0 and compared == [w[1] for w in work]  # without --changed: every row

    # --retune: the finished rows named are tuned again; the others are not
    tuned.clear()
    assert run("--resume", "--only", work[1][1]) == 0 and tuned == []  # finished: --resume alone skips it
    assert run("--resume", "--retune", "--only", work[1][1]) == 0 and tuned == [work[1][1]]
    assert table()[work[1][1]]["schedule"] == retuned and (out / work[1][1] / "schedule.json").exists()
    assert not (out / (work[1][1] + ".retune")).exists()  # moved over the earlier export

    def failing(m, n, k, layout, s, as_row):
        raise SystemExit("WRONG RESULT: rel err 1.0")

    monkeypatch.setattr(tw, "compare", failing)
    before = table()[work[2][1]]
    assert run("--resume", "--retune", "--only", work[2][1]) == 1
    assert table()[work[2][1]] == before and "retune FAILED, the earlier row and its export kept" in capsys.readouterr().out
    assert not (out / (work[2][1] + ".retune")).exists()
    for bad, said in ((["--retune", "--only", work[0][1]], "it needs --resume"),
                      (["--resume", "--retune"], "it needs --only NAMES"),
                      (["--recompare", "--retune", "--resume", "--only", work[0][1]], "run them after it"),
                      (["--ship-winners", "1.05", "--retune", "--resume", "--only", work[0][1]], "run them after it"),
                      (["--changed", "--resume"], "--changed goes with --recompare")):
        with pytest.raises(SystemExit):
            run(*bad)
        assert said in capsys.readouterr().err


def test_gemv_nt_staged_prototype_compiles_without_spills_and_every_variant_fits_an_sm():
    """benchmarks/gemv_nt_staged_proto.py (not yet run on a GPU): its kernel compiles with NVRTC for sm_90 at 8 and
    16 rows without spills, and every variant's shared memory at its deepest slice fits one SM of an H200 (227 KiB
    per block)."""
    import gemv_nt_staged_proto as proto

    from tiledsl.compile import KernelSource, compile_source

    for bm in (8, 16):
        v = proto.V()
        k = compile_source(KernelSource("nt_staged", proto.SRC, (v["threads"], 1, 1)), "sm_90", proto.options(bm, v))
        assert k.spill_bytes == 0 and k.registers <= 65536 // (v["threads"] * v["minb"]), (bm, k.registers)
    for v in proto.VARIANTS:
        assert proto.smem_bytes(16, v, v["depth"] or v["dcap"]) <= 227 * 1024, v
    assert proto.smem_bytes(16, proto.V(), 512) == 4 * (512 * 16 + 4 * 3 * 128 * 12)


def test_gemm_pack_b_sweeps_the_odd_n_products_on_the_tiled_kernels_and_its_copy_kernel_compiles():
    """benchmarks/gemm_pack_b.py (not yet run on a GPU): the data sets' eight products with an odd N and a row-major B
    above 16 rows, then the M sweep's 128…4096 rows of 50257 × 768 and 7133 × 2048 not among them (three are); N is
    padded to a 16-byte pitch; the copy kernel compiles."""
    import argparse

    import gemm_pack_b as g

    from tiledsl.compile import KernelSource, compile_source

    data = g.products(argparse.Namespace(m_sweep=False))
    assert (2048, 7133, 2048, "TN") in data and (128, 50257, 768, "NN") in data and (7680, 5481, 2560, "TN") in data
    assert all(n % 2 == 1 and m > 16 and layout[1] == "N" for m, n, k, layout in data)
    swept = g.products(argparse.Namespace(m_sweep=True))
    sweep = {(m, n, k, layout) for n, k, layout in g.SWEEP_NK for m in g.M_SWEEP}
    assert swept[:len(data)] == data and len(swept) == len(set(swept)) == len(set(data) | sweep) == 17
    assert [g.padded(n) for n in (7133, 50257, 5481, 7132)] == [7136, 50260, 5484, 7132]
    k = compile_source(KernelSource("copy_rows", g.PACK_SRC, (256, 1, 1)), "sm_90")
    assert k.spill_bytes == 0


def test_gemv_nn_cluster_prototype_compiles_for_sm_90_without_spills():
    """benchmarks/gemv_nn_cluster_proto.py (not yet run on a GPU): the kernel compiles with NVRTC for sm_90 with and
    without the cluster reduction (``__cluster_dims__``, ``mapa``, ``ld.shared::cluster``, cluster barriers) at 8 and
    16 rows, without spills and within its ``__launch_bounds__``; every cluster variant's SPLIT divides the rows per
    block and is a portable cluster size (≤ 8)."""
    import gemv_nn_cluster_proto as proto

    from tiledsl.compile import KernelSource, compile_source

    for bm, v in ((16, proto.V(cluster=1, split=8)), (8, proto.V(cluster=1, split=8)), (16, proto.V())):
        k = compile_source(KernelSource("nn_rows", proto.SRC, (v["threads"], 1, 1)), "sm_90", proto.options(bm, v))
        assert k.spill_bytes == 0 and k.registers <= 65536 // (v["threads"] * v["minb"]), (bm, v, k.registers)
    assert all(v["split"] in (2, 4, 8) for v in proto.VARIANTS if v["cluster"])  # divides 8 and 16 rows, portable
    assert proto.smem_bytes(16, proto.V(cluster=1, split=8), 512) == 4 * 512 * 16  # A's slice, the partials: 32 KiB


def _top_level_alternatives(expr: str) -> list[str]:
    """A pytest ``-k`` expression split at its outermost ``or``s."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(expr):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and expr.startswith(" or ", i):
            parts.append(expr[start:i])
            start = i + 4
    return [*parts, expr[start:]]


@pytest.mark.parametrize("script", ["gpu_suite.sh", "few_rows_decide.sh", "tc_gemv_decide.sh"])
def test_the_gpu_scripts_memcheck_selections_each_name_gpu_tests(script):
    """benchmarks/gpu_suite.sh, few_rows_decide.sh and tc_gemv_decide.sh run compute-sanitizer on a ``-k`` selection of
    tests/test_gemm_gpu.py: each alternative of it selects at least one GPU test (a renamed test or parameter would
    otherwise drop out of memcheck unnoticed; the scripts run only on a GPU)."""
    import re
    import subprocess

    root = Path(__file__).resolve().parent.parent
    text = (root / "benchmarks" / script).read_text()
    (expr,) = re.findall(r'compute-sanitizer[^\n]*\\\n\s*-k "([^"]+)"', text)
    for alternative in _top_level_alternatives(expr):
        run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "gpu", "-p",
                              "no:cacheprovider", "tests/test_gemm_gpu.py", "-k", alternative],
                             cwd=root, capture_output=True, text=True, timeout=300)
        assert re.search(r"^\d+/\d+ tests? collected", run.stdout, re.M) and "::" in run.stdout, (alternative,
                                                                                                   run.stdout[-500:])


def test_tc_accumulation_probe_and_chain_compile_and_exit_without_a_gpu(monkeypatch):
    """benchmarks/tc_accumulation.py: its one-mma probe and the tensor-core GEMV kernel with one chain per slice (the
    shipped source with CHUNK set past any slice) compile with NVRTC for sm_90 (what the GPU will run); the probe's b
    is a TF32 value whose sum with ±1 lies between two float32 values; without a GPU it exits with one line."""
    import dataclasses

    import numpy as np
    import tc_accumulation

    import tiledsl
    from tiledsl.compile import KernelSource, compile_source
    from tiledsl.gemm.family import GEMM
    from tiledsl.gemm.schedule import GemmSchedule

    compile_source(KernelSource(name="probe", source=tc_accumulation.PROBE, block=(32, 1, 1)), "sm_90")
    b = np.float32(1.5 * 2.0**-24)
    assert b.view(np.uint32) & 0x1FFF == 0 and float(np.float32(1.0) + b) != 1.0 + float(b)  # not a float32
    op = tiledsl.GemmOp(16, 64, 4096, layout_b="col", precision="3xtf32")
    ks = GEMM.emit(op, GemmSchedule(kernel="gemv", mma="mma_sync", bm=16, bn=128, bk=16, rn=32, unroll=2, vec=4))
    line = next(ln for ln in ks.source.splitlines() if ln.startswith("constexpr int CHUNK ="))
    compile_source(dataclasses.replace(ks, source=ks.source.replace(line, "constexpr int CHUNK = 1 << 20;")), "sm_90")
    monkeypatch.setattr(sys, "argv", ["tc_accumulation.py"])
    with pytest.raises(SystemExit) as exc:
        tc_accumulation.main()
    assert "no GPU" in str(exc.value) and "nothing was measured" in str(exc.value)

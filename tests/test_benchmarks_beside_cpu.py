"""benchmarks/beside.py: the vendor figures are the mean of the runs right before and right after tiledsl's."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import beside  # noqa: E402


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

"""Reductions over a tuple of axes (numpy semantics), ``grid="auto"``, and torch in → torch out, on the CPU.

The axis plan is checked by carrying it out with numpy (transpose, reshape, one reduction of the middle
or last axis) against numpy's own multi-axis reduction, for every op; the kernels behind it are the
one-axis kernels the GPU tests cover (``tests/test_reduce_gpu.py``).
"""

from __future__ import annotations

import itertools
import sys
import types

import numpy as np
import pytest

import tiledsl
from tiledsl.gemm import api as gemm_api
from tiledsl.reduce import api as reduce_api
from tiledsl.reduce.axes import normalize_axes, plan_axes
from tiledsl.runtime import like_inputs
from tiledsl.transpose import api as transpose_api

SHAPES = [(4, 5, 6), (3, 1, 4, 2), (2, 3), (7,), (2, 0, 3)]
NP = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod,
      "norm2": lambda x, axis, keepdims: np.sqrt(np.sum(np.square(x), axis=axis, keepdims=keepdims))}


def _all_axis_tuples(nd: int):
    for r in range(nd + 1):
        for axes in itertools.permutations(range(-nd, nd), r):
            if len({a % nd for a in axes}) == r:
                yield tuple(axes)


def _via_plan(x: np.ndarray, op: str, axes, keepdims: bool) -> np.ndarray:
    p = plan_axes(x.shape, normalize_axes(axes, x.ndim), keepdims)
    v = np.ascontiguousarray(x.transpose(p.perm)) if p.perm else x
    r = NP[op](v.reshape(p.op_shape), axis=p.op_axis, keepdims=False)
    return r.reshape(p.out_shape)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's mean of an empty slice
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("op", sorted(NP))
def test_axis_tuple_plan_matches_numpy(shape, op):
    rng = np.random.default_rng(0)
    x = rng.uniform(0.5, 1.5, shape)
    for axes in _all_axis_tuples(len(shape)):
        for keepdims in (False, True):
            if op in ("max", "min") and 0 in shape and any(shape[a] == 0 for a in axes):
                continue  # numpy refuses (no identity); ReduceOp says the same (tests/test_reduce_cpu.py)
            want = NP[op](x, axis=axes, keepdims=keepdims)
            got = _via_plan(x, op, axes, keepdims)
            assert got.shape == want.shape, (axes, keepdims)
            np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=str((shape, op, axes, keepdims)))


def test_adjacent_axes_are_a_view_and_others_one_copy():
    p = plan_axes((4, 5, 6), (1, 2), keepdims=False)
    assert p.perm is None and p.op_shape == (4, 30, 1) and p.out_shape == (4,)
    p = plan_axes((4, 5, 6), (0, 1), keepdims=True)
    assert p.perm is None and p.op_shape == (1, 20, 6) and p.out_shape == (1, 1, 6)  # strided (column) reduction
    p = plan_axes((4, 5, 6, 7), (0, 2), keepdims=False)
    assert p.perm == (1, 3, 0, 2) and p.op_shape == (35, 24) and p.out_shape == (5, 7)
    p = plan_axes((4, 5), (), keepdims=False)  # nothing reduced: each element its own result
    assert p.op_shape == (20, 1, 1) and p.out_shape == (4, 5)


@pytest.mark.parametrize("axis, says", [
    ((0, 0), r"names an axis twice"), ((0, -3), r"names an axis twice"), ((0, 3), r"axis 3 is out of range"),
    ((1.0,), r"must be an integer, got 1.0"), ((True,), r"must be an integer, got True"), ("0", r"must be an integer"),
])
def test_bad_axis_tuples_are_refused_naming_the_axis(axis, says):
    with pytest.raises(tiledsl.SpecError, match=says):
        normalize_axes(axis, 3)


def test_normalize_axes_follows_numpy():
    assert normalize_axes(None, 3) is None
    assert normalize_axes(-1, 3) == (2,)
    assert normalize_axes((2, -3), 3) == (0, 2)
    assert normalize_axes([np.int64(1)], 3) == (1,)
    assert normalize_axes((), 3) == ()


# ---------------------------------------------------------------- grid="auto"


def test_grid_auto_is_zero():
    s = tiledsl.ReduceSchedule(grid="auto")
    assert s.grid == 0 and s == tiledsl.ReduceSchedule(grid=0)
    assert tiledsl.ReduceSchedule.from_dict({**s.to_dict(), "grid": "auto"}) == s
    with pytest.raises(tiledsl.ScheduleError, match=r"grid='many' must be an integer ≥ 0 or 'auto'"):
        tiledsl.ReduceSchedule(grid="many")


# ---------------------------------------------------------------- torch in, torch out (dispatch only)


@pytest.fixture
def fake_torch(monkeypatch):
    """A stand-in ``torch`` module: enough to check which results are handed back as tensors."""
    mod = types.ModuleType("torch")

    class Tensor:
        pass

    mod.Tensor = Tensor
    mod.from_dlpack = lambda arr: ("tensor from", arr)
    monkeypatch.setitem(sys.modules, "torch", mod)
    return mod


def _cupy_like():
    return type("ndarray", (), {"__module__": "cupy"})()


def test_torch_inputs_get_a_torch_result(fake_torch):
    res = _cupy_like()
    t = fake_torch.Tensor()
    assert like_inputs(res, (t, "sum")) == ("tensor from", res)
    assert like_inputs(res, (_cupy_like(), t)) == ("tensor from", res)  # any torch operand


def test_cupy_inputs_and_given_outputs_come_back_unchanged(fake_torch):
    res = _cupy_like()
    assert like_inputs(res, (_cupy_like(), None)) is res  # CuPy in, CuPy out
    assert like_inputs(res, (fake_torch.Tensor(), res)) is res  # the caller's out= is returned as given
    t = fake_torch.Tensor()
    assert like_inputs(t, (t,)) is t  # already a tensor (bfloat16 path)


def test_without_torch_imported_nothing_is_converted(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    res = _cupy_like()
    assert like_inputs(res, (object(),)) is res


def test_checked_paths_return_like_their_inputs():
    # a repeated (cached) call makes its torch result itself: tests/test_torch_path_cpu.py
    for fn in (gemm_api._gemm_slow, reduce_api._reduce_slow, transpose_api._transpose_slow):
        assert fn.__wrapped__.__name__ == fn.__name__  # wrapped by runtime.returns_like_inputs

"""Reductions on the GPU against float64 numpy, on fresh random data, with the output poisoned beforehand.

Tolerances (float results): sum/mean/norm2 err ≤ TOL[acc]·Σ|x| (+ half an ulp of a 16-bit result), the
standard bound for a blocked summation whose sequential runs are short; prod err ≤ 10·√n·eps relative;
max/min and every integer result are exact. The ``over_2_31`` tests need ~13 GB of GPU memory; deselect
them with ``-k "not over_2_31"``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tiledsl
from tiledsl.reduce import OPS, ReduceSchedule, plan

pytestmark = pytest.mark.gpu

CUPY_DTYPES = ["float32", "float64", "float16", "int32", "int64"]
TOL = {"float32": 1e-5, "float64": 1e-13}            # accumulator (float32 for 16-bit inputs) × Σ|x|
ROUND16 = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}  # half an ulp of the 16-bit result, relative


def _data(rng, shape, dtype: str, op: str) -> np.ndarray:
    """Fresh random host data (never all zeros): mixed signs; prod gets factors near ±1."""
    if dtype.startswith("int"):
        if op == "prod":
            return rng.choice(np.array([-2, -1, 1, 2, 3], dtype=dtype), size=shape)
        return rng.integers(-1000, 1000, size=shape, dtype=dtype)
    if op == "prod":
        x = rng.uniform(0.999, 1.001, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    else:
        x = rng.uniform(-1.0, 1.0, size=shape)
    return x.astype(dtype)


def _reference(xh: np.ndarray, op: str, axis):
    """float64 numpy (exact int64 for integer sum/prod/max/min, wrapping like numpy)."""
    if xh.dtype.kind == "i" and op in ("sum", "prod", "max", "min"):
        f = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}[op]
        return f(xh.astype(np.int64), axis=axis)
    x = xh.astype(np.float64)
    if op == "norm2":
        return np.sqrt(np.sum(x * x, axis=axis))
    return {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod}[op](x, axis=axis)


def _poisoned(shape, dtype: str):
    import cupy as cp

    if np.dtype(dtype).kind == "f":
        return cp.full(shape, np.nan, dtype=dtype)
    return cp.full(shape, -123456789, dtype=dtype)


def _check(got: np.ndarray, xh: np.ndarray, op: str, axis, in_dtype: str, out_dtype: str,
           tol_scale: float = 1.0) -> None:
    ref = np.asarray(_reference(xh, op, axis))
    got = np.asarray(got)
    assert got.shape == ref.shape
    assert np.dtype(got.dtype).name == out_dtype or out_dtype == "bfloat16"
    if op in ("max", "min") or out_dtype.startswith("int"):
        want = ref.astype(out_dtype) if out_dtype != "bfloat16" else ref
        assert np.array_equal(got.astype(np.float64) if out_dtype == "bfloat16" else got, want), (
            f"{op}: {np.argwhere(got != want)[:5]}")
        return
    g = got.astype(np.float64)
    assert not np.isnan(g).any(), "NaN left in the output (poison not overwritten?)"
    x = xh.astype(np.float64)
    n = x.size if axis is None else int(np.prod([x.shape[a] for a in np.atleast_1d(axis)]))
    acc = "float64" if out_dtype == "float64" else "float32"
    r16 = ROUND16.get(out_dtype, 0.0)
    if op == "prod":
        rel = 10 * np.sqrt(n) * np.finfo(acc).eps + 2 * r16
        np.testing.assert_allclose(g, ref, rtol=rel * tol_scale, atol=0)
        return
    if op == "norm2":
        scale = np.sqrt(np.sum(x * x, axis=axis))
        bound = (TOL[acc] * tol_scale + r16) * scale
    else:
        scale = np.sum(np.abs(x), axis=axis) / (n if op == "mean" else 1)
        bound = TOL[acc] * tol_scale * scale + r16 * np.abs(ref)
    err = np.abs(g - ref)
    assert np.all(err <= bound + 1e-300), f"{op}: max err {err.max()} > bound {np.min(bound)}"


def _run(xh, op, axis, dtype=None, schedule=None, keepdims=False):
    """Reduce host data on the GPU into a NaN/sentinel-poisoned ``out``; returns the host result."""
    import cupy as cp

    rop = tiledsl.ReduceOp(shape=xh.shape, op=op, axis=axis, dtype=xh.dtype.name, out_dtype=dtype,
                           keepdims=keepdims)
    out = _poisoned(rop.out_shape, rop.out_dtype)
    res = tiledsl.reduce(cp.asarray(xh), op, axis, schedule=schedule, out=out, dtype=dtype, keepdims=keepdims)
    assert res is out
    return cp.asnumpy(out), rop.out_dtype


# ---- full reductions: lengths, every op and dtype ----
@pytest.mark.parametrize("dtype", CUPY_DTYPES)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", [1, 31, 33, 1000, (1 << 20) + 3])
def test_full_every_op_dtype_and_length(n, op, dtype, rng):
    xh = _data(rng, (n,), dtype, op)
    got, out_dtype = _run(xh, op, None)
    _check(got, xh, op, None, dtype, out_dtype)


@pytest.mark.parametrize("op,dtype", [("sum", "float32"), ("max", "float32"), ("norm2", "float32"),
                                      ("mean", "float16"), ("sum", "int64"), ("min", "float64")])
def test_full_2_to_26(op, dtype, rng):
    xh = _data(rng, (1 << 26,), dtype, op)
    got, out_dtype = _run(xh, op, None)
    _check(got, xh, op, None, dtype, out_dtype)


def test_float32_sum_of_2_to_26_uniform_within_1e_minus_6(rng):
    xh = rng.random(1 << 26, dtype=np.float32)  # uniform [0, 1)
    got, _ = _run(xh, "sum", None)
    ref = np.sum(xh.astype(np.float64))
    assert abs(float(got) - ref) <= 1e-6 * ref, (float(got), ref)


# ---- axes: rows (short, odd, long), columns, a middle axis of 3-D ----
AXES = [((37, 1000), 0), ((37, 1000), 1), ((37, 1000), -1), ((5, 129, 7), 1), ((5, 129, 8), 1),
        ((100, 33), 1), ((7, 4097), -1), ((3, 100003), 1), ((20000, 64), 0)]


@pytest.mark.parametrize("dtype", CUPY_DTYPES)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape,axis", AXES, ids=[f"{'x'.join(map(str, s))}-ax{a}" for s, a in AXES])
def test_axis_every_op_and_dtype(shape, axis, op, dtype, rng):
    xh = _data(rng, shape, dtype, op)
    got, out_dtype = _run(xh, op, axis)
    _check(got, xh, op, axis, dtype, out_dtype)


@pytest.mark.parametrize("keepdims", [False, True])
def test_keepdims_and_unaligned_views(keepdims, rng):
    import cupy as cp

    xh = _data(rng, (6, 1001), "float32", "sum")
    got, _ = _run(xh, "sum", 1, keepdims=keepdims)
    assert got.shape == np.sum(xh, axis=1, keepdims=keepdims).shape
    # a view starting one element in: rows are misaligned for 16-byte loads (scalar head, vector body)
    xd = cp.asarray(xh)[:, 1:]
    res = tiledsl.reduce(xd, "sum", 1)
    _check(cp.asnumpy(res), xh[:, 1:], "sum", 1, "float32", "float32")


@pytest.mark.parametrize("offset", [1, 2, 3])
def test_misaligned_start_uses_a_scalar_head(offset, rng):
    import cupy as cp

    xh = _data(rng, ((1 << 20) + 11,), "float32", "sum")
    xd = cp.asarray(xh)[offset:]  # contiguous, but 4·offset bytes past a 16-byte boundary
    assert xd.data.ptr % 16 == 4 * offset
    _check(cp.asnumpy(tiledsl.reduce(xd, "sum")), xh[offset:], "sum", None, "float32", "float32")
    assert float(tiledsl.reduce(xd, "max")) == xh[offset:].max()


def test_dtype_argument_accumulates_in_it(rng):
    xh = _data(rng, ((1 << 20) + 3,), "float32", "sum")
    got, out_dtype = _run(xh, "sum", None, dtype="float64")
    assert out_dtype == "float64"
    _check(got, xh, "sum", None, "float32", "float64")


# ---- numpy semantics of empty inputs ----
@pytest.mark.parametrize("dtype", CUPY_DTYPES)
def test_empty_inputs_follow_numpy(dtype):
    import cupy as cp

    x = cp.zeros((0,), dtype=dtype)
    assert float(tiledsl.reduce(x, "sum")) == 0 and tiledsl.reduce(x, "sum").dtype == np.sum(np.zeros(0, dtype)).dtype
    assert float(tiledsl.reduce(x, "prod")) == 1
    assert float(tiledsl.reduce(x, "norm2")) == 0
    with pytest.warns(RuntimeWarning):
        m = tiledsl.reduce(x, "mean")
    assert np.isnan(float(m))
    for op in ("max", "min"):
        with pytest.raises(ValueError, match=f"op='{op}'"):
            tiledsl.reduce(x, op)
    assert tiledsl.reduce(cp.zeros((0, 5), dtype=dtype), "max", axis=1).shape == (0,)
    r = tiledsl.reduce(cp.zeros((4, 0), dtype=dtype), "sum", axis=1)
    assert r.shape == (4,) and not bool(cp.any(r != 0))


# ---- NaN propagation ----
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("op", OPS)
def test_nan_propagates(op, dtype, rng):
    import cupy as cp

    xh = _data(rng, (64, 3001), dtype, op)
    xh[17, 1234] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        full = float(tiledsl.reduce(cp.asarray(xh), op))
        rows = cp.asnumpy(tiledsl.reduce(cp.asarray(xh), op, axis=1)).astype(np.float64)
        cols = cp.asnumpy(tiledsl.reduce(cp.asarray(xh), op, axis=0)).astype(np.float64)
    assert np.isnan(full)
    assert np.isnan(rows[17]) and not np.isnan(np.delete(rows, 17)).any()
    assert np.isnan(cols[1234]) and not np.isnan(np.delete(cols, 1234)).any()


# ---- determinism of two_pass ----
@pytest.mark.parametrize("shape,axis", [(((1 << 24) + 7,), None), ((3, 1000003), 1), ((100000, 64), 0)])
def test_two_pass_is_bitwise_deterministic(shape, axis, rng):
    import cupy as cp

    x = cp.asarray(_data(rng, shape, "float32", "sum"))
    runs = [cp.asnumpy(tiledsl.reduce(x, "sum", axis)).tobytes() for _ in range(5)]
    assert len(set(runs)) == 1
    assert plan(tiledsl.ReduceOp(shape, "sum", axis), tiledsl.preset("reduce", "default"),
                tiledsl.Target.current().sm_count).split > 1  # blocks really were combined


# ---- tickets: zeroed once per buffer, left zero by every kernel ----
@pytest.mark.parametrize("combine", ["two_pass", "atomic"])
def test_split_reductions_leave_their_tickets_zero(combine, rng):
    """No memset before a split launch: each kernel's last block resets its ticket. Interleave full, row and
    column reductions of different splits on one stream, check every result, then read the tickets."""
    import cupy as cp

    from tiledsl import launch

    s = tiledsl.ReduceSchedule(block=256, vec=4, items_per_thread=4, combine=combine)
    cases = [(((1 << 20) + 3,), None), ((16, 50257), 1), ((3, 300001), 1), ((4000, 64), 0), ((1000, 3, 33), 1)]
    data = [(rng.uniform(-1, 1, size=shape).astype("float32"), axis) for shape, axis in cases]
    for _ in range(3):
        for xh, axis in data:
            rop = tiledsl.ReduceOp(shape=xh.shape, axis=axis)
            out = _poisoned(rop.out_shape, "float32")
            tiledsl.reduce(cp.asarray(xh), "sum", axis, schedule=s, out=out)
            _check(cp.asnumpy(out), xh, "sum", axis, "float32", "float32")
    cp.cuda.get_current_stream().synchronize()
    key = (cp.cuda.runtime.getDevice(), cp.cuda.get_current_stream().ptr, "tickets")
    tickets = launch._WORKSPACES[key][0].view(np.uint32)
    assert int(cp.count_nonzero(tickets)) == 0


# ---- the reduction ladder presets ----
@pytest.mark.parametrize("name", list(tiledsl.presets("reduce")))
@pytest.mark.parametrize("shape,axis", [(((1 << 20) + 3,), None), ((64, 1000), 1), ((3, 300001), 1)])
def test_presets(name, shape, axis, rng):
    s = tiledsl.preset("reduce", name)
    xh = _data(rng, shape, "float32", "sum")
    got, _ = _run(xh, "sum", axis, schedule=s)
    n = shape[-1]
    # v1 adds every element into one float32 with an atomic: the sequential bound n·eps·Σ|x|
    scale = n * np.finfo(np.float32).eps / TOL["float32"] if s.strategy == "atomic" else 1.0
    _check(got, xh, "sum", axis, "float32", "float32", tol_scale=max(scale, 1.0))
    gm, _ = _run(xh, "max", axis, schedule=s)
    _check(gm, xh, "max", axis, "float32", "float32")


def test_strided_axis_rejects_tile_strategies():
    import cupy as cp

    with pytest.raises(tiledsl.ScheduleError, match="strided_needs_loop"):
        tiledsl.reduce(cp.ones((10, 10), dtype=cp.float32), "sum", 0,
                       schedule=tiledsl.preset("reduce", "v4_smem_sequential"))


@pytest.mark.parametrize("kw", [dict(block=1024, items_per_thread=8), dict(block=128, vec=2, items_per_thread=1),
                                dict(strategy="grid_stride", grid=132), dict(combine="atomic"),
                                dict(row_threads=8), dict(row_threads=256), dict(col_rows=32), dict(col_rows=4)])
def test_schedule_knobs(kw, rng):
    s = ReduceSchedule(**kw)
    for shape, axis in [(((1 << 20) + 3,), None), ((200, 777), 1), ((513, 96), 0)]:
        xh = _data(rng, shape, "float32", "sum")
        got, _ = _run(xh, "sum", axis, schedule=s)
        _check(got, xh, "sum", axis, "float32", "float32")


# ---- errors and torch interop ----
def test_out_of_wrong_shape_or_dtype_raises():
    import cupy as cp

    x = cp.ones((4, 5), dtype=cp.float32)
    with pytest.raises(tiledsl.SpecError, match=r"out.shape=\(5,\) must be \(4,\)"):
        tiledsl.reduce(x, "sum", 1, out=cp.empty(5, cp.float32))
    with pytest.raises(tiledsl.SpecError, match="out.dtype=float64 must be float32"):
        tiledsl.reduce(x, "sum", 1, out=cp.empty(4, cp.float64))


@pytest.mark.parametrize("op", OPS)
def test_torch_bfloat16_and_float32(op, rng):
    torch = pytest.importorskip("torch")
    xh = _data(rng, (33, 2049), "float32", op)
    tb = torch.from_numpy(xh).to(device="cuda", dtype=torch.bfloat16)
    ref_in = tb.float().cpu().numpy()  # the bf16-rounded inputs
    for axis in (None, 1, 0):
        out = tiledsl.ReduceOp(shape=ref_in.shape, op=op, axis=axis, dtype="bfloat16").out_shape
        poison = torch.full(out, float("nan"), dtype=torch.bfloat16, device="cuda")
        res = tiledsl.reduce(tb, op, axis, out=poison)
        assert res is poison and res.dtype == torch.bfloat16
        _check(res.float().cpu().numpy(), ref_in, op, axis, "bfloat16", "bfloat16")
    r32 = tiledsl.reduce(torch.from_numpy(xh).cuda(), op, 1)
    assert isinstance(r32, torch.Tensor) and r32.is_cuda  # torch in, torch out
    _check(r32.cpu().numpy(), xh, op, 1, "float32", "float32")


# ---- more than 2^31 elements (64-bit indexing); ~13 GB of GPU memory ----
def test_over_2_31_elements_full():
    import cupy as cp

    n = (1 << 31) + 4099
    x = cp.random.random(n, dtype=cp.float32)
    x[n - 5] = 3.0  # the maximum lies beyond 2^31
    got = float(tiledsl.reduce(x, "sum"))
    ref = float(cp.sum(x, dtype=cp.float64))
    assert abs(got - ref) <= 1e-5 * ref
    assert float(tiledsl.reduce(x, "max")) == 3.0
    del x


def test_over_2_31_elements_rows():
    import cupy as cp

    x = cp.random.random((3, (1 << 30) + 5), dtype=cp.float32)
    x[2, -1] = 5.0
    got = cp.asnumpy(tiledsl.reduce(x, "sum", axis=1))
    ref = cp.asnumpy(cp.sum(x, axis=1, dtype=cp.float64))
    assert np.all(np.abs(got - ref) <= 1e-5 * ref)
    assert cp.asnumpy(tiledsl.reduce(x, "max", axis=1))[2] == 5.0


# ---- a tuple of axes (numpy semantics): one pass over their product, of a view or a transposed copy ----
AXIS_TUPLES = [((6, 50, 70), (1, 2)), ((6, 50, 70), (0, 1)), ((6, 50, 70), (0, 2)), ((6, 50, 70), (-1, 0)),
               ((6, 50, 70), (0, 1, 2)), ((6, 50, 70), ()), ((3, 4, 5, 66), (1, 3)), ((3, 4, 5, 66), (0, 2, 3)),
               ((2, 3, 0, 4), (0, 3)), ((129, 257), (0, 1))]


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "float64"])
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape,axes", AXIS_TUPLES, ids=[f"{'x'.join(map(str, s))}-ax{a}" for s, a in AXIS_TUPLES])
def test_axis_tuple_every_op(shape, axes, op, dtype, rng):
    import cupy as cp

    xh = _data(rng, shape, dtype, op)
    if op in ("max", "min") and any(shape[a] == 0 for a in axes):
        with pytest.raises(tiledsl.SpecError, match="zero-size array"):
            tiledsl.reduce(cp.asarray(xh), op, axes)
        return
    for keepdims in (False, True):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # mean of an empty slice, as numpy
            want_shape = np.sum(np.zeros(shape), axis=axes, keepdims=keepdims).shape
            out_dtype = tiledsl.ReduceOp(shape=(1,), op=op, dtype=dtype).out_dtype
            out = _poisoned(want_shape, out_dtype)
            res = tiledsl.reduce(cp.asarray(xh), op, axes, out=out, keepdims=keepdims)
        assert res is out and res.shape == want_shape
        got = cp.asnumpy(out).reshape(np.sum(np.zeros(shape), axis=axes).shape)
        if 0 in shape:
            continue
        _check(got, xh, op, axes, dtype, out_dtype)


def test_axis_tuple_of_a_strided_view_and_a_fresh_result(rng):
    import cupy as cp

    xh = _data(rng, (8, 40, 30), "float32", "sum")
    x = cp.asarray(xh)[:, ::2, 1:]  # not contiguous
    got = tiledsl.reduce(x, "mean", axis=(0, -1))
    assert isinstance(got, cp.ndarray) and got.shape == (20,)  # CuPy in, CuPy out
    # a mean of 232 values in (-1, 1) can land near 0, where rtol alone is stricter than float32 sums are exact:
    # atol is a few float32 ulps of the values' scale (|x| < 1)
    np.testing.assert_allclose(cp.asnumpy(got), xh[:, ::2, 1:].astype(np.float64).mean(axis=(0, 2)), rtol=1e-5,
                               atol=1e-6)


def test_grid_auto_runs_like_grid_zero(rng):
    import cupy as cp

    xh = _data(rng, (1 << 20,), "float32", "sum")
    a = tiledsl.reduce(cp.asarray(xh), "sum", schedule=ReduceSchedule(grid="auto"))
    b = tiledsl.reduce(cp.asarray(xh), "sum", schedule=ReduceSchedule(grid=0))
    assert float(a) == float(b)

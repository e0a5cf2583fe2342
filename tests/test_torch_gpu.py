"""torch tensors in → torch tensors out (same device, every dtype) for gemm, reduce and transpose; CuPy in
→ CuPy out; an ``out=``/``c`` the caller passes is returned as given."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")

TORCH = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64,
         "int32": torch.int32, "int64": torch.int64}


def _t(rng, shape, dtype: str):
    host = rng.uniform(-1, 1, size=shape)
    if dtype.startswith("int"):
        host = rng.integers(-50, 50, size=shape)
    return torch.from_numpy(host).to(device="cuda", dtype=TORCH[dtype])


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_gemm_torch_in_torch_out(dtype, rng):
    a, b = _t(rng, (70, 33), dtype), _t(rng, (33, 45), dtype)
    c = tiledsl.gemm(a, b)
    assert isinstance(c, torch.Tensor) and c.dtype == TORCH[dtype] and c.device == a.device and c.shape == (70, 45)
    ref = a.double() @ b.double()
    tol = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2}[dtype]
    assert float((c.double() - ref).norm() / ref.norm()) < tol
    given = torch.full((70, 45), float("nan"), device="cuda", dtype=TORCH[dtype])
    assert tiledsl.gemm(a, b, given) is given


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64", "int32", "int64"])
def test_reduce_torch_in_torch_out(dtype, rng):
    x = _t(rng, (33, 20, 17), dtype)
    for axis in (None, 1, (0, 2)):
        r = tiledsl.reduce(x, "sum", axis)
        assert isinstance(r, torch.Tensor) and r.device == x.device
        want = x.double().sum() if axis is None else x.double().sum(dim=axis)
        assert tuple(r.shape) == tuple(want.shape)
        tol = {"float16": 2e-3, "bfloat16": 1e-2}.get(dtype, 1e-5)  # of the sum of |x| (blocked summation)
        assert torch.allclose(r.double(), want, rtol=0, atol=tol * float(x.double().abs().sum()))
    m = tiledsl.reduce(x, "max", axis=-1, keepdims=True)
    assert isinstance(m, torch.Tensor) and torch.equal(m.double(), x.double().amax(dim=-1, keepdim=True))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64", "int32", "int64"])
def test_transpose_torch_in_torch_out(dtype, rng):
    x = _t(rng, (37, 129), dtype)
    y = tiledsl.transpose(x)
    assert isinstance(y, torch.Tensor) and y.dtype == x.dtype and y.device == x.device
    assert torch.equal(y, x.t())


def test_cupy_in_cupy_out(rng):
    import cupy as cp

    a = cp.asarray(rng.uniform(-1, 1, (16, 8)).astype(np.float32))
    for res in (tiledsl.gemm(a, a.T), tiledsl.reduce(a, "sum", (0, 1)), tiledsl.transpose(a)):
        assert isinstance(res, cp.ndarray)

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


def test_torch_calls_run_on_torchs_current_stream():
    """Inputs written on a busy side stream: a call made inside ``torch.cuda.stream(s)`` must run on s
    (torch's streams do not wait for the legacy default stream, nor it for them), first and cached."""
    s = torch.cuda.Stream()
    x, t = torch.rand(128, 4096, device="cuda"), torch.rand(100, 96, device="cuda")
    a, b = torch.rand(64, 80, device="cuda"), torch.rand(80, 48, device="cuda")
    c = torch.empty(64, 48, device="cuda")
    torch.cuda.synchronize()
    for k in (2.0, 3.0, 5.0):  # the first call checks and caches; the others replay
        with torch.cuda.stream(s):
            torch.cuda._sleep(20_000_000)  # s stays busy while the host queues the rest
            xs, ts, a_s = x * k, t * k, a * k  # written on s, after the sleep
            r = tiledsl.reduce(xs, "sum", axis=1)
            y = tiledsl.transpose(ts)
            g = tiledsl.gemm(a_s, b)
            assert tiledsl.gemm(a_s, b, c) is c
            if k != 2.0:  # a first call may wait for s (CuPy synchronises a stream it imports from)
                assert not s.query()  # the cached calls were queued behind the sleep
        s.synchronize()
        torch.testing.assert_close(r, (x.double() * k).sum(dim=1).float(), rtol=1e-5, atol=1e-3)
        assert torch.equal(y, (t * k).t())
        want = (a.double() * k) @ b.double()
        torch.testing.assert_close(g.double(), want, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(c.double(), want, rtol=1e-4, atol=1e-4)


def test_torch_graph_captures_calls_without_an_external_stream():
    """Inside ``torch.cuda.graph`` tiledsl launches on the capturing stream (torch's current one); results
    it allocates come from the graph's pool, so calls without ``out=`` are captured too."""
    a, b = torch.rand(64, 80, device="cuda"), torch.rand(80, 48, device="cuda")
    c = torch.empty(64, 48, device="cuda")
    x, r = torch.rand(128, 4096, device="cuda"), torch.empty(128, device="cuda")
    s = torch.cuda.Stream()

    def step():
        tiledsl.gemm(a, b, c)
        tiledsl.reduce(x, "sum", axis=1, out=r)
        return tiledsl.reduce(x, "max", axis=1), tiledsl.transpose(a)

    with torch.cuda.stream(s):
        step()  # warm-up: compile, load, cache
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        m, at = step()
    a.copy_(torch.rand_like(a))
    x.copy_(torch.rand_like(x))
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a.double().matmul(b.double()).float(), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(r, x.double().sum(dim=1).float(), rtol=1e-5, atol=1e-3)
    assert torch.equal(m, x.amax(dim=1)) and torch.equal(at, a.t())


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_repeated_torch_calls_replay_correctly(dtype, rng):
    """The cached path (second and later calls) on torch tensors, bfloat16 included, and a strided bfloat16
    reduction (copied each call, never replayed on the strided tensor)."""
    tol = {"float32": 1e-5, "bfloat16": 1e-2}[dtype]
    a, b = _t(rng, (70, 33), dtype), _t(rng, (33, 45), dtype)
    x, t = _t(rng, (33, 200), dtype), _t(rng, (37, 129), dtype)
    xs = _t(rng, (33, 600), dtype)[:, ::3]
    for k in range(3):
        for arr in (a, t, x, xs):
            arr.mul_(-1)  # new data each round: a stale replay would show
        c = tiledsl.gemm(a, b)
        ref = a.double() @ b.double()
        assert c.dtype == TORCH[dtype] and float((c.double() - ref).norm() / ref.norm()) < tol, k
        for arr in (x, xs):
            r = tiledsl.reduce(arr, "sum", axis=1)
            want = arr.double().sum(dim=1)
            assert r.dtype == TORCH[dtype]
            assert torch.allclose(r.double(), want, rtol=0, atol=tol * float(arr.double().abs().sum())), k
        assert torch.equal(tiledsl.transpose(a), a.t()) and torch.equal(tiledsl.transpose(t), t.t()), k


def test_parameters_take_the_cached_path(rng):
    x = _t(rng, (16, 64), "float32")
    w = torch.nn.Parameter(_t(rng, (64, 32), "float32"), requires_grad=False)
    for _ in range(3):
        with torch.no_grad():
            w.mul_(-1)
        y = tiledsl.gemm(x, w)
        assert isinstance(y, torch.Tensor)
        torch.testing.assert_close(y.double(), x.double() @ w.double(), rtol=1e-5, atol=1e-5)

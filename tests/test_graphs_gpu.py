"""CUDA graphs: calls with ``c=``/``out=`` given allocate nothing and never synchronise the host, so a
sequence of them is captured once and replayed on new data (CuPy graphs; torch graphs through an
``ExternalStream``). Scratch buffers (split-K partial products, reduction partials and tickets) live per
(device, stream) and are made by the warm-up call, before the capture.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

pytestmark = pytest.mark.gpu


def _inputs(cp):
    rng = cp.random.default_rng(0)
    f = cp.float32
    return {
        "a": rng.random((64, 80), dtype=f), "b": rng.random((80, 48), dtype=f), "c": cp.empty((64, 48), f),
        "a2": rng.random((16, 8192), dtype=f), "b2": rng.random((8192, 64), dtype=f),
        "c2": rng.random((16, 64), dtype=f),
        "x": rng.random((128, 4096), dtype=f), "r": cp.empty(128, f),
        "big": rng.random(1 << 22, dtype=f), "s": cp.empty((), f),
        "t": rng.random((100, 96), dtype=f), "tt": cp.empty((96, 100), f),
    }


def _step(tiledsl, d, splitk):
    tiledsl.gemm(d["a"], d["b"], d["c"])
    tiledsl.gemm(d["a2"], d["b2"], d["c2"], alpha=0.5, beta=1.0, schedule=splitk)  # split-K: workspace
    tiledsl.reduce(d["x"], "sum", axis=1, out=d["r"])
    tiledsl.reduce(d["big"], "sum", out=d["s"])  # blocks combine through partials and a zeroed ticket
    tiledsl.transpose(d["t"], out=d["tt"])


def _check(cp, d, c2_before):
    f64 = np.float64
    np.testing.assert_allclose(cp.asnumpy(d["c"]), cp.asnumpy(d["a"]).astype(f64) @ cp.asnumpy(d["b"]), rtol=1e-4)
    want = 0.5 * cp.asnumpy(d["a2"]).astype(f64) @ cp.asnumpy(d["b2"]) + c2_before
    np.testing.assert_allclose(cp.asnumpy(d["c2"]), want, rtol=1e-4)
    np.testing.assert_allclose(cp.asnumpy(d["r"]), cp.asnumpy(d["x"]).astype(f64).sum(axis=1), rtol=1e-5)
    np.testing.assert_allclose(float(d["s"]), cp.asnumpy(d["big"]).astype(f64).sum(), rtol=1e-5)
    assert (cp.asnumpy(d["tt"]) == cp.asnumpy(d["t"]).T).all()


def test_cupy_graph_of_gemm_reduce_transpose_replays_on_new_data():
    cp = pytest.importorskip("cupy")
    import tiledsl

    splitk = replace(tiledsl.preset("gemm", "sgemm_64x64_4x4"), split_k=4)
    d = _inputs(cp)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        _step(tiledsl, d, splitk)  # warm-up: compile, load, scratch buffers of this stream
        stream.synchronize()
        stream.begin_capture()
        _step(tiledsl, d, splitk)
        graph = stream.end_capture()
    stream.synchronize()
    rng = cp.random.default_rng(1)
    for _ in range(2):  # twice: the tickets and partials are reset inside the graph
        with stream:
            for k in ("a", "b", "a2", "b2", "c2", "x", "big", "t"):
                d[k][...] = rng.random(d[k].shape, dtype=cp.float32)
            c2_before = cp.asnumpy(d["c2"]).astype(np.float64)
            stream.synchronize()
        graph.launch(stream=stream)
        stream.synchronize()
        _check(cp, d, c2_before)


def test_torch_graph_of_gemm_and_reduce_replays_on_new_data():
    torch = pytest.importorskip("torch")
    cp = pytest.importorskip("cupy")
    import tiledsl

    a, b = torch.rand(64, 80, device="cuda"), torch.rand(80, 48, device="cuda")
    c = torch.empty(64, 48, device="cuda")
    x, r = torch.rand(128, 4096, device="cuda"), torch.empty(128, device="cuda")
    s = torch.cuda.Stream()

    def step():
        with cp.cuda.ExternalStream(s.cuda_stream):  # tiledsl launches on CuPy's current stream
            tiledsl.gemm(a, b, c)
            tiledsl.reduce(x, "sum", axis=1, out=r)

    with torch.cuda.stream(s):
        step()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        step()
    a.copy_(torch.rand_like(a))
    x.copy_(torch.rand_like(x))
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a.double().matmul(b.double()).float(), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(r, x.double().sum(dim=1).float(), rtol=1e-5, atol=1e-3)


def test_a_call_that_must_grow_a_scratch_buffer_during_capture_says_so():
    cp = pytest.importorskip("cupy")
    import tiledsl

    big = cp.random.rand(1 << 24, dtype=cp.float32)
    s = cp.empty((), cp.float32)
    stream = cp.cuda.Stream(non_blocking=True)  # a fresh stream: no scratch buffer yet
    with stream:
        stream.begin_capture()
        try:
            with pytest.raises(tiledsl.LaunchError, match="run the same call once before capturing"):
                tiledsl.reduce(big, "sum", out=s)
        finally:
            stream.end_capture()

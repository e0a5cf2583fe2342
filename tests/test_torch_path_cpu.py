"""torch tensors on the call path, without a GPU or torch: a stand-in ``torch`` module whose tensors sit over
fake device addresses, and launches recorded with the stream they were given.

Checked: a call on torch tensors returns torch tensors, its first (checked) call runs on torch's current
stream (through a CuPy ``ExternalStream``) and its repeats launch on torch's current stream as it is at
each call, read the tensors' ``data_ptr()`` without converting them, and allocate their result with
``torch.empty``; CuPy operands launch on CuPy's current stream.
"""

from __future__ import annotations

import sys
import types

import cupy
import numpy as np
import pytest

import tiledsl
from tiledsl import cache, dependent, runtime
from tiledsl.compile import Kernel
from tiledsl.gemm import api as gemm_api
from tiledsl.reduce import api as reduce_api
from tiledsl.target import Target

H200 = Target.known("H200")
TORCH_STREAM = 0x7A11


class _Dtype:
    def __init__(self, name: str) -> None:
        self.name = name

    def __str__(self) -> str:
        return f"torch.{self.name}"


def _fake_torch(empty, state: dict):
    mod = types.ModuleType("torch")
    for name in ("float32", "float16", "float64", "int16", "int32", "int64", "bfloat16"):
        setattr(mod, name, _Dtype(name))

    class Tensor:
        is_cuda = True

        def __init__(self, arr, dtype=None) -> None:  # bfloat16: int16 bits, dtype=torch.bfloat16
            self.arr, self._dtype = arr, dtype

        @property
        def shape(self):
            return tuple(self.arr.shape)

        @property
        def dtype(self):
            return self._dtype or getattr(mod, self.arr.dtype.name)

        def view(self, dtype):
            return Tensor(self.arr.view(dtype.name))

        def is_contiguous(self):
            return self.arr.flags.c_contiguous

        def contiguous(self):
            return self if self.is_contiguous() else Tensor(empty(self.arr.shape, self.arr.dtype), self._dtype)

        @property
        def device(self):
            return ("cuda", 0)

        def stride(self):
            return tuple(s // self.arr.itemsize for s in self.arr.strides)

        def get_device(self):
            return 0

        def data_ptr(self):
            return self.arr.data.ptr

    class Parameter(Tensor):
        pass

    Tensor.__module__, Parameter.__module__ = "torch", "torch.nn.parameter"
    mod.Tensor = Tensor
    mod.nn = types.SimpleNamespace(Parameter=Parameter)
    mod.device = lambda kind, index: (kind, index)

    def torch_empty(*sizes, dtype, device):  # torch.empty((m, n), ...) or torch.empty(m, n, ...)
        state["torch_empty"] += 1
        shape = sizes[0] if len(sizes) == 1 and isinstance(sizes[0], tuple) else sizes
        if dtype is mod.bfloat16:
            return Tensor(empty(shape, "int16"), dtype)
        return Tensor(empty(shape, dtype.name))

    mod.empty = torch_empty
    mod.from_dlpack = Tensor
    mod._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda index: state["stream"])
    return mod


@pytest.fixture
def fake(monkeypatch, fake_empty):
    """(torch stand-in, log of launches, state): arrays over fake, 16 MiB-apart addresses; each launch
    logs the address of the stream it ran on (an explicit stream, else CuPy's current one)."""
    log: list = []
    state = {"stream": TORCH_STREAM, "torch_empty": 0, "converted": 0, "current": [0]}
    empty = fake_empty

    torch = _fake_torch(empty, state)

    def launch_fn(kernel):
        def fn(grid, block, args, shared_mem=0, stream=None):
            log.append({"name": kernel.name, "stream": state["current"][-1] if stream is None else stream.ptr})
        return fn

    class ExternalStream:
        def __init__(self, ptr, device_id=-1) -> None:
            self.ptr = ptr

        def __enter__(self):
            state["current"].append(self.ptr)
            return self

        def __exit__(self, *exc):
            state["current"].pop()

    as_cupy = runtime.as_cupy

    def fake_as_cupy(x, name):
        if isinstance(x, torch.Tensor):
            state["converted"] += 1
            return x.arr
        return as_cupy(x, name)

    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setattr(runtime, "_TENSORS", frozenset())
    monkeypatch.setattr(runtime, "_RAW_STREAM", [])
    monkeypatch.setattr(runtime, "_TORCH_STREAMS", {})
    for mod in (runtime, gemm_api, reduce_api):
        monkeypatch.setattr(mod, "as_cupy", fake_as_cupy)
    monkeypatch.setattr(cupy.cuda, "ExternalStream", ExternalStream)
    monkeypatch.setattr(Target, "current", staticmethod(lambda: H200))
    monkeypatch.setattr(runtime, "device_id", lambda: 0)
    monkeypatch.setattr(runtime, "cupy_empty", empty)
    monkeypatch.setattr(cupy, "empty", empty)
    monkeypatch.setattr(Kernel, "function", launch_fn)
    monkeypatch.setattr(dependent, "_USABLE", {0: False})  # a GPU machine's Hopper: no real driver call for a fake
    cache.clear_all()
    yield torch, log, state, empty
    cache.clear_all()


def test_torch_calls_return_torch_tensors_and_launch_on_torchs_current_stream(fake):
    torch, log, state, empty = fake
    x = torch.Tensor(empty((128, 4096)))
    a, b, t = torch.Tensor(empty((64, 32))), torch.Tensor(empty((32, 48))), torch.Tensor(empty((40, 72)))
    calls = {
        "reduce": (lambda: tiledsl.reduce(x, "sum", axis=1), (128,), "float32"),
        "reduce int64 result": (lambda: tiledsl.reduce(torch.Tensor(empty((8, 16), np.int32)), "sum", axis=1),
                                (8,), "int64"),
        "gemm": (lambda: tiledsl.gemm(a, b), (64, 48), "float32"),
        "transpose": (lambda: tiledsl.transpose(t), (72, 40), "float32"),
    }
    for what, (call, shape, dtype) in calls.items():
        log.clear()
        state["converted"] = state["torch_empty"] = 0
        first = call()
        converted = state["converted"]
        state["stream"] = TORCH_STREAM + 1  # torch's current stream changed: the repeat follows it
        second = call()
        state["stream"] = TORCH_STREAM
        for r in (first, second):
            assert isinstance(r, torch.Tensor) and r.shape == shape and r.dtype.name == dtype, what
        assert second.data_ptr() != first.data_ptr(), what
        assert [e["stream"] for e in log] == [TORCH_STREAM, TORCH_STREAM + 1], what
        assert converted >= 1 and state["converted"] == converted, what  # the repeat converts nothing
        assert state["torch_empty"] == 1, what  # the repeat's result is torch.empty's


def test_given_torch_outputs_are_returned_and_written_on_torchs_stream(fake):
    torch, log, state, empty = fake
    a, b, c = (torch.Tensor(empty(s)) for s in ((64, 32), (32, 48), (64, 48)))
    x, r = torch.Tensor(empty((16, 256))), torch.Tensor(empty((16,)))
    for _ in range(2):
        assert tiledsl.gemm(a, b, c) is c
        assert tiledsl.reduce(x, "sum", axis=1, out=r) is r
    assert [e["stream"] for e in log] == [TORCH_STREAM] * 4
    assert state["torch_empty"] == 0


def test_cupy_operands_launch_on_cupys_current_stream(fake):
    torch, log, state, empty = fake
    x, a = empty((128, 4096)), empty((64, 64))
    for _ in range(2):
        assert isinstance(tiledsl.reduce(x, "sum", axis=1), cupy.ndarray)
        assert isinstance(tiledsl.gemm(a, a), cupy.ndarray)
        assert isinstance(tiledsl.transpose(a), cupy.ndarray)
    assert len(log) == 6 and {e["stream"] for e in log} == {0}
    assert state["torch_empty"] == 0


def test_bfloat16_tensors_are_replayed_too(fake):
    torch, log, state, empty = fake

    def bf16(*shape):
        return torch.Tensor(empty(shape, "int16"), torch.bfloat16)

    a, b, t, x = bf16(64, 32), bf16(32, 48), bf16(40, 72), bf16(16, 256)
    calls = {
        "gemm": (lambda: tiledsl.gemm(a, b), (64, 48)),
        "transpose": (lambda: tiledsl.transpose(t), (72, 40)),
        "reduce": (lambda: tiledsl.reduce(x, "sum", axis=1), (16,)),
    }
    for what, (call, shape) in calls.items():
        log.clear()
        state["converted"] = state["torch_empty"] = 0
        first = call()
        converted, made = state["converted"], state["torch_empty"]
        second = call()
        for r in (first, second):
            assert isinstance(r, torch.Tensor) and r.shape == shape and r.dtype is torch.bfloat16, what
        assert state["converted"] == converted and state["torch_empty"] == made + 1, what
        assert [e["stream"] for e in log] == [TORCH_STREAM] * 2, what


def test_a_strided_bfloat16_reduction_is_copied_each_time_not_replayed(fake):
    torch, log, state, empty = fake
    x = torch.Tensor(empty((16, 512), "int16")[:, ::2], torch.bfloat16)
    assert tiledsl.reduce(x, "sum", axis=1).shape == (16,)
    first = state["converted"]
    assert tiledsl.reduce(x, "sum", axis=1).shape == (16,)
    assert first >= 1 and state["converted"] == 2 * first and len(log) == 2  # checked (and copied) again


def test_parameters_are_replayed_like_tensors(fake):
    torch, log, state, empty = fake
    w, x = torch.nn.Parameter(empty((32, 48))), torch.Tensor(empty((64, 32)))
    first = tiledsl.gemm(x, w)
    converted = state["converted"]
    second = tiledsl.gemm(x, w)
    assert isinstance(first, torch.Tensor) and isinstance(second, torch.Tensor) and second.shape == (64, 48)
    assert converted == 2 and state["converted"] == converted and state["torch_empty"] == 1
    assert [e["stream"] for e in log] == [TORCH_STREAM] * 2

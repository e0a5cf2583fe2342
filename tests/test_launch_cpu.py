"""The call path without a GPU: plans, argument packing from the parameter list, the launch-plan cache and
its invalidation, checked on a fake device.

CuPy arrays over unowned (never dereferenced) addresses stand in for device memory; ``Kernel.function``
returns a recorder instead of a loaded kernel. Kernels are really emitted and compiled (NVRTC needs no
GPU). The packed arguments are compared with what each launcher passed before plans existed.
"""

from __future__ import annotations

import contextlib
import ctypes
from dataclasses import replace

import cupy
import numpy as np
import pytest
from cupy._core._scalar import CScalar
from cupy.cuda.function import CIntptr

import tiledsl
from tiledsl import cache, dependent, launch, registry, runtime
from tiledsl.compile import Kernel
from tiledsl.gemm import api as gemm_api
from tiledsl.planning import Workspace
from tiledsl.target import Target

H200 = Target.known("H200")
REAL_PTR = launch._ptr  # the fixture fakes the scratch-buffer lookup; the workspace tests use the real one


def _value(arg):
    """A packed kernel argument (runtime.c_packers) as the NumPy scalar it stands for; a pointer as np.uint64."""
    if isinstance(arg, CScalar):
        return arg.get_numpy_type()(arg.value)
    if isinstance(arg, CIntptr):
        return np.uint64(ctypes.c_uint64.from_address(arg.ptr).value)
    return arg


class _Recorder:
    ptr = 0xF0F0  # a CUfunction handle for a dependent launch (tiledsl.dependent): only the fake driver sees it

    def __init__(self, name: str, log: list) -> None:
        self.name, self.log = name, log

    def __call__(self, grid, block, args, shared_mem=0, stream=None):
        self.log.append({"name": self.name, "grid": tuple(grid), "block": tuple(block),
                         "args": tuple(_value(a) for a in args), "smem": shared_mem, "stream": stream})


@pytest.fixture
def fake_gpu(monkeypatch, fake_empty):
    """Launches recorded in a list; arrays are CuPy views of fake, 16 MiB-apart, 256-byte-aligned addresses."""
    log: list = []
    empty = fake_empty

    def workspace_ptr(ws, stream=None):
        log.append({"workspace": ws.name, "count": ws.count, "init": ws.init})
        return empty((ws.count,), ws.dtype).data.ptr

    monkeypatch.setattr(Target, "current", staticmethod(lambda: H200))
    monkeypatch.setattr(runtime, "device_id", lambda: 0)
    monkeypatch.setattr(runtime, "cupy_empty", empty)
    monkeypatch.setattr(cupy, "empty", empty)
    monkeypatch.setattr(Kernel, "function", lambda self: _Recorder(self.name, log))
    monkeypatch.setattr(dependent, "_USABLE", {0: False})  # a GPU machine's Hopper: no real driver call for a fake
    monkeypatch.setattr(gemm_api, "workspace_ptr", workspace_ptr)
    monkeypatch.setattr(launch, "_ptr", lambda cupy, ws, sp, dev: workspace_ptr(ws))
    monkeypatch.setattr(launch, "_GENERATION", [0])
    monkeypatch.setattr(cupy.cuda, "get_current_stream", lambda: runtime.StreamRef(0))
    cache.clear_all()
    log.append(empty)  # the allocator, for the tests
    yield log
    cache.clear_all()


def _launches(log):
    return [e for e in log if isinstance(e, dict) and "name" in e]


def _check_args(args, expected):
    assert len(args) == len(expected)
    for got, want in zip(args, expected, strict=True):
        if isinstance(want, cupy.ndarray):
            ptr = got.data.ptr if isinstance(got, cupy.ndarray) else int(got)
            assert isinstance(got, (cupy.ndarray, np.uint64)) and ptr == want.data.ptr
        else:
            assert type(got) is type(want) and got == want, (got, want)


def test_gemm_args_match_the_parameter_list_and_repeat_from_the_cache(fake_gpu):
    empty = fake_gpu.pop()
    a, b = empty((64, 64)), empty((64, 64))
    c = tiledsl.gemm(a, b)
    c2 = tiledsl.gemm(a, b, alpha=2.0)
    runs = _launches(fake_gpu)
    assert len(runs) == 2 and c.shape == (64, 64) and c2.shape == (64, 64) and c2 is not c
    op = tiledsl.GemmOp(64, 64, 64)
    p = tiledsl.plan(op, device=H200)
    for run, out, alpha in ((runs[0], c, 1.0), (runs[1], c2, 2.0)):
        assert run["grid"] == p.grid and run["block"] == p.block and run["smem"] == p.dynamic_smem_bytes
        _check_args(run["args"], [a, b, out, np.int32(64), np.int32(64), np.int32(64), np.int64(64), np.int64(64),
                                  np.int64(64), np.float32(alpha)])
    assert cache.LAUNCHES.hits >= 1


def test_gemm_beta_transposed_views_and_column_major_c(fake_gpu):
    empty = fake_gpu.pop()
    a, b = empty((40, 24)), empty((40, 32))           # A = a.T is (24, 40) column-major
    c = empty((32, 24)).T                              # column-major C: computed as C^T = B^T A^T
    for _ in range(2):
        assert tiledsl.gemm(a.T, b, c, alpha=1.5, beta=0.5) is c
    runs = _launches(fake_gpu)
    assert len(runs) == 2 and runs[0]["args"][0] is not None
    for run in runs:  # the kernel's A is b^T (row-major (32, 40) view of b), its B is a (row-major (40, 24))
        _check_args(run["args"], [b, a, c, np.int32(32), np.int32(24), np.int32(40), np.int64(32), np.int64(24),
                                  np.int64(24), np.float32(1.5), np.float32(0.5)])


def test_gemm_split_k_uses_the_workspace_and_the_followup_plan(fake_gpu):
    empty = fake_gpu.pop()
    m, n, k = 16, 64, 8192
    s = replace(tiledsl.registry.preset("gemm", "sgemm_64x64_4x4"), split_k=4)
    a, b, c = empty((m, k)), empty((k, n)), empty((m, n))
    for _ in range(2):
        tiledsl.gemm(a, b, c, schedule=s, alpha=3.0, beta=1.0)
    runs = _launches(fake_gpu)
    ws = [e for e in fake_gpu if isinstance(e, dict) and "workspace" in e]
    # looked up once: the second call reuses the address (no buffer was replaced since)
    assert len(runs) == 4 and len(ws) == 1 and ws[0]["count"] == 4 * m * n
    main, red = runs[2], runs[3]
    assert main["grid"] == (-(-m // 64) * -(-n // 64), 4, 1)
    assert red["grid"] == (-(-(m * n) // 256), 1, 1) and red["block"] == (256, 1, 1)
    assert main["args"][3:] == (np.int32(m), np.int32(n), np.int32(k), np.int64(k), np.int64(n), np.int64(n),
                                np.float32(1.0))
    assert all(type(x) is type(y) for x, y in zip(main["args"][3:], (np.int32(1),) * 3 + (np.int64(1),) * 3
                                                  + (np.float32(1),), strict=True))
    assert red["args"][2:] == (np.int32(m), np.int32(n), np.int64(n), np.float32(3.0), np.float32(1.0))
    assert int(red["args"][1]) == c.data.ptr


def test_reduce_args_match_the_launch_plan(fake_gpu):
    empty = fake_gpu.pop()
    x = empty((128, 4096))
    r1 = tiledsl.reduce(x, "sum", axis=1)
    r2 = tiledsl.reduce(x, "sum", axis=1)
    assert r1.shape == (128,) and r2 is not r1
    op = tiledsl.ReduceOp(shape=(128, 4096), op="sum", axis=1)
    p = tiledsl.plan(op, device=H200)
    lp = p.detail
    runs = _launches(fake_gpu)
    assert len(runs) == 2
    for run, out in zip(runs, (r1, r2), strict=True):
        assert run["grid"] == (lp.grid, 1, 1)
        _check_args(run["args"], [x, out, np.uint64(0), np.uint64(0), np.int64(128), np.int64(4096), np.int64(1),
                                  np.int64(lp.col_tiles), np.int32(lp.split)])


def test_reduce_full_sum_takes_partials_and_kept_zero_tickets_from_the_workspace(fake_gpu):
    empty = fake_gpu.pop()
    x = empty((1 << 22,))
    out = empty(())
    for _ in range(2):
        assert tiledsl.reduce(x, "sum", out=out) is out
    ws = [e for e in fake_gpu if isinstance(e, dict) and "workspace" in e]
    lp = tiledsl.plan(tiledsl.ReduceOp(shape=(1 << 22,)), device=H200).detail
    assert lp.split > 1
    # looked up once: the second call reuses the addresses (no buffer was replaced since)
    assert [(w["workspace"], w["count"], w["init"]) for w in ws] == [("partials", lp.partials, "none"),
                                                                      ("tickets", 1, "counters")]
    launch._GENERATION[0] += 1  # a buffer was replaced or freed: the next call looks them up again
    tiledsl.reduce(x, "sum", out=out)
    assert len([e for e in fake_gpu if isinstance(e, dict) and "workspace" in e]) == 4
    run = _launches(fake_gpu)[1]
    assert int(run["args"][1]) == out.data.ptr and run["args"][4:] == (np.int64(1), np.int64(1 << 22), np.int64(1),
                                                                        np.int64(0), np.int32(lp.split))


def test_transpose_args_and_cache(fake_gpu):
    empty = fake_gpu.pop()
    x = empty((64, 64))
    y = empty((64, 64))
    for _ in range(2):
        assert tiledsl.transpose(x, out=y) is y
    runs = _launches(fake_gpu)
    assert len(runs) == 2
    for run in runs:
        _check_args(run["args"], [x, y, np.int32(64), np.int32(64), np.int32(1), np.int64(0), np.int64(64),
                                  np.int64(1), np.int64(0), np.int64(64), np.int64(1)])
    assert runs[1]["grid"] == tiledsl.plan(tiledsl.TransposeOp(shape=(64, 64)), device=H200).grid


def test_storing_a_tuned_schedule_replans_the_next_call(fake_gpu):
    empty = fake_gpu.pop()
    x = empty((64, 96))
    tiledsl.transpose(x)
    op = tiledsl.TransposeOp(shape=(64, 96))
    tuned = tiledsl.TransposeSchedule(tile=32, rows_per_thread=8, vec=1, smem_pad=1, swizzle=4)
    assert tiledsl.plan(op, device=H200).schedule != tuned
    registry.store("transpose", op, H200, tuned)
    tiledsl.transpose(x)
    runs = _launches(fake_gpu)
    assert runs[0]["name"] != runs[1]["name"]
    assert runs[1]["name"] == tiledsl.plan(op, tuned, device=H200).kernel_name
    assert runs[1]["block"] == tuned.block


def test_an_overlapping_output_is_not_replayed(fake_gpu):
    empty = fake_gpu.pop()
    x = empty((64, 64))
    y = empty((64, 64))
    tiledsl.transpose(x, out=y)
    with pytest.raises(tiledsl.SpecError, match="shares memory"):
        tiledsl.transpose(x, out=x)  # same call signature as (x, y): the cached launch must not run


def test_workspaces_are_kept_per_stream_and_zeroed_by_a_memset_on_it(fake_gpu, monkeypatch):
    monkeypatch.setattr(launch, "_ptr", REAL_PTR)
    memsets, capturing = [], set()
    monkeypatch.setattr(cupy.cuda.runtime, "memsetAsync", lambda *args: memsets.append(args))
    monkeypatch.setattr(cupy.cuda.runtime, "streamIsCapturing", lambda ptr: ptr in capturing)
    monkeypatch.setattr(cupy.cuda, "get_current_stream", lambda: runtime.StreamRef(0))
    monkeypatch.setattr(cupy.cuda, "ExternalStream", lambda ptr: contextlib.nullcontext())
    monkeypatch.setattr(launch, "_WORKSPACES", {})
    tickets = Workspace("tickets", "uint32", 4, "zero")
    partials = Workspace("partials", "float32", 100, "none")
    s1, s2 = runtime.StreamRef(11), runtime.StreamRef(22)
    p1 = launch.workspace_ptr(tickets, s1)
    assert launch.workspace_ptr(tickets, s1) == p1 and launch.workspace_ptr(tickets) != p1
    p2 = launch.workspace_ptr(tickets, s2)
    assert p2 != p1 and launch.workspace_ptr(partials, s2) not in (p1, p2)
    assert memsets == [(p1, 0, 16, 11), (p1, 0, 16, 11), (memsets[2][0], 0, 16, 0), (p2, 0, 16, 22)]
    capturing.add(33)
    with pytest.raises(tiledsl.LaunchError, match="run the same call once before capturing"):
        launch.workspace_ptr(tickets, runtime.StreamRef(33))


def test_counters_are_zeroed_when_allocated_and_never_again(fake_gpu, monkeypatch):
    """Reduction tickets: the kernel's last block resets its counter, so only a new buffer is zeroed."""
    monkeypatch.setattr(launch, "_ptr", REAL_PTR)
    memsets = []
    monkeypatch.setattr(cupy.cuda.runtime, "memsetAsync", lambda *args: memsets.append(args))
    monkeypatch.setattr(cupy.cuda.runtime, "streamIsCapturing", lambda ptr: False)
    monkeypatch.setattr(cupy.cuda, "ExternalStream", lambda ptr: contextlib.nullcontext())
    monkeypatch.setattr(launch, "_WORKSPACES", {})
    s1 = runtime.StreamRef(11)
    p1 = launch.workspace_ptr(Workspace("tickets", "uint32", 4, "counters"), s1)
    for _ in range(3):
        assert launch.workspace_ptr(Workspace("tickets", "uint32", 4, "counters"), s1) == p1
    assert memsets == [(p1, 0, 256, 11)]  # the whole (256-byte minimum) allocation, once
    p2 = launch.workspace_ptr(Workspace("tickets", "uint32", 1000, "counters"), s1)  # grows: a new buffer
    assert p2 != p1 and memsets[1:] == [(p2, 0, 4000, 11)]
    generation = launch._GENERATION[0]  # a replaced buffer made remembered addresses stale; so does freeing
    launch.free_workspaces()
    assert launch._GENERATION[0] == generation + 1


def test_tma_gemm_passes_tensor_maps_encoded_once_per_address_pair(fake_gpu, monkeypatch):
    empty = fake_gpu.pop()
    encoded = []

    def encode(geom, ptr):
        encoded.append(ptr)
        return ("map", geom.inner, geom.outer, ptr)

    monkeypatch.setattr(gemm_api, "encode", encode)
    s = tiledsl.preset("gemm", "hgemm_tma_128x128x64_s6")
    a, b = empty((256, 128), np.float16), empty((128, 192), np.float16)
    c1 = tiledsl.gemm(a, b, schedule=s)
    c2 = tiledsl.gemm(a, b, schedule=s)
    runs = _launches(fake_gpu)
    assert len(runs) == 2 and encoded == [a.data.ptr, b.data.ptr]  # the repeat reuses the maps
    for run, c in zip(runs, (c1, c2), strict=True):
        assert run["args"][0][0] == "map" and run["args"][0][3] == a.data.ptr and run["args"][1][3] == b.data.ptr
        assert int(run["args"][2]) == c.data.ptr
        assert run["args"][3:] == (np.int32(256), np.int32(192), np.int32(128), np.int64(192), np.float32(1.0))


def test_gemm_stream_k_passes_its_split_partials_and_tickets(fake_gpu):
    empty = fake_gpu.pop()
    m = n = k = 1024    # 32 tiles of 256×128 on 132 SMs: all shared by the 132 stream-K blocks
    s = tiledsl.registry.preset("gemm", "sgemm_256x128_16x8_stream_k")
    a, b, c = empty((m, k)), empty((k, n)), empty((m, n))
    for _ in range(2):
        tiledsl.gemm(a, b, c, schedule=s)
    runs = _launches(fake_gpu)
    ws = [e for e in fake_gpu if isinstance(e, dict) and "workspace" in e]
    assert [(w["workspace"], w["init"]) for w in ws] == [("sk_partials", "none"), ("gemm_tickets", "counters")]
    assert len(runs) == 2 and runs[0]["grid"] == (132, 1, 1)
    assert runs[0]["args"][10:12] == (np.int32(0), np.int32(132))        # dp_tiles, sk_blocks
    assert all(int(x) != 0 for x in runs[1]["args"][12:14])              # the partial tiles and tickets


def test_gemv_fused_split_k_is_one_launch_with_its_workspace_and_tickets(fake_gpu):
    empty = fake_gpu.pop()
    m, n, k = 4, 1000, 4096   # 2 blocks of 512 columns × 1 group of rows: two tickets
    s = tiledsl.GemmSchedule(kernel="gemv", bm=4, bn=128, vec=4, split_k=8, split_k_fused=True)
    a, b, c = empty((m, k)), empty((k, n)), empty((m, n))
    for _ in range(2):
        tiledsl.gemm(a, b, c, alpha=2.0, schedule=s)
    runs = _launches(fake_gpu)
    ws = [e for e in fake_gpu if isinstance(e, dict) and "workspace" in e]
    assert [(w["workspace"], w["count"], w["init"]) for w in ws] == [("workspace", 8 * m * n, "none"),
                                                                      ("gemm_tickets", 2, "counters")]
    assert len(runs) == 2 and all("_sk8f_" in r["name"] for r in runs) and runs[0]["grid"] == (2, 8, 1)
    args = runs[1]["args"]  # A, B, W, C, M, N, K, lda, ldb, ldc, alpha, tickets
    assert int(args[0]) == a.data.ptr and int(args[1]) == b.data.ptr and int(args[3]) == c.data.ptr
    assert int(args[2]) not in (0, c.data.ptr) and int(args[11]) != 0
    assert args[4:11] == (np.int32(m), np.int32(n), np.int32(k), np.int64(k), np.int64(n), np.int64(n),
                          np.float32(2.0))


class _FakeDriver:
    """The few names of ``cuda.bindings.driver`` a dependent launch uses; ``cuLaunchKernelEx`` decodes the kernel's
    arguments from the void** it is given (by the followup plan's parameter types) into the log."""

    class CUresult:
        CUDA_SUCCESS = 0

    class CUlaunchAttributeID:
        CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = "programmatic"

    class CUlaunchAttribute:
        def __init__(self) -> None:
            self.id, self.value = None, type("Value", (), {"programmaticStreamSerializationAllowed": 0})()

    class CUlaunchConfig:
        pass

    def __init__(self, log: list, types: tuple) -> None:
        self.log, self.types = log, types
        self.CUfunction = lambda h: ("function", h)
        self.CUstream = lambda h: ("stream", h)

    def cuLaunchKernelEx(self, cfg, fn, params, extra):
        ptrs = (ctypes.c_void_p * len(self.types)).from_address(params)
        args = tuple(t.from_address(ptrs[i]).value for i, t in enumerate(self.types))
        attr = cfg.attrs[0]
        self.log.append({"dependent": fn, "grid": (cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ),
                         "block": (cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ), "smem": cfg.sharedMemBytes,
                         "stream": cfg.hStream, "attr": (cfg.numAttrs, attr.id,
                                                         attr.value.programmaticStreamSerializationAllowed),
                         "args": args, "extra": extra})
        return (0,)


def test_split_k_followup_is_a_dependent_launch_on_sm_90_with_the_same_arguments(fake_gpu, monkeypatch):
    """On sm_90 with the CUDA Python bindings the split-K sum goes through cuLaunchKernelEx with programmatic stream
    serialization (tiledsl.dependent): its arguments, read back from the void** the driver gets, are the ones the
    plain CuPy launch passes; the main kernel stays a plain launch; set_enabled(False) goes back to CuPy."""
    empty = fake_gpu.pop()
    m, n, k = 16, 64, 8192
    s = replace(tiledsl.registry.preset("gemm", "sgemm_64x64_4x4"), split_k=4)
    red_plan = tiledsl.plan(tiledsl.GemmOp(m, n, k, read_c=True), s, device=H200).followup
    types = tuple(ctypes.c_void_p if p.is_pointer else dependent.C_TYPES[p.c_type] for p in red_plan.params)
    monkeypatch.setattr(dependent, "_DRIVER", [_FakeDriver(fake_gpu, types)])
    monkeypatch.setattr(dependent, "_USABLE", {0: True})
    monkeypatch.setattr(dependent, "_ENABLED", [True])
    a, b, c = empty((m, k)), empty((k, n)), empty((m, n))
    for _ in range(2):
        tiledsl.gemm(a, b, c, schedule=s, alpha=3.0, beta=1.0)
    was = dependent.set_enabled(False)
    tiledsl.gemm(a, b, c, schedule=s, alpha=3.0, beta=1.0)
    assert was is True and dependent.enabled() is False
    runs = [e for e in fake_gpu if isinstance(e, dict) and ("name" in e or "dependent" in e)]
    assert ["name" in r for r in runs] == [True, False, True, False, True, True]
    plain = runs[5]  # the sum launched through CuPy
    assert plain["name"] == red_plan.kernel_name and plain["grid"] == red_plan.grid
    for dep in (runs[1], runs[3]):
        assert dep["dependent"] == ("function", _Recorder.ptr) and dep["extra"] == 0
        assert dep["grid"] == red_plan.grid and dep["block"] == red_plan.block == plain["block"]
        assert dep["smem"] == plain["smem"] and dep["stream"] == ("stream", dependent.CU_STREAM_LEGACY)  # CuPy 0
        assert dep["attr"] == (1, "programmatic", 1)
        want = [int(plain["args"][0]), int(plain["args"][1]), *(x.item() for x in plain["args"][2:])]
        assert list(dep["args"]) == want and want[1] == c.data.ptr and want[-2:] == [3.0, 1.0], (dep["args"], want)


def test_dependent_launch_packs_scalars_as_the_plain_launch_and_wraps_binding_errors(fake_gpu, monkeypatch):
    """The dependent launch packs run-time scalars as the plain launch does (NumPy's scalar of the C type): alpha =
    -0.0 arrives as -0.0 (C's sign of zero as without split-K), a string alpha "2.0" as 2.0; an exception inside the
    bindings comes back as a LaunchError with the lock free for the next launch."""
    empty = fake_gpu.pop()
    m, n, k = 16, 64, 8192
    s = replace(tiledsl.registry.preset("gemm", "sgemm_64x64_4x4"), split_k=4)
    red_plan = tiledsl.plan(tiledsl.GemmOp(m, n, k), s, device=H200).followup
    types = tuple(ctypes.c_void_p if p.is_pointer else dependent.C_TYPES[p.c_type] for p in red_plan.params)
    driver = _FakeDriver(fake_gpu, types)
    monkeypatch.setattr(dependent, "_DRIVER", [driver])
    monkeypatch.setattr(dependent, "_USABLE", {0: True})
    monkeypatch.setattr(dependent, "_ENABLED", [True])
    a, b, c = empty((m, k)), empty((k, n)), empty((m, n))
    tiledsl.gemm(a, b, c, schedule=s, alpha=-0.0)
    tiledsl.gemm(a, b, c, schedule=s, alpha=-0.0)  # the cached call: values straight from the caller
    deps = [e for e in fake_gpu if isinstance(e, dict) and "dependent" in e]
    assert len(deps) == 2 and all(str(d["args"][-1]) == "-0.0" for d in deps), [d["args"] for d in deps]
    tiledsl.gemm(a, b, c, schedule=s, alpha="2.0")  # NumPy's float32("2.0"), as the plain launch packs it
    deps = [e for e in fake_gpu if isinstance(e, dict) and "dependent" in e]
    assert len(deps) == 3 and deps[-1]["args"][-1] == 2.0

    def broken(*args):
        raise RuntimeError('Function "cuLaunchKernelEx" not found')

    monkeypatch.setattr(driver, "cuLaunchKernelEx", broken)
    with pytest.raises(tiledsl.LaunchError, match="cuLaunchKernelEx.*not found"):
        tiledsl.gemm(a, b, c, schedule=s, alpha=1.0)
    monkeypatch.setattr(driver, "cuLaunchKernelEx", _FakeDriver.cuLaunchKernelEx.__get__(driver))
    tiledsl.gemm(a, b, c, schedule=s, alpha=1.0)  # the lock was released
    assert len([e for e in fake_gpu if isinstance(e, dict) and "dependent" in e]) == 4


def test_dependent_launch_falls_back_where_the_bindings_do_not_import(monkeypatch):
    """usable() is False, not an exception, without a device to ask and where cuda.bindings is found but does not
    import (a broken or mismatched install), so such a machine launches the split-K sum plainly."""
    monkeypatch.setattr(dependent, "_USABLE", {})
    monkeypatch.setattr(runtime, "device_id", lambda: (_ for _ in ()).throw(RuntimeError("no CUDA driver")))
    assert dependent.usable("sm_90") is False
    monkeypatch.setattr(runtime, "device_id", lambda: 3)
    monkeypatch.setattr(runtime, "cupy_module", lambda: type("C", (), {"cuda": type("D", (), {
        "Device": staticmethod(lambda dev: type("G", (), {"compute_capability": "90"})())})}))
    monkeypatch.setattr(dependent, "_DRIVER", [])
    monkeypatch.setitem(__import__("sys").modules, "cuda.bindings.driver", None)  # import halts
    assert dependent.usable("sm_90") is False and dependent._USABLE == {3: False}
    with pytest.raises(TypeError, match="True or False"):
        dependent.set_enabled("0")


def test_dependent_launch_is_for_hopper(monkeypatch):
    """Dependent launches for sm_90 / sm_90a kernels on a device that allows them; none for an architecture before
    sm_90 or after Hopper (not measured), an unknown one, or a device that does not allow them."""
    monkeypatch.setattr(runtime, "device_id", lambda: 7)
    monkeypatch.setattr(dependent, "_USABLE", {})
    for arch in (None, "sm_80", "sm_86", "compute_90", "", "sm_100", "sm_120"):
        assert not dependent.usable(arch), arch
    assert dependent._USABLE == {}  # decided from the architecture alone: no device was asked
    monkeypatch.setattr(dependent, "_USABLE", {7: False})
    assert not dependent.usable("sm_90a")
    monkeypatch.setattr(dependent, "_USABLE", {7: True})
    assert dependent.usable("sm_90") and dependent.usable("sm_90a") and not dependent.usable("sm_100")


def test_dependent_launch_device_check_reads_capability_and_driver(monkeypatch):
    """usable() asks the device once: Hopper (cc 9.x) with a driver of 12.3 or later and importable bindings; a
    Blackwell device or an older driver launches plainly."""
    monkeypatch.setattr(runtime, "device_id", lambda: 2)
    monkeypatch.setattr(dependent, "_DRIVER", ["driver"])  # importable
    for cc, driver, want in (("90", 12080, True), ("90", 12020, False), ("100", 12080, False), ("89", 12080, False)):
        fake = type("C", (), {"cuda": type("D", (), {
            "Device": staticmethod(lambda dev, cc=cc: type("G", (), {"compute_capability": cc})()),
            "runtime": type("R", (), {"driverGetVersion": staticmethod(lambda driver=driver: driver)})})})
        monkeypatch.setattr(runtime, "cupy_module", lambda fake=fake: fake)
        monkeypatch.setattr(dependent, "_USABLE", {})
        assert dependent.usable("sm_90") is want and dependent._USABLE == {2: want}, (cc, driver)


def test_dependent_launch_passes_cupys_stream_and_keeps_it_between_launches(monkeypatch):
    """A DependentLaunch sets the config's stream when it changes (CuPy's 0 as the legacy stream's handle, 1: the
    bindings may read 0 as the per-thread stream) and keeps it otherwise."""
    log: list = []
    monkeypatch.setattr(dependent, "_DRIVER", [_FakeDriver(log, (ctypes.c_void_p, ctypes.c_float))])
    launcher = dependent.DependentLaunch(0xF0F0, "k", (3, 1, 1), (256, 1, 1), 0, (ctypes.c_void_p, ctypes.c_float),
                                         {}, ((0, 0, None), (1, 1, np.float32)))
    for sp in (0x5000, 0x5000, 0, 0x6000):
        launcher((0x1234, 2.5), sp)
    assert [e["stream"] for e in log] == [("stream", 0x5000)] * 2 + [("stream", dependent.CU_STREAM_LEGACY),
                                                                     ("stream", 0x6000)]
    assert all(e["args"] == (0x1234, 2.5) for e in log)

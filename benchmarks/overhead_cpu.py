"""Host-side (Python) cost per repeated call, measured without a GPU.

CuPy arrays over unowned, never dereferenced addresses stand in for device memory; ``Kernel.function()``
returns a stand-in for the loaded kernel that does what CuPy's launch does on the host before
``cuLaunchKernel`` (each argument turned into a C value: ``CScalar`` for a NumPy scalar, the pointer of an
array; one already packed passes as it is; the stream's address read); ``Target.current()`` is the H200
table entry; stream queries and memsets are no-ops. A stand-in ``torch`` module (tensors over fake
addresses; ``data_ptr()``, ``stride()``, ``get_device()``, ``torch.empty``, the raw current stream) gives
the torch rows. Kernels are really emitted and compiled (NVRTC).

So what is timed is everything tiledsl does on the CPU for a repeated call (the launch-cache lookup,
argument packing, CuPy's argument conversion, the result's allocation as a fake array), not the driver's
launch, CuPy's memory pool or torch's own (C++) cost: the H200 numbers of ``benchmarks/overhead.py`` add
those. Per row: CPU µs per call (process time, best of 5 rounds of ``--calls`` calls: steadier than wall
clock on a shared machine) and Python function calls per call (cProfile: all, and those in tiledsl's own
files; the stand-ins' own calls are among "all").

Usage::

    python benchmarks/overhead_cpu.py [--calls 20000] [--profile ROW]

``--profile`` prints the cProfile of one row (its name, or a unique part of it).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import itertools
import pstats
import sys
import time
import timeit
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import cupy  # noqa: E402
import numpy as np  # noqa: E402
from cupy._core._scalar import CScalar  # noqa: E402
from cupy.cuda.function import CIntptr, CPointer  # noqa: E402

import tiledsl  # noqa: E402
from tiledsl import runtime  # noqa: E402
from tiledsl.compile import Kernel  # noqa: E402
from tiledsl.target import Target  # noqa: E402

_ADDRESSES = itertools.count(1 << 40, 1 << 24)


def fake_empty(shape, dtype=np.float32, order="C"):
    """A C-contiguous CuPy array at a fresh fake, 16 MiB-apart address (nothing is allocated)."""
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (int(shape),)
    dt = np.dtype(dtype)
    nbytes = max(1, int(np.prod(shape, dtype=np.int64))) * dt.itemsize
    mem = cupy.cuda.UnownedMemory(next(_ADDRESSES), nbytes, None, device_id=0)
    return cupy.ndarray(shape, dt, cupy.cuda.MemoryPointer(mem, 0))


def _cupy_launch(grid, block, args, shared_mem=0, stream=None):
    """What CuPy's ``Function.__call__`` does on the host before the driver call."""
    kept = []
    for a in args:
        if isinstance(a, CPointer):
            kept.append(a)
        elif a is None:
            kept.append(CIntptr(0))
        elif isinstance(a, cupy.ndarray):
            kept.append(CIntptr(a.data.ptr))
        else:
            kept.append(CScalar(a))
    return 0 if stream is None else stream.ptr


class _FakeStream:
    ptr = 0

    def is_capturing(self) -> bool:
        return False


class _Dtype:
    def __init__(self, name: str) -> None:
        self.name = name

    def __str__(self) -> str:
        return f"torch.{self.name}"


def fake_torch() -> types.ModuleType:
    """A stand-in ``torch`` module (registered in ``sys.modules``): CUDA tensors over fake addresses."""
    mod = types.ModuleType("torch")
    for name in ("float32", "float16", "float64", "int16", "int32", "int64", "bfloat16"):
        setattr(mod, name, _Dtype(name))

    class Tensor:
        is_cuda = True
        __slots__ = ("arr", "shape", "dtype", "_stride")

        def __init__(self, arr) -> None:
            self.arr, self.shape = arr, tuple(arr.shape)
            self.dtype = getattr(mod, arr.dtype.name)
            self._stride = tuple(s // arr.itemsize for s in arr.strides)

        @property
        def device(self):
            return ("cuda", 0)

        def stride(self):
            return self._stride

        def get_device(self):
            return 0

        def data_ptr(self):
            return self.arr.data.ptr

        def view(self, dtype):
            return Tensor(self.arr.view(dtype.name))

    Tensor.__module__ = "torch"
    mod.Tensor = Tensor
    mod.device = lambda kind, index=None: (kind, index)
    mod.empty = lambda *sizes, dtype, device: Tensor(fake_empty(
        sizes[0] if len(sizes) == 1 and isinstance(sizes[0], tuple) else sizes, dtype.name))
    mod.from_dlpack = Tensor
    mod._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda index: 0)
    mod.cuda = types.SimpleNamespace(current_stream=lambda index=None: types.SimpleNamespace(cuda_stream=0))
    sys.modules["torch"] = mod
    return mod


def install_fake_device() -> types.ModuleType:
    """Patch tiledsl and CuPy so calls run their host side only (see the module docstring); returns the
    stand-in torch module."""
    h200 = Target.known("H200")
    torch = fake_torch()
    as_cupy = runtime.as_cupy

    def fake_as_cupy(x, name):
        return x.arr if isinstance(x, torch.Tensor) else as_cupy(x, name)

    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("tiledsl") and getattr(mod, "as_cupy", None) is as_cupy:
            mod.as_cupy = fake_as_cupy
    Target.current = staticmethod(lambda: h200)
    cupy.empty = fake_empty
    cupy.cuda.get_current_stream = lambda: _FakeStream()
    cupy.cuda.ExternalStream = lambda ptr, device_id=-1: contextlib.nullcontext()
    cupy.cuda.runtime.memsetAsync = lambda *args: None
    cupy.cuda.runtime.streamIsCapturing = lambda ptr: False
    cupy.cuda.runtime.getDevice = lambda: 0
    Kernel.function = lambda self: _cupy_launch
    runtime.device_id = lambda: 0
    runtime.cupy_empty = fake_empty
    return torch


def rows(torch) -> dict:
    a, b, c = fake_empty((64, 64)), fake_empty((64, 64)), fake_empty((64, 64))
    x, r = fake_empty((128, 4096)), fake_empty((128,))
    w = fake_empty((1, 50257))
    t, tt = fake_empty((64, 64)), fake_empty((64, 64))
    ta, tb, tc = torch.Tensor(a), torch.Tensor(b), torch.Tensor(c)
    tx, tr, tt_ = torch.Tensor(x), torch.Tensor(r), torch.Tensor(t)
    return {
        "gemm 64x64x64, CuPy": lambda: tiledsl.gemm(a, b),
        "gemm 64x64x64, CuPy, c= given": lambda: tiledsl.gemm(a, b, c),
        "reduce sum axis=1 128x4096, CuPy": lambda: tiledsl.reduce(x, "sum", axis=1),
        "reduce sum axis=1 128x4096, CuPy, out= given": lambda: tiledsl.reduce(x, "sum", axis=1, out=r),
        "reduce sum axis=1 1x50257 (split: workspace), CuPy": lambda: tiledsl.reduce(w, "sum", axis=1),
        "transpose 64x64, CuPy": lambda: tiledsl.transpose(t),
        "transpose 64x64, CuPy, out= given": lambda: tiledsl.transpose(t, out=tt),
        "gemm 64x64x64, torch": lambda: tiledsl.gemm(ta, tb),
        "gemm 64x64x64, torch, c= given": lambda: tiledsl.gemm(ta, tb, tc),
        "reduce sum axis=1 128x4096, torch": lambda: tiledsl.reduce(tx, "sum", axis=1),
        "reduce sum axis=1 128x4096, torch, out= given": lambda: tiledsl.reduce(tx, "sum", axis=1, out=tr),
        "transpose 64x64, torch": lambda: tiledsl.transpose(tt_),
        "(fake allocation of one 64x64 CuPy output)": lambda: fake_empty((64, 64)),
        "(stand-in torch.empty of one 64x64 output)": lambda: torch.empty(64, 64, dtype=torch.float32, device=None),
    }


def call_counts(fn, n: int = 1000) -> tuple[float, float]:
    """(Python function calls per call, of which in tiledsl's files) of ``fn``, by cProfile."""
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(n):
        fn()
    pr.disable()
    st = pstats.Stats(pr).stats
    total = sum(v[1] for v in st.values())
    ours = sum(v[1] for k, v in st.items() if "/tiledsl/" in k[0])
    return (total - 1) / n, ours / n  # less the profiler's disable()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=20000, help="calls per round (best of 5 rounds)")
    ap.add_argument("--profile", default=None, help="print the cProfile of the row with this name (or part)")
    args = ap.parse_args(argv)
    torch = install_fake_device()
    table = rows(torch)
    print(f"host side per repeated call on a fake device (CPU µs, best of 5 × {args.calls} calls; Python calls "
          "per call by cProfile, all / in tiledsl)")
    for name, fn in table.items():
        try:
            fn()
            fn()
        except Exception as exc:  # e.g. a path that needs a real GPU in this version of tiledsl
            print(f"  {name:52s}     n/a  ({type(exc).__name__}: {str(exc)[:60]})")
            continue
        us = min(timeit.repeat(fn, timer=time.process_time, number=args.calls, repeat=5)) / args.calls * 1e6
        total, ours = call_counts(fn)
        print(f"  {name:52s} {us:7.2f} µs  {total:5.1f} / {ours:4.1f} calls")
    if args.profile:
        hits = [args.profile] if args.profile in table else [n for n in table if args.profile in n]
        if len(hits) != 1:
            ap.error(f"--profile {args.profile!r} names {len(hits)} rows; one of: {', '.join(table)}")
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(args.calls):
            table[hits[0]]()
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(15)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

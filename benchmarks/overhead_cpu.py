"""Host-side (Python) cost per repeated call, measured without a GPU.

CuPy arrays over unowned, never dereferenced addresses stand in for device memory, ``Kernel.function()``
returns a no-op in place of the loaded kernel and ``Target.current()`` is the H200 table entry, so what is
timed is everything tiledsl does on the CPU for a repeated call (argument checks or the launch-cache
lookup, argument packing), not CuPy's own launch. Kernels are really emitted and compiled (NVRTC).

Usage::

    python benchmarks/overhead_cpu.py [--calls 20000] [--profile]

Prints µs per call (best of 5 rounds of ``--calls`` calls) per row; ``--profile`` adds a cProfile of the
repeated GEMM call with ``c=`` given.
"""

from __future__ import annotations

import argparse
import cProfile
import itertools
import pstats
import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import cupy  # noqa: E402
import numpy as np  # noqa: E402

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


def _no_launch(grid, block, args, shared_mem=0, stream=None):
    return None


def install_fake_device() -> None:
    """Patch tiledsl and CuPy so calls run their host side only (see the module docstring)."""
    h200 = Target.known("H200")
    Target.current = staticmethod(lambda: h200)
    cupy.empty = fake_empty
    Kernel.function = lambda self: _no_launch
    runtime.device_id = lambda: 0
    runtime.cupy_empty = fake_empty


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=20000, help="calls per round (best of 5 rounds)")
    ap.add_argument("--profile", action="store_true", help="cProfile the repeated gemm call with c= given")
    args = ap.parse_args(argv)
    install_fake_device()
    a, b, c = fake_empty((64, 64)), fake_empty((64, 64)), fake_empty((64, 64))
    x, r = fake_empty((128, 4096)), fake_empty((128,))
    t, tt = fake_empty((64, 64)), fake_empty((64, 64))
    rows = {
        "gemm 64x64x64 (new output)": lambda: tiledsl.gemm(a, b),
        "gemm 64x64x64, c= given": lambda: tiledsl.gemm(a, b, c),
        "reduce sum axis=1 128x4096 (new output)": lambda: tiledsl.reduce(x, "sum", axis=1),
        "reduce sum axis=1 128x4096, out= given": lambda: tiledsl.reduce(x, "sum", axis=1, out=r),
        "transpose 64x64 (new output)": lambda: tiledsl.transpose(t),
        "transpose 64x64, out= given": lambda: tiledsl.transpose(t, out=tt),
        "(fake allocation of one 64x64 output)": lambda: fake_empty((64, 64)),
    }
    print(f"host-side µs per repeated call on a fake device (best of 5 × {args.calls} calls)")
    for name, fn in rows.items():
        fn()
        fn()
        us = min(timeit.repeat(fn, number=args.calls, repeat=5)) / args.calls * 1e6
        print(f"  {name:42s} {us:7.2f}")
    if args.profile:
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(args.calls):
            rows["gemm 64x64x64, c= given"]()
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(12)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Programmatic dependent launch (PDL, sm_90+; used here on Hopper): a kernel launched so that the GPU may set it up
while the kernel before it on the stream is still finishing. The dependent kernel waits in ``griddepcontrol.wait``
(PTX ISA, "griddepcontrol") until that grid has completed and its writes are visible, then reads them (CUDA C++
Programming Guide, "Programmatic Dependent Launch and Synchronization"). CuPy's kernel launch cannot ask for it;
the driver's ``cuLaunchKernelEx`` with the attribute ``CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`` does,
through the CUDA Python bindings (package ``cuda-bindings``, as TMA tensor maps use).

tiledsl launches GEMM split-K's second kernel (the sum of the K slices, :func:`tiledsl.gemm.emit.emit_splitk_reduce`)
this way on Hopper. The main kernels carry no ``griddepcontrol.launch_dependents``, so the sum's grid starts only once
every main block has exited; what overlaps is its launch processing with the main grid's completion and memory flush.
Measured on an H100 (``python benchmarks/gemv_dmma_proto.py --m 16 12 9 --variants base base_sum pdl_none pdl_start
pdl_loop``, 2026-12-05; ``benchmarks/results/pdl_h100_2026-12-05/``): the FP64 GEMV kernel and its split-K
sum, GPU alone, 0.835 / 0.838 / 0.839 of a 2 GiB copy's bandwidth at 16 / 12 / 9 rows launched plainly, 0.847 / 0.849
/ 0.851 with the sum as a dependent launch (geomean of 12 products of 64 MiB or more; the main kernel alone 0.871),
the bits the same. Where the trigger ``griddepcontrol.launch_dependents`` stands in the main kernel (nowhere, at its
start, after its main loop) changed nothing measurable, so the main kernels have none.

``TILEDSL_DEPENDENT_LAUNCH=0`` (or false, no, off) in the environment launches every kernel plainly and never imports
the bindings for it; :func:`set_enabled` (False) does so from the next launch on (launchers made while it is off stay
plain).
"""

from __future__ import annotations

import ctypes
import os
import re
import threading

from . import runtime
from .errors import LaunchError

__all__ = ["C_TYPES", "DependentLaunch", "enabled", "set_enabled", "usable"]

C_TYPES = {"int": ctypes.c_int32, "long long": ctypes.c_int64, "float": ctypes.c_float, "double": ctypes.c_double,
           "unsigned int": ctypes.c_uint32, "unsigned long long": ctypes.c_uint64}
"""C type of a scalar kernel parameter -> its ctypes type (pointers are ``ctypes.c_void_p``)."""

CC_RANGE = (90, 100)
"""Compute capabilities launched dependent: Hopper (cc 9.x), the first with programmatic dependent launch and the one
measured; later ones are launched plainly until measured (a report of the attribute breaking CUDA graph capture on
sm_120 exists)."""

MIN_DRIVER = 12030
"""The oldest CUDA driver (``cuDriverGetVersion``: 12.3) trusted with dependent launches inside CUDA graph capture."""

CU_STREAM_LEGACY = 1
"""The driver's handle of the legacy default stream: CuPy's stream 0 is that stream, while the CUDA Python bindings
read 0 as the per-thread default stream where ``CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM`` is set."""

_ENABLED = [os.environ.get("TILEDSL_DEPENDENT_LAUNCH", "1").strip().lower() not in ("0", "false", "no", "off")]
_USABLE: dict[int, bool] = {}  # device ordinal -> whether its launches may be dependent
_DRIVER: list = []


def enabled() -> bool:
    """Whether launchers that may launch dependent do (``TILEDSL_DEPENDENT_LAUNCH``: 0, false, no or off turn it off;
    :func:`set_enabled`)."""
    return _ENABLED[0]


def set_enabled(on: bool) -> bool:
    """Turn dependent launches on or off for every launcher, from its next launch on (a benchmark's A/B); returns
    the previous setting.

    Raises:
        TypeError: ``on`` is not a bool.
    """
    if not isinstance(on, bool):
        raise TypeError(f"set_enabled(on={on!r}) takes True or False")
    was, _ENABLED[0] = _ENABLED[0], on
    return was


def _driver():
    if not _DRIVER:
        from cuda.bindings import driver  # optional: the cuda12 / cuda13 extras install it

        _DRIVER.append(driver)
    return _DRIVER[0]


def usable(arch: str | None) -> bool:
    """Whether a kernel compiled for ``arch`` ("sm_90", "sm_90a") can be launched dependent on the current device: the
    architecture and the device are Hopper (:data:`CC_RANGE`), the driver is 12.3 or later and the CUDA Python
    bindings import (read once per device). False without a device, an architecture, or bindings that import."""
    number = re.match(r"sm_(\d+)", arch or "")
    if number is None or not CC_RANGE[0] <= int(number.group(1)) < CC_RANGE[1]:
        return False
    try:
        dev = runtime.device_id()
    except Exception:  # no device or driver to ask: launched plainly
        return False
    ok = _USABLE.get(dev)
    if ok is None:
        try:
            cuda = runtime.cupy_module().cuda
            ok = (CC_RANGE[0] <= int(cuda.Device(dev).compute_capability) < CC_RANGE[1]
                  and cuda.runtime.driverGetVersion() >= MIN_DRIVER)
            if ok:
                _driver()  # installed and importable (a broken or mismatched install: launched plainly)
        except Exception:
            ok = False
        _USABLE[dev] = ok
    return ok


class DependentLaunch:
    """One kernel launched with programmatic stream serialization (``cuLaunchKernelEx``), its arguments held in one
    C structure: the values known up front written once, the run-time ones (``slots``: their field and the index of
    their value in a call's ``values``) written by each launch, under a lock (the driver copies the arguments when
    the launch is enqueued, so the structure is free again when it returns).

    Args:
        fn: the loaded kernel's ``CUfunction`` handle (CuPy's ``Function.ptr``).
        name: the kernel's name (for errors).
        grid, block: blocks and threads per block (x, y, z); smem: dynamic shared memory, bytes.
        types: the ctypes type of each parameter, in order.
        fixed: {parameter index: value} of the parameters known up front.
        slots: (parameter index, index into a call's values, packer) of the run-time ones: ``packer`` turns a value
            into the scalar the C type holds, None for a pointer (NumPy's type, as the plain launch packs it: what
            that refuses, an int past the type's range, is refused alike, and what it takes, -0.0 or "2.0", taken).

    Raises:
        LaunchError: the driver refuses a launch (it names the kernel and the error).
    """

    __slots__ = ("_addr", "_args", "_attr", "_cfg", "_fn", "_lock", "_name", "_ptrs", "_slots", "_stream")

    def __init__(self, fn: int, name: str, grid: tuple[int, int, int], block: tuple[int, int, int], smem: int,
                 types: tuple, fixed: dict[int, int | float], slots: tuple[tuple[int, int, object], ...]) -> None:
        cu = _driver()
        args_t = type("KernelArgs", (ctypes.Structure,), {"_fields_": [(f"p{i}", t) for i, t in enumerate(types)]})
        self._args = args_t()
        for i, v in fixed.items():
            setattr(self._args, f"p{i}", v)
        base = ctypes.addressof(self._args)
        self._ptrs = (ctypes.c_void_p * len(types))(*[base + getattr(args_t, f"p{i}").offset
                                                      for i in range(len(types))])
        self._addr = ctypes.addressof(self._ptrs)
        self._slots = tuple((f"p{i}", j, pack) for i, j, pack in slots)
        self._attr = cu.CUlaunchAttribute()
        self._attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
        self._attr.value.programmaticStreamSerializationAllowed = 1
        cfg = self._cfg = cu.CUlaunchConfig()
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = block
        cfg.sharedMemBytes = smem
        cfg.attrs = [self._attr]
        cfg.numAttrs = 1
        self._fn = cu.CUfunction(fn)
        self._name = name
        self._stream = -1  # the stream address cfg.hStream holds
        self._lock = threading.Lock()

    def __call__(self, values: tuple, stream_ptr: int) -> None:
        """Launch on the stream at ``stream_ptr``, the run-time parameters from ``values`` (device pointers as ints,
        0 for nullptr; scalars as Python or NumPy numbers)."""
        cu = _driver()
        try:
            with self._lock:
                args = self._args
                for field, j, pack in self._slots:
                    v = values[j]
                    setattr(args, field, (0 if v is None else v) if pack is None else pack(v))  # -0.0 stays -0.0
                if stream_ptr != self._stream:
                    self._cfg.hStream = cu.CUstream(stream_ptr or CU_STREAM_LEGACY)  # CuPy's 0: the legacy stream
                    self._stream = stream_ptr
                (err,) = cu.cuLaunchKernelEx(self._cfg, self._fn, self._addr, 0)
        except Exception as exc:
            raise LaunchError(f"dependent launch (cuLaunchKernelEx) of {self._name} failed: {exc}") from exc
        if err != cu.CUresult.CUDA_SUCCESS:
            raise LaunchError(f"dependent launch (cuLaunchKernelEx) of {self._name} failed: {err.name}")

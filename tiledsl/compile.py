"""CUDA C source → :class:`Kernel` through NVRTC (via CuPy), with an in-memory and an on-disk cache.

Compiling needs only NVRTC, not a GPU: ``compile_source(src, name, arch="sm_90")`` works on a machine
with no driver: CuPy's ``cupy.cuda.nvrtc`` binding loads ``libnvrtc.so`` from the NVRTC wheel
(``nvidia-cuda-nvrtc-cu12`` or ``nvidia-cuda-nvrtc`` 13.x) without touching the CUDA runtime, and NVRTC
runs ptxas itself when asked for a cubin (``-arch=sm_90``); see ``docs/design.md``, "Compiling without a
GPU". A missing NVRTC raises :class:`~tiledsl.errors.ToolchainError` naming the wheel to install. The
resource report (registers, shared memory, spills, stack frame) is read from ptxas's ``-v`` log.

Cache keys hold everything that changes the binary: SHA-256 of the source, arch, options, the NVRTC
version and the cache format. Disk entries live under ``$TILEDSL_CACHE_DIR/kernels`` (default
``~/.cache/tiledsl/kernels``): ``<key>.cubin`` (the binary) and ``<key>.log`` (JSON: the ptxas log, the
kernel name and the cubin's SHA-256 and size). They are written under one ``filelock`` (``.entries.lock``) and
replaced atomically; a reader checks the hash, the ELF header and that the log reports the kernel's
registers, and recompiles (with one :class:`~tiledsl.errors.BadFileWarning`) when anything is off.
The in-memory cache is a bounded, lock-protected LRU (:class:`tiledsl.lru.LRU`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from .cubin import cubin_resources, elf_complete
from .errors import CompileError, LaunchError, ToolchainError
from .filestore import atomic_write, locked, read_json, warn_bad
from .lru import LRU

BASE_OPTIONS: tuple[str, ...] = ("--std=c++17", "--ptxas-options=-v", "-lineinfo")


@dataclass(frozen=True)
class KernelSource:
    """What an emitter returns: the source and how to launch it.

    Attributes:
        name: the ``extern "C"`` kernel name.
        source: CUDA C text.
        block: threads per block (x, y, z).
        dynamic_smem_bytes: dynamic shared memory per block.
        arch_suffix: "a" when the kernel uses architecture-specific instructions (wgmma, setmaxnreg:
            compiled for sm_90a instead of sm_90), else "".
        setmaxnreg_demand: registers per block the kernel's warpgroups hold after their ``setmaxnreg``
            (sum over warpgroups of 128 × the target), or 0 when it uses none. ``setmaxnreg.inc`` waits until
            the block's register pool (ptxas's allocation × threads) can grant it, so a demand above the pool
            would hang forever: :func:`compile_source` refuses such a kernel (PTX ISA, "setmaxnreg").
    """

    name: str
    source: str
    block: tuple[int, int, int]
    dynamic_smem_bytes: int = 0
    arch_suffix: str = ""
    setmaxnreg_demand: int = 0


@dataclass(frozen=True)
class Kernel:
    """A compiled kernel and its resource report.

    Attributes:
        name, source, block, dynamic_smem_bytes: as in :class:`KernelSource`.
        arch: the architecture compiled for ("sm_90").
        options: NVRTC options used.
        cubin: the binary.
        registers: registers per thread (ptxas).
        static_smem_bytes: static shared memory (ptxas).
        spill_bytes: spill stores + spill loads (ptxas); 0 for a kernel that keeps its tile in registers.
        stack_bytes: stack frame bytes (local memory).
        log: the full NVRTC/ptxas log.
        op, schedule: what it was generated from (may be None for raw sources).
    """

    name: str
    source: str
    block: tuple[int, int, int]
    dynamic_smem_bytes: int
    arch: str
    options: tuple[str, ...]
    cubin: bytes = field(repr=False)
    registers: int
    static_smem_bytes: int
    spill_bytes: int
    stack_bytes: int
    log: str = field(repr=False)
    op: object = None
    schedule: object = None

    @property
    def smem_bytes(self) -> int:
        """Shared memory per block: static + dynamic."""
        return self.static_smem_bytes + self.dynamic_smem_bytes

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    def resources(self) -> dict:
        """Registers, shared memory, spills and stack as a dict."""
        return {"registers": self.registers, "smem_bytes": self.smem_bytes,
                "spill_bytes": self.spill_bytes, "stack_bytes": self.stack_bytes}

    def function(self):
        """The loaded ``cupy.cuda.function.Function`` on the current device (loaded once per device)."""
        return _load(self)


# The NVRTC wheel that matches each CuPy build's CUDA major version (``pip install`` spelling); the
# 13.0 pin of the cuda13 extra is the compiler the shipped tuned schedules were measured with.
NVRTC_PACKAGES = {12: "nvidia-cuda-nvrtc-cu12", 13: "nvidia-cuda-nvrtc==13.0.*"}


def cupy_cuda_major() -> int | None:
    """The CUDA major version CuPy was built for (12 for cupy-cuda12x, 13 for cupy-cuda13x), read without
    a GPU or driver; None when CuPy is missing or does not say."""
    try:
        from cupy_backends.cuda.api import runtime
    except ImportError:
        return None
    try:
        return int(runtime._getCUDAMajorVersion())
    except Exception:  # an older CuPy without the private helper
        return None


def nvrtc_problem() -> str | None:
    """Why NVRTC cannot compile here (one line naming the package to install), or None when it can.

    Checks that CuPy imports and that it can load NVRTC (``nvrtc.getVersion()``); no GPU is needed.
    """
    try:
        import cupy  # noqa: F401
    except ImportError as exc:
        return (f"CuPy is not installed ({exc}): pip install -e '.[cuda12]' (CUDA 12 driver) or "
                "-e '.[cuda13]' (CUDA 13 driver), i.e. cupy-cuda12x or cupy-cuda13x plus its NVRTC wheel")
    try:
        from cupy.cuda import nvrtc

        nvrtc.getVersion()
    except Exception as exc:
        major = cupy_cuda_major()
        pkg = NVRTC_PACKAGES.get(major, "the NVRTC wheel of your CUDA version")
        return (f"NVRTC (libnvrtc.so{'.' + str(major) if major else ''}) cannot be loaded by CuPy "
                f"{getattr(cupy, '__version__', '?')} ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
                f"install it: pip install '{pkg}'")
    return None


def nvrtc_version() -> tuple[int, int]:
    """NVRTC (major, minor) that CuPy uses.

    Raises:
        ToolchainError: CuPy or NVRTC is missing (the message names the package to install).
    """
    global _NVRTC_VERSION
    if _NVRTC_VERSION is None:
        why = nvrtc_problem()
        if why is not None:
            raise ToolchainError(why)
        from cupy.cuda import nvrtc

        _NVRTC_VERSION = tuple(nvrtc.getVersion())
        major = cupy_cuda_major()
        if major is not None and major != _NVRTC_VERSION[0]:
            import warnings

            warnings.warn(
                f"tiledsl: CuPy is built for CUDA {major} but loads NVRTC {_NVRTC_VERSION[0]}.{_NVRTC_VERSION[1]} "
                f"(another package, torch for one, installed that NVRTC wheel): kernels compile with NVRTC "
                f"{_NVRTC_VERSION[0]}.{_NVRTC_VERSION[1]}, whose cubins a CUDA {major} driver may refuse, and tuned "
                f"records are matched against it; install matching versions (pip install "
                f"'{NVRTC_PACKAGES.get(major, 'the NVRTC wheel of CUDA ' + str(major))}', or the CuPy of CUDA "
                f"{_NVRTC_VERSION[0]})", RuntimeWarning, stacklevel=2)
    return _NVRTC_VERSION


_NVRTC_VERSION: tuple[int, int] | None = None


def cache_dir() -> Path:
    """Directory of the on-disk kernel cache (``$TILEDSL_CACHE_DIR`` or ``~/.cache/tiledsl``)."""
    return Path(os.environ.get("TILEDSL_CACHE_DIR", Path.home() / ".cache" / "tiledsl")) / "kernels"


# Bump when the disk entry's layout changes: entries of other formats are never read.
CACHE_FORMAT = 2

_MEM_CACHE: LRU = LRU(maxsize=1024)


def compile_source(ks: KernelSource, arch: str, extra_options: tuple[str, ...] = (),
                   op: object = None, schedule: object = None) -> Kernel:
    """Compile ``ks`` for ``arch`` (e.g. "sm_90") with NVRTC; cached in memory and on disk.

    A disk entry that fails its check (hash, ELF header, ptxas report) is recompiled and replaced.

    Raises:
        CompileError: NVRTC rejected the source (the error holds source, options and log), or the
            kernel's ``setmaxnreg`` targets exceed the registers ptxas allocated (it would never finish).
    """
    if ks.arch_suffix and not arch.endswith(ks.arch_suffix):
        arch += ks.arch_suffix  # sm_90 -> sm_90a for wgmma
    options = (*BASE_OPTIONS, f"-arch={arch}", *extra_options)
    ver = nvrtc_version()
    key = hashlib.sha256(
        json.dumps([ks.source, ks.name, arch, options, ver, CACHE_FORMAT]).encode()).hexdigest()[:32]
    hit = _MEM_CACHE.get(key)
    if hit is None:
        hit = _disk_get(key, ks.name)
        if hit is None:
            hit = _nvrtc(ks, options)
            _disk_put(key, ks.name, *hit)
        _MEM_CACHE.put(key, hit)
    cubin, log = hit
    report = resource_report(log, cubin, ks.name)
    if report is None:
        raise CompileError(f"{ks.name}: neither ptxas's -v log nor the cubin reports its registers",
                           ks.source, options, log)
    threads = ks.block[0] * ks.block[1] * ks.block[2]
    if ks.setmaxnreg_demand > report["registers"] * threads:
        raise CompileError(
            f"{ks.name}: its setmaxnreg targets need {ks.setmaxnreg_demand} registers per block but ptxas "
            f"allocated {report['registers']} × {threads} threads = {report['registers'] * threads}; "
            "setmaxnreg.inc would wait forever", ks.source, options, log)
    return Kernel(name=ks.name, source=ks.source, block=ks.block,
                  dynamic_smem_bytes=ks.dynamic_smem_bytes, arch=arch, options=options,
                  cubin=cubin, log=log, op=op, schedule=schedule, **report)


def clear_memory_cache() -> None:
    """Forget the in-memory compiled binaries (the disk cache stays)."""
    _MEM_CACHE.clear()


def _nvrtc(ks: KernelSource, options: tuple[str, ...]) -> tuple[bytes, str]:
    from cupy.cuda import nvrtc

    prog = nvrtc.createProgram(ks.source, f"{ks.name}.cu", [], [])
    try:
        try:
            nvrtc.compileProgram(prog, list(options))
        except nvrtc.NVRTCError as exc:
            log = nvrtc.getProgramLog(prog)
            raise CompileError(f"NVRTC failed to compile {ks.name}: {exc}", ks.source, options, log) from None
        return elf_complete(nvrtc.getCUBIN(prog)), nvrtc.getProgramLog(prog)  # whole: CuPy drops the last byte
    finally:
        nvrtc.destroyProgram(prog)


def _entry_problem(meta: object, cubin: bytes, name: str) -> str | None:
    """What is wrong with a disk entry (its ``.log`` JSON and ``.cubin`` bytes), or None."""
    if not isinstance(meta, dict):
        return f"the .log is not a JSON object of cache format {CACHE_FORMAT}"
    if meta.get("format") != CACHE_FORMAT:
        return f"cache format {meta.get('format')!r}, this tiledsl reads {CACHE_FORMAT}"
    if meta.get("name") != name or not isinstance(meta.get("log"), str):
        return "the .log names another kernel or holds no ptxas log"
    if len(cubin) != meta.get("cubin_bytes") or hashlib.sha256(cubin).hexdigest() != meta.get("cubin_sha256"):
        return (f"the .cubin ({len(cubin)} bytes) does not match the SHA-256 and size recorded when it was "
                f"written ({meta.get('cubin_bytes')} bytes): truncated or overwritten")
    if not cubin.startswith(b"\x7fELF"):
        return "the .cubin is not an ELF binary"
    if resource_report(meta["log"], cubin, name) is None:
        return f"neither the ptxas log nor the cubin reports a register count for {name}"
    return None


def _disk_read(d: Path, key: str, name: str) -> tuple[tuple[bytes, str] | None, str | None]:
    meta, problem = read_json(d / f"{key}.log", "kernel-cache .log (JSON)")
    try:
        cubin = (d / f"{key}.cubin").read_bytes()
    except FileNotFoundError:
        cubin = None
    except OSError as exc:
        return None, f"the .cubin cannot be read ({exc})"
    if meta is None and problem is None and cubin is None:
        return None, None  # a plain miss
    if problem is not None:
        return None, problem
    if cubin is None:
        return None, "the .cubin is missing"
    if meta is None:
        return None, "the .log is missing"
    problem = _entry_problem(meta, cubin, name)
    return (None, problem) if problem else ((cubin, meta["log"]), None)


def _disk_get(key: str, name: str) -> tuple[bytes, str] | None:
    """The verified (cubin, log) of ``key``, or None (a miss, or a bad entry: warned, then recompiled)."""
    d = cache_dir()
    hit, problem = _disk_read(d, key, name)
    if problem is not None:
        try:  # perhaps another process is writing this entry right now: look again once it is done
            with locked(d / ".entries"):
                hit, problem = _disk_read(d, key, name)
        except Exception:
            pass
    if problem is None:  # a miss (None), or the entry; one written before _nvrtc completed its image gets its byte
        return None if hit is None else (elf_complete(hit[0]), hit[1])
    warn_bad(d / f"{key}.cubin", f"bad kernel-cache entry: {problem}", "recompiling it")
    return None


def _disk_put(key: str, name: str, cubin: bytes, log: str) -> None:
    d = cache_dir()
    meta = {"format": CACHE_FORMAT, "name": name, "log": log, "cubin_bytes": len(cubin),
            "cubin_sha256": hashlib.sha256(cubin).hexdigest()}
    try:
        d.mkdir(parents=True, exist_ok=True)
        with locked(d / ".entries"):
            atomic_write(d / f"{key}.cubin", cubin)
            atomic_write(d / f"{key}.log", json.dumps(meta))
    except Exception:
        pass  # a read-only home or a lock timeout is not an error: the in-memory cache still works


_RE = {
    "registers": re.compile(r"Used (\d+) registers"),
    "static_smem_bytes": re.compile(r"(\d+) bytes smem"),
    "spill_store": re.compile(r"(\d+) bytes spill stores"),
    "spill_load": re.compile(r"(\d+) bytes spill loads"),
    "stack_bytes": re.compile(r"(\d+) bytes stack frame"),
}


def resource_report(log: str, cubin: bytes, name: str) -> dict | None:
    """Registers, static shared memory, spill bytes and stack frame of kernel ``name``: from ptxas's ``-v``
    report in ``log`` when it has one, else from the cubin (:func:`tiledsl.cubin.cubin_resources`; spill
    bytes are then bounded by the stack frame, so a kernel with a frame counts as spilling); None when
    neither records a register count."""
    start = log.find(f"'{name}'")
    if _RE["registers"].search(log[start:] if start >= 0 else log):
        return parse_ptxas_log(log, name)
    res = cubin_resources(cubin, name)
    if res is None:
        return None
    return {**res, "spill_bytes": res["stack_bytes"]}


def parse_ptxas_log(log: str, name: str) -> dict:
    """Registers, static shared memory, spill bytes and stack frame of kernel ``name`` from a ptxas log."""
    start = log.find(f"'{name}'")
    text = log[start:] if start >= 0 else log

    def first(key: str) -> int:
        m = _RE[key].search(text)
        return int(m.group(1)) if m else 0

    return {"registers": first("registers"), "static_smem_bytes": first("static_smem_bytes"),
            "spill_bytes": first("spill_store") + first("spill_load"), "stack_bytes": first("stack_bytes")}


_LOADED: LRU = LRU(maxsize=4096)


def _load(k: Kernel):
    import cupy

    try:
        dev = cupy.cuda.Device().id
    except Exception as exc:
        raise LaunchError(f"no CUDA device available to load {k.name}: {exc}") from exc
    key = (dev, k.name, hash(k.cubin))
    fn = _LOADED.get(key)
    if fn is None:
        mod = cupy.cuda.function.Module()
        mod.load(k.cubin)
        fn = mod.get_function(k.name)
        if k.smem_bytes > 48 * 1024:  # static + dynamic above the 48 KB default: opt in (CUDA guide, "Shared Memory")
            from cupy.cuda import driver

            driver.funcSetAttribute(fn.ptr, driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                    k.dynamic_smem_bytes)
        _LOADED.put(key, (mod, fn))
        return fn
    return fn[1]

"""Device facts: the limits a schedule is validated against and the ceilings the cost model uses.

A :class:`Target` comes from the current GPU (``Target.current()``, read through CuPy's runtime
properties) or, with no GPU present, from the table of known GPUs (``Target.known("H200")``).
Figures from the table cite their source; figures read off the device say ``"device"``.

Sources of the table: NVIDIA H100/H200/A100 datasheets (HBM bandwidth, clocks) and the CUDA C++
Programming Guide, "Technical Specifications per Compute Capability" (shared memory, registers,
threads per SM, for compute capability 8.0 and 9.0).
"""

from __future__ import annotations

import functools
import re
from dataclasses import asdict, dataclass, replace

from .errors import LaunchError, SpecError, SpecTypeError

SMEM_BANKS = 32
"""Shared-memory banks per SM (CUDA C++ Programming Guide, "Shared Memory", cc 5.x and later)."""
SMEM_BANK_BYTES = 4
"""Bytes each bank delivers per clock."""
TC_KEY = "tc16_flops_per_s"
"""Key of a measured dense 16-bit tensor-core rate in ``Target.measured`` (written by calibrate)."""


@dataclass(frozen=True)
class Ceiling:
    """One roof of the roofline.

    Attributes:
        key: ``"fp32_flops_per_s"``, ``"hbm_bytes_per_s"``, ``"l2_bytes_per_s"`` or ``"smem_bytes_per_s"``.
        value: the rate (FLOP/s or bytes/s).
        unit: ``"FLOP/s"`` or ``"bytes/s"``.
        source: where it comes from ("measured: …", "datasheet …", "estimate …", "derived …").
        measured: True when measured on a device, False for datasheet figures and estimates.
    """

    key: str
    value: float
    unit: str
    source: str
    measured: bool


@dataclass(frozen=True)
class Target:
    """One GPU (or one architecture when no GPU is present).

    Attributes:
        name: marketing name ("NVIDIA H200") or table key.
        arch: NVRTC architecture, e.g. "sm_90".
        sm_count: streaming multiprocessors.
        smem_per_block_optin_bytes: largest dynamic shared memory a block may opt into.
        smem_per_sm_bytes: shared memory per SM.
        regs_per_sm: 32-bit registers per SM.
        regs_per_thread_max: register limit of one thread.
        max_threads_per_sm: resident threads per SM.
        max_blocks_per_sm: resident blocks per SM.
        max_threads_per_block: threads per block.
        l2_bytes: L2 cache size.
        clock_hz: SM boost clock.
        fp32_lanes_per_sm: FP32 FMA results per clock per SM (CUDA C++ Programming Guide, "Arithmetic
            Instructions": 64 on cc 8.0, 128 on cc 8.6, 8.9 and 9.0).
        hbm_bytes_per_s: device-memory bandwidth (datasheet unless ``source`` says measured).
        source: where the figures came from ("device" or the datasheet/guide).
        l2_bytes_per_s: L2 → SM bandwidth estimate; 0 = unknown (:meth:`ceilings` then derives one).
            NVIDIA publishes no L2 bandwidth; table figures are estimates unless measured.
        smem_bytes_per_s: shared-memory bandwidth of the whole GPU; 0 = derive it as 32 banks × 4 bytes
            per clock per SM × SMs × clock (CUDA C++ Programming Guide, "Shared Memory" for cc 5.x+).
        measured: figures measured on this device by :func:`tiledsl.calibrate` (or recorded from a
            measurement), as ``(key, value, note)`` with key one of ``"hbm_bytes_per_s"``,
            ``"l2_bytes_per_s"``, ``"smem_bytes_per_s"``, ``"fp32_flops_per_s"``. A measured figure wins
            over the datasheet one in :meth:`ceilings`.
    """

    name: str
    arch: str
    sm_count: int
    smem_per_block_optin_bytes: int
    smem_per_sm_bytes: int
    regs_per_sm: int = 65536
    regs_per_thread_max: int = 255
    max_threads_per_sm: int = 2048
    max_blocks_per_sm: int = 32
    max_threads_per_block: int = 1024
    l2_bytes: int = 50 * 1024 * 1024
    clock_hz: float = 1.98e9
    fp32_lanes_per_sm: int = 128
    hbm_bytes_per_s: float = 3.35e12
    source: str = "datasheet"
    l2_bytes_per_s: float = 0.0
    smem_bytes_per_s: float = 0.0
    measured: tuple[tuple[str, float, str], ...] = ()

    @property
    def peak_fp32_flops(self) -> float:
        """Peak FP32 FLOP/s = SMs × FP32 lanes × 2 (FMA) × clock."""
        return self.sm_count * self.fp32_lanes_per_sm * 2 * self.clock_hz

    @property
    def peak_tc16_flops(self) -> float:
        """Peak dense float16/bfloat16 tensor-core FLOP/s (float32 accumulation) = SMs × FLOP per clock per
        SM × :attr:`clock_hz`, with 4096 FLOP/clock/SM on cc 9.x and 2048 on cc 8.x (A100 datasheet: 312 TFLOP/s
        over 108 SMs at 1.41 GHz). At the H100/H200 boost clock of 1.98 GHz this is 1070.5 TFLOP/s; the H100 SXM
        datasheet's 989.4 TFLOP/s is the same SMs at 1.83 GHz. Reports name it "derived", not "datasheet"."""
        per_clock = 4096 if self.cc >= 90 else 2048 if self.cc >= 80 else 0
        return self.sm_count * per_clock * self.clock_hz

    def tensor_core_ceiling(self, precision: str = "ieee") -> tuple[float, str]:
        """(dense tensor-core FLOP/s, source): the 16-bit rate measured by ``tiledsl.calibrate`` (key
        :data:`TC_KEY` in :attr:`measured`) or :attr:`peak_tc16_flops`; for ``precision="tf32"`` (float32 read
        as tf32) half of it, Hopper's dense TF32 rate (H100 SXM datasheet: 494.7 vs 989.4 TFLOP/s)."""
        rate, src = self.peak_tc16_flops, (f"derived: {self.sm_count} SMs × dense 16-bit tensor-core FLOP/clock × "
                                           f"{self.clock_hz / 1e9:.2f} GHz (Target.peak_tc16_flops)")
        for key, value, note in self.measured:
            if key == TC_KEY:
                rate, src = value, f"measured: {note}"
        if precision == "tf32":
            return rate / 2, src + ", halved for tf32"
        return rate, src

    @property
    def cc(self) -> int:
        """Compute capability as an integer, e.g. 90."""
        return int(self.arch.split("_")[1].rstrip("a"))

    def to_dict(self) -> dict:
        return asdict(self)

    def ceilings(self) -> dict[str, Ceiling]:
        """The roofs of the roofline: FP32 rate and HBM, L2, shared-memory bandwidth, each with its source.

        A figure in :attr:`measured` wins; otherwise the datasheet/table figure; otherwise a derived
        estimate (L2: 2 × HBM when the table has none; shared memory: 128 bytes per clock per SM).

        Returns:
            ``{"fp32_flops_per_s", "hbm_bytes_per_s", "l2_bytes_per_s", "smem_bytes_per_s"}`` →
            :class:`Ceiling` (value, unit, source, measured flag).
        """
        meas = {k: (v, note) for k, v, note in self.measured}
        smem_derived = self.sm_count * SMEM_BANKS * SMEM_BANK_BYTES * self.clock_hz
        base = {
            "fp32_flops_per_s": (self.peak_fp32_flops, "FLOP/s",
                                 f"datasheet: {self.sm_count} SMs × {self.fp32_lanes_per_sm} FP32 lanes × 2 "
                                 f"× {self.clock_hz / 1e9:.3g} GHz"),
            "hbm_bytes_per_s": (self.hbm_bytes_per_s, "bytes/s", f"datasheet ({self.source})"),
            "l2_bytes_per_s": ((self.l2_bytes_per_s, "bytes/s", "estimate (no vendor figure)")
                               if self.l2_bytes_per_s else
                               (2.0 * self.hbm_bytes_per_s, "bytes/s", "estimate: 2 × HBM (no vendor figure)")),
            "smem_bytes_per_s": ((self.smem_bytes_per_s, "bytes/s", "table")
                                 if self.smem_bytes_per_s else
                                 (smem_derived, "bytes/s",
                                  "derived: 32 banks × 4 B per clock per SM × SMs × clock (CUDA guide)")),
        }
        out = {}
        for key, (value, unit, src) in base.items():
            if key in meas:
                out[key] = Ceiling(key, meas[key][0], unit, f"measured: {meas[key][1]}", True)
            else:
                out[key] = Ceiling(key, value, unit, src, False)
        return out

    def with_measured(self, figures: dict[str, tuple[float, str]]) -> Target:
        """A copy whose :attr:`measured` holds ``figures`` (key → (value, note)) over earlier ones."""
        keep = tuple(m for m in self.measured if m[0] not in figures)
        return replace(self, measured=keep + tuple((k, float(v), n) for k, (v, n) in sorted(figures.items())))

    @staticmethod
    def known(name: str) -> Target:
        """A GPU from the known-GPU table ("H100", "H200", "A100"), or an arch ("sm_90", "sm_80").

        Raises:
            SpecError: the name is not in the table.
        """
        if not isinstance(name, str):
            raise SpecError(f"device={name!r} must be a GPU name such as 'H200' or an arch such as 'sm_90'")
        key = name.upper().replace("NVIDIA ", "").replace("-", "").replace(" ", "")
        for k, t in _KNOWN.items():  # "H200", "NVIDIA H200", "H100 SXM5", "A100-SXM4-80GB"; not "H2000"
            if re.fullmatch(rf"{k}(SXM\d*|PCIE|NVL|\d+GB)*", key):
                return t
        for t in _KNOWN.values():
            if name.lower() == t.arch:
                return t
        raise SpecError(f"device={name!r} is not in the known-GPU table; known: {', '.join(_KNOWN)}, "
                        f"or an arch: {', '.join(sorted({t.arch for t in _KNOWN.values()}))}")

    @staticmethod
    def current() -> Target:
        """The current CUDA device, read through CuPy.

        Raises:
            LaunchError: no CUDA device or driver is available.
        """
        try:
            import cupy
            dev = cupy.cuda.Device()
            return _from_device(dev.id)
        except LaunchError:
            raise
        except Exception as exc:  # cupy missing, no driver, no device
            raise LaunchError(no_gpu_message(exc)) from exc

    @staticmethod
    def known_names() -> tuple[str, ...]:
        """Names :meth:`known` accepts: the known GPUs ("H200", ...) and their arches ("sm_90", ...)."""
        return (*_KNOWN, *sorted({t.arch for t in _KNOWN.values()}, reverse=True))


def no_gpu_message(exc: BaseException) -> str:
    """One message for "this machine cannot run kernels", from CuPy's exception ``exc``.

    CuPy's ``cudaErrorInsufficientDriver`` ("CUDA driver version is insufficient") is also what a machine
    with no NVIDIA driver at all reports; the message says so instead of pointing at a driver upgrade.
    """
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, ImportError):
        why = f"CuPy is not installed ({exc}); pip install -e '.[cuda12]' or -e '.[cuda13]'"
    elif "InsufficientDriver" in text or "NoDevice" in text or "no CUDA-capable device" in text:
        why = ("no CUDA GPU or NVIDIA driver is present on this machine (CuPy: " + text + "; on a machine "
               "that does have a GPU this means its driver is older than CuPy's CUDA version)")
    else:
        why = f"no usable CUDA GPU ({text})"
    return (f"{why}. Running a kernel needs a GPU; without one, compile with tiledsl.compile(op, schedule, "
            f"arch='sm_90') and model with tiledsl.explain(op, schedule, device='H200')")


def require_gpu() -> Target:
    """The current GPU as a :class:`Target`; call it first in a script that runs kernels.

    Raises:
        LaunchError: no CUDA GPU or driver is present (the message says how to compile without one).
    """
    return Target.current()


def check_device_type(device: object) -> None:
    """Raise SpecTypeError unless ``device`` is None, a GPU name or a :class:`Target` (what every ``device=`` takes)."""
    if device is not None and not isinstance(device, (str, Target)):
        raise SpecTypeError(f"device must be a GPU name such as 'H200' or a tiledsl.Target, got {device!r}")


def resolve(device: str | Target | None = None, arch: str | None = None) -> Target:
    """A Target from a device name, a Target, an arch, or (all None) the current GPU."""
    if isinstance(device, Target):
        return device
    if device is not None:
        return Target.known(device)
    if arch is not None:
        if not isinstance(arch, str):
            raise SpecError(f"arch={arch!r} must be a string such as 'sm_90'")
        try:
            t = Target.current()
            if t.arch == arch.lower():
                return t
        except LaunchError:
            pass
        arches = sorted({t.arch for t in _KNOWN.values()})
        if arch.lower() not in arches:
            hint = (" (give arch='sm_90': kernels that need sm_90a, wgmma and TMA, are compiled for it on their own)"
                    if arch.lower() == "sm_90a" else "")
            raise SpecError(f"arch={arch!r} is not supported; supported: {', '.join(arches)}{hint}")
        return Target.known(arch.lower())
    return Target.current()


def gpu_available() -> bool:
    """True when CuPy can see a CUDA device."""
    try:
        Target.current()
        return True
    except LaunchError:
        return False


@functools.cache
def _from_device(device_id: int) -> Target:
    import cupy

    p = cupy.cuda.runtime.getDeviceProperties(device_id)
    arch = f"sm_{p['major']}{p['minor']}"
    name = p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"])
    base = None
    for k, t in _KNOWN.items():
        if k in name.upper().replace(" ", ""):
            base = t
    hbm = (base.hbm_bytes_per_s if base else
           2.0 * p.get("memoryClockRate", 0) * 1e3 * p.get("memoryBusWidth", 0) / 8)
    return Target(
        name=name,
        arch=arch,
        sm_count=p["multiProcessorCount"],
        smem_per_block_optin_bytes=p["sharedMemPerBlockOptin"],
        smem_per_sm_bytes=p["sharedMemPerMultiprocessor"],
        regs_per_sm=p["regsPerMultiprocessor"],
        max_threads_per_sm=p["maxThreadsPerMultiProcessor"],
        max_blocks_per_sm=p.get("maxBlocksPerMultiProcessor", 32),
        max_threads_per_block=p["maxThreadsPerBlock"],
        l2_bytes=p["l2CacheSize"],
        clock_hz=(base.clock_hz if base else p.get("clockRate", 1_500_000) * 1e3),
        fp32_lanes_per_sm=fp32_lanes(p["major"], p["minor"]),
        hbm_bytes_per_s=hbm,
        source="device (limits); datasheet (clock, HBM)" if base else "device",
        l2_bytes_per_s=base.l2_bytes_per_s if base else 0.0,
        smem_bytes_per_s=base.smem_bytes_per_s if base else 0.0,
        measured=base.measured if base else (),
    )


def fp32_lanes(major: int, minor: int) -> int:
    """FP32 FMA results per clock per SM of compute capability major.minor (CUDA C++ Programming Guide,
    "Arithmetic Instructions", throughput table): 64 on cc 6.0, 7.x and 8.0 (A100), 128 on the others from 5.0
    (cc 8.6, 8.9, 9.0 among them)."""
    return 64 if major == 7 or (major, minor) in ((6, 0), (8, 0)) else 128


_H100 = Target(
    name="H100", arch="sm_90", sm_count=132, smem_per_block_optin_bytes=227 * 1024,
    smem_per_sm_bytes=228 * 1024, l2_bytes=50 * 1024 * 1024, clock_hz=1.98e9,
    hbm_bytes_per_s=3.35e12, source="datasheet (H100 SXM) + CUDA guide cc 9.0",
)
_KNOWN: dict[str, Target] = {
    "H200": replace(_H100, name="H200", l2_bytes=60 * 1024 * 1024, hbm_bytes_per_s=4.8e12,
                    source="datasheet (H200 SXM) + CUDA guide cc 9.0",
                    measured=(("hbm_bytes_per_s", 4.22e12,
                               "device-to-device copy on the project's H200, 2026-11-29 (docs/design.md)"),)),
    "H100": _H100,
    "A100": Target(
        name="A100", arch="sm_80", sm_count=108, smem_per_block_optin_bytes=163 * 1024,
        smem_per_sm_bytes=164 * 1024, l2_bytes=40 * 1024 * 1024, clock_hz=1.41e9, fp32_lanes_per_sm=64,
        hbm_bytes_per_s=2.039e12, source="datasheet (A100 SXM 80GB) + CUDA guide cc 8.0",
    ),
}

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
from dataclasses import asdict, dataclass, replace

from .errors import LaunchError, SpecError


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
        fp32_lanes_per_sm: FP32 FMA lanes per SM (128 on sm_80 and sm_90).
        hbm_bytes_per_s: device-memory bandwidth (datasheet unless ``source`` says measured).
        source: where the figures came from ("device" or the datasheet/guide).
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

    @property
    def peak_fp32_flops(self) -> float:
        """Peak FP32 FLOP/s = SMs × FP32 lanes × 2 (FMA) × clock."""
        return self.sm_count * self.fp32_lanes_per_sm * 2 * self.clock_hz

    @property
    def cc(self) -> int:
        """Compute capability as an integer, e.g. 90."""
        return int(self.arch.split("_")[1].rstrip("a"))

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def known(name: str) -> Target:
        """A GPU from the known-GPU table ("H100", "H200", "A100"), or an arch ("sm_90", "sm_80").

        Raises:
            SpecError: the name is not in the table.
        """
        key = name.upper().replace("NVIDIA ", "").replace("-", "").replace(" ", "")
        for k, t in _KNOWN.items():
            if key == k or key.startswith(k):
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
            raise LaunchError(f"no CUDA device available ({type(exc).__name__}: {exc})") from exc


def resolve(device: str | Target | None = None, arch: str | None = None) -> Target:
    """A Target from a device name, a Target, an arch, or (all None) the current GPU."""
    if isinstance(device, Target):
        return device
    if device is not None:
        return Target.known(device)
    if arch is not None:
        try:
            t = Target.current()
            if t.arch == arch:
                return t
        except LaunchError:
            pass
        return Target.known(arch)
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
        fp32_lanes_per_sm=128 if p["major"] >= 8 else 64,
        hbm_bytes_per_s=hbm,
        source="device (limits); datasheet (clock, HBM)" if base else "device",
    )


_H100 = Target(
    name="H100", arch="sm_90", sm_count=132, smem_per_block_optin_bytes=227 * 1024,
    smem_per_sm_bytes=228 * 1024, l2_bytes=50 * 1024 * 1024, clock_hz=1.98e9,
    hbm_bytes_per_s=3.35e12, source="datasheet (H100 SXM) + CUDA guide cc 9.0",
)
_KNOWN: dict[str, Target] = {
    "H200": replace(_H100, name="H200", l2_bytes=60 * 1024 * 1024, hbm_bytes_per_s=4.8e12,
                    source="datasheet (H200 SXM) + CUDA guide cc 9.0"),
    "H100": _H100,
    "A100": Target(
        name="A100", arch="sm_80", sm_count=108, smem_per_block_optin_bytes=163 * 1024,
        smem_per_sm_bytes=164 * 1024, l2_bytes=40 * 1024 * 1024, clock_hz=1.41e9,
        hbm_bytes_per_s=2.039e12, source="datasheet (A100 SXM 80GB) + CUDA guide cc 8.0",
    ),
}

"""Measure the device's ceilings with microbenchmarks tiledsl generates itself, and cache them.

Four kernels, emitted here as CUDA C and compiled with NVRTC like every tiledsl kernel (the roofs of the
roofline are the platform's π and β; ``docs/design.md``, "Background"):

* ``copy``: a float4 grid-stride copy of a buffer 8 × the L2 → HBM bytes/s (read + write);
* ``l2_read``: every block reads a buffer a quarter of the L2 with ``ld.global.cg`` (L2 only, no L1) →
  L2 → SM bytes/s;
* ``smem_read``: conflict-free float4 reads of a shared-memory array → shared-memory bytes/s;
* ``fma``: 8 independent FMA chains per thread → FP32 FLOP/s (and so the clock under load).

Results are cached per device as JSON under ``$TILEDSL_CACHE_DIR/calibration`` (default
``~/.cache/tiledsl/calibration``), written under a file lock and replaced atomically;
:func:`load_calibration` applies them to a Target, each figure marked "measured" with date and method
(see :meth:`tiledsl.Target.ceilings`). A cache file that fails :func:`calibration_problem` (truncated,
wrong shape, a figure that is not a positive finite number, another device) is skipped with one
:class:`~tiledsl.errors.BadFileWarning`, and :func:`calibrate` measures again.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
from pathlib import Path

from .compile import KernelSource, compile_source
from .filestore import atomic_write, locked, positive_number, read_json, warn_bad
from .runtime import launch
from .target import Target
from .timing import time_gpu

# The figures a calibration file may hold (the keys of Target.ceilings()).
FIGURES = ("fp32_flops_per_s", "hbm_bytes_per_s", "l2_bytes_per_s", "smem_bytes_per_s")

_COPY = r'''
extern "C" __global__ void tiledsl_cal_copy(const float4* __restrict__ in, float4* __restrict__ out, long long n4) {
  // grid-stride float4 copy: 16-byte loads and stores, coalesced
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += (long long)gridDim.x * blockDim.x)
    out[i] = in[i];
}
'''

_L2 = r'''
extern "C" __global__ void tiledsl_cal_l2_read(const float4* __restrict__ in, float* __restrict__ out,
                                               int mask4, int iters) {
  // each thread reads float4s from an L2-resident buffer with ld.global.cg (cache in L2, not L1)
  float acc = 0.f;
  int i = (blockIdx.x * blockDim.x + threadIdx.x) & mask4;
  const int step = gridDim.x * blockDim.x;
  for (int it = 0; it < iters; ++it) {
    float a, b, c, d;
    asm volatile("ld.global.cg.v4.f32 {%0,%1,%2,%3}, [%4];" : "=f"(a), "=f"(b), "=f"(c), "=f"(d) : "l"(in + i));
    acc += (a + b) + (c + d);
    i = (i + step) & mask4;
  }
  if (acc == 1.2345f) out[0] = acc;  // keeps the loads alive
}
'''

_SMEM = r'''
extern "C" __global__ void __launch_bounds__(1024) tiledsl_cal_smem_read(float* __restrict__ out, int iters) {
  // each warp reads 32 consecutive float4 (512 bytes, 4 wavefronts, no conflict) per iteration
  __shared__ float4 s[2048];
  for (int i = threadIdx.x; i < 2048; i += blockDim.x) s[i] = make_float4(i, i + 1, i + 2, i + 3);
  __syncthreads();
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  int i = threadIdx.x;
  #pragma unroll 8
  for (int it = 0; it < iters; ++it) {
    const float4 v = s[(i + it * 32) & 2047];
    acc.x += v.x; acc.y += v.y; acc.z += v.z; acc.w += v.w;
  }
  if (acc.x + acc.y + acc.z + acc.w == 1.2345f) out[0] = acc.x;
}
'''

_FMA = r'''
extern "C" __global__ void tiledsl_cal_fma(float* __restrict__ out, float b, float c, int iters) {
  // 8 independent FMA chains per thread: enough ILP to hide the FMA latency at full occupancy
  float a0 = threadIdx.x, a1 = a0 + 1, a2 = a0 + 2, a3 = a0 + 3, a4 = a0 + 4, a5 = a0 + 5, a6 = a0 + 6, a7 = a0 + 7;
  for (int it = 0; it < iters; ++it) {
    #pragma unroll
    for (int u = 0; u < 16; ++u) {
      a0 = fmaf(a0, b, c); a1 = fmaf(a1, b, c); a2 = fmaf(a2, b, c); a3 = fmaf(a3, b, c);
      a4 = fmaf(a4, b, c); a5 = fmaf(a5, b, c); a6 = fmaf(a6, b, c); a7 = fmaf(a7, b, c);
    }
  }
  const float s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
  if (s == 1.2345f) out[0] = s;
}
'''


def cache_root() -> Path:
    """``$TILEDSL_CACHE_DIR`` or ``~/.cache/tiledsl``."""
    return Path(os.environ.get("TILEDSL_CACHE_DIR", Path.home() / ".cache" / "tiledsl"))


def calibration_path(target: Target) -> Path:
    """The cache file of ``target``'s measured ceilings."""
    key = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{target.name}_{target.arch}_{target.sm_count}sm")
    return cache_root() / "calibration" / f"{key}.json"


def calibration_problem(data: object, target: Target) -> str | None:
    """What makes ``data`` (a parsed calibration file) unusable for ``target`` (the schema check), or None."""
    if not isinstance(data, dict):
        return f"is a JSON {type(data).__name__}, not an object"
    for k, want in (("device", target.name), ("arch", target.arch), ("sm_count", target.sm_count)):
        if k in data and data[k] != want:
            return f"was measured on {k} {data[k]!r}, this is {want!r}"
    figs = data.get("figures")
    if not isinstance(figs, dict) or not figs:
        return "has no 'figures' object"
    for k, v in figs.items():
        if k not in FIGURES:
            return f"figure {k!r} is not one of {', '.join(FIGURES)}"
        if not isinstance(v, dict) or not isinstance(v.get("method"), str):
            return f"figure {k!r} is not {{'value': number, 'method': text}}"
        x = v.get("value")
        if not positive_number(x):
            return f"figure {k!r} value {x!r} is not a positive finite number"
    if not isinstance(data.get("date", ""), str):
        return "field 'date' is not text"
    return None


def cached_figures(target: Target) -> dict | None:
    """The verified cached calibration of ``target`` (the file's JSON), or None (missing, or bad: warned)."""
    path = calibration_path(target)
    data, problem = read_json(path, "calibration JSON")
    if problem is None and data is not None:
        problem = calibration_problem(data, target)
    if problem is not None:
        warn_bad(path, f"calibration cache {problem}", "not used (run tiledsl.calibrate() to measure again)")
        return None
    return data


def load_calibration(target: Target) -> Target:
    """``target`` with its cached measured figures applied (unchanged when nothing valid is cached)."""
    data = cached_figures(target)
    if data is None:
        return target
    return target.with_measured(_notes(data))


def _notes(data: dict) -> dict[str, tuple[float, str]]:
    return {k: (float(v["value"]), f"{v['method']} ({data.get('date', '?')}, tiledsl.calibrate)")
            for k, v in data["figures"].items()}


def _bench_ms(kernel, grid: tuple[int, int, int], args: tuple, repeat: int) -> float:
    """Median milliseconds of one launch (no L2 flush: the L2 and shared-memory tests want warm data)."""
    return time_gpu(lambda: launch(kernel, grid, args), warmup=2, repeat=repeat, flush=False).median_ms


def measure(target: Target | None = None, repeat: int = 10) -> dict[str, dict]:
    """Run the four microbenchmarks on the current GPU; ``{key: {"value", "unit", "method"}}``.

    Raises:
        LaunchError: no GPU.
    """
    import cupy
    import numpy as np

    t = target or Target.current()
    arch = t.arch
    out = cupy.zeros(4, dtype=cupy.float32)
    res: dict[str, dict] = {}

    k = compile_source(KernelSource("tiledsl_cal_copy", _COPY, (256, 1, 1)), arch)
    n = max(8 * t.l2_bytes, 1 << 31) // 4 // 4 * 4      # floats: 8 × L2, at least 2 GiB
    a = cupy.ones(n, dtype=cupy.float32)
    b = cupy.empty_like(a)
    grid = (t.sm_count * 16, 1, 1)
    ms = _bench_ms(k, grid, (a, b, np.int64(n // 4)), repeat)
    res["hbm_bytes_per_s"] = {"value": 2 * n * 4 / (ms * 1e-3), "unit": "bytes/s",
                              "method": f"float4 copy of {n * 4 / 2**30:.2f} GiB, read + write"}
    del a, b

    k = compile_source(KernelSource("tiledsl_cal_l2_read", _L2, (256, 1, 1)), arch)
    n4 = 1
    while n4 * 2 * 16 <= t.l2_bytes // 4:
        n4 *= 2
    buf = cupy.ones(n4 * 4, dtype=cupy.float32)
    iters = 512
    grid = (t.sm_count * 8, 1, 1)
    ms = _bench_ms(k, grid, (buf, out, np.int32(n4 - 1), np.int32(iters)), repeat)
    res["l2_bytes_per_s"] = {"value": grid[0] * 256 * iters * 16 / (ms * 1e-3), "unit": "bytes/s",
                             "method": f"ld.global.cg float4 reads of a {n4 * 16 / 2**20:.0f} MiB buffer"}

    k = compile_source(KernelSource("tiledsl_cal_smem_read", _SMEM, (1024, 1, 1)), arch)
    iters = 4096
    grid = (t.sm_count * 2, 1, 1)
    ms = _bench_ms(k, grid, (out, np.int32(iters)), repeat)
    res["smem_bytes_per_s"] = {"value": grid[0] * 1024 * iters * 16 / (ms * 1e-3), "unit": "bytes/s",
                               "method": "conflict-free float4 shared-memory reads"}

    k = compile_source(KernelSource("tiledsl_cal_fma", _FMA, (256, 1, 1)), arch)
    iters = 2048
    grid = (t.sm_count * 8, 1, 1)
    ms = _bench_ms(k, grid, (out, np.float32(0.999), np.float32(0.001), np.int32(iters)), repeat)
    res["fp32_flops_per_s"] = {"value": grid[0] * 256 * iters * 16 * 8 * 2 / (ms * 1e-3), "unit": "FLOP/s",
                               "method": "8 independent fmaf chains per thread"}
    return res


def calibrate(force: bool = False, repeat: int = 10) -> Target:
    """The current GPU's Target with measured ceilings, measuring once and caching per device.

    Args:
        force: measure again even when a cached calibration exists.
        repeat: timed runs per microbenchmark (median).

    Returns:
        ``Target.current()`` with ``measured`` filled: ``target.ceilings()`` then reports each figure as
        measured, with its method and date.

    Raises:
        LaunchError: no GPU.

    Example:
        >>> t = tiledsl.calibrate()                      # doctest: +SKIP
        >>> t.ceilings()["hbm_bytes_per_s"].source       # doctest: +SKIP
        'measured: float4 copy of 1.88 GiB, read + write (2026-11-29, tiledsl.calibrate)'
    """
    t = Target.current()
    path = calibration_path(t)
    cached = None if force else cached_figures(t)
    if cached is not None:
        return t.with_measured(_notes(cached))
    figures = measure(t, repeat)
    data = {"device": t.name, "arch": t.arch, "sm_count": t.sm_count,
            "date": _dt.date.today().isoformat(), "figures": figures}
    problem = calibration_problem(data, t)
    if problem is not None:  # e.g. a timer that returned 0 ms: never cache (or use) a nonsense figure
        raise RuntimeError(f"calibration of {t.name} measured nonsense: {problem}")
    try:
        with locked(path):
            atomic_write(path, json.dumps(data, indent=2, allow_nan=False))
    except Exception:
        pass  # read-only home or a lock timeout: the result is still returned
    return t.with_measured(_notes(data))

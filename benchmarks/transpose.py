"""Transpose benchmark: the ladder and the default schedule beside CuPy, torch and a device copy, one run.

Run on a GPU: ``python benchmarks/transpose.py [--n 16384] [--no-sweep] [--out benchmarks/results/transpose_h200.json]``;
``python benchmarks/transpose.py --shapes --out benchmarks/results/transpose_shapes_h200.json``: ``schedule=None``
on the shapes users transpose (:data:`SHAPES`: short sides, attention heads, float16) beside CuPy and torch.

Shape 16384×16384 float32 (1 GiB in, 1 GiB out, 4× the H200's L2). Every tiledsl result is checked
bit-exact against ``cupy.ascontiguousarray(x.T)`` before it is timed. Timing: tiledsl.timing.time_gpu
(CUDA events around 10 back-to-back calls so the Python launch overhead of every contender overlaps the GPU
work, warm-up, L2 flushed before each sample, median). Bandwidth counts read + write:
GB/s = 2 · n² · itemsize / time. "copy" is the faster of ``y[...] = x`` (CuPy elementwise copy) and a
device-to-device ``cudaMemcpyAsync`` of the same bytes, measured in the same run.
Ladder: ``docs/transpose.md`` (presets in ``schedules/transpose/presets.json``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from pathlib import Path

from gpu_check import gpu_or_exit

import tiledsl
from tiledsl.compile import nvrtc_version
from tiledsl.timing import time_gpu
from tiledsl.transpose import TransposeOp, TransposeSchedule
from tiledsl.transpose import default_schedule as transpose_default

CALLS = 10  # calls per timed sample: back-to-back launches hide each call's Python overhead

# hand-picked schedules around the default (tile, rows per thread, chunk, padding, rasterization group)
SWEEP = {
    "t64 v4 r4 pad1 swz4": dict(tile=64, rows_per_thread=4, vec=4, smem_pad=1, swizzle=4),
    "t64 v4 r4 pad1 swz16": dict(tile=64, rows_per_thread=4, vec=4, smem_pad=1, swizzle=16),
    "t64 v4 r4 pad1 swz32": dict(tile=64, rows_per_thread=4, vec=4, smem_pad=1, swizzle=32),
    "t64 v4 r4 pad1 swz64": dict(tile=64, rows_per_thread=4, vec=4, smem_pad=1, swizzle=64),
    "t64 v4 r8 pad1 swz16": dict(tile=64, rows_per_thread=8, vec=4, smem_pad=1, swizzle=16),
    "t64 v4 r4 pad0 swz8": dict(tile=64, rows_per_thread=4, vec=4, smem_pad=0, swizzle=8),
    "t64 v4 r2 pad1 swz8": dict(tile=64, rows_per_thread=2, vec=4, smem_pad=1, swizzle=8),
    "t64 v4 r8 pad1 swz8": dict(tile=64, rows_per_thread=8, vec=4, smem_pad=1, swizzle=8),
    "t64 v4 r16 pad1 swz8": dict(tile=64, rows_per_thread=16, vec=4, smem_pad=1, swizzle=8),
    "t64 v2 r8 pad1 swz8": dict(tile=64, rows_per_thread=8, vec=2, smem_pad=1, swizzle=8),
    "t32 v4 r1 pad1 swz8": dict(tile=32, rows_per_thread=1, vec=4, smem_pad=1, swizzle=8),
    "t32 v4 r2 pad1 swz16": dict(tile=32, rows_per_thread=2, vec=4, smem_pad=1, swizzle=16),
    "t32 v4 r4 pad1 swz8": dict(tile=32, rows_per_thread=4, vec=4, smem_pad=1, swizzle=8),
    "t32 v1 r4 pad1 swz8": dict(tile=32, rows_per_thread=4, vec=1, smem_pad=1, swizzle=8),
}


# --shapes: the shapes users transpose (weights, activations, attention heads), short sides included
SHAPES = [((8192, 1024), "float32"), ((1024, 8192), "float32"), ((4096, 4096), "float32"), ((2048, 2048), "float32"),
          ((1024, 1024), "float32"), ((4096, 64), "float32"), ((64, 4096), "float32"), ((131072, 32), "float32"),
          ((32, 131072), "float32"), ((50257, 768), "float32"), ((768, 50257), "float32"), ((4096, 14336), "float32"),
          ((32, 2048, 128), "float32"), ((16, 512, 512), "float32"), ((8192, 1024), "float16"),
          ((4096, 4096), "float16"), ((32, 2048, 128), "float16")]


def shape_rows(repeat: int) -> list[dict]:
    """``schedule=None`` on every shape of :data:`SHAPES` beside CuPy (``ascontiguousarray`` of the swapped
    view) and torch (``.transpose(-1, -2).contiguous()``), same timing as the main table; each result checked
    bit-exact against CuPy's first."""
    import cupy as cp

    try:
        import torch
    except ImportError:
        torch = None
    rows = []
    for shape, dtype in SHAPES:
        x = cp.random.default_rng(1).random(shape, dtype=cp.float32).astype(dtype) + 1
        swapped = x.swapaxes(-1, -2)
        ref = cp.ascontiguousarray(swapped)
        y = cp.empty_like(ref)
        tiledsl.transpose(x, out=y)
        if not bool(cp.array_equal(y, ref)):
            raise SystemExit(f"WRONG RESULT for {shape} {dtype}")

        def timed(fn) -> float:
            return time_gpu(lambda: [fn() for _ in range(CALLS)], repeat=repeat).median_ms / CALLS

        ours = timed(lambda x=x: tiledsl.transpose(x))
        cupy_ms = timed(lambda swapped=swapped: cp.ascontiguousarray(swapped))
        torch_ms = None
        if torch is not None:
            xt = torch.from_dlpack(x)
            torch_ms = timed(lambda xt=xt: xt.transpose(-1, -2).contiguous())
        nbytes = 2 * x.nbytes
        s = transpose_default(TransposeOp(shape=shape, dtype=dtype), tiledsl.Target.current())
        row = dict(shape=list(shape), dtype=dtype, schedule=s.to_dict(), ms=ours, gbps=nbytes / ours / 1e6,
                   cupy_ms=cupy_ms, cupy_gbps=nbytes / cupy_ms / 1e6, x_cupy=cupy_ms / ours, torch_ms=torch_ms,
                   x_torch=(torch_ms / ours) if torch_ms else None)
        rows.append(row)
        print(f"{'x'.join(map(str, shape)):>16s} {dtype:8s} tiledsl {row['gbps']:6.0f} GB/s  CuPy {row['cupy_gbps']:6.0f}"
              f"  x CuPy {row['x_cupy']:.2f}" + (f"  x torch {row['x_torch']:.2f}" if torch_ms else ""), flush=True)
    return rows


def main() -> int:
    import cupy as cp

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=16384, help="matrix side (float32)")
    ap.add_argument("--no-sweep", action="store_true", help="only the ladder, the default and the baselines")
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--out", default="benchmarks/results/transpose_h200.json")
    ap.add_argument("--shapes", action="store_true",
                    help="instead: schedule=None on the shapes users transpose (SHAPES) beside CuPy and torch")
    args = ap.parse_args()
    gpu_or_exit("benchmarks/transpose.py")
    if args.shapes:
        rows = shape_rows(args.repeat)
        meta = dict(command="python " + " ".join(sys.argv), gpu=cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
                    date=dt.date.today().isoformat(), cupy=cp.__version__,
                    timing=f"tiledsl.timing.time_gpu: CUDA events around {CALLS} back-to-back calls, L2 flushed, "
                           f"median of {args.repeat} samples / {CALLS}; GB/s counts read + write")
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(dict(meta=meta, shapes=rows), indent=1))
        return 0
    n = args.n
    gpu = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    x = cp.random.default_rng(0).random((n, n), dtype=cp.float32) + 0.5  # uniform [0.5, 1.5): no zeros
    nbytes = 2 * x.nbytes  # read + write
    ref = cp.ascontiguousarray(x.T)
    y = cp.empty_like(ref)

    def gbps(ms: float) -> float:
        return nbytes / (ms * 1e-3) / 1e9

    def timed(fn) -> float:
        """Median ms of one call, timed as CALLS back-to-back calls per event pair (host overhead hidden)."""
        return time_gpu(lambda: [fn() for _ in range(CALLS)], repeat=args.repeat).median_ms / CALLS

    base: dict[str, float] = {}
    base["copy y[...] = x"] = timed(lambda: y.__setitem__(Ellipsis, x))
    stream = cp.cuda.get_current_stream()
    base["copy cudaMemcpyAsync D2D"] = timed(lambda: cp.cuda.runtime.memcpyAsync(
        y.data.ptr, x.data.ptr, x.nbytes, cp.cuda.runtime.memcpyDeviceToDevice, stream.ptr))
    base["cupy.ascontiguousarray(x.T)"] = timed(lambda: cp.ascontiguousarray(x.T))
    torch_version = None
    try:
        import torch

        torch_version = torch.__version__

        xt = torch.from_dlpack(x)
        assert torch.equal(xt.t().contiguous(), torch.from_dlpack(ref))
        base["torch x.t().contiguous()"] = timed(lambda: xt.t().contiguous())
    except ImportError:
        print("torch not installed: no torch baseline", file=sys.stderr)
    copy_ms = min(v for k, v in base.items() if k.startswith("copy"))
    torch_ms = base.get("torch x.t().contiguous()")
    cupy_ms = base["cupy.ascontiguousarray(x.T)"]

    op = TransposeOp(shape=(n, n), dtype="float32")
    target = tiledsl.Target.current()
    runs: list[tuple[str, str, TransposeSchedule]] = [
        ("ladder", name, s) for name, s in tiledsl.presets("transpose").items()]
    runs.append(("default", "default_schedule", transpose_default(op, target)))
    if not args.no_sweep:
        runs += [("sweep", name, TransposeSchedule(**kw)) for name, kw in SWEEP.items()]

    rows = []
    for kind, name, s in runs:
        y.fill(cp.nan)
        tiledsl.transpose(x, out=y, schedule=s)
        if not bool(cp.array_equal(y, ref)):
            raise SystemExit(f"WRONG RESULT for {name} {s}")
        k = tiledsl.compile(op, s, arch=target.arch)
        ms = timed(lambda s=s: tiledsl.transpose(x, out=y, schedule=s))
        rows.append(dict(kind=kind, name=name, schedule=s.to_dict(), ms=ms, gbps=gbps(ms), pct_copy=copy_ms / ms,
                         x_torch=(torch_ms / ms) if torch_ms else None, x_cupy=cupy_ms / ms,
                         registers=k.registers, smem_bytes=k.smem_bytes))
        print(f"{kind:8s} {name:26s} {ms:8.3f} ms {gbps(ms):7.0f} GB/s {copy_ms / ms:6.1%} of copy", flush=True)

    meta = dict(command="python " + " ".join(sys.argv), gpu=gpu, date=dt.date.today().isoformat(),
                shape=[n, n], dtype="float32", bytes_moved=nbytes, cupy=cp.__version__,
                torch=torch_version,
                nvrtc=".".join(map(str, nvrtc_version())),
                timing=f"tiledsl.timing.time_gpu: CUDA events around {CALLS} back-to-back calls, 3 warm-up, "
                       f"L2 flushed, median of {args.repeat} samples / {CALLS}")
    baselines = {k: dict(ms=v, gbps=gbps(v)) for k, v in base.items()}
    default = next(r for r in rows if r["kind"] == "default")
    best = min(rows, key=lambda r: r["ms"])
    out = dict(meta=meta, baselines=baselines, copy_gbps=gbps(copy_ms), rows=rows, default=default, best=best)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], Path(args.out).name).write_text(json.dumps(out, indent=1))

    print(f"\n### transpose {n}×{n} float32 — {gpu}, {meta['date']}\n")
    print(f"`{meta['command']}`; {meta['timing']}; GB/s counts read + write ({nbytes} bytes).\n")
    print("| what | ms | GB/s | % of copy | × torch | × cupy |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for k, v in base.items():
        xt_ = f"{torch_ms / v:.2f}" if torch_ms else "–"
        print(f"| {k} | {v:.3f} | {gbps(v):.0f} | {copy_ms / v:.1%} | {xt_} | {cupy_ms / v:.2f} |")
    for r in rows:
        xt_ = f"{r['x_torch']:.2f}" if r["x_torch"] else "–"
        label = f"tiledsl {r['kind']}: {r['name']}"
        print(f"| {label} | {r['ms']:.3f} | {r['gbps']:.0f} | {r['pct_copy']:.1%} | {xt_} | {r['x_cupy']:.2f} |")
    ok_torch = default["x_torch"] is not None and default["x_torch"] >= 3.0
    ok_copy = default["pct_copy"] >= 0.85
    print(f"\ndefault schedule: {default['gbps']:.0f} GB/s = {default['pct_copy']:.1%} of copy "
          f"({gbps(copy_ms):.0f} GB/s), {default['x_torch'] or float('nan'):.2f}× torch — target ≥ 3× torch: "
          f"{'met' if ok_torch else 'NOT met'}; ≥ 85% of copy: {'met' if ok_copy else 'NOT met'}")
    print(f"fastest: {best['name']} {best['schedule']}: {best['gbps']:.0f} GB/s = {best['pct_copy']:.1%} of copy")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Prototype (outside the library) of x @ W on the FP64 tensor-core GEMV kernel where W's rows are not 16-byte
aligned (an odd N, GPT-2's 50257-column vocabulary projection): the library's source for the same product with N
rounded up to a multiple of 4, its 16-byte loads of W replaced by four 4-byte loads, launched with the odd N and
leading dimension, beside ``schedule=None`` (the FMA GEMV kernel's odd-N form) on the same product, GPU alone (session
37, 2026-12-05).

Variants: ``fma`` the library's call (``schedule=None``); ``scalar_cs`` W read as four ``ld.global.cs.f32`` (evict
first) per vector; ``scalar`` four plain (L1-cached) loads; ``aligned`` the library's FP64 kernel on N rounded down
to a multiple of 4 (an upper bound: 16-byte loads, the same bytes within 0.01 %). Each C is checked against a float64
product. The library's split-K sum follows the FP64 kernels (launched plainly). Shares are of a 2 GiB copy.

Measured on an H100 (session 37, ``benchmarks/results/h100_2026-12-05_s37/oddn.json``): ``scalar_cs`` 0.703 / 0.640 /
0.563 of the copy at 9 / 12 / 16 rows against ``fma`` 0.531 / 0.523 / 0.504 (``aligned`` 0.807 / 0.750 / 0.642); the
library reads an unaligned W so since (``GemmSchedule.vec=1`` with ``mma="dmma"``).

Run (GPU): ``python benchmarks/gemv_oddn_proto.py --m 5 8 9 12 16 --out benchmarks/results/oddn.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from dataclasses import replace

import cupy as cp
import numpy as np
from beside import copy_gbps, gpu_name

import tiledsl
from tiledsl.compile import compile_source
from tiledsl.gemm.emit import emit_splitk_reduce
from tiledsl.gemm.emit_gemv_mma import emit_gemm_gemv_mma
from tiledsl.gemm.family import gemv_dmma_schedule
from tiledsl.runtime import launch
from tiledsl.timing import time_gpu

LOADS = r"""
// W's vector of four as four 4-byte loads: its start need not be 16-byte aligned
__device__ __forceinline__ float4 ld4_cs(const float* p) { return make_float4(__ldcs(p), __ldcs(p + 1), __ldcs(p + 2), __ldcs(p + 3)); }
__device__ __forceinline__ float4 ld4(const float* p) { return make_float4(p[0], p[1], p[2], p[3]); }
"""

VARIANTS = ("fma", "scalar_cs", "scalar", "aligned")


def fp64_kernel(op4, variant):
    """The library's FP64 x @ W kernel (its ring, as ``schedule=None`` takes it) for ``op4`` (N a multiple of 4), its
    W loads changed as ``variant`` says; (Kernel, schedule)."""
    s = gemv_dmma_schedule(op4, tiledsl.Target.current())
    ks = emit_gemm_gemv_mma(op4, s)
    src = ks.source
    if variant != "aligned":
        body = src.index('extern "C"')
        src = src[:body] + LOADS + src[body:]
        fn = "ld4_cs" if variant == "scalar_cs" else "ld4"
        src, n = re.subn(r"__ldcs\(reinterpret_cast<const float4\*>\((B \+ [^;]*?b_at\[v\])\)\)", fn + r"(\1)", src)
        assert n > 0 and "reinterpret_cast<const float4*>(B" not in src, "a W load was not replaced"
        # a vector that starts before N and ends past it keeps its start (its elements past N are never stored; W's
        # buffer holds 3 floats past its end for the last row's); one wholly past N reads the last column
        clamp = "min(n0 + 32 * (v / 4) + 4 * g, N - 4)"
        assert clamp in src
        src = src.replace(clamp, "min(n0 + 32 * (v / 4) + 4 * g, N - 1)")
    return compile_source(replace(ks, source=src), "sm_90"), s


def run(m, n, k, copy, variants):
    rng = cp.random.default_rng(m * 7919 + n + k)
    a = rng.standard_normal((m, k), dtype=cp.float32)
    w = rng.standard_normal(k * n + 4, dtype=cp.float32)[:k * n].reshape(k, n)  # 4 floats of slack past its end
    ref = a.astype(cp.float64) @ w.astype(cp.float64)
    rows = []
    for v in variants:
        n_run = n // 4 * 4 if v == "aligned" else n
        w_run = cp.ascontiguousarray(w[:, :n_run]) if v == "aligned" else w
        out = cp.full((m, n_run), cp.nan, dtype=cp.float32)
        if v == "fma":
            def call(w_run=w_run, out=out):
                tiledsl.gemm(a, w_run, out)
            regs = None
        else:
            op4 = tiledsl.GemmOp(m, -(-n // 4) * 4, k, layout_b="row")
            kern, s = fp64_kernel(op4, v)
            regs = (kern.registers, kern.spill_bytes)
            op_run = tiledsl.GemmOp(m, n_run, k, layout_b="row")
            grid = (math.ceil(n_run / (s.bn // 32 * s.rn)), s.split_k, math.ceil(m / 16))
            ws = cp.full((s.split_k, m, n_run), cp.nan, dtype=cp.float32) if s.split_k > 1 else out
            red = compile_source(emit_splitk_reduce(op_run, s), "sm_90") if s.split_k > 1 else None
            args = (a, w_run, ws, np.int32(m), np.int32(n_run), np.int32(k), np.int64(k), np.int64(n_run),
                    np.int64(n_run), np.float32(1.0))

            def call(kern=kern, grid=grid, args=args, red=red, ws=ws, out=out, n_run=n_run):
                launch(kern, grid, args)
                if red is not None:
                    launch(red, (math.ceil(m * n_run / red.block[0]), 1, 1),
                           (ws, out, np.int32(m), np.int32(n_run), np.int64(n_run), np.float32(1.0)))
        call()
        cp.cuda.Device().synchronize()
        err = float(cp.abs(out - ref[:, :n_run]).max() / cp.abs(ref).max())
        if not err < 1e-5:
            raise SystemExit(f"{m}x{n}x{k} {v}: error {err:.3e} against float64")
        t = time_gpu(call, gpu_only=True, warmup=3, repeat=30).median_ms
        gbps = n_run * k * 4 / t / 1e6
        rows.append(dict(m=m, n=n_run, k=k, variant=v, gpu_ms=t, gbps=gbps, of_copy=gbps / copy, err=err,
                         registers=regs))
        print(f"{m:3d} {n_run:6d} {k:5d} {v:9s} {t * 1e3:8.1f} us {gbps:7.0f} GB/s {gbps / copy:.3f} of copy "
              f"err {err:.1e} regs {regs}", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, nargs="+", default=[5, 8, 9, 12, 16])
    ap.add_argument("--nk", type=int, nargs=2, default=[50257, 768], metavar=("N", "K"))
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    copy = copy_gbps(gpu_only=True)
    print(f"{gpu_name()}: copy {copy:.0f} GB/s (GPU alone)")
    rows = [r for m in args.m for r in run(m, *args.nk, copy, args.variants)]
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(dict(gpu=gpu_name(), copy_gbps=copy, command="python benchmarks/gemv_oddn_proto.py "
                           + " ".join(f"--m {' '.join(map(str, args.m))}".split()), rows=rows), fh, indent=1)


if __name__ == "__main__":
    main()

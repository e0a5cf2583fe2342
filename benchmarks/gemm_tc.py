"""Tensor-core GEMM: correctness sweep and timing beside cuBLAS (cupy.matmul / torch.matmul) and Triton.

Run on a GPU: ``python benchmarks/gemm_tc.py [--check] [--sweep] [--out FILE.json]``.

--check  every layout, awkward shapes (1, 7, 127, 129, K tails), alpha/beta, misaligned views and split-K,
         float16 (CuPy) and bfloat16 (torch), against a float64 reference with the output poisoned first.
--sweep  time a table of mma_sync schedules (--hopper: wgmma and TMA schedules) at 4096³ and 8192³ (fp16 and
         bf16) beside cuBLAS, same run.
Timing: tiledsl.timing.time_gpu (CUDA events, warm-up, L2 flushed before each call, median of 20). The
Hopper sweep also times streams of 10 back-to-back calls (median of 10 streams, per call): the kernel's own
time with the host's launch path overlapped, for tiledsl and cuBLAS alike.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

import beside
import numpy as np

import tiledsl
from tiledsl.timing import time_gpu

SWEEP = {  # name -> GemmSchedule fields (mma_sync, smem_pad 8)
    "128x128x32 w64x64 s3": dict(bm=128, bn=128, bk=32, wm=64, wn=64, stages=3),
    "128x128x32 w64x64 s4": dict(bm=128, bn=128, bk=32, wm=64, wn=64, stages=4),
    "128x128x32 w64x32 s4": dict(bm=128, bn=128, bk=32, wm=64, wn=32, stages=4),
    "128x128x64 w64x64 s3": dict(bm=128, bn=128, bk=64, wm=64, wn=64, stages=3),
    "128x256x32 w64x64 s3": dict(bm=128, bn=256, bk=32, wm=64, wn=64, stages=3),
    "128x256x32 w64x64 s4": dict(bm=128, bn=256, bk=32, wm=64, wn=64, stages=4),
    "128x256x64 w64x64 s3": dict(bm=128, bn=256, bk=64, wm=64, wn=64, stages=3),
    "256x128x32 w64x64 s4": dict(bm=256, bn=128, bk=32, wm=64, wn=64, stages=4),
    "256x128x64 w64x64 s3": dict(bm=256, bn=128, bk=64, wm=64, wn=64, stages=3),
    "128x128x32 w32x64 s4": dict(bm=128, bn=128, bk=32, wm=32, wn=64, stages=4),
    "64x128x64 w32x64 s4": dict(bm=64, bn=128, bk=64, wm=32, wn=64, stages=4),
    "128x128x32 w64x64 s4 mb1": dict(bm=128, bn=128, bk=32, wm=64, wn=64, stages=4, min_blocks=1),
}


WGMMA_SWEEP = {  # name -> GemmSchedule fields (wgmma, bk 64); "tma": a producer warpgroup issues TMA copies
    "schedule=None": None,  # what the library picks
    "wgmma 128x256x64 s4": dict(bm=128, bn=256, stages=4),
    "wgmma 128x128x64 s6": dict(bm=128, bn=128, stages=6),
    "wgmma 256x128x64 s4": dict(bm=256, bn=128, stages=4),
    "tma 128x256x64 s3": dict(bm=128, bn=256, stages=3, warp_specialize=True),
    "tma 128x256x64 s4": dict(bm=128, bn=256, stages=4, warp_specialize=True),
    "tma 128x192x64 s5": dict(bm=128, bn=192, stages=5, warp_specialize=True),
    "tma 128x128x64 s4": dict(bm=128, bn=128, stages=4, warp_specialize=True),
    "tma 128x128x64 s6": dict(bm=128, bn=128, stages=6, warp_specialize=True),
    "tma 128x256x64 s4 swizzle4": dict(bm=128, bn=256, stages=4, warp_specialize=True, swizzle=4),
    "tma 128x256x64 s3 persistent": dict(bm=128, bn=256, stages=3, warp_specialize=True, persistent=True),
    "tma 128x256x64 s4 persistent": dict(bm=128, bn=256, stages=4, warp_specialize=True, persistent=True),
    "tma 128x128x64 s6 persistent": dict(bm=128, bn=128, stages=6, warp_specialize=True, persistent=True),
    "tma 128x256x64 s4 persistent sw2": dict(bm=128, bn=256, stages=4, warp_specialize=True, persistent=True,
                                             swizzle=2),
    "tma 128x256x64 s4 persistent sw4": dict(bm=128, bn=256, stages=4, warp_specialize=True, persistent=True,
                                             swizzle=4),
    "tma 128x256x64 s4 persistent sw16": dict(bm=128, bn=256, stages=4, warp_specialize=True, persistent=True,
                                              swizzle=16),
}


def mma(**kw) -> tiledsl.GemmSchedule:
    kw.setdefault("smem_pad", 8)
    return tiledsl.GemmSchedule(mma="mma_sync", **kw)


def wgmma(**kw) -> tiledsl.GemmSchedule:
    return tiledsl.GemmSchedule(mma="wgmma", bk=64, **kw)


def _rel_err(out, ref) -> float:
    import cupy as cp

    return float(cp.linalg.norm(out.astype(cp.float64) - ref) / max(float(cp.linalg.norm(ref)), 1e-300))


def check(dtype: str, rng, hopper: bool = False) -> list[str]:
    """Run the correctness grid for one dtype; returns failure lines (empty = all passed). ``hopper``:
    the wgmma schedules, on the layout they take (A row-major, B column-major) with K a multiple of 8."""
    import cupy as cp
    import torch

    fails = []
    if hopper:
        scheds = [wgmma(**kw) for kw in WGMMA_SWEEP.values()] + [
            wgmma(bm=128, bn=128, stages=4, split_k=3), wgmma(bm=64, bn=64, stages=3),
            wgmma(bm=128, bn=128, stages=4, warp_specialize=True, split_k=2)]
        shapes = [(8, 8, 8), (8, 24, 64), (128, 136, 72), (136, 128, 200), (40, 848, 2560), (256, 304, 1000),
                  (304, 256, 16)]  # every extent a multiple of 8: 16-byte copies along any contiguous dim
        layouts = [(la, lb) for la in ("row", "col") for lb in ("row", "col")]
        cases = ((0.0, 0), (0.5, 0))
    else:
        scheds = [mma(bm=128, bn=128, bk=32, stages=4), mma(bm=64, bn=64, bk=32, wm=32, wn=32, stages=3),
                  mma(bm=128, bn=256, bk=32, stages=3), mma(bm=128, bn=128, bk=32, stages=4, split_k=3),
                  mma(bm=64, bn=128, bk=64, wm=32, wn=64, stages=2)]
        shapes = [(1, 1, 1), (7, 13, 5), (127, 129, 65), (129, 127, 200), (35, 845, 2560), (256, 256, 1000), (16, 8, 7)]
        layouts = [(la, lb) for la in ("row", "col") for lb in ("row", "col")]
        cases = ((0.0, 0), (0.5, 0), (0.0, 1))
    n_cases = 0
    for s in scheds:
        for (m, n, k) in shapes:
            for la, lb in layouts:
                for beta, offset in cases:
                    a64 = rng.uniform(-1, 1, (m, k + offset))
                    b64 = rng.uniform(-1, 1, (k + offset, n))
                    c64 = rng.uniform(-1, 1, (m, n))
                    a_np = np.asfortranarray(a64) if la == "col" else a64
                    b_np = np.asfortranarray(b64) if lb == "col" else b64
                    if dtype == "float16":
                        A, B = cp.asarray(a64.astype(np.float16)), cp.asarray(b64.astype(np.float16))
                        A = cp.asfortranarray(A) if la == "col" else A  # genuinely column-major
                        B = cp.asfortranarray(B) if lb == "col" else B
                        A, B = A[:, offset:], B[offset:, :]
                        C = cp.asarray(c64.astype(np.float16)) if beta else cp.full((m, n), cp.nan, cp.float16)
                        ref = 1.5 * (A.astype(cp.float64) @ B.astype(cp.float64))
                        if beta:  # the poisoned C must not reach the result when beta = 0
                            ref += beta * C.astype(cp.float64)
                        out = tiledsl.gemm(A, B, C, alpha=1.5, beta=beta, schedule=s)
                        got = out
                    else:
                        tA = torch.tensor(a_np, device="cuda").to(torch.bfloat16)
                        tB = torch.tensor(b_np, device="cuda").to(torch.bfloat16)
                        if la == "col":
                            tA = tA.t().contiguous().t()
                        if lb == "col":
                            tB = tB.t().contiguous().t()
                        tA, tB = tA[:, offset:], tB[offset:, :]
                        tC = (torch.tensor(c64, device="cuda").to(torch.bfloat16) if beta
                              else torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16))
                        ref_t = 1.5 * (tA.double() @ tB.double())
                        if beta:
                            ref_t += beta * tC.double()
                        out = tiledsl.gemm(tA, tB, tC, alpha=1.5, beta=beta, schedule=s)
                        got = cp.asarray(out.float())
                        ref = cp.asarray(ref_t)
                    n_cases += 1
                    err = _rel_err(got, ref)
                    bad = not np.isfinite(err) or err > 8e-3 or bool(cp.isnan(got).any())
                    if bad:
                        fails.append(f"{dtype} {m}x{n}x{k} {la}/{lb} beta={beta} off={offset} {s.mma} "
                                     f"{s.bm}x{s.bn}x{s.bk} sk{s.split_k}: rel err {err:.2e}")
    print(f"check {dtype}{' wgmma' if hopper else ''}: {n_cases} cases, {len(fails)} failed", flush=True)
    return fails


ONLY: list[str] = []  # --only: sweep the schedules whose name contains one of these ("default" included)


def _selected(name: str) -> bool:
    return not ONLY or any(text in name for text in ONLY)


def one_call_and_stream(fn) -> tuple[float, float]:
    """(ms of one call, L2 flushed, median of 20; ms per call in streams of STREAM back-to-back calls, median
    of 10 streams)."""
    return (time_gpu(fn).median_ms,
            time_gpu(lambda: [fn() for _ in range(STREAM)], repeat=10).median_ms / STREAM)


def bracketed(fn, vendor_fn) -> tuple[float, float, float, float]:
    """:func:`one_call_and_stream` of ``fn`` and of the vendor call, the vendor timed right before and right
    after ``fn`` and averaged, so the clocks' drift under sustained load (8192³ runs long) falls on both alike:
    (ms, ms_stream, vendor ms, vendor ms_stream)."""
    (ms, ms_stream), (vendor_ms, vendor_stream_ms) = beside.bracketed(fn, vendor_fn, one_call_and_stream)
    return ms, ms_stream, vendor_ms, vendor_stream_ms


def _row(flop: float, ms: float, ms_stream: float, vendor_ms: float, vendor_stream_ms: float, **fields) -> dict:
    """A sweep row: the fields, TFLOP/s of tiledsl and the vendor, one call and stream, and their ratios."""
    return dict(**fields, ms=ms, tflops=flop / ms / 1e9, vendor_ms=vendor_ms, vendor_tflops=flop / vendor_ms / 1e9,
                ratio=vendor_ms / ms, stream_tflops=flop / ms_stream / 1e9,
                vendor_stream_tflops=flop / vendor_stream_ms / 1e9, stream_ratio=vendor_stream_ms / ms_stream)


def sweep_wgmma(rng) -> list[dict]:
    """wgmma schedules beside cuBLAS on the same layout: NN (a @ b) and NT (x @ W.T, W row-major [N, K])."""
    import cupy as cp
    import torch

    rows = []
    for size in (4096, 8192):
        flop = 2.0 * size ** 3
        for dtype in ("float16", "bfloat16"):
            for layout in ("NN", "NT"):
                if dtype == "float16":
                    a = cp.asarray(rng.uniform(-1, 1, (size, size)).astype(np.float16))
                    b = cp.asarray(rng.uniform(-1, 1, (size, size)).astype(np.float16))
                    b = b.T if layout == "NT" else b
                    c = cp.empty((size, size), cp.float16)
                    def vcall(a=a, b=b, c=c):
                        cp.matmul(a, b, out=c)
                    vname = "cuBLAS (cupy.matmul)"
                else:
                    a = torch.empty((size, size), device="cuda", dtype=torch.bfloat16).uniform_(-1, 1)
                    b = torch.empty((size, size), device="cuda", dtype=torch.bfloat16).uniform_(-1, 1)
                    b = b.t() if layout == "NT" else b
                    c = torch.empty((size, size), device="cuda", dtype=torch.bfloat16)
                    def vcall(a=a, b=b, c=c):
                        torch.matmul(a, b, out=c)
                    vname = "cuBLAS (torch.matmul)"
                for name, kw in WGMMA_SWEEP.items():
                    if (size == 8192 and name not in SWEEP_8192) or not _selected(name):
                        continue
                    s = None if kw is None else wgmma(**kw)
                    try:
                        tiledsl.gemm(a, b, c, schedule=s)
                        ms, ms_stream, vendor, vendor_stream = bracketed(
                            lambda a=a, b=b, c=c, s=s: tiledsl.gemm(a, b, c, schedule=s), vcall)
                    except Exception as e:  # noqa: BLE001 - a failing candidate is a row, not the end
                        print(f"{size} {dtype} {name}: {type(e).__name__}: {str(e)[:300]}", flush=True)
                        continue
                    row = _row(flop, ms, ms_stream, vendor, vendor_stream, size=size, dtype=dtype, layout=layout,
                               schedule=name, vendor=vname)
                    rows.append(row)
                    print(f"{size}³ {dtype:8s} {layout} {name:28s} one call {row['tflops']:6.1f} TFLOP/s vs "
                          f"{row['vendor_tflops']:6.1f} ({row['ratio']:.3f}) | stream of {STREAM} "
                          f"{row['stream_tflops']:6.1f} vs {row['vendor_stream_tflops']:6.1f} "
                          f"({row['stream_ratio']:.3f})", flush=True)
    return rows


SWEEP_8192 = ("schedule=None", "wgmma 128x256x64 s4", "tma 128x256x64 s3", "tma 128x256x64 s4", "tma 128x192x64 s5",
              "tma 128x256x64 s3 persistent", "tma 128x256x64 s4 persistent", "tma 128x256x64 s4 persistent sw2",
              "tma 128x256x64 s4 persistent sw4", "tma 128x256x64 s4 persistent sw16")
STREAM = 10  # calls per timed stream: the kernel's time per call with the host's launch path overlapped


TF32_SWEEP = {  # name -> GemmSchedule fields (wgmma tf32, TMA); None: schedule=None
    "default": None,
    "tf32 128x256x32 s4": dict(bm=128, bn=256, bk=32, stages=4),
    "tf32 128x256x32 s3": dict(bm=128, bn=256, bk=32, stages=3),
    "tf32 128x128x32 s6": dict(bm=128, bn=128, bk=32, stages=6),
    "tf32 128x192x32 s5": dict(bm=128, bn=192, bk=32, stages=5),
    "tf32 128x256x32 s3 persistent": dict(bm=128, bn=256, bk=32, stages=3, persistent=True),
    "tf32 128x256x32 s4 persistent": dict(bm=128, bn=256, bk=32, stages=4, persistent=True),
}


def sweep_tf32() -> list[dict]:
    """float32 GEMM with precision="tf32" beside cuBLAS's TF32 (torch.matmul with allow_tf32), NT and NN (NN
    includes tiledsl's K-major copy of B), and IEEE float32 (schedule=None) beside cuBLAS's exact SGEMM.
    One call and streams of STREAM calls, as in :func:`sweep_wgmma`."""
    import torch

    rows = []
    for size in (4096, 8192):
        flop = 2.0 * size ** 3
        for layout in ("NT", "NN"):
            a = torch.empty((size, size), device="cuda").uniform_(-1, 1)
            b = torch.empty((size, size), device="cuda").uniform_(-1, 1)
            b = b.t() if layout == "NT" else b
            c = torch.empty((size, size), device="cuda")
            for precision in ("tf32", "ieee"):
                torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"

                def vcall(a=a, b=b, c=c):
                    torch.matmul(a, b, out=c)
                vendor, vendor_stream = one_call_and_stream(vcall)
                for name, kw in TF32_SWEEP.items():
                    if (precision == "ieee" and kw is not None) or not _selected(name):
                        continue
                    s = None if kw is None else tiledsl.GemmSchedule(mma="wgmma", warp_specialize=True, **kw)

                    def call(a=a, b=b, c=c, s=s, precision=precision):
                        tiledsl.gemm(a, b, c, schedule=s, precision=precision)
                    try:
                        call()
                        ms, ms_stream = one_call_and_stream(call)
                    except Exception as e:  # noqa: BLE001 - a failing candidate is a row, not the end
                        print(f"{size} {layout} {precision} {name}: {type(e).__name__}: {str(e)[:300]}", flush=True)
                        continue
                    row = _row(flop, ms, ms_stream, vendor, vendor_stream, size=size, dtype="float32",
                               precision=precision, layout=layout, schedule=name,
                               vendor=f"cuBLAS (torch.matmul, allow_tf32={precision == 'tf32'})")
                    rows.append(row)
                    print(f"{size}³ {precision} {layout} {name:22s} one call {row['tflops']:6.1f} vs "
                          f"{row['vendor_tflops']:6.1f} ({row['ratio']:.3f}) | stream {row['stream_tflops']:6.1f} "
                          f"vs {row['vendor_stream_tflops']:6.1f} ({row['stream_ratio']:.3f})", flush=True)
            torch.backends.cuda.matmul.allow_tf32 = False
    return rows


def triton_rows() -> list[dict]:
    """Triton's autotuned matmul (benchmarks/triton_matmul.py) beside cuBLAS and tiledsl's default, same run:
    bfloat16 and float16, NN and NT, 4096³. torch tensors throughout."""
    import torch
    from triton_matmul import triton_matmul

    rows = []
    size = 4096
    flop = 2.0 * size ** 3
    for dtype in (torch.bfloat16, torch.float16):
        for layout in ("NN", "NT"):
            a = torch.empty((size, size), device="cuda", dtype=dtype).uniform_(-1, 1)
            b = torch.empty((size, size), device="cuda", dtype=dtype).uniform_(-1, 1)
            b = b.t() if layout == "NT" else b
            c = torch.empty((size, size), device="cuda", dtype=dtype)
            ref = a.float() @ b.float()
            for name, fn in (("tiledsl schedule=None", lambda a=a, b=b, c=c: tiledsl.gemm(a, b, c)),
                             ("Triton autotuned", lambda a=a, b=b, c=c: triton_matmul(a, b, c)),
                             ("cuBLAS (torch.matmul)", lambda a=a, b=b, c=c: torch.matmul(a, b, out=c))):
                c.fill_(float("nan"))
                fn()
                err = float((c.float() - ref).norm() / ref.norm())
                ms = time_gpu(fn).median_ms
                rows.append(dict(size=size, dtype=str(dtype), layout=layout, impl=name, ms=ms,
                                 tflops=flop / ms / 1e9, rel_err=err))
                print(f"{size}³ {str(dtype):15s} {layout} {name:24s} {flop / ms / 1e9:7.1f} TFLOP/s  "
                      f"rel err {err:.1e}", flush=True)
    return rows


def sweep(rng) -> list[dict]:
    import cupy as cp
    import torch

    rows = []
    for size in (4096, 8192):
        flop = 2.0 * size ** 3
        for dtype in ("float16", "bfloat16"):
            if dtype == "float16":
                a = cp.asarray(rng.uniform(-1, 1, (size, size)).astype(np.float16))
                b = cp.asarray(rng.uniform(-1, 1, (size, size)).astype(np.float16))
                c = cp.empty((size, size), cp.float16)
                vendor = time_gpu(lambda a=a, b=b, c=c: cp.matmul(a, b, out=c)).median_ms
                vname = "cuBLAS (cupy.matmul)"
            else:
                a = torch.empty((size, size), device="cuda", dtype=torch.bfloat16).uniform_(-1, 1)
                b = torch.empty((size, size), device="cuda", dtype=torch.bfloat16).uniform_(-1, 1)
                c = torch.empty((size, size), device="cuda", dtype=torch.bfloat16)
                vendor = time_gpu(lambda a=a, b=b, c=c: torch.matmul(a, b, out=c)).median_ms
                vname = "cuBLAS (torch.matmul)"
            names = SWEEP if size == 4096 else {k: SWEEP[k] for k in list(SWEEP)[:6]}
            for name, kw in names.items():
                s = mma(**kw)
                try:
                    tiledsl.gemm(a, b, c, schedule=s)
                    ms = time_gpu(lambda a=a, b=b, c=c, s=s: tiledsl.gemm(a, b, c, schedule=s)).median_ms
                    k = tiledsl.compile(tiledsl.GemmOp(size, size, size, dtype=dtype, align_a=8, align_b=8,
                                                       align_c=8), s, arch="sm_90")
                    regs, spill = k.registers, k.spill_bytes
                except Exception as e:  # noqa: BLE001 - a failing candidate is a row, not the end
                    print(f"{size} {dtype} {name}: {type(e).__name__}: {str(e)[:200]}", flush=True)
                    continue
                row = dict(size=size, dtype=dtype, schedule=name, ms=ms, tflops=flop / ms / 1e9,
                           vendor=vname, vendor_ms=vendor, vendor_tflops=flop / vendor / 1e9,
                           ratio=vendor / ms, registers=regs, spill_bytes=spill)
                rows.append(row)
                print(f"{size}³ {dtype:8s} {name:28s} {row['tflops']:7.1f} TFLOP/s  {vname} "
                      f"{row['vendor_tflops']:7.1f}  ratio {row['ratio']:.3f}  regs {regs} spill {spill}", flush=True)
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true")
    p.add_argument("--sweep", action="store_true")
    p.add_argument("--hopper", action="store_true", help="the wgmma (sm_90a) kernels: check and/or sweep")
    p.add_argument("--triton", action="store_true", help="tiledsl's default vs Triton's autotuned matmul vs cuBLAS")
    p.add_argument("--tf32", action="store_true", help="float32: precision='tf32' vs cuBLAS TF32, IEEE vs cuBLAS SGEMM")
    p.add_argument("--out", default=None)
    p.add_argument("--only", action="append", default=[], metavar="TEXT",
                   help="sweep only the schedules whose name contains TEXT (repeatable; default: all)")
    args = p.parse_args()
    ONLY.extend(args.only)
    if not tiledsl.gpu_available():
        print("no GPU: benchmarks/gemm_tc.py needs a CUDA GPU")
        return 0
    import cupy as cp

    rng = np.random.default_rng(0)
    result = dict(date=dt.date.today().isoformat(), gpu=cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
                  command="python " + " ".join(sys.argv))
    fails = []
    if args.check:
        for dtype in ("float16", "bfloat16"):
            fails += check(dtype, rng, hopper=args.hopper)
        for f in fails[:40]:
            print("FAIL", f)
        result["check_failures"] = fails
    if args.sweep:
        result["rows"] = sweep_wgmma(rng) if args.hopper else sweep(rng)
    if args.tf32:
        result["tf32_rows"] = sweep_tf32()
    if args.triton:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        result["triton"] = triton_rows()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())

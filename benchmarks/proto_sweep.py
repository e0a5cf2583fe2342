"""The sweep the GEMV prototypes share: few-row float32 products, each prototype variant checked against float64 and
timed as the GPU's work alone beside tiledsl's ``schedule=None`` and cuBLAS, the rows written after every product.

Used by ``gemv_nt_staged_proto.py`` and ``gemv_nn_cluster_proto.py``: each gives its products, how to make B and
how to build a variant's launch; this module does the rest the same way for both. Timing:
``tiledsl.timing.time_gpu(gpu_only=True)`` (L2 emptied by reading, the stream held until the call is enqueued),
median of 15; the copy of 2 GiB timed the same way (``beside.copy_gbps(gpu_only=True)``) is the HBM bandwidth
a row's fraction is of.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

STAGE_A_TRANSPOSED = r"""
// The block's K slice of A (rows row0 .. row0 + BM, K from k_begin, n_k of them, a multiple of 4) staged transposed,
// At[k - k_begin][m], rows past M as zeros: 16-byte loads along K, scalar stores (2-way bank conflicts at BM = 16).
__device__ __forceinline__ void stage_a_transposed(float* __restrict__ at, const float* __restrict__ A, int M, int K,
                                                   int row0, int k_begin, int n_k)
{
  for (int i = threadIdx.x; i < BM * (n_k / 4); i += THREADS) {
    const int m = i % BM, kv = i / BM, gm = row0 + m;
    const float4 v = gm < M ? *reinterpret_cast<const float4*>(A + (long long)gm * K + k_begin + 4 * kv)
                            : make_float4(0.f, 0.f, 0.f, 0.f);
    at[(4 * kv + 0) * BM + m] = v.x;
    at[(4 * kv + 1) * BM + m] = v.y;
    at[(4 * kv + 2) * BM + m] = v.z;
    at[(4 * kv + 3) * BM + m] = v.w;
  }
}
"""
"""The A staging both prototypes' kernels share (BM and THREADS are their -D macros)."""


def prototype_main(doc: str, default_out: str, compile_only: Callable[[], int], run: Callable[[str], int]) -> int:
    """A prototype's command line: ``--out`` (default ``default_out``) given to ``run``, or ``--compile-only``."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--out", default=default_out)
    ap.add_argument("--compile-only", action="store_true", help="compile every variant with NVRTC (no GPU) and stop")
    args = ap.parse_args()
    return compile_only() if args.compile_only else run(args.out)


def compile_variants(name: str, src: str, variants: list[dict], keys: tuple[str, ...], options: Callable,
                     note: Callable = lambda bm, v: "") -> int:
    """Compile ``src``'s kernel ``name`` for sm_90 with NVRTC (no GPU) under every variant at 8 and 16 rows per
    block (``options(bm, v)``: its -D flags) and print registers, spills and ``note(bm, v)``."""
    from tiledsl.compile import KernelSource, compile_source

    for bm in (8, 16):
        for v in variants:
            k = compile_source(KernelSource(name, src, (v["threads"], 1, 1)), "sm_90", options(bm, v))
            print(f"BM={bm} {' '.join(f'{x}={v[x]}' for x in keys)}: {k.registers} registers, spills "
                  f"{k.spill_bytes} B{note(bm, v)}")
    return 0


def sm_count() -> int:
    """The current GPU's SMs (``tiledsl.Target``), read when a variant is built, after :func:`sweep`'s GPU check."""
    from tiledsl.target import Target

    return Target.current().sm_count


def blocks_per_sm(threads: int, registers: int, smem_bytes: int) -> int:
    """Blocks of a variant one SM of the current GPU holds (``tiledsl.occupancy``: threads, registers, shared
    memory and block limits; at least 1)."""
    from tiledsl.occupancy import occupancy
    from tiledsl.target import Target

    return max(1, occupancy(Target.current(), threads, registers, smem_bytes, "ptxas").blocks_per_sm)


def sweep(script: str, out: str, shapes: list[tuple[int, int, int]], make_b: Callable, variants: list[dict],
          keys: tuple[str, ...], proto: Callable) -> int:
    """Run ``proto``'s ``variants`` over ``shapes`` (M, N, K) and write ``out`` (JSON) after each product.

    ``make_b(rng, n, k)`` returns B (K × N) as ``cupy.matmul`` and ``tiledsl.gemm`` take it (a view of W [N, K] for
    x @ W.T); ``proto(a, b, c, bm, v)`` returns (a function that computes C = A·B into ``c``, a dict of facts about
    the launch) for variant ``v`` with ``bm`` rows per block (16 above 8 rows, else 8). C (and any workspace the
    prototype keeps) is NaN before each check, so an unwritten element fails it; the bound is
    ``beside.float32_bound``, as ``beside.checked_call``'s. A variant that fails to compile or launch is a row with
    its error. Exits with a message where no GPU is present.
    """
    from beside import copy_gbps as copy_gbps_of
    from beside import float32_bound
    from gpu_check import gpu_or_exit

    gpu_or_exit(script)
    import cupy as cp

    import tiledsl
    from tiledsl.timing import time_gpu

    copy_gbps = copy_gbps_of(gpu_only=True)
    print(f"copy {copy_gbps:.0f} GB/s (GPU alone)", flush=True)
    rows: list[dict] = []
    gpu = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()

    def write() -> None:  # after every product: a fault later in the run keeps what was measured
        with open(out, "w") as f:
            json.dump(dict(command=f"python {script}", gpu=gpu, copy_gbps=copy_gbps, rows=rows), f, indent=1)

    rng = cp.random.default_rng(1)
    for m, n, k in shapes:
        a = rng.standard_normal((m, k), dtype=cp.float32)
        b = make_b(rng, n, k)
        ref = a.astype(cp.float64) @ b.astype(cp.float64)
        tol = float32_bound(k)
        nbytes = 4 * (m * k + k * n + m * n)
        c = cp.full((m, n), cp.nan, dtype=cp.float32)
        tc = time_gpu(lambda a=a, b=b, c=c: cp.matmul(a, b, out=c), repeat=15, gpu_only=True).median_ms
        tiledsl.gemm(a, b, c)
        tt = time_gpu(lambda a=a, b=b, c=c: tiledsl.gemm(a, b, c), repeat=15, gpu_only=True).median_ms
        print(f"{m}x{n}x{k}: cuBLAS {tc * 1e3:.1f} us ({nbytes / tc / 1e6 / copy_gbps:.2f} of the copy), tiledsl "
              f"{tt * 1e3:.1f} us ({nbytes / tt / 1e6 / copy_gbps:.2f})", flush=True)
        bm = 16 if m > 8 else 8
        for v in variants:
            tag = " ".join(f"{x}={v[x]}" for x in keys)
            try:
                fn, info = proto(a, b, c, bm, v)
                c.fill(cp.nan)
                fn()
                cp.cuda.Device().synchronize()
                err = float(cp.max(cp.abs(c - ref)) / cp.max(cp.abs(ref)))
                ok = bool(err < tol)  # NaN (an unwritten element) compares False
                tp = time_gpu(fn, repeat=15, gpu_only=True).median_ms
            except Exception as e:  # a variant that does not compile or launch is a row, not the end of the run
                print(f"   {tag}: FAIL {type(e).__name__}: {str(e)[:300]}", flush=True)
                rows.append(dict(m=m, n=n, k=k, v=v, error=f"{type(e).__name__}: {str(e)[:300]}"))
                continue
            frac = nbytes / tp / 1e6 / copy_gbps
            print(f"   {tag}: {tp * 1e3:.1f} us, {frac:.2f} of the copy, {tt / tp:.2f}x tiledsl, {tc / tp:.2f}x cuBLAS, "
                  f"{'ok' if ok else f'WRONG (rel. err {err:.1e})'} {info}", flush=True)
            rows.append(dict(m=m, n=n, k=k, v=v, ms=tp, tiledsl_ms=tt, cublas_ms=tc, fraction=frac, ok=ok, err=err,
                             **info))
        write()
    return 0

"""Few-row GEMMs (decode-time ``x @ W``): tiledsl's ``schedule=None`` (the GEMV-style kernel for M ≤ 16) beside
cuBLAS (``cupy.matmul``; bfloat16: ``torch.matmul``) in the same run.

Shapes: M in 1, 4, 16 (16-bit: 1, 4, 8) × (N, K) of llama-3-8B's projections (4096×4096, 14336×4096 up,
4096×14336 down), B row-major (``x @ W``, W [K, N]) and column-major (``x @ W.T``, W [N, K], torch's Linear).
Timing: ``tiledsl.timing.time_gpu`` over streams of 10 back-to-back calls (median of 20 streams, per call;
L2 flushed before each stream): a 1×4096×4096 float32 product reads 64 MB, about 15 µs at HBM speed, so a
single call would time the host path. GB/s counts the compulsory bytes (A, B and C once).

Usage: ``python benchmarks/gemv.py [--out FILE.json]``; without a GPU it prints one line and exits 0.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tiledsl  # noqa: E402
from tiledsl.timing import time_gpu  # noqa: E402

STREAM = 10
NK = ((4096, 4096), (14336, 4096), (4096, 14336))


def rows() -> list[dict]:
    import cupy as cp
    import torch

    out = []
    for dtype, ms in (("float32", (1, 4, 16)), ("float16", (1, 4, 8)), ("bfloat16", (1, 4, 8))):
        for n, k in NK:
            for layout in ("NN", "NT"):
                for m in ms:
                    if dtype == "bfloat16":
                        a = torch.empty((m, k), device="cuda", dtype=torch.bfloat16).uniform_(-1, 1)
                        w = torch.empty((n, k) if layout == "NT" else (k, n), device="cuda",
                                        dtype=torch.bfloat16).uniform_(-1, 1)
                        b = w.t() if layout == "NT" else w
                        c = torch.empty((m, n), device="cuda", dtype=torch.bfloat16)

                        def vendor(a=a, b=b, c=c):
                            torch.matmul(a, b, out=c)
                        vname = "torch.matmul"
                    else:
                        a = cp.random.uniform(-1, 1, (m, k)).astype(dtype)
                        w = cp.random.uniform(-1, 1, (n, k) if layout == "NT" else (k, n)).astype(dtype)
                        b = w.T if layout == "NT" else w
                        c = cp.empty((m, n), dtype)

                        def vendor(a=a, b=b, c=c):
                            cp.matmul(a, b, out=c)
                        vname = "cupy.matmul"

                    def ours(a=a, b=b, c=c):
                        tiledsl.gemm(a, b, c)
                    ours()
                    t_ours = time_gpu(lambda: [ours() for _ in range(STREAM)]).median_ms / STREAM
                    t_vendor = time_gpu(lambda: [vendor() for _ in range(STREAM)]).median_ms / STREAM
                    nbytes = tiledsl.GemmOp(m, n, k, dtype=dtype).compulsory_bytes  # A, B and C once
                    row = dict(dtype=dtype, m=m, n=n, k=k, layout=layout, us=t_ours * 1e3, vendor=vname,
                               vendor_us=t_vendor * 1e3, gbps=nbytes / t_ours / 1e6,
                               vendor_gbps=nbytes / t_vendor / 1e6, ratio=t_vendor / t_ours)
                    out.append(row)
                    print(f"{dtype:8s} {layout} {m:2d}x{n}x{k}: tiledsl {row['us']:7.1f} µs {row['gbps']:6.0f} GB/s | "
                          f"{vname} {row['vendor_us']:7.1f} µs {row['vendor_gbps']:6.0f} GB/s | ratio {row['ratio']:.2f}",
                          flush=True)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=None)
    args = p.parse_args()
    if not tiledsl.gpu_available():
        print("no GPU: benchmarks/gemv.py needs a CUDA GPU")
        return 0
    import cupy as cp

    result = dict(date=dt.date.today().isoformat(), gpu=cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
                  command="python " + " ".join(sys.argv), rows=rows())
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

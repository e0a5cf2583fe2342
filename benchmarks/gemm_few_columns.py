"""Few-column float32 GEMMs (N ≤ 16, DeepBench): the tiled kernels against the rows path (Cᵀ = Bᵀ·Aᵀ on the GEMV
kernel, writing the row-major C as a column-major Cᵀ), and ``schedule=None``, beside cuBLAS.

Run on a GPU: ``python benchmarks/gemm_few_columns.py --out benchmarks/results/gemm_few_columns_h200.json``.

Every distinct product of ``benchmarks/data/deepbench_gemm.csv`` with N ≤ 16 < M and M·K ≥ 2²¹ (the floor of
``tiledsl.gemm.family.runs_as_row``), in its layout (DeepBench's column-major convention: TT = both operands
column-major, NT = A row-major). Three ways per product:

- ``tiled``: ``tiledsl.gemm(a, b, c, schedule=builtin_schedule(op))``: the pick of the shape rules and estimate for
  the product as given (an explicit schedule is never run as rows);
- ``rows``: the rows path with ``gemv_schedule(rows_op(op))``, through ``beside.gemm_as_rows`` (the entry
  ``tiledsl.gemm`` itself takes when ``runs_as_row`` says yes);
- ``schedule=None``: what a user's call does (``runs_as_row`` decides).

Each is checked against a float64 product on a NaN-poisoned C, then timed with tiledsl.timing.time_gpu (CUDA events,
warm-up, L2 flushed, median of 15); cuBLAS (``cupy.matmul``) is timed right before and right after each and averaged.
Bandwidth is the bytes of A, B and C once over the time, beside a device-to-device copy of 2 GiB (the measured HBM
bandwidth).
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from beside import (
    checked_beside_cublas,
    copy_gbps,
    device_gemm_operands,
    gemm_as_rows,
    gemm_op,
    gpu_name,
    measure_each,
    write_results,
)
from gpu_check import gpu_or_exit

import tiledsl

DATA = Path(__file__).resolve().parent / "data" / "deepbench_gemm.csv"


def shapes() -> list[tuple[int, int, int, str]]:
    """Distinct (M, N, K, layout) of the DeepBench set with N ≤ 16 < M and M·K ≥ 2²¹, as the data lists them."""
    from tiledsl.gemm.family import ROW_SWAP_MIN_ELEMENTS

    out: dict = {}
    with open(DATA) as f:
        for r in csv.DictReader(f):
            m, n, k = int(r["m"]), int(r["n"]), int(r["k"])
            layout = ("N" if r["a_t"] == "1" else "T") + ("N" if r["b_t"] == "1" else "T")
            if n <= 16 < m and m * k >= ROW_SWAP_MIN_ELEMENTS:
                out.setdefault((m, n, k, layout), None)
    return list(out)


def measure(m: int, n: int, k: int, layout: str, target, hbm: float) -> list[dict]:
    """The three ways (module docstring) for one product: checked, timed beside cuBLAS, one row each."""
    from tiledsl.gemm.family import builtin_schedule, gemv_schedule, rows_op, runs_as_row

    a, b, ref, c = device_gemm_operands(m, n, k, layout)
    op = gemm_op(m, n, k, layout)
    tiled, as_rows = builtin_schedule(op, target), gemv_schedule(rows_op(op), target)
    ways = {"tiled": (tiled, lambda: tiledsl.gemm(a, b, c, schedule=tiled)),
            "rows": (as_rows, lambda: gemm_as_rows(a, b, c, as_rows)),
            "schedule=None": (as_rows if runs_as_row(op, target) else tiled, lambda: tiledsl.gemm(a, b, c))}
    nbytes = op.compulsory_bytes  # float32 A, B and C, each moved once
    rows = []
    for way, (s, call) in ways.items():
        err, ms, cublas_ms = checked_beside_cublas(call, a, b, c, ref, k, f"{m}x{n}x{k} {layout} {way}")
        row = dict(m=m, n=n, k=k, layout=layout, way=way, schedule=s.to_dict(), ms=ms, cublas_ms=cublas_ms,
                   ratio=cublas_ms / ms, gbps=nbytes / ms / 1e6, cublas_gbps=nbytes / cublas_ms / 1e6,
                   hbm_fraction=nbytes / ms / 1e6 / hbm, rel_err=err)
        rows.append(row)
        print(f"{m:5d}x{n:<2d}x{k:<6d} {layout} {way:13s} {s.kernel:5s} sk{s.split_k:<4d} {ms * 1e3:8.1f} us  "
              f"cuBLAS {cublas_ms * 1e3:8.1f} us  {row['ratio']:.3f}x  {row['gbps']:5.0f} GB/s "
              f"({row['hbm_fraction']:.2f} of the copy)", flush=True)
    return rows


def main() -> int:
    import cupy as cp

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/gemm_few_columns_h200.json")
    args = ap.parse_args()
    gpu_or_exit("benchmarks/gemm_few_columns.py")
    target = tiledsl.Target.current()
    hbm = copy_gbps()
    print(f"device-to-device copy: {hbm:.0f} GB/s")
    rows = measure_each([(*shape, target, hbm) for shape in shapes()], measure)
    write_results(args.out, gpu_name(), [dict(kind="copy", gbps=hbm), *rows], cp.__version__)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

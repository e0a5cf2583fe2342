"""The GEMV-style kernel's ``unroll`` (K steps in flight per thread) with a row-major B, beside cuBLAS.

Run on a GPU: ``python benchmarks/gemv_unroll.py --out benchmarks/results/gemv_unroll_h200.json``.

Products: every distinct (N, K) of ``benchmarks/data/llm_gemm.csv`` as x @ W (row-major x and W) with M = 1, 4, 8
and 16 rows, and six few-column DeepBench products run as rows (Cᵀ = Bᵀ·Aᵀ into the column-major Cᵀ, both operands
column-major). Each runs ``gemv_schedule``'s pick with unroll 1, 2, 4 and 8; each is checked against a float64
product, then timed with tiledsl.timing.time_gpu (CUDA events, warm-up, L2 flushed, median of 15), cuBLAS
(``cupy.matmul``) timed right before and right after and averaged. The choice it informs is
``tiledsl.gemm.family.GEMV_ROW_B_UNROLL``.
"""

from __future__ import annotations

from dataclasses import replace

from beside import (
    checked_beside_cublas,
    device_gemm_operands,
    gemm_as_rows,
    gemm_op,
    llm_weights,
    sweep_main,
)

import tiledsl

FEW_COLUMNS = [(512, 16, 500000), (1024, 16, 500000), (1024, 8, 500000), (7680, 4, 2560), (3072, 1, 1024),
               (6144, 1, 2048)]
UNROLLS = (1, 2, 4, 8)


def shapes() -> list[tuple[int, int, int, str, bool]]:
    """(M, N, K, layout, as rows) of the sweep."""
    out = [(m, n, k, "NN", False) for n, k in llm_weights() for m in (1, 4, 8, 16)]
    return out + [(m, n, k, "TT", True) for m, n, k in FEW_COLUMNS]


def measure(m: int, n: int, k: int, layout: str, as_rows: bool, target) -> list[dict]:
    """One row per unroll for one product (module docstring)."""
    from tiledsl.gemm.family import gemv_schedule, rows_op

    a, b, ref, c = device_gemm_operands(m, n, k, layout)
    op = gemm_op(m, n, k, layout)
    base = gemv_schedule(rows_op(op) if as_rows else op, target)
    rows = []
    for unroll in UNROLLS:
        s = replace(base, unroll=unroll)
        if as_rows:
            def call(s=s):
                gemm_as_rows(a, b, c, s)
        else:
            def call(s=s):
                tiledsl.gemm(a, b, c, schedule=s)
        err, ms, cublas_ms = checked_beside_cublas(call, a, b, c, ref, k, f"{m}x{n}x{k} {layout} unroll {unroll}")
        rows.append(dict(m=m, n=n, k=k, layout=layout, swap=as_rows, unroll=unroll, default_unroll=base.unroll,
                         split_k=base.split_k, ms=ms, cublas_ms=cublas_ms, ratio=cublas_ms / ms, err=err))
    print(f"{m:5d} {n:6d} {k:6d} {layout} sk{base.split_k:<3d} default u{base.unroll}  "
          + "  ".join(f"u{r['unroll']} {r['ratio']:.3f}" for r in rows), flush=True)
    return rows


def main() -> int:
    return sweep_main("benchmarks/gemv_unroll.py", "benchmarks/results/gemv_unroll_h200.json",
                      __doc__.splitlines()[0], lambda args: shapes(), measure)


if __name__ == "__main__":
    raise SystemExit(main())

"""DeepBench's 35-row products on the GEMV-style kernel (blocks of 16 or 8 rows over ``blockIdx.z``) beside
``schedule=None`` and cuBLAS: does a kernel that streams B once per block of rows beat the tiled pick at M = 35?

Run on a GPU: ``python benchmarks/gemv_35_rows.py --out benchmarks/results/gemv_35_rows_h200_2026-12-03.json``.

Products: 35 × 8457 × K for K = 1760, 2048, 2560, 4096 as TT, NT and NN (``beside.gemm_op``: T = a column-major
operand), and 35 × 700 / 1500 × 2048 / 2560 as TT. Variants: ``schedule=None``, and the GEMV schedule
``gemv_schedule`` gives the same product with 16 and with 8 rows, at unroll 1 and 2. Each is checked against a
float64 product on a NaN-poisoned C, then timed beside cuBLAS (``beside.checked_beside_cublas``).
Measured on the H200, 2026-12-03 (``docs/gemm.md``): the GEMV kernel reads B once per block of rows and loses on
every product (0.19–0.88× cuBLAS against 0.71–1.01× for ``schedule=None``), so M > 16 stays on the tiled kernels.
"""

from __future__ import annotations

from dataclasses import replace

from beside import checked_beside_cublas, device_gemm_operands, gemm_op, sweep_main

import tiledsl


def shapes() -> list[tuple[int, int, int, str]]:
    """(M, N, K, layout) of the sweep (module docstring)."""
    out = [(35, 8457, k, layout) for k in (1760, 2048, 2560, 4096) for layout in ("TT", "NT", "NN")]
    return out + [(35, n, k, "TT") for n in (700, 1500) for k in (2048, 2560)]


def widest(extent: int) -> int:
    """The widest vector (4, 2 or 1 elements) that divides ``extent``."""
    return 4 if extent % 4 == 0 else 2 if extent % 2 == 0 else 1


def measure(m: int, n: int, k: int, layout: str, target) -> list[dict]:
    """One row per variant of one product (module docstring)."""
    from tiledsl.gemm.family import gemv_schedule

    a, b, ref, c = device_gemm_operands(m, n, k, layout)
    op = gemm_op(m, n, k, layout)
    variants: dict[str, tiledsl.GemmSchedule | None] = {"schedule=None": None}
    for rows in (16, 8):
        few = replace(op, m=rows, align_a=widest(rows if layout[0] == "T" else k),
                      align_b=widest(k if layout[1] == "T" else n), align_c=widest(n))
        s = gemv_schedule(few, target)
        for unroll in (1, 2):
            variants[f"gemv bm{s.bm} u{unroll} sk{s.split_k}"] = replace(s, unroll=unroll)
    rows_out = []
    for name, s in variants.items():
        def call(s=s):
            tiledsl.gemm(a, b, c, schedule=s)
        err, ms, cublas_ms = checked_beside_cublas(call, a, b, c, ref, k, f"{m}x{n}x{k} {layout} {name}")
        rows_out.append(dict(m=m, n=n, k=k, layout=layout, variant=name, schedule=s.to_dict() if s else None, ms=ms,
                             cublas_ms=cublas_ms, ratio=cublas_ms / ms, err=err))
    print(f"{m} {n} {k} {layout} " + "  ".join(f"{r['variant']} {r['ratio']:.3f}" for r in rows_out), flush=True)
    return rows_out


def main() -> int:
    return sweep_main("benchmarks/gemv_35_rows.py", "benchmarks/results/gemv_35_rows_h200.json",
                      __doc__.splitlines()[0], lambda args: shapes(), measure)


if __name__ == "__main__":
    raise SystemExit(main())

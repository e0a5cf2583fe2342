"""Few rows of x @ W.T (a row-major A times a column-major B, torch's Linear) on the GEMV kernel's register loop,
beside cuBLAS: ``schedule=None``, the pick with ``unroll`` 1 and 2, and (more than one row, A not staged) with K slices
at most 1024, 512 or 256 deep.

Run on a GPU: ``python benchmarks/gemv_nt_loop.py --label <tree> --out benchmarks/results/gemv_nt_loop_h200.json``.

Products: every distinct (N, K) of ``benchmarks/data/llm_gemm.csv`` with M = 1, 4, 8, 12 and 16 rows (float32, A
[M, K] row-major, B = W.T with W [N, K] row-major, C row-major). Each variant is checked against a float64 product on
a NaN-poisoned C, then timed with tiledsl.timing.time_gpu (CUDA events, warm-up, L2 flushed, median of 15), cuBLAS
(``cupy.matmul``) timed right before and right after and averaged; ``frac`` is the bytes a call must move
(A, B and C once) over its time, as a fraction of a device copy measured in the same run. ``--label`` names the tree
that ran (two trees, before and after an emitter change, run in one device session compare kernels, not machines).
The choices it informs are the register loop's order (B's columns first, then A row by row) and
``tiledsl.gemm.family.GEMV_COLUMN_B_ROWS``' unroll.
"""

from __future__ import annotations

from dataclasses import replace

from beside import (
    checked_beside_cublas,
    copy_gbps,
    device_gemm_operands,
    gemm_op,
    llm_weights,
    sweep_main,
)

import tiledsl

ROWS = (1, 4, 8, 12, 16)
DEPTHS = (1024, 512, 256)


def shapes(rows: tuple[int, ...] = ROWS) -> list[tuple[int, int, int]]:
    """(M, N, K) of the sweep: each distinct (N, K) of the LLM data with each of ``rows``."""
    return [(m, n, k) for n, k in llm_weights() for m in rows]


def measure(m: int, n: int, k: int, copy: float, label: str, target) -> list[dict]:
    """One row per variant of one product (module docstring)."""
    from tiledsl.gemm.family import default_schedule

    a, b, ref, c = device_gemm_operands(m, n, k, "NT")
    pick = default_schedule(gemm_op(m, n, k, "NT"), target)
    variants = {"schedule=None": None}
    if pick.kernel == "gemv" and m > 1:
        variants.update({f"unroll {u}": replace(pick, unroll=u) for u in (1, 2) if u != pick.unroll})
        for depth in DEPTHS:  # K slices at most this deep: the rows' slice of A (bm·depth·4 bytes) stays in L1
            split = -(-k // depth)
            if not pick.smem_a and split > pick.split_k:
                for u in (1, 2):
                    variants[f"depth {depth} u{u}"] = replace(pick, unroll=u, split_k=split)
    nbytes = 4 * (m * k + k * n + m * n)
    rows = []
    for name, s in variants.items():
        def call(s=s):
            tiledsl.gemm(a, b, c, schedule=s)
        err, ms, cublas_ms = checked_beside_cublas(call, a, b, c, ref, k, f"{m}x{n}x{k} NT {name}")
        rows.append(dict(label=label, m=m, n=n, k=k, variant=name, schedule=(s or pick).to_dict(), ms=ms,
                         cublas_ms=cublas_ms, ratio=cublas_ms / ms, frac=nbytes / ms / 1e6 / copy, err=err))
    print(f"{label:6s} {m:3d} {n:6d} {k:6d} u{pick.unroll} sk{pick.split_k:<3d} "
          + "  ".join(f"{r['variant']} {r['ratio']:.3f}x ({r['frac']:.2f} copy)" for r in rows), flush=True)
    return rows


def _arguments(ap) -> None:
    ap.add_argument("--label", default="head", help="name of the source tree that ran, recorded in each row")
    ap.add_argument("--rows", default=",".join(map(str, ROWS)), help="comma-separated M values (default: %(default)s)")


def _products(args) -> list[tuple]:
    """(M, N, K, copy GB/s, label) of the sweep; the copy measured once, before it."""
    copy = copy_gbps()
    print(f"device copy {copy:.0f} GB/s", flush=True)
    return [(*shape, copy, args.label) for shape in shapes(tuple(int(r) for r in args.rows.split(",")))]


def main() -> int:
    return sweep_main("benchmarks/gemv_nt_loop.py", "benchmarks/results/gemv_nt_loop_h200.json",
                      __doc__.splitlines()[0], _products, measure, _arguments)


if __name__ == "__main__":
    raise SystemExit(main())

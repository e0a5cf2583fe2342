"""Does copying a misaligned row-major B to a 16-byte pitch first pay? float32 products of odd N, beside cuBLAS.

Run on a GPU: ``python benchmarks/gemm_pack_b.py --out benchmarks/results/gemm_pack_b_h200.json``.

With an odd N the rows of a row-major B (K × N) start at every 4-byte offset, so the tiled kernels read B one element
at a time, about 20 % slower than the same kernel on an aligned B (docs/gemm.md, "A misaligned row-major B"). A copy
of B into a buffer whose rows are Np = N rounded up to 4 elements (a 16-byte pitch, the padding zeroed) reads and
writes B once, after which a product of Np columns runs on 16-byte loads. ``GemmOp`` wants a vector width that
divides N, so the product of the padded B is computed here as Np columns into a padded C, whose first N columns are
then copied into C (a second copy, of C); a kernel allowed to read B's padding could write C directly, so the
figure without that copy is also given (``pack_and_padded_ms``, an estimate of that path). The copies cost a fixed
share of the bytes while the product's time grows with M, so packing can pay only above some M; this sweep measures
where. Per product, in one run: ``schedule=None`` on B as given; the pack alone (a one-element-per-thread kernel,
coalesced loads and stores); ``schedule=None`` on the padded product; pack + padded product; pack + padded product
+ the copy of C, which is what a call that packed B would cost today; cuBLAS (``cupy.matmul``) timed right before
and right after and averaged. Each product is checked against a float64 reference on a NaN-poisoned C, on B as given
and through the padded path. ``tiledsl.timing.time_gpu`` (CUDA events, warm-up, L2 flushed, median of 15). Each row
records the schedule ``schedule=None`` ran on B as given and on the padded product, and whether it was a tuned record
(some odd-N products have one; their padded products have none, so their gain is measured against a tuned kernel).

Products: every float32 product of the data sets with an odd N (``beside.workload_shapes``), and, with
``--m-sweep``, 128…4096 rows of N × K = 50257 × 768 (NN) and 7133 × 2048 (TN) to find the crossover. The choice it
informs: whether ``tiledsl.gemm`` should pack B itself, and from which M. Measured 2026-12-04: pack + padded product
+ copy of C 0.75–1.07× B as given: 1.04–1.07× at 1024–4096 rows of 50257 columns, 1.02–1.03× on three of the other
eleven, losses elsewhere; not built (docs/gemm.md).
"""

from __future__ import annotations

from beside import (
    checked_call,
    device_gemm_operands,
    gemm_op,
    sweep_main,
    workload_shapes,
)

PACK_SRC = r"""
// Dst[r][j] = Src[r * lds + j] for j < N, 0 for N <= j < ldd: one element per thread, loads and stores coalesced.
// Packs B (K rows of N) into a pitch of ldd = N rounded up to 4, or (ldd = N, lds = the padded pitch) takes C back.
extern "C" __global__ void copy_rows(const float* __restrict__ Src, long long lds, float* __restrict__ Dst,
                                     long long ldd, int rows, int N)
{
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= ldd) return;
  for (int r = blockIdx.y; r < rows; r += gridDim.y)
    Dst[(long long)r * ldd + j] = j < N ? Src[(long long)r * lds + j] : 0.f;
}
"""

M_SWEEP = (128, 256, 512, 1024, 2048, 4096)
SWEEP_NK = ((50257, 768, "NN"), (7133, 2048, "TN"))


def products(args) -> list[tuple[int, int, int, str]]:
    """The data sets' float32 products with an odd N and a row-major B (NN or TN) on the tiled kernels (more than 16
    rows), then the ``--m-sweep``."""
    out = [(m, n, k, layout) for (m, n, k, layout) in workload_shapes()
           if n % 2 == 1 and n > 1 and m > 16 and layout[1] == "N"]  # up to 16 rows: the GEMV kernel's groups
    if args.m_sweep:
        out += [(m, n, k, layout) for n, k, layout in SWEEP_NK for m in M_SWEEP if (m, n, k, layout) not in out]
    return out


def padded(n: int) -> int:
    """N rounded up to a multiple of 4 elements: a 16-byte pitch of float32."""
    return -(-n // 4) * 4


def measure(m: int, n: int, k: int, layout: str, target) -> list[dict]:
    """One row: the four timings of the module docstring and cuBLAS's, each product checked."""
    import cupy as cp
    import numpy as np

    import tiledsl
    from tiledsl.gemm.family import GEMM
    from tiledsl.launch import resolve_schedule
    from tiledsl.registry import lookup
    from tiledsl.timing import time_gpu

    copy_rows = cp.RawKernel(PACK_SRC, "copy_rows")
    a, b, ref, c = device_gemm_operands(m, n, k, layout)
    np_ = padded(n)
    bp = cp.empty((k, np_), cp.float32)  # B at a 16-byte pitch, padding zeroed
    cp_ = cp.empty((m, np_), cp.float32)  # the padded product's C

    def copy(src, lds: int, dst, ldd: int, rows: int):
        copy_rows((-(-ldd // 256), min(rows, 65535)), (256,),
                  (src, np.int64(lds), dst, np.int64(ldd), np.int32(rows), np.int32(n)))

    def pack_b():
        copy(b, b.strides[0] // 4, bp, np_, k)

    def padded_product():
        tiledsl.gemm(a, bp, cp_)

    def take_c():
        copy(cp_, np_, c, n, m)

    pack_b()
    if not (bool(cp.array_equal(bp[:, :n], b)) and not bp[:, n:].any()):
        raise SystemExit(f"WRONG PACK for {m}x{n}x{k} {layout}")
    what = f"{m}x{n}x{k} {layout}"

    def whole():  # what a call that packed B would cost today
        pack_b()
        padded_product()
        take_c()

    def without_take():  # the estimate of a kernel that reads B's padding and writes C itself
        pack_b()
        padded_product()

    err = checked_call(lambda: tiledsl.gemm(a, b, c), c, ref, k, what + " (B as given)")
    cp_.fill(cp.nan)  # an element the padded product leaves unwritten reaches C as NaN
    err_p = checked_call(whole, c, ref, k, what + " (B packed)")
    # what schedule=None ran on each: a tuned record (shipped for some odd-N products) or the built-in choice
    ran = {}
    for name, op in (("as_given", gemm_op(m, n, k, layout)), ("padded", gemm_op(m, np_, k, layout))):
        ran[name + "_schedule"] = str(resolve_schedule(GEMM, op, None, target))
        ran[name + "_tuned_record"] = lookup(GEMM, op, target) is not None

    def timer(f) -> float:
        return time_gpu(f, repeat=15).median_ms

    def cublas():
        return cp.matmul(a, b)

    before = timer(cublas)
    as_is, pack_ms, padded_ms = timer(lambda: tiledsl.gemm(a, b, c)), timer(pack_b), timer(padded_product)
    no_take, total = timer(without_take), timer(whole)
    cublas_ms = (before + timer(cublas)) / 2  # cuBLAS right before and right after, averaged
    row = dict(m=m, n=n, k=k, layout=layout, n_padded=np_, ms=as_is, pack_ms=pack_ms, padded_ms=padded_ms,
               pack_and_padded_ms=no_take, packed_call_ms=total, cublas_ms=cublas_ms, ratio=cublas_ms / as_is,
               ratio_packed_call=cublas_ms / total, ratio_without_take=cublas_ms / no_take, gain=as_is / total,
               pack_gbps=4 * k * (n + np_) / pack_ms / 1e6, err=err, err_packed=err_p, **ran)
    print(f"{what:24s} as given {as_is:.4f} ms ({row['ratio']:.2f}x cuBLAS)  pack {pack_ms * 1e3:6.1f} us "
          f"({row['pack_gbps']:.0f} GB/s)  padded {padded_ms:.4f} ms  all three {total:.4f} ms "
          f"({row['ratio_packed_call']:.2f}x cuBLAS, {row['gain']:.2f}x as given; without taking C back "
          f"{row['ratio_without_take']:.2f}x){'  [as given: a tuned record]' if ran['as_given_tuned_record'] else ''}",
          flush=True)
    return [row]


def main() -> int:
    return sweep_main("benchmarks/gemm_pack_b.py", "benchmarks/results/gemm_pack_b_h200.json",
                      __doc__.splitlines()[0], products, measure,
                      lambda ap: ap.add_argument("--m-sweep", action="store_true",
                                                 help=f"also M = {M_SWEEP} of N × K × layout {SWEEP_NK}"))


if __name__ == "__main__":
    raise SystemExit(main())

"""One profiled ``schedule=None`` call of a few-row float32 product, for Nsight Compute.

Run on a GPU (the profile starts at ``cudaProfilerStart``, after a warm-up call that compiles and caches):

    ncu --clock-control none --profile-from-start off -k regex:tiledsl_gemv --section SpeedOfLight \\
        --section Occupancy --section SchedulerStats --section WarpStateStats python benchmarks/ncu_gemv.py 16 22016 4096 NT

Arguments: M N K LAYOUT, LAYOUT ``NN`` (x @ W, W [K, N] row-major) or ``NT`` (x @ W.T, W [N, K] row-major);
``--variant`` (any of ``benchmarks/gemv_hbm.py``'s ``VARIANTS``) profiles that variant of the pick instead;
``--precision 3xtf32`` the call with that precision (9-16 rows: the tensor-core GEMV kernel). Without
``-k regex:tiledsl_gemv`` a split-K call's profile also holds its split-K sum. Prints the largest error relative to
CuPy's product, so a profile of a wrong result is seen as one.
"""

import argparse
from dataclasses import replace

import cupy as cp
from beside import gemm_op
from gemv_hbm import VARIANTS, variant_schedule

import tiledsl


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("m", type=int)
    ap.add_argument("n", type=int)
    ap.add_argument("k", type=int)
    ap.add_argument("layout", choices=("NN", "NT"))
    ap.add_argument("--variant", nargs="*", default=[], choices=VARIANTS)
    ap.add_argument("--precision", choices=("ieee", "3xtf32"), default="ieee")
    args = ap.parse_args()
    op = replace(gemm_op(args.m, args.n, args.k, args.layout), precision=args.precision)
    s = variant_schedule(op, tiledsl.Target.current(), tuple(args.variant))
    print(f"schedule: {'schedule=None' if s is None else s}")
    a = cp.random.rand(args.m, args.k, dtype=cp.float32)
    if args.layout == "NN":
        b = cp.random.rand(args.k, args.n, dtype=cp.float32)
    else:
        b = cp.random.rand(args.n, args.k, dtype=cp.float32).T
    c = cp.empty((args.m, args.n), cp.float32)
    tiledsl.gemm(a, b, c, schedule=s, precision=args.precision)  # warm-up: compile, cache the launch
    cp.cuda.Device().synchronize()
    cp.cuda.profiler.start()
    tiledsl.gemm(a, b, c, schedule=s, precision=args.precision)
    cp.cuda.Device().synchronize()
    cp.cuda.profiler.stop()
    ref = a @ b
    print(f"max |C - A@B| / max |A@B| = {float(cp.abs(c - ref).max() / cp.abs(ref).max()):.3e}")


if __name__ == "__main__":
    main()

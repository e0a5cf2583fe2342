"""Few-row products (M = 1…16) with ``schedule=None`` against the measured HBM bandwidth, beside cuBLAS.

Run on a GPU: ``python benchmarks/gemv_hbm.py --out benchmarks/results/gemv_hbm_h200.json``.

The question it answers: how close does ``schedule=None`` come to the memory system on decode-time products
(``x @ W`` with a few rows), where the weight matrix is read once and nothing else can be the bound? Products: every
distinct (N, K) of ``benchmarks/data/llm_gemm.csv`` with M = 1…16 rows (``--m`` picks), as ``x @ W`` (row-major x
and W, "NN") and as torch's Linear (W [N, K] read as its transpose, a column-major B, "NT"). Each is checked against
a float64 product on a NaN-poisoned C (a wrong or unwritten element exits), then timed with
``tiledsl.timing.time_gpu`` (CUDA events, warm-up, L2 flushed before each call, median of 15), cuBLAS
(``cupy.matmul``) timed right before and right after and averaged. GB/s counts the compulsory bytes (A, B and C
once); the fraction is of a device-to-device copy of 2 GiB timed in the same run (``beside.copy_gbps``).

Each product is timed twice, tiledsl and cuBLAS alike. First as every sweep times (``time_gpu``'s default: the L2
flush writes its buffer, and the events bracket the host's call): those figures are ``ms`` / ``cublas_ms`` /
``hbm_fraction``, comparable with earlier runs. Then as the GPU's work alone (``time_gpu(gpu_only=True)``: an L2
flush that leaves no dirty line to write back inside the timed region, and the stream held until the call is
enqueued): ``gpu_ms`` / ``cublas_gpu_ms`` / ``gpu_hbm_fraction``, against a copy timed the same way. The first way
is expected to charge a product up to the L2's size in write-backs of the flush (about 12 µs at 4 TB/s on an H200)
and, where the host is slower than the flush, part of the call's launch; runs 1–6 fit a fixed 13–18 µs, most of
the gap to the copy on a 64 MiB product (16 µs at copy speed; docs/gemm.md). The share of the HBM bandwidth is a
property of the kernel, so the summary reports both and the target is read on the second. ``compare_runs.py``
reads ``ratio``, the first way's, as before.

A product of a few MiB cannot reach the copy's bandwidth: at 4 TB/s 16 MiB take 4 µs, about what a launch costs.
The summary therefore counts the products of at least ``--min-mib`` (64 MiB: 16 µs or more at HBM speed) apart
from the rest; every row is in the JSON either way. Each row also holds a kernel that only reads the product's own
compulsory bytes, timed GPU alone (``beside.read_gbps``: ``same_size_read_gbps``; ``gpu_same_size_fraction``: the
product's GB/s over it): what the memory system gives a read of that size, its ramp and tail included, beside the
2 GiB copy's rate (a GEMV reads and hardly writes; a copy of the same bytes would write half of them).
"""

from __future__ import annotations

import argparse
import math

from beside import (
    bracketed,
    checked_beside_cublas,
    copy_gbps,
    device_gemm_operands,
    gemm_op,
    gpu_name,
    llm_weights,
    measure_each,
    read_gbps,
    write_results,
)
from gpu_check import gpu_or_exit

import tiledsl
from tiledsl import dependent

TARGET_FRACTION = 0.85
"""The share of the measured copy bandwidth a few-row product's ``schedule=None`` is meant to reach."""


def shapes(ms: tuple[int, ...] = tuple(range(1, 17))) -> list[tuple[int, int, int, str]]:
    """(M, N, K, layout) of the sweep: every distinct (N, K) of the LLM set × ``ms`` × NN and NT."""
    return [(m, n, k, layout) for n, k in llm_weights() for layout in ("NN", "NT") for m in ms]


VARIANTS = ("spare", "twelve", "cap168", "ring", "fused", "lanes", "registers", "dmma", "fma", "groups")
"""``--variant`` (any of them; none: ``schedule=None`` as it is), each applied to ``schedule=None``'s FMA GEMV pick
(``tiledsl.gemm.family.gemv_schedule``; where ``schedule=None`` takes the FP64 tensor-core kernel,
``gemv_dmma_default``, the FMA pick it replaced, which ``fma`` alone times) where it applies: ``spare`` a spare slot in staged A's ring of B (``GemmSchedule.spare_slot``; the pick stages A with a
row-major B), ``twelve`` 12 rows per block for 9-12 rows, ``cap168`` registers capped at 168 (``min_blocks`` 3) where
the pick keeps A in registers with a column-major B from 8 rows, ``ring`` the column-major-B kernel with a ring and
its lanes in groups along K (``tiledsl.gemm.family.gemv_ring_column_b``) where the pick has 8, 12 or 16 rows per block
(5-16 rows; ``cap168`` then does not apply), ``fused`` the split-K slices summed in the kernel (one launch,
``split_k_fused``) where the pick keeps A in registers and sums them with a second kernel (x @ W at 1-4 rows and
with an odd N, x @ W.T where it splits K: eleven of the twelve 64-96 MiB products of 1-4 rows stood at 0.65-0.80 of
the copy in run 7, where a fixed few µs per call weigh), ``lanes`` x @ W.T's kernel with A in registers and its lanes
in groups along K (``tiledsl.gemm.family.gemv_lanes_column_b``: 16 lanes, ``GEMV_COLUMN_B_LANES``) where the pick
has 8, 12 or 16 rows per block (in place of the pick, A staged or not; where the pick already is that form it runs
as it is; ``ring`` and ``cap168`` then do not apply), ``registers`` the pick before
``gemv_lanes_split_k`` (x @ W.T with A in registers and 32 lanes along K where the pick has its lanes in groups),
``dmma`` the GEMV kernel on the FP64 tensor cores (``tiledsl.gemm.family.gemv_dmma_schedule``: float32 inputs widened
exactly, float64 sums; x @ W and x @ W.T with K a multiple of 4, x @ W.T with N too: x @ W reads a W whose rows
are not 16-byte aligned 4 bytes at a time) in place of the pick (with ``fused`` its slices
summed in the kernel, with ``ring`` its ring of k16 steps, ``fragment_prefetch``, with ``groups`` without it; the
other variants then do not apply). Where none applies the product runs ``schedule=None``."""


def variant_schedule(op, target, variants=()):
    """``schedule=None``'s pick for ``op`` on ``target`` changed as ``variants`` say (:data:`VARIANTS`), or None
    where nothing changes (the call then passes ``schedule=None``)."""
    from dataclasses import replace

    from tiledsl.gemm import default_schedule
    from tiledsl.gemm.family import (
        gemv_base_schedule,
        gemv_dmma_schedule,
        gemv_lanes_column_b,
        gemv_mma_form,
        gemv_mma_shape,
        gemv_ring_column_b,
        gemv_schedule,
        gemv_schedule_before_lanes,
        gemv_twelve_rows_fit,
    )

    pick = default_schedule(op, target)
    if pick.kernel != "gemv" or pick.mma == "mma_sync":  # the variants are the GEMV kernels' (not precision="3xtf32"'s)
        return None
    if "dmma" in variants:  # in place of the pick (None where the FP64 kernel does not apply: schedule=None)
        s = gemv_dmma_schedule(op, target)
        if s is not None and ("ring" in variants or "groups" in variants):  # with or without its ring of k16 steps
            ring = "ring" in variants  # (fragment_prefetch; min_blocks and K slices for its registers), W read as
            shape = replace(gemv_mma_shape(s.bn, s.rn, s.unroll, "dmma", ring=ring), vec=s.vec)  # the pick reads it
            s = gemv_mma_form(op, target, shape)
        if s is not None and "fused" in variants and s.split_k > 1:
            s = replace(s, split_k_fused=True)
        return s
    fma = s = pick if pick.mma == "fma" else gemv_schedule(op, target)  # the FMA GEMV pick (gemv_dmma_default aside)
    if "registers" in variants and s.k_lanes != 32 and not s.smem_a:
        s = gemv_schedule_before_lanes(op, target)
    if "twelve" in variants and gemv_twelve_rows_fit(op.m):
        s = replace(s, bm=12)
    if "spare" in variants and s.smem_a and op.layout_b == "row":
        s = replace(s, spare_slot=True)
    if "ring" in variants and op.layout_b == "col":
        s = gemv_ring_column_b(op, replace(gemv_base_schedule(op, target), bm=s.bm), target) or s
    if "lanes" in variants and op.layout_b == "col":
        s = gemv_lanes_column_b(op, replace(gemv_base_schedule(op, target), bm=s.bm), target) or s
    if "fused" in variants and not s.smem_a and s.split_k > 1 and not s.split_k_fused:
        s = replace(s, split_k_fused=True)
    if "cap168" in variants and not s.smem_a and op.layout_b == "col" and op.m >= 8 and s.k_lanes == 32:
        s = replace(s, min_blocks=3)
    if s == fma and "fma" not in variants:  # no variant applied: schedule=None as it is
        return None
    return None if s == pick else s


def measure(m: int, n: int, k: int, layout: str, hbm_gbps: float, gpu_hbm_gbps: float,
            variants: tuple[str, ...] = (), precision: str = "ieee") -> list[dict]:
    """One row for one product: ``schedule=None`` (or its ``variants``, :func:`variant_schedule`) checked, timed beside
    cuBLAS both ways (the module's docstring), GB/s and its share of the copy timed the same way; ``precision`` as
    ``tiledsl.gemm``'s ("3xtf32": checked against the same float32 bound)."""
    from dataclasses import replace

    import cupy as cp

    from tiledsl.timing import time_gpu

    a, b, ref, c = device_gemm_operands(m, n, k, layout)
    s = variant_schedule(replace(gemm_op(m, n, k, layout), precision=precision), tiledsl.Target.current(), variants)
    label = ("schedule=None" if s is None else "+".join(variants)) + ("" if precision == "ieee" else f" {precision}")

    def call():
        return tiledsl.gemm(a, b, c, schedule=s, precision=precision)

    err, ms, cublas_ms = checked_beside_cublas(call, a, b, c, ref, k, f"{m}x{n}x{k} {layout} {label}")
    gpu_ms, cublas_gpu_ms = bracketed(call, lambda: cp.matmul(a, b),
                                      lambda f: time_gpu(f, repeat=15, gpu_only=True).median_ms)
    nbytes = gemm_op(m, n, k, layout).compulsory_bytes  # float32 A, B and C, each moved once
    same = read_gbps(nbytes)  # a kernel reading the product's own bytes, GPU alone
    row = dict(m=m, n=n, k=k, layout=layout, mib=nbytes / 2**20, ms=ms, cublas_ms=cublas_ms, ratio=cublas_ms / ms,
               gbps=nbytes / ms / 1e6, cublas_gbps=nbytes / cublas_ms / 1e6, hbm_fraction=nbytes / ms / 1e6 / hbm_gbps,
               gpu_ms=gpu_ms, cublas_gpu_ms=cublas_gpu_ms, gpu_ratio=cublas_gpu_ms / gpu_ms,
               gpu_hbm_fraction=nbytes / gpu_ms / 1e6 / gpu_hbm_gbps, same_size_read_gbps=same,
               gpu_same_size_fraction=nbytes / gpu_ms / 1e6 / same, err=err,
               variant="none" if s is None else "+".join(variants), schedule=None if s is None else s.to_dict(),
               precision=precision)
    print(f"{m:2d}x{n:<6d}x{k:<6d} {layout} {row['mib']:8.1f} MiB  {ms * 1e3:8.1f} us ({row['hbm_fraction']:.2f} of "
          f"the copy, {row['ratio']:.2f}x cuBLAS)  GPU alone {gpu_ms * 1e3:8.1f} us ({row['gpu_hbm_fraction']:.2f}, "
          f"{row['gpu_ratio']:.2f}x; {row['gpu_same_size_fraction']:.2f} of a read of its bytes)", flush=True)
    return [row]


def summary(rows: list[dict], min_mib: float, key: str = "hbm_fraction", ratio: str = "ratio") -> dict:
    """Per group (at least ``min_mib`` of compulsory bytes, and smaller): products, how many reach
    :data:`TARGET_FRACTION` of the copy, the lowest and the geomean fraction (``key``), and the geomean ratio to
    cuBLAS (``ratio``)."""
    out = {}
    for name, group in (("large", [r for r in rows if r["mib"] >= min_mib]),
                        ("small", [r for r in rows if r["mib"] < min_mib])):
        if not group:
            continue
        fr = [r[key] for r in group]
        out[name] = dict(products=len(group), at_target=sum(f >= TARGET_FRACTION for f in fr), lowest=min(fr),
                         geomean_fraction=math.exp(sum(map(math.log, fr)) / len(fr)),
                         geomean_ratio=math.exp(sum(math.log(r[ratio]) for r in group) / len(group)))
    return out


def main() -> int:
    import cupy as cp

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/gemv_hbm_h200.json")
    ap.add_argument("--m", type=int, nargs="+", default=list(range(1, 17)), help="rows M (default 1…16)")
    ap.add_argument("--min-mib", type=float, default=64.0,
                    help="products of at least this many MiB (A, B, C) are summarised apart from smaller ones")
    ap.add_argument("--variant", nargs="*", choices=VARIANTS, default=[],
                    help="schedule=None's GEMV pick with a spare slot in staged A's ring of B (spare), 12 rows per "
                         "block for 9-12 rows (twelve), registers capped at 168 for x @ W.T with A in registers "
                         "(cap168), x @ W.T's ring with its lanes in groups along K (ring), the slices summed in "
                         "the kernel (fused), x @ W.T with A in registers and its lanes in groups (lanes), the pick "
                         "before its lanes in groups (registers), the GEMV kernel on the FP64 tensor cores in place "
                         "of the pick (dmma), each where it applies (default: none, schedule=None as it is)")
    ap.add_argument("--precision", choices=("ieee", "3xtf32"), default="ieee",
                    help="tiledsl.gemm's precision (3xtf32: x @ W and x @ W.T with 9-16 rows on the tensor cores, each input in "
                         "two TF32 parts; other products exact; default ieee)")
    ap.add_argument("--layouts", nargs="+", choices=("NN", "NT"), default=["NN", "NT"],
                    help="x @ W (NN) and/or x @ W.T (NT) (default: both)")
    ap.add_argument("--plain-launch", action="store_true",
                    help="launch the split-K sum plainly, not as a programmatic dependent launch of the GEMV kernel "
                         "(sm_90+; the same as TILEDSL_DEPENDENT_LAUNCH=0): the A/B of tiledsl.dependent")
    args = ap.parse_args()
    if args.plain_launch:
        dependent.set_enabled(False)
    if bad := [m for m in args.m if not 1 <= m <= 16]:
        ap.error(f"--m {bad}: few-row products have 1 to 16 rows")
    if not args.min_mib > 0:
        ap.error(f"--min-mib {args.min_mib}: must be a positive number of MiB")
    gpu_or_exit("benchmarks/gemv_hbm.py")
    hbm, gpu_hbm = copy_gbps(), copy_gbps(gpu_only=True)
    print(f"device-to-device copy: {hbm:.0f} GB/s (the GPU alone: {gpu_hbm:.0f} GB/s)", flush=True)
    todo = [shape for shape in shapes(tuple(args.m)) if shape[3] in args.layouts]
    rows = measure_each([(*shape, hbm, gpu_hbm, tuple(args.variant), args.precision) for shape in todo], measure)
    result = {how: summary(rows, args.min_mib, *keys) for how, keys in
              (("call", ("hbm_fraction", "ratio")), ("gpu_only", ("gpu_hbm_fraction", "gpu_ratio")),
               ("gpu_only_vs_same_size_read", ("gpu_same_size_fraction", "gpu_ratio")))}
    for how, groups in result.items():
        for name, s in groups.items():
            size = f"at least {args.min_mib:g} MiB" if name == "large" else f"under {args.min_mib:g} MiB"
            print(f"{how}, {name} ({size}): {s['at_target']} of {s['products']} at {TARGET_FRACTION:.0%} of the copy "
                  f"or more; lowest {s['lowest']:.2f}, geomean {s['geomean_fraction']:.2f}; geomean "
                  f"{s['geomean_ratio']:.2f}x cuBLAS")
    write_results(args.out, gpu_name(), [dict(kind="copy", gbps=hbm, gpu_only_gbps=gpu_hbm,
                                              dependent_launch=dependent.enabled()),
                                         dict(kind="summary", **result), *rows], cp.__version__)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

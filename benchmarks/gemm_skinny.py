"""Skinny float32 GEMMs: schedule=None and hand-picked small-tile / split-K / stream-K schedules beside cuBLAS.

Run on a GPU: ``python benchmarks/gemm_skinny.py --out benchmarks/results/gemm_skinny_h200.json`` (``--set tall``:
the tall-thin DeepBench shapes, ``--out benchmarks/results/gemm_tall_h200.json``; ``--set wide``: short and
wide ones, ``--out benchmarks/results/gemm_wide_h200.json``; ``--set subwave``: every data-set product whose
``schedule=None`` tiled pick fills less than one wave, against stream-K tiles,
``--out benchmarks/results/gemm_subwave_h200.json``; ``--set oddn``: the odd-N LM head at one and two blocks per
SM, ``--out benchmarks/results/gemm_odd_n_h200.json``; ``--set tallsplit``: every data-set product of the
tall-thin rule with 16 and 32 K slices and the tunes' tiles, ``--out benchmarks/results/gemm_tall_split_h200.json``;
``--set misaligned``: every data-set product of ``misaligned_row_b_schedule`` (a row-major B with an odd N) against
the plain estimate it replaces, ``--out benchmarks/results/gemm_misaligned_h200.json``; ``--set bigtile``: every
data-set product of M, N ≥ 1024 on the estimate's tile against the data pass's 256×128×8 stream-K winner;
``--set tallwide``: every tiled data-set product of 64 to 128 columns against the shipped winners' 256-row and 8×8
tiles with 8 and 16 K slices; ``--set wavetail``: the products of the wave-tail rule, in the data sets and a
sample off them, against the estimate's pick it replaces. In these three sets "built-in" is ``builtin_schedule``,
not ``schedule=None``, which would run the shipped records of the data pass's products. ``--set fitrows``: every
data-set product with M in 17…63 not a multiple of 16 (M = 35), and a few products off the data sets, on block tiles
of 36, 40 and 48 rows (tiles whose loads split unevenly over the threads),
``--out benchmarks/results/gemm_fit_rows_h200.json``; ``--set fitbounds``: M = 35 across N = 512…4096 and
K = 256…8192 on the estimate's pick, the 64×128 preset and both 48-row presets,
``--out benchmarks/results/gemm_fit_bounds_h200.json``; ``--set fitsplit``: M = 35 across N = 700…2047 and
K = 256…8192 (and a few off that grid) on the built-in pick and the 48×64 stream-K preset against split-K on the
data pass's 16×64 and 64×64 winners, ``--out benchmarks/results/gemm_fit_split_h200.json``; ``--set onerow``: every
data-set product of one 128-row tile row (M 65…128, N ≥ 1024, K ≥ 2048) and a few off them, on the built-in pick
(the one-row rule's) and the earlier rules' against the data pass's 128×256×16 tile with 1 to 16 K slices and
stream-K,
``--out benchmarks/results/gemm_one_row_h200_<date>.json``).

``--set skinny`` (default): 35×8457×2560 (DeepBench), 128×4096×4096 (llama-3 o_proj at 128 tokens), 16×4096×4096
and 4096×32×4096 (row-major A and B). ``--set tall``: DeepBench's tall-thin products, M in the thousands, N = 16,
32 or 64, in their layouts (NT: row-major A, column-major B; TT: both column-major). ``--set wide``: M from 35 to
1024 with N from 700 to 50257 (35×8457, 128×50257 and kin). Every schedule is checked
against a float64 product, then timed with tiledsl.timing.time_gpu (CUDA events, warm-up, L2 flushed, median of
30); cuBLAS (``cupy.matmul``) is timed right before and right after each schedule and averaged. The skinny set
includes the 200-trial tune's winner for 35×8457×2560 (16x64x32 t4x4 cp3 p4) with and without its padding.
"""

from __future__ import annotations

import argparse

import numpy as np
from beside import gemm_beside_cublas, gemm_op, gemm_operands, workload_shapes, write_results
from gpu_check import gpu_or_exit

import tiledsl

SHAPES = [(35, 8457, 2560, "NN"), (128, 4096, 4096, "NN"), (16, 4096, 4096, "NN"), (4096, 32, 4096, "NN")]
T4 = dict(rm=4, rn=4, wm=8, wn=64)
SCHEDULES = {
    "schedule=None": None,
    "16x64x32 t4x4 w8x64 cp3 p4": dict(bm=16, bn=64, bk=32, **T4, stages=3, unroll=8, smem_pad=4, swizzle=16,
                                       min_blocks=2),
    "16x64x32 t4x4 w8x64 cp3 p0": dict(bm=16, bn=64, bk=32, **T4, stages=3, unroll=8, swizzle=16, min_blocks=2),
    "16x64x32 t4x4 w8x64 db p0": dict(bm=16, bn=64, bk=32, **T4, unroll=8, swizzle=16, min_blocks=2),
    "16x64x32 t4x4 w8x64 db p0 u32": dict(bm=16, bn=64, bk=32, **T4, unroll=32, swizzle=16, min_blocks=2),
    "32x64x32 t4x4 cp3 p4 sk2": dict(bm=32, bn=64, bk=32, **T4, stages=3, unroll=8, smem_pad=4, min_blocks=2,
                                     split_k=2),
    "32x64x32 t4x4 cp3 p0 sk2": dict(bm=32, bn=64, bk=32, **T4, stages=3, unroll=8, min_blocks=2, split_k=2),
    "32x64x32 t4x4 db p0 sk2": dict(bm=32, bn=64, bk=32, **T4, unroll=32, min_blocks=2, split_k=2),
    "64x128x32 t8x4 cp3 p4 sk2": dict(bm=64, bn=128, bk=32, rm=8, rn=4, wm=16, wn=64, stages=3, unroll=32,
                                      smem_pad=4, swizzle=16, split_k=2),
    "64x128x32 t8x4 cp3 p0 sk2": dict(bm=64, bn=128, bk=32, rm=8, rn=4, wm=16, wn=64, stages=3, unroll=32,
                                      swizzle=16, split_k=2),
    "64x128x32 t8x4 db p0 sk2": dict(bm=64, bn=128, bk=32, rm=8, rn=4, wm=16, wn=64, unroll=32, swizzle=16,
                                     split_k=2),
    "64x128x8 t8x8 db sk4": dict(bm=64, bn=128, bk=8, rm=8, rn=8, unroll=8, split_k=4),
    "64x128x16 t4x8 db sk4": dict(bm=64, bn=128, bk=16, rm=4, rn=8, unroll=16, split_k=4),
    "64x256x8 t8x16 db fp sk4": dict(bm=64, bn=256, bk=8, rm=8, rn=16, unroll=8, split_k=4, fragment_prefetch=True),
    "64x128x8 t8x8 db sk8": dict(bm=64, bn=128, bk=8, rm=8, rn=8, unroll=8, split_k=8),
}


TALL_SHAPES = [(7680, 32, 2560, "TT"), (7680, 32, 2560, "NT"), (4096, 32, 4096, "NT"), (3072, 32, 1024, "NT"),
               (4096, 64, 4096, "NT"), (7680, 64, 2560, "NT"), (7680, 16, 2560, "NT"), (4096, 16, 4096, "NT")]


def _tall_schedules() -> dict:
    """Tiles as narrow as N (bn 16, 32, 64) and tall (bm 64..256), each with split-K 1..8 or stream-K."""
    tiles = {"256x32x32 t8x4": dict(bm=256, bn=32, bk=32, rm=8, rn=4, unroll=32),
             "128x32x32 t4x4": dict(bm=128, bn=32, bk=32, rm=4, rn=4, unroll=32),
             "128x32x16 t8x4": dict(bm=128, bn=32, bk=16, rm=8, rn=4, unroll=16),
             "64x64x16 t4x4": dict(bm=64, bn=64, bk=16, rm=4, rn=4, unroll=16),
             "128x64x16 t8x4": dict(bm=128, bn=64, bk=16, rm=8, rn=4, unroll=16),
             "256x16x32 t8x2 v2": dict(bm=256, bn=16, bk=32, rm=8, rn=2, vec=2, unroll=32),
             "128x16x32 t4x2 v2": dict(bm=128, bn=16, bk=32, rm=4, rn=2, vec=2, unroll=32)}
    out: dict = {"schedule=None": None}
    for name, kw in tiles.items():
        for split in (1, 2, 4, 8):
            out[f"{name} sk{split}"] = dict(kw, split_k=split)
        out[f"{name} streamk"] = dict(kw, stream_k=True)
    return out


WIDE_SHAPES = [(35, 8457, 2560, "TT"), (35, 8457, 4096, "TT"), (35, 8457, 4096, "NT"), (35, 1500, 2560, "TT"),
               (128, 50257, 768, "NN"), (176, 1500, 1408, "TT"), (1024, 700, 512, "TT")]


def _wide_schedules() -> dict:
    """Short rows (bm 32, 64), wide columns (bn 64, 128), each with split-K 4..32 or stream-K."""
    tiles = {"64x128x8 t8x8": dict(bm=64, bn=128, bk=8, rm=8, rn=8, unroll=8),
             "64x128x16 t4x8": dict(bm=64, bn=128, bk=16, rm=4, rn=8, unroll=16),
             "32x128x16 t4x8": dict(bm=32, bn=128, bk=16, rm=4, rn=8, unroll=16),
             "64x64x16 t4x4": dict(bm=64, bn=64, bk=16, rm=4, rn=4, unroll=16)}
    out: dict = {"schedule=None": None}
    for name, kw in tiles.items():
        for split in (1, 4, 8, 16, 32):
            out[f"{name} sk{split}"] = dict(kw, split_k=split)
        out[f"{name} streamk"] = dict(kw, stream_k=True)
    return out


def _subwave_shapes(target) -> list:
    """The data sets' float32 products (M, N > 16, not run as rows) whose ``schedule=None`` pick is a tiled kernel
    with fewer tiles of C than the device holds at two blocks per SM (K slices not counted). The recorded run
    (gemm_subwave_h200.json) was before ``sub_wave_schedule``; since it, ``schedule=None`` is that rule's schedule
    on the products of its class (the "128x128x8 t8x8 streamk" variant), not the estimate's pick."""
    from tiledsl.gemm.family import runs_as_row
    from tiledsl.gemm.kernel_plan import tile_count

    out = []
    for (m, n, k, layout) in workload_shapes():
        op = gemm_op(m, n, k, layout)
        if m <= 16 or n <= 16 or runs_as_row(op, target):
            continue
        s = tiledsl.plan(op, device=target).schedule
        if s.kernel == "tiled" and tile_count(op, s) < 2 * target.sm_count:
            out.append((m, n, k, layout))
    return out


def _subwave_schedules() -> dict:
    """Stream-K over every SM with the tiles the tuner picked for 1024×700×512 (64×64, 256×64) and the short-wide
    rule's 64×128, beside a 128×128 one."""
    return {"schedule=None": None,
            "64x128x16 t4x8 streamk": dict(bm=64, bn=128, bk=16, rm=4, rn=8, unroll=16, stream_k=True),
            "64x64x16 t4x8 w64x16 streamk": dict(bm=64, bn=64, bk=16, rm=4, rn=8, wm=64, wn=16, unroll=8,
                                                 stream_k=True),
            "256x64x8 t16x8 streamk": dict(bm=256, bn=64, bk=8, rm=16, rn=8, unroll=8, stream_k=True),
            "128x128x8 t8x8 streamk": dict(bm=128, bn=128, bk=8, rm=8, rn=8, unroll=8, stream_k=True)}


def _tall_class_shapes(target) -> list:
    """The data sets' float32 products that ``schedule=None`` gives to the tall-thin rule (``tall_thin_schedule``)."""
    from tiledsl.gemm.family import tall_thin_schedule

    return [(m, n, k, layout) for (m, n, k, layout) in workload_shapes()
            if tall_thin_schedule(gemm_op(m, n, k, layout), target) is not None]


def _tall_split_schedules(m: int, n: int, k: int, layout: str) -> dict:
    """The tall-thin rule's tile (128×32 for N ≤ 32, 128×64 up to 64) with 16 and 32 K slices, beside the winners of
    30-trial tunes of 2048×16×2048 (64×16×8, one warp, four stages) and 1760×64×1760 (128×64×16, 8×8 thread tiles)
    with 16 and 32 slices (``benchmarks/tune_workloads.py --data``, 2026-12-02)."""
    tall = dict(bk=16, rm=8, rn=4, unroll=16, swizzle=8)
    out: dict = {"schedule=None": None}
    bn = 32 if n <= 32 else 64
    for split in (16, 32):
        out[f"128x{bn}x16 t8x4 sk{split}"] = dict(tall, bm=128, bn=bn, split_k=split)
    if n <= 16:
        for split in (16, 32):
            out[f"64x16x8 t8x4 w64x16 cp4 sk{split}"] = dict(bm=64, bn=16, bk=8, rm=8, rn=4, wm=64, wn=16, stages=4,
                                                              unroll=8, swizzle=8, min_blocks=2, split_k=split)
    if n > 32:
        out["128x64x16 t8x8 w32x64 sk16"] = dict(bm=128, bn=64, bk=16, rm=8, rn=8, wm=32, wn=64, unroll=16,
                                                 swizzle=8, split_k=16)
    return out


ODD_N_SHAPES = [(128, 50257, 768, "NN"), (2048, 50257, 768, "NN"), (128, 50256, 768, "NN")]
T128X128 = dict(bm=128, bn=128, bk=8, rm=8, rn=8, unroll=8)
ODD_N_SCHEDULES = {
    "schedule=None": None,
    "128x128x8 sk2 1 block/SM": dict(T128X128, split_k=2, min_blocks=1),
    "128x128x8 sk2 2 blocks/SM": dict(T128X128, split_k=2, min_blocks=2),
    "128x128x8 2 blocks/SM": dict(T128X128, min_blocks=2),
    "128x128x8 w16x128 2 blocks/SM": dict(T128X128, wm=16, wn=128, min_blocks=2),
    "128x128x8 w16x128 1 block/SM": dict(T128X128, wm=16, wn=128, min_blocks=1),
}
"""GPT-2's LM head (N = 50257, odd: B and C load and store one element at a time) at 1 and 2 blocks per SM, beside
N = 50256."""

def _misaligned_shapes(target) -> list:
    """The data sets' float32 products whose built-in ``schedule=None`` comes from the misaligned-B rule
    (``misaligned_row_b_schedule``: a row-major B of odd N, scalar loads, two or more C tiles per SM)."""
    from tiledsl.gemm.family import builtin_choice

    return [(m, n, k, layout) for (m, n, k, layout) in workload_shapes()
            if "misaligned_row_b_schedule" in builtin_choice(gemm_op(m, n, k, layout), target)[1]]


def _misaligned_schedules(m: int, n: int, k: int, layout: str) -> dict:
    """``schedule=None`` (the estimate's preset, one K slice, four cp.async stages with a column-major A), the plain
    estimate it replaces (split-K, two stages) and the plain estimate with one K slice (the two steps apart)."""
    from dataclasses import replace

    from tiledsl.gemm.family import _estimate_choice

    plain = _estimate_choice(gemm_op(m, n, k, layout), tiledsl.require_gpu())
    return {"schedule=None": None, "estimate (split-K, 2 stages)": plain.to_dict(),
            "estimate, one K slice": replace(plain, split_k=1).to_dict()}


def _builtin(m: int, n: int, k: int, layout: str) -> dict:
    """The built-in choice (``builtin_schedule``) as a schedule dict: ``schedule=None`` without the shipped records,
    which hold the data pass's winners for some of these very products (``schedules/gemm/sm90.json``)."""
    from tiledsl.gemm.family import builtin_schedule

    return builtin_schedule(gemm_op(m, n, k, layout), tiledsl.require_gpu()).to_dict()


def _big_tile_shapes(target) -> list:
    """The data sets' float32 products of M, N ≥ 1024 whose built-in choice is the estimate's tile (with or without
    the misaligned-B step): the class of the six 2048/2560 × 7000/7133 products whose shipped winner is the same
    256×128×8 stream-K tile."""
    from tiledsl.gemm.family import builtin_choice

    out = []
    for (m, n, k, layout) in workload_shapes():
        s, why = builtin_choice(gemm_op(m, n, k, layout), target)
        if m >= 1024 and n >= 1024 and s.kernel == "tiled" and why.startswith("the estimate"):
            out.append((m, n, k, layout))
    return out


T256X128 = dict(bm=256, bn=128, bk=8, rm=16, rn=8, wm=64, wn=64, unroll=8, swizzle=8)


def _big_tile_schedules(m: int, n: int, k: int, layout: str) -> dict:
    """The built-in choice beside the data pass's 256×128×8 winner (16×8 thread tiles, 64×64 warp tiles) with and
    without stream-K, and the 128×128×8 tile with stream-K."""
    return {"built-in": _builtin(m, n, k, layout),
            "256x128x8 t16x8 w64x64 streamk": dict(T256X128, stream_k=True),
            "256x128x8 t16x8 w64x64": dict(T256X128),
            "128x128x8 t8x8 streamk": dict(bm=128, bn=128, bk=8, rm=8, rn=8, unroll=8, stream_k=True)}


def _tall_wide_tile_shapes(target) -> list:
    """The data sets' float32 tiled products with 64 to 128 columns and M ≥ 1024 (the tall-thin rule's N = 64 and
    the sub-wave rule's and the estimate's N = 128), where 16 shipped winners took 256-row or 8×8-thread tiles with
    8 or 16 K slices."""
    from tiledsl.gemm.family import builtin_schedule

    return [(m, n, k, layout) for (m, n, k, layout) in workload_shapes()
            if 64 <= n <= 128 and m >= 1024 and builtin_schedule(gemm_op(m, n, k, layout), target).kernel == "tiled"]


def _tall_wide_tile_schedules(m: int, n: int, k: int, layout: str) -> dict:
    """The built-in choice beside the shipped winners' tiles: 256×64×8 (16×8 thread tiles, 128×32 warp tiles),
    256×128×16 (the same thread and warp tiles) and 128×64×16 (8×8, 32×64), each with 8 and 16 K slices (the
    256×128 one only for N > 64), one block per SM as in the records."""
    out: dict = {"built-in": _builtin(m, n, k, layout)}
    tiles = {"256x64x8 t16x8 w128x32": dict(bm=256, bn=64, bk=8, rm=16, rn=8, wm=128, wn=32, unroll=8),
             "128x64x16 t8x8 w32x64": dict(bm=128, bn=64, bk=16, rm=8, rn=8, wm=32, wn=64, unroll=16)}
    if n > 64:
        tiles["256x128x16 t16x8 w128x32"] = dict(bm=256, bn=128, bk=16, rm=16, rn=8, wm=128, wn=32, unroll=16)
    for name, tile in tiles.items():
        for split in (8, 16):
            out[f"{name} sk{split}"] = dict(tile, swizzle=8, split_k=split, min_blocks=1)
    return out


WAVE_TAIL_GRID = ((1024, 1536, 2048, 2560, 3072, 4096, 5120, 6144, 8192), (768, 1024, 2048, 4096, 8192))
"""M and N, then K, of the off-data-set products ``--set wavetail`` samples."""


def _wave_tail_shapes(target) -> list:
    """The data sets' products where the wave-tail rule (``wave_tail_schedule``) replaces the estimate's 128×128
    pick, then 12 products per layout drawn (seed 0) from the rule's products on the grid :data:`WAVE_TAIL_GRID` that
    are in no data set: an out-of-sample check for NN, NT and TT (TN, outside the first version of the rule, was
    measured there first and admitted on it)."""
    from tiledsl.gemm.family import builtin_choice

    def ruled(shape) -> bool:
        return "wave_tail_schedule" in builtin_choice(gemm_op(*shape), target)[1]

    data = list(dict.fromkeys(shape for shape in workload_shapes() if ruled(shape)))
    sides, ks = WAVE_TAIL_GRID
    rng = np.random.default_rng(0)
    out = list(data)
    for layout in ("NN", "NT", "TT", "TN"):
        grid = [(m, n, k, layout) for m in sides for n in sides for k in ks
                if (m, n, k, layout) not in data and ruled((m, n, k, layout))]
        out += [grid[i] for i in sorted(rng.choice(len(grid), size=min(12, len(grid)), replace=False))]
    return out


def _wave_tail_schedules(m: int, n: int, k: int, layout: str) -> dict:
    """The estimate's pick beside the wave-tail rule's 256×128×8 stream-K tile that replaces it, and the built-in
    choice."""
    from tiledsl.gemm.family import GEMM, WAVE_TAIL_PRESET, _estimate_choice

    return {"built-in": _builtin(m, n, k, layout),
            "estimate": _estimate_choice(gemm_op(m, n, k, layout), tiledsl.require_gpu()).to_dict(),
            "256x128x8 streamk": tiledsl.registry.presets(GEMM)[WAVE_TAIL_PRESET].to_dict()}


FIT_ROWS_OFF_DATA = [(35, 8457, 2560, "NN"), (35, 1500, 2560, "NN"), (33, 8457, 2560, "TT"), (40, 8457, 2560, "TT"),
                     (47, 8457, 2560, "TT"), (48, 8457, 2560, "TT"), (33, 4096, 4096, "NN")]
"""Off the data sets: row-major B with an odd N (scalar loads of B), and M across the fitted rule's 33…48."""


def _fit_rows_shapes(target) -> list:
    """Every data-set product whose M is in 17…63 and not a multiple of 16 (DeepBench's 35 × 700 / 1500 / 8457), then
    :data:`FIT_ROWS_OFF_DATA`."""
    return [key for key in workload_shapes() if 17 <= key[0] < 64 and key[0] % 16] + FIT_ROWS_OFF_DATA


def _fit_rows_schedules(m: int, n: int, k: int, layout: str) -> dict:
    """Block tiles whose rows fit M (36, 40 and 48 for M = 35: 97 %, 88 % and 73 % of the FMAs useful, against 55 %
    for the 64-row preset), most with stream-K, beside ``schedule=None`` and the short-wide preset."""
    from tiledsl.gemm.family import SHORT_WIDE_PRESET

    t48 = dict(rm=4, rn=8, wm=16, wn=64)
    t40 = dict(rm=4, rn=8, wm=8, wn=128)
    t36 = dict(rm=4, rn=8, wm=4, wn=256)
    return {"schedule=None": None,
            "64x128x16 t4x8 sk (short-wide preset)": tiledsl.preset("gemm", SHORT_WIDE_PRESET).to_dict(),
            "48x128x16 t4x8 sk": dict(bm=48, bn=128, bk=16, **t48, unroll=16, stream_k=True),
            "40x128x16 t4x8 sk": dict(bm=40, bn=128, bk=16, **t40, unroll=16, stream_k=True),
            "40x128x8 t4x8 sk": dict(bm=40, bn=128, bk=8, **t40, unroll=8, stream_k=True),
            "40x128x16 t4x8 fp sk": dict(bm=40, bn=128, bk=16, **t40, unroll=16, fragment_prefetch=True,
                                         stream_k=True),
            "40x128x16 t4x8 cp3 p4 sk": dict(bm=40, bn=128, bk=16, **t40, unroll=16, stages=3, smem_pad=4,
                                             stream_k=True),
            "40x256x16 t4x8 sk": dict(bm=40, bn=256, bk=16, **t40, unroll=16, stream_k=True),
            "40x64x16 t4x4 sk": dict(bm=40, bn=64, bk=16, rm=4, rn=4, wm=8, wn=64, unroll=16, stream_k=True),
            "36x256x16 t4x8 sk": dict(bm=36, bn=256, bk=16, **t36, unroll=16, stream_k=True),
            "36x256x8 t4x8 sk": dict(bm=36, bn=256, bk=8, **t36, unroll=8, stream_k=True),
            "48x128x8 t4x8 sk": dict(bm=48, bn=128, bk=8, **t48, unroll=8, stream_k=True),
            "48x128x16 t4x8 fp sk": dict(bm=48, bn=128, bk=16, **t48, unroll=16, fragment_prefetch=True,
                                         stream_k=True),
            "48x64x16 t4x4 w16x32 sk": dict(bm=48, bn=64, bk=16, rm=4, rn=4, wm=16, wn=32, unroll=16, stream_k=True),
            "48x64x16 t4x4 w8x64 sk": dict(bm=48, bn=64, bk=16, rm=4, rn=4, wm=8, wn=64, unroll=16, stream_k=True),
            "48x64x8 t4x4 w16x32 sk": dict(bm=48, bn=64, bk=8, rm=4, rn=4, wm=16, wn=32, unroll=8, stream_k=True)}


def _fit_bounds_shapes(target) -> list:
    """M = 35 (TT, DeepBench's layout) across the bounds of the fitted short-wide tiles: N 512…4096, K 256…8192."""
    return [(35, n, k, "TT") for n in (512, 700, 1024, 1500, 1800, 2047, 2560, 3072, 4096)
            for k in (256, 1024, 2560, 8192)]


def _fit_bounds_schedules(m: int, n: int, k: int, layout: str) -> dict:
    """The generic estimate's pick (what runs without a shape-class rule), the 64×128 short-wide preset and the two
    48-row presets, read from the shipped presets."""
    from tiledsl.gemm.family import SHORT_WIDE_FITTED_PRESETS, SHORT_WIDE_PRESET, _estimate_choice

    out = {"schedule=None": None,
           "estimate (no shape rule)": _estimate_choice(gemm_op(m, n, k, layout), tiledsl.Target.current()).to_dict()}
    for name in (SHORT_WIDE_PRESET, *SHORT_WIDE_FITTED_PRESETS):
        out[name] = tiledsl.preset("gemm", name).to_dict()
    return out


FIT_SPLIT_OFF_GRID = [(33, 1500, 2560, "TT"), (40, 1500, 2560, "TT"), (48, 1500, 2560, "TT"), (35, 700, 2560, "NN"),
                      (35, 1500, 2560, "NN")]
"""Off the M = 35 TT grid of :func:`_fit_split_shapes`: M across the fitted rows' 33…48, and row-major A and B."""


def _fit_split_shapes(target) -> list:
    """M = 35 (TT) across the 48×64 stream-K branch of the short-wide rule (N 700…2047) and K 256…8192, then
    :data:`FIT_SPLIT_OFF_GRID`."""
    grid = [(35, n, k, "TT") for n in (700, 1024, 1500, 2047) for k in (256, 1024, 2048, 2560, 8192)]
    return grid + FIT_SPLIT_OFF_GRID


def _fit_split_schedules(m: int, n: int, k: int, layout: str) -> dict:
    """The built-in choice and the 48×64 stream-K preset against split-K on the data pass's winners for 35×700 and
    35×1500 TT (2026-12-03: 16×64×16 t4x2 and 64×64×16 t4x8 / t8x4, 16 K slices, one block per SM reserved), with 16
    slices and with K / 128 slices (at most 16), and the 48-row tile with split-K in place of stream-K. The committed
    run (gemm_fit_split_h200_2026-12-03.json) predates the split-K branch the sweep led to: its "built-in" is the
    48×64 stream-K preset on every product of the set; since then "built-in" is a split preset for N < 1536 with
    K ≥ 256."""
    from tiledsl.gemm.family import SHORT_WIDE_FITTED_PRESETS

    scaled = max(1, min(16, k // 128))
    t16 = dict(bm=16, bn=64, bk=16, rm=4, rn=2, wm=8, wn=32, unroll=16, swizzle=4, min_blocks=1)
    t64 = dict(bm=64, bn=64, bk=16, rm=4, rn=8, wm=32, wn=32, unroll=16, swizzle=8, min_blocks=1)
    t64b = dict(t64, rm=8, rn=4)
    t48 = dict(bm=48, bn=64, bk=16, rm=4, rn=4, wm=8, wn=64, unroll=16, swizzle=8)
    out = {"built-in": _builtin(m, n, k, layout),
           "48x64x16 t4x4 stream-K": tiledsl.preset("gemm", SHORT_WIDE_FITTED_PRESETS[0]).to_dict()}
    for split in sorted({16, scaled}):
        out[f"16x64x16 t4x2 sk{split}"] = dict(t16, split_k=split)
        out[f"64x64x16 t4x8 sk{split}"] = dict(t64, split_k=split)
    out[f"64x64x16 t8x4 sk{scaled}"] = dict(t64b, split_k=scaled)
    out[f"48x64x16 t4x4 sk{scaled}"] = dict(t48, split_k=scaled)
    return out


ONE_ROW_OFF_DATA = [(100, 4096, 4096, "NN"), (128, 4096, 4096, "NT"), (128, 4096, 4096, "TT"), (96, 14336, 4096, "NN"),
                    (128, 5000, 3000, "NN"), (120, 11008, 4096, "NT"), (128, 8192, 8192, "NN"), (80, 2048, 8192, "TN")]
"""Off the data sets: M off 128, every layout, odd sizes (the run the one-row rule was read off)."""
ONE_ROW_CHECK = [(128, 4096, 2048, "NN"), (128, 11008, 2048, "NN"), (128, 14336, 2560, "NT"), (65, 6144, 4096, "NN"),
                 (72, 3000, 2048, "TT"), (128, 2304, 2048, "NN"), (112, 7168, 2560, "TN"), (128, 16384, 3072, "NN")]
"""Added after the rule was read off: K = 2048 and 2560 (below the K it was read off), M = 65 and 72, 9 and 12 tiles."""


def _one_row_shapes(target) -> list:
    """Every data-set product with one row of 128-row tiles (M 65…128), N ≥ 1024 and K ≥ 2048 (the LLM sets'
    128-token products, where the data pass's winners took 128×256×16 tiles of 16×8 with 1 or 8 K slices), then
    :data:`ONE_ROW_OFF_DATA` and :data:`ONE_ROW_CHECK`."""
    data = [shape for shape in workload_shapes() if 64 < shape[0] <= 128 and shape[1] >= 1024 and shape[2] >= 2048]
    return list(dict.fromkeys(data)) + ONE_ROW_OFF_DATA + ONE_ROW_CHECK


def _one_row_schedules(m: int, n: int, k: int, layout: str) -> dict:
    """The built-in choice and the pick of the rules after the one-row rule (``wide_or_generic_choice``: what the
    built-in choice was before it) against the data pass's 128×256×16 tile (16×8 thread tiles, 128×32 warp tiles, one
    block per SM) with 1, 2, 4 and 8 K slices, with the slices that fill one wave (⌊SMs / tiles⌋, 1…16) and with
    stream-K. The first committed run (gemm_one_row_h200_2026-12-04.json) predates the rule: its "built-in" is the earlier
    rules' pick, and it has no "previous rules" column and no :data:`ONE_ROW_CHECK` products."""
    from tiledsl.gemm.family import wide_or_generic_choice

    tile = dict(bm=128, bn=256, bk=16, rm=16, rn=8, wm=128, wn=32, unroll=16, swizzle=8, min_blocks=1)
    tiles = -(-m // 128) * -(-n // 256)
    fill = max(1, min(16, tiledsl.require_gpu().sm_count // tiles))
    out: dict = {"built-in": _builtin(m, n, k, layout),
                 "previous rules": wide_or_generic_choice(gemm_op(m, n, k, layout), tiledsl.require_gpu())[0].to_dict()}
    for split in sorted({1, 2, 4, 8, fill}):
        out[f"128x256x16 t16x8 sk{split}" + (" (fill)" if split == fill else "")] = dict(tile, split_k=split)
    out["128x256x16 t16x8 streamk"] = dict(tile, stream_k=True)
    return out


SETS = {"skinny": (SHAPES, SCHEDULES), "tall": (TALL_SHAPES, _tall_schedules()),
        "wide": (WIDE_SHAPES, _wide_schedules()), "subwave": (_subwave_shapes, _subwave_schedules()),
        "oddn": (ODD_N_SHAPES, ODD_N_SCHEDULES), "tallsplit": (_tall_class_shapes, _tall_split_schedules),
        "misaligned": (_misaligned_shapes, _misaligned_schedules),
        "bigtile": (_big_tile_shapes, _big_tile_schedules),
        "tallwide": (_tall_wide_tile_shapes, _tall_wide_tile_schedules),
        "wavetail": (_wave_tail_shapes, _wave_tail_schedules), "fitrows": (_fit_rows_shapes, _fit_rows_schedules),
        "fitbounds": (_fit_bounds_shapes, _fit_bounds_schedules),
        "fitsplit": (_fit_split_shapes, _fit_split_schedules), "onerow": (_one_row_shapes, _one_row_schedules)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", choices=sorted(SETS), default="skinny", help="which shapes and schedules (default skinny)")
    ap.add_argument("--out", default="benchmarks/results/gemm_skinny_h200.json")
    args = ap.parse_args()
    target = gpu_or_exit("gemm_skinny.py")
    import cupy as cp

    shapes, schedules = SETS[args.set]
    if callable(shapes):
        shapes = shapes(target)
    rng = np.random.default_rng(0)
    rows = []
    for m, n, k, layout in shapes:
        a, b = gemm_operands(rng, m, n, k, layout)
        ref = cp.matmul(a.astype(cp.float64), b.astype(cp.float64))
        op = gemm_op(m, n, k, layout)
        for name, kw in (schedules(m, n, k, layout) if callable(schedules) else schedules).items():
            s = None if kw is None else tiledsl.GemmSchedule(**kw)
            c = cp.full((m, n), cp.nan, cp.float32)
            tiledsl.gemm(a, b, c, schedule=s)
            err = float(cp.linalg.norm(c - ref) / cp.linalg.norm(ref))
            if not err < 1e-5:
                raise SystemExit(f"{name} {m}x{n}x{k}: wrong result (rel. error {err})")
            t, vendor = gemm_beside_cublas(a, b, c, s, 30)
            used = s or tiledsl.plan(op, device=target).schedule
            rows.append(dict(m=m, n=n, k=k, layout=layout, schedule=name, used=used.to_dict(), ms=t, cublas_ms=vendor,
                             ratio=vendor / t, rel_err=err))
            print(f"{m}x{n}x{k} {layout} {name:32s} {t * 1e3:8.1f} us  cuBLAS {vendor * 1e3:8.1f} us  "
                  f"{vendor / t:.3f}x", flush=True)
    write_results(args.out, target.name, rows, cp.__version__)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Golden emitted sources: representative kernels of every family, compared as text.

Every emitter change shows up as a diff of CUDA C under ``tests/golden/``. After a deliberate change,
regenerate the files and review the diff::

    TILEDSL_UPDATE_GOLDEN=1 PYTHONPATH=$PWD python -m pytest -q tests/test_golden.py
    git diff tests/golden/
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from tiledsl import GemmOp, GemmSchedule, ReduceOp, ReduceSchedule, TransposeOp, TransposeSchedule
from tiledsl.api import source
from tiledsl.gemm.emit import emit_splitk_reduce
from tiledsl.registry import preset

GOLDEN = Path(__file__).parent / "golden"


def _cases() -> dict[str, str]:
    """file name -> emitted source."""
    sgemm = preset("gemm", "sgemm_128x128_8x8")
    split = replace(preset("gemm", "sgemm_64x64_4x4"), split_k=4)
    splitk_op = GemmOp(16, 512, 40000, dtype="float32", read_c=True)
    tn_half = GemmOp(1000, 998, 333, dtype="float16", layout_a="col", layout_b="row",
                     align_a=4, align_b=2, align_c=2, read_c=True)
    row_sum = ReduceOp(shape=(128, 4096), op="sum", axis=1, dtype="float32", align=8)
    full_sum = ReduceOp(shape=(1 << 29,), op="sum", axis=None, dtype="float32", align=8)
    col_max = ReduceOp(shape=(64, 1000, 96), op="max", axis=1, dtype="float16", align=8)
    h4096 = GemmOp(4096, 4096, 4096, dtype="float16", align_a=8, align_b=8, align_c=8)
    t64 = TransposeOp(shape=(64, 64), dtype="float32")
    t3 = TransposeOp(shape=(3, 100, 98), dtype="float16")
    return {
        "gemm_f32_nn_4096_128x128.cu": source(GemmOp(4096, 4096, 4096), sgemm),
        "gemm_f32_nn_fragment_prefetch_256x128x8.cu": source(
            GemmOp(4096, 4096, 4096), GemmSchedule(bm=256, bn=128, bk=8, rm=16, rn=8, fragment_prefetch=True)),
        "gemm_f32_nn_cp_async_256x128x8_s4.cu": source(
            GemmOp(4096, 4096, 4096), GemmSchedule(bm=256, bn=128, bk=8, rm=16, rn=8, stages=4, smem_pad=4)),
        "gemm_f16_tn_odd_beta_64x64_v2.cu": source(tn_half, GemmSchedule(bm=64, bn=64, bk=8, rm=4, rn=4, vec=2)),
        "gemm_f32_splitk4_main.cu": source(splitk_op, split),
        "gemm_f32_splitk4_reduce.cu": emit_splitk_reduce(splitk_op, split).source,
        "gemm_f16_mma_sync_128x128x32.cu": source(h4096, preset("gemm", "hgemm_128x128x32_w64x64_s4")),
        "gemm_f16_wgmma_128x128x64_s6.cu": source(h4096, preset("gemm", "hgemm_wgmma_128x128x64_s6")),
        "gemm_bf16_tma_tn_128x256x64_s4.cu": source(
            GemmOp(4096, 4096, 4096, dtype="bfloat16", layout_a="col", align_a=8, align_b=8, align_c=8, read_c=True),
            preset("gemm", "hgemm_tma_128x256x64_s4")),
        "gemm_f16_tma_persistent_nn_128x256x64_s4.cu": source(
            GemmOp(4096, 4096, 4096, dtype="float16", align_a=8, align_b=8, align_c=8),
            replace(preset("gemm", "hgemm_tma_128x256x64_s4"), persistent=True)),
        "gemm_tf32_tma_nt_128x256x32_s4.cu": source(
            GemmOp(4096, 4096, 4096, dtype="float32", layout_b="col", precision="tf32"),
            preset("gemm", "tf32_tma_128x256x32_s4")),
        "gemm_f32_gemv_col_b_fused_split_k.cu": source(  # torch's Linear, one row: schedule=None since 2026-12-02
            GemmOp(1, 768, 3072, layout_b="col", read_c=True),
            GemmSchedule(kernel="gemv", bm=1, bn=128, vec=4, split_k=6, split_k_fused=True, rn=1, unroll=2)),
        "gemm_f32_gemv_row_b_4_rows_split_k.cu": source(  # x @ W, four rows, the split-K kernel sums the slices
            GemmOp(4, 4096, 4096), GemmSchedule(kernel="gemv", bm=4, bn=128, vec=4, split_k=64, unroll=8)),
        "reduce_sum_rows_128x4096_default.cu": source(row_sum, preset("reduce", "default")),
        "reduce_sum_full_2e29_default.cu": source(full_sum, preset("reduce", "default")),
        "reduce_max_strided_f16_default.cu": source(col_max, preset("reduce", "default")),
        "reduce_sum_full_v1_atomic.cu": source(full_sum, ReduceSchedule(strategy="atomic", combine="atomic",
                                                                         vec=1, items_per_thread=1)),
        "transpose_f32_64x64_default.cu": source(t64, preset("transpose", "padded_rows_vec_swizzle")),
        "transpose_f16_batch_naive_read.cu": source(t3, TransposeSchedule(variant="naive_read", tile=32, vec=1,
                                                                           rows_per_thread=4, smem_pad=0)),
    }


CASES = _cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_emitted_source_matches_golden(name):
    path = GOLDEN / name
    text = CASES[name]
    if os.environ.get("TILEDSL_UPDATE_GOLDEN"):
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} is missing: run with TILEDSL_UPDATE_GOLDEN=1 to create it"
    assert text == path.read_text(), (f"emitted source of {name} differs from {path}; if the change is "
                                      f"deliberate, regenerate with TILEDSL_UPDATE_GOLDEN=1 and review git diff")


def test_golden_folder_has_no_stale_files():
    stale = sorted(p.name for p in GOLDEN.glob("*.cu") if p.name not in CASES)
    assert not stale, f"golden files no test produces: {stale}"

"""Stream-K (``GemmSchedule.stream_k``) without a GPU: the work division, the kernel's index arithmetic replayed in
Python on many grids, the plan's parameters and buffers, the compiled kernels' registers, the exported launcher."""

from __future__ import annotations

import itertools
import random
import shutil
import subprocess
from dataclasses import replace

import pytest

import tiledsl
from tiledsl.compile import compile_source
from tiledsl.gemm import GemmOp, GemmSchedule
from tiledsl.gemm.emit import emit_gemm
from tiledsl.gemm.kernel_plan import STREAM_K_MAX_SHARE, plan_gemm, stream_k_split

H200 = tiledsl.Target.known("H200")
PRESET = tiledsl.preset("gemm", "sgemm_256x128_16x8_stream_k")


@pytest.mark.parametrize("tiles,k_iters,slots,want", [
    (512, 512, 132, (264, 132)),     # 4096³ with 256×128 tiles: 3.88 waves → 2 data-parallel, 1.88 shared
    (528, 512, 132, (528, 0)),       # whole waves: all data-parallel
    (133, 512, 132, (0, 132)),       # one wave and one tile: the 133 tiles shared by every slot
    (32, 128, 132, (0, 132)),        # less than a wave: 132 shares of 32 tiles (≤ 8 per tile)
    (4, 128, 132, (0, 4 * STREAM_K_MAX_SHARE)),
    (3, 2, 132, (0, 6)),             # fewer iterations than slots: one block per iteration
])
def test_stream_k_split(tiles, k_iters, slots, want):
    sk = stream_k_split(tiles, k_iters, slots)
    assert (sk.dp_tiles, sk.sk_blocks) == want
    assert sk.sk_tiles == tiles - sk.dp_tiles


def _first(b: int, sk_iters: int, sk_blocks: int) -> int:
    return b * sk_iters // sk_blocks           # sk_first_iteration in the kernel


def _owner(x: int, sk_iters: int, sk_blocks: int) -> int:
    return ((x + 1) * sk_blocks - 1) // sk_iters   # sk_owner in the kernel


def _replay(tiles: int, k_iters: int, slots: int) -> None:
    """Run the kernel's stream-K index arithmetic (``tiledsl.gemm.emit``: _stream_k_work, _stream_k_tiles,
    _stream_k_fixup and STREAM_K_HELPERS) for every block and check what the kernel relies on."""
    sk = stream_k_split(tiles, k_iters, slots)
    dp, blocks = sk.dp_tiles, sk.sk_blocks
    sk_start, sk_iters = dp * k_iters, sk.sk_tiles * k_iters
    covered = [[] for _ in range(tiles)]          # (kt_first, kt_last, block) per tile
    writes: dict[int, tuple[int, int]] = {}       # partial slot -> (block, tile)
    for block in range(dp + blocks):
        sk_block = block - dp
        if sk_block < 0:
            it_begin, it_end = block * k_iters, block * k_iters + k_iters
        else:
            it_begin = sk_start + _first(sk_block, sk_iters, blocks)
            it_end = sk_start + _first(sk_block + 1, sk_iters, blocks)
            assert it_end > it_begin, "an empty share never arrives: its tile would never finish"
        it, partial_tiles = it_begin, 0
        while it < it_end:
            tile = it // k_iters
            tile_start = tile * k_iters
            kt_first, kt_last = it - tile_start, min(k_iters, it_end - tile_start)
            it = tile_start + kt_last
            covered[tile].append((kt_first, kt_last, block))
            if kt_first > 0 or kt_last < k_iters:
                assert sk_block >= 0, "a data-parallel block never shares a tile"
                partial_tiles += 1
                t0 = tile_start - sk_start
                b_first, b_last = _owner(t0, sk_iters, blocks), _owner(t0 + k_iters - 1, sk_iters, blocks)
                assert b_first <= sk_block <= b_last
                slot = 2 * sk_block + (1 if sk_block == b_first and _first(sk_block, sk_iters, blocks) < t0 else 0)
                assert slot not in writes, f"partial slot {slot} written twice: {writes[slot]} and {(block, tile)}"
                writes[slot] = (block, tile)
        assert partial_tiles <= 2, "two partial-tile slots per block"
    for tile, parts in enumerate(covered):
        parts.sort()
        assert parts[0][0] == 0 and parts[-1][1] == k_iters, f"tile {tile} not covered: {parts}"
        assert all(a[1] == b[0] for a, b in zip(parts, parts[1:], strict=False)), f"tile {tile}: {parts}"
        if len(parts) > 1:   # shared: the blocks b_first..b_last, in K order, each arriving once
            t0 = tile * k_iters - sk_start
            b_first, b_last = _owner(t0, sk_iters, blocks), _owner(t0 + k_iters - 1, sk_iters, blocks)
            assert [p[2] - dp for p in parts] == list(range(b_first, b_last + 1))
            assert len(parts) <= (2 if tiles >= slots else STREAM_K_MAX_SHARE + 1)


def test_stream_k_index_arithmetic_replayed():
    rng = random.Random(0)
    cases = list(itertools.product((1, 2, 7, 31, 132, 133, 264, 500, 512, 1000), (1, 2, 3, 17, 512), (1, 2, 132, 264)))
    cases += [(rng.randint(1, 3000), rng.randint(1, 700), rng.randint(1, 300)) for _ in range(150)]
    for tiles, k_iters, slots in cases:
        _replay(tiles, k_iters, slots)


def test_plan_params_buffers_and_grid():
    op = GemmOp(4096, 4096, 4096, layout_b="col")
    p = plan_gemm(op, PRESET, H200)
    params = {q.name: q for q in p.params}
    assert (params["dp_tiles"].value, params["sk_blocks"].value) == (264, 132)
    assert p.grid == (396, 1, 1)
    ws = {w.name: w for w in p.workspace}
    assert ws["sk_partials"].count == 2 * 132 * 256 * 128 and ws["gemm_tickets"].init == "counters"
    assert ws["gemm_tickets"].count == 512 - 264
    free = plan_gemm(op, PRESET)       # without a device: every tile data-parallel (the cost model's work)
    assert free.grid == (512, 1, 1)
    assert replace(PRESET, stream_k=False).short_hash() == tiledsl.preset("gemm", "sgemm_256x128_16x8").short_hash()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("kw", [dict(), dict(fragment_prefetch=True),
                                dict(bm=128, bn=128, bk=8, rm=8, rn=8, stages=3, smem_pad=4),
                                dict(bm=128, bn=128, bk=16, rm=8, rn=8, stages=4, smem_pad=4, unroll=16),
                                dict(bm=64, bn=64, bk=16, rm=4, rn=4, unroll=16),
                                dict(bm=16, bn=16, bk=16, rm=1, rn=2, vec=1, unroll=16)])
@pytest.mark.parametrize("layout", ["row", "col"])
def test_stream_k_kernels_compile_without_spills(arch, kw, layout):
    """The preset (register and fragment prefetch) and cp.async / small / scalar-partial tiles. (The 256×128 tile
    with cp.async stages and column-major operands spills 8 bytes at 255 registers: left to the search.)"""
    s = GemmSchedule(stream_k=True, **kw) if "bm" in kw else replace(PRESET, **kw)
    k = compile_source(emit_gemm(GemmOp(1000, 777, 300, layout_a=layout, layout_b=layout, read_c=True), s), arch)
    assert k.resources()["spill_bytes"] == 0, k.resources()


def test_default_takes_stream_k_for_nt_from_two_waves():
    from tiledsl.gemm.family import builtin_schedule

    assert builtin_schedule(GemmOp(4096, 4096, 4096, layout_b="col"), H200).stream_k
    assert not builtin_schedule(GemmOp(2048, 2048, 2048, layout_b="col"), H200).stream_k   # one wave
    assert not builtin_schedule(GemmOp(4096, 4096, 4096), H200).stream_k                   # NN: behind


def test_cost_model_prices_the_shared_last_wave():
    """The tail removed (3.88 → 3.88 waves, not 4) against the slower K loop (STREAM_K_LOOP_FACTOR): at 4096³ the two
    nearly cancel, as measured (NN −3.7 %, NT +2.2 %); whole waves only pay the loop; a grid of 8 tiles with a long
    K gains from 64 blocks sharing it."""
    from tiledsl.costmodel import predict
    from tiledsl.costmodel.gemm import STREAM_K_LOOP_FACTOR

    plain = tiledsl.preset("gemm", "sgemm_256x128_16x8")
    op = GemmOp(4096, 4096, 4096, layout_b="col")
    ratio = predict(op, PRESET, "H200") / predict(op, plain, "H200")
    assert 0.97 < ratio < 1.03
    whole = GemmOp(4096, 4224, 4096)     # 16·33 = 528 tiles: whole waves, nothing to share
    assert predict(whole, replace(plain, stream_k=True), "H200") == pytest.approx(
        predict(whole, plain, "H200") * STREAM_K_LOOP_FACTOR, rel=0.01)
    few = GemmOp(512, 512, 8192)
    assert predict(few, replace(plain, stream_k=True), "H200") < 0.2 * predict(few, plain, "H200")


def test_exported_stream_k_launcher(tmp_path):
    from search.export import kernel_cu

    op = GemmOp(4096, 4096, 4096, layout_b="col", read_c=True)
    k = tiledsl.compile(op, PRESET, arch="sm_90")
    text = kernel_cu("gemm", op, PRESET, k, ["test"])
    assert "cudaOccupancyMaxActiveBlocksPerMultiprocessor" in text and "float* __restrict__ partials" in text
    assert "tiledsl_stream_k_workspace" in text and "return cudaErrorInvalidValue" in text
    (tmp_path / "kernel.cu").write_text(text)
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed on this machine: the host launcher was not compiled")
    r = subprocess.run(["nvcc", "-arch=sm_90", "-c", str(tmp_path / "kernel.cu"), "-o", str(tmp_path / "k.o")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("rm,rn,pieces", [(4, 2, "float"), (1, 2, "float"), (4, 4, "float4"), (8, 8, "float4")])
def test_partial_tiles_are_float4_only_where_a_row_splits_into_fours(rm, rn, pieces):
    """A float4 piece is four columns of one row of the thread tile: rn = 2 takes scalar pieces even when rm·rn is a
    multiple of 4 (acc[i][j + 3] would index past the row)."""
    bm, bn = 16 * rm, 16 * rn
    s = GemmSchedule(bm=bm, bn=bn, bk=16, rm=rm, rn=rn, vec=1, unroll=16, stream_k=True)
    src = emit_gemm(GemmOp(100, 70, 64), s).source
    assert f"constexpr int PIECES = RM * RN / {4 if pieces == 'float4' else 1};" in src
    assert ("acc[i][j + 3]" in src) == (pieces == "float4")

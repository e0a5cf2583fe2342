"""CPU tests of the cubin's completion (tiledsl.cubin.elf_complete) and the SASS reader (tiledsl.sass)."""

from __future__ import annotations

import io

import pytest
from elftools.elf.elffile import ELFFile

import tiledsl
from tiledsl.cubin import elf_complete, elf_extent
from tiledsl.errors import ToolchainError
from tiledsl.gemm import default_schedule
from tiledsl.sass import disassemble, hottest_loop, loops


def _nvdisasm_or_skip() -> None:
    from tiledsl.sass import _nvdisasm

    try:
        _nvdisasm()
    except ToolchainError as exc:
        pytest.skip(f"no nvdisasm here: {exc}")


def _compiled(m, n, k, layout_b="row", arch="sm_90"):
    op = tiledsl.GemmOp(m, n, k, layout_b=layout_b)
    return tiledsl.compile(op, default_schedule(op, tiledsl.Target.known("H200")), arch=arch)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_compiled_cubin_spans_its_elf_headers(arch):
    """CuPy's getCUBIN returns one byte fewer than NVRTC's size; the Kernel's cubin is padded back to what its ELF
    header declares, so that a reader of program headers (pyelftools, nvdisasm, cuobjdump) takes it."""
    kernel = _compiled(16, 4096, 4096, arch=arch)
    assert len(kernel.cubin) == elf_extent(kernel.cubin)
    elf = ELFFile(io.BytesIO(kernel.cubin))
    assert elf.num_segments() > 0 and all(seg["p_offset"] + seg["p_filesz"] <= len(kernel.cubin)
                                          for seg in elf.iter_segments())
    assert elf_complete(kernel.cubin) == kernel.cubin  # already whole: unchanged


def test_elf_complete_pads_only_a_short_tail():
    kernel = _compiled(8, 4096, 4096)
    whole = kernel.cubin
    assert elf_complete(whole[:-1]) == whole  # the byte CuPy drops comes back (zero)
    assert elf_complete(whole[:-200]) == whole[:-200]  # a truncated body is not invented
    assert elf_complete(b"not an ELF") == b"not an ELF"
    assert elf_extent(b"\x7fELF") is None


def test_loops_read_from_a_listing():
    """The loop reader on a hand-written listing: a backward branch closes a loop from its label; a forward branch
    does not; predicates and modifiers are not part of the opcode."""
    sass = [(0x00, "MOV R1, c[0x0][0x28]"), ".L_x_1", (0x10, "FFMA R2, R3, R4, R2"), (0x20, "@P0 BRA `(.L_x_2)"),
            (0x30, "LDS.128 R8, [UR4]"), ".L_x_2", (0x40, "FFMA R5, R3, R4, R5"), (0x50, "IADD3 R6, R6, 0x1, RZ"),
            (0x60, "@!P1 BRA `(.L_x_1)"), ".L_x_3", (0x70, "FADD R1, R1, R2"), (0x80, "BRA `(.L_x_3)"),
            (0x90, "EXIT")]
    found = loops(sass)
    assert [(lp.start, lp.end, lp.instructions) for lp in found] == [(0x10, 0x60, 6), (0x70, 0x80, 2)]
    outer = hottest_loop(sass)
    assert outer.counts == {"FFMA": 2, "BRA": 2, "LDS": 1, "IADD3": 1} and outer.math == 2
    assert outer.other_per("FFMA") == 128.0 and found[1].other_per("FFMA") == float("inf")
    assert hottest_loop([(0, "EXIT")]) is None
    # a main loop and its guarded remainder with as much math: the main loop (first in the code) is the hottest
    tail = [".L_x_1", (0x00, "FFMA R1, R2, R3, R1"), (0x10, "BRA `(.L_x_1)"), ".L_x_2", (0x20, "ISETP.GE.AND P0, PT, R4, R5, PT"),
            (0x30, "@P0 FFMA R1, R2, R3, R1"), (0x40, "@!P0 BRA `(.L_x_2)")]
    assert (hottest_loop(tail).start, hottest_loop(tail).instructions) == (0x00, 2)


@pytest.mark.parametrize("m, layout_b, ffma, ldg, lds", [
    (16, "row", 16 * 4 * 8, 8, 16 // 4 * 8),   # staged A: BM x VB FMAs, one 16-byte B load, BM/4 broadcasts per k
    (8, "row", 8 * 4 * 8, 8, 8 // 4 * 8),
    (16, "col", 16 * 4 * 4 * 2, (16 + 4) * 2, 0),  # A in registers: per step BM x RN x VB FMAs, 16-byte loads
                                                    # of BM rows of A and RN columns of B, unroll 2
])
def test_gemv_hottest_loop_holds_the_products_fmas(m, layout_b, ffma, ldg, lds):
    """The hottest loop of schedule=None's GEMV kernel for m rows of x @ W (row-major W) and x @ W.T: its FFMA, global
    and shared loads per pass are those the schedule implies (unroll steps of K per pass)."""
    _nvdisasm_or_skip()
    kernel = _compiled(m, 22016, 4096, layout_b)
    s = kernel.schedule
    assert s.kernel == "gemv" and s.unroll in (2, 8), s
    loop = hottest_loop(disassemble(kernel.cubin))
    assert loop is not None
    assert (loop.counts.get("FFMA"), loop.counts.get("LDG"), loop.counts.get("LDS", 0)) == (ffma, ldg, lds), \
        loop.counts


def test_sass_mix_script_prints_the_table(tmp_path):
    _nvdisasm_or_skip()
    import json
    import subprocess
    import sys

    out = tmp_path / "mix.json"
    run = subprocess.run([sys.executable, "benchmarks/sass_mix.py", "--products", "8x4096x4096:NN",
                          "4x4096x4096:NT", "--json", str(out)], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    assert "| 8×4096×4096 NN |" in run.stdout and "| 4×4096×4096 NT |" in run.stdout
    rows = json.loads(out.read_text())["rows"]
    assert [r["ffma"] > 0 and r["loop_instructions"] > r["ffma"] for r in rows] == [True, True]
    bad = subprocess.run([sys.executable, "benchmarks/sass_mix.py", "--products", "8x0x4096"], capture_output=True,
                         text=True, check=False)
    assert bad.returncode != 0 and "sizes must be >= 1" in bad.stderr

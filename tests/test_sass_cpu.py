"""CPU tests of the cubin's completion (tiledsl.cubin.elf_complete) and the SASS reader (tiledsl.sass)."""

from __future__ import annotations

import io
import struct
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

import tiledsl
from tiledsl.cubin import elf_complete, elf_extent
from tiledsl.errors import ToolchainError
from tiledsl.gemm import default_schedule
from tiledsl.sass import disassemble, hottest_loop, loops

ROOT = Path(__file__).resolve().parents[1]


def _nvdisasm_or_skip() -> None:
    from tiledsl.sass import find_nvdisasm

    try:
        find_nvdisasm()
    except ToolchainError as exc:
        pytest.skip(f"no nvdisasm here: {exc}")


def _compiled(m, n, k, layout_b="row", arch="sm_90"):
    """schedule=None's kernel on an H200, but the FMA GEMV pick where it takes the FP64 tensor cores
    (gemv_dmma_default: 9-16 rows of x @ W.T and of a large x @ W)."""
    from tiledsl.gemm.family import gemv_schedule, runs_gemv

    op = tiledsl.GemmOp(m, n, k, layout_b=layout_b)
    h200 = tiledsl.Target.known("H200")
    return tiledsl.compile(op, gemv_schedule(op, h200) if runs_gemv(op) else default_schedule(op, h200), arch=arch)


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


def test_elf_complete_puts_back_only_the_byte_cupy_drops():
    kernel = _compiled(8, 4096, 4096)
    whole = kernel.cubin
    assert elf_complete(whole[:-1]) == whole  # the byte CuPy drops comes back (zero)
    assert elf_complete(whole[:-2]) == whole[:-2]  # shorter still: truncated, left as it is
    assert elf_complete(whole[:-200]) == whole[:-200]
    assert elf_complete(b"not an ELF") == b"not an ELF"
    assert elf_extent(b"\x7fELF") is None


def _elf(sections: list[tuple[int, int, int]], tail: int = 0) -> bytes:
    """A minimal 64-bit little-endian ELF: the 64-byte header, no program headers, the section header table at 64,
    one 64-byte header per (sh_type, sh_offset, sh_size), then ``tail`` zero bytes."""
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<QQ", header, 0x20, 0, 64)  # e_phoff, e_shoff
    struct.pack_into("<HHHH", header, 0x36, 56, 0, 64, len(sections))
    table = bytearray()
    for sh_type, offset, size in sections:
        entry = bytearray(64)
        struct.pack_into("<I", entry, 4, sh_type)
        struct.pack_into("<QQ", entry, 0x18, offset, size)
        table += entry
    return bytes(header + table) + bytes(tail)


def test_elf_extent_reads_section_ends_past_the_tables():
    """A section whose bytes lie past the header tables sets the extent; a NOBITS section (sh_type 8: no bytes in
    the file) does not."""
    tables_end = 64 + 2 * 64
    assert elf_extent(_elf([(1, tables_end, 100), (8, tables_end + 100, 5000)])) == tables_end + 100
    assert elf_extent(_elf([(1, 0, 10)])) == 64 + 64
    image = _elf([(1, tables_end, 100), (8, 0, 0)], tail=99)
    assert elf_complete(image) == image + b"\x00" and elf_complete(image + b"\x00") == image + b"\x00"


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
    # nested: the inner loop is the hottest although the outer one holds its math and more
    nested = [".L_x_1", (0x00, "FADD R9, R9, 1"), ".L_x_2", (0x10, "FFMA R1, R2, R3, R1"), (0x20, "FFMA R4, R2, R3, R4"),
              (0x30, "@P0 BRA `(.L_x_2)"), (0x40, "FMUL R9, R9, R1"), (0x50, "@P1 BRA `(.L_x_1)")]
    assert [(lp.start, lp.math) for lp in loops(nested)] == [(0x10, 2), (0x00, 4)]
    assert (hottest_loop(nested).start, hottest_loop(nested).instructions) == (0x10, 3)
    # the trap at a kernel's end branches to itself: not a loop; loops without math give no hottest loop
    trap = [(0x00, "EXIT"), ".L_x_9", (0x10, "BRA `(.L_x_9)")]
    assert loops(trap) == [] and hottest_loop(trap) is None
    assert hottest_loop([".L_x_1", (0, "IADD3 R1, R1, 0x1, RZ"), (0x10, "@P0 BRA `(.L_x_1)")]) is None


LISTING = """\t.headerflags\t@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
\t.section\t.text.k,"ax",@progbits
        /*0000*/                   LDC R1, c[0x0][0x28] ;                         /* 0x00000a00ff017b82 */
                                                                                  /* 0x000fe40000000800 */
.L_x_3:
        /*0010*/                   FFMA R73, R44, R48.reuse, R73 ;                /* 0x000000302c497223 */
        /*0020*/               @!P0 LDG.E.128.CONSTANT R4, desc[UR12][R6.64] ;  /* 0x0000000c06048981 */
        /*0030*/              @!UP1 BRA `(.L_x_3) ;                           /* 0xfffffffc00f07947 */
.L_x_4:
        /*0040*/                   BRA `(.L_x_4);                                 /* 0xfffffffc00fc7947 */
"""


def test_disassemble_parses_nvdisasms_listing(monkeypatch):
    """disassemble on a listing in nvdisasm 13.5's format (encoding comments, predicates, modifiers), with the tool
    and its run replaced: instructions, labels and the loop come out as printed; a failed run and an empty listing
    raise ToolchainError."""
    import tiledsl.sass as sass

    monkeypatch.setattr(sass, "find_nvdisasm", lambda: "nvdisasm")
    out = {"stdout": LISTING, "code": 0}
    monkeypatch.setattr(sass.subprocess, "run", lambda *a, **kw: subprocess.CompletedProcess(
        a[0], out["code"], stdout=out["stdout"], stderr="nvdisasm fatal   : bad"))
    listing = disassemble(b"\x7fELF")
    assert listing == [(0x0, "LDC R1, c[0x0][0x28]"), ".L_x_3", (0x10, "FFMA R73, R44, R48.reuse, R73"),
                       (0x20, "@!P0 LDG.E.128.CONSTANT R4, desc[UR12][R6.64]"), (0x30, "@!UP1 BRA `(.L_x_3)"),
                       ".L_x_4", (0x40, "BRA `(.L_x_4)")]
    assert hottest_loop(listing).counts == {"FFMA": 1, "LDG": 1, "BRA": 1}
    out["code"] = 1
    with pytest.raises(ToolchainError, match="nvdisasm failed .1.: nvdisasm fatal"):
        disassemble(b"\x7fELF")
    out.update(code=0, stdout="\t.headerflags\t@\"EF_CUDA_SM90\"\n")
    with pytest.raises(ToolchainError, match="printed no instruction"):
        disassemble(b"\x7fELF")


@pytest.mark.parametrize("m, layout_b, ffma, ldg, lds", [
    (16, "row", 16 * 4, 1, 16 // 4),   # staged A: per step BM x VB FMAs, one 16-byte B load, BM/4 broadcasts
    (8, "row", 8 * 4, 1, 8 // 4),
    (16, "col", 16 * 4 * 4, 16 + 4, 0),  # A in registers: per step BM x RN x VB FMAs, 16-byte loads of BM rows of A
                                         # and RN columns of B
])
def test_gemv_hottest_loop_holds_the_products_fmas(m, layout_b, ffma, ldg, lds):
    """The hottest loop of the FMA GEMV kernel's pick for m rows of x @ W (row-major W) and x @ W.T: its FFMA, global
    and shared loads per pass are those the schedule implies per step (``ffma``, ``ldg``, ``lds``) times its steps
    per pass: unroll, or unroll + 1 with a spare slot in the ring (x @ W from 12 rows per block)."""
    _nvdisasm_or_skip()
    kernel = _compiled(m, 22016, 4096, layout_b)
    s = kernel.schedule
    assert s.kernel == "gemv" and s.unroll in (2, 8), s
    assert s.spare_slot == (layout_b == "row" and m >= 12), s  # GEMV_SPARE_SLOT_MIN_ROWS
    steps = s.unroll + int(s.spare_slot)
    loop = hottest_loop(disassemble(kernel.cubin))
    assert loop is not None
    assert (loop.counts.get("FFMA"), loop.counts.get("LDG"), loop.counts.get("LDS", 0)) == \
        (ffma * steps, ldg * steps, lds * steps), loop.counts


def _sass_mix(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "benchmarks/sass_mix.py", *args], capture_output=True, text=True,
                          check=False, cwd=ROOT)


def test_sass_mix_script_prints_the_table(tmp_path):
    _nvdisasm_or_skip()
    import json

    out = tmp_path / "mix.json"
    run = _sass_mix("--products", "8x4096x4096:NN", "4x4096x4096:nt", "--json", str(out))
    assert run.returncode == 0, run.stderr
    assert "| 8×4096×4096 NN | gemv rows 8 " in run.stdout and "| 4×4096×4096 NT |" in run.stdout
    rows = json.loads(out.read_text())["rows"]
    assert [r["ffma"] > 0 and r["loop_instructions"] > r["ffma"] for r in rows] == [True, True]


@pytest.mark.parametrize("args, says", [(("--products", "8x0x4096"), "sizes must be >= 1"),
                                        (("--products", "8x4096"), "expected MxNxK"),
                                        (("--products", "8x8x8:NX"), "LAYOUT one of"),
                                        (("--arch", "sm_70"), "invalid choice: 'sm_70'")])
def test_sass_mix_script_names_a_bad_argument(args, says):
    """Checked before anything compiles (no nvdisasm needed)."""
    run = _sass_mix(*args)
    assert run.returncode != 0 and says in run.stderr, run.stderr


@pytest.mark.parametrize("read_c", [False, True])
def test_split_k_sum_waits_for_the_main_grid_before_its_coherent_loads(read_c):
    """The split-K sum (a dependent launch on sm_90+, tiledsl.dependent) in SASS: on sm_90 and sm_90a its
    griddepcontrol.wait (ACQBULK) comes before every load, and no load of the workspace takes the read-only path
    (LDG.E.CONSTANT: the main kernel may still be writing it when the grid starts); on sm_80 there is no wait."""
    from tiledsl.compile import compile_source
    from tiledsl.gemm.emit import emit_splitk_reduce

    _nvdisasm_or_skip()
    op = tiledsl.GemmOp(16, 4096, 4096, read_c=read_c)
    ks = emit_splitk_reduce(op, replace(tiledsl.preset("gemm", "sgemm_64x64_4x4"), split_k=8))
    for arch in ("sm_80", "sm_90", "sm_90a"):
        sass = [ins for _, ins in (x for x in disassemble(compile_source(ks, arch).cubin) if isinstance(x, tuple))]
        loads = [i for i, ins in enumerate(sass) if ins.startswith("LDG")]
        waits = [i for i, ins in enumerate(sass) if ins.startswith("ACQBULK")]
        assert len(loads) == 8 + read_c, (arch, [sass[i] for i in loads])
        if arch == "sm_80":  # launched plainly: no wait, and ptxas may take the read-only path
            assert not waits, arch
        else:
            assert len(waits) == 1 and waits[0] < loads[0], (arch, waits, loads[:1])
            assert not any(".CONSTANT" in sass[i] for i in loads), (arch, [sass[i] for i in loads])

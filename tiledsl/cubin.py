"""Resource figures read from a compiled cubin (an ELF file), for when ptxas's ``-v`` report is missing.

NVRTC 13.0 on the H200 machine returned an empty program log for most compilations of a process although
``--ptxas-options=-v`` was given (measured 2026-12-01: the first compile of a process reported, later ones
did not). The same figures are recorded in the cubin: the ``.nv.info`` section holds, per kernel symbol,
EIATTR_REGCOUNT (registers per thread) and EIATTR_FRAME_SIZE (stack frame bytes), and the section
``.nv.shared.<kernel>`` has the size of the kernel's static shared memory (plus, where the cubin has a
``.nv.shared.reserved.*`` section, the 1 KB per block the system reserves on sm_90, which ptxas does not
count). The attribute codes are those
``cuobjdump -elf`` prints (checked against ptxas's report on NVRTC 12.9 by ``tests/test_cubin.py``).
Spill bytes are not recorded; a kernel's spills live in its stack frame, so the frame bounds them.
"""

from __future__ import annotations

import io
import struct

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

__all__ = ["cubin_resources", "elf_complete", "elf_extent"]

EIFMT_SVAL = 0x04  # record format: attribute with a sized payload
EIATTR_FRAME_SIZE = 0x11
EIATTR_REGCOUNT = 0x2F
RESERVED_SMEM_BYTES = 1024  # system-reserved shared memory per block (cudaDevAttrReservedSharedMemoryPerBlock)


def _records(data: bytes):
    """(attribute, payload bytes or None) of each .nv.info record: u8 format, u8 attribute, u16 size or
    value, then ``size`` payload bytes for EIFMT_SVAL records."""
    i = 0
    while i + 4 <= len(data):
        fmt, attr, size = data[i], data[i + 1], struct.unpack_from("<H", data, i + 2)[0]
        if fmt == EIFMT_SVAL:
            yield attr, data[i + 4:i + 4 + size]
            i += 4 + size
        else:
            yield attr, None
            i += 4


def elf_extent(cubin: bytes) -> int | None:
    """Bytes a 64-bit little-endian ELF image spans by its own header (read with pyelftools): the end of its section
    header table, of its program header table and of every section with file contents; None for what is not such an
    ELF."""
    try:
        elf = ELFFile(io.BytesIO(cubin))
        if elf.elfclass != 64 or not elf.little_endian:
            return None
        h = elf.header
        end = max(h.e_phoff + h.e_phentsize * h.e_phnum, h.e_shoff + h.e_shentsize * h.e_shnum)
        return max([end] + [sec["sh_offset"] + sec["sh_size"] for sec in elf.iter_sections()
                            if sec["sh_type"] != "SHT_NOBITS"])  # NOBITS: no bytes in the file
    except (ELFError, struct.error, ValueError):
        return None


def elf_complete(cubin: bytes) -> bytes:
    """``cubin`` with the zero byte CuPy drops put back where its ELF header declares one more (:func:`elf_extent`).

    CuPy's ``nvrtc.getCUBIN`` (CuPy 14.2; seen with NVRTC 12.9) returns one byte fewer than ``nvrtcGetCUBINSize``
    reports (it strips a trailing NUL, as for PTX text): the image ends inside its last program header, whose last
    byte is zero. The driver loads it (a Python ``bytes`` object is followed by a zero byte in memory), but
    ``nvdisasm`` and ``cuobjdump`` reject the file ("invalid ELF file", "does not contain device code"). Only that
    one missing byte is put back; anything else (not such an ELF, already whole, or shorter still: a truncated
    image) is returned as it is.
    """
    end = elf_extent(cubin)
    return cubin + b"\x00" if end is not None and end - len(cubin) == 1 else cubin


def cubin_resources(cubin: bytes, name: str) -> dict | None:
    """Registers per thread, stack frame bytes and static shared memory bytes of kernel ``name`` in
    ``cubin``, or None when the cubin does not record them (not an ELF, no such kernel, no register count).

    Returns:
        ``{"registers": int, "stack_bytes": int, "static_smem_bytes": int}``.
    """
    try:
        elf = ELFFile(io.BytesIO(cubin))
        symtab, info = elf.get_section_by_name(".symtab"), elf.get_section_by_name(".nv.info")
        if symtab is None or info is None:
            return None
        index = next((i for i, sym in enumerate(symtab.iter_symbols()) if sym.name == name), None)
        if index is None:
            return None
        found = {}
        for attr, payload in _records(info.data()):
            if attr in (EIATTR_REGCOUNT, EIATTR_FRAME_SIZE) and payload is not None and len(payload) == 8:
                sym, value = struct.unpack("<II", payload)
                if sym == index:
                    found[attr] = value
        if EIATTR_REGCOUNT not in found:
            return None
        shared = elf.get_section_by_name(f".nv.shared.{name}")
        static = shared["sh_size"] if shared is not None else 0
        if any(sec.name.startswith(".nv.shared.reserved.") for sec in elf.iter_sections()):
            static = max(0, static - RESERVED_SMEM_BYTES)
        return {"registers": found[EIATTR_REGCOUNT], "stack_bytes": found.get(EIATTR_FRAME_SIZE, 0),
                "static_smem_bytes": static}
    except (ELFError, struct.error, ValueError):
        return None

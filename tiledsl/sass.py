"""The machine code (SASS) of a compiled kernel, read on the CPU, and the instruction mix of its hottest loop.

``nvdisasm`` (CUDA's disassembler; the pip package ``nvidia-cuda-nvdisasm`` ships it, found through
``cuda.pathfinder``, else on ``PATH``) prints the kernel's cubin (:attr:`tiledsl.Kernel.cubin`). No GPU is needed:
a cubin compiled for sm_90 on a CPU machine is what an H200 runs when both compile with the same NVRTC (ptxas inside
NVRTC chooses the instructions). The loop summary answers what a profile's "issue slots busy" needs: how many
instructions the kernel issues per useful FMA. An FMA-bound loop that issues 818 instructions for 512 FFMAs (the
staged-A GEMV kernel at sixteen rows, docs/gemm.md) can run its FMA pipe at 63 % of the issue rate at best,
whatever its occupancy.

Loops are read from the control flow nvdisasm prints: a branch to a label above it closes a loop whose body runs
from that label to the branch (a branch to itself, the trap at a kernel's end, is not a loop). The hottest loop is an
innermost one (no other loop inside its range) with the most math instructions (:data:`MATH`); of loops with as
many, the first in the code: a main loop precedes the remainder loop a compiler or an emitter puts after it, which
repeats its math under guards and runs once or twice. Trip counts are not in the code, and the counts are static:
an instruction inside the body under a forward branch counts once although a pass may skip it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ToolchainError

__all__ = ["MATH", "LoopMix", "disassemble", "find_nvdisasm", "hottest_loop", "loop_mix", "loops"]

MATH = frozenset({"FFMA", "FADD", "FMUL", "FFMA32I", "FADD32I", "FMUL32I", "HFMA2", "HADD2", "HMUL2", "DFMA",
                  "DADD", "DMUL", "HMMA", "HGMMA", "IMMA", "DMMA"})
"""Opcodes counted as math when choosing the hottest loop: FP32 (with the immediate forms), packed FP16, FP64, and
the tensor cores' MMAs (floating-point, float64 and integer)."""

NVDISASM_TIMEOUT_S = 120.0
"""The longest nvdisasm may take on one cubin (a few hundred KB take under a second)."""

_LABEL = re.compile(r"^\s*(\.L_x_\d+):")
_INSTRUCTION = re.compile(r"^\s*/\*([0-9a-f]+)\*/\s+(.*?)\s*;")
_BRANCH = re.compile(r"\bBRA\b[^`]*`\((\.L_x_\d+)\)")
_PREDICATE = re.compile(r"^@!?U?P[T\d]+\s+")


@dataclass(frozen=True)
class LoopMix:
    """The instructions of one loop body of a kernel's SASS (a static count: each instruction once).

    Attributes:
        start, end: byte offsets of its first instruction and of its closing backward branch.
        instructions: instructions in the body, the branch included.
        counts: per opcode (``FFMA``, ``LDS``, ...: the mnemonic without its modifiers); not part of the hash.
    """

    start: int
    end: int
    instructions: int
    counts: dict[str, int] = field(hash=False)

    @property
    def math(self) -> int:
        """Math instructions (:data:`MATH`) in the body."""
        return sum(n for op, n in self.counts.items() if op in MATH)

    def other_per(self, opcode: str = "FFMA", per: int = 64) -> float:
        """Instructions that are not ``opcode`` issued per ``per`` of it (inf where the loop has none)."""
        n = self.counts.get(opcode, 0)
        return float("inf") if n == 0 else per * (self.instructions - n) / n


def find_nvdisasm() -> str:
    """The nvdisasm executable: cuda.pathfinder's (a pip wheel, CONDA_PREFIX, CUDA_HOME / CUDA_PATH), else PATH's.

    Raises:
        ToolchainError: none is found (the message names the pip package).
    """
    path = None
    try:
        from cuda.pathfinder import find_nvidia_binary_utility
    except ImportError:
        pass
    else:
        path = find_nvidia_binary_utility("nvdisasm")
    path = path or shutil.which("nvdisasm")
    if path is None:
        raise ToolchainError("nvdisasm was not found: pip install nvidia-cuda-nvdisasm (tiledsl's 'sass' extra), or "
                             "set CUDA_HOME to a CUDA toolkit, or put its bin/ on PATH")
    return path


def disassemble(cubin: bytes) -> list[tuple[int, str] | str]:
    """The SASS of ``cubin`` in order: ``(byte offset, instruction)`` per instruction (predicate and operands kept,
    the final ``;`` dropped) and each label (``".L_x_7"``) as a string where it stands.

    Raises:
        ToolchainError: nvdisasm is missing, cannot run, takes over :data:`NVDISASM_TIMEOUT_S`, rejects the cubin
            (its message is kept) or prints no instruction.
    """
    tool = find_nvdisasm()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        try:
            run = subprocess.run([tool, "-c", str(path)], capture_output=True, text=True, check=False,
                                 timeout=NVDISASM_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ToolchainError(f"nvdisasm ({tool}) did not run: {exc}") from None
    if run.returncode != 0:
        raise ToolchainError(f"nvdisasm failed ({run.returncode}): {run.stderr.strip()[:400]}")
    out = _parse(run.stdout)
    if not any(isinstance(item, tuple) for item in out):
        raise ToolchainError(f"nvdisasm printed no instruction for a {len(cubin)}-byte cubin: "
                             f"{run.stdout.strip()[:200]!r}")
    return out


def _parse(listing: str) -> list[tuple[int, str] | str]:
    out: list[tuple[int, str] | str] = []
    for line in listing.splitlines():
        label = _LABEL.match(line)
        if label:
            out.append(label.group(1))
            continue
        ins = _INSTRUCTION.match(line)
        if ins:
            out.append((int(ins.group(1), 16), ins.group(2)))
    return out


def _opcode(instruction: str) -> str:
    return _PREDICATE.sub("", instruction).split()[0].split(".")[0]


def loops(sass: list[tuple[int, str] | str]) -> list[LoopMix]:
    """Every loop of a disassembly (:func:`disassemble`), in the order their branches stand: a branch to a label above
    it, the body from the label (a branch to itself is not a loop)."""
    seen: dict[str, int] = {}
    code: list[tuple[int, str]] = []
    found = []
    for item in sass:
        if isinstance(item, str):
            seen[item] = len(code)
            continue
        code.append(item)
        target = _BRANCH.search(item[1])
        if target and target.group(1) in seen and seen[target.group(1)] < len(code) - 1:
            body = code[seen[target.group(1)]:]
            found.append(LoopMix(start=body[0][0], end=item[0], instructions=len(body),
                                 counts=dict(Counter(_opcode(t) for _, t in body))))
    return found


def hottest_loop(sass: list[tuple[int, str] | str]) -> LoopMix | None:
    """The innermost loop with the most math instructions (of equals, the first in the code: the module's docstring),
    or None where no innermost loop holds math."""
    found = loops(sass)
    inner = [lp for lp in found
             if not any(o is not lp and lp.start <= o.start and o.end <= lp.end for o in found)]
    best = max(inner, key=lambda lp: (lp.math, -lp.start), default=None)
    return best if best is not None and best.math > 0 else None


def loop_mix(kernel) -> LoopMix | None:
    """:func:`hottest_loop` of a compiled :class:`tiledsl.Kernel` (its ``cubin``).

    Raises:
        ToolchainError: nvdisasm is missing or failed.
    """
    return hottest_loop(disassemble(kernel.cubin))

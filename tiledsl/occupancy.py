"""Occupancy and wave quantization.

Blocks resident per SM are the smallest of four limits (the shortest stave of the barrel): threads, registers, shared memory and the hardware block limit. The
arithmetic follows the CUDA Occupancy Calculator (``cuda_occupancy.h``) and the CUDA C++ Programming
Guide, "Technical Specifications per Compute Capability" (cc 8.0 / 9.0):

* registers are allocated per warp in units of 256 (regs_per_thread · 32 rounded up to 256), and each
  of the 4 SM sub-partitions holds a quarter of the register file;
* shared memory is allocated in units of 128 bytes, plus 1 KB per block reserved by the system
  (``cudaDevAttrReservedSharedMemoryPerBlock`` = 1024 on cc ≥ 8.0);
* threads are counted in whole warps.

Worked example (sm_90, the test's case): 256 threads, 128 registers, 16 896 bytes of shared memory →
threads: 2048 / 256 = 8; registers: 128·32 = 4096 per warp, 16384 / 4096 = 4 warps per sub-partition,
4·4 = 16 warps = 2 blocks of 8 warps; shared memory: 233 472 / (16 896 + 1 024) = 13; blocks: 32 →
2 blocks (limited by registers), 16 of 64 warps = 25 % occupancy.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .target import Target

WARP = 32
REG_ALLOC_UNIT = 256
"""Registers are allocated per warp in multiples of 256 (CUDA Occupancy Calculator, cc 5.x–9.0)."""
SUB_PARTITIONS = 4
"""SM sub-partitions (schedulers), each with a quarter of the register file (cc 7.0–9.0)."""
SMEM_ALLOC_UNIT = 128
"""Shared-memory allocation granularity in bytes (CUDA Occupancy Calculator, cc 8.0 / 9.0)."""
SMEM_RESERVED_PER_BLOCK_BYTES = 1024
"""Shared memory the system reserves per block on cc ≥ 8.0 (CUDA guide, cc 8.x/9.0 specifications)."""


@dataclass(frozen=True)
class Occupancy:
    """Resident blocks per SM and what limits them.

    Attributes:
        threads_per_block: threads of one block.
        registers_per_thread: registers used by a thread.
        registers_source: "ptxas" (from a compiled kernel's report) or "estimate".
        smem_per_block_bytes: shared memory of one block (static + dynamic).
        by_threads, by_registers, by_smem, by_blocks: blocks per SM allowed by each limit.
        blocks_per_sm: the smallest of the four.
        limited_by: "threads", "registers", "smem" or "blocks".
        warps_per_sm: resident warps = blocks_per_sm · warps per block.
        occupancy: warps_per_sm / the SM's warp limit (0 to 1).
    """

    threads_per_block: int
    registers_per_thread: int
    registers_source: str
    smem_per_block_bytes: int
    by_threads: int
    by_registers: int
    by_smem: int
    by_blocks: int
    blocks_per_sm: int
    limited_by: str
    warps_per_sm: int
    occupancy: float

    def to_dict(self) -> dict:
        return asdict(self)


def _ceil_to(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def occupancy(target: Target, threads_per_block: int, registers_per_thread: int, smem_per_block_bytes: int,
              registers_source: str = "estimate") -> Occupancy:
    """Blocks per SM from threads, registers and shared memory against ``target``'s limits.

    Args:
        target: the device (limits: threads, registers, shared memory and blocks per SM).
        threads_per_block: threads of one block (≥ 1).
        registers_per_thread: registers per thread (ptxas report or an estimate; 0 counts as 1).
        smem_per_block_bytes: static + dynamic shared memory of one block.
        registers_source: "ptxas" or "estimate", recorded in the result.

    Returns:
        An :class:`Occupancy`; ``blocks_per_sm`` is 0 when one block does not fit at all.

    Example:
        >>> occupancy(Target.known("H200"), 256, 128, 16896).blocks_per_sm
        2
    """
    warps_per_block = -(-max(threads_per_block, 1) // WARP)
    by_threads = target.max_threads_per_sm // (warps_per_block * WARP)
    regs_per_warp = _ceil_to(max(registers_per_thread, 1) * WARP, REG_ALLOC_UNIT)
    warps_per_sub = (target.regs_per_sm // SUB_PARTITIONS) // regs_per_warp
    by_registers = (warps_per_sub * SUB_PARTITIONS) // warps_per_block
    if smem_per_block_bytes > 0:
        need = _ceil_to(smem_per_block_bytes, SMEM_ALLOC_UNIT) + SMEM_RESERVED_PER_BLOCK_BYTES
        by_smem = target.smem_per_sm_bytes // need
    else:
        by_smem = target.max_blocks_per_sm
    by_blocks = target.max_blocks_per_sm
    limits = {"threads": by_threads, "registers": by_registers, "smem": by_smem, "blocks": by_blocks}
    limited_by = min(limits, key=lambda k: limits[k])
    blocks = max(limits[limited_by], 0)
    warps = blocks * warps_per_block
    return Occupancy(threads_per_block, registers_per_thread, registers_source, smem_per_block_bytes,
                     by_threads, by_registers, by_smem, by_blocks, blocks, limited_by, warps,
                     warps / (target.max_threads_per_sm // WARP))


@dataclass(frozen=True)
class Waves:
    """Wave quantization: blocks over SMs × resident blocks per SM.

    Attributes:
        blocks: blocks in the grid.
        slots: SMs · resident blocks per SM (blocks running at once).
        waves: ceil(blocks / slots).
        efficiency: blocks / (waves · slots): the share of the last wave's slots that hold work,
            averaged over all waves (1.0 = no quantization loss).
    """

    blocks: int
    slots: int
    waves: int
    efficiency: float

    def to_dict(self) -> dict:
        return asdict(self)


def waves(blocks: int, sm_count: int, blocks_per_sm: int) -> Waves:
    """Wave quantization of ``blocks`` over ``sm_count`` SMs holding ``blocks_per_sm`` each.

    Example (GEMM 4096² with 128×128 tiles, 2 blocks per SM on 132 SMs): 1024 blocks, 264 slots,
    4 waves, efficiency 1024 / 1056 = 0.97.
    """
    slots = max(sm_count * blocks_per_sm, 1)
    n = -(-blocks // slots) if blocks > 0 else 0
    return Waves(blocks, slots, n, blocks / (n * slots) if n else 1.0)

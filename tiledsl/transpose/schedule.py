"""TransposeSchedule: how a transpose is tiled onto the GPU, and its rule table.

The transpose ladder (``docs/design.md``, "Background"; measured in ``docs/transpose.md``):

1.1 ``naive_read``  — each thread copies one element; a warp reads along a row of X (coalesced reads,
    strided writes);
1.2 ``naive_write`` — a warp writes along a row of Y (coalesced writes, strided reads);
1.3 ``shared``      — a TILE×TILE tile is staged through shared memory so both the read of X and the
    write of Y are coalesced; unpadded (``smem_pad=0``), the transposed read of the tile hits one bank;
1.4 ``shared`` with ``smem_pad=1`` — ``smem[TILE][TILE+1]`` spreads a column over all banks.

Beyond the ladder: ``rows_per_thread`` (a TILE×(TILE/rows_per_thread) block where each thread moves
several rows, more bytes in flight per thread, Little's law) and ``vec`` (each thread moves a chunk of
``vec`` consecutive elements with one 16-byte access where the layout allows).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from .. import rules as R
from ..errors import ScheduleError
from ..spec import ScheduleRecord, as_int, schedule_error
from ..target import Target

VARIANTS = ("shared", "naive_read", "naive_write")
WIDEST_ITEMSIZE = 8  # float64/int64: the tile's shared memory is sized for the widest element

TRANSPOSE_RULES: tuple[R.Rule, ...] = (
    R.Rule("tile_side", "TILE == 32 or TILE == 64",
           "{cls}.tile={TILE} must be 32 or 64 (side of the square tile, elements)"),
    R.Rule("vec_width", "VEC == 1 or VEC == 2 or VEC == 4 or VEC == 8",
           "{cls}.vec={VEC} must be 1, 2, 4 or 8 elements per thread chunk"),
    R.Rule("smem_pad_0_or_1", "SMEM_PAD == 0 or SMEM_PAD == 1",
           "{cls}.smem_pad={SMEM_PAD} must be 0 or 1 ([TILE][TILE+1] padding)"),
    R.Rule("vec_divides_tile", "TILE % VEC == 0",
           "{cls}.vec={VEC} does not divide tile={TILE}"),
    R.Rule("rows_per_thread_divides_tile", "ROWS_PER_THREAD >= 1 and TILE % ROWS_PER_THREAD == 0",
           "{cls}.rows_per_thread={ROWS_PER_THREAD} must be ≥ 1 and divide tile={TILE}"),
    R.Rule("naive_is_scalar", "SHARED == 1 or VEC == 1",
           "{cls}.vec={VEC} must be 1 for a naive variant (one element per thread access)"),
    R.Rule("naive_has_no_padding", "SHARED == 1 or SMEM_PAD == 0",
           "{cls}.smem_pad={SMEM_PAD} must be 0 for a naive variant (it uses no shared memory)"),
    R.Rule("swizzle_range", "SWIZZLE >= 1 and SWIZZLE <= 65535",
           "{cls}.swizzle={SWIZZLE} must be from 1 to 65535 (tile-rows per rasterization group)"),
    R.Rule("threads_multiple_of_32", "THREADS % 32 == 0",
           "{cls} threads=(tile/vec)·(tile/rows_per_thread)={THREADS} is not a multiple of 32"),
    R.Rule("threads_at_most_1024", "THREADS <= 1024",
           "{cls} threads=(tile/vec)·(tile/rows_per_thread)={THREADS} exceeds 1024 per block; "
           "raise rows_per_thread or vec"),
    R.Rule("registers_fit_thread", "SHARED == 0 or ROWS_PER_THREAD * (VEC * WORDS + 10) <= 240",
           "{cls} rows_per_thread={ROWS_PER_THREAD} rows of vec={VEC} {ITEMSIZE}-byte elements need about "
           "rows_per_thread·(vec·{WORDS} + 10)={REG_ESTIMATE} registers per thread (the chunk plus ~10 per row "
           "for 64-bit load/store addresses and bounds), over the 240 that fit beside the indices in 255: "
           "the kernel would spill; lower rows_per_thread or vec", scope="op"),
    R.Rule("threads_within_device", "THREADS <= MAX_THREADS_PER_BLOCK",
           "{cls} threads={THREADS} exceeds the device's {MAX_THREADS_PER_BLOCK} per block",
           scope="target", resource=True),
    R.Rule("smem_within_device", "SMEM_BYTES <= SMEM_PER_BLOCK_BYTES",
           "{cls} needs {SMEM_BYTES} bytes of shared memory (tile·(tile+smem_pad)·8), over the device's "
           "{SMEM_PER_BLOCK_BYTES} bytes per block; lower tile",
           scope="target", resource=True),
)


@dataclass(frozen=True)
class TransposeSchedule(ScheduleRecord):
    """How to tile a transpose. Frozen, hashable, JSON round-trips through ``to_dict``/``from_dict``.

    A block of ``(tile/vec) × (tile/rows_per_thread)`` threads moves one ``tile × tile`` tile: thread
    (tx, ty) owns the chunk of ``vec`` consecutive elements starting at column ``tx·vec`` of the rows
    ``ty + i·(tile/rows_per_thread)``, i < rows_per_thread, on the way in and likewise on the way out.

    Attributes:
        variant: "shared" (tile staged through shared memory; reads and writes coalesced),
            "naive_read" (no shared memory, warps read rows of X) or "naive_write" (warps write rows
            of Y). Ladder rungs 1.1–1.4 above.
        tile: side of the square tile, 32 or 64 elements.
        rows_per_thread: tile rows each thread moves (the classic 32×8 block is tile=32,
            rows_per_thread=4).
        vec: elements per thread chunk (1, 2, 4, 8). Each chunk moves with the widest access that
            the op's alignment allows, at most 16 bytes (``min(vec, op.align_in)`` on loads,
            ``min(vec, op.align_out)`` on stores).
        smem_pad: 0 or 1 element of padding per shared-memory row (``[TILE][TILE+1]``).
        swizzle: block rasterization group (as GemmSchedule.swizzle): consecutive blocks walk
            ``swizzle`` tile-rows before moving to the next tile-column, so the blocks resident at one
            time read a near-square region of X and write one of Y (long runs in each DRAM page on both
            sides). 1 = row by row, a plain 2-D grid.

    Raises:
        ScheduleError: a rule of :data:`TRANSPOSE_RULES` does not hold (the message names field,
            value, limit and rule), or ``variant`` is unknown.

    Example:
        >>> TransposeSchedule(tile=64, rows_per_thread=4, vec=4).threads
        256
    """

    variant: str = "shared"
    tile: int = 64
    rows_per_thread: int = 4
    vec: int = 4
    smem_pad: int = 1
    swizzle: int = 8

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ScheduleError(f"TransposeSchedule.variant={self.variant!r} must be one of {VARIANTS}",
                                "variant")
        for f in fields(self):
            if f.name != "variant":
                object.__setattr__(self, f.name, as_int(getattr(self, f.name), f"TransposeSchedule.{f.name}", schedule_error("type")))
        R.check(TRANSPOSE_RULES, self.env(), ("schedule",), "TransposeSchedule")

    # ---- derived quantities (one place; used by validation, emitter and launch) ----
    @property
    def shared(self) -> bool:
        """True when the tile is staged through shared memory."""
        return self.variant == "shared"

    @property
    def block(self) -> tuple[int, int, int]:
        """Threads per block (x, y, 1) = (tile/vec, tile/rows_per_thread, 1)."""
        return (max(self.tile // max(self.vec, 1), 1), max(self.tile // max(self.rows_per_thread, 1), 1), 1)

    @property
    def threads(self) -> int:
        """Threads per block = (tile/vec)·(tile/rows_per_thread)."""
        return self.block[0] * self.block[1]

    def smem_bytes(self, itemsize: int = WIDEST_ITEMSIZE) -> int:
        """Static shared memory per block: tile·(tile + smem_pad)·itemsize bytes (0 for naive variants)."""
        return self.tile * (self.tile + self.smem_pad) * itemsize if self.shared else 0

    def env(self, target: Target | None = None, op=None) -> dict[str, int]:
        """Names the rule expressions use (upper-case fields and derived values; ITEMSIZE, WORDS = 32-bit
        registers per element and REG_ESTIMATE when ``op`` is given)."""
        env = {f.name.upper(): int(getattr(self, f.name)) for f in fields(self) if f.name != "variant"}
        env.update(SHARED=int(self.shared), THREADS=self.threads, SMEM_BYTES=self.smem_bytes())
        if op is not None:
            words = max(1, op.itemsize // 4)
            env.update(ITEMSIZE=op.itemsize, WORDS=words,
                       REG_ESTIMATE=self.rows_per_thread * (self.vec * words + 10))
        if target is not None:
            # static __shared__ arrays are limited to 48 KB whatever the opt-in limit
            env.update(MAX_THREADS_PER_BLOCK=target.max_threads_per_block,
                       SMEM_PER_BLOCK_BYTES=min(48 * 1024, target.smem_per_block_optin_bytes))
        return env

    def validate(self, target: Target | None = None) -> TransposeSchedule:
        """Check the device-dependent rules (threads, shared memory) against ``target``.

        Raises:
            ResourceError: the schedule needs more than the device has.
        """
        if target is not None:
            R.check(TRANSPOSE_RULES, self.env(target), ("target",), "TransposeSchedule")
        return self


    def check_op(self, op) -> TransposeSchedule:
        """Check the rules that need the op (registers per thread depend on the element size).

        Raises:
            ScheduleError: a rule of scope "op" does not hold (rule ``registers_fit_thread``).
        """
        R.check(TRANSPOSE_RULES, self.env(op=op), ("op",), "TransposeSchedule")
        return self



"""ReduceSchedule: how a reduction is mapped onto the GPU, and its rule table.

The strategies are the reduction ladder (``docs/design.md``, "Background"; measured in ``docs/reduce.md``):

======  ====================  ===================================================================
rung    strategy              what a block does
======  ====================  ===================================================================
v1      ``atomic``            every element is combined into the result with a global atomic
v2      ``smem_interleaved``  shared-memory tree, ``tid % (2·stride) == 0`` (divergent warps)
v3      ``smem_contiguous``   shared-memory tree, contiguous threads (``idx = 2·stride·tid``)
v4      ``smem_sequential``   shared-memory tree, sequential addressing (no bank conflicts)
v5      ``grid_stride``       a fixed grid strides over the input, then the v4 tree
v6      ``warp_shuffle``      grid-stride, then ``__shfl_xor_sync`` inside warps, one smem step
v7      ``warp_shuffle``      v6 with ``vec=4`` (16-byte float4 loads)
======  ====================  ===================================================================

v1–v4 launch one block per tile of ``block·vec·items_per_thread`` elements (the classic kernels have no
loop); v5–v7 launch ``grid`` blocks (0 = auto: one full wave, SMs × resident blocks per SM).
``items_per_thread`` independent loads are issued before any is used (bytes in flight, Little's law).

Blocks of one output are combined by ``combine``: ``two_pass`` writes one partial per block and the last
block to finish (a ticket counter) reduces the partials in a fixed order (same bits run to run), or
``atomic`` (global atomics into a per-output accumulator; order, hence rounding, varies).

Row and column mapping: ``row_threads`` threads reduce one contiguous row (a sub-warp or warp per row for
short rows, ``block`` for a block per row, 0 = auto by row length); ``col_rows`` threads of a block walk
the reduced axis of a strided (column) reduction while ``block / col_rows`` neighbouring threads read
adjacent columns, coalesced (0 = auto).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from .. import dtypes
from .. import rules as R
from ..errors import ScheduleError
from ..spec import ScheduleRecord, as_int, schedule_error, widest_dividing
from ..target import Target

STRATEGIES = ("atomic", "smem_interleaved", "smem_contiguous", "smem_sequential", "grid_stride", "warp_shuffle")
COMBINES = ("two_pass", "atomic")
GRID_STRIDE = STRATEGIES.index("grid_stride")
WARP_SHUFFLE = STRATEGIES.index("warp_shuffle")
_POW2_32 = "({x} == 1 or {x} == 2 or {x} == 4 or {x} == 8 or {x} == 16 or {x} == 32)"
_POW2_BLOCK = ("({x} == 32 or {x} == 64 or {x} == 128 or {x} == 256 or {x} == 512 or {x} == 1024)")

REDUCE_RULES: tuple[R.Rule, ...] = (
    R.Rule("block_power_of_two", _POW2_BLOCK.format(x="BLOCK"),
           "{cls}.block={BLOCK} must be a power of two from 32 to 1024 threads (the trees halve it)"),
    R.Rule("vec_width", "VEC == 1 or VEC == 2 or VEC == 4 or VEC == 8",
           "{cls}.vec={VEC} must be 1, 2, 4 or 8 elements per load (lowered to 16 bytes and to the "
           "input's alignment)"),
    R.Rule("items_per_thread_range", "ITEMS_PER_THREAD >= 1 and ITEMS_PER_THREAD <= 16",
           "{cls}.items_per_thread={ITEMS_PER_THREAD} must be from 1 to 16 loads in flight per thread"),
    R.Rule("grid_range", "GRID >= 0 and GRID <= 2147483647",
           "{cls}.grid={GRID} must be from 0 to 2^31 - 1 = 2147483647 blocks (CUDA's limit on gridDim.x; "
           "0 = auto: one wave, a multiple of the SM count)"),
    R.Rule("atomic_strategy_combines_atomically", "STRATEGY != 0 or COMBINE == 1",
           "{cls}.strategy='atomic' (v1: one global atomic per element) needs combine='atomic', "
           "got combine={COMBINE_NAME!r}"),
    R.Rule("grid_needs_grid_stride", "STRATEGY >= 4 or GRID == 0",
           "{cls}.grid={GRID} needs strategy 'grid_stride' or 'warp_shuffle'; strategy="
           "{STRATEGY_NAME!r} launches one block per tile, so grid must be 0"),
    R.Rule("row_threads_shape", "ROW_THREADS == 0 or ROW_THREADS == BLOCK or " + _POW2_32.format(x="ROW_THREADS"),
           "{cls}.row_threads={ROW_THREADS} must be 0 (auto), a power of two ≤ 32 (sub-warp / warp per "
           "row) or equal to block={BLOCK} (block per row)"),
    R.Rule("sub_block_rows_use_shuffles", "ROW_THREADS == 0 or ROW_THREADS == BLOCK or STRATEGY == 5",
           "{cls}.row_threads={ROW_THREADS} < block={BLOCK} reduces rows inside a warp and needs "
           "strategy='warp_shuffle', got {STRATEGY_NAME!r}"),
    R.Rule("col_rows_divide_block", "COL_ROWS == 0 or (COL_ROWS >= 1 and COL_ROWS <= 32 and BLOCK % COL_ROWS == 0)",
           "{cls}.col_rows={COL_ROWS} must be 0 (auto) or from 1 to 32 dividing block={BLOCK}"),
    R.Rule("strided_needs_loop", "INNER == 1 or STRATEGY >= 4",
           "{cls}.strategy={STRATEGY_NAME!r} reduces contiguous segments only; this op reduces a strided "
           "axis (inner={INNER}); use 'grid_stride' or 'warp_shuffle'", scope="op"),
    R.Rule("column_tile_fits_block", "INNER == 1 or COL_ROWS == 0 or COL_ROWS >= V",
           "{cls}.col_rows={COL_ROWS} is below the {V} elements per load of this strided op: the "
           "block's column tile block/col_rows·{V} must not exceed block={BLOCK} (one column per thread)",
           scope="op"),
    R.Rule("loads_fit_registers", "BLOCK <= 512 or ITEMS_PER_THREAD * V * ITEMSIZE <= 128",
           "{cls} items_per_thread·V·itemsize={ITEMS_PER_THREAD}·{V}·{ITEMSIZE}={LOAD_BYTES} bytes of loads in "
           "flight per thread need more than the 64 registers each thread of a block={BLOCK} block can have "
           "(65536 per SM) and would spill; the limit is 128 bytes per thread above block=512: lower "
           "items_per_thread or block", scope="op"),
    R.Rule("block_within_device", "BLOCK <= MAX_THREADS_PER_BLOCK",
           "{cls}.block={BLOCK} exceeds the device's {MAX_THREADS_PER_BLOCK} threads per block",
           scope="target", resource=True),
)


@dataclass(frozen=True)
class ReduceSchedule(ScheduleRecord):
    """How to map a reduction onto the GPU. Frozen, hashable, JSON round-trips via ``to_dict``/``from_dict``.

    Attributes:
        block: threads per block (power of two, 32–1024).
        vec: requested elements per load (1, 2, 4, 8); lowered to at most 16 bytes and to what the input
            allows (4 for float32 = float4, 8 for float16/bfloat16, 2 for float64/int64).
        items_per_thread: independent vector loads issued per thread before they are combined (1–16).
        strategy: one of :data:`STRATEGIES` (ladder v1–v6; v7 is ``warp_shuffle`` with vec=4).
        grid: blocks for a full reduction with a grid-stride strategy (for row/column reductions, the
            blocks sharing the work, divided among outputs); 0 or "auto" (stored as 0) = one wave of
            resident blocks.
        combine: "two_pass" (deterministic: fixed-order partials, the default) or "atomic".
        row_threads: threads per contiguous row: a power of two ≤ 32, ``block``, or 0 = auto.
        col_rows: threads of a block along the reduced axis of a strided reduction (1–32), 0 = auto.

    Raises:
        ScheduleError: a rule of :data:`REDUCE_RULES` does not hold; the message names the field, the
            value, the limit and the rule.

    Example:
        >>> ReduceSchedule(block=256, vec=4, items_per_thread=4, strategy="warp_shuffle").combine
        'two_pass'
    """

    block: int = 256
    vec: int = 8
    items_per_thread: int = 4
    strategy: str = "warp_shuffle"
    grid: int = 0  # or "auto", stored as 0
    combine: str = "two_pass"
    row_threads: int = 0
    col_rows: int = 0

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "strategy":
                if v not in STRATEGIES:
                    raise ScheduleError(f"ReduceSchedule.strategy={v!r} must be one of {STRATEGIES}", "strategy")
            elif f.name == "combine":
                if v not in COMBINES:
                    raise ScheduleError(f"ReduceSchedule.combine={v!r} must be one of {COMBINES}", "combine")
            elif f.name == "grid" and isinstance(v, str):
                if v != "auto":
                    raise ScheduleError(f"ReduceSchedule.grid={v!r} must be an integer ≥ 0 or 'auto' (= 0: one "
                                        "wave of resident blocks)", "type")
                object.__setattr__(self, "grid", 0)
            else:
                object.__setattr__(self, f.name, as_int(v, f"ReduceSchedule.{f.name}", schedule_error("type")))
        R.check(REDUCE_RULES, self.env(), ("schedule",), "ReduceSchedule")

    @property
    def strategy_index(self) -> int:
        """Position of ``strategy`` in :data:`STRATEGIES` (the ``STRATEGY`` constant of the kernel)."""
        return STRATEGIES.index(self.strategy)

    @property
    def combine_index(self) -> int:
        """Position of ``combine`` in :data:`COMBINES` (0 two_pass, 1 atomic)."""
        return COMBINES.index(self.combine)

    def env(self, target: Target | None = None, op=None) -> dict:
        """Names the rule expressions use (upper-case fields; strategy/combine as their index)."""
        env: dict = {f.name.upper(): getattr(self, f.name) for f in fields(self)}
        env.update(STRATEGY=STRATEGIES.index(self.strategy), COMBINE=COMBINES.index(self.combine),
                   STRATEGY_NAME=self.strategy, COMBINE_NAME=self.combine)
        if target is not None:
            env.update(MAX_THREADS_PER_BLOCK=target.max_threads_per_block)
        if op is not None:
            v, itemsize = vec_width(op, self), dtypes.get(op.dtype).itemsize
            env.update(INNER=op.inner, V=v, ITEMSIZE=itemsize, LOAD_BYTES=self.items_per_thread * v * itemsize)
        return env

    def validate(self, target: Target | None = None) -> ReduceSchedule:
        """Check the device-dependent rules against ``target``.

        Raises:
            ResourceError: the schedule needs more than the device has.
        """
        if target is not None:
            R.check(REDUCE_RULES, self.env(target), ("target",), "ReduceSchedule")
        return self

    def check_op(self, op) -> ReduceSchedule:
        """Check the rules that need the op (e.g. strided reductions need a grid-stride strategy).

        Raises:
            ScheduleError: a rule of scope "op" does not hold.
        """
        R.check(REDUCE_RULES, self.env(op=op), ("op",), "ReduceSchedule")
        return self


def vec_width(op, s: ReduceSchedule) -> int:
    """Effective elements per load: ≤ s.vec, ≤ 16 bytes; strided also ≤ op.align and dividing inner."""
    v = min(s.vec, 16 // dtypes.get(op.dtype).itemsize)
    if op.kind == "strided":
        v = widest_dividing(min(v, op.align), op.inner)
    return max(v, 1)

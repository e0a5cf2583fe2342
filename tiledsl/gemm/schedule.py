"""GemmSchedule: how a GEMM is tiled onto the GPU, and its rule table.

Tiling (``docs/design.md``, "Background"): a bm×bn block tile in shared memory cuts global
traffic by ½(1/bm + 1/bn), an rm×rn thread tile in registers cuts shared-memory traffic by
½(1/rm + 1/rn). A warp tile wm×wn groups the 32 threads of a warp so their shared-memory reads broadcast.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from .. import rules as R
from ..errors import ScheduleError
from ..spec import ScheduleRecord, as_int, schedule_error
from ..target import Target

GEMM_RULES: tuple[R.Rule, ...] = (
    R.Rule("positive_sizes", "BM >= 1 and BN >= 1 and BK >= 1 and RM >= 1 and RN >= 1",
           "{cls} tile sizes must be ≥ 1 (bm={BM}, bn={BN}, bk={BK}, rm={RM}, rn={RN})"),
    R.Rule("tile_sizes_bounded", "BM <= 1024 and BN <= 1024 and BK <= 1024 and RM <= 64 and RN <= 64",
           "{cls} tile sizes must be ≤ 1024 (bm={BM}, bn={BN}, bk={BK}) and thread tiles ≤ 64 "
           "(rm={RM}, rn={RN})"),
    R.Rule("warp_tile_positive", "WM >= 1 and WN >= 1 and WM <= 4096 and WN <= 4096",
           "{cls} warp tile wm×wn={WM}×{WN} must be positive (give both, or 0 and 0 to choose automatically)"),
    R.Rule("vec_width", "VEC == 1 or VEC == 2 or VEC == 4",
           "{cls}.vec={VEC} must be 1, 2 or 4 elements per global load"),
    R.Rule("thread_tile_divides_block_m", "BM % RM == 0", "{cls}.bm={BM} is not a multiple of rm={RM}"),
    R.Rule("thread_tile_divides_block_n", "BN % RN == 0", "{cls}.bn={BN} is not a multiple of rn={RN}"),
    R.Rule("fragment_width_m", "RM % 4 == 0 or RM == 1 or RM == 2",
           "{cls}.rm={RM} must be 1, 2 or a multiple of 4 (fragments are read 4 wide)"),
    R.Rule("fragment_width_n", "RN % 4 == 0 or RN == 1 or RN == 2",
           "{cls}.rn={RN} must be 1, 2 or a multiple of 4 (fragments are read 4 wide)"),
    R.Rule("warp_tile_divides_block", "BM % WM == 0 and BN % WN == 0",
           "{cls} warp tile wm×wn={WM}×{WN} must divide the block tile bm×bn={BM}×{BN}"),
    R.Rule("thread_tile_divides_warp", "WM % RM == 0 and WN % RN == 0",
           "{cls} thread tile rm×rn={RM}×{RN} must divide the warp tile wm×wn={WM}×{WN}"),
    R.Rule("warp_is_32_threads", "WARP_LANES == 32",
           "{cls} warp tile wm×wn={WM}×{WN} over thread tile rm×rn={RM}×{RN} gives {WARP_LANES} "
           "threads, not 32"),
    R.Rule("threads_at_most_1024", "THREADS <= 1024",
           "{cls} threads=(bm/rm)·(bn/rn)={THREADS} exceeds 1024 per block"),
    R.Rule("vec_divides_tile", "BM % VEC == 0 and BN % VEC == 0 and BK % VEC == 0",
           "{cls}.vec={VEC} must divide bm={BM}, bn={BN} and bk={BK}"),
    R.Rule("a_tile_load_even", "(BM * BK) % (THREADS * VEC) == 0",
           "{cls} A tile bm·bk={BM}·{BK} does not split evenly into loads of vec={VEC} over "
           "{THREADS} threads"),
    R.Rule("b_tile_load_even", "(BK * BN) % (THREADS * VEC) == 0",
           "{cls} B tile bk·bn={BK}·{BN} does not split evenly into loads of vec={VEC} over "
           "{THREADS} threads"),
    R.Rule("unroll_divides_bk", "UNROLL >= 1 and BK % UNROLL == 0",
           "{cls}.unroll={UNROLL} must be ≥ 1 and divide bk={BK}"),
    R.Rule("smem_pad_keeps_16_bytes", "SMEM_PAD >= 0 and SMEM_PAD <= 64 and SMEM_PAD % 4 == 0",
           "{cls}.smem_pad={SMEM_PAD} must be a multiple of 4 elements in 0..64 (keeps 16-byte shared "
           "accesses aligned)"),
    R.Rule("accumulators_fit_registers", "RM * RN <= 128",
           "{cls} thread tile rm·rn={RM}·{RN} accumulators exceed 128 (registers would spill)"),
    R.Rule("swizzle_range", "SWIZZLE >= 1 and SWIZZLE <= 65535", "{cls}.swizzle={SWIZZLE} must be in 1..65535"),
    R.Rule("split_k_range", "SPLIT_K >= 1 and SPLIT_K <= 64", "{cls}.split_k={SPLIT_K} must be in 1..64"),
    R.Rule("min_blocks_range", "MIN_BLOCKS >= 1 and MIN_BLOCKS <= 32",
           "{cls}.min_blocks={MIN_BLOCKS} must be in 1..32 (or 0 for automatic)"),
    R.Rule("min_blocks_fit_sm", "THREADS * MIN_BLOCKS <= MAX_THREADS_PER_SM",
           "{cls}.min_blocks={MIN_BLOCKS} blocks of {THREADS} threads exceed the device's "
           "{MAX_THREADS_PER_SM} threads per SM", scope="target", resource=True),
    R.Rule("threads_within_device", "THREADS <= MAX_THREADS_PER_BLOCK",
           "{cls} threads={THREADS} exceeds the device's {MAX_THREADS_PER_BLOCK} per block",
           scope="target", resource=True),
    R.Rule("smem_within_device", "SMEM_BYTES <= SMEM_OPTIN_BYTES",
           "{cls} needs {SMEM_BYTES} bytes of shared memory, over the device's opt-in limit of "
           "{SMEM_OPTIN_BYTES} bytes per block; lower bm/bn/bk, set double_buffer=False or smem_pad=0",
           scope="target", resource=True),
)


def _auto_warp_lanes_n(bm: int, bn: int, rm: int, rn: int) -> int:
    """Threads of a warp along N for the default warp tile: prefer a 4×8 arrangement (square-ish)."""
    tm, tn = max(bm // max(rm, 1), 1), max(bn // max(rn, 1), 1)
    for lanes_n in (8, 4, 16, 2, 32, 1):
        lanes_m = 32 // lanes_n
        if tn % lanes_n == 0 and tm % lanes_m == 0:
            return lanes_n
    return min(tn, 32)


@dataclass(frozen=True)
class GemmSchedule(ScheduleRecord):
    """How to tile a GEMM. Frozen, hashable, JSON round-trips through ``to_dict``/``from_dict``.

    Attributes:
        bm, bn, bk: block tile (rows of C, columns of C, depth of one K step), elements.
        rm, rn: thread tile: accumulators per thread, rm rows × rn columns of C.
        vec: elements per global load (1, 2 or 4; 4 = 16-byte loads for float32). Lowered
            automatically to what the operands' alignment allows.
        double_buffer: two shared-memory stages; the next K tile is prefetched into registers
            while the current one is computed (one barrier per K step).
        unroll: unroll factor of the inner k loop over bk.
        smem_pad: elements of padding per shared-memory row (multiple of 4) against bank conflicts.
        wm, wn: warp tile (0 = choose: threads of a warp arranged 4×8 where possible).
        swizzle: block rasterization group (Triton's GROUP_M): consecutive blocks walk ``swizzle``
            block-rows before moving along N, so they share A and B tiles in L2. 1 = row by row.
        split_k: slices of K computed by separate blocks (grid y); partial sums go to a float32
            workspace and a second kernel adds them in a fixed order (deterministic) and applies
            alpha/beta. For shapes with few C tiles and a long K (e.g. 512×16×500000).
        min_blocks: blocks per SM the register allocation must allow (``__launch_bounds__``'s second
            argument; caps registers at 65536 / (threads · min_blocks)). 0 = automatic: 2 when two
            blocks fit :attr:`est_registers`, else 1.

    Raises:
        ScheduleError: a rule of :data:`GEMM_RULES` does not hold; the message names the field,
            the value, the limit and the rule.

    Example:
        >>> GemmSchedule(bm=128, bn=128, bk=8, rm=8, rn=8).threads
        256
    """

    bm: int = 128
    bn: int = 128
    bk: int = 8
    rm: int = 8
    rn: int = 8
    vec: int = 4
    double_buffer: bool = True
    unroll: int = 8
    smem_pad: int = 0
    wm: int = 0
    wn: int = 0
    swizzle: int = 8
    split_k: int = 1
    min_blocks: int = 0

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "double_buffer":
                if not isinstance(v, bool):
                    raise ScheduleError(f"GemmSchedule.double_buffer={v!r} must be True or False",
                                        "type")
            else:  # numpy integers become plain ints
                object.__setattr__(self, f.name, as_int(v, f"GemmSchedule.{f.name}", schedule_error("type")))
        if self.wm == 0 and self.wn == 0 and min(self.rm, self.rn, self.bm, self.bn) > 0:
            lanes_n = _auto_warp_lanes_n(self.bm, self.bn, self.rm, self.rn)
            object.__setattr__(self, "wn", lanes_n * self.rn)
            object.__setattr__(self, "wm", (32 // lanes_n) * self.rm)
        if self.min_blocks == 0 and min(self.rm, self.rn, self.bm, self.bn) > 0:
            fits_two = 2 * self.threads * self.est_registers <= 65536
            object.__setattr__(self, "min_blocks", 2 if fits_two else 1)
        R.check(GEMM_RULES, self.env(), ("schedule",), "GemmSchedule")

    # ---- derived quantities (one place; used by validation, emitter, cost model) ----
    @property
    def threads(self) -> int:
        """Threads per block = (bm/rm)·(bn/rn)."""
        return (self.bm // self.rm) * (self.bn // self.rn)

    @property
    def est_registers(self) -> int:
        """Registers per thread before compiling: accumulators rm·rn + fragments rm + rn + the staged
        global tile (bm·bk + bk·bn)/threads + 2 per global load instruction (64-bit addresses) + 36 for
        indices (fits the ptxas reports of the sweep in tests/test_gemm_cpu.py within ~15%)."""
        threads = max(self.threads, 1)
        staged = (self.bm * self.bk + self.bk * self.bn) // threads
        return self.rm * self.rn + self.rm + self.rn + staged + 2 * (staged // max(self.vec, 1)) + 36

    @property
    def stages(self) -> int:
        """Shared-memory stages: 2 with double buffering, else 1."""
        return 2 if self.double_buffer else 1

    def smem_bytes(self, smem_itemsize: int = 4) -> int:
        """Dynamic shared memory per block: stages · bk · ((bm + pad) + (bn + pad)) · 4 bytes."""
        return self.stages * self.bk * ((self.bm + self.smem_pad) + (self.bn + self.smem_pad)) * smem_itemsize

    def env(self, target: Target | None = None) -> dict[str, int]:
        """Names the rule expressions use (upper-case fields and derived values)."""
        rm, rn = max(self.rm, 1), max(self.rn, 1)
        env = {f.name.upper(): int(getattr(self, f.name)) for f in fields(self)}
        env.update(
            STAGES=self.stages,
            THREADS=(self.bm // rm) * (self.bn // rn),
            WARP_LANES=(self.wm // rm) * (self.wn // rn),
            SMEM_BYTES=self.smem_bytes(),
        )
        if target is not None:
            env.update(SMEM_OPTIN_BYTES=target.smem_per_block_optin_bytes,
                       MAX_THREADS_PER_BLOCK=target.max_threads_per_block,
                       MAX_THREADS_PER_SM=target.max_threads_per_sm)
        return env

    def validate(self, target: Target | None = None) -> GemmSchedule:
        """Check the device-dependent rules (shared memory, threads) against ``target``.

        Raises:
            ResourceError: the schedule needs more than the device has.
        """
        if target is not None:
            R.check(GEMM_RULES, self.env(target), ("target",), "GemmSchedule")
        return self

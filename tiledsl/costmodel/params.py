"""Fitted constants of the FMA GEMM pipeline model (``tiledsl.costmodel.gemm``), one JSON file per
architecture, with provenance.

The constants are data, not code: ``benchmarks/costmodel_rank.py --write-params`` fits them on the
tuner's measured studies (``benchmarks/results/studies/``) and writes ``gemm_fma_<arch>.json`` next to
this module; :func:`fma_params` reads it. An architecture without a file uses the sm_90 fit (the file
says so in :attr:`FmaParams.source`). ``docs/costmodel.md`` ("A cost model that ranks") describes each
term, the fit and its held-out check.
"""

from __future__ import annotations

import functools
import json
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from ..errors import SpecError

_DIR = Path(__file__).resolve().parent
FALLBACK_ARCH = "sm_90"


@dataclass(frozen=True)
class FmaParams:
    """The named constants of the FMA GEMM pipeline model (cycles are SM clock cycles).

    Attributes:
        issue_efficiency: share of a scheduler's issue slots the compiled K loop uses when enough warps
            are resident (register-bank conflicts, operand-reuse misses, dependent-issue gaps); the FP32
            peak assumes 1.0. Fitted.
        lds_latency_cycles: shared-memory load latency a warp waits for once per k of its inner loop when
            nothing hides it: one warp's K step takes its instructions / ``issue_efficiency``, plus
            ``wavefront_issue_cycles`` per L1 wavefront of its shared-memory and local accesses, plus bk · this.
            Fitted (the idle shared-load latency is ~30 cycles).
        barrier_cycles: cost of a K step's ``__syncthreads`` and the store→load turnaround, exposed on
            one block's critical path (other resident blocks hide it). Fitted.
        mem_latency_cycles: latency of a global load under load (L2 hit ~270 cycles idle, HBM 500+),
            waited once per K step unless the next tile is in flight (``stages`` ≥ 2). Fitted.
        spill_accesses_per_step: local-memory accesses per spilled 4-byte register per K step (one store
            and one load at least). Fitted.
        reg_base, reg_per_accumulator, reg_per_fragment, reg_per_staged, reg_per_load: the registers ptxas
            allocates, for the occupancy, as reg_base + the weighted terms of
            :func:`tiledsl.gemm.schedule.fma_register_terms` (+ 10 with stream-K), capped by ``__launch_bounds__``.
            Not searched: a least-squares fit to ptxas's counts of the studies' kernels below their register cap
            (the defaults are the plan's estimate, :func:`tiledsl.gemm.schedule.estimate_registers`). ptxas
            lengthens live ranges and keeps each load's address and value when the cap leaves room: about 5
            registers per global load instruction where the plan counts 2.
        spill_slack_registers: registers ptxas recovers under the ``__launch_bounds__`` cap before it spills
            (rematerialised addresses, shortened load live ranges: the registers the fitted terms give each load
            beyond the plan's two are kept only when there is room): the model's spills are
            8 bytes per register of max(0, wanted − cap − this), wanted being the fitted register terms' count
            (tiled FMA kernels). 0 (the default) with the default weights is the plan's own spill estimate.
            Not searched: fitted to ptxas's spill bytes (least absolute error of ln(1 + bytes), inside each fold,
            ``benchmarks/costmodel_rank.py: spill_slack_fit``); 24.5 on the committed studies (2026-12-03). With no
            slack the fitted count flagged 33 spill-free kernels of 1024³ (64×128 tiles of 8×4, 6 registers over a
            128 cap); ptxas recovers about 6 to 28 registers before it spills.
        wavefront_issue_cycles: cycles a warp's scheduler is held per L1 wavefront of the warp's own shared-memory
            loads and stores and spill (local) accesses, beyond the instruction's issue slot: a load of w wavefronts
            (bank conflicts, the return path's floor, :func:`tiledsl.costmodel.gemm.load_wavefronts`) keeps its
            scheduler from issuing for about w · this cycles, so warps whose k reads many wavefronts per FFMA (small
            thread tiles, unpaired lanes) issue fewer FFMAs per clock. Without it one ``issue_efficiency`` had to
            serve thread tiles whose fastest kernels imply 0.77 (16×8), 0.63 (8×4) and 0.55 (4×4). Fitted (searched
            0.1–4): 1.01 on the committed studies (2026-12-04), 0.65–1.05 in the folds; a least-squares fit of the
            measured cycles per K step of the studies' spill-free kernels on issue slots and per-scheduler wavefronts
            gives 1.8 (``docs/costmodel.md``, "Wavefronts hold the scheduler"). 0 (the default) is the model before.
        source: where these figures come from (the fit command, studies, date).
    """

    issue_efficiency: float = 1.0
    lds_latency_cycles: float = 0.0
    barrier_cycles: float = 60.0
    mem_latency_cycles: float = 600.0
    spill_accesses_per_step: float = 1.0
    reg_base: float = 36.0
    reg_per_accumulator: float = 1.0
    reg_per_fragment: float = 1.0
    reg_per_staged: float = 1.0
    reg_per_load: float = 2.0
    spill_slack_registers: float = 0.0
    wavefront_issue_cycles: float = 0.0
    source: str = "unfitted defaults (the model before issue 11)"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> FmaParams:
        """Build from a dict with exactly the fields of :class:`FmaParams` (``source`` optional; the fields of
        :data:`ADDED_LATER` optional too: a file written before one was added is the model without it, its default).

        Raises:
            SpecError: an unknown or missing numeric field, naming it.
        """
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise SpecError(f"FmaParams: unknown field(s) {sorted(unknown)}; expected {sorted(names)}")
        missing = names - set(d) - {"source", *ADDED_LATER}
        if missing:
            raise SpecError(f"FmaParams: missing field(s) {sorted(missing)}")
        return cls(**{k: (v if k == "source" else float(v)) for k, v in d.items()})

    def with_values(self, **kw: float) -> FmaParams:
        """A copy with some constants replaced (what the fit script tries)."""
        return replace(self, **kw)


ADDED_LATER = ("wavefront_issue_cycles",)
"""Constants added after fitted files were first written, whose default (0) is the model before them: a file without
one reads as that model (``gemm_fma_sm_90.json`` of 2026-12-03 and earlier)."""

NUMERIC = tuple(f.name for f in fields(FmaParams) if f.name != "source")
"""The numeric constants, in the dataclass's order."""


def params_path(arch: str) -> Path:
    """Where the fitted constants of ``arch`` live: ``tiledsl/costmodel/gemm_fma_<arch>.json``."""
    return _DIR / f"gemm_fma_{arch}.json"


@functools.cache
def fma_params(arch: str) -> FmaParams:
    """The fitted :class:`FmaParams` of ``arch`` (the sm_90 fit when ``arch`` has none).

    Raises:
        SpecError: the JSON file exists but does not hold valid constants.
    """
    path = params_path(arch)
    used = arch
    if not path.exists():
        path, used = params_path(FALLBACK_ARCH), FALLBACK_ARCH
    if not path.exists():
        return FmaParams()
    data = json.loads(path.read_text())
    p = FmaParams.from_dict(data["params"])
    src = data.get("provenance", {}).get("command", "")
    note = f"fitted on {used}" + (f" ({src})" if src else "") + ("" if used == arch else f", used for {arch}")
    return replace(p, source=note)

"""Cost model of the tensor-core GEMM kernels (``GemmSchedule.mma`` = "mma_sync" or "wgmma").

Traffic per level, for C (M×N) = A (M×K) · B (K×N) with 16-bit elements (e = 2 bytes), block tile
bm×bn×bk, T = ⌈M/bm⌉·⌈N/bn⌉ tiles and ⌈K/bk⌉ K steps:

* HBM (compulsory): (M·K + K·N)·e + M·N·e_c·(1 + read_c)  (e_c: bytes of C)
* L2 → SM: every block copies its bm×bk and bn×bk tiles at every K step: T·⌈K/bk⌉·bk·(bm + bn)·e + C;
* shared memory: those copies written once, then read by the tensor cores:
  mma_sync: every warp reads its wm×bk A rows and wn×bk B columns: T·⌈K/bk⌉·bm·bn·bk·(1/wn + 1/wm)·e;
  wgmma: every warpgroup reads its own 64 A rows and the whole B tile:
  T·⌈K/bk⌉·bm·bn·bk·(1/bn + 1/64)·e.

Time: the largest of the compute time at the dense 16-bit tensor-core peak (``Target.peak_tc16_flops``,
the datasheet rate; a measured one from ``tiledsl.calibrate`` where recorded), priced per wave of blocks
(a partial last wave keeps the same per-block time), and the L2, shared-memory and HBM times at their
ceilings, plus the launch. Not modelled: mma.sync's lower issue rate than wgmma on sm_90, barrier and
pipeline bubbles; measured kernels sit at 0.3 (mma_sync) to 0.5 (wgmma) of the peak (docs/gemm.md).
"""

from __future__ import annotations

import math

from .. import dtypes
from ..gemm.kernel_plan import tile_count
from ..occupancy import occupancy, waves
from ..target import Target
from .gemm import LAUNCH_S
from .report import Level, Report


def traffic_tc(op, s) -> dict[str, float]:
    """Bytes per level (see the module docstring) and the FLOP of ``op`` under tensor-core schedule ``s``."""
    e = dtypes.get(op.dtype).itemsize
    e_c = 4 if s.split_k > 1 else e
    tiles = tile_count(op, s)
    ksteps = -(-op.k // s.bk) if op.k else 0
    copies = tiles * ksteps * s.bk * (s.bm + s.bn) * e
    c_bytes = op.m * op.n * e_c * (1 + int(op.read_c))
    per_tile = s.bm * s.bn * s.bk * e
    reads = per_tile * ((1 / s.wn + 1 / s.wm) if s.mma == "mma_sync" else (1 / s.bn + 1 / 64))
    return {"flops": 2.0 * op.m * op.n * op.k,
            "hbm": (op.m * op.k + op.k * op.n) * e + c_bytes,
            "l2": copies + c_bytes,
            "smem": copies + tiles * ksteps * reads}


def explain_gemm_tc(op, s, target: Target, kernel=None) -> Report:
    """The :class:`~tiledsl.costmodel.report.Report` of a tensor-core GEMM."""
    c = target.ceilings()
    peak, peak_src = target.tensor_core_ceiling(op.precision)
    tr = traffic_tc(op, s)
    regs = int(kernel.registers) if kernel is not None else s.est_registers
    smem = int(kernel.smem_bytes) if kernel is not None else s.smem_bytes()
    occ = occupancy(target, s.threads, regs, smem, "ptxas" if kernel is not None else "estimate")
    tiles = tile_count(op, s) * s.split_k
    per_sm = max(occ.blocks_per_sm, 1)
    wv = waves(tiles, target.sm_count, per_sm)
    # one wave: each SM runs `per_sm` blocks of 2·bm·bn·(K/split_k) FLOP at its share of the peak
    k_slice = -(-op.k // s.split_k)
    t_compute = wv.waves * per_sm * 2.0 * s.bm * s.bn * k_slice / (peak / target.sm_count)
    notes = {"hbm": "compulsory: A, B read once, C written once",
             "l2": "tile copies M·N·K·(1/bm+1/bn)·e + C",
             "smem": "copies written, then read by the tensor cores: M·N·K·e·"
                     + ("(1/wn+1/wm)" if s.mma == "mma_sync" else "(1/bn+1/64)")}
    keys = {"hbm": "hbm_bytes_per_s", "l2": "l2_bytes_per_s", "smem": "smem_bytes_per_s"}
    levels = {}
    for name, key in keys.items():
        b = tr[name]
        bw = c[key].value
        levels[name] = Level(name, int(b), tr["flops"] / b if b else math.inf, bw, c[key].source, b / bw, int(b),
                             notes[name])
    times = {"compute": t_compute, **{n: lv.time_s for n, lv in levels.items()}}
    bound = max(times, key=lambda n: times[n])
    predicted = times[bound] + LAUNCH_S
    lines = (f"{s.mma}: tensor-core roof {peak / 1e12:.0f} TFLOP/s ({peak_src}); "
             f"{wv.waves} waves of {tiles} blocks at {per_sm} per SM",
             "not modelled: mma.sync issues at a lower rate than wgmma on sm_90; pipeline bubbles "
             "(measured: 0.3–0.5 of the roof, docs/gemm.md)")
    terms = {"compute_s": t_compute, "l2_s": levels["l2"].time_s, "smem_s": levels["smem"].time_s,
             "hbm_s": levels["hbm"].time_s, "launch_s": LAUNCH_S, "wave_efficiency": wv.efficiency}
    return Report("gemm", op, s, target, int(tr["flops"]), levels, tr["flops"] / peak, peak, peak_src, occ, wv,
                  predicted, bound, terms, {}, lines, compute_unit="dense 16-bit tensor-core rate")


def predict_gemm_tc(op, s, target: Target, kernel=None) -> float:
    """Predicted seconds of a tensor-core GEMM kernel (:func:`explain_gemm_tc`'s prediction)."""
    return explain_gemm_tc(op, s, target, kernel).predicted_s

"""How well the cost model ranks measured transposes: Spearman ρ between predicted and measured time (CPU only).

Run: ``python benchmarks/costmodel_transpose.py`` (reads ``benchmarks/results/transpose_h200.json``: 22 schedules of a
16384² float32 transpose measured on an H200 on 2026-11-29, from the naive rungs to the shipped default). For the
model before 2026-12-02 (the hard maximum of the HBM roof and Little's law, no per-block cost), the soft maximum of
:func:`tiledsl.costmodel.stream.memory_time` alone, and the shipped model (with ``BLOCK_CYCLES``) it prints ρ, the
median measured / predicted and the schedules the model ranks first, then each schedule's measured and predicted
GB/s with the shipped model. Predictions use the known-GPU table ("H200")
and the plan's register estimate, as ``search.tune --model-only`` does.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tiledsl import Target  # noqa: E402
from tiledsl.costmodel import explain, stream  # noqa: E402
from tiledsl.costmodel.ranking import spearman  # noqa: E402
from tiledsl.transpose import TransposeOp  # noqa: E402
from tiledsl.transpose.schedule import TransposeSchedule  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "transpose_h200.json"


def rows(path: Path = RESULTS) -> tuple[TransposeOp, list[dict]]:
    """The op and the measured rows (name, schedule, seconds, GB/s) of a ``benchmarks/transpose.py`` result file."""
    d = json.loads(path.read_text())
    op = TransposeOp(shape=tuple(d["meta"]["shape"]), dtype=d["meta"]["dtype"])
    return op, [dict(name=r["name"], schedule=TransposeSchedule(**r["schedule"]), s=r["ms"] / 1e3, gbps=r["gbps"])
                for r in d["rows"]]


def quality(op: TransposeOp, measured: list[dict], target: Target, softness: float | None = None,
            block_cycles: float | None = None) -> dict:
    """ρ (predicted, measured time), median measured / predicted, and the predictions, with ``softness`` as p and
    ``block_cycles`` per block (None: the shipped values)."""
    shipped = stream.MEMORY_SOFTNESS, stream.BLOCK_CYCLES
    stream.MEMORY_SOFTNESS = shipped[0] if softness is None else softness
    stream.BLOCK_CYCLES = shipped[1] if block_cycles is None else block_cycles
    try:
        pred = [explain(op, r["schedule"], device=target).predicted_s for r in measured]
    finally:
        stream.MEMORY_SOFTNESS, stream.BLOCK_CYCLES = shipped
    meas = [r["s"] for r in measured]
    return dict(rho=spearman(pred, meas), median=statistics.median(m / p for m, p in zip(meas, pred, strict=True)),
                predicted=pred)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=RESULTS, help="a benchmarks/transpose.py result file")
    args = ap.parse_args()
    target = Target.known("H200")
    op, measured = rows(args.results)
    for name, p, cycles in (("hard maximum, no block cost (before)", math.inf, 0.0),
                            (f"soft maximum p = {stream.MEMORY_SOFTNESS:g}, no block cost", None, 0.0),
                            (f"soft maximum + {stream.BLOCK_CYCLES:g} cycles per block (shipped)", None, None)):
        q = quality(op, measured, target, p, cycles)
        order = sorted(range(len(measured)), key=lambda i: q["predicted"][i])
        print(f"{name}: Spearman rho {q['rho']:.3f}, median measured/predicted {q['median']:.2f}; model's first "
              f"three: {', '.join(measured[i]['name'] for i in order[:3])}")
    q = quality(op, measured, target)
    for r, p in zip(measured, q["predicted"], strict=True):
        print(f"{r['name']:28s} measured {r['gbps']:6.0f} GB/s  predicted {op.bytes_moved / p / 1e9:6.0f} GB/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

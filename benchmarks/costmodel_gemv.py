"""How the cost model ranks the GEMV-style kernel's schedules that the H200 sweeps measured (no GPU needed).

Run: ``python benchmarks/costmodel_gemv.py --out benchmarks/results/costmodel_gemv_h200_2026-12-02.json`` (latest:
``costmodel_gemv_h200_2026-12-03_colb.json``).

Sweeps (each a product timed under several GEMV schedules, all in ``benchmarks/results/``, measured 2026-12-02 but
the last two):

- ``split``: ``gemv_split_h200.json``, x @ W with 1, 4 and 16 rows under 1-8 blocks per SM and 32 or 128 threads;
- ``unroll``: ``gemv_unroll_h200_run2.json``, the same products under unroll 1, 2, 4 and 8;
- ``fused NN``: ``gemv_fused_nn_nobranch_h200.json``, the split-K kernel against the fused sum, slices and widths;
- ``fused NT``: ``gemv_fused_nt_h200.json``, torch's Linear with one row, the same variants;
- ``depth (held out)``: ``gemv_depth_h200.json``, x @ W with 1, 4 and 16 rows under K slices at least 64, 32, 16 or
  8 deep and 32 or 128 threads. Measured after ``GEMV_EFFECTIVE_LATENCY_S`` was chosen on the four above: the one
  sweep the shipped constant was not fitted on.
- ``groups (held out)``: ``gemv_groups_h200.json``, x @ W with 1, 4, 8 and 16 rows of an odd N (50257) and 1, 4 and
  16 rows of aligned ones under 1, 2, 4 or 8 groups of columns per thread (``col_groups``) and unroll 1, 2 or 8;
- ``colb (held out)``: ``gemv_colb_h200.json``, torch's Linear layout with 2, 4, 8 and 16 rows under 1, 2 or 4
  columns per warp, 128 or 256 threads, unroll 1, 2 or 4, the K slices summed either way. Both measured after
  everything the model's constants were chosen on.
- ``smem_a``: ``gemv_smem_a_h200_run2.json`` (2026-12-03), x @ W with 4, 8 and 16 rows, A in registers against A
  staged in shared memory (``smem_a``) at several threads, unrolls, slices per SM and depths; measured after the
  constants above were chosen, and the sweep ``GEMV_SMEM_A_EFFECTIVE_LATENCY_S`` was fitted on;
- ``smem_a depth (held out)``: ``gemv_smem_a_depth_h200.json`` (2026-12-03), 8 and 16 rows, the staged pick with
  128, 64 or 32 threads and slices at most 256, 512 or 768 deep: held out from every constant.
- ``colb smem_a``: ``gemv_colb_smem_a_h200.json`` (2026-12-03), torch's Linear layout with 8, 12 and 16 rows, A in
  registers against A staged (``smem_a`` with a column-major B) at several columns per warp, threads, unrolls,
  blocks per SM and depths. No constant was fitted on it, but the streaming model's staging term (each block's
  staged A counted with B's bytes) was added after seeing it: in-sample (before the term: ρ −0.20, a model-only
  pick 43 % behind the best; with it 0.24 and 13 %).

Products computed as rows (``_gemm_into``, an uncached host path timed with the kernel) are left out; a schedule
timed more than once in a sweep counts once (median), and products with fewer than 3 distinct schedules are left
out. For each sweep: the mean Spearman ρ (average ranks for ties) between predicted and measured times over a
product's schedules, the chance that the model's first pick (any schedule tied at the lowest prediction) is the
measured best, how often fewer than 3 schedules are predicted strictly faster than the best, and the geomean over products of (mean measured time of
the model's first picks) / (measured best): what a model-only tune would lose. Models: ``pipeline`` (the tiled kernels' FMA pipeline
model, which priced GEMV kernels before 2026-12-02) and ``stream`` (``tiledsl/costmodel/gemv.py``) at several
values of its fitted ``GEMV_EFFECTIVE_LATENCY_S`` (a row-major B's kernels; the column-major-B sweeps are priced at
``GEMV_COLUMN_B_EFFECTIVE_LATENCY_S`` throughout).

``--column-b`` (2026-12-04) fits the column-major-B kernel's two figures instead (NVRTC compiles, no GPU; about two
minutes): ``COLUMN_B_REGISTERS``, least squares over ptxas's registers of every distinct column-major-B schedule with
A in registers in the NT sweeps and ``schedule=None``'s picks for run 7 of ``gemv_hbm.py`` (kernels at the 250-register
cap left out), and ``GEMV_COLUMN_B_EFFECTIVE_LATENCY_S``, chosen on run 7's absolute times (the GPU-alone times of the
products of at least 64 MiB, x @ W.T, geomean measured / predicted closest to 1 with ptxas's registers), with the NT
sweeps' ranking at each latency printed beside it (they were seen, so they are not held out) and run 3 (2026-12-03,
per call) as an absolute check.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

import tiledsl
from tiledsl.costmodel import gemm as cg
from tiledsl.costmodel import gemv as gv
from tiledsl.costmodel.ranking import spearman

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results"
SWEEPS = {"split": "gemv_split_h200.json", "unroll": "gemv_unroll_h200_run2.json",
          "fused NN": "gemv_fused_nn_nobranch_h200.json", "fused NT": "gemv_fused_nt_h200.json",
          "depth (held out)": "gemv_depth_h200.json", "groups (held out)": "gemv_groups_h200.json",
          "colb (held out)": "gemv_colb_h200.json", "smem_a": "gemv_smem_a_h200_run2.json",
          "smem_a depth (held out)": "gemv_smem_a_depth_h200.json",
          "colb smem_a": "gemv_colb_smem_a_h200.json"}
LATENCIES = (2e-6, 3e-6, 3.5e-6, 4e-6)


def _op(m: int, n: int, k: int, layout: str) -> tiledsl.GemmOp:
    return tiledsl.GemmOp(m, n, k, layout_a="col" if layout[0] == "T" else "row",
                          layout_b="col" if layout[1] == "T" else "row")


def sweeps(target) -> dict[str, list[tuple[tiledsl.GemmOp, list]]]:
    """sweep -> [(op, [(schedule, measured ms), ...]), ...]."""
    from tiledsl.gemm.family import gemv_base_schedule

    out = {}
    for name, file in SWEEPS.items():
        d = json.loads((RESULTS / file).read_text())
        groups = collections.defaultdict(list)
        for r in d["rows"]:
            if r.get("swap"):
                continue
            op = _op(r["m"], r["n"], r["k"], r["layout"])
            if "unroll" in r and "schedule" not in r:  # gemv_unroll.py: the pick at each unroll, with the K slices
                pick = gemv_base_schedule(op, target)  # the pick when it was measured (no one launch, no groups)
                s = replace(pick, unroll=r["unroll"], split_k=r["split_k"],  # the slices it recorded
                            split_k_fused=pick.split_k_fused and r["split_k"] > 1)
            elif r.get("schedule"):
                s = tiledsl.GemmSchedule(**r["schedule"])
            else:
                continue  # schedule=None rows: the same kernel as one of the variants
            groups[(r["m"], r["n"], r["k"], r["layout"])].append((s, r["ms"]))
        out[name] = [(_op(*key), rows) for key, rows in groups.items() if len(rows) > 2]
    return out


def _merged(rows: list) -> list[tuple[object, float]]:
    """One (schedule, median measured ms) per distinct schedule: several variants of a sweep can name the same one
    (e.g. two slice rules that meet at the K/64 cap), timed more than once."""
    by: dict[str, tuple[object, list[float]]] = {}
    for s, ms in rows:
        by.setdefault(json.dumps(s.to_dict(), sort_keys=True), (s, []))[1].append(ms)
    return [(s, float(np.median(times))) for s, times in by.values()]


def quality(groups, predict) -> dict:
    """Ranking figures of ``predict`` (op, schedule -> seconds) over one sweep (module docstring). Repeated schedules
    are merged (median); ties are fair: Spearman's ρ with average ranks (0 where every prediction ties), the model's
    first pick is any of the schedules tied at its lowest prediction (``best_first`` is the chance that it is the
    best, the loss their mean), and the best is in the top 3 when fewer than 3 schedules are predicted strictly
    faster."""
    rhos, first, top3, loss = [], [], [], []
    for op, raw in groups:
        rows = _merged(raw)
        if len(rows) < 3:
            continue
        pred = np.array([predict(op, s) for s, _ in rows])
        meas = np.array([ms for _, ms in rows])
        best = int(np.argmin(meas))
        tied = np.isclose(pred, pred.min(), rtol=1e-9, atol=0.0)
        rho = spearman(list(pred), list(meas))  # average ranks for ties; None where every prediction ties
        rhos.append(0.0 if rho is None else rho)
        first.append(float(tied[best]) / int(tied.sum()))  # the chance that a pick among the tied is the best
        top3.append(int(np.sum(pred < pred[best] * (1 - 1e-9))) < 3)
        loss.append(float(np.mean(meas[tied])) / meas[best])
    return dict(products=len(rhos), mean_rho=float(np.mean(rhos)), best_first=float(np.mean(first)),
                best_in_top3=float(np.mean(top3)), pick_over_best=math.exp(float(np.mean(np.log(loss)))))


def pipeline_model(target):
    """The tiled kernels' pipeline model, as it priced GEMV kernels before ``tiledsl/costmodel/gemv.py``."""
    c = target.ceilings()

    def predict(op, s):
        g = cg.gemm_times(op, s, target, ceilings=c)
        return max(g.t_sm_s, g.t_l2_s, g.t_hbm_s) + cg._after_s(op, s, target, c)

    return predict


def stream_model(target):
    return lambda op, s: tiledsl.predict(op, s, device=target.name)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="write the figures as JSON here")
    ap.add_argument("--column-b", action="store_true",
                    help="fit the column-major-B kernel's register estimate and latency instead (module docstring)")
    args = ap.parse_args()
    target = tiledsl.Target.known("H200")
    data = sweeps(target)
    if args.column_b:
        return column_b_fit(target, data, args.out)
    rows = []
    shipped = gv.GEMV_EFFECTIVE_LATENCY_S
    models = [("pipeline", None)] + [(f"stream {lat * 1e6:.1f} us", lat) for lat in LATENCIES]
    try:
        for model, lat in models:
            if lat is not None:
                gv.GEMV_EFFECTIVE_LATENCY_S = lat
            predict = pipeline_model(target) if lat is None else stream_model(target)
            for sweep, groups in data.items():
                q = quality(groups, predict)
                rows.append(dict(model=model, shipped=lat == shipped, sweep=sweep, **q))
                print(f"{model:16s} {sweep:9s} n={q['products']:3d}  mean rho {q['mean_rho']:6.3f}  best first "
                      f"{q['best_first']:.2f}  in top 3 {q['best_in_top3']:.2f}  model's pick / best "
                      f"{q['pick_over_best']:.3f}", flush=True)
    finally:
        gv.GEMV_EFFECTIVE_LATENCY_S = shipped
    if args.out:
        meta = dict(command=" ".join(["python", *sys.argv]), sweeps={k: f"benchmarks/results/{v}"
                                                                      for k, v in SWEEPS.items()},
                    shipped_latency_s=shipped)
        Path(args.out).write_text(json.dumps(dict(meta=meta, rows=rows), indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0


COLUMN_B_SWEEPS = ("fused NT", "colb (held out)", "colb smem_a")
COLUMN_B_LATENCIES = (1.0e-6, 1.2e-6, 1.3e-6, 1.4e-6, 1.5e-6, 2.0e-6, 3.5e-6)
REGISTER_CAP = 250  # kernels at or above it are held by the register file, not by their needs


def _hbm_rows(run: str, key: str, target) -> list[tuple[tiledsl.GemmOp, object, float, float]]:
    """(op, schedule=None's pick today, measured ms, MiB) of the x @ W.T rows of ``gemv_hbm_h200_<run>.json``."""
    from search.families import gemm_op

    d = json.loads((RESULTS / f"gemv_hbm_h200_{run}.json").read_text())
    out = []
    for r in d["rows"]:
        if "kind" in r or r.get("layout") != "NT":
            continue
        op = gemm_op(r["m"], r["n"], r["k"], "float32", "NT")
        out.append((op, tiledsl.plan(op, None, device=target.name).schedule, r[key], r["mib"]))
    return out


def column_b_fit(target, data, out: str | None) -> int:
    """``--column-b``: the module docstring's fit; prints and (``out``) writes the figures."""
    from tiledsl.compile import nvrtc_version
    from tiledsl.gemm.kernel_plan import gemv_widths

    kernels: dict[str, tiledsl.Kernel] = {}

    def kernel(op, s):
        key = json.dumps([repr(op), s.to_dict()], sort_keys=True)
        if key not in kernels:
            kernels[key] = tiledsl.compile(op, s, arch=target.arch)
        return kernels[key]

    nt = {name: data[name] for name in COLUMN_B_SWEEPS}
    run7, run3 = _hbm_rows("run7", "gpu_ms", target), _hbm_rows("run3", "ms", target)

    def samples(pairs) -> dict[str, tuple[tuple[int, int, int], int]]:
        """Distinct column-major-B kernels with A in registers below the cap: key -> (features, ptxas registers)."""
        out = {}
        for op, s in pairs:
            if op.layout_b == "col" and not s.smem_a:
                k = kernel(op, s)
                if k.registers < REGISTER_CAP:
                    feats = gv.column_b_register_features(s.bm, s.rn, gemv_widths(op, s)[1], s.unroll)
                    out[k.name] = (feats, k.registers)  # the name holds the source's hash
        return out

    def fit(sample: dict) -> np.ndarray:
        x = np.array([f for f, _ in sample.values()], dtype=float)
        return np.linalg.lstsq(x, np.array([r for _, r in sample.values()], dtype=float), rcond=None)[0]

    def errors(coef, sample: dict) -> np.ndarray:
        return np.array([abs(np.dot(coef, f) - r) / r for f, r in sample.values()])

    swept = samples([(op, s) for groups in nt.values() for op, rows in groups for s, _ in rows])
    picked = samples([(op, s) for op, s, _, _ in run7 + run3])
    every = {**swept, **picked}
    coef = fit(every)
    rel = errors(coef, every)
    sweeps_only = fit(swept)
    unseen = {key: v for key, v in picked.items() if key not in swept}
    held = errors(sweeps_only, unseen) if unseen else np.array([np.nan])
    print(f"registers ~ {coef[0]:.2f} + {coef[1]:.3f}*bm*rn + {coef[2]:.3f}*unroll*vb*(bm+rn) over {len(every)} "
          f"distinct kernels: median error {np.median(rel):.1%}, largest {rel.max():.1%} (shipped "
          f"{gv.COLUMN_B_REGISTERS}); fitted on the {len(swept)} sweep kernels alone, on the {len(unseen)} picks they "
          f"lack: median {np.nanmedian(held):.1%}, largest {np.nanmax(held):.1%}")
    rows = []
    shipped = gv.GEMV_COLUMN_B_EFFECTIVE_LATENCY_S
    try:
        for lat in COLUMN_B_LATENCIES:
            gv.GEMV_COLUMN_B_EFFECTIVE_LATENCY_S = lat
            for ptxas in (True, False):
                def predict(op, s, ptxas=ptxas):
                    return tiledsl.predict(op, s, device=target.name, kernel=kernel(op, s) if ptxas else None)
                row = dict(latency_s=lat, registers="ptxas" if ptxas else "estimate")
                for run, hbm in (("run7", run7), ("run3", run3)):
                    ratio = [ms * 1e-3 / predict(op, s) for op, s, ms, mib in hbm if mib >= 64]
                    row[run] = dict(products=len(ratio), geomean=math.exp(float(np.mean(np.log(ratio)))),
                                    lowest=min(ratio), highest=max(ratio),
                                    within_1_3=float(np.mean([1 / 1.3 <= r <= 1.3 for r in ratio])))
                row["sweeps"] = {name.replace(" (held out)", ""): quality(groups, predict) for name, groups in nt.items()}
                rows.append(row)
                print(f"{lat * 1e6:.1f} us, {row['registers']:8s} run 7 measured/predicted {row['run7']['geomean']:.2f} "
                      f"[{row['run7']['lowest']:.2f}, {row['run7']['highest']:.2f}], within 1.3x "
                      f"{row['run7']['within_1_3']:.2f}; run 3 {row['run3']['geomean']:.2f}; " + "; ".join(
                          f"{n.replace(' (held out)', '')} rho {q['mean_rho']:.3f} pick/best {q['pick_over_best']:.3f}"
                          for n, q in row["sweeps"].items()), flush=True)
    finally:
        gv.GEMV_COLUMN_B_EFFECTIVE_LATENCY_S = shipped
    if out:
        meta = dict(command=" ".join(["python", *sys.argv]), registers_fit=dict(
            coefficients=list(map(float, coef)), kernels=len(every), median_error=float(np.median(rel)),
            largest_error=float(rel.max()), nvrtc=list(nvrtc_version()),
            held_out=dict(fitted_on_sweep_kernels=len(swept), coefficients=list(map(float, sweeps_only)),
                          tested_on_picks=len(unseen), median_error=float(np.nanmedian(held)),
                          largest_error=float(np.nanmax(held)))),
            shipped_latency_s=shipped, shipped_registers=list(gv.COLUMN_B_REGISTERS))
        Path(out).write_text(json.dumps(dict(meta=meta, rows=rows), indent=1) + "\n")
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

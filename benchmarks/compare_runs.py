"""Product-by-product comparison of two benchmark result files: which products lost against the vendor library.

    python benchmarks/compare_runs.py OLD.json NEW.json [--drop 0.9]

Both files hold ``rows`` with ``m``, ``n``, ``k``, ``layout`` (and ``dtype`` where not float32) and ``ratio``
(tiledsl against cuBLAS in the same run, higher is better), as ``benchmarks/gemm.py --workloads``,
``benchmarks/gemv_hbm.py`` and ``benchmarks/gemm_skinny.py`` write them. A ratio taken in the same run as its
vendor time cancels most of a GPU's run-to-run drift, so a product whose ratio fell to less than ``--drop`` of
its old ratio changed with the code, not the machine. Prints the matched products' geomean change, every product
below ``--drop`` (with the schedule each run used, where the rows record it: ``same schedule`` points at the
kernel, a different one at a rule), and exits 1 when there is any: a gate to run after each data-set benchmark
(a kernel that ran 1.6–2.0× slower for a day, with every test passing, is why it exists: docs/gemm.md, "The ring
of B outside the guard").
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path


def product_key(row: dict) -> tuple:
    """(M, N, K, layout, dtype) of a result row: what two runs are matched on."""
    return row["m"], row["n"], row["k"], row.get("layout", "NN"), row.get("dtype", "float32")


def ratios(path: Path) -> dict[tuple, dict]:
    """The rows of a result file that carry a vendor ratio, by :func:`product_key` (the last row of a product
    wins: a file lists each product once)."""
    data = json.loads(path.read_text())
    rows = data["rows"] if isinstance(data, dict) else data
    return {product_key(r): r for r in rows if isinstance(r, dict) and "m" in r and r.get("ratio")}


def compare(old: dict[tuple, dict], new: dict[tuple, dict], drop: float) -> tuple[int, float, list[dict]]:
    """(matched products, geomean of new ratio / old ratio, the products whose ratio fell below ``drop`` × old,
    worst first)."""
    both = sorted(set(old) & set(new))
    if not both:
        return 0, float("nan"), []
    changes = [new[key]["ratio"] / old[key]["ratio"] for key in both]
    geo = math.exp(sum(map(math.log, changes)) / len(changes))
    lost = [dict(key=key, old=old[key]["ratio"], new=new[key]["ratio"], change=c,
                 same_schedule=old[key].get("used") == new[key].get("used") if "used" in old[key] else None)
            for key, c in zip(both, changes, strict=True) if c < drop]
    return len(both), geo, sorted(lost, key=lambda x: x["change"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--drop", type=float, default=0.9,
                    help="flag products whose ratio to the vendor fell below this share of the old one (0.9)")
    args = ap.parse_args(argv)
    if not 0 < args.drop <= 1:
        ap.error(f"--drop {args.drop}: must be in (0, 1]")
    old, new = ratios(args.old), ratios(args.new)
    n, geo, lost = compare(old, new, args.drop)
    print(f"{n} products in both ({len(old)} in {args.old.name}, {len(new)} in {args.new.name}); "
          f"geomean new/old ratio to the vendor {geo:.3f}; {len(lost)} below {args.drop:g}x their old ratio")
    for x in lost:
        m, nn, k, layout, dtype = x["key"]
        why = {True: "same schedule", False: "schedule changed", None: "schedule not recorded"}[x["same_schedule"]]
        print(f"  {m}x{nn}x{k} {layout} {dtype}: {x['old']:.2f} -> {x['new']:.2f} ({x['change']:.2f}x; {why})")
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())

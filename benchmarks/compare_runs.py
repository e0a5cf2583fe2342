"""Product-by-product comparison of two benchmark result files: which products lost against the vendor library.

    python benchmarks/compare_runs.py OLD.json NEW.json [--drop 0.9]

Both files hold ``rows`` with ``m``, ``n``, ``k``, ``layout`` (and ``dtype`` where not float32) and ``ratio``
(tiledsl against cuBLAS in the same run, higher is better), as ``benchmarks/gemm.py --workloads``,
``benchmarks/gemv_hbm.py`` and ``benchmarks/gemm_skinny.py`` write them. A ratio taken in the same run as its
vendor time cancels most of a GPU's run-to-run drift, so a product whose ratio fell to less than ``--drop`` of
its old ratio changed with the code, not the machine. Prints the matched products' geomean change, every product
below ``--drop`` (with the schedule each run used, where the rows record it: ``same schedule`` points at the
kernel, a different one at a rule) and the old file's products the new one lacks (a subset run is fine: they are
listed, not counted). Exit status: 1 when a product dropped, 2 when a file cannot be compared (unreadable, a product
listed twice, nothing in common), else 0: a gate to run after each data-set benchmark
(a kernel that ran 1.6–2.0× slower for a day, with every test passing, is why it exists: docs/gemm.md, "The ring
of B outside the guard").
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path


def product_key(row: dict) -> tuple:
    """(M, N, K, layout, dtype, variant) of a result row: what two runs are matched on. ``variant`` is the row's
    ``variant`` name, else its ``schedule`` where that is a label (``gemm.py``'s "default TT"), else None: a file
    that times several variants of one product (``gemv_fused.py``, ``gemm_skinny.py``) is compared variant by
    variant."""
    label = row.get("variant", row.get("schedule"))
    return (row["m"], row["n"], row["k"], row.get("layout", "NN"), row.get("dtype", "float32"),
            label if isinstance(label, str) else None)


class ResultsError(ValueError):
    """A result file that cannot be compared: unreadable, not JSON, no rows, or a product listed twice."""


def ratios(path: Path) -> dict[tuple, dict]:
    """The rows of a result file that carry a vendor ratio (a positive ``ratio``), by :func:`product_key`.

    Raises:
        ResultsError: the file cannot be read or parsed, holds no ``rows`` list, or lists a product twice.
    """
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ResultsError(f"{path}: cannot read a JSON result file ({exc})") from None
    rows = data.get("rows") if isinstance(data, dict) else data
    if not isinstance(rows, list):
        raise ResultsError(f"{path}: no list of rows (a JSON object with 'rows', or a list)")
    out: dict[tuple, dict] = {}
    for r in rows:
        if not (isinstance(r, dict) and "m" in r and isinstance(r.get("ratio"), int | float) and r["ratio"] > 0):
            continue
        key = product_key(r)
        if key in out:
            raise ResultsError(f"{path}: product {key} is listed twice; the rows need a 'variant' to tell them apart")
        out[key] = r
    return out


def _same_schedule(old: dict, new: dict) -> bool | None:
    """Whether two rows ran the same schedule, over the fields both record (a field added between runs is not a
    change); None where either row records none."""
    a, b = old.get("used"), new.get("used")
    if not (isinstance(a, dict) and isinstance(b, dict)):
        return None
    return all(a[f] == b[f] for f in a.keys() & b.keys())


def compare(old: dict[tuple, dict], new: dict[tuple, dict], drop: float) -> tuple[int, float, list[dict]]:
    """(matched products, geomean of new ratio / old ratio, the products whose ratio fell below ``drop`` × old,
    worst first)."""
    both = sorted(set(old) & set(new), key=repr)
    if not both:
        return 0, float("nan"), []
    changes = [new[key]["ratio"] / old[key]["ratio"] for key in both]
    geo = statistics.geometric_mean(changes)
    lost = [dict(key=key, old=old[key]["ratio"], new=new[key]["ratio"], change=c,
                 same_schedule=_same_schedule(old[key], new[key]))
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
    try:
        old, new = ratios(args.old), ratios(args.new)
    except ResultsError as exc:
        print(f"compare_runs.py: {exc}", file=sys.stderr)
        return 2
    n, geo, lost = compare(old, new, args.drop)
    if n == 0:
        print(f"compare_runs.py: no product in both files ({len(old)} in {args.old}, {len(new)} in {args.new})",
              file=sys.stderr)
        return 2
    gone = sorted(set(old) - set(new), key=repr)
    print(f"{n} products in both ({len(old)} in {args.old.name}, {len(new)} in {args.new.name}); "
          f"geomean new/old ratio to the vendor {geo:.3f}; {len(lost)} below {args.drop:g}x their old ratio")
    for x in lost:
        m, nn, k, layout, dtype, variant = x["key"]
        why = {True: "same schedule", False: "schedule changed", None: "schedule not recorded"}[x["same_schedule"]]
        name = f" {variant}" if variant else ""
        print(f"  {m}x{nn}x{k} {layout} {dtype}{name}: {x['old']:.2f} -> {x['new']:.2f} ({x['change']:.2f}x; {why})")
    if gone:
        print(f"{len(gone)} products of {args.old.name} missing from {args.new.name} (not timed, or no ratio): "
              + ", ".join(f"{m}x{nn}x{k} {layout}" for m, nn, k, layout, *_ in gone[:10]) + (" ..." if len(gone) > 10 else ""))
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())

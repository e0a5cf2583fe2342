"""The end-of-search report: top 5, where the time went, how well the model ranked, what mattered."""

from __future__ import annotations

import math
from collections.abc import Sequence


def ranks(values: Sequence[float]) -> list[float]:
    """Ranks 1..n, ties sharing the average rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for t in range(i, j + 1):
            out[order[t]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's ρ: Pearson correlation of the ranks (None with fewer than 3 pairs or no spread)."""
    if len(x) != len(y) or len(x) < 3:
        return None
    rx, ry = ranks(x), ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    vx = math.sqrt(sum((a - mx) ** 2 for a in rx))
    vy = math.sqrt(sum((b - my) ** 2 for b in ry))
    if vx == 0 or vy == 0:
        return None
    return cov / (vx * vy)


def pick_winner(cands: Sequence[dict], tie_rel: float = 0.01) -> tuple[dict, list[dict]]:
    """The winner of the final re-measurement, with a deterministic tie-break.

    ``cands`` carry ``median_s``, ``spread`` (relative) and ``number`` (the trial). Every candidate
    whose median lies within max(``tie_rel``, the fastest one's spread) of the fastest is a
    statistical tie; among the tied, the lowest trial number wins, so re-measuring the same study
    picks the same winner whatever the noise among the tied.

    Returns:
        (winner, the tied candidates in ascending median order).
    """
    if not cands:
        raise ValueError("no candidates to pick a winner from")
    by_time = sorted(cands, key=lambda c: (c["median_s"], c["number"]))
    fastest = by_time[0]
    band = fastest["median_s"] * (1 + max(tie_rel, fastest.get("spread") or 0.0))
    tied = [c for c in by_time if c["median_s"] <= band]
    return min(tied, key=lambda c: c["number"]), tied


def table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    """A plain-text table with aligned columns."""
    cols = [list(map(str, col)) for col in zip(header, *rows, strict=True)]
    widths = [max(len(v) for v in col) for col in cols]
    line = lambda r: "  ".join(str(v).rjust(w) if i else str(v).ljust(w)  # noqa: E731
                               for i, (v, w) in enumerate(zip(r, widths, strict=True)))
    out = [line(header), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    return "\n".join(out)


def importances(study) -> tuple[dict[str, float] | None, str]:
    """Optuna's parameter importances (fANOVA) over the study's complete trials, or why not."""
    try:
        import optuna

        return optuna.importance.get_param_importances(study), "fANOVA (optuna.importance)"
    except Exception as exc:
        return None, f"n/a ({type(exc).__name__}: {exc})"


def fmt_ms(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1e3:.3f}"


def fmt_pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"

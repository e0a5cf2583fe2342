"""``roofline_plot``: the multi-level roofline of a device with kernels as points (matplotlib, lazy).

The multi-level roofline: one horizontal roof (the FP32 rate π) and one slanted roof per memory level
(bandwidth β: performance = intensity × β), log-log axes. A kernel sits at the same FLOP/s on every
level and at a different intensity per level; the distance between its points shows cache reuse.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from .costmodel import target_for
from .target import Target

_LEVEL_STYLE = {"hbm": ("HBM", "tab:red"), "l2": ("L2", "tab:orange"), "smem": ("shared memory", "tab:green"),
                "registers": ("registers", "tab:purple")}


def _points(points: Iterable, levels: tuple[str, ...]) -> list[dict]:
    """Normalize points: Report, (Report, measured_s) or dicts with intensity/flops_per_s."""
    out: list[dict] = []
    for p in points:
        if isinstance(p, dict):
            out.append({"label": p.get("label", ""), "level": p.get("level", "hbm"),
                        "intensity": float(p["intensity"]), "flops_per_s": float(p["flops_per_s"]),
                        "measured": bool(p.get("measured", False))})
            continue
        measured_s = None
        if isinstance(p, tuple):
            p, measured_s = p
        for lv in levels:
            level = p.levels.get(lv)
            if level is None or not level.bytes or not p.flops:
                continue
            out.append({"label": "", "level": lv, "intensity": level.intensity,
                        "flops_per_s": p.flops / p.predicted_s, "measured": False})
            if measured_s:
                out.append({"label": "", "level": lv, "intensity": level.intensity,
                            "flops_per_s": p.flops / measured_s, "measured": True})
    return out


def roofline_plot(points: Iterable, path: str | Path, device: str | Target | None = "H200",
                  levels: tuple[str, ...] = ("hbm", "l2", "smem"), title: str | None = None) -> Path:
    """Draw the device's roofs and the kernels, and save a PNG.

    Args:
        points: items of three kinds: a :class:`~tiledsl.costmodel.Report` (its predicted FLOP/s at each
            of ``levels``' intensities), a ``(Report, measured_s)`` pair (predicted and measured points,
            hollow and filled), or a dict ``{"intensity", "flops_per_s", "level"?, "label"?, "measured"?}``.
        path: where to write the PNG.
        device: a known name, a Target, or None for the current GPU (its cached calibration).
        levels: memory levels whose roofs and intensities are drawn.
        title: plot title (default: the device name).

    Returns:
        ``path`` as a Path.

    Raises:
        ImportError: matplotlib is not installed.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = target_for(device)
    c = t.ceilings()
    pts = _points(points, levels)
    peak = c["fp32_flops_per_s"].value
    xs = [p["intensity"] for p in pts if p["intensity"] > 0] or [1.0]
    lo, hi = min(min(xs) / 4, 0.03), max(max(xs) * 4, 300.0)
    fig, ax = plt.subplots(figsize=(9, 6))
    ax.set_xscale("log")
    ax.set_yscale("log")
    import numpy as np

    grid = np.logspace(np.log10(lo), np.log10(hi), 200)
    keys = {"hbm": "hbm_bytes_per_s", "l2": "l2_bytes_per_s", "smem": "smem_bytes_per_s"}
    for lv in levels:
        if lv not in keys:
            continue
        name, color = _LEVEL_STYLE[lv]
        bw = c[keys[lv]]
        tag = "measured" if bw.measured else "datasheet/estimate"
        ax.plot(grid, np.minimum(grid * bw.value, peak), color=color, lw=2,
                label=f"{name} roof {bw.value / 1e12:.2f} TB/s ({tag})")
    ax.axhline(peak, color="black", lw=1.5, ls="--",
               label=f"FP32 roof {peak / 1e12:.1f} TFLOP/s ({'measured' if c['fp32_flops_per_s'].measured else 'datasheet'})")
    for lv in levels:
        name, color = _LEVEL_STYLE.get(lv, (lv, "gray"))
        for measured in (False, True):
            sel = [p for p in pts if p["level"] == lv and p["measured"] == measured]
            if not sel:
                continue
            ax.scatter([p["intensity"] for p in sel], [p["flops_per_s"] for p in sel], s=18,
                       facecolors=color if measured else "none", edgecolors=color, alpha=0.7,
                       label=f"kernels at {name} intensity ({'measured' if measured else 'predicted'})")
    labelled = [p for p in pts if p["label"]]
    for k, p in enumerate(labelled):  # staggered below each other: nearby kernels' names stay readable
        ax.annotate(p["label"], (p["intensity"], p["flops_per_s"]), fontsize=7,
                    xytext=(10, -8 - 11 * k) if len(labelled) > 1 else (4, 4), textcoords="offset points",
                    arrowprops={"arrowstyle": "-", "lw": 0.4, "alpha": 0.6} if len(labelled) > 1 else None)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("performance (FLOP/s)")
    ax.set_title(title or f"roofline: {t.name} ({t.arch})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path

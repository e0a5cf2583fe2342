"""What a ``search.tune`` run watches while it searches: progress bars, outcome counts and where the time went.

Observers only record; they never decide what is evaluated (that is :mod:`search.strategy`) nor how
(:mod:`search.runner`). The report (:mod:`search.report`) reads what they recorded.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass


class Progress:
    """A tqdm bar over one phase of a run (count, total, rate, ETA, a postfix); nothing when disabled.

    Args:
        total: the phase's work units (None or 0: unknown yet; the bar opens at its first work).
        enabled: False: no bar at all (``--no-progress``).
        desc: the bar's label.
        unit: what one unit of work is called.
    """

    def __init__(self, total: int | None, enabled: bool, desc: str, unit: str) -> None:
        self.bar = None
        self.args = {"total": total, "desc": desc, "unit": unit} if enabled else None
        if total:
            self._open()

    def _open(self) -> None:
        if self.bar is None and self.args is not None:
            from tqdm import tqdm

            self.bar = tqdm(**self.args, dynamic_ncols=True, file=sys.stderr)

    def update(self, n: int = 1, postfix: str | None = None) -> None:
        """Count ``n`` more units done (0: only refresh the postfix)."""
        self._open()
        if self.bar is not None:
            if postfix is not None:
                self.bar.set_postfix_str(postfix, refresh=False)
            self.bar.update(n)

    def grow(self, n: int = 1) -> None:
        """Raise the total by ``n`` (a phase that finds its work on the way; the bar opens at its first work)."""
        if self.args is not None:
            self.args["total"] = (self.args["total"] or 0) + n
        if self.bar is not None:
            self.bar.total += n
            self.bar.refresh()
        elif n:
            self._open()

    def wrap(self, out):
        """``out`` that leaves this bar's line intact: while the bar is open, ``print`` goes through tqdm's
        ``write`` (the line above the bar); any other ``out`` (a caller's collector) is used as is."""
        def write(text: str) -> None:
            if self.bar is not None and out is print:
                self.bar.write(text, file=sys.stdout)
            else:
                out(text)
        return write

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


@dataclass
class TimeSplit:
    """Where one run's seconds went (summed over processes: the compile pool's seconds are CPU seconds).

    Attributes:
        compile_s: NVRTC compiles (the pool's in measured mode; the finalists' and the export's in model-only).
        compiles: how many kernels those seconds compiled.
        verify_s: the GPU worker's correctness checks.
        measure_s: the GPU worker's timing.
        predict_s: the cost model (in this process, in the compile pool, or a stand-in worker's "measure").
    """

    compile_s: float = 0.0
    compiles: int = 0
    verify_s: float = 0.0
    measure_s: float = 0.0
    predict_s: float = 0.0

    def compiled(self, seconds: float, n: int = 1) -> None:
        """``n`` more kernels compiled in ``seconds``."""
        self.compile_s += seconds
        self.compiles += n

    def as_dict(self) -> dict:
        """The figures by name (the JSON report's ``time_s``)."""
        return asdict(self)


@dataclass
class Counts:
    """How this run's trials ended (what ``--trials`` counts is :meth:`evaluated`).

    Attributes:
        complete: evaluated and told COMPLETE.
        pruned: broke a rule of the schedule's rule table (never compiled).
        fail: compile, verification, measurement or prediction failed (or another worker expired it).
        dup: the schedule was owned by another trial (its value reused, or pruned as a duplicate).
        model_pruned: predicted far slower than the best prediction so far (``--model-prune``; never compiled).
    """

    complete: int = 0
    pruned: int = 0
    fail: int = 0
    dup: int = 0
    model_pruned: int = 0

    def evaluated(self) -> int:
        """Trials that count against ``--trials`` (pruned points were not evaluated)."""
        return self.complete + self.fail + self.dup

    def total(self) -> int:
        return self.complete + self.pruned + self.fail + self.dup + self.model_pruned

    def as_dict(self, with_model_pruned: bool) -> dict:
        """The counts by name (the JSON report's ``counts_this_run``; ``model_pruned`` only when enabled)."""
        d = asdict(self)
        if not with_model_pruned:
            del d["model_pruned"]
        return d


class SearchObserver:
    """Follows the search phase: counts outcomes, keeps the best value so far and drives the search's bar.

    Args:
        bar: the search phase's :class:`Progress` (counting what ``--trials`` counts).
        what: "predicted" or "measured" (how the best value so far is labelled).
        work: the op's work in ``unit`` (e.g. FLOP) and ``scale``: throughput = work / seconds / scale.
    """

    def __init__(self, bar: Progress, what: str, work: float, unit: str, scale: float) -> None:
        self.bar = bar
        self.what = what
        self.work, self.unit, self.scale = work, unit, scale
        self.counts = Counts()
        self.best_s: float | None = None

    def best_text(self) -> str:
        if self.best_s is None:
            return f"best {self.what} -"
        return f"best {self.what} {self.best_s * 1e3:.3f} ms ({self.work / self.best_s / self.scale:.1f} {self.unit})"

    def told(self, kind: str, value: float | None = None) -> None:
        """A trial ended as ``kind`` (a :class:`Counts` field) with ``value`` (seconds, COMPLETE only)."""
        setattr(self.counts, kind, getattr(self.counts, kind) + 1)
        if kind in ("complete", "dup") and value is not None and (self.best_s is None or value < self.best_s):
            self.best_s = value
        c = self.counts
        # the bar counts what --trials counts (pruned points are not evaluated)
        model = f" model-pruned {c.model_pruned}" if c.model_pruned else ""
        self.bar.update(0 if kind in ("pruned", "model_pruned") else 1,
                        f"{self.best_text()} | pruned {c.pruned}{model} dup {c.dup} fail {c.fail}")

    def lost(self) -> None:
        """A trial another worker expired while this one held it (counted as failed; nothing to tell)."""
        self.counts.fail += 1

"""A tiledsl call timed beside the vendor library's in the same run, and the result file (GEMM benchmarks)."""

from __future__ import annotations

import datetime as dt
import json
import shlex
import sys


def bracketed(fn, vendor_fn, timer):
    """``(timer(fn), the vendor's figures)``: the vendor call is timed right before and right after ``fn`` and
    each figure averaged, so the clocks' drift under sustained load falls on both alike. ``timer`` returns one
    figure (ms) or a tuple of them."""
    before = timer(vendor_fn)
    mine = timer(fn)
    after = timer(vendor_fn)
    if isinstance(mine, tuple):
        return mine, tuple((x + y) / 2 for x, y in zip(before, after, strict=True))
    return mine, (before + after) / 2


def write_results(path: str, gpu: str, rows: list, library_version: str) -> None:
    """``{"meta": {command, gpu, date, cupy}, "rows": rows}`` as JSON at ``path`` (the command as run)."""
    meta = dict(command=" ".join(["python", *map(shlex.quote, sys.argv)]), gpu=gpu, date=str(dt.date.today()),
                cupy=library_version)
    with open(path, "w") as f:
        json.dump(dict(meta=meta, rows=rows), f, indent=1)
    print(f"wrote {path}")

"""Shared helpers of benchmarks/reduce_ladder.py and benchmarks/reduce.py (timing, checks, JSON, tables).

Timing: tiledsl.timing.time_gpu (CUDA events, warm-up, L2 flushed before each sample, median) around
``CALLS`` back-to-back calls, so every contender's Python launch overhead overlaps the GPU work; the
per-call time is the median divided by ``CALLS``. Bandwidth counts bytes read + written, in GB/s (1e9).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import sys
from pathlib import Path

from tiledsl.timing import time_gpu


def timed_ms(fn, calls: int, repeat: int, warmup: int = 2) -> float:
    """Median milliseconds of one call of ``fn`` (``calls`` back-to-back calls per event pair)."""
    return time_gpu(lambda: [fn() for _ in range(calls)], warmup=warmup, repeat=repeat).median_ms / calls


def calls_for(nbytes: int) -> int:
    """Back-to-back calls per sample: enough to hide ~50 µs of host overhead, fewer for big inputs."""
    return 10 if nbytes < (1 << 30) else 3


def torch_or_none():
    try:
        import torch

        return torch if torch.cuda.is_available() else None
    except Exception:
        return None


def environment() -> dict:
    """Command line, GPU, date and library versions, for the results file."""
    import cupy as cp

    import tiledsl
    from tiledsl.compile import nvrtc_version

    torch = torch_or_none()
    return {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "gpu": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cupy": cp.__version__, "torch": torch.__version__ if torch else None,
        "nvrtc": ".".join(map(str, nvrtc_version())), "tiledsl": tiledsl.__version__,
        "timing": "CUDA events around back-to-back calls, L2 flushed before each sample, median",
    }


def write_json(path: str, payload: dict) -> None:
    """Write ``payload`` to ``path`` and copy it to $OUT when set (the device run returns $OUT)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(payload, indent=1))
    if os.environ.get("OUT"):
        dst = Path(os.environ["OUT"]) / p.name
        if dst.resolve() != p.resolve():
            shutil.copy(p, dst)
    print(f"\nwrote {p}")


def markdown(headers: list[str], rows: list[list]) -> str:
    """A Markdown table."""
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)

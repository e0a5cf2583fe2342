"""The benchmarks' GPU check: one line and exit status 1 on a machine without a usable CUDA GPU."""

from __future__ import annotations

import sys

import tiledsl


def gpu_or_exit(script: str) -> tiledsl.Target:
    """The current GPU, or exit with ``<script>: no GPU: <why>`` on one line (status 1, no traceback)."""
    try:
        return tiledsl.require_gpu()
    except tiledsl.LaunchError as exc:
        why = str(exc).split(" (CuPy:")[0].split(". ")[0]  # the first clause, without CuPy's driver wording
        sys.exit(f"{script}: no GPU: {why}; this benchmark times kernels on a CUDA GPU, nothing was measured")

"""Run every uneven-tile schedule of the GPU tests once per layout on small shapes, for compute-sanitizer.

Tiles whose vector pieces do not split evenly over the threads skip the last round's pieces past the tile
(``docs/gemm.md``, "Rows fitted to M"); this drives those guards under the sanitizer, each result checked against a
float64 product. Run on a GPU from the repository root:

    compute-sanitizer --tool memcheck --error-exitcode 9 python benchmarks/sanitize_uneven.py
    compute-sanitizer --tool racecheck --error-exitcode 9 python benchmarks/sanitize_uneven.py "48x128x16 t4x8 cp.async"

Arguments: names from ``tests/test_gemm_gpu.py``'s ``UNEVEN_SCHEDULES`` (default: all of them).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from gpu_check import gpu_or_exit

import tiledsl

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from test_gemm_gpu import UNEVEN_SCHEDULES  # noqa: E402


def main() -> int:
    gpu_or_exit("sanitize_uneven.py")
    import cupy as cp

    rng = np.random.default_rng(1)
    names = sys.argv[1:] or list(UNEVEN_SCHEDULES)
    for name in names:
        s = tiledsl.GemmSchedule(**UNEVEN_SCHEDULES[name])
        for m, n, k in ((7, 13, 5), (35, 300, 70), (36, 260, 40)):
            for la in ("row", "col"):
                for lb in ("row", "col"):
                    a = cp.asarray(rng.uniform(-1, 1, (m, k)).astype(np.float32))
                    b = cp.asarray(rng.uniform(-1, 1, (k, n)).astype(np.float32))
                    a = cp.asfortranarray(a) if la == "col" else a
                    b = cp.asfortranarray(b) if lb == "col" else b
                    c = cp.full((m, n), cp.nan, cp.float32)
                    tiledsl.gemm(a, b, c, schedule=s)
                    ref = cp.asnumpy(a).astype(np.float64) @ cp.asnumpy(b).astype(np.float64)
                    err = np.linalg.norm(cp.asnumpy(c) - ref) / np.linalg.norm(ref)
                    if not err < 1e-5:
                        raise SystemExit(f"{name} {m}x{n}x{k} {la}/{lb}: wrong result (rel. error {err})")
    cp.cuda.runtime.deviceSynchronize()
    print("ok", names)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

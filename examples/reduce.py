"""Reductions with numpy semantics on the GPU: rows, columns, a tuple of axes, every op, checked against CuPy.

Run: ``python examples/reduce.py`` (needs a CUDA GPU; without one it says so in one line and exits 1).
"""

from __future__ import annotations

import sys

import tiledsl


def main() -> int:
    try:
        tiledsl.require_gpu()
    except tiledsl.LaunchError as exc:
        return f"examples/reduce.py: no GPU: {exc}"
    import cupy as cp

    x = cp.random.uniform(-1, 1, (4096, 8192), dtype=cp.float32)
    checks = [
        ("row sums", tiledsl.reduce(x, "sum", axis=1), x.astype(cp.float64).sum(axis=1)),
        ("column max", tiledsl.reduce(x, "max", axis=0), x.max(axis=0)),
        ("full mean", tiledsl.reduce(x, "mean"), x.astype(cp.float64).mean()),
        ("norm2 of each row", tiledsl.reduce(x, "norm2", axis=-1), cp.linalg.norm(x.astype(cp.float64), axis=-1)),
    ]
    x3 = x.reshape(64, 64, 8192)
    checks.append(("mean over axes (0, 2), keepdims", tiledsl.reduce(x3, "mean", axis=(0, 2), keepdims=True),
                   x3.astype(cp.float64).mean(axis=(0, 2), keepdims=True)))
    worst = 0.0
    for what, got, want in checks:
        assert got.shape == want.shape, (what, got.shape, want.shape)
        err = float(cp.max(cp.abs(got - want)) / max(float(cp.max(cp.abs(want))), 1e-30))
        worst = max(worst, err)
        print(f"{what:34s} shape {str(tuple(got.shape)):14s} dtype {got.dtype}  max rel. error {err:.1e}")
    s = tiledsl.ReduceSchedule(block=512, vec=4, items_per_thread=4, strategy="warp_shuffle", grid="auto")
    k = tiledsl.compile(tiledsl.ReduceOp(shape=x.shape, op="sum", axis=1), s)
    print(f"a row-sum kernel under {s}: {k.registers} registers, {k.smem_bytes} B shared memory")
    return 0 if worst < 1e-4 else f"examples/reduce.py: error {worst:.1e} above 1e-4"


if __name__ == "__main__":
    sys.exit(main())

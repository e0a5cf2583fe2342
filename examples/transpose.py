"""Tiled, padded transposes on the GPU: a matrix, a batch, a strided view, checked bit for bit against CuPy.

Run: ``python examples/transpose.py`` (needs a CUDA GPU; without one it says so in one line and exits 1).
"""

from __future__ import annotations

import sys

import tiledsl


def main() -> int:
    try:
        tiledsl.require_gpu()
    except tiledsl.LaunchError as exc:
        return f"examples/transpose.py: no GPU: {exc}"
    import cupy as cp

    from tiledsl.timing import time_gpu

    x = cp.random.uniform(-1, 1, (8192, 8192), dtype=cp.float32)
    y = tiledsl.transpose(x)
    assert cp.array_equal(y, x.T), "2-D transpose differs"
    xb = cp.arange(8 * 127 * 129, dtype=cp.float16).reshape(8, 127, 129)
    assert cp.array_equal(tiledsl.transpose(xb), xb.transpose(0, 2, 1)), "batched transpose differs"
    view = x[::2, 1:]                                  # strided input, read in place
    assert cp.array_equal(tiledsl.transpose(view), view.T), "strided view differs"
    t = time_gpu(lambda: tiledsl.transpose(x, out=y)).median_ms
    tc = time_gpu(lambda: cp.ascontiguousarray(x.T)).median_ms
    gbs = 2 * x.nbytes / t / 1e6
    print(f"8192x8192 float32: tiledsl {t:.3f} ms ({gbs:.0f} GB/s), cupy.ascontiguousarray(x.T) {tc:.3f} ms "
          f"({tc / t:.2f}x); batched float16 and a strided view: exact")
    return 0


if __name__ == "__main__":
    sys.exit(main())

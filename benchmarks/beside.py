"""A tiledsl call timed beside the vendor library's in the same run, and the result file (GEMM benchmarks)."""

from __future__ import annotations

import csv
import datetime as dt
import json
import shlex
import sys
from pathlib import Path

from tiledsl.gemm.api import gemm_as_rows  # noqa: F401  (the sweeps' rows path: schedule=None's, any schedule)

DATA = Path(__file__).resolve().parent / "data"  # workload shapes; provenance in data/SOURCES.md


def workload_shapes() -> dict[tuple[int, int, int, str], str]:
    """Every distinct float32 product of ``data/deepbench_gemm.csv`` and ``data/llm_gemm.csv``: (M, N, K, layout) ->
    its source, in file order. DeepBench's cuBLAS column-major flags map to the row-major layout tag as a_t = 1 ->
    A row-major ("N"), a_t = 0 -> A column-major ("T"), the same for b_t and B; the LLM rows are NN."""
    shapes: dict[tuple[int, int, int, str], str] = {}
    with open(DATA / "deepbench_gemm.csv") as f:
        for r in csv.DictReader(f):
            layout = ("N" if r["a_t"] == "1" else "T") + ("N" if r["b_t"] == "1" else "T")
            shapes.setdefault((int(r["m"]), int(r["n"]), int(r["k"]), layout), f"deepbench {r['source']}")
    with open(DATA / "llm_gemm.csv") as f:
        for r in csv.DictReader(f):
            shapes.setdefault((int(r["m"]), int(r["n"]), int(r["k"]), "NN"), f"llm {r['model']}.{r['layer']}")
    return shapes


def llm_weights() -> list[tuple[int, int]]:
    """Every distinct (N, K) of ``data/llm_gemm.csv`` (the models' weight matrices), in file order."""
    with open(DATA / "llm_gemm.csv") as f:
        return list(dict.fromkeys((int(r["n"]), int(r["k"])) for r in csv.DictReader(f)))


def sweep_main(script: str, default_out: str, description: str, products, measure, add_arguments=None) -> int:
    """The ``main`` of a GPU sweep: ``--out`` (default ``default_out``) and whatever ``add_arguments(parser)`` adds,
    exit with a message where no GPU is present (``gpu_check.gpu_or_exit``), then :func:`measure_each` of ``measure``
    over ``products(args)`` (tuples, called after the GPU check; ``measure`` takes the target after each tuple's
    items) and :func:`write_results`."""
    import argparse

    import cupy as cp
    from gpu_check import gpu_or_exit

    import tiledsl

    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--out", default=default_out)
    if add_arguments is not None:
        add_arguments(ap)
    args = ap.parse_args()
    gpu_or_exit(script)
    target = tiledsl.Target.current()
    rows = measure_each([(*product, target) for product in products(args)], measure)
    write_results(args.out, gpu_name(), rows, cp.__version__)
    return 0


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


def gemm_op(m: int, n: int, k: int, layout: str):
    """The float32 ``tiledsl.GemmOp`` of a layout named as in BLAS: "NN", "NT", "TN", "TT" (T: the operand is a
    column-major view)."""
    import tiledsl

    return tiledsl.GemmOp(m, n, k, layout_a="col" if layout[0] == "T" else "row",
                          layout_b="col" if layout[1] == "T" else "row")


def gemm_operands(rng, m: int, n: int, k: int, layout: str):
    """A (M, K) and B (K, N) float32 CuPy arrays of uniform(-1, 1) values from ``rng``, each column-major where
    ``layout`` says T."""
    import cupy as cp
    import numpy as np

    a = cp.asarray(rng.uniform(-1, 1, (m, k)).astype(np.float32))
    b = cp.asarray(rng.uniform(-1, 1, (k, n)).astype(np.float32))
    return (cp.asfortranarray(a) if layout[0] == "T" else a), (cp.asfortranarray(b) if layout[1] == "T" else b)


def device_gemm_operands(m: int, n: int, k: int, layout: str):
    """(A, B, float64 reference A·B, empty C) for C = A·B, generated on the device (large K stays fast): float32
    uniform(-1, 1), each operand column-major where ``layout`` says T; C is row-major (M, N)."""
    import cupy as cp

    a = cp.random.uniform(-1, 1, (m, k), dtype=cp.float32)
    b = cp.random.uniform(-1, 1, (k, n), dtype=cp.float32)
    a = cp.asfortranarray(a) if layout[0] == "T" else a
    b = cp.asfortranarray(b) if layout[1] == "T" else b
    return a, b, a.astype(cp.float64) @ b.astype(cp.float64), cp.empty((m, n), cp.float32)


def float32_bound(k: int) -> float:
    """The largest max |c − ref| / max |ref| a float32 product of depth K passes with: 1e-5·max(1, sqrt(K / 4096))
    (accumulation error grows like sqrt(K))."""
    return 1e-5 * max(1.0, (k / 4096) ** 0.5)


def checked_call(call, c, ref, k: int, what: str) -> float:
    """Poison ``c`` with NaN, run ``call`` (which writes ``c``), and return max |c − ref| / max |ref|; exit with
    "WRONG RESULT" naming ``what`` when it exceeds the float32 bound 1e-5·max(1, sqrt(K / 4096)) (accumulation
    error grows like sqrt(K); NaN, an element never written, fails too)."""
    import cupy as cp

    c.fill(cp.nan)
    call()
    err = float(cp.abs(c - ref).max() / cp.abs(ref).max())
    if not err < float32_bound(k):
        raise SystemExit(f"WRONG RESULT: rel err {err} for {what}")
    return err


def checked_beside_cublas(call, a, b, c, ref, k: int, what: str, repeat: int = 15) -> tuple[float, float, float]:
    """(relative error, ms, cuBLAS ms): ``call`` checked by :func:`checked_call` (exits on a wrong result), then
    timed :func:`bracketed` by ``cupy.matmul(a, b)``, each a tiledsl.timing.time_gpu median of ``repeat``."""
    import cupy as cp

    from tiledsl.timing import time_gpu

    err = checked_call(call, c, ref, k, what)
    ms, cublas_ms = bracketed(call, lambda: cp.matmul(a, b), lambda f: time_gpu(f, repeat=repeat).median_ms)
    return err, ms, cublas_ms


def measure_each(products, measure) -> list[dict]:
    """The rows of ``measure(*product)`` over ``products``, CuPy's memory pool emptied after each (the sweeps'
    operands are large)."""
    import cupy as cp

    rows: list[dict] = []
    for product in products:
        rows += measure(*product)
        cp.get_default_memory_pool().free_all_blocks()
    return rows


def copy_gbps(gpu_only: bool = False) -> float:
    """GB/s of a device-to-device copy of 2 GiB (read + write), median of 20: the measured HBM bandwidth the sweeps
    compare against (``tiledsl.timing.time_gpu``, with ``gpu_only`` as given)."""
    import cupy as cp

    from tiledsl.timing import time_gpu

    x = cp.empty(1 << 29, cp.float32)
    y = cp.empty_like(x)
    ms = time_gpu(lambda: y.__setitem__(Ellipsis, x), repeat=20, gpu_only=gpu_only).median_ms
    return 2 * x.nbytes / ms / 1e6


def read_gbps(nbytes: int, gpu_only: bool = True) -> float:
    """GB/s of a kernel that only reads ``nbytes`` (rounded down to 16-byte vectors; ``tiledsl.timing``'s read flush,
    :data:`tiledsl.timing.EVICT_BY_READING`: grid-stride float4 loads of a zeroed buffer by a full SM of blocks, no
    store), median of 20 (``time_gpu``, GPU alone by default): what the memory system gives a transfer of that size
    that, like a GEMV, reads and hardly writes (a copy writes half its bytes, and a destination smaller than L2 can
    leave them dirty past the timed region)."""
    import cupy as cp
    import numpy as np

    import tiledsl
    from tiledsl.compile import compile_source
    from tiledsl.runtime import launch
    from tiledsl.timing import EVICT_BY_READING, READ_FLUSH_BLOCKS_PER_SM, time_gpu

    target = tiledsl.Target.current()
    kernel = compile_source(EVICT_BY_READING, target.arch)
    n = max(1, nbytes // 16)
    buf, sink = cp.zeros(4 * n, cp.float32), cp.zeros(1, cp.float32)
    blocks = READ_FLUSH_BLOCKS_PER_SM * target.sm_count
    ms = time_gpu(lambda: launch(kernel, (blocks, 1, 1), (buf, np.uint64(n), sink)), repeat=20,
                  gpu_only=gpu_only).median_ms
    return 16 * n / ms / 1e6


def gpu_name() -> str:
    """The current CUDA device's name, as the result files record it."""
    import cupy as cp

    return cp.cuda.runtime.getDeviceProperties(0)["name"].decode()


def gemm_beside_cublas(a, b, c, schedule, repeat: int) -> tuple[float, float]:
    """(``tiledsl.gemm(a, b, c, schedule=schedule)`` ms, ``cupy.matmul(a, b)`` ms), medians of ``repeat`` timed
    calls (tiledsl.timing.time_gpu: CUDA events, warm-up, L2 flushed), cuBLAS :func:`bracketed` around ours."""
    import cupy as cp

    import tiledsl
    from tiledsl.timing import time_gpu

    return bracketed(lambda: tiledsl.gemm(a, b, c, schedule=schedule), lambda: cp.matmul(a, b),
                     lambda f: time_gpu(f, repeat=repeat).median_ms)


def write_results(path: str, gpu: str, rows: list, library_version: str) -> None:
    """``{"meta": {command, gpu, date, cupy}, "rows": rows}`` as JSON at ``path`` (the command as run)."""
    meta = dict(command=" ".join(["python", *map(shlex.quote, sys.argv)]), gpu=gpu, date=str(dt.date.today()),
                cupy=library_version)
    with open(path, "w") as f:
        json.dump(dict(meta=meta, rows=rows), f, indent=1)
    print(f"wrote {path}")

"""Compiling candidates in a process pool and measuring them in a GPU worker process.

* :func:`compile_job` runs in a ``ProcessPoolExecutor`` (NVRTC holds the GIL, so threads do not help):
  it calls the public ``tiledsl.compile`` (which fills tiledsl's on-disk kernel cache, so the GPU
  worker's own compile of the same source is a cache hit) and returns the resource report.
* :class:`GpuWorker` owns a child process that holds the CUDA context. Each candidate is first
  verified through the public call (``tiledsl.gemm(a, b, c, schedule=s)``) on fresh random data with
  the output NaN-poisoned, against the vendor library (``cupy.matmul``); then the same public call is
  captured once into a CUDA graph and the graph is timed with ``tiledsl.timing.time_gpu`` (CUDA
  events, warm-up, L2 flushed with 2× the device's L2 outside the timed region, median of repeats
  up to a minimum duration). Replaying a graph keeps the Python-side work of the call (emitting,
  cache look-up) off the GPU timeline without a second launch path.
* A CUDA error (illegal address, launch failure) poisons the context: the worker reports it and
  exits, and :class:`GpuWorker` starts a fresh one. A worker that hangs is killed after a timeout.
"""

from __future__ import annotations

import hashlib
import math
import multiprocessing as mp
import time
import traceback
from dataclasses import dataclass

# ---------------------------------------------------------------- compile (process pool)


def compile_job(family: str, op_dict: dict, schedule_dict: dict, arch: str) -> dict:
    """Compile one candidate with NVRTC; return its resource report or the compile error as data.

    Returns:
        ``{"ok": True, "registers", "smem_bytes", "spill_bytes", "stack_bytes", "compile_s",
        "source_sha256"}`` or ``{"ok": False, "error": ..., "compile_s": ...}``.
    """
    import tiledsl
    from tiledsl.api import family as get_family

    t0 = time.perf_counter()
    try:
        fam = get_family(family)
        op = fam.op_type.from_dict(op_dict)
        sched = fam.schedule_type.from_dict(schedule_dict)
        k = tiledsl.compile(op, sched, arch=arch)
    except Exception as exc:  # failure is data inside the search
        text = str(exc)
        if type(exc).__name__ == "CompileError":
            text = f"{exc.args[0]}\n{getattr(exc, 'log', '')[-2000:]}"
        return {"ok": False, "error": f"{type(exc).__name__}: {text}", "compile_s": time.perf_counter() - t0}
    return {"ok": True, **k.resources(), "compile_s": time.perf_counter() - t0,
            "source_sha256": hashlib.sha256(k.source.encode()).hexdigest()}


# ---------------------------------------------------------------- per-family benches (worker side)


class GemmBench:
    """GEMM inputs, public call, reference and vendor call for one :class:`tiledsl.GemmOp`."""

    def __init__(self, op) -> None:
        self.op = op

    def inputs(self):
        """Fresh random A, B in the op's layouts (uniform in [-1, 1)) and a NaN-poisoned C."""
        import cupy as cp

        op = self.op
        dt = cp.dtype(op.dtype)

        def rand(rows, cols, layout):
            shape = (rows, cols) if layout == "row" else (cols, rows)
            x = (cp.random.random(shape, dtype=cp.float32) * 2 - 1).astype(dt)
            return x if layout == "row" else x.T

        a = rand(op.m, op.k, op.layout_a)
        b = rand(op.k, op.n, op.layout_b)
        c = cp.full((op.m, op.n), cp.nan, dtype=dt)
        return a, b, c

    def public(self, inputs, schedule) -> None:
        import tiledsl

        a, b, c = inputs
        tiledsl.gemm(a, b, c, schedule=schedule)

    def vendor(self, inputs) -> None:
        import cupy as cp

        a, b, c = inputs
        cp.matmul(a, b, out=c)

    def reference(self, inputs):
        import cupy as cp

        a, b, _ = inputs
        return cp.matmul(a, b)

    def tolerance(self) -> float:
        """Max-norm relative tolerance: output rounding + fp32 accumulation over K (both sides)."""
        import numpy as np

        eps_out = float(np.finfo(np.float16 if self.op.dtype == "float16" else np.float32).eps)
        if self.op.dtype == "bfloat16":
            eps_out = 2.0 ** -7
        return 4 * eps_out + 16 * float(np.finfo(np.float32).eps) * math.sqrt(max(self.op.k, 1))

    def output(self, inputs):
        return inputs[2]


def make_bench(family: str, op):
    """The bench of an op family (GEMM here; other families add theirs in ``search.measure_more``)."""
    if family == "gemm":
        return GemmBench(op)
    from . import measure_more

    return measure_more.make_bench(family, op)


# ---------------------------------------------------------------- worker process


def _is_cuda_error(exc: BaseException) -> bool:
    """True when ``exc`` (or its cause) is a CUDA runtime/driver error, which poisons the context."""
    seen = 0
    while exc is not None and seen < 5:
        mod = type(exc).__module__
        if "cupy_backends" in mod or "cupy.cuda" in mod or type(exc).__name__ in (
                "CUDARuntimeError", "CUDADriverError", "CUBLASError"):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def _timed(fn, *, min_time_ms: float, repeat: int, best_ms: float | None):
    """Capture ``fn`` into a CUDA graph and time its replay; eager timing if capture is refused."""
    import cupy as cp

    from tiledsl.timing import time_gpu

    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        try:
            stream.begin_capture()
            try:
                fn()
            finally:
                graph = stream.end_capture()
            call, method = (lambda: graph.launch(stream)), "graph"
        except Exception:
            cp.cuda.Device().synchronize()
            call, method = fn, "eager"
        probe = time_gpu(call, warmup=1, repeat=3, flush=True)
        if best_ms is not None and probe.median_ms > 4 * best_ms:
            return probe, method + " (stopped early: > 4x the best so far)"
        return time_gpu(call, warmup=2, repeat=repeat, min_time_ms=min_time_ms, max_repeat=500), method


def _verify(bench, schedule) -> tuple[float, float]:
    """Run the public call on fresh data with a NaN-poisoned output; (max relative error, seconds).

    Raises:
        AssertionError-free: returns the error; the caller decides against the tolerance.
    """
    import cupy as cp

    t0 = time.perf_counter()
    inputs = bench.inputs()
    bench.public(inputs, schedule)
    ref = bench.reference(inputs)
    out = bench.output(inputs).astype(cp.float64)
    ref = ref.astype(cp.float64)
    scale = float(cp.abs(ref).max()) if ref.size else 1.0
    diff = cp.abs(out - ref)
    finite = bool(cp.isfinite(out).all())
    err = float(diff.max()) / (scale or 1.0) if ref.size else 0.0
    cp.cuda.Device().synchronize()
    return (err if finite else math.inf), time.perf_counter() - t0


def _worker_main(conn, family: str, op_dict: dict) -> None:  # pragma: no cover - runs on a GPU
    import cupy as cp

    import tiledsl
    from tiledsl.api import family as get_family
    from tiledsl.compile import nvrtc_version

    fam = get_family(family)
    op = fam.op_type.from_dict(op_dict)
    bench = make_bench(family, op)
    timing_inputs = None
    while True:
        try:
            req = conn.recv()
        except EOFError:
            return
        cmd = req["cmd"]
        try:
            if cmd == "stop":
                return
            if cmd == "info":
                t = tiledsl.Target.current()
                conn.send({"ok": True, "target": t.to_dict(), "nvrtc": list(nvrtc_version()),
                           "cupy": cp.__version__})
                continue
            if timing_inputs is None:
                timing_inputs = bench.inputs()
            if cmd == "measure":
                sched = fam.schedule_type.from_dict(req["schedule"])
                err, verify_s = _verify(bench, sched)
                tol = bench.tolerance()
                if not err <= tol:
                    conn.send({"ok": False, "stage": "verify", "verify_s": verify_s,
                               "error": f"wrong result: max relative error {err:.3g} > tolerance {tol:.3g} "
                                        f"vs the vendor library on fresh random data (output NaN-poisoned)"})
                    continue
                t0 = time.perf_counter()
                tm, method = _timed(lambda s=sched, x=timing_inputs: bench.public(x, s),
                                    min_time_ms=req.get("min_time_ms", 100.0), repeat=req.get("repeat", 10),
                                    best_ms=req.get("best_ms"))
                conn.send({"ok": True, "median_ms": tm.median_ms, "p10_ms": tm.p10_ms, "p90_ms": tm.p90_ms,
                           "repeats": tm.repeats, "spread": tm.spread, "timing": method, "max_rel_err": err,
                           "verify_s": verify_s, "measure_s": time.perf_counter() - t0})
            elif cmd == "vendor":
                t0 = time.perf_counter()
                tm, method = _timed(lambda x=timing_inputs: bench.vendor(x), min_time_ms=req.get("min_time_ms", 100.0),
                                    repeat=req.get("repeat", 10), best_ms=None)
                conn.send({"ok": True, "median_ms": tm.median_ms, "p10_ms": tm.p10_ms, "p90_ms": tm.p90_ms,
                           "repeats": tm.repeats, "spread": tm.spread, "timing": method,
                           "measure_s": time.perf_counter() - t0})
            elif cmd == "remeasure":
                conn.send(_remeasure(bench, fam, timing_inputs, req))
            else:
                conn.send({"ok": False, "error": f"unknown command {cmd!r}"})
        except Exception as exc:
            fatal = _is_cuda_error(exc)
            conn.send({"ok": False, "stage": "launch" if fatal else "worker", "fatal": fatal,
                       "error": f"{type(exc).__name__}: {exc}",
                       "traceback": traceback.format_exc(limit=6)})
            if fatal:
                return


def _remeasure(bench, fam, inputs, req: dict) -> dict:  # pragma: no cover - runs on a GPU
    """Interleaved rounds: every round times each candidate and the vendor once, order rotated."""
    from tiledsl.timing import time_gpu

    scheds = [fam.schedule_type.from_dict(d) for d in req["schedules"]]
    calls = []
    for s in scheds:
        calls.append(_graph_call(lambda s=s: bench.public(inputs, s)))
    calls.append(_graph_call(lambda: bench.vendor(inputs)))
    rounds = req.get("rounds", 7)
    times = [[] for _ in calls]
    for r in range(rounds):
        order = list(range(len(calls)))
        order = order[r % len(order):] + order[:r % len(order)]
        for i in order:
            stream, call = calls[i]
            with stream:
                times[i].append(time_gpu(call, warmup=1, repeat=req.get("repeat", 20)).median_ms)
    return {"ok": True, "times_ms": times[:-1], "vendor_ms": times[-1]}


def _graph_call(fn):  # pragma: no cover - runs on a GPU
    import cupy as cp

    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        fn()  # loads the module and sets the shared-memory attribute outside the capture
        stream.synchronize()
        try:
            stream.begin_capture()
            try:
                fn()
            finally:
                graph = stream.end_capture()
            return stream, (lambda: graph.launch(stream))
        except Exception:
            cp.cuda.Device().synchronize()
            return stream, fn


# ---------------------------------------------------------------- parent side


@dataclass
class WorkerStats:
    """How often the GPU worker was (re)started and why."""

    starts: int = 0
    restarts: list = None

    def __post_init__(self) -> None:
        self.restarts = self.restarts or []


class GpuWorker:
    """A child process holding the CUDA context; restarted after a CUDA error, a crash or a hang.

    Args:
        family: op family name.
        op_dict: the op as a dict (``op.to_dict()``).
        timeout_s: longest one request may take before the worker is killed.
    """

    def __init__(self, family: str, op_dict: dict, timeout_s: float = 120.0) -> None:
        self.family, self.op_dict, self.timeout_s = family, op_dict, timeout_s
        self.stats = WorkerStats()
        self._proc = None
        self._conn = None
        self._start()

    def _start(self) -> None:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self._proc = ctx.Process(target=_worker_main, args=(child, self.family, self.op_dict), daemon=True,
                                 name="tiledsl-gpu-worker")
        self._proc.start()
        child.close()
        self._conn = parent
        self.stats.starts += 1

    def _restart(self, why: str) -> None:
        self.stats.restarts.append(why)
        self._kill()
        self._start()

    def _kill(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            self._proc.kill()
        if self._proc is not None:
            self._proc.join(timeout=10)
        if self._conn is not None:
            self._conn.close()

    def call(self, req: dict, timeout_s: float | None = None) -> dict:
        """Send one request; a hang, a crash or a CUDA error comes back as ``{"ok": False, ...}``."""
        timeout_s = timeout_s or self.timeout_s
        try:
            self._conn.send(req)
            if not self._conn.poll(timeout_s):
                self._restart(f"timeout after {timeout_s:.0f} s")
                return {"ok": False, "stage": "timeout", "error": f"no answer within {timeout_s:.0f} s (killed)"}
            resp = self._conn.recv()
        except (EOFError, OSError, BrokenPipeError) as exc:
            code = self._proc.exitcode if self._proc is not None else None
            self._restart(f"worker died (exit code {code})")
            return {"ok": False, "stage": "crash", "error": f"GPU worker died (exit code {code}): {exc!r}"}
        if resp.get("fatal"):
            self._restart(resp.get("error", "CUDA error"))
        return resp

    def close(self) -> None:
        """Stop the worker."""
        try:
            self._conn.send({"cmd": "stop"})
            self._proc.join(timeout=10)
        except Exception:
            pass
        self._kill()

"""Compiling candidates in a process pool and measuring them in a GPU worker process.

* :func:`compile_job` runs in a ``ProcessPoolExecutor`` (NVRTC holds the GIL, so threads do not help):
  it calls the public ``tiledsl.compile`` (which fills tiledsl's on-disk kernel cache, so the GPU
  worker's own compile of the same source is a cache hit) and returns the resource report.
* :class:`GpuWorker` owns a child process that holds the CUDA context. Each candidate is first
  verified through the public call (``tiledsl.gemm(a, b, c, schedule=s)``, ``tiledsl.reduce(x, op,
  axis, out=o, schedule=s)``, ``tiledsl.transpose(x, out=y, schedule=s)``: one bench per family) on
  fresh random data with the output poisoned (NaN; the largest value for integer outputs), against a
  reference (``cupy.matmul`` in float64; numpy's reduction semantics computed by CuPy in float64; ``x.T``
  copied by CuPy); then the same public call is
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
import os
import time
import traceback
from dataclasses import dataclass

from .devices import pinned
from .objective import load_model

# ---------------------------------------------------------------- compile (process pool)


def compile_job(family: str, op_dict: dict, schedule_dict: dict, arch: str, target=None,
                predict_first: bool = True) -> dict:
    """Compile one candidate with NVRTC; return its resource report or the compile error as data.

    Args:
        target: a :class:`tiledsl.Target`: also predict the candidate's time on it with the cost model, off the
            tuner's process: from the schedule alone first (``predicted_s``, ``bound_by``, ``predict_s``: seconds
            the prediction took; skipped with ``predict_first=False``, where the tuner knows it already), then
            from the compiled kernel's ptxas registers, spills and shared memory (``predicted_compiled_s``; the
            report ranks by both). An exception of the model propagates (a bug, not a property of the point).

    Returns:
        ``{"ok": True, "registers", "smem_bytes", "spill_bytes", "stack_bytes", "compile_s",
        "source_sha256"}`` or ``{"ok": False, "error": ..., "compile_s": ...}``, plus the predictions' keys
        when ``target`` is given (None when the model gives no positive finite time).
    """
    import tiledsl
    from tiledsl.api import family as get_family

    pred: dict = {}
    if target is not None and predict_first:
        t0 = time.perf_counter()
        fam = get_family(family)  # an exception of the model is a bug: it reaches the tuner through the future
        pred = load_model().explain(fam.op_type.from_dict(op_dict), fam.schedule_type.from_dict(schedule_dict), target)
        pred["predict_s"] = time.perf_counter() - t0
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
        return {"ok": False, "error": f"{type(exc).__name__}: {text}", "compile_s": time.perf_counter() - t0, **pred}
    done = {"ok": True, **k.resources(), "compile_s": time.perf_counter() - t0,
            "source_sha256": hashlib.sha256(k.source.encode()).hexdigest(), **pred}
    if target is not None:
        done["predicted_compiled_s"] = load_model().predict(op, sched, target, kernel=k)
    return done


# ---------------------------------------------------------------- per-family benches (worker side)


class Bench:
    """What the worker needs to verify and time one op: fresh inputs with a poisoned output, the public
    tiledsl call, the vendor library's call (timed in the same run), a float64-comparable reference,
    the scale errors are measured against, and the tolerance.

    Subclasses implement ``inputs``, ``public``, ``vendor``, ``reference``, ``output``, ``tolerance``;
    ``vendor_name`` is what the report prints.
    """

    family: str = ""  # the op family this bench measures (make_bench looks it up)

    vendor_name = "the vendor library"

    def __init__(self, op) -> None:
        self.op = op

    def scale(self, inputs, ref) -> float:
        """Magnitude the max-norm error is divided by (default: max |reference|)."""
        import cupy as cp

        return float(cp.abs(ref).max()) if ref.size else 1.0


def _poisoned(shape, dtype):
    """A CuPy array of ``shape`` filled with NaN (float) or the dtype's largest value (integer)."""
    import cupy as cp

    dt = cp.dtype(dtype)
    fill = cp.nan if dt.kind == "f" else cp.iinfo(dt).max
    return cp.full(shape, fill, dtype=dt)


def _random(shape, dtype, low: float = -1.0, high: float = 1.0):
    """Fresh uniform random values in [low, high) (integers: whole numbers in [low, high))."""
    import cupy as cp

    dt = cp.dtype(dtype)
    if dt.kind in "iu":
        return cp.random.randint(int(low), int(high), size=shape).astype(dt)
    return (cp.random.random(shape, dtype=cp.float64) * (high - low) + low).astype(dt)


def _gemm_matrix(rows: int, cols: int, layout: str, align: int, dtype, fill=None):
    """A (rows, cols) CuPy matrix stored ``layout``-major ("col": a ``.T`` view of a contiguous array)
    whose vector alignment, as ``tiledsl.gemm`` computes it (base address, leading dimension and
    contiguous extent), is ``align`` elements: the leading dimension is the contiguous extent rounded up
    to ``align`` and, for ``align`` < 4 where the leading dimension and extent alone allow more, the data
    starts ``align`` elements into its allocation (CuPy allocations are 256-byte aligned); where they already
    hold it to ``align`` (an odd K, N = 2) the data starts at the allocation, as a user's fresh array does.
    Uniform in [-1, 1), or ``fill``."""
    import cupy as cp

    from tiledsl.spec import widest_dividing

    ext, other = (cols, rows) if layout == "row" else (rows, cols)
    ld = -(-ext // align) * align
    off = 0 if align >= 4 or widest_dividing(4, ld, ext) == align else align
    size = off + other * ld
    if fill is None:
        flat = (cp.random.random(size, dtype=cp.float32) * 2 - 1).astype(dtype)
    else:
        flat = cp.full(size, fill, dtype=dtype)
    store = flat[off:].reshape(other, ld)[:, :ext]
    return store if layout == "row" else store.T


class GemmBench(Bench):
    family = "gemm"
    """GEMM inputs, public call, reference and vendor call for one :class:`tiledsl.GemmOp`.

    The inputs are built from the op, so the public call builds this very op: A and B in the op's
    layouts (column-major as ``.T`` views) and alignments (:func:`_gemm_matrix`), C row-major with
    ``align_c``; with ``read_c`` the call is ``C = A·B + 1·C`` on a random C (else beta = 0 on a
    NaN-poisoned C). The reference is computed in float64 (``cupy.matmul`` of float64 copies, plus the
    float64 C before the call).

    A column-major C (``layout_c="col"``: the rows Cᵀ = Bᵀ·Aᵀ of a few-column product, ``search.tune
    --as-rows``): C is a column-major view with ``align_c`` along its rows, and the call is the user's product
    (this op's Bᵀ times its Aᵀ, into C's row-major transpose) as ``tiledsl.gemm`` runs it with ``schedule=None``
    (:func:`tiledsl.gemm.api.gemm_as_rows`); cuBLAS computes that product too.
    """

    def __init__(self, op) -> None:
        super().__init__(op)
        self.beta = 1.0 if op.read_c else 0.0
        self.vendor_name = "cupy.matmul -> cuBLAS" + (" (+ C: cupy.add, beta = 1)" if op.read_c else "")
        if op.precision == "tf32":  # CuPy offers no TF32 switch per call: cuBLAS TF32 is in benchmarks/gemm_tc.py --tf32
            self.vendor_name += " exact float32 SGEMM"

    def inputs(self):
        """(A, B, C, float64 copy of C before the call or None)."""
        import cupy as cp

        op = self.op
        dt = cp.dtype(op.dtype)
        a = _gemm_matrix(op.m, op.k, op.layout_a, op.align_a, dt)
        b = _gemm_matrix(op.k, op.n, op.layout_b, op.align_b, dt)
        if op.read_c:
            c = _gemm_matrix(op.m, op.n, op.layout_c, op.align_c, dt)
            return a, b, c, c.astype(cp.float64)
        return a, b, _gemm_matrix(op.m, op.n, op.layout_c, op.align_c, dt, fill=cp.nan), None

    def public(self, inputs, schedule) -> None:
        import tiledsl

        a, b, c, _ = inputs
        if self.op.layout_c == "col":  # the user's product (this op's C)ᵀ = (its B)ᵀ·(its A)ᵀ, run as these rows
            from tiledsl.gemm.api import gemm_as_rows

            gemm_as_rows(b.T, a.T, c.T, schedule, beta=self.beta)
            return
        tiledsl.gemm(a, b, c, beta=self.beta, schedule=schedule, precision=self.op.precision)

    def vendor(self, inputs) -> None:
        import cupy as cp

        a, b, c, _ = inputs
        if self.op.layout_c == "col":  # cuBLAS on the user's product (C row-major), as cupy.matmul computes it
            a, b, c = b.T, a.T, c.T
        if self.op.read_c:
            cp.add(c, cp.matmul(a, b), out=c)
        else:
            cp.matmul(a, b, out=c)

    def reference(self, inputs):
        """float64 A·B (+ C before the call)."""
        import cupy as cp

        a, b, _, c0 = inputs
        ref = cp.matmul(a.astype(cp.float64), b.astype(cp.float64))
        return ref if c0 is None else ref + c0

    def tolerance(self) -> float:
        """Max-norm tolerance relative to max |reference|: the output's rounding (4 eps) plus the float32
        accumulation over K, 16·eps(float32)·√K = 1.2e-4·√(K/4096) (a float64 reference has none)."""
        import numpy as np

        eps_out = float(np.finfo(np.float16 if self.op.dtype == "float16" else np.float32).eps)
        if self.op.dtype == "bfloat16":
            eps_out = 2.0 ** -7
        eps32 = float(np.finfo(np.float32).eps)
        if self.op.precision == "tf32":  # inputs read with a 10-bit mantissa: each product off by up to 2^-10
            return 8 * 2.0 ** -10 + 16 * eps32 * 64 * math.sqrt(max(self.op.k, 1) / 4096)
        return 4 * eps_out + 16 * eps32 * 64 * math.sqrt(max(self.op.k, 1) / 4096)

    def output(self, inputs):
        return inputs[2]


class ReduceBench(Bench):
    family = "reduce"
    """``tiledsl.reduce`` of one :class:`tiledsl.ReduceOp` against numpy's semantics.

    Inputs are uniform in [-1, 1) (prod: in 1 ± min(1/2, 1/length), so the products neither vanish nor
    overflow; integers: whole numbers in [-8, 8), prod: ±1). The reference is the numpy-semantics
    reduction computed by CuPy on the float64 copy of the input (max/min on the input itself: exact),
    the vendor call ``cupy.<op>(x, axis=axis, out=out)`` (norm2: ``cupy.linalg.norm``, copied into
    ``out``). Errors are measured against the largest per-output magnitude sum |x| (mean: / length;
    prod, norm2, max, min: |reference|), which bounds every ordering's rounding error.
    """

    def __init__(self, op) -> None:
        super().__init__(op)
        self.vendor_name = (f"cupy.linalg.norm(x, axis={op.axis})" if op.op == "norm2"
                            else f"cupy.{op.op}(x, axis={op.axis}) -> CUB")

    def inputs(self):
        """(x, out): fresh random x of the op's shape and dtype, and a poisoned output."""
        import cupy as cp

        op = self.op
        if op.op == "prod":
            if cp.dtype(op.dtype).kind in "iu":
                x = (cp.random.randint(0, 2, size=op.shape) * 2 - 1).astype(op.dtype)
            else:
                d = min(0.5, 1.0 / max(op.length, 1))
                x = _random(op.shape, op.dtype, 1.0 - d, 1.0 + d)
        else:
            x = _random(op.shape, op.dtype, -8 if cp.dtype(op.dtype).kind in "iu" else -1.0,
                        8 if cp.dtype(op.dtype).kind in "iu" else 1.0)
        return x, _poisoned(op.out_shape, op.out_dtype)

    def public(self, inputs, schedule) -> None:
        import tiledsl

        x, out = inputs
        tiledsl.reduce(x, self.op.op, self.op.axis, schedule=schedule, out=out, keepdims=self.op.keepdims)

    def vendor(self, inputs) -> None:
        import cupy as cp

        x, out = inputs
        op = self.op
        if op.op == "norm2":
            out[...] = cp.linalg.norm(x, axis=op.axis, keepdims=op.keepdims)
        else:
            getattr(cp, op.op)(x, axis=op.axis, out=out, keepdims=op.keepdims)

    def reference(self, inputs):
        import cupy as cp

        x, _ = inputs
        op = self.op
        kw = {"axis": op.axis, "keepdims": op.keepdims}
        if op.op in ("max", "min"):
            return getattr(cp, op.op)(x, **kw).astype(cp.float64)
        x64 = x.astype(cp.float64)
        if op.op == "norm2":
            return cp.sqrt(cp.sum(x64 * x64, **kw))
        return getattr(cp, op.op)(x64, **kw)

    def scale(self, inputs, ref) -> float:
        import cupy as cp

        x, _ = inputs
        op = self.op
        if op.op in ("sum", "mean") and x.size:
            s = cp.sum(cp.abs(x.astype(cp.float64)), axis=op.axis, keepdims=op.keepdims)
            return float(s.max()) / (op.length if op.op == "mean" else 1) or 1.0
        return super().scale(inputs, ref)

    def tolerance(self) -> float:
        """Relative to :meth:`scale`: the output's rounding plus 4·eps(accumulator)·√length + 16 eps.

        max/min select an element (exact); integer sums are exact; a float ordering's rounding
        error grows like √length for random data (a missing or doubled block is far larger).
        """
        import numpy as np

        op = self.op
        if op.op in ("max", "min"):
            return 0.0
        kind = np.dtype(op.out_dtype).kind
        if kind in "iu":
            return 0.0
        eps_out = float(np.finfo(np.dtype(op.out_dtype)).eps)
        acc = np.float64 if op.acc_dtype in ("float64", "int64") else np.float32
        eps_acc = float(np.finfo(acc).eps)
        return eps_out + eps_acc * (4 * math.sqrt(max(op.length, 1)) + 16)

    def output(self, inputs):
        return inputs[1]


class TransposeBench(Bench):
    family = "transpose"
    """``tiledsl.transpose(x, out=y)`` of one :class:`tiledsl.TransposeOp` (contiguous x and y).

    The reference and the vendor call are ``cupy.ascontiguousarray(x.swapaxes(-1, -2))`` (for 2-D x:
    ``x.T``); a transpose moves bits, so the result must be exact. The vendor's result is kept
    alive so a captured CUDA graph writes into memory that stays allocated.
    """

    vendor_name = "cupy.ascontiguousarray(x.T)"

    def __init__(self, op) -> None:
        super().__init__(op)
        self._vendor_out = None

    def inputs(self):
        """(x, y): fresh random x of the op's shape and dtype, and a poisoned output y."""
        import cupy as cp

        op = self.op
        x = _random(op.shape, op.dtype, *((-1000, 1000) if cp.dtype(op.dtype).kind in "iu" else (-1.0, 1.0)))
        return x, _poisoned(op.out_shape, op.dtype)

    def public(self, inputs, schedule) -> None:
        import tiledsl

        x, y = inputs
        tiledsl.transpose(x, out=y, schedule=schedule)

    def vendor(self, inputs) -> None:
        import cupy as cp

        x, _ = inputs
        self._vendor_out = cp.ascontiguousarray(x.swapaxes(-1, -2))

    def reference(self, inputs):
        import cupy as cp

        x, _ = inputs
        return cp.ascontiguousarray(x.swapaxes(-1, -2))

    def tolerance(self) -> float:
        """0: the output must equal the input's elements exactly."""
        return 0.0

    def output(self, inputs):
        return inputs[1]


def make_bench(family: str, op) -> Bench:
    """The bench of an op family: the :class:`Bench` subclass whose ``family`` is ``family``.

    Raises:
        KeyError: no bench for that family.
    """
    for cls in Bench.__subclasses__():
        if cls.family == family:
            return cls(op)
    raise KeyError(f"no bench for op family {family!r}; benches: {[c.family for c in Bench.__subclasses__()]}")


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


class _Captured:
    """A CUDA graph of one call, with everything its replay touches kept alive.

    CuPy's memory pool hands freed blocks to the next allocation. A call that allocates inside the
    captured region (a split-K GEMM's float32 workspace ``cupy.empty((split_k, M, N))``, a vendor
    call's temporary) would free the block when the call returns, and the graph would then write
    into memory that the pool gives to someone else. So :func:`_capture`:

    1. runs the call once before capturing on the same stream: modules load, the shared-memory
       attribute is set, and the pool caches blocks of the sizes the call allocates (an allocation
       inside the capture then reuses a cached block instead of calling ``cudaMalloc``, which a
       capture refuses);
    2. captures under ``cupy.cuda.using_allocator`` with an allocator that serves from the default
       pool and keeps every ``MemoryPointer`` it hands out in ``held``; a ``_Captured`` owns ``held``
       (and the graph and stream), so those blocks stay allocated for as long as the graph can be
       replayed and go back to the pool only with it.
    """

    def __init__(self, graph, stream, held: list) -> None:
        self.graph, self.stream, self.held = graph, stream, held

    def __call__(self) -> None:
        self.graph.launch(self.stream)


def _capture(fn):
    """(stream, callable): ``fn`` captured into a :class:`_Captured` graph, or ``fn`` itself (eager)
    when capture is refused."""
    import cupy as cp

    stream = cp.cuda.Stream(non_blocking=True)
    pool = cp.get_default_memory_pool()
    held: list = []

    def alloc(size: int):
        mem = pool.malloc(size)
        held.append(mem)
        return mem

    with stream:
        fn()  # warm-up outside the capture (see _Captured)
        stream.synchronize()
        try:
            with cp.cuda.using_allocator(alloc):
                stream.begin_capture()
                try:
                    fn()
                finally:
                    graph = stream.end_capture()
            return stream, _Captured(graph, stream, held)
        except Exception:
            cp.cuda.Device().synchronize()
            held.clear()
            return stream, fn


def _timed(fn, *, min_time_ms: float, repeat: int, best_ms: float | None):
    """Capture ``fn`` into a CUDA graph (:func:`_capture`) and time its replay; eager timing if capture
    is refused."""
    from tiledsl.timing import time_gpu

    stream, call = _capture(fn)
    method = "graph" if isinstance(call, _Captured) else "eager"
    with stream:
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
    scale = bench.scale(inputs, ref)
    diff = cp.abs(out - ref)
    finite = bool(cp.isfinite(out).all())
    err = float(diff.max()) / (scale or 1.0) if ref.size else 0.0
    cp.cuda.Device().synchronize()
    return (err if finite else math.inf), time.perf_counter() - t0


def _worker_main(conn, family: str, op_dict: dict) -> None:  # pragma: no cover - runs on a GPU
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the tuner's to handle (search.interrupt)
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
                           "cupy": cp.__version__, "vendor": bench.vendor_name,
                           "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
                           "devices_seen": cp.cuda.runtime.getDeviceCount(), "pci_bus_id": cp.cuda.Device().pci_bus_id})
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
                bench.vendor(timing_inputs)  # first call (module load, handles, pool) outside the capture
                cp.cuda.Device().synchronize()
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
    return _capture(fn)


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

    One request at a time: :meth:`call` sends it and waits; :meth:`send` then :meth:`receive` do the
    same in two steps, so one process can keep several workers busy (wait on :attr:`connection`, or
    poll :meth:`ready`).

    Args:
        family: op family name.
        op_dict: the op as a dict (``op.to_dict()``).
        timeout_s: longest one request may take (seconds) before the worker is killed and restarted.
        device: the CUDA device (index among this process's devices) the worker is pinned to through
            ``CUDA_VISIBLE_DEVICES`` (:func:`search.devices.pinned`; it is its device 0); None: not
            pinned (it uses the current device, as a single-GPU run always did).
    """

    name = "tiledsl-gpu-worker"

    def __init__(self, family: str, op_dict: dict, timeout_s: float = 120.0, device: int | None = None) -> None:
        self.family, self.op_dict, self.timeout_s, self.device = family, op_dict, timeout_s, device
        self.stats = WorkerStats()
        self._proc = None
        self._conn = None
        self._deadline = 0.0
        self._timeout = timeout_s
        self._send_error: BaseException | None = None
        self._start()

    def _main_args(self) -> tuple:
        """(target, args) of the child process."""
        return _worker_main, (self.family, self.op_dict)

    def _start(self) -> None:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        target, args = self._main_args()
        self._proc = ctx.Process(target=target, args=(child, *args), daemon=True,
                                 name=self.name if self.device is None else f"{self.name}-{self.device}")
        with pinned(self.device):
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

    @property
    def connection(self):
        """The parent's end of the pipe (for ``multiprocessing.connection.wait``)."""
        return self._conn

    def send(self, req: dict, timeout_s: float | None = None) -> None:
        """Send one request; its answer is collected by :meth:`receive` within ``timeout_s`` seconds."""
        self._timeout = timeout_s or self.timeout_s
        self._deadline = time.monotonic() + self._timeout
        self._send_error = None
        try:
            self._conn.send(req)
        except (OSError, BrokenPipeError) as exc:  # the worker died before: receive() reports it
            self._send_error = exc

    def ready(self) -> bool:
        """True when :meth:`receive` returns without waiting (an answer, a dead worker, or the deadline passed)."""
        try:
            return (self._send_error is not None or time.monotonic() >= self._deadline
                    or self._conn.poll(0))
        except (OSError, EOFError):
            return True

    def seconds_left(self) -> float:
        """Seconds until the request in hand times out (0 when it has)."""
        return max(0.0, self._deadline - time.monotonic())

    def receive(self) -> dict:
        """The answer to the request sent; a hang, a crash or a CUDA error comes back as ``{"ok": False, ...}``."""
        try:
            if self._send_error is not None:
                raise self._send_error
            if not self._conn.poll(self.seconds_left()):
                self._restart(f"timeout after {self._timeout:.0f} s")
                return {"ok": False, "stage": "timeout", "error": f"no answer within {self._timeout:.0f} s (killed)"}
            resp = self._conn.recv()
        except (EOFError, OSError, BrokenPipeError) as exc:
            code = self._proc.exitcode if self._proc is not None else None
            self._restart(f"worker died (exit code {code})")
            return {"ok": False, "stage": "crash", "error": f"GPU worker died (exit code {code}): {exc!r}"}
        if resp.get("fatal"):
            self._restart(resp.get("error", "CUDA error"))
        return resp

    def call(self, req: dict, timeout_s: float | None = None) -> dict:
        """Send one request and wait for its answer (:meth:`send` + :meth:`receive`)."""
        self.send(req, timeout_s)
        return self.receive()

    def close(self) -> None:
        """Stop the worker."""
        try:
            self._conn.send({"cmd": "stop"})
            self._proc.join(timeout=10)
        except Exception:
            pass
        self._kill()

"""Run an emitted CUDA kernel's own source on the CPU, for the tests: the CI machine has no GPU, and a kernel's
control flow (which row of B a ring slot holds, which slice a block owns, which lane stores) is what a compile check
cannot see.

The source is compiled by the host C++ compiler (g++, C++20) against ``host_cuda.h``: each CUDA thread of a block a
fiber (ucontext) of one OS thread, blocks one after another, ``__syncthreads`` a barrier, warp shuffles exchanged
through a barrier of the warp's lanes. Shared memory, static and dynamic, is the block's own and filled with 0xff
bytes (NaN as float32) before it runs; every global buffer ends against unmapped memory, so an access past its end
stops the run, and sits among 0xff bytes (the rounding to 16 bytes past its end, the page before it): a read there
gives NaN or -1, a write there ends the run with an error. The prelude's inline-PTX helpers become host code: cp.async
copies are queued, their destination poisoned, and land at the wait that covers their group (a thread ending with
copies no wait covered ends the run); float16 conversions go through ``_Float16`` (round to nearest even, as PTX's
``cvt.rn``); the m16n8k8 TF32 ``mma.sync`` of the tensor-core GEMV kernel becomes a warp-wide exchange of fragments
(each lane's four accumulators from the warp's, in the PTX ISA's layout; the inputs' low 13 bits ignored, each exact
sum cut toward zero to float32 once: an idealisation of the truncation measured on older tensor cores, which also
drop addends' low bits while aligning them); the m16n8k16 float64 ``mma.sync`` (``mma="dmma"``) likewise, each sum
rounded to nearest in float64. Other inline PTX (the 16-bit mma.sync,
ldmatrix, wgmma, TMA) does not compile here.

A block's fibers run one at a time from barrier to barrier, each stretch in index order or in reverse (``order``:
"forward", "reverse", or "alternate" between the blocks of a run; the last to reach a barrier yields too, so the next
stretch starts from the first in that order), so a thread that reads shared memory another writes, with no barrier
between, reads the fill in one order or the other; the blocks run in grid order or reversed (``reverse_blocks``: which
block of a split-K group arrives last). A block whose fibers all wait at barriers none can pass (lanes that skip a full-mask shuffle) ends the
run with "deadlock". It runs in a subprocess with a time limit. Floating-point results follow the host's rounding
(no contraction into FMAs: ``-ffp-contract=off``), not the GPU's fused multiply-adds: compare with a tolerance, or bit
for bit only between two kernels run here that add the same products in the same order.
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import hashlib
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

HEADER = Path(__file__).with_name("host_cuda.h")
TIMEOUT_S = 300.0
FLAGS = ("-std=c++20", "-O1", "-ffp-contract=off", "-w")
ORDERS = {"alternate": "a", "forward": "f", "reverse": "r"}
_BUILT: dict[str, Path] = {}
_DIR = Path(tempfile.mkdtemp(prefix="tiledsl_host_cuda_"))
atexit.register(shutil.rmtree, _DIR, ignore_errors=True)


class HostRunError(RuntimeError):
    """The host compile or run of a kernel failed; ``stderr`` holds what the compiler or the run said."""

    def __init__(self, what: str, stderr: str) -> None:
        super().__init__(f"{what}: {stderr.strip()[-2000:]}")
        self.stderr = stderr


@functools.cache
def compiler() -> str | None:
    """The host C++ compiler (g++ on PATH) if it compiles what the header needs (C++20, ``_Float16``), else None."""
    gxx = shutil.which("g++")
    if gxx is None:
        return None
    probe = _DIR / "probe.cpp"
    probe.write_text("#include <atomic>\nint main() { _Float16 h = (_Float16)1.5f; float f = 0;"
                     " std::atomic_ref<float>(f).fetch_add((float)h); return f == 1.5f ? 0 : 1; }\n")
    run = subprocess.run([gxx, *FLAGS, "-o", str(_DIR / "probe"), str(probe)], capture_output=True, timeout=TIMEOUT_S)
    return gxx if run.returncode == 0 and subprocess.run([str(_DIR / "probe")], capture_output=True,
                                                         timeout=60).returncode == 0 else None


HOST_ASYNC_COPY = r"""// ---- host stand-ins for the cp.async helpers: queued, landing at the wait that covers their group ----
template <int BYTES>
inline void tdsl_cp_async(void* smem, const void* gmem, bool in_range) { host_cuda::cp_async(smem, gmem, BYTES, in_range); }
inline void tdsl_cp_async_commit() { host_cuda::cp_async_commit(); }
template <int PENDING>
inline void tdsl_cp_async_wait() { host_cuda::cp_async_wait(PENDING); }
"""

HOST_MMA_1688_TF32 = r"""// ---- host stand-in for the m16n8k8 TF32 mma.sync (a warp-wide exchange of fragments) ----
inline void tdsl_mma_1688_tf32(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                               unsigned b1) {
  host_cuda::mma_1688_tf32(d, {a0, a1, a2, a3}, {b0, b1});
}
"""

HOST_MMA_16816_F64 = r"""// ---- host stand-in for the m16n8k16 float64 mma.sync (a warp-wide exchange of fragments) ----
inline void tdsl_mma_16816_f64(double (&d)[4], const double (&a)[8], const double (&b)[4]) {
  host_cuda::mma_16816_f64(d, a, b);
}
"""

HOST_HALF = r"""// ---- host stand-ins for the float16 conversions (the bfloat16 ones are plain C++ and stay) ----
inline float tdsl_h2f(unsigned short h) { _Float16 v; std::memcpy(&v, &h, 2); return (float)v; }
inline unsigned short tdsl_f2h(float f) { const _Float16 v = (_Float16)f; unsigned short h; std::memcpy(&h, &v, 2); return h; }
"""

_EXTERN_SHARED = re.compile(r"extern\s+__shared__\s+(?:__align__\(\d+\)\s+)?(\w+)\s+(\w+)\[\];")
_SHARED = re.compile(r"__shared__\s+(?:__align__\(\d+\)\s+)?([A-Za-z_][\w ]*?)\s+(\w+)((?:\[[^\]]+\])*)\s*;")


def _host_helpers(source: str) -> str:
    """``source`` with the prelude's inline-PTX helpers (tiledsl.codegen.prelude) replaced by host versions."""
    from tiledsl.codegen import prelude
    from tiledsl.gemm.emit_gemv_mma import MMA_1688_TF32_HELPER, MMA_16816_F64_HELPER

    source = source.replace(prelude.ASYNC_COPY_HELPERS, HOST_ASYNC_COPY).replace(MMA_1688_TF32_HELPER, HOST_MMA_1688_TF32)
    source = source.replace(MMA_16816_F64_HELPER, HOST_MMA_16816_F64)
    half_asm = prelude.HALF_HELPERS[:prelude.HALF_HELPERS.index("__device__ __forceinline__ float tdsl_bf2f")]
    return source.replace(half_asm, HOST_HALF)


def _shared_memory(source: str) -> str:
    """Each ``__shared__`` declaration as the block's own poisoned storage (``host_cuda::shared_var``, one per site);
    dynamic shared memory as the block's buffer. ValueError for a declaration neither pattern reads."""
    source = _EXTERN_SHARED.sub(r"\1* const \2 = reinterpret_cast<\1*>(host_cuda::this_block->dynamic_smem());",
                                source)
    sites = iter(range(1 << 30))
    source = _SHARED.sub(lambda m: f"{m[1]} (&{m[2]}){m[3]} = host_cuda::shared_var<{m[1]}{m[3]}>({next(sites)});",
                         source)
    if "__shared__" in source:
        line = next(ln for ln in source.splitlines() if "__shared__" in ln)
        raise ValueError(f"a __shared__ declaration the host runner cannot read: {line.strip()}")
    return source


def _declarations(source: str, name: str) -> list[str]:
    """Kernel ``name``'s parameter declarations, in order, as written."""
    m = re.search(rf"\b{re.escape(name)}\(([^)]*)\)\s*\{{", source)
    if m is None:
        raise ValueError(f"kernel {name} not found in its source")
    return [d.strip() for d in m.group(1).replace("\n", " ").split(",") if d.strip()]


def _signature(source: str, name: str) -> list[str]:
    """The C types of kernel ``name``'s parameters, in order (``__restrict__`` dropped)."""
    types = []
    for decl in _declarations(source, name):
        decl = decl.replace("__restrict__", " ")
        types.append(re.sub(r"\s+", " ", decl[:re.search(r"\w+\s*$", decl).start()]).strip())
    return types


def host_source(source: str, name: str, header: Path = HEADER) -> str:
    """The kernel ``name``'s ``source`` as host C++: the header, the prelude's inline-PTX helpers as host code, shared
    memory per block, and a ``main`` that reads the arguments from a manifest, launches and writes the buffers back."""
    body = _shared_memory(_host_helpers(source))
    types = _signature(source, name)
    args = ", ".join(f"a{i}" for i in range(len(types)))
    fetch = "\n".join(f"  const auto a{i} = m.next<{t}>();" for i, t in enumerate(types))
    return (f'#include "{header}"\n{body}\n'
            "int main(int argc, char** argv) {\n"
            "  if (argc != 2) return 2;\n"
            "  host_cuda::Manifest m(argv[1]);\n"
            f"{fetch}\n"
            f"  host_cuda::launch(m.grid, m.block, m.smem, [&] {{ {name}({args}); }}, m.fiber_order, m.reverse_blocks);\n"
            "  m.write_back();\n"
            "  return 0;\n"
            "}\n")


def _header() -> Path:
    """The header, copied beside its precompiled form (built once per process: it halves each kernel's compile)."""
    copy = _DIR / HEADER.name
    if not copy.exists():
        copy.write_text(HEADER.read_text())
        _compile([*FLAGS, "-x", "c++-header", str(copy), "-o", f"{copy}.gch"], "the header")
    return copy


def _compile(args: list[str], what: str) -> None:
    run = subprocess.run([compiler() or "g++", *args], capture_output=True, text=True, timeout=TIMEOUT_S)
    if run.returncode != 0:
        raise HostRunError(f"g++ could not compile {what}", run.stderr)


def build(source: str, name: str) -> Path:
    """Compile kernel ``name`` of ``source`` into an executable (cached by the text); HostRunError on failure."""
    text = host_source(source, name, _header())
    key = hashlib.sha256(text.encode()).hexdigest()[:24]
    if key not in _BUILT:
        cpp, exe = _DIR / f"{key}.cpp", _DIR / f"{key}.exe"
        cpp.write_text(text)
        _compile([*FLAGS, "-o", str(exe), str(cpp)], name)
        _BUILT[key] = exe
    return _BUILT[key]


INT_RANGES = {"int": (-2**31, 2**31 - 1), "unsigned int": (0, 2**32 - 1), "unsigned": (0, 2**32 - 1),
              "long long": (-2**63, 2**63 - 1), "long": (-2**63, 2**63 - 1), "unsigned long long": (0, 2**64 - 1),
              "size_t": (0, 2**64 - 1)}
"""The integer parameter types the host runner passes, with the values each holds (LP64, as nvcc's device side)."""


def _token(c_type: str, value) -> str:
    base = c_type.replace("const ", "").strip()
    if base == "float":
        return f"f {np.float32(value).view(np.uint32):x}"
    if base == "double":
        return f"d {np.float64(value).view(np.uint64):x}"
    if base in INT_RANGES:
        if int(value) != value:
            raise TypeError(f"{c_type} parameter given {value!r}, not an integer")
        lo, hi = INT_RANGES[base]
        if not lo <= int(value) <= hi:  # the kernel would see it wrapped
            raise ValueError(f"{c_type} parameter given {int(value)}, outside its range {lo}..{hi}")
        return f"i {int(value)}"
    raise TypeError(f"a {c_type} parameter: the host runner passes pointers, integers, float and double")


def launch(source: str, name: str, grid: tuple[int, int, int], block: tuple[int, int, int], smem_bytes: int,
           args: list, order: str = "alternate", reverse_blocks: bool = False) -> None:
    """Run kernel ``name`` of ``source`` over ``grid`` × ``block`` with ``smem_bytes`` of dynamic shared memory on
    ``args`` (one per parameter: a C-contiguous NumPy array for a pointer, written back in place, None for a nullptr;
    a number otherwise). ``order``: the fibers of a block resumed "forward", "reverse" or "alternate" (reversed in
    every other block); ``reverse_blocks``: the last block of the grid first.

    Raises:
        HostRunError: the host compile or the run failed (a crash, an access past a buffer, a deadlock).
        subprocess.TimeoutExpired: the run took over :data:`TIMEOUT_S`.
        ValueError / TypeError: arguments that do not fit the kernel's parameters.
    """
    exe = build(source, name)
    types = _signature(source, name)
    if len(args) != len(types):
        raise ValueError(f"{name} takes {len(types)} arguments, got {len(args)}")
    arrays = list({id(a): a for a in args if isinstance(a, np.ndarray)}.values())  # each buffer once
    restricted = [i for i, (d, a) in enumerate(zip(_declarations(source, name), args, strict=True))
                  if isinstance(a, np.ndarray) and "__restrict__" in d]
    for i in restricted:  # __restrict__ promises no other pointer reaches the buffer: aliasing there is undefined
        others = [j for j in restricted if j != i and args[j] is args[i]]
        if others and not all(types[j].lstrip().startswith("const") for j in (i, *others)):
            raise ValueError(f"{name}: the same array for __restrict__ parameters {i} and {others[0]} "
                             f"({types[i]}, {types[others[0]]}), one of them written: undefined in CUDA")
    for i, a in enumerate(arrays):
        if not a.flags.c_contiguous:
            raise ValueError("arrays passed to a host launch must be C-contiguous")
        if any(np.shares_memory(a, b) for b in arrays[:i]):
            raise ValueError("two arguments share memory: the host runner copies each array on its own")
    with tempfile.TemporaryDirectory(dir=_DIR) as tmp:
        names = [f"buf{i}.bin" for i in range(len(arrays))]
        for nm, a in zip(names, arrays, strict=True):
            (Path(tmp) / nm).write_bytes(a.tobytes())
        tokens = [f"grid {grid[0]} {grid[1]} {grid[2]}", f"block {block[0]} {block[1]} {block[2]}",
                  f"smem {smem_bytes}", f"order {ORDERS[order]} {'reverse' if reverse_blocks else 'forward'}",
                  f"buffers {len(arrays)}", *(f"{nm} {a.nbytes}" for nm, a in zip(names, arrays, strict=True)),
                  "args"]
        for t, a in zip(types, args, strict=True):
            if isinstance(a, np.ndarray):
                tokens.append(f"p {next(i for i, b in enumerate(arrays) if b is a) + 1}")
            elif a is None:
                tokens.append("p 0")
            elif "*" in t:
                raise TypeError(f"{name}: a pointer parameter ({t}) takes an array or None, not {a!r}")
            else:
                tokens.append(_token(t, a))
        (Path(tmp) / "manifest.txt").write_text("\n".join(tokens) + "\n")
        run = subprocess.run([str(exe), "manifest.txt"], cwd=tmp, capture_output=True, text=True, timeout=TIMEOUT_S)
        if run.returncode != 0:
            raise HostRunError(f"{name} failed on the host (exit status {run.returncode})", run.stderr)
        for nm, a in zip(names, arrays, strict=True):
            a[...] = np.frombuffer((Path(tmp) / nm).read_bytes(), dtype=a.dtype).reshape(a.shape)


def _poisoned(ws) -> np.ndarray:
    """A plan's scratch buffer as a launch makes it: "none" poisoned (NaN, or the dtype's largest value), the rest as
    its init says ("zero" and "counters" zero, "identity" its fill)."""
    dt = np.dtype(ws.dtype)
    if ws.init == "none":
        return np.full(ws.count, np.nan if dt.kind == "f" else np.iinfo(dt).max, dtype=dt)
    return np.full(ws.count, ws.fill if ws.init == "identity" else 0, dtype=dt)


def run(family, op, schedule, values: dict, target=None, order: str = "alternate", reverse_blocks: bool = False,
        edit=None) -> dict:
    """``schedule``'s kernels for ``op`` (a :class:`tiledsl.family.Family`'s: its main kernel, then the followup
    where the plan has one), run here on the host (``order``, ``reverse_blocks``: :func:`launch`; ``edit``: a function
    of the main kernel's source returning the source to run instead, e.g. one broken on purpose). ``values`` binds
    each parameter's source (``Param.source``: "a", "x", "lda", "alpha", ...) to a NumPy array (written in place) or a
    number; "const" parameters take the plan's value, a workspace the plan names is made here (:func:`_poisoned`), and
    a pointer bound to nothing is a nullptr. Returns the workspaces by name, as the kernels leave them."""
    import tiledsl

    target = target or tiledsl.Target.known("H200")
    plan = family.plan(op, schedule, target)
    wss = {ws.name: _poisoned(ws) for ws in plan.workspace}
    bound = {**values, **wss}
    main = family.emit(op, schedule)
    if edit is not None:
        main = dataclasses.replace(main, source=edit(main.source))
    kernels = [(main, plan)]
    if plan.followup is not None:
        kernels.append((family.emit_followup(op, schedule), plan.followup))
    for ks, p in kernels:
        args = [q.value if q.source == "const" else bound.get(q.source) for q in p.params]
        missing = [q.name for q, a in zip(p.params, args, strict=True) if a is None and "*" not in q.c_type]
        if missing:
            raise ValueError(f"{ks.name}: no value for {missing}")
        launch(ks.source, ks.name, p.grid, ks.block, ks.dynamic_smem_bytes, args, order, reverse_blocks)
    return wss


def gemm(op, schedule, a: np.ndarray, b: np.ndarray, c: np.ndarray, alpha: float = 1.0, beta: float = 0.0,
         target=None, order: str = "alternate", reverse_blocks: bool = False, edit=None) -> dict:
    """C = alpha·A@B + beta·C by ``schedule``'s kernels for ``op`` (:func:`run`): ``a``, ``b`` and ``c`` are the
    operands' storage (row-major M×K / K×N / M×N arrays or, for a column-major layout, the transposed ones; leading
    dimensions their row lengths), ``c`` written in place."""
    from tiledsl.gemm.family import GEMM

    return run(GEMM, op, schedule, {"a": a, "b": b, "c": c, "alpha": alpha, "beta": beta, "one": 1.0, "m": op.m,
                                    "n": op.n, "k": op.k, "lda": a.shape[1], "ldb": b.shape[1], "ldc": c.shape[1]},
               target, order, reverse_blocks, edit)

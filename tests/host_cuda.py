"""Run an emitted CUDA kernel's own source on the CPU, for the tests: the CI machine has no GPU, and a kernel's
control flow (which row of B a ring slot holds, which slice a block owns, which lane stores) is what a compile check
cannot see.

The source is compiled by the host C++ compiler (g++, C++20) against ``host_cuda.h``: each CUDA thread of a block a
fiber (ucontext) of one OS thread, blocks one after another, ``__syncthreads`` a barrier, warp shuffles exchanged
through a barrier of the warp's lanes, ``__shared__`` variables function-static, dynamic shared memory a buffer of
0xff bytes (NaN as float32). It runs in a subprocess with a time limit; a block whose threads all wait at barriers
none can pass (lanes that skip a shuffle) ends the run with an error. Floating-point results follow the host's rounding (x86-64 SSE: no contraction into FMAs at -O1 with
``-ffp-contract=off``), not the GPU's fused multiply-adds: compare with a tolerance, not bit for bit, except between
two kernels run here that add the same products in the same order. Kernels with inline PTX (cp.async, mma, cvt) do
not compile here. A block's threads run one after another up to each barrier, so a thread that reads shared memory
another thread writes later, with no barrier between, reads the fill and the result is wrong; a thread overwriting
what another has yet to read (no barrier before the write) is not caught.
"""

from __future__ import annotations

import atexit
import hashlib
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

HEADER = Path(__file__).with_name("host_cuda.h")
TIMEOUT_S = 300.0
_BUILT: dict[str, Path] = {}
_DIR = Path(tempfile.mkdtemp(prefix="tiledsl_host_cuda_"))
atexit.register(shutil.rmtree, _DIR, ignore_errors=True)


def compiler() -> str | None:
    """The host C++ compiler (g++ on PATH), or None."""
    return shutil.which("g++")


def _signature(source: str, name: str) -> list[str]:
    """The C types of kernel ``name``'s parameters, in order (``__restrict__`` dropped)."""
    m = re.search(rf"\b{re.escape(name)}\(([^)]*)\)\s*\{{", source)
    if m is None:
        raise ValueError(f"kernel {name} not found in its source")
    types = []
    for decl in (d.strip() for d in m.group(1).replace("\n", " ").split(",") if d.strip()):
        decl = decl.replace("__restrict__", " ")
        types.append(re.sub(r"\s+", " ", decl[:re.search(r"\w+\s*$", decl).start()]).strip())
    return types


HOST_ASYNC_COPY = r"""// ---- host stand-ins for the cp.async helpers: each copy lands at once (a valid order of the real ones) ----
template <int BYTES>
inline void tdsl_cp_async(void* smem, const void* gmem, bool in_range) {
  if (in_range) std::memcpy(smem, gmem, BYTES); else std::memset(smem, 0, BYTES);
}
inline void tdsl_cp_async_commit() {}
template <int PENDING>
inline void tdsl_cp_async_wait() {}
"""

HOST_HALF = r"""// ---- host stand-ins for the float16 conversions (the bfloat16 ones are plain C++ and stay) ----
inline float tdsl_h2f(unsigned short h) { _Float16 v; std::memcpy(&v, &h, 2); return (float)v; }
inline unsigned short tdsl_f2h(float f) { const _Float16 v = (_Float16)f; unsigned short h; std::memcpy(&h, &v, 2); return h; }
"""


def _host_helpers(source: str) -> str:
    """``source`` with the prelude's inline-PTX helpers (tiledsl.codegen.prelude) replaced by host versions: cp.async
    copies as immediate copies, the float16 conversions through ``_Float16`` (round to nearest even, as PTX's cvt.rn)."""
    from tiledsl.codegen import prelude

    source = source.replace(prelude.ASYNC_COPY_HELPERS, HOST_ASYNC_COPY)
    half_asm = prelude.HALF_HELPERS[:prelude.HALF_HELPERS.index("__device__ __forceinline__ float tdsl_bf2f")]
    return source.replace(half_asm, HOST_HALF)


def host_source(source: str, name: str, header: Path = HEADER) -> str:
    """The kernel ``name``'s ``source`` as host C++: the header, the prelude's inline-PTX helpers as host code,
    dynamic shared memory as the block's buffer, and a ``main`` that reads the arguments from a manifest, launches and
    writes the buffers back."""
    source = _host_helpers(source)
    body = re.sub(r"extern\s+__shared__\s+(?:__align__\(\d+\)\s+)?(\w+)\s+(\w+)\[\];",
                  r"\1* const \2 = reinterpret_cast<\1*>(host_cuda::this_block->dynamic_smem());", source)
    types = _signature(source, name)
    args = ", ".join(f"a{i}" for i in range(len(types)))
    fetch = "\n".join(f"  const auto a{i} = m.next<{t}>();" for i, t in enumerate(types))
    return (f'#include "{header}"\n{body}\n'
            "int main(int argc, char** argv) {\n"
            "  if (argc != 2) return 2;\n"
            "  host_cuda::Manifest m(argv[1]);\n"
            f"{fetch}\n"
            f"  host_cuda::launch(m.grid, m.block, m.smem, [&] {{ {name}({args}); }});\n"
            "  m.write_back();\n"
            "  return 0;\n"
            "}\n")


FLAGS = ("-std=c++20", "-O1", "-ffp-contract=off", "-pthread", "-w")


def _header() -> Path:
    """The header, copied beside its precompiled form (built once per process: it halves each kernel's compile)."""
    copy = _DIR / HEADER.name
    if not copy.exists():
        copy.write_text(HEADER.read_text())
        subprocess.run([compiler() or "g++", *FLAGS, "-x", "c++-header", str(copy), "-o", f"{copy}.gch"],
                       check=True, capture_output=True, text=True, timeout=TIMEOUT_S)
    return copy


def build(source: str, name: str) -> Path:
    """Compile kernel ``name`` of ``source`` into an executable (cached by the text); CalledProcessError on failure."""
    text = host_source(source, name, _header())
    key = hashlib.sha256(text.encode()).hexdigest()[:24]
    if key not in _BUILT:
        cpp, exe = _DIR / f"{key}.cpp", _DIR / f"{key}.exe"
        cpp.write_text(text)
        subprocess.run([compiler() or "g++", *FLAGS, "-o", str(exe), str(cpp)], check=True, capture_output=True,
                       text=True, timeout=TIMEOUT_S)
        _BUILT[key] = exe
    return _BUILT[key]


def _token(c_type: str, value) -> str:
    if "*" in c_type:
        raise TypeError(f"a pointer parameter ({c_type}) takes an array or None")
    if c_type == "float":
        return f"f {np.float32(value).view(np.uint32):x}"
    if c_type == "double":
        return f"d {np.float64(value).view(np.uint64):x}"
    return f"i {int(value)}"


def launch(source: str, name: str, grid: tuple[int, int, int], block: tuple[int, int, int], smem_bytes: int,
           args: list) -> None:
    """Run kernel ``name`` of ``source`` over ``grid`` × ``block`` with ``smem_bytes`` of dynamic shared memory on
    ``args`` (one per parameter: a NumPy array for a pointer, written back in place, None for a nullptr; a number
    otherwise).

    Raises:
        subprocess.CalledProcessError: the host compile or the run failed (a crash, an out-of-range access the
            host catches); subprocess.TimeoutExpired: the run took over :data:`TIMEOUT_S`.
    """
    exe = build(source, name)
    types = _signature(source, name)
    if len(args) != len(types):
        raise ValueError(f"{name} takes {len(types)} arguments, got {len(args)}")
    with tempfile.TemporaryDirectory(dir=_DIR) as tmp:
        arrays = list({id(a): a for a in args if isinstance(a, np.ndarray)}.values())  # each buffer once
        paths = []
        for i, a in enumerate(arrays):
            if not a.flags.c_contiguous:
                raise ValueError("arrays passed to a host launch must be C-contiguous")
            paths.append(Path(tmp) / f"buf{i}.bin")
            paths[-1].write_bytes(a.tobytes())
        tokens = [f"grid {grid[0]} {grid[1]} {grid[2]}", f"block {block[0]} {block[1]} {block[2]}",
                  f"smem {smem_bytes}", f"buffers {len(arrays)}"]
        tokens += [f"{p} {a.nbytes}" for p, a in zip(paths, arrays, strict=True)]
        tokens.append("args")
        for t, a in zip(types, args, strict=True):
            if isinstance(a, np.ndarray):
                tokens.append(f"p {next(i for i, b in enumerate(arrays) if b is a) + 1}")
            elif a is None:
                tokens.append("p 0")
            else:
                tokens.append(_token(t, a))
        manifest = Path(tmp) / "manifest.txt"
        manifest.write_text("\n".join(tokens) + "\n")
        subprocess.run([str(exe), str(manifest)], check=True, capture_output=True, text=True, timeout=TIMEOUT_S)
        for p, a in zip(paths, arrays, strict=True):
            a[...] = np.frombuffer(p.read_bytes(), dtype=a.dtype).reshape(a.shape)


_WORKSPACE_INIT = {"none": lambda ws: np.full(ws.count, np.nan if ws.dtype.startswith("float") else -1, dtype=ws.dtype),
                   "zero": lambda ws: np.zeros(ws.count, dtype=ws.dtype),
                   "counters": lambda ws: np.zeros(ws.count, dtype=ws.dtype),
                   "identity": lambda ws: np.full(ws.count, ws.fill, dtype=ws.dtype)}
"""A plan's scratch buffer as a launch makes it: "none" poisoned (NaN, or all bits set), the rest as its init says."""


def run(family, op, schedule, values: dict, target=None) -> dict:
    """``schedule``'s kernels for ``op`` (a :class:`tiledsl.family.Family`'s: its main kernel, then the followup
    where the plan has one), run here on the host. ``values`` binds each parameter's source (``Param.source``: "a",
    "x", "lda", "alpha", ...) to a NumPy array (written in place) or a number; "const" parameters take the plan's
    value, a workspace the plan names is made here (:data:`_WORKSPACE_INIT`), and a pointer bound to nothing is a
    nullptr. Returns the workspaces by name, as the kernels leave them."""
    import tiledsl

    target = target or tiledsl.Target.known("H200")
    plan = family.plan(op, schedule, target)
    wss = {ws.name: _WORKSPACE_INIT[ws.init](ws) for ws in plan.workspace}
    bound = {**values, **wss}
    kernels = [(family.emit(op, schedule), plan)]
    if plan.followup is not None:
        kernels.append((family.emit_followup(op, schedule), plan.followup))
    for ks, p in kernels:
        args = [q.value if q.source == "const" else bound.get(q.source) for q in p.params]
        missing = [q.name for q, a in zip(p.params, args, strict=True) if a is None and "*" not in q.c_type]
        if missing:
            raise ValueError(f"{ks.name}: no value for {missing}")
        launch(ks.source, ks.name, p.grid, ks.block, ks.dynamic_smem_bytes, args)
    return wss


def gemm(op, schedule, a: np.ndarray, b: np.ndarray, c: np.ndarray, alpha: float = 1.0, beta: float = 0.0,
         target=None) -> dict:
    """C = alpha·A@B + beta·C by ``schedule``'s kernels for ``op`` (:func:`run`): ``a``, ``b`` and ``c`` are the
    operands' storage (row-major M×K / K×N / M×N arrays or, for a column-major layout, the transposed ones; leading
    dimensions their row lengths), ``c`` written in place."""
    from tiledsl.gemm.family import GEMM

    return run(GEMM, op, schedule, {"a": a, "b": b, "c": c, "alpha": alpha, "beta": beta, "one": 1.0, "m": op.m,
                                    "n": op.n, "k": op.k, "lda": a.shape[1], "ldb": b.shape[1], "ldc": c.shape[1]},
               target)

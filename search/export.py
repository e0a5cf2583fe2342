"""``--export DIR``: the winner as a standalone ``kernel.cu`` and a ``schedule.json`` record.

``kernel.cu`` is the emitted source (exactly what NVRTC compiled) followed by a host launcher inside
``#ifndef __CUDACC_RTC__``, so the same file compiles with ``nvcc -arch=sm_90 -c kernel.cu`` (kernel
and launcher) and with NVRTC (kernel only). The launcher sets the dynamic shared-memory attribute
when the kernel needs more than 48 KiB and launches on a given stream. GEMM's launcher computes its
grid from M and N; the others launch the grid of the tuned shape on the tuned device (reduce:
``tiledsl.reduce.plan``, transpose: ``tiledsl.transpose.grid``), and their comments give the
argument values and scratch buffers (``search.families``: ``launch_grid``, ``launch_notes``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tiledsl import dtypes
from tiledsl.filestore import atomic_write
from tiledsl.gemm.kernel_plan import gemv_columns_per_block, k_major, tma_box, uses_tma

from .config import TuneConfig
from .families import get, op_text, rows_instead, rows_unused
from .finalists import Finalist
from .space import searches_dmma
from .storage import mask, mask_text


def nvcc_command(arch: str) -> str:
    """The nvcc command compiling kernel.cu for ``arch``: an arch-specific target (sm_90a: wgmma, setmaxnreg)
    needs the ``-gencode`` form (nvcc's ``-arch=sm_90a`` also builds generic compute_90 PTX, which rejects
    them)."""
    if arch.endswith("a"):
        return f"nvcc -gencode=arch=compute_{arch[3:]},code={arch} -c kernel.cu"
    return f"nvcc -arch={arch} -c kernel.cu"


def kernel_params(source: str, name: str) -> list[tuple[str, str]]:
    """(declaration, name) of each parameter of kernel ``name`` in ``source``.

    Raises:
        ValueError: the kernel's signature is not found.
    """
    start = source.find(name + "(")
    if start < 0 or "__global__" not in source[:start]:
        raise ValueError(f"kernel {name!r} not found in the source")
    i = start + len(name) + 1
    depth, j = 1, i
    while depth and j < len(source):
        depth += {"(": 1, ")": -1}.get(source[j], 0)
        j += 1
    text = re.sub(r"//[^\n]*", "", source[i:j - 1]).replace("\n", " ")
    params = [p.strip() for p in text.split(",") if p.strip()]
    return [(p, re.findall(r"\w+", p)[-1]) for p in params]


def launcher(family: str, op, schedule, kernel, target=None) -> str:
    """C++ host code launching ``kernel`` (a :class:`tiledsl.Kernel`) on a stream.

    ``target`` (a :class:`tiledsl.Target`) is the device the grid of a non-GEMM launcher is planned for
    (default: the known H200, tiledsl's reference device).
    """
    params = kernel_params(kernel.source, kernel.name)
    if family == "gemm" and uses_tma(schedule):
        if schedule.split_k != 1:
            raise ValueError(f"no host launcher for a TMA kernel with split_k={schedule.split_k}")
        return _frame(kernel, *_tma_parts(op, schedule, params))
    if family == "gemm" and schedule.split_k != 1 and not schedule.split_k_fused:
        return _frame(kernel, *_splitk_parts(op, schedule, params))
    if family == "gemm" and schedule.stream_k:
        return _frame(kernel, *_stream_k_parts(kernel, params))
    if family == "gemm" and schedule.split_k_fused:
        return _frame(kernel, *_fused_split_k_parts(op, schedule, params))
    decl = ",\n    ".join(p for p, _ in params)
    names = ", ".join(n for _, n in params)
    notes: list[str] = []
    if family == "gemm":
        grid = _gemm_grid(op, schedule)
    else:
        fam = get(family)
        if target is None:
            import tiledsl

            target = tiledsl.Target.known("H200")
        g = fam.launch_grid(op, schedule, target)
        grid = f"dim3 grid({g[0]}u, {g[1]}u, {g[2]}u);  // the grid of the tuned shape on {target.name}"
        notes = fam.launch_notes(op, schedule, target) if fam.launch_notes else []
    return _frame(kernel, decl, names, grid, notes)


_GEMM_GRID = "dim3 grid((unsigned)(((M + BM - 1) / BM) * ((N + BN - 1) / BN)), 1, 1);  // one block per BMxBN tile"


def _gemm_grid(op, schedule) -> str:
    """The GEMM launcher's grid statement, the same formula as ``tiledsl.gemm.kernel_plan.grid`` in C."""
    if schedule.kernel == "gemv":
        cols = gemv_columns_per_block(op, schedule)
        return (f"dim3 grid((unsigned)((N + {cols} - 1) / {cols}), SPLIT_K, (unsigned)((M + BM - 1) / BM));"
                f"  // {cols} columns per block, K slices, BM-row groups")
    if schedule.split_k != 1:
        return ("dim3 grid((unsigned)(((M + BM - 1) / BM) * ((N + BN - 1) / BN)), SPLIT_K, 1);"
                "  // one block per BMxBN tile and K slice")
    return _GEMM_GRID


_SPLITK_ARGS = {  # plan parameter source -> the split-K launcher's C expression for it
    "a": "A", "b": "B", "c": "C", "workspace": "workspace", "m": "M", "n": "N", "k": "K", "lda": "lda",
    "ldb": "ldb", "ldc": "ldc", "alpha": "alpha", "beta": "beta", "one": "1.0f"}


def _splitk_parts(op, schedule, params: list[tuple[str, str]]) -> tuple:
    """(decl, names, grid, notes, includes, epilogue) of a split-K GEMM's launcher: the main kernel writes
    float32 partial products of each K slice into the caller's workspace; the reduction kernel (appended to
    the file) sums them in a fixed order into C and applies alpha (and beta)."""
    from tiledsl.gemm.emit import emit_splitk_reduce
    from tiledsl.gemm.kernel_plan import plan_gemm, splitk_reduce_plan

    main = plan_gemm(op, schedule)
    red = splitk_reduce_plan(op, schedule, None)
    red_params = kernel_params(emit_splitk_reduce(op, schedule).source, red.kernel_name)
    user_c = next(p for p, n in red_params if n == "C")
    by_name = dict((n, p) for p, n in params)
    decl = ",\n    ".join([by_name["A"], by_name["B"], user_c, by_name["M"], by_name["N"], by_name["K"],
                           by_name["lda"], by_name["ldb"], "long long ldc", "float alpha",
                           *(["float beta"] if op.read_c else []), "float* workspace"])
    # each kernel's arguments in its plan's parameter order, from the binding that fills each parameter
    names = ", ".join(_SPLITK_ARGS[p.source] for p in main.params)
    red_args = ", ".join(_SPLITK_ARGS[p.source] for p in red.params)
    notes = [f"split-K: workspace holds SPLIT_K * M * N floats ({schedule.split_k} float32 partial products of C, "
             "allocated by the caller, no initialisation needed);",
             f"{red.kernel_name} (below the main kernel) sums them in a fixed order into C: bitwise reproducible."]
    epilogue = (f"  {{\n    cudaError_t e = cudaGetLastError();\n    if (e != cudaSuccess) return e;\n  }}\n"
                f"  {red.kernel_name}<<<dim3((unsigned)(((long long)M * N + {red.block[0]} - 1) / {red.block[0]})), "
                f"dim3({red.block[0]}), 0, stream>>>({red_args});\n")
    return decl, names, _gemm_grid(op, schedule), notes, (), "", epilogue


def _fused_split_k_parts(op, schedule, params: list[tuple[str, str]]) -> tuple:
    """(decl, names, grid, notes, includes, prologue, epilogue, helpers) of a GEMV launcher whose kernel sums its
    own K slices (``split_k_fused``): the caller passes the partial-sum workspace W and the tickets with their sizes,
    which the launcher checks against ``tiledsl_split_k_workspace`` (also exported) before launching."""
    cols = gemv_columns_per_block(op, schedule)
    decl = ",\n    ".join([*(p for p, _ in params), "size_t w_bytes", "size_t tickets_bytes"])
    names = ", ".join(n for _, n in params)
    helpers = f"""// the scratch buffers tiledsl_launch needs for (M, N): W, SPLIT_K float32 partial sums of C (16-byte aligned, no
// initialisation needed), and tickets, one unsigned int per group of {cols} columns and BM rows (zeroed once before
// the first launch; every launch leaves them at zero); one pair per stream
extern "C" cudaError_t tiledsl_split_k_workspace(int M, int N, size_t* w_bytes, size_t* tickets_bytes) {{
  if (M < 0 || N < 0) return cudaErrorInvalidValue;
  *w_bytes = (size_t)SPLIT_K * M * N * sizeof(float);
  *tickets_bytes = (size_t)((N + {cols} - 1) / {cols}) * ((M + BM - 1) / BM) * sizeof(unsigned int);
  return cudaSuccess;
}}

"""
    prologue = """  size_t w_need = 0, tickets_need = 0;
  const cudaError_t e_ws = tiledsl_split_k_workspace(M, N, &w_need, &tickets_need);
  if (e_ws != cudaSuccess) return e_ws;
  if (w_bytes < w_need || tickets_bytes < tickets_need || ((size_t)W & 15) != 0)
    return cudaErrorInvalidValue;  // smaller than tiledsl_split_k_workspace says, or W not 16-byte aligned
"""
    notes = ["split-K, fused: size W and tickets with tiledsl_split_k_workspace (above); zero tickets once before the "
             "first launch; use one pair of buffers per stream (a CUDA graph: the stream it replays on)."]
    return decl, names, _gemm_grid(op, schedule), notes, (), prologue, "", helpers


def _stream_k_parts(kernel, params: list[tuple[str, str]]) -> tuple:
    """(decl, names, grid, notes, includes, prologue, epilogue, helpers) of a stream-K GEMM's launcher: it divides
    the tiles as ``tiledsl.gemm.kernel_plan.stream_k_split`` does, for the device's SMs and the kernel's occupancy,
    and refuses buffers smaller than ``tiledsl_stream_k_workspace`` (also exported) says they must be."""
    from tiledsl.gemm.kernel_plan import STREAM_K_MAX_SHARE

    smem = kernel.dynamic_smem_bytes
    decl = ",\n    ".join([*(p for p, n in params if n not in ("dp_tiles", "sk_blocks")),
                           "size_t partials_bytes", "size_t tickets_bytes"])
    names = ", ".join(n for _, n in params)
    helpers = f"""// stream-K work division (tiledsl.gemm.kernel_plan.stream_k_split): whole waves of tiles run one block each
// over all of K; the last full wave and the partial one are shared by one block per slot (SMs x resident blocks)
static cudaError_t tdsl_stream_k_split(int M, int N, int K, long long* dp, long long* sk, long long* sk_tiles) {{
  const size_t smem_bytes = {smem};
  int device = 0, sms = 0, resident = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e == cudaSuccess && smem_bytes > 48 * 1024)
    e = cudaFuncSetAttribute({kernel.name}, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_bytes);
  if (e == cudaSuccess)
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, {kernel.name}, {kernel.block[0]}, smem_bytes);
  if (e != cudaSuccess) return e;
  const long long tiles = (long long)((M + BM - 1) / BM) * ((N + BN - 1) / BN);
  const long long k_iters = (K + BK - 1) / BK;
  const long long slots = (long long)sms * (resident > 0 ? resident : 1);
  *dp = tiles;
  *sk = 0;
  if (tiles % slots) {{
    const long long full = tiles / slots;
    *dp = full ? (full - 1) * slots : 0;
    *sk = full ? slots : (slots < tiles * {STREAM_K_MAX_SHARE} ? slots : tiles * {STREAM_K_MAX_SHARE});
    if (*sk > (tiles - *dp) * k_iters) *sk = (tiles - *dp) * k_iters;  // every block's share is non-empty
  }}
  *sk_tiles = tiles - *dp;
  return cudaSuccess;
}}

// the scratch buffers tiledsl_launch needs for (M, N, K) on the current device: partials (float32) and tickets
// (unsigned int, zeroed once before the first launch; every launch leaves them at zero); one pair per stream
extern "C" cudaError_t tiledsl_stream_k_workspace(int M, int N, int K, size_t* partials_bytes, size_t* tickets_bytes) {{
  long long dp = 0, sk = 0, sk_tiles = 0;
  const cudaError_t e = tdsl_stream_k_split(M, N, K, &dp, &sk, &sk_tiles);
  if (e != cudaSuccess) return e;
  *partials_bytes = (size_t)(2 * sk * BM * BN) * sizeof(float);
  *tickets_bytes = (size_t)sk_tiles * sizeof(unsigned int);
  return cudaSuccess;
}}

"""
    prologue = """  long long dp = 0, sk = 0, sk_tiles = 0;
  const cudaError_t e_sk = tdsl_stream_k_split(M, N, K, &dp, &sk, &sk_tiles);
  if (e_sk != cudaSuccess) return e_sk;
  if (partials_bytes < (size_t)(2 * sk * BM * BN) * sizeof(float) || tickets_bytes < (size_t)sk_tiles * sizeof(unsigned int))
    return cudaErrorInvalidValue;  // smaller than tiledsl_stream_k_workspace says
  const int dp_tiles = (int)dp, sk_blocks = (int)sk;
"""
    notes = ["stream-K: size partials and tickets with tiledsl_stream_k_workspace (above); zero tickets once "
             "before the first launch; use one pair of buffers per stream (a CUDA graph: the stream it replays on)."]
    return (decl, names, "dim3 grid((unsigned)(dp + sk), 1, 1);  // data-parallel tiles + stream-K blocks", notes, (),
            prologue, "", helpers)


def _frame(kernel, decl: str, names: str, grid: str, notes: list[str], includes: tuple[str, ...] = (),
           prologue: str = "", epilogue: str = "", helpers: str = "") -> str:
    """The host launcher around a kernel: parameters ``decl``, ``prologue`` (statements preparing the
    kernel's arguments), the grid, the dynamic shared-memory attribute above 48 KiB, the launch of ``names``,
    ``epilogue`` (statements after it: split-K's reduction kernel); ``helpers``: host functions placed before it. The
    shared-memory attribute is set first, so a prologue may ask for the kernel's occupancy."""
    smem = kernel.dynamic_smem_bytes
    bx, by, bz = kernel.block
    head = "".join(f"#include <{h}>\n" for h in (*includes, "cuda_runtime.h"))
    note_text = "".join(f"// {line}\n" for line in notes)
    return f"""
#ifndef __CUDACC_RTC__
// ---- host launcher (nvcc only; NVRTC skips it) ----
{head}{helpers}// Launch configuration: block ({bx}, {by}, {bz}), dynamic shared memory {smem} bytes.
{note_text}extern "C" cudaError_t tiledsl_launch(
    {decl},
    cudaStream_t stream) {{
  const size_t smem_bytes = {smem};
  if (smem_bytes > 48 * 1024) {{
    cudaError_t e = cudaFuncSetAttribute({kernel.name}, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)smem_bytes);
    if (e != cudaSuccess) return e;
  }}
{prologue}  {grid}
  const dim3 block({bx}, {by}, {bz});
  {kernel.name}<<<grid, block, smem_bytes, stream>>>({names});
{epilogue}  return cudaGetLastError();
}}
#endif  // __CUDACC_RTC__
"""


_CU_TMA_DTYPE = {"float16": "CU_TENSOR_MAP_DATA_TYPE_FLOAT16", "bfloat16": "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16",
                 "float32": "CU_TENSOR_MAP_DATA_TYPE_FLOAT32"}

_TMA_ENCODER = """  static PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
  if (encode == nullptr) {
    cudaDriverEntryPointQueryResult found;
#if CUDART_VERSION >= 12050
    cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", (void**)&encode, 12000,
                                                     cudaEnableDefault, &found);
#else
    cudaError_t e = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", (void**)&encode, cudaEnableDefault, &found);
#endif
    if (e != cudaSuccess || found != cudaDriverEntryPointSuccess) return e != cudaSuccess ? e : cudaErrorNotSupported;
  }
  CUtensorMap maps[2];
"""


def _tma_parts(op, schedule, params: list[tuple[str, str]]) -> tuple:
    """(decl, names, grid, notes, includes, prologue) of a TMA GEMM kernel's launcher: it takes A and B as
    pointers with their leading dimensions and encodes the two tensor maps with the driver's
    ``cuTensorMapEncodeTiled`` (reached through ``cudaGetDriverEntryPoint``, so nothing links libcuda)."""
    dt = dtypes.get(op.dtype)
    t = dt.c_type
    rest = [(p, n) for p, n in params if n not in ("tmap_a", "tmap_b")]
    decl = ",\n    ".join([f"const {t}* A", f"const {t}* B", *(p for p, _ in rest[:4]), "long long lda",
                           "long long ldb", *(p for p, _ in rest[4:])])
    names = ", ".join(["tmap_a", "tmap_b", *(n for _, n in rest)])
    maps = []
    for which, ld, mn in (("A", "lda", "M"), ("B", "ldb", "N")):
        box_inner, box_outer, _ = tma_box(op, schedule, which)
        inner, outer = ("K", mn) if k_major(op, which) else (mn, "K")
        maps.append(
            f"  {{  // {which}: {'K' if k_major(op, which) else mn}-contiguous, boxes of {box_inner} x {box_outer}\n"
            f"    const cuuint64_t dims[2] = {{(cuuint64_t){inner}, (cuuint64_t){outer}}};\n"
            f"    const cuuint64_t pitch[1] = {{(cuuint64_t){ld} * {dt.itemsize}}};\n"
            f"    const cuuint32_t box[2] = {{{box_inner}u, {box_outer}u}}, one[2] = {{1u, 1u}};\n"
            f"    CUresult r = encode(&maps[{len(maps)}], {_CU_TMA_DTYPE[op.dtype]}, 2, (void*){which}, dims, pitch, box, "
            "one, CU_TENSOR_MAP_INTERLEAVE_NONE,\n"
            "                        CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, "
            "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);\n"
            "    if (r != CUDA_SUCCESS) return cudaErrorInvalidValue;\n"
            "  }\n")
    prologue = (_TMA_ENCODER + "".join(maps) + "  tdsl_tensor_map tmap_a, tmap_b;\n"
                "  std::memcpy(&tmap_a, &maps[0], sizeof(tmap_a));\n"
                "  std::memcpy(&tmap_b, &maps[1], sizeof(tmap_b));\n")
    notes = ["A and B reach the kernel as TMA tensor maps (128-byte swizzle, zeros outside the matrix), encoded "
             "here for each call."]
    grid = _GEMM_GRID
    if schedule.persistent:
        notes.append("persistent: one block per SM (at most one per C tile); each walks the C tiles "
                     "blockIdx.x, blockIdx.x + gridDim.x, ...")
        grid = _PERSISTENT_GRID
    return decl, names, grid, notes, ("cuda.h", "cudaTypedefs.h", "cstring"), prologue


_PERSISTENT_GRID = """int device = 0, sms = 0;
  cudaError_t e_sm = cudaGetDevice(&device);
  if (e_sm == cudaSuccess) e_sm = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e_sm != cudaSuccess) return e_sm;
  const long long tiles = (long long)((M + BM - 1) / BM) * ((N + BN - 1) / BN);
  dim3 grid((unsigned)(tiles < sms ? (tiles > 0 ? tiles : 1) : sms), 1, 1);  // persistent: one block per SM"""


def kernel_cu(family: str, op, schedule, kernel, header: list[str], target=None) -> str:
    """The text of ``kernel.cu``: comment header, the emitted source, the host launcher."""
    head = "".join(f"// {line}\n" for line in header)
    body = kernel.source.rstrip("\n") + "\n"
    if family == "gemm" and schedule.split_k != 1 and not uses_tma(schedule) and not schedule.split_k_fused:
        from tiledsl.gemm.emit import emit_splitk_reduce

        body += "\n" + emit_splitk_reduce(op, schedule, standalone=False).source.rstrip("\n") + "\n"
    return head + "\n" + body + launcher(family, op, schedule, kernel, target)


def write(dirpath: str | Path, family: str, op, schedule, kernel, record: dict, target=None) -> list[Path]:
    """Write ``kernel.cu`` and ``schedule.json`` into ``dirpath`` (created); return the paths.

    ``target``: the device the search ran for (the non-GEMM launchers' grid is planned for it).
    """
    d = Path(dirpath)
    d.mkdir(parents=True, exist_ok=True)
    header = [
        f"tiledsl {family} kernel exported by `python -m search.tune` ({record.get('mode')})",
        f"op: {json.dumps(op.to_dict())}",
        f"schedule: {json.dumps(schedule.to_dict())}",
        f"device: {record.get('device')}  arch: {kernel.arch}  NVRTC: {record.get('compiler', {}).get('nvrtc')}",
        f"compile: {nvcc_command(kernel.arch)}   (or NVRTC with {' '.join(kernel.options)})",
        f"launch: tiledsl_launch(...) below; block {kernel.block}, dynamic shared memory "
        f"{kernel.dynamic_smem_bytes} bytes",
    ]
    cu = d / "kernel.cu"
    atomic_write(cu, kernel_cu(family, op, schedule, kernel, header, target))  # a reader sees old or new, whole
    js = d / "schedule.json"
    atomic_write(js, json.dumps(record, indent=2, sort_keys=True, default=str) + "\n")
    return [cu, js]


def export_winner(cfg: TuneConfig, folder: str, op, target, winner: Finalist, vendor_s: float | None, mode: str,
                  study_name: str, model_label: str, date: str, out=print) -> list:
    """Compile the winner and write it into ``folder`` (:func:`write`); a measured winner is also stored where
    ``schedule=None`` finds it (and, with ``--ship``, in the shipped schedules). Returns the files written.

    A failure to store is printed as a warning: the export stands."""
    import cupy

    import tiledsl
    from tiledsl.compile import nvrtc_version
    from tiledsl.registry import make_record, shipped_path, store

    k = tiledsl.compile(op, winner.schedule, arch=target.arch)
    measured = None
    if mode == "measured":
        measured = {"median_s": winner.median_s, "spread": winner.spread, "vendor_s": vendor_s,
                    "percent_of_vendor": None if not vendor_s else 100 * vendor_s / winner.median_s}
    rec = make_record(cfg.family, op, target, winner.schedule,
                      mode=mode, measured=measured,
                      predicted={"predicted_s": winner.predicted_s, "bound_by": winner.bound_by, "model": model_label},
                      compiler={"nvrtc": list(nvrtc_version()), "cupy": cupy.__version__, "options": list(k.options)},
                      kernel={"name": k.name, "block": list(k.block), "dynamic_smem_bytes": k.dynamic_smem_bytes,
                              **k.resources()},
                      study=study_name, storage=mask(cfg.storage), trial=winner.number, date=date,
                      command=mask_text(cfg.command))
    files = write(folder, cfg.family, op, winner.schedule, k, rec, target=target)
    out(f"exported: {', '.join(map(str, files))}")
    rows = rows_instead(cfg.family, op, target)
    if mode == "measured" and rows is not None:
        out(f"not stored for schedule=None: it runs this product as the rows Cᵀ = Bᵀ·Aᵀ ({op_text(rows)}) on the "
            "GEMV-style kernel, which this op's tiled search space cannot express; a stored tiled record would replace "
            "that path untimed")
    elif mode == "measured" and (unused := rows_unused(cfg.family, op, target)) is not None:
        out(f"not stored for schedule=None: {unused}")
    elif mode == "measured" and (cfg.mma != "auto" or (winner.schedule.mma == "dmma"
                                                       and not searches_dmma(cfg.family, op, target))):
        out("not stored for schedule=None: --mma dmma searches the FP64 tensor-core GEMV space whatever schedule=None "
            "runs (a plain tune searches it, and stores its winner, where schedule=None runs that kernel on this "
            "device); time the exported schedule beside schedule=None (tiledsl.timing.time_gpu) and pass it as "
            "schedule= where it wins")
    elif mode == "measured":
        figs = {kk: rec[kk] for kk in ("mode", "measured", "predicted", "compiler", "date", "command")}
        try:
            path = store(cfg.family, op, target, winner.schedule, **figs)
            out(f"stored for schedule=None: {path}")
            if cfg.ship:
                ship = store(cfg.family, op, target, winner.schedule, path=shipped_path(cfg.family, target.arch),
                             **figs)
                out(f"shipped: {ship}")
        except Exception as exc:  # OSError, filelock.Timeout, a record failing its schema: the export stands
            out(f"warning: the winner was exported but not stored for schedule=None: {type(exc).__name__}: {exc}")
    else:
        out("not stored for schedule=None: a model-only winner is a prediction, never measured")
    return files

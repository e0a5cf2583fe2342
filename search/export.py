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

from .families import get


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
    decl = ",\n    ".join(p for p, _ in params)
    names = ", ".join(n for _, n in params)
    notes: list[str] = []
    if family == "gemm":
        grid = "dim3 grid((unsigned)(((M + BM - 1) / BM) * ((N + BN - 1) / BN)), 1, 1);  // one block per BMxBN tile"
    else:
        fam = get(family)
        if target is None:
            import tiledsl

            target = tiledsl.Target.known("H200")
        g = fam.launch_grid(op, schedule, target)
        grid = f"dim3 grid({g[0]}u, {g[1]}u, {g[2]}u);  // the grid of the tuned shape on {target.name}"
        notes = fam.launch_notes(op, schedule, target) if fam.launch_notes else []
    smem = kernel.dynamic_smem_bytes
    bx, by, bz = kernel.block
    note_text = "".join(f"// {line}\n" for line in notes)
    return f"""
#ifndef __CUDACC_RTC__
// ---- host launcher (nvcc only; NVRTC skips it) ----
#include <cuda_runtime.h>
// Launch configuration: block ({bx}, {by}, {bz}), dynamic shared memory {smem} bytes.
{note_text}extern "C" cudaError_t tiledsl_launch(
    {decl},
    cudaStream_t stream) {{
  {grid}
  const dim3 block({bx}, {by}, {bz});
  const size_t smem_bytes = {smem};
  if (smem_bytes > 48 * 1024) {{
    cudaError_t e = cudaFuncSetAttribute({kernel.name}, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)smem_bytes);
    if (e != cudaSuccess) return e;
  }}
  {kernel.name}<<<grid, block, smem_bytes, stream>>>({names});
  return cudaGetLastError();
}}
#endif  // __CUDACC_RTC__
"""


def kernel_cu(family: str, op, schedule, kernel, header: list[str], target=None) -> str:
    """The text of ``kernel.cu``: comment header, the emitted source, the host launcher."""
    head = "".join(f"// {line}\n" for line in header)
    return head + "\n" + kernel.source.rstrip("\n") + "\n" + launcher(family, op, schedule, kernel, target)


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
        f"compile: nvcc -arch={kernel.arch} -c kernel.cu   (or NVRTC with {' '.join(kernel.options)})",
        f"launch: tiledsl_launch(...) below; block {kernel.block}, dynamic shared memory "
        f"{kernel.dynamic_smem_bytes} bytes",
    ]
    cu = d / "kernel.cu"
    cu.write_text(kernel_cu(family, op, schedule, kernel, header, target))
    js = d / "schedule.json"
    js.write_text(json.dumps(record, indent=2, sort_keys=True, default=str) + "\n")
    return [cu, js]

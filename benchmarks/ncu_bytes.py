"""The cost model's bytes per memory level beside Nsight Compute's hardware counters, for the winners
(``schedule=None``, or tuned schedules from ``--schedules``) of the benchmark shapes.

Levels and counters (one profiled call of the case; every ``tiledsl_*`` kernel it launches is summed, so a
split-K GEMM's reduction kernel is included):

=================  ===============================================  ===========================================
level              measured (ncu metric)                            predicted (``tiledsl.explain``)
=================  ===============================================  ===========================================
DRAM read          ``dram__bytes_read.sum``                         ``levels["hbm"].bytes`` − DRAM write
DRAM write         ``dram__bytes_write.sum``                        the op's output bytes (C, the reduction's
                                                                    result, Y): the compulsory writes
L2 ↔ SM            ``lts__t_bytes.sum`` (every request reaching     ``levels["l2"].bytes``
                   the L2 tag stage: loads, stores, atomics)
shared memory      ``l1tex__data_pipe_lsu_wavefronts_mem_shared``   ``levels["smem"].moved_bytes`` (wavefront
                   ``.sum`` × 128 bytes                             bytes where the model simulates banks)
=================  ===============================================  ===========================================

Assumptions: one shared-memory wavefront moves 128 bytes (32 banks × 4 bytes; CUDA C++ Programming Guide,
"Shared Memory"), so measured shared bytes = wavefronts × 128 (:data:`WAVEFRONT_BYTES`). The LSU metric
counts the shared-memory loads and stores that threads issue; wgmma's operand reads and TMA's writes of shared
memory do not go through the LSU pipe, so for wgmma kernels the measured figure is expected to fall far below
what the model counts (the tensor cores' reads). Reductions have no shared-memory level in the model ("—").

Caches: ncu's default ``--cache-control all`` flushes and invalidates the caches before every profiled
kernel, so each kernel starts with a cold L2 and its DRAM reads include the compulsory input bytes; no
explicit L2 flush is needed (the command passes ``--cache-control all`` to make that visible).
``--clock-control none`` leaves the clocks as they are (byte counts do not depend on them).

Method: the parent resolves each case's schedule on the current GPU (``schedule=None`` → the family's
default, a tuned record first), computes the prediction, then runs
``ncu --clock-control none --cache-control all --metrics … --csv --print-units base --target-processes all
--profile-from-start off -k regex:tiledsl_ python benchmarks/ncu_bytes.py --child CASE --schedule JSON``.
The child makes the inputs, calls the public API once (compile + warm-up, not profiled), checks that the
call built exactly the case's op under that schedule, then profiles one more call between
``cudaProfilerStart``/``cudaProfilerStop``. The parent parses ncu's CSV and tabulates predicted vs measured
(ratio = measured / predicted).

Usage::

    python benchmarks/ncu_bytes.py --out benchmarks/results/ncu_bytes_h200.json      # GPU + ncu
    python benchmarks/ncu_bytes.py --schedules tuned.json --cases gemm_f32_4096       # tuned schedules
    python benchmarks/ncu_bytes.py --predict-only --device H200                       # the model only, no GPU

``--schedules FILE``: JSON object mapping a case name to a schedule dict (``GemmSchedule.to_dict()``), or to
``{"schedule": {...}}``; cases it does not name keep ``schedule=None``.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tiledsl  # noqa: E402
from tiledsl import dtypes  # noqa: E402
from tiledsl.gemm import GemmOp  # noqa: E402
from tiledsl.reduce import ReduceOp  # noqa: E402
from tiledsl.spec import widest_dividing  # noqa: E402
from tiledsl.transpose import TransposeOp  # noqa: E402

SCRIPT = "benchmarks/ncu_bytes.py"
WAVEFRONT_BYTES = 128
"""Bytes one shared-memory wavefront moves: 32 banks × 4 bytes (the assumption behind measured shared bytes)."""

METRICS = {
    "dram_read": "dram__bytes_read.sum",
    "dram_write": "dram__bytes_write.sum",
    "l2": "lts__t_bytes.sum",
    "smem_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
}
"""Level key -> Nsight Compute metric."""

LEVELS = ("dram_read", "dram_write", "dram_total", "l2", "smem")
"""Compared levels: predicted and measured bytes of each (``smem``: wavefront bytes)."""

LEVEL_TITLES = {"dram_read": "DRAM read", "dram_write": "DRAM write", "dram_total": "DRAM total",
                "l2": "L2↔SM (lts__t_bytes)", "smem": f"shared (wavefronts × {WAVEFRONT_BYTES})"}

KERNEL_FILTER = "regex:tiledsl_"
PERMISSION_ERROR = "ERR_NVGPUCTRPERM"
"""What ncu prints when the user may not read the performance counters (no case can then be measured)."""
CHILD_MARKER = "NCU_BYTES_CHILD "
"""Prefix of the one line the child prints (JSON: the case, op, schedule and device it ran)."""

_BYTE_UNITS = {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12,
               "KiB": 2.0**10, "MiB": 2.0**20, "GiB": 2.0**30}
_THOUSANDS = re.compile(r"^-?\d{1,3}(,\d{3})+(\.\d+)?$")
_REQUIRED_COLUMNS = ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value")


# ---------------------------------------------------------------- the cases


@dataclass(frozen=True)
class Case:
    """One benchmark shape.

    Attributes:
        name: the case's key (``--cases``, ``--child``, ``--schedules``).
        op: the op exactly as the public API builds it for fresh contiguous CuPy (torch for bfloat16)
            arrays; the child checks that the call built this op.
        note: one line for the table.
    """

    name: str
    op: object
    note: str

    @property
    def family(self) -> str:
        """"gemm", "reduce" or "transpose"."""
        return tiledsl.api.family_of(self.op).name


def gemm_case_op(m: int, n: int, k: int, dtype: str = "float32") -> GemmOp:
    """The GemmOp ``tiledsl.gemm(a, b, c)`` builds for fresh row-major A (m×k), B (k×n), C (m×n)."""
    e = dtypes.get(dtype).itemsize
    return GemmOp(m, n, k, dtype=dtype, align_a=widest_dividing(16 // e, k), align_b=widest_dividing(16 // e, n),
                  align_c=widest_dividing(16 // e, n))


def cases() -> dict[str, Case]:
    """The benchmark shapes, by name."""
    items = [
        Case("gemm_f32_4096", gemm_case_op(4096, 4096, 4096), "GEMM fp32 4096³"),
        Case("gemm_f32_1024", gemm_case_op(1024, 1024, 1024), "GEMM fp32 1024³"),
        Case("gemm_f32_35x8457x2560", gemm_case_op(35, 8457, 2560), "GEMM fp32 35×8457×2560 (skinny, odd N)"),
        Case("gemm_f32_128x4096x4096", gemm_case_op(128, 4096, 4096), "GEMM fp32 128×4096×4096"),
        Case("gemv_f32_1x4096x4096", gemm_case_op(1, 4096, 4096), "GEMM fp32 1×4096×4096 (GEMV kernel)"),
        Case("gemm_bf16_4096", gemm_case_op(4096, 4096, 4096, "bfloat16"), "GEMM bf16 4096³ (wgmma on sm_90)"),
        Case("reduce_sum_2p28", ReduceOp(shape=(2**28,), op="sum"), "sum of 2^28 fp32"),
        Case("reduce_rowsum_16384", ReduceOp(shape=(16384, 16384), op="sum", axis=1), "row sums of 16384² fp32"),
        Case("transpose_f32_8192x1024", TransposeOp(shape=(8192, 1024), dtype="float32"), "transpose 8192×1024 fp32"),
    ]
    return {c.name: c for c in items}


def output_bytes(op) -> int:
    """Bytes of the op's result (the compulsory DRAM writes): C, the reduction's output, or Y.

    Raises:
        TypeError: ``op`` is of no family this script knows.
    """
    if isinstance(op, GemmOp):
        return op.m * op.n * dtypes.get(op.dtype).itemsize
    if isinstance(op, ReduceOp):
        return op.out_size * dtypes.get(op.out_dtype).itemsize
    if isinstance(op, TransposeOp):
        return op.size * op.itemsize
    raise TypeError(f"op must be a GemmOp, ReduceOp or TransposeOp, got {type(op).__name__}")


# ---------------------------------------------------------------- the prediction


def predicted_bytes(op, schedule, device) -> dict:
    """The cost model's bytes per level of ``op`` under ``schedule`` on ``device``.

    Args:
        op: a GemmOp, ReduceOp or TransposeOp.
        schedule: its schedule; None takes the family's default for ``device`` (as ``explain`` does).
        device: a known name ("H200") or a :class:`tiledsl.Target`.

    Returns:
        ``{"dram_read", "dram_write", "dram_total", "l2", "smem"}`` in bytes (``smem``: the bytes the model's
        shared-memory wavefronts move; None where the model has no shared-memory level), plus
        ``"smem_requested"`` (bytes as threads request them), ``"smem_wavefronts"`` (``smem`` / 128),
        ``"predicted_s"``, ``"bound_by"`` and ``"schedule"`` (the schedule explained, as a dict).
    """
    r = tiledsl.explain(op, schedule, device=device)
    hbm = float(r.levels["hbm"].bytes)
    write = float(output_bytes(op))
    smem = r.levels.get("smem")
    moved = float(smem.moved_bytes) if smem is not None else None
    return {"dram_read": hbm - write, "dram_write": write, "dram_total": hbm, "l2": float(r.levels["l2"].bytes),
            "smem": moved, "smem_requested": float(smem.bytes) if smem is not None else None,
            "smem_wavefronts": moved / WAVEFRONT_BYTES if moved is not None else None,
            "predicted_s": r.predicted_s, "bound_by": r.bound_by, "schedule": r.schedule.to_dict()}


# ---------------------------------------------------------------- ncu's CSV


def _number(value: str, unit: str, metric: str) -> float | None:
    """A metric value in base units (bytes for byte metrics); None for "n/a".

    Raises:
        ValueError: the value is not a number, uses a decimal comma, or a byte metric has an unknown unit.
    """
    v = value.strip()
    if v.lower() in ("n/a", ""):
        return None
    if "," in v:
        if not _THOUSANDS.match(v):
            raise ValueError(f"{metric}: value {value!r} is not a number ncu_bytes can read (a decimal comma? "
                             f"run ncu with LC_ALL=C)")
        v = v.replace(",", "")
    try:
        x = float(v)
    except ValueError:
        raise ValueError(f"{metric}: value {value!r} is not a number") from None
    u = unit.strip()
    if u.lower().endswith("byte") or u in _BYTE_UNITS:
        if u not in _BYTE_UNITS:
            raise ValueError(f"{metric}: unit {unit!r} is not one of {sorted(_BYTE_UNITS)} "
                             f"(pass --print-units base to ncu)")
        x *= _BYTE_UNITS[u]
    return x


def parse_ncu_csv(text: str) -> list[dict]:
    """The kernels in ncu ``--csv --print-units base`` output (one row per kernel and metric).

    Lines before the header (``==PROF==`` lines, the application's own output) are skipped.

    Returns:
        One dict per profiled kernel, in ID order: ``{"id", "kernel", "block", "grid", "metrics": {metric:
        value in base units or None}, "units": {metric: unit as printed}}``; [] when the text holds no
        metric table.

    Raises:
        ValueError: the header lacks one of the needed columns, or a value cannot be read.
    """
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines)
                  if line.startswith('"ID",') and '"Metric Name"' in line), None)
    if start is None:
        return []
    rows = [lines[start]] + [line for line in lines[start + 1:] if line.startswith('"')]
    reader = csv.DictReader(rows)
    missing = [c for c in _REQUIRED_COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise ValueError(f"ncu CSV header lacks column(s) {missing}; got {reader.fieldnames}")
    kernels: dict[int, dict] = {}
    for row in reader:
        kid = int(row["ID"])
        k = kernels.setdefault(kid, {"id": kid, "kernel": row["Kernel Name"], "block": row.get("Block Size"),
                                     "grid": row.get("Grid Size"), "metrics": {}, "units": {}})
        name = row["Metric Name"]
        k["metrics"][name] = _number(row["Metric Value"], row["Metric Unit"], name)
        k["units"][name] = row["Metric Unit"]
    return [kernels[i] for i in sorted(kernels)]


def measured_bytes(kernels: list[dict]) -> dict:
    """Bytes per level summed over ``kernels`` (from :func:`parse_ncu_csv`).

    Returns:
        ``{"dram_read", "dram_write", "dram_total", "l2", "smem", "smem_wavefronts"}`` (``smem`` =
        wavefronts × :data:`WAVEFRONT_BYTES`); a level is None when a kernel lacks its metric or reports n/a.

    Raises:
        ValueError: ``kernels`` is empty.
    """
    if not kernels:
        raise ValueError("no kernel was profiled: nothing to sum")

    def total(metric: str) -> float | None:
        vals = [k["metrics"].get(metric) for k in kernels]
        return None if any(v is None for v in vals) else float(sum(vals))

    out = {key: total(metric) for key, metric in METRICS.items()}
    r, w = out["dram_read"], out["dram_write"]
    out["dram_total"] = None if r is None or w is None else r + w
    wf = out["smem_wavefronts"]
    out["smem"] = None if wf is None else wf * WAVEFRONT_BYTES
    return out


def ratios(predicted: dict, measured: dict) -> dict:
    """measured / predicted per level of :data:`LEVELS` (None where either is missing or predicted is 0)."""
    out = {}
    for key in LEVELS:
        p, m = predicted.get(key), measured.get(key)
        out[key] = m / p if p and m is not None else None
    return out


# ---------------------------------------------------------------- the table


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.3g}"


def _cell(p: float | None, m: float | None, r: float | None) -> str:
    if m is None and r is None:
        return _fmt(p)
    return f"{_fmt(p)} / {_fmt(m)} ({'—' if r is None else f'{r:.2f}'})"


def short_schedule(family: str, s: dict) -> str:
    """A few words naming a schedule (dict form) for the table."""
    if family == "gemm":
        words = ["gemv" if s.get("kernel") == "gemv" else s.get("mma", "fma"), f"{s['bm']}×{s['bn']}×{s['bk']}"]
        if s.get("split_k", 1) > 1:
            words.append(f"split-K {s['split_k']}")
        if s.get("warp_specialize"):
            words.append("TMA")
        return " ".join(words)
    if family == "reduce":
        return f"{s['strategy']} block {s['block']} vec {s['vec']}"
    return f"{s['variant']} tile {s['tile']}"


def markdown_table(rows: list[dict]) -> str:
    """The rows (``{"case", "family", "schedule", "predicted", "measured", "ratio", "kernels"}``) as a markdown
    table: each level's cell is "predicted / measured (measured ÷ predicted)", bytes; only predicted when
    nothing was measured."""
    head = ["case", "schedule", "kernels", *(LEVEL_TITLES[k] for k in LEVELS)]
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(["---"] * 3 + ["---:"] * len(LEVELS)) + " |"]
    for row in rows:
        pred, meas, rat = row["predicted"], row.get("measured") or {}, row.get("ratio") or {}
        kernels = row.get("kernels") or []
        cells = [row["case"], short_schedule(row["family"], pred["schedule"]),
                 str(len(kernels)) if kernels else ("error" if row.get("error") else "—")]
        cells += [_cell(pred.get(k), meas.get(k), rat.get(k)) for k in LEVELS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------- the parent


def load_schedules(path: str | None, known: dict[str, Case]) -> dict[str, object]:
    """Case name -> schedule object from a ``--schedules`` JSON file ({} for None).

    Raises:
        SystemExit: the file is unreadable, not an object, names an unknown case, or a schedule is invalid.
    """
    if path is None:
        return {}
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise SystemExit(f"{SCRIPT}: --schedules {path}: {exc}") from None
    if not isinstance(data, dict):
        raise SystemExit(f"{SCRIPT}: --schedules {path} holds a JSON {type(data).__name__}, not an object "
                         f"mapping case names to schedules")
    out = {}
    for name, entry in data.items():
        if name not in known:
            raise SystemExit(f"{SCRIPT}: --schedules {path}: unknown case {name!r}; cases: {', '.join(known)}")
        d = entry.get("schedule", entry) if isinstance(entry, dict) else entry
        fam = tiledsl.api.family(known[name].family)
        try:
            out[name] = fam.schedule_type.from_dict(d)
        except (tiledsl.TiledslError, TypeError, ValueError) as exc:
            raise SystemExit(f"{SCRIPT}: --schedules {path}: case {name!r}: {exc}") from None
    return out


def ncu_command(ncu: str, case: str, schedule: dict) -> list[str]:
    """The ncu command line that profiles one call of ``case`` under ``schedule`` (a dict)."""
    return [ncu, "--clock-control", "none", "--cache-control", "all", "--metrics", ",".join(METRICS.values()),
            "--csv", "--print-units", "base", "--target-processes", "all", "--profile-from-start", "off",
            "-k", KERNEL_FILTER, sys.executable, str(Path(__file__).resolve()), "--child", case,
            "--schedule", json.dumps(schedule, sort_keys=True)]


def find_ncu(given: str | None) -> str | None:
    """``given``, else ``ncu`` on PATH, else the CUDA toolkit's; None when none exists."""
    if given:
        return given if Path(given).exists() or shutil.which(given) else None
    for cand in ("ncu", "/usr/local/cuda/bin/ncu"):
        found = shutil.which(cand)
        if found:
            return found
    return None


def _tail(text: str, n: int = 2000) -> str:
    return text[-n:] if len(text) > n else text


def profile_case(case: Case, schedule_dict: dict, ncu: str, timeout_s: float) -> dict:
    """Run ncu on one call of ``case``: ``{"kernels", "measured", "child", "error", "command"}``."""
    cmd = ncu_command(ncu, case.name, schedule_dict)
    out = {"command": " ".join(cmd[:-1]) + " '" + cmd[-1] + "'", "kernels": [], "measured": None,
           "child": None, "error": None}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s,
                              env={**os.environ, "LC_ALL": "C"})
    except subprocess.TimeoutExpired as exc:
        partial = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        out["error"] = f"ncu ran past {timeout_s:.0f} s: {_tail(partial)}"
        return out
    if PERMISSION_ERROR in proc.stdout + proc.stderr:
        out["error"] = (f"{PERMISSION_ERROR}: this user may not read the GPU's performance counters (run as root, "
                        f"or load the driver with NVreg_RestrictProfilingToAdminUsers=0)")
        return out
    for line in proc.stdout.splitlines():
        if line.startswith(CHILD_MARKER):
            out["child"] = json.loads(line[len(CHILD_MARKER):])
    try:
        kernels = parse_ncu_csv(proc.stdout)
    except ValueError as exc:
        out["error"] = f"unreadable ncu CSV: {exc}"
        return out
    if proc.returncode != 0 or not kernels or out["child"] is None:
        out["error"] = (f"exit status {proc.returncode}, {len(kernels)} kernel(s) profiled; "
                        f"stderr: {_tail(proc.stderr)} stdout: {_tail(proc.stdout)}")
        return out
    out["kernels"] = kernels
    out["measured"] = measured_bytes(kernels)
    return out


def parent(args, known: dict[str, Case], selected: list[str]) -> int:
    from gpu_check import gpu_or_exit

    target = gpu_or_exit(SCRIPT)
    ncu = find_ncu(args.ncu)
    if ncu is None:
        sys.exit(f"{SCRIPT}: Nsight Compute (ncu) not found on PATH or in /usr/local/cuda/bin: pass --ncu PATH")
    version = subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    tuned = load_schedules(args.schedules, known)
    from tiledsl.launch import resolve_schedule

    rows = []
    for name in selected:
        case = known[name]
        fam = tiledsl.api.family(case.family)
        s = tuned[name] if name in tuned else resolve_schedule(fam, case.op, None, target)
        try:
            pred = predicted_bytes(case.op, s, target)
        except tiledsl.TiledslError as exc:  # a --schedules entry that breaks a rule for this op or device
            sys.exit(f"{SCRIPT}: case {name}: {exc}")
        print(f"{name}: {short_schedule(case.family, pred['schedule'])} …", flush=True)
        got = profile_case(case, pred["schedule"], ncu, args.timeout_s)
        row = {"case": name, "note": case.note, "family": case.family, "op": case.op.to_dict(),
               "schedule_source": "--schedules" if name in tuned else "schedule=None (default/tuned record)",
               "predicted": pred, **got,
               "ratio": ratios(pred, got["measured"]) if got["measured"] else None}
        rows.append(row)
        if got["error"]:
            print(f"  error: {got['error'][:500]}", file=sys.stderr, flush=True)
            if got["error"].startswith(PERMISSION_ERROR):
                break  # every other case would fail the same way
    table = markdown_table(rows)
    print(table)
    result = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "device": target.name,
              "arch": target.arch, "ncu": version[-1] if version else None, "command": "python " + " ".join(sys.argv),
              "metrics": METRICS, "wavefront_bytes": WAVEFRONT_BYTES,
              "assumptions": [f"measured shared bytes = wavefronts × {WAVEFRONT_BYTES}",
                              "ncu --cache-control all (default): caches flushed before each profiled kernel",
                              "measured = sum over every tiledsl_* kernel of one call (split-K reduction included)",
                              "predicted DRAM write = the op's output bytes; DRAM read = model HBM bytes − that"],
              "rows": rows, "table": table}
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=1))
        print(f"wrote {args.out}")
    return 1 if any(r["error"] for r in rows) else 0


def predict_only(args, known: dict[str, Case], selected: list[str]) -> int:
    """The predicted column alone (no GPU with ``--device NAME``)."""
    device = args.device or None
    if device is None:
        from gpu_check import gpu_or_exit

        device = gpu_or_exit(SCRIPT)
    tuned = load_schedules(args.schedules, known)
    rows = [{"case": n, "family": known[n].family, "predicted": predicted_bytes(known[n].op, tuned.get(n), device)}
            for n in selected]
    print(markdown_table(rows))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"device": str(device if isinstance(device, str) else device.name),
                                              "rows": [{**r, "op": known[r["case"]].op.to_dict()} for r in rows]},
                                             indent=1))
    return 0


# ---------------------------------------------------------------- the child (runs under ncu)


def _runner(case: Case, schedule, make=None):
    """A zero-argument callable that calls the public API once, as a user would, on inputs of ``case``.

    Args:
        make: (shape) -> float32 CuPy array for the inputs and outputs; None: fresh random arrays.
            bfloat16 inputs are torch tensors (CuPy has no bfloat16).
    """
    import cupy as cp

    op = case.op
    if make is None:
        rng = cp.random.default_rng(0)

        def make(shape):
            return rng.random(shape, dtype=cp.float32)
    if isinstance(op, GemmOp):
        if op.dtype == "bfloat16":
            try:
                import torch
            except ImportError:
                raise SystemExit(f"{SCRIPT}: case {case.name} needs torch (CuPy has no bfloat16)") from None
            g = torch.Generator(device="cuda").manual_seed(0)
            a = torch.rand((op.m, op.k), device="cuda", generator=g).to(torch.bfloat16)
            b = torch.rand((op.k, op.n), device="cuda", generator=g).to(torch.bfloat16)
            c = torch.empty((op.m, op.n), device="cuda", dtype=torch.bfloat16)
        else:
            a, b, c = make((op.m, op.k)), make((op.k, op.n)), make((op.m, op.n))
        return lambda: tiledsl.gemm(a, b, c, schedule=schedule)
    if isinstance(op, ReduceOp):
        x = make(op.shape)
        return lambda: tiledsl.reduce(x, op.op, axis=op.axis, schedule=schedule)
    x, y = make(op.shape), make(op.out_shape)
    return lambda: tiledsl.transpose(x, out=y, schedule=schedule)


def check_built(case: Case, schedule, target) -> None:
    """Refuse a call that built another op than ``case.op`` under ``schedule`` on ``target`` (another alignment
    or layout): the prediction would then describe a different kernel.

    Raises:
        SystemExit: the kernel cache holds no (family, case.op, schedule, target) entry.
    """
    from tiledsl import cache

    if (case.family, case.op, schedule, target) not in cache.KERNELS:
        sys.exit(f"{SCRIPT}: case {case.name}: the API did not build {case.op} under {schedule} on {target.name} "
                 f"(alignment or layout differs from the case's op): the prediction would not describe the kernel")


def child(case: Case, schedule_json: str) -> int:
    """Warm up (compile + one call), check the op the API built, then profile exactly one call."""
    import cupy as cp

    from tiledsl.target import Target

    fam = tiledsl.api.family(case.family)
    s = fam.schedule_type.from_dict(json.loads(schedule_json))
    run = _runner(case, s)
    run()
    cp.cuda.runtime.deviceSynchronize()
    target = Target.current()
    check_built(case, s, target)
    cp.cuda.runtime.profilerStart()
    run()
    cp.cuda.runtime.deviceSynchronize()
    cp.cuda.runtime.profilerStop()
    print(CHILD_MARKER + json.dumps({"case": case.name, "op": case.op.to_dict(), "schedule": s.to_dict(),
                                     "device": target.name}), flush=True)
    return 0


# ---------------------------------------------------------------- entry point


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    known = cases()
    ap.add_argument("--out", default=None, help="JSON file for every row (predicted, measured, ratios, kernels)")
    ap.add_argument("--cases", default=None, help=f"comma-separated subset of: {', '.join(known)}")
    ap.add_argument("--schedules", default=None, help="JSON: case name -> schedule dict (else schedule=None)")
    ap.add_argument("--ncu", default=None, help="path of ncu (default: on PATH, then /usr/local/cuda/bin/ncu)")
    ap.add_argument("--timeout-s", type=float, default=300.0, help="per case, seconds")
    ap.add_argument("--predict-only", action="store_true", help="print the model's bytes only (no ncu)")
    ap.add_argument("--device", default=None, help="with --predict-only: a known GPU name, e.g. H200 (no GPU needed)")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--schedule", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.list:
        for c in known.values():
            print(f"{c.name:28s} {c.note}")
        return 0
    if args.child is not None:
        if args.child not in known or args.schedule is None:
            ap.error(f"--child needs one of {', '.join(known)} and --schedule JSON")
        return child(known[args.child], args.schedule)
    selected = list(known) if args.cases is None else [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in selected if c not in known]
    if unknown:
        ap.error(f"--cases: unknown {unknown}; cases: {', '.join(known)}")
    if args.predict_only:
        return predict_only(args, known, selected)
    return parent(args, known, selected)


if __name__ == "__main__":
    sys.exit(main())

"""Shipped schedules: named presets per op family, read from the ``schedules`` package's JSON.

``schedules/<family>/presets.json`` maps a preset name to ``{"schedule": {...}, "note": "..."}``.
Every preset is validated when loaded; a broken file or preset is skipped with one
:class:`~tiledsl.errors.BadFileWarning` naming the file, the preset and the rule it breaks.

Tuned schedules (written by ``python -m search.tune``) are looked up with :func:`lookup`; see the
section "tuned schedules" below.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import threading
from dataclasses import dataclass, fields
from importlib import resources
from pathlib import Path

from . import cache
from . import family as families
from .compile import nvrtc_version
from .errors import ScheduleError, SpecError
from .filestore import positive_number, read_json, update_json, warn_bad


@functools.cache
def _raw(family: str) -> dict:
    path = resources.files("schedules").joinpath(family, "presets.json")
    data, problem = read_json(path, "presets JSON")
    if problem is None and not isinstance(data, dict):
        problem = f"holds a JSON {type(data).__name__}, not an object of presets"
    if problem is not None:
        warn_bad(path, problem, "no shipped presets of this family are used")
        return {}
    return data or {}


def presets(family) -> dict:
    """Name -> schedule object for the op family ("gemm", ... or its :class:`~tiledsl.family.Family`),
    in file order.

    A preset that is malformed or breaks its rule table is left out, with one BadFileWarning naming it.
    """
    fam = families.get(family)
    family, cls = fam.name, fam.schedule_type
    out = {}
    for name, entry in _raw(family).items():
        try:
            if not isinstance(entry, dict) or not isinstance(entry.get("schedule"), dict):
                raise ScheduleError("is not {\"schedule\": {...}}", "preset")
            out[name] = cls.from_dict(entry["schedule"])
        except (ScheduleError, TypeError, ValueError) as exc:
            warn_bad(resources.files("schedules").joinpath(family, "presets.json"),
                     f"preset {name!r}: {exc}", "this preset is left out")
    return out


def preset(family, name: str):
    """One named preset. Raises ScheduleError listing the names when ``name`` is unknown."""
    family = families.get(family).name
    table = presets(family)
    if name not in table:
        raise ScheduleError(f"no {family} preset {name!r}; presets: {', '.join(table)}", "preset")
    return table[name]


# ---------------------------------------------------------------- tuned schedules (search results)
#
# A tuned record is stored per (family, arch) in a JSON file ``{"records": [...]}``: the user store
# ``$TILEDSL_CACHE_DIR/tuned/<family>/<arch>.json`` (default ``~/.cache/tiledsl``, written by
# ``python -m search.tune ... --export``) and the shipped ``schedules/<family>/<arch without _>.json``
# (e.g. ``schedules/gemm/sm90.json``). A record is reused for an op only when everything that changes
# the binary or the answer matches (family, arch, device, the op's shape, dtype, layouts, alignment and
# beta use, the NVRTC version, and the SHA-256 of the source the emitter makes today) and the schedule
# still validates for that op on that device. ``lookup_explain`` says why each record missed.

_TUNED_CACHE: dict = {}
_TUNED_LOCK = threading.Lock()
_RECORD_STR_FIELDS = ("family", "arch", "device")
_RECORD_DICT_FIELDS = ("op", "schedule")


def user_store_dir() -> Path:
    """Root of the user's tuned-schedule store: ``$TILEDSL_CACHE_DIR/tuned`` or ``~/.cache/tiledsl/tuned``."""
    return Path(os.environ.get("TILEDSL_CACHE_DIR", Path.home() / ".cache" / "tiledsl")) / "tuned"


def user_store_path(family: str, arch: str) -> Path:
    """The user store file of ``family`` on ``arch`` (it may not exist yet)."""
    return user_store_dir() / family / f"{arch}.json"


def shipped_path(family: str, arch: str):
    """The shipped file of ``family`` on ``arch``: ``schedules/<family>/<arch without _>.json``."""
    return resources.files("schedules").joinpath(family, f"{arch.replace('_', '')}.json")


def device_tag(name: str) -> str:
    """A device name without vendor prefix, spaces or dashes, upper case ("NVIDIA H200" -> "H200")."""
    return name.upper().replace("NVIDIA", "").replace(" ", "").replace("-", "")


def record_problem(rec: object) -> str | None:
    """What makes ``rec`` not a tuned record this tiledsl can read (the schema check), or None.

    A record is an object with string ``family``, ``arch`` and ``device``, object ``op`` and ``schedule``,
    an optional 64-hex-digit ``source_sha256``, an optional ``nvrtc`` [major, minor], and only finite
    numbers anywhere (no NaN or infinity in its figures). Other fields are free.
    """
    if not isinstance(rec, dict):
        return f"is a JSON {type(rec).__name__}, not an object"
    for k in _RECORD_STR_FIELDS:
        if not isinstance(rec.get(k), str):
            return f"field {k!r} is {rec.get(k)!r}, not a string"
    for k in _RECORD_DICT_FIELDS:
        if not isinstance(rec.get(k), dict):
            return f"field {k!r} is {type(rec.get(k)).__name__}, not an object"
    sha = rec.get("source_sha256")
    if sha is not None and not (isinstance(sha, str) and len(sha) == 64
                                and all(c in "0123456789abcdef" for c in sha)):
        return f"field 'source_sha256' is {sha!r}, not a SHA-256 in hex"
    nv = rec.get("nvrtc")
    if nv is not None and not (isinstance(nv, list) and len(nv) == 2
                               and all(isinstance(x, int) and not isinstance(x, bool) for x in nv)):
        return f"field 'nvrtc' is {nv!r}, not [major, minor]"
    bad = _non_finite(rec)
    if bad:
        return f"field {bad!r} is not a finite number"
    return None


def _non_finite(x: object, where: str = "") -> str | None:
    if isinstance(x, float) and not math.isfinite(x):
        return where or "value"
    if isinstance(x, dict):
        for k, v in x.items():
            got = _non_finite(v, f"{where}.{k}" if where else str(k))
            if got:
                return got
    if isinstance(x, list):
        for i, v in enumerate(x):
            got = _non_finite(v, f"{where}[{i}]")
            if got:
                return got
    return None


def _file_records(path, data: object, problem: str | None) -> list:
    """The raw record list of a store file's parsed ``data``, warning (once) when the file is bad."""
    if problem is None and data is not None:
        if not isinstance(data, dict) or not isinstance(data.get("records", []), list):
            problem = 'is not {"records": [...]}'
    if problem is not None:
        warn_bad(path, f"tuned-schedule store {problem}", "its records are not used")
        return []
    return list((data or {}).get("records", []))


def _read_records(path) -> list[tuple[int, dict]]:
    """(index, record) of every record of the store file ``path`` that passes :func:`record_problem`.

    A file that does not parse or has the wrong shape, and each bad record, is skipped with one
    BadFileWarning naming the file (and the record's index) and what was wrong.
    """
    key = None
    if isinstance(path, Path):
        try:
            st = path.stat()
        except OSError:
            return []
        key = (str(path), st.st_mtime_ns, st.st_size)
        with _TUNED_LOCK:
            if key in _TUNED_CACHE:
                return _TUNED_CACHE[key]
    data, problem = read_json(path, "tuned-schedule JSON", allow_nan=True)
    out, bad = [], []
    for i, rec in enumerate(_file_records(path, data, problem)):
        why = record_problem(rec)
        if why is None:
            out.append((i, rec))
        else:
            bad.append(f"record {i} {why}")
    if bad:  # one warning per file, naming every bad record
        warn_bad(path, "tuned-schedule store: " + "; ".join(bad), "those records are skipped")
    if key is not None:
        with _TUNED_LOCK:
            _TUNED_CACHE[key] = out
    return out


def _source_sha256(fam, op, schedule) -> str:
    return hashlib.sha256(fam.emit(op, schedule).source.encode()).hexdigest()


def _nvrtc() -> list[int] | None:
    try:
        return list(nvrtc_version())
    except Exception:
        return None


def make_record(family, op, target, schedule, **figures) -> dict:
    """A tuned record for ``schedule`` on ``op`` / ``target`` (figures: measured_s, predicted_s, ...)."""
    fam = families.get(family)
    return {"family": fam.name, "arch": target.arch, "device": target.name, "op": op.to_dict(),
            "schedule": schedule.to_dict(), "source_sha256": _source_sha256(fam, op, schedule),
            "nvrtc": _nvrtc(), **figures}


def store(family, op, target, schedule, *, path: Path | None = None, **figures) -> Path:
    """Add (or replace) the record of ``op`` on ``target`` in the user store.

    The read-modify-write holds the file's ``filelock`` and replaces the file atomically, so concurrent
    tuners never lose each other's records; records of the old file that fail :func:`record_problem` are
    dropped (with one BadFileWarning), and a file that does not parse is kept as ``<file>.corrupt`` (``.corrupt-2``, ... after the first).

    Args:
        family: op family name ("gemm").
        op, target, schedule: what was tuned, where, and the winner.
        path: another JSON file to write (e.g. the shipped ``schedules/gemm/sm90.json``).
        figures: extra fields, e.g. ``measured_s``, ``predicted_s``, ``vendor_s``, ``date``, ``command``.

    Returns:
        The file written.

    Raises:
        ValueError: the new record fails :func:`record_problem` (e.g. a NaN figure); nothing is written.
        OSError / filelock.Timeout: the file cannot be written, or its lock stayed taken for a minute.
    """
    family = families.get(family).name
    rec = make_record(family, op, target, schedule, **figures)
    why = record_problem(rec)
    if why is not None:
        raise ValueError(f"tuned record of {family} {op} {why}; not stored")
    path = Path(path) if path is not None else user_store_path(family, target.arch)

    def add(old: object) -> dict:
        keep, bad = [], []
        for i, r in enumerate(_file_records(path, old, None)):
            if record_problem(r) is not None:
                bad.append(f"record {i} {record_problem(r)}")
                continue
            if not (r.get("op") == rec["op"] and r.get("arch") == rec["arch"]
                    and device_tag(r["device"]) == device_tag(target.name)):
                keep.append(r)
        if bad:
            warn_bad(path, "tuned-schedule store: " + "; ".join(bad), "those records are dropped on this write")
        return {"records": [*keep, rec]}

    update_json(path, add, "tuned-schedule JSON", allow_nan=True)  # locked read-modify-write, atomic replace
    cache.invalidate_tuned()  # schedule=None calls (and every launch planned with the old choice) see it
    return path


_OP_DIFFERS = "op differs: "  # the start of a miss whose record is for another product (grouped by lookup_explain)


def _why_not(fam, rec: dict, op, target, nvrtc) -> str | object:
    """The schedule of ``rec`` if it applies to ``op`` on ``target``, else the reason as a string."""
    if rec.get("family") != fam.name:
        return f"family {rec.get('family')!r} is not {fam.name!r}"
    if rec.get("arch") != target.arch:
        return f"tuned for {rec.get('arch')}, this device is {target.arch}"
    if device_tag(str(rec.get("device", ""))) != device_tag(target.name):
        return f"tuned on {rec.get('device')}, this device is {target.name}"
    try:  # the stored op as an op: its own checks (types, unknown keys); fields added since take their defaults
        have = type(op).from_dict(rec.get("op"))
    except (SpecError, TypeError, ValueError) as exc:
        return f"stored op does not validate: {exc}"
    diff = [f"{f.name} {getattr(have, f.name)!r}≠{getattr(op, f.name)!r}" for f in fields(type(op))
            if getattr(have, f.name) != getattr(op, f.name)]
    if diff:
        return _OP_DIFFERS + ", ".join(diff)
    if nvrtc is not None and rec.get("nvrtc") is not None and list(rec["nvrtc"]) != list(nvrtc):
        return f"tuned with NVRTC {rec['nvrtc']}, this is NVRTC {nvrtc}"
    try:
        sched = fam.schedule_type.from_dict(rec["schedule"])
        sched.validate(target)
        if hasattr(sched, "check_op"):
            sched.check_op(op)
        sha = _source_sha256(fam, op, sched) if rec.get("source_sha256") else None
    except (ScheduleError, KeyError, TypeError, ValueError, AttributeError) as exc:
        return f"stored schedule no longer validates: {exc}"
    if sha is not None and rec["source_sha256"] != sha:
        return "the emitter's source for this schedule changed since tuning (SHA-256 differs)"
    return sched


@dataclass(frozen=True)
class Hit:
    """A stored record that applies to the op looked up.

    Attributes:
        schedule: the record's schedule, validated for the op and device.
        label: "user store" or "shipped"; ``path``: the JSON file; ``index``: the record's position in it.
        record: the record as stored (its date, device, NVRTC, command, measured figures).
    """

    schedule: object
    label: str
    path: Path
    index: int
    record: dict

    def provenance(self) -> str:
        """Which file and record, when, where and with what it was tuned, and what it measured (one line)."""
        rec = self.record
        parts = [f"{self.label} {self.path} record {self.index}"]
        tuned = "tuned" if rec.get("mode", "measured") == "measured" else str(rec.get("mode"))
        where = " ".join(x for x in (str(rec.get("date", ""))[:10], f"on {rec['device']}" if rec.get("device") else "",
                                     "NVRTC " + ".".join(map(str, rec["nvrtc"])) if rec.get("nvrtc") else "") if x)
        parts.append(f"{tuned} {where}".strip())
        if rec.get("study") is not None and rec.get("trial") is not None:
            parts.append(f"study {rec['study']!r} trial {rec['trial']}")
        measured = rec.get("measured") if isinstance(rec.get("measured"), dict) else {}
        if positive_number(measured.get("median_s")):
            text = f"measured {measured['median_s'] * 1e3:.4g} ms"
            if positive_number(measured.get("vendor_s")):
                text += f" = {measured['vendor_s'] / measured['median_s']:.2f}x the vendor library"
            parts.append(text)
        compared = rec.get("compared") if isinstance(rec.get("compared"), dict) else {}
        if positive_number(compared.get("default_s")) and positive_number(compared.get("tuned_s")):
            parts.append(f"re-timed {compared.get('compared', '?')}: {compared['default_s'] / compared['tuned_s']:.2f}x "
                         "faster than the built-in choice then")
        if rec.get("source_sha256"):
            parts.append("kernel source unchanged since (SHA-256)")
        return "; ".join(parts)


def lookup_hit(family, op, target) -> tuple[Hit | None, list[str]]:
    """The stored record that applies to ``op`` on ``target`` (or None) and why every record before it was not used.

    The user store is searched before the shipped JSON; the first record that applies wins. Records for other
    products (another shape, layout, dtype...) are summed up in one reason per file, naming the one that differs in
    the fewest fields; every other miss (device, NVRTC, changed source, invalid record) is listed on its own.
    """
    fam = families.get(family)
    family = fam.name
    nvrtc = _nvrtc()
    reasons: list[str] = []
    sources = [("user store", user_store_path(family, target.arch)),
               ("shipped", shipped_path(family, target.arch))]
    for label, path in sources:
        records = _read_records(path)
        if not records:
            reasons.append(f"{label} {path}: no records")
            continue
        other_ops: list[tuple[int, int, str]] = []  # (fields that differ, record index, reason)
        hit = None
        for i, rec in records:
            got = _why_not(fam, rec, op, target, nvrtc)
            if not isinstance(got, str):
                hit = Hit(got, label, path, i, rec)
                break
            if got.startswith(_OP_DIFFERS):
                other_ops.append((got.count("≠"), i, got))
            else:
                reasons.append(f"{label} {path} record {i}: {got}")
        if len(other_ops) == 1:
            reasons.append(f"{label} {path} record {other_ops[0][1]}: {other_ops[0][2]}")
        elif other_ops:
            _, i, got = min(other_ops)
            reasons.append(f"{label} {path}: {len(other_ops)} records {'before the hit ' if hit else ''}are for "
                           f"other products; the nearest, record {i}: {got}")
        if hit is not None:
            return hit, reasons
    return None, reasons


def lookup_explain(family, op, target) -> tuple[object | None, list[str]]:
    """The tuned schedule for ``op`` on ``target`` (or None) and why every record was not used
    (:func:`lookup_hit`, without where the schedule came from)."""
    hit, reasons = lookup_hit(family, op, target)
    return (hit.schedule if hit is not None else None), reasons


def lookup(family, op, target):
    """The tuned schedule stored for ``op`` on ``target``, validated, or None.

    Called by the families' ``default_schedule`` on the ``schedule=None`` path. Print the reasons
    for a miss with :func:`lookup_explain` (or ``python -m search.tune gemm ... --lookup``).
    """
    return lookup_explain(family, op, target)[0]

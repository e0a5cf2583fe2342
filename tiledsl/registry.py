"""Shipped schedules: named presets per op family, read from the ``schedules`` package's JSON.

``schedules/<family>/presets.json`` maps a preset name to ``{"schedule": {...}, "note": "..."}``.
Every preset is validated when loaded (a broken preset raises ScheduleError naming it).

Tuned schedules (written by ``python -m search.tune``) are looked up with :func:`lookup`; see the
section "tuned schedules" below.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from importlib import resources
from pathlib import Path

from .compile import atomic_write
from .errors import ScheduleError


@functools.cache
def _raw(family: str) -> dict:
    text = resources.files("schedules").joinpath(family, "presets.json").read_text()
    return json.loads(text)


def presets(family: str) -> dict:
    """Name -> schedule object for the op family ("gemm", ...), in file order.

    Raises:
        ScheduleError: a shipped preset breaks its rule table (names the preset).
    """
    from .api import family as get_family

    cls = get_family(family).schedule_type
    out = {}
    for name, entry in _raw(family).items():
        try:
            out[name] = cls.from_dict(entry["schedule"])
        except ScheduleError as exc:
            raise ScheduleError(f"shipped preset {family}/{name}: {exc}", exc.rule) from exc
    return out


def preset(family: str, name: str):
    """One named preset. Raises ScheduleError listing the names when ``name`` is unknown."""
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


def _read_records(path) -> list[dict]:
    try:
        stamp = path.stat().st_mtime_ns if isinstance(path, Path) else None
        key = (str(path), stamp)
        if key in _TUNED_CACHE:
            return _TUNED_CACHE[key]
        text = path.read_text()
    except (OSError, FileNotFoundError):
        return []
    try:
        data = json.loads(text)
        records = list(data.get("records", [])) if isinstance(data, dict) else []
    except (ValueError, AttributeError):
        records = []
    _TUNED_CACHE[key] = records
    return records


def _source_sha256(fam, op, schedule) -> str:
    return hashlib.sha256(fam.emit(op, schedule).source.encode()).hexdigest()


def _nvrtc() -> list[int] | None:
    try:
        from .compile import nvrtc_version

        return list(nvrtc_version())
    except Exception:
        return None


def make_record(family: str, op, target, schedule, **figures) -> dict:
    """A tuned record for ``schedule`` on ``op`` / ``target`` (figures: measured_s, predicted_s, ...)."""
    from .api import family as get_family

    fam = get_family(family)
    return {"family": family, "arch": target.arch, "device": target.name, "op": op.to_dict(),
            "schedule": schedule.to_dict(), "source_sha256": _source_sha256(fam, op, schedule),
            "nvrtc": _nvrtc(), **figures}


def store(family: str, op, target, schedule, *, path: Path | None = None, **figures) -> Path:
    """Add (or replace) the record of ``op`` on ``target`` in the user store (atomic write).

    Args:
        family: op family name ("gemm").
        op, target, schedule: what was tuned, where, and the winner.
        path: another JSON file to write (e.g. the shipped ``schedules/gemm/sm90.json``).
        figures: extra fields, e.g. ``measured_s``, ``predicted_s``, ``vendor_s``, ``date``, ``command``.

    Returns:
        The file written.
    """
    rec = make_record(family, op, target, schedule, **figures)
    path = Path(path) if path is not None else user_store_path(family, target.arch)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        old = json.loads(path.read_text()).get("records", [])
    except (OSError, ValueError, AttributeError):
        old = []
    keep = [r for r in old if not (r.get("op") == rec["op"] and r.get("arch") == rec["arch"]
                                   and device_tag(str(r.get("device", ""))) == device_tag(target.name))]
    text = json.dumps({"records": [*keep, rec]}, indent=1, sort_keys=True) + "\n"
    atomic_write(path, text)
    from .api import clear_kernel_cache

    clear_kernel_cache()  # schedule=None calls must see the new record
    return path


def _why_not(fam, rec: dict, op, target, nvrtc) -> str | object:
    """The schedule of ``rec`` if it applies to ``op`` on ``target``, else the reason as a string."""
    from .errors import ScheduleError

    if rec.get("family") != fam.name:
        return f"family {rec.get('family')!r} is not {fam.name!r}"
    if rec.get("arch") != target.arch:
        return f"tuned for {rec.get('arch')}, this device is {target.arch}"
    if device_tag(str(rec.get("device", ""))) != device_tag(target.name):
        return f"tuned on {rec.get('device')}, this device is {target.name}"
    want = op.to_dict()
    have = rec.get("op") or {}
    diff = [f"{k} {have.get(k)!r}≠{v!r}" for k, v in want.items() if have.get(k) != v]
    if diff:
        return "op differs: " + ", ".join(diff)
    if nvrtc is not None and rec.get("nvrtc") is not None and list(rec["nvrtc"]) != list(nvrtc):
        return f"tuned with NVRTC {rec['nvrtc']}, this is NVRTC {nvrtc}"
    try:
        sched = fam.schedule_type.from_dict(rec["schedule"])
        sched.validate(target)
    except (ScheduleError, KeyError, TypeError) as exc:
        return f"stored schedule no longer validates: {exc}"
    if rec.get("source_sha256") and rec["source_sha256"] != _source_sha256(fam, op, sched):
        return "the emitter's source for this schedule changed since tuning (SHA-256 differs)"
    return sched


def lookup_explain(family: str, op, target) -> tuple[object | None, list[str]]:
    """The tuned schedule for ``op`` on ``target`` (or None) and why every record was not used.

    The user store is searched before the shipped JSON; the first record that applies wins.
    """
    from .api import family as get_family

    fam = get_family(family)
    nvrtc = _nvrtc()
    reasons: list[str] = []
    sources = [("user store", user_store_path(family, target.arch)),
               ("shipped", shipped_path(family, target.arch))]
    for label, path in sources:
        records = _read_records(path)
        if not records:
            reasons.append(f"{label} {path}: no records")
            continue
        for i, rec in enumerate(records):
            got = _why_not(fam, rec, op, target, nvrtc)
            if isinstance(got, str):
                reasons.append(f"{label} {path} record {i}: {got}")
            else:
                return got, reasons
    return None, reasons


def lookup(family: str, op, target):
    """The tuned schedule stored for ``op`` on ``target``, validated, or None.

    Called by the families' ``default_schedule`` on the ``schedule=None`` path. Print the reasons
    for a miss with :func:`lookup_explain` (or ``python -m search.tune gemm ... --lookup``).
    """
    return lookup_explain(family, op, target)[0]

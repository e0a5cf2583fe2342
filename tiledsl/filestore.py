"""Files tiledsl reads and writes, and how it treats a bad one.

Every file tiledsl reads (the kernel disk cache, the tuned-schedule store, the calibration cache, the
shipped schedules) may be truncated, corrupt, of the wrong shape, written by another version, or being
written by another process right now. The rules, in one place:

* **readers verify and skip**: what fails its check is skipped with ONE :class:`BadFileWarning` per
  process naming the file and what was wrong (:func:`warn_bad`), and the caller recovers (recompiles,
  re-measures, falls back to the default);
* **writers lock and replace atomically**: :func:`locked` takes a ``filelock.FileLock`` on
  ``<file>.lock`` so read-modify-write cycles of concurrent processes never lose a record, and
  :func:`atomic_write` writes a temporary file in the same folder, flushes it to disk and
  ``os.replace``-s it, so a reader sees the old file or the new one, never half of one.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import threading
import warnings
from collections.abc import Callable
from pathlib import Path

from .errors import BadFileWarning

# Seconds a writer waits for another process's lock before giving up (filelock.Timeout).
LOCK_TIMEOUT_S = 60.0

_WARNED: set[tuple[str, str]] = set()
_WARNED_LOCK = threading.Lock()


def warn_bad(path: object, problem: str, action: str = "skipped") -> None:
    """Warn once per process that ``path`` is bad (``problem``) and what tiledsl does instead (``action``)."""
    key = (str(path), problem)
    with _WARNED_LOCK:
        if key in _WARNED:
            return
        _WARNED.add(key)
    warnings.warn(f"tiledsl: {path}: {problem}; {action}", BadFileWarning, stacklevel=3)


def _umask() -> int:
    """The process's umask now: read from /proc (Linux); elsewhere the one seen at import (setting and restoring it
    is not safe while other threads create files)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return _UMASK_AT_IMPORT


def _umask_at_import() -> int:
    mask = os.umask(0o22)
    os.umask(mask)
    return mask


_UMASK_AT_IMPORT = _umask_at_import()


def locked(path: Path, timeout_s: float = LOCK_TIMEOUT_S):
    """An inter-process lock (``filelock.FileLock``) guarding ``path``: the file ``<path>.lock`` beside it.

    Raises:
        filelock.Timeout: another process held it for ``timeout_s`` seconds.
    """
    import filelock

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return filelock.FileLock(str(path) + ".lock", timeout=timeout_s)


def atomic_write(path: Path, data: bytes | str) -> None:
    """Write ``data`` to ``path`` atomically: a temporary file in the same folder, fsync, ``os.replace``.

    The file keeps its permission bits (a new one gets what the umask allows, as ``open`` would give it:
    ``mkstemp``'s private 0600 would hide a shared store from its other users).

    Raises:
        OSError: the folder is not writable (the temporary file is removed).
    """
    path = Path(path)
    try:
        mode = path.stat().st_mode & 0o7777
    except OSError:  # a new file: 0666 less the umask
        mode = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.tmp-")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def positive_number(x: object) -> bool:
    """Whether ``x``, read from a JSON file, is a finite number above 0 (an int or float, not a bool)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def read_json(path, what: str = "JSON", allow_nan: bool = False) -> tuple[object | None, str | None]:
    """Parsed JSON of ``path`` (a Path or an ``importlib.resources`` traversable) and what was wrong.

    Args:
        path: the file.
        what: how the file is named in problems ("tuned-schedule JSON").
        allow_nan: accept ``NaN`` / ``Infinity`` (the caller checks numbers per record); refused by default.

    Returns:
        ``(data, None)``; ``(None, None)`` when the file does not exist; ``(None, problem)`` when it cannot
        be read or is not valid JSON (empty, truncated, binary).
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, None
    except IsADirectoryError:
        return None, f"is a folder, not a {what} file"
    except OSError as exc:
        return None, f"cannot be read ({type(exc).__name__}: {exc.strerror or exc})"
    if not raw.strip():
        return None, f"is empty (truncated?), not a {what} file"
    try:
        text = raw.decode("utf-8")
        return (json.loads(text) if allow_nan else json.loads(text, parse_constant=_refuse_constant)), None
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # RecursionError: nested past Python's stack
        return None, f"is not valid {what} ({type(exc).__name__}: {str(exc)[:200]})"


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


STALE_TMP_S = 3600.0
"""Age (seconds) past which a leftover ``.<file>.tmp-*`` of :func:`atomic_write` is a killed writer's, not a live one's
(a write takes milliseconds)."""


def _remove_stale_tmp(path: Path) -> None:
    """Remove the temporary files :func:`atomic_write` left beside ``path`` when its writer was killed."""
    import time

    for tmp in path.parent.glob(f".{path.name}.tmp-*"):
        try:
            if time.time() - tmp.stat().st_mtime > STALE_TMP_S:
                tmp.unlink()
        except OSError:  # gone meanwhile, or not ours to remove
            pass


def update_json(path: Path, change: Callable[[object | None], object], what: str = "JSON",
                allow_nan: bool = False) -> object:
    """Read-modify-write ``path`` under its lock: ``change(old data or None) -> new data``, written atomically.

    A file that exists but does not parse is copied to ``<path>.corrupt`` (``.corrupt-2``, ``-3``, ... when an
    earlier one is there: every damaged version is kept) with a warning before it is replaced, so nothing is silently
    destroyed. Temporary files of writers killed mid-write (older than :data:`STALE_TMP_S`) are removed.

    Returns:
        The data written.

    Raises:
        OSError: the folder cannot be created or written.
        filelock.Timeout: the lock stayed taken for :data:`LOCK_TIMEOUT_S` seconds.
    """
    path = Path(path)
    with locked(path):
        old, problem = read_json(path, what, allow_nan)
        _remove_stale_tmp(path)
        if problem is not None:
            backup, n = path.with_name(path.name + ".corrupt"), 1
            while backup.exists():
                n += 1
                backup = path.with_name(f"{path.name}.corrupt-{n}")
            try:
                atomic_write(backup, path.read_bytes())
                where = f"kept as {backup}"
            except OSError:
                where = "not kept"
            warn_bad(path, problem, f"rewritten with the new record (old content {where})")
        new = change(old)
        atomic_write(path, json.dumps(new, indent=1, sort_keys=True, allow_nan=False) + "\n")
    return new

"""Exception hierarchy of tiledsl.

Every error is picklable (so a search worker process can return it) and carries what reproduces it.
``SpecError`` and ``ScheduleError`` subclass ``ValueError`` so callers can catch bad input plainly.
"""

from __future__ import annotations


class TiledslError(Exception):
    """Base class of every tiledsl error."""


class SpecError(TiledslError, ValueError):
    """An operation or its arguments are invalid (shape, dtype, layout, device placement)."""


class SpecTypeError(TiledslError, TypeError):
    """An argument has the wrong type (e.g. a NumPy host array where a GPU array is needed)."""


class ScheduleError(TiledslError, ValueError):
    """A schedule breaks a rule of its rule table; the message names field, value, limit and rule."""

    def __init__(self, message: str, rule: str = "") -> None:
        super().__init__(message)
        self.rule = rule

    def __reduce__(self):
        return (type(self), (self.args[0], self.rule))


class ResourceError(ScheduleError):
    """A schedule needs more of a device resource (shared memory, threads) than the device has."""


class CompileError(TiledslError):
    """NVRTC rejected the generated source. Keeps the source, options and the compiler log."""

    def __init__(self, message: str, source: str = "", options: tuple = (), log: str = "") -> None:
        super().__init__(message)
        self.source = source
        self.options = tuple(options)
        self.log = log

    def __reduce__(self):
        return (type(self), (self.args[0], self.source, self.options, self.log))

    def __str__(self) -> str:
        numbered = "\n".join(f"{i + 1:4d}  {line}" for i, line in enumerate(self.source.splitlines()))
        return f"{self.args[0]}\noptions: {' '.join(self.options)}\n--- NVRTC log ---\n{self.log}\n--- source ---\n{numbered}"


class LaunchError(TiledslError, RuntimeError):
    """A kernel launch failed or no CUDA device is available."""


class ToolchainError(TiledslError, RuntimeError):
    """CuPy or NVRTC is missing or unusable; the message names the package to install."""


class BadFileWarning(UserWarning):
    """A file tiledsl reads (kernel cache, tuned-schedule store, calibration, shipped schedules) was bad:
    truncated, corrupt, of the wrong shape or from another version. It was skipped (and, where it is a
    cache, rebuilt); the message names the file and what was wrong."""

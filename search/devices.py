"""Which GPUs one ``search.tune`` run measures on: ``--gpus``, the devices present, pinning a worker.

* :func:`parse_gpus` is the argparse type of ``--gpus``: ``all`` or a comma-separated list of distinct
  device indices >= 0 (``0,1``); anything else is a usage error naming the value.
* :func:`devices_present` counts the devices a run may use: the CUDA devices this process sees
  (``CUDA_VISIBLE_DEVICES`` applies), or, for ``--model-only``, simulated devices that are only labels
  (as many as there are GPUs, at least one; ``TILEDSL_SIMULATED_GPUS=N`` sets N, which is how the CPU
  tests run two devices).
* :func:`resolve` turns the request into device indices, or says which index does not exist and which
  devices do.
* :func:`pinned` sets ``CUDA_VISIBLE_DEVICES`` for a worker process started inside it (``spawn``: the
  child's environment is the parent's at start), so the worker's CUDA context sees only its device,
  as device 0, before any CUDA call of its own.
"""

from __future__ import annotations

import argparse
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

SIMULATED_ENV = "TILEDSL_SIMULATED_GPUS"  # --model-only: how many devices to simulate (a count >= 1)
_ENV_LOCK = threading.Lock()


@dataclass(frozen=True)
class GpuRequest:
    """What ``--gpus`` asked for.

    Attributes:
        text: the flag's value as given.
        indices: the device indices in the order given, or None for ``all``.
    """

    text: str
    indices: tuple[int, ...] | None


def parse_gpus(text: str) -> GpuRequest:
    """argparse type of ``--gpus``: ``all`` or distinct device indices >= 0 separated by commas.

    Raises:
        argparse.ArgumentTypeError: empty, not an integer, negative, or an index given twice.
    """
    if text.strip().lower() == "all":
        return GpuRequest(text, None)
    parts = [p.strip() for p in text.split(",")]
    if not parts or any(p == "" for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r}: give 'all' or device indices separated by commas, e.g. 0,1")
    indices = []
    for p in parts:
        try:
            i = int(p)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: {p!r} is not a device index (an integer >= 0) "
                                             "or 'all'") from None
        if i < 0:
            raise argparse.ArgumentTypeError(f"{text!r}: device index {i} is negative; indices are integers >= 0")
        if i in indices:
            raise argparse.ArgumentTypeError(f"{text!r} lists device {i} twice; each device takes one worker")
        indices.append(i)
    return GpuRequest(text, tuple(indices))


@dataclass(frozen=True)
class Devices:
    """The devices a run may use.

    Attributes:
        count: how many (indices 0 .. count-1).
        simulated: True when they are labels of a ``--model-only`` run, not CUDA devices.
        names: the CUDA devices' names, by index (empty when simulated).
    """

    count: int
    simulated: bool
    names: tuple[str, ...] = ()

    def describe(self) -> str:
        """e.g. ``0, 1 (2 CUDA devices: NVIDIA H200, NVIDIA H200)`` or ``0 (1 simulated device)``."""
        idx = ", ".join(map(str, range(self.count))) or "none"
        kind = "simulated device" if self.simulated else "CUDA device"
        what = f"{self.count} {kind}{'s' if self.count != 1 else ''}"
        if self.simulated:
            what += f"; {SIMULATED_ENV}=N simulates N"
        elif self.names:
            what += ": " + ", ".join(self.names)
        return f"{idx} ({what})"


def cuda_device_names() -> tuple[str, ...]:
    """Names of the CUDA devices this process sees (``CUDA_VISIBLE_DEVICES`` applies); () without a
    driver, a device or CuPy."""
    try:
        import cupy

        n = cupy.cuda.runtime.getDeviceCount()
        names = []
        for i in range(n):
            name = cupy.cuda.runtime.getDeviceProperties(i)["name"]
            names.append(name.decode() if isinstance(name, bytes) else str(name))
        return tuple(names)
    except Exception:  # no CuPy, no driver, no device
        return ()


def devices_present(model_only: bool) -> Devices:
    """The devices ``--gpus`` may name.

    Args:
        model_only: the run predicts instead of measuring (``--model-only``, or no GPU here).

    Raises:
        ValueError: ``TILEDSL_SIMULATED_GPUS`` is set for a model-only run but is not an integer >= 1.
    """
    if model_only:
        env = os.environ.get(SIMULATED_ENV)
        if env is not None:
            try:
                n = int(env)
            except ValueError:
                n = 0
            if n < 1:
                raise ValueError(f"{SIMULATED_ENV}={env!r} must be an integer >= 1 (devices to simulate)")
            return Devices(n, True)
        return Devices(max(1, len(cuda_device_names())), True)
    names = cuda_device_names()
    return Devices(len(names), False, names)


def resolve(req: GpuRequest | None, present: Devices) -> tuple[int, ...]:
    """Device indices of ``--gpus`` (absent: device 0 only, as a run without the flag always did).

    Raises:
        ValueError: an index that is not present, or no device at all (the message names the flag,
            the value and the devices present).
    """
    if req is None:
        return (0,)
    if present.count == 0:
        raise ValueError(f"--gpus {req.text}: no device is present here; devices available: {present.describe()}")
    if req.indices is None:
        return tuple(range(present.count))
    missing = [i for i in req.indices if i >= present.count]
    if missing:
        raise ValueError(f"--gpus {req.text}: device {missing[0]} does not exist here; devices available: "
                         f"{present.describe()}")
    return req.indices


def visible_value(index: int) -> str:
    """The ``CUDA_VISIBLE_DEVICES`` value showing a child only device ``index`` of this process's devices
    (an entry of this process's own ``CUDA_VISIBLE_DEVICES`` when that is set, so ``CUDA_VISIBLE_DEVICES=2,3``
    with ``--gpus 1`` pins the worker to physical device 3)."""
    parent = os.environ.get("CUDA_VISIBLE_DEVICES")
    if parent is not None:
        entries = [e.strip() for e in parent.split(",") if e.strip()]
        if index < len(entries):
            return entries[index]
    return str(index)


@contextmanager
def pinned(index: int | None) -> Iterator[None]:
    """``CUDA_VISIBLE_DEVICES`` set to device ``index`` (:func:`visible_value`) while a worker process is
    started (``index`` None: the environment as it is); restored afterwards."""
    if index is None:
        yield
        return
    with _ENV_LOCK:
        old = os.environ.get("CUDA_VISIBLE_DEVICES")
        os.environ["CUDA_VISIBLE_DEVICES"] = visible_value(index)
        try:
            yield
        finally:
            if old is None:
                os.environ.pop("CUDA_VISIBLE_DEVICES", None)
            else:
                os.environ["CUDA_VISIBLE_DEVICES"] = old

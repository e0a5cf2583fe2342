"""Test tiers: CPU tests always run; ``@pytest.mark.gpu`` tests skip, with the reason, without a GPU."""

from __future__ import annotations

import pytest


def _gpu_reason() -> str | None:
    try:
        import cupy

        n = cupy.cuda.runtime.getDeviceCount()
        if n < 1:
            return "no CUDA device present"
        return None
    except Exception as exc:  # cupy missing, no driver (cudaErrorInsufficientDriver), no device
        from tiledsl.target import no_gpu_message

        return no_gpu_message(exc).split(". Running a kernel")[0]


def pytest_collection_modifyitems(config, items):
    reason = _gpu_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory):
    """Tests never read or write the user's ~/.cache/tiledsl (tuned schedules, kernels, calibration)."""
    import os

    old = os.environ.get("TILEDSL_CACHE_DIR")
    os.environ["TILEDSL_CACHE_DIR"] = str(tmp_path_factory.mktemp("tiledsl-cache"))
    yield
    if old is None:
        os.environ.pop("TILEDSL_CACHE_DIR", None)
    else:
        os.environ["TILEDSL_CACHE_DIR"] = old


@pytest.fixture
def rng():
    """A fresh NumPy generator per test (fresh random data; never zeros)."""
    import numpy as np

    return np.random.default_rng()


@pytest.fixture(autouse=True)
def _tune_results_in_tmp(tmp_path, monkeypatch):
    """``search.tune`` without ``--export`` writes into tune-out/ of the working directory: in tests, the
    test's own tmp_path instead (never the checkout)."""
    import sys

    tune = sys.modules.get("search.tune")
    if tune is not None:
        monkeypatch.setattr(tune, "DEFAULT_OUT", str(tmp_path / "tune-out"))


@pytest.fixture
def fake_empty():
    """``cupy.empty`` over fake device memory (no GPU): CuPy views of addresses 16 MiB apart from 2^40 on,
    256-byte aligned, for tests of the host-side call path whose launches are recorded, not run."""
    import itertools

    import cupy
    import numpy as np

    addresses = itertools.count(1 << 40, 1 << 24)

    def empty(shape, dtype=np.float32, order="C"):
        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (int(shape),)
        dt = np.dtype(dtype)
        nbytes = max(1, int(np.prod(shape, dtype=np.int64))) * dt.itemsize
        mem = cupy.cuda.UnownedMemory(next(addresses), nbytes, None, device_id=0)
        return cupy.ndarray(shape, dt, cupy.cuda.MemoryPointer(mem, 0))

    return empty

"""The cost model standing in for a GPU worker: ``--model-only`` on several (simulated) devices.

:class:`ModelWorker` is a :class:`search.measure.GpuWorker` whose child process answers the same
requests (``measure``, ``remeasure``, ``vendor``, ``info``, ``stop``) with ``tiledsl.costmodel`` for a
known GPU instead of running kernels: a "measured" time is the prediction from the schedule alone, the
value a single-process ``--model-only`` run records for the same schedule. So a multi-device run, its
dispatch, claims, heartbeats and final pass on one device, can be rehearsed and tested without a GPU.
There is no vendor library to time: ``vendor`` answers ``ok: False`` and ``remeasure`` returns no
vendor times.
"""

from __future__ import annotations

import time

from .measure import GpuWorker
from .objective import load_model


def _model_main(conn, family: str, op_dict: dict, device_name: str) -> None:
    """Child process: answer requests with the cost model for ``device_name`` (a known-GPU name)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the tuner's to handle (search.interrupt)
    import tiledsl
    from tiledsl.api import family as get_family

    fam = get_family(family)
    op = fam.op_type.from_dict(op_dict)
    target = tiledsl.Target.known(device_name)
    model = load_model()
    while True:
        try:
            req = conn.recv()
        except EOFError:
            return
        cmd = req["cmd"]
        t0 = time.perf_counter()
        try:
            if cmd == "stop":
                return
            if cmd == "info":
                conn.send({"ok": True, "target": target.to_dict(), "stand_in": model.label})
            elif cmd == "vendor":
                conn.send({"ok": False, "error": f"no vendor library: {model.label} stands in for the GPU"})
            elif cmd == "measure":
                p = model.explain(op, fam.schedule_type.from_dict(req["schedule"]), target)["predicted_s"]
                if p is None:
                    conn.send({"ok": False, "stage": "predict", "error": "the cost model could not predict this schedule"})
                    continue
                conn.send({"ok": True, "median_ms": p * 1e3, "p10_ms": p * 1e3, "p90_ms": p * 1e3, "repeats": 1,
                           "spread": 0.0, "timing": f"predicted ({model.label})", "max_rel_err": 0.0,
                           "verify_s": 0.0, "measure_s": time.perf_counter() - t0})
            elif cmd == "remeasure":
                rounds = req.get("rounds", 7)
                times = []
                for d in req["schedules"]:
                    p = model.explain(op, fam.schedule_type.from_dict(d), target)["predicted_s"]
                    times.append([(p or float("inf")) * 1e3] * rounds)
                conn.send({"ok": True, "times_ms": times, "vendor_ms": None})
            else:
                conn.send({"ok": False, "error": f"unknown command {cmd!r}"})
        except Exception as exc:  # a bug of the model: that request fails, the worker carries on
            conn.send({"ok": False, "stage": "worker", "error": f"{type(exc).__name__}: {exc}"})


class ModelWorker(GpuWorker):
    """A :class:`GpuWorker` whose process predicts with the cost model for ``device_name`` (no GPU).

    Args:
        family: op family name.
        op_dict: the op as a dict.
        device_name: the known GPU modelled (``tiledsl.Target.known`` name, e.g. ``"H200"``).
        device: the simulated device's index (a label; the process never touches CUDA).
        timeout_s: longest one request may take (seconds).
    """

    name = "tiledsl-model-worker"

    def __init__(self, family: str, op_dict: dict, device_name: str, device: int | None = None,
                 timeout_s: float = 120.0) -> None:
        self.device_name = device_name
        super().__init__(family, op_dict, timeout_s=timeout_s, device=device)

    def _main_args(self) -> tuple:
        return _model_main, (self.family, self.op_dict, self.device_name)

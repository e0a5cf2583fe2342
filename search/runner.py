"""How a ``search.tune`` run evaluates candidates: the compile pool and the device workers.

:class:`Runner` owns the processes: a spawn ``ProcessPoolExecutor`` compiling upcoming candidates
(:func:`search.measure.compile_job`) and one worker process per device (:class:`search.measure.GpuWorker`
measuring, or :class:`search.model_worker.ModelWorker` predicting for simulated devices). With neither
(``--model-only`` on one device) it evaluates inline: the screened prediction is the value. Its
:meth:`Runner.search` keeps the pipeline full: it asks the :class:`search.trials.TrialBook` for screened
candidates while there is room and budget, sends the oldest compiled one to the next idle device in turn and hands
every answer back to the book.
"""

from __future__ import annotations

import os
import time
from collections import deque
from dataclasses import dataclass
from multiprocessing import Pipe
from multiprocessing.connection import wait

from .interrupt import DeferredInterrupt, ignore_in_child
from .measure import GpuWorker, compile_job
from .model_worker import ModelWorker
from .trials import Candidate, TrialBook


@dataclass(frozen=True)
class Budget:
    """When the search stops asking: ``trials`` evaluated (in flight included), ``max_asks`` points asked, or
    the ``deadline`` (``time.monotonic()`` seconds; None: no time limit)."""

    trials: int
    max_asks: int
    deadline: float | None = None

    def open(self, evaluated: int, asked: int) -> bool:
        return (evaluated < self.trials and asked < self.max_asks
                and (self.deadline is None or time.monotonic() < self.deadline))


class Runner:
    """The compile pool and the device workers of one run (see the module docstring).

    Args:
        family: op family name; ``op``: the op; ``target``: the device (its model for ``--model-only``).
        workers: one per device (empty: evaluate inline); ``workers[0]`` times the vendor library and
            re-measures the finalists.
        devices: the device index of each worker (``(0,)`` without ``--gpus``).
        pool: the compile pool (None: nothing is compiled during the search).
        depth: candidates asked ahead (pending compile or measurement) at most.
    """

    def __init__(self, family: str, op, target, workers: list, devices: tuple[int, ...], pool, depth: int) -> None:
        self.family, self.op, self.target = family, op, target
        self.workers, self.devices, self.pool, self.depth = workers, devices, pool, depth
        self.inline = not workers
        self.pending: deque = deque()  # (candidate, compile future or None), asked and not yet measured, in ask order
        self.busy: dict[int, Candidate] = {}  # worker index -> the candidate it is measuring
        self._last = -1  # the worker last sent a candidate (the next idle one after it goes first)
        self._wake_r, self._wake_w = Pipe(duplex=False)  # a compile finished (written from the pool's callback thread)

    @classmethod
    def start(cls, family: str, op, target, model_only: bool, gpus: tuple[int, ...] | None, jobs: int | None,
              out=print, gpu_worker=GpuWorker, model_worker=ModelWorker) -> Runner:
        """Start the processes a run needs: measured: the compile pool and a GPU worker per device;
        ``--model-only`` on several (simulated) devices: a cost-model worker per device; else none.

        Args:
            gpu_worker / model_worker: the worker classes (tests put stand-ins here).
        """
        devices = gpus or (0,)
        workers: list = []
        pool = None
        if model_only and len(devices) > 1:  # the cost model stands in for each device's GPU worker
            workers = [model_worker(family, op.to_dict(), target.name, device=d) for d in devices]
            out(f"{len(devices)} simulated devices {', '.join(map(str, devices))}: one cost-model worker process each")
        if not model_only:
            from concurrent.futures import ProcessPoolExecutor
            from multiprocessing import get_context

            n = jobs or max(1, min(max(8, 4 * len(devices)), (os.cpu_count() or 2) - 1))
            pool = ProcessPoolExecutor(max_workers=n, mp_context=get_context("spawn"), initializer=ignore_in_child)
            workers = [gpu_worker(family, op.to_dict(), device=None if gpus is None else d) for d in devices]
            if len(workers) > 1:
                out(f"{len(workers)} GPU workers, devices {', '.join(map(str, devices))} (one process and CUDA "
                    f"context each), fed by one pool of {n} compile processes; the final re-measurement runs on "
                    f"device {devices[0]}")
        depth = 1 if not workers else (jobs or 4) + 2 * len(workers)
        return cls(family, op, target, workers, devices, pool, depth)

    @property
    def final_worker(self):
        """The worker that re-measures the finalists (the first listed device's), or None."""
        return self.workers[0] if self.workers else None

    def vendor(self) -> dict:
        """The first device's timing of the vendor library (``{"ok", "median_ms" | "error"}``)."""
        return self.workers[0].call({"cmd": "vendor"}, timeout_s=300)

    @property
    def in_flight(self) -> int:
        return len(self.pending) + len(self.busy)

    def _wake(self, _fut) -> None:
        try:
            self._wake_w.send_bytes(b".")
        except OSError:  # closed at the end of the run
            pass

    def submit(self, c: Candidate) -> None:
        """Queue ``c`` for a device; measured: compile it in the pool first (predicting it there unless its
        prediction is known, and again from the compiled kernel's ptxas figures)."""
        fut = None
        if self.pool is not None:
            fut = self.pool.submit(compile_job, self.family, self.op.to_dict(), c.schedule.to_dict(),
                                   self.target.arch, self.target, c.predicted_s is None)
            fut.add_done_callback(self._wake)
        self.pending.append((c, fut))

    def search(self, book: TrialBook, budget: Budget, intr: DeferredInterrupt) -> None:
        """Evaluate candidates from ``book`` until the budget is spent or Ctrl-C, then stop the search's
        processes (the first device's worker stays for the finalists, unless ``--model-only``).

        A second Ctrl-C (KeyboardInterrupt) stops at once, with ``intr.requested`` set.
        """
        try:
            while True:
                while (self.in_flight < self.depth and not intr.requested
                       and budget.open(book.observer.counts.evaluated() + self.in_flight, book.asked)):
                    c = book.next()
                    if c is None:
                        continue
                    if self.inline:
                        book.predicted_outcome(c)
                    else:
                        self.submit(c)
                if not self.busy and (intr.requested or not self.pending):
                    break
                self._step(book, intr)
        except KeyboardInterrupt:  # a second Ctrl-C: stop at once
            intr.requested = True
        finally:
            self._stop_search(book)

    def _idle(self) -> list[int]:
        """The idle workers, in turn from the one after the last sent to: each device gets its share even where
        answers come back faster than the next candidate compiles."""
        n = len(self.workers)
        return [i % n for i in range(self._last + 1, self._last + 1 + n) if i % n not in self.busy]

    def _send(self, i: int, c: Candidate, book: TrialBook) -> None:
        self.workers[i].send(book.measure_request(c.schedule))
        self.busy[i] = c
        self._last = i

    def _dispatch(self, book: TrialBook, intr: DeferredInterrupt, compiled_only: bool = False) -> bool:
        """Send the oldest candidate, if compiled, to the next idle device in turn; whether one was taken (a
        candidate whose compile failed is told FAIL by ``book`` and not sent). ``compiled_only``: leave a failed
        compile in place (to be told where it always was, after the asks that refill the pipeline)."""
        idle = self._idle()
        fut = self.pending[0][1] if self.pending else None
        if not (self.pending and idle and not intr.requested and (fut is None or fut.done())):
            return False
        if compiled_only and fut is not None and not (fut.exception() is None and fut.result().get("ok")):
            return False
        c, fut = self.pending.popleft()
        if book.ready_to_measure(c, None if fut is None else fut.result()):
            self._send(idle[0], c, book)
        return True

    def _step(self, book: TrialBook, intr: DeferredInterrupt) -> None:
        """Send the oldest compiled candidate to the next idle device in turn, or wait for a device's answer (or
        the oldest candidate's compile, when a device is idle), hand it to ``book`` and then send the oldest
        candidate, if it compiled, to the next idle device before :meth:`search` asks for more points (each ask is a
        sampler call and the rule screen, tens of milliseconds to 0.1 s, often several per candidate: a device
        would wait through them).

        Answers and failed compiles are handed to ``book`` only where they were before that early send: answers
        here, when the pipeline is full or the budget spent, and a failed compile when it is dispatched after the
        refill. So with one device a run asks and tells in the same order whatever the compile and measurement
        times, and a fixed ``--seed`` repeats the study."""
        if self._dispatch(book, intr):
            return
        idle = self._idle()
        waits = [self.workers[i].connection for i in self.busy] + ([self._wake_r] if self.pending and idle else [])
        wait(waits, timeout=min([1.0, *(self.workers[i].seconds_left() for i in self.busy)]))
        while self._wake_r.poll():
            self._wake_r.recv_bytes()
        answered = False
        for i in [i for i in self.busy if self.workers[i].ready()]:
            book.measured(self.busy.pop(i), self.workers[i].receive(), self.devices[i])
            answered = True
        if answered:
            self._dispatch(book, intr, compiled_only=True)

    def _stop_search(self, book: TrialBook) -> None:
        for _, fut in self.pending:
            if fut is not None:
                fut.cancel()
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
        book.close()
        book.observer.bar.close()  # after the clean-up: its seconds stay on the search's bar
        # measured (a compile pool): the first device's worker stays to re-measure the finalists (see close)
        for w in self.workers[1:] if self.pool is not None else self.workers:
            w.close()
        self._wake_w.close()
        self._wake_r.close()

    def close(self) -> None:
        """Stop the worker :meth:`search` left running for the finalists (measured mode), after them."""
        if self.pool is not None and self.workers:
            self.workers[0].close()

"""search.runner.Runner's pipeline with stub workers and a stub book (CPU only): a device is fed between asks."""

from __future__ import annotations

from multiprocessing import Pipe
from types import SimpleNamespace

from search.interrupt import DeferredInterrupt
from search.runner import Budget, Runner


class StubOp:
    def to_dict(self) -> dict:
        return {}


class StubSchedule(str):
    """A candidate's schedule: its name, and ``to_dict`` as Runner.submit calls it."""

    def to_dict(self) -> str:
        return str(self)


class StubWorker:
    """Answers a request as soon as it is sent (``ready`` at once), logging what it was sent."""

    def __init__(self, log: list) -> None:
        self.log, self.request = log, None
        self.connection, self._w = Pipe(duplex=False)  # always readable: Runner._step's wait returns at once
        self._w.send_bytes(b".")

    def send(self, req) -> None:
        assert self.request is None, "a second request to a busy worker"
        self.request = req
        self.log.append(f"send {req}")

    def ready(self) -> bool:
        return self.request is not None

    def receive(self) -> dict:
        req, self.request = self.request, None
        return {"ok": True, "median_ms": 1.0, "req": req}

    def seconds_left(self) -> float:
        return 1.0

    def close(self) -> None:
        pass


class StubBook:
    """Asks in the order of ``answers`` (None: a point pruned by a rule or a duplicate; else a candidate name)."""

    def __init__(self, answers: list, log: list) -> None:
        self.answers, self.log, self.asked, self.done = list(answers), log, 0, []
        counts = SimpleNamespace(evaluated=lambda: len(self.done))
        self.observer = SimpleNamespace(counts=counts, bar=SimpleNamespace(close=lambda: None))

    def next(self):
        self.asked += 1
        c = self.answers.pop(0)
        self.log.append(f"ask {c}")
        return None if c is None else SimpleNamespace(schedule=StubSchedule(c), predicted_s=1.0)

    def ready_to_measure(self, c, res) -> bool:
        return True

    def measure_request(self, schedule):
        return str(schedule)

    def measured(self, c, res, device) -> None:
        assert res["req"] == str(c.schedule)
        self.done.append(str(c.schedule))
        self.log.append(f"measured {c.schedule}")

    def close(self) -> None:
        pass


def test_the_device_freed_by_an_answer_gets_the_next_candidate_before_more_asks():
    """An answer frees the device: the next compiled candidate goes to it at once, and the asks that refill the
    pipeline (some pruned by the rules: None) come after, while it measures."""
    log: list = []
    book = StubBook(["a", "b", None, None, "c", None, "d"], log)
    runner = Runner("gemm", None, None, [StubWorker(log)], (0,), None, depth=2)
    runner.search(book, Budget(trials=4, max_asks=7), DeferredInterrupt())
    assert book.done == ["a", "b", "c", "d"]
    assert log == ["ask a", "ask b", "send a", "measured a", "send b", "ask None", "ask None", "ask c",
                   "measured b", "send c", "ask None", "ask d", "measured c", "send d", "measured d"], log


def test_two_devices_take_candidates_in_turn():
    """Answers that come back before the next candidate is compiled do not leave the second device idle."""
    log: list = []
    book = StubBook(["a", "b", "c", "d"], log)
    workers = [StubWorker(log), StubWorker(log)]
    runner = Runner("gemm", None, None, workers, (0, 1), None, depth=1)
    sent_to = []
    for i, w in enumerate(workers):
        send = w.send
        w.send = lambda req, i=i, send=send: (sent_to.append(i), send(req))
    runner.search(book, Budget(trials=4, max_asks=4), DeferredInterrupt())
    assert book.done == ["a", "b", "c", "d"] and sent_to == [0, 1, 0, 1], (sent_to, log)


class StubPool:
    """Compiles at once: candidate "x" fails, every other one succeeds."""

    def submit(self, fn, family, op, schedule, *args):
        from concurrent.futures import Future

        fut = Future()
        fut.set_result({"ok": schedule != "x", "error": "stub compile error"})
        return fut

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        pass


def test_a_failed_compile_is_told_after_the_refill_as_before():
    """Right after an answer, only a candidate that compiled is sent early: a failed compile is told FAIL after the
    ask that refills the pipeline, where the runner always told it (the sampler's next point depends on the order)."""
    log: list = []
    book = StubBook(["a", "x", "b", "c"], log)

    def ready_to_measure(c, res) -> bool:
        if res is not None and not res["ok"]:
            log.append(f"FAIL {c.schedule}")
            book.done.append(str(c.schedule))
            return False
        return True

    book.ready_to_measure = ready_to_measure
    runner = Runner("gemm", StubOp(), SimpleNamespace(arch="sm_90"), [StubWorker(log)], (0,), StubPool(), depth=2)
    runner.search(book, Budget(trials=4, max_asks=4), DeferredInterrupt())
    assert log == ["ask a", "ask x", "send a", "measured a", "ask b", "FAIL x", "ask c", "send b", "measured b",
                   "send c", "measured c"], log

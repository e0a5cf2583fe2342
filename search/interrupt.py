"""Ctrl-C during a search: finish the step in hand, keep the study consistent, report, exit 130; and no process
outliving the one that started it (:func:`exit_with_parent`).

The first SIGINT only sets :attr:`DeferredInterrupt.requested`; the tuner checks it between steps, so
no storage write is cut in half (a ``KeyboardInterrupt`` raised inside an SQLAlchemy commit surfaces
as ``StorageInternalError`` and can leave the trial RUNNING). A second SIGINT raises
``KeyboardInterrupt`` at once. Worker processes ignore SIGINT (:func:`ignore_in_child`): the terminal
sends it to the whole process group, and the tuner decides for them.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a process ended by Ctrl-C


class DeferredInterrupt:
    """Context manager turning the first Ctrl-C into a flag (main thread only; elsewhere a no-op)."""

    def __init__(self, say=None) -> None:
        self.requested = False
        self._old = None
        self._say = say or (lambda text: print(text, file=sys.stderr, flush=True))

    def _handler(self, signum, frame) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        self._say("\ninterrupted: finishing the step in hand, then the report of what was measured "
                  "(Ctrl-C again to stop at once)")

    def __enter__(self) -> DeferredInterrupt:
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc) -> None:
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)
            self._old = None


EXIT_WITH_PARENT_ENV = "TILEDSL_EXIT_WITH_PARENT"
"""Set to "1" in a ``search.tune`` process's environment (``benchmarks/tune_workloads.py`` does): it then ends when the
process that started it is gone (:func:`exit_with_parent`)."""


def exit_with_parent(interval_s: float = 1.0) -> None:
    """End this process (``os._exit(1)``) within ``interval_s`` of its parent's death, seen as a change of the parent
    pid (the orphan is re-parented to init or a subreaper): a daemon thread polls it. So the compile workers of a
    killed tuner, or the tune of a killed pass, do not run on beside the next one. Portable, and safe in any thread
    (unlike ``PR_SET_PDEATHSIG``, tied to the thread that forked, and set between fork and exec)."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(interval_s)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="tiledsl-exit-with-parent", daemon=True).start()


def ignore_in_child() -> None:
    """Process-pool initializer: SIGINT is the parent's to handle, and the worker ends with its parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    exit_with_parent()

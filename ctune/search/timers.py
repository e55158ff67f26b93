"""Where a search's wall time goes: waiting on builds, measuring, confirming.

The report's timing (``result.Timing``) and the progress ETA read these; a resumed
search adds the time its journal already holds to what it journals, so a trial's
``elapsed_s`` is search time, not this session's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING

from ctune.search.result import Timing

if TYPE_CHECKING:
    from ctune.records import Build


class Timers:
    """Clock readings of one search session, summed by what the driver was doing."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.started = clock()
        self.resumed_s = 0.0  # search time the resumed journal already holds
        self.session_evals = 0  # trials evaluated in this session (the ETA's rate)
        self.compile_wait_s = 0.0
        self.measure_s = 0.0
        self.confirm_s = 0.0
        self.compile_cpu_s = 0.0
        self._cpu_lock = threading.Lock()  # builds made ahead end in the compiler's threads

    def add_compile_cpu(self, build: Build) -> None:
        """Count a build this search compiled (a cache hit was compiled before)."""
        if not build.cache_hit:
            with self._cpu_lock:
                self.compile_cpu_s += build.compile_s

    def count_when_built(self, future: Future[Build]) -> None:
        """Count a build made ahead of its trial (which then finds it in the cache) when
        it is done; one that fails to finish is not counted."""
        future.add_done_callback(
            lambda f: None if f.cancelled() or f.exception() else self.add_compile_cpu(f.result())
        )

    def elapsed(self) -> float:
        """This session's wall time."""
        return self.clock() - self.started

    def search_elapsed(self) -> float:
        """Search time, the resumed journal's included: what a journaled trial records."""
        return self.resumed_s + self.elapsed()

    def timing(self) -> Timing:
        return Timing(
            self.elapsed(), self.compile_wait_s, self.measure_s, self.confirm_s, self.compile_cpu_s
        )


__all__ = ["Timers"]

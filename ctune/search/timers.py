"""Where a search's wall time goes: waiting on builds, measuring, confirming.

The report's timing (``result.Timing``) and the progress ETA read these; a resumed
search adds the time its journal already holds to what it journals, so a trial's
``elapsed_s`` is search time, not this session's.
"""

from __future__ import annotations

from collections.abc import Callable

from ctune.search.result import Timing


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

"""The journal a search writes, and the device it measures on.

Every trial is appended to the journal (fsync'd) before it is accounted in the trial
book; confirmation rounds are appended as they end, and a resumed search takes back
the rounds its journal already holds for the same trials. The writer needs only the
book and the timers: the stages that measure (pipeline, confirmation) write through it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctune.interrupts import NOTHING_WRITTEN
from ctune.records import Measurement, Trial
from ctune.search import journal as journal_mod

if TYPE_CHECKING:
    from ctune.search.timers import Timers
    from ctune.search.trial_book import TrialBook


def device_label(measurement: Measurement | None) -> str | None:
    """The journal's device identity: model and SM, not the driver (which may update)."""
    from ctune.evidence.identity import gpu_label

    if measurement is None or measurement.device is None:
        return None
    return gpu_label(measurement.device)


def kept_line(path: Path, trials: int, rounds: int = 0) -> str:
    """What an interrupted search kept, for the line it ends with."""
    confirmed = f" and {rounds} confirmation round(s)" if rounds else ""
    return f"journal {path} keeps {trials} trial(s){confirmed}; continue with --resume {path}"


class JournalWriter:
    """The journal of one search session, what it was opened with, and its device."""

    def __init__(self, book: TrialBook, timers: Timers) -> None:
        self.book = book
        self.timers = timers
        self.journal: journal_mod.Journal | None = None
        self.header: dict[str, Any] = {}
        self.device: str | None = None
        self.device_checked = True
        #: the resumed journal's confirmation rounds; those of the confirmation of the
        #: same trials are taken back (chosen when it starts) instead of measured again
        self.resumed_rounds: list[journal_mod.ConfirmationRound] = []
        self._replayable: list[journal_mod.ConfirmationRound] | None = None
        self.rounds = 0  # this confirmation's rounds in the journal: taken back or written

    def kept(self) -> str:
        """What an interrupt now keeps: the journal and what is in it, or nothing."""
        if self.journal is None:
            return NOTHING_WRITTEN
        rounds = self.rounds if self._replayable is not None else len(self._same_trials())
        return kept_line(self.journal.path, len(self.book.trials), rounds)

    # --- confirmation rounds ---------------------------------------------------------------
    def _same_trials(self) -> list[journal_mod.ConfirmationRound]:
        """The resumed journal's last confirmation of the trials the book now holds."""
        trials = len(self.book.trials)
        mine = [r for r in self.resumed_rounds if r.trials == trials]
        starts = [i for i, r in enumerate(mine) if r.round == 1]
        return mine[starts[-1] :] if starts else []

    def take_round(self, keys: set[str]) -> dict[str, Measurement] | None:
        """The next journaled round of this confirmation when it measured exactly ``keys``
        (what this round is about to measure), else None: from the first round that
        differs, every later one is measured afresh."""
        if self._replayable is None:
            self._replayable = self._same_trials()
        if not self._replayable:
            return None
        first = self._replayable.pop(0)
        if set(first.runs) != keys:
            self._replayable = []
            return None
        self.rounds += 1
        return dict(first.runs)

    def record_round(self, runs: Mapping[str, Measurement]) -> None:
        """Journal one confirmation round (fsync'd) as soon as it is measured."""
        assert self.journal is not None
        if self._replayable is None:
            self._replayable = []
        self.rounds += 1
        self.journal.append_round(len(self.book.trials), self.rounds, runs)

    # --- writing ----------------------------------------------------------------------------
    def check_device(self, measurement: Measurement | None) -> None:
        """On resume, the first measurement proves the GPU is the journal's (else refuse)."""
        if self.device_checked or measurement is None or self.journal is None:
            return
        label = device_label(measurement)
        if label is not None:
            journal_mod.check_identity(self.journal.path, self.header, {"device": label})
            self.device_checked = True

    def record(
        self,
        trial: Trial,
        filler: bool = False,
        same_as: str | None = None,
        skipped: Mapping[str, Any] | None = None,
    ) -> None:
        """Journal a finished trial, then account it (``skipped``: why the cost model
        ruled it out, ``cost_policy.py``)."""
        assert self.journal is not None
        self.check_device(trial.measurement)
        elapsed = self.timers.search_elapsed()
        self.journal.append(
            trial, filler=filler, elapsed_s=elapsed, same_binary_as=same_as, skipped=skipped
        )
        self.book.add(trial, same_as, filler)
        if trial.build is not None and not trial.build.cache_hit:
            self.timers.compile_cpu_s += trial.build.compile_s


__all__ = ["JournalWriter", "device_label", "kept_line"]

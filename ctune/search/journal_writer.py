"""The journal a search writes, and the device it measures on.

Every trial is appended to the journal (fsync'd) before it is accounted in the trial
book; a generation's record is appended once all of its candidates have trials, after
the strategy is told them; confirmation rounds are appended as they end, and a resumed
search takes back the rounds its journal already holds for the same trials. The trials
of a generation a stop cut short are held back on resume until that generation is asked
again: they answer it instead of being measured again (docs/journal-format.md). The
writer needs only the book and the timers: the stages that measure (pipeline,
confirmation) write through it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctune.interrupts import NOTHING_WRITTEN
from ctune.records import Measurement, Outcome, Trial
from ctune.search import journal as journal_mod

if TYPE_CHECKING:
    from ctune.search import Strategy
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


def complete(asked: Collection[str], trials: Sequence[Trial]) -> bool:
    """Whether every candidate of a generation (``asked``: their keys) has its trial among
    ``trials``. One a stop cut short is neither told to the strategy nor recorded: a resume
    asks it again, and its journaled trials answer (:meth:`JournalWriter.take`)."""
    have = {t.candidate.key() for t in trials}
    return all(key in have for key in asked)


@dataclass(frozen=True)
class Journaled:
    """A trial in the journal, held back on resume, with what the journal says beside it."""

    trial: Trial
    filler: bool = False
    same_as: str | None = None


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
        #: a resumed journal's trials of the generation a stop cut short, in journal order,
        #: by candidate key: not in the book until that generation is asked again
        self.held: dict[str, Journaled] = {}

    def kept(self) -> str:
        """What an interrupt now keeps: the journal and what is in it, or nothing."""
        if self.journal is None:
            return NOTHING_WRITTEN
        rounds = self.rounds if self._replayable is not None else len(self._same_trials())
        return kept_line(self.journal.path, self.trials(), rounds)

    def trials(self) -> int:
        """The trials the journal holds: those accounted and those held back."""
        return len(self.book.trials) + len(self.held)

    # --- a generation cut short, asked again ----------------------------------------------
    def held_skip(self, key: str) -> bool | None:
        """Whether the held-back trial of ``key`` is a cost-model skip (None: none held):
        a screen that meets it again takes the journal's verdict."""
        held = self.held.get(key)
        return None if held is None else held.trial.outcome is Outcome.SKIPPED

    def take(self, keys: Collection[str] | None = None) -> list[Trial]:
        """The held-back trials of ``keys`` (None: all of them), accounted in the book now
        in journal order and numbered as there, not written again."""
        wanted = self.held if keys is None else [k for k in self.held if k in keys]
        out = []
        for key in list(wanted):
            held = self.held.pop(key)
            trial = dataclasses.replace(held.trial, number=len(self.book.trials))
            self.book.add(trial, held.same_as, held.filler)
            out.append(trial)
        return out

    def end_generation(self, generation: int, strategy: Strategy, told: Sequence[Trial]) -> None:
        """A finished generation: ``told`` to ``strategy``, then its state journaled (the
        record that says the generation finished, from which a resume goes on)."""
        assert self.journal is not None
        strategy.tell(told)
        self.journal.append_state(generation, strategy.state())

    # --- confirmation rounds ---------------------------------------------------------------
    def _same_trials(self) -> list[journal_mod.ConfirmationRound]:
        """The resumed journal's last confirmation of the trials the journal now holds."""
        trials = self.trials()
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


__all__ = ["JournalWriter", "Journaled", "complete", "device_label", "kept_line"]

"""Confirmation in proportion: fresh processes only for what the decision needs.

Run-to-run noise dominates within-run noise, so what a search pins is re-measured in fresh
processes before it is reported. A fixed number of processes per member costs the same
whatever the evidence; this adds one fresh process (a round) at a time and stops once every
comparison is settled: separated by the report's rule (through :func:`separation` alone)
or futile, its effect under half the threshold. Who is measured, and the minimum of
:func:`min_processes` rounds the registry gate needs: docs/search.md.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ctune.records import Build, Measurement, Trial

if TYPE_CHECKING:
    from ctune.evidence.compare import Comparison, NoiseRule

#: an effect under this share of the threshold will not become significant: stop
FUTILE_SHARE = 0.5

#: measures the given items once, in one fresh process: candidate key -> measurement
RoundRunner = Callable[[Sequence[tuple[Trial, Build]]], Mapping[str, Measurement]]
#: the first objective, to minimise, of a member from its confirmation runs
ValueOf = Callable[[Build, Sequence[Measurement]], float | None]


def significance(
    member: Sequence[Measurement], baseline: Sequence[Measurement], rule: NoiseRule | None = None
) -> Comparison:
    """A member's latency against the baseline's, by the gate's comparison rule."""
    from ctune.evidence.compare import SampleSet, compare

    return compare(SampleSet.from_measurements(baseline), SampleSet.from_measurements(member), rule)


def separation(member: Sequence[Measurement], reference: Sequence[Measurement]) -> Comparison:
    """The one comparison rule of confirmation: is ``member`` told apart from ``reference``?"""
    return significance(member, reference)


def settled(verdict: Comparison) -> bool:
    """Separated, or too small a difference for more processes to separate it."""
    if verdict.significant:
        return True
    return not math.isnan(verdict.change) and abs(verdict.change) < FUTILE_SHARE * verdict.threshold


def _rule() -> NoiseRule:
    from ctune.evidence.compare import NoiseRule

    return NoiseRule()


def min_processes() -> int:
    """The processes per side the comparison rule (and so the gate) needs: its k."""
    return _rule().min_processes


@dataclass(frozen=True)
class ConfirmationCost:
    """What confirming cost, and why it stopped: "settled" (every comparison separated,
    or too close for more processes to matter), "limit" (the process limit was reached),
    "nothing to confirm" or "interrupted" (Ctrl-C: the rounds taken are journaled)."""

    seconds: float
    processes: int
    measurements: int
    limit: int
    stopped: str
    members: int = 0  # front members (baseline not included) that were re-measured
    #: each round's wall time: a fresh process's take-over and its measurements
    round_seconds: tuple[float, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "seconds": round(self.seconds, 3),
            "round_seconds": [round(s, 3) for s in self.round_seconds],
            "processes": self.processes,
            "measurements": self.measurements,
            "limit": self.limit,
            "stopped": self.stopped,
            "members": self.members,
        }


@dataclass
class _State:
    items: dict[str, tuple[Trial, Build]]
    baseline: str
    order: list[str]  # members, best search value first
    search_value: dict[str, float]
    runs: dict[str, list[Measurement]] = field(default_factory=dict)
    active: list[str] = field(default_factory=list)
    rounds_left: int = 0

    def ok(self, key: str) -> bool:
        return all(m.outcome.is_ok for m in self.runs[key])

    def members(self) -> list[str]:
        return [k for k in self.active if k != self.baseline and self.ok(k)]


def _search_value(trial: Trial, directions: Sequence[str]) -> float:
    from ctune.search.strategy import min_form

    point = min_form(trial, directions)
    return point[0] if point is not None else float("inf")


def confirm_in_proportion(
    items: Sequence[tuple[Trial, Build]],
    baseline_key: str,
    run_round: RoundRunner,
    value_of: ValueOf,
    *,
    directions: Sequence[str],
    limit: int,
    seed: int = 0,
    clock: Callable[[], float] | None = None,
    stop: Callable[[], bool] | None = None,
    references: Sequence[str] = (),
) -> tuple[dict[str, list[Measurement]], ConfirmationCost]:
    """Re-measure ``items`` (the baseline among them) round by round; returns every run
    taken, keyed by candidate key (members never measured are absent), and the cost.
    ``references`` are measured in every round, as the baseline is (a member another is
    compared with). ``stop`` (a Ctrl-C asked to stop) is asked before each round and once
    the last one ends: when it answers true, no further round starts and the cost says
    "interrupted", also where the round in flight was the last or settled it."""
    import time

    clock = clock or time.monotonic
    start = clock()
    by_key = {t.candidate.key(): (t, b) for t, b in items}
    members = [k for k in by_key if k != baseline_key]
    state = _State(
        by_key,
        baseline_key,
        sorted(members, key=lambda k: _search_value(by_key[k][0], directions)),
        {k: _search_value(by_key[k][0], directions) for k in members},
        {k: [] for k in by_key},
    )
    single = len(directions) == 1
    compared = baseline_key in by_key  # else nothing to compare with: all, every round
    state.active = (
        [baseline_key, *(_first_round(state) if single else state.order)]
        if compared
        else list(by_key)
    )
    state.active += [k for k in references if k in by_key and k not in state.active]
    decide = _decide_single if single else _decide_front
    floor = min(min_processes(), limit)
    rng = random.Random(seed)
    rounds = measurements = 0
    round_seconds: list[float] = []
    stopped = "limit" if limit > 0 and members else "nothing to confirm"
    while True:
        if stop is not None and stop():
            stopped = "interrupted"
            break
        if stopped == "settled" or not (rounds < limit and (members or rounds < floor)):
            break
        batch = [by_key[k] for k in state.active]
        rng.shuffle(batch)  # interleaved, in a different order in every process
        began = clock()
        got = run_round(batch)
        round_seconds.append(clock() - began)
        rounds += 1
        state.rounds_left = limit - rounds
        for key in state.active:
            if key in got:
                state.runs[key].append(got[key])
                measurements += 1
        if compared and members and decide(state, value_of, floor):
            stopped = "settled"
    runs = {k: v for k, v in state.runs.items() if v}
    cost = ConfirmationCost(
        clock() - start,
        rounds,
        measurements,
        limit,
        stopped,
        sum(1 for k in runs if k != baseline_key),
        tuple(round_seconds),
    )
    return runs, cost


def _close(state: _State, key: str, leader: str, threshold: float) -> bool:
    """``key``'s search value lies within ``threshold`` of ``leader``'s: the search alone
    cannot rule it out as the real leader."""
    best = state.search_value[leader]
    return state.search_value[key] - best <= threshold * abs(best)


def _first_round(state: _State) -> list[str]:
    """One objective: the search's leader, and from the start every runner-up within the
    rule's smallest threshold of it. Joining after the first round (the rule's threshold is
    unknown before the minimum of processes, so it is this same one) would cost one more
    fresh process for the same members (docs/search.md)."""
    if not state.order:
        return []
    leader, floor = state.order[0], _rule().floor
    return [leader, *(k for k in state.order[1:] if _close(state, k, leader, floor))]


def _enough(state: _State, keys: Sequence[str], floor: int) -> bool:
    return all(len(state.runs[k]) >= floor for k in keys)


def _decide_front(state: _State, value_of: ValueOf, floor: int) -> bool:
    """Several objectives: done once every surviving member is separated from the baseline."""
    members = state.members()
    if not _enough(state, [state.baseline, *members], floor) or not state.ok(state.baseline):
        return False
    base = state.runs[state.baseline]
    return bool(members) and all(settled(separation(state.runs[k], base)) for k in members)


def _decide_single(state: _State, value_of: ValueOf, floor: int) -> bool:
    """One objective: the leader apart from the baseline and from any close runner-up."""
    members = state.members()
    if not members:  # the leader failed its re-measurement: the next one comes in
        nxt = next((k for k in state.order if k not in state.active), None)
        if nxt is not None:
            state.active.append(nxt)
        return False
    if not state.ok(state.baseline):
        return False

    def confirmed(key: str) -> float:
        got = value_of(state.items[key][1], state.runs[key]) if state.runs[key] else None
        return float("inf") if got is None else got

    leader = min(members, key=confirmed)
    verdict = separation(state.runs[leader], state.runs[state.baseline])
    # before the rule has its processes the noise is unknown: its smallest threshold
    threshold = verdict.threshold if not math.isnan(verdict.threshold) else _rule().floor
    joined = False
    for key in state.order:
        if key in state.active or state.rounds_left < floor:
            continue  # (one that could not reach the floor any more stays out)
        if _close(state, key, leader, threshold):
            state.active.append(key)  # too close to rule out from the search alone
            joined = True
    if joined or not _enough(state, [state.baseline, *members], floor) or not settled(verdict):
        return False
    rivals = [k for k in members if k != leader]
    return all(settled(separation(state.runs[k], state.runs[leader])) for k in rivals)


__all__ = [
    "ConfirmationCost",
    "confirm_in_proportion",
    "min_processes",
    "separation",
    "settled",
]

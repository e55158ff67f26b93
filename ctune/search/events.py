"""Progress events the driver emits; the CLI's renderer turns them into screens.

Library code never prints: the driver hands these frozen records to
an ``on_event`` callback, and ``ctune/cli/render_search.py`` draws them.
Every event is a small value object, so a test can collect them in a list.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ctune.records import Trial

if TYPE_CHECKING:
    from ctune.search.result import SearchResult


@dataclass(frozen=True)
class Progress:
    """Where the search stands, after a trial or a generation."""

    generation: int
    evaluations: int  # distinct candidates tried, baseline and resumed ones included
    budget: int | None
    elapsed_s: float
    time_budget_s: float | None
    eta_s: float | None
    failures: dict[str, int] = field(default_factory=dict)  # outcome -> count, failures only
    infeasible: int = 0  # measured fine but violating a constraint
    cached: int = 0  # duplicates answered from the cache (not counted against the budget)
    fillers: int = 0  # runtime-gene variants measured while builds compiled (in evaluations)
    reused: int = 0  # asked candidates that took an identical binary's measurement (in them)
    skipped: int = 0  # candidates the cost model ruled out, never built (in them)
    best: tuple[float, ...] | None = None  # single objective: the best raw values so far
    hypervolume: float | None = None  # several objectives: of the feasible front, normalised
    front_size: int = 0


class SearchEvent:
    """Base class of everything ``on_event`` receives."""


@dataclass(frozen=True)
class SearchStarted(SearchEvent):
    kernel: str
    problem: str
    journal: Path
    resumed_trials: int
    strategy: str
    objectives: str
    budget: int | None
    time_budget_s: float | None
    valid_candidates: int
    valid_exact: bool
    jobs: int
    objective_texts: tuple[str, ...] = ()


@dataclass(frozen=True)
class BaselineMeasured(SearchEvent):
    trial: Trial


@dataclass(frozen=True)
class TrialFinished(SearchEvent):
    trial: Trial
    progress: Progress
    filler: bool = False  # measured while builds compiled, not asked by the strategy


@dataclass(frozen=True)
class GenerationFinished(SearchEvent):
    progress: Progress
    improved: bool


@dataclass(frozen=True)
class Confirming(SearchEvent):
    members: int
    processes: int


@dataclass(frozen=True)
class Note(SearchEvent):
    """Something the user should see (a dropped torn journal line, a skipped step)."""

    message: str
    level: str = "warning"  # "info" or "warning"


@dataclass(frozen=True)
class SearchFinished(SearchEvent):
    result: SearchResult


__all__ = [
    "BaselineMeasured",
    "Confirming",
    "GenerationFinished",
    "Note",
    "Progress",
    "SearchEvent",
    "SearchFinished",
    "SearchStarted",
    "TrialFinished",
]

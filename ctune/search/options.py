"""What a caller may ask of one search beyond the settings and the objective spec.

Its own module so that the plan (``plan.py``), the run's state (``run_state.py``) and
the driver share it without importing one another.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctune.errors import UserError
from ctune.search.pruning import DEFAULT_PRUNE_MARGIN, DEFAULT_SEARCH_REP_MS

if TYPE_CHECKING:
    from ctune.controls.setup import ControlsSetup

#: the share of --budget a warm start takes by default (so that the search still explores)
WARM_START_SHARE = 0.25


def share_of_budget(value: float, option: str) -> float:
    """``value`` as a share of the budget, a number in (0, 1]; else a UserError naming
    ``option`` (NaN and a string are refused too)."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not 0 < value <= 1:
        shown = f"{value:g}" if number else repr(value)
        raise UserError(
            f"{option} {shown}: give a share of the budget in (0, 1], e.g. 1 to measure "
            "every configuration given"
        )
    return value


@dataclass(frozen=True)
class SearchOptions:
    """Everything about one search that is not a setting or the objective spec.

    None (and an empty ``strategy_options``) means not given: a new search takes the
    defaults (``auto``, seed 0, ``DEFAULT_BUDGET`` unless timed, filling on), a resumed
    one the values its journal recorded (``plan.py``).
    """

    problem: str | None = None
    strategy: str | None = None  # auto: search.resolve_name
    strategy_options: Mapping[str, Any] = field(default_factory=dict)
    budget: int | None = None
    time_s: float | None = None
    patience: int | None = None
    seed: int | None = None
    resume: Path | None = None
    journal: Path | None = None  # where a new journal goes (default: under cache_dir)
    # at most this many fresh processes re-measure what the decision needs (confirm.py);
    # 0: report the search's own measurements
    confirm_processes: int = 5
    confirm_members: int = 8
    # time the spec's vendor call (cuBLAS, SDPA) in every confirmation round, and compare
    # the pinned member with it (measure/vendor.py); only where the spec names one
    vendor: bool = True
    first_failures: int = 8  # if the first N candidates all fail to compile: UserError
    jobs: int = 0  # compile-ahead depth; 0: the compiler's jobs, else settings.jobs, else CPUs
    journal_fsync: bool = True  # False only for tests on slow disks
    fill: bool | None = None  # while builds compile, measure runtime-gene variants (default on)
    # skip builds the cost model rules out (search/cost_policy.py; default off)
    cost_model: bool | None = None
    # configurations to measure first (a T4 file's best, exchange/t4.py), and where from
    warm_start: tuple[Mapping[str, Any], ...] = ()
    warm_start_source: str = ""
    # the share of --budget a warm start may take (the rest explores); a problem set's later
    # shapes may take more: their seeds are builds the set already compiled
    warm_start_share: float = WARM_START_SHARE
    # a candidate whose first samples' median is this far above the leader stops there
    # (search/pruning.py); None: every candidate gets the full sampling plan
    prune_margin: float | None = DEFAULT_PRUNE_MARGIN
    # GPU time a candidate that was not pruned is sampled for while confirmation will
    # re-measure the result (search/pruning.py); None: the protocol's rep_ms
    search_rep_ms: float | None = DEFAULT_SEARCH_REP_MS
    # the controls engine, its spaces and store, where the space has acf genes
    controls: ControlsSetup | None = None


__all__ = ["WARM_START_SHARE", "SearchOptions", "share_of_budget"]

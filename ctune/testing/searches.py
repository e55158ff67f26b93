"""Searches run to compare strategies, not to ship results.

The strategy contract, the quality tests and the sample-efficiency benchmark
all run many small searches whose only product is the journal: no
confirmation in fresh processes, no result file, no fsync per trial.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ctune.objective import ObjectiveSpec
    from ctune.search.result import SearchResult
    from ctune.spec import KernelSpec


def quiet_search(
    spec: KernelSpec,
    objective: ObjectiveSpec,
    folder: Path,
    *,
    strategy: str,
    budget: int,
    seed: int,
    compiler: Any,
    measurer: Any,
    strategy_options: Mapping[str, Any] | None = None,
    fingerprint: Mapping[str, str] | None = None,
    cost_model: bool = False,
    jobs: int = 0,
    problem: str | None = None,
) -> SearchResult:
    """One search with its cache and journal under ``folder`` (``cost_model``: skip the
    builds the cost model rules out, ``search/cost_policy.py``; ``jobs``: compile slots,
    0 for the compiler's; ``problem``: the spec's problem, None for its default)."""
    from ctune.config import Settings
    from ctune.search.driver import SearchOptions, run_session
    from ctune.search.session import SearchSession

    session = SearchSession(
        Settings(cache_dir=folder, registry=folder / "registry"),  # no registry's journals
        spec,
        objective,
        SearchOptions(
            strategy=strategy,
            strategy_options=dict(strategy_options or {}),
            budget=budget,
            seed=seed,
            confirm_processes=0,
            journal_fsync=False,
            cost_model=cost_model,
            jobs=jobs,
            problem=problem,
        ),
        compiler=compiler,
        measurer=measurer,
        fingerprint=dict(fingerprint) if fingerprint is not None else None,
    )
    return run_session(session)


def feasible_values(result: SearchResult) -> list[tuple[float, ...]]:
    """Objective values of every feasible trial the search journalled, in order."""
    from ctune.search.journal import read

    replay, _ = read(result.journal)
    return [t.values for t in replay.trials if t.feasible and t.values is not None]

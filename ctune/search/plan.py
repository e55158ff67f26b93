"""What shapes a search's trials: recorded in its journal, reused by ``--resume`` and retune.

The strategy, its options, the seed, what stops the search (budget, time, patience,
filling) and a warm start (its configurations' digest and share) decide which candidates a
search tries. They are written into the journal's header
(``"search"``) and the artifact (``extensions.search.plan``), so ``--resume`` continues
exactly the recorded search (a flag left out takes the recorded value, one that differs is
refused) and ``ctune registry retune`` runs the same search again (docs/journal-format.md).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctune.errors import UserError
from ctune.records import sha256_hex
from ctune.search import resolve_name

if TYPE_CHECKING:
    from ctune.search.options import SearchOptions

#: without --budget or --time, a search stops after this many evaluations
DEFAULT_BUDGET = 100
DEFAULT_SEED = 0
PLAN_FIELDS = (
    "strategy",
    "options",
    "seed",
    "budget",
    "time_s",
    "patience",
    "fill",
    "cost_model",
    "warm_start",
)


@dataclass(frozen=True)
class SearchPlan:
    """The settings that decide a search's trials; ``strategy`` is resolved (never auto)."""

    strategy: str
    options: dict[str, Any] = field(default_factory=dict)  # as given: NAME -> value
    seed: int = DEFAULT_SEED
    budget: int | None = DEFAULT_BUDGET
    time_s: float | None = None
    patience: int | None = None
    fill: bool = True
    cost_model: bool = False  # skip builds the cost model rules out (search/cost_policy.py)
    #: the warm start (``warm_start_identity``): where from, its configurations' sha256, share
    warm_start: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The recorded plan; ``cost_model`` only when on and ``warm_start`` only when given,
        so a search without them records what it always did."""
        out = {name: getattr(self, name) for name in PLAN_FIELDS}
        if not self.cost_model:
            del out["cost_model"]
        if self.warm_start is None:
            del out["warm_start"]
        return out


def warm_start_identity(opts: SearchOptions) -> dict[str, Any] | None:
    """What of a warm start decides the trials: the configurations (their sha256: a T4
    file read again gives the same) and the share of the budget they may take; the source
    only names it. None without one."""
    if not opts.warm_start:
        return None
    configurations = json.dumps([dict(c) for c in opts.warm_start], sort_keys=True, default=str)
    return {
        "source": opts.warm_start_source,
        "sha256": sha256_hex(configurations),
        "share": opts.warm_start_share,
    }


def _given(opts: SearchOptions, n_objectives: int) -> dict[str, Any]:
    """The plan fields the caller set (None and an empty option table are not set)."""
    given: dict[str, Any] = {}
    if opts.strategy is not None:
        given["strategy"] = resolve_name(opts.strategy, n_objectives)
    if opts.strategy_options:
        given["options"] = dict(opts.strategy_options)
    for name in ("seed", "budget", "time_s", "patience", "fill", "cost_model"):
        value = getattr(opts, name)
        if value is not None:
            given[name] = value
    warm = warm_start_identity(opts)
    if warm is not None:
        given["warm_start"] = warm
    return given


def _complete(
    values: Mapping[str, Any], n_objectives: int, default_budget: int | None = None
) -> SearchPlan:
    """Defaults for what is not set: auto strategy, seed 0, the spec's ``default_budget`` or
    DEFAULT_BUDGET unless timed."""
    strategy = values.get("strategy") or resolve_name("auto", n_objectives)
    budget = values.get("budget")
    if budget is None and values.get("time_s") is None and strategy != "exhaustive":
        budget = default_budget or DEFAULT_BUDGET
    return SearchPlan(
        strategy=strategy,
        options=dict(values.get("options") or {}),
        seed=int(values.get("seed", DEFAULT_SEED)),
        budget=budget,
        time_s=values.get("time_s"),
        patience=values.get("patience"),
        fill=bool(values.get("fill", True)),
        cost_model=bool(values.get("cost_model", False)),
        warm_start=values.get("warm_start"),
    )


def new_plan(
    opts: SearchOptions, n_objectives: int, default_budget: int | None = None
) -> SearchPlan:
    """The plan of a new search: what ``opts`` sets, defaults for the rest (``default_budget``:
    the kernel spec's, where it gives one)."""
    return _complete(_given(opts, n_objectives), n_objectives, default_budget)


def recorded(header: Mapping[str, Any]) -> dict[str, Any]:
    """The plan fields a journal header holds (all of them, or what older journals kept)."""
    plan = header.get("search")
    if isinstance(plan, dict):
        # a plan without cost_model or warm_start ran without it (recorded only when on)
        stored = {name: plan[name] for name in PLAN_FIELDS if name in plan}
        return {"cost_model": False, "warm_start": None, **stored}
    info = header.get("info") or {}
    return {name: info[name] for name in ("strategy", "seed", "budget") if name in info}


_FLAGS = {
    "strategy": "--strategy",
    "options": "--option",
    "seed": "--seed",
    "budget": "--budget",
    "time_s": "--time",
    "patience": "--patience",
    "fill": "--fill",
    "cost_model": "--cost-model",
    "warm_start": "--warm-start",
}


def _same(name: str, given: Any, stored: Any) -> bool:
    if name == "options":
        return {k: str(v) for k, v in given.items()} == {k: str(v) for k, v in stored.items()}
    if name == "time_s" and given is not None and stored is not None:
        return math.isclose(float(given), float(stored))
    if name == "warm_start" and given is not None and stored is not None:
        return given.get("sha256") == stored.get("sha256") and math.isclose(
            float(given.get("share", 0)), float(stored.get("share", 0))
        )
    return bool(given == stored)


def resume_plan(
    opts: SearchOptions, header: Mapping[str, Any], n_objectives: int, path: Path
) -> tuple[SearchPlan, str | None]:
    """(the recorded plan with flags it lacks, why a given flag conflicts with it or None).

    The conflict is returned, not raised, so that the caller can first say whether the
    journal is this search at all (kernel, problem, objectives, device).
    """
    stored = recorded(header)
    given = _given(opts, n_objectives)
    conflict = None
    for name in PLAN_FIELDS:
        if name in given and name in stored and not _same(name, given[name], stored[name]):
            conflict = (
                f"{path}: cannot resume with {_as_flag(name, given[name])}: the journal's "
                f"search ran with {_as_flag(name, stored[name])}; leave the flag out to "
                "continue the recorded search, or start a new one without --resume"
            )
            break
    return _complete({**given, **stored}, n_objectives), conflict


def check_warm_start_resumable(
    plan: SearchPlan, opts: SearchOptions, finished_generations: int, path: Path
) -> None:
    """A journal whose warm start has not finished (no generation record yet: it is the
    first generation) resumes only with its configurations given again, since the search
    measures them first; one that finished needs none (docs/search.md)."""
    if plan.warm_start is None or opts.warm_start or finished_generations:
        return
    raise UserError(
        f"{path}: cannot resume without {_as_flag('warm_start', plan.warm_start)}: the "
        "journal's warm start did not finish; give that file again (a finished one is "
        "not needed again)"
    )


def _as_flag(name: str, value: Any) -> str:
    """A plan value as the command-line flag that sets it."""
    if name == "fill":
        return "--fill" if value else "--no-fill"
    if name == "cost_model":
        return f"--cost-model {'on' if value else 'off'}"
    if name == "options":
        return " ".join(f"--option {k}={v}" for k, v in value.items()) or "no --option"
    if name == "warm_start" and value is not None:
        source = value.get("source") or "configurations"
        return (
            f"--warm-start {source} (sha256 {str(value.get('sha256'))[:12]}) "
            f"--warm-start-share {float(value.get('share', 0)):g}"
        )
    if value is None:
        return f"no {_FLAGS[name]}"
    if name == "time_s":
        return f"--time {float(value):g}"
    return f"{_FLAGS[name]} {value}"


__all__ = [
    "DEFAULT_BUDGET",
    "SearchPlan",
    "check_warm_start_resumable",
    "new_plan",
    "recorded",
    "resume_plan",
    "warm_start_identity",
]

"""The search plan: defaults for a new search, the journal's for a resumed one. Pure."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctune.search.driver import SearchOptions
from ctune.search.plan import DEFAULT_BUDGET, SearchPlan, new_plan, recorded, resume_plan

JOURNAL = Path("j.jsonl")


def test_a_new_search_takes_the_defaults_for_what_is_not_given() -> None:
    default = SearchPlan("staged", {}, 0, DEFAULT_BUDGET, None, None, True)
    assert new_plan(SearchOptions(), 1) == default
    assert new_plan(SearchOptions(), 2).strategy == "nsga2"
    timed = new_plan(SearchOptions(time_s=60.0, strategy="random", seed=4), 1)
    assert (timed.budget, timed.time_s, timed.seed, timed.strategy) == (None, 60.0, 4, "random")
    assert new_plan(SearchOptions(strategy="exhaustive"), 1).budget is None
    given = SearchOptions(strategy_options={"population_size": "8"}, fill=False, patience=3)
    plan = new_plan(given, 1)
    assert plan.options == {"population_size": "8"} and not plan.fill and plan.patience == 3


def test_a_spec_default_budget_replaces_ctunes_unless_a_budget_or_time_is_given() -> None:
    assert new_plan(SearchOptions(), 1, default_budget=48).budget == 48
    assert new_plan(SearchOptions(budget=7), 1, default_budget=48).budget == 7
    assert new_plan(SearchOptions(time_s=60.0), 1, default_budget=48).budget is None
    assert new_plan(SearchOptions(strategy="exhaustive"), 1, default_budget=48).budget is None


def test_the_cutlass_kernels_give_a_default_budget_and_the_hand_ones_do_not() -> None:
    from ctune.spec import load_spec

    kernels = Path(__file__).parents[3] / "kernels"
    budgets = {
        name: load_spec(kernels / f"{name}.yaml").default_budget
        for name in ("gemm", "attention", "hand_gemm", "hand_attention")
    }
    assert budgets == {"gemm": 24, "attention": 24, "hand_gemm": None, "hand_attention": None}


def _header(**search: object) -> dict[str, object]:
    plan = SearchPlan("staged", {"population_size": "6"}, 5, 8, None, 2, True).to_json()
    return {"kind": "header", "search": {**plan, **search}}


def test_resume_takes_the_recorded_plan() -> None:
    plan, conflict = resume_plan(SearchOptions(), _header(), 1, JOURNAL)
    assert conflict is None
    assert plan == SearchPlan("staged", {"population_size": "6"}, 5, 8, None, 2, True)
    # the same values given again agree (options compare as text: 6 and "6")
    same = SearchOptions(
        strategy="auto", strategy_options={"population_size": 6}, seed=5, budget=8, patience=2
    )
    assert resume_plan(same, _header(), 1, JOURNAL) == (plan, None)


@pytest.mark.parametrize(
    ("options", "text"),
    [
        (SearchOptions(budget=100), "cannot resume with --budget 100: the journal's search ran "
         "with --budget 8"),
        (SearchOptions(strategy="auto"), "--strategy nsga2: the journal's search ran with "
         "--strategy staged"),
        (SearchOptions(strategy_options={"population_size": "9"}), "--option population_size=9"),
        (SearchOptions(time_s=60.0), "--time 60: the journal's search ran with no --time"),
        (SearchOptions(fill=False), "--no-fill: the journal's search ran with --fill"),
    ],
)  # fmt: skip
def test_a_flag_that_differs_is_the_conflict(options: SearchOptions, text: str) -> None:
    n_objectives = 2 if options.strategy == "auto" else 1
    plan, conflict = resume_plan(options, _header(), n_objectives, JOURNAL)
    assert conflict is not None and conflict.startswith(f"{JOURNAL}: ") and text in conflict
    assert "\n" not in conflict
    assert plan.budget == 8 and plan.strategy == "staged"  # the recorded plan stands


def test_older_journals_keep_strategy_seed_and_budget_under_info() -> None:
    header = {"kind": "header", "info": {"strategy": "nsga2", "seed": 3, "budget": 12}}
    assert recorded(header) == {"strategy": "nsga2", "seed": 3, "budget": 12}
    plan, conflict = resume_plan(SearchOptions(patience=5), header, 2, JOURNAL)
    assert conflict is None and (plan.strategy, plan.seed, plan.budget) == ("nsga2", 3, 12)
    assert plan.patience == 5  # not recorded there: the flag is taken

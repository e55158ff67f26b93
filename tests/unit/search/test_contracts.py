"""Every built-in strategy passes the strategy contract (ctune.testing.contract_strategy)."""

from __future__ import annotations

import pytest

from ctune.testing.contract_strategy import StrategyContract


class TestNsga2(StrategyContract):
    @pytest.fixture
    def strategy_name(self) -> str:
        return "nsga2"

    @pytest.fixture
    def objective_texts(self) -> list[str]:
        return ["p99", "energy"]

    @pytest.fixture
    def strategy_options(self) -> dict[str, str]:
        return {"population_size": "8"}


class TestGa(StrategyContract):
    @pytest.fixture
    def strategy_name(self) -> str:
        return "ga"

    @pytest.fixture
    def strategy_options(self) -> dict[str, str]:
        return {"population_size": "8"}


class TestAutoSingleObjective(StrategyContract):
    @pytest.fixture
    def strategy_name(self) -> str:
        return "auto"


class TestParzen(StrategyContract):
    @pytest.fixture
    def strategy_name(self) -> str:
        return "parzen"

    @pytest.fixture
    def strategy_options(self) -> dict[str, str]:
        return {"startup_trials": "4", "batch": "4"}  # the model proposes within the budgets


class TestStagedOnTheGa(StrategyContract):
    @pytest.fixture
    def strategy_name(self) -> str:
        return "staged"

    @pytest.fixture
    def strategy_options(self) -> dict[str, str]:
        return {"structure": "ga", "population_size": "8"}


class TestRandom(StrategyContract):
    @pytest.fixture
    def strategy_name(self) -> str:
        return "random"


class TestRandomMultiObjective(StrategyContract):
    @pytest.fixture
    def strategy_name(self) -> str:
        return "random"

    @pytest.fixture
    def objective_texts(self) -> list[str]:
        return ["p50", "energy"]


class TestExhaustive(StrategyContract):
    @pytest.fixture
    def strategy_name(self) -> str:
        return "exhaustive"

"""The DEAP individual both DEAP-ranked strategies (ga, nsga2) hand to ``deap.tools``."""

from __future__ import annotations

from typing import Any

from ctune.records import Trial


class Individual(list):  # type: ignore[type-arg]
    """Gene indices (what DEAP's operators see), a DEAP fitness, and the trial behind it,
    so that a selection returns trials."""

    def __init__(self, codes: list[int], fitness: Any, trial: Trial) -> None:
        super().__init__(codes)
        self.fitness = fitness
        self.trial = trial


__all__ = ["Individual"]

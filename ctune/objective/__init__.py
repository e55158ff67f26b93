"""Objectives: what a search optimises and which outputs it must respect.

The boundary is the :class:`ObjectiveTerm` protocol (``name``, ``direction``,
``unit``, ``needs``, ``value(build, measurement, context)``). Built-in terms
live in the :data:`TERMS` table (``terms.py``); third-party terms register
under the entry-point group ``ctune.objectives`` and are looked up only when
a name is not built in. ``spec.py`` parses the CLI texts into an
:class:`ObjectiveSpec`; ``pareto.py`` (numpy) is imported only where fronts
are computed, so ``import ctune.objective`` stays light.
"""

from ctune.objective.spec import (
    Constraint,
    Objective,
    ObjectiveSpec,
    parse_constraint,
    parse_objective,
    parse_objective_spec,
)
from ctune.objective.terms import TERMS, Direction, ObjectiveTerm, TermContext, get_term

__all__ = [
    "TERMS",
    "Constraint",
    "Direction",
    "Objective",
    "ObjectiveSpec",
    "ObjectiveTerm",
    "TermContext",
    "get_term",
    "parse_constraint",
    "parse_objective",
    "parse_objective_spec",
]

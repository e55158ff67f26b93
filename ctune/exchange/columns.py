"""Each quantity heads one column, named with its unit, in every table ctune writes (an
export's CSV, ``ctune plot --as csv``, ``ctune registry show --format csv``).

A measured quantity has its column already (``p99_ms``, ``energy_j``, ``regs``); an
objective that is one of them (``--objective p99``) is that column, not a second one
named ``p99``: pandas would hold the same numbers twice, and a second ``regs`` would be
renamed ``regs.1`` (csv.DictReader keeps only one). Any other objective gets a column
of its own, its unit in the name (``tflops_tflop_per_s``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from typing import Any

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def measured_column(objective: str) -> str | None:
    """The measured column of the quantity an objective term is (p99 -> p99_ms, energy ->
    energy_j, spills -> spills_bytes, compile_time -> compile_s); None for a derived one
    (tflops, edp) or a weighted sum."""
    from ctune.objective.terms import BuildFieldTerm, LatencyTerm, MeasuredFieldTerm, get_term

    if not _IDENTIFIER.fullmatch(objective):
        return None
    term = get_term(objective)
    if isinstance(term, LatencyTerm):
        return f"{term.name}_ms"
    if isinstance(term, (MeasuredFieldTerm, BuildFieldTerm)):
        return term.field_name.removeprefix("resources.")
    return None


def _unit_suffix(unit: str) -> str:
    """``TFLOP/s`` -> ``tflop_per_s``, ``J*s`` -> ``j_s``: a unit as part of a column name."""
    text = unit.strip().lower().replace("/", "_per_")
    return re.sub(r"[^a-z0-9]+", "_", text).strip("_")


def objective_column(objective: str, unit: str) -> str:
    """The column holding an objective's values: its measured column, else its name with
    its unit (``tflops_tflop_per_s``; an expression in parentheses: ``(0.7*p50 + 0.3*p99)_ms``)."""
    measured = measured_column(objective)
    if measured is not None:
        return measured
    suffix = _unit_suffix(unit)
    if not suffix or objective.lower() == suffix or objective.lower().endswith(f"_{suffix}"):
        return objective
    name = objective if _IDENTIFIER.fullmatch(objective) else f"({objective})"
    return f"{name}_{suffix}"


def objective_columns(objectives: Iterable[tuple[str, str]]) -> dict[str, str]:
    """(name, unit) of each objective -> name: its column."""
    return {name: objective_column(name, unit) for name, unit in objectives}


def extra_columns(columns: Mapping[str, str], taken: Sequence[str]) -> list[str]:
    """The objectives' columns a table lacks (the others are its measured columns)."""
    return [c for c in dict.fromkeys(columns.values()) if c not in taken]


def gene_columns(genes: Iterable[str], taken: Sequence[str]) -> dict[str, str]:
    """gene -> its column: ``gene.<name>`` where the name is another column's."""
    return {g: (f"gene.{g}" if g in taken else g) for g in genes}


def fill_objectives(
    row: MutableMapping[str, Any], columns: Mapping[str, str], values: Iterable[Any]
) -> None:
    """Each objective's value (in the order of ``columns``) in its column, unless the
    measured value is there already."""
    for column, value in zip(columns.values(), values, strict=True):
        if row.get(column) is None:
            row[column] = value


__all__ = [
    "extra_columns",
    "fill_objectives",
    "gene_columns",
    "measured_column",
    "objective_column",
    "objective_columns",
]

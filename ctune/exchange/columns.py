"""Each name heads one column, in every table ctune writes (an export's CSV, `ctune plot
--as csv`, `ctune registry show --as csv`): pandas renames a second ``regs`` to
``regs.1`` and csv.DictReader keeps only one of the two."""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping, Sequence
from typing import Any


def objective_columns(objectives: Iterable[str], measured: Sequence[str]) -> list[str]:
    """The objectives that need a column of their own: one named like a measured column
    (``regs``, ``p50_ms``) is that column."""
    return [name for name in objectives if name not in measured]


def gene_columns(genes: Iterable[str], taken: Sequence[str]) -> dict[str, str]:
    """gene -> its column: ``gene.<name>`` where the name is another column's."""
    return {g: (f"gene.{g}" if g in taken else g) for g in genes}


def fill_objectives(
    row: MutableMapping[str, Any], objectives: Iterable[str], values: Iterable[Any]
) -> None:
    """Each objective's value in its column, unless the measured fact of that name is
    already there."""
    for name, value in zip(objectives, values, strict=True):
        if row.get(name) is None:
            row[name] = value


__all__ = ["fill_objectives", "gene_columns", "objective_columns"]

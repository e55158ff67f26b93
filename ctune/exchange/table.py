"""An export as CSV: one row per configuration, for a spreadsheet or pandas."""

from __future__ import annotations

import csv
import io
import math
from typing import Any

from ctune.exchange.records import Export

STATS = ("p50_ms", "p95_ms", "p99_ms", "mean_ms", "min_ms")
RESOURCES = ("regs", "spills_bytes", "smem_bytes")


def _cell(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return ""
    return "" if value is None else value


def to_csv(export: Export) -> str:
    """Columns: role, key, outcome, every parameter, every objective, latency, resources.

    Each name heads one column (pandas renames a second ``regs`` to ``regs.1``;
    csv.DictReader keeps one of the two): an objective named like a latency or resource
    column (``regs``) is that column, and a gene named like another column is
    ``gene.<name>``, as in ``ctune plot --as csv``.
    """
    genes: list[str] = []
    for row in export.rows:
        genes += [g for g in row.configuration if g not in genes]
    measured = [*STATS, *RESOURCES, "compile_s"]
    objectives = [o.name for o in export.objectives if o.name not in measured]
    fixed = ["role", "key", "outcome", *objectives, *measured]
    header = [*fixed[:3], *(f"gene.{g}" if g in fixed else g for g in genes), *fixed[3:]]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    for row in export.rows:
        facts: dict[str, Any] = {**row.stats_ms, **row.resources, "compile_s": row.compile_s}
        writer.writerow(
            [
                row.role,
                row.key,
                row.outcome,
                *(_cell(row.configuration.get(g)) for g in genes),
                *(_cell(row.values.get(o)) for o in objectives),
                *(_cell(_first(facts.get(m), row.values.get(m))) for m in measured),
            ]
        )
    return buffer.getvalue()


def _first(*values: Any) -> Any:
    """The first value that is there (an objective fills its column where the fact is not)."""
    return next((v for v in values if v is not None), None)


__all__ = ["to_csv"]

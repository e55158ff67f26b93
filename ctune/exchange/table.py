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
    """Columns: role, key, outcome, every parameter, every objective, latency, resources."""
    genes: list[str] = []
    for row in export.rows:
        genes += [g for g in row.configuration if g not in genes]
    objectives = [o.name for o in export.objectives]
    header = ["role", "key", "outcome", *genes, *objectives, *STATS, *RESOURCES, "compile_s"]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    for row in export.rows:
        writer.writerow(
            [
                row.role,
                row.key,
                row.outcome,
                *(_cell(row.configuration.get(g)) for g in genes),
                *(_cell(row.values.get(o)) for o in objectives),
                *(_cell(row.stats_ms.get(s)) for s in STATS),
                *(_cell(row.resources.get(r)) for r in RESOURCES),
                _cell(row.compile_s),
            ]
        )
    return buffer.getvalue()


__all__ = ["to_csv"]

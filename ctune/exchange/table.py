"""An export as CSV: one row per configuration, for a spreadsheet or pandas."""

from __future__ import annotations

import csv
import io
import math
from typing import Any

from ctune.exchange.columns import extra_columns, fill_objectives, gene_columns, objective_columns
from ctune.exchange.records import Export

STATS = ("p50_ms", "p95_ms", "p99_ms", "mean_ms", "min_ms")
RESOURCES = ("regs", "spills_bytes", "smem_bytes")


def _cell(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return ""
    return "" if value is None else value


def to_csv(export: Export) -> str:
    """Columns: role, key, outcome, every parameter, every objective, latency, resources;
    each quantity once, its unit in its name (``exchange/columns.py``), as in ``ctune plot
    --as csv``."""
    genes: list[str] = []
    for row in export.rows:
        genes += [g for g in row.configuration if g not in genes]
    measured = [*STATS, *RESOURCES, "compile_s"]
    named = objective_columns((o.name, o.unit) for o in export.objectives)
    objectives = extra_columns(named, measured)
    lead = ["role", "key", "outcome"]
    columns = gene_columns(genes, [*lead, *objectives, *measured])
    header = [*lead, *columns.values(), *objectives, *measured]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    for row in export.rows:
        cells: dict[str, Any] = {"role": row.role, "key": row.key, "outcome": row.outcome}
        cells.update({column: row.configuration.get(g) for g, column in columns.items()})
        cells.update({**row.stats_ms, **row.resources, "compile_s": row.compile_s})
        fill_objectives(cells, named, (row.values.get(o.name) for o in export.objectives))
        writer.writerow([_cell(cells.get(h)) for h in header])
    return buffer.getvalue()


__all__ = ["to_csv"]

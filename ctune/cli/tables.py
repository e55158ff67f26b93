"""``--as csv|json``: the one writer of tables for other tools (spreadsheets, pandas, jq).

CSV is RFC 4180 (``csv`` module, a header row, empty cells for unknown
values); JSON is one document, indented, ASCII. Both go to stdout as they
are: never wrapped, styled or sanitised, since a program reads them.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ctune.errors import UserError

FORMATS = ("csv", "json")


def check_format(fmt: str, option: str = "--as") -> str:
    if fmt not in FORMATS:
        raise UserError(f"{option} {fmt!r}: unknown table format (choose csv or json)")
    return fmt


def _finite(value: Any) -> Any:
    """Strict JSON has no NaN or infinity: those become null."""
    import math

    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, str):  # a lone surrogate (bytes that were not UTF-8) cannot be written
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, sort_keys=True)
    return value


def write(
    fmt: str,
    header: Sequence[str],
    rows: Sequence[Mapping[str, Any]],
    document: Mapping[str, Any] | None = None,
) -> None:
    """Rows as CSV, or as JSON: ``document`` with the rows under ``"rows"`` (else a list)."""
    from ctune.cli.render import write_out

    check_format(fmt)
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(header)
        for row in rows:
            writer.writerow([_cell(row.get(h)) for h in header])
        write_out(buffer.getvalue())
    else:
        body: Any = list(rows) if document is None else {**document, "rows": list(rows)}
        write_out(json.dumps(_finite(body), indent=2, default=str, allow_nan=False) + "\n")


__all__ = ["FORMATS", "check_format", "write"]

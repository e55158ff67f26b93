"""The one writer of text for other tools: JSON documents and CSV tables (spreadsheets,
pandas, jq).

CSV is RFC 4180 (``csv`` module, a header row, empty cells for unknown values); JSON is
one document, indented, ASCII, strict (no NaN or infinity: those are null). Both go to
stdout as they are: never wrapped, styled or sanitised, since a program reads them.
``--format json|csv`` (every command's report, ``render.report``) and the exports'
``--as csv|json`` (``ctune plot --as``) write through here.
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


def json_text(data: Any) -> str:
    """``data`` as one JSON document and a newline (paths and other objects as text)."""
    return json.dumps(_finite(data), indent=2, default=str, allow_nan=False) + "\n"


def csv_text(header: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> str:
    """A header row, then one row per mapping (its cells by header name)."""
    if len(set(header)) != len(header):  # pandas would rename one, DictReader drop one
        raise ValueError(f"a CSV header names a column twice: {list(header)}")
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow([_cell(row.get(h)) for h in header])
    return buffer.getvalue()


def text(
    fmt: str,
    header: Sequence[str],
    rows: Sequence[Mapping[str, Any]],
    document: Mapping[str, Any] | None = None,
) -> str:
    """Rows as CSV, or as JSON: ``document`` with the rows under ``"rows"`` (else a list)."""
    check_format(fmt)
    if fmt == "csv":
        return csv_text(header, rows)
    body: Any = list(rows) if document is None else {**document, "rows": list(rows)}
    return json_text(body)


__all__ = ["FORMATS", "check_format", "csv_text", "json_text", "text"]

"""Ground-truth files: JSON, gzipped when the name ends in ``.gz``, written atomically."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

from ctune.errors import UserError
from ctune.files import MAX_DATA_BYTES, read_capped


def load_json(path: Path) -> Any:
    """The JSON in ``path``, gzipped or not (by its magic bytes, not its name)."""
    raw = read_capped(path, MAX_DATA_BYTES, "ground-truth file")
    if raw[:2] == b"\x1f\x8b":
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as unzipped:
            raw = unzipped.read(MAX_DATA_BYTES + 1)
        if len(raw) > MAX_DATA_BYTES:
            raise UserError(f"ground-truth file {path}: over {MAX_DATA_BYTES} bytes unzipped")
    return json.loads(raw)


def save_json(data: Any, path: Path) -> Path:
    """Write compact, key-sorted JSON (gzip with mtime 0 for ``.gz``: same data, same bytes)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    body = gzip.compress(text.encode(), mtime=0) if path.suffix == ".gz" else text.encode()
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(body)
    tmp.replace(path)
    return path


__all__ = ["load_json", "save_json"]

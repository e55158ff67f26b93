"""A problem-set search's folder and what the dispatch table reads of it: the file names, the
options that locate the folder, the rows of its matrix, and the id a compiled build goes by.

Both the set search (``ctune.sets.problem_set``) and the table it ends with
(``ctune.sets.dispatch_table``) read these; they live here so that neither imports the other
for them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctune.errors import UserError
from ctune.files import MAX_DATA_BYTES, read_text_capped
from ctune.records import Candidate, canonical_json, sha256_hex
from ctune.search.budget import WARM_START_SHARE

if TYPE_CHECKING:
    from ctune.spec import KernelSpec, Problem

MATRIX = "matrix.json"
FINALISTS = "finalists.json"
TABLE = "dispatch.json"
WINNERS = "winners.json"
HEADER = "dispatch.h"
#: whose set the folder holds (kernel and set): another's is refused, not adopted
OWNER = "set.json"
#: the matrix column and table build of the spec's vendor call (``--dispatch-vendor``): a
#: name no build id takes (those are ``b`` and hex digits)
VENDOR_BUILD = "vendor"


@dataclass(frozen=True)
class SetOptions:
    """A problem-set search: which set, where its state lives, how far this call goes."""

    set_name: str
    set_dir: Path
    margin: float = 0.03
    step_s: float | None = None  # wall time for this call; None: to the end
    cross_processes: int = 1  # fresh processes per shape in the cross phase
    reuse_share: float = WARM_START_SHARE  # of a shape's budget: the group's earlier builds
    shipped: frozenset[str] = frozenset()  # build ids other tables ship: the cover takes them first
    vendor: bool = False  # the spec's vendor call as one more column, shipped already


def build_id(spec: KernelSpec, candidate: Candidate, problem: Problem) -> str:
    """The compiled build a candidate runs as on a problem: compiled genes plus defines."""
    return compiled_build_id(spec, candidate.as_dict(), problem.defines)


def compiled_build_id(
    spec: KernelSpec, genes: Mapping[str, Any], defines: Mapping[str, Any]
) -> str:
    """The id of the build these compiled genes make, in today's space (``Space.in_today``):
    a table written before a gene was added names its builds as a search today does, not by
    an id no search gives any more."""
    today = spec.space.in_today(genes)
    compiled = {name: v for name, v in today.items() if name not in spec.runtime_names}
    digest = sha256_hex(canonical_json({"genes": compiled, "defines": dict(defines)}))
    return "b" + digest[:11]


def bad_state(path: Path, field: str, why: str) -> UserError:
    """The one line a damaged set file gets: the file, the field, what is wrong with it, and
    to move it away (the set searches or measures again what it held). Bad input, exit 2."""
    return UserError(f"{path}: {field} {why}; move it away to start over")


def read_state(path: Path, what: str) -> dict[str, Any]:
    """A set file's JSON object; anything else is one line naming the file (bad input, not
    a crash)."""
    try:
        data = json.loads(read_text_capped(path, MAX_DATA_BYTES, what))
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: not a {what} ({exc}); move it away to start over") from None
    if not isinstance(data, dict):
        raise bad_state(path, "the file", f"is not a {what} (not a JSON object)")
    return data


#: a matrix row's fields and what each must be (a row is written by ``problem_set._row``)
_ROW_TEXT = ("shape", "candidate", "build")
_ROW_NUMBERS = ("cost", "value")  # a number, or null: the cell failed


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of the matrix at ``path`` ([] without one), each checked field by field: a
    row edited by hand is one line naming it, never a KeyError in the cover."""
    if not path.is_file():
        return []
    rows = read_state(path, "dispatch matrix").get("rows")
    if not isinstance(rows, list):
        raise bad_state(path, "'rows'", "is not a list")
    for i, row in enumerate(rows):
        _check_row(path, f"rows[{i}]", row)
    return rows


def _check_row(path: Path, where: str, row: Any) -> None:
    if not isinstance(row, dict):
        raise bad_state(path, where, "is not an object")
    for name in _ROW_TEXT:
        if not isinstance(row.get(name), str):
            raise bad_state(path, f"{where}.{name}", f"is {row.get(name)!r}, not a string")
    for name in _ROW_NUMBERS:
        value = row.get(name, "missing")
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise bad_state(path, f"{where}.{name}", f"is {value!r}, not a number or null")
    if not isinstance(row.get("genes"), dict):
        raise bad_state(path, f"{where}.genes", "is not an object")


def read_owner(set_dir: Path) -> tuple[str, str] | None:
    """(kernel, set) the folder's ``set.json`` names, None for a folder without one."""
    path = set_dir / OWNER
    if not path.is_file():
        return None
    data = read_state(path, "problem-set folder record")
    kernel, name = data.get("kernel"), data.get("set")
    if not isinstance(kernel, str) or not isinstance(name, str):
        raise bad_state(path, "'kernel' and 'set'", "must be strings")
    return kernel, name


def best_rows(
    rows: Sequence[Mapping[str, Any]],
) -> dict[tuple[str, str], Mapping[str, Any]]:
    """(shape, build) -> the row of the build's fastest variant there (its runtime genes)."""
    out: dict[tuple[str, str], Mapping[str, Any]] = {}
    for r in rows:
        if r["cost"] is None:
            continue
        key = (r["shape"], r["build"])
        if key not in out or r["cost"] < out[key]["cost"]:
            out[key] = r
    return out

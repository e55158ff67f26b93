"""T4, the auto-tuning community's JSON results format (schema 1.0.0), both ways.

Kernel Tuner writes it (``store_output_file``) and KTT reads it: ``{"schema_version":
"1.0.0", "results": [{"configuration", "times", "invalidity", "correctness",
"measurements", "objectives"}]}``. ctune writes one result per configuration of a
journal or an artifact, times in milliseconds as Kernel Tuner does, and reads the
correct configurations of any T4 file back, best first, to warm-start a search.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctune.errors import UserError
from ctune.exchange.records import Export, Row
from ctune.files import MAX_DATA_BYTES, InputFileError, read_text_capped
from ctune.objective.pareto import sign
from ctune.search.journal_records import FieldError

if TYPE_CHECKING:
    from ctune.records import Candidate, GeneValue
    from ctune.spec.space.params import Space

SCHEMA_VERSION = "1.0.0"
#: ctune's outcome -> T4's invalidity
INVALIDITY = {
    "ok": "correct",
    "invalid": "constraints",
    "infeasible": "constraints",
    "compile_error": "compile",
    "resource_limit": "compile",
    "compiler_crash": "compile",
    "build_oom": "compile",
    "build_timeout": "timeout",
    "run_timeout": "timeout",
    "launch_error": "runtime",
    "runtime_fault": "runtime",
    "inconclusive": "runtime",
    "wrong_result": "correctness",
    "nondeterministic": "correctness",
}


def _number(value: Any) -> float | None:
    """``value`` as a finite float, or None: not a number (text, an array, true), not
    finite (NaN), or an integer too large for a float (a 400-digit one is valid JSON)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _finite(value: Any) -> bool:
    return _number(value) is not None


def _gene(value: GeneValue) -> GeneValue | None:
    """A configuration's value as T4 holds it: null for a NaN or an infinity (a damaged
    journal can hold one), which JSON has no number for."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _result(row: Row, export: Export) -> dict[str, Any]:
    times: dict[str, Any] = {}
    if row.compile_s is not None and _finite(row.compile_s * 1000.0):
        times["compilation_time"] = round(row.compile_s * 1000.0, 3)  # ms, as Kernel Tuner
    if row.samples_ms:
        times["runtimes"] = [s for s in row.samples_ms if _finite(s)]
    measurements = [
        {"name": o.name, "value": row.values[o.name], "unit": o.unit}
        for o in export.objectives
        if _finite(row.values.get(o.name))
    ]
    facts: list[tuple[str, Any, str]] = []
    if _finite(row.stats_ms.get("mean_ms")):  # Kernel Tuner's own objective, "time" in ms
        facts.append(("time", row.stats_ms["mean_ms"], "ms"))
    facts += [(n.removesuffix("_ms"), v, "ms") for n, v in row.stats_ms.items() if n != "mean_ms"]
    facts += [(name, value, "") for name, value in row.resources.items()]
    # an objective named like a statistic or resource (p50, regs) is that measurement: a
    # second entry of the same name would leave a reader to guess which one it meant
    named = {m["name"] for m in measurements}
    measurements += [
        {"name": name, "value": value, "unit": unit}
        for name, value, unit in facts
        if _finite(value) and name not in named
    ]
    return {
        "configuration": {name: _gene(value) for name, value in row.configuration.items()},
        "times": times,
        "invalidity": INVALIDITY.get(row.outcome, "runtime"),
        "correctness": 0 if INVALIDITY.get(row.outcome) == "correctness" else 1,
        "measurements": measurements,
        "objectives": [o.name for o in export.objectives] or ["time"],
    }


def to_t4(export: Export) -> dict[str, Any]:
    """The T4 document of an export (ctune's provenance under ``metadata``)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "results": [_result(row, export) for row in export.rows],
        "metadata": {
            "tool": "ctune",
            "kernel": export.kernel,
            "problem": export.problem,
            "device": export.device,
            "source": export.source,
        },
    }


def t4_text(export: Export) -> str:
    """The T4 document of an export as standard JSON text: a NaN is not JSON, and other
    tools' readers refuse it (:func:`to_t4` writes none: a non-finite number is left out,
    or null where the field must be there)."""
    return json.dumps(to_t4(export), indent=1, allow_nan=False) + "\n"


#: what to do about a file that is not a T4 results file
_GIVE = "give a T4 results file (Kernel Tuner's output, or ctune export --as t4)"
#: the schema versions read: 1.x.y, the one T4 major version there is
_VERSION = re.compile(r"1\.[0-9]+\.[0-9]+")
#: how Kernel Tuner names a quantity where higher is better: a rate (GFLOP/s, GB/s) or
#: work per watt (GFLOPS/W)
_HIGHER_SUFFIXES = ("/s", "/W")


def _load(path: Path) -> Any:
    """The JSON document of ``path``; anything unreadable is one line."""
    try:
        return json.loads(read_text_capped(path, MAX_DATA_BYTES, "T4 results file"))
    except InputFileError as exc:
        raise UserError(f"{path}: not a T4 results file ({exc.reason})") from None
    except RecursionError:
        raise UserError(f"{path}: not a T4 results file (nested too deeply); {_GIVE}") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UserError(f"{path}: not a T4 results file ({exc})") from None


def ranking_sign(objective: str) -> float:
    """+1 where lower is better, -1 where higher is: a ctune term's own direction, else
    Kernel Tuner's names, where a name ending in ``/s`` or ``/W`` is higher-better and any
    other (``time``) lower-better."""
    from ctune.objective.terms import get_term

    term = get_term(objective)
    if term is not None:
        return sign(term.direction)
    return -1.0 if objective.endswith(_HIGHER_SUFFIXES) else 1.0


@dataclass(frozen=True)
class _Result:
    """One result of a T4 file, checked: what ranking it needs."""

    configuration: dict[str, Any]
    correct: bool
    objective: str  # the first objective ("time" where the result names none)
    value: float | None  # its measurement, None where that is missing or not a finite number


def _list_of(value: Any, field: str, kind: type, item: str) -> list[Any]:
    """``value``, a list (absent: empty) each of whose items is a ``kind`` (``item``)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise FieldError(field, f"a list, each {item}", value)
    for i, got in enumerate(value):
        if not isinstance(got, kind):
            raise FieldError(f"{field}[{i}]", item, got)
    return value


def _checked(result: Any, field: str) -> _Result:
    """One entry of ``results``, its fields of the T4 schema's types (``objectives`` a
    list, as the schema and every writer have it: a bare string is refused, not split
    or guessed at); those the schema requires but ranking does not need may be absent."""
    if not isinstance(result, dict):
        raise FieldError(field, "an object", result)
    configuration = result.get("configuration")
    if not isinstance(configuration, dict):
        raise FieldError(f"{field}.configuration", "an object", configuration)
    objectives = _list_of(result.get("objectives"), f"{field}.objectives", str, "an objective name")
    measurements = _list_of(
        result.get("measurements"), f"{field}.measurements", dict, "a {name, value, unit} object"
    )
    for i, m in enumerate(measurements):
        if not isinstance(m.get("name"), str):
            raise FieldError(f"{field}.measurements[{i}].name", "text", m.get("name"))
    objective = objectives[0] if objectives else "time"
    value = next((m.get("value") for m in measurements if m["name"] == objective), None)
    correct = result.get("invalidity", "correct") == "correct" and result.get("correctness", 1) == 1
    return _Result(configuration, correct, objective, _number(value))


def _results(data: Any) -> list[_Result]:
    """Every result of a T4 document, checked (:func:`_checked`)."""
    if not isinstance(data, dict):
        raise FieldError("the document", "an object with a 'results' list", data)
    version = data.get("schema_version", SCHEMA_VERSION)
    if not isinstance(version, str) or not _VERSION.fullmatch(version):
        raise FieldError("schema_version", "1.x.y, the T4 version this ctune reads", version)
    results = data.get("results")
    if not isinstance(results, list):
        raise FieldError("results", "a list", results)
    return [_checked(result, f"results[{i}]") for i, result in enumerate(results)]


def read_t4(path: Path) -> list[dict[str, Any]]:
    """The correct configurations of a T4 file, best first by its first objective
    (:func:`ranking_sign`; a missing or non-numeric value last, file order among equals).
    A file that does not fit the T4 schema is one line naming the field."""
    try:
        results = _results(_load(path))
    except FieldError as exc:
        raise UserError(f"{path}: not a T4 results file ({exc}); {_GIVE}") from None
    signs: dict[str, float] = {}  # an objective's direction, looked up once per file
    ranked: list[tuple[float, int, dict[str, Any]]] = []
    for i, result in enumerate(results):
        if not result.correct:
            continue
        if result.objective not in signs:
            signs[result.objective] = ranking_sign(result.objective)
        score = math.inf if result.value is None else signs[result.objective] * result.value
        ranked.append((score, i, result.configuration))
    return [configuration for _, _, configuration in sorted(ranked, key=lambda r: r[:2])]


def _match(values: Sequence[GeneValue], given: Any) -> GeneValue | None:
    """The gene's value that a T4 value spells (128, 128.0 and "128" alike), or None.
    Numbers compare exactly (Python's ``==`` across int and float), never through a float,
    which a 400-digit integer does not fit."""
    for value in values:
        if value == given or str(value) == str(given):
            return value
    return None


@dataclass(frozen=True)
class Mapped:
    """T4 configurations as candidates of one space, every configuration accounted for:
    ``len(candidates) + invalid + repeated`` is how many were given."""

    candidates: list[Candidate] = field(default_factory=list)
    invalid: int = 0  # a value not among its gene's values, or a point outside the space
    # the candidate of an earlier configuration: a duplicate in the file, or one that
    # differs only in names that are not genes or in genes left at their defaults
    repeated: int = 0
    partial: int = 0  # of all given: configurations that leave genes out (defaults for them)


def candidates(
    kernel: str,
    space: Space,
    configurations: Iterable[Mapping[str, Any]],
    dims: Mapping[str, int],
) -> Mapped:
    """The configurations that are valid points of ``space``, and what became of the rest.

    Genes a configuration does not name keep their defaults; names that are not genes
    (another tool's bookkeeping) are ignored; a value that is not among a gene's values,
    or a point that breaks a restriction, is skipped.
    """
    from ctune.records import Candidate

    out: list[Candidate] = []
    seen: set[str] = set()
    invalid = repeated = partial = 0
    for configuration in configurations:
        values = space.default_values()
        fits = True
        partial += any(name not in configuration for name in space.names)
        for name, given in configuration.items():
            if name not in space:
                continue
            value = _match(space.gene(name).values, given)
            if value is None:
                fits = False
                break
            values[name] = value
        if not fits or not space.is_valid(values, dims):
            invalid += 1
            continue
        candidate = Candidate.of(kernel, values)
        if candidate.key() in seen:
            repeated += 1
            continue
        seen.add(candidate.key())
        out.append(candidate)
    return Mapped(out, invalid, repeated, partial)


def check_shares_genes(
    configurations: Sequence[Mapping[str, Any]], space: Space, kernel: str, source: str
) -> None:
    """Refuse configurations none of which names a gene of ``space``: each would be the
    default build, and the file is almost certainly another kernel's results."""
    names = sorted({str(name) for configuration in configurations for name in configuration})
    if not configurations or any(name in space for name in names):
        return

    def listed(items: Sequence[str]) -> str:
        return ", ".join(items[:6]) + (", ..." if len(items) > 6 else "") or "none"

    genes = [g.name for g in sorted(space.genes, key=lambda g: g.flag)]  # the kernel's first
    raise UserError(
        f"{source or 'the warm start'}: no parameter of its configurations ({listed(names)}) "
        f"is a gene of {kernel} ({listed(genes)}); it is almost certainly another "
        f"kernel's results: give a T4 file of {kernel} (ctune export JOURNAL --as t4)"
    )


__all__ = [
    "INVALIDITY",
    "SCHEMA_VERSION",
    "Mapped",
    "candidates",
    "check_shares_genes",
    "ranking_sign",
    "read_t4",
    "t4_text",
    "to_t4",
]

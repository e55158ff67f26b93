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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctune.errors import UserError
from ctune.exchange.records import Export, Row
from ctune.files import MAX_DATA_BYTES, InputFileError, read_text_capped
from ctune.objective.pareto import sign

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


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _result(row: Row, export: Export) -> dict[str, Any]:
    times: dict[str, Any] = {}
    if row.compile_s is not None:
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
        "configuration": dict(row.configuration),
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


def read_t4(path: Path) -> list[dict[str, Any]]:
    """The correct configurations of a T4 file, best first by its first objective."""
    from ctune.objective.terms import get_term

    try:
        data = json.loads(read_text_capped(path, MAX_DATA_BYTES, "T4 results file"))
    except InputFileError as exc:
        raise UserError(f"{path}: not a T4 results file ({exc.reason})") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UserError(f"{path}: not a T4 results file ({exc})") from None
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list):
        raise UserError(f"{path}: not a T4 results file (no 'results' list)")
    ranked: list[tuple[float, int, dict[str, Any]]] = []
    for i, result in enumerate(results):
        if not isinstance(result, dict) or not isinstance(result.get("configuration"), dict):
            raise UserError(f"{path}: results[{i}] has no 'configuration' object")
        if result.get("invalidity", "correct") != "correct" or result.get("correctness", 1) != 1:
            continue
        objective = (result.get("objectives") or ["time"])[0]
        term = get_term(str(objective))
        direction_sign = sign(term.direction) if term is not None else 1.0
        value = next(
            (
                m.get("value")
                for m in result.get("measurements") or []
                if m.get("name") == objective
            ),
            None,
        )
        score = direction_sign * float(value) if value is not None and _finite(value) else math.inf
        ranked.append((score, i, result["configuration"]))
    return [configuration for _, _, configuration in sorted(ranked, key=lambda r: r[:2])]


def _match(values: Sequence[GeneValue], given: Any) -> GeneValue | None:
    """The gene's value that a T4 value spells (128, 128.0 and "128" alike), or None."""
    for value in values:
        if value == given or str(value) == str(given):
            return value
        if _finite(given) and isinstance(value, (int, float)) and float(value) == float(given):
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
    "read_t4",
    "to_t4",
]

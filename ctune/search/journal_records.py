"""Each record read from a journal, checked field by field before anything uses it.

A journal is a file anyone can edit, copy or damage, and ``--resume`` feeds it to the
strategy, the compiler and the report: a value of the wrong type there (``values`` a
string, a seed that is text, a budget of -5) must be one line naming the file, the line
and the field, never a crash further on. Trials and measurements are checked against the
record dataclasses' own field types (``ctune/records.py``: one description of a record,
for writing and for checking); the header's and the other kinds' fields by the tables
here. Gene values are checked against the spec's space where the spec is known (on
resume, ``session_journal.py``, with ``Space.check_values``).
"""

from __future__ import annotations

import dataclasses
import enum
import math
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ctune.errors import UserError
from ctune.records import Candidate, Measurement, Trial

#: appended to every message: what the user can do about a damaged record
FIX = "delete the line or start a new search"


class JournalRecordError(UserError):
    """A journal line that is not a valid record; the message names file, line, field."""


@dataclass(frozen=True)
class ConfirmationRound:
    """One fresh process of a confirmation: its measurement of each member it re-measured.
    ``trials`` is how many trials the journal held when that confirmation started (a
    resumed search reuses the rounds of the confirmation of the same trials)."""

    trials: int
    round: int
    runs: dict[str, Measurement]


class FieldError(Exception):
    """A field of a record that does not fit: its dotted name and what was expected
    (:func:`checked` turns it into the one line naming the file and the line)."""

    def __init__(self, field: str, wanted: str, got: Any) -> None:
        shown = repr(got)
        if len(shown) > 40:
            shown = shown[:37] + "..."
        super().__init__(f"{field}: expected {wanted}, got {shown}")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_float(value: Any) -> bool:
    """A number a float holds: a 400-digit integer is valid JSON, and ``float()`` of it
    (or ``math.isfinite``) raises OverflowError. NaN and infinities are floats (the
    writer lets a NaN through rather than crash a run)."""
    if not _is_number(value):
        return False
    try:
        float(value)
    except OverflowError:
        return False
    return True


_GENE_VALUE = "a gene value (a number, text or true/false)"


def _candidate(value: Any, field: str) -> Candidate:
    if not isinstance(value, dict) or set(value) != {"kernel", "genes"}:
        raise FieldError(field, "an object with kernel and genes", value)
    kernel, genes = value["kernel"], value["genes"]
    if not isinstance(kernel, str):
        raise FieldError(f"{field}.kernel", "text", kernel)
    if not isinstance(genes, dict):
        raise FieldError(f"{field}.genes", "an object of gene values", genes)
    for name, gene in genes.items():
        if not isinstance(gene, (int, float, str, bool)):
            raise FieldError(f"{field}.genes.{name}", _GENE_VALUE, gene)
    return Candidate.of(kernel, genes)


def _typed(value: Any, hint: Any, field: str) -> Any:
    """``value`` as the record type ``hint`` (a dataclass field's type) describes it."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        given = [o for o in options if o is not type(None)]
        if len(given) == 1:  # X | None, not null: X says what is wrong inside it
            return _typed(value, given[0], field)
        for option in given:
            try:
                return _typed(value, option, field)
            except FieldError:
                continue
        names = " or ".join(_describe(o) for o in options)
        raise FieldError(field, names, value)
    if origin is tuple:
        args = typing.get_args(hint)
        if not isinstance(value, list):
            raise FieldError(field, _describe(hint), value)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_typed(v, args[0], f"{field}[{i}]") for i, v in enumerate(value))
        if len(value) != len(args):
            raise FieldError(field, _describe(hint), value)
        pairs = enumerate(zip(value, args, strict=True))
        return tuple(_typed(v, a, f"{field}[{i}]") for i, (v, a) in pairs)
    if hint is Candidate:
        return _candidate(value, field)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return _dataclass(hint, value, field)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(value)
        except ValueError:
            raise FieldError(field, _describe(hint), value) from None
    check = _SCALARS.get(hint)
    if check is None:
        raise TypeError(f"no journal check for {hint!r} ({field})")  # a ctune bug
    if not check(value):
        raise FieldError(field, _describe(hint), value)
    return float(value) if hint is float else value


_SCALARS: dict[Any, Callable[[Any], bool]] = {
    float: _is_float,
    int: _is_int,
    str: lambda v: isinstance(v, str),
    bool: lambda v: isinstance(v, bool),
}


_PLURAL = {float: "numbers", int: "whole numbers", str: "texts", bool: "true or false values"}


def _describe(hint: Any) -> str:
    if typing.get_origin(hint) is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return f"a list of {_PLURAL.get(args[0], 'values')}"
        return f"a list of {len(args)} {_PLURAL.get(args[0], 'values')}"
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return "one of " + ", ".join(str(m.value) for m in hint)
    if dataclasses.is_dataclass(hint):
        return "an object"
    return {float: "a number", int: "a whole number", str: "text", bool: "true or false"}.get(
        hint, "null" if hint is type(None) else str(hint)
    )


def _dataclass(cls: type, value: Any, field: str) -> Any:
    """An instance of record class ``cls`` from its JSON object: every field known, typed."""
    if not isinstance(value, dict):
        raise FieldError(field, f"an object ({cls.__name__})", value)
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise FieldError(f"{field}.{unknown[0]}", f"a field of {cls.__name__}", value[unknown[0]])
    made: dict[str, Any] = {}
    for name, f in fields.items():
        if name not in value:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise FieldError(f"{field}.{name}", "a value (the field is missing)", None)
            continue
        made[name] = _typed(value[name], hints[name], f"{field}.{name}")
    return cls(**made)


def _field(record: Mapping[str, Any], name: str, check: Callable[[Any], bool], wanted: str) -> Any:
    value = record.get(name)
    if not check(value):
        raise FieldError(name, wanted, value)
    return value


def _optional(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: v is None or check(v)


def _positive_int(value: Any) -> bool:
    return _is_int(value) and value >= 1


def _finite(value: Any) -> bool:
    return _is_float(value) and math.isfinite(value)


def _positive_finite(value: Any) -> bool:
    return _finite(value) and value > 0


def _warm_start(value: Any) -> bool:
    """The plan's warm start (``plan.warm_start_identity``): its source, digest and share."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("source"), str)
        and isinstance(value.get("sha256"), str)
        and _positive_finite(value.get("share"))
    )


def _whole_at_least(low: int) -> Callable[[Any], bool]:
    return lambda v: _is_int(v) and v >= low


#: the header's fields a reader uses, when present: (check, what is expected)
_HEADER: dict[str, tuple[Callable[[Any], bool], str]] = {
    "kernel": (lambda v: isinstance(v, str), "text"),
    "problem": (lambda v: isinstance(v, str), "text"),
    "device": (lambda v: isinstance(v, str), "text"),
    "space": (lambda v: isinstance(v, dict), "an object"),
    "objectives": (lambda v: isinstance(v, dict), "an object"),
    "fingerprint": (lambda v: isinstance(v, dict), "an object"),
    "info": (lambda v: isinstance(v, dict), "an object"),
    "search": (lambda v: isinstance(v, dict), "an object"),
}

#: the search plan's fields (header ``search``; older journals keep three under ``info``)
_PLAN: dict[str, tuple[Callable[[Any], bool], str]] = {
    "strategy": (lambda v: isinstance(v, str), "text"),
    "options": (lambda v: isinstance(v, dict), "an object"),
    "seed": (_is_int, "a whole number"),
    "budget": (_optional(_positive_int), "a whole number of at least 1, or null"),
    "time_s": (_optional(_positive_finite), "a positive number of seconds, or null"),
    "patience": (_optional(_positive_int), "a whole number of at least 1, or null"),
    "fill": (lambda v: isinstance(v, bool), "true or false"),
    "cost_model": (lambda v: isinstance(v, bool), "true or false"),
    "warm_start": (_warm_start, "an object with a source, a sha256 and a share"),
}


def _texts(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) and v for v in value)


#: the header's objectives (``ObjectiveSpec.identity``): texts, each parsed by a reader
_OBJECTIVES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "objectives": (_texts, "a list of objective texts"),
    "constraints": (_texts, "a list of constraint texts"),
}


def _check_part(
    record: Mapping[str, Any], table: Mapping[str, tuple[Callable[[Any], bool], str]], at: str
) -> None:
    """The fields of ``table`` that ``record`` has, checked; ``at``: the dotted prefix."""
    for name, (check, wanted) in table.items():
        if name in record and not check(record[name]):
            raise FieldError(f"{at}{name}", wanted, record[name])


def check_header(record: Mapping[str, Any]) -> None:
    """The header's fields that are present have their types; its plan and objectives,
    their values (a string of objectives would be read letter by letter)."""
    _check_part(record, _HEADER, "")
    for part in ("search", "info"):
        _check_part(record.get(part) or {}, _PLAN, f"{part}.")
    _check_part(record.get("objectives") or {}, _OBJECTIVES, "objectives.")


@dataclass(frozen=True)
class TrialRecord:
    """A trial line: the trial and what the driver noted beside it."""

    trial: Trial
    filler: bool
    elapsed_s: float | None
    same_binary_as: str | None


def objective_count(header: Mapping[str, Any]) -> int | None:
    """How many objectives the header's search had (None: a header that does not say):
    every trial's ``values`` has one number for each."""
    named = (header.get("objectives") or {}).get("objectives")
    return len(named) if isinstance(named, list) else None


def trial_record(record: Mapping[str, Any], objectives: int | None = None) -> TrialRecord:
    """A trial line checked; ``objectives``: the number its ``values`` must have (the
    header's, :func:`objective_count`), where known."""
    trial = _typed(record.get("trial"), Trial, "trial")
    if trial.number < 0 or trial.generation < 0:
        raise FieldError("trial.number", "numbers of 0 or more", (trial.number, trial.generation))
    if objectives is not None and trial.values is not None and len(trial.values) != objectives:
        raise FieldError(
            "trial.values", f"{objectives} number(s), one per objective", list(trial.values)
        )
    filler = _field(record, "filler", _optional(lambda v: isinstance(v, bool)), "true or false")
    elapsed = _field(
        record,
        "elapsed_s",
        _optional(lambda v: _finite(v) and v >= 0),
        "seconds (0 or more)",
    )
    same = _field(record, "same_binary_as", _optional(lambda v: isinstance(v, str)), "a key")
    return TrialRecord(trial, filler is True, None if elapsed is None else float(elapsed), same)


def generation_record(record: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
    generation = _field(record, "generation", _whole_at_least(0), "a whole number of 0 or more")
    state = _field(record, "state", lambda v: isinstance(v, dict), "an object")
    return generation, state


def confirmation_record(record: Mapping[str, Any]) -> ConfirmationRound:
    trials = _field(record, "trials", _whole_at_least(1), "a whole number of at least 1")
    number = _field(record, "round", _whole_at_least(1), "a whole number of at least 1")
    runs = _field(record, "runs", lambda v: isinstance(v, dict), "an object of measurements")
    measured = {key: _typed(m, Measurement, f"runs.{key}") for key, m in runs.items()}
    return ConfirmationRound(trials, number, measured)


def checked(where: str, parse: Callable[..., Any], *args: Any) -> Any:
    """``parse(*args)``, with a field that does not fit as one line naming ``where``."""
    try:
        return parse(*args)
    except FieldError as exc:
        raise JournalRecordError(f"{where}: {exc}; {FIX}") from None


__all__ = [
    "FIX",
    "ConfirmationRound",
    "FieldError",
    "JournalRecordError",
    "TrialRecord",
    "check_header",
    "checked",
    "confirmation_record",
    "generation_record",
    "objective_count",
    "trial_record",
]

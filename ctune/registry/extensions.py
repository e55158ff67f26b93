"""The entries of an artifact's free-form ``extensions`` that ctune reads back, checked.

A read of an artifact does not check ``extensions`` (schema.py): a search records there
what it likes, and an entry nothing uses must not make a file unreadable. The few entries
ctune uses again are read here and only here, each held to the shape its writer
(``ctune/registry/assemble.py``) gives it; a malformed one is a :class:`RegistryError`
naming the file and the field. The caller decides what that means for its use: a re-tune,
which would run another search than the recorded one, stops; ``registry show``, for which
the entry is a remark, warns and leaves it out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ctune.errors import RegistryError
from ctune.registry.schema import Artifact

#: a strategy option's value as ``--option NAME=VALUE`` takes it again
OptionValue = str | int | float | bool


@dataclass(frozen=True, slots=True)
class RecordedSearch:
    """What ``registry retune`` needs of a search beyond ``provenance`` and the fingerprint.

    Empty or None: not recorded (artifacts from before it was), so the search's default.
    """

    objectives: tuple[str, ...] = ()  # extensions.objective_spec.objectives
    constraints: tuple[str, ...] = ()  # extensions.objective_spec.constraints
    options: tuple[tuple[str, OptionValue], ...] = ()  # extensions.search.plan.options
    time_s: float | None = None  # extensions.search.plan.time_s
    patience: int | None = None  # extensions.search.plan.patience
    fill: bool | None = None  # extensions.search.plan.fill
    cost_model: bool | None = None  # extensions.search.plan.cost_model: a plan holds it when on


def _fail(where: str, path: str, message: str) -> RegistryError:
    return RegistryError(f"{where}: extensions.{path}: {message}")


def _object(value: Any, where: str, path: str) -> Mapping[str, Any]:
    """An entry that holds others: an object, or absent (null) for an empty one."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _fail(where, path, "expected an object")
    return value


def _texts(value: Any, where: str, path: str) -> tuple[str, ...]:
    """A list of one-line strings (objective and constraint texts), or absent."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise _fail(where, path, "expected a list of strings")
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item or not item.isprintable():
            raise _fail(where, f"{path}[{i}]", "expected a non-empty one-line string")
    return tuple(value)


def _options(value: Any, where: str, path: str) -> tuple[tuple[str, OptionValue], ...]:
    """Strategy options as ``--option NAME=VALUE`` gives them back: NAME without ``=``."""
    out = []
    for name, item in sorted(_object(value, where, path).items()):
        if not name or "=" in name or not name.isprintable():
            raise _fail(where, f"{path} key {name[:40]!r}", "expected an option name")
        if not isinstance(item, (str, int, float)) or (
            isinstance(item, str) and not item.isprintable()
        ):
            raise _fail(where, f"{path}.{name}", "expected a string, number or boolean")
        out.append((name, item))
    return tuple(out)


def _number(value: Any, where: str, path: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _fail(where, path, "expected a number")
    return float(value)


def _whole(value: Any, where: str, path: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(where, path, "expected a whole number")
    return value


def _flag(value: Any, where: str, path: str) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise _fail(where, path, "expected true or false")
    return value


def recorded_objectives(a: Artifact, where: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(objective texts, constraint texts) as the search was asked for them; () where the
    artifact does not record them (its objectives' names stand in for the first)."""
    spec = _object(a.extensions.get("objective_spec"), where, "objective_spec")
    return (
        _texts(spec.get("objectives"), where, "objective_spec.objectives"),
        _texts(spec.get("constraints"), where, "objective_spec.constraints"),
    )


def recorded_search(a: Artifact, where: str) -> RecordedSearch:
    """Everything ``extensions`` records of the search that made ``a``, checked."""
    objectives, constraints = recorded_objectives(a, where)
    search = _object(a.extensions.get("search"), where, "search")
    plan = _object(search.get("plan"), where, "search.plan")
    return RecordedSearch(
        objectives=objectives,
        constraints=constraints,
        options=_options(plan.get("options"), where, "search.plan.options"),
        time_s=_number(plan.get("time_s"), where, "search.plan.time_s"),
        patience=_whole(plan.get("patience"), where, "search.plan.patience"),
        fill=_flag(plan.get("fill"), where, "search.plan.fill"),
        cost_model=_flag(
            plan.get("cost_model", False if plan else None), where, "search.plan.cost_model"
        ),
    )


def recorded_baseline_feasible(a: Artifact, where: str) -> bool | None:
    """Whether the search found the default build within its constraints
    (``search.baseline_feasible``); None where the artifact does not record it."""
    search = _object(a.extensions.get("search"), where, "search")
    return _flag(search.get("baseline_feasible"), where, "search.baseline_feasible")


def vendor_when_tuned(a: Artifact, where: str) -> Mapping[str, Any] | None:
    """The search's comparison with the spec's vendor call (``search.vendor``), None where
    there is none; its fields are read by the renderer, which names an unreadable one."""
    search = _object(a.extensions.get("search"), where, "search")
    vendor = search.get("vendor")
    return None if vendor is None else _object(vendor, where, "search.vendor")


__all__ = [
    "RecordedSearch",
    "recorded_baseline_feasible",
    "recorded_objectives",
    "recorded_search",
    "vendor_when_tuned",
]

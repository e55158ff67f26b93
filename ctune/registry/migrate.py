"""Schema migrations: pure functions from one version's JSON to the next.

``ctune registry migrate`` reads each older file strictly, applies the steps up to
:data:`SCHEMA_VERSION`, validates the result exactly as a read would and writes it in a
*new* commit (as asv's ``asv update``; rule G11). Each step is tested on a golden file.
A file whose fields are not in its schema's shape is a RegistryError naming the field: the
command reports it as not migrated and migrates the rest.
What each older schema lacked: docs/registry.md, "Schema versions".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ctune.errors import RegistryError
from ctune.records import Candidate, canonical_json, sha256_hex
from ctune.registry import schema
from ctune.registry.schema import SCHEMA_VERSION

_V0_FINGERPRINT_NAMES = {
    "nvcc": "nvcc_version",
    "ptxas": "ptxas_version",
    "gpu": "gpu_name",
    "cupy": "cupy_version",
    "ctune": "ctune_version",
    "source_sha256": "kernel_source_sha256",
}
_V0_UNITS = {"p50": "ms", "p95": "ms", "p99": "ms", "mean": "ms", "energy": "J", "power": "W"}
_V0_MEMBER_KEYS = {"genes", "values", "summary", "samples_ms", "flags", "defines", "launch"}


def _object(data: dict[str, Any], name: str, where: str, at: str = "") -> dict[str, Any]:
    """``data[name]`` where an older schema held an object (absent or null: empty); a file
    edited into another shape cannot be migrated, and says which field (``at``: the path
    to ``data``)."""
    value = data.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RegistryError(f"{where}: {at}{name}: expected an object")
    return value


def _list(data: dict[str, Any], name: str, where: str, at: str = "") -> list[Any]:
    """``data[name]`` where an older schema held a list (absent or null: empty)."""
    value = data.get(name)
    if value is None:
        return []
    if not isinstance(value, list):
        raise RegistryError(f"{where}: {at}{name}: expected a list")
    return value


def _v0_member(m: Any, kernel: str, where: str) -> dict[str, Any]:
    if not isinstance(m, dict) or not isinstance(m.get("genes"), dict):
        raise RegistryError(f"{where}: a v0 member needs a 'genes' object")
    unknown = sorted(set(m) - _V0_MEMBER_KEYS)
    if unknown:
        raise RegistryError(f"{where}: unknown v0 member field(s) {', '.join(unknown)}")
    candidate = Candidate.of(kernel, m["genes"])
    return {
        "candidate": candidate.to_json(),
        "key": candidate.key(),
        "values": m.get("values", []),
        "summary": m.get("summary", {}),
        "samples_ms": m.get("samples_ms", []),
        "nvcc_flags": m.get("flags", []),
        "defines": m.get("defines", {}),
        "launch": m.get("launch", {}),
    }


def v0_to_v1(data: dict[str, Any], where: str) -> dict[str, Any]:
    """Schema 0 -> 1 (see the module docstring for what changed)."""
    kernel = data.get("kernel")
    if not isinstance(kernel, str):
        raise RegistryError(f"{where}: no kernel name")
    fingerprint = {}
    for name, value in _object(data, "fingerprint", where).items():
        if not isinstance(value, str):
            raise RegistryError(
                f"{where}: fingerprint {name} was recorded as a {type(value).__name__} "
                f"({value!r}); the exact version is lost (12.1 may have been 12.10). Re-tune."
            )
        fingerprint[_V0_FINGERPRINT_NAMES.get(name, name)] = value
    objectives = []
    for name in _list(data, "objectives", where):
        if not isinstance(name, str) or name not in _V0_UNITS:
            raise RegistryError(f"{where}: v0 objective {str(name)[:40]!r} has no known unit")
        objectives.append({"name": name, "direction": "min", "unit": _V0_UNITS[name]})
    front = [
        _v0_member(m, kernel, f"{where}: front[{i}]")
        for i, m in enumerate(_list(data, "front", where))
    ]
    pinned = data.get("pinned")
    if pinned is not None and not (isinstance(pinned, int) and 0 <= pinned < len(front)):
        raise RegistryError(f"{where}: v0 pinned index {pinned!r} is not in the front")
    return {
        "schema_version": 1,
        "kernel": kernel,
        "problem": data.get("problem"),
        "device_class": data.get("device_class"),
        "fingerprint": fingerprint,
        "objectives": objectives,
        "front": front,
        "baseline": _v0_member(data.get("baseline"), kernel, f"{where}: baseline"),
        "pinned": None if pinned is None else front[pinned]["key"],
        "provenance": data.get("provenance") or {},
        "extensions": {},
    }


def v1_to_v2(data: dict[str, Any], where: str) -> dict[str, Any]:
    """Schema 2 adds runtime genes to front members (``runtime``, written only when a
    member has some): a v1 file had none, so only the version changes."""
    return {**data, "schema_version": 2}


#: the sampling plan every schema-2 artifact was measured with: ctune 0.1.0's defaults
#: (its searches took no sampling options but the objectives' quantile and energy).
#: Literal on purpose: this is history, it must not follow later defaults.
_V2_PLAN = {
    "warmup_ms": 25.0,
    "rep_ms": 100.0,
    "min_samples": 100,
    "max_samples": 5000,
    "quantile": 0.5,
    "l2_policy": "cold",
    "check": True,
    "energy": False,
    "energy_window_s": 1.0,
    "timeout_s": 0.0,
    "timing": "events",
}
_V2_QUANTILES = {"p50": 0.5, "p95": 0.95, "p99": 0.99}
_V2_ENERGY_TERMS = ("energy", "power", "edp", "perf_per_watt")


def _v2_plan(data: dict[str, Any], where: str) -> dict[str, Any]:
    """The plan a v2 search resolved: its objectives' tail quantile and energy, else defaults.
    A record of them in another shape is an error: the plan cannot be told from it."""
    spec = _object(_object(data, "extensions", where), "objective_spec", where, "extensions.")
    at = "extensions.objective_spec."
    texts = [str(t) for name in ("objectives", "constraints") for t in _list(spec, name, where, at)]
    texts += [
        str(o.get("name", "")) for o in _list(data, "objectives", where) if isinstance(o, dict)
    ]
    l2_policy = _object(data, "fingerprint", where).get("l2_policy", "cold")
    plan = dict(_V2_PLAN, l2_policy=l2_policy)
    for text in texts:
        for term, q in _V2_QUANTILES.items():
            if term in text:
                plan["quantile"] = max(plan["quantile"], q)
        if any(term in text for term in _V2_ENERGY_TERMS):
            plan["energy"] = True
    return plan


def v2_to_v3(data: dict[str, Any], where: str) -> dict[str, Any]:
    """Schema 3 records how the numbers were taken (protocol 1 and the resolved plan) and
    splits the spec digest per artifact.

    The v2 whole-spec digest is kept under ``inputs.legacy_spec_sha256``: ``ctune
    registry refresh`` adopts the per-part digests when the spec still has that digest
    (nothing in it changed, so every part is what was tuned). The source closure is
    not known file by file: ``ctune check`` verifies the binaries (SASS) instead, and
    ``refresh`` records it.
    """
    fingerprint = dict(_object(data, "fingerprint", where))
    legacy = fingerprint.pop("spec_sha256", None)
    fingerprint["protocol_version"] = "1"
    inputs: dict[str, Any] = {}
    if isinstance(legacy, str):
        inputs["legacy_spec_sha256"] = legacy
    protocol = {
        "plan": _v2_plan(data, where),
        "timing": "events",
        "note": "migrated from schema 2: the plan is ctune 0.1.0's defaults for its objectives",
    }
    return {
        **data,
        "schema_version": 3,
        "fingerprint": fingerprint,
        "protocol": protocol,
        "inputs": inputs,
    }


MIGRATIONS: dict[int, Callable[[dict[str, Any], str], dict[str, Any]]] = {
    0: v0_to_v1,
    1: v1_to_v2,
    2: v2_to_v3,
}


def upgrade(data: dict[str, Any], where: str) -> dict[str, Any]:
    """Apply every step from the file's version to the current one."""
    version = data.get("schema_version")
    if type(version) is not int or version > SCHEMA_VERSION:
        raise RegistryError(f"{where}: cannot migrate schema_version {version!r}")
    data = {k: v for k, v in data.items() if k != "digest"}
    while version < SCHEMA_VERSION:
        step = MIGRATIONS.get(version)
        if step is None:
            raise RegistryError(f"{where}: no migration from schema_version {version}")
        data = step(data, where)
        version = data["schema_version"]
    return data


def decode_history(data: bytes, where: str) -> schema.Artifact:
    """An artifact as a past commit holds it, older schemas upgraded in memory.

    History cannot be migrated (``ctune registry migrate`` writes a new commit), so
    reading ``REV:KEY`` of an older schema upgrades a copy instead of asking for a
    migration; a stored digest is still verified first. A newer schema still asks
    for a newer ctune.
    """
    raw = schema.parse_json_bytes(data, where)
    if not isinstance(raw, dict) or type(raw.get("schema_version")) is not int:
        return schema.decode(data, where)  # the strict reader names what is wrong
    if raw["schema_version"] >= SCHEMA_VERSION:
        return schema.decode(data, where)
    stored = raw.get("digest")
    if isinstance(stored, str):
        body = {k: v for k, v in raw.items() if k != "digest"}
        if sha256_hex(canonical_json(body)) != stored:
            raise RegistryError(
                f"{where}: digest mismatch: the file was edited after it was written"
            )
    return schema.from_json(upgrade(raw, where), where)

"""The artifact: one registry file per (kernel, problem, device class).

An artifact holds the Pareto front a search kept, the default build as the baseline, the
objectives, the pinned member's samples, provenance and the full fingerprint: the unit that
is committed, diffed, pinned, exported and gated. On disk it is JSON (``indent=2,
sort_keys=True``, so reviews read well) with a ``digest`` of the canonical rest.
:func:`decode` is strict on purpose (rules G4, G5, G11, X5: size cap, UTF-8, no duplicate
keys or NaN, schema version first, digest verified, fields type-checked, unknown fields
only under ``extensions``); any problem is one :class:`RegistryError` naming the file.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ctune.errors import RegistryError, UserError
from ctune.records import Candidate, canonical_json, sha256_hex
from ctune.spec import DEVICE_GENES

#: 2: front members may carry runtime genes (``runtime``)
#: 3: ``protocol`` (the resolved sampling plan and timing method the numbers were taken
#:    with) and ``inputs`` (the source closure, file by file); the fingerprint's
#:    ``spec_sha256`` is split per artifact and ``protocol_version`` is added
SCHEMA_VERSION = 3
MAX_BYTES = 16 * 1024 * 1024  # a front of 50 members with 1000 samples each is ~1 MB

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_HEX16 = re.compile(r"^[0-9a-f]{16}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
# Values that end up in a C header, a shell line or CMake (export.py): no
# quotes, backslashes, '$', ';', '#', whitespace other than ' ', or controls; no comment
# either (a header's '/*' would hide the defines after it).
_SAFE_VALUE = re.compile(r"^(?!.*(?:/\*|\*/|//))[A-Za-z0-9_.:<>,+\-*/()% ]{0,200}$")
# (``\,`` is nvcc's comma escape inside a -D value: quoting.py)
_SAFE_FLAG = re.compile(r"^(?:[A-Za-z0-9_.,=+\-/:<> ]|\\,){1,200}$")
_PRINTABLE = re.compile(r"^[\x20-\x7e]{0,2000}$")

#: provenance keys and their types; anything else goes under ``extensions``
PROVENANCE_TYPES: dict[str, tuple[type, ...]] = {
    "strategy": (str,),
    "seed": (int, type(None)),
    "evaluations": (int,),
    "budget": (int, type(None)),
    "code_commit": (str,),
    "journal_sha256": (str,),
    "source_dirty": (bool,),
    "created_utc": (str,),
    "wall_s": (float, int),
}
_LAUNCH_KEYS = ("grid", "block", "dynamic_smem_bytes")


@dataclass(frozen=True, slots=True)
class ObjectiveInfo:
    name: str  # e.g. "p99"
    direction: str  # "min" or "max"
    unit: str  # e.g. "ms", "J", "TFLOP/s"


@dataclass(frozen=True, slots=True)
class FrontMember:
    """One tuned candidate, with what a build needs to reproduce it.

    ``process_medians_ms`` holds the median of each separate measuring
    process (k >= 3 for the gate: run-to-run noise dominates:
    docs/design.md, measured facts); ``samples_ms`` the pooled samples behind them.
    """

    candidate: Candidate
    key: str  # Candidate.key()
    values: tuple[float, ...]  # in `objectives` order
    summary: dict[str, Any]  # p50_ms, p95_ms, p99_ms, mean_ms, ci's, n, device ...
    samples_ms: tuple[float, ...] = ()  # kept for the pinned member and the baseline
    process_medians_ms: tuple[float, ...] = ()
    sass_sha256: str = ""
    nvcc_flags: tuple[str, ...] = ()  # flag genes rendered as nvcc argv items
    defines: dict[str, Any] = field(default_factory=dict)  # -D NAME=VALUE
    launch: dict[str, Any] = field(default_factory=dict)  # grid, block, dynamic_smem_bytes
    resources: dict[str, Any] = field(default_factory=dict)  # regs, spills, smem
    # runtime genes: given at launch (the launch rule), never compiled in
    runtime: dict[str, Any] = field(default_factory=dict)
    # device genes set while it was measured (sm_clock_mhz, power_limit_w): part of what
    # ships, applied to the GPU, not the build; only those set (none: the GPU as found)
    device: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Artifact:
    kernel: str
    problem: str
    device_class: str  # e.g. "sm90-nvidia-h100-80gb-hbm3"
    fingerprint: dict[str, str]  # field name -> value (strings only: 12.10 is not 12.1)
    objectives: tuple[ObjectiveInfo, ...]
    front: tuple[FrontMember, ...]
    baseline: FrontMember
    pinned: str | None = None  # key of the pinned member (front or baseline)
    provenance: dict[str, Any] = field(default_factory=dict)
    # free-form, unchecked here; what ctune reads back is checked in registry/extensions.py
    extensions: dict[str, Any] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION
    # how the numbers were taken: {"plan": SamplingPlan fields, "timing": "events", "note"?}
    protocol: dict[str, Any] = field(default_factory=dict)
    # what was built: {"closure": {label: sha256}} (see ctune.compile.deps)
    inputs: dict[str, Any] = field(default_factory=dict)

    def member(self, key: str) -> FrontMember:
        """A front member (or the baseline) by candidate key."""
        for m in (*self.front, self.baseline):
            if m.key == key:
                return m
        known = ", ".join(m.key for m in self.front)
        raise UserError(
            f"no member {key} in {self.kernel}/{self.problem}/{self.device_class} "
            f"(front: {known}; baseline: {self.baseline.key})"
        )

    def pinned_member(self) -> FrontMember | None:
        return None if self.pinned is None else self.member(self.pinned)

    def digest(self) -> str:
        """sha256 of the canonical form; what pins carry and reads verify."""
        return sha256_hex(canonical_json(to_json(self)))


# --- encoding ---------------------------------------------------------------


def member_json(m: FrontMember) -> dict[str, Any]:
    """A member as the artifact file holds it (``registry show KEY@member --json``)."""
    out = {
        "candidate": m.candidate.to_json(),
        "key": m.key,
        "values": list(m.values),
        "summary": dict(m.summary),
        "samples_ms": list(m.samples_ms),
        "process_medians_ms": list(m.process_medians_ms),
        "sass_sha256": m.sass_sha256,
        "nvcc_flags": list(m.nvcc_flags),
        "defines": dict(m.defines),
        "launch": {k: list(v) if isinstance(v, tuple) else v for k, v in m.launch.items()},
        "resources": dict(m.resources),
    }
    if m.runtime:
        # written only when there are some, so a kernel without runtime genes keeps the
        # bytes and digest it had before the field existed
        out["runtime"] = dict(m.runtime)
    if m.device:  # likewise: only members measured under a device setting carry it
        out["device"] = dict(m.device)
    return out


def to_json(a: Artifact) -> dict[str, Any]:
    """The artifact as plain JSON values, without the digest."""
    return {
        "schema_version": a.schema_version,
        "kernel": a.kernel,
        "problem": a.problem,
        "device_class": a.device_class,
        "fingerprint": dict(a.fingerprint),
        "objectives": [
            {"name": o.name, "direction": o.direction, "unit": o.unit} for o in a.objectives
        ],
        "front": [member_json(m) for m in a.front],
        "baseline": member_json(a.baseline),
        "pinned": a.pinned,
        "provenance": dict(a.provenance),
        "extensions": dict(a.extensions),
        "protocol": dict(a.protocol),
        "inputs": {k: dict(v) if isinstance(v, dict) else v for k, v in a.inputs.items()},
    }


def encode(a: Artifact) -> bytes:
    """File bytes for ``a``; validates first, so an invalid artifact is never written."""
    data = to_json(a)
    try:
        plain = json.loads(json.dumps(data, allow_nan=False))
    except (TypeError, ValueError) as exc:  # NaN, Infinity, a Path in a summary ...
        raise RegistryError(f"artifact to write: {exc}") from None
    from_json(plain, "artifact to write")  # the same checks as a read
    plain["digest"] = sha256_hex(canonical_json(plain))
    text = json.dumps(plain, indent=2, sort_keys=True, ensure_ascii=True)
    return (text + "\n").encode()


# --- strict decoding --------------------------------------------------------


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


def _finite_float(text: str) -> float:
    """A JSON number as a float; one that overflows (``1e400`` would read as inf) refused."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is out of range")
    return value


def _bounded_int(text: str) -> int:
    """A JSON integer of at most 20 digits (every counter and size fits in 64 bits)."""
    if len(text.lstrip("-")) > 20:
        raise ValueError(f"the integer {text[:40]}... is out of range")
    return int(text)


def parse_json_bytes(data: bytes, where: str, max_bytes: int = MAX_BYTES) -> Any:
    """Strict JSON: size cap, UTF-8, no duplicate keys, no NaN/Infinity, bounded depth."""
    if len(data) > max_bytes:
        raise RegistryError(f"{where}: {len(data)} bytes is over the {max_bytes}-byte cap")
    try:
        text = data.decode("utf-8")
        return json.loads(
            text,
            object_pairs_hook=_no_duplicates,
            parse_constant=_no_constant,
            parse_float=_finite_float,
            parse_int=_bounded_int,
        )
    except UnicodeDecodeError:
        raise RegistryError(f"{where}: not UTF-8 text") from None
    except RecursionError:
        raise RegistryError(f"{where}: nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError is a ValueError
        raise RegistryError(f"{where}: not valid JSON ({str(exc)[:120]})") from None


def check_version(data: Any, where: str) -> int:
    """Refuse older and newer schemas with what to do (asv ``load_json``)."""
    if not isinstance(data, dict):
        raise RegistryError(f"{where}: not a JSON object")
    version = data.get("schema_version")
    if type(version) is not int:
        raise RegistryError(f"{where}: no integer schema_version; not a ctune artifact")
    if version < SCHEMA_VERSION:
        raise RegistryError(
            f"{where} has schema_version {version}; this ctune reads {SCHEMA_VERSION}. "
            "Run `ctune registry migrate`."
        )
    if version > SCHEMA_VERSION:
        raise RegistryError(
            f"{where} has schema_version {version}; this ctune reads {SCHEMA_VERSION}. "
            "Upgrade ctune."
        )
    return version


class _Checker:
    """Type checks with a JSON path in every message."""

    def __init__(self, where: str) -> None:
        self.where = where

    def fail(self, path: str, message: str) -> RegistryError:
        return RegistryError(f"{self.where}: {path}: {message}")

    def obj(
        self, v: Any, path: str, required: tuple[str, ...], optional: tuple[str, ...] = ()
    ) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise self.fail(path, "expected an object")
        missing = [k for k in required if k not in v]
        if missing:
            raise self.fail(path, f"missing {', '.join(missing)}")
        unknown = sorted(set(v) - set(required) - set(optional))
        if unknown:
            raise self.fail(path, f"unknown field(s) {', '.join(unknown)} (use 'extensions')")
        return v

    def text(self, v: Any, path: str, pattern: re.Pattern[str] = _PRINTABLE) -> str:
        if not isinstance(v, str) or not pattern.fullmatch(v):
            raise self.fail(path, f"expected a string matching {pattern.pattern}")
        return v

    def name(self, v: Any, path: str) -> str:
        from ctune.names import validate_name

        try:
            return validate_name(v, path)
        except UserError as exc:
            raise self.fail(path, str(exc)) from None

    def number(self, v: Any, path: str) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise self.fail(path, "expected a finite number")
        return float(v) if isinstance(v, float) else v

    def numbers(self, v: Any, path: str) -> tuple[float, ...]:
        if not isinstance(v, list):
            raise self.fail(path, "expected a list of numbers")
        return tuple(self.number(x, f"{path}[{i}]") for i, x in enumerate(v))

    def scalar(self, v: Any, path: str, pattern: re.Pattern[str] = _PRINTABLE) -> Any:
        if isinstance(v, bool) or v is None:
            return v
        if isinstance(v, (int, float)):
            return self.number(v, path)
        return self.text(v, path, pattern)

    def mapping(
        self, v: Any, path: str, key: re.Pattern[str], value: Callable[[Any, str], Any]
    ) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise self.fail(path, "expected an object")
        return {self.text(k, f"{path} key", key): value(x, f"{path}.{k}") for k, x in v.items()}


def _gene(c: _Checker, v: Any, path: str) -> Any:
    if v is None:
        raise c.fail(path, "gene values cannot be null")
    return c.scalar(v, path)


def _summary_value(c: _Checker, v: Any, path: str) -> Any:
    return list(c.numbers(v, path)) if isinstance(v, list) else c.scalar(v, path)


def _launch_dim(c: _Checker, v: Any, path: str) -> Any:
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise c.fail(path, "expected an integer or an expression string")
    return c.text(v, path, _SAFE_VALUE) if isinstance(v, str) else v


def _launch(c: _Checker, v: Any, path: str) -> dict[str, Any]:
    c.obj(v, path, (), _LAUNCH_KEYS)
    out: dict[str, Any] = {}
    for k in ("grid", "block"):
        if k in v:
            if not isinstance(v[k], list) or len(v[k]) != 3:
                raise c.fail(f"{path}.{k}", "expected a list of 3 dimensions")
            out[k] = tuple(_launch_dim(c, d, f"{path}.{k}[{i}]") for i, d in enumerate(v[k]))
    if "dynamic_smem_bytes" in v:
        out["dynamic_smem_bytes"] = _launch_dim(c, v["dynamic_smem_bytes"], f"{path}.smem")
    return out


def _resource(c: _Checker, v: Any, path: str) -> int | None:
    if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
        raise c.fail(path, "expected an integer or null")
    return v


def _member(c: _Checker, v: Any, path: str, kernel: str, n_values: int) -> FrontMember:
    required = ("candidate", "key", "values", "summary")
    optional = (
        "samples_ms",
        "process_medians_ms",
        "sass_sha256",
        "nvcc_flags",
        "defines",
        "launch",
        "resources",
        "runtime",
        "device",
    )
    c.obj(v, path, required, optional)
    cand = c.obj(v["candidate"], f"{path}.candidate", ("kernel", "genes"))
    if cand["kernel"] != kernel:
        raise c.fail(f"{path}.candidate.kernel", f"is {cand['kernel']!r}, not {kernel!r}")
    genes = c.mapping(cand["genes"], f"{path}.candidate.genes", _IDENT, lambda x, p: _gene(c, x, p))
    candidate = Candidate.of(kernel, genes)
    key = c.text(v["key"], f"{path}.key", _HEX16)
    if key != candidate.key():
        raise c.fail(f"{path}.key", f"{key} is not the candidate's key {candidate.key()}")
    values = c.numbers(v["values"], f"{path}.values")
    if len(values) != n_values:
        raise c.fail(f"{path}.values", f"has {len(values)} values for {n_values} objectives")
    sass = v.get("sass_sha256", "")
    if sass != "":
        c.text(sass, f"{path}.sass_sha256", _HEX64)
    flags = v.get("nvcc_flags", [])
    if not isinstance(flags, list):
        raise c.fail(f"{path}.nvcc_flags", "expected a list of strings")
    member = FrontMember(
        candidate=candidate,
        key=key,
        values=values,
        summary=c.mapping(
            v["summary"], f"{path}.summary", _IDENT, lambda x, p: _summary_value(c, x, p)
        ),
        samples_ms=c.numbers(v.get("samples_ms", []), f"{path}.samples_ms"),
        process_medians_ms=c.numbers(v.get("process_medians_ms", []), f"{path}.process_medians_ms"),
        sass_sha256=sass,
        nvcc_flags=tuple(
            c.text(f, f"{path}.nvcc_flags[{i}]", _SAFE_FLAG) for i, f in enumerate(flags)
        ),
        defines=c.mapping(
            v.get("defines", {}),
            f"{path}.defines",
            _IDENT,
            lambda x, p: c.scalar(x, p, _SAFE_VALUE),
        ),
        launch=_launch(c, v.get("launch", {}), f"{path}.launch"),
        resources=c.mapping(
            v.get("resources", {}), f"{path}.resources", _IDENT, lambda x, p: _resource(c, x, p)
        ),
        runtime=c.mapping(
            v.get("runtime", {}),
            f"{path}.runtime",
            _IDENT,
            lambda x, p: c.scalar(x, p, _SAFE_VALUE),
        ),
        device=_device(c, v.get("device", {}), f"{path}.device"),
    )
    _check_build_line(c, member, path)
    return member


def _check_build_line(c: _Checker, m: FrontMember, path: str) -> None:
    """An export writes a member's flags and defines into a user's build, so they must be
    what a build of its genes writes: flags ctune's builds use, and each define named
    like a gene holding that gene's value (docs/security.md)."""
    from ctune.compile.command import tuned_flags_refusal
    from ctune.quoting import define_flag

    why = tuned_flags_refusal(m.nvcc_flags)
    if why is not None:
        raise c.fail(f"{path}.nvcc_flags", f"{why}: no build writes it")
    genes = m.candidate.as_dict()
    for name, value in m.defines.items():
        if name in genes and define_flag(name, value) != define_flag(name, genes[name]):
            raise c.fail(
                f"{path}.defines.{name}", f"is {value!r}, but the member's gene is {genes[name]!r}"
            )


def _device(c: _Checker, v: Any, path: str) -> dict[str, int]:
    def positive_int(x: Any, p: str) -> int:
        if isinstance(x, bool) or not isinstance(x, int) or x <= 0:
            raise c.fail(p, "expected a positive whole number (MHz or W)")
        return x

    out = c.mapping(v, path, _IDENT, positive_int)
    unknown = sorted(set(out) - set(DEVICE_GENES.values()))
    if unknown:
        raise c.fail(
            f"{path}.{unknown[0]}", f"not a device gene ({', '.join(DEVICE_GENES.values())})"
        )
    return out


def _objective(c: _Checker, v: Any, path: str) -> ObjectiveInfo:
    c.obj(v, path, ("name", "direction", "unit"))
    direction = v["direction"]
    if direction not in ("min", "max"):
        raise c.fail(f"{path}.direction", "expected 'min' or 'max'")
    return ObjectiveInfo(
        c.text(v["name"], f"{path}.name", _IDENT), direction, c.text(v["unit"], f"{path}.unit")
    )


def _provenance(c: _Checker, v: Any, path: str) -> dict[str, Any]:
    c.obj(v, path, (), tuple(PROVENANCE_TYPES))
    for k, x in v.items():
        types = PROVENANCE_TYPES[k]
        if (isinstance(x, bool) and bool not in types) or not isinstance(x, types):
            raise c.fail(f"{path}.{k}", f"expected {' or '.join(t.__name__ for t in types)}")
        if isinstance(x, str):
            c.text(x, f"{path}.{k}")
    return dict(v)


def _protocol(c: _Checker, v: Any, path: str) -> dict[str, Any]:
    """The protocol; its plan read and validated as a measurement would use it, so that
    every later reader (check, refresh, retune, the gate) may trust its values."""
    from ctune.measure.plan import plan_from_json, validate

    c.obj(v, path, ("plan", "timing"), ("note",))
    if not isinstance(v["plan"], dict):
        raise c.fail(f"{path}.plan", "expected an object")
    try:
        validate(plan_from_json(dict(v["plan"])))
    except (TypeError, ValueError, UserError) as exc:
        raise c.fail(f"{path}.plan", str(exc)) from None
    c.text(v["timing"], f"{path}.timing", _IDENT)
    if "note" in v:
        c.text(v["note"], f"{path}.note")
    return dict(v)


def _inputs(c: _Checker, v: Any, path: str) -> dict[str, Any]:
    c.obj(v, path, (), ("closure", "legacy_spec_sha256"))
    out: dict[str, Any] = {}
    if "closure" in v:
        out["closure"] = c.mapping(
            v["closure"], f"{path}.closure", _PRINTABLE, lambda x, p: c.text(x, p, _HEX64)
        )
    if "legacy_spec_sha256" in v:
        out["legacy_spec_sha256"] = c.text(v["legacy_spec_sha256"], f"{path}.legacy", _HEX64)
    return out


#: an artifact file's top-level fields (``digest`` is added by :func:`encode`)
REQUIRED_FIELDS = (
    "schema_version",
    "kernel",
    "problem",
    "device_class",
    "fingerprint",
    "objectives",
    "front",
    "baseline",
    "protocol",
)
OPTIONAL_FIELDS = ("pinned", "provenance", "extensions", "inputs")
TOP_LEVEL_FIELDS = frozenset({*REQUIRED_FIELDS, *OPTIONAL_FIELDS, "digest"})


def from_json(data: Any, where: str) -> Artifact:
    """Validate parsed JSON (without ``digest``) and build the Artifact."""
    from ctune.evidence.identity import FIELDS

    check_version(data, where)
    c = _Checker(where)
    c.obj(data, "artifact", REQUIRED_FIELDS, OPTIONAL_FIELDS)
    kernel = c.name(data["kernel"], "kernel")
    fp = c.mapping(data["fingerprint"], "fingerprint", _IDENT, lambda x, p: c.text(x, p))
    unknown = sorted(set(fp) - set(FIELDS))
    if unknown:
        raise c.fail("fingerprint", f"unknown field(s) {', '.join(unknown)}")
    if not isinstance(data["objectives"], list) or not data["objectives"]:
        raise c.fail("objectives", "expected a non-empty list")
    objectives = tuple(
        _objective(c, o, f"objectives[{i}]") for i, o in enumerate(data["objectives"])
    )
    if not isinstance(data["front"], list):
        raise c.fail("front", "expected a list")
    front = tuple(
        _member(c, m, f"front[{i}]", kernel, len(objectives)) for i, m in enumerate(data["front"])
    )
    keys = [m.key for m in front]
    if len(set(keys)) != len(keys):
        raise c.fail("front", "has duplicate members")
    baseline = _member(c, data["baseline"], "baseline", kernel, len(objectives))
    pinned = data.get("pinned")
    if pinned is not None and pinned not in (*keys, baseline.key):
        raise c.fail("pinned", f"{str(pinned)[:20]!r} is not a member's key")
    extensions = data.get("extensions", {})
    if not isinstance(extensions, dict):
        raise c.fail("extensions", "expected an object")
    return Artifact(
        kernel=kernel,
        problem=c.name(data["problem"], "problem"),
        device_class=c.name(data["device_class"], "device_class"),
        fingerprint=fp,
        objectives=objectives,
        front=front,
        baseline=baseline,
        pinned=pinned,
        provenance=_provenance(c, data.get("provenance", {}), "provenance"),
        extensions=extensions,
        protocol=_protocol(c, data["protocol"], "protocol"),
        inputs=_inputs(c, data.get("inputs", {}), "inputs"),
    )


def decode(data: bytes, where: str) -> Artifact:
    """File bytes -> Artifact, or one RegistryError naming ``where``."""
    raw = parse_json_bytes(data, where)
    check_version(raw, where)
    stored = raw.pop("digest", None)
    if not isinstance(stored, str):
        raise RegistryError(f"{where}: no digest; the file was not written by ctune")
    actual = sha256_hex(canonical_json(raw))
    if stored != actual:
        raise RegistryError(
            f"{where}: digest mismatch (stored {stored[:12]}..., content {actual[:12]}...): "
            "the file is corrupt or was edited by hand; restore it from git"
        )
    return from_json(raw, where)


def with_pinned(a: Artifact, key: str | None) -> Artifact:
    """A copy of ``a`` pinning ``key`` (validated to be a member)."""
    if key is not None:
        a.member(key)
    return dataclasses.replace(a, pinned=key)


__all__ = [
    "MAX_BYTES",
    "PROVENANCE_TYPES",
    "SCHEMA_VERSION",
    "TOP_LEVEL_FIELDS",
    "Artifact",
    "FrontMember",
    "ObjectiveInfo",
    "check_version",
    "decode",
    "encode",
    "from_json",
    "member_json",
    "parse_json_bytes",
    "to_json",
    "with_pinned",
]

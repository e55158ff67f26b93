"""Say what a result depends on, and which of those things changed: the identity model.

A fingerprint is a flat ``{field: value}`` mapping of strings. :data:`FIELDS` gives every
field a source and one severity (hard: STALE; build: decided by the rebuilt SASS; soft: a
warning), the one rule that both ``ctune check`` and ``--resume`` apply. :func:`gpu_id` and
:func:`gpu_label` are the one identifier and the one display form of a GPU. This module is
the model and the GPU's probe; what needs the layers above it (the toolchain's versions, the
protocol version, the source closure) is probed by :mod:`ctune.identity_probe`, which
assembles the current fingerprint. Nothing is probed at import: NVML and CuPy are imported
where they are needed. The model and its fields: docs/staleness.md.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import io
import re
import tokenize
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from ctune.expr import parse_python
from ctune.names import validate_name
from ctune.records import DeviceInfo, FieldChange, canonical_json, sha256_hex

HARD = "hard"
BUILD = "build"
SOFT = "soft"
_ORDER = {HARD: 0, BUILD: 1, SOFT: 2}

#: field -> (severity, source)
FIELDS: dict[str, tuple[str, str]] = {
    "protocol_version": (HARD, "harness"),
    "nvcc_version": (BUILD, "toolchain"),
    "ptxas_version": (BUILD, "toolchain"),
    # soft: device code comes from cicc/ptxas (versions above, and each member's SASS
    # digest); the host compiler only preprocesses it, and the CI machine's g++ is
    # rarely the GPU runner's, so a hard field would call every artifact stale there
    "host_compiler": (SOFT, "toolchain"),
    "arch": (HARD, "spec"),
    "kernel_source_sha256": (BUILD, "source"),
    "cutlass_version": (BUILD, "source"),
    "spec_build_sha256": (BUILD, "spec"),
    "spec_entry": (HARD, "spec"),
    "spec_problem_sha256": (HARD, "spec"),
    "spec_args_sha256": (HARD, "spec"),
    "spec_reference_sha256": (HARD, "spec"),
    "spec_tolerance_sha256": (HARD, "spec"),
    "spec_metrics_sha256": (HARD, "spec"),
    "spec_space_sha256": (SOFT, "spec"),
    "l2_policy": (HARD, "spec"),
    "harness_sha256": (SOFT, "harness"),
    "gpu_name": (HARD, "gpu"),
    "sm": (HARD, "gpu"),
    "sm_count": (HARD, "gpu"),
    "memory_bytes": (HARD, "gpu"),
    "ecc": (HARD, "gpu"),
    "mig": (HARD, "gpu"),
    "compute_mode": (HARD, "gpu"),
    "driver": (SOFT, "gpu"),
    "power_limit_w": (SOFT, "gpu"),
    "clocks": (SOFT, "gpu"),
    "cuda_runtime": (SOFT, "gpu"),
    "cupy_version": (SOFT, "gpu"),
    "ctune_version": (SOFT, "harness"),
}

_COMPUTE_MODES = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}


#: why a change of a field matters, where the field name alone does not say it
EXPLAIN = {
    "spec_space_sha256": "the space changed since tuning; a retune may find better",
    "protocol_version": "measured under another measurement protocol",
    "harness_sha256": "ctune's measuring code changed (the protocol did not)",
}


def severity(name: str) -> str:
    """Hard, build or soft; a field this ctune does not know is hard (cannot vouch for it)."""
    return FIELDS.get(name, (HARD, ""))[0]


#: what :func:`gpu_id` names a result taken without a GPU (a compile-only run)
NO_GPU = "compile-only"


def _model_and_sm(device: DeviceInfo | Mapping[str, str] | None) -> tuple[str, str]:
    if isinstance(device, DeviceInfo):
        return device.name, device.sm
    if device is None:
        return "", ""
    return device.get("gpu_name", ""), device.get("sm", "")


def _slug(text: str, limit: int = 64) -> str:
    """Lowercase ASCII: runs of anything else become one '-'."""
    out = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return out[:limit].rstrip("-._") or "unknown"


def gpu_id(device: DeviceInfo | Mapping[str, str] | None) -> str:
    """``sm90-nvidia-h200``: which GPU, as a file and registry name (the SM arch, then
    the model name as NVML gives it, slugged).

    ``device`` is a measurement's :class:`DeviceInfo` or fingerprint fields (``sm``,
    ``gpu_name``); None or no model name: :data:`NO_GPU`. The registry's device class
    is this, so its value must never change for a GPU that has artifacts.
    """
    name, sm = _model_and_sm(device)
    if not name:
        return NO_GPU
    arch = _slug(sm.replace("_", ""), 8)
    return validate_name(_slug(f"{arch}-{name}"), "device class")


def gpu_label(device: DeviceInfo | Mapping[str, str]) -> str:
    """``NVIDIA H200 (sm_90)``: the display form of :func:`gpu_id`'s GPU; journals record
    it (``--resume`` compares it, so its format stays)."""
    name, sm = _model_and_sm(device)
    return f"{name} ({sm})"


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _clocks(pynvml: Any, handle: Any) -> str:
    sm = pynvml.nvmlDeviceGetApplicationsClock(handle, pynvml.NVML_CLOCK_SM)
    mem = pynvml.nvmlDeviceGetApplicationsClock(handle, pynvml.NVML_CLOCK_MEM)
    return f"sm={sm}MHz mem={mem}MHz"


def probe_gpu(index: int = 0) -> dict[str, str] | None:
    """GPU fields of device ``index`` from NVML (nvidia-ml-py); None without a GPU.

    Fields a device does not support are left out (reported "not checked")
    rather than guessed.
    """
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return None
    try:
        if pynvml.nvmlDeviceGetCount() <= index:
            return None
        h = pynvml.nvmlDeviceGetHandleByIndex(index)
        major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
        out = {
            "gpu_name": _text(pynvml.nvmlDeviceGetName(h)),
            "sm": f"sm_{major}{minor}",
            "driver": _text(pynvml.nvmlSystemGetDriverVersion()),
            "memory_bytes": str(pynvml.nvmlDeviceGetMemoryInfo(h).total),
        }
        optional = {
            "sm_count": lambda: str(pynvml.nvmlDeviceGetAttributes(h).multiprocessorCount),
            "ecc": lambda: "on" if pynvml.nvmlDeviceGetEccMode(h)[0] else "off",
            "mig": lambda: "on" if pynvml.nvmlDeviceGetMigMode(h)[0] else "off",
            "compute_mode": lambda: _COMPUTE_MODES.get(
                pynvml.nvmlDeviceGetComputeMode(h), "unknown"
            ),
            "power_limit_w": lambda: f"{pynvml.nvmlDeviceGetPowerManagementLimit(h) / 1000:g}",
            "clocks": lambda: _clocks(pynvml, h),
        }
        for name, read in optional.items():
            try:
                out[name] = read()
            except pynvml.NVMLError:
                # MIG/ECC "not supported" is a property of the device: record it
                if name in ("ecc", "mig"):
                    out[name] = "n/a"
        return out
    except pynvml.NVMLError:
        return None
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


def probe_runtime(index: int = 0) -> dict[str, str]:
    """CuPy and CUDA runtime versions (and the SM count) of device ``index``; {} without CuPy."""
    try:
        import cupy
    except ImportError:
        return {}
    out = {"cupy_version": str(cupy.__version__)}
    try:
        v = int(cupy.cuda.runtime.runtimeGetVersion())
        out["cuda_runtime"] = f"{v // 1000}.{(v % 1000) // 10}"
        # NVML's device attributes (SM count) are MIG-only on H100/H200
        props = cupy.cuda.runtime.getDeviceProperties(index)
        out["sm_count"] = str(int(props["multiProcessorCount"]))
    except Exception:  # CUDA runtime errors are cupy's own types; any failure: not checked
        pass
    return out


def probe_gpu_machine() -> dict[str, str] | None:
    """:func:`probe_gpu` plus :func:`probe_runtime`; None without a GPU."""
    fields = probe_gpu()
    return None if fields is None else {**probe_runtime(), **fields}  # NVML wins where both


def harness_sha256(package: Path | None = None) -> str:
    """Digest of the code in ``ctune/measure/*.py`` and the statistics (``package``: the
    ctune folder, the installed one by default): the code that makes the numbers. Comments,
    docstrings and blank lines are cut first, as for the reference: they make no number."""
    root = package or Path(__file__).parent.parent
    paths = [*sorted((root / "measure").glob("*.py")), root / "evidence" / "stats.py"]
    h = hashlib.sha256()
    for path in paths:
        name = path.relative_to(root).as_posix()
        h.update(name.encode() + b"\0" + _code_digest(path.read_bytes()))
    return h.hexdigest()


@lru_cache(maxsize=256)
def _code_digest(raw: bytes) -> bytes:
    """The digest of a measuring-code file's code (:func:`_code_text`, no docstrings), once
    per content: ``ctune check`` asks for the harness digest once per problem it checks,
    and cutting comments and docstrings is what costs (tokenize and ast)."""
    text = raw.decode(errors="replace").replace("\r\n", "\n").replace("\r", "\n")  # as read_text
    code = _code_text(text, docstrings=False)
    return hashlib.sha256(code.encode()).digest()


def _digest(value: Any) -> str:
    return sha256_hex(canonical_json(value))


def _docstring_spans(text: str) -> list[tuple[int, int, int, int]]:
    """(start row, start col, end row, end col) of every docstring, rows from 1, columns in
    characters: a string expression first in a module, class or function body."""
    try:
        tree = parse_python(text)
    except (SyntaxError, ValueError):
        return []  # loading the reference fails anyway
    lines = text.splitlines()

    def column(row: int, byte_offset: int) -> int:  # ast counts UTF-8 bytes
        return len(lines[row - 1].encode()[:byte_offset].decode(errors="replace"))

    spans = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        first = node.body[0] if node.body else None
        if (
            isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)
            and first.end_lineno is not None
            and first.end_lineno <= len(lines)  # str.splitlines also splits at form feeds
            and first.end_col_offset is not None
        ):
            spans.append(
                (
                    first.lineno,
                    column(first.lineno, first.col_offset),
                    first.end_lineno,
                    column(first.end_lineno, first.end_col_offset),
                )
            )
    return sorted(spans)


def _code_text(text: str, *, docstrings: bool) -> str:
    """The reference's text without comments, blank lines and trailing blanks (and without
    docstrings unless ``docstrings``): what the digest covers."""
    lines = text.splitlines()
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                row, col = token.start
                lines[row - 1] = lines[row - 1][:col]
    except (tokenize.TokenError, SyntaxError):
        pass  # loading the reference fails anyway; what was cut so far is cut
    if not docstrings:
        # last first: cutting one span leaves the columns of the earlier ones as they were
        for row, col, end_row, end_col in reversed(_docstring_spans(text)):
            lines[row - 1] = lines[row - 1][:col] + lines[end_row - 1][end_col:]
            for inside in range(row, end_row):
                lines[inside] = ""
    return "\n".join(line.rstrip() for line in lines if line.strip())


def reference_code_sha256(path: Path) -> str:
    """The reference's code, not its bytes: comments, docstrings and blank lines do not
    change what it checks. They are cut from the text and the text digested: neither
    ``ast.dump`` nor token types are the same across Python versions, and the CI machine's
    Python is rarely the GPU runner's. A reference without docstrings digests as it did
    when only comments were cut (:func:`legacy_reference_code_sha256`)."""
    return sha256_hex(_code_text(path.read_text(errors="replace"), docstrings=False))


def legacy_reference_code_sha256(path: Path) -> str:
    """The older form of :func:`reference_code_sha256`, docstrings counted: what artifacts
    recorded before docstrings were cut (see :func:`adopt_older_forms`)."""
    return sha256_hex(_code_text(path.read_text(errors="replace"), docstrings=True))


#: spec keys that shape the build (a change is verified by rebuilding, like a source edit)
BUILD_KEYS = ("source", "std", "include_dirs", "extra_flags", "acf_files")
#: spec keys with fields of their own (measurement) or checked otherwise (``launch``:
#: each member's grid/block/shared memory is re-evaluated and compared)
_OWN_KEYS = frozenset(
    {
        "entry",
        "args",
        "reference",
        "verify",  # in spec_reference_sha256, with its code
        "deterministic",
        "tolerance",
        "metrics",
        "launch",
        "l2_policy",  # the spec's raw keys are read under their one name (ctune.l2policy)
        "arch",
        "timing",  # recorded per artifact in protocol.timing
        "default_budget",  # how long a search runs, not what it searches
        "vendor",  # what a search is compared with, not what it measures
    }
)


def _reference_sha256(raw: Mapping[str, Any], code: str, verify_code: str | None = None) -> str:
    """What decides correctness: the reference and its code, and the verify function's key
    and code where the spec has one (a spec without it digests as it always did)."""
    parts = {
        "reference": raw.get("reference"),
        "code": code,
        "deterministic": raw.get("deterministic"),
    }
    if verify_code is not None:
        parts["verify"] = {"key": raw.get("verify"), "code": verify_code}
    return _digest(parts)


def _verify_code_sha256(spec: Any) -> str | None:
    """The verify file's code digest (as the reference's), None where the spec has none."""
    path = getattr(spec, "verify_path", None)
    return reference_code_sha256(path) if isinstance(path, Path) else None


def given_data_sha256(spec: Any) -> dict[str, str]:
    """Each given-data file's bytes by argument name (``init: {npy|npz|python: ...}``): the
    data an artifact was measured on is part of its inputs, as the reference's code is."""
    out: dict[str, str] = {}
    for arg in getattr(spec, "args", ()) or ():
        given = getattr(arg, "init", None)
        path = getattr(given, "path", None)
        if isinstance(path, Path):
            digest = hashlib.sha256()
            try:
                with path.open("rb") as f:
                    for block in iter(lambda: f.read(1 << 20), b""):
                        digest.update(block)
            except OSError:
                out[arg.name] = "unreadable"
                continue
            out[arg.name] = digest.hexdigest()
    return out


def _args_sha256(raw: Mapping[str, Any], given: Mapping[str, str]) -> str:
    """The args' text, and the given data's bytes where an arg has some (a spec without
    given data digests as it always did, so its artifacts stay current)."""
    args = raw.get("args")
    return _digest(args) if not given else _digest({"args": args, "given": dict(given)})


def older_forms(spec: Any) -> dict[str, str]:
    """Fields whose value ``spec`` has today also in an older digest form, that form: an
    artifact recorded in it describes the same inputs (``spec_reference_sha256`` before
    docstrings were cut). Only fields whose forms differ for this spec are listed."""
    raw = getattr(spec, "raw", None) or {}
    path = spec.reference_path
    legacy, now = legacy_reference_code_sha256(path), reference_code_sha256(path)
    if legacy == now:
        return {}
    return {"spec_reference_sha256": _reference_sha256(raw, legacy, _verify_code_sha256(spec))}


def adopt_older_forms(
    recorded: Mapping[str, str], current: Mapping[str, str], older: Mapping[str, str]
) -> dict[str, str]:
    """``recorded`` with each value that equals today's inputs in an older form
    (:func:`older_forms`) replaced by today's form: the one rule by which ``ctune check``
    compares, and ``ctune registry refresh`` rewrites, such artifacts. An older form covers
    more than today's (docstrings), so equal in it means equal in today's."""
    out = dict(recorded)
    for name, value in older.items():
        if name in current and out.get(name) == value:
            out[name] = current[name]
    return out


def spec_part_fields(spec: Any, problem: str | None = None) -> dict[str, str]:
    """The spec's fields for one problem's artifact, split by part (no toolchain needed).

    Only this problem's entry in ``problems`` is hard; other problems, genes,
    restrictions and descriptions are the *space* (soft), so adding a problem
    or a gene value does not make the other artifacts stale.
    """
    raw = getattr(spec, "raw", None) or {}
    name = problem or spec.problem().name
    body = next((p for p in raw.get("problems") or () if p.get("name") == name), None)
    entry = raw.get("entry")
    return {
        "spec_entry": entry if isinstance(entry, str) else canonical_json(entry),
        "spec_problem_sha256": _digest(body),
        "spec_args_sha256": _args_sha256(raw, given_data_sha256(spec)),
        "spec_reference_sha256": _reference_sha256(
            raw, reference_code_sha256(spec.reference_path), _verify_code_sha256(spec)
        ),
        "spec_tolerance_sha256": _digest(raw.get("tolerance")),
        "spec_metrics_sha256": _digest(raw.get("metrics")),
        "spec_build_sha256": _digest({k: raw.get(k) for k in BUILD_KEYS}),
        "spec_space_sha256": _digest(
            {k: v for k, v in raw.items() if k not in _OWN_KEYS and k not in BUILD_KEYS}
        ),
    }


def diff(old: Mapping[str, str], new: Mapping[str, str], checked: set[str]) -> list[FieldChange]:
    """Fields in ``checked`` whose value in ``new`` differs from ``old``, hard first.

    A field ``old`` never recorded counts as changed (its severity stands):
    the artifact cannot vouch for it. Fields missing from ``new`` are not
    compared here; :func:`not_checked` lists them.
    """
    changes = []
    for name in sorted(checked):
        if name not in new:
            continue
        was = old.get(name)
        if was != new[name]:
            changes.append(
                FieldChange(
                    name, "(not recorded)" if was is None else was, new[name], severity(name)
                )
            )
    return sorted(changes, key=lambda c: (_ORDER.get(c.severity, 0), c.name))


def not_checked(old: Mapping[str, str], new: Mapping[str, str], checked: set[str]) -> list[str]:
    """Known fields the artifact records that this check could not compare."""
    return sorted(n for n in old if n in FIELDS and not (n in checked and n in new))


def not_checked_reason(names: list[str], gpu_probed: bool, *, brief: bool = False) -> str:
    """One phrase for the CLI: ``not checked: no GPU (driver, gpu_name, ...)``; ``brief``:
    counted, not named (``no GPU: 12 GPU fields not checked``)."""
    gpu = [n for n in names if FIELDS[n][1] == "gpu"]
    other = [n for n in names if FIELDS[n][1] != "gpu"]
    parts = []
    if gpu:
        why = "not reported by this GPU" if gpu_probed else "no GPU"
        if brief:
            parts.append(f"{why}: {len(gpu)} GPU field{'s' * (len(gpu) != 1)} not checked")
        else:
            parts.append(f"{why} ({', '.join(gpu)})")
    if other:
        many = "s" * (len(other) != 1)
        parts.append(
            f"{len(other)} field{many} not probed" if brief else f"not probed ({', '.join(other)})"
        )
    return "; ".join(parts)


__all__ = [
    "BUILD",
    "BUILD_KEYS",
    "EXPLAIN",
    "FIELDS",
    "HARD",
    "NO_GPU",
    "SOFT",
    "adopt_older_forms",
    "diff",
    "gpu_id",
    "gpu_label",
    "harness_sha256",
    "legacy_reference_code_sha256",
    "not_checked",
    "not_checked_reason",
    "older_forms",
    "probe_gpu",
    "probe_gpu_machine",
    "probe_runtime",
    "reference_code_sha256",
    "severity",
    "spec_part_fields",
]

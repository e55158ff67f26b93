"""Settings, resolved once at the edge and passed down as one frozen object.

Precedence, highest first: command-line options (``cli_overrides``), ``CTUNE_<FIELD>``
environment variables, the ``[tool.ctune]`` table of the nearest ``pyproject.toml`` (its
paths relative to that file), the defaults below. Library code never reads ``os.environ``:
it takes a :class:`Settings` or explicit arguments, so tests need no reset fixture. An
unknown ``CTUNE_*`` variable is warned about (:func:`unknown_variables`). docs/settings.md.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import sys
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

from ctune import arch, l2policy
from ctune.engine_settings import check as check_executor
from ctune.engine_settings import parse_executor, parse_gpus
from ctune.errors import UserError
from ctune.files import program_problem, read_text_capped

#: a pyproject.toml larger than this is not read for its [tool.ctune] table
MAX_PYPROJECT_BYTES = 1024 * 1024
#: which builds ``relink`` makes from a kept front end (the Settings field's docs)
RelinkMode = Literal["auto", "on", "off"]


@dataclass(frozen=True, slots=True)
class Settings:
    arch: str = ""  # empty: the spec's own arch (sm_90 unless it says otherwise)
    nvcc: str = "nvcc"  # a name on PATH, a path, or "wheel" (the nvidia-cuda-nvcc wheel's)
    ptxas: str = ""  # empty: nvcc's own; a path: cubins from it, PTX from nvcc (split)
    cache_dir: Path = Path(".ctune")
    registry: Path = Path("registry")
    kernels: Path = Path("kernels")  # the <kernel>.yaml specs check, gate and refresh read
    registry_remote: str = "origin"  # the git remote `ctune registry push` / `pull` / `status` use
    jobs: int = 0  # parallel compiles; 0 = one per CPU core
    compile_timeout_s: float = 120.0
    compile_memory_bytes: int = 12 * 1024**3  # RLIMIT_AS guard per nvcc process group member
    #: builds that differ only in ptxas options: ptxas (and, for a launcher, a relink) on a
    #: kept front end instead of the whole nvcc run (ctune/compile/relink.py); ``auto``: the
    #: builds with ptxas options of their own (flag variants, controls files), ``on``: every
    #: build, ``off``: none
    relink: RelinkMode = "auto"
    l2_policy: str = ""  # empty: the spec's own policy (cold unless it says hot)
    timing: str = ""  # empty: the spec's own (auto unless it says events or graph)
    warmup_ms: float = 25.0
    rep_ms: float = 100.0
    energy_window_s: float = 1.0
    run_timeout_floor_s: float = 10.0
    debug: bool = False
    executor: str = "local"  # local, dask, auto or a Dask scheduler address (ctune/scale)
    gpus: str = ""  # empty: GPU 0; "all" or "0,1": several GPUs through the engine
    nvml_library: str = "pynvml"  # what --device-genes sets clocks through (tests: a stand-in)
    #: CompileIQ's search spaces (ptxas13.3.bin, ...; ctune.controls.spaces); None: unset
    acf_spaces: Path | None = None

    def with_overrides(self, **overrides: Any) -> Settings:
        return dataclasses.replace(self, **_coerce_all(overrides, "option"))


def _kind(annotation: Any) -> str:
    """A field's type by name; an optional one (``Path | None``: unset) as its type."""
    name = annotation if isinstance(annotation, str) else annotation.__name__
    return str(name).removesuffix(" | None")


_PATH_FIELDS = tuple(f.name for f in fields(Settings) if _kind(f.type) == "Path")
#: text settings that name a file when set: a relative one is taken from the settings
#: file's folder too
_FILE_FIELDS = (*_PATH_FIELDS, "ptxas", "nvcc")
#: ... of which these name a file only when they are a path (``tc/nvcc``): a bare name
#: (``nvcc``, ``wheel``) is looked up on PATH
_NAME_OR_PATH = ("nvcc",)

#: folders of the project: unset, they are taken from the [tool.ctune] file's folder too
_PROJECT_FOLDERS = {"registry": "registry", "kernels": "kernels"}

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


@dataclass(frozen=True, slots=True)
class _Rule:
    """What a setting's value must be: ``expected`` completes "expected ..." in the error,
    ``ok`` says whether the parsed value is one."""

    expected: str
    ok: Callable[[Any], bool] = lambda _value: True
    #: what is wrong with a value of the right shape (a path that is no program), or None
    problem: Callable[[Any], str | None] = lambda _value: None


def _within(low: float, high: float, *, low_ok: bool = False) -> Callable[[Any], bool]:
    """A finite number in (low, high], or [low, high] with ``low_ok``."""
    return lambda v: math.isfinite(v) and (low <= v if low_ok else low < v) and v <= high


def _accepts(check: Callable[[Any], Any], value: Any) -> bool:
    """Whether ``check`` (which raises ValueError or UserError to refuse) takes ``value``."""
    try:
        check(value)
    except (ValueError, UserError):
        return False
    return True


def _empty_or(check: Callable[[Any], Any]) -> Callable[[Any], bool]:
    """Empty (the spec's own, GPU 0), or a value ``check`` accepts."""
    return lambda value: value == "" or _accepts(check, value)


def _executor_ok(value: str) -> bool:
    return _accepts(parse_executor, value)


def _gpus_ok(value: str) -> bool:
    return _accepts(parse_gpus, value)


_HOUR_MS, _HOUR_S, _WEEK_S = 3_600_000, 3_600, 604_800

#: every setting's rule, checked in the layer its value came from so that the error
#: names it as the user wrote it (--rep-ms, CTUNE_REP_MS or the file's [tool.ctune] rep_ms)
_RULES: dict[str, _Rule] = {
    "arch": _Rule(
        "an architecture like sm_90 or sm_90a, or empty for the spec's", _empty_or(arch.check)
    ),
    "nvcc": _Rule(
        "the nvcc to run: a name on PATH, a path, or wheel (the nvidia-cuda-nvcc wheel's)",
        lambda v: bool(v.strip()) and "\0" not in v,
    ),
    "ptxas": _Rule(
        "the path of a ptxas to make cubins with (PTX still from nvcc), or empty for nvcc's own",
        lambda v: "\0" not in v,
        lambda v: program_problem(v) if v else None,
    ),
    "cache_dir": _Rule("a folder (empty would be the current folder)"),
    "registry": _Rule("a folder (empty would be the current folder)"),
    "kernels": _Rule("a folder of <kernel>.yaml specs (empty would be the current folder)"),
    "registry_remote": _Rule("a git remote name such as origin", lambda v: bool(v.strip())),
    "jobs": _Rule("an integer from 0 (one per CPU core) to 1024", lambda v: 0 <= v <= 1024),
    "compile_timeout_s": _Rule(
        f"a finite number of seconds > 0 and at most {_WEEK_S}", _within(0, _WEEK_S)
    ),
    "compile_memory_bytes": _Rule(
        "an integer number of bytes from 0 (no limit) to 2**62", lambda v: 0 <= v <= 2**62
    ),
    "relink": _Rule("auto, on or off (on and off also as 1/0, true/false, yes/no)"),
    "l2_policy": _Rule(
        f"one of {', '.join(l2policy.POLICIES)}, or empty for the spec's",
        _empty_or(l2policy.check),
    ),
    "timing": _Rule(
        "one of auto, events, graph, or empty for the spec's",
        lambda v: v in ("", "auto", "events", "graph"),
    ),
    "warmup_ms": _Rule(
        f"a finite number of milliseconds >= 0 and at most {_HOUR_MS}",
        _within(0, _HOUR_MS, low_ok=True),
    ),
    "rep_ms": _Rule(
        f"a finite number of milliseconds > 0 and at most {_HOUR_MS}", _within(0, _HOUR_MS)
    ),
    "energy_window_s": _Rule(
        f"a finite number of seconds > 0 and at most {_HOUR_S}", _within(0, _HOUR_S)
    ),
    "run_timeout_floor_s": _Rule(
        f"a finite number of seconds > 0 and at most {_WEEK_S}", _within(0, _WEEK_S)
    ),
    "debug": _Rule("on or off: 1/0, true/false, yes/no, on/off"),
    "executor": _Rule(
        "local, dask, auto or a Dask scheduler address such as tcp://host:8786", _executor_ok
    ),
    "gpus": _Rule("all, or GPU indices such as 0,1 (empty: GPU 0)", _gpus_ok),
    "nvml_library": _Rule("a Python module name", lambda v: bool(v.strip())),
    "acf_spaces": _Rule("a folder holding CompileIQ's search spaces (ptxas13.3.bin, ...)"),
}

_TYPE_EXPECTED = {"int": "an integer", "float": "a number", "bool": "on or off", "str": "text"}


def parse_relink(raw: Any) -> RelinkMode:
    """A ``relink`` value: ``auto``, or on/off written as any of the booleans' spellings."""
    if isinstance(raw, str) and raw.strip().lower() == "auto":
        return "auto"
    return "on" if _parse_bool(raw) else "off"


def _parse_bool(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text not in _TRUE + _FALSE:
        raise ValueError(text)
    return text in _TRUE


def _parse(kind: str, raw: Any) -> Any:
    """``raw`` as the field's type; ValueError when it is not one (a TOML ``true`` is not a
    number, ``8.5`` not an integer, an empty path not the current folder)."""
    if kind == "Path":
        text = str(raw)
        if not text.strip() or "\0" in text:
            raise ValueError(text)
        return Path(text)
    if kind == "bool":
        return _parse_bool(raw)
    if kind == "RelinkMode":
        return parse_relink(raw)
    if kind in ("int", "float"):
        if isinstance(raw, bool) or (kind == "int" and isinstance(raw, float)):
            raise ValueError(raw)
        return int(raw) if kind == "int" else float(raw)
    if not isinstance(raw, str):
        raise ValueError(raw)
    return raw


def _shown(raw: Any, where: str) -> str:
    """The value as the user wrote it: bare from the environment or an option (quoted when
    empty), quoted as in TOML from a file."""
    if where in ("env", "option") and isinstance(raw, str | int | float | os.PathLike):
        return str(raw) if str(raw).strip() else repr(str(raw))
    return repr(raw)


def _anchored(name: str, value: Any, base: Path) -> Any:
    """A file setting of ``[tool.ctune]`` taken from that file's folder ``base``, so it
    means the same from any subfolder; an empty one is left to be refused (or mean unset)."""
    text = str(value)
    if name not in _FILE_FIELDS or not text.strip():
        return value
    if name in _NAME_OR_PATH and os.sep not in text:
        return value
    anchored = base / Path(value).expanduser()
    return anchored if isinstance(value, Path) else str(anchored)


def _coerce(name: str, raw: Any, where: str, base: Path | None = None) -> Any:
    """One setting parsed and range-checked; a UserError naming it as written otherwise.
    ``base``: the folder a settings file's relative paths are taken from (its own)."""
    kind = _kind({f.name: f.type for f in fields(Settings)}[name])
    rule = _RULES.get(name)
    problem = None
    try:
        value = _parse(kind, raw)
        value = _anchored(name, value, base) if base is not None else value
        good = rule is None or rule.ok(value)
        problem = rule.problem(value) if good and rule is not None else None
    except (TypeError, ValueError, OverflowError):
        good = False
    if not good or problem:
        expected = rule.expected if rule else _TYPE_EXPECTED.get(kind, kind)
        reason = f"{problem}; " if problem else ""
        raise UserError(f"{_origin(name, where)}={_shown(raw, where)}: {reason}expected {expected}")
    return value


def _coerce_all(values: Mapping[str, Any], where: str, base: Path | None = None) -> dict[str, Any]:
    known = {f.name for f in fields(Settings)}
    out: dict[str, Any] = {}
    for name, raw in values.items():
        if raw is None:
            continue
        if name not in known:
            raise UserError(f"unknown {where} '{name}' (allowed: {', '.join(sorted(known))})")
        out[name] = _coerce(name, raw, where, base)
    return out


#: options spelled otherwise than their setting
_OPTION_NAMES = {"energy_window_s": "--energy-window", "registry_remote": "--remote"}


def _origin(name: str, where: str) -> str:
    """The setting as the user wrote it: ``--arch``, ``CTUNE_ARCH``, ``... [tool.ctune] arch``."""
    if where == "option":
        return _OPTION_NAMES.get(name, f"--{name.replace('_', '-')}")
    if where == "env":
        return f"CTUNE_{name.upper()}"
    return f"{where.removesuffix(' key')} {name}"


def debug_enabled(environ: Mapping[str, str]) -> bool:
    """Whether ``CTUNE_DEBUG`` asks for tracebacks: 1/true/yes/on; 0/false/no/off or empty
    (or a value that is none of these, which the settings then refuse in one line) is off."""
    try:
        return _parse_bool(environ.get("CTUNE_DEBUG", ""))
    except ValueError:
        return False


def find_pyproject(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def file_settings(start: Path) -> dict[str, Any]:
    """``[tool.ctune]`` of the nearest pyproject.toml, as written; the project's folders the
    table does not set are their defaults. :func:`resolve` takes relative paths from that
    file's folder (as Ruff and pytest do), so the settings mean the same from any
    subfolder, and an error names a value as written."""
    path = find_pyproject(start)
    if path is None:
        return {}
    text = read_text_capped(path, MAX_PYPROJECT_BYTES, "settings file")
    data = _toml(path, text)
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise UserError(f"{path} tool = {_brief(tool)}: expected a table; {_TABLE_FIX}")
    table = tool.get("ctune", {})
    if not isinstance(table, dict):
        raise UserError(f"{path} [tool] ctune = {_brief(table)}: expected a table; {_TABLE_FIX}")
    written = {k.replace("-", "_"): k for k in table}
    out = _migrated(
        {k.replace("-", "_"): v for k, v in table.items()},
        f"{path} [tool.ctune]: ",
        lambda name: written.get(name, name),
    )
    if "ctune" in tool:  # a ctune project: its folders are this file's
        for name, default in _PROJECT_FOLDERS.items():
            out.setdefault(name, default)
    return out


_TABLE_FIX = "write ctune's settings as keys under [tool.ctune]"
#: a key whose value is an integer literal too long to convert, and the table it is in
_LONG_INT = re.compile(
    r"^[ \t]*([A-Za-z0-9_.-]+|\"[^\"\n]*\")[ \t]*=[ \t]*[+-]?[0-9][0-9_]*[ \t]*(#.*)?$", re.M
)
_TABLE = re.compile(r"^[ \t]*\[+([^\]\n]*)\]+", re.M)


def _brief(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


def _toml(path: Path, text: str) -> dict[str, Any]:
    """The TOML document; a document that does not parse is one line naming the file, and
    an integer longer than Python converts (``sys.get_int_max_str_digits``) names its key."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: cannot read [tool.ctune]: {exc}") from None
    except ValueError:
        limit = sys.get_int_max_str_digits()
        for match in _LONG_INT.finditer(text):
            value = match.group(0).partition("=")[2].partition("#")[0]
            digits = sum(ch.isdigit() for ch in value)
            if digits > limit:
                tables = _TABLE.findall(text, 0, match.start())
                where = f"[{tables[-1].strip()}] " if tables else ""
                raise UserError(
                    f"{path} {where}{match.group(1)}: an integer of {digits} digits; "
                    f"expected at most {limit}"
                ) from None
        raise UserError(f"{path}: an integer of more than {limit} digits") from None


def env_settings(environ: Mapping[str, str]) -> dict[str, Any]:
    known = set(_setting_names())
    written = {
        key[len("CTUNE_") :].lower(): key
        for key in environ
        if key.startswith("CTUNE_") and key[len("CTUNE_") :].lower() in known
    }
    found = {name: environ[key] for name, key in written.items()}
    return _migrated(found, "", lambda name: written.get(name, f"CTUNE_{name.upper()}"))


#: ``CTUNE_*`` variables that are not settings: ctune's test suite and benches read them
_NOT_SETTINGS = ("CTUNE_REQUIRE", "CTUNE_UPDATE_GOLDEN", "CTUNE_DEVICE_LOGS")
_NOT_SETTINGS_PREFIX = "CTUNE_TEST_"


def _setting_names() -> list[str]:
    """Every setting's name as a ``CTUNE_*`` variable spells it after the prefix."""
    return sorted([f.name for f in fields(Settings)] + list(l2policy.OLD_NAMES))


def unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """One warning per ``CTUNE_*`` variable that names no setting (a typo is otherwise
    silently ignored), with the closest setting's variable where one is close."""
    import difflib

    names = _setting_names()
    warnings = []
    for key in sorted(environ):
        name = key[len("CTUNE_") :].lower()
        if (
            not key.startswith("CTUNE_")
            or name in names
            or key in _NOT_SETTINGS
            or key.startswith(_NOT_SETTINGS_PREFIX)
        ):
            continue
        close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
        hint = (
            f"did you mean CTUNE_{close[0].upper()}?"
            if close
            else "ctune reads " + ", ".join(f"CTUNE_{n.upper()}" for n in names)
        )
        warnings.append(f"{key} is not a ctune setting and is ignored; {hint}")
    return warnings


def _migrated(values: dict[str, Any], where: str, spelled: Callable[[str], str]) -> dict[str, Any]:
    """Old setting names (``l2``, ``CTUNE_L2``) under their one name; ``where`` starts the
    message and ``spelled`` says a setting as the user wrote it (``CTUNE_L2``, ``l2-policy``)."""
    try:
        return l2policy.migrate(values)
    except l2policy.BothNames as exc:
        old, new = spelled(exc.old), spelled(exc.new)
        raise UserError(
            f"{where}both {old} (the old name) and {new} are given, and differ; keep {new}"
        ) from None


def resolve(
    cli_overrides: Mapping[str, Any] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Settings:
    """Merge the four layers in the documented order into one Settings."""
    start = cwd or Path.cwd()
    merged: dict[str, Any] = {}
    pyproject = find_pyproject(start)
    file_where = f"{pyproject or 'pyproject.toml'} [tool.ctune] key"
    base = pyproject.parent if pyproject is not None else None
    merged.update(_coerce_all(file_settings(start), file_where, base))
    merged.update(_coerce_all(env_settings(os.environ if environ is None else environ), "env"))
    merged.update(_coerce_all(cli_overrides or {}, "option"))
    return _validated(Settings(**merged))


def _validated(settings: Settings) -> Settings:
    """What no single setting can say alone: several GPUs and a running cluster's address."""
    check_executor(settings.executor, settings.gpus)
    return settings

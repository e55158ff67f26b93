"""Settings, resolved once at the edge and passed down as one frozen object.

Precedence, highest first:

1. command-line options (``cli_overrides``),
2. ``CTUNE_<FIELD>`` environment variables (e.g. ``CTUNE_JOBS=8``),
3. the ``[tool.ctune]`` table of the nearest ``pyproject.toml`` above the working directory
   (its relative paths taken from that file's folder),
4. the defaults below.

Library code never reads ``os.environ``; it takes a :class:`Settings` or
explicit arguments (Triton's env-backed knobs need a reset fixture in every
test; this does not).
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ctune import arch, l2policy
from ctune.errors import UserError


@dataclass(frozen=True, slots=True)
class Settings:
    arch: str = ""  # empty: the spec's own arch (sm_90 unless it says otherwise)
    nvcc: str = "nvcc"
    cache_dir: Path = Path(".ctune")
    registry: Path = Path("registry")
    registry_remote: str = "origin"  # the git remote `ctune registry push` / `pull` / `status` use
    jobs: int = 0  # parallel compiles; 0 = one per CPU core
    compile_timeout_s: float = 120.0
    compile_memory_bytes: int = 12 * 1024**3  # RLIMIT_AS guard per nvcc process group member
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

    def with_overrides(self, **overrides: Any) -> Settings:
        return dataclasses.replace(self, **_coerce_all(overrides, "option"))


_PATH_FIELDS = tuple(f.name for f in fields(Settings) if f.type in ("Path", Path))


def _coerce(name: str, raw: Any, where: str) -> Any:
    target = {f.name: f.type for f in fields(Settings)}[name]
    try:
        if target in ("Path", Path):
            return Path(raw)
        if target in ("int", int):
            return int(raw)
        if target in ("float", float):
            return float(raw)
        if target in ("bool", bool):
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text not in ("1", "true", "yes", "on", "0", "false", "no", "off", ""):
                raise ValueError(text)
            return text in ("1", "true", "yes", "on")
        return str(raw)
    except (TypeError, ValueError):
        raise UserError(f"{where} {name}={raw!r} is not a valid {target}") from None


#: a setting's own rule, checked in the layer its value came from so the error names it
#: (--arch, CTUNE_ARCH or the file's [tool.ctune] arch); empty means the spec's
_RULES: dict[str, Callable[[Any], Any]] = {"arch": arch.check}


def _coerce_all(values: Mapping[str, Any], where: str) -> dict[str, Any]:
    known = {f.name for f in fields(Settings)}
    out: dict[str, Any] = {}
    for name, raw in values.items():
        if raw is None:
            continue
        if name not in known:
            raise UserError(f"unknown {where} '{name}' (allowed: {', '.join(sorted(known))})")
        out[name] = _coerce(name, raw, where)
        if name in _RULES and out[name]:
            try:
                _RULES[name](out[name])
            except ValueError as exc:
                raise UserError(f"{_origin(name, where)} {exc} (or empty for the spec's)") from None
    return out


def _origin(name: str, where: str) -> str:
    """The setting as the user wrote it: ``--arch``, ``CTUNE_ARCH``, ``... [tool.ctune] arch``."""
    if where == "option":
        return f"--{name.replace('_', '-')}"
    if where == "env":
        return f"CTUNE_{name.upper()}"
    return f"{where.removesuffix(' key')} {name}"


def find_pyproject(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def file_settings(start: Path) -> dict[str, Any]:
    """``[tool.ctune]`` of the nearest pyproject.toml; relative paths are taken from that
    file's folder (as Ruff and pytest do), so the settings mean the same from any subfolder."""
    path = find_pyproject(start)
    if path is None:
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UserError(f"{path}: cannot read [tool.ctune]: {exc}") from None
    table = data.get("tool", {}).get("ctune", {})
    out = _migrated({k.replace("-", "_"): v for k, v in table.items()}, f"{path} [tool.ctune]")
    for name in _PATH_FIELDS:
        if isinstance(out.get(name), str):
            out[name] = str(path.parent / Path(out[name]).expanduser())
    return out


def env_settings(environ: Mapping[str, str]) -> dict[str, Any]:
    known = {f.name for f in fields(Settings)} | set(l2policy.OLD_NAMES)
    found = {
        key[len("CTUNE_") :].lower(): value
        for key, value in environ.items()
        if key.startswith("CTUNE_") and key[len("CTUNE_") :].lower() in known
    }
    return _migrated(found, "environment")


def _migrated(values: dict[str, Any], where: str) -> dict[str, Any]:
    """Old setting names (``l2``, ``CTUNE_L2``) under their one name."""
    try:
        return l2policy.migrate(values)
    except ValueError as exc:
        raise UserError(f"{where}: {exc}") from None


def resolve(
    cli_overrides: Mapping[str, Any] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Settings:
    """Merge the four layers in the documented order into one Settings."""
    start = cwd or Path.cwd()
    merged: dict[str, Any] = {}
    file_where = f"{find_pyproject(start) or 'pyproject.toml'} [tool.ctune] key"
    merged.update(_coerce_all(file_settings(start), file_where))
    merged.update(_coerce_all(env_settings(os.environ if environ is None else environ), "env"))
    merged.update(_coerce_all(cli_overrides or {}, "option"))
    return _validated(Settings(**merged))


def _validated(settings: Settings) -> Settings:
    """Range checks that no single layer can do alone; one line naming the setting."""
    if settings.l2_policy:
        try:
            l2policy.check(settings.l2_policy)
        except ValueError as exc:
            raise UserError(f"{l2policy.NAME}={exc}; or empty for the spec's") from None
    if settings.timing not in ("", "auto", "events", "graph"):
        raise UserError(
            f"timing={settings.timing!r}: allowed auto, events, graph (or empty for the spec's)"
        )
    from ctune.scale.options import check as check_executor

    check_executor(settings.executor, settings.gpus)
    if settings.jobs < 0:
        raise UserError(f"jobs={settings.jobs}: must be 0 (one per CPU) or more")
    for name in ("compile_timeout_s", "energy_window_s", "run_timeout_floor_s", "rep_ms"):
        if getattr(settings, name) <= 0:
            raise UserError(f"{name}={getattr(settings, name)}: must be positive")
    return settings

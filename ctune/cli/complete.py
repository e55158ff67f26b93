"""Shell completion of the arguments that name something ctune knows: kernel sources,
registry keys, a spec's problems and problem sets, strategies and objective terms.

Typer calls these on each TAB press (``autocompletion=``), through the script that
``ctune --show-completion`` prints. Each reads as little as it can (a folder listing, one
spec's YAML), probes no toolchain or GPU, and offers nothing rather than failing: the
shell shows whatever the command prints. Typer keeps the offers that start with what
was typed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer

from ctune.errors import CtuneError

#: a kernel's source (the spec sidecar sits next to it)
KERNEL_SUFFIX = ".cu"
#: how deep a path offer follows a folder that is the only match
_MAX_DESCENT = 8


def _listing(folder: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder or ".") as entries:
            return list(entries)
    except OSError:
        return []


def _is_dir(entry: os.DirEntry[str], *, follow: bool = True) -> bool:
    try:
        return entry.is_dir(follow_symlinks=follow)
    except OSError:
        return False


def _path_offers(incomplete: str, suffix: str) -> list[str]:
    """Folders (with a trailing /) and ``*suffix`` files that complete ``incomplete``."""
    folder, _, start = incomplete.rpartition("/")
    prefix = f"{folder}/" if folder or incomplete.startswith("/") else ""
    offers = []
    for entry in _listing(prefix or "."):
        if not entry.name.startswith(start) or (
            entry.name.startswith(".") and not start.startswith(".")
        ):
            continue
        if _is_dir(entry):
            offers.append(f"{prefix}{entry.name}/")
        elif entry.name.endswith(suffix):
            offers.append(prefix + entry.name)
    return sorted(offers)


def kernel_paths(incomplete: str) -> list[str]:
    """Kernel sources (``*.cu``) and the folders on the way to them. A folder that is
    the only match is opened, so that the shell completes into it rather than ending the
    word after it."""
    offers = _path_offers(incomplete, KERNEL_SUFFIX)
    for _ in range(_MAX_DESCENT):
        if len(offers) != 1 or not offers[0].endswith("/"):
            break
        inside = _path_offers(offers[0], KERNEL_SUFFIX)
        if not inside:
            break
        offers = inside
    return offers


def _registry_root(ctx: typer.Context) -> Path | None:
    """The registry folder the command would read: its ``--registry``, else the setting."""
    given = ctx.params.get("registry")
    if given:
        return Path(given)
    try:
        from ctune.cli.invocation import resolve_settings

        return Path(resolve_settings({}).registry)
    except (CtuneError, OSError, ValueError):
        return None


def _folders(path: Path) -> Iterator[os.DirEntry[str]]:
    for entry in _listing(str(path)):
        if not entry.name.startswith(".") and _is_dir(entry, follow=False):
            yield entry  # the registry refuses symlinks


def artifact_keys(root: Path) -> list[str]:
    """Every ``<kernel>/<problem>/<device-class>`` with an artifact file under ``root``,
    from the folder layout alone (``ctune.registry.layout``); no artifact is read."""
    from ctune.controls.store import FOLDER as CONTROLS_FOLDER
    from ctune.registry.layout import SUFFIX

    keys = []
    for kernel in _folders(root):
        if kernel.name == CONTROLS_FOLDER:
            continue
        for problem in _folders(Path(kernel.path)):
            for item in _listing(problem.path):
                if item.name.endswith(SUFFIX) and not item.name.startswith("."):
                    device = item.name[: -len(SUFFIX)]
                    keys.append(f"{kernel.name}/{problem.name}/{device}")
    return sorted(keys)


def registry_keys(ctx: typer.Context, incomplete: str) -> list[str]:
    """Artifact KEYs of the registry; after ``KEY@``, the member words."""
    from ctune.registry.layout import MEMBER_WORDS

    root = _registry_root(ctx)
    if root is None:
        return []
    keys = artifact_keys(root)
    base, at, _ = incomplete.partition("@")
    if at:
        return [f"{base}@{word}" for word in MEMBER_WORDS] if base in keys else []
    return keys


def _spec_data(ctx: typer.Context) -> dict[str, Any]:
    """The YAML of the spec beside the command's KERNEL argument ({} when unreadable)."""
    # completing an option's value, click's parse stops at that option, before it assigns
    # the arguments: the KERNEL typed earlier is then the first of the unassigned ones
    kernel = ctx.params.get("kernel") or next(iter(ctx.args), None)
    if not kernel:
        return {}
    try:
        from ctune.spec import sidecar_for
        from ctune.strict_yaml import load_file

        data = load_file(sidecar_for(Path(kernel))[0], "spec")
    except (CtuneError, OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def problem_names(ctx: typer.Context) -> list[str]:
    """The problems of the KERNEL's spec."""
    problems = _spec_data(ctx).get("problems")
    if not isinstance(problems, list):
        return []
    names = (p.get("name") for p in problems if isinstance(p, dict))
    return [name for name in names if isinstance(name, str)]


def problem_set_names(ctx: typer.Context) -> list[str]:
    """The problem sets of the KERNEL's spec."""
    sets = _spec_data(ctx).get("problem_sets")
    return [name for name in sets if isinstance(name, str)] if isinstance(sets, dict) else []


def strategy_names() -> list[str]:
    """``auto`` and the built-in strategies."""
    from ctune.search import strategy_names as names

    return names()


def objective_terms() -> list[tuple[str, str]]:
    """Each objective term with its direction and unit (shells that show help show it),
    then the aliases."""
    from ctune.objective.terms import ALIASES, TERMS

    offers = [(name, f"{term.direction}, {term.unit}") for name, term in TERMS.items()]
    return offers + [(alias, f"= {name}") for alias, name in ALIASES.items()]


__all__ = [
    "artifact_keys",
    "kernel_paths",
    "objective_terms",
    "problem_names",
    "problem_set_names",
    "registry_keys",
    "strategy_names",
]

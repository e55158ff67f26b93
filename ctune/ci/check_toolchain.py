"""Which toolchain checks (and gates) an artifact: the one it recorded, when this machine has it.

With the settings' default choice of toolchain, ``ctune check`` and ``ctune gate`` rebuild
each artifact with the nvcc (and, for a split record, the ptxas) of the versions it
recorded, when this machine has them, so a registry built with several toolchains is
checked as each artifact was built. Otherwise, and whenever the settings name a toolchain,
the selected one checks it and the rebuilt SASS decides. A toolchain that refuses an
artifact's controls files makes it STALE (:func:`controls_refusals`). docs/staleness.md.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctune.compile.toolchain import controls_taken, version_in
from ctune.errors import CtuneError
from ctune.registry.controls import member_controls
from ctune.registry.schema import Artifact, FrontMember

#: how a user gets a compiler that takes controls files, said where one refuses them
CONTROLS_FIX = "check with --ptxas PATH (a ptxas 13.3 or later) or install ctune[cuda13.3]"
#: what a phrase says when the selected toolchain checked an artifact in place of its
#: recorded one (a report counts those lines by it)
STOOD_IN = "; its recorded "


@dataclass(frozen=True, slots=True)
class ToolchainUse:
    """The toolchain an artifact is checked with, and whether it is the recorded one."""

    nvcc: str  # what to run (a split toolchain's own nvcc for a split)
    nvcc_version: str  # "13.0.88"
    ptxas_version: str  # "13.3.73"
    split: bool
    recorded: bool  # it is the toolchain the artifact records
    #: the recorded toolchain the selected one checks it in place of ("" when none)
    instead_of: str = ""
    #: why: the settings name a toolchain (else this machine lacks the recorded one)
    settings_chose: bool = False

    def describe(self) -> str:
        """``nvcc 13.0.88 / ptxas 13.3.73 (split)``, as ``Toolchain.describe`` says it."""
        plain = f"nvcc {self.nvcc_version} / ptxas {self.ptxas_version}"
        return f"{plain} (split)" if self.split else plain

    def phrase(self) -> str:
        """What a report line says about it."""
        if self.recorded:
            return f"checked with its recorded toolchain {self.describe()}"
        text = f"checked with the selected toolchain {self.describe()}"
        if not self.instead_of:
            return text
        why = (
            "is not used: the settings chose another toolchain"
            if self.settings_chose
            else "is not on this machine"
        )
        return f"{text}{STOOD_IN}{self.instead_of} {why}"


def describe_fields(fields: Mapping[str, str]) -> tuple[str, str, bool]:
    """(nvcc version, ptxas version, split) of fingerprint toolchain fields ("" unknown)."""
    nvcc = version_in(fields.get("nvcc_version", "")) or ""
    label = fields.get("ptxas_version", "")
    return nvcc, label.split(" ", 1)[0], "(split" in label


def _describe(fields: Mapping[str, str]) -> str:
    nvcc, ptxas, split = describe_fields(fields)
    return f"nvcc {nvcc or '?'} / ptxas {ptxas or '?'}" + (" (split)" if split else "")


def _toolchain_fields(artifact: Artifact) -> dict[str, str]:
    return {
        k: artifact.fingerprint[k]
        for k in ("nvcc_version", "ptxas_version")
        if k in artifact.fingerprint
    }


class ToolchainFinder:
    """Chooses each artifact's toolchain (see the module docstring); probes once each."""

    def __init__(
        self,
        nvcc: str,
        *,
        discover: bool = False,
        settings_chose: bool = False,
        split_root: Path | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.nvcc = nvcc  # the selected toolchain's nvcc (a split's own when split)
        self.discover = discover and split_root is not None
        #: the settings name a toolchain: it checks every artifact, by choice
        self.settings_chose = settings_chose
        self.split_root = split_root
        self.environ = dict(os.environ if environ is None else environ)
        self._selected: dict[str, str] | None = None
        self._chosen: dict[tuple[str, str], ToolchainUse] = {}
        self._found: list[Any] | None = None

    @classmethod
    def for_settings(cls, settings: Any) -> ToolchainFinder:
        """The finder of these settings: discovery only with the default choice."""
        from ctune.compile.select_toolchain import nvcc_for

        default = settings.nvcc == "nvcc" and not settings.ptxas
        return cls(
            nvcc_for(settings),
            discover=default,
            settings_chose=not default,
            split_root=Path(settings.cache_dir).resolve() / "toolchains",
        )

    @property
    def selected_fields(self) -> dict[str, str]:
        """The selected toolchain's fingerprint fields (probed once)."""
        if self._selected is None:
            from ctune import identity_probe

            probed = identity_probe.probe_toolchain(self.nvcc)
            self._selected = {k: probed[k] for k in ("nvcc_version", "ptxas_version")}
        return self._selected

    def selected(self, recorded: bool = False, instead_of: str = "") -> ToolchainUse:
        nvcc, ptxas, split = describe_fields(self.selected_fields)
        chose = self.settings_chose and bool(instead_of)
        return ToolchainUse(self.nvcc, nvcc, ptxas, split, recorded, instead_of, chose)

    def for_artifact(self, artifact: Artifact) -> ToolchainUse:
        """The toolchain that checks ``artifact``."""
        record = _toolchain_fields(artifact)
        wanted = (record.get("nvcc_version", ""), record.get("ptxas_version", ""))
        if wanted not in self._chosen:
            self._chosen[wanted] = self._choose(record)
        return self._chosen[wanted]

    def _choose(self, record: dict[str, str]) -> ToolchainUse:
        if len(record) < 2:
            return self.selected()  # an artifact that recorded no toolchain
        if all(self.selected_fields.get(k) == v for k, v in record.items()):
            return self.selected(recorded=True)
        found = self._recorded_here(record) if self.discover else None
        if found is None:
            return self.selected(instead_of=_describe(record))
        nvcc, tc = found
        return ToolchainUse(nvcc, tc.nvcc_version, tc.ptxas_version, tc.split, True)

    def _toolchains(self) -> list[Any]:
        """Every plain toolchain this machine has (doctor's places), probed; once."""
        if self._found is None:
            from ctune.compile.find_toolchains import toolchain_places
            from ctune.compile.toolchain import nvcc_home, probe_toolchain

            self._found = []
            homes: set[Path] = set()
            for _, nvcc in toolchain_places(self.environ):
                try:
                    home = nvcc_home(nvcc).resolve()
                    if home in homes:
                        continue
                    homes.add(home)
                    tc = probe_toolchain(nvcc)
                except (CtuneError, OSError):
                    continue
                if not tc.split:
                    self._found.append(tc)
        return self._found

    def _recorded_here(self, record: dict[str, str]) -> tuple[str, Any] | None:
        """(nvcc to run, its Toolchain) of the recorded toolchain on this machine, or None."""
        from ctune.compile.split_toolchain import split_toolchain
        from ctune.compile.toolchain import probe_toolchain

        line, label = record["nvcc_version"], record["ptxas_version"]
        _, ptxas_version, split = describe_fields(record)
        found = self._toolchains()
        for tc in found:
            if tc.nvcc_version_line != line:
                continue
            if not split:
                if tc.ptxas_label == label:
                    return tc.nvcc, tc
                continue
            for other in found:
                if other.ptxas_version != ptxas_version or self.split_root is None:
                    continue
                try:
                    nvcc = str(split_toolchain(tc.nvcc, Path(other.ptxas), self.split_root))
                    made = probe_toolchain(nvcc)
                except (CtuneError, OSError):
                    continue
                if made.ptxas_label == label:
                    return nvcc, made
        return None


def controls_refusals(members: Iterable[FrontMember], use: ToolchainUse, arch: str) -> list[str]:
    """One line per member whose controls file ``use``'s compiler does not take for
    ``arch``: such a member cannot be rebuilt, so its artifact is STALE for that reason."""
    out = []
    for m in members:
        for compiler in dict.fromkeys(r.compiler for r in member_controls(m)):
            ok, why = controls_taken(use.nvcc_version, use.ptxas_version, compiler, arch)
            if ok:
                continue
            version = use.ptxas_version if compiler == "ptxas" else use.nvcc_version
            if compiler == "ptxas" or "13.3 or later" in why:
                why = f"{compiler} {version} does not take advanced-controls files (needs 13.3+)"
            out.append(f"member {m.key}: {why}; {CONTROLS_FIX}")
    return out


__all__ = [
    "CONTROLS_FIX",
    "STOOD_IN",
    "ToolchainFinder",
    "ToolchainUse",
    "controls_refusals",
    "describe_fields",
]

"""Probe the CUDA toolchain once: versions, paths and the options nvcc offers.

The toolchain is an nvcc and the ptxas it runs. The settings choose it
(compile/select_toolchain.py); :func:`probe_toolchain` reads what the chosen nvcc is.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from ctune.arch import capability, check_offered
from ctune.compile.process import run_nvcc
from ctune.errors import ToolchainError, UserError
from ctune.files import program_problem
from ctune.quoting import CommandLineError

if TYPE_CHECKING:
    from ctune.spec import KernelSpec

#: the file that marks a split toolchain's bin folder (compile/split_toolchain.py writes it)
SPLIT_MARKER = "ctune-toolchain.json"
#: the CUDA release whose ptxas and nvcc take advanced-controls files (--apply-controls)
CONTROLS_RELEASE = (13, 3)
#: nvcc's own --apply-controls is refused below this architecture ("not supported on this target")
NVCC_CONTROLS_ARCH = (10, 0)
COMPILERS = ("ptxas", "nvcc")
#: how long one probe of a toolchain program (``--version``, ``--help``, ``-dryrun``) may
#: run: a real one answers in about a second, a hung one costs this once per process
PROBE_TIMEOUT_S = 20.0
#: the most of each of a probe's streams that is read (nvcc 13's ``--help`` is about
#: 55 KB): a program that prints more is no compiler, and must not fill memory
PROBE_OUTPUT_BYTES = 1024 * 1024


def release(version: str) -> tuple[int, ...] | None:
    """``"13.3.73"`` -> (13, 3, 73); None when it is not dotted numbers."""
    parts = version.split(".")
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else None


def controls_release(version: str) -> bool:
    """Whether a compiler of this version takes advanced-controls files."""
    parsed = release(version)
    return parsed is not None and parsed[:2] >= CONTROLS_RELEASE


@dataclass(frozen=True, slots=True)
class Toolchain:
    nvcc: str  # absolute path
    nvcc_version: str  # e.g. "13.0.88" (a string: 12.10 is not 12.1)
    ptxas_version: str
    nvcc_version_line: str  # the full "Cuda compilation tools, ..." line
    help_text: str
    ptxas: str = ""  # the ptxas this nvcc runs, as an absolute path
    split: bool = False  # that ptxas is not nvcc's own: PTX from nvcc, cubins from it

    def describe(self) -> str:
        """What the build key and each build record name the toolchain by."""
        plain = f"nvcc {self.nvcc_version} / ptxas {self.ptxas_version}"
        return f"{plain} (split)" if self.split else plain

    @property
    def ptxas_label(self) -> str:
        """ptxas's version as the fingerprint records it: a split one says so, since its
        cubins were made from another release's PTX."""
        if not self.split:
            return self.ptxas_version
        return f"{self.ptxas_version} (split: PTX from nvcc {self.nvcc_version})"

    @property
    def bin_dir(self) -> Path:
        return Path(self.nvcc).parent

    def takes_controls(self, compiler: str, arch: str) -> tuple[bool, str]:
        """Whether ``compiler`` ("ptxas" or "nvcc") of this toolchain applies an
        advanced-controls file when building for ``arch``, and when not, why
        (:func:`controls_taken`)."""
        return controls_taken(self.nvcc_version, self.ptxas_version, compiler, arch)


def controls_taken(
    nvcc_version: str, ptxas_version: str, compiler: str, arch: str
) -> tuple[bool, str]:
    """(whether ``compiler`` of a toolchain of these versions applies an advanced-controls
    file for ``arch``, and when not, why: the line a user sees when that space is not
    offered; empty when it does). Decided by versions, never by a probe: ptxas 13.0 refuses
    a controls file with the same words as a damaged one."""
    if compiler not in COMPILERS:
        raise ValueError(f"compiler {compiler!r} is not one of {', '.join(COMPILERS)}")
    version = ptxas_version if compiler == "ptxas" else nvcc_version
    if not controls_release(version):
        return False, f"{compiler} {version} takes no controls files (13.3 or later does)"
    sm = capability(arch)
    if compiler == "nvcc" and (sm is None or sm < NVCC_CONTROLS_ARCH):
        return False, f"nvcc {version} takes no controls file of its own for {arch} (sm_100+)"
    return True, ""


@dataclass(frozen=True, slots=True)
class Probe:
    """What one probe run printed, or why it gave no answer (``failure``: not started,
    hung, too much output)."""

    stdout: str
    stderr: str
    returncode: int
    failure: str = ""


#: why each program found hung failed its probe: every later probe of it fails at once
_HUNG: dict[str, str] = {}


@lru_cache(maxsize=64)
def probe_run(argv: tuple[str, ...]) -> Probe:
    """``argv`` run by the one rule for nvcc runs (compile/process.py: its own process
    group, killed whole at :data:`PROBE_TIMEOUT_S`, its output capped), once per process:
    the answer is kept, a failure too, so a hung nvcc costs one timeout, not one per
    caller."""
    program, shown = argv[0], " ".join(argv)
    if program in _HUNG:
        return Probe("", "", -1, _HUNG[program])
    try:
        done = run_nvcc(
            argv,
            what="the toolchain probe",
            timeout_s=PROBE_TIMEOUT_S,
            max_output_bytes=PROBE_OUTPUT_BYTES,
        )
    except CommandLineError as exc:
        return Probe("", "", -1, str(exc))
    except OSError as exc:
        return Probe("", "", -1, f"cannot run {program}: {exc.strerror or exc}")
    out, err = (text.decode("utf-8", "replace") for text in (done.stdout, done.stderr))
    if done.timed_out:
        _HUNG[program] = (
            f"{shown} did not answer within {PROBE_TIMEOUT_S:g} s; check that it runs, or "
            "choose another toolchain with --nvcc or --ptxas"
        )
        return Probe(out, err, -1, _HUNG[program])
    if done.overflowed:
        cap = f"{PROBE_OUTPUT_BYTES // 1024} KiB"
        return Probe(out, err, -1, f"{shown} printed more than {cap}: not a CUDA compiler")
    return Probe(out, err, done.returncode if done.returncode is not None else -1)


def forget_probes() -> None:
    """Forget every probe's answer (tests that change a stand-in in place)."""
    _HUNG.clear()
    probe_run.cache_clear()
    probe_toolchain.cache_clear()


def _run(argv: list[str]) -> str:
    """The output of a probe that must succeed; a ToolchainError saying why otherwise."""
    done = probe_run(tuple(argv))
    if done.failure:
        raise ToolchainError(done.failure)
    if done.returncode != 0:
        raise ToolchainError(f"{' '.join(argv)} failed: {done.stderr.strip()[:200]}")
    return done.stdout


def dryrun(nvcc: str) -> str:
    """What ``nvcc -dryrun`` says it would set and run for an empty source (its ``#$``
    lines: ``_HERE_``, ``TOP``, ``PATH``); empty when it says nothing (a stand-in)."""
    done = probe_run((nvcc, "-dryrun", "-E", "-x", "cu", os.devnull))
    return "" if done.failure else done.stderr + done.stdout


def dryrun_value(text: str, name: str) -> str | None:
    """The value ``nvcc -dryrun`` gives ``name`` (``_HERE_``, ``PATH``), if it gives one."""
    match = re.search(rf"^#\$ {re.escape(name)}=(.*)$", text, re.M)
    return match.group(1).strip() if match else None


def nvcc_home(nvcc: str) -> Path:
    """The folder nvcc really runs from (its ``_HERE_``), through any wrapper script or
    link: where its ``nvcc.profile`` and, first on its PATH, its ptxas live."""
    here = dryrun_value(dryrun(nvcc), "_HERE_")
    return Path(here) if here else Path(nvcc).resolve().parent


def version_in(text: str) -> str | None:
    """The version a ``--version`` text gives (``"13.3.73"``), if it gives one."""
    match = re.search(r"release [\d.]+, V([\d.]+)", text) or re.search(r"V(\d[\d.]*)", text)
    return match.group(1) if match else None


#: what to do when the chosen nvcc is not one
_NVCC_FIX = "install the CUDA toolkit, or choose one with --nvcc, CTUNE_NVCC or [tool.ctune] nvcc"


def find_nvcc(nvcc: str) -> str:
    """The absolute path of ``nvcc`` (a name on PATH or a path); ToolchainError if none:
    a path that is missing, a folder or not executable is named as such."""
    if os.sep in nvcc:
        problem = program_problem(nvcc)
        if problem is not None:
            raise ToolchainError(f"nvcc {nvcc}: {problem}; {_NVCC_FIX}")
    path = shutil.which(nvcc)
    if path is None:
        raise ToolchainError(f"nvcc not found ('{nvcc}' is not on PATH); {_NVCC_FIX}")
    return os.path.abspath(path)


def _version(tool: str, path: str, fix: str) -> tuple[str, str]:
    """(the version, the whole text) ``path --version`` gives; a ToolchainError naming the
    program when it gives none: a compiler of unknown version cannot be fingerprinted."""
    text = _run([path, "--version"])
    version = version_in(text)
    if version is None:
        shown = text.strip()[:200] or "nothing"
        raise ToolchainError(
            f"cannot read the {tool} version of {os.path.realpath(path)} from: {shown}; {fix}"
        )
    return version, text


def ptxas_of(nvcc: str) -> Path | None:
    """The ptxas ``nvcc`` runs: the first on the PATH its ``-dryrun`` gives (its profile
    puts its own folder first), else, when it gives none (a stand-in), the one in the
    folder it runs from; None when there is none. Not the first ptxas on ctune's PATH: the
    folder of a wrapper script or a link has none, the nvcc it runs has its own."""
    search = dryrun_value(dryrun(nvcc), "PATH")
    folders = search.split(os.pathsep) if search is not None else [str(nvcc_home(nvcc))]
    for folder in filter(None, folders):
        candidate = Path(folder) / "ptxas"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


@lru_cache(maxsize=8)
def probe_toolchain(nvcc: str = "nvcc") -> Toolchain:
    """Find nvcc and the ptxas it runs (:func:`ptxas_of`) and read their versions; no
    probing at import."""
    path = find_nvcc(nvcc)
    version, version_text = _version("nvcc", path, "choose another with --nvcc")
    line = next(
        (ln.strip() for ln in version_text.splitlines() if "release" in ln), version_text.strip()
    )
    home = nvcc_home(path)
    ptxas = ptxas_of(path)
    if ptxas is None:
        raise ToolchainError(
            f"{path} runs no ptxas: none in {home}, where it runs from, nor on its PATH; "
            "name a CUDA bin folder's nvcc or a script that runs it (a link to nvcc runs "
            "without its nvcc.profile)"
        )
    return Toolchain(
        nvcc=path,
        nvcc_version=version,
        ptxas_version=_version("ptxas", str(ptxas), "give another with --ptxas")[0],
        nvcc_version_line=line,
        help_text=_run([path, "--help"]),
        ptxas=os.path.realpath(ptxas),
        split=(home / SPLIT_MARKER).is_file(),
    )


def target_arch(setting: str, spec: KernelSpec, toolchain: Toolchain) -> str:
    """The arch candidates are built for: the setting, else the spec's. One this nvcc does
    not compile for (``sm_12``, an old ``sm_70``) is refused before any build, naming where
    it came from, rather than failing every candidate with ``nvcc fatal``."""
    where = "arch (--arch, CTUNE_ARCH or [tool.ctune])" if setting else f"{spec.yaml_path}: arch"
    return offered_arch(setting or spec.arch, where, toolchain)


def offered_arch(arch: str, where: str, toolchain: Toolchain) -> str:
    """``arch`` if this nvcc compiles for it, else one line naming ``where`` it came from
    and the architectures it does compile for (exit 2)."""
    try:
        return check_offered(arch, toolchain.help_text)
    except ValueError as exc:
        raise UserError(f"{where}: {exc}; use one it lists") from None

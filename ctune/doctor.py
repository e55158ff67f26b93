"""What this machine has for ctune: toolchains, GPU, NVML, CuPy, CUTLASS, CompileIQ and its
search spaces. Probes on call only; imports nothing heavy that it does not check."""

from __future__ import annotations

import contextlib
import platform
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ctune.compile.toolchain import Toolchain
    from ctune.config import Settings


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    detail: str
    needed_for: str  # what cannot work without it


#: the row of the toolchain the settings select; ctune doctor fails (exit 3) without it
SELECTED = "nvcc / ptxas"
_BUILDS = "compile, search, check"
_CONTROLS = "acf genes (advanced-controls search)"
_CHOICE = "--nvcc, --ptxas (choose one)"


def _controls(tc: Toolchain) -> str:
    """Which of its compilers take advanced-controls files (nvcc's only from sm_100)."""
    ptxas = "yes" if tc.takes_controls("ptxas", "sm_90")[0] else "no"
    nvcc = "sm_100 and up" if tc.takes_controls("nvcc", "sm_100")[0] else "no"
    return f"advanced controls: ptxas {ptxas}, nvcc {nvcc}"


def _selected(settings: Settings) -> tuple[Check, Toolchain | None]:
    from ctune.compile.select_toolchain import toolchain_for
    from ctune.errors import CtuneError

    try:
        tc = toolchain_for(settings)
    except CtuneError as exc:
        return Check(SELECTED, False, str(exc), _BUILDS), None
    return Check(SELECTED, True, f"{tc.describe()} at {tc.nvcc}; {_controls(tc)}", _BUILDS), tc


def _places(
    settings: Settings, environ: Mapping[str, str], selected: Toolchain | None
) -> list[tuple[str, str]]:
    """(where, nvcc) for every toolchain to list: the settings' own first."""
    from ctune.compile.find_toolchains import toolchain_places
    from ctune.compile.select_toolchain import resolve_nvcc
    from ctune.errors import CtuneError

    places: list[tuple[str, str]] = []
    if selected is not None and selected.split:
        places.append(("ptxas setting", selected.nvcc))
    if settings.nvcc != "nvcc":
        with contextlib.suppress(CtuneError):  # the selected row says why
            places.append((f"nvcc setting {settings.nvcc}", resolve_nvcc(settings.nvcc)))
    return places + toolchain_places(environ)


def _toolchains(settings: Settings, environ: Mapping[str, str]) -> list[Check]:
    """The selected toolchain, then one row per toolchain found (each nvcc once, however
    many places name it) with its versions and whether it takes advanced controls."""
    from ctune.compile.toolchain import nvcc_home, probe_toolchain
    from ctune.errors import CtuneError

    selected_row, selected = _selected(settings)
    homes: dict[Path, tuple[str, list[str]]] = {}
    for where, nvcc in _places(settings, environ, selected):
        found = homes.setdefault(nvcc_home(nvcc).resolve(), (nvcc, []))
        found[1].append(where)
    chosen = nvcc_home(selected.nvcc).resolve() if selected is not None else None
    rows = [selected_row]
    for home, (nvcc, places) in homes.items():
        try:
            tc = probe_toolchain(nvcc)
        except CtuneError as exc:
            rows.append(Check("toolchain", False, f"{', '.join(places)}: {exc}", _CHOICE))
            continue
        mark = "selected: " if home == chosen else ""
        detail = f"{mark}{tc.describe()} in {home} ({', '.join(places)}); {_controls(tc)}"
        rows.append(Check("toolchain", True, detail, _CHOICE))
    return rows


def _compileiq() -> list[Check]:
    """Whether CompileIQ is installed, from its metadata: importing it is slow."""
    import importlib.metadata

    try:
        version = importlib.metadata.version("compileiq")
    except importlib.metadata.PackageNotFoundError:
        fix = "not installed (pip install 'ctune[acf]'; its wheel needs glibc 2.34 or later)"
        return [Check("compileiq", False, fix, _CONTROLS)]
    return [Check("compileiq", True, f"compileiq {version}", _CONTROLS)]


def _spaces(settings: Settings, environ: Mapping[str, str]) -> list[Check]:
    """Where the controls search spaces are read from, and which are there."""
    name, folder = "acf_spaces", str(settings.acf_spaces or "")
    if not folder:
        name, folder = "CIQ_SEARCH_SPACES_DIR", environ.get("CIQ_SEARCH_SPACES_DIR", "")
    if not folder:
        fix = "not configured (acf_spaces or CIQ_SEARCH_SPACES_DIR: a folder of spaces)"
        return [Check("controls spaces", False, fix, _CONTROLS)]
    path = Path(folder)
    held = sorted(p.name for p in path.iterdir() if p.suffix == ".bin") if path.is_dir() else []
    if not held:
        why = "holds no .bin search space" if path.is_dir() else "is not a folder"
        return [Check("controls spaces", False, f"{name}={folder} {why}", _CONTROLS)]
    return [Check("controls spaces", True, f"{name}={folder}: {', '.join(held)}", _CONTROLS)]


def _nvml() -> list[Check]:
    try:
        import pynvml
    except ImportError:
        return [Check("NVML", False, "nvidia-ml-py is not installed", "energy/power objectives")]
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        return [Check("NVML", False, f"nvmlInit failed: {exc}", "GPU fingerprint, energy")]
    checks = []
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        count = pynvml.nvmlDeviceGetCount()
        names = []
        for i in range(count):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            names.append(str(pynvml.nvmlDeviceGetName(handle)))
        checks.append(
            Check(
                "driver / GPUs", count > 0, f"driver {driver}; " + ", ".join(names), "measurement"
            )
        )
        if count:
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            try:
                energy = pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
                checks.append(
                    Check(
                        "NVML energy counter",
                        True,
                        f"{energy} mJ since driver load",
                        "energy/power objectives",
                    )
                )
            except Exception as exc:
                checks.append(
                    Check("NVML energy counter", False, str(exc), "energy/power objectives")
                )
            try:
                sm = pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
                limit = pynvml.nvmlDeviceGetPowerManagementLimit(handle) / 1000
                checks.append(
                    Check(
                        "clocks / power limit",
                        True,
                        f"SM {sm} MHz, limit {limit:.0f} W",
                        "throttle detection",
                    )
                )
            except Exception as exc:
                checks.append(Check("clocks / power limit", False, str(exc), "throttle detection"))
    finally:
        pynvml.nvmlShutdown()
    return checks


def _cupy() -> list[Check]:
    try:
        import cupy
    except ImportError:
        return [Check("CuPy", False, "not installed (pip install 'ctune[cuda13]')", "measurement")]
    try:
        count = cupy.cuda.runtime.getDeviceCount()
        runtime = cupy.cuda.runtime.runtimeGetVersion()
    except Exception as exc:
        return [Check("CuPy", False, f"cupy {cupy.__version__}: {exc}", "measurement")]
    return [
        Check(
            "CuPy",
            count > 0,
            f"cupy {cupy.__version__}, CUDA runtime {runtime}, {count} device(s)",
            "measurement",
        )
    ]


def _cutlass() -> list[Check]:
    from ctune.compile.deps import cutlass_include_dir, cutlass_version

    path = cutlass_include_dir()
    return [
        Check(
            "CUTLASS headers",
            path is not None,
            f"nvidia-cutlass {cutlass_version()} at {path}"
            if path
            else "pip install nvidia-cutlass",
            "CUTLASS kernels",
        )
    ]


def run_checks(settings: Settings, environ: Mapping[str, str]) -> list[Check]:
    """Every row of ``ctune doctor``; ``environ`` is where CUDA_HOME and the like are read."""
    checks = [Check("python", True, platform.python_version(), "everything")]
    for probe in (
        lambda: _toolchains(settings, environ),
        _cutlass,
        _cupy,
        _nvml,
        _compileiq,
        lambda: _spaces(settings, environ),
    ):
        checks.extend(probe())
    return checks

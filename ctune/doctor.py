"""What this machine has for ctune: toolchains, the driver and GPU, NVML, CuPy, CUTLASS,
CompileIQ and its search spaces, the registry's search journals. Probes on call only;
imports nothing heavy that it does not check. Each row names what is missing: CuPy not
installed, the driver not there, or a driver that sees no GPU are three rows' answers, not
one."""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import platform
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

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


#: the architecture each compiler is asked about: nvcc takes controls files only from sm_100
_CONTROLS_ARCH = {"ptxas": "sm_90", "nvcc": "sm_100"}


def _controls(tc: Toolchain) -> str:
    """Which of its compilers take advanced-controls files (nvcc's only from sm_100)."""
    ptxas = "yes" if tc.takes_controls("ptxas", _CONTROLS_ARCH["ptxas"])[0] else "no"
    nvcc = "sm_100 and up" if tc.takes_controls("nvcc", _CONTROLS_ARCH["nvcc"])[0] else "no"
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


def _toolchains(
    settings: Settings, environ: Mapping[str, str], selected_row: Check, selected: Toolchain | None
) -> list[Check]:
    """The selected toolchain's row, then one row per toolchain found (each nvcc once,
    however many places name it) with its versions and whether it takes advanced controls."""
    from ctune.compile.toolchain import nvcc_home, probe_toolchain
    from ctune.errors import CtuneError

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


def _spaces(
    settings: Settings, environ: Mapping[str, str], selected: Toolchain | None
) -> list[Check]:
    """Whether a controls search finds its spaces: by the search's own rule
    (controls/spaces.py), in the folder of the one setting it reads (``acf_spaces``)."""
    from ctune.controls.spaces import space_file
    from ctune.controls.store import ControlsError

    folder = settings.acf_spaces
    if folder is None:
        fix = "not configured (acf_spaces: CTUNE_ACF_SPACES or [tool.ctune], a folder of spaces)"
        if environ.get("CIQ_SEARCH_SPACES_DIR"):
            fix += "; CIQ_SEARCH_SPACES_DIR is CompileIQ's, ctune does not read it"
        return [Check("controls spaces", False, fix, _CONTROLS)]
    found, problems = [], []
    for compiler, version in _space_releases(selected):
        try:
            found.append(space_file(compiler, version, folder).name)
        except ControlsError as exc:
            problems.append(str(exc))
    listed = [f"acf_spaces={folder}: {', '.join(found)}"] if found else []
    detail = "; ".join(listed + list(dict.fromkeys(problems)))  # a bad folder: said once
    return [Check("controls spaces", bool(found), detail, _CONTROLS)]


def _space_releases(selected: Toolchain | None) -> list[tuple[str, str]]:
    """(compiler, version) of each space a controls search would read: those of the
    selected toolchain's compilers that take controls files, else of the release that
    first does (a toolchain chosen for controls would be one)."""
    from ctune.compile.toolchain import CONTROLS_RELEASE

    if selected is not None:
        versions = {"ptxas": selected.ptxas_version, "nvcc": selected.nvcc_version}
        taken = [c for c, arch in _CONTROLS_ARCH.items() if selected.takes_controls(c, arch)[0]]
        if taken:
            return [(c, versions[c]) for c in taken]
    release = ".".join(map(str, CONTROLS_RELEASE))
    return [(c, release) for c in _CONTROLS_ARCH]


def _journals(settings: Settings) -> list[Check]:
    """The search journals the registry keeps beside its artifacts: what a search on this
    machine can learn from with ``--cost-model on`` (docs/cost-model.md). Never a gap."""
    from collections import Counter

    from ctune.search.journal_copy import registry_copies

    kernels = Counter(p.parent.parent.name for p in registry_copies(Path(settings.registry)))
    if not kernels:
        detail = f"none kept in {settings.registry} (ctune registry journal KEY FILE keeps one)"
    else:
        each = ", ".join(f"{kernel} {n}" for kernel, n in sorted(kernels.items()))
        detail = f"{sum(kernels.values())} kept in {settings.registry} ({each})"
    return [Check("registry journals", True, detail, "--cost-model on: its warm start")]


_MEASURE = "measurement (search, gate), GPU fingerprint"
#: cuInit's answer when the driver is there but no GPU is visible (CUDA_ERROR_NO_DEVICE)
_NO_DEVICE = 100


@dataclass(frozen=True, slots=True)
class Driver:
    """What the CUDA driver (``libcuda``) says: its CUDA version, the GPUs it sees, or what
    is missing (``problem``: "" when a GPU is there)."""

    cuda: str  # the newest CUDA the driver runs ("13.0"); "" without a driver
    gpus: tuple[str, ...]
    problem: str

    @property
    def loaded(self) -> bool:
        return bool(self.cuda)


def probe_driver(
    load: Callable[[str], Any] = ctypes.CDLL, environ: Mapping[str, str] | None = None
) -> Driver:
    """The driver through ``libcuda.so.1`` itself (``load`` stands in for ``ctypes.CDLL``),
    so that no driver, a driver without a visible GPU and a library that cannot use the
    driver (CuPy's row) are told apart."""
    try:
        cuda = load("libcuda.so.1")
    except OSError:
        return Driver("", (), "no NVIDIA driver (libcuda.so.1 not found): install the driver")
    version = ctypes.c_int(0)
    cuda.cuDriverGetVersion(ctypes.byref(version))
    cuda_version = f"{version.value // 1000}.{version.value % 1000 // 10}" if version.value else "?"
    status = cuda.cuInit(0)
    if status == _NO_DEVICE:
        visible = (environ or {}).get("CUDA_VISIBLE_DEVICES")
        hidden = f" (CUDA_VISIBLE_DEVICES={visible!r})" if visible is not None else ""
        return Driver(cuda_version, (), f"driver for CUDA {cuda_version}, but no GPU{hidden}")
    if status != 0:
        error_name = ctypes.c_char_p()
        cuda.cuGetErrorName(status, ctypes.byref(error_name))
        error = (error_name.value or b"").decode(errors="replace") or f"error {status}"
        return Driver(cuda_version, (), f"driver for CUDA {cuda_version}: cuInit failed: {error}")
    count = ctypes.c_int(0)
    cuda.cuDeviceGetCount(ctypes.byref(count))
    names = []
    for index in range(count.value):
        device, name = ctypes.c_int(0), ctypes.create_string_buffer(256)
        cuda.cuDeviceGet(ctypes.byref(device), index)
        cuda.cuDeviceGetName(name, len(name), device)
        names.append(name.value.decode(errors="replace"))
    problem = "" if names else f"driver for CUDA {cuda_version}, but no GPU"
    return Driver(cuda_version, tuple(names), problem)


def _driver(driver: Driver) -> list[Check]:
    if driver.problem:
        return [Check("driver / GPU", False, driver.problem, _MEASURE)]
    many = "s" * (len(driver.gpus) != 1)
    gpus = f"{len(driver.gpus)} GPU{many}: {', '.join(driver.gpus)}"
    return [Check("driver / GPU", True, f"driver for CUDA {driver.cuda}; {gpus}", _MEASURE)]


def _nvml(driver: Driver) -> list[Check]:
    try:
        import pynvml
    except ImportError:
        return [Check("NVML", False, "nvidia-ml-py is not installed", "energy/power objectives")]
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        why = "; it comes with the NVIDIA driver" if not driver.loaded else ""
        return [Check("NVML", False, f"nvmlInit failed: {exc}{why}", "GPU fingerprint, energy")]
    checks = []
    try:
        version = pynvml.nvmlSystemGetDriverVersion()
        count = pynvml.nvmlDeviceGetCount()
        checks.append(
            Check("NVML", True, f"driver {version}; {count} GPU(s)", "GPU fingerprint, energy")
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


def _cupy(driver: Driver, load: Callable[[str], Any] = importlib.import_module) -> list[Check]:
    """CuPy's own row: not installed, installed (waiting for the driver: the driver's row
    says what is missing), or installed but unable to use the driver that is there."""
    try:
        cupy = load("cupy")
    except ImportError:
        return [Check("CuPy", False, "not installed (pip install 'ctune[cuda13]')", "measurement")]
    installed = f"cupy {cupy.__version__}"
    if not driver.loaded or not driver.gpus:
        waiting = f"{installed} installed (it needs a driver and a GPU: see driver / GPU)"
        return [Check("CuPy", True, waiting, "measurement")]
    try:
        count = cupy.cuda.runtime.getDeviceCount()
        runtime = cupy.cuda.runtime.runtimeGetVersion()
    except Exception as exc:
        detail = f"{installed} is installed but cannot use the driver (CUDA {driver.cuda}): {exc}"
        return [Check("CuPy", False, detail, "measurement")]
    return [
        Check(
            "CuPy",
            count > 0,
            f"{installed}, CUDA runtime {runtime}, {count} device(s)",
            "measurement",
        )
    ]


def _cutlass() -> list[Check]:
    from ctune.compile.deps import cutlass_version
    from ctune.spec.includes import cutlass_include_dir

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
    driver = probe_driver(environ=environ)
    selected_row, selected = _selected(settings)
    for probe in (
        lambda: _toolchains(settings, environ, selected_row, selected),
        _cutlass,
        lambda: _driver(driver),
        lambda: _cupy(driver),
        lambda: _nvml(driver),
        _compileiq,
        lambda: _spaces(settings, environ, selected),
        lambda: _journals(settings),
    ):
        checks.extend(probe())
    return checks

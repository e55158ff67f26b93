"""`ctune search --device-genes` through the real Typer app.

The compiler and the GPU worker are stand-ins (StandInCompiler, StandInMeasurer)
and NVML is StandInNvml (``CTUNE_NVML_LIBRARY``): no test here changes a real
GPU's clocks or power limit. Everything else (option parsing, the refusals and
their exit codes, the service, the device-gene measurer, restore) is real.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import ctune.cli.search as search_cli
import ctune.measure.session as session
from ctune.measure import SamplingPlan
from ctune.records import Build, Candidate, Measurement
from ctune.spec import KernelSpec, Problem, load_spec
from ctune.testing.cli_app import ctune_main
from ctune.testing.standin_nvml import StandInNvmlLibrary
from ctune.testing.standins import StandInCompiler, StandInMeasurer, write_standin_kernel


class _Worker(StandInMeasurer):
    """NOT A GPU: notes the stand-in device's clock lock while each candidate runs."""

    def __init__(self, nvml: StandInNvmlLibrary) -> None:
        super().__init__(samples=30)
        self.nvml = nvml
        self.locks: list[list[int] | None] = []

    def measure(
        self,
        spec: KernelSpec,
        candidate: Candidate,
        build: Build,
        problem: Problem,
        plan: SamplingPlan,
    ) -> Measurement:
        self.locks.append(self.nvml.load().locked_mhz)
        return super().measure(spec, candidate, build, problem, plan)


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.chdir(tmp_path)
    for name in ("CTUNE_CACHE_DIR", "CTUNE_JOBS", "CTUNE_DEBUG", "CTUNE_REGISTRY"):
        monkeypatch.delenv(name, raising=False)
    write_standin_kernel(tmp_path / "k")
    nvml = StandInNvmlLibrary.create(tmp_path / "nvml.json", power_mw=650_000)
    made: dict[str, Any] = {"nvml": nvml, "compilers": []}

    def compiler(spec: Any, toolchain: Any, cfg: Any) -> StandInCompiler:
        made["compilers"].append(StandInCompiler(spec))
        return made["compilers"][-1]

    def worker(device: int, settings: Any) -> _Worker:
        made["worker"] = _Worker(nvml)
        return made["worker"]

    monkeypatch.setattr(search_cli, "load_kernel", lambda kernel, cfg: (load_spec(kernel), None))
    monkeypatch.setattr(search_cli, "make_compiler", compiler)
    monkeypatch.setattr(session, "WorkerMeasurer", worker)
    return made


def _run(nvml: StandInNvmlLibrary, *args: str) -> Any:
    env = {"COLUMNS": "200", "CTUNE_NVML_LIBRARY": f"ctune.testing.standin_nvml:{nvml.path}"}
    return CliRunner().invoke(ctune_main, ["search", "k/standin.cu", *args], env=env)


def test_a_search_tunes_device_genes_and_leaves_the_gpu_as_found(setup: dict[str, Any]) -> None:
    nvml: StandInNvmlLibrary = setup["nvml"]
    result = _run(
        nvml,
        "-O",
        "p50",
        "-O",
        "energy",
        "--device-genes",
        "clocks,power_limit",
        "--budget",
        "24",
        "--seed",
        "3",
        "--confirm-processes",
        "0",
    )
    assert result.exit_code in (0, 4), result.output
    locks = setup["worker"].locks
    assert None in locks and any(lock is not None for lock in locks)  # both kinds measured
    state = nvml.load()
    assert state.locked_mhz is None and state.power_mw == 650_000
    assert state.calls[:2] == ["power_limit 650000", "reset_clocks"]  # the probe: no change
    genes = {g.name: g.family for g in setup["compilers"][0].spec.space.genes}
    assert genes["sm_clock_mhz"] == genes["power_limit_w"] == "device"


@pytest.mark.parametrize(
    ("state", "line"),
    [
        ({"permitted": False}, "NVML does not permit changing GPU 0 (not root?)"),
        ({"mig": True}, "GPU 0 is in MIG mode"),
    ],
)
def test_refused_device_genes_exit_3_before_anything_runs(
    setup: dict[str, Any], tmp_path: Path, state: dict[str, Any], line: str
) -> None:
    nvml = StandInNvmlLibrary.create(tmp_path / "refusing.json", **state)
    result = _run(nvml, "-O", "p50", "--device-genes", "clocks", "--budget", "5")
    assert result.exit_code == 3, result.output
    assert line in result.output and "run the search with --device-genes none" in result.output
    assert "Traceback" not in result.output
    assert setup["compilers"] == [] and "worker" not in setup  # nothing compiled or measured
    assert nvml.load().calls == []


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--device-genes", "clocks,memory"], "unknown memory (allowed: clocks, power_limit"),
        (
            ["--device-genes", "clocks", "--problem-set", "all"],
            "--device-genes does not combine with --problem-set yet",
        ),
    ],
)
def test_bad_device_gene_options_exit_2(setup: dict[str, Any], args: list[str], line: str) -> None:
    result = _run(setup["nvml"], "-O", "p50", *args)
    assert result.exit_code == 2, result.output
    assert line in result.output
    assert setup["nvml"].load().calls == []


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--strategy", "gaa"], "unknown strategy 'gaa'"),
        (["--option", "bogus=1"], "unknown option 'bogus'"),
        (["--budget", "0"], "--budget must be at least 1, got 0"),
        (["--problem", "nope"], "no problem 'nope' (known: small, large)"),
        (["--resume", "missing.jsonl"], "missing.jsonl: no such journal to resume"),
    ],
)
def test_a_bad_request_is_its_own_line_before_the_gpu_is_opened(
    setup: dict[str, Any], tmp_path: Path, args: list[str], line: str
) -> None:
    """With --device-genes, NVML was opened before the request was checked: a typo such as
    --strategy gaa came back as the GPU's refusal (exit 3), not as itself (exit 2)."""
    refusing = StandInNvmlLibrary.create(tmp_path / "refusing.json", permitted=False)
    result = _run(refusing, "-O", "p50", "--device-genes", "clocks", *args)
    assert result.exit_code == 2, result.output
    errors = [ln for ln in result.output.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and line in errors[0], result.output
    assert "NVML" not in result.output and "Traceback" not in result.output
    assert setup["compilers"] == [] and refusing.load().calls == []


def test_a_device_gene_search_resumes_with_device_genes(
    setup: dict[str, Any], tmp_path: Path
) -> None:
    """The request is checked before the GPU gives the device genes' values, so its journal
    check waits for them: the journal's space has them, the spec's alone does not."""
    nvml: StandInNvmlLibrary = setup["nvml"]
    args = ["-O", "p50", "--device-genes", "clocks", "--confirm-processes", "0", "--seed", "3"]
    first = _run(nvml, *args, "--budget", "4", "--journal", "j.jsonl")
    assert first.exit_code in (0, 4), first.output
    again = _run(nvml, *args, "--resume", "j.jsonl")
    assert again.exit_code in (0, 4), again.output


def test_the_specs_device_genes_are_the_default_and_none_leaves_them_out(
    setup: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ctune.search.session as session

    monkeypatch.setattr(session, "gpu_available", lambda index=0: True)  # the stand-in worker
    yaml = tmp_path / "k" / "standin.yaml"
    yaml.write_text(yaml.read_text() + "\ndevice_genes: [clocks]\n")
    assert load_spec(yaml).device_genes == ("clocks",)
    refusing = StandInNvmlLibrary.create(tmp_path / "refusing.json", permitted=False)
    declared = _run(refusing, "-O", "p50", "--budget", "5")
    assert declared.exit_code == 3, declared.output  # the spec asked for them: refused here
    assert "run the search with --device-genes none" in declared.output
    left_out = _run(refusing, "-O", "p50", "--budget", "5", "--device-genes", "none")
    assert left_out.exit_code in (0, 4), left_out.output  # the search without them
    assert refusing.load().calls == []  # nothing was set
    genes = {g.name for g in setup["compilers"][-1].spec.space.genes}
    assert "sm_clock_mhz" not in genes


def test_a_spec_with_unknown_device_genes_is_one_line(tmp_path: Path) -> None:
    from ctune.errors import SpecError

    write_standin_kernel(tmp_path / "bad")
    yaml = tmp_path / "bad" / "standin.yaml"
    yaml.write_text(yaml.read_text() + "\ndevice_genes: [memory]\n")
    with pytest.raises(SpecError, match=r"device_genes.*unknown memory"):
        load_spec(yaml)

"""Which toolchain checks an artifact: the one it recorded where this machine has it (a
split one made from the nvcc and the ptxas found), else the selected one; and a compiler
that refuses the artifact's controls files, said in plain words.

The toolchains are stand-ins (shell scripts answering ``--version`` and ``-dryrun`` as nvcc
and ptxas do, from tests/unit/compile/test_toolchain_select.py); the split folder is made
for real. tests/compile/test_registry_acf_nvcc.py checks with the real ones.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from registry_support import make_artifact, with_controls

from ctune.ci.check_toolchain import ToolchainFinder, ToolchainUse, controls_refusals
from ctune.config import Settings
from ctune.registry.schema import Artifact

SPLIT_RECORD = {
    "nvcc_version": "Cuda compilation tools, release 13.0, V13.0.88",
    "ptxas_version": "13.3.73 (split: PTX from nvcc 13.0.88)",
}


def _standins() -> ModuleType:
    path = Path(__file__).parents[1] / "compile" / "test_toolchain_select.py"
    name = "toolchain_standins"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture
def machine(tmp_path: Path) -> dict[str, Path]:
    """CUDA 13.0 on PATH and CUDA 13.3 under CUDA_HOME, both stand-ins."""
    standin_cuda = _standins().standin_cuda
    return {
        "old": standin_cuda(tmp_path / "cuda-13.0", "13.0.88"),
        "new": standin_cuda(tmp_path / "cuda-13.3", "13.3.73"),
        "split_root": tmp_path / "cache" / "toolchains",
    }


def _finder(machine: dict[str, Path], discover: bool = True) -> ToolchainFinder:
    environ = {"PATH": str(machine["old"].parent), "CUDA_HOME": str(machine["new"].parent.parent)}
    return ToolchainFinder(
        str(machine["old"]), discover=discover, split_root=machine["split_root"], environ=environ
    )


def _recorded(**fields: str) -> Artifact:
    a = make_artifact()
    return dataclasses.replace(a, fingerprint={**a.fingerprint, **fields})


def test_the_selected_toolchain_checks_what_it_built(machine: dict[str, Path]) -> None:
    use = _finder(machine).for_artifact(make_artifact())  # recorded: plain 13.0.88
    assert use.recorded and use.nvcc == str(machine["old"]) and not use.split
    assert use.phrase() == "checked with its recorded toolchain nvcc 13.0.88 / ptxas 13.0.88"


def test_a_split_record_is_checked_with_that_split_made_from_what_is_here(
    machine: dict[str, Path],
) -> None:
    use = _finder(machine).for_artifact(_recorded(**SPLIT_RECORD))
    assert use.recorded and use.split
    assert Path(use.nvcc).parent.parent.parent == machine["split_root"]
    assert (Path(use.nvcc).parent / "ptxas").resolve() == machine["new"].parent / "ptxas"
    assert use.describe() == "nvcc 13.0.88 / ptxas 13.3.73 (split)"


def test_another_recorded_toolchain_found_here_is_used(machine: dict[str, Path]) -> None:
    record = {
        "nvcc_version": "Cuda compilation tools, release 13.3, V13.3.73",
        "ptxas_version": "13.3.73",
    }
    use = _finder(machine).for_artifact(_recorded(**record))
    assert use.recorded and use.nvcc == str(machine["new"])


def test_a_recorded_toolchain_this_machine_lacks_falls_back_to_the_selected_one(
    machine: dict[str, Path],
) -> None:
    record = {
        "nvcc_version": "Cuda compilation tools, release 12.8, V12.8.93",
        "ptxas_version": "12.8.93",
    }
    use = _finder(machine).for_artifact(_recorded(**record))
    assert not use.recorded and use.nvcc == str(machine["old"])
    assert use.phrase() == (
        "checked with the selected toolchain nvcc 13.0.88 / ptxas 13.0.88; its recorded "
        "nvcc 12.8.93 / ptxas 12.8.93 is not on this machine"
    )


def test_a_toolchain_the_settings_name_is_used_as_it_is(machine: dict[str, Path]) -> None:
    """--nvcc, --ptxas (or their settings) choose: no other toolchain is looked for, so a
    changed toolchain is a build change the rebuilt SASS decides; the line says the
    settings chose it, not that the recorded one is missing (this machine has it)."""
    cache = machine["split_root"].parent
    finder = ToolchainFinder.for_settings(Settings(nvcc=str(machine["old"]), cache_dir=cache))
    assert not finder.discover
    use = finder.for_artifact(_recorded(**SPLIT_RECORD))
    assert not use.recorded and use.nvcc == str(machine["old"])
    assert use.phrase() == (
        "checked with the selected toolchain nvcc 13.0.88 / ptxas 13.0.88; its recorded "
        "nvcc 13.0.88 / ptxas 13.3.73 (split) is not used: the settings chose another toolchain"
    )
    ptxas = machine["new"].parent / "ptxas"
    split = Settings(nvcc=str(machine["old"]), ptxas=str(ptxas), cache_dir=cache)
    assert ToolchainFinder.for_settings(split).for_artifact(_recorded(**SPLIT_RECORD)).recorded
    assert ToolchainFinder.for_settings(Settings()).discover


def test_a_compiler_that_refuses_the_file_is_named_with_the_fix() -> None:
    digest = "a" * 64
    a = with_controls(make_artifact(), digest)
    old = ToolchainUse("nvcc", "13.0.88", "13.0.88", split=False, recorded=False)
    assert controls_refusals(a.front, old, "sm_90") == [
        f"member {a.front[0].key}: ptxas 13.0.88 does not take advanced-controls files "
        "(needs 13.3+); check with --ptxas PATH (a ptxas 13.3 or later) or install "
        "ctune[cuda13.3]"
    ]
    split = ToolchainUse("nvcc", "13.0.88", "13.3.73", split=True, recorded=True)
    assert controls_refusals(a.front, split, "sm_90") == []
    nvcc_file = with_controls(make_artifact(), digest, compiler="nvcc")
    new = ToolchainUse("nvcc", "13.3.73", "13.3.73", split=False, recorded=True)
    (why,) = controls_refusals(nvcc_file.front, new, "sm_90")
    assert "nvcc 13.3.73 takes no controls file of its own for sm_90 (sm_100+)" in why
    assert controls_refusals(nvcc_file.front, new, "sm_100a") == []

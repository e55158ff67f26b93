"""The target architecture's one rule: the spec, --arch, CTUNE_ARCH and [tool.ctune] arch
refuse the same values with the same words, each naming where the value came from; the
architectures nvcc compiles for are read from its --help text."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from ctune import arch
from ctune.config import resolve
from ctune.errors import SpecError, UserError
from ctune.spec import load_spec

DATA = Path(__file__).parents[1] / "data" / "kernels"

# the --gpu-architecture section of nvcc 13.0's --help, as it prints it
HELP = """\
--gpu-architecture <arch>                           (-arch)
        Specify the name of the class of NVIDIA 'virtual' GPU architecture for which
        the CUDA input files must be compiled.
        Allowed values for this option:  'all','all-major','compute_100','compute_100a',
        'compute_120','compute_75','compute_80','compute_90','compute_90a','lto_90',
        'native','sm_100','sm_100a','sm_100f','sm_120','sm_75','sm_80','sm_90','sm_90a'.

--gpu-code <code>,...                               (-code)
        Allowed values for this option:  'sm_52','sm_12'.
"""

GOOD = ["sm_90", "sm_90a", "sm_100f", "compute_80", "sm_121"]
BAD = ["foo", "sm90", "sm_9", "sm_", "sm_1000", "SM_90", "sm_90ab", "compute_90 ", ""]


@pytest.mark.parametrize("value", GOOD)
def test_an_architectures_shape_passes_everywhere(value: str, tmp_path: Path) -> None:
    assert arch.check(value) == value
    assert resolve({"arch": value}, environ={}, cwd=tmp_path).arch == value
    assert resolve(environ={"CTUNE_ARCH": value}, cwd=tmp_path).arch == value


@pytest.mark.parametrize("value", BAD)
def test_what_is_not_an_architecture_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match=r"is not like sm_90 or sm_90a"):
        arch.check(value)


def test_each_settings_layer_names_itself_in_one_line(tmp_path: Path) -> None:
    """--arch foo crashed with IndexError where the gencode is written (exit 70)."""
    rule = "=foo: expected an architecture like sm_90 or sm_90a, or empty for the spec's"
    # empty is the spec's own arch, in every layer
    assert resolve({"arch": ""}, environ={"CTUNE_ARCH": ""}, cwd=tmp_path).arch == ""
    with pytest.raises(UserError) as err:
        resolve({"arch": "foo"}, environ={}, cwd=tmp_path)
    assert str(err.value) == f"--arch{rule}"
    with pytest.raises(UserError) as err:
        resolve(environ={"CTUNE_ARCH": "foo"}, cwd=tmp_path)
    assert str(err.value) == f"CTUNE_ARCH{rule}"
    (tmp_path / "pyproject.toml").write_text('[tool.ctune]\narch = "foo"\n')
    with pytest.raises(UserError) as err:
        resolve(environ={}, cwd=tmp_path)
    quoted = rule.replace("=foo", "='foo'")  # as TOML spells it
    assert str(err.value) == f"{tmp_path / 'pyproject.toml'} [tool.ctune] arch{quoted}"


def test_the_spec_loader_applies_the_same_rule(tmp_path: Path) -> None:
    for name in ("saxpy.cu", "saxpy.yaml", "saxpy_ref.py"):
        shutil.copy(DATA / name, tmp_path / name)
    path = tmp_path / "saxpy.yaml"
    data = yaml.safe_load(path.read_text())
    for value in ("foo", "sm_90a"):
        path.write_text(yaml.safe_dump({**data, "arch": value}, sort_keys=False))
        if value == "sm_90a":
            assert load_spec(path).arch == "sm_90a"
            continue
        with pytest.raises(SpecError) as err:
            load_spec(path)
        with pytest.raises(ValueError) as rule:
            arch.check(value)
        assert str(err.value) == f"{path}: arch: {rule.value}"


def test_the_capability_of_an_architecture() -> None:
    assert arch.capability("sm_90a") == (9, 0)
    assert arch.capability("compute_121") == (12, 1)
    assert arch.capability("sm_100f") == (10, 0)
    assert arch.capability("foo") is None


def test_what_nvcc_compiles_for_is_read_from_its_help() -> None:
    offered = arch.offered(HELP)
    assert "sm_90a" in offered and "compute_75" in offered and "sm_100f" in offered
    assert "sm_12" not in offered and "sm_52" not in offered  # --gpu-code's list is not read
    assert not {"all", "native", "lto_90"} & set(offered)
    assert arch.check_offered("sm_90a", HELP) == "sm_90a"
    with pytest.raises(ValueError) as err:
        arch.check_offered("sm_12", HELP)
    assert str(err.value) == (
        "'sm_12' is not an architecture this nvcc compiles for "
        "(nvcc --list-gpu-arch: sm_75, sm_80, sm_90, sm_100, sm_120)"
    )
    # a help text that lists nothing (a stand-in, an nvcc that words it otherwise) refuses nothing
    assert arch.offered("usage: nvcc") == ()
    assert arch.check_offered("sm_12", "usage: nvcc") == "sm_12"
    assert re.fullmatch(r"[\w,' ]*", ",".join(offered))

"""Which acf genes a run offers: asked for (spec or --acf) and taken by the toolchain."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctune.compile.toolchain import Toolchain
from ctune.controls.offer import offer_acf, parse_acf_option
from ctune.errors import UserError
from ctune.spec import KernelSpec
from ctune.testing.standins import standin_spec


def _toolchain(nvcc: str, ptxas: str) -> Toolchain:
    return Toolchain("/bin/nvcc", nvcc, ptxas, f"release {nvcc}", "", split=nvcc != ptxas)


CUDA_13_0 = _toolchain("13.0.88", "13.0.88")
CUDA_13_3 = _toolchain("13.3.73", "13.3.73")
SPLIT = _toolchain("13.0.88", "13.3.73")  # nvcc 13.0's PTX, ptxas 13.3's cubin


@pytest.mark.parametrize(
    ("toolchain", "compiler", "arch", "taken"),
    [
        (CUDA_13_0, "ptxas", "sm_90a", False),
        (CUDA_13_3, "ptxas", "sm_90a", True),
        (SPLIT, "ptxas", "sm_90", True),
        (SPLIT, "nvcc", "sm_100a", False),
        (CUDA_13_3, "nvcc", "sm_90a", False),  # nvcc's own controls: sm_100 and up
        (CUDA_13_3, "nvcc", "sm_100a", True),
        (_toolchain("14.0", "14.0"), "ptxas", "sm_120", True),
        (_toolchain("13.10.1", "13.10.1"), "ptxas", "sm_90", True),  # 13.10 is not 13.1
    ],
)
def test_the_rule_by_release_and_architecture(
    toolchain: Toolchain, compiler: str, arch: str, taken: bool
) -> None:
    ok, why = toolchain.takes_controls(compiler, arch)
    assert ok is taken
    assert bool(why) is not taken


def test_the_option() -> None:
    assert parse_acf_option(None) is None
    assert parse_acf_option("none") == ()
    assert parse_acf_option(" nvcc, ptxas,nvcc") == ("nvcc", "ptxas")
    for bad in ("", "ptxas,cicc", "none,ptxas"):
        with pytest.raises(UserError, match="--acf"):
            parse_acf_option(bad)


@pytest.fixture
def spec(tmp_path: Path) -> KernelSpec:
    return standin_spec(tmp_path / "kernel").with_acf(("ptxas", "nvcc"))


def _acf_genes(spec: KernelSpec) -> list[str]:
    return [g.name for g in spec.space.genes if g.family == "acf"]


def test_what_the_spec_asks_and_the_toolchain_refuses_is_left_out_with_a_warning(
    spec: KernelSpec,
) -> None:
    warned: list[str] = []
    offered = offer_acf(spec, CUDA_13_3, "sm_90a", None, warned.append)
    assert _acf_genes(offered) == ["acf_ptxas"] and offered.acf == ("ptxas",)
    assert len(warned) == 1 and "acf nvcc not offered" in warned[0] and "sm_100" in warned[0]
    warned.clear()
    assert _acf_genes(offer_acf(spec, CUDA_13_0, "sm_90", None, warned.append)) == []
    assert len(warned) == 2


def test_what_the_command_line_asks_and_the_toolchain_refuses_is_an_error(
    spec: KernelSpec,
) -> None:
    plain = spec.with_acf(())
    assert _acf_genes(offer_acf(plain, CUDA_13_3, "sm_90a", ("ptxas",), print)) == ["acf_ptxas"]
    with pytest.raises(UserError, match=r"--acf: ptxas 13\.0\.88 takes no controls") as caught:
        offer_acf(plain, CUDA_13_0, "sm_90a", ("ptxas",), print)
    assert "pip install 'ctune[cuda13.3]'" in str(caught.value)
    assert "\n" not in str(caught.value)
    assert _acf_genes(offer_acf(spec, CUDA_13_3, "sm_90a", (), print)) == []  # --acf none


@pytest.mark.parametrize(
    ("entry_kind", "acf", "relink", "hinted"),
    [
        ("launcher", ("ptxas",), "off", True),
        ("launcher", ("ptxas",), "auto", False),  # each file from the kept front end
        ("launcher", ("ptxas",), "on", False),
        ("launcher", (), "off", False),  # no controls files searched
        ("launcher", ("nvcc",), "off", False),  # nvcc's controls change the front end too
        ("kernel", ("ptxas",), "off", False),  # a cubin has no front end to keep
    ],
)
def test_a_launchers_controls_search_with_relink_off_is_told_of_it(
    tmp_path: Path, entry_kind: str, acf: tuple[str, ...], relink: str, hinted: bool
) -> None:
    import dataclasses

    from ctune.controls.offer import relink_hint

    spec = dataclasses.replace(standin_spec(tmp_path).with_acf(acf), entry_kind=entry_kind)
    hint = relink_hint(spec, relink)
    assert (hint is not None) == hinted
    if hint is not None:
        assert "--relink auto" in hint and spec.name in hint

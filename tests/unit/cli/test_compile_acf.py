"""`ctune compile`: which compilers' controls the command line asks for."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctune.cli.compile import _asked_controls
from ctune.errors import UserError
from ctune.testing.standins import standin_spec


def test_what_the_command_line_asks_for(tmp_path: Path) -> None:
    plain = standin_spec(tmp_path / "k")
    both = plain.with_acf(("ptxas", "nvcc"))
    digest = "ab" * 32
    assert _asked_controls(plain, None, ["TILE_M=64"], False) == (None, "")
    assert _asked_controls(plain, None, [], True) == (("ptxas",), "ptxas")
    assert _asked_controls(plain, ("nvcc",), [], True) == (("nvcc",), "nvcc")
    assert _asked_controls(both, None, [f"acf_nvcc={digest}"], False) == (("nvcc",), "")
    assert _asked_controls(both, (), [], False) == ((), "")  # --acf none
    assert _asked_controls(both.with_acf(("nvcc",)), None, [], True) == (("nvcc",), "nvcc")
    with pytest.raises(UserError, match="--acf-file: name the compiler"):
        _asked_controls(both, None, [], True)
    with pytest.raises(UserError, match="--acf-file and --set acf_ptxas: both choose its file"):
        _asked_controls(plain, None, [f"acf_ptxas={digest}"], True)

"""Settings resolution: precedence, and paths taken from the pyproject.toml that names them."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctune.config import resolve
from ctune.errors import UserError


def _project(tmp_path: Path, table: str) -> Path:
    (tmp_path / "pyproject.toml").write_text(f"[tool.ctune]\n{table}\n")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    return deep


def test_relative_paths_resolve_against_the_pyproject_folder(tmp_path: Path) -> None:
    deep = _project(tmp_path, 'registry = "reg"\ncache_dir = ".cache/ctune"')
    for cwd in (tmp_path, deep):
        got = resolve(environ={}, cwd=cwd)
        assert got.registry == tmp_path / "reg"
        assert got.cache_dir == tmp_path / ".cache" / "ctune"


def test_absolute_paths_and_other_layers_are_kept(tmp_path: Path) -> None:
    deep = _project(tmp_path, f'registry = "{tmp_path / "abs"}"\nwarmup_ms = 5')
    got = resolve(environ={}, cwd=deep)
    assert got.registry == tmp_path / "abs" and got.warmup_ms == 5.0
    # the environment and the command line still win, as given (relative to the cwd)
    env = resolve(environ={"CTUNE_REGISTRY": "from-env"}, cwd=deep)
    assert env.registry == Path("from-env")
    cli = resolve({"registry": "from-cli"}, environ={"CTUNE_REGISTRY": "x"}, cwd=deep)
    assert cli.registry == Path("from-cli")


def test_a_bad_value_names_its_layer(tmp_path: Path) -> None:
    deep = _project(tmp_path, 'jobs = "many"')
    with pytest.raises(UserError, match=r"\[tool.ctune\] key jobs='many'"):
        resolve(environ={}, cwd=deep)

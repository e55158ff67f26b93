"""Fixtures for the registry tests: isolated git configuration and a fresh repository."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest


def _load_support() -> None:
    # The suite runs with --import-mode=importlib, so sibling modules are not
    # importable by name; register the helper module once, here, for the tests
    # in this directory (writer subprocesses load it by path the same way).
    if "registry_support" in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(
        "registry_support", Path(__file__).with_name("registry_support.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["registry_support"] = module
    spec.loader.exec_module(module)


_load_support()

from registry_support import GIT_IDENTITY, Run, git, init_repo  # noqa: E402


@pytest.fixture(autouse=True)
def isolated_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No user or system git configuration leaks in (signing keys, hooks, aliases)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    for name, value in GIT_IDENTITY.items():
        monkeypatch.setenv(name, value)
    for name in ("CTUNE_REGISTRY", "CTUNE_NVCC", "CTUNE_ARCH", "CTUNE_DEBUG"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return init_repo(tmp_path / "project")


@pytest.fixture
def registry(repo: Path) -> Path:
    return repo / "registry"


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Run:
    """``ctune ...`` through ``ctune.cli.main``: (exit code, stdout, stderr)."""
    monkeypatch.chdir(tmp_path)

    def run(*args: str) -> tuple[int, str, str]:
        from ctune.cli import main

        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


@pytest.fixture
def bare(tmp_path: Path) -> Path:
    """The shared remote, holding the project's main branch (one commit)."""
    seed = init_repo(tmp_path / "seed")
    path = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(path))
    git(seed, "push", "-q", str(path), "main")
    return path


@pytest.fixture
def machines(tmp_path: Path, bare: Path) -> list[Path]:
    """Clones of the remote: machines[i] / "registry" is where machine i publishes."""
    made = []
    for i in range(4):
        path = tmp_path / f"machine{i}"
        git(tmp_path, "clone", "-q", str(bare), str(path))
        made.append(path)
    return made

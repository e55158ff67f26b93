"""A registry import on a full disk: exit 3 naming the git directory, no commit, no ref
moved, and the registry file as it was before.

git is real; only its answer to ``hash-object -w`` is replaced (GitPython's ``execute``,
the single boundary) by what git prints when the object store's disk is full: no test
can fill a disk without privileges.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import git as gitpython
import pytest
from registry_support import Run, git, make_artifact, one_line_error

from ctune.registry.store import write_result

KEY_PATH = "registry/gemm/sq4096/sm90-nvidia-h100-80gb-hbm3.json"


@pytest.fixture
def full_object_store(monkeypatch: pytest.MonkeyPatch) -> None:
    real = gitpython.cmd.Git.execute

    def execute(self: Any, command: Any, *args: Any, **kwargs: Any) -> Any:
        if "hash-object" in command and "-w" in command:
            return (128, b"", "error: unable to create temporary file: No space left on device")
        return real(self, command, *args, **kwargs)

    monkeypatch.setattr(gitpython.cmd.Git, "execute", execute)


def _result(tmp_path: Path, name: str, seed: int) -> Path:
    artifact = make_artifact()
    artifact = dataclasses.replace(artifact, provenance={**artifact.provenance, "seed": seed})
    return write_result(artifact, tmp_path / f"{name}.json")


def test_a_new_artifact_on_a_full_disk(
    cli: Run, repo: Path, registry: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    head = git(repo, "rev-parse", "HEAD")
    request.getfixturevalue("full_object_store")
    code, out, err = cli(
        "registry", "import", str(_result(tmp_path, "a", 1)), "--registry", str(registry)
    )
    assert code == 3, out + err
    one_line_error(err, str(repo / ".git"), "free space and run again")
    assert git(repo, "rev-parse", "HEAD") == head
    assert not (repo / KEY_PATH).exists()
    assert git(repo, "status", "--porcelain") == ""


def test_a_replaced_artifact_on_a_full_disk_is_put_back(
    cli: Run, repo: Path, registry: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    assert (
        cli("registry", "import", str(_result(tmp_path, "a", 1)), "--registry", str(registry))[0]
        == 0
    )
    before = (repo / KEY_PATH).read_bytes()
    head = git(repo, "rev-parse", "HEAD")
    request.getfixturevalue("full_object_store")
    code, out, err = cli(
        "registry", "import", str(_result(tmp_path, "b", 2)), "--registry", str(registry)
    )
    assert code == 3, out + err
    assert git(repo, "rev-parse", "HEAD") == head
    assert (repo / KEY_PATH).read_bytes() == before
    assert git(repo, "status", "--porcelain") == ""

"""A registry repository that git left half way through an operation is refused before
ctune writes anything: real temporary repositories, real conflicts, the real CLI.

Committing then would settle the user's conflict with ctune's own file (seen: an import
during a conflicted merge exited 0, staged its artifact over the conflict and left
MERGE_HEAD behind).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest
from registry_support import Run, git, init_repo, make_artifact, one_line_error

from ctune.registry.store import write_result

KEY_PATH = "registry/gemm/sq4096/sm90-nvidia-h100-80gb-hbm3.json"


def _result(tmp_path: Path, name: str, seed: int) -> Path:
    """A result file of the same artifact with other contents (its provenance seed)."""
    artifact = make_artifact()
    artifact = dataclasses.replace(artifact, provenance={**artifact.provenance, "seed": seed})
    return write_result(artifact, tmp_path / "results" / f"{name}.json")


def _import(cli: Run, result: Path, registry: Path, *extra: str) -> tuple[int, str, str]:
    return cli("registry", "import", str(result), "--registry", str(registry), *extra)


def _conflicted_artifact(cli: Run, repo: Path, registry: Path, tmp_path: Path) -> None:
    """main and `other` committed the same artifact differently; `git merge other` stops."""
    assert _import(cli, _result(tmp_path, "a", 1), registry)[0] == 0
    git(repo, "checkout", "-q", "-b", "other")
    assert _import(cli, _result(tmp_path, "b", 2), registry)[0] == 0
    git(repo, "checkout", "-q", "main")
    assert _import(cli, _result(tmp_path, "c", 3), registry)[0] == 0
    git(repo, "merge", "-q", "other", check=False)


def _readme_conflict(repo: Path) -> None:
    """main and `other` changed README.md differently."""
    git(repo, "checkout", "-q", "-b", "other")
    (repo / "README.md").write_text("theirs\n")
    git(repo, "commit", "-q", "-am", "theirs")
    git(repo, "checkout", "-q", "main")
    (repo / "README.md").write_text("ours\n")
    git(repo, "commit", "-q", "-am", "ours")


def _rebase(repo: Path) -> None:
    _readme_conflict(repo)
    git(repo, "checkout", "-q", "other")
    git(repo, "rebase", "main", check=False)


def _cherry_pick(repo: Path) -> None:
    _readme_conflict(repo)
    git(repo, "cherry-pick", "other", check=False)


def _revert(repo: Path) -> None:
    (repo / "README.md").write_text("one\n")
    git(repo, "commit", "-q", "-am", "one")
    (repo / "README.md").write_text("two\n")
    git(repo, "commit", "-q", "-am", "two")
    git(repo, "revert", "--no-edit", "HEAD~1", check=False)


def _bisect(repo: Path) -> None:
    git(repo, "bisect", "start")


STOPPED: dict[str, tuple[Callable[[Path], None], str, str]] = {
    "rebase": (_rebase, "rebase-merge", "a rebase"),
    "cherry-pick": (_cherry_pick, "CHERRY_PICK_HEAD", "a cherry-pick"),
    "revert": (_revert, "REVERT_HEAD", "a revert"),
    "bisect": (_bisect, "BISECT_LOG", "a bisect"),
}


def test_import_during_a_conflicted_merge_is_refused(
    cli: Run, repo: Path, registry: Path, tmp_path: Path
) -> None:
    _conflicted_artifact(cli, repo, registry, tmp_path)
    merge_head = (repo / ".git" / "MERGE_HEAD").read_bytes()
    head = git(repo, "rev-parse", "HEAD")
    conflicted = (repo / KEY_PATH).read_bytes()
    assert KEY_PATH in git(repo, "ls-files", "-u")

    code, out, err = _import(cli, _result(tmp_path, "d", 4), registry)

    assert code == 2, out + err
    one_line_error(err, "in the middle of a merge", "git merge --abort")
    assert (repo / ".git" / "MERGE_HEAD").read_bytes() == merge_head
    assert git(repo, "rev-parse", "HEAD") == head  # no commit
    assert KEY_PATH in git(repo, "ls-files", "-u")  # the conflict is still the user's
    assert (repo / KEY_PATH).read_bytes() == conflicted  # the file untouched


@pytest.mark.parametrize("operation", sorted(STOPPED))
def test_import_during_a_stopped_operation_is_refused(
    operation: str, cli: Run, repo: Path, registry: Path, tmp_path: Path
) -> None:
    stop, marker, what = STOPPED[operation]
    stop(repo)
    state = repo / ".git" / marker
    assert state.exists(), f"git did not stop in {operation}"
    head = git(repo, "rev-parse", "HEAD")
    refs = git(repo, "for-each-ref")

    code, out, err = _import(cli, _result(tmp_path, "a", 1), registry)

    assert code == 2, out + err
    one_line_error(err, f"in the middle of {what}", str(state))
    assert state.exists()
    assert git(repo, "rev-parse", "HEAD") == head and git(repo, "for-each-ref") == refs
    assert not (repo / KEY_PATH).exists()  # nothing written either


def test_a_commit_to_another_ref_is_refused_too(
    cli: Run, repo: Path, registry: Path, tmp_path: Path
) -> None:
    """--ref commits with plumbing, but the artifact file still lands in this worktree."""
    _cherry_pick(repo)
    code, out, err = _import(cli, _result(tmp_path, "a", 1), registry, "--ref", "ctune/registry")
    assert code == 2, out + err
    one_line_error(err, "in the middle of a cherry-pick")
    assert git(repo, "rev-parse", "--verify", "-q", "ctune/registry", check=False) == ""


def test_each_worktree_has_its_own_state(cli: Run, tmp_path: Path) -> None:
    """A linked worktree in the middle of a merge is refused; the main one, clean, is not
    (the state files are found with `git rev-parse --git-path`)."""
    main = init_repo(tmp_path / "project")
    _readme_conflict(main)
    linked = tmp_path / "linked"
    git(main, "worktree", "add", "-q", "-b", "feature", str(linked), "other")
    git(linked, "merge", "-q", "main", check=False)
    assert (main / ".git" / "worktrees" / "linked" / "MERGE_HEAD").exists()

    code, out, err = _import(cli, _result(tmp_path, "a", 1), linked / "registry")
    assert code == 2, out + err
    one_line_error(err, "in the middle of a merge", "worktrees")

    code, out, err = _import(cli, _result(tmp_path, "b", 2), main / "registry")
    assert code == 0, out + err
    assert KEY_PATH in git(main, "ls-tree", "-r", "--name-only", "HEAD")


def test_a_clean_repository_after_the_merge_imports(
    cli: Run, repo: Path, registry: Path, tmp_path: Path
) -> None:
    _conflicted_artifact(cli, repo, registry, tmp_path)
    git(repo, "merge", "--abort")
    code, out, err = _import(cli, _result(tmp_path, "d", 4), registry)
    assert code == 0, out + err
    assert git(repo, "status", "--porcelain") == ""


def test_import_without_a_commit_during_a_conflicted_merge_is_refused(
    cli: Run, repo: Path, registry: Path, tmp_path: Path
) -> None:
    """--no-commit only writes the file, but that resolves the conflict just the same."""
    _conflicted_artifact(cli, repo, registry, tmp_path)
    conflicted = (repo / KEY_PATH).read_bytes()
    code, out, err = _import(cli, _result(tmp_path, "d", 4), registry, "--no-commit")
    assert code == 2, out + err
    one_line_error(err, "in the middle of a merge")
    assert (repo / KEY_PATH).read_bytes() == conflicted
    assert KEY_PATH in git(repo, "ls-files", "-u")


def test_import_without_a_commit_needs_no_repository(cli: Run, tmp_path: Path) -> None:
    plain = tmp_path / "plain" / "registry"
    code, out, err = _import(cli, _result(tmp_path, "a", 1), plain, "--no-commit")
    assert code == 0, out + err
    assert list(plain.rglob("*.json"))

"""GitRegistry against real temporary repositories: branches, dirt, shallow, hooks, locks."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from registry_support import git, make_artifact

from ctune.errors import RegistryError
from ctune.registry.git import GitRegistry
from ctune.registry.locks import clear_stale_locks, find_stale_locks
from ctune.registry.service import load_artifact, publish_artifact

REL = "registry/gemm/sq4096/sm90-nvidia-h100-80gb-hbm3.json"


def _tree(repo: Path, rev: str = "HEAD") -> list[str]:
    return git(repo, "ls-tree", "-r", "--name-only", rev).split()


def test_commit_on_checked_out_branch_keeps_status_clean(repo: Path, registry: Path) -> None:
    result = publish_artifact(registry, make_artifact())
    assert result.commit is not None and result.commit.changed
    assert result.commit.ref == "refs/heads/main"
    assert git(repo, "rev-parse", "HEAD").strip() == result.commit.commit
    assert _tree(repo) == ["README.md", REL]
    assert git(repo, "status", "--porcelain") == ""
    assert git(repo, "remote") == ""  # no remote needed, nothing pushed
    subject = git(repo, "log", "-1", "--format=%s").strip()
    assert subject == "ctune: gemm sq4096 sm90-nvidia-h100-80gb-hbm3: p50 -33.3% vs default"
    body = git(repo, "log", "-1", "--format=%b").strip()
    assert body.startswith("front of 2; pinned ")


def test_republishing_the_same_artifact_makes_no_commit(repo: Path, registry: Path) -> None:
    first = publish_artifact(registry, make_artifact())
    again = publish_artifact(registry, make_artifact())
    assert again.commit is not None and not again.commit.changed
    assert again.commit.commit == first.commit.commit  # type: ignore[union-attr]


def test_unrelated_changes_are_never_committed_and_survive(repo: Path, registry: Path) -> None:
    (repo / "README.md").write_text("edited, not staged\n")
    (repo / "staged.txt").write_text("staged by a person\n")
    git(repo, "add", "staged.txt")
    (repo / "untracked.txt").write_text("scratch\n")
    publish_artifact(registry, make_artifact())
    assert git(repo, "show", "--name-only", "--format=", "HEAD").split() == [REL]
    assert git(repo, "diff", "--cached", "--name-only").split() == ["staged.txt"]
    assert git(repo, "diff", "--name-only").split() == ["README.md"]
    assert (repo / "README.md").read_text() == "edited, not staged\n"


def test_detached_head_needs_an_explicit_ref(repo: Path, registry: Path) -> None:
    git(repo, "checkout", "-q", "--detach")
    head = git(repo, "rev-parse", "HEAD").strip()
    with pytest.raises(RegistryError, match="--ref"):
        publish_artifact(registry, make_artifact())
    assert not registry.exists()  # refused before writing anything
    result = publish_artifact(registry, make_artifact(), ref="ctune/registry")
    assert result.commit is not None and result.commit.ref == "refs/heads/ctune/registry"
    assert git(repo, "rev-parse", "HEAD").strip() == head
    assert REL in _tree(repo, "ctune/registry")


def test_shallow_clone_writes_but_refuses_history(repo: Path, tmp_path: Path) -> None:
    publish_artifact(repo / "registry", make_artifact(seed=1))
    publish_artifact(repo / "registry", make_artifact(seed=2))
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repo}", str(clone))
    git(clone, "config", "user.name", "CI")
    git(clone, "config", "user.email", "ci@example.com")
    with GitRegistry(clone / "registry") as reg:
        assert reg.is_shallow
    key = "gemm/sq4096/sm90-nvidia-h100-80gb-hbm3"
    assert load_artifact(clone / "registry", key)[1].provenance["seed"] == 2
    with pytest.raises(RegistryError, match="shallow clone"):
        load_artifact(clone / "registry", f"HEAD~1:{key}")
    result = publish_artifact(clone / "registry", make_artifact(seed=3))
    assert result.commit is not None and result.commit.changed
    assert git(clone, "fsck", "--no-dangling") == ""


def test_read_at_revision_needs_no_checkout(repo: Path, registry: Path) -> None:
    publish_artifact(registry, make_artifact(seed=1))
    publish_artifact(registry, make_artifact(seed=2))
    (registry / "gemm/sq4096/sm90-nvidia-h100-80gb-hbm3.json").write_text("garbage")  # dirty
    key = "gemm/sq4096/sm90-nvidia-h100-80gb-hbm3"
    assert load_artifact(registry, f"HEAD~1:{key}")[1].provenance["seed"] == 1
    assert load_artifact(registry, f"HEAD:{key}")[1].provenance["seed"] == 2
    with pytest.raises(RegistryError, match="not allowed"):
        load_artifact(registry, f"--output=/tmp/x:{key}")


def test_hooks_and_filters_never_run(repo: Path, registry: Path) -> None:
    marker = repo.parent / "hook-ran"
    hooks = repo / ".git" / "hooks"
    for name in ("reference-transaction", "post-commit", "pre-commit", "post-index-change"):
        (hooks / name).write_text(f"#!/bin/sh\necho {name} >> {marker}\n")
        (hooks / name).chmod(0o755)
    git(repo, "config", "filter.evil.clean", f"sh -c 'echo filter >> {marker}; cat'")
    (repo / ".gitattributes").write_text("*.json filter=evil\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-q", "--no-verify", "-m", "attrs")
    marker.unlink(missing_ok=True)
    publish_artifact(registry, make_artifact())
    assert not marker.exists()


def test_bad_refs_and_places(repo: Path, registry: Path, tmp_path: Path) -> None:
    for ref in ("../evil", "refs/heads/a..b", "x.lock", "-x", "a b", "refs/heads/", "HEAD@{1}"):
        with pytest.raises(RegistryError):
            publish_artifact(registry, make_artifact(), ref=ref)
    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    with pytest.raises(RegistryError, match="not inside a git repository"):
        publish_artifact(outside / "registry", make_artifact())


def test_old_gitpython_is_refused(
    repo: Path, registry: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import git as gitpython

    monkeypatch.setattr(gitpython, "__version__", "3.1.41")
    with pytest.raises(RegistryError, match=r"gitpython>=3\.1\.49"):
        GitRegistry(registry)


def _age(path: Path, seconds: float) -> None:
    past = time.time() - seconds
    os.utime(path, (past, past))


def test_stale_ref_lock_is_reported_then_cleared(repo: Path, registry: Path) -> None:
    lock = repo / ".git" / "refs" / "heads" / "main.lock"
    lock.write_text("")
    _age(lock, 3600)
    with pytest.raises(RegistryError) as err:
        publish_artifact(registry, make_artifact(), retry_budget_s=0.3)
    assert str(lock) in str(err.value) and "ctune registry doctor --fix" in str(err.value)
    assert git(repo, "status", "--porcelain") == ""  # nothing left staged for a plain commit
    assert [s.path for s in find_stale_locks(repo, 600)] == [lock]
    assert clear_stale_locks(repo, 600) == [lock]
    assert not lock.exists()
    result = publish_artifact(registry, make_artifact())
    assert result.commit is not None and result.commit.changed
    assert git(repo, "status", "--porcelain") == ""


def test_a_commit_that_failed_leaves_the_index_as_it_was(repo: Path, registry: Path) -> None:
    """The index is updated before the ref; when the ref cannot move, a plain `git commit`
    afterwards must not take the artifact ctune said it did not write."""
    publish_artifact(registry, make_artifact(seed=1))
    lock = repo / ".git" / "refs" / "heads" / "main.lock"
    lock.write_text("")
    with pytest.raises(RegistryError):
        publish_artifact(registry, make_artifact(seed=2), retry_budget_s=0.3)
    assert git(repo, "status", "--porcelain") == ""
    assert git(repo, "diff", "--cached", "--name-only") == ""


def test_stale_index_lock_is_named(repo: Path, registry: Path) -> None:
    lock = repo / ".git" / "index.lock"
    lock.write_text("")
    with pytest.raises(RegistryError, match=r"index\.lock exists"):
        publish_artifact(registry, make_artifact(), retry_budget_s=0.3)
    assert git(repo, "rev-parse", "HEAD~0").strip() == git(repo, "rev-parse", "main").strip()
    assert REL not in _tree(repo)  # nothing committed behind the index's back


def test_young_locks_and_live_writers_are_left_alone(repo: Path, registry: Path) -> None:
    lock = repo / ".git" / "refs" / "heads" / "main.lock"
    lock.write_text("")
    assert clear_stale_locks(repo, 600) == []  # too young: a live git may hold it
    assert lock.exists()
    with (
        GitRegistry(registry) as reg,
        reg.writer_lock(),
        pytest.raises(RegistryError, match="running"),
    ):
        clear_stale_locks(repo, 0)
    assert lock.exists()
    assert clear_stale_locks(repo, 0) == [lock]


def test_a_second_writer_waits_its_budget_then_says_try_again(repo: Path, registry: Path) -> None:
    with GitRegistry(registry) as first, first.writer_lock():
        start = time.monotonic()
        with (
            GitRegistry(registry, retry_budget_s=0.3) as second,
            pytest.raises(RegistryError, match="try again when it finishes"),
            second.writer_lock(),
        ):
            pass
        assert 0.3 <= time.monotonic() - start < 5
    with GitRegistry(registry, retry_budget_s=0.3) as third, third.writer_lock():
        pass  # released: the next writer gets it at once


def test_a_ref_is_matched_exactly_and_a_hopeless_update_fails_fast(
    repo: Path, registry: Path
) -> None:
    """`--ref ctune` is not `ctune/registry` (for-each-ref matches prefixes), and a ref
    git cannot create (a file/folder clash) is one clear error, not 30 s of retries."""
    publish_artifact(registry, make_artifact(seed=1), ref="ctune/registry")
    start = time.monotonic()
    with pytest.raises(RegistryError, match="update-ref"):
        publish_artifact(registry, make_artifact(seed=2), ref="ctune")
    assert time.monotonic() - start < 10
    assert git(repo, "rev-parse", "--verify", "-q", "refs/heads/ctune", check=False) == ""


@pytest.mark.parametrize("name", ["caf\udce9", 'new\nline "q"', '"quoted'])
def test_a_registry_folder_is_committed_under_the_bytes_of_its_name(repo: Path, name: str) -> None:
    """A folder that is not UTF-8 (its byte 0xe9 held as a surrogate), or whose name holds a
    newline or starts with a quote, is committed as the file system names it."""
    registry = repo / name
    result = publish_artifact(registry, make_artifact())
    assert result.commit is not None and result.commit.changed
    listed = subprocess.run(
        ["git", "ls-tree", "-r", "-z", "--name-only", "HEAD"], cwd=repo, capture_output=True
    ).stdout.split(b"\0")
    wanted = os.fsencode(name) + b"/" + REL.removeprefix("registry/").encode()
    assert wanted in listed
    assert git(repo, "status", "--porcelain") == ""


@pytest.mark.parametrize("ref", ["refs/remotes/origin/main", "refs/tags/ctune/pin/v1/x", "HEAD"])
def test_writes_go_to_a_branch_only(repo: Path, registry: Path, ref: str) -> None:
    """A remote-tracking ref moved by a write reads as a force-push at the next pull, a
    lightweight tag as a broken pin, and `HEAD` as a branch makes every git name ambiguous."""
    with pytest.raises(RegistryError, match="is not a branch"):
        publish_artifact(registry, make_artifact(), ref=ref)
    assert git(repo, "for-each-ref", "--format=%(refname)").split() == ["refs/heads/main"]
    result = publish_artifact(registry, make_artifact(), ref="refs/heads/ctune/registry")
    assert result.commit is not None and result.commit.ref == "refs/heads/ctune/registry"

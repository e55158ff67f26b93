"""search --commit stopped just after its commit: the last line says the commit was made,
beside what the journal keeps, and the resume it advises does not commit the same result
again (docs/settings.md, "Stopping a search")."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ctune.config import Settings
from ctune.interrupts import Interrupted
from ctune.registry import assemble


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True)
    return done.stdout.strip()


@pytest.fixture
def repo(settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository around the settings' registry, with one commit."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    repo = Path(settings.registry).parent
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.name", "t")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "commit", "-q", "--allow-empty", "-m", "initial")
    return repo


def test_ctrl_c_just_after_the_commit_says_so_and_is_not_committed_again(
    search: Any, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    commit_artifact = assemble.commit_artifact

    def commit_then_ctrl_c(*args: Any, **kwargs: Any) -> Any:
        made = commit_artifact(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)  # as the commit returns
        return made

    monkeypatch.setattr(assemble, "commit_artifact", commit_then_ctrl_c)
    journal = tmp_path / "j.jsonl"
    with pytest.raises(Interrupted) as stopped:
        search(budget=12, seed=3, commit=True, journal=journal, journal_fsync=False)
    head = _git(repo, "rev-parse", "HEAD")
    kept = stopped.value.kept
    assert f"1 artifact file(s) written and committed ({head[:12]})" in kept
    assert f"journal {journal} keeps 12 trial(s)" in kept

    monkeypatch.setattr(assemble, "commit_artifact", commit_artifact)
    resumed, *_ = search(budget=12, commit=True, resume=journal, journal_fsync=False)
    assert _git(repo, "rev-parse", "HEAD") == head  # the advice followed: no second commit
    assert resumed.commit == head and resumed.committed_before
    assert f"not committed again: commit {head[:12]}" in " ".join(resumed.notes)


def test_a_resume_that_measured_more_commits_its_new_result(
    search: Any, repo: Path, tmp_path: Path
) -> None:
    """Only the same journal's result counts as committed: a search resumed with more
    trials than the committed one commits again."""
    journal = tmp_path / "j.jsonl"
    first, *_ = search(budget=8, seed=3, commit=True, journal=journal, journal_fsync=False)
    # a longer search of the same journal: only the header's budget is edited
    lines = journal.read_text().splitlines(keepends=True)
    lines[0] = lines[0].replace('"budget":8', '"budget":12')
    journal.write_text("".join(lines))
    again, *_ = search(budget=12, commit=True, resume=journal, journal_fsync=False)
    assert again.commit is not None and again.commit != first.commit
    assert not again.committed_before

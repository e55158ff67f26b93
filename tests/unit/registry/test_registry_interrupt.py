"""Ctrl-C during `ctune registry import` (and a pull): exit 130, one line saying what was
kept, and the registry whole either way (the file written and committed, or neither).

The subprocess test sends SIGINT to the whole process group, as a terminal does, at
several moments after git first runs; git runs in process groups of its own, so it is
never killed half way through a commit.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from registry_support import GIT_IDENTITY, REF, Run, git, git_tip, make_artifact, rel_of

from ctune.interrupts import Interrupted
from ctune.registry import folder, service
from ctune.registry import remote as remote_module
from ctune.registry.git import GitRegistry
from ctune.registry.remote import pull_registry, push_registry
from ctune.registry.schema import encode
from ctune.registry.store import write_result

KEY_PATH = "registry/gemm/sq4096/sm90-nvidia-h100-80gb-hbm3.json"
ROOT = Path(__file__).parents[3]


def test_a_signal_during_the_commit_waits_for_it(
    repo: Path, registry: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGINT (then SIGTERM) arrive while the commit runs: it completes, then the import
    stops, saying the file was committed."""
    real = GitRegistry.commit_blobs

    def signalled_commit(self: GitRegistry, *args: object, **kwargs: object) -> object:
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(GitRegistry, "commit_blobs", signalled_commit)
    head = git(repo, "rev-parse", "HEAD")
    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    with pytest.raises(Interrupted) as stopped:
        service.publish_artifact(registry, make_artifact())
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
    assert "1 artifact file(s) written and committed" in stopped.value.kept
    assert git(repo, "rev-parse", "HEAD") != head
    assert KEY_PATH in git(repo, "ls-tree", "-r", "--name-only", "HEAD")
    assert git(repo, "status", "--porcelain") == ""


def _import_in_background(result: Path, registry: Path, cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, **GIT_IDENTITY, "PYTHONPATH": str(ROOT)}
    env.pop("CTUNE_DEBUG", None)
    return subprocess.Popen(
        [sys.executable, "-m", "ctune", "registry", "import", str(result), "--registry",
         str(registry)],
        cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # its own group: the signal below goes to it alone
    )  # fmt: skip


def _git_started(proc: subprocess.Popen[str], timeout_s: float = 60.0) -> bool:
    """Wait until the import runs its first git command (a child named git)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:  # the import may end between two reads of /proc
            pids = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        except OSError:
            pids = []
        for pid in pids:
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() == "git":
                    return True
            except OSError:
                continue
        time.sleep(0.005)
    return False


@pytest.mark.parametrize("delay_s", [0.0, 0.05, 0.15, 0.3])
def test_ctrl_c_to_the_process_group_keeps_the_registry_whole(
    delay_s: float, repo: Path, registry: Path, tmp_path: Path, cli: Run
) -> None:
    result = write_result(make_artifact(), tmp_path / "r.json")
    head = git(repo, "rev-parse", "HEAD")
    proc = _import_in_background(result, registry, tmp_path)
    started = _git_started(proc)
    time.sleep(delay_s)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    out, err = proc.communicate(timeout=120)
    assert started or proc.returncode == 0, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err
    committed = git(repo, "rev-parse", "HEAD") != head
    if proc.returncode == 130:
        assert len(lines) == 1 and lines[0].startswith("interrupted: "), err
        said = "written and committed" in lines[0]
        assert said == committed, lines[0]
        if not committed:
            assert lines[0] == "interrupted: nothing written"
    else:  # the import had finished (and said so) before the signal came
        assert proc.returncode in (0, -signal.SIGINT) and committed, err
        assert "committed" in out and not lines, out + err
    if committed:
        assert KEY_PATH in git(repo, "ls-tree", "-r", "--name-only", "HEAD")
    else:
        assert not (repo / KEY_PATH).exists()
    assert git(repo, "status", "--porcelain") == ""  # never a file without its commit
    assert not list((repo / ".git").glob("*.lock"))


def test_a_signal_during_a_pull_waits_for_the_ref_and_the_folder(
    bare: Path, machines: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGINT while the pull moves the ref: the ref moves and the folder is written, then
    the pull stops saying where the ref is (never a ref ahead of its folder)."""
    a, b = machines[:2]
    artifact = make_artifact(problem="pa")
    service.publish_artifact(a / "registry", artifact, ref=REF)
    push_registry(a / "registry", ref=REF)
    real_write = folder.write

    def signalled_write(*args: object) -> object:
        os.kill(os.getpid(), signal.SIGINT)
        return real_write(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(folder, "write", signalled_write)
    with pytest.raises(Interrupted) as stopped:
        pull_registry(b / "registry", ref=REF)
    tip = git_tip(b, REF)
    assert tip == git_tip(bare, REF)
    assert stopped.value.kept.startswith(f"{REF} is at {tip[:12]} here")
    assert (b / rel_of(artifact)).read_bytes() == encode(artifact)


def _behind_with_a_commit_of_its_own(bare: Path, machines: list[Path]) -> Path:
    """Machine B with an unpushed commit while A has pushed two since B last looked: B's
    push rebuilds its commit on A's tip, then pushes it."""
    a, b = machines[:2]
    service.publish_artifact(a / "registry", make_artifact(problem="pa"), ref=REF)
    push_registry(a / "registry", ref=REF)
    service.publish_artifact(b / "registry", make_artifact(problem="pb"), ref=REF)
    service.publish_artifact(a / "registry", make_artifact(problem="pc"), ref=REF)
    push_registry(a / "registry", ref=REF)
    return b


@pytest.mark.parametrize(
    ("when", "git_push_status"),
    [("after", 0), ("during", 0), ("during", 1)],  # 1: git push stopped by the Ctrl-C
)
def test_a_signal_at_the_push_says_whether_it_went_through(
    when: str,
    git_push_status: int,
    bare: Path,
    machines: list[Path],
    cli: Run,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SIGINT as `git push` runs or right as it returns: exit 130 and one line that says
    the ref was pushed (and the push recorded as origin's, so status agrees), or that git
    push was stopped, where the ref is here and to push again; never "nothing written"
    after the local ref was rebuilt."""
    b = _behind_with_a_commit_of_its_own(bare, machines)
    remote_before = git_tip(bare, REF)
    real = GitRegistry.network

    def network(self: GitRegistry, *args: str) -> tuple[int, str, str]:
        if args[0] != "push":
            return real(self, *args)
        if when == "during":
            os.kill(os.getpid(), signal.SIGINT)
        done = real(self, *args) if git_push_status == 0 else (1, "", "killed by SIGINT")
        if when == "after":
            os.kill(os.getpid(), signal.SIGINT)
        return done

    monkeypatch.setattr(GitRegistry, "network", network)
    code, _out, err = cli("registry", "push", "--registry", str(b / "registry"), "--ref", REF)
    assert code == 130, err
    tip = git_tip(b, REF)
    assert tip != remote_before and git_tip(b, f"{tip}^") == remote_before  # rebuilt
    if git_push_status == 0:
        assert err == f"interrupted: {REF} pushed to origin ({tip[:12]})\n"
        assert git_tip(bare, REF) == tip == git_tip(b, f"refs/remotes/origin/{REF}")
    else:
        assert err == (
            f"interrupted: {REF} is at {tip[:12]} here; `git push` to origin was stopped "
            "before it finished: run `ctune registry push` again\n"
        )
        assert git_tip(bare, REF) == remote_before == git_tip(b, f"refs/remotes/origin/{REF}")


def test_a_signal_after_the_rebuild_says_where_the_ref_is(
    bare: Path, machines: list[Path], cli: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGINT after the local ref was rebuilt on origin's tip, before anything is pushed:
    the line says where the ref now is, not "nothing written"."""
    b = _behind_with_a_commit_of_its_own(bare, machines)
    remote_before = git_tip(bare, REF)
    real = remote_module._Link.tags_to_push

    def tags_to_push(self: remote_module._Link, *args: Any) -> list[str]:
        os.kill(os.getpid(), signal.SIGINT)
        return real(self, *args)

    monkeypatch.setattr(remote_module._Link, "tags_to_push", tags_to_push)
    code, _out, err = cli("registry", "push", "--registry", str(b / "registry"), "--ref", REF)
    assert code == 130, err
    tip = git_tip(b, REF)
    assert git_tip(b, f"{tip}^") == remote_before == git_tip(bare, REF)
    assert err == (
        f"interrupted: {REF} is at {tip[:12]} here (push {REF} to origin stopped after that "
        "step); run `ctune registry push` again\n"
    )

"""Sharing the registry: `ctune registry push` and `status` against real git remotes.

The remote is a bare repository in tmp_path and each "machine" is a clone of
it (rules G2, G9). Machines write to ``ctune/registry``, a ref no one
checks out (the CI set-up), except where the checked-out branch is the point.
"""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from registry_support import (
    DEVICE,
    REF,
    Run,
    git,
    git_blob,
    git_tip,
    make_artifact,
    one_line_error,
    rel_of,
    remote_files,
)

import ctune
from ctune.errors import RegistryError, RemoteError
from ctune.registry import git as git_module
from ctune.registry import remote as remote_module
from ctune.registry.layout import parse_key
from ctune.registry.remote import (
    Tracking,
    classify_failure,
    push_registry,
    redact_url,
    registry_status,
)
from ctune.registry.schema import encode
from ctune.registry.service import pin_artifact, publish_artifact, verify_registry
from ctune.registry.store import write_result

SUPPORT = Path(__file__).with_name("registry_support.py")


def test_push_of_a_fresh_registry(cli: Run, bare: Path, machines: list[Path]) -> None:
    a = machines[0]
    artifact = make_artifact(problem="pa")
    publish_artifact(a / "registry", artifact, ref=REF)
    reg = ["--registry", str(a / "registry"), "--ref", REF]
    code, out, _ = cli("registry", "status", *reg)
    assert code == 0
    assert f"origin ({bare}) has no {REF} (as of the last fetch): 1 commit(s) unpushed" in out
    assert f": gemm/pa/{DEVICE}" in out
    code, _, err = cli("registry", "status", "--strict", *reg)
    assert code == 1
    one_line_error(err, "1 commit(s) and 0 pin tag(s) are not on origin", "ctune registry push")

    code, out, _ = cli("registry", "push", *reg)
    assert code == 0, out
    assert out.startswith(f"pushed 1 commit(s) to origin {REF} (new -> ")
    assert remote_files(bare) == {rel_of(artifact): encode(artifact)}
    assert git_tip(bare, REF) == git_tip(a, REF) == git_tip(a, f"refs/remotes/origin/{REF}")
    code, out, _ = cli("registry", "status", "--strict", *reg)
    assert code == 0 and "is up to date with origin" in out
    code, out, _ = cli("registry", "push", *reg)
    assert code == 0 and "is up to date" in out and "nothing to push" in out


def test_second_machine_rebuilds_on_the_first(bare: Path, machines: list[Path]) -> None:
    """Both start ctune/registry from nothing (unrelated roots, the CI case); B pins too."""
    a, b = machines[:2]
    first, second = make_artifact(problem="pa"), make_artifact(problem="pb")
    publish_artifact(a / "registry", first, ref=REF)
    push_registry(a / "registry", ref=REF)
    own = publish_artifact(b / "registry", second, ref=REF).commit
    assert own is not None
    pin = pin_artifact(b / "registry", parse_key(f"gemm/pb/{DEVICE}"), "v1", ref=REF)

    result = push_registry(b / "registry", ref=REF)
    assert result.rebuilt == 1 and result.commits == 1 and result.tags == (pin.tag,)
    # nothing lost, byte for byte, and B's commit kept its author and message
    assert remote_files(bare) == {rel_of(first): encode(first), rel_of(second): encode(second)}
    assert git(bare, "log", "--format=%s|%an|%ad", "-1", REF) == git(
        b, "log", "--format=%s|%an|%ad", "-1", own.commit
    )
    assert git_tip(b, REF) == git_tip(bare, REF) == result.commit
    # the pin followed its commit to the rebuilt copy: still an ancestor, digest intact
    assert git_tip(bare, f"{pin.tag}^{{commit}}") == result.commit
    assert f"commit: {result.commit}" in git(bare, "tag", "-l", "--format=%(contents)", pin.tag)
    report = verify_registry(b / "registry", ref=REF)
    assert report.ok and report.pins[0].problems == ()
    status = registry_status(b / "registry", ref=REF)
    assert status.tracking is Tracking.TRACKED and not status.unpushed
    # A learns nothing until it asks; then it is behind, with nothing to push
    assert registry_status(a / "registry", ref=REF).behind == 0
    fetched = registry_status(a / "registry", ref=REF, fetch=True)
    assert fetched.behind == 1 and not fetched.unpushed


def test_rejected_push_fetches_rebuilds_and_retries(
    cli: Run, bare: Path, machines: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pushes between B's fetch and B's push: B is rejected, then rebuilds and wins."""
    a, b = machines[:2]
    early, late, mine = (make_artifact(problem=p) for p in ("early", "late", "mine"))
    publish_artifact(a / "registry", early, ref=REF)
    push_registry(a / "registry", ref=REF)
    publish_artifact(b / "registry", mine, ref=REF)
    original = remote_module._Link.push
    raced: list[bool] = []

    def racing_push(self: remote_module._Link, new: str, tags: list[str]) -> bool:
        if not raced:
            raced.append(True)
            publish_artifact(a / "registry", late, ref=REF)
            push_registry(a / "registry", ref=REF)
        return original(self, new, tags)

    monkeypatch.setattr(remote_module._Link, "push", racing_push)
    code, out, err = cli("registry", "push", "--registry", str(b / "registry"), "--ref", REF)
    assert code == 0, err
    assert "rebuilt 1 commit(s) on origin's newer tip (1 push(es) rejected" in out
    assert remote_files(bare) == {rel_of(x): encode(x) for x in (early, late, mine)}
    assert int(git(bare, "rev-list", "--count", REF)) == 3
    assert git(bare, "fsck", "--no-dangling") == ""


def test_checked_out_branch_gets_the_other_machines_files(
    cli: Run, bare: Path, machines: list[Path]
) -> None:
    a, b = machines[:2]
    theirs, mine, later = (make_artifact(problem=p) for p in ("theirs", "mine", "later"))
    publish_artifact(a / "registry", theirs)  # to main, the checked-out branch
    push_registry(a / "registry")
    publish_artifact(b / "registry", mine)
    # an untracked file where origin's artifact would land: the push must not clobber it
    blocker = b / rel_of(theirs)
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("a person's notes\n")
    before = git_tip(b, "main")
    code, _, err = cli("registry", "push", "--registry", str(b / "registry"))
    assert code == 2
    one_line_error(err, "commit or stash", "nothing is lost: 1 commit(s)")
    assert git_tip(b, "main") == before and blocker.read_text() == "a person's notes\n"

    blocker.unlink()
    code, _, err = cli("registry", "push", "--registry", str(b / "registry"))
    assert code == 0, err
    assert (b / rel_of(theirs)).read_bytes() == encode(theirs)
    assert git(b, "status", "--porcelain") == ""
    assert git_tip(b, "main") == git_tip(bare, "main")
    assert git(bare, "ls-tree", "--name-only", "main").split() == ["README.md", "registry"]
    # a later artifact on A fast-forwards B's worktree on B's next push (nothing of B's new)
    publish_artifact(a / "registry", later)
    push_registry(a / "registry")
    assert push_registry(b / "registry").up_to_date
    assert (b / rel_of(later)).read_bytes() == encode(later)
    assert git(b, "status", "--porcelain") == ""


WRITER = r"""
import importlib.util, sys
from pathlib import Path
spec = importlib.util.spec_from_file_location("registry_support", sys.argv[1])
support = importlib.util.module_from_spec(spec)
sys.modules["registry_support"] = support
spec.loader.exec_module(support)
from ctune.registry.remote import push_registry
from ctune.registry.service import publish_artifact

root, writer, count = Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
for i in range(count):
    publish_artifact(root, support.make_artifact(kernel=f"w{writer}", problem=f"p{i}"),
                     ref="ctune/registry")
    result = push_registry(root, ref="ctune/registry")  # the default budget
    print(f"w{writer}/p{i} rejections={result.rejections}", flush=True)
"""


def test_concurrent_pushes_from_four_machines_lose_nothing(
    bare: Path, machines: list[Path]
) -> None:
    per_machine = 5
    env = {**os.environ, "PYTHONPATH": str(Path(ctune.__file__).parents[1])}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WRITER,
                str(SUPPORT),
                str(m / "registry"),
                str(w),
                str(per_machine),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for w, m in enumerate(machines)
    ]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, out + err[-2000:]
    expected = {
        rel_of(a): encode(a)
        for a in (
            make_artifact(kernel=f"w{w}", problem=f"p{i}")
            for w in range(len(machines))
            for i in range(per_machine)
        )
    }
    assert remote_files(bare) == expected
    assert int(git(bare, "rev-list", "--count", REF)) == len(expected)
    assert git(bare, "fsck", "--no-dangling", "--strict") == ""
    for m in machines:
        assert not registry_status(m / "registry", ref=REF).unpushed


def test_same_path_changed_on_both_sides_stops_and_keeps_everything(
    cli: Run, bare: Path, machines: list[Path]
) -> None:
    a, b = machines[:2]
    publish_artifact(a / "registry", make_artifact(seed=1), ref=REF)
    push_registry(a / "registry", ref=REF)
    remote_before = remote_files(bare)
    mine = make_artifact(seed=2)
    own = publish_artifact(b / "registry", mine, ref=REF).commit
    assert own is not None
    reg = ["--registry", str(b / "registry"), "--ref", REF]
    code, _, err = cli("registry", "push", *reg)
    assert code == 2
    one_line_error(
        err,
        f"{rel_of(mine)} was changed both here and on origin",
        f"ctune registry diff origin/{REF}:gemm/sq4096/{DEVICE} {REF}:gemm/sq4096/{DEVICE}",
        "nothing is lost: 1 commit(s)",
    )
    assert git_tip(b, REF) == own.commit and remote_files(bare) == remote_before
    assert git_blob(b, f"{REF}:{rel_of(mine)}") == encode(mine)
    code, out, _ = cli("registry", "status", *reg)
    assert code == 0 and f"unpushed {own.commit[:12]}" in out


def test_the_same_bytes_on_both_sides_are_no_conflict(bare: Path, machines: list[Path]) -> None:
    a, b = machines[:2]
    same = make_artifact()
    publish_artifact(a / "registry", same, ref=REF)
    push_registry(a / "registry", ref=REF)
    publish_artifact(b / "registry", make_artifact(problem="other"), ref=REF)
    publish_artifact(b / "registry", same, ref=REF)
    result = push_registry(b / "registry", ref=REF)
    assert result.commits == 1  # B's copy of `same` added nothing: dropped, like git rebase
    assert set(remote_files(bare)) == {rel_of(same), rel_of(make_artifact(problem="other"))}


def test_pin_tags_travel_atomically_with_the_ref(
    cli: Run, bare: Path, machines: list[Path]
) -> None:
    a = machines[0]
    publish_artifact(a / "registry", make_artifact(), ref=REF)
    push_registry(a / "registry", ref=REF)
    pushed_tip = git_tip(bare, REF)
    publish_artifact(a / "registry", make_artifact(problem="next"), ref=REF)
    pin = pin_artifact(a / "registry", parse_key(f"gemm/next/{DEVICE}"), "v2", ref=REF)
    # the remote refuses tags (a server hook): with --atomic the branch must not move either
    hook = bare / "hooks" / "update"
    hook.write_text('#!/bin/sh\ncase "$1" in refs/tags/*) exit 1;; esac\nexit 0\n')
    hook.chmod(0o755)
    reg = ["--registry", str(a / "registry"), "--ref", REF]
    code, _, err = cli("registry", "push", *reg)
    assert code == 5
    one_line_error(err, "origin", "refused the push", "1 commit(s) and 1 pin tag(s)")
    assert git_tip(bare, REF) == pushed_tip and git(bare, "tag", "-l") == ""
    code, out, _ = cli("registry", "status", *reg)
    assert code == 0 and f"unpushed tag {pin.tag}" in out

    hook.unlink()
    code, out, _ = cli("registry", "push", *reg)
    assert code == 0 and "pushed 1 commit(s) and 1 pin tag(s)" in out and pin.tag in out
    assert git_tip(bare, f"{pin.tag}^{{commit}}") == pin.commit == git_tip(bare, REF)
    assert git(bare, "cat-file", "-t", pin.tag).strip() == "tag"
    code, _, _ = cli("registry", "status", "--strict", *reg)
    assert code == 0


def test_a_remote_pin_pointing_elsewhere_is_never_overwritten(
    cli: Run, bare: Path, machines: list[Path]
) -> None:
    a = machines[0]
    publish_artifact(a / "registry", make_artifact(), ref=REF)
    pin = pin_artifact(a / "registry", parse_key(f"gemm/sq4096/{DEVICE}"), "v1", ref=REF)
    git(bare, "tag", "-a", "-m", "someone else's v1", pin.tag, "main")
    theirs = git_tip(bare, f"refs/tags/{pin.tag}")
    code, _, err = cli("registry", "push", "--registry", str(a / "registry"), "--ref", REF)
    assert code == 2
    one_line_error(err, f"pin tag {pin.tag} exists on origin pointing elsewhere", "immutable")
    assert git_tip(bare, f"refs/tags/{pin.tag}") == theirs and git_tip(bare, REF) == ""
    status = registry_status(a / "registry", ref=REF)
    assert status.tag_conflicts == (pin.tag,)
    code, _, err = cli("registry", "status", "--strict", "--registry", str(a / "registry"))
    assert code == 1  # main itself is pushed; the clash alone fails --strict
    assert f"warning: pin tag {pin.tag} exists on origin pointing elsewhere" in err
    assert err.splitlines()[-1].startswith("error: 0 commit(s) and 0 pin tag(s) are not on origin")
    assert "1 pin tag(s) clash with origin's" in err


def test_no_remote_writes_succeed_and_status_says_so(cli: Run, repo: Path, tmp_path) -> None:
    registry = repo / "registry"
    result = write_result(make_artifact(), tmp_path / "r.json")
    code, out, _ = cli("registry", "import", str(result), "--registry", str(registry))
    assert code == 0 and "committed" in out
    code, _, _ = cli(
        "registry", "pin", f"gemm/sq4096/{DEVICE}", "--release", "v1", "--registry", str(registry)
    )
    assert code == 0
    code, out, _ = cli("registry", "status", "--registry", str(registry))
    assert code == 0
    assert "no remote origin: nothing is shared; 2 commit(s) on main exist only here" in out
    assert f"ctune: gemm sq4096 {DEVICE}" in out and f": gemm/sq4096/{DEVICE}" in out
    code, _, err = cli("registry", "status", "--strict", "--registry", str(registry))
    assert code == 1
    one_line_error(err, "2 commit(s)", "not on origin")
    code, _, err = cli("registry", "push", "--registry", str(registry))
    assert code == 5
    one_line_error(err, "no remote origin", "git remote add origin URL", "nothing is lost")
    assert git(repo, "status", "--porcelain") == ""


def test_status_lists_registry_commits_and_counts_code_commits(
    cli: Run, repo: Path, tmp_path: Path
) -> None:
    """A registry on the project's own branch: code commits are counted, not listed."""
    registry = repo / "registry"
    result = write_result(make_artifact(), tmp_path / "r.json")
    assert cli("registry", "import", str(result), "--registry", str(registry))[0] == 0
    for i in range(3):
        (repo / f"code{i}.py").write_text(f"x = {i}\n")
        git(repo, "add", f"code{i}.py")
        git(repo, "commit", "-q", "-m", f"code change {i}")
    code, out, _ = cli("registry", "status", "--registry", str(registry))
    assert code == 0
    assert f": gemm/sq4096/{DEVICE}" in out and "code change" not in out
    # the three, and the fixture's first commit
    assert "4 unpushed commit(s) on main touch nothing in the registry folder" in out


def test_unreachable_remote_keeps_the_commit_unpushed(
    cli: Run, bare: Path, machines: list[Path], tmp_path: Path
) -> None:
    a = machines[0]
    git(a, "remote", "set-url", "origin", str(tmp_path / "gone.git"))
    artifact = make_artifact()
    own = publish_artifact(a / "registry", artifact, ref=REF).commit
    assert own is not None and own.changed  # the write never needed the remote
    reg = ["--registry", str(a / "registry"), "--ref", REF]
    code, _, err = cli("registry", "push", *reg)
    assert code == 5
    one_line_error(
        err,
        f"cannot push {REF} to origin ({tmp_path / 'gone.git'}): no repository at that address",
        "then run `ctune registry push` again",
        "nothing is lost: 1 commit(s) are kept locally",
    )
    assert git_tip(a, REF) == own.commit
    code, out, err = cli("registry", "status", "--fetch", *reg)
    assert code == 0
    assert "could not fetch from origin: no repository at that address" in err
    assert f"unpushed {own.commit[:12]} " in out and f"gemm/sq4096/{DEVICE}" in out
    code, _, _ = cli("registry", "status", "--strict", *reg)
    assert code == 1
    # back online: the same command shares it, nothing lost
    git(a, "remote", "set-url", "origin", str(bare))
    code, _, _ = cli("registry", "push", *reg)
    assert code == 0 and remote_files(bare) == {rel_of(artifact): encode(artifact)}


class _Unauthorized(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # every request: 401, as a server without our token answers
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="registry"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_GET

    def log_message(self, *args: object) -> None:
        pass


def test_auth_failure_is_one_line_and_exit_5(cli: Run, machines: list[Path]) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Unauthorized)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        a = machines[0]
        url = f"http://ci-bot:s3cret@127.0.0.1:{server.server_address[1]}/registry.git"
        git(a, "remote", "set-url", "origin", url)
        publish_artifact(a / "registry", make_artifact(), ref=REF)
        code, _, err = cli("registry", "push", "--registry", str(a / "registry"), "--ref", REF)
    finally:
        server.shutdown()
    assert code == 5
    one_line_error(err, "authentication failed; fix the credentials", "nothing is lost")
    assert "s3cret" not in err


@pytest.mark.parametrize(
    ("command", "kept"),
    [("push", "nothing is lost: 1 commit(s)"), ("pull", "nothing changed here: 1 commit(s)")],
)
def test_a_remote_that_never_answers_is_cut_off(
    cli: Run, machines: list[Path], monkeypatch: pytest.MonkeyPatch, command: str, kept: str
) -> None:
    """Offline often looks like silence, not a refusal: neither push nor pull may hang."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # connections complete in the backlog; nothing ever answers
    monkeypatch.setattr(git_module, "NETWORK_TIMEOUT_S", 1.0)
    try:
        a = machines[0]
        git(a, "remote", "set-url", "origin", f"http://127.0.0.1:{listener.getsockname()[1]}/r")
        publish_artifact(a / "registry", make_artifact(), ref=REF)
        started = time.monotonic()
        code, _, err = cli("registry", command, "--registry", str(a / "registry"), "--ref", REF)
    finally:
        listener.close()
    assert code == 5 and time.monotonic() - started < 30
    one_line_error(err, f"cannot {command} {REF}", "no answer within 1 s (offline?)", kept)


def test_remote_comes_from_settings(
    cli: Run, bare: Path, machines: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    a = machines[0]
    git(a, "remote", "rename", "origin", "shared")
    publish_artifact(a / "registry", make_artifact(), ref=REF)
    reg = ["--registry", str(a / "registry"), "--ref", REF]
    code, _, err = cli("registry", "push", *reg)
    assert code == 5 and "no remote origin" in err
    monkeypatch.setenv("CTUNE_REGISTRY_REMOTE", "shared")
    code, out, _ = cli("registry", "push", *reg)
    assert code == 0 and "to shared ctune/registry" in out
    code, _, err = cli("registry", "push", "--remote", "-x", *reg)
    assert code == 2
    one_line_error(err, "remote name '-x' is not allowed")


@pytest.mark.parametrize(
    ("stderr", "what"),
    [
        ("fatal: could not read Username for 'https://h': terminal prompts disabled", "auth"),
        ("remote: Invalid username or password.\nfatal: Authentication failed for 'x'", "auth"),
        ("git@h: Permission denied (publickey).\nfatal: Could not read from remote", "auth"),
        ("fatal: unable to access 'https://h/': The requested URL returned error: 403", "auth"),
        ("ssh: Could not resolve hostname h: Name or service not known", "unreachable"),
        ("fatal: unable to access 'http://h/': Failed to connect to h port 80", "unreachable"),
        ("fatal: '/x' does not appear to be a git repository", "no repository"),
        ("remote: Repository not found.\nfatal: repository 'https://h/x/' not found", "no rep"),
        ('Timeout: the command "git push" did not complete in 120 secs.', "no answer"),
        ("fatal: something new\nhint: ignore me", "fatal: something new"),
    ],
)
def test_failures_are_classified(stderr: str, what: str) -> None:
    found, todo = classify_failure(stderr, "origin")
    expected = {"auth": "authentication failed", "unreachable": "unreachable (offline?)"}
    assert found.startswith(expected.get(what, what)) and todo


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://bot:tok@github.com/o/r.git", "https://github.com/o/r.git"),
        ("https://github.com/o/r.git", "https://github.com/o/r.git"),
        ("git@github.com:o/r.git", "git@github.com:o/r.git"),
        ("ssh://git@host/r.git", "ssh://host/r.git"),
        ("/srv/git/r.git", "/srv/git/r.git"),
    ],
)
def test_urls_are_shown_without_credentials(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_a_remote_that_keeps_moving_exhausts_the_budget(
    bare: Path, machines: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every push of B loses the race to A: B gives up after its attempts, losing nothing."""
    a, b = machines[:2]
    mine = make_artifact(problem="mine")
    own = publish_artifact(b / "registry", mine, ref=REF).commit
    assert own is not None
    original = remote_module._Link.push
    monkeypatch.setattr(remote_module, "PUSH_BACKOFF_BASE_S", 0.001)

    def always_late(self: remote_module._Link, new: str, tags: list[str]) -> bool:
        if self.reg.top == b.resolve():
            n = len(remote_files(bare)) if git_tip(bare, REF) else 0
            publish_artifact(a / "registry", make_artifact(problem=f"a{n}"), ref=REF)
            push_registry(a / "registry", ref=REF)
        return original(self, new, tags)

    monkeypatch.setattr(remote_module._Link, "push", always_late)
    with pytest.raises(RemoteError) as caught:
        push_registry(b / "registry", ref=REF, max_attempts=3)
    message = str(caught.value)
    assert (
        "it kept moving (3 rejection(s)" in message and "last: [rejected] (fetch first)" in message
    )
    assert "nothing is lost: 1 commit(s) are kept locally" in message
    assert caught.value.exit_code == 5
    assert rel_of(mine) not in remote_files(bare)
    assert git_blob(b, f"{REF}:{rel_of(mine)}") == encode(mine)  # rebuilt, never dropped
    monkeypatch.setattr(remote_module._Link, "push", original)
    assert push_registry(b / "registry", ref=REF).commits == 1
    assert remote_files(bare)[rel_of(mine)] == encode(mine)


def test_shallow_clone_missing_history_is_refused(
    bare: Path, machines: list[Path], tmp_path: Path
) -> None:
    a = machines[0]
    (a / "code.txt").write_text("more history\n")
    git(a, "add", "code.txt")
    git(a, "commit", "-q", "-m", "code")
    git(a, "push", "-q", "origin", "main")
    git(a, "branch", "reg", "main~1")  # A's registry branch starts below the new commit
    publish_artifact(a / "registry", make_artifact(problem="pa"), ref="reg")
    push_registry(a / "registry", ref="reg")
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{bare}", str(shallow))
    git(shallow, "branch", "reg", "main")  # starts at the grafted commit: its parent is unknown
    own = publish_artifact(shallow / "registry", make_artifact(problem="pb"), ref="reg").commit
    assert own is not None
    with pytest.raises(RegistryError, match=r"shallow clone lacks the history .*--unshallow"):
        push_registry(shallow / "registry", ref="reg")
    assert git_tip(shallow, "reg") == own.commit


def test_a_rewritten_remote_is_not_pushed_onto(cli: Run, bare: Path, machines: list[Path]) -> None:
    a, b = machines[:2]
    publish_artifact(a / "registry", make_artifact(problem="one"), ref=REF)
    push_registry(a / "registry", ref=REF)
    publish_artifact(a / "registry", make_artifact(problem="two"), ref=REF)
    push_registry(a / "registry", ref=REF)
    git(b, "fetch", "-q", "origin")
    publish_artifact(b / "registry", make_artifact(problem="mine"), ref=REF)
    git(bare, "update-ref", f"refs/heads/{REF}", f"refs/heads/{REF}~1")  # someone force-pushed
    reg = ["--registry", str(b / "registry"), "--ref", REF]
    seen = git_tip(b, f"origin/{REF}")
    for _ in range(2):  # it keeps saying so until a person accepts the rewrite
        code, _, err = cli("registry", "push", *reg)
        assert code == 2
        one_line_error(err, f"origin's {REF} was rewritten", "git update-ref -d")
        assert git_tip(b, f"origin/{REF}") == seen
    git(b, "update-ref", "-d", f"refs/remotes/origin/{REF}")
    code, _, err = cli("registry", "push", *reg)
    assert code == 0, err
    assert rel_of(make_artifact(problem="mine")) in remote_files(bare)

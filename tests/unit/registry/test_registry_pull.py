"""`ctune registry pull` against real git remotes: a bare repository, clones as machines.

Most machines here write to ``ctune/registry``, a ref no one checks out (the CI
set-up), so the pulled artifact files must be written into the registry folder
by ctune; where the checked-out branch is the point, git moves the worktree.
"""

from __future__ import annotations

from pathlib import Path

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

from ctune.registry.git import GitRegistry
from ctune.registry.layout import parse_key
from ctune.registry.remote import pull_registry, push_registry
from ctune.registry.schema import encode
from ctune.registry.service import pin_artifact, publish_artifact, verify_registry


def _reg(machine: Path, *more: str) -> list[str]:
    return ["--registry", str(machine / "registry"), "--ref", REF, *more]


def _state(machine: Path) -> tuple[str, str, str, dict[str, bytes]]:
    """Everything a refused pull must leave alone: the ref, HEAD, tags and the folder."""
    files = {
        str(p.relative_to(machine)): p.read_bytes()
        for p in sorted((machine / "registry").rglob("*"))
        if p.is_file()
    }
    return git_tip(machine, REF), git_tip(machine, "HEAD"), git(machine, "tag", "-l"), files


def _pull_refused(cli: Run, machine: Path, code: int, *needles: str, ref: bool = True) -> None:
    """The pull fails with one line naming each needle, and changes nothing here."""
    before = _state(machine)
    args = _reg(machine) if ref else ["--registry", str(machine / "registry")]
    got, _, err = cli("registry", "pull", *args)
    assert got == code, err
    one_line_error(err, *needles)
    assert _state(machine) == before


def test_pull_writes_another_machines_artifacts_into_the_folder(
    cli: Run, bare: Path, machines: list[Path]
) -> None:
    a, b = machines[:2]
    first, second = make_artifact(problem="pa"), make_artifact(problem="pb")
    publish_artifact(a / "registry", first, ref=REF)
    publish_artifact(a / "registry", second, ref=REF)
    push_registry(a / "registry", ref=REF)
    code, out, _ = cli("registry", "status", "--fetch", *_reg(b))
    assert code == 0
    assert "behind: origin has 2 commit(s) not here; run `ctune registry pull`" in out

    code, out, err = cli("registry", "pull", *_reg(b))
    assert code == 0, err
    assert out.startswith(f"pulled 2 commit(s) from origin {REF} (new -> ")
    assert "wrote 2 artifact file(s)" in out and f"  wrote gemm/pa/{DEVICE}" in out
    assert git_tip(b, REF) == git_tip(bare, REF)
    for artifact in (first, second):
        assert (b / rel_of(artifact)).read_bytes() == encode(artifact)
    # `registry list` reads the folder: both artifacts, digests verified on read
    code, out, err = cli("registry", "list", "--registry", str(b / "registry"))
    assert code == 0 and "quarantined" not in err
    for artifact in (first, second):
        assert f"gemm/{artifact.problem}/{DEVICE}" in out
        assert f"digest={artifact.digest()[:12]}" in out
    # main (checked out) is untouched: nothing staged, the files are the registry ref's
    assert git(b, "diff", "--cached", "--name-only") == ""
    assert git_tip(b, "HEAD") == git_tip(bare, "main")

    code, out, _ = cli("registry", "pull", *_reg(b))
    assert code == 0 and "already has every commit origin has" in out and "wrote" not in out
    code, out, _ = cli("registry", "status", *_reg(b))
    assert "is up to date with origin" in out and "registry folder" not in out


def test_unpushed_work_is_rebuilt_on_pull_then_pushed(
    cli: Run, bare: Path, machines: list[Path]
) -> None:
    """B has an unpushed artifact and pin; B pulls (rebuild), then pushes: nothing lost."""
    a, b = machines[:2]
    theirs, mine = make_artifact(problem="theirs"), make_artifact(problem="mine")
    publish_artifact(a / "registry", theirs, ref=REF)
    push_registry(a / "registry", ref=REF)
    own = publish_artifact(b / "registry", mine, ref=REF).commit
    assert own is not None
    pin = pin_artifact(b / "registry", parse_key(f"gemm/mine/{DEVICE}"), "v1", ref=REF)

    code, out, err = cli("registry", "pull", *_reg(b))
    assert code == 0, err
    assert "pulled 1 commit(s) from origin" in out
    assert "rebuilt 1 unpushed commit(s) on origin's tip" in out
    assert "1 commit(s) not on origin yet; `ctune registry push` shares them" in out
    local = git_tip(b, REF)
    assert git_tip(b, f"origin/{REF}") == git_tip(bare, REF) == git_tip(b, f"{REF}~1")
    assert git_blob(b, f"{REF}:{rel_of(mine)}") == (b / rel_of(mine)).read_bytes()
    assert (b / rel_of(theirs)).read_bytes() == encode(theirs)
    # the rebuilt commits kept their author and message; the pin followed its commit
    assert git(b, "log", "--format=%s|%an|%ad", "-1", REF) == git(
        b, "log", "--format=%s|%an|%ad", "-1", own.commit
    )
    assert git_tip(b, f"{pin.tag}^{{commit}}") == local
    assert verify_registry(b / "registry", ref=REF).ok

    code, out, err = cli("registry", "push", *_reg(b))
    assert code == 0, err
    assert "pushed 1 commit(s) and 1 pin tag(s)" in out and "rebuilt" not in out
    assert git_tip(bare, REF) == local
    assert set(remote_files(bare)) == {rel_of(theirs), rel_of(mine)}
    assert remote_files(bare)[rel_of(theirs)] == encode(theirs)
    # and A, pulling, gets B's artifact and pin
    pull_registry(a / "registry", ref=REF)
    assert (a / rel_of(mine)).read_bytes() == git_blob(bare, f"{REF}:{rel_of(mine)}")
    assert git_tip(a, f"{pin.tag}^{{commit}}") == local


def test_pins_made_elsewhere_are_visible_after_pull(
    cli: Run, bare: Path, machines: list[Path]
) -> None:
    a, b = machines[:2]
    key = f"gemm/sq4096/{DEVICE}"
    publish_artifact(a / "registry", make_artifact(), ref=REF)
    pin = pin_artifact(a / "registry", parse_key(key), "v1", ref=REF)
    push_registry(a / "registry", ref=REF)
    code, _, err = cli(
        "registry", "show", key, "--release", "v1", "--registry", str(b / "registry")
    )
    assert code == 2 and f"no pin {pin.tag}" in err

    code, out, err = cli("registry", "pull", *_reg(b))
    assert code == 0, err
    assert f"brought 1 pin tag(s) from origin\n  tag {pin.tag}\n" in out
    assert git_tip(b, f"refs/tags/{pin.tag}") == git_tip(bare, f"refs/tags/{pin.tag}")
    code, out, err = cli(
        "registry", "show", key, "--release", "v1", "--registry", str(b / "registry")
    )
    assert code == 0, err
    assert f"digest sha256:{pin.digest}" in out
    code, out, err = cli("registry", "verify", *_reg(b))
    assert code == 0, err
    assert f"pin {pin.tag}: ok" in out and "1 artifact(s) verified" in out
    code, _, _ = cli("registry", "status", "--strict", *_reg(b))
    assert code == 0  # the pin is A's, already on origin: nothing of B's to push


def test_a_local_pin_of_the_same_name_is_kept_and_reported(
    cli: Run, bare: Path, machines: list[Path]
) -> None:
    a, b = machines[:2]
    key = parse_key(f"gemm/sq4096/{DEVICE}")
    publish_artifact(a / "registry", make_artifact(), ref=REF)
    theirs = pin_artifact(a / "registry", key, "v1", ref=REF)
    push_registry(a / "registry", ref=REF)
    publish_artifact(b / "registry", make_artifact(problem="other"), ref=REF)
    git(b, "tag", "-a", "-m", "B's own v1", theirs.tag, "main")
    ours = git_tip(b, f"refs/tags/{theirs.tag}")

    code, out, err = cli("registry", "pull", *_reg(b))
    assert code == 0, err
    assert f"warning: pin tag {theirs.tag} exists here pointing elsewhere" in err
    assert f"tag {theirs.tag}" not in out
    assert git_tip(b, f"refs/tags/{theirs.tag}") == ours  # never overwritten


def test_checked_out_branch_pull_moves_the_worktree(
    cli: Run, bare: Path, machines: list[Path]
) -> None:
    a, b = machines[:2]
    theirs, mine = make_artifact(problem="theirs"), make_artifact(problem="mine")
    publish_artifact(a / "registry", theirs)  # main: checked out on every machine
    push_registry(a / "registry")
    code, out, err = cli("registry", "pull", "--registry", str(b / "registry"))
    assert code == 0, err
    assert "pulled 1 commit(s) from origin main" in out and "wrote" not in out
    assert (b / rel_of(theirs)).read_bytes() == encode(theirs)
    assert git(b, "status", "--porcelain") == "" and git_tip(b, "main") == git_tip(bare, "main")

    # an unpushed commit of B's is rebuilt; worktree and index follow, status stays clean
    publish_artifact(a / "registry", make_artifact(problem="later"))
    push_registry(a / "registry")
    publish_artifact(b / "registry", mine)
    result = pull_registry(b / "registry")
    assert result.checked_out and result.rebuilt == 1 and result.unpushed == 1
    assert (b / rel_of(make_artifact(problem="later"))).is_file()
    assert (b / rel_of(mine)).read_bytes() == encode(mine)
    assert git(b, "status", "--porcelain") == ""
    assert git_tip(b, "main~1") == git_tip(bare, "main")


def test_a_file_in_the_way_refuses_the_pull_with_nothing_changed(
    cli: Run, bare: Path, machines: list[Path]
) -> None:
    a, b = machines[:2]
    theirs = make_artifact(problem="theirs")
    publish_artifact(a / "registry", theirs, ref=REF)
    pin_artifact(a / "registry", parse_key(f"gemm/theirs/{DEVICE}"), "v1", ref=REF)
    push_registry(a / "registry", ref=REF)
    publish_artifact(b / "registry", make_artifact(problem="mine"), ref=REF)
    blocker = b / rel_of(theirs)  # a hand-written file where A's artifact would land
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("a person's notes\n")
    _pull_refused(
        cli,
        b,
        2,
        f"cannot pull {REF} from origin: {rel_of(theirs)} has bytes git does not hold",
        "move it away",
        "nothing changed here: 1 commit(s)",
    )

    blocker.unlink()
    code, _, err = cli("registry", "pull", *_reg(b))
    assert code == 0, err
    assert blocker.read_bytes() == encode(theirs)


def test_a_dirty_checkout_refuses_the_pull_with_nothing_changed(
    cli: Run, bare: Path, machines: list[Path]
) -> None:
    a, b = machines[:2]
    theirs = make_artifact(problem="theirs")
    publish_artifact(a / "registry", theirs)
    push_registry(a / "registry")
    blocker = b / rel_of(theirs)
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("a person's notes\n")
    _pull_refused(
        cli, b, 2, "commit or stash that change, then pull again", "nothing changed here", ref=False
    )
    assert git_tip(b, "main") == git_tip(b, "origin/main~1")


def test_a_newer_version_replaces_the_one_pulled_before(bare: Path, machines: list[Path]) -> None:
    """Bytes git already holds are an earlier version, not a local change: replaced."""
    a, b = machines[:2]
    publish_artifact(a / "registry", make_artifact(seed=1), ref=REF)
    push_registry(a / "registry", ref=REF)
    pull_registry(b / "registry", ref=REF)
    newer = make_artifact(seed=2)
    publish_artifact(a / "registry", newer, ref=REF)
    push_registry(a / "registry", ref=REF)
    result = pull_registry(b / "registry", ref=REF)
    assert result.gained == 1 and result.written == (f"gemm/sq4096/{DEVICE}",)
    assert (b / rel_of(newer)).read_bytes() == encode(newer)


def test_same_path_changed_on_both_sides_refuses_the_pull(
    cli: Run, bare: Path, machines: list[Path]
) -> None:
    a, b = machines[:2]
    publish_artifact(a / "registry", make_artifact(seed=1), ref=REF)
    push_registry(a / "registry", ref=REF)
    mine = make_artifact(seed=2)
    publish_artifact(b / "registry", mine, ref=REF)
    _pull_refused(
        cli,
        b,
        2,
        f"cannot pull {REF} from origin: {rel_of(mine)} was changed both here and on origin",
        f"ctune registry diff origin/{REF}:gemm/sq4096/{DEVICE} {REF}:gemm/sq4096/{DEVICE}",
        "nothing changed here: 1 commit(s)",
    )
    assert (b / rel_of(mine)).read_bytes() == encode(mine)


def test_an_unreachable_remote_is_one_line_exit_5_and_nothing_changes(
    cli: Run, bare: Path, machines: list[Path], tmp_path: Path
) -> None:
    a, b = machines[:2]
    publish_artifact(a / "registry", make_artifact(), ref=REF)
    push_registry(a / "registry", ref=REF)
    publish_artifact(b / "registry", make_artifact(problem="mine"), ref=REF)
    git(b, "remote", "set-url", "origin", str(tmp_path / "gone.git"))
    _pull_refused(
        cli,
        b,
        5,
        f"cannot pull {REF} from origin ({tmp_path / 'gone.git'}): no repository at that address",
        "then run `ctune registry pull` again",
        "nothing changed here: 1 commit(s) are kept locally",
    )


def test_no_remote_and_nothing_to_pull(cli: Run, bare: Path, machines: list[Path]) -> None:
    b = machines[1]
    code, out, err = cli("registry", "pull", *_reg(b))
    assert code == 0, err
    assert f"neither here nor origin has {REF}: nothing to pull" in out
    publish_artifact(b / "registry", make_artifact(), ref=REF)
    code, out, _ = cli("registry", "pull", *_reg(b))
    assert code == 0 and f"origin has no {REF}: nothing to pull" in out
    git(b, "remote", "remove", "origin")
    code, _, err = cli("registry", "pull", *_reg(b))
    assert code == 5
    one_line_error(err, "no remote origin", "`ctune registry pull`")


def test_a_rewritten_remote_is_not_pulled(cli: Run, bare: Path, machines: list[Path]) -> None:
    a, b = machines[:2]
    publish_artifact(a / "registry", make_artifact(problem="one"), ref=REF)
    publish_artifact(a / "registry", make_artifact(problem="two"), ref=REF)
    push_registry(a / "registry", ref=REF)
    pull_registry(b / "registry", ref=REF)
    git(bare, "update-ref", f"refs/heads/{REF}", f"refs/heads/{REF}~1")  # someone force-pushed
    for _ in range(2):  # it keeps saying so until a person accepts the rewrite
        _pull_refused(cli, b, 2, f"origin's {REF} was rewritten", "git update-ref -d", "pull again")


def test_only_artifact_paths_are_written_and_local_files_are_kept(
    cli: Run, bare: Path, machines: list[Path]
) -> None:
    a, b = machines[:2]
    theirs = make_artifact(problem="theirs")
    publish_artifact(a / "registry", theirs, ref=REF)
    with GitRegistry(a / "registry", REF) as reg:  # things on the ref that are not artifacts
        reg.commit_blobs(
            {
                "registry/notes.json": b"{}",
                "registry/README.md": b"the registry\n",
                "tools/run.json": b"{}",
            },
            "not artifacts",
        )
    push_registry(a / "registry", ref=REF)
    draft = make_artifact(problem="draft")  # written here, never committed
    publish_artifact(b / "registry", draft, commit=False)

    code, out, err = cli("registry", "pull", *_reg(b))
    assert code == 0, err
    assert "wrote 1 artifact file(s)" in out
    assert f"local-only {rel_of(draft)}: not on {REF}, kept" in out
    assert "warning: not written registry/notes.json" in err
    assert (b / rel_of(draft)).read_bytes() == encode(draft)
    assert not (b / "registry" / "notes.json").exists()
    assert not (b / "registry" / "README.md").exists() and not (b / "tools").exists()


def test_push_and_status_point_at_pull_when_the_folder_lags(
    cli: Run, bare: Path, machines: list[Path]
) -> None:
    """A push that rebuilt on another machine's commits leaves the folder as it was."""
    a, b = machines[:2]
    theirs = make_artifact(problem="theirs")
    publish_artifact(a / "registry", theirs, ref=REF)
    push_registry(a / "registry", ref=REF)
    publish_artifact(b / "registry", make_artifact(problem="mine"), ref=REF)
    code, out, err = cli("registry", "push", *_reg(b))
    assert code == 0, err
    assert "gained 1 commit(s) from origin" in out and "`ctune registry pull`" in out
    assert not (b / rel_of(theirs)).exists()
    code, out, _ = cli("registry", "status", *_reg(b))
    assert "the registry folder lacks 1 artifact file(s) of ctune/registry" in out
    code, out, _ = cli("registry", "pull", *_reg(b))
    assert code == 0 and "wrote 1 artifact file(s)" in out
    assert (b / rel_of(theirs)).read_bytes() == encode(theirs)
    code, out, _ = cli("registry", "status", *_reg(b))
    assert code == 0 and "registry folder" not in out
    # a push with nothing to share that fast-forwards the ref says so too
    later = make_artifact(problem="later")
    publish_artifact(a / "registry", later, ref=REF)
    push_registry(a / "registry", ref=REF)
    code, out, _ = cli("registry", "push", *_reg(b))
    assert code == 0 and "is up to date" in out and "gained 1 commit(s) from origin" in out
    assert not (b / rel_of(later)).exists()

"""Registry writes while the repository is in the middle of something.

A merge with a conflict (on the very file the import writes, or on another), a merge
waiting for its commit, a stopped rebase, cherry-pick, revert or ``git am``, a lock another
git process holds, a detached HEAD, a ``.git`` that points nowhere, a damaged object
store. A writer refuses each in one line (exit 2) and leaves the state as it found it:
``MERGE_HEAD`` and the other state files, the conflicted files and the index's unmerged
entries untouched, nothing committed.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from hostile_harness import ARTIFACT, RESULT, Case, Outcome, Project, case, tier
from hostile_setups import artifact_text, chain, edit_source

CASES: list[Case] = []
IMPORTED = "registry/saxpy/n1m/sm00-stand-in-not-a-gpu.json"  # where RESULT is imported to


def _result_variant(p: Project, seed: int) -> str:
    """The result file re-signed with another provenance seed: a valid artifact that
    differs from RESULT and from every other variant."""
    data = json.loads(p.path(RESULT).read_text())
    data["provenance"]["seed"] = seed
    return artifact_text(data)


def _diverge(
    rel: str, ours: Callable[[Project], str], theirs: Callable[[Project], str]
) -> Callable[[Project], None]:
    """Branch ``other`` commits ``theirs`` at ``rel``; main commits ``ours`` there."""

    def setup(p: Project) -> None:
        p.git("checkout", "-q", "-b", "other")
        p.write(rel, theirs(p))
        p.git("add", "-A", "--", rel)
        p.git("commit", "-q", "-m", "theirs")
        p.git("checkout", "-q", "main")
        p.write(rel, ours(p))
        p.git("add", "-A", "--", rel)
        p.git("commit", "-q", "-m", "ours")

    return setup


ON_IMPORTED = _diverge(IMPORTED, lambda p: _result_variant(p, 1), lambda p: _result_variant(p, 2))
ON_README = _diverge("README.md", lambda p: "ours\n", lambda p: "theirs\n")


def _run(*args: str) -> Callable[[Project], None]:
    def setup(p: Project) -> None:
        p.git(*args, check=False)

    return setup


def _state_kept(*names: str) -> Callable[[Project, Outcome], list[str]]:
    """The state files are still there, and the unmerged entries of the index with them."""

    def check(p: Project, o: Outcome) -> list[str]:
        git_dir = p.root / ".git"
        found = [f".git/{n} is gone" for n in names if not (git_dir / n).exists()]
        unmerged = p.git("ls-files", "-u")
        if "conflicted" in p.base.joinpath("state").read_text() and not unmerged.strip():
            found.append("the conflict was resolved behind the user's back (no unmerged entries)")
        return found

    return check


def _mark(state: str) -> Callable[[Project], None]:
    def setup(p: Project) -> None:
        p.base.joinpath("state").write_text(state)
        assert (state != "conflicted") or p.git("ls-files", "-u").strip(), "no conflict made"

    return setup


STATES: dict[str, tuple[Callable[[Project], None], tuple[str, ...]]] = {
    "merge-conflict-on-the-file": (
        chain(ON_IMPORTED, _run("merge", "-q", "other"), _mark("conflicted")),
        ("MERGE_HEAD",),
    ),
    "merge-conflict-elsewhere": (
        chain(ON_README, _run("merge", "-q", "other"), _mark("conflicted")),
        ("MERGE_HEAD",),
    ),
    "merge-not-committed": (
        chain(
            _diverge("other.txt", lambda p: "x\n", lambda p: "y\n"),
            _run("checkout", "-q", "main"),
            lambda p: (p.git("rm", "-q", "other.txt"), p.git("commit", "-q", "-m", "rm")),
            _run("merge", "-q", "--no-commit", "--no-ff", "other"),
            _mark("merging"),
        ),
        ("MERGE_HEAD",),
    ),
    "rebase-stopped-on-conflict": (
        chain(ON_IMPORTED, _run("rebase", "-q", "other"), _mark("conflicted")),
        ("rebase-merge",),
    ),
    "rebase-stopped-at-edit": (
        chain(
            ON_README,
            lambda p: p.git(
                "-c",
                "sequence.editor=sed -i s/^pick/edit/",
                "rebase",
                "-q",
                "-i",
                "HEAD~1",
                check=False,
            ),
            _mark("editing"),
        ),
        ("rebase-merge",),
    ),
    "cherry-pick-stopped": (
        chain(ON_IMPORTED, _run("cherry-pick", "other"), _mark("conflicted")),
        ("CHERRY_PICK_HEAD",),
    ),
    "revert-stopped": (
        chain(
            ON_README,
            lambda p: (p.write("README.md", "third\n"), p.git("commit", "-q", "-am", "third")),
            _run("revert", "--no-edit", "HEAD~1"),
            _mark("conflicted"),
        ),
        ("REVERT_HEAD",),
    ),
    "am-stopped": (
        chain(
            ON_README,
            lambda p: p.base.joinpath("patch").write_text(
                p.git("format-patch", "-1", "--stdout", "other")
            ),
            lambda p: p.git("am", "-q", str(p.base / "patch"), check=False),
            _mark("applying"),
        ),
        ("rebase-apply",),
    ),
}
for name, (setup, state_files) in STATES.items():
    CASES.append(
        case(
            f"{name}-import",
            "git",
            ["registry", "import", RESULT],
            2,
            setup=setup,
            check=_state_kept(*state_files),
        )
    )
# where the conflicted file is the one the import writes, writing it without a commit
# would resolve the conflict in the working tree just the same
for name in ("merge-conflict-on-the-file", "cherry-pick-stopped"):
    setup, state_files = STATES[name]
    CASES += [
        case(
            f"{name}-import-no-commit",
            "git",
            ["registry", "import", RESULT, "--no-commit"],
            2,
            setup=setup,
            check=_state_kept(*state_files),
        ),
        case(
            f"{name}-refresh",
            "git",
            ["registry", "refresh"],
            2,
            setup=chain(setup, edit_source),
            check=_state_kept(*state_files),
            progress=True,
        ),
        case(  # to a branch that is not checked out: no working-tree file is touched
            f"{name}-import-to-other-ref",
            "git",
            ["registry", "import", RESULT, "--ref", "ctune/registry"],
            (0, 2),
            setup=setup,
            check=_state_kept(*state_files),
            commits=True,
        ),
    ]


def _lock_released_after_1s(p: Project) -> None:
    """A lock another git process holds for a second: the import waits for it, then commits
    (waiting out the whole retry budget, 30 s, costs the tier too much)."""
    import subprocess

    lock = p.root / ".git" / "index.lock"
    lock.write_text("")
    subprocess.Popen(["sh", "-c", f"sleep 1; rm -f '{lock}'"], start_new_session=True)


def _dangling_gitdir(p: Project) -> None:
    import shutil

    shutil.rmtree(p.root / ".git")
    (p.root / ".git").write_text("gitdir: /nonexistent/repo.git\n")


def _lose_an_object(p: Project) -> None:
    tree = p.git("rev-parse", "HEAD^{tree}").strip()
    (p.root / ".git" / "objects" / tree[:2] / tree[2:]).unlink()


def _no_repository(p: Project) -> None:
    import shutil

    shutil.rmtree(p.root / ".git")


CASES += [
    case(
        "index-lock-held-for-1s-import",
        "git",
        ["registry", "import", RESULT],
        0,
        setup=_lock_released_after_1s,
        writes=("registry", ".git/index.lock"),
        commits=True,
        keeps=("registry",),
        timeout_s=20,
    ),
    case(
        "detached-head-import",
        "git",
        ["registry", "import", RESULT],
        2,
        setup=_run("checkout", "-q", "--detach"),
        keeps=("registry",),
    ),
    case("gitdir-nowhere-import", "git", ["registry", "import", RESULT], 2, setup=_dangling_gitdir),
    case(
        "object-missing-verify",
        "git",
        ["registry", "verify"],
        2,
        setup=_lose_an_object,
        progress=True,
    ),
    case("object-missing-import", "git", ["registry", "import", RESULT], 2, setup=_lose_an_object),
    case("no-repository-import", "git", ["registry", "import", RESULT], 2, setup=_no_repository),
    case(
        "no-repository-import-no-commit",
        "git",
        ["registry", "import", RESULT, "--no-commit"],
        0,
        setup=_no_repository,
        writes=("registry",),
    ),
    case(
        "artifact-deleted-in-worktree-import",
        "git",
        ["registry", "import", RESULT],
        (0, 2),
        setup=lambda p: p.path(ARTIFACT).unlink(),
        writes=("registry",),
        commits=True,
        check=lambda p, o: (
            []
            if p.git("ls-tree", "HEAD", "--", ARTIFACT).strip()
            else ["the import committed the user's unrelated deletion of the other artifact"]
        ),
    ),
]

test_git_states = tier(CASES)

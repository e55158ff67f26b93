"""A search's journal kept beside its artifact in the registry: committed with it, dropped
when it is no longer the artifact's, attached later, shown and verified. Real temporary git
repositories; the journals are stand-in bytes (the registry checks only their digest)."""

from __future__ import annotations

import dataclasses
import gzip
from pathlib import Path

import pytest
from registry_support import DEVICE, REF, Run, git, make_artifact, one_line_error, rel_of

from ctune.records import sha256_hex
from ctune.registry.journals import copies_for, find
from ctune.registry.layout import ArtifactKey
from ctune.registry.schema import Artifact
from ctune.registry.service import publish_artifact
from ctune.registry.store import write_result
from ctune.search.journal_copy import copy_path, pack

KEY = f"gemm/sq4096/{DEVICE}"
COPY = f"registry/gemm/sq4096/{DEVICE}.jsonl.gz"
JOURNAL = b'{"kind":"header","stand-in":"journal A"}\n{"kind":"trial"}\n'
OTHER = b'{"kind":"header","stand-in":"journal B"}\n'


def _of(journal: bytes) -> Artifact:
    return make_artifact(journal_sha256=sha256_hex(journal))


def _result(tmp_path: Path, artifact: Artifact, beside: bytes | None) -> Path:
    """A result file as ``ctune search`` leaves it: the journal's copy beside it."""
    path = write_result(artifact, tmp_path / "out" / "gemm-sq4096.json")
    if beside is not None:
        copy_path(path).write_bytes(pack(beside))
    return path


def _changed(repo: Path) -> list[str]:
    return sorted(git(repo, "show", "--name-only", "--format=", "HEAD").split())


def test_import_commits_the_copy_beside_the_result_with_the_artifact(
    cli: Run, repo: Path, registry: Path, tmp_path: Path
) -> None:
    a = _of(JOURNAL)
    result = _result(tmp_path, a, JOURNAL)
    code, out, err = cli("registry", "import", str(result), "--registry", str(registry))
    assert code == 0, err
    assert _changed(repo) == sorted([rel_of(a), COPY])  # one commit
    assert gzip.decompress((repo / COPY).read_bytes()) == JOURNAL
    assert "journal: kept " in out
    code, out, _ = cli("registry", "show", KEY, "--registry", str(registry))
    assert code == 0 and f"journal: {repo / COPY}" in out


def test_import_takes_a_journal_named_on_the_command_line(
    cli: Run, repo: Path, registry: Path, tmp_path: Path
) -> None:
    plain = tmp_path / "gemm-sq4096-20261130T000000Z.jsonl"
    plain.write_bytes(JOURNAL)
    result = _result(tmp_path, _of(JOURNAL), None)
    code, _, err = cli(
        "registry", "import", str(result), "--registry", str(registry), "--journal", str(plain)
    )
    assert code == 0, err
    assert gzip.decompress((repo / COPY).read_bytes()) == JOURNAL


def test_another_search_s_journal_is_not_kept_and_the_import_goes_on(
    cli: Run, repo: Path, registry: Path, tmp_path: Path
) -> None:
    a = _of(JOURNAL)
    result = _result(tmp_path, a, OTHER)
    code, out, err = cli("registry", "import", str(result), "--registry", str(registry))
    assert code == 0, err
    assert _changed(repo) == [rel_of(a)]
    assert "journal: journal sha256 " in out and "is another search's" in out
    code, out, _ = cli("registry", "show", KEY, "--registry", str(registry))
    assert "journal: not kept" in out


def test_a_copy_that_is_no_longer_the_artifact_s_goes_in_the_same_commit(
    repo: Path, registry: Path
) -> None:
    """Replaced by an artifact of another search whose journal is not at hand, the old
    copy is deleted with it: a copy beside an artifact is always that artifact's journal.
    Written again (a migrate, the same search), the copy stays."""
    a = _of(JOURNAL)
    publish_artifact(registry, a, journal=find(a, []))  # nothing found: no copy
    assert not (repo / COPY).exists()
    key = ArtifactKey("gemm", "sq4096", DEVICE)
    written = copies_for(registry, [(key, a)], (), {key: pack(JOURNAL)})
    assert list(written.write) == [f"gemm/sq4096/{DEVICE}.jsonl.gz"]
    publish_artifact(registry, a, journal=dataclasses.replace(find(a, []), data=pack(JOURNAL)))
    assert (repo / COPY).exists()
    again = publish_artifact(registry, a)
    assert again.commit is not None and not again.commit.changed  # still its journal
    assert (repo / COPY).exists()
    b = _of(OTHER)
    publish_artifact(registry, b)
    assert not (repo / COPY).exists()
    assert _changed(repo) == sorted([rel_of(b), COPY])  # the deletion is in the commit
    assert git(repo, "status", "--porcelain") == ""
    with pytest.raises(Exception, match="not the one its search wrote"):
        copies_for(registry, [(key, b)], (), {key: pack(JOURNAL)})


def test_journal_attaches_the_search_s_journal_later_and_refuses_another(
    cli: Run, repo: Path, registry: Path, tmp_path: Path
) -> None:
    a = _of(JOURNAL)
    publish_artifact(registry, a)
    head = git(repo, "rev-parse", "HEAD")
    other = tmp_path / "other.jsonl"
    other.write_bytes(OTHER)
    code, _, err = cli("registry", "journal", KEY, str(other), "--registry", str(registry))
    assert code == 2
    one_line_error(err, f"{other}: not the journal of {KEY}")
    assert git(repo, "rev-parse", "HEAD") == head and not (repo / COPY).exists()
    mine = tmp_path / "mine.jsonl.gz"  # a copy (from another registry, say) serves too
    mine.write_bytes(pack(JOURNAL))
    code, _, err = cli("registry", "journal", KEY, str(mine), "--registry", str(registry))
    assert code == 0, err
    assert _changed(repo) == [COPY]
    assert git(repo, "log", "-1", "--format=%s").strip() == (
        f"ctune: journal of gemm sq4096 {DEVICE}"
    )
    code, _, err = cli("registry", "journal", str(mine), KEY, "--registry", str(registry))
    assert code == 2
    one_line_error(err, "takes a registry KEY first")


def test_journal_names_a_file_it_cannot_read_as_such(
    cli: Run, repo: Path, registry: Path, tmp_path: Path
) -> None:
    """A missing or damaged file is not "another search's journal": its own line, exit 2,
    nothing committed."""
    publish_artifact(registry, _of(JOURNAL))
    head = git(repo, "rev-parse", "HEAD")
    damaged = tmp_path / "damaged.jsonl.gz"
    damaged.write_bytes(b"{\n")
    cases = {
        tmp_path / "missing.jsonl": "no such file",
        tmp_path: "a directory, not a regular file",
        damaged: "not a gzip journal copy",
    }
    for path, why in cases.items():
        code, _, err = cli("registry", "journal", KEY, str(path), "--registry", str(registry))
        assert code == 2
        one_line_error(err, f"journal {path}: {why}")
        assert "not the journal of" not in err
    assert git(repo, "rev-parse", "HEAD") == head and not (repo / COPY).exists()


def test_verify_fails_on_a_copy_that_is_not_the_artifact_s(
    cli: Run, repo: Path, registry: Path, tmp_path: Path
) -> None:
    a = _of(JOURNAL)
    publish_artifact(registry, a, journal=dataclasses.replace(find(a, []), data=pack(JOURNAL)))
    args = ("registry", "verify", "--no-fsck", "--registry", str(registry))
    args += ("--kernels", str(tmp_path / "no-specs"))
    code, out, err = cli(*args)
    assert code == 0, out + err
    (repo / COPY).write_bytes(pack(OTHER))
    code, out, _ = cli(*args)
    assert code == 2
    assert f"FAIL {KEY}: journal copy gemm/sq4096/{DEVICE}.jsonl.gz is not the journal" in out
    (repo / COPY).write_bytes(pack(JOURNAL)[:-9])  # truncated
    code, out, _ = cli(*args)
    assert code == 2 and "cannot be read" in out


def test_push_and_pull_carry_the_copy_to_a_folder_whose_ref_is_not_checked_out(
    machines: list[Path],
) -> None:
    """In the CI set-up the registry ref is checked out nowhere: pull writes the journal
    copies beside the artifacts it writes, and says how many."""
    from ctune.registry.remote import pull_registry, push_registry

    a = _of(JOURNAL)
    one, two = machines[0], machines[1]
    publish_artifact(
        one / "registry", a, ref=REF, journal=dataclasses.replace(find(a, []), data=pack(JOURNAL))
    )
    push_registry(one / "registry", ref=REF, remote="origin")
    pulled = pull_registry(two / "registry", ref=REF, remote="origin")
    assert pulled.journals_written == 1 and pulled.controls_written == 0
    copy = two / COPY
    assert gzip.decompress(copy.read_bytes()) == JOURNAL
    again = pull_registry(two / "registry", ref=REF, remote="origin")
    assert again.journals_written == 0  # already there: nothing to write

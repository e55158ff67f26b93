"""An artifact's controls files in the registry: published with it in one commit, shown,
verified, diffed, validated, carried by push and pull. Real temporary git repositories;
the controls files are stand-in bytes (a real one is NVIDIA's encrypted output)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from registry_support import (
    CONTROLS_BYTES,
    REF,
    Run,
    git,
    make_artifact,
    one_line_error,
    rel_of,
    with_controls,
)

from ctune.controls.store import NOTICE_TEXT, ControlsStore, StoreChain
from ctune.errors import RegistryError, UserError
from ctune.records import sha256_hex
from ctune.registry.layout import ArtifactKey
from ctune.registry.service import publish_artifact
from ctune.registry.store import ArtifactStore, write_result

KEY = "gemm/sq4096/sm90-nvidia-h100-80gb-hbm3"
DIGEST = sha256_hex(CONTROLS_BYTES)
FILE = f"controls/{DIGEST}.acf"


@pytest.fixture
def cache(tmp_path: Path) -> ControlsStore:
    """A search's store holding the controls file (``<cache_dir>/controls``)."""
    store = ControlsStore(tmp_path / "cache" / "controls")
    assert store.put(CONTROLS_BYTES) == DIGEST
    return store


def _chain(cache: ControlsStore, registry: Path) -> StoreChain:
    return StoreChain.of(cache.root, registry / "controls")


def _tracked(repo: Path) -> list[str]:
    return git(repo, "ls-files").split()


# --- publishing ----------------------------------------------------------------------


def test_publishing_commits_the_file_and_its_notice_with_the_artifact(
    repo: Path, registry: Path, cache: ControlsStore
) -> None:
    a = with_controls(make_artifact(), DIGEST)
    published = publish_artifact(registry, a, controls=_chain(cache, registry))
    assert published.commit is not None and published.commit.changed
    changed = git(repo, "show", "--name-only", "--format=", "HEAD").split()
    assert sorted(changed) == sorted(
        [rel_of(a), f"registry/{FILE}", "registry/controls/NOTICE"]
    )  # one commit: never an artifact without its file
    assert (registry / FILE).read_bytes() == CONTROLS_BYTES
    assert "© NVIDIA Corporation, 2026." in (registry / "controls" / "NOTICE").read_text()
    assert git(repo, "status", "--porcelain") == ""
    # published again (the file already there): nothing new, nothing changes
    again = publish_artifact(registry, a, controls=_chain(cache, registry))
    assert again.commit is not None and not again.commit.changed


def test_an_artifact_without_controls_commits_no_controls_folder(
    repo: Path, registry: Path, cache: ControlsStore
) -> None:
    publish_artifact(registry, make_artifact(), controls=_chain(cache, registry))
    assert not (registry / "controls").exists()
    assert _tracked(repo) == ["README.md", rel_of(make_artifact())]


def test_a_missing_file_refuses_the_publish_before_anything_is_written(
    repo: Path, registry: Path, tmp_path: Path
) -> None:
    empty = StoreChain.of(tmp_path / "cache" / "controls", registry / "controls")
    a = with_controls(make_artifact(), DIGEST)
    head = git(repo, "rev-parse", "HEAD")
    with pytest.raises(RegistryError) as caught:
        publish_artifact(registry, a, controls=empty)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{KEY}: member {a.pinned} is built with controls file {DIGEST}")
    assert str(tmp_path / "cache" / "controls") in message
    assert git(repo, "rev-parse", "HEAD") == head
    assert not registry.exists()  # neither the artifact nor a controls folder
    with pytest.raises(RegistryError):  # an uncommitted write refuses as well
        publish_artifact(registry, a, commit=False, controls=empty)
    assert not registry.exists()


def test_an_altered_file_in_the_search_store_is_refused(
    repo: Path, registry: Path, cache: ControlsStore
) -> None:
    cache.file(DIGEST).write_bytes(CONTROLS_BYTES + b"!")
    with pytest.raises(RegistryError, match="do not match its name"):
        publish_artifact(
            registry, with_controls(make_artifact(), DIGEST), controls=_chain(cache, registry)
        )
    assert not registry.exists()


def test_a_failed_commit_puts_the_controls_files_back(
    repo: Path, registry: Path, cache: ControlsStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctune.registry.git import GitRegistry

    def refuse(self: object, *args: object) -> None:
        raise RegistryError("the commit failed")

    monkeypatch.setattr(GitRegistry, "commit_blobs", refuse)
    with pytest.raises(RegistryError, match="the commit failed"):
        publish_artifact(
            registry, with_controls(make_artifact(), DIGEST), controls=_chain(cache, registry)
        )
    left = sorted(p.name for p in registry.rglob("*") if p.is_file()) if registry.exists() else []
    assert left == []


def test_import_takes_the_file_from_the_search_s_cache(
    cli: Run,
    repo: Path,
    registry: Path,
    cache: ControlsStore,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    result = write_result(with_controls(make_artifact(), DIGEST), tmp_path / "result.json")
    monkeypatch.delenv("CTUNE_CACHE_DIR", raising=False)  # .ctune here: it has no file
    for extra in ((), ("--no-commit",)):
        code, _, err = cli("registry", "import", str(result), "--registry", str(registry), *extra)
        assert code == 2
        one_line_error(err, f"is built with controls file {DIGEST}")
        assert not registry.exists()
    monkeypatch.setenv("CTUNE_CACHE_DIR", str(cache.root.parent))
    code, _, err = cli("registry", "import", str(result), "--registry", str(registry))
    assert code == 0, err
    assert f"registry/{FILE}" in _tracked(repo) and "registry/controls/NOTICE" in _tracked(repo)


def test_import_takes_the_file_from_beside_the_result(
    cli: Run, repo: Path, cache: ControlsStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = repo / "registry"
    from ctune.registry.controls import write_beside_result

    artifact = with_controls(make_artifact(), DIGEST)
    result = write_result(artifact, tmp_path / "elsewhere" / "result.json")
    written = write_beside_result(artifact, result, _chain(cache, registry))
    assert sorted(p.name for p in written) == sorted([f"{DIGEST}.acf", "NOTICE"])
    assert write_beside_result(make_artifact(), result, _chain(cache, registry)) == []
    monkeypatch.delenv("CTUNE_CACHE_DIR", raising=False)  # the search's cache is not here
    code, _, err = cli("registry", "import", str(result), "--registry", str(registry))
    assert code == 0, err
    assert (registry / FILE).read_bytes() == CONTROLS_BYTES
    assert f"registry/{FILE}" in _tracked(repo)


def test_import_without_commit_writes_the_files_too(
    cli: Run,
    repo: Path,
    registry: Path,
    cache: ControlsStore,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    result = write_result(with_controls(make_artifact(), DIGEST), tmp_path / "result.json")
    monkeypatch.setenv("CTUNE_CACHE_DIR", str(cache.root.parent))
    args = ("registry", "import", str(result), "--registry", str(registry), "--no-commit")
    code, _, err = cli(*args)
    assert code == 0, err
    assert (registry / FILE).read_bytes() == CONTROLS_BYTES
    assert (registry / "controls" / "NOTICE").read_text() == NOTICE_TEXT
    assert _tracked(repo) == ["README.md"]


def test_the_file_is_part_of_the_member_s_identity() -> None:
    """The digest is a gene value, so the member's key (and the artifact's digest) changes
    with the file; its flags name it, so the build key keys its content
    (tests/unit/compile/test_acf_argv.py checks the key)."""
    plain = make_artifact()
    one = with_controls(plain, DIGEST)
    other = with_controls(plain, sha256_hex(b"another file"))
    keys = {plain.front[0].key, one.front[0].key, other.front[0].key}
    assert len(keys) == 3
    assert len({plain.digest(), one.digest(), other.digest()}) == 3
    assert one.front[0].nvcc_flags[-2:] == ("-Xptxas", f"--apply-controls={FILE}")


# --- show, diff, verify, list ---------------------------------------------------------


def _published(registry: Path, cache: ControlsStore):  # type: ignore[no-untyped-def]
    a = with_controls(make_artifact(), DIGEST)
    publish_artifact(registry, a, controls=_chain(cache, registry))
    return a


def test_show_names_each_member_s_controls_file(
    cli: Run, registry: Path, cache: ControlsStore
) -> None:
    from ctune.registry.schema import encode, member_json

    a = _published(registry, cache)
    pinned = a.front[0]
    shown = f"{pinned.key}: ptxas {DIGEST[:12]} {len(CONTROLS_BYTES)} bytes {FILE}"
    code, out, err = cli("registry", "show", KEY, "--registry", str(registry))
    assert code == 0 and err == ""
    assert "controls files:" in out and shown in out
    assert a.front[1].key + ":" not in out  # only the members built with one
    code, out, _ = cli("registry", "show", f"{KEY}@pinned", "--registry", str(registry))
    assert f"controls file: ptxas {DIGEST[:12]} {len(CONTROLS_BYTES)} bytes {FILE}" in out
    code, out, _ = cli("registry", "show", f"{KEY}@pinned", "--json", "--registry", str(registry))
    data = json.loads(out)
    assert data.pop("controls") == [
        {
            "compiler": "ptxas",
            "digest": DIGEST,
            "path": FILE,
            "size_bytes": len(CONTROLS_BYTES),
            "state": "ok",
        }
    ]
    assert data == member_json(pinned)
    code, out, _ = cli("registry", "show", KEY, "--json", "--registry", str(registry))
    assert out.encode() == encode(a)  # the artifact's own file: it imports as it is
    (registry / FILE).unlink()
    code, out, _ = cli("registry", "show", KEY, "--registry", str(registry))
    assert code == 0 and f"{FILE} (MISSING in the registry)" in out


def test_verify_checks_every_referenced_file(
    cli: Run, registry: Path, cache: ControlsStore, tmp_path: Path
) -> None:
    a = _published(registry, cache)
    args = ("registry", "verify", "--no-fsck", "--registry", str(registry))
    args += ("--kernels", str(tmp_path / "no-specs"))
    code, out, err = cli(*args)
    assert code == 0, out + err
    (registry / FILE).write_bytes(CONTROLS_BYTES[:-1])
    code, out, err = cli(*args)
    assert code == 2
    assert f"FAIL {KEY}: member {a.pinned}: controls file {FILE} does not match its digest" in out
    one_line_error(err, "registry verification failed")
    (registry / FILE).unlink()
    code, out, _ = cli(*args)
    assert code == 2 and f"FAIL {KEY}: member {a.pinned}: controls file {FILE} is missing" in out
    (registry / FILE).write_bytes(CONTROLS_BYTES)
    (registry / "controls" / "NOTICE").unlink()
    code, out, _ = cli(*args)
    assert code == 2 and "FAIL controls/NOTICE is missing" in out


def test_diff_shows_a_controls_change_as_a_gene_change(
    cli: Run, registry: Path, cache: ControlsStore
) -> None:
    plain = make_artifact()
    publish_artifact(registry, plain)
    git(registry.parent, "tag", "before")
    publish_artifact(registry, with_controls(plain, DIGEST), controls=_chain(cache, registry))
    code, out, err = cli("registry", "diff", f"before:{KEY}", KEY, "--registry", str(registry))
    assert code == 0, err
    assert f"  ~ pinned gene acf_ptxas: (none) -> {DIGEST} (controls file)" in out
    other = sha256_hex(b"another file")
    cache.put(b"another file")
    publish_artifact(registry, with_controls(plain, other), controls=_chain(cache, registry))
    code, out, _ = cli("registry", "diff", f"HEAD~1:{KEY}", KEY, "--registry", str(registry))
    assert f"  ~ pinned gene acf_ptxas: {DIGEST} -> {other} (controls file)" in out


def test_list_is_unchanged_and_odd_entries_in_the_folder_are_refused(
    cli: Run, registry: Path, cache: ControlsStore
) -> None:
    _published(registry, cache)
    code, out, err = cli("registry", "list", "--registry", str(registry))
    assert code == 0 and err == "" and out.startswith(f"{KEY}  front=2") and "controls" not in out
    folder = registry / "controls"
    (folder / "README.md").write_text("hello\n")
    (folder / "sub").mkdir()
    (folder / "sub" / "x.json").write_text("{}")
    os.symlink("/etc/passwd", folder / f"{'e' * 64}.acf")
    os.mkfifo(folder / f"{'f' * 64}.acf")
    (folder / ".tmp-write").write_bytes(b"")  # an atomic write's temporary: passed over
    code, out, err = cli("registry", "list", "--registry", str(registry))
    assert code == 0 and out.startswith(f"{KEY}  front=2")
    quarantined = [ln for ln in err.splitlines() if "quarantined" in ln]
    assert len(quarantined) == 4, err
    assert any("README.md" in q and "<sha256>.acf files and NOTICE" in q for q in quarantined)
    assert any("controls/sub" in q and "a folder in controls/" in q for q in quarantined)
    assert any(f"{'e' * 64}.acf" in q and "symlink" in q for q in quarantined)
    assert any(f"{'f' * 64}.acf" in q and "a FIFO" in q for q in quarantined)


def test_a_kernel_may_not_be_called_controls() -> None:
    with pytest.raises(UserError, match="kernel 'controls' is reserved"):
        ArtifactKey("controls", "sq4096", "sm90-nvidia-h100-80gb-hbm3")
    with pytest.raises(RegistryError, match="reserved"):
        publish_artifact(Path("/nonexistent"), make_artifact(kernel="controls"), commit=False)


# --- push and pull ----------------------------------------------------------------------


def test_push_and_pull_carry_the_files(machines: list[Path], bare: Path, tmp_path: Path) -> None:
    """The files are in the registry's tree: a push carries them, a pull brings them into
    the folder, whether the registry ref is checked out (git moves the worktree) or not (the
    folder sync writes them)."""
    from ctune.registry.remote import pull_registry, push_registry

    cache = ControlsStore(tmp_path / "cache" / "controls")
    cache.put(CONTROLS_BYTES)
    a = with_controls(make_artifact(), DIGEST)
    one, two, three = machines[0], machines[1], machines[2]
    publish_artifact(one / "registry", a, controls=_chain(cache, one / "registry"))
    push_registry(one / "registry", remote="origin")
    names = git(bare, "ls-tree", "-r", "--name-only", "main").split()
    assert f"registry/{FILE}" in names and "registry/controls/NOTICE" in names
    pull_registry(two / "registry", remote="origin")  # main is checked out there
    assert (two / "registry" / FILE).read_bytes() == CONTROLS_BYTES
    # the CI set-up: the registry ref is checked out nowhere
    publish_artifact(one / "registry", a, ref=REF, controls=_chain(cache, one / "registry"))
    push_registry(one / "registry", ref=REF, remote="origin")
    pulled = pull_registry(three / "registry", ref=REF, remote="origin")
    assert pulled.controls_written == 2  # the file and its NOTICE
    assert (three / "registry" / FILE).read_bytes() == CONTROLS_BYTES
    assert (three / "registry" / "controls" / "NOTICE").read_text() == NOTICE_TEXT
    key = ArtifactKey("gemm", "sq4096", "sm90-nvidia-h100-80gb-hbm3")
    assert ArtifactStore(three / "registry").read(key) == a

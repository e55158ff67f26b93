"""``ctune registry migrate --rename OLD=NEW``: names moved, digests carried only where
verified, one commit, nothing half-written; ``ctune check`` says after what it said before."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from registry_support import (
    DEVICE,
    FINGERPRINT,
    Run,
    built_saxpy_artifact,
    git,
    init_repo,
    make_artifact,
    one_line_error,
)

from ctune.compile.deps import closure_sha256, file_sha256
from ctune.errors import RegistryError, UserError
from ctune.evidence.identity import spec_part_fields
from ctune.records import Candidate
from ctune.registry.git import GitRegistry
from ctune.registry.layout import ArtifactKey
from ctune.registry.rename import NewSpec, parse_renames, plan_renames, rename_artifact
from ctune.registry.schema import Artifact
from ctune.registry.service import publish_artifact, rename_registry
from ctune.registry.store import ArtifactStore
from ctune.spec import load_spec

DATA = Path(__file__).parents[2] / "data" / "kernels"
HEADER = "include/helper.h"  # a closure entry that is not the source: never relabelled


def _write_kernel(folder: Path, name: str, source: bytes) -> None:
    """``<name>.yaml`` (saxpy's spec naming its source) and ``<name>.cu``."""
    text = (DATA / "saxpy.yaml").read_text()
    text = text.replace("name: saxpy\n", f"name: {name}\nsource: {name}.cu\n", 1)
    (folder / f"{name}.yaml").write_text(text)
    (folder / f"{name}.cu").write_bytes(source)


def _rename_on_disk(folder: Path, old: str, new: str) -> None:
    """What the lead does in the repository: the spec and source files and the spec's
    name renamed, contents unchanged."""
    spec = (folder / f"{old}.yaml").read_text()
    spec = spec.replace(f"name: {old}\n", f"name: {new}\n").replace(
        f"source: {old}.cu\n", f"source: {new}.cu\n"
    )
    (folder / f"{old}.yaml").unlink()
    (folder / f"{new}.yaml").write_text(spec)
    (folder / f"{old}.cu").rename(folder / f"{new}.cu")


@pytest.fixture
def kernels(tmp_path: Path) -> Path:
    folder = tmp_path / "kernels"
    folder.mkdir()
    shutil.copy(DATA / "saxpy_ref.py", folder / "saxpy_ref.py")
    _write_kernel(folder, "saxpy", (DATA / "saxpy.cu").read_bytes())
    return folder


def _recorded(kernels: Path, kernel: str = "saxpy", problem: str = "n1m") -> Artifact:
    """An artifact as a search of today's ``kernel`` spec records it: its closure (the
    source and a header), the source digest over it, the spec's digests; one of its
    members named under ``extensions`` as a search's controls verdict names it."""
    spec = load_spec(kernels / f"{kernel}.yaml")
    closure = {f"{kernel}.cu": file_sha256(spec.source_path), HEADER: "d" * 64}
    a = make_artifact(kernel, problem)
    fingerprint = {
        **FINGERPRINT,
        **spec_part_fields(spec, problem),
        "kernel_source_sha256": closure_sha256(closure),
    }
    verdict = {"member": a.front[1].key, "reference": "0123456789abcdef"}
    return dataclasses.replace(
        a,
        fingerprint=fingerprint,
        inputs={"closure": closure},
        extensions={"search": {"controls": verdict}},
    )


def _new(kernels: Path, name: str) -> NewSpec:
    return NewSpec.of(load_spec(kernels / f"{name}.yaml"))


# --- the pure rename ------------------------------------------------------------


def test_names_move_and_every_digest_is_carried_when_only_names_changed(kernels: Path) -> None:
    before = _recorded(kernels)
    _rename_on_disk(kernels, "saxpy", "axpy")
    new = _new(kernels, "axpy")
    r = rename_artifact(before, new)
    after = r.artifact
    assert (r.before, r.after) == (
        ArtifactKey("saxpy", "n1m", DEVICE),
        ArtifactKey("axpy", "n1m", DEVICE),
    )
    assert after.kernel == "axpy"
    for old, m in zip(
        (*before.front, before.baseline), (*after.front, after.baseline), strict=True
    ):
        assert m.candidate == Candidate.of("axpy", old.candidate.as_dict())
        assert m.key == m.candidate.key() != old.key
        assert (m.values, m.sass_sha256, m.samples_ms) == (
            old.values,
            old.sass_sha256,
            old.samples_ms,
        )
    assert after.pinned == after.front[0].key  # the same member as before
    controls = after.extensions["search"]["controls"]
    assert controls == {"member": after.front[1].key, "reference": "0123456789abcdef"}
    closure = after.inputs["closure"]
    assert closure == {"axpy.cu": file_sha256(kernels / "axpy.cu"), HEADER: "d" * 64}
    assert after.fingerprint["kernel_source_sha256"] == closure_sha256(closure)
    today = spec_part_fields(new.spec, "n1m")
    assert {k: after.fingerprint[k] for k in today} == today
    # the build and space digests did change with the names; they were carried, not kept
    assert before.fingerprint["spec_build_sha256"] != today["spec_build_sha256"]
    assert before.fingerprint["spec_space_sha256"] != today["spec_space_sha256"]
    assert set(r.carried) == {
        "closure",
        "kernel_source_sha256",
        "spec_build_sha256",
        "spec_space_sha256",
    }
    assert r.kept == ()
    untouched = ("problem", "device_class", "objectives", "provenance", "protocol")
    assert all(getattr(after, f) == getattr(before, f) for f in untouched)


def test_a_source_that_changed_too_carries_no_closure_nor_build_digest(kernels: Path) -> None:
    before = _recorded(kernels)
    _rename_on_disk(kernels, "saxpy", "axpy")
    with (kernels / "axpy.cu").open("a") as fh:
        fh.write("// edited\n")
    r = rename_artifact(before, _new(kernels, "axpy"))
    assert r.artifact.inputs == before.inputs  # labels and digests as recorded
    for name in ("kernel_source_sha256", "spec_build_sha256"):
        assert r.artifact.fingerprint[name] == before.fingerprint[name]
    assert r.carried == ("spec_space_sha256",)  # only the name is in it
    assert any(k.startswith("closure: no recorded file has axpy.cu's content") for k in r.kept)
    assert any(k.startswith("spec_build_sha256: the old source file name") for k in r.kept)


def test_a_spec_changed_beyond_the_names_keeps_that_digest(kernels: Path) -> None:
    before = _recorded(kernels)
    _rename_on_disk(kernels, "saxpy", "axpy")
    spec = kernels / "axpy.yaml"
    spec.write_text(spec.read_text().replace("(test kernel)", "(renamed test kernel)"))
    r = rename_artifact(before, _new(kernels, "axpy"))
    assert r.artifact.fingerprint["spec_space_sha256"] == before.fingerprint["spec_space_sha256"]
    assert "spec_space_sha256: the spec differs beyond the names" in r.kept
    assert "spec_build_sha256" in r.carried and "closure" in r.carried


def test_a_source_digest_that_was_not_of_the_recorded_closure_is_kept(kernels: Path) -> None:
    before = _recorded(kernels)
    before = dataclasses.replace(
        before, fingerprint={**before.fingerprint, "kernel_source_sha256": "a" * 64}
    )
    _rename_on_disk(kernels, "saxpy", "axpy")
    r = rename_artifact(before, _new(kernels, "axpy"))
    assert "closure" in r.carried and "axpy.cu" in r.artifact.inputs["closure"]
    assert r.artifact.fingerprint["kernel_source_sha256"] == "a" * 64
    assert "kernel_source_sha256: not the digest of the recorded closure" in r.kept


def test_a_spec_file_renamed_without_its_source_needs_no_relabel(kernels: Path) -> None:
    before = _recorded(kernels)
    spec = (kernels / "saxpy.yaml").read_text().replace("name: saxpy\n", "name: axpy\n")
    (kernels / "saxpy.yaml").unlink()
    (kernels / "axpy.yaml").write_text(spec)  # still `source: saxpy.cu`
    r = rename_artifact(before, _new(kernels, "axpy"))
    assert r.artifact.inputs == before.inputs
    assert r.carried == ("spec_space_sha256",) and r.kept == ()


@pytest.mark.parametrize(
    ("texts", "needle"),
    [
        (["gemm"], "expected OLD=NEW"),
        (["=gemm"], "expected OLD=NEW"),
        (["a=b=c"], "expected OLD=NEW"),
        (["gemm=gemm"], "renames gemm to itself"),
        (["a=c", "b=c"], "both become c"),
        (["a=b", "a=c"], "a is renamed twice"),
        (["a=../b"], "is not allowed"),
    ],
)
def test_bad_renames_are_refused(texts: list[str], needle: str) -> None:
    with pytest.raises(UserError, match=needle.replace(".", r"\.")):
        parse_renames(texts)


def test_renames_are_one_mapping() -> None:
    mapping = parse_renames(["gemm=hand_gemm", "cutlass_gemm=gemm"])
    assert mapping == {"gemm": "hand_gemm", "cutlass_gemm": "gemm"}


def test_plan_refuses_a_kernel_without_artifacts_and_an_occupied_place(kernels: Path) -> None:
    a = _recorded(kernels)
    _rename_on_disk(kernels, "saxpy", "axpy")
    specs = {"axpy": _new(kernels, "axpy")}
    listed = [(r.before, a) for r in [rename_artifact(a, specs["axpy"])]]
    with pytest.raises(UserError, match="no artifact of gemm"):
        plan_renames(listed, {"gemm": "axpy"}, specs)
    staying = make_artifact("axpy", "n1m")
    occupied = [*listed, (ArtifactKey("axpy", "n1m", DEVICE), staying)]
    with pytest.raises(UserError, match=f"axpy/n1m/{DEVICE} already holds an artifact of axpy"):
        plan_renames(occupied, {"saxpy": "axpy"}, specs)
    assert [r.after.kernel for r in plan_renames(listed, {"saxpy": "axpy"}, specs)] == ["axpy"]


# --- the registry write: one commit, all or nothing -------------------------------


def _tree(repo: Path) -> list[str]:
    return sorted(git(repo, "ls-tree", "-r", "--name-only", "HEAD", "--", "registry").split())


def test_a_swap_is_one_commit_and_leaves_no_file_behind(kernels: Path, tmp_path: Path) -> None:
    """x and y trade names (as gemm and cutlass_gemm do): y's artifacts move into the
    place x's leave, in the same commit; an artifact of another kernel stays."""
    source = (DATA / "saxpy.cu").read_bytes()
    _write_kernel(kernels, "x", source)
    _write_kernel(kernels, "y", source + b"// the other kernel\n")
    repo = init_repo(tmp_path / "project")
    registry = repo / "registry"
    x, y = _recorded(kernels, "x"), _recorded(kernels, "y")
    y_ragged = _recorded(kernels, "y", "ragged")
    for a in (x, y, y_ragged, make_artifact("other", "n1m")):
        publish_artifact(registry, a)
    head = git(repo, "rev-parse", "HEAD").strip()
    _rename_on_disk(kernels, "x", "tmp")
    _rename_on_disk(kernels, "y", "x")
    _rename_on_disk(kernels, "tmp", "y")
    specs = {"x": _new(kernels, "x"), "y": _new(kernels, "y")}
    done = rename_registry(registry, {"x": "y", "y": "x"}, specs)
    assert done.commit is not None
    assert git(repo, "rev-parse", "HEAD~1").strip() == head  # one commit
    assert _tree(repo) == [
        f"registry/other/n1m/{DEVICE}.json",
        f"registry/x/n1m/{DEVICE}.json",
        f"registry/x/ragged/{DEVICE}.json",
        f"registry/y/n1m/{DEVICE}.json",
    ]
    assert git(repo, "status", "--porcelain") == ""  # worktree and index agree with it
    assert (
        git(repo, "log", "-1", "--format=%s").strip()
        == "ctune: rename x -> y, y -> x (3 artifact(s))"
    )
    store = ArtifactStore(registry)
    moved = store.read(ArtifactKey("x", "ragged", DEVICE))
    assert moved.baseline.samples_ms == y_ragged.baseline.samples_ms
    assert moved.inputs["closure"]["x.cu"] == y_ragged.inputs["closure"]["y.cu"]
    for r in done.renamed:
        assert r.kept == () and "kernel_source_sha256" in r.carried
    assert store.read(ArtifactKey("y", "n1m", DEVICE)).inputs == {
        "closure": {"y.cu": x.inputs["closure"]["x.cu"], HEADER: "d" * 64}
    }


def test_a_journal_kept_beside_an_artifact_moves_with_it(kernels: Path, tmp_path: Path) -> None:
    """The copy of the search's journal is the artifact's still: it moves in the same
    commit, none is left at the old name."""
    from ctune.records import sha256_hex
    from ctune.registry.journals import Found
    from ctune.search.journal_copy import pack

    journal = b'{"kind":"header","stand-in":"x"}\n'
    repo = init_repo(tmp_path / "project")
    registry = repo / "registry"
    x = dataclasses.replace(_recorded(kernels), provenance={"journal_sha256": sha256_hex(journal)})
    publish_artifact(registry, x, journal=Found(pack(journal), "kept"))
    _rename_on_disk(kernels, "saxpy", "axpy")
    rename_registry(registry, {"saxpy": "axpy"}, {"axpy": _new(kernels, "axpy")})
    assert _tree(repo) == [
        f"registry/axpy/n1m/{DEVICE}.json",
        f"registry/axpy/n1m/{DEVICE}.jsonl.gz",
    ]
    assert (registry / "axpy" / "n1m" / f"{DEVICE}.jsonl.gz").read_bytes() == pack(journal)
    assert git(repo, "status", "--porcelain") == ""


def test_a_rename_whose_commit_fails_writes_nothing(
    kernels: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = init_repo(tmp_path / "project")
    registry = repo / "registry"
    publish_artifact(registry, _recorded(kernels))
    head = git(repo, "rev-parse", "HEAD").strip()
    files = {p: p.read_bytes() for p in registry.rglob("*.json")}
    _rename_on_disk(kernels, "saxpy", "axpy")

    def refuse(*args: object, **kw: object) -> None:
        raise RegistryError("disk full (test)")

    monkeypatch.setattr(GitRegistry, "commit_blobs", refuse)
    with pytest.raises(RegistryError, match="disk full"):
        rename_registry(registry, {"saxpy": "axpy"}, {"axpy": _new(kernels, "axpy")})
    assert {p: p.read_bytes() for p in registry.rglob("*.json")} == files
    assert git(repo, "rev-parse", "HEAD").strip() == head
    assert not (registry / "axpy").exists() or not any((registry / "axpy").rglob("*.json"))


def test_an_unreadable_file_of_a_kernel_concerned_refuses_the_rename(
    kernels: Path, tmp_path: Path
) -> None:
    repo = init_repo(tmp_path / "project")
    registry = repo / "registry"
    publish_artifact(registry, _recorded(kernels))
    broken = registry / "saxpy" / "ragged" / f"{DEVICE}.json"
    broken.parent.mkdir()
    broken.write_text("{")
    _rename_on_disk(kernels, "saxpy", "axpy")
    with pytest.raises(RegistryError, match="mend it before renaming"):
        rename_registry(registry, {"saxpy": "axpy"}, {"axpy": _new(kernels, "axpy")})
    assert not (registry / "axpy").exists()


# --- the command ----------------------------------------------------------------


@pytest.mark.nvcc
def test_the_command_dry_run_json_and_refusals(cli: Run, kernels: Path, tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "project")
    registry = repo / "registry"
    publish_artifact(registry, _recorded(kernels))
    publish_artifact(registry, make_artifact("other", "n1m"))
    head = git(repo, "rev-parse", "HEAD").strip()
    where = ("--registry", str(registry), "--kernels", str(kernels))

    code, _, err = cli("registry", "migrate", "--rename", "saxpy=axpy", *where)
    assert code == 2
    one_line_error(err, "--rename saxpy=axpy", "axpy.yaml")  # NEW has no spec yet
    _rename_on_disk(kernels, "saxpy", "axpy")
    for args, needle in (
        (["--rename", "saxpy"], "expected OLD=NEW"),
        (["--rename", "axpy=axpy"], "to itself"),
        (["--rename", "saxpy=axpy", "--rename", "other=axpy"], "both become axpy"),
        (["--rename", "missing=axpy"], "no artifact of missing"),
    ):
        code, _, err = cli("registry", "migrate", *args, *where)
        assert code == 2, (args, err)
        one_line_error(err, needle)
    shutil.copy(kernels / "axpy.yaml", kernels / "other2.yaml")
    code, _, err = cli("registry", "migrate", "--rename", "saxpy=other2", *where)
    assert code == 2
    one_line_error(err, "other2.yaml is named 'axpy'")

    code, out, err = cli("registry", "migrate", "--rename", "saxpy=axpy", "--dry-run", *where)
    assert code == 0, err
    assert f"would move saxpy/n1m/{DEVICE} -> axpy/n1m/{DEVICE}: carried closure" in out
    code, out, _ = cli(
        "registry", "migrate", "--rename", "saxpy=axpy", "--format", "json", "--dry-run", *where
    )
    import json

    doc = json.loads(out)
    assert doc["dry_run"] is True and doc["commit"] is None
    assert doc["renamed"][0]["from"] == f"saxpy/n1m/{DEVICE}"
    assert "spec_build_sha256" in doc["renamed"][0]["carried"]
    assert git(repo, "rev-parse", "HEAD").strip() == head  # the dry runs wrote nothing
    assert (registry / "saxpy").is_dir() and not (registry / "axpy").exists()

    code, out, err = cli("registry", "migrate", "--rename", "saxpy=axpy", *where)
    assert code == 0, err
    assert "committed" in out and not (registry / "saxpy").exists()
    # the name is taken now: renaming another kernel onto it is refused
    code, _, err = cli("registry", "migrate", "--rename", "other=axpy", *where)
    assert code == 2
    one_line_error(err, f"axpy/n1m/{DEVICE} already holds an artifact of axpy")


# --- against the real nvcc: ``ctune check`` before and after ----------------------


@pytest.mark.nvcc
@pytest.mark.parametrize("edited", [False, True], ids=["renamed", "renamed-and-edited"])
def test_check_gives_the_same_verdict_after_the_rename(
    kernels: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edited: bool
) -> None:
    monkeypatch.setenv("CTUNE_CACHE_DIR", str(tmp_path / "cache"))
    repo = init_repo(tmp_path / "project")
    registry = repo / "registry"
    publish_artifact(registry, built_saxpy_artifact(kernels, tmp_path / "cache"))

    def ctune(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "ctune", *args, "--kernels", str(kernels)]
        argv += ["--registry", str(registry)]
        env = {k: v for k, v in os.environ.items() if k != "CTUNE_REGISTRY"}
        return subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env=env)

    if edited:  # a comment: the closure changes, the SASS does not
        with (kernels / "saxpy.cu").open("a") as fh:
            fh.write("// edited\n")
    done = ctune("check", "--no-gpu", "-v")
    assert done.returncode == 0, done.stdout + done.stderr
    verdict = "WARN" if edited else "fresh"
    assert f"{verdict} saxpy/n1m/" in done.stdout
    assert ("rebuilt 2 member(s): SASS identical" in done.stdout) == edited

    _rename_on_disk(kernels, "saxpy", "axpy")
    done = ctune("registry", "migrate", "--rename", "saxpy=axpy")
    assert done.returncode == 0, done.stdout + done.stderr
    assert ("kept as recorded: closure" in done.stdout) == edited
    done = ctune("check", "--no-gpu", "-v")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{verdict} axpy/n1m/" in done.stdout and "saxpy" not in done.stdout.replace(
        "saxpy.cu", ""
    )
    # renamed only: nothing to rebuild; edited too: the rebuild it needed before, no more
    assert ("rebuilt 2 member(s): SASS identical" in done.stdout) == edited
    # the build digest is carried only when the source was verified unchanged
    assert ("spec_build_sha256" in done.stdout) == edited
    assert "spec_space_sha256" not in done.stdout


def test_a_long_rename_names_its_pairs_in_the_body_not_the_subject() -> None:
    from ctune.registry.service import rename_message

    mapping = {
        "gemm": "hand_gemm",
        "cutlass_gemm": "gemm",
        "attention": "hand_attention",
        "cutlass_attention": "attention",
    }
    subject, _, body = rename_message(mapping, 114).partition("\n\n")
    assert subject == "ctune: rename 4 kernels (114 artifact(s))"
    assert body.strip() == ", ".join(f"{a} -> {b}" for a, b in mapping.items())

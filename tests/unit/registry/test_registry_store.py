"""Artifact files on disk: atomic writes, quarantine, symlinks, wrong places."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from registry_support import make_artifact

from ctune.errors import RegistryError, UserError
from ctune.registry.layout import parse_key
from ctune.registry.schema import encode
from ctune.registry.store import ArtifactStore, read_result, write_result


def test_write_then_read(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "reg")
    a = make_artifact()
    path = store.write(a)
    assert path == (tmp_path / "reg/gemm/sq4096/sm90-nvidia-h100-80gb-hbm3.json").resolve()
    assert store.read(parse_key("gemm/sq4096/sm90-nvidia-h100-80gb-hbm3")) == a
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary left over


def test_missing_artifact_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(RegistryError, match="no artifact gemm/x/y"):
        ArtifactStore(tmp_path).read(parse_key("gemm/x/y"))


def test_listing_quarantines_bad_files_and_goes_on(tmp_path: Path) -> None:
    root = tmp_path / "reg"
    store = ArtifactStore(root)
    good = store.write(make_artifact(problem="good"))
    flipped = store.write(make_artifact(problem="flipped"))
    flipped.write_bytes(flipped.read_bytes().replace(b'"seed": 7', b'"seed": 9'))
    moved = root / "gemm" / "elsewhere" / good.name
    moved.parent.mkdir()
    moved.write_bytes(encode(make_artifact(problem="somewhere")))
    (root / "gemm" / "stray.json").write_text("{}")
    (root / "gemm" / "README.md").write_text("not an artifact")
    (root / "gemm" / "good" / ".x.json.tmp-1-ab").write_text("partial")
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, root / "gemm" / "linked")
    os.symlink(good, root / "gemm" / "good" / "sm90-link.json")

    listing = store.list()
    assert [str(k) for k, _ in listing.artifacts] == ["gemm/good/sm90-nvidia-h100-80gb-hbm3"]
    messages = {Path(q.path).relative_to(root).as_posix(): q.message for q in listing.quarantined}
    assert "digest mismatch" in messages["gemm/flipped/" + flipped.name]
    assert "is stored as gemm/elsewhere" in messages["gemm/elsewhere/" + moved.name]
    assert "not at <kernel>" in messages["gemm/stray.json"]
    assert "symlink" in messages["gemm/linked"]
    assert "symlink" in messages["gemm/good/sm90-link.json"]
    assert len(messages) == 5


def test_reads_refuse_symlinks(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "reg")
    real = store.write(make_artifact())
    target = tmp_path / "elsewhere.json"
    real.rename(target)
    os.symlink(target, real)
    with pytest.raises(RegistryError, match="symlink"):
        store.read(parse_key("gemm/sq4096/sm90-nvidia-h100-80gb-hbm3"))
    with pytest.raises(RegistryError, match="symlink"):
        store.write(make_artifact(problem="sq4096"))  # never writes through a link


def test_size_cap_before_reading(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "reg")
    path = store.write(make_artifact())
    with path.open("r+b") as fh:
        fh.truncate(17 * 1024 * 1024)
    with pytest.raises(RegistryError, match="cap"):
        store.read(parse_key("gemm/sq4096/sm90-nvidia-h100-80gb-hbm3"))


def test_result_files_round_trip(tmp_path: Path) -> None:
    a = make_artifact()
    path = write_result(a, tmp_path / "out" / "result.json")
    assert read_result(path) == a


def test_atomic_replace_keeps_old_or_new(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "reg")
    store.write(make_artifact(seed=1))
    store.write(make_artifact(seed=2))
    got = store.read(parse_key("gemm/sq4096/sm90-nvidia-h100-80gb-hbm3"))
    assert got.provenance["seed"] == 2


def test_a_folder_of_someone_elses_json_is_not_a_registry(tmp_path: Path) -> None:
    root = tmp_path / "project"
    (root / "node" / "pkg").mkdir(parents=True)
    (root / "node" / "pkg" / "package.json").write_text('{"name": "x", "version": "1"}')
    (root / "config.json").write_text("{}")
    deep = root / "a" / "b" / "c" / "d"
    deep.mkdir(parents=True)
    (deep / "x.json").write_text("{}")  # below the layout's three levels: never read
    with pytest.raises(RegistryError, match=r"project: not a ctune registry: none of its 3 "):
        ArtifactStore(root).list()


def test_an_emptied_artifact_is_damaged_not_foreign(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "reg")
    path = store.write(make_artifact())
    path.write_text("{}")
    listing = store.list()
    assert not listing.artifacts and [q.path for q in listing.quarantined] == [str(path)]
    path.write_text('{"kernel": "gemm", "front": [')  # truncated mid-write
    assert [q.path for q in store.list().quarantined] == [str(path)]


def test_select_takes_keys_kernels_and_patterns_each_once_in_order(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "reg")
    for kernel, problem, device in [
        ("gemm", "sq4096", "sm90-nvidia-h200"),
        ("gemm", "t128", "sm90-nvidia-h200"),
        ("gemm", "t128", "sm90-nvidia-h100-80gb-hbm3"),
        ("gemm2", "sq4096", "sm90-nvidia-h200"),
        ("attn", "s1024-causal", "sm90-nvidia-h200"),
    ]:
        store.write(make_artifact(kernel, problem, device))

    def names(*texts: str) -> list[str]:
        return [str(k) for k, _ in store.select(texts).artifacts]

    assert names("gemm/*/sm90-nvidia-h200") == [
        "gemm/sq4096/sm90-nvidia-h200",
        "gemm/t128/sm90-nvidia-h200",
    ]
    assert names("gemm") == names("gemm/") == names("gemm/*")  # not gemm2
    assert len(names("gemm")) == 3
    assert names("gemm/t128") == [
        "gemm/t128/sm90-nvidia-h100-80gb-hbm3",
        "gemm/t128/sm90-nvidia-h200",
    ]
    assert names("attn/s1024-causal/sm90-nvidia-h200@pinned", "*causal*", "gemm2/[s]*") == [
        "attn/s1024-causal/sm90-nvidia-h200",  # a key comes back without its member, once
        "gemm2/sq4096/sm90-nvidia-h200",
    ]
    with pytest.raises(UserError, match=r"no artifact matches '\*h100\*-bf16'.*registry list"):
        store.select(["*h100*-bf16"])
    with pytest.raises(UserError, match="no artifact matches 'gem'"):
        store.select(["gem"])
    with pytest.raises(RegistryError, match="no artifact gemm/x/y"):
        store.select(["gemm/x/y"])

"""Pins: annotated tags carrying the digest; immutable; SSH-signed and verified when configured."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from registry_support import git, make_artifact

from ctune.errors import RegistryError, UserError
from ctune.registry.layout import parse_key
from ctune.registry.service import (
    load_pinned,
    pin_artifact,
    publish_artifact,
    verify_registry,
)
from ctune.registry.store import ArtifactStore

KEY = parse_key("gemm/sq4096/sm90-nvidia-h100-80gb-hbm3")
TAG = "ctune/pin/v1/gemm/sq4096/sm90-nvidia-h100-80gb-hbm3"


def test_pin_tags_the_commit_holding_the_artifact(repo: Path, registry: Path) -> None:
    a = make_artifact()
    publish_artifact(registry, a)
    pin = pin_artifact(registry, KEY, "v1")
    assert pin.tag == TAG and pin.member == a.pinned and not pin.signed
    assert pin.digest == a.digest()
    assert git(repo, "cat-file", "-t", TAG).strip() == "tag"  # annotated
    message = git(repo, "tag", "-l", "--format=%(contents)", TAG)
    assert f"digest: sha256:{a.digest()}" in message and f"candidate: {a.pinned}" in message
    assert git(repo, "rev-parse", f"{TAG}^{{commit}}").strip() == pin.commit
    got, member = load_pinned(registry, KEY, "v1")
    assert got == a and member == a.pinned
    assert git(repo, "status", "--porcelain") == ""


def test_pins_are_immutable(repo: Path, registry: Path) -> None:
    publish_artifact(registry, make_artifact())
    pin_artifact(registry, KEY, "v1")
    with pytest.raises(RegistryError, match="immutable"):
        pin_artifact(registry, KEY, "v1")


def test_pinning_another_member_commits_the_change_first(repo: Path, registry: Path) -> None:
    a = make_artifact()
    publish_artifact(registry, a)
    other = a.front[1].key
    pin = pin_artifact(registry, parse_key(f"{KEY}@{other}"), "v2")
    assert pin.member == other
    assert ArtifactStore(registry).read(KEY).pinned == other
    assert load_pinned(registry, KEY, "v2")[0].pinned == other
    assert git(repo, "log", "-1", "--format=%s").startswith("ctune: pin gemm sq4096")


def test_dirty_source_and_bad_names_are_refused(repo: Path, registry: Path) -> None:
    publish_artifact(registry, make_artifact(source_dirty=True))
    with pytest.raises(RegistryError, match="uncommitted kernel source"):
        pin_artifact(registry, KEY, "v1")
    for release in ("../v1", "V1", "v1.lock", "a..b", "-x", "v 1", "v1/x"):
        with pytest.raises(UserError):
            pin_artifact(registry, KEY, release)
    assert git(repo, "tag", "-l") == ""


def test_no_pinned_member_says_how_to_name_one(repo: Path, registry: Path) -> None:
    publish_artifact(registry, make_artifact(pinned=False))
    with pytest.raises(UserError, match="name one with @KEY"):
        pin_artifact(registry, KEY, "v1")


def test_verify_detects_tampering(repo: Path, registry: Path) -> None:
    publish_artifact(registry, make_artifact())
    pin_artifact(registry, KEY, "v1")
    report = verify_registry(registry)
    assert report.ok and report.artifacts == 1 and report.fsck_ok
    assert report.pins[0].notes == ("signature not checked (gpg.ssh.allowedSignersFile not set)",)
    # a hand-made tag with a wrong digest
    commit = git(repo, "rev-parse", "HEAD").strip()
    fake = f"x\n\ndigest: sha256:{'0' * 64}\ncandidate: {make_artifact().pinned}\n"
    git(
        repo,
        "tag",
        "-a",
        "-m",
        fake,
        "ctune/pin/evil/gemm/sq4096/sm90-nvidia-h100-80gb-hbm3",
        commit,
    )
    report = verify_registry(registry)
    assert not report.ok
    bad = [p for p in report.pins if p.problems]
    assert [p.tag for p in bad] == ["ctune/pin/evil/gemm/sq4096/sm90-nvidia-h100-80gb-hbm3"]
    assert "digest does not match" in bad[0].problems[0]


def test_verify_detects_rewritten_history(repo: Path, registry: Path) -> None:
    publish_artifact(registry, make_artifact())
    pin_artifact(registry, KEY, "v1")
    git(repo, "reset", "-q", "--hard", "HEAD~1")  # the pinned commit leaves the branch
    report = verify_registry(registry)
    assert any("not an ancestor" in p for p in report.pins[0].problems)


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen not installed")
def test_ssh_signed_pins_verify_and_unsigned_fail(
    repo: Path, registry: Path, tmp_path: Path
) -> None:
    key = tmp_path / "signing_key"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ci", "-f", str(key)], check=True
    )
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(f"author@example.com {key.with_suffix('.pub').read_text()}")
    publish_artifact(registry, make_artifact())
    git(repo, "config", "gpg.format", "ssh")
    git(repo, "config", "user.signingkey", str(key))
    pin = pin_artifact(registry, KEY, "v1")
    assert pin.signed
    git(repo, "config", "gpg.ssh.allowedSignersFile", str(allowed))
    report = verify_registry(registry)
    assert report.ok, report.pins
    # an unsigned pin fails once signatures are being checked
    git(repo, "config", "--unset", "user.signingkey")
    pin_artifact(registry, KEY, "v2")
    report = verify_registry(registry)
    failed = {p.tag: p.problems for p in report.pins if p.problems}
    assert list(failed) == [TAG.replace("/v1/", "/v2/")]
    assert "signature not verified" in failed[TAG.replace("/v1/", "/v2/")][0]

"""Names, keys and paths: the allowlist, and nothing ever escapes the root."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

import pytest
from registry_support import make_artifact

from ctune.errors import CtuneError, UserError
from ctune.registry.layout import (
    ArtifactKey,
    contained_path,
    parse_key,
    parse_pin_tag,
    pin_tag,
    validate_name,
)
from ctune.registry.service import publish_artifact
from ctune.registry.store import ArtifactStore

HOSTILE = [
    "",
    ".",
    "..",
    "...",
    "../x",
    "x/..",
    "x/../y",
    "/etc",
    "/",
    "//",
    "a/b",
    "a\\b",
    "..\\x",
    "x\x00y",
    "\x00",
    "x\ny",
    "x\r",
    "x\t",
    "x y",
    " x",
    "x ",
    "tab\tname",
    "Gemm",
    "GEMM",
    "gEmm",
    "x.Lock",
    "ÄBC",
    "gémm",
    "ｇemm",
    "ⅰ",
    "k\u200bx",
    "x\u202ey",
    "ı",
    "ß",
    "ﬁ",
    "x" * 65,
    "a" * 1000,
    "-leading",
    "_leading",
    ".hidden",
    ".git",
    ".gitmodules",
    "x.lock",
    "refs.lock",
    "a..b",
    "x.",
    "x..",
    "con",
    "nul",
    "aux",
    "prn",
    "com1",
    "lpt9",
    "con.txt",
    "git",
    "head",
    "HEAD",
    "@",
    "@{u}",
    "x@{1}",
    "x@y",
    "x~1",
    "x^",
    "x^{}",
    "x:y",
    "x?",
    "x*",
    "x[",
    "x]",
    "x\\",
    "~",
    "~root",
    "$HOME",
    "${x}",
    "`id`",
    "$(id)",
    "x;rm",
    "x|y",
    "x&y",
    "x>y",
    "x<y",
    "'x'",
    '"x"',
    "x%00",
    "%2e%2e",
    "x#",
    "x!",
    "x,y",
    "x=y",
    "x+y",
    "\x7f",
    "x\x1b[31m",
    "\ufeffx",
    "x\u0301",
    "🙂",
    "x/",
    "/x",
    "C:\\x",
    "c:",
    "x\x85",
    "x\u2028y",
    "a/../../etc/passwd",
    "....//",
    "..%2f",
    "\\\\server\\share",
    "nested/deep/name",
]


def test_there_are_at_least_100_hostile_names() -> None:
    assert len(set(HOSTILE)) >= 100


@pytest.mark.parametrize("name", HOSTILE, ids=[ascii(n)[:30] for n in HOSTILE])
def test_hostile_names_are_rejected(name: str) -> None:
    with pytest.raises(UserError):
        validate_name(name)
    with pytest.raises(UserError):
        ArtifactKey(name, "p", "d")
    with pytest.raises(UserError):
        pin_tag(name, ArtifactKey("k", "p", "d"))


@pytest.mark.parametrize(
    "name",
    [
        "gemm",
        "a",
        "0",
        "sq4096",
        "llm8b-qkv-t128",
        "v1.4.2",
        "sm90-nvidia-h100-80gb-hbm3",
        "x_y",
        "a" * 64,
    ],
)
def test_good_names_pass(name: str) -> None:
    assert validate_name(name) == name


def _snapshot(root: Path) -> set[str]:
    return {str(p) for p in root.rglob("*")}


def test_hostile_names_write_nothing_anywhere(repo: Path, registry: Path) -> None:
    before = _snapshot(repo.parent)
    for name in HOSTILE:
        for fields in ({"kernel": name}, {"problem": name}, {"device_class": name}):
            artifact = make_artifact(**fields)
            with pytest.raises(CtuneError):
                publish_artifact(registry, artifact)
            with pytest.raises(CtuneError):
                ArtifactStore(registry).write(artifact)
    after = _snapshot(repo.parent)
    # only git's own bookkeeping may appear (the flock file and the registry dir)
    new = {p for p in after - before if ".git" not in Path(p).parts and p != str(registry)}
    assert new == set()
    assert not any(Path(p).name.endswith(".json") for p in after)


def test_key_syntax_round_trip() -> None:
    key = parse_key("gemm/sq4096/sm90-nvidia-h100-80gb-hbm3@0123456789abcdef")
    assert (key.kernel, key.problem, key.device_class, key.member) == (
        "gemm",
        "sq4096",
        "sm90-nvidia-h100-80gb-hbm3",
        "0123456789abcdef",
    )
    assert str(key) == "gemm/sq4096/sm90-nvidia-h100-80gb-hbm3@0123456789abcdef"
    assert key.relpath() == PurePosixPath("gemm/sq4096/sm90-nvidia-h100-80gb-hbm3.json")
    assert parse_key("a/b/c@pinned").member == "pinned"
    assert parse_key("a/b/c").member is None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "a/b",
        "a/b/c/d",
        "a/b/c@",
        "a/b/c@XYZ",
        "a/b/c@0123",
        "a/b/c@latest",
        "a//c",
        "/a/b/c",
        "a/b/c@0123456789ABCDEF",
        "a/b/c@@pinned",
    ],
)
def test_bad_keys(text: str) -> None:
    with pytest.raises(UserError):
        parse_key(text)


def test_contained_path_refuses_symlinks_and_escapes(tmp_path: Path) -> None:
    root = tmp_path / "reg"
    (root / "k").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, root / "k" / "p")
    with pytest.raises(UserError, match="symlink"):
        contained_path(root, PurePosixPath("k/p/d.json"))
    for rel in ("../x.json", "/etc/passwd", "k/../../x.json", "k/.."):
        with pytest.raises(UserError):
            contained_path(root, PurePosixPath(rel))
    assert contained_path(root, PurePosixPath("k/q/d.json")) == root.resolve() / "k/q/d.json"


def test_pin_tag_round_trip() -> None:
    key = ArtifactKey("gemm", "sq4096", "sm90-h100")
    tag = pin_tag("v1.2", key)
    assert tag == "ctune/pin/v1.2/gemm/sq4096/sm90-h100"
    assert parse_pin_tag(tag) == ("v1.2", key)
    with pytest.raises(UserError):
        parse_pin_tag("ctune/pin/v1/gemm/sq4096")

"""ControlsStore and StoreChain: files by content, atomic, checked on every read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ctune.controls.store import (
    NOTICE_TEXT,
    ControlsError,
    ControlsStore,
    StoreChain,
    applied_digest,
    registry_relative,
)
from ctune.errors import UserError
from ctune.files import MAX_CONTROLS_BYTES
from ctune.records import sha256_hex

DATA = b"\x8f\x01 encrypted controls \x00\xff" * 40


def test_put_names_the_file_by_its_sha256_and_is_idempotent(tmp_path: Path) -> None:
    store = ControlsStore(tmp_path / "controls")
    digest = store.put(DATA)
    assert digest == sha256_hex(DATA)
    assert store.put(DATA) == digest
    assert store.path(digest) == tmp_path / "controls" / f"{digest}.acf"
    assert store.read(digest) == DATA
    assert store.has(digest) and store.digests() == [digest]
    # no scratch file left behind; the licence's notice is there
    assert sorted(p.name for p in (tmp_path / "controls").iterdir()) == ["NOTICE", f"{digest}.acf"]
    assert "© NVIDIA Corporation, 2026." in (tmp_path / "controls" / "NOTICE").read_text()
    assert "© NVIDIA Corporation, 2026." in NOTICE_TEXT


def test_a_file_changed_after_it_was_stored_is_refused_and_put_repairs_it(
    tmp_path: Path,
) -> None:
    store = ControlsStore(tmp_path)
    digest = store.put(DATA)
    store.file(digest).write_bytes(b"tampered")
    with pytest.raises(ControlsError, match="do not match its name") as caught:
        store.path(digest)
    assert "\n" not in str(caught.value)
    assert store.put(DATA) == digest
    assert store.read(digest) == DATA


@pytest.mark.parametrize(
    ("data", "why"),
    [(b"", "empty"), (b"x" * (MAX_CONTROLS_BYTES + 1), "limit")],
)
def test_put_refuses_what_is_not_a_controls_file(tmp_path: Path, data: bytes, why: str) -> None:
    with pytest.raises(ControlsError, match=why):
        ControlsStore(tmp_path).put(data)
    assert not list(tmp_path.glob("*.acf"))


def test_put_file_reads_through_the_input_rule(tmp_path: Path) -> None:
    user = tmp_path / "mine.acf"
    user.write_bytes(DATA)
    store = ControlsStore(tmp_path / "store")
    assert store.put_file(user) == sha256_hex(DATA)
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(UserError, match=r"FIFO|not a regular file"):
        store.put_file(tmp_path / "fifo")  # refused, not waited on
    with pytest.raises(UserError, match="no such file"):
        store.put_file(tmp_path / "missing.acf")


def test_an_empty_user_file_is_refused_naming_the_file_and_the_option(tmp_path: Path) -> None:
    empty = tmp_path / "empty.acf"
    empty.write_bytes(b"")
    store = ControlsStore(tmp_path / "store")
    with pytest.raises(ControlsError) as caught:
        store.put_file(empty, "--acf-file")
    assert str(caught.value) == (
        f"--acf-file {empty}: an empty file is not a controls file; give one CompileIQ wrote "
        "(a .acf file)"
    )
    with pytest.raises(ControlsError, match=rf"^controls file {empty}: an empty file"):
        store.put_file(empty)
    with pytest.raises(UserError, match=rf"^--acf-file {tmp_path / 'missing.acf'}: no such file"):
        store.put_file(tmp_path / "missing.acf", "--acf-file")
    assert not store.digests()


def test_an_unwritable_store_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(ControlsError, match="cannot store") as caught:
        ControlsStore(blocker / "controls").put(DATA)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("bad", ["A" * 64, "a" * 63, "../../etc/passwd", "none"])
def test_a_digest_is_64_lower_case_hex(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ControlsError, match="sha256"):
        ControlsStore(tmp_path).path(bad)
    assert not ControlsStore(tmp_path).has(bad)


def test_the_chain_finds_a_file_in_order_and_names_every_folder_when_none_holds_it(
    tmp_path: Path,
) -> None:
    search, registry = ControlsStore(tmp_path / "s"), ControlsStore(tmp_path / "r")
    in_registry = registry.put(DATA)
    in_both = registry.put(b"both")
    search.put(b"both")
    chain = StoreChain.of(tmp_path / "s", tmp_path / "r")
    assert chain.path(in_registry) == registry.file(in_registry)
    assert chain.path(in_both) == search.file(in_both)
    missing = sha256_hex(b"nowhere")
    with pytest.raises(ControlsError) as caught:
        chain.path(missing, "gemm: acf_ptxas")
    message = str(caught.value)
    assert missing in message and str(tmp_path / "s") in message and str(tmp_path / "r") in message
    assert message.startswith("gemm: acf_ptxas:") and "\n" not in message


def test_argv_items_name_the_stored_file_by_digest() -> None:
    digest = sha256_hex(DATA)
    assert applied_digest(f"--apply-controls=/any/where/{digest}.acf") == digest
    assert applied_digest(f"--apply-controls=controls/{digest}.acf") == digest
    assert applied_digest("--apply-controls=/tmp/mine.acf") is None
    assert applied_digest(f"-DX=/a/{digest}.acf") is None
    assert registry_relative(digest) == f"controls/{digest}.acf"


def test_a_full_disk_is_left_to_the_command_line_s_one_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    import ctune.controls.store as store_module

    def full(path: Path, data: bytes | str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(store_module, "write_atomic", full)
    with pytest.raises(OSError) as caught:
        ControlsStore(tmp_path).put(DATA)
    assert caught.value.errno == errno.ENOSPC and not isinstance(caught.value, UserError)

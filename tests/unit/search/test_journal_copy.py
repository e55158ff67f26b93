"""The registry's copy of a journal: packed the same way every time, read like the journal,
and refused in one line when it is damaged or unpacks past the limit."""

from __future__ import annotations

import gzip
from pathlib import Path, PurePosixPath

import pytest

from ctune.errors import UserError
from ctune.search import journal as journal_mod
from ctune.search.journal_copy import artifact_path, copy_path, pack, registry_copies, unpack

DATA = Path(__file__).parents[2] / "data" / "journals"


def test_the_copy_is_named_after_the_artifact_file() -> None:
    assert copy_path(Path("r/gemm/sq4096/sm90-x.json")) == Path("r/gemm/sq4096/sm90-x.jsonl.gz")
    assert copy_path(PurePosixPath("gemm/p/d.json")) == PurePosixPath("gemm/p/d.jsonl.gz")
    assert artifact_path(PurePosixPath("gemm/p/d.jsonl.gz")) == PurePosixPath("gemm/p/d.json")


def test_a_journal_packs_to_the_same_bytes_and_reads_back_as_itself(tmp_path: Path) -> None:
    journal = next(DATA.glob("*.jsonl"))
    data = journal.read_bytes()
    assert pack(data) == pack(data)  # no time or name in the gzip header: one git blob
    copy = tmp_path / "gemm" / "p" / "d.jsonl.gz"
    copy.parent.mkdir(parents=True)
    copy.write_bytes(pack(data))
    assert journal_mod.read_bytes(copy) == data
    assert journal_mod.read_header(copy) == journal_mod.read_header(journal)
    assert journal_mod.read(copy)[0].trials == journal_mod.read(journal)[0].trials
    assert registry_copies(tmp_path, "gemm") == [copy]
    assert registry_copies(tmp_path, "other") == []


def test_a_damaged_or_oversized_copy_is_one_clear_error(tmp_path: Path) -> None:
    data = b'{"kind":"header"}\n' * 100
    with pytest.raises(UserError, match="a truncated gzip journal copy"):
        unpack(pack(data)[:-12], "c", 1 << 20)
    with pytest.raises(UserError, match="not a gzip journal copy"):
        unpack(b"plain text", "c", 1 << 20)
    bomb = gzip.compress(b"\n" * (1 << 20))
    with pytest.raises(UserError, match="unpacks to more than the 4096-byte limit"):
        unpack(bomb, "c", 4096)
    broken = tmp_path / "j.jsonl.gz"
    broken.write_bytes(b"\x1f\x8b broken")
    with pytest.raises(UserError, match=f"journal {broken}: not a gzip journal copy"):
        journal_mod.read_header(broken)

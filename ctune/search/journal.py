"""The append-only search journal: one fsync'd JSON line per finished trial.

The journal is the search's evidence and what ``--resume`` continues from, so a crash or
Ctrl-C loses at most the trial in flight (rule R7), a torn last line is cut off before
anything is appended, and any other damage is one error naming the file and line, never
a guess. The format (records, optional keys, resume rules) is docs/journal-format.md.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import io
import json
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from ctune import locking
from ctune.errors import UserError
from ctune.files import InputFileError, open_regular, read_capped
from ctune.records import Measurement, Trial, sha256_hex, to_json
from ctune.search import journal_copy
from ctune.search import journal_records as records
from ctune.search.journal_records import FIX, ConfirmationRound, JournalRecordError
from ctune.spec.space.params import Space
from ctune.writes import naming

if TYPE_CHECKING:
    from filelock import BaseFileLock

log = logging.getLogger(__name__)

#: the largest journal read: about 60x the biggest seen (400 evaluations, 8 MiB); a
#: trial line is 2-20 KiB, so this holds some 25,000 trials or more
MAX_JOURNAL_BYTES = 512 << 20
#: the longest line read: a trial at the worker's 5000-sample cap is about 120 KiB
MAX_LINE_BYTES = 16 << 20

#: 2: the fingerprint (one identity rule with the artifacts) replaced spec/source digests
JOURNAL_FORMAT = 2
#: formats read for plots, exports and reports (format 1 had no fingerprint: not resumable)
READABLE_FORMATS = (1, 2)
#: header fields that must match exactly on resume, in the order they are checked
IDENTITY_FIELDS = ("kernel", "problem", "space", "objectives", "device")


def space_identity(space: Space) -> dict[str, Any]:
    """The genome as the journal records it: genes with values and defaults, restrictions."""
    return {
        "genes": [
            {"name": g.name, "values": list(g.values), "default": g.default} for g in space.genes
        ],
        "restrictions": [r.source for r in space.restrictions],
        "derived": [[name, expr.source] for name, expr in space.derived],
    }


def utc_stamp(now: _dt.datetime | None = None) -> str:
    return (now or _dt.datetime.now(_dt.UTC)).strftime("%Y%m%dT%H%M%SZ")


def default_path(cache_dir: Path, kernel: str, problem: str, stamp: str | None = None) -> Path:
    """``<cache_dir>/journals/<kernel>-<problem>-<timestamp>.jsonl`` (never an existing file)."""
    folder = Path(cache_dir) / "journals"
    base = f"{kernel}-{problem}-{stamp or utc_stamp()}"
    path = folder / f"{base}.jsonl"
    n = 2
    while path.exists():
        path = folder / f"{base}-{n}.jsonl"
        n += 1
    return path


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    if len(text) > 60:
        return f"{text[:40]}... (sha256 {sha256_hex(text)[:12]})"
    return text


def check_identity(path: Path, stored: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """One UserError naming the first identity field that differs; soft changes returned.

    ``fingerprint`` is compared field by field with :func:`ctune.evidence.identity.diff`:
    hard and build changes refuse, soft ones come back as notes for the caller.
    """
    from ctune.evidence import identity as fp

    for name in IDENTITY_FIELDS:
        if name not in current:
            continue  # not known yet (the device, before anything was measured)
        if stored.get(name) != current[name]:
            raise UserError(
                f"{path}: cannot resume: the journal's {name} differs from this search's "
                f"(journal: {_short(stored.get(name))}; now: {_short(current[name])}); "
                "start a new search without --resume"
            )
    if "fingerprint" not in current:
        return []
    now = current["fingerprint"]
    changes = fp.diff(stored.get("fingerprint") or {}, now, set(now))
    for change in changes:
        if change.severity != fp.SOFT:
            raise UserError(
                f"{path}: cannot resume: {change.name} changed since the journal was started "
                f"({_short(change.old)} -> {_short(change.new)}; {change.severity}); its "
                "trials were built and measured before that: start a new search without --resume"
            )
    return [
        f"{c.name} changed since the journal ({_short(c.old)} -> {_short(c.new)})" for c in changes
    ]


@dataclass
class Replay:
    """What a journal holds: its header, trials in order, and strategy states."""

    header: dict[str, Any]
    trials: list[Trial] = field(default_factory=list)
    states: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    dropped_tail: bool = False
    fillers: set[str] = field(default_factory=set)  # candidate keys of filler trials
    elapsed_s: list[float | None] = field(default_factory=list)  # per trial, when recorded
    same_binary: dict[str, str] = field(default_factory=dict)  # key -> key it reused
    lines: list[int] = field(default_factory=list)  # per trial, its line in the file
    line_of: dict[str, int] = field(default_factory=dict)  # candidate key -> its trial's line
    rounds: list[ConfirmationRound] = field(default_factory=list)  # confirmation, in order

    @property
    def last_elapsed_s(self) -> float:
        """Where a resumed session's clock continues from."""
        return max((t for t in self.elapsed_s if t is not None), default=0.0)


def where(path: Path, line: int) -> str:
    """How a message names one line of a journal."""
    return f"journal {path} line {line}"


def is_journal_path(path: Path | str) -> bool:
    """Named as a journal: a search's ``.jsonl``, or the registry's gzip copy of one
    (``.jsonl.gz``, ``journal_copy``), which every reader of a journal reads."""
    path = Path(path)
    return path.name.endswith(".jsonl") or journal_copy.is_copy(path)


def read_bytes(path: Path) -> bytes:
    """A journal's bytes: a journal file, or the registry's gzip copy of one
    (``journal_copy``), each capped."""
    if journal_copy.is_copy(path):
        packed = read_capped(path, journal_copy.MAX_COPY_BYTES, "journal copy")
        return journal_copy.unpack(packed, f"journal {path}", MAX_JOURNAL_BYTES)
    return read_capped(path, MAX_JOURNAL_BYTES, "journal")


def _open(path: Path) -> BinaryIO:
    """A journal to read line by line: the file itself, or a copy's unpacked bytes."""
    if journal_copy.is_copy(path):
        return io.BytesIO(read_bytes(path))
    return os.fdopen(open_regular(path, MAX_JOURNAL_BYTES, "journal"), "rb")


def _lines(path: Path) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, its bytes without the newline, whether it ended with one) of each line
    of a regular file of at most MAX_JOURNAL_BYTES, no line read past MAX_LINE_BYTES."""
    total = 0
    try:
        with _open(path) as handle:
            number = 0
            while raw := handle.readline(MAX_LINE_BYTES + 1):
                number += 1
                total += len(raw)
                ended = raw.endswith(b"\n")
                if not ended and len(raw) > MAX_LINE_BYTES:
                    raise JournalRecordError(
                        f"{where(path, number)}: longer than {MAX_LINE_BYTES} bytes, which no "
                        f"record is; {FIX}"
                    )
                if total > MAX_JOURNAL_BYTES:  # it grew while being read
                    raise InputFileError(
                        "journal", path, f"larger than the {MAX_JOURNAL_BYTES}-byte limit"
                    )
                yield number, raw[:-1] if ended else raw, ended
    except OSError as exc:
        raise InputFileError("journal", path, f"cannot read ({exc.strerror})") from None


def _parse(raw: bytes) -> dict[str, Any]:
    record = json.loads(raw.decode("utf-8"))
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    return record


def _not_a_journal(path: Path) -> UserError:
    return UserError(
        f"journal {path}: not a ctune journal (its first line is no journal header); "
        "give the file a search wrote (it prints the path when it starts)"
    )


def _header(path: Path, record: dict[str, Any]) -> dict[str, Any]:
    if record.get("kind") != "header":
        raise _not_a_journal(path)
    if record.get("format") not in READABLE_FORMATS:
        raise UserError(
            f"journal {path}: format {record.get('format')!r}; this ctune reads "
            f"{', '.join(map(str, READABLE_FORMATS))} (a newer ctune wrote it, or it is "
            "damaged): start a new search"
        )
    records.checked(where(path, 1), records.check_header, record)
    return record


def read(path: Path) -> tuple[Replay, int]:
    """Parse and check a journal; returns (contents, byte length of its intact part).

    A torn last line (a crash mid-write) is left out and marked ``dropped_tail``; any
    other damage is one UserError naming the line. Torn means without its newline: the
    writer writes each record and its newline in one go, so a crash leaves a prefix of
    it, and a line that ends in one was written whole, however it reads now."""
    path = Path(path)
    parsed: list[tuple[int, dict[str, Any]]] = []
    good_end = 0
    dropped = False
    for number, raw, ended in _lines(path):
        if not ended:  # the last line, whole JSON or not: the write stopped before its end
            dropped = True
            break
        try:
            record = _parse(raw)
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise JournalRecordError(
                f"{where(path, number)}: not a journal record ({exc}); {FIX}"
            ) from None
        parsed.append((number, record))
        good_end += len(raw) + 1
    if not parsed:
        raise _not_a_journal(path)
    replay = Replay(header=_header(path, parsed[0][1]), dropped_tail=dropped)
    objectives = records.objective_count(replay.header)
    for number, record in parsed[1:]:
        records.checked(where(path, number), _add, replay, record, number, objectives)
    return replay, good_end


def _add(replay: Replay, record: dict[str, Any], number: int, objectives: int | None) -> None:
    """One checked record into the replay (``objectives``: how many values a trial has)."""
    kind = record.get("kind")
    if kind == "trial":
        got = records.trial_record(record, objectives)
        key = got.trial.candidate.key()
        if key in replay.line_of:  # a search tries a candidate once (the cache answers again)
            raise records.FieldError(
                "trial.candidate",
                f"a candidate not in an earlier trial (line {replay.line_of[key]} has it)",
                key,
            )
        replay.line_of[key] = number
        replay.trials.append(got.trial)
        replay.lines.append(number)
        replay.elapsed_s.append(got.elapsed_s)
        if got.filler:
            replay.fillers.add(key)
        if got.same_binary_as is not None:
            replay.same_binary[key] = got.same_binary_as
    elif kind == "generation":
        replay.states.append(records.generation_record(record))
    elif kind == "confirmation":
        replay.rounds.append(records.confirmation_record(record))
    else:
        raise records.FieldError("kind", "trial, generation or confirmation", kind)


def read_header(path: Path) -> dict[str, Any]:
    """The header of a journal (its first line, checked), without reading the trials."""
    path = Path(path)
    for _, raw, ended in _lines(path):
        try:
            record = _parse(raw)
        except (UnicodeDecodeError, ValueError, RecursionError):
            break
        if not ended:
            break
        return _header(path, record)
    raise _not_a_journal(path)


def lock_path(path: Path) -> Path:
    """The lock file beside a journal (``j.jsonl.lock``), held while a search writes it."""
    return path.with_name(path.name + ".lock")


def _hold(path: Path) -> BaseFileLock:
    """The journal's lock (``ctune/locking.py``), taken without waiting: one search at a
    time appends to a journal, since two would interleave their trials (and a cut-off
    failed write of one could cut the other's line). A UserError when another holds it."""
    with naming(path.parent):
        lock = locking.take(lock_path(path), 0)
    if lock is None:
        raise UserError(
            f"{path}: another search holds this journal (it is running); wait for it to "
            "end, or give this search another --journal"
        )
    return lock


class Journal:
    """An open journal file; every append is flushed and fsync'd before returning. The
    search that opened it holds its lock (:func:`lock_path`) until :meth:`close`."""

    def __init__(
        self, path: Path, fd: int, fsync: bool = True, lock: BaseFileLock | None = None
    ) -> None:
        self.path = Path(path)
        self._fd = fd
        self._lock = lock
        self.fsync = fsync  # False only in tests: durability is the point of the journal

    @classmethod
    def create(cls, path: Path, header: Mapping[str, Any], fsync: bool = True) -> Journal:
        """Start a new journal; refuses to overwrite an existing file, or one that another
        search holds. One whose header cannot be written (a full disk) is removed again:
        no empty journal is left."""
        path = Path(path)
        with naming(path):
            path.parent.mkdir(parents=True, exist_ok=True)
        lock = _hold(path)
        try:
            return cls._start(path, header, fsync, lock)
        except BaseException:
            lock.release()
            raise

    @classmethod
    def _start(
        cls, path: Path, header: Mapping[str, Any], fsync: bool, lock: BaseFileLock
    ) -> Journal:
        """:meth:`create` once its lock is held: the file and its header. The caller
        releases the lock should this fail, after the file is removed again."""
        with naming(path):
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
            except FileExistsError:
                raise UserError(
                    f"{path}: already exists; pass --resume {path} to continue it"
                ) from None
        journal = cls(path, fd, fsync)
        try:
            journal._write({"kind": "header", "format": JOURNAL_FORMAT, **header})
            with naming(path.parent):
                _fsync_dir(path.parent)
        except BaseException:
            journal.close()
            with contextlib.suppress(OSError):
                path.unlink()
            raise
        journal._lock = lock
        return journal

    @classmethod
    def resume(cls, path: Path, fsync: bool = True) -> tuple[Journal, Replay]:
        """Open an existing journal for appending, cutting off a torn last line. It is
        read under its lock: a journal that another search holds is refused, not read."""
        path = Path(path)
        if journal_copy.is_copy(path):
            raise UserError(
                f"{path}: a registry's copy of a journal, which is read only; resume the "
                "journal it copies, or start a new search"
            )
        read_header(path)  # a missing file or no journal: refused before a lock file is made
        lock = _hold(path)
        try:
            return cls._reopen(path, fsync, lock)
        except BaseException:
            lock.release()
            raise

    @classmethod
    def _reopen(cls, path: Path, fsync: bool, lock: BaseFileLock) -> tuple[Journal, Replay]:
        """:meth:`resume` once its lock is held: read it whole (no other search writes it
        now), then open it for appending."""
        replay, good_end = read(path)
        if replay.header.get("format") != JOURNAL_FORMAT:
            raise UserError(
                f"{path}: journal format {replay.header.get('format')!r} was written by an older "
                "ctune (it records no fingerprint to check the resume against): it can be "
                "read, plotted and exported, but not resumed; start a new search"
            )
        with naming(path):
            fd = os.open(path, os.O_WRONLY | os.O_APPEND)
            try:
                if os.fstat(fd).st_size != good_end:
                    os.ftruncate(fd, good_end)
                    os.fsync(fd)
            except BaseException:
                os.close(fd)
                raise
        return cls(path, fd, fsync, lock), replay

    def _write(self, record: Mapping[str, Any]) -> None:
        """Append one line, whole: a write that fails part way (a full disk) is cut off
        again, so the journal still ends on a whole line, and the error names the file."""
        # allow_nan: a NaN reads back, and a run must never crash on one
        line = json.dumps(record, sort_keys=True, separators=(",", ":"), allow_nan=True)
        data = (line + "\n").encode()
        view = memoryview(data)
        with naming(self.path):
            end = os.fstat(self._fd).st_size
            try:
                while view:
                    written = os.write(self._fd, view)
                    view = view[written:]
                if self.fsync:
                    os.fsync(self._fd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, end)
                raise

    def append(
        self,
        trial: Trial,
        filler: bool = False,
        elapsed_s: float | None = None,
        same_binary_as: str | None = None,
        skipped: Mapping[str, Any] | None = None,
    ) -> None:
        record: dict[str, Any] = {"kind": "trial", "trial": to_json(trial)}
        if filler:
            record["filler"] = True
        if same_binary_as is not None:
            record["same_binary_as"] = same_binary_as
        if skipped is not None:
            record["skipped"] = dict(skipped)
        if elapsed_s is not None:
            record["elapsed_s"] = round(elapsed_s, 3)
        self._write(record)

    def append_state(self, generation: int, state: Mapping[str, Any]) -> None:
        self._write({"kind": "generation", "generation": generation, "state": dict(state)})

    def append_round(self, trials: int, number: int, runs: Mapping[str, Measurement]) -> None:
        """One confirmation round: each member's measurement in that fresh process."""
        self._write(
            {
                "kind": "confirmation",
                "trials": trials,
                "round": number,
                "runs": {key: to_json(m) for key, m in runs.items()},
            }
        )

    def close(self) -> None:
        """Close the file, then let another search have it (its lock released)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def sha256(self) -> str:
        return sha256_hex(self.path.read_bytes())

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def trials_by_generation(trials: Sequence[Trial]) -> list[list[Trial]]:
    """Consecutive trials grouped by generation, in journal order (for replay)."""
    groups: list[list[Trial]] = []
    for trial in trials:
        if groups and groups[-1][-1].generation == trial.generation:
            groups[-1].append(trial)
        else:
            groups.append([trial])
    return groups


__all__ = [
    "IDENTITY_FIELDS",
    "JOURNAL_FORMAT",
    "MAX_JOURNAL_BYTES",
    "MAX_LINE_BYTES",
    "ConfirmationRound",
    "Journal",
    "Replay",
    "check_identity",
    "default_path",
    "is_journal_path",
    "lock_path",
    "read",
    "read_header",
    "space_identity",
    "trials_by_generation",
    "utc_stamp",
    "where",
]

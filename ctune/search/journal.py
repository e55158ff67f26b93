"""The append-only search journal: one fsync'd JSON line per finished trial.

Format (JSON Lines, UTF-8):

- line 1, the identity header::

    {"kind": "header", "format": 2, "kernel": ..., "problem": ..., "space": {...},
     "objectives": {"objectives": [...], "constraints": [...]},
     "device": "NVIDIA H100 80GB HBM3 (sm_90)",
     "fingerprint": {...the artifact fingerprint's fields without the GPU's...},
     "info": {"strategy": ..., "seed": ..., "created_utc": ..., "budget": ...},
     "search": {"strategy": ..., "options": {...}, "seed": ..., "budget": ..., "time_s": ...,
                "patience": ..., "fill": ...}}

  ``search`` is the plan that decided the trials (``plan.py``): ``--resume`` reuses it
  and refuses a flag that differs. It is not an identity field: older journals lack it.

- then one ``{"kind": "trial", "trial": <records.to_json(Trial)>}`` per trial,
  written before the strategy is told , with ``"filler": true``
  added for a trial the driver measured while builds compiled rather than
  one the strategy asked for (``filling.py``; an optional key, so format 1
  still reads both ways) and ``"elapsed_s"``, the search's own seconds when it
  finished (continuing across resumed sessions, pauses left out; also
  optional: ``ctune plot`` draws convergence against it), ``"same_binary_as": KEY``
  for a trial that was not measured because candidate KEY of this search had compiled
  to the same binary (``dedup.py``; optional too, so older ctunes read such journals
  as plain trials), and after each
  generation a ``{"kind": "generation", "generation": g, "state": {...}}``
  with the strategy's state.

A crash or Ctrl-C loses at most the trial in flight (rule R7). On
``--resume`` the header must match the search being resumed: the kernel,
problem, genome, objectives and device exactly (Kernel Tuner refuses a cache
of another device/kernel/parameter order the same way), and the fingerprint
by the one severity rule of :mod:`ctune.evidence.identity` (a hard or build change
refuses, since the journal's trials cannot be rebuilt and compared; a soft
one is a note), and a torn last line, which is what a crash in the
middle of a write leaves, is dropped and cut off the file before anything
is appended. Any other unreadable line is an error: the journal is
evidence, and guessing past damage would not be.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctune.errors import UserError
from ctune.records import Trial, sha256_hex, to_json, trial_from_json
from ctune.space.params import Space

log = logging.getLogger(__name__)

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

    @property
    def last_elapsed_s(self) -> float:
        """Where a resumed session's clock continues from."""
        return max((t for t in self.elapsed_s if t is not None), default=0.0)


def read(path: Path) -> tuple[Replay, int]:
    """Parse a journal; returns (contents, byte length of its intact part)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise UserError(f"{path}: cannot read the journal: {exc.strerror}") from None
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    dropped = bool(tail)
    good_end = len(data) - len(tail)
    records: list[dict[str, Any]] = []
    offset = 0
    for i, raw in enumerate(lines):
        try:
            record = json.loads(raw.decode("utf-8"))
            if not isinstance(record, dict):
                raise ValueError("not an object")
        except (UnicodeDecodeError, ValueError) as exc:
            if i == len(lines) - 1 and not tail:
                dropped, good_end = True, offset  # a torn last line that got its newline
                break
            raise UserError(
                f"{path}:{i + 1}: not a journal record ({exc}); the file is damaged"
            ) from None
        records.append(record)
        offset += len(raw) + 1
    if not records or records[0].get("kind") != "header":
        raise UserError(f"{path}: not a ctune journal (no header line)")
    header = records[0]
    if header.get("format") not in READABLE_FORMATS:
        raise UserError(
            f"{path}: journal format {header.get('format')!r}; this ctune reads "
            f"{', '.join(map(str, READABLE_FORMATS))}"
        )
    replay = Replay(header=header, dropped_tail=dropped)
    for n, record in enumerate(records[1:], start=2):
        kind = record.get("kind")
        try:
            if kind == "trial":
                replay.trials.append(trial_from_json(record["trial"]))
                elapsed = record.get("elapsed_s")
                replay.elapsed_s.append(
                    float(elapsed) if isinstance(elapsed, (int, float)) else None
                )
                if record.get("filler") is True:
                    replay.fillers.add(replay.trials[-1].candidate.key())
                same = record.get("same_binary_as")
                if same is not None:
                    if not isinstance(same, str):
                        raise ValueError(f"same_binary_as {same!r} is not a key")
                    replay.same_binary[replay.trials[-1].candidate.key()] = same
            elif kind == "generation":
                replay.states.append((int(record["generation"]), dict(record["state"])))
            else:
                raise ValueError(f"unknown kind {kind!r}")
        except (KeyError, TypeError, ValueError) as exc:
            raise UserError(f"{path}:{n}: unreadable {kind} record ({exc})") from None
    return replay, good_end


def read_header(path: Path) -> dict[str, Any]:
    """The header of a journal (its first line), without reading the trials."""
    try:
        with Path(path).open("rb") as handle:
            first = handle.readline()
    except OSError as exc:
        raise UserError(f"{path}: cannot read the journal: {exc.strerror}") from None
    try:
        header = json.loads(first.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        header = None
    if not isinstance(header, dict) or header.get("kind") != "header":
        raise UserError(f"{path}: not a ctune journal (no header line)")
    return header


class Journal:
    """An open journal file; every append is flushed and fsync'd before returning."""

    def __init__(self, path: Path, fd: int, fsync: bool = True) -> None:
        self.path = Path(path)
        self._fd = fd
        self.fsync = fsync  # False only in tests: durability is the point of the journal

    @classmethod
    def create(cls, path: Path, header: Mapping[str, Any], fsync: bool = True) -> Journal:
        """Start a new journal; refuses to overwrite an existing file."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        except FileExistsError:
            raise UserError(
                f"{path}: already exists; pass --resume {path} to continue it"
            ) from None
        journal = cls(path, fd, fsync)
        journal._write({"kind": "header", "format": JOURNAL_FORMAT, **header})
        _fsync_dir(path.parent)
        return journal

    @classmethod
    def resume(cls, path: Path, fsync: bool = True) -> tuple[Journal, Replay]:
        """Open an existing journal for appending, cutting off a torn last line."""
        path = Path(path)
        replay, good_end = read(path)
        if replay.header.get("format") != JOURNAL_FORMAT:
            raise UserError(
                f"{path}: journal format {replay.header.get('format')!r} was written by an older "
                "ctune (it records no fingerprint to check the resume against): it can be "
                "read, plotted and exported, but not resumed; start a new search"
            )
        if replay.dropped_tail:
            log.warning("%s: dropped a torn last line (the previous run stopped mid-write)", path)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        if os.fstat(fd).st_size != good_end:
            os.ftruncate(fd, good_end)
            os.fsync(fd)
        return cls(path, fd, fsync), replay

    def _write(self, record: Mapping[str, Any]) -> None:
        # allow_nan: a NaN reads back, and a run must never crash on one
        line = json.dumps(record, sort_keys=True, separators=(",", ":"), allow_nan=True)
        data = (line + "\n").encode()
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        if self.fsync:
            os.fsync(self._fd)

    def append(
        self,
        trial: Trial,
        filler: bool = False,
        elapsed_s: float | None = None,
        same_binary_as: str | None = None,
    ) -> None:
        record: dict[str, Any] = {"kind": "trial", "trial": to_json(trial)}
        if filler:
            record["filler"] = True
        if same_binary_as is not None:
            record["same_binary_as"] = same_binary_as
        if elapsed_s is not None:
            record["elapsed_s"] = round(elapsed_s, 3)
        self._write(record)

    def append_state(self, generation: int, state: Mapping[str, Any]) -> None:
        self._write({"kind": "generation", "generation": generation, "state": dict(state)})

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

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
    "Journal",
    "Replay",
    "check_identity",
    "default_path",
    "read",
    "read_header",
    "space_identity",
    "trials_by_generation",
    "utc_stamp",
]

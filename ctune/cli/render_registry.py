"""Rendering for ``ctune registry``, ``ctune check`` and ``ctune gate`` (rich).

Only this module (and :mod:`ctune.cli.render`) prints. Verdict lines are
printed unwrapped (``soft_wrap``), one per artifact, so CI logs can be
grepped without parsing tables. Each command's JSON (``--format json``) is its
result's fields (:func:`outcome`), or the document built here beside its table.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.table import Column, Table

from ctune.ci.check import FRESH, STALE, WARN, CheckReport, CheckResult
from ctune.ci.check_toolchain import STOOD_IN
from ctune.ci.gate import GateReport, Regression, Verdict
from ctune.ci.gate_run import Prebuilt
from ctune.ci.refresh import RefreshOutcome
from ctune.cli.render import console, line, progress_line, report, warn_line, write_out
from ctune.cli.render_search import verdict_word
from ctune.cli.sanitize import one_line
from ctune.errors import RegistryError
from ctune.exchange.columns import extra_columns, fill_objectives, gene_columns, objective_columns
from ctune.records import FieldChange, to_json
from ctune.registry.controls import HeldFile
from ctune.registry.diff import ArtifactDiff, MemberDiff
from ctune.registry.extensions import vendor_when_tuned
from ctune.registry.git import CommitResult
from ctune.registry.layout import ArtifactKey
from ctune.registry.locks import StaleLock
from ctune.registry.remote import (
    STATUS_LIST_MAX,
    PullResult,
    PushResult,
    SyncStatus,
    Tracking,
    short_ref,
)
from ctune.registry.schema import Artifact, FrontMember
from ctune.registry.service import Migration, Pin, Published, Renaming, VerifyReport
from ctune.registry.store import Listing, Quarantined


def _line(text: str) -> None:
    line(text)


def outcome(fmt: str, value: Any, table: Callable[[Any], None], **extra: Any) -> None:
    """A registry command's result: ``table(value)`` for people, else its fields (and
    ``extra``, such as what its properties say) as one JSON document."""
    report(fmt, lambda: {**to_json(value), **extra}, lambda: table(value))


def retune(key: object, command: str) -> None:
    _line(f"{key}: {command}")


def nothing_stale() -> None:
    _line("nothing to re-tune: no artifact is stale (--all re-tunes every one)")


def note(text_line: str) -> None:
    """A note beside an export on standard output (stderr, so the export stays clean)."""
    line(("note:", "cyan"), " ", text_line, stderr=True)


def text(body: str) -> None:
    """Raw text (exports, an artifact file) exactly as given: never laid out or trimmed."""
    write_out(body)


def quarantined(items: Sequence[Quarantined]) -> None:
    for q in items:
        # store messages usually start with the path already
        warn_line(f"quarantined {q.message if q.path in q.message else f'{q.path}: {q.message}'}")


def listing(result: Listing) -> None:
    # plain lines, not a table: keys are never truncated and CI logs stay greppable
    for key, a in result.artifacts:
        objectives = ",".join(o.name for o in a.objectives)
        _line(
            f"{key}  front={len(a.front)}  pinned={a.pinned or '-'}  "
            f"objectives={objectives}  digest={a.digest()[:12]}"
        )
    if not result.artifacts:
        _line("no artifacts")
    quarantined(result.quarantined)


def listing_report(result: Listing, fmt: str) -> None:
    """``registry list``: a line per artifact; as rows (CSV), or the rows and the files
    that could not be read (JSON; those are warnings on stderr in both)."""
    if fmt != "table":
        quarantined(result.quarantined)
    header, rows = listing_rows(result)
    bad = [{"path": q.path, "message": q.message} for q in result.quarantined]
    report(
        fmt,
        lambda: {"rows": rows, "quarantined": bad},
        lambda: listing(result),
        lambda: (header, rows),
    )


def listing_rows(result: Listing) -> tuple[list[str], list[dict[str, object]]]:
    """``registry list --as``: one row per artifact, the pinned member's values in a cell."""
    header = [
        "key",
        "kernel",
        "problem",
        "device_class",
        "front",
        "pinned",
        "objectives",
        "pinned_values",
        "digest",
    ]
    rows: list[dict[str, object]] = []
    for key, a in result.artifacts:
        member = a.pinned_member()
        rows.append(
            {
                "key": str(key),
                "kernel": a.kernel,
                "problem": a.problem,
                "device_class": a.device_class,
                "front": len(a.front),
                "pinned": a.pinned,
                "objectives": [o.name for o in a.objectives],
                "pinned_values": list(member.values) if member is not None else None,
                "digest": a.digest(),
            }
        )
    return header, rows


def member_rows(
    a: Artifact, only: FrontMember | None = None
) -> tuple[list[str], list[dict[str, object]]]:
    """``registry show --as csv``: the front and the baseline (or ``only``, KEY@member),
    one row each, genes as columns."""
    named = objective_columns((o.name, o.unit) for o in a.objectives)
    genes = [k for k, _ in a.baseline.candidate.genes]
    measured = ["p50_ms", "p95_ms", "p99_ms", "energy_j", "avg_power_w"]
    measured += ["regs", "spills_bytes", "smem_bytes", "processes", "sass_sha256"]
    fixed = ["key", "role", *extra_columns(named, measured), *measured]
    columns = gene_columns(genes, fixed)
    rows: list[dict[str, object]] = []
    for m in (*a.front, a.baseline):
        if only is not None and m is not only:
            continue
        role = "baseline" if m is a.baseline else ("pinned" if m.key == a.pinned else "front")
        row: dict[str, object] = {"key": m.key, "role": role}
        for field in ("p50_ms", "p95_ms", "p99_ms", "energy_j", "avg_power_w"):
            row[field] = m.summary.get(field)
        for field in ("regs", "spills_bytes", "smem_bytes"):
            row[field] = m.resources.get(field)
        fill_objectives(row, named, m.values)
        row["processes"] = len(m.process_medians_ms)
        row["sass_sha256"] = m.sass_sha256
        genes_of = m.candidate.as_dict()
        row.update({column: genes_of.get(g) for g, column in columns.items()})
        rows.append(row)
    return [*fixed, *columns.values()], rows


def _fmt(v: float) -> str:
    return f"{v:.6g}"


def _members(a: Artifact, members: Sequence[FrontMember]) -> Table:
    # registry content is data: the consoles never read it as markup
    heads = [f"{o.name} [{o.unit}, {o.direction}]" for o in a.objectives]
    table = Table(Column("member", no_wrap=True), *heads, "processes", "sass", box=None)
    for m in members:
        mark = " (pinned)" if m.key == a.pinned else ""
        mark += " (baseline)" if m is a.baseline else ""
        table.add_row(
            m.key + mark,
            *(_fmt(v) for v in m.values),
            str(len(m.process_medians_ms)),
            m.sass_sha256[:12] or "-",
        )
    return table


def _genes(m: FrontMember) -> str:
    return " ".join(f"{k}={v}" for k, v in m.candidate.genes)


def _held(f: HeldFile) -> str:
    """``ptxas 3fa9c0de1234 2345 bytes controls/3fa9....acf`` (or why it is not usable)."""
    size = f"{f.size_bytes} bytes" if f.size_bytes is not None else "-"
    state = "" if f.state == "ok" else f" ({f.state.upper()} in the registry)"
    return f"{f.compiler} {f.digest[:12]} {size} {f.path}{state}"


def artifact(
    key: ArtifactKey, a: Artifact, files: Mapping[str, Sequence[HeldFile]] | None = None
) -> None:
    """``registry show KEY``; ``files``: each member's controls files, by member key."""
    _line(f"{key.artifact}  digest sha256:{a.digest()}  schema {a.schema_version}")
    prov = ", ".join(f"{k}={v}" for k, v in sorted(a.provenance.items()))
    if prov:
        _line(f"provenance: {prov}")
    console.print(_members(a, (*a.front, a.baseline)))
    held = {k: v for k, v in (files or {}).items() if v}
    if held:
        _line("controls files:")
        for member_key, member_files in held.items():
            for f in member_files:
                _line(f"  {member_key}: {_held(f)}")
    pinned = a.pinned_member()
    if pinned is not None:
        _line("pinned genes: " + _genes(pinned))
    vendor = _recorded_vendor(key, a)
    if vendor is not None:
        _line(_vendor_when_tuned(vendor))
    fp = Table("fingerprint", Column("value", overflow="fold"), box=None)
    for name, value in sorted(a.fingerprint.items()):
        fp.add_row(name, one_line(value))
    console.print(fp)


def _recorded_vendor(key: ArtifactKey, a: Artifact) -> Mapping[str, Any] | None:
    """The search's vendor comparison; a malformed record is one warning, not an error:
    it is a remark beside the artifact, and the rest of the view still holds."""
    try:
        return vendor_when_tuned(a, str(key.artifact))
    except RegistryError as exc:
        warn_line(f"{exc}; the comparison with the vendor call is not shown")
        return None


def _vendor_when_tuned(v: Mapping[str, Any]) -> str:
    """The search's comparison of the pinned member with the spec's vendor call, as recorded
    (``extensions.search.vendor``: free-form, so read defensively)."""
    head = f"vs {v.get('name', 'the vendor call')} when tuned:"
    gain = v.get("gain")
    if v.get("error") or not isinstance(gain, dict):
        return f"{head} not compared: {v.get('error') or 'no interval'}"
    try:
        low, high = (float(x) for x in gain["ci"])
        ratio = float(gain["ratio"])
    except (KeyError, TypeError, ValueError):
        return f"{head} (unreadable record)"
    verdict, _ = verdict_word(str(v.get("difference")))
    return (
        f"{head} {ratio:.3f}x {gain.get('objective', '')} [{low:.3f}, {high:.3f}], {verdict} "
        f"({v.get('processes', '?')} processes)"
    )


def member(key: ArtifactKey, a: Artifact, m: FrontMember, files: Sequence[HeldFile] = ()) -> None:
    """``registry show KEY@member``: the member's row of the artifact view and what builds
    it (the flags are ``registry export --as flags``'s), with its controls files."""
    from ctune.registry.export import flags_line

    _line(f"{key.artifact}@{m.key}  digest sha256:{a.digest()}  schema {a.schema_version}")
    console.print(_members(a, (m,)))
    _line("genes: " + _genes(m))
    resources = " ".join(f"{k}={v}" for k, v in sorted(m.resources.items()) if v is not None)
    _line("resources: " + (resources or "-"))
    _line("build flags: " + (flags_line(m) or "-"))
    for f in files:
        _line(f"controls file: {_held(f)}")


def show_report(
    fmt: str,
    key: ArtifactKey,
    a: Artifact,
    m: FrontMember | None,
    files_of: Mapping[str, Sequence[HeldFile]],
) -> None:
    """``registry show``: the artifact (or one member, ``m``) for people; the member's JSON
    (with its controls files, where it has any); the front and baseline as rows (CSV).
    The artifact's JSON is its file's (``registry show`` writes the file byte for byte)."""
    import json

    from ctune.registry.schema import encode, member_json

    def document() -> dict[str, Any]:
        if m is None:
            return dict(json.loads(encode(a)))
        data = member_json(m)
        if files_of.get(m.key):  # only a member built with controls files: others keep their bytes
            data["controls"] = [f.to_json() for f in files_of[m.key]]
        return data

    def table() -> None:
        if m is None:
            artifact(key, a, files_of)
        else:
            member(key, a, m, files_of.get(m.key, ()))

    report(fmt, document, table, lambda: member_rows(a, m))


def _change(c: FieldChange) -> str:
    return f"{c.name}: {c.old!r} -> {c.new!r} ({c.severity})"


def artifact_diff(a_name: str, b_name: str, d: ArtifactDiff) -> None:
    if d.same:
        _line(f"{a_name} and {b_name} are identical (digest {d.digests[0][:12]})")
        return
    _line(f"--- {a_name}  {d.digests[0][:12]}")
    _line(f"+++ {b_name}  {d.digests[1][:12]}")
    for c in d.fingerprint:
        _line(f"  fingerprint {_change(c)}")
    for k in d.removed:
        _line(f"  - member {k}")
    for k in d.added:
        _line(f"  + member {k}")
    for v in d.values:
        _line(f"  ~ {v.member} {v.objective}: {_fmt(v.old)} -> {_fmt(v.new)} ({v.relative:+.1%})")
    if d.pinned[0] != d.pinned[1]:
        _line(f"  pinned: {d.pinned[0]} -> {d.pinned[1]}")
    for g in d.genes:
        what = " (controls file)" if g.controls else ""
        _line(f"  ~ pinned gene {g.name}: {g.old} -> {g.new}{what}")


def member_diff(a_name: str, b_name: str, d: MemberDiff) -> None:
    """``registry diff KEY@a KEY@b``: what differs between the two members."""
    if d.same:
        _line(f"{a_name} and {b_name} record the same member ({d.members[1]})")
        return
    _line(f"--- {a_name}  member {d.members[0]}")
    _line(f"+++ {b_name}  member {d.members[1]}")
    for g in d.genes:
        what = " (controls file)" if g.controls else ""
        _line(f"  ~ gene {g.name}: {g.old} -> {g.new}{what}")
    for v in d.values:
        _line(f"  ~ {v.objective}: {_fmt(v.old)} -> {_fmt(v.new)} ({v.relative:+.1%})")
    for r in d.records:
        _line(f"  ~ {r.name}: {r.old} -> {r.new}")


def published(p: Published) -> None:
    if p.commit is None:
        _line(f"wrote {p.path} (not committed)")
    elif not p.commit.changed:
        _line(f"{p.path} unchanged; {p.commit.ref} stays at {p.commit.commit[:12]}")
    else:
        _line(f"wrote {p.path}; committed {p.commit.commit[:12]} to {p.commit.ref}")
    if p.journal:
        _line(f"journal: {p.journal}")


def journal_kept(path: Path | None) -> None:
    """``registry show KEY``'s last line: the search journal kept beside the artifact."""
    if path is None:
        _line("journal: not kept (`ctune registry journal KEY FILE` keeps it)")
    else:
        _line(f"journal: {path} ({path.stat().st_size} bytes, gzip)")


def pin(p: Pin) -> None:
    signed = "signed" if p.signed else "unsigned (configure gpg.format=ssh and user.signingkey)"
    _line(
        f"pinned {p.member} as {p.tag} at {p.commit[:12]}, digest sha256:{p.digest[:12]}, {signed}"
    )


def pushed(r: PushResult) -> None:
    ref = short_ref(r.ref)
    if r.up_to_date:
        _line(f"{r.remote} {ref} is up to date at {r.commit[:12]}; nothing to push")
    else:
        before = r.previous[:12] if r.previous else "new"
        tags = f" and {len(r.tags)} pin tag(s)" if r.tags else ""
        _line(
            f"pushed {r.commits} commit(s){tags} to {r.remote} {ref} ({before} -> {r.commit[:12]})"
        )
    if r.rebuilt or r.rejections:
        raced = f" ({r.rejections} push(es) rejected: it moved first)" if r.rejections else ""
        _line(f"rebuilt {r.rebuilt} commit(s) on {r.remote}'s newer tip{raced}")
    for tag in r.tags:
        _line(f"  tag {tag}")
    if r.unsynced:
        _line(
            f"{ref} gained {r.unsynced} commit(s) from {r.remote} that the registry folder "
            "does not show yet; `ctune registry pull` writes their artifact files"
        )


def _capped(lines: Sequence[str], what: str) -> None:
    for text_line in lines[:STATUS_LIST_MAX]:
        _line(text_line)
    if len(lines) > STATUS_LIST_MAX:
        _line(f"... and {len(lines) - STATUS_LIST_MAX} more {what}")


def pulled(r: PullResult) -> None:
    ref = short_ref(r.ref)
    if r.commit is None:
        _line(f"neither here nor {r.remote} has {ref}: nothing to pull")
    elif r.remote_tip is None:
        _line(f"{r.remote} has no {ref}: nothing to pull")
    elif not r.gained:
        _line(f"{ref} already has every commit {r.remote} has ({r.remote_tip[:12]})")
    else:
        before = r.previous[:12] if r.previous else "new"
        _line(f"pulled {r.gained} commit(s) from {r.remote} {ref} ({before} -> {r.commit[:12]})")
    if r.rebuilt:
        _line(f"rebuilt {r.rebuilt} unpushed commit(s) on {r.remote}'s tip")
    if r.unpushed:
        _line(f"{r.unpushed} commit(s) not on {r.remote} yet; `ctune registry push` shares them")
    if r.written:
        _line(f"wrote {len(r.written)} artifact file(s) of {ref} into the registry folder")
        _capped([f"  wrote {key}" for key in r.written], "artifact file(s)")
    if r.controls_written:
        _line(f"wrote {r.controls_written} controls file(s) of {ref} into the registry folder")
    if r.journals_written:
        _line(f"wrote {r.journals_written} journal copy(ies) of {ref} into the registry folder")
    if r.tags:
        _line(f"brought {len(r.tags)} pin tag(s) from {r.remote}")
    for tag in r.tags:
        _line(f"  tag {tag}")
    for tag in r.tag_conflicts:
        warn_line(
            f"pin tag {tag} exists here pointing elsewhere than on {r.remote}; kept this one "
            "(pins are immutable): delete it and pin under a new release name to share it"
        )
    _capped(
        [
            f"local-only {path}: not on {ref}, kept (import it, or remove it)"
            for path in r.local_only
        ],
        "local-only file(s)",
    )
    for path in r.skipped:
        warn_line(f"not written {path}: on {ref}, but not an artifact file ctune can place")


def sync_status(s: SyncStatus) -> None:
    ref = short_ref(s.ref)
    if s.fetch_error:
        warn_line(f"could not fetch from {s.remote}: {s.fetch_error}; showing the last known state")
    where = f"{s.remote} ({s.url})"
    if s.local is None:
        _line(f"{ref} does not exist here yet: nothing to push")
    elif s.tracking is Tracking.NO_REMOTE:
        _line(
            f"no remote {s.remote}: nothing is shared; {s.total_commits} commit(s) on {ref} "
            f"exist only here (`git remote add {s.remote} URL`, then `ctune registry push`)"
        )
    elif s.tracking is Tracking.NEVER_FETCHED:
        _line(
            f"{where} was never fetched here (or was empty): all {s.total_commits} commit(s) on "
            f"{ref} count as unpushed; `ctune registry status --fetch` asks it"
        )
    elif s.tracking is Tracking.ABSENT:
        _line(f"{where} has no {ref} (as of the last fetch): {s.total_commits} commit(s) unpushed")
    elif s.unpushed:
        _line(f"{ref} is ahead of {where} (as of the last fetch or push)")
    else:
        _line(f"{ref} is up to date with {where} (as of the last fetch or push)")
    if s.behind:
        _line(
            f"behind: {s.remote} has {s.behind} commit(s) not here; run `ctune registry pull` "
            "(a push also rebuilds on top of them)"
        )
    if s.folder_behind:
        _line(
            f"the registry folder lacks {s.folder_behind} artifact file(s) of {ref} (or holds "
            "other versions); run `ctune registry pull`"
        )
    for c in s.commits:
        keys = ", ".join(c.keys) or "no artifacts"
        other = f" (+{c.other_paths} other path(s))" if c.other_paths else ""
        _line(f"unpushed {c.commit[:12]} {c.subject}: {keys}{other}")
    if s.registry_commits > len(s.commits):
        _line(f"... and {s.registry_commits - len(s.commits)} older unpushed registry commit(s)")
    if s.total_commits > s.registry_commits:
        _line(
            f"{s.total_commits - s.registry_commits} unpushed commit(s) on {ref} touch nothing "
            "in the registry folder (code on the same branch): not listed"
        )
    for tag in s.tags:
        _line(f"unpushed tag {tag}")
    for tag in s.tag_conflicts:
        warn_line(
            f"pin tag {tag} exists on {s.remote} pointing elsewhere; pins are immutable: "
            "delete the local one and pin under a new release name"
        )
    if s.unpushed:
        _line(f"{s.total_commits} commit(s), {len(s.tags)} pin tag(s) unpushed")


def verify(r: VerifyReport) -> None:
    _line(f"{r.artifacts} artifact(s) verified")
    quarantined(r.quarantined)
    for text in r.edited:
        _line(f"FAIL {text}")
    for text in (*r.controls, *r.journals):
        _line(f"FAIL {text}")
    if r.without_spec:
        names = ", ".join(r.without_spec)
        _line(f"no spec loaded for {names}: gene values checked against nvcc's quoting rule only")
    for p in r.pins:
        status = "FAIL" if p.problems else "ok"
        _line(f"pin {p.tag}: {status}" + "".join(f"; {x}" for x in (*p.problems, *p.notes)))
    if r.fsck_ok is not None:
        _line("git fsck: ok" if r.fsck_ok else f"git fsck: FAILED: {r.fsck_output[:500]}")


def migration(m: Migration, dry_run: bool) -> None:
    verb = "would migrate" if dry_run else "migrated"
    for path in m.migrated:
        _line(f"{verb} {path}")
    if m.commit is not None:
        _line(f"committed {m.commit.commit[:12]} to {m.commit.ref}")
    if not m.migrated:
        _line("nothing to migrate")
    quarantined(m.failed)


def renaming_report(r: Renaming, dry: bool, fmt: str) -> None:
    """``registry migrate --rename``: one row per artifact moved (from, to, the digests
    carried over, those kept as recorded and why), the commit."""
    rows = [
        {
            "from": str(m.before),
            "to": str(m.after),
            "carried": list(m.carried),
            "kept": list(m.kept),
        }
        for m in r.renamed
    ]

    def document() -> dict[str, Any]:
        return {"renamed": rows, "commit": to_json(r.commit), "dry_run": dry}

    def table() -> None:
        verb = "would move" if dry else "moved"
        for m in r.renamed:
            carried = ", ".join(m.carried) or "nothing"
            _line(f"{verb} {m.before} -> {m.after}: carried {carried}")
            for why in m.kept:
                _line(f"  kept as recorded: {why}")
        if r.commit is not None:
            _line(f"committed {r.commit.commit[:12]} to {r.commit.ref}")

    report(fmt, document, table)


def _refresh_action(o: RefreshOutcome, dry: bool) -> str:
    if o.artifact is None:
        return "left"
    return "would refresh" if dry else "refreshed"


def refresh_report(
    outcomes: Sequence[RefreshOutcome], commit: CommitResult | None, dry: bool, fmt: str
) -> None:
    """``registry refresh``: one row per artifact (key, what was done, why), the commit."""
    header = ["key", "action", "why"]
    rows = [{"key": str(o.key), "action": _refresh_action(o, dry), "why": o.why} for o in outcomes]

    def document() -> dict[str, Any]:
        return {"artifacts": rows, "commit": to_json(commit), "dry_run": dry}

    report(fmt, document, lambda: refresh(outcomes, commit, dry), lambda: (header, rows))


def refresh(outcomes: Sequence[RefreshOutcome], commit: CommitResult | None, dry: bool) -> None:
    for o in outcomes:
        _line(f"{_refresh_action(o, dry)} {o.key}: {o.why}")
    if commit is not None:
        _line(f"committed {commit.commit[:12]} to {commit.ref}")
    if not outcomes:
        _line("no artifacts")


def locks_report(
    found: Sequence[StaleLock], removed: Sequence[object], fix: bool, fmt: str
) -> None:
    """``registry doctor``: the stale locks found (or removed, with --fix), one row each."""
    rows = [{"path": str(lock.path), "age_s": lock.age_s, "removed": False} for lock in found]
    rows += [{"path": str(path), "age_s": None, "removed": True} for path in removed]
    report(
        fmt,
        lambda: {"locks": rows},
        lambda: locks(found, removed, fix),
        lambda: (["path", "age_s", "removed"], rows),
    )


def locks(found: Sequence[StaleLock], removed: Sequence[object], fix: bool) -> None:
    if not found and not removed:
        _line("no stale git lock files")
    for lock in found:
        _line(
            f"stale lock {lock.path} (age {lock.age_s:.0f} s)"
            + (
                ""
                if fix
                else "; remove with `ctune registry doctor --fix` if no git process is running"
            )
        )
    for path in removed:
        _line(f"removed {path}")


def _short(value: str) -> str:
    """Digests shortened to 12 hex digits; other values as they are."""
    return value[:12] if len(value) == 64 and all(c in "0123456789abcdef" for c in value) else value


def _why(c: FieldChange) -> str:
    from ctune.evidence.identity import EXPLAIN

    text = f"{c.name}: {_short(c.old)} -> {_short(c.new)} ({c.severity})"
    return text + (f": {EXPLAIN[c.name]}" if c.name in EXPLAIN else "")


def check_result(r: CheckResult, strict: bool) -> list[str]:
    """One artifact's verdict, then each reason on a line of its own."""
    verdict = r.verdict(strict)
    if r.error:
        return [f"STALE {r.key}: {r.error}"]
    how = f" ({r.toolchain})" if r.toolchain else ""
    if verdict == FRESH:
        return [f"fresh {r.key}{how}"]
    reasons = [_why(c) for c in r.changes]
    if r.build_changes:
        if r.inputs_changed:
            reasons.append("inputs changed: " + ", ".join(r.inputs_changed))
        if r.binaries is None:
            reasons.append("binaries not verified (--no-rebuild)")
        elif r.binaries.identical:
            reasons.append(
                f"rebuilt {r.binaries.members} member(s): SASS identical, still valid "
                "(`ctune registry refresh` records the new inputs)"
            )
        else:
            reasons.extend(f"cannot rebuild: {d}" for d in r.binaries.refused)
            reasons.extend(f"rebuilt: {d}" for d in r.binaries.differences)
    word = {STALE: "STALE", WARN: "WARN"}[verdict]
    return [f"{word} {r.key}{how}", *(f"  {reason}" for reason in reasons)]


def other_gpus(count: int, classes: Sequence[str], what: str, fmt: str = "table") -> None:
    """``count`` artifacts measured on other GPUs than this one (``classes``); on stderr
    when stdout holds a document."""
    progress_line(fmt, f"{what}: {count} artifact(s) of other GPUs ({', '.join(classes)})")


def check(
    report: CheckReport,
    strict: bool,
    not_checked: tuple[str, str],
    *,
    verbose: bool = False,
) -> None:
    """``ctune check``: every artifact's verdict with ``verbose``; otherwise the stale ones in
    full and the drift of the rest folded into one line per kind. A summary line always.
    ``not_checked``: (the fields not checked, named; the same, counted)."""
    stale = [r.verdict(strict) == STALE for r in report.results]
    for r, is_stale in zip(report.results, stale, strict=True):
        if verbose or is_stale:
            for text in check_result(r, strict):
                _line(text)
    rest = [r for r, is_stale in zip(report.results, stale, strict=True) if not is_stale]
    folded = [] if verbose else _drift_lines(rest)
    for text in folded:
        _line(text)
    if verbose and not_checked[0]:
        _line(f"not checked: {not_checked[0]}")
    elsewhere = [r for r in report.results if r.other_gpu]
    if elsewhere:
        classes = sorted({r.key.device_class for r in elsewhere})
        other_gpus(len(elsewhere), classes, "GPU fields not compared")
    quarantined(report.quarantined)
    _line(_check_summary(report, strict, "" if verbose else not_checked[1], bool(folded)))


def _drift_kind(c: FieldChange) -> str:
    """A change's kind: its field, a member's flags counted as one kind (``nvcc_flags``)."""
    return c.name.split("[", 1)[0]


def _drift_lines(results: Sequence[CheckResult]) -> list[str]:
    """One line per kind of change across the artifacts that are not stale, with how many
    artifacts have it; each toolchain that stood in for a recorded one, one line."""
    from ctune.evidence.identity import EXPLAIN, FIELDS

    kinds: dict[tuple[str, str], tuple[set[int], set[str]]] = {}
    for i, r in enumerate(results):
        for c in r.changes:
            holders, news = kinds.setdefault((c.severity, _drift_kind(c)), (set(), set()))
            holders.add(i)
            news.add(c.new)
    out = []
    for (severity, name), (holders, news) in sorted(kinds.items()):
        notes = [EXPLAIN[name]] if name in EXPLAIN else []
        (new, *others) = news
        if not others and name in FIELDS and _short(new) == new:  # a digest says nothing
            notes.insert(0, f"now {new}")
        if severity == "build":
            notes.append("rebuilt, SASS identical: `ctune registry refresh` records the inputs")
        notes.append("--strict fails on it")
        out.append(f"{severity}: {name} changed for {_artifacts(len(holders))}: {'; '.join(notes)}")
    stand_ins = Counter(r.toolchain for r in results if STOOD_IN in r.toolchain)
    out += [f"toolchain: {phrase} ({_artifacts(n)})" for phrase, n in sorted(stand_ins.items())]
    return out


def _artifacts(count: int) -> str:
    return f"{count} artifact{'s' * (count != 1)}"


def _check_summary(report: CheckReport, strict: bool, not_checked: str, folded: bool) -> str:
    """``114 artifacts: 0 stale, 114 with soft drift, 0 fresh; checked with nvcc ...``."""
    if not report.results:
        return "no artifacts to check"
    verdicts = [r.verdict(strict) for r in report.results]
    parts = [
        f"{_artifacts(len(verdicts))}: {verdicts.count(STALE)} stale, "
        f"{verdicts.count(WARN)} with soft drift, {verdicts.count(FRESH)} fresh"
    ]
    used: dict[str, int] = {}
    for r in report.results:
        if r.checked_with:
            used[r.checked_with] = used.get(r.checked_with, 0) + 1
    if len(used) == 1:
        parts.append(f"checked with {next(iter(used))}")
    elif used:
        parts.append("checked with " + ", ".join(f"{t} ({n})" for t, n in sorted(used.items())))
    if not_checked:
        parts.append(not_checked)
    if folded:
        parts.append("-v lists each artifact")
    return "; ".join(parts)


def _regression(label: str, r: Regression) -> str:
    e = r.evidence
    if e is None or math.isnan(e.change):
        return f"{label}: {r.reason}"
    return (
        f"{label}: {e.old_median_ms:.6g} -> {e.new_median_ms:.6g} ms ({e.change:+.2%}), "
        f"T={e.threshold:.2%}, p={e.p_value:.3g}, processes {e.processes[0]}/{e.processes[1]},"
        f" predicted FPR {e.predicted_fpr:.2g}"
    )


def gate_progress(total: int, fmt: str = "table") -> Callable[[GateReport], None]:
    """One line per artifact as its verdict lands, before the full report (on stdout beside
    the table, else on stderr: ``render.progress_line``)."""
    done = 0

    def said(r: GateReport) -> None:
        nonlocal done
        done += 1
        progress_line(fmt, f"gate [{done}/{total}] {r.verdict.value} {r.key}")

    return said


def prebuild_progress(total: int, fmt: str = "table") -> Callable[[Prebuilt], None]:
    """``gate --build-only``: one line per artifact as its builds land."""
    done = 0

    def said(r: Prebuilt) -> None:
        nonlocal done
        done += 1
        if r.error:
            progress_line(fmt, f"build [{done}/{total}] FAILED {r.key}: {r.error}")
            return
        what = f"{r.builds} build(s) in the cache" + (", SASS as recorded" if r.ok else "")
        progress_line(fmt, f"build [{done}/{total}] {'ok' if r.ok else 'FAILED'} {r.key}: {what}")
        for problem in r.problems:
            progress_line(fmt, f"  {problem}")

    return said


def gate(reports: Sequence[GateReport], not_checked_line: str) -> None:
    for r in reports:
        _line(f"{r.verdict.value} {r.key}: {r.reason}")
        for c in r.changes:
            _line(f"  {_change(c)}")
        if r.candidate is not None and r.verdict is not Verdict.STALE:
            _line("  " + _regression("pinned", r.candidate))
        if r.canary is not None:
            _line("  " + _regression("canary (default build)", r.canary))
        if r.vendor is not None:
            _line("  " + _regression(f"vs {r.vendor_name} (vendor -> pinned)", r.vendor))
    if not reports:
        _line("no pinned artifacts to gate")
    fprs = [
        r.candidate.evidence.predicted_fpr
        for r in reports
        if r.candidate is not None
        and r.candidate.evidence is not None
        and not math.isnan(r.candidate.evidence.predicted_fpr)
    ]
    if fprs:
        _line(f"predicted false-alarm rate for this run: {min(1.0, sum(fprs)):.2g}")
    if not_checked_line:
        _line(f"not checked: {not_checked_line}")

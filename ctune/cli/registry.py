"""``ctune registry``: list, show, diff, pin, export, import, journal, migrate, verify, doctor,
push, pull, status, retune."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ctune.cli import app, complete, pointers
from ctune.cli.invocation import resolve_settings
from ctune.cli.lazy import lazy_module
from ctune.cli.options import (
    FormatOpt,
    JsonOpt,
    KernelsOpt,
    NvccOpt,
    PtxasOpt,
    ReportFormat,
    RowsFormat,
    RowsFormatOpt,
    output_format,
)
from ctune.config import Settings
from ctune.errors import GateFailure, RegistryError

if TYPE_CHECKING:
    from ctune.ci.retune import Retune
    from ctune.cli import render_registry as render
    from ctune.registry.layout import ArtifactKey
    from ctune.registry.schema import Artifact
    from ctune.registry.store import Quarantined
else:  # loaded when the command runs, not when --help lists it
    render = lazy_module("ctune.cli.render_registry")

HELP = """Versioned tuning artifacts, one JSON file per (kernel, problem, device class).

KEY is <kernel>/<problem>/<device-class>\\[@<member>], e.g.
gemm/sq4096/sm90-nvidia-h100-80gb-hbm3@3fa9c0de12345678. <member> is a 16-hex
candidate key, 'pinned' (the default) or 'baseline' (the default build).
`diff` also takes REV:KEY to read a KEY at a git revision (e.g. HEAD~1:KEY).

Writes commit to the checked-out branch (or --ref; required on a detached
HEAD) without touching unrelated changes. Pins are annotated tags
ctune/pin/<release>/<kernel>/<problem>/<device-class>, SSH-signed when
gpg.format=ssh and user.signingkey are configured.

Writes never need the network: `push` shares the ref and its pin tags with a
remote (rebuilding on top when another machine pushed first), `pull` brings the
remote's ref and pin tags here and writes its artifact files into the registry
folder, `status` lists what is not pushed yet (--strict: exit 1 if anything is).

`retune` turns each stale artifact back into the `ctune search ... --commit` that made it
(problem, objectives, constraints, strategy, seed, budget, arch, L2 policy) and, with
--run, runs it on this machine's GPU.
"""

registry_app = typer.Typer(name="registry", help=HELP, no_args_is_help=True)
app.add_typer(registry_app, name="registry")

RegistryOpt = Annotated[
    Path | None,
    typer.Option("--registry", help="registry directory (default: \\[tool.ctune] registry)"),
]
RefOpt = Annotated[
    str | None,
    typer.Option("--ref", help="branch to commit to (default: the checked-out branch)"),
]
KeyArg = Annotated[
    str,
    typer.Argument(
        help="<kernel>/<problem>/<device-class>\\[@<member>]",
        autocompletion=complete.registry_keys,
    ),
]
#: KEYs or glob patterns over them (ArtifactStore.select), for commands over several artifacts
KEYS_HELP = (
    "artifact KEYs, a kernel or <kernel>/<problem> (every artifact below it), or glob "
    "patterns over <kernel>/<problem>/<device-class> such as "
    "'attention/*/sm90-nvidia-h200' (quoted from the shell)"
)
RemoteOpt = Annotated[
    str | None,
    typer.Option("--remote", help="git remote (default: \\[tool.ctune] registry-remote, origin)"),
]
SyncRefOpt = Annotated[
    str | None,
    typer.Option("--ref", help="registry branch (default: the checked-out branch)"),
]
ReleaseOpt = Annotated[
    str | None, typer.Option("--release", help="read the artifact a release pin points at")
]


def _settings(
    registry: Path | None,
    nvcc: str | None = None,
    ptxas: str | None = None,
    kernels: Path | None = None,
) -> Settings:
    return resolve_settings(
        {"registry": registry, "nvcc": nvcc, "ptxas": ptxas, "kernels": kernels}
    )


#: the older spelling of --format csv|json on list and show (kept for scripts)
TableAsOpt = Annotated[
    str | None, typer.Option("--as", hidden=True, help="the same as --format csv|json")
]


def _format(fmt: str, json_out: bool, as_: str | None = None) -> str:
    from ctune.cli import tables

    return output_format(fmt, json_out, tables.check_format(as_) if as_ is not None else None)


@registry_app.command("list")
def list_command(
    patterns: Annotated[
        list[str] | None,
        typer.Argument(
            help=f"{KEYS_HELP} (default: every artifact)", autocompletion=complete.registry_keys
        ),
    ] = None,
    registry: RegistryOpt = None,
    pinned: Annotated[bool, typer.Option("--pinned", help="only pinned artifacts")] = False,
    fmt: RowsFormatOpt = RowsFormat.table,
    as_: TableAsOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """List artifacts; unreadable files are reported (quarantined) and skipped."""
    from ctune.registry.store import ArtifactStore, Listing, require_registry_dir

    out = _format(fmt, json_out, as_)
    root = _settings(registry).registry
    require_registry_dir(root)
    store = ArtifactStore(root)
    result = store.select(patterns) if patterns else store.list()
    if pinned:
        chosen = tuple((k, a) for k, a in result.artifacts if a.pinned is not None)
        result = Listing(chosen, result.quarantined)
    render.listing_report(result, out)


@registry_app.command("show")
def show_command(
    key: KeyArg,
    registry: RegistryOpt = None,
    release: ReleaseOpt = None,
    fmt: Annotated[
        RowsFormat,
        typer.Option(
            "--format",
            metavar="table|json|csv",
            help="table; json: the artifact file as it is (KEY@member: the member's JSON); "
            "csv: the front and the baseline, one row each (KEY@member: its row)",
        ),
    ] = RowsFormat.table,
    as_: TableAsOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Show one artifact: front, pinned member, fingerprint, provenance. KEY@member shows
    that member: its values, genes, resources and build flags."""
    from ctune.registry import schema
    from ctune.registry.controls import distinct_members, member_files
    from ctune.registry.export import resolve_member
    from ctune.registry.journals import relpath
    from ctune.registry.layout import contained_path, parse_key
    from ctune.registry.service import load_artifact, load_pinned

    pointers.key_wanted("registry show", key)
    out = _format(fmt, json_out, as_)
    root = _settings(registry).registry
    if release:
        parsed = parse_key(key)
        artifact = load_pinned(root, parsed, release)[0]
    else:
        parsed, artifact = load_artifact(root, key)
    member = None if parsed.member is None else resolve_member(artifact, parsed.member)
    if out == "json" and member is None:  # the file itself, byte for byte: it imports as is
        render.text(schema.encode(artifact).decode())
        return
    shown = (member,) if member is not None else distinct_members(artifact)
    files_of = {m.key: member_files(root, m) for m in shown}
    render.show_report(out, parsed, artifact, member, files_of)
    if out == "table" and member is None and not release:
        kept = contained_path(root, relpath(parsed.artifact))
        render.journal_kept(kept if kept.is_file() else None)


@registry_app.command("diff")
def diff_command(
    a: Annotated[str, typer.Argument(help="KEY or REV:KEY", autocompletion=complete.registry_keys)],
    b: Annotated[str, typer.Argument(help="KEY or REV:KEY", autocompletion=complete.registry_keys)],
    registry: RegistryOpt = None,
    fmt: FormatOpt = ReportFormat.table,
    json_out: JsonOpt = False,
) -> None:
    """Compare two artifacts: fingerprint fields, front members, values, pinned member.
    KEY@member on either side compares members (the other side's pinned one by default):
    genes, values, build flags, SASS, launch, resources."""
    from ctune.registry.diff import diff_artifacts, diff_members
    from ctune.registry.export import resolve_member
    from ctune.registry.service import load_artifact

    out = output_format(fmt, json_out)
    root = _settings(registry).registry
    (key_a, art_a), (key_b, art_b) = load_artifact(root, a), load_artifact(root, b)
    if key_a.member is None and key_b.member is None:
        d = diff_artifacts(art_a, art_b)
        render.outcome(out, d, lambda d: render.artifact_diff(a, b, d), a=a, b=b, same=d.same)
        return
    ma, mb = resolve_member(art_a, key_a.member), resolve_member(art_b, key_b.member)
    md = diff_members(ma, mb, (art_a.objectives, art_b.objectives))
    render.outcome(out, md, lambda d: render.member_diff(a, b, d), a=a, b=b, same=md.same)


@registry_app.command("pin")
def pin_command(
    key: KeyArg,
    release: Annotated[str, typer.Option("--release", help="release name, e.g. v1.4")],
    registry: RegistryOpt = None,
    ref: RefOpt = None,
    fmt: FormatOpt = ReportFormat.table,
    json_out: JsonOpt = False,
) -> None:
    """Pin a member (default: the artifact's pinned one) as an annotated tag."""
    from ctune.registry.layout import parse_key
    from ctune.registry.service import pin_artifact

    out = output_format(fmt, json_out)
    pinned = pin_artifact(_settings(registry).registry, parse_key(key), release, ref=ref)
    render.outcome(out, pinned, render.pin)


@registry_app.command("export")
def export_command(
    key: KeyArg,
    fmt: Annotated[str, typer.Option("--as", help="flags | header | cmake | json")] = "flags",
    registry: RegistryOpt = None,
    release: ReleaseOpt = None,
    output: Annotated[
        str | None,
        typer.Option(
            "--output",
            "--out",
            "-o",
            help="write to this file, or into this folder (one that exists, or a name ending "
            "in /) as <kernel>-<problem>.<ext> (default: stdout); a member's controls files "
            "are copied beside it",
        ),
    ] = None,
    bare: Annotated[
        bool,
        typer.Option(
            "--bare",
            help="header and CMake: the tunables under the names the kernel reads (BLOCK_N), "
            "not CTUNE_<KERNEL>_BLOCK_N; for a build that compiles this one kernel",
        ),
    ] = False,
) -> None:
    """Print what a build needs: flags line, C header, CMake snippet or JSON.

    Header and CMake names are prefixed per kernel (CTUNE_GEMM_BLOCK_N), so exports of
    several kernels can be used together; the kernel's source reads the bare names:
    define CTUNE_<KERNEL>_BARE_NAMES before including the header where it is compiled,
    or export with --bare. A member built with an advanced-controls file applies it
    (-Xptxas --apply-controls=PATH): with --output the file is copied beside the output
    and named relative to it, else the registry's file is named.
    """
    pointers.key_wanted("registry export", key)
    pointers.build_format_wanted(fmt, key)
    export_member(_settings(registry).registry, key, fmt, output, bare=bare, release=release)


def export_member(
    root: Path,
    key: str,
    fmt: str,
    output: str | None,
    *,
    bare: bool = False,
    release: str | None = None,
) -> None:
    """Write one member's export (``registry export``, ``ctune export KEY --as flags``):
    its controls files go beside the output first, then the text naming them."""
    from ctune.registry.export import check_format, needs_line, resolve_member
    from ctune.registry.export import render as render_export
    from ctune.registry.export_controls import output_file, place_controls
    from ctune.registry.layout import parse_key
    from ctune.registry.service import load_artifact, load_pinned
    from ctune.writes import write_atomic

    check_format(fmt)
    parsed = parse_key(key)
    member: str | None
    if release:
        artifact, pinned = load_pinned(root, parsed, release)
        member = parsed.member or pinned
    else:
        parsed, artifact = load_artifact(root, key)
        member = parsed.member
    chosen = resolve_member(artifact, member)
    placed = place_controls(root, artifact, chosen, fmt, output_file(artifact, fmt, output))
    body = render_export(artifact, member, fmt, bare, placed.controls)
    if placed.output is None:
        render.text(body)
    else:
        placed.output.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(placed.output, body, into_special=True)
    needs = needs_line(chosen)
    if needs and fmt == "flags":  # a flags line has no room for it: said beside it
        render.note(f"{needs}; the controls file is {', '.join(placed.controls.values())}")


@registry_app.command("import")
def import_command(
    result: Annotated[Path, typer.Argument(help="search result file (artifact JSON)")],
    registry: RegistryOpt = None,
    ref: RefOpt = None,
    commit: Annotated[bool, typer.Option(help="commit the imported file")] = True,
    journal: Annotated[
        Path | None,
        typer.Option(
            "--journal",
            help="the search's journal (default: the copy `ctune search` writes beside the "
            "result file)",
        ),
    ] = None,
    fmt: FormatOpt = ReportFormat.table,
    json_out: JsonOpt = False,
) -> None:
    """Validate a search result file, write it into the registry atomically, commit it,
    with the controls files its members are built with (from controls/ beside the result
    file, where `ctune search` writes them, or the search's cache_dir) and a copy of its
    search's journal, which later searches of the kernel learn from (--cost-model)."""
    from ctune.controls.store import FOLDER, StoreChain
    from ctune.registry.service import import_result

    pointers.file_wanted("registry import", str(result))
    out = output_format(fmt, json_out)
    settings = _settings(registry)
    chain = StoreChain.for_settings(settings, Path(result).parent / FOLDER)
    published = import_result(
        settings.registry,
        result,
        ref=ref,
        commit=commit,
        controls=chain,
        journals=[journal] if journal is not None else [],
    )
    render.outcome(out, published, render.published)


@registry_app.command("journal")
def journal_command(
    key: KeyArg,
    journal: Annotated[Path, typer.Argument(help="the journal file (.jsonl, or a .jsonl.gz copy)")],
    registry: RegistryOpt = None,
    ref: RefOpt = None,
    fmt: FormatOpt = ReportFormat.table,
    json_out: JsonOpt = False,
) -> None:
    """Keep the search journal that made KEY beside it (a gzip copy, in one new commit):
    later searches of the kernel, on any machine with the registry, learn from every trial
    it measured (--cost-model). Refused unless its sha256 is the artifact's
    provenance.journal_sha256."""
    from ctune.registry.service import attach_journal

    pointers.key_wanted("registry journal", key)
    pointers.file_wanted("registry journal", str(journal))
    out = output_format(fmt, json_out)
    published = attach_journal(_settings(registry).registry, key, journal, ref=ref)
    render.outcome(out, published, render.published)


@registry_app.command("migrate")
def migrate_command(
    registry: RegistryOpt = None,
    ref: RefOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="only list what would change")] = False,
    rename: Annotated[
        list[str] | None,
        typer.Option(
            "--rename",
            metavar="OLD=NEW",
            help="move kernel OLD's artifacts to NEW, whose spec (<kernels>/NEW.yaml) is "
            "already renamed; repeat it for several (one mapping: gemm=hand_gemm with "
            "cutlass_gemm=gemm swaps them)",
        ),
    ] = None,
    kernels: KernelsOpt = None,
    nvcc: NvccOpt = None,
    fmt: FormatOpt = ReportFormat.table,
    json_out: JsonOpt = False,
) -> None:
    """Upgrade artifact files of older schemas to this ctune's, in one new commit. With
    --rename, move kernels' artifacts to new names instead (keys, member keys, pinned),
    carrying over each input digest only where it is verified to be unchanged."""
    from ctune.registry.service import migrate_registry

    out = output_format(fmt, json_out)
    if rename:
        _rename_kernels(_settings(registry, nvcc, kernels=kernels), rename, ref, dry_run, out)
        return
    result = migrate_registry(_settings(registry).registry, ref=ref, dry_run=dry_run)
    if out != "table":
        render.quarantined(result.failed)
    render.outcome(out, result, lambda r: render.migration(r, dry_run), dry_run=dry_run)
    if result.failed:
        raise RegistryError(f"{len(result.failed)} file(s) could not be migrated")


def _rename_kernels(
    settings: Settings, texts: list[str], ref: str | None, dry_run: bool, out: str
) -> None:
    """``migrate --rename``: each NEW kernel's spec found as ``ctune check`` finds it."""
    from ctune.ci.check import SpecNotFound, load_kernel_spec
    from ctune.compile.select_toolchain import nvcc_for
    from ctune.errors import UserError
    from ctune.registry.rename import NewSpec, parse_renames
    from ctune.registry.service import rename_registry
    from ctune.registry.store import require_registry

    mapping = parse_renames(texts)
    require_registry(settings.registry)
    specs = {}
    for old, new in mapping.items():
        try:
            spec = load_kernel_spec(settings.kernels, new, nvcc_for(settings))
        except SpecNotFound as exc:
            raise UserError(
                f"--rename {old}={new}: no kernel spec {exc.path}; rename the kernel's spec "
                "(file and name) first, or pass --kernels"
            ) from None
        if spec.name != new:
            raise UserError(
                f"--rename {old}={new}: {spec.yaml_path} is named {spec.name!r}; set its "
                f"name to {new}"
            )
        specs[new] = NewSpec.of(spec)
    result = rename_registry(settings.registry, mapping, specs, ref=ref, dry_run=dry_run)
    render.renaming_report(result, dry_run, out)


@registry_app.command("refresh")
def refresh_command(
    keys: Annotated[
        list[str] | None,
        typer.Argument(help=f"{KEYS_HELP} (default: all)", autocompletion=complete.registry_keys),
    ] = None,
    registry: RegistryOpt = None,
    ref: RefOpt = None,
    kernels: KernelsOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="only say what would change")] = False,
    nvcc: NvccOpt = None,
    ptxas: PtxasOpt = None,
    fmt: RowsFormatOpt = RowsFormat.table,
    json_out: JsonOpt = False,
) -> None:
    """Record the current inputs (toolchain, sources, spec) of artifacts whose binaries are
    unchanged, in one commit, without re-measuring; stale artifacts are left for a re-tune."""
    from ctune.ci.check import nvcc_verifier
    from ctune.ci.refresh import refresh_registry
    from ctune.cli.check import probe_for
    from ctune.controls.store import StoreChain
    from ctune.registry.store import ArtifactStore, fail_if_unreadable, require_registry

    out = output_format(fmt, json_out)
    settings = _settings(registry, nvcc, ptxas, kernels)
    require_registry(settings.registry)
    store = ArtifactStore(settings.registry)
    listing = store.select(keys) if keys else store.list()
    render.quarantined(listing.quarantined)
    probe = probe_for(settings, settings.kernels, gpu=False)
    outcomes, commit = refresh_registry(
        settings.registry,
        probe,
        nvcc_verifier(settings),
        listing.artifacts,
        ref=ref,
        dry_run=dry_run,
        controls=StoreChain.for_settings(settings),
    )
    render.refresh_report(outcomes, commit, dry_run, out)
    stale = [o for o in outcomes if o.why.startswith("stale")]
    failed = f"{len(stale)} artifact(s) stale: re-tune them (ctune registry retune)"
    fail_if_unreadable(listing.quarantined, failed if stale else None)
    if stale:
        raise GateFailure(failed)


@registry_app.command("verify")
def verify_command(
    registry: RegistryOpt = None,
    ref: Annotated[str | None, typer.Option("--ref", help="registry ref pins must be on")] = None,
    fsck: Annotated[bool, typer.Option(help="also run git fsck")] = True,
    kernels: KernelsOpt = None,
    nvcc: NvccOpt = None,
    ptxas: PtxasOpt = None,
    fmt: FormatOpt = ReportFormat.table,
    json_out: JsonOpt = False,
) -> None:
    """Check every artifact's digest, its gene values against its spec (a digest does not
    catch a hand edit), every pin tag (digest, signature, ancestry), git fsck."""
    from ctune.compile.select_toolchain import nvcc_for
    from ctune.registry.service import verify_registry

    out = output_format(fmt, json_out)
    settings = _settings(registry, nvcc, ptxas, kernels)
    report = verify_registry(
        settings.registry, ref=ref, fsck=fsck, kernels=settings.kernels, nvcc=nvcc_for(settings)
    )
    if out != "table":
        render.quarantined(report.quarantined)
    render.outcome(out, report, render.verify, ok=report.ok)
    if not report.ok:
        raise RegistryError("registry verification failed (see above)")


@registry_app.command("doctor")
def doctor_command(
    registry: RegistryOpt = None,
    fix: Annotated[bool, typer.Option("--fix", help="remove the stale locks found")] = False,
    older_than: Annotated[
        float, typer.Option("--older-than", help="seconds a lock must be old to be stale")
    ] = 300.0,
    fmt: RowsFormatOpt = RowsFormat.table,
    json_out: JsonOpt = False,
) -> None:
    """Report git lock files a crashed writer left behind; --fix removes them safely."""
    from ctune.registry.locks import clear_stale_locks, find_stale_locks

    out = output_format(fmt, json_out)
    root = _settings(registry).registry
    if fix:
        render.locks_report([], clear_stale_locks(root, older_than), fix, out)
        return
    found = find_stale_locks(root, older_than)
    render.locks_report(found, [], fix, out)
    if found:
        raise RegistryError(f"{len(found)} stale lock file(s); run `ctune registry doctor --fix`")


@registry_app.command("push")
def push_command(
    registry: RegistryOpt = None,
    ref: SyncRefOpt = None,
    remote: RemoteOpt = None,
    fmt: FormatOpt = ReportFormat.table,
    json_out: JsonOpt = False,
) -> None:
    """Push the registry ref and its new pin tags; never forces (rebuilds when rejected)."""
    from ctune.registry.remote import push_registry

    out = output_format(fmt, json_out)
    settings = resolve_settings({"registry": registry, "registry_remote": remote})
    pushed = push_registry(settings.registry, ref=ref, remote=settings.registry_remote)
    render.outcome(out, pushed, render.pushed, up_to_date=pushed.up_to_date)


@registry_app.command("pull")
def pull_command(
    registry: RegistryOpt = None,
    ref: SyncRefOpt = None,
    remote: RemoteOpt = None,
    fmt: FormatOpt = ReportFormat.table,
    json_out: JsonOpt = False,
) -> None:
    """Bring the remote's registry ref and pin tags here; the registry folder shows them."""
    from ctune.registry.remote import pull_registry

    out = output_format(fmt, json_out)
    settings = resolve_settings({"registry": registry, "registry_remote": remote})
    pulled = pull_registry(settings.registry, ref=ref, remote=settings.registry_remote)
    render.outcome(out, pulled, render.pulled)


@registry_app.command("status")
def status_command(
    registry: RegistryOpt = None,
    ref: SyncRefOpt = None,
    remote: RemoteOpt = None,
    fetch: Annotated[
        bool, typer.Option("--fetch", help="ask the remote first (default: as last fetched)")
    ] = False,
    strict: Annotated[
        bool, typer.Option("--strict", help="exit 1 when anything is unpushed (CI)")
    ] = False,
    fmt: FormatOpt = ReportFormat.table,
    json_out: JsonOpt = False,
) -> None:
    """List commits (and the artifacts they touch) and pin tags the remote lacks."""
    from ctune.errors import GateFailure
    from ctune.registry.remote import registry_status

    out = output_format(fmt, json_out)
    settings = resolve_settings({"registry": registry, "registry_remote": remote})
    status = registry_status(
        settings.registry, ref=ref, remote=settings.registry_remote, fetch=fetch
    )
    render.outcome(out, status, render.sync_status, unpushed=status.unpushed)
    if strict and (status.unpushed or status.tag_conflicts):
        clash = (
            f"; {len(status.tag_conflicts)} pin tag(s) clash with {status.remote}'s"
            if status.tag_conflicts
            else ""
        )
        raise GateFailure(
            f"{status.total_commits} commit(s) and {len(status.tags)} pin tag(s) are not on "
            f"{status.remote}{clash}; run `ctune registry push` (status --strict)"
        )


@registry_app.command("retune")
def retune_command(
    keys: Annotated[
        list[str] | None,
        typer.Argument(
            help=f"{KEYS_HELP} (default: every one `ctune check` calls stale)",
            autocompletion=complete.registry_keys,
        ),
    ] = None,
    every: Annotated[bool, typer.Option("--all", help="every artifact, stale or not")] = False,
    budget: Annotated[
        int | None, typer.Option(help="evaluations per search (default: the recorded budget)")
    ] = None,
    run: Annotated[
        bool, typer.Option("--run", help="run the searches now (GPU); default: print them")
    ] = False,
    results: Annotated[
        Path | None,
        typer.Option(
            "--results",
            help="write result files here for `ctune registry import` instead of committing",
        ),
    ] = None,
    registry: RegistryOpt = None,
    kernels: KernelsOpt = None,
    nvcc: NvccOpt = None,
    ptxas: PtxasOpt = None,
    fmt: FormatOpt = ReportFormat.table,
    json_out: JsonOpt = False,
) -> None:
    """Re-run the search that made each stale artifact (problem, objectives, constraints,
    strategy, seed, budget, arch, L2 policy as recorded) and commit its result."""
    from ctune.ci.retune import Retune, search_argv
    from ctune.errors import GateFailure
    from ctune.registry.store import ArtifactStore, fail_if_unreadable

    out = output_format(fmt, json_out)
    settings = _settings(registry, nvcc, ptxas, kernels)
    chosen, unreadable = _retune_targets(settings, settings.kernels, keys or [], every)
    render.quarantined(unreadable)
    if not chosen:
        render.report(out, lambda: {"retunes": []}, render.nothing_stale)
        fail_if_unreadable(unreadable)
        return
    # the search commits where this command reads (its --commit follows CTUNE_REGISTRY) and
    # builds with this command's toolchain
    given = (
        ("CTUNE_REGISTRY", registry, str(settings.registry)),
        ("CTUNE_NVCC", nvcc, settings.nvcc),
        ("CTUNE_PTXAS", ptxas, settings.ptxas),
    )
    env = tuple((name, value) for name, option, value in given if option is not None)
    store = ArtifactStore(settings.registry)
    # every command line before any search runs: a malformed record stops the whole re-tune
    plans = [
        Retune(
            key, search_argv(a, settings.kernels, budget, results, where=str(store.path(key))), env
        )
        for key, a in chosen
    ]
    failed = []
    done: list[dict[str, object]] = []
    for plan in plans:
        if out == "table":
            render.retune(plan.key, plan.command())
        code = _search_in_process(plan, out) if run else None
        done.append({"key": str(plan.key), "command": plan.command(), "exit_code": code})
        if code:
            failed.append(f"{plan.key} (exit {code})")
    render.report(out, lambda: {"retunes": done}, lambda: None)
    failure = f"{len(failed)} of {len(plans)} re-tune(s) failed: {', '.join(failed)}"
    fail_if_unreadable(unreadable, failure if failed else None)
    if failed:
        raise GateFailure(failure)


def _search_in_process(plan: Retune, fmt: str = "table") -> int:
    """Run one re-tune as ``ctune search`` in this process: the same command, live progress
    and commit path as a search typed by hand; a failure is its exit code, and the next
    re-tune still runs. The recorded settings go to that command's own environment
    (``main(environ=...)``); the process's is left as it is. When stdout holds this
    command's JSON, the search's report goes to stderr (a log sees it, jq does not)."""
    import contextlib
    import os
    import sys

    from ctune.cli import main

    into_stderr = contextlib.redirect_stdout(sys.stderr) if fmt != "table" else None
    try:
        with into_stderr or contextlib.nullcontext():
            main(list(plan.argv), environ={**os.environ, **dict(plan.env)})
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else 1
    return 0


def _retune_targets(
    settings: Settings, kernels: Path, keys: list[str], every: bool
) -> tuple[list[tuple[ArtifactKey, Artifact]], tuple[Quarantined, ...]]:
    """KEYS as given, else every artifact (--all), else the ones `ctune check` calls stale;
    and the files among them that could not be read."""
    from ctune.ci.check import STALE, check_all, nvcc_verifier
    from ctune.cli.check import probe_for
    from ctune.registry.store import ArtifactStore

    store = ArtifactStore(settings.registry)
    listing = store.select(keys) if keys else store.list()
    if keys or every:
        return list(listing.artifacts), listing.quarantined
    probe = probe_for(settings, kernels, gpu=True)
    checked = check_all(listing.artifacts, probe, nvcc_verifier(settings))
    stale = {r.key for r in checked if r.verdict() == STALE}
    return [(k, a) for k, a in listing.artifacts if k in stale], listing.quarantined

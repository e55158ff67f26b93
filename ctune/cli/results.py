"""``ctune export``: a search's journal or an artifact as T4 JSON or CSV, for other tools."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ctune.cli import app, complete
from ctune.errors import UserError

if TYPE_CHECKING:
    from ctune.exchange.records import Export

FORMATS = ("t4", "csv")


@app.command("export")
def export_command(
    source: Annotated[
        str,
        typer.Argument(
            help="a search journal (.jsonl, or the registry's .jsonl.gz copy), a result file "
            "(.json) or a registry KEY (kernel/problem/device-class)",
            autocompletion=complete.registry_keys,
        ),
    ],
    as_: Annotated[
        str,
        typer.Option(
            "--as",
            help="t4 (the T4 JSON results format) or csv; for a KEY also flags, header, "
            "cmake or json (what a build needs, as `ctune registry export`)",
        ),
    ] = "t4",
    out: Annotated[
        str | None,
        typer.Option(
            "--out",
            "-o",
            help="write here (default: standard output); for flags, header, cmake or json "
            "also a folder (one that exists, or a name ending in /)",
        ),
    ] = None,
    registry: Annotated[
        Path | None, typer.Option(help="registry folder for a KEY (default: the setting)")
    ] = None,
) -> None:
    """Every configuration a search tried (journal), or an artifact's baseline and front,
    as T4 JSON (what Kernel Tuner writes and KTT reads) or CSV. `ctune search
    --warm-start FILE` takes a T4 file back."""

    from ctune.cli.common import settings
    from ctune.cli.render import write_out
    from ctune.exchange.t4 import t4_text
    from ctune.exchange.table import to_csv
    from ctune.registry.export import FORMATS as BUILD_FORMATS

    cfg = settings(registry=registry)
    if as_ in BUILD_FORMATS:
        from ctune.cli import pointers
        from ctune.cli.registry import export_member

        pointers.exchange_format_wanted(as_, source)

        export_member(cfg.registry, source, as_, out)
        return
    if as_ not in FORMATS:
        allowed = ", ".join((*FORMATS, *BUILD_FORMATS))
        raise UserError(f"--as {as_}: unknown format (allowed: {allowed})")
    export = load(source, cfg.registry)
    text = t4_text(export) if as_ == "t4" else to_csv(export)
    if out is None:
        write_out(text)
    else:
        from ctune.writes import write_atomic

        Path(out).parent.mkdir(parents=True, exist_ok=True)
        write_atomic(Path(out), text, into_special=True)


def load(source: str, registry: Path) -> Export:
    """A journal (``.jsonl``, ``.jsonl.gz``), a result file (``.json``) or a registry KEY, as
    export rows
    (``ctune.exchange.records``): which of the three SOURCE is, and reading the registry's
    result files and keys, is this command's job."""
    from ctune.exchange.records import from_artifact, from_journal
    from ctune.search.journal import is_journal_path

    if is_journal_path(source):
        return from_journal(Path(source))
    if source.endswith(".json"):
        from ctune.registry.store import read_result

        return from_artifact(read_result(Path(source)), source)
    if "/" not in source:
        raise UserError(
            f"{source}: expected a journal (.jsonl, .jsonl.gz), a result file (.json) or a "
            "registry KEY (kernel/problem/device-class)"
        )
    from ctune.registry.service import load_artifact

    _, artifact = load_artifact(registry, source)
    return from_artifact(artifact, source)

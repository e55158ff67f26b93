"""What ``ctune init`` prints: the files it wrote, its genes and what to check."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ctune.cli.render import console

if TYPE_CHECKING:
    from ctune.draft.sidecar import Draft


def init_report(yaml_path: Path, reference: Path, draft: Draft) -> None:
    lines = len(draft.yaml.splitlines())
    console.print(f"wrote {yaml_path} ({lines} lines) and {reference}", markup=False)
    console.print(f"entry   {draft.entry}", markup=False)
    for gene in draft.genes:
        values = ", ".join(str(v) for v in gene.values)
        console.print(
            f"gene    {gene.name} [{values}] default {gene.default}: {gene.why}", markup=False
        )
    for check in draft.checks:
        console.print(f"check   {check}", markup=False)
    console.print(f"next    ctune space {yaml_path.with_suffix('.cu')}", markup=False)

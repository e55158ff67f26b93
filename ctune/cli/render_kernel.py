"""What ``ctune init`` prints: the files it wrote, its genes and what to check."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctune.cli.render import line, report

if TYPE_CHECKING:
    from ctune.spec.draft.sidecar import Draft


def init_report(
    yaml_path: Path, reference: Path, draft: Draft, fmt: str = "table", source: Path | None = None
) -> None:
    """One line per fact, never wrapped (a narrow terminal folds them, a log keeps them).
    ``source``: the kernel file as given (a header keeps its own suffix)."""
    lines = len(draft.yaml.splitlines())
    next_command = f"ctune space {source or yaml_path.with_suffix('.cu')}"

    def document() -> dict[str, Any]:
        return {
            "sidecar": str(yaml_path),
            "sidecar_lines": lines,
            "reference": str(reference),
            "entry": draft.entry,
            "genes": [
                {"name": g.name, "values": list(g.values), "default": g.default, "why": g.why}
                for g in draft.genes
            ],
            "checks": list(draft.checks),
            "next": next_command,
        }

    def table() -> None:
        line(f"wrote {yaml_path} ({lines} lines) and {reference}")
        line(f"entry   {draft.entry}")
        for gene in draft.genes:
            values = ", ".join(str(v) for v in gene.values)
            line(f"gene    {gene.name} [{values}] default {gene.default}: {gene.why}")
        for check in draft.checks:
            line(f"check   {check}")
        line(f"next    {next_command}")

    report(fmt, document, table)

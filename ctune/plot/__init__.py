"""Figures and tables from a search journal or a result artifact (``ctune plot``).

Reading (:mod:`ctune.plot.data`) needs nothing beyond ctune; drawing
(:mod:`ctune.plot.figures`) needs matplotlib, the ``plot`` extra, and says
so in one line (exit 3) where it is missing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ctune.errors import ToolchainError, UserError

INSTALL_HINT = "pip install 'ctune[plot]'"


def require_matplotlib(what: str = "ctune plot") -> None:
    """Raise a one-line ToolchainError when matplotlib cannot be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ToolchainError(
            f"{what} needs matplotlib, which is not installed: {INSTALL_HINT}"
        ) from None


def plot_source(
    source_path: Path, out_dir: Path, figures: Sequence[str] = ()
) -> list[tuple[str, Path]]:
    """Draw ``figures`` (default: every one the source supports) into ``out_dir``."""
    from ctune.plot.data import load

    require_matplotlib()
    from ctune.plot.figures import FIGURES, JOURNAL_ONLY, save

    unknown = [f for f in figures if f not in FIGURES]
    if unknown:
        raise UserError(
            f"--figure {unknown[0]!r}: no such figure (choose from {', '.join(FIGURES)})"
        )
    source = load(source_path)
    wanted = list(figures) or [
        f for f in FIGURES if source.kind == "journal" or f not in JOURNAL_ONLY
    ]
    if source.kind != "journal":
        needs = [f for f in wanted if f in JOURNAL_ONLY]
        if needs:
            raise UserError(
                f"{source_path}: {needs[0]} needs every evaluation, which only a journal has; "
                "plot the search's journal (its path is in the result's first lines)"
            )
    written = []
    for name in wanted:
        path = Path(out_dir) / f"{source.stem}-{name}.png"
        written.append((name, save(FIGURES[name](source), path)))
    return written


def draw_front_file(journal: Path, path: Path) -> Path:
    """The front figure of ``journal`` at ``path`` (``ctune search --plot``)."""
    from ctune.plot.data import load_journal

    require_matplotlib("--plot")
    from ctune.plot.figures import draw_front, save

    return save(draw_front(load_journal(journal)), path)


__all__ = ["INSTALL_HINT", "draw_front_file", "plot_source", "require_matplotlib"]

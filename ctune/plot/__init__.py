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


#: the image formats a figure is written in, by file suffix, each with the metadata that
#: leaves no timestamp in the file (equal figures are equal files)
IMAGE_FORMATS: dict[str, dict[str, None]] = {
    "png": {"Software": None},
    "pdf": {"CreationDate": None, "Producer": None, "Creator": None},
    "svg": {"Date": None},
}


def image_format(path: Path) -> str:
    """The image format a figure at ``path`` is written in: its suffix, lower case (none,
    as ``/dev/stdout`` has: PNG)."""
    return Path(path).suffix.lstrip(".").lower() or "png"


def check_figure_path(path: Path, option: str) -> None:
    """Refuse before any work a figure path that could not be written at the end: no
    matplotlib (exit 3), a suffix naming no format of :data:`IMAGE_FORMATS`, or a path no
    output can go to (:func:`ctune.writes.check_output`: a folder, a FIFO nobody reads...)."""
    from ctune.writes import check_output

    require_matplotlib(option)
    kind = image_format(path)
    if kind not in IMAGE_FORMATS:
        raise UserError(
            f"{option} {path}: .{kind} is not an image format ctune writes; give a .png, "
            ".pdf or .svg file"
        )
    check_output(path, option)


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


__all__ = [
    "IMAGE_FORMATS",
    "INSTALL_HINT",
    "check_figure_path",
    "draw_front_file",
    "image_format",
    "plot_source",
    "require_matplotlib",
]

"""The four figures of ``ctune plot``, drawn with matplotlib (the ``plot`` extra).

``convergence``, ``front``, ``sensitivity`` and ``distribution``: what each shows and which
source it needs is in docs/results.md. Each function returns a matplotlib Figure;
:func:`save` writes it. Only this module imports matplotlib, and only when a figure is
drawn.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctune.plot.data import Source, convergence, distribution, sensitivity

BASELINE_COLOUR = "tab:red"
FRONT_COLOUR = "tab:blue"
OTHER_COLOUR = "0.7"


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _baseline_value(source: Source, index: int) -> float | None:
    b = source.baseline
    return b.values[index] if b is not None and b.values is not None else None


def draw_convergence(source: Source) -> Any:
    plt = _pyplot()
    series = convergence(source)
    timed = any(t is not None for s in series for t in s.elapsed_s)
    fig, axes = plt.subplots(
        len(series), 2, figsize=(10, 3.2 * len(series)), squeeze=False, sharey="row"
    )
    for row, s in enumerate(series):
        base = _baseline_value(source, row)
        for col, (xs, xlabel) in enumerate(
            ((s.numbers, "evaluations"), (s.elapsed_s, "search time (s)"))
        ):
            ax = axes[row][col]
            if col == 1 and not timed:
                ax.text(
                    0.5,
                    0.5,
                    "no times recorded in this journal",
                    ha="center",
                    va="center",
                    transform=ax.transAxes,
                )
                ax.set_xlabel(xlabel)
                continue
            ax.scatter(xs, s.values, s=12, color=OTHER_COLOUR, label="feasible evaluation")
            ax.step(xs, s.best, where="post", color=FRONT_COLOUR, label="best so far")
            if base is not None:
                ax.axhline(base, color=BASELINE_COLOUR, linestyle="--", label="baseline")
            ax.set_xlabel(xlabel)
            ax.set_ylabel(s.objective.label)
            if row == 0 and col == 0:
                ax.legend(loc="best", fontsize="small")
    fig.suptitle(f"convergence: {source.title}")
    fig.tight_layout()
    return fig


def draw_front(source: Source) -> Any:
    plt = _pyplot()
    objectives = source.objectives
    fig, ax = plt.subplots(figsize=(6.5, 5))
    if len(objectives) >= 2:
        others = [
            p
            for p in source.points
            if p.feasible and p.values is not None and p.key not in {f.key for f in source.front}
        ]
        ax.scatter(
            [p.values[0] for p in others if p.values],
            [p.values[1] for p in others if p.values],
            s=12,
            color=OTHER_COLOUR,
            label="feasible, dominated",
        )
        front = sorted(source.front, key=lambda p: (p.values or (0.0,))[0])
        ax.plot(
            [p.values[0] for p in front if p.values],
            [p.values[1] for p in front if p.values],
            marker="o",
            color=FRONT_COLOUR,
            label="Pareto front",
        )
        pinned = [p for p in front if p.key == source.star and p.values]
        if pinned:
            v = pinned[0].values
            assert v is not None
            ax.scatter(
                [v[0]],
                [v[1]],
                marker="*",
                s=220,
                color="gold",
                edgecolor="k",
                zorder=3,
                label=source.star_label,
            )
        b = source.baseline
        if b is not None and b.values is not None:
            ax.scatter(
                [b.values[0]],
                [b.values[1]],
                marker="X",
                s=90,
                color=BASELINE_COLOUR,
                zorder=3,
                label="baseline (default build)",
            )
        ax.set_xlabel(objectives[0].label)
        ax.set_ylabel(objectives[1].label)
    else:
        members = [p for p, _ in distribution(source)]
        labels = [p.key[:8] + ("*" if p.key == source.star else "") for p in members]
        colours = [BASELINE_COLOUR if b else FRONT_COLOUR for _, b in distribution(source)]
        ax.barh(labels, [(p.values or (0.0,))[0] for p in members], color=colours)
        ax.invert_yaxis()
        ax.set_xlabel(objectives[0].label)
        ax.set_ylabel(f"front member (red: baseline, *: {source.star_label})")
    subject = f"\nsubject to {', '.join(source.constraints)}" if source.constraints else ""
    ax.set_title(f"front: {source.title}{subject}", fontsize="medium", wrap=True)
    if len(objectives) >= 2:
        ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    return fig


def draw_sensitivity(source: Source) -> Any:
    import math

    plt = _pyplot()
    table = sensitivity(source)
    genes = list(table)
    cols = min(3, max(1, len(genes)))
    rows = max(1, math.ceil(len(genes) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows), squeeze=False)
    objective = source.objectives[0]
    base = _baseline_value(source, 0)
    for i, gene in enumerate(genes):
        ax = axes[i // cols][i % cols]
        by_value = table[gene]
        for x, (_label, ys) in enumerate(by_value.items()):
            jitter = [x + 0.25 * ((j * 0.618) % 1 - 0.5) for j in range(len(ys))]
            ax.scatter(jitter, ys, s=10, color=OTHER_COLOUR)
            ys_sorted = sorted(ys)
            ax.plot([x - 0.3, x + 0.3], [ys_sorted[len(ys) // 2]] * 2, color=FRONT_COLOUR)
        if base is not None:
            ax.axhline(base, color=BASELINE_COLOUR, linestyle="--", linewidth=1)
        ax.set_xticks(range(len(by_value)), list(by_value), rotation=30, fontsize="small")
        ax.set_title(gene, fontsize="medium")
        ax.set_ylabel(objective.label)
    for j in range(len(genes), rows * cols):
        axes[j // cols][j % cols].set_visible(False)
    if not genes:
        axes[0][0].set_visible(True)
        axes[0][0].text(
            0.5, 0.5, "no gene took two values among feasible evaluations", ha="center", va="center"
        )
    fig.suptitle(
        f"sensitivity of {objective.name} (median: line, baseline: dashed): {source.title}"
    )
    fig.tight_layout()
    return fig


def draw_distribution(source: Source) -> Any:
    plt = _pyplot()
    members = distribution(source)
    shown: set[str] = set()  # quantile markers already in the legend
    fig, ax = plt.subplots(figsize=(max(7, 1.2 * len(members) + 2), 4.5))
    labels = []
    for x, (p, is_base) in enumerate(members):
        colour = BASELINE_COLOUR if is_base else FRONT_COLOUR
        labels.append(
            p.key[:8] + (" (baseline)" if is_base else "") + (" *" if p.key == source.star else "")
        )
        if p.samples_ms:
            parts = ax.violinplot([list(p.samples_ms)], positions=[x], showmedians=True)
            for name, part in parts.items():
                for piece in part if name == "bodies" else [part]:
                    piece.set_color(colour)
            continue
        q = p.quantiles
        if "p50_ms" not in q:
            continue
        low, high = q.get("min_ms", q["p50_ms"]), q.get("max_ms", q.get("p99_ms", q["p50_ms"]))
        ax.vlines(x, low, high, color=colour)
        for name, marker in (("p50_ms", "o"), ("p95_ms", "_"), ("p99_ms", "^")):
            if name in q:
                label = name[:3] if name not in shown else None
                shown.add(name)
                ax.scatter([x], [q[name]], marker=marker, color=colour, zorder=3, label=label)
    if shown:
        ax.legend(loc="best", fontsize="small", title="no samples kept: quantiles")
    ax.set_xticks(range(len(members)), labels, rotation=20, fontsize="small")
    ax.set_ylabel("latency per call (ms)")
    ax.set_title(f"measured distribution: {source.title}", fontsize="medium", wrap=True)
    fig.tight_layout()
    return fig


FIGURES: dict[str, Callable[[Source], Any]] = {
    "convergence": draw_convergence,
    "front": draw_front,
    "sensitivity": draw_sensitivity,
    "distribution": draw_distribution,
}
#: figures that need every evaluation, which only a journal has
JOURNAL_ONLY = frozenset({"convergence", "sensitivity"})


def save(fig: Any, path: Path) -> Path:
    """Write ``fig`` in the format of ``path``'s suffix, one of ``IMAGE_FORMATS`` (checked
    before: ``check_figure_path``), with no timestamp or random id in the file, so equal
    figures are equal files."""
    import io

    import matplotlib

    from ctune.plot import IMAGE_FORMATS, image_format
    from ctune.writes import write_atomic

    plt = _pyplot()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    kind = image_format(path)
    image = io.BytesIO()  # whole or not at all: a full disk leaves no half image
    with matplotlib.rc_context({"svg.hashsalt": "ctune"}):
        fig.savefig(image, format=kind, dpi=110, metadata=IMAGE_FORMATS[kind])
    plt.close(fig)
    write_atomic(path, image.getvalue(), into_special=True)
    return path


__all__ = ["FIGURES", "JOURNAL_ONLY", "save"]

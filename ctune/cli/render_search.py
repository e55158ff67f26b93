"""Drawing ``ctune search``: the live status line and the final report (rich).

Like ``render.py``, this is a place that prints; the search itself only
emits events (``ctune.search.events``). With ``--json`` nothing is drawn
while searching and the result is printed once, as JSON, on stdout.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctune.cli.render import console, err_console, print_json, warn_line

if TYPE_CHECKING:
    from rich.console import RenderableType

    from ctune.search.events import Progress, SearchEvent
    from ctune.search.result import MemberResult, SearchResult


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _value(v: float | None) -> str:
    return "-" if v is None else f"{v:.4g}"


class SearchDisplay:
    """Receives driver events; draws a live status block (none with ``--json``)."""

    def __init__(self, json_out: bool = False) -> None:
        self.json_out = json_out
        self.objectives: list[str] = []
        self.units: list[str] = []
        self._live: Any = None

    def __enter__(self) -> SearchDisplay:
        if not self.json_out:
            from rich.live import Live

            self._live = Live(console=err_console, auto_refresh=False, transient=True)
            self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def _print(self, text: str) -> None:
        if not self.json_out:
            err_console.print(text, soft_wrap=True, highlight=False)

    def handle(self, event: SearchEvent) -> None:
        from ctune.search import events as ev

        if isinstance(event, ev.Note):
            if event.level == "warning":
                if self.json_out:
                    return
                warn_line(event.message)
            else:
                self._print(f"[dim]{event.message}[/]")
        elif isinstance(event, ev.SearchStarted):
            self.objectives = list(event.objective_texts)
            budget = f"{event.budget} evaluations" if event.budget else "no evaluation cap"
            if event.time_budget_s:
                budget += f", {_duration(event.time_budget_s)}"
            approx = "" if event.valid_exact else "about "
            self._print(
                f"[bold]ctune search[/] {event.kernel} / {event.problem}: {event.objectives}; "
                f"{event.strategy}, {budget}; {approx}{event.valid_candidates:,} valid "
                f"candidates; {event.jobs} parallel compiles"
            )
            resumed = f" (resumed {event.resumed_trials} trials)" if event.resumed_trials else ""
            self._print(
                f"journal: {event.journal}{resumed}  (continue with --resume {event.journal})"
            )
        elif isinstance(event, ev.BaselineMeasured):
            t = event.trial
            values = ", ".join(_value(v) for v in (t.values or ()))
            self._print(f"baseline {t.candidate.key()} (default build): {values}")
        elif isinstance(event, (ev.TrialFinished, ev.GenerationFinished)):
            self._update(event.progress)
        elif isinstance(event, ev.Confirming):
            self._print(
                f"confirming {event.members} front member(s) and the baseline in "
                f"{event.processes} fresh processes, interleaved ..."
            )

    def _update(self, p: Progress) -> None:
        if self._live is not None:
            self._live.update(status_block(p, self.objectives), refresh=True)


def status_block(p: Progress, objectives: list[str]) -> RenderableType:
    from rich.table import Table

    grid = Table.grid(padding=(0, 2))
    budget = f"/{p.budget}" if p.budget is not None else ""
    grid.add_row(
        f"[bold]generation[/] {p.generation}",
        # the budget counts what the strategy asked for; fillers are extra
        f"[bold]evaluations[/] {p.evaluations - p.fillers}{budget}"
        + (f" + {p.fillers} fillers" if p.fillers else ""),
        f"[bold]cached[/] {p.cached}",
        f"[bold]elapsed[/] {_duration(p.elapsed_s)}",
        f"[bold]ETA[/] {_duration(p.eta_s)}",
    )
    failures = ", ".join(f"{k} {v}" for k, v in sorted(p.failures.items())) or "none"
    best = "-"
    if p.best is not None:
        best = ", ".join(f"{name} {_value(v)}" for name, v in zip(objectives, p.best, strict=False))
    elif p.hypervolume is not None:
        best = f"hypervolume {p.hypervolume:.4f} (vs baseline-normalised reference)"
    grid.add_row(
        f"[bold]failures[/] {failures}",
        f"[bold]infeasible[/] {p.infeasible}",
        f"[bold]front[/] {p.front_size}",
        f"[bold]best[/] {best}",
        "",
    )
    return grid


# --- the final report -----------------------------------------------------------------------


def _gain_text(m: MemberResult) -> str:
    if m.gain is None:
        return "-"
    g = m.gain
    return f"{g.ratio:.3f}x [{g.low:.3f}, {g.high:.3f}]"


def _sig_text(m: MemberResult) -> str:
    s = m.significance
    if s is None or s.effect is None:
        return "-"
    if s.verdict == "faster":
        return f"[green]faster {s.effect:+.1%}[/]"
    if s.verdict == "slower":
        return f"[red]slower {s.effect:+.1%}[/]"
    return f"[dim]n.s. {s.effect:+.1%}[/]"


def _changed(m: MemberResult, baseline_key: str | None) -> str:
    if m.key == baseline_key:
        return "(default build)"
    return " ".join(f"{k}={v}" for k, v in m.changed.items()) or "(default build)"


def _resources(m: MemberResult) -> str:
    r = m.resources()
    if not r:
        return "-"

    def show(v: object) -> str:
        return "?" if v is None else str(v)

    return f"{show(r.get('regs'))}/{show(r.get('spills_bytes'))}/{show(r.get('smem_bytes'))}"


def final_report(result: SearchResult, json_out: bool) -> None:
    if json_out:
        print_json(result.to_json())
        return
    from rich.table import Table

    heads = [f"{o['name']} ({o['direction']}, {o['unit']})" for o in result.objectives]
    title = (
        f"{result.kernel} / {result.problem} on {result.device}: {len(result.front)} on the front"
    )
    table = Table(title=title)
    table.add_column("key", no_wrap=True)
    table.add_column("changed vs default", overflow="fold", ratio=3)
    for h in heads:
        table.add_column(h, justify="right")
    table.add_column(f"gain {result.objectives[0]['name']} [95% CI]", overflow="fold")
    table.add_column("p50 vs base", overflow="fold")
    table.add_column("regs/spill/smem", overflow="fold")
    base_key = result.baseline.key if result.baseline is not None else None
    for m in result.front:
        key = m.key + (" [bold yellow]*[/]" if m.key == result.pinned else "")
        table.add_row(
            key,
            _changed(m, base_key),
            *(_value(v) for v in m.values),
            _gain_text(m),
            _sig_text(m),
            _resources(m),
        )
    if result.baseline is not None:
        b = result.baseline
        table.add_row(
            f"[dim]{b.key}[/]",
            "[dim]baseline: the default build[/]",
            *(_value(v) for v in b.values),
            "1x",
            "",
            _resources(b),
        )
    console.print(table)
    if result.pinned:
        console.print(
            f"[bold yellow]*[/] pinned: {result.pinned} (best {result.objectives[0]['name']})"
        )
    if result.confirm_processes and not result.interrupted:
        console.print(
            f"values re-measured in {result.confirm_processes} fresh processes; "
            "faster/slower = Mann-Whitney p < 0.01 and effect > max(2%, 5 x "
            "between-process CV), else n.s.; gain CI: hierarchical bootstrap"
        )
    elif not result.interrupted:
        console.print("[dim]values from the search itself (not re-measured)[/]")
    for key, why in result.dropped:
        console.print(f"[yellow]dropped[/] {key}: {why}")
    failures = ", ".join(f"{k} {v}" for k, v in sorted(result.failures.items())) or "none"
    console.print(
        f"[bold]evaluations[/] {result.evaluations - result.fillers}"
        + (f"/{result.budget}" if result.budget else "")
        + (
            f" + {result.fillers} fillers (runtime-gene variants measured while builds compiled)"
            if result.fillers
            else ""
        )
        + f" in {result.generations} generations ({result.strategy}, seed "
        f"{result.seed}); stopped: {result.stop_reason}; cached {result.cached}"
    )
    console.print(f"[bold]failures[/] {failures}; infeasible {result.infeasible}")
    t = result.timing
    console.print(
        f"[bold]time[/] {_duration(t.wall_s)} wall = compile wait {_duration(t.compile_wait_s)}"
        f" + measure {_duration(t.measure_s)} + confirm {_duration(t.confirm_s)} + overhead "
        f"{_duration(t.overhead_s)}; GPU busy {t.gpu_busy_fraction:.0%}; "
        f"compiler CPU {_duration(t.compile_cpu_s)}"
    )
    if result.interrupted:
        console.print(
            f"[yellow]interrupted[/]: nothing written; resume with --resume {result.journal}"
        )
    else:
        console.print(f"[bold]journal[/] {result.journal}")
    if result.artifact_path is not None:
        console.print(
            f"[bold]result[/] {result.artifact_path} "
            "(ctune registry import FILE adds it to the registry)"
        )
    if result.commit:
        console.print(f"[bold]committed[/] {result.commit}")


def plot_front(result: SearchResult, path: Path) -> None:
    """A PNG of the front and the baseline (first two objectives); needs matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        warn_line("--plot needs matplotlib (pip install 'ctune[plot]'); no plot written")
        return
    names = [f"{o['name']} ({o['unit']})" for o in result.objectives]
    fig, ax = plt.subplots(figsize=(6, 4.5))
    front = list(result.front)
    if len(names) >= 2:
        ax.scatter([m.values[0] for m in front], [m.values[1] for m in front], label="front")
        if result.baseline is not None:
            ax.scatter(
                [result.baseline.values[0]],
                [result.baseline.values[1]],
                marker="x",
                color="red",
                label="baseline",
            )
        ax.set_xlabel(names[0])
        ax.set_ylabel(names[1])
    else:
        members = ([result.baseline] if result.baseline else []) + front
        ax.bar([m.key[:8] for m in members], [m.values[0] for m in members])
        ax.set_ylabel(names[0])
    ax.set_title(f"{result.kernel} / {result.problem}")
    if len(names) >= 2:
        ax.legend(loc="best")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    console.print(f"[bold]plot[/] {path}")

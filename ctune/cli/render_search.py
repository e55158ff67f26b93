"""Drawing ``ctune search``: the live status line and the final report (rich).

Like ``render.py``, this is a place that prints; the search itself only
emits events (``ctune.search.events``). On a terminal the status is a live
block on stderr; where stderr is not a terminal (a CI log, a file) it is one
line per generation instead. With ``--format json`` nothing else is said while
searching and the result is printed once, as JSON, on stdout.

The front is a table where it fits the terminal as it is; on a narrow one
(80 columns, or ``COLUMNS=80``) each member gets its own block instead: the
key and its values on one line, the genes it changes on the next, never
squeezed into folded columns. Output to a file or pipe has no width to fit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.text import Text

from ctune.cli.render import Part, console, err_console, line, report, styled, warn_line
from ctune.evidence.compare import Difference, NoiseRule

if TYPE_CHECKING:
    from rich.console import RenderableType

    from ctune.search.events import Progress, SearchEvent
    from ctune.search.feasibility import ConstraintReport, Feasibility
    from ctune.search.result import MemberResult, SearchResult, VendorVerdict


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
    """Receives driver events; draws a live status block on a terminal (none with
    ``--format json``), else prints one progress line per generation."""

    def __init__(self, fmt: str = "table") -> None:
        self.quiet = fmt != "table"  # stdout holds a document: only the generation lines
        self.objectives: list[str] = []
        self.units: list[str] = []
        self._live: Any = None
        self._lines = not err_console.is_terminal

    def __enter__(self) -> SearchDisplay:
        if not self.quiet and not self._lines:
            from rich.live import Live

            self._live = Live(console=err_console, auto_refresh=False, transient=True)
            self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def _print(self, *parts: Part) -> None:
        if not self.quiet:
            line(*parts, stderr=True)

    def handle(self, event: SearchEvent) -> None:
        from ctune.search import events as ev

        if isinstance(event, ev.Note):
            if event.level == "warning":
                if self.quiet:
                    return
                warn_line(event.message)
            else:
                self._print((event.message, "dim"))
        elif isinstance(event, ev.SearchStarted):
            self.objectives = list(event.objective_texts)
            budget = f"budget {event.budget} distinct binaries" if event.budget else "no budget cap"
            if event.time_budget_s:
                budget += f", {_duration(event.time_budget_s)}"
            approx = "" if event.valid_exact else "about "
            self._print(
                ("ctune search", "bold"),
                f" {event.kernel} / {event.problem}: {event.objectives}; "
                f"{event.strategy}, {budget}; {approx}{event.valid_candidates:,} valid "
                f"candidates; {event.jobs} parallel compiles",
            )
            resumed = f" (resumed {event.resumed_trials} trials)" if event.resumed_trials else ""
            self._print(
                f"journal: {event.journal}{resumed}  (continue with --resume {event.journal})"
            )
        elif isinstance(event, ev.BaselineMeasured):
            t = event.trial
            values = ", ".join(_value(v) for v in (t.values or ()))
            self._print(f"baseline {t.candidate.key()} (default build): {values}")
        elif isinstance(event, ev.TrialFinished):
            self._update(event.progress)
        elif isinstance(event, ev.GenerationFinished):
            self._update(event.progress)
            if self._lines:
                line(generation_line(event.progress, self.objectives), stderr=True)
        elif isinstance(event, ev.Confirming):
            self._print(
                f"confirming {event.members} front member(s) and the baseline in "
                f"{event.processes} fresh processes, interleaved ..."
            )

    def _update(self, p: Progress) -> None:
        if self._live is not None:
            self._live.update(status_block(p, self.objectives), refresh=True)


def _evaluations(p: Progress) -> str:
    budget = f"/{p.budget}" if p.budget is not None else ""
    # the budget counts GPU measurements; fillers, candidates that reused an identical
    # binary's measurement and those the cost model skipped are extra
    return (
        f"{p.evaluations - p.fillers - p.reused - p.skipped}{budget}"
        + (f" + {p.reused} same binary" if p.reused else "")
        + (f" + {p.fillers} fillers" if p.fillers else "")
        + (f" + {p.skipped} skipped" if p.skipped else "")
    )


def _best(p: Progress, objectives: list[str]) -> str:
    if p.best is not None:
        return ", ".join(f"{name} {_value(v)}" for name, v in zip(objectives, p.best, strict=False))
    if p.hypervolume is not None:
        return f"hypervolume {p.hypervolume:.4f} (vs baseline-normalised reference)"
    return "-"


def generation_line(p: Progress, objectives: list[str]) -> str:
    """The status as one line, for a log: ``generation 3: evaluations 24/30, best p99
    0.0123, front 1, elapsed 12s``."""
    return (
        f"generation {p.generation}: evaluations {_evaluations(p)}, "
        f"best {_best(p, objectives)}, front {p.front_size}, elapsed {_duration(p.elapsed_s)}"
    )


def status_block(p: Progress, objectives: list[str]) -> RenderableType:
    """Two lines of "label value" pairs; a narrow terminal wraps them between pairs."""
    failures = ", ".join(f"{k} {v}" for k, v in sorted(p.failures.items())) or "none"
    best = _best(p, objectives)
    rows = [
        [
            ("generation", str(p.generation)),
            ("evaluations", _evaluations(p)),
            ("cached", str(p.cached)),
            ("elapsed", _duration(p.elapsed_s)),
            ("ETA", _duration(p.eta_s)),
        ],
        [
            ("failures", failures),
            ("infeasible", str(p.infeasible)),
            ("front", str(p.front_size)),
            ("best", best),
        ],
    ]
    text = Text()
    for i, row in enumerate(rows):
        if i:
            text.append("\n")
        for j, (label, value) in enumerate(row):
            text.append_text(styled("  " if j else "", (label, "bold"), f" {value}"))
    return text


# --- the final report -----------------------------------------------------------------------


def _gain_text(m: MemberResult) -> str:
    if m.gain is None:
        return "-"
    g = m.gain
    return f"{g.ratio:.3f}x [{g.low:.3f}, {g.high:.3f}]"


def verdict_word(difference: str) -> tuple[str, str]:
    """How a comparison by the gate's rule reads, and its style: faster, slower, else n.s."""
    if difference == Difference.LOWER.value:
        return "faster", "green"
    if difference == Difference.HIGHER.value:
        return "slower", "red"
    return "n.s.", "dim"


def _sig_text(m: MemberResult) -> Text:
    s = m.significance
    if s is None or math.isnan(s.change):
        return Text("-")
    word, style = verdict_word(s.difference.value)
    return styled((f"{word} {s.change:+.1%}", style))


def _vendor_line(v: VendorVerdict) -> None:
    """The pinned build against the spec's vendor call, as the gain line reads: the vendor's
    value over the pinned build's (> 1: the pinned build is better), its CI, the verdict."""
    label = (f"vs {v.name}", "bold")
    if v.error or v.gain is None:
        line(label, f" not compared: {v.error or 'no interval'}")
        return
    g = v.gain
    word, style = verdict_word(v.difference)
    line(
        label,
        f" {v.member}: {g.ratio:.3f}x {g.objective} [{g.low:.3f}, {g.high:.3f}], ",
        (word, style),
        f" ({v.member_value:.4g} against {v.vendor_value:.4g}, {v.processes} processes)",
    )


#: how the baseline's row is labelled (on the front or below it)
_BASELINE = "baseline: the default build"


def _changed(m: MemberResult, baseline_key: str | None) -> str:
    if m.key == baseline_key:
        return _BASELINE
    return " ".join(f"{k}={v}" for k, v in m.changed.items()) or "(default build)"


def _resources(m: MemberResult) -> str:
    r = m.resources()
    if not r:
        return "-"

    def show(v: object) -> str:
        return "?" if v is None else str(v)

    return f"{show(r.get('regs'))}/{show(r.get('spills_bytes'))}/{show(r.get('smem_bytes'))}"


def _title(result: SearchResult) -> str:
    where = "compile-only (nothing ran on a GPU)" if result.compile_only else f"on {result.device}"
    return f"{result.kernel} / {result.problem} {where}: {len(result.front)} on the front"


@dataclass(frozen=True)
class _Row:
    """One front member's (or the baseline's) cells: both layouts draw these."""

    key: str
    pinned: bool
    changed: str
    values: list[str]
    gain: str
    sig: Text
    resources: str
    baseline: bool


def _rows(result: SearchResult) -> list[_Row]:
    """The front's rows, then the baseline's unless it is on the front (listed once: its
    front row is labelled as the baseline, with no comparison against itself)."""
    base_key = result.baseline.key if result.baseline is not None else None
    rows = [
        _Row(
            m.key,
            m.key == result.pinned,
            _changed(m, base_key),
            [_value(v) for v in m.values],
            "1x" if m.key == base_key else _gain_text(m),
            Text("") if m.key == base_key else _sig_text(m),
            _resources(m),
            False,
        )
        for m in result.front
    ]
    if result.baseline is not None and result.member(result.baseline.key) is None:
        b = result.baseline
        rows.append(
            _Row(
                b.key,
                False,
                _BASELINE,
                [_value(v) for v in b.values],
                "1x",
                Text(""),
                _resources(b),
                True,
            )
        )
    return rows


def _has_gain(result: SearchResult) -> bool:
    """A gain was estimated (the confirmation re-measured the front on the GPU)."""
    return any(m.gain is not None for m in result.front)


def _has_significance(result: SearchResult) -> bool:
    return any(m.significance is not None for m in result.front)


def _wide_table(result: SearchResult, rows: list[_Row]) -> Any:
    """The front as a table; the gain and p50 columns only where they were measured."""
    from rich.table import Table

    gain, sig = _has_gain(result), _has_significance(result)
    table = Table(title=_title(result))
    table.add_column("key", no_wrap=True)
    table.add_column("changed vs default", no_wrap=True)
    for o in result.objectives:
        table.add_column(f"{o['name']} ({o['direction']}, {o['unit']})", justify="right")
    if gain:
        table.add_column(f"gain {result.objectives[0]['name']} [95% CI]", no_wrap=True)
    if sig:
        table.add_column("p50 vs base", no_wrap=True)
    table.add_column("regs/spill/smem", no_wrap=True)
    for row in rows:
        dim = "dim" if row.baseline else ""
        key = styled((row.key, dim), (" *", "bold yellow") if row.pinned else "")
        table.add_row(
            key,
            styled((row.changed, dim)),
            *row.values,
            *([row.gain] if gain else []),
            *([row.sig] if sig else []),
            row.resources,
        )
    return table


def _fits(table: Any) -> bool:
    from rich.measure import Measurement

    natural = Measurement.get(console, console.options.update_width(10_000), table).maximum
    return natural <= console.width


def _narrow_front(result: SearchResult, rows: list[_Row]) -> None:
    """Each member as a block: key and values, the genes it changes, then its evidence."""
    line((_title(result), "bold"))
    names = [f"{o['name']} ({o['unit']})" for o in result.objectives]
    gain_name, gain = result.objectives[0]["name"], _has_gain(result)
    for row in rows:
        mark: Part = ("* ", "bold yellow") if row.pinned else "  "
        values = "  ".join(f"{n} {v}" for n, v in zip(names, row.values, strict=True))
        style = "dim" if row.baseline else "bold"
        console.print(styled(mark, (row.key, style), "  ", values))
        console.print(styled("    ", (row.changed, "dim" if row.baseline else "")))
        evidence = Text("    ")
        if gain and not row.baseline:
            evidence.append_text(styled(f"gain {gain_name} {row.gain}  "))
        if row.sig.plain not in ("", "-"):
            evidence.append_text(styled("p50 "))
            evidence.append_text(row.sig)
            evidence.append("  ")
        evidence.append_text(styled(f"regs/spill/smem {row.resources}"))
        console.print(evidence)


def final_report(result: SearchResult, fmt: str) -> None:
    report(fmt, result.to_json, lambda: _final_table(result))


def _final_table(result: SearchResult) -> None:
    rows = _rows(result)
    table = _wide_table(result, rows)
    if _fits(table):
        console.print(table)
    else:
        _narrow_front(result, rows)
    if result.pinned:
        line(
            ("*", "bold yellow"), f" pinned: {result.pinned} (best {result.objectives[0]['name']})"
        )
    if result.controls is not None:
        v = result.controls
        kept = "kept" if v.pinned else "not pinned"
        line(
            ("controls file", "bold"),
            f" {v.member} against its build without one ({v.reference}): {v.gain:.3f}x, "
            f"{v.difference}; {kept}",
        )
    if result.vendor is not None:
        _vendor_line(result.vendor)
    if result.confirm_processes and not result.interrupted:
        line(
            f"values re-measured in {result.confirm_processes} fresh processes; "
            f"faster/slower = {NoiseRule().describe()}, else n.s.; "
            "gain CI: hierarchical bootstrap"
        )
        if result.confirmation is not None:
            c = result.confirmation
            line(
                ("confirmation", "bold"),
                f" {c.processes} of at most {c.limit} processes, {c.measurements} "
                f"measurements of {c.members} member(s) and the baseline in "
                f"{_duration(c.seconds)}; stopped: {c.stopped}",
            )
    elif result.compile_only:
        line(("values read from the builds: exact, nothing to re-measure", "dim"))
    elif not result.interrupted:
        line(("values from the search itself (not re-measured)", "dim"))
    for key, why in result.dropped:
        line(("dropped", "yellow"), f" {key}: {why}")
    failures = ", ".join(f"{k} {v}" for k, v in sorted(result.failures.items())) or "none"
    line(
        ("evaluations", "bold"),
        f" {result.evaluations - result.fillers - result.reused - result.skipped}"
        + (f"/{result.budget}" if result.budget else "")
        + (
            f" + {result.fillers} fillers (runtime-gene variants measured while builds compiled)"
            if result.fillers
            else ""
        )
        + (f" + {result.skipped} skipped by the cost model" if result.skipped else "")
        + f" in {result.generations} generations ({result.strategy}, seed "
        f"{result.seed}); stopped: {result.stop_reason}; cached {result.cached}",
    )
    line(("binaries", "bold"), " " + binaries_line(result))
    line(("failures", "bold"), f" {failures}; infeasible {result.infeasible}")
    if result.feasibility is not None:
        feasibility_report(result, result.feasibility)
    line(("time", "bold"), " " + time_line(result))
    line(("journal", "bold"), f" {result.journal}")  # interrupted: main() says what it keeps
    if result.artifact_path is not None:
        line(
            ("result", "bold"),
            f" {result.artifact_path} (ctune registry import FILE adds it to the registry)",
        )
    if result.commit:
        before = " (before this resume: not committed again)" if result.committed_before else ""
        line(("committed", "bold"), f" {result.commit}{before}")


def time_line(result: SearchResult) -> str:
    """Where the wall time went; a compile-only search has no GPU time to account for."""
    t = result.timing
    if result.compile_only:
        return (
            f"{_duration(t.wall_s)} wall = compile wait {_duration(t.compile_wait_s)} + "
            f"overhead {_duration(t.overhead_s)}; compiler CPU {_duration(t.compile_cpu_s)}"
        )
    return (
        f"{_duration(t.wall_s)} wall = compile wait {_duration(t.compile_wait_s)}"
        f" + measure {_duration(t.measure_s)} + confirm {_duration(t.confirm_s)} + overhead "
        f"{_duration(t.overhead_s)}; GPU busy {t.gpu_busy_fraction:.0%}; "
        f"compiler CPU {_duration(t.compile_cpu_s)}"
    )


def binaries_line(result: SearchResult) -> str:
    """ "N candidates -> M distinct binaries measured": what dedup (search/dedup.py) saved,
    and what pruning stopped early when it stopped any."""
    from ctune.records import Outcome

    unbuilt = sum(n for o, n in result.failures.items() if Outcome(o).is_build_failure)
    if result.compile_only:
        distinct, reused = "distinct binaries", "compiled to a binary built already"
    else:
        distinct, reused = (
            "distinct binaries measured",
            "took the measurement of an identical binary",
        )
    parts = [f"{result.reused} {reused}", f"{unbuilt} failed to build"]
    if result.pruned:
        parts.append(
            f"{result.pruned} pruned: clearly slower than the leader on their first samples"
        )
    if result.skipped:
        parts.append(f"{result.skipped} never built: the cost model ruled them out")
    return f"{result.evaluations} candidates -> {result.binaries} {distinct} ({'; '.join(parts)})"


# --- what the constraints did --------------------------------------------------------------


def _with_unit(value: float | None, unit: str) -> str:
    return "?" if value is None else f"{value:.4g} {unit}"


def _constraint_lines(result: SearchResult, c: ConstraintReport) -> None:
    from ctune.search.feasibility import loosened

    if c.measured == 0:
        line(f"  {c.text}: {c.term} was not measured for any candidate")
        return
    base = "" if c.baseline is None else f"; baseline {_with_unit(c.baseline, c.unit)}"
    base += "" if c.baseline_ok else ", which breaks it"
    line(
        f"  {c.text}: broken by {c.broken} of {c.measured} measured; {c.term} measured "
        f"{_with_unit(c.low, c.unit)} to {_with_unit(c.high, c.unit)}{base}"
    )
    if c.relax is None:
        return
    first = result.objectives[0]
    feasible = [m.values[0] for m in result.front]
    best = (max if first["direction"] == "max" else min)(feasible) if feasible else None
    versus = (
        f" (the constraints allow {best:.4g} {first['unit']} at best)"
        if best is not None
        else " (the constraints allow none)"
    )
    op = loosened(c.op)
    line(
        f"    relaxing it to {c.term}{op}{c.relax.bound:.4g}{c.unit} would admit "
        f"{c.relax.admits} more, the best at {first['name']} "
        f"{c.relax.values[0]:.4g} {first['unit']}{versus}"
    )


def feasibility_report(result: SearchResult, f: Feasibility) -> None:
    """What the constraints ruled out, and the verdict when nothing left is worth pinning."""
    if not f.notable:
        return
    who = "the baseline (default build) among them" if not f.baseline_feasible else ""
    line(
        ("constraints", "bold yellow"),
        f" rule out {f.infeasible} of {f.evaluated} measured candidates"
        + (f", {who}" if who else ""),
    )
    for c in f.constraints:
        _constraint_lines(result, c)
    if f.dominated:
        names = " and ".join(o["name"] for o in result.objectives)
        broken = ", ".join(c.text for c in f.constraints if not c.baseline_ok) or "a constraint"
        line(
            ("inconclusive", "bold red"),
            f": every build the constraints allow is worse than the default build on {names}; "
            f"the default build breaks {broken}. Nothing pinned: relax the constraint or "
            "accept the default build.",
        )
    elif f.empty:
        line(
            ("inconclusive", "bold red"),
            ": no measured candidate meets the constraints. Nothing pinned: relax them.",
        )


def check_plot_path(path: Any) -> None:
    """Fail before a search starts when ``--plot`` cannot be honoured: matplotlib missing,
    an image format it does not write, a path no figure can be written to."""
    from pathlib import Path

    from ctune.plot import check_figure_path

    check_figure_path(Path(path), "--plot")


def plot_front(result: SearchResult, path: Any, fmt: str = "table") -> None:
    """The front figure of the search's journal at ``path`` (``ctune plot`` draws the rest);
    said on stderr when stdout holds the JSON report."""
    from pathlib import Path

    from ctune.cli.render import progress_line
    from ctune.plot import draw_front_file

    written = draw_front_file(Path(result.journal), Path(path))
    progress_line(fmt, ("plot", "bold"), f" {written}")

"""A run's ``SearchResult``: its confirmed front (or, interrupted, the measured one) and
everything the report says about how the search went."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctune.search.result import SearchResult

if TYPE_CHECKING:
    from ctune.search.confirm_stage import ConfirmStage
    from ctune.search.journal_writer import JournalWriter
    from ctune.search.run_state import SearchRun


def search_result(
    run: SearchRun, stage: ConfirmStage, writer: JournalWriter, interrupted: bool
) -> SearchResult:
    """Confirm the front (unless interrupted) and assemble the result; a confirmation a
    Ctrl-C stopped leaves the search's own front, reported as interrupted (its rounds are
    in the journal, for ``--resume``)."""
    book = run.book
    dropped: list[tuple[str, str]] = []
    if not interrupted and book.baseline is not None:
        base, front, dropped = stage.confirm()
        if stage.interrupted():
            interrupted, dropped = True, []
    if interrupted or book.baseline is None:
        base, front = stage.unconfirmed()
    failures, infeasible = book.failures()
    journal = writer.journal
    assert journal is not None
    feasibility = None
    if book.baseline is not None:
        from ctune.search.feasibility import analyze

        feasibility = analyze(
            book.trials, run.inputs.objective, run.inputs.problem.dims, book.baseline, front, base
        )
    objective = run.inputs.objective
    pinned = stage.pinned(front, feasibility)
    vendor = None
    if not interrupted and pinned is not None:
        vendor = stage.against_vendor(next(m for m in front if m.key == pinned))
    return SearchResult(
        kernel=run.inputs.spec.name,
        problem=run.inputs.problem.name,
        objectives=tuple(
            {**o, "text": obj.text}
            for o, obj in zip(objective.infos(), objective.objectives, strict=True)
        ),
        constraints=tuple(c.text for c in objective.constraints),
        strategy=run.inputs.strategy_name,
        seed=run.inputs.search_plan.seed,
        journal=journal.path,
        evaluations=len(book.trials),
        budget=run.budget.limit,
        generations=run.status.generation,
        stop_reason="interrupted" if interrupted else run.status.stop_reason,
        baseline=base,
        front=tuple(front),
        pinned=pinned,
        timing=run.timers.timing(),
        device=writer.device or "unknown",
        failures=failures,
        infeasible=infeasible,
        cached=book.cached,
        fillers=book.fillers,
        dropped=tuple(dropped),
        notes=tuple(run.notices.notes),
        confirm_processes=stage.cost.processes if stage.cost else 0,
        confirmation=stage.cost,
        binaries=book.binaries.binaries,
        reused=book.reused_asked,
        skipped=book.skipped,
        pruned=sum(1 for t in book.trials if t.measurement is not None and t.measurement.pruned),
        plan=run.inputs.search_plan.to_json(),
        feasibility=feasibility,
        confirmation_rounds=writer.rounds,
        controls=stage.controls,
        vendor=vendor,
    )


__all__ = ["search_result"]

"""One search over a problem set: the best build per shape, then a few builds for all shapes.

Three phases, each resumable from the set's folder, so a long set runs as several calls
that each fit a wall-time step (``step_s``; a GPU lent for minutes at a time): **search**
(``run_search`` per shape, warm-started from what the earlier shapes of its group
measured), **cross** (every finalist measured on every shape of its group, interleaved in
fresh processes) and **cover** (``dispatch.greedy_cover``: the fewest compiled builds
within ``margin`` of each shape's best). What each phase does and writes: docs/dispatch.md.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctune.errors import UserError
from ctune.interrupts import Interrupted
from ctune.records import Candidate
from ctune.sets import dispatch
from ctune.sets.set_layout import (
    FINALISTS,
    MATRIX,
    OWNER,
    VENDOR_BUILD,
    WINNERS,
    SetOptions,
    bad_state,
    build_id,
    read_owner,
    read_rows,
    read_state,
)
from ctune.writes import write_atomic

if TYPE_CHECKING:
    from ctune.compile.contract import Compiler
    from ctune.config import Settings
    from ctune.objective.spec import ObjectiveSpec
    from ctune.records import Build, Measurement
    from ctune.search import Publisher
    from ctune.search.driver import EventSink, SearchOptions
    from ctune.spec import KernelSpec, Problem


@dataclass(frozen=True)
class SetProgress:
    """Where the set stands after a call."""

    set_name: str
    set_dir: Path
    searched: tuple[str, ...]
    pending: tuple[str, ...]  # shapes not searched yet
    missing_cells: int  # finalist x shape cells still to measure
    cover: dispatch.Cover | None
    table: Path | None = None
    header: Path | None = None
    notes: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        return self.cover is not None

    def to_json(self) -> dict[str, Any]:
        c = self.cover
        return {
            "set": self.set_name,
            "set_dir": str(self.set_dir),
            "complete": self.complete,
            "searched": list(self.searched),
            "pending": list(self.pending),
            "missing_cells": self.missing_cells,
            "builds": list(c.builds) if c else None,
            "shipped": list(c.shipped) if c else None,
            "max_loss_vs_per_shape_best": c.max_loss if c else None,
            "table": str(self.table) if self.table else None,
            "header": str(self.header) if self.header else None,
            "notes": list(self.notes),
        }


def group_of(problem: Problem) -> str:
    """A problem's compile group: its defines (builds of different groups differ)."""
    return ",".join(f"{k}={v}" for k, v in sorted(problem.defines.items()))


def check_set(spec: KernelSpec, set_name: str, objective: ObjectiveSpec) -> list[Problem]:
    """The set's problems; refuses what a dispatch table cannot be built from."""
    if set_name not in spec.problem_sets:
        known = ", ".join(sorted(spec.problem_sets)) or "none"
        raise UserError(
            f"{spec.yaml_path}: no problem set '{set_name}' (known: {known}); add it under "
            "problem_sets"
        )
    if len(objective.objectives) != 1:
        raise UserError(
            "--problem-set needs exactly one objective (a dispatch table ranks builds by one "
            f"number); got {len(objective.objectives)}"
        )
    if not objective.measures:
        raise UserError("--problem-set needs a measured objective (p50, p99, ...), not a build one")
    return [spec.problem(n) for n in spec.problem_sets[set_name]]


def check_vendor(spec: KernelSpec, opts: SetOptions) -> None:
    """Refuses ``--dispatch-vendor`` for a spec that names no vendor call."""
    if opts.vendor and spec.vendor_path is None:
        raise UserError(
            f"--dispatch-vendor: {spec.yaml_path} names no vendor call; add a 'vendor' key "
            "(docs/spec-format.md) or leave the option out"
        )


class _Clock:
    """The call's step: may another shape start?"""

    def __init__(self, step_s: float | None, clock: Callable[[], float]) -> None:
        self.step_s, self.clock, self.start = step_s, clock, clock()
        self.longest = 0.0
        self.ran = 0

    def may_start(self) -> bool:
        if self.step_s is None or self.ran == 0:
            return True
        return self.step_s - (self.clock() - self.start) >= self.longest

    def left(self) -> float | None:
        return None if self.step_s is None else self.step_s - (self.clock() - self.start)

    def timed(self, began: float) -> None:
        self.ran += 1
        self.longest = max(self.longest, self.clock() - began)


def artifact_path(opts: SetOptions, spec: KernelSpec, problem: Problem) -> Path:
    return opts.set_dir / "artifacts" / f"{spec.name}-{problem.name}.json"


def read_winners(opts: SetOptions, spec: KernelSpec | None = None) -> dict[str, Candidate]:
    """Searched shape -> its winner (the pinned member, else the default build); with
    ``spec``, each winner's genes must be the spec's values (they are built again)."""
    path = opts.set_dir / WINNERS
    if not path.is_file():
        return {}
    listed = read_state(path, "problem-set winners").get("winners")
    if not isinstance(listed, dict):
        raise bad_state(path, "'winners'", "is not an object (shape: winner)")
    winners = {str(shape): _winner(path, str(shape), data) for shape, data in listed.items()}
    if spec is not None:
        for shape, winner in winners.items():
            spec.space.check_values(winner.as_dict(), f"{path}: the winner of {shape}")
    return winners


def _winner(path: Path, shape: str, data: Any) -> Candidate:
    """One entry of winners.json: ``{"kernel": str, "genes": {...}}``."""
    if not isinstance(data, dict) or not isinstance(data.get("kernel"), str):
        raise bad_state(path, f"winners.{shape}", "is not a winner (kernel and genes)")
    if not isinstance(data.get("genes"), dict):
        raise bad_state(path, f"winners.{shape}.genes", "is not an object")
    return Candidate.from_json(data)


def check_owner(spec: KernelSpec, opts: SetOptions) -> None:
    """Refuses a folder holding another kernel's or another set's search: its winners and
    matrix would be taken for this set's (and its table would name the other's builds)."""
    owner = read_owner(opts.set_dir)
    if owner is not None:
        other = "" if owner == (spec.name, opts.set_name) else f"kernel {owner[0]}'s set {owner[1]}"
    else:
        other = _legacy_owner(spec, opts)
    if other:
        raise UserError(
            f"{opts.set_dir}: holds {other}, not {spec.name}'s set {opts.set_name}; use another "
            "--set-dir"
        )


def _legacy_owner(spec: KernelSpec, opts: SetOptions) -> str:
    """A folder without ``set.json`` (written before folders recorded it): another kernel
    its winners or files name, else ""."""
    kernels = {w.kernel for w in read_winners(opts).values()}
    for name in (MATRIX, FINALISTS):
        if (opts.set_dir / name).is_file():
            kernel = read_state(opts.set_dir / name, "problem-set file").get("kernel")
            kernels |= {kernel} if isinstance(kernel, str) else set()
    others = sorted(kernels - {spec.name})
    return f"kernel {others[0]}'s search" if others else ""


def _record_owner(spec: KernelSpec, opts: SetOptions) -> None:
    """Writes ``set.json`` (kernel, set, the spec file) once: what ``check_owner`` reads."""
    path = opts.set_dir / OWNER
    if not path.is_file():
        record = {"kernel": spec.name, "set": opts.set_name, "spec": str(spec.yaml_path)}
        write_atomic(path, json.dumps(record, indent=1, sort_keys=True) + "\n")


def _record_winner(opts: SetOptions, problem: str, winner: Candidate) -> None:
    winners = read_winners(opts)
    winners[problem] = winner
    data = {"winners": {k: v.to_json() for k, v in sorted(winners.items())}}
    write_atomic(opts.set_dir / WINNERS, json.dumps(data, indent=1, sort_keys=True))


def finalists(
    spec: KernelSpec, opts: SetOptions, problems: Sequence[Problem]
) -> dict[str, list[Candidate]]:
    """Group -> candidates to cross-measure: the default build, then each searched shape's
    winner (first seen first, no repeats)."""
    out: dict[str, list[Candidate]] = {}
    winners = read_winners(opts, spec)
    for p in problems:
        group = out.setdefault(group_of(p), [spec.default_candidate()])
        winner = winners.get(p.name)
        if winner is not None and winner.key() not in {c.key() for c in group}:
            group.append(winner)
    return out


def run_problem_set(
    settings: Settings,
    spec: KernelSpec,
    objective: ObjectiveSpec,
    search: SearchOptions,
    opts: SetOptions,
    *,
    compiler: Any,
    measurer: Any,
    toolchain: Any = None,
    on_event: EventSink | None = None,
    clock: Callable[[], float] = time.monotonic,
    publish_for: Callable[[Path], Publisher] | None = None,
) -> SetProgress:
    """Run as much of the set's search, cross-measurement and cover as this step allows.

    ``publish_for(path)`` gives the publisher of a shape's finished search (the registry's
    ``ResultPublisher`` writing its result file to ``path``); None writes no artifacts.
    """
    from ctune.search.session import check_request, require_capabilities, target_arch
    from ctune.search.session_journal import check_default_build
    from ctune.spec.space.limits import tabled_limits

    problems = check_set(spec, opts.set_name, objective)
    check_vendor(spec, opts)
    check_owner(spec, opts)
    # before anything compiles: the request as each shape's search will check it (strategy,
    # options, the warm-start file, the default build within the target's table), then
    # what this machine can measure
    first = dataclasses.replace(search, problem=problems[0].name, resume=None)
    check_request(spec, objective, first, None)
    limits = tabled_limits(target_arch(settings, spec))
    if limits is not None:
        for problem in problems:
            check_default_build(spec, limits, problem)
    if _measuring_left(spec, opts, problems):  # a finished set re-covers from its files alone
        require_capabilities(objective, measurer)
    opts.set_dir.mkdir(parents=True, exist_ok=True)
    _record_owner(spec, opts)
    step = _Clock(opts.step_s, clock)
    notes: list[str] = []
    pending = _search_phase(
        settings,
        spec,
        objective,
        search,
        opts,
        problems,
        step,
        compiler,
        measurer,
        toolchain,
        on_event,
        publish_for,
    )
    searched = tuple(p.name for p in problems if p.name not in pending)
    _write_finalists(spec, opts, problems, compiler)
    if pending:
        return SetProgress(opts.set_name, opts.set_dir, searched, tuple(pending), -1, None)
    try:
        matrix = _cross_phase(spec, objective, opts, problems, step, compiler, measurer, settings)
    except KeyboardInterrupt:
        raise Interrupted(
            f"{opts.set_dir} keeps every shape's search and the cross-measurements made; run "
            "the same command again to go on"
        ) from None
    holes = matrix.missing()
    if holes:
        return SetProgress(opts.set_name, opts.set_dir, searched, (), len(holes), None)
    shipped = opts.shipped | ({VENDOR_BUILD} if opts.vendor else set())
    cover = dispatch.greedy_cover(matrix, opts.margin, shipped)
    if cover.unservable:
        notes.append(f"no finalist ran on: {', '.join(cover.unservable)}")
    from ctune.sets.dispatch_table import write_table

    table, header = write_table(spec, objective, opts, problems, matrix, cover, compiler, measurer)
    return SetProgress(
        opts.set_name, opts.set_dir, searched, (), 0, cover, table, header, tuple(notes)
    )


def _measuring_left(spec: KernelSpec, opts: SetOptions, problems: Sequence[Problem]) -> bool:
    """Whether a shape is still to search or a finalist x shape cell still to measure."""
    if not {p.name for p in problems} <= set(read_winners(opts)):
        return True
    rows = read_rows(opts.set_dir / MATRIX)
    final = finalists(spec, opts, problems)
    return any(
        _unmeasured(rows, final, p) or _vendor_unmeasured(spec, opts, rows, p) for p in problems
    )


def _unmeasured(
    rows: Sequence[Mapping[str, Any]], final: Mapping[str, list[Candidate]], problem: Problem
) -> list[Candidate]:
    """The finalists of ``problem``'s group that no matrix row measured on it yet."""
    done = {r["candidate"] for r in rows if r["shape"] == problem.name}
    return [c for c in final[group_of(problem)] if c.key() not in done]


def _vendor_unmeasured(
    spec: KernelSpec, opts: SetOptions, rows: Sequence[Mapping[str, Any]], problem: Problem
) -> bool:
    """Whether the set asks for the vendor column and no row measured the call on ``problem``."""
    if not opts.vendor:
        return False
    from ctune.measure.vendor import vendor_candidate

    key = vendor_candidate(spec).key()
    return not any(r["shape"] == problem.name and r["candidate"] == key for r in rows)


def _search_phase(
    settings: Settings,
    spec: KernelSpec,
    objective: ObjectiveSpec,
    search: SearchOptions,
    opts: SetOptions,
    problems: Sequence[Problem],
    step: _Clock,
    compiler: Any,
    measurer: Any,
    toolchain: Any,
    on_event: EventSink | None,
    publish_for: Callable[[Path], Publisher] | None,
) -> list[str]:
    """Search each shape without a winner; return the names still pending."""
    from ctune.search.driver import run_session
    from ctune.search.session import SearchSession

    session = SearchSession(
        settings, spec, objective, search, compiler=compiler, measurer=measurer, toolchain=toolchain
    )
    done = read_winners(opts)
    pending = [p.name for p in problems if p.name not in done]
    _build_defaults_ahead(spec, [p for p in problems if p.name in pending], compiler)
    for problem in problems:
        if problem.name not in pending or not step.may_start():
            continue
        began = step.clock()
        # the group's earlier builds first, then the caller's own (--warm-start: a pool
        # compiled ahead, an earlier tuning), so the first shape of a group starts from those
        direction = objective.directions[0]
        seeds = [
            *group_seeds(spec, opts, problems, problem, direction=direction),
            *search.warm_start,
        ]
        source = f"earlier shapes of {opts.set_name}"
        if search.warm_start:
            source += f" and {search.warm_start_source or 'the given configurations'}"
        left = step.left()
        time_s = search.time_s
        if left is not None:
            time_s = max(1.0, min(time_s or left, left))
        options = dataclasses.replace(
            search,
            problem=problem.name,
            journal=_journal_path(opts, spec, problem),
            resume=None,
            time_s=time_s,
            warm_start=tuple(seeds),
            warm_start_source=source,
            warm_start_share=opts.reuse_share,
        )
        try:
            publish = publish_for(artifact_path(opts, spec, problem)) if publish_for else None
            shape = dataclasses.replace(session, options=options, publish=publish)
            result = run_session(shape, on_event)
        except KeyboardInterrupt:
            raise Interrupted(_kept(opts, problems, pending)) from None
        step.timed(began)
        if result.interrupted:
            raise Interrupted(_kept(opts, problems, pending))
        if result.baseline is not None:
            pinned = result.member(result.pinned) if result.pinned else None
            _record_winner(opts, problem.name, (pinned or result.baseline).candidate)
            pending.remove(problem.name)
    return pending


def _kept(opts: SetOptions, problems: Sequence[Problem], pending: Sequence[str]) -> str:
    """What an interrupted set keeps: its folder's finished shapes."""
    done = len(problems) - len(pending)
    return (
        f"{opts.set_dir} keeps {done} of {len(problems)} shapes searched; run the same "
        "command again to go on (the interrupted shape starts over)"
    )


def shape_distance(a: Problem, b: Problem) -> float:
    """How far apart two shapes are: the summed |log2| differences of their dims (M, N, K)."""
    names = set(a.dims) & set(b.dims)
    return sum(
        abs(math.log2(max(a.dims[n], 1)) - math.log2(max(b.dims[n], 1))) for n in sorted(names)
    )


def group_seeds(
    spec: KernelSpec,
    opts: SetOptions,
    problems: Sequence[Problem],
    problem: Problem,
    *,
    direction: str,
) -> list[dict[str, Any]]:
    """What the earlier shapes of ``problem``'s compile group measured, nearest shapes first:
    their winners (the nearest shape's first), then every other candidate that ran correctly,
    by its ratio to the default on the nearest shape it was measured on, each build's best
    variant before further runtime variants of a build already listed (each is a cache
    hit: no compile). Nearest, not best anywhere: a 128-token GEMM starts from what won at
    128 tokens on another projection, not from what won at 1 token. The default build is
    left out: it is every search's baseline anyway. ``direction``: the objective's ("max":
    a larger ratio beat the default by more, so it comes first)."""
    from ctune.objective.pareto import sign
    from ctune.search import journal as journal_mod

    better = sign(direction)  # ratios ranked smallest first once signed: the best first
    group = group_of(problem)
    default_key = spec.default_candidate().key()
    earlier = sorted(
        (p for p in problems if group_of(p) == group and p.name != problem.name),
        key=lambda p: shape_distance(p, problem),
    )
    distance = {p.name: shape_distance(p, problem) for p in earlier}
    winners = read_winners(opts, spec)
    seeds: list[Candidate] = []
    for p in earlier:
        won = winners.get(p.name)
        if won is not None and won.key() != default_key and won not in seeds:
            seeds.append(won)
    rank: dict[str, tuple[float, float]] = {}  # key -> (its nearest shape's distance, ratio)
    by_key: dict[str, Candidate] = {}
    for p in earlier:
        for path in journal_paths(opts, spec, p):
            try:
                replay, _ = journal_mod.read(path)
            except UserError:
                continue  # a damaged attempt's journal: its shape is searched again anyway
            values = {
                t.candidate.key(): t.values[0] for t in replay.trials if t.feasible and t.values
            }
            base = values.get(default_key)
            if not base:
                continue
            for t in replay.trials:
                key = t.candidate.key()
                if key in values and key != default_key:
                    rank[key] = min(
                        rank.get(key, (math.inf, math.inf)),
                        (distance[p.name], better * values[key] / base),
                    )
                    by_key[key] = t.candidate
    taken = {c.key() for c in seeds}
    ranked = [by_key[k] for k in sorted(rank, key=rank.__getitem__) if k not in taken]
    # Each build once (its best-ranked variant) before more runtime variants of builds
    # already listed: on an H200 the 128-token shapes of decode-fp16 spent a budget of 40 on
    # runtime variants of the 1- and 16-token winners and never reached a build that fills
    # 128 tokens (0.58-0.89x cuBLAS, where the t128 set's builds ran 0.95-1.14x).
    listed = {spec.space.build_group(c.genes) for c in seeds}
    first: list[Candidate] = []
    more: list[Candidate] = []
    for cand in ranked:
        build = spec.space.build_group(cand.genes)
        (more if build in listed else first).append(cand)
        listed.add(build)
    return [c.as_dict() for c in seeds + first + more]


def _build_defaults_ahead(
    spec: KernelSpec, pending: Sequence[Problem], compiler: Compiler | None
) -> None:
    """Start the default build of every compile group still to search, side by side, so that
    a group's first shape finds its baseline compiled instead of waiting a whole build for it
    (a CUTLASS build is ~1 min of one core; the groups' defaults are independent)."""
    if compiler is None:
        return
    default = spec.default_candidate()
    first_of_group: dict[str, Problem] = {}
    for p in pending:
        if not _invalid(spec, default, p):
            first_of_group.setdefault(group_of(p), p)
    for problem in first_of_group.values():
        compiler.submit(default, problem)


def _attempts(opts: SetOptions, spec: KernelSpec, problem: Problem) -> list[tuple[int, Path]]:
    """(attempt number, journal) of each of ``problem``'s searches in the set's folder:
    ``<kernel>-<problem>.<n>.jsonl``, or ``<problem>.<n>.jsonl`` as a folder written before
    journals named their kernel has them. Matched whole: ``m16.*`` would also take ``m16.b``'s."""
    named = re.compile(
        rf"(?:{re.escape(spec.name)}-)?{re.escape(problem.name)}\.(\d+)\.jsonl", re.ASCII
    )
    found = ((named.fullmatch(p.name), p) for p in (opts.set_dir / "journals").glob("*.jsonl"))
    return sorted((int(m.group(1)), p) for m, p in found if m is not None)


def journal_paths(opts: SetOptions, spec: KernelSpec, problem: Problem) -> list[Path]:
    """The journals of ``problem``'s searches in the set's folder, old names included."""
    return [path for _, path in _attempts(opts, spec, problem)]


def _journal_path(opts: SetOptions, spec: KernelSpec, problem: Problem) -> Path:
    """A fresh journal per attempt (an attempt cut off by the step leaves its journal), named
    by kernel and problem: two kernels' sets may have the same problem names, and a journal
    taken out of its folder still says whose it is."""
    folder = opts.set_dir / "journals"
    folder.mkdir(parents=True, exist_ok=True)
    n = max((n for n, _ in _attempts(opts, spec, problem)), default=-1) + 1
    return folder / f"{spec.name}-{problem.name}.{n}.jsonl"


# --- cross-measurement ----------------------------------------------------------------------


def _write_json(path: Path, data: Any) -> None:
    """Whole file or nothing: a step cut off mid-write must not leave half a matrix."""
    write_atomic(path, json.dumps(data, indent=1, sort_keys=True) + "\n")


def _cross_phase(
    spec: KernelSpec,
    objective: ObjectiveSpec,
    opts: SetOptions,
    problems: Sequence[Problem],
    step: _Clock,
    compiler: Any,
    measurer: Any,
    settings: Settings,
) -> dispatch.Matrix:
    path = opts.set_dir / MATRIX
    rows = read_rows(path)
    final = finalists(spec, opts, problems)
    for problem in problems:
        todo = _unmeasured(rows, final, problem)
        vendor = _vendor_unmeasured(spec, opts, rows, problem)
        if not todo and not vendor:
            continue
        if not step.may_start():
            break
        began = step.clock()
        rows += cross_row(
            spec, objective, problem, todo, compiler, measurer, opts, settings, vendor=vendor
        )
        _write_json(path, {"kernel": spec.name, "set": opts.set_name, "rows": rows})
        step.timed(began)
    return to_matrix(spec, problems, final, rows, vendor=opts.vendor)


def cross_row(
    spec: KernelSpec,
    objective: ObjectiveSpec,
    problem: Problem,
    todo: Sequence[Candidate],
    compiler: Any,
    measurer: Any,
    opts: SetOptions,
    settings: Settings,
    *,
    vendor: bool = False,
) -> list[dict[str, Any]]:
    """Cells of one shape: each candidate built (a cache hit, usually) and all measured
    interleaved in the same fresh processes; failures become cells of value null. With
    ``vendor``, the spec's vendor call too, in processes of its own (its library's state
    never reaches a build) alternating with the builds' (``measure_rounds``)."""
    from ctune.measure.vendor import vendor_build, vendor_candidate
    from ctune.search.run_state import sampling_plan

    rows: list[dict[str, Any]] = []
    futures = {c.key(): compiler.submit(c, problem) for c in todo if not _invalid(spec, c, problem)}
    items: list[tuple[Candidate, Build]] = []
    for cand in todo:
        why = _invalid(spec, cand, problem)
        build = None if why else futures[cand.key()].result()
        if build is not None and not build.outcome.is_ok:
            why = f"build {build.outcome.value}"
        if why:
            rows.append(_row(spec, problem, cand, None, why))
        else:
            assert build is not None
            items.append((cand, build))
    call = (vendor_candidate(spec), vendor_build(spec)) if vendor else None
    if items or call:
        plan = sampling_plan(settings, spec, objective)
        runs = measure_rounds(measurer, spec, items, call, problem, plan, opts.cross_processes)
        for cand, build in items:
            row = _measured_row(spec, objective, problem, cand, build, runs.get(cand.key()))
            rows.append({**row, "build_key": build.build_key})
        if call is not None:
            row = _measured_row(spec, objective, problem, *call, runs.get(call[0].key()))
            rows.append({**row, "build": VENDOR_BUILD, "genes": {}, "vendor": spec.vendor_name})
    return rows


def measure_rounds(
    measurer: Any,
    spec: KernelSpec,
    items: Sequence[tuple[Candidate, Build]],
    vendor: tuple[Candidate, Build] | None,
    problem: Problem,
    plan: Any,
    processes: int,
) -> dict[str, list[Measurement]]:
    """Key -> runs: ``items`` interleaved in ``processes`` fresh processes and, with a
    ``vendor`` call, that call in as many processes of its own, one per round: after the
    builds' in the first round, before them in the second, and so on (as a search's
    confirmation does), so neither side always runs on a GPU the other has just warmed."""
    if vendor is None:
        return dict(measurer.remeasure(spec, items, problem, plan, processes))
    runs: dict[str, list[Measurement]] = {}
    for round_ in range(processes):
        parts = ([vendor], list(items)) if round_ % 2 else (list(items), [vendor])
        for part in parts:
            if not part:
                continue
            for key, measured in measurer.remeasure(spec, part, problem, plan, 1).items():
                runs.setdefault(key, []).extend(measured)
    return runs


def _invalid(spec: KernelSpec, cand: Candidate, problem: Problem) -> str:
    broken = spec.space.violations(cand.as_dict(), problem.dims)
    return f"breaks restriction '{broken[0]}'" if broken else ""


def _measured_row(
    spec: KernelSpec,
    objective: ObjectiveSpec,
    problem: Problem,
    cand: Candidate,
    build: Build,
    runs: Sequence[Measurement] | None,
) -> dict[str, Any]:
    from ctune.search.report import pool

    bad = [m for m in runs or () if not m.outcome.is_ok]
    if not runs or bad:
        return _row(spec, problem, cand, None, bad[0].outcome.value if bad else "not measured")
    pooled = pool(runs)
    values, violations = objective.evaluate(build, pooled, problem.dims)
    if not values or any(v > 0 for v in violations):
        return _row(spec, problem, cand, None, "violates a constraint")
    value = float(values[0])
    cost = value if objective.directions[0] == "min" else (1.0 / value if value > 0 else None)
    device = runs[0].device.name if runs[0].device is not None else ""
    return {**_row(spec, problem, cand, cost, "ok", value), "device": device}


def _row(
    spec: KernelSpec,
    problem: Problem,
    cand: Candidate,
    cost: float | None,
    outcome: str,
    value: float | None = None,
) -> dict[str, Any]:
    return {
        "shape": problem.name,
        "candidate": cand.key(),
        "build": build_id(spec, cand, problem),
        "genes": cand.as_dict(),
        "cost": cost,
        "value": value,
        "outcome": outcome,
    }


def to_matrix(
    spec: KernelSpec,
    problems: Sequence[Problem],
    final: Mapping[str, Sequence[Candidate]],
    rows: Sequence[Mapping[str, Any]],
    *,
    vendor: bool = False,
) -> dispatch.Matrix:
    """Columns: the finalists' compiled builds (and, with ``vendor``, the vendor call, which
    every shape may take); a cell: the best variant's cost (null if every measured variant
    failed); missing: an eligible finalist variant not measured yet."""
    names = {p.name for p in problems}
    build_group: dict[str, str] = {}
    for p in problems:
        for c in final.get(group_of(p), ()):
            build_group.setdefault(build_id(spec, c, p), group_of(p))
    if vendor:
        build_group[VENDOR_BUILD] = dispatch.ANY_GROUP
    measured = {(r["shape"], r["candidate"]) for r in rows}
    cells: dict[tuple[str, str], float | None] = {}
    for r in rows:
        key = (r["shape"], r["build"])
        if r["shape"] not in names or r["build"] not in build_group:
            continue
        old = cells.get(key)
        cost = r["cost"]
        if key not in cells or (cost is not None and (old is None or cost < old)):
            cells[key] = cost
    for p in problems:  # a build with a variant not measured on p is not complete there
        for c in final.get(group_of(p), ()):
            if (p.name, c.key()) not in measured:
                cells.pop((p.name, build_id(spec, c, p)), None)
    return dispatch.Matrix(
        shapes=tuple(p.name for p in problems),
        builds=tuple(build_group),
        cells=cells,
        shape_group={p.name: group_of(p) for p in problems},
        build_group=build_group,
    )


def _write_finalists(
    spec: KernelSpec, opts: SetOptions, problems: Sequence[Problem], compiler: Compiler | None
) -> None:
    """The finalists and their build-cache keys: what the next call needs from the cache.

    Only a cache lookup: a group not searched yet has no build of its default, and compiling
    it here (one build after another) would spend the step on what the search compiles
    side by side anyway. Its key stays empty until a later step built it."""
    entries = []
    for group, cands in finalists(spec, opts, problems).items():
        members = [p for p in problems if group_of(p) == group]
        for c in cands:
            valid = [p for p in members if not _invalid(spec, c, p)]
            build = compiler.lookup(c, valid[0]) if valid and compiler is not None else None
            ok = build is not None and build.outcome.is_ok
            entries.append(
                {
                    "group": group,
                    "candidate": c.key(),
                    "build": build_id(spec, c, members[0]),
                    "genes": c.as_dict(),
                    "build_key": build.build_key if build is not None and ok else "",
                }
            )
    _write_json(opts.set_dir / FINALISTS, {"kernel": spec.name, "finalists": entries})


__all__ = [
    "SetProgress",
    "check_set",
    "check_vendor",
    "cross_row",
    "finalists",
    "group_of",
    "measure_rounds",
    "run_problem_set",
    "to_matrix",
]

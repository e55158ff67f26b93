"""One measurement per binary: identity rule, reuse in the driver, journal and resume, budget."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from ctune.config import Settings
from ctune.objective import parse_objective_spec
from ctune.records import Build, Candidate, Outcome
from ctune.search.dedup import COMPILE_CAP_FACTOR, binary_identity
from ctune.search.driver import SearchOptions, run_search
from ctune.search.journal import read
from ctune.spec import KernelSpec, load_spec
from ctune.testing.standins import (
    STANDIN_YAML,
    StandInCompiler,
    StandInMeasurer,
    write_standin_kernel,
)

DATA = Path(__file__).resolve().parents[2] / "data" / "kernels"


def _build(key: str, sass: str | None, outcome: Outcome = Outcome.OK) -> Build:
    return Build(key, ("nvcc",), "nvcc 13.0", outcome, sass_sha256=sass, entry_symbol="rt_saxpy")


def test_identity_is_code_launch_and_arguments() -> None:
    spec = load_spec(DATA / "rt_saxpy.yaml")
    problem = spec.problem()
    base = spec.default_candidate()
    same_launch = spec.candidate({**base.as_dict(), "UNROLL": 2})
    other_grid = spec.candidate({**base.as_dict(), "ITEMS": 2})
    ident = binary_identity(spec, base, _build(base.key(), "aa"), problem)
    assert ident is not None and len(ident) == 16
    # same machine code, same grid and arguments: the same binary, whatever the genes say
    assert binary_identity(spec, same_launch, _build(same_launch.key(), "aa"), problem) == ident
    # other code, or the same code launched on another grid, is another binary
    assert binary_identity(spec, same_launch, _build(same_launch.key(), "bb"), problem) != ident
    assert binary_identity(spec, other_grid, _build(other_grid.key(), "aa"), problem) != ident
    # nothing to share without code
    assert binary_identity(spec, base, _build(base.key(), None), problem) is None
    failed = _build(base.key(), "aa", Outcome.COMPILE_ERROR)
    assert binary_identity(spec, base, failed, problem) is None


def test_identity_includes_runtime_argument_values(tmp_path: Path) -> None:
    text = (DATA / "rt_saxpy.yaml").read_text()
    text = text.replace("value: 1.5}", "value: ITEMS}").replace(
        'grid: ["ceil_div(N, BLOCK * ITEMS)"]', 'grid: ["ceil_div(N, BLOCK)"]'
    )
    for name in ("rt_saxpy.cu", "saxpy_ref.py"):
        (tmp_path / name).write_text((DATA / name).read_text())
    (tmp_path / "rt_saxpy.yaml").write_text(text)
    spec = load_spec(tmp_path / "rt_saxpy.yaml")
    problem = spec.problem()
    one = spec.default_candidate()
    two = spec.candidate({**one.as_dict(), "ITEMS": 2})
    assert spec.launch_geometry(one, problem) == spec.launch_geometry(two, problem)
    a = binary_identity(spec, one, _build(one.key(), "aa"), problem)
    b = binary_identity(spec, two, _build(two.key(), "aa"), problem)
    assert a is not None and b is not None and a != b  # the kernel gets another `a`


def test_a_binary_is_measured_once_and_its_twins_reuse_it(search, spec: KernelSpec) -> None:
    compiler = StandInCompiler(spec, noop_genes=("SCHEDULE",))
    result, measurer, _, _ = search(
        compiler=compiler, budget=30, seed=4, journal_fsync=False, confirm_processes=0
    )
    replay, _ = read(result.journal)
    by_key = {t.candidate.key(): t for t in replay.trials}
    assert replay.same_binary, "the search never proposed a SCHEDULE-only variant"
    for key, source in replay.same_binary.items():
        twin, first = by_key[key], by_key[source]
        assert twin.values == first.values and twin.outcome is first.outcome
        assert {k: v for k, v in twin.candidate.genes if k != "SCHEDULE"} == {
            k: v for k, v in first.candidate.genes if k != "SCHEDULE"
        }
        assert twin.measurement is not None and twin.measurement.samples_ms == ()
        assert twin.measurement.candidate_key == source  # whose run it was
    # no binary measured twice; the reused ones cost no GPU time
    codes = [compiler.sass_digest(by_key[k].candidate) for k in measurer.calls]
    assert len(codes) == len(set(codes))
    assert not set(measurer.calls) & set(replay.same_binary)
    # the budget counts GPU measurements: distinct binaries plus failed builds
    failed = sum(1 for t in replay.trials if t.outcome.is_build_failure)
    assert result.binaries == len(measurer.calls) and result.reused == len(replay.same_binary)
    assert result.binaries + failed == 30 and result.evaluations == 30 + result.reused


def test_the_journal_line_names_an_earlier_trial(search, spec: KernelSpec) -> None:
    compiler = StandInCompiler(spec, noop_genes=("SCHEDULE",))
    result, *_ = search(compiler=compiler, budget=30, seed=4, confirm_processes=0)
    seen: set[str] = set()
    marked = 0
    for raw in result.journal.read_text().splitlines():
        record = json.loads(raw)
        if record["kind"] != "trial":
            continue
        key = Candidate.from_json(record["trial"]["candidate"]).key()
        if "same_binary_as" in record:
            assert record["same_binary_as"] in seen and record["same_binary_as"] != key
            marked += 1
        seen.add(key)
    assert marked == result.reused > 0


def test_resume_keeps_reusing_and_counting(search, spec: KernelSpec) -> None:
    def compiler() -> StandInCompiler:
        return StandInCompiler(spec, noop_genes=("SCHEDULE",))

    first = StandInMeasurer(samples=30, interrupt_at=12)
    crashed, *_ = search(
        compiler=compiler(), measurer=first, budget=30, seed=4, confirm_processes=0
    )
    assert crashed.interrupted
    second = StandInMeasurer(samples=30)
    resumed, *_ = search(
        compiler=compiler(),
        measurer=second,
        budget=30,
        seed=4,
        resume=crashed.journal,
        confirm_processes=0,
    )
    replay, _ = read(resumed.journal)
    by_key = {t.candidate.key(): t for t in replay.trials}
    measured = [k for k in by_key if k not in replay.same_binary]
    codes = [compiler().sass_digest(by_key[k].candidate) for k in measured if by_key[k].build]
    built = [c for k, c in zip(measured, codes, strict=True) if by_key[k].outcome.is_ok]
    assert len(built) == len(set(built)), "a binary was measured again after the resume"
    assert not set(second.calls) & set(first.calls[:-1])
    failed = sum(1 for t in replay.trials if t.outcome.is_build_failure)
    assert resumed.binaries + failed == 30 and resumed.reused == len(replay.same_binary)


def test_a_search_of_no_op_genes_stops_at_the_compile_cap(
    settings: Settings, tmp_path: Path
) -> None:
    # one grid for all, and every gene but SCHEDULE leaves the code alone: three binaries
    yaml = STANDIN_YAML.replace('"ceil_div(M, TILE_M) * ceil_div(N, TILE_N) * SPLIT_K"', "64")
    spec = load_spec(write_standin_kernel(tmp_path / "flat", yaml=yaml))
    noop = [g.name for g in spec.space.genes if g.name != "SCHEDULE"]
    compiler = StandInCompiler(spec, noop_genes=noop, fail_every=None)
    measurer = StandInMeasurer(samples=30)
    result = run_search(
        settings,
        spec,
        parse_objective_spec(["p50"], [], spec.metrics),
        SearchOptions(budget=5, confirm_processes=0, journal_fsync=False, fill=False),
        compiler=compiler,
        measurer=measurer,
    )
    assert result.stop_reason == "compile cap" and len(measurer.calls) == result.binaries <= 3
    assert result.evaluations == COMPILE_CAP_FACTOR * 5


def test_confirmation_takes_the_simplest_of_identical_binaries(search, spec: KernelSpec) -> None:
    compiler = StandInCompiler(spec, noop_genes=("SCHEDULE",))
    result, *_ = search(compiler=compiler, budget=40, seed=2, journal_fsync=False)
    replay, _ = read(result.journal)
    by_key = {t.candidate.key(): t for t in replay.trials}
    defaults = spec.space.default_values()
    pinned = by_key[result.pinned or ""]
    twins = [
        t
        for t in replay.trials
        if compiler.sass_digest(t.candidate) == compiler.sass_digest(pinned.candidate)
    ]

    def changed(t: object) -> int:
        genes = dataclasses.asdict(t)["candidate"]["genes"]  # type: ignore[call-overload]
        return sum(1 for k, v in genes if defaults[k] != v)

    assert changed(pinned) == min(changed(t) for t in twins)

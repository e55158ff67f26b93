"""``--dispatch-vendor`` on stand-ins (NOT a GPU): the spec's vendor call as one more column of
a problem set's matrix, measured in processes of its own, taken by the cover like a shipped
build (it ships no kernel) for the shapes it serves within the margin, and named in the
table and its header as the build that means "call the library"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctune.config import Settings
from ctune.errors import UserError
from ctune.measure.vendor import vendor_candidate
from ctune.objective import parse_objective_spec
from ctune.search.driver import SearchOptions
from ctune.sets.dispatch import EDGE_EPS
from ctune.sets.dispatch_table import from_json
from ctune.sets.problem_set import SetProgress, run_problem_set
from ctune.sets.set_layout import MATRIX, VENDOR_BUILD, SetOptions, read_rows
from ctune.spec import KernelSpec, load_spec
from ctune.testing.spec_copies import with_key
from ctune.testing.standins import StandInCompiler, StandInMeasurer, write_standin_kernel
from tests.unit.search.test_search_problem_set import SET_YAML, _NoGpu

SHAPES = ("m1", "m16", "m2048", "m16-b", "m2048-b")


@pytest.fixture
def spec(tmp_path: Path) -> KernelSpec:
    path = write_standin_kernel(tmp_path / "k", "setk", SET_YAML)
    (path.parent / "calls.py").write_text("def library(xp, arrays, dims, dtypes):\n    pass\n")
    return load_spec(with_key(path, "vendor", {"python": "calls.py:library", "name": "the lib"}))


class _Recording(StandInMeasurer):
    """The stand-in measurer, keeping the keys of each remeasure call (one list per call)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(seed=3, samples=40, fault_corner=None, wrong_every=None, **kwargs)
        self.batches: list[list[str]] = []

    def remeasure(self, spec: Any, items: Any, *args: Any, **kwargs: Any) -> Any:
        self.batches.append([c.key() for c, _ in items])
        return super().remeasure(spec, items, *args, **kwargs)


def _run(
    spec: KernelSpec, tmp_path: Path, measurer: Any, *, vendor: bool = True, margin: float = 0.03
) -> SetProgress:
    settings = Settings(cache_dir=tmp_path / "cache", registry=tmp_path / "registry")
    return run_problem_set(
        settings,
        spec,
        parse_objective_spec(["p50"], [], spec.metrics),
        SearchOptions(budget=8, seed=1, confirm_processes=2, journal_fsync=False, vendor=False),
        SetOptions("all", tmp_path / "set", margin=margin, cross_processes=2, vendor=vendor),
        compiler=StandInCompiler(spec, fail_every=None),
        measurer=measurer,
    )


def _cells(tmp_path: Path) -> dict[tuple[str, str], float | None]:
    return {(r["shape"], r["build"]): r["cost"] for r in read_rows(tmp_path / "set" / MATRIX)}


def test_a_vendor_faster_everywhere_serves_every_shape_and_ships_no_kernel(
    spec: KernelSpec, tmp_path: Path
) -> None:
    measurer = _Recording(vendor_factor=0.2)
    progress = _run(spec, tmp_path, measurer)
    cover = progress.cover
    assert cover is not None and cover.builds == (VENDOR_BUILD,)
    assert cover.assignment == dict.fromkeys(SHAPES, VENDOR_BUILD)
    assert cover.shipped == (VENDOR_BUILD,) and cover.max_loss == 0.0
    key = vendor_candidate(spec).key()
    vendor_batches = [b for b in measurer.batches if key in b]
    # a process of its own per round (2 rounds per shape), never beside a build
    assert len(vendor_batches) == 2 * len(SHAPES)
    assert all(b == [key] for b in vendor_batches)
    table = json.loads((tmp_path / "set" / "dispatch.json").read_text())
    (build,) = table["builds"]
    assert build["id"] == VENDOR_BUILD and build["vendor"] == "the lib"
    assert build["genes"] == {} and build["nvcc_flags"] == [] and build["group"] == "*"
    assert all(s["build"] == VENDOR_BUILD and s["runtime"] == {} for s in table["shapes"])
    parsed = from_json(table)
    entry = parsed.lookup((16, 4096, 4096), "float32")
    assert entry is not None and entry.build == 0 and entry.runtime == (0,)
    assert "constexpr int kVendorBuild = 0;" in (tmp_path / "set" / "dispatch.h").read_text()


def test_the_vendor_round_alternates_with_the_builds(spec: KernelSpec, tmp_path: Path) -> None:
    """Round 1 measures the builds first, round 2 the vendor call first, on every shape."""
    measurer = _Recording(vendor_factor=0.2)
    _run(spec, tmp_path, measurer)
    key = vendor_candidate(spec).key()
    cross = measurer.batches[-4 * len(SHAPES) :]  # the cross phase: 2 rounds of 2 per shape
    for shape in range(len(SHAPES)):
        first, second, third, fourth = cross[4 * shape : 4 * shape + 4]
        assert key not in first and second == [key] and third == [key] and key not in fourth


def test_a_slow_vendor_is_measured_and_reported_but_never_chosen(
    spec: KernelSpec, tmp_path: Path
) -> None:
    progress = _run(spec, tmp_path, _Recording(vendor_factor=5.0))
    cover = progress.cover
    assert cover is not None and VENDOR_BUILD not in cover.builds
    cells = _cells(tmp_path)
    for shape in SHAPES:
        vendor = cells[shape, VENDOR_BUILD]
        assert vendor is not None
        builds = [c for (s, b), c in cells.items() if s == shape and b != VENDOR_BUILD]
        assert all(c is None or c < vendor for c in builds)
    table = json.loads((tmp_path / "set" / "dispatch.json").read_text())
    assert all("vendor" not in b for b in table["builds"])
    assert "constexpr int kVendorBuild = -1;" in (tmp_path / "set" / "dispatch.h").read_text()


def test_a_vendor_near_the_best_serves_only_within_the_margin(
    spec: KernelSpec, tmp_path: Path
) -> None:
    """Wherever the cover sends a shape, vendor call or build, it is within the margin of the
    best of both, and a shape the vendor call is fastest on goes to it."""
    _run(spec, tmp_path, _Recording(vendor_factor=0.65), margin=0.01)
    cells = _cells(tmp_path)
    table = json.loads((tmp_path / "set" / "dispatch.json").read_text())
    for s in table["shapes"]:
        mine = {b: c for (shape, b), c in cells.items() if shape == s["problem"] and c}
        best = min(mine.values())
        assert mine[s["build"]] <= best * (1 + 0.01 + EDGE_EPS)
        if mine[VENDOR_BUILD] == best:
            assert s["build"] == VENDOR_BUILD


def test_a_failing_vendor_call_leaves_the_cover_to_the_builds(
    spec: KernelSpec, tmp_path: Path
) -> None:
    progress = _run(spec, tmp_path, _Recording(vendor_fails=True))
    assert progress.cover is not None and VENDOR_BUILD not in progress.cover.builds
    rows = [r for r in read_rows(tmp_path / "set" / MATRIX) if r["build"] == VENDOR_BUILD]
    assert len(rows) == len(SHAPES)
    assert all(r["cost"] is None and r["outcome"] != "ok" for r in rows)


def test_a_finished_set_covers_again_with_or_without_the_vendor_and_no_gpu(
    spec: KernelSpec, tmp_path: Path
) -> None:
    with_vendor = _run(spec, tmp_path, _Recording(vendor_factor=0.2))
    assert with_vendor.cover is not None and with_vendor.cover.builds == (VENDOR_BUILD,)
    without = _run(spec, tmp_path, _NoGpu(), vendor=False)
    assert without.cover is not None and VENDOR_BUILD not in without.cover.builds
    again = _run(spec, tmp_path, _NoGpu())
    assert again.cover == with_vendor.cover


def test_a_set_that_measured_no_vendor_measures_it_when_asked(
    spec: KernelSpec, tmp_path: Path
) -> None:
    """The vendor column added to a finished set: only the vendor call is measured."""
    _run(spec, tmp_path, _Recording(), vendor=False)
    before = read_rows(tmp_path / "set" / MATRIX)
    measurer = _Recording(vendor_factor=0.2)
    progress = _run(spec, tmp_path, measurer)
    key = vendor_candidate(spec).key()
    assert measurer.batches and all(b == [key] for b in measurer.batches)
    assert read_rows(tmp_path / "set" / MATRIX)[: len(before)] == before
    assert progress.cover is not None and progress.cover.builds == (VENDOR_BUILD,)


def test_a_spec_without_a_vendor_call_is_refused(tmp_path: Path) -> None:
    bare = load_spec(write_standin_kernel(tmp_path / "bare", "setk", SET_YAML))
    with pytest.raises(UserError, match=r"--dispatch-vendor: .*setk.yaml names no vendor call"):
        _run(bare, tmp_path, _NoGpu())
    assert not (tmp_path / "set").exists()


@pytest.mark.parametrize(
    ("factor", "margin", "said"),
    [
        (0.2, 0.03, "the vendor call alone covers 5 shapes"),
        (0.65, 0.0, "2 builds and the vendor call cover 5 shapes"),
        (5.0, 0.03, "2 builds cover 5 shapes"),
    ],
)
def test_the_summary_says_what_the_vendor_call_serves(
    spec: KernelSpec,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    factor: float,
    margin: float,
    said: str,
) -> None:
    from ctune.cli.search_set import report

    progress = _run(spec, tmp_path, _Recording(vendor_factor=factor), margin=margin)
    report(progress, "table")
    out = capsys.readouterr().out
    assert said in out, out
    assert progress.cover is not None
    served = sorted(s for s, b in progress.cover.assignment.items() if b == VENDOR_BUILD)
    if served:
        assert f"vendor (the library call, no kernel to ship): {', '.join(served)}" in out
    else:
        assert "vendor (" not in out

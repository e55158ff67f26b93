"""The problem-set search on stand-ins: every shape searched, every finalist measured on every
shape of its group, a cover within the margin, and a stepped run that ends where a whole run
does."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import ctune.cli.search as search_cli
from ctune.config import Settings
from ctune.errors import UserError
from ctune.measure import Measurer
from ctune.objective import parse_objective_spec
from ctune.registry.assemble import ResultPublisher
from ctune.search.driver import SearchOptions
from ctune.sets.dispatch import EDGE_EPS
from ctune.sets.dispatch_table import from_json
from ctune.sets.problem_set import (
    SetProgress,
    finalists,
    group_of,
    journal_paths,
    run_problem_set,
)
from ctune.sets.set_layout import MATRIX, SetOptions, build_id, read_rows
from ctune.spec import KernelSpec, load_spec
from ctune.testing.cli_app import ctune_main
from ctune.testing.standins import (
    STANDIN_DEVICE,
    StandInCompiler,
    StandInMeasurer,
    write_standin_kernel,
)

SET_YAML = """\
name: {name}
description: stand-in kernel for problem-set tests (never compiled)
entry: standin_kernel
genes:
  TILE_M: {{values: [16, 32, 64, 128], default: 64, family: template}}
  TILE_N: {{values: [32, 64, 128], default: 64, family: template}}
  STAGES: {{range: [1, 4], default: 2, family: template}}
  SPLIT_K: {{values: [1, 2, 4], default: 1, family: runtime}}
restrictions:
  - "TILE_M * TILE_N <= 8192"
launch:
  grid: ["ceil_div(M, TILE_M) * ceil_div(N, TILE_N) * SPLIT_K"]
  block: [128]
problems:
  - {{name: m1, dims: {{M: 1, N: 4096, K: 4096}}}}
  - {{name: m16, dims: {{M: 16, N: 4096, K: 4096}}}}
  - {{name: m2048, dims: {{M: 2048, N: 4096, K: 4096}}}}
  - {{name: m16-b, dims: {{M: 16, N: 4096, K: 4096}}, defines: {{CTUNE_BF16: 1}},
     dtypes: {{A: bfloat16}}}}
  - {{name: m2048-b, dims: {{M: 2048, N: 4096, K: 4096}}, defines: {{CTUNE_BF16: 1}},
     dtypes: {{A: bfloat16}}}}
problem_sets:
  all: [m1, m16, m2048, m16-b, m2048-b]
  one: [m16]
args:
  - {{name: A, role: input, dtype: float32, shape: [M, K]}}
  - {{name: C, role: output, dtype: float32, shape: [M, N]}}
reference:
  python: {name}_ref.py:reference
metrics:
  flops: "2 * M * N * K"
"""


@pytest.fixture
def spec(tmp_path: Path) -> KernelSpec:
    return load_spec(write_standin_kernel(tmp_path / "k", "setk", SET_YAML))


def _run(
    spec: KernelSpec,
    tmp_path: Path,
    set_dir: Path,
    *,
    step_s: float | None = None,
    clock: Any = None,
    objectives: tuple[str, ...] = ("p50",),
    reuse_share: float = 0.25,
) -> SetProgress:
    settings = Settings(cache_dir=tmp_path / "cache", registry=tmp_path / "registry")
    objective = parse_objective_spec(list(objectives), [], spec.metrics)
    search = SearchOptions(budget=8, seed=1, confirm_processes=2, journal_fsync=False)
    opts = SetOptions(
        "all", set_dir, margin=0.03, step_s=step_s, cross_processes=2, reuse_share=reuse_share
    )
    extra = {"clock": clock} if clock is not None else {}
    return run_problem_set(
        settings,
        spec,
        objective,
        search,
        opts,
        compiler=StandInCompiler(spec, fail_every=None),
        measurer=StandInMeasurer(seed=3, samples=40, fault_corner=None, wrong_every=None),
        publish_for=lambda out: ResultPublisher(settings.registry, settings.cache_dir, out),
        **extra,
    )


def test_a_default_beyond_the_table_is_refused_before_the_gpu_check(tmp_path: Path) -> None:
    """2048 threads a block: the target's table refuses every shape's default build on a
    machine without a GPU too (it said that p99 needs a GPU), and nothing is written."""
    from ctune.errors import UserError

    yaml = SET_YAML.replace("block: [128]", "block: [2048]")
    spec = load_spec(write_standin_kernel(tmp_path / "k", "setk", yaml))

    class NoGpu(StandInMeasurer):
        capabilities = frozenset()

    with pytest.raises(UserError, match=r"default build breaks a device limit \(sm_90 table\)"):
        run_problem_set(
            Settings(cache_dir=tmp_path / "cache", arch="sm_90"),
            spec,
            parse_objective_spec(["p99"], [], spec.metrics),
            SearchOptions(budget=8, confirm_processes=0, journal_fsync=False),
            SetOptions("all", tmp_path / "set"),
            compiler=StandInCompiler(spec, fail_every=None),
            measurer=NoGpu(samples=30),
        )
    assert not (tmp_path / "set").exists()


def test_whole_set_searches_cross_measures_and_covers(spec: KernelSpec, tmp_path: Path) -> None:
    progress = _run(spec, tmp_path, tmp_path / "set")
    assert progress.complete and not progress.pending
    assert progress.missing_cells == 0
    names = ["m1", "m16", "m2048", "m16-b", "m2048-b"]
    for name in names:
        assert (tmp_path / "set" / "artifacts" / f"setk-{name}.json").is_file()
    # every finalist of a group measured on every shape of that group, and only there
    rows = read_rows(tmp_path / "set" / MATRIX)
    final = finalists(spec, SetOptions("all", tmp_path / "set"), [spec.problem(n) for n in names])
    for name in names:
        group = group_of(spec.problem(name))
        assert {r["candidate"] for r in rows if r["shape"] == name} == {
            c.key() for c in final[group]
        }
    cover = progress.cover
    assert cover is not None
    # the cover's promise, checked against the matrix itself
    for name in names:
        mine = [r for r in rows if r["shape"] == name and r["cost"] is not None]
        best = min(r["cost"] for r in mine)
        served = min(r["cost"] for r in mine if r["build"] == cover.assignment[name])
        assert served <= best * (1 + 0.03 + EDGE_EPS)
    fp16 = {cover.assignment[n] for n in ("m1", "m16", "m2048")}
    bf16 = {cover.assignment[n] for n in ("m16-b", "m2048-b")}
    assert not fp16 & bf16  # a build of one group never serves the other
    table = json.loads((tmp_path / "set" / "dispatch.json").read_text())
    assert {s["problem"] for s in table["shapes"]} == set(names)
    assert [b["id"] for b in table["builds"]] == list(cover.builds)
    assert table["max_loss_vs_per_shape_best"] == pytest.approx(cover.max_loss)
    assert STANDIN_DEVICE.name in table["device"]
    text = (tmp_path / "set" / "dispatch.h").read_text()
    assert "namespace ctune_dispatch_setk" in text and f"on {STANDIN_DEVICE.name}" in text
    # the table's lookup serves every listed shape with its own entry
    parsed = from_json(table)
    for s in table["shapes"]:
        entry = parsed.lookup([s["dims"][d] for d in table["dims"]], s["dtype"])
        assert entry is not None and parsed.builds[entry.build]["id"] == s["build"]


def test_builds_are_shared_across_shapes_of_a_group(spec: KernelSpec) -> None:
    cand = spec.default_candidate()
    m16, m2048, m16b = spec.problem("m16"), spec.problem("m2048"), spec.problem("m16-b")
    assert build_id(spec, cand, m16) == build_id(spec, cand, m2048)
    assert build_id(spec, cand, m16) != build_id(spec, cand, m16b)  # defines differ
    runtime = spec.candidate({**cand.as_dict(), "SPLIT_K": 4})
    assert build_id(spec, runtime, m16) == build_id(spec, cand, m16)  # runtime gene: same build


def _journals(spec: KernelSpec, set_dir: Path, shape: str) -> list[Path]:
    return journal_paths(SetOptions("all", set_dir), spec, spec.problem(shape))


def _measured(spec: KernelSpec, set_dir: Path, shape: str) -> set[str]:
    from ctune.search import journal

    keys: set[str] = set()
    for path in _journals(spec, set_dir, shape):
        keys |= {t.candidate.key() for t in journal.read(path)[0].trials}
    return keys


def test_later_shapes_spend_their_budget_on_the_groups_builds(
    spec: KernelSpec, tmp_path: Path
) -> None:
    """reuse_share 1: a later shape of a compile group measures what the earlier shapes of the
    group measured (cache hits, best first) before it compiles anything new; the default
    share leaves three quarters of the budget to explore."""
    reused = _run(spec, tmp_path / "r", tmp_path / "reuse", reuse_share=1.0)
    assert reused.complete
    earlier = _measured(spec, tmp_path / "reuse", "m1")
    later = _measured(spec, tmp_path / "reuse", "m16")
    assert len(earlier) >= 8 and later <= earlier  # nothing new compiled for m16
    # the other group's first shape starts from nothing of this one
    from ctune.sets.problem_set import group_seeds

    problems = [spec.problem(n) for n in spec.problem_sets["all"]]
    opts = SetOptions("all", tmp_path / "reuse")
    for shape, other in (("m16-b", "m2048-b"), ("m2048-b", "m16-b")):
        seeds = group_seeds(spec, opts, problems, spec.problem(shape), direction="min")
        assert seeds and {spec.candidate(v).key() for v in seeds} <= _measured(
            spec, tmp_path / "reuse", other
        )
    # the warm start is m16's first generation: the whole budget but the baseline with a
    # share of 1, a quarter of it by default
    assert _warm_start(spec, tmp_path / "reuse", "m16") == 8 - 1
    explored = _run(spec, tmp_path / "e", tmp_path / "explore")
    assert explored.complete
    assert _warm_start(spec, tmp_path / "explore", "m16") == 8 // 4


def _warm_start(spec: KernelSpec, set_dir: Path, shape: str) -> int:
    from ctune.search import journal

    (path,) = _journals(spec, set_dir, shape)
    return sum(t.generation == 1 for t in journal.read(path)[0].trials)


def test_group_seeds_rank_earlier_builds_nearest_shape_first(
    spec: KernelSpec, tmp_path: Path
) -> None:
    from ctune.search import journal
    from ctune.sets.problem_set import group_seeds, read_winners, shape_distance

    _run(spec, tmp_path / "r", tmp_path / "set")
    opts = SetOptions("all", tmp_path / "set")
    problems = [spec.problem(n) for n in spec.problem_sets["all"]]
    target = spec.problem("m2048")
    seeds = group_seeds(spec, opts, problems, target, direction="min")
    keys = [spec.candidate(v).key() for v in seeds]
    default = spec.default_candidate().key()
    assert default not in keys and len(keys) == len(set(keys))
    # the earlier shapes' winners first, the nearest shape's (m16: M 16 vs 2048) before m1's
    assert shape_distance(spec.problem("m16"), target) < shape_distance(spec.problem("m1"), target)
    won = read_winners(opts)
    winners = list(dict.fromkeys(won[s].key() for s in ("m16", "m1") if won[s].key() != default))
    assert keys[: len(winners)] == winners
    # then by the ratio to the default on the nearest shape each was measured on
    ratio: dict[str, dict[str, float]] = {}
    for shape in ("m1", "m16"):
        for path in _journals(spec, tmp_path / "set", shape):
            trials = journal.read(path)[0].trials
            value = {t.candidate.key(): t.values[0] for t in trials if t.feasible and t.values}
            for k, v in value.items():
                ratio.setdefault(k, {})[shape] = v / value[default]
    rest = keys[len(winners) :]

    def nearest(k: str) -> tuple[int, float]:
        return (0, ratio[k]["m16"]) if "m16" in ratio[k] else (1, ratio[k]["m1"])

    # each build's best variant first, then the runtime variants of builds already listed,
    # each part by that ranking
    def build(k: str) -> Any:
        return spec.space.build_group(spec.candidate(seeds[keys.index(k)]).as_dict().items())

    seen = {build(k) for k in keys[: len(winners)]}
    firsts = []
    for k in rest:
        if build(k) not in seen:
            firsts.append(k)
            seen.add(build(k))
    repeats = [k for k in rest if k not in firsts]
    assert rest == firsts + repeats
    for part in (firsts, repeats):
        assert [nearest(k) for k in part] == sorted(nearest(k) for k in part)


class _NoCompiles(StandInCompiler):
    """A stand-in that refuses to compile and looks builds up only in what it was given."""

    def __init__(self, spec: KernelSpec, cached: dict[str, Any]) -> None:
        super().__init__(spec, fail_every=None)
        self.cached = cached
        self.submitted: list[str] = []

    def build(self, candidate: Any, problem: Any) -> Any:
        raise AssertionError("writing the finalists must not compile")

    def lookup(self, candidate: Any, problem: Any) -> Any:
        return self.cached.get(candidate.key())

    def submit(self, candidate: Any, problem: Any) -> Any:
        self.submitted.append(problem.name)
        return None


def test_finalists_name_cached_builds_without_compiling(spec: KernelSpec, tmp_path: Path) -> None:
    from ctune.sets.problem_set import _write_finalists
    from ctune.sets.set_layout import FINALISTS

    problems = [spec.problem(n) for n in spec.problem_sets["all"]]
    default = spec.default_candidate()
    built = StandInCompiler(spec, fail_every=None).build(default, problems[0])
    opts = SetOptions("all", tmp_path / "set")
    opts.set_dir.mkdir()
    _write_finalists(spec, opts, problems, _NoCompiles(spec, {default.key(): built}))
    entries = json.loads((opts.set_dir / FINALISTS).read_text())["finalists"]
    assert len(entries) == 2  # each group's default build, nothing searched yet
    assert {e["build_key"] for e in entries} == {built.build_key}  # a cache hit: named


def test_each_groups_default_build_starts_ahead(spec: KernelSpec) -> None:
    from ctune.sets.problem_set import _build_defaults_ahead

    compiler = _NoCompiles(spec, {})
    _build_defaults_ahead(spec, [spec.problem(n) for n in spec.problem_sets["all"]], compiler)
    assert compiler.submitted == ["m1", "m16-b"]  # one per compile group, its first shape


class _NoGpu(Measurer):
    """The measurer of a machine without a GPU: never asked to measure."""

    capabilities = frozenset[str]()

    def measure(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a machine without a GPU measured")

    def remeasure(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a machine without a GPU measured")


class SteppedClock:
    """Each reading is 50 s later: every phase step looks 50+ s long."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        self.t += 50.0
        return self.t


def test_stepped_calls_end_where_one_whole_call_does(spec: KernelSpec, tmp_path: Path) -> None:
    whole = _run(spec, tmp_path / "w", tmp_path / "whole")
    calls = []
    for _ in range(20):
        p = _run(spec, tmp_path / "s", tmp_path / "stepped", step_s=120, clock=SteppedClock())
        calls.append(p)
        if p.complete:
            break
    assert len(calls) > 2  # it did take several steps
    assert not calls[0].complete and calls[0].pending  # the first stopped among the searches
    last = calls[-1]
    assert last.cover is not None and whole.cover is not None
    assert last.cover.builds == whole.cover.builds
    assert last.cover.assignment == whole.cover.assignment


def test_journals_name_their_kernel_and_a_folder_of_old_names_resumes(
    spec: KernelSpec, tmp_path: Path
) -> None:
    """Set journals were ``<problem>.<n>.jsonl``: two kernels' sets with the same problem
    names (``prefill``) wrote journals of the same names. New ones are
    ``<kernel>-<problem>.<n>.jsonl``; a folder written with the old names resumes from them
    (the later shapes' seeds are read there)."""
    import shutil

    from ctune.sets.problem_set import _journal_path, group_seeds

    whole = _run(spec, tmp_path / "w", tmp_path / "whole")
    names = sorted(p.name for p in (tmp_path / "whole" / "journals").glob("*.jsonl"))
    assert len(names) == 5 and all(n.startswith("setk-m") for n in names), names

    def old_names(folder: Path) -> None:
        for path in (folder / "journals").iterdir():
            path.rename(path.with_name(path.name.removeprefix("setk-")))

    problems = [spec.problem(n) for n in spec.problem_sets["all"]]
    target = spec.problem("m2048")
    shutil.copytree(tmp_path / "whole", tmp_path / "old")
    old_names(tmp_path / "old")
    old = SetOptions("all", tmp_path / "old")
    whole_set = SetOptions("all", tmp_path / "whole")
    assert group_seeds(spec, old, problems, target, direction="min") == group_seeds(
        spec, whole_set, problems, target, direction="min"
    )
    assert _journal_path(old, spec, spec.problem("m16")).name == "setk-m16.1.jsonl"
    journals = tmp_path / "old" / "journals"
    (journals / "m16.0.jsonl").rename(journals / "m16.3.jsonl")  # numbers after the highest
    (journals / "m16.b.0.jsonl").write_text("")  # a shape m16.b's, not m16's
    assert _journal_path(old, spec, spec.problem("m16")).name == "setk-m16.4.jsonl"
    assert journal_paths(old, spec, spec.problem("m16")) == [journals / "m16.3.jsonl"]
    # a set stopped after its first step, its journals under the old names, goes on from them
    first = _run(spec, tmp_path / "s", tmp_path / "stepped", step_s=120, clock=SteppedClock())
    assert first.pending and first.searched
    old_names(tmp_path / "stepped")
    for _ in range(20):
        last = _run(spec, tmp_path / "s", tmp_path / "stepped", step_s=120, clock=SteppedClock())
        if last.complete:
            break
    assert last.cover is not None and whole.cover is not None
    assert last.cover.assignment == whole.cover.assignment


def test_refusals(spec: KernelSpec, tmp_path: Path) -> None:
    with pytest.raises(UserError, match="exactly one objective"):
        _run(spec, tmp_path, tmp_path / "x", objectives=("p50", "p99"))
    settings = Settings(cache_dir=tmp_path / "cache", registry=tmp_path / "registry")
    objective = parse_objective_spec(["p50"], [], spec.metrics)
    with pytest.raises(UserError, match="no problem set 'nope'"):
        run_problem_set(
            settings,
            spec,
            objective,
            SearchOptions(),
            SetOptions("nope", tmp_path / "x"),
            compiler=StandInCompiler(spec),
            measurer=StandInMeasurer(),
        )


def test_a_broken_matrix_file_is_one_clear_error(spec: KernelSpec, tmp_path: Path) -> None:
    (tmp_path / "m.json").write_text("{not json")
    with pytest.raises(UserError, match="not a dispatch matrix"):
        read_rows(tmp_path / "m.json")


_ROW = {"shape": "m16", "candidate": "c", "build": "b", "genes": {}, "cost": 1.0, "value": 1.0}


@pytest.mark.parametrize(
    ("rows", "needle"),
    [
        ({"x": 1}, "'rows' is not a list"),
        ([["x"]], r"rows\[0\] is not an object"),
        ([{"shape": "m16"}], r"rows\[0\]\.candidate is None, not a string"),
        ([_ROW, {**_ROW, "cost": "fast"}], r"rows\[1\]\.cost is 'fast', not a number or null"),
        ([{**_ROW, "value": True}], r"rows\[0\]\.value is True, not a number or null"),
        ([{**_ROW, "genes": [1]}], r"rows\[0\]\.genes is not an object"),
    ],
)
def test_a_hand_edited_matrix_row_is_one_line_naming_it(
    tmp_path: Path, rows: Any, needle: str
) -> None:
    path = tmp_path / "matrix.json"
    path.write_text(json.dumps({"rows": rows}))
    with pytest.raises(UserError, match=rf"matrix\.json: {needle}; move it away"):
        read_rows(path)
    path.write_text(json.dumps({"rows": [_ROW]}))
    assert read_rows(path) == [_ROW]


@pytest.mark.parametrize(
    ("winners", "needle"),
    [
        ([], "'winners' is not an object (shape: winner)"),
        ({"m1": "x"}, "winners.m1 is not a winner (kernel and genes)"),
        ({"m1": {"kernel": "setk", "genes": 5}}, "winners.m1.genes is not an object"),
    ],
)
def test_a_hand_edited_winners_file_is_one_line_naming_it(
    spec: KernelSpec, tmp_path: Path, winners: Any, needle: str
) -> None:
    from ctune.sets.problem_set import read_winners
    from ctune.sets.set_layout import WINNERS

    (tmp_path / WINNERS).write_text(json.dumps({"winners": winners}))
    with pytest.raises(UserError, match=rf"winners\.json: {re.escape(needle)}; move it away"):
        read_winners(SetOptions("all", tmp_path))


# --- the CLI ------------------------------------------------------------------------------


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.chdir(tmp_path)
    for name in ("CTUNE_CACHE_DIR", "CTUNE_JOBS", "CTUNE_L2", "CTUNE_DEBUG", "CTUNE_REGISTRY"):
        monkeypatch.delenv(name, raising=False)
    write_standin_kernel(tmp_path / "k", "setk", SET_YAML)
    measurer = StandInMeasurer(seed=3, samples=40, fault_corner=None, wrong_every=None)
    monkeypatch.setattr(search_cli, "load_kernel", lambda kernel, cfg: (load_spec(kernel), None))
    monkeypatch.setattr(
        search_cli, "make_compiler", lambda spec, tc, cfg: StandInCompiler(spec, fail_every=None)
    )
    monkeypatch.setattr(search_cli, "make_measurer", lambda cfg: measurer)

    def invoke(*args: str) -> Any:
        return CliRunner().invoke(
            ctune_main, ["search", "k/setk.cu", "-O", "p50", *args], env={"COLUMNS": "200"}
        )

    return invoke


def test_cli_problem_set_writes_the_table(cli: Any, tmp_path: Path) -> None:
    result = cli("--problem-set", "one", "--budget", "6", "--set-dir", "s", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout[result.stdout.index("{") :])
    assert out["complete"] is True and out["searched"] == ["m16"]
    assert (tmp_path / "s" / "dispatch.json").is_file()
    assert (tmp_path / "s" / "dispatch.h").is_file()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--problem", "m16"), "--problem-set with --problem"),
        (("--out", "x.json"), "--problem-set with --out"),
        (("--dispatch-margin", "lots"), "--dispatch-margin 'lots'"),
        (("--cross-processes", "0"), "--cross-processes must be 1"),
        (("--dispatch-shipped", "absent.json"), "--dispatch-shipped absent.json: not a"),
        (("--dispatch-vendor",), "setk.yaml names no vendor call; add a 'vendor' key"),
        (("--warm-start-share", "0.5"), "--warm-start-share does not apply to --problem-set"),
    ],
)
def test_cli_problem_set_refusals(cli: Any, args: tuple[str, ...], needle: str) -> None:
    result = cli("--problem-set", "one", *args)
    assert result.exit_code == 2, result.output
    assert needle in result.output
    assert "Traceback" not in result.output


def test_cli_a_damaged_winners_file_is_exit_2(cli: Any, tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "winners.json").write_text('{"winners": []}')
    result = cli("--problem-set", "one", "--budget", "4", "--set-dir", "s")
    assert result.exit_code == 2, result.output
    assert "winners.json: 'winners' is not an object" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("flag", [("--dispatch-vendor",), ("--dispatch-shipped", "t.json")])
def test_cli_dispatch_options_need_a_problem_set(cli: Any, flag: tuple[str, ...]) -> None:
    result = cli(*flag)
    assert result.exit_code == 2, result.output
    assert f"{flag[0]} shapes a problem set's dispatch table; add --problem-set" in result.output
    assert "Traceback" not in result.output


def test_cli_problem_set_refuses_a_t4_file_of_another_kernel(cli: Any, tmp_path: Path) -> None:
    """The set's own seeds name every gene: the file is checked alone, before they join it
    (and before the set's default builds compile)."""
    t4 = tmp_path / "gemm.t4.json"
    result = {"configuration": {"BLOCK_M": 64}, "invalidity": "correct", "correctness": 1}
    t4.write_text(json.dumps({"schema_version": "1.0.0", "results": [result]}))
    done = cli("--problem-set", "all", "--warm-start", str(t4))
    assert done.exit_code == 2, done.output
    assert "no parameter of its configurations (BLOCK_M) is a gene of setk" in done.stderr
    assert not (tmp_path / ".ctune").exists()


def test_a_given_warm_start_seeds_every_group_after_its_own_builds(
    spec: KernelSpec, tmp_path: Path
) -> None:
    """--warm-start with a problem set: the first shape of each compile group measures the
    given configurations first; a later shape measures its group's builds, then those."""
    import dataclasses

    from ctune.search import journal

    pool = [{"TILE_M": 16, "TILE_N": 32, "STAGES": 3}, {"TILE_M": 128, "TILE_N": 64}]
    keys = {spec.candidate({**spec.space.default_values(), **c}).key() for c in pool}
    settings = Settings(cache_dir=tmp_path / "cache", registry=tmp_path / "registry")
    search = SearchOptions(
        budget=8,
        seed=1,
        confirm_processes=2,
        journal_fsync=False,
        warm_start=tuple(pool),
        warm_start_source="pool.json",
    )
    set_dir = tmp_path / "set"
    progress = run_problem_set(
        settings,
        spec,
        parse_objective_spec(["p50"], [], spec.metrics),
        search,
        dataclasses.replace(SetOptions("all", set_dir), reuse_share=1.0),
        compiler=StandInCompiler(spec, fail_every=None),
        measurer=StandInMeasurer(seed=3, samples=40, fault_corner=None, wrong_every=None),
        publish_for=lambda out: ResultPublisher(settings.registry, settings.cache_dir, out),
    )
    assert progress.complete

    def first_generation(shape: str) -> list[str]:
        (path,) = _journals(spec, set_dir, shape)
        return [t.candidate.key() for t in journal.read(path)[0].trials if t.generation == 1]

    for first_of_group in ("m1", "m16-b"):  # the pool is all they have to start from
        assert set(first_generation(first_of_group)) == keys
    later = first_generation("m16")
    assert keys <= set(later) and len(later) == 8 - 1  # the group's builds and the pool
    from ctune.sets.problem_set import read_winners

    winner = read_winners(SetOptions("all", set_dir))["m1"]
    if winner.key() != spec.default_candidate().key():
        assert later[0] == winner.key()  # the group's own winner comes before the pool


def test_group_seeds_prefer_the_nearest_shapes_measurements(
    spec: KernelSpec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build that won far away (M = 1) ranks below what the nearest shape (M = 16) measured
    for an M = 2048 shape: winners by their shape's distance, the rest by the ratio on the
    nearest shape they ran on."""
    from types import SimpleNamespace

    from ctune.search import journal
    from ctune.sets.problem_set import group_seeds
    from ctune.sets.set_layout import WINNERS

    values = list(spec.space.iter_valid(spec.problem("m16").dims))
    default = spec.default_candidate()
    a, b, c, d, e = [spec.candidate(v) for v in values if spec.candidate(v) != default][:5]
    measured = {  # shape -> candidate -> p50 (the default at 1.0)
        "m1": {default: 1.0, a: 0.5, b: 0.9, d: 0.3},
        "m16": {default: 1.0, a: 0.95, b: 0.6, c: 0.8, e: 0.7},
    }
    set_dir = tmp_path / "set"
    (set_dir / "journals").mkdir(parents=True)
    for shape in measured:
        (set_dir / "journals" / f"{shape}.0.jsonl").write_text("")
    winners = {"m1": a.to_json(), "m16": b.to_json()}
    (set_dir / WINNERS).write_text(json.dumps({"winners": winners}))

    def fake_read(path: Path) -> tuple[Any, Any]:
        shape = path.name.split(".")[0]
        trials = [
            SimpleNamespace(candidate=cand, feasible=True, values=(v,))
            for cand, v in measured[shape].items()
        ]
        return SimpleNamespace(trials=trials), None

    monkeypatch.setattr(journal, "read", fake_read)
    problems = [spec.problem(n) for n in ("m1", "m16", "m2048")]
    seeds = group_seeds(
        spec, SetOptions("all", set_dir), problems, spec.problem("m2048"), direction="min"
    )
    assert [spec.candidate(v) for v in seeds] == [b, a, e, c, d]


def _m16_journal_of(
    measured: dict[Any, float], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """A set folder whose m16 journal reads as ``measured`` (candidate: value), feasible."""
    from types import SimpleNamespace

    from ctune.search import journal

    set_dir = tmp_path / "set"
    (set_dir / "journals").mkdir(parents=True)
    (set_dir / "journals" / "m16.0.jsonl").write_text("")

    def fake_read(path: Path) -> tuple[Any, Any]:
        trials = [
            SimpleNamespace(candidate=cand, feasible=True, values=(v,))
            for cand, v in measured.items()
        ]
        return SimpleNamespace(trials=trials), None

    monkeypatch.setattr(journal, "read", fake_read)
    return set_dir


def test_group_seeds_list_each_build_before_more_runtime_variants(
    spec: KernelSpec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On an H200 the 128-token shapes of a decode set spent their whole reuse budget on
    runtime variants of the 1- and 16-token winners' builds and never measured a build that
    fills 128 tokens: a build's best variant comes before more variants of listed builds."""

    from ctune.sets.problem_set import group_seeds

    default = spec.default_candidate()
    x1, x2, x4 = (
        spec.candidate({**default.as_dict(), "TILE_M": 16, "SPLIT_K": s}) for s in (1, 2, 4)
    )
    y = spec.candidate({**default.as_dict(), "TILE_M": 128})
    z = spec.candidate({**default.as_dict(), "STAGES": 4})
    measured = {default: 1.0, x1: 0.5, x2: 0.55, x4: 0.6, y: 0.9, z: 0.95}
    set_dir = _m16_journal_of(measured, tmp_path, monkeypatch)
    problems = [spec.problem(n) for n in ("m16", "m2048")]
    seeds = group_seeds(
        spec, SetOptions("all", set_dir), problems, spec.problem("m2048"), direction="min"
    )
    assert [spec.candidate(v) for v in seeds] == [x1, y, z, x2, x4]


def test_a_set_checks_the_request_and_the_gpu_before_anything_compiles(
    spec: KernelSpec, tmp_path: Path
) -> None:
    """It compiled the shapes' default builds first and then said "p99 needs a CUDA GPU
    ...; nothing was compiled"; a strategy typo was found only after that, too."""
    from ctune.errors import ToolchainError

    settings = Settings(cache_dir=tmp_path / "cache", registry=tmp_path / "registry")
    compiler = StandInCompiler(spec, fail_every=None)

    def run(objective: str, **options: Any) -> None:
        run_problem_set(
            settings,
            spec,
            parse_objective_spec([objective], [], spec.metrics),
            SearchOptions(budget=8, seed=1, **options),
            SetOptions("all", tmp_path / "set"),
            compiler=compiler,
            measurer=_NoGpu(),
        )

    with pytest.raises(UserError, match="unknown strategy 'gaa'"):
        run("p99", strategy="gaa")
    with pytest.raises(ToolchainError, match=r"p99 needs a CUDA GPU.*nothing was compiled"):
        run("p99")
    assert compiler.calls == 0 and not (tmp_path / "set").exists()


def test_a_finished_set_covers_again_without_a_gpu_taking_shipped_builds_first(
    spec: KernelSpec, tmp_path: Path
) -> None:
    """A set re-searched beside others: its cover is redone from its files on a machine
    without a GPU, with the builds other tables ship (here: every build it measured but
    its own first cover's) taken first."""
    first = _run(spec, tmp_path, tmp_path / "set")
    assert first.cover is not None
    rows = read_rows(tmp_path / "set" / MATRIX)
    others = frozenset(r["build"] for r in rows) - set(first.cover.builds)
    assert others, "the stand-in set measures more builds than its cover takes"

    settings = Settings(cache_dir=tmp_path / "cache", registry=tmp_path / "registry")
    again = run_problem_set(
        settings,
        spec,
        parse_objective_spec(["p50"], [], spec.metrics),
        SearchOptions(budget=8, seed=1, confirm_processes=2, journal_fsync=False),
        SetOptions("all", tmp_path / "set", margin=0.03, shipped=others),
        compiler=StandInCompiler(spec, fail_every=None),
        measurer=_NoGpu(),
    )
    cover = again.cover
    assert cover is not None and read_rows(tmp_path / "set" / MATRIX) == rows
    assert set(cover.shipped) == set(cover.builds) & others
    new = set(cover.builds) - others
    # no more new builds than the first cover, every shape still within the margin
    assert len(new) <= len(first.cover.builds)
    assert cover.max_loss <= 0.03 + EDGE_EPS
    table = json.loads((tmp_path / "set" / "dispatch.json").read_text())
    # the GPU is named from the matrix's rows: this machine's measurer knows none
    assert table["device"] == STANDIN_DEVICE.name
    assert set(table["shipped"]) == set(cover.shipped)
    assert [b["id"] for b in table["builds"]] == list(cover.builds)


def test_an_interrupted_set_says_what_its_folder_keeps(spec: KernelSpec, tmp_path: Path) -> None:
    """Ctrl-C in the third shape's search: the set stops (exit 130 at the command line)
    saying its folder keeps the two shapes searched, and the next call goes on from there."""
    from ctune.interrupts import Interrupted

    settings = Settings(cache_dir=tmp_path / "cache", registry=tmp_path / "registry")
    objective = parse_objective_spec(["p50"], [], spec.metrics)
    search = SearchOptions(budget=8, seed=1, confirm_processes=0, journal_fsync=False)
    set_dir = tmp_path / "set"
    opts = SetOptions("all", set_dir, margin=0.03, cross_processes=2)
    measurer = StandInMeasurer(seed=3, samples=40, fault_corner=None, wrong_every=None)
    measurer.interrupt_at = 20  # two shapes of 8 measurements, then the third's 4th
    with pytest.raises(Interrupted) as stopped:
        run_problem_set(
            settings, spec, objective, search, opts,
            compiler=StandInCompiler(spec, fail_every=None), measurer=measurer,
        )  # fmt: skip
    assert stopped.value.kept.startswith(f"{set_dir} keeps 2 of 5 shapes searched")
    progress = _run(spec, tmp_path, set_dir)
    assert progress.complete and len(progress.searched) == 5


def test_a_winner_the_spec_does_not_have_is_refused(spec: KernelSpec, tmp_path: Path) -> None:
    """winners.json is data: a winner edited by hand is never built (docs/security.md)."""
    from ctune.sets.set_layout import WINNERS

    set_dir = tmp_path / "set"
    set_dir.mkdir()
    problems = spec.select_problems("all")
    genes = {**spec.space.default_values(), "TILE_M": 32}
    (set_dir / WINNERS).write_text(
        json.dumps({"winners": {"m1": {"kernel": "setk", "genes": genes}}})
    )
    assert len(finalists(spec, SetOptions("all", set_dir), problems)[group_of(problems[0])]) == 2
    genes["TILE_M"] = "32 $(touch x)"
    (set_dir / WINNERS).write_text(
        json.dumps({"winners": {"m1": {"kernel": "setk", "genes": genes}}})
    )
    with pytest.raises(UserError, match=r"winners\.json: the winner of m1: TILE_M="):
        finalists(spec, SetOptions("all", set_dir), problems)


def test_a_folder_of_another_kernel_or_set_is_refused(spec: KernelSpec, tmp_path: Path) -> None:
    """A folder records whose set it holds: another kernel's winners are never adopted."""
    from ctune.sets.problem_set import check_owner
    from ctune.sets.set_layout import OWNER, WINNERS

    set_dir = tmp_path / "set"
    _run(spec, tmp_path, set_dir, step_s=1e-9)  # one shape searched: the folder is claimed
    assert json.loads((set_dir / OWNER).read_text())["kernel"] == "setk"
    check_owner(spec, SetOptions("all", set_dir))
    with pytest.raises(UserError, match=r"set: holds kernel setk's set all, not setk's set one; "):
        check_owner(spec, SetOptions("one", set_dir))
    (set_dir / OWNER).write_text(json.dumps({"kernel": "other", "set": "all"}))
    with pytest.raises(UserError, match=r"holds kernel other's set all.*use another --set-dir"):
        _run(spec, tmp_path, set_dir)
    (set_dir / OWNER).unlink()  # a folder written before set.json: its winners' kernel
    genes = spec.space.default_values()
    (set_dir / WINNERS).write_text(
        json.dumps({"winners": {"m1": {"kernel": "other", "genes": genes}}})
    )
    with pytest.raises(UserError, match="holds kernel other's search, not setk's set all"):
        _run(spec, tmp_path, set_dir)


def test_group_seeds_rank_by_how_far_each_beat_the_default_either_direction(
    spec: KernelSpec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TFLOP/s is maximised: the build 2x the default's comes first, not the one at half."""

    from ctune.sets.problem_set import group_seeds

    default = spec.default_candidate()
    a = spec.candidate({**default.as_dict(), "TILE_M": 16})
    b = spec.candidate({**default.as_dict(), "TILE_M": 128})
    c = spec.candidate({**default.as_dict(), "STAGES": 4})
    measured = {default: 1.0, a: 2.0, b: 0.5, c: 1.5}
    set_dir = _m16_journal_of(measured, tmp_path, monkeypatch)
    problems = [spec.problem(n) for n in ("m16", "m2048")]
    opts, target = SetOptions("all", set_dir), spec.problem("m2048")
    best_first = {"max": [a, c, b], "min": [b, c, a]}
    for direction, want in best_first.items():
        seeds = group_seeds(spec, opts, problems, target, direction=direction)
        assert [spec.candidate(v) for v in seeds] == want

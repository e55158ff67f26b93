"""T4 and CSV out of a journal or an artifact, and T4 back in as a warm start (stand-ins)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from ctune.cli.results import load
from ctune.config import Settings
from ctune.errors import UserError
from ctune.exchange.records import from_artifact, from_journal
from ctune.exchange.t4 import INVALIDITY, candidates, read_t4, to_t4
from ctune.exchange.table import to_csv
from ctune.objective import parse_objective_spec
from ctune.registry.store import read_result
from ctune.search import events as ev
from ctune.search.driver import SearchOptions, run_search
from ctune.search.journal import read
from ctune.spec import KernelSpec
from ctune.testing.standins import StandInCompiler, StandInMeasurer

#: the invalidity values Kernel Tuner's T4 1.0.0 results schema allows
T4_INVALIDITY = {"timeout", "compile", "runtime", "correctness", "constraints", "correct"}


def _check_t4(document: dict) -> None:
    """The T4 1.0.0 results schema's rules, as Kernel Tuner ships it."""
    assert document["schema_version"] == "1.0.0"
    for result in document["results"]:
        assert {"configuration", "times", "invalidity", "correctness"} <= set(result)
        assert isinstance(result["configuration"], dict) and isinstance(result["times"], dict)
        assert result["invalidity"] in T4_INVALIDITY
        assert isinstance(result["correctness"], (int, float))
        for m in result["measurements"]:
            assert isinstance(m["name"], str) and isinstance(m["unit"], str)
            assert isinstance(m["value"], (int, float))


def test_a_journal_as_t4_and_csv(search, spec: KernelSpec) -> None:
    result, *_ = search(
        measurer=StandInMeasurer(samples=40, wrong_every=5),
        budget=30,
        seed=4,
        constraints=("regs<=90",),
        confirm_processes=0,
    )
    export = from_journal(result.journal)
    replay, _ = read(result.journal)
    assert len(export.rows) == len(replay.trials) == 30
    document = to_t4(export)
    _check_t4(document)
    assert json.loads(json.dumps(document)) == document  # plain JSON, no NaN
    by_outcome = {row.outcome for row in export.rows}
    assert {"ok", "compile_error", "wrong_result"} <= by_outcome
    for row, t4 in zip(export.rows, document["results"], strict=True):
        assert t4["configuration"] == row.configuration
        assert t4["invalidity"] == INVALIDITY[row.outcome]
        assert t4["correctness"] == (0 if row.outcome == "wrong_result" else 1)
        if row.outcome == "ok":
            names = {m["name"] for m in t4["measurements"]}
            assert {"p50", "time", "p99", "regs"} <= names and t4["objectives"] == ["p50"]
            assert t4["times"]["runtimes"] and t4["times"]["compilation_time"] > 0
    assert any(r.outcome == "infeasible" for r in export.rows)  # regs<=90 broken
    rows = list(csv.DictReader(io.StringIO(to_csv(export))))
    assert len(rows) == 30 and list(rows[0])[:3] == ["role", "key", "outcome"]
    assert {"TILE_M", "p50_ms", "p99_ms", "regs", "compile_s"} <= set(rows[0])
    assert "p50" not in rows[0]  # the p50 objective is the p50_ms column, not a second one
    ok = next(r for r in rows if r["outcome"] == "ok")
    assert float(ok["p50_ms"]) > 0 and int(ok["regs"]) > 0


def test_t4_is_standard_json_when_the_journal_holds_a_nan(search, tmp_path: Path) -> None:
    """The journal's writer lets a NaN through rather than crash a run, and an edited
    journal can hold one in a gene: T4 once carried ``"compilation_time": NaN``, which
    is not JSON. A non-finite time is left out, a non-finite gene value is null."""
    from ctune.exchange.t4 import t4_text

    done, *_ = search(budget=6, confirm_processes=0)
    records = [json.loads(line) for line in done.journal.read_text().splitlines()]
    trial = next(r["trial"] for r in records if r["kind"] == "trial" and r["trial"]["build"])
    trial["build"]["compile_s"] = float("nan")
    trial["candidate"]["genes"]["TILE_M"] = float("inf")
    journal = tmp_path / "nan.jsonl"
    journal.write_text("".join(json.dumps(r) + "\n" for r in records))

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    document = json.loads(t4_text(from_journal(journal)), parse_constant=refuse)
    damaged = next(r for r in document["results"] if r["configuration"]["TILE_M"] is None)
    assert "compilation_time" not in damaged["times"]
    _check_t4(document)


def test_an_objective_named_like_a_column_is_that_column() -> None:
    """The committed journal's objectives are p50 and regs: CSV once wrote two ``regs``
    columns (pandas reads ``regs.1``) and both ``p50`` and ``p50_ms``, T4 two ``p50`` and
    two ``regs`` measurements."""
    journal = Path(__file__).parents[3] / "tests" / "data" / "journals" / "saxpy-n1m-replay.jsonl"
    export = from_journal(journal)
    assert [o.name for o in export.objectives] == ["p50", "regs"]
    header, *body = list(csv.reader(io.StringIO(to_csv(export))))
    assert len(header) == len(set(header)) and {"p50_ms", "regs"} <= set(header)
    assert "p50" not in header
    first = dict(zip(header, body[0], strict=True))
    assert float(first["p50_ms"]) == export.rows[0].values["p50"]
    assert int(first["regs"]) == export.rows[0].resources["regs"] == export.rows[0].values["regs"]
    for result in to_t4(export)["results"]:
        names = [m["name"] for m in result["measurements"]]
        assert len(names) == len(set(names)) and result["objectives"] == ["p50", "regs"]
        if result["invalidity"] == "correct":
            assert {"p50", "regs", "time", "p99", "spills_bytes"} <= set(names)


def test_the_registrys_gzip_copy_of_a_journal_exports_as_the_journal(
    search, settings, tmp_path: Path
) -> None:
    """``.jsonl.gz``, the registry's copy, is a journal to every reader: it was taken for a
    registry KEY and refused as one."""
    from ctune.search import journal_copy

    done, *_ = search(budget=6, confirm_processes=0)
    copy = tmp_path / "sm90-nvidia-h200.jsonl.gz"
    copy.write_bytes(journal_copy.pack(done.journal.read_bytes()))
    exported = load(str(copy), settings.registry)
    assert exported.rows == from_journal(done.journal).rows and len(exported.rows) == 6


def test_an_artifact_as_t4(search, settings) -> None:
    result, *_ = search(budget=12, seed=1, confirm_processes=3)
    assert result.artifact_path is not None
    export = from_artifact(read_result(result.artifact_path), str(result.artifact_path))
    roles = [row.role for row in export.rows]
    assert roles[0] == "baseline" and roles.count("pinned") == 1
    document = to_t4(export)
    _check_t4(document)
    assert document["metadata"]["kernel"] == "standin"
    assert load(str(result.artifact_path), settings.registry).rows[0].key == export.rows[0].key
    with pytest.raises(UserError, match="expected a journal"):
        load("nonsense", settings.registry)


def test_t4_reads_back_best_first_and_maps_onto_the_space(tmp_path: Path, spec: KernelSpec) -> None:
    path = tmp_path / "kt.json"
    path.write_text(
        json.dumps(
            {
                "schema_version": "1.0.0",
                "results": [
                    {"configuration": {"TILE_M": 128.0, "TILE_N": "64"}, "times": {},
                     "invalidity": "correct", "correctness": 1, "objectives": ["time"],
                     "measurements": [{"name": "time", "value": 2.0, "unit": "ms"}]},
                    {"configuration": {"TILE_M": 32, "block_size_x": 99}, "times": {},
                     "invalidity": "correct", "correctness": 1, "objectives": ["time"],
                     "measurements": [{"name": "time", "value": 1.0, "unit": "ms"}]},
                    {"configuration": {"TILE_M": 64}, "times": {}, "invalidity": "compile",
                     "correctness": 1},
                    {"configuration": {"TILE_M": 48}, "times": {}, "invalidity": "correct",
                     "correctness": 1, "objectives": ["time"],
                     "measurements": [{"name": "time", "value": 0.5, "unit": "ms"}]},
                    {"configuration": {"TILE_M": 256, "TILE_N": 256}, "times": {},
                     "invalidity": "correct", "correctness": 1},
                ],
            }
        )
    )  # fmt: skip
    configurations = read_t4(path)
    assert [c["TILE_M"] for c in configurations] == [48, 32, 128.0, 256]  # time ascending
    mapped = candidates(spec.name, spec.space, configurations, spec.problem().dims)
    found = mapped.candidates
    # 48 is not a TILE_M value; 256 x 256 breaks TILE_M * TILE_N <= 16384
    assert mapped.invalid == 2 and mapped.repeated == 0
    assert [c.as_dict()["TILE_M"] for c in found] == [32, 128]
    assert found[1].as_dict()["TILE_N"] == 64 and found[0].as_dict()["SCHEDULE"] == "row"
    bad = tmp_path / "bad.json"
    bad.write_text('{"data": []}')
    with pytest.raises(UserError, match="not a T4 results file"):
        read_t4(bad)


_RESULT = '{"configuration": {"TILE_M": 32}, "invalidity": "correct", "correctness": 1'
_BIG = "1" + "0" * 400  # valid JSON, too large for a float


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("[1, 2]", "the document: expected an object"),
        ('{"results": {"a": 1}}', "results: expected a list"),
        ('{"results": [7]}', "results[0]: expected an object"),
        ('{"results": [{"configuration": [1]}]}', "results[0].configuration: expected an object"),
        (
            '{"results": [{"configuration": {"tile": 2}, "objectives": {"time": 1}}]}',
            "results[0].objectives: expected a list, each an objective name",
        ),
        # a string is not split into names ("t", "i", ...) nor taken as one: the schema and
        # every writer (Kernel Tuner, ctune) have a list, so a string is a damaged file
        (f'{{"results": [{_RESULT}, "objectives": "time"}}]}}', "results[0].objectives: "),
        (f'{{"results": [{_RESULT}, "objectives": [5]}}]}}', "results[0].objectives[0]: "),
        (
            f'{{"results": [{_RESULT}, "measurements": {{"time": 1}}}}]}}',
            "results[0].measurements: expected a list, each a {name, value, unit} object",
        ),
        (f'{{"results": [{_RESULT}, "measurements": [1]}}]}}', "results[0].measurements[0]: "),
        (
            f'{{"results": [{_RESULT}, "measurements": [{{"value": 1}}]}}]}}',
            "results[0].measurements[0].name: expected text",
        ),
        ('{"schema_version": "9.9.9", "results": []}', "schema_version: expected 1.x.y"),
        ('{"schema_version": 1, "results": []}', "schema_version: expected 1.x.y"),
        ('{"results": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
    ],
    ids=lambda v: v if len(v) < 40 else f"{v[:30]}...",
)
def test_a_malformed_t4_file_is_one_line_naming_the_field(
    tmp_path: Path, text: str, field: str
) -> None:
    path = tmp_path / "bad.t4.json"
    path.write_text(text)
    with pytest.raises(UserError) as err:
        read_t4(path)
    message = str(err.value)
    assert message.startswith(f"{path}: not a T4 results file (") and field in message
    assert "\n" not in message


def test_numbers_a_float_cannot_hold_rank_last_and_match_no_gene(
    tmp_path: Path, spec: KernelSpec
) -> None:
    """A 400-digit measurement ranks as a value that is not a number (last); a 400-digit
    configuration value is no gene's value: neither is an overflow further on."""
    path = tmp_path / "big.t4.json"
    path.write_text(
        '{"schema_version": "1.2.0", "results": ['
        f'{{"configuration": {{"TILE_M": 16}}, "objectives": ["time"], '
        f'"measurements": [{{"name": "time", "value": {_BIG}}}]}}, '
        '{"configuration": {"TILE_M": 32}, "objectives": ["time"], '
        '"measurements": [{"name": "time", "value": 3.0}]}, '
        f'{{"configuration": {{"TILE_M": {_BIG}}}}}]}}'
    )
    configurations = read_t4(path)
    assert [c["TILE_M"] for c in configurations] == [32, 16, int(_BIG)]
    mapped = candidates(spec.name, spec.space, configurations, spec.problem().dims)
    assert mapped.invalid == 1 and len(mapped.candidates) == 2


@pytest.mark.parametrize(
    ("objective", "best_first"),
    [
        ("time", [100, 500, 900]),  # Kernel Tuner's default: lower is better
        ("p50", [100, 500, 900]),  # a ctune term: its own direction
        ("tflops", [900, 500, 100]),
        ("GFLOP/s", [900, 500, 100]),  # a rate, as Kernel Tuner names its metrics
        ("GB/s", [900, 500, 100]),
        ("TFLOP/s", [900, 500, 100]),
        ("GFLOPS/W", [900, 500, 100]),  # work per watt
    ],
)
def test_t4_ranks_by_the_first_objectives_direction(
    tmp_path: Path, objective: str, best_first: list[int]
) -> None:
    results = [
        {"configuration": {"TILE_M": v}, "invalidity": "correct", "correctness": 1,
         "objectives": [objective], "measurements": [{"name": objective, "value": v}]}
        for v in (100, 900, 500)
    ]  # fmt: skip
    path = tmp_path / "kt.json"
    path.write_text(json.dumps({"schema_version": "1.0.0", "results": results}))
    assert [c["TILE_M"] for c in read_t4(path)] == best_first


def test_a_t4_export_warm_starts_another_search(search, tmp_path: Path) -> None:
    first, *_ = search(budget=30, seed=2, confirm_processes=0)
    t4 = tmp_path / "first.json"
    t4.write_text(json.dumps(to_t4(from_journal(first.journal))))
    configurations = read_t4(t4)
    second, _, _, events = search(
        budget=28,
        seed=9,
        confirm_processes=0,
        warm_start=tuple(configurations),
        warm_start_source=str(t4),
    )
    replay, _ = read(second.journal)
    default = replay.trials[0].candidate.as_dict()  # the baseline: measured already
    warm = [t.candidate.as_dict() for t in replay.trials if t.generation == 1]
    assert warm == [c for c in configurations if c != default][:7]  # a quarter of 28, best first
    notes = [e.message for e in events if isinstance(e, ev.Note)]
    assert any(n.startswith(f"warm start from {t4}: 7 of ") for n in notes)
    assert second.evaluations == 28


def _t4(path: Path, *configurations: dict) -> tuple[dict, ...]:
    """A T4 file of correct configurations, in this order (no measurements: file order)."""
    results = [
        {"configuration": c, "times": {}, "invalidity": "correct", "correctness": 1}
        for c in configurations
    ]
    path.write_text(json.dumps({"schema_version": "1.0.0", "results": results}))
    return tuple(read_t4(path))


def test_a_warm_start_accounts_for_every_configuration(search, tmp_path: Path) -> None:
    t4 = tmp_path / "mixed.json"
    configurations = _t4(
        t4,
        {"TILE_M": 32, "TILE_N": 32, "STAGES": 2, "SPLIT_K": 1, "SCHEDULE": "row"},
        {"TILE_M": 32, "TILE_N": 32, "STAGES": 2, "SPLIT_K": 1, "SCHEDULE": "row"},  # again
        {"TILE_M": 32, "TILE_N": 32, "block_size_x": 7},  # the first, but for a name: repeated
        {"TILE_M": 64},  # the default build: already tried (the baseline)
        {"TILE_M": 48},  # not a TILE_M value
        {"TILE_M": 16, "TILE_N": 16},
        {"TILE_M": 16, "TILE_N": 32},
        {"TILE_M": 32, "TILE_N": 16},  # over the limit: a quarter of 12 is 3
    )
    _, _, _, events = search(
        budget=12, confirm_processes=0, warm_start=configurations, warm_start_source=str(t4)
    )
    notes = [e.message for e in events if isinstance(e, ev.Note)]
    assert (
        f"warm start from {t4}: 3 of 8 configurations measured first (1 not valid here, "
        "1 already tried, 2 the same candidate as an earlier one, 1 over the warm start's "
        "limit of 3); 6 name only some genes (the rest at their defaults)"
    ) in notes


def test_a_t4_file_of_another_kernel_is_refused_before_anything_runs(
    spec: KernelSpec, settings: Settings, tmp_path: Path
) -> None:
    """No parameter of the file is a gene here: each configuration would be the default
    build, and the counts would say nothing of why. Refused, GPU or not."""
    t4 = tmp_path / "gemm.t4.json"
    configurations = _t4(t4, {"BLOCK_M": 128, "BLOCK_N": 64}, {"BLOCK_M": 64, "BLOCK_N": 64})
    compiler = StandInCompiler(spec)
    with pytest.raises(UserError) as err:
        run_search(
            settings,
            spec,
            parse_objective_spec(["regs"], [], spec.metrics),
            SearchOptions(budget=8, warm_start=configurations, warm_start_source=str(t4)),
            compiler=compiler,
            capabilities=set(),
        )
    text = str(err.value)
    assert text.startswith(f"{t4}: no parameter of its configurations (BLOCK_M, BLOCK_N) is ")
    assert "a gene of standin (TILE_M, TILE_N, STAGES, SPLIT_K, SCHEDULE)" in text
    assert "another kernel's results" in text and "\n" not in text
    assert compiler.calls == 0 and not Path(settings.cache_dir).exists()


def test_the_export_command(tmp_path: Path, monkeypatch, capsys) -> None:
    from typer.testing import CliRunner

    from ctune.cli import _register_commands, app
    from ctune.config import Settings
    from ctune.objective import parse_objective_spec
    from ctune.search.driver import SearchOptions, run_search
    from ctune.testing.standins import standin_spec

    spec = standin_spec(tmp_path / "k")
    result = run_search(
        Settings(cache_dir=tmp_path / "cache"),
        spec,
        parse_objective_spec(["p50"], [], spec.metrics),
        SearchOptions(budget=6, confirm_processes=0, journal_fsync=False),
        compiler=StandInCompiler(spec),
        measurer=StandInMeasurer(samples=20),
    )
    _register_commands()
    runner = CliRunner()
    done = runner.invoke(app, ["export", str(result.journal), "--as", "csv"])
    assert done.exit_code == 0 and done.stdout.startswith("role,key,outcome,")
    out = tmp_path / "t4" / "r.json"
    done = runner.invoke(app, ["export", str(result.journal), "-o", str(out)])
    assert done.exit_code == 0 and len(json.loads(out.read_text())["results"]) == 6
    monkeypatch.chdir(tmp_path)
    from ctune.cli import main  # the one error mapping and exit codes

    with pytest.raises(SystemExit) as exit_info:
        main(["export", str(result.journal), "--as", "xml"])
    assert exit_info.value.code == 2
    assert "--as xml: unknown format (allowed: t4, csv, flags, header, cmake, json)" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize(
    ("objective", "unit", "column"),
    [
        ("p99", "ms", "p99_ms"),
        ("median", "ms", "p50_ms"),  # an alias is its term's column
        ("energy", "J", "energy_j"),
        ("power", "W", "avg_power_w"),
        ("spills", "B", "spills_bytes"),
        ("compile_time", "s", "compile_s"),
        ("regs", "regs", "regs"),
        ("tflops", "TFLOP/s", "tflops_tflop_per_s"),
        ("edp", "J*s", "edp_j_s"),
        ("0.7*p50 + 0.3*p99", "ms", "(0.7*p50 + 0.3*p99)_ms"),
        ("plugin_term", "", "plugin_term"),
    ],
)
def test_each_objective_has_one_column_with_its_unit(
    objective: str, unit: str, column: str
) -> None:
    from ctune.exchange.columns import objective_column

    assert objective_column(objective, unit) == column


class _OrderRecordingCompiler(StandInCompiler):
    """The stand-in compiler, recording which candidates were submitted and built, in order."""

    def __init__(self, spec: KernelSpec) -> None:
        super().__init__(spec)
        self.sequence: list[tuple[str, str]] = []

    def submit(self, candidate, problem):  # type: ignore[no-untyped-def]
        self.sequence.append(("submit", candidate.key()))
        return super().submit(candidate, problem)

    def build(self, candidate, problem):  # type: ignore[no-untyped-def]
        self.sequence.append(("build", candidate.key()))
        return super().build(candidate, problem)


def test_the_warm_starts_builds_start_before_the_baseline_is_built(
    search, spec: KernelSpec, tmp_path: Path
) -> None:
    configurations = _t4(
        tmp_path / "pool.json",
        {"TILE_M": 16, "TILE_N": 16},
        {"TILE_M": 64},  # the default build: the baseline, not fetched twice
        {"TILE_M": 16, "TILE_N": 32},
    )
    compiler = _OrderRecordingCompiler(spec)
    result, *_ = search(
        compiler=compiler, budget=12, confirm_processes=0, warm_start=configurations
    )
    replay, _ = read(result.journal)
    warm = {t.candidate.key() for t in replay.trials if t.generation == 1}
    baseline = spec.default_candidate().key()
    assert len(warm) == 2 and baseline not in warm  # the default build: measured already
    first_baseline_build = compiler.sequence.index(("build", baseline))
    fetched = {key for kind, key in compiler.sequence[:first_baseline_build] if kind == "submit"}
    assert fetched == warm

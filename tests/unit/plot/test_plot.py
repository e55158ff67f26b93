"""``ctune plot`` on committed sources: what each figure draws, the PNGs, the tables.

The journal (tests/data/journals/saxpy-n1m-replay.jsonl, made by
bench/replay_journal.py) replays measurements recorded on an H200; the
artifacts under bench/results/artifacts are real H200 search results. The
figures are checked for content (labels, the number of points drawn, where
the baseline sits), the PNGs for being images with something in them.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ctune.plot import data
from ctune.search.journal import read
from ctune.testing.cli_app import ctune_main

ROOT = Path(__file__).parents[3]
JOURNAL = ROOT / "tests" / "data" / "journals" / "saxpy-n1m-replay.jsonl"
PARETO = ROOT / "bench" / "results" / "artifacts" / "attention-pareto.json"
GEMM = ROOT / "bench" / "results" / "artifacts" / "gemm-sq4096.json"


@pytest.fixture(scope="module")
def journal() -> data.Source:
    return data.load(JOURNAL)


def _feasible(trials: list[Any]) -> list[Any]:
    return [t for t in trials if t.feasible]


# --- reading ----------------------------------------------------------------------------


def test_journal_source_matches_the_journal(journal: data.Source) -> None:
    replay, _ = read(JOURNAL)
    assert journal.kind == "journal" and len(journal.points) == len(replay.trials) == 80
    assert [o.name for o in journal.objectives] == ["p50", "regs"]
    assert journal.baseline is not None and journal.baseline.genes == journal.defaults
    assert all(p.elapsed_s is not None for p in journal.points)
    elapsed = [p.elapsed_s for p in journal.points]
    assert elapsed == sorted(elapsed)  # search time only moves forward
    front = {p.key for p in journal.front}
    # nothing feasible dominates a front member, and every other feasible point is dominated
    for p in journal.points:
        if not p.feasible:
            continue
        assert p.values is not None
        dominated = any(
            q.values is not None
            and all(a <= b for a, b in zip(q.values, p.values, strict=True))
            and q.values != p.values
            for q in journal.points
            if q.feasible
        )
        assert dominated == (p.key not in front)


def test_convergence_is_the_running_best_of_the_feasible_values(journal: data.Source) -> None:
    replay, _ = read(JOURNAL)
    feasible = _feasible(replay.trials)
    for i, series in enumerate(data.convergence(journal)):
        assert series.numbers == [t.number for t in feasible]
        assert series.values == [t.values[i] for t in feasible]
        assert series.best == [min(series.values[: k + 1]) for k in range(len(series.values))]


def test_sensitivity_groups_each_gene_by_value(journal: data.Source) -> None:
    table = data.sensitivity(journal)
    assert set(table) == {"BLOCK", "UNROLL", "maxrregcount", "ptxas_opt"}  # fixed genes left out
    feasible = [p for p in journal.points if p.feasible]
    for gene, by_value in table.items():
        assert sum(len(v) for v in by_value.values()) == len(feasible)
        for value, ys in by_value.items():
            assert sorted(ys) == sorted(
                p.values[0] for p in feasible if str(p.genes[gene]) == value and p.values
            )
    assert list(table["BLOCK"]) == ["32", "64", "128", "256", "512", "1024"]  # numeric order


def test_artifact_source_has_the_front_the_baseline_and_the_kept_samples() -> None:
    source = data.load(PARETO)
    raw = json.loads(PARETO.read_text())
    assert source.kind == "artifact" and source.constraints == ("power<=650W",)
    assert [p.key for p in source.front] == [m["key"] for m in raw["front"]]
    assert source.baseline is not None and source.baseline.key == raw["baseline"]["key"]
    assert len(source.baseline.samples_ms) == len(raw["baseline"]["samples_ms"]) == 600
    assert source.pinned == raw["pinned"]


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"", "neither a ctune journal nor a result file"),
        (b"\xff\xfe not text", "neither a ctune journal nor a result file"),
        (b'{"kind": "trial"}\n', "not a ctune journal"),
        (b'{"schema_version": 99}', "schema_version 99"),
    ],
)
def test_unreadable_sources_are_user_errors(tmp_path: Path, content: bytes, needle: str) -> None:
    from ctune.errors import UserError

    path = tmp_path / "x.json"
    path.write_bytes(content)
    with pytest.raises(UserError, match=needle):
        data.load(path)


def test_a_malformed_recorded_constraint_list_is_named_not_drawn(tmp_path: Path) -> None:
    """A string where the constraints' list belongs was drawn as one constraint a letter."""
    from ctune.errors import UserError
    from ctune.records import canonical_json, sha256_hex

    raw = json.loads(PARETO.read_text())
    raw["extensions"]["objective_spec"]["constraints"] = "power<=650W"
    raw["digest"] = sha256_hex(canonical_json({k: v for k, v in raw.items() if k != "digest"}))
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(UserError) as caught:
        data.load(path)
    said = f"{path}: extensions.objective_spec.constraints: expected a list of strings"
    assert str(caught.value) == said


# --- figures ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def figures() -> Any:
    pytest.importorskip("matplotlib")
    from ctune.plot import figures as module

    return module


def _scatter_points(ax: Any, label: str) -> list[tuple[float, float]]:
    for collection in ax.collections:
        if collection.get_label() == label:
            return [tuple(map(float, xy)) for xy in collection.get_offsets()]
    raise AssertionError(f"no {label!r} drawn")


def test_convergence_figure(figures: Any, journal: data.Source) -> None:
    replay, _ = read(JOURNAL)
    feasible = _feasible(replay.trials)
    fig = figures.draw_convergence(journal)
    axes = fig.axes
    assert len(axes) == 4  # two objectives x (evaluations, search time)
    assert [a.get_xlabel() for a in axes] == ["evaluations", "search time (s)"] * 2
    assert [a.get_ylabel() for a in axes[::2]] == ["p50 (ms)", "regs (regs)"]
    points = _scatter_points(axes[0], "feasible evaluation")
    assert points == [(float(t.number), t.values[0]) for t in feasible]
    timed = _scatter_points(axes[1], "feasible evaluation")
    assert [y for _, y in timed] == [t.values[0] for t in feasible]
    assert [x for x, _ in timed] == sorted(x for x, _ in timed) and timed[-1][0] > 10
    best = next(line for line in axes[0].get_lines() if line.get_label() == "best so far")
    assert list(best.get_ydata()) == data.convergence(journal)[0].best
    baseline = next(line for line in axes[0].get_lines() if line.get_label() == "baseline")
    assert journal.baseline is not None and journal.baseline.values is not None
    assert baseline.get_ydata()[0] == journal.baseline.values[0]


def test_front_figure(figures: Any, journal: data.Source) -> None:
    fig = figures.draw_front(journal)
    (ax,) = fig.axes
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("p50 (ms)", "regs (regs)")
    dominated = _scatter_points(ax, "feasible, dominated")
    front = next(line for line in ax.get_lines() if line.get_label() == "Pareto front")
    feasible = [p for p in journal.points if p.feasible]
    assert len(dominated) + len(front.get_xdata()) == len(feasible)
    assert sorted(front.get_xdata()) == sorted(p.values[0] for p in journal.front if p.values)
    assert journal.baseline is not None and journal.baseline.values is not None
    assert _scatter_points(ax, "baseline (default build)") == [journal.baseline.values]
    assert journal.star is not None and journal.pinned is None  # a journal pins nothing
    (star,) = _scatter_points(ax, "best p50 (search values)")
    assert star == next(p.values for p in journal.front if p.key == journal.star)


def test_front_of_an_artifact_names_its_constraint(figures: Any) -> None:
    source = data.load(PARETO)
    (ax,) = figures.draw_front(source).axes
    assert "subject to power<=650W" in ax.get_title()
    assert source.baseline is not None and source.baseline.values is not None
    assert _scatter_points(ax, "baseline (default build)") == [source.baseline.values]


def test_sensitivity_figure(figures: Any, journal: data.Source) -> None:
    fig = figures.draw_sensitivity(journal)
    visible = [a for a in fig.axes if a.get_visible()]
    table = data.sensitivity(journal)
    assert [a.get_title() for a in visible] == list(table)
    for ax, (gene, by_value) in zip(visible, table.items(), strict=True):
        assert [t.get_text() for t in ax.get_xticklabels()] == list(by_value), gene
        drawn = sum(len(c.get_offsets()) for c in ax.collections)
        assert drawn == sum(len(v) for v in by_value.values())


def test_distribution_figure_uses_samples_where_kept(figures: Any) -> None:
    from matplotlib.collections import PolyCollection

    source = data.load(GEMM)
    (ax,) = figures.draw_distribution(source).axes
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == [f"{source.pinned[:8]} *", f"{source.baseline.key[:8]} (baseline)"]  # type: ignore[index,union-attr]
    violins = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(violins) == 2  # both sides kept their samples
    assert ax.get_ylabel() == "latency per call (ms)"


def test_pngs_are_images_with_content(figures: Any, journal: data.Source, tmp_path: Path) -> None:
    import matplotlib.image

    for name, draw in figures.FIGURES.items():
        path = figures.save(draw(journal), tmp_path / f"{name}.png")
        pixels = matplotlib.image.imread(path)
        assert pixels.ndim == 3 and pixels.shape[0] > 300 and pixels.shape[1] > 500, name
        assert float(pixels.std()) > 0.05, name  # not a blank canvas


# --- the command ------------------------------------------------------------------------------


def run_cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(ctune_main, list(args), env={"COLUMNS": "100"})
    return result.exit_code, result.stdout, result.stderr


def test_plot_command_writes_every_figure(figures: Any, tmp_path: Path) -> None:
    code, out, err = run_cli("plot", str(JOURNAL), "--out", str(tmp_path))
    assert code == 0, err
    names = ("convergence", "front", "sensitivity", "distribution")
    for name in names:
        assert (tmp_path / f"saxpy-n1m-replay-{name}.png").read_bytes()[:4] == b"\x89PNG"
    assert [line.split()[0] for line in out.splitlines()] == list(names)
    code, out, _ = run_cli("plot", str(PARETO), "-o", str(tmp_path), "-f", "front")
    front = "attention-prefill-s4096-d128-causal-sm90-nvidia-h200-front.png"
    assert code == 0 and (tmp_path / front).is_file()


#: two registry artifacts, both filed as sm90-nvidia-h200.json
ARTIFACTS = [
    ROOT / "registry" / "gemm" / "sq4096" / "sm90-nvidia-h200.json",
    ROOT / "registry" / "attention" / "prefill-s2048-d128" / "sm90-nvidia-h200.json",
]


def test_figure_files_are_named_by_kernel_problem_and_device_class() -> None:
    """An artifact's file stem is its device class: naming figures by it made every
    artifact of the device class write (and overwrite) the same files."""
    stems = [data.load(path).stem for path in ARTIFACTS]
    assert stems == [
        "gemm-sq4096-sm90-nvidia-h200",
        "attention-prefill-s2048-d128-sm90-nvidia-h200",
    ]
    assert data.load(JOURNAL).stem == "saxpy-n1m-replay"  # a journal's name is its search's


def test_the_registrys_gzip_copy_of_a_journal_plots_as_the_journal(tmp_path: Path) -> None:
    """The registry keeps each artifact's journal as ``<device-class>.jsonl.gz``: read by
    every reader of a journal (it was "neither a ctune journal nor a result file")."""
    from ctune.search import journal_copy

    copy = tmp_path / "sm90-nvidia-h200.jsonl.gz"
    copy.write_bytes(journal_copy.pack(JOURNAL.read_bytes()))
    code, out, err = run_cli("plot", str(copy), "--as", "csv")
    assert code == 0, err
    assert out == run_cli("plot", str(JOURNAL), "--as", "csv")[1]
    source = data.load(copy)
    # named as its artifact's figures would be, kept apart from them
    assert source.stem == f"{source.kernel}-{source.problem}-sm90-nvidia-h200-journal"


def test_plotting_two_artifacts_of_one_device_class_keeps_both(
    figures: Any, tmp_path: Path
) -> None:
    for path in ARTIFACTS:
        code, _, err = run_cli("plot", str(path), "-o", str(tmp_path), "-f", "front")
        assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "attention-prefill-s2048-d128-sm90-nvidia-h200-front.png",
        "gemm-sq4096-sm90-nvidia-h200-front.png",
    ]


def test_plot_command_refusals_are_one_line(figures: Any, tmp_path: Path) -> None:
    code, _, err = run_cli("plot", str(PARETO), "-o", str(tmp_path), "-f", "convergence")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "convergence needs every evaluation, which only a journal has" in err
    code, _, err = run_cli("plot", str(JOURNAL), "-f", "violin")
    assert code == 2 and "--figure 'violin': no such figure" in err


def test_plot_without_matplotlib_is_one_line_exit_3(no_matplotlib: None, tmp_path: Path) -> None:
    code, _, err = run_cli("plot", str(JOURNAL), "-o", str(tmp_path))
    assert code == 3
    assert err.strip().splitlines() == [
        "error: ctune plot needs matplotlib, which is not installed: pip install 'ctune[plot]'"
    ]
    code, out, _ = run_cli("plot", str(JOURNAL), "--as", "csv")  # tables need nothing more
    assert code == 0 and out.startswith("number,")


def test_journal_as_csv_and_json() -> None:
    code, out, err = run_cli("plot", str(JOURNAL), "--as", "csv")
    assert code == 0 and err == ""
    rows = list(csv.DictReader(io.StringIO(out)))
    replay, _ = read(JOURNAL)
    assert len(rows) == len(replay.trials)
    assert [int(r["number"]) for r in rows] == [t.number for t in replay.trials]
    first = rows[0]
    assert first["baseline"] == "True" and float(first["p50_ms"]) == replay.trials[0].values[0]
    assert "p50" not in first  # the p50 objective is the p50_ms column
    assert {"BLOCK", "UNROLL", "elapsed_s", "p99_ms", "regs"} <= set(first)
    code, out, _ = run_cli("plot", str(JOURNAL), "--as", "json")
    doc = json.loads(out)
    assert code == 0 and doc["kind"] == "journal" and len(doc["rows"]) == 80
    assert [o["name"] for o in doc["objectives"]] == ["p50", "regs"]
    assert sum(r["front"] for r in doc["rows"]) == len(data.load(JOURNAL).front)
    code, out, _ = run_cli("plot", str(PARETO), "--as", "csv")
    members = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and len(members) == 3 and members[-1]["baseline"] == "True"


def test_an_artifacts_baseline_is_as_feasible_as_its_search_found(tmp_path: Path) -> None:
    """``--as csv|json`` marked every artifact's baseline infeasible: without constraints it
    meets them; with them, as the artifact records (an older one, off the front: unknown)."""
    import dataclasses

    from ctune.registry.store import read_result, write_result

    def baseline_row(path: Path) -> dict[str, Any]:
        code, out, err = run_cli("plot", str(path), "--as", "json")
        assert code == 0, err
        return next(r for r in json.loads(out)["rows"] if r["baseline"])

    assert baseline_row(GEMM)["feasible"] is True  # no constraints
    assert baseline_row(PARETO)["feasible"] is None  # power<=650W, not recorded then
    artifact = read_result(PARETO)
    for recorded in (False, True):
        search = {**artifact.extensions["search"], "baseline_feasible": recorded}
        edited = dataclasses.replace(artifact, extensions={**artifact.extensions, "search": search})
        assert baseline_row(write_result(edited, tmp_path / "a.json"))["feasible"] is recorded
    code, out, _ = run_cli("plot", str(GEMM), "--as", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and [r["feasible"] for r in rows if r["baseline"] == "True"] == ["True"]


def test_an_objective_named_like_a_column_is_that_column() -> None:
    """The journal's regs objective once made a second ``regs`` column (pandas: ``regs.1``)."""
    code, out, _ = run_cli("plot", str(JOURNAL), "--as", "csv")
    header, *body = list(csv.reader(io.StringIO(out)))
    assert code == 0 and len(header) == len(set(header)) and header.count("regs") == 1
    replay, _ = read(JOURNAL)
    regs = [int(dict(zip(header, row, strict=True))["regs"]) for row in body[:5]]
    assert regs == [t.build.resources.regs for t in replay.trials[:5]]


def test_docs_show_every_figure() -> None:
    from ctune.plot.figures import FIGURES

    page = (ROOT / "docs" / "results.md").read_text()
    for name in FIGURES:
        image = f"img/saxpy-n1m-replay-{name}.png"
        assert f"]({image})" in page, name
        assert (ROOT / "docs" / image).read_bytes()[:4] == b"\x89PNG", name
        assert f"--figure {name}`" in page, name  # the command that draws it is beside it

"""bench/ground_truth.py's presets of external kernels, and the replays that read them."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from types import ModuleType

import pytest

EXTERNAL = ("pb_gesummv", "pb_atax", "pb_2mm", "rd_hotspot")


@pytest.fixture
def gt(bench_module: Callable[[str], ModuleType]) -> ModuleType:
    module = bench_module("ground_truth")
    missing = [p for p in EXTERNAL if module.unavailable(p)]
    if missing:
        pytest.skip(f"external sources not fetched ({module.unavailable(missing[0])})")
    return module


def _truth_setup(gt: ModuleType, preset: str) -> tuple:
    spec = gt.load_preset_spec(preset)
    info = gt.PRESETS[preset]
    problem = spec.problem(info["problem"])
    from ctune.testing.binary_truth import BinaryTruth

    truth = BinaryTruth(spec.name, problem.name, "p50", False, gt._subspace(spec, info))
    return spec, problem, truth


@pytest.mark.parametrize("preset", EXTERNAL)
def test_each_external_preset_is_mapped_whole_with_its_default_inside(
    gt: ModuleType, preset: str
) -> None:
    spec, problem, truth = _truth_setup(gt, preset)
    subspace = gt.PRESETS[preset]["subspace"]
    spec.space.check_values({k: v[0] for k, v in subspace.items()}, preset)
    for gene in spec.space.genes:  # the spec's default candidate is one of the preset's
        assert gene.default in subspace[gene.name], gene.name
    candidates = {c.key() for c in gt._candidates(spec, problem, truth)}
    mapped = gt._mapped(preset, spec, problem, truth)
    # the committed map covers every candidate, so a GPU call only measures
    assert set(mapped) == candidates
    binaries = {m["binary"] for m in mapped.values()}
    assert None not in binaries and 50 <= len(binaries) <= 250
    assert all(m["build_outcome"] == "ok" for m in mapped.values())


def test_a_block_the_device_cannot_launch_is_no_candidate(gt: ModuleType) -> None:
    spec, problem, truth = _truth_setup(gt, "pb_2mm")
    blocks = {
        (c.as_dict()["BLOCK_X"], c.as_dict()["BLOCK_Y"])
        for c in gt._candidates(spec, problem, truth)
    }
    assert (32, 32) in blocks and (1024, 1) in blocks  # the tuned winner, the widest row
    assert max(x * y for x, y in blocks) == 1024 and len(blocks) == 21


def test_an_absent_external_source_is_one_line_and_exit_3(
    gt: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(gt, "SOURCES", tmp_path / "src")
    assert gt.main(["map", "--preset", "rd_hotspot"]) == 3
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "external_kernels.py fetch" in err
    assert "hotspot.cu" in err
    # a source that is not the manifest's is refused as well
    real = gt.EXTERNAL / "src"
    for path in real.rglob("hotspot.cu"):
        copy = tmp_path / "src" / path.relative_to(real)
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes(path.read_bytes() + b"\n// edited\n")
    assert "changed" in gt.unavailable("rd_hotspot")
    assert gt.unavailable("pb_2mm") is not None and gt.unavailable("tiled_matmul") is None
    assert gt.main(["sizes"]) == 0
    out = capsys.readouterr().out
    assert "pb_2mm" in out and "(skipped)" in out and "tiled_matmul: 132 structures" in out


def _measured(gt: ModuleType, partial: Path, preset: str, processes: int, drop: int = 0) -> None:
    """Fake process records of a committed map (no GPU here): every binary at 1 ms."""
    partial.mkdir(parents=True, exist_ok=True)
    committed = gt.ROOT / "bench" / "results" / "ground_truth" / f"{preset}.map.jsonl"
    shutil.copy(committed, partial / f"{preset}.map.jsonl")
    lines = (partial / f"{preset}.map.jsonl").read_text().splitlines()
    binaries = sorted({json.loads(line)["binary"] for line in lines})
    for p in range(1, processes + 1):
        keep = binaries[drop:] if p == processes else binaries
        rows = [
            {"id": b, "outcome": "ok", "median_ms": 1.0 + i / 100, "n": 50, "device": "test"}
            for i, b in enumerate(keep)
        ]
        (partial / f"{preset}.p{p}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_finish_writes_nothing_until_every_process_measured_every_binary(
    gt: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(gt, "PARTIAL", tmp_path / "partial")
    monkeypatch.setattr(gt, "OUT", tmp_path / "out")
    _measured(gt, tmp_path / "partial", "pb_gesummv", 2)
    assert gt.main(["finish", "--preset", "pb_gesummv"]) == 75
    assert "2 of 3 measure processes" in capsys.readouterr().out
    _measured(gt, tmp_path / "partial", "pb_gesummv", 3, drop=1)
    assert gt.main(["finish", "--preset", "pb_gesummv"]) == 75
    assert "processes [3]" in capsys.readouterr().out
    assert not (tmp_path / "out").exists()


def test_a_preset_recorded_again_goes_to_its_own_folder_and_replays_by_name(
    bench_module: Callable[[str], ModuleType], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """finish --out-dir: a preset recorded again on another GPU leaves the first recording's
    file alone, and the replays find its kernel by the file's name in the other folder."""
    gt = bench_module("ground_truth")
    monkeypatch.setattr(gt, "PARTIAL", tmp_path / "partial")
    monkeypatch.setattr(gt, "OUT", tmp_path / "out")
    _measured(gt, tmp_path / "partial", "gemm", 3)  # the hand GEMM's committed map
    again = tmp_path / "out" / "sm90-other-gpu"
    assert gt.main(["finish", "--preset", "gemm", "--out-dir", str(again)]) == 0
    assert not gt.truth_file("gemm").exists()
    ((truth, spec),) = gt.given_truths([again / gt.truth_file("gemm").name])
    assert spec.name == "hand_gemm" and truth.distinct_binaries() == 1156


def test_the_replays_take_each_recorded_preset_and_note_the_others(
    gt: ModuleType,
    bench_module: Callable[[str], ModuleType],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    monkeypatch.setattr(gt, "PARTIAL", tmp_path / "partial")
    monkeypatch.setattr(gt, "OUT", tmp_path / "out")
    _measured(gt, tmp_path / "partial", "pb_gesummv", 3)
    assert gt.main(["finish", "--preset", "pb_gesummv"]) == 0
    search_quality = bench_module("search_quality")
    assert search_quality.recorded_truths is gt.recorded_truths  # one home for the presets
    out = tmp_path / "q.json"
    argv = ["--preset", "pb_gesummv", "rd_hotspot", "--seeds", "1", "--strategies"]
    argv += ["--curve", "--no-kernel-tuner", "--out", str(out)]
    assert search_quality.main(argv) == 0
    printed = capsys.readouterr().out
    assert "rd_hotspot: no ground truth yet" in printed and "left out" in printed
    (truth,) = json.loads(out.read_text())["ground_truths"]
    assert truth["kernel"] == "gesummv-kernel" and truth["distinct_binaries"] == 54
    assert truth["candidates"] == 72 and truth["strategies"]["default"]["budget"] == 6
    # a file of no preset needs its kernel; a preset's file finds it by its name
    with pytest.raises(SystemExit, match="no preset's ground truth"):
        search_quality.main(["--ground-truth", str(tmp_path / "elsewhere.json.gz")])
    with pytest.raises(SystemExit, match="no ground truth of the presets"):
        search_quality.main(["--preset", "rd_hotspot", "--out", str(out)])


def test_the_cost_model_replays_the_recorded_presets_too(
    gt: ModuleType,
    bench_module: Callable[[str], ModuleType],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    from ctune.model import unavailable

    if unavailable() is not None:
        pytest.skip("needs the model extra (ctune[model])")
    monkeypatch.setattr(gt, "PARTIAL", tmp_path / "partial")
    monkeypatch.setattr(gt, "OUT", tmp_path / "out")
    _measured(gt, tmp_path / "partial", "pb_atax", 3)
    assert gt.main(["finish", "--preset", "pb_atax"]) == 0
    cost_model = bench_module("cost_model")
    out = tmp_path / "c.json"
    argv = ["--preset", "pb_2mm", "pb_atax", "--seeds", "1", "--out", str(out)]
    assert cost_model.main(argv) == 0
    assert "pb_2mm: no ground truth yet" in capsys.readouterr().out
    (truth,) = json.loads(out.read_text())["ground_truths"]
    assert truth["kernel"] == "atax-kernel1" and truth["budget"] == 6
    assert truth["fingerprint"]["nvcc_version"]  # the truth's own, written by finish
    # a preset's file named on the command line finds its kernel by the file's name
    argv = ["--ground-truth", str(gt.truth_file("pb_atax")), "--seeds", "1", "--out", str(out)]
    assert cost_model.main(argv) == 0
    assert json.loads(out.read_text())["ground_truths"][0]["kernel"] == "atax-kernel1"


class _LazyBuild(Future):  # type: ignore[type-arg]
    """A build that is compiling until it is waited for."""

    def result(self, timeout: float | None = None) -> object:
        if not self.done():
            self.set_result(object())
        return super().result(timeout)


class _CountingCompilerStandIn:
    """Stand-in compiler: counts requests and the most builds compiling at once."""

    jobs = 4

    def __init__(self) -> None:
        self.requests: list[object] = []
        self.futures: list[_LazyBuild] = []
        self.most_at_once = 0

    def submit(self, cand: object, problem: object) -> _LazyBuild:
        self.requests.append(cand)
        pending = sum(1 for f in self.futures if not f.done()) + 1
        self.most_at_once = max(self.most_at_once, pending)
        self.futures.append(_LazyBuild())
        return self.futures[-1]


def test_the_map_compiles_distinct_builds_ahead_not_runtime_variants(
    bench_module: Callable[[str], ModuleType],
) -> None:
    """Nine runtime settings of one CUTLASS build are one request: with 4 slots, 5 builds
    compile ahead (the old look-ahead counted candidates, and kept 2 builds compiling)."""
    gt = bench_module("ground_truth")
    spec, problem, truth = _truth_setup(gt, "cutlass_gemm")
    todo = gt._candidates(spec, problem, truth)
    groups = {spec.space.build_group(c.genes) for c in todo}
    assert len(todo) == 9 * len(groups) == 216
    compiler = _CountingCompilerStandIn()
    stream = gt._compiled(compiler, spec, todo, problem, float("inf"))
    next(stream)  # the first candidate's build is waited for: the others compile on
    assert compiler.most_at_once == compiler.jobs + 1
    assert len({spec.space.build_group(c.genes) for c in compiler.requests}) == 5
    rest = list(stream)
    assert len(rest) == len(todo) - 1
    assert len(compiler.requests) == len(groups)  # each build asked for once


def test_past_the_deadline_the_builds_at_hand_are_still_given(
    bench_module: Callable[[str], ModuleType],
) -> None:
    """The deadline passes while the first build compiles: its other 8 runtime settings,
    built by then, are still mapped; the next build, still compiling, is not waited for."""
    gt = bench_module("ground_truth")
    spec, problem, truth = _truth_setup(gt, "cutlass_gemm")
    todo = gt._candidates(spec, problem, truth)

    class _SlowBuild(_LazyBuild):
        def result(self, timeout: float | None = None) -> object:
            if not self.done():
                time.sleep(0.2)  # the deadline passes while it compiles
            return super().result(timeout)

    class _SlowCompilerStandIn(_CountingCompilerStandIn):
        def submit(self, cand: object, problem: object) -> _LazyBuild:
            self.requests.append(cand)
            self.futures.append(_SlowBuild())
            return self.futures[-1]

    compiler = _SlowCompilerStandIn()
    got = list(gt._compiled(compiler, spec, todo, problem, time.monotonic() + 0.1))
    assert [c for c, _ in got] == todo[:9]  # the first build's 9 runtime settings
    assert len(compiler.requests) == compiler.jobs + 1  # nothing asked for past the deadline


@pytest.mark.parametrize(
    "preset", ["cutlass_gemm", "cutlass_gemm_up", "cutlass_gemm_qkv", "cutlass_gemm_down"]
)
def test_the_cutlass_presets_are_mapped_whole(
    bench_module: Callable[[str], ModuleType], preset: str
) -> None:
    """The committed maps cover every candidate of each shape, so a GPU call only
    measures; the shapes share their 24 builds, not their binaries (M, N, K differ)."""
    gt = bench_module("ground_truth")
    spec, problem, truth = _truth_setup(gt, preset)
    candidates = {c.key() for c in gt._candidates(spec, problem, truth)}
    mapped = gt._mapped(preset, spec, problem, truth)
    assert set(mapped) == candidates and len(candidates) == 216
    assert all(m["build_outcome"] == "ok" and m["binary"] for m in mapped.values())
    assert len({m["binary"] for m in mapped.values()}) == 216

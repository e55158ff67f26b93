"""Real compile tasks through the engine: nvcc on the engine's compile workers.

Measurement, where a search needs it, is the stand-in on the engine's GPU workers (NOT A
GPU). The compile workers are real Dask workers in their own processes; a test kills
one mid-compile (its nvcc is held by a gate in front of the real nvcc until then).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ctune.compile.nvcc import NvccCompiler
from ctune.compile.sass import sass_digest
from ctune.compile.toolchain import probe_toolchain
from ctune.config import Settings
from ctune.objective import parse_objective_spec
from ctune.records import Candidate, Outcome
from ctune.scale.compiler import EngineCompiler
from ctune.scale.engine import Engine
from ctune.scale.measurer import EngineMeasurer
from ctune.scale.tasks import MeasurerFactory
from ctune.search import journal as journal_mod
from ctune.search.driver import SearchOptions, run_search
from ctune.spec import load_spec
from ctune.testing.cli_app import ctune_main
from ctune.testing.engine_standins import held_workers, write_gated_nvcc
from ctune.testing.standins import StandInMeasurer

pytest.importorskip("distributed", reason="no cluster extra (dask, distributed)")
pytestmark = pytest.mark.nvcc


def _candidates(spec_path: Path, n: int) -> list[Candidate]:
    """``n`` candidates of distinct builds (UNROLL and the flags differ)."""
    spec = load_spec(spec_path)
    out = []
    for unroll in (1, 2, 4, 8)[:n]:
        out.append(spec.candidate({**spec.space.default_values(), "UNROLL": unroll}))
    return out


def test_compiles_run_on_the_engine_into_the_build_cache(
    engine: Engine, saxpy: Path, settings: Settings
) -> None:
    spec = load_spec(saxpy)
    toolchain = probe_toolchain("nvcc")
    problem = spec.problem(None)
    with EngineCompiler(spec, toolchain, settings, engine) as compiler:
        assert compiler.jobs == 2
        futures = [compiler.submit(c, problem) for c in _candidates(saxpy, 3)]
        builds = [f.result(timeout=120) for f in futures]
        assert [b.outcome for b in builds] == [Outcome.OK] * 3
        assert compiler.tasks == 3
        for build in builds:
            assert Path(build.binary_path).is_relative_to(settings.cache_dir.resolve())
        again = compiler.build(_candidates(saxpy, 1)[0], problem)
        assert again.cache_hit and compiler.tasks == 3  # answered from the cache, no task
    # the same cache serves a local compiler: the engine wrote NvccCompiler's own entries
    local = NvccCompiler.from_settings(spec, toolchain, settings)
    assert local.build(_candidates(saxpy, 1)[0], problem).cache_hit


def test_a_build_from_another_host_comes_back_by_content(
    engine: Engine, saxpy: Path, settings: Settings
) -> None:
    spec = load_spec(saxpy)
    problem = spec.problem(None)
    with EngineCompiler(spec, probe_toolchain("nvcc"), settings, engine) as compiler:
        # as a worker on another host sees it: not the client's host, so its own cache
        compiler.recipe = dataclasses.replace(compiler.recipe, host="another-host/boot")
        build = compiler.build(_candidates(saxpy, 1)[0], problem)
    assert build.outcome is Outcome.OK and not build.cache_hit
    binary = Path(build.binary_path)
    assert binary.parent == settings.cache_dir.resolve() / "builds" / build.build_key
    assert sass_digest(binary.read_bytes()) == build.sass_sha256
    reread = NvccCompiler.from_settings(spec, probe_toolchain("nvcc"), settings)
    assert reread.build(_candidates(saxpy, 1)[0], problem).cache_hit


def _kill_held(folder: Path, count: int, deadline_s: float = 90.0) -> list[int]:
    """Kill the engine worker of each compile the gate holds, ``count`` times."""
    killed: list[int] = []
    end = time.monotonic() + deadline_s
    while len(killed) < count and time.monotonic() < end:
        for pid in held_workers(folder):
            if pid not in killed:
                os.kill(pid, signal.SIGKILL)  # a compile worker of the test's own cluster
                killed.append(pid)
        time.sleep(0.05)
    return killed


@pytest.mark.parametrize(("deaths", "outcome"), [(1, Outcome.OK), (2, Outcome.COMPILER_CRASH)])
def test_a_compile_worker_killed_mid_compile(
    engine: Engine,
    saxpy: Path,
    settings: Settings,
    tmp_path: Path,
    deaths: int,
    outcome: Outcome,
) -> None:
    """Killed once: run again on another worker. Killed twice: the candidate's failure."""
    gate = write_gated_nvcc(tmp_path / "gate", shutil.which("nvcc") or "nvcc", holds=deaths)
    spec = load_spec(saxpy)
    with EngineCompiler(spec, probe_toolchain(str(gate)), settings, engine) as compiler:
        future = compiler.submit(_candidates(saxpy, 1)[0], spec.problem(None))
        killed = _kill_held(gate.parent, deaths)
        build = future.result(timeout=120)
    assert len(killed) == deaths
    assert build.outcome is outcome
    if outcome is Outcome.COMPILER_CRASH:
        assert "died twice" in build.log_tail


def test_same_seed_same_candidates_through_the_engine_as_locally(
    engine: Engine, saxpy: Path, tmp_path: Path, standin: Callable[..., MeasurerFactory]
) -> None:
    spec = load_spec(saxpy)
    toolchain = probe_toolchain("nvcc")
    objective = parse_objective_spec(["p50"], [], spec.metrics)
    options = {"budget": 8, "seed": 2, "fill": False, "journal_fsync": False}
    journals = []
    for where in ("engine", "local"):
        # one cache: the local run finds the engine's builds (it compiles nothing again)
        cfg = Settings(cache_dir=tmp_path / "cache", registry=tmp_path / "reg")
        if where == "engine":
            compiler = EngineCompiler(spec, toolchain, cfg, engine)
            measurer = EngineMeasurer(cfg, engine, standin(9))
        else:
            compiler = NvccCompiler.from_settings(spec, toolchain, cfg)
            measurer = StandInMeasurer(seed=9, samples=40)
        try:
            result = run_search(
                cfg,
                spec,
                objective,
                SearchOptions(journal=tmp_path / f"{where}.jsonl", confirm_processes=0, **options),
                compiler=compiler,
                measurer=measurer,
            )
        finally:
            measurer.close()
            compiler.close()
        assert result.evaluations == 8
        replay, _ = journal_mod.read(result.journal)
        # the same proposals, generation by generation; within a generation the journal
        # order is the order builds finished, which the machine's load decides
        journals.append(
            sorted(
                (t.generation, t.candidate.key(), t.outcome.value, t.values) for t in replay.trials
            )
        )
    assert journals[0] == journals[1]


def test_the_cli_starts_a_cluster_here_with_executor_dask(
    saxpy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    flags = ["--executor", "dask", "--jobs", "2", "--json", "--out", str(tmp_path / "r.json")]
    result = CliRunner().invoke(
        ctune_main,
        ["search", str(saxpy.with_suffix(".cu")), "-O", "regs", "--budget", "4", *flags],
        env={"COLUMNS": "200", "CTUNE_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "r.json").is_file()
    builds = list((tmp_path / "cache" / "builds").glob("*/build.json"))
    assert len(builds) >= 3  # compiled by the engine's workers into this cache

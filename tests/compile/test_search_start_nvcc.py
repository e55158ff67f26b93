"""A search's start with the real nvcc: the default build compiles beside the device probe
(the measurer is a stand-in, NOT A GPU)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from ctune.compile import probe_toolchain
from ctune.compile.nvcc import NvccCompiler
from ctune.config import Settings
from ctune.errors import SpecError
from ctune.objective import parse_objective_spec
from ctune.search import session
from ctune.search.driver import SearchOptions, run_search
from ctune.search.journal import read
from ctune.spec import load_spec
from ctune.testing.standins import StandInMeasurer

pytestmark = pytest.mark.nvcc

DATA = Path(__file__).parents[2] / "tests" / "data" / "kernels"


def _saxpy(folder: Path, drop_line: str = "") -> Path:
    """The test saxpy kernel in ``folder``; ``drop_line``: a line its spec loses."""
    folder.mkdir(parents=True)
    for name in ("saxpy.cu", "saxpy_ref.py"):
        shutil.copy(DATA / name, folder / name)
    text = (DATA / "saxpy.yaml").read_text()
    (folder / "saxpy.yaml").write_text(text.replace(drop_line, "") if drop_line else text)
    return folder / "saxpy.yaml"


def _search(path: Path, settings: Settings) -> Any:
    toolchain = probe_toolchain()
    spec = load_spec(path, toolchain.help_text)
    return run_search(
        settings,
        spec,
        parse_objective_spec(["p50"], [], spec.metrics),
        SearchOptions(budget=3, confirm_processes=0),
        measurer=StandInMeasurer(samples=30),
        toolchain=toolchain,
    )


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(cache_dir=tmp_path / "cache", registry=tmp_path / "registry")


@pytest.fixture
def probed_after_the_build(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """The device probe lasts until the default build is in the cache (at most 60 s); the
    list says, per probe, whether it came."""
    builds = Path(settings.cache_dir) / "builds"
    seen: list[bool] = []
    probe = session.device_limits

    def slow_probe(*args: Any, **kw: Any) -> Any:
        deadline = time.monotonic() + 60
        while not any(builds.glob("*/build.json")) and time.monotonic() < deadline:
            time.sleep(0.05)
        seen.append(any(builds.glob("*/build.json")))
        return probe(*args, **kw)

    monkeypatch.setattr(session, "device_limits", slow_probe)
    return seen


def test_the_default_build_compiles_while_the_device_is_probed(
    tmp_path, settings, probed_after_the_build
):
    result = _search(_saxpy(tmp_path / "k"), settings)
    assert probed_after_the_build == [True]
    assert result.baseline is not None and result.baseline.build is not None
    assert result.baseline.build.outcome.is_ok


def test_an_args_error_of_the_build_made_ahead_is_the_baseline_s(
    tmp_path, settings, probed_after_the_build
):
    """The build ahead runs in the compiler's thread and nobody reads its future: its args
    error is said again when the baseline finds that build in the cache."""
    scalar_n = "  - {name: n, role: scalar, dtype: int32, value: N}\n"
    with pytest.raises(SpecError, match=r"takes 4 parameter\(s\)"):
        _search(_saxpy(tmp_path / "k", scalar_n), settings)
    assert probed_after_the_build == [True]


def test_the_first_generation_compiles_beside_the_baseline(
    tmp_path: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the real nvcc: the default strategy's first generation starts compiling before
    the baseline's build ends (``guess_first_asks``), its trials record those builds as their
    own compiles, and no build is compiled twice."""
    spans: list[tuple[str, float, float, bool]] = []  # (candidate, start, end, compiled)
    build = NvccCompiler.build

    def timed_build(self: NvccCompiler, candidate: Any, problem: Any) -> Any:
        start = time.monotonic()
        made = build(self, candidate, problem)
        spans.append((candidate.key(), start, time.monotonic(), not made.cache_hit))
        return made

    monkeypatch.setattr(NvccCompiler, "build", timed_build)
    path = _saxpy(tmp_path / "k")
    toolchain = probe_toolchain()
    spec = load_spec(path, toolchain.help_text)
    result = run_search(
        settings,
        spec,
        parse_objective_spec(["p50"], [], spec.metrics),
        SearchOptions(budget=6, confirm_processes=0, fill=False, jobs=4),
        measurer=StandInMeasurer(samples=30),
        toolchain=toolchain,
    )
    trials = read(result.journal)[0].trials
    baseline = trials[0].candidate.key()
    first = [t for t in trials if t.generation == 1]
    assert first and all(t.build is not None and not t.build.cache_hit for t in first)
    baseline_end = next(end for key, _, end, made in spans if key == baseline and made)
    guessed = {t.candidate.key() for t in first}
    assert any(start < baseline_end for key, start, _, made in spans if key in guessed and made)
    compiled = [key for key, _, _, made in spans if made]
    assert len(compiled) == len(set(compiled))  # each build once

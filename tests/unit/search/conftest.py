"""Fixtures for the search tests: a stand-in kernel, settings in tmp, a search runner."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctune.config import Settings
from ctune.objective import parse_objective_spec
from ctune.registry.assemble import ResultPublisher
from ctune.search.driver import SearchOptions, run_search
from ctune.search.events import SearchEvent
from ctune.search.result import SearchResult
from ctune.spec import KernelSpec
from ctune.testing.standins import StandInCompiler, StandInMeasurer, standin_spec


@pytest.fixture
def spec(tmp_path: Path) -> KernelSpec:
    return standin_spec(tmp_path / "kernel")


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(cache_dir=tmp_path / "cache", registry=tmp_path / "registry")


Runner = Callable[..., tuple[SearchResult, StandInMeasurer, StandInCompiler, list[SearchEvent]]]


@pytest.fixture
def search(spec: KernelSpec, settings: Settings) -> Runner:
    """run_search on the stand-ins; keyword arguments go to SearchOptions, except ``out``,
    ``commit`` and ``write_result`` (False: no publisher), which go to the registry's
    ResultPublisher."""

    def run(
        objectives: tuple[str, ...] = ("p50",),
        constraints: tuple[str, ...] = (),
        *,
        measurer: StandInMeasurer | None = None,
        compiler: StandInCompiler | None = None,
        **options: Any,
    ) -> tuple[SearchResult, StandInMeasurer, StandInCompiler, list[SearchEvent]]:
        measurer = measurer or StandInMeasurer(samples=60)
        compiler = compiler or StandInCompiler(spec)
        options.setdefault("budget", 30)
        events: list[SearchEvent] = []
        objective = parse_objective_spec(list(objectives), list(constraints), spec.metrics)
        out, commit = options.pop("out", None), options.pop("commit", False)
        publish = (
            ResultPublisher(Path(settings.registry), Path(settings.cache_dir), out, commit)
            if options.pop("write_result", True)
            else None
        )
        result = run_search(
            settings,
            spec,
            objective,
            SearchOptions(**options),
            compiler=compiler,
            measurer=measurer,
            on_event=events.append,
            publish=publish,
        )
        return result, measurer, compiler, events

    return run

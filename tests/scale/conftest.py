"""A Dask cluster on this host for the engine tests (processes, as a real one).

Two compile workers and two "GPU" workers: on a CPU machine the GPU workers host a
stand-in measurer (named as such); they are real engine workers all the same, which the
tests kill and the engine replaces. One cluster per module keeps the tests to seconds.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ctune.config import Settings
from ctune.scale.engine import Engine, start_local_cluster
from ctune.scale.tasks import MeasurerFactory

KERNELS = Path(__file__).resolve().parents[1] / "data" / "kernels"


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    distributed = pytest.importorskip("distributed", reason="no cluster extra (dask, distributed)")

    cluster = start_local_cluster(2, (0, 1))
    client = distributed.Client(cluster)
    engine = Engine(client, cluster, cluster.scheduler_address)
    try:
        yield engine
    finally:
        engine.close()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(cache_dir=tmp_path / "cache", registry=tmp_path / "registry")


@pytest.fixture
def saxpy(tmp_path: Path) -> Path:
    """The saxpy test kernel in a folder of its own (its spec, source and reference)."""
    folder = tmp_path / "kernel"
    folder.mkdir()
    for name in ("saxpy.cu", "saxpy.yaml", "saxpy_ref.py"):
        shutil.copy(KERNELS / name, folder / name)
    return folder / "saxpy.yaml"


@pytest.fixture
def standin() -> Callable[..., MeasurerFactory]:
    """The GPU workers' measurer for these tests: NOT A GPU (ctune.testing)."""

    def make(seed: int, **kwargs: Any) -> MeasurerFactory:
        return MeasurerFactory(
            "ctune.testing.engine_standins:SleepingStandInMeasurer",
            {"seed": seed, "samples": 40, **kwargs},
            takes_settings=False,
        )

    return make

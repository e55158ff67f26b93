"""Helpers to test the engine (``ctune.scale``) on a CPU: where to kill a worker, and when.

- :class:`SleepingStandInMeasurer`: NOT A GPU. The analytic :class:`StandInMeasurer`,
  which first leaves a marker file naming the candidate and the process measuring it
  (the engine's GPU worker) and then sleeps, so a test can kill that worker mid-measurement;
  with ``events_dir`` it also leaves one per ``prestart`` (the count), ``set_up_ahead``
  and ``remeasure``.
- :func:`write_gated_nvcc`: a wrapper in front of the real nvcc that holds the first
  ``holds`` cubin compiles until the engine worker running them dies (it leaves a marker
  naming that worker's pid), then exits; later compiles run the real nvcc unchanged.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ctune.testing.standins import StandInMeasurer

if TYPE_CHECKING:
    from ctune.measure import SamplingPlan
    from ctune.records import Build, Candidate, Measurement
    from ctune.spec import KernelSpec, Problem


class SleepingStandInMeasurer(StandInMeasurer):
    """NOT A GPU: a stand-in measurement that takes ``sleep_s`` and says who is taking it."""

    def __init__(
        self,
        seed: int = 0,
        *,
        sleep_s: float = 0.0,
        marker_dir: str = "",
        events_dir: str = "",
        **kw: object,
    ):
        super().__init__(seed, **kw)  # type: ignore[arg-type]
        self.sleep_s = sleep_s
        self.marker_dir = marker_dir
        self.events_dir = events_dir

    def _event(self, name: str) -> None:
        """``NAME-PID-NS`` in ``events_dir``: what this process (a GPU worker) was asked."""
        if self.events_dir:
            folder = Path(self.events_dir)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{name}-{os.getpid()}-{time.monotonic_ns()}").touch()

    def prestart(self, count: int, wait: bool = True) -> None:
        """A real measurer starts ``count`` processes here; this one says it was asked (and
        ``w`` when asked to wait for them)."""
        self._event(f"prestart{count}{'w' if wait else ''}")

    def set_up_ahead(
        self, spec: KernelSpec, candidate: Candidate, problem: Problem, plan: SamplingPlan
    ) -> None:
        """A real measurer asks its processes to set ``problem`` up; this one says it was
        asked (and for which problem)."""
        self._event(f"setupahead{problem.name}")

    def remeasure(
        self,
        spec: KernelSpec,
        items: Sequence[tuple[Candidate, Build]],
        problem: Problem,
        plan: SamplingPlan,
        processes: int,
        *,
        seed: int | None = None,
    ) -> dict[str, list[Measurement]]:
        self._event("remeasure")
        return super().remeasure(spec, items, problem, plan, processes, seed=seed)

    def measure(
        self,
        spec: KernelSpec,
        candidate: Candidate,
        build: Build,
        problem: Problem,
        plan: SamplingPlan,
    ) -> Measurement:
        if self.marker_dir:
            folder = Path(self.marker_dir)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{candidate.key()}-{os.getpid()}-{time.monotonic_ns()}").touch()
        time.sleep(self.sleep_s)
        return super().measure(spec, candidate, build, problem, plan)


GATE = """#!/usr/bin/env bash
# NOT nvcc: the real nvcc behind a test gate (ctune.testing.engine_standins).
case " $* " in
  *" -cubin "*)
    held=$(ls {folder}/held-* 2>/dev/null | wc -l)
    if [ "$held" -lt {holds} ]; then
      parent=$PPID  # the engine worker running this compile
      touch "{folder}/held-$held-$parent"
      while kill -0 "$parent" 2>/dev/null; do sleep 0.05; done
      exit 1
    fi ;;
esac
exec {nvcc} "$@"
"""


def write_gated_nvcc(folder: Path, real_nvcc: str, holds: int) -> Path:
    """The wrapper script (``folder/nvcc``); markers ``held-N-PID`` appear beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "nvcc"
    path.write_text(GATE.format(folder=folder, holds=holds, nvcc=real_nvcc))
    path.chmod(0o755)
    return path


def held_workers(folder: Path) -> list[int]:
    """The pids of the workers whose compiles the gate holds (or held), in order."""
    marks = sorted(folder.glob("held-*"), key=lambda p: int(p.name.split("-")[1]))
    return [int(p.name.split("-")[2]) for p in marks]


__all__ = ["SleepingStandInMeasurer", "held_workers", "write_gated_nvcc"]

"""Every measurer passes the measurer contract (ctune.testing.contract_measurer).

Here without a GPU: the stand-ins, the replay of a recorded ground truth, the device-gene
wrapper, and the real WorkerMeasurer running the real worker against the numpy stand-in
for CuPy and NVML (fakegpu/). (fake_worker.py, the protocol stand-in, keys its answers by
its KEY gene: it tests the parent's fault handling, not this contract.) The real worker on
a real GPU is marked ``gpu`` (it skips here).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ctune.measure import Measurer, SamplingPlan
from ctune.measure.device_control import DeviceControl
from ctune.measure.device_genes import DeviceGeneMeasurer, device_genes, with_device_genes
from ctune.measure.device_settings import DeviceLimits
from ctune.measure.session import WorkerMeasurer
from ctune.records import Build, Candidate, Outcome
from ctune.spec import KernelSpec, load_spec
from ctune.testing.contract_measurer import MeasurerCase, MeasurerContract
from ctune.testing.engine_standins import SleepingStandInMeasurer
from ctune.testing.slow_builds import FakeClock, TimedStandInMeasurer
from ctune.testing.standin_nvml import StandInNvmlLibrary
from ctune.testing.standins import (
    DefaultWinsMeasurer,
    GroundTruth,
    ReplayCompiler,
    ReplayMeasurer,
    StandInCompiler,
    StandInMeasurer,
    standin_spec,
)

HERE = Path(__file__).parent
ROOT = HERE.parents[2]
KERNELS = ROOT / "tests" / "data" / "kernels"
GROUND_TRUTH = ROOT / "tests" / "data" / "ground_truth" / "saxpy-n1m.json.gz"
FAST = SamplingPlan(warmup_ms=1, rep_ms=2, min_samples=30, max_samples=300)


def _two_valid(spec: KernelSpec) -> list[Candidate]:
    """The default candidate and the next valid one."""
    default = spec.default_candidate()
    dims = spec.problem().dims
    other = next(v for v in spec.space.iter_valid(dims) if spec.candidate(v) != default)
    return [default, spec.candidate(other)]


def _standin_case(
    tmp_path: Path, make: Callable[[], Measurer], spec: KernelSpec | None = None
) -> MeasurerCase:
    spec = spec or standin_spec(tmp_path / "k")
    compiler = StandInCompiler(spec, fail_every=None, regs_limit=10_000)
    items = [(c, compiler.build(c, spec.problem())) for c in _two_valid(spec)]
    return MeasurerCase(make, spec, spec.problem(), items)


class TestStandIn(MeasurerContract):
    @pytest.fixture
    def case(self, tmp_path: Path) -> MeasurerCase:
        return _standin_case(tmp_path, lambda: StandInMeasurer(fault_corner=None, wrong_every=None))


class TestDefaultWins(MeasurerContract):
    @pytest.fixture
    def case(self, tmp_path: Path) -> MeasurerCase:
        return _standin_case(tmp_path, DefaultWinsMeasurer)


class TestTimedStandIn(MeasurerContract):
    @pytest.fixture
    def case(self, tmp_path: Path) -> MeasurerCase:
        return _standin_case(
            tmp_path,
            lambda: TimedStandInMeasurer(FakeClock(), fault_corner=None, wrong_every=None),
        )


class TestSleepingStandIn(MeasurerContract):
    @pytest.fixture
    def case(self, tmp_path: Path) -> MeasurerCase:
        return _standin_case(
            tmp_path,
            lambda: SleepingStandInMeasurer(
                events_dir=str(tmp_path / "events"), fault_corner=None, wrong_every=None
            ),
        )


class TestReplay(MeasurerContract):
    @pytest.fixture
    def case(self) -> MeasurerCase:
        truth = GroundTruth.load(GROUND_TRUTH)
        spec = load_spec(KERNELS / "saxpy.yaml")
        problem = spec.problem(truth.problem)
        compiler = ReplayCompiler(truth)
        ok = [
            k
            for k, e in truth.entries.items()
            if e["build_outcome"] == "ok" and e["outcome"] == "ok"
        ]
        cands = [spec.candidate(truth.entries[k]["genes"]) for k in ok[:2]]
        items = [(c, compiler.build(c, problem)) for c in cands]
        return MeasurerCase(lambda: ReplayMeasurer(truth), spec, problem, items)


LIMITS = DeviceLimits(tuple(range(1980, 330, -15)), 200.0, 700.0, 700.0)


class TestDeviceGenes(MeasurerContract):
    @pytest.fixture
    def control(self, tmp_path: Path) -> Iterator[DeviceControl]:
        nvml = StandInNvmlLibrary.create(tmp_path / "nvml.json", power_mw=650_000)
        with DeviceControl(
            ("clocks", "power_limit"), nvml_spec=f"ctune.testing.standin_nvml:{nvml.path}"
        ) as c:
            yield c

    @pytest.fixture
    def case(self, tmp_path: Path, control: DeviceControl) -> MeasurerCase:
        base = standin_spec(tmp_path / "k")
        spec = with_device_genes(base, device_genes(("clocks", "power_limit"), LIMITS))
        inner = StandInMeasurer(fault_corner=None, wrong_every=None)
        case: MeasurerCase = _standin_case(
            tmp_path, lambda: DeviceGeneMeasurer(inner, control), spec
        )
        clocked = spec.candidate({**spec.default_candidate().as_dict(), "sm_clock_mhz": 1485})
        case.items = [case.items[0], (clocked, case.items[0][1])]
        return case


class TestWorkerOnTheFakeGpu(MeasurerContract):
    """The real worker process, against the numpy stand-in for CuPy and NVML."""

    @pytest.fixture
    def case(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> MeasurerCase:
        monkeypatch.setenv("PYTHONPATH", str(HERE / "fakegpu"))
        monkeypatch.delenv("FAKE_NVML_REASONS", raising=False)
        spec = load_spec(KERNELS / "saxpy.yaml")
        problem = spec.problem("ragged")
        items = []
        for cand in _two_valid(spec):
            path = tmp_path / f"{cand.key()}.cubin"
            path.write_text(json.dumps({"kernel": "saxpy"}))
            items.append(
                (cand, Build(cand.key(), ("nvcc",), "fake", Outcome.OK, binary_path=str(path)))
            )
        return MeasurerCase(WorkerMeasurer, spec, problem, items, FAST)


@pytest.mark.gpu
class TestWorkerOnTheGpu(MeasurerContract):
    """The real worker on GPU 0, with saxpy built by the real nvcc."""

    @pytest.fixture
    def case(self, tmp_path: Path) -> MeasurerCase:
        from ctune.compile import NvccCompiler, probe_toolchain

        toolchain = probe_toolchain()
        spec = load_spec(KERNELS / "saxpy.yaml", toolchain.help_text)
        problem = spec.problem("n1m")
        with NvccCompiler(spec, toolchain, tmp_path / "cache") as compiler:
            items = [(c, compiler.build(c, problem)) for c in _two_valid(spec)]
        return MeasurerCase(WorkerMeasurer, spec, problem, items, FAST)

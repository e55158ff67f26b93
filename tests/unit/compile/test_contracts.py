"""Every compiler passes the compiler contract (ctune.testing.contract_compiler).

Here: the stand-ins, the replay of a recorded ground truth, and NvccCompiler with the real
nvcc (marked ``nvcc``). The engine's compiler passes it in tests/scale/test_contracts.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ctune.config import Settings
from ctune.records import Candidate
from ctune.spec import KernelSpec, load_spec
from ctune.testing.contract_compiler import CompilerCase, CompilerContract
from ctune.testing.slow_builds import FakeClock, SlowStandInCompiler
from ctune.testing.standins import GroundTruth, ReplayCompiler, StandInCompiler, standin_spec

ROOT = Path(__file__).parents[3]
KERNELS = ROOT / "tests" / "data" / "kernels"
GROUND_TRUTH = ROOT / "tests" / "data" / "ground_truth" / "saxpy-n1m.json.gz"


def _by_registers(spec: KernelSpec) -> list[Candidate]:
    """Valid candidates of the stand-in spec, fewest estimated registers first."""
    estimate = StandInCompiler(spec).regs_estimate
    valid = spec.space.iter_valid(spec.problem().dims)
    return sorted((spec.candidate(v) for v in valid), key=lambda c: estimate(c.as_dict()))


class TestStandIn(CompilerContract):
    @pytest.fixture
    def case(self, tmp_path: Path) -> CompilerCase:
        spec = standin_spec(tmp_path / "k")
        ranked = _by_registers(spec)
        limit = StandInCompiler(spec).regs_estimate(ranked[1].as_dict())
        return CompilerCase(
            lambda: StandInCompiler(spec, fail_every=None, regs_limit=limit),
            spec,
            spec.problem(),
            ranked[:2],
            failing=ranked[-1],  # more registers than the limit: RESOURCE_LIMIT
        )


class TestSlowStandIn(CompilerContract):
    @pytest.fixture
    def case(self, tmp_path: Path) -> CompilerCase:
        spec = standin_spec(tmp_path / "k")
        return CompilerCase(
            lambda: SlowStandInCompiler(spec, FakeClock(), compile_s=5.0),
            spec,
            spec.problem(),
            _by_registers(spec)[:2],
        )


class TestReplay(CompilerContract):
    @pytest.fixture
    def case(self) -> CompilerCase:
        truth = GroundTruth.load(GROUND_TRUTH)
        spec = load_spec(KERNELS / "saxpy.yaml")
        built = [e["genes"] for e in truth.entries.values() if e["build_outcome"] == "ok"]
        recorded = {spec.candidate(g) for g in built}
        dims = spec.problem(truth.problem).dims
        missing = next(
            c for c in map(spec.candidate, spec.space.iter_valid(dims)) if c not in recorded
        )
        return CompilerCase(
            lambda: ReplayCompiler(truth),
            spec,
            spec.problem(truth.problem),
            [spec.candidate(g) for g in built[:2]],
            failing=missing,  # not in the ground truth: COMPILE_ERROR
        )


@pytest.mark.nvcc
class TestNvcc(CompilerContract):
    @pytest.fixture
    def case(self, tmp_path: Path) -> CompilerCase:
        from ctune.compile import NvccCompiler, probe_toolchain

        toolchain = probe_toolchain()
        spec = load_spec(KERNELS / "saxpy.yaml", toolchain.help_text)
        problem = spec.problem("n1m")
        base = spec.default_candidate()
        unrolled = spec.candidate({**base.as_dict(), "UNROLL": 2})
        settings = Settings(cache_dir=tmp_path / "cache")
        return CompilerCase(
            lambda: NvccCompiler.from_settings(spec, toolchain, settings),
            spec,
            problem,
            [base, unrolled],
            settings=settings,
        )

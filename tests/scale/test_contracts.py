"""The engine's measurer and compiler pass the contracts every measurer and compiler pass
(ctune.testing.contract_measurer, contract_compiler): the measurer over the GPU workers'
stand-in (NOT A GPU), the compiler with the real nvcc on the compile workers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ctune.config import Settings
from ctune.scale.compiler import EngineCompiler
from ctune.scale.engine import Engine
from ctune.scale.measurer import EngineMeasurer
from ctune.scale.tasks import MeasurerFactory
from ctune.spec import load_spec
from ctune.testing.contract_compiler import CompilerCase, CompilerContract
from ctune.testing.contract_measurer import MeasurerCase, MeasurerContract
from ctune.testing.standins import StandInCompiler, standin_spec

pytest.importorskip("distributed", reason="no cluster extra (dask, distributed)")


class TestEngineMeasurer(MeasurerContract):
    @pytest.fixture
    def case(
        self,
        engine: Engine,
        settings: Settings,
        tmp_path: Path,
        standin: Callable[..., MeasurerFactory],
    ) -> MeasurerCase:
        spec = standin_spec(tmp_path / "k")
        compiler = StandInCompiler(spec, fail_every=None, regs_limit=10_000)
        default = spec.default_candidate()
        other = next(
            spec.candidate(v)
            for v in spec.space.iter_valid(spec.problem().dims)
            if spec.candidate(v) != default
        )
        items = [(c, compiler.build(c, spec.problem())) for c in (default, other)]
        factory = standin(5, fault_corner=None, wrong_every=None)
        return MeasurerCase(
            lambda: EngineMeasurer(settings, engine, factory), spec, spec.problem(), items
        )


@pytest.mark.nvcc
class TestEngineCompiler(CompilerContract):
    @pytest.fixture
    def case(self, engine: Engine, settings: Settings, saxpy: Path) -> CompilerCase:
        from ctune.compile.toolchain import probe_toolchain

        toolchain = probe_toolchain("nvcc")
        spec = load_spec(saxpy, toolchain.help_text)
        base = spec.default_candidate()
        unrolled = spec.candidate({**base.as_dict(), "UNROLL": 2})
        return CompilerCase(
            lambda: EngineCompiler(spec, toolchain, settings, engine),
            spec,
            spec.problem("n1m"),
            [base, unrolled],
            settings=settings,
        )

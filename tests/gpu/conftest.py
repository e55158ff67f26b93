"""Fixtures for the GPU tier: kernel specs and a compile cache shared by the session.

Skipping (no GPU, no nvcc, no NVML) is decided by tests/conftest.py from the
markers; nothing here touches the GPU.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).parents[2]
DATA = ROOT / "tests" / "data" / "kernels"


@pytest.fixture(scope="session")
def toolchain() -> Any:
    from ctune.compile.toolchain import probe_toolchain

    return probe_toolchain("nvcc")


@pytest.fixture(scope="session")
def load(toolchain: Any) -> Callable[[Path], Any]:
    from ctune.spec import load_spec

    def load_one(path: Path) -> Any:
        return load_spec(path, toolchain.help_text)

    return load_one


@pytest.fixture(scope="session")
def builder(
    tmp_path_factory: pytest.TempPathFactory, toolchain: Any
) -> Iterator[Callable[..., Any]]:
    """build(spec, problem, **genes) -> (candidate, build); asserts the build is OK.
    ``build.ahead(spec, problems, **genes)`` starts those builds side by side first (one
    CUTLASS build takes ~40-75 s on one core: the correctness set of one would not fit
    the tier's time one build after another)."""
    from ctune.compile.nvcc import NvccCompiler

    cache = tmp_path_factory.mktemp("ctune-cache")
    compilers: dict[str, Any] = {}

    def compiler(spec: Any) -> Any:
        key = str(spec.yaml_path)
        if key not in compilers:
            compilers[key] = NvccCompiler(spec, toolchain, cache)
        return compilers[key]

    def ahead(spec: Any, problems: Any, **genes: Any) -> None:
        candidate = spec.candidate({**spec.space.default_values(), **genes})
        for problem in problems:
            compiler(spec).submit(candidate, problem)  # build() then joins the compile

    def build(spec: Any, problem: Any, **genes: Any) -> tuple[Any, Any]:
        candidate = spec.candidate({**spec.space.default_values(), **genes})
        result = compiler(spec).build(candidate, problem)
        assert result.outcome.is_ok, (
            f"{spec.name} {genes}: {result.outcome.value}: {result.log_tail}"
        )
        return candidate, result

    build.ahead = ahead  # type: ignore[attr-defined]
    yield build
    for each in compilers.values():
        each.close()

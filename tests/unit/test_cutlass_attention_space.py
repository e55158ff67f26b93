"""kernels/attention.yaml's tile-order genes, its pools and its GPU test cases agree:
a restriction added after a GPU run must not leave a pool entry or a test case invalid."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctune.exchange.t4 import candidates, read_t4
from ctune.spec import KernelSpec, load_spec

ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def spec() -> KernelSpec:
    pytest.importorskip(
        "cutlass_library", reason="the spec's @cutlass include needs nvidia-cutlass"
    )
    return load_spec(ROOT / "kernels" / "attention.yaml")


def test_the_tile_order_is_for_causal_warp_specialized_kernels(spec: KernelSpec) -> None:
    causal = spec.problem("prefill-s4096-d128-causal").dims
    plain = spec.problem("prefill-s4096-d128").dims
    base = spec.space.default_values()
    assert spec.space.is_valid({**base, "ORDER": 1}, causal)
    assert not spec.space.is_valid({**base, "ORDER": 1}, plain)  # equal tiles: nothing to order
    assert spec.space.is_valid({**base, "ORDER": 1, "HEAD_GROUP": 8}, causal)
    assert not spec.space.is_valid({**base, "HEAD_GROUP": 8}, causal)  # groups need ORDER 1
    persistent = {**base, "KERNEL": 1, "ORDER": 1}
    assert spec.space.is_valid(persistent, causal)
    assert not spec.space.is_valid({**persistent, "HEAD_GROUP": 8}, causal)  # the snake


@pytest.mark.parametrize(
    ("pool", "problem_set"),
    [("causal", "prefill-causal"), ("noncausal", "prefill-noncausal")],
)
def test_every_pool_entry_serves_some_problem_of_its_set(
    spec: KernelSpec, pool: str, problem_set: str
) -> None:
    configurations = read_t4(ROOT / "bench" / "pools" / f"attention-{pool}.t4.json")
    usable = [0] * len(configurations)
    for name in spec.problem_sets[problem_set]:
        for i, configuration in enumerate(configurations):
            found = candidates(spec.name, spec.space, [configuration], spec.problem(name).dims)
            usable[i] += len(found.candidates)
    assert all(usable), [c for c, n in zip(configurations, usable, strict=True) if not n]


def test_the_gpu_test_cases_are_valid_configurations(spec: KernelSpec, gpu_test_module) -> None:
    module = gpu_test_module("test_cutlass_attention")
    assert load_spec(module.SPEC).name == spec.name  # the GPU test loads the shipped spec
    for name, genes in module.CASES:
        values = {**spec.space.default_values(), **genes}
        dims = spec.problem(name).dims
        assert spec.space.is_valid(values, dims), (name, spec.space.violations(values, dims))

"""Device limits: the per-arch table, restrictions from a launch rule, the post-compile check."""

from __future__ import annotations

import importlib.machinery
import sys
import types
from pathlib import Path

import pytest

from ctune.records import Resources
from ctune.spec import load_spec
from ctune.spec.space.limits import (
    DeviceLimits,
    device_limits,
    launch_violation,
    probe_device_limits,
    table_limits,
)

SPEC = """\
entry: mm
genes:
  BX: {values: [8, 16, 32, 64], default: 16, family: launch}
  BY: {values: [1, 2, 4, 8, 16, 32], default: 16, family: launch}
  BZ: {values: [1, 64, 128], default: 1, family: launch}
  SMEM: {values: [0, 98304, 262144], default: 0, family: runtime}
launch:
  grid: ["ceil_div(N, BX)", "ceil_div(N, BY)"]
  block: [BX, BY, BZ]
  dynamic_smem_bytes: SMEM
problems: [{name: n512, dims: {N: 512}}]
args:
  - {name: C, role: output, dtype: float32, shape: [N, N]}
reference: {python: ref.py:ref}
"""


@pytest.fixture
def spec(tmp_path: Path):
    (tmp_path / "mm.cu").write_text("// never compiled\n")
    (tmp_path / "ref.py").write_text("def ref(xp, inputs, dims):\n    return {}\n")
    (tmp_path / "mm.yaml").write_text(SPEC)
    return load_spec(tmp_path / "mm.yaml")


@pytest.mark.parametrize(
    ("arch", "smem"),
    [
        ("sm_70", 96 * 1024),
        ("sm_75", 64 * 1024),
        ("sm_80", 163 * 1024),
        ("sm_86", 99 * 1024),
        ("sm_89", 99 * 1024),
        ("sm_90", 227 * 1024),
        ("sm_90a", 227 * 1024),
        ("compute_90", 227 * 1024),
        ("sm_100a", 227 * 1024),
        ("sm_120", 99 * 1024),
    ],
)
def test_the_table_follows_the_compute_capabilities(arch: str, smem: int) -> None:
    limits = table_limits(arch)
    assert limits.smem_per_block == smem and limits.source == f"{arch} table"
    assert limits.threads_per_block == 1024 and limits.block_dims == (1024, 1024, 64)
    assert limits.regs_per_block == 65536


@pytest.mark.parametrize("arch", ["sm_52", "sm_88", "sm_12"])
def test_an_arch_the_table_lacks_gets_the_defaults_and_says_so(arch: str) -> None:
    """`ctune space --arch sm_12` said "device limits (sm_12 table)": there is no such row."""
    limits = table_limits(arch)
    assert limits.source == f"defaults, no {arch} table" and limits.smem_per_block == 48 * 1024
    assert limits.threads_per_block == 1024 and limits.regs_per_block == 65536


def test_the_launch_rule_becomes_restrictions(spec) -> None:
    sources = [r.source for r in table_limits("sm_90").restrictions(spec.launch)]
    assert sources == ["BY <= 1024", "BZ <= 64", "BX * BY * BZ <= 1024", "SMEM <= 232448"]


def test_literal_bounds_that_always_hold_add_nothing(tmp_path: Path) -> None:
    saxpy = load_spec(Path(__file__).parents[2] / "data" / "kernels" / "saxpy.yaml")
    assert [r.source for r in table_limits("sm_90").restrictions(saxpy.launch)] == ["BLOCK <= 1024"]
    assert table_limits("sm_90").restrictions(None) == ()  # a launcher picks its own grid


def test_the_device_rules_out_what_cannot_launch(spec) -> None:
    dims = spec.problem().dims
    space = table_limits("sm_90").constrain(spec.space, spec.launch)
    total, _ = spec.space.count_valid(dims)
    valid, exact = space.count_valid(dims)
    brute = sum(
        1
        for bx in (8, 16, 32, 64)
        for by in (1, 2, 4, 8, 16, 32)
        for bz in (1, 64, 128)
        for smem in (0, 98304, 262144)
        if bx * by * bz <= 1024 and bz <= 64 and smem <= 232448
    )
    assert exact and total == 4 * 6 * 3 * 3 and valid == brute < total
    assert not space.is_valid({"BX": 64, "BY": 32, "BZ": 1, "SMEM": 0}, dims)  # 2048 threads
    assert space.is_valid({"BX": 32, "BY": 32, "BZ": 1, "SMEM": 98304}, dims)
    # sm_75 has less shared memory per block: 64 KiB is the most it gives
    small = table_limits("sm_75").constrain(spec.space, spec.launch)
    assert not small.is_valid({"BX": 8, "BY": 1, "BZ": 1, "SMEM": 98304}, dims)
    assert small.count_valid(dims)[0] < valid


@pytest.mark.parametrize(
    ("block", "dynamic", "resources", "message"),
    [
        ((32, 32, 1), 0, Resources(regs=64), None),  # 64 x 1024 = 65536: exactly fits
        ((32, 32, 1), 0, Resources(regs=65), "65 registers per thread x 1024 threads need 73728"),
        ((128, 1, 1), 0, Resources(regs=255), None),
        ((64, 32, 1), 0, Resources(regs=16), "2048 threads per block > 1024"),
        ((1, 1, 128), 0, Resources(), "block dimension z = 128 > 64"),
        ((128, 1, 1), 200 * 1024, Resources(smem_bytes=32 * 1024), "32768 B static + 204800"),
        ((128, 1, 1), 200 * 1024, Resources(smem_bytes=0), None),
    ],
)
def test_a_built_candidate_against_the_device(block, dynamic, resources, message) -> None:
    why = table_limits("sm_90").violation(block, dynamic, resources)
    if message is None:
        assert why is None
    else:
        assert why is not None and message in why and why.endswith("(sm_90 table)")


def test_launch_violation_evaluates_the_launch_rule(spec) -> None:
    limits = table_limits("sm_90")
    dims = spec.problem().dims
    values = {"BX": 32, "BY": 32, "BZ": 1, "SMEM": 0}
    assert launch_violation(limits, spec, values, dims, Resources(regs=32)) is None
    why = launch_violation(limits, spec, values, dims, Resources(regs=128))
    assert why is not None and "128 registers per thread x 1024 threads" in why


def _fake_cupy(monkeypatch: pytest.MonkeyPatch, capability: tuple[int, int]) -> None:
    attributes = {
        "ComputeCapabilityMajor": capability[0],
        "ComputeCapabilityMinor": capability[1],
        "MaxThreadsPerBlock": 1024,
        "MaxBlockDimX": 1024,
        "MaxBlockDimY": 1024,
        "MaxBlockDimZ": 64,
        "MaxSharedMemoryPerBlockOptin": 101376,
        "MaxRegistersPerBlock": 65536,
    }
    runtime = types.SimpleNamespace(
        getDeviceCount=lambda: 1,
        deviceGetAttribute=lambda attr, device: attributes[attr],
        getDeviceProperties=lambda device: {"name": b"NVIDIA L40S"},
        **{f"cudaDevAttr{name}": name for name in attributes},
    )
    cupy = types.ModuleType("cupy")
    cupy.__spec__ = importlib.machinery.ModuleSpec("cupy", None)
    cupy.cuda = types.SimpleNamespace(runtime=runtime)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupy", cupy)


def test_a_gpu_of_the_target_architecture_gives_its_own_limits(monkeypatch) -> None:
    _fake_cupy(monkeypatch, (8, 9))
    found = probe_device_limits("sm_89")
    assert found == DeviceLimits("NVIDIA L40S (device)", 1024, (1024, 1024, 64), 101376, 65536)
    assert device_limits("sm_89") == found
    # a GPU of another architecture says nothing about the target's
    assert probe_device_limits("sm_90") is None
    assert device_limits("sm_90").source == "sm_90 table"
    assert device_limits("sm_89", probe=False).source == "sm_89 table"


STATIC = """\
entry: tiles
genes:
  TILE: {values: [16, 32, 64, 128], default: 16, family: launch}
  SMEM: {values: [0, 65536], default: 0, family: runtime}
launch:
  grid: ["ceil_div(N, TILE)"]
  block: [TILE]
  dynamic_smem_bytes: SMEM
problems: [{name: n512, dims: {N: 512}}]
args:
  - {name: C, role: output, dtype: float32, shape: [N, N]}
reference: {python: ref.py:ref}
"""

TILES = """\
#define PAD 1
__global__ void other() { __shared__ double huge[1 << 20]; }
__global__ void tiles(float* C) {
    __shared__ float a[TILE][TILE + PAD];
    __shared__ float2 b[TILE / 2];
    __shared__ Unknown skipped[TILE];  // a type ctune cannot size: left out
    extern __shared__ float dynamic[];
    C[threadIdx.x] = a[0][0] + b[0].x + dynamic[0];
}
"""


def test_static_shared_memory_of_the_source_is_a_restriction(tmp_path: Path) -> None:
    (tmp_path / "tiles.cu").write_text(TILES)
    (tmp_path / "ref.py").write_text("def ref(xp, inputs, dims):\n    return {}\n")
    (tmp_path / "tiles.yaml").write_text(STATIC)
    spec = load_spec(tmp_path / "tiles.yaml")
    limits = table_limits("sm_90")
    sources = [r.source for r in limits.restrictions(spec.launch)]
    static = "(4 * (TILE) * (TILE + (1)) + 8 * (TILE // 2))"
    assert f"{static} <= 49152" in sources
    assert f"{static} + SMEM <= {227 * 1024}" in sources
    space = limits.constrain(spec.space, spec.launch)
    dims = spec.problem().dims
    # 4*64*65 + 8*32 = 16896 B fits; 4*128*129 + 8*64 = 66560 B is more than ptxas takes
    assert space.violations({"TILE": 64, "SMEM": 65536}, dims) == []
    assert space.violations({"TILE": 128, "SMEM": 0}, dims) == [f"{static} <= 49152"]

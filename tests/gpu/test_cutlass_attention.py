"""kernels/attention (CUTLASS FMHA) beyond its default build (test_kernels_correct checks that):
split-KV with its merge, the plain TMA kernel (clusters, two CTAs per SM; at D 64 only, causal
ruled out: kernels/attention.yaml says why), the persistent
warp-specialized kernel with every option on, three consumer warpgroups, a tile size that
divides neither S nor the other tile, the longest-first tile order (ORDER 1) and the key mask
on ragged last tiles only (KEY_MASK 1), each against the reference."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctune.measure import SamplingPlan
from ctune.measure.session import WorkerMeasurer
from ctune.records import Outcome

ROOT = Path(__file__).parents[2]
SPEC = ROOT / "kernels" / "attention.yaml"
PLAN = SamplingPlan(warmup_ms=1, rep_ms=1, min_samples=10, max_samples=50, quantile=0.5)

pytestmark = pytest.mark.gpu

CASES = [
    # 1000 keys in 8 splits of 125: each split's last tile is partial
    ("decode-b2-h8-kv2-k1000-d128", {"SPLITS": 8}),
    # 4097 = 17 x 241: no count <= 16 divides it, so one split (the plain path)
    ("decode-b1-h4-kv1-k4097-d64", {"SPLITS": 16}),
    # several query rows per head (speculative decode): 4 splits of 250 keys, 4 x 5 rows
    ("spec-b2-h8-kv2-s5-k1000-d128", {"SPLITS": 4}),
    (
        "ragged-b2-h3-s333-d64",
        {"KERNEL": 4, "TILE_Q": 64, "STAGES": 4},
    ),
    (
        "gqa-b2-h8-kv2-s333-d128-causal",
        {"KERNEL": 1, "Q_SEPARATE": 1, "Q_EXTRA": 1, "LOCKED": 1, "STAGES": 4},
    ),
    ("tiny-b1-h2-s17-d64-causal", {"MMA_WG": 3, "TILE_Q": 192, "TILE_KV": 64, "STAGES": 4}),
    ("gqa-b2-h8-kv2-s333-d128", {"TILE_KV": 176, "STAGES": 4}),
    # longest first, one CTA per tile: heavy query blocks first, the last one partial; 6 heads
    # in groups of 4, so the last group has 2
    ("ragged-b2-h3-s333-d128-causal", {"KERNEL": 0, "ORDER": 1, "HEAD_GROUP": 4}),
    # longest first, persistent: 256 tiles on 132 SMs, so the second round walks back
    ("prefill-s1024-d128-causal", {"KERNEL": 1, "ORDER": 1}),
    # heads in groups of 8 over 256 tiles, one CTA per tile (the persistent kernel takes none)
    ("prefill-s1024-d128-causal", {"KERNEL": 0, "ORDER": 1, "HEAD_GROUP": 8}),
    # KEY_MASK 1: 333 keys leave a ragged last tile (masked); 1024 keys fill 8 (none masked)
    ("gqa-b2-h8-kv2-s333-d128", {"KEY_MASK": 1, "KERNEL": 1, "Q_SEPARATE": 1, "Q_EXTRA": 1}),
    ("prefill-s1024-d64", {"KEY_MASK": 1, "KERNEL": 1, "Q_SEPARATE": 1, "Q_EXTRA": 1}),
    # ... in splits of 125 keys, and in the plain TMA kernel
    ("decode-b2-h8-kv2-k1000-d128", {"KEY_MASK": 1, "SPLITS": 8}),
    ("ragged-b2-h3-s333-d64", {"KEY_MASK": 1, "KERNEL": 4, "TILE_Q": 64, "STAGES": 4}),
]
IDS = [f"{name}-" + "-".join(f"{k}{v}" for k, v in genes.items()) for name, genes in CASES]


@pytest.fixture(scope="module", autouse=True)
def builds_ahead(request, load, builder):
    """Every selected case's build starts at once (each takes 40-75 s on one core); a case
    left out by ``-k`` compiles nothing."""
    selected = {
        item.callspec.id
        for item in request.session.items
        if item.module is request.module and hasattr(item, "callspec")
    }
    spec = load(SPEC)
    for case_id, (problem_name, genes) in zip(IDS, CASES, strict=True):
        if case_id in selected:
            builder.ahead(spec, [spec.problem(problem_name)], **genes)


@pytest.mark.parametrize(("problem_name", "genes"), CASES, ids=IDS)
def test_variant_matches_the_reference(problem_name, genes, load, builder):
    spec = load(SPEC)
    problem = spec.problem(problem_name)
    values = {**spec.space.default_values(), **genes}
    assert spec.space.is_valid(values, problem.dims), spec.space.violations(values, problem.dims)
    with WorkerMeasurer() as measurer:
        m = measurer.measure(spec, *builder(spec, problem, **genes), problem, PLAN)
    print(
        f"{problem_name} {genes}: {m.outcome.value} rel_l2={m.rel_l2_error} "
        f"max_abs={m.max_abs_error}"
    )
    assert m.outcome is Outcome.OK, m.error

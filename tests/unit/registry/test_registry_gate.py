"""Gate decisions on synthetic sample sets, and the gate procedure with a stand-in remeasurer."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest
from registry_support import (
    FINGERPRINT,
    StandInRemeasurer,
    artifact_with_samples,
    make_artifact,
    synthetic,
)

from ctune.ci.check import Current
from ctune.ci.gate import (
    GateReport,
    Regression,
    Verdict,
    confirm,
    decide,
    decide_regression,
    exit_code,
)
from ctune.ci.gate_run import gate_artifact, run_gate
from ctune.errors import EXIT_GATE_FAILED, EXIT_INCONCLUSIVE, EXIT_OK
from ctune.evidence.compare import Comparison, Difference, NoiseRule, SampleSet
from ctune.records import FieldChange, Outcome
from ctune.registry.layout import parse_key
from ctune.registry.schema import Artifact, FrontMember

# --- decisions ---------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(40))
def test_no_change_passes(seed: int) -> None:
    rng = np.random.default_rng(seed)
    r = decide_regression(synthetic(rng, 1.0), synthetic(rng, 1.0))
    assert r.verdict is Verdict.PASS, r.reason
    assert r.evidence is not None
    # 5 processes a side: the noise term is 5 x sqrt((cv_old^2 + cv_new^2) / 5 / (2/3)),
    # the same 4.9 standard errors of the difference as 5 x CV at 3 and 3
    e = r.evidence
    noise = math.sqrt((e.cv_old**2 + e.cv_new**2) / 5 / (2 / 3))
    assert e.threshold == pytest.approx(max(0.02, 5 * noise))
    assert r.evidence.predicted_fpr < 2e-6


@pytest.mark.parametrize("seed", range(10))
def test_ten_percent_slower_regresses(seed: int) -> None:
    rng = np.random.default_rng(seed)
    r = decide_regression(synthetic(rng, 1.0), synthetic(rng, 1.1))
    assert r.verdict is Verdict.REGRESSED, r.reason
    assert r.evidence is not None and r.evidence.change == pytest.approx(0.1, abs=0.02)
    assert "slower" in r.reason


@pytest.mark.parametrize("seed", range(10))
def test_ten_percent_faster_improves(seed: int) -> None:
    rng = np.random.default_rng(seed)
    r = decide_regression(synthetic(rng, 1.0), synthetic(rng, 0.9))
    assert r.verdict is Verdict.IMPROVED, r.reason


@pytest.mark.parametrize("seed", range(10))
def test_huge_noise_is_inconclusive(seed: int) -> None:
    rng = np.random.default_rng(seed)
    old = synthetic(rng, 1.0, between_cv=0.10)
    new = synthetic(rng, 1.1, between_cv=0.10)
    r = decide_regression(old, new)
    assert r.verdict is Verdict.INCONCLUSIVE and "noise too large" in r.reason


def test_threshold_grows_with_measured_noise() -> None:
    rng = np.random.default_rng(0)
    r = decide_regression(synthetic(rng, 1.0, between_cv=0.02), synthetic(rng, 1.0))
    assert r.evidence is not None
    e = r.evidence
    assert e.threshold == pytest.approx(NoiseRule().threshold(e.cv_old, e.cv_new, 5, 5))
    assert r.evidence.threshold > 0.02


def test_too_few_processes_is_inconclusive_never_pass() -> None:
    rng = np.random.default_rng(0)
    r = decide_regression(synthetic(rng, 1.0, processes=2), synthetic(rng, 1.0))
    assert r.verdict is Verdict.INCONCLUSIVE and "insufficient baseline" in r.reason
    r = decide_regression(SampleSet(()), synthetic(rng, 1.0))
    assert r.verdict is Verdict.INCONCLUSIVE


def test_large_change_without_significance_is_inconclusive() -> None:
    # medians only and k=3 per side: the exact test cannot go below p=0.1
    old = SampleSet((1.0, 1.001, 0.999))
    new = SampleSet((1.1, 1.101, 1.099))
    r = decide_regression(old, new)
    assert r.verdict is Verdict.INCONCLUSIVE and "not significant" in r.reason
    assert r.evidence is not None and r.evidence.p_value == pytest.approx(0.1)


def _reg(verdict: Verdict, change: float = 0.1) -> Regression:
    evidence = Comparison(Difference.UNRESOLVED, "", change=change, threshold=0.02)
    return Regression(verdict, verdict.value.lower(), evidence)


HARD = FieldChange("nvcc_version", "a", "b", "hard")
SOFT = FieldChange("driver", "a", "b", "soft")


def test_stale_outranks_regressed() -> None:
    report = decide("k", [HARD], [], _reg(Verdict.REGRESSED))
    assert report.verdict is Verdict.STALE and "nvcc_version" in report.reason
    assert decide("k", [SOFT], [], _reg(Verdict.REGRESSED)).verdict is Verdict.REGRESSED
    assert decide("k", [SOFT], [], _reg(Verdict.PASS), strict=True).verdict is Verdict.STALE


def test_canary_moving_the_same_way_means_the_machine_changed() -> None:
    r = decide("k", [], [], _reg(Verdict.REGRESSED), _reg(Verdict.REGRESSED, 0.09))
    assert r.verdict is Verdict.INCONCLUSIVE and "default build moved too" in r.reason
    assert decide("k", [], [], _reg(Verdict.REGRESSED), _reg(Verdict.PASS)).verdict is (
        Verdict.REGRESSED
    )


def test_confirmation() -> None:
    assert confirm(_reg(Verdict.REGRESSED), _reg(Verdict.REGRESSED)).verdict is Verdict.REGRESSED
    r = confirm(_reg(Verdict.REGRESSED), _reg(Verdict.PASS))
    assert r.verdict is Verdict.INCONCLUSIVE and r.reason.startswith("not confirmed")
    assert confirm(_reg(Verdict.PASS), _reg(Verdict.REGRESSED)).verdict is Verdict.PASS


@pytest.mark.parametrize(
    ("verdicts", "code"),
    [
        ([], EXIT_OK),
        ([Verdict.PASS, Verdict.IMPROVED], EXIT_OK),
        ([Verdict.PASS, Verdict.INCONCLUSIVE], EXIT_INCONCLUSIVE),
        ([Verdict.INCONCLUSIVE, Verdict.REGRESSED], EXIT_GATE_FAILED),
        ([Verdict.STALE], EXIT_GATE_FAILED),
    ],
)
def test_exit_codes(verdicts: list[Verdict], code: int) -> None:
    assert exit_code([GateReport("k", v, "") for v in verdicts]) == code


# --- the procedure, with a stand-in for the GPU ------------------------------------

KEY = parse_key("gemm/sq4096/sm90-nvidia-h100-80gb-hbm3")


def _gate(a: Artifact, remeasure: StandInRemeasurer, current: dict | None = None) -> GateReport:
    return gate_artifact(
        KEY, a, Current(current or dict(FINGERPRINT)), remeasure, rule=NoiseRule(), processes=5
    )


def test_gate_pass_measures_pinned_and_canary_together() -> None:
    rng = np.random.default_rng(1)
    a = artifact_with_samples(rng)
    stand_in = StandInRemeasurer(rng, [1.0])
    report = _gate(a, stand_in)
    assert report.verdict is Verdict.PASS, report.reason
    assert stand_in.calls == [[a.front[0].key, a.baseline.key]]
    assert report.canary is not None and report.canary.verdict is Verdict.PASS


def test_gate_regression_is_confirmed_by_a_second_run() -> None:
    rng = np.random.default_rng(2)
    stand_in = StandInRemeasurer(rng, [1.1, 1.1])
    report = _gate(artifact_with_samples(rng), stand_in)
    assert report.verdict is Verdict.REGRESSED and len(stand_in.calls) == 2


def test_gate_unconfirmed_regression_is_inconclusive() -> None:
    rng = np.random.default_rng(3)
    report = _gate(artifact_with_samples(rng), StandInRemeasurer(rng, [1.1, 1.0]))
    assert report.verdict is Verdict.INCONCLUSIVE and "not confirmed" in report.reason


def test_gate_fails_a_pinned_build_slower_than_the_vendor_call() -> None:
    """--vendor: the pinned member holds its recorded time (no regression), but the vendor
    call is 10% faster in the same run, twice: REGRESSED, naming the vendor."""
    rng = np.random.default_rng(21)
    stand_in = StandInRemeasurer(rng, [1.0, 1.0], vendor=[0.9, 0.9])
    report = _gate(artifact_with_samples(rng), stand_in)
    assert report.verdict is Verdict.REGRESSED, report.reason
    assert report.reason.startswith("slower than cuBLAS: ") and report.vendor_name == "cuBLAS"
    assert report.candidate is not None and report.candidate.verdict is Verdict.PASS
    assert report.vendor is not None and report.vendor.evidence is not None
    assert report.vendor.evidence.change == pytest.approx(1 / 0.9 - 1, abs=0.02)
    assert len(stand_in.calls) == 2  # confirmed by a second run


def test_gate_passes_a_pinned_build_faster_than_the_vendor_call() -> None:
    rng = np.random.default_rng(22)
    stand_in = StandInRemeasurer(rng, [1.0], vendor=[1.2])
    report = _gate(artifact_with_samples(rng), stand_in)
    assert report.verdict is Verdict.PASS, report.reason
    assert report.vendor is not None and report.vendor.verdict is Verdict.IMPROVED
    assert len(stand_in.calls) == 1


def test_gate_vendor_slower_once_is_not_confirmed() -> None:
    rng = np.random.default_rng(23)
    stand_in = StandInRemeasurer(rng, [1.0, 1.0], vendor=[0.9, 1.0])
    report = _gate(artifact_with_samples(rng), stand_in)
    assert report.verdict is Verdict.INCONCLUSIVE, report.reason
    assert "not confirmed" in report.reason


def test_gate_vendor_call_that_fails_is_inconclusive_never_pass() -> None:
    rng = np.random.default_rng(24)
    stand_in = StandInRemeasurer(rng, [1.0], vendor=[1.0], vendor_outcome=Outcome.LAUNCH_ERROR)
    report = _gate(artifact_with_samples(rng), stand_in)
    assert report.verdict is Verdict.INCONCLUSIVE, report.reason
    assert "against cuBLAS: the vendor call's re-measurement failed" in report.reason


def test_gate_without_the_vendor_call_compares_nothing_with_it() -> None:
    rng = np.random.default_rng(25)
    report = _gate(artifact_with_samples(rng), StandInRemeasurer(rng, [1.0]))
    assert report.verdict is Verdict.PASS and report.vendor is None


def test_gate_stale_measures_nothing() -> None:
    rng = np.random.default_rng(4)
    stand_in = StandInRemeasurer(rng, [1.1])
    report = _gate(
        artifact_with_samples(rng), stand_in, {**FINGERPRINT, "spec_problem_sha256": "d" * 64}
    )
    assert report.verdict is Verdict.STALE and stand_in.calls == []
    assert [c.name for c in report.changes] == ["spec_problem_sha256"]


def test_gate_build_change_is_decided_by_the_rebuilt_sass() -> None:
    rng = np.random.default_rng(14)
    changed = {**FINGERPRINT, "kernel_source_sha256": "d" * 64}
    same = StandInRemeasurer(rng, [1.0])  # rebuilds to the recorded SASS
    report = _gate(artifact_with_samples(rng), same, changed)
    assert report.verdict is Verdict.PASS and same.calls
    other = StandInRemeasurer(rng, [1.0], sass="e" * 64)
    assert _gate(artifact_with_samples(rng), other, changed).verdict is Verdict.STALE


def test_gate_sass_change_is_stale() -> None:
    rng = np.random.default_rng(5)
    report = _gate(artifact_with_samples(rng), StandInRemeasurer(rng, [1.0], sass="e" * 64))
    assert report.verdict is Verdict.STALE
    assert report.changes[0].name.startswith("sass_sha256[")


def test_gate_failing_member_is_regressed() -> None:
    rng = np.random.default_rng(6)
    report = _gate(
        artifact_with_samples(rng), StandInRemeasurer(rng, [1.0], outcome=Outcome.RUN_TIMEOUT)
    )
    assert report.verdict is Verdict.REGRESSED and "run_timeout" in report.reason


def test_gate_canary_moved_too() -> None:
    rng = np.random.default_rng(7)
    report = _gate(artifact_with_samples(rng), StandInRemeasurer(rng, [1.1, 1.1], canary=1.1))
    assert report.verdict is Verdict.INCONCLUSIVE and "machine changed" in report.reason


def test_gate_unrecorded_processes_is_inconclusive() -> None:
    rng = np.random.default_rng(8)
    a = make_artifact(medians=(1.0, 1.01))  # only two recorded processes
    report = _gate(a, StandInRemeasurer(rng, [1.0]))
    assert report.verdict is Verdict.INCONCLUSIVE and "insufficient baseline" in report.reason
    assert report.candidate is not None and report.candidate.evidence is not None
    assert math.isnan(report.candidate.evidence.change)


class BuildAheadStandIn(StandInRemeasurer):
    """A stand-in for the GPU that also records what it was asked to build ahead."""

    def __init__(self, rng: np.random.Generator) -> None:
        super().__init__(rng, [1.0])
        self.events: list[tuple[str, list[str]]] = []

    def build_ahead(self, work: Sequence[tuple[Artifact, Sequence[FrontMember]]]) -> None:
        self.events.append(("ahead", [m.key for _, members in work for m in members]))

    def __call__(self, artifact, members, k):  # type: ignore[no-untyped-def]
        self.events.append(("measure", [m.key for m in members]))
        return super().__call__(artifact, members, k)


def test_gate_builds_every_artifact_ahead_before_measuring_the_first() -> None:
    rng = np.random.default_rng(9)
    first, second = artifact_with_samples(rng), artifact_with_samples(rng)
    stand_in = BuildAheadStandIn(rng)
    reports = run_gate(
        [(KEY, first), (KEY, second)],
        lambda a: Current(dict(FINGERPRINT)),
        stand_in,
        rule=NoiseRule(),
        processes=5,
        build_ahead=stand_in.build_ahead,
    )
    assert [r.verdict for r in reports] == [Verdict.PASS, Verdict.PASS]
    members = [first.front[0].key, first.baseline.key, second.front[0].key, second.baseline.key]
    assert stand_in.events[0] == ("ahead", members)
    assert [kind for kind, _ in stand_in.events] == ["ahead", "measure", "measure"]

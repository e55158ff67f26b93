"""The spec's vendor call in a search's confirmation (stand-ins: NOT a GPU): measured in every
round among the members, compared with the pinned build by the gate's rule, journaled and
taken back on --resume, never a member, never deciding what is pinned."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctune.measure.vendor import vendor_candidate
from ctune.search.journal import read
from ctune.spec import KernelSpec, load_spec
from ctune.testing.spec_copies import with_key
from ctune.testing.standins import StandInMeasurer, write_standin_kernel


@pytest.fixture
def spec(tmp_path: Path) -> KernelSpec:
    """The stand-in kernel with a vendor call (never imported by the stand-in measurer)."""
    path = write_standin_kernel(tmp_path / "kernel", "standin")
    (path.parent / "calls.py").write_text("def library(xp, arrays, dims, dtypes):\n    pass\n")
    return load_spec(
        with_key(path, "vendor", {"python": "calls.py:library", "name": "the library"})
    )


def _measurer(**kwargs) -> StandInMeasurer:
    return StandInMeasurer(samples=200, wrong_every=None, fault_corner=None, **kwargs)


def test_the_vendor_rides_every_round_and_is_compared_with_the_pinned_build(search, spec) -> None:
    measurer = _measurer(vendor_factor=0.5)  # twice as fast as the default build
    result, _, _, _ = search(measurer=measurer, budget=20, seed=2, journal_fsync=False)
    vendor_key = vendor_candidate(spec).key()
    assert result.confirmation is not None and result.pinned is not None
    assert measurer.remeasured.count(vendor_key) == result.confirmation.processes >= 3
    # a fresh process of its own each round: twice as many processes as rounds
    assert measurer.processes == 2 * result.confirmation.processes
    assert all(m.key != vendor_key for m in result.front)
    v = result.vendor
    assert v is not None and v.name == "the library" and v.member == result.pinned
    assert v.processes == result.confirmation.processes and not v.error
    assert v.gain is not None and v.vendor_value is not None and v.member_value is not None
    assert v.gain.ratio == pytest.approx(v.vendor_value / v.member_value)
    assert v.gain.low <= v.gain.ratio <= v.gain.high
    expected = "higher" if v.gain.high < 1 else "lower" if v.gain.low > 1 else None
    if expected is not None:
        assert v.difference == expected, v
    assert result.to_json()["vendor"]["name"] == "the library"


@pytest.mark.parametrize(("factor", "verdict"), [(0.3, "higher"), (3.0, "lower")])
def test_the_verdict_follows_the_vendor_s_speed(search, factor, verdict) -> None:
    """A vendor call far faster than any build leaves the pinned build slower ("higher"),
    one far slower leaves it faster: the verdict can come out either way."""
    result, _, _, _ = search(measurer=_measurer(vendor_factor=factor), budget=20, seed=2)
    assert result.vendor is not None and result.vendor.difference == verdict, result.vendor
    assert result.vendor.gain is not None
    assert (result.vendor.gain.ratio > 1) is (verdict == "lower")


def test_the_vendor_never_decides_what_is_pinned(search) -> None:
    with_vendor, _, _, _ = search(measurer=_measurer(vendor_factor=0.3), budget=20, seed=2)
    without, _, _, _ = search(measurer=_measurer(), budget=20, seed=2, vendor=False)
    assert with_vendor.vendor is not None and without.vendor is None
    assert with_vendor.pinned == without.pinned
    assert [m.key for m in with_vendor.front] == [m.key for m in without.front]


def test_no_vendor_is_measured_when_it_is_not_asked_for(search, spec) -> None:
    measurer = _measurer()
    result, _, _, _ = search(measurer=measurer, budget=20, seed=2, vendor=False)
    assert result.vendor is None and result.to_json()["vendor"] is None
    assert vendor_candidate(spec).key() not in measurer.remeasured


def test_a_failing_vendor_call_is_reported_and_the_search_goes_on(search, spec) -> None:
    result, _, _, _ = search(measurer=_measurer(vendor_fails=True), budget=20, seed=2)
    assert result.pinned is not None and not result.interrupted
    v = result.vendor
    assert v is not None and v.gain is None and "launch_error" in v.error, v
    assert "ImportError" in v.error


def test_resume_takes_the_vendor_s_rounds_back(search, spec) -> None:
    first = _measurer(sigint_at_round=4)  # the 2nd round's 2nd process (the vendor's own)
    result, _, _, _ = search(measurer=first, budget=12, seed=5, confirm_processes=8)
    assert result.interrupted and result.confirmation_rounds == 2
    vendor_key = vendor_candidate(spec).key()
    rounds = read(result.journal)[0].rounds
    assert all(vendor_key in r.runs for r in rounds)  # journaled with each round
    again = _measurer()
    resumed, _, _, _ = search(measurer=again, budget=12, seed=5, resume=result.journal)
    assert resumed.confirmation is not None and resumed.vendor is not None
    assert again.remeasured.count(vendor_key) == resumed.confirmation.processes - 2
    assert resumed.vendor.processes == resumed.confirmation.processes


def test_the_artifact_records_the_comparison_and_show_prints_it(search) -> None:
    from ctune.cli.render_registry import _vendor_when_tuned
    from ctune.registry.store import read_artifact_file

    result, _, _, _ = search(measurer=_measurer(vendor_factor=3.0), budget=20, seed=2)
    assert result.artifact_path is not None and result.vendor is not None
    recorded = read_artifact_file(result.artifact_path).extensions["search"]["vendor"]
    assert recorded["name"] == "the library" and recorded["member"] == result.pinned
    assert recorded["gain"]["ratio"] == pytest.approx(result.vendor.gain.ratio)
    text = _vendor_when_tuned(recorded)
    assert text.startswith("vs the library when tuned: ") and ", faster (" in text, text
    failed = _vendor_when_tuned({"name": "lib", "error": "launch_error: boom"})
    assert failed == "vs lib when tuned: not compared: launch_error: boom"

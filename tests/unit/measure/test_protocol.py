"""The measurement protocol: a change to what a number means needs a new version."""

from __future__ import annotations

import pytest

from ctune.measure import plan, protocol
from ctune.measure.protocol import PROTOCOL_VERSION, RELEASED, definition_digest


@pytest.mark.parametrize("method", sorted(protocol.SAMPLE_DEFINITIONS))
def test_the_protocol_in_force_is_the_released_one(method: str) -> None:
    # Failing here means a constant that decides what a measured number means changed
    # (warm-up, sampling, L2 flush, statistics, energy window...). Bump PROTOCOL_VERSION,
    # add the new digests to RELEASED, and re-tune the committed artifacts in the same
    # change: artifacts measured under the old version are then STALE, as they must be.
    assert RELEASED[PROTOCOL_VERSION][method] == definition_digest(method), (
        f"the measurement protocol ({method}) changed without a version bump"
    )


def test_graph_constants_belong_to_graph_timing_only(monkeypatch: pytest.MonkeyPatch) -> None:
    events, graph = definition_digest("events"), definition_digest("graph")
    monkeypatch.setattr(plan, "GRAPH_SAMPLE_MS", 0.5)
    assert definition_digest("events") == events and definition_digest("graph") != graph


@pytest.mark.parametrize(
    ("name", "value"),
    [("WARMUP_CAP_MS", 0.0), ("TAIL_SAMPLES_SHORT", 3), ("CHUNK_MAX", 7)],
)
def test_a_changed_constant_changes_the_digest(
    monkeypatch: pytest.MonkeyPatch, name: str, value: float
) -> None:
    before = definition_digest()
    monkeypatch.setattr(plan, name, value)
    assert definition_digest() != before


def test_changed_setting_defaults_change_the_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    import ctune.config as config

    before = definition_digest()
    monkeypatch.setattr(config.Settings, "__init__", _settings_with_warmup(config.Settings, 0.0))
    assert definition_digest() != before


def _settings_with_warmup(cls: type, warmup: float):  # type: ignore[no-untyped-def]
    original = cls.__init__

    def init(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        kwargs.setdefault("warmup_ms", warmup)
        original(self, *args, **kwargs)

    return init


def test_record_names_the_plan_and_the_sample() -> None:
    from ctune.measure import SamplingPlan

    got = protocol.record(SamplingPlan(quantile=0.99, timing="graph"))
    assert got["plan"]["quantile"] == 0.99 and got["timing"] == got["plan"]["timing"] == "graph"
    # a plan that never resolved "auto" measured nothing: recorded as events
    assert protocol.record(SamplingPlan())["timing"] == "events"

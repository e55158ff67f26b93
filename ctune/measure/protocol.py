"""The measurement protocol: one reviewed version of what a measured number means.

An artifact's numbers stay comparable with a new measurement only while they are taken the
same way, so every constant that decides that is gathered into :func:`definition` under
:data:`PROTOCOL_VERSION`; an artifact measured under another version is STALE. The code
may change freely while the definition's digest matches :data:`RELEASED`; changing a
constant means a new version, its digest added, and the artifacts re-tuned
(docs/staleness.md, "The measurement protocol").
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ctune.records import canonical_json, sha256_hex

#: the protocol in force; artifacts record it as the fingerprint field ``protocol_version``
PROTOCOL_VERSION = 1

#: the digest of :func:`definition` per released version and timing method (see the module
#: docstring). A new method is added under the version in force: it changes nothing that an
#: artifact timed with another method means.
RELEASED: dict[int, dict[str, str]] = {
    1: {
        "events": "d3ee99b4948f6466e50fc684970b2faf64ee9fbb69b02fc8d8ae2d61aa90ae34",
        "graph": "301cd1b6c06fe3c58a63667d6b3dbc2ed178bd7b2d7b81f31e2cec241e359f2c",
    },
}

#: how one sample is taken, by timing method (what the artifact's numbers are); released
#: text, digested as written ("l2=cold" is the L2 policy's old name, ctune.l2policy)
SAMPLE_DEFINITIONS = {
    "events": (
        "one launch between two CUDA events on one stream, enqueued in chunks behind a "
        "spin kernel; with l2=cold the L2 is flushed (a write of >= 2x its size) before "
        "every sample and the flush is outside the events"
    ),
    "graph": (
        "one replay of a captured CUDA graph of N back-to-back launches between two CUDA "
        "events, divided by N (N: about 0.2 ms of launches, 2..1000); replays are enqueued in "
        "chunks behind a spin kernel; with l2=cold the L2 is flushed before every replay, "
        "outside the events, so the first launch of a sample starts cold and the others find "
        "what the launches before them left"
    ),
}
#: how quantiles and their intervals are computed
STATISTICS = {
    "quantile": "numpy linear interpolation (type 7)",
    "quantile_ci": "distribution-free: binomial order statistics",
    "process_summary": "median of each fresh measuring process",
}


def definition(method: str = "events") -> dict[str, Any]:
    """Every constant that decides what a number timed with ``method`` means, by name."""
    from ctune import l2policy
    from ctune.config import Settings
    from ctune.evidence import stats
    from ctune.measure import SamplingPlan, arrays, cupy_events, nvml_energy, plan

    settings = Settings()
    # the timing method is named by "samples"; the other plan defaults are common. Pruning
    # is a search's policy, off by default: a pruned trial is marked, and what a search
    # reports (and an artifact records) is re-measured without it
    search_only = ("timing", "prune_above_ms")
    defaults = {k: v for k, v in dataclasses.asdict(SamplingPlan()).items() if k not in search_only}
    # a field's name is not what a number means: the digest keeps the L2 policy's old name
    defaults = l2policy.legacy_form(defaults)
    out: dict[str, Any] = {
        "samples": {method: SAMPLE_DEFINITIONS[method]},
        "statistics": {**STATISTICS, "confidence": stats.CONFIDENCE},
        "plan_defaults": defaults,
        "settings_defaults": {
            "warmup_ms": settings.warmup_ms,
            "rep_ms": settings.rep_ms,
            "energy_window_s": settings.energy_window_s,
        },
        "warmup": {
            "cap_ms": plan.WARMUP_CAP_MS,
            "agreement": plan.WARMUP_AGREEMENT,
            "batches": plan.WARMUP_BATCHES,
            "batch_ms": plan.WARMUP_BATCH_MS,
            "batch_max": plan.WARMUP_BATCH_MAX,
        },
        "sampling": {
            "short_kernel_ms": plan.SHORT_KERNEL_MS,
            "tail_samples_short": plan.TAIL_SAMPLES_SHORT,
            "tail_samples_long": plan.TAIL_SAMPLES_LONG,
            "chunk_max": plan.CHUNK_MAX,
            "chunk_target_ms": plan.CHUNK_TARGET_MS,
            "spin_ms": plan.SPIN_MS,
            "spin_max_ms": plan.SPIN_MAX_MS,
            "excluded_max_fraction": plan.EXCLUDED_MAX_FRACTION,
            "l2_policies": list(l2policy.POLICIES),
            "l2_flush_min_bytes": cupy_events.FLUSH_MIN_BYTES,
        },
        "inputs": {"zero_replacement": arrays.NONZERO},
        "energy": {
            "method": nvml_energy.METHOD,
            "min_window_s": plan.MIN_ENERGY_WINDOW_S,
            "ramp_s": nvml_energy.RAMP_S,
            "queue_ms": nvml_energy.QUEUE_MS,
            "batch_ms": nvml_energy.BATCH_MS,
            "batch_max": nvml_energy.BATCH_MAX,
        },
    }
    if method == "graph":
        out["graph"] = {
            "below_ms": plan.GRAPH_BELOW_MS,
            "sample_ms": plan.GRAPH_SAMPLE_MS,
            "max_launches": plan.GRAPH_MAX_LAUNCHES,
        }
    return out


def definition_digest(method: str = "events") -> str:
    return sha256_hex(canonical_json(definition(method)))


def record(sampling_plan: Any) -> dict[str, Any]:
    """What an artifact stores about how it was measured: the resolved plan and the timing.

    A plan still saying ``auto`` measured nothing (compile-only objectives): events.
    """
    timing = sampling_plan.timing if sampling_plan.timing != "auto" else "events"
    plan = {**dataclasses.asdict(sampling_plan), "timing": timing}
    return {"plan": plan, "timing": timing}


__all__ = [
    "PROTOCOL_VERSION",
    "RELEASED",
    "definition",
    "definition_digest",
    "record",
]

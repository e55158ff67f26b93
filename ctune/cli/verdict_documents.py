"""``ctune check`` and ``ctune gate`` for programs: each verdict as a JSON object and a CSV
row (``--format json|csv``); what people read is in ``render_registry``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctune.ci.check import CheckReport, CheckResult
from ctune.ci.gate import GateReport
from ctune.ci.gate_run import Prebuilt
from ctune.records import to_json


def check_verdict(r: CheckResult, strict: bool) -> dict[str, Any]:
    """One artifact's verdict and every reason for it."""
    binaries = r.binaries
    return {
        "key": str(r.key),
        "verdict": r.verdict(strict),
        "error": r.error or None,
        "toolchain": r.toolchain or None,
        "changes": to_json(list(r.changes)),
        "inputs_changed": list(r.inputs_changed),
        "binaries": None
        if binaries is None
        else {**to_json(binaries), "identical": binaries.identical},
        "not_checked": list(r.not_checked),
        "other_gpu": r.other_gpu,
    }


def check_document(report: CheckReport, strict: bool, not_checked: str) -> dict[str, Any]:
    verdicts = [check_verdict(r, strict) for r in report.results]
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[v["verdict"]] = counts.get(v["verdict"], 0) + 1
    return {
        "artifacts": verdicts,
        "counts": counts,
        "strict": strict,
        "gpu_probed": report.gpu_probed,
        "not_checked": not_checked or None,
        "quarantined": [{"path": q.path, "message": q.message} for q in report.quarantined],
    }


CHECK_HEADER = ["key", "verdict", "reasons", "other_gpu"]


def check_rows(report: CheckReport, strict: bool) -> tuple[list[str], list[dict[str, Any]]]:
    """One row per artifact: its verdict and its reasons (each a field change, or the
    error that made it stale), joined by ``; ``."""
    rows = []
    for r in report.results:
        reasons = [r.error] if r.error else [f"{c.name}: {c.old} -> {c.new}" for c in r.changes]
        rows.append(
            {
                "key": str(r.key),
                "verdict": r.verdict(strict),
                "reasons": "; ".join(reasons),
                "other_gpu": r.other_gpu,
            }
        )
    return CHECK_HEADER, rows


def gate_document(reports: Sequence[GateReport], not_checked: str) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for r in reports:
        counts[r.verdict.value] = counts.get(r.verdict.value, 0) + 1
    return {
        "artifacts": to_json(list(reports)),
        "counts": counts,
        "not_checked": not_checked or None,
    }


GATE_HEADER = [
    "key",
    "verdict",
    "reason",
    "old_median_ms",
    "new_median_ms",
    "change",
    "threshold",
    "p_value",
    "canary_verdict",
    "vendor_verdict",
    "vendor_change",
]


def gate_rows(reports: Sequence[GateReport]) -> tuple[list[str], list[dict[str, Any]]]:
    """One row per artifact: the verdict and the pinned member's comparison."""
    rows = []
    for r in reports:
        e = r.candidate.evidence if r.candidate is not None else None
        rows.append(
            {
                "key": r.key,
                "verdict": r.verdict.value,
                "reason": r.reason,
                "old_median_ms": e.old_median_ms if e is not None else None,
                "new_median_ms": e.new_median_ms if e is not None else None,
                "change": e.change if e is not None else None,
                "threshold": e.threshold if e is not None else None,
                "p_value": e.p_value if e is not None else None,
                "canary_verdict": r.canary.verdict.value if r.canary is not None else None,
                "vendor_verdict": r.vendor.verdict.value if r.vendor is not None else None,
                "vendor_change": (
                    r.vendor.evidence.change
                    if r.vendor is not None and r.vendor.evidence is not None
                    else None
                ),
            }
        )
    return GATE_HEADER, rows


def prebuild_document(reports: Sequence[Prebuilt]) -> dict[str, Any]:
    """``gate --build-only``: what each artifact's builds came to."""
    return {"artifacts": [{**to_json(r), "ok": r.ok} for r in reports]}


def prebuild_rows(reports: Sequence[Prebuilt]) -> tuple[list[str], list[dict[str, Any]]]:
    rows = [
        {
            "key": r.key,
            "ok": r.ok,
            "builds": r.builds,
            "problems": "; ".join(r.problems),
            "error": r.error,
        }
        for r in reports
    ]
    return ["key", "ok", "builds", "problems", "error"], rows


__all__ = [
    "check_document",
    "check_rows",
    "check_verdict",
    "gate_document",
    "gate_rows",
    "prebuild_document",
    "prebuild_rows",
]

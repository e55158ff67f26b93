"""Artifacts that record the L2 policy under its old name (``plan.l2``) read with the
digest they were written with; new ones write the one name (ctune.l2policy)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from registry_support import make_artifact

from ctune.measure.plan import plan_from_json
from ctune.records import canonical_json, sha256_hex
from ctune.registry import schema

ROOT = Path(__file__).parents[3]


def _old_spelling(data: bytes) -> bytes:
    """An artifact as a ctune before the rename wrote it: ``plan.l2``, digest over that."""
    raw = json.loads(data)
    raw.pop("digest")
    plan = raw["protocol"]["plan"]
    plan["l2"] = plan.pop("l2_policy")
    raw["digest"] = sha256_hex(canonical_json(raw))
    return (json.dumps(raw, indent=2, sort_keys=True) + "\n").encode()


def _reads_unchanged(data: bytes, where: str) -> schema.Artifact:
    """Reads, its plan says the fingerprint's policy, and nothing read is renamed: the
    bytes and the digest (which pins carry) are what was written."""
    artifact = schema.decode(data, where)
    plan = plan_from_json(dict(artifact.protocol["plan"]))
    assert plan.l2_policy == artifact.fingerprint["l2_policy"]
    assert schema.encode(artifact) == data
    assert artifact.digest() == json.loads(data)["digest"]
    return artifact


def test_an_artifact_with_the_old_plan_key_reads_with_its_digest() -> None:
    new = schema.encode(make_artifact())
    old = _old_spelling(new)
    assert b'"l2": "cold"' in old and b'"l2_policy": "cold"' in new
    assert _reads_unchanged(old, "old").protocol["plan"]["l2"] == "cold"
    assert _reads_unchanged(new, "new").protocol["plan"]["l2_policy"] == "cold"


@pytest.mark.parametrize(
    "path", sorted((ROOT / "registry").rglob("*.json")), ids=lambda p: p.parent.name
)
def test_committed_artifacts_keep_their_bytes_and_digest(path: Path) -> None:
    _reads_unchanged(path.read_bytes(), str(path))

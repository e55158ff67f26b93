"""An artifact edited by hand (its digest recomputed): check, gate and verify notice it from
its gene values, and nothing of it is built."""

from __future__ import annotations

import dataclasses
import shutil
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from registry_support import FINGERPRINT, Run, StandInRemeasurer, make_artifact

from ctune.ci.check import STALE, Current, check_artifact, current_candidate
from ctune.ci.gate import Verdict
from ctune.ci.gate_run import gate_artifact
from ctune.errors import UserError
from ctune.evidence.compare import NoiseRule
from ctune.records import Candidate
from ctune.registry.layout import ArtifactKey
from ctune.registry.member_genes import EDITED, hand_edits
from ctune.registry.schema import Artifact
from ctune.registry.service import publish_artifact
from ctune.spec import load_spec

DATA = Path(__file__).parents[2] / "data" / "kernels"
CLEAN = {"BLOCK": 256, "UNROLL": 1, "ptxas_opt": 3, "maxrregcount": 0, "fast_math": False}
CLEAN |= {"dlcm": "default"}


@pytest.fixture
def kernels(tmp_path: Path) -> Path:
    folder = tmp_path / "kernels"
    folder.mkdir()
    for name in ("saxpy.cu", "saxpy.yaml", "saxpy_ref.py"):
        shutil.copy(DATA / name, folder / name)
    return folder


def saxpy_artifact(*edits: dict[str, Any]) -> Artifact:
    """A saxpy artifact whose members have the spec's values, each edited by ``edits``
    in turn (the pinned member first), as a hand edit would leave it."""
    a = make_artifact(kernel="saxpy", problem="n1m")
    old = (*a.front, a.baseline)
    genes = [
        {**CLEAN, "UNROLL": 2, **(edits[0] if edits else {})},
        {**CLEAN, "UNROLL": 4, **(edits[1] if len(edits) > 1 else {})},
        dict(CLEAN),
    ]
    members = []
    for m, g in zip(old, genes, strict=True):
        cand = Candidate.of("saxpy", g)
        members.append(dataclasses.replace(m, candidate=cand, key=cand.key()))
    return dataclasses.replace(
        a, front=tuple(members[:2]), baseline=members[2], pinned=members[0].key
    )


def key_of(a: Artifact) -> ArtifactKey:
    return ArtifactKey(a.kernel, a.problem, a.device_class)


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        ({"BLOCK": 96}, "BLOCK=96 is not a value of BLOCK (allowed: 32, 64"),
        ({"UNROLL": "2"}, "UNROLL='2' is not a value of UNROLL"),  # the type counts
        ({"fast_math": 1}, "fast_math=1 is not a value of fast_math"),
        ({"dlcm": "ca;touch x;:"}, "dlcm='ca;touch x;:' is not a value of dlcm"),
        ({"OLD": "$(touch x)"}, "gene OLD='$(touch x)' contains '$'"),
    ],
)
def test_a_value_the_spec_does_not_have_is_named(kernels: Path, edit: dict, said: str) -> None:
    space = load_spec(kernels / "saxpy.yaml").space
    a = saxpy_artifact(edit)
    found = hand_edits(a, space)
    assert len(found) == 1, found
    assert found[0].startswith(f"member {a.pinned}: ") and said in found[0]
    assert found[0].endswith(EDITED)


def test_the_spec_s_own_values_and_a_removed_gene_pass(kernels: Path) -> None:
    space = load_spec(kernels / "saxpy.yaml").space
    assert hand_edits(saxpy_artifact(), space) == []
    assert hand_edits(saxpy_artifact({"REMOVED_SINCE": 3}), space) == []


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        ({"SHAPE": "T<1> $(touch x)"}, "contains '$'"),
        ({"SHAPE": "`id`"}, "contains '`'"),
        ({"dlcm": "ca;touch x;:"}, "contains ';' where nvcc passes it bare"),
        ({"acf_ptxas": "/etc/passwd"}, "acf_ptxas='/etc/passwd' is not none nor a controls"),
    ],
)
def test_without_the_spec_values_are_checked_against_the_command_line_rule(
    edit: dict, said: str
) -> None:
    assert hand_edits(saxpy_artifact(), None) == []
    assert hand_edits(make_artifact(), None) == []  # ptxas_opt "O3": odd, but inert
    assert hand_edits(saxpy_artifact({"acf_ptxas": "a" * 64}), None) == []
    found = hand_edits(saxpy_artifact(edit), None)
    assert len(found) == 1 and said in found[0] and found[0].endswith(EDITED)


def test_check_calls_it_stale_and_builds_nothing(kernels: Path) -> None:
    spec = load_spec(kernels / "saxpy.yaml")
    rebuilt: list[object] = []

    def verify(artifact: object, spec: object) -> Any:
        rebuilt.append(artifact)
        raise AssertionError("a hand-edited artifact must not be rebuilt")

    a = saxpy_artifact({}, {"dlcm": "ca;touch x;:"})
    changed = {**FINGERPRINT, "nvcc_version": "other"}  # a build change: would rebuild
    result = check_artifact(key_of(a), a, Current(changed, spec=spec), verify)  # type: ignore[arg-type]
    assert result.verdict() == STALE and rebuilt == []
    assert f"member {a.front[1].key}: dlcm=" in result.error and EDITED in result.error
    with pytest.raises(UserError, match="is not a value of dlcm"):
        current_candidate(spec, a.front[1].candidate)


def test_the_gate_calls_it_stale_and_measures_nothing(kernels: Path) -> None:
    spec = types.SimpleNamespace(space=load_spec(kernels / "saxpy.yaml").space)
    a = saxpy_artifact({"BLOCK": 96})
    remeasure = StandInRemeasurer(np.random.default_rng(0), [1.0])
    report = gate_artifact(
        key_of(a),
        a,
        Current(dict(FINGERPRINT), spec=spec),
        remeasure,
        rule=NoiseRule(),
        processes=5,
    )
    assert report.verdict is Verdict.STALE and "BLOCK=96" in report.reason
    assert remeasure.calls == []


def test_a_recorded_member_is_built_only_with_the_spec_s_values(kernels: Path) -> None:
    spec = load_spec(kernels / "saxpy.yaml")
    a = saxpy_artifact({"dlcm": "ca;touch x;:"})
    with pytest.raises(UserError, match=r"recorded candidate .* dlcm='ca;touch x;:'"):
        spec.in_space(a.pinned_member().candidate)  # type: ignore[union-attr]
    assert spec.in_space(a.front[1].candidate) == a.front[1].candidate


def test_verify_fails_on_a_hand_edit_with_or_without_the_spec(
    cli: Run, registry: Path, kernels: Path
) -> None:
    publish_artifact(registry, saxpy_artifact())
    args = ("registry", "verify", "--registry", str(registry), "--no-fsck")
    code, out, err = cli(*args, "--kernels", str(kernels))
    assert code == 0 and "FAIL" not in out and "no spec" not in out, out + err
    edited = saxpy_artifact({"BLOCK": 96}, {"UNROLL": "$(touch x)"})
    publish_artifact(registry, edited)
    code, out, err = cli(*args, "--kernels", str(kernels))
    assert code == 2 and err == "error: registry verification failed (see above)\n"
    fails = [line for line in out.splitlines() if line.startswith("FAIL ")]
    assert len(fails) == 2 and all(EDITED in line for line in fails)
    assert f"FAIL {key_of(edited)}: member {edited.pinned}: BLOCK=96 is not a value" in out
    # no spec to be had: the value a shell would act on is still found, 96 cannot be
    code, out, _ = cli(*args, "--kernels", str(kernels.parent / "absent"))
    fails = [line for line in out.splitlines() if line.startswith("FAIL ")]
    assert code == 2 and len(fails) == 1 and "UNROLL='$(touch x)' contains '$'" in fails[0]
    assert "no spec loaded for saxpy: gene values checked against nvcc's quoting rule only" in out

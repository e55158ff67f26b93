"""The build identity beyond the fingerprint: each member's nvcc flags as today's code
renders them (build), the defaults the baseline was built with (hard), and the reference
digest that ignores comments and docstrings."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
from registry_support import FINGERPRINT, make_artifact

from ctune.ci.check import FRESH, STALE, WARN, BinaryCheck, Current, check_artifact
from ctune.ci.refresh import refresh_artifact
from ctune.evidence import identity
from ctune.evidence.identity import BUILD, HARD
from ctune.records import sha256_hex
from ctune.registry.layout import parse_key
from ctune.registry.schema import Artifact, FrontMember
from ctune.spec import load_spec

KEY = parse_key("saxpy/n1m/sm90-nvidia-h100-80gb-hbm3")
SAXPY = Path(__file__).parents[2] / "data" / "kernels"


def rebuild(identical: bool) -> tuple[list[str], object]:
    calls: list[str] = []

    def verify(artifact: object, spec: object) -> BinaryCheck:
        calls.append("rebuilt")
        return BinaryCheck(2, () if identical else ("member x: SASS aaa -> bbb",))

    return calls, verify


def flags_adding(*extra: str):  # type: ignore[no-untyped-def]
    """Today's rendering: the recorded flags with ``extra`` after them."""
    return lambda artifact, m: (*m.nvcc_flags, *extra)


def as_recorded(artifact: Artifact, m: FrontMember) -> tuple[str, ...]:
    return m.nvcc_flags


# --- a member's nvcc flags (the flag catalogue, its defaults, its render rules) ----------


def test_flags_rendered_as_recorded_change_nothing() -> None:
    result = check_artifact(KEY, make_artifact(), Current(dict(FINGERPRINT), flags_of=as_recorded))
    assert result.changes == () and result.verdict(strict=True) == FRESH


def test_a_changed_rendering_is_a_build_change_decided_by_the_sass() -> None:
    artifact = make_artifact()
    current = Current(dict(FINGERPRINT), flags_of=flags_adding("-Xptxas", "-O3"))
    calls, same = rebuild(identical=True)
    result = check_artifact(KEY, artifact, current, same)  # type: ignore[arg-type]
    members = sorted({m.key for m in (*artifact.front, artifact.baseline)})
    assert sorted((c.name, c.old, c.new, c.severity) for c in result.changes) == [
        (f"nvcc_flags[{k}]", "(none)", "-Xptxas -O3", BUILD) for k in members
    ]
    assert calls == ["rebuilt"] and result.verdict() == WARN
    assert result.verdict(strict=True) == STALE
    _, other = rebuild(identical=False)
    assert check_artifact(KEY, artifact, current, other).verdict() == STALE  # type: ignore[arg-type]
    assert check_artifact(KEY, artifact, current).verdict() == STALE  # not rebuilt


def test_a_flag_rendered_otherwise_names_what_went_and_what_came() -> None:
    def renamed(artifact: Artifact, m: FrontMember) -> tuple[str, ...]:
        return tuple("--maxrregcount=96" if f == "-maxrregcount=128" else f for f in m.nvcc_flags)

    result = check_artifact(KEY, make_artifact(), Current(dict(FINGERPRINT), flags_of=renamed))
    assert {(c.old, c.new) for c in result.changes} == {("-maxrregcount=128", "--maxrregcount=96")}


def test_a_hard_change_is_not_rebuilt_for_changed_flags() -> None:
    current = Current({**FINGERPRINT, "arch": "sm_100"}, flags_of=flags_adding("-lineinfo"))
    calls, same = rebuild(identical=True)
    assert check_artifact(KEY, make_artifact(), current, same).verdict() == STALE  # type: ignore[arg-type]
    assert not calls


def test_refresh_records_the_flags_today_renders_once_the_sass_is_the_same() -> None:
    artifact = make_artifact()
    current = Current(dict(FINGERPRINT), flags_of=flags_adding("-DGEMV=0"))
    _, same = rebuild(identical=True)
    outcome = refresh_artifact(KEY, artifact, current, same)  # type: ignore[arg-type]
    assert outcome.artifact is not None and "nvcc flags of 3 member(s)" in outcome.why
    assert outcome.artifact.fingerprint == artifact.fingerprint  # no field named by a member
    assert all(m.nvcc_flags[-1] == "-DGEMV=0" for m in outcome.artifact.front)
    assert outcome.artifact.baseline.nvcc_flags[-1] == "-DGEMV=0"
    # what was recorded is what today renders: nothing left to rebuild
    again = Current(dict(FINGERPRINT), flags_of=lambda a, m: m.nvcc_flags)
    assert check_artifact(KEY, outcome.artifact, again).changes == ()
    _, other = rebuild(identical=False)
    assert refresh_artifact(KEY, artifact, current, other).artifact is None  # type: ignore[arg-type]


# --- the defaults the baseline (the default build) was built with ------------------------


@pytest.fixture
def saxpy(tmp_path: Path) -> Path:
    for name in ("saxpy.cu", "saxpy.yaml", "saxpy_ref.py"):
        shutil.copy(SAXPY / name, tmp_path / name)
    return tmp_path / "saxpy.yaml"


def saxpy_artifact(path: Path) -> Artifact:
    """An artifact whose baseline is the saxpy spec's default build and whose front member
    sets BLOCK 128."""
    spec = load_spec(path)
    problem = spec.problem("n1m")
    template = make_artifact(kernel="saxpy", problem="n1m")

    def member(like: FrontMember, **genes: object) -> FrontMember:
        cand = spec.candidate({**spec.space.default_values(), **genes})
        launch = spec.launch_geometry(cand, problem)
        return dataclasses.replace(like, candidate=cand, key=cand.key(), launch=launch)

    front = (member(template.front[0], BLOCK=128),)
    return dataclasses.replace(
        template, front=front, baseline=member(template.baseline), pinned=front[0].key
    )


def test_the_spec_as_tuned_changes_nothing(saxpy: Path) -> None:
    result = check_artifact(
        KEY, saxpy_artifact(saxpy), Current(dict(FINGERPRINT), spec=load_spec(saxpy))
    )
    assert result.changes == ()


@pytest.mark.parametrize(
    ("old", "new", "gene", "values"),
    [
        ("default: 256, family: launch", "default: 512, family: launch", "BLOCK", ("256", "512")),
        ("default: 1, family: template", "default: 2, family: template", "UNROLL", ("1", "2")),
    ],
)
def test_a_changed_spec_default_is_hard(
    saxpy: Path, old: str, new: str, gene: str, values: tuple[str, str]
) -> None:
    artifact = saxpy_artifact(saxpy)
    saxpy.write_text(saxpy.read_text().replace(old, new))
    calls, same = rebuild(identical=True)
    current = Current(dict(FINGERPRINT), spec=load_spec(saxpy))
    result = check_artifact(KEY, artifact, current, same)  # type: ignore[arg-type]
    assert (f"default[{gene}]", *values, HARD) in [
        (c.name, c.old, c.new, c.severity) for c in result.changes
    ]
    assert result.verdict() == STALE and not calls


def test_a_changed_catalogue_default_is_hard(saxpy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ctune.spec.space import nvcc

    artifact = saxpy_artifact(saxpy)
    flag = nvcc.CATALOGUE["ptxas_opt"]
    moved = dataclasses.replace(flag, gene=dataclasses.replace(flag.gene, default=2))
    monkeypatch.setitem(nvcc.CATALOGUE, "ptxas_opt", moved)
    result = check_artifact(KEY, artifact, Current(dict(FINGERPRINT), spec=load_spec(saxpy)))
    assert [(c.name, c.old, c.new, c.severity) for c in result.changes] == [
        ("default[ptxas_opt]", "3", "2", HARD)
    ]


def test_a_gene_added_since_is_not_a_changed_default(saxpy: Path) -> None:
    """The baseline never recorded it: what its default renders is the flags' business."""
    artifact = saxpy_artifact(saxpy)
    text = saxpy.read_text().replace(
        "genes:\n", "genes:\n  VEC: {values: [1, 2], default: 2, family: template}\n"
    )
    saxpy.write_text(text)
    result = check_artifact(KEY, artifact, Current(dict(FINGERPRINT), spec=load_spec(saxpy)))
    assert not [c for c in result.changes if c.name.startswith("default[")]


# --- the reference digest: code only --------------------------------------------------

CODE = "def ref(xp, inputs, dims):\n    return {'y': inputs['x'] * 2}\n"


def digest_of(tmp_path: Path, text: str) -> str:
    path = tmp_path / "ref.py"
    path.write_text(text)
    return identity.reference_code_sha256(path)


@pytest.mark.parametrize(
    "edited",
    [
        '"""The reference."""\n' + CODE,
        '"""The reference,\n\nover several lines."""\n\n' + CODE,
        "'''Another quote.'''  # and a comment\n" + CODE,
        CODE.replace("):\n", '):\n    """Doubled: y = 2 x."""\n', 1),
        CODE.replace("):\n", '):\n    "implicit " "concatenation"\n', 1),
        "class Ref:\n    'A class docstring.'\n\n    x = 1\n" + CODE,
        "# a comment\n\n" + CODE.replace("* 2}", "* 2}  # doubled"),
    ],
    ids=["module", "multi-line", "comment-after", "function", "concatenated", "class", "comments"],
)
def test_docstrings_and_comments_leave_the_digest(tmp_path: Path, edited: str) -> None:
    plain = digest_of(tmp_path, CODE)
    if edited.startswith("class"):
        plain = digest_of(tmp_path, "class Ref:\n\n    x = 1\n" + CODE)
    assert digest_of(tmp_path, edited) == plain


def test_docstring_edits_leave_the_digest_code_edits_do_not(tmp_path: Path) -> None:
    one = digest_of(tmp_path, '"""Version one."""\n' + CODE)
    assert digest_of(tmp_path, '"""Version two, reworded."""\n' + CODE) == one
    assert digest_of(tmp_path, '"""Version one."""\n' + CODE.replace("* 2", "* 3")) != one
    # a string that is not first in its body is code: a value, not a docstring
    two = "def ref(xp, inputs, dims):\n    y = inputs['x'] * 2\n    return {'y': y}\n"
    later = two.replace("    return", "    'label'\n    return")
    assert digest_of(tmp_path, later) != digest_of(tmp_path, two)
    assert digest_of(tmp_path, "x = 'not a docstring'\n" + CODE) != digest_of(tmp_path, CODE)


def test_without_docstrings_the_digest_is_the_older_one(tmp_path: Path) -> None:
    path = tmp_path / "ref.py"
    path.write_text("# comment\n" + CODE + "\n\n")
    assert identity.reference_code_sha256(path) == identity.legacy_reference_code_sha256(path)
    assert identity.reference_code_sha256(path) == sha256_hex(CODE.rstrip("\n"))
    path.write_text('"""Doc."""\n' + CODE)
    assert identity.reference_code_sha256(path) != identity.legacy_reference_code_sha256(path)


def test_an_unparsable_reference_still_digests_its_code(tmp_path: Path) -> None:
    broken = "def ref(:\n    return 1  # comment\n"
    assert digest_of(tmp_path, broken) == sha256_hex("def ref(:\n    return 1")


# --- artifacts that recorded the older reference digest ---------------------------------


def test_an_artifact_recording_the_older_form_is_fresh_and_refresh_adopts_today(
    saxpy: Path,
) -> None:
    reference = saxpy.parent / "saxpy_ref.py"
    reference.write_text('"""The saxpy reference."""\n' + reference.read_text())
    spec = load_spec(saxpy)
    fields = identity.spec_part_fields(spec, "n1m")
    older = identity.older_forms(spec)
    assert older["spec_reference_sha256"] != fields["spec_reference_sha256"]
    recorded = {**FINGERPRINT, **fields, "spec_reference_sha256": older["spec_reference_sha256"]}
    artifact = dataclasses.replace(saxpy_artifact(saxpy), fingerprint=recorded)
    current = Current({**FINGERPRINT, **fields}, spec=spec, older=older)
    assert check_artifact(KEY, artifact, current).verdict(strict=True) == FRESH
    outcome = refresh_artifact(KEY, artifact, current, None)
    assert outcome.artifact is not None
    assert outcome.why == "recorded spec_reference_sha256 (today's form)"
    assert outcome.artifact.fingerprint["spec_reference_sha256"] == fields["spec_reference_sha256"]
    # the older form of *other* code is a change like any other
    reference.write_text(reference.read_text().replace("1.5", "2.5"))
    spec = load_spec(saxpy)
    now = identity.spec_part_fields(spec, "n1m")
    current = Current({**FINGERPRINT, **now}, spec=spec, older=identity.older_forms(spec))
    result = check_artifact(KEY, artifact, current)
    assert [c.name for c in result.changes] == ["spec_reference_sha256"]
    assert result.verdict() == STALE

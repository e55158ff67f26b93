"""The spec's ``verify: {python: FILE.py:FUNCTION}``: how the loader takes or refuses it, how
it decides a candidate's correctness in place of the tolerance, and how its code is part of
an artifact's inputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ctune.errors import SpecError
from ctune.evidence.identity import spec_part_fields
from ctune.measure import correctness as C
from ctune.measure.arrays import Buffers
from ctune.records import Outcome
from ctune.spec import load_spec
from ctune.testing.spec_copies import copy_spec, with_key

DATA = Path(__file__).parents[2] / "data" / "kernels"
#: saxpy.yaml's spec_reference_sha256 before the verify key existed: an artifact recorded
#: it, so a spec without the key must still digest to it
SAXPY_REFERENCE_SHA256 = "f562fb9e290fd69ab056510fc1c5d6d4277b4f96b70d8c4d670fa507e0d57cf0"

LOOSE = """import numpy as np


def loose(expected, got, atol=None):
    return bool(np.allclose(expected["y"], got["y"], atol=0.5))
"""
STRICT = """def never(expected, got, atol=None):
    return False
"""
BROKEN = """def broken(expected, got, atol=None):
    return expected["nope"]
"""


@pytest.fixture
def saxpy(tmp_path: Path) -> Path:
    check = LOOSE + "\n\n" + STRICT + "\n\n" + BROKEN
    return copy_spec(
        DATA, ("saxpy.yaml", "saxpy_ref.py", "saxpy.cu"), tmp_path, {"check.py": check}
    )


def _with_verify(path: Path, value: object) -> Path:
    return with_key(path, "verify", value)


def _refused(path: Path, *words: str) -> str:
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    text = str(caught.value)
    assert "\n" not in text
    for word in words:
        assert word in text, text
    return text


# --- the loader ----------------------------------------------------------------------


def test_a_verify_key_loads_and_imports(saxpy: Path) -> None:
    spec = load_spec(_with_verify(saxpy, {"python": "check.py:loose"}))
    assert spec.verify_path == (saxpy.parent / "check.py").resolve()
    assert spec.verify_function == "loose"
    function = spec.verify()
    assert function is not None and function.__name__ == "loose"
    assert load_spec(DATA / "saxpy.yaml").verify() is None


def test_a_verify_file_outside_the_folder_is_refused(saxpy: Path, tmp_path: Path) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-outside.py"
    outside.write_text(STRICT)
    try:
        value = {"python": f"../{outside.name}:never"}
        _refused(_with_verify(saxpy, value), "verify.python", "outside the spec's folder")
    finally:
        outside.unlink()


def test_a_missing_verify_function_is_refused(saxpy: Path) -> None:
    _refused(_with_verify(saxpy, {"python": "check.py:absent"}), "verify.python", "'absent'")


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("check.py:loose", ["verify", "{python: FILE.py:FUNCTION}"]),
        ({"python": "check.py"}, ["verify.python", "FILE.py:FUNCTION"]),
        ({"python": "nothere.py:loose"}, ["verify.python", "nothere.py", "not a file"]),
    ],
)
def test_a_bad_verify_key_is_one_line(saxpy: Path, value: object, words: list[str]) -> None:
    _refused(_with_verify(saxpy, value), *words)


def test_a_verify_file_that_does_not_parse_is_refused(saxpy: Path) -> None:
    (saxpy.parent / "check.py").write_text("def loose(:\n")
    _refused(_with_verify(saxpy, {"python": "check.py:loose"}), "verify.python", "line 1")


def test_the_cli_exits_2_on_a_bad_verify_key(
    saxpy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ctune.cli import main

    _with_verify(saxpy, {"python": "check.py:absent"})
    with pytest.raises(SystemExit) as exited:
        main(["space", str(saxpy)])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "verify.python" in err and "Traceback" not in err


# --- the check, on numpy ------------------------------------------------------------------


def _reference(spec):
    func = spec.reference()
    return lambda seed, buffers: C.reference_outputs(np, spec, func, spec.problem(), buffers)


def _off_by_a_tenth(b: Buffers) -> None:
    b.arrays["y"][:] = b.scalars["a"] * b.arrays["x"] + b.arrays["y"] + np.float32(0.1)


def _check(spec, kernel):
    return C.run_checks(np, spec, spec.problem(), kernel, _reference(spec), (5, 6))


def test_verify_true_passes_where_the_tolerance_fails(saxpy: Path) -> None:
    plain = load_spec(saxpy)
    assert _check(plain, _off_by_a_tenth).outcome is Outcome.WRONG_RESULT
    spec = load_spec(_with_verify(saxpy, {"python": "check.py:loose"}))
    report = _check(spec, _off_by_a_tenth)
    assert report.outcome is Outcome.OK and report.checks == 2


def test_verify_false_is_a_wrong_result_naming_it(saxpy: Path) -> None:
    spec = load_spec(_with_verify(saxpy, {"python": "check.py:never"}))

    def exact(b: Buffers) -> None:
        b.arrays["y"][:] = b.scalars["a"] * b.arrays["x"] + b.arrays["y"]

    report = _check(spec, exact)
    assert report.outcome is Outcome.WRONG_RESULT
    assert report.error == "verify check.py:never returned False on check 1 (seed 5)"


def test_an_exception_in_verify_is_a_spec_error(saxpy: Path) -> None:
    spec = load_spec(_with_verify(saxpy, {"python": "check.py:broken"}))
    with pytest.raises(SpecError) as caught:
        _check(spec, _off_by_a_tenth)
    text = str(caught.value)
    assert "check.py:broken" in text and "KeyError" in text and "\n" not in text


def test_verify_sees_host_arrays_and_the_tolerance(saxpy: Path) -> None:
    spec = load_spec(_with_verify(saxpy, {"python": "check.py:loose"}))
    seen = []

    def spy(expected, got, atol=None):
        seen.append((expected, got, atol))
        return True

    def exact(b: Buffers) -> None:
        b.arrays["y"][:] = b.scalars["a"] * b.arrays["x"] + b.arrays["y"]

    C.run_checks(np, spec, spec.problem(), exact, _reference(spec), (5,), verify=spy)
    expected, got, atol = seen[0]
    assert set(got) == {"y"} and got["y"].dtype == np.float32
    assert isinstance(expected["y"], np.ndarray)
    assert atol == 1e-5  # saxpy.yaml's max_abs


def test_the_poison_still_fails_under_verify(saxpy: Path) -> None:
    spec = load_spec(_with_verify(saxpy, {"python": "check.py:loose"}))

    def partial(b: Buffers) -> None:
        b.arrays["y"][:-1] = b.scalars["a"] * b.arrays["x"][:-1] + b.arrays["y"][:-1]
        b.arrays["y"][-1] = np.nan

    report = C.run_checks(
        np, spec, spec.problem(), partial, _reference(spec), (5,), verify=lambda e, g: True
    )
    assert report.outcome is Outcome.WRONG_RESULT and "1 NaN/Inf" in report.error


def test_a_non_bool_answer_is_a_spec_error(saxpy: Path) -> None:
    spec = load_spec(_with_verify(saxpy, {"python": "check.py:loose"}))
    with pytest.raises(SpecError, match="must return True or False"):
        C.run_checks(
            np, spec, spec.problem(), _off_by_a_tenth, _reference(spec), (5,),
            verify=lambda e, g, atol=None: "yes",
        )  # fmt: skip


# --- identity --------------------------------------------------------------------------


def test_the_verify_code_is_part_of_the_reference_digest(saxpy: Path) -> None:
    spec = load_spec(_with_verify(saxpy, {"python": "check.py:loose"}))
    with_key = spec_part_fields(spec)["spec_reference_sha256"]
    assert with_key != SAXPY_REFERENCE_SHA256
    check = saxpy.parent / "check.py"
    check.write_text(check.read_text() + "\n# a comment changes nothing\n")
    assert spec_part_fields(load_spec(saxpy))["spec_reference_sha256"] == with_key
    check.write_text(check.read_text().replace("atol=0.5", "atol=0.05"))
    assert spec_part_fields(load_spec(saxpy))["spec_reference_sha256"] != with_key


def test_a_spec_without_verify_keeps_its_recorded_digests(saxpy: Path) -> None:
    plain = spec_part_fields(load_spec(saxpy))
    assert plain["spec_reference_sha256"] == SAXPY_REFERENCE_SHA256
    with_key = spec_part_fields(load_spec(_with_verify(saxpy, {"python": "check.py:loose"})))
    assert with_key["spec_space_sha256"] == plain["spec_space_sha256"]  # verify is not space

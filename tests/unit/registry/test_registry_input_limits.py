"""Hostile registry inputs, reproduced through ``ctune.cli.main``: special files in the
registry or given to ``import``, a number JSON cannot hold, settings that are not values.

Each command that once hung runs under a timeout, so a regression fails instead of
hanging the suite; each bad input ends in one line and exit 2.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import pytest
from registry_support import DEVICE, Run, git, make_artifact, one_line_error

from ctune.errors import RegistryError
from ctune.records import canonical_json, sha256_hex
from ctune.registry.layout import parse_key
from ctune.registry.schema import encode, parse_json_bytes
from ctune.registry.service import publish_artifact
from ctune.registry.store import ArtifactStore, write_result

KEY = f"gemm/sq4096/{DEVICE}"


@pytest.fixture
def fifo_in_registry(registry: Path) -> Path:
    """A committed artifact, and a FIFO where another artifact would be."""
    publish_artifact(registry, make_artifact())
    fifo = registry / "gemm" / "sq4096" / "sm90-nvidia-h200.json"
    os.mkfifo(fifo)
    return fifo


@pytest.mark.timeout(60)
def test_registry_list_reports_a_fifo_without_opening_it(
    cli: Run, registry: Path, fifo_in_registry: Path
) -> None:
    code, out, err = cli("registry", "list", "--registry", str(registry))
    assert code == 0 and KEY in out
    assert f"quarantined {fifo_in_registry}: a FIFO, not a regular file" in err


@pytest.mark.timeout(120)
def test_check_reports_a_fifo_without_opening_it(
    cli: Run, registry: Path, fifo_in_registry: Path
) -> None:
    kernels = Path(__file__).parents[3] / "kernels"  # the artifact's spec is found
    code, _, err = cli(
        "check", "--no-gpu", "--no-rebuild", "--registry", str(registry), "--kernels", str(kernels)
    )
    assert code == 2
    assert f"quarantined {fifo_in_registry}: a FIFO, not a regular file" in err
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith(
            f"error: 1 artifact file(s) could not be read ({fifo_in_registry}, quarantined above)"
        )
    )


@pytest.mark.timeout(60)
@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "folder"])
def test_import_refuses_what_is_not_a_regular_file(
    cli: Run, repo: Path, registry: Path, tmp_path: Path, special: str
) -> None:
    given = tmp_path / "result.json"
    if special == "fifo":
        os.mkfifo(given)
    elif special == "folder":
        given.mkdir()
    else:
        given.symlink_to(special)
    kind = {"fifo": "a FIFO", "/dev/zero": "a character device", "folder": "a directory"}
    before = git(repo, "rev-parse", "HEAD")
    code, _, err = cli("registry", "import", str(given), "--registry", str(registry))
    assert code == 2
    one_line_error(err, f"artifact file {given}: {kind[special]}, not a regular file")
    assert git(repo, "rev-parse", "HEAD") == before and not registry.exists()


def test_an_empty_registry_setting_writes_and_commits_nothing(
    cli: Run, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CTUNE_REGISTRY= once meant the current folder: an artifact at the repository's root."""
    result = write_result(make_artifact(), tmp_path / "result.json")
    monkeypatch.chdir(repo)
    before = (git(repo, "rev-parse", "HEAD"), sorted(p.name for p in repo.iterdir()))
    for variable in ("CTUNE_REGISTRY", "CTUNE_CACHE_DIR"):
        monkeypatch.setenv(variable, "")
        code, _, err = cli("registry", "import", str(result))
        assert code == 2
        one_line_error(err, f"{variable}='': expected a folder (empty would be the current")
        monkeypatch.delenv(variable)
    assert (git(repo, "rev-parse", "HEAD"), sorted(p.name for p in repo.iterdir())) == before


def _with_overflowing_number(path: Path) -> None:
    """An artifact whose digest was recomputed after a median became ``1e400`` (inf)."""
    raw = json.loads(path.read_text())
    raw.pop("digest")
    raw["baseline"]["process_medians_ms"][0] = math.inf
    raw["digest"] = sha256_hex(canonical_json(raw))  # canonical_json writes inf as Infinity
    path.write_text(json.dumps(raw, indent=2, sort_keys=True).replace("Infinity", "1e400"))


def test_a_number_json_cannot_hold_fails_verify_and_show(
    cli: Run, repo: Path, registry: Path
) -> None:
    publish_artifact(registry, make_artifact())
    path = ArtifactStore(registry).path(parse_key(KEY))
    _with_overflowing_number(path)
    assert "1e400" in path.read_text()
    git(repo, "commit", "-qam", "edited by hand")
    code, _, err = cli("registry", "verify", "--no-fsck", "--registry", str(registry))
    assert code == 2
    assert f"quarantined {path}: not valid JSON (the number 1e400 is out of range)" in err
    code, out, err = cli("registry", "show", KEY, "--json", "--registry", str(registry))
    assert code == 2 and out == ""
    one_line_error(err, "not valid JSON (the number 1e400 is out of range)")


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("CTUNE_REP_MS", "inf", "CTUNE_REP_MS=inf: expected a finite number of milliseconds > 0"),
        ("CTUNE_WARMUP_MS", "-5", "CTUNE_WARMUP_MS=-5: expected a finite number of millisec"),
        ("CTUNE_ENERGY_WINDOW_S", "nan", "CTUNE_ENERGY_WINDOW_S=nan: expected a finite number"),
    ],
)
def test_check_reports_a_bad_plan_setting_as_a_settings_error(
    cli: Run,
    registry: Path,
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    value: str,
    message: str,
) -> None:
    """These once reached the plan fingerprint and made every artifact STALE (exit 1)."""
    publish_artifact(registry, make_artifact())
    monkeypatch.setenv(variable, value)
    code, out, err = cli("check", "--no-gpu", "--no-rebuild", "--registry", str(registry))
    assert code == 2 and "STALE" not in out
    one_line_error(err, message)


def test_the_committed_artifact_still_round_trips(cli: Run, registry: Path) -> None:
    """The strict number rules read every number ctune writes."""
    publish_artifact(registry, make_artifact())
    code, out, err = cli("registry", "show", KEY, "--json", "--registry", str(registry))
    assert code == 0, err
    assert out.encode() == encode(make_artifact())


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b'{"a": 1e400}', "the number 1e400 is out of range"),
        (b'{"a": -1e400}', "the number -1e400 is out of range"),
        (b'{"a": NaN}', "NaN is not allowed"),
        (b'{"a": Infinity}', "Infinity is not allowed"),
        (b'{"a": 123456789012345678901}', "the integer 12345678901234567890"),
        (b'{"a": ' + b"1" * 5000 + b"}", "is out of range"),
    ],
)
def test_json_numbers_that_no_value_holds_are_refused(text: bytes, message: str) -> None:
    with pytest.raises(RegistryError, match=re.escape(message)):
        parse_json_bytes(text, "artifact")


def test_json_numbers_in_range_are_read() -> None:
    text = b'{"a": 1e308, "b": 1e-400, "c": -12345678901234567890, "d": 0.5}'
    assert parse_json_bytes(text, "artifact") == {
        "a": 1e308,
        "b": 0.0,
        "c": -12345678901234567890,
        "d": 0.5,
    }

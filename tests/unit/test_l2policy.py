"""The L2 policy's one name: files that spell it the old way (``l2``) still load, to the
same values and the same digests, and nothing read is rewritten."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from ctune import l2policy
from ctune.config import resolve
from ctune.errors import UserError
from ctune.evidence.identity import spec_part_fields
from ctune.measure.plan import plan_from_json, plan_to_json
from ctune.measure.protocol import record
from ctune.records import canonical_json, sha256_hex
from ctune.spec import load_spec

ROOT = Path(__file__).parents[2]
DATA = ROOT / "tests" / "data" / "kernels"


def test_migrate_renames_the_old_key_and_refuses_a_contradiction() -> None:
    assert l2policy.migrate({"l2": "hot", "x": 1}) == {"l2_policy": "hot", "x": 1}
    assert l2policy.migrate({"l2_policy": "hot"}) == {"l2_policy": "hot"}
    assert l2policy.migrate({"l2": "hot", "l2_policy": "hot"}) == {"l2_policy": "hot"}
    with pytest.raises(ValueError, match="keep 'l2_policy'"):
        l2policy.migrate({"l2": "hot", "l2_policy": "cold"})
    assert l2policy.legacy_form({"l2_policy": "hot", "x": 1}) == {"l2": "hot", "x": 1}
    assert l2policy.legacy_form({"x": 1}) == {"x": 1}


def _saxpy(folder: Path, **extra: str) -> Path:
    folder.mkdir()
    for name in ("saxpy.cu", "saxpy.yaml", "saxpy_ref.py"):
        shutil.copy(DATA / name, folder / name)
    path = folder / "saxpy.yaml"
    data = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({**data, **extra}, sort_keys=False))
    return path


def test_a_spec_with_the_old_key_loads_to_the_same_spec_and_digests(tmp_path: Path) -> None:
    old = load_spec(_saxpy(tmp_path / "old", l2="hot"))
    new = load_spec(_saxpy(tmp_path / "new", l2_policy="hot"))
    assert old.l2_policy == new.l2_policy == "hot"
    assert old.raw == new.raw and "l2" not in old.raw
    # the spec digest is the one taken before the rename: over the file's content as written
    written = yaml.safe_load((tmp_path / "old" / "saxpy.yaml").read_text())
    assert old.spec_sha256 == new.spec_sha256 == sha256_hex(canonical_json(written))
    assert spec_part_fields(old) == spec_part_fields(new)
    default = load_spec(_saxpy(tmp_path / "none"))
    assert default.l2_policy == "cold"
    # the policy is not part of the space: changing it leaves spec_space_sha256 alone
    assert spec_part_fields(default) == spec_part_fields(old)


def test_a_plan_recorded_with_the_old_key_reads_and_new_plans_write_the_one_name() -> None:
    recorded = {**plan_to_json(plan_from_json({"l2_policy": "hot"}))}
    assert "l2" not in recorded and recorded["l2_policy"] == "hot"
    old = dict(recorded)
    old["l2"] = old.pop("l2_policy")
    assert plan_from_json(old) == plan_from_json(recorded)
    assert "l2_policy" in record(plan_from_json(old))["plan"]


def _project(tmp_path: Path, table: str) -> Path:
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "pyproject.toml").write_text(f"[tool.ctune]\n{table}\n")
    return tmp_path


def test_settings_read_the_old_names_in_every_layer(tmp_path: Path) -> None:
    assert resolve(environ={}, cwd=_project(tmp_path, 'l2 = "hot"')).l2_policy == "hot"
    assert resolve(environ={}, cwd=_project(tmp_path, 'l2_policy = "hot"')).l2_policy == "hot"
    assert resolve(environ={"CTUNE_L2": "hot"}, cwd=tmp_path).l2_policy == "hot"
    assert resolve(environ={"CTUNE_L2_POLICY": "cold"}, cwd=tmp_path).l2_policy == "cold"
    with pytest.raises(UserError, match=r"^both CTUNE_L2 \(the old name\) and CTUNE_L2_POLICY "):
        resolve(environ={"CTUNE_L2": "hot", "CTUNE_L2_POLICY": "cold"}, cwd=tmp_path)
    both = 'l2 = "hot"\nl2-policy = "cold"'
    with pytest.raises(UserError, match=r"\[tool.ctune\]: both l2 \(the old name\) and l2-policy "):
        resolve(environ={}, cwd=_project(tmp_path / "both", both))
    with pytest.raises(UserError, match=r"CTUNE_L2_POLICY=warm: expected one of cold, hot"):
        resolve(environ={"CTUNE_L2": "warm"}, cwd=tmp_path)

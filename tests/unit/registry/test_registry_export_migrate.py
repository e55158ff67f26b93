"""Golden outputs: exports of one artifact, and the schema 0 -> 1 migration.

Re-record after an intended change with ``CTUNE_UPDATE_GOLDEN=1 pytest
tests/unit/registry/test_registry_export_migrate.py`` and review the diff.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path

import pytest
from registry_support import Run, edit_file, git, make_artifact, one_line_error

from ctune.errors import RegistryError, UserError
from ctune.records import Candidate, canonical_json, sha256_hex
from ctune.registry import export, schema
from ctune.registry.layout import parse_key
from ctune.registry.migrate import upgrade, v0_to_v1, v1_to_v2
from ctune.registry.service import migrate_registry
from ctune.registry.store import ArtifactStore

DATA = Path(__file__).parents[2] / "data" / "registry"
UPDATE = os.environ.get("CTUNE_UPDATE_GOLDEN") == "1"


def _golden(name: str, text: str) -> None:
    path = DATA / name
    if UPDATE:
        path.write_text(text)
    assert path.exists(), f"{path} missing: run with CTUNE_UPDATE_GOLDEN=1"
    assert text == path.read_text()


@pytest.mark.parametrize(
    ("fmt", "bare", "golden"),
    [
        ("flags", False, "export.flags.txt"),
        ("header", False, "export.header.h"),
        ("header", True, "export.header.bare.h"),
        ("cmake", False, "export.cmake"),
        ("cmake", True, "export.bare.cmake"),
        ("json", False, "export.json"),
    ],
)
def test_export_golden(fmt: str, bare: bool, golden: str) -> None:
    _golden(golden, export.render(make_artifact(), None, fmt, bare))


def test_header_and_cmake_names_are_prefixed_per_kernel_unless_bare() -> None:
    a = make_artifact("attention")
    header, cmake = export.render(a, None, "header"), export.render(a, None, "cmake")
    assert "#define CTUNE_ATTENTION_BLOCK_M 128" in header
    assert "#ifdef CTUNE_ATTENTION_BARE_NAMES\n#define BLOCK_M CTUNE_ATTENTION_BLOCK_M" in header
    assert '"CTUNE_ATTENTION_BLOCK_M=128"' in cmake and '"BLOCK_M=128"' not in cmake
    bare_header = export.render(a, None, "header", bare=True)
    assert "#define BLOCK_M 128" in bare_header and "BARE_NAMES" not in bare_header
    assert '"BLOCK_M=128"' in export.render(a, None, "cmake", bare=True)
    # the flags line compiles the kernel itself: always the names it reads
    assert "-DBLOCK_M=128" in export.render(a, None, "flags")


def test_a_tunable_named_like_a_launch_macro_is_refused_with_the_way_out() -> None:
    import dataclasses

    a = make_artifact()
    m = a.front[0]
    clash = dataclasses.replace(m, defines={**m.defines, "GRID_X": 4})
    a = dataclasses.replace(a, front=(clash, *a.front[1:]))
    with pytest.raises(UserError, match=r"CTUNE_GEMM_GRID_X.*--bare"):
        export.render(a, None, "header")
    assert "#define GRID_X 4" in export.render(a, None, "header", bare=True)


def test_export_members_and_errors() -> None:
    a = make_artifact()
    assert "-DBLOCK_M=256" in export.render(a, "baseline", "flags")
    assert "-DBLOCK_M=64" in export.render(a, a.front[1].key, "flags")
    with pytest.raises(UserError, match="no pinned member"):
        export.render(make_artifact(pinned=False), None, "flags")
    with pytest.raises(UserError, match="unknown export format"):
        export.render(a, None, "yaml")
    with pytest.raises(UserError, match="no member"):
        export.render(a, "0123456789abcdef", "flags")


def test_exported_json_names_the_digest() -> None:
    a = make_artifact()
    data = json.loads(export.render(a, None, "json"))
    assert data["artifact_digest"] == a.digest() and data["candidate"] == a.pinned


def test_migration_v0_to_v1_matches_the_recorded_v1_file() -> None:
    raw = json.loads((DATA / "v0-gemm-sq4096.json").read_text())
    migrated = v0_to_v1(raw, "v0")
    assert migrated["schema_version"] == 1
    assert migrated["fingerprint"]["nvcc_version"].endswith("V12.10.41")
    assert migrated["pinned"] == migrated["front"][0]["key"]
    # v1-gemm-sq4096.json is what the v0 -> v1 step wrote when schema 1 was current
    recorded = json.loads((DATA / "v1-gemm-sq4096.json").read_text())
    via_v0 = schema.from_json(upgrade(migrated, "v0"), "v0")
    assert via_v0 == schema.from_json(upgrade(recorded, "v1"), "v1")


def _v2_text(raw: dict) -> str:
    """A v2 file as the schema-2 writer wrote it: digest over the rest, sorted, indented."""
    plain = {k: v for k, v in raw.items() if k != "digest"}
    plain["digest"] = sha256_hex(canonical_json(plain))
    return json.dumps(plain, indent=2, sort_keys=True, ensure_ascii=True) + "\n"


def test_migration_v1_to_v2_golden() -> None:
    raw = json.loads((DATA / "v1-gemm-sq4096.json").read_text())
    v2 = v1_to_v2({k: v for k, v in raw.items() if k != "digest"}, "v1")
    golden = json.loads((DATA / "v2-from-v1-gemm-sq4096.json").read_text())
    assert v2["schema_version"] == 2 and v2["fingerprint"] == raw["fingerprint"]
    assert {k: v for k, v in golden.items() if k != "digest"}.keys() >= v2.keys()
    assert _v2_text(golden) == (DATA / "v2-from-v1-gemm-sq4096.json").read_text()


def test_migration_v2_to_v3_golden() -> None:
    raw = json.loads((DATA / "v2-from-v1-gemm-sq4096.json").read_text())
    artifact = schema.from_json(upgrade(raw, "v2"), "v2")
    _golden("v3-from-v2-gemm-sq4096.json", schema.encode(artifact).decode())
    assert artifact.schema_version == 3 == schema.SCHEMA_VERSION
    assert "spec_sha256" not in artifact.fingerprint
    assert artifact.inputs == {}  # this v2 file recorded no spec digest to adopt later
    assert artifact.fingerprint["protocol_version"] == "1"
    plan = artifact.protocol["plan"]
    # the objectives' tail decides the quantile; energy terms switch the energy window on
    assert (plan["warmup_ms"], plan["rep_ms"], plan["quantile"]) == (25.0, 100.0, 0.99)
    assert plan["energy"] is True and artifact.protocol["timing"] == "events"


def test_migration_chains_from_v0_to_current() -> None:
    raw = json.loads((DATA / "v0-gemm-sq4096.json").read_text())
    artifact = schema.from_json(upgrade(raw, "v0"), "v0")
    assert artifact.schema_version == schema.SCHEMA_VERSION == 3
    assert artifact.fingerprint["nvcc_version"].endswith("V12.10.41")


def test_migration_refuses_lost_versions() -> None:
    raw = json.loads((DATA / "v0-gemm-sq4096.json").read_text())
    raw["fingerprint"]["cupy"] = 13.4
    with pytest.raises(RegistryError, match="the exact version is lost"):
        upgrade(raw, "v0")
    with pytest.raises(RegistryError, match="cannot migrate"):
        upgrade({"schema_version": 99}, "x")


@pytest.mark.parametrize(
    ("name", "field", "value", "said"),
    [
        ("v2-from-v1-gemm-sq4096.json", "extensions", [1], "extensions: expected an object"),
        ("v2-from-v1-gemm-sq4096.json", "fingerprint", [1], "fingerprint: expected an object"),
        ("v2-from-v1-gemm-sq4096.json", "objectives", 5, "objectives: expected a list"),
        (
            "v2-from-v1-gemm-sq4096.json",
            "extensions",
            {"objective_spec": {"objectives": "p99"}},
            "extensions.objective_spec.objectives: expected a list",
        ),
        ("v1-gemm-sq4096.json", "extensions", {"objective_spec": [1]}, "extensions.objective_"),
        ("v0-gemm-sq4096.json", "fingerprint", [1], "fingerprint: expected an object"),
        ("v0-gemm-sq4096.json", "objectives", [{"a": 1}], "v0 objective \"{'a': 1}\" has no"),
        ("v0-gemm-sq4096.json", "front", 5, "front: expected a list"),
    ],
)
def test_a_file_in_another_shape_is_named_not_an_internal_error(
    name: str, field: str, value: object, said: str
) -> None:
    """Each once ended `registry migrate` (all of it) and `registry diff` in exit 70."""
    raw = json.loads((DATA / name).read_text())
    raw[field] = value
    with pytest.raises(RegistryError) as caught:
        upgrade(raw, "f.json")
    assert str(caught.value).startswith(f"f.json: {said}"), caught.value


@pytest.mark.parametrize(
    "name", ["v0-gemm-sq4096.json", "v1-gemm-sq4096.json", "v2-from-v1-gemm-sq4096.json"]
)
def test_every_field_in_a_wrong_shape_is_a_registry_error(name: str) -> None:
    """Fuzz: each top-level field (and the objective spec a v2 plan is told from) as a
    value of each other JSON type either migrates or is one RegistryError, nothing else."""
    base = json.loads((DATA / name).read_text())
    fields = [(f,) for f in base if f not in ("schema_version", "digest")]
    fields += [("extensions", "objective_spec"), ("extensions", "objective_spec", "objectives")]
    for path in fields:
        for odd in ([1], "x", 5, {"a": 1}, None, True, [{"a": 1}]):
            raw = json.loads((DATA / name).read_text())
            node = raw
            for step in path[:-1]:
                node = node.setdefault(step, {})
            node[path[-1]] = odd
            with contextlib.suppress(RegistryError, UserError):
                schema.from_json(upgrade(raw, "f.json"), "f.json")


def test_a_file_that_cannot_be_migrated_leaves_the_others_migrating(
    cli: Run, repo: Path, registry: Path
) -> None:
    bad = registry / "gemm" / "sq4096" / "sm90-nvidia-h100-80gb-hbm3.json"
    good = registry / "gemm" / "sq2048" / "sm90-nvidia-h100-80gb-hbm3.json"
    for path in (bad, good):
        path.parent.mkdir(parents=True)
        shutil.copy(DATA / "v2-from-v1-gemm-sq4096.json", path)
    edit_file(bad, lambda d: d.update(extensions=[1]))
    edit_file(good, lambda d: d.update(problem="sq2048"))
    git(repo, "add", "registry")
    git(repo, "commit", "-q", "-m", "two artifacts of schema 2")
    said = f"{bad}: extensions: expected an object"
    for dry, verb in ((["--dry-run"], "would migrate"), ([], "migrated")):
        code, out, err = cli("registry", "migrate", *dry, "--registry", str(registry))
        assert code == 2 and f"{verb} {good}\n" in out and str(bad) not in out, out
        lines = err.splitlines()
        assert lines == [f"warning: quarantined {said}", "error: 1 file(s) could not be migrated"]
    assert ArtifactStore(registry).read(parse_key("gemm/sq2048/sm90-nvidia-h100-80gb-hbm3"))
    # history keeps the file: reading it there is one line too
    key = "gemm/sq4096/sm90-nvidia-h100-80gb-hbm3"
    code, _, err = cli("registry", "diff", f"HEAD:{key}", key, "--registry", str(registry))
    assert code == 2
    one_line_error(err, f"HEAD:registry/{key}.json: extensions: expected an object")


def test_migrate_command_commits_once(repo: Path, registry: Path) -> None:
    target = registry / "gemm" / "sq4096" / "sm90-nvidia-h100-80gb-hbm3.json"
    target.parent.mkdir(parents=True)
    shutil.copy(DATA / "v0-gemm-sq4096.json", target)
    ArtifactStore(registry).write(make_artifact(problem="current"))  # already current: untouched
    with pytest.raises(RegistryError, match="ctune registry migrate"):
        ArtifactStore(registry).read(parse_key("gemm/sq4096/sm90-nvidia-h100-80gb-hbm3"))
    dry = migrate_registry(registry, dry_run=True)
    assert [p.name for p in dry.migrated] == [target.name] and dry.commit is None
    result = migrate_registry(registry)
    assert result.commit is not None and not result.failed
    assert git(repo, "show", "--name-only", "--format=%s", "HEAD").split() == [
        "ctune:",
        "migrate",
        "1",
        "artifact(s)",
        "to",
        "schema",
        str(schema.SCHEMA_VERSION),
        "registry/gemm/sq4096/sm90-nvidia-h100-80gb-hbm3.json",
    ]
    a = ArtifactStore(registry).read(parse_key("gemm/sq4096/sm90-nvidia-h100-80gb-hbm3"))
    assert a.schema_version == schema.SCHEMA_VERSION
    assert migrate_registry(registry).migrated == ()


def test_export_takes_defines_from_defines_and_drops_ctune_output_mode() -> None:
    import dataclasses

    a = make_artifact()
    searched = dataclasses.replace(
        a.front[0],
        nvcc_flags=("--generate-code=arch=compute_90a,code=sm_90a", "-cubin", "-std=c++17",
                    "-DBLOCK_M=128", "-DSTAGES=3", "-Xptxas", "-O3"),
    )  # fmt: skip
    a = dataclasses.replace(a, front=(searched, a.front[1]))
    line = export.render(a, None, "flags").split()
    assert line == [
        "--generate-code=arch=compute_90a,code=sm_90a", "-std=c++17", "-Xptxas", "-O3",
        "-DBLOCK_M=128", "-DSTAGES=3", "-DUSE_TMA=1",
    ]  # fmt: skip
    assert '"SHELL:-Xptxas -O3"' in export.render(a, None, "cmake")


def test_a_launcher_export_builds_as_a_user_compiles_it() -> None:
    """A launcher member records the flags of ctune's harness library and reads CUTLASS
    through the @cutlass token: the export leaves out the library and names the folder."""
    import dataclasses

    from ctune.spec.includes import include_token_dir

    folder = include_token_dir("@cutlass")
    if folder is None:
        pytest.skip("the nvidia-cutlass wheel is not installed")
    a = make_artifact()
    searched = dataclasses.replace(
        a.front[0],
        nvcc_flags=("--generate-code=arch=compute_90a,code=sm_90a", "-shared", "-Xcompiler",
                    "-fPIC", "--no-compress", "-std=c++17", "-DBLOCK_M=128", "-Xptxas", "-O3"),
    )  # fmt: skip
    closure = {"gemm.cu": "0" * 64, "@cutlass/cute/tensor.hpp": "1" * 64}
    a = dataclasses.replace(a, front=(searched, a.front[1]), inputs={"closure": closure})
    line = export.render(a, None, "flags").split()
    assert line[:4] == [f"-I{folder}", "--generate-code=arch=compute_90a,code=sm_90a",
                        "-std=c++17", "-Xptxas"]  # fmt: skip
    for harness in ("-shared", "-fPIC", "--no-compress", "-cubin"):
        assert harness not in line
    assert json.loads(export.render(a, None, "json"))["nvcc_flags"][0] == f"-I{folder}"
    cmake = export.render(a, None, "cmake")
    assert f'set(CTUNE_GEMM_INCLUDE_DIRS "{folder}")' in cmake
    assert "target_include_directories(<target> PRIVATE ${CTUNE_GEMM_INCLUDE_DIRS})" in cmake
    assert f"-I{folder}" in export.render(a, None, "header")


def test_runtime_genes_are_exported_as_runtime_values_not_flags() -> None:
    import dataclasses

    a = make_artifact()
    cand = Candidate.of("gemm", {**a.front[0].candidate.as_dict(), "SPLITS": 2, "RASTER": 1})
    runtime = dataclasses.replace(
        a.front[0], candidate=cand, key=cand.key(), runtime={"SPLITS": 2, "RASTER": 1}
    )
    a = dataclasses.replace(a, front=(runtime, a.front[1]), pinned=cand.key())
    flags = export.render(a, None, "flags")
    assert "SPLITS" not in flags and "RASTER" not in flags and "-DBLOCK_M=128" in flags
    header = export.render(a, None, "header")
    assert "#define CTUNE_GEMM_RUNTIME_RASTER (1)" in header
    assert "#define CTUNE_GEMM_RUNTIME_SPLITS (2)" in header
    assert "#define SPLITS" not in header
    cmake = export.render(a, None, "cmake")
    assert 'set(CTUNE_GEMM_RUNTIME_SPLITS "2")' in cmake
    assert "SPLITS=2" not in cmake  # not a compile definition
    data = json.loads(export.render(a, None, "json"))
    assert data["runtime"] == {"RASTER": 1, "SPLITS": 2} and "SPLITS" not in data["defines"]
    # the registry keeps them: a round trip through the file format loses nothing
    assert schema.decode(schema.encode(a), "a").front[0].runtime == {"RASTER": 1, "SPLITS": 2}


def test_members_without_runtime_genes_keep_their_bytes() -> None:
    """The runtime field is written only when present: existing artifacts keep their digest."""
    text = schema.encode(make_artifact()).decode()
    assert '"runtime"' not in text
    assert schema.decode(text.encode(), "a").baseline.runtime == {}


def test_a_searched_member_records_runtime_genes_apart_from_defines() -> None:
    """What the artifact stores for a member, from the spec: -D defines vs runtime values."""
    from ctune.registry.assemble import front_member
    from ctune.search.result import MemberResult
    from ctune.spec import load_spec

    spec = load_spec(Path(__file__).parents[2] / "data" / "kernels" / "rt_saxpy.yaml")
    problem = spec.problem()
    cand = spec.candidate({"BLOCK": 64, "ITEMS": 4, "UNROLL": 2})
    result = MemberResult(cand, cand.key(), {}, (1.0,), None, False, None, None)
    m = front_member(spec, problem, result, keep_samples=False)
    assert m.defines == {"UNROLL": 2}
    assert m.runtime == {"BLOCK": 64, "ITEMS": 4}
    assert m.launch == {"grid": (391, 1, 1), "block": (64, 1, 1), "dynamic_smem_bytes": 0}

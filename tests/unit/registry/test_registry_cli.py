"""`ctune registry`, `ctune check` and `ctune gate` through ctune.cli.main.

Only the machine boundary is replaced: the nvcc/GPU probes and the
remeasurer (the GPU). Exit codes are asserted, and every error is one line.
"""

from __future__ import annotations

import dataclasses
import json
import os
import types
from pathlib import Path

import numpy as np
import pytest
from registry_support import (
    CONTROLS_BYTES,
    FINGERPRINT,
    Run,
    StandInRemeasurer,
    artifact_with_samples,
    edit_file,
    git,
    make_artifact,
    one_line_error,
    with_controls,
)

import ctune.ci.check as check_module
import ctune.ci.gate_run as gate_run_module
import ctune.compile.deps as deps_module
import ctune.compile.find_toolchains as find_toolchains_module
import ctune.evidence.identity as fingerprint_module
from ctune import identity_probe
from ctune.errors import ToolchainError
from ctune.evidence.identity import FIELDS
from ctune.records import sha256_hex
from ctune.registry.schema import encode
from ctune.registry.service import publish_artifact
from ctune.registry.store import ArtifactStore, write_result
from ctune.spec.space.params import Space

KEY = "gemm/sq4096/sm90-nvidia-h100-80gb-hbm3"
DIGEST = sha256_hex(CONTROLS_BYTES)
DATA = Path(__file__).parents[2] / "data" / "registry"
#: what a check line says when the artifact's own toolchain checked it
RECORDED = "(checked with its recorded toolchain nvcc 13.0.88 / ptxas 13.0.88)"
#: ... and when this machine lacks it (the scripted nvcc is another)
SELECTED = (
    "(checked with the selected toolchain nvcc 13.1.0 / ptxas 13.0.88; its recorded "
    "nvcc 13.0.88 / ptxas 13.0.88 is not on this machine)"
)


# --- registry ------------------------------------------------------------------------


def test_list_show_and_quarantine(cli: Run, registry: Path) -> None:
    publish_artifact(registry, make_artifact())
    publish_artifact(registry, make_artifact(problem="other", pinned=False))
    bad = ArtifactStore(registry).write(make_artifact(problem="broken"))
    bad.write_bytes(bad.read_bytes()[:-40])
    code, out, err = cli("registry", "list", "--registry", str(registry))
    assert code == 0
    assert KEY in out and "gemm/other/" in out and "broken" not in out
    assert "quarantined" in err and "broken" in err
    code, out, _ = cli("registry", "list", "--pinned", "--registry", str(registry))
    assert KEY in out and "gemm/other/" not in out
    code, out, _ = cli("registry", "show", KEY, "--registry", str(registry))
    assert code == 0 and f"digest sha256:{make_artifact().digest()}" in out
    code, out, _ = cli("registry", "show", KEY, "--json", "--registry", str(registry))
    assert out.encode() == encode(make_artifact())


def test_show_warns_of_a_malformed_vendor_record_and_shows_the_rest(
    cli: Run, registry: Path
) -> None:
    """``extensions.search`` as a string ended `registry show` in an internal error."""
    path = publish_artifact(registry, make_artifact()).path
    for search in ("x", {"vendor": [1]}):
        edit_file(path, lambda d, s=search: d["extensions"].update(search=s))
        code, out, err = cli("registry", "show", KEY, "--registry", str(registry))
        assert code == 0 and "pinned genes: " in out and "when tuned" not in out
        field = "search" if search == "x" else "search.vendor"
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0] == (
            f"warning: {KEY}: extensions.{field}: expected an object; "
            "the comparison with the vendor call is not shown"
        )


def test_list_takes_kernels_and_patterns(cli: Run, registry: Path) -> None:
    publish_artifact(registry, make_artifact())
    publish_artifact(registry, make_artifact(problem="other", pinned=False))
    publish_artifact(registry, make_artifact(kernel="attn", problem="s1024"))

    def listed(*patterns: str) -> list[str]:
        code, out, err = cli("registry", "list", *patterns, "--registry", str(registry))
        assert code == 0 and err == "", err
        return [line.split()[0] for line in out.splitlines()]

    assert listed("gemm") == ["gemm/other/sm90-nvidia-h100-80gb-hbm3", KEY]
    assert listed("*4096*", "attn/s1024") == [KEY, "attn/s1024/sm90-nvidia-h100-80gb-hbm3"]
    assert len(listed("*/s*")) == 3  # '*' crosses '/', as in fnmatch and git's pathspecs
    assert len(listed()) == 3
    code, _, err = cli("registry", "list", "gemm/*/sm80*", "--registry", str(registry))
    assert code == 2
    one_line_error(err, "no artifact matches 'gemm/*/sm80*'")


def test_list_and_show_as_tables(cli: Run, registry: Path) -> None:
    import csv
    import io

    a = make_artifact()
    publish_artifact(registry, a)
    publish_artifact(registry, make_artifact(problem="other", pinned=False))
    code, out, err = cli("registry", "list", "--as", "csv", "--registry", str(registry))
    assert code == 0 and err == ""
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["key"] for r in rows] == ["gemm/other/sm90-nvidia-h100-80gb-hbm3", KEY]
    assert rows[1]["pinned"] == a.pinned and rows[0]["pinned"] == ""
    assert json.loads(rows[1]["pinned_values"]) == list(a.front[0].values)
    assert rows[1]["digest"] == a.digest() and rows[1]["front"] == "2"
    for args in (("--json",), ("--as", "json")):
        code, out, _ = cli("registry", "list", *args, "--pinned", "--registry", str(registry))
        data = json.loads(out)
        assert code == 0 and [r["key"] for r in data["rows"]] == [KEY]
        assert data["quarantined"] == [] and data["rows"][0]["objectives"] == ["p50", "energy"]
    code, out, _ = cli("registry", "show", KEY, "--as", "csv", "--registry", str(registry))
    members = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and [m["role"] for m in members] == ["pinned", "front", "baseline"]
    assert [m["key"] for m in members] == [a.front[0].key, a.front[1].key, a.baseline.key]
    assert float(members[0]["p50_ms"]) == a.front[0].values[0] and members[0]["BLOCK_M"] == "128"
    assert "p50" not in members[0]  # the p50 objective is the p50_ms column
    code, out, _ = cli("registry", "show", KEY, "--as", "json", "--registry", str(registry))
    assert out.encode() == encode(a)


def test_show_as_csv_names_each_column_once(cli: Run, registry: Path) -> None:
    """An objective named like a resource column (regs) once made a second ``regs``."""
    import csv
    import dataclasses
    import io

    from ctune.registry.schema import ObjectiveInfo

    regs = (ObjectiveInfo("p50", "min", "ms"), ObjectiveInfo("regs", "min", "regs"))
    publish_artifact(registry, dataclasses.replace(make_artifact(), objectives=regs))
    code, out, _ = cli("registry", "show", KEY, "--as", "csv", "--registry", str(registry))
    header, *body = list(csv.reader(io.StringIO(out)))
    assert code == 0 and len(header) == len(set(header)) and header.count("regs") == 1
    assert [dict(zip(header, row, strict=True))["regs"] for row in body] == ["128"] * 3


def test_show_a_member(cli: Run, registry: Path) -> None:
    """``show KEY@member`` once printed the whole artifact and ignored the member."""
    import csv
    import io

    from ctune.registry.export import flags_line
    from ctune.registry.schema import member_json

    a = make_artifact()
    publish_artifact(registry, a)
    other = a.front[1]
    code, out, err = cli("registry", "show", f"{KEY}@{other.key}", "--registry", str(registry))
    assert code == 0 and err == ""
    assert out.splitlines()[0].startswith(f"{KEY}@{other.key}  digest sha256:{a.digest()}")
    assert a.front[0].key not in out and a.baseline.key not in out and "fingerprint" not in out
    genes = " ".join(f"{k}={v}" for k, v in other.candidate.genes)
    assert f"genes: {genes}" in out and f"build flags: {flags_line(other)}" in out
    assert "resources: regs=128 spills_bytes=0\n" in out  # smem_bytes unknown
    code, out, _ = cli("registry", "show", f"{KEY}@baseline", "--registry", str(registry))
    assert code == 0 and f"{a.baseline.key} (baseline)" in out and a.front[1].key not in out
    code, out, _ = cli(
        "registry", "show", f"{KEY}@pinned", "--as", "csv", "--registry", str(registry)
    )
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and [(r["key"], r["role"]) for r in rows] == [(a.front[0].key, "pinned")]
    code, out, _ = cli(
        "registry", "show", f"{KEY}@{other.key}", "--json", "--registry", str(registry)
    )
    assert code == 0 and json.loads(out) == member_json(other)
    code, _, err = cli("registry", "show", f"{KEY}@{'0' * 16}", "--registry", str(registry))
    assert code == 2
    one_line_error(err, f"no member {'0' * 16}", a.front[0].key, other.key, a.baseline.key)


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["registry", "show", "../etc/passwd"], ["kernel '..' is not allowed"]),
        (["registry", "show", "gemm/x"], ["must be <kernel>/<problem>/<device-class>"]),
        (["registry", "show", "Gemm/sq4096/x"], ["kernel 'Gemm' is not allowed"]),
        (["registry", "show", "gemm/none/x"], ["no artifact gemm/none/x"]),
        (["registry", "show", "gemm/sq4096/x@nothex"], ["16-hex candidate key"]),
        (["registry", "export", KEY, "--as", "yaml"], ["unknown export format"]),
        (["registry", "list", "--as", "yaml"], ["--as 'yaml': unknown table format"]),
        (["registry", "show", KEY, "--as", "xml"], ["--as 'xml': unknown table format"]),
        (["registry", "pin", KEY, "--release", "../v1"], ["release '../v1' is not allowed"]),
        (["registry", "diff", KEY, "HEAD;id:" + KEY], ["revision 'HEAD;id' is not allowed"]),
    ],
)
def test_bad_input_is_one_line_exit_2(cli: Run, registry: Path, args: list[str], needles) -> None:
    publish_artifact(registry, make_artifact())
    code, _, err = cli(*args, "--registry", str(registry))
    assert code == 2
    one_line_error(err, *needles)


def test_listing_a_folder_that_is_not_there_is_a_wrong_path(cli: Run, tmp_path: Path) -> None:
    """`registry list --registry /typo` said "no artifacts", exit 0, like an empty registry."""
    code, out, err = cli("registry", "list", "--registry", str(tmp_path / "nope"))
    assert code == 2 and out == ""
    one_line_error(err, "nope: no such directory")
    (tmp_path / "empty").mkdir()
    code, out, _ = cli("registry", "list", "--registry", str(tmp_path / "empty"))
    assert code == 0 and "no artifacts" in out


def test_corrupt_artifact_is_named(cli: Run, registry: Path) -> None:
    path = publish_artifact(registry, make_artifact()).path
    path.write_bytes(path.read_bytes().replace(b'"seed": 7', b'"seed": 1'))
    code, _, err = cli("registry", "show", KEY, "--registry", str(registry))
    assert code == 2
    one_line_error(err, str(path), "digest mismatch")


def test_diff_between_revisions(cli: Run, repo: Path, registry: Path) -> None:
    a = make_artifact()
    publish_artifact(registry, a)
    changed = make_artifact(fingerprint={**FINGERPRINT, "driver": "590.1"}, pinned=False)
    publish_artifact(registry, changed)
    code, out, _ = cli("registry", "diff", f"HEAD~1:{KEY}", KEY, "--registry", str(registry))
    assert code == 0
    assert "fingerprint driver: '580.159.04' -> '590.1' (soft)" in out
    assert f"pinned: {a.pinned} -> None" in out
    code, out, _ = cli("registry", "diff", KEY, KEY, "--registry", str(registry))
    assert "identical" in out


def test_diff_compares_the_members_a_key_names(cli: Run, registry: Path) -> None:
    a = make_artifact()
    publish_artifact(registry, a)
    pinned, baseline = a.front[0], a.baseline
    code, out, err = cli(
        "registry", "diff", f"{KEY}@baseline", f"{KEY}@{pinned.key}", "--registry", str(registry)
    )
    assert code == 0 and err == "", err
    assert "identical" not in out and f"member {baseline.key}" in out
    assert "~ gene BLOCK_M: 256 -> 128" in out
    assert "~ p50: 1.5 -> 1 (-33.3%)" in out
    assert f"~ sass: {baseline.sass_sha256[:12]} -> {pinned.sass_sha256[:12]}" in out
    # the side without @member is its pinned member
    code, out, _ = cli("registry", "diff", KEY, f"{KEY}@pinned", "--registry", str(registry))
    assert code == 0 and f"record the same member ({pinned.key})" in out
    code, out, _ = cli(
        "registry", "diff", f"{KEY}@baseline", KEY, "--json", "--registry", str(registry)
    )
    doc = json.loads(out)
    assert doc["members"] == [baseline.key, pinned.key] and doc["same"] is False
    assert {"name": "BLOCK_M", "old": "256", "new": "128"} in doc["genes"]


def test_diff_of_an_unknown_member_is_one_line(cli: Run, registry: Path) -> None:
    publish_artifact(registry, make_artifact())
    code, out, err = cli("registry", "diff", f"{KEY}@{'0' * 16}", KEY, "--registry", str(registry))
    assert code == 2 and out == ""
    one_line_error(err, f"no member {'0' * 16}", KEY)


def test_pin_then_export_everything(cli: Run, repo: Path, registry: Path) -> None:
    publish_artifact(registry, make_artifact())
    code, out, _ = cli("registry", "pin", KEY, "--release", "v1", "--registry", str(registry))
    assert code == 0 and "as ctune/pin/v1/gemm/sq4096/sm90-nvidia-h100-80gb-hbm3" in out
    code, _, err = cli("registry", "pin", KEY, "--release", "v1", "--registry", str(registry))
    assert code == 2
    one_line_error(err, "immutable")
    golden = {
        "flags": "export.flags.txt",
        "header": "export.header.h",
        "cmake": "export.cmake",
        "json": "export.json",
    }
    for fmt, name in golden.items():
        code, out, _ = cli("registry", "export", KEY, "--as", fmt, "--registry", str(registry))
        assert code == 0 and out == (DATA / name).read_text()
    for fmt, name in (("header", "export.header.bare.h"), ("cmake", "export.bare.cmake")):
        code, out, _ = cli(
            "registry", "export", KEY, "--as", fmt, "--bare", "--registry", str(registry)
        )
        assert code == 0 and out == (DATA / name).read_text()
    # the release pin survives a later re-tune of the same key
    publish_artifact(registry, make_artifact(pinned=False, seed=99))
    code, out, _ = cli(
        "registry", "export", KEY, "--release", "v1", "--as", "flags", "--registry", str(registry)
    )
    assert code == 0 and out == (DATA / "export.flags.txt").read_text()
    target = repo / "build" / "tuned.h"
    target.parent.mkdir()
    cli(
        "registry",
        "export",
        KEY,
        "--release",
        "v1",
        "--as",
        "header",
        "-o",
        str(target),
        "--registry",
        str(registry),
    )
    assert target.read_text() == (DATA / "export.header.h").read_text()


def test_import_result_file(cli: Run, repo: Path, registry: Path, tmp_path: Path) -> None:
    result = write_result(make_artifact(), tmp_path / "results" / "gemm.json")
    code, out, _ = cli("registry", "import", str(result), "--registry", str(registry))
    assert code == 0 and "committed" in out
    assert git(repo, "status", "--porcelain") == ""
    assert KEY + ".json" in git(repo, "ls-tree", "-r", "--name-only", "HEAD")
    result.write_bytes(result.read_bytes().replace(b"nsga2", b"random"))
    code, _, err = cli("registry", "import", str(result), "--registry", str(registry))
    assert code == 2
    one_line_error(err, "digest mismatch")


def test_import_on_detached_head_names_ref(cli: Run, repo: Path, registry: Path, tmp_path) -> None:
    result = write_result(make_artifact(), tmp_path / "r.json")
    git(repo, "checkout", "-q", "--detach")
    code, _, err = cli("registry", "import", str(result), "--registry", str(registry))
    assert code == 2
    one_line_error(err, "--ref")
    code, _, _ = cli(
        "registry", "import", str(result), "--ref", "ctune/registry", "--registry", str(registry)
    )
    assert code == 0 and "registry/" in git(repo, "ls-tree", "-r", "--name-only", "ctune/registry")


def test_migrate_and_verify(cli: Run, repo: Path, registry: Path) -> None:
    target = registry / "gemm" / "sq4096" / "sm90-nvidia-h100-80gb-hbm3.json"
    target.parent.mkdir(parents=True)
    target.write_bytes((DATA / "v0-gemm-sq4096.json").read_bytes())
    code, _, err = cli("registry", "show", KEY, "--registry", str(registry))
    assert code == 2
    one_line_error(err, "schema_version 0", "ctune registry migrate")
    code, out, _ = cli("registry", "migrate", "--registry", str(registry))
    assert code == 0 and "migrated" in out
    code, out, _ = cli("registry", "pin", KEY, "--release", "v1", "--registry", str(registry))
    assert code == 0
    code, out, _ = cli("registry", "verify", "--registry", str(registry))
    assert code == 0 and "git fsck: ok" in out and "pin ctune/pin/v1/" in out
    target.write_text(target.read_text().replace("nsga2", "nsga3"))
    code, _, err = cli("registry", "verify", "--registry", str(registry))
    assert code == 2 and "verification failed" in err


def test_diff_reads_an_older_schema_in_history_without_asking_to_migrate(
    cli: Run, repo: Path, registry: Path
) -> None:
    target = registry / "gemm" / "sq4096" / "sm90-nvidia-h100-80gb-hbm3.json"
    target.parent.mkdir(parents=True)
    target.write_bytes((DATA / "v1-gemm-sq4096.json").read_bytes())
    git(repo, "add", "registry")
    git(repo, "commit", "-q", "-m", "an artifact of schema 1")
    code, out, _ = cli("registry", "migrate", "--registry", str(registry))
    assert code == 0 and "migrated" in out
    # history keeps the schema 1 file; diffing against it must work, not advise migrate
    code, out, err = cli("registry", "diff", f"HEAD~1:{KEY}", KEY, "--registry", str(registry))
    assert code == 0, err
    assert "migrate" not in out + err
    assert "are identical" in out  # read upgraded, the old file is what migrate wrote
    # a corrupted old file is still refused, naming the revision
    git(repo, "checkout", "-q", "HEAD~1", "--", "registry")
    target.write_text(target.read_text().replace('"seed": 7', '"seed": 8'))
    git(repo, "commit", "-q", "-am", "hand-edited")
    code, _, err = cli("registry", "diff", f"HEAD:{KEY}", KEY, "--registry", str(registry))
    assert code == 2
    one_line_error(err, "HEAD:registry/", "digest mismatch")


def test_doctor_reports_and_fixes_stale_locks(cli: Run, repo: Path, registry: Path) -> None:
    lock = repo / ".git" / "refs" / "heads" / "main.lock"
    lock.write_text("")
    past = lock.stat().st_mtime - 3600
    os.utime(lock, (past, past))
    code, out, err = cli("registry", "doctor", "--registry", str(registry))
    assert code == 2 and str(lock) in out
    one_line_error(err, "ctune registry doctor --fix")
    code, out, _ = cli("registry", "doctor", "--fix", "--registry", str(registry))
    assert code == 0 and f"removed {lock}" in out and not lock.exists()
    code, out, _ = cli("registry", "doctor", "--registry", str(registry))
    assert code == 0 and "no stale git lock files" in out


# --- check -----------------------------------------------------------------------------

NO_GPU = {k: v for k, v in FINGERPRINT.items() if FIELDS[k][1] != "gpu"}


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch) -> dict:
    """Replace the probes (nvcc, NVML, kernel sources) with a scripted machine."""
    state: dict = {
        "fingerprint": dict(NO_GPU),
        "gpu": None,
        "toolchain_error": None,
        "sass_identical": True,
        "rebuilds": [],
        "extra_flags": (),  # what today's code renders beyond each member's recorded flags
    }

    def probe_toolchain(nvcc: str = "nvcc") -> dict[str, str]:
        if state["toolchain_error"]:
            raise ToolchainError(state["toolchain_error"])
        return {k: state["fingerprint"][k] for k in ("nvcc_version", "ptxas_version")}

    def current(spec, gpu, **kw) -> dict[str, str]:
        fields = {**state["fingerprint"], **(kw.get("gpu_fields") or {})}
        return fields if gpu else {k: v for k, v in fields.items() if FIELDS[k][1] != "gpu"}

    monkeypatch.setattr(identity_probe, "probe_toolchain", probe_toolchain)
    monkeypatch.setattr(fingerprint_module, "probe_gpu_machine", lambda: state["gpu"])
    monkeypatch.setattr(identity_probe, "current_fingerprint", current)
    monkeypatch.setattr(fingerprint_module, "older_forms", lambda spec: {})
    monkeypatch.setattr(
        check_module.FingerprintProbe,
        "member_flags",
        lambda self, artifact, m: (*m.nvcc_flags, *state["extra_flags"]),
    )
    launch = {"grid": (1024, 1, 1), "block": (256, 1, 1), "dynamic_smem_bytes": 49152}
    spec = types.SimpleNamespace(
        problem=lambda name: types.SimpleNamespace(name=name, dims={}),
        launch_geometry=lambda candidate, problem: launch,
        # an empty space: a member's genes in it are none
        space=Space(()),
    )
    spec.with_acf_of = lambda values: spec  # its members record no controls genes
    monkeypatch.setattr(check_module, "load_kernel_spec", lambda d, k, nvcc="nvcc": spec)
    monkeypatch.setattr(deps_module, "source_closure", lambda spec, nvcc="nvcc", **_: {})
    # no other toolchain on this scripted machine: the recorded one is the scripted nvcc's
    monkeypatch.setattr(find_toolchains_module, "toolchain_places", lambda environ: [])

    def rebuild_standin(settings: object) -> object:
        def verify(artifact: object, spec: object) -> check_module.BinaryCheck:
            state["rebuilds"].append(artifact)
            diff = () if state["sass_identical"] else ("member x: SASS aaa -> bbb",)
            return check_module.BinaryCheck(3, diff)

        return verify

    monkeypatch.setattr(check_module, "nvcc_verifier", rebuild_standin)
    return state


def test_check_fresh_without_gpu(cli: Run, registry: Path, machine: dict) -> None:
    publish_artifact(registry, make_artifact())
    code, out, err = cli("check", "--registry", str(registry))
    assert code == 0, err
    # quiet: a fresh artifact is counted in the summary line, not listed
    assert out == (
        "1 artifact: 0 stale, 0 with soft drift, 1 fresh; checked with nvcc 13.0.88 / ptxas "
        "13.0.88; no GPU: 12 GPU fields not checked\n"
    )
    code, out, err = cli("check", "-v", "--registry", str(registry))
    assert code == 0, err
    assert f"fresh {KEY} {RECORDED}\n" in out
    assert "not checked: no GPU (" in out and "driver" in out
    summary = "1 artifact: 0 stale, 0 with soft drift, 1 fresh; checked with nvcc 13.0.88"
    assert out.endswith(f"{summary} / ptxas 13.0.88\n")  # the fields are named above it


def test_check_names_hard_build_and_soft_changes(cli: Run, registry: Path, machine: dict) -> None:
    publish_artifact(registry, make_artifact())
    machine["fingerprint"] = {**NO_GPU, "arch": "sm_100a"}
    code, out, err = cli("check", "--registry", str(registry))
    assert code == 1 and machine["rebuilds"] == []
    assert f"STALE {KEY} {RECORDED}\n  arch: sm_90 -> sm_100a (hard)" in out
    one_line_error(err, "1 of 1 artifact(s) stale")
    # a new nvcc: rebuilt, same SASS -> still valid; other SASS -> stale
    new_nvcc = "Cuda compilation tools, release 13.1, V13.1.0"
    machine["fingerprint"] = {**NO_GPU, "nvcc_version": new_nvcc}
    code, out, _ = cli("check", "--registry", str(registry))
    assert code == 0 and len(machine["rebuilds"]) == 1
    assert (
        f"build: nvcc_version changed for 1 artifact: now {new_nvcc}; rebuilt, SASS identical"
        in out
    )
    assert f"toolchain: {SELECTED[1:-1]} (1 artifact)" in out and KEY not in out
    code, out, _ = cli("check", "--verbose", "--registry", str(registry))
    assert f"WARN {KEY} {SELECTED}\n  nvcc_version: " in out and "SASS identical" in out
    machine["sass_identical"] = False
    code, out, _ = cli("check", "--registry", str(registry))
    assert code == 1 and "rebuilt: member x: SASS aaa -> bbb" in out
    code, out, _ = cli("check", "--no-rebuild", "--registry", str(registry))
    assert code == 1 and "binaries not verified" in out and len(machine["rebuilds"]) == 3
    machine["fingerprint"] = {**NO_GPU, "ctune_version": "0.2.0"}
    code, out, _ = cli("check", "--registry", str(registry))
    assert code == 0
    assert "soft: ctune_version changed for 1 artifact: now 0.2.0; --strict fails on it\n" in out
    assert "0 stale, 1 with soft drift, 0 fresh" in out
    code, out, _ = cli("check", "-v", "--registry", str(registry))
    assert code == 0 and f"WARN {KEY} {RECORDED}\n  ctune_version: 0.1.0 -> 0.2.0 (soft)" in out
    code, out, _ = cli("check", "--strict", "--registry", str(registry))
    assert code == 1 and f"STALE {KEY}" in out


def test_check_for_programs(cli: Run, registry: Path, machine: dict) -> None:
    """``--format json``: every verdict with its reasons, and the one error line still on
    stderr with exit 1; ``--format csv``: a row each."""
    import csv
    import io

    publish_artifact(registry, make_artifact())
    machine["fingerprint"] = {**NO_GPU, "arch": "sm_100a"}
    code, out, err = cli("check", "--registry", str(registry), "--format", "json")
    assert code == 1
    data = json.loads(out)
    [verdict] = data["artifacts"]
    assert verdict["key"] == KEY and verdict["verdict"] == "stale"
    assert {"name": "arch", "old": "sm_90", "new": "sm_100a", "severity": "hard"} in verdict[
        "changes"
    ]
    assert data["counts"] == {"stale": 1} and "driver" in data["not_checked"]
    one_line_error(err, "1 of 1 artifact(s) stale")
    code, out, _ = cli("check", "--registry", str(registry), "--format", "csv")
    [row] = list(csv.DictReader(io.StringIO(out)))
    assert code == 1 and row["verdict"] == "stale" and "arch: sm_90 -> sm_100a" in row["reasons"]


def test_check_rebuilds_members_whose_flags_render_otherwise_today(
    cli: Run, registry: Path, machine: dict
) -> None:
    """No fingerprint field changed, but ctune renders the members' genes into other flags
    (a catalogue default or render rule): rebuilt, and the SASS decides."""
    publish_artifact(registry, make_artifact())
    machine["extra_flags"] = ("-Xptxas", "-O3")
    code, out, err = cli("check", "-v", "--registry", str(registry))
    assert code == 0 and len(machine["rebuilds"]) == 1, err
    assert f"WARN {KEY} {RECORDED}\n  nvcc_flags[" in out
    assert "(none) -> -Xptxas -O3 (build)" in out
    assert "SASS identical" in out
    machine["sass_identical"] = False
    code, out, _ = cli("check", "--registry", str(registry))
    assert code == 1 and f"STALE {KEY}" in out and "rebuilt: member x: SASS aaa -> bbb" in out


@pytest.mark.parametrize("where", ["missing", "empty"])
def test_check_of_a_missing_or_empty_registry_is_bad_input(
    cli: Run, tmp_path: Path, machine: dict, where: str
) -> None:
    folder = tmp_path / "nothing-here"
    if where == "empty":
        folder.mkdir()
    code, out, err = cli("check", "--registry", str(folder))
    assert code == 2 and out == ""
    one_line_error(err, "registry")


def test_check_pinned_only_and_gpu_fields(cli: Run, registry: Path, machine: dict) -> None:
    publish_artifact(registry, make_artifact())
    publish_artifact(registry, make_artifact(problem="unpinned", pinned=False))
    machine["gpu"] = {k: v for k, v in FINGERPRINT.items() if FIELDS[k][1] == "gpu"}
    machine["gpu"]["memory_bytes"] = "1"  # the same GPU model, another memory size
    code, out, _ = cli("check", "--pinned", "--registry", str(registry))
    assert code == 1 and f"memory_bytes: {FINGERPRINT['memory_bytes']} -> 1 (hard)" in out
    assert "unpinned" not in out and "no GPU" not in out


def test_check_on_another_gpu_compares_no_gpu_field(
    cli: Run, registry: Path, machine: dict
) -> None:
    """An H100 artifact on an H200 runner is another GPU's, not a stale one: a registry
    holds several GPUs' artifacts, and `ctune check` on any GPU runner must not fail on them."""
    publish_artifact(registry, make_artifact())
    machine["gpu"] = {k: v for k, v in FINGERPRINT.items() if FIELDS[k][1] == "gpu"}
    machine["gpu"]["gpu_name"] = "NVIDIA H200"
    machine["gpu"]["memory_bytes"] = "1"
    code, out, _ = cli("check", "-v", "--registry", str(registry))
    assert code == 0 and f"fresh {KEY}" in out
    assert "gpu_name" not in out and "memory_bytes" not in out
    others = "GPU fields not compared: 1 artifact(s) of other GPUs (sm90-nvidia-h100-80gb-hbm3)"
    assert others in out


def test_check_without_nvcc_is_exit_3(cli: Run, registry: Path, machine: dict) -> None:
    publish_artifact(registry, make_artifact())
    machine["toolchain_error"] = "nvcc not found ('nvcc' is not on PATH)"
    code, _, err = cli("check", "--registry", str(registry))
    assert code == 3
    one_line_error(err, "nvcc not found")


def test_check_with_unreadable_artifact_is_exit_2(cli: Run, registry: Path, machine) -> None:
    path = publish_artifact(registry, make_artifact()).path
    path.write_text("{}")
    code, _, err = cli("check", "--registry", str(registry))
    assert code == 2 and "could not be read" in err


def test_a_hand_edited_sampling_plan_is_quarantined_not_an_internal_error(
    cli: Run, registry: Path, machine: dict
) -> None:
    """A plan value edited behind a recomputed digest reached check's arithmetic: exit 70."""
    path = publish_artifact(registry, make_artifact()).path
    edit_file(path, lambda d: d["protocol"]["plan"].update(rep_ms="x"))
    said = f"{path}: protocol.plan: rep_ms='x' is not a number"
    code, _, err = cli("check", "--registry", str(registry))
    assert code == 2 and f"quarantined {said}" in err and "internal error" not in err
    for command in (["registry", "retune", KEY], ["registry", "refresh", KEY]):
        code, _, err = cli(*command, "--registry", str(registry))
        assert code == 2, command
        one_line_error(err, said)
    code, _, err = cli("registry", "verify", "--no-fsck", "--registry", str(registry))
    assert code == 2 and said in err


def _damaged(registry: Path) -> Path:
    """An artifact file beside the good ones that does not read (quarantined)."""
    path = ArtifactStore(registry).write(make_artifact(problem="broken"))
    path.write_text("{\n")
    return path


def test_refresh_names_an_unreadable_artifact_and_fails_after_the_rest(
    cli: Run, registry: Path, machine: dict
) -> None:
    publish_artifact(registry, make_artifact())
    broken = _damaged(registry)
    code, out, err = cli("registry", "refresh", "--dry-run", "--registry", str(registry))
    assert code == 2 and KEY in out  # the readable artifact was still refreshed
    warning, error = [ln for ln in err.splitlines() if ln.strip()]
    assert warning.startswith(f"warning: quarantined {broken}: not valid JSON")
    one_line_error(error, f"1 artifact file(s) could not be read ({broken}", "restore them")


# --- gate ------------------------------------------------------------------------------


@pytest.fixture
def gpu_machine(machine: dict, monkeypatch: pytest.MonkeyPatch) -> dict:
    machine["fingerprint"] = dict(FINGERPRINT)
    machine["gpu"] = {k: v for k, v in FINGERPRINT.items() if FIELDS[k][1] == "gpu"}
    machine["remeasure"] = None

    class RemeasurerStandIn:  # the GPU boundary: the test sets machine["remeasure"]
        def __init__(self, settings: object, kernels: object, *, vendor: bool = False) -> None:
            machine["vendor asked"] = vendor

        def __enter__(self) -> object:
            return machine["remeasure"]

        def __exit__(self, *exc: object) -> None:
            pass

    monkeypatch.setattr(gate_run_module, "RebuildingRemeasurer", RemeasurerStandIn)
    return machine


@pytest.mark.parametrize(
    ("scale", "code", "word"),
    [
        ([1.0], 0, "PASS"),
        ([0.9], 0, "IMPROVED"),
        ([1.1, 1.1], 1, "REGRESSED"),
        ([1.1, 1.0], 4, "INCONCLUSIVE"),
    ],
)
def test_gate_verdicts_and_exit_codes(
    cli: Run, registry: Path, gpu_machine: dict, scale: list[float], code: int, word: str
) -> None:
    rng = np.random.default_rng(11)
    publish_artifact(registry, artifact_with_samples(rng))
    gpu_machine["remeasure"] = StandInRemeasurer(rng, scale)
    got, out, err = cli("gate", "--processes", "5", "--registry", str(registry))
    assert got == code, out + err
    # each verdict as it lands, then the report
    assert out.startswith(f"gate [1/1] {word} {KEY}\n{word} {KEY}: ")
    assert "predicted false-alarm rate for this run" in out
    if code:
        one_line_error(err, "gate")


def test_gate_fails_over_an_unreadable_artifact_after_gating_the_rest(
    cli: Run, registry: Path, gpu_machine: dict
) -> None:
    """A damaged file may be a pinned artifact: the gate measures the rest, then exit 2,
    keeping the verdict it would have given in the same line."""
    rng = np.random.default_rng(11)
    publish_artifact(registry, artifact_with_samples(rng))
    broken = _damaged(registry)
    gpu_machine["remeasure"] = StandInRemeasurer(rng, [1.0])
    code, out, err = cli("gate", "--processes", "5", "--registry", str(registry))
    assert code == 2 and f"PASS {KEY}" in out, out + err
    assert f"warning: quarantined {broken}" in err
    assert err.splitlines()[-1].startswith("error: 1 artifact file(s) could not be read")
    gpu_machine["remeasure"] = StandInRemeasurer(rng, [1.1, 1.1])
    code, out, err = cli("gate", "--processes", "5", "--registry", str(registry))
    assert code == 2 and f"REGRESSED {KEY}" in out
    assert err.splitlines()[-1].endswith("; gate failed: 1 REGRESSED")


def test_gate_build_only_fails_over_an_unreadable_artifact(
    cli: Run, registry: Path, gpu_machine: dict
) -> None:
    class Builder:  # builds nothing, refuses nothing: every readable artifact prebuilds
        def build_ahead(self, *_: object) -> None:
            pass

        def refusals(self, *_: object) -> list[str]:
            return []

        def build_members(self, *_: object) -> list[object]:
            return []

    publish_artifact(registry, make_artifact())
    broken = _damaged(registry)
    gpu_machine["remeasure"] = Builder()
    code, out, err = cli("gate", "--build-only", "--registry", str(registry))
    assert code == 2 and KEY in out, out + err
    assert f"warning: quarantined {broken}" in err
    one_line_error(err.splitlines()[-1], f"could not be read ({broken}")


def test_gate_for_programs(cli: Run, registry: Path, gpu_machine: dict) -> None:
    """``--format json``: one document on stdout with each verdict and its evidence, the
    progress lines on stderr before the one error line; ``--format csv``: a row each."""
    import csv
    import io

    rng = np.random.default_rng(11)
    publish_artifact(registry, artifact_with_samples(rng))
    gpu_machine["remeasure"] = StandInRemeasurer(rng, [1.1, 1.1])
    code, out, err = cli(
        "gate", "--processes", "5", "--registry", str(registry), "--format", "json"
    )
    assert code == 1, out + err
    data = json.loads(out)
    verdict = data["artifacts"][0]
    assert verdict["key"] == KEY and verdict["verdict"] == "REGRESSED"
    evidence = verdict["candidate"]["evidence"]
    assert evidence["change"] > 0.05 and evidence["processes"] == [5, 5]
    assert data["counts"] == {"REGRESSED": 1}
    assert err.splitlines() == [f"gate [1/1] REGRESSED {KEY}", "error: gate failed: 1 REGRESSED"]
    gpu_machine["remeasure"] = StandInRemeasurer(rng, [1.0])
    code, out, err = cli("gate", "--registry", str(registry), "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and [(r["key"], r["verdict"]) for r in rows] == [(KEY, "PASS")], err
    assert float(rows[0]["old_median_ms"]) > 0 and rows[0]["canary_verdict"] == "PASS"


def test_gate_against_the_vendor_call(cli: Run, registry: Path, gpu_machine: dict) -> None:
    """``--vendor``: a pinned build that holds its time but is slower than the vendor call
    fails, with the comparison in the report and in its row."""
    import csv
    import io

    rng = np.random.default_rng(17)
    publish_artifact(registry, artifact_with_samples(rng))
    gpu_machine["remeasure"] = StandInRemeasurer(rng, [1.0, 1.0], vendor=[0.9, 0.9])
    code, out, err = cli("gate", "--processes", "5", "--registry", str(registry), "--vendor")
    assert code == 1 and gpu_machine["vendor asked"] is True, out + err
    assert f"REGRESSED {KEY}: slower than cuBLAS: " in out
    assert "  vs cuBLAS (vendor -> pinned): " in out
    gpu_machine["remeasure"] = StandInRemeasurer(rng, [1.0], vendor=[1.2])
    code, out, err = cli("gate", "--registry", str(registry), "--vendor", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and rows[0]["vendor_verdict"] == "IMPROVED", out + err
    assert float(rows[0]["vendor_change"]) < -0.1
    gpu_machine["remeasure"] = StandInRemeasurer(rng, [1.0])
    code, out, err = cli("gate", "--registry", str(registry))
    assert code == 0 and gpu_machine["vendor asked"] is False and "vs cuBLAS" not in out


def test_gate_takes_a_pattern(cli: Run, registry: Path, gpu_machine: dict) -> None:
    rng = np.random.default_rng(13)
    publish_artifact(registry, artifact_with_samples(rng))
    publish_artifact(registry, make_artifact(problem="other"))  # not measurable: not chosen
    gpu_machine["remeasure"] = StandInRemeasurer(rng, [1.0])
    code, out, err = cli("gate", "gemm/sq*", "--registry", str(registry))
    assert code == 0, out + err
    assert out.startswith(f"gate [1/1] PASS {KEY}\n")
    code, _, err = cli("gate", "gemm/*-bf16/*", "--registry", str(registry))
    assert code == 2
    one_line_error(err, "no artifact matches 'gemm/*-bf16/*'")


def test_gate_measures_only_this_gpus_artifacts(
    cli: Run, registry: Path, gpu_machine: dict
) -> None:
    """An H200 artifact's timings say nothing about this H100: left out, and said so; a
    selection of only other GPUs' artifacts is one line, exit 2, not an empty pass."""
    rng = np.random.default_rng(14)
    publish_artifact(registry, artifact_with_samples(rng))
    publish_artifact(registry, make_artifact(device_class="sm90-nvidia-h200"))
    gpu_machine["remeasure"] = StandInRemeasurer(rng, [1.0])
    code, out, err = cli("gate", "--registry", str(registry))
    assert code == 0, out + err
    assert out.startswith("gate: left out: 1 artifact(s) of other GPUs (sm90-nvidia-h200)\n")
    assert f"gate [1/1] PASS {KEY}\n" in out and "sm90-nvidia-h200:" not in out
    code, out, err = cli("gate", "gemm/sq4096/sm90-nvidia-h200", "--registry", str(registry))
    assert code == 2 and out == ""
    one_line_error(err, "no selected artifact was measured on this GPU (sm90-nvidia-h100-80gb")


def test_gate_stale_outranks_regressed(cli: Run, registry: Path, gpu_machine: dict) -> None:
    rng = np.random.default_rng(12)
    publish_artifact(registry, artifact_with_samples(rng))
    stand_in = StandInRemeasurer(rng, [1.2])
    gpu_machine["remeasure"] = stand_in
    gpu_machine["fingerprint"] = {**FINGERPRINT, "spec_problem_sha256": "f" * 64}
    code, out, _ = cli("gate", "--registry", str(registry))
    assert code == 1 and f"\nSTALE {KEY}: stale: spec_problem_sha256 changed" in out
    assert stand_in.calls == []


def test_gate_of_a_member_whose_controls_file_the_toolchain_refuses_is_stale(
    cli: Run, registry: Path, gpu_machine: dict
) -> None:
    """Built with ptxas 13.3 (split), gated where only ptxas 13.0 is: it cannot be rebuilt
    as recorded, so STALE saying why and how to fix it, and nothing is measured."""
    from ctune.controls.store import ControlsStore, StoreChain

    rng = np.random.default_rng(15)
    split = {"ptxas_version": "13.3.73 (split: PTX from nvcc 13.0.88)"}
    a = artifact_with_samples(rng)
    a = with_controls(dataclasses.replace(a, fingerprint={**a.fingerprint, **split}), DIGEST)
    store = ControlsStore(registry.parent / "cache" / "controls")
    assert store.put(CONTROLS_BYTES) == DIGEST
    publish_artifact(registry, a, controls=StoreChain.of(store.root))
    stand_in = StandInRemeasurer(rng, [1.0])
    gpu_machine["remeasure"] = stand_in
    code, out, err = cli("gate", "--registry", str(registry))
    assert code == 1, out + err
    assert f"STALE {KEY}: member {a.pinned}: ptxas 13.0.88 does not take advanced-controls" in out
    assert "install ctune[cuda13.3]" in out and stand_in.calls == []


def test_gate_needs_a_gpu_and_three_processes(cli: Run, registry: Path, machine: dict) -> None:
    publish_artifact(registry, make_artifact())
    code, _, err = cli("gate", "--registry", str(registry))
    assert code == 3
    one_line_error(err, "needs a GPU")
    code, _, err = cli("gate", "--processes", "2", "--registry", str(registry))
    assert code == 2
    one_line_error(err, "k >= 3")


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("--floor", "nan", "a finite fraction >= 0 and < 1"),
        ("--floor", "-1", "a finite fraction >= 0 and < 1"),
        ("--alpha", "2", "a probability > 0 and < 1"),
        ("--alpha", "0", "a probability > 0 and < 1"),
        ("--cv-factor", "inf", "a finite number >= 0"),
        ("--max-threshold", "0", "a finite fraction > 0"),
    ],
)
def test_gate_refuses_a_threshold_out_of_range_before_anything(
    cli: Run, registry: Path, gpu_machine: dict, option: str, value: str, expected: str
) -> None:
    """On a GPU a NaN floor would call a 0.3% change REGRESSED; without one (or with
    --build-only) the value must not pass unread: one line, exit 2, nothing measured."""
    publish_artifact(registry, make_artifact())
    stand_in = StandInRemeasurer(np.random.default_rng(0), [1.0])
    gpu_machine["remeasure"] = stand_in
    for extra in ((), ("--build-only",)):
        code, out, err = cli("gate", option, value, *extra, "--registry", str(registry))
        assert code == 2 and out == "", out + err
        one_line_error(err, f"{option} {value}: expected {expected}")
    assert stand_in.calls == []


def test_gate_refuses_a_floor_at_the_largest_threshold(cli: Run, registry: Path) -> None:
    """Each in range, together they leave every verdict INCONCLUSIVE: said before anything."""
    publish_artifact(registry, make_artifact())
    argv = ("gate", "--floor", "0.2", "--max-threshold", "0.1", "--build-only")
    code, _, err = cli(*argv, "--registry", str(registry))
    assert code == 2
    one_line_error(err, "floor=0.2 is not below max_threshold=0.1")


def test_registry_help_documents_key_syntax(cli: Run) -> None:
    code, out, _ = cli("registry", "--help")
    assert code == 0
    assert "<kernel>/<problem>/<device-class>[@<member>]" in out
    assert json.dumps  # keep the import used in one place

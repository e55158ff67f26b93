"""An artifact with a controls file against the real nvcc: its export builds as it is,
``ctune check`` rebuilds it with the file, ``ctune gate --build-only`` builds it through the
split path, and a ptxas that refuses the file makes it STALE saying so.

The system ptxas (13.0) refuses any controls file ("not in expected format"), so a
stand-in file proves the exported flag reaches ptxas. The parts that build with a file need
a ptxas 13.3 or later (``CTUNE_TEST_PTXAS``, or the nvidia-cuda-nvcc wheel's) and a real
controls file (``CTUNE_TEST_ACF``: a CompileIQ output, a file or a folder of them; else the
one the registry ships); they skip, saying which is missing, where there is none.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from ctune import identity_probe
from ctune.compile.command import split_genes, tuned_flags
from ctune.compile.deps import source_closure
from ctune.compile.find_toolchains import wheel_nvccs
from ctune.compile.nvcc import NvccCompiler
from ctune.compile.sass import sass_digest
from ctune.compile.select_toolchain import toolchain_for
from ctune.compile.toolchain import Toolchain, controls_release, probe_toolchain, version_in
from ctune.config import Settings
from ctune.controls.store import ControlsStore, StoreChain
from ctune.evidence import identity
from ctune.registry.schema import Artifact, FrontMember
from ctune.registry.service import publish_artifact
from ctune.spec import load_spec
from ctune.testing.toolchains import new_ptxas, ptxas_version, real_controls_files

pytestmark = pytest.mark.nvcc

ROOT = Path(__file__).parents[2]
KERNELS = ROOT / "tests" / "data" / "kernels"
STANDIN = b"\x17 not a real controls file \x00" * 40


def _support() -> ModuleType:
    path = ROOT / "tests" / "unit" / "registry" / "registry_support.py"
    if "registry_support" not in sys.modules:
        spec = importlib.util.spec_from_file_location("registry_support", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["registry_support"] = module
        spec.loader.exec_module(module)
    return sys.modules["registry_support"]


def _real_controls() -> bytes | None:
    files = real_controls_files()
    return files[0].read_bytes() if files else None


NEW_PTXAS, NO_NEW_PTXAS = new_ptxas()
REAL_CONTROLS = _real_controls()
needs_new_ptxas = pytest.mark.skipif(NEW_PTXAS is None, reason=NO_NEW_PTXAS)
needs_13_3 = pytest.mark.skipif(
    NEW_PTXAS is None or REAL_CONTROLS is None,
    reason=NO_NEW_PTXAS or "no real controls file: set CTUNE_TEST_ACF (a CompileIQ output)",
)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A git project with a registry, a copy of the saxpy kernel and a cache."""
    support = _support()
    for name, value in support.GIT_IDENTITY.items():
        monkeypatch.setenv(name, value)
    for name in ("CTUNE_NVCC", "CTUNE_PTXAS", "CTUNE_REGISTRY", "CTUNE_ARCH"):
        monkeypatch.delenv(name, raising=False)
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    for name in ("saxpy.cu", "saxpy.yaml", "saxpy_ref.py"):
        shutil.copy(KERNELS / name, kernels / name)
    repo = support.init_repo(tmp_path / "project")
    return {
        "kernels": kernels,
        "registry": repo / "registry",
        "cache": tmp_path / "cache",
        "tmp": tmp_path,
    }


def _split(cache: Path) -> Toolchain:
    assert NEW_PTXAS is not None
    return toolchain_for(Settings(ptxas=str(NEW_PTXAS), cache_dir=cache))


def _artifact(p: dict[str, Path], toolchain: Toolchain, digest: str | None) -> Artifact:
    """A saxpy artifact as a search with ``--acf ptxas`` records it, built by ``toolchain``:
    the default build as the baseline, the pinned member with the controls file ``digest``
    (none: without, the file added to its record afterwards by the caller)."""
    support = _support()
    chain = StoreChain.of(p["cache"] / "controls")
    spec = load_spec(p["kernels"] / "saxpy.yaml", toolchain.help_text).with_acf(("ptxas",))
    problem = spec.problem("n1m")
    template = support.make_artifact(kernel="saxpy", problem="n1m")
    members = []
    genes = ({}, {"BLOCK": 128, **({"acf_ptxas": digest} if digest else {})})
    with NvccCompiler(spec, toolchain, p["cache"], controls=chain) as compiler:
        for extra, like in zip(genes, (template.baseline, template.front[0]), strict=True):
            cand = spec.candidate({**spec.space.default_values(), **extra})
            build = compiler.build(cand, problem)
            assert build.outcome.is_ok, build.log_tail
            members.append(
                FrontMember(
                    candidate=cand,
                    key=cand.key(),
                    values=like.values,
                    summary=like.summary,
                    samples_ms=like.samples_ms,
                    process_medians_ms=like.process_medians_ms,
                    sass_sha256=build.sass_sha256 or "",
                    nvcc_flags=tuple(tuned_flags(build.argv)),
                    defines=split_genes(spec.space.genes, cand.as_dict())[0],
                    launch=spec.launch_geometry(cand, problem),
                )
            )
    gpu = {k: v for k, v in support.FINGERPRINT.items() if identity.FIELDS[k][1] == "gpu"}
    here = identity_probe.current_fingerprint(spec, False, problem="n1m", nvcc=toolchain.nvcc)
    return dataclasses.replace(
        template,
        fingerprint={**gpu, **here},
        baseline=members[0],
        front=(members[1],),
        pinned=members[1].key,
        inputs={"closure": source_closure(spec, toolchain.nvcc)},
    )


def _publish(p: dict[str, Path], a: Artifact) -> None:
    publish_artifact(p["registry"], a, controls=StoreChain.of(p["cache"] / "controls"))


def _ctune(p: dict[str, Path], *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "ctune", *args]
    argv += ["--kernels", str(p["kernels"]), "--registry", str(p["registry"])]
    environ = {**os.environ, "CTUNE_CACHE_DIR": str(p["cache"]), **env}
    return subprocess.run(
        argv, capture_output=True, text=True, cwd=p["tmp"], env=environ, check=False
    )


def _export_and_build(
    p: dict[str, Path], nvcc: str
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Export the pinned member's flags into a folder, then build saxpy there with exactly
    that line, as a user's Makefile would: (nvcc's run, the cubin)."""
    out = p["tmp"] / "export"
    out.mkdir(exist_ok=True)
    key = "saxpy/n1m/sm90-nvidia-h100-80gb-hbm3"
    command = [sys.executable, "-m", "ctune", "registry", "export", key, "--out", str(out)]
    done = subprocess.run(
        [*command, "--registry", str(p["registry"])],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    line = (out / "saxpy-n1m.flags").read_text()
    assert "-Xptxas --apply-controls=saxpy-n1m.acf" in line
    cubin = out / "saxpy.cubin"
    argv = [nvcc, "--generate-code=arch=compute_90,code=sm_90", "-cubin", *shlex.split(line)]
    argv += ["-o", str(cubin), str(p["kernels"] / "saxpy.cu")]
    return subprocess.run(argv, capture_output=True, text=True, cwd=out, check=False), cubin


def _with_standin_file(p: dict[str, Path], a: Artifact, split_record: bool) -> Artifact:
    """``a`` whose pinned member applies a stand-in controls file (recorded as built by
    the split toolchain nvcc 13.0 + ptxas 13.3 when ``split_record``)."""
    support = _support()
    digest = ControlsStore(p["cache"] / "controls").put(STANDIN)
    a = support.with_controls(a, digest)
    if split_record:
        nvcc = version_in(a.fingerprint["nvcc_version"])
        label = f"13.3.73 (split: PTX from nvcc {nvcc})"
        a = dataclasses.replace(a, fingerprint={**a.fingerprint, "ptxas_version": label})
    return a


def test_the_exported_flags_reach_ptxas(project: dict[str, Path]) -> None:
    """The system ptxas refuses any controls file: the build fails in ptxas, naming the
    file the export copied, so the flag reached it as exported."""
    plain = probe_toolchain("nvcc")
    if controls_release(plain.ptxas_version):
        pytest.skip(f"the system ptxas {plain.ptxas_version} takes controls files")
    _publish(project, _with_standin_file(project, _artifact(project, plain, None), False))
    done, cubin = _export_and_build(project, plain.nvcc)
    assert done.returncode != 0 and not cubin.exists()
    assert "saxpy-n1m.acf' not in expected format" in done.stderr, done.stderr


def test_check_with_a_ptxas_that_refuses_the_file_is_stale(project: dict[str, Path]) -> None:
    plain = probe_toolchain("nvcc")
    if controls_release(plain.ptxas_version):
        pytest.skip(f"the system ptxas {plain.ptxas_version} takes controls files")
    a = _with_standin_file(project, _artifact(project, plain, None), True)
    _publish(project, a)
    # the settings name the system nvcc: checked with it, never another toolchain found here
    done = _ctune(project, "check", "--no-gpu", "--nvcc", plain.nvcc)
    assert done.returncode == 1, done.stdout + done.stderr
    nvcc = plain.nvcc_version
    assert (
        f"STALE saxpy/n1m/sm90-nvidia-h100-80gb-hbm3 (checked with the selected toolchain "
        f"nvcc {nvcc} / ptxas {plain.ptxas_version}; its recorded nvcc {nvcc} / ptxas "
        "13.3.73 (split) is not used: the settings chose another toolchain)"
    ) in done.stdout
    assert (
        f"cannot rebuild: member {a.pinned}: ptxas {plain.ptxas_version} does not take "
        "advanced-controls files (needs 13.3+); check with --ptxas PATH (a ptxas 13.3 or "
        "later) or install ctune[cuda13.3]"
    ) in done.stdout
    done = _ctune(project, "gate", "--build-only", "--nvcc", plain.nvcc)
    assert done.returncode == 1
    assert f"  member {a.pinned}: ptxas {plain.ptxas_version} does not take" in done.stdout


@needs_new_ptxas
def test_a_controls_file_no_store_holds_makes_the_artifact_stale(
    project: dict[str, Path],
) -> None:
    """Checked with its recorded (split) toolchain, but its file is gone from the registry
    and the cache: the member cannot be rendered nor built, and the check says so."""
    split = _split(project["cache"])
    plain = probe_toolchain("nvcc")
    a = _with_standin_file(project, _artifact(project, plain, None), False)
    a = dataclasses.replace(
        a, fingerprint={**a.fingerprint, **identity_probe.probe_toolchain(split.nvcc)}
    )
    _publish(project, a)
    digest = a.front[0].candidate.as_dict()["acf_ptxas"]
    (project["registry"] / "controls" / f"{digest}.acf").unlink()
    shutil.rmtree(project["cache"] / "controls")
    done = _ctune(project, "check", "--no-gpu", "--ptxas", str(NEW_PTXAS))
    assert done.returncode == 1, done.stdout + done.stderr
    key = "saxpy/n1m/sm90-nvidia-h100-80gb-hbm3"
    assert f"STALE {key} (checked with its recorded toolchain {split.describe()})" in done.stdout
    assert (
        f"rebuilt: member {a.pinned} cannot be built: saxpy: acf_ptxas: no controls file {digest}"
        in done.stdout
    )


@needs_13_3
def test_the_exported_flags_build_through_the_split_path(project: dict[str, Path]) -> None:
    split = _split(project["cache"])
    assert REAL_CONTROLS is not None
    digest = ControlsStore(project["cache"] / "controls").put(REAL_CONTROLS)
    a = _artifact(project, split, digest)
    _publish(project, a)
    assert (project["registry"] / "controls" / f"{digest}.acf").read_bytes() == REAL_CONTROLS
    done, cubin = _export_and_build(project, split.nvcc)
    assert done.returncode == 0, done.stderr
    assert sass_digest(cubin.read_bytes()) == a.front[0].sass_sha256  # what ctune built


@needs_13_3
def test_check_and_gate_rebuild_with_the_file(project: dict[str, Path]) -> None:
    split = _split(project["cache"])
    assert REAL_CONTROLS is not None and NEW_PTXAS is not None
    digest = ControlsStore(project["cache"] / "controls").put(REAL_CONTROLS)
    a = _artifact(project, split, digest)
    _publish(project, a)
    shutil.rmtree(project["cache"] / "controls")  # from here on only the registry has it
    key = "saxpy/n1m/sm90-nvidia-h100-80gb-hbm3"
    recorded = f"checked with its recorded toolchain {split.describe()}"
    done = _ctune(project, "check", "--no-gpu", "-v", "--ptxas", str(NEW_PTXAS))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"fresh {key} ({recorded})" in done.stdout
    # a comment: rebuilt with the file (without it the SASS would differ), identical
    source = project["kernels"] / "saxpy.cu"
    source.write_text(source.read_text() + "\n// edited\n")
    shutil.rmtree(project["cache"] / "builds")
    done = _ctune(project, "check", "--no-gpu", "-v", "--ptxas", str(NEW_PTXAS))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"WARN {key} ({recorded})" in done.stdout
    assert "rebuilt 2 member(s): SASS identical" in done.stdout
    # the gate's builds, on a CPU machine, through the split path
    done = _ctune(project, "gate", "--build-only", CTUNE_PTXAS=str(NEW_PTXAS))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"build [1/1] ok {key}: 2 build(s) in the cache, SASS as recorded" in done.stdout


@needs_13_3
def test_check_finds_the_recorded_split_toolchain_on_this_machine(
    project: dict[str, Path],
) -> None:
    """With the default choice of toolchain, a ptxas of the recorded version that this
    machine has (the nvidia-cuda-nvcc wheel's) is made into the recorded split."""
    wheel = [n.parent / "ptxas" for n in wheel_nvccs()]
    wheel = [w for w in wheel if controls_release(ptxas_version(w))]
    if not wheel:
        pytest.skip("no nvidia-cuda-nvcc 13.3 wheel installed: no ptxas 13.3 to find")
    split = toolchain_for(Settings(ptxas=str(wheel[0]), cache_dir=project["cache"]))
    assert REAL_CONTROLS is not None
    digest = ControlsStore(project["cache"] / "controls").put(REAL_CONTROLS)
    _publish(project, _artifact(project, split, digest))
    done = _ctune(project, "check", "--no-gpu", "-v")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"(checked with its recorded toolchain {split.describe()})" in done.stdout


@needs_new_ptxas
def test_vendor_rounds_builds_a_shipped_pin_with_its_file_and_without(
    bench_module, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The registry's hand attention pins a controls file its spec does not name: the
    bench's case takes the gene from the artifact (as ``ctune check`` does) and builds the
    pin with the file and, through ``--change acf_ptxas=none``, without it."""
    monkeypatch.delenv("CTUNE_NVCC", raising=False)
    bench = bench_module("vendor_rounds")
    cfg = Settings(ptxas=str(NEW_PTXAS), cache_dir=tmp_path / "cache")
    case = bench._prepare("hand_attention:prefill-s2048-d128", None, cfg, ["acf_ptxas=none"])
    assert isinstance(case, bench._Case), case
    pinned, plain = case.timed
    assert pinned.as_dict()["acf_ptxas"] != "none" and plain.as_dict()["acf_ptxas"] == "none"
    builds = [case.builds[c.key()] for c in case.timed]
    assert all(b.outcome.is_ok for b in builds)
    assert builds[0].sass_sha256 != builds[1].sass_sha256

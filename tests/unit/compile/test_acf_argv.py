"""acf genes on nvcc's command line: the stored file's path, a portable key, registry flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctune.compile.command import tuned_flags
from ctune.compile.nvcc import NvccCompiler
from ctune.compile.toolchain import Toolchain
from ctune.controls.store import ControlsError, ControlsStore, StoreChain
from ctune.quoting import CommandLineError, check_argv
from ctune.records import sha256_hex
from ctune.registry.schema import _SAFE_FLAG
from ctune.spec import KernelSpec, load_spec

DATA = Path(__file__).parents[2] / "data" / "kernels"
FAKE_TOOLCHAIN = Toolchain("/bin/nvcc", "13.3.73", "13.3.73", "release 13.3, V13.3.73", "")
OUT = Path("/c/kernel.cubin")
CONTROLS = b"\x17 controls \x00" * 100


def _spec() -> KernelSpec:
    return load_spec(DATA / "saxpy.yaml").with_acf(("ptxas", "nvcc"))


def _compiler(spec: KernelSpec, root: Path, monkeypatch: pytest.MonkeyPatch) -> NvccCompiler:
    chain = StoreChain.of(root / "cache" / "controls", root / "registry" / "controls")
    compiler = NvccCompiler(spec, FAKE_TOOLCHAIN, root / "cache", controls=chain)
    monkeypatch.setattr(compiler, "closure_digest", lambda problem: "c" * 64)  # no nvcc -M
    return compiler


def _argv(compiler: NvccCompiler, **genes: str) -> list[str]:
    spec = compiler.spec
    values = {**spec.space.default_values(), **genes}
    return compiler.argv(spec.candidate(values), spec.problem(), OUT)


def test_each_compiler_s_file_renders_as_its_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compiler = _compiler(_spec(), tmp_path, monkeypatch)
    digest = ControlsStore(tmp_path / "registry" / "controls").put(CONTROLS)
    stored = tmp_path / "registry" / "controls" / f"{digest}.acf"
    plain = _argv(compiler)
    ptxas = _argv(compiler, acf_ptxas=digest)
    nvcc = _argv(compiler, acf_nvcc=digest)
    assert not any("apply-controls" in item for item in plain)
    assert [a for a in ptxas if a not in plain] == [f"--apply-controls={stored}"]
    assert ptxas[ptxas.index(f"--apply-controls={stored}") - 1] == "-Xptxas"
    i = nvcc.index(f"--apply-controls={stored}")
    assert nvcc[i - 1] != "-Xptxas" and len(nvcc) == len(plain) + 1
    check_argv(ptxas, "nvcc")  # a plain store path is what nvcc may pass bare
    check_argv(nvcc, "nvcc")


def test_a_store_under_a_path_with_a_space_is_refused_before_nvcc_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nvcc hands a ptxas option to its shell bare: a space would split the path."""
    compiler = _compiler(_spec(), tmp_path / "my cache", monkeypatch)
    digest = compiler.controls.first.put(CONTROLS)
    with pytest.raises(CommandLineError, match="contains ' '") as caught:
        check_argv(_argv(compiler, acf_ptxas=digest), "nvcc for saxpy")
    assert "\n" not in str(caught.value)


def test_the_key_is_portable_and_keyed_by_the_file_s_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = _compiler(_spec(), tmp_path / "cpu", monkeypatch)
    there = _compiler(_spec(), tmp_path / "gpu", monkeypatch)
    digest = here.controls.first.put(CONTROLS)
    ControlsStore(tmp_path / "gpu" / "registry" / "controls").put(CONTROLS)
    problem = here.spec.problem()
    key_here = here.build_key(_argv(here, acf_ptxas=digest), problem)
    assert key_here == there.build_key(_argv(there, acf_ptxas=digest), problem)
    assert key_here != here.build_key(_argv(here), problem)
    other = here.controls.first.put(CONTROLS + b"!")
    assert key_here != here.build_key(_argv(here, acf_ptxas=other), problem)
    assert f"<controls>/{digest}.acf" in here._portable(
        f"--apply-controls={here.controls.path(digest)}"
    )


def test_a_digest_no_store_holds_is_one_line_naming_it_and_the_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compiler = _compiler(_spec(), tmp_path, monkeypatch)
    missing = sha256_hex(b"never stored")
    with pytest.raises(ControlsError) as caught:
        _argv(compiler, acf_ptxas=missing)
    message = str(caught.value)
    assert message.startswith("saxpy: acf_ptxas: no controls file " + missing)
    assert str(tmp_path / "cache" / "controls") in message
    assert str(tmp_path / "registry" / "controls") in message
    assert "\n" not in message


def test_the_spec_s_own_file_is_stored_when_first_built_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "kernel"
    folder.mkdir()
    for name in ("saxpy.cu", "saxpy.yaml", "saxpy_ref.py"):
        (folder / name).write_bytes((DATA / name).read_bytes())
    (folder / "tuned.acf").write_bytes(CONTROLS)
    with (folder / "saxpy.yaml").open("a") as spec_file:
        spec_file.write("acf: [ptxas]\nacf_files: {ptxas: [tuned.acf]}\n")
    spec = load_spec(folder / "saxpy.yaml")
    digest = sha256_hex(CONTROLS)
    assert spec.space.gene("acf_ptxas").suggest == (digest,)
    compiler = _compiler(spec, tmp_path, monkeypatch)
    argv = _argv(compiler, acf_ptxas=digest)
    assert f"--apply-controls={tmp_path / 'cache' / 'controls' / digest}.acf" in argv


def test_an_artifact_names_the_file_as_the_registry_holds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compiler = _compiler(_spec(), tmp_path, monkeypatch)
    digest = compiler.controls.first.put(CONTROLS)
    flags = tuned_flags(_argv(compiler, acf_ptxas=digest))
    assert flags[-2:] == ["-Xptxas", f"--apply-controls=controls/{digest}.acf"]
    assert all(_SAFE_FLAG.match(f) for f in flags)  # the registry schema takes them as they are
    assert tuned_flags(_argv(compiler)) == flags[:-2]

"""No gene value runs anything, whichever way it comes in (a spec, ``--set``, an artifact
edited by hand, a journal line), in every command that builds; the real nvcc, no GPU.

nvcc runs its steps through /bin/sh (docs/security.md). The first test shows that the two
payloads used throughout really run a command when nvcc is given them; every other test
hands them to a ctune command and asserts that the canary file they would create is not
there afterwards, and that the command ended with its documented exit code and one
``error:`` line. A harmless value with ``<``, ``>``, ``;``, spaces and commas compiles as
written."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ctune.compile.nvcc import NvccCompiler
from ctune.compile.toolchain import probe_toolchain
from ctune.errors import EXIT_GATE_FAILED, EXIT_OK, EXIT_USER_ERROR, SpecError, UserError
from ctune.quoting import CommandLineError
from ctune.records import Candidate, canonical_json
from ctune.spec import load_spec

pytestmark = pytest.mark.nvcc

DATA = Path(__file__).parents[1] / "data" / "kernels"
SHAPE = "cutlass::gemm::GemmShape<128, 128, 64>"
SMALL = "cutlass::gemm::GemmShape<64, 64, 32>"
#: what the values must arrive as: split at a comma or cut at ';', these do not compile
CHECKS = """
namespace cutlass { namespace gemm {
template <int M, int N, int K> struct GemmShape { static constexpr int kM = M, kN = N, kK = K; };
} }
constexpr int kShape = SHAPE::kM * 1000000 + SHAPE::kN * 1000 + SHAPE::kK;
static_assert(kShape == 128128064 || kShape == 64064032, "SHAPE reached nvcc whole");
struct Members { MEMBERS };
static_assert(sizeof(Members) == 2 * sizeof(int), "MEMBERS reached nvcc whole");
"""
GENES = f"""  SHAPE: {{values: ["{SHAPE}", "{SMALL}"], family: define}}
  MEMBERS: {{values: ["int a; int b;", "int c; int d;"], family: define}}
"""
Run = Callable[..., tuple[int, str, str]]


def scale(xp: Any, inputs: Any, dims: Any) -> dict[str, Any]:
    return {"y": 2.0 * inputs["x"]}


def define_payload(canary: Path) -> str:
    """Runs where nvcc double-quotes a -D value (``$`` stays active there)."""
    return f"T<1> $(touch {canary})"


def flag_payload(canary: Path) -> str:
    """Runs where nvcc writes an -Xptxas value bare (``;`` ends the ptxas command)."""
    return f"ca;touch {canary};:"


@pytest.fixture
def kernels(tmp_path: Path) -> Path:
    """``shapes``: the test saxpy, plus two define genes whose values hold the characters
    a shell would split or a comma-splitting nvcc would cut."""
    folder = tmp_path / "kernels"
    folder.mkdir()
    shutil.copy(DATA / "saxpy_ref.py", folder / "saxpy_ref.py")
    (folder / "shapes.cu").write_text(CHECKS + (DATA / "saxpy.cu").read_text())
    spec = (
        (DATA / "saxpy.yaml").read_text().replace("name: saxpy", "name: shapes\nsource: shapes.cu")
    )
    (folder / "shapes.yaml").write_text(spec.replace("genes:\n", "genes:\n" + GENES))
    return folder


@pytest.fixture
def canary(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "CANARY"
    yield path
    assert not path.exists(), "a gene value ran a command"


@pytest.fixture
def ctune(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Run:
    """``ctune ...`` in this process: (exit code, stdout, stderr)."""
    from ctune.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CTUNE_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("CTUNE_DEBUG", "CTUNE_REGISTRY", "CTUNE_NVCC", "CTUNE_ARCH", "CTUNE_JOBS"):
        monkeypatch.delenv(name, raising=False)

    def run(*argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = EXIT_OK
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(list(argv))
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
        return code, out.getvalue(), err.getvalue()

    return run


def one_error_line(err: str, *needles: str) -> str:
    """The error contract: one ``error:`` line (progress lines before it are fine), last."""
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and err.rstrip().endswith(errors[0]), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


def compiler_for(kernels: Path, cache: Path) -> tuple[Any, NvccCompiler]:
    toolchain = probe_toolchain()
    spec = load_spec(kernels / "shapes.yaml", toolchain.help_text)
    return spec, NvccCompiler(spec, toolchain, cache)


# --- the payloads are live, the boundary stops them -------------------------------------


def test_nvcc_itself_runs_both_payloads(kernels: Path, tmp_path: Path) -> None:
    """Not through ctune: nvcc given the argv ctune would build runs them. This is what
    every other test here guards against (and why they could fail)."""
    spec, compiler = compiler_for(kernels, tmp_path / "cache")
    problem = spec.problem()
    for name, make, gene in (("define", define_payload, "SHAPE"), ("flag", flag_payload, "dlcm")):
        ran = tmp_path / f"RAN-{name}"
        values = {**spec.space.default_values(), gene: make(ran)}
        argv = compiler.argv(Candidate.of("shapes", values), problem, tmp_path / "k.cubin")
        subprocess.run(argv, capture_output=True, check=False, timeout=300)
        assert ran.exists(), f"the {name} payload did not run: the tests below prove nothing"


def test_the_boundary_refuses_before_nvcc_runs(kernels: Path, tmp_path: Path, canary: Path) -> None:
    """A candidate built directly (the API, a path that skipped every check): refused."""
    from ctune.compile.deps import source_closure

    spec, compiler = compiler_for(kernels, tmp_path / "cache")
    problem = spec.problem()
    for gene, payload in (("SHAPE", define_payload(canary)), ("dlcm", flag_payload(canary))):
        values = {**spec.space.default_values(), gene: payload}
        with pytest.raises(CommandLineError, match="nothing was run"):
            compiler.build(Candidate.of("shapes", values), problem)
    with pytest.raises(CommandLineError, match="nvcc -M"):
        source_closure(spec, defines={"SHAPE": define_payload(canary)})
    left = [p for p in (tmp_path / "cache" / "builds").iterdir() if p.name.startswith(".")]
    assert left == []  # no half-made build folder


def test_harmless_values_compile_as_written(ctune: Run, kernels: Path, canary: Path) -> None:
    source = str(kernels / "shapes.cu")
    code, out, err = ctune("compile", source, "--json")
    assert code == EXIT_OK, err
    assert json.loads(out)["build"]["outcome"] == "ok"
    code, out, err = ctune(
        "compile", source, "--set", f"SHAPE={SMALL}", "-s", "MEMBERS=int c; int d;"
    )
    assert code == EXIT_OK, err
    assert "-DSHAPE=cutlass::gemm::GemmShape<64\\, 64\\, 32>" in out  # nvcc's comma escape


# --- a spec, --set, the Python API -------------------------------------------------------


def test_a_spec_value_that_would_run_a_command_is_refused_when_it_loads(
    ctune: Run, kernels: Path, canary: Path
) -> None:
    spec = kernels / "shapes.yaml"
    spec.write_text(spec.read_text().replace(SMALL, define_payload(canary)))
    code, _, err = ctune("compile", str(kernels / "shapes.cu"))
    assert code == EXIT_USER_ERROR
    one_error_line(err, str(spec), "genes.SHAPE.values", "contains '$'")


@pytest.mark.parametrize("command", ["compile", "bench"])
@pytest.mark.parametrize(("gene", "make"), [("SHAPE", define_payload), ("dlcm", flag_payload)])
def test_a_set_value_is_one_of_the_spec_s_own(
    ctune: Run, kernels: Path, canary: Path, command: str, gene: str, make: Callable
) -> None:
    code, _, err = ctune(command, str(kernels / "shapes.cu"), "--set", f"{gene}={make(canary)}")
    assert code == EXIT_USER_ERROR
    one_error_line(err, f"--set {gene}=", f"not a value of {gene}")


def test_tune_refuses_a_parameter_value_that_would_run_a_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, canary: Path
) -> None:
    import ctune as api

    monkeypatch.chdir(tmp_path)
    x = np.ones(64, dtype=np.float32)
    with pytest.raises(SpecError, match=r"genes\.SHAPE\.values: .* contains '\$'") as caught:
        api.tune(
            "scale<float>",
            (DATA / "api_scale.cu").read_text(),
            64,
            [np.zeros_like(x), x, np.float32(2.0), np.int32(64)],
            {"block_size_x": [64], "SHAPE": [define_payload(canary)]},
            reference=scale,
            budget=2,
            workdir=tmp_path / "w",
        )
    assert caught.value.exit_code == EXIT_USER_ERROR


# --- an artifact edited by hand, its digest recomputed -----------------------------------


def _built_artifact(kernels: Path, cache: Path) -> Any:
    """A shapes artifact as a search records it: the default build and one other member,
    built by nvcc, with their SASS, launch geometry and closure (GPU fields stand in)."""
    import importlib.util
    import sys

    from ctune.registry.schema import FrontMember

    if "registry_support" not in sys.modules:
        path = Path(__file__).parents[1] / "unit" / "registry" / "registry_support.py"
        loader = importlib.util.spec_from_file_location("registry_support", path)
        module = importlib.util.module_from_spec(loader)  # type: ignore[arg-type]
        sys.modules["registry_support"] = module
        loader.loader.exec_module(module)  # type: ignore[union-attr]
    support = sys.modules["registry_support"]
    spec, compiler = compiler_for(kernels, cache)
    problem = spec.problem("n1m")
    template = support.make_artifact(kernel="shapes", problem="n1m")
    members = []
    with compiler:
        for like, change in ((template.baseline, {}), (template.front[0], {"SHAPE": SMALL})):
            cand = spec.candidate({**spec.space.default_values(), **change})
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
                    launch=spec.launch_geometry(cand, problem),
                )
            )
    return support.built_here(template, spec, members)


def craft(path: Path, canary: Path) -> None:
    """What an attacker does to the file: payloads into the pinned member's genes and the
    baseline's, keys and pin made to match, the digest recomputed (schema.py: the sha256
    of the canonical JSON of everything but the digest)."""
    data = json.loads(path.read_text())
    data.pop("digest")
    for member, gene, payload in (
        (data["front"][0], "SHAPE", define_payload(canary)),
        (data["baseline"], "dlcm", flag_payload(canary)),
    ):
        member["candidate"]["genes"][gene] = payload
        member["key"] = Candidate.of("shapes", member["candidate"]["genes"]).key()
    data["pinned"] = data["front"][0]["key"]
    data["digest"] = hashlib.sha256(canonical_json(data).encode()).hexdigest()
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


@pytest.fixture
def gitenv(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name, value in (("NAME", "t"), ("EMAIL", "t@e")):
        monkeypatch.setenv(f"GIT_AUTHOR_{name}", value)
        monkeypatch.setenv(f"GIT_COMMITTER_{name}", value)


@pytest.fixture
def crafted(kernels: Path, tmp_path: Path, canary: Path, gitenv: None) -> Path:
    """A project whose registry holds one crafted artifact, the kernel source then edited
    (a comment) so that every command that would rebuild does."""
    from ctune.registry.service import publish_artifact

    repo = tmp_path / "project"
    repo.mkdir()
    env_git = ["-c", "user.name=t", "-c", "user.email=t@e"]
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    (repo / "README.md").write_text("x\n")
    subprocess.run(["git", *env_git, "add", "."], cwd=repo, check=True)
    subprocess.run(["git", *env_git, "commit", "-q", "-m", "init"], cwd=repo, check=True)
    path = publish_artifact(repo / "registry", _built_artifact(kernels, tmp_path / "tuned")).path
    craft(path, canary)
    subprocess.run(["git", *env_git, "commit", "-qam", "tuned (by hand)"], cwd=repo, check=True)
    source = kernels / "shapes.cu"
    source.write_text(source.read_text() + "\n// edited\n")
    return repo / "registry"


EDITED = "the artifact was edited by hand or the space changed"


@pytest.mark.parametrize(
    ("argv", "code", "said", "error"),
    [
        (["check", "--no-gpu"], EXIT_GATE_FAILED, EDITED, "1 of 1 artifact(s) stale"),
        (["gate", "--build-only"], EXIT_GATE_FAILED, "is not a value of SHAPE", "cannot be built"),
        (["registry", "refresh"], EXIT_GATE_FAILED, "stale: a re-tune", "stale: re-tune them"),
        (["registry", "verify", "--no-fsck"], EXIT_USER_ERROR, EDITED, "verification failed"),
    ],
)
def test_a_crafted_artifact_runs_nothing(
    ctune: Run,
    kernels: Path,
    crafted: Path,
    canary: Path,
    argv: list[str],
    code: int,
    said: str,
    error: str,
) -> None:
    """check and refresh call it STALE (their documented exit 1), the gate's pre-build cannot
    build it (exit 1), verify fails (exit 2): the reason is named on the artifact's line,
    and nothing of it is built."""
    done, out, err = ctune(*argv, "--kernels", str(kernels), "--registry", str(crafted))
    assert done == code, out + err
    assert any("shapes/n1m/" in line and said in line for line in out.splitlines()), out
    one_error_line(err, error)


def test_check_names_the_hand_edit_and_retune_builds_nothing_of_it(
    ctune: Run, kernels: Path, crafted: Path, canary: Path
) -> None:
    code, out, _ = ctune("check", "--no-gpu", "--kernels", str(kernels), "--registry", str(crafted))
    line = next(line for line in out.splitlines() if line.startswith("STALE "))
    assert "SHAPE='T<1> $(touch" in line and "is not a value of SHAPE" in line and EDITED in line
    # retune names it (stale) and prints the search that would remake it from the spec
    code, out, err = ctune(
        "registry", "retune", "--kernels", str(kernels), "--registry", str(crafted)
    )
    assert code == EXIT_OK, out + err
    assert "ctune search" in out and "shapes.cu" in out


def test_load_artifact_gives_data_that_builds_only_through_the_spec(
    kernels: Path, crafted: Path, tmp_path: Path, canary: Path
) -> None:
    import ctune as api

    artifact = api.load_artifact("shapes/n1m/sm90-nvidia-h100-80gb-hbm3", crafted)
    pinned = artifact.pinned_member()
    assert pinned is not None and "$(touch" in str(pinned.candidate.as_dict()["SHAPE"])
    spec, compiler = compiler_for(kernels, tmp_path / "cache")
    with pytest.raises(UserError, match="is not a value of SHAPE"):
        spec.in_space(pinned.candidate)
    with pytest.raises(CommandLineError):
        compiler.build(pinned.candidate, spec.problem())


# --- a journal line ---------------------------------------------------------------------


def test_a_resumed_search_runs_nothing_from_a_crafted_journal(
    ctune: Run, tmp_path: Path, canary: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The crafted trial is made the best, so the confirmation rebuilds it (a fresh cache);
    the GPU is the stand-in measurer, nvcc is real. (The journal reader may refuse the line
    first; either way nothing runs.) The test saxpy: an artifact cannot record a ``;`` in a
    define value (its CMake export would split there), so a search of ``shapes`` could not
    write its result."""
    import ctune.cli.search as search_cli
    from ctune.testing.standins import StandInMeasurer

    monkeypatch.setattr(search_cli, "make_measurer", lambda cfg: StandInMeasurer(samples=40))
    for name in ("saxpy.cu", "saxpy.yaml", "saxpy_ref.py"):
        shutil.copy(DATA / name, tmp_path / name)
    source = str(tmp_path / "saxpy.cu")
    common = ["-O", "p50", "--no-commit", "--confirm-processes", "3"]
    code, _, err = ctune("search", source, "--budget", "4", "--journal", "j.jsonl", *common)
    assert code == EXIT_OK, err
    lines = []
    crafted = 0
    for text in (tmp_path / "j.jsonl").read_text().splitlines():
        record = json.loads(text)
        trial = record.get("trial") if record.get("kind") == "trial" else None
        if trial is not None and trial["number"] > 0 and not crafted:
            trial["candidate"]["genes"]["dlcm"] = flag_payload(canary)
            trial["values"] = [1e-3]
            crafted += 1
        if record.get("kind") != "generation":
            lines.append(json.dumps(record, separators=(",", ":")))
    assert crafted == 1
    (tmp_path / "c.jsonl").write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("CTUNE_CACHE_DIR", str(tmp_path / "fresh-cache"))
    code, _, err = ctune("search", source, "--resume", "c.jsonl", *common)
    assert code == EXIT_USER_ERROR
    one_error_line(err, "dlcm")

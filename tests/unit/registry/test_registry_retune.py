"""`ctune registry retune`: the recorded search, as a command line, for stale artifacts."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import pytest
from registry_support import DEVICE, Run, edit_file, make_artifact, one_line_error

from ctune.ci.retune import Retune, search_argv
from ctune.config import Settings
from ctune.errors import RegistryError
from ctune.registry.service import publish_artifact

ROOT = Path(__file__).parents[3]


def _recorded(**provenance: object):
    artifact = make_artifact(**provenance)
    spec = {"objectives": ["p99", "energy"], "constraints": ["power<=400W"]}
    return dataclasses.replace(artifact, extensions={"objective_spec": spec})


def test_the_recorded_search_comes_back_as_a_command_line() -> None:
    artifact = _recorded(budget=50)
    argv = search_argv(artifact, Path("kernels"))
    assert argv == (
        "search", "kernels/gemm.cu", "--problem", "sq4096",
        "--objective", "p99", "--objective", "energy", "--constraint", "power<=400W",
        "--strategy", "nsga2", "--seed", "7", "--budget", "50",
        "--arch", "sm_90", "--l2-policy", "cold", "--commit",
    )  # fmt: skip
    assert search_argv(artifact, Path("kernels"), budget=8)[-7:-5] == ("--budget", "8")
    written = search_argv(artifact, Path("kernels"), out_dir=Path("out"))
    assert written[-2:] == ("--out", "out/gemm-sq4096.json") and "--commit" not in written
    # without an objective_spec (older artifacts) the objective names stand in
    plain = search_argv(make_artifact(), Path("kernels"))
    assert plain[4:8] == ("--objective", "p50", "--objective", "energy")
    assert "--constraint" not in plain and plain[plain.index("--budget") + 1] == "320"
    retune = Retune(make_artifact().pinned, argv, (("CTUNE_REGISTRY", "/r e/g"),))  # type: ignore[arg-type]
    assert retune.command().startswith("CTUNE_REGISTRY='/r e/g' ctune search kernels/gemm.cu ")


def test_the_recorded_plan_comes_back_with_options_time_patience_filling_and_model() -> None:
    artifact = _recorded(budget=50)
    plan = {
        "strategy": "nsga2",
        "options": {"population_size": "16", "cx_prob": 0.8},
        "seed": 7,
        "budget": 50,
        "time_s": 1800.0,
        "patience": 4,
        "fill": False,
    }
    artifact = dataclasses.replace(
        artifact, extensions={**artifact.extensions, "search": {"plan": plan}}
    )
    argv = search_argv(artifact, Path("kernels"))
    tail = argv[argv.index("--budget") + 2 : argv.index("--arch")]
    assert tail == (
        "--option", "cx_prob=0.8", "--option", "population_size=16",
        "--time", "1800", "--patience", "4", "--no-fill", "--cost-model", "off",
    )  # fmt: skip
    # the plan records the cost model only when it was on; off is said, since a search of
    # a kernel searched before turns it on by default
    on = dataclasses.replace(
        artifact,
        extensions={**artifact.extensions, "search": {"plan": {**plan, "cost_model": True}}},
    )
    on_argv = search_argv(on, Path("kernels"))
    assert on_argv[on_argv.index("--cost-model") + 1] == "on"


@pytest.mark.parametrize(
    ("extensions", "said"),
    [
        ({"objective_spec": [1]}, "objective_spec: expected an object"),
        # a string was taken one letter an objective: --objective p --objective 9 ...
        ({"objective_spec": {"objectives": "p99"}}, "objective_spec.objectives: expected a list"),
        ({"objective_spec": {"constraints": [1]}}, "objective_spec.constraints[0]: expected a"),
        ({"search": "x"}, "search: expected an object"),
        ({"search": {"plan": []}}, "search.plan: expected an object"),
        ({"search": {"plan": {"options": [1]}}}, "search.plan.options: expected an object"),
        ({"search": {"plan": {"options": {"a": [1]}}}}, "search.plan.options.a: expected a"),
        ({"search": {"plan": {"options": {"a=b": 1}}}}, "search.plan.options key 'a=b'"),
        ({"search": {"plan": {"time_s": "abc"}}}, "search.plan.time_s: expected a number"),
        ({"search": {"plan": {"patience": 2.5}}}, "search.plan.patience: expected a whole"),
        ({"search": {"plan": {"fill": "no"}}}, "search.plan.fill: expected true or false"),
        ({"search": {"plan": {"cost_model": 1}}}, "search.plan.cost_model: expected true or"),
    ],
)
def test_a_malformed_record_of_the_search_is_named_not_guessed(
    extensions: dict[str, Any], said: str
) -> None:
    """Each once ended a re-tune with an internal error (exit 70) or a wrong command line."""
    artifact = dataclasses.replace(make_artifact(), extensions=extensions)
    with pytest.raises(RegistryError) as caught:
        search_argv(artifact, Path("kernels"), where="f.json")
    assert str(caught.value).startswith(f"f.json: extensions.{said}"), caught.value


def test_a_malformed_record_stops_the_retune_before_any_search(
    cli: Run, registry: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctune.cli import search

    path = publish_artifact(registry, _recorded()).path
    edit_file(path, lambda d: d["extensions"].update(search="x"))
    monkeypatch.setattr(search, "load_kernel", lambda *a: pytest.fail("a search ran"))
    key = f"gemm/sq4096/{DEVICE}"
    code, out, err = cli("registry", "retune", key, "--run", "--registry", str(registry))
    assert code == 2 and out == ""
    one_line_error(err, f"{path}: extensions.search: expected an object")


def test_stale_artifacts_are_chosen_and_keys_override(cli: Run, registry: Path) -> None:
    # the stand-in fingerprint names another nvcc and harness than this machine's: stale
    publish_artifact(registry, _recorded())
    key = f"gemm/sq4096/{DEVICE}"
    kernels = str(ROOT / "kernels")
    code, out, _ = cli("registry", "retune", "--registry", str(registry), "--kernels", kernels)
    assert code == 0 and out.startswith(f"{key}: CTUNE_REGISTRY=") and "--commit" in out
    code, out, _ = cli("registry", "retune", key, "--budget", "9", "--registry", str(registry))
    assert code == 0 and "--budget 9 " in out


def test_nothing_stale_is_nothing_to_do(cli: Run, registry: Path) -> None:
    registry.mkdir()
    kernels = str(ROOT / "kernels")
    code, out, _ = cli("registry", "retune", "--registry", str(registry), "--kernels", kernels)
    assert code == 0 and "nothing to re-tune" in out


@pytest.mark.parametrize("args", [(), ("--all",), (f"gemm/*/{DEVICE}",)])
def test_an_unreadable_artifact_is_named_and_fails_the_retune(
    cli: Run, registry: Path, args: tuple[str, ...]
) -> None:
    """Stale or not, a file that does not read cannot be called up to date: the re-tunes of
    the rest are listed, then exit 2 names it."""
    publish_artifact(registry, _recorded())
    broken = registry / "gemm" / "broken" / f"{DEVICE}.json"
    broken.parent.mkdir()
    broken.write_text("{\n")
    kernels = str(ROOT / "kernels")
    code, out, err = cli(
        "registry", "retune", *args, "--registry", str(registry), "--kernels", kernels
    )
    assert code == 2 and f"gemm/sq4096/{DEVICE}: " in out, out + err
    assert f"warning: quarantined {broken}" in err
    one_line_error(err.splitlines()[-1], f"1 artifact file(s) could not be read ({broken}")


def test_nothing_stale_but_an_unreadable_artifact_is_exit_2(cli: Run, registry: Path) -> None:
    broken = registry / "gemm" / "broken" / f"{DEVICE}.json"
    broken.parent.mkdir(parents=True)
    broken.write_text("{\n")
    kernels = str(ROOT / "kernels")
    code, out, err = cli("registry", "retune", "--registry", str(registry), "--kernels", kernels)
    assert code == 2 and "nothing to re-tune" in out
    one_line_error(err.splitlines()[-1], f"could not be read ({broken}")


def test_a_failing_search_fails_the_retune_with_one_line_each(
    cli: Run, registry: Path, tmp_path: Path
) -> None:
    """The search runs in this process: its own one-line error, then the re-tune's summary."""
    publish_artifact(registry, _recorded())
    missing = tmp_path / "no-kernels"  # the search stops at once, GPU or not
    # which artifacts are stale cannot be told without their specs: bad input, one line
    code, _, err = cli(
        "registry", "retune", "--run", "--registry", str(registry), "--kernels", str(missing)
    )
    assert code == 2
    one_line_error(err, f"kernel spec {missing / 'gemm.yaml'} not found for 1 artifact of gemm")
    key = f"gemm/sq4096/{DEVICE}"  # named: re-tuned without a check
    code, _, err = cli(
        "registry", "retune", key, "--run", "--registry", str(registry), "--kernels", str(missing)
    )
    assert code == 1
    search_error, summary = [ln for ln in err.splitlines() if ln.strip()]
    assert search_error.startswith("error: ") and "gemm.cu: no such file" in search_error
    one_line_error(summary, "1 of 1 re-tune(s) failed", f"gemm/sq4096/{DEVICE} (exit 2)")


def test_the_recorded_settings_reach_the_search_and_not_os_environ(
    cli: Run, registry: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`retune --run` hands CTUNE_REGISTRY to the search's own settings: the search commits
    into the registry the re-tune read, and the process's environment never holds it."""
    from ctune.errors import UserError
    from ctune.search import driver

    publish_artifact(registry, _recorded())
    seen: list[tuple[Path, Path, str | None]] = []

    def spy(session: Any, *args: Any, **kwargs: Any) -> Any:
        registries = (session.settings.registry, session.publish.registry)
        seen.append((*registries, os.environ.get("CTUNE_REGISTRY")))
        raise UserError("the search stops here: its settings are what this test looks at")

    monkeypatch.setattr(driver, "run_session", spy)
    kernels = str(ROOT / "kernels")
    code, _, err = cli(
        "registry", "retune", "--run", "--registry", str(registry), "--kernels", kernels
    )
    assert code == 1 and "the search stops here" in err, err
    assert seen == [(registry, registry, None)]
    assert "CTUNE_REGISTRY" not in os.environ


def test_the_toolchain_options_reach_the_searches(
    cli: Run, registry: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`retune --nvcc/--ptxas` re-tunes with that toolchain: printed as the search's
    CTUNE_NVCC/CTUNE_PTXAS, and the search run in-process resolves its settings from them."""
    import shutil

    from ctune.cli import search
    from ctune.errors import UserError

    publish_artifact(registry, _recorded())
    ptxas = shutil.which("true") or "/bin/true"  # any program passes the setting's check
    key = f"gemm/sq4096/{DEVICE}"
    options = ("--registry", str(registry), "--nvcc", "wheel", "--ptxas", ptxas)
    code, out, _ = cli("registry", "retune", key, *options)
    assert code == 0 and f"CTUNE_NVCC=wheel CTUNE_PTXAS={ptxas} ctune search" in out
    seen: list[tuple[str, str]] = []

    def spy(kernel: Path, settings: Settings) -> Any:
        seen.append((settings.nvcc, settings.ptxas))
        raise UserError("the search stops here, before its toolchain is probed")

    monkeypatch.setattr(search, "load_kernel", spy)
    cli("registry", "retune", key, "--run", *options, "--kernels", str(ROOT / "kernels"))
    assert seen == [("wheel", ptxas)]

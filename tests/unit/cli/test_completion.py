"""Shell completion: what each completer offers, and a TAB press as a shell makes it (the
environment the script of `ctune --show-completion` sets, in a fresh process)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ctune.cli import COMPLETE_VAR, complete

DATA = Path(__file__).parents[2] / "data" / "kernels"


def _ctx(args: list[str] | None = None, **params: Any) -> Any:
    """What a completer reads of click's context: the parsed params, the unassigned args."""
    return SimpleNamespace(params=params, args=args or [])


def _tab(words: str, cwd: Path, *, shell: str = "bash") -> list[str]:
    """The completions `ctune` prints for the command line ``words`` (the last word is the
    one being completed; a trailing space starts a new, empty one)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTUNE_")}
    env.update({COMPLETE_VAR: f"complete_{shell}", "COLUMNS": "100"})
    parts = words.split(" ")
    env.update({"COMP_WORDS": words, "COMP_CWORD": str(len(parts) - 1)})
    done = subprocess.run(
        [sys.executable, "-m", "ctune"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout.splitlines()


# --- kernel paths -------------------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("a.cu", "b.txt", ".hidden.cu", "sub/c.cu", "sub/d.yaml", "only/deeper/e.cu"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_kernel_paths_offer_sources_and_folders(tree: Path) -> None:
    assert complete.kernel_paths("") == ["a.cu", "only/", "sub/"]
    assert complete.kernel_paths("b") == []  # not a kernel source
    assert complete.kernel_paths(".h") == [".hidden.cu"]  # hidden only when asked for


def test_a_folder_that_is_the_only_match_is_opened(tree: Path) -> None:
    assert complete.kernel_paths("su") == ["sub/c.cu"]
    assert complete.kernel_paths("o") == ["only/deeper/e.cu"]
    assert complete.kernel_paths(f"{tree}/s") == [f"{tree}/sub/c.cu"]


def test_kernel_paths_in_a_missing_folder_offer_nothing(tree: Path) -> None:
    assert complete.kernel_paths("nowhere/x") == []


# --- registry keys ------------------------------------------------------------------------------


@pytest.fixture
def registry(tmp_path: Path) -> Path:
    root = tmp_path / "registry"
    for rel in (
        "gemm/sq4096/sm90-nvidia-h200.json",
        "gemm/sq4096/sm80-nvidia-a100.json",
        "gemm/t128/sm90-nvidia-h200.json",
        "saxpy/n1m/sm90-nvidia-h200.json",
        "saxpy/n1m/notes.txt",
        "controls/" + "0" * 64 + ".acf",
    ):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("{}")
    (tmp_path / "elsewhere" / "p").mkdir(parents=True)
    (tmp_path / "elsewhere" / "p" / "d.json").write_text("{}")
    (root / "linked").symlink_to(tmp_path / "elsewhere")  # the registry refuses symlinks
    return root


def test_registry_keys_come_from_the_folder_layout(registry: Path) -> None:
    assert complete.registry_keys(_ctx(registry=registry), "") == [
        "gemm/sq4096/sm80-nvidia-a100",
        "gemm/sq4096/sm90-nvidia-h200",
        "gemm/t128/sm90-nvidia-h200",
        "saxpy/n1m/sm90-nvidia-h200",
    ]


def test_after_at_the_member_words_of_an_existing_key(registry: Path) -> None:
    ctx = _ctx(registry=registry)
    assert complete.registry_keys(ctx, "saxpy/n1m/sm90-nvidia-h200@") == [
        "saxpy/n1m/sm90-nvidia-h200@pinned",
        "saxpy/n1m/sm90-nvidia-h200@baseline",
    ]
    assert complete.registry_keys(ctx, "saxpy/n1m/sm70-none@") == []


def test_registry_keys_of_a_missing_registry_are_none(tmp_path: Path) -> None:
    assert complete.registry_keys(_ctx(registry=tmp_path / "none"), "") == []


def test_registry_keys_default_to_the_setting(
    registry: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTUNE_REGISTRY", str(registry))
    assert "gemm/t128/sm90-nvidia-h200" in complete.registry_keys(_ctx(registry=None), "")


# --- a spec's problems, strategies, objective terms ---------------------------------------------


def test_problems_and_sets_of_the_kernels_spec() -> None:
    kernel = DATA / "saxpy.cu"
    assert complete.problem_names(_ctx(kernel=kernel)) == ["n1m", "ragged"]
    assert complete.problem_set_names(_ctx(kernel=kernel)) == ["all"]
    # completing an option's value, click leaves the KERNEL among the unassigned args
    assert complete.problem_names(_ctx([str(kernel)], kernel=None)) == ["n1m", "ragged"]


def test_problems_of_no_or_a_broken_spec_are_none(tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text("")
    (tmp_path / "k.yaml").write_text("problems: [unclosed\n")
    assert complete.problem_names(_ctx(kernel=tmp_path / "k.cu")) == []
    assert complete.problem_names(_ctx(kernel=tmp_path / "missing.cu")) == []
    assert complete.problem_names(_ctx(kernel=None)) == []


def test_strategies_and_objective_terms() -> None:
    from ctune.search import STRATEGIES

    assert complete.strategy_names() == ["auto", *STRATEGIES]
    terms = dict(complete.objective_terms())
    assert {"p50", "p99", "energy", "regs", "latency"} <= set(terms)
    assert terms["p99"] == "min, ms"


# --- through the shell's protocol, in a fresh process -------------------------------------------


def test_a_tab_press_completes_a_problem_name(tmp_path: Path) -> None:
    for name in ("saxpy.cu", "saxpy.yaml", "saxpy_ref.py"):
        shutil.copy(DATA / name, tmp_path / name)
    assert _tab("ctune search saxpy.cu --problem ", tmp_path) == ["n1m", "ragged"]
    assert _tab("ctune compile sax", tmp_path) == ["saxpy.cu"]
    assert _tab("ctune search saxpy.cu --strategy st", tmp_path) == ["staged"]


def test_a_tab_press_completes_a_registry_key(registry: Path) -> None:
    words = f"ctune registry show --registry {registry} gemm/t"
    assert _tab(words, registry.parent) == ["gemm/t128/sm90-nvidia-h200"]


def test_zsh_gets_the_terms_with_their_direction_and_unit(tmp_path: Path) -> None:
    env = {**os.environ, COMPLETE_VAR: "complete_zsh"}
    env["_TYPER_COMPLETE_ARGS"] = "ctune search k.cu -O p9"
    done = subprocess.run(
        [sys.executable, "-m", "ctune"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert '"p99":"min, ms"' in done.stdout and "p50" not in done.stdout


def test_show_completion_prints_the_script_that_sets_the_variable_main_reads() -> None:
    # the shell named: detection reads the parent processes, which a test cannot choose
    done = subprocess.run(
        [sys.executable, "-m", "ctune", "--show-completion", "bash"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert f"{COMPLETE_VAR}=complete_bash" in done.stdout and "complete " in done.stdout

"""bench/acf.py without a GPU: its targets exist, a result file becomes the right row, and
the summary judges the issue's two targets from the rows, not from a constant."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctune.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def acf(bench_module):
    return bench_module("acf")


def test_every_target_is_a_pinned_artifact_of_a_spec_problem(acf) -> None:
    assert len(acf.TARGETS) == 8
    for t in acf.EXTRA_TARGETS:  # beyond the issue's 8, the same contract
        assert (ROOT / "registry" / t.kernel / t.problem / f"{acf.DEVICE_CLASS}.json").is_file()
        load_spec(ROOT / "kernels" / f"{t.kernel}.yaml").problem(t.problem)
    kernels = [t.kernel for t in acf.TARGETS]
    assert kernels.count("gemm") == 4 and kernels.count("attention") == 2
    assert {"hand_gemm", "hand_attention"} <= set(kernels)
    for t in acf.TARGETS:
        assert (ROOT / "registry" / t.kernel / t.problem / f"{acf.DEVICE_CLASS}.json").is_file()
        spec = load_spec(ROOT / "kernels" / f"{t.kernel}.yaml")
        spec.problem(t.problem)  # raises if the spec lost the problem
        assert t.variant in ("default", "att") and t.budget >= t.pool >= 6


def test_the_search_starts_in_the_controls_phase_from_the_pinned_build(acf) -> None:
    t = acf.TARGETS[0]
    argv = acf.search_argv(t, Path("w.t4.json"), Path("r.json"), "/x/ptxas", 7)
    joined = " ".join(argv)
    assert "--acf ptxas" in joined and "--warm-start w.t4.json" in joined
    assert "--option start=controls" in joined and f"--budget {t.budget}" in joined
    assert "--ptxas /x/ptxas" in joined and "--no-commit" in joined
    assert "--relink on" in joined  # a CUTLASS candidate from its kept front end


def test_a_row_reads_the_controls_verdict(acf) -> None:
    t = acf.TARGETS[0]
    search = {
        "controls": {
            "member": "a",
            "reference": "b",
            "gain": 1.031,
            "difference": "lower",
            "reason": "p<0.01",
            "pinned": True,
        },
        "evaluations": 65,
        "binaries": 61,
        "timing": {"wall_s": 80.0},
    }
    result = {"extensions": {"search": search}}
    r = acf.row(t, result, 90.0)
    assert r["gain_p99"] == 1.031 and r["significant"] and r["distinct_binaries"] == 61
    assert acf.row(t, {"evaluations": 3}, 1.0)["significant"] is False


def test_the_summary_counts_confirmed_gains_and_head_to_head_wins(acf) -> None:
    rows = (
        [{"significant": True, "gain_p99": 1.03}] * 3
        + [
            {"significant": True, "gain_p99": 1.01},
            {"significant": False, "gain_p99": 1.05},
        ]
        * 2
        + [{"significant": False, "gain_p99": None}]
    )
    issue_8 = [t.key for t in acf.TARGETS]
    stage = [{**r, "key": key} for r, key in zip(rows, issue_8, strict=True)]
    h2h = [
        {
            "kernel": "a",
            "ctune_best_ms": 1.0,
            "compileiq_best_ms": 1.01,
            "ctune_wall_s": 50,
            "compileiq_wall_s": 60,
        },
        {
            "kernel": "b",
            "ctune_best_ms": 1.0,
            "compileiq_best_ms": 0.99,
            "ctune_wall_s": 50,
            "compileiq_wall_s": 60,
        },
        {
            "kernel": "c",
            "ctune_best_ms": 1.0,
            "compileiq_best_ms": 1.2,
            "ctune_wall_s": 70,
            "compileiq_wall_s": 60,
        },
    ]
    got = acf.summary({"stage": stage, "head_to_head": h2h})
    assert got["confirmed_gains_2pct"] == 3 and got["stage_target_met"]
    assert got["head_to_head_wins"] == 1 and not got["head_to_head_target_met"]
    # "a" won under one seed and lost under another: the kernel is not won
    lost = {**h2h[0], "compileiq_best_ms": 0.98, "settings": "pool16-seed11"}
    assert acf.summary({"head_to_head": [*h2h, lost]})["head_to_head_wins"] == 0
    assert not acf.summary({"stage": stage[:7]})["stage_target_met"]  # fewer than 8 rows


def test_a_gain_beyond_the_issue_s_8_is_counted_beside_the_target(acf) -> None:
    gain = {"significant": True, "gain_p99": 1.04}
    issue_8 = [{"key": t.key, "significant": False, "gain_p99": 1.0} for t in acf.TARGETS]
    stage = [*issue_8[2:], {**issue_8[0], **gain}, {**issue_8[1], **gain}]
    extra = [{"key": t.key, **gain} for t in acf.EXTRA_TARGETS]
    got = acf.summary({"stage": stage + extra})
    assert got["confirmed_gains_2pct"] == 2 + len(extra)
    assert got["confirmed_gains_2pct_of_issue_8"] == 2 and not got["stage_target_met"]
    third = {**issue_8[2], **gain}
    assert acf.summary({"stage": [*stage, third]})["stage_target_met"]


def test_a_row_recorded_with_the_gate_s_verdict_is_won_when_ctune_is_not_slower(acf) -> None:
    row = {
        "kernel": "a",
        "ctune_best_ms": 1.0,
        "compileiq_best_ms": 0.995,  # 0.5% faster at pooled p99, within the noise
        "ctune_wall_s": 50,
        "compileiq_wall_s": 60,
    }
    same = {**row, "ctune_vs_compileiq": {"difference": "same"}}
    got = acf.summary({"head_to_head": [same]})
    assert got["head_to_head_wins"] == 1 and got["head_to_head_wins_raw_p99"] == 0
    for verdict in ("higher", "unresolved"):  # slower, or too noisy to say: not won
        judged = {**row, "ctune_vs_compileiq": {"difference": verdict}}
        assert acf.summary({"head_to_head": [judged]})["head_to_head_wins"] == 0
    slower_wall = {**same, "ctune_wall_s": 61}
    assert acf.summary({"head_to_head": [slower_wall]})["head_to_head_wins"] == 0
    assert acf.summary({"head_to_head": [row]})["head_to_head_wins"] == 0  # older row: p99s


def won_row(kernel: str = "a", **changes: Any) -> dict[str, Any]:
    """A head-to-head row ctune won at both tools' defaults (same speed, less wall)."""
    return {
        "kernel": kernel,
        "ctune_best_ms": 1.0,
        "compileiq_best_ms": 1.0,
        "plain_ms": 1.0,
        "ctune_wall_s": 50,
        "compileiq_wall_s": 60,
        "ctune_vs_compileiq": {"difference": "same"},
        "settings": "pool32",
        **changes,
    }


def test_wins_at_both_tools_defaults_are_counted_apart(acf) -> None:
    won = won_row()
    lost_at_16 = {**won, "ctune_wall_s": 70, "settings": "pool16"}
    got = acf.summary({"head_to_head": [won, lost_at_16]})
    assert got["head_to_head_wins"] == 0 and got["head_to_head_wins_at_defaults"] == 1
    assert acf.at_defaults({"settings": "pool32-budget64-seed11"})
    assert acf.at_defaults({"settings": "pool32-space-default"})  # both tools' own space
    for label in ("pool16", "pool32-prune-off", "pool32-space-att"):
        assert not acf.at_defaults({"settings": label})


def test_a_target_counts_once_whatever_settings_its_rows_ran_under(acf) -> None:
    gain = {"key": "k", "significant": True, "gain_p99": 1.05}
    stage = [gain, {**gain, "settings": "pool32-prune-off"}]
    got = acf.summary({"stage": stage})
    assert got["confirmed_gains_2pct"] == 1 and got["stage_targets"] == 1


def test_rows_under_other_settings_are_kept_and_same_settings_replaced(acf, tmp_path) -> None:
    path = tmp_path / "acf.json"
    acf.merge(path, "stage", [{"key": "k", "gain_p99": 1.0}], {"gpu": "x"})
    acf.merge(path, "stage", [{"key": "k", "settings": "pool32", "gain_p99": 1.1}], {})
    acf.merge(path, "stage", [{"key": "k", "settings": "pool32", "gain_p99": 1.2}], {})
    rows = json.loads(path.read_text())["stage"]
    assert sorted((r.get("settings", "pool16"), r["gain_p99"]) for r in rows) == [
        ("pool16", 1.0),
        ("pool32", 1.2),
    ]


def test_pruning_can_be_turned_off_for_the_stage(acf) -> None:
    t = acf.TARGETS[0]
    argv = acf.search_argv(t, Path("w"), Path("r"), "/x/ptxas", 7, prune_margin="off")
    assert "--prune-margin off" in " ".join(argv)
    assert "--prune-margin" not in acf.search_argv(t, Path("w"), Path("r"), "/x", 7)
    assert acf.settings_label(t, "off") == f"pool{t.pool}-prune-off-islands2"


def test_another_space_than_the_target_s_is_a_row_of_its_own(acf) -> None:
    import dataclasses

    t = dataclasses.replace(next(t for t in acf.TARGETS if t.variant == "att"), islands=1)
    assert acf.settings_label(t, "default") == f"pool{t.pool}"
    assert acf.settings_label(t, "default", seed=8) == f"pool{t.pool}-seed8"
    other = dataclasses.replace(t, variant="default")
    assert acf.settings_label(other, "default") == f"pool{t.pool}-space-default"


def test_a_stage_of_islands_is_a_row_of_its_own(acf) -> None:
    """Rows recorded before islands ran one engine and have no islands label."""
    import dataclasses

    t = acf.TARGETS[0]
    assert t.islands == 2
    assert acf.settings_label(t, "default") == f"pool{t.pool}-islands2"
    assert acf.settings_label(dataclasses.replace(t, islands=1), "default") == f"pool{t.pool}"
    argv = " ".join(acf.search_argv(t, Path("w"), Path("r"), "/x/ptxas", 7))
    assert "--option controls_islands=2" in argv


def test_compileiq_s_best_is_judged_against_the_plain_build_by_the_gate_s_rule(acf) -> None:
    import numpy as np

    from ctune.records import Measurement, Outcome

    rng = np.random.default_rng(3)

    def processes(median: float) -> list[Measurement]:
        """Three processes whose medians differ by 0.1%, 200 samples each."""
        return [
            Measurement("k", "p", Outcome.OK, samples_ms=tuple(rng.normal(m, 0.002, 200)))
            for m in (median * 0.999, median, median * 1.001)
        ]

    plain = processes(1.0)
    assert acf.judged_against(plain, processes(0.95))["difference"] == "lower"
    same = acf.judged_against(plain, processes(0.998))
    assert same["difference"] == "same" and "within T=" in same["reason"]
    assert acf.judged_against(plain, processes(1.05))["difference"] == "higher"
    assert abs(acf.pooled_p99(plain) - 1.0) < 0.01
    assert np.isnan(acf.pooled_p99([Measurement("k", "p", Outcome.RUNTIME_FAULT)]))


def test_the_table_shows_each_head_to_head_row_and_the_counts(acf) -> None:
    won = won_row("k/p/sm90-x", compileiq_best_ms=1.1, ctune_vs_compileiq={"difference": "lower"})
    lost = {**won, "ctune_wall_s": 70, "settings": "pool16"}
    got = acf.table({"head_to_head": [won, lost]}).splitlines()
    assert got[2] == (
        "| k/p | pool32 (both at defaults) | 1.0000 / 1.1000 / 1.0000 | lower | 50.0 / 60.0 | yes |"
    )
    assert got[3].endswith("| 70.0 / 60.0 | no |")
    assert "- head_to_head_wins_at_defaults: 1" in got and "- head_to_head_wins: 0" in got


def test_compileiq_s_loop_is_given_as_many_files_as_the_stage_tried(acf) -> None:
    """The same number of controls files: every file the stage built and measured, the
    ones whose binary repeated another's among them; not its baseline, nor fillers."""
    assert acf.files_tried({"evaluations": 266, "binaries": 256, "fillers": 0}) == 265
    assert acf.files_tried({"evaluations": 70, "fillers": 4}) == 65
    assert acf.files_tried({}) == 0


def test_a_stage_s_compile_wall_with_and_without_generations(acf, tmp_path: Path) -> None:
    """The baseline (no file) is no controls build; each generation waits for its slowest
    build; two islands submit the second generation beside the first; one stream keeps
    both slots going."""
    rows = [
        "number,generation,compile_s,acf_ptxas",
        "0,0,5.0,none",
        "1,1,1.0,a",
        "2,1,1.0,b",
        "3,1,10.0,c",  # on the first slot free (at 1 s): the generation ends at 11 s
        "4,2,1.0,d",
        "5,2,1.0,e",
    ]
    trials = tmp_path / "trials.csv"
    trials.write_text("\n".join(rows) + "\n")
    got = acf.stage_walls(trials, 2)
    assert got == {
        "files": 5,
        "compile_cpu_s": 14.0,
        "generations": 2,
        "generations_wall_s": 12.0,  # 11 + 1
        "two_islands_wall_s": 11.0,  # d and e on the slot a and b freed, beside c
        "one_stream_wall_s": 11.0,  # d and e beside c
    }
    assert acf.main(["walls", str(trials), "2"]) == 0


def test_a_kernel_s_rows_with_islands_replace_its_rows_of_one_engine(acf) -> None:
    """One engine was ctune's default before islands, two since: a row with islands replaces
    the one-engine row of its kernel and settings, at defaults and in the strict count."""
    lost = won_row("k/p/sm90-x", ctune_wall_s=70, settings="pool32")
    won = won_row("k/p/sm90-x", settings="pool32-islands2")
    other = won_row("o/p/sm90-x", settings="pool32")
    one_island = won_row("o/p/sm90-x", settings="pool32-islands1")
    assert acf.at_defaults(won) and acf.at_defaults(lost) and not acf.at_defaults(one_island)
    got = acf.summary({"head_to_head": [lost, won, other, {**other, "settings": "pool16"}]})
    assert got["head_to_head_wins_at_defaults"] == 2
    assert got["head_to_head_wins"] == 2
    assert got["head_to_head_wins_every_row"] == 1  # every row ever: k lost one
    # a row of other settings stays: islands at pool32 do not answer for a loss at pool16
    lost16 = won_row("k/p/sm90-x", ctune_wall_s=70, settings="pool16-seed8")
    assert acf.summary({"head_to_head": [lost, won, lost16]})["head_to_head_wins"] == 0
    seeded = won_row("k/p/sm90-x", settings="pool16-islands2-seed8")
    assert acf.summary({"head_to_head": [lost16, seeded]})["head_to_head_wins"] == 1

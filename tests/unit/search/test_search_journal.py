"""The journal: resume replays, tolerates a torn tail, refuses another search's file."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from ctune.errors import UserError
from ctune.records import Candidate, Outcome, Trial
from ctune.search.journal import Journal, default_path, read, trials_by_generation
from ctune.spec import KernelSpec
from ctune.testing.journal_holder import held_elsewhere
from ctune.testing.standins import StandInMeasurer


def _keys(path: Path) -> list[str]:
    replay, _ = read(path)
    return [t.candidate.key() for t in replay.trials]


def test_roundtrip_and_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    with Journal.create(path, {"kernel": "k"}) as journal:
        for i in range(3):
            journal.append(Trial(i, 0, Candidate.of("k", {"A": i}), Outcome.OK, values=(1.0,)))
        journal.append_state(1, {"strategy": "ga", "generation": 1})
    with path.open("ab") as fh:
        fh.write(b'{"kind": "trial", "trial": {"number": 3, "gen')  # a crash mid-write
    replay, good_end = read(path)
    assert [t.number for t in replay.trials] == [0, 1, 2] and replay.dropped_tail
    assert replay.states == [(1, {"strategy": "ga", "generation": 1})]
    journal, _again = Journal.resume(path)
    journal.append(Trial(3, 1, Candidate.of("k", {"A": 3}), Outcome.COMPILE_ERROR))
    journal.close()
    replay, _ = read(path)
    assert [t.number for t in replay.trials] == [0, 1, 2, 3] and not replay.dropped_tail
    assert path.stat().st_size > good_end


def test_damage_in_the_middle_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    with Journal.create(path, {"kernel": "k"}) as journal:
        journal.append(Trial(0, 0, Candidate.of("k", {"A": 0}), Outcome.OK))
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], "{garbage", lines[1]]) + "\n")
    with pytest.raises(UserError, match=r"j.jsonl line 2: not a journal record"):
        read(path)
    path.write_text("hello\n")
    with pytest.raises(UserError, match=r"not a journal record|not a ctune journal"):
        read(path)


def test_create_refuses_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    Journal.create(path, {}).close()
    with pytest.raises(UserError, match="already exists; pass --resume"):
        Journal.create(path, {})


def test_default_path_is_under_the_cache(tmp_path: Path) -> None:
    path = default_path(tmp_path, "gemm", "sq4096", stamp="20260101T000000Z")
    assert path == tmp_path / "journals" / "gemm-sq4096-20260101T000000Z.jsonl"
    path.parent.mkdir(parents=True)
    path.touch()
    assert (
        default_path(tmp_path, "gemm", "sq4096", stamp="20260101T000000Z").name
        == "gemm-sq4096-20260101T000000Z-2.jsonl"
    )


def test_trials_group_by_generation() -> None:
    c = Candidate.of("k", {})
    trials = [Trial(i, g, c, Outcome.OK) for i, g in enumerate([0, 1, 1, 2, 2, 2])]
    assert [len(g) for g in trials_by_generation(trials)] == [1, 2, 3]


def test_ctrl_c_keeps_finished_trials_and_the_file_resumes(search, spec: KernelSpec) -> None:
    k = 12
    measurer = StandInMeasurer(samples=30, interrupt_at=k)  # Ctrl-C during the k-th measure
    result, _, _, events = search(budget=30, measurer=measurer, seed=4)
    assert result.interrupted and result.stop_reason == "interrupted"
    assert result.artifact_path is None  # nothing unconfirmed is written
    replay, _ = read(result.journal)
    measured = [t for t in replay.trials if t.measurement is not None]
    assert len(measured) == k - 1  # the candidate in flight was abandoned
    assert not replay.dropped_tail
    assert any("interrupted" in getattr(e, "message", "") for e in events)
    # the journal is resumable: the search continues to its budget
    resumed, _again, _, _ = search(budget=30, seed=4, resume=result.journal)
    assert resumed.evaluations == 30 and resumed.stop_reason == "budget"
    assert measurer.calls[-1] not in set(_keys(result.journal)[: len(replay.trials)])


def test_first_ctrl_c_finishes_the_candidate_in_flight_and_saves(search, spec: KernelSpec) -> None:
    k = 12
    before = signal.getsignal(signal.SIGINT)
    measurer = StandInMeasurer(samples=30, sigint_at=k)  # a real SIGINT during the k-th measure
    result, _, _, events = search(budget=30, measurer=measurer, seed=4)
    assert signal.getsignal(signal.SIGINT) is before  # the search put the handler back
    assert result.interrupted and result.stop_reason == "interrupted"
    assert result.artifact_path is None  # nothing unconfirmed is written
    assert len(measurer.calls) == k  # nothing was started after Ctrl-C
    replay, _ = read(result.journal)
    measured = [t for t in replay.trials if t.measurement is not None]
    assert len(measured) == k  # the candidate in flight finished and was journaled
    assert replay.trials[-1].candidate.key() == measurer.calls[-1]
    assert any("finished and was saved" in getattr(e, "message", "") for e in events)
    again = StandInMeasurer(samples=30)
    resumed, _, _, _ = search(budget=30, measurer=again, seed=4, resume=result.journal)
    assert resumed.evaluations == 30 and resumed.stop_reason == "budget"
    assert not set(again.calls) & set(measurer.calls)  # nothing measured twice


def test_second_ctrl_c_abandons_the_candidate_in_flight(search, spec: KernelSpec) -> None:
    k = 12
    measurer = StandInMeasurer(samples=30, sigint_at=k, sigints=2)
    result, _, _, events = search(budget=30, measurer=measurer, seed=4)
    assert result.interrupted and result.stop_reason == "interrupted"
    replay, _ = read(result.journal)
    assert len([t for t in replay.trials if t.measurement is not None]) == k - 1
    assert any("was abandoned" in getattr(e, "message", "") for e in events)


def test_resume_measures_only_what_is_left(search, spec: KernelSpec) -> None:
    first = StandInMeasurer(samples=30, interrupt_at=16)  # a crash after 15 measured trials
    crashed, _, _, _ = search(budget=40, measurer=first, seed=9, confirm_processes=0)
    before = _keys(crashed.journal)
    second = StandInMeasurer(samples=30)
    resumed, _, _compiler, _ = search(
        budget=40, measurer=second, seed=9, resume=crashed.journal, confirm_processes=0
    )
    after = _keys(resumed.journal)
    assert after[: len(before)] == before and len(after) == 40
    assert resumed.journal == crashed.journal
    # the baseline and every journaled trial were replayed, not measured again
    assert not set(second.calls) & set(before)
    failed_builds = sum(
        1 for t in read(resumed.journal)[0].trials[len(before) :] if t.measurement is None
    )
    assert len(second.calls) == 40 - len(before) - failed_builds
    assert len(set(first.calls[:-1]) | set(second.calls)) == len(first.calls[:-1]) + len(
        second.calls
    )  # no key measured twice across the resume


def test_resume_of_a_finished_search_measures_nothing_new(search) -> None:
    done, _, _, _ = search(budget=15, seed=3, confirm_processes=0)
    again = StandInMeasurer(samples=30)
    result, _, _, _ = search(
        budget=15, seed=3, resume=done.journal, measurer=again, confirm_processes=0
    )
    assert again.calls == [] and result.evaluations == 15


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"objectives": ("p99",)}, "objectives"),
        ({"problem": "large"}, "problem"),
        ({"constraints": ("regs<=100",)}, "objectives"),
    ],
)
def test_resume_refuses_another_search(search, change: dict[str, object], field: str) -> None:
    done, _, _, _ = search(budget=5, confirm_processes=0)
    objectives = change.pop("objectives", ("p50",))
    constraints = change.pop("constraints", ())
    with pytest.raises(UserError) as err:
        search(objectives, constraints, budget=10, resume=done.journal, **change)
    text = str(err.value)
    assert f"cannot resume: the journal's {field} differs" in text and "\n" not in text


def test_resume_refuses_another_spec_and_device(search, spec: KernelSpec, tmp_path: Path) -> None:
    done, _, _, _ = search(budget=5, confirm_processes=0)
    lines = done.journal.read_text().splitlines()
    header = json.loads(lines[0])
    changed = tmp_path / "device.jsonl"
    device = {**header, "device": "NVIDIA H200 (sm_90)"}
    changed.write_text("\n".join([json.dumps(device), *lines[1:]]) + "\n")
    with pytest.raises(UserError, match="the journal's device differs"):
        search(budget=10, resume=changed)
    # the fingerprint follows the artifacts' severity rule: hard and build changes refuse
    # (checked when the journal opens, after the flags: the build needs the toolchain)
    for name in ("spec_problem_sha256", "nvcc_version"):
        changed = tmp_path / f"{name}.jsonl"
        fields = {**header["fingerprint"], name: "0" * 64}
        changed.write_text(
            "\n".join([json.dumps({**header, "fingerprint": fields}), *lines[1:]]) + "\n"
        )
        with pytest.raises(UserError, match=f"cannot resume: {name} changed since the journal"):
            search(budget=5, resume=changed)


def test_resume_notes_soft_changes(search, tmp_path: Path) -> None:
    done, _, _, _ = search(budget=5, confirm_processes=0)
    lines = done.journal.read_text().splitlines()
    header = json.loads(lines[0])
    fields = {**header["fingerprint"], "spec_space_sha256": "0" * 64}
    changed = tmp_path / "soft.jsonl"
    changed.write_text(
        "\n".join([json.dumps({**header, "fingerprint": fields}), *lines[1:]]) + "\n"
    )
    resumed, _, _, _ = search(budget=5, confirm_processes=0, resume=changed)
    assert any("spec_space_sha256 changed since the journal" in n for n in resumed.notes)


def test_resume_of_a_missing_file(search, tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such journal"):
        search(resume=tmp_path / "nope.jsonl")


def test_resume_keeps_the_recorded_budget_options_and_seed(search) -> None:
    """The issue's case: a --budget 8 search, resumed without flags, stops at 8 (not 100)."""
    first = StandInMeasurer(samples=30, interrupt_at=4)
    options = {"population_size": 4}
    crashed, _, _, _ = search(
        budget=8, seed=6, strategy="ga", strategy_options=options, measurer=first
    )
    assert crashed.interrupted
    resumed, _, _, _ = search(budget=None, resume=crashed.journal, confirm_processes=0)
    assert resumed.evaluations == 8 and resumed.budget == 8 and resumed.stop_reason == "budget"
    assert resumed.seed == 6 and resumed.plan["options"] == options
    fresh, _, _, _ = search(budget=8, seed=6, strategy="ga", strategy_options=options)
    assert _keys(resumed.journal) == _keys(fresh.journal)  # the same search, trial for trial


def test_a_format_1_journal_reads_but_does_not_resume(search, tmp_path: Path) -> None:
    done, _, _, _ = search(budget=5, confirm_processes=0)
    lines = done.journal.read_text().splitlines()
    old = {k: v for k, v in json.loads(lines[0]).items() if k != "fingerprint"}
    path = tmp_path / "old.jsonl"
    path.write_text("\n".join([json.dumps({**old, "format": 1}), *lines[1:]]) + "\n")
    replay, _ = read(path)
    trials = [ln for ln in lines[1:] if json.loads(ln).get("kind") == "trial"]
    assert len(replay.trials) == len(trials) == 5
    with pytest.raises(UserError, match="written by an older ctune"):
        search(budget=5, resume=path)


def test_a_journal_is_held_by_one_search_at_a_time(tmp_path: Path) -> None:
    """Two processes: while one search has the journal, a second (resumed, or new with the
    same --journal) is refused in one line and cuts nothing (the holder's line in the
    middle of its write stays); once the holder is killed, nothing blocks the journal."""
    path = tmp_path / "j.jsonl"
    with held_elsewhere(path) as holder:
        with path.open("ab") as fh:
            fh.write(b'{"kind": "trial", "tri')  # the holder, in the middle of a write
        before = path.read_bytes()
        for open_again in (lambda: Journal.resume(path), lambda: Journal.create(path, {})):
            with pytest.raises(UserError) as err:
                open_again()
            text = str(err.value)
            assert text.startswith(f"{path}: another search holds this journal"), text
            assert "\n" not in text
        assert path.read_bytes() == before
        holder.kill()  # a dead process's lock blocks nothing
        holder.wait()
        journal, replay = Journal.resume(path)
        journal.close()
    assert replay.dropped_tail and read(path)[0].header["kernel"] == "k"


def test_a_journal_open_in_this_process_is_held_until_closed(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    journal = Journal.create(path, {"kernel": "k"})
    with pytest.raises(UserError, match="another search holds this journal"):
        Journal.resume(path)
    journal.close()
    Journal.resume(path)[0].close()


def test_resume_refuses_a_journal_another_search_holds(search) -> None:
    done, _, _, _ = search(budget=5, confirm_processes=0)
    with held_elsewhere(done.journal), pytest.raises(UserError, match="another search holds"):
        search(budget=5, resume=done.journal, confirm_processes=0)

"""The real worker process, end to end, against a numpy stand-in for CuPy and NVML.

This proves the worker's Python paths without a GPU: protocol, correctness
(C1-C3), the chunked timing loop, telemetry and throttle exclusion, the energy
window, and fault classification with sticky exits and replacement. It proves
nothing about GPU timing; tests/gpu/ does that on the real device.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from ctune.measure import SamplingPlan, nvml_energy
from ctune.measure.session import WorkerMeasurer
from ctune.records import Build, Outcome
from ctune.spec import load_spec

HERE = Path(__file__).parent
DATA = HERE.parents[1] / "data" / "kernels"
PLAN = SamplingPlan(warmup_ms=1, rep_ms=2, min_samples=30, max_samples=300, quantile=0.5)


@pytest.fixture
def fake_gpu(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(HERE / "fakegpu"))
    monkeypatch.delenv("FAKE_NVML_REASONS", raising=False)


@pytest.fixture(scope="module")
def faults():
    return load_spec(DATA / "faults.yaml")


@pytest.fixture(scope="module")
def saxpy():
    return load_spec(DATA / "saxpy.yaml")


def binary(tmp_path: Path, spec, problem, genes: dict, behaviour: dict):
    """A candidate and a Build whose 'cubin' tells the stand-in how to behave."""
    candidate = spec.candidate({**spec.space.default_values(), **genes})
    path = tmp_path / f"{candidate.key()}-{behaviour.get('mode', 0)}.cubin"
    path.write_text(json.dumps(behaviour))
    build = Build(candidate.key(), ("nvcc",), "fake", Outcome.OK, binary_path=str(path))
    return candidate, build


def test_saxpy_measures_ok_with_statistics(tmp_path, fake_gpu, saxpy):
    problem = saxpy.problem("ragged")
    cand, build = binary(tmp_path, saxpy, problem, {}, {"kernel": "saxpy"})
    with WorkerMeasurer() as measurer:
        info = measurer.device_info()
        m = measurer.measure(saxpy, cand, build, problem, PLAN)
    assert (
        info.name == "Fake H100 80GB HBM3" and info.sm == "sm_90" and info.uuid == "GPU-fake-0000"
    )
    assert info.driver == "580.0.fake" and info.l2_bytes == 50 << 20
    assert m.outcome is Outcome.OK, m.error
    assert m.device == info and m.candidate_key == cand.key() and m.problem == "ragged"
    assert m.summary is not None and len(m.samples_ms) == m.summary.n >= 30
    assert m.summary.min_ms <= m.summary.p50_ms <= m.summary.p99_ms <= m.summary.max_ms
    assert m.rel_l2_error is not None and m.rel_l2_error < 1e-6
    assert m.l2_policy == "cold" and m.l2_flush_bytes == 256 << 20  # max(2 x 50 MiB, 256 MiB)
    assert m.n_warmup > 2 and m.sm_clock_mhz == 1980.0 and m.temperature_c == 41.0
    assert m.throttle_reasons == 0 and not m.sw_power_capped and m.excluded_samples == 0
    assert m.other_processes == 0  # NVML lists only ourselves
    assert m.sampling_note.startswith("n=") and "warm-up" in m.sampling_note
    assert m.wall_s > 0


def test_hot_mode_skips_the_flush(tmp_path, fake_gpu, saxpy):
    problem = saxpy.problem("ragged")
    cand, build = binary(tmp_path, saxpy, problem, {}, {"kernel": "saxpy"})
    with WorkerMeasurer() as measurer:
        m = measurer.measure(saxpy, cand, build, problem, SamplingPlan(l2_policy="hot", rep_ms=1))
    assert m.outcome is Outcome.OK and m.l2_policy == "hot" and m.l2_flush_bytes == 0


def test_graph_timing_records_what_a_sample_is(tmp_path, fake_gpu, saxpy):
    problem = saxpy.problem("ragged")
    cand, build = binary(tmp_path, saxpy, problem, {}, {"kernel": "saxpy"})
    plan = dataclasses.replace(PLAN, timing="graph")
    with WorkerMeasurer() as measurer:
        m = measurer.measure(saxpy, cand, build, problem, plan)
    assert m.outcome is Outcome.OK, m.error
    assert m.timing_method == "graph" and m.launches_per_sample >= 2
    assert f"one replay of {m.launches_per_sample} launches" in m.sampling_note
    assert len(m.samples_ms) >= 30 and m.rel_l2_error is not None and m.rel_l2_error < 1e-6


def test_events_timing_when_asked_and_when_capture_fails(tmp_path, fake_gpu, saxpy, monkeypatch):
    problem = saxpy.problem("ragged")
    cand, build = binary(tmp_path, saxpy, problem, {}, {"kernel": "saxpy"})
    with WorkerMeasurer() as measurer:
        m = measurer.measure(
            saxpy, cand, build, problem, dataclasses.replace(PLAN, timing="events")
        )
    assert m.timing_method == "events" and m.launches_per_sample == 1
    monkeypatch.setenv("FAKE_NO_CAPTURE", "1")
    with WorkerMeasurer() as measurer:
        m = measurer.measure(saxpy, cand, build, problem, dataclasses.replace(PLAN, timing="graph"))
    assert m.outcome is Outcome.OK and m.timing_method == "events"
    assert "graph capture failed (CUDARuntimeError" in m.sampling_note


def test_sample_count_exact(tmp_path, fake_gpu, saxpy):
    problem = saxpy.problem("ragged")
    cand, build = binary(tmp_path, saxpy, problem, {}, {"kernel": "saxpy"})
    plan = SamplingPlan(warmup_ms=1, rep_ms=1, min_samples=250, max_samples=250)
    with WorkerMeasurer() as measurer:
        m = measurer.measure(saxpy, cand, build, problem, plan)
    assert len(m.samples_ms) == 250


def test_fault_sequence_replaces_the_worker(tmp_path, fake_gpu, faults):
    problem = faults.problem("n64k")
    sequence = [
        (0, Outcome.OK),
        (1, Outcome.RUNTIME_FAULT),
        (0, Outcome.OK),
        (2, Outcome.RUNTIME_FAULT),
        (0, Outcome.OK),
        (3, Outcome.RUN_TIMEOUT),
        (0, Outcome.OK),
        (4, Outcome.WRONG_RESULT),
        (5, Outcome.LAUNCH_ERROR),
        (6, Outcome.RUNTIME_FAULT),
        (0, Outcome.OK),
    ]
    with WorkerMeasurer() as measurer:
        for mode, expected in sequence:
            cand, build = binary(
                tmp_path, faults, problem, {"MODE": mode}, {"kernel": "faults", "mode": mode}
            )
            plan = dataclasses.replace(PLAN, timeout_s=2.0) if mode == 3 else PLAN
            pid = measurer.worker_pid
            m = measurer.measure(faults, cand, build, problem, plan)
            assert m.outcome is expected, (mode, m.outcome, m.error)
            if mode in (1, 2, 3, 6):
                assert measurer.worker_pid is None
            elif pid is not None:
                assert measurer.worker_pid == pid
            if mode == 1:
                assert "cudaErrorIllegalAddress" in m.error
            if mode == 4:
                assert m.rel_l2_error is not None and m.rel_l2_error > 1e-3 and "rel_l2" in m.error
            if mode == 5:
                assert "CUDA_ERROR_INVALID_VALUE" in m.error
            if mode == 6:
                assert "cudaErrorAssert" in m.error and "Assertion" in m.error
        assert len(measurer.recoveries_s) == 4


def test_nondeterministic_and_input_clobbering_kernels(tmp_path, fake_gpu, faults):
    problem = faults.problem("n64k")
    with WorkerMeasurer() as measurer:
        racy = measurer.measure(
            faults,
            *binary(tmp_path, faults, problem, {}, {"kernel": "faults", "mode": "racy"}),
            problem,
            PLAN,
        )
        clobber = measurer.measure(
            faults,
            *binary(tmp_path, faults, problem, {}, {"kernel": "faults", "mode": "clobber"}),
            problem,
            PLAN,
        )
    assert racy.outcome is Outcome.NONDETERMINISTIC, racy.error
    assert clobber.outcome is Outcome.WRONG_RESULT and "modified input x" in clobber.error


def test_bad_image_missing_symbol_and_too_much_smem(tmp_path, fake_gpu, faults):
    problem = faults.problem("n64k")
    bad = tmp_path / "garbage.cubin"
    bad.write_bytes(b"\x7fELF not really")
    cand = faults.default_candidate()
    with WorkerMeasurer() as measurer:
        pid = None
        for build in (
            Build(cand.key(), (), "fake", Outcome.OK, binary_path=str(bad)),
            binary(tmp_path, faults, problem, {}, {"kernel": "other"})[1],
            binary(tmp_path, faults, problem, {}, {"kernel": "faults", "static_smem": 300_000})[1],
        ):
            m = measurer.measure(faults, cand, build, problem, PLAN)
            assert m.outcome is Outcome.LAUNCH_ERROR, m.error
            pid = pid or measurer.worker_pid
            assert measurer.worker_pid == pid  # all non-sticky: the worker carries on
        assert "too much shared memory" in m.error


def test_throttled_samples_make_it_inconclusive(tmp_path, fake_gpu, monkeypatch, saxpy):
    monkeypatch.setenv("FAKE_NVML_REASONS", "0x8")  # HW slowdown on every read
    problem = saxpy.problem("ragged")
    cand, build = binary(tmp_path, saxpy, problem, {}, {"kernel": "saxpy"})
    with WorkerMeasurer() as measurer:
        m = measurer.measure(saxpy, cand, build, problem, PLAN)
    assert m.outcome is Outcome.INCONCLUSIVE and m.summary is None
    assert m.excluded_samples > 0 and m.throttle_reasons & 0x8
    assert "excluded" in m.error


def test_sw_power_cap_is_recorded_not_excluded(tmp_path, fake_gpu, monkeypatch, saxpy):
    monkeypatch.setenv("FAKE_NVML_REASONS", "0x4")
    problem = saxpy.problem("ragged")
    cand, build = binary(tmp_path, saxpy, problem, {}, {"kernel": "saxpy"})
    with WorkerMeasurer() as measurer:
        m = measurer.measure(saxpy, cand, build, problem, PLAN)
    assert m.outcome is Outcome.OK and m.sw_power_capped and m.excluded_samples == 0


def test_energy_window(tmp_path, fake_gpu, monkeypatch, faults):
    monkeypatch.setattr(nvml_energy, "require_nvml", lambda device=0: None)  # parent-side check
    problem = faults.problem("n64k")
    cand, build = binary(tmp_path, faults, problem, {}, {"kernel": "faults", "mode": 0})
    plan = SamplingPlan(warmup_ms=1, rep_ms=1, min_samples=20, energy=True, energy_window_s=1.0)
    with WorkerMeasurer() as measurer:
        m = measurer.measure(faults, cand, build, problem, plan)
    assert m.outcome is Outcome.OK, m.error
    assert m.avg_power_w == pytest.approx(300.0, rel=0.15)
    assert m.energy_window_s is not None and 1.0 <= m.energy_window_s < 1.5
    assert m.energy_j is not None and m.energy_j > 0 and m.energy_launches > 0
    assert "tick-aligned" in m.energy_method


def test_reference_errors_surface_as_user_errors(tmp_path, fake_gpu):
    import shutil

    from ctune.errors import UserError

    for name in ("faults.cu", "faults.yaml"):
        shutil.copy(DATA / name, tmp_path / name)
    (tmp_path / "faults_ref.py").write_text(
        "def faults(xp, inputs, dims):\n    return {'y': 1 / 0}\n"
    )
    spec = load_spec(tmp_path / "faults.yaml")
    problem = spec.problem("n64k")
    cand, build = binary(tmp_path, spec, problem, {}, {"kernel": "faults"})
    with WorkerMeasurer() as measurer:
        with pytest.raises(UserError, match="ZeroDivisionError"):
            measurer.measure(spec, cand, build, problem, PLAN)
        assert measurer.worker_pid is not None  # a spec problem does not cost the worker


def test_a_verify_function_decides_in_the_worker(tmp_path, fake_gpu):
    """The spec's verify passes a result the tolerance would fail (mode 4 is off by 1), says
    False as a wrong result naming it, and what it raises is the spec's problem."""
    import shutil

    import yaml

    from ctune.errors import UserError

    for name in ("faults.cu", "faults.yaml", "faults_ref.py"):
        shutil.copy(DATA / name, tmp_path / name)
    (tmp_path / "check.py").write_text(
        "import numpy as np\n\n\n"
        "def within_two(expected, got, atol=None):\n"
        "    return bool(np.abs(expected['y'] - got['y']).max() <= 2 and atol == 1e-5)\n\n\n"
        "def never(expected, got):\n    return False\n\n\n"
        "def broken(expected, got, atol=None):\n    return expected['nope']\n"
    )
    raw = yaml.safe_load((tmp_path / "faults.yaml").read_text())
    outcomes = {}
    for function in ("within_two", "never", "broken"):
        raw["verify"] = {"python": f"check.py:{function}"}
        (tmp_path / "faults.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
        spec = load_spec(tmp_path / "faults.yaml")
        problem = spec.problem("n64k")
        cand, build = binary(tmp_path, spec, problem, {"MODE": 4}, {"kernel": "faults", "mode": 4})
        with WorkerMeasurer() as measurer:
            try:
                m = measurer.measure(spec, cand, build, problem, PLAN)
                outcomes[function] = (m.outcome, m.error)
            except UserError as exc:
                outcomes[function] = (None, str(exc))
                assert measurer.worker_pid is not None  # a spec problem does not cost the worker
    assert outcomes["within_two"] == (Outcome.OK, "")
    assert outcomes["never"][0] is Outcome.WRONG_RESULT
    assert re.search(
        r"verify check\.py:never returned False on check 1 \(seed \d+\)", outcomes["never"][1]
    )
    assert outcomes["broken"][0] is None
    assert "check.py:broken raised KeyError" in outcomes["broken"][1]


def test_a_plan_that_may_prune_is_screened_and_a_pruned_one_is_not_checked(
    tmp_path, fake_gpu, saxpy
):
    problem = saxpy.problem("ragged")
    cand, build = binary(tmp_path, saxpy, problem, {}, {"kernel": "saxpy"})
    with WorkerMeasurer() as measurer:
        full = measurer.measure(saxpy, cand, build, problem, PLAN)
        kept = measurer.measure(
            saxpy, cand, build, problem, dataclasses.replace(PLAN, prune_above_ms=1e6)
        )
        cut = measurer.measure(
            saxpy, cand, build, problem, dataclasses.replace(PLAN, prune_above_ms=1e-9)
        )
        longer = measurer.measure(
            saxpy,
            cand,
            build,
            problem,
            dataclasses.replace(PLAN, prune_above_ms=1e6, warmup_ms=20),
        )
    assert full.outcome is Outcome.OK and not full.pruned
    assert "screened" not in full.sampling_note  # no threshold: no screen
    assert not kept.pruned and len(kept.samples_ms) == len(full.samples_ms)
    assert "screened first" in kept.sampling_note and kept.rel_l2_error is not None
    # the screen's warm-up (3 ms at most), then the rest of the plan's 20 ms
    assert "warm-up" in longer.sampling_note and "screened first" in longer.sampling_note
    warmed = re.search(r"warm-up \d+ launches, (\d+) ms", longer.sampling_note)
    assert warmed and int(warmed.group(1)) >= 19
    assert cut.outcome is Outcome.OK and cut.pruned and cut.summary is not None
    assert 10 <= len(cut.samples_ms) < len(full.samples_ms)
    assert "pruned after" in cut.sampling_note
    assert cut.rel_l2_error is None and full.rel_l2_error is not None  # pruned: not checked


def test_fresh_processes_start_side_by_side_and_each_measures_once(tmp_path, fake_gpu, saxpy):
    problem = saxpy.problem("ragged")
    cand, build = binary(tmp_path, saxpy, problem, {}, {"kernel": "saxpy"})
    with WorkerMeasurer() as measurer:
        measurer.prestart(3)
        spares = {w.pid for w, ready in measurer._spares if ready and w.alive}
        assert len(spares) == 3  # all three up before any of them measured
        pids = []
        for _ in range(3):
            measurer.restart()
            m = measurer.measure(saxpy, cand, build, problem, PLAN)
            assert m.outcome is Outcome.OK
            pids.append(measurer.worker_pid)
        assert set(pids) == spares and measurer.workers_started == 3
        runs = measurer.remeasure(saxpy, [(cand, build)], problem, PLAN, 3)
        assert [m.outcome for m in runs[cand.key()]] == [Outcome.OK] * 3
        assert measurer.workers_started == 6 and not measurer._spares


def test_spares_started_with_the_worker_are_up_before_it_measures_and_serve_confirmation(
    tmp_path, fake_gpu, saxpy
):
    problem = saxpy.problem("ragged")
    cand, build = binary(tmp_path, saxpy, problem, {}, {"kernel": "saxpy"})
    with WorkerMeasurer() as measurer:
        measurer.prestart(4, wait=False)  # as a search does: its worker and three rounds
        assert measurer.measure(saxpy, cand, build, problem, PLAN).outcome is Outcome.OK
        # no spare may still be creating its context while the worker measures
        assert len(measurer._spares) == 3 and all(ready for _, ready in measurer._spares)
        spares = {w.pid for w, _ in measurer._spares}
        runs = measurer.remeasure(saxpy, [(cand, build)], problem, PLAN, 3)
        assert [m.outcome for m in runs[cand.key()]] == [Outcome.OK] * 3
        assert measurer.workers_started == 4 and measurer.worker_pid in spares


def test_spares_started_beside_a_live_worker_are_up_before_it_measures_again(
    tmp_path, fake_gpu, saxpy
):
    """A problem set's next shape: its search starts the confirmation's spares while the
    last shape's worker is still live. On an H200 their start-up (a CUDA context each)
    inflated the next measurements' p99 2-22x; none may still be starting when one times."""
    problem = saxpy.problem("ragged")
    cand, build = binary(tmp_path, saxpy, problem, {}, {"kernel": "saxpy"})
    with WorkerMeasurer() as measurer:
        assert measurer.measure(saxpy, cand, build, problem, PLAN).outcome is Outcome.OK
        live = measurer.worker_pid
        measurer.prestart(3, wait=False)
        assert not all(ready for _, ready in measurer._spares)  # still starting
        assert measurer.measure(saxpy, cand, build, problem, PLAN).outcome is Outcome.OK
        assert measurer.worker_pid == live  # the same worker measured
        assert len(measurer._spares) == 3 and all(ready for _, ready in measurer._spares)


def test_prepare_sets_up_a_measurement_without_timing_it(tmp_path, fake_gpu, saxpy):
    """What a confirmation round's fresh worker does while the last one exits: the spec,
    the check's references, the module and the flush buffer, answered ok, nothing timed;
    and, sent before any build exists, the same without the module."""
    from ctune.measure.worker import MeasureRequest, measure_message

    problem = saxpy.problem("ragged")
    cand, build = binary(tmp_path, saxpy, problem, {}, {"kernel": "saxpy"})
    request = MeasureRequest(saxpy.yaml_path, cand, build, problem.name, PLAN)
    with WorkerMeasurer() as measurer:
        measurer.device_info()
        worker = measurer._worker
        assert worker is not None
        ahead = dataclasses.replace(request, build=None)
        answer = worker.request(measure_message(0, ahead, op="prepare"), 30.0)
        assert answer == {"id": answer["id"], "ok": True}
        answer = worker.request(measure_message(0, request, op="prepare"), 30.0)
        assert answer == {"id": answer["id"], "ok": True}
        missing = dataclasses.replace(build, binary_path=str(tmp_path / "gone.cubin"))
        bad = MeasureRequest(saxpy.yaml_path, cand, missing, problem.name, PLAN)
        refused = worker.request(measure_message(0, bad, op="prepare"), 30.0)
        assert not refused["ok"] and refused["kind"] == "user" and not refused.get("fatal")
        assert measurer.measure(saxpy, cand, build, problem, PLAN).outcome is Outcome.OK

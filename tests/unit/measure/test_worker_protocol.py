"""The worker protocol (pure) and WorkerProcess against scripted child processes."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import textwrap
import time

import pytest

from ctune.measure import SamplingPlan
from ctune.measure import worker as W
from ctune.measure.session import (
    LineReader,
    WorkerDied,
    WorkerProcess,
    WorkerTimeout,
    describe_exit,
)
from ctune.records import (
    Build,
    Candidate,
    DeviceInfo,
    Measurement,
    Outcome,
    Quantiles,
    Resources,
)


def test_encode_decode_round_trip_with_non_finite_values():
    line = W.encode({"id": 3, "x": math.inf, "y": [1.5, None]})
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    back = W.decode(line)
    assert back["id"] == 3 and math.isinf(back["x"]) and back["y"] == [1.5, None]


@pytest.mark.parametrize("line", [b"[]", b'{"op": "x"}', b'{"id": "1"}', b"not json"])
def test_decode_rejects_non_messages(line):
    with pytest.raises(ValueError):
        W.decode(line)


def test_measure_request_round_trip(tmp_path):
    candidate = Candidate.of("saxpy", {"BLOCK": 128, "UNROLL": 2, "fast_math": True})
    build = Build(
        candidate.key(),
        ("nvcc", "-O3"),
        "nvcc 13.0",
        Outcome.OK,
        binary_path="/x/kernel.cubin",
        sass_sha256="ab",
        compile_s=0.3,
        resources=Resources(regs=32),
        build_key="k",
    )
    plan = SamplingPlan(quantile=0.99, l2_policy="hot", timeout_s=3.0)
    request = W.MeasureRequest(tmp_path / "saxpy.yaml", candidate, build, "n1m", plan)
    message = W.measure_message(7, request)
    wire = W.decode(W.encode(message))
    assert W.parse_measure(wire) == request
    # a set-up sent before any build exists carries none
    ahead = dataclasses.replace(request, build=None)
    wire = W.decode(W.encode(W.measure_message(8, ahead, op="prepare")))
    assert wire["build"] is None and W.parse_measure(wire) == ahead


def test_protocol_version_is_checked(tmp_path):
    candidate = Candidate.of("k", {})
    build = Build(candidate.key(), (), "t", Outcome.OK)
    message = W.measure_message(
        1, W.MeasureRequest(tmp_path, candidate, build, "p", SamplingPlan())
    )
    message["protocol"] = 99
    with pytest.raises(ValueError, match="protocol"):
        W.parse_measure(message)


def test_measurement_response_round_trip():
    device = DeviceInfo("NVIDIA H100", "GPU-1", "sm_90", "580.1", 132, 80 << 30, 50 << 20)
    summary = Quantiles(3, 1.0, 1.0, 1.1, 1.2, 0.9, 1.3, 0.1, (0.9, 1.1), (1.0, 1.3), (1.0, 1.3))
    m = Measurement(
        "abc",
        "n1m",
        Outcome.WRONG_RESULT,
        device=device,
        samples_ms=(0.9, 1.0, 1.3),
        summary=summary,
        rel_l2_error=math.inf,
        l2_flush_bytes=256 << 20,
        sampling_note="n=3",
    )
    wire = W.decode(W.encode(W.measurement_response(4, m, fatal=True)))
    assert wire["fatal"] is True and wire["ok"] is True
    assert W.parse_measurement(wire) == m


def test_error_response_keeps_the_tail():
    r = W.error_response(2, "internal", "x" * 10000 + "END", True)
    assert r["error"].endswith("END") and len(r["error"]) == W.ERROR_TAIL_CHARS and r["fatal"]


def test_reference_cache_evicts_least_recent():
    cache = W.ReferenceCache(max_bytes=2500)

    class Blob:
        nbytes = 1000

    cache.put(("a",), {"y": Blob()})
    cache.put(("b",), {"y": Blob()})
    assert cache.get(("a",)) is not None  # a is now the most recent
    cache.put(("c",), {"y": Blob()})
    assert cache.get(("b",)) is None and cache.get(("a",)) is not None and len(cache) == 2


def test_line_reader_splits_partial_chunks():
    reader = LineReader()
    reader.feed(b'{"id": 1}\n{"id"')
    assert reader.pop() == b'{"id": 1}'
    assert reader.pop() is None
    reader.feed(b": 2}\n\n")
    assert reader.pop() == b'{"id": 2}'
    assert reader.pop() == b""
    small = LineReader(max_line_bytes=10)
    with pytest.raises(ValueError):
        small.feed(b"x" * 11)


def test_describe_exit():
    assert describe_exit(-9) == "was killed by SIGKILL"
    assert describe_exit(3) == "exited with status 3"
    assert describe_exit(None) == "did not exit"


# --- WorkerProcess with scripted children -------------------------------------------


def script(body: str) -> list[str]:
    prelude = textwrap.dedent(
        """
        import json, sys, time, os
        def send(m):
            sys.stdout.write(json.dumps(m) + "\\n"); sys.stdout.flush()
        send({"id": 0, "ready": True, "device": {}})
        """
    )
    return [sys.executable, "-c", prelude + textwrap.dedent(body)]


def test_request_and_big_answers():
    worker = WorkerProcess(
        script(
            """
            for line in sys.stdin:
                req = json.loads(line)
                send({"id": req["id"], "ok": True, "blob": "x" * 300000})
            """
        )
    )
    try:
        assert worker.wait_ready(10)["ready"]
        for _ in range(3):
            answer = worker.request({"op": "anything"}, 10)
            assert len(answer["blob"]) == 300000
        assert worker.requests == 3
    finally:
        worker.close()
    assert not worker.alive


def test_timeout_then_kill():
    worker = WorkerProcess(script("time.sleep(600)\n"))
    try:
        worker.wait_ready(10)
        started = time.monotonic()
        with pytest.raises(WorkerTimeout):
            worker.request({"op": "x"}, 0.5)
        assert 0.45 <= time.monotonic() - started < 5
        worker.kill()
        assert worker.proc.returncode == -9
    finally:
        worker.close()


def test_death_mid_request_carries_status_and_stderr():
    worker = WorkerProcess(
        script(
            """
            sys.stdin.readline()
            print("boom from the worker", file=sys.stderr, flush=True)
            os._exit(7)
            """
        )
    )
    try:
        worker.wait_ready(10)
        with pytest.raises(WorkerDied) as info:
            worker.request({"op": "x"}, 10)
        assert info.value.status == "exited with status 7"
        assert "boom from the worker" in info.value.stderr_tail
    finally:
        worker.close()


def test_stale_answers_are_skipped():
    worker = WorkerProcess(
        script(
            """
            for line in sys.stdin:
                req = json.loads(line)
                send({"id": 999, "ok": True})
                send({"id": req["id"], "ok": True, "right": True})
            """
        )
    )
    try:
        worker.wait_ready(10)
        assert worker.request({"op": "x"}, 10)["right"]
    finally:
        worker.close()


def test_startup_failure_is_reported():
    from ctune.measure.session import WorkerStartError

    argv = [
        sys.executable,
        "-c",
        "import json; print(json.dumps({'id': 0, 'ready': False, "
        "'error': 'no GPU here'}), flush=True)",
    ]
    worker = WorkerProcess(argv)
    try:
        with pytest.raises(WorkerStartError, match="no GPU here"):
            worker.wait_ready(10)
    finally:
        worker.close()


def test_worker_command_and_env():
    from ctune.measure.session import worker_command, worker_env

    assert worker_command(2)[-4:] == ["-m", "ctune.measure.worker", "--device", "2"]
    assert worker_command(0, ["x", "y"]) == ["x", "y", "--device", "0"]
    env = worker_env()
    from pathlib import Path

    import ctune

    assert env["PYTHONPATH"].split(":")[0] == str(Path(ctune.__file__).resolve().parent.parent)
    assert json.dumps(env)  # plain strings only

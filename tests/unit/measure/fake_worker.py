"""A stand-in measurement worker that speaks ctune's worker protocol without a GPU.

Used by the CPU tests of ctune.measure.session: the candidate's MODE gene
scripts what happens, like the real tests/data/kernels/faults.yaml on a GPU:

  0 ok                        4 a user error (bad spec)
  1 sticky fault: reports      5 an internal (harness) error, fatal
    RUNTIME_FAULT, exits 3     6 non-sticky LAUNCH_ERROR, carries on
  2 dies by SIGSEGV mid-request
  3 hangs (and starts a grandchild that must die with it)

``--health FILE``: a health request fails while FILE contains "bad".
A ``prepare`` request is counted (``prepared``; ``ahead``: those without a build, sent before
one existed); an ok measurement's note says how many came before it, and when its problem
was set up (``set_up_at``, time.monotonic, which all processes share).
``--setup-s S``: the first request (prepare or measure) for a problem takes S seconds more,
as the real worker's does while CuPy compiles a new shape's reference and check kernels.
``--pidfile FILE``: the hang's grandchild writes its pid there.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def device() -> dict:
    return {
        "name": "Stand-in GPU",
        "uuid": "GPU-00000000-0000-0000-0000-000000000000",
        "sm": "sm_90",
        "driver": "0.0",
        "sm_count": 132,
        "memory_bytes": 1,
        "l2_bytes": 1,
    }


def measurement(key: str, problem: str, outcome: str, **extra: object) -> dict:
    return {
        "candidate_key": key,
        "problem": problem,
        "outcome": outcome,
        "device": device(),
        **extra,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--health", default="")
    parser.add_argument("--pidfile", default="")
    parser.add_argument("--no-gpu", action="store_true")
    parser.add_argument("--setup-s", type=float, default=0.0)
    parser.add_argument("--exit-s", type=float, default=0.0)  # its end after the exit answer
    args = parser.parse_args()
    if args.no_gpu:
        send({"id": 0, "ok": False, "ready": False, "error": "CUDARuntimeError: no CUDA GPU"})
        return 2
    send({"id": 0, "ok": True, "ready": True, "pid": os.getpid(), "device": device()})
    seq = prepared = ahead = 0
    set_up: dict[str, float] = {}  # problem -> when its set-up ended (time.monotonic)

    def set_up_problem(problem: str) -> None:
        if problem not in set_up:
            time.sleep(args.setup_s)
            set_up[problem] = time.monotonic()

    for line in sys.stdin:
        request = json.loads(line)
        rid, op = request["id"], request.get("op")
        if op == "exit":
            send({"id": rid, "ok": True})
            time.sleep(args.exit_s)  # as a real worker's end waits for the driver
            return 0
        if op == "prepare":
            prepared += 1
            ahead += request.get("build") is None
            set_up_problem(request["problem"])
            send({"id": rid, "ok": True})
            continue
        if op == "health":
            bad = False
            if args.health and os.path.exists(args.health):
                with open(args.health) as handle:
                    bad = handle.read().strip() == "bad"
            send(
                {
                    "id": rid,
                    "ok": True,
                    "healthy": not bad,
                    "detail": "bad" if bad else "",
                    "fatal": bad,
                }
            )
            if bad:
                return 3
            continue
        genes = request["candidate"]["genes"]
        mode = int(genes.get("MODE", 0))
        key = str(genes.get("KEY", "k"))
        problem = request["problem"]
        set_up_problem(problem)
        seq += 1
        if mode == 0:
            note = (
                f"pid={os.getpid()} seq={seq} set_up_at={set_up[problem]} "
                f"prepared={prepared} ahead={ahead}"
            )
            m = measurement(key, problem, "ok", samples_ms=[1.0, 1.1, 1.2], sampling_note=note)
            send({"id": rid, "ok": True, "measurement": m, "fatal": False})
        elif mode == 1:
            print("Assertion `i != 0` failed.", file=sys.stderr, flush=True)
            m = measurement(
                key, problem, "runtime_fault", error="CUDARuntimeError: cudaErrorAssert"
            )
            send({"id": rid, "ok": True, "measurement": m, "fatal": True})
            return 3
        elif mode == 2:
            print("about to crash", file=sys.stderr, flush=True)
            os.kill(os.getpid(), signal.SIGSEGV)
        elif mode == 3:
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            if args.pidfile:
                with open(args.pidfile, "w") as handle:
                    handle.write(str(child.pid))
            time.sleep(600)
        elif mode == 4:
            send({"id": rid, "ok": False, "kind": "user", "error": "spec: bad", "fatal": False})
        elif mode == 5:
            send(
                {
                    "id": rid,
                    "ok": False,
                    "kind": "internal",
                    "error": "Traceback: boom",
                    "fatal": True,
                }
            )
            return 3
        elif mode == 6:
            m = measurement(key, problem, "launch_error", error="cudaErrorInvalidConfiguration")
            send({"id": rid, "ok": True, "measurement": m, "fatal": False})
    return 0


if __name__ == "__main__":
    sys.exit(main())

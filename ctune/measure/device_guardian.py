"""The guardian: a small process that puts the GPU's clocks and power limit back when the
process that changed them ends, however it ends.

The parent starts it before its first change and holds the write end of a pipe to its
stdin; EOF comes when the parent closes it or dies, and the guardian then restores what the
parent found (docs/search.md, "Device genes"). It runs in its own session, ignores SIGINT
and SIGHUP, and the pipe is close-on-exec, so no measuring worker holds it open. Run as
``python -m ctune.measure.device_guardian --nvml SPEC --device N [--power-limit-mw MW]
[--reset-clocks]``; it prints ``ready``, then ``restored`` (or ``restore failed: ...``).
"""

from __future__ import annotations

import argparse
import contextlib
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

from ctune.errors import ToolchainError
from ctune.measure.device_settings import AsFound, NvmlDevice, load_nvml, restore

READY_TIMEOUT_S = 30.0
EXIT_TIMEOUT_S = 10.0


def _say(text: str) -> None:
    with contextlib.suppress(OSError):  # the parent may be gone: restore anyway
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ctune.measure.device_guardian")
    parser.add_argument("--nvml", default="pynvml")
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--power-limit-mw", type=int, default=None)
    parser.add_argument("--reset-clocks", action="store_true")
    args = parser.parse_args(argv)
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    try:
        device = NvmlDevice(load_nvml(args.nvml), args.device)
    except ToolchainError as exc:
        _say(f"failed: {exc}")
        return 3
    _say("ready")
    while sys.stdin.buffer.read(4096):  # blocks until the parent closes it or dies
        pass
    try:
        restore(device, AsFound(args.power_limit_mw, args.reset_clocks))
    except ToolchainError as exc:
        _say(f"restore failed: {exc}")
        return 1
    finally:
        device.close()
    _say("restored")
    return 0


class Guardian:
    """The parent's handle on a guardian process."""

    def __init__(self, nvml_spec: str, device: int, found: AsFound) -> None:
        argv = [
            sys.executable,
            "-m",
            "ctune.measure.device_guardian",
            "--nvml",
            nvml_spec,
            "--device",
            str(device),
        ]
        if found.power_limit_mw is not None:
            argv += ["--power-limit-mw", str(found.power_limit_mw)]
        if found.clocks:
            argv.append("--reset-clocks")
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,  # out of the terminal's process group: Ctrl-C spares it
            close_fds=True,
        )
        line = self._line(READY_TIMEOUT_S)
        if line != "ready":
            self.proc.kill()
            self.proc.wait()
            raise ToolchainError(
                f"the device-settings guardian did not start ({line or 'no answer'}); "
                "nothing on the GPU was changed"
            )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _line(self, timeout_s: float) -> str:
        assert self.proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout_s):
                return ""
        return self.proc.stdout.readline().decode(errors="replace").strip()

    def release(self, timeout_s: float = EXIT_TIMEOUT_S) -> str:
        """Close the pipe: the guardian restores and exits. Returns its last line."""
        assert self.proc.stdin is not None
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        deadline = time.monotonic() + timeout_s
        line = self._line(timeout_s)
        try:
            self.proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return line or "killed: did not exit"
        return line


if __name__ == "__main__":
    sys.exit(main())

"""A journal held by another process, as a second search running on it holds it.

The journal's lock is a ``flock`` (``ctune/locking.py``), which a process always holds
against another process; the tests that a second search is refused, and that a killed
holder blocks nothing, need that other process.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import ctune

#: the holder: it opens the journal (resumes it, or creates it with a bare header), says
#: so on stdout, and keeps it until its stdin closes
_HOLD = """
import sys
from pathlib import Path
from ctune.search.journal import Journal
path = Path(sys.argv[1])
journal = Journal.resume(path)[0] if path.exists() else Journal.create(path, {"kernel": "k"})
print("held", flush=True)
sys.stdin.read()
journal.close()
"""


@contextlib.contextmanager
def held_elsewhere(path: Path) -> Iterator[subprocess.Popen[str]]:
    """``path`` open as a running search has it, in another process (this ctune's code),
    until the block ends; the block may kill that process first (``.kill()``)."""
    source = str(Path(ctune.__file__).resolve().parents[1])
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": source},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        yield holder
    finally:
        with contextlib.suppress(subprocess.TimeoutExpired):
            holder.communicate(timeout=60)
        holder.kill()
        holder.wait()


__all__ = ["held_elsewhere"]

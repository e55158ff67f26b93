"""The ``ctune`` program: its console script (``run``) and ``python -m ctune``.

A Ctrl-C or SIGTERM ends the program one way from its first step: exit 130 and one line
saying what was kept (``ctune/interrupts.py``). The command line (typer, rich) takes tens
of milliseconds to import, so SIGTERM is taken before it is, and a stop that comes while
it loads, before ``cli.main`` can answer it, is answered here. Only the interpreter's own
start, and ``import ctune`` (kept light for this), come before.
"""

import contextlib
import sys

from ctune.interrupts import terminate_as_interrupt_from_the_start


def run() -> None:
    """Take the stop signals, then load and run the command line (``cli.console_main``)."""
    terminate_as_interrupt_from_the_start()
    try:
        from ctune.cli import console_main

        console_main()
    except KeyboardInterrupt as exc:  # came before cli.main could take it
        _stopped_while_starting(exc)


def _stopped_while_starting(exc: KeyboardInterrupt) -> None:
    """Exit 130 with the line ``cli.main`` ends an interrupt with, written plainly: the
    command line may be half imported, so nothing of it is imported again. From here on
    no signal changes that (``settle_for_exit``, which also clears CPython's mark of an
    unhandled interrupt, left when one passes out of code that ``exec`` built)."""
    from ctune.errors import EXIT_INTERRUPTED
    from ctune.interrupts import INTERRUPTED, kept_by, settle_for_exit

    settle_for_exit()
    with contextlib.suppress(OSError):  # no stderr to say it on (closed): the exit code does
        print(INTERRUPTED, kept_by(exc), file=sys.stderr, flush=True)
    sys.exit(EXIT_INTERRUPTED)


if __name__ == "__main__":
    run()

"""The ctune command line: a thin shell over service functions.

Each subcommand lives in its own module and registers itself on ``app``.
``main()`` holds the single ``except`` that maps ctune's errors to one line
and an exit code; ``CTUNE_DEBUG=1`` adds the traceback.

Exit codes: 0 ok; 1 gate or check failed (stale, regressed); 2 bad input;
3 toolchain or GPU missing; 4 inconclusive; 130 interrupted.
"""

from __future__ import annotations

import os
import sys

import typer

from ctune.errors import EXIT_INTERRUPTED, CtuneError

app = typer.Typer(
    name="ctune",
    help=__doc__.split("\n\n", 1)[0] if __doc__ else None,
    epilog="Exit codes: 0 ok, 1 check/gate failed, 2 bad input, 3 toolchain/GPU missing, "
    "4 inconclusive, 130 interrupted. Set CTUNE_DEBUG=1 for tracebacks.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _register_commands() -> None:
    # Each module adds its commands to `app`; imports here are light (heavy
    # libraries are imported inside the command functions).
    from ctune.cli import commands  # noqa: F401


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run the app, map known errors to one line."""
    from ctune.cli.render import error_line

    _register_commands()
    try:
        app(args=argv, standalone_mode=False)
    except CtuneError as exc:
        if os.environ.get("CTUNE_DEBUG"):
            raise
        error_line(str(exc))
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        error_line("interrupted")
        sys.exit(EXIT_INTERRUPTED)
    except SystemExit:
        raise
    except Exception as exc:  # click usage errors and the like
        import click

        if isinstance(exc, click.exceptions.Exit):
            sys.exit(exc.exit_code)
        if isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        if isinstance(exc, click.exceptions.Abort):
            error_line("aborted")
            sys.exit(EXIT_INTERRUPTED)
        if os.environ.get("CTUNE_DEBUG"):
            raise
        error_line(f"internal error: {type(exc).__name__}: {exc} (rerun with CTUNE_DEBUG=1)")
        sys.exit(70)

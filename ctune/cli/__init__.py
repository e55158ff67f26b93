"""The ctune command line: a thin shell over service functions.

Each subcommand lives in its own module and registers itself on ``app``.
``main()`` holds the single ``except`` that maps ctune's errors to one line
and an exit code; ``CTUNE_DEBUG=1`` adds the traceback.

Exit codes: 0 ok; 1 gate or check failed (stale, regressed, unpushed under
--strict); 2 bad input; 3 toolchain, GPU or environment missing (a full disk too); 4
inconclusive; 5 registry push or pull failed (local commits kept); 130 interrupted
(Ctrl-C or SIGTERM, with one line saying what was kept: ``ctune/interrupts.py``).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Mapping
from typing import Annotated, Any

import typer
import typer.main

from ctune.errors import (
    EXIT_INTERRUPTED,
    EXIT_TOOLCHAIN,
    EXIT_USER_ERROR,
    CtuneError,
    UserError,
)

#: exit status of a bug in ctune itself (sysexits EX_SOFTWARE); never a user's doing
EXIT_INTERNAL = 70
#: what the script of `ctune --show-completion` sets to ask for completions (typer's name)
COMPLETE_VAR = "_CTUNE_COMPLETE"

app = typer.Typer(
    name="ctune",
    help="Tune nvcc/ptxas flags, launch configuration and template parameters of a CUDA "
    "kernel on the real GPU; keep the Pareto-best builds as versioned artifacts.",
    epilog="Exit codes: 0 ok, 1 check/gate failed, 2 bad input, 3 toolchain/GPU missing or "
    "disk full, 4 inconclusive, 5 registry push/pull failed (nothing lost locally), 130 "
    "interrupted (Ctrl-C or SIGTERM). "
    "Set CTUNE_DEBUG=1 for tracebacks.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion, --show-completion (cli/complete.py)
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from ctune import __version__
        from ctune.cli.render import line

        line(f"ctune {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", "-V", callback=_version, is_eager=True, help="print the version and exit"
        ),
    ] = False,
) -> None:
    """Tune nvcc/ptxas flags, launch configuration and template parameters of a CUDA kernel
    on the real GPU; keep the Pareto-best builds as versioned artifacts."""


def _register_commands() -> None:
    # Each module adds its commands to `app`; imports here are light (heavy
    # libraries are imported inside the command functions).
    from ctune.cli import commands  # noqa: F401
    from ctune.cli.help import tidy

    tidy(app)


@functools.cache
def _command() -> Any:
    """The click command tree, built once per process (a test suite calls main often)."""
    _register_commands()
    return typer.main.get_command(app)


def main(argv: list[str] | None = None, environ: Mapping[str, str] | None = None) -> None:
    """Console entry point: run the app, map every failure to one line and an exit code.

    ``environ`` stands in for ``os.environ`` where the command resolves its settings (and
    for ``CTUNE_DEBUG``): a caller in this process passes settings without mutating the
    process's environment (``cli/invocation.py``)."""
    if _answer_version(sys.argv[1:] if argv is None else argv):
        return
    from ctune.cli.invocation import inside_a_command, invoked_with
    from ctune.cli.render import error_line, interrupted_line, stop_for_closed_pipe, warn_line
    from ctune.compile.process import runs_end_with_the_command
    from ctune.config import debug_enabled, unknown_variables
    from ctune.interrupts import ignored, kept_by, terminate_as_interrupt
    from ctune.writes import is_disk_full, outputs_end_with_the_command

    env = os.environ if environ is None else environ
    if not inside_a_command():  # once per command the user ran
        for warning in unknown_variables(env):
            warn_line(warning)
    try:
        if argv is not None and any("\x00" in arg for arg in argv):
            raise UserError("an argument contains a NUL byte, which no path or value can hold")
        with (
            invoked_with(environ),
            terminate_as_interrupt(),
            runs_end_with_the_command(),
            outputs_end_with_the_command(),
        ):
            _run(argv)
    except CtuneError as exc:
        if debug_enabled(env):
            raise
        error_line(str(exc))
        sys.exit(exc.exit_code)
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM
        with ignored():  # another Ctrl-C now would turn the exit into a traceback
            interrupted_line(kept_by(exc))
            sys.exit(EXIT_INTERRUPTED)
    except SystemExit:
        raise
    except BrokenPipeError:
        stop_for_closed_pipe()
    except Exception as exc:  # click usage errors, OS errors on a path, bugs
        click_exc = _click_outcome(exc)
        if click_exc is not None:
            sys.exit(click_exc)
        if debug_enabled(env):
            raise
        if is_disk_full(exc):
            assert isinstance(exc, OSError)
            where = exc.filename if exc.filename is not None else "a file ctune was writing"
            error_line(f"{where}: {exc.strerror or 'no space left'}; free space and run again")
            sys.exit(EXIT_TOOLCHAIN)
        if isinstance(exc, OSError) and exc.filename is not None:
            # a path the user named that the OS refused (too long, a directory, no access)
            error_line(f"{exc.filename}: {exc.strerror or exc}; check the path")
            sys.exit(EXIT_USER_ERROR)
        error_line(f"internal error: {type(exc).__name__}: {exc} (rerun with CTUNE_DEBUG=1)")
        sys.exit(EXIT_INTERNAL)


def console_main() -> None:
    """The ``ctune`` program and ``python -m ctune`` (started by ``ctune/__main__.py``):
    :func:`main`, then an exit that a late Ctrl-C cannot change (``ctune/interrupts.py``,
    ``settle_for_exit``). Callers in this process (tests, the API) use :func:`main`, which
    leaves the signals as it found them."""
    try:
        main()
    finally:
        from ctune.interrupts import settle_for_exit

        settle_for_exit()


def _answer_version(args: list[str]) -> bool:
    """``ctune --version`` alone: answered before the command tree (and rich) is loaded, so
    that it costs an interpreter start and no more. Any other use of the flag goes through
    click's eager option (``_version``), with the same line."""
    if list(args) not in (["--version"], ["-V"]):
        return False
    from ctune import __version__

    try:
        print(f"ctune {__version__}", flush=True)  # no stdout at all (closed): prints nothing
    except BrokenPipeError:
        from ctune.cli.render import stop_for_closed_pipe

        stop_for_closed_pipe()
    return True


def _run(argv: list[str] | None) -> None:
    """Parse the command line and run the command, letting every exception through.

    Not typer's ``main``: with ``standalone_mode=False`` it turns a Ctrl-C into an exit
    code it returns (130), which a caller that ignores the return value reads as success,
    and the text of what the command kept would be lost."""
    command = _command()
    args = sys.argv[1:] if argv is None else list(argv)
    if os.environ.get(COMPLETE_VAR):  # the shell's completion script asking (one TAB press)
        command.main(args, prog_name="ctune", complete_var=COMPLETE_VAR)  # exits
    with command.make_context("ctune", args) as ctx:
        command.invoke(ctx)


def _click_classes(name: str) -> tuple[type, ...]:
    """A click exception class from every click typer may run on (newer typer bundles
    its own copy as ``typer._click``; ``typer.Exit`` is its own)."""
    found: list[type] = []
    for module_name in ("typer", "typer._click", "typer._click.exceptions", "click.exceptions"):
        try:
            module = __import__(module_name, fromlist=["_"])
        except ImportError:
            continue
        cls = getattr(module, name, None)
        if isinstance(cls, type) and cls not in found:
            found.append(cls)
    return tuple(found)


def _usage_line(exc: Exception) -> str:
    """click's usage error as one line: the message, and where the help is."""
    ctx = getattr(exc, "ctx", None)
    command = getattr(ctx, "command_path", "") or "ctune"
    message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    message = " ".join(str(message).split())
    return f"{message} (see `{command} --help`)"


def _click_outcome(exc: Exception) -> int | None:
    """Exit code for click's own exceptions (usage errors, --help exits, aborts), else None."""
    from ctune.cli.render import error_line

    if isinstance(exc, _click_classes("Exit")):
        return int(getattr(exc, "exit_code", 0))
    if type(exc).__name__ == "NoArgsIsHelpError":  # `ctune` alone: the help is the answer
        help_text = exc.format_message() if hasattr(exc, "format_message") else ""
        if help_text.strip():  # plain click; rich help has printed itself already
            sys.stdout.write(help_text + "\n")
        return EXIT_USER_ERROR
    if isinstance(exc, _click_classes("UsageError")):
        error_line(_usage_line(exc))
        return EXIT_USER_ERROR
    if isinstance(exc, _click_classes("ClickException")):
        error_line(" ".join(str(exc.format_message()).split()))  # type: ignore[attr-defined]
        return int(getattr(exc, "exit_code", 1)) or 1
    if isinstance(exc, _click_classes("Abort")):
        error_line("aborted")
        return EXIT_INTERRUPTED
    return None

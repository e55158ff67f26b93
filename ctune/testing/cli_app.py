"""``ctune.cli.main`` (its one error mapping and its exit codes) as a Typer app for CliRunner.

Tests invoke the real entry point through this, so what they assert is what a user sees:
the one-line errors and the documented exit codes, not Typer's defaults.
"""

from __future__ import annotations

import typer

ctune_main = typer.Typer(add_completion=False)


@ctune_main.command(
    context_settings={
        "ignore_unknown_options": True,
        "allow_extra_args": True,
        "help_option_names": [],
    }
)
def _main(ctx: typer.Context) -> None:
    from ctune.cli import main

    main(list(ctx.args))


__all__ = ["ctune_main"]

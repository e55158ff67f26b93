"""Help that reads like other command lines: ``-h``, value names instead of Python types.

Typer labels each option's value with its Python annotation (``<bool>``,
``<list[str]>``). Here a flag shows no value at all, an option without a
``metavar`` shows the conventional name of its type (``TEXT``, ``INTEGER``,
``PATH``), and an argument shows its name in capitals. Applied to every
command by :func:`tidy` when the app is assembled.
"""

from __future__ import annotations

from typing import Any

import typer

#: typer's type labels -> the names click and most command lines use
_NAMES = {
    "str": "TEXT",
    "int": "INTEGER",
    "float": "NUMBER",
    "path": "PATH",
    "bool": "",
}


def _type_name(param: Any) -> str:
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    label = getattr(annotation, "__name__", "") or str(annotation or "")
    if label == "list":  # list[X]: the element's name (the option is repeatable)
        args = getattr(annotation, "__args__", ())
        label = getattr(args[0], "__name__", "") if args else ""
    if getattr(getattr(param, "type_descriptor", None), "is_path", False):
        label = "path"
    return _NAMES.get(label.lower(), label.upper())


def tidy_param(param: Any) -> None:
    """Give ``param`` a readable metavar unless it has one."""
    if getattr(param, "metavar", None) is not None:
        return
    if getattr(param, "param_type_name", "") == "argument":
        param.metavar = str(param.name or "").upper()
        # its name already says what it is; typer would add the Python type beside it
        param.display_type_rich = lambda ctx: None
    elif getattr(param, "is_flag", False) or getattr(param, "count", False):
        param.metavar = ""
    else:
        param.metavar = _type_name(param)


def _with_tidy_params(base: type) -> type:
    class Tidy(base):  # type: ignore[valid-type,misc]
        def get_params(self, ctx: Any) -> list[Any]:
            params = super().get_params(ctx)
            for param in params:
                tidy_param(param)
            return params

    Tidy.__name__ = f"Tidy{base.__name__}"
    return Tidy


CtuneCommand = _with_tidy_params(typer.core.TyperCommand)
CtuneGroup = _with_tidy_params(typer.core.TyperGroup)


def reflow(text: str | None) -> str | None:
    """Join the hard-wrapped lines of each paragraph, so the terminal wraps them once.

    Typer's rich help keeps single newlines, so a docstring wrapped at 90 columns
    breaks again at 80. Blank lines, list items and click's ``\\b`` blocks stay."""
    if not text:
        return text
    import inspect

    out = []
    for para in inspect.cleandoc(text).split("\n\n"):
        lines = para.splitlines()
        if para.startswith("\b") or any(ln.lstrip().startswith("- ") for ln in lines):
            out.append(para)
        else:
            out.append(" ".join(ln.strip() for ln in lines))
    return "\n\n".join(out)


def _upgraded(cls: Any, base: type, tidy_cls: type) -> Any:
    """``tidy_cls`` where ``cls`` is typer's default (None, a placeholder or ``base``)."""
    real = getattr(cls, "value", cls)  # typer wraps unset values in DefaultPlaceholder
    return tidy_cls if real is None or real is base else cls


def tidy(app: typer.Typer) -> None:
    """Every command and group of ``app`` (and its sub-apps) uses the tidy classes."""
    core = typer.core
    app.info.cls = _upgraded(app.info.cls, core.TyperGroup, CtuneGroup)
    if isinstance(app.info.help, str):
        app.info.help = reflow(app.info.help)
    for command in app.registered_commands:
        command.cls = _upgraded(command.cls, core.TyperCommand, CtuneCommand)
        command.help = reflow(_text(command.help) or getattr(command.callback, "__doc__", None))
    for group in app.registered_groups:
        group.cls = _upgraded(group.cls, core.TyperGroup, CtuneGroup)
        if group.typer_instance is not None:
            tidy(group.typer_instance)


def _text(value: Any) -> str | None:
    real = getattr(value, "value", value)  # typer's DefaultPlaceholder
    return real if isinstance(real, str) else None


__all__ = ["CtuneCommand", "CtuneGroup", "reflow", "tidy", "tidy_param"]

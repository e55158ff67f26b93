"""quoting: what may go on nvcc's command line, and how a define is written there.

The rule itself is checked against the real nvcc in tests/compile/test_hostile_genes_nvcc.py;
these tests pin down which item is judged by which half of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctune.compile.command import build_argv
from ctune.errors import EXIT_USER_ERROR
from ctune.quoting import CommandLineError, check_argv, define_flag, value_refusal
from ctune.spec.space import CATALOGUE

SHELL_ACTIVE_OR_CONTROL = [
    "$(id)",
    "${HOME}",
    "`id`",
    "a\\b",
    'a"b',
    "a\nb",
    "a\rb",
    "\x7f",
    "\x9b",
]


def _argv(**over: object) -> list[str]:
    args: dict[str, object] = dict(
        nvcc="/usr/local/cuda/bin/nvcc",
        source=Path("/k/my kernels;<v2>/gemm & co.cu"),
        output=Path("/c/builds/.ab12-x_y/kernel.cubin"),
        arch="sm_90a",
        entry_kind="kernel",
        std="c++17",
        include_dirs=(Path("/k/my kernels;<v2>/include (x)"),),
        define_genes={"SHAPE": "cutlass::gemm::GemmShape<128, 128, 64>", "FLAG": True},
        flag_genes={},
        problem_defines={"MEMBERS": "int a; int b;"},
    )
    args.update(over)
    return build_argv(**args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "value",
    [0, 128, -3, True, False, 2.5, "default", "cutlass::half_t", "T<1> ; <2>", "a b", "x'y"],
)
def test_a_value_without_a_comma_is_written_as_it_always_was(value: object) -> None:
    """Build keys of committed artifacts hold these bytes: they must not move."""
    expected = f"-DX={int(value) if isinstance(value, bool) else value}"
    assert define_flag("X", value) == expected  # type: ignore[arg-type]


def test_a_comma_is_written_as_nvccs_escape() -> None:
    assert define_flag("S", "Shape<1, 2, 3>") == "-DS=Shape<1\\, 2\\, 3>"


def test_a_real_argv_passes_with_spaces_semicolons_and_angles_in_values_and_paths() -> None:
    check_argv(_argv(), "nvcc")
    check_argv(_argv(entry_kind="launcher"), "nvcc")


def test_every_catalogue_value_renders_to_items_the_rule_accepts() -> None:
    for name, flag in CATALOGUE.items():
        for value in flag.gene.values:
            check_argv(_argv(flag_genes={name: value}), f"nvcc ({name}={value!r})")


@pytest.mark.parametrize("bad", SHELL_ACTIVE_OR_CONTROL)
@pytest.mark.parametrize("where", ["define", "include", "output", "source", "program"])
def test_a_quoted_item_with_a_shell_active_or_control_character_is_refused(
    bad: str, where: str
) -> None:
    argv = _argv()
    if where == "define":
        argv = _argv(define_genes={"X": f"1 {bad}"})
    elif where == "include":
        argv = _argv(include_dirs=(Path(f"/k/{bad}"),))
    elif where == "output":
        argv = _argv(output=Path(f"/c/{bad}/kernel.cubin"))
    elif where == "source":
        argv = _argv(source=Path(f"/k/{bad}.cu"))
    else:
        argv = _argv(nvcc=f"/opt/{bad}/nvcc")
    if where == "source" and bad == 'a"b':
        check_argv(argv, "nvcc for k")  # nvcc escapes it there (the next test)
        return
    with pytest.raises(CommandLineError) as caught:
        check_argv(argv, "nvcc for k")
    message = str(caught.value)
    assert caught.value.exit_code == EXIT_USER_ERROR
    assert message.startswith("nvcc for k: the command-line item ") and "nothing was run" in message
    assert "\n" not in message and "\r" not in message  # one line, whatever the item holds


def test_a_double_quote_is_let_through_in_the_input_file_only() -> None:
    """nvcc writes ``"`` as ``\\"`` in the input file's path in every step; not in -o
    (``-ptx`` hands it to ptxas unescaped), and it refuses one in -D/-U/-I itself."""
    check_argv(_argv(source=Path('/k/it\'s "here"/k.cu')), "nvcc")
    check_argv(["nvcc", "-M", '/k/a"b/k.cu'], "nvcc -M")
    for argv in (
        _argv(output=Path('/c/a"b/kernel.cubin')),
        _argv(include_dirs=(Path('/k/a"b'),)),
        _argv(define_genes={"X": '"1"'}),
        ["nvcc", '-Ua"b', "k.cu"],
        ["nvcc", "k.cu", "-o", '/c/a"b.ptx'],  # the last item, but -o's value
        ["nvcc", "-Xcompiler", '-I/a"b'],  # the last item, but a pass-through value
    ):
        with pytest.raises(CommandLineError, match="'\"'"):
            check_argv(argv, "nvcc")


def test_a_long_item_is_shown_around_the_refused_character() -> None:
    path = "/k/" + "a" * 300 + "/c$(id)/" + "b" * 300 + "/k.cu"
    with pytest.raises(CommandLineError) as caught:
        check_argv(["nvcc", "-I" + path, "k.cu"], "nvcc")
    assert "c$(id)" in str(caught.value) and len(str(caught.value)) < 600


@pytest.mark.parametrize("bad", ["-dlcm=ca;touch x", "-O3 -v", "-dlcm=$(id)", "-O3|x", "-O3'"])
def test_a_value_nvcc_writes_bare_holds_only_plain_characters(bad: str) -> None:
    argv = _argv()
    argv[argv.index("-Xptxas") + 1] = bad  # the value after -Xptxas reaches ptxas's line bare
    with pytest.raises(CommandLineError, match="where nvcc passes it bare"):
        check_argv(argv, "nvcc")


def test_a_pass_through_value_is_bare_whatever_it_looks_like() -> None:
    """``-Xcompiler -I/a;b`` reaches the host compiler's line bare: not an -I of nvcc's."""
    for option in ("-Xcompiler", "-Xptxas", "--compiler-options", "-Xlinker"):
        with pytest.raises(CommandLineError, match="bare"):
            check_argv(["nvcc", option, "-I/a;b", "k.cu"], "nvcc")
        with pytest.raises(CommandLineError, match="bare"):
            check_argv(["nvcc", "k.cu", option, "x y"], "nvcc")  # not the input file either
    check_argv(["nvcc", "-Xptxas", "-v", "-I/a b;c", "k.cu"], "nvcc")  # nvcc's own -I again


def test_an_option_is_judged_bare_and_a_path_after_o_quoted() -> None:
    with pytest.raises(CommandLineError, match="bare"):
        check_argv(["nvcc", "--foo=a b", "k.cu"], "nvcc")
    check_argv(["nvcc", "-o", "/c/a b;c/k.cubin", "-I/x y", "-Ua;b", "k.cu"], "nvcc")
    with pytest.raises(CommandLineError, match="bare"):  # not last: not the input file
        check_argv(["nvcc", "a b.cu", "-cubin"], "nvcc")


def test_the_only_backslash_let_through_is_nvccs_comma_escape() -> None:
    check_argv(["nvcc", define_flag("S", "T<1, 2>"), "k.cu"], "nvcc")
    for item in ("-DS=T<1\\\\, 2>", "-DS=T<1\\ 2>", "-DS=a\\"):
        with pytest.raises(CommandLineError, match="'\\\\\\\\'"):
            check_argv(["nvcc", item, "k.cu"], "nvcc")
    assert value_refusal("a\\,b") is not None  # a value as written has no backslash at all


def test_a_long_item_is_shown_shortened() -> None:
    with pytest.raises(CommandLineError) as caught:
        check_argv(["nvcc", "-DX=" + "a" * 5000 + "$", "k.cu"], "nvcc")
    assert len(str(caught.value)) < 600 and "..." in str(caught.value)


@pytest.mark.parametrize("bad", SHELL_ACTIVE_OR_CONTROL)
def test_value_refusal_says_why(bad: str) -> None:
    assert value_refusal(f"x{bad}") is not None
    assert (
        value_refusal("cutlass::gemm::GemmShape<128, 128, 64>; int a[2] = {1, 2}; 'q' &|") is None
    )

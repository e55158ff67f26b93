"""The strict YAML loader's caps: nesting depth, node count, file size, unbuildable values."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ctune.files import InputFileError
from ctune.strict_yaml import MAX_BYTES, MAX_DEPTH, MAX_NODES, StrictYamlError, load_file, load_text


def _nested(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 1000 + "\n", f"line 1: nested deeper than {MAX_DEPTH} levels"),  # 3 KB, no stack
        ("{a: " * 1000 + "\n", f"line 1: nested deeper than {MAX_DEPTH} levels"),
        ("".join(f"{'  ' * i}k{i}:\n" for i in range(40)), f"nested deeper than {MAX_DEPTH}"),
        (_nested(MAX_DEPTH), f"nested deeper than {MAX_DEPTH} levels"),
        ("[" + "1," * MAX_NODES + "1]", f"more than {MAX_NODES} values in one file"),
        ("a: " + "1" * 5000, "a value that cannot be read: Exceeds the limit"),
        ("a: 2023-13-45", "a value that cannot be read: month must be in 1..12"),
        ("x" * (MAX_BYTES + 1), f"larger than {MAX_BYTES} bytes"),
        ("? [1, 2]\n: 3\n", "line 1: a key must be a single value .*, not a list"),
        ("a:\n  ? {b: 1}\n  : 3\n", "line 2: a key must be a single value .*, not a mapping"),
        ("{[1]: 2}", "line 1: a key must be a single value"),
    ],
    ids=[
        "1000-brackets",
        "1000-braces",
        "block-40",
        "at-cap",
        "nodes",
        "digits",
        "date",
        "size",
        "list-key",
        "mapping-key",
        "flow-list-key",
    ],
)
def test_limits_are_one_line(text: str, message: str) -> None:
    began = time.monotonic()
    with pytest.raises(StrictYamlError, match=message) as err:
        load_text(text)
    assert "\n" not in str(err.value)
    assert time.monotonic() - began < 10  # refused while composing, not after


def test_what_fits_the_caps_loads() -> None:
    assert load_text(f"a: {_nested(MAX_DEPTH - 2)}")["a"] == json.loads(_nested(MAX_DEPTH - 2))
    assert len(load_text("[" + "1," * (MAX_NODES - 2) + "1]")) == MAX_NODES - 1


def test_a_file_is_read_by_the_input_file_rule(tmp_path: Path) -> None:
    spec = tmp_path / "k.yaml"
    spec.write_text("a: [1, 2]\n")
    assert load_file(spec) == {"a": [1, 2]}
    zero = tmp_path / "zero.yaml"
    zero.symlink_to("/dev/zero")
    with pytest.raises(InputFileError, match=r"spec .*zero\.yaml: a character device"):
        load_file(zero, "spec")
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (MAX_BYTES + 1))
    with pytest.raises(InputFileError, match=f"larger than the {MAX_BYTES}-byte limit"):
        load_file(big)

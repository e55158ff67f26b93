"""`ctune init`'s constant arguments: one per __constant__ array it can size and type."""

from __future__ import annotations

from ctune.spec.draft.constants import constant_lines

SOURCE = """\
#define TAPS 8
__constant__ float taps[TAPS * 2];
__constant__ int2 pairs[4][3];
__constant__ float alpha;
__constant__ Weights weights[4];      // a struct: left for the author
__constant__ float sized[WIDTH];      // a name no #define gives a value
extern __constant__ float elsewhere[4];
// __constant__ float commented[4];
"""


def test_each_readable_constant_becomes_a_marked_arg() -> None:
    checks: list[str] = []
    lines = constant_lines(SOURCE, checks)
    assert [line.split("  # check:")[0] for line in lines] == [
        "  - {name: taps, role: constant, dtype: float32, shape: [16]}",
        "  - {name: pairs, role: constant, dtype: int2, shape: [4, 3]}",
        "  - {name: alpha, role: constant, dtype: float32, shape: [1]}",
    ]
    assert all("# check:" in line for line in lines)
    left = [c for c in checks if "add it to args" in c]
    assert [c.split(" (")[0] for c in left] == ["__constant__ weights", "__constant__ sized"]

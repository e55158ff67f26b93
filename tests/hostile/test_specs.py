"""Small specs that would exhaust memory, CPU or the stack, and YAML no spec may be.

Each is a few kilobytes at most (or a file far over the size cap) and must be refused in
one line, exit 2, within the case's timeout: expressions are evaluated with bounded work
(every operand's size, the recursion depth), a range may produce only so many values, YAML
has a depth and a size cap, and a tag that would build a Python object is refused without
running anything. The child runs under an address-space cap, so a bomb that is not caught
fails the case (exit 70, MemoryError) rather than the machine.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from hostile_harness import DATA_KERNELS, Case, Project, add_gene, case, tier
from hostile_setups import chain, fifo, sparse, spec_variant, write

CASES: list[Case] = []
RESTRICTION = '  - "BLOCK * UNROLL <= 4096"\n'


def _restriction(expr: str) -> Callable[[str], str]:
    return lambda t: t.replace(RESTRICTION, RESTRICTION + f"  - {json.dumps(expr)}\n")


def _derived(*pairs: tuple[str, str]) -> Callable[[str], str]:
    body = "".join(f"  {n}: {json.dumps(e)}\n" for n, e in pairs)
    return lambda t: t.replace("restrictions:\n", f"derived:\n{body}restrictions:\n")


def _replace(old: str, new: str) -> Callable[[str], str]:
    def edit(text: str) -> str:
        assert old in text, old
        return text.replace(old, new)

    return edit


def _space(id: str, edit: Callable[[str], str], exits: int | tuple[int, ...] = 2, **kw) -> Case:
    """``ctune space`` on saxpy's spec with ``edit`` applied (loads, counts, samples)."""
    return case(
        f"{id}-space",
        "specs",
        ["space", "kernels/bomb.cu"],
        exits,
        setup=spec_variant("bomb", edit),
        **kw,
    )


# --- expressions: bounded work -----------------------------------------------------------
EXPRESSIONS = {
    "nested-exponent": "2 ** 2 ** 2 ** 2 ** 2 ** 2 > 0",
    "exponent-of-big-left": "(BLOCK ** 60) ** 60 ** 2 > 0",
    "exponent-tower-genes": "BLOCK ** BLOCK ** BLOCK > 0",
    "left-operand-grows": "((((N ** 64) ** 64) ** 64) ** 64) > 0",
    "float-pow-overflow": "1.5 ** 64 ** 2 > 0",
    "unary-minus-1900": "-" * 1900 + "1 < 0",
    "not-990": "not " * 490 + "1",
    "parens-1000": "(" * 999 + "1" + ")" * 999 + " > 0",
    "call-nesting-400": "max(" * 400 + "1" + ")" * 400 + " > 0",
    "max-no-args": "max() > 0",
    "min-of-int": "min(BLOCK) > 0",
    "int-of-inf": "int(1e400) > 0",
    "zero-to-negative": "0 ** -1 > 0",
    "attribute": "BLOCK.__class__ > 0",
    "lambda": "(lambda: 1)() > 0",
    "import-call": "__import__('os').system('touch @CANARY@') > 0",
    "always-false": "BLOCK < 0",
    "long-2001": "1" + " + 1" * 667,
}
#: within every bound: evaluated (exit 0) or refused by a stricter cap (exit 2), in time
WITHIN_BOUNDS = {"not-990"}
for name, expr in EXPRESSIONS.items():
    exits = (0, 2) if name in WITHIN_BOUNDS else 2
    CASES.append(_space(f"restriction-{name}", _restriction(expr), exits))
for name in ("nested-exponent", "unary-minus-1900"):
    CASES.append(
        case(
            f"restriction-{name}-compile",
            "specs",
            ["compile", "kernels/bomb.cu"],
            2,
            setup=spec_variant("bomb", _restriction(EXPRESSIONS[name])),
        )
    )

# derived values, launch rules, metrics and scalar arguments are expressions too
CASES += [
    _space("derived-exponent", _derived(("X", "2 ** 64 ** 2"))),
    _space(
        "derived-squaring-chain",
        _derived(*[(f"D{i}", f"D{i - 1} * D{i - 1}" if i else "N * N") for i in range(40)]),
    ),
    _space(
        "derived-doubling-chain-2000",
        _derived(*[(f"D{i}", f"D{i - 1} + D{i - 1}" if i else "N") for i in range(2000)]),
        (0, 2),
    ),
    _space("derived-unary-1900", _derived(("X", "-" * 1900 + "N"))),
    _space(
        "launch-grid-exponent",
        _replace('grid: ["ceil_div(N, BLOCK * UNROLL)"]', 'grid: ["N ** N ** N"]'),
    ),
    _space("launch-block-huge", _replace("block: [BLOCK]", "block: [BLOCK ** 64]"), (0, 2)),
    _space("metric-exponent", _replace('flops: "2 * N"', 'flops: "N ** N ** N"'), (0, 2)),
    _space("scalar-arg-exponent", _replace("value: N}", 'value: "N ** N ** N"}'), (0, 2)),
]
CASES += [
    case(
        "launch-grid-exponent-compile",
        "specs",
        ["compile", "kernels/bomb.cu"],
        2,
        setup=spec_variant(
            "bomb", _replace('grid: ["ceil_div(N, BLOCK * UNROLL)"]', 'grid: ["(N ** 64) ** 64"]')
        ),
    ),
]

# --- element types and given data (issue 46): bounded, and files of the spec's folder ------
X_ARG = "{name: x, role: input, dtype: float32, shape: [N]}"
CASES += [
    _space(
        "struct-100k-fields",
        _replace(
            X_ARG,
            "{name: x, role: input, shape: [N], dtype: {struct: ["
            + ", ".join(f"[f{i}, float32]" for i in range(100_000))
            + "]}}",
        ),
    ),
    _space("given-outside-folder", _replace(X_ARG, X_ARG[:-1] + ", init: {npy: ../../x.npy}}")),
    _space(
        "constant-1e12-bytes",
        _replace(X_ARG, X_ARG + "\n  - {name: c, role: constant, dtype: float4, shape: [1e12]}"),
    ),
    case(
        "given-fifo-space",
        "specs",
        ["space", "kernels/bomb.cu"],
        2,
        setup=chain(
            fifo("kernels/x.npy"),
            spec_variant("bomb", _replace(X_ARG, X_ARG[:-1] + ", init: {npy: x.npy}}")),
        ),
    ),
]

# --- ranges and value lists: a bounded number of values -----------------------------------
CASES += [
    _space("range-1e12", add_gene("BIG: {range: [1, 1000000000000], family: define}")),
    _space("range-1e12-float", add_gene("BIG: {range: [1, 1e12], family: define}")),
    _space(
        "range-negative-huge",
        add_gene("BIG: {range: [-1000000000000000000, 1000000000000000000, 1], family: define}"),
    ),
    _space("pow2-30000-digits", add_gene(f"BIG: {{pow2: [1, {'9' * 30000}], family: define}}")),
    _space(
        "values-10k", add_gene(f"BIG: {{values: {list(range(10_000))}, family: define}}"), (0, 2)
    ),
    _space(
        "genes-64-binary",
        lambda t: t.replace(
            "  UNROLL:",
            "".join(f"  G{i}: {{values: [0, 1], family: define}}\n" for i in range(64))
            + "  UNROLL:",
        ),
        (0, 2),
        timeout_s=20,
    ),
    _space(
        "genes-20x100-restricted",
        lambda t: _restriction(" + ".join(f"H{i}" for i in range(20)) + " < 0")(
            t.replace(
                "  UNROLL:",
                "".join(f"  H{i}: {{range: [0, 99], family: define}}\n" for i in range(20))
                + "  UNROLL:",
            )
        ),
        (0, 2),
        timeout_s=20,
    ),
    _space("huge-int-5000-digits", add_gene(f"BIG: {{values: [1, {'9' * 5000}], family: define}}")),
    _space("huge-int-dims", _replace("N: 1048576}", f"N: {'9' * 5000}}}")),
]


# --- YAML that is no spec -------------------------------------------------------------------
def _yaml(text: str | bytes) -> Callable[[Project], None]:
    return chain(spec_variant("bomb", lambda t: t), write("kernels/bomb.yaml", text))


def _nested(open_: str, close: str, depth: int) -> str:
    return f"name: bomb\ngenes:\n  X: {{values: {open_ * depth}1{close * depth}}}\n"


SAXPY = (DATA_KERNELS / "saxpy.yaml").read_text()
# nine references to the previous level, nine levels deep: 9**9 strings from 300 bytes
BILLION_LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
)
YAMLS: dict[str, str | bytes] = {
    "brackets-1000": _nested("[", "]", 1000),
    "brackets-100k": _nested("[", "]", 100_000),
    "braces-1000": "name: bomb\ngenes: " + "{a: " * 1000 + "1" + "}" * 1000 + "\n",
    "block-nesting-2000": "name: bomb\n"
    + "".join(" " * i + f"k{i}:\n" for i in range(2000))
    + " " * 2000
    + "x: 1\n",
    "billion-laughs": BILLION_LAUGHS,
    "anchor-merge": SAXPY.replace("genes:\n", "base: &b {x: 1}\ngenes:\n  <<: *b\n"),
    "duplicate-key": SAXPY.replace("entry: saxpy\n", "entry: saxpy\nentry: evil\n"),
    "not-utf8": SAXPY.encode().replace(b"(test kernel)", b"(\xff\xfe kernel)"),
    "utf16": SAXPY.encode("utf-16"),
    "python-object-apply": "!!python/object/apply:os.system ['touch {canary}']\n",
    "python-name": "name: !!python/name:os.system\n",
    "tag-timestamp-gene": SAXPY.replace("values: [1, 2, 4, 8]", "values: [2001-12-14, 2]"),
    "float-nan-tolerance": SAXPY.replace("rel_l2: 1.0e-6", "rel_l2: .nan"),
    "top-level-list": "- 1\n- 2\n",
    "empty": "",
    "long-line-900k": SAXPY.replace(
        "description: y = a * x + y (test kernel)", "description: " + "x" * 900_000
    ),
}
for name, text in YAMLS.items():
    exits: int | tuple[int, ...] = (0, 2) if name == "long-line-900k" else 2
    CASES.append(
        case(f"yaml-{name}-space", "specs", ["space", "kernels/bomb.cu"], exits, setup=_yaml(text))
    )
CASES += [
    case(
        "yaml-bom-space",
        "specs",
        ["space", "kernels/bomb.cu"],
        (0, 2),
        setup=_yaml(b"\xef\xbb\xbf" + SAXPY.replace("name: saxpy", "name: bomb").encode()),
    ),
    case(
        "yaml-over-1mib-space",
        "specs",
        ["space", "kernels/bomb.cu"],
        2,
        setup=chain(_yaml(SAXPY), write("kernels/bomb.yaml", SAXPY + "#" * (1 << 20))),
    ),
    case(
        "yaml-sparse-100mb-space",
        "specs",
        ["space", "kernels/bomb.cu"],
        2,
        setup=chain(_yaml(SAXPY), sparse("kernels/bomb.yaml", 100 << 20, b"name: bomb\n")),
    ),
    case(  # the registry's own kernel turned into a bomb: check and gate refuse it in a line
        "template-spec-nested-exponent-check",
        "specs",
        ["check", "--no-gpu"],
        (1, 2),
        setup=lambda p: p.write(
            "kernels/saxpy.yaml",
            _restriction(EXPRESSIONS["nested-exponent"])(p.path("kernels/saxpy.yaml").read_text()),
        ),
        progress=True,
    ),
    case(
        "template-spec-brackets-gate-build-only",
        "specs",
        ["gate", "--build-only"],
        (1, 2),
        setup=write("kernels/saxpy.yaml", YAMLS["brackets-1000"]),
        progress=True,
    ),
]


# a reference module that runs code at import: `space` and `compile` never import it
def _reference_runs_code(p: Project) -> None:
    p.write(
        "kernels/saxpy_ref.py",
        f"open({str(p.canary)!r}, 'w').close()\n" + "def saxpy(xp, inputs, dims):\n    return {}\n",
    )


CASES += [
    case(
        "reference-not-imported-space",
        "specs",
        ["space", "kernels/saxpy.cu"],
        0,
        setup=_reference_runs_code,
    ),
    case(
        "reference-not-imported-compile",
        "specs",
        ["compile", "kernels/saxpy.cu"],
        0,
        setup=_reference_runs_code,
    ),
    case(
        "reference-not-imported-check",
        "specs",
        ["check", "--no-gpu"],
        (0, 1),
        setup=_reference_runs_code,
        progress=True,
    ),
]

test_specs = tier(CASES)

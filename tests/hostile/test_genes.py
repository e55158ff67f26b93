"""Gene values (and paths) that carry shell payloads, through every command that builds.

nvcc runs its sub-steps through a shell, so a ``-D`` value or a path it passes on must never
be read by that shell. Payloads reach the command line from a spec's string gene (chosen by
``--set`` or as the default), a problem's ``defines``, a folder name, a hand-edited
artifact whose digest was recomputed, and a hand-edited search journal. Every payload
touches the canary; the canary must never appear. Where the issue leaves the choice open
(refuse such a spec, exit 2, or build it with the value quoted, exit 0) both codes pass.
"""

from __future__ import annotations

import json
import re
from typing import Any

from hostile_harness import JOURNAL, KEY, Case, add_gene, case, tier
from hostile_setups import (
    chain,
    craft_artifact,
    edit_source,
    path_with_bin,
    set_gene,
    spec_variant,
    trial_edit,
    write,
)

C = "@CANARY@"  # in YAML set-ups; "{canary}" in argv
PAYLOADS = {
    "dollar-paren": "8 $(touch {c})",
    "backticks": "8`touch {c}`",
    "semicolon": "8;touch {c}",
    "and-and": "8 && touch {c}",
    "pipe": "8|touch {c}",
    "newline": "8\ntouch {c}",
    "single-quotes": "8' $(touch {c}) '",
    "double-quotes": '8" $(touch {c}) "',
    "redirect": "8 >{c}",
    "ifs": "$(touch${{IFS}}{c})",
    "option": "8 -o {c}",  # word splitting alone: an option of nvcc's own
}


def _yaml(payload: str) -> str:
    return json.dumps(payload.format(c=C))  # a JSON string is a YAML flow scalar


def _argv(payload: str) -> str:
    return payload.format(c="{canary}")


def _string_gene(payload: str, default_payload: bool = False) -> Any:
    values = f'["a", {_yaml(payload)}]'
    default = _yaml(payload) if default_payload else '"a"'
    return add_gene(f"MODE: {{values: {values}, default: {default}, family: define}}")


def _problem_define(payload: str) -> Any:
    old = "  - {name: n1m, dims: {N: 1048576}}"
    new = f"  - {{name: n1m, dims: {{N: 1048576}}, defines: {{MODE: {_yaml(payload)}}}}}"
    return lambda text: text.replace(old, new)


CASES: list[Case] = []

# a spec's string gene holding a payload, chosen with --set: compile
for name in ("dollar-paren", "backticks", "semicolon", "newline", "double-quotes", "ifs", "option"):
    payload = PAYLOADS[name]
    CASES.append(
        case(
            f"spec-string-gene-set-{name}",
            "genes",
            ["compile", "kernels/evil.cu", "--set", f"MODE={_argv(payload)}"],
            (0, 2),
            setup=spec_variant("evil", _string_gene(payload)),
        )
    )

# ... as the gene's default: the default build
for name in ("dollar-paren", "redirect"):
    CASES.append(
        case(
            f"spec-string-gene-default-{name}",
            "genes",
            ["compile", "kernels/evil.cu", "--json"],
            (0, 2),
            setup=spec_variant("evil", _string_gene(PAYLOADS[name], default_payload=True)),
        )
    )

# ... in a problem's defines
for name in ("dollar-paren", "pipe"):
    CASES.append(
        case(
            f"problem-define-{name}",
            "genes",
            ["compile", "kernels/evil.cu"],
            (0, 2),
            setup=spec_variant("evil", _problem_define(PAYLOADS[name])),
        )
    )

# `space` shows the genome and samples; it builds nothing
for name in ("dollar-paren",):
    CASES.append(
        case(
            f"space-string-gene-{name}",
            "genes",
            ["space", "kernels/evil.cu", "--samples", "20"],
            (0, 2),
            setup=spec_variant("evil", _string_gene(PAYLOADS[name])),
        )
    )

# bench builds, then measures (on the numpy stand-in for CuPy)
for name in ("dollar-paren", "and-and"):
    CASES.append(
        case(
            f"bench-string-gene-set-{name}",
            "genes",
            ["bench", "kernels/evil.cu", "--set", f"MODE={_argv(PAYLOADS[name])}", "-n", "20"],
            (0, 2),
            setup=spec_variant("evil", _string_gene(PAYLOADS[name])),
            patches=("fakegpu",),
            timeout_s=60,
        )
    )

# a search builds every candidate it measures (the stand-in measures, nvcc is real)
for name in ("backticks",):
    CASES.append(
        case(
            f"search-string-gene-{name}",
            "genes",
            ["search", "kernels/evil.cu", "-O", "p99", "--budget", "6", "--no-commit"],
            (0, 2),
            setup=spec_variant("evil", _string_gene(PAYLOADS[name])),
            patches=("standin-gpu",),
            progress=True,
            timeout_s=90,
        )
    )

# --set with a payload for an integer gene: not one of its values
for name in ("semicolon",):
    CASES.append(
        case(
            f"set-int-gene-{name}",
            "genes",
            ["compile", "kernels/saxpy.cu", "--set", f"BLOCK=256{_argv(PAYLOADS[name])[1:]}"],
            2,
        )
    )

# folder names that a shell would read: the kernel's folder, an include dir, the cache
# (a folder name holds no "/", so these payloads `cd` to HOME, in the scratch folder, first)
FOLDERS = {
    "dollar-paren": "k$(cd;touch CANARY)",
    "backticks": "k`cd;touch CANARY`",
    "semicolon": "k;cd;touch CANARY;",
}


def _kernel_in(folder: str) -> Any:
    def setup(p: Any) -> None:
        import shutil

        from hostile_harness import DATA_KERNELS

        target = p.path(folder)
        target.mkdir()
        for name in ("saxpy.cu", "saxpy.yaml", "saxpy_ref.py"):
            shutil.copy(DATA_KERNELS / name, target / name)

    return setup


#: a folder whose name holds ``$`` or a backquote is refused, one line naming it, nothing run:
#: inside nvcc's double quotes the shell would still act on it (docs/security.md); ``;`` and
#: spaces are plain text there, so such a folder works
SHELL_FOLDER = "refused by the rule for nvcc's command line: docs/security.md"


for name, folder in FOLDERS.items():
    refused = name != "semicolon"
    CASES.append(
        case(
            f"path-kernel-folder-{name}",
            "genes",
            ["compile", f"{folder}/saxpy.cu"],
            2 if refused else 0,
            setup=_kernel_in(folder),
            error=re.escape(folder) if refused else None,
            note=SHELL_FOLDER if refused else "",
        )
    )
CASES += [
    case(
        "path-include-dir-dollar-paren",
        "genes",
        ["compile", "kernels/evil.cu"],
        2,
        error=re.escape("inc$(cd;touch CANARY)"),
        note=SHELL_FOLDER,
        setup=chain(
            write("kernels/inc$(cd;touch CANARY)/empty.h", "// empty\n"),
            spec_variant(
                "evil",
                lambda t: t.replace(
                    "entry: saxpy\n", 'entry: saxpy\ninclude_dirs: ["inc$(cd;touch CANARY)"]\n'
                ),
            ),
        ),
    ),
    case(
        "path-cache-dir-dollar-paren",
        "genes",
        ["compile", "kernels/saxpy.cu"],
        2,
        env={"CTUNE_CACHE_DIR": "{project}/.ctune/c$(cd;touch CANARY)"},
        error=re.escape("c$(cd;touch CANARY)"),
        note=SHELL_FOLDER,
    ),
]

# a hand-edited artifact, its digest recomputed, committed: check rebuilds the members
# after a source edit; gate --build-only and refresh build them; verify must notice
CRAFTED = {
    "group-dollar-paren": set_gene("all", "GROUP", "8 $(touch {canary})"),
    "group-backticks": set_gene("front", "GROUP", "2`touch {canary}`"),
    "group-semicolon-baseline": set_gene("baseline", "GROUP", "1;touch {canary}"),
    "group-option": set_gene("front", "GROUP", "1 -o {canary}"),
    "flag-gene": set_gene("front", "maxrregcount", "0 $(touch {canary})"),
    "new-gene": set_gene("front", "EVIL", "1 $(touch {canary})"),
}


def _crafted(edit: Any) -> Any:
    def filled(data: dict[str, Any]) -> None:
        edit(data)

    def setup(p: Any) -> None:
        def on(data: dict[str, Any]) -> None:
            filled(data)
            for m in (*data["front"], data["baseline"]):
                genes = m["candidate"]["genes"]
                for k, v in genes.items():
                    if isinstance(v, str):
                        genes[k] = p.fill(v)

        craft_artifact(on)(p)

    return setup


for name, edit in CRAFTED.items():
    CASES.append(
        case(
            f"artifact-{name}-check-after-edit",
            "genes",
            ["check", "--no-gpu"],
            (1, 2),
            setup=chain(_crafted(edit), edit_source),
            progress=True,
            timeout_s=60,
        )
    )
    CASES.append(
        case(
            f"artifact-{name}-gate-build-only",
            "genes",
            ["gate", "--build-only"],
            (1, 2),
            setup=_crafted(edit),
            progress=True,
            timeout_s=60,
        )
    )
CASES.append(
    case(
        "artifact-group-dollar-paren-check",
        "genes",
        ["check", "--no-gpu"],
        (1, 2),
        setup=_crafted(CRAFTED["group-dollar-paren"]),
        progress=True,
        timeout_s=60,
    )
)
for name in ("group-dollar-paren", "new-gene"):
    CASES += [
        case(
            f"artifact-{name}-refresh-after-edit",
            "genes",
            ["registry", "refresh"],
            (1, 2),
            setup=chain(_crafted(CRAFTED[name]), edit_source),
            progress=True,
            timeout_s=60,
        ),
        case(
            f"artifact-{name}-verify",
            "genes",
            ["registry", "verify"],
            2,
            setup=_crafted(CRAFTED[name]),
            progress=True,
        ),
    ]


# a hand-edited journal: --resume rebuilds what it confirms
def _trial_genes(index: int, name: str, value: str) -> Any:
    def setup(p: Any) -> None:
        def edit(data: dict[str, Any]) -> None:
            data["trial"]["candidate"]["genes"][name] = p.fill(value)
            samples = data["trial"]["measurement"].get("samples_ms") or []
            data["trial"]["measurement"]["samples_ms"] = [s / 100 for s in samples]

        trial_edit(index, edit)(p)

    return setup


for index, name, value in (
    (0, "GROUP", "1 $(touch {canary})"),
    (2, "maxrregcount", "0;touch {canary}"),
    (3, "EVIL", "1 $(touch {canary})"),
):
    CASES.append(
        case(
            f"journal-trial{index}-{name.lower()}-resume",
            "genes",
            ["search", "kernels/saxpy.cu", "-O", "p99", "--resume", JOURNAL, "--no-commit"],
            2,
            setup=_trial_genes(index, name, value),
            patches=("standin-gpu",),
            writes=("journals",),
            keeps=("journal",),
            progress=True,
            timeout_s=90,
        )
    )

# a payload in the registry key itself and in the compiler setting
CASES += [
    case("show-key-dollar-paren", "genes", ["registry", "show", KEY + "@$(touch {canary})"], 2),
    case(
        "nvcc-setting-semicolon",
        "genes",
        ["compile", "kernels/saxpy.cu"],
        (2, 3),
        env={"CTUNE_NVCC": "nvcc;touch {canary}"},
    ),
    case(
        "nvcc-setting-dollar-paren",
        "genes",
        ["compile", "kernels/saxpy.cu"],
        (2, 3),
        env={"CTUNE_NVCC": "$(touch {canary})", "PATH": path_with_bin()},
    ),
]

test_genes = tier(CASES)

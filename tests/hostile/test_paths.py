"""Folder and file names that are legal but awkward: bytes that are not UTF-8, a newline,
quotes, a leading dash, format braces, spaces; and names in a result file that try to
leave the registry.

A legal name works (exit 0) wherever a path goes: the kernel's folder (nvcc's ``-M`` output
names it back), the cache, the registry, a journal. A result file naming a kernel, problem
or device class that is not a plain name is refused (exit 2) and nothing is written.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable

from hostile_harness import DATA_KERNELS, RESULT, Case, Project, case, tier
from hostile_setups import artifact_text, write

CASES: list[Case] = []
NAMES = {
    "not-utf8": "caf\udce9",  # the byte 0xe9: os.fsencode gives it back
    "not-utf8-pair": "k\udcc3\udcff",
    "newline": "k\nx",
    "quotes": 'it\'s "here"',
    "leading-dash": "-o",
    "braces": "{x}{0}%s",
    "spaces": "my kernels",
    "long": "k" * 200,
}


def _kernels_in(folder: str) -> Callable[[Project], None]:
    def setup(p: Project) -> None:
        target = p.root / folder
        target.mkdir()
        for name in ("saxpy.cu", "saxpy.yaml", "saxpy_ref.py"):
            shutil.copy(DATA_KERNELS / name, target / name)

    return setup


#: a newline in a folder name is legal; refusing it in one line is as good as working
NEWLINE_OK = (0, 2)
for tag, folder in NAMES.items():
    CASES.append(
        case(
            f"kernel-folder-{tag}-compile",
            "paths",
            ["compile", "--", f"{folder}/saxpy.cu"],
            NEWLINE_OK if tag == "newline" else 0,
            setup=_kernels_in(folder),
            timeout_s=30,
        )
    )
for tag in ("not-utf8", "leading-dash"):
    folder = NAMES[tag]
    CASES += [
        case(
            f"kernel-folder-{tag}-space",
            "paths",
            ["space", "--", f"{folder}/saxpy.cu"],
            NEWLINE_OK if tag == "newline" else 0,
            setup=_kernels_in(folder),
        ),
        case(
            f"cache-folder-{tag}-compile",
            "paths",
            ["compile", "kernels/saxpy.cu"],
            NEWLINE_OK if tag == "newline" else 0,
            env={"CTUNE_CACHE_DIR": "{project}/.ctune/" + folder},
            timeout_s=30,
        ),
        case(
            f"registry-folder-{tag}-import",
            "paths",
            ["registry", "import", RESULT, "--registry", f"reg-{folder}"],
            NEWLINE_OK if tag == "newline" else 0,
            writes=(f"reg-{folder}",),
            commits=True,
        ),
        case(
            f"journal-folder-{tag}-search",
            "paths",
            [
                "search",
                "kernels/saxpy.cu",
                "-O",
                "p99",
                "--budget",
                "3",
                "--journal",
                f"j-{folder}/s.jsonl",
                "--no-commit",
            ],
            NEWLINE_OK if tag == "newline" else 0,
            patches=("standin-gpu",),
            writes=(f"j-{folder}",),
            progress=True,
            timeout_s=60,
        ),
    ]
CASES.append(
    case(
        "kernels-folder-not-utf8-check",
        "paths",
        ["check", "--no-gpu", "--kernels", NAMES["not-utf8"]],
        0,
        setup=lambda p: shutil.copytree(p.path("kernels"), p.root / NAMES["not-utf8"]),
        progress=True,
        timeout_s=30,
    )
)


# --- names in a result file that would leave the registry ----------------------------------
def _result_named(**names: str) -> Callable[[Project], None]:
    def setup(p: Project) -> None:
        data = json.loads(p.path(RESULT).read_text())
        data.update(names)
        for m in (*data["front"], data["baseline"]):
            if "kernel" in names:
                m["candidate"]["kernel"] = names["kernel"]
        write("crafted.json", artifact_text(data))(p)

    return setup


for tag, names in {
    "kernel-dotdot": {"kernel": ".."},
    "kernel-traversal": {"kernel": "../../outside"},
    "problem-traversal": {"problem": "../../../outside/x"},
    "device-slash": {"device_class": "a/b"},
    "problem-256-chars": {"problem": "p" * 256},
    "kernel-not-utf8": {"kernel": "caf\udce9"},
    "kernel-nul": {"kernel": "a\x00b"},
}.items():
    CASES.append(
        case(
            f"result-{tag}-import",
            "paths",
            ["registry", "import", "crafted.json"],
            2,
            setup=_result_named(**names),
            keeps=("registry",),
        )
    )

test_paths = tier(CASES)

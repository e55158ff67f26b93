"""Special files where a regular file is expected, and outputs that cannot be written.

A FIFO, a socket, a device (``/dev/zero``, ``/dev/urandom``), a directory, a dangling
symlink, a symlink out of the project, and a sparse file far over any cap, put where ctune
reads a file: the registry, ``registry import``, a spec, a kernel source, a journal, a
plot or export source, ``pyproject.toml``. Each is refused in one line (exit 2) without
blocking or reading without bound; in the registry it is quarantined like any other file
that is no artifact (``registry list``: one warning, the rest listed), never followed.
Outputs on a full disk (``/dev/full``, or a write limit that fails like one) are an
environment error (exit 3) with nothing half-written.
"""

from __future__ import annotations

from hostile_harness import ARTIFACT, JOURNAL, KEY, RESULT, Case, case, tier
from hostile_setups import chain, directory, edit_source, fifo, sparse, symlink, unix_socket, write

CASES: list[Case] = []

#: an extra file beside the real artifact, at a valid <kernel>/<problem>/<device>.json place
EXTRA = "registry/saxpy/n1m/sm80-other.json"
KINDS = {
    "garbage": write(EXTRA, "not json\n"),  # the control: an ordinary damaged file
    "fifo": fifo(EXTRA),
    "dev-zero": symlink(EXTRA, "/dev/zero"),
    "directory": directory(EXTRA),
    "socket": unix_socket(EXTRA),
    "dangling-link": symlink(EXTRA, "{project}/nowhere.json"),
    "link-outside": symlink(EXTRA, "{outside}/artifact.json"),
}
for kind, setup in KINDS.items():
    CASES.append(
        case(f"registry-{kind}-list", "files", ["registry", "list"], 0, setup=setup, warnings=1)
    )
for kind in ("garbage", "fifo", "dev-zero", "socket"):
    CASES.append(
        case(
            f"registry-{kind}-verify",
            "files",
            ["registry", "verify", "--no-fsck"],
            2,
            setup=KINDS[kind],
        )
    )
for kind in ("garbage", "fifo"):
    CASES.append(
        case(
            f"registry-{kind}-check",
            "files",
            ["check", "--no-gpu"],
            (0, 1, 2),
            setup=KINDS[kind],
            progress=True,
        )
    )
CASES += [
    case(
        "registry-fifo-gate-build-only",
        "files",
        ["gate", "--build-only"],
        (0, 1, 2),
        setup=KINDS["fifo"],
        progress=True,
    ),
    case(
        "registry-fifo-migrate-dry-run",
        "files",
        ["registry", "migrate", "--dry-run"],
        (0, 2),
        setup=KINDS["fifo"],
        progress=True,
    ),
    case(
        "registry-fifo-refresh-dry-run",
        "files",
        ["registry", "refresh", "--dry-run"],
        (0, 1, 2),
        setup=KINDS["fifo"],
        progress=True,
    ),
]
CASES += [
    case(
        "registry-folder-link-outside-list",
        "files",
        ["registry", "list"],
        0,
        setup=symlink("registry/other", "{outside}"),
        warnings=1,
    ),
    case(
        "registry-artifact-is-fifo-show",
        "files",
        ["registry", "show", KEY],
        2,
        setup=fifo(ARTIFACT),
    ),
    case(
        "registry-artifact-is-dev-zero-show",
        "files",
        ["registry", "show", KEY],
        2,
        setup=symlink(ARTIFACT, "/dev/zero"),
    ),
]

# --- registry import of a file that is not one -------------------------------------------
IMPORTS = {
    "fifo": fifo("incoming.json"),
    "dev-zero": symlink("incoming.json", "/dev/zero"),
    "directory": directory("incoming.json"),
    "socket": unix_socket("incoming.json"),
    "sparse-100mb": sparse("incoming.json", 100 << 20, b"{"),
}
for kind, setup in IMPORTS.items():
    CASES.append(
        case(
            f"import-{kind}",
            "files",
            ["registry", "import", "incoming.json"],
            2,
            setup=setup,
            keeps=("registry",),
        )
    )
CASES += [
    case(  # the place the import writes is a link to a file outside: replaced or refused
        "import-over-link-outside",
        "files",
        ["registry", "import", RESULT],
        (0, 2),
        setup=symlink("registry/saxpy/n1m/sm00-stand-in-not-a-gpu.json", "{outside}/victim.txt"),
        writes=("registry",),
        commits=True,
    ),
    case(  # a folder of the registry is a link out of the project: never written through
        "import-into-folder-link-outside",
        "files",
        ["registry", "import", RESULT],
        (0, 2),
        setup=symlink("registry/saxpy/n1m", "{outside}"),
        writes=("registry",),
        commits=True,
    ),
]

# --- a spec or a kernel source that is not a file ------------------------------------------
SPECS = {
    "fifo": fifo("kernels/saxpy.yaml"),
    "dev-zero": symlink("kernels/saxpy.yaml", "/dev/zero"),
    "dev-urandom": symlink("kernels/saxpy.yaml", "/dev/urandom"),
    "directory": directory("kernels/saxpy.yaml"),
    "sparse-100mb": sparse("kernels/saxpy.yaml", 100 << 20, b"name: saxpy\n"),
}
for kind, setup in SPECS.items():
    CASES.append(case(f"spec-{kind}-space", "files", ["space", "kernels/saxpy.cu"], 2, setup=setup))
for kind in ("fifo", "dev-zero", "dev-urandom"):  # the spec named itself, not through its .cu
    CASES.append(
        case(
            f"spec-{kind}-space-yaml",
            "files",
            ["space", "kernels/saxpy.yaml"],
            2,
            setup=SPECS[kind],
        )
    )
for kind in ("fifo",):
    CASES.append(
        case(
            f"spec-{kind}-check",
            "files",
            ["check", "--no-gpu"],
            (1, 2),
            setup=SPECS[kind],
            progress=True,
        )
    )
SOURCES = {
    "fifo": fifo("kernels/saxpy.cu"),
    "dev-zero": symlink("kernels/saxpy.cu", "/dev/zero"),
    "directory": directory("kernels/saxpy.cu"),
    "sparse-100mb": sparse("kernels/saxpy.cu", 100 << 20, b"// big\n"),
}
for kind, setup in SOURCES.items():
    CASES.append(
        case(f"source-{kind}-compile", "files", ["compile", "kernels/saxpy.cu"], 2, setup=setup)
    )
CASES += [
    case(
        "source-fifo-check",
        "files",
        ["check", "--no-gpu"],
        (1, 2),
        setup=SOURCES["fifo"],
        progress=True,
    ),
    case(  # a header the kernel includes is a FIFO: nvcc -M would wait for a writer
        "header-fifo-compile",
        "files",
        ["compile", "kernels/inc.cu"],
        2,
        setup=chain(
            fifo("kernels/fifo.h"),
            write("kernels/inc.cu", '#include "fifo.h"\n'),
            write(
                "kernels/inc.yaml",
                lambda p: (
                    p.path("kernels/saxpy.yaml").read_text().replace("name: saxpy", "name: inc")
                ),
            ),
        ),
        timeout_s=20,
    ),
    case(
        "reference-fifo-bench",
        "files",
        ["bench", "kernels/saxpy.cu", "-n", "20"],
        2,
        setup=fifo("kernels/saxpy_ref.py"),
        patches=("fakegpu",),
        timeout_s=30,
    ),
]

# --- journals, plot and export sources, the project's settings file ----------------------
JOURNALS = {
    "fifo": fifo(JOURNAL),
    "dev-zero": symlink(JOURNAL, "/dev/zero"),
    "directory": directory(JOURNAL),
}
for kind, setup in JOURNALS.items():
    CASES.append(
        case(
            f"journal-{kind}-resume",
            "files",
            ["search", "kernels/saxpy.cu", "-O", "p99", "--resume", JOURNAL, "--no-commit"],
            2,
            setup=setup,
            patches=("standin-gpu",),
            progress=True,
        )
    )
CASES += [
    case("journal-fifo-plot", "files", ["plot", JOURNAL, "--as", "csv"], 2, setup=JOURNALS["fifo"]),
    case(
        "journal-fifo-export",
        "files",
        ["export", JOURNAL, "--as", "csv"],
        2,
        setup=JOURNALS["fifo"],
    ),
    case(
        "journal-dev-zero-export",
        "files",
        ["export", JOURNAL, "--as", "csv"],
        2,
        setup=JOURNALS["dev-zero"],
    ),
]
CASES += [
    case(
        "warm-start-fifo-search",
        "files",
        ["search", "kernels/saxpy.cu", "-O", "p99", "--warm-start", "t4.json", "--no-commit"],
        2,
        setup=fifo("t4.json"),
        patches=("standin-gpu",),
        progress=True,
    ),
    case(
        "result-fifo-export",
        "files",
        ["export", "result.json"],
        2,
        setup=fifo("result.json"),
    ),
]
# a settings file that is no regular file is passed over (ignored) or refused, never read
for kind, setup in {
    "fifo": fifo("pyproject.toml"),
    "dev-zero": symlink("pyproject.toml", "/dev/zero"),
}.items():
    CASES.append(case(f"pyproject-{kind}-list", "files", ["registry", "list"], (0, 2), setup=setup))
CASES.append(
    case(
        "pyproject-sparse-100mb-list",
        "files",
        ["registry", "list"],
        2,
        setup=sparse("pyproject.toml", 100 << 20, b"[tool.ctune]\n"),
    )
)

# --- outputs that cannot be written ------------------------------------------------------
# A path given as an output is a link in the project to /dev/full, never /dev/full itself: a
# writer that renames a temporary file over its output would replace the device node (as
# root, in a CI container, it can), where it now replaces only the link.
FULL = symlink("full.out", "/dev/full")
CASES += [
    case(
        "output-dev-full-export-t4",
        "files",
        ["export", KEY, "--out", "full.out"],
        (0, 3),
        setup=FULL,
        writes=("full.out",),
    ),
    case(
        "output-dev-full-registry-export",
        "files",
        ["registry", "export", KEY, "-o", "full.out"],
        (0, 3),
        setup=FULL,
        writes=("full.out",),
    ),
    case(
        "output-dev-full-search-out",
        "files",
        [
            "search",
            "kernels/saxpy.cu",
            "-O",
            "p99",
            "--budget",
            "4",
            "--out",
            "full.out",
            "--no-commit",
        ],
        (0, 3),
        setup=FULL,
        writes=("full.out",),
        patches=("standin-gpu",),
        progress=True,
        timeout_s=60,
    ),
    case("stdout-dev-full-list", "files", ["registry", "list"], 3, stdout="/dev/full"),
    case(
        "stdout-dev-full-show-json",
        "files",
        ["registry", "show", KEY, "--json"],
        3,
        stdout="/dev/full",
    ),
    case(
        "stdout-dev-full-compile-json",
        "files",
        ["compile", "kernels/saxpy.cu", "--json"],
        3,
        stdout="/dev/full",
    ),
    case(
        "stdout-dev-full-export-csv",
        "files",
        ["export", JOURNAL, "--as", "csv"],
        3,
        stdout="/dev/full",
    ),
    case(
        "output-fifo-export",
        "files",
        ["export", KEY, "--out", "out.json"],
        2,
        setup=fifo("out.json"),
    ),
]

# --- a write limit that fails like a full disk (EFBIG; no root is needed for it) ----------
# ctune's own writes (the registry file, the journal) must say so: exit 3, nothing
# half-written. Where nvcc's own writes fail, its failure cannot be told from a kernel that
# does not build unless ctune looks: exit 3, or 2 naming the build, both pass.
CASES += [
    case(
        "disk-full-import",
        "files",
        ["registry", "import", RESULT],
        3,
        rlimit_fsize=8192,
        keeps=("registry",),
    ),
    case(
        "disk-full-compile",
        "files",
        ["compile", "kernels/saxpy.cu", "--set", "BLOCK=64"],
        (2, 3),
        rlimit_fsize=4096,
    ),
    case(
        "disk-full-search-journal",
        "files",
        ["search", "kernels/saxpy.cu", "-O", "p99", "--budget", "4", "--no-commit"],
        (2, 3),
        rlimit_fsize=6000,
        patches=("standin-gpu",),
        progress=True,
        timeout_s=60,
    ),
    case(
        "disk-full-refresh",
        "files",
        ["registry", "refresh"],
        (2, 3),
        setup=edit_source,
        rlimit_fsize=2048,
        keeps=("registry",),
        progress=True,
    ),
]

test_files = tier(CASES)

"""Settings from the environment and from ``[tool.ctune]`` that no command can run with.

Every setting is parsed and range-checked where it is read: NaN, infinities, negative and
zero durations, an empty path (which would mean the current folder), a malformed executor
address, a wrong type in ``pyproject.toml``. Each is one line naming the setting as the
user wrote it (``CTUNE_REP_MS``, ``... [tool.ctune] jobs``), exit 2, before anything is
built or written; ``CTUNE_DEBUG=0`` is off, as ``config`` parses it.
"""

from __future__ import annotations

from collections.abc import Mapping

from hostile_harness import RESULT, Case, case, tier
from hostile_setups import fifo, write

CASES: list[Case] = []
COMPILE = ["compile", "kernels/saxpy.cu"]
CHECK = ["check", "--no-gpu"]
SEARCH = ["search", "kernels/saxpy.cu", "-O", "p99", "--budget", "4", "--no-commit"]


def _env_case(
    id: str, argv: list[str], env: Mapping[str, str], exits: int | tuple[int, ...] = 2, **kw
) -> Case:
    name = next(iter(env))
    kw.setdefault("error", name if exits == 2 else None)
    return case(id, "settings", argv, exits, env=dict(env), **kw)


# CTUNE_DEBUG: "0" and its spellings are off (no traceback), anything else unknown is refused
for value in ("0", "false", "off"):
    CASES.append(
        case(
            f"debug-{value or 'empty'}-bad-key",
            "settings",
            ["registry", "show", "nope/x/y"],
            2,
            env={"CTUNE_DEBUG": value},
        )
    )

# empty and odd paths
CASES += [
    _env_case("registry-empty-import", ["registry", "import", RESULT], {"CTUNE_REGISTRY": ""}),
    _env_case("registry-empty-list", ["registry", "list"], {"CTUNE_REGISTRY": ""}),
    _env_case("registry-blank-import", ["registry", "import", RESULT], {"CTUNE_REGISTRY": "  "}),
    _env_case("cache-empty-compile", COMPILE, {"CTUNE_CACHE_DIR": ""}),
    _env_case(
        "cache-empty-search",
        SEARCH,
        {"CTUNE_CACHE_DIR": ""},
        patches=("standin-gpu",),
        progress=True,
        timeout_s=30,
    ),
    _env_case(
        "cache-dev-null-compile", COMPILE, {"CTUNE_CACHE_DIR": "/dev/null"}, (2, 3), error=None
    ),
    _env_case(
        "cache-fifo-compile",
        COMPILE,
        {"CTUNE_CACHE_DIR": "{project}/cache.fifo"},
        (2, 3),
        error=None,
        setup=fifo("cache.fifo"),
    ),
]

# numbers: each setting where it is read, with its own name in the message
NUMBERS = {
    "CTUNE_COMPILE_TIMEOUT_S": (COMPILE, ("nan", "inf", "-1", "0", "", "1e400")),
    "CTUNE_REP_MS": (CHECK, ("inf", "nan", "0")),
    "CTUNE_WARMUP_MS": (CHECK, ("-5", "nan")),
    "CTUNE_ENERGY_WINDOW_S": (CHECK, ("nan", "-1")),
    "CTUNE_RUN_TIMEOUT_FLOOR_S": (CHECK, ("nan",)),
    "CTUNE_COMPILE_MEMORY_BYTES": (COMPILE, ("-1", "lots")),
    "CTUNE_JOBS": (COMPILE, ("lots", "-1")),
}
for name, (argv, values) in NUMBERS.items():
    for value in values:
        tag = value.replace("-", "minus").replace(".", "p") or "empty"
        extra = {"progress": True} if argv is CHECK else {}
        CASES.append(
            _env_case(f"{name.lower().removeprefix('ctune_')}-{tag}", argv, {name: value}, **extra)
        )
CASES.append(_env_case("jobs-0-compile", COMPILE, {"CTUNE_JOBS": "0"}, 0))

# the executor, the GPUs, the arch, the compiler, the L2 policy, the timing method
for tag, value in {
    "scheme-only": "tcp://",
    "open-bracket": "tcp://[::1",
    "port-too-big": "tcp://127.0.0.1:99999",
    "shell": "$(touch {canary})",
}.items():
    CASES.append(
        _env_case(
            f"executor-{tag}",
            SEARCH,
            {"CTUNE_EXECUTOR": value},
            patches=("standin-gpu",),
            progress=True,
            timeout_s=20,
        )
    )
for tag, value in {"negative": "-1", "repeated": "0,0"}.items():
    CASES.append(
        _env_case(
            f"gpus-{tag}", SEARCH, {"CTUNE_GPUS": value}, patches=("standin-gpu",), progress=True
        )
    )
for tag, value in {"shell": "sm_$(touch {canary})"}.items():
    CASES.append(_env_case(f"arch-{tag}", COMPILE, {"CTUNE_ARCH": value}))
CASES += [
    _env_case("nvcc-missing", COMPILE, {"CTUNE_NVCC": "/nonexistent/nvcc"}, 3),
    _env_case("nvcc-directory", COMPILE, {"CTUNE_NVCC": "{project}/kernels"}, 3),
    _env_case("l2-policy-warm", COMPILE, {"CTUNE_L2_POLICY": "warm"}),
    _env_case(
        "l2-both-names-differ",
        COMPILE,
        {"CTUNE_L2_POLICY": "cold", "CTUNE_L2": "hot"},
        error="CTUNE_L2",
    ),
    _env_case("timing-fast", COMPILE, {"CTUNE_TIMING": "fast"}),
    _env_case("relink-maybe", COMPILE, {"CTUNE_RELINK": "maybe"}),
    _env_case("relink-shell", COMPILE, {"CTUNE_RELINK": "$(touch {canary})"}),
]
# a remote name that git would read as an option, or a transport that runs a command
for tag, value in {
    "upload-pack-option": "--upload-pack=touch {canary}",
    "ext-transport": "ext::sh -c touch% {canary}",
}.items():
    for command in ("pull", "status"):
        CASES.append(
            case(
                f"remote-{tag}-{command}",
                "settings",
                ["registry", command],
                (2, 5),
                env={"CTUNE_REGISTRY_REMOTE": value},
                keeps=("registry",),
            )
        )


# [tool.ctune] in pyproject.toml with wrong types and shapes
def _pyproject(body: str | bytes) -> object:
    return write("pyproject.toml", body)


PYPROJECT: dict[str, str | bytes] = {
    "jobs-text": '[tool.ctune]\njobs = "many"\n',
    "registry-int": "[tool.ctune]\nregistry = 5\n",
    "registry-empty": '[tool.ctune]\nregistry = ""\n',
    "timeout-nan": "[tool.ctune]\ncompile_timeout_s = nan\n",
    "rep-ms-minus-inf": "[tool.ctune]\nrep_ms = -inf\n",
    "unknown-key": "[tool.ctune]\njbos = 1\n",
    "ctune-not-a-table": "[tool]\nctune = 5\n",
    "tool-not-a-table": 'tool = "x"\n',
    "not-toml": "[tool.ctune\njobs = 1\n",
    "not-utf8": b"[tool.ctune]\njobs = 1 # \xff\xfe\n",
    "huge-int": "[tool.ctune]\njobs = " + "9" * 5000 + "\n",
}
for tag, body in PYPROJECT.items():
    argv = COMPILE if tag.startswith(("timeout", "rep-ms")) else ["registry", "list"]
    CASES.append(case(f"pyproject-{tag}", "settings", argv, 2, setup=_pyproject(body)))

test_settings = tier(CASES)

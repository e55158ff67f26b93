"""Regenerate the command transcripts in README.md and docs/*.md from real runs.

A transcript that can be regenerated is marked in the Markdown, right before its
fenced block::

    <!-- regen: ctune registry export gemm/sq4096/sm90-nvidia-h200 --as flags -->
    ```text
    $ ctune registry export gemm/sq4096/sm90-nvidia-h200 --as flags
    ...
    ```

``regen gpu:`` marks a run that needs the GPU machine (a search, a bench); those are
run only with ``--gpu``. The block becomes ``$ COMMAND`` and what the command printed
(stdout and stderr, at 80 columns, from the repository root; the root's own path
shown as ``.``). Only ``ctune`` commands that read are marked: nothing here writes to
the registry.

    python docs/regen.py            # the runs this machine can do (nvcc, no GPU)
    python docs/regen.py --gpu      # on the GPU machine: every marked transcript
    python docs/regen.py --check    # exit 1 naming the transcripts that drifted
    python docs/regen.py --gpu README.md   # only the files named

``--check`` compares after masking what differs from run to run (compile times,
build folders), so it can run in CI.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
MARKER = re.compile(r"<!-- regen( gpu)?: (?P<command>.+?) -->\n```text\n(?P<body>.*?)```", re.S)
#: run-to-run differences --check ignores
VOLATILE = (
    (re.compile(r"\d+(\.\d+)? s \("), "N s ("),  # compile 0.66 s (nvcc ...)
    (re.compile(r"builds/[0-9a-f]{32}"), "builds/HASH"),
    (re.compile(r"\d+(\.\d+)?s wall.*"), "TIME"),
    (re.compile(r" \(cached\)"), ""),  # a second run finds the build in the cache
    (re.compile(r"^\S*/nvcc ", re.M), "nvcc "),  # where this machine's nvcc lives
)


@dataclass(frozen=True)
class Transcript:
    path: Path
    command: str
    gpu: bool
    old: str
    start: int
    end: int


def find(path: Path) -> list[Transcript]:
    text = path.read_text()
    return [
        Transcript(path, m["command"], bool(m.group(1)), m["body"], m.start("body"), m.end("body"))
        for m in MARKER.finditer(text)
    ]


def run(command: str) -> str:
    """``$ command`` and its output, as a reader at an 80-column terminal would see it."""
    argv = shlex.split(command)
    if not argv or argv[0] != "ctune":
        raise SystemExit(f"regen: only ctune commands are run, not {command!r}")
    import tempfile

    cache = tempfile.mkdtemp(prefix="ctune-regen-")  # a fresh cache: builds are not "cached"
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(ROOT), "CTUNE_CACHE_DIR": cache}
    env.pop("CTUNE_DEBUG", None)
    done = subprocess.run(
        [sys.executable, "-m", "ctune", *argv[1:]],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=3600,
        check=False,
    )
    shutil.rmtree(cache, ignore_errors=True)
    output = done.stdout.replace(cache, ".ctune")
    output = output.replace(str(ROOT) + "/", "").replace(str(ROOT), ".")
    output = "\n".join(line.rstrip() for line in output.splitlines())
    if output and not output.endswith("\n"):
        output += "\n"
    return f"$ {command}\n{output}"


def masked(text: str) -> str:
    for pattern, replacement in VOLATILE:
        text = pattern.sub(replacement, text)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", action="store_true", help="also the runs that need a GPU")
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 on drift")
    parser.add_argument(
        "files", nargs="*", type=Path, help="only these Markdown files (default: all of them)"
    )
    args = parser.parse_args(argv)
    chosen = {f.resolve() for f in args.files}
    drifted, skipped = [], []
    for path in DOCS:
        if chosen and path not in chosen:
            continue
        text = path.read_text()
        pieces, last = [], 0
        for t in find(path):
            if t.gpu and not args.gpu:
                skipped.append(f"{path.relative_to(ROOT)}: {t.command}")
                continue
            new = run(t.command)
            if masked(new) != masked(t.old):
                drifted.append(f"{path.relative_to(ROOT)}: {t.command}")
            pieces += [text[last : t.start], new]
            last = t.end
        if not args.check and pieces:
            path.write_text("".join(pieces) + text[last:])
    for line in skipped:
        print(f"not regenerated (needs the GPU machine, --gpu): {line}")
    for line in drifted:
        print(f"{'drifted' if args.check else 'regenerated'}: {line}")
    return 1 if args.check and drifted else 0


if __name__ == "__main__":
    raise SystemExit(main())

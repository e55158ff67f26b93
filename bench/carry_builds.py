"""Carry a problem-set search's finalist builds between GPU calls, in one compressed file.

A CUTLASS build is ~1.9 MB (~0.5 MB gzipped) and takes ~40 s of a core; the GPU machine
starts bare and takes back at most ~60 MiB per call. The set's ``finalists.json`` names the
builds its next phases need (each shape's winner and the default build): ``pack`` puts their
cache folders into one .tgz, ``unpack`` puts them back into the build cache before the next
call. Other builds (the searches' losers) are not needed again.

    python bench/carry_builds.py unpack .device/carry/builds.tgz
    python bench/carry_builds.py pack .device/carry/builds.tgz .device/sets/*/finalists.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tarfile
from pathlib import Path

from ctune.search import journal as journal_mod

# A call carries 64 MiB in all: the tree (~5 MB) and the wheels (~17 MB) travel too
LIMIT_BYTES = 38 * 1024 * 1024


def cache_builds() -> Path:
    return Path(os.environ.get("CTUNE_CACHE_DIR", ".ctune")) / "builds"


def wanted(finalists: list[Path]) -> list[str]:
    """The finalists' builds first, then every build that measured correctly in the set's
    journals (newest journal first): the later shapes of a group start from those, and on a
    fresh machine each would be a compile again."""
    keys: list[str] = []
    for path in finalists:
        for entry in json.loads(path.read_text())["finalists"]:
            key = entry.get("build_key") or ""
            if key and key not in keys:
                keys.append(key)
    for path in finalists:
        journals = sorted(
            (path.parent / "journals").glob("*.jsonl"), key=lambda j: j.stat().st_mtime
        )
        for journal in reversed(journals):
            for trial in journal_mod.read(journal)[0].trials:
                key = trial.build.build_key if trial.build is not None else ""
                measured = trial.measurement is not None and trial.measurement.outcome.is_ok
                if measured and key and key not in keys:
                    keys.append(key)
    return keys


def pack(archive: Path, finalists: list[Path]) -> int:
    return pack_keys(archive, wanted(finalists))


def pack_keys(archive: Path, keys: list[str], builds: Path | None = None) -> int:
    """The cache folders of ``keys`` (build keys) into ``archive``, in order, until the size
    limit; what did not fit or was not in the cache is counted and said."""
    builds = builds or cache_builds()
    archive.parent.mkdir(parents=True, exist_ok=True)
    tmp = archive.with_name(archive.name + ".tmp")
    packed, missing = 0, 0
    full = 0
    with tarfile.open(tmp, "w:gz") as tar:
        for key in keys:
            folder = builds / key
            if not folder.is_dir():
                missing += 1
                continue
            # the compressed bytes written so far, plus this build uncompressed: never over
            grows = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
            if tmp.stat().st_size + grows > LIMIT_BYTES:
                full += 1
                continue
            tar.add(folder, arcname=key)
            packed += 1
    size = tmp.stat().st_size
    os.replace(tmp, archive)
    print(
        f"carry: {packed} builds in {archive} ({size / 2**20:.1f} MiB), {missing} not in "
        f"cache, {full} left out (the size limit)"
    )
    return 0


def unpack(archive: Path) -> int:
    if not archive.is_file():
        print(f"carry: no {archive}; the builds compile again")
        return 0
    builds = cache_builds()
    builds.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "r:gz") as tar:
        tar.extractall(builds, filter="data")
        print(f"carry: {len(tar.getnames())} files into {builds}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("pack", "unpack"))
    parser.add_argument("archive", type=Path)
    parser.add_argument("finalists", type=Path, nargs="*")
    args = parser.parse_args(argv)
    if args.action == "unpack":
        return unpack(args.archive)
    return pack(args.archive, [p for p in args.finalists if p.is_file()])


if __name__ == "__main__":
    sys.exit(main())

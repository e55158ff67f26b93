"""Kernels written elsewhere: fetch their exact sources, unmodified, into a git-ignored folder.

No third-party source is committed. ``bench/external/manifest.json`` names each file
(project, repository, commit, path inside it, licence, sha256); ``fetch`` downloads each
one from GitHub at that commit into ``bench/external/src/<project>/<path>`` and keeps it
only if its sha256 is the manifest's. ``check`` verifies what is there without the
network. The specs and references beside the manifest are ctune's own.

    python bench/external_kernels.py fetch      # needs the network (raw.githubusercontent.com)
    python bench/external_kernels.py check      # every file present with its sha256
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXTERNAL_DIR = ROOT / "bench" / "external"
MANIFEST = EXTERNAL_DIR / "manifest.json"
SOURCE_DIR = EXTERNAL_DIR / "src"
RAW_URL = "https://raw.githubusercontent.com/{repo}/{commit}/{path}"
MAX_FILE_BYTES = 4 * 1024 * 1024
REQUIRED_KEYS = ("project", "repo", "commit", "path", "licence", "sha256")


class FetchError(Exception):
    """A file that could not be fetched or does not match the manifest: one line."""


@dataclass(frozen=True)
class SourceFile:
    project: str
    repo: str
    commit: str
    path: str
    licence: str
    sha256: str
    kernels: tuple[str, ...] = ()

    @property
    def local(self) -> str:
        """Where the file lives under ``bench/external/src``."""
        return f"{self.project}/{self.path}"

    @property
    def url(self) -> str:
        return RAW_URL.format(repo=self.repo, commit=self.commit, path=self.path)


def load_manifest(path: Path = MANIFEST) -> list[SourceFile]:
    """The manifest's files; a missing key or a path leaving its folder is refused."""
    data = json.loads(path.read_text())
    files = []
    for i, entry in enumerate(data["files"]):
        missing = [k for k in REQUIRED_KEYS if not entry.get(k)]
        if missing:
            raise FetchError(f"{path}: files[{i}] lacks {', '.join(missing)}")
        if ".." in Path(entry["path"]).parts or Path(entry["path"]).is_absolute():
            raise FetchError(f"{path}: files[{i}].path {entry['path']!r} leaves the repository")
        fields = {k: entry[k] for k in REQUIRED_KEYS}
        files.append(SourceFile(**fields, kernels=tuple(entry.get("kernels", ()))))
    return files


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def verify(file: SourceFile, data: bytes) -> None:
    """Refuse bytes whose sha256 is not the manifest's."""
    got = sha256_of(data)
    if got != file.sha256:
        raise FetchError(
            f"{file.local}: sha256 {got[:16]}..., the manifest says {file.sha256[:16]}...; "
            f"the upstream file at {file.commit[:12]} is not the one the specs were written for"
        )


def download(url: str, timeout: float = 30) -> bytes:
    """The bytes at ``url``; no network is one line that says so."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            data: bytes = response.read(MAX_FILE_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise FetchError(f"{url}: HTTP {exc.code}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise FetchError(
            f"cannot reach {url.split('/')[2]} ({reason}): fetching needs the network; "
            f"or copy the files listed in {MANIFEST.relative_to(ROOT)} into "
            f"{SOURCE_DIR.relative_to(ROOT)}/<project>/<path>"
        ) from None
    if len(data) > MAX_FILE_BYTES:
        raise FetchError(f"{url}: larger than {MAX_FILE_BYTES} bytes")
    return data


def fetch(files: list[SourceFile], dest: Path = SOURCE_DIR, get=download) -> int:
    """Fetch every file not already present with its sha256; returns how many were written."""
    written = 0
    for file in files:
        target = dest / file.local
        if target.is_file() and sha256_of(target.read_bytes()) == file.sha256:
            continue
        data = get(file.url)
        verify(file, data)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".part")
        partial.write_bytes(data)
        partial.replace(target)
        written += 1
    return written


def missing_or_changed(files: list[SourceFile], dest: Path = SOURCE_DIR) -> list[str]:
    """The files absent under ``dest`` or with another sha256 than the manifest's."""
    bad = []
    for file in files:
        target = dest / file.local
        if not target.is_file():
            bad.append(f"{file.local} (absent)")
        elif sha256_of(target.read_bytes()) != file.sha256:
            bad.append(f"{file.local} (changed)")
    return bad


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["fetch", "check"])
    args = parser.parse_args(argv)
    try:
        files = load_manifest()
        if args.action == "fetch":
            written = fetch(files, SOURCE_DIR, download)
            print(f"{written} fetched, {len(files) - written} already present, all verified")
            return 0
        bad = missing_or_changed(files, SOURCE_DIR)
    except FetchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    if bad:
        print(
            f"error: {len(bad)} file(s) not as the manifest says: {', '.join(bad[:3])}; "
            "run `python bench/external_kernels.py fetch`",
            file=sys.stderr,
        )
        return 1
    print(f"{len(files)} files present, sha256 verified")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

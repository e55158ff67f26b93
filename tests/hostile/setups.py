"""Set-ups for the hostile tier: each returns a function that makes one hostile thing in a
case's scratch project (a FIFO, a link, a sparse file, a hand-edited artifact re-signed, an
edited journal line, a wrapper that holds nvcc or git at a step)."""

from __future__ import annotations

import json
import os
import shutil
import socket
from collections.abc import Callable, Mapping
from typing import Any

from hostile_harness import ARTIFACT, DATA_KERNELS, JOURNAL, Project, Setup


def digest_of(data: Mapping[str, Any]) -> str:
    """An artifact's digest, as ``schema.decode`` recomputes it (anyone can)."""
    from ctune.records import canonical_json, sha256_hex

    return sha256_hex(canonical_json({k: v for k, v in data.items() if k != "digest"}))


def artifact_text(data: dict[str, Any]) -> str:
    """An artifact file's bytes for ``data`` with its digest recomputed (a hand edit that
    re-signs itself), laid out as ``schema.encode`` lays it out."""
    plain = {k: v for k, v in data.items() if k != "digest"}
    plain["digest"] = digest_of(plain)
    return json.dumps(plain, indent=2, sort_keys=True, ensure_ascii=True) + "\n"


def read_artifact(project: Project, rel: str = ARTIFACT) -> dict[str, Any]:
    return json.loads(project.path(rel).read_text())


def rekey(member: dict[str, Any]) -> None:
    """Recompute a member's key after its genes were edited (as the schema checks it)."""
    from ctune.records import Candidate

    cand = member["candidate"]
    member["key"] = Candidate.of(cand["kernel"], cand["genes"]).key()


def craft_artifact(
    edit: Callable[[dict[str, Any]], None], rel: str = ARTIFACT, commit: bool = True
) -> Setup:
    """A set-up that edits the registry artifact by hand, re-signs it, and commits it (as a
    merged pull request would bring it in)."""

    def setup(p: Project) -> None:
        data = read_artifact(p, rel)
        old_pinned = data.get("pinned")
        keys = {m["key"]: m for m in (*data["front"], data["baseline"])}
        edit(data)
        for m in (*data["front"], data["baseline"]):
            before = m["key"]
            rekey(m)
            if old_pinned == before and before in keys:
                data["pinned"] = m["key"]
        p.write(rel, artifact_text(data))
        if commit:
            p.git("add", "-A")
            p.git("commit", "-q", "-m", "hand-edited artifact")

    return setup


def set_gene(where: str, name: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """Edit: gene ``name`` of member ``where`` (``front`` / ``baseline`` / ``all``)."""

    def edit(data: dict[str, Any]) -> None:
        members = {"front": data["front"], "baseline": [data["baseline"]]}.get(
            where, [*data["front"], data["baseline"]]
        )
        for m in members:
            m["candidate"]["genes"][name] = value

    return edit


def edit_source(p: Project) -> None:
    """A comment appended to saxpy.cu: the closure changes, so `check` rebuilds the members."""
    with p.path("kernels/saxpy.cu").open("a") as fh:
        fh.write("\n// edited\n")


def chain(*setups: Setup) -> Setup:
    def setup(p: Project) -> None:
        for s in setups:
            s(p)

    return setup


def fifo(rel: str) -> Setup:
    def setup(p: Project) -> None:
        path = p.path(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() or path.is_symlink():
            path.unlink()
        os.mkfifo(path)

    return setup


def symlink(rel: str, target: str) -> Setup:
    def setup(p: Project) -> None:
        path = p.path(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() or path.is_symlink():
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        path.symlink_to(p.fill(target))

    return setup


def directory(rel: str) -> Setup:
    def setup(p: Project) -> None:
        path = p.path(rel)
        if path.exists() or path.is_symlink():
            path.unlink()
        (path / "inside").mkdir(parents=True)

    return setup


def unix_socket(rel: str) -> Setup:
    def setup(p: Project) -> None:
        path = p.path(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() or path.is_symlink():
            path.unlink()
        # a bound socket stays a socket file after the socket object is gone
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        here = os.getcwd()
        try:
            os.chdir(path.parent)  # AF_UNIX paths are short: bind by the relative name
            s.bind(path.name)
        finally:
            os.chdir(here)
            s.close()

    return setup


def sparse(rel: str, size: int, head: bytes = b"") -> Setup:
    """A file of ``size`` bytes that costs no disk (a hole after ``head``)."""

    def setup(p: Project) -> None:
        path = p.path(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(head)
            fh.truncate(size)

    return setup


def write(rel: str, data: str | bytes | Callable[[Project], str | bytes]) -> Setup:
    def setup(p: Project) -> None:
        p.write(rel, data(p) if callable(data) else p.fill(data) if isinstance(data, str) else data)

    return setup


def spec_variant(name: str, edit: Callable[[str], str]) -> Setup:
    """``kernels/<name>.{cu,yaml}``: saxpy under another name, its YAML edited (``@CANARY@``
    in the result becomes the canary's path)."""

    def setup(p: Project) -> None:
        text = (DATA_KERNELS / "saxpy.yaml").read_text().replace("name: saxpy", f"name: {name}")
        p.write(f"kernels/{name}.yaml", edit(text).replace("@CANARY@", str(p.canary)))
        shutil.copy(DATA_KERNELS / "saxpy.cu", p.path(f"kernels/{name}.cu"))

    return setup


def journal_edit(edit: Callable[[list[str]], list[str]]) -> Setup:
    """A set-up that rewrites the template journal's lines (each a JSON text, no newline)."""

    def setup(p: Project) -> None:
        path = p.path(JOURNAL)
        lines = path.read_text().split("\n")[:-1]
        path.write_text("".join(f"{ln}\n" for ln in edit(lines)))

    return setup


def trial_edit(index: int, edit: Callable[[dict[str, Any]], None]) -> Setup:
    """Edit the ``index``-th trial line of the journal as JSON."""

    def on_lines(lines: list[str]) -> list[str]:
        trials = [i for i, ln in enumerate(lines) if json.loads(ln).get("kind") == "trial"]
        i = trials[index]
        data = json.loads(lines[i])
        edit(data)
        lines[i] = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return lines

    return journal_edit(on_lines)


def header_edit(edit: Callable[[dict[str, Any]], None]) -> Setup:
    def on_lines(lines: list[str]) -> list[str]:
        data = json.loads(lines[0])
        edit(data)
        lines[0] = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return lines

    return journal_edit(on_lines)


def slow_nvcc(seconds: float = 20.0) -> Setup:
    """``bin/nvcc``: the real nvcc, except that a compile (anything but --version/--help)
    first leaves ``markers/nvcc-PID`` and waits ``seconds`` (a signal lands mid-compile)."""

    def setup(p: Project) -> None:
        real = shutil.which("nvcc")
        script = f"""#!/bin/sh
case " $* " in
  *" --version "*|*" --help "*|*" -V "*) exec {real} "$@" ;;
esac
mkdir -p {p.markers}
touch {p.markers}/nvcc-$$
sleep {seconds}
exec {real} "$@"
"""
        path = p.bin / "nvcc"
        path.write_text(script)
        path.chmod(0o755)

    return setup


def slow_git(when: str, seconds: float = 20.0) -> Setup:
    """``bin/git``: the real git, except that ``git <when> ...`` first leaves
    ``markers/git-PID`` and waits (a signal lands mid-import). Put {bin} first on PATH."""

    def setup(p: Project) -> None:
        real = shutil.which("git")
        script = f"""#!/bin/sh
for a in "$@"; do
  if [ "$a" = "{when}" ]; then
    mkdir -p {p.markers}; touch {p.markers}/git-$$; sleep {seconds}; break
  fi
done
exec {real} "$@"
"""
        path = p.bin / "git"
        path.write_text(script)
        path.chmod(0o755)

    return setup


def path_with_bin() -> str:
    return "{bin}" + os.pathsep + os.environ.get("PATH", "")

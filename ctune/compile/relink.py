"""A launcher build again with other ptxas options, from a kept front end.

A ptxas option (a controls file included) changes only ptxas's output, yet a whole nvcc
run of a launcher (a host library) repeats cudafe++, cicc and the host compiler for each.
A *front end* is what those steps make once for every build whose argv differs only in
ptxas options: the PTX, the host object compiled with the fatbin left out (its
``fatbinData`` an undefined hidden symbol), nvcc's device-link object and its link step.
A *variant* is ptxas with the build's own options on that PTX, fatbinary, the fatbin as an
object of its own (``fatbinData`` global and hidden, never bound to another library's in
a process that loads many builds) and the kept link step: the same SASS as the whole run.
A kernel's cubin (``-cubin``) is simpler: its front end is the PTX, its variant ptxas
alone, which writes the cubin; cicc, most of such a build, runs once per front end.

nvcc's own ``--dryrun`` says each step; they run as argv lists (never through a shell),
each one checked by :func:`ctune.quoting.check_argv` and run by
:func:`ctune.compile.process.run_nvcc`. docs/advanced-controls.md, "What a controls
candidate costs to build".
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shlex
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctune.compile.process import LiveGroups, NvccRun, run_nvcc
from ctune.quoting import check_argv
from ctune.spec.space.nvcc import ACF, render_flags
from ctune.spec.space.params import Gene

#: nvcc's pass-through to ptxas, and the one ptxas option every ctune build has
PTXAS_PASS = "-Xptxas"
EVERY_BUILD = frozenset({"-v"})
#: bump when a front end's files or record change, so old front ends are not used
FRONTEND_FORMAT = 1
RECORD = "frontend.json"
PTX, HOST_OBJECT, DLINK_OBJECT = "kernel.ptx", "host.o", "dlink.o"
#: what the kept link step says in place of the paths a variant gives it
HOST_TOKEN, DLINK_TOKEN, OUTPUT_TOKEN = "{host}", "{dlink}", "{output}"
#: fatbinary's record of the ptxas and cicc options: a JIT of embedded PTX reads it, and a
#: build of SASS only embeds none; its spaces would not pass the argv rule
_FATBIN_NOTES = ("--cmdline=", "--cicc-cmdline=")
_SETTING = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_ASM_END = '.text\\n");'
_FATBIN_LABEL = '"fatbinData:\\n"'
_FATBIN_EXTERN = "extern const unsigned long long fatbinData["


class RelinkError(Exception):
    """A front end cannot be made or used; the message says why (the build is then whole)."""


def split_ptxas(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """``argv`` split in two: (all but its ``-Xptxas X`` pairs that only ptxas reads, those
    pairs, flattened). ``-Xptxas -v`` stays in the first: every build has it."""
    front: list[str] = []
    ptxas_only: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] == PTXAS_PASS and i + 1 < len(argv):
            pair = [argv[i], argv[i + 1]]
            (front if argv[i + 1] in EVERY_BUILD else ptxas_only).extend(pair)
            i += 2
            continue
        front.append(argv[i])
        i += 1
    return front, ptxas_only


def ptxas_only_items(argv: Sequence[str]) -> list[str]:
    """The ``-Xptxas X`` pairs of ``argv`` (flattened) that only ptxas reads: all but ``-v``,
    which every build has."""
    return split_ptxas(argv)[1]


def frontend_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` without its ptxas-only pairs: builds whose front-end argv is equal (and
    source closure, toolchain and entry) share one front end."""
    return split_ptxas(argv)[0]


def has_ptxas_variants(flag_genes: Sequence[Gene]) -> bool:
    """Whether some value of these flag genes renders a ptxas-only pair: only then do
    candidates share front ends, and keeping one pays off."""
    for gene in flag_genes:
        if gene.name == ACF["ptxas"].gene_name:
            return True
        for value in gene.values:
            if ptxas_only_items(render_flags({gene.name: value})):
                return True
    return False


def with_output(argv: Sequence[str], output: str) -> list[str]:
    """``argv`` with its ``-o`` value replaced."""
    items = list(argv)
    at = items.index("-o")
    items[at + 1] = output
    return items


# --- nvcc's steps -------------------------------------------------------------------------
@dataclass(frozen=True)
class Steps:
    """The steps a ``nvcc --dryrun --keep`` lists that a front end or a variant runs, as
    argv lists (the program a bare name), and the PATH nvcc would find them on."""

    search_path: str
    ptxas: list[str]
    fatbinary: list[str]
    host_compile: list[str]
    link: list[str]
    stem: str  # the name nvcc gives the source's kept files


def _listing(text: str) -> tuple[dict[str, str], list[list[str]]]:
    """A ``--dryrun``'s settings (``NAME=value``) and its steps as argv lists."""
    settings: dict[str, str] = {}
    commands: list[list[str]] = []
    for line in text.splitlines():
        if not line.startswith("#$ "):
            continue
        run = line[3:]
        if _SETTING.match(run):
            name, _, value = run.partition("=")
            settings[name] = value.strip()
            continue
        try:
            commands.append(shlex.split(run))
        except ValueError as exc:
            raise RelinkError(f"cannot read nvcc's step {run[:80]!r}: {exc}") from None
    return settings, commands


def _ptxas_step(commands: list[list[str]], keep: str) -> tuple[list[str], str]:
    """The one ptxas step, on a PTX kept in ``keep``, and the stem of that PTX."""
    ptxas = _one(commands, lambda c: c[0] == "ptxas", "ptxas")
    ptx = [item for item in ptxas if item.endswith(".ptx")]
    if len(ptx) != 1 or Path(ptx[0]).parent != Path(keep):
        raise RelinkError("nvcc's ptxas step names no kept PTX")
    return ptxas, Path(ptx[0]).stem


def parse_cubin_dryrun(text: str, keep: str) -> tuple[str, list[str], str]:
    """A cubin build's ``--dryrun``: (the PATH its tools are found on, its ptxas step, the
    stem of its kept PTX). The ptxas step writes the build's cubin itself."""
    settings, commands = _listing(text)
    ptxas, stem = _ptxas_step(commands, keep)
    return settings.get("PATH", ""), ptxas, stem


def parse_dryrun(text: str, keep: str) -> Steps:
    """The :class:`Steps` of a launcher build's ``--dryrun`` (``keep``: its keep folder)."""
    settings, commands = _listing(text)
    ptxas, stem = _ptxas_step(commands, keep)
    cubin = f"file={keep}/{stem}.cubin"
    fatbinary = _one(
        commands, lambda c: c[0] == "fatbinary" and any(i.endswith(cubin) for i in c), "fatbinary"
    )
    cudafe = f"{keep}/{stem}.cudafe1.cpp"
    host = _one(commands, lambda c: "-c" in c and cudafe in c, "host compile")
    link = _one(
        commands, lambda c: "-shared" in c and f"{keep}/{stem}.o" in c and "-c" not in c, "link"
    )
    return Steps(settings.get("PATH", ""), ptxas, fatbinary, host, link, stem)


def _one(commands: list[list[str]], match: Callable[[list[str]], bool], what: str) -> list[str]:
    found = [c for c in commands if c and match(c)]
    if len(found) != 1:
        raise RelinkError(f"nvcc lists {len(found)} {what} steps, not one")
    return found[0]


def split_fatbin(text: str) -> tuple[str, str]:
    """nvcc's ``.fatbin.c``: (the asm block that holds the fatbin, the rest)."""
    try:
        start = text.index("asm(")
        end = text.index(_ASM_END, start) + len(_ASM_END)
    except ValueError:
        raise RelinkError("nvcc's .fatbin.c holds no fatbin block") from None
    return text[start:end], text[:start] + text[end:]


def host_side(rest: str) -> str:
    """The ``.fatbin.c`` the host object is compiled with: no fatbin, and ``fatbinData`` a
    hidden symbol another object of the library defines."""
    if _FATBIN_EXTERN not in rest:
        raise RelinkError("nvcc's .fatbin.c declares no fatbinData")
    hidden = '__attribute__((visibility("hidden"))) ' + _FATBIN_EXTERN
    return rest.replace(_FATBIN_EXTERN, hidden)


def fatbin_object_source(asm_block: str) -> str:
    """The fatbin alone as a C file: ``fatbinData`` defined global and hidden."""
    if _FATBIN_LABEL not in asm_block:
        raise RelinkError("nvcc's fatbin block has no fatbinData label")
    exported = '".globl fatbinData\\n"\n".hidden fatbinData\\n"\n' + _FATBIN_LABEL
    return asm_block.replace(_FATBIN_LABEL, exported, 1) + "\n"


# --- running ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Runner:
    """How each step runs: the limits of a build (docs/design.md, "The build cache")."""

    what: str
    timeout_s: float
    scratch: Path
    memory_bytes: int = 0
    niceness: int = 0
    live: LiveGroups | None = None

    def run(self, argv: list[str], cwd: Path, deadline: float | None = None) -> NvccRun:
        """One step, its output merged; ``deadline`` (monotonic) bounds its timeout."""
        left = self.timeout_s if deadline is None else max(0.001, deadline - time.monotonic())
        return run_nvcc(
            argv,
            what=self.what,
            timeout_s=left,
            scratch=self.scratch,
            cwd=cwd,
            merge_output=True,
            memory_bytes=self.memory_bytes,
            niceness=self.niceness,
            live=self.live,
        )

    def must(self, argv: list[str], cwd: Path, step: str, deadline: float | None = None) -> str:
        """Run a step that must succeed (RelinkError naming it otherwise); its output."""
        check_argv(argv, f"{self.what}: {step}")
        done = self.run(argv, cwd, deadline)
        text = done.stdout.decode(errors="replace")
        if done.timed_out:
            raise RelinkError(f"{step} timed out")
        if done.returncode != 0:
            tail = text.strip().splitlines()[-1:] or ["no output"]
            raise RelinkError(f"{step} failed (exit {done.returncode}): {tail[0][:200]}")
        return text


def program(argv: list[str], search_path: str) -> list[str]:
    """A step with its program found on nvcc's own PATH (the split toolchain's ptxas)."""
    found = shutil.which(argv[0], path=search_path or None)
    if found is None:
        raise RelinkError(f"{argv[0]} is not on nvcc's PATH")
    return [found, *argv[1:]]


def _dryrun_text(
    argv: Sequence[str], keep: str, cwd: Path, runner: Runner, deadline: float | None
) -> str:
    """nvcc's ``--dryrun`` listing for ``argv`` with its intermediate files kept in ``keep``."""
    listing = [*argv, "--dryrun", "--keep", "--keep-dir", keep]
    return runner.must(listing, cwd, "nvcc --dryrun", deadline)


def dryrun(
    argv: Sequence[str], keep: str, cwd: Path, runner: Runner, deadline: float | None = None
) -> Steps:
    """nvcc's steps for a launcher's ``argv`` with its intermediate files kept in ``keep``."""
    return parse_dryrun(_dryrun_text(argv, keep, cwd, runner, deadline), keep)


def cubin_dryrun(
    argv: Sequence[str], keep: str, cwd: Path, runner: Runner, deadline: float | None = None
) -> tuple[str, list[str], str]:
    """:func:`parse_cubin_dryrun` of a kernel's ``argv``, its files kept in ``keep``."""
    return parse_cubin_dryrun(_dryrun_text(argv, keep, cwd, runner, deadline), keep)


# --- the front end ------------------------------------------------------------------------
#: the kinds of build a front end serves: a launcher's library, a kernel's cubin
LAUNCHER, CUBIN = "launcher", "cubin"
#: what a front end of each kind keeps beside its record
KEPT = {LAUNCHER: (PTX, HOST_OBJECT, DLINK_OBJECT), CUBIN: (PTX,)}


def kind_of(argv: Sequence[str]) -> str:
    """The kind of build ``argv`` makes: ``-cubin`` is a kernel's cubin, else a library."""
    return CUBIN if "-cubin" in argv else LAUNCHER


@dataclass(frozen=True)
class FrontEnd:
    """A kept front end: its folder, the name of its kept files, its link step (tokens for
    the paths a variant gives; none for a cubin), the PATH its tools are found on and the
    kind of build it serves. A cubin's front end is its PTX alone: a variant is ptxas."""

    folder: Path
    stem: str
    link: list[str]
    search_path: str
    host_compiler: str
    kind: str = LAUNCHER

    def link_argv(self, fatbin_object: Path, output: str) -> list[str]:
        """The kept link step with this front end's objects and a variant's fatbin."""
        out: list[str] = []
        for item in self.link:
            if item == HOST_TOKEN:
                out += [str(self.folder / HOST_OBJECT), str(fatbin_object)]
            elif item == DLINK_TOKEN:
                out.append(str(self.folder / DLINK_OBJECT))
            else:
                out.append(output if item == OUTPUT_TOKEN else item)
        return out


def load_frontend(folder: Path) -> FrontEnd | None:
    """The front end in ``folder``; None when there is none; RelinkError when it is damaged
    (a file lost, an unreadable record)."""
    record = folder / RECORD
    if not folder.exists():
        return None
    try:
        data = json.loads(record.read_text())
        if data["format"] != FRONTEND_FORMAT:
            raise RelinkError(f"front end of format {data['format']}")
        made = FrontEnd(
            folder,
            data["stem"],
            list(data["link"]),
            data["path"],
            data["host_compiler"],
            data.get("kind", LAUNCHER),
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RelinkError(f"unreadable front-end record: {exc}") from None
    if made.kind not in KEPT:
        raise RelinkError(f"a front end of kind {made.kind!r}")
    for name in KEPT[made.kind]:
        if not (folder / name).is_file():
            raise RelinkError(f"the front end lost its {name}")
    return made


def discard(folder: Path) -> None:
    """Remove a damaged front end (renamed aside first: a reader never sees half of it)."""
    aside = folder.with_name(f".stale-{folder.name}-{os.getpid()}-{secrets.token_hex(4)}")
    with contextlib.suppress(OSError):
        folder.rename(aside)
        shutil.rmtree(aside, ignore_errors=True)


def make_frontend(argv: Sequence[str], folder: Path, runner: Runner) -> FrontEnd:
    """Run nvcc once on ``argv`` (a front-end argv) keeping its files, compile its host
    object again without the fatbin, and store the front end in ``folder`` whole (made
    aside, renamed into place; another process's, made first, is kept)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    scratch = folder.parent / f".{folder.name}-{os.getpid()}-{secrets.token_hex(4)}"
    scratch.mkdir()
    try:
        (scratch / "keep").mkdir()
        made = scratch / "made"
        made.mkdir()
        make = _cubin_frontend if kind_of(argv) == CUBIN else _launcher_frontend
        record = {"format": FRONTEND_FORMAT, **make(argv, scratch, made, runner)}
        (made / RECORD).write_text(json.dumps(record, indent=2))
        with contextlib.suppress(OSError):  # another process's, made first: kept
            os.rename(made, folder)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    found = load_frontend(folder)
    if found is None:
        raise RelinkError(f"the front end vanished from {folder}")
    return found


def _launcher_frontend(
    argv: Sequence[str], scratch: Path, made: Path, runner: Runner
) -> dict[str, Any]:
    """A launcher's front end into ``made``: its PTX, its host object compiled again without
    the fatbin and its device-link object; its record's fields."""
    keep = scratch / "keep"
    base = with_output(argv, "base.so")
    steps = dryrun(base, "keep", scratch, runner)
    runner.must([*base, "--keep", "--keep-dir", "keep"], scratch, "the front end's nvcc")
    stem = steps.stem
    fatbin_c = keep / f"{stem}.fatbin.c"
    _, rest = split_fatbin(fatbin_c.read_text())
    fatbin_c.write_text(host_side(rest))
    host = program(with_output(steps.host_compile, "host.o"), steps.search_path)
    runner.must(host, scratch, "the host object without its fatbin")
    os.replace(scratch / "host.o", made / HOST_OBJECT)
    os.replace(keep / f"{stem}.ptx", made / PTX)
    os.replace(keep / _dlink_name(steps.link), made / DLINK_OBJECT)
    return {
        "kind": LAUNCHER,
        "stem": stem,
        "link": _link_template(steps.link, stem),
        "path": steps.search_path,
        "host_compiler": host[0],
    }


def _cubin_frontend(
    argv: Sequence[str], scratch: Path, made: Path, runner: Runner
) -> dict[str, Any]:
    """A kernel's front end into ``made``: the PTX its nvcc run keeps; its record's fields."""
    base = with_output(argv, "base.cubin")
    search_path, _, stem = cubin_dryrun(base, "keep", scratch, runner)
    runner.must([*base, "--keep", "--keep-dir", "keep"], scratch, "the front end's nvcc")
    os.replace(scratch / "keep" / f"{stem}.ptx", made / PTX)
    return {"kind": CUBIN, "stem": stem, "link": [], "path": search_path, "host_compiler": ""}


def _dlink_name(link: list[str]) -> str:
    kept = [i for i in link if i.startswith("keep/") and i.endswith("_dlink.o")]
    if len(kept) != 1:
        raise RelinkError("nvcc's link step names no device-link object")
    return Path(kept[0]).name


def _link_template(link: list[str], stem: str) -> list[str]:
    """The link step with tokens for the host object, the device-link object and the
    output (paths of the scratch folder it was listed in)."""
    out = list(link)
    out[out.index(f"keep/{stem}.o")] = HOST_TOKEN
    out[out.index(f"keep/{_dlink_name(link)}")] = DLINK_TOKEN
    out[out.index("-o") + 1] = OUTPUT_TOKEN
    return out


# --- a variant ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Variant:
    """A variant's ptxas run (None: it timed out) and the text of every step it ran."""

    returncode: int | None
    text: str


def build_variant(argv: Sequence[str], front: FrontEnd, work: Path, runner: Runner) -> Variant:
    """The library ``argv`` builds (its ``-o`` in ``work``), from ``front``: its own ptxas
    and fatbinary steps as nvcc lists them, then the kept link step. A ptxas that fails
    (or runs out of time) is the Variant's to report; a later step that fails, or a front
    end that cannot be read, raises RelinkError."""
    if kind_of(argv) != front.kind:
        raise RelinkError(f"a {kind_of(argv)} build from a front end of a {front.kind}")
    output = Path(argv[argv.index("-o") + 1])
    kept = work / "v"
    kept.mkdir()
    variant = _cubin_variant if front.kind == CUBIN else _launcher_variant
    try:
        return variant(argv, front, work, runner, output.name, time.monotonic() + runner.timeout_s)
    except BaseException:
        (work / output.name).unlink(missing_ok=True)
        raise
    finally:
        shutil.rmtree(kept, ignore_errors=True)


def _kept_ptx(front: FrontEnd, stem: str, kept: Path) -> None:
    """The front end's PTX where the variant's ptxas step reads it."""
    if stem != front.stem:
        raise RelinkError(f"the variant's source is {stem}, the front end's {front.stem}")
    try:
        shutil.copyfile(front.folder / PTX, kept / f"{front.stem}.ptx")
    except OSError as exc:
        raise RelinkError(f"cannot copy the front end's PTX: {exc}") from None


def _run_ptxas(
    ptxas: list[str], search_path: str, work: Path, runner: Runner, deadline: float
) -> tuple[int | None, str]:
    """The variant's own ptxas step (found on nvcc's PATH, checked as nvcc's argv is)."""
    found = program(ptxas, search_path)
    check_argv(found, f"{runner.what}: ptxas")
    done = runner.run(found, work, deadline)
    return done.returncode, done.stdout.decode(errors="replace")


def _cubin_variant(
    argv: Sequence[str], front: FrontEnd, work: Path, runner: Runner, output: str, deadline: float
) -> Variant:
    """A kernel's cubin: its own ptxas step, as nvcc lists it, on the front end's PTX."""
    search_path, ptxas, stem = cubin_dryrun(with_output(argv, output), "v", work, runner, deadline)
    _kept_ptx(front, stem, work / "v")
    return Variant(*_run_ptxas(ptxas, search_path, work, runner, deadline))


def _launcher_variant(
    argv: Sequence[str], front: FrontEnd, work: Path, runner: Runner, output: str, deadline: float
) -> Variant:
    """A launcher's library: its own ptxas and fatbinary steps, the fatbin as an object of
    its own, and the front end's link step."""
    kept = work / "v"
    steps = dryrun(with_output(argv, output), "v", work, runner, deadline)
    _kept_ptx(front, steps.stem, kept)
    returncode, text = _run_ptxas(steps.ptxas, steps.search_path, work, runner, deadline)
    if returncode != 0:
        return Variant(returncode, text)
    fatbinary = [i for i in steps.fatbinary if not i.startswith(_FATBIN_NOTES)]
    runner.must(program(fatbinary, steps.search_path), work, "fatbinary", deadline)
    asm_block, _ = split_fatbin((kept / f"{front.stem}.fatbin.c").read_text())
    (kept / "fatbin.c").write_text(fatbin_object_source(asm_block))
    compile_fatbin = [
        front.host_compiler,
        "-c",
        "-fPIC",
        "-x",
        "c",
        "v/fatbin.c",
        "-o",
        "v/fatbin.o",
    ]
    runner.must(compile_fatbin, work, "the fatbin object", deadline)
    link = front.link_argv(kept / "fatbin.o", output)
    runner.must(program(link, front.search_path), work, "the link step", deadline)
    return Variant(0, text)


__all__ = [
    "FrontEnd",
    "RelinkError",
    "Runner",
    "Variant",
    "build_variant",
    "discard",
    "frontend_argv",
    "has_ptxas_variants",
    "load_frontend",
    "make_frontend",
    "ptxas_only_items",
    "split_ptxas",
]

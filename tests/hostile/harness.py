"""The hostile-input tier's one harness: a case record, a runner, and the invariants.

A :class:`Case` names a hostile set-up (files written into a scratch project), the command
line, the environment, and what the documented outcome is. :func:`run_case` runs it and
returns every broken invariant as a line of text (an empty list: the case held):

1. no traceback; a failure is one ``error:`` line on stderr (commands with a live display
   may print progress lines before it);
2. the exit code is one the case documents (never 70, the internal-error code);
3. no hang: the command ends within the case's timeout, and leaves no process behind;
4. no command ran: no ``CANARY*`` file appeared anywhere under the scratch folder (every
   payload that could run points there);
5. nothing was written outside the intended place: the scratch folder (project, a sibling
   ``outside/``, HOME, TMPDIR) is compared before and after, and only the case's own
   folders (``.ctune/``, and what the case says it writes) may differ;
6. nothing was lost: what the case keeps (the registry, a journal) is intact afterwards.

Commands run through ``ctune.cli.main`` in a forked child of the test process: the
imports are paid once, yet each case has its own process (cwd, environment, signals,
file descriptors) that can be timed out, interrupted and killed like a real one, and its
stdout and stderr are the real descriptors, so output from ctune's own subprocesses is
seen too. Cases that need a fresh interpreter run ``python -m ctune``.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DATA_KERNELS = ROOT / "tests" / "data" / "kernels"
FAKEGPU = ROOT / "tests" / "unit" / "measure" / "fakegpu"
DEVICE = "sm90-nvidia-h100-80gb-hbm3"
KEY = f"saxpy/n1m/{DEVICE}"
ARTIFACT = f"registry/saxpy/n1m/{DEVICE}.json"  # project-relative
JOURNAL = "journals/saxpy.jsonl"  # a finished stand-in search of saxpy (project-relative)
RESULT = "results/saxpy-n1m.json"  # that search's result file, valid for `registry import`

EXIT_INTERRUPTED = 130
EXIT_INTERNAL = 70

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_COMMITTER_NAME": "Test Author",
    "GIT_COMMITTER_EMAIL": "author@example.com",
    "GIT_AUTHOR_DATE": "2025-01-01T00:00:00+00:00",
    "GIT_COMMITTER_DATE": "2025-01-01T00:00:00+00:00",
}
HASHED_BYTES = 4 << 20  # files up to this size are compared by content, larger by size+mtime


# --- the scratch project -------------------------------------------------------------------


@dataclass(frozen=True)
class Project:
    """One case's scratch folder: ``project/`` (a git repository with kernels, a registry
    holding one real saxpy artifact, a search journal and its result file), a sibling
    ``outside/``, ``home/`` (HOME and XDG dirs), ``tmp/`` (TMPDIR) and ``bin/`` (wrappers)."""

    base: Path

    @property
    def root(self) -> Path:
        return self.base / "project"

    @property
    def outside(self) -> Path:
        return self.base / "outside"

    @property
    def home(self) -> Path:
        return self.base / "home"

    @property
    def tmp(self) -> Path:
        return self.base / "tmp"

    @property
    def bin(self) -> Path:
        return self.base / "bin"

    @property
    def canary(self) -> Path:
        """Where every shell payload points (``touch`` it and the case fails)."""
        return self.base / "CANARY"

    @property
    def markers(self) -> Path:
        """Where wrappers and stand-ins leave a file when they reach a point (signal cases)."""
        return self.base / "markers"

    def path(self, rel: str) -> Path:
        return self.root / rel

    def write(self, rel: str, data: str | bytes) -> Path:
        target = self.path(rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, str):
            target.write_text(data)
        else:
            target.write_bytes(data)
        return target

    def git(self, *args: str, check: bool = True) -> str:
        done = subprocess.run(
            ["git", *args],
            cwd=self.root,
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, **GIT_IDENTITY, **git_config_env(self)},
        )
        if check and done.returncode != 0:
            raise AssertionError(f"git {' '.join(args)}: {done.stderr}")
        return done.stdout

    def fill(self, text: str) -> str:
        """``{canary}``, ``{project}``, ``{outside}``, ``{base}``, ``{markers}``, ``{bin}``,
        ``{key}``, ``{artifact}``, ``{journal}``, ``{result}``, ``{python}`` in a case's
        argv or environment, filled in; other braces are left as they are."""
        values = {
            "canary": str(self.canary),
            "project": str(self.root),
            "outside": str(self.outside),
            "base": str(self.base),
            "markers": str(self.markers),
            "bin": str(self.bin),
            "key": KEY,
            "artifact": ARTIFACT,
            "journal": JOURNAL,
            "result": RESULT,
            "python": sys.executable,
        }
        return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), m.group(0)), text)


def git_config_env(project: Project) -> dict[str, str]:
    return {
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": str(project.home / ".gitconfig"),
    }


def base_env(project: Project) -> dict[str, str]:
    """The environment every case starts from: the machine's PATH, HOME and XDG dirs and
    TMPDIR inside the scratch folder, no CTUNE_* setting, a fixed git identity."""
    keep = ("PATH", "LANG", "LC_ALL", "CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(
        HOME=str(project.home),
        XDG_CONFIG_HOME=str(project.home / ".config"),
        XDG_CACHE_HOME=str(project.home / ".cache"),
        XDG_DATA_HOME=str(project.home / ".local" / "share"),
        XDG_STATE_HOME=str(project.home / ".local" / "state"),
        TMPDIR=str(project.tmp),
        COLUMNS="200",
        PYTHONPATH=str(ROOT),
        **GIT_IDENTITY,
        **git_config_env(project),
    )
    return env


# --- a case ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Signal:
    """Send ``sig`` once ``marker`` (a glob under the scratch folder) exists, or after
    ``after_s`` seconds; ``group``: to the whole process group, as a terminal's Ctrl-C;
    ``count`` times, ``interval_s`` apart (a second Ctrl-C)."""

    sig: int
    marker: str | None = None
    after_s: float = 0.0
    group: bool = True
    count: int = 1
    interval_s: float = 0.5
    required: bool = True  # False: a command that ends before the signal is due passes


Setup = Callable[[Project], None]
Check = Callable[[Project, "Outcome"], list[str]]


@dataclass(frozen=True)
class Case:
    """One hostile input and its documented outcome.

    ``argv`` and ``env`` values are filled by :meth:`Project.fill`. ``writes`` lists the
    project-relative folders the command may change besides ``.ctune/`` (a registry it
    imports into, the journal folder); ``commits``: it may move the branch. ``keeps``
    says what must be intact afterwards: ``"registry"`` (every file as before unless the
    registry is in ``writes``, ``git fsck`` clean, ``ctune registry verify`` passes) and
    ``"journal"`` (every complete line of the journal still there, in order).
    """

    id: str
    cls: str
    argv: tuple[str, ...]
    exits: frozenset[int]
    setup: Setup | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    error: str | None = None  # a regex the error line must match
    timeout_s: float = 10.0
    python: bool = False  # a fresh `python -m ctune` instead of a forked main()
    patches: tuple[str, ...] = ()  # names in PATCHES, applied in the child
    signal: Signal | None = None
    writes: tuple[str, ...] = ()
    commits: bool = False
    keeps: tuple[str, ...] = ()
    progress: bool = False  # a live display may print lines to stderr before the error
    warnings: int | None = None  # exactly this many "warning:" lines
    stdout: str | None = None  # a path stdout is opened on instead of a capture file
    rlimit_fsize: int | None = None  # bytes: writes beyond it fail (a disk that is full)
    memory_mb: int = 3072  # the child's address-space cap: a memory bomb fails, not the host
    check: Check | None = None  # more, case-specific invariants
    note: str = ""

    def __str__(self) -> str:
        return self.id


def case(id: str, cls: str, argv: Sequence[str], exits: int | Iterable[int], **kw: Any) -> Case:
    """A :class:`Case` with ``exits`` given as one code or several."""
    codes = frozenset([exits] if isinstance(exits, int) else exits)
    return Case(id=id, cls=cls, argv=tuple(argv), exits=codes, **kw)


# --- patches applied in the child --------------------------------------------------------


def _standin_measurer(project: Project, **kw: Any) -> Any:
    from ctune.testing.standins import StandInMeasurer

    class MarkingMeasurer(StandInMeasurer):
        """NOT A GPU: the analytic stand-in, which leaves ``measure-N`` / ``remeasure-N``
        in the markers folder at each call and, when told, takes its time there so a
        signal lands during the search or during confirmation."""

        def __init__(self, measure_s: float = 0.0, remeasure_s: float = 0.0) -> None:
            super().__init__(samples=40)
            self.measure_s, self.remeasure_s = measure_s, remeasure_s
            self.marks = 0

        def _mark(self, name: str) -> None:
            project.markers.mkdir(exist_ok=True)
            self.marks += 1
            (project.markers / f"{name}-{self.marks}").touch()

        def measure(self, *args: Any, **kwargs: Any) -> Any:
            self._mark("measure")
            _sleep(self.measure_s)
            return super().measure(*args, **kwargs)

        def remeasure(self, *args: Any, **kwargs: Any) -> Any:
            self._mark("remeasure")
            _sleep(self.remeasure_s)
            return super().remeasure(*args, **kwargs)

    return MarkingMeasurer(**kw)


def _sleep(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.02)


def _patch_standin_gpu(project: Project, measure_s: float = 0.0, remeasure_s: float = 0.0):
    """``ctune search`` measures on the analytic stand-in (NOT A GPU); nvcc stays real."""
    import ctune.cli.search as search_cli

    search_cli.make_measurer = lambda cfg: _standin_measurer(  # type: ignore[assignment]
        project, measure_s=measure_s, remeasure_s=remeasure_s
    )


def _patch_fakegpu(project: Project) -> None:
    """``ctune bench`` on the numpy stand-in for CuPy (tests/unit/measure/fakegpu)."""
    for name in [m for m in sys.modules if m.split(".")[0] in ("cupy", "pynvml")]:
        del sys.modules[name]
    sys.path.insert(0, str(FAKEGPU))
    os.environ["PYTHONPATH"] = f"{FAKEGPU}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"


PATCHES: dict[str, Callable[[Project], None]] = {
    "standin-gpu": _patch_standin_gpu,
    "standin-gpu-slow-measure": lambda p: _patch_standin_gpu(p, measure_s=0.4),
    "standin-gpu-slow-confirm": lambda p: _patch_standin_gpu(p, remeasure_s=3.0),
    "fakegpu": _patch_fakegpu,
}


# --- running -----------------------------------------------------------------------------


@dataclass
class Outcome:
    code: int | None  # None: killed after the timeout
    stdout: str
    stderr: str
    wall_s: float
    leftover: bool = False  # processes of its group still alive after it exited
    signalled: bool | None = None  # None: the case sends no signal


def _child(
    case: Case, project: Project, env: Mapping[str, str], out_path: Path, err_path: Path
) -> None:
    """The forked child: real descriptors, its own cwd, environment and process group."""
    code = EXIT_INTERNAL
    try:
        os.setpgid(0, 0)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for sig in (signal.SIGTERM, signal.SIGALRM, signal.SIGHUP, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL)
        import resource

        if case.rlimit_fsize is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes fail with EFBIG instead
            resource.setrlimit(resource.RLIMIT_FSIZE, (case.rlimit_fsize, case.rlimit_fsize))
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        resource.setrlimit(resource.RLIMIT_AS, (case.memory_mb << 20, hard))
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        target = project.fill(case.stdout) if case.stdout else str(out_path)
        os.dup2(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 1)
        os.dup2(os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 2)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=True)
        sys.stderr = io.TextIOWrapper(
            io.FileIO(2, "w", closefd=False), errors="backslashreplace", line_buffering=True
        )
        sys.__stdout__, sys.__stderr__ = sys.stdout, sys.stderr
        os.chdir(project.root)
        os.environ.clear()
        os.environ.update(env)
        import tempfile

        tempfile.tempdir = None  # TMPDIR is read again
        for name in case.patches:
            PATCHES[name](project)
        from ctune.cli import main

        try:
            main([project.fill(a) for a in case.argv])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # what an uncaught exception does to a real process
            traceback.print_exc()
            code = 1
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        with contextlib.suppress(Exception):
            sys.stderr.flush()
    except BaseException:
        with contextlib.suppress(Exception):
            traceback.print_exc()
            sys.stderr.flush()
    finally:
        os._exit(code & 0xFF)


def _start(case: Case, project: Project, env: Mapping[str, str], out: Path, err: Path) -> int:
    if case.python:
        argv = [sys.executable, "-m", "ctune", *(project.fill(a) for a in case.argv)]
        stdout_target = project.fill(case.stdout) if case.stdout else str(out)
        with open(stdout_target, "wb") as fo, open(err, "wb") as fe:
            proc = subprocess.Popen(
                argv,
                cwd=project.root,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=fo,
                stderr=fe,
                start_new_session=True,
            )
        return proc.pid
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child never returns
        _child(case, project, env, out, err)
    with contextlib.suppress(OSError):
        os.setpgid(pid, pid)  # the child does it too; whichever runs first
    return pid


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _reap(pid: int) -> int | None:
    """The exit status if ``pid`` has exited (None while it runs)."""
    done, status = os.waitpid(pid, os.WNOHANG)
    if done == 0:
        return None
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def run(case: Case, project: Project) -> Outcome:
    """Run ``case`` in ``project`` to its end, its timeout, or its signal."""
    env = base_env(project)
    env.update({k: project.fill(v) for k, v in case.env.items()})
    logs = project.base / ".logs"
    logs.mkdir(exist_ok=True)
    out, err = logs / "stdout", logs / "stderr"
    start = time.monotonic()
    pid = _start(case, project, env, out, err)
    code: int | None = None
    sent, last_sent = 0, 0.0
    while True:
        code = _reap(pid)
        if code is not None:
            break
        now = time.monotonic() - start
        sig = case.signal
        if sig is not None and sent < sig.count and now >= sig.after_s:
            due = sent == 0 and (sig.marker is None or any(project.base.glob(sig.marker)))
            if due or (sent and now - last_sent >= sig.interval_s):
                with contextlib.suppress(ProcessLookupError):
                    if sig.group:
                        os.killpg(pid, sig.sig)
                    else:
                        os.kill(pid, sig.sig)
                sent, last_sent = sent + 1, now
        if now > case.timeout_s:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            code = None
            break
        time.sleep(0.005)
    wall = time.monotonic() - start
    leftover = False
    if code is not None:
        deadline = time.monotonic() + 2.0  # a child just signalled may take a moment
        while _group_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        leftover = _group_alive(pid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    text = {
        p: p.read_bytes().decode("utf-8", "backslashreplace") if p.exists() else ""
        for p in (out, err)
    }
    shutil.rmtree(logs, ignore_errors=True)
    signalled = None if case.signal is None else sent > 0
    return Outcome(code, text[out], text[err], wall, leftover, signalled)


# --- the tree: what changed --------------------------------------------------------------


def snapshot(base: Path) -> dict[str, tuple[Any, ...]]:
    """Every path under ``base`` (symlinks not followed) with its kind and content."""
    found: dict[str, tuple[Any, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        rel_dir = os.path.relpath(dirpath, base)
        if rel_dir == ".":
            dirnames[:] = [d for d in dirnames if d not in HARNESS_DIRS]
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            rel = os.path.normpath(os.path.join(rel_dir, name))
            try:
                st = os.lstat(full)
            except FileNotFoundError:
                continue
            if stat.S_ISLNK(st.st_mode):
                found[rel] = ("link", os.readlink(full))
            elif stat.S_ISDIR(st.st_mode):
                found[rel] = ("dir",)
            elif stat.S_ISREG(st.st_mode):
                if st.st_size <= HASHED_BYTES:
                    with open(full, "rb") as fh:
                        found[rel] = ("file", hashlib.sha256(fh.read()).hexdigest())
                else:
                    found[rel] = ("file", st.st_size, st.st_mtime_ns)
            else:
                found[rel] = ("special", stat.S_IFMT(st.st_mode))
    return found


#: the harness's own folders in the scratch folder: the captured output, the markers
HARNESS_DIRS = (".logs", "markers")

#: below project/.git, what commands may change without moving anything (index stat data,
#: objects, reflogs, refs when the case commits); MERGE_HEAD, hooks, config may not
GIT_MAY_CHANGE = ("index", "objects", "logs", "FETCH_HEAD", "ORIG_HEAD", "packed-refs")


#: what libraries keep in HOME: caches (matplotlib's font list) are theirs to write
HOME_MAY_CHANGE = ("home/.cache", "home/.config/matplotlib")


def _allowed(rel: str, case: Case) -> bool:
    parts = Path(rel).parts
    if any(rel == h or rel.startswith(h + "/") for h in HOME_MAY_CHANGE):
        return True
    if parts[:1] != ("project",) or len(parts) < 2:
        return False
    inner = Path(*parts[1:]).as_posix()
    if any(inner == w or inner.startswith(w.rstrip("/") + "/") for w in case.writes):
        return True
    if inner == ".ctune" or inner.startswith(".ctune/") or "__pycache__" in parts:
        return True  # the cache; Python's bytecode of an imported reference module
    if parts[1] == ".git" and len(parts) > 2 and not parts[-1].endswith(".lock"):
        if parts[2] in GIT_MAY_CHANGE:
            return True
        return case.commits and (parts[2] in ("refs", "COMMIT_EDITMSG") or inner == ".git/HEAD")
    return False


def tree_changes(before: Mapping[str, Any], after: Mapping[str, Any], case: Case) -> list[str]:
    """Paths that changed where the case may not write (``+`` added, ``-`` removed, ``~``)."""
    changed = []
    for rel in sorted(set(before) | set(after)):
        if before.get(rel) == after.get(rel) or _allowed(rel, case):
            continue
        mark = "+" if rel not in before else "-" if rel not in after else "~"
        if mark == "~" and before[rel][0] == "dir" and after[rel][0] == "dir":
            continue
        changed.append(f"{mark}{rel}")
    return changed


# --- the invariants ----------------------------------------------------------------------


#: what a terminal would act on (escape sequences, bells, backspaces): output shows them escaped
RAW = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _stderr_problems(case: Case, o: Outcome) -> list[str]:
    """A failure ends with its one ``error:`` line (``interrupted:`` too, for exit 130);
    before it, only ``warning:`` lines (a report's quarantined files) or, for a command
    with a live display, its progress."""
    lines = [ln for ln in o.stderr.splitlines() if ln.strip()]
    # an interrupted search says so in its own words ("interrupted: ... resume with ...")
    heads = ("error: ", "interrupted: ") if o.code == EXIT_INTERRUPTED else ("error: ",)
    errors = [ln for ln in lines if ln.startswith(heads)]
    others = [ln for ln in lines if not ln.startswith((*heads, "warning: "))]
    found = []
    if o.code not in (0, None):
        if len(errors) != 1:
            found.append(f"stderr has {len(errors)} error lines, not one: {o.stderr[-400:]!r}")
        elif lines[-1] != errors[0]:
            found.append(f"the error is not the last line: {o.stderr[-400:]!r}")
        elif others and not case.progress:
            found.append(f"stderr is not one error line: {o.stderr[-400:]!r}")
        elif case.error and not re.search(case.error, errors[0]):
            found.append(f"the error line does not match {case.error!r}: {errors[0][:300]!r}")
    elif o.code == 0:
        if errors:
            found.append(f"exit 0 with an error line: {errors[0][:300]!r}")
        if others and not case.progress:
            found.append(f"stray stderr lines: {others[:3]!r}")
    if case.warnings is not None:
        count = sum(ln.startswith("warning: ") for ln in lines)
        if count != case.warnings:
            found.append(f"{count} warning lines, expected {case.warnings}: {o.stderr[-400:]!r}")
    return found


#: how much of a kept file is compared (a case may grow one to gigabytes, sparsely)
KEPT_BYTES = 1 << 20


def _file_head(path: Path) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(KEPT_BYTES)


def _journal_lines(data: bytes) -> list[bytes]:
    """The complete (newline-ended) lines of a journal's head."""
    return data.split(b"\n")[:-1]


def _kept(case: Case, project: Project, before: Mapping[str, bytes]) -> list[str]:
    found = []
    if "registry" in case.keeps:
        fsck = subprocess.run(
            ["git", "fsck", "--no-dangling", "--no-progress"],
            cwd=project.root,
            capture_output=True,
            text=True,
            env={**os.environ, **git_config_env(project)},
            check=False,
        )
        if fsck.returncode != 0:
            found.append(f"git fsck: {(fsck.stdout + fsck.stderr).strip()[:300]}")
        verify = run(case_verify, project)
        if verify.code != 0:
            found.append(f"registry verify exits {verify.code}: {verify.stderr.strip()[:300]}")
        path = project.path(ARTIFACT)
        if ARTIFACT in before:
            if not path.is_file():
                found.append(f"{ARTIFACT} went missing")
            elif _file_head(path) != before[ARTIFACT] and not _allowed(f"project/{ARTIFACT}", case):
                found.append(f"{ARTIFACT} changed")
    if "journal" in case.keeps:
        old = _journal_lines(before[JOURNAL])
        path = project.path(JOURNAL)
        new = _journal_lines(_file_head(path)) if path.is_file() else []
        if new[: len(old)] != old:
            found.append(f"{JOURNAL}: its {len(old)} complete lines are not all still there")
    return found


case_verify = case("verify", "internal", ["registry", "verify"], 0, timeout_s=60)


def problems(case: Case, project: Project) -> tuple[list[str], Outcome]:
    """Set the case up, run it, and list every invariant it broke."""
    if case.setup is not None:
        case.setup(project)
    kept = {
        rel: _file_head(project.path(rel))
        for rel in (ARTIFACT, JOURNAL)
        if project.path(rel).is_file() and not project.path(rel).is_symlink()
    }
    head_before = _head(project)
    before = snapshot(project.base)
    o = run(case, project)
    found: list[str] = []
    if o.code is None:
        found.append(f"hang: still running after {case.timeout_s:g} s (killed)")
    else:
        if o.code not in case.exits:
            want = "/".join(str(c) for c in sorted(case.exits))
            found.append(f"exit {o.code}, expected {want}")
        if o.leftover:
            found.append("processes of its group still running after it exited")
    if "Traceback (most recent call last)" in o.stdout + o.stderr:
        found.append("a traceback")
    raw = RAW.search(o.stdout + o.stderr)
    if raw:
        found.append(f"a raw control character in the output: {raw.group()!r}")
    if o.code is not None:
        found += _stderr_problems(case, o)
    if case.signal is not None and case.signal.required and not o.signalled:
        found.append("the signal was never sent (its marker never appeared)")
    ran = sorted(str(p.relative_to(project.base)) for p in project.base.rglob("CANARY*"))
    if ran:
        found.append(f"a command ran: {', '.join(ran)}")
    changes = [c for c in tree_changes(before, snapshot(project.base), case) if "CANARY" not in c]
    if o.code is None:  # killed here: what a SIGKILL leaves in TMPDIR is not the case's doing
        changes = [c for c in changes if not c[1:].startswith("tmp/")]
    if changes:
        shown = ", ".join(changes[:6]) + (f" (+{len(changes) - 6})" if len(changes) > 6 else "")
        found.append(f"wrote outside the intended place: {shown}")
    if not case.commits and head_before and _head(project) != head_before:
        found.append("HEAD moved")
    found += _devices_intact()
    if o.code is not None:
        found += _kept(case, project, kept)
    if case.check is not None:
        found += case.check(project, o)
    return found, o


#: device nodes a case's output may point at; as root, a rename over one replaces it
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/urandom")


def _devices_intact() -> list[str]:
    """A case must never replace a device node (it did: an atomic rename over /dev/full)."""
    broken = []
    for name in DEVICES:
        try:
            if not stat.S_ISCHR(os.stat(name).st_mode):
                broken.append(name)
        except FileNotFoundError:
            broken.append(name)
    return [f"replaced the device node {name}" for name in broken]


def _head(project: Project) -> str:
    """The commit HEAD names ("" where there is none)."""
    if not (project.root / ".git").is_dir():
        return ""
    return project.git("rev-parse", "-q", "--verify", "HEAD", check=False).strip()


# --- the template: built once, copied per case ---------------------------------------------


def _support() -> Any:
    import importlib.util

    if "registry_support" not in sys.modules:
        path = ROOT / "tests" / "unit" / "registry" / "registry_support.py"
        spec = importlib.util.spec_from_file_location("registry_support", path)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules["registry_support"] = module
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    return sys.modules["registry_support"]


def _real_artifact(project: Project) -> Any:
    """A saxpy artifact as a search records it: two members built by this nvcc, their SASS,
    launch geometry, the source closure and this machine's fingerprint (GPU fields from the
    registry tests' stand-in)."""
    from ctune.compile.nvcc import NvccCompiler
    from ctune.compile.toolchain import probe_toolchain
    from ctune.registry.schema import FrontMember
    from ctune.spec import load_spec

    support = _support()
    spec = load_spec(project.path("kernels/saxpy.yaml"))
    problem = spec.problem("n1m")
    template = support.make_artifact(kernel="saxpy", problem="n1m")
    members = []
    with NvccCompiler(spec, probe_toolchain(), project.base / "tuned") as compiler:
        for block, like in ((256, template.baseline), (128, template.front[0])):
            cand = spec.candidate({**spec.space.default_values(), "BLOCK": block})
            build = compiler.build(cand, problem)
            assert build.outcome.is_ok, build.log_tail
            members.append(
                FrontMember(
                    candidate=cand,
                    key=cand.key(),
                    values=like.values,
                    summary=like.summary,
                    samples_ms=like.samples_ms,
                    process_medians_ms=like.process_medians_ms,
                    sass_sha256=build.sass_sha256 or "",
                    launch=spec.launch_geometry(cand, problem),
                )
            )
    shutil.rmtree(project.base / "tuned")
    return support.built_here(template, spec, members)


def add_gene(line: str) -> Callable[[str], str]:
    """A YAML edit: one more gene line under ``genes:``."""
    anchor = "  UNROLL: {values: [1, 2, 4, 8], default: 1, family: template}\n"
    return lambda text: text.replace(anchor, anchor + f"  {line}\n")


#: a gene the template's saxpy gains: a -D the source ignores and no launch rule reads, so a
#: crafted value reaches nvcc's command line and nothing else (the issue's GROUP_M)
TEMPLATE_GENE = "GROUP: {values: [1, 2, 4], default: 1, family: define}"


def build_template(base: Path) -> Project:
    """The project every case starts from (built once per session, ~5 s)."""
    from ctune.registry.service import publish_artifact

    p = Project(base)
    for folder in (p.root, p.outside, p.home, p.tmp, p.bin):
        folder.mkdir(parents=True)
    (p.home / ".gitconfig").write_text(
        "[user]\n\tname = Test Author\n\temail = author@example.com\n"
        "[init]\n\tdefaultBranch = main\n"
    )
    p.git("init", "-q", "-b", "main")
    p.path("kernels").mkdir()
    for name in ("saxpy.cu", "saxpy_ref.py"):
        shutil.copy(DATA_KERNELS / name, p.path(f"kernels/{name}"))
    spec = (DATA_KERNELS / "saxpy.yaml").read_text()
    p.write("kernels/saxpy.yaml", add_gene(TEMPLATE_GENE)(spec))
    p.write("README.md", "project\n")
    p.git("add", ".")
    p.git("commit", "-q", "-m", "kernels")
    old = {
        k: os.environ.get(k) for k in (*GIT_IDENTITY, "GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM")
    }
    os.environ.update({**GIT_IDENTITY, **git_config_env(p)})
    try:
        publish_artifact(p.path("registry"), _real_artifact(p))
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    search = case(
        "template-search",
        "internal",
        [
            "search",
            "kernels/saxpy.cu",
            "-O",
            "p99",
            "--budget",
            "6",
            "--journal",
            JOURNAL,
            "--out",
            RESULT,
            "--no-commit",
            "--confirm-processes",
            "3",
        ],
        0,
        patches=("standin-gpu",),
        timeout_s=120,
    )
    o = run(search, p)
    assert o.code == 0, o.stdout + o.stderr
    shutil.rmtree(p.markers, ignore_errors=True)
    (p.outside / "victim.txt").write_text("outside the project\n")
    shutil.copy(p.path(ARTIFACT), p.outside / "artifact.json")
    return p


def copy_template(template: Project, base: Path) -> Project:
    """A fresh copy of the template in ``base`` (symlinks kept as links)."""
    for entry in template.base.iterdir():
        target = base / entry.name
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, target, symlinks=True)
        else:
            shutil.copy2(entry, target, follow_symlinks=False)
    return Project(base)


def warm_up() -> None:
    """Imports, and the probe of nvcc on PATH, paid once in the test process before any
    fork (a case that changes the compiler names another one: ``CTUNE_NVCC``)."""
    import ctune.cli
    import ctune.cli.commands
    import ctune.cli.search
    import ctune.compile.nvcc
    import ctune.registry.service
    import ctune.testing.standins

    ctune.cli._command()
    with contextlib.suppress(Exception):  # the children skip the probe of the same nvcc
        from ctune.compile.toolchain import probe_toolchain

        probe_toolchain("nvcc")
    with contextlib.suppress(Exception):
        import git  # noqa: F401
        import numpy  # noqa: F401
        import scipy.stats  # noqa: F401


# --- the test ------------------------------------------------------------------------------


def report(case: Case, found: Sequence[str], o: Outcome) -> str:
    """What a failing case prints: its class, the broken invariants, the command's output."""
    code = "killed" if o.code is None else o.code
    lines = [f"[{case.cls}] {case.id}: {len(found)} invariant(s) broken", *found]
    lines.append(f"exit {code} after {o.wall_s:.2f} s; argv {list(case.argv)!r}")
    lines.append(f"stderr: {o.stderr[-800:]!r}")
    lines.append(f"stdout: {o.stdout[-400:]!r}")
    return "\n".join(lines)


def tier(cases: Sequence[Case]) -> Callable[..., None]:
    """The one parametrized test of a module's cases."""
    import pytest

    ids = [c.id for c in cases]
    assert len(set(ids)) == len(ids), [i for i in ids if ids.count(i) > 1]

    @pytest.mark.nvcc
    @pytest.mark.parametrize("hostile", cases, ids=ids)
    def test_case(hostile: Case, project: Project) -> None:
        found, o = problems(hostile, project)
        assert not found, report(hostile, found, o)

    return test_case

"""NvccCompiler: run nvcc for candidates, in parallel, into a content-addressed cache.

A build is keyed by everything that decides its bytes: the argv (without
paths ctune owns), the digest of the source and its include closure, and the
toolchain version. A second request for the same key is a cache hit, also
across runs; failed builds are cached too so a bad candidate is never
compiled twice (Kernel Tuner records failures the same way). Candidates that
differ only in runtime genes have the same argv, so they share one build: a
request for a key that another thread is compiling waits for it rather than
running nvcc again, and every candidate gets the shared build under its own
``candidate_key``.

Each compile runs in its own process group with a wall-clock timeout (the
whole group is killed: nvcc spawns cicc and ptxas) and an address-space limit.
Failures become Outcomes with the stderr tail, never exceptions.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import re
import resource
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from ctune.compile.command import build_argv, key_argv, split_genes
from ctune.compile.deps import source_closure_sha256
from ctune.compile.resources import entry_resources
from ctune.compile.sass import NotAnElf, defined_symbols, sass_digest
from ctune.compile.toolchain import Toolchain
from ctune.config import Settings
from ctune.kernelspec import KernelSpec, Problem
from ctune.records import (
    Build,
    Candidate,
    GeneValue,
    Outcome,
    build_from_json,
    canonical_json,
    sha256_hex,
    to_json,
)

log = logging.getLogger(__name__)

#: bump when the build layout or argv rules change, so old cache entries miss
BUILD_FORMAT = 1
LOG_TAIL_CHARS = 2000

_RESOURCE_PATTERNS = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"uses too much (shared|local) data",
        r"too much shared data",
        r"too many resources",
        r"registers? .*exceed",
        r"exceeds? (the )?(maximum|limit)",
        r"Insufficient registers",
        r"Entry function .* uses too much",
    )
]
_CRASH_PATTERNS = [
    re.compile(p, re.IGNORECASE)
    for p in (r"internal compiler error", r"internal error", r"segmentation fault", r"core dumped")
]
_OOM_PATTERNS = [
    re.compile(p, re.IGNORECASE)
    for p in (r"out of memory", r"std::bad_alloc", r"cannot allocate memory", r"memory exhausted")
]
_CACHEABLE = frozenset({Outcome.OK, Outcome.COMPILE_ERROR, Outcome.RESOURCE_LIMIT})
# environment variables that would inject flags behind ctune's back (RELIABILITY I5)
_SCRUBBED_ENV = ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "NVCC_CCBIN")


def classify_failure(returncode: int, stderr: str) -> Outcome:
    """Map a failed nvcc run to an Outcome from its exit status and messages."""
    if any(p.search(stderr) for p in _OOM_PATTERNS):
        return Outcome.BUILD_OOM
    if returncode < 0 or any(p.search(stderr) for p in _CRASH_PATTERNS):
        return Outcome.COMPILER_CRASH
    if any(p.search(stderr) for p in _RESOURCE_PATTERNS):
        return Outcome.RESOURCE_LIMIT
    return Outcome.COMPILE_ERROR


def _limit_memory(pid: int, limit_bytes: int) -> None:
    """Cap the address space of a started nvcc; cicc and ptxas inherit it when spawned.

    Set from the parent (prlimit) rather than in a preexec_fn, which is unsafe in
    a process with threads: compiles are started from a thread pool.
    """
    if limit_bytes > 0:
        with contextlib.suppress(ProcessLookupError, OSError):
            resource.prlimit(pid, resource.RLIMIT_AS, (limit_bytes, limit_bytes))


def _kill_group(proc: subprocess.Popen[str]) -> None:
    """SIGKILL nvcc's whole process group (it spawns cicc and ptxas); gone already is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


class NvccCompiler:
    """Compiles candidates of one kernel spec; thread-safe; ``jobs`` compiles at once."""

    def __init__(
        self,
        spec: KernelSpec,
        toolchain: Toolchain,
        cache_dir: Path,
        *,
        arch: str = "",
        timeout_s: float = 120.0,
        memory_bytes: int = 12 * 1024**3,
        jobs: int = 0,
    ) -> None:
        self.spec = spec
        self.toolchain = toolchain
        self.arch = arch or spec.arch
        self.timeout_s = timeout_s
        self.memory_bytes = memory_bytes
        self.builds_dir = Path(cache_dir).resolve() / "builds"
        self.quarantine_dir = Path(cache_dir).resolve() / "quarantine"
        self.jobs = jobs or os.cpu_count() or 1
        self._pool: ThreadPoolExecutor | None = None
        self._live: set[subprocess.Popen[str]] = set()  # running nvcc processes, for close()
        self._live_lock = threading.Lock()
        self._closures: dict[tuple[tuple[str, GeneValue], ...], str] = {}
        self._inflight: dict[str, Future[Build]] = {}  # build key -> the compile running it
        self._inflight_lock = threading.Lock()

    @classmethod
    def from_settings(cls, spec: KernelSpec, toolchain: Toolchain, cfg: Settings) -> NvccCompiler:
        """The compiler every command builds: cache, arch, limits and jobs from settings."""
        return cls(
            spec,
            toolchain,
            cfg.cache_dir,
            arch=cfg.arch,
            timeout_s=cfg.compile_timeout_s,
            memory_bytes=cfg.compile_memory_bytes,
            jobs=cfg.jobs,
        )

    # --- argv and keys ------------------------------------------------------
    def _control_file(self, value: GeneValue | None) -> Path | None:
        """An advanced-controls file named by the apply_controls gene, resolved."""
        if value in ("none", None):
            return None
        return (self.spec.yaml_path.parent / str(value)).resolve()

    def argv(self, candidate: Candidate, problem: Problem, output: Path) -> list[str]:
        defines, flags = split_genes(self.spec.space.genes, candidate.as_dict())
        acf = self._control_file(flags.get("apply_controls"))
        if acf is not None:
            flags["apply_controls"] = str(acf)
        suffix_ok = output.suffix in (".cubin", ".so")
        assert suffix_ok, output
        return build_argv(
            nvcc=self.toolchain.nvcc,
            source=self.spec.source_path,
            output=output,
            arch=self.arch,
            entry_kind=self.spec.entry_kind,
            std=self.spec.std,
            include_dirs=self.spec.include_dirs,
            define_genes=defines,
            flag_genes=flags,
            problem_defines=problem.defines,
            extra_flags=self.spec.extra_flags,
        )

    def closure_digest(self, problem: Problem) -> str:
        """Source + include-closure digest for a problem's defines (computed once each)."""
        key = tuple(sorted(problem.defines.items()))
        if key not in self._closures:
            compiled = {g.name: g.default for g in self.spec.genes if g.compiled}
            defines = {**compiled, **problem.defines}
            self._closures[key] = source_closure_sha256(self.spec, self.toolchain.nvcc, defines)
        return self._closures[key]

    def build_key(self, argv: list[str], problem: Problem) -> str:
        # a controls file changes the code without changing argv: key its content too
        controls = [
            sha256_hex(Path(a.split("=", 1)[1]).read_bytes())
            for a in argv
            if a.startswith("--apply-controls=")
        ]
        return sha256_hex(
            canonical_json(
                {
                    "format": BUILD_FORMAT,
                    "argv": [
                        a.replace(str(self.spec.source_path.parent), "<src>")
                        for a in key_argv(argv)
                    ],
                    "closure": self.closure_digest(problem),
                    "toolchain": self.toolchain.describe(),
                    "entry": [self.spec.entry_symbol, self.spec.entry_kind],
                    "controls": controls,
                }
            )
        )[:32]

    @property
    def _binary_name(self) -> str:
        return "kernel.so" if self.spec.entry_kind == "launcher" else "kernel.cubin"

    # --- building -------------------------------------------------------------
    def build(self, candidate: Candidate, problem: Problem) -> Build:
        """Compile (or fetch from cache) one candidate for one problem's defines."""
        values = candidate.as_dict()
        if set(values) != set(self.spec.space.names):
            raise ValueError(
                f"candidate genes {sorted(values)} do not match the space {self.spec.space.names}"
            )
        broken = self.spec.space.violations(values, problem.dims)
        placeholder = self.builds_dir / "_" / self._binary_name
        argv = self.argv(candidate, problem, placeholder)
        if broken:
            return Build(
                candidate.key(),
                tuple(argv),
                self.toolchain.describe(),
                Outcome.INVALID,
                log_tail=f"breaks restriction: {broken[0]}",
            )
        key = self.build_key(argv, problem)
        final = self.builds_dir / key
        with self._inflight_lock:
            pending = self._inflight.get(key)
            if pending is None:
                mine: Future[Build] = Future()
                self._inflight[key] = mine
        if pending is not None:
            # same argv, other runtime genes: the build is already under way (the driver
            # compiles ahead, so such candidates often arrive together); do not run nvcc twice
            return self._for_candidate(pending.result(), candidate)
        try:
            # looked up only once this thread owns the key, so a compile finishing in between
            # is found here rather than repeated
            build = self._load(final, candidate) or self._compile(candidate, problem, key, final)
        except BaseException as exc:
            mine.set_exception(exc)
            raise
        finally:
            with self._inflight_lock:
                del self._inflight[key]
        mine.set_result(build)
        return build

    @staticmethod
    def _for_candidate(shared: Build, candidate: Candidate) -> Build:
        """Another candidate's build as this one's: a cache hit, as from the disk cache."""
        return dataclasses.replace(shared, candidate_key=candidate.key(), cache_hit=True)

    def _load(self, folder: Path, candidate: Candidate) -> Build | None:
        record = folder / "build.json"
        if not record.is_file():
            return None
        try:
            build = build_from_json(json.loads(record.read_text()))
        except (ValueError, KeyError, TypeError):
            log.warning("ignoring unreadable cache entry %s", folder)
            return None
        if build.outcome.is_ok and not (build.binary_path and Path(build.binary_path).is_file()):
            return None
        return Build(
            candidate.key(),
            build.argv,
            build.toolchain,
            build.outcome,
            build.binary_path,
            build.sass_sha256,
            build.compile_s,
            build.resources,
            build.log_tail,
            cache_hit=True,
            build_key=build.build_key,
        )

    def _compile(self, candidate: Candidate, problem: Problem, key: str, final: Path) -> Build:
        self.builds_dir.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{key[:8]}-", dir=self.builds_dir))
        output = work / self._binary_name
        argv = self.argv(candidate, problem, output)
        env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV}
        start = time.perf_counter()
        try:
            proc = subprocess.Popen(
                argv,
                cwd=work,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,  # its own process group, killed as a whole
            )
        except OSError as exc:
            shutil.rmtree(work, ignore_errors=True)
            return Build(
                candidate.key(),
                tuple(argv),
                self.toolchain.describe(),
                Outcome.COMPILER_CRASH,
                log_tail=f"cannot start nvcc: {exc}",
            )
        _limit_memory(proc.pid, self.memory_bytes)
        with self._live_lock:
            self._live.add(proc)
        try:
            text, _ = proc.communicate(timeout=self.timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            text, _ = proc.communicate()
            timed_out = True
        finally:
            with self._live_lock:
                self._live.discard(proc)
        compile_s = time.perf_counter() - start
        text = text or ""
        outcome = Outcome.OK
        if timed_out:
            outcome = Outcome.BUILD_TIMEOUT
            text += f"\n[ctune] killed after {self.timeout_s:.0f} s"
        elif proc.returncode != 0 or not output.is_file():
            outcome = classify_failure(proc.returncode, text)
        resources = entry_resources(text, self.spec.entry_symbol)
        sass = None
        if outcome.is_ok:
            outcome, sass, note = self._inspect(output)
            text += note
        stable_argv = self.argv(candidate, problem, final / self._binary_name)
        build = Build(
            candidate.key(),
            tuple(stable_argv),
            self.toolchain.describe(),
            outcome,
            str(final / self._binary_name) if outcome.is_ok else None,
            sass,
            round(compile_s, 4),
            resources,
            text[-LOG_TAIL_CHARS:],
            cache_hit=False,
            build_key=key,
        )
        if outcome in (Outcome.COMPILER_CRASH, Outcome.BUILD_OOM):
            self._quarantine(key, argv, text)
        if outcome not in _CACHEABLE:
            # timeouts, OOM and crashes depend on load and limits: try again next time
            shutil.rmtree(work, ignore_errors=True)
            return build
        (work / "build.json").write_text(json.dumps(to_json(build), indent=2))
        (work / "nvcc.log").write_text(text)
        try:
            os.replace(work, final)
        except OSError:
            # another thread or process finished the same key first, or `final` is a
            # broken entry (unreadable record, lost binary): replace that one
            if self._load(final, candidate) is not None:
                shutil.rmtree(work, ignore_errors=True)
                return self._load(final, candidate) or build
            stale = final.with_name(f".stale-{key}-{os.getpid()}-{time.monotonic_ns()}")
            with contextlib.suppress(OSError):
                final.rename(stale)
                shutil.rmtree(stale, ignore_errors=True)
            try:
                os.replace(work, final)
            except OSError:
                shutil.rmtree(work, ignore_errors=True)
        return build

    def _inspect(self, output: Path) -> tuple[Outcome, str | None, str]:
        blob = output.read_bytes()
        try:
            sass = sass_digest(blob)
        except (NotAnElf, ValueError) as exc:
            return Outcome.COMPILE_ERROR, None, f"\n[ctune] no device code in output: {exc}"
        if self.spec.entry_kind == "kernel" and self.spec.entry_symbol not in defined_symbols(blob):
            return (
                Outcome.COMPILE_ERROR,
                sass,
                f"\n[ctune] entry symbol '{self.spec.entry_symbol}' is not in the cubin "
                '(is it declared extern "C" __global__?)',
            )
        return Outcome.OK, sass, ""

    def _quarantine(self, key: str, argv: list[str], text: str) -> None:
        """Keep a reproducer of a compiler crash (RELIABILITY I3)."""
        self.quarantine_dir.mkdir(parents=True, exist_ok=True)
        record = {
            "argv": argv,
            "source_sha256": self.spec.source_path.exists()
            and sha256_hex(self.spec.source_path.read_bytes()),
            "log_tail": text[-LOG_TAIL_CHARS:],
        }
        (self.quarantine_dir / f"{key}.json").write_text(json.dumps(record, indent=2))

    # --- parallel -----------------------------------------------------------------
    def submit(self, candidate: Candidate, problem: Problem) -> Future[Build]:
        """Compile in the background (``jobs`` at a time): the driver compiles ahead."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="nvcc")
        return self._pool.submit(self.build, candidate, problem)

    def close(self) -> None:
        """Stop: queued compiles are cancelled and running ones killed (Ctrl-C is prompt)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            with self._live_lock:
                live = list(self._live)
            for proc in live:
                _kill_group(proc)
            self._pool.shutdown(wait=True)
            self._pool = None

    def __enter__(self) -> NvccCompiler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

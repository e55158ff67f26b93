"""NvccCompiler: run nvcc for candidates, in parallel, into a content-addressed cache.

A build is keyed by everything that decides its bytes, so a key is compiled once, across
runs and failures included, and candidates that differ only in runtime genes share one
build (docs/design.md, "The build cache"). Each build resolves the spec's entry against its
cubin and the first good one checks ``args`` against the kernel's parameters
(docs/spec-format.md, "Naming the entry"). Failures become Outcomes with the stderr tail,
never exceptions; an argv nvcc's sub-shell would interpret is refused before it runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from functools import cached_property
from pathlib import Path

import ctune.compile.entry as entry_mod
import ctune.spec.entry as grammar
from ctune.compile.command import (
    build_argv,
    default_defines,
    key_argv,
    ptx_argv,
    split_genes,
)
from ctune.compile.contract import Compiler
from ctune.compile.deps import closure_roots, source_closure_sha256
from ctune.compile.logs import CTUNE_ERROR
from ctune.compile.process import LiveGroups, NvccRun, pool_thread_start, run_nvcc
from ctune.compile.relink import (
    RelinkError,
    Runner,
    build_variant,
    discard,
    frontend_argv,
    has_ptxas_variants,
    load_frontend,
    make_frontend,
    ptxas_only_items,
)
from ctune.compile.resources import entry_resources
from ctune.compile.sass import NotAnElf, entry_functions, kernel_param_sizes, sass_digest
from ctune.compile.signature import KernelParams, arg_mismatch, ptx_param_sizes
from ctune.compile.toolchain import Toolchain
from ctune.config import RelinkMode, Settings, parse_relink
from ctune.controls.store import APPLY_OPTION, FOLDER, StoreChain, applied_digest, file_name
from ctune.errors import SpecError
from ctune.files import MAX_SOURCE_BYTES, InputFileError, read_text_capped
from ctune.quoting import CommandLineError, check_argv
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
from ctune.spec import KernelSpec, Problem
from ctune.spec.declarations import defined_kernels, launched_kernels, struct_dtypes
from ctune.writes import naming, write_atomic

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


def classify_failure(returncode: int, stderr: str) -> Outcome:
    """Map a failed nvcc run to an Outcome from its exit status and messages."""
    if any(p.search(stderr) for p in _OOM_PATTERNS):
        return Outcome.BUILD_OOM
    if returncode < 0 or any(p.search(stderr) for p in _CRASH_PATTERNS):
        return Outcome.COMPILER_CRASH
    if any(p.search(stderr) for p in _RESOURCE_PATTERNS):
        return Outcome.RESOURCE_LIMIT
    return Outcome.COMPILE_ERROR


#: how much lower than ctune's own the CPU priority of every nvcc it starts is (nice):
#: compiles run beside the measuring processes, which start (imports, a CUDA context, the
#: problem's set-up) and then enqueue every timed launch from the host; a search's 16
#: parallel nvcc runs must not take the CPU from them. (cicc and ptxas inherit it.)
COMPILE_NICENESS = 10


#: the cache entry's record of its binary (size and sha256), written with it and checked on
#: every load: a binary damaged or replaced behind ctune's back is rebuilt, not used
BINARY_RECORD = "binary.json"


def binary_record(binary: Path) -> dict[str, int | str]:
    """What a cache entry records of its binary: the size and sha256 of its bytes."""
    with binary.open("rb") as f:
        digest = hashlib.file_digest(f, "sha256").hexdigest()
    return {"size": binary.stat().st_size, "sha256": digest}


def binary_problem(folder: Path, binary: Path) -> str | None:
    """Why ``binary`` is not the one the entry in ``folder`` was built with, or None. An
    entry without the record (written by a ctune before it) cannot be checked: it is
    rebuilt too (docs/design.md, "The build cache")."""
    try:
        recorded = json.loads((folder / BINARY_RECORD).read_text())
    except FileNotFoundError:
        return f"no {BINARY_RECORD} (written by an older ctune): its binary cannot be checked"
    except (OSError, ValueError) as exc:
        return f"unreadable {BINARY_RECORD}: {exc}"
    name = binary.name if binary.parent == folder else str(binary)
    try:
        found = binary_record(binary)
    except OSError as exc:
        return f"cannot read {name}: {exc.strerror or exc}"
    if recorded != found:
        return f"{name} is not the binary it was built as (its size or sha256 differ)"
    return None


def _binary_in(folder: Path, recorded: str | None) -> Path | None:
    """The binary of the cache entry in ``folder``: the folder's own file of the recorded
    name, else the recorded path. An entry is keyed by content, so a folder compiled under
    another cache directory (a CPU machine's, carried to the GPU machine) is the same build;
    a path into that directory would miss there."""
    if not recorded:
        return None
    own = folder / Path(recorded).name
    if own.is_file():
        return own
    return Path(recorded) if Path(recorded).is_file() else None


class NvccCompiler(Compiler):
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
        controls: StoreChain | None = None,
        relink: RelinkMode | bool = "auto",
    ) -> None:
        self.spec = spec
        self.toolchain = toolchain
        self.arch = arch or spec.arch
        self.timeout_s = timeout_s
        self.memory_bytes = memory_bytes
        self.builds_dir = Path(cache_dir).resolve() / "builds"
        self.quarantine_dir = Path(cache_dir).resolve() / "quarantine"
        self.frontends_dir = Path(cache_dir).resolve() / "frontends"
        #: builds that differ only in ptxas options share a front end (relink.py): only
        #: where the space has such options (Settings.relink: which builds)
        mode = parse_relink(relink)
        flags = [g for g in spec.space.genes if g.flag]
        self.relink: RelinkMode = mode if has_ptxas_variants(flags) else "off"
        self._frontend_locks: dict[str, threading.Lock] = {}  # front-end key -> its maker's
        self._frontends_failed: dict[str, str] = {}  # front-end key -> why it was not made
        #: where controls files are found (default: this cache's own store only)
        self.controls = controls or StoreChain.of(Path(cache_dir) / FOLDER)
        #: the spec's own controls files (acf_files), stored when first built with
        self._seeds = {d: path for seeds in spec.acf_seeds.values() for d, path in seeds}
        self.jobs = jobs or os.cpu_count() or 1
        self._pool: ThreadPoolExecutor | None = None
        self._live = LiveGroups()  # running nvcc processes, for close()
        self._closures: dict[tuple[tuple[str, GeneValue], ...], str] = {}
        self._inflight: dict[str, Future[Build]] = {}  # build key -> the compile running it
        self._inflight_lock = threading.Lock()
        self._args_checked = spec.entry_kind != "kernel"  # launchers take packed params
        self._args_lock = threading.Lock()
        self._args_wrong: str | None = None  # what the check found wrong, said on each build
        self.entry = grammar.parse_entry(spec.entry_symbol) if not self._args_checked else None
        self.demangler = entry_mod.find_demangler(
            [toolchain.bin_dir, Path(toolchain.nvcc).resolve().parent]
        )

    @classmethod
    def from_settings(
        cls, spec: KernelSpec, toolchain: Toolchain, cfg: Settings, *, search: bool = False
    ) -> NvccCompiler:
        """The compiler every command builds: cache, arch, limits and jobs from settings.
        ``relink`` auto keeps front ends only for a ``search``, whose flag rounds build
        variant after variant of one structure; a command that builds a candidate or an
        artifact's members once (compile, bench, check, gate) runs the whole nvcc."""
        relink = "off" if cfg.relink == "auto" and not search else cfg.relink
        return cls(
            spec,
            toolchain,
            cfg.cache_dir,
            arch=cfg.arch,
            timeout_s=cfg.compile_timeout_s,
            memory_bytes=cfg.compile_memory_bytes,
            jobs=cfg.jobs,
            controls=StoreChain.for_settings(cfg),
            relink=relink,
        )

    # --- argv and keys ------------------------------------------------------
    def _controls_path(self, gene: str, digest: str) -> Path:
        """The stored file of an ``acf`` gene's digest; a spec's own file is stored first
        (a ControlsError naming the digest and the stores when none holds it)."""
        where = f"{self.spec.name}: {gene}"
        if not self.controls.has(digest) and digest in self._seeds:
            self.controls.first.put_file(self._seeds[digest])
        return self.controls.path(digest, where)

    @cached_property
    def _template_parameters(self) -> frozenset[str]:
        try:
            text = self.spec.source_path.read_text(errors="replace")
        except OSError:
            return frozenset()
        return frozenset(grammar.template_parameters(text))

    @cached_property
    def _source_text(self) -> str:
        try:
            return read_text_capped(self.spec.source_path, MAX_SOURCE_BYTES, "kernel source")
        except InputFileError:
            return ""

    @cached_property
    def _launched_kernels(self) -> frozenset[str]:
        """The kernels a launcher's source launches (``k<<<...>>>``): its resources are
        theirs and its library's, not those of its own kernels it never launches."""
        if self.spec.entry_kind != "launcher":
            return frozenset()
        return frozenset(launched_kernels(self._source_text))

    @cached_property
    def _defined_kernels(self) -> frozenset[str]:
        """The ``__global__`` functions a launcher's source defines (the rest of the build's
        kernels are its library's)."""
        if self.spec.entry_kind != "launcher":
            return frozenset()
        return frozenset(defined_kernels(self._source_text))

    @cached_property
    def _source_structs(self) -> dict[str, str]:
        """The structs the kernel's file spells out, for the check of struct buffers."""
        return struct_dtypes(self._source_text)

    @property
    def entries_dir(self) -> Path:
        return self.builds_dir.parent / "entries"

    def instantiation(self, candidate: Candidate, problem: Problem) -> tuple[Path, str] | None:
        """(path, text) of the source that instantiates a template entry; None otherwise.

        The text names the template arguments' values (genes and problem defines), so
        its path is content-addressed: candidates that instantiate the same share it.
        """
        if self.entry is None or not self.entry.is_template:
            return None
        defines, _ = split_genes(self.spec.space.genes, candidate.as_dict())
        values = {**problem.defines, **defines}
        hidden = self.entry.genes_used() & set(values) & self._template_parameters
        text = entry_mod.instantiation_source(
            self.spec.source_path, grammar.substitute(self.entry, values), hidden
        )
        return self.entries_dir / f"{self.spec.name}-{sha256_hex(text)[:16]}.cu", text

    def _write_instantiation(self, candidate: Candidate, problem: Problem) -> None:
        made = self.instantiation(candidate, problem)
        if made is None:
            return
        path, text = made
        if path.is_file():
            return  # content-addressed: an existing file has this text
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text)

    def argv(self, candidate: Candidate, problem: Problem, output: Path) -> list[str]:
        defines, flags = split_genes(self.spec.space.genes, candidate.as_dict())
        for gene in self.spec.flag_genes:
            if gene.open and flags.get(gene.name, gene.default) != gene.default:
                flags[gene.name] = str(self._controls_path(gene.name, str(flags[gene.name])))
        suffix_ok = output.suffix in (".cubin", ".so")
        assert suffix_ok, output
        made = self.instantiation(candidate, problem)
        return build_argv(
            nvcc=self.toolchain.nvcc,
            source=made[0] if made is not None else self.spec.source_path,
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
            defines = {**default_defines(self.spec.genes), **problem.defines}
            self._closures[key] = source_closure_sha256(
                self.spec, self.toolchain.nvcc, defines, arch=self.arch, scratch=self.builds_dir
            )
        return self._closures[key]

    @cached_property
    def _include_labels(self) -> list[tuple[str, str]]:
        """(an -I folder as argv spells it, its closure label): the CUTLASS wheel lives under
        each machine's own site-packages, and a key that held that path would never match a
        build compiled on another machine (a CPU farm, a carried cache)."""
        labels = {path: label for label, path in closure_roots(self.spec) if label}
        out = [
            (str(d), f"<{labels[d.resolve()]}>")
            for d in self.spec.include_dirs
            if d.resolve() in labels
        ]
        return sorted(out, key=lambda pair: -len(pair[0]))

    def _portable(self, item: str) -> str:
        """An argv item without the paths that depend on where the checkout, the cache and
        the include folders live (their contents are keyed by the closure digest)."""
        digest = applied_digest(item)
        if digest is not None:
            return f"{APPLY_OPTION}=<controls>/{file_name(digest)}"  # keyed by content below
        item = item.replace(str(self.entries_dir), "<entries>")
        for path, label in self._include_labels:
            item = item.replace(path, label)
        return item.replace(str(self.spec.source_path.parent), "<src>")

    def build_key(self, argv: list[str], problem: Problem) -> str:
        # a controls file changes the code without changing argv: key its content too
        controls = [
            sha256_hex(Path(a.split("=", 1)[1]).read_bytes())
            for a in argv
            if a.startswith(f"{APPLY_OPTION}=")
        ]
        return sha256_hex(
            canonical_json(
                {
                    "format": BUILD_FORMAT,
                    "argv": [self._portable(a) for a in key_argv(argv)],
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
            shared = self._for_candidate(pending.result(), candidate)
            self._check_args_once(shared, candidate, problem)
            return shared
        try:
            # looked up only once this thread owns the key, so a compile finishing in between
            # is found here rather than repeated
            cached, unusable = self._cached(final, candidate, problem)
            build = cached or self._compile(candidate, problem, key, final, rebuilt=unusable)
        except BaseException as exc:
            mine.set_exception(exc)
            raise
        finally:
            with self._inflight_lock:
                del self._inflight[key]
        mine.set_result(build)
        self._check_args_once(build, candidate, problem)
        return build

    def lookup(self, candidate: Candidate, problem: Problem) -> Build | None:
        """The cached build of a candidate, without running nvcc (None: not cached)."""
        values = candidate.as_dict()
        if set(values) != set(self.spec.space.names):
            return None
        if self.spec.space.violations(values, problem.dims):
            return None
        argv = self.argv(candidate, problem, self.builds_dir / "_" / self._binary_name)
        return self._load(self.builds_dir / self.build_key(argv, problem), candidate, problem)

    @staticmethod
    def _for_candidate(shared: Build, candidate: Candidate) -> Build:
        """Another candidate's build as this one's: a cache hit, as from the disk cache."""
        return dataclasses.replace(shared, candidate_key=candidate.key(), cache_hit=True)

    def _load(self, folder: Path, candidate: Candidate, problem: Problem) -> Build | None:
        """The cache entry in ``folder`` as this candidate's build; None if none is usable."""
        return self._cached(folder, candidate, problem)[0]

    def _cached(
        self, folder: Path, candidate: Candidate, problem: Problem
    ) -> tuple[Build | None, str]:
        """(the cache entry in ``folder`` as this candidate's build, or None and why it
        cannot be used: empty when there is no entry). Used only as far as it can be
        checked: a readable record and, for a good build, the binary it recorded."""
        record = folder / "build.json"
        if not record.is_file():
            return None, ""
        try:
            build = build_from_json(json.loads(record.read_text()))
        except (ValueError, KeyError, TypeError):
            return None, "unreadable build.json"
        binary = _binary_in(folder, build.binary_path)
        if build.outcome.is_ok:
            if binary is None:
                lost = build.binary_path or "(none recorded)"
                return None, f"its binary {lost} is missing"
            damaged = binary_problem(folder, binary)
            if damaged is not None:
                return None, damaged
        symbol = build.entry_symbol
        if build.outcome.is_ok and self.entry is not None and not symbol:
            # recorded before builds named their entry symbol: resolve it from the cubin
            assert binary is not None
            outcome, _, _, symbol = self._inspect(binary, candidate, problem)
            if not outcome.is_ok:
                return None, "no entry symbol recorded nor found"
        cached = Build(
            candidate.key(),
            build.argv,
            build.toolchain,
            build.outcome,
            str(binary) if binary is not None else build.binary_path,
            build.sass_sha256,
            build.compile_s,
            build.resources,
            build.log_tail,
            cache_hit=True,
            build_key=build.build_key,
            entry_symbol=symbol,
        )
        return cached, ""

    def _compile(
        self, candidate: Candidate, problem: Problem, key: str, final: Path, rebuilt: str = ""
    ) -> Build:
        """One build end to end (argv, process group with limits, timeout, crash reproducer,
        SASS digest, resources); one function so every exit path records an outcome.
        ``rebuilt``: why the cache entry of this key could not be used (said in the log)."""
        self.builds_dir.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{key[:8]}-", dir=self.builds_dir))
        output = work / self._binary_name
        argv = self.argv(candidate, problem, output)
        try:
            check_argv(argv, f"nvcc for {self.spec.name}")  # before the instantiation is written
        except CommandLineError:
            shutil.rmtree(work, ignore_errors=True)
            raise
        self._write_instantiation(candidate, problem)
        start = time.perf_counter()
        try:
            # from its front end, or None (``note`` says why): the whole nvcc run makes it
            relinked, note = (
                self._relinked(argv, problem, work) if self._relinks(argv) else (None, "")
            )
            done = relinked or run_nvcc(
                argv,
                what=f"nvcc for {self.spec.name}",
                timeout_s=self.timeout_s,
                scratch=self.builds_dir,
                cwd=work,
                merge_output=True,
                memory_bytes=self.memory_bytes,
                niceness=COMPILE_NICENESS,
                live=self._live,
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
        except BaseException:  # Ctrl-C (or SIGTERM) while waiting: no nvcc, no folder left
            shutil.rmtree(work, ignore_errors=True)
            raise
        compile_s = time.perf_counter() - start
        # the log quotes paths, which need not be UTF-8
        text = done.stdout.decode(errors="replace") + note
        if rebuilt:
            log.warning("rebuilt cache entry %s: %s", final, rebuilt)
            text += f"\n[ctune] rebuilt: the cached build of this key was not usable: {rebuilt}"
        outcome = Outcome.OK
        if done.returncode is None:
            outcome = Outcome.BUILD_TIMEOUT
            text += f"\n[ctune] killed after {self.timeout_s:.0f} s"
        elif done.returncode != 0 or not output.is_file():
            outcome = classify_failure(done.returncode, text)
        sass, symbol = None, ""
        if outcome.is_ok:
            outcome, sass, note, symbol = self._inspect(output, candidate, problem)
            text += note
        resources = entry_resources(
            text, symbol or self.spec.entry_symbol, self._launched_kernels, self._defined_kernels
        )
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
            entry_symbol=symbol,
        )
        if outcome in (Outcome.COMPILER_CRASH, Outcome.BUILD_OOM):
            self._quarantine(key, argv, text)
        if outcome not in _CACHEABLE:
            # timeouts, OOM and crashes depend on load and limits: try again next time
            shutil.rmtree(work, ignore_errors=True)
            return build
        try:  # a full disk names the cache and leaves no half-made entry behind
            with naming(self.builds_dir, always=True):
                (work / "build.json").write_text(json.dumps(to_json(build), indent=2))
                (work / "nvcc.log").write_text(text)
                if outcome.is_ok:
                    record = binary_record(output)
                    (work / BINARY_RECORD).write_text(json.dumps(record, indent=2))
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
        try:
            os.replace(work, final)
        except OSError:
            # another thread or process finished the same key first, or `final` is a
            # broken entry (unreadable record, lost binary): replace that one
            if self._load(final, candidate, problem) is not None:
                shutil.rmtree(work, ignore_errors=True)
                return self._load(final, candidate, problem) or build
            stale = final.with_name(f".stale-{key}-{os.getpid()}-{time.monotonic_ns()}")
            with contextlib.suppress(OSError):
                final.rename(stale)
                shutil.rmtree(stale, ignore_errors=True)
            try:
                os.replace(work, final)
            except OSError:
                shutil.rmtree(work, ignore_errors=True)
        return build

    def _relinks(self, argv: list[str]) -> bool:
        """Whether this build is made from a kept front end: with ``relink`` on, every one;
        with ``auto``, one with ptxas options of its own (a flag variant, a controls file),
        the builds that share a front end with the build of their structure; a build
        without them is the whole nvcc run, so a search whose candidates differ in
        structure keeps no front end it would not use (docs/advanced-controls.md)."""
        if self.relink == "auto":
            return bool(ptxas_only_items(argv))
        return self.relink == "on"

    def _relinked(
        self, argv: list[str], problem: Problem, work: Path
    ) -> tuple[NvccRun | None, str]:
        """The build of ``argv`` from its front end, made first when there is none (one
        maker per front end; the others wait for it), and a line for its log; (None, why)
        when the whole nvcc run must make it instead."""
        front_argv = frontend_argv(argv)
        key = self.build_key(front_argv, problem)
        folder = self.frontends_dir / key
        runner = Runner(
            f"nvcc for {self.spec.name}",
            self.timeout_s,
            self.builds_dir,
            self.memory_bytes,
            COMPILE_NICENESS,
            self._live,
        )
        with self._inflight_lock:
            lock = self._frontend_locks.setdefault(key, threading.Lock())
        made_s: float | None = None
        try:
            with lock:
                if key in self._frontends_failed:
                    raise RelinkError(self._frontends_failed[key])
                try:
                    front = load_frontend(folder)
                except RelinkError:
                    discard(folder)  # the next build makes it again
                    raise
                if front is None:
                    start = time.perf_counter()
                    try:
                        front = make_frontend(front_argv, folder, runner)
                    except (RelinkError, OSError, CommandLineError) as exc:
                        self._frontends_failed[key] = str(exc)
                        raise
                    made_s = time.perf_counter() - start
            variant = build_variant(argv, front, work, runner)
        except (RelinkError, OSError, CommandLineError) as exc:
            return None, f"\n[ctune] built by the whole nvcc run, not from front end {key}: {exc}"
        how = "reused" if made_s is None else f"made in {made_s:.2f} s"
        note = f"\n[ctune] relinked from front end {key} ({how})"
        return NvccRun(variant.returncode, variant.text.encode(), b""), note

    def _inspect(
        self, output: Path, candidate: Candidate, problem: Problem
    ) -> tuple[Outcome, str | None, str, str]:
        """(outcome, SASS digest, note for the log, the entry's symbol in the cubin)."""
        blob = output.read_bytes()
        try:
            sass = sass_digest(blob)
        except (NotAnElf, ValueError) as exc:
            return Outcome.COMPILE_ERROR, None, f"\n[ctune] no device code in output: {exc}", ""
        if self.entry is None:
            return Outcome.OK, sass, "", ""
        kernels = entry_mod.demangle(entry_functions(blob), self.demangler)
        defines, _ = split_genes(self.spec.space.genes, candidate.as_dict())
        wanted = grammar.substitute(self.entry, {**problem.defines, **defines})
        try:
            symbol = entry_mod.resolve(
                wanted, kernels, entry_mod.no_demangler_note(kernels, self.demangler)
            )
        except entry_mod.EntryError as exc:
            return Outcome.COMPILE_ERROR, sass, f"\n{CTUNE_ERROR} {exc}", ""
        return Outcome.OK, sass, "", symbol

    # --- the kernel's parameters against the spec's args ----------------------------------
    def _check_args_once(self, build: Build, candidate: Candidate, problem: Problem) -> None:
        """On the first good build: do ``args`` fit the kernel's parameters? (SpecError, and
        again on every later build: the first may have been built ahead, in a thread whose
        error nobody reads)"""
        if not self._args_checked and build.outcome.is_ok and build.binary_path:
            with self._args_lock:
                if not self._args_checked:
                    params = self.kernel_params(build, candidate, problem)
                    dtypes = {a.name: a.dtype_for(problem) for a in self.spec.args}
                    wrong = (
                        None
                        if params is None
                        else arg_mismatch(self.spec.args, params, dtypes, self._source_structs)
                    )
                    if wrong is not None:
                        self._args_wrong = f"{self.spec.yaml_path}: {wrong}"
                    self._args_checked = True
        if self._args_wrong is not None:
            raise SpecError(self._args_wrong)

    def kernel_params(
        self, build: Build, candidate: Candidate, problem: Problem
    ) -> KernelParams | None:
        """The built entry's parameters, from the cubin's own parameter table, else from its
        PTX; what was read is kept next to the cubin (``params.json``).

        None when neither can be had (the check is then skipped, with a warning): the
        build itself is fine, and the GPU still rejects a launch that does not fit.
        """
        assert build.binary_path is not None
        symbol = build.entry_symbol or self.spec.entry_symbol
        record = Path(build.binary_path).parent / "params.json"
        sizes: tuple[int, ...] | None = None
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            data = json.loads(record.read_text())
            if data["symbol"] == symbol:
                sizes = tuple(int(n) for n in data["sizes"])
        if sizes is None:
            with contextlib.suppress(OSError):
                sizes = kernel_param_sizes(Path(build.binary_path).read_bytes(), symbol)
            if sizes is None:
                self._write_instantiation(candidate, problem)
                sizes = self._ptx_sizes(build, symbol)
            if sizes is None:
                return None
            with contextlib.suppress(OSError):
                record.write_text(json.dumps({"symbol": symbol, "sizes": list(sizes)}))
        demangled = entry_mod.demangle([symbol], self.demangler)[symbol]
        ctypes = None
        with contextlib.suppress(ValueError):
            ctypes = grammar.split_name(demangled).params
        display = demangled.removeprefix("void ")
        return KernelParams(display, sizes, ctypes)

    def _ptx_sizes(self, build: Build, symbol: str) -> tuple[int, ...] | None:
        self.builds_dir.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".ptx-", dir=self.builds_dir))
        try:
            output = work / "kernel.ptx"
            # the argv a cache entry records, run by this toolchain's nvcc (never the record's)
            argv = [self.toolchain.nvcc, *ptx_argv(build.argv, output)[1:]]
            try:
                done = run_nvcc(
                    argv,
                    what=f"nvcc -ptx for {self.spec.name}",
                    timeout_s=self.timeout_s,
                    scratch=self.builds_dir,
                    cwd=work,
                    memory_bytes=self.memory_bytes,
                    niceness=COMPILE_NICENESS,
                    live=self._live,
                )
            except OSError as exc:
                log.warning("cannot check args against the kernel (PTX): %s", exc)
                return None
            if done.returncode != 0 or not output.is_file():
                why = "timed out" if done.timed_out else done.stderr.decode(errors="replace")
                log.warning("cannot check args against the kernel (PTX): %s", why[-300:])
                return None
            return ptx_param_sizes(output.read_text(), symbol)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _quarantine(self, key: str, argv: list[str], text: str) -> None:
        """Keep a reproducer of a compiler crash (rule I3)."""
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
            self._pool = ThreadPoolExecutor(
                max_workers=self.jobs,
                thread_name_prefix="nvcc",
                initializer=pool_thread_start(self._live),
            )
        return self._pool.submit(self.build, candidate, problem)

    def close(self) -> None:
        """Stop: queued compiles are cancelled and running ones killed (Ctrl-C is prompt)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            with self._live.ending():  # a thread's next nvcc run ends at once too
                self._pool.shutdown(wait=True)
            self._pool = None

    def __enter__(self) -> NvccCompiler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

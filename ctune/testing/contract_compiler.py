"""CompilerContract: the tests every compiler passes (Optuna's pattern, as for strategies).

Subclass it in a test module and override the ``case`` fixture: a :class:`CompilerCase`
naming a way to make the compiler, a spec, a problem, candidates that build OK and,
where the compiler can be made to fail, one that does not::

    class TestStandIn(CompilerContract):
        @pytest.fixture
        def case(self, tmp_path):
            spec = standin_spec(tmp_path)
            return CompilerCase(lambda: StandInCompiler(spec, fail_every=None), spec, ...)

The suite checks what the search, problem sets and dispatch tables rely on
(:class:`ctune.compile.contract.Compiler` is the contract): ``build`` gives a Build keyed
by the candidate, the same one when asked again, and a failed build as an outcome, never
an exception; ``submit`` is ``build`` as a future; ``lookup`` answers only with a build
it has; ``argv``, ``fingerprint_fields`` and ``source_inputs`` have their documented
types; closing twice is harmless, and the compiler closes as a context.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from ctune.compile.contract import Compiler
from ctune.config import Settings
from ctune.records import Build, Candidate, Outcome
from ctune.spec import KernelSpec, Problem


@dataclass
class CompilerCase:
    """How to make the compiler under test, and what it can build."""

    make: Callable[[], Compiler]
    spec: KernelSpec
    problem: Problem
    candidates: Sequence[Candidate]  # at least two, each builds OK
    failing: Candidate | None = None  # one whose build fails, where the compiler can fail
    settings: Settings | None = None  # for source_inputs (default: Settings())


class CompilerContract:
    """Override ``case``."""

    @pytest.fixture
    def case(self) -> CompilerCase:
        raise NotImplementedError("override the case fixture")

    @pytest.fixture
    def compiler(self, case: CompilerCase) -> Iterator[Compiler]:
        made = case.make()
        yield made
        made.close()

    # --- the contract -----------------------------------------------------------------------
    def test_is_a_compiler(self, compiler: Compiler) -> None:
        assert isinstance(compiler, Compiler)
        assert isinstance(compiler.jobs, int) and compiler.jobs >= 0

    def test_build_keys_the_build(self, compiler: Compiler, case: CompilerCase) -> None:
        for cand in case.candidates[:2]:
            build = compiler.build(cand, case.problem)
            assert isinstance(build, Build)
            assert build.outcome is Outcome.OK, build.log_tail
            assert build.candidate_key == cand.key() and build.argv

    def test_the_same_candidate_gives_the_same_build(
        self, compiler: Compiler, case: CompilerCase
    ) -> None:
        cand = case.candidates[0]
        first = compiler.build(cand, case.problem)
        again = compiler.build(cand, case.problem)
        assert (again.outcome, again.build_key, again.binary_path, again.sass_sha256) == (
            first.outcome,
            first.build_key,
            first.binary_path,
            first.sass_sha256,
        )

    def test_submit_is_build_as_a_future(self, compiler: Compiler, case: CompilerCase) -> None:
        futures = [compiler.submit(c, case.problem) for c in case.candidates[:2]]
        for cand, future in zip(case.candidates[:2], futures, strict=True):
            build = future.result(timeout=300)
            assert build.candidate_key == cand.key() and build.outcome is Outcome.OK
            assert build.build_key == compiler.build(cand, case.problem).build_key

    def test_a_failed_build_is_an_outcome(self, compiler: Compiler, case: CompilerCase) -> None:
        if case.failing is None:
            pytest.skip("this compiler cannot be made to fail here")
        build = compiler.build(case.failing, case.problem)
        assert not build.outcome.is_ok and build.candidate_key == case.failing.key()

    def test_lookup_answers_only_with_a_build_it_has(
        self, compiler: Compiler, case: CompilerCase
    ) -> None:
        cand = case.candidates[1]
        built = compiler.build(cand, case.problem)
        found = compiler.lookup(cand, case.problem)
        assert found is None or (
            found.candidate_key == cand.key() and found.build_key == built.build_key
        )

    def test_the_optional_hooks_have_their_types(
        self, compiler: Compiler, case: CompilerCase, tmp_path: Path
    ) -> None:
        argv = compiler.argv(case.candidates[0], case.problem, tmp_path / "kernel.cubin")
        assert argv is None or (argv and all(isinstance(a, str) for a in argv))
        fields = compiler.fingerprint_fields()
        assert fields is None or all(
            isinstance(k, str) and isinstance(v, str) for k, v in fields.items()
        )
        inputs = compiler.source_inputs(case.spec, case.settings or Settings())
        assert isinstance(inputs, dict)

    def test_closing_twice_is_harmless(self, case: CompilerCase) -> None:
        with case.make() as compiler:
            compiler.build(case.candidates[0], case.problem)
        compiler.close()


__all__ = ["CompilerCase", "CompilerContract"]

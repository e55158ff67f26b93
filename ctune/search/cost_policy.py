"""``--cost-model on``: skip the builds the cost model says cannot beat the leader.

Before a generation's new candidates are compiled, the model (``ctune/model``) is fitted on
the trials of the generations finished so far, and on earlier journals of the same kernel
(other shapes, other GPUs), with the search's seed; a candidate whose predicted lower
bound (at ``alpha``) is worse than the leader's measured value is not built: it is
journaled as a ``skipped`` trial with the prediction and the leader beside it, and told
to the strategy like a failed one. It costs no ``--budget`` (that counts measurements) but
counts towards the compile cap, which ends a search whose model rules out everything.
The default build and confirmation never pass through here; warm-start configurations
neither. A skip frees a compile slot, not wall time, where the generation's builds compile
side by side: the generation then asks the strategy for more candidates until the compile
waves it runs anyway are full (:class:`Refill`). Only the finished generations train the
model, in journal order, so a resumed search decides exactly as the uninterrupted one did
(docs/cost-model.md).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctune.records import Candidate, Outcome, Trial
from ctune.search import journal_copy

if TYPE_CHECKING:
    from ctune.config import Settings
    from ctune.model import CostModel, Example, FeatureMap, Prediction
    from ctune.search.journal_writer import JournalWriter
    from ctune.search.run_state import SearchRun
    from ctune.spec import KernelSpec

#: measured trials (this search's and earlier journals') before anything may be skipped
MIN_TRAINED = 10
#: earlier journals of the kernel read for a warm start, the most recent ones
MAX_WARM_JOURNALS = 64
#: a journal header's ``created_utc`` (``journal.utc_stamp``)
STAMP = "%Y%m%dT%H%M%SZ"
#: times a generation asks the strategy again to fill the compile slots its skips freed
MAX_REFILLS = 8


@dataclass
class Screened:
    """A generation's new candidates split: those to build, and the trials of those
    skipped (already journaled and accounted)."""

    kept: list[Candidate]
    skipped: list[Trial] = field(default_factory=list)


@dataclass(frozen=True)
class Refill:
    """How a generation gets more candidates when the model skips some of its own.

    ``ask(n)``: up to ``n`` new candidates of the strategy (none cached, none already in
    this generation); ``slots``: builds compiled at once; ``build_of``: a candidate's build
    (candidates that differ in runtime genes share one); ``measure_room``: the most
    candidates the generation may build (the budget left); ``decide_room``: the most it
    may decide, built or skipped (the compile cap left).
    """

    ask: Callable[[int], list[Candidate]]
    slots: int
    build_of: Callable[[Candidate], Hashable]
    measure_room: int
    decide_room: int
    wave_builds: int = 0  # builds in the compile waves the generation runs (waves_of)

    def builds(self, cands: Sequence[Candidate]) -> int:
        """How many builds ``cands`` need."""
        return len({self.build_of(c) for c in cands})

    def full(self, asked: Sequence[Candidate], kept: Sequence[Candidate]) -> bool:
        """Is the generation's ``kept`` enough: as many candidates as the strategy first
        ``asked`` for, or builds filling the waves of ``slots`` its first kept builds
        started (nothing kept: no wave, nothing to fill)."""
        if len(kept) >= len(asked) or not kept:
            return True
        return self.builds(kept) >= self.wave_builds

    def waves_of(self, kept: Sequence[Candidate]) -> Refill:
        """This refill with the waves ``kept`` (the first screen's) needs."""
        waves = -(-self.builds(kept) // self.slots)
        return dataclasses.replace(self, wave_builds=waves * self.slots)


def refilled(
    new: Sequence[Candidate],
    screen_once: Callable[[Sequence[Candidate]], Screened],
    refill: Refill | None,
) -> tuple[Screened, int]:
    """``new`` screened, and where some were skipped, the candidates ``refill`` asks for in
    their place (each screened the same way) until the generation is full or out of room;
    with how many were asked for. One loop for the first screen and for its guess before
    the baseline (:meth:`ModelPolicy.ahead`), so the two ask for the same refills."""
    out = screen_once(new)
    if refill is None or not out.skipped:
        return out, 0
    refill = refill.waves_of(out.kept)
    asked = 0
    for _ in range(MAX_REFILLS):
        room = min(
            refill.measure_room - len(out.kept),
            refill.decide_room - len(out.kept) - len(out.skipped),
        )
        if refill.full(new, out.kept) or room <= 0:
            break
        missing = len(new) - len(out.kept)
        more = refill.ask(min(missing, room))[:room]
        if not more:
            break
        asked += len(more)
        again = screen_once(more)
        out.kept += again.kept
        out.skipped += again.skipped
    return out, asked


class CostPolicy:
    """Off: every candidate is built. The base of :class:`ModelPolicy`."""

    def screen(
        self, new: Sequence[Candidate], generation: int, refill: Refill | None = None
    ) -> Screened:
        """Which of ``new`` (generation ``generation``'s candidates) to build; with
        ``refill``, more candidates may be asked for to take the place of skipped ones."""
        return Screened(list(new))

    def ahead(self, guessed: Sequence[Candidate], refill: Refill) -> list[Candidate]:
        """Which candidates of the strategy's guessed first generation (``guessed``, and
        the refills ``refill`` asks of its guess) may compile while the baseline compiles
        and is measured, before any screen: all of the first generation (off: nothing is
        skipped, so nothing is refilled)."""
        return list(guessed)

    def report(self) -> None:
        """Say once, at the end, what the policy skipped (nothing when off)."""


def cost_policy(run: SearchRun, writer: JournalWriter) -> CostPolicy:
    """The policy the search plan asks for; off, with one note saying why, where the
    model cannot run (scikit-learn missing) or cannot compare (several objectives)."""
    if not run.inputs.search_plan.cost_model:
        return CostPolicy()
    from ctune.model import unavailable

    why = unavailable()
    if why is None and len(run.inputs.objective.objectives) != 1:
        why = "it compares one objective with the leader's, and this search has several"
    if why is not None:
        run.notices.note(f"cost model unavailable: {why}; every candidate is built")
        return CostPolicy()
    return ModelPolicy(run, writer)


def earlier_journals(settings: Settings, kernel: str, journal: Path | None) -> list[Path]:
    """Where a search of ``kernel`` finds earlier journals: its own journal's folder (a
    problem set's earlier shapes) and the cache's, then the copies the registry keeps
    beside the kernel's artifacts (``journal_copy``), in that order."""
    own = journal.parent if journal is not None else None
    cache = Path(settings.cache_dir) / "journals"
    folders = dict.fromkeys(f for f in (own, cache) if f is not None)
    plain = [p for f in folders for p in sorted(f.glob(f"{kernel}-*.jsonl"))]
    copies = journal_copy.registry_copies(Path(settings.registry), kernel)
    return list(dict.fromkeys(p.resolve() for p in (*plain, *copies)))


def search_identity(header: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """One search, whichever file holds its journal: a registry's copy and the journal it
    copies (maybe resumed since) are the same search, read once (the file found first)."""
    info = header.get("info") or {}
    return (
        str(header.get("problem")),
        str(header.get("device")),
        str(info.get("created_utc")),
        str(info.get("seed")),
    )


def earlier_search(
    settings: Settings, spec: KernelSpec, objective: str, journal: Path | None
) -> Path | None:
    """A journal of an earlier search of ``spec``'s kernel, one of its problems, first
    objective ``objective``, the model could learn from (None: there is none). Only the
    journals of this machine count (its own folder and cache): the registry's copies
    train a model that is on, but do not turn it on (docs/cost-model.md)."""
    from ctune.errors import UserError
    from ctune.search import journal as journal_mod

    problems = {p.name for p in spec.problems}
    for path in earlier_journals(settings, spec.name, journal):
        if journal_copy.is_copy(path):
            continue
        try:
            header = journal_mod.read_header(path)
        except (UserError, OSError):
            continue
        named = (header.get("objectives") or {}).get("objectives") or []
        if (
            header.get("kernel") == spec.name
            and header.get("problem") in problems
            and named[:1] == [objective]
        ):
            return path
    return None


def on_by_default(
    settings: Settings, spec: KernelSpec, objective: str, journal: Path | None
) -> bool:
    """``--cost-model`` left out: on where an earlier search of the kernel can warm-start
    the model and scikit-learn is installed, off otherwise. Warm, the model kept every
    replayed seed at the optimum with far fewer builds; cold, a shorter budget does as
    much (docs/cost-model.md)."""
    from ctune.model import unavailable

    return unavailable() is None and earlier_search(settings, spec, objective, journal) is not None


def parse_on_off(text: str | None, flag: str) -> bool | None:
    """``on``/``off`` as given on the command line (None: not given)."""
    if text is None:
        return None
    if text.strip().lower() in ("on", "off"):
        return text.strip().lower() == "on"
    from ctune.errors import UserError

    raise UserError(f"{flag} takes on or off, got {text[:40]!r}")


def _target(value: float, baseline: float, direction: str) -> float | None:
    """A value on the model's scale: log of value over the baseline's, smaller better."""
    if not (value > 0 and baseline > 0 and math.isfinite(value)):
        return None
    ratio = math.log(value / baseline)
    return ratio if direction == "min" else -ratio


def _value(target: float, baseline: float, direction: str) -> float:
    """The inverse of :func:`_target` (an infinite bound stays infinite)."""
    ratio = target if direction == "min" else -target
    return baseline * math.exp(ratio) if ratio < 700 else math.inf


def trial_example(
    trial: Trial, row: list[float], baseline: float | None, direction: str
) -> Example:
    """What one journaled trial teaches the model."""
    from ctune.model import Example

    target = None
    if trial.outcome.is_ok and trial.values is not None and baseline is not None:
        target = _target(trial.values[0], baseline, direction)
    build = trial.build
    compile_s = failed = spills = None
    if build is not None:
        if not build.cache_hit and build.compile_s > 0:
            compile_s = build.compile_s
        failed = build.outcome.is_build_failure and build.outcome is not Outcome.INVALID
        if build.outcome.is_ok and build.resources.spills_store_bytes is not None:
            spills = float(build.resources.spills_store_bytes)
    return Example(tuple(row), target, compile_s, failed, spills)


def journal_examples(
    path: Path, features: FeatureMap, objective: str, direction: str
) -> list[Example]:
    """The trials of an earlier journal of the same kernel and first objective, each on
    its own journal's baseline (its first trial): a ratio carries across shapes and GPUs
    where a time does not. Empty when the journal is of something else."""
    from ctune.model import sm_number
    from ctune.search import journal as journal_mod

    replay, _ = journal_mod.read(path)
    header = replay.header
    named = (header.get("objectives") or {}).get("objectives") or []
    spec = features.spec
    problems = {p.name: p for p in spec.problems}
    if (
        header.get("kernel") != spec.name
        or not named
        or named[0] != objective
        or header.get("problem") not in problems
        or not replay.trials
        or replay.trials[0].values is None
    ):
        return []
    dims = problems[str(header["problem"])].dims
    sm = sm_number(str(header.get("device") or ""))
    baseline = replay.trials[0].values[0]
    return [
        trial_example(t, features.row(t.candidate.as_dict(), dims, sm), baseline, direction)
        for t in replay.trials
    ]


@dataclass
class _Warm:
    """What the earlier journals teach: their examples, oldest first, and for the note how
    many journals taught something, how many of those the registry kept, how many could
    not be read, and the devices of those recorded on another GPU."""

    examples: list[Example] = field(default_factory=list)
    journals: int = 0
    copies: int = 0
    unreadable: int = 0
    elsewhere: list[str] = field(default_factory=list)


class ModelPolicy(CostPolicy):
    """Skip a candidate whose predicted lower bound is worse than the leader's value."""

    def __init__(self, run: SearchRun, writer: JournalWriter) -> None:
        from ctune.model import DEFAULT_ALPHA, FeatureMap

        self.run = run
        self.writer = writer
        self.alpha = DEFAULT_ALPHA
        inputs = run.inputs
        self.direction = inputs.objective.directions[0]
        self.objective = inputs.objective.objectives[0].text
        self.features = FeatureMap(inputs.spec, inputs.limits)
        self.default_key = inputs.spec.default_candidate().key()
        self.warm: list[Example] | None = None  # read at the first screen
        self.warm_journals = 0
        self.finished_generation: int | None = None  # the last one the model may learn from
        self.screening = -1  # the generation being screened (refills screen it again)
        self.learn_until = 0  # the last generation its screens learn from
        self.rows: dict[str, list[float]] = {}
        self.considered = 0
        self.skipped = 0
        self.refilled = 0  # candidates asked for to fill the compile slots skips freed
        #: candidates built unscreened: a controls file's content is no feature of theirs
        self.unseen = 0
        self.bounded = False  # whether any prediction's lower bound was finite
        self.reported = False
        self._fitted: tuple[int, CostModel] | None = None  # (trials taught, the model)
        #: an earlier journal's examples by (path, mtime, size): ``ahead`` and the first
        #: screen read the same journals, before and after the baseline
        self._read: dict[tuple[Path, int, int], list[Example]] = {}

    # --- what the model learns from ---------------------------------------------------------
    def _sm(self) -> float:
        from ctune.model import sm_number

        found = sm_number(self.writer.device)
        if found < 0:
            inputs = self.run.inputs
            found = sm_number(inputs.settings.arch or inputs.spec.arch)
        return found

    def _row(self, cand: Candidate) -> list[float]:
        key = cand.key()
        if key not in self.rows:
            dims = self.run.inputs.problem.dims
            self.rows[key] = self.features.row(cand.as_dict(), dims, self._sm())
        return self.rows[key]

    def _start(self) -> None:
        """At the first screen: which generations are finished (a resumed journal's last
        generation record; a generation cut short is not), and the warm-start journals."""
        assert self.writer.journal is not None
        from ctune.search import journal as journal_mod

        replay, _ = journal_mod.read(self.writer.journal.path)
        self.finished_generation = max((g for g, _ in replay.states), default=0)
        self.warm = self._warm_examples(self.writer.journal.path)

    def _warm_examples(self, own: Path) -> list[Example]:
        """Trials of the kernel's earlier journals, oldest first: the model's warm start
        across shapes and GPUs (:meth:`_read_warm`), said in a note."""
        inputs = self.run.inputs
        started = str(self.writer.header.get("info", {}).get("created_utc", ""))
        warm = self._read_warm(started, own, search_identity(self.writer.header))
        self.warm_journals = warm.journals
        if warm.journals or warm.unreadable:
            left_out = f"; {warm.unreadable} unreadable left out" if warm.unreadable else ""
            # --cost-model left out: on because of them (on_by_default)
            why_on = (
                "; --cost-model off builds every candidate"
                if inputs.opts.cost_model is None
                else ""
            )
            # a journal of another GPU teaches its ranking, which may not be this one's
            # (docs/cost-model.md, "A new GPU"): say which
            gpus = ", ".join(sorted(set(warm.elsewhere)))
            other = f"; {len(warm.elsewhere)} on another GPU: {gpus}" if warm.elsewhere else ""
            kept = f", {warm.copies} kept in the registry" if warm.copies else ""
            measured = sum(e.target is not None for e in warm.examples)
            self.run.notices.note(
                f"cost model: {warm.journals} earlier journal(s) of {inputs.spec.name} "
                f"({measured} measured trials{kept}{other}) "
                f"train it from the start{left_out}{why_on}",
                "info",
            )
        return warm.examples

    def _read_warm(
        self, started: str, own: Path | None, this_search: tuple[str, str, str, str] | None
    ) -> _Warm:
        """The earlier journals of the kernel a search started at ``started`` learns from:
        those in its journal's folder ``own`` (a problem set's earlier shapes), in the
        cache's and the registry's copies (:func:`earlier_journals`); started no later than
        it and last written before it started (within the stamp's second), so that a resume
        finds the same ones (unless one of them is resumed, or the registry pulled,
        meanwhile). ``this_search``: its own identity, whose copies are not earlier."""
        from ctune.errors import UserError
        from ctune.search import journal as journal_mod

        inputs = self.run.inputs
        warm = _Warm()
        try:
            start_s = _dt.datetime.strptime(started, STAMP).replace(tzinfo=_dt.UTC).timestamp()
        except ValueError:
            return warm
        found: dict[tuple[str, str, str, str], tuple[str, Path]] = {}
        device_of: dict[Path, str] = {}
        mine = own.resolve() if own is not None else None
        for path in earlier_journals(inputs.settings, inputs.spec.name, own):
            if path == mine:
                continue
            try:
                header = journal_mod.read_header(path)
                written = path.stat().st_mtime
            except (UserError, OSError):
                continue
            created = str((header.get("info") or {}).get("created_utc", ""))
            if (
                header.get("kernel") == inputs.spec.name
                and created
                and created <= started
                and written < start_s + 1
            ):
                found.setdefault(search_identity(header), (created, path))
                device_of[path] = str(header.get("device") or "an unknown GPU")
        if this_search is not None:
            found.pop(this_search, None)  # a copy of this very search
        for _, path in sorted(found.values())[-MAX_WARM_JOURNALS:]:
            try:
                got = self._examples_of(path)
            except (UserError, OSError):
                warm.unreadable += 1
                continue
            warm.journals += bool(got)
            warm.copies += bool(got) and journal_copy.is_copy(path)
            warm.examples += got
            if got and device_of[path] != self.writer.device:
                warm.elsewhere.append(device_of[path])
        return warm

    def _examples_of(self, path: Path) -> list[Example]:
        """:func:`journal_examples` of one earlier journal, read once while it is unchanged."""
        stat = path.stat()
        key = (path, stat.st_mtime_ns, stat.st_size)
        if key not in self._read:
            self._read[key] = journal_examples(path, self.features, self.objective, self.direction)
        return self._read[key]

    def _fit(self, trials: Sequence[Trial], baseline: float) -> CostModel:
        """The model fitted on the warm start and ``trials`` (skipped ones teach nothing);
        the last fit again while no trial was added (the same examples, the same seed)."""
        from ctune.model import CostModel

        taught = [t for t in trials if t.outcome is not Outcome.SKIPPED]
        if self._fitted is not None and self._fitted[0] == len(taught):
            return self._fitted[1]
        mine = [trial_example(t, self._row(t.candidate), baseline, self.direction) for t in taught]
        model = CostModel(seed=self.run.inputs.search_plan.seed, alpha=self.alpha)
        model.fit([*(self.warm or []), *mine])
        self._fitted = (len(taught), model)
        return model

    # --- the decision -----------------------------------------------------------------------
    def ahead(self, guessed: Sequence[Candidate], refill: Refill) -> list[Candidate]:
        """Those of the guessed first generation, and of the refills ``refill`` asks of
        the guess in place of skipped ones, that its first screen will keep, so that they
        compile beside the baseline as they do without the model. That screen learns from
        the earlier journals and the baseline, which leads it and is 0 on the model's scale
        whatever it measures: the same fit and rule can be asked now. The screen still
        decides; where the two differ (docs/cost-model.md) only wall time changes. The rows
        are not kept: before the measurement names the GPU, their SM is the arch's."""
        from ctune.model import CostModel, Example
        from ctune.search import journal as journal_mod

        if not guessed:
            return []
        inputs = self.run.inputs
        sm = self._sm()  # before any measurement: the arch's

        def row(cand: Candidate) -> list[float]:
            return self.features.row(cand.as_dict(), inputs.problem.dims, sm)

        warm = self._read_warm(journal_mod.utc_stamp(), inputs.opts.journal, None)
        baseline = Example(tuple(row(inputs.spec.default_candidate())), 0.0)
        model = CostModel(seed=inputs.search_plan.seed, alpha=self.alpha)
        model.fit([*warm.examples, baseline])
        if model.trained_on < MIN_TRAINED:
            return list(guessed)

        def screen_early(cands: Sequence[Candidate]) -> Screened:
            """The first screen's rule, the leader the baseline (0): a candidate the model
            cannot tell apart (``_screen_once``) is kept."""
            seen = [c for c in cands if not self.features.unseen(c.as_dict())]
            predictions = model.predict([row(c) for c in seen]) if seen else []
            ruled_out = {
                cand.key()
                for cand, predicted in zip(seen, predictions, strict=True)
                if cand.key() != self.default_key and predicted.low > 0.0
            }
            return Screened(
                [c for c in cands if c.key() not in ruled_out],
                [Trial(0, 1, c, Outcome.SKIPPED) for c in cands if c.key() in ruled_out],
            )

        return refilled(guessed, screen_early, refill)[0].kept

    def screen(
        self, new: Sequence[Candidate], generation: int, refill: Refill | None = None
    ) -> Screened:
        out, asked = refilled(new, lambda cands: self._screen_once(cands, generation), refill)
        self.refilled += asked
        return out

    def _screen_once(self, new: Sequence[Candidate], generation: int) -> Screened:
        """Skip the candidates of ``new`` the model rules out, journaling each. One it
        cannot tell from another (a controls file's: FeatureMap.unseen) is built."""
        if not new:
            return Screened([])
        if self.warm is None:
            self._start()
        if self.screening != generation:  # its first screen: what has finished since
            self.screening = generation
            self.learn_until = self.finished_generation or 0
            self.finished_generation = generation  # this one is finished by the next screen
        skips, journaled = self._journaled(new)
        blind = {c.key() for c in new if self.features.unseen(c.as_dict())}
        self.unseen += len(blind)
        out = self._screen_seen([c for c in new if c.key() not in blind | journaled], generation)
        out.skipped[:0] = skips  # their lines come first in the journal
        built = journaled - {t.candidate.key() for t in skips}
        kept = {c.key() for c in out.kept} | blind | built
        out.kept = [c for c in new if c.key() in kept]  # in the order asked
        return out

    def _journaled(self, new: Sequence[Candidate]) -> tuple[list[Trial], set[str]]:
        """Of ``new``, those a resumed generation cut short has journaled already: their
        verdicts stand (the journal's skips, accounted again, and the keys of all of them)."""
        verdicts = {c.key(): self.writer.held_skip(c.key()) for c in new}
        skips = self.writer.take([key for key, skip in verdicts.items() if skip])
        self.skipped += len(skips)
        return skips, {key for key, skip in verdicts.items() if skip is not None}

    def _screen_seen(self, new: Sequence[Candidate], generation: int) -> Screened:
        """The rule on candidates the model can tell apart."""
        if not new:
            return Screened([])
        finished = self.learn_until
        book = self.run.book
        self.considered += len(new)
        baseline_trial = book.baseline
        if baseline_trial is None or baseline_trial.values is None:
            return Screened(list(new))
        baseline = baseline_trial.values[0]
        learned = [t for t in book.trials if t.generation <= finished]
        leader = self._leader(learned, baseline)
        if leader is None:
            return Screened(list(new))
        model = self._fit(learned, baseline)
        if model.trained_on < MIN_TRAINED:
            return Screened(list(new))
        predictions = model.predict([self._row(c) for c in new])
        self.bounded = self.bounded or any(math.isfinite(p.low) for p in predictions)
        out = Screened([])
        for cand, predicted in zip(new, predictions, strict=True):
            if cand.key() == self.default_key or not predicted.low > leader:
                out.kept.append(cand)
                continue
            trial = Trial(len(book.trials), generation, cand, Outcome.SKIPPED)
            self.writer.record(trial, skipped=self._why(predicted, leader, baseline, model))
            out.skipped.append(trial)
            self.skipped += 1
        return out

    def _leader(self, trials: Sequence[Trial], baseline: float) -> float | None:
        """The best measured feasible value on the model's scale (None: none yet)."""
        best = None
        for t in trials:
            if t.feasible and t.values is not None:
                target = _target(t.values[0], baseline, self.direction)
                if target is not None and (best is None or target < best):
                    best = target
        return best

    def _why(
        self, predicted: Prediction, leader: float, baseline: float, model: CostModel
    ) -> dict[str, Any]:
        """The journal's record of one skip: the prediction against the leader."""
        return {
            "rule": f"predicted {self.objective} at {1 - self.alpha:.0%} confidence is worse "
            "than the leader's",
            "bound": _value(predicted.low, baseline, self.direction),
            "predicted": _value(predicted.mid, baseline, self.direction),
            "leader": _value(leader, baseline, self.direction),
            "alpha": self.alpha,
            "trained_on": model.trained_on,
            "model": predicted.to_json(),
        }

    def report(self) -> None:
        if self.reported:
            return
        self.reported = True
        more = []
        if self.refilled:
            more.append(f"{self.refilled} more asked for to fill the compile slots skips freed")
        if self.unseen:
            more.append(
                f"{self.unseen} with a controls file built unscreened (its content is no "
                "feature the model sees)"
            )
        if self.considered and not self.bounded:  # why it could rule nothing out
            from ctune.model import trials_for_a_bound

            # the latest fit had the most trials: they only grow
            trained = self._fitted[1].trained_on if self._fitted is not None else 0
            more.append(
                f"its bound needs about {trials_for_a_bound(self.alpha)} measured trials (this "
                f"search's and earlier journals' of the kernel) and had at most "
                f"{trained}: a longer search, or a second one, gives it them"
            )
        self.run.notices.note(
            f"cost model: skipped {self.skipped} of {self.considered} candidates predicted "
            f"worse than the leader at {1 - self.alpha:.0%} confidence (journaled as skipped, "
            f"with the prediction)" + "".join(f"; {m}" for m in more),
            "info",
        )


__all__ = [
    "MAX_REFILLS",
    "MIN_TRAINED",
    "CostPolicy",
    "ModelPolicy",
    "Refill",
    "Screened",
    "cost_policy",
    "earlier_journals",
    "earlier_search",
    "journal_examples",
    "on_by_default",
    "parse_on_off",
    "refilled",
    "search_identity",
    "trial_example",
]

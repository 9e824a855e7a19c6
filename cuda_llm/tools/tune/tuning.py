"""Tuning without a model: a kernel declares its tunable constants, a sampler searches them.

A candidate marks a constant as tunable with a comment line before its definition::

    // cuda-llm: tune BLOCK_M 64 128 256
    #define BLOCK_M 128
    // cuda-llm: tune ITEMS 2 4 8
    constexpr int ITEMS = 4;

Each point of the space is the source with those values written in (nothing else changes, so the point
of the values as written is the candidate itself, byte for byte). Points are compiled in parallel and
timed by the caller's ``measure`` (the harness: every correctness case, then timing), one after another,
or up to ``workers`` at once when the caller measures on that many GPUs (a GPU pool), within a budget of
evaluations and seconds. A point that does not compile (a ``static_assert`` that rules it out, too much
shared memory) is skipped, reported, and costs no evaluation.

A batch holds ``max(jobs, workers)`` compiled points, so that every GPU has one to measure: the sampler
proposes that many, they are compiled together, and while some did not compile the sampler is told so and
asked for as many replacements, compiled in turn, until the batch is full or the space, the evaluations or
the seconds run out. Then the batch is measured (up to ``workers`` at once), and only then is the sampler
told the times and asked for the next batch.

The points tried do not depend on ``workers``: what the sampler is asked for and told depends only on the
batch size and on compile verdicts and times, never on the order measurements finish in; points are
numbered in the order proposed. So with a fixed seed the same points are tried with one GPU or eight (as
long as ``budget.jobs`` is at least the number of GPUs, so the batch size is ``jobs`` with either), and only
the seconds budget can cut a search at another point.

The sampler is Optuna's: a grid in random order when the whole space fits in the budget (every point is
tried), else TPE (multivariate, constant liar for the parallel batch; a point that did not compile or pass
is told as infinitely slow, so TPE learns to avoid its region). Pure of the graph and of any LLM:
``cuda-llm tune`` and the graph's tune stage both call :func:`search`.
"""

from __future__ import annotations

import itertools
import math
import re
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Callable, Literal, Sequence

from pydantic import BaseModel, Field

from cuda_llm.results import EvalResult, Status
from cuda_llm.tools.compiler.compile import source_hash
from cuda_llm.tools.harness.failure_text import note as failure_note

# One line for the coder's prompt (the agents' prompt template may use it as is).
CODER_TUNABLES_HINT = (
    "You may leave constants for the tuner: put `// cuda-llm: tune NAME v1 v2 v3` on the line before "
    "`#define NAME v` or `constexpr int NAME = v;` and every listed value is compiled, tested and timed "
    "after your kernel passes, the fastest kept (use static_assert to rule out combinations that cannot work)."
)

DIRECTIVE = re.compile(r"^[ \t]*//[ \t]*cuda-llm:[ \t]*tune[ \t]+(?P<name>[A-Za-z_]\w*)(?P<values>[^\n]*)$", re.M)
_VALUE = re.compile(r"^[-+]?[A-Za-z0-9_.]+$")
MAX_VALUES = 64
NO_TIME = float("inf")   # what the sampler is told for a point without a time (slowest, not a failed trial)
Sampler = Literal["auto", "grid", "tpe", "random"]


class TuneSpaceError(ValueError):
    """The tune directives cannot be used (no definition for a name, a value that is not a token, ...)."""


class Tunable(BaseModel):
    """One tunable constant: its values (the one written in the source first) and where it is defined."""

    name: str
    values: list[str]
    default: str
    line: int                      # 1-based line of the definition
    start: int                     # character span of the value in the source
    end: int


def _definition(source: str, name: str) -> list[re.Match[str]]:
    n = re.escape(name)
    define = re.compile(rf"^[ \t]*#[ \t]*define[ \t]+{n}[ \t]+(?P<value>[^\s/][^\n/]*?)[ \t]*(?://[^\n]*)?$", re.M)
    const = re.compile(rf"\b(?:constexpr|const)\b[^;=\n(){{}}]*?\b{n}[ \t]*=[ \t]*(?P<value>[^;\n]+?)[ \t]*;")
    return [*define.finditer(source), *const.finditer(source)]


def parse_tunables(source: str) -> list[Tunable]:
    """The tunables a source declares ([] when none); TuneSpaceError says what is wrong with a directive."""
    out: list[Tunable] = []
    seen: set[str] = set()
    for m in DIRECTIVE.finditer(source):
        name = m.group("name")
        line = source.count("\n", 0, m.start()) + 1
        where = f"line {line}: `// cuda-llm: tune {name} ...`"
        if name in seen:
            raise TuneSpaceError(f"{where}: {name} is declared tunable twice; keep one directive")
        seen.add(name)
        values = [v for v in re.split(r"[\s,]+", m.group("values").strip()) if v]
        if not values:
            raise TuneSpaceError(f"{where}: no values; list them after the name, e.g. `// cuda-llm: tune {name} 64 128 256`")
        bad = [v for v in values if not _VALUE.match(v)]
        if bad:
            raise TuneSpaceError(f"{where}: {bad[0]!r} is not a single token (a number or an identifier)")
        if len(values) > MAX_VALUES:
            raise TuneSpaceError(f"{where}: {len(values)} values; at most {MAX_VALUES}")
        defs = _definition(source, name)
        if not defs:
            raise TuneSpaceError(f"{where}: no `#define {name} VALUE` or `constexpr int {name} = VALUE;` in the source")
        if len(defs) > 1:
            lines = sorted(source.count("\n", 0, d.start()) + 1 for d in defs)
            raise TuneSpaceError(f"{where}: {name} is defined {len(defs)} times (lines {lines}); define it once")
        d = defs[0]
        default = d.group("value").strip()
        ordered = [default] + [v for v in dict.fromkeys(values) if v != default]
        out.append(Tunable(name=name, values=ordered, default=default, line=source.count("\n", 0, d.start()) + 1,
                           start=d.start("value"), end=d.start("value") + len(d.group("value").rstrip())))
    return out


def space_size(tunables: Sequence[Tunable]) -> int:
    return math.prod(len(t.values) for t in tunables) if tunables else 0


def default_point(tunables: Sequence[Tunable]) -> dict[str, str]:
    return {t.name: t.default for t in tunables}


def apply_point(source: str, tunables: Sequence[Tunable], point: dict[str, str]) -> str:
    """The source with the point's values written into the definitions (the default point: the source)."""
    out = source
    for t in sorted(tunables, key=lambda t: t.start, reverse=True):
        value = point.get(t.name, t.default)
        if value not in t.values:
            raise TuneSpaceError(f"{t.name}={value} is not one of the declared values {t.values}")
        out = out[: t.start] + value + out[t.end:]
    return out


def point_text(point: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in point.items())


# ------------------------------------------------------------------------------------------ the search
class TuneBudget(BaseModel):
    """How much one candidate's tuning may spend."""

    max_evals: int = Field(default=24, ge=1)        # timed points (the written point included)
    max_seconds: float = Field(default=600.0, gt=0)  # wall clock for compiles and measurements
    jobs: int = Field(default=4, ge=1)             # points compiled in parallel per batch (a batch holds at
                                                   # least one point per GPU measuring)
    seed: int = 0
    sampler: Sampler = "auto"


class TunePoint(BaseModel):
    index: int                     # order in which the point was tried
    params: dict[str, str]
    source_hash: str
    status: str                    # a Status value
    ms: float | None = None
    pct_of_sol: float | None = None
    note: str = ""


class TuneOutcome(BaseModel):
    tunables: list[Tunable]
    points: list[TunePoint] = Field(default_factory=list)
    best: TunePoint | None = None
    written: TunePoint | None = None   # the point as written in the source
    space_size: int = 0
    evaluations: int = 0               # points timed (compiled ones)
    invalid: int = 0                   # points that did not compile
    sampler: str = ""
    stop_reason: str = ""              # space (all tried), evals, seconds, no_device, proposals
    seconds: float = 0.0

    @property
    def gain(self) -> float | None:
        """Written point's time over the best point's (>1: tuning helped)."""
        if self.best is None or self.written is None or not self.best.ms or not self.written.ms:
            return None
        return self.written.ms / self.best.ms

    def summary(self) -> str:
        """One line: what was searched and what won."""
        head = f"{self.evaluations} timed, {self.invalid} invalid of {self.space_size} points ({self.sampler}, {self.stop_reason})"
        if self.best is None:
            return f"no point passed; {head}"
        gain = f", {self.gain:.2f}x over the written values" if self.gain else ""
        return f"best {point_text(self.best.params)} at {self.best.ms:.4g} ms{gain}; {head}"


CompileBatch = Callable[[list[str]], list[Any]]          # sources -> results with .ok and .errors
Measure = Callable[[str, TunePoint], EvalResult]          # source, point (index, params) -> verdict


@dataclass
class _Proposal:
    trial: Any
    params: dict[str, str]


def _sampler(kind: str, tunables: Sequence[Tunable], budget: TuneBudget) -> tuple[Any, str]:
    import optuna

    space = {t.name: list(t.values) for t in tunables}
    if kind == "auto":
        kind = "grid" if space_size(tunables) <= budget.max_evals else "tpe"
    if kind == "grid":
        return optuna.samplers.GridSampler(space, seed=budget.seed), "grid"
    if kind == "random":
        return optuna.samplers.RandomSampler(seed=budget.seed), "random"
    startup = max(2, min(10, budget.max_evals // 3))
    return optuna.samplers.TPESampler(seed=budget.seed, multivariate=True, constant_liar=True,
                                      n_startup_trials=startup), "tpe"


def _key(params: dict[str, str], tunables: Sequence[Tunable]) -> tuple[str, ...]:
    return tuple(params[t.name] for t in tunables)


def _compiled_ok(comp: Any) -> bool:
    """Whether a compile result (anything with ``.ok``) compiled."""
    return bool(getattr(comp, "ok", False))


def _time_of(point: TunePoint) -> float | None:
    """A point's time for the sampler: only a passing, timed point has one."""
    return point.ms if point.status == Status.ok.value and point.ms is not None else None


class PointSampler:
    """The strategy: which point next. An Optuna study over the tunables (grid, random or TPE, ``_sampler``)
    that proposes points not yet known and learns each point's time; it knows nothing of compiling,
    measuring or budgets but its own allowance of proposals (``max_asks``)."""

    def __init__(self, tunables: Sequence[Tunable], budget: TuneBudget):
        import optuna
        from optuna.distributions import CategoricalDistribution

        self.tunables = list(tunables)
        self.dists = {t.name: CategoricalDistribution(list(t.values)) for t in tunables}
        sampler, self.kind = _sampler(budget.sampler, tunables, budget)
        self.study = optuna.create_study(direction="minimize", sampler=sampler)
        self.max_asks = max(4 * budget.max_evals, space_size(tunables) + 16)
        self.asks = 0

    @property
    def out_of_asks(self) -> bool:
        return self.asks >= self.max_asks

    def tell(self, trial: Any, point: TunePoint | None) -> None:
        """The sampler learns a point's time; a point without one (it did not compile or pass, or is a
        repeat within the batch) as infinitely slow. TPE ignores failed trials, so it kept proposing
        points that do not compile and ran out of proposals; told they are slowest, it moves away."""
        v = _time_of(point) if point is not None else None
        try:
            self.study.tell(trial, NO_TIME if v is None else v)
        except RuntimeError:   # GridSampler stops the study once every grid point is finished
            pass

    def add(self, point: TunePoint) -> None:
        """A point measured outside a proposal (the written one), as a finished trial."""
        from optuna.trial import TrialState, create_trial

        v = _time_of(point)
        self.study.add_trial(create_trial(params=dict(point.params), distributions=self.dists,
                                          value=NO_TIME if v is None else v, state=TrialState.COMPLETE))

    def propose(self, n: int, known: dict[tuple[str, ...], TunePoint],
                batch_keys: set[tuple[str, ...]]) -> list[_Proposal]:
        """Up to ``n`` new points, none ``known`` or already in the batch (``batch_keys``, updated); fewer only
        when the sampler or the ``max_asks`` allowance runs out."""
        out: list[_Proposal] = []
        while len(out) < n and self.asks < self.max_asks:
            self.asks += 1
            try:
                trial = self.study.ask(self.dists)
            except RuntimeError:
                break
            params = {name: str(trial.params[name]) for name in self.dists}
            key = _key(params, self.tunables)
            if key in known:
                self.tell(trial, known[key])      # a point seen before: its value again, no new measurement
                continue
            if key in batch_keys:
                self.tell(trial, None)
                continue
            batch_keys.add(key)
            out.append(_Proposal(trial, params))
        return out


_Entry = tuple[dict[str, str], str, Any]        # a point's params, its source and its compile result


class BatchRunner:
    """The batching runner: compile a batch of points, measure the compiled ones (up to ``workers`` at once),
    record every point, and stop on the budget (see the module docstring); what to try comes from a
    ``PointSampler``."""

    def __init__(self, source: str, tunables: Sequence[Tunable], *, compile_batch: CompileBatch, measure: Measure,
                 budget: TuneBudget, on_point: Callable[[TunePoint], None] | None, clock: Callable[[], float],
                 workers: int, outcome: TuneOutcome):
        self.source, self.tunables = source, list(tunables)
        self.compile_batch, self.measure = compile_batch, measure
        self.budget, self.on_point, self.clock, self.workers = budget, on_point, clock, workers
        self.outcome = outcome
        self.size = outcome.space_size
        self.t0 = clock()
        self.known: dict[tuple[str, ...], TunePoint] = {}
        self._next_index = 0
        self._threads = (ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tune-measure")
                         if workers > 1 else None)

    def close(self) -> None:
        """After an error too: the points still being measured finish (and are cached)."""
        if self._threads is not None:
            self._threads.shutdown(wait=True)

    def out_of_seconds(self) -> bool:
        return self.clock() - self.t0 >= self.budget.max_seconds

    # ------------------------------------------------------------------------------- one point
    def _submit(self, src: str, point: TunePoint) -> Future:
        """Measure a point: in a pool thread, or here and now with one worker (as a finished future)."""
        if self._threads is not None:
            return self._threads.submit(self.measure, src, point)
        fut: Future = Future()
        fut.set_result(self.measure(src, point))
        return fut

    def _numbered(self) -> int:
        idx = self._next_index
        self._next_index += 1
        return idx

    def _record(self, point: TunePoint) -> None:
        self.known[_key(point.params, self.tunables)] = point
        self.outcome.points.append(point)
        if self.on_point is not None:
            self.on_point(point)

    def _measured(self, params: dict[str, str], idx: int, h: str, res: EvalResult) -> TunePoint:
        timing = res.timing
        ok = res.status == Status.ok and timing is not None
        pt = TunePoint(index=idx, params=params, source_hash=h, status=res.status.value,
                       ms=timing.median_ms if timing is not None else None,
                       pct_of_sol=timing.pct_of_sol if timing is not None else None,
                       note="" if ok else failure_note(res, 200))
        self._record(pt)
        if res.status == Status.no_device:
            self.outcome.stop_reason = "no_device"
        return pt

    # ------------------------------------------------------------------------------- a batch
    def compile_points(self, batch: list[dict[str, str]]) -> list[_Entry]:
        """(params, source, compile result) of each point, compiled together."""
        sources = [apply_point(self.source, self.tunables, p) for p in batch]
        return list(zip(batch, sources, self.compile_batch(sources)))

    def evaluate_batch(self, batch: list[_Entry]) -> list[TunePoint]:
        """Measure the compiled points of a batch (in order, up to ``workers`` at once) until a budget runs
        out, recording every point that did not compile; the points of the batch tried, in the order
        proposed."""
        out: list[TunePoint] = []
        running: dict[Future, tuple[dict[str, str], int, str]] = {}
        outcome, budget = self.outcome, self.budget

        def harvest(block: bool) -> None:
            if not running:
                return
            done = wait(running, return_when=FIRST_COMPLETED)[0] if block else [f for f in running if f.done()]
            for fut in sorted(done, key=lambda f: running[f][1]):
                params, idx, h = running.pop(fut)
                out.append(self._measured(params, idx, h, fut.result()))

        stopped = False                     # a budget ran out: no new measurement starts
        for params, src, comp in batch:
            harvest(block=False)
            h = source_hash(src)
            if not _compiled_ok(comp):       # paid for and told to the sampler: always recorded
                errors = " ".join((getattr(comp, "errors", "") or "did not compile").split())
                pt = TunePoint(index=self._numbered(), params=params, source_hash=h,
                               status=Status.compile_error.value, note=errors[:200])
                outcome.invalid += 1
                self._record(pt)
                out.append(pt)
                continue
            if stopped or outcome.stop_reason:   # no device: what is running finishes, nothing new starts
                continue
            while len(running) >= self.workers:
                harvest(block=True)
            if outcome.stop_reason or outcome.evaluations >= budget.max_evals or self.out_of_seconds():
                stopped = True
                continue
            idx = self._numbered()
            outcome.evaluations += 1
            pending = TunePoint(index=idx, params=params, source_hash=h, status="pending")
            running[self._submit(src, pending)] = (params, idx, h)
        while running:
            harvest(block=True)
        return sorted(out, key=lambda p: p.index)

    def fill_batch(self, sampler: PointSampler, want: int) -> tuple[list[_Proposal], list[_Entry]]:
        """Proposals compiled until ``want`` of them compiled (those that did not are told to the sampler
        before it proposes their replacements), or the sampler, the space or the seconds run out."""
        proposals: list[_Proposal] = []
        entries: list[_Entry] = []
        batch_keys: set[tuple[str, ...]] = set()
        n_ok = 0
        while n_ok < want and not self.out_of_seconds():
            new = sampler.propose(min(want - n_ok, self.size - len(self.known) - len(batch_keys)), self.known,
                                  batch_keys)
            if not new:
                break
            for p, entry in zip(new, self.compile_points([p.params for p in new])):
                proposals.append(p)
                entries.append(entry)
                if _compiled_ok(entry[2]):
                    n_ok += 1
                else:
                    sampler.tell(p.trial, None)
        return proposals, entries

    def stop_reason(self, sampler: PointSampler) -> str:
        """Why the search ends before another batch ("" while it goes on)."""
        if len(self.known) >= self.size:
            return "space"
        if self.outcome.evaluations >= self.budget.max_evals:
            return "evals"
        if self.out_of_seconds():
            return "seconds"
        if sampler.out_of_asks:
            return "proposals"
        return ""

    # ------------------------------------------------------------------------------- the search
    def run(self, sampler: PointSampler) -> None:
        """The written point first (the tuned result is never worse than the candidate as written), then the
        sampler's batches until a stop rule holds; each batch's times are told only once it is measured."""
        outcome = self.outcome
        first = self.evaluate_batch(self.compile_points([default_point(self.tunables)]))
        for pt in first:
            sampler.add(pt)
        outcome.written = first[0] if first else None
        while not outcome.stop_reason:
            outcome.stop_reason = self.stop_reason(sampler)
            if outcome.stop_reason:
                break
            want = min(max(self.budget.jobs, self.workers), self.budget.max_evals - outcome.evaluations,
                       self.size - len(self.known))
            proposals, entries = self.fill_batch(sampler, want)
            if not proposals:
                if sampler.out_of_asks or self.out_of_seconds():
                    continue            # stopped at the top, for that reason
                outcome.stop_reason = "space"
                break
            done = {_key(p.params, self.tunables): p for p in self.evaluate_batch(entries)}
            for p, (_, _, comp) in zip(proposals, entries):
                if _compiled_ok(comp):  # (the others were told as they failed to compile)
                    sampler.tell(p.trial, done.get(_key(p.params, self.tunables)))   # None: the budget ran out


def search(source: str, tunables: Sequence[Tunable], *, compile_batch: CompileBatch, measure: Measure,
           budget: TuneBudget | None = None, on_point: Callable[[TunePoint], None] | None = None,
           clock: Callable[[], float] = time.monotonic, workers: int = 1) -> TuneOutcome:
    """Search the tunables' space for the fastest passing point (see the module docstring).

    The point as written is measured first (so the result is never worse than the candidate), then the
    sampler's points in batches of ``max(budget.jobs, workers)`` compiled points (those that do not compile
    replaced by more proposals), measured one by one, or ``workers`` at a time from as many threads
    (``measure`` must then be safe to call from several threads at once; a GPU pool's client is).
    ``on_point`` is called in this thread as each point is known. The sampler (``PointSampler``) says what to
    try; the runner (``BatchRunner``) compiles, measures, records and stops.
    """
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    import optuna

    budget = budget or TuneBudget()
    if not tunables:
        raise TuneSpaceError("the source declares no tunables (`// cuda-llm: tune NAME v1 v2 ...`)")
    outcome = TuneOutcome(tunables=list(tunables), space_size=space_size(tunables))
    runner = BatchRunner(source, tunables, compile_batch=compile_batch, measure=measure, budget=budget,
                         on_point=on_point, clock=clock, workers=workers, outcome=outcome)
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        sampler = PointSampler(tunables, budget)
        outcome.sampler = sampler.kind
        runner.run(sampler)
    finally:
        optuna.logging.set_verbosity(verbosity)
        runner.close()
    outcome.points.sort(key=lambda p: p.index)     # measured side by side, they are known out of order
    passing = [p for p in outcome.points if p.status == Status.ok.value and p.ms is not None]
    outcome.best = min(passing, key=lambda p: (p.ms, p.index)) if passing else None
    outcome.seconds = round(clock() - runner.t0, 3)
    return outcome


def all_points(tunables: Sequence[Tunable], limit: int | None = None) -> list[dict[str, str]]:
    """Every point of the space (the written one first), or the first ``limit``: for exhaustive
    references in benchmarks and for compiling a space without a device."""
    names = [t.name for t in tunables]
    combos = itertools.islice(itertools.product(*(t.values for t in tunables)), limit)
    return [dict(zip(names, combo)) for combo in combos]

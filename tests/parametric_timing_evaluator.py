"""A test double for tuning: the time of a kernel is a known function of its tunable constants.

The source's tunables are read back with cuda_llm.tools.tune.tuning.parse_tunables (a tuned point is the
source with the values written in), and ``time_of(params)`` gives its latency in ms, so a test knows the
optimum in advance. ``valid(params)`` decides which points "compile" when no real nvcc is wanted (a point
it rejects is a compile error, as a static_assert would make it); with ``real_nvcc=True`` every source is
compiled by nvcc for real and nvcc's own verdict counts.

It serves both levels: ``compile_batch`` and ``measure`` for cuda_llm.tools.tune.tuning.search, and the
Evaluator protocol (evaluate, baseline, profile, final_check) for a graph run. Every measurement is
counted in ``measured`` (source hashes, in order), so a test can check the budget and that no point is
timed twice.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable

from cuda_llm.measure.evaluator import ToolsMixin
from cuda_llm.results import CaseResult, CompileResult, EvalResult, Status, TimingResult, ValidationResult
from cuda_llm.tools.compiler.compile import source_hash
from cuda_llm.tools.tune.tuning import TunePoint, parse_tunables

TimeOf = Callable[[dict[str, int]], float]


def params_of(source: str) -> dict[str, int]:
    """The values of the source's tunable constants, as integers."""
    return {t.name: int(t.default) for t in parse_tunables(source)}


class ParametricTimingEvaluator(ToolsMixin):
    """Times = ``time_of(params)``; compile verdicts from ``valid`` or from nvcc (see the module doc)."""

    device = None

    def __init__(self, time_of: TimeOf, *, valid: Callable[[dict[str, int]], bool] | None = None,
                 real_nvcc: bool = False, arch: str = "sm_90", baseline_ms: float = 10.0,
                 wrong: Callable[[dict[str, int]], bool] | None = None, sol_ms: float | None = None):
        self.time_of = time_of
        self.valid = valid or (lambda p: True)
        self.wrong = wrong or (lambda p: False)
        self.real_nvcc = real_nvcc
        self.arch = arch
        self.baseline_ms = baseline_ms
        self.sol_ms = sol_ms              # the speed-of-light bound: gives each timing its % of it
        self.measured: list[str] = []
        self.compiled: list[str] = []
        self._lock = threading.Lock()

    # -- compile
    def compile(self, source: str) -> CompileResult:
        with self._lock:
            self.compiled.append(source_hash(source))
        if self.real_nvcc:
            from cuda_llm.tools.compiler.compile import compile_source

            return compile_source(source, arch=self.arch)
        ok = not parse_tunables(source) or self.valid(params_of(source))
        return CompileResult(ok=ok, arch=self.arch, source_hash=source_hash(source),
                             errors="" if ok else "kernel.cu(3): error: static assertion failed with \"tile too large\"")

    def compile_batch(self, sources: list[str]) -> list[CompileResult]:
        return [self.compile(s) for s in sources]

    def build(self, loaded: Any, source: str, candidate_id: str) -> EvalResult:
        """The Evaluator seam's build: this double's compile, as an EvalResult."""
        comp = self.compile(source)
        return EvalResult(task=loaded.task.name, candidate=candidate_id, source_hash=source_hash(source), compile=comp,
                          status=Status.ok if comp.ok else Status.compile_error)

    # -- measure
    def _timing(self, ms: float) -> TimingResult:
        samples = [ms * (1 + d) for d in (0.0, 0.002, 0.004, 0.006, 0.01)]
        return TimingResult(sizes={"n": 1}, median_ms=ms, min_ms=min(samples), mean_ms=sum(samples) / len(samples),
                            iqr_ms=ms * 0.004, rse=0.002, samples_ms=samples, repetitions=len(samples),
                            stop_reason="rse", sol_ms=self.sol_ms,
                            pct_of_sol=100 * self.sol_ms / ms if self.sol_ms else None)

    def result(self, source: str, candidate: str = "candidate", task: str = "t") -> EvalResult:
        comp = self.compile(source)
        base = dict(task=task, candidate=candidate, source_hash=source_hash(source), compile=comp)
        if not comp.ok:
            return EvalResult(status=Status.compile_error, message="compilation failed: " + comp.errors, **base)
        with self._lock:
            self.measured.append(source_hash(source))
        params = params_of(source)
        if self.wrong(params):
            case = CaseResult(sizes={"n": 7}, passed=False, reason="max abs error 1 > tol", kind="tolerance")
            return EvalResult(status=Status.wrong_answer, message="wrong answer (set by the test)",
                              validation=ValidationResult(passed=False, cases=[case]), **base)
        ms = float(self.time_of(params)) if params else self.baseline_ms
        return EvalResult(status=Status.ok, message=f"passed; {ms:.4f} ms", timing=self._timing(ms),
                          validation=ValidationResult(passed=True, cases=[CaseResult(sizes={"n": 7}, passed=True)]),
                          **base)

    def measure(self, source: str, point: TunePoint) -> EvalResult:
        return self.result(source, f"point{point.index}")

    # -- Evaluator protocol (cuda_llm.measure.evaluator)
    def evaluate(self, loaded: Any, source: str, candidate_id: str, work_dir: Path) -> EvalResult:
        return self.result(source, candidate_id, loaded.task.name)

    def baseline(self, loaded: Any) -> EvalResult:
        return self.result(Path(loaded.task.baseline_path).read_text(), "baseline", loaded.task.name)

    def profile(self, loaded: Any, source: str, candidate_id: str, work_dir: Path, result: EvalResult) -> Any:
        return None

    def head_to_head(self, loaded: Any, challenger: str, champion: str, challenger_id: str, champion_id: str,
                     work_dir: Path) -> Any:
        """The legs in turns, each timed (and counted in ``measured``) like an evaluation."""
        from cuda_llm.measure.evaluator import interleaved

        return interleaved(lambda src, cid, work: self.evaluate(loaded, src, cid, work),
                           challenger, champion, challenger_id, champion_id, work_dir)

    def final_check(self, loaded: Any, source: str, candidate_id: str, work_dir: Path) -> tuple[EvalResult, EvalResult]:
        cand = self.result(source, candidate_id, loaded.task.name)
        base = self.baseline(loaded)
        return cand.model_copy(update={"baseline_ms": base.median_ms}), base

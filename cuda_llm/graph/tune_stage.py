"""The tune stage: a passing candidate that declares tunable constants is searched without any model.

For every candidate of the round that passed, declares ``// cuda-llm: tune NAME v1 v2 ...``
(tools/tune/tuning.py) and runs within 1.3x of the best (the run's or this round's fastest), the stage searches its points within the run's per-candidate budget
(``tune_evals`` timed points, ``tune_seconds``): points are compiled in parallel, then each is judged by
the Evaluator seam like any candidate (cached by source, so a resumed run pays nothing twice), as many at
once as the evaluator has GPUs (a GPU pool: one point per GPU at a time, each job in the trace as a
``gpu_job`` of candidate ``<id>-p<index>`` with the GPU that ran it; one GPU: one after another). The
candidate's result becomes its best point: its source hash, time and interval in state are the tuned
point's, ``candidates/<id>.tuned.cu`` keeps the tuned source, ``candidates/<id>.json`` its result (the
untuned one stays as ``<id>-untuned.json``) and ``tuning/<id>.json`` every point tried.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from cuda_llm.figures import fmt_ms
from cuda_llm.graph.state import Limits, short
from cuda_llm.results import CompileResult, EvalResult, Status
from cuda_llm.graph.selection import interval
from cuda_llm.tools.harness import failure_text
from cuda_llm.tools.tune.tuning import TuneBudget, TuneSpaceError, apply_point, parse_tunables, point_text, search

if TYPE_CHECKING:
    from cuda_llm.graph.stages import StageContext

AS_WRITTEN = "as written"
TUNE_WITHIN = 1.3        # only candidates at most this many times slower than the best are tuned


def reference_ms(best_ms: float | None, round_ms: list[float]) -> float | None:
    """What a candidate must be near to be tuned: the faster of the run's best and this round's fastest."""
    known = [m for m in [best_ms, *round_ms] if m is not None and m > 0]
    return min(known) if known else None


def worth_tuning(ms: float | None, ref_ms: float | None, within: float = TUNE_WITHIN) -> bool:
    """Whether a passing candidate is promising enough to spend GPU time on its tunables: within ``within``
    times the reference (a 10x slower design gains nothing from a block-size sweep). Pure."""
    if ms is None or ref_ms is None:
        return True
    return ms <= within * ref_ms


def compile_points(deps: Any, sources: list[str]) -> list[Any]:
    """Build the points in parallel through the Evaluator seam (static checks and nvcc, the coders' own
    build); a point refused before compiling counts as one that does not compile, with the refusal's words."""
    from concurrent.futures import ThreadPoolExecutor

    def build(source: str) -> Any:
        res = deps.evaluator.build(deps.loaded, source, "tune")
        if res.compile is not None:
            return res.compile
        return CompileResult(ok=False, arch=deps.arch, source_hash=res.source_hash, errors=failure_text.note(res))

    with ThreadPoolExecutor(max_workers=max(1, min(len(sources), os.cpu_count() or 1))) as pool:
        return list(pool.map(build, sources))


class TuneStage:
    """Search the declared tunables of each passing candidate (see the module docstring)."""

    name = "tune"

    def run(self, ctx: "StageContext") -> dict[str, Any]:
        deps = ctx.deps
        lim = Limits(**ctx.state.get("limits", {}))
        update: dict[str, Any] = {}
        n_eval = int(ctx.state.get("evaluations", 0))
        passing = [c for c in ctx.candidates() if c.status == Status.ok.value and c.hash]
        ref = reference_ms((ctx.state.get("best") or {}).get("ms"), [c.ms for c in passing if c.ms is not None])
        for c in ctx.candidates():
            if c.status != Status.ok.value or c.tuned or not c.hash:
                continue
            if not worth_tuning(c.ms, ref):
                assert c.ms is not None and ref is not None
                why = f"not tuned: {c.ms / ref:.2f}x the best {fmt_ms(ref)} ms (tuned only within {TUNE_WITHIN:g}x)"
                ctx.event("tune", candidate=c.id, round=c.round, skipped=why)
                update = ctx.merge(update, ctx.patch(c.id, tuned=why))
                continue
            source = deps.source(c.hash)
            try:
                tunables = parse_tunables(source)
            except TuneSpaceError as exc:
                ctx.event("warning", where="tune", candidate=c.id, error=short(str(exc), 300))
                update = ctx.merge(update, ctx.patch(c.id, tuned=f"not tuned: {short(str(exc), 120)}"))
                continue
            if not tunables:
                continue
            patch, evaluations = self._tune(ctx, c, source, tunables, lim)
            n_eval += evaluations
            update = ctx.merge(update, ctx.patch(c.id, **patch))
        if update:
            update["evaluations"] = n_eval
        return update

    @staticmethod
    def _tune(ctx: "StageContext", c: Any, source: str, tunables: list[Any], lim: Limits) -> tuple[dict[str, Any], int]:
        deps = ctx.deps
        results: dict[str, EvalResult] = {}

        def measure(src: str, point: Any) -> EvalResult:
            pid = f"{c.id}-p{point.index}"
            res = deps.evaluator.evaluate(deps.loaded, src, pid, ctx.work_dir(pid))
            results[point.source_hash] = res
            return res

        budget = TuneBudget(max_evals=lim.tune_evals, max_seconds=lim.tune_seconds, jobs=max(1, os.cpu_count() or 1),
                            seed=c.round * 100 + c.slot)
        outcome = search(source, tunables, compile_batch=lambda srcs: compile_points(deps, srcs), measure=measure,
                         budget=budget, workers=deps.evaluator.parallelism)
        deps.rundir.write_text(f"tuning/{c.id}.json", json.dumps(outcome.model_dump(mode="json"), indent=1))
        ctx.event("tune", candidate=c.id, round=c.round, summary=outcome.summary(), evaluations=outcome.evaluations,
                  invalid=outcome.invalid, space=outcome.space_size, sampler=outcome.sampler,
                  stop_reason=outcome.stop_reason, best=outcome.best.params if outcome.best else None,
                  invalid_points=[p.params for p in outcome.points if p.status == Status.compile_error.value][:10])
        best = outcome.best
        written = outcome.written
        if best is None or written is None or best.source_hash == written.source_hash or best.ms >= (c.ms or float("inf")):
            return {"tuned": short(f"{AS_WRITTEN}: {point_text(written.params if written else {})}")}, outcome.evaluations
        tuned_src = apply_point(source, tunables, best.params)
        h = deps.put_source(tuned_src)
        res = results.get(best.source_hash) or deps.evaluator.stored("eval", h)
        untuned = deps.rundir.read_result(c.id)
        if untuned is not None:
            deps.rundir.write_result(f"{c.id}-untuned", untuned)
        deps.rundir.write_text(f"candidates/{c.id}.tuned.cu", tuned_src)
        patch: dict[str, Any] = {"hash": h, "tuned": short(point_text(best.params)), "ms": best.ms, "pct_sol": best.pct_of_sol,
                                 "note": short(f"tuned {point_text(best.params)}: {fmt_ms(best.ms)} ms "
                                               f"(as written {fmt_ms(c.ms)} ms)")}
        if res is not None:
            deps.rundir.write_result(c.id, res.model_copy(update={"candidate": c.id}))
            if res.timing is not None:
                patch["lo"], patch["hi"] = interval(res.timing)
        return patch, outcome.evaluations


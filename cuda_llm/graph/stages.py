"""Tool stages: the ordered nodes between the coder and the critic, all with one interface.

A stage has a ``name`` and ``run(ctx) -> dict``: it reads the round's candidates through ``ctx`` and
returns a state update, usually ``ctx.patch(cid, ...)`` merged over candidates. The default list
(stage_list.py) is ``[EvaluateStage(), TuneStage(), ProfileStage()]``; pass your own list to ``start_run(..., stages=...)`` to add one
(a sanitizer, a second profiler) without touching the graph code.

A stage can also be a plugin: a package declares it in the ``cuda_llm.stages`` entry-point group (the entry
point's name is the stage's name; its object is the stage class, a factory, or an instance), `cuda-llm
optimize --stage NAME[:POSITION]` adds it, and the run saves its stages so `cuda-llm resume` rebuilds the
same graph (examples/stage_plugin/ is one, docs/graph.md says more).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from cuda_llm.graph.deps import Deps
from cuda_llm.graph.state import Candidate, GraphState, round_cands, short
from cuda_llm.results import EvalResult, Status
from cuda_llm.tools.harness import failure_text
from cuda_llm.graph.selection import interval
from cuda_llm.halts import NO_DEVICE, RunHalted

PASSED = {Status.ok.value, Status.suspect.value}
REJECTED = "rejected"


class StageContext:
    """What a stage sees: the state (read only), the run's services, and helpers to build updates."""

    def __init__(self, state: GraphState, deps: Deps):
        self.state = state
        self.deps = deps

    @property
    def loaded(self) -> Any:
        return self.deps.loaded

    @property
    def rundir(self) -> Any:
        return self.deps.rundir

    def candidates(self) -> list[Candidate]:
        return round_cands(self.state)

    def passed(self) -> list[Candidate]:
        """This round's candidates that compiled and passed every test (and were not rejected)."""
        return [c for c in self.candidates() if c.status in PASSED]

    def source(self, cid: str) -> str:
        c = next(c for c in self.candidates() if c.id == cid)
        return self.deps.source(c.hash)

    def result(self, cid: str) -> EvalResult | None:
        """The evaluation result (None before evaluate ran)."""
        res = self.deps.rundir.read_result(cid)
        if res is None:
            c = next((c for c in self.candidates() if c.id == cid), None)
            if c is not None and c.hash:
                res = self.deps.evaluator.stored("eval", c.hash)
        return res

    def so_path(self, cid: str) -> str | None:
        r = self.result(cid)
        return r.compile.so_path if r is not None and r.compile is not None else None

    def work_dir(self, cid: str) -> Path:
        p = Path(self.deps.rundir.root) / "work" / cid
        p.mkdir(parents=True, exist_ok=True)
        return p

    def event(self, name: str, **fields: Any) -> None:
        self.deps.event(name, **fields)

    @staticmethod
    def patch(cid: str, **fields: Any) -> dict[str, Any]:
        return {"cands": {cid: fields}}

    def reject(self, cid: str, reason: str) -> dict[str, Any]:
        """Take a passing candidate out of the running (it is never selected) and say why."""
        self.event("decision", kind="reject", candidate=cid, reason=short(reason, 300))
        return self.patch(cid, status=REJECTED, note=short(reason))

    @staticmethod
    def merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
        out = dict(a)
        for k, v in b.items():
            if k == "cands":
                cands = {cid: dict(p) for cid, p in out.get("cands", {}).items()}
                for cid, p in v.items():
                    cands[cid] = {**cands.get(cid, {}), **p}
                out["cands"] = cands
            else:
                out[k] = v
        return out


@runtime_checkable
class ToolStage(Protocol):
    name: str

    def run(self, ctx: StageContext) -> dict[str, Any]:
        """Return a state update (``{}`` for none). Must not raise for a bad candidate."""


class EvaluateStage:
    """Compile, validate on every case, time: every candidate not yet evaluated, side by side on the GPU pool's
    GPUs (one after another on one GPU). Results are taken in candidate order, and the feature statistics
    recorded after each, so the outcome does not depend on which GPU finished first."""

    name = "evaluate"

    def run(self, ctx: StageContext) -> dict[str, Any]:
        deps = ctx.deps
        update: dict[str, Any] = {"cands": {}}
        n_eval = int(ctx.state.get("evaluations", 0))
        todo = [c for c in ctx.candidates() if c.status is None and c.hash is not None]
        jobs = [(deps.source(c.hash), c.id, ctx.work_dir(c.id)) for c in todo]
        for c, got in zip(todo, deps.evaluator.evaluate_each(deps.loaded, jobs)):
            res: EvalResult = got.value
            if res.status == Status.no_device:   # the GPU went away: stop unfinished, resumable on a GPU machine

                raise RunHalted(NO_DEVICE, f"no CUDA device to measure {c.id} on",
                                f"run `cuda-llm resume {deps.rundir.run_id}` on a machine with an NVIDIA GPU")
            deps.rundir.write_result(c.id, res)
            n_eval += 1
            fields: dict[str, Any] = {"status": res.status.value}
            if res.timing is not None:
                lo, hi = interval(res.timing)
                fields.update(ms=res.timing.median_ms, lo=lo, hi=hi)
            fields["note"] = res.message and short(res.message) if res.status.passed else failure_text.note(res)
            speedup = None
            if res.timing is not None and c.parent_ms:
                speedup = c.parent_ms / res.timing.median_ms if res.timing.median_ms > 0 else None
            deps.event("evaluation", candidate=c.id, round=c.round, status=res.status.value, cached=not got.fresh,
                       median_ms=fields.get("ms"), interval_ms=[fields.get("lo"), fields.get("hi")],
                       speedup_over_parent=speedup, features=c.features, source_hash=c.hash, note=fields["note"])
            if res.status.passed:   # a failure is recorded at the round's end, once its repairs failed too
                self._record_stats(deps, c, res, speedup)   # a repeated source teaches too; a replay does not
            update["cands"][c.id] = fields
        update["evaluations"] = n_eval
        return update

    @staticmethod
    def _record_stats(deps: Deps, c: Candidate, res: EvalResult, speedup: float | None) -> None:
        """What the candidate teaches (feature_db.credit): credit to the features its code introduced, a
        compliance count for those asked for, pass rates under the coder's model."""
        del speedup   # the credit module measures the step itself (share of the headroom closed)
        if deps.stats is None or not c.hash:
            return
        try:
            credit = _credit(deps, c, res)
            if not credit.credited and not credit.asked:
                return
            deps.stats.record(arch=deps.arch, category=deps.task.family, features=credit.credited,
                              compiled=res.compile is not None and res.compile.ok, passed=res.status == Status.ok,
                              speedup_over_parent=credit.speedup_over_parent, reward=credit.reward_per_feature,
                              asked=credit.asked, complied=credit.complied, model=coder_model(deps),
                              key=f"{deps.rundir.run_id}/{c.id}/{c.hash}")
            deps.event("credit", candidate=c.id, credited=credit.credited, absent=credit.absent,
                       headroom_closed=credit.headroom_closed, reward_per_feature=credit.reward_per_feature)
        except Exception as exc:  # noqa: BLE001 - learning is secondary to the run
            deps.event("warning", where="feature_stats", error=short(str(exc), 300))


def _credit(deps: Deps, c: Candidate, res: EvalResult) -> Any:
    """The credit of one evaluated candidate against its parent (detected the same way for both)."""
    # local: `cuda-llm --help` loads this module; the feature database is needed only in a run
    from cuda_llm.feature_db.credit import StepOutcome, credit_step, detect_pair

    def kernels(r: EvalResult | None) -> list | None:
        return list(r.compile.kernels) if r is not None and r.compile is not None and r.compile.ok else None

    def sass(r: EvalResult | None) -> Any:
        return r.compile.sass if r is not None and r.compile is not None and r.compile.ok else None

    parent_res = deps.rundir.read_result(c.parent or "baseline")
    found, parent_found = detect_pair(deps.source(c.hash), kernels(res), _parent_source(deps, c), kernels(parent_res),
                                      deps.catalogue or None, sass=sass(res), parent_sass=sass(parent_res))
    timing = res.timing
    outcome = StepOutcome(compiled=res.compile is not None and res.compile.ok, passed=res.status == Status.ok,
                          ms=timing.median_ms if timing is not None else None, parent_ms=c.parent_ms,
                          sol_ms=timing.sol_ms if timing is not None else None)
    return credit_step(c.features, found, parent_found, outcome)


def coder_model(deps: Deps) -> str:
    """The coder's model name, the key of the learned pass rates ('' when unknown)."""
    coder = (deps.models or {}).get("coder")
    if coder is None:
        return ""
    label = getattr(coder, "model_label", None) or getattr(coder, "model_name", None) or getattr(coder, "model", None)
    return str(label or "")


def _parent_source(deps: Deps, c: Candidate) -> str | None:
    """The parent's source: the naive baseline, or the candidate file kept in the run directory."""
    # local: `cuda-llm --help` loads this module; the loop's stages are needed only in a run
    from cuda_llm.graph.evidence import candidate_source

    return candidate_source(deps, c.parent)


class ProfileStage:
    """Nsight Compute on the round's fastest passing candidate, then the roofline and the rule-based
    diagnosis, all through the Evaluator seam; and post-mortems of the round's regressions."""

    name = "profile"

    def run(self, ctx: StageContext) -> dict[str, Any]:
        # local: `cuda-llm --help` loads this module; the loop's stages are needed only in a run
        from cuda_llm.graph.review import profile_and_diagnose
        # local: `cuda-llm --help` loads this module; the profiler is needed only in a run
        from cuda_llm.tools.profile.profile_models import ProfileResult

        deps = ctx.deps
        passing = [c for c in ctx.passed() if c.status == Status.ok.value and c.ms is not None]
        update: dict[str, Any] = {}
        records: dict[str, dict[str, Any]] = {}
        if passing:
            c = min(passing, key=lambda x: x.ms)
            res = ctx.result(c.id)
            if res is not None:
                record = records[c.id] = profile_and_diagnose(deps, c.id, deps.source(c.hash), res)
                summary = ProfileResult.model_validate(record["profile"]).summary()
                update = ctx.patch(c.id, profile=short(summary),
                                   bottleneck=str(record["diagnosis"].get("bottleneck", "")))
        return ctx.merge(update, self._postmortems(ctx, records))

    @staticmethod
    def _postmortems(ctx: StageContext, records: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """Post-mortems of this round's regressions and benchmark-only failures (graph/postmortem.py): the
        worst ``MAX_PER_ROUND`` profiled like the fastest, every one explained in postmortems/<cid>.json."""
        # local: `cuda-llm --help` loads this module; the loop's stages are needed only in a run
        from cuda_llm.graph import postmortem as pm
        from cuda_llm.graph.review import profile_and_diagnose

        deps = ctx.deps
        todo = []
        for c in ctx.candidates():
            if c.cause or c.status is None:
                continue
            res = ctx.result(c.id)
            outcome = pm.outcome_of(c, res)
            if outcome is not None:
                ratio = c.ms / c.parent_ms if c.ms and c.parent_ms else None
                todo.append((ratio or 0.0, c, res, outcome))
        update: dict[str, Any] = {}
        profiled = 0
        for ratio, c, res, outcome in sorted(todo, key=lambda t: -t[0]):
            record = records.get(c.id)
            if record is None and profiled < pm.MAX_PER_ROUND and pm.worth_profiling(outcome, res, ratio or None):
                try:
                    record = profile_and_diagnose(deps, c.id, deps.source(c.hash), res)
                    profiled += 1
                except Exception as exc:  # noqa: BLE001 - an explanation is a bonus: the round goes on
                    ctx.event("warning", where="postmortem", candidate=c.id, error=short(str(exc), 300))
            diag = (record or {}).get("diagnosis") or {}
            failing = outcome in (pm.BENCHMARK_FAILURE, pm.FAILED) and res is not None
            cause = pm.cause_text(outcome, parent=c.parent, ratio=ratio or None, diagnosis=diag,
                                  failure=failure_text.note(res) if failing else (c.note if outcome == pm.FAILED else ""))
            plan, changes = _plan_and_changes(deps, c, res)
            done = pm.PostMortem(candidate=c.id, round=c.round, parent=c.parent, features=c.features, outcome=outcome,
                                 status=c.status or "", ms=c.ms, parent_ms=c.parent_ms, ratio=ratio or None,
                                 bottleneck=str(diag.get("bottleneck") or ""), profiled=record is not None, cause=cause,
                                 plan=plan, changes=changes)
            pm.write(deps.rundir, done)
            ctx.event("postmortem", candidate=c.id, round=c.round, parent=c.parent, outcome=outcome,
                      ratio=done.ratio, profiled=done.profiled, cause=cause, plan=plan, changes=changes)
            update = ctx.merge(update, ctx.patch(c.id, cause=done.text()))
        return update


def _plan_and_changes(deps: Any, c: Any, res: Any) -> tuple[str, list[str]]:
    """The coder's plan sentence (answers/coder-<cid>.md) and what its build changed against the parent's
    (tools/compiler/build_summary.build_diff); empty where a file is missing."""
    # local: `cuda-llm --help` loads this module; the loop's stages are needed only in a run
    from cuda_llm.graph import evidence
    from cuda_llm.graph import postmortem as pm
    from cuda_llm.tools.compiler.build_summary import BuildView, build_diff

    plan = ""
    answer = Path(deps.rundir.root) / "answers" / f"coder-{c.id}.md"
    try:
        plan = pm.plan_sentence(answer.read_text()) if answer.is_file() else ""
    except OSError:
        plan = ""
    try:
        parent_res = deps.rundir.read_result(c.parent) if c.parent else None
        parent_src = evidence.candidate_source(deps, c.parent) or ""
        child_src = evidence.candidate_source(deps, c.id) or (deps.source(c.hash) if c.hash else "")
        changes = build_diff(BuildView.of(parent_res.compile if parent_res else None, parent_src),
                             BuildView.of(res.compile if res is not None else None, child_src))
    except Exception:  # noqa: BLE001 - a missing or old record: the post-mortem says less
        changes = []
    return plan, changes

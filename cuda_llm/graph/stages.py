"""Tool stages: the ordered nodes between the coder and the critic, all with one interface.

A stage has a ``name`` and ``run(ctx) -> dict``: it reads the round's candidates through ``ctx`` and
returns a state update, usually ``ctx.patch(cid, ...)`` merged over candidates. The default list is
``[EvaluateStage(), TuneStage(), ProfileStage()]``; pass your own list to ``start_run(..., stages=...)`` to add one
(a sanitizer, a second profiler) without touching the graph code.

A stage can also be a plugin: a package declares it in the ``cuda_llm.stages`` entry-point group (the entry
point's name is the stage's name; its object is the stage class, a factory, or an instance), `cuda-llm
optimize --stage NAME[:POSITION]` adds it, and the run saves its stages so `cuda-llm resume` rebuilds the
same graph (examples/stage_plugin/ is one, docs/graph.md says more).
"""
from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import Any, Protocol, Sequence, runtime_checkable

from cuda_llm.graph.deps import Deps
from cuda_llm.graph.state import Candidate, GraphState, round_cands, short
from cuda_llm.results import EvalResult, Status
from cuda_llm.tools import failure_text

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
                from cuda_llm.graph.stop_rules import NO_DEVICE, RunHalted

                raise RunHalted(NO_DEVICE, f"no CUDA device to measure {c.id} on",
                                f"run `cuda-llm resume {deps.rundir.run_id}` on a machine with an NVIDIA GPU")
            deps.rundir.write_result(c.id, res)
            n_eval += 1
            fields: dict[str, Any] = {"status": res.status.value}
            if res.timing is not None:
                from cuda_llm.graph.selection import interval

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
    from cuda_llm.graph.evidence import candidate_source

    return candidate_source(deps, c.parent)


class ProfileStage:
    """Nsight Compute on the round's fastest passing candidate, then the roofline and the rule-based
    diagnosis, all through the Evaluator seam; and post-mortems of the round's regressions."""

    name = "profile"

    def run(self, ctx: StageContext) -> dict[str, Any]:
        from cuda_llm.graph.review import profile_and_diagnose
        from cuda_llm.tools.profile_models import ProfileResult

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
            if record is None and profiled < pm.MAX_PER_ROUND and pm.worth_profiling(outcome, res):
                try:
                    record = profile_and_diagnose(deps, c.id, deps.source(c.hash), res)
                    profiled += 1
                except Exception as exc:  # noqa: BLE001 - an explanation is a bonus: the round goes on
                    ctx.event("warning", where="postmortem", candidate=c.id, error=short(str(exc), 300))
            diag = (record or {}).get("diagnosis") or {}
            cause = pm.cause_text(outcome, parent=c.parent, ratio=ratio or None, diagnosis=diag,
                                  failure=failure_text.note(res) if outcome == pm.BENCHMARK_FAILURE and res else "")
            done = pm.PostMortem(candidate=c.id, round=c.round, parent=c.parent, features=c.features, outcome=outcome,
                                 status=c.status or "", ms=c.ms, parent_ms=c.parent_ms, ratio=ratio or None,
                                 bottleneck=str(diag.get("bottleneck") or ""), profiled=record is not None, cause=cause)
            pm.write(deps.rundir, done)
            ctx.event("postmortem", candidate=c.id, round=c.round, parent=c.parent, outcome=outcome,
                      ratio=done.ratio, profiled=done.profiled, cause=cause)
            update = ctx.merge(update, ctx.patch(c.id, cause=cause))
        return update


def applicable_feature_ids(deps: Deps) -> set[str] | None:
    """The catalogue features this task may use on this arch (its family, bound, tolerance, dtypes): the
    only ones the diagnosis may suggest."""
    if not deps.catalogue:
        return None
    try:
        from cuda_llm.feature_db.bandit import applicable, task_filters

        return {f.id for f in applicable(deps.catalogue, arch=deps.arch, **task_filters(deps.task))}
    except Exception:  # noqa: BLE001 - without the filter the diagnosis still speaks
        return None


def default_stages() -> list[ToolStage]:
    """A fresh list of the built-in stages, in order (insert your own where it belongs)."""
    from cuda_llm.graph.tune_stage import TuneStage

    return [EvaluateStage(), TuneStage(), ProfileStage()]


# ------------------------------------------------------------------------------------------ plugins
ENTRY_POINT_GROUP = "cuda_llm.stages"


class StageError(ValueError):
    """A plugin stage that cannot be named, found, imported or placed (one line, what to do)."""


def parse_stage_spec(text: str) -> tuple[str, str | None]:
    """'NAME' or 'NAME:POSITION' -> (name, position): POSITION is an index in the stage list (0 is first) or the
    name of the stage it follows; none puts the stage last, just before selection."""
    name, _, position = str(text).strip().partition(":")
    if not name.isidentifier():
        raise StageError(f"{text!r}: write a stage as NAME or NAME:POSITION (e.g. register_budget:evaluate)")
    if _ and not position:
        raise StageError(f"{text!r}: after ':' give the stage it follows or an index (e.g. {name}:evaluate)")
    return name, position or None


def installed_stages() -> dict[str, importlib.metadata.EntryPoint]:
    """The stages installed packages declare, by name (entry points are read, nothing is imported)."""
    found: dict[str, importlib.metadata.EntryPoint] = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep)
    return found


def plugin_origin(ep: importlib.metadata.EntryPoint) -> str:
    """'module:object from distribution version', for messages and `cuda-llm stages`."""
    dist = getattr(ep, "dist", None)
    return f"{ep.value} from {dist.name} {dist.version}" if dist is not None else ep.value


def load_plugin(name: str) -> ToolStage:
    """The stage an installed package declares under ``name`` (its class or factory called with no arguments)."""
    ep = installed_stages().get(name)
    if ep is None:
        have = ", ".join(sorted(installed_stages())) or "none"
        raise StageError(f"no tool stage named {name!r} is installed (installed: {have}; `cuda-llm stages` lists "
                         f"them, a package declares one in the {ENTRY_POINT_GROUP!r} entry-point group)")
    try:
        obj = ep.load()
        stage = obj() if isinstance(obj, type) or not hasattr(obj, "run") else obj
    except Exception as exc:  # noqa: BLE001 - any failure of someone else's import is reported the same way
        raise StageError(f"tool stage {name!r} ({plugin_origin(ep)}) cannot be imported: "
                         f"{type(exc).__name__}: {short(str(exc), 200)}") from exc
    if getattr(stage, "name", None) != name or not callable(getattr(stage, "run", None)):
        raise StageError(f"tool stage {name!r} ({plugin_origin(ep)}) must give an object with name = {name!r} and a "
                         f"run(ctx) method; it gave {type(stage).__name__} named {getattr(stage, 'name', None)!r}")
    return stage


def _index(position: str | None, stages: Sequence[ToolStage], name: str) -> int:
    names = [s.name for s in stages]
    if position is None:
        return len(stages)
    if position.lstrip("-").isdigit():
        i = int(position)
        if not 0 <= i <= len(stages):
            raise StageError(f"stage {name!r}: position {i} is outside the stage list 0..{len(stages)} "
                             f"({', '.join(names)})")
        return i
    if position not in names:
        raise StageError(f"stage {name!r}: no stage {position!r} to follow; the stages are {', '.join(names)}")
    return names.index(position) + 1


def with_plugins(specs: Sequence[str], base: Sequence[ToolStage] | None = None) -> list[ToolStage]:
    """``base`` (the built-in stages by default) with each plugin stage of ``specs`` ('NAME[:POSITION]') put in
    its place, in the order given."""
    stages = list(base) if base is not None else default_stages()
    for text in specs:
        name, position = parse_stage_spec(text)
        if name in {s.name for s in stages}:
            raise StageError(f"stage {name!r} is already in the list ({', '.join(s.name for s in stages)})")
        stage = load_plugin(name)
        stages.insert(_index(position, stages, name), stage)
    return stages


def restore_stages(saved_names: Sequence[str] | None, specs: Sequence[str],
                   given: Sequence[ToolStage] | None = None, run_id: str = "RUN") -> list[ToolStage]:
    """The stages a resumed run goes on with: ``given`` (the Python API's list) or the built-in ones with the
    plugins it was started with; refused when a stage it ran before is missing, so no stage is dropped
    silently."""
    try:
        stages = list(given) if given is not None else with_plugins(specs)
    except StageError as exc:
        raise StageError(f"run {run_id} was started with plugin stage(s) {', '.join(specs)}: {exc}; install it "
                         f"again to resume") from None
    missing = [n for n in saved_names or [] if n not in {s.name for s in stages}]
    if missing:
        raise StageError(f"run {run_id} was started with tool stage(s) {', '.join(missing)}, which are neither "
                         f"installed plugins nor given (resume_run(stages=...)): resuming would drop them")
    return stages


def load_profile(rundir: Any, cid: str) -> dict[str, Any] | None:
    from cuda_llm.runs.rundir import read_json

    return read_json(Path(rundir.root) / "profiles" / f"{cid}.json")

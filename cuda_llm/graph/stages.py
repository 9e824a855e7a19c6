"""Tool stages: the ordered nodes between the coder and the critic, all with one interface.

A stage has a ``name`` and ``run(ctx) -> dict``: it reads the round's candidates through ``ctx`` and
returns a state update, usually ``ctx.patch(cid, ...)`` merged over candidates. The default list is
``[EvaluateStage(), TuneStage(), ProfileStage()]``; pass your own list to ``start_run(..., stages=...)`` to add one
(a sanitizer, a second profiler) without touching the graph code:

    class Sanitizer:
        name = "sanitize"
        def run(self, ctx):
            update = {}
            for c in ctx.passed():
                log = run_compute_sanitizer(ctx.so_path(c.id))
                if "ERROR SUMMARY: 0 errors" not in log:
                    update = ctx.merge(update, ctx.reject(c.id, "compute-sanitizer: " + log[-200:]))
            return update

    stages = default_stages()
    stages.insert(1, Sanitizer())        # after evaluate, before profile
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

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
    """Compile, validate on every case, time: every candidate not yet evaluated, one after another
    (GPU work is serialized). Feature statistics are recorded after each new measurement."""

    name = "evaluate"

    def run(self, ctx: StageContext) -> dict[str, Any]:
        deps = ctx.deps
        update: dict[str, Any] = {"cands": {}}
        n_eval = int(ctx.state.get("evaluations", 0))
        for c in ctx.candidates():
            if c.status is not None or c.hash is None:
                continue
            got = deps.evaluator.evaluate(deps.loaded, deps.source(c.hash), c.id, ctx.work_dir(c.id))
            res: EvalResult = got.value
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
            self._record_stats(deps, c, res, speedup)   # a repeated source teaches too; a replay does not
            update["cands"][c.id] = fields
        update["evaluations"] = n_eval
        return update

    @staticmethod
    def _record_stats(deps: Deps, c: Candidate, res: EvalResult, speedup: float | None) -> None:
        if deps.stats is None:
            return
        compiled = res.compile is not None and res.compile.ok
        try:
            credited = _credited_features(deps, c, res)
            if not credited:
                return
            deps.stats.record(arch=deps.arch, category=deps.task.family, features=credited, compiled=compiled,
                              passed=res.status == Status.ok,
                              speedup_over_parent=speedup if speedup and math.isfinite(speedup) and speedup > 0 else None,
                              key=f"{deps.rundir.run_id}/{c.id}/{c.hash}")
        except Exception as exc:  # noqa: BLE001 - learning is secondary to the run
            deps.event("warning", where="feature_stats", error=short(str(exc), 300))


def _credited_features(deps: Deps, c: Candidate, res: EvalResult) -> list[str]:
    """The features asked for, plus those detected in the source that the parent did not already use."""
    from cuda_llm.feature_db.detect import detect_features
    from cuda_llm.feature_db.stats import features_to_credit

    kernels = res.compile.kernels if res.compile is not None else []
    detected = sorted(detect_features(deps.source(c.hash), kernels)) if c.hash else []
    parent_source = _parent_source(deps, c)
    parent_detected = sorted(detect_features(parent_source)) if parent_source else []
    return features_to_credit(c.features, detected, parent_detected)


def _parent_source(deps: Deps, c: Candidate) -> str | None:
    """The parent's source: the naive baseline, or the candidate file kept in the run directory."""
    try:
        if not c.parent or c.parent == "baseline":
            return Path(deps.loaded.task.baseline_path).read_text()
        path = Path(deps.rundir.root) / "candidates" / f"{c.parent}.cu"
        return path.read_text() if path.is_file() else None
    except OSError:
        return None


class ProfileStage:
    """Nsight Compute on the round's fastest passing candidate, then the rule-based diagnosis."""

    name = "profile"

    def run(self, ctx: StageContext) -> dict[str, Any]:
        deps = ctx.deps
        passing = [c for c in ctx.passed() if c.status == Status.ok.value and c.ms is not None]
        if not passing:
            return {}
        c = min(passing, key=lambda x: x.ms)
        res = ctx.result(c.id)
        if res is None:
            return {}
        got = deps.evaluator.profile(deps.loaded, deps.source(c.hash), c.id, ctx.work_dir(c.id), res)
        prof = got.value
        roof = None
        if deps.device is not None and res.timing is not None:
            try:
                from cuda_llm.tools.roofline import roofline_point

                roof = roofline_point(deps.task, res.timing.sizes, res.timing.median_ms, deps.device)
            except Exception:  # noqa: BLE001
                roof = None
        from cuda_llm.tools.diagnosis import diagnose

        diag = diagnose(prof, roof, res.compile)
        deps.rundir.write_text(f"profiles/{c.id}.json", json.dumps({
            "profile": prof.model_dump(mode="json"), "roofline": roof.model_dump(mode="json") if roof else None,
            "diagnosis": diag.model_dump(mode="json"), "candidate": c.id}, indent=1))
        summary = prof.summary()
        deps.event("profile", candidate=c.id, available=prof.available, summary=short(summary, 300),
                   bottleneck=diag.bottleneck, suggested=diag.suggested_features, cached=not got.fresh)
        return ctx.patch(c.id, profile=short(summary), bottleneck=str(diag.bottleneck))


def default_stages() -> list[ToolStage]:
    """A fresh list of the built-in stages, in order (insert your own where it belongs)."""
    from cuda_llm.graph.tune_stage import TuneStage

    return [EvaluateStage(), TuneStage(), ProfileStage()]


def load_profile(rundir: Any, cid: str) -> dict[str, Any] | None:
    from cuda_llm.runs.rundir import read_json

    return read_json(Path(rundir.root) / "profiles" / f"{cid}.json")

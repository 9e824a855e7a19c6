"""Credit follows the detectors: re-detect the features of every stored candidate and rebuild the learned
statistics, after the detectors changed (``cuda-llm features --recredit [RUNS_DIR]``).

The statistics' event log keys each candidate as ``<run id>/<candidate id>/<source hash>``; the run
directory keeps its source (candidates/<id>.cu), its result with the build facts (ptxas report, SASS
summary), its parent (the trace's ``candidate`` event) and the parent's result. From those the credit is
computed again exactly as the graph computes it (feature_db.credit: new over the parent, the share of
headroom closed split among the new features), keeping what the planner asked for, the task family, the
architecture and the coder model of the stored event. Candidates of those runs that taught nothing under
the old detectors (nothing credited, nothing asked: never recorded) are added when they now credit
something. Events whose run directory is gone are kept as they are. The whole log is then replayed into
the aggregates in one transaction (StatsStore.rebuild): a failure leaves the file as it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_llm.feature_db.detect import detect_features
from cuda_llm.runs.rundir import RunDir
from cuda_llm.runs.run_info import run_info
from cuda_llm.runs.trace import read_trace
from cuda_llm.tasks import load_task
from cuda_llm.feature_db.credit import StepOutcome, credit_step, detect_pair
from cuda_llm.feature_db.stats import StatsStore, StoredEvent
from cuda_llm.results import EvalResult, Status

BASELINE = "baseline"


@dataclass
class RecreditReport:
    """What a re-credit changed."""

    events: int = 0                 # events in the rebuilt log
    redetected: int = 0             # events whose candidate was found and detected again
    added: int = 0                  # candidates never recorded that now credit something
    kept: int = 0                   # events whose run directory or source is gone: kept as they were
    changed: list[str] = field(default_factory=list)     # keys whose credited features changed
    gained: dict[str, int] = field(default_factory=dict)  # feature -> tries gained (negative: lost)

    def summary(self) -> str:
        moves = ", ".join(f"{f} {n:+d}" for f, n in sorted(self.gained.items(), key=lambda kv: (-abs(kv[1]), kv[0])) if n)
        return (f"{self.events} events: {self.redetected} detected again ({len(self.changed)} changed), "
                f"{self.added} added, {self.kept} kept as they were (run directory or source gone)"
                + (f"; tries by feature: {moves}" if moves else ""))


@dataclass
class _Run:
    root: Path
    trace: list[dict[str, Any]]
    baseline_source: str | None

    def candidate_event(self, cid: str) -> dict[str, Any]:
        for e in self.trace:
            if e.get("event") == "candidate" and e.get("candidate") == cid and e.get("source_hash"):
                return e
        return {}

    def source(self, cid: str) -> str | None:
        if cid == BASELINE:
            return self.baseline_source
        path = self.root / "candidates" / f"{cid}.cu"
        return path.read_text() if path.is_file() else None

    def result(self, cid: str) -> EvalResult | None:
        path = self.root / "candidates" / f"{cid}.json"
        try:
            return EvalResult.model_validate_json(path.read_text())
        except (OSError, ValueError):
            return None


def _open_run(runs_dir: Path, run_id: str) -> _Run | None:
    root = runs_dir / run_id
    if not root.is_dir():
        return None
    baseline = None
    try:
        import json

        cfg = json.loads((root / "config.json").read_text())
        baseline = Path(load_task(cfg["task"]).task.baseline_path).read_text()
    except Exception:  # noqa: BLE001 - a run whose task is gone: its candidates' parents may still be candidates
        baseline = None
    return _Run(root=root, trace=read_trace(root / "trace.jsonl"), baseline_source=baseline)


def _build(r: EvalResult | None) -> tuple[list | None, Any]:
    if r is None or r.compile is None or not r.compile.ok:
        return None, None
    return list(r.compile.kernels), r.compile.sass


def _median(r: EvalResult | None) -> float | None:
    return r.timing.median_ms if r is not None and r.timing is not None else None


def credit_again(run: _Run, cid: str, asked: Sequence[str], features=None):
    """The credit of one stored candidate under today's detectors, or None when its source is gone."""
    source = run.source(cid)
    if source is None:
        return None
    res = run.result(cid)
    parent = run.candidate_event(cid).get("parent") or BASELINE
    parent_res = run.result(parent)
    kernels, sass = _build(res)
    parent_kernels, parent_sass = _build(parent_res)
    found, parent_found = detect_pair(source, kernels, run.source(parent), parent_kernels, features, sass=sass,
                                      parent_sass=parent_sass)
    timing = res.timing if res is not None else None
    outcome = StepOutcome(compiled=res is not None and res.compile is not None and res.compile.ok,
                          passed=res is not None and res.status == Status.ok,
                          ms=timing.median_ms if timing is not None else None, parent_ms=_median(parent_res),
                          sol_ms=timing.sol_ms if timing is not None else None)
    return credit_step(asked, found, parent_found, outcome), outcome


def recredit(store: StatsStore, runs_dir: Path, features=None) -> RecreditReport:
    """Detect again every candidate the statistics were learned from and rebuild them (see the module doc)."""
    runs_dir = Path(runs_dir)
    report = RecreditReport()
    runs: dict[str, _Run | None] = {}
    out: list[StoredEvent] = []
    seen: set[str] = set()
    template: dict[str, StoredEvent] = {}       # run id -> one of its events (arch, family, model)
    for ev in store.events():
        parts = (ev.key or "").split("/")
        if len(parts) != 3:
            out.append(ev)
            report.kept += 1
            continue
        run_id, cid, _hash = parts
        if run_id not in runs:
            runs[run_id] = _open_run(runs_dir, run_id)
        run = runs[run_id]
        again = credit_again(run, cid, ev.asked, features) if run is not None else None
        if again is None:
            out.append(ev)
            report.kept += 1
            continue
        credit, outcome = again
        new = ev.model_copy(update={
            "features": credit.credited, "compiled": outcome.compiled, "passed": outcome.passed,
            "speedup": credit.speedup_over_parent if outcome.passed else None,
            "reward": credit.reward_per_feature if outcome.passed else None, "complied": credit.complied})
        if sorted(new.features) != sorted(ev.features):
            report.changed.append(ev.key or "")
        for f in set(ev.features) | set(new.features):
            report.gained[f] = report.gained.get(f, 0) + (f in new.features) - (f in ev.features)
        out.append(new)
        seen.add(ev.key or "")
        template.setdefault(run_id, ev)
        report.redetected += 1
    for run_id, ev0 in template.items():
        run = runs[run_id]
        assert run is not None
        for e in run.trace:
            if e.get("event") != "candidate" or not e.get("source_hash"):
                continue
            key = f"{run_id}/{e['candidate']}/{e['source_hash']}"
            res = run.result(e["candidate"])
            if key in seen or res is None or not res.status.passed:
                continue     # failures of the round are recorded by the graph only once their repairs failed
            again = credit_again(run, e["candidate"], e.get("features") or [], features)
            if again is None or not again[0].credited:
                continue
            credit, outcome = again
            seen.add(key)
            out.append(StoredEvent(at=ev0.at, arch=ev0.arch, category=ev0.category, features=credit.credited,
                                   compiled=outcome.compiled, passed=outcome.passed,
                                   speedup=credit.speedup_over_parent if outcome.passed else None, key=key,
                                   model=ev0.model, reward=credit.reward_per_feature if outcome.passed else None,
                                   asked=credit.asked, complied=credit.complied))
            for f in credit.credited:
                report.gained[f] = report.gained.get(f, 0) + 1
            report.added += 1
    report.events = store.rebuild(out)
    return report


@dataclass
class LineageStep:
    """One kernel on the way from the baseline to a run's best, and what it was credited with."""

    candidate: str
    parent: str
    credited: list[str]             # as recorded when it was evaluated (the trace's credit event)
    headroom_closed: float | None


@dataclass
class BestCredit:
    """The features a run's best kernel carries: what was credited step by step, and what today's detectors
    find in it."""

    run_id: str
    best: str | None
    best_ms: float | None
    lineage: list[LineageStep]
    detected_now: list[str]

    @property
    def credited(self) -> list[str]:
        return sorted({f for s in self.lineage for f in s.credited})


def best_credit(runs_dir: Path, run_id: str, features=None) -> BestCredit:
    """The credit of a run's best kernel along its lineage (RunNotFoundError when there is no such run)."""
    rundir = RunDir.open(run_id, Path(runs_dir))
    info = run_info(rundir)
    run = _open_run(Path(rundir.root).parent, rundir.run_id)
    assert run is not None
    credits = {e.get("candidate"): e for e in run.trace if e.get("event") == "credit"}
    lineage: list[LineageStep] = []
    cid, seen = info.best_id, set()
    while cid and cid != BASELINE and cid not in seen:
        seen.add(cid)
        parent = run.candidate_event(cid).get("parent") or BASELINE
        c = credits.get(cid, {})
        lineage.append(LineageStep(candidate=cid, parent=parent, credited=list(c.get("credited") or []),
                                   headroom_closed=c.get("headroom_closed")))
        cid = parent
    now: list[str] = []
    if info.best_id:
        source = run.source(info.best_id)
        if source is not None:
            kernels, sass = _build(run.result(info.best_id))
            now = sorted(detect_features(source, kernels or [], features, sass=sass))
    return BestCredit(run_id=rundir.run_id, best=info.best_id, best_ms=info.best_ms, lineage=list(reversed(lineage)),
                      detected_now=now)

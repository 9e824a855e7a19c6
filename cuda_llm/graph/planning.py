"""Planning a round: what the planner is offered, the plan by the planner or by the bandit (the ``rules``
planner, and the fallback when the planner's answer is unusable), and the round's coder jobs.

The planner may pick any feature that can help the parent: it applies to the task (family, bound,
tolerance, dtypes, GPU) and to the parent (feature_db/offers.toml: a dependent launch for PDL, a long
reduction over few outputs for split-K, ...), and the parent does not use it yet unless it is named as a
refinement. Each is shown with its posterior mean (what the statistics expect, failures counted) and its
number of tries, never a random draw; the features the critic and the diagnosis recommend come first,
then the family's untried known wins. A feature set that failed or regressed on a parent is not given to
that parent again. The last slot of a round (``Limits.free_slots``) is free: its coder gets the evidence and
no assigned features, and what it used is detected and credited afterwards. The planner's ideas are kept
whole in rounds/r<N>/plan.json, not in the state: every coder (and a repair of its candidate) reads its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from cuda_llm.graph import evidence
from cuda_llm.graph.state import Candidate, candidate_id, short
from cuda_llm.runs.rundir import read_json
from cuda_llm.agents.planner import OfferedFeature
from cuda_llm.feature_db.bandit import assign_features
from cuda_llm.feature_db.detect import detect_features
from cuda_llm.feature_db.offers import (
    REGRESSION, lineage_features, not_offered, parent_facts as facts_of, ranked_offer, refinement_of,
    regressed_features, untried_wins, why_not,
)
from cuda_llm.graph.stages import coder_model
from cuda_llm.tools.profile.profile_models import ProfileResult

BANDIT_OFFER = 10        # the bandit's own assignment draws from this many Thompson-ranked features


def recommendations(deps: Any, parent_id: str) -> dict[str, list[str]]:
    """feature id -> who recommends it now: the critique and the diagnosis of the parent."""
    out: dict[str, list[str]] = {}
    crit = evidence.load_critique(deps, parent_id)
    if crit is not None:
        for f in crit.next_features:
            out.setdefault(f, []).append("the critic" if crit.by == "critic" else "the rules")
    diag = evidence.load_profile(deps, parent_id).get("diagnosis") or {}
    for f in diag.get("suggested_features") or []:
        if "the diagnosis" not in out.setdefault(f, []):
            out[f].append("the diagnosis")
    return out


def _stats(deps: Any) -> Any:
    return deps.stats if deps.stats is not None else []


# ---------------------------------------------------------------- the parent's facts and failed ideas
def run_candidates(deps: Any) -> list[dict[str, Any]]:
    """Every candidate record of the rounds written so far (rounds/r<N>/candidates.json), oldest first."""
    out: list[dict[str, Any]] = []
    root = Path(deps.rundir.root) / "rounds"
    rounds = sorted((int(p.name[1:]) for p in root.glob("r*") if p.name[1:].isdigit()), key=int) \
        if root.is_dir() else []
    for r in rounds:
        out += read_json(root / f"r{r}" / "candidates.json") or []
    return out


def parent_facts(deps: Any, parent_id: str) -> Any:
    """What decides which features can help ``parent_id`` (feature_db.offers): its source, its kernels per
    solve() (the stored profile's count, else the source's launch sites), the features it uses (detected, or
    assigned to it or an ancestor) and the features that regressed or failed on it."""
    pid = parent_id or evidence.BASELINE
    history = run_candidates(deps)
    passed = tuple(str(s) for s in evidence.PASSED)
    source = evidence.candidate_source(deps, pid) or ""
    res = deps.rundir.read_result(pid)
    kernels = list(res.compile.kernels) if res is not None and res.compile is not None else []
    n_kernels = None
    rec = evidence.load_profile(deps, pid).get("profile")
    if rec:
        try:
            prof = ProfileResult.model_validate(rec)
            n_kernels = sum(k.launches for k in prof.kernels) if prof.available and prof.kernels else None
        except ValueError:
            n_kernels = None
    try:
        detected = detect_features(source, kernels, deps.catalogue or None) if source else set()
    except Exception as exc:  # noqa: BLE001 - a detector problem must not stop the plan
        deps.event("warning", where="parent_facts", error=short(str(exc), 300))
        detected = set()
    try:
        sm = getattr(deps.device, "sm_count", None)
    except Exception:  # noqa: BLE001 - no evaluator yet: the default GPU size
        sm = None
    return facts_of(deps.task, source, n_kernels=n_kernels, detected=detected,
                    shared_bytes=max((k.shared_bytes for k in kernels), default=0), sm_count=sm or None,
                    lineage=lineage_features(history, pid), regressed=regressed_features(history, pid, passed))


def failed_ideas(cands: Iterable[Any]) -> dict[str, set[frozenset[str]]]:
    """parent id -> the feature sets that failed on it (every try of the idea, repairs included, failed)
    or regressed (passed but REGRESSION x slower than the parent). ``cands``: Candidate records (or dicts)
    with parent, features, status, ms and parent_ms. A free slot (no features) is no idea to block. Pure."""
    outcome: dict[tuple[str, frozenset[str]], bool] = {}     # (parent, set) -> whether any try was good
    for c in cands:
        c = c if isinstance(c, Candidate) else Candidate.model_validate(c)
        if not c.features or c.status is None or c.status == "no_code":
            continue
        key = (c.parent or evidence.BASELINE, frozenset(c.features))
        if c.status in evidence.PASSED and c.ms is not None:
            good = not (c.parent_ms and c.ms > REGRESSION * c.parent_ms)
        else:
            good = False
        outcome[key] = outcome.get(key, False) or good
    out: dict[str, set[frozenset[str]]] = {}
    for (parent, feats), good in outcome.items():
        if not good:
            out.setdefault(parent, set()).add(feats)
    return out


def run_failed_ideas(deps: Any, before_round: int) -> dict[str, set[frozenset[str]]]:
    """failed_ideas over every candidate of the rounds before ``before_round`` (rounds/r<N>/candidates.json)."""
    cands: list[Any] = []
    for r in range(1, before_round):
        cands += read_json(Path(deps.rundir.root) / "rounds" / f"r{r}" / "candidates.json") or []
    return failed_ideas(cands)


# ---------------------------------------------------------------- what is offered
def free_slots(n: int, free: int, round_: int) -> set[int]:
    """The slots of a round whose coders get no assigned features: the last ``free`` of them, always
    leaving one slot to the feature search; with a single candidate, round 1 is free and later rounds
    are not (the search needs its slot)."""
    if free <= 0:
        return set()
    if n == 1:
        return {0} if round_ == 1 else set()
    k = min(free, n - 1)
    return set(range(n - k, n))


def ranked_for(deps: Any, round_: int, parent_id: str, *, top: int | None, slots: int | None = None) -> list[Any]:
    """The bandit's ranking of the features that can help this parent, recommended ones and the family's
    untried known wins first (feature_db.offers.ranked_offer)."""
    facts = parent_facts(deps, parent_id)
    recs = list(recommendations(deps, parent_id))
    catalogue = {f.id: f for f in deps.catalogue}
    dropped = not_offered([catalogue[f] for f in recs if f in catalogue], facts)
    if dropped:   # the trace says why a recommendation is not offered (PDL for one kernel, ...)
        deps.event("decision", kind="not_offered", round=round_, parent=parent_id or evidence.BASELINE,
                   features=dropped)
    try:   # pass rates are keyed by the coder's model
        return ranked_offer(deps.catalogue, _stats(deps), task=deps.task, facts=facts, arch=deps.arch, seed=round_,
                            recommended=recs, model=coder_model(deps), top=top, slots=slots)
    except Exception as exc:  # noqa: BLE001 - a broken statistics file must not stop the run
        deps.event("warning", where="rank_features", error=short(str(exc), 300))
        return ranked_offer(deps.catalogue, [], task=deps.task, facts=facts, arch=deps.arch, seed=round_,
                            recommended=recs, top=top, slots=slots)


def offer(deps: Any, round_: int, parent_id: str) -> list[Any]:
    """Every feature that can help the parent, as OfferedFeature: the recommended ones first, then the
    family's untried known wins, then by posterior mean. Not offered: what does not apply to the task or
    the parent (feature_db.offers), and what the parent already uses unless named as a refinement."""
    ranked = ranked_for(deps, round_, parent_id, top=None)
    recs = recommendations(deps, parent_id)
    facts = parent_facts(deps, parent_id)
    offered = []
    for r in ranked:
        o = OfferedFeature.from_ranked(r, recs.get(r.feature.id, ()))
        refine = refinement_of(r.feature.id, facts)
        if refine:
            o = o.model_copy(update={"reason": f"the parent uses it; offered as a refinement: {refine}"})
        offered.append(o)

    def order(o: Any) -> tuple:   # the critic's picks, then the diagnosis's, then the ranking's order
        return 0 if set(o.recommended_by) & {"the critic", "the rules"} else 1 if o.recommended_by else 2
    return sorted(offered, key=order)


def bandit_plan(deps: Any, round_: int, per_candidate: int, parents: list[dict[str, Any]]) -> list[list[str]]:
    """The rules planner: for each slot's parent, the bandit's assignment over the features that can help it
    (feature_db.offers.ranked_offer), never a feature set that already failed or regressed on that parent.
    ``parents``: per slot, the program database's choice (search.choose_parents)."""
    failed = run_failed_ideas(deps, round_)
    by_parent: dict[str, list[int]] = {}
    for slot, par in enumerate(parents):
        by_parent.setdefault(par.get("parent") or evidence.BASELINE, []).append(slot)
    out: list[list[str]] = [[] for _ in parents]
    for pid, slots in by_parent.items():
        ranked = ranked_for(deps, round_, pid, top=max(BANDIT_OFFER, len(slots) * per_candidate), slots=len(slots))
        sets = assign_features(ranked, len(slots), per_candidate, seed=round_, blocked=failed.get(pid, ()),
                               prefer=untried_wins(ranked, deps.task))
        for slot, feats in zip(slots, sets):
            out[slot] = feats
    return out


def fit_features(features: list[str], facts: Any, failed: Iterable[frozenset[str]], catalogue: dict[str, Any]) -> list[str]:
    """One planned feature set fitted to its parent: what cannot help it (used already unless as a refinement,
    regressed on it, its precondition failed) dropped; a set that already failed there leaves the slot free.
    Pure."""
    keep = [f for f in features if f not in catalogue or why_not(catalogue[f], facts) is None]
    return [] if frozenset(keep) in set(failed) else keep


def fit_to_parents(deps: Any, round_: int, plans: list[Any], parents: list[dict[str, Any]]) -> list[str]:
    """A planner's plan made against the best, fitted to each slot's own parent: features that cannot help
    that parent are dropped, and a set that already failed or regressed on it leaves the slot free.
    Changes ``plans`` in place; returns what was changed, in words."""
    catalogue = {f.id: f for f in deps.catalogue}
    failed = run_failed_ideas(deps, round_)
    facts: dict[str, Any] = {}
    notes: list[str] = []
    for slot, cp in enumerate(plans):
        if not cp.features:
            continue
        pid = (parents[slot] if slot < len(parents) else parents[-1]).get("parent") or evidence.BASELINE
        if pid not in facts:
            facts[pid] = parent_facts(deps, pid)
        kept = [f for f in cp.features if f not in catalogue or why_not(catalogue[f], facts[pid]) is None]
        if len(kept) < len(cp.features):
            why = {f: why_not(catalogue[f], facts[pid]) for f in cp.features if f not in kept}
            notes.append(f"slot {slot}: dropped " + "; ".join(f"{f} ({w})" for f, w in sorted(why.items()))
                         + f", for {pid}")
        keep = fit_features(cp.features, facts[pid], failed.get(pid, set()), catalogue)
        if kept and not keep:
            notes.append(f"slot {slot}: {sorted(kept)} already failed or regressed on {pid}; the slot is free")
        cp.features = keep
    return notes


def jobs_for(deps: Any, round_: int, plans: list[Any], parents: list[dict[str, Any]], *, by: str,
             rationale: str = "") -> list[dict]:
    """The round's coder jobs (small: they travel in the state), the whole plan kept in rounds/r<N>/plan.json.
    ``parents``: per slot, the parent chosen from the program database (search.choose_parents)."""
    jobs, kept = [], {}
    facts: dict[str, Any] = {}
    for slot, cp in enumerate(plans):
        cid = candidate_id(round_, slot)
        par = parents[slot] if slot < len(parents) else parents[-1]
        pid = par.get("parent") or evidence.BASELINE
        refinements: dict[str, str] = {}
        if cp.features and getattr(deps, "task", None) is not None:   # a parent's facts need the task
            if pid not in facts:
                facts[pid] = parent_facts(deps, pid)
            refinements = {f: r for f in cp.features if (r := refinement_of(f, facts[pid]))}
        jobs.append({"cid": cid, "round": round_, "slot": slot, "attempt": 0, "features": list(cp.features),
                     "refinements": refinements,
                     "free": not cp.features,
                     "parent": par.get("parent") or evidence.BASELINE, "parent_ms": par.get("parent_ms"),
                     "parent_features": list(par.get("features") or ()), "parent_kind": par.get("kind", ""),
                     "parent_why": par.get("why", ""), "inspirations": list(par.get("inspirations") or ())})
        kept[cid] = {"features": list(cp.features), "idea": cp.idea, "parent": jobs[-1]["parent"],
                     "free": not cp.features, "refinements": refinements}
    evidence.write_json(deps, f"rounds/r{round_}/plan.json", {"by": by, "rationale": rationale, "candidates": kept})
    return jobs

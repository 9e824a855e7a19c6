"""Planning a round: what the planner is offered, the plan by the planner or by the bandit (the ``rules``
planner, and the fallback when the planner's answer is unusable), and the round's coder jobs.

The planner may pick any feature that applies to the task; each is shown with its posterior mean (what the
statistics expect, failures counted) and its number of tries, never a random draw, and the features the
critic and the diagnosis recommend are always in the offer, first. The planner's ideas are kept whole in
rounds/r<N>/plan.json, not in the state: every coder (and a repair of its candidate) reads its own.
"""

from __future__ import annotations

from typing import Any

from cuda_llm.graph import evidence
from cuda_llm.graph.state import candidate_id, short

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


def rank(deps: Any, round_: int, *, top: int | None) -> list[Any]:
    """The feature bandit's ranking of the features that apply (Thompson draws, seeded by the round)."""
    from cuda_llm.feature_db.bandit import rank_features, task_filters
    from cuda_llm.graph.stages import coder_model

    filters = task_filters(deps.task)
    try:   # pass rates are keyed by the coder's model
        return rank_features(deps.catalogue, _stats(deps), arch=deps.arch, task_tags=list(deps.task.tags), seed=round_,
                             top=top, model=coder_model(deps), **filters)
    except Exception as exc:  # noqa: BLE001 - a broken statistics file must not stop the run
        deps.event("warning", where="rank_features", error=short(str(exc), 300))
        return rank_features(deps.catalogue, [], arch=deps.arch, seed=round_, top=top, **filters)


def offer(deps: Any, round_: int, parent_id: str) -> list[Any]:
    """Every applicable feature as an OfferedFeature: the recommended ones first, then by posterior mean."""
    from cuda_llm.agents.planner import OfferedFeature
    from cuda_llm.feature_db.catalogue import supports

    ranked = rank(deps, round_, top=None)
    recs = recommendations(deps, parent_id)
    by_id = {r.feature.id: r for r in ranked}
    extra = []   # recommended but filtered out of the applicable list: still offered, if the GPU has it
    catalogue = {f.id: f for f in deps.catalogue}
    for fid in recs:
        if fid not in by_id and fid in catalogue and _supported(supports, catalogue[fid], deps.arch):
            extra.append(OfferedFeature(id=fid, name=catalogue[fid].name, category=str(catalogue[fid].category),
                                        recommended_by=recs[fid]))
    offered = [OfferedFeature.from_ranked(r, recs.get(r.feature.id, ())) for r in ranked] + extra

    def order(o: Any) -> tuple:   # the critic's picks, then the diagnosis's, then by posterior mean
        who = 0 if set(o.recommended_by) & {"the critic", "the rules"} else 1 if o.recommended_by else 2
        return who, -(o.expected_share or 0.0), o.id
    return sorted(offered, key=order)


def _supported(supports: Any, feature: Any, arch: str) -> bool:
    try:
        return bool(supports(feature, arch))
    except Exception:  # noqa: BLE001
        return True


def bandit_plan(deps: Any, round_: int, n: int, per_candidate: int, parent_id: str) -> list[list[str]]:
    """The rules planner: the bandit's assignment over its Thompson ranking, the recommended features first."""
    from cuda_llm.feature_db.bandit import assign_features

    ranked = rank(deps, round_, top=BANDIT_OFFER)
    recs = [f for f in recommendations(deps, parent_id) if f in {r.feature.id for r in ranked}]
    order = {fid: i for i, fid in enumerate(recs)}
    ranked = sorted(ranked, key=lambda r: order.get(r.feature.id, len(order)))   # stable: the rest keep their order
    return assign_features(ranked, n, per_candidate, seed=round_)


def jobs_for(deps: Any, round_: int, plans: list[Any], parents: list[dict[str, Any]], *, by: str,
             rationale: str = "") -> list[dict]:
    """The round's coder jobs (small: they travel in the state), the whole plan kept in rounds/r<N>/plan.json.
    ``parents``: per slot, the parent chosen from the program database (search.choose_parents)."""
    jobs, kept = [], {}
    for slot, cp in enumerate(plans):
        cid = candidate_id(round_, slot)
        par = parents[slot] if slot < len(parents) else parents[-1]
        jobs.append({"cid": cid, "round": round_, "slot": slot, "attempt": 0, "features": list(cp.features),
                     "parent": par.get("parent") or evidence.BASELINE, "parent_ms": par.get("parent_ms"),
                     "parent_features": list(par.get("features") or ()), "parent_kind": par.get("kind", ""),
                     "parent_why": par.get("why", ""), "inspirations": list(par.get("inspirations") or ())})
        kept[cid] = {"features": list(cp.features), "idea": cp.idea, "parent": jobs[-1]["parent"]}
    evidence.write_json(deps, f"rounds/r{round_}/plan.json", {"by": by, "rationale": rationale, "candidates": kept})
    return jobs

"""The loop's decisions at the edges a mutation run found unpinned (docs/mutation.md): the bandit's prior
and reasons, the offers' facts, the post-mortems. Pure, no torch, no GPU."""

from __future__ import annotations

import pytest

from cuda_llm.feature_db import bandit
from cuda_llm.feature_db.stats import ANY_MODEL, FeatureStats


def _st(**kw) -> FeatureStats:
    return FeatureStats(feature="f", category="elementwise", arch="sm_90", **kw)


# ---------------------------------------------------------------- feature_db.bandit
def test_without_evidence_the_posterior_is_the_prior():
    post = bandit.posterior(_st())
    assert post.mu_mean == bandit.PRIOR_MEAN and post.mu_sd == pytest.approx(bandit.PRIOR_SD)
    assert (post.alpha, post.beta) == bandit.PASS_PRIOR
    assert bandit.posterior(_st(), prior_mean=0.3).mu_mean == pytest.approx(0.3)
    one = bandit.posterior(_st(tries=1, passed=1, n_rewards=1, mean_reward=0.5))
    assert 0.0 < one.mu_mean < 0.5 and one.mu_sd < bandit.PRIOR_SD       # one try pulls the mean part way


def test_the_reason_names_this_models_tries_only_when_they_differ():
    st = _st(tries=3, compiled=3, passed=2)
    mine = _st(model="gpt-x", tries=1, passed=1)
    assert "(1/1 by gpt-x)" in bandit.explain(st, mine=mine)
    assert "by" not in bandit.explain(st, mine=_st(model=ANY_MODEL, tries=1, passed=1))
    assert "by" not in bandit.explain(st, mine=_st(model="", tries=1, passed=1))
    assert "by" not in bandit.explain(st, mine=_st(model="gpt-x", tries=3, passed=2))


def test_a_ranked_feature_cannot_be_changed_once_made():
    from pydantic import ValidationError

    from cuda_llm.feature_db.catalogue import load_catalogue

    f = load_catalogue()[0]
    r = bandit.RankedFeature(feature=f, score=0.1, expected_value=0.1, reason="r", stats=_st())
    with pytest.raises(ValidationError):
        r.score = 2.0


# ---------------------------------------------------------------- graph.postmortem
def test_worth_profiling_is_a_plain_yes_or_no():
    from cuda_llm.graph import postmortem as pm

    assert pm.worth_profiling(pm.SLOWER, None) is False
    assert pm.cause_text(pm.SLOWER, parent="p", ratio=2.0, diagnosis={"bottleneck": "memory-bound",
                                                                       "evidence": ["dram 80% of peak"]}) == \
        "2.0x slower than its parent p; memory-bound."                  # no stall line: nothing added for it


def test_a_round_profiles_its_worst_regressions_up_to_the_cap(tmp_path, monkeypatch):
    """Four regressions of 2x to 5x in one round: the MAX_PER_ROUND worst are profiled, the others explained
    by their ratio alone, every one gets its post-mortem."""
    from types import SimpleNamespace

    from cuda_llm.graph import postmortem as pm
    from cuda_llm.graph import review
    from cuda_llm.graph.stages import ProfileStage
    from cuda_llm.graph.state import Candidate
    from cuda_llm.results import CompileResult, EvalResult, Status

    cands = [Candidate(id=f"r1c{k}", round=1, slot=k, parent_ms=1.0, status="ok", ms=2.0 + k, hash=f"h{k}")
             for k in range(4)]
    built = {c.id: EvalResult(task="t", candidate=c.id, source_hash=c.hash, status=Status.ok,
                              compile=CompileResult(ok=True, arch="sm_90a", source_hash=c.hash, so_path="/x.so"))
             for c in cands}
    profiled: list[str] = []

    def profile(deps, cid, source, res):
        profiled.append(cid)
        return {"diagnosis": {"bottleneck": "latency-bound", "summary": "Too few warps."}}

    monkeypatch.setattr(review, "profile_and_diagnose", profile)
    written: dict[str, str] = {}
    rundir = SimpleNamespace(root=tmp_path, write_text=lambda rel, text: written.__setitem__(rel, text),
                             read_result=lambda cid: None)
    events: list[dict] = []
    ctx = SimpleNamespace(deps=SimpleNamespace(rundir=rundir, source=lambda h: "", catalogue=None),
                          candidates=lambda: cands, result=built.get,
                          event=lambda kind, **f: events.append({"event": kind, **f}),
                          patch=lambda cid, **f: {cid: f}, merge=lambda a, b: {**a, **b})
    update = ProfileStage._postmortems(ctx, {})
    assert profiled == ["r1c3", "r1c2"] and len(profiled) == pm.MAX_PER_ROUND == 2     # the worst first
    assert sorted(update) == ["r1c0", "r1c1", "r1c2", "r1c3"]
    done = {e["candidate"]: e for e in events if e["event"] == "postmortem"}
    assert done["r1c3"]["profiled"] and done["r1c2"]["profiled"]
    assert not done["r1c1"]["profiled"] and not done["r1c0"]["profiled"]
    assert done["r1c3"]["cause"] == "5.0x slower than its parent baseline; latency-bound: Too few warps."
    assert sorted(written) == [f"postmortems/r1c{k}.json" for k in range(4)]


# ---------------------------------------------------------------- feature_db.offers
def test_a_lineage_gathers_the_features_of_every_ancestor():
    from types import SimpleNamespace

    from cuda_llm.feature_db.offers import lineage_features

    cands = [{"id": "r1c0", "parent": "baseline", "features": ["a"]},
             SimpleNamespace(id="r2c1", parent="r1c0", features=["b"]),          # records or objects
             {"id": "r3c0", "parent": "r2c1", "features": ["c"]},
             {"id": "r3c0", "parent": "r2c1", "features": ["c", "d"]},          # the last record of an id wins
             {"id": "r2c0", "parent": "r1c0", "features": ["x"]}]               # a sibling: not an ancestor
    assert lineage_features(cands, "r3c0") == {"a", "b", "c", "d"}
    assert lineage_features(cands, "r1c0") == {"a"}
    assert lineage_features(cands, "baseline") == set() and lineage_features(cands, "") == set()
    assert lineage_features(cands, "nobody") == set()
    loop = [{"id": "p", "parent": "q", "features": ["f"]}, {"id": "q", "parent": "p", "features": ["g"]}]
    assert lineage_features(loop, "p") == {"f", "g"}                           # a cycle ends


def test_features_regressed_on_a_parent_are_those_never_good_on_it():
    from cuda_llm.feature_db.offers import REGRESSION, regressed_features

    def child(feats, status="ok", ms=1.0, pms=1.0, parent="P"):
        return {"id": "c", "parent": parent, "features": feats, "status": status, "ms": ms, "parent_ms": pms}

    cands = [child(["slow"], ms=1.2),                                   # 1.2x slower: regressed
             child(["edge"], ms=REGRESSION * 2.0, pms=2.0),              # exactly the threshold: not
             child(["broken"], status="compile_error", ms=None),
             child(["fixed"], status="wrong_answer", ms=None), child(["fixed"], ms=0.9),   # a repair passed
             child(["shared", "slow2"], ms=1.5), child(["shared"], ms=0.8),               # good in another set
             child(["unknown_parent_time"], pms=None),                   # passed, nothing to compare with
             child(["elsewhere"], ms=3.0, parent="Q"),                   # another parent's child
             child(["nothing"], status="no_code", ms=None), child(["pending"], status=None)]
    assert regressed_features(cands, "P") == {"slow", "broken", "slow2"}
    assert regressed_features(cands, "Q") == {"elsewhere"}
    assert regressed_features([child(["b"], ms=1.2, parent="baseline")], "") == {"b"}


def test_the_parents_kernel_count_comes_from_its_profile_when_it_has_one():
    from cuda_llm.feature_db import offers
    from cuda_llm.tasks import load_task

    task = load_task("gelu").task
    two = "void s(float* x) { k1<<<1, 1>>>(x); k2<<<1, 1>>>(x); }"
    assert offers.parent_facts(task, two).kernels == 2
    assert offers.parent_facts(task, two, n_kernels=5).kernels == 5
    assert offers.parent_facts(task, two, n_kernels=0).kernels == 2          # no count in the profile: the source's


def test_a_loop_without_braces_ends_at_its_statement():
    from cuda_llm.feature_db.offers import launch_sites

    assert launch_sites("void s() { for (int i = 0; i < 3; ++i) y += f(i); k<<<1, 1>>>(x); }") == (1, False)
    assert launch_sites("void s() { for (int i = 0; i < 3; ++i) k<<<1, 1>>>(x); }") == (1, True)


def test_the_facts_of_a_task_at_their_edges():
    from cuda_llm.feature_db import offers
    from cuda_llm.tasks import load_task

    gelu = load_task("gelu").task
    at = lambda n, flops="12 * n": gelu.model_copy(update={"benchmark": {"n": n}, "flops": flops})  # noqa: E731
    # fewer outputs than one per resident thread of the GPU (2048 an SM): few outputs
    assert "few_outputs" in offers.task_facts(at(2047), sm_count=1)
    assert "few_outputs" not in offers.task_facts(at(2048), sm_count=1)
    assert offers.THREADS_PER_SM == 2048
    # 256 flops per output or more: a long reduction (and so a reducing task)
    assert {"long_reduction", "reduces"} <= offers.task_facts(at(1 << 20, "256 * n"))
    assert "long_reduction" not in offers.task_facts(at(1 << 20, "255 * n"))
    assert offers.outputs_at(gelu, {"n": 0}) == 0 and offers.outputs_at(gelu, {"n": 7}) == 7


def test_a_launch_in_a_loop_at_the_very_start_of_the_source():
    from cuda_llm.feature_db.offers import launch_sites

    assert launch_sites("for (int i = 0; i < n; ++i) k<<<1, 1>>>(x);") == (1, True)


def test_the_posterior_counts_this_models_tries_in_full_and_others_at_half():
    post = bandit.posterior(_st(tries=4, passed=2), mine=_st(model="m", tries=2, passed=2))
    a0, b0 = bandit.PASS_PRIOR
    assert post.alpha == pytest.approx(a0 + 2) and post.beta == pytest.approx(b0 + bandit.OTHER_MODEL_PASS_WEIGHT * 2)
    plain = bandit.posterior(_st(tries=4, passed=2))
    assert (plain.alpha, plain.beta) == (a0 + 2, b0 + 2)
    pooled = bandit.posterior(_st(), pool=_st(tries=4, passed=4))        # elsewhere: a quarter of a try each
    assert pooled.alpha == pytest.approx(a0 + bandit.POOL_PASS_WEIGHT * 4) and pooled.beta == b0


def test_the_posterior_of_the_mean_reward_follows_the_spread_of_the_rewards():
    st = _st(tries=3, passed=3, n_rewards=3, mean_reward=0.3, var_reward=0.04)
    post = bandit.posterior(st)
    w, sd0 = bandit.OBS_SD_WEIGHT, bandit.OBS_SD
    sigma2 = (w * sd0 ** 2 + 2 * 0.04) / (w + 2)                        # pseudo-observations plus n - 1 of them
    prec = 1 / bandit.PRIOR_SD ** 2 + 3 / sigma2
    assert post.mu_mean == pytest.approx(3 * 0.3 / sigma2 / prec) and post.mu_sd == pytest.approx(prec ** -0.5)


def test_without_a_prior_an_untried_feature_is_worth_its_chance_of_failing():
    from cuda_llm.feature_db.catalogue import load_catalogue

    cat = load_catalogue()
    ranked = bandit.rank_features(cat, [], arch="sm_90", category="elementwise", method="ucb")
    a0, b0 = bandit.PASS_PRIOR
    assert ranked and all(r.expected_value == pytest.approx(b0 / (a0 + b0) * bandit.FAIL_VALUE) for r in ranked)
    post = bandit.posterior(_st())
    sd = ((post.p_mean * post.mu_sd) ** 2 + (post.mu_mean - bandit.FAIL_VALUE) ** 2 * post.p_var) ** 0.5
    assert all(r.score == pytest.approx(r.expected_value + bandit.UCB_C * sd) for r in ranked)
    with pytest.raises(ValueError, match="not a GPU architecture"):
        bandit.applicable([], arch="banana", category="elementwise")


def test_a_third_of_a_large_round_explores_and_a_short_list_reserves_only_proven_winners():
    from cuda_llm.feature_db.catalogue import load_catalogue

    cat = load_catalogue()
    ranked = bandit.rank_features(cat, [], arch="sm_90", category="elementwise", seed=3)
    assert len(ranked) >= 12 and all(r.untried for r in ranked)
    plans = bandit.assign_features(ranked, 9, per_candidate=1)
    assert len({p[0] for p in plans}) == 9
    order = [r.feature.id for r in ranked]
    # every lead is untried here; the exploit leads are the ranking's first six, the explore leads the next three
    assert sorted(p[0] for p in plans) == sorted(order[:9])
    assert plans[0][0] == order[3]           # a third (3) lead with the best untried; candidate 0 exploits the next
    zero = ranked[-1].model_copy(update={"expected_value": 0.0, "stats": _st(tries=2, passed=1)})
    short = bandit.shortlist([*ranked[:3], zero], 2)
    assert [r.feature.id for r in short] == [r.feature.id for r in ranked[:2]]   # 0 expected: not a proven win


def _proven(n: int):
    """n catalogue features without conflicts among them, each tried with a positive expected value (best first)."""
    from cuda_llm.feature_db.catalogue import load_catalogue

    picked = []
    for f in load_catalogue():
        if not any(f.id in g.conflicts_with or g.id in f.conflicts_with for g in picked):
            picked.append(f)
        if len(picked) == n:
            break
    return [bandit.RankedFeature(feature=f, score=1.0 - k / 10, expected_value=0.5 - k / 10, reason="r",
                                 stats=_st(tries=3, passed=3)) for k, f in enumerate(picked)]


def test_with_fewer_features_than_candidates_the_ranking_is_reused_in_order_and_sets_stay_distinct():
    ranked = _proven(3)
    ids = [r.feature.id for r in ranked]
    leads = [p[0] for p in bandit.assign_features(ranked, 6, per_candidate=1)]
    assert leads == ids + ids                                              # reused from the top, in order
    plans = bandit.assign_features(ranked, 3, per_candidate=2)
    assert len({frozenset(p) for p in plans}) == 3 and all(len(p) == 2 for p in plans)


def test_a_bound_given_wins_over_the_tags():
    from cuda_llm.feature_db.catalogue import load_catalogue

    cat = load_catalogue()
    given = {r.feature.id for r in bandit.rank_features(cat, [], arch="sm_90", category="gemm", bound="memory",
                                                         task_tags=["compute"])}
    memory = {r.feature.id for r in bandit.rank_features(cat, [], arch="sm_90", category="gemm", bound="memory")}
    compute = {r.feature.id for r in bandit.rank_features(cat, [], arch="sm_90", category="gemm", task_tags=["compute"])}
    assert given == memory and memory != compute


def test_a_short_list_reserves_a_quarter_of_itself_for_the_proven_winners():
    from cuda_llm.feature_db.catalogue import load_catalogue

    untried = bandit.rank_features(load_catalogue(), [], arch="sm_90", category="elementwise", seed=1)[:8]
    proven = _proven(3)
    low = [r.model_copy(update={"score": -1.0}) for r in proven]          # proven, but drawn last
    ordered = [*untried, *low]
    ids = lambda rs: [r.feature.id for r in rs]                         # noqa: E731
    assert ids(bandit.shortlist(ordered, 1)) == ids(low[:1])             # one: the best proven
    assert ids(bandit.shortlist(ordered, 4)) == ids(untried[:3] + low[:1])
    assert ids(bandit.shortlist(ordered, 8)) == ids(untried[:6] + low[:2])


def test_evidence_from_elsewhere_moves_the_prior_mean_by_its_weight():
    pool = _st(tries=4, passed=4, n_rewards=4, mean_reward=0.4)
    post = bandit.posterior(_st(), pool=pool)
    assert post.mu_mean == pytest.approx(0.4 * 4 / (4 + bandit.POOL_SHRINK))


def test_the_reason_counts_tries_and_the_coders_compliance():
    assert bandit.explain(_st(tries=1, compiled=1, passed=0)) == "1 try, 0/1 passed: penalized"
    assert bandit.explain(_st(tries=2, compiled=2, passed=0)) == "2 tries, 0/2 passed: penalized"
    asked = bandit.explain(_st(tries=2, compiled=2, passed=0, asked=3, complied=1))
    assert asked.endswith("; coder used it in 1 of 3 asks")
    assert "coder used" not in bandit.explain(_st(tries=2, compiled=2, passed=0, asked=3, complied=3))
    assert "coder used" not in bandit.explain(_st(tries=2, compiled=2, passed=0))


def test_the_pass_rates_spread_and_the_old_name_of_the_expected_value():
    post = bandit.posterior(_st())                          # Beta(2, 1)
    assert post.p_var == pytest.approx(2 * 1 / (3 ** 2 * 4)) and post.p_mean == pytest.approx(2 / 3)
    r = _proven(1)[0]
    assert r.expected_log_speedup == r.expected_value == 0.5


def test_the_post_mortem_paragraph_and_the_plan_sentence_at_their_limits():
    from cuda_llm.graph import postmortem as pm

    assert pm.MAX_TEXT_CHARS == 900 and pm.MAX_PLAN_CHARS == 240
    assert pm.postmortem_text(plan="", changes=[], cause="", parent="p") == ""
    assert pm.postmortem_text(plan="", changes=["a"], cause="", parent="p") == "against p: a"
    assert pm.postmortem_text(plan="", changes=[], cause="c", parent="p") == "cause: c"
    long = pm.postmortem_text(plan="", changes=[], cause="x" * 2000, parent="p")
    assert len(long) == 900 and long.endswith("x...")
    exact = pm.postmortem_text(plan="", changes=[], cause="y" * (900 - len("cause: ")), parent="p")
    assert len(exact) == 900 and exact.endswith("y")
    assert pm.plan_sentence("") == "" and pm.plan_sentence("```cuda\nint x;\n```") == ""
    three = "One. Two. Three."
    assert pm.plan_sentence(three) == "One. Two."
    cut = pm.plan_sentence("w" * 500)
    assert len(cut) == 240 and cut.endswith("w...")
    assert pm.cause_text(pm.SLOWER, parent="p", ratio=1.234).startswith("1.23x slower than its parent p")
    assert pm.cause_text(pm.SLOWER, parent="p", ratio=2.345).startswith("2.3x slower")


def test_the_cause_names_the_two_largest_losses_only():
    from cuda_llm.graph import postmortem as pm

    d = {"bottleneck": "memory-bound", "losses": [{"rule": r, "share_pct": s} for r, s in
                                                   (("dram", 40), ("l2", 20), ("sync", 10))]}
    text = pm.cause_text(pm.SLOWER, parent="p", ratio=2.0, diagnosis=d)
    assert text.endswith("estimated time lost: 40% to dram, 20% to l2.") and "sync" not in text

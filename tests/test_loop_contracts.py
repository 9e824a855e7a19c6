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

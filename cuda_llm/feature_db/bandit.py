"""Which features to try next: a bandit over the catalogue, scored on the headroom each feature closes.

The value of trying a feature is modelled as

    value = p * mu + (1 - p) * FAIL_VALUE

where ``p`` is the chance a candidate introducing it compiles and passes (Beta posterior over tries and
passes, keyed by the coder model: what one model writes correctly says little about another) and ``mu``
the mean reward of the ones that pass: the share of the remaining headroom to speed of light the step
closed, split among its new features (credit.py; Normal posterior with a prior of "no change"). Failed
compiles and failed tests therefore pull a feature down. Thompson sampling draws ``p`` and ``mu`` from
their posteriors (seeded: the same seed and statistics give the same ranking); UCB instead adds one
posterior standard deviation to the posterior mean. An untried feature starts from the prior, nudged by
what the same feature did for other task families or architectures. How often the coder really used a
feature when asked (compliance) is reported beside the score, never mixed into it.

Pure: reads statistics through ``.all(by_model=True)`` of a StatsStore, or takes FeatureStats rows.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from cuda_llm.feature_db.catalogue import parse_arch, supports
from cuda_llm.feature_db.model import Feature
from cuda_llm.feature_db.stats import ANY_MODEL, FeatureStats, normalize_arch, normalize_model, pooled
from cuda_llm.tasks.precision import float_input_dtypes, tightest_rtol

PRIOR_MEAN = 0.0              # before evidence: the step closes no headroom
PRIOR_SD = 0.25               # a feature closing a quarter of the headroom (or losing as much) is plausible
OBS_SD = 0.2                  # spread of one try's reward before the data says otherwise
OBS_SD_WEIGHT = 2.0           # pseudo-observations behind OBS_SD
PASS_PRIOR = (2.0, 1.0)       # Beta prior on "compiles and passes": mildly optimistic (2/3)
FAIL_VALUE = -0.1             # what a failed candidate is worth: a wasted slot, a tenth of the headroom
POOL_SHRINK = 4.0             # evidence from other families/archs counts as n / (n + 4) of the prior mean
POOL_PASS_WEIGHT = 0.25       # ... and each of its tries as a quarter of a try for the pass rate
OTHER_MODEL_PASS_WEIGHT = 0.5  # a try by another coder model (same family and arch): half a try
UCB_C = 1.0

Method = Literal["thompson", "ucb"]


class RankedFeature(BaseModel):
    """One feature offered to the planner: its score (reward units), why, and the evidence."""

    model_config = ConfigDict(frozen=True)
    feature: Feature
    score: float
    expected_value: float          # posterior mean of the value, failures included
    reason: str
    stats: FeatureStats            # this family and arch, every coder model pooled
    compliance: float | None = None   # how often the coder used it when asked (None: never asked)

    @property
    def untried(self) -> bool:
        return self.stats.tries == 0

    @property
    def expected_log_speedup(self) -> float:
        """The expected value under its former name (it is a share of headroom now, not a log-speedup)."""
        return self.expected_value


def _tries(n: int) -> str:
    return f"{n} try" if n == 1 else f"{n} tries"


def _share(x: float) -> str:
    return f"{100 * x:+.0f}%"


def _compliance(st: FeatureStats) -> str:
    if not st.asked or st.complied == st.asked:
        return ""
    return f"; coder used it in {st.complied} of {st.asked} asks"


def explain(st: FeatureStats, pool: FeatureStats | None = None, mine: FeatureStats | None = None) -> str:
    """The one-line reason shown beside a score. ``mine``: the same cell for this run's coder model."""
    comp = _compliance(st)
    if st.tries == 0:
        text = "untried: explore"
        if pool is not None and pool.n_rewards:
            text += f" (elsewhere {_share(pool.mean_reward)} of headroom over {_tries(pool.n_rewards)})"
        elif pool is not None and pool.tries:
            text += f" (elsewhere {pool.passed}/{pool.tries} passed)"
        return text + comp
    compiled = f", {st.compiled}/{st.tries} compiled" if st.compiled < st.tries else ""
    passed = f"{st.passed}/{st.tries} passed"
    if mine is not None and mine.model not in ("", ANY_MODEL) and mine.tries != st.tries:
        passed += f" ({mine.passed}/{mine.tries} by {mine.model})"
    if st.n_rewards:
        over = _tries(st.n_rewards) if st.n_rewards == st.tries else f"{st.n_rewards} of {st.tries} tries"
        spread = f" (sd {100 * math.sqrt(st.var_reward):.0f}%)" if st.n_rewards >= 2 and st.var_reward > 0.0025 else ""
        return f"closes {_share(st.mean_reward)} of the headroom over {over}{spread}, {passed}{compiled}{comp}"
    if st.passed == 0:
        return f"{_tries(st.tries)}, {passed}{compiled}: penalized{comp}"
    return f"{_tries(st.tries)}, {passed}{compiled}, no headroom measured yet{comp}"


class _Posterior(BaseModel):
    alpha: float
    beta: float
    mu_mean: float
    mu_sd: float

    @property
    def p_mean(self) -> float:
        return self.alpha / (self.alpha + self.beta)

    @property
    def p_var(self) -> float:
        a, b = self.alpha, self.beta
        return a * b / ((a + b) ** 2 * (a + b + 1))

    def value(self, p: float, mu: float) -> float:
        return p * mu + (1.0 - p) * FAIL_VALUE


def posterior(st: FeatureStats, pool: FeatureStats | None = None, mine: FeatureStats | None = None,
              prior_mean: float = PRIOR_MEAN) -> _Posterior:
    """Beta posterior on passing and Normal posterior on the mean reward of passing tries.

    ``st``: the cell (this family and arch), every model pooled: its rewards count in full. ``mine``: the
    same cell for this run's coder model: its tries count in full for the pass rate, the other models'
    at OTHER_MODEL_PASS_WEIGHT (without ``mine`` every model counts in full). ``pool``: other families
    and archs, a weak prior for both. ``prior_mean``: what the step is expected to close before any
    evidence (offers.cold_prior: a known win of the family, a feature the diagnosis suggests).
    """
    a0, b0 = PASS_PRIOR
    mu0 = prior_mean
    if pool is not None and pool.tries:
        a0 += POOL_PASS_WEIGHT * pool.passed
        b0 += POOL_PASS_WEIGHT * (pool.tries - pool.passed)
        if pool.n_rewards:
            mu0 += (pool.mean_reward - PRIOR_MEAN) * pool.n_rewards / (pool.n_rewards + POOL_SHRINK)
    if mine is None:
        passed, failed = float(st.passed), float(st.tries - st.passed)
    else:
        other_passed, other_failed = st.passed - mine.passed, (st.tries - st.passed) - (mine.tries - mine.passed)
        passed = mine.passed + OTHER_MODEL_PASS_WEIGHT * other_passed
        failed = (mine.tries - mine.passed) + OTHER_MODEL_PASS_WEIGHT * other_failed
    n = st.n_rewards
    prec = 1.0 / PRIOR_SD**2
    num = mu0 * prec
    if n:
        dof = max(n - 1, 0)
        sigma2 = (OBS_SD_WEIGHT * OBS_SD**2 + dof * st.var_reward) / (OBS_SD_WEIGHT + dof)
        prec += n / sigma2
        num += n * st.mean_reward / sigma2
    return _Posterior(alpha=a0 + passed, beta=b0 + failed, mu_mean=num / prec, mu_sd=math.sqrt(1.0 / prec))


def task_tolerance(task: Any) -> float:
    """The tightest relative tolerance among a task's float outputs (0 when an output must be exact, or
    when a tolerance is an expression): features with ``min_tolerance`` above it are not offered."""
    return tightest_rtol(task)


def task_float_inputs(task: Any) -> list[str]:
    """The dtypes of a task's float inputs, e.g. ['float16'] for a half-precision GEMM."""
    return float_input_dtypes(task)


def task_filters(task: Any) -> dict[str, Any]:
    """Everything about a task that decides which features apply, as keyword arguments of rank_features."""
    return {"category": task.family, "bound": task.bound, "tolerance": task_tolerance(task),
            "float_inputs": task_float_inputs(task)}


def applicable(
    catalogue: Iterable[Feature], *, arch: str, category: str, bound: str | None = None, tolerance: float | None = None,
    float_inputs: list[str] | None = None,
) -> list[Feature]:
    """Features the architecture supports and that apply to this task family, bound, tolerance and float
    input dtypes."""
    parse_arch(arch)   # clear error for a malformed arch before filtering
    return [f for f in catalogue
            if supports(f, arch) and f.applies_to_family(category) and f.applies_to_bound(bound)
            and f.allowed_by_tolerance(tolerance, float_inputs) and f.allowed_for_dtypes(float_inputs)]


def _rows(stats: Any) -> list[FeatureStats]:
    if stats is None:
        return []
    if hasattr(stats, "all"):
        return list(stats.all(by_model=True))
    return list(stats)


def rank_features(
    catalogue: Iterable[Feature],
    stats: Any,
    *,
    arch: str,
    category: str,
    task_tags: Iterable[str] = (),
    seed: int = 0,
    top: int | None = None,
    bound: str | None = None,
    tolerance: float | None = None,
    float_inputs: Iterable[str] | None = None,
    exclude: Iterable[str] = (),
    method: Method = "thompson",
    model: str | None = None,
    prior: Mapping[str, float] | None = None,
) -> list[RankedFeature]:
    """Rank the applicable features, best first.

    ``stats``: a StatsStore (read once) or FeatureStats rows (per model, or pooled). ``category`` is the
    task family. ``bound`` ('memory'/'compute') may also come as a tag in ``task_tags``; ``tolerance``
    (see task_tolerance) hides features that need a looser one unless they are lossless on
    ``float_inputs`` (the task's float input dtypes); ``task_filters(task)`` gives all of these. ``model``:
    the coder model of this run, whose own pass rate counts in full. ``exclude`` drops ids. ``top``
    keeps the best ``top``, always including the best proven features by posterior mean. ``prior``: feature
    id -> prior mean of the headroom share it closes (offers.cold_prior), which the measured rewards then
    update. Same inputs and seed, same ranking.
    """
    if method not in ("thompson", "ucb"):
        raise ValueError(f"method {method!r}: use 'thompson' or 'ucb'")
    arch = normalize_arch(arch)
    model_key = normalize_model(model) if model is not None else None
    if bound is None:
        bound = next((t for t in task_tags if t in ("memory", "compute")), None)
    excluded = set(exclude)
    inputs = list(float_inputs) if float_inputs is not None else None
    features = [f for f in applicable(catalogue, arch=arch, category=category, bound=bound, tolerance=tolerance,
                                      float_inputs=inputs) if f.id not in excluded]
    rows = _rows(stats)
    by_cell: dict[tuple[str, str, str], list[FeatureStats]] = {}
    for r in rows:
        by_cell.setdefault((r.feature, r.category, r.arch), []).append(r)
    rng = random.Random(f"{seed}:{arch}:{category}")
    ranked: list[RankedFeature] = []
    for f in sorted(features, key=lambda f: f.id):
        cell_rows = by_cell.get((f.id, category, arch), [])
        st = pooled(cell_rows, f.id, category, arch)
        mine = None
        if model_key is not None:
            own = [r for r in cell_rows if r.model == model_key]
            mine = pooled(own, f.id, category, arch, model=model_key)
        others = [r for r in rows if r.feature == f.id and (r.category, r.arch) != (category, arch)]
        pool = pooled(others, f.id, category, arch) if others else None
        post = posterior(st, pool, mine, PRIOR_MEAN + (prior or {}).get(f.id, 0.0))
        expected = post.value(post.p_mean, post.mu_mean)
        if method == "thompson":
            p = rng.betavariate(post.alpha, post.beta)
            mu = rng.gauss(post.mu_mean, post.mu_sd)
            score = post.value(p, mu)
        else:
            sd = math.sqrt(post.p_mean**2 * post.mu_sd**2 + (post.mu_mean - FAIL_VALUE) ** 2 * post.p_var)
            score = expected + UCB_C * sd
        ranked.append(RankedFeature(feature=f, score=score, expected_value=expected,
                                    reason=explain(st, pool, mine), stats=st, compliance=st.compliance))
    tiebreak = {r.feature.id: rng.random() for r in ranked}   # equal UCB scores: no alphabetical bias
    ranked.sort(key=lambda r: (-r.score, tiebreak[r.feature.id]))
    return shortlist(ranked, top)


def shortlist(ordered: list[RankedFeature], top: int | None) -> list[RankedFeature]:
    """The first ``top`` of ``ordered`` (all for None), in its order. A short list still carries the proven
    winners: a quarter of it (at least one) is reserved for the best features by posterior mean, so one
    unlucky draw cannot hide them from the planner."""
    if top is None or top >= len(ordered):
        return ordered
    if top < 1:
        raise ValueError(f"top={top}: offer at least one feature, or None for all")
    proven = sorted((r for r in ordered if not r.untried and r.expected_value > 0),
                    key=lambda r: (-r.expected_value, r.feature.id))[: max(1, top // 4)]
    keep = {r.feature.id for r in proven}
    for r in ordered:
        if len(keep) >= top:
            break
        keep.add(r.feature.id)
    return [r for r in ordered if r.feature.id in keep]


def assign_features(
    ranked: Sequence[RankedFeature], n_candidates: int, per_candidate: int = 2, seed: int = 0,
    blocked: Iterable[frozenset[str]] = (), prefer: Iterable[str] = (),
) -> list[list[str]]:
    """Give each candidate of a round its own features, so one round explores several directions.

    Each candidate gets a distinct lead feature. Candidate 0 and most others exploit: proven features by
    posterior mean (more than 1x expected), then the ranking. When some features are untried, about a
    third of the candidates (never candidate 0) lead with the best-sampled untried ones. Remaining slots are
    filled from the ranking, skipping features already used this round and pairs that conflict. With
    fewer features than slots, features are reused, keeping the sets distinct where possible.
    ``prefer``: features to spread over the candidates (the family's untried known wins): a candidate whose
    lead is not one gets the best remaining one as its next feature. ``blocked``: feature sets not to give again (they failed or regressed on this parent): such a set has
    its last feature swapped for the best one that makes it new. Deterministic for a given ranking and seed.
    """
    if n_candidates < 1:
        raise ValueError(f"n_candidates={n_candidates}: a round needs at least one candidate")
    if per_candidate < 1:
        raise ValueError(f"per_candidate={per_candidate}: give each candidate at least one feature")
    if not ranked:
        return [[] for _ in range(n_candidates)]
    rng = random.Random(f"assign:{seed}")
    order = [r.feature.id for r in ranked]
    by_id = {r.feature.id: r for r in ranked}
    untried = [i for i in order if by_id[i].untried]
    n_explore = 0
    if untried and n_candidates > 1:
        n_explore = min(len(untried), max(1, round(n_candidates / 3)))
    explore_leads = untried[:n_explore]       # by sampled score: Thompson already randomizes among them
    # exploit: proven features by posterior mean (not by the sample), then the ranking
    proven = sorted((r for r in ranked if not r.untried and r.feature.id not in explore_leads
                     and r.expected_value > 0), key=lambda r: (-r.expected_value, r.feature.id))
    exploit_pool = list(dict.fromkeys([r.feature.id for r in proven] + [i for i in order if i not in explore_leads]))
    exploit_leads = exploit_pool[: n_candidates - n_explore]
    k = 0
    while len(exploit_leads) + len(explore_leads) < n_candidates:   # fewer features than candidates
        exploit_leads.append(order[k % len(order)])
        k += 1
    # candidate 0 always exploits; explore leads go to reproducibly chosen other slots
    explore_slots = set(rng.sample(range(1, n_candidates), len(explore_leads)))
    exploit_iter, explore_iter = iter(exploit_leads), iter(explore_leads)
    lead_at = [next(explore_iter) if i in explore_slots else next(exploit_iter) for i in range(n_candidates)]
    used = set(lead_at)
    plans: list[list[str]] = [[fid] for fid in lead_at]

    def conflicts(a: str, b: str) -> bool:
        return b in by_id[a].feature.conflicts_with or a in by_id[b].feature.conflicts_with

    seen: set[frozenset[str]] = set()
    preferred = set(prefer)
    wanted = [f for f in order if f in preferred]
    for plan in plans:
        for _ in range(per_candidate - 1):
            fresh = [f for f in order if f not in used and f not in plan and not any(conflicts(f, p) for p in plan)]
            if wanted:   # a plan without a preferred feature takes one; one that has one leaves them to the others
                has = any(f in wanted for f in plan)
                fresh = sorted(fresh, key=lambda f: (f in wanted) == has)
            reuse = [f for f in order if f not in plan and not any(conflicts(f, p) for p in plan)
                     and frozenset(plan + [f]) not in seen]
            pick = (fresh or reuse or [None])[0]
            if pick is None:
                break
            plan.append(pick)
            used.add(pick)
        seen.add(frozenset(plan))
    no = set(blocked)
    for plan in plans:
        if frozenset(plan) not in no:
            continue
        taken = seen | no
        for f in order:      # swap the last feature for the best one that makes a set not tried on this parent
            trial = plan[:-1] + [f]
            if f not in plan and frozenset(trial) not in taken and not any(conflicts(f, p) for p in trial[:-1]):
                plan[:] = trial
                seen.add(frozenset(trial))
                break
    return plans

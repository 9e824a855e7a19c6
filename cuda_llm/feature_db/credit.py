"""What one evaluated candidate teaches about the features: which are credited, with how much, and whether
the coder did what the planner asked. Pure: no I/O (the caller reads the sources and compile reports).

The rules (issue 13, item 4):

- A feature is credited only where the detector finds it in the candidate and its parent did not have it.
  A feature the planner asked for that the code does not use is a compliance miss: recorded as such,
  shown to the planner, and never given any of the step's reward.
- The reward is a measure that means the same in round 1 and in round 10: the share of the parent's
  remaining headroom to speed of light that the step closed,

      closed = (parent_ms - ms) / (parent_ms - sol_ms)          clipped to [-1, 1]

  split evenly among the step's new features. A round-1 rewrite of the naive kernel that lands at 50% of
  speed of light closes ~0.97 of the headroom, shared by the six or eight features it introduced at once;
  a round-10 step that adds one feature and goes from 70% to 80% closes 0.42 of what was left, all of it
  credited to that feature. A log-speedup over the parent gave the rewrite's co-occurring features 5-8x
  each and the late single feature 1.14x.
- Without a speed-of-light bound (no measured peaks) the share of the parent's time removed is used
  (sol_ms = 0): still in [-1, 1] and comparable across rounds, only less sharp near the roof.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pydantic import BaseModel, Field

from cuda_llm.feature_db.detect import detect_features
from cuda_llm.results import KernelResources, SassSummary

REWARD_CLIP = 1.0            # a step closes at most all of the headroom; a regression counts down to -1
MIN_HEADROOM_SHARE = 0.05    # a parent within 5% of the bound: headroom taken as 5% of its time (no blow-up)


class StepOutcome(BaseModel):
    """What the judge said about one candidate and its parent (times at the benchmark shape)."""

    compiled: bool
    passed: bool
    ms: float | None = None          # the candidate's median
    parent_ms: float | None = None   # the parent's median when the candidate was asked for
    sol_ms: float | None = None      # speed-of-light bound at the same shape (None: unknown)


class Credit(BaseModel):
    """The lesson of one step: who gets credit, how much, and how the coder followed the plan."""

    asked: list[str] = Field(default_factory=list)      # what the planner asked for
    credited: list[str] = Field(default_factory=list)   # detected in the candidate and absent from the parent
    complied: list[str] = Field(default_factory=list)   # asked and present in the code (new or kept)
    absent: list[str] = Field(default_factory=list)     # asked but not in the code: no credit, compliance miss
    headroom_closed: float | None = None                # share of the parent's headroom closed (passed steps)
    reward_per_feature: float | None = None             # headroom_closed split among the credited features
    speedup_over_parent: float | None = None            # parent_ms / ms (passed steps), for display only

    @property
    def compliance(self) -> float | None:
        """Share of the asked features the code really uses (None when nothing was asked)."""
        return len(self.complied) / len(self.asked) if self.asked else None


def headroom_closed(parent_ms: float, ms: float, sol_ms: float | None) -> float:
    """(parent - candidate) / (parent - speed of light), clipped to [-1, 1]; sol unknown counts as 0."""
    if not (parent_ms > 0 and ms > 0):
        raise ValueError(f"times must be positive (parent {parent_ms!r} ms, candidate {ms!r} ms)")
    sol = sol_ms if sol_ms is not None and sol_ms > 0 else 0.0
    headroom = max(parent_ms - sol, MIN_HEADROOM_SHARE * parent_ms)
    return max(-REWARD_CLIP, min(REWARD_CLIP, (parent_ms - ms) / headroom))


def credit_step(asked: Iterable[str], detected: Iterable[str], parent_detected: Iterable[str],
                outcome: StepOutcome) -> Credit:
    """The credit of one evaluated candidate.

    ``detected`` / ``parent_detected``: feature ids the detectors found in the candidate and in its parent
    (found the same way: both with or both without the compile report). Compile failures and wrong
    answers credit their new features with a failed try (the caller counts it) and no reward.
    """
    asked_l = list(dict.fromkeys(asked))
    found = set(detected)
    parent = set(parent_detected)
    credited = sorted(found - parent)
    complied = [f for f in asked_l if f in found]
    absent = [f for f in asked_l if f not in found]
    closed = share = speedup = None
    if outcome.passed and outcome.ms and outcome.parent_ms and outcome.ms > 0 and outcome.parent_ms > 0:
        closed = headroom_closed(outcome.parent_ms, outcome.ms, outcome.sol_ms)
        speedup = outcome.parent_ms / outcome.ms
        if credited:
            share = closed / len(credited)
    return Credit(asked=asked_l, credited=credited, complied=complied, absent=absent, headroom_closed=closed,
                  reward_per_feature=share, speedup_over_parent=speedup)


def detect_pair(source: str, kernels: Sequence[KernelResources] | None, parent_source: str | None,
                parent_kernels: Sequence[KernelResources] | None, features=None, *, sass: SassSummary | None = None,
                parent_sass: SassSummary | None = None) -> tuple[set[str], set[str]]:
    """Features of a candidate and of its parent, found the same way: the compile-report rules are used
    for both or for neither, and so are the machine-code (SASS) rules, so a rule that only the candidate's
    build can fire never makes a feature the parent already had look new; the PTX dataflow facts likewise
    (a parent built before they were read has none). No parent source: the parent has nothing."""
    use_reports = kernels is not None and parent_kernels is not None
    use_sass = sass is not None and parent_sass is not None
    if use_sass and bool(sass.flow) != bool(parent_sass.flow):
        sass, parent_sass = sass.model_copy(update={"flow": {}}), parent_sass.model_copy(update={"flow": {}})
    mine = detect_features(source, list(kernels or []) if use_reports else [], features,
                           sass=sass if use_sass else None)
    theirs = (detect_features(parent_source, list(parent_kernels or []) if use_reports else [], features,
                              sass=parent_sass if use_sass else None)
              if parent_source else set())
    return mine, theirs

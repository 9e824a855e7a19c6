"""Which features may be offered for one parent kernel: preconditions, the parent's facts, known wins. Pure.

A feature applies to a task by its catalogue fields (family, bound, tolerance, dtypes, architecture:
bandit.applicable). Whether it can do anything for *this parent* is a second question: PDL needs a
dependent launch, so a one-kernel solve() has nothing to gain from it; split-K needs a long reduction over
too few outputs to fill the GPU; stream_ordered_alloc needs a solve() that allocates. Those preconditions
live in ``offers.toml`` beside the catalogue (one table per feature, apart from the feature files and their
detectors), as names of facts that this module computes from the task and the parent: its source, its
number of kernels per solve() (the profile's count when there is one, else the launch sites of the
source) and the features the detectors find in it. A feature the parent already uses is not offered
again, unless its table names the refinement (``refinement``).

The same file lists each family's (and task tag's) known wins: what moves a naive kernel of that kind.
With the diagnosis's suggestions they are the planner's prior while a feature is untried (cold_prior).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from cuda_llm.feature_db.catalogue import load_catalogue
from cuda_llm.feature_db.detect import split_source
from cuda_llm.tasks.formulas import evaluate_int
from cuda_llm.feature_db.bandit import rank_features, shortlist, task_filters
from cuda_llm.feature_db.model import KNOWN_FAMILIES, Feature
from cuda_llm.tasks.precision import TENSOR_FAMILIES

OFFERS_FILE = Path(__file__).parent / "offers.toml"

LONG_REDUCTION_FLOPS = 256        # flops per output from which an output is a long reduction (a GEMM's 2K, a dot)
THREADS_PER_SM = 2048             # resident threads per SM (sm_70 to sm_90): one thread per output fills
                                  # the GPU only with at least sm_count x this many outputs
DEFAULT_SM_COUNT = 132            # an H100 SXM, when the device is not known
KNOWN_WIN_PRIOR = 0.15            # prior mean of the headroom share an untried known win closes
SUGGESTED_PRIOR = 0.25            # ... and a feature the diagnosis or the critic suggests for this parent

Fact = Literal[
    "multi_kernel", "allocates", "shared_memory", "scatter", "math_functions", "tiled",
    "reduces", "rows", "softmax", "prefix", "sorting", "distances", "matrix_product", "input_reuse", "transposes",
    "long_reduction", "few_outputs", "tensor_products",
]
# What each fact means (the docs and a test keep these in step with Fact).
FACTS: dict[str, str] = {
    "multi_kernel": "solve() launches two kernels or more (the profile's count, else the source's launch sites)",
    "allocates": "solve() calls cudaMalloc/cudaFree (or a managed or host allocation)",
    "shared_memory": "the parent declares shared memory",
    "scatter": "the outputs are counts or sums scattered by key (histogram): contended atomics",
    "math_functions": "the parent calls float math functions that have fast approximate forms (exp, log, sqrt, tanh, ...; rsqrtf is one already)",
    "tiled": "the parent already stages tiles (shared-memory tiling, cp.async, TMA or tensor cores)",
    "reduces": "an output sums (or maxes, counts, scans) many inputs: a reducing family or tag, or a long reduction",
    "rows": "each row of the output comes from a reduction along that row (row-reduction tag, matvec, sparse, "
            "normalization, loss)",
    "softmax": "the task computes a softmax (tag) or attention",
    "prefix": "the task scans (prefix sums), or sorts by digits whose offsets are a scan",
    "sorting": "the task sorts",
    "distances": "the task compares points by distance (clustering, tag distance)",
    "matrix_product": "the work is a matrix product (matmul, convolution, attention, distances as a product)",
    "input_reuse": "each input value is read by many outputs (products, stencils, matvec, all-pairs)",
    "transposes": "the task moves data across rows and columns (transpose)",
    "long_reduction": f"at the benchmark shape each output costs {LONG_REDUCTION_FLOPS} flops or more",
    "few_outputs": "at the benchmark shape there are fewer outputs than the GPU has resident threads",
    "tensor_products": "the parent's products run on tensor cores (mma.sync, WMMA, wgmma, a 3xTF32 or fp16 split)",
}
REDUCING_FAMILIES = frozenset({"reduction", "normalization", "loss", "matvec", "histogram", "scan", "sparse"})
ROW_FAMILIES = frozenset({"normalization", "loss", "matvec", "sparse"})
REUSE_FAMILIES = frozenset({"matmul", "convolution", "attention", "stencil", "matvec", "nbody", "clustering"})
# staged tiles of a matrix product or stencil (a per-thread accumulator array alone is not a tile)
TILED_FEATURES = frozenset({"smem_tiling", "cp_async", "tma_bulk_copy", "tensor_cores_3xtf32", "tensor_cores_mma",
                            "tensor_cores_wmma", "wgmma"})
TENSOR_FEATURES = frozenset({"tensor_cores_3xtf32", "tensor_cores_split_fp16", "tensor_cores_mma", "tensor_cores_wmma",
                             "wgmma"})

_ALLOC = re.compile(r"\bcuda(?:Malloc|Free|MallocManaged|MallocHost|FreeHost|HostAlloc)\s*\(")
_SHARED = re.compile(r"\b__shared__\b")
_MATH = re.compile(r"(?<![\w.])(?:std::)?(?:exp|exp2|expm1|exp10|log|log2|log10|log1p|sqrt|cbrt|tanh|erf|erfc|"
                   r"pow|sin|cos|tan|sincos|sinh|cosh|atan|atan2|normcdf)f?\s*\(")
_LOOP_HEAD = re.compile(r"\b(?:for|while|do)\b")


class OfferRules(BaseModel):
    """One feature's table in offers.toml: the parent facts it needs, and how it refines itself."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    needs: list[Fact] = Field(default_factory=list, description="facts that must all hold")
    needs_any: list[Fact] = Field(default_factory=list, description="facts of which one must hold")
    excludes: list[Fact] = Field(default_factory=list, description="facts of which none may hold")
    refinement: str | None = Field(default=None, description="offered again to a parent that uses it, as this")
    superseded_by: list[str] = Field(default_factory=list,
                                     description="features that do more of the same: a parent using one is not "
                                                 "offered this step back (mma.sync to a wgmma kernel)")


class OffersFile(BaseModel):
    """offers.toml: per-feature preconditions and the known wins per family and per task tag."""

    model_config = ConfigDict(extra="forbid")
    features: dict[str, OfferRules] = Field(default_factory=dict)
    known_wins: dict[str, list[str]] = Field(default_factory=dict, description="family -> feature ids")
    known_wins_by_tag: dict[str, list[str]] = Field(default_factory=dict, description="task tag -> feature ids")
    implies: dict[str, list[str]] = Field(default_factory=dict,
                                          description="feature -> features a parent using it uses too, whether or "
                                                      "not a detector finds them (cp.async copies into shared tiles)")

    @field_validator("known_wins")
    @classmethod
    def _families(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        unknown = sorted(set(v) - KNOWN_FAMILIES)
        if unknown:
            raise ValueError(f"unknown families {unknown}; known: {sorted(KNOWN_FAMILIES)}")
        return v

    def check_ids(self, ids: Iterable[str], where: str) -> None:
        """Every feature id named here exists in the catalogue (a typo would silently offer everything)."""
        known = set(ids)
        named = set(self.features) | {f for r in self.features.values() for f in r.superseded_by} | \
            set(self.implies) | {f for v in self.implies.values() for f in v} | \
            {f for v in self.known_wins.values() for f in v} | \
            {f for v in self.known_wins_by_tag.values() for f in v}
        unknown = sorted(named - known)
        if unknown:
            raise ValueError(f"{where}: unknown feature ids {unknown}")


def load_offers(path: Path = OFFERS_FILE) -> OffersFile:
    """Read and validate an offers file; errors name the file and the field."""
    try:
        data = tomllib.loads(Path(path).read_text())
        return OffersFile.model_validate(data)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML: {exc}") from None
    except ValidationError as exc:
        parts = [f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors()]
        raise ValueError(f"{path}: " + "; ".join(parts)) from None


@lru_cache(maxsize=1)
def builtin_offers() -> OffersFile:
    offers = load_offers()
    offers.check_ids((f.id for f in load_catalogue()), str(OFFERS_FILE))
    return offers


class ParentFacts(BaseModel):
    """What decides which features can help one parent kernel of one task."""

    model_config = ConfigDict(frozen=True)
    family: str
    tags: tuple[str, ...] = ()
    facts: frozenset[str] = frozenset()
    kernels: int | None = None           # kernel launches per solve()
    kernels_from: str = ""               # "profile" or "source"
    detected: frozenset[str] = frozenset()   # features the detectors find in the parent
    lineage: frozenset[str] = frozenset()    # features assigned to the parent or one of its ancestors
    regressed: frozenset[str] = frozenset()  # features of candidates that regressed on (or failed from) it
    implied: frozenset[str] = frozenset()    # features the ones above imply (offers.toml's implies)

    @property
    def uses(self) -> frozenset[str]:
        """What the parent uses: detected, or assigned to it or an ancestor (a detector can miss a feature
        the coder did apply; an assignment it took is still in the kernel it handed down), or implied by one
        of those (a cp.async kernel stages shared-memory tiles even where the tiling detector misses them)."""
        return self.detected | self.lineage | self.implied

    def has(self, fact: str) -> bool:
        return fact in self.facts


# ---------------------------------------------------------------- facts
def code_of(source: str) -> str:
    """The source with comments and string literals blanked (the detectors' view)."""
    return split_source(source or "").code


def launch_sites(source: str) -> tuple[int, bool]:
    """(kernel launch sites in the source, whether one sits inside a loop): a static stand-in for the
    profile's count of kernels per solve()."""
    code = code_of(source)
    sites, in_loop = 0, False
    stack: list[bool] = []          # per open brace: whether it opens a loop body
    last, depth = 0, 0              # start of the current statement; parenthesis depth (a for's header)
    for m in re.finditer(r"[{};()]|<<<|\bcudaLaunch\w*\s*\(|\bcudaGraphLaunch\s*\(", code):
        tok = m.group(0)
        if tok == "(":
            depth += 1
        elif tok == ")":
            depth = max(depth - 1, 0)
        elif tok == "{":
            stack.append(bool(_LOOP_HEAD.search(code[last:m.start()])))
            last = m.end()
        elif tok == "}":
            if stack:
                stack.pop()
            last = m.end()
        elif tok == ";":
            if depth == 0:
                last = m.end()
        else:   # a launch (the cudaLaunch* match ate its own "(")
            if tok != "<<<":
                depth += 1
            sites += 1
            if any(stack) or _LOOP_HEAD.search(code[last:m.start()]):
                in_loop = True
    return sites, in_loop


def outputs_at(task: Any, sizes: Mapping[str, int]) -> int | None:
    """Output elements at these sizes (None when a shape cannot be evaluated)."""
    total = 0
    try:
        for p in task.outputs:
            n = 1
            for d in p.shape or ():
                n *= max(int(evaluate_int(d, sizes)), 0)
            total += n
    except Exception:  # noqa: BLE001 - a shape the formula language cannot evaluate: the fact stays unknown
        return None
    return total


def task_facts(task: Any, sm_count: int | None = None) -> set[str]:
    """The facts that follow from the task alone (family, tags, the benchmark shape's work per output)."""
    family, tags = str(task.family), {str(t) for t in task.tags}
    out: set[str] = set()
    outputs = outputs_at(task, task.benchmark)
    try:
        flops = float(task.flops_at(task.benchmark))
    except Exception:  # noqa: BLE001
        flops = 0.0
    if outputs and flops / outputs >= LONG_REDUCTION_FLOPS:
        out.add("long_reduction")
    if outputs is not None and outputs < (sm_count or DEFAULT_SM_COUNT) * THREADS_PER_SM:
        out.add("few_outputs")
    if family in REDUCING_FAMILIES or any("reduction" in t for t in tags) or "long_reduction" in out:
        out.add("reduces")
    if "row-reduction" in tags or family in ROW_FAMILIES:
        out.add("rows")
    if "softmax" in tags or family == "attention":
        out.add("softmax")
    if family in ("scan", "sort") or "scan" in tags:
        out.add("prefix")
    if family == "sort":
        out.add("sorting")
    if family == "clustering" or "distance" in tags:
        out.add("distances")
    if family in TENSOR_FAMILIES or "distances" in out or "gemm" in tags:
        out.add("matrix_product")
    if family in REUSE_FAMILIES:
        out.add("input_reuse")
    if family == "transpose":
        out.add("transposes")
    if family == "histogram":
        out.add("scatter")
    return out


def parent_facts(task: Any, source: str, *, n_kernels: int | None = None, detected: Iterable[str] = (),
                 shared_bytes: int = 0, sm_count: int | None = None, lineage: Iterable[str] = (),
                 regressed: Iterable[str] = (), offers: OffersFile | None = None) -> ParentFacts:
    """The facts of one parent: ``n_kernels`` from its profile (None: counted from the source's launch
    sites, a launch inside a loop counting as several), ``detected`` its features, ``shared_bytes`` the
    largest static shared memory of its kernels (ptxas), ``lineage`` the features assigned to it and its
    ancestors, ``regressed`` the features of its children that regressed or failed (lineage_features and
    regressed_features compute both from a run's candidates)."""
    facts = task_facts(task, sm_count)
    code = code_of(source)
    if n_kernels is not None and n_kernels > 0:
        kernels, origin = int(n_kernels), "profile"
    else:
        sites, in_loop = launch_sites(source)
        kernels, origin = (max(sites, 2) if in_loop and sites else sites), "source"
    if kernels >= 2:
        facts.add("multi_kernel")
    if _ALLOC.search(code):
        facts.add("allocates")
    if _SHARED.search(code) or shared_bytes > 0:
        facts.add("shared_memory")
    if _MATH.search(code):
        facts.add("math_functions")
    found = frozenset(detected)
    used = found | frozenset(lineage)
    implied = implied_features(used, offers) - used
    if (used | implied) & TILED_FEATURES:
        facts.add("tiled")
    if (used | implied) & TENSOR_FEATURES:
        facts.add("tensor_products")
    return ParentFacts(family=str(task.family), tags=tuple(str(t) for t in task.tags), facts=frozenset(facts),
                       kernels=kernels, kernels_from=origin, detected=found, lineage=frozenset(lineage),
                       regressed=frozenset(regressed), implied=frozenset(implied))


def implied_features(used: Iterable[str], offers: OffersFile | None = None) -> frozenset[str]:
    """Every feature that ``used`` implies, followed to the end (offers.toml's implies). Pure."""
    table = (offers or builtin_offers()).implies
    out: set[str] = set()
    todo = list(used)
    while todo:
        for f in table.get(todo.pop(), ()):
            if f not in out:
                out.add(f)
                todo.append(f)
    return frozenset(out)


# ---------------------------------------------------------------- a parent's history in the run
REGRESSION = 1.05    # a passing candidate this much slower than its parent regressed


def _get(c: Any, key: str) -> Any:
    return c.get(key) if isinstance(c, Mapping) else getattr(c, key, None)


def lineage_features(cands: Iterable[Any], parent_id: str, baseline: str = "baseline") -> set[str]:
    """The features assigned to ``parent_id`` and to every ancestor of it (its parent, that one's parent, ...).
    ``cands``: candidate records (Candidate or dicts with id, parent, features). The last record of an id
    wins (a repair keeps its features). Pure."""
    by_id = {str(_get(c, "id")): c for c in cands if _get(c, "id")}
    out: set[str] = set()
    seen: set[str] = set()
    cur = parent_id or baseline
    while cur and cur != baseline and cur not in seen and cur in by_id:
        seen.add(cur)
        c = by_id[cur]
        out |= set(_get(c, "features") or ())
        cur = _get(c, "parent") or baseline
    return out


def regressed_features(cands: Iterable[Any], parent_id: str, passed: Iterable[str] = ("ok",),
                       baseline: str = "baseline") -> set[str]:
    """The features of ``parent_id``'s children that regressed (passed, ``REGRESSION`` x slower than the
    parent) or failed in every try: each is not given to that parent again, whatever it is paired with. A
    feature of a set that also had a good try (a repair that passed and was fast) is not counted. Pure."""
    ok_status = set(passed)
    verdict: dict[frozenset[str], bool] = {}
    for c in cands:
        feats = frozenset(_get(c, "features") or ())
        status = _get(c, "status")
        if not feats or status in (None, "no_code") or (_get(c, "parent") or baseline) != (parent_id or baseline):
            continue
        ms, pms = _get(c, "ms"), _get(c, "parent_ms")
        good = status in ok_status and ms is not None and not (pms and ms > REGRESSION * pms)
        verdict[feats] = verdict.get(feats, False) or good
    good_feats = {f for s, g in verdict.items() if g for f in s}
    return {f for s, g in verdict.items() if not g for f in s} - good_feats


# ---------------------------------------------------------------- decisions
def why_not(feature: Feature, facts: ParentFacts, offers: OffersFile | None = None) -> str | None:
    """Why the feature cannot help this parent (None: it may be offered). The catalogue's own filters
    (family, bound, tolerance, dtypes, arch) are bandit.applicable's; these are the parent's."""
    offers = offers or builtin_offers()
    rules = offers.features.get(feature.id, OfferRules())
    if feature.id in facts.regressed:
        return "it regressed or failed on this parent"
    if feature.id in facts.uses and rules.refinement is None:
        if feature.id in facts.detected:
            return "the parent already uses it"
        if feature.id in facts.lineage:
            return "it was assigned to the parent or an ancestor"
        return "the parent already uses it (implied by " + ", ".join(
            sorted(f for f in facts.detected | facts.lineage if feature.id in implied_features([f], offers))) + ")"
    beyond = [f for f in rules.superseded_by if f in facts.uses]
    if beyond:
        return "the parent already uses " + ", ".join(beyond) + ", which goes further"
    missing = [f for f in rules.needs if not facts.has(f)]
    if missing:
        return "needs: " + "; ".join(FACTS[f] for f in missing)
    if rules.needs_any and not any(facts.has(f) for f in rules.needs_any):
        return "needs one of: " + "; ".join(FACTS[f] for f in rules.needs_any)
    present = [f for f in rules.excludes if facts.has(f)]
    if present:
        return "not where: " + "; ".join(FACTS[f] for f in present)
    return None


def refinement_of(feature_id: str, facts: ParentFacts, offers: OffersFile | None = None) -> str | None:
    """The refinement a feature the parent already uses is offered as (None: not a refinement)."""
    if feature_id not in facts.uses:
        return None
    return (offers or builtin_offers()).features.get(feature_id, OfferRules()).refinement


def offerable(features: Iterable[Feature], facts: ParentFacts, offers: OffersFile | None = None) -> list[Feature]:
    """The features that can help this parent (keeps the order)."""
    return [f for f in features if why_not(f, facts, offers) is None]


def not_offered(features: Iterable[Feature], facts: ParentFacts,
                offers: OffersFile | None = None) -> dict[str, str]:
    """feature id -> why it is not offered to this parent."""
    out = {}
    for f in features:
        why = why_not(f, facts, offers)
        if why is not None:
            out[f.id] = why
    return out


def known_wins(task: Any, offers: OffersFile | None = None) -> list[str]:
    """The features known to move a naive kernel of this task's family or tags, in the file's order."""
    offers = offers or builtin_offers()
    ids = list(offers.known_wins.get(str(task.family), []))
    for t in task.tags:
        ids += offers.known_wins_by_tag.get(str(t), [])
    return list(dict.fromkeys(ids))


def cold_prior(known: Sequence[str], suggested: Sequence[str]) -> dict[str, float]:
    """The prior mean of the headroom share each feature closes before it is tried: the diagnosis's (or
    the critic's) suggestions for this parent most, the family's known wins next, the rest nothing."""
    prior = {f: KNOWN_WIN_PRIOR for f in known}
    prior.update({f: SUGGESTED_PRIOR for f in suggested})
    return prior


def ranked_offer(catalogue: Sequence[Feature], stats: Any, *, task: Any, facts: ParentFacts, arch: str, seed: int = 0,
                 recommended: Sequence[str] = (), model: str | None = None, top: int | None = None,
                 slots: int | None = None, offers: OffersFile | None = None) -> list[Any]:
    """The bandit's ranking (RankedFeature) of the features that can help this parent, in the order the
    planner gets them: the features recommended for it now (the diagnosis's, the critic's) alternating with
    the family's known wins while untried (a recommended one first), then the rest by the bandit's draw.
    ``slots``: the candidates the list is for (bandit.assign_features leads them with the first ``slots``
    features and seconds them with the next): then the first ``slots`` recommended features come first and
    the first ``slots`` known wins next, so each candidate gets one of each. Both lists are the cold-start
    prior (cold_prior); measured rewards update it. ``top`` keeps the first ``top``, and the best proven
    features by posterior mean (a quarter of the list) whatever their place."""
    offers = offers or builtin_offers()
    known = known_wins(task, offers)
    rec = list(dict.fromkeys(recommended))
    excluded = set(not_offered(catalogue, facts, offers))
    ranked = rank_features(catalogue, stats, arch=arch, task_tags=list(task.tags), seed=seed, exclude=excluded,
                           model=model, prior=cold_prior(known, rec), **task_filters(task))

    # the recommended and the untried known wins alternate, so that each candidate of a round can get one of
    # each; then the rest in the bandit's order
    by_id = {r.feature.id: r for r in ranked}
    recs = [f for f in rec if f in by_id]
    wins = [f for f in known if f in by_id and by_id[f].untried and f not in recs]
    first: list[str] = []
    if slots:
        first = recs[:slots] + wins[:slots]
        recs, wins = recs[slots:], wins[slots:]
    for i in range(max(len(recs), len(wins))):
        first += recs[i:i + 1] + wins[i:i + 1]
    ordered = [by_id[f] for f in first] + [r for r in ranked if r.feature.id not in set(first)]
    return shortlist(ordered, top)


def untried_wins(ranked: Sequence[Any], task: Any, offers: OffersFile | None = None) -> list[str]:
    """The family's known wins among ``ranked`` that were never tried here: what assign_features spreads
    over a round's candidates (``prefer``)."""
    wins = set(known_wins(task, offers))
    return [r.feature.id for r in ranked if r.feature.id in wins and r.untried]

"""What the planner offers a parent: preconditions against the parent's facts, nothing it already uses, the
diagnosis and the family's known wins first at cold start, a free slot per round, and no idea given again to
the parent it failed on."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from cuda_llm.agents.coder import FEATURES_HEAD, FREE_HEAD, CoderContext, build_coder_messages
from cuda_llm.agents.context import TaskBrief
from cuda_llm.agents.planner import CandidatePlan, PlanAnswer, normalize_plan
from cuda_llm.feature_db import StatsStore, assign_features, detect_features, load_catalogue
from cuda_llm.feature_db.offers import (
    FACTS, Fact, OffersFile, builtin_offers, known_wins, launch_sites, load_offers, parent_facts, ranked_offer,
    refinement_of, untried_wins, why_not,
)
from cuda_llm.graph import planning
from cuda_llm.graph.state import Candidate
from cuda_llm.tasks import load_task
from cuda_llm.tasks.loader import SUITE_DIR

CATALOGUE = {f.id: f for f in load_catalogue()}
PDL = CATALOGUE["programmatic_dependent_launch"]


def naive(task: str) -> str:
    return (Path(SUITE_DIR) / task / "naive.cu").read_text()


def facts_of(task: str, source: str | None = None, **kw):
    src = naive(task) if source is None else source
    return parent_facts(load_task(task).task, src, detected=detect_features(src), **kw)


ONE_KERNEL_TASKS = ["gelu", "softmax", "sgemm", "hgemm", "attention", "gemv", "reduce_sum", "layernorm", "stencil2d"]


@pytest.mark.parametrize("task", ONE_KERNEL_TASKS)
def test_pdl_graphs_and_fusion_are_never_offered_to_a_one_kernel_parent(task):
    f = facts_of(task)
    assert f.kernels == 1 and f.kernels_from == "source"
    for fid in ("programmatic_dependent_launch", "cuda_graphs", "kernel_fusion"):
        assert why_not(CATALOGUE[fid], f) is not None, fid
    offer = [r.feature.id for r in ranked_offer(list(CATALOGUE.values()), [], task=load_task(task).task, facts=f,
                                                 arch="sm_90")]
    assert "programmatic_dependent_launch" not in offer and "kernel_fusion" not in offer


def test_a_dependent_launch_makes_pdl_applicable_and_the_profile_count_wins():
    assert why_not(PDL, facts_of("prefix_sum")) is None                        # three launch sites
    assert why_not(PDL, facts_of("sort_u32")) is None                          # a launch inside the pass loop
    assert launch_sites(naive("sort_u32")) == (2, True)
    assert why_not(PDL, facts_of("gelu", n_kernels=3)) is None                  # the profile saw three kernels
    assert why_not(PDL, facts_of("prefix_sum", n_kernels=1)) is not None        # ... or only one
    commented = "// k2<<<1, 1>>>();\n" + naive("gelu")                          # a launch in a comment is none
    assert launch_sites(commented)[0] == 1


def test_preconditions_follow_the_parent_and_the_task():
    assert why_not(CATALOGUE["split_k"], facts_of("sgemm")) is not None        # 4096^2 outputs fill the GPU
    assert why_not(CATALOGUE["split_k"], facts_of("gemv")) is None             # 16k rows of 16k do not
    assert why_not(CATALOGUE["split_k"], facts_of("gemv", sm_count=4)) is not None   # ... on a 4-SM GPU they do
    assert why_not(CATALOGUE["stream_ordered_alloc"], facts_of("gelu")) is not None
    assert why_not(CATALOGUE["stream_ordered_alloc"], facts_of("prefix_sum")) is None     # cudaMalloc in solve()
    assert why_not(CATALOGUE["online_softmax"], facts_of("reduce_sum")) is not None       # a sum, not a softmax
    assert why_not(CATALOGUE["online_softmax"], facts_of("softmax")) is None
    assert why_not(CATALOGUE["tensor_cores_3xtf32"], facts_of("sgemm")) is None
    assert why_not(CATALOGUE["smem_tiling"], facts_of("gelu")) is not None                # no reuse to tile
    assert why_not(CATALOGUE["double_buffering"], facts_of("sgemm")) is not None          # nothing staged yet
    assert "needs" in why_not(CATALOGUE["kernel_fusion"], facts_of("gelu"))               # says why


def test_what_the_parent_uses_is_not_offered_again_except_as_a_named_refinement():
    src = """
#include <cuda_runtime.h>
#define T 16
__global__ void k(const float* A, const float* B, float* C, int n) {
    __shared__ float As[T][T];
    __shared__ float Bs[T][T];
    int r = blockIdx.y * T + threadIdx.y, c = blockIdx.x * T + threadIdx.x;
    float acc[4] = {0, 0, 0, 0};
    for (int t = 0; t < n; t += T) {
        As[threadIdx.y][threadIdx.x] = A[r * n + t + threadIdx.x];
        Bs[threadIdx.y][threadIdx.x] = B[(t + threadIdx.y) * n + c];
        __syncthreads();
        for (int i = 0; i < T; ++i)
            for (int j = 0; j < 4; ++j) acc[j] += As[threadIdx.y][i] * Bs[i][(threadIdx.x + j) % T];
        __syncthreads();
    }
    float v = __expf(acc[0]) + acc[1] + acc[2] + acc[3];
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    C[r * n + c] = v;
}
extern "C" void solve(const float* A, const float* B, float* C, int M, int N, int K) {
    k<<<dim3(N / T, M / T), dim3(T, T)>>>(A, B, C, N);
}
"""
    used = detect_features(src)
    assert {"smem_tiling", "fast_math_intrinsics", "warp_shuffle"} <= used
    f = facts_of("sgemm", src)
    offered = {r.feature.id for r in ranked_offer(list(CATALOGUE.values()), [], task=load_task("sgemm").task, facts=f,
                                                  arch="sm_90")}
    assert "fast_math_intrinsics" not in offered and "warp_shuffle" not in offered
    assert why_not(CATALOGUE["fast_math_intrinsics"], f) == "the parent already uses it"
    assert "smem_tiling" in offered and refinement_of("smem_tiling", f)         # a named refinement
    assert "double_buffering" in offered                                        # the parent now stages tiles


def test_the_diagnosis_and_the_known_wins_lead_at_cold_start_and_measurements_update_them(tmp_path):
    task = load_task("sgemm").task
    f = facts_of("sgemm")
    suggested = ["cp_async", "register_blocking"]
    ranked = ranked_offer(list(CATALOGUE.values()), [], task=task, facts=f, arch="sm_90", seed=3,
                          recommended=suggested)
    ids = [r.feature.id for r in ranked]
    assert ids[0] == "cp_async"                                                 # the diagnosis's first
    wins = known_wins(task)
    assert "tensor_cores_3xtf32" in wins and "kernel_fusion" not in wins
    head = ids[: ids.index("tensor_cores_3xtf32") + 1]
    assert all(i in suggested or i in wins for i in head)                       # no other feature before them
    # each of the round's candidates leads with a recommended feature and gets a known win
    slots = ranked_offer(list(CATALOGUE.values()), [], task=task, facts=f, arch="sm_90", seed=3,
                         recommended=suggested, slots=2, top=10)
    sets = assign_features(slots, 2, 2, seed=3, prefer=untried_wins(slots, task))
    assert {s[0] for s in sets} == set(suggested)
    assert all(set(s) & set(wins) for s in sets)
    # measured: smem_tiling failed five times on this family; it leaves the known-win group and sinks
    store = StatsStore(tmp_path / "stats.sqlite")
    for i in range(5):
        store.record(arch="sm_90", category="matmul", features=["smem_tiling"], compiled=True, passed=False,
                     speedup_over_parent=None, key=f"k{i}")
    warm = [r.feature.id for r in ranked_offer(list(CATALOGUE.values()), store, task=task, facts=f, arch="sm_90",
                                               seed=3, recommended=suggested)]
    assert ids.index("smem_tiling") < 4 and warm.index("smem_tiling") > ids.index("smem_tiling")
    assert "smem_tiling" not in untried_wins(ranked_offer(list(CATALOGUE.values()), store, task=task, facts=f,
                                                          arch="sm_90"), task)


def test_free_slots_of_a_round():
    assert planning.free_slots(4, 1, 1) == {3}
    assert planning.free_slots(4, 2, 5) == {2, 3}
    assert planning.free_slots(4, 9, 1) == {1, 2, 3}            # one slot always stays with the feature search
    assert planning.free_slots(4, 0, 1) == set()
    assert planning.free_slots(1, 1, 1) == {0} and planning.free_slots(1, 1, 2) == set()


def test_the_free_slots_job_has_no_features_and_its_prompt_says_so(tmp_path):
    written: dict[str, str] = {}
    deps = SimpleNamespace(rundir=SimpleNamespace(write_text=lambda rel, text: written.__setitem__(rel, text)))
    plans = [CandidatePlan(features=["smem_tiling", "register_blocking"], idea="tile it"),
             CandidatePlan(features=[], idea="")]
    jobs = planning.jobs_for(deps, 1, plans, [{"parent": "baseline"}], by="bandit")
    assert [j["free"] for j in jobs] == [False, True] and jobs[1]["features"] == []
    assert '"free": true' in written["rounds/r1/plan.json"]
    task = TaskBrief.from_task(load_task("sgemm").task)
    free = build_coder_messages(CoderContext(task=task, candidate="r1c1", free=True))[1].content
    assert FREE_HEAD in free and "take the best next step you see" in free
    assert FEATURES_HEAD not in free and "apply the features above" not in free
    assigned = build_coder_messages(CoderContext(task=task, candidate="r1c0"))[1].content
    assert FEATURES_HEAD in assigned and FREE_HEAD not in assigned


def _cand(cid: str, parent: str, feats: list[str], status: str, ms: float | None = None, parent_ms: float = 1.0,
          repair_of: str | None = None) -> Candidate:
    return Candidate(id=cid, round=1, slot=0, parent=parent, parent_ms=parent_ms, features=feats, status=status, ms=ms,
                     repair_of=repair_of)


def test_a_failed_or_regressed_idea_is_not_given_to_the_same_parent_again():
    cands = [
        _cand("r1c0", "baseline", ["split_k"], "wrong_answer"),
        _cand("r1c0f1", "baseline", ["split_k"], "compile_error", repair_of="r1c0"),     # its repair failed too
        _cand("r1c1", "baseline", ["persistent_kernel", "cp_async"], "ok", ms=6.9),      # 6.9x slower: regressed
        _cand("r1c2", "baseline", ["vector_loads"], "runtime_error"),
        _cand("r1c2f1", "baseline", ["vector_loads"], "ok", ms=0.5, repair_of="r1c2"),   # repaired, and faster
        _cand("r1c3", "baseline", [], "wrong_answer"),                                    # a free slot: no idea
        _cand("r2c0", "r1c2f1", ["split_k"], "ok", ms=0.4, parent_ms=0.5),               # another parent: fine
    ]
    failed = planning.failed_ideas(cands)
    assert failed == {"baseline": {frozenset({"split_k"}), frozenset({"persistent_kernel", "cp_async"})}}
    assert planning.failed_ideas([c.model_dump() for c in cands]) == failed        # from candidates.json as well
    task = load_task("nbody").task
    ranked = ranked_offer(list(CATALOGUE.values()), [], task=task, facts=facts_of("nbody"), arch="sm_90", seed=1,
                          recommended=["split_k"], top=10)
    assert ranked[0].feature.id == "split_k"
    free = assign_features(ranked, 3, 1, seed=1)
    assert ["split_k"] in free                                                       # without the record: offered
    for per in (1, 2):
        sets = assign_features(ranked, 3, per, seed=1, blocked=failed["baseline"])
        assert not {frozenset(s) for s in sets} & failed["baseline"] and all(sets)
    # the LLM planner's answer: a failed set is changed, a deliberately empty one stays free (one at most)
    answer = PlanAnswer(rationale="r", candidates=[CandidatePlan(features=["split_k"], idea="a"),
                                                   CandidatePlan(features=[], idea="b"),
                                                   CandidatePlan(features=[], idea="c")])
    plan = normalize_plan(answer, ["split_k", "smem_tiling", "loop_unrolling"], 3, blocked=[["split_k"]])
    assert plan.candidates[0].features != ["split_k"] and "split_k" in plan.candidates[0].features
    assert plan.candidates[1].features == [] and plan.candidates[2].features
    assert any("failed on this parent" in n for n in plan.adjustments)


def test_the_offers_file_is_checked():
    assert set(FACTS) == set(Fact.__args__)
    builtin_offers()                                    # the shipped file names only catalogue features
    bad = OffersFile.model_validate({"features": {"no_such_feature": {"needs": ["multi_kernel"]}}})
    with pytest.raises(ValueError, match="no_such_feature"):
        bad.check_ids(CATALOGUE, "offers.toml")
    with pytest.raises(ValidationError):
        OffersFile.model_validate({"features": {"split_k": {"needs": ["a_fact_that_does_not_exist"]}}})
    with pytest.raises(ValidationError, match="unknown families"):
        OffersFile.model_validate({"known_wins": {"gemmz": ["smem_tiling"]}})


def test_a_broken_offers_file_names_itself(tmp_path):
    p = tmp_path / "offers.toml"
    p.write_text("[features.split_k]\nneeds = [\"nope\"]\n")
    with pytest.raises(ValueError, match=str(p)):
        load_offers(p)


def test_the_timeline_shows_free_slots_and_recommendations_not_offered():
    from cuda_llm.report.timeline import describe

    line = describe({"event": "decision", "kind": "features", "round": 1, "by": "bandit (rules planner)",
                     "candidates": {"r1c0": ["smem_tiling"], "r1c1": []}})
    assert "r1c0 smem_tiling" in line and "r1c1 free" in line
    line = describe({"event": "decision", "kind": "not_offered", "parent": "baseline",
                     "features": {"programmatic_dependent_launch": why_not(PDL, facts_of("gelu"))}})
    assert line.startswith("recommended but not offered to baseline: programmatic_dependent_launch (needs")


def test_a_step_back_is_not_offered_to_a_parent_that_went_further():
    """A wgmma kernel is not offered mma.sync or wmma, nor a TMA kernel cp.async; a plain tiled one is."""
    task = load_task("hgemm").task
    base = parent_facts(task, naive("hgemm"), detected=frozenset({"smem_tiling"}))
    assert why_not(CATALOGUE["tensor_cores_mma"], base) is None
    wg = parent_facts(task, naive("hgemm"), detected=frozenset({"smem_tiling", "wgmma", "tma_bulk_copy"}))
    assert why_not(CATALOGUE["tensor_cores_mma"], wg) == "the parent already uses wgmma, which goes further"
    assert "wgmma" in why_not(CATALOGUE["tensor_cores_wmma"], wg)
    assert "tma_bulk_copy" in why_not(CATALOGUE["cp_async"], wg)
    offered = {r.feature.id for r in ranked_offer(list(CATALOGUE.values()), [], task=task, facts=wg, arch="sm_90")}
    assert not offered & {"tensor_cores_mma", "tensor_cores_wmma", "cp_async", "wgmma"}


def test_superseding_features_are_catalogue_ids():
    with pytest.raises(ValueError, match="unknown feature ids"):
        OffersFile.model_validate({"features": {"tensor_cores_mma": {"superseded_by": ["wgmma_typo"]}}}).check_ids(
            CATALOGUE, "test")


def test_a_tensor_core_parent_is_offered_neither_cuda_core_tiles_nor_tiles_it_stages_already():
    """The credits of a real 3xTF32 mma.sync convolution whose detectors missed its shared-memory tiles: cp.async
    implies them, so smem_tiling comes back only as its refinement; register_blocking (CUDA-core per-thread
    tiles) is never offered to a kernel whose products run on tensor cores."""
    task = load_task("conv2d").task
    credited = {"coalesced_access", "cp_async", "launch_config_tuning", "loop_unrolling", "occupancy_tuning",
                "readonly_cache", "tensor_cores_3xtf32", "tensor_cores_mma", "vector_loads"}
    f = parent_facts(task, naive("conv2d"), detected=frozenset(credited))
    assert f.has("tensor_products") and f.has("tiled") and "smem_tiling" in f.uses and "smem_tiling" in f.implied
    assert refinement_of("smem_tiling", f)                            # offered, as a different tile shape or depth
    assert why_not(CATALOGUE["register_blocking"], f).startswith("not where: the parent's products run on tensor")
    offered = {r.feature.id for r in ranked_offer(list(CATALOGUE.values()), [], task=task, facts=f, arch="sm_90")}
    assert "register_blocking" not in offered and not offered & credited
    # the same kernel on CUDA cores (no MMA, no cp.async) may still be given both, as new
    plain = parent_facts(task, naive("conv2d"), detected=frozenset({"coalesced_access", "loop_unrolling"}))
    assert why_not(CATALOGUE["register_blocking"], plain) is None and refinement_of("smem_tiling", plain) is None
    # a parent assigned smem_tiling explicitly is told so, not "implied"
    tiled = parent_facts(task, naive("conv2d"), detected=frozenset({"cp_async"}), lineage={"smem_tiling"})
    assert "smem_tiling" in tiled.lineage and "smem_tiling" not in tiled.implied


def test_implied_uses_are_catalogue_ids_and_named_in_the_reason():
    with pytest.raises(ValueError, match="unknown feature ids"):
        OffersFile.model_validate({"implies": {"cp_async": ["smem_tile_typo"]}}).check_ids(CATALOGUE, "test")
    offers = builtin_offers().model_copy(deep=True)
    del offers.features["smem_tiling"]       # without its refinement, an implied use is a reason not to offer it
    f = parent_facts(load_task("hgemm").task, naive("hgemm"), detected=frozenset({"wgmma", "tma_bulk_copy"}),
                     offers=offers)
    assert why_not(CATALOGUE["smem_tiling"], f, offers) == "the parent already uses it (implied by tma_bulk_copy, wgmma)"

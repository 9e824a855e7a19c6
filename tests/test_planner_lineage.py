"""The planner rises with the parent: never a feature the parent uses (detected, or assigned to it or an
ancestor) unless as its named refinement, never one that regressed or failed on that parent, never one whose
precondition the parent fails; the recorded runs replayed through it give none of these."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from cuda_llm.feature_db import assign_features, detect_features, load_catalogue
from cuda_llm.feature_db.offers import (
    lineage_features, parent_facts, ranked_offer, refinement_of, regressed_features, why_not,
)
from cuda_llm.graph.planning import fit_features
from cuda_llm.tasks import load_task
from cuda_llm.tasks.loader import SUITE_DIR

ROOT = Path(__file__).resolve().parents[1]
CATALOGUE = {f.id: f for f in load_catalogue()}
HISTORY = [
    {"id": "r1c0", "parent": "baseline", "features": ["tensor_cores_3xtf32", "loop_unrolling"], "status": "ok",
     "ms": 0.46, "parent_ms": 7.4},
    {"id": "r2c0", "parent": "r1c0", "features": ["register_blocking", "vector_loads"], "status": "ok",
     "ms": 0.44, "parent_ms": 0.46},
    {"id": "r3c0", "parent": "r2c0", "features": ["grid_stride_loop", "cache_hints"], "status": "ok",
     "ms": 0.52, "parent_ms": 0.44},                                    # 1.18x slower: regressed
    {"id": "r3c1", "parent": "r2c0", "features": ["cp_async"], "status": "compile_error", "ms": None,
     "parent_ms": 0.44},
]


def _bench():
    spec = importlib.util.spec_from_file_location("planner_bench", ROOT / "benchmarks" / "planner_bench.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_lineage_and_regressions_are_read_from_the_history():
    assert lineage_features(HISTORY, "r2c0") == {"tensor_cores_3xtf32", "loop_unrolling", "register_blocking",
                                                 "vector_loads"}
    assert lineage_features(HISTORY, "baseline") == set()
    assert regressed_features(HISTORY, "r2c0") == {"grid_stride_loop", "cache_hints", "cp_async"}
    assert regressed_features(HISTORY, "r1c0") == set()
    good_repair = HISTORY + [{"id": "r4c0", "parent": "r2c0", "features": ["cp_async"], "status": "ok", "ms": 0.40,
                              "parent_ms": 0.44}]
    assert "cp_async" not in regressed_features(good_repair, "r2c0")


def test_an_ancestors_assignment_a_regression_and_a_precondition_block_the_feature():
    task = load_task("conv2d").task
    src = (Path(SUITE_DIR) / "conv2d" / "naive.cu").read_text()
    facts = parent_facts(task, src, detected=detect_features(src), lineage=lineage_features(HISTORY, "r2c0"),
                         regressed=regressed_features(HISTORY, "r2c0"))
    assert "tensor_cores_3xtf32" not in facts.detected          # the naive source: only the lineage knows it
    assert why_not(CATALOGUE["tensor_cores_3xtf32"], facts) == "it was assigned to the parent or an ancestor"
    assert why_not(CATALOGUE["grid_stride_loop"], facts) == "it regressed or failed on this parent"
    assert why_not(CATALOGUE["cp_async"], facts) == "it regressed or failed on this parent"
    assert why_not(CATALOGUE["kernel_fusion"], facts).startswith("needs")
    # CUDA-core register tiles are not offered to a kernel whose products the lineage put on tensor cores ...
    assert "tensor cores" in why_not(CATALOGUE["register_blocking"], facts)
    # ... and a refinement stays offered, named, to a CUDA-core parent
    cuda_cores = parent_facts(task, src, detected=detect_features(src), lineage={"register_blocking"})
    assert why_not(CATALOGUE["register_blocking"], cuda_cores) is None
    assert refinement_of("register_blocking", cuda_cores)
    ranked = ranked_offer(list(CATALOGUE.values()), [], task=task, facts=facts, arch="sm_90", seed=3)
    offered = {r.feature.id for r in ranked}
    assert not offered & {"tensor_cores_3xtf32", "loop_unrolling", "vector_loads", "grid_stride_loop", "cp_async"}
    for plan in assign_features(ranked, 3, 2, seed=3):
        assert not set(plan) & {"tensor_cores_3xtf32", "grid_stride_loop", "cache_hints"}
    assert fit_features(["tensor_cores_3xtf32", "register_blocking", "double_buffering"], facts, set(), CATALOGUE) \
        == ["double_buffering"]
    assert fit_features(["double_buffering"], facts, {frozenset({"double_buffering"})}, CATALOGUE) == []


def test_the_checker_of_the_replay_catches_a_repeat_and_a_regression():
    bench = _bench()
    task = load_task("conv2d").task
    facts = parent_facts(task, "", lineage={"tensor_cores_3xtf32"})
    offers = __import__("cuda_llm.feature_db.offers", fromlist=["builtin_offers"]).builtin_offers()
    uses = bench._lineage(HISTORY, "r2c0")
    regressed = bench._regressed(HISTORY, "r2c0")
    assert bench.check_assignment(["tensor_cores_3xtf32"], uses=uses, regressed=regressed, catalogue=CATALOGUE,
                                  facts=facts, offers=offers)
    assert bench.check_assignment(["grid_stride_loop"], uses=uses, regressed=regressed, catalogue=CATALOGUE,
                                  facts=facts, offers=offers)
    assert not bench.check_assignment(["double_buffering"], uses=uses, regressed=regressed, catalogue=CATALOGUE,
                                      facts=facts, offers=offers)
    assert "tensor cores" in " ".join(bench.check_assignment(["register_blocking"], uses=uses, regressed=regressed,
                                                             catalogue=CATALOGUE, facts=facts, offers=offers))


def test_the_recorded_demo_replays_with_no_repeated_or_regressed_assignment(capsys):
    rc = _bench().main(["--replay", "--only", "recorded/softmax"])
    out = capsys.readouterr().out
    assert "recorded planner: repeated or regressed assignments: 2" in out   # split_k twice, as recorded
    assert out.rstrip().endswith("repeated or regressed assignments: 0") and rc == 0

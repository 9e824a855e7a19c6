"""Tuning without a model (cuda_llm/tools/tune/tuning.py): the tune directives, the points, and the search
with Optuna's samplers against a test evaluator whose times are a known function of the parameters."""

from __future__ import annotations

import itertools

import pytest

from parametric_timing_evaluator import ParametricTimingEvaluator, params_of

from cuda_llm.tools.tune.tuning import (
    CODER_TUNABLES_HINT, TuneBudget, TuneSpaceError, all_points, apply_point, default_point, parse_tunables,
    search, space_size,
)

GEMM_LIKE = """#include <cuda_runtime.h>
// cuda-llm: tune BM 16 32 64 128
#define BM 32
// cuda-llm: tune BN 8, 16, 32, 64
#define BN 16   // tile columns
// cuda-llm: tune UNROLL 1 2 4 8
constexpr int UNROLL = 2;
static_assert(BM * BN <= 4096, "tile too large");
extern "C" void solve(const float* x, float* y, int n) {}
"""


def bowl(p: dict[str, int]) -> float:
    """A smooth bowl with its minimum 1.0 ms at BM=64, BN=16, UNROLL=4."""
    return 1.0 + (p["BM"] - 64) ** 2 / 1000 + (p["BN"] - 16) ** 2 / 100 + abs(p["UNROLL"] - 4) / 10


def fits(p: dict[str, int]) -> bool:
    return p["BM"] * p["BN"] <= 4096


def test_directives_are_parsed_with_the_written_value_first():
    ts = parse_tunables(GEMM_LIKE)
    assert [t.name for t in ts] == ["BM", "BN", "UNROLL"]
    assert [t.values for t in ts] == [["32", "16", "64", "128"], ["16", "8", "32", "64"], ["2", "1", "4", "8"]]
    assert [t.line for t in ts] == [3, 5, 7]
    assert space_size(ts) == 64 and len(all_points(ts)) == 64
    # the written point is the source itself, byte for byte (so the candidate's own evaluation is reused)
    assert apply_point(GEMM_LIKE, ts, default_point(ts)) == GEMM_LIKE
    out = apply_point(GEMM_LIKE, ts, {"BM": "128", "BN": "8", "UNROLL": "8"})
    assert "#define BM 128\n" in out and "#define BN 8   // tile columns" in out and "constexpr int UNROLL = 8;" in out
    assert params_of(out) == {"BM": 128, "BN": 8, "UNROLL": 8}
    with pytest.raises(TuneSpaceError, match="not one of the declared values"):
        apply_point(GEMM_LIKE, ts, {"BM": "48"})


def test_a_value_outside_the_list_is_added_and_a_source_without_directives_has_none():
    ts = parse_tunables("// cuda-llm: tune T 8 16\n#define T 12\n")
    assert ts[0].values == ["12", "8", "16"]
    assert parse_tunables("#define T 12\n// cuda-llm: nothing to tune\n") == []


@pytest.mark.parametrize("source, message", [
    ("// cuda-llm: tune T 8 16\nint x;\n", "no `#define T VALUE`"),
    ("// cuda-llm: tune T\n#define T 8\n", "no values"),
    ("// cuda-llm: tune T 8 16\n// cuda-llm: tune T 32\n#define T 8\n", "declared tunable twice"),
    ("// cuda-llm: tune T 8 16\n#define T 8\n#define T 16\n", "defined 2 times"),
    ("// cuda-llm: tune T 8 (1<<4)\n#define T 8\n", "not a single token"),
])
def test_unusable_directives_say_what_is_wrong(source, message):
    with pytest.raises(TuneSpaceError, match=message.replace("(", r"\(").replace("`", ".")):
        parse_tunables(source)


def test_the_coder_hint_describes_syntax_the_parser_accepts():
    assert "// cuda-llm: tune NAME v1 v2 v3" in CODER_TUNABLES_HINT
    src = "// cuda-llm: tune NAME 1 2 3\n#define NAME 2\n// cuda-llm: tune K 4 8\nconstexpr int K = 4;\n"
    assert [t.name for t in parse_tunables(src)] == ["NAME", "K"]


def _optimum(time_of, valid) -> float:
    ts = parse_tunables(GEMM_LIKE)
    return min(time_of({k: int(v) for k, v in p.items()}) for p in all_points(ts)
               if valid({k: int(v) for k, v in p.items()}))


def test_tpe_finds_the_optimum_within_the_budget():
    ev = ParametricTimingEvaluator(bowl, valid=fits)
    ts = parse_tunables(GEMM_LIKE)
    out = search(GEMM_LIKE, ts, compile_batch=ev.compile_batch, measure=ev.measure,
                 budget=TuneBudget(max_evals=24, jobs=4, seed=3))
    assert out.sampler == "tpe" and out.stop_reason == "evals"
    assert out.evaluations == 24 == len(ev.measured)
    assert len(set(ev.measured)) == len(ev.measured), "a point was timed twice"
    best = _optimum(bowl, fits)
    assert out.best is not None and out.best.ms <= best * 1.05      # within 5% of the exhaustive best
    assert out.written is not None and out.written.params == default_point(ts) and out.points[0].index == 0
    assert out.best.ms <= out.written.ms
    print(f"\nTPE: {out.summary()}; exhaustive best {best:.3f} ms")


def test_a_space_within_the_budget_is_searched_exhaustively_and_finds_the_exact_optimum():
    ev = ParametricTimingEvaluator(bowl, valid=fits)
    ts = parse_tunables(GEMM_LIKE)
    out = search(GEMM_LIKE, ts, compile_batch=ev.compile_batch, measure=ev.measure,
                 budget=TuneBudget(max_evals=64, jobs=8))
    assert out.sampler == "grid" and out.stop_reason == "space"
    assert len(out.points) == 64 and len({tuple(p.params.values()) for p in out.points}) == 64
    assert out.best.params == {"BM": "64", "BN": "16", "UNROLL": "4"} and out.best.ms == pytest.approx(1.0)


def test_points_that_do_not_compile_are_skipped_reported_and_cost_no_evaluation():
    ev = ParametricTimingEvaluator(bowl, valid=fits)
    ts = parse_tunables(GEMM_LIKE)
    out = search(GEMM_LIKE, ts, compile_batch=ev.compile_batch, measure=ev.measure,
                 budget=TuneBudget(max_evals=64, jobs=8))
    invalid = [p for p in out.points if p.status == "compile_error"]
    n_invalid = sum(1 for p in all_points(ts) if not fits({k: int(v) for k, v in p.items()}))
    assert n_invalid > 0 and len(invalid) == out.invalid == n_invalid
    assert all("static assertion" in p.note and p.ms is None for p in invalid)
    assert all(not fits({k: int(v) for k, v in p.params.items()}) for p in invalid)
    assert out.evaluations == 64 - n_invalid == len(ev.measured)
    assert out.best is not None and fits({k: int(v) for k, v in out.best.params.items()})


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tpe_learns_where_points_do_not_compile_and_spends_its_whole_budget(seed):
    """Over half of this space does not compile: told as failures, TPE kept proposing such points and the
    search ran out of proposals after 6-13 of 16 evaluations; told as infinitely slow, it moves away."""
    def small(p: dict[str, int]) -> bool:
        return p["BM"] * p["BN"] <= 512                      # 24 of the 64 points

    ev = ParametricTimingEvaluator(bowl, valid=small)
    ts = parse_tunables(GEMM_LIKE)
    out = search(GEMM_LIKE, ts, compile_batch=ev.compile_batch, measure=ev.measure,
                 budget=TuneBudget(max_evals=16, jobs=4, seed=seed))
    assert out.sampler == "tpe" and out.invalid > 0
    assert out.stop_reason == "evals" and out.evaluations == 16 == len(set(ev.measured)), out.summary()
    assert out.best is not None and small({k: int(v) for k, v in out.best.params.items()})


def test_wrong_answers_never_win_and_the_seconds_budget_stops_the_search():
    # the fastest points give wrong answers: they are measured, reported, and never the best
    ev = ParametricTimingEvaluator(bowl, wrong=lambda p: p["UNROLL"] == 4)
    ts = parse_tunables(GEMM_LIKE)
    out = search(GEMM_LIKE, ts, compile_batch=ev.compile_batch, measure=ev.measure, budget=TuneBudget(max_evals=64))
    assert any(p.status == "wrong_answer" for p in out.points)
    assert out.best.params["UNROLL"] != "4" and out.best.status == "ok"

    now = [0.0]

    def measure(src, pt):
        now[0] += 10.0                  # each measurement takes 10 s on this clock
        return ev.measure(src, pt)

    out = search(GEMM_LIKE, ts, compile_batch=ev.compile_batch, measure=measure,
                 budget=TuneBudget(max_evals=64, max_seconds=35, jobs=2), clock=lambda: now[0])
    assert out.stop_reason == "seconds" and out.evaluations == 4


def test_a_source_without_tunables_cannot_be_searched():
    ev = ParametricTimingEvaluator(bowl)
    with pytest.raises(TuneSpaceError, match="declares no tunables"):
        search("#define BM 4\n", [], compile_batch=ev.compile_batch, measure=ev.measure)


def test_exhaustive_reference_matches_a_brute_force_minimum():
    ts = parse_tunables(GEMM_LIKE)
    pts = all_points(ts)
    brute = min((bowl({k: int(v) for k, v in p.items()}), tuple(p.values())) for p in pts
                if fits({k: int(v) for k, v in p.items()}))
    assert brute[1] == ("64", "16", "4")
    assert len(pts) == len(list(itertools.product(*(t.values for t in ts))))

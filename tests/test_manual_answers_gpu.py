"""The hand-written softmax kernels that benchmarks/manual_run.py answers the coder's prompts with pass every
shape (held-out ones included) and are timed on the GPU; each round's kernel should be faster than the naive one."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu_long
ANSWERS = Path(__file__).resolve().parents[1] / "benchmarks" / "manual_answers" / "softmax"


@pytest.mark.parametrize("name", ["r1.cu", "r2.cu", "r3.cu"])
def test_hand_written_softmax_passes_and_beats_the_naive_kernel(name):
    from cuda_llm.tasks import load_task
    from cuda_llm.tools.harness.evaluate import EvalOptions, baseline_result, evaluate_candidate
    from cuda_llm.tools.harness.timing_budget import TimingBudget

    loaded = load_task("softmax")
    opts = EvalOptions(budget=TimingBudget(time_budget_s=2.0))
    base = baseline_result(loaded, "naive", opts)
    res = evaluate_candidate(loaded, (ANSWERS / name).read_text(), candidate=name, options=opts)
    assert res.status.value == "ok", res.message
    print(f"\n{name}: {res.median_ms:.4f} ms, {res.timing.pct_of_sol or 0:.0f}% of speed of light"
          + (f"; naive {base.median_ms:.4f} ms" if base is not None and base.median_ms else ""))
    if base is not None and base.median_ms:
        assert res.median_ms < base.median_ms / 2

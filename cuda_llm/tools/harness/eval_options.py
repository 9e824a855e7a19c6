"""How one candidate is judged: the harness's knobs (build arch, the timing budget, held-out cases, the
GPU). Its own module so that the judge, the PyTorch baselines and the evaluation entry point (evaluate.py)
share it without importing one another. How long and how often to time is one ``TimingBudget``
(timing_budget.py), held whole and handed on whole to the GPU worker and the PyTorch timer."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from cuda_llm.tools.harness.timing_budget import TimingBudget


class EvalOptions(BaseModel):
    """The defaults are the product's: callers (eval, optimize, tune, benchmarks) override what they must.
    Unknown fields are refused (a timing knob given here instead of in ``budget`` is an error, not ignored)."""

    model_config = ConfigDict(extra="forbid")

    arch: str | None = None
    timeout_s: float = 120.0         # the whole evaluation in the worker
    budget: TimingBudget = Field(default_factory=TimingBudget)
    seed: int | None = None
    held_out: bool = True
    timing: bool = True              # False: test only, no timing at the benchmark shape
    allow_libraries: bool = False
    gpu: int | None = None           # which visible GPU the worker gets (CUDA_VISIBLE_DEVICES pinned); default the first
    validation_cap_s: float = 20.0   # after a failing case, start no new case once this has passed

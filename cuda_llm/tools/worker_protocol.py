"""Requests and responses between the parent process and the GPU worker (JSON files, pydantic models).

The worker runs in a child process so that a crash, a CUDA fault or a hang of a candidate becomes a
result instead of taking the caller down; these models are all that crosses that boundary.
"""

from __future__ import annotations

import json

from pydantic import BaseModel, Field

from cuda_llm.results import DeviceInfo, Status, TimingResult, ValidationResult

# Exit codes of ``gpu_worker evaluate`` (anything else, e.g. a negative signal number, is a crash).
EXIT_OK = 0
EXIT_CUDA_FAULT = 3      # the candidate broke the CUDA context; the result file says how
EXIT_HARNESS = 4         # the worker itself failed (task data, reference): not the kernel's fault


class CaseSpec(BaseModel):
    """One correctness case: sizes, and whether prompts never show this shape."""

    sizes: dict[str, int]
    held_out: bool = False


class RunOnceRequest(BaseModel):
    """Call solve() ``repeat`` times at ``sizes`` between cuProfilerStart/Stop (for Nsight Compute)."""

    so_path: str
    task_folder: str
    sizes: dict[str, int]
    seed: int = 0
    repeat: int = Field(default=1, ge=1)


class EvaluateRequest(BaseModel):
    """Validate every case, time at the benchmark shape, validate again on fresh inputs."""

    so_path: str
    task_folder: str
    seed: int = 0
    held_out: bool = True
    timing: bool = True
    time_budget_s: float = 10.0
    min_reps: int = 10
    min_time_s: float = 0.3          # sample at least this long (a stable median for short kernels)
    max_reps: int = 500
    rse_target: float = 0.01
    warmup: int = 3
    benchmark_sizes: dict[str, int] | None = None   # default: the task's benchmark shape
    cases: list[CaseSpec] | None = None             # default: every shape of the task (held-out ones if held_out)
    validation_cap_s: float = 20.0                  # after a failing case, start no new case past this
    timing_repeats: int = Field(default=1, ge=1)     # extra timings of the same data: spread of the median
    cache_benchmark_data: bool = True               # reuse the benchmark-shape inputs + reference on disk
    cache_dir: str | None = None


class WorkerError(BaseModel):
    status: Status                 # runtime_error or wrong_answer
    message: str
    stage: str = ""                # "validation", "timing", "revalidation"


class EvaluateResponse(BaseModel):
    device: str | None = None
    validation: ValidationResult | None = None
    timing: TimingResult | None = None
    revalidation: ValidationResult | None = None
    hidden_median_ms: float | None = None   # device busy after solve()'s stop event completed
    repeat_medians_ms: list[float] = Field(default_factory=list)   # one per timing repeat
    repeat_seconds: list[float] = Field(default_factory=list)
    benchmark_data_s: float = 0.0           # making or loading the benchmark-shape inputs and reference
    error: WorkerError | None = None
    harness_error: str | None = None        # the worker failed for a reason that is not the kernel's
    notes: list[str] = Field(default_factory=list)
    seconds: float = 0.0


class DeviceInfoResponse(BaseModel):
    info: DeviceInfo
    seconds: float = 0.0


EvalRequest = EvaluateRequest
EvalResponse = EvaluateResponse


def dump_json(model: BaseModel) -> str:
    """JSON that keeps NaN and Inf (as the tokens NaN/Infinity, which model_validate_json reads back):
    pydantic's own dump turns them into null, and "got NaN" is exactly what a wrong kernel's report needs."""
    return json.dumps(model.model_dump(mode="python"), indent=1, default=str)

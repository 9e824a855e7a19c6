"""What crosses the boundary between the parent (the judge) and the GPU worker (the only process that loads
candidate code).

The worker runs in a child process so that a crash, a CUDA fault, an exit or a hang of a candidate becomes
a result instead of taking the caller down, and so that nothing the candidate does in that process can
reach the verdict. The parent sends commands as JSON lines on the worker's stdin; the worker answers with
JSON event lines on a channel of its own (``--events-fd``; a candidate's printf goes to stdout, never there),
which the parent time-stamps with when they were sent (event_channel.py). Arrays travel as .npy files in an exchange folder on tmpfs
(see transport.py): inputs from the parent, raw outputs, inputs after the call and guard bytes back.

Commands (parent -> worker):
    {"cmd": "case", "i", "sizes", "held_out", "dir"}       run solve() once on the inputs in dir
    {"cmd": "time", ...TimeCommand}                         the timing loop at the benchmark shape
    {"cmd": "repeat"}                                       answer to checks-wait: every check passed, time again
    {"cmd": "quit"}
Events (worker -> parent): ready, calling/returned (around an untimed solve()), case, fault, error,
sets-ready, check-ready, first, timing-start, t, b, timing-end, last, snaps, post, checks-wait (only with timing
repeats; the worker then waits for "repeat", or is stopped), repeat, timed, bye. Inside the loop: t (one per timed
call, with ``bad``: elements outside the tolerance of its set's reference, counted on the device), b (a blank
iteration without solve()) and wrong (a timed call whose output failed that count; the loop stops there).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

from cuda_llm.results import DeviceInfo, Status, TimingResult, ValidationResult
from cuda_llm.tools.harness.timing_budget import TimingBudget

# Exit codes of ``gpu_worker serve`` (anything else, e.g. a negative signal number, is a crash or an exit
# the candidate caused).
EXIT_OK = 0
EXIT_CUDA_FAULT = 3      # the candidate broke the CUDA context; the fault event says how
EXIT_HARNESS = 4         # the worker itself failed (task data, files): not the kernel's fault

GUARD_BYTES = 1024       # after every buffer: a store past the end lands here and is reported
GUARD_BYTE = 0xA5


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


class ServeRequest(BaseModel):
    """What the worker loads before the first command: the candidate and its task."""

    so_path: str
    task_folder: str


# element types of the device comparison (device_compare.py's cuda_llm_count_bad), by code
COMPARE_TYPES = {"float32": 0, "float16": 1, "float64": 2, "int32": 3, "uint32": 4, "int64": 5, "uint8": 6}


class OutputCheck(BaseModel):
    """One output's references at the benchmark shape (a .npy file per timed input set) and tolerances."""

    name: str
    refs: dict[int, str]
    tol: dict[int, tuple[float, float]]      # set -> (atol, rtol)
    exact: bool = False                      # integers with no tolerance: compared as integers


class CallCheck(BaseModel):
    """Every timed call's outputs compared on the device with the references of the set it was given."""

    lib: str | None = None                   # device_compare.py's build (None: a device that compares itself)
    outputs: list[OutputCheck]


class TimeCommand(BaseModel):
    """The timing loop: input sets (files), what to keep, the references every call is compared with on the
    device (never sent to the worker before validation passed), and the timing budget (when to stop, warm-up,
    repeats) whole."""

    sizes: dict[str, int]
    sets: dict[str, dict[str, Any]]          # bench_data.BenchSets.plan()
    timed_sets: list[int] = Field(default_factory=lambda: [0, 1, 2])
    post_set: int = 3
    dirs: dict[str, str]                     # "first", "last", "post", "snap" -> exchange folders
    schedule_seed: int
    slots_per_set: int = 1
    blank_every: int = Field(default=2, ge=1)   # one blank iteration after every this many timed calls
    budget: TimingBudget = Field(default_factory=TimingBudget)   # the evaluation's, as it was given
    check: CallCheck | None = None


class WorkerError(BaseModel):
    status: Status                 # runtime_error or wrong_answer
    message: str
    stage: str = ""                # "validation", "timing", "revalidation"


class ClockCheck(BaseModel):
    """The parent's own clock against the times the worker reported (see timing_stats.clock_issues)."""

    calls: int = 0
    parent_call_ms: float | None = None      # median interval between timed-call events, parent clock
    parent_blank_ms: float | None = None     # the same loop without solve()
    parent_solve_ms: float | None = None     # median of (call interval - nearest blank interval)
    event_median_ms: float | None = None
    loop_s: float | None = None              # first to last timed call, parent clock
    issues: list[str] = Field(default_factory=list)


class EvaluateResponse(BaseModel):
    """The judge's record of one evaluation on the device (written as eval_result.json in the work folder)."""

    device: str | None = None
    validation: ValidationResult | None = None
    timing: TimingResult | None = None
    revalidation: ValidationResult | None = None
    hidden_median_ms: float | None = None   # device busy after solve()'s stop event completed (worker clock)
    clock: ClockCheck | None = None
    repeat_medians_ms: list[float] = Field(default_factory=list)   # one per timing repeat
    repeat_seconds: list[float] = Field(default_factory=list)
    benchmark_data_s: float = 0.0           # making or loading the benchmark-shape input sets and references
    costs: dict[str, float] = Field(default_factory=dict)   # seconds: checker, transport, sets, worker start...
    error: WorkerError | None = None
    harness_error: str | None = None        # the worker failed for a reason that is not the kernel's
    every_call_checked: bool | None = None  # every timed call's outputs compared on the device (None: not timed)
    notes: list[str] = Field(default_factory=list)
    seconds: float = 0.0


class DeviceInfoResponse(BaseModel):
    info: DeviceInfo
    seconds: float = 0.0


def dump_json(model: BaseModel) -> str:
    """JSON that keeps NaN and Inf (as the tokens NaN/Infinity, which model_validate_json reads back):
    pydantic's own dump turns them into null, and "got NaN" is exactly what a wrong kernel's report needs."""
    return json.dumps(model.model_dump(mode="python"), indent=1, default=str)


def encode(obj: dict[str, Any]) -> bytes:
    """One protocol line."""
    return (json.dumps(obj, separators=(",", ":"), default=str) + "\n").encode()


def decode(line: bytes | str) -> dict[str, Any] | None:
    """A protocol line as a dict, or None for anything that is not one (never raises)."""
    try:
        obj = json.loads(line)
    except (ValueError, TypeError):
        return None
    return obj if isinstance(obj, dict) else None

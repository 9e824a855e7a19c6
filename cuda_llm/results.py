"""Result models shared by every tool stage, the CLI and the graph: what happened to one candidate.

These are the boundary of `tools/`: the graph stores them as JSON files in the run directory and keeps
only their small summaries in its state.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any

from pydantic import BaseModel, Field


class Status(str, Enum):
    """Outcome of one evaluation, ordered from earliest failure to success."""

    static_error = "static_error"      # refused before compiling (signature, forbidden call)
    compile_error = "compile_error"
    no_device = "no_device"            # compiled and checked statically; no GPU to test on
    runtime_error = "runtime_error"    # CUDA fault, crash of the worker
    timeout = "timeout"                # hang: the worker was killed
    wrong_answer = "wrong_answer"
    suspect = "suspect"                # passed, but its timing cannot be trusted (below speed of light, hidden work)
    ok = "ok"

    @property
    def passed(self) -> bool:
        """Correct on every case (suspect results passed the tests but are never a win)."""
        return self in (Status.ok, Status.suspect)


class KernelResources(BaseModel):
    """What ptxas reports for one kernel (``-Xptxas -v``)."""

    name: str
    registers: int = 0
    shared_bytes: int = 0          # static shared memory
    constant_bytes: int = 0
    stack_bytes: int = 0
    spill_store_bytes: int = 0
    spill_load_bytes: int = 0

    @property
    def spills(self) -> bool:
        return self.spill_store_bytes > 0 or self.spill_load_bytes > 0


class StaticIssue(BaseModel):
    rule: str                      # e.g. "signature", "forbidden-library", "host-trick"
    message: str
    line: int | None = None


class SassSummary(BaseModel):
    """Which arithmetic units the compiled kernels use, read from their machine code (``cuobjdump -sass``)
    once per build. The speed-of-light bound takes its compute peak from this, never from the source text."""

    opcodes: dict[str, int] = Field(default_factory=dict)   # base mnemonic (FFMA, HGMMA, LDG...) -> count
    # full opcode with its modifiers (LDG.E.128.CONSTANT, LDGSTS.E.BYPASS.128, HMMA.1684.F32.TF32) -> count:
    # what the feature detectors read (vector width, cache operators, copy engines); empty in old results
    ops: dict[str, int] = Field(default_factory=dict)
    tensor: dict[str, int] = Field(default_factory=dict)    # tensor-core input type (fp16, bf16, tf32, fp8, int8, fp64...) -> count
    packed_half: int = 0           # HFMA2/HMUL2/HADD2 arithmetic (twice the fp32 rate), not moves or conversions
    global_widths: dict[int, int] = Field(default_factory=dict)  # bytes per thread -> global LDG/STG/LDGSTS count
    # facts of the PTX's dataflow (tools/compiler/ptx/: shared_tile, register_tile, shared_stages) -> instances,
    # summed over the kernels; empty where the PTX was not read (old results, a build without it)
    flow: dict[str, int] = Field(default_factory=dict)
    # per innermost loop of the machine code (a backward branch holding no other), the counts of the
    # instruction classes tools/compiler/sass.MIX_CLASSES names (HGMMA, HMMA, FFMA, LDGSTS, UTMALDG, BAR...),
    # largest loops first; empty in old results
    loops: list[dict[str, int]] = Field(default_factory=list)

    @property
    def uses_tensor_cores(self) -> bool:
        return any(self.tensor.values())

    @property
    def wide_global_access(self) -> bool:
        """16-byte global accesses (LDG.E.128, cp.async's LDGSTS.E.BYPASS.128): a warp request of such
        consecutive accesses covers 16 sectors (17 unaligned), not the 4 of consecutive floats."""
        return any(w >= 16 and n for w, n in self.global_widths.items())


class CompileResult(BaseModel):
    ok: bool
    arch: str                      # the build target, e.g. "sm_90a" (the architecture-specific target on Hopper)
    source_hash: str
    so_path: str | None = None
    command: list[str] = Field(default_factory=list)
    seconds: float = 0.0
    cached: bool = False
    log: str = ""                  # full nvcc output (may be long; stored on disk by the graph)
    errors: str = ""               # condensed for an LLM: first errors with line numbers and the offending line
    warnings: list[str] = Field(default_factory=list)
    kernels: list[KernelResources] = Field(default_factory=list)
    timed_out: bool = False
    filename: str = "kernel.cu"    # the name the candidate was compiled under (errors and warnings name it)
    undefined_symbols: list[str] = Field(default_factory=list)   # the .so's undefined dynamic symbols (symbol check)
    source_issues: list[StaticIssue] = Field(default_factory=list)  # rules found in the preprocessed host source
    sass: SassSummary | None = None   # None: not read (no cuobjdump, or a vendor library does the work)


class CaseResult(BaseModel):
    """One correctness case: one set of sizes with fresh random inputs."""

    sizes: dict[str, int]
    held_out: bool = False
    passed: bool
    reason: str | None = None      # why it failed, one line (may name counts: never shown for a held-out case)
    kind: str | None = None        # what kind of failure (failure_text.KIND_TEXT): all a held-out case may say
    output: str | None = None      # the first output that failed
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    first_bad_index: list[int] | None = None
    expected: float | None = None  # values at the first bad index
    got: float | None = None
    seconds: float = 0.0
    scale: str | None = None       # a case of scaled inputs: the scale it was drawn at (named in its failure)


class ValidationResult(BaseModel):
    passed: bool
    cases: list[CaseResult] = Field(default_factory=list)
    seconds: float = 0.0

    @property
    def n_passed(self) -> int:
        return sum(c.passed for c in self.cases)

    def first_failure(self) -> CaseResult | None:
        return next((c for c in self.cases if not c.passed), None)


class TimingResult(BaseModel):
    """Event timings of solve() at the benchmark shape, each after an L2 flush."""

    sizes: dict[str, int]
    median_ms: float
    min_ms: float
    mean_ms: float
    iqr_ms: float
    rse: float                     # relative standard error of the mean
    samples_ms: list[float]
    host_median_ms: float | None = None   # host clock around call + full device sync
    repetitions: int
    stop_reason: str               # "rse" (converged) or "budget"
    sol_ms: float | None = None    # speed-of-light bound at this shape
    pct_of_sol: float | None = None  # 100 * sol_ms / median_ms
    sol_basis: str | None = None   # the bound's sentence: which unit it assumes and why (speed_of_light.Bound)
    suspect: bool = False
    suspect_reason: str | None = None
    doubts: list[str] = Field(default_factory=list)   # what made it suspect: "speed_of_light", "hidden_work", "clock"
    retimed_because: str | None = None   # an earlier timing was doubted by the judge's clock alone: why
    every_call_checked: bool | None = None   # every timed call's outputs were compared with their set's reference
    seconds: float = 0.0


class EvalResult(BaseModel):
    """The verdict on one candidate for one task."""

    task: str
    candidate: str                 # an id or file name
    source_hash: str
    status: Status
    message: str = ""              # one paragraph for a person or an LLM: what went wrong, or the headline
    static_issues: list[StaticIssue] = Field(default_factory=list)
    compile: CompileResult | None = None
    validation: ValidationResult | None = None
    timing: TimingResult | None = None
    revalidation: ValidationResult | None = None   # fresh inputs after timing
    baseline_ms: float | None = None
    library_ms: float | None = None   # the yardstick (library, torch.compile) measured with this baseline, if any
    device: str | None = None
    gpu: str | None = None            # which GPU of a pool measured it (its label: "0", "node:1"); None: no pool
    seconds: float = 0.0

    @property
    def median_ms(self) -> float | None:
        return self.timing.median_ms if self.timing else None

    @property
    def speedup(self) -> float | None:
        if self.baseline_ms and self.timing and self.timing.median_ms > 0:
            return self.baseline_ms / self.timing.median_ms
        return None


CHALLENGER, CHAMPION = "challenger", "champion"
# the order of a head-to-head's legs: interleaved and symmetric, so a drift of the GPU (clocks, temperature,
# another tenant) during the job weighs on both kernels alike
HEAD_TO_HEAD_ORDER = (CHALLENGER, CHAMPION, CHAMPION, CHALLENGER)


class HeadToHead(BaseModel):
    """A challenger and the champion timed in turns (HEAD_TO_HEAD_ORDER) in one job on one GPU, each leg a
    whole judged evaluation on fresh inputs: the two are compared under the same conditions, not with a time
    of the champion measured hours earlier."""

    challenger: str                # candidate ids
    champion: str
    order: list[str]               # CHALLENGER / CHAMPION per leg, as measured
    legs: list[EvalResult]

    def of(self, who: str) -> list[EvalResult]:
        return [r for w, r in zip(self.order, self.legs) if w == who]


class DeviceInfo(BaseModel):
    """Facts about the GPU, read from the device; peaks measured once and cached."""

    name: str
    arch: str                      # "sm_90"
    compute_capability: tuple[int, int]
    sm_count: int
    max_threads_per_block: int = 1024
    max_shared_per_block: int = 0          # default limit (48 KiB)
    max_shared_per_block_optin: int = 0    # with cudaFuncSetAttribute
    max_shared_per_sm: int = 0
    registers_per_block: int = 0
    registers_per_sm: int = 0
    l2_bytes: int = 0
    memory_bytes: int = 0
    clock_khz: int = 0
    memory_clock_khz: int = 0
    memory_bus_bits: int = 0
    peak_bandwidth_gbs: float | None = None     # measured device-to-device copy, read + written
    peak_fp32_gflops: float | None = None       # measured FMA-bound kernel
    driver_version: str | None = None
    peak_fp16_tc_gflops: float | None = None    # measured tensor-core MMA, fp16 in, fp32 accumulate (bf16 runs at the same rate)
    peak_tf32_tc_gflops: float | None = None    # measured tensor-core MMA, tf32 in, fp32 accumulate
    tensor_peak_method: str | None = None       # how the tensor peaks were measured ("wgmma sm_90a", "mma.sync sm_80")
    measurement_version: int = 0                # which set of peaks was measured (device_info.MEASUREMENT_VERSION)


def speedup(baseline_ms: float | None, ms: float | None) -> float | None:
    """How many times faster than the baseline; None where either time is missing."""
    return baseline_ms / ms if baseline_ms and ms else None


# What speedup 1.0 is: the task's naive kernel, or PyTorch eager for a task made from a PyTorch module
# (Task.baseline_label picks one; the run records it at set-up).
NAIVE_BASELINE = "naive"
EAGER_BASELINE = "PyTorch eager"


def baseline_label(recorded: Mapping[str, Any] | None, key: str = "label") -> str:
    """The baseline's label as a run recorded it (its state's baseline entry, a trace event); runs recorded
    before the label was kept had naive baselines only."""
    return str((recorded or {}).get(key) or NAIVE_BASELINE)

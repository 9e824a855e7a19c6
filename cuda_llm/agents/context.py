"""What the prompts are built from: small pydantic models, rendered to text for the LLM.

TaskBrief is made from a Task by copying only what may be shown: the correctness shapes it shows come
from ``task.shapes`` alone, so held-out shapes cannot reach a prompt. The other models carry the evidence
the graph gathered (a parent kernel with its timing, speed of light, ptxas resources, profile, diagnosis
and critique; the toolchain; the history) and render it whole: prompt_budget cuts, not these classes.
"""

from __future__ import annotations

import difflib
import inspect
import re
from typing import Any, Iterable, Sequence

from pydantic import BaseModel, Field

from cuda_llm.figures import fmt_ms, fmt_pct
from cuda_llm.agents.budget import MAX_SOURCE_CHARS, cap
from cuda_llm.agents.device_facts import render_sm_limits
from cuda_llm.results import NAIVE_BASELINE, DeviceInfo, KernelResources

MAX_SHAPES_SHOWN = 6
MAX_HISTORY_ITEMS = 12
MAX_HISTORY_CHARS = 6000
MAX_DIFF_CHARS = MAX_SOURCE_CHARS

__all__ = ["cap", "MAX_SOURCE_CHARS", "TaskBrief", "BuildBrief", "render_device", "render_resources", "FeatureBrief",
           "DiagnosisBrief", "CritiqueBrief", "ParentKernel", "HistoryItem", "render_history", "make_diff",
           "HARNESS_RULES"]


class TaskBrief(BaseModel):
    """The task as the LLM sees it."""

    name: str
    description: str
    family: str
    bound: str
    signature: str
    entry: str
    includes: list[str] = Field(default_factory=list)
    params: list[str] = Field(default_factory=list)  # one line per parameter: role, dtype, shape
    inputs: list[str] = Field(default_factory=list)  # one line per input pointer: how its values are drawn
    shapes_sample: list[dict[str, int]] = Field(default_factory=list)
    benchmark: dict[str, int] = Field(default_factory=dict)
    bytes_formula: str = ""
    flops_formula: str = ""
    tolerance: list[str] = Field(default_factory=list)
    magnitudes: str = ""      # the one line on the input magnitudes a correct kernel must handle (scale_cases)
    notes: str = ""

    @classmethod
    def from_task(cls, task: Any, max_shapes: int = MAX_SHAPES_SHOWN) -> "TaskBrief":
        """Copy what may be shown from a Task (or a LoadedTask, whose make_inputs docstring then says how
        custom inputs are drawn). Shapes come from task.shapes only, never task.held_out."""
        make_inputs = getattr(task, "make_inputs", None)
        task = getattr(task, "task", task)
        shapes = [dict(s) for s in task.shapes]
        if len(shapes) > max_shapes:  # keep the extremes and spread the rest
            step = (len(shapes) - 1) / (max_shapes - 1)
            shapes = [shapes[round(i * step)] for i in range(max_shapes)]
        params = []
        for p in task.params:
            if p.kind == "pointer":
                params.append(f"{p.name}: {p.role} {p.dtype.value}[{', '.join(str(d) for d in p.shape)}] (device pointer)")
            else:
                params.append(f"{p.name}: scalar {p.dtype.value}" + (f" = {p.value}" if p.value is not None else ""))
        tolerance = []
        for out in task.outputs:
            tol = task.tolerance_for(out)
            tolerance.append(f"{out.name}: |out - ref| <= {tol.atol} + {tol.rtol} * |ref|")
        return cls(
            name=task.name, description=task.description.strip(), family=task.family, bound=task.bound,
            signature=task.signature, entry=task.entry, includes=list(task.includes), params=params,
            inputs=[_input_line(p, make_inputs) for p in task.inputs],
            shapes_sample=shapes, benchmark=dict(task.benchmark), bytes_formula=str(task.bytes),
            flops_formula=str(task.flops), tolerance=tolerance, notes=_without_file_pointers(task.notes.strip()),
            magnitudes=task.magnitude_text() or "",
        )

    def render(self) -> str:
        shapes = "; ".join(_sizes(s) for s in self.shapes_sample)
        lines = [
            f"Task `{self.name}` ({self.family}; expected {self.bound}-bound, as the task declares): {self.description}",
            "",
            "Entry point (exact signature, in a .cu file compiled with nvcc):",
            f"```cuda\n{self.signature};\n```",
            "Parameters:",
            *[f"- {p}" for p in self.params],
        ]
        if self.includes:
            lines.append("Headers the signature needs: " + ", ".join(self.includes))
        if self.inputs:
            lines += ["How the input values are drawn (fresh for every test and timing call):",
                      *[f"- {i}" for i in self.inputs]]
        lines += [
            f"Some of the correctness test sizes (others, unseen, are tested too): {shapes}",
            f"Benchmark (timed) sizes: {_sizes(self.benchmark)}",
            f"Minimum DRAM traffic: {self.bytes_formula} bytes; work: {self.flops_formula} operations",
            "Tolerance: " + "; ".join(self.tolerance),
        ]
        if self.magnitudes:
            lines.append(self.magnitudes)
        if self.notes:
            lines.append(f"Notes: {self.notes}")
        return "\n".join(lines)


def _input_line(p: Any, make_inputs: Any) -> str:
    g = p.generator
    if g.kind == "normal":
        how = f"normal, mean {g.mean:g}, standard deviation {g.std:g}"
    elif g.kind == "uniform":
        how = f"uniform in [{g.low}, {g.high})"
    elif g.kind == "randint":
        how = f"random integers in [{g.low}, {g.high})"
    else:
        doc = inspect.getdoc(make_inputs) if make_inputs is not None else None
        how = " ".join(doc.split()) if doc else "drawn by the task's own generator"
    return f"{p.name}: {how}"


_FILE_POINTER = re.compile(r"[^.]*\breference\.py\b[^.]*\.?\s*")


def _without_file_pointers(notes: str) -> str:
    """Notes minus sentences that send the reader to reference.py, which the model never sees."""
    return _FILE_POINTER.sub("", notes).strip()


def _sizes(s: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in s.items()) or "(none)"


def _kib(n: int) -> str:
    return f"{n / 1024:.0f} KiB" if n else "?"


class BuildBrief(BaseModel):
    """How candidates are built: the toolchain and the exact command, from the Evaluator seam."""

    cuda_version: str = ""       # e.g. 13.0.88
    ptx_isa: str = ""            # e.g. 9.0
    command: str = ""            # the nvcc line every candidate is compiled with
    rules: str = ""              # what needs which target, guards, links (the compile tool's own text)
    hardware_facts: list[str] = Field(default_factory=list)   # this GPU's facts coders ask for (tools/bounds/tensor_rates)

    def render(self) -> str:
        lines = []
        if self.hardware_facts:
            lines.append("Hardware facts of this GPU (stated once; from the project's stored table, each figure "
                         "marked measured or estimate):\n" + "\n".join(f"- {x}" for x in self.hardware_facts))
        if self.cuda_version or self.ptx_isa:
            lines.append(f"Toolchain: CUDA {self.cuda_version or '?'} (nvcc), PTX ISA {self.ptx_isa or '?'}")
        if self.command and self.command not in self.rules:   # the compile tool's rules usually give it already
            lines.append(f"Every candidate is compiled alone with:\n```\n{self.command}\n```")
        if self.rules.strip():
            lines.append(self.rules.strip())
        return "\n".join(lines) or "Toolchain: unknown"


def render_device(device: DeviceInfo | None) -> str:
    if device is None:
        return "GPU: unknown (no device information; write portable code for sm_80 or newer)."
    cc = f"{device.compute_capability[0]}.{device.compute_capability[1]}"
    lines = [
        f"GPU: {device.name}, compute capability {cc} ({device.arch}), {device.sm_count} SMs, "
        f"max {device.max_threads_per_block} threads per block",
        f"Shared memory: {_kib(device.max_shared_per_block)} per block by default, "
        f"{_kib(device.max_shared_per_block_optin)} per block with cudaFuncSetAttribute opt-in, "
        f"{_kib(device.max_shared_per_sm)} per SM",
        f"Registers: {device.registers_per_block} per block, {device.registers_per_sm} per SM; "
        f"L2 cache {device.l2_bytes / 2**20:.0f} MiB; device memory {device.memory_bytes / 2**30:.0f} GiB",
    ]
    limits = render_sm_limits(tuple(device.compute_capability))
    if limits:
        lines.append(limits)
    peaks = []
    if device.peak_bandwidth_gbs:
        peaks.append(f"measured peak bandwidth {device.peak_bandwidth_gbs:.0f} GB/s")
    if device.peak_fp32_gflops:
        peaks.append(f"measured peak FP32 {device.peak_fp32_gflops / 1000:.1f} TFLOP/s")
    tensor = [f"{name} {v / 1000:.0f}" for name, v in (("fp16", device.peak_fp16_tc_gflops),
                                                        ("tf32", device.peak_tf32_tc_gflops)) if v]
    if tensor:
        peaks.append(f"measured tensor-core peaks {', '.join(tensor)} TFLOP/s")
    if peaks:
        lines.append("; ".join(peaks))
    if device.driver_version:
        lines.append(f"Driver {device.driver_version}")
    return "\n".join(lines)


def render_resources(kernels: Sequence[KernelResources]) -> str:
    if not kernels:
        return "(no ptxas report)"
    out = []
    for k in kernels:
        spill = f", SPILLS {k.spill_store_bytes} B stored / {k.spill_load_bytes} B loaded" if k.spills else ", no spills"
        out.append(f"- {k.name}: {k.registers} registers, {k.shared_bytes} B static shared memory, {k.stack_bytes} B stack{spill}")
    return "\n".join(out)


class FeatureBrief(BaseModel):
    """A catalogue feature as the coder (or critic) needs it."""

    id: str
    name: str = ""
    category: str = ""
    bottleneck: str = ""
    how: str = ""
    exemplar: str = ""
    refinement: str = ""     # the parent already uses it: what to change (offers.toml's refinement)

    @classmethod
    def from_feature(cls, feature: Any) -> "FeatureBrief":
        """From a feature_db Feature (or anything with those attributes)."""
        get = lambda k: getattr(feature, k, "") or ""  # noqa: E731
        return cls(id=feature.id, name=get("name"), category=str(get("category")), bottleneck=str(get("bottleneck")),
                   how=str(get("how")), exemplar=str(get("exemplar")))

    def render(self, with_exemplar: bool = True) -> str:
        head = f"- `{self.id}` ({self.name})" if self.name else f"- `{self.id}`"
        text = head + (f": {self.how.strip()}" if self.how else "")
        if self.refinement:
            text += f"\n  The parent already uses it: refine it as {self.refinement.strip()}."
        if with_exemplar and self.exemplar.strip():
            text += "\n" + self.render_exemplar()
        return text

    def render_exemplar(self) -> str:
        """The whole exemplar (a prompt over budget leaves exemplars out whole, never half a statement)."""
        if not self.exemplar.strip():
            return ""
        return f"Example of `{self.id}`:\n```cuda\n{self.exemplar.strip()}\n```"


class DiagnosisBrief(BaseModel):
    """The rule-based diagnosis (cuda_llm.tools.profile.diagnosis.Diagnosis) as the prompts show it."""

    bottleneck: str = "unknown"
    evidence: list[str] = Field(default_factory=list)
    suggested_features: list[str] = Field(default_factory=list)
    summary: str = ""

    @classmethod
    def from_diagnosis(cls, diagnosis: Any) -> "DiagnosisBrief":
        if isinstance(diagnosis, dict):
            return cls(**{k: v for k, v in diagnosis.items() if k in cls.model_fields})
        return cls(bottleneck=str(getattr(diagnosis, "bottleneck", "unknown")),
                   evidence=list(getattr(diagnosis, "evidence", []) or []),
                   suggested_features=list(getattr(diagnosis, "suggested_features", []) or []),
                   summary=str(getattr(diagnosis, "summary", "") or ""))

    def render(self) -> str:
        lines = [f"bottleneck: {self.bottleneck}"] + [f"- {e}" for e in self.evidence]
        if self.suggested_features:
            lines.append("suggested features: " + ", ".join(self.suggested_features))
        if self.summary:
            lines.append(self.summary)
        return "\n".join(lines)


class CritiqueBrief(BaseModel):
    """The critic's review of one kernel, whole: what limits it, the evidence, the one change to make next."""

    candidate: str = ""
    bottleneck: str = "unknown"
    summary: str = ""
    evidence: list[str] = Field(default_factory=list)
    change: str = ""             # the one change it recommends
    expected_gain: str = ""
    next_features: list[str] = Field(default_factory=list)
    by: str = "critic"           # "critic" (an LLM or a person) or "rules" (the rule-based diagnosis)

    def render(self) -> str:
        who = "the rule-based diagnosis" if self.by == "rules" else "the critic"
        lines = [f"Review of `{self.candidate}` by {who}: {self.bottleneck}", self.summary.strip()]
        if self.evidence:
            lines += ["Evidence:", *[f"- {e}" for e in self.evidence]]
        if self.change.strip():
            lines.append(f"Recommended change: {self.change.strip()}")
        if self.expected_gain.strip():
            lines.append(f"Expected gain: {self.expected_gain.strip()}")
        if self.next_features:
            lines.append("Features it recommends: " + ", ".join(self.next_features))
        return "\n".join(x for x in lines if x)


def speedup_text(speedup: float, baseline_label: str = NAIVE_BASELINE) -> str:
    """'3.50x the naive baseline' (or '... the PyTorch eager baseline'): what a speedup is over."""
    return f"{speedup:.2f}x the {baseline_label} baseline"


class ParentKernel(BaseModel):
    """The kernel a candidate starts from, and everything measured about it."""

    candidate: str = "baseline"
    source: str
    median_ms: float | None = None
    speedup: float | None = None          # over the task's baseline (naive, or PyTorch eager)
    baseline_label: str = NAIVE_BASELINE  # Task.baseline_label
    sol_ms: float | None = None           # speed of light at the benchmark sizes
    pct_of_sol: float | None = None
    sol_basis: str | None = None          # the bound's sentence: which unit it assumes and why
    resources: list[KernelResources] = Field(default_factory=list)
    profile: str = ""                     # one line: kernels, throughputs, occupancy
    profile_evidence: list[str] = Field(default_factory=list)   # stall mix, sectors/request, DRAM bytes, occupancy, waves
    profile_note: str = ""                # why there is no profile, when there is none
    diagnosis: DiagnosisBrief | None = None
    critique: CritiqueBrief | None = None
    features: list[str] = Field(default_factory=list)
    build_notes: list[str] = Field(default_factory=list)   # ptxas messages that cost speed (wgmma serialized, spills)
    sass: list[str] = Field(default_factory=list)          # its machine code summarized: instruction mix, per loop
    label: str = "Parent kernel"          # or: a stepping-stone parent, another approach's best, an inspiration
    role: str = "the kernel to improve on"   # why it is shown (a stepping stone's reason, an inspiration's)

    def render_head(self) -> str:
        timing = f"{self.median_ms:.4f} ms" if self.median_ms is not None else "not timed"
        if self.speedup is not None:
            timing += ", " + speedup_text(self.speedup, self.baseline_label)
        lines = [f"{self.label} `{self.candidate}`{f' ({self.role})' if self.role else ''}: {timing}"]
        if self.sol_ms is not None:
            pct = f"; this kernel runs at {fmt_pct(self.pct_of_sol)}% of it" if self.pct_of_sol is not None else ""
            basis = self.sol_basis or ("the fewest bytes over the measured peak bandwidth, or the fewest flops "
                                       "over the peak rate of the units the kernel uses")
            lines.append(f"Speed of light at the benchmark sizes: {fmt_ms(self.sol_ms)} ms{pct}. {basis}")
        if self.features:
            lines.append("Features it was asked to apply: " + ", ".join(self.features))
        lines += ["Resource usage (ptxas):", render_resources(self.resources)]
        if self.build_notes:
            lines += ["ptxas messages about its build that cost speed:"] + [f"- {x}" for x in self.build_notes]
        if self.sass:
            lines += ["Its machine code (SASS), summarized (counts of instructions; a loop's counts are per "
                      "iteration):"] + [f"- {x}" for x in self.sass]
        return "\n".join(lines)

    def render_evidence(self) -> str:
        lines = []
        if self.profile:
            lines.append(f"Profile (Nsight Compute): {self.profile.strip()}")
        if self.profile_evidence:
            lines += [f"- {e}" for e in self.profile_evidence]
        elif self.profile_note:
            lines.append(f"Profile: none ({self.profile_note})")
        if self.diagnosis is not None:   # the bound's sentence is in the parent's line already: said once
            brief = self.diagnosis.model_copy(update={"evidence": [e for e in self.diagnosis.evidence
                                                                   if not (self.sol_basis and e == self.sol_basis)]})
            lines += ["Rule-based diagnosis:", brief.render()]
        return "\n".join(lines) or "(no profile or diagnosis of the parent)"

    def render_critique(self) -> str:
        return self.critique.render() if self.critique is not None else "(no review of the parent yet)"

    def render_source(self, limit: int = MAX_SOURCE_CHARS) -> str:
        return f"Source of `{self.candidate}`:\n```cuda\n{cap(self.source.strip(), limit, 'source')}\n```"

    def render(self, with_source: bool = True) -> str:
        parts = [self.render_head(), self.render_evidence(), self.render_critique()]
        if with_source:
            parts.append(self.render_source())
        return "\n".join(parts)


class HistoryItem(BaseModel):
    """One earlier attempt, condensed."""

    candidate: str
    round: int = 0
    features: list[str] = Field(default_factory=list)
    status: str  # Status value: ok, compile_error, wrong_answer, ...
    median_ms: float | None = None
    speedup: float | None = None
    note: str = ""  # one line: the error, or what the critic said
    parent: str = ""
    repair_of: str | None = None
    cause: str = ""  # the post-mortem of a regression or a benchmark-only failure: why it ended so

    def render(self) -> str:
        feats = ",".join(self.features) or "-"
        res = self.status
        if self.median_ms is not None:
            res += f" {self.median_ms:.4f} ms"
        if self.speedup is not None:
            res += f" ({self.speedup:.2f}x)"
        origin = f" from {self.parent}" if self.parent else ""
        if self.repair_of:
            origin += f", repair of {self.repair_of}"
        note = " ".join(self.note.split())
        line = f"- r{self.round} {self.candidate}{origin} [{feats}]: {res}" + (f" — {note[:200]}" if note else "")
        cause = " ".join(self.cause.split())
        return line + (f"\n  post-mortem: {cause}" if cause else "")


def render_history(items: Iterable[HistoryItem], max_items: int = MAX_HISTORY_ITEMS, max_chars: int = MAX_HISTORY_CHARS) -> str:
    """The most recent attempts, newest last, within both a count and a character cap."""
    items = list(items)
    if not items:
        return "(no earlier attempts)"
    shown: list[str] = []
    used = 0
    for item in reversed(items[-max_items:]):
        line = item.render()
        if used + len(line) + 1 > max_chars:
            break
        shown.append(line)
        used += len(line) + 1
    skipped = len(items) - len(shown)
    head = [f"({skipped} older attempts not shown)"] if skipped else []
    return "\n".join(head + list(reversed(shown)))


def make_diff(parent_source: str | None, source: str, *, parent: str = "parent", child: str = "candidate",
              max_chars: int = MAX_DIFF_CHARS) -> str:
    """Unified diff from the parent candidate, capped for the prompt."""
    if parent_source is None:
        return "(no parent: first candidate)"
    diff = "".join(difflib.unified_diff(parent_source.splitlines(keepends=True), source.splitlines(keepends=True),
                                        fromfile=parent, tofile=child, n=2))
    return cap(diff, max_chars, "diff") if diff else "(identical to the parent)"


HARNESS_RULES = """\
- Every pointer argument is a device pointer already allocated by the harness with cudaMalloc (so 256-byte aligned at the start; rows inside a buffer are aligned only as far as the sizes make them), arrays contiguous and row-major; never cudaMalloc/cudaMemcpy the inputs or outputs to/from the host.
- The entry point is called from the host and may launch any number of kernels with any configuration (it may also allocate and free scratch device memory; that time counts).
- Stream: solve() is called from one host thread on the legacy default stream (stream 0) of the primary context, and the timer's events are recorded on that stream. Before every timed call the harness switches the input set, poisons the outputs, flushes the L2 with a memset and then synchronizes the whole device, so nothing of the harness is running when solve() starts: programmatic dependent launch can only overlap kernels that solve() itself launches back to back on one stream, never the harness's work. Work on another stream must be joined to stream 0 before solve() returns.
- Scratch memory: the file is loaded once per evaluation and solve() is called many times (correctness cases at several sizes, then untimed calls and the timed calls at the benchmark size). Device memory kept in a static pointer or a __device__ array persists between calls, so scratch allocated on the first call at a size (and grown when a larger size comes) costs nothing in the timed calls, while cudaMalloc/cudaFree inside every call is timed every time. Scratch may hold workspace only, never results: the input contents change between timed calls and a remembered result is caught as wrong.
- The timer measures the whole call of the entry point, host work inside it included (launches, allocations, host-side loops), with the whole device synchronized after it and the L2 flushed before it; results below the speed-of-light bound are rejected as suspect.
- The speed-of-light bound of a kernel is its bytes over the peak bandwidth or its flops over the peak of the units its compiled code (SASS) uses, whichever is larger: the fp32 FMA peak for CUDA-core code, the tensor-core peak of their input type where the SASS has tensor-core instructions. Tensor-core kernels are measured against the tensor-core bound, not the fp32 one, and are welcome wherever the task's tolerance holds (fp32 data: TF32 where the tolerance allows ~1e-3, 3xTF32 for fp32 accuracy).
- No cuBLAS, cuDNN, cuFFT, thrust, or device-wide CUB (cub::Device*); block- and warp-level CUB are allowed. No host-side computation of the result.
- Outputs are poisoned with NaN before each call: write every output element. Inputs must not be modified.
- The result must be correct for every size, including sizes that are not multiples of the block or tile size and very small ones; unseen sizes are tested too.
- The file is compiled alone with the nvcc command shown in the prompt; include what you use."""

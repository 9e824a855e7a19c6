"""What the prompts are built from: small pydantic models, rendered to text for the LLM.

TaskBrief is made from a Task by copying only what may be shown: the correctness shapes it shows come
from ``task.shapes`` alone, so held-out shapes cannot reach a prompt.
"""

from __future__ import annotations

import difflib
from typing import Any, Iterable, Sequence

from pydantic import BaseModel, Field

from cuda_llm.results import DeviceInfo, KernelResources

MAX_SHAPES_SHOWN = 6
MAX_HISTORY_ITEMS = 8
MAX_HISTORY_CHARS = 2500
MAX_SOURCE_CHARS = 12000
MAX_DIFF_CHARS = 4000
MAX_EXEMPLAR_CHARS = 1200


def cap(text: str, limit: int, what: str = "text") -> str:
    text = text or ""
    if len(text) <= limit:
        return text
    return text[:limit].rstrip() + f"\n... [{what} cut: {len(text) - limit} more characters]"


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
    shapes_sample: list[dict[str, int]] = Field(default_factory=list)
    benchmark: dict[str, int] = Field(default_factory=dict)
    bytes_formula: str = ""
    flops_formula: str = ""
    tolerance: list[str] = Field(default_factory=list)
    notes: str = ""

    @classmethod
    def from_task(cls, task: Any, max_shapes: int = MAX_SHAPES_SHOWN) -> "TaskBrief":
        """Copy what may be shown. Shapes come from task.shapes only, never task.held_out."""
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
            shapes_sample=shapes, benchmark=dict(task.benchmark), bytes_formula=str(task.bytes),
            flops_formula=str(task.flops), tolerance=tolerance, notes=task.notes.strip(),
        )

    def render(self) -> str:
        shapes = "; ".join(_sizes(s) for s in self.shapes_sample)
        lines = [
            f"Task `{self.name}` ({self.family}, {self.bound}-bound): {self.description}",
            "",
            "Entry point (exact signature, in a .cu file compiled with nvcc):",
            f"```cuda\n{self.signature};\n```",
            "Parameters:",
            *[f"- {p}" for p in self.params],
        ]
        if self.includes:
            lines.append("Headers the signature needs: " + ", ".join(self.includes))
        lines += [
            f"Some of the correctness test sizes (others, unseen, are tested too): {shapes}",
            f"Benchmark (timed) sizes: {_sizes(self.benchmark)}",
            f"Minimum DRAM traffic: {self.bytes_formula} bytes; work: {self.flops_formula} operations",
            "Tolerance: " + "; ".join(self.tolerance),
        ]
        if self.notes:
            lines.append(f"Notes: {self.notes}")
        return "\n".join(lines)


def _sizes(s: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in s.items()) or "(none)"


def _kib(n: int) -> str:
    return f"{n / 1024:.0f} KiB" if n else "?"


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
    peaks = []
    if device.peak_bandwidth_gbs:
        peaks.append(f"measured peak bandwidth {device.peak_bandwidth_gbs:.0f} GB/s")
    if device.peak_fp32_gflops:
        peaks.append(f"measured peak FP32 {device.peak_fp32_gflops / 1000:.1f} TFLOP/s")
    if peaks:
        lines.append("; ".join(peaks))
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

    @classmethod
    def from_feature(cls, feature: Any) -> "FeatureBrief":
        """From a feature_db Feature (or anything with those attributes)."""
        get = lambda k: getattr(feature, k, "") or ""  # noqa: E731
        return cls(id=feature.id, name=get("name"), category=str(get("category")), bottleneck=str(get("bottleneck")),
                   how=str(get("how")), exemplar=str(get("exemplar")))

    def render(self, with_exemplar: bool = True) -> str:
        head = f"- `{self.id}` ({self.name})" if self.name else f"- `{self.id}`"
        text = head + (f": {self.how.strip()}" if self.how else "")
        if with_exemplar and self.exemplar.strip():
            text += f"\n  Example:\n```cuda\n{cap(self.exemplar.strip(), MAX_EXEMPLAR_CHARS, 'exemplar')}\n```"
        return text


class BestKernel(BaseModel):
    """The kernel to beat (or the parent of this candidate) and what is known about it."""

    candidate: str = "baseline"
    source: str
    median_ms: float | None = None
    speedup: float | None = None  # over the naive baseline
    pct_of_sol: float | None = None
    resources: list[KernelResources] = Field(default_factory=list)
    profile: str = ""  # condensed Nsight Compute metrics
    diagnosis: str = ""  # rule-based or critic summary
    features: list[str] = Field(default_factory=list)
    label: str = "Current best"  # or the role it plays for this coder: a stepping-stone parent, an inspiration

    def render(self, with_source: bool = True) -> str:
        timing = f"{self.median_ms:.4f} ms" if self.median_ms is not None else "not timed"
        if self.speedup is not None:
            timing += f", {self.speedup:.2f}x the naive baseline"
        if self.pct_of_sol is not None:
            timing += f", {self.pct_of_sol:.0f}% of speed-of-light"
        lines = [f"{self.label}: `{self.candidate}` — {timing}"]
        if self.features:
            lines.append("Features it uses: " + ", ".join(self.features))
        lines += ["Resource usage (ptxas):", render_resources(self.resources)]
        if self.profile:
            lines += ["Profile:", self.profile.strip()]
        if self.diagnosis:
            lines += ["Diagnosis:", self.diagnosis.strip()]
        if with_source:
            lines += ["Source:", f"```cuda\n{cap(self.source.strip(), MAX_SOURCE_CHARS, 'source')}\n```"]
        return "\n".join(lines)


class HistoryItem(BaseModel):
    """One earlier attempt, condensed."""

    candidate: str
    round: int = 0
    features: list[str] = Field(default_factory=list)
    status: str  # Status value: ok, compile_error, wrong_answer, ...
    median_ms: float | None = None
    speedup: float | None = None
    note: str = ""  # one line: the error, or what the critic said

    def render(self) -> str:
        feats = ",".join(self.features) or "-"
        res = self.status
        if self.median_ms is not None:
            res += f" {self.median_ms:.4f} ms"
        if self.speedup is not None:
            res += f" ({self.speedup:.2f}x)"
        note = " ".join(self.note.split())
        return f"- r{self.round} {self.candidate} [{feats}]: {res}" + (f" — {note[:200]}" if note else "")


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
- Every pointer argument is a device pointer already allocated by the harness; never cudaMalloc/cudaMemcpy the inputs or outputs to/from the host.
- The entry point is called from the host and may launch any number of kernels with any configuration (it may also allocate and free scratch device memory, though that time counts).
- No cuBLAS, cuDNN, cuFFT, thrust, or device-wide CUB (cub::Device*); block- and warp-level CUB are allowed. No host-side computation of the result.
- Outputs are poisoned with NaN before each call: write every output element. Inputs must not be modified.
- The result must be correct for every size, including sizes that are not multiples of the block or tile size and very small ones; unseen sizes are tested too.
- Time is measured with the whole device synchronized after the call, L2 flushed before it; results below the speed-of-light bound are rejected as suspect.
- The file is compiled alone with `nvcc -O3 -arch=<the GPU's arch> -shared -Xcompiler -fPIC`; include what you use."""

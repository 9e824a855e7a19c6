"""A test double for the GPU side of the graph: real nvcc, invented measurements.

Every source is compiled for real with cuda_llm.tools.compiler.compile (so compile errors are nvcc's own). A
source that compiles is "measured" by looking up its marker comment ``// variant: NAME`` in the table the
test gives: a latency in ms (the candidate passes, with a small deterministic spread of samples), or a
Status value such as "wrong_answer" / "runtime_error". The naive baseline is the entry "baseline".

Every real evaluation (not a cache hit of the run directory) is appended to ``log_path`` as one JSON line,
so a test can count them across processes (kill, then resume).

``build``, ``analyze`` and ``toolchain`` are the real ones (ToolsMixin: nvcc, the roofline, the rule
diagnosis). Profiles are invented too: ``profiles`` maps a variant to a ProfileResult (None: "not
available", like a machine without Nsight Compute). With a ``device`` (measured peaks), timings carry the
speed of light and its percentage, as the real harness's do.
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import Any

from cuda_llm.measure.evaluator import ToolsMixin
from cuda_llm.results import (
    CaseResult, CompileResult, DeviceInfo, EvalResult, Status, TimingResult, ValidationResult,
)

MARKER = re.compile(r"//\s*variant:\s*([\w.-]+)")
SPREAD = (0.0, 0.002, 0.004, 0.006, 0.01, 0.012, 0.015, 0.02, 0.03, 0.05)  # relative, like real timings


def variant_of(source: str) -> str | None:
    m = MARKER.search(source)
    return m.group(1) if m else None


class FakeGpuEvaluator(ToolsMixin):
    """Evaluator protocol (cuda_llm.measure.evaluator) with nvcc compiles and timings set by the test."""

    def __init__(self, timings: dict[str, Any], *, log_path: Path | None = None, arch: str = "sm_90",
                 compile: bool = True, noise: float = 1.0, confirm_timings: dict[str, Any] | None = None,
                 delay_s: float = 0.0, device: DeviceInfo | None = None, profiles: dict[str, Any] | None = None):
        self.device = device
        self.profiles = dict(profiles or {})
        self.timings = dict(timings)
        self.confirm_timings = dict(confirm_timings or {})
        self.log_path = Path(log_path) if log_path else None
        self.arch = arch
        self.compile = compile
        self.noise = noise
        self.delay_s = delay_s  # seconds per measurement, so a test can kill a run in the middle of a stage
        self._lock = threading.Lock()
        self.calls: list[dict[str, Any]] = []

    @classmethod
    def from_json(cls, path: Path) -> "FakeGpuEvaluator":
        spec = json.loads(Path(path).read_text())
        return cls(spec["timings"], log_path=spec.get("log_path"), confirm_timings=spec.get("confirm_timings"),
                   delay_s=spec.get("delay_s", 0.0))

    def _log(self, kind: str, candidate: str, variant: str | None, status: str) -> None:
        entry = {"kind": kind, "candidate": candidate, "variant": variant, "status": status, "pid": os.getpid()}
        with self._lock:
            self.calls.append(entry)
            if self.log_path is not None:
                with open(self.log_path, "a") as f:
                    f.write(json.dumps(entry) + "\n")

    def _compile(self, source: str) -> CompileResult:
        if not self.compile:
            return CompileResult(ok=True, arch=self.arch, source_hash="-", so_path=None)
        from cuda_llm.tools.compiler.compile import compile_source

        return compile_source(source, arch=self.arch)

    def _measure(self, loaded: Any, source: str, candidate: str, kind: str, table: dict[str, Any]) -> EvalResult:
        from cuda_llm.tools.compiler.compile import source_hash

        task = loaded.task
        comp = self._compile(source)
        if self.delay_s:
            import time

            time.sleep(self.delay_s)
        variant = variant_of(source) or ("baseline" if candidate.split("-")[0] == "baseline" else None)
        base = dict(task=task.name, candidate=candidate, source_hash=source_hash(source), compile=comp, device="fake-gpu")
        if not comp.ok:
            self._log(kind, candidate, variant, "compile_error")
            return EvalResult(status=Status.compile_error, message=f"nvcc failed: {comp.errors[:300]}", **base)
        spec = table.get(variant, self.timings.get(variant)) if variant else None
        if spec is None:
            self._log(kind, candidate, variant, "runtime_error")
            return EvalResult(status=Status.runtime_error, message=f"no fake timing for variant {variant!r}", **base)
        cases = [CaseResult(sizes=s, held_out=h, passed=True) for s, h in task.all_cases()]
        if isinstance(spec, str):
            status = Status(spec)
            if status == Status.wrong_answer:
                cases[-1] = CaseResult(sizes=cases[-1].sizes, held_out=True, passed=False, reason="max abs error 0.5 > tol",
                                       output="y", max_abs_err=0.5, first_bad_index=[0, 3], expected=0.25, got=0.75)
            self._log(kind, candidate, variant, status.value)
            return EvalResult(status=status, message=f"{status.value} (set by the test)",
                              validation=ValidationResult(passed=status.passed, cases=cases), **base)
        ms = float(spec)
        samples = [ms * (1 + self.noise * d) for d in SPREAD]
        median = ms * (1 + self.noise * 0.008)
        b = None
        if self.device is not None:
            from cuda_llm.tools.bounds.speed_of_light import bound

            b = bound(task, dict(task.benchmark), self.device)
        sol = b.ms if b is not None else None
        timing = TimingResult(sizes=dict(task.benchmark), median_ms=median, min_ms=min(samples),
                              mean_ms=sum(samples) / len(samples), iqr_ms=ms * self.noise * 0.014, rse=0.003,
                              samples_ms=samples, repetitions=len(samples), stop_reason="rse", sol_ms=sol,
                              pct_of_sol=100.0 * sol / median if sol else None, sol_basis=b.basis if b else None)
        self._log(kind, candidate, variant, "ok")
        return EvalResult(status=Status.ok, message=f"passed; {timing.median_ms:.4f} ms",
                          validation=ValidationResult(passed=True, cases=cases), timing=timing, **base)

    # -- Evaluator protocol
    def evaluate(self, loaded: Any, source: str, candidate_id: str, work_dir: Path) -> EvalResult:
        confirm = candidate_id.endswith("-confirm")
        return self._measure(loaded, source, candidate_id, "confirm" if confirm else "evaluate",
                             self.confirm_timings if confirm else {})

    def head_to_head(self, loaded: Any, challenger: str, champion: str, challenger_id: str, champion_id: str,
                     work_dir: Path) -> Any:
        """The legs in turns (each logged as kind ``head_to_head``), timed from the same table as ``evaluate``;
        the challenger's legs from ``confirm_timings`` where it has the variant (what it measures head to head)."""
        from cuda_llm.measure.evaluator import interleaved

        def leg(src: str, cid: str, work: Path) -> EvalResult:
            mine = cid.startswith(f"{challenger_id}-h2h")
            return self._measure(loaded, src, cid, "head_to_head", self.confirm_timings if mine else {})
        return interleaved(leg, challenger, champion, challenger_id, champion_id, work_dir)

    def baseline(self, loaded: Any) -> EvalResult:
        source = Path(loaded.task.baseline_path).read_text()
        return self._measure(loaded, source, "baseline", "baseline", {})

    def profile(self, loaded: Any, source: str, candidate_id: str, work_dir: Path, result: EvalResult) -> Any:
        """The test's profile of this variant, else None (the graph records "profiling not available")."""
        variant = variant_of(source) or ("baseline" if candidate_id == "baseline" else None)
        return self.profiles.get(variant) if variant else None

    def final_check(self, loaded: Any, source: str, candidate_id: str, work_dir: Path) -> tuple[EvalResult, EvalResult]:
        cand = self._measure(loaded, source, candidate_id, "final", {})
        base = self._measure(loaded, Path(loaded.task.baseline_path).read_text(), "baseline", "final", {})
        if base.timing is not None:
            cand = cand.model_copy(update={"baseline_ms": base.timing.median_ms})
        return cand, base


# ---------------------------------------------------------------- canned kernels and LLM answers
_SOFTMAX = """// variant: {name}
#include <cuda_runtime.h>
#include <math.h>

__global__ void softmax_rows(const float* x, float* y, int rows, int cols) {{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const float* xr = x + (size_t)row * cols;
    float m = -INFINITY;
    for (int c = 0; c < cols; ++c) m = fmaxf(m, xr[c]);
    float s = 0.0f;
    for (int c = 0; c < cols; ++c) s += expf(xr[c] - m);
    for (int c = 0; c < cols; ++c) y[(size_t)row * cols + c] = expf(xr[c] - m) / s{error};
}}

extern "C" void solve(const float* x, float* y, int rows, int cols) {{
    int threads = {threads};
    softmax_rows<<<(rows + threads - 1) / threads, threads>>>(x, y, rows, cols);
}}
"""


def softmax_source(name: str, *, broken: bool = False, threads: int = 128) -> str:
    """A compilable softmax candidate tagged ``// variant: name`` (``broken``: an nvcc error on purpose)."""
    return _SOFTMAX.format(name=name, error=" + undefined_symbol" if broken else "", threads=threads)


def coder_answer(source: str) -> str:
    return f"Here is the kernel.\n\n```cuda\n{source}```\n"


def plan_answer(n: int, features: tuple[str, ...] = ("warp_shuffle", "vector_loads", "coalesced_access", "loop_unrolling")) -> str:
    cands = [{"features": [features[i % len(features)]], "idea": f"idea {i}"} for i in range(n)]
    return json.dumps({"rationale": "memory-bound row reduction", "candidates": cands})


def critic_answer(features: tuple[str, ...] = ("vector_loads",)) -> str:
    return json.dumps({"bottleneck": "memory-bound", "evidence": ["dram 40%"], "next_features": list(features),
                       "change": "one warp per row, float4 loads", "expected_gain": "1.5x",
                       "summary": "one thread per row leaves bandwidth unused"})


def fake_profile(*, dram_pct: float = 41.0, stall: str = "long_scoreboard") -> Any:
    """A ProfileResult as Nsight Compute would give for a memory-bound row kernel (invented numbers)."""
    from cuda_llm.tools.profile.profile_models import KernelMetrics, ProfileResult, StallReason

    k = KernelMetrics(name="softmax_rows(const float *, float *, int, int)", duration_ns=1.8e6, sm_throughput_pct=22.0,
                      memory_throughput_pct=dram_pct + 3, dram_throughput_pct=dram_pct, dram_bytes=1.1e9,
                      achieved_occupancy_pct=31.5, theoretical_occupancy_pct=50.0, occupancy_limiter="registers",
                      occupancy_limits={"registers": 2.0, "shared": 32.0}, registers_per_thread=72.0,
                      shared_bytes_per_block=0.0, l1_hit_rate_pct=12.0, l2_hit_rate_pct=48.0,
                      global_load_sectors=3.2e7, global_load_requests=1.0e6, global_store_sectors=1.6e7,
                      global_store_requests=1.0e6,
                      stalls=[StallReason(reason=stall, per_issue=3.1, share_pct=61.0),
                              StallReason(reason="barrier", per_issue=0.9, share_pct=18.0)],
                      block_size=128, grid_size=128, waves_per_sm=0.24)
    return ProfileResult(available=True, kernels=[k], duration_ms=1.8, sizes={"rows": 16384, "cols": 4096})

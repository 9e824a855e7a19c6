"""Rule-based bottleneck diagnosis from the profile, the roofline and the compile report. Pure.

The rules are one ordered table (RULES): each names the bottleneck it detects, a test over the facts
that returns evidence strings ("metric = value") when it fires, the feature ids that usually fix it, and
one sentence of advice. The first rule that fires names the bottleneck; every rule that fires adds its
evidence and features. To extend, add a Rule to the table (and a case to tests/test_diagnosis.py).
This diagnosis is always computed: it is given to the LLM critic and stands in when the critic fails.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, Field

from cuda_llm.tools.profile_models import KernelMetrics, ProfileResult
from cuda_llm.results import CompileResult
from cuda_llm.tools.roofline import RooflinePoint

Bottleneck = Literal["memory-bound", "compute-bound", "latency-bound", "occupancy-bound", "launch-bound",
                     "divergence", "bank-conflicts", "unknown"]

# Thresholds, in one place so that they can be read and tuned.
HIGH_THROUGHPUT_PCT = 60.0      # a unit at >= 60% of its peak is what limits the kernel
LOW_THROUGHPUT_PCT = 40.0       # both compute and memory under this: latency-bound
AT_ROOF_PCT = 75.0              # % of speed of light at which only fewer bytes/flops help
LAUNCH_KERNEL_US = 10.0         # kernels shorter than this are dominated by launch overhead
LAUNCH_MANY_KERNELS = 4         # this many launches per solve() with short kernels
HOST_GAP_RATIO = 1.5            # event time over summed kernel time: gaps between launches
BANK_CONFLICT_PCT = 25.0        # conflicts as % of shared wavefronts
DIVERGENCE_EFFICIENCY_PCT = 70.0   # active threads per instruction over 32
BRANCH_UNIFORM_PCT = 80.0
LOW_OCCUPANCY_PCT = 35.0
WAVES_TOO_FEW = 0.5             # grid fills less than half of one wave of the GPU
EXCESS_DRAM_RATIO = 1.5         # DRAM bytes over the task's minimum bytes: data read more than once
UNCOALESCED_SECTORS = 16.0      # 32-byte sectors per warp-wide global access: 4 = consecutive floats, 16 = float4,
                                # 32 = every thread in its own sector


class Diagnosis(BaseModel):
    bottleneck: Bottleneck
    evidence: list[str] = Field(default_factory=list)          # "metric = value" strings
    suggested_features: list[str] = Field(default_factory=list)  # feature ids (feature_db)
    summary: str = ""
    rules: list[str] = Field(default_factory=list)             # every rule that fired, first = bottleneck
    kernel: str | None = None                                  # the kernel diagnosed (the longest one)

    def as_text(self) -> str:
        """For prompts and the console."""
        lines = [f"bottleneck: {self.bottleneck}", f"summary: {self.summary}"]
        lines += [f"- {e}" for e in self.evidence]
        if self.suggested_features:
            lines.append("try: " + ", ".join(self.suggested_features))
        return "\n".join(lines)


@dataclass
class Facts:
    """What the rules look at: the longest kernel, the whole profile, the roofline, the compile report."""

    kernel: KernelMetrics | None
    profile: ProfileResult | None
    roofline: RooflinePoint | None
    compile: CompileResult | None
    n_launches: int = 0
    kernel_ms: float | None = None       # summed kernel durations of one solve()
    spill_bytes: int = 0
    notes: list[str] = field(default_factory=list)

    @classmethod
    def gather(cls, profile: ProfileResult | None, roofline: RooflinePoint | None,
               compile: CompileResult | None) -> "Facts":
        usable = profile if profile is not None and profile.available and profile.kernels else None
        spills = 0
        if compile is not None:
            spills = sum(k.spill_store_bytes + k.spill_load_bytes for k in compile.kernels)
        return cls(
            kernel=usable.dominant() if usable else None,
            profile=usable,
            roofline=roofline,
            compile=compile,
            n_launches=sum(k.launches for k in usable.kernels) if usable else 0,
            kernel_ms=usable.duration_ms if usable else None,
            spill_bytes=spills,
        )


def _f(v: float | None, unit: str = "%") -> str:
    if v is None:
        return "n/a"
    return f"{v:.1f}{unit}" if unit == "%" else f"{v:.4g}{unit}"


Evidence = list[str] | None


def _launch(f: Facts) -> Evidence:
    ev: list[str] = []
    if f.profile and f.kernel_ms is not None and f.n_launches:
        avg_us = f.kernel_ms * 1e3 / f.n_launches
        if f.n_launches >= LAUNCH_MANY_KERNELS and avg_us < LAUNCH_KERNEL_US:
            ev.append(f"kernel launches per solve = {f.n_launches}, mean kernel duration = {avg_us:.2f} us "
                      f"(launch overhead is ~2-5 us each)")
        if f.roofline is not None and f.roofline.median_ms > HOST_GAP_RATIO * f.kernel_ms \
                and f.roofline.median_ms - f.kernel_ms > 0.02:
            ev.append(f"solve() time = {f.roofline.median_ms:.4g} ms but kernels run {f.kernel_ms:.4g} ms "
                      f"(gaps between launches, host work or syncs)")
    return ev or None


def _bank(f: Facts) -> Evidence:
    k = f.kernel
    if k is None or k.bank_conflict_pct is None or (k.shared_wavefronts or 0) < 1000:
        return None
    if k.bank_conflict_pct >= BANK_CONFLICT_PCT:
        return [f"shared bank conflicts = {k.bank_conflicts:.0f} of {k.shared_wavefronts:.0f} wavefronts "
                f"({k.bank_conflict_pct:.0f}%)"]
    return None


def _divergence(f: Facts) -> Evidence:
    k = f.kernel
    if k is None:
        return None
    ev = []
    eff = k.warp_efficiency_pct
    if eff is not None and eff < DIVERGENCE_EFFICIENCY_PCT:
        ev.append(f"active threads per warp instruction = {k.threads_per_inst:.1f} of 32 ({eff:.0f}%)")
    if k.branch_uniform_pct is not None and k.branch_uniform_pct < BRANCH_UNIFORM_PCT:
        ev.append(f"uniform branches = {k.branch_uniform_pct:.0f}%")
    return ev or None


def _uncoalesced(f: Facts) -> Evidence:
    k = f.kernel
    if k is None:
        return None
    ev = []
    for label, spr, n in (("load", k.load_sectors_per_request, k.global_load_requests),
                          ("store", k.store_sectors_per_request, k.global_store_requests)):
        if spr is not None and spr > UNCOALESCED_SECTORS and (n or 0) >= 1000:
            ev.append(f"global {label}s: {spr:.1f} sectors of 32 B per warp request (4 when a warp reads "
                      f"consecutive floats): uncoalesced access")
    return ev or None


def _busiest_memory_unit(k: KernelMetrics) -> tuple[str, float] | None:
    units = {"DRAM": k.dram_throughput_pct, "L2": k.l2_throughput_pct, "L1/shared": k.l1_throughput_pct}
    known = {u: v for u, v in units.items() if v is not None}
    if not known:
        return None
    u = max(known, key=lambda x: known[x])
    return u, known[u]


def _memory(f: Facts) -> Evidence:
    k = f.kernel
    if k is None:
        return None
    top = max((v for v in (k.memory_throughput_pct, k.dram_throughput_pct) if v is not None), default=None)
    if top is None or top < HIGH_THROUGHPUT_PCT:
        return None
    if (k.sm_throughput_pct or 0) > top:
        return None
    ev = [f"memory throughput = {_f(k.memory_throughput_pct)} of peak, DRAM throughput = {_f(k.dram_throughput_pct)}, "
          f"SM throughput = {_f(k.sm_throughput_pct)}"]
    busiest = _busiest_memory_unit(k)
    if busiest is not None:
        unit, pct = busiest
        note = " (data re-read through the cache: reuse it from registers or shared memory)" if unit == "L1/shared" else ""
        ev.append(f"busiest memory unit = {unit} at {pct:.1f}%{note}")
    if k.l1_hit_rate_pct is not None or k.l2_hit_rate_pct is not None:
        ev.append(f"L1 hit rate = {_f(k.l1_hit_rate_pct)}, L2 hit rate = {_f(k.l2_hit_rate_pct)}")
    if k.dram_bytes is not None and f.roofline is not None and f.roofline.bytes > 0:
        ev.append(f"DRAM bytes = {k.dram_bytes / 1e6:.4g} MB vs the task's minimum {f.roofline.bytes / 1e6:.4g} MB "
                  f"({k.dram_bytes / f.roofline.bytes:.2f}x)")
    return ev


def _compute(f: Facts) -> Evidence:
    k = f.kernel
    if k is None or k.sm_throughput_pct is None or k.sm_throughput_pct < HIGH_THROUGHPUT_PCT:
        return None
    if k.sm_throughput_pct < (k.memory_throughput_pct or 0):
        return None
    return [f"SM throughput = {_f(k.sm_throughput_pct)} of peak, memory throughput = {_f(k.memory_throughput_pct)}"]


def _spills(f: Facts) -> Evidence:
    ev = []
    if f.spill_bytes > 0:
        ev.append(f"register spills (ptxas) = {f.spill_bytes} bytes")
    if f.kernel is not None and (f.kernel.local_bytes or 0) > 0:
        ev.append(f"local-memory traffic = {f.kernel.local_bytes:.3g} bytes")
    return ev or None


def _occupancy(f: Facts) -> Evidence:
    k = f.kernel
    if k is None:
        return None
    ev = []
    if k.waves_per_sm is not None and k.waves_per_sm < WAVES_TOO_FEW:
        grid = f"grid = {k.grid_size} blocks of {k.block_size}: " if k.grid_size and k.block_size else ""
        ev.append(f"waves per SM = {k.waves_per_sm:.2f} ({grid}the GPU is not filled)")
    if k.achieved_occupancy_pct is not None and k.achieved_occupancy_pct < LOW_OCCUPANCY_PCT:
        lim = f", limited by {k.occupancy_limiter}" if k.occupancy_limiter and (k.theoretical_occupancy_pct or 100) < 100 else ""
        ev.append(f"achieved occupancy = {_f(k.achieved_occupancy_pct)}, theoretical = "
                  f"{_f(k.theoretical_occupancy_pct)}{lim}; registers/thread = {_f(k.registers_per_thread, '')}")
    return ev or None


def _latency(f: Facts) -> Evidence:
    k = f.kernel
    if k is None or k.sm_throughput_pct is None or k.memory_throughput_pct is None:
        return None
    if k.sm_throughput_pct >= LOW_THROUGHPUT_PCT or k.memory_throughput_pct >= LOW_THROUGHPUT_PCT:
        return None
    ev = [f"SM throughput = {_f(k.sm_throughput_pct)}, memory throughput = {_f(k.memory_throughput_pct)} "
          f"(neither unit is busy: warps wait)"]
    if k.stalls:
        ev.append("top stalls: " + ", ".join(f"{s.reason} {s.share_pct:.0f}%" for s in k.stalls[:3]))
    return ev


def _roofline_memory(f: Facts) -> Evidence:
    r = f.roofline
    if r is None or r.limiter != "memory":
        return None
    return [f"roofline: {r.summary()}"]


def _roofline_compute(f: Facts) -> Evidence:
    r = f.roofline
    if r is None or r.limiter != "compute":
        return None
    return [f"roofline: {r.summary()}"]


# Features a warp-stall reason points to (the top stall adds these after the rule's own).
STALL_FEATURES: dict[str, tuple[str, ...]] = {
    "long_scoreboard": ("cp_async", "double_buffering", "vector_loads", "loop_unrolling"),
    "barrier": ("warp_shuffle", "double_buffering"),
    "membar": ("warp_shuffle",),
    "short_scoreboard": ("bank_conflict_padding", "register_blocking"),
    "mio_throttle": ("vector_loads", "register_blocking"),
    "lg_throttle": ("vector_loads", "smem_tiling"),
    "math_pipe_throttle": ("fast_math_intrinsics", "tensor_cores_mma"),
    "tex_throttle": ("readonly_cache",),
    "wait": ("loop_unrolling",),
    "not_selected": ("occupancy_tuning",),
    "drain": ("vector_loads",),
}


def _memory_features(f: Facts) -> tuple[str, ...]:
    r = f.roofline
    k = f.kernel
    busiest = _busiest_memory_unit(k) if k is not None else None
    if (r is not None and r.limiter == "compute") or (busiest is not None and busiest[0] == "L1/shared"):
        # a compute-heavy task stuck on memory: the data is not reused
        return ("smem_tiling", "register_blocking", "vector_loads", "cp_async")
    if k is not None and k.dram_bytes is not None and r is not None and r.bytes > 0 \
            and k.dram_bytes >= EXCESS_DRAM_RATIO * r.bytes:
        # the same data crosses DRAM more than once: keep it on chip between passes
        return ("smem_tiling", "kernel_fusion", "register_blocking", "vector_loads")
    if r is not None and r.pct_of_sol is not None and r.pct_of_sol >= AT_ROOF_PCT:
        return ("kernel_fusion", "vector_loads", "reduced_precision")
    spr = k.load_sectors_per_request if k is not None else None
    if spr is not None and spr <= 8:
        # already coalesced: more bytes in flight per thread
        return ("vector_loads", "grid_stride_loop", "loop_unrolling", "readonly_cache")
    return ("coalesced_access", "vector_loads", "grid_stride_loop", "readonly_cache")


def _compute_features(f: Facts) -> tuple[str, ...]:
    r = f.roofline
    if r is not None and r.limiter == "memory":
        # the task needs few operations per byte: the kernel does work it should not
        return ("fast_math_intrinsics", "loop_unrolling", "grid_stride_loop")
    return ("register_blocking", "loop_unrolling", "fast_math_intrinsics", "tensor_cores_mma")


def _latency_features(f: Facts) -> tuple[str, ...]:
    r = f.roofline
    if r is not None and r.limiter == "compute":
        # a task with data reuse waiting on loads: stage the reused data on chip first
        return ("smem_tiling", "register_blocking", "double_buffering", "loop_unrolling")
    return ("loop_unrolling", "vector_loads", "double_buffering")


@dataclass(frozen=True)
class Rule:
    name: str
    bottleneck: Bottleneck
    test: Callable[[Facts], Evidence]
    features: tuple[str, ...] | Callable[[Facts], tuple[str, ...]]
    advice: str

    def features_for(self, f: Facts) -> tuple[str, ...]:
        return self.features(f) if callable(self.features) else self.features


RULES: tuple[Rule, ...] = (
    Rule("launch-overhead", "launch-bound", _launch,
         ("kernel_fusion", "persistent_kernel", "cooperative_groups", "launch_config_tuning"),
         "solve() is dominated by launches and gaps between them: do the work in fewer, larger kernels."),
    Rule("bank-conflicts", "bank-conflicts", _bank, ("bank_conflict_padding", "vector_loads"),
         "shared-memory accesses of a warp hit the same banks: pad or swizzle the shared arrays."),
    Rule("uncoalesced-access", "memory-bound", _uncoalesced, ("coalesced_access", "smem_tiling", "vector_loads"),
         "a warp's global accesses are scattered over many 32-byte sectors: make consecutive threads touch "
         "consecutive addresses (transpose the mapping, or stage through shared memory)."),
    Rule("divergence", "divergence", _divergence, ("warp_shuffle", "warp_vote_match", "block_reduction_tree"),
         "threads of a warp take different paths or sit idle: make the active threads contiguous."),
    Rule("memory-throughput", "memory-bound", _memory, _memory_features,
         "the memory system is the busiest unit: move fewer bytes, or move them in wider, coalesced accesses."),
    Rule("compute-throughput", "compute-bound", _compute, _compute_features,
         "the SM pipelines are the busiest unit: fewer or cheaper instructions per result."),
    Rule("register-spills", "memory-bound", _spills, ("occupancy_tuning", "register_blocking"),
         "registers spill to local memory: shrink per-thread arrays or relax __launch_bounds__."),
    Rule("low-occupancy", "occupancy-bound", _occupancy, ("occupancy_tuning", "launch_config_tuning", "grid_stride_loop"),
         "too few warps are resident to hide latency: more blocks, smaller blocks' resources."),
    Rule("latency", "latency-bound", _latency, _latency_features,
         "neither memory nor compute is busy: more independent work per thread (ILP) and fewer waits."),
    Rule("roofline-memory", "memory-bound", _roofline_memory, _memory_features,
         "by the roofline this task is limited by memory bandwidth."),
    Rule("roofline-compute", "compute-bound", _roofline_compute, _compute_features,
         "by the roofline this task is limited by arithmetic throughput."),
)


def _dedupe(items: Sequence[str]) -> list[str]:
    seen: dict[str, None] = {}
    for i in items:
        seen.setdefault(i, None)
    return list(seen)


def diagnose(profile: ProfileResult | None, roofline: RooflinePoint | None, compile: CompileResult | None,
             *, rules: Sequence[Rule] = RULES, max_features: int = 6) -> Diagnosis:
    """Classify the bottleneck; evidence strings carry the metric values that decided it."""
    f = Facts.gather(profile, roofline, compile)
    fired: list[tuple[Rule, list[str]]] = []
    for rule in rules:
        ev = rule.test(f)
        if ev:
            fired.append((rule, ev))
    # the roofline-only rules speak only when no profile rule did
    profile_fired = [x for x in fired if not x[0].name.startswith("roofline-")]
    if profile_fired:
        fired = profile_fired + [x for x in fired if x[0].name.startswith("roofline-")]
    evidence: list[str] = []
    features: list[str] = []
    for rule, ev in fired:
        evidence += ev
        features += rule.features_for(f)
    k = f.kernel
    if k is not None and k.stalls:
        top = k.stalls[0]
        stall_line = "warp stalls: " + ", ".join(f"{s.reason} {s.share_pct:.0f}%" for s in k.stalls[:3])
        if not any(e.startswith("top stalls") for e in evidence):
            evidence.append(stall_line)
        features += STALL_FEATURES.get(top.reason, ())
    if f.profile is not None and f.profile.n_kernels > 1:
        evidence.append(f"kernels per solve = {f.profile.n_kernels}: " + ", ".join(
            f"{kk.name.split('(')[0]} {kk.duration_ns / 1e3:.1f} us" for kk in f.profile.kernels if kk.duration_ns is not None))
    if profile is not None and not profile.available and profile.reason:
        evidence.append(f"no Nsight Compute profile ({profile.reason}): judged from timings and the compile report")
    if not fired:
        return Diagnosis(bottleneck="unknown", evidence=evidence, suggested_features=[],
                         summary="not enough evidence to name a bottleneck (no profile and no roofline)",
                         kernel=k.name if k else None)
    first = fired[0][0]
    summary = first.advice
    if roofline is not None and roofline.pct_of_sol is not None:
        summary += f" At {roofline.pct_of_sol:.3g}% of speed of light ({roofline.limiter}-limited roofline)."
    return Diagnosis(
        bottleneck=first.bottleneck,
        evidence=evidence,
        suggested_features=_dedupe(features)[:max_features],
        summary=summary,
        rules=[r.name for r, _ in fired],
        kernel=k.name if k else None,
    )

"""Rule-based bottleneck diagnosis from the profile, the roofline and the compile report. Pure.

Every rule estimates the time it costs: how many milliseconds of the kernel (or of solve()) would go if
what it found were fixed. The bottleneck is the finding with the largest estimated time lost, not the
first rule that fires (and, where one unit is 80% busy or more and no finding costs 10%, that unit:
compute-bound or memory-bound), so a kernel at 92% of DRAM speed of light is not called "bank-conflicts" because
its shared scratch has a few. A kernel at 85% of speed of light or more is "at the roof": only fewer bytes
or flops, or another algorithm, can help, or the search should stop.

The estimates, with Tk the diagnosed (longest) kernel's time and U a unit's % of its peak:

    launch-overhead     solve() time outside kernels beyond 10% of the kernel time (event time and Nsight
                        Compute agree within that; without a timing: 2 us per extra launch), plus the
                        idle time of kernels shorter than 10 us
    extra-passes        T * (1 - minimum bytes / DRAM bytes of all of solve()'s kernels), when several kernels
                        move 1.5x the minimum or more and none alone re-reads: algorithm-bound (a single-pass
                        algorithm, e.g. a scan with decoupled look-back, moves the minimum)
    excess-dram-traffic (DRAM bytes - the task's minimum bytes) / peak bandwidth; under a compute roof times
                        U(DRAM), the share of the transfers the math does not hide
    cache-rereads       Tk * U(L1 or L2) * (global share of its traffic) * (useful sectors) - speed of light,
                        when a cache is the busiest unit: data re-read through the cache instead of reused
                        from registers or shared memory
    uncoalesced-access  Tk * U(memory) * sum over loads and stores above 16 sectors per request of (their
                        share of the global sectors) * (1 - 4 / sectors per request); where the build's SASS has
                        16-byte accesses (float4, cp.async) above 18 and with 16 for 4: consecutive 16-byte
                        accesses cover 16 sectors (17 unaligned)
    bank-conflicts      Tk * U(L1/shared) * conflicts / wavefronts
    hot-atomics         Tk * U(hottest L2 slice's atomic unit) * (1 - mean slice / hottest), when one slice
                        is 50% busy and 5x the mean: global atomics serialized on a few addresses
    register-spills     Tk * U(memory) * local bytes / (local + global bytes)
    divergence          Tk * U(SM) * (1 - active lanes / 32)
    compute-throughput  Tk * U(SM) * (active lanes / 32) - speed of light, when the SM is the busiest unit at
                        60% or more
    unfilled-grid       Tk * (1 - max U) * (1 - blocks / SMs): SMs left without a block (few warps on every SM
                        is an occupancy question for the latency rules, not an unfilled GPU)
    idle time           Tk * (1 - max U) * (1 - unfilled share), split by warp-stall reason: memory latency
                        (long_scoreboard), synchronization (barrier, membar), memory-instruction queues
                        (lg/mio/tex throttle), dependent instructions (wait, short_scoreboard), issue
                        (not_selected, math_pipe_throttle), and the rest

Suggested features follow the findings, largest loss first, then the top stall's; the caller passes the
features that apply to the task (``allowed_features``: its tolerance, dtypes and the arch), and the others
are dropped, so sgemm is never offered fp16 tensor cores its tolerance forbids. Occupancy advice comes only
for latency-bound kernels that wait on memory (long_scoreboard) with little instruction-level parallelism
and room for more warps, and never where issue slots or a pipe are 80% busy: a tuned GEMM runs at 12%
occupancy by design and is told nothing about it. Evidence names the busy memory (shared memory, L1, L2 or
DRAM), not only "memory throughput"; an fp32 matrix product on the FMA pipe is told that tensor cores
(3xTF32, or TF32 where the tolerance allows) are the way past the fp32 roof.

This diagnosis is always computed: it is given to the LLM critic and stands in when the critic fails.
To add a rule, append a Rule to RULES and a case to tests/test_diagnosis.py.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, Field

from cuda_llm.figures import fmt_pct
from cuda_llm.results import CompileResult
from cuda_llm.tools.profile.profile_models import KernelMetrics, ProfileResult
from cuda_llm.tools.profile.roofline import RooflinePoint
from cuda_llm.tools.profile.tensor_advice import TensorAdvice, advise

Bottleneck = Literal["memory-bound", "compute-bound", "latency-bound", "occupancy-bound", "launch-bound",
                     "divergence", "bank-conflicts", "algorithm-bound", "unknown"]

# Thresholds, in one place so that they can be read and tuned.
AT_ROOF_PCT = 85.0              # % of speed of light from which only fewer bytes/flops or another algorithm help
HIGH_THROUGHPUT_PCT = 60.0      # a unit at >= 60% of its peak is what limits the kernel
LAUNCH_OVERHEAD_US = 2.0        # what each extra launch costs (launch latency and the drain between kernels)
SHORT_KERNEL_US = 10.0          # kernels shorter than this are dominated by their launch
EXCESS_DRAM_RATIO = 1.5         # DRAM bytes over the task's minimum bytes: data read more than once
CACHE_OVER_DRAM_PCT = 20.0      # a cache this many points busier than DRAM is re-serving data
UNCOALESCED_SECTORS = 16.0      # 32-byte sectors per warp-wide access: 4 = consecutive floats, 32 = every thread
                                # in its own sector (a mix of broadcast and scattered loads averages ~16.5)
VECTOR_SECTORS = 18.0           # where the build's SASS has 16-byte global accesses (LDG.E.128, cp.async's
                                # LDGSTS.E.BYPASS.128), consecutive ones cover 16 sectors, 17 when not aligned:
                                # only above 18 are they uncoalesced
EXTRA_PASSES_RATIO = 1.5        # DRAM bytes of all of solve()'s kernels over the task's minimum, no kernel alone
                                # above EXCESS_DRAM_RATIO: the algorithm makes passes a single-pass one would not
FULL_PCT = 80.0                 # issue slots or a pipe this busy (per active cycle): the SMs are full, few warps
                                # by design (a tuned GEMM's 12% occupancy) is not what limits the kernel
HOT_ATOMIC_PCT = 50.0           # one L2 slice's atomic unit this busy, HOT_ATOMIC_RATIO x the mean slice: global
HOT_ATOMIC_RATIO = 5.0          # atomics piled on a few addresses, serialized there (privatize them)
FFMA_GEMM_PIPE_PCT = 40.0       # an fp32 matrix product whose FMA pipe is this busy is told about tensor cores
DIVERGENCE_EFFICIENCY_PCT = 70.0   # active threads per instruction over 32
BRANCH_UNIFORM_PCT = 80.0
MIN_REQUESTS = 1000             # fewer global requests (or shared wavefronts): too little traffic to judge
# occupancy advice: only for kernels waiting on memory with little ILP and room for more warps
OCCUPANCY_ROOM_PCT = 50.0       # achieved occupancy under this
LONG_SCOREBOARD_SHARE = 50.0    # long_scoreboard at least this share of the stalls
LITTLE_ILP_CYCLES = 20.0        # a warp waits this many cycles between its instructions, or more
MIN_LOSS_SHARE = 0.02           # findings costing less than 2% of the time are evidence, not bottlenecks
EVENT_NCU_AGREEMENT = 0.10      # event time and Nsight Compute's duration of the same kernels agree within 10%:
                                # a smaller gap between solve() time and kernel time is not evidence of launches
SATURATED_PCT = 80.0            # a unit this busy, with no finding costing SATURATED_LOSS_SHARE or more,
SATURATED_LOSS_SHARE = 0.10     # is what bounds the kernel (compute-bound or memory-bound), not the small findings

# Which stall reasons mean what (WarpStateStats). Each group's share of the idle time is one finding.
STALL_GROUPS: dict[str, tuple[str, ...]] = {
    "memory-latency": ("long_scoreboard",),
    "synchronization": ("barrier", "membar", "sleeping"),
    "memory-queues": ("lg_throttle", "mio_throttle", "tex_throttle", "drain"),
    "dependencies": ("wait", "short_scoreboard", "branch_resolving", "dispatch_stall", "imc_miss", "misc",
                     "no_instruction"),
    "issue": ("not_selected", "math_pipe_throttle", "selected"),
}
# Features a warp-stall reason points to (the top stall adds these after the findings' own).
STALL_FEATURES: dict[str, tuple[str, ...]] = {
    # waiting on global/local memory: more independent loads in flight per warp
    "long_scoreboard": ("cp_async", "double_buffering", "vector_loads", "loop_unrolling"),
    "barrier": ("warp_shuffle", "warp_specialization", "double_buffering"),
    # memory fences (__threadfence, fenced atomics): fewer, aggregated publications
    "membar": ("privatized_atomics", "warp_vote_match", "decoupled_lookback_scan"),
    # waiting on shared memory or special-function results
    "short_scoreboard": ("bank_conflict_padding", "register_blocking"),
    "mio_throttle": ("vector_loads", "register_blocking"),
    "lg_throttle": ("vector_loads", "smem_tiling"),
    # too many texture / read-only-path fetches queued: fewer, wider ones, or stage through shared memory
    "tex_throttle": ("vector_loads", "smem_tiling"),
    "math_pipe_throttle": ("tensor_cores_3xtf32", "tensor_cores_mma", "fast_math_intrinsics"),
    "wait": ("loop_unrolling", "register_blocking"),
    # eligible warps not picked: the schedulers are issue-bound; fewer instructions per result, not more warps
    "not_selected": ("register_blocking", "vector_loads", "loop_unrolling"),
    "drain": ("vector_loads",),
    "branch_resolving": ("warp_vote_match",),
}


class Loss(BaseModel):
    """One finding with its estimated cost."""

    rule: str
    bottleneck: Bottleneck
    lost_ms: float
    share_pct: float                 # of the diagnosed time (solve() time when known)


class Diagnosis(BaseModel):
    bottleneck: Bottleneck
    evidence: list[str] = Field(default_factory=list)          # "metric = value" strings
    suggested_features: list[str] = Field(default_factory=list)  # feature ids (feature_db)
    summary: str = ""
    rules: list[str] = Field(default_factory=list)             # the findings, largest estimated loss first
    kernel: str | None = None                                  # the kernel diagnosed (the longest one)
    at_roof: bool = False                                      # >= AT_ROOF_PCT of speed of light
    pct_of_sol: float | None = None
    roof: str | None = None                                    # whose compute rate the roof uses (fp32, fp16-tensor...)
    losses: list[Loss] = Field(default_factory=list)           # the findings' estimated costs, largest first

    def as_text(self) -> str:
        """For prompts and the console."""
        head = f"bottleneck: {self.bottleneck}" + (" (at the roof)" if self.at_roof else "")
        lines = [head, f"summary: {self.summary}"]
        if self.losses:
            lines.append("estimated time lost: " + ", ".join(f"{x.rule} {x.share_pct:.0f}%" for x in self.losses[:4]))
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
        kernel = usable.dominant() if usable else None
        return cls(
            kernel=kernel,
            profile=usable,
            roofline=roofline,
            compile=compile,
            n_launches=sum(k.launches for k in usable.kernels) if usable else 0,
            kernel_ms=usable.duration_ms if usable else None,
            spill_bytes=spills,
        )

    # -- derived quantities the rules share
    @property
    def total_ms(self) -> float | None:
        """The time the losses are shares of: solve() as timed, else the summed kernels."""
        if self.roofline is not None:
            return self.roofline.median_ms
        return self.kernel_ms

    @property
    def tk(self) -> float:
        """The diagnosed kernel's time in ms (0 without a profile)."""
        k = self.kernel
        return (k.duration_ms or 0.0) if k is not None else 0.0

    @property
    def sol_ms(self) -> float:
        """Speed of light of the whole solve() (0 when unknown)."""
        r = self.roofline
        return r.attainable_ms or 0.0 if r is not None else 0.0

    def unit_max(self) -> float:
        k = self.kernel
        if k is None:
            return 0.0
        return max(k.sm_throughput_pct or 0.0, _memory_busy(k))

    def idle_ms(self) -> float:
        """Time the busiest unit of the kernel waits: Tk * (1 - its utilization)."""
        return self.tk * max(0.0, 1.0 - self.unit_max() / 100.0)

    def unfilled_share(self) -> float:
        """The share of the SMs the grid leaves without a block. A grid of 128 blocks on 132 SMs is 0.12 waves
        (each SM could hold 8) but leaves 3% of the SMs idle: few warps per SM is an occupancy matter, judged
        by the stalls (``_needs_occupancy``), not an unfilled GPU. Without the SM count: 1 - waves."""
        k = self.kernel
        if k is None or k.waves_per_sm is None or k.waves_per_sm >= 1.0:
            return 0.0
        if k.sm_count and k.grid_size:
            return max(0.0, 1.0 - k.grid_size / k.sm_count)
        return 1.0 - k.waves_per_sm

    @property
    def wide_access(self) -> bool | None:
        """Whether the build's SASS has 16-byte global accesses; None when the SASS was not read."""
        sass = self.compile.sass if self.compile is not None else None
        if sass is None or not sass.global_widths:
            return None
        return sass.wide_global_access

    def uncoalesced_above(self) -> float:
        """Sectors per request above which accesses are uncoalesced, given the access widths of the build."""
        return VECTOR_SECTORS if self.wide_access else UNCOALESCED_SECTORS

    def all_dram_bytes(self) -> float | None:
        """DRAM bytes of every kernel of one solve() (None without a profile that counted them)."""
        if self.profile is None:
            return None
        known = [k.dram_bytes for k in self.profile.kernels if k.dram_bytes is not None]
        return sum(known) if known else None

    def short_kernels(self) -> bool:
        return bool(self.kernel_ms and self.n_launches >= 2 and self.kernel_ms * 1e3 / self.n_launches < SHORT_KERNEL_US)


@dataclass
class Finding:
    lost_ms: float
    evidence: list[str]


def _f(v: float | None, unit: str = "%") -> str:
    if v is None:
        return "n/a"
    return f"{v:.1f}{unit}" if unit == "%" else f"{v:.4g}{unit}"


def _stalls(k: KernelMetrics) -> str:
    return "warp stalls: " + ", ".join(f"{s.reason} {s.share_pct:.0f}%" for s in k.stalls[:3])


# ----------------------------------------------------------------------------------------------- rules
def _launch(f: Facts) -> Finding | None:
    if f.profile is None or not f.n_launches or f.kernel_ms is None:
        return None
    ev: list[str] = []
    gaps = 0.0
    if f.roofline is not None:   # measured: solve() time not spent in kernels, beyond what the two timers disagree by
        gaps = max(0.0, f.roofline.median_ms - f.kernel_ms - EVENT_NCU_AGREEMENT * f.kernel_ms)
        lost = gaps
    else:                        # estimated: what each extra launch costs
        lost = max(0, f.n_launches - 1) * LAUNCH_OVERHEAD_US / 1e3
    avg_us = f.kernel_ms * 1e3 / f.n_launches
    if f.short_kernels():
        lost += sum((k.duration_ms or 0.0) * max(0.0, 1 - max(k.sm_throughput_pct or 0, k.memory_throughput_pct or 0) / 100)
                    for k in f.profile.kernels)
        ev.append(f"kernel launches per solve = {f.n_launches}, mean kernel duration = {avg_us:.2f} us "
                  f"(launch overhead is ~2-5 us each)")
    if gaps > 0.02 and f.roofline is not None:
        ev.append(f"solve() time = {f.roofline.median_ms:.4g} ms but kernels run {f.kernel_ms:.4g} ms "
                  f"(gaps between launches, host work or syncs)")
    return Finding(lost, ev) if ev else None


def _excess_dram(f: Facts) -> Finding | None:
    k, r = f.kernel, f.roofline
    if k is None or r is None or k.dram_bytes is None or r.bytes <= 0:
        return None
    ratio = k.dram_bytes / r.bytes
    if ratio < EXCESS_DRAM_RATIO:
        return None
    if r.peak_bandwidth_gbs:   # the extra transfers; under a compute roof only DRAM's busy share is not hidden by math
        busy = 1.0 if r.limiter == "memory" else min(1.0, (k.dram_throughput_pct or 100.0) / 100)
        lost = (k.dram_bytes - r.bytes) / (r.peak_bandwidth_gbs * 1e9) * 1e3 * busy
    else:
        lost = f.tk * (k.dram_throughput_pct or 0) / 100 * (1 - 1 / ratio)
    return Finding(lost, [f"DRAM bytes = {k.dram_bytes / 1e6:.4g} MB vs the task's minimum {r.bytes / 1e6:.4g} MB "
                          f"({ratio:.2f}x): data crosses DRAM more than once"])


def _extra_passes(f: Facts) -> Finding | None:
    """solve() as a whole moves EXTRA_PASSES_RATIO x the task's minimum bytes over several kernels, while no
    kernel alone re-reads its data (that is excess-dram-traffic): each pass streams the data again. Tuning
    one pass cannot beat removing it, so the time lost is what solve() would save moving the minimum:
    T * (1 - minimum / moved)."""
    r, k = f.roofline, f.kernel
    moved = f.all_dram_bytes()
    if r is None or k is None or f.profile is None or moved is None or r.bytes <= 0 or f.n_launches < 2:
        return None
    ratio = moved / r.bytes
    if ratio < EXTRA_PASSES_RATIO or (k.dram_bytes or 0.0) / r.bytes >= EXCESS_DRAM_RATIO:
        return None
    names = sorted({kk.name.split("(")[0] for kk in f.profile.kernels})
    total = f.total_ms or f.kernel_ms or 0.0
    return Finding(total * (1 - 1 / ratio), [
        f"DRAM bytes of solve() = {moved / 1e6:.4g} MB in {f.n_launches} launches of {len(names)} kernels "
        f"({', '.join(names)}) vs the task's minimum {r.bytes / 1e6:.4g} MB ({ratio:.2f}x): the algorithm streams "
        f"the data more than once; a single-pass algorithm moves the minimum in one launch"])


def _memory_busy(k: KernelMetrics) -> float:
    """The busiest memory unit's % of its peak: Nsight Compute's memory throughput, DRAM, and L1/shared and L2
    on their own (a kernel re-reading through L2 at 76% shows "memory throughput 55%")."""
    units = (k.memory_throughput_pct, k.dram_throughput_pct, k.l2_throughput_pct, k.l1_throughput_pct)
    return min(100.0, max((u for u in units if u is not None), default=0.0))


def _memory_name(k: KernelMetrics) -> str | None:
    """Which memory the busiest memory unit is: DRAM, L2, shared memory, or L1 (global loads that hit)."""
    busiest = _busiest_memory_unit(k)
    if busiest is None:
        return None
    unit = busiest[0]
    if unit != "L1/shared":
        return unit
    g = (k.global_load_sectors or 0.0) + (k.global_store_sectors or 0.0)
    return "shared memory" if (k.shared_wavefronts or 0.0) > g else "L1 (global accesses served by L1)"


def _memory_text(k: KernelMetrics) -> str:
    """'memory throughput = 65.7% (shared memory: L1/shared 67.3%, L2 13.4%, DRAM 2.6%)': which memory is busy."""
    units = ", ".join(f"{u} {v:.1f}%" for u, v in (("L1/shared", k.l1_throughput_pct), ("L2", k.l2_throughput_pct),
                                                     ("DRAM", k.dram_throughput_pct)) if v is not None)
    name = _memory_name(k)
    return f"memory throughput = {_f(k.memory_throughput_pct)}" + (f" ({name}: {units})" if name and units else "")


def _busiest_memory_unit(k: KernelMetrics) -> tuple[str, float] | None:
    units = {"DRAM": k.dram_throughput_pct, "L2": k.l2_throughput_pct, "L1/shared": k.l1_throughput_pct}
    known = {u: v for u, v in units.items() if v is not None}
    if not known:
        return None
    u = max(known, key=lambda x: known[x])
    return u, known[u]


def _cache_rereads(f: Facts) -> Finding | None:
    k = f.kernel
    if k is None:
        return None
    busiest = _busiest_memory_unit(k)
    if busiest is None or busiest[0] == "DRAM" or busiest[1] < HIGH_THROUGHPUT_PCT:
        return None
    unit, pct = busiest
    if pct - (k.dram_throughput_pct or 0.0) < CACHE_OVER_DRAM_PCT:
        return None
    # only the cache's global traffic (not shared-memory wavefronts), and only its useful sectors (wasted
    # ones are the uncoalesced-access finding's)
    g = (k.global_load_sectors or 0.0) + (k.global_store_sectors or 0.0)
    w = k.shared_wavefronts or 0.0
    share = g / (g + w) if g + w > 0 else 1.0
    spr = k.load_sectors_per_request
    useful = (16.0 if f.wide_access else 4.0) / spr if spr is not None and spr > f.uncoalesced_above() else 1.0
    lost = max(0.0, f.tk * pct / 100 * share * useful - f.sol_ms)
    if lost <= 0 and share < 0.5:
        return None
    ev = [f"busiest memory unit = {unit} at {pct:.1f}% (DRAM {_f(k.dram_throughput_pct)}): data re-read through the "
          f"cache instead of reused from registers or shared memory"]
    if k.l1_hit_rate_pct is not None or k.l2_hit_rate_pct is not None:
        ev.append(f"L1 hit rate = {_f(k.l1_hit_rate_pct)}, L2 hit rate = {_f(k.l2_hit_rate_pct)}")
    return Finding(lost, ev)


def _uncoalesced(f: Facts) -> Finding | None:
    k = f.kernel
    if k is None:
        return None
    ev, waste = [], 0.0
    loads, stores = k.global_load_sectors or 0.0, k.global_store_sectors or 0.0
    wide = f.wide_access
    ideal = 16.0 if wide else 4.0
    for label, spr, n, sectors in (("load", k.load_sectors_per_request, k.global_load_requests, loads),
                                   ("store", k.store_sectors_per_request, k.global_store_requests, stores)):
        if spr is not None and spr > f.uncoalesced_above() and (n or 0) >= MIN_REQUESTS:
            widths = ("the build has 16-byte accesses: 16-17 when they are consecutive" if wide else
                      "4 for consecutive 4-byte accesses" + ("" if wide is False else
                                                              ", 16-17 for consecutive 16-byte ones"))
            ev.append(f"global {label}s: {spr:.1f} sectors of 32 B per warp request ({widths}): uncoalesced access")
            share = sectors / (loads + stores) if loads + stores > 0 else 1.0   # of the global traffic
            waste += share * (1.0 - ideal / spr)
    if not ev:
        return None
    busy = max(k.memory_throughput_pct or 0.0, k.l1_throughput_pct or 0.0)
    return Finding(f.tk * busy / 100 * waste, ev)


def _hot_atomics(f: Facts) -> Finding | None:
    """Global atomics piled on a few addresses: one L2 slice's atomic unit busy, the others idle. They
    serialize there, whatever the bandwidth: Tk * U(hot slice) * (1 - mean slice / hot slice)."""
    k = f.kernel
    if k is None or k.l2_atomic_max_pct is None or k.l2_atomic_max_pct < HOT_ATOMIC_PCT:
        return None
    mean = k.l2_atomic_pct or 0.0
    if mean * HOT_ATOMIC_RATIO > k.l2_atomic_max_pct:
        return None
    return Finding(f.tk * k.l2_atomic_max_pct / 100 * (1 - mean / k.l2_atomic_max_pct),
                   [f"L2 atomic units: the busiest slice {k.l2_atomic_max_pct:.0f}% busy, the mean slice {mean:.1f}%: "
                    f"global atomics on a few addresses serialize in one slice"])


def _bank(f: Facts) -> Finding | None:
    k = f.kernel
    if k is None or k.bank_conflict_pct is None or (k.shared_wavefronts or 0) < MIN_REQUESTS or k.bank_conflict_pct < 5:
        return None
    busy = k.l1_throughput_pct if k.l1_throughput_pct is not None else (k.memory_throughput_pct or 0.0)
    return Finding(f.tk * busy / 100 * k.bank_conflict_pct / 100,
                   [f"shared bank conflicts = {k.bank_conflicts:.0f} of {k.shared_wavefronts:.0f} wavefronts "
                    f"({k.bank_conflict_pct:.0f}%)"])


def _spills(f: Facts) -> Finding | None:
    k = f.kernel
    ev = []
    if f.spill_bytes > 0:
        ev.append(f"register spills (ptxas) = {f.spill_bytes} bytes")
    lost = 0.0
    if k is not None and (k.local_bytes or 0) > 0:
        ev.append(f"local-memory traffic = {k.local_bytes:.3g} bytes")
        global_bytes = 32.0 * ((k.global_load_sectors or 0) + (k.global_store_sectors or 0)) or (k.dram_bytes or 0.0)
        local = k.local_bytes or 0.0
        lost = f.tk * (k.memory_throughput_pct or 0.0) / 100 * local / (local + global_bytes)
    return Finding(lost, ev) if ev else None


def _divergence(f: Facts) -> Finding | None:
    k = f.kernel
    if k is None:
        return None
    ev = []
    eff = k.warp_efficiency_pct
    waste = 0.0
    if eff is not None and eff < DIVERGENCE_EFFICIENCY_PCT:
        ev.append(f"active threads per warp instruction = {k.threads_per_inst:.1f} of 32 ({eff:.0f}%)")
        waste = 1.0 - eff / 100
    if k.branch_uniform_pct is not None and k.branch_uniform_pct < BRANCH_UNIFORM_PCT:
        ev.append(f"uniform branches = {k.branch_uniform_pct:.0f}%")
    if not ev:
        return None
    return Finding(f.tk * (k.sm_throughput_pct or 0.0) / 100 * waste, ev)


def _compute(f: Facts) -> Finding | None:
    k = f.kernel
    if k is None or k.sm_throughput_pct is None or k.sm_throughput_pct < HIGH_THROUGHPUT_PCT:
        return None
    if k.sm_throughput_pct < max(k.memory_throughput_pct or 0, k.dram_throughput_pct or 0):
        return None
    ev = [f"SM throughput = {_f(k.sm_throughput_pct)} of peak, {_memory_text(k)}"]
    pipe = k.busiest_pipe
    if pipe is not None:
        ev.append(f"busiest pipe = {pipe[0]} at {pipe[1]:.1f}%" + (
            f", tensor pipes {k.tensor_pipe_pct:.1f}%" if k.tensor_pipe_pct and pipe[0] != "tensor" else ""))
    if k.ipc is not None:
        ev.append(f"IPC = {k.ipc:.2f} of 4")
    # the SM time spent on useful lanes beyond the roof's need (idle lanes are the divergence finding's)
    useful = min(1.0, (k.warp_efficiency_pct or 100.0) / 100)
    return Finding(max(0.0, f.tk * k.sm_throughput_pct / 100 * useful - f.sol_ms), ev)


def _unfilled(f: Facts) -> Finding | None:
    k = f.kernel
    share = f.unfilled_share()
    if k is None or share <= 0:
        return None
    grid = f"grid = {k.grid_size} blocks of {k.block_size}" if k.grid_size and k.block_size else ""
    if k.sm_count and k.grid_size:
        ev = [f"{grid} on {k.sm_count} SMs: {100 * share:.0f}% of the SMs get no block"]
    else:
        ev = [f"waves per SM = {k.waves_per_sm:.2f} ({grid + ': ' if grid else ''}the GPU is not filled once)"]
    if k.achieved_occupancy_pct is not None:
        ev.append(f"achieved occupancy = {_f(k.achieved_occupancy_pct)}")
    return Finding(f.idle_ms() * share, ev)


def _stall_group(group: str) -> Callable[[Facts], Finding | None]:
    reasons = STALL_GROUPS[group]

    def estimate(f: Facts) -> Finding | None:
        k = f.kernel
        if k is None or not k.stalls:
            return None
        share = sum(s.share_pct for s in k.stalls if s.reason in reasons) / 100
        if share <= 0:
            return None
        lost = f.idle_ms() * (1 - f.unfilled_share()) * share
        busy = f"SM throughput = {_f(k.sm_throughput_pct)}, {_memory_text(k)}"
        ev = [f"{busy}: the busiest unit idles {100 - f.unit_max():.0f}% of the time", _stalls(k)]
        if group == "memory-latency" and k.warp_cycles_per_inst is not None:
            ev.append(f"a warp waits {k.warp_cycles_per_inst:.1f} cycles between its instructions; achieved "
                      f"occupancy {_f(k.achieved_occupancy_pct)}")
        return Finding(lost, ev)

    return estimate


def _saturated_unit(f: Facts, findings: list, total: float) -> tuple[Bottleneck, str] | None:
    """(bottleneck, unit) when one unit is saturated and every finding is small: the unit bounds the kernel."""
    k = f.kernel
    if k is None or f.unit_max() < SATURATED_PCT:
        return None
    if findings and findings[0][1].lost_ms >= SATURATED_LOSS_SHARE * total:
        return None
    if (k.sm_throughput_pct or 0.0) >= _memory_busy(k):
        return "compute-bound", "the SM"
    return "memory-bound", _memory_name(k) or "memory"


# ---------------------------------------------------------------------------------------- features
def _reuse_features(f: Facts) -> tuple[str, ...]:
    """Data crossing DRAM or the caches more than once: keep it on chip."""
    r = f.roofline
    if r is not None and r.limiter == "compute":
        return ("smem_tiling", "register_blocking", "block_rasterization", "cp_async", "distance_as_gemm")
    return ("single_pass_row", "online_softmax", "kernel_fusion", "smem_tiling", "warp_per_row")


def _memory_idle_features(f: Facts) -> tuple[str, ...]:
    """A memory unit busy but not saturated: more bytes in flight, wider accesses."""
    k = f.kernel
    if k is not None and _memory_name(k) == "shared memory":
        # shared memory, not DRAM, is the busy memory: fewer, wider shared accesses per result (conflicts are
        # the bank-conflicts finding's)
        return ("register_blocking", "vector_loads")
    spr = k.load_sectors_per_request if k is not None else None
    if spr is not None and spr > f.uncoalesced_above():
        return ("coalesced_access", "vector_loads", "cache_hints")
    return ("vector_loads", "loop_unrolling", "cache_hints", "grid_stride_loop")


def _latency_features(f: Facts) -> tuple[str, ...]:
    r = f.roofline
    k = f.kernel
    base: tuple[str, ...]
    if r is not None and r.limiter == "compute":
        # a task with data reuse waiting on loads: stage the reused data on chip first
        base = ("smem_tiling", "register_blocking", "double_buffering", "cp_async")
    else:
        base = ("vector_loads", "loop_unrolling", "double_buffering", "cp_async")
    if _needs_occupancy(k):
        base += ("occupancy_tuning", "launch_config_tuning")
    return base


def _needs_occupancy(k: KernelMetrics | None) -> bool:
    """More warps help only a kernel that waits on memory with little ILP and has room for more warps."""
    if k is None or not k.stalls:
        return False
    lsb = sum(s.share_pct for s in k.stalls if s.reason == "long_scoreboard")
    little_ilp = k.warp_cycles_per_inst is None or k.warp_cycles_per_inst >= LITTLE_ILP_CYCLES
    room = k.achieved_occupancy_pct is not None and k.achieved_occupancy_pct < OCCUPANCY_ROOM_PCT
    return lsb >= LONG_SCOREBOARD_SHARE and little_ilp and room and not _sm_full(k)


def _sm_full(k: KernelMetrics) -> bool:
    """Issue slots or a pipe at FULL_PCT or more: the SMs are busy with the warps they have (low occupancy by
    design, as in a tuned GEMM), so more warps cannot help."""
    pipe = k.busiest_pipe
    return (k.issue_active_pct or 0.0) >= FULL_PCT or (pipe is not None and pipe[1] >= FULL_PCT)


def _compute_features(f: Facts) -> tuple[str, ...]:
    r = f.roofline
    if r is not None and r.limiter == "memory":
        # the task needs few operations per byte: the kernel does work it should not
        return ("fast_math_intrinsics", "loop_unrolling", "vector_loads")
    return ("tensor_cores_3xtf32", "wgmma", "tensor_cores_mma", "register_blocking", "distance_as_gemm",
            "fast_math_intrinsics")


def _idle_bottleneck(f: Facts, fallback: Bottleneck) -> Bottleneck:
    """The busiest unit at 60% or more names the bound; else the fallback (latency, ...)."""
    k = f.kernel
    if k is None:
        return fallback
    mem = _memory_busy(k)
    sm = k.sm_throughput_pct or 0.0
    if max(mem, sm) < HIGH_THROUGHPUT_PCT:
        return fallback
    return "memory-bound" if mem >= sm else "compute-bound"


def _idle_features(f: Facts) -> tuple[str, ...]:
    b = _idle_bottleneck(f, "latency-bound")
    if b == "memory-bound":
        return _memory_idle_features(f)
    if b == "compute-bound":
        return _compute_features(f)
    return _latency_features(f)


AT_ROOF_MEMORY = ("kernel_fusion", "reduced_precision", "single_pass_row", "cache_hints")
AT_ROOF_COMPUTE = ("tensor_cores_3xtf32", "wgmma", "tensor_cores_mma", "distance_as_gemm", "reduced_precision",
                   "fast_math_intrinsics")


@dataclass(frozen=True)
class Rule:
    name: str
    bottleneck: Bottleneck | Callable[[Facts], Bottleneck]
    estimate: Callable[[Facts], Finding | None]
    features: tuple[str, ...] | Callable[[Facts], tuple[str, ...]]
    advice: str

    def features_for(self, f: Facts) -> tuple[str, ...]:
        return self.features(f) if callable(self.features) else self.features

    def bottleneck_for(self, f: Facts) -> Bottleneck:
        return self.bottleneck(f) if callable(self.bottleneck) else self.bottleneck


RULES: tuple[Rule, ...] = (
    Rule("launch-overhead", "launch-bound", _launch,
         ("kernel_fusion", "cuda_graphs", "programmatic_dependent_launch", "persistent_kernel", "cooperative_groups"),
         "solve() is dominated by launches and gaps between them: do the work in fewer, larger kernels, or "
         "capture the sequence in a CUDA graph."),
    Rule("extra-passes", "algorithm-bound", _extra_passes,
         ("decoupled_lookback_scan", "single_pass_row", "online_softmax", "kernel_fusion"),
         "solve() streams the data through DRAM more than once in several kernels: an algorithm problem that "
         "tuning each pass cannot fix. Use a single-pass algorithm (a scan with decoupled look-back, one pass "
         "per row with the row kept on chip, fused kernels)."),
    Rule("excess-dram-traffic", "memory-bound", _excess_dram, _reuse_features,
         "the same data crosses DRAM more than once: read it once (one pass, the row in registers or shared "
         "memory, fused kernels, tiles reused from shared memory)."),
    Rule("cache-rereads", "memory-bound", _cache_rereads, _reuse_features,
         "a cache is the busiest unit: the kernel re-reads data instead of reusing it from registers or "
         "shared memory."),
    Rule("uncoalesced-access", "memory-bound", _uncoalesced,
         ("coalesced_access", "warp_per_row", "smem_tiling", "vector_loads"),
         "a warp's global accesses are scattered over many 32-byte sectors: make consecutive threads touch "
         "consecutive addresses (transpose the mapping, or stage through shared memory)."),
    Rule("hot-atomics", "latency-bound", _hot_atomics, ("privatized_atomics", "warp_vote_match"),
         "global atomics pile on a few addresses and serialize in one L2 slice: privatize them (per-block "
         "copies in shared memory, merged once) or aggregate them per warp."),
    Rule("bank-conflicts", "bank-conflicts", _bank, ("bank_conflict_padding",),
         "shared-memory accesses of a warp hit the same banks: pad or swizzle the shared arrays."),
    Rule("register-spills", "memory-bound", _spills, ("register_blocking", "occupancy_tuning"),
         "registers spill to local memory: shrink per-thread arrays or relax __launch_bounds__."),
    Rule("divergence", "divergence", _divergence, ("warp_vote_match", "warp_shuffle", "block_reduction_tree"),
         "threads of a warp take different paths or sit idle: make the active threads contiguous."),
    Rule("compute-throughput", "compute-bound", _compute, _compute_features,
         "the SM pipelines are the busiest unit: fewer or cheaper instructions per result, or faster units "
         "(tensor cores, within the task's tolerance)."),
    Rule("unfilled-grid", "occupancy-bound", _unfilled,
         ("warp_per_row", "split_k", "stream_k", "launch_config_tuning"),
         "the grid does not fill the GPU: split the work into more blocks (a warp per row, split-K)."),
    Rule("memory-latency", lambda f: _idle_bottleneck(f, "latency-bound"), _stall_group("memory-latency"), _idle_features,
         "warps wait on global memory: more independent loads in flight per warp (ILP), or staged ahead."),
    Rule("synchronization", "latency-bound", _stall_group("synchronization"),
         ("warp_shuffle", "double_buffering", "warp_specialization"),
         "warps wait at barriers or memory fences: fewer block-wide syncs, warp-level exchanges."),
    Rule("memory-queues", "memory-bound", _stall_group("memory-queues"),
         ("vector_loads", "smem_tiling", "register_blocking"),
         "the memory-instruction queues are full: fewer, wider memory instructions."),
    Rule("dependencies", lambda f: _idle_bottleneck(f, "latency-bound"), _stall_group("dependencies"),
         ("loop_unrolling", "register_blocking"),
         "each instruction waits on the one before: independent accumulators and unrolled loops."),
    Rule("issue", "compute-bound", _stall_group("issue"), _compute_features,
         "the schedulers have more ready warps than issue slots: fewer instructions per result."),
)


def _coalesced_notes(f: Facts) -> list[str]:
    """Say so where 12-18 sectors per request are consecutive 16-byte accesses (the SASS has them), lest
    they read as scattered."""
    k = f.kernel
    if k is None or not f.wide_access:
        return []
    notes = []
    for label, spr, n in (("load", k.load_sectors_per_request, k.global_load_requests),
                          ("store", k.store_sectors_per_request, k.global_store_requests)):
        if spr is not None and 12.0 <= spr <= VECTOR_SECTORS and (n or 0) >= MIN_REQUESTS:
            notes.append(f"global {label}s: {spr:.1f} sectors per warp request: consecutive 16-byte accesses "
                         f"(float4 or cp.async), coalesced")
    return notes


def _past_the_fp32_roof(f: Facts) -> tuple[str, tuple[str, ...]] | None:
    """An fp32 matrix product computing on the FMA pipe: its roof is the fp32 one, and tensor cores are the
    way past it (3xTF32 keeps fp32 accuracy; plain TF32 where the tolerance allows ~1e-3). The sentence and
    the features, or None."""
    r, k = f.roofline, f.kernel
    if r is None or k is None or k.uses_tensor_cores or r.compute_unit != "fp32" or r.limiter != "compute":
        return None
    if r.tensor_unit not in ("3xtf32-tensor", "tf32-tensor"):
        return None
    fma = max((v for p, v in k.pipe_pct.items() if p in ("fma", "fmaheavy")), default=0.0)
    if fma < FFMA_GEMM_PIPE_PCT:
        return None
    roof = f" the fp32 roof is {r.compute_ms:.4g} ms" if r.compute_ms else " the fp32 roof bounds it"
    if r.tensor_unit == "tf32-tensor":
        how = "TF32 (the tolerance allows it) or 3xTF32 (fp32 accuracy)"
        feats: tuple[str, ...] = ("tensor_cores_mma", "tensor_cores_3xtf32", "wgmma")
    else:
        how = "3xTF32 (fp32 accuracy; the tolerance forbids plain TF32)"
        feats = ("tensor_cores_3xtf32", "wgmma")
    return (f"an fp32 matrix product on the FMA pipe ({fma:.0f}% busy):{roof}; tensor cores are the way past it: "
            f"{how}", feats)


def _roofline_only(f: Facts) -> tuple[Bottleneck, list[str], tuple[str, ...]] | None:
    r = f.roofline
    if r is None:
        return None
    if r.limiter == "memory":
        return "memory-bound", [f"roofline: {r.summary()}"], _memory_idle_features(f)
    return "compute-bound", [f"roofline: {r.summary()}"], _compute_features(f)


def _dedupe(items: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _tensor_advice(f: "Facts") -> TensorAdvice:
    """tensor_advice.advise for the facts' build, roofline and longest kernel (Hopper's mma.sync vs wgmma,
    splits, L2 re-reads)."""
    sass = f.compile.sass if f.compile is not None else None
    k = f.kernel
    flow = sass.flow if sass is not None else {}
    ops = sass.opcodes if sass is not None else {}
    tiled = bool(flow.get("shared_tile") or ops.get("LDGSTS") or ops.get("UTMALDG") or ops.get("HGMMA"))
    return advise(sass, arch=f.compile.arch if f.compile is not None else "",
                  split=f.roofline.split if f.roofline is not None else "",
                  tensor_pipe_pct=k.tensor_pipe_pct if k is not None else None,
                  l2_pct=k.l2_throughput_pct if k is not None else None,
                  dram_pct=k.dram_throughput_pct if k is not None else None, tiled=tiled)


def diagnose(profile: ProfileResult | None, roofline: RooflinePoint | None, compile: CompileResult | None,
             *, rules: Sequence[Rule] = RULES, max_features: int = 6,
             allowed_features: Collection[str] | None = None) -> Diagnosis:
    """Name the bottleneck with the largest estimated time lost; evidence carries the metric values.

    ``allowed_features``: the catalogue features that apply to the task (its family, bound, tolerance,
    input dtypes, and the arch: feature_db.applicable); the others are never suggested. None: no filter.
    """
    f = Facts.gather(profile, roofline, compile)
    r = f.roofline
    total = f.total_ms or f.tk or 1.0
    findings: list[tuple[Rule, Finding, Bottleneck]] = []
    ceiling = max(0.0, total - f.sol_ms) if f.sol_ms else total   # nothing can save more than the headroom
    for rule in rules:
        found = rule.estimate(f)
        if found is not None and found.evidence:
            found.lost_ms = min(max(0.0, found.lost_ms), ceiling)
            findings.append((rule, found, rule.bottleneck_for(f)))
    findings.sort(key=lambda x: -x[1].lost_ms)
    at_roof = r is not None and r.pct_of_sol is not None and r.pct_of_sol >= AT_ROOF_PCT
    k = f.kernel

    evidence: list[str] = []
    features: list[str] = []
    significant = [x for x in findings if x[1].lost_ms >= MIN_LOSS_SHARE * total] or findings[:1]
    for _, found, _ in findings:
        evidence += [e for e in found.evidence if e not in evidence]
    for rule, _, _ in significant:
        features += rule.features_for(f)
    if k is not None and k.stalls:
        if not any(e.startswith("warp stalls") for e in evidence):
            evidence.append(_stalls(k))
        features += STALL_FEATURES.get(k.stalls[0].reason, ())
    evidence += _coalesced_notes(f)
    past_fp32 = _past_the_fp32_roof(f)
    if past_fp32 is not None:
        evidence.append(past_fp32[0])
    if f.profile is not None and f.profile.n_kernels > 1:
        evidence.append(f"kernels per solve = {f.profile.n_kernels}: " + ", ".join(
            f"{kk.name.split('(')[0]} {kk.duration_ns / 1e3:.1f} us" for kk in f.profile.kernels if kk.duration_ns is not None))
    if profile is not None and not profile.available and profile.reason:
        evidence.append(f"no Nsight Compute profile ({profile.reason}): judged from timings and the compile report")
    if r is not None:
        evidence.append(f"roofline: {r.summary()}")
        if r.basis:
            evidence.append(r.basis)

    losses = [Loss(rule=rule.name, bottleneck=b, lost_ms=round(found.lost_ms, 6),
                   share_pct=round(100 * found.lost_ms / total, 1)) for rule, found, b in findings]
    if at_roof:
        assert r is not None
        bottleneck: Bottleneck = "memory-bound" if r.limiter == "memory" else "compute-bound"
        features = list(AT_ROOF_MEMORY if r.limiter == "memory" else AT_ROOF_COMPUTE)  # fewer bytes/flops only
        summary = (f"at the roof: {fmt_pct(r.pct_of_sol)}% of speed of light (the {r.limiter} roof). Only fewer "
                   f"{'bytes' if r.limiter == 'memory' else 'flops'}, or another algorithm or unit, can help; "
                   f"or stop here.")
    elif (saturated := _saturated_unit(f, findings, total)) is not None:
        bottleneck, unit = saturated
        summary = (f"{unit} is busy {f.unit_max():.0f}% of the time and no finding costs {SATURATED_LOSS_SHARE:.0%} "
                   f"or more: the kernel is {bottleneck}; what is left is doing less work on that unit.")
        if r is not None and r.pct_of_sol is not None:
            summary += f" At {fmt_pct(r.pct_of_sol)}% of speed of light (whose bound is the {r.limiter} roof)."
    elif findings:
        top_rule, _, bottleneck = findings[0]
        summary = top_rule.advice + f" Estimated {losses[0].share_pct:.0f}% of the time lost to {top_rule.name}."
        if r is not None and r.pct_of_sol is not None:
            summary += f" At {fmt_pct(r.pct_of_sol)}% of speed of light (whose bound is the {r.limiter} roof)."
    else:
        only = _roofline_only(f)
        if only is None:
            return Diagnosis(bottleneck="unknown", evidence=evidence, suggested_features=[],
                             summary="not enough evidence to name a bottleneck (no profile and no roofline)",
                             kernel=k.name if k else None)
        bottleneck, _, feats = only
        features = list(feats)
        summary = f"by the roofline this task is limited by {'memory bandwidth' if bottleneck == 'memory-bound' else 'arithmetic throughput'}."
        if r is not None and r.pct_of_sol is not None:
            summary += f" At {fmt_pct(r.pct_of_sol)}% of speed of light."
    if past_fp32 is not None:     # the way past the fp32 roof leads (or follows the top finding's first fix)
        at = 0 if bottleneck == "compute-bound" else min(1, len(features))
        features[at:at] = list(past_fp32[1])
    if bottleneck == "memory-bound" and k is not None and (name := _memory_name(k)) is not None and name != "DRAM":
        summary += f" The busy memory is {name}, not DRAM ({_memory_text(k)})."
    advice = _tensor_advice(f)
    evidence += [e for e in advice.evidence if e not in evidence]
    features = advice.add + [x for x in features if x not in advice.drop]
    allowed = set(allowed_features) if allowed_features is not None else None
    suggested = [x for x in _dedupe(features) if allowed is None or x in allowed][:max_features]
    names = [rule.name for rule, _, _ in findings] or [f"roofline-{'memory' if bottleneck == 'memory-bound' else 'compute'}"]
    return Diagnosis(
        bottleneck=bottleneck, evidence=evidence, suggested_features=suggested, summary=summary,
        rules=names, kernel=k.name if k else None, at_roof=at_roof,
        pct_of_sol=r.pct_of_sol if r is not None else None, roof=r.compute_unit if r is not None else None,
        losses=losses,
    )

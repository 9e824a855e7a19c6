"""Typed results of one Nsight Compute profile: what the critic and the diagnosis rules read.

Every metric is optional: ncu versions, GPUs and section sets differ in what they report, and a missing
number must read as "unknown", never as zero.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class StallReason(BaseModel):
    """One warp-stall reason: average warps stalled on it per issued instruction, and its share of all stalls."""

    reason: str                    # e.g. "long_scoreboard", "barrier", "math_pipe_throttle"
    per_issue: float               # smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio
    share_pct: float               # 100 * per_issue / sum over all reasons


class KernelMetrics(BaseModel):
    """Metrics of one kernel launch (or of several launches of the same kernel, summed/averaged)."""

    name: str
    launches: int = 1
    duration_ns: float | None = None                   # gpu__time_duration.sum (summed over launches)
    sm_throughput_pct: float | None = None             # SOL compute: sm__throughput ... pct_of_peak_sustained_elapsed
    memory_throughput_pct: float | None = None         # SOL memory: gpu__compute_memory_throughput ...
    dram_throughput_pct: float | None = None           # gpu__dram_throughput ...
    dram_bytes: float | None = None                    # dram__bytes_read.sum + dram__bytes_write.sum
    achieved_occupancy_pct: float | None = None        # sm__warps_active.avg.pct_of_peak_sustained_active
    theoretical_occupancy_pct: float | None = None     # sm__maximum_warps_per_active_cycle_pct
    occupancy_limiter: str | None = None               # "registers" | "shared" | "warps" | "blocks" | "barriers";
                                                       # None when theoretical occupancy is 100% (nothing limits)
    occupancy_limits: dict[str, float] = Field(default_factory=dict)  # blocks per SM allowed by each resource
    registers_per_thread: float | None = None
    shared_bytes_per_block: float | None = None        # static + dynamic
    local_bytes: float | None = None                   # local-memory (spill) traffic, loads + stores
    l1_hit_rate_pct: float | None = None
    l2_hit_rate_pct: float | None = None
    l1_throughput_pct: float | None = None             # l1tex__throughput (% of peak): L1/shared is the busy unit
    l2_throughput_pct: float | None = None             # lts__throughput (% of peak)
    l2_atomic_pct: float | None = None                 # L2 atomic units busy, mean slice (% of peak)
    l2_atomic_max_pct: float | None = None             # ... the busiest slice: atomics piled on a few addresses
    global_load_sectors: float | None = None           # l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum
    global_load_requests: float | None = None          # l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum
    global_store_sectors: float | None = None
    global_store_requests: float | None = None
    stalls: list[StallReason] = Field(default_factory=list)   # top reasons, largest first
    bank_conflicts: float | None = None                # shared-memory bank conflicts (ld + st)
    shared_wavefronts: float | None = None             # shared-memory wavefronts (ld + st), for the ratio
    threads_per_inst: float | None = None              # smsp__thread_inst_executed_per_inst_executed.ratio (32 = no divergence)
    branch_uniform_pct: float | None = None            # smsp__sass_average_branch_targets_threads_uniform.pct
    block_size: int | None = None
    grid_size: int | None = None
    waves_per_sm: float | None = None
    sm_count: int | None = None                        # launch__sm_count: the SMs the grid can spread over
    # ComputeWorkloadAnalysis, InstructionStats and WarpStateStats: how busy each pipe is, how often an
    # instruction issues, and how long a warp waits between its instructions (little ILP: long waits)
    pipe_pct: dict[str, float] = Field(default_factory=dict)  # pipe -> % of peak (cycles active, else instructions)
    tensor_pipe_pct: float | None = None               # tensor-core pipes (hmma, gmma/wgmma, imma), % of peak
    ipc: float | None = None                           # sm__inst_executed.avg.per_cycle_active (4 = every scheduler, every cycle)
    issue_active_pct: float | None = None              # % of cycles a scheduler issued an instruction
    warp_cycles_per_inst: float | None = None          # smsp__average_warp_latency_per_inst_issued.ratio
    instructions: float | None = None                  # warp instructions executed (smsp__inst_executed.sum)
    raw: dict[str, str] = Field(default_factory=dict, exclude=True)   # every column as printed, for debugging

    @property
    def duration_ms(self) -> float | None:
        return None if self.duration_ns is None else self.duration_ns / 1e6

    @property
    def bank_conflict_pct(self) -> float | None:
        """Conflicts as a share of shared-memory wavefronts (0 = conflict-free)."""
        if self.bank_conflicts is None or not self.shared_wavefronts:
            return None
        return 100.0 * self.bank_conflicts / self.shared_wavefronts

    @property
    def load_sectors_per_request(self) -> float | None:
        """32-byte sectors per warp-wide global load: 4 when 32 threads read consecutive floats, 32 when
        every thread touches its own sector (uncoalesced)."""
        if self.global_load_sectors is None or not self.global_load_requests:
            return None
        return self.global_load_sectors / self.global_load_requests

    @property
    def store_sectors_per_request(self) -> float | None:
        if self.global_store_sectors is None or not self.global_store_requests:
            return None
        return self.global_store_sectors / self.global_store_requests

    @property
    def busiest_pipe(self) -> tuple[str, float] | None:
        """The pipe with the highest utilization, e.g. ("fma", 88.0)."""
        if not self.pipe_pct:
            return None
        name = max(self.pipe_pct, key=lambda k: self.pipe_pct[k])
        return name, self.pipe_pct[name]

    @property
    def uses_tensor_cores(self) -> bool:
        """The tensor-core pipes did real work (more than 1% of their peak)."""
        return (self.tensor_pipe_pct or 0.0) >= 1.0

    @property
    def warp_efficiency_pct(self) -> float | None:
        """Active threads per executed instruction over 32 (100 = no divergence, no idle lanes)."""
        return None if self.threads_per_inst is None else 100.0 * self.threads_per_inst / 32.0


class ProfileResult(BaseModel):
    """One ncu run over one solve() call. ``available`` False means no metrics, and ``reason`` says why."""

    available: bool
    reason: str | None = None
    kernels: list[KernelMetrics] = Field(default_factory=list)
    duration_ms: float | None = None      # sum of kernel durations of one solve()
    report_path: str | None = None        # .ncu-rep kept in the run directory
    csv_path: str | None = None           # the raw page as CSV, beside the report
    seconds: float = 0.0                  # wall time of profiling
    command: list[str] = Field(default_factory=list)
    sizes: dict[str, int] = Field(default_factory=dict)
    ncu_version: str | None = None

    @property
    def n_kernels(self) -> int:
        return len(self.kernels)

    def dominant(self) -> KernelMetrics | None:
        """The kernel that takes the most time (what a diagnosis should look at first)."""
        timed = [k for k in self.kernels if k.duration_ns is not None]
        if timed:
            return max(timed, key=lambda k: k.duration_ns or 0.0)
        return self.kernels[0] if self.kernels else None

    def summary(self) -> str:
        """One line for logs and prompts."""
        if not self.available:
            return f"no profile: {self.reason}"
        k = self.dominant()
        parts = [f"{self.n_kernels} kernel(s), {self.duration_ms:.4g} ms" if self.duration_ms else f"{self.n_kernels} kernel(s)"]
        if k is not None:
            for label, v in (("SM", k.sm_throughput_pct), ("mem", k.memory_throughput_pct), ("DRAM", k.dram_throughput_pct),
                             ("occ", k.achieved_occupancy_pct)):
                if v is not None:
                    parts.append(f"{label} {v:.0f}%")
        return "; ".join(parts)


class ProfileOptions(BaseModel):
    """Which candidates get profiled, and how. The graph reads ``which``; the runner reads the rest."""

    which: Literal["best", "all", "none"] = "best"   # best of each round (default), every passing one, or none
    timeout_s: float = 180.0
    source_counters: bool = False      # SourceCounters (branch uniformity, per-line stalls): ~2x slower on long kernels
    max_launches: int = 200            # launches profiled per solve(); each costs ~0.3-0.5 s of replay
    repeat: int = 1                    # solve() calls inside the profiled range (durations are per call)

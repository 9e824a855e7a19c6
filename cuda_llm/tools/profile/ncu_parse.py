"""Parse Nsight Compute CSV output into KernelMetrics. Pure: text in, models out.

Two layouts are understood:
- the raw page (``ncu --csv --page raw``, or ``ncu --import R.ncu-rep --csv --page raw``): one row per
  kernel launch, one column per metric (``gpu__time_duration.sum``...), a second row of units;
- the details page (``--csv --page details``, the default): one row per (launch, metric) with the
  display names ("Duration", "Achieved Occupancy"...), mapped here to the raw metric names.
ncu prints the profiled program's own stdout and its ``==PROF==`` lines into the same stream, so the
table is found by its header line and anything that does not fit the table is skipped.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable

from cuda_llm.tools.profile.profile_models import KernelMetrics, ProfileResult, StallReason


class NcuParseError(ValueError):
    """The text holds no ncu table (the run failed before printing one, or the wrong page was asked for)."""


# Raw metric names (the ones the parser reads). Keep in step with ncu.EXTRA_METRICS.
DURATION = "gpu__time_duration.sum"
SM_PCT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEM_PCT = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
DRAM_PCT = "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"
DRAM_PCT_ALT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"   # older ncu
DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
ACHIEVED_OCC = "sm__warps_active.avg.pct_of_peak_sustained_active"
THEORETICAL_OCC = "sm__maximum_warps_per_active_cycle_pct"
REGISTERS = "launch__registers_per_thread"
SMEM_STATIC = "launch__shared_mem_per_block_static"
SMEM_DYNAMIC = "launch__shared_mem_per_block_dynamic"
BLOCK_SIZE = "launch__block_size"
GRID_SIZE = "launch__grid_size"
WAVES = "launch__waves_per_multiprocessor"
SM_COUNT = "launch__sm_count"
L1_HIT = "l1tex__t_sector_hit_rate.pct"
L2_HIT = "lts__t_sector_hit_rate.pct"
LOCAL_LD = "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum"
LOCAL_ST = "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum"
BANK_LD = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"
BANK_ST = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"
WAVEFRONTS_LD = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"
WAVEFRONTS_ST = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"
L1_THROUGHPUT = "l1tex__throughput.avg.pct_of_peak_sustained_active"
L2_THROUGHPUT = "lts__throughput.avg.pct_of_peak_sustained_elapsed"
L2_ATOMIC = "lts__d_atomic_input_cycles_active.avg.pct_of_peak_sustained_elapsed"      # atomics, the mean L2 slice
L2_ATOMIC_MAX = "lts__d_atomic_input_cycles_active.max.pct_of_peak_sustained_elapsed"  # the busiest slice
GLD_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
GLD_REQUESTS = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"
GST_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"
GST_REQUESTS = "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"
THREADS_PER_INST = "smsp__thread_inst_executed_per_inst_executed.ratio"
BRANCH_UNIFORM = "smsp__sass_average_branch_targets_threads_uniform.pct"
# Blocks per SM that each resource allows. On a tie the first in this order is named (a block with no
# shared memory reports the same limit for "shared" as for "blocks": the hardware cap is the real one).
OCC_LIMITS = {
    "blocks": "launch__occupancy_limit_blocks",
    "warps": "launch__occupancy_limit_warps",
    "registers": "launch__occupancy_limit_registers",
    "shared": "launch__occupancy_limit_shared_mem",
    "barriers": "launch__occupancy_limit_barriers",
}
STALL_RE = re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")
# ComputeWorkloadAnalysis / InstructionStats / WarpStateStats
IPC = "sm__inst_executed.avg.per_cycle_active"
ISSUE_PCT = "sm__inst_issued.avg.pct_of_peak_sustained_active"        # "Issue Slots Busy"
ISSUE_PER_CYCLE = "smsp__issue_active.avg.per_cycle_active"            # the same as a fraction (WarpStateStats)
WARP_CYCLES_PER_INST = "smsp__average_warp_latency_per_inst_issued.ratio"
INSTRUCTIONS = "smsp__inst_executed.sum"
INSTRUCTIONS_ALT = "inst_executed"
# Pipe utilization: cycles active (preferred) or instructions executed, per pipe, % of peak.
PIPE_CYCLES_RE = re.compile(r"^sm__pipe_(\w+?)_cycles_active\.avg\.pct_of_peak_sustained_(active|elapsed)$")
PIPE_INST_RE = re.compile(r"^sm__inst_executed_pipe_(\w+?)\.avg\.pct_of_peak_sustained_(active|elapsed)$")
# The real tensor-core work: hmma (mma.sync, wmma), gmma (wgmma), imma, and Hopper's combined counter. Not
# "tensor" or "shared" alone: on an H100 those also count the fp16/uniform work of kernels without any mma.
TENSOR_PIPE_RE = re.compile(r"^tensor_(?:op_(?:hmma|gmma|imma)\w*|type_hmma\w*)$")
_AMBIGUOUS_PIPES = {"tensor", "shared"}
NOT_STALLS = {"selected"}    # "selected" is the warp that issued, not a stall

# Details-page display names -> raw metric names.
DETAILS_NAMES = {
    "Duration": DURATION,
    "Compute (SM) Throughput": SM_PCT,
    "SM Throughput": SM_PCT,
    "Memory Throughput": MEM_PCT,
    "DRAM Throughput": DRAM_PCT,
    "Achieved Occupancy": ACHIEVED_OCC,
    "Theoretical Occupancy": THEORETICAL_OCC,
    "Registers Per Thread": REGISTERS,
    "Static Shared Memory Per Block": SMEM_STATIC,
    "Dynamic Shared Memory Per Block": SMEM_DYNAMIC,
    "Block Size": BLOCK_SIZE,
    "Grid Size": GRID_SIZE,
    "Waves Per SM": WAVES,
    "L1/TEX Hit Rate": L1_HIT,
    "L2 Hit Rate": L2_HIT,
    "Block Limit Registers": OCC_LIMITS["registers"],
    "Block Limit Shared Mem": OCC_LIMITS["shared"],
    "Block Limit Warps": OCC_LIMITS["warps"],
    "Block Limit SM": OCC_LIMITS["blocks"],
}

_TIME = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9, "s": 1e9}
_BYTE_PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 1024.0, "Mi": 1024.0**2, "Gi": 1024.0**3}
_BYTE_RE = re.compile(r"^(|K|M|G|T|Ki|Mi|Gi)(?:byte|B)$")


def to_number(value: str, unit: str = "") -> float | None:
    """A printed ncu value in base units (ns for times, bytes for sizes); None for n/a or text.

    Thousands separators are dropped ("1,234.5"), per-unit suffixes are ignored ("Kbyte/block" -> bytes).
    """
    v = value.strip().replace(",", "")
    if not v or v.lower() in {"n/a", "nan", "-"}:
        return None
    try:
        x = float(v)
    except ValueError:
        return None
    u = unit.strip().split("/")[0].strip()
    if u in _TIME:
        return x * _TIME[u]
    m = _BYTE_RE.match(u)
    if m:
        return x * _BYTE_PREFIX[m.group(1)]
    return x


def _rows_after_header(text: str, first_cell: str) -> tuple[list[str], list[list[str]]]:
    """The header row that starts with ``first_cell`` and the table rows after it of the same width."""
    lines = text.splitlines()
    start = None
    for i, line in enumerate(lines):
        if line.startswith(f'"{first_cell}",') or line.startswith(f"{first_cell},"):
            start = i
            break
    if start is None:
        raise NcuParseError(
            "no Nsight Compute CSV table in this output (no header line starting with \"ID\"); "
            "ncu may have failed before profiling, or was run without --csv"
        )
    header = next(csv.reader([lines[start]]))
    rows: list[list[str]] = []
    body = [ln for ln in lines[start + 1:] if ln.strip() and not ln.startswith("==")]
    for row in csv.reader(io.StringIO("\n".join(body))):
        if len(row) == len(header):
            rows.append(row)
    return header, rows


def parse_raw_csv(text: str) -> list[dict[str, tuple[str, str]]]:
    """Rows of ``--page raw`` output: one dict per launch, metric name -> (printed value, unit)."""
    header, rows = _rows_after_header(text, "ID")
    units = [""] * len(header)
    launches: list[dict[str, tuple[str, str]]] = []
    for row in rows:
        if row[0].strip() == "":          # the units row (ID column empty)
            units = row
            continue
        launches.append({h: (row[i], units[i]) for i, h in enumerate(header)})
    return launches


def parse_details_csv(text: str) -> list[dict[str, tuple[str, str]]]:
    """Rows of ``--page details`` output, folded into one dict per launch keyed like the raw page."""
    header, rows = _rows_after_header(text, "ID")
    col = {h: i for i, h in enumerate(header)}
    needed = ("Metric Name", "Metric Unit", "Metric Value")
    if any(n not in col for n in needed):
        raise NcuParseError(f"details CSV without the columns {needed}: got {header[:16]}")
    by_id: dict[str, dict[str, tuple[str, str]]] = {}
    for row in rows:
        launch = by_id.setdefault(row[0], {h: (row[col[h]], "") for h in header if h not in needed})
        name, unit = row[col["Metric Name"]], row[col["Metric Unit"]]
        key = DETAILS_NAMES.get(name, name)
        if "pct" in key and unit.strip() != "%":
            # "Memory Throughput" is a % in SpeedOfLight and a rate (Gbyte/s) in MemoryWorkloadAnalysis
            key = f"{name} [{unit}]"
        launch[key] = (row[col["Metric Value"]], unit)
    return list(by_id.values())


def parse_table(text: str) -> list[dict[str, tuple[str, str]]]:
    """Either page: the details page is recognised by its "Metric Name" column."""
    header, _ = _rows_after_header(text, "ID")
    return parse_details_csv(text) if "Metric Name" in header else parse_raw_csv(text)


def _num(launch: dict[str, tuple[str, str]], name: str) -> float | None:
    if name not in launch:
        return None
    value, unit = launch[name]
    return to_number(value, unit)


def _sum(*values: float | None) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _dims(text: str) -> int | None:
    """"(256, 1, 1)" -> 256."""
    nums = [int(n) for n in re.findall(r"\d+", text or "")]
    if not nums:
        return None
    out = 1
    for n in nums:
        out *= n
    return out


def _pipes(launch: dict[str, tuple[str, str]]) -> dict[str, float]:
    """Pipe -> % of peak. Cycles-active metrics win over instruction counts; % of active cycles over
    % of elapsed cycles (the ComputeWorkloadAnalysis figure over the SpeedOfLight breakdown)."""
    rank: dict[str, int] = {}
    out: dict[str, float] = {}
    for metric in launch:
        for pref, regex in ((2, PIPE_CYCLES_RE), (0, PIPE_INST_RE)):
            m = regex.match(metric)
            if not m:
                continue
            v = _num(launch, metric)
            score = pref + (1 if m.group(2) == "active" else 0)
            if v is not None and score > rank.get(m.group(1), -1):
                rank[m.group(1)] = score
                out[m.group(1)] = v
    return out


def kernel_from_launch(launch: dict[str, tuple[str, str]]) -> KernelMetrics:
    """One launch's metrics, with units converted and the derived figures filled in."""
    name = launch.get("Kernel Name", ("?", ""))[0] or "?"
    limits = {k: v for k, m in OCC_LIMITS.items() if (v := _num(launch, m)) is not None}
    theoretical = _num(launch, THEORETICAL_OCC)
    limiter = min(limits, key=lambda k: limits[k]) if limits else None
    if theoretical is not None and theoretical >= 99.5:
        limiter = None          # every resource allows full occupancy: nothing limits it
    stall_vals: dict[str, float] = {}
    for metric in launch:
        m = STALL_RE.match(metric)
        if m and m.group(1) not in NOT_STALLS:
            v = _num(launch, metric)
            if v is not None and v > 0:
                stall_vals[m.group(1)] = v
    total = sum(stall_vals.values())
    stalls = [StallReason(reason=r, per_issue=v, share_pct=100.0 * v / total)
              for r, v in sorted(stall_vals.items(), key=lambda kv: -kv[1])]
    pipes = _pipes(launch)
    tensor = [v for k, v in pipes.items() if TENSOR_PIPE_RE.match(k)]
    issue = _num(launch, ISSUE_PCT)
    if issue is None and (per_cycle := _num(launch, ISSUE_PER_CYCLE)) is not None:
        issue = 100.0 * per_cycle
    instructions = _num(launch, INSTRUCTIONS)
    if instructions is None:
        instructions = _num(launch, INSTRUCTIONS_ALT)
    block = _num(launch, BLOCK_SIZE)
    grid = _num(launch, GRID_SIZE)
    dram_pct = _num(launch, DRAM_PCT)
    if dram_pct is None:
        dram_pct = _num(launch, DRAM_PCT_ALT)
    return KernelMetrics(
        name=name,
        duration_ns=_num(launch, DURATION),
        sm_throughput_pct=_num(launch, SM_PCT),
        memory_throughput_pct=_num(launch, MEM_PCT),
        dram_throughput_pct=dram_pct,
        dram_bytes=_sum(_num(launch, DRAM_READ), _num(launch, DRAM_WRITE)),
        achieved_occupancy_pct=_num(launch, ACHIEVED_OCC),
        theoretical_occupancy_pct=theoretical,
        occupancy_limiter=limiter,
        occupancy_limits=limits,
        registers_per_thread=_num(launch, REGISTERS),
        shared_bytes_per_block=_sum(_num(launch, SMEM_STATIC), _num(launch, SMEM_DYNAMIC)),
        local_bytes=_sum(_num(launch, LOCAL_LD), _num(launch, LOCAL_ST)),
        l1_hit_rate_pct=_num(launch, L1_HIT),
        l2_hit_rate_pct=_num(launch, L2_HIT),
        l1_throughput_pct=_num(launch, L1_THROUGHPUT),
        l2_throughput_pct=_num(launch, L2_THROUGHPUT),
        l2_atomic_pct=_num(launch, L2_ATOMIC),
        l2_atomic_max_pct=_num(launch, L2_ATOMIC_MAX),
        global_load_sectors=_num(launch, GLD_SECTORS),
        global_load_requests=_num(launch, GLD_REQUESTS),
        global_store_sectors=_num(launch, GST_SECTORS),
        global_store_requests=_num(launch, GST_REQUESTS),
        stalls=stalls[:6],
        bank_conflicts=_sum(_num(launch, BANK_LD), _num(launch, BANK_ST)),
        shared_wavefronts=_sum(_num(launch, WAVEFRONTS_LD), _num(launch, WAVEFRONTS_ST)),
        threads_per_inst=_num(launch, THREADS_PER_INST),
        branch_uniform_pct=_num(launch, BRANCH_UNIFORM),
        block_size=int(block) if block is not None else _dims(launch.get("Block Size", ("", ""))[0]),
        grid_size=int(grid) if grid is not None else _dims(launch.get("Grid Size", ("", ""))[0]),
        waves_per_sm=_num(launch, WAVES),
        sm_count=int(sms) if (sms := _num(launch, SM_COUNT)) else None,
        pipe_pct={k: v for k, v in pipes.items() if k not in _AMBIGUOUS_PIPES},
        tensor_pipe_pct=max(tensor) if tensor else None,
        ipc=_num(launch, IPC),
        issue_active_pct=issue,
        warp_cycles_per_inst=_num(launch, WARP_CYCLES_PER_INST),
        instructions=instructions,
        raw={k: v for k, (v, _u) in launch.items()},
    )


_AVG_FIELDS = (
    "sm_throughput_pct", "memory_throughput_pct", "dram_throughput_pct", "achieved_occupancy_pct",
    "theoretical_occupancy_pct", "l1_hit_rate_pct", "l2_hit_rate_pct", "threads_per_inst", "branch_uniform_pct",
    "waves_per_sm", "l1_throughput_pct", "l2_throughput_pct", "tensor_pipe_pct", "ipc", "issue_active_pct",
    "warp_cycles_per_inst", "l2_atomic_pct", "l2_atomic_max_pct",
)
_SUM_FIELDS = ("duration_ns", "dram_bytes", "local_bytes", "bank_conflicts", "shared_wavefronts",
               "global_load_sectors", "global_load_requests", "global_store_sectors", "global_store_requests",
               "instructions")


def merge_launches(launches: list[KernelMetrics]) -> KernelMetrics:
    """Several launches of one kernel as one entry: times and counts summed, rates time-weighted."""
    if len(launches) == 1:
        return launches[0]
    first = launches[0]
    weights = [k.duration_ns or 0.0 for k in launches]
    wsum = sum(weights)
    update: dict[str, object] = {"launches": sum(k.launches for k in launches)}
    for f in _SUM_FIELDS:
        update[f] = _sum(*(getattr(k, f) for k in launches))
    for f in _AVG_FIELDS:
        pairs = [(getattr(k, f), w) for k, w in zip(launches, weights) if getattr(k, f) is not None]
        if pairs:
            tw = sum(w for _, w in pairs)
            update[f] = (sum(v * w for v, w in pairs) / tw) if tw > 0 else sum(v for v, _ in pairs) / len(pairs)
    # stalls: time-weighted per-issue values, re-normalised
    agg: dict[str, float] = {}
    for k, w in zip(launches, weights):
        for s in k.stalls:
            agg[s.reason] = agg.get(s.reason, 0.0) + s.per_issue * (w / wsum if wsum else 1.0 / len(launches))
    total = sum(agg.values())
    update["stalls"] = [StallReason(reason=r, per_issue=v, share_pct=100.0 * v / total if total else 0.0)
                        for r, v in sorted(agg.items(), key=lambda kv: -kv[1])][:6]
    update["grid_size"] = max((k.grid_size or 0) for k in launches) or None
    pipes: dict[str, float] = {}
    for name in {p for k in launches for p in k.pipe_pct}:
        pairs = [(k.pipe_pct[name], w) for k, w in zip(launches, weights) if name in k.pipe_pct]
        tw = sum(w for _, w in pairs)
        pipes[name] = sum(v * w for v, w in pairs) / tw if tw > 0 else sum(v for v, _ in pairs) / len(pairs)
    update["pipe_pct"] = pipes
    return first.model_copy(update=update)


def short_name(name: str) -> str:
    """"void gelu_kernel<128>(const float *, float *, int)" -> "gelu_kernel<128>"."""
    base = name.split("(")[0].strip()
    return base.split(" ")[-1] if " " in base else base


def kernels_from_text(text: str) -> list[KernelMetrics]:
    """Every kernel in the output, launches of the same kernel merged, in order of first launch."""
    order: list[str] = []
    groups: dict[str, list[KernelMetrics]] = {}
    for launch in parse_table(text):
        k = kernel_from_launch(launch)
        if k.name not in groups:
            order.append(k.name)
            groups[k.name] = []
        groups[k.name].append(k)
    return [merge_launches(groups[n]) for n in order]


def profile_from_text(text: str, *, repeat: int = 1, **fields) -> ProfileResult:
    """A ProfileResult from ncu CSV output; ``repeat`` solve() calls were profiled (durations are per call).

    Raises NcuParseError when the text holds no table; an empty table (no kernel launched) gives an
    unavailable result that says so.
    """
    kernels = kernels_from_text(text)
    if not kernels:
        return ProfileResult(available=False, reason="ncu profiled no kernel: solve() launched nothing inside "
                             "the profiled range", **fields)
    repeat = max(1, repeat)
    if repeat > 1:
        kernels = [k.model_copy(update={
            "duration_ns": None if k.duration_ns is None else k.duration_ns / repeat,
            "launches": max(1, k.launches // repeat),
        }) for k in kernels]
    durations = [k.duration_ns for k in kernels if k.duration_ns is not None]
    return ProfileResult(
        available=True,
        kernels=kernels,
        duration_ms=sum(durations) / 1e6 if durations else None,
        **fields,
    )


def metric_names(text: str) -> Iterable[str]:
    """The metric columns of a raw-page CSV (for checking which names an ncu version prints)."""
    header, _ = _rows_after_header(text, "ID")
    return [h for h in header if "__" in h]

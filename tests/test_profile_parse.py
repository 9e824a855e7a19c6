"""The Nsight Compute parser on real reports recorded on an H100 (tests/fixtures/ncu/, see record.py there)."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from cuda_llm.tools.profile.ncu_parse import (
    NcuParseError,
    kernels_from_text,
    metric_names,
    parse_details_csv,
    profile_from_text,
    short_name,
    to_number,
)

FIXTURES = Path(__file__).parent / "fixtures" / "ncu"
SUMMARY = json.loads((FIXTURES / "summary.json").read_text())


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def raw_column(name: str, metric: str) -> list[tuple[str, str]]:
    """(value, unit) of one metric for every launch, read with the csv module alone."""
    rows = list(csv.reader(text(name).splitlines()))
    col = rows[0].index(metric)
    return [(r[col], rows[1][col]) for r in rows[2:]]


def test_memory_bound_fixture_gelu():
    p = profile_from_text(text("gelu.csv"))
    assert p.available and p.n_kernels == 1
    k = p.kernels[0]
    assert short_name(k.name) == "gelu_kernel"
    (value, unit), = raw_column("gelu.csv", "gpu__time_duration.sum")
    assert unit == "us"
    assert k.duration_ns == pytest.approx(float(value) * 1e3)
    assert p.duration_ms == pytest.approx(k.duration_ns / 1e6)
    # a streaming kernel: DRAM busier than the SMs, every thread active, no shared memory
    assert k.dram_throughput_pct > k.sm_throughput_pct
    assert k.memory_throughput_pct >= k.dram_throughput_pct - 1e-6
    assert k.threads_per_inst == pytest.approx(32.0)
    assert k.shared_wavefronts == 0 and k.bank_conflicts == 0
    assert k.registers_per_thread == float(raw_column("gelu.csv", "launch__registers_per_thread")[0][0])
    # DRAM bytes in Mbyte converted to bytes: gelu reads and writes 4 bytes per element of 2^26
    assert k.dram_bytes == pytest.approx(8 * 2**26, rel=0.1)
    assert k.block_size == 256 and k.grid_size == 2**26 // 256
    assert 0 <= k.achieved_occupancy_pct <= k.theoretical_occupancy_pct <= 100


def test_compute_bound_fixture_nbody():
    k = profile_from_text(text("nbody.csv")).dominant()
    assert short_name(k.name) == "nbody_kernel"
    assert k.sm_throughput_pct > k.memory_throughput_pct > k.dram_throughput_pct
    assert k.duration_ms > 1.0
    # 131072 threads in blocks of 256 on 132 SMs: under half a wave
    assert k.waves_per_sm < 0.5
    assert k.l1_hit_rate_pct > 90


def test_multi_kernel_fixture_cross_entropy():
    p = profile_from_text(text("cross_entropy.csv"))
    names = [short_name(k.name) for k in p.kernels]
    assert names == ["zero_kernel", "cross_entropy_kernel"]        # order of launch
    assert p.dominant().name.startswith("cross_entropy_kernel")
    assert p.duration_ms == pytest.approx(sum(k.duration_ns for k in p.kernels) / 1e6)
    zero = p.kernels[0]
    assert zero.block_size == 1 and zero.grid_size == 1
    assert zero.duration_ns < p.kernels[1].duration_ns / 100
    # the reduction uses shared memory: wavefronts are counted
    assert p.kernels[1].shared_wavefronts > 0


def test_many_launches_of_one_kernel_are_merged():
    p = profile_from_text(text("sort_small_trimmed.csv"))
    launches = len(raw_column("sort_small_trimmed.csv", "gpu__time_duration.sum"))
    log_n = 12                                           # n = 4096 keys
    assert launches == log_n * (log_n + 1) // 2           # one launch per bitonic step
    assert p.n_kernels == 1
    k = p.kernels[0]
    assert k.launches == launches
    total_ns = sum(to_number(v, u) for v, u in raw_column("sort_small_trimmed.csv", "gpu__time_duration.sum"))
    assert k.duration_ns == pytest.approx(total_ns)
    # per-call division when solve() ran twice inside the range
    half = profile_from_text(text("sort_small_trimmed.csv"), repeat=2)
    assert half.duration_ms == pytest.approx(p.duration_ms / 2)
    assert half.kernels[0].launches == launches // 2


@pytest.mark.parametrize("fixture", ["gelu.csv", "nbody.csv", "cross_entropy.csv", "softmax.csv", "hgemm.csv",
                                     "stencil2d.csv", "sort_small_trimmed.csv"])
def test_stalls_are_ranked_shares(fixture):
    for k in profile_from_text(text(fixture)).kernels:
        assert k.stalls, k.name
        shares = [s.share_pct for s in k.stalls]
        assert shares == sorted(shares, reverse=True)
        assert 0 < sum(shares) <= 100.0 + 1e-6
        assert all(s.reason != "selected" for s in k.stalls)


def test_top_stalls_match_the_recorded_ratios():
    k = profile_from_text(text("gelu.csv")).kernels[0]
    rows = list(csv.reader(text("gelu.csv").splitlines()))
    ratios = {h.split("stalled_")[1].split("_per_issue")[0]: float(rows[2][i])
              for i, h in enumerate(rows[0]) if h.startswith("smsp__average_warps_issue_stalled_")}
    ratios.pop("selected")
    top = max(ratios, key=ratios.get)
    assert k.stalls[0].reason == top == "long_scoreboard"
    assert k.stalls[0].share_pct == pytest.approx(100 * ratios[top] / sum(ratios.values()))


def test_ncu_duration_agrees_with_event_timing():
    """Recorded on the same run: ncu's kernel time within 15% of CUDA-event time for kernels >= 50 us."""
    for name, entry in SUMMARY["baselines"].items():
        fixture = FIXTURES / f"{name}.csv"
        if not fixture.exists() or entry["event_median_ms"] < 0.05:
            continue
        p = profile_from_text(fixture.read_text())
        assert p.duration_ms == pytest.approx(entry["event_median_ms"], rel=0.15), name


def test_occupancy_limiter_only_when_something_limits():
    p = profile_from_text(text("cross_entropy.csv"))
    zero, main = p.kernels
    # one-thread blocks: 32 blocks per SM is the cap, 32 of 64 warps = 50%
    assert zero.theoretical_occupancy_pct == pytest.approx(50.0)
    assert zero.occupancy_limiter == "blocks"
    assert main.theoretical_occupancy_pct == pytest.approx(100.0)
    assert main.occupancy_limiter is None
    assert set(main.occupancy_limits) >= {"registers", "shared", "warps", "blocks"}


def test_program_output_around_the_table_is_skipped():
    noisy = "solve called\n==PROF== Connected to process 1\n" + text("gelu.csv") + "==PROF== Disconnected\nbye\n"
    assert profile_from_text(noisy).kernels[0].duration_ns == profile_from_text(text("gelu.csv")).kernels[0].duration_ns


def test_no_table_raises_a_clear_error():
    with pytest.raises(NcuParseError, match="no Nsight Compute CSV table"):
        profile_from_text("==ERROR== something failed\n")


def test_units_and_placeholders():
    assert to_number("232.512", "us") == pytest.approx(232512.0)
    assert to_number("1.024", "Kbyte/block") == pytest.approx(1024.0)
    assert to_number("6.711110", "Mbyte") == pytest.approx(6.71111e6)
    assert to_number("2,230", "") == 2230.0
    assert to_number("no data", "%") is None
    assert to_number("n/a") is None


def test_metric_names_of_the_fixture_cover_what_the_parser_reads():
    from cuda_llm.tools.profile import ncu_parse as P

    names = set(metric_names(text("gelu.csv")))
    for m in (P.DURATION, P.SM_PCT, P.MEM_PCT, P.DRAM_PCT, P.ACHIEVED_OCC, P.THEORETICAL_OCC, P.REGISTERS,
              P.L1_HIT, P.L2_HIT, P.LOCAL_LD, P.BANK_LD, P.THREADS_PER_INST, P.L1_THROUGHPUT, P.L2_THROUGHPUT):
        assert m in names, m


def test_details_page_keeps_percent_and_rate_apart():
    details = "\n".join([
        '"ID","Process ID","Kernel Name","Section Name","Metric Name","Metric Unit","Metric Value"',
        '"0","1","k(float *)","GPU Speed Of Light Throughput","Duration","us","12.5"',
        '"0","1","k(float *)","GPU Speed Of Light Throughput","Memory Throughput","%","80.1"',
        '"0","1","k(float *)","Memory Workload Analysis","Memory Throughput","Gbyte/s","2,400.5"',
        '"0","1","k(float *)","Occupancy","Achieved Occupancy","%","55"',
    ])
    assert len(parse_details_csv(details)) == 1
    k = kernels_from_text(details)[0]
    assert k.duration_ns == pytest.approx(12500.0)
    assert k.memory_throughput_pct == pytest.approx(80.1)
    assert k.achieved_occupancy_pct == pytest.approx(55.0)


@pytest.mark.skipif(shutil.which("ncu") is None, reason="needs ncu to import the .ncu-rep files")
@pytest.mark.parametrize("name", ["gelu", "nbody", "cross_entropy"])
def test_committed_reports_import_to_the_same_metrics(name):
    out = subprocess.run(["ncu", "--import", str(FIXTURES / f"{name}.ncu-rep"), "--csv", "--page", "raw"],
                         capture_output=True, text=True, timeout=120).stdout
    a, b = profile_from_text(out), profile_from_text(text(f"{name}.csv"))
    assert [k.duration_ns for k in a.kernels] == [k.duration_ns for k in b.kernels]


def test_compute_workload_metrics_are_parsed():
    """Pipe utilization, issue activity and warp latency (ComputeWorkloadAnalysis, InstructionStats and
    WarpStateStats metrics) from the recorded raw pages."""
    sgemm = profile_from_text(text("sgemm.csv")).dominant()
    (lsu,), = [raw_column("sgemm.csv", "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_elapsed")]
    assert sgemm.pipe_pct["lsu"] == pytest.approx(float(lsu[0]))
    assert sgemm.pipe_pct["fma"] == pytest.approx(float(raw_column("sgemm.csv",
                                                        "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed")[0][0]))
    assert sgemm.busiest_pipe == ("lsu", sgemm.pipe_pct["lsu"])
    assert sgemm.issue_active_pct == pytest.approx(14.0)          # smsp__issue_active 0.14 per cycle
    assert sgemm.warp_cycles_per_inst == pytest.approx(110.707127)
    assert sgemm.instructions == pytest.approx(11860443136)
    # "tensor" and "shared" count the fp16/uniform work of any kernel on an H100: never read as tensor cores
    gelu = profile_from_text(text("gelu.csv")).dominant()
    assert float(raw_column("gelu.csv", "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed")[0][0]) > 1
    assert "tensor" not in gelu.pipe_pct and not gelu.uses_tensor_cores
    assert gelu.tensor_pipe_pct == 0


def test_tensor_pipes_and_merged_launches():
    header = ['"ID"', '"Kernel Name"', '"gpu__time_duration.sum"',
              '"sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"',
              '"sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active"', '"sm__inst_executed.avg.per_cycle_active"']
    rows = [",".join(header), '"","","us","%","%",""', '"0","k()","10","80","20","1.5"', '"1","k()","30","40","60","2.5"']
    k = kernels_from_text("\n".join(rows))[0]
    assert k.launches == 2 and k.uses_tensor_cores
    assert k.tensor_pipe_pct == pytest.approx((80 * 10 + 40 * 30) / 40)        # time-weighted
    assert k.pipe_pct["fma"] == pytest.approx((20 * 10 + 60 * 30) / 40)
    assert k.ipc == pytest.approx((1.5 * 10 + 2.5 * 30) / 40)


def test_the_default_sections_include_the_compute_side():
    from cuda_llm.tools.profile.ncu import DEFAULT_SECTIONS, build_command

    assert {"ComputeWorkloadAnalysis", "InstructionStats", "WarpStateStats"} <= set(DEFAULT_SECTIONS)
    cmd = build_command("ncu", ["python", "-m", "x"], Path("/tmp/r"))
    assert cmd.count("--section") == len(DEFAULT_SECTIONS) and "ComputeWorkloadAnalysis" in cmd

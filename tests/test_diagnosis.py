"""The rule-based diagnosis: a table of cases -> bottleneck, and the real H100 baselines of the fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_llm.feature_db.catalogue import load_catalogue
from cuda_llm.tasks import load_task
from cuda_llm.tools.diagnosis import RULES, diagnose
from cuda_llm.tools.ncu_parse import profile_from_text
from cuda_llm.tools.profile_models import KernelMetrics, ProfileResult, StallReason
from cuda_llm.results import CompileResult, DeviceInfo, KernelResources
from cuda_llm.tools.roofline import roofline_from_counts, roofline_point

FIXTURES = Path(__file__).parent / "fixtures" / "ncu"


def profile(*kernels: KernelMetrics) -> ProfileResult:
    durations = [k.duration_ns for k in kernels if k.duration_ns is not None]
    return ProfileResult(available=True, kernels=list(kernels), duration_ms=sum(durations) / 1e6 if durations else None)


def kern(**kw) -> KernelMetrics:
    base = dict(name="k(float *)", duration_ns=500_000.0, sm_throughput_pct=30.0, memory_throughput_pct=30.0,
                dram_throughput_pct=25.0, achieved_occupancy_pct=70.0, theoretical_occupancy_pct=100.0,
                waves_per_sm=20.0, threads_per_inst=32.0, registers_per_thread=32.0)
    base.update(kw)
    return KernelMetrics(**base)


def roof(ms: float, *, bytes_=1e9, flops=1e9) -> object:
    return roofline_from_counts(bytes_, flops, ms, peak_bandwidth_gbs=3000.0, peak_fp32_gflops=60000.0)


CASES = [
    ("streaming at 85% DRAM", profile(kern(memory_throughput_pct=85, dram_throughput_pct=85, sm_throughput_pct=20)),
     roof(0.4), None, "memory-bound"),
    ("SM pipes at 80%", profile(kern(sm_throughput_pct=80, memory_throughput_pct=20, duration_ns=2e6)),
     roof(2.0, flops=1e11, bytes_=1e7), None, "compute-bound"),
    ("both idle", profile(kern(sm_throughput_pct=10, memory_throughput_pct=12,
                               stalls=[StallReason(reason="long_scoreboard", per_issue=5, share_pct=80)])),
     roof(0.55), None, "latency-bound"),
    ("tiny grid", profile(kern(waves_per_sm=0.1, achieved_occupancy_pct=8)), roof(0.55), None, "occupancy-bound"),
    ("many short launches", profile(kern(duration_ns=2000.0, launches=60)), roof(0.3), None, "launch-bound"),
    ("host gaps", profile(kern(duration_ns=50_000.0)), roof(0.5), None, "launch-bound"),
    ("bank conflicts", profile(kern(bank_conflicts=60_000, shared_wavefronts=100_000)), roof(0.6), None,
     "bank-conflicts"),
    ("divergent warps", profile(kern(threads_per_inst=12.0)), roof(0.6), None, "divergence"),
    ("uncoalesced loads", profile(kern(global_load_sectors=32e6, global_load_requests=1e6)), roof(0.6), None,
     "memory-bound"),
    ("spills", profile(kern()), roof(0.6),
     CompileResult(ok=True, arch="sm_90", source_hash="x",
                   kernels=[KernelResources(name="k", spill_store_bytes=64, spill_load_bytes=64)]), "memory-bound"),
    ("no profile, roofline only", ProfileResult(available=False, reason="ncu not found"), roof(1.0), None,
     "memory-bound"),
    ("nothing known", None, None, None, "unknown"),
]


@pytest.mark.parametrize("label,prof,roofline,compile_,expected", CASES, ids=[c[0] for c in CASES])
def test_rule_table(label, prof, roofline, compile_, expected):
    d = diagnose(prof, roofline, compile_)
    assert d.bottleneck == expected, d.as_text()
    if expected != "unknown":
        assert d.evidence and d.rules
        assert any(ch.isdigit() for ch in " ".join(d.evidence))      # evidence carries the numbers


def test_uncoalesced_evidence_names_sectors_and_features():
    d = diagnose(profile(kern(global_load_sectors=32e6, global_load_requests=1e6)), roof(0.6), None)
    assert d.rules[0] == "uncoalesced-access"
    assert any("32.0 sectors" in e for e in d.evidence)
    assert d.suggested_features[0] == "coalesced_access"


def test_missing_profile_is_said_in_the_evidence():
    d = diagnose(ProfileResult(available=False, reason="ERR_NVGPUCTRPERM: no permission"), roof(1.0), None)
    assert any("ERR_NVGPUCTRPERM" in e for e in d.evidence)


def test_every_suggested_feature_is_in_the_catalogue():
    ids = {f.id for f in load_catalogue()}
    from cuda_llm.tools.diagnosis import STALL_FEATURES, Facts

    for rule in RULES:
        feats = rule.features if not callable(rule.features) else rule.features(Facts.gather(None, None, None))
        assert set(feats) <= ids, rule.name
    for feats in STALL_FEATURES.values():
        assert set(feats) <= ids


# The real baselines: recorded ncu reports, event timings and measured peaks from the same H100 run.
SUMMARY = json.loads((FIXTURES / "summary.json").read_text())
REAL = [
    ("gelu", "gelu.csv", "memory-bound"),
    ("stencil2d", "stencil2d.csv", "memory-bound"),
    ("cross_entropy", "cross_entropy.csv", "memory-bound"),
    ("nbody", "nbody.csv", "occupancy-bound"),          # n = 65536: 256 blocks, a quarter of a wave
    ("softmax", "softmax.csv", "memory-bound"),           # one thread per row: 32 sectors per warp load
    ("sgemm", "sgemm.csv", "latency-bound"),
    ("sort_small", "sort_small_trimmed.csv", "launch-bound"),
    ("hgemm", "hgemm.csv", "memory-bound"),
]


def device() -> DeviceInfo:
    pk = SUMMARY["peaks"]
    return DeviceInfo(name=pk["device"], arch="sm_90", compute_capability=(9, 0), sm_count=pk["sm_count"],
                      peak_bandwidth_gbs=pk["copy_gbs"], peak_fp32_gflops=pk["fma_gflops"])


@pytest.mark.parametrize("name,fixture,expected", REAL, ids=[r[0] for r in REAL])
def test_real_baselines(name, fixture, expected):
    entry = SUMMARY["baselines"][name]
    task = load_task(entry["task"]).task
    p = profile_from_text((FIXTURES / fixture).read_text())
    r = roofline_point(task, entry["sizes"], entry["event_median_ms"], device())
    d = diagnose(p, r, None)
    assert d.bottleneck == expected, d.as_text()
    assert d.kernel == p.dominant().name


def test_hgemm_naive_is_told_to_reuse_data():
    """L1 is the busiest unit and DRAM traffic is ~30x the minimum: tiling, not coalescing."""
    entry = SUMMARY["baselines"]["hgemm"]
    p = profile_from_text((FIXTURES / "hgemm.csv").read_text())
    r = roofline_point(load_task("hgemm").task, entry["sizes"], entry["event_median_ms"], device())
    d = diagnose(p, r, None)
    assert d.suggested_features[:2] == ["smem_tiling", "register_blocking"] or "smem_tiling" in d.suggested_features[:2]
    assert any("L1/shared" in e for e in d.evidence)


def test_multi_kernel_evidence_lists_each_kernel():
    entry = SUMMARY["baselines"]["cross_entropy"]
    p = profile_from_text((FIXTURES / "cross_entropy.csv").read_text())
    r = roofline_point(load_task("cross_entropy").task, entry["sizes"], entry["event_median_ms"], device())
    d = diagnose(p, r, None)
    line = next(e for e in d.evidence if e.startswith("kernels per solve = 2"))
    assert "zero_kernel" in line and "cross_entropy_kernel" in line
    assert any("2.00x" in e for e in d.evidence)          # the row is read twice from DRAM


def _real(name: str, fixture: str):
    entry = SUMMARY["baselines"][name]
    p = profile_from_text((FIXTURES / fixture).read_text())
    r = roofline_point(load_task(entry["task"]).task, entry["sizes"], entry["event_median_ms"], device())
    return diagnose(p, r, None)


def test_softmax_naive_is_uncoalesced_and_underfilled():
    d = _real("softmax", "softmax.csv")
    assert d.rules[0] == "uncoalesced-access" and "low-occupancy" in d.rules
    assert any("32.0 sectors" in e for e in d.evidence)
    assert d.suggested_features[0] == "coalesced_access"


def test_sgemm_naive_waits_on_memory_and_is_told_to_tile():
    d = _real("sgemm", "sgemm.csv")
    assert any(e.startswith("top stalls: long_scoreboard") for e in d.evidence)
    assert d.suggested_features[0] == "smem_tiling"

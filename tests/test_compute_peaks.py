"""One home for "which compute peak bounds this kernel" (tools/bounds/compute_peaks.py): the units a build runs on,
the rate of each on a device and where it comes from, and the one bound made from them
(speed_of_light.bound): the judge, the roofline and the diagnosis read the same unit, rate, speed of light
and % of it, with one sentence saying which unit and why."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_llm.figures import fmt_ms

from cuda_llm.results import DeviceInfo, SassSummary
from cuda_llm.tasks import load_task
from cuda_llm.tasks.model import Tolerance
from cuda_llm.tools.bounds import compute_peaks, speed_of_light
from cuda_llm.tools.bounds.compute_peaks import bound_peak, unit_peak
from cuda_llm.tools.profile.roofline import roofline_point
from cuda_llm.tools.compiler.sass import summarize_sass

FIXTURES = Path(__file__).parent / "fixtures" / "sass"
H100 = DeviceInfo(name="H100", arch="sm_90", compute_capability=(9, 0), sm_count=132, peak_bandwidth_gbs=3000.0,
                  peak_fp32_gflops=60000.0, peak_fp16_tc_gflops=750000.0, peak_tf32_tc_gflops=375000.0,
                  tensor_peak_method="wgmma sm_90a", measurement_version=2)
NO_TENSOR_PEAKS = H100.model_copy(update={"peak_fp16_tc_gflops": None, "peak_tf32_tc_gflops": None})
FLOAT_TASKS = ("hgemm", "sgemm", "gelu", "softmax", "kmeans_assign", "spmv_csr", "nbody", "attention", "conv2d")


def _sass(name: str) -> SassSummary:
    return summarize_sass((FIXTURES / f"{name}.sass").read_text())


SASS = {name: _sass(name) for name in ("hgemm_wgmma_sm90a", "hgemm_naive_sm90a", "sgemm_naive_sm90a",
                                       "sgemm_3xtf32_sm80", "mma_kinds_sm90a")}
SASS["packed_half"] = SassSummary(opcodes={"HFMA2": 10}, packed_half=10)
SASS["fp8"] = SassSummary(tensor={"fp8": 8})


@pytest.fixture(scope="module")
def tasks():
    return {n: load_task(n).task for n in FLOAT_TASKS}


def _tf32_tolerant(task):
    """The same task with a tolerance plain TF32 products pass (rtol 1e-2)."""
    return task.model_copy(update={"tolerance": {o.name: Tolerance(atol=1e-2, rtol=1e-2) for o in task.outputs}})


# ------------------------------------------------------------------------------------------ peaks
def test_each_unit_says_where_its_rate_comes_from():
    assert unit_peak(H100, "fp32") == ("fp32", 60000.0, "measured")
    assert unit_peak(H100, "fp16-tensor").source == "measured" and unit_peak(H100, "bf16-tensor").gflops == 750000.0
    packed = unit_peak(H100, "fp16x2")
    assert packed.gflops == 120000.0 and packed.source.startswith("derived")
    three = unit_peak(H100, "3xtf32-tensor")
    assert three.gflops == pytest.approx(125000.0) and three.source.startswith("derived")
    assert unit_peak(H100, "fp8-tensor").gflops == 1_500_000.0
    # unmeasured: no peak, never a guess
    assert unit_peak(NO_TENSOR_PEAKS, "tf32-tensor") is None and unit_peak(NO_TENSOR_PEAKS, "fp8-tensor") is None
    assert unit_peak(NO_TENSOR_PEAKS, "fp16-tensor") is None
    assert unit_peak(H100.model_copy(update={"peak_fp32_gflops": None}), "fp16x2") is None


def test_unknown_units_and_types_are_refused_by_name():
    with pytest.raises(ValueError, match="unknown compute unit 'fp17'"):
        unit_peak(H100, "fp17")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown tensor-core input type 'int3'"):
        compute_peaks.tensor_unit("int3")


def test_the_units_of_a_build():
    assert compute_peaks.sass_units(SASS["hgemm_wgmma_sm90a"]) == ["fp32", "fp16-tensor"]
    assert compute_peaks.sass_units(SASS["sgemm_naive_sm90a"]) == ["fp32"]
    assert compute_peaks.sass_units(SASS["packed_half"]) == ["fp32", "fp16x2"]
    assert set(compute_peaks.sass_units(SASS["mma_kinds_sm90a"])) == {
        "fp32", "fp16x2", "fp16-tensor", "bf16-tensor", "tf32-tensor", "int8-tensor", "fp64-tensor"}


def test_tf32_runs_as_3xtf32_where_the_tolerance_forbids_plain_tf32(tasks):
    sgemm = tasks["sgemm"]
    assert compute_peaks.as_run("tf32-tensor", sgemm) == "3xtf32-tensor"
    assert compute_peaks.as_run("tf32-tensor", _tf32_tolerant(sgemm)) == "tf32-tensor"
    assert compute_peaks.as_run("fp16-tensor", sgemm) == "fp16-tensor"
    assert compute_peaks.may_use(sgemm) == "3xtf32-tensor" and compute_peaks.may_use(tasks["hgemm"]) == "fp16-tensor"
    assert compute_peaks.may_use(tasks["softmax"]) is None             # not GEMM-shaped
    assert compute_peaks.written_for(tasks["hgemm"]) == "fp16-tensor" and compute_peaks.written_for(sgemm) is None


# ------------------------------------------------------------------------------------------ one bound
BUILDS = [("hgemm", "hgemm_wgmma_sm90a", "fp16-tensor"), ("hgemm", "hgemm_naive_sm90a", "fp32"),
          ("hgemm", "packed_half", "fp16x2"), ("hgemm", "fp8", "fp8-tensor"), ("sgemm", "sgemm_naive_sm90a", "fp32"),
          ("sgemm", "sgemm_3xtf32_sm80", "tf32-tensor"), ("kmeans_assign", "sgemm_naive_sm90a", "fp32"),
          ("nbody", "sgemm_naive_sm90a", "fp32"), ("gelu", "packed_half", "fp16x2")]


@pytest.mark.parametrize("task,build,unit", BUILDS, ids=[f"{t}-{b}" for t, b, _ in BUILDS])
def test_one_bound_the_judge_and_the_roofline_read_alike(tasks, task, build, unit):
    """One unit, one rate, one speed of light, one % of it, whatever reads it: the tensor-core peak where
    the SASS has tensor-core instructions, else the FMA peak."""
    t, sass = tasks[task], SASS[build]
    assert bound_peak(t, H100, sass).unit == unit
    b = speed_of_light.bound(t, t.benchmark, H100, sass=sass)
    roof = roofline_point(t, t.benchmark, 1.0, H100, sass=sass)
    assert b.unit == unit and roof.compute_unit == unit and roof.peak_compute_gflops == b.peak_gflops / b.products
    assert roof.attainable_ms == pytest.approx(b.ms, rel=1e-12)
    assert roof.attainable_ms == pytest.approx(speed_of_light.sol_ms(t, t.benchmark, H100, sass=sass), rel=1e-12)
    assert roof.pct_of_sol == pytest.approx(speed_of_light.pct_of_sol(b.ms, 1.0), rel=1e-12)
    assert roof.basis == b.basis and speed_of_light.unit_label(unit) in b.basis


def test_the_sentence_says_which_unit_and_why(tasks):
    sgemm, hgemm, softmax = tasks["sgemm"], tasks["hgemm"], tasks["softmax"]
    ffma = speed_of_light.bound(sgemm, sgemm.benchmark, H100, sass=SASS["sgemm_naive_sm90a"])
    assert ffma.limiter == "compute" and ffma.unit == "fp32"
    assert "fp32 FMA peak 60 TFLOP/s" in ffma.basis and "no tensor-core instructions" in ffma.basis
    tc = speed_of_light.bound(sgemm, sgemm.benchmark, H100, sass=SASS["sgemm_3xtf32_sm80"])
    assert tc.unit == "tf32-tensor" and "tf32 tensor-core peak 375 TFLOP/s" in tc.basis
    assert "3xTF32 split, so the bound counts 3 products per multiply-add" in tc.basis
    assert tc.split == "3xTF32" and tc.products == 3 and "x 3 products (3xTF32)" in tc.basis
    assert tc.ms == pytest.approx(3 * ffma.ms * 60000.0 / 375000.0)          # three products counted
    assert tc.single_ms == pytest.approx(ffma.ms * 60000.0 / 375000.0)        # ... and one, beside it
    assert f"At one product per multiply-add (no split) the bound would be {fmt_ms(tc.single_ms)} ms" in tc.basis
    # the same tf32 code where the tolerance allows plain TF32: one product, no split
    plain = speed_of_light.bound(_tf32_tolerant(sgemm), sgemm.benchmark, H100, sass=SASS["sgemm_3xtf32_sm80"])
    assert plain.products == 1 and plain.split == "" and plain.single_ms is None
    # fp16 tensor cores on fp32 data at fp32 accuracy: a 3xFP16 split
    fp16_split = speed_of_light.split_of(sgemm, SASS["hgemm_wgmma_sm90a"])
    assert fp16_split is not None and (fp16_split.name, fp16_split.products) == ("3xFP16", 3)
    assert speed_of_light.split_of(hgemm, SASS["hgemm_wgmma_sm90a"]) is None     # fp16 data: one product
    assert speed_of_light.split_of(sgemm, SASS["sgemm_naive_sm90a"]) is None     # CUDA cores
    wg = speed_of_light.bound(hgemm, hgemm.benchmark, H100, sass=SASS["hgemm_wgmma_sm90a"])
    assert "fp16 tensor-core instructions" in wg.basis and "3xTF32" not in wg.basis
    mem = speed_of_light.bound(softmax, softmax.benchmark, H100, sass=SASS["sgemm_naive_sm90a"])
    assert mem.limiter == "memory" and mem.basis.startswith(f"Speed of light {fmt_ms(mem.ms)} ms: the task's minimum")
    unread = speed_of_light.bound(sgemm, sgemm.benchmark, H100)
    assert unread.unit == "tf32-tensor" and "machine code was not read" in unread.basis
    lib = speed_of_light.bound(hgemm, hgemm.benchmark, H100, library=True)
    assert lib.unit == "fp16-tensor" and "vendor library" in lib.basis
    bytes_only = speed_of_light.bound(hgemm, hgemm.benchmark, NO_TENSOR_PEAKS, sass=SASS["hgemm_wgmma_sm90a"])
    assert bytes_only.compute_ms is None and "bytes only" in bytes_only.basis
    hist = load_task("histogram").task
    assert "no floating-point work" in speed_of_light.bound(hist, hist.benchmark, H100).basis


def test_an_unmeasured_tensor_peak_leaves_bytes_only_everywhere(tasks):
    """No guessed tensor peak: the judge, the roofline and the sentence all count bytes only."""
    hgemm, sass = tasks["hgemm"], SASS["hgemm_wgmma_sm90a"]
    assert bound_peak(hgemm, NO_TENSOR_PEAKS, sass) is None
    sol = speed_of_light.sol_ms(hgemm, hgemm.benchmark, NO_TENSOR_PEAKS, sass=sass)
    assert sol == pytest.approx(hgemm.bytes_at(hgemm.benchmark) / 3000e9 * 1e3)      # bytes only
    point = roofline_point(hgemm, hgemm.benchmark, 0.213, NO_TENSOR_PEAKS, sass=sass)
    assert point.compute_unit is None and point.attainable_ms == pytest.approx(sol) and point.limiter == "memory"
    # unknown units on such a device: the kernel may run on a unit nobody measured, so no compute term
    assert bound_peak(hgemm, NO_TENSOR_PEAKS, None) is None and bound_peak(tasks["sgemm"], NO_TENSOR_PEAKS, None) is None


def test_unknown_units_and_library_yardsticks(tasks):
    hgemm, sgemm = tasks["hgemm"], tasks["sgemm"]
    # the bound with unknown units: the fastest the data type can run on
    assert bound_peak(sgemm, H100, None).unit == "tf32-tensor" and bound_peak(hgemm, H100, None).unit == "fp16-tensor"
    # a library yardstick: the units the task is written for
    assert bound_peak(sgemm, H100, None, library=True).unit == "fp32"
    assert roofline_point(hgemm, hgemm.benchmark, 0.2, H100, library=True).compute_unit == "fp16-tensor"
    # the tensor unit a GEMM-shaped task may use stays on the point, for the advice (not a second bound)
    point = roofline_point(sgemm, sgemm.benchmark, 2.7, H100, sass=SASS["sgemm_naive_sm90a"])
    assert point.compute_unit == "fp32" and point.tensor_unit == "3xtf32-tensor"


def test_the_evaluators_roofline_reads_the_build_the_judge_read():
    """ToolsMixin.analyze (the roofline the report and the critic show) hands the build's SASS to the roofline,
    so a packed-half hgemm has the judge's roof: the same speed of light and % of it in both places."""
    from cuda_llm.measure.evaluator import ToolsMixin
    from cuda_llm.results import CompileResult, EvalResult, Status, TimingResult

    class Tools(ToolsMixin):
        arch, device = "sm_90", H100

    loaded = load_task("hgemm")
    task, sass = loaded.task, SASS["packed_half"]
    sol = speed_of_light.sol_ms(task, task.benchmark, H100, sass=sass)
    timing = TimingResult(sizes=task.benchmark, median_ms=2.0, min_ms=2.0, mean_ms=2.0, iqr_ms=0.0, rse=0.001,
                          samples_ms=[2.0], repetitions=1, stop_reason="rse", sol_ms=sol,
                          pct_of_sol=speed_of_light.pct_of_sol(sol, 2.0))
    result = EvalResult(task="hgemm", candidate="c", source_hash="h", status=Status.ok, timing=timing,
                        compile=CompileResult(ok=True, arch="sm_90a", source_hash="h", sass=sass))
    roof = Tools().analyze(loaded, result, None).roofline
    assert roof.compute_unit == "fp16x2"
    assert roof.attainable_ms == pytest.approx(timing.sol_ms) and roof.pct_of_sol == pytest.approx(timing.pct_of_sol)

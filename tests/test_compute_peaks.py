"""One home for "which compute peak bounds this kernel" (tools/compute_peaks.py): the units a build runs on,
the rate of each on a device and where it comes from, and the two choices made from them. The judge's
speed of light (the fastest plausible unit, measured peaks only) and the roofline (the unit the kernel runs
on, estimated peaks allowed) give the same roof where they agree and the documented relation where not."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_llm.results import DeviceInfo, SassSummary
from cuda_llm.tasks import load_task
from cuda_llm.tasks.model import Tolerance
from cuda_llm.tools import compute_peaks, speed_of_light
from cuda_llm.tools.compute_peaks import bound_peak, roofline_peaks, unit_peak
from cuda_llm.tools.roofline import roofline_point
from cuda_llm.tools.sass import summarize_sass

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
    assert packed.gflops == 120000.0 and packed.source.startswith("derived") and not packed.estimated
    three = unit_peak(H100, "3xtf32-tensor")
    assert three.gflops == pytest.approx(125000.0) and three.source.startswith("derived")
    assert unit_peak(H100, "fp8-tensor").gflops == 1_500_000.0
    # unmeasured: nothing for the bound, a datasheet estimate (said so) for the roofline
    assert unit_peak(NO_TENSOR_PEAKS, "tf32-tensor") is None and unit_peak(NO_TENSOR_PEAKS, "fp8-tensor") is None
    est = unit_peak(NO_TENSOR_PEAKS, "fp16-tensor", estimate=True)
    assert est.gflops == pytest.approx(60000.0 * 14.8) and est.estimated and "sm_90" in est.source
    est3 = unit_peak(NO_TENSOR_PEAKS, "3xtf32-tensor", estimate=True)
    assert est3.gflops == pytest.approx(60000.0 * 7.4 / 3) and est3.estimated
    sm75 = NO_TENSOR_PEAKS.model_copy(update={"compute_capability": (7, 5), "arch": "sm_75"})
    assert unit_peak(sm75, "fp16-tensor", estimate=True) is None          # no datasheet ratio: no guess
    assert unit_peak(H100.model_copy(update={"peak_fp32_gflops": None}), "fp16x2") is None


def test_fp64_tensor_work_the_bound_an_upper_limit_the_roofline_the_datasheet_rate():
    """DMMA has no peak kernel: the bound may take the fp16 rate (never above the real one), but the
    roofline must not put an fp64 GEMM's roof fifteen times too high."""
    upper, roof = unit_peak(H100, "fp64-tensor"), unit_peak(H100, "fp64-tensor", estimate=True)
    assert upper.gflops == 750000.0 and not upper.estimated
    assert roof.gflops == pytest.approx(750000.0 * 67 / 989) and roof.estimated and "sm_90" in roof.source
    unmeasured = unit_peak(NO_TENSOR_PEAKS, "fp64-tensor", estimate=True)
    assert unmeasured.gflops == pytest.approx(60000.0 * 14.8 * 67 / 989) and unmeasured.estimated
    ada = H100.model_copy(update={"compute_capability": (8, 9), "arch": "sm_89"})
    assert unit_peak(ada, "fp64-tensor", estimate=True) is None            # no fp64 tensor cores there
    assert unit_peak(ada, "fp64-tensor").gflops == 750000.0
    dmma = SassSummary(tensor={"fp64": 4})
    assert roofline_peaks(load_task("sgemm").task, H100, dmma).roof.unit == "fp32"   # fp32 cores are faster


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


# ------------------------------------------------------------------------------------------ the two uses agree
AGREE = [("hgemm", "hgemm_wgmma_sm90a", "fp16-tensor"), ("hgemm", "hgemm_naive_sm90a", "fp32"),
         ("hgemm", "packed_half", "fp16x2"), ("hgemm", "fp8", "fp8-tensor"), ("sgemm", "sgemm_naive_sm90a", "fp32"),
         ("kmeans_assign", "sgemm_naive_sm90a", "fp32"), ("nbody", "sgemm_naive_sm90a", "fp32"),
         ("gelu", "packed_half", "fp16x2")]


@pytest.mark.parametrize("task,build,unit", AGREE, ids=[f"{t}-{b}" for t, b, _ in AGREE])
def test_roofline_and_speed_of_light_choose_the_same_roof(tasks, task, build, unit):
    """Known units, measured peaks, no 3xTF32: one unit, one rate, one speed of light, one % of it."""
    t, sass = tasks[task], SASS[build]
    assert bound_peak(t, H100, sass).unit == unit
    roof = roofline_point(t, t.benchmark, 1.0, H100, sass=sass)
    assert roof.compute_unit == unit and roof.peak_compute_gflops == bound_peak(t, H100, sass).gflops
    sol = speed_of_light.sol_ms(t, t.benchmark, H100, sass=sass)
    assert roof.attainable_ms == pytest.approx(sol, rel=1e-12)
    assert roof.pct_of_sol == pytest.approx(speed_of_light.pct_of_sol(sol, 1.0), rel=1e-12)


def test_a_3xtf32_sgemm_the_bound_at_the_tf32_rate_the_roofline_at_a_third(tasks):
    """The bound counts tf32 instructions at the full tf32 rate (the fastest plausible reading); the roofline
    at the rate 3xTF32 runs at, since sgemm's tolerance forbids plain TF32."""
    sgemm, sass = tasks["sgemm"], SASS["sgemm_3xtf32_sm80"]
    bound, roof = bound_peak(sgemm, H100, sass), roofline_peaks(sgemm, H100, sass).roof
    assert (bound.unit, roof.unit) == ("tf32-tensor", "3xtf32-tensor")
    assert bound.gflops == pytest.approx(3 * roof.gflops)
    point = roofline_point(sgemm, sgemm.benchmark, 2.4, H100, sass=sass)
    assert point.compute_unit == "3xtf32-tensor"
    assert point.attainable_ms == pytest.approx(3 * speed_of_light.sol_ms(sgemm, sgemm.benchmark, H100, sass=sass))
    # where plain TF32 passes, the kernel may well run it: the two agree again
    loose = _tf32_tolerant(sgemm)
    assert roofline_peaks(loose, H100, sass).roof == bound_peak(loose, H100, sass)


def test_an_unmeasured_tensor_peak_the_bound_drops_the_roofline_estimates(tasks):
    hgemm, sass = tasks["hgemm"], SASS["hgemm_wgmma_sm90a"]
    assert bound_peak(hgemm, NO_TENSOR_PEAKS, sass) is None
    sol = speed_of_light.sol_ms(hgemm, hgemm.benchmark, NO_TENSOR_PEAKS, sass=sass)
    assert sol == pytest.approx(hgemm.bytes_at(hgemm.benchmark) / 3000e9 * 1e3)      # bytes only
    point = roofline_point(hgemm, hgemm.benchmark, 0.213, NO_TENSOR_PEAKS, sass=sass)
    assert point.compute_unit == "fp16-tensor" and point.peak_compute_gflops == pytest.approx(60000.0 * 14.8)
    assert "estimated" in point.summary() and point.attainable_ms > sol


def test_the_roofline_never_has_a_faster_roof_than_the_bound(tasks):
    """Over the suite's float tasks, every recorded build and unknown units, on a device with and without
    measured tensor peaks: roofline peak <= bound peak (no compute term: infinitely fast), so the judge's
    speed of light is never above the roofline's. The one documented exception is checked last."""
    checked = 0
    for name, t in tasks.items():
        for device in (H100, NO_TENSOR_PEAKS):
            for build in [*SASS, None]:
                sass = SASS[build] if build else None
                bound, roof = bound_peak(t, device, sass), roofline_peaks(t, device, sass).roof
                assert roof is not None, (name, build)
                assert bound is None or roof.gflops <= bound.gflops * (1 + 1e-12), (name, build, bound, roof)
                sol = speed_of_light.sol_ms(t, t.benchmark, device, sass=sass)
                assert sol <= roofline_point(t, t.benchmark, 1.0, device, sass=sass).attainable_ms * (1 + 1e-12)
                checked += 1
    assert checked == len(tasks) * (2 * len(SASS) + 2)
    # unknown units on a device without tensor peaks: the kernel may run on a unit nobody measured, so the
    # bound has no compute term (a tensor-core kernel must never be called suspect), while the roofline
    # estimates the tensor roof of the half-precision GEMM it is written for
    hgemm, sgemm = tasks["hgemm"], tasks["sgemm"]
    assert bound_peak(hgemm, NO_TENSOR_PEAKS, None) is None and bound_peak(sgemm, NO_TENSOR_PEAKS, None) is None
    assert bound_peak(hgemm, H100, None) is not None
    assert roofline_peaks(hgemm, NO_TENSOR_PEAKS, None).roof.unit == "fp16-tensor"


def test_unknown_units_the_roofline_takes_what_the_task_is_written_for(tasks):
    hgemm, sgemm = tasks["hgemm"], tasks["sgemm"]
    # the units the task is written for: also what the judge assumes for a library yardstick
    for t in (hgemm, sgemm):
        assert roofline_peaks(t, H100, None).roof == bound_peak(t, H100, None, library=True)
    # a profile showing tensor pipes busy switches an fp32 GEMM to the tensor unit it may use
    assert roofline_peaks(sgemm, H100, None, tensor_cores=True).roof.unit == "3xtf32-tensor"
    assert roofline_peaks(hgemm, H100, None, tensor_cores=False).roof.unit == "fp32"
    # the bound with unknown units: the fastest the data type can run on
    assert bound_peak(sgemm, H100, None).unit == "tf32-tensor" and bound_peak(hgemm, H100, None).unit == "fp16-tensor"


def test_a_build_without_tensor_instructions_keeps_the_tensor_roof_for_the_profile(tasks):
    """The SASS says CUDA cores; the diagnosis may still switch to the tensor roof the task may use when the
    profile shows the tensor pipes busy (a library call is not in the SASS)."""
    sgemm = tasks["sgemm"]
    point = roofline_point(sgemm, sgemm.benchmark, 2.7, H100, sass=SASS["sgemm_naive_sm90a"])
    assert point.compute_unit == "fp32" and point.tensor_unit == "3xtf32-tensor"
    assert point.on_tensor_cores().compute_unit == "3xtf32-tensor"
    on_tc = roofline_point(sgemm, sgemm.benchmark, 2.7, H100, sass=SASS["sgemm_3xtf32_sm80"])
    assert on_tc.on_tensor_cores() is on_tc


def test_the_evaluators_roofline_reads_the_build_the_judge_read():
    """ToolsMixin.analyze (the roofline the report and the critic show) hands the build's SASS to the roofline,
    so a packed-half hgemm has the judge's roof: the same speed of light and % of it in both places."""
    from cuda_llm.graph.evaluator import ToolsMixin
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
